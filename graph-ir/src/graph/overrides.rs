//! Loading a graph file with the driver's overrides (`--set`, `--init`)
//! into a `Program`. The CLI and tests call this; the runtime never does
//! (it sees only the IR).

use super::scalars::set_value;
use super::{build_program, catalog, BuildOptions, GraphDoc, GraphError, GraphErrors};
use crate::ir::Program;
use serde_json::Value;
use std::path::{Path, PathBuf};

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
    let library = super::assets::Library::for_graph(base_dir);
    for s in &o.sets {
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
        // An inner parameter that a promoted parameter of its group targets
        // is set through the promoted one (which would overwrite it).
        if let Some((last, gpath)) = path.split_last().filter(|(_, g)| !g.is_empty()) {
            let gname = gpath.join("/");
            let g = super::groups::node_at_path_inlining(doc, gpath, &library)
                .map_err(|m| usage(format!("--set {}: {}", s, m)))?;
            if let Some(g) = g {
                super::groups::inline_asset(g, &gname, &library)
                    .map_err(|m| usage(format!("--set {}: {}", s, m)))?;
                let target = format!("{}.{}", last, param);
                let promoted = g
                    .group
                    .as_ref()
                    .and_then(|b| b.params.iter().find(|p| p.target == target))
                    .map(|p| p.name.clone());
                if let Some(name) = promoted {
                    set_node_param(g, &gname, &name, value, "--set: ")?;
                    continue;
                }
            }
        }
        let n = super::groups::node_at_path_inlining(doc, &path, &library)
            .map_err(|m| usage(format!("--set {}: {}", s, m)))?
            .ok_or_else(|| usage(format!("--set {}: there is no node '{}'", s, node)))?;
        set_node_param(n, node, param, value, "--set: ")?;
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
    set_value(param, slot, number).map_err(|m| GraphError::param(path, "scalars", m))?;
    Ok(())
}

/// Reads, overrides, validates and builds a graph file.
pub fn load_program(path: &Path, o: &Overrides) -> Result<(GraphDoc, Program), GraphErrors> {
    let mut doc = read_doc(path)?;
    let base_dir: PathBuf = path.parent().map(Path::to_path_buf).unwrap_or_default();
    apply_overrides_at(&mut doc, o, &base_dir)?;
    let program = build_program(&doc, &BuildOptions { base_dir })?;
    Ok((doc, program))
}
