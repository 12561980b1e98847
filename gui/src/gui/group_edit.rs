//! Document transforms of group editing, without the GUI: pack nodes into
//! a group (Ctrl+G), unpack a group (Ctrl+Alt+G), a group's body as a
//! document the editor can show (with its ports as two boundary nodes) and
//! back, and promoting an inner parameter onto the group node.
//!
//! Every transform is a pure function of the document: the grouped (or
//! ungrouped) document builds to the same program as the one it came from
//! (the tests compare the fields a run computes, bit for bit).

use super::model::{pins, Pin, PinKind};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use weft_ir::graph::assets::Library;
use weft_ir::graph::catalog::{self, PortType};
use weft_ir::graph::document::split_endpoint;
use weft_ir::graph::groups::GROUP;
use weft_ir::graph::scalars::ScalarDecl;
use weft_ir::graph::{
    GraphDoc, GroupDoc, GroupPort, GroupPortType, NodeDoc, PromotedParam, WireDoc,
};

/// The boundary node that shows a group's input ports inside its body
/// (Houdini's subnet inputs): one output pin per port.
pub const INPUTS: &str = "@inputs";
/// The boundary node that shows a group's output ports inside its body.
pub const OUTPUTS: &str = "@outputs";

/// Whether `id` names one of the boundary nodes of an entered group.
pub fn is_boundary(id: &str) -> bool {
    id == INPUTS || id == OUTPUTS
}

fn port_type(k: PinKind) -> GroupPortType {
    match k {
        PinKind::Exec => GroupPortType::Exec,
        PinKind::Data(PortType::Layout) => GroupPortType::Layout,
        PinKind::Data(_) => GroupPortType::Field,
    }
}

fn pin_kind(t: GroupPortType) -> PinKind {
    match t {
        GroupPortType::Field => PinKind::Data(PortType::Field),
        GroupPortType::Layout => PinKind::Data(PortType::Layout),
        GroupPortType::Exec => PinKind::Exec,
    }
}

/// The kind of the pin `endpoint` names on `doc`'s nodes (an empty port is
/// the node's first pin on that side; an asset's pins are read from `lib`).
fn endpoint_kind(
    doc: &GraphDoc,
    endpoint: &str,
    output: bool,
    exec: bool,
    lib: &Library,
) -> PinKind {
    if exec {
        return PinKind::Exec;
    }
    let (node, port) = split_endpoint(endpoint);
    let found = doc.node(node).and_then(|n| {
        let (ins, outs) = node_pins(n, lib);
        let list = if output { outs } else { ins };
        list.into_iter()
            .find(|p| port.is_empty() || p.name == port)
            .map(|p| p.kind)
    });
    found.unwrap_or(PinKind::Data(PortType::Field))
}

/// Pins of a node, boundary nodes included (an asset's from `lib`).
pub fn node_pins(n: &NodeDoc, lib: &Library) -> (Vec<Pin>, Vec<Pin>) {
    boundary_pins(n).unwrap_or_else(|| pins(n, lib))
}

/// The pins of a boundary node: the inputs node has an output pin per
/// input port, the outputs node an input pin per output port.
pub fn boundary_pins(n: &NodeDoc) -> Option<(Vec<Pin>, Vec<Pin>)> {
    if !is_boundary(&n.kind) {
        return None;
    }
    let list: Vec<Pin> = boundary_ports(n)
        .iter()
        .map(|p| Pin {
            name: p.name.clone(),
            kind: pin_kind(p.ty),
        })
        .collect();
    Some(if n.kind == INPUTS {
        (vec![], list)
    } else {
        (list, vec![])
    })
}

fn boundary_ports(n: &NodeDoc) -> Vec<GroupPort> {
    n.params
        .get("ports")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}

/// A name of letters, digits and `_` from `s`, unique among `taken`.
fn unique_name(s: &str, taken: &mut HashSet<String>) -> String {
    let base: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(48)
        .collect();
    let base = if base.is_empty() { "port".into() } else { base };
    let name = (1..)
        .map(|i| {
            if i == 1 {
                base.clone()
            } else {
                format!("{}_{}", base, i)
            }
        })
        .find(|n| !taken.contains(n))
        .expect("unbounded");
    taken.insert(name.clone());
    name
}

/// The id the next group gets: `group1`, `group2`, ...
pub fn fresh_group_id(doc: &GraphDoc) -> String {
    (1..)
        .map(|i| format!("group{}", i))
        .find(|id| doc.node(id).is_none())
        .expect("unbounded")
}

/// Packs the nodes `ids` into a new group node `group_id` in their place
/// (Ctrl+G). Wires between the packed nodes go inside; a wire that crosses
/// the boundary becomes a port of the group typed as the wire was (one
/// input port per outside source, one output port per inside pin), and the
/// outside wire is rewired to the port. Inner ids stay as they were; the
/// group lands at the centre of the packed nodes. The pins of asset nodes
/// among them are read from `lib`.
pub fn group_nodes(
    doc: &GraphDoc,
    ids: &[String],
    group_id: &str,
    lib: &Library,
) -> Result<GraphDoc, String> {
    let set: HashSet<&str> = ids
        .iter()
        .map(String::as_str)
        .filter(|id| !is_boundary(id))
        .collect();
    if set.is_empty() {
        return Err("select the nodes to group first".into());
    }
    for id in &set {
        if doc.node(id).is_none() {
            return Err(format!("no node '{}' to group", id));
        }
    }
    if doc.node(group_id).is_some() {
        return Err(format!("a node '{}' exists already", group_id));
    }
    let inside = |e: &str| set.contains(split_endpoint(e).0);
    let mut body = GroupDoc {
        doc: String::new(),
        inputs: vec![],
        outputs: vec![],
        params: vec![],
        nodes: doc
            .nodes
            .iter()
            .filter(|n| set.contains(n.id.as_str()))
            .cloned()
            .collect(),
        wires: vec![],
        exec: vec![],
        frames: vec![],
    };
    let mut out = doc.clone();
    out.nodes.retain(|n| !set.contains(n.id.as_str()));
    out.wires.clear();
    out.exec.clear();
    let mut taken = HashSet::new();
    // Outside source (or inside pin) → the port made for it.
    let mut in_ports: HashMap<(String, bool), usize> = HashMap::new();
    let mut out_ports: HashMap<(String, bool), usize> = HashMap::new();
    for (list, exec) in [(&doc.wires, false), (&doc.exec, true)] {
        for w in list {
            let (fi, ti) = (inside(&w.from), inside(&w.to));
            let parent = if exec { &mut out.exec } else { &mut out.wires };
            match (fi, ti) {
                (true, true) => {
                    let inner = if exec {
                        &mut body.exec
                    } else {
                        &mut body.wires
                    };
                    inner.push(w.clone());
                }
                (false, false) => parent.push(w.clone()),
                (false, true) => {
                    let k = (w.from.clone(), exec);
                    let i = match in_ports.get(&k) {
                        Some(&i) => i,
                        None => {
                            let ty = port_type(endpoint_kind(doc, &w.to, false, exec, lib));
                            let (node, port) = split_endpoint(&w.from);
                            let hint = match (ty, port) {
                                (GroupPortType::Exec, _) => "run",
                                (GroupPortType::Field, _) | (_, "") => node,
                                (_, p) => p,
                            };
                            body.inputs.push(GroupPort {
                                name: unique_name(hint, &mut taken),
                                ty,
                                to: vec![],
                                from: None,
                                doc: String::new(),
                            });
                            parent.push(WireDoc {
                                from: w.from.clone(),
                                to: format!("{}.{}", group_id, body.inputs.last().unwrap().name),
                            });
                            in_ports.insert(k, body.inputs.len() - 1);
                            body.inputs.len() - 1
                        }
                    };
                    body.inputs[i].to.push(w.to.clone());
                }
                (true, false) => {
                    let k = (w.from.clone(), exec);
                    let i = match out_ports.get(&k) {
                        Some(&i) => i,
                        None => {
                            let ty = port_type(endpoint_kind(doc, &w.from, true, exec, lib));
                            let (node, port) = split_endpoint(&w.from);
                            let hint = match ty {
                                GroupPortType::Exec => "done".to_string(),
                                GroupPortType::Field => node.to_string(),
                                GroupPortType::Layout => {
                                    if port.is_empty() {
                                        node.to_string()
                                    } else {
                                        format!("{}_{}", node, port)
                                    }
                                }
                            };
                            body.outputs.push(GroupPort {
                                name: unique_name(&hint, &mut taken),
                                ty,
                                to: vec![],
                                from: Some(w.from.clone()),
                                doc: String::new(),
                            });
                            out_ports.insert(k, body.outputs.len() - 1);
                            body.outputs.len() - 1
                        }
                    };
                    parent.push(WireDoc {
                        from: format!("{}.{}", group_id, body.outputs[i].name),
                        to: w.to.clone(),
                    });
                }
            }
        }
    }
    let n = body.nodes.len() as f32;
    let centre = body.nodes.iter().fold([0.0f32; 2], |a, c| {
        [a[0] + c.pos[0] / n, a[1] + c.pos[1] / n]
    });
    // The group takes the place of the first packed node in the list, so
    // the order of the remaining nodes is kept.
    let at = doc
        .nodes
        .iter()
        .position(|n| set.contains(n.id.as_str()))
        .map(|first| {
            doc.nodes[..first]
                .iter()
                .filter(|n| !set.contains(n.id.as_str()))
                .count()
        })
        .unwrap_or(out.nodes.len());
    out.nodes.insert(
        at,
        NodeDoc {
            id: group_id.to_string(),
            kind: GROUP.into(),
            pos: centre,
            group: Some(Box::new(body)),
            ..Default::default()
        },
    );
    Ok(out)
}

/// Unpacks group node `id` into its parent (Ctrl+Alt+G): its nodes come
/// back (an id taken outside gets a fresh one), the wires to its ports are
/// rewired to the inner pins, promoted values are written into their inner
/// parameters, and a bypassed group bypasses its kernels. An asset's body
/// is read from `lib`.
pub fn ungroup(doc: &GraphDoc, id: &str, lib: &Library) -> Result<GraphDoc, String> {
    let g = doc
        .node(id)
        .filter(|n| n.kind == GROUP)
        .ok_or_else(|| format!("'{}' is not a group node", id))?;
    let body = super::group_pins::interface(g, lib)
        .ok_or_else(|| format!("group '{}': its asset cannot be read", id))?;
    let mut inner = body.nodes.clone();
    // Promoted values (set on the group, else their default).
    for p in &body.params {
        let Some(v) = g.params.get(&p.name).cloned().or_else(|| p.default.clone()) else {
            continue;
        };
        let Some((target, param)) = p.target.split_once('.') else {
            return Err(format!(
                "group '{}': promoted target '{}' is not NODE.PARAM",
                id, p.target
            ));
        };
        let c = inner
            .iter_mut()
            .find(|c| c.id == target)
            .ok_or_else(|| format!("group '{}': no inner node '{}'", id, target))?;
        weft_ir::graph::overrides::set_node_param(c, &format!("{}/{}", id, target), param, v, "")
            .map_err(|e| e.to_string())?;
    }
    // Fresh ids for inner ids taken outside.
    let mut rename: HashMap<String, String> = HashMap::new();
    let mut taken: HashSet<String> = doc.nodes.iter().map(|n| n.id.clone()).collect();
    taken.remove(id);
    for c in &inner {
        if taken.contains(&c.id) {
            let fresh = (2..)
                .map(|i| format!("{}_{}", c.id, i))
                .find(|f| !taken.contains(f) && !inner.iter().any(|o| &o.id == f))
                .expect("unbounded");
            rename.insert(c.id.clone(), fresh.clone());
        }
        taken.insert(rename.get(&c.id).unwrap_or(&c.id).clone());
    }
    let re = |e: &str| -> String {
        let (n, p) = split_endpoint(e);
        match rename.get(n) {
            Some(r) if p.is_empty() => r.clone(),
            Some(r) => format!("{}.{}", r, p),
            None => e.to_string(),
        }
    };
    // Keep the body where the group node was: its centre at the node.
    let k = inner.len().max(1) as f32;
    let centre = inner.iter().fold([0.0f32; 2], |a, c| {
        [a[0] + c.pos[0] / k, a[1] + c.pos[1] / k]
    });
    let shift = [g.pos[0] - centre[0], g.pos[1] - centre[1]];
    for c in &mut inner {
        if let Some(r) = rename.get(&c.id) {
            c.id = r.clone();
        }
        c.pos = [c.pos[0] + shift[0], c.pos[1] + shift[1]];
        if g.bypass && (c.kind == "kernel" || c.kind == GROUP) {
            c.bypass = true;
        }
    }
    let mut out = doc.clone();
    let at = out
        .nodes
        .iter()
        .position(|n| n.id == id)
        .expect("found above");
    out.nodes.splice(at..=at, inner);
    let port_of = |list: &[GroupPort], port: &str, exec: bool| -> Option<GroupPort> {
        list.iter()
            .find(|p| {
                if port.is_empty() {
                    (p.ty == GroupPortType::Exec) == exec
                } else {
                    p.name == port
                }
            })
            .cloned()
    };
    for (exec, list, inner_list) in [
        (false, &doc.wires, &body.wires),
        (true, &doc.exec, &body.exec),
    ] {
        let mut new = Vec::new();
        for w in list {
            let (fnode, fport) = split_endpoint(&w.from);
            let (tnode, tport) = split_endpoint(&w.to);
            let from = if fnode == id {
                match port_of(&body.outputs, fport, exec).and_then(|p| p.from) {
                    Some(f) => re(&f),
                    None => continue,
                }
            } else {
                w.from.clone()
            };
            if tnode == id {
                if let Some(p) = port_of(&body.inputs, tport, exec) {
                    for t in &p.to {
                        new.push(WireDoc {
                            from: from.clone(),
                            to: re(t),
                        });
                    }
                }
            } else {
                new.push(WireDoc {
                    from,
                    to: w.to.clone(),
                });
            }
        }
        for w in inner_list {
            new.push(WireDoc {
                from: re(&w.from),
                to: re(&w.to),
            });
        }
        if exec {
            out.exec = new;
        } else {
            out.wires = new;
        }
    }
    for f in &body.frames {
        let mut f = f.clone();
        f.rect[0] += shift[0];
        f.rect[1] += shift[1];
        while out.frames.iter().any(|o| o.id == f.id) {
            f.id = format!("{}_{}", f.id, id);
        }
        out.frames.push(f);
    }
    Ok(out)
}

/// A group's body as a document the editor shows: its nodes, wires and
/// frames, plus the two boundary nodes that carry its ports (wires to and
/// from them are the ports' inner pins). `None` for an asset reference (its
/// body is edited in the asset's own file).
pub fn body_doc(group: &NodeDoc, template: &GraphDoc) -> Option<GraphDoc> {
    let g = group.group.as_ref()?;
    let mut doc = template.clone();
    doc.asset = None;
    doc.nodes = g.nodes.clone();
    doc.wires = g.wires.clone();
    doc.exec = g.exec.clone();
    doc.frames = g.frames.clone();
    // The boundary nodes sit left and right of the body, clear of its
    // widest nodes (a kernel with its code button and scalars is wide).
    let (mut x0, mut x1, mut y) = (f32::MAX, f32::MIN, 0.0);
    for n in &g.nodes {
        let width = if n.params.contains_key("code") {
            300.0
        } else {
            180.0
        };
        x0 = x0.min(n.pos[0]);
        x1 = x1.max(n.pos[0] + width);
        y += n.pos[1] / g.nodes.len() as f32;
    }
    if g.nodes.is_empty() {
        (x0, x1) = (0.0, 0.0);
    }
    let boundary = |id: &str, ports: &[GroupPort], x: f32| NodeDoc {
        id: id.into(),
        kind: id.into(),
        pos: [x, y],
        params: [(
            "ports".to_string(),
            serde_json::to_value(ports).expect("ports serialise"),
        )]
        .into_iter()
        .collect(),
        ..Default::default()
    };
    doc.nodes.insert(0, boundary(INPUTS, &g.inputs, x0 - 320.0));
    doc.nodes.push(boundary(OUTPUTS, &g.outputs, x1 + 120.0));
    for p in &g.inputs {
        let list = if p.ty == GroupPortType::Exec {
            &mut doc.exec
        } else {
            &mut doc.wires
        };
        for t in &p.to {
            list.push(WireDoc {
                from: format!("{}.{}", INPUTS, p.name),
                to: t.clone(),
            });
        }
    }
    for p in &g.outputs {
        if let Some(f) = &p.from {
            let list = if p.ty == GroupPortType::Exec {
                &mut doc.exec
            } else {
                &mut doc.wires
            };
            list.push(WireDoc {
                from: f.clone(),
                to: format!("{}.{}", OUTPUTS, p.name),
            });
        }
    }
    Some(doc)
}

/// Writes a body document (from `body_doc`, edited) back into the group
/// node: the wires to the boundary nodes become the ports' pins again.
pub fn write_body(group: &mut NodeDoc, body: &GraphDoc) {
    let Some(g) = group.group.as_mut() else {
        return;
    };
    let ports_of = |id: &str| body.node(id).map(boundary_ports).unwrap_or_default();
    let mut inputs = ports_of(INPUTS);
    let mut outputs = ports_of(OUTPUTS);
    for p in &mut inputs {
        p.to.clear();
    }
    for p in &mut outputs {
        p.from = None;
    }
    let mut wires = vec![];
    let mut exec = vec![];
    for (list, out) in [(&body.wires, &mut wires), (&body.exec, &mut exec)] {
        for w in list {
            let (fnode, fport) = split_endpoint(&w.from);
            let (tnode, tport) = split_endpoint(&w.to);
            if fnode == INPUTS {
                if let Some(p) = inputs.iter_mut().find(|p| p.name == fport) {
                    p.to.push(w.to.clone());
                }
            } else if tnode == OUTPUTS {
                if let Some(p) = outputs.iter_mut().find(|p| p.name == tport) {
                    p.from = Some(w.from.clone());
                }
            } else {
                out.push(w.clone());
            }
        }
    }
    g.inputs = inputs;
    g.outputs = outputs;
    g.nodes = body
        .nodes
        .iter()
        .filter(|n| !is_boundary(&n.kind))
        .cloned()
        .collect();
    g.wires = wires;
    g.exec = exec;
    g.frames = body.frames.clone();
}

/// The promoted parameter of `group` that sets `node.param`, if any.
pub fn promoted<'a>(group: &'a GroupDoc, node: &str, param: &str) -> Option<&'a PromotedParam> {
    let target = format!("{}.{}", node, param);
    group.params.iter().find(|p| p.target == target)
}

/// Promotes `node.param` (a parameter of the node's kind, or a kernel
/// scalar) onto the group: named `node_param` (made unique), its default
/// the node's current value, its range and doc from the catalog or the
/// scalar's declaration. False when it is promoted already.
pub fn promote(group: &mut GroupDoc, node: &str, param: &str) -> Result<bool, String> {
    if promoted(group, node, param).is_some() {
        return Ok(false);
    }
    let n = group
        .nodes
        .iter()
        .find(|n| n.id == node)
        .ok_or_else(|| format!("the group has no node '{}'", node))?;
    let scalar = n
        .params
        .get("scalars")
        .and_then(Value::as_object)
        .and_then(|s| s.get(param));
    let (value, min, max, doc) = if let Some(decl) = scalar {
        let d = ScalarDecl::parse(param, decl).map_err(|e| format!("'{}': {}", node, e))?;
        let v = d.default.map(|x| {
            if d.ty == weft_ir::types::Type::I32 {
                Value::from(x as i64)
            } else {
                Value::from(x)
            }
        });
        (v, d.min, d.max, d.doc)
    } else {
        let spec = catalog::kind(&n.kind)
            .and_then(|k| k.params.iter().find(|p| p.name == param))
            .ok_or_else(|| format!("'{}' has no parameter '{}'", node, param))?;
        let v = n
            .params
            .get(param)
            .cloned()
            .or_else(|| spec.default_value());
        (
            v,
            spec.range.map(|r| r.0),
            spec.range.map(|r| r.1),
            spec.doc.to_string(),
        )
    };
    let mut taken: HashSet<String> = group.params.iter().map(|p| p.name.clone()).collect();
    let name = unique_name(&format!("{}_{}", node, param), &mut taken);
    group.params.push(PromotedParam {
        name,
        target: format!("{}.{}", node, param),
        default: value.filter(|v| !v.is_null()),
        min,
        max,
        doc,
    });
    Ok(true)
}

/// Un-promotes `node.param`: the inner node keeps the value the group gave
/// it (`value`, the group node's own setting, else the default), and the
/// group node's setting is removed. False when it was not promoted.
pub fn unpromote(group_node: &mut NodeDoc, node: &str, param: &str) -> Result<bool, String> {
    let gid = group_node.id.clone();
    let Some(g) = group_node.group.as_mut() else {
        return Ok(false);
    };
    let Some(i) = g
        .params
        .iter()
        .position(|p| p.target == format!("{}.{}", node, param))
    else {
        return Ok(false);
    };
    let p = g.params.remove(i);
    let value = group_node.params.remove(&p.name).or(p.default);
    if let (Some(v), Some(c)) = (value, g.nodes.iter_mut().find(|c| c.id == node)) {
        weft_ir::graph::overrides::set_node_param(c, &format!("{}/{}", gid, node), param, v, "")
            .map_err(|e| e.to_string())?;
    }
    Ok(true)
}

#[cfg(test)]
#[path = "group_edit_tests.rs"]
mod tests;
