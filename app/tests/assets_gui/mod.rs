//! Assets in the app: the add-node menu lists the asset library with the
//! node kinds, and choosing one adds a group node referencing the asset.

use super::gui::model::Command;
use super::support::{gpu_ok, harness_with, root};
use egui::{Event, Modifiers};
use egui_kittest::kittest::Queryable;
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

/// The user library of this test process (one folder: the app's library
/// is process-wide, and these tests run in parallel), emptied once.
fn user_library() -> std::path::PathBuf {
    static ONCE: std::sync::Once = std::sync::Once::new();
    let d = std::env::temp_dir().join(format!("weft-user-lib-{}", std::process::id()));
    ONCE.call_once(|| {
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        super::gui::asset_menu::set_user_library(Some(d.clone()));
    });
    d
}

/// The user library folder of the tests, holding `asset` at `version`
/// (the shipped v1 file with its version changed and a parameter added).
fn user_library_with_v2(asset: &str) -> std::path::PathBuf {
    let d = user_library();
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
    user_library_with_v2("sdf_noise2d");
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
    assert!(h.query_by_label_contains("newer: v2").is_some());
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
}

/// The fields `names` of `doc` after three frames on the vm, built as the
/// app builds (groups flattened against the app's library).
fn app_fields(doc: &GraphDoc, names: &[&str]) -> Vec<Vec<u32>> {
    let p = super::gui::asset_menu::build(doc, root().join("graphs"))
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
fn save_selection_as_asset_then_add_it_from_the_menu_computes_the_same_fields() {
    if !gpu_ok() {
        return;
    }
    let lib = user_library();
    let cfg = std::env::temp_dir().join(format!("weft-assets-save-{}", std::process::id()));
    let graph = root().join("graphs/heat.json");
    let mut h = harness_with(Some(graph.clone()), cfg);
    h.run_steps(3);
    let original = GraphDoc::load(&graph).unwrap();
    h.state_mut().model.push(Command::Group {
        ids: vec!["T_next".into(), "diffuse".into(), "apply".into()],
    });
    h.run_steps(2);
    let gid = h
        .state()
        .model
        .doc
        .nodes
        .iter()
        .find(|n| n.group.is_some())
        .expect("Ctrl+G made a group")
        .id
        .clone();
    // The group node's inspector: Save as asset…
    h.state_mut().selected = Some(gid.clone());
    h.run_steps(3);
    h.get_by_label("Save as asset…").click();
    h.run_steps(2);
    assert!(h
        .query_by_label_contains("Save selection as asset")
        .is_some());
    h.state_mut().asset_save.as_mut().unwrap().name = "heat_step".into();
    h.state_mut().asset_save.as_mut().unwrap().doc = "one explicit diffusion step".into();
    h.run_steps(2);
    h.get_by_label("diffuse.alpha").click();
    h.run_steps(2);
    assert!(
        h.state()
            .asset_save
            .as_ref()
            .unwrap()
            .promote
            .iter()
            .any(|(n, p, on)| n == "diffuse" && p == "alpha" && *on),
        "{:?}",
        h.state().asset_save
    );
    h.get_by_label("Save asset").click();
    h.run_steps(2);
    let file = lib.join("heat_step.v1.json");
    assert!(file.is_file(), "{:?}", h.state().model.log.last());
    assert!(h.state().asset_save.is_none());
    let saved = std::fs::read_to_string(&file).unwrap();
    // Saving v1 again is refused, and the file stays as it was.
    h.state_mut().asset_save = Some(super::gui::asset_save::Draft::new(
        &h.state().model.doc,
        vec![gid.clone()],
    ));
    {
        let d = h.state_mut().asset_save.as_mut().unwrap();
        d.name = "heat_step".into();
        assert_eq!(super::gui::asset_save::next_version("heat_step"), 2);
        d.version = 1;
    }
    h.run_steps(2);
    h.get_by_label("Save asset").click();
    h.run_steps(2);
    assert!(h.query_by_label_contains("exists already").is_some());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), saved);
    h.get_by_label("Cancel").click();
    h.run_steps(2);
    // The wires of the group node, to put the asset in its place.
    let grouped = h.state().model.doc.clone();
    let g = grouped.node(&gid).unwrap().clone();
    let touches = |e: &str| weft_ir::graph::document::split_endpoint(e).0 == gid;
    let wires: Vec<(String, String, bool)> = grouped
        .wires
        .iter()
        .map(|w| (w, false))
        .chain(grouped.exec.iter().map(|w| (w, true)))
        .filter(|(w, _)| touches(&w.from) || touches(&w.to))
        .map(|(w, x)| (w.from.clone(), w.to.clone(), x))
        .collect();
    h.state_mut()
        .model
        .push(Command::RemoveNode { id: gid.clone() });
    h.run_steps(2);
    // Shift+A, type its name, Enter: the asset is added by reference.
    let spot = h.state().graph_rect.center();
    h.event(Event::PointerMoved(spot));
    h.step();
    h.key_press_modifiers(Modifiers::SHIFT, egui::Key::A);
    h.run_steps(2);
    h.event(Event::Text("heat_st".into()));
    h.run_steps(2);
    assert!(h.query_by_label_contains("heat_step  v1").is_some());
    h.key_press(egui::Key::Enter);
    h.run_steps(3);
    let n = h
        .state()
        .model
        .doc
        .node("heat_step")
        .expect("Enter added the asset")
        .clone();
    let a = n.asset.clone().expect("a reference to the asset");
    assert_eq!((a.name.as_str(), a.version), ("heat_step", 1));
    // Its interface is the group's, with alpha promoted.
    let iface = super::gui::group_pins::interface(&n).unwrap();
    assert_eq!(iface.inputs, g.group.as_ref().unwrap().inputs);
    assert!(iface.params.iter().any(|p| p.target == "diffuse.alpha"));
    let swap = |e: &str| match e.strip_prefix(&format!("{}.", gid)) {
        Some(port) => format!("heat_step.{}", port),
        None if e == gid => "heat_step".to_string(),
        None => e.to_string(),
    };
    for (from, to, exec) in wires {
        h.state_mut().model.push(Command::Connect {
            from: swap(&from),
            to: swap(&to),
            exec,
        });
    }
    h.run_steps(3);
    assert!(
        h.state().model.problems.is_empty(),
        "{:?}",
        h.state().model.problems
    );
    let got = h.state().model.doc.clone();
    assert_eq!(app_fields(&got, &["T"]), fields_at(&original, &["T"]));
}

fn fields_at(doc: &GraphDoc, names: &[&str]) -> Vec<Vec<u32>> {
    let p = build_program(
        doc,
        &BuildOptions {
            base_dir: root().join("graphs"),
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
