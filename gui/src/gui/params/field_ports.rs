//! The inspector's editor of a kernel's declared field ports (param
//! `ports`): the declared names, each with a remove button, and a name box
//! with "Add field port", so that a field can be wired to a kernel before
//! its code uses the name. The model drops the wire of a removed port.

use super::super::model::kernel_ports;
use egui::Ui;
use serde_json::Value;
use weft_ir::graph::NodeDoc;

/// Why `name` cannot be added to `node`'s ports, or None.
pub fn refusal(node: &NodeDoc, declared: &[String], name: &str) -> Option<String> {
    let ident = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name != "_";
    let scalar = node
        .params
        .get("scalars")
        .and_then(Value::as_object)
        .is_some_and(|s| s.contains_key(name));
    if name.is_empty() {
        Some("type a port name first".into())
    } else if !ident {
        Some(format!(
            "'{}' is not a name: letters, digits and _, not starting with a digit",
            name
        ))
    } else if declared.iter().any(|p| p == name) || kernel_ports(node).iter().any(|p| p == name) {
        Some(format!("'{}' is already a port of this kernel", name))
    } else if scalar {
        Some(format!("'{}' is a scalar of this kernel", name))
    } else {
        None
    }
}

/// The list and the add box; returns the new `ports` value on an edit.
pub fn editor(ui: &mut Ui, doc: &NodeDoc, v: &Value) -> Option<Value> {
    let declared: Vec<String> = v
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    let used = kernel_ports(doc);
    let mut out = None;
    ui.vertical(|ui| {
        for (i, p) in declared.iter().enumerate() {
            ui.horizontal(|ui| {
                ui.monospace(p);
                if !used.contains(p) {
                    ui.weak("(not in the code yet)");
                }
                if ui
                    .small_button("×")
                    .on_hover_text(format!("Remove field port '{}' (and its wire)", p))
                    .clicked()
                {
                    let mut rest = declared.clone();
                    rest.remove(i);
                    out = Some(Value::from(rest));
                }
            });
        }
        let id = ui.id().with((&doc.id, "new field port"));
        let mut text: String = ui.data_mut(|d| d.get_temp(id)).unwrap_or_default();
        let mut add = false;
        ui.horizontal(|ui| {
            let r = ui.add(
                egui::TextEdit::singleline(&mut text)
                    .hint_text("port name")
                    .desired_width(90.0),
            );
            add = r.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
            let name = text.trim().to_string();
            let why = refusal(doc, &declared, &name);
            let button = ui
                .add_enabled(why.is_none(), egui::Button::new("Add field port"))
                .on_hover_text("A field input pin of this name: wire a field to it now, use the name in the code later.");
            let button = match &why {
                Some(w) if !name.is_empty() => button.on_disabled_hover_text(w),
                _ => button,
            };
            add = (add || button.clicked()) && why.is_none();
            if let Some(w) = why.filter(|_| !name.is_empty()) {
                ui.colored_label(egui::Color32::from_rgb(255, 170, 90), w);
            }
            if add {
                let mut list = declared.clone();
                list.push(name);
                out = Some(Value::from(list));
                text.clear();
            }
        });
        ui.data_mut(|d| d.insert_temp(id, text));
    });
    out
}
