//! The viewer flag (Houdini's display flag, Blender's Ctrl+Shift+click):
//! one field node shown in the viewport without editing the graph.
//!
//! The flag lives in the app only. The program the viewport compiles is the
//! document plus one temporary view node (`viewer-FIELD`) wired to the
//! flagged field, so the IR view kernels draw it on every backend like any
//! other view; the document, its undo history and the saved JSON never see
//! it. The view is chosen from the field as the running program has it: an
//! `image` (auto range) for a 2-axis scalar / vec3 / vec4 field, `particles`
//! for a 1-axis vec2 field (positions), and otherwise no view: the
//! spreadsheet opens on the field (its statistics and rows).

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
    /// No view fits: the spreadsheet shows it.
    Spreadsheet,
}

/// The view that suits `field` of `p` (`None`: no such field).
pub fn kind_for(p: &Program, field: &str) -> Option<ViewerKind> {
    let f = &p.fields[p.field_by_name(field)?];
    let scalar_or_rgb = matches!(f.ty, Type::Scalar(_) | Type::Vector(_, 3 | 4));
    Some(match (f.shape.len(), f.ty) {
        (2, _) if scalar_or_rgb => ViewerKind::Image,
        (1, Type::Vector(_, 2)) => ViewerKind::Particles,
        _ => ViewerKind::Spreadsheet,
    })
}

/// The flagged field node, if any, and how it is shown.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ViewerFlag {
    pub node: Option<(String, ViewerKind)>,
}

impl ViewerFlag {
    pub fn is_on(&self, node: &str) -> bool {
        self.node.as_ref().is_some_and(|(n, _)| n == node)
    }

    /// Flags `node` (unflags it when it is flagged already). `p` is the
    /// running program, which says how the field is shown. Returns the
    /// message for the status line.
    pub fn toggle(&mut self, node: &str, p: Option<&Program>) -> Result<String, String> {
        if self.is_on(node) {
            self.node = None;
            return Ok(format!("'{}' no longer shown in the viewport", node));
        }
        let p = p.ok_or("the graph must compile before a field can be viewed")?;
        let kind = kind_for(p, node)
            .ok_or_else(|| format!("'{}' is not a field of the running simulation", node))?;
        self.node = Some((node.to_string(), kind));
        Ok(match kind {
            ViewerKind::Image => format!("viewing '{}' as an image", node),
            ViewerKind::Particles => format!("viewing '{}' as particles", node),
            ViewerKind::Spreadsheet => {
                format!("'{}' has no image view: shown in the spreadsheet", node)
            }
        })
    }

    /// The id of the temporary view node for the flagged field.
    pub fn view_id(&self, doc: &GraphDoc) -> Option<String> {
        let (field, _) = self.node.as_ref()?;
        let mut id = format!("viewer-{}", field);
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
        if doc.node(field).is_none_or(|n| n.kind != "field") {
            return Cow::Borrowed(doc);
        }
        let (kind, port, params) = match kind {
            ViewerKind::Image => ("image", "field", json!({ "show_active": true })),
            ViewerKind::Particles => ("particles", "positions", json!({})),
            ViewerKind::Spreadsheet => return Cow::Borrowed(doc),
        };
        let id = self.view_id(doc).expect("a field is flagged");
        let mut d = doc.clone();
        let params: Map<String, Value> = params.as_object().cloned().unwrap_or_default();
        d.nodes.push(NodeDoc {
            id: id.clone(),
            kind: kind.to_string(),
            params,
            pos: [0.0, 0.0],
        });
        d.wires.push(WireDoc {
            from: format!("{}.field", field),
            to: format!("{}.{}", id, port),
        });
        Cow::Owned(d)
    }

    /// Forgets a flag whose node left the document.
    pub fn follow(&mut self, doc: &GraphDoc) {
        if let Some((n, _)) = &self.node {
            if doc.node(n).is_none_or(|n| n.kind != "field") {
                self.node = None;
            }
        }
    }
}
