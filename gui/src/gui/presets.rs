//! Parameter presets: a node's (or group's) parameter values saved under a
//! name and loaded back, from the inspector's Presets row.
//!
//! They live in the config folder, one file per node kind
//! (`presets/KIND.json`), per asset for asset groups
//! (`presets/asset_NAME.json`) and `presets/group.json` for inline groups:
//! a JSON object from preset name to the saved values. A kernel's preset
//! holds its scalars' values only (`{"scalars": {"alpha": 0.2}}`), and
//! loading sets the scalars the kernel has, so one kernel preset fits any
//! kernel with the same scalar names. Loading is one edit (one undo step).

use super::model::Command;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use weft_ir::graph::assets::Library;
use weft_ir::graph::NodeDoc;

/// The file name (without `.json`) a node's presets are kept under.
pub fn key(node: &NodeDoc) -> String {
    match (&node.asset, &node.group) {
        (Some(a), _) => format!("asset_{}", a.name),
        (None, Some(_)) => "group".into(),
        _ => node.kind.clone(),
    }
}

fn file(dir: &Path, node: &NodeDoc) -> PathBuf {
    dir.join("presets").join(format!("{}.json", key(node)))
}

/// The presets saved for `node`'s kind, by name.
pub fn list(dir: &Path, node: &NodeDoc) -> BTreeMap<String, Map<String, Value>> {
    std::fs::read_to_string(file(dir, node))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

fn write(
    dir: &Path,
    node: &NodeDoc,
    all: &BTreeMap<String, Map<String, Value>>,
) -> Result<(), String> {
    let f = file(dir, node);
    if let Some(d) = f.parent() {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {}", d.display(), e))?;
    }
    let text = serde_json::to_string_pretty(all).map_err(|e| e.to_string())?;
    weft_ir::io::write_atomic(&f, text.as_bytes()).map_err(|e| format!("{}: {}", f.display(), e))
}

/// A kernel scalar's value: a bare number, or its declaration's default.
fn scalar_value(decl: &Value) -> Option<Value> {
    match decl {
        Value::Object(o) => o.get("default").cloned(),
        v => Some(v.clone()),
    }
}

/// The values a preset of `node` holds: a kernel's scalar values, a
/// group's promoted parameters (the node's values, else the defaults),
/// else its parameters without its code. An asset group's parameters are
/// read from `lib`, the editor's library.
pub fn values(node: &NodeDoc, lib: &Library) -> Map<String, Value> {
    if let Some(s) = node.params.get("scalars").and_then(Value::as_object) {
        let vals: Map<String, Value> = s
            .iter()
            .filter_map(|(k, d)| scalar_value(d).map(|v| (k.clone(), v)))
            .collect();
        let mut m = Map::new();
        m.insert("scalars".into(), Value::Object(vals));
        return m;
    }
    if let Some(g) = super::group_pins::interface(node, lib) {
        // A group: every promoted parameter, set on the node or not.
        return g
            .params
            .iter()
            .filter_map(|p| {
                let v = node.params.get(&p.name).or(p.default.as_ref())?;
                Some((p.name.clone(), v.clone()))
            })
            .collect();
    }
    node.params
        .iter()
        .filter(|(k, _)| k.as_str() != "code")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Saves `node`'s values as preset `name` (replacing one of that name).
pub fn save(dir: &Path, node: &NodeDoc, name: &str, lib: &Library) -> Result<(), String> {
    let name = name.trim();
    if name.is_empty() {
        return Err("type a name for the preset".into());
    }
    let mut all = list(dir, node);
    all.insert(name.to_string(), values(node, lib));
    write(dir, node, &all)
}

/// Deletes preset `name` of `node`'s kind.
pub fn delete(dir: &Path, node: &NodeDoc, name: &str) -> Result<(), String> {
    let mut all = list(dir, node);
    all.remove(name);
    write(dir, node, &all)
}

/// The edits that give `node` the values of `preset` (pushed in one pass,
/// they are one undo step). A kernel gets the scalars it has; the values
/// of scalars it lacks are left out.
pub fn load(node: &NodeDoc, preset: &Map<String, Value>) -> Vec<Command> {
    let set = |param: &str, value: Value| Command::SetParam {
        node: node.id.clone(),
        param: param.to_string(),
        value,
    };
    if let (Some(have), Some(want)) = (
        node.params.get("scalars").and_then(Value::as_object),
        preset.get("scalars").and_then(Value::as_object),
    ) {
        let mut next = have.clone();
        for (k, v) in want {
            match next.get_mut(k) {
                Some(Value::Object(decl)) => {
                    decl.insert("default".into(), v.clone());
                }
                Some(slot) => *slot = v.clone(),
                None => {}
            }
        }
        if &next == have {
            return vec![];
        }
        return vec![set("scalars", Value::Object(next))];
    }
    preset
        .iter()
        .filter(|(k, v)| node.params.get(k.as_str()) != Some(v))
        .map(|(k, v)| set(k, v.clone()))
        .collect()
}

/// The inspector's Presets row: a name box and Save, then each saved
/// preset with Load and Delete. `name` is the box's text; `lib` is the
/// editor's library.
pub fn section(
    ui: &mut egui::Ui,
    dir: &Path,
    node: &NodeDoc,
    lib: &Library,
    name: &mut String,
    commands: &mut Vec<Command>,
    log: &mut Vec<String>,
) {
    egui::CollapsingHeader::new("Presets")
        .id_salt(("presets", &node.id))
        .show(ui, |ui| {
            ui.horizontal(|ui| {
                ui.add(
                    egui::TextEdit::singleline(name)
                        .hint_text("preset name")
                        .desired_width(120.0),
                );
                if ui.button("Save preset").clicked() {
                    match save(dir, node, name, lib) {
                        Ok(()) => {
                            log.push(format!("saved preset '{}' for {}", name.trim(), key(node)))
                        }
                        Err(e) => log.push(e),
                    }
                }
            });
            for (pname, values) in list(dir, node) {
                ui.horizontal(|ui| {
                    ui.label(&pname);
                    if ui
                        .small_button("Load")
                        .on_hover_text(format!("set {}", Value::Object(values.clone())))
                        .clicked()
                    {
                        commands.extend(load(node, &values));
                    }
                    if ui.small_button("Delete").clicked() {
                        if let Err(e) = delete(dir, node, &pname) {
                            log.push(e);
                        }
                    }
                });
            }
        });
}
