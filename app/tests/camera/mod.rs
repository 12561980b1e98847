//! The orbit camera of 3-D views, driven like a user would (kittest):
//! Blender's and Houdini's drags, the wheel, Home/F and the numeric-pad
//! views, the undoable camera edit, and the saved camera rendering
//! headless exactly what the app showed. Expected cameras come from the
//! app's camera functions (`gui::orbit`) applied to the camera before the
//! gesture, and the running simulation's camera must equal them.

use crate::gui::orbit;
use crate::gui::WeftApp;
use crate::support::{gpu_ok, harness_with, root, settle, wait_for_sim};
use egui::{Event, Key, Modifiers, PointerButton, Pos2, Vec2};
use egui_kittest::Harness;
use weft_ir::ir::Camera;

const VIEW: &str = "view3d";

fn config_dir() -> std::path::PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    std::env::temp_dir().join(format!("weft-orbit-test-{}-{}", std::process::id(), n))
}

/// mpm3d open, paused, its simulation home and its views drawn.
fn open() -> Harness<'static, WeftApp> {
    let mut h = harness_with(Some(root().join("graphs/mpm3d.json")), config_dir());
    wait_for_sim(&mut h);
    h.state_mut().viewport.playing = false;
    // Two panes: the second shows the 3-D view (the first, the histogram).
    h.state_mut().viewport.panes.count = crate::gui::viewport::panes::PaneCount::Two;
    // Its pane asks for its size: the view is rebuilt at it first.
    for _ in 0..400 {
        h.step();
        let vp = &h.state().viewport;
        if vp.sizes.applied.contains_key(VIEW) && !vp.sizes.waiting() && !vp.compiling() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    settle(&mut h);
    h
}

/// A view node's saved `width` and `height` (the catalog's 512 when unset).
fn saved_size(doc: &weft_ir::graph::GraphDoc) -> (u64, u64) {
    let n = doc.node(VIEW).expect("view node");
    let side = |p: &str| n.params.get(p).and_then(|v| v.as_u64()).unwrap_or(512);
    (side("width"), side("height"))
}

/// The view's tile on screen.
fn tile(h: &Harness<'static, WeftApp>) -> egui::Rect {
    *h.state()
        .viewport
        .orbit
        .tiles
        .get(VIEW)
        .expect("the 3-D view's tile is drawn")
}

/// The camera the running simulation draws with (it must be the app's too).
fn sim_camera(h: &Harness<'static, WeftApp>) -> Camera {
    let vp = &h.state().viewport;
    let c = vp
        .sim
        .as_ref()
        .expect("home")
        .view_camera(VIEW)
        .expect("a 3-D view");
    assert_eq!(vp.camera_of(VIEW), Some(c));
    c
}

/// The view node's saved `camera` param.
fn saved(h: &Harness<'static, WeftApp>) -> serde_json::Value {
    h.state().model.doc.node(VIEW).expect("view node").params["camera"].clone()
}

/// Presses `button` at `a` with `m`, moves to `b` over several frames,
/// releases, and lets the edit apply.
fn drag(h: &mut Harness<'static, WeftApp>, button: PointerButton, m: Modifiers, a: Pos2, b: Pos2) {
    h.event(Event::ModifiersChanged(m));
    h.event(Event::PointerMoved(a));
    h.step();
    h.event(Event::PointerButton {
        pos: a,
        button,
        pressed: true,
        modifiers: m,
    });
    h.step();
    for k in 1..=6 {
        h.event(Event::PointerMoved(a + (b - a) * (k as f32 / 6.0)));
        h.step();
    }
    h.event(Event::PointerButton {
        pos: b,
        button,
        pressed: false,
        modifiers: m,
    });
    h.step();
    h.event(Event::ModifiersChanged(Modifiers::NONE));
    settle(h);
}

fn key(h: &mut Harness<'static, WeftApp>, at: Pos2, k: Key, m: Modifiers) {
    h.event(Event::PointerMoved(at));
    h.event(Event::ModifiersChanged(m));
    h.step();
    for pressed in [true, false] {
        h.event(Event::Key {
            key: k,
            physical_key: None,
            pressed,
            repeat: false,
            modifiers: m,
        });
        h.step();
    }
    h.event(Event::ModifiersChanged(Modifiers::NONE));
    settle(h);
}

/// A gesture's result: the simulation's camera is `want`, the node's param
/// holds it (one undo step, the document dirty), and Undo brings `before` back.
fn check_edit(h: &mut Harness<'static, WeftApp>, before: Camera, want: Camera, what: &str) {
    assert_ne!(before, want, "{}: the gesture moved nothing", what);
    assert_eq!(sim_camera(h), want, "{}: the live camera", what);
    assert_eq!(
        saved(h),
        orbit::to_param(&want),
        "{}: the saved param",
        what
    );
    assert!(h.state().model.dirty, "{}: the document is dirty", what);
}

#[test]
fn orbit_pan_zoom_frame_axis_views_and_undo() {
    if !gpu_ok() {
        return;
    }
    let mut h = open();
    let r = tile(&h);
    let (w, hh) = {
        let p = h.state().viewport.program().expect("program");
        let vk = p.view_kernels.iter().find(|v| v.node_id == VIEW).unwrap();
        (vk.width, vk.height)
    };
    let domain = [0.0, 0.0, 0.0, 1.0, 1.0, 1.0];
    let start = sim_camera(&h);
    let undo0 = h.state().model.undo_steps();
    let (a, b) = (r.center(), r.center() + Vec2::new(60.0, -25.0));

    // Blender: middle-drag orbits.
    drag(&mut h, PointerButton::Middle, Modifiers::NONE, a, b);
    let c1 = orbit::orbit(start, b - a);
    check_edit(&mut h, start, c1, "middle-drag orbit");
    assert_eq!(h.state().model.undo_steps(), undo0 + 1, "one undo step");
    // Shift+middle pans (points to image pixels through the tile's scale).
    drag(&mut h, PointerButton::Middle, Modifiers::SHIFT, a, b);
    let c2 = orbit::pan(c1, (b - a) * (w as f32 / r.width()), w, hh);
    check_edit(&mut h, c1, c2, "shift+middle pan");
    // Ctrl+middle zooms.
    drag(&mut h, PointerButton::Middle, Modifiers::CTRL, a, b);
    let c3 = orbit::zoom_drag(c2, (b - a).y);
    check_edit(&mut h, c2, c3, "ctrl+middle zoom");
    // The wheel zooms.
    h.event(Event::PointerMoved(a));
    h.step();
    h.event(Event::MouseWheel {
        unit: egui::MouseWheelUnit::Point,
        delta: Vec2::new(0.0, 120.0),
        phase: egui::TouchPhase::Move,
        modifiers: Modifiers::NONE,
    });
    h.step();
    settle(&mut h);
    let c4 = orbit::wheel(c3, 120.0);
    check_edit(&mut h, c3, c4, "wheel");
    // Houdini: Alt+LMB orbits, Alt+MMB pans, Alt+RMB zooms.
    drag(&mut h, PointerButton::Primary, Modifiers::ALT, a, b);
    let c5 = orbit::orbit(c4, b - a);
    check_edit(&mut h, c4, c5, "alt+LMB orbit");
    drag(&mut h, PointerButton::Middle, Modifiers::ALT, a, b);
    let c6 = orbit::pan(c5, (b - a) * (w as f32 / r.width()), w, hh);
    check_edit(&mut h, c5, c6, "alt+MMB pan");
    drag(&mut h, PointerButton::Secondary, Modifiers::ALT, a, b);
    let c7 = orbit::zoom_drag(c6, (b - a).y);
    check_edit(&mut h, c6, c7, "alt+RMB zoom");
    // Home frames the domain (yaw and pitch kept).
    key(&mut h, a, Key::Home, Modifiers::NONE);
    let c8 = orbit::frame_domain(c7, &domain, w, hh);
    check_edit(&mut h, c7, c8, "Home");
    assert_eq!((c8.yaw, c8.pitch), (c7.yaw, c7.pitch));
    assert_eq!(c8.target, [0.5, 0.5, 0.5]);
    drag(&mut h, PointerButton::Middle, Modifiers::SHIFT, a, b);
    let c9 = sim_camera(&h);
    // F frames what the view shows: the particles' box, computed here
    // from the positions field's words as the simulation holds them.
    let bbox = {
        let sim = h.state().viewport.sim.as_ref().expect("home");
        let x = sim
            .program
            .fields
            .iter()
            .find(|(_, f)| f.name == "x")
            .map(|(id, _)| id)
            .unwrap();
        let words = sim.read_field(x).unwrap();
        let mut b = [
            f32::INFINITY,
            f32::INFINITY,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NEG_INFINITY,
            f32::NEG_INFINITY,
        ];
        for p in words.chunks(3) {
            for i in 0..3 {
                let v = f32::from_bits(p[i]);
                b[i] = b[i].min(v);
                b[i + 3] = b[i + 3].max(v);
            }
        }
        b
    };
    assert!(
        bbox[3] - bbox[0] < 0.9,
        "the particles fill part of the box: {:?}",
        bbox
    );
    key(&mut h, a, Key::F, Modifiers::NONE);
    let c10 = orbit::frame_domain(c9, &bbox, w, hh);
    check_edit(&mut h, c9, c10, "F");
    assert_ne!(
        c10,
        orbit::frame_domain(c9, &domain, w, hh),
        "F is not Home"
    );
    // Numeric-pad views: 7 top, 1 front, 3 side; Ctrl: the opposite.
    let mut cur = sim_camera(&h);
    for (k, opposite, yaw, pitch) in [
        (Key::Num7, false, cur.yaw, 90.0),
        (Key::Num1, false, 0.0, 0.0),
        (Key::Num3, false, 90.0, 0.0),
        (Key::Num1, true, 180.0, 0.0),
        (Key::Num7, true, 0.0, -90.0),
    ] {
        let m = if opposite {
            Modifiers::CTRL
        } else {
            Modifiers::NONE
        };
        key(&mut h, a, k, m);
        let want = orbit::axis_view(cur, k, opposite).expect("an axis key");
        assert_eq!(
            (want.yaw, want.pitch),
            (if k == Key::Num7 { 0.0 } else { yaw }, pitch)
        );
        if want != cur {
            check_edit(&mut h, cur, want, &format!("{:?} ctrl {}", k, opposite));
        }
        cur = want;
    }
    // Undo walks the camera edits back, the simulation following each.
    let end = h.state().model.undo_steps();
    for _ in undo0..end {
        h.state_mut().model.undo();
        settle(&mut h);
    }
    assert_eq!(sim_camera(&h), start, "undone to the saved camera");
    assert_eq!(saved(&h), serde_json::json!({"yaw": 30, "pitch": 20}));
}

/// A drag, Save, and the saved file rendered headless (the CLI's calls:
/// build, open, start, draw) on the app's backend: the same picture.
#[test]
fn the_saved_camera_renders_headless_as_the_app_showed() {
    if !gpu_ok() {
        return;
    }
    let mut h = open();
    let r = tile(&h);
    let start = sim_camera(&h);
    drag(
        &mut h,
        PointerButton::Middle,
        Modifiers::NONE,
        r.center(),
        r.center() + Vec2::new(-80.0, 40.0),
    );
    assert_ne!(sim_camera(&h), start);
    let dir = config_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("framed.json");
    h.state_mut().model.save_as(&path).expect("save");
    assert!(!h.state().model.dirty);
    let app_img = {
        let sim = h.state_mut().viewport.sim.as_mut().expect("home");
        assert_eq!(sim.frame, 0);
        sim.render_views().expect("views")
    };
    let backend = h.state().viewport.sim.as_ref().unwrap().backend().unwrap();
    let mut doc = weft_ir::graph::GraphDoc::load(&path).expect("load the saved file");
    // The app draws the view at its pane's size (the saved file keeps its
    // own): the headless render is asked for that size, as `weft render
    // --size` would.
    let (w, hh) = h.state().viewport.sizes.applied[VIEW];
    assert_eq!(
        saved_size(&doc),
        (512, 512),
        "the saved file keeps its size"
    );
    weft_ir::graph::overrides::apply_overrides(
        &mut doc,
        &weft_ir::graph::overrides::Overrides {
            sets: vec![
                format!("{}.width={}", VIEW, w),
                format!("{}.height={}", VIEW, hh),
            ],
            inits: vec![],
        },
    )
    .expect("sized");
    let program = weft_ir::graph::build_program(
        &doc,
        &weft_ir::graph::BuildOptions {
            base_dir: root().join("graphs"),
        },
    )
    .expect("builds");
    let mut sim = weft_runtime::Simulation::new(
        program,
        &weft_runtime::SimOptions {
            backend,
            ..Default::default()
        },
    )
    .expect("opens");
    sim.start().expect("start");
    let cli_img = sim.render_views().expect("views");
    let (a, b) = (
        app_img.iter().find(|v| v.0 == VIEW).unwrap(),
        cli_img.iter().find(|v| v.0 == VIEW).unwrap(),
    );
    assert_eq!((a.1.width, a.1.height), (w, hh));
    assert_eq!(a.1.width, b.1.width);
    assert!(
        a.1.rgba == b.1.rgba,
        "the headless render differs from the app's picture"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// While playing, the simulation is away on its thread for most passes:
/// a drag's cameras wait for it and the last one is applied on its return.
#[test]
fn orbit_while_playing_applies_when_the_frame_returns() {
    if !gpu_ok() {
        return;
    }
    let mut h = open();
    let r = tile(&h);
    let start = sim_camera(&h);
    h.state_mut().viewport.playing = true;
    let (a, b) = (r.center(), r.center() + Vec2::new(40.0, 30.0));
    h.event(Event::PointerMoved(a));
    h.step();
    h.event(Event::PointerButton {
        pos: a,
        button: PointerButton::Middle,
        pressed: true,
        modifiers: Modifiers::NONE,
    });
    h.step();
    for k in 1..=6 {
        h.event(Event::PointerMoved(a + (b - a) * (k as f32 / 6.0)));
        h.step();
    }
    h.event(Event::PointerButton {
        pos: b,
        button: PointerButton::Middle,
        pressed: false,
        modifiers: Modifiers::NONE,
    });
    h.step();
    h.state_mut().viewport.playing = false;
    settle(&mut h);
    let want = orbit::orbit(start, b - a);
    assert!(h.state().viewport.frame() > 0, "frames ran meanwhile");
    assert_eq!(sim_camera(&h), want);
    assert_eq!(saved(&h), orbit::to_param(&want));
}
