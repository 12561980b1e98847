//! The desktop app driven like a user would, with egui_kittest: real clicks
//! on real widgets, rendered with wgpu (lavapipe in CI).

mod assets_gui;
mod camera;
mod layout;
use weft_gui::gui;
mod presets_gui;
mod support;

use egui_kittest::kittest::Queryable;
use egui_kittest::Harness;
use gui::model::{Command, Model};
use gui::{GuiOptions, WeftApp};
use std::path::{Path, PathBuf};
use support::{gpu_ok, harness_with, play_until, root, settle, wait_for_sim};

/// A fresh configuration folder: recent files and recovery data stay out of
/// the user's home, and one harness's autosave out of the next one's way.
fn config_dir() -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    std::env::temp_dir().join(format!("weft-gui-test-{}-{}", std::process::id(), n))
}

fn harness(graph: &str) -> Harness<'static, WeftApp> {
    harness_with(Some(root().join("graphs").join(graph)), config_dir())
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
    settle(&mut h);
    h.get_by_label("Step").click();
    h.run_steps(3);
    settle(&mut h);
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
    play_until(&mut h, 4);
    h.get_by_label("⏸ Pause").click();
    settle(&mut h);
    assert!(h.state().viewport.sim.as_ref().unwrap().frame >= 4);
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
    // Relative to the package folder (cargo's working directory for tests),
    // so the window title, and the snapshot, are the same in every checkout.
    let mut h = harness_with(
        Some(PathBuf::from("../graphs/heat_color.json")),
        config_dir(),
    );
    wait_for_sim(&mut h);
    for _ in 0..5 {
        h.get_by_label("Step").click();
        h.run_steps(2);
        settle(&mut h);
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
        vec![
            "image",
            "particles",
            "surface",
            "plot",
            "histogram",
            "volume"
        ],
        "a field output can feed views (kernel ports come from code)"
    );
    let layout_inputs: Vec<&str> = compatible_kinds(PinKind::Data(PortType::Layout), true)
        .iter()
        .map(|k| k.0)
        .collect();
    assert_eq!(
        layout_inputs,
        vec![
            "dense",
            "bitmasked",
            "pointer",
            "bit_struct",
            "bit_array",
            "dynamic",
            "hash",
            "field",
            "clear"
        ]
    );
    let exec_inputs: Vec<&str> = compatible_kinds(PinKind::Exec, true)
        .iter()
        .map(|k| k.0)
        .collect();
    assert_eq!(
        exec_inputs,
        vec!["kernel", "repeat", "tape", "optimize", "clear"]
    );
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
        h.state().bodies.open_expr.is_some(),
        "open_code = {:?}",
        h.state().bodies.open_code
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
    // Auto layout places the body in data-flow columns, as one undo step.
    // Every node is drawn and spaced by its drawn size: none overlaps
    // another (or hides its output pin) afterwards.
    let before = h.state().model.doc.node("colorize").unwrap().params["expr"].clone();
    assert_eq!(
        h.state().bodies.expr_rects.len(),
        before["nodes"].as_array().unwrap().len()
    );
    h.get_by_label("Auto layout").click();
    h.run_steps(3);
    let after = h.state().model.doc.node("colorize").unwrap().params["expr"].clone();
    assert_ne!(after, before);
    let x = |id: &str| {
        let n = after["nodes"].as_array().unwrap().iter();
        n.clone().find(|n| n["id"] == id).unwrap()["pos"][0]
            .as_f64()
            .unwrap()
    };
    assert!(x("t") < x("mix") && x("mix") < x("pick") && x("pick") < x("out"));
    let body = weft_ir::graph::expr_body::ExprBody::parse("colorize", &after).unwrap();
    assert!(!gui::expr_view::needs_layout(&body));
    let rects: Vec<(String, egui::Rect)> = h
        .state()
        .bodies
        .expr_rects
        .iter()
        .map(|(k, r)| (k.clone(), *r))
        .collect();
    let o = overlapping(&rects);
    assert!(o.is_empty(), "overlapping after Auto layout: {:?}", o);
    h.state_mut().model.undo();
    h.run_steps(2);
    assert_eq!(
        h.state().model.doc.node("colorize").unwrap().params["expr"],
        before
    );
    // Ctrl+wheel over the floating window leaves the graph behind it as it is.
    let window = h.get_by_label_contains("expression · colorize").rect();
    let over = window.center_bottom() - egui::vec2(0.0, 40.0);
    assert!(h.state().canvas.graph_rect.contains(over), "{:?}", over);
    let view = h.state().canvas.graph_to_screen;
    h.event(Event::PointerMoved(over));
    h.step();
    h.event(Event::MouseWheel {
        unit: egui::MouseWheelUnit::Line,
        delta: egui::vec2(0.0, 1.0),
        phase: egui::TouchPhase::Move,
        modifiers: Modifiers::COMMAND,
    });
    h.run_steps(3);
    assert_eq!(h.state().canvas.graph_to_screen, view);
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
        settle(&mut h);
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

/// heat.json on the VM (it caches every frame it runs), stepped to frame 3.
fn heat_at_frame_3_on_the_vm() -> Harness<'static, WeftApp> {
    let mut h = harness("heat.json");
    wait_for_sim(&mut h);
    let doc = h.state().model.doc.clone();
    let (assets, rev) = (h.state().model.assets.clone(), h.state().model.revision);
    h.state_mut().viewport.backend = weft_runtime::Backend::Vm;
    h.state_mut().viewport.rebuild(rev, &doc, &assets);
    for _ in 0..400 {
        h.step();
        let vp = &h.state().viewport;
        if !vp.compiling()
            && vp
                .sim
                .as_ref()
                .is_some_and(|s| s.backend() == Some(weft_runtime::Backend::Vm))
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    settle(&mut h);
    for _ in 0..3 {
        h.get_by_label("Step").click();
        h.run_steps(2);
        settle(&mut h);
    }
    assert_eq!(h.state().viewport.sim.as_ref().unwrap().frame, 3);
    assert!(
        h.state().viewport.cache.where_is(2).is_some(),
        "frames cached"
    );
    h
}

/// Pushes `c` as the editor does and lets the viewport follow.
fn edit_and_follow(h: &mut Harness<'static, WeftApp>, c: Command) {
    h.state_mut().model.push(c);
    h.run_steps(3);
    settle(h);
    assert_eq!(
        h.state().viewport.built_revision(),
        Some(h.state().model.revision),
        "the viewport followed the edit"
    );
}

/// The running simulation was neither rebuilt nor reset, and kept its
/// cached frames (`generation` counts new simulations and resets).
fn assert_kept(h: &Harness<'static, WeftApp>, generation: u64, what: &str) {
    let vp = &h.state().viewport;
    assert_eq!(
        vp.sim.as_ref().unwrap().frame,
        3,
        "{} keeps the frame",
        what
    );
    assert_eq!(vp.generation, generation, "{} keeps the simulation", what);
    assert!(
        vp.cache.where_is(2).is_some(),
        "{} keeps the frame cache",
        what
    );
}

#[test]
fn moving_a_node_keeps_the_frame_cache() {
    if !gpu_ok() {
        return;
    }
    let mut h = heat_at_frame_3_on_the_vm();
    let generation = h.state().viewport.generation;
    let pos = h.state().model.doc.node("diffuse").unwrap().pos;
    edit_and_follow(
        &mut h,
        Command::MoveNode {
            id: "diffuse".into(),
            pos: [pos[0] + 120.0, pos[1] + 30.0],
        },
    );
    assert_kept(&h, generation, "moving a node");
    // A scalar edit, by contrast, keeps the state but not the frames
    // simulated with the old value.
    let mut scalars = h.state().model.doc.node("diffuse").unwrap().params["scalars"].clone();
    scalars["alpha"] = serde_json::json!(0.1);
    edit_and_follow(
        &mut h,
        Command::SetParam {
            node: "diffuse".into(),
            param: "scalars".into(),
            value: scalars,
        },
    );
    let vp = &h.state().viewport;
    assert_eq!(vp.sim.as_ref().unwrap().frame, 3);
    assert_eq!(vp.cache.where_is(2), None, "frames of the old value go");
}

#[test]
fn editing_a_comment_keeps_the_simulation_running() {
    if !gpu_ok() {
        return;
    }
    let mut h = heat_at_frame_3_on_the_vm();
    let generation = h.state().viewport.generation;
    let mut frame = h.state().model.doc.frames[0].clone();
    frame.text = "what the layout holds, edited".into();
    edit_and_follow(&mut h, Command::SetFrame { frame });
    assert_kept(&h, generation, "editing a comment");
    assert!(!h.state().viewport.compiling(), "no rebuild under way");
    let mut note = h.state().model.doc.frames[0].clone();
    note.id = "note".into();
    note.title = "Note".into();
    edit_and_follow(&mut h, Command::AddFrame { frame: note });
    assert_kept(&h, generation, "adding a comment");
}

// ---- Pointer-driven tests: real presses, moves and releases at the places
// the editor drew things (graph coordinates mapped through its transform). ----

use egui::{Event, Modifiers, PointerButton, Pos2};

/// Press at `a`, move to `b` over several frames, release (with `m` held).
fn drag(h: &mut Harness<'static, WeftApp>, a: Pos2, b: Pos2, m: Modifiers) {
    h.event(Event::ModifiersChanged(m));
    h.event(Event::PointerMoved(a));
    h.step();
    h.event(Event::PointerButton {
        pos: a,
        button: PointerButton::Primary,
        pressed: true,
        modifiers: m,
    });
    h.step();
    for k in 1..=8 {
        h.event(Event::PointerMoved(a + (b - a) * (k as f32 / 8.0)));
        h.step();
    }
    h.event(Event::PointerButton {
        pos: b,
        button: PointerButton::Primary,
        pressed: false,
        modifiers: m,
    });
    h.step();
    h.event(Event::ModifiersChanged(Modifiers::NONE));
    h.step();
}

fn click(h: &mut Harness<'static, WeftApp>, p: Pos2, button: PointerButton) {
    h.event(Event::PointerMoved(p));
    h.step();
    for pressed in [true, false] {
        h.event(Event::PointerButton {
            pos: p,
            button,
            pressed,
            modifiers: Modifiers::NONE,
        });
        h.step();
    }
    h.step();
}

/// Where a graph-space point is on screen.
fn screen(h: &Harness<'static, WeftApp>, p: Pos2) -> Pos2 {
    h.state().canvas.graph_to_screen * p
}

/// The screen position of a node's pin: on the node's edge (the editor's pin
/// placement), at the height of the pin's label.
fn pin(h: &Harness<'static, WeftApp>, node: &str, name: &str, output: bool) -> Pos2 {
    let r = h.state().canvas.node_rects[node];
    let label = h
        .get_all_by_label(name)
        .map(|n| n.rect())
        .find(|l| r.contains(l.center()))
        .unwrap_or_else(|| panic!("no pin '{}' on '{}'", name, node));
    let x = if output { r.right() } else { r.left() };
    screen(h, egui::pos2(x, label.center().y))
}

fn wires_into(h: &Harness<'static, WeftApp>, to: &str) -> Vec<String> {
    h.state()
        .model
        .doc
        .wires
        .iter()
        .filter(|w| w.to == to)
        .map(|w| w.from.clone())
        .collect()
}

#[test]
fn pointer_wiring_refusal_box_select_copy_delete_and_undo() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat.json");
    h.run_steps(3);
    // Drag a wire from T_next's output onto the view's input: it replaces T.
    assert_eq!(wires_into(&h, "view.field"), vec!["T.field"]);
    let (a, b) = (
        pin(&h, "T_next", "field", true),
        pin(&h, "view", "field", false),
    );
    drag(&mut h, a, b, Modifiers::NONE);
    assert_eq!(wires_into(&h, "view.field"), vec!["T_next.field"]);
    // A field output dropped on a layout input is refused, with the reason on screen.
    let wires = h.state().model.doc.wires.clone();
    let (a, b) = (
        pin(&h, "T", "field", true),
        pin(&h, "grid", "parent", false),
    );
    drag(&mut h, a, b, Modifiers::NONE);
    assert_eq!(h.state().model.doc.wires, wires, "nothing changed");
    // At the pointer (tooltip) and in the editor's status line.
    assert!(
        h.get_all_by_label_contains("cannot wire a field output 'T.field' to a layout input")
            .count()
            >= 1
    );
    // Shift+drag a box over two fields selects both.
    let (r1, r2) = (
        h.state().canvas.node_rects["T_next"],
        h.state().canvas.node_rects["source"],
    );
    let (a, b) = (
        screen(&h, r1.left_top() - egui::vec2(12.0, 12.0)),
        screen(&h, r2.right_bottom() + egui::vec2(12.0, 12.0)),
    );
    drag(&mut h, a, b, Modifiers::SHIFT);
    assert_eq!(h.state().selection(&h.ctx), vec!["T_next", "source"]);
    // Copy puts both on the clipboard as graph JSON; pasting it adds renamed copies.
    h.event(Event::Copy);
    h.step();
    let copied = h
        .output()
        .platform_output
        .commands
        .iter()
        .find_map(|c| match c {
            egui::OutputCommand::CopyText(t) => Some(t.clone()),
            _ => None,
        })
        .expect("copy wrote the clipboard");
    assert!(copied.contains("\"T_next\"") && copied.contains("\"source\""));
    assert!(!copied.contains("\"grid\""));
    let n = h.state().model.doc.nodes.len();
    h.event(Event::Paste(copied));
    h.run_steps(2);
    assert_eq!(h.state().model.doc.nodes.len(), n + 2);
    assert!(h.state().model.doc.node("T_next_copy").is_some());
    h.key_press_modifiers(Modifiers::COMMAND, egui::Key::Z);
    h.run_steps(2);
    assert_eq!(h.state().model.doc.nodes.len(), n);
    // Delete removes the whole selection and its wires; one undo brings all back.
    let before = h.state().model.doc.clone();
    h.key_press(egui::Key::Delete);
    h.run_steps(2);
    let doc = &h.state().model.doc;
    assert!(doc.node("T_next").is_none() && doc.node("source").is_none());
    assert!(doc.node("T").is_some());
    assert!(!doc.wires.iter().any(|w| w.from.starts_with("source.")));
    h.key_press_modifiers(Modifiers::COMMAND, egui::Key::Z);
    h.run_steps(2);
    assert_eq!(h.state().model.doc, before, "one undo step restores both");
}

#[test]
fn shift_a_adds_the_typed_node_under_the_pointer_and_clicks_select() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat.json");
    h.run_steps(3);
    // Empty space below the layout nodes.
    let spot = screen(
        &h,
        h.state().canvas.node_rects["source"].left_bottom() + egui::vec2(0.0, 300.0),
    );
    h.event(Event::PointerMoved(spot));
    h.step();
    h.key_press_modifiers(Modifiers::SHIFT, egui::Key::A);
    h.run_steps(2);
    assert_eq!(h.state().canvas.add_menu, Some(spot));
    h.event(Event::Text("imag".into()));
    h.step();
    h.key_press(egui::Key::Enter);
    h.run_steps(3);
    let n = h
        .state()
        .model
        .doc
        .node("image1")
        .expect("Enter added the first match")
        .clone();
    let at = screen(&h, egui::pos2(n.pos[0], n.pos[1]));
    assert!(
        (at - spot).length() < 2.0,
        "placed at {:?}, pointer at {:?}",
        at,
        spot
    );
    // A click on a node's title inspects it: the kernel's ranged scalar is a slider.
    let title = h.get_by_label_contains("diffuse  ·").rect().center();
    let title = screen(&h, title);
    click(&mut h, title, PointerButton::Primary);
    assert_eq!(h.state().selected.as_deref(), Some("diffuse"));
    assert_eq!(
        h.get_all_by_label("alpha: f32").count(),
        1,
        "a slider on the node body"
    );
    assert!(
        h.query(
            egui_kittest::kittest::By::new()
                .role(egui::accesskit::Role::TextInput)
                .value("alpha")
        )
        .is_some(),
        "and its declaration (name, type, default, range, doc) in the inspector"
    );
    // Tab opens the same menu; Escape closes it without adding anything.
    let count = h.state().model.doc.nodes.len();
    h.event(Event::PointerMoved(spot));
    h.key_press(egui::Key::Tab);
    h.run_steps(2);
    assert!(h.state().canvas.add_menu.is_some());
    h.key_press(egui::Key::Escape);
    h.run_steps(2);
    assert!(h.state().canvas.add_menu.is_none());
    assert_eq!(h.state().model.doc.nodes.len(), count);
}

#[test]
fn frames_carry_their_nodes_and_comments_are_added_from_the_menu() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat.json");
    h.run_steps(3);
    let before = h.state().model.doc.clone();
    let frame = before
        .frames
        .iter()
        .find(|f| f.id == "layout")
        .unwrap()
        .clone();
    // Drag the "Data layout" frame by its title bar.
    let grab = screen(&h, egui::pos2(frame.rect[0] + 60.0, frame.rect[1] + 10.0));
    let s = h.state().canvas.graph_to_screen.scaling;
    let delta = egui::vec2(80.0, 40.0);
    drag(&mut h, grab, grab + delta, Modifiers::NONE);
    h.run_steps(2);
    let doc = h.state().model.doc.clone();
    let moved = doc.frames.iter().find(|f| f.id == "layout").unwrap();
    let want = delta / s;
    assert!(
        (moved.rect[0] - frame.rect[0] - want.x).abs() < 1.0,
        "{:?}",
        moved.rect
    );
    assert!(
        (moved.rect[1] - frame.rect[1] - want.y).abs() < 1.0,
        "{:?}",
        moved.rect
    );
    for id in ["grid", "T", "T_next", "source", "view", "diffuse"] {
        let (a, b) = (before.node(id).unwrap().pos, doc.node(id).unwrap().pos);
        let inside = ["grid", "T", "T_next", "source"].contains(&id);
        let shift = egui::vec2(b[0] - a[0], b[1] - a[1]);
        if inside {
            assert!(
                (shift - want).length() < 1.0,
                "{} moved by {:?}, the frame by {:?}",
                id,
                shift,
                want
            );
        } else {
            assert_eq!(shift, egui::Vec2::ZERO, "{} is outside the frame", id);
        }
    }
    assert_eq!(h.state().canvas.frames.selected.as_deref(), Some("layout"));
    h.get_by_label("frame layout");
    h.key_press_modifiers(Modifiers::COMMAND, egui::Key::Z);
    h.run_steps(2);
    assert_eq!(
        h.state().model.doc,
        before,
        "the frame and its nodes undo together"
    );
    // Right-click on empty space → "Add comment".
    let spot = screen(
        &h,
        egui::pos2(frame.rect[0], frame.rect[1] + frame.rect[3] + 200.0),
    );
    click(&mut h, spot, PointerButton::Secondary);
    h.get_by_label("Add comment").click();
    h.run_steps(3);
    let frames = &h.state().model.doc.frames;
    assert_eq!(frames.len(), before.frames.len() + 1);
    let note = frames.last().unwrap();
    assert_eq!(note.title, "Note");
    // Saved and reloaded, frames come back unchanged.
    let dir = std::env::temp_dir().join(format!("weft-gui-frames-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("g.json");
    h.state_mut().model.save_as(&path).unwrap();
    let back = weft_ir::graph::GraphDoc::load(&path).unwrap();
    assert_eq!(back.frames, h.state().model.doc.frames);
}

#[test]
fn unsaved_work_from_a_crash_is_offered_at_the_next_start() {
    if !gpu_ok() {
        return;
    }
    let cfg = config_dir();
    std::fs::create_dir_all(&cfg).unwrap();
    let heat = weft_ir::graph::GraphDoc::load(&root().join("graphs/heat.json")).unwrap();
    heat.save_atomic(&cfg.join("recovery.json")).unwrap();
    let mut h = harness_with(None, cfg.clone());
    h.run_steps(2);
    assert!(h.state().model.doc.nodes.is_empty());
    h.get_by_label("Recover").click();
    h.run_steps(2);
    assert_eq!(h.state().model.doc, heat, "the recovered graph, unchanged");
    assert!(h.state().model.dirty, "and still unsaved");
    // Declining removes the recovery file, so it is offered once.
    let mut h = harness_with(None, cfg.clone());
    h.run_steps(2);
    h.get_by_label("Discard").click();
    h.run_steps(2);
    assert!(!cfg.join("recovery.json").exists());
}

/// Two windows with unsaved edits each keep their own recovery file, with
/// the graph's path; the next start offers both; the recovered graph is the
/// edited one, back at its path (Ctrl+S writes the file it came from); its
/// save removes only its own recovery file, and the other is offered later.
#[test]
fn each_window_keeps_its_own_unsaved_work_and_path() {
    if !gpu_ok() {
        return;
    }
    let cfg = config_dir();
    let work = config_dir();
    std::fs::create_dir_all(&work).unwrap();
    let mut edited = vec![];
    for (name, node) in [("heat.json", "apply"), ("life.json", "step")] {
        std::fs::copy(root().join("graphs").join(name), work.join(name)).unwrap();
        let mut h = harness_with(Some(work.join(name)), cfg.clone());
        h.run_steps(2);
        h.state_mut().model.push(Command::MoveNode {
            id: node.into(),
            pos: [1234.0, 567.0],
        });
        h.run_steps(2);
        assert!(h.state().model.dirty);
        edited.push(h.state().model.doc.clone());
        // Closing the window, as the window manager would.
        eframe::App::on_exit(h.state_mut());
    }
    let files = std::fs::read_dir(cfg.join("recovery")).unwrap().count();
    assert_eq!(files, 2, "one recovery file per window");

    let mut h = harness_with(None, cfg.clone());
    h.run_steps(2);
    assert!(h.query_by_label_contains("2 previous sessions").is_some());
    let heat = work.join("heat.json");
    let row = h
        .state()
        .dialogs
        .recovery_offers
        .iter()
        .position(|o| o.path.as_deref() == Some(heat.as_path()))
        .expect("heat.json's work is offered with its path");
    h.get_all_by_label("Recover").nth(row).unwrap().click();
    h.run_steps(2);
    assert_eq!(h.state().model.doc, edited[0], "the edited graph");
    assert_eq!(h.state().model.path.as_deref(), Some(heat.as_path()));
    assert!(h.state().model.dirty, "and still unsaved");
    assert_eq!(h.state().window_title(), "heat.json • — Weft");
    assert!(
        h.state().recovery_path().exists(),
        "adopted: on disk until saved"
    );
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::S);
    h.run_steps(2);
    assert!(!h.state().model.dirty);
    let saved = weft_ir::graph::GraphDoc::load(&heat).unwrap();
    assert_eq!(saved, edited[0], "Ctrl+S wrote the file it came from");
    // The version it replaced is kept in backup/ (as Houdini keeps them).
    let before = weft_ir::graph::GraphDoc::load(&work.join("backup/heat_bak1.json")).unwrap();
    let shipped = weft_ir::graph::GraphDoc::load(&root().join("graphs/heat.json")).unwrap();
    assert_eq!(before, shipped);
    assert!(h.state().status.contains("backup"), "{}", h.state().status);
    assert_eq!(h.state().window_title(), "heat.json — Weft");
    assert!(!h.state().recovery_path().exists());
    drop(h);

    // life.json's work waits for the next start; Discard removes it.
    let mut h = harness_with(None, cfg.clone());
    h.run_steps(2);
    assert_eq!(h.state().dialogs.recovery_offers.len(), 1);
    assert!(h.query_by_label_contains("life.json").is_some());
    h.get_by_label("Discard").click();
    h.run_steps(2);
    assert_eq!(std::fs::read_dir(cfg.join("recovery")).unwrap().count(), 0);
    assert!(h.state().model.doc.nodes.is_empty(), "nothing recovered");
}

/// Ctrl+Q with unsaved changes asks first: Cancel keeps the window and the
/// work; Discard quits and leaves nothing to recover.
#[test]
fn quit_asks_about_unsaved_changes() {
    if !gpu_ok() {
        return;
    }
    let cfg = config_dir();
    let mut h = harness_with(Some(root().join("graphs/heat.json")), cfg.clone());
    h.run_steps(2);
    h.state_mut().model.push(Command::MoveNode {
        id: "apply".into(),
        pos: [10.0, 10.0],
    });
    h.run_steps(2);
    h.state_mut().write_recovery();
    assert!(h.state().recovery_path().exists());
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::Q);
    h.run_steps(2);
    assert!(h.query_by_label_contains("unsaved changes").is_some());
    h.get_by_label("Cancel").click();
    h.run_steps(2);
    assert!(!h.state().session.quitting && h.state().model.dirty);
    assert!(h.state().recovery_path().exists());
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::Q);
    h.run_steps(2);
    h.get_by_label("Discard").click();
    h.run_steps(2);
    assert!(h.state().session.quitting);
    assert!(
        !h.state().recovery_path().exists(),
        "discarded: nothing to offer"
    );
}

// ---- What an artist meets in the first ten minutes (issue 14). ----

/// Opens File > Examples > `name` with real clicks on the menus.
fn open_example(h: &mut Harness<'static, WeftApp>, name: &str) {
    h.get_by_label("File").click();
    h.run_steps(2);
    h.get_by_label_contains("Examples").click();
    h.run_steps(2);
    h.get_by_label(name).click();
    h.run_steps(2);
}

/// A harness whose file dialogs start in a fresh temporary folder.
fn harness_in(graph: Option<&str>, docs: &Path) -> Harness<'static, WeftApp> {
    let cfg = config_dir();
    support::editor_room(&cfg);
    let opts = GuiOptions {
        config_dir: Some(cfg),
        graph: graph.map(|g| root().join("graphs").join(g)),
        documents_dir: Some(docs.to_path_buf()),
        ..Default::default()
    };
    Harness::builder()
        .with_size(support::WINDOW)
        .wgpu()
        .build_eframe(move |cc| WeftApp::new(cc.wgpu_render_state.as_ref(), opts))
}

fn temp_dir(tag: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("weft-{}-{}-{}", tag, std::process::id(), n));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn click_title(h: &mut Harness<'static, WeftApp>, node: &str) {
    let title = h
        .get_by_label_contains(&format!("{}  ·", node))
        .rect()
        .center();
    let title = screen(h, title);
    click(h, title, PointerButton::Primary);
}

#[test]
fn text_parameters_take_typed_characters_on_the_node_and_in_the_inspector() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat.json");
    h.run_steps(3);
    click_title(&mut h, "init_sources");
    h.run_steps(2);
    // `over` shows on the node body and in the inspector; type into each in turn.
    for round in 0..2 {
        let fields: Vec<_> = h
            .get_all(
                egui_kittest::kittest::By::new()
                    .role(egui::accesskit::Role::TextInput)
                    .value("source"),
            )
            .collect();
        assert_eq!(fields.len(), 2, "round {}", round);
        let field = &fields[round];
        field.focus();
        h.run_steps(2);
        h.key_press_modifiers(Modifiers::COMMAND, egui::Key::A);
        h.event(Event::Text("T".into()));
        h.step();
        h.event(Event::Text("_next".into()));
        h.run_steps(2);
        assert!(
            h.query(
                egui_kittest::kittest::By::new()
                    .role(egui::accesskit::Role::TextInput)
                    .value("T_next")
            )
            .is_some(),
            "the typed text is shown while typing"
        );
        h.key_press(egui::Key::Enter);
        h.run_steps(3);
        assert_eq!(
            h.state().model.doc.node("init_sources").unwrap().params["over"],
            "T_next",
            "committed on Enter"
        );
        // Put it back for the next round (one undo step).
        h.state_mut().model.undo();
        h.run_steps(3);
    }
}

#[test]
fn opening_one_example_after_another_rebuilds_the_viewport() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("mpm88.json");
    wait_for_sim(&mut h);
    open_example(&mut h, "heat_color");
    wait_for_sim(&mut h);
    let views: Vec<String> = h
        .state()
        .viewport
        .sim
        .as_ref()
        .unwrap()
        .program
        .views
        .iter()
        .map(|v| v.node_id().to_string())
        .collect();
    assert_eq!(
        views,
        vec!["view", "color_view"],
        "heat_color's views, not mpm88's"
    );
    // Step and Reset act on the new simulation.
    h.get_by_label("Step").click();
    h.run_steps(3);
    settle(&mut h);
    assert_eq!(h.state().viewport.sim.as_ref().unwrap().frame, 1);
    open_example(&mut h, "julia");
    wait_for_sim(&mut h);
    assert!(h
        .state()
        .viewport
        .sim
        .as_ref()
        .unwrap()
        .program
        .kernel_by_name("paint")
        .is_some());
    assert_eq!(h.state().viewport.sim.as_ref().unwrap().frame, 0);
}

#[test]
fn search_and_enter_adds_the_exact_kind_first() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness_with(None, config_dir());
    h.run_steps(3);
    for (typed, want) in [("field", "field1"), ("den", "dense1"), ("repe", "repeat1")] {
        h.event(Event::PointerMoved(h.state().canvas.graph_rect.center()));
        h.key_press_modifiers(Modifiers::SHIFT, egui::Key::A);
        h.run_steps(2);
        h.event(Event::Text(typed.into()));
        h.step();
        h.key_press(egui::Key::Enter);
        h.run_steps(3);
        assert!(
            h.state().model.doc.node(want).is_some(),
            "typing '{}' + Enter added {:?}",
            typed,
            h.state().model.doc.nodes.last().map(|n| &n.kind)
        );
    }
    // Added at one spot, they stack instead of landing on one another.
    let rects: Vec<(String, egui::Rect)> = h
        .state()
        .canvas
        .node_rects
        .iter()
        .map(|(k, r)| (k.clone(), *r))
        .collect();
    assert_eq!(rects.len(), 3);
    assert!(overlapping(&rects).is_empty(), "{:?}", rects);
}

#[test]
fn saving_an_untitled_graph_without_a_native_dialog_uses_weft_s_own() {
    if !gpu_ok() {
        return;
    }
    let docs = temp_dir("save");
    let mut h = harness_in(None, &docs);
    h.run_steps(3);
    h.state_mut().model.push(Command::AddNode {
        kind: "dense".into(),
        pos: [0.0, 0.0],
    });
    h.run_steps(2);
    assert!(h.state().model.dirty);
    // Ctrl+S on an untitled graph opens Weft's file dialog; Escape cancels it, and says so.
    h.key_press_modifiers(Modifiers::COMMAND, egui::Key::S);
    h.run_steps(3);
    assert!(
        h.query_by_label_contains("Save File").is_some(),
        "the dialog is shown"
    );
    // The first Escape leaves the name field, the second closes the dialog.
    h.key_press(egui::Key::Escape);
    h.run_steps(2);
    h.key_press(egui::Key::Escape);
    h.run_steps(3);
    assert!(h.state().model.dirty, "still unsaved");
    assert!(h
        .state()
        .model
        .log
        .iter()
        .any(|l| l.contains("save cancelled")));
    // Save As, type a name, Enter: written there, with .json added.
    h.get_by_label("File").click();
    h.run_steps(2);
    h.get_by_label("Save As…").click();
    h.run_steps(3);
    h.key_press_modifiers(Modifiers::COMMAND, egui::Key::A);
    h.event(Event::Text("pattern".into()));
    h.run_steps(2);
    h.key_press(egui::Key::Enter);
    h.run_steps(4);
    let path = docs.join("pattern.json");
    assert!(path.exists(), "saved to {}", path.display());
    assert!(!h.state().model.dirty);
    assert_eq!(h.state().model.path.as_deref(), Some(path.as_path()));
    assert_eq!(
        weft_ir::graph::GraphDoc::load(&path).unwrap(),
        h.state().model.doc
    );
    assert!(h.state().status.contains("saved"), "{}", h.state().status);
}

#[test]
fn the_unsaved_prompt_s_save_goes_through_the_dialog_then_carries_on() {
    if !gpu_ok() {
        return;
    }
    let docs = temp_dir("prompt");
    let mut h = harness_in(None, &docs);
    h.run_steps(3);
    h.state_mut().model.push(Command::AddNode {
        kind: "dense".into(),
        pos: [0.0, 0.0],
    });
    h.run_steps(2);
    h.get_by_label("File").click();
    h.run_steps(2);
    h.get_by_label("New").click();
    h.run_steps(3);
    h.get_by_label("Save").click();
    h.run_steps(3);
    h.key_press_modifiers(Modifiers::COMMAND, egui::Key::A);
    h.event(Event::Text("first".into()));
    h.run_steps(2);
    h.key_press(egui::Key::Enter);
    h.run_steps(4);
    assert!(docs.join("first.json").exists());
    assert!(h.state().model.doc.nodes.is_empty(), "then New went ahead");
    assert_eq!(h.state().model.path, None);
}

#[test]
fn examples_open_as_untitled_copies_and_ctrl_s_asks_for_a_name() {
    if !gpu_ok() {
        return;
    }
    let docs = temp_dir("example");
    let mut h = harness_in(None, &docs);
    h.run_steps(3);
    open_example(&mut h, "heat");
    h.run_steps(2);
    let heat = root().join("graphs/heat.json");
    let shipped = std::fs::read(&heat).unwrap();
    assert_eq!(h.state().model.path, None);
    assert!(h.state().model.title().contains("copy of heat.json"));
    assert!(h.get_all_by_label_contains("copy of heat.json").count() >= 1);
    h.state_mut().model.push(Command::MoveNode {
        id: "grid".into(),
        pos: [5.0, 5.0],
    });
    h.run_steps(2);
    h.key_press_modifiers(Modifiers::COMMAND, egui::Key::S);
    h.run_steps(3);
    assert!(h.query_by_label_contains("Save File").is_some());
    h.key_press(egui::Key::Enter);
    h.run_steps(4);
    assert_eq!(
        std::fs::read(&heat).unwrap(),
        shipped,
        "the example is untouched"
    );
    assert!(docs.join("heat.json").exists(), "saved as a new file");
}

#[test]
fn ctrl_z_in_the_code_editor_undoes_the_typing_not_the_graph() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat.json");
    h.run_steps(3);
    // An earlier graph edit that a graph undo would take back.
    h.state_mut().model.push(Command::MoveNode {
        id: "grid".into(),
        pos: [7.0, 7.0],
    });
    h.run_steps(2);
    h.state_mut().bodies.open_code = Some("apply".into());
    h.run_steps(3);
    let editor = h.get_by_role(egui::accesskit::Role::MultilineTextInput);
    editor.focus();
    h.run_steps(2);
    h.key_press_modifiers(Modifiers::COMMAND, egui::Key::End);
    h.event(Event::Text("// typed".into()));
    h.run_steps(2);
    let typed = h
        .get_by_role(egui::accesskit::Role::MultilineTextInput)
        .value()
        .unwrap();
    assert!(typed.contains("// typed"));
    h.key_press_modifiers(Modifiers::COMMAND, egui::Key::Z);
    h.run_steps(2);
    let after = h
        .get_by_role(egui::accesskit::Role::MultilineTextInput)
        .value()
        .unwrap();
    assert!(!after.contains("// typed"), "the typing was undone");
    assert_eq!(
        h.state().model.doc.node("grid").unwrap().pos,
        [7.0, 7.0],
        "the graph edit stays"
    );
}

#[test]
fn the_status_line_is_a_bar_of_its_own_and_new_clears_it() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat.json");
    h.run_steps(3);
    let (a, b) = (
        pin(&h, "T", "field", true),
        pin(&h, "grid", "parent", false),
    );
    drag(&mut h, a, b, Modifiers::NONE);
    let why = h.state().status.clone();
    assert!(why.contains("cannot wire"), "{}", why);
    // Drawn in the status bar, below the editor, not clipped at its edge.
    let label = h
        .get_all_by_label(&why)
        .map(|n| n.rect())
        .find(|r| r.top() >= h.state().canvas.graph_rect.bottom())
        .expect("the status bar shows the reason");
    assert!(label.height() > 8.0);
    h.get_by_label("File").click();
    h.run_steps(2);
    h.get_by_label("New").click();
    h.run_steps(3);
    assert_eq!(h.query_all_by_label_contains("cannot wire").count(), 0);
}

/// Every node's rect, on screen, lies inside the editor.
fn all_nodes_visible(h: &Harness<'static, WeftApp>) -> bool {
    let area = h.state().canvas.graph_rect;
    h.state().model.doc.nodes.iter().all(|n| {
        let r = h.state().canvas.node_rects.get(&n.id).copied();
        let ok = r.is_some_and(|r| {
            area.expand(1.0)
                .contains_rect(h.state().canvas.graph_to_screen * r)
        });
        if !ok {
            eprintln!(
                "node '{}' at {:?} is outside {:?} (view {:?})",
                n.id,
                r.map(|r| h.state().canvas.graph_to_screen * r),
                area,
                h.state().canvas.graph_to_screen
            );
        }
        ok
    })
}

#[test]
fn every_example_opens_fitted_and_home_f_and_ctrl_wheel_navigate() {
    if !gpu_ok() {
        return;
    }
    for g in [
        "heat.json",
        "julia.json",
        "life.json",
        "mpm88.json",
        "heat_color.json",
    ] {
        let mut h = harness(g);
        h.run_steps(4);
        assert!(all_nodes_visible(&h), "{} opens with every node in view", g);
        let scale = h.state().canvas.graph_to_screen.scaling;
        assert!(scale >= 0.45, "{}: text stays legible (scale {})", g, scale);
    }
    let mut h = harness("heat.json");
    h.run_steps(4);
    let fitted = h.state().canvas.graph_to_screen;
    // Three Ctrl+wheel notches zoom by even steps about the pointer.
    let at = h.state().canvas.graph_rect.center();
    h.event(Event::PointerMoved(at));
    h.step();
    for _ in 0..3 {
        h.event(Event::MouseWheel {
            unit: egui::MouseWheelUnit::Line,
            delta: egui::vec2(0.0, 1.0),
            phase: egui::TouchPhase::Move,
            modifiers: Modifiers::COMMAND,
        });
        h.step();
    }
    h.run_steps(2);
    let ratio = h.state().canvas.graph_to_screen.scaling / fitted.scaling;
    assert!(
        (ratio - 1.15f32.powi(3)).abs() < 0.02,
        "three notches: ×{}",
        ratio
    );
    // X11 delivers each wheel click twice in one frame: it counts once.
    let before = h.state().canvas.graph_to_screen.scaling;
    for _ in 0..2 {
        h.input_mut().events.push(Event::MouseWheel {
            unit: egui::MouseWheelUnit::Line,
            delta: egui::vec2(0.0, -1.0),
            phase: egui::TouchPhase::Move,
            modifiers: Modifiers::COMMAND,
        });
    }
    h.run_steps(3);
    let ratio = before / h.state().canvas.graph_to_screen.scaling;
    assert!((ratio - 1.15).abs() < 0.01, "one click out: ×1/{}", ratio);
    // Middle-drag pans.
    let before = h.state().canvas.graph_to_screen.translation;
    let from = at + egui::vec2(0.0, 200.0);
    h.event(Event::PointerMoved(from));
    h.step();
    h.event(Event::PointerButton {
        pos: from,
        button: PointerButton::Middle,
        pressed: true,
        modifiers: Modifiers::NONE,
    });
    h.step();
    for k in 1..=6 {
        h.event(Event::PointerMoved(from + egui::vec2(10.0 * k as f32, 0.0)));
        h.step();
    }
    h.event(Event::PointerButton {
        pos: from + egui::vec2(60.0, 0.0),
        button: PointerButton::Middle,
        pressed: false,
        modifiers: Modifiers::NONE,
    });
    h.run_steps(2);
    let moved = h.state().canvas.graph_to_screen.translation - before;
    assert!(moved.x > 30.0, "middle-drag panned by {:?}", moved);
    // Home frames everything again; F frames the inspected node.
    h.key_press(egui::Key::Home);
    h.run_steps(3);
    assert!(all_nodes_visible(&h));
    click_title(&mut h, "diffuse");
    h.key_press(egui::Key::F);
    h.run_steps(3);
    let r = h.state().canvas.graph_to_screen * h.state().canvas.node_rects["diffuse"];
    assert!(
        (r.center() - h.state().canvas.graph_rect.center()).length() < 2.0,
        "F centres the selected node"
    );
}

#[test]
fn dragging_a_title_moves_the_node_and_a_click_highlights_it() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat.json");
    h.run_steps(4);
    let before = h.state().model.doc.node("grid").unwrap().pos;
    let title = screen(&h, h.get_by_label_contains("grid  ·").rect().center());
    drag(
        &mut h,
        title,
        title + egui::vec2(80.0, 40.0),
        Modifiers::NONE,
    );
    h.run_steps(2);
    let after = h.state().model.doc.node("grid").unwrap().pos;
    let s = h.state().canvas.graph_to_screen.scaling;
    assert!(
        ((after[0] - before[0]) * s - 80.0).abs() < 3.0
            && ((after[1] - before[1]) * s - 40.0).abs() < 3.0,
        "moved from {:?} to {:?}",
        before,
        after
    );
    click_title(&mut h, "grid");
    assert_eq!(h.state().selected.as_deref(), Some("grid"));
}

#[test]
fn pins_say_what_they_carry() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat.json");
    h.run_steps(4);
    let model = &h.state().model;
    let doc = |id: &str| model.doc.node(id).unwrap().clone();
    let lib = model.assets.library();
    let (t_ins, t_outs) = gui::model::pins(&doc("T"), &lib);
    assert_eq!(
        gui::graph_view::pin_type(model, &doc("T"), &t_outs[0], true),
        "field f32 ('T')"
    );
    assert_eq!(
        gui::graph_view::pin_type(model, &doc("T"), &t_ins[0], false),
        "layout 2 axes"
    );
    let (k_ins, _) = gui::model::pins(&doc("diffuse"), &lib);
    assert_eq!(
        gui::graph_view::pin_type(model, &doc("diffuse"), &k_ins[0], false),
        "exec"
    );
    // And on screen: hovering a pin's label shows it.
    let p = pin(&h, "T", "field", true) - egui::vec2(12.0, 0.0);
    h.event(Event::PointerMoved(p));
    h.run_steps(40);
    assert!(h.query_by_label_contains("field f32 ('T')").is_some());
    // A code kernel has no `expr` row.
    click_title(&mut h, "diffuse");
    h.run_steps(2);
    assert_eq!(h.query_all_by_label("expr").count(), 0);
}

#[test]
fn a_new_kernel_starts_from_a_template_scalars_get_widgets_and_never_runs_is_a_warning() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness_with(None, config_dir());
    h.run_steps(3);
    h.event(Event::PointerMoved(h.state().canvas.graph_rect.center()));
    h.key_press_modifiers(Modifiers::SHIFT, egui::Key::A);
    h.run_steps(2);
    h.event(Event::Text("kernel".into()));
    h.step();
    h.key_press(egui::Key::Enter);
    h.run_steps(3);
    let k = h.state().model.doc.node("kernel1").unwrap().clone();
    let code = k.params["code"].as_str().unwrap();
    assert!(code.contains("fn kernel(i: i32, j: i32)"), "{}", code);
    assert!(code.contains("//     dst[(i, j)] = 0.5 * v;"), "{}", code);
    assert_eq!(k.params["range"], serde_json::json!([64, 64]));
    // No exec wire reaches it: a warning in Problems, not silence.
    assert!(h.get_by_label_contains("kernel never runs").rect().width() > 0.0);
    // Inspect it; add a scalar with the button, then a third axis with "+".
    click_title(&mut h, "kernel1");
    h.run_steps(2);
    h.get_by_label("+ Add scalar").click();
    h.run_steps(3);
    assert_eq!(
        h.state().model.doc.node("kernel1").unwrap().params["scalars"],
        serde_json::json!({"s1": {"type": "f32", "default": 0.0}})
    );
    // The inspector's "+" (the node body has one too, drawn in the editor).
    let right = h.state().canvas.graph_rect.right();
    h.get_all_by_label("+")
        .find(|n| n.rect().left() > right)
        .expect("the inspector's + button")
        .click();
    h.run_steps(3);
    // Rename the scalar in its name field; the rename keeps its declaration.
    h.get(
        egui_kittest::kittest::By::new()
            .role(egui::accesskit::Role::TextInput)
            .value("s1"),
    )
    .focus();
    h.run_steps(2);
    h.key_press_modifiers(Modifiers::COMMAND, egui::Key::A);
    h.event(Event::Text("rate".into()));
    h.step();
    h.key_press(egui::Key::Enter);
    h.run_steps(3);
    assert_eq!(
        h.state().model.doc.node("kernel1").unwrap().params["scalars"],
        serde_json::json!({"rate": {"type": "f32", "default": 0.0}})
    );
    let k = h.state().model.doc.node("kernel1").unwrap().clone();
    assert_eq!(k.params["range"], serde_json::json!([64, 64, 64]));
    assert!(k.params["code"]
        .as_str()
        .unwrap()
        .contains("fn kernel(i: i32, j: i32, k: i32)"));
    assert!(
        h.state().model.problems.is_empty(),
        "{:?}",
        h.state().model.problems
    );
}

#[test]
fn the_rate_label_says_what_it_measures() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness_with(None, config_dir());
    h.run_steps(5);
    let label = h.state().rate_label();
    assert!(label.contains("sim —"), "{}", label);
    let mut h = harness("heat.json");
    wait_for_sim(&mut h);
    h.get_by_label("Step").click();
    h.run_steps(3);
    settle(&mut h);
    let label = h.state().rate_label();
    assert!(
        label.contains("ms/frame") && label.contains("display"),
        "{}",
        label
    );
}

#[test]
fn the_inspector_and_the_viewport_split_are_remembered() {
    if !gpu_ok() {
        return;
    }
    let cfg = config_dir();
    let mut h = harness_with(Some(root().join("graphs/heat.json")), cfg.clone());
    h.run_steps(4);
    // The inspector has the window's whole height beside the node editor.
    let inspector = h.state().layout.rects.inspector.expect("shown");
    assert!(inspector.height() > 500.0, "{:?}", inspector);
    // Remembered sizes are the next session's starting sizes.
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(
        cfg.join("layout.json"),
        r#"{"side_width": 400.0, "viewport_width": 520.0}"#,
    )
    .unwrap();
    let mut h = harness_with(Some(root().join("graphs/heat.json")), cfg.clone());
    h.run_steps(4);
    let rects = h.state().layout.rects;
    let inspector = rects.inspector.expect("shown").width();
    assert!((inspector - 400.0).abs() < 20.0, "inspector {}", inspector);
    let viewport = rects.viewport.width();
    assert!((viewport - 520.0).abs() < 20.0, "viewport {}", viewport);
    let right = h.state().canvas.graph_rect.right();
    assert!(right <= rects.inspector.unwrap().left() + 1.0);
}

#[test]
fn structural_edits_say_the_simulation_restarted() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat.json");
    wait_for_sim(&mut h);
    for _ in 0..2 {
        h.get_by_label("Step").click();
        h.run_steps(2);
        settle(&mut h);
    }
    h.state_mut().model.push(Command::SetParam {
        node: "grid".into(),
        param: "shape".into(),
        value: serde_json::json!([96, 96]),
    });
    h.run_steps(2);
    for _ in 0..400 {
        h.step();
        if !h.state().viewport.compiling() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    h.run_steps(2);
    assert_eq!(h.state().status, "recompiled — restarted at frame 0");
}

/// The running simulation's value of kernel scalar `name` (as f32).
fn sim_scalar(h: &Harness<'static, WeftApp>, kernel: &str, name: &str) -> f32 {
    let sim = h.state().viewport.sim.as_ref().unwrap();
    let k = sim.program.kernel_by_name(kernel).unwrap();
    let p = sim.program.kernels[k]
        .params
        .iter()
        .find(|p| p.name == name)
        .unwrap();
    f32::from_bits(p.value)
}

#[test]
fn a_scalar_slider_drag_is_one_undo_step_and_the_simulation_follows_it_live() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat.json");
    wait_for_sim(&mut h);
    for _ in 0..3 {
        h.get_by_label("Step").click();
        h.run_steps(2);
        settle(&mut h);
    }
    let doc_alpha = |h: &Harness<'static, WeftApp>| {
        h.state().model.doc.node("diffuse").unwrap().params["scalars"]["alpha"]["default"]
            .as_f64()
            .unwrap()
    };
    let (before_doc, revision, steps) = (
        h.state().model.doc.clone(),
        h.state().model.revision,
        h.state().model.undo_steps(),
    );
    assert_eq!(sim_scalar(&h, "diffuse", "alpha"), 0.2);
    // The slider on the diffuse node's body, in the row of its label.
    let label = h.get_by_label("alpha: f32").rect();
    let slider = h
        .query_all(egui_kittest::kittest::By::new().role(egui::accesskit::Role::Slider))
        .map(|n| n.rect())
        .find(|r| (r.center().y - label.center().y).abs() < label.height())
        .expect("a slider beside the label");
    let (a, b) = (
        screen(
            &h,
            egui::pos2(slider.left() + slider.width() * 0.8, slider.center().y),
        ),
        screen(
            &h,
            egui::pos2(slider.left() + slider.width() * 0.2, slider.center().y),
        ),
    );
    h.event(Event::PointerMoved(a));
    h.step();
    h.event(Event::PointerButton {
        pos: a,
        button: PointerButton::Primary,
        pressed: true,
        modifiers: Modifiers::NONE,
    });
    h.step();
    let mut seen = Vec::new();
    for k in 1..=8 {
        h.event(Event::PointerMoved(a + (b - a) * (k as f32 / 8.0)));
        h.run_steps(2);
        // While held: the simulation takes each value at once, and nothing
        // is an edit yet (no revision, so no rebuild; no undo step).
        let live = sim_scalar(&h, "diffuse", "alpha");
        assert_eq!(live as f64, doc_alpha(&h) as f32 as f64);
        seen.push(live);
        assert_eq!(h.state().model.revision, revision);
        assert_eq!(h.state().model.undo_steps(), steps);
        assert!(!h.state().viewport.compiling());
    }
    seen.dedup();
    assert!(
        seen.len() >= 4,
        "the value followed the pointer: {:?}",
        seen
    );
    h.event(Event::PointerButton {
        pos: b,
        button: PointerButton::Primary,
        pressed: false,
        modifiers: Modifiers::NONE,
    });
    h.run_steps(3);
    // Released: one undo step, one new revision, and the running state kept.
    assert_eq!(h.state().model.undo_steps(), steps + 1);
    assert_eq!(h.state().model.revision, revision + 1);
    let sim = h.state().viewport.sim.as_ref().unwrap();
    assert_eq!(sim.frame, 3, "no rebuild: the simulation kept its frames");
    let dragged = doc_alpha(&h);
    assert!(dragged < 0.15, "dragged down to {}", dragged);
    assert_eq!(sim_scalar(&h, "diffuse", "alpha"), dragged as f32);
    // One Ctrl+Z takes the whole drag back, in the simulation too.
    h.state_mut().model.undo();
    h.run_steps(2);
    assert_eq!(h.state().model.doc, before_doc);
    assert_eq!(sim_scalar(&h, "diffuse", "alpha"), 0.2);
}

/// The pairs of nodes whose rects (in graph space, as the editor drew them)
/// overlap, each named `a × b`.
fn overlapping(rects: &[(String, egui::Rect)]) -> Vec<String> {
    let mut out = vec![];
    for (i, (a, ra)) in rects.iter().enumerate() {
        for (b, rb) in &rects[i + 1..] {
            // A shared edge is not an overlap; a pixel of overlap is.
            if ra.shrink(0.5).intersects(rb.shrink(0.5)) {
                out.push(format!("{} {:?} × {} {:?}", a, ra, b, rb));
            }
        }
    }
    out
}

#[test]
fn no_two_nodes_of_a_shipped_graph_overlap() {
    if !gpu_ok() {
        return;
    }
    let mut graphs: Vec<String> = std::fs::read_dir(root().join("graphs"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".json") && !n.ends_with(".expect.json"))
        .collect();
    graphs.sort();
    assert!(graphs.len() >= 10);
    let mut bad = vec![];
    for g in &graphs {
        let mut h = harness(g);
        h.run_steps(4);
        let rects: Vec<(String, egui::Rect)> = h
            .state()
            .model
            .doc
            .nodes
            .iter()
            .map(|n| {
                let r = h.state().canvas.node_rects.get(&n.id).copied();
                (
                    n.id.clone(),
                    r.unwrap_or_else(|| panic!("{}: '{}' drawn", g, n.id)),
                )
            })
            .collect();
        for o in overlapping(&rects) {
            bad.push(format!("{}: {}", g, o));
        }
    }
    assert!(bad.is_empty(), "overlapping nodes:\n{}", bad.join("\n"));
}

/// A graph whose kernel `k` indexes past its field on the first frame.
fn faulting_graph() -> PathBuf {
    let dir = config_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let g = dir.join("oob.json");
    std::fs::write(
        &g,
        r#"{"format": "weft-graph", "version": 1, "nodes": [
        {"id": "L", "kind": "dense", "params": {"shape": [4]}, "pos": [0, 0]},
        {"id": "x", "kind": "field", "pos": [300, 0]},
        {"id": "k", "kind": "kernel", "params": {"range": [5], "code": "fn kernel(i: i32) { x[i] = 1.0; }"}, "pos": [600, 0]},
        {"id": "f", "kind": "on_frame", "pos": [300, 200]}],
      "wires": [{"from": "L.cells", "to": "x.layout"}, {"from": "x", "to": "k.x"}],
      "exec": [{"from": "f", "to": "k"}]}"#,
    )
    .unwrap();
    g
}

#[test]
fn run_time_errors_are_problems_on_their_node_until_reset() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness_with(Some(faulting_graph()), config_dir());
    wait_for_sim(&mut h);
    let status = |h: &Harness<'static, WeftApp>| {
        gui::graph_view::node_problems(&h.state().model, h.state().viewport.fault.as_ref(), "k")
    };
    assert!(status(&h).is_empty());
    h.get_by_label("Step").click();
    h.run_steps(3);
    settle(&mut h);
    // The runtime's own message, in the Problems panel (below the editor) and on `k`.
    let msg = h
        .state()
        .viewport
        .fault
        .clone()
        .expect("the step faulted")
        .message;
    assert!(
        msg.contains("node 'k'") && msg.contains("out of bounds"),
        "{}",
        msg
    );
    let node = h.state().viewport.fault.as_ref().unwrap().node.clone();
    assert_eq!(node.as_deref(), Some("k"));
    assert_eq!(status(&h), vec![msg.clone()]);
    let shown = h.get_by_label(&msg).rect();
    assert!(
        shown.top() >= h.state().canvas.graph_rect.bottom(),
        "{:?}",
        shown
    );
    // Clicking it inspects the node.
    h.get_by_label(&msg).click();
    h.run_steps(2);
    assert_eq!(h.state().selected.as_deref(), Some("k"));
    h.get_by_label("Reset").click();
    h.run_steps(3);
    assert!(h.state().viewport.fault.is_none());
    assert!(status(&h).is_empty());
    assert_eq!(h.query_all_by_label(&msg).count(), 0);
    assert!(
        h.state().rate_label().contains("sim —"),
        "{}",
        h.state().rate_label()
    );
}

#[test]
fn log_lines_stay_in_their_collapsed_pane_and_the_editor_keeps_its_height() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat.json");
    h.run_steps(4);
    let before = h.state().canvas.graph_rect;
    for i in 0..30 {
        h.state_mut().model.log.push(format!("log line {}", i));
    }
    h.run_steps(3);
    assert_eq!(h.state().canvas.graph_rect, before);
    assert_eq!(h.query_all_by_label("log line 29").count(), 0);
    h.get_by_label_contains("Log (").click();
    h.run_steps(3);
    assert!(h.query_all_by_label("log line 29").count() == 1);
}

#[test]
fn a_view_edit_redraws_without_restarting_the_simulation() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat.json");
    wait_for_sim(&mut h);
    for _ in 0..5 {
        h.get_by_label("Step").click();
        h.run_steps(2);
        settle(&mut h);
    }
    let read_t = |h: &Harness<'static, WeftApp>| {
        let sim = h.state().viewport.sim.as_ref().unwrap();
        sim.read_field(sim.field("T").unwrap()).unwrap()
    };
    let before = read_t(&h);
    assert_eq!(h.state().viewport.sim.as_ref().unwrap().frame, 5);
    let revision = h.state().model.revision;
    h.state_mut().model.push(Command::SetParam {
        node: "view".into(),
        param: "colormap".into(),
        value: "viridis".into(),
    });
    h.run_steps(2);
    for _ in 0..400 {
        h.step();
        if !h.state().viewport.compiling() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(h.state().model.revision, revision + 1);
    assert!(!h.state().viewport.compiling());
    let sim = h.state().viewport.sim.as_ref().unwrap();
    let colormap = sim.program.views.iter().find_map(|v| match v {
        weft_ir::ir::View::Image {
            node_id, colormap, ..
        } if node_id == "view" => Some(format!("{:?}", colormap)),
        _ => None,
    });
    assert_eq!(
        colormap.as_deref(),
        Some("Viridis"),
        "the new build draws it"
    );
    assert_eq!(sim.frame, 5, "the frame counter stays");
    assert_eq!(read_t(&h), before, "the field values stay");
    assert!(h.state().rate_label().starts_with("frame 5"));
    assert!(
        !h.state().status.contains("restarted"),
        "{}",
        h.state().status
    );
    // The new build draws with the new colormap: one more Step goes on from frame 5.
    h.get_by_label("Step").click();
    h.run_steps(2);
    settle(&mut h);
    assert_eq!(h.state().viewport.sim.as_ref().unwrap().frame, 6);
    // A change to what is computed still restarts at frame 0.
    h.state_mut().model.push(Command::SetParam {
        node: "T".into(),
        param: "init".into(),
        value: serde_json::json!(0.5),
    });
    h.run_steps(2);
    for _ in 0..400 {
        h.step();
        if !h.state().viewport.compiling() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(h.state().viewport.sim.as_ref().unwrap().frame, 0);
}

#[test]
fn new_nodes_keep_documented_defaults_and_a_kernel_range_can_be_unset() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness_with(None, config_dir());
    h.run_steps(2);
    for kind in ["pointer", "hash", "kernel"] {
        h.state_mut().model.push(Command::AddNode {
            kind: kind.into(),
            pos: [0.0, 0.0],
        });
        h.run_steps(2);
        let id = h.state().model.doc.nodes.last().unwrap().id.clone();
        // Inspected and drawn on its node: the editors write nothing by themselves.
        h.state_mut().selected = Some(id.clone());
        h.run_steps(3);
        let n = h.state().model.doc.node(&id).unwrap().clone();
        assert_eq!(n.params.get("capacity"), None, "{}: {:?}", kind, n.params);
        // An unset pool size is offered as "auto", its documented default.
        if kind != "kernel" {
            assert!(h.query_all_by_label("auto").count() >= 1);
        }
        h.state_mut().model.push(Command::RemoveNode { id });
        h.run_steps(2);
    }
    h.state_mut().model.push(Command::AddNode {
        kind: "kernel".into(),
        pos: [0.0, 0.0],
    });
    h.run_steps(2);
    let id = h.state().model.doc.nodes.last().unwrap().id.clone();
    h.state_mut().selected = Some(id.clone());
    h.run_steps(3);
    // Two axes: "−" twice (the last one unsets the range, so `over` can be set).
    for left in [1usize, 0] {
        h.get_all_by_label("-").last().unwrap().click_accesskit();
        h.run_steps(3);
        let range = h
            .state()
            .model
            .doc
            .node(&id)
            .unwrap()
            .params
            .get("range")
            .cloned();
        match left {
            1 => assert_eq!(range, Some(serde_json::json!([64]))),
            _ => assert!(range.as_ref().is_none_or(|r| r.is_null()), "{:?}", range),
        }
    }
}

#[test]
fn an_rgb_image_view_has_no_colormap_control() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat_color.json");
    h.run_steps(3);
    // `view` draws the f32 field T (a colormap), `color_view` the vec3 field rgb (none).
    let doc = h.state().model.doc.clone();
    let hidden = |id: &str| gui::view_ports::hidden_params(&doc, doc.node(id).unwrap());
    assert!(hidden("view").is_empty());
    assert_eq!(hidden("color_view"), vec!["colormap"]);
    assert_eq!(h.query_all_by_label("colormap").count(), 1);
    h.state_mut().selected = Some("color_view".into());
    h.run_steps(3);
    assert_eq!(h.query_all_by_label("colormap").count(), 1);
    h.state_mut().selected = Some("view".into());
    h.run_steps(3);
    assert_eq!(h.query_all_by_label("colormap").count(), 2);
}

#[test]
fn title_bars_pin_dots_and_the_status_line_answer_like_their_labels() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat.json");
    h.run_steps(4);
    // A click on the empty right part of a title bar inspects the node.
    let r = h.state().canvas.node_rects["diffuse"];
    let title = h.get_by_label_contains("diffuse  ·").rect();
    let p = egui::pos2(r.right() - 6.0, title.center().y);
    assert!(p.x > title.right() + 4.0, "{:?} {:?}", r, title);
    let p = screen(&h, p);
    click(&mut h, p, PointerButton::Primary);
    assert_eq!(h.state().selected.as_deref(), Some("diffuse"));
    // A pin's dot shows what the pin carries, like its label.
    let dot = pin(&h, "diffuse", "T_next", false);
    h.event(Event::PointerMoved(dot));
    h.run_steps(40);
    assert!(
        h.query_all_by_label_contains("field f32 ('T_next')")
            .count()
            >= 1,
        "no tooltip on the pin's dot"
    );
    // A status message (a refused wire) is cleared by a later change.
    h.state_mut().status = "cannot wire a field output to a layout input".into();
    h.run_steps(3);
    assert!(h.state().status.contains("cannot wire"));
    h.state_mut().model.push(Command::MoveNode {
        id: "diffuse".into(),
        pos: [r.left() + 40.0, r.top()],
    });
    h.run_steps(3);
    assert!(
        !h.state().status.contains("cannot wire"),
        "{}",
        h.state().status
    );
}

#[test]
fn the_inspector_shows_whole_scalar_names_and_a_one_line_kind_doc() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("mpm88.json");
    h.run_steps(3);
    h.state_mut().selected = Some("grid_update".into());
    h.run_steps(3);
    let font = egui::FontId::proportional(egui::FontId::default().size);
    for name in ["gravity", "n_grid"] {
        let Some(field) = h
            .get_all(
                egui_kittest::kittest::By::new()
                    .role(egui::accesskit::Role::TextInput)
                    .value(name),
            )
            .map(|n| n.rect())
            .next_back()
        else {
            panic!("no name field '{}'", name)
        };
        let text = h.ctx.fonts_mut(|f| {
            f.layout_no_wrap(name.into(), font.clone(), egui::Color32::WHITE)
                .size()
                .x
        });
        assert!(
            field.width() >= text + 8.0,
            "{}: {:?} for {}",
            name,
            field,
            text
        );
    }
    // The kind's doc is one line (all of it on hover): the fields stay in view.
    let doc = h.get_by_label_contains("kernel — ").rect();
    assert!(doc.height() < 24.0, "{:?}", doc);
}

#[test]
fn per_kernel_times_show_on_wgpu_too() {
    // Issue 26 item 15: a GPU times launches only when profiled; the
    // viewport profiles the first frame and one in PROFILE_EVERY.
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat.json");
    wait_for_sim(&mut h);
    assert_eq!(
        h.state().viewport.sim.as_ref().unwrap().backend(),
        Some(weft_runtime::Backend::Wgpu)
    );
    let launches = |h: &Harness<'static, WeftApp>| {
        let sim = h.state().viewport.sim.as_ref().unwrap();
        sim.kernel_times.get("apply").map_or(0, |v| v.len())
    };
    h.get_by_label("Step").click();
    h.run_steps(2);
    settle(&mut h);
    let first = launches(&h);
    assert!(first >= 1, "frame 1 is profiled");
    let times = h.state().viewport.kernel_times();
    let names: Vec<&str> = times.iter().map(|(k, _)| k.as_str()).collect();
    assert!(
        names.contains(&"diffuse") && names.contains(&"apply"),
        "{:?}",
        names
    );
    assert!(times.iter().all(|(_, ms)| *ms > 0.0), "{:?}", times);
    // The status line shows them.
    let diffuse = times.iter().find(|(k, _)| k == "diffuse").unwrap().1;
    h.get_by_label_contains(&format!("diffuse {:.2} ms", diffuse));
    // Frame 2 is not profiled (one submit per frame, no timestamps).
    h.get_by_label("Step").click();
    h.run_steps(2);
    settle(&mut h);
    assert_eq!(h.state().viewport.sim.as_ref().unwrap().frame, 2);
    assert_eq!(launches(&h), first);
}

/// Issue 50 item 5: the inspector's Cook section (Houdini's node info)
/// shows a kernel node's last and median launch times, its launches since
/// the start and what measured them; on a software adapter that is wall
/// time, said so (its GPU timestamps do not measure its work).
#[test]
fn node_info_shows_cook_times_and_what_measures_them() {
    let mut h = harness("heat.json");
    wait_for_sim(&mut h);
    for _ in 0..2 {
        h.get_by_label("Step").click();
        h.run_steps(2);
        settle(&mut h);
    }
    h.state_mut().selected = Some("diffuse".into());
    h.run_steps(2);
    h.get_by_label("Cook");
    let (launches, timing) = {
        let cook = &h.state().viewport.cook;
        let k = cook.of_node("diffuse");
        assert_eq!(k.len(), 1, "{:?}", cook);
        (k[0].launches, cook.timing)
    };
    let sim = h.state().viewport.sim.as_ref().unwrap();
    let own: u64 = sim
        .program
        .kernels
        .iter()
        .enumerate()
        .filter(|(_, (_, k))| k.label() == "diffuse")
        .map(|(i, _)| sim.launch_counts()[i] as u64)
        .sum();
    assert!(launches >= 2 && launches == own, "{} vs {}", launches, own);
    h.get_by_label_contains(&format!("{} launches", launches));
    h.get_by_label_contains(&format!("timed by {}", timing));
    let device = sim.engine().device_name().unwrap_or_default();
    if device.contains("llvmpipe") {
        assert!(timing.contains("software adapter"), "{}", timing);
    }
}

#[test]
fn the_ui_never_waits_for_a_slow_simulation_frame() {
    // Issue 26 item 22: frames run on the simulation thread. With a frame
    // many times longer than a UI pass, every pass stays short, frames go
    // on, and a click on a node shows in the inspector in the same pass.
    if !gpu_ok() {
        return;
    }
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("graphs/heat.json")).unwrap())
            .unwrap();
    for n in doc["nodes"].as_array_mut().unwrap() {
        if n["id"] == "substeps" {
            n["params"]["count"] = serde_json::json!(800);
        }
    }
    let dir = temp_dir("slow");
    let path = dir.join("slow_heat.json");
    std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    let mut h = harness_with(Some(path), config_dir());
    wait_for_sim(&mut h);
    h.get_by_label("▶ Play").click();
    play_until(&mut h, 2);
    assert_eq!(h.state().viewport.fault, None);
    let frame_ms = h.state().viewport.frame_ms;
    let at = h.state().viewport.frame();
    let mut worst = 0.0f64;
    let mut passes = 0;
    let t0 = std::time::Instant::now();
    // Passes while frames run, until two more frames are done.
    while h.state().viewport.frame() < at + 2 {
        let t = std::time::Instant::now();
        h.step();
        worst = worst.max(t.elapsed().as_secs_f64() * 1e3);
        passes += 1;
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert!(t0.elapsed().as_secs() < 120, "frames stopped");
    }
    eprintln!(
        "sim frame {:.0} ms, slice {:?}; {} UI passes, the slowest {:.1} ms",
        frame_ms,
        h.state().viewport.slice,
        passes,
        worst
    );
    assert!(
        frame_ms > 4.0 * worst,
        "a UI pass ({:.1} ms) waited for the frame ({:.0} ms)",
        worst,
        frame_ms
    );
    assert!(passes > 8, "{} passes in two frames", passes);
    // A click on a node while the frame runs: inspected by that pass.
    assert!(h.state().viewport.is_away() || h.state().viewport.playing);
    let t = std::time::Instant::now();
    click_title(&mut h, "apply");
    let clicked_ms = t.elapsed().as_secs_f64() * 1e3;
    assert_eq!(h.state().selected.as_deref(), Some("apply"));
    assert!(clicked_ms < frame_ms, "the click took {:.0} ms", clicked_ms);
    // Pausing lets the frame out now finish; its state is then readable.
    h.get_by_label("⏸ Pause").click();
    settle(&mut h);
    let sim = h.state().viewport.sim.as_ref().unwrap();
    assert_eq!(sim.frame, h.state().viewport.frame());
}

#[test]
fn ctrl_shift_click_on_a_field_pin_views_the_field_wired_to_it() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat.json");
    wait_for_sim(&mut h);
    h.run_steps(4);
    // The `source` input of kernel `diffuse` carries field node `source`.
    let r = h.state().canvas.node_rects["diffuse"];
    let label = h
        .get_all_by_label("source")
        .map(|n| n.rect())
        .find(|l| r.contains(l.center()))
        .expect("diffuse has a source pin");
    let p = screen(&h, label.center());
    h.event(Event::PointerMoved(p));
    h.step();
    let ctrl_shift = Modifiers::COMMAND | Modifiers::SHIFT;
    h.event(Event::ModifiersChanged(ctrl_shift));
    for pressed in [true, false] {
        h.event(Event::PointerButton {
            pos: p,
            button: PointerButton::Primary,
            pressed,
            modifiers: ctrl_shift,
        });
        h.step();
    }
    h.event(Event::ModifiersChanged(Modifiers::NONE));
    h.run_steps(2);
    assert!(h.state().viewer.is_on("source"), "{:?}", h.state().viewer);
    // No edit: the document is the file's.
    assert!(!h
        .state()
        .model
        .doc
        .nodes
        .iter()
        .any(|n| n.id.starts_with("viewer-")));
    // The viewport compiles the view; the first pane shows it.
    for _ in 0..400 {
        h.step();
        if h.state().viewport.pane_view(0).as_deref() == Some("viewer-source") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(
        h.state().viewport.pane_view(0).as_deref(),
        Some("viewer-source")
    );
}

#[test]
fn a_click_on_a_node_shows_in_the_inspector_in_the_same_pass() {
    // The inspector is drawn before the editor that takes the click: the
    // pass re-runs (egui's discard) instead of waiting for the next frame.
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat.json");
    wait_for_sim(&mut h);
    h.run_steps(4);
    assert!(h.query_by_label_contains("kernel — ").is_none());
    let title = h.get_by_label_contains("apply  ·").rect().center();
    let p = screen(&h, title);
    h.event(Event::PointerMoved(p));
    h.step();
    for pressed in [true, false] {
        h.event(Event::PointerButton {
            pos: p,
            button: PointerButton::Primary,
            pressed,
            modifiers: Modifiers::NONE,
        });
    }
    // One pass takes the press and the release.
    h.step();
    assert_eq!(h.state().selected.as_deref(), Some("apply"));
    h.get_by_label_contains("kernel — ");
}

/// An error inside a group (named by its path, `diffusion/step`) shows on
/// the group node the editor draws.
#[test]
fn an_error_inside_a_group_shows_on_the_group_node() {
    let dir = config_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let mut g: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("graphs/heat_grouped.json")).unwrap(),
    )
    .unwrap();
    let group = g["nodes"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|n| n["id"] == "diffusion")
        .expect("the diffusion group");
    let step = group["group"]["nodes"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|n| n["id"] == "step")
        .expect("its step kernel");
    step["params"]["code"] = "fn kernel(i: i32, j: i32) { T_next[(i, j)] = nope; }".into();
    let path = dir.join("broken_group.json");
    std::fs::write(&path, serde_json::to_string(&g).unwrap()).unwrap();
    let mut h = harness_with(Some(path), dir);
    for _ in 0..50 {
        h.step();
    }
    let on_group = gui::graph_view::node_problems(
        &h.state().model,
        h.state().viewport.fault.as_ref(),
        "diffusion",
    );
    assert!(
        on_group.iter().any(|p| p.contains("diffusion/step")),
        "{:?} (all: {:?})",
        on_group,
        h.state().model.problems
    );
    assert!(
        gui::graph_view::node_problems(&h.state().model, None, "diffusio").is_empty(),
        "a prefix of a group's id is not the group"
    );
}

/// Opening another graph (File > New here) leaves nothing of the old one
/// on screen: the timeline's bake label and File > Export's specs and
/// message were the old graph's (the window itself stays open).
#[test]
fn another_graph_does_not_show_the_old_graphs_bake_label_or_export_specs() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat.json");
    wait_for_sim(&mut h);
    h.get_by_label("File").click();
    h.run_steps(2);
    h.get_by_label("Export…").click();
    h.run_steps(2);
    h.state_mut().export.specs = "u=ply:old.ply".into();
    h.state_mut().export.message = Some(Ok("wrote old.ply".into()));
    h.state_mut().timeline.bake_message = Some(Ok("baked 0..24 into heat.cache".into()));
    h.run_steps(2);
    h.get_by_label("File").click();
    h.run_steps(2);
    h.get_by_label("New").click();
    h.run_steps(3);
    assert!(h.state().model.doc.nodes.is_empty(), "New went ahead");
    let (export, timeline) = (&h.state().export, &h.state().timeline);
    assert!(export.open, "the Export window stays open");
    assert_eq!(export.specs, "");
    assert_eq!(export.message, None);
    assert_eq!(timeline.bake_message, None);
    assert!(timeline.bake.is_none());
}

/// The backend picked in the toolbar's chooser is the next start's, and
/// `weft gui --backend` (GuiOptions::backend) wins over it.
#[test]
fn the_backend_chosen_in_the_toolbar_is_remembered_for_the_next_start() {
    if !gpu_ok() {
        return;
    }
    let cfg = config_dir();
    let graph = root().join("graphs").join("heat.json");
    let mut h = harness_with(Some(graph.clone()), cfg.clone());
    wait_for_sim(&mut h);
    assert_eq!(h.state().viewport.backend, weft_runtime::Backend::Auto);
    h.query_all_by_role(egui::accesskit::Role::ComboBox)
        .find(|n| n.value().is_some_and(|v| v.starts_with("auto (")))
        .expect("the backend chooser, showing auto")
        .click();
    h.run_steps(2);
    h.get_by_label("vm").click();
    h.run_steps(2);
    assert_eq!(h.state().viewport.backend, weft_runtime::Backend::Vm);
    // The preferences are written at most once a second (app time).
    let layout = cfg.join("layout.json");
    for _ in 0..600 {
        if std::fs::read_to_string(&layout).is_ok_and(|t| t.contains("\"vm\"")) {
            break;
        }
        h.step();
    }
    drop(h);
    let h = harness_with(Some(graph.clone()), cfg.clone());
    assert_eq!(h.state().viewport.backend, weft_runtime::Backend::Vm);
    drop(h);
    let opts = GuiOptions {
        config_dir: Some(cfg),
        graph: Some(graph),
        backend: Some(weft_runtime::Backend::Jit),
        ..Default::default()
    };
    let h = Harness::builder()
        .with_size(support::WINDOW)
        .wgpu()
        .build_eframe(move |cc| WeftApp::new(cc.wgpu_render_state.as_ref(), opts));
    assert_eq!(h.state().viewport.backend, weft_runtime::Backend::Jit);
}

/// A backend that cannot open here (`weft gui --backend cuda` on a
/// machine without CUDA's driver) is said in Problems, where the viewport
/// sends the user ("the graph does not run: see Problems").
#[test]
fn a_backend_that_cannot_open_is_said_in_problems() {
    use weft_runtime::Backend;
    if !gpu_ok() || Backend::Cuda.spec().probe().is_ok() {
        return;
    }
    let opts = GuiOptions {
        config_dir: Some(config_dir()),
        graph: Some(root().join("graphs").join("heat.json")),
        backend: Some(Backend::Cuda),
        ..Default::default()
    };
    let mut h = Harness::builder()
        .with_size(support::WINDOW)
        .wgpu()
        .build_eframe(move |cc| WeftApp::new(cc.wgpu_render_state.as_ref(), opts));
    for _ in 0..400 {
        h.step();
        if h.state().viewport.error.is_some() && !h.state().viewport.compiling() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    h.run_steps(2);
    assert!(h.state().viewport.sim.is_none());
    h.get_by_label_contains("the graph does not run: see Problems");
    let said = h.get_by_label_contains("the simulation: ");
    assert!(
        format!("{:?}", said).to_lowercase().contains("cuda"),
        "{:?}",
        said
    );
    assert!(h.query_by_label("No problems.").is_none());
}
