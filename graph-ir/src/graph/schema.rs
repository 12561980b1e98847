//! The JSON Schema of graph files (`weft schema`, docs/graph.schema.json):
//! generated from the Rust document types the loader deserialises
//! (`document.rs`, with schemars), then refined per node kind from the
//! same catalog the builder checks nodes against, the group node
//! (`groups::GROUP`: an inline `group` body or an `asset` reference) and the
//! expression strings `refs.rs` evaluates (`"= ch('a.b') * 2"`, in any
//! parameter or kernel scalar). `tests/tests/schema.rs` validates every
//! shipped graph, asset and test graph against it with Python's
//! `jsonschema`, an independent validator.
//!
//! Group bodies (`GroupDoc.nodes`) and files' `nodes` share one definition,
//! `$defs/NodeDoc`, so a node inside a group is checked as strictly as one
//! at the top.

use super::catalog;
use super::document::GraphDoc;
use serde_json::{json, Value};

/// What `refs::is_expr` takes for an expression: a string whose first
/// non-blank character is `=`.
fn expr_schema() -> Value {
    json!({
        "description": "An expression evaluated when the graph is built: `= ch('node.param') * 2`, `= frame * 0.1` (see docs/graph-format.md)",
        "type": "string",
        "pattern": "^\\s*="
    })
}

/// The one id rule of the document's own ids (`resolve.rs`, `groups.rs`,
/// `document.rs`): `/` is reserved for the paths of nodes inside groups.
fn id_schema() -> Value {
    json!({"type": "string", "pattern": "^[A-Za-z0-9_-]+$", "minLength": 1, "maxLength": 64})
}

fn pos_schema() -> Value {
    json!({"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2})
}

/// A parameter's schema, or an expression in its place.
fn or_expr(mut s: Value) -> Value {
    let doc = s
        .as_object_mut()
        .and_then(|o| o.remove("description"))
        .unwrap_or(Value::Null);
    let default = s.as_object_mut().and_then(|o| o.remove("default"));
    let mut out = json!({"anyOf": [s, expr_schema()]});
    if !doc.is_null() {
        out["description"] = doc;
    }
    if let Some(d) = default {
        out["default"] = d;
    }
    out
}

fn kind_variant(k: &catalog::NodeKind) -> Value {
    let props: serde_json::Map<String, Value> = k
        .params
        .iter()
        .map(|p| {
            let mut s = catalog::param_schema(p);
            if matches!(p.ty, catalog::ParamType::Scalars) {
                s = scalars_schema(s);
            }
            (p.name.to_string(), or_expr(s))
        })
        .collect();
    let required: Vec<&str> = k
        .params
        .iter()
        .filter(|p| p.default.is_none())
        .map(|p| p.name)
        .collect();
    let mut params = json!({"type": "object", "properties": props, "additionalProperties": false});
    if !required.is_empty() {
        params["required"] = json!(required);
    }
    // Only kernels (and groups) can be bypassed (`groups::flatten`);
    // `false`, the default, is accepted on any node.
    let bypass = if k.name == "kernel" {
        json!({"type": "boolean", "description": "A bypassed kernel does not run: its exec wires are joined around it."})
    } else {
        json!({"const": false})
    };
    json!({
        "description": k.doc,
        "type": "object",
        "properties": {
            "id": id_schema(),
            "kind": {"const": k.name},
            "params": params,
            "pos": pos_schema(),
            "bypass": bypass
        },
        "required": if required.is_empty() { json!(["id", "kind"]) } else { json!(["id", "kind", "params"]) },
        "additionalProperties": false
    })
}

/// Kernel scalars: a value or its declaration, where the value and the
/// declaration's default may be expressions.
fn scalars_schema(mut s: Value) -> Value {
    if let Some(Value::Array(any)) = s
        .get_mut("additionalProperties")
        .and_then(|a| a.get_mut("anyOf"))
    {
        for v in any.iter_mut() {
            if let Some(d) = v.get_mut("properties").and_then(|p| p.get_mut("default")) {
                *d = json!({"anyOf": [d.clone(), expr_schema()]});
            }
        }
        any.push(expr_schema());
    }
    s
}

/// The group node: an inline body (`group`) or a library asset (`asset`),
/// one of the two; `params` sets its promoted parameters by name.
fn group_variant() -> Value {
    json!({
        "description": "A group: a sub-graph with ports and promoted parameters, inline (`group`) or from the asset library (`asset`). Its nodes get path ids `group/node` when the graph is built.",
        "type": "object",
        "properties": {
            "id": id_schema(),
            "kind": {"const": super::groups::GROUP},
            "params": {
                "description": "Values of the group's promoted parameters, by name.",
                "type": "object",
                "propertyNames": {"pattern": "^[A-Za-z0-9_-]+$"}
            },
            "pos": pos_schema(),
            "bypass": {"type": "boolean", "description": "A bypassed group does not run: its exec wires are joined around it."},
            "group": {"$ref": "#/$defs/GroupDoc"},
            "asset": {"$ref": "#/$defs/AssetRef"}
        },
        "required": ["id", "kind"],
        "oneOf": [
            {"required": ["group"], "not": {"required": ["asset"]}},
            {"required": ["asset"], "not": {"required": ["group"]}}
        ],
        "additionalProperties": false
    })
}

pub fn graph_schema() -> Value {
    let mut schema =
        serde_json::to_value(schemars::schema_for!(GraphDoc)).expect("schema serializes");
    let mut variants: Vec<Value> = catalog::kinds().iter().map(kind_variant).collect();
    variants.push(group_variant());
    let node = &mut schema["$defs"]["NodeDoc"];
    let doc = node["description"].clone();
    *node = json!({"description": doc, "oneOf": variants});
    // Ids of ports and promoted parameters, and frames: the loader's rules.
    schema["$defs"]["FrameDoc"]["properties"]["id"] = id_schema();
    schema["properties"]["format"]["const"] = json!("weft-graph");
    // `FrameDoc::check`: a positive width and height.
    schema["$defs"]["FrameDoc"]["properties"]["rect"] = json!({
        "description": "[x, y, width, height] in editor coordinates (the same space as node `pos`).",
        "type": "array",
        "prefixItems": [
            {"type": "number"},
            {"type": "number"},
            {"type": "number", "exclusiveMinimum": 0},
            {"type": "number", "exclusiveMinimum": 0}
        ],
        "items": false,
        "minItems": 4
    });
    schema["properties"]["version"]["minimum"] = json!(1);
    // A newer version is refused by this build (`document.rs`).
    schema["properties"]["version"]["maximum"] = json!(super::document::VERSION);
    schema["title"] = json!("Weft graph");
    schema
}

pub fn graph_schema_text() -> String {
    serde_json::to_string_pretty(&graph_schema()).expect("schema serializes") + "\n"
}
