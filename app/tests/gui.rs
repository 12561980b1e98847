//! The desktop app driven like a user would, with egui_kittest: real clicks
//! on real widgets, rendered with wgpu (lavapipe in CI).

#[path = "../src/gui/mod.rs"]
#[allow(dead_code)]
mod gui;

use egui_kittest::kittest::Queryable;
use egui_kittest::Harness;
use gui::model::{Command, Model};
use gui::{GuiOptions, WeftApp};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn gpu_ok() -> bool {
    match weft_runtime::gpu::GpuContext::new(weft_runtime::gpu::AdapterChoice::Any) {
        Ok(_) => true,
        Err(e) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("CI=true but no wgpu adapter: {}", e)
        }
        Err(e) => {
            eprintln!("skipping: no wgpu adapter ({})", e);
            false
        }
    }
}

fn harness(graph: &str) -> Harness<'static, WeftApp> {
    // Keep recent files and recovery data out of the user's home.
    let cfg = std::env::temp_dir().join(format!("weft-gui-test-{}", std::process::id()));
    std::env::set_var("WEFT_CONFIG_DIR", &cfg);
    let opts = GuiOptions {
        graph: Some(root().join("graphs").join(graph)),
        ..Default::default()
    };
    Harness::builder()
        .with_size((1400.0, 860.0))
        .wgpu()
        .build_eframe(move |cc| WeftApp::new(cc.wgpu_render_state.as_ref(), opts))
}

/// Steps until the background compile has produced a simulation.
fn wait_for_sim(h: &mut Harness<'static, WeftApp>) {
    for _ in 0..400 {
        h.step();
        if h.state().viewport.sim.is_some() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("the graph never compiled: {:?}", h.state().viewport.error);
}

#[test]
fn edits_undo_redo_refusals_and_save_round_trip() {
    let mut m = Model::new(gui::model::empty_doc(), None);
    m.push(Command::AddNode {
        kind: "dense".into(),
        pos: [0.0, 0.0],
    });
    m.push(Command::AddNode {
        kind: "field".into(),
        pos: [200.0, 0.0],
    });
    assert!(m.apply_pending());
    assert_eq!(m.doc.nodes.len(), 2);
    // An incompatible wire is refused with the reason, and changes nothing.
    let why = m
        .check_wire("field1.field", "dense1.parent", false)
        .unwrap_err();
    assert!(
        why.contains("cannot wire a field output 'field1.field' to a layout input 'dense1.parent'"),
        "{}",
        why
    );
    m.push(Command::Connect {
        from: "field1.field".into(),
        to: "dense1.parent".into(),
        exec: false,
    });
    assert!(!m.apply_pending());
    assert!(m.log.last().unwrap().contains("cannot wire"));
    m.push(Command::Connect {
        from: "dense1.cells".into(),
        to: "field1.layout".into(),
        exec: false,
    });
    m.push(Command::SetParam {
        node: "field1".into(),
        param: "type".into(),
        value: "vec2".into(),
    });
    assert!(m.apply_pending());
    assert!(m.problems.is_empty(), "{:?}", m.problems);
    m.undo();
    assert_eq!(m.doc.node("field1").unwrap().params.get("type"), None);
    m.redo();
    assert_eq!(m.doc.node("field1").unwrap().params["type"], "vec2");
    // Removing a node removes its wires.
    m.push(Command::RemoveNode {
        id: "dense1".into(),
    });
    m.apply_pending();
    assert!(m.doc.wires.is_empty());
    assert_eq!(
        m.problems[0].node(),
        Some("field1"),
        "the field lost its layout"
    );
    m.undo();
    let dir = std::env::temp_dir().join(format!("weft-gui-save-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("g.json");
    m.save_as(&path).unwrap();
    assert!(!m.dirty);
    let back = weft_ir::graph::GraphDoc::load(&path).unwrap();
    assert_eq!(
        back, m.doc,
        "saving and reloading gives the identical graph"
    );
}

#[test]
fn opens_runs_steps_and_the_viewport_changes() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat.json");
    wait_for_sim(&mut h);
    h.run_steps(3);
    let before = h.render().expect("renders");
    h.get_by_label("Step").click();
    h.run_steps(3);
    h.get_by_label("Step").click();
    h.run_steps(3);
    assert_eq!(h.state().viewport.sim.as_ref().unwrap().frame, 2);
    h.get_by_label_contains("frame 2");
    let after = h.render().expect("renders");
    let changed = before
        .pixels()
        .zip(after.pixels())
        .filter(|(a, b)| a != b)
        .count();
    assert!(
        changed > 500,
        "the viewport changed after two frames ({} pixels)",
        changed
    );
    // Play runs frames on its own; pause stops.
    h.get_by_label("▶ Play").click();
    h.run_steps(5);
    h.get_by_label("⏸ Pause").click();
    h.run_steps(2);
    assert!(h.state().viewport.sim.as_ref().unwrap().frame > 2);
}

#[test]
fn a_kernel_typo_is_reported_on_its_node_and_undo_restores_it() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat.json");
    wait_for_sim(&mut h);
    let code = h.state().model.doc.node("apply").unwrap().params["code"]
        .as_str()
        .unwrap()
        .replace("T_next[(i, j)]", "T_nxt[(i, j)] + 1");
    h.state_mut().model.push(Command::SetParam {
        node: "apply".into(),
        param: "code".into(),
        value: code.into(),
    });
    h.run_steps(3);
    let problem = h
        .state()
        .model
        .problems
        .first()
        .map(|p| p.to_string())
        .unwrap_or_default();
    assert!(problem.contains("node 'apply'"), "{}", problem);
    // The problem is listed; clicking it selects the node, whose inspector shows it.
    h.get_by_label(&problem).click();
    h.run_steps(2);
    assert_eq!(h.state().selected.as_deref(), Some("apply"));
    // Undo through the Edit menu restores the working code.
    h.get_by_label("Edit").click();
    h.run_steps(1);
    h.get_by_label("Undo  (Ctrl+Z)").click();
    h.run_steps(2);
    assert!(
        h.state().model.problems.is_empty(),
        "{:?}",
        h.state().model.problems
    );
    h.get_by_label("Edit").click();
    h.run_steps(1);
    h.get_by_label("Redo  (Ctrl+Shift+Z)").click();
    h.run_steps(2);
    assert!(!h.state().model.problems.is_empty());
}

#[test]
fn snapshot_of_the_app() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat_color.json");
    wait_for_sim(&mut h);
    for _ in 0..5 {
        h.get_by_label("Step").click();
        h.run_steps(2);
    }
    h.run_steps(3);
    // Frame-time labels change from run to run; everything else must match.
    let opts = egui_kittest::SnapshotOptions::new().max_failed_pixels(1500);
    h.snapshot_options("app_heat_color", &opts);
}

#[test]
fn dropped_wires_offer_compatible_nodes_and_paste_renames() {
    use gui::model::{compatible_kinds, PinKind};
    use weft_ir::graph::catalog::PortType;
    let field_inputs: Vec<&str> = compatible_kinds(PinKind::Data(PortType::Field), true)
        .iter()
        .map(|k| k.0)
        .collect();
    assert_eq!(
        field_inputs,
        vec!["image", "particles"],
        "a field output can feed views (kernel ports come from code)"
    );
    let layout_inputs: Vec<&str> = compatible_kinds(PinKind::Data(PortType::Layout), true)
        .iter()
        .map(|k| k.0)
        .collect();
    assert_eq!(layout_inputs, vec!["dense", "field"]);
    let exec_inputs: Vec<&str> = compatible_kinds(PinKind::Exec, true)
        .iter()
        .map(|k| k.0)
        .collect();
    assert_eq!(exec_inputs, vec!["kernel", "repeat"]);
    // What the dropped-wire menu queues: a node and the wire to it, applied together.
    let mut m = Model::open(&root().join("graphs/heat.json"));
    let id = m.next_id("image");
    m.push(Command::AddNode {
        kind: "image".into(),
        pos: [0.0, 0.0],
    });
    m.push(Command::Connect {
        from: "T_next.field".into(),
        to: format!("{}.field", id),
        exec: false,
    });
    assert!(m.apply_pending());
    assert!(m.doc.wires.iter().any(|w| w.to == format!("{}.field", id)));
    assert!(m.problems.is_empty(), "{:?}", m.problems);
    // Copy two connected nodes and paste them: new ids, the wire between them kept, one undo step.
    let json = m.copy_json(&["grid".to_string(), "T".to_string()]);
    let before = m.doc.nodes.len();
    m.push(Command::Paste {
        json,
        offset: [40.0, 40.0],
    });
    assert!(m.apply_pending());
    assert_eq!(m.doc.nodes.len(), before + 2);
    assert!(m
        .doc
        .wires
        .iter()
        .any(|w| w.from == "grid_copy.cells" && w.to == "T_copy.layout"));
    m.undo();
    assert_eq!(m.doc.nodes.len(), before);
}

#[test]
fn expression_kernels_open_in_a_nested_editor() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat_color.json");
    wait_for_sim(&mut h);
    // Select the kernel; its inspector offers the nested editor.
    h.state_mut().selected = Some("colorize".into());
    h.run_steps(2);
    h.get_all_by_label("Edit expression…")
        .last()
        .expect("the inspector's button")
        .click_accesskit();
    h.run_steps(3);
    assert!(
        h.state().open_expr.is_some(),
        "open_code = {:?}",
        h.state().open_code
    );
    h.get_by_label_contains("expression · colorize");
    h.get_by_label_contains("pick · select");
    // An edit in the nested editor is a normal undoable edit of the kernel's `expr`.
    let mut expr = h.state().model.doc.node("colorize").unwrap().params["expr"].clone();
    expr["nodes"][4]["params"]["name"] = "nope".into();
    h.state_mut().model.push(Command::SetParam {
        node: "colorize".into(),
        param: "expr".into(),
        value: expr,
    });
    h.run_steps(3);
    let p = h
        .state()
        .model
        .problems
        .first()
        .map(|p| p.to_string())
        .unwrap_or_default();
    assert!(
        p.contains("node 'colorize', expression node 'hot'") && p.contains("no scalar 'nope'"),
        "{}",
        p
    );
    h.state_mut().model.undo();
    h.run_steps(2);
    assert!(h.state().model.problems.is_empty());
}

#[test]
fn scalar_edits_keep_the_state_other_edits_recompile() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat.json");
    wait_for_sim(&mut h);
    for _ in 0..3 {
        h.get_by_label("Step").click();
        h.run_steps(2);
    }
    assert_eq!(h.state().viewport.sim.as_ref().unwrap().frame, 3);
    h.state_mut().model.push(Command::SetParam {
        node: "diffuse".into(),
        param: "scalars".into(),
        value: serde_json::json!({"alpha": 0.1, "boundary": 0.0, "n": 128}),
    });
    h.run_steps(3);
    let sim = h.state().viewport.sim.as_ref().unwrap();
    assert_eq!(sim.frame, 3, "a scalar change keeps the running state");
    let alpha = sim
        .program
        .kernels
        .iter()
        .find(|(_, k)| k.name == "diffuse")
        .unwrap()
        .1
        .params
        .iter()
        .find(|p| p.name == "alpha")
        .unwrap()
        .value;
    assert_eq!(f32::from_bits(alpha), 0.1, "and takes the new value");
    // A code edit recompiles in the background and starts over.
    let code = h.state().model.doc.node("apply").unwrap().params["code"]
        .as_str()
        .unwrap()
        .replace("T_next[(i, j)]", "T_next[(i, j)] * 0.5");
    h.state_mut().model.push(Command::SetParam {
        node: "apply".into(),
        param: "code".into(),
        value: code.into(),
    });
    h.step();
    for _ in 0..400 {
        h.step();
        if !h.state().viewport.compiling()
            && h.state()
                .viewport
                .sim
                .as_ref()
                .is_some_and(|s| s.frame == 0)
        {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("the edited graph did not recompile");
}
