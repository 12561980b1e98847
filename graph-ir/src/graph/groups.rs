//! Group nodes, asset references and bypass: the document pass that runs
//! first in `build_program`, above the IR.
//!
//! Contract. In: a graph document whose nodes may be of kind `group` (a
//! body given inline in `group`, or an `asset` of the library found by name
//! and version; groups nest) and may carry `"bypass": true`. Out: the
//! plain graph that means the same, which the rest of the builder sees:
//! - every group node is replaced by its inner nodes, their ids qualified
//!   by the path of groups that hold them (`smoke/advect/step`), so every
//!   later error names the full path; inner wires and exec wires follow;
//! - wires to and from a group's ports are rewired to the inner pins the
//!   ports name (an input port may feed several pins: one wire each);
//! - promoted parameters set on a group node (else their `default`) are
//!   written into the inner node parameter or kernel scalar they name,
//!   after a range check; `ch('node.param')` references inside a group
//!   name its own nodes and are qualified like the ids;
//! - a bypassed kernel is removed: the exec wires into it are joined to the
//!   exec wires out of it, its data wires dropped; bypassing a group
//!   bypasses every kernel inside it (its fields stay, so what is wired
//!   downstream still validates);
//! - frames inside groups are dropped (they only draw in the editor).
//!
//! Errors name the group node (by its full path) and, for assets, the
//! asset. Nothing here looks at kernels' code or the IR.

use super::assets::Library;
use super::document::{split_endpoint, GroupDoc, GroupPortType};
use super::overrides::set_node_param;
use super::{GraphDoc, GraphError, GraphErrors, NodeDoc, WireDoc};
use std::collections::HashMap;

/// The kind of group nodes. It is not in the catalog: no group reaches the
/// builder.
pub const GROUP: &str = "group";

/// How deep groups may nest (an asset that uses itself is refused sooner).
const MAX_DEPTH: usize = 32;

/// Whether the document has anything for this pass to do.
pub fn needs_flattening(doc: &GraphDoc) -> bool {
    doc.nodes.iter().any(|n| n.kind == GROUP || n.bypass)
}

/// The names of a group node's promoted parameters (an inline body's; an
/// asset's are read with the asset).
pub fn promoted_names(n: &NodeDoc) -> Vec<String> {
    match &n.group {
        Some(g) => g.params.iter().map(|p| p.name.clone()).collect(),
        None => vec![],
    }
}

/// The node at `path` (`["smoke", "advect", "step"]`), walking into inline
/// group bodies.
pub fn node_at_path_mut<'a>(doc: &'a mut GraphDoc, path: &[&str]) -> Option<&'a mut NodeDoc> {
    let (first, rest) = path.split_first()?;
    let mut n = doc.node_mut(first)?;
    for id in rest {
        n = n.group.as_mut()?.nodes.iter_mut().find(|c| c.id == *id)?;
    }
    Some(n)
}

/// Like `node_at_path_mut`, but a path that goes into a group referencing
/// an asset first copies the asset's body into the group node (it becomes
/// an inline group with the same interface, flattening to the same graph),
/// so `--set g/inner.param=...` reaches an asset's inner nodes. `Ok(None)`:
/// no such node; the error names the group whose asset cannot be read.
pub fn node_at_path_inlining<'a>(
    doc: &'a mut GraphDoc,
    path: &[&str],
    library: &Library,
) -> Result<Option<&'a mut NodeDoc>, String> {
    let Some((first, rest)) = path.split_first() else {
        return Ok(None);
    };
    let Some(mut n) = doc.node_mut(first) else {
        return Ok(None);
    };
    let mut at = first.to_string();
    for id in rest {
        inline_asset(n, &at, library)?;
        let Some(c) = n
            .group
            .as_mut()
            .and_then(|g| g.nodes.iter_mut().find(|c| c.id == *id))
        else {
            return Ok(None);
        };
        n = c;
        at = format!("{}/{}", at, id);
    }
    Ok(Some(n))
}

/// Copies the body of the asset a group node references into it (an
/// inline group with the same interface); other nodes are left alone.
pub fn inline_asset(n: &mut NodeDoc, path: &str, library: &Library) -> Result<(), String> {
    if n.kind == GROUP && n.group.is_none() {
        if let Some(a) = n.asset.clone() {
            let g = library
                .load(&a)
                .map_err(|m| format!("group '{}': {}", path, m))?;
            n.group = Some(Box::new(g));
            n.asset = None;
        }
    }
    Ok(())
}

/// The plain graph (see the module contract). `library` finds assets.
pub fn flatten(doc: &GraphDoc, library: &Library) -> Result<GraphDoc, GraphErrors> {
    let mut errors = Vec::new();
    let mut stack = Vec::new();
    let body = Body {
        nodes: doc.nodes.clone(),
        wires: doc.wires.clone(),
        exec: doc.exec.clone(),
    };
    let flat = flatten_body(body, "", library, &mut stack, &mut errors);
    if !errors.is_empty() {
        return Err(GraphErrors(errors));
    }
    let mut out = doc.clone();
    out.nodes = flat.nodes;
    out.wires = flat.wires;
    out.exec = flat.exec;
    out.asset = None;
    bypass(&mut out)?;
    Ok(out)
}

struct Body {
    nodes: Vec<NodeDoc>,
    wires: Vec<WireDoc>,
    exec: Vec<WireDoc>,
}

/// A flattened group's ports, in its parent's names.
struct Ports {
    /// name → (type, the pins it feeds)
    inputs: Vec<(String, GroupPortType, Vec<String>)>,
    /// name → (type, the pin it exposes)
    outputs: Vec<(String, GroupPortType, String)>,
    /// The asset the group references (name, version), for messages.
    asset: Option<(String, u32)>,
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Prefix of pseudo-endpoints that carry a group's ports through the
/// flattening of its body (`@in.NAME`, `@out.NAME`); no node id starts so.
const PORT_IN: &str = "@in.";
const PORT_OUT: &str = "@out.";

fn flatten_body(
    body: Body,
    path: &str,
    library: &Library,
    stack: &mut Vec<String>,
    errors: &mut Vec<GraphError>,
) -> Body {
    let mut nodes = Vec::new();
    let mut inner_wires = Vec::new();
    let mut inner_exec = Vec::new();
    let mut ports: HashMap<String, Ports> = HashMap::new();
    // Node-id parameters that name a group's field input port: (the inner
    // node, the group, the port), resolved once this level's wires are.
    let mut pending: Vec<(String, String, String)> = Vec::new();
    // Ids are checked here, per level, before a group's body is expanded:
    // two groups with one id would otherwise surface as duplicates of the
    // nodes inside them (`g2p/k`), not of the group the user duplicated.
    let mut seen = std::collections::HashSet::new();
    for n in body.nodes {
        let full = format!("{}{}", path, n.id);
        if !valid_name(&n.id) {
            errors.push(GraphError::node_msg(
                &full,
                "node ids must be 1-64 letters, digits, `_` or `-` (`/` joins the ids of groups and their nodes)",
            ));
            continue;
        }
        if !seen.insert(n.id.clone()) {
            errors.push(GraphError::node_msg(
                &full,
                "duplicate node id; every node needs its own id",
            ));
            continue;
        }
        if n.kind != GROUP {
            if n.group.is_some() || n.asset.is_some() {
                errors.push(GraphError::node_msg(
                    &full,
                    format!(
                        "only a node of kind 'group' has a \"group\" body or an \"asset\" (this one is '{}')",
                        n.kind
                    ),
                ));
                continue;
            }
            if n.bypass && n.kind != "kernel" {
                errors.push(GraphError::param(
                    &full,
                    "bypass",
                    format!(
                        "only kernel nodes and groups can be bypassed (this one is '{}')",
                        n.kind
                    ),
                ));
                continue;
            }
            nodes.push(n);
            continue;
        }
        if stack.len() >= MAX_DEPTH {
            errors.push(GraphError::node_msg(
                &full,
                format!("groups nest more than {} deep", MAX_DEPTH),
            ));
            continue;
        }
        let asset_ref = n.asset.as_ref().map(|a| (a.name.clone(), a.version));
        let (group, asset) = match (&n.group, &n.asset) {
            (Some(g), None) => ((**g).clone(), None),
            (None, Some(a)) => {
                if stack.contains(&a.name) {
                    errors.push(GraphError::node_msg(
                        &full,
                        format!(
                            "asset '{}' uses itself (through {})",
                            a.name,
                            stack.join(" → ")
                        ),
                    ));
                    continue;
                }
                match library.load(a) {
                    Ok(g) => (g, Some(a.name.clone())),
                    Err(m) => {
                        errors.push(GraphError::node_msg(&full, m));
                        continue;
                    }
                }
            }
            (Some(_), Some(_)) => {
                errors.push(GraphError::node_msg(
                    &full,
                    "a group has either an inline \"group\" body or an \"asset\", not both",
                ));
                continue;
            }
            (None, None) => {
                errors.push(GraphError::node_msg(
                    &full,
                    "a group node needs a \"group\" body or an \"asset\": {\"name\", \"version\"}",
                ));
                continue;
            }
        };
        let Some(p) = group_body(&n, group, &full, errors) else {
            continue;
        };
        stack.push(asset.unwrap_or_else(|| format!("group '{}'", full)));
        let inner = flatten_body(p.0, &format!("{}/", full), library, stack, errors);
        stack.pop();
        let q = |s: &str| format!("{}/{}", n.id, s);
        let mut gp = Ports {
            inputs: p
                .1
                .iter()
                .map(|(name, t)| (name.clone(), *t, vec![]))
                .collect(),
            outputs: vec![],
            asset: asset_ref,
        };
        for (list, out) in [
            (inner.wires, &mut inner_wires),
            (inner.exec, &mut inner_exec),
        ] {
            for w in list {
                if let Some(name) = w.from.strip_prefix(PORT_IN) {
                    if let Some(i) = gp.inputs.iter_mut().find(|i| i.0 == name) {
                        i.2.push(q(&w.to));
                    }
                } else if let Some(name) = w.to.strip_prefix(PORT_OUT) {
                    let t = p.2.iter().find(|o| o.0 == name).map(|o| o.1);
                    if let Some(t) = t {
                        gp.outputs.push((name.to_string(), t, q(&w.from)));
                    }
                } else {
                    out.push(WireDoc {
                        from: q(&w.from),
                        to: q(&w.to),
                    });
                }
            }
        }
        // A port carries what its type says: a "field" port feeding a
        // layout pin (a field node's `layout`) would otherwise be accepted
        // and flatten to a wire of the other kind.
        for (name, t, pins) in &gp.inputs {
            if *t == GroupPortType::Exec {
                continue;
            }
            for pin in pins {
                let (node, port) = split_endpoint(pin);
                let local = node.strip_prefix(&format!("{}/", n.id)).unwrap_or(node);
                let found = inner.nodes.iter().find(|c| c.id == local);
                if let Some(pt) = found.and_then(|c| pin_type(c, port, true)) {
                    if !port_type_fits(*t, pt) {
                        errors.push(GraphError::node_msg(
                            &full,
                            format!(
                                "input port '{}' is declared \"type\": \"{}\" but feeds the {} pin '{}'",
                                name,
                                port_type_name(*t),
                                pt.name(),
                                &pin[n.id.len() + 1..]
                            ),
                        ));
                    }
                }
            }
        }
        let inner_ids: Vec<String> = inner.nodes.iter().map(|c| c.id.clone()).collect();
        let field_ports: Vec<&str> = gp
            .inputs
            .iter()
            .filter(|i| i.1 == GroupPortType::Field)
            .map(|i| i.0.as_str())
            .collect();
        for mut c in inner.nodes {
            c.id = q(&c.id);
            super::refs::qualify(&mut c.params, &n.id);
            let cid = c.id.clone();
            map_node_ids(
                &mut c,
                |param, v| {
                    let port = v.strip_prefix(PORT_IN).unwrap_or(v);
                    if v.strip_prefix(PORT_IN).is_none() && inner_ids.iter().any(|i| i == v) {
                        Ok(q(v))
                    } else if field_ports.contains(&port) {
                        pending.push((cid.clone(), n.id.clone(), port.to_string()));
                        Ok(format!("{}{}/{}", PORT_REF, n.id, port))
                    } else {
                        Err(GraphError::param(
                        &full,
                        param,
                        format!(
                            "'{}' (parameter '{}' of the inner node '{}{}') names '{}', which is neither a node of the group nor one of its field input ports ({}); a node id inside a group names a node of the same group, and a field from outside comes in through an input port",
                            full, param, path, cid, port,
                            if field_ports.is_empty() { "none".to_string() } else { field_ports.join(", ") }
                        ),
                    ))
                    }
                },
                errors,
            );
            nodes.push(c);
        }
        ports.insert(n.id.clone(), gp);
    }
    // The wires of this level, rewired through the groups' ports.
    let mut wires = Vec::new();
    let mut exec = Vec::new();
    // What feeds each group's input port (for port references).
    let mut feeds: HashMap<(String, String), String> = HashMap::new();
    for (list, out, is_exec) in [
        (body.wires, &mut wires, false),
        (body.exec, &mut exec, true),
    ] {
        for w in list {
            let (tn, tp) = split_endpoint(&w.to);
            if !is_exec && ports.contains_key(tn) {
                let src = endpoint_out(&w.from, &ports, false, path).unwrap_or_default();
                let src = if src.starts_with(PORT_IN) {
                    src
                } else {
                    split_endpoint(&src).0.to_string()
                };
                feeds.entry((tn.to_string(), tp.to_string())).or_insert(src);
            }
            let from = match endpoint_out(&w.from, &ports, is_exec, path) {
                Ok(f) => f,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            // What comes into a group's port must be what the port is
            // declared to carry (a layout's `cells` into a "field" port is
            // refused, naming the group and the port).
            if let (false, Some(g)) = (is_exec, ports.get(tn)) {
                let (fnode, fpin) = split_endpoint(&from);
                let src = nodes
                    .iter()
                    .find(|c| c.id == fnode)
                    .and_then(|c| pin_type(c, fpin, false));
                let port = g.inputs.iter().find(|i| i.0 == tp).or_else(|| {
                    let data: Vec<_> = g
                        .inputs
                        .iter()
                        .filter(|i| i.1 != GroupPortType::Exec)
                        .collect();
                    (tp.is_empty() && data.len() == 1).then(|| data[0])
                });
                if let (Some(st), Some(p)) = (src, port) {
                    if !port_type_fits(p.1, st) {
                        errors.push(GraphError::node_msg(
                            &format!("{}{}", path, tn),
                            format!(
                                "input port '{}' is declared \"type\": \"{}\" but is wired a {} ({})",
                                p.0,
                                port_type_name(p.1),
                                st.name(),
                                w.from
                            ),
                        ));
                        continue;
                    }
                }
            }
            let to = match endpoint_in(&w.to, &ports, is_exec, path) {
                Ok(t) => t,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            for t in to {
                out.push(WireDoc {
                    from: from.clone(),
                    to: t,
                });
            }
        }
    }
    wires.extend(inner_wires);
    exec.extend(inner_exec);
    // Port references become the id of the field wired to the port (or a
    // reference to this level's own port, resolved one level up).
    for (cid, group, port) in pending {
        let placeholder = format!("{}{}/{}", PORT_REF, group, port);
        let src = feeds.get(&(group.clone(), port.clone())).cloned();
        let Some(c) = nodes.iter_mut().find(|c| c.id == cid) else {
            continue;
        };
        map_node_ids(
            c,
            |param, v| {
                if v != placeholder {
                    return Ok(v.to_string());
                }
                match &src {
                    Some(s) if !s.is_empty() => Ok(s.clone()),
                    _ => Err(GraphError::param(
                        &format!("{}{}", path, group),
                        param,
                        format!(
                            "the inner node '{}{}' names the input port '{}' in '{}', but no field is wired to that port",
                            path, cid, port, param
                        ),
                    )),
                }
            },
            errors,
        );
    }
    Body { nodes, wires, exec }
}

/// Marks a node-id parameter that names a group's input port until the
/// wire into the port is known (`@port.GROUP/PORT`).
const PORT_REF: &str = "@port.";

/// Rewrites every node id held by `c`'s node-id parameters (see
/// `catalog::node_id_params`) with `f(param, id)`; errors are collected.
fn map_node_ids(
    c: &mut NodeDoc,
    mut f: impl FnMut(&str, &str) -> Result<String, GraphError>,
    errors: &mut Vec<GraphError>,
) {
    use super::catalog::{node_id_params, ParamType};
    for spec in node_id_params(&c.kind) {
        let Some(v) = c.params.get_mut(spec.name) else {
            continue;
        };
        let mut one = |s: &str| match f(spec.name, s) {
            Ok(r) => r,
            Err(e) => {
                errors.push(e);
                s.to_string()
            }
        };
        match (spec.ty, &mut *v) {
            (ParamType::NodeId, serde_json::Value::String(s)) if !s.is_empty() => {
                *s = one(s);
            }
            (ParamType::NodeIds, serde_json::Value::String(s)) => {
                let ids: Vec<String> = s
                    .split(',')
                    .map(str::trim)
                    .filter(|x| !x.is_empty())
                    .map(&mut one)
                    .collect();
                *s = ids.join(", ");
            }
            (ParamType::FieldList, serde_json::Value::Array(a)) => {
                for x in a.iter_mut() {
                    if let serde_json::Value::String(s) = x {
                        *s = one(s);
                    }
                }
            }
            _ => {}
        }
    }
}

type PortList = Vec<(String, GroupPortType)>;

/// Checks a group's interface and parameters and returns its body with the
/// promoted values written in and its ports as pseudo-wires, plus the
/// input and output port lists.
fn group_body(
    n: &NodeDoc,
    mut g: GroupDoc,
    full: &str,
    errors: &mut Vec<GraphError>,
) -> Option<(Body, PortList, PortList)> {
    let before = errors.len();
    // Promoted parameters: every value set on the node must be one.
    for key in n.params.keys() {
        if !g.params.iter().any(|p| &p.name == key) {
            let names: Vec<&str> = g.params.iter().map(|p| p.name.as_str()).collect();
            errors.push(GraphError::param(
                full,
                key,
                format!(
                    "the group has no promoted parameter '{}' (it has: {})",
                    key,
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                ),
            ));
        }
    }
    if n.bypass {
        for c in &mut g.nodes {
            if c.kind == "kernel" || c.kind == GROUP {
                c.bypass = true;
            }
        }
    }
    let mut seen = Vec::new();
    for p in &g.params {
        if !valid_name(&p.name) || seen.contains(&p.name) {
            errors.push(GraphError::node_msg(
                full,
                format!(
                    "promoted parameter '{}' needs a unique name of letters, digits, `_` or `-`",
                    p.name
                ),
            ));
            continue;
        }
        seen.push(p.name.clone());
        let Some((target, param)) = p.target.split_once('.') else {
            errors.push(GraphError::param(
                full,
                &p.name,
                format!(
                    "promoted parameter target '{}' must be NODE.PARAM",
                    p.target
                ),
            ));
            continue;
        };
        let Some(value) = n.params.get(&p.name).cloned().or_else(|| p.default.clone()) else {
            continue;
        };
        if let Some(x) = value.as_f64() {
            let lo = p.min.unwrap_or(f64::NEG_INFINITY);
            let hi = p.max.unwrap_or(f64::INFINITY);
            if !(lo..=hi).contains(&x) {
                errors.push(GraphError::param(
                    full,
                    &p.name,
                    format!(
                        "{} is outside the promoted parameter's range {} to {}",
                        x, lo, hi
                    ),
                ));
                continue;
            }
        }
        let Some(c) = g.nodes.iter_mut().find(|c| c.id == target) else {
            errors.push(GraphError::param(
                full,
                &p.name,
                format!(
                    "promoted parameter target '{}': the group has no node '{}'",
                    p.target, target
                ),
            ));
            continue;
        };
        let inner = format!("{}/{}", full, target);
        if let Err(e) = set_node_param(c, &inner, param, value, "promoted parameter: ") {
            errors.extend(e.0);
        }
    }
    let mut ins = Vec::new();
    let mut outs = Vec::new();
    for (ports, is_input) in [(&g.inputs, true), (&g.outputs, false)] {
        for port in ports.iter() {
            let dup = ins
                .iter()
                .chain(outs.iter())
                .any(|(n, _): &(String, _)| n == &port.name);
            if !valid_name(&port.name) || dup {
                errors.push(GraphError::node_msg(
                    full,
                    format!(
                        "port '{}' needs a unique name of letters, digits, `_` or `-`",
                        port.name
                    ),
                ));
                continue;
            }
            let list = if port.ty == GroupPortType::Exec {
                &mut g.exec
            } else {
                &mut g.wires
            };
            if is_input {
                let named = port.ty == GroupPortType::Field
                    && g.nodes.iter().any(|c| names_port(c, &port.name));
                if (port.to.is_empty() && !named) || port.from.is_some() {
                    errors.push(GraphError::node_msg(
                        full,
                        format!("input port '{}' needs \"to\": the inner pins it feeds (and no \"from\")", port.name),
                    ));
                    continue;
                }
                for t in &port.to {
                    list.push(WireDoc {
                        from: format!("{}{}", PORT_IN, port.name),
                        to: t.clone(),
                    });
                }
                ins.push((port.name.clone(), port.ty));
            } else {
                let (Some(f), true) = (&port.from, port.to.is_empty()) else {
                    errors.push(GraphError::node_msg(
                        full,
                        format!("output port '{}' needs \"from\": the inner pin it exposes (and no \"to\")", port.name),
                    ));
                    continue;
                };
                list.push(WireDoc {
                    from: f.clone(),
                    to: format!("{}{}", PORT_OUT, port.name),
                });
                outs.push((port.name.clone(), port.ty));
            }
        }
    }
    if errors.len() > before {
        return None;
    }
    Some((
        Body {
            nodes: g.nodes,
            wires: g.wires,
            exec: g.exec,
        },
        ins,
        outs,
    ))
}

/// Whether a node-id parameter of `c` names `port` (an input port of its
/// group that passes a field's id, not a pin).
fn names_port(c: &NodeDoc, port: &str) -> bool {
    let mut c = c.clone();
    let mut hit = false;
    map_node_ids(
        &mut c,
        |_, v| {
            hit |= v == port;
            Ok(v.to_string())
        },
        &mut Vec::new(),
    );
    hit
}

/// Who lacks a port, for messages: the asset and its version (a port
/// renamed in a newer version is the usual cause), else the group.
fn interface_of(g: &Ports) -> String {
    match &g.asset {
        Some((name, version)) => format!("asset '{}' v{} has", name, version),
        None => "the group has".to_string(),
    }
}

fn port_names<T>(list: &[(String, GroupPortType, T)]) -> String {
    if list.is_empty() {
        return "none".into();
    }
    list.iter()
        .map(|p| p.0.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The type of pin `port` of node `c` (an input or an output) where its
/// kind's catalog entry says (kernel ports are fields).
fn pin_type(c: &NodeDoc, port: &str, input: bool) -> Option<super::catalog::PortType> {
    use super::catalog::PortType;
    if c.kind == "kernel" {
        return input.then_some(PortType::Field);
    }
    let k = super::catalog::kind(&c.kind)?;
    let spec = if input { k.input(port) } else { k.output(port) };
    spec.map(|p| p.ty)
}

fn port_type_fits(t: GroupPortType, pin: super::catalog::PortType) -> bool {
    use super::catalog::PortType;
    matches!(
        (t, pin),
        (GroupPortType::Field, PortType::Field) | (GroupPortType::Layout, PortType::Layout)
    )
}

fn port_type_name(t: GroupPortType) -> &'static str {
    match t {
        GroupPortType::Field => "field",
        GroupPortType::Layout => "layout",
        GroupPortType::Exec => "exec",
    }
}

fn kind_fits(t: GroupPortType, is_exec: bool) -> bool {
    (t == GroupPortType::Exec) == is_exec
}

/// A wire's `from`, through a group's output port where it names one.
fn endpoint_out(
    e: &str,
    ports: &HashMap<String, Ports>,
    is_exec: bool,
    path: &str,
) -> Result<String, GraphError> {
    let (node, port) = split_endpoint(e);
    let Some(g) = ports.get(node) else {
        return Ok(e.to_string());
    };
    let full = format!("{}{}", path, node);
    let found: Vec<_> = g
        .outputs
        .iter()
        .filter(|o| {
            if port.is_empty() {
                kind_fits(o.1, is_exec)
            } else {
                o.0 == port
            }
        })
        .collect();
    match found.as_slice() {
        [o] if kind_fits(o.1, is_exec) => Ok(o.2.clone()),
        [o] => Err(GraphError::node_msg(
            &full,
            format!(
                "output port '{}' carries {:?}, which a{} wire cannot take",
                o.0,
                o.1,
                if is_exec { "n exec" } else { " data" }
            ),
        )),
        _ => Err(GraphError::node_msg(
            &full,
            format!(
                "{} no output port '{}' for this wire (it has: {})",
                interface_of(g),
                port,
                port_names(&g.outputs)
            ),
        )),
    }
}

/// A wire's `to`, through a group's input port where it names one: the
/// inner pins that port feeds.
fn endpoint_in(
    e: &str,
    ports: &HashMap<String, Ports>,
    is_exec: bool,
    path: &str,
) -> Result<Vec<String>, GraphError> {
    let (node, port) = split_endpoint(e);
    let Some(g) = ports.get(node) else {
        return Ok(vec![e.to_string()]);
    };
    let full = format!("{}{}", path, node);
    let found: Vec<_> = g
        .inputs
        .iter()
        .filter(|i| {
            if port.is_empty() {
                kind_fits(i.1, is_exec)
            } else {
                i.0 == port
            }
        })
        .collect();
    match found.as_slice() {
        [i] if kind_fits(i.1, is_exec) => Ok(i.2.clone()),
        [i] => Err(GraphError::node_msg(
            &full,
            format!(
                "input port '{}' takes {:?}, which a{} wire cannot give",
                i.0,
                i.1,
                if is_exec { "n exec" } else { " data" }
            ),
        )),
        _ => Err(GraphError::node_msg(
            &full,
            format!(
                "{} no input port '{}' for this wire (it has: {})",
                interface_of(g),
                port,
                port_names(&g.inputs)
            ),
        )),
    }
}

/// Removes bypassed kernels from a plain graph: exec wires into one are
/// joined to the exec wires out of it, its data wires dropped.
fn bypass(doc: &mut GraphDoc) -> Result<(), GraphErrors> {
    while let Some(i) = doc.nodes.iter().position(|n| n.bypass) {
        let id = doc.nodes.remove(i).id;
        let is = |e: &str| split_endpoint(e).0 == id;
        let outs: Vec<String> = doc
            .exec
            .iter()
            .filter(|w| is(&w.from))
            .map(|w| w.to.clone())
            .collect();
        let mut exec = Vec::new();
        for w in std::mem::take(&mut doc.exec) {
            if is(&w.to) {
                for t in &outs {
                    exec.push(WireDoc {
                        from: w.from.clone(),
                        to: t.clone(),
                    });
                }
            } else if !is(&w.from) {
                exec.push(w);
            }
        }
        doc.exec = exec;
        doc.wires.retain(|w| !is(&w.from) && !is(&w.to));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn lib() -> Library {
        Library::new(vec![])
    }

    fn doc(v: Value) -> GraphDoc {
        GraphDoc::from_value(v).unwrap()
    }

    #[test]
    fn ports_promoted_parameters_and_nesting_flatten_to_qualified_ids() {
        let d = doc(json!({"format": "weft-graph", "version": 1, "nodes": [
            {"id": "f", "kind": "field", "params": {"type": "f32"}},
            {"id": "start", "kind": "on_start"},
            {"id": "g", "kind": "group", "params": {"rate": 2.0}, "group": {
                "inputs": [{"name": "x", "type": "field", "to": ["inner.x"]},
                           {"name": "run", "type": "exec", "to": ["inner.run"]}],
                "params": [{"name": "rate", "target": "inner.rate", "min": 0, "max": 4}],
                "nodes": [{"id": "inner", "kind": "group", "group": {
                    "inputs": [{"name": "x", "type": "field", "to": ["k.x"]},
                               {"name": "run", "type": "exec", "to": ["k"]}],
                    "params": [{"name": "rate", "target": "k.a"}],
                    "nodes": [{"id": "k", "kind": "kernel", "params": {"range": [4], "scalars": {"a": 1.0},
                        "code": "fn kernel(i: i32) { x[i] = a; }"}}]}}]}}],
            "exec": [{"from": "start.then", "to": "g"}],
            "wires": [{"from": "f.field", "to": "g.x"}]}));
        let f = flatten(&d, &lib()).unwrap();
        let ids: Vec<&str> = f.nodes.iter().map(|n| n.id.as_str()).collect();
        assert_eq!(ids, ["f", "start", "g/inner/k"]);
        assert_eq!(f.nodes[2].params["scalars"]["a"], json!(2.0));
        assert_eq!(
            f.wires,
            vec![WireDoc {
                from: "f.field".into(),
                to: "g/inner/k.x".into()
            }]
        );
        assert_eq!(
            f.exec,
            vec![WireDoc {
                from: "start.then".into(),
                to: "g/inner/k".into()
            }]
        );
    }

    #[test]
    fn errors_name_the_group_and_its_path() {
        let base = json!({"format": "weft-graph", "version": 1, "nodes": [
            {"id": "g", "kind": "group", "params": {"rate": 9.0}, "group": {
                "params": [{"name": "rate", "target": "k.a", "max": 4}],
                "nodes": [{"id": "k", "kind": "kernel"}]}}]});
        let e = flatten(&doc(base), &lib()).unwrap_err().to_string();
        assert!(e.contains("'g'") && e.contains("outside"), "{}", e);
        let missing = json!({"format": "weft-graph", "version": 1, "nodes": [
            {"id": "g", "kind": "group", "asset": {"name": "nope", "version": 3}}]});
        let e = flatten(&doc(missing), &lib()).unwrap_err().to_string();
        assert!(e.contains("'g'") && e.contains("nope"), "{}", e);
        let wire = json!({"format": "weft-graph", "version": 1, "nodes": [
            {"id": "f", "kind": "field"},
            {"id": "g", "kind": "group", "group": {"nodes": [{"id": "k", "kind": "kernel"}]}}],
            "wires": [{"from": "f.field", "to": "g.nope"}]});
        let e = flatten(&doc(wire), &lib()).unwrap_err().to_string();
        assert!(e.contains("no input port 'nope'"), "{}", e);
    }

    #[test]
    fn bypass_joins_exec_wires_around_the_kernel() {
        let d = doc(json!({"format": "weft-graph", "version": 1, "nodes": [
            {"id": "s", "kind": "on_start"}, {"id": "f", "kind": "field"},
            {"id": "a", "kind": "kernel"}, {"id": "b", "kind": "kernel", "bypass": true},
            {"id": "c", "kind": "kernel"}],
            "wires": [{"from": "f.field", "to": "b.x"}, {"from": "f.field", "to": "c.x"}],
            "exec": [{"from": "s.then", "to": "a"}, {"from": "a.then", "to": "b"}, {"from": "b.then", "to": "c"}]}));
        let f = flatten(&d, &lib()).unwrap();
        assert!(f.node("b").is_none());
        assert_eq!(f.wires.len(), 1);
        assert_eq!(
            f.exec[1],
            WireDoc {
                from: "a.then".into(),
                to: "c".into()
            }
        );
        let bad = doc(json!({"format": "weft-graph", "version": 1, "nodes": [
            {"id": "f", "kind": "field", "bypass": true}]}));
        assert!(flatten(&bad, &lib())
            .unwrap_err()
            .to_string()
            .contains("only kernel nodes"));
    }

    #[test]
    fn a_port_carries_what_its_type_says() {
        // A "field" port wired a layout: named by group and port.
        let d = doc(json!({"format": "weft-graph", "version": 1, "nodes": [
            {"id": "grid", "kind": "dense", "params": {"shape": [4]}},
            {"id": "g", "kind": "group", "group": {
                "inputs": [{"name": "cells", "type": "field", "to": ["T.layout"]}],
                "nodes": [{"id": "T", "kind": "field", "params": {"type": "f32"}}]}}],
            "wires": [{"from": "grid.cells", "to": "g.cells"}]}));
        let e = flatten(&d, &lib()).unwrap_err().to_string();
        assert!(
            e.contains("node 'g'")
                && e.contains("input port 'cells'")
                && e.contains("\"type\": \"field\""),
            "{}",
            e
        );
        // Fed to a layout pin inside, even with nothing wired outside.
        let d = doc(json!({"format": "weft-graph", "version": 1, "nodes": [
            {"id": "g", "kind": "group", "group": {
                "inputs": [{"name": "cells", "type": "field", "to": ["T.layout"]}],
                "nodes": [{"id": "T", "kind": "field", "params": {"type": "f32"}}]}}]}));
        let e = flatten(&d, &lib()).unwrap_err().to_string();
        assert!(
            e.contains("node 'g'") && e.contains("'cells'") && e.contains("layout pin 'T.layout'"),
            "{}",
            e
        );
        // Declared "layout", it is the same graph written flat.
        let d = doc(json!({"format": "weft-graph", "version": 1, "nodes": [
            {"id": "grid", "kind": "dense", "params": {"shape": [4]}},
            {"id": "g", "kind": "group", "group": {
                "inputs": [{"name": "cells", "type": "layout", "to": ["T.layout"]}],
                "nodes": [{"id": "T", "kind": "field", "params": {"type": "f32"}}]}}],
            "wires": [{"from": "grid.cells", "to": "g.cells"}]}));
        let f = flatten(&d, &lib()).unwrap();
        assert_eq!(
            f.wires,
            vec![WireDoc {
                from: "grid.cells".into(),
                to: "g/T.layout".into()
            }]
        );
    }

    #[test]
    fn a_missing_port_of_an_asset_names_the_asset_and_its_version() {
        let dir = std::env::temp_dir().join(format!("weft-groups-asset-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("emitter.v2.json"),
            json!({"format": "weft-graph", "version": 1,
                "asset": {"name": "emitter", "version": 2,
                    "inputs": [{"name": "src", "type": "field", "to": ["k.src"]},
                               {"name": "y", "type": "field", "to": ["k.y"]},
                               {"name": "run", "type": "exec", "to": ["k"]}]},
                "nodes": [{"id": "k", "kind": "kernel", "params": {"range": [4],
                    "code": "fn kernel(i: i32) { y[i] = src[i]; }"}}]})
            .to_string(),
        )
        .unwrap();
        let d = doc(json!({"format": "weft-graph", "version": 1, "nodes": [
            {"id": "f", "kind": "field"},
            {"id": "u1", "kind": "group", "asset": {"name": "emitter", "version": 2}}],
            "wires": [{"from": "f.field", "to": "u1.x"}]}));
        let e = flatten(&d, &Library::new(vec![dir.clone()]))
            .unwrap_err()
            .to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            e.contains("node 'u1'")
                && e.contains("asset 'emitter' v2 has no input port 'x'")
                && e.contains("(it has: src, y, run)"),
            "{}",
            e
        );
    }
}
