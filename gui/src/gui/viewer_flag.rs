//! The viewer flag (Houdini's display flag, Blender's Ctrl+Shift+click):
//! one field shown in the viewport without editing the graph.
//!
//! The flag lives in the app only. The program the viewport compiles is the
//! document plus one temporary view node (`viewer-FIELD`) wired to the
//! flagged field, so the IR view kernels draw it on every backend like any
//! other view; the document, its undo history and the saved JSON never see
//! it. The field is a field node's (`T`, wired from `T.field`) or its
//! gradient (`T.grad`, wired from the node's `grad` output). The view is
//! chosen from the field as the running program has it: an `image` (auto
//! range) for a 2-axis scalar / vec3 / vec4 field, `particles` for a 1-axis
//! vec2 field (positions), and a `histogram` of its values (of their
//! length for vectors) for every other field.

use serde_json::{json, Map, Value};
use std::borrow::Cow;
use weft_ir::graph::{GraphDoc, NodeDoc, WireDoc};
use weft_ir::ir::Program;
use weft_ir::types::Type;

/// How a flagged field is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViewerKind {
    Image,
    Particles,
    /// Any other field: how its values are distributed.
    Histogram,
}

/// The view that suits `field` of `p` (`None`: no such field).
pub fn kind_for(p: &Program, field: &str) -> Option<ViewerKind> {
    let f = &p.fields[p.field_by_name(field)?];
    let scalar_or_rgb = matches!(f.ty, Type::Scalar(_) | Type::Vector(_, 3 | 4));
    Some(match (f.shape.len(), f.ty) {
        (2, _) if scalar_or_rgb => ViewerKind::Image,
        (1, Type::Vector(_, 2)) => ViewerKind::Particles,
        _ => ViewerKind::Histogram,
    })
}

/// The field node a field name belongs to, and the output that carries
/// it: `T` → (`T`, `field`), `T.grad` → (`T`, `grad`).
pub fn source_of(field: &str) -> (&str, &'static str) {
    match field.strip_suffix(".grad") {
        Some(node) => (node, "grad"),
        None => (field, "field"),
    }
}

/// The flagged field (a field node's id, or `ID.grad`), if any, and how
/// it is shown.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ViewerFlag {
    pub node: Option<(String, ViewerKind)>,
}

impl ViewerFlag {
    /// Whether `field` (a node id or `ID.grad`) is the flagged one.
    pub fn is_on(&self, field: &str) -> bool {
        self.node.as_ref().is_some_and(|(n, _)| n == field)
    }

    /// The field node the flag is on (for `T.grad`: `T`).
    pub fn flagged_node(&self) -> Option<&str> {
        self.node.as_ref().map(|(f, _)| source_of(f).0)
    }

    /// Flags `field` (unflags it when it is flagged already). `p` is the
    /// running program, which says how the field is shown. Returns the
    /// message for the status line.
    pub fn toggle(&mut self, field: &str, p: Option<&Program>) -> Result<String, String> {
        if self.is_on(field) {
            self.node = None;
            return Ok(format!("'{}' no longer shown in the viewport", field));
        }
        let p = p.ok_or("the graph must compile before a field can be viewed")?;
        let kind = kind_for(p, field).ok_or_else(|| match field.strip_suffix(".grad") {
            Some(node) => format!(
                "'{}' has no gradient: set \"grad\": true on field node '{}'",
                field, node
            ),
            None => format!("'{}' is not a field of the running simulation", field),
        })?;
        self.node = Some((field.to_string(), kind));
        Ok(match kind {
            ViewerKind::Image => format!("viewing '{}' as an image", field),
            ViewerKind::Particles => format!("viewing '{}' as particles", field),
            ViewerKind::Histogram => format!("viewing '{}' as a histogram of its values", field),
        })
    }

    /// The id of the temporary view node for the flagged field.
    pub fn view_id(&self, doc: &GraphDoc) -> Option<String> {
        let (field, _) = self.node.as_ref()?;
        let mut id = format!("viewer-{}", field.replace('.', "-"));
        while doc.node(&id).is_some() {
            id.push('_');
        }
        Some(id)
    }

    /// What the viewport compiles: `doc`, plus the temporary view node when
    /// a field node is flagged and still in the document.
    pub fn compiled_doc<'a>(&self, doc: &'a GraphDoc) -> Cow<'a, GraphDoc> {
        let Some((field, kind)) = &self.node else {
            return Cow::Borrowed(doc);
        };
        let (node, output) = source_of(field);
        if doc.node(node).is_none_or(|n| n.kind != "field") {
            return Cow::Borrowed(doc);
        }
        let (kind, port, params) = match kind {
            ViewerKind::Image => ("image", "field", json!({ "show_active": true })),
            ViewerKind::Particles => ("particles", "positions", json!({})),
            ViewerKind::Histogram => ("histogram", "field", json!({})),
        };
        let id = self.view_id(doc).expect("a field is flagged");
        let mut d = doc.clone();
        let params: Map<String, Value> = params.as_object().cloned().unwrap_or_default();
        d.nodes.push(NodeDoc {
            id: id.clone(),
            kind: kind.to_string(),
            params,
            pos: [0.0, 0.0],
            ..Default::default()
        });
        d.wires.push(WireDoc {
            from: format!("{}.{}", node, output),
            to: format!("{}.{}", id, port),
        });
        Cow::Owned(d)
    }

    /// Forgets a flag whose node left the document.
    pub fn follow(&mut self, doc: &GraphDoc) {
        if let Some(n) = self.flagged_node() {
            if doc.node(n).is_none_or(|n| n.kind != "field") {
                self.node = None;
            }
        }
    }
}
