//! Loading a graph file with the driver's overrides (`--set`, `--init`)
//! into a `Program`. The CLI and tests call this; the runtime never does
//! (it sees only the IR).

use super::scalars::set_value;
use super::{catalog, GraphDoc, GraphError, GraphErrors};
use crate::ir::Program;
use serde_json::Value;
use std::path::Path;

#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `NODE.PARAM=VALUE`: a node parameter (VALUE as JSON, else a string) or a kernel scalar.
    pub sets: Vec<String>,
    /// `FIELD=FILE.npy`: initial data for a field node (path relative to the working directory).
    pub inits: Vec<String>,
}

pub fn read_doc(path: &Path) -> Result<GraphDoc, GraphErrors> {
    GraphDoc::load(path)
}

fn usage(m: String) -> GraphErrors {
    GraphErrors(vec![GraphError::Document { message: m }])
}

/// Applies overrides to the document (so they are validated like the file
/// itself), finding assets from the working directory; see
/// `apply_overrides_at`.
pub fn apply_overrides(doc: &mut GraphDoc, o: &Overrides) -> Result<(), GraphErrors> {
    apply_overrides_at(doc, o, Path::new("."))
}

/// Applies overrides to the document of a graph in `base_dir`. A `--set`
/// into an asset group's inner node (`g/inner.param=...`) copies the
/// asset's body into the group node first (see
/// `groups::node_at_path_inlining`).
pub fn apply_overrides_at(
    doc: &mut GraphDoc,
    o: &Overrides,
    base_dir: &Path,
) -> Result<(), GraphErrors> {
    apply_overrides_with(doc, o, &super::assets::Library::for_graph(base_dir))
}

/// Applies overrides, finding assets in `library` (see
/// `apply_overrides_at`; `graph::source::GraphSource::apply`).
pub fn apply_overrides_with(
    doc: &mut GraphDoc,
    o: &Overrides,
    library: &super::assets::Library,
) -> Result<(), GraphErrors> {
    // The most specific `--set` wins: deeper paths are applied last
    // (stably, so among equals the later one wins), so `--set P1.gain=2
    // --set P1/sA/k.s=-1.5` gives -1.5 in either order, even though both
    // write `P1.gain` (the inner one through the promotion chain).
    let mut sets: Vec<&String> = o.sets.iter().collect();
    sets.sort_by_key(|s| {
        let lhs = s.split_once('=').map_or(s.as_str(), |(l, _)| l);
        let node = lhs.split_once('.').map_or(lhs, |(n, _)| n);
        node.matches('/').count()
    });
    for s in sets {
        let (lhs, value) = s
            .split_once('=')
            .ok_or_else(|| usage(format!("--set {}: expected NODE.PARAM=VALUE", s)))?;
        let (node, param) = lhs
            .split_once('.')
            .ok_or_else(|| usage(format!("--set {}: expected NODE.PARAM=VALUE", s)))?;
        let value: Value =
            serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_string()));
        // A plain graph may hold flattened ids (`g/inner`) itself.
        if let Some(n) = doc.node_mut(node) {
            set_node_param(n, node, param, value, "--set: ")?;
            continue;
        }
        let path: Vec<&str> = node.split('/').collect();
        let (depth, param) = through_promotions(doc, &path, param, library)
            .map_err(|m| usage(format!("--set {}: {}", s, m)))?;
        let at = path[..depth].join("/");
        let n = super::groups::node_at_path_inlining(doc, &path[..depth], library)
            .map_err(|m| usage(format!("--set {}: {}", s, m)))?
            .ok_or_else(|| usage(format!("--set {}: there is no node '{}'", s, node)))?;
        set_node_param(n, &at, &param, value, "--set: ")?;
    }
    for i in &o.inits {
        let (field, file) = i
            .split_once('=')
            .ok_or_else(|| usage(format!("--init {}: expected FIELD=FILE.npy", i)))?;
        let n = doc
            .node_mut(field)
            .filter(|n| n.kind == "field")
            .ok_or_else(|| usage(format!("--init {}: there is no field node '{}'", i, field)))?;
        let abs = std::fs::canonicalize(file).map_err(|e| {
            GraphErrors::from(GraphError::param(
                field,
                "init",
                format!("--init: cannot open {}: {}", file, e),
            ))
        })?;
        n.params.insert(
            "init".into(),
            serde_json::json!({"npy": abs.to_string_lossy()}),
        );
    }
    Ok(())
}

/// Where a `--set` of `path.param` lands: an inner parameter that a
/// promoted parameter of its group targets is set through the promoted one
/// (which would otherwise overwrite it when the group is flattened), and so
/// on outwards while the enclosing group promotes that in turn. Returns
/// the length of the path of the node that takes the value and the name
/// of its parameter; asset groups on the way are inlined.
fn through_promotions(
    doc: &mut GraphDoc,
    path: &[&str],
    param: &str,
    library: &super::assets::Library,
) -> Result<(usize, String), String> {
    let mut depth = path.len();
    let mut param = param.to_string();
    while depth > 1 {
        let gpath = &path[..depth - 1];
        let gname = gpath.join("/");
        let Some(g) = super::groups::node_at_path_inlining(doc, gpath, library)? else {
            break;
        };
        super::groups::inline_asset(g, &gname, library)?;
        let target = format!("{}.{}", path[depth - 1], param);
        let Some(name) = g
            .group
            .as_ref()
            .and_then(|b| b.params.iter().find(|p| p.target == target))
            .map(|p| p.name.clone())
        else {
            break;
        };
        depth -= 1;
        param = name;
    }
    Ok((depth, param))
}

/// Sets parameter `param` of node `n` (named `path` in errors) to
/// `value`: a parameter of its kind, a kernel scalar (the declaration keeps
/// its type), or a promoted parameter of a group node. `--set` and promoted
/// group parameters share this rule; `what` prefixes the messages.
pub fn set_node_param(
    n: &mut super::NodeDoc,
    path: &str,
    param: &str,
    value: Value,
    what: &str,
) -> Result<(), GraphErrors> {
    if n.kind == super::groups::GROUP {
        // An asset's parameters are checked when it is read (flattening).
        let promoted = super::groups::promoted_names(n);
        if n.group.is_some() && !promoted.iter().any(|p| p == param) {
            return Err(GraphError::param(
                path,
                param,
                format!(
                    "{}the group has no promoted parameter '{}' (it has: {})",
                    what,
                    param,
                    if promoted.is_empty() {
                        "none".to_string()
                    } else {
                        promoted.join(", ")
                    }
                ),
            )
            .into());
        }
        n.params.insert(param.to_string(), value);
        return Ok(());
    }
    let kind = catalog::kind(&n.kind);
    if kind.is_some_and(|k| k.param(param).is_some()) {
        n.params.insert(param.to_string(), value);
        return Ok(());
    }
    let is_scalar = n
        .params
        .get("scalars")
        .and_then(Value::as_object)
        .is_some_and(|m| m.contains_key(param));
    if !is_scalar {
        return Err(GraphError::param(
            path,
            param,
            format!(
                "{}'{}' has no parameter or scalar '{}'",
                what, n.kind, param
            ),
        )
        .into());
    }
    let scalars = n
        .params
        .get_mut("scalars")
        .and_then(Value::as_object_mut)
        .expect("checked above");
    let slot = scalars.get_mut(param).expect("checked above");
    // A reference expression (`"= ..."`) is kept as it is and evaluated
    // by `graph::refs`; a number keeps the declaration's type (the one
    // rule of `graph::scalars`: 2.5 for an i32 is an error).
    if super::refs::is_expr(&value) {
        super::refs::set_scalar_expr(slot, value);
        return Ok(());
    }
    let number = value.as_f64().ok_or_else(|| {
        GraphError::scalar(path, param, format!("{}{} is not a number", what, value))
    })?;
    // A number replacing an expression is a normal edit: the expression
    // goes, the declaration's type and range stay (a bare `"= ..."` string
    // declares an f32, as `graph::refs` reads it).
    let mut decl = slot.clone();
    match &mut decl {
        Value::Object(o) if o.get("default").is_some_and(super::refs::is_expr) => {
            o.remove("default");
        }
        s if super::refs::is_expr(s) => *s = Value::from(0.0),
        _ => {}
    }
    set_value(param, &mut decl, number).map_err(|m| GraphError::param(path, "scalars", m))?;
    *slot = decl;
    Ok(())
}

/// Reads, overrides, validates and builds a graph file, with the library
/// a graph in its folder sees (`GraphSource`).
pub fn load_program(path: &Path, o: &Overrides) -> Result<(GraphDoc, Program), GraphErrors> {
    let mut source = super::source::GraphSource::load(path)?;
    source.apply(o)?;
    let program = source.build()?;
    Ok((source.doc, program))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kernel(scalars: Value) -> super::super::NodeDoc {
        serde_json::from_value(json!({"id": "drive", "kind": "kernel",
            "params": {"range": [1], "scalars": scalars}}))
        .unwrap()
    }

    #[test]
    fn a_number_replaces_an_expression_keeping_type_and_range() {
        // A bare expression string is an f32.
        let mut n = kernel(json!({"w": "= sin(frame*0.3)*2"}));
        set_node_param(&mut n, "drive", "w", json!(0.5), "--set: ").unwrap();
        assert_eq!(n.params["scalars"]["w"], json!(0.5));
        set_node_param(&mut n, "drive", "w", json!(2), "--set: ").unwrap();
        assert!(n.params["scalars"]["w"].is_f64(), "still an f32");
        // The object form keeps its type and range.
        let mut n = kernel(json!({"w": {"type": "i32", "default": "= frame", "max": 3}}));
        set_node_param(&mut n, "drive", "w", json!(2), "--set: ").unwrap();
        assert_eq!(
            n.params["scalars"]["w"],
            json!({"type": "i32", "default": 2, "max": 3})
        );
        let mut n = kernel(json!({"w": {"type": "i32", "default": "= frame", "max": 3}}));
        let e = set_node_param(&mut n, "drive", "w", json!(5), "--set: ")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("node 'drive'") && e.contains("outside its range"),
            "{}",
            e
        );
        assert_eq!(
            n.params["scalars"]["w"]["default"],
            json!("= frame"),
            "unchanged"
        );
    }
}
