//! Assets in the app: the add-node menu lists the asset library with the
//! node kinds, and choosing one adds a group node referencing the asset.

use super::gui::asset_menu::AssetLibraries;
use super::gui::model::{Command, Model};
use super::gui::WeftApp;
use super::support::{gpu_ok, harness_with, root};
use egui::{Event, Modifiers};
use egui_kittest::kittest::Queryable;
use egui_kittest::Harness;
use std::path::PathBuf;
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
    let spot = h.state().canvas.graph_rect.center();
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

/// An empty user library folder of this test process for the test `tag`
/// (each editor is handed its own: the library is the editor's value, not
/// the process's, and these tests run in parallel).
fn user_library(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("weft-user-lib-{}-{}", std::process::id(), tag));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The app on `graph` with `lib` as its user library (the setter the app
/// has for it), re-checked against it.
fn harness_with_library(
    graph: PathBuf,
    cfg: PathBuf,
    lib: &std::path::Path,
) -> Harness<'static, WeftApp> {
    let mut h = harness_with(Some(graph), cfg);
    h.state_mut()
        .model
        .assets
        .set_user_library(Some(lib.to_path_buf()));
    h.state_mut().model.validate();
    h
}

/// A user library folder of the tests (`tag`), holding `asset` at version
/// 2 (the shipped v1 file with its version changed and a parameter added).
fn user_library_with_v2(tag: &str, asset: &str) -> PathBuf {
    let d = user_library(tag);
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
    let lib = user_library_with_v2("upd", "sdf_noise2d");
    let cfg = std::env::temp_dir().join(format!("weft-assets-upd-{}", std::process::id()));
    let mut h = harness_with_library(root().join("assets/tests/sdf_noise2d.json"), cfg, &lib);
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
/// app builds (groups flattened against the app's library, `assets`).
fn app_fields(doc: &GraphDoc, assets: &AssetLibraries, names: &[&str]) -> Vec<Vec<u32>> {
    let p = assets
        .build(doc, root().join("graphs"))
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
    let lib = user_library("save");
    let cfg = std::env::temp_dir().join(format!("weft-assets-save-{}", std::process::id()));
    let graph = root().join("graphs/heat.json");
    let mut h = harness_with_library(graph.clone(), cfg, &lib);
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
    h.state_mut().dialogs.asset_save.as_mut().unwrap().name = "heat_step".into();
    h.state_mut().dialogs.asset_save.as_mut().unwrap().doc = "one explicit diffusion step".into();
    h.run_steps(2);
    h.get_by_label("diffuse.alpha").click();
    h.run_steps(2);
    assert!(
        h.state()
            .dialogs
            .asset_save
            .as_ref()
            .unwrap()
            .promote
            .iter()
            .any(|(n, p, on)| n == "diffuse" && p == "alpha" && *on),
        "{:?}",
        h.state().dialogs.asset_save
    );
    h.get_by_label("Save asset").click();
    h.run_steps(2);
    let file = lib.join("heat_step.v1.json");
    assert!(file.is_file(), "{:?}", h.state().model.log.last());
    assert!(h.state().dialogs.asset_save.is_none());
    let saved = std::fs::read_to_string(&file).unwrap();
    // Saving v1 again is refused, and the file stays as it was.
    let library = h.state().model.assets.library();
    h.state_mut().dialogs.asset_save = Some(super::gui::asset_save::Draft::new(
        &h.state().model.doc,
        vec![gid.clone()],
        &library,
    ));
    {
        let d = h.state_mut().dialogs.asset_save.as_mut().unwrap();
        d.name = "heat_step".into();
        assert_eq!(
            super::gui::asset_save::next_version("heat_step", &library),
            2
        );
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
    let spot = h.state().canvas.graph_rect.center();
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
    let iface = super::gui::group_pins::interface(&n, &h.state().model.assets.library()).unwrap();
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
    let assets = h.state().model.assets.clone();
    assert_eq!(
        app_fields(&got, &assets, &["T"]),
        fields_at(&original, &["T"])
    );
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

/// A user library folder (`tag`) holding one asset of its own, `name` v1
/// (the shipped emitter2d under another name).
fn user_library_with(tag: &str, name: &str) -> PathBuf {
    let d = user_library(tag);
    let mut v: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("assets/emitter2d.v1.json")).unwrap(),
    )
    .unwrap();
    v["asset"]["name"] = name.into();
    std::fs::write(
        d.join(format!("{}.v1.json", name)),
        serde_json::to_string_pretty(&v).unwrap(),
    )
    .unwrap();
    d
}

/// A group node referencing asset `name` v1.
fn asset_node(name: &str) -> weft_ir::graph::NodeDoc {
    weft_ir::graph::NodeDoc {
        id: name.into(),
        kind: weft_ir::graph::groups::GROUP.into(),
        asset: Some(weft_ir::graph::AssetRef {
            name: name.into(),
            version: 1,
        }),
        ..Default::default()
    }
}

/// Two editors, each with a user library of its own, live side by side:
/// each resolves (pins, menu, build) only its own library's assets. With
/// the library in a process-wide value, the second choice would be the
/// first editor's too.
#[test]
fn two_editors_with_different_user_libraries_do_not_see_each_others_assets() {
    let (lib_a, lib_b) = (
        user_library_with("two-a", "only_in_a"),
        user_library_with("two-b", "only_in_b"),
    );
    let graph = root().join("graphs/heat.json");
    let open = |lib: &PathBuf| {
        let mut m = Model::open(&graph);
        m.assets.set_user_library(Some(lib.clone()));
        m.validate();
        m
    };
    let (a, b) = (open(&lib_a), open(&lib_b));
    let (la, lb) = (a.assets.library(), b.assets.library());
    assert_eq!(la.versions("only_in_a"), [1]);
    assert!(la.versions("only_in_b").is_empty(), "{:?}", la.dirs);
    assert_eq!(lb.versions("only_in_b"), [1]);
    assert!(lb.versions("only_in_a").is_empty(), "{:?}", lb.dirs);
    // Both still see the shipped library.
    assert_eq!(la.versions("emitter2d"), lb.versions("emitter2d"));
    assert!(!la.versions("emitter2d").is_empty());
    // A node referencing A's asset has its pins in A only.
    let node = asset_node("only_in_a");
    let (ins, outs) = super::gui::model::pins(&node, &la);
    assert!(!ins.is_empty() && !outs.is_empty());
    assert_eq!(super::gui::model::pins(&node, &lb), (vec![], vec![]));
    // The build: A's model resolves it, B's reports it missing.
    let mut doc = a.doc.clone();
    doc.nodes.push(asset_node("only_in_b"));
    let build = |m: &Model| m.assets.build(&doc, m.assets.base_dir()).err();
    let missing = |e: Option<weft_ir::graph::GraphErrors>| {
        e.is_some_and(|e| {
            e.to_string()
                .contains("asset 'only_in_b' version 1 is not in the library")
        })
    };
    assert!(missing(build(&a)), "A sees B's asset");
    assert!(!missing(build(&b)), "{:?}", build(&b));
    // And in the app: Shift+A lists each editor's own asset only.
    if !gpu_ok() {
        return;
    }
    let cfg = |t: &str| {
        std::env::temp_dir().join(format!("weft-assets-two-{}-{}", std::process::id(), t))
    };
    let mut ha = harness_with_library(graph.clone(), cfg("a"), &lib_a);
    let mut hb = harness_with_library(graph.clone(), cfg("b"), &lib_b);
    for (h, mine, theirs) in [
        (&mut ha, "only_in_a  v1", "only_in_b"),
        (&mut hb, "only_in_b  v1", "only_in_a"),
    ] {
        h.run_steps(3);
        let spot = h.state().canvas.graph_rect.center();
        h.event(Event::PointerMoved(spot));
        h.step();
        h.key_press_modifiers(Modifiers::SHIFT, egui::Key::A);
        h.run_steps(2);
        h.event(Event::Text("only_in".into()));
        h.run_steps(2);
        assert!(
            h.query_by_label_contains(mine).is_some(),
            "{} not listed",
            mine
        );
        assert!(
            h.query_by_label_contains(theirs).is_none(),
            "{} listed",
            theirs
        );
    }
}
