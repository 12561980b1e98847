//! Frames and comments in the node editor: titled boxes drawn behind the
//! nodes (in `paint`, called from the snarl's background) and moved or
//! resized by their title bar and corner (in `interact`, on a layer just above
//! the nodes, with the same graph→screen transform).
//!
//! A frame drag changes only this module's live copy and the snarl's node
//! positions; when the pointer is released it becomes one `SetFrame` command,
//! committed in the same frame as the moves of the nodes it carried, so the
//! whole gesture is one undo step.

use super::graph_view::NodeView;
use super::model::Command;
use egui::{Color32, Pos2, Rect, Ui};
use egui_snarl::Snarl;
use std::collections::HashMap;
use weft_ir::graph::FrameDoc;

/// Height of a frame's title bar, in graph units.
pub const TITLE_HEIGHT: f32 = 26.0;
const HANDLE: f32 = 18.0;
const MIN_SIZE: egui::Vec2 = egui::vec2(120.0, 60.0);

#[derive(Clone, Debug, PartialEq)]
enum DragKind {
    Move,
    Resize,
}

#[derive(Clone, Debug)]
struct Drag {
    id: String,
    kind: DragKind,
    rect: Rect,
    /// Nodes carried along by a move: those whose centre was inside at the start.
    nodes: Vec<String>,
}

#[derive(Default)]
pub struct FramesState {
    drag: Option<Drag>,
    /// The frame shown in the inspector.
    pub selected: Option<String>,
}

pub fn rect_of(f: &FrameDoc) -> Rect {
    Rect::from_min_size(
        egui::pos2(f.rect[0], f.rect[1]),
        egui::vec2(f.rect[2], f.rect[3]),
    )
}

fn color_of(f: &FrameDoc, alpha: f32) -> Color32 {
    let c = |x: f32| (x.clamp(0.0, 1.0) * 255.0).round() as u8;
    Color32::from_rgb(c(f.color[0]), c(f.color[1]), c(f.color[2])).gamma_multiply(alpha)
}

impl FramesState {
    /// The frames as they should look now: a frame being dragged at its live place.
    pub fn live(&self, frames: &[FrameDoc]) -> Vec<FrameDoc> {
        frames
            .iter()
            .map(|f| match &self.drag {
                Some(d) if d.id == f.id => FrameDoc {
                    rect: [d.rect.min.x, d.rect.min.y, d.rect.width(), d.rect.height()],
                    ..f.clone()
                },
                _ => f.clone(),
            })
            .collect()
    }
}

/// Draws frames in graph space (behind the nodes).
pub fn paint(painter: &egui::Painter, frames: &[FrameDoc], selected: Option<&str>) {
    for f in frames {
        let r = rect_of(f);
        let chosen = selected == Some(f.id.as_str());
        painter.rect_filled(r, 6.0, color_of(f, 0.18));
        let stroke = if chosen {
            egui::Stroke::new(2.5, Color32::from_rgb(255, 210, 120))
        } else {
            egui::Stroke::new(1.5, color_of(f, 0.9))
        };
        painter.rect_stroke(r, 6.0, stroke, egui::StrokeKind::Inside);
        let title = Rect::from_min_size(r.min, egui::vec2(r.width(), TITLE_HEIGHT));
        painter.rect_filled(
            title,
            egui::CornerRadius {
                nw: 6,
                ne: 6,
                sw: 0,
                se: 0,
            },
            color_of(f, 0.75),
        );
        let name = if f.title.is_empty() { &f.id } else { &f.title };
        painter.text(
            title.left_center() + egui::vec2(8.0, 0.0),
            egui::Align2::LEFT_CENTER,
            name,
            egui::FontId::proportional(15.0),
            Color32::WHITE,
        );
        if !f.text.is_empty() {
            let galley = painter.layout(
                f.text.clone(),
                egui::FontId::proportional(13.0),
                Color32::from_gray(225),
                (r.width() - 16.0).max(10.0),
            );
            let at = r.min + egui::vec2(8.0, TITLE_HEIGHT + 6.0);
            let clip = painter.clip_rect().intersect(r);
            painter
                .with_clip_rect(clip)
                .galley(at, galley, Color32::WHITE);
        }
        // The resize grip.
        let c = r.max;
        for k in 1..=3 {
            let d = k as f32 * 5.0;
            painter.line_segment(
                [c - egui::vec2(d, 2.0), c - egui::vec2(2.0, d)],
                egui::Stroke::new(1.2, color_of(f, 0.9)),
            );
        }
    }
}

/// What a frame interaction asks of the app.
#[derive(Default)]
pub struct FrameEvents {
    pub commands: Vec<Command>,
    /// The pointer is over a frame's title or grip (the editor should not pan).
    pub hovered: bool,
}

/// Title-bar drags move a frame and the nodes inside it; the corner grip
/// resizes it; a click selects it for the inspector. `ui` is a child on the
/// frames layer, whose coordinates are graph space.
pub fn interact(
    ui: &mut Ui,
    frames: &[FrameDoc],
    state: &mut FramesState,
    snarl: &mut Snarl<NodeView>,
    node_rects: &HashMap<String, Rect>,
) -> FrameEvents {
    let mut out = FrameEvents::default();
    let live = state.live(frames);
    for f in &live {
        let r = rect_of(f);
        let title = Rect::from_min_size(r.min, egui::vec2(r.width() - HANDLE, TITLE_HEIGHT));
        let grip = Rect::from_min_max(r.max - egui::vec2(HANDLE, HANDLE), r.max);
        let base = egui::Id::new(("weft-frame", &f.id));
        let t = ui
            .interact(title, base.with("title"), egui::Sense::click_and_drag())
            .on_hover_cursor(egui::CursorIcon::Grab);
        let g = ui
            .interact(grip, base.with("grip"), egui::Sense::drag())
            .on_hover_cursor(egui::CursorIcon::ResizeNwSe);
        out.hovered |= t.hovered() || g.hovered();
        if t.clicked() || t.drag_started() {
            state.selected = Some(f.id.clone());
        }
        if t.drag_started() {
            let nodes = node_rects
                .iter()
                .filter(|(_, nr)| r.contains(nr.center()))
                .map(|(id, _)| id.clone())
                .collect();
            state.drag = Some(Drag {
                id: f.id.clone(),
                kind: DragKind::Move,
                rect: r,
                nodes,
            });
        }
        if g.drag_started() {
            state.drag = Some(Drag {
                id: f.id.clone(),
                kind: DragKind::Resize,
                rect: r,
                nodes: vec![],
            });
        }
        let delta = if t.dragged() {
            t.drag_delta()
        } else if g.dragged() {
            g.drag_delta()
        } else {
            egui::Vec2::ZERO
        };
        if let Some(d) = state.drag.as_mut().filter(|d| d.id == f.id) {
            if delta != egui::Vec2::ZERO {
                match d.kind {
                    DragKind::Move => {
                        d.rect = d.rect.translate(delta);
                        for nid in snarl.node_ids().map(|(nid, _)| nid).collect::<Vec<_>>() {
                            let carried = d.nodes.contains(&snarl[nid].id);
                            if let (true, Some(info)) = (carried, snarl.get_node_info_mut(nid)) {
                                info.pos += delta;
                            }
                        }
                    }
                    DragKind::Resize => {
                        let max = (d.rect.max + delta).max(d.rect.min + MIN_SIZE);
                        d.rect = Rect::from_min_max(d.rect.min, max);
                    }
                }
            }
            if t.drag_stopped() || g.drag_stopped() {
                let mut doc = f.clone();
                doc.rect = [d.rect.min.x, d.rect.min.y, d.rect.width(), d.rect.height()];
                out.commands.push(Command::SetFrame { frame: doc });
                state.drag = None;
            }
        }
    }
    out
}

/// A new frame around `rects` (graph space), or a lone comment at `at`.
pub fn new_frame(id: String, rects: &[Rect], at: Pos2, comment: bool) -> FrameDoc {
    let bb = rects
        .iter()
        .fold(Rect::NOTHING, |bb, r| bb.union(*r))
        .expand(24.0);
    let r = if bb.is_positive() {
        Rect::from_min_max(bb.min - egui::vec2(0.0, TITLE_HEIGHT), bb.max)
    } else {
        Rect::from_min_size(at, egui::vec2(280.0, 140.0))
    };
    FrameDoc {
        title: if comment {
            "Note".into()
        } else {
            "Frame".into()
        },
        text: if comment {
            "Write a note here (inspector).".into()
        } else {
            String::new()
        },
        rect: [r.min.x, r.min.y, r.width(), r.height()],
        color: if comment {
            [0.55, 0.5, 0.25]
        } else {
            weft_ir::graph::document::default_frame_color()
        },
        id,
    }
}
