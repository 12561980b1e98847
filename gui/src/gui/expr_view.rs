//! The nested editor of an expression kernel: a second snarl over the
//! kernel's `expr` sub-graph. Each edit rewrites the `expr` parameter with a
//! `SetParam` command, so it is undoable and re-validated like any edit.

use super::model::Command;
use egui::{Color32, Ui};
use egui_snarl::ui::{PinInfo, SnarlPin, SnarlViewer};
use egui_snarl::{InPin, InPinId, NodeId, OutPin, OutPinId, Snarl};
use serde_json::{json, Value};
use weft_ir::graph::expr::{expr_kind, EXPR_KINDS};

#[derive(Clone, Debug)]
pub struct ExprNodeView {
    pub id: String,
}

fn nodes(expr: &Value) -> Vec<Value> {
    expr.get("nodes")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn kind_of(expr: &Value, id: &str) -> Option<&'static weft_ir::graph::expr::ExprKind> {
    nodes(expr)
        .iter()
        .find(|n| n["id"] == id)
        .and_then(|n| n["kind"].as_str())
        .and_then(expr_kind)
}

/// Gaps between the columns and between the nodes of a column of the
/// automatic layout.
const LAYOUT_GAP_X: f32 = 60.0;
const LAYOUT_GAP_Y: f32 = 30.0;

/// A node's size in the nested editor: the one it was last drawn with, or,
/// before it was drawn, a generous estimate (title width, a row per pin and
/// per parameter).
fn node_size(
    expr: &Value,
    id: &str,
    drawn: &std::collections::HashMap<String, egui::Rect>,
) -> egui::Vec2 {
    if let Some(r) = drawn.get(id) {
        return r.size();
    }
    let kind = kind_of(expr, id);
    let title = id.len() + kind.map_or(0, |k| k.name.len()) + 3;
    let pins = kind.map_or(1, |k| k.inputs.len().max(k.has_value as usize));
    let params = kind.map_or(0, |k| k.params.len());
    egui::vec2(
        (title as f32 * 9.0 + 40.0).max(200.0),
        40.0 + 24.0 * pins as f32 + 28.0 * params as f32,
    )
}

fn pos_of(n: &Value) -> Option<egui::Pos2> {
    let p = n.get("pos")?.as_array()?;
    Some(egui::pos2(
        p.first()?.as_f64()? as f32,
        p.get(1)?.as_f64()? as f32,
    ))
}

/// Whether the saved positions would hide nodes: a node without a position,
/// or two nodes whose title bars (at least 120 × 40) would overlap. (Bodies
/// vary in size; `auto_layout` spaces them by their drawn size.)
pub fn needs_layout(expr: &Value) -> bool {
    let list = nodes(expr);
    let pos: Vec<Option<egui::Pos2>> = list.iter().map(pos_of).collect();
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
pub fn auto_layout(expr: &Value, drawn: &std::collections::HashMap<String, egui::Rect>) -> Value {
    let list = nodes(expr);
    let ids: Vec<String> = list
        .iter()
        .map(|n| n["id"].as_str().unwrap_or_default().to_string())
        .collect();
    let wires: Vec<(String, String)> = expr
        .get("wires")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|w| {
            let to = w["to"].as_str()?;
            Some((
                w["from"].as_str()?.to_string(),
                to.split('.').next().unwrap_or(to).to_string(),
            ))
        })
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
    let sizes: Vec<egui::Vec2> = ids.iter().map(|id| node_size(expr, id, drawn)).collect();
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
    let mut e = expr.clone();
    let placed: Vec<Value> = list
        .into_iter()
        .enumerate()
        .map(|(i, mut n)| {
            let d = depth[i];
            n["pos"] = json!([col_x[d], col_y[d]]);
            col_y[d] += sizes[i].y + LAYOUT_GAP_Y;
            n
        })
        .collect();
    e["nodes"] = Value::from(placed);
    e
}

/// The expression's nodes moved to the snarl's positions, when any moved.
pub fn with_positions(expr: &Value, snarl: &Snarl<ExprNodeView>) -> Option<Value> {
    let mut e = expr.clone();
    let mut list = nodes(expr);
    let mut moved = false;
    for (_, pos, v) in snarl.nodes_pos_ids() {
        if let Some(n) = list.iter_mut().find(|n| n["id"] == v.id.as_str()) {
            if pos_of(n).is_none_or(|p| (p - pos).length() > 0.5) {
                n["pos"] = json!([pos.x, pos.y]);
                moved = true;
            }
        }
    }
    e["nodes"] = Value::from(list);
    moved.then_some(e)
}

/// The nested editor's snarl; bodies whose saved places overlap open laid out.
pub fn build_expr_snarl(expr: &Value) -> Snarl<ExprNodeView> {
    let laid;
    let expr = if needs_layout(expr) {
        laid = auto_layout(expr, &Default::default());
        &laid
    } else {
        expr
    };
    let mut snarl = Snarl::new();
    let mut ids = std::collections::HashMap::new();
    for (k, n) in nodes(expr).iter().enumerate() {
        let pos = n
            .get("pos")
            .and_then(Value::as_array)
            .map(|p| {
                egui::pos2(
                    p[0].as_f64().unwrap_or(0.0) as f32,
                    p[1].as_f64().unwrap_or(0.0) as f32,
                )
            })
            .unwrap_or(egui::pos2(k as f32 * 160.0, 0.0));
        let id = n["id"].as_str().unwrap_or_default().to_string();
        ids.insert(id.clone(), snarl.insert_node(pos, ExprNodeView { id }));
    }
    for w in expr
        .get("wires")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let (Some(from), Some(to)) = (w["from"].as_str(), w["to"].as_str()) else {
            continue;
        };
        let (tnode, tport) = to.split_once('.').unwrap_or((to, ""));
        let (Some(&f), Some(&t), Some(k)) = (ids.get(from), ids.get(tnode), kind_of(expr, tnode))
        else {
            continue;
        };
        if let Some(i) = k.inputs.iter().position(|p| *p == tport) {
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
    pub expr: &'a Value,
    pub commands: Vec<Command>,
    pub search: &'a mut String,
    /// Every node's rect as drawn (graph space), for the automatic layout.
    pub rects: &'a mut std::collections::HashMap<String, egui::Rect>,
}

impl ExprViewer<'_> {
    fn set(&mut self, expr: Value) {
        self.commands.push(Command::SetParam {
            node: self.kernel.clone(),
            param: "expr".into(),
            value: expr,
        });
    }
    fn with_wires(&self, f: impl FnOnce(&mut Vec<Value>)) -> Value {
        let mut e = self.expr.clone();
        let mut wires = e
            .get("wires")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        f(&mut wires);
        e["wires"] = Value::from(wires);
        e
    }
    fn endpoint(&self, snarl: &Snarl<ExprNodeView>, to: &InPin) -> Option<String> {
        let id = &snarl[to.id.node].id;
        let port = kind_of(self.expr, id)?.inputs.get(to.id.input)?;
        Some(format!("{}.{}", id, port))
    }
}

impl SnarlViewer<ExprNodeView> for ExprViewer<'_> {
    fn title(&mut self, node: &ExprNodeView) -> String {
        let kind = nodes(self.expr)
            .iter()
            .find(|n| n["id"] == node.id.as_str())
            .and_then(|n| n["kind"].as_str().map(str::to_string))
            .unwrap_or_default();
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
        kind_of(self.expr, &node.id)
            .map(|k| k.inputs.len())
            .unwrap_or(0)
    }

    fn outputs(&mut self, node: &ExprNodeView) -> usize {
        kind_of(self.expr, &node.id)
            .map(|k| k.has_value as usize)
            .unwrap_or(0)
    }

    fn show_input(
        &mut self,
        pin: &InPin,
        ui: &mut Ui,
        snarl: &mut Snarl<ExprNodeView>,
    ) -> impl SnarlPin + 'static {
        let Some(k) = kind_of(self.expr, &snarl[pin.id.node].id) else {
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
        let ty = kind_of(self.expr, &snarl[pin.id.node].id)
            .map(|k| output_type(k.name))
            .unwrap_or(ValueType::Value);
        ui.label("value").on_hover_text(ty.describe());
        PinInfo::circle().with_fill(ty.color())
    }

    fn has_body(&mut self, node: &ExprNodeView) -> bool {
        kind_of(self.expr, &node.id).is_some_and(|k| !k.params.is_empty())
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
        let Some(k) = kind_of(self.expr, &id) else {
            return;
        };
        let all = nodes(self.expr);
        let Some(idx) = all.iter().position(|n| n["id"] == id.as_str()) else {
            return;
        };
        for p in k.params {
            let cur = all[idx]
                .get("params")
                .and_then(|x| x.get(*p))
                .cloned()
                .unwrap_or(Value::Null);
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
                        let mut e = self.expr.clone();
                        e["nodes"][idx]["params"][*p] = v;
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
                let taken: Vec<String> = nodes(self.expr)
                    .iter()
                    .filter_map(|n| n["id"].as_str().map(str::to_string))
                    .collect();
                let id = (1..)
                    .map(|n| format!("{}{}", k.name, n))
                    .find(|i| !taken.contains(i))
                    .expect("unbounded");
                let mut e = self.expr.clone();
                let mut list = nodes(self.expr);
                list.push(json!({"id": id, "kind": k.name, "params": {}, "pos": [pos.x, pos.y]}));
                e["nodes"] = Value::from(list);
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
            let mut e = self.with_wires(|w| {
                w.retain(|w| {
                    let to_node = w["to"].as_str().and_then(|t| t.split('.').next());
                    w["from"] != id.as_str() && to_node != Some(id.as_str())
                })
            });
            let list: Vec<Value> = nodes(self.expr)
                .into_iter()
                .filter(|n| n["id"] != id.as_str())
                .collect();
            e["nodes"] = Value::from(list);
            self.set(e);
            ui.close();
        }
    }

    fn connect(&mut self, from: &OutPin, to: &InPin, snarl: &mut Snarl<ExprNodeView>) {
        let f = snarl[from.id.node].id.clone();
        let Some(t) = self.endpoint(snarl, to) else {
            return;
        };
        let e = self.with_wires(|w| {
            w.retain(|w| w["to"] != t.as_str());
            w.push(json!({"from": f, "to": t}));
        });
        self.set(e);
    }

    fn disconnect(&mut self, from: &OutPin, to: &InPin, snarl: &mut Snarl<ExprNodeView>) {
        let f = snarl[from.id.node].id.clone();
        let Some(t) = self.endpoint(snarl, to) else {
            return;
        };
        let e =
            self.with_wires(|w| w.retain(|w| !(w["from"] == f.as_str() && w["to"] == t.as_str())));
        self.set(e);
    }

    fn drop_inputs(&mut self, pin: &InPin, snarl: &mut Snarl<ExprNodeView>) {
        let Some(t) = self.endpoint(snarl, pin) else {
            return;
        };
        let e = self.with_wires(|w| w.retain(|w| w["to"] != t.as_str()));
        self.set(e);
    }

    fn drop_outputs(&mut self, pin: &OutPin, snarl: &mut Snarl<ExprNodeView>) {
        let f = snarl[pin.id.node].id.clone();
        let e = self.with_wires(|w| w.retain(|w| w["from"] != f.as_str()));
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
        let e = json!({
            "nodes": [
                {"id": "w", "kind": "write", "params": {"field": "x"}, "pos": [0, 0]},
                {"id": "a", "kind": "index", "params": {"axis": 0}, "pos": [10, 10]},
                {"id": "c", "kind": "cast", "params": {"type": "f32"}, "pos": [20, 0]},
            ],
            "wires": [{"from": "a", "to": "c.x"}, {"from": "c", "to": "w.value"}]
        });
        assert!(needs_layout(&e));
        let l = auto_layout(&e, &Default::default());
        assert!(!needs_layout(&l));
        let x = |id: &str| {
            nodes(&l).iter().find(|n| n["id"] == id).unwrap()["pos"][0]
                .as_f64()
                .unwrap()
        };
        assert!(
            x("a") < x("c") && x("c") < x("w"),
            "sources left, writes right"
        );
    }
}
