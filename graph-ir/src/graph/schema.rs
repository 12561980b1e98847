//! The JSON Schema of graph files: generated from the Rust document types
//! with schemars, then refined per node kind from the catalog.

use super::catalog;
use super::document::GraphDoc;
use serde_json::{json, Value};

pub fn graph_schema() -> Value {
    let mut schema =
        serde_json::to_value(schemars::schema_for!(GraphDoc)).expect("schema serializes");
    let variants: Vec<Value> = catalog::kinds()
        .iter()
        .map(|k| {
            let props: serde_json::Map<String, Value> =
                k.params.iter().map(|p| (p.name.to_string(), catalog::param_schema(p))).collect();
            let required: Vec<&str> = k.params.iter().filter(|p| p.default.is_none()).map(|p| p.name).collect();
            let mut params = json!({"type": "object", "properties": props, "additionalProperties": false});
            if !required.is_empty() {
                params["required"] = json!(required);
            }
            json!({
                "description": k.doc,
                "type": "object",
                "properties": {
                    "id": {"type": "string", "pattern": "^[A-Za-z0-9_-]+$", "maxLength": 64},
                    "kind": {"const": k.name},
                    "params": params,
                    "pos": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}
                },
                "required": if required.is_empty() { json!(["id", "kind"]) } else { json!(["id", "kind", "params"]) },
                "additionalProperties": false
            })
        })
        .collect();
    schema["properties"]["nodes"]["items"] = json!({"oneOf": variants});
    schema["properties"]["format"]["const"] = json!("weft-graph");
    schema["properties"]["version"]["minimum"] = json!(1);
    schema["title"] = json!("Weft graph");
    schema
}

pub fn graph_schema_text() -> String {
    serde_json::to_string_pretty(&graph_schema()).expect("schema serializes") + "\n"
}
