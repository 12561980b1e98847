//! Assets in the app: the add-node menu lists the asset library with the
//! node kinds, and choosing one adds a group node referencing the asset.

use super::gui::model::Command;
use super::support::{gpu_ok, harness_with, root};
use egui::{Event, Modifiers};
use weft_ir::graph::{build_program, BuildOptions, GraphDoc};
use weft_runtime::{Backend, SimOptions, Simulation};

fn fields(doc: &GraphDoc, names: &[&str]) -> Vec<Vec<u32>> {
    let p = build_program(
        doc,
        &BuildOptions {
            base_dir: root().join("assets/tests"),
        },
    )
    .unwrap_or_else(|e| panic!("{}", e));
    let mut s = Simulation::new(
        p,
        &SimOptions {
            backend: Backend::Vm,
            ..Default::default()
        },
    )
    .unwrap();
    s.start().unwrap();
    for _ in 0..3 {
        s.step_frame().unwrap();
    }
    names
        .iter()
        .map(|n| s.read_field(s.field(n).unwrap()).unwrap())
        .collect()
}

#[test]
fn shift_a_finds_an_asset_and_adds_a_group_referencing_it() {
    if !gpu_ok() {
        return;
    }
    let cfg = std::env::temp_dir().join(format!("weft-assets-gui-{}", std::process::id()));
    let test_graph = root().join("assets/tests/emitter2d.json");
    let mut h = harness_with(Some(test_graph.clone()), cfg);
    h.run_steps(3);
    // The test graph without its emitter group.
    h.state_mut()
        .model
        .push(Command::RemoveNode { id: "emit".into() });
    h.run_steps(2);
    assert!(h.state().model.doc.node("emit").is_none());
    let spot = h.state().graph_rect.center();
    h.event(Event::PointerMoved(spot));
    h.step();
    h.key_press_modifiers(Modifiers::SHIFT, egui::Key::A);
    h.run_steps(2);
    h.event(Event::Text("emitter".into()));
    h.run_steps(2);
    // Listed with its version and doc.
    assert!(h.query_by_label_contains("emitter2d  v1").is_some());
    h.key_press(egui::Key::Enter);
    h.run_steps(3);
    let n = h
        .state()
        .model
        .doc
        .node("emitter2d")
        .expect("Enter added the asset")
        .clone();
    let a = n.asset.expect("a reference to the asset");
    assert_eq!((a.name.as_str(), a.version), ("emitter2d", 1));
    assert!(n.group.is_none());
    // Wired and set as the test graph's `emit`, it computes the same fields.
    let want = GraphDoc::load(&test_graph).unwrap();
    let emit = want.node("emit").unwrap().clone();
    for (from, to, exec) in [
        ("x.field", "emitter2d.x", false),
        ("v.field", "emitter2d.v", false),
        ("frame.then", "emitter2d.run", true),
        ("emitter2d.then", "drift", true),
    ] {
        h.state_mut().model.push(Command::Connect {
            from: from.into(),
            to: to.into(),
            exec,
        });
    }
    for (k, v) in &emit.params {
        h.state_mut().model.push(Command::SetParam {
            node: "emitter2d".into(),
            param: k.clone(),
            value: v.clone(),
        });
    }
    h.run_steps(3);
    let got = h.state().model.doc.clone();
    assert!(
        h.state().model.problems.is_empty(),
        "{:?}",
        h.state().model.problems
    );
    assert_eq!(fields(&got, &["x", "v"]), fields(&want, &["x", "v"]));
}

/// A user library folder of the test's own, holding `asset` at `version`
/// (the shipped v1 file with its version changed and a parameter added).
fn user_library_with_v2(asset: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("weft-user-lib-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join(format!("assets/{}.v1.json", asset))).unwrap(),
    )
    .unwrap();
    v["asset"]["version"] = 2.into();
    v["asset"]["params"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"name": "extra", "target": "k.noise", "default": 0.0, "doc": "new in v2"}));
    std::fs::write(
        d.join(format!("{}.v2.json", asset)),
        serde_json::to_string_pretty(&v).unwrap(),
    )
    .unwrap();
    d
}

#[test]
fn a_newer_asset_version_is_offered_with_its_interface_diff_and_updates_in_one_step() {
    if !gpu_ok() {
        return;
    }
    let lib = user_library_with_v2("sdf_noise2d");
    super::gui::asset_menu::set_user_library(Some(lib.clone()));
    let cfg = std::env::temp_dir().join(format!("weft-assets-upd-{}", std::process::id()));
    let mut h = harness_with(Some(root().join("assets/tests/sdf_noise2d.json")), cfg);
    h.run_steps(3);
    let id = h
        .state()
        .model
        .doc
        .nodes
        .iter()
        .find(|n| n.asset.as_ref().is_some_and(|a| a.name == "sdf_noise2d"))
        .unwrap()
        .id
        .clone();
    // The badge on the node's title.
    assert!(h.query_by_label_contains("⬆ v2").is_some());
    h.state_mut().selected = Some(id.clone());
    h.run_steps(3);
    assert!(h.query_by_label_contains("+ parameter extra").is_some());
    let before = h.state().model.doc.clone();
    h.get_by_label("Update to v2").click();
    h.run_steps(3);
    let n = h.state().model.doc.node(&id).unwrap().clone();
    assert_eq!(n.asset.unwrap().version, 2);
    // One undo step back to v1.
    h.key_press_modifiers(Modifiers::COMMAND, egui::Key::Z);
    h.run_steps(2);
    assert_eq!(h.state().model.doc, before);
    super::gui::asset_menu::set_user_library(None);
}
