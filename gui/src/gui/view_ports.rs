//! What a view can draw, for the editor: the element types each view port
//! takes (the rules `graph::build::views` enforces, so that the editor
//! offers only what will build) and the parameters a view's field makes
//! irrelevant.

use weft_ir::graph::document::split_endpoint;
use weft_ir::graph::{GraphDoc, NodeDoc};

/// The element type of the field a wire from `endpoint` carries: a field
/// node's `type` (`f32` when unset); `None` for any other output (an
/// optimize node's loss history, a layout's cells), which is not checked here.
pub fn field_type(doc: &GraphDoc, endpoint: &str) -> Option<String> {
    let (id, port) = split_endpoint(endpoint);
    let node = doc.node(id)?;
    // A mesh node's outputs (`graph::build::meshes`).
    if node.kind == "mesh" {
        return match port {
            "points" | "normals" => Some("vec3".into()),
            "triangles" => Some("ivec3".into()),
            _ => None,
        };
    }
    (node.kind == "field").then(|| {
        node.params
            .get("type")
            .and_then(|t| t.as_str())
            .unwrap_or("f32")
            .to_string()
    })
}

fn is_vector(ty: &str) -> bool {
    ["vec", "ivec", "uvec", "mat"]
        .iter()
        .any(|p| ty.starts_with(p))
}

/// Whether a view's `port` can draw a field of element type `ty`; ports
/// that are not view ports take any type.
pub fn accepts(kind: &str, port: &str, ty: &str) -> bool {
    match (kind, port) {
        ("image", "field") => !is_vector(ty) || ty == "vec3" || ty == "vec4",
        ("particles", "positions") => ty == "vec2" || ty == "vec3",
        ("particles", "color") => ty == "vec3" || ty == "u32",
        ("plot", "field") => !is_vector(ty) && ty != "i32" && ty != "u32",
        _ => true,
    }
}

/// Parameters of `node` that its wired field makes irrelevant (an RGB
/// image, of a vec3 or vec4 field, uses no colormap), left out of its editors.
pub fn hidden_params(doc: &GraphDoc, node: &NodeDoc) -> Vec<&'static str> {
    if node.kind != "image" {
        return vec![];
    }
    let to = format!("{}.field", node.id);
    let ty = doc
        .wires
        .iter()
        .find(|w| w.to == to)
        .and_then(|w| field_type(doc, &w.from));
    match ty.as_deref() {
        Some("vec3" | "vec4") => vec!["colormap"],
        _ => vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_take_the_types_the_builder_draws() {
        assert!(accepts("particles", "positions", "vec2"));
        assert!(accepts("particles", "positions", "vec3"));
        assert!(!accepts("particles", "positions", "f32"));
        assert!(accepts("image", "field", "f32"));
        assert!(accepts("image", "field", "vec3"));
        assert!(!accepts("image", "field", "vec2"));
        assert!(!accepts("plot", "field", "vec2"));
        assert!(accepts("kernel", "x", "vec2"));
    }
}
