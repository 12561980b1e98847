//! Parameter editors, built from the node catalog: the compact ones on node
//! bodies and the full ones in the inspector. Ranges from the catalog (and
//! from kernel scalar declarations) bound the widgets, so an edit made here
//! cannot produce a value the loader would refuse.

mod field_ports;

use super::model::Command;
use egui::Ui;
use serde_json::{Map, Value};
use weft_ir::graph::catalog::{self, ParamSpec, ParamType};
use weft_ir::graph::scalars::{set_value, ScalarDecl};
use weft_ir::graph::NodeDoc;
use weft_ir::Type;

/// Editors for a node's parameters (compact on node bodies, full in the inspector).
/// Params shown on a node's body only when set to something other than
/// their default (a field's storage, overflow and gradient switches, a
/// repeat's index scalar).
const ADVANCED: [&str; 17] = [
    "storage",
    "overflow",
    "rounding",
    "shared_exponent",
    "grad",
    "index",
    "checkpoint",
    "show_active",
    // 3-D views' overlays (issue 27).
    "show_box",
    "show_axes",
    // A tape's forward mode (issue 11).
    "mode",
    "wrt",
    // A kernel's custom gradient (issue 11).
    "backward",
    // optimize
    "beta1",
    "beta2",
    "eps",
    "history",
];

pub fn param_editors(
    ui: &mut Ui,
    doc: &NodeDoc,
    compact: bool,
    hidden: &[&str],
    commands: &mut Vec<Command>,
    open_code: &mut Option<String>,
) {
    let Some(kind) = catalog::kind(&doc.kind) else {
        return;
    };
    for spec in kind.params.iter().filter(|s| !hidden.contains(&s.name)) {
        // A code kernel has no expression body: no empty `expr` row.
        if spec.ty == ParamType::Expr && doc.params.get(spec.name).is_none_or(Value::is_null) {
            continue;
        }
        // Declared field ports show as pins on the node body; the list
        // and "Add field port" are in the inspector.
        if compact && spec.ty == ParamType::PortNames {
            continue;
        }
        let set = doc.params.get(spec.name).filter(|v| !v.is_null());
        // On the node body, storage details stay out of sight until they
        // differ from the default; the inspector always shows them.
        // (`wrt` is a tape's forward-mode detail but an optimize node's
        // main input.)
        let advanced =
            ADVANCED.contains(&spec.name) && !(doc.kind == "optimize" && spec.name == "wrt");
        if compact && advanced && set.is_none_or(|v| Some(v) == spec.default_value().as_ref()) {
            continue;
        }
        let value = set
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

/// The value a "set" button gives an unset integer: 4096 (the cap of a
/// pool's automatic size), kept inside the parameter's range.
fn auto_int(range: Option<(f64, f64)>) -> i64 {
    let (lo, hi) = range.unwrap_or((f64::MIN, f64::MAX));
    4096f64.clamp(lo, hi) as i64
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
        // The one parser of declarations (`graph::scalars`); a broken one is
        // reported on the node by validation and edited in the inspector.
        let Ok(d) = ScalarDecl::parse(name, decl) else {
            ui.weak(format!("{}: invalid declaration", name));
            continue;
        };
        let int = d.ty != Type::F32;
        let range = match (d.min, d.max) {
            (None, None) => None,
            (lo, hi) => Some((lo.unwrap_or(f64::MIN), hi.unwrap_or(f64::MAX))),
        };
        let range = if d.ty == Type::U32 {
            Some(range.map_or((0.0, u32::MAX as f64), |(lo, hi)| (lo.max(0.0), hi)))
        } else {
            range
        };
        let value = if int {
            Value::from(d.value() as i64)
        } else {
            Value::from(d.value())
        };
        ui.horizontal(|ui| {
            let label = ui.label(format!("{}: {}", name, d.ty));
            if !d.doc.is_empty() {
                label.on_hover_text(&d.doc);
            }
            if let Some(nv) = number(ui, &value, int, range) {
                let m = out.get_or_insert_with(|| map.clone());
                let slot = m.get_mut(name).expect("iterating its keys");
                // Keeps the declaration's type (a plain 1.0 stays f32); a
                // value the type cannot hold leaves it as it was.
                let _ = set_value(name, slot, nv.as_f64().unwrap_or(0.0));
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
        // An unset integer (a pool's `capacity`) is its documented automatic
        // value, not 0: a drag value clamped to the range would write its
        // minimum (a pool of 1) the first time it is drawn.
        ParamType::Int if v.is_null() => {
            ui.weak("auto");
            ui.small_button("set")
                .on_hover_text(spec.doc)
                .clicked()
                .then(|| Value::from(auto_int(spec.range)))
        }
        ParamType::Int => {
            let r = number(ui, v, true, spec.range);
            let nullable = spec.default_value().is_some_and(|d| d.is_null());
            if nullable && ui.small_button("auto").clicked() {
                return Some(Value::Null);
            }
            r
        }
        ParamType::Bool => {
            let mut on = v.as_bool().unwrap_or(false);
            ui.checkbox(&mut on, "").changed().then(|| Value::from(on))
        }
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
        ParamType::String | ParamType::NodeId | ParamType::NodeIds => {
            let committed = v.as_str().unwrap_or("");
            text_field(ui, (&doc.id, spec.name, "text"), committed, 110.0)
                .map(|s| {
                    if s.is_empty() {
                        Value::Null
                    } else {
                        Value::from(s)
                    }
                })
                .filter(|nv| nv != v)
        }
        // A kernel's declared field ports: the inspector's list with "Add
        // field port"; nothing on the node body (the pins show them).
        ParamType::PortNames => field_ports::editor(ui, doc, v),
        // Field ids typed as "a, b" (the optimize node's `wrt`).
        ParamType::FieldList => {
            let names: Vec<&str> = v
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let committed = names.join(", ");
            text_field(ui, (&doc.id, spec.name, "list"), &committed, 110.0)
                .map(|s| {
                    let list: Vec<Value> = s
                        .split(|c: char| c == ',' || c.is_whitespace())
                        .filter(|x| !x.is_empty())
                        .map(Value::from)
                        .collect();
                    if list.is_empty() {
                        Value::Null
                    } else {
                        Value::Array(list)
                    }
                })
                .filter(|nv| nv != v)
        }
        ParamType::Shape => {
            let mut dims: Vec<i64> = v
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_i64).collect())
                .unwrap_or_default();
            if v.is_null() {
                return ui
                    .small_button("set")
                    .on_hover_text("give this node an extent")
                    .clicked()
                    .then(|| Value::from(vec![64, 64]));
            }
            let mut changed = false;
            for d in dims.iter_mut() {
                changed |= ui.add(egui::DragValue::new(d).range(1..=1 << 20)).changed();
            }
            // Layouts and loops take 1 to 3 axes.
            if dims.len() < 3 && ui.small_button("+").on_hover_text("add an axis").clicked() {
                dims.push(*dims.last().unwrap_or(&64));
                changed = true;
            }
            // An optional extent (a kernel's `range`, which `over` replaces)
            // loses its last axis too: it is unset then.
            let optional = spec.default_value().is_some_and(|d| d.is_null());
            if (dims.len() > 1 || optional)
                && ui
                    .small_button("-")
                    .on_hover_text(if dims.len() > 1 {
                        "remove the last axis"
                    } else {
                        "unset (a kernel then runs `over` a layout node)"
                    })
                    .clicked()
            {
                dims.pop();
                changed = true;
            }
            if dims.is_empty() {
                return changed.then_some(Value::Null);
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
        ParamType::Vec3 => {
            let mut c: Vec<f64> = v
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_default();
            c.resize(3, 0.0);
            let mut changed = false;
            ui.horizontal(|ui| {
                for (x, name) in c.iter_mut().zip(["x", "y", "z"]) {
                    ui.label(name);
                    changed |= ui.add(egui::DragValue::new(x).speed(0.01)).changed();
                }
            });
            changed.then(|| Value::from(c))
        }
        ParamType::Rect => {
            let mut r: Vec<f64> = v
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_else(|| vec![0.0, 0.0, 1.0, 1.0]);
            let mut changed = false;
            // A rectangle [min x, min y, max x, max y] or a box [min x,
            // min y, min z, max x, max y, max z] (3-D views): the button
            // turns one into the other, so a view of vec3 positions whose
            // domain was left 2-D can be fixed here.
            if compact {
                // On the node: one row of numbers (the inspector has the rows
                // and the 2-D / 3-D switch).
                for x in r.iter_mut() {
                    changed |= ui.add(egui::DragValue::new(x).speed(0.01)).changed();
                }
                return changed.then(|| Value::from(r));
            }
            let three = r.len() == 6;
            let mut toggled = false;
            ui.vertical(|ui| {
                let half = r.len() / 2;
                for (row, label) in ["min", "max"].into_iter().enumerate() {
                    ui.horizontal(|ui| {
                        ui.weak(label);
                        for x in r.iter_mut().skip(row * half).take(half) {
                            changed |= ui.add(egui::DragValue::new(x).speed(0.01)).changed();
                        }
                    });
                }
                let (text, hover) = if three {
                    ("2-D rect", "make this a rectangle [min x, min y, max x, max y] (2-D positions)")
                } else {
                    ("3-D box", "make this a box [min x, min y, min z, max x, max y, max z] (vec3 positions)")
                };
                toggled = ui.small_button(text).on_hover_text(hover).clicked();
            });
            if toggled {
                r = match (three, r.as_slice()) {
                    (true, [x0, y0, _, x1, y1, _]) => vec![*x0, *y0, *x1, *y1],
                    (false, [x0, y0, x1, y1]) => vec![*x0, *y0, 0.0, *x1, *y1, 1.0],
                    _ if three => vec![0.0, 0.0, 1.0, 1.0],
                    _ => vec![0.0, 0.0, 0.0, 1.0, 1.0, 1.0],
                };
                changed = true;
            }
            changed.then(|| Value::from(r))
        }
        // A kernel's `backward` (custom gradient, issue 11): edited in place,
        // committed when the field loses focus (the code window edits `code`).
        ParamType::Code if spec.name != "code" => {
            let committed = v.as_str().unwrap_or("");
            code_field(ui, (&doc.id, spec.name, "code"), committed)
                .map(|s| {
                    if s.trim().is_empty() {
                        Value::Null
                    } else {
                        Value::from(s)
                    }
                })
                .filter(|nv| nv != v)
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
            if compact {
                return ui.vertical(|ui| scalar_rows(ui, v)).inner;
            }
            ui.vertical(|ui| scalar_table(ui, &doc.id, v)).inner
        }
        ParamType::Init | ParamType::Camera | ParamType::Lights => {
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

/// A single-line text field whose typed text lives in egui's memory while it
/// has focus (so the document's value, re-read every frame, does not wipe
/// the keystrokes). Returns the text when the edit is committed: on Enter or
/// when focus leaves the field.
pub fn text_field(
    ui: &mut Ui,
    salt: impl std::hash::Hash + std::fmt::Debug,
    committed: &str,
    width: f32,
) -> Option<String> {
    let id = ui.id().with(salt);
    let mut text = ui
        .data_mut(|d| d.get_temp::<String>(id))
        .unwrap_or_else(|| committed.to_string());
    let r = ui.add(
        egui::TextEdit::singleline(&mut text)
            .id(id.with("edit"))
            .desired_width(width),
    );
    if r.has_focus() {
        ui.data_mut(|d| d.insert_temp(id, text.clone()));
    }
    if r.lost_focus() {
        ui.data_mut(|d| d.remove::<String>(id));
        return (text != committed).then_some(text);
    }
    None
}

/// A multi-line code box; like `text_field`, returns the text once it
/// loses focus, when it changed.
fn code_field(
    ui: &mut Ui,
    salt: impl std::hash::Hash + std::fmt::Debug,
    committed: &str,
) -> Option<String> {
    let id = ui.id().with(salt);
    let mut text = ui
        .data_mut(|d| d.get_temp::<String>(id))
        .unwrap_or_else(|| committed.to_string());
    let r = ui.add(
        egui::TextEdit::multiline(&mut text)
            .id(id.with("edit"))
            .code_editor()
            .desired_rows(4)
            .desired_width(260.0),
    );
    if r.has_focus() {
        ui.data_mut(|d| d.insert_temp(id, text.clone()));
    }
    if r.lost_focus() {
        ui.data_mut(|d| d.remove::<String>(id));
        return (text != committed).then_some(text);
    }
    None
}

/// The scalar types a kernel scalar can declare.
const SCALAR_TYPES: [&str; 3] = ["f32", "i32", "u32"];

/// The inspector's editor of kernel scalars: one row per scalar with its
/// name, type, default, optional min / max and doc, a button to remove it,
/// and one to add a new one. Every scalar is written back in the object
/// form (`{"type", "default", "min", "max", "doc"}`), which the loader
/// documents and checks. Returns the whole new `scalars` object on a change.
fn scalar_table(ui: &mut Ui, node: &str, scalars: &Value) -> Option<Value> {
    let map = scalars.as_object().cloned().unwrap_or_default();
    let mut out: Option<Map<String, Value>> = None;
    // The name column fits the longest name ("gravity", "bounce" whole).
    let font = egui::TextStyle::Body.resolve(ui.style());
    let name_width = map
        .keys()
        .map(|n| {
            ui.fonts_mut(|f| {
                f.layout_no_wrap(n.clone(), font.clone(), egui::Color32::WHITE)
                    .size()
                    .x
            })
        })
        .fold(70.0f32, f32::max)
        + 12.0;
    egui::Grid::new((node, "scalars"))
        .num_columns(7)
        .spacing([6.0, 4.0])
        .show(ui, |ui| {
            for h in ["name", "type", "default", "min", "max", "doc", ""] {
                ui.weak(h);
            }
            ui.end_row();
            for (name, decl) in &map {
                let mut d = object_form(decl);
                let mut changed = false;
                let mut rename = None;
                // The cell asks for the width: a grid column otherwise keeps
                // the width it had on the first frame.
                ui.horizontal(|ui| {
                    ui.set_min_width(name_width);
                    if let Some(new) = text_field(ui, (node, name, "name"), name, name_width) {
                        rename = Some(new);
                    }
                });
                let mut ty = d["type"].as_str().unwrap_or("f32").to_string();
                egui::ComboBox::from_id_salt((node, name, "type"))
                    .width(48.0)
                    .selected_text(&ty)
                    .show_ui(ui, |ui| {
                        for t in SCALAR_TYPES {
                            changed |= ui.selectable_value(&mut ty, t.to_string(), t).changed();
                        }
                    });
                let int = ty != "f32";
                d.insert("type".into(), Value::from(ty.as_str()));
                let lo = d.get("min").and_then(Value::as_f64);
                let hi = d.get("max").and_then(Value::as_f64);
                let range = (lo.unwrap_or(f64::MIN), hi.unwrap_or(f64::MAX));
                let mut default = d.get("default").and_then(Value::as_f64).unwrap_or(0.0);
                let r = if int {
                    let mut x = default as i64;
                    let r = ui.add(egui::DragValue::new(&mut x).range(
                        range.0.max(i32::MIN as f64) as i64..=range.1.min(u32::MAX as f64) as i64,
                    ));
                    default = x as f64;
                    r
                } else {
                    ui.add(
                        egui::DragValue::new(&mut default)
                            .speed(0.01)
                            .range(range.0..=range.1),
                    )
                };
                if r.changed() {
                    d.insert("default".into(), number_value(default, int));
                    changed = true;
                }
                for (key, bound) in [("min", lo), ("max", hi)] {
                    ui.horizontal(|ui| {
                        let mut on = bound.is_some();
                        if ui
                            .checkbox(&mut on, "")
                            .on_hover_text(format!("bounded {}", key))
                            .changed()
                        {
                            if on {
                                let x = if key == "min" {
                                    default.min(0.0)
                                } else {
                                    default.max(1.0)
                                };
                                d.insert(key.into(), number_value(x, int));
                            } else {
                                d.remove(key);
                            }
                            changed = true;
                        }
                        if let Some(mut x) = bound {
                            if ui
                                .add(egui::DragValue::new(&mut x).speed(if int {
                                    1.0
                                } else {
                                    0.01
                                }))
                                .changed()
                            {
                                d.insert(key.into(), number_value(x, int));
                                changed = true;
                            }
                        }
                    });
                }
                let doc = d
                    .get("doc")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                if let Some(new) = text_field(ui, (node, name, "doc"), &doc, 120.0) {
                    if new.is_empty() {
                        d.remove("doc");
                    } else {
                        d.insert("doc".into(), Value::from(new));
                    }
                    changed = true;
                }
                let remove = ui
                    .small_button("🗑")
                    .on_hover_text(format!("remove scalar '{}'", name))
                    .clicked();
                ui.end_row();
                if changed || rename.is_some() || remove {
                    keep_in_range(&mut d, int);
                    let m = out.get_or_insert_with(|| map.clone());
                    if remove {
                        m.remove(name);
                    } else if let Some(new) = rename.filter(|n| !n.is_empty() && !m.contains_key(n))
                    {
                        // Keep the order of the rows: rebuild the map with the new key in place.
                        let old = std::mem::take(m);
                        for (k, val) in old {
                            if &k == name {
                                m.insert(new.clone(), Value::Object(d.clone()));
                            } else {
                                m.insert(k, val);
                            }
                        }
                    } else {
                        m.insert(name.clone(), Value::Object(d));
                    }
                }
            }
        });
    if ui.button("+ Add scalar").clicked() {
        let m = out.get_or_insert_with(|| map.clone());
        let name = (1..)
            .map(|k| format!("s{}", k))
            .find(|n| !m.contains_key(n))
            .expect("unbounded");
        m.insert(name, serde_json::json!({"type": "f32", "default": 0.0}));
    }
    out.map(Value::Object)
}

/// A scalar declaration in its object form.
fn object_form(decl: &Value) -> Map<String, Value> {
    match decl {
        Value::Object(d) => {
            let mut d = d.clone();
            d.entry("type").or_insert(Value::from("f32"));
            d
        }
        Value::Number(n) if n.is_i64() || n.is_u64() => {
            let mut d = Map::new();
            d.insert("type".into(), Value::from("i32"));
            d.insert("default".into(), decl.clone());
            d
        }
        _ => {
            let mut d = Map::new();
            d.insert("type".into(), Value::from("f32"));
            d.insert("default".into(), Value::from(decl.as_f64().unwrap_or(0.0)));
            d
        }
    }
}

fn number_value(x: f64, int: bool) -> Value {
    if int {
        Value::from(x.round() as i64)
    } else {
        Value::from(x)
    }
}

/// Keeps a declaration the loader accepts after an edit: integer values for
/// integer types, u32 not negative, min ≤ max, and the default inside.
fn keep_in_range(d: &mut Map<String, Value>, int: bool) {
    let u = d.get("type").and_then(Value::as_str) == Some("u32");
    let get = |d: &Map<String, Value>, k: &str| d.get(k).and_then(Value::as_f64);
    let fix = |x: f64| if u { x.max(0.0) } else { x };
    let mut lo = get(d, "min").map(fix);
    let hi = get(d, "max").map(fix);
    if let (Some(l), Some(h)) = (lo, hi) {
        if l > h {
            lo = Some(h);
        }
    }
    for (k, b) in [("min", lo), ("max", hi)] {
        if let Some(b) = b {
            d.insert(k.into(), number_value(b, int));
        }
    }
    if let Some(x) = get(d, "default") {
        let x = fix(x)
            .max(lo.unwrap_or(f64::NEG_INFINITY))
            .min(hi.unwrap_or(f64::INFINITY));
        d.insert("default".into(), number_value(x, int));
    }
}
