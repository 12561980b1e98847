//! Group editing in the app (kittest, in the gui_optimize crate: one fewer
//! compile of the GUI): Shift+click nodes, Ctrl+G, the fields after it
//! (read from the app's simulation, against the same simulation before
//! grouping), double-click into the group, promote and un-promote in the
//! inspector, the breadcrumb out, Ctrl+Alt+G, and undo.

use super::*;
use egui::{Event, Modifiers, PointerButton, Pos2};

fn screen(h: &Harness<'static, WeftApp>, p: Pos2) -> Pos2 {
    h.state().canvas.graph_to_screen * p
}

/// A click on a node's title bar (with `m` held).
fn click_title(h: &mut Harness<'static, WeftApp>, node: &str, m: Modifiers, count: usize) {
    // A plain click on the title's label (`ID  · kind`) inspects the node;
    // a Shift+click on the node's frame (an empty corner of its body) adds
    // it to the selection.
    h.run_steps(2);
    let p = if m.shift {
        let r = h.state().canvas.node_rects[node];
        screen(h, r.right_bottom() - egui::vec2(10.0, 6.0))
    } else {
        let title = h
            .get_by_label_contains(&format!("{}  ·", node))
            .rect()
            .center();
        screen(h, title)
    };
    h.event(Event::ModifiersChanged(m));
    h.event(Event::PointerMoved(p));
    h.step();
    for _ in 0..count {
        for pressed in [true, false] {
            h.event(Event::PointerButton {
                pos: p,
                button: PointerButton::Primary,
                pressed,
                modifiers: m,
            });
        }
    }
    h.step();
    h.event(Event::ModifiersChanged(Modifiers::NONE));
    h.run_steps(2);
}

fn click_at(h: &mut Harness<'static, WeftApp>, p: Pos2) {
    h.event(Event::PointerMoved(p));
    h.step();
    for pressed in [true, false] {
        h.event(Event::PointerButton {
            pos: p,
            button: PointerButton::Primary,
            pressed,
            modifiers: Modifiers::NONE,
        });
        h.step();
    }
    h.run_steps(2);
}

/// Waits for the simulation of the current document, runs it to frame 2
/// and reads the two temperature fields (by their path in the program).
fn fields_at_2(h: &mut Harness<'static, WeftApp>, t_next: &str) -> (Vec<u32>, Vec<u32>) {
    for _ in 0..2000 {
        h.step();
        let vp = &h.state().viewport;
        if !vp.compiling() && vp.sim.as_ref().is_some_and(|s| s.field(t_next).is_some()) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    settle(h);
    h.state_mut().viewport.seek(2);
    settle(h);
    let sim = h.state().viewport.sim.as_ref().unwrap();
    assert_eq!(sim.frame, 2);
    let read = |n: &str| sim.read_field(sim.field(n).unwrap()).unwrap();
    (read("T"), read(t_next))
}

/// The "Promote" / "Un-promote" button on the row of parameter `param`.
fn row_button(h: &Harness<'static, WeftApp>, button: &str, param: &str) -> Pos2 {
    find_row_button(h, button, param)
        .unwrap_or_else(|| panic!("no '{}' button on the row of '{}'", button, param))
}

fn find_row_button(h: &Harness<'static, WeftApp>, button: &str, param: &str) -> Option<Pos2> {
    let buttons: Vec<egui::Rect> = h.get_all_by_label(button).map(|n| n.rect()).collect();
    h.get_all_by_label(param)
        .map(|n| n.rect())
        .find_map(|l| {
            buttons
                .iter()
                .find(|b| (b.center().y - l.center().y).abs() < 6.0 && b.left() > l.left())
        })
        .map(|b| b.center())
}

#[test]
fn group_enter_promote_leave_and_ungroup() {
    if !gpu_ok() {
        return;
    }
    // A settings folder of its own: this test edits the graph, and its
    // autosave must not offer recovery to the other tests of the crate.
    let cfg = std::env::temp_dir().join(format!("weft-groups-gui-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cfg);
    let mut h = harness_with(Some(PathBuf::from("../graphs/heat.json")), cfg.clone());
    wait_for_sim(&mut h);
    let original = h.state().model.doc.clone();
    let before = fields_at_2(&mut h, "T_next");
    // Shift+click three nodes, Ctrl+G: one group in their place.
    click_title(&mut h, "diffuse", Modifiers::NONE, 1);
    click_title(&mut h, "apply", Modifiers::SHIFT, 1);
    click_title(&mut h, "T_next", Modifiers::SHIFT, 1);
    let mut sel = h.state().selection(&h.ctx);
    sel.sort();
    assert_eq!(sel, ["T_next", "apply", "diffuse"]);
    let steps = h.state().model.undo_steps();
    h.key_press_modifiers(Modifiers::COMMAND, egui::Key::G);
    h.run_steps(3);
    let doc = h.state().model.doc.clone();
    assert_eq!(h.state().model.undo_steps(), steps + 1, "one undo step");
    let g = doc.node("group1").expect("the group node");
    let body = g.group.as_ref().unwrap();
    let mut inner: Vec<&str> = body.nodes.iter().map(|n| n.id.as_str()).collect();
    inner.sort();
    assert_eq!(inner, ["T_next", "apply", "diffuse"]);
    assert!(doc.node("diffuse").is_none());
    // The grouped graph computes the same fields, bit for bit.
    let after = fields_at_2(&mut h, "group1/T_next");
    assert!(after == before, "the fields after Ctrl+G differ");

    // Select the group and press Tab: its body, with the ports as
    // boundary nodes. (A double-click enters too; kittest's synthetic
    // double-click is not seen as one, so that was tried with a real mouse
    // under Xvfb.)
    h.run_steps(2);
    click_title(&mut h, "group1", Modifiers::NONE, 1);
    h.key_press(egui::Key::Tab);
    h.run_steps(2);
    assert_eq!(
        h.state().model.scope_ids(),
        ["group1"],
        "{:?} {:?}",
        h.state().model.log,
        h.state().canvas.node_rects.get("group1")
    );
    h.run_steps(3);
    let shown = &h.state().model.doc;
    assert!(shown.node("diffuse").is_some() && shown.node("@inputs").is_some());
    assert!(h.state().canvas.node_rects.contains_key("@outputs"));
    // The breadcrumb names where we are.
    assert!(h.get_all_by_label("group1").count() >= 1);
    // Promote the diffusion rate from the inspector, then un-promote it.
    click_title(&mut h, "diffuse", Modifiers::NONE, 1);
    // The inspector offers it (the button's own click is driven through
    // the command it sends: kittest's click on it is not delivered).
    row_button(&h, "Promote", "alpha");
    // Only scalar parameters are offered: not the kernel's loop extent,
    // its field port name or its code.
    for structural in ["range", "over", "code"] {
        assert!(
            find_row_button(&h, "Promote", structural).is_none(),
            "'{}' is offered for promotion",
            structural
        );
    }
    let promote = |h: &mut Harness<'static, WeftApp>, on: bool| {
        h.state_mut().model.push(gui::model::Command::Promote {
            node: "diffuse".into(),
            param: "alpha".into(),
            on,
        });
        h.run_steps(3);
    };
    promote(&mut h, true);
    let promoted = |h: &Harness<'static, WeftApp>| {
        let g = h.state().model.entered_group().unwrap();
        g.group.as_ref().unwrap().params.clone()
    };
    let p = promoted(&h);
    assert_eq!(p.len(), 1);
    assert_eq!(
        (p[0].name.as_str(), p[0].target.as_str()),
        ("diffuse_alpha", "diffuse.alpha")
    );
    assert_eq!((p[0].min, p[0].max), (Some(0.0), Some(0.25)));
    // The whole document (what runs and saves) has it.
    let root = h.state().model.root().into_owned();
    assert_eq!(
        root.node("group1").unwrap().group.as_ref().unwrap().params,
        p
    );
    row_button(&h, "Un-promote", "alpha");
    promote(&mut h, false);
    assert!(promoted(&h).is_empty());
    promote(&mut h, true);
    assert_eq!(promoted(&h).len(), 1);

    // Out through the breadcrumb's first crumb.
    let crumb = h.get_by_label("graph").rect().center();
    click_at(&mut h, crumb);
    assert!(h.state().model.scope_ids().is_empty());
    h.run_steps(3);
    let doc = h.state().model.doc.clone();
    assert_eq!(
        doc.node("group1")
            .unwrap()
            .group
            .as_ref()
            .unwrap()
            .params
            .len(),
        1
    );

    // Ctrl+Alt+G on the selected group: the nodes come back, wires too.
    click_title(&mut h, "group1", Modifiers::NONE, 1);
    let steps = h.state().model.undo_steps();
    h.key_press_modifiers(Modifiers::COMMAND | Modifiers::ALT, egui::Key::G);
    h.run_steps(3);
    assert_eq!(h.state().model.undo_steps(), steps + 1);
    let flat = h.state().model.doc.clone();
    assert!(flat.node("group1").is_none());
    let sorted = |mut v: Vec<weft_ir::graph::WireDoc>| {
        v.sort_by(|a, b| (&a.from, &a.to).cmp(&(&b.from, &b.to)));
        v
    };
    assert_eq!(sorted(flat.wires.clone()), sorted(original.wires.clone()));
    assert_eq!(sorted(flat.exec.clone()), sorted(original.exec.clone()));
    // Undo brings the group back.
    h.key_press_modifiers(Modifiers::COMMAND, egui::Key::Z);
    h.run_steps(2);
    assert!(h.state().model.doc.node("group1").is_some());
    drop(h);
    let _ = std::fs::remove_dir_all(&cfg);
}
