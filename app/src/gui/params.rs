//! Parameter editors, built from the node catalog: the compact ones on node
//! bodies and the full ones in the inspector. Ranges from the catalog (and
//! from kernel scalar declarations) bound the widgets, so an edit made here
//! cannot produce a value the loader would refuse.

use super::model::Command;
use egui::Ui;
use serde_json::{Map, Value};
use weft_ir::graph::catalog::{self, ParamSpec, ParamType};
use weft_ir::graph::NodeDoc;

/// Editors for a node's parameters (compact on node bodies, full in the inspector).
pub fn param_editors(
    ui: &mut Ui,
    doc: &NodeDoc,
    compact: bool,
    commands: &mut Vec<Command>,
    open_code: &mut Option<String>,
) {
    let Some(kind) = catalog::kind(&doc.kind) else {
        return;
    };
    for spec in kind.params {
        let value = doc
            .params
            .get(spec.name)
            .cloned()
            .or_else(|| spec.default_value())
            .unwrap_or(Value::Null);
        ui.horizontal(|ui| {
            ui.label(spec.name).on_hover_text(spec.doc);
            if let Some(v) = param_widget(ui, doc, spec, &value, compact, open_code) {
                commands.push(Command::SetParam {
                    node: doc.id.clone(),
                    param: spec.name.to_string(),
                    value: v,
                });
            }
        });
    }
}

/// A number widget bounded by `range`: a slider when the range is narrow
/// enough to sweep, a drag value clamped to it otherwise.
fn number(ui: &mut Ui, v: &Value, int: bool, range: Option<(f64, f64)>) -> Option<Value> {
    let sweep = range.filter(|(lo, hi)| hi - lo <= 1000.0);
    if int {
        let mut x = v.as_i64().unwrap_or(0);
        let r = match (sweep, range) {
            (Some((lo, hi)), _) => ui.add(egui::Slider::new(&mut x, lo as i64..=hi as i64)),
            (None, Some((lo, hi))) => ui.add(egui::DragValue::new(&mut x).range(lo..=hi)),
            (None, None) => ui.add(egui::DragValue::new(&mut x)),
        };
        r.changed().then(|| Value::from(x))
    } else {
        let mut x = v.as_f64().unwrap_or(0.0);
        let r = match (sweep, range) {
            (Some((lo, hi)), _) => ui.add(egui::Slider::new(&mut x, lo..=hi)),
            (None, Some((lo, hi))) => {
                ui.add(egui::DragValue::new(&mut x).speed(0.01).range(lo..=hi))
            }
            (None, None) => ui.add(egui::DragValue::new(&mut x).speed(0.01)),
        };
        r.changed().then(|| Value::from(x))
    }
}

/// One row per kernel scalar: its value, bounded by its `min`/`max`, with its
/// `doc` on hover. Returns the whole new `scalars` object when one changed.
fn scalar_rows(ui: &mut Ui, scalars: &Value) -> Option<Value> {
    let map = scalars.as_object()?;
    let mut out: Option<Map<String, Value>> = None;
    for (name, decl) in map {
        let (ty, value, range, doc) = match decl {
            Value::Object(d) => {
                let f = |k: &str| d.get(k).and_then(Value::as_f64);
                let range = match (f("min"), f("max")) {
                    (None, None) => None,
                    (lo, hi) => Some((lo.unwrap_or(f64::MIN), hi.unwrap_or(f64::MAX))),
                };
                let lo = range.map(|r| r.0).unwrap_or(f64::NEG_INFINITY);
                let hi = range.map(|r| r.1).unwrap_or(f64::INFINITY);
                let default = f("default").unwrap_or_else(|| 0f64.clamp(lo, hi));
                (
                    d.get("type").and_then(Value::as_str).unwrap_or("f32"),
                    Value::from(default),
                    range,
                    d.get("doc").and_then(Value::as_str).unwrap_or(""),
                )
            }
            Value::Number(n) if n.is_i64() || n.is_u64() => ("i32", decl.clone(), None, ""),
            _ => ("f32", decl.clone(), None, ""),
        };
        let int = ty != "f32";
        let range = if ty == "u32" {
            Some(range.map_or((0.0, u32::MAX as f64), |(lo, hi)| (lo.max(0.0), hi)))
        } else {
            range
        };
        ui.horizontal(|ui| {
            let label = ui.label(format!("{}: {}", name, ty));
            if !doc.is_empty() {
                label.on_hover_text(doc);
            }
            if let Some(nv) = number(ui, &value, int, range) {
                let m = out.get_or_insert_with(|| map.clone());
                let slot = m.get_mut(name).expect("iterating its keys");
                match slot {
                    Value::Object(d) => {
                        d.insert("default".into(), nv);
                    }
                    // A plain number keeps its written type: 1.0 stays f32.
                    _ if int => *slot = Value::from(nv.as_i64().unwrap_or(0)),
                    _ => *slot = Value::from(nv.as_f64().unwrap_or(0.0)),
                }
            }
        });
    }
    out.map(Value::Object)
}

fn param_widget(
    ui: &mut Ui,
    doc: &NodeDoc,
    spec: &ParamSpec,
    v: &Value,
    compact: bool,
    open_code: &mut Option<String>,
) -> Option<Value> {
    match spec.ty {
        ParamType::Int => number(ui, v, true, spec.range),
        ParamType::Number => {
            if v.is_null() {
                ui.weak("auto");
                ui.small_button("set").clicked().then(|| Value::from(0.0))
            } else {
                let r = number(ui, v, false, spec.range);
                if ui.small_button("auto").clicked() {
                    return Some(Value::Null);
                }
                r
            }
        }
        ParamType::Enum(opts) => {
            let mut cur = v.as_str().unwrap_or("").to_string();
            let before = cur.clone();
            egui::ComboBox::from_id_salt((&doc.id, spec.name))
                .selected_text(&cur)
                .show_ui(ui, |ui| {
                    for o in opts {
                        ui.selectable_value(&mut cur, o.to_string(), *o);
                    }
                });
            (cur != before).then(|| Value::from(cur))
        }
        ParamType::String => {
            let mut s = v.as_str().unwrap_or("").to_string();
            let r = ui.add(egui::TextEdit::singleline(&mut s).desired_width(90.0));
            r.lost_focus()
                .then(|| {
                    if s.is_empty() {
                        Value::Null
                    } else {
                        Value::from(s)
                    }
                })
                .filter(|nv| nv != v)
        }
        ParamType::Shape => {
            let mut dims: Vec<i64> = v
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_i64).collect())
                .unwrap_or_default();
            let mut changed = false;
            for d in dims.iter_mut() {
                changed |= ui.add(egui::DragValue::new(d).range(1..=1 << 20)).changed();
            }
            if v.is_null() && ui.small_button("set").clicked() {
                return Some(Value::from(vec![64]));
            }
            changed.then(|| Value::from(dims))
        }
        ParamType::Color => {
            let c: Vec<f32> = v
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_f64)
                        .map(|x| x as f32)
                        .collect()
                })
                .unwrap_or_default();
            let mut rgb = [
                c.first().copied().unwrap_or(0.0),
                c.get(1).copied().unwrap_or(0.0),
                c.get(2).copied().unwrap_or(0.0),
            ];
            ui.color_edit_button_rgb(&mut rgb)
                .changed()
                .then(|| Value::from(rgb.iter().map(|x| *x as f64).collect::<Vec<_>>()))
        }
        ParamType::Rect => {
            let mut r: Vec<f64> = v
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_else(|| vec![0.0, 0.0, 1.0, 1.0]);
            let mut changed = false;
            for x in r.iter_mut() {
                changed |= ui.add(egui::DragValue::new(x).speed(0.01)).changed();
            }
            changed.then(|| Value::from(r))
        }
        ParamType::Code => {
            let is_expr = doc.params.get("expr").is_some_and(|e| e.is_object());
            let label = if is_expr {
                "Edit expression…".to_string()
            } else {
                format!(
                    "Edit code… ({} lines)",
                    v.as_str().map(|s| s.lines().count()).unwrap_or(0)
                )
            };
            if ui.button(label).clicked() {
                *open_code = Some(doc.id.clone());
            }
            None
        }
        ParamType::Expr => {
            if !v.is_null() {
                let n = v
                    .get("nodes")
                    .and_then(Value::as_array)
                    .map(|a| a.len())
                    .unwrap_or(0);
                ui.weak(format!("expression body, {} nodes", n));
            }
            None
        }
        ParamType::Scalars => {
            if let Some(nv) = ui.vertical(|ui| scalar_rows(ui, v)).inner {
                return Some(nv);
            }
            if compact {
                return None;
            }
            json_text(ui, doc, spec, v)
        }
        ParamType::Init => {
            if compact {
                ui.weak(v.to_string().chars().take(24).collect::<String>());
                return None;
            }
            json_text(ui, doc, spec, v)
        }
    }
}

/// A one-line JSON editor, committed when it loses focus. The text being typed
/// lives in egui's memory only while the field has focus, so edits made
/// elsewhere (a slider, undo) show at once.
fn json_text(ui: &mut Ui, doc: &NodeDoc, spec: &ParamSpec, v: &Value) -> Option<Value> {
    let id = ui.id().with((&doc.id, spec.name, "json"));
    let mut text = ui
        .data_mut(|d| d.get_temp::<String>(id))
        .unwrap_or_else(|| v.to_string());
    let r = ui.add(
        egui::TextEdit::singleline(&mut text)
            .code_editor()
            .desired_width(200.0),
    );
    if r.has_focus() {
        ui.data_mut(|d| d.insert_temp(id, text.clone()));
    }
    if r.lost_focus() {
        ui.data_mut(|d| d.remove::<String>(id));
        match serde_json::from_str::<Value>(&text) {
            Ok(nv) if &nv != v => return Some(nv),
            Ok(_) => {}
            Err(e) => {
                r.show_tooltip_text(format!("not JSON: {}", e));
            }
        }
    }
    None
}
