//! The nested editor of an expression kernel: a second snarl over the
//! kernel's `expr` sub-graph, read as the typed model
//! (`graph::expr_body::ExprBody`) the build reads. Each edit changes that
//! model and writes it back into the `expr` parameter with a `SetParam`
//! command, so it is undoable and re-validated like any edit.

use super::model::Command;
use egui::{Color32, Ui};
use egui_snarl::ui::{PinInfo, SnarlPin, SnarlViewer};
use egui_snarl::{InPin, InPinId, NodeId, OutPin, OutPinId, Snarl};
use serde_json::Value;
use weft_ir::graph::expr::{ExprKind, EXPR_KINDS};
use weft_ir::graph::expr_body::ExprBody;

#[derive(Clone, Debug)]
pub struct ExprNodeView {
    pub id: String,
}

fn kind_of(body: &ExprBody, id: &str) -> Option<&'static ExprKind> {
    body.node(id).map(|n| n.kind)
}

/// Gaps between the columns and between the nodes of a column of the
/// automatic layout.
const LAYOUT_GAP_X: f32 = 60.0;
const LAYOUT_GAP_Y: f32 = 30.0;

/// A node's size in the nested editor: the one it was last drawn with, or,
/// before it was drawn, a generous estimate (title width, a row per pin and
/// per parameter).
fn node_size(
    body: &ExprBody,
    id: &str,
    drawn: &std::collections::HashMap<String, egui::Rect>,
) -> egui::Vec2 {
    if let Some(r) = drawn.get(id) {
        return r.size();
    }
    let kind = kind_of(body, id);
    let title = id.len() + kind.map_or(0, |k| k.name.len()) + 3;
    let pins = kind.map_or(1, |k| k.inputs.len().max(k.has_value as usize));
    let params = kind.map_or(0, |k| k.params.len());
    egui::vec2(
        (title as f32 * 9.0 + 40.0).max(200.0),
        40.0 + 24.0 * pins as f32 + 28.0 * params as f32,
    )
}

/// Whether the saved positions would hide nodes: a node without a position,
/// or two nodes whose title bars (at least 120 × 40) would overlap. (Bodies
/// vary in size; `auto_layout` spaces them by their drawn size.)
pub fn needs_layout(body: &ExprBody) -> bool {
    let pos: Vec<Option<egui::Pos2>> = body
        .nodes
        .iter()
        .map(|n| n.pos.map(|[x, y]| egui::pos2(x, y)))
        .collect();
    pos.iter().any(Option::is_none)
        || pos.iter().flatten().enumerate().any(|(a, p)| {
            pos.iter()
                .flatten()
                .skip(a + 1)
                .any(|q| (p.x - q.x).abs() < 120.0 && (p.y - q.y).abs() < 40.0)
        })
}

/// The expression body with every node placed in columns by its depth in
/// the data flow (sources left, writes right), in list order within a column.
/// Columns and rows are spaced by the nodes' sizes (`drawn`: the rects the
/// editor last drew, in graph space; estimated for nodes not drawn yet), so
/// no two nodes overlap and no pin is hidden under a neighbour.
pub fn auto_layout(
    body: &ExprBody,
    drawn: &std::collections::HashMap<String, egui::Rect>,
) -> ExprBody {
    let ids: Vec<String> = body.nodes.iter().map(|n| n.id.clone()).collect();
    let wires: Vec<(String, String)> = body
        .wires
        .iter()
        .map(|w| (w.from.clone(), w.to.clone()))
        .collect();
    // Longest path from a source; a cycle (an error the checker reports) stops at the node count.
    let mut depth = vec![0usize; ids.len()];
    for _ in 0..ids.len() {
        let mut changed = false;
        for (from, to) in &wires {
            let (Some(f), Some(t)) = (
                ids.iter().position(|i| i == from),
                ids.iter().position(|i| i == to),
            ) else {
                continue;
            };
            if depth[t] < depth[f] + 1 && depth[f] < ids.len() {
                depth[t] = depth[f] + 1;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let sizes: Vec<egui::Vec2> = ids.iter().map(|id| node_size(body, id, drawn)).collect();
    let columns = depth.iter().max().map_or(0, |d| d + 1);
    let mut col_x = vec![0.0f32; columns + 1];
    for d in 0..columns {
        let w = (0..ids.len())
            .filter(|&i| depth[i] == d)
            .map(|i| sizes[i].x)
            .fold(0.0, f32::max);
        col_x[d + 1] = col_x[d] + w + LAYOUT_GAP_X;
    }
    let mut col_y = vec![0.0f32; columns];
    let mut laid = body.clone();
    for (i, n) in laid.nodes.iter_mut().enumerate() {
        let d = depth[i];
        n.pos = Some([col_x[d], col_y[d]]);
        col_y[d] += sizes[i].y + LAYOUT_GAP_Y;
    }
    laid
}

/// The expression's nodes moved to the snarl's positions, when any moved.
pub fn with_positions(body: &ExprBody, snarl: &Snarl<ExprNodeView>) -> Option<ExprBody> {
    let mut moved_body = body.clone();
    let mut moved = false;
    for (_, pos, v) in snarl.nodes_pos_ids() {
        if let Some(n) = moved_body.node_mut(&v.id) {
            if n.pos
                .is_none_or(|[x, y]| (egui::pos2(x, y) - pos).length() > 0.5)
            {
                n.pos = Some([pos.x, pos.y]);
                moved = true;
            }
        }
    }
    moved.then_some(moved_body)
}

/// The nested editor's snarl; bodies whose saved places overlap open laid out.
pub fn build_expr_snarl(body: &ExprBody) -> Snarl<ExprNodeView> {
    let laid;
    let body = if needs_layout(body) {
        laid = auto_layout(body, &Default::default());
        &laid
    } else {
        body
    };
    let mut snarl = Snarl::new();
    let mut ids = std::collections::HashMap::new();
    for (k, n) in body.nodes.iter().enumerate() {
        let pos = n
            .pos
            .map_or(egui::pos2(k as f32 * 160.0, 0.0), |[x, y]| egui::pos2(x, y));
        ids.insert(
            n.id.clone(),
            snarl.insert_node(pos, ExprNodeView { id: n.id.clone() }),
        );
    }
    for w in &body.wires {
        let (Some(&f), Some(&t), Some(k)) =
            (ids.get(&w.from), ids.get(&w.to), kind_of(body, &w.to))
        else {
            continue;
        };
        if let Some(i) = k.inputs.iter().position(|p| *p == w.input) {
            snarl.connect(
                OutPinId { node: f, output: 0 },
                InPinId { node: t, input: i },
            );
        }
    }
    snarl
}

pub struct ExprViewer<'a> {
    pub kernel: String,
    pub body: &'a ExprBody,
    pub commands: Vec<Command>,
    pub search: &'a mut String,
    /// Every node's rect as drawn (graph space), for the automatic layout.
    pub rects: &'a mut std::collections::HashMap<String, egui::Rect>,
}

impl ExprViewer<'_> {
    fn set(&mut self, body: ExprBody) {
        self.commands.push(Command::SetParam {
            node: self.kernel.clone(),
            param: "expr".into(),
            value: body.to_value(),
        });
    }
    /// The body with `f`'s edit.
    fn edited(&self, f: impl FnOnce(&mut ExprBody)) -> ExprBody {
        let mut b = self.body.clone();
        f(&mut b);
        b
    }
    /// The node and input an input pin stands for.
    fn endpoint(&self, snarl: &Snarl<ExprNodeView>, to: &InPin) -> Option<(String, String)> {
        let id = &snarl[to.id.node].id;
        let port = kind_of(self.body, id)?.inputs.get(to.id.input)?;
        Some((id.clone(), port.to_string()))
    }
}

impl SnarlViewer<ExprNodeView> for ExprViewer<'_> {
    fn title(&mut self, node: &ExprNodeView) -> String {
        let kind = kind_of(self.body, &node.id).map_or("", |k| k.name);
        format!("{} · {}", node.id, kind)
    }

    fn final_node_rect(
        &mut self,
        node: NodeId,
        rect: egui::Rect,
        _ui: &mut Ui,
        snarl: &mut Snarl<ExprNodeView>,
    ) {
        self.rects.insert(snarl[node].id.clone(), rect);
    }

    fn inputs(&mut self, node: &ExprNodeView) -> usize {
        kind_of(self.body, &node.id)
            .map(|k| k.inputs.len())
            .unwrap_or(0)
    }

    fn outputs(&mut self, node: &ExprNodeView) -> usize {
        kind_of(self.body, &node.id)
            .map(|k| k.has_value as usize)
            .unwrap_or(0)
    }

    fn show_input(
        &mut self,
        pin: &InPin,
        ui: &mut Ui,
        snarl: &mut Snarl<ExprNodeView>,
    ) -> impl SnarlPin + 'static {
        let Some(k) = kind_of(self.body, &snarl[pin.id.node].id) else {
            return PinInfo::circle();
        };
        let name = k.inputs.get(pin.id.input).copied().unwrap_or("?");
        let opt = k.optional.contains(&name);
        let ty = input_type(k.name, name);
        ui.label(if opt {
            format!("{} (opt)", name)
        } else {
            name.to_string()
        })
        .on_hover_text(if opt && ty == ValueType::Index {
            format!("{}: optional, the loop index when unwired", ty.describe())
        } else {
            ty.describe().to_string()
        });
        PinInfo::circle().with_fill(ty.color())
    }

    fn show_output(
        &mut self,
        pin: &OutPin,
        ui: &mut Ui,
        snarl: &mut Snarl<ExprNodeView>,
    ) -> impl SnarlPin + 'static {
        let ty = kind_of(self.body, &snarl[pin.id.node].id)
            .map(|k| output_type(k.name))
            .unwrap_or(ValueType::Value);
        ui.label("value").on_hover_text(ty.describe());
        PinInfo::circle().with_fill(ty.color())
    }

    fn has_body(&mut self, node: &ExprNodeView) -> bool {
        kind_of(self.body, &node.id).is_some_and(|k| !k.params.is_empty())
    }

    fn show_body(
        &mut self,
        node: NodeId,
        _inputs: &[InPin],
        _outputs: &[OutPin],
        ui: &mut Ui,
        snarl: &mut Snarl<ExprNodeView>,
    ) {
        let id = snarl[node].id.clone();
        let Some(k) = kind_of(self.body, &id) else {
            return;
        };
        // The body the viewer was given, not borrowed through `self`
        // (edits below take `self` mutably).
        let body: &ExprBody = self.body;
        let Some(n) = body.node(&id) else {
            return;
        };
        for p in k.params {
            let cur = n.params.get(*p).cloned().unwrap_or(Value::Null);
            let key = ui.id().with((&id, *p));
            let mut text =
                ui.data_mut(|d| d.get_temp::<String>(key))
                    .unwrap_or_else(|| match &cur {
                        Value::String(s) => s.clone(),
                        Value::Null => String::new(),
                        v => v.to_string(),
                    });
            ui.horizontal(|ui| {
                ui.label(*p);
                let r = ui.add(egui::TextEdit::singleline(&mut text).desired_width(90.0));
                ui.data_mut(|d| d.insert_temp(key, text.clone()));
                if r.lost_focus() {
                    ui.data_mut(|d| d.remove::<String>(key));
                    let v = serde_json::from_str::<Value>(&text)
                        .unwrap_or_else(|_| Value::from(text.clone()));
                    if v != cur {
                        let e = self.edited(|b| {
                            if let Some(n) = b.node_mut(&id) {
                                n.params.insert(p.to_string(), v);
                            }
                        });
                        self.set(e);
                    }
                }
            });
        }
    }

    fn has_graph_menu(&mut self, _pos: egui::Pos2, _snarl: &mut Snarl<ExprNodeView>) -> bool {
        true
    }

    fn show_graph_menu(&mut self, pos: egui::Pos2, ui: &mut Ui, _snarl: &mut Snarl<ExprNodeView>) {
        ui.label("Add expression node");
        ui.add(
            egui::TextEdit::singleline(self.search)
                .hint_text("search…")
                .desired_width(160.0),
        )
        .request_focus();
        let q = self.search.to_lowercase();
        for k in EXPR_KINDS
            .iter()
            .filter(|k| q.is_empty() || k.name.contains(&q))
        {
            if ui.button(k.name).on_hover_text(k.doc).clicked() {
                let e = self.edited(|b| {
                    b.add_node(k, [pos.x, pos.y]);
                });
                self.search.clear();
                self.set(e);
                ui.close();
            }
        }
    }

    fn has_node_menu(&mut self, _node: &ExprNodeView) -> bool {
        true
    }

    fn show_node_menu(
        &mut self,
        node: NodeId,
        _inputs: &[InPin],
        _outputs: &[OutPin],
        ui: &mut Ui,
        snarl: &mut Snarl<ExprNodeView>,
    ) {
        if ui.button("Delete").clicked() {
            let id = snarl[node].id.clone();
            let e = self.edited(|b| b.remove_node(&id));
            self.set(e);
            ui.close();
        }
    }

    fn connect(&mut self, from: &OutPin, to: &InPin, snarl: &mut Snarl<ExprNodeView>) {
        let f = snarl[from.id.node].id.clone();
        let Some((t, input)) = self.endpoint(snarl, to) else {
            return;
        };
        let e = self.edited(|b| b.connect(&f, &t, &input));
        self.set(e);
    }

    fn disconnect(&mut self, from: &OutPin, to: &InPin, snarl: &mut Snarl<ExprNodeView>) {
        let f = snarl[from.id.node].id.clone();
        let Some((t, input)) = self.endpoint(snarl, to) else {
            return;
        };
        let e = self.edited(|b| b.disconnect(&f, &t, &input));
        self.set(e);
    }

    fn drop_inputs(&mut self, pin: &InPin, snarl: &mut Snarl<ExprNodeView>) {
        let Some((t, input)) = self.endpoint(snarl, pin) else {
            return;
        };
        let e = self.edited(|b| b.disconnect_input(&t, &input));
        self.set(e);
    }

    fn drop_outputs(&mut self, pin: &OutPin, snarl: &mut Snarl<ExprNodeView>) {
        let f = snarl[pin.id.node].id.clone();
        let e = self.edited(|b| b.disconnect_output(&f));
        self.set(e);
    }
}

/// What an expression pin carries, as far as the node kind tells: pins are
/// coloured by it, like the main editor's pins are by port type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueType {
    /// An i32 cell index.
    Index,
    /// A bool condition.
    Bool,
    /// Any number or vector (its type comes from what feeds it).
    Value,
}

impl ValueType {
    pub fn color(self) -> Color32 {
        match self {
            ValueType::Index => Color32::from_rgb(120, 170, 255),
            ValueType::Bool => Color32::from_rgb(240, 120, 170),
            ValueType::Value => Color32::from_rgb(255, 200, 120),
        }
    }
    pub fn describe(self) -> &'static str {
        match self {
            ValueType::Index => "i32 index",
            ValueType::Bool => "bool",
            ValueType::Value => "value (number or vector)",
        }
    }
}

fn input_type(kind: &str, input: &str) -> ValueType {
    match (kind, input) {
        ("read" | "write" | "atomic_add", "i" | "j" | "k") => ValueType::Index,
        ("select", "cond") => ValueType::Bool,
        _ => ValueType::Value,
    }
}

fn output_type(kind: &str) -> ValueType {
    match kind {
        "index" | "frame" => ValueType::Index,
        _ => ValueType::Value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_bodies_are_laid_out_in_data_flow_columns() {
        let e = ExprBody::parse(
            "k",
            &serde_json::json!({
                "nodes": [
                    {"id": "w", "kind": "write", "params": {"field": "x"}, "pos": [0, 0]},
                    {"id": "a", "kind": "index", "params": {"axis": 0}, "pos": [10, 10]},
                    {"id": "c", "kind": "cast", "params": {"type": "f32"}, "pos": [20, 0]},
                ],
                "wires": [{"from": "a", "to": "c.x"}, {"from": "c", "to": "w.value"}]
            }),
        )
        .unwrap();
        assert!(needs_layout(&e));
        let l = auto_layout(&e, &Default::default());
        assert!(!needs_layout(&l));
        let x = |id: &str| l.node(id).unwrap().pos.unwrap()[0];
        assert!(
            x("a") < x("c") && x("c") < x("w"),
            "sources left, writes right"
        );
    }
}
