//! What the kittest GUI test files share: the repository root, the wgpu
//! adapter check (a failure under `CI=true`, a visible skip elsewhere), a
//! harness around the real app, and waiting for the background compile.
//! The including test crate declares `mod gui` (the app's GUI sources).

use crate::gui::{GuiOptions, WeftApp};
use egui_kittest::Harness;
use std::path::{Path, PathBuf};

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

pub fn gpu_ok() -> bool {
    match weft_runtime::wgpu_backend::WgpuContext::new(
        weft_runtime::wgpu_backend::AdapterChoice::Any,
    ) {
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

/// The test window: large enough that the node editor keeps the room
/// (960 × 700 points) the tests' pointer positions and fitted zooms were
/// written for, beside a 440-point inspector, with a 400-point viewport
/// left of it and the timeline bar below.
pub const WINDOW: (f32, f32) = (1800.0, 930.0);

/// Gives a fresh settings folder `cfg` the panel sizes `WINDOW` is meant
/// for (a folder with its own `layout.json` keeps it).
pub fn editor_room(cfg: &Path) {
    let file = cfg.join("layout.json");
    if !file.exists() {
        std::fs::create_dir_all(cfg).unwrap();
        std::fs::write(file, r#"{"side_width": 440.0, "viewport_width": 400.0}"#).unwrap();
    }
}

/// The app in `WINDOW` with `graph` open and its settings in `cfg`.
pub fn harness_with(graph: Option<PathBuf>, cfg: PathBuf) -> Harness<'static, WeftApp> {
    editor_room(&cfg);
    let opts = GuiOptions {
        config_dir: Some(cfg),
        graph,
        ..Default::default()
    };
    Harness::builder()
        .with_size(WINDOW)
        .wgpu()
        .build_eframe(move |cc| WeftApp::new(cc.wgpu_render_state.as_ref(), opts))
}

/// Steps until the background compile has produced a simulation.
pub fn wait_for_sim(h: &mut Harness<'static, WeftApp>) {
    for _ in 0..400 {
        h.step();
        if h.state().viewport.sim.is_some() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("the graph never compiled: {:?}", h.state().viewport.error);
}

/// Steps until no frame is out on the simulation thread, none is asked
/// for, and no build is under way (frames run off the UI thread: a test
/// that reads the simulation waits for it to come home). Pause first.
#[allow(dead_code)] // not every test file steps frames
pub fn settle(h: &mut Harness<'static, WeftApp>) {
    for _ in 0..2000 {
        h.step();
        if h.state().viewport.is_idle() && h.state().viewport.sim.is_some() {
            h.step();
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    panic!(
        "the simulation never came home (playing: {}): {:?}",
        h.state().viewport.playing,
        h.state().viewport.error
    );
}

#[allow(dead_code)] // not every test file plays
/// Steps while playing until the simulation has run `frames` frames.
pub fn play_until(h: &mut Harness<'static, WeftApp>, frames: i32) {
    for _ in 0..4000 {
        h.step();
        if h.state().viewport.frame() >= frames {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    panic!("the simulation never reached frame {}", frames);
}
