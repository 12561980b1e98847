//! Presets in the inspector: save a kernel's scalar values under a name,
//! change them, load the preset back (one undo step), delete it.

use super::gui::model::Command;
use super::support::{gpu_ok, harness_with, root};
use egui::Modifiers;
use egui_kittest::kittest::Queryable;
use serde_json::Value;

fn alpha(h: &egui_kittest::Harness<'static, super::gui::WeftApp>) -> Value {
    h.state().model.doc.node("diffuse").unwrap().params["scalars"]["alpha"]["default"].clone()
}

#[test]
fn a_preset_saves_loads_in_one_undo_step_and_deletes() {
    if !gpu_ok() {
        return;
    }
    let cfg = std::env::temp_dir().join(format!("weft-presets-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cfg);
    let mut h = harness_with(Some(root().join("graphs/heat.json")), cfg.clone());
    h.run_steps(3);
    h.state_mut().selected = Some("diffuse".into());
    h.run_steps(3);
    h.get_by_label("Presets").click();
    h.run_steps(2);
    let original = h.state().model.doc.clone();
    h.state_mut().dialogs.preset_name = "soft".into();
    h.run_steps(2);
    h.get_by_label("Save preset").click();
    h.run_steps(2);
    assert!(
        cfg.join("presets/kernel.json").is_file(),
        "{:?}",
        h.state().model.log
    );
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(cfg.join("presets/kernel.json")).unwrap())
            .unwrap();
    assert_eq!(saved["soft"]["scalars"]["alpha"], alpha(&h));
    // Another value, as a slider would set it.
    let mut scalars = original.node("diffuse").unwrap().params["scalars"].clone();
    scalars["alpha"]["default"] = serde_json::json!(0.05);
    scalars["boundary"] = serde_json::json!(1.0);
    h.state_mut().model.push(Command::SetParam {
        node: "diffuse".into(),
        param: "scalars".into(),
        value: scalars,
    });
    h.run_steps(3);
    assert_eq!(alpha(&h), serde_json::json!(0.05));
    let changed = h.state().model.doc.clone();
    h.get_by_label("Load").click();
    h.run_steps(3);
    assert_eq!(h.state().model.doc, original);
    // One undo step back to the changed values.
    h.key_press_modifiers(Modifiers::COMMAND, egui::Key::Z);
    h.run_steps(2);
    assert_eq!(h.state().model.doc, changed);
    h.get_by_label("Delete").click();
    h.run_steps(2);
    assert!(h.query_by_label("Load").is_none());
    let left: Value =
        serde_json::from_str(&std::fs::read_to_string(cfg.join("presets/kernel.json")).unwrap())
            .unwrap();
    assert!(left.get("soft").is_none());
}

#[test]
fn an_asset_group_preset_holds_its_promoted_parameters() {
    if !gpu_ok() {
        return;
    }
    let cfg = std::env::temp_dir().join(format!("weft-presets-asset-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cfg);
    let mut h = harness_with(
        Some(root().join("assets/tests/sdf_noise2d.json")),
        cfg.clone(),
    );
    h.run_steps(3);
    let n = h
        .state()
        .model
        .doc
        .nodes
        .iter()
        .find(|n| n.asset.is_some())
        .unwrap()
        .clone();
    let iface = super::gui::group_pins::interface(&n, &h.state().model.assets.library()).unwrap();
    h.state_mut().selected = Some(n.id.clone());
    h.run_steps(3);
    h.get_by_label("Presets").click();
    h.run_steps(2);
    h.state_mut().dialogs.preset_name = "look".into();
    h.run_steps(2);
    h.get_by_label("Save preset").click();
    h.run_steps(2);
    let name = n.asset.as_ref().unwrap().name.clone();
    let saved: Value = serde_json::from_str(
        &std::fs::read_to_string(cfg.join(format!("presets/asset_{}.json", name))).unwrap(),
    )
    .unwrap();
    for p in &iface.params {
        let want = n.params.get(&p.name).or(p.default.as_ref());
        assert_eq!(saved["look"].get(&p.name), want, "{}", p.name);
    }
}
