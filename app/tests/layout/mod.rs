//! The window's layout (kittest): at three window sizes no area draws over
//! another and all are inside the window; Ctrl+Space maximises the
//! viewport over the main area and restores it; the divider between the
//! viewport and the node editor moves and is remembered; four panes show
//! four views, each picked on its own; the viewport detaches into a window
//! of its own and docks again.

use super::*;
use egui::{Event, Key, Modifiers, PointerButton, Pos2, Rect};
use gui::window_layout::AreaRects;

/// The app at `size` with `graph` open and its settings in `cfg`.
fn harness_sized(graph: PathBuf, cfg: PathBuf, size: (f32, f32)) -> Harness<'static, WeftApp> {
    let opts = GuiOptions {
        config_dir: Some(cfg),
        graph: Some(graph),
        ..Default::default()
    };
    Harness::builder()
        .with_size(size)
        .wgpu()
        .build_eframe(move |cc| WeftApp::new(cc.wgpu_render_state.as_ref(), opts))
}

/// heat_color with two more image views: four views in all.
fn four_view_graph() -> PathBuf {
    let mut doc: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("graphs/heat_color.json")).unwrap(),
    )
    .unwrap();
    for (id, from) in [
        ("next_view", "T_next.field"),
        ("source_view", "source.field"),
    ] {
        doc["nodes"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({
                "id": id, "kind": "image", "params": {"min": 0.0, "max": 1.0}, "pos": [1060, 400]
            }));
        doc["wires"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"from": from, "to": format!("{}.field", id)}));
    }
    let dir = config_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("four_views.json");
    std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    path
}

/// Whether `a` and `b` share more than an edge.
fn overlap(a: Rect, b: Rect) -> bool {
    let i = a.intersect(b);
    i.width() > 0.5 && i.height() > 0.5
}

/// The areas drawn in the last pass, by name, the panes among them.
fn areas(h: &Harness<'static, WeftApp>) -> Vec<(String, Rect)> {
    let AreaRects {
        viewport: _,
        main: _,
        node_editor,
        inspector,
        timeline,
        spreadsheet,
        problems,
    } = h.state().layout.rects;
    let mut out: Vec<(String, Rect)> = h
        .state()
        .viewport
        .panes
        .rects
        .iter()
        .enumerate()
        .map(|(i, r)| (format!("pane {}", i), *r))
        .collect();
    out.push(("timeline".into(), timeline));
    out.push(("problems".into(), problems));
    out.extend(node_editor.map(|r| ("node editor".into(), r)));
    out.extend(inspector.map(|r| ("inspector".into(), r)));
    out.extend(spreadsheet.map(|r| ("spreadsheet".into(), r)));
    out
}

fn assert_apart_and_inside(h: &Harness<'static, WeftApp>, size: (f32, f32)) {
    let window = Rect::from_min_size(Pos2::ZERO, egui::vec2(size.0, size.1));
    let a = areas(h);
    for (name, r) in &a {
        assert!(r.is_positive(), "{:?}: {} is empty: {:?}", size, name, r);
        assert!(
            window.expand(0.5).contains_rect(*r),
            "{:?}: {} {:?} outside the window",
            size,
            name,
            r
        );
    }
    for (i, (na, ra)) in a.iter().enumerate() {
        for (nb, rb) in &a[i + 1..] {
            assert!(
                !overlap(*ra, *rb),
                "{:?}: {} {:?} overlaps {} {:?}",
                size,
                na,
                ra,
                nb,
                rb
            );
        }
    }
    let vp = h.state().layout.rects.viewport;
    for r in &h.state().viewport.panes.rects {
        assert!(
            vp.expand(0.5).contains_rect(*r),
            "a pane outside the viewport"
        );
    }
}

#[test]
fn no_area_draws_over_another_at_three_window_sizes() {
    if !gpu_ok() {
        return;
    }
    let graph = four_view_graph();
    for size in [(800.0, 600.0), (1280.0, 800.0), (1920.0, 1080.0)] {
        let mut h = harness_sized(graph.clone(), config_dir(), size);
        wait_for_sim(&mut h);
        h.state_mut().viewport.playing = false;
        settle(&mut h);
        h.state_mut().sheet.open = true;
        h.state_mut().viewport.panes.count = gui::viewport::panes::PaneCount::Four;
        h.run_steps(6);
        assert_eq!(h.state().viewport.panes.rects.len(), 4);
        assert!(h.state().layout.rects.spreadsheet.is_some());
        assert_apart_and_inside(&h, size);
        // Maximised, too.
        h.state_mut().layout.maximised = true;
        h.run_steps(4);
        assert_apart_and_inside(&h, size);
    }
}

#[test]
fn ctrl_space_maximises_the_viewport_and_again_restores_it() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat_color.json");
    wait_for_sim(&mut h);
    h.run_steps(3);
    let before = h.state().layout.rects;
    assert!(before.node_editor.is_some());
    assert!(before.viewport.width() < before.main.width() - 100.0);
    // The pointer over the node editor: the key is the window's, wherever.
    h.event(Event::PointerMoved(before.node_editor.unwrap().center()));
    h.key_press_modifiers(Modifiers::COMMAND, Key::Space);
    h.run_steps(3);
    let max = h.state().layout.rects;
    assert!(h.state().layout.maximised);
    assert_eq!(max.node_editor, None, "the node editor is hidden");
    assert_eq!(max.inspector, None, "so is the inspector");
    assert!(
        (max.viewport.width() - max.main.width()).abs() < 1.0
            && (max.viewport.height() - max.main.height()).abs() < 1.0,
        "the viewport {:?} covers the main area {:?}",
        max.viewport,
        max.main
    );
    h.key_press_modifiers(Modifiers::COMMAND, Key::Space);
    h.run_steps(3);
    let after = h.state().layout.rects;
    assert!(!h.state().layout.maximised);
    assert!(after.node_editor.is_some());
    assert!((after.viewport.width() - before.viewport.width()).abs() < 1.0);
}

#[test]
fn dragging_the_divider_resizes_the_viewport_and_is_remembered() {
    if !gpu_ok() {
        return;
    }
    let cfg = config_dir();
    let graph = root().join("graphs/heat_color.json");
    let mut h = harness_with(Some(graph.clone()), cfg.clone());
    wait_for_sim(&mut h);
    h.run_steps(3);
    let vp = h.state().layout.rects.viewport;
    let editor = h.state().layout.rects.node_editor.unwrap();
    let a = egui::pos2(vp.right() + 1.0, vp.center().y);
    let b = a + egui::vec2(-100.0, 0.0);
    h.event(Event::PointerMoved(a));
    h.run_steps(2);
    h.event(Event::PointerButton {
        pos: a,
        button: PointerButton::Primary,
        pressed: true,
        modifiers: Modifiers::NONE,
    });
    h.run_steps(1);
    for k in 1..=10 {
        h.event(Event::PointerMoved(a + (b - a) * (k as f32 / 10.0)));
        h.run_steps(1);
    }
    h.event(Event::PointerButton {
        pos: b,
        button: PointerButton::Primary,
        pressed: false,
        modifiers: Modifiers::NONE,
    });
    // Past the prefs' once-a-second write.
    h.run_steps(80);
    let moved = h.state().layout.rects;
    assert!(
        (moved.viewport.width() - (vp.width() - 100.0)).abs() < 6.0,
        "viewport {} → {}",
        vp.width(),
        moved.viewport.width()
    );
    let editor_now = moved.node_editor.unwrap();
    assert!(
        editor_now.width() > editor.width() + 90.0,
        "the editor took the space"
    );
    assert!(!overlap(moved.viewport, editor_now));
    let prefs: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cfg.join("layout.json")).unwrap()).unwrap();
    let saved = prefs["viewport_width"].as_f64().unwrap() as f32;
    assert!(
        (saved - moved.viewport.width()).abs() < 1.0,
        "{} saved",
        saved
    );
    // The next session starts with the split where it was left.
    drop(h);
    let mut h = harness_with(Some(graph), cfg.clone());
    h.run_steps(4);
    let again = h.state().layout.rects.viewport.width();
    assert!((again - saved).abs() < 2.0, "{} vs {}", again, saved);
    // A window resize is not a move of the divider: the split stays saved.
    h.set_size(egui::vec2(900.0, 700.0));
    h.run_steps(80);
    assert!(
        h.state().layout.rects.viewport.width() < saved,
        "clamped to the window"
    );
    let prefs: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cfg.join("layout.json")).unwrap()).unwrap();
    assert_eq!(prefs["viewport_width"].as_f64().unwrap() as f32, saved);
}

#[test]
fn four_panes_each_show_a_view_of_their_own() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness_sized(four_view_graph(), config_dir(), (1400.0, 860.0));
    wait_for_sim(&mut h);
    h.state_mut().viewport.playing = false;
    settle(&mut h);
    h.get_by_label("4").click();
    h.run_steps(4);
    let vp = &h.state().viewport;
    assert_eq!(vp.panes.count, gui::viewport::panes::PaneCount::Four);
    let rects = vp.panes.rects.clone();
    assert_eq!(rects.len(), 4);
    // Two by two: two rows of two.
    assert!((rects[0].top() - rects[1].top()).abs() < 0.5);
    assert!(rects[2].top() > rects[0].bottom());
    let names = ["view", "color_view", "next_view", "source_view"];
    let views: Vec<String> = (0..4)
        .map(|i| h.state().viewport.pane_view(i).unwrap())
        .collect();
    assert_eq!(views, names, "the first views in order");
    // Pane 4 picks the first view from its header's chooser (at the
    // header's left; its entries are labelled with the views' names).
    let chooser = rects[3].left_top() + egui::vec2(40.0, 11.0);
    h.event(Event::PointerMoved(chooser));
    h.run_steps(1);
    click_at(&mut h, chooser);
    h.run_steps(3);
    let item = h
        .get_all_by_label("view")
        .find(|n| n.rect().top() > rects[3].top() + 20.0)
        .expect("the chooser's entry")
        .rect();
    click_at(&mut h, item.center());
    h.run_steps(3);
    assert_eq!(h.state().viewport.pane_view(3).as_deref(), Some("view"));
    assert_eq!(
        h.state().viewport.pane_view(1).as_deref(),
        Some("color_view")
    );
    // One pane again: it shows the first pane's view.
    h.get_by_label("1").click();
    h.run_steps(3);
    assert_eq!(h.state().viewport.panes.rects.len(), 1);
    assert_eq!(h.state().viewport.pane_view(0).as_deref(), Some("view"));
}

fn click_at(h: &mut Harness<'static, WeftApp>, p: Pos2) {
    for pressed in [true, false] {
        h.event(Event::PointerButton {
            pos: p,
            button: PointerButton::Primary,
            pressed,
            modifiers: Modifiers::NONE,
        });
        h.run_steps(1);
    }
}

#[test]
fn two_d_views_zoom_about_the_pointer_pan_and_fit() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat_color.json");
    wait_for_sim(&mut h);
    h.state_mut().viewport.playing = false;
    settle(&mut h);
    h.get_by_label("2").click();
    h.run_steps(4);
    let pane = h.state().viewport.panes.rects[0];
    let p = pane.center() + egui::vec2(30.0, 10.0);
    h.event(Event::PointerMoved(p));
    h.run_steps(2);
    assert!(h
        .state()
        .viewport
        .readout
        .as_deref()
        .unwrap_or("")
        .starts_with("T["));
    h.event(Event::MouseWheel {
        unit: egui::MouseWheelUnit::Point,
        delta: egui::vec2(0.0, 120.0),
        phase: egui::TouchPhase::Move,
        modifiers: Modifiers::NONE,
    });
    h.run_steps(12);
    let nav = h.state().viewport.view_nav["view"];
    assert!(nav.zoom > 1.05, "{:?}", nav);
    // About the pointer: the picture moved away from it, not from the centre.
    assert!(nav.pan.x < -1.0 && nav.pan.y < -1.0, "{:?}", nav);
    assert_eq!(
        h.state().viewport.view_nav["color_view"],
        gui::viewport::ViewNav::default(),
        "the other pane keeps its own"
    );
    // Middle-drag pans.
    h.event(Event::PointerButton {
        pos: p,
        button: PointerButton::Middle,
        pressed: true,
        modifiers: Modifiers::NONE,
    });
    h.run_steps(1);
    for k in 1..=5 {
        h.event(Event::PointerMoved(p + egui::vec2(8.0 * k as f32, 0.0)));
        h.run_steps(1);
    }
    h.event(Event::PointerButton {
        pos: p + egui::vec2(40.0, 0.0),
        button: PointerButton::Middle,
        pressed: false,
        modifiers: Modifiers::NONE,
    });
    h.run_steps(2);
    let panned = h.state().viewport.view_nav["view"];
    assert!(panned.pan.x > nav.pan.x + 20.0, "{:?} → {:?}", nav, panned);
    // The scalar view's colour bar shows its range (0 to 1 in this graph).
    assert!(
        (h.query_by_label("0.0000").is_some() && h.query_by_label("1.0000").is_some())
            || h.query_by_label("0.0000 … 1.0000").is_some()
    );
    // F over it fits it again.
    h.key_press(Key::F);
    h.run_steps(2);
    assert_eq!(
        h.state().viewport.view_nav["view"],
        gui::viewport::ViewNav::default()
    );
}

/// Steps until the panes' sizes are taken and built (no resize waiting,
/// no build under way), then until the simulation is home.
fn wait_sized(h: &mut Harness<'static, WeftApp>, view: &str) {
    for _ in 0..600 {
        h.step();
        let vp = &h.state().viewport;
        if vp.sizes.applied.contains_key(view) && !vp.sizes.waiting() && !vp.compiling() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    settle(h);
}

/// The size the running program draws `view` at.
fn drawn_size(h: &Harness<'static, WeftApp>, view: &str) -> (u32, u32) {
    let sim = h.state().viewport.sim.as_ref().expect("home");
    let k = sim
        .program
        .view_kernels
        .iter()
        .find(|k| k.node_id == view)
        .expect("a view kernel");
    (k.width, k.height)
}

#[test]
fn three_d_views_draw_at_their_pane_s_pixel_size() {
    if !gpu_ok() {
        return;
    }
    const VIEW: &str = "view3d";
    let mut h = harness_with(Some(root().join("graphs/mpm3d.json")), config_dir());
    wait_for_sim(&mut h);
    h.state_mut().viewport.playing = false;
    settle(&mut h);
    h.get_by_label("Step").click();
    h.run_steps(2);
    settle(&mut h);
    // Two panes: the 3-D view is the second.
    h.get_by_label("2").click();
    wait_sized(&mut h, VIEW);
    assert_eq!(h.state().viewport.pane_view(1).as_deref(), Some(VIEW));
    let pane = h.state().viewport.panes.rects[1];
    let ppp = h.ctx.pixels_per_point();
    let (w, hh) = drawn_size(&h, VIEW);
    assert_eq!(
        w,
        (pane.width() * ppp).round() as u32,
        "as wide as its pane"
    );
    assert!(
        (hh as f32) < pane.height() * ppp && (hh as f32) > (pane.height() - 40.0) * ppp,
        "as tall as its pane under the header: {} in {:?}",
        hh,
        pane
    );
    // The saved graph keeps its own size.
    let node = h.state().model.doc.node(VIEW).unwrap();
    assert_eq!(node.params["width"], serde_json::json!(512));
    assert!(!h.state().model.dirty);
    // Maximised, the pane is larger: the view is rebuilt at its new size
    // and the simulation goes on from the frame it was at.
    let frame = h.state().viewport.frame();
    assert_eq!(frame, 1);
    let before = (w, hh);
    h.key_press_modifiers(Modifiers::COMMAND, Key::Space);
    for _ in 0..600 {
        h.step();
        if h.state().viewport.sizes.applied.get(VIEW) != Some(&before) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    wait_sized(&mut h, VIEW);
    let pane = h.state().viewport.panes.rects[1];
    let (w2, h2) = drawn_size(&h, VIEW);
    assert!(w2 > w && h2 >= hh, "{:?} → {:?}", before, (w2, h2));
    assert_eq!(w2, (pane.width() * ppp).round() as u32);
    assert_eq!(h.state().viewport.frame(), frame, "the state carried over");
    assert!(!h.state().model.dirty);
}

/// View > Viewport in its own window: the viewport leaves the main area
/// to the node editor and shows in a window of its own (in the test
/// harness, with one OS window, egui draws it as a window inside the
/// main one), its panes inside it and its views still drawn; Ctrl+Space
/// does not maximise a detached viewport; the same menu item docks it
/// again where it was.
#[test]
fn the_viewport_detaches_into_its_own_window_and_docks_again() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat_color.json");
    wait_for_sim(&mut h);
    h.run_steps(3);
    let before = h.state().layout.rects;
    let editor_before = before.node_editor.expect("the node editor shows");
    h.get_by_label("View").click();
    h.run_steps(2);
    h.get_by_label("Viewport in its own window").click();
    h.run_steps(4);
    assert!(h.state().layout.detached);
    let det = h.state().layout.rects;
    let editor = det.node_editor.expect("the node editor shows");
    assert!(
        editor.width() > editor_before.width() + 100.0,
        "the node editor takes the viewport's room: {:?} -> {:?}",
        editor_before,
        editor
    );
    assert!(
        det.viewport.is_positive(),
        "the viewport's window: {:?}",
        det.viewport
    );
    let panes = h.state().viewport.panes.rects.clone();
    assert!(!panes.is_empty(), "its panes are drawn");
    for p in &panes {
        assert!(
            det.viewport.expand(1.0).contains_rect(*p),
            "pane {:?} inside the window {:?}",
            p,
            det.viewport
        );
    }
    assert!(!h.state().viewport.textures_empty(), "its views are drawn");
    // Ctrl+Space has nothing to maximise.
    h.event(Event::PointerMoved(editor.center()));
    h.key_press_modifiers(Modifiers::COMMAND, Key::Space);
    h.run_steps(2);
    assert!(!h.state().layout.maximised);
    // Docked again, where it was.
    h.get_by_label("View").click();
    h.run_steps(2);
    h.get_by_label("Viewport in its own window").click();
    h.run_steps(4);
    let after = h.state().layout.rects;
    assert!(!h.state().layout.detached);
    assert!(
        (after.viewport.width() - before.viewport.width()).abs() < 1.0,
        "{:?} vs {:?}",
        after.viewport,
        before.viewport
    );
    assert!(after
        .node_editor
        .is_some_and(|e| (e.width() - editor_before.width()).abs() < 1.0));
}
