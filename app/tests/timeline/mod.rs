//! The timeline and its frame cache (kittest, in the gui_optimize crate:
//! one fewer compile of the GUI). Every state is checked against an
//! independent simulation of the same graph run by the runtime for the
//! same number of frames, never against values written here.

use super::*;
use weft_runtime::{Backend, SimOptions, Simulation};

/// A graph with random streams (its state depends on the launch counts).
const GRAPH: &str = "life.json";

/// Rebuilds the app's simulation on `backend` and waits for it.
fn use_backend(h: &mut Harness<'static, WeftApp>, backend: Backend) {
    let doc = h
        .state()
        .viewer
        .compiled_doc(&h.state().model.doc)
        .into_owned();
    let assets = h.state().model.assets.clone();
    let rev = h.state().model.revision;
    h.state_mut().viewport.backend = backend;
    h.state_mut().viewport.rebuild(rev, &doc, &assets);
    for _ in 0..2000 {
        h.step();
        let vp = &h.state().viewport;
        if !vp.compiling()
            && vp
                .sim
                .as_ref()
                .is_some_and(|s| s.backend() == Some(backend))
        {
            settle(h);
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    panic!("no {:?} build: {:?}", backend, h.state().viewport.error);
}

/// The non-view state of an independent simulation of the app's graph
/// after `frames` frames on `backend` (what `weft run --frames N` dumps).
fn independent(
    h: &Harness<'static, WeftApp>,
    backend: Backend,
    frames: i32,
) -> Vec<(String, Vec<u32>)> {
    let doc = h.state().model.doc.clone();
    let base = h.state().model.base_dir().unwrap_or_default();
    let program =
        weft_ir::graph::build_program(&doc, &weft_ir::graph::BuildOptions { base_dir: base })
            .expect("the graph builds");
    let opts = SimOptions {
        backend,
        ..Default::default()
    };
    let mut sim = Simulation::new(program, &opts).expect("a simulation");
    sim.start().unwrap();
    for _ in 0..frames {
        sim.step_frame().unwrap();
    }
    sim.snapshot().unwrap().roots
}

/// The app's state now (its frame and non-view roots).
fn app_state(h: &mut Harness<'static, WeftApp>) -> (i32, Vec<(String, Vec<u32>)>) {
    let s = h
        .state_mut()
        .viewport
        .sim
        .as_mut()
        .unwrap()
        .snapshot()
        .unwrap();
    (s.frame, s.roots)
}

fn seek(h: &mut Harness<'static, WeftApp>, f: i32) {
    h.state_mut().viewport.seek(f);
    settle(h);
}

fn play_to(h: &mut Harness<'static, WeftApp>, f: i32) {
    h.state_mut().viewport.playing = true;
    play_until(h, f);
    h.state_mut().viewport.playing = false;
    settle(h);
}

fn scrub_back_and_play_on(backend: Backend) {
    let mut h = harness(GRAPH);
    wait_for_sim(&mut h);
    use_backend(&mut h, backend);
    play_to(&mut h, 6);
    let end = h.state().viewport.frame();
    // Scrub back: frame 3 is restored from the cache, no frame runs.
    let runs = h.state().viewport.frames_run;
    let cached = h
        .state()
        .viewport
        .cache
        .get(3)
        .unwrap()
        .expect("frame 3 cached");
    seek(&mut h, 3);
    assert_eq!(
        h.state().viewport.frames_run,
        runs,
        "scrubbing back simulated"
    );
    let counts = h
        .state()
        .viewport
        .sim
        .as_ref()
        .unwrap()
        .launch_counts()
        .to_vec();
    let cached_counts: Vec<u32> = cached.launches.iter().map(|(_, n)| *n).collect();
    assert_eq!(counts, cached_counts, "launch counts are frame 3's");
    let (f, roots) = app_state(&mut h);
    assert_eq!(f, 3);
    assert!(
        roots == independent(&h, backend, 3),
        "frame 3 differs from a fresh run"
    );
    // Playing on from there: bit-identical to an uninterrupted run.
    play_to(&mut h, end + 3);
    let (f, roots) = app_state(&mut h);
    assert!(f > end);
    assert!(
        roots == independent(&h, backend, f),
        "frame {} after a scrub differs from an uninterrupted run",
        f
    );
    // Scrubbing past the last frame simulated simulates forward to it.
    let runs = h.state().viewport.frames_run;
    seek(&mut h, f + 2);
    assert_eq!(h.state().viewport.frames_run, runs + 2);
    let (g, roots) = app_state(&mut h);
    assert_eq!(g, f + 2);
    assert!(roots == independent(&h, backend, g));
}

#[test]
fn scrub_back_restores_and_play_continues_bit_identically_vm() {
    scrub_back_and_play_on(Backend::Vm);
}

#[test]
fn scrub_back_restores_and_play_continues_bit_identically_cpu() {
    scrub_back_and_play_on(Backend::Jit);
}

#[test]
fn eviction_keeps_the_budget_and_spilled_frames_restore() {
    let mut h = harness(GRAPH);
    wait_for_sim(&mut h);
    use_backend(&mut h, Backend::Vm);
    let one = weft_app_frame_bytes(&mut h);
    {
        let c = &mut h.state_mut().viewport.cache;
        c.budget = one * 3;
        c.spill = true;
    }
    play_to(&mut h, 8);
    let last = h.state().viewport.frame();
    let c = &h.state().viewport.cache;
    assert!(
        c.bytes() <= c.budget,
        "{} bytes over a budget of {}",
        c.bytes(),
        c.budget
    );
    let (mem, disk) = c.counts();
    assert_eq!(mem, 3);
    assert_eq!(
        mem + disk,
        last as usize + 1,
        "every frame is in memory or on disk"
    );
    assert_eq!(c.where_is(1), Some(gui::frame_cache::Cached::Disk));
    // A spilled frame restores (read back from its folder) as it was run.
    let runs = h.state().viewport.frames_run;
    seek(&mut h, 1);
    assert_eq!(h.state().viewport.frames_run, runs);
    let (f, roots) = app_state(&mut h);
    assert_eq!(f, 1);
    assert!(roots == independent(&h, Backend::Vm, 1));
    // The timeline strip shows it: clicking its cell scrubs there.
    let x = h.state().timeline.x_of(2);
    let y = h.state().timeline.strip_rect.center().y;
    assert!(x.is_finite() && y.is_finite(), "the strip is drawn");
    click(&mut h, egui::pos2(x, y));
    settle(&mut h);
    assert_eq!(h.state().viewport.frame(), 2);
    assert_eq!(h.state().viewport.frames_run, runs);
}

/// Bytes one frame of the app's simulation takes in the cache.
fn weft_app_frame_bytes(h: &mut Harness<'static, WeftApp>) -> usize {
    let s = h
        .state_mut()
        .viewport
        .sim
        .as_mut()
        .unwrap()
        .snapshot()
        .unwrap();
    gui::frame_cache::size_of(&s)
}

/// A primary click at `p`, as a mouse gives it.
fn click(h: &mut Harness<'static, WeftApp>, p: egui::Pos2) {
    h.event(egui::Event::PointerMoved(p));
    h.step();
    for pressed in [true, false] {
        h.event(egui::Event::PointerButton {
            pos: p,
            button: egui::PointerButton::Primary,
            pressed,
            modifiers: egui::Modifiers::NONE,
        });
        h.step();
    }
}

/// A copy of GRAPH in a fresh folder (its cache goes beside it), opened.
fn harness_in_temp(tag: &str) -> (Harness<'static, WeftApp>, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("weft-bake-{}-{}", tag, std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let graph = dir.join(GRAPH);
    std::fs::copy(root().join("graphs").join(GRAPH), &graph).unwrap();
    let h = harness_with(Some(graph), dir.join("config"));
    (h, dir)
}

/// Every file under `dir`, relative, with its bytes.
fn files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            for (n, b) in files(&p) {
                out.push((format!("{}/{}", e.file_name().to_string_lossy(), n), b));
            }
        } else {
            out.push((
                e.file_name().to_string_lossy().to_string(),
                std::fs::read(&p).unwrap(),
            ));
        }
    }
    out.sort();
    out
}

fn wait_for_bake(h: &mut Harness<'static, WeftApp>) {
    for _ in 0..4000 {
        h.step();
        if h.state().timeline.bake.is_none() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    panic!("the bake never ended");
}

#[test]
fn app_bake_equals_weft_bake_and_reopens_playing_without_simulation() {
    let (mut h, dir) = harness_in_temp("same");
    wait_for_sim(&mut h);
    use_backend(&mut h, Backend::Vm);
    h.state_mut().timeline.start = 0;
    h.state_mut().timeline.end = 4;
    h.run_steps(2);
    h.get_by_label("Bake").click();
    h.run_steps(2);
    wait_for_bake(&mut h);
    match &h.state().timeline.bake_message {
        Some(Ok(m)) => assert!(m.contains("baked 5 frames"), "{}", m),
        other => panic!("the bake failed: {:?}", other),
    }
    let app_cache = dir.join("life.cache");
    let cli = std::process::Command::new(env!("CARGO_BIN_EXE_weft"))
        .arg("bake")
        .arg(dir.join(GRAPH))
        .args(["--frames", "0:4", "--backend", "vm", "--out"])
        .arg(dir.join("cli.cache"))
        .output()
        .unwrap();
    assert!(
        cli.status.success(),
        "{}",
        String::from_utf8_lossy(&cli.stderr)
    );
    let (a, b) = (files(&app_cache), files(&dir.join("cli.cache")));
    let frames = a
        .iter()
        .filter(|(n, _)| n.ends_with("/snapshot.json"))
        .count();
    assert_eq!(frames, 5, "frames 0..=4 baked");
    assert!(a == b, "the app's and weft bake's caches differ");
    drop(h);
    // Reopened: the baked frames are on the timeline and play without
    // simulating, each the state an independent run has at that frame.
    let mut h = harness_with(Some(dir.join(GRAPH)), dir.join("config"));
    wait_for_sim(&mut h);
    settle(&mut h);
    assert_eq!(
        h.state().viewport.cache.where_is(4),
        Some(gui::frame_cache::Cached::Disk)
    );
    play_to(&mut h, 4);
    assert_eq!(
        h.state().viewport.frames_run,
        0,
        "baked frames were simulated"
    );
    let (f, roots) = app_state(&mut h);
    assert_eq!(f, 4);
    assert!(roots == independent(&h, Backend::Vm, 4));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_cancelled_bake_keeps_only_complete_frames() {
    let (mut h, dir) = harness_in_temp("cancel");
    wait_for_sim(&mut h);
    use_backend(&mut h, Backend::Vm);
    h.state_mut().timeline.start = 0;
    h.state_mut().timeline.end = 400;
    h.run_steps(2);
    h.get_by_label("Bake").click();
    for _ in 0..4000 {
        h.step();
        if h.state()
            .timeline
            .bake
            .as_ref()
            .is_some_and(|b| b.written() >= 2)
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    h.get_by_label("Cancel").click();
    wait_for_bake(&mut h);
    let cache = dir.join("life.cache");
    let frames = weft_runtime::snapshot::list(&cache);
    assert!(
        frames.len() >= 2 && frames.len() < 401,
        "{} frames",
        frames.len()
    );
    for f in &frames {
        let l = weft_runtime::snapshot::read(&weft_runtime::snapshot::folder(&cache, *f))
            .expect("a complete frame");
        assert_eq!(l.snapshot.frame, *f);
    }
    let names: Vec<String> = std::fs::read_dir(&cache)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    assert!(
        names
            .iter()
            .all(|n| n == "cache.json" || n.starts_with("frame_")),
        "{:?}",
        names
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Sets parameter `param` of node `node` as the inspector does, and waits
/// for the viewport to follow.
fn set_param(h: &mut Harness<'static, WeftApp>, node: &str, param: &str, value: serde_json::Value) {
    h.state_mut().model.push(gui::model::Command::SetParam {
        node: node.into(),
        param: param.into(),
        value,
    });
    h.run_steps(3);
    settle(h);
}

#[test]
fn an_upstream_edit_makes_a_bake_stale_and_a_view_edit_does_not() {
    let (mut h, dir) = harness_in_temp("stale");
    drop(h);
    let cli = std::process::Command::new(env!("CARGO_BIN_EXE_weft"))
        .arg("bake")
        .arg(dir.join(GRAPH))
        .args(["--frames", "0:4", "--backend", "vm"])
        .output()
        .unwrap();
    assert!(
        cli.status.success(),
        "{}",
        String::from_utf8_lossy(&cli.stderr)
    );
    h = harness_with(Some(dir.join(GRAPH)), dir.join("config"));
    wait_for_sim(&mut h);
    settle(&mut h);
    let disk = Some(gui::frame_cache::Cached::Disk);
    assert_eq!(h.state().viewport.cache.where_is(3), disk);
    // A view's colour map: downstream of every field; the bake stays.
    set_param(&mut h, "view", "colormap", serde_json::json!("viridis"));
    assert!(h.state().viewport.baked_stale.is_empty());
    assert_eq!(h.state().viewport.cache.where_is(3), disk);
    // The seed kernel's density: upstream of the state; the bake is stale,
    // shown so, and its frames are simulated instead of shown.
    let mut scalars = h
        .state()
        .model
        .doc
        .nodes
        .iter()
        .find(|n| n.id == "seed")
        .unwrap()
        .params["scalars"]
        .clone();
    scalars["density"] = serde_json::json!(0.4);
    set_param(&mut h, "seed", "scalars", scalars);
    assert_eq!(h.state().viewport.baked_stale, vec![0, 1, 2, 3, 4]);
    assert_eq!(h.state().viewport.cache.where_is(3), None);
    assert!(h.get_by_label("stale").rect().is_positive());
    h.get_by_label("Re-bake");
    let runs = h.state().viewport.frames_run;
    h.state_mut().viewport.seek(3);
    settle(&mut h);
    assert!(
        h.state().viewport.frames_run > runs,
        "a stale frame was shown"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// On wgpu a frame is not read back to be cached unless the user ticks
/// "Cache frames" (the GPU rule: no per-frame host round-trips); ticked, it
/// is, and scrubbing back restores it without simulating.
#[test]
fn a_gpu_backend_caches_frames_only_when_asked() {
    let mut h = harness(GRAPH);
    wait_for_sim(&mut h);
    use_backend(&mut h, Backend::Wgpu);
    play_to(&mut h, 3);
    // Only the start state (taken once when the build came in).
    assert_eq!(
        h.state().viewport.cache.counts(),
        (1, 0),
        "a GPU backend captured frames by default"
    );
    for f in 1..=3 {
        assert!(
            matches!(h.state().viewport.cache.get(f), Ok(None)),
            "frame {} kept",
            f
        );
    }
    h.get_by_label("Cache frames").click();
    h.run_steps(2);
    assert_eq!(h.state().viewport.cache.capture, Some(true));
    play_to(&mut h, 6);
    let (m, _) = h.state().viewport.cache.counts();
    assert!(m >= 2, "{} frames cached after ticking Cache frames", m);
    let runs = h.state().viewport.frames_run;
    seek(&mut h, 5);
    assert_eq!(h.state().viewport.frame(), 5);
    assert_eq!(
        h.state().viewport.frames_run,
        runs,
        "scrubbing back simulated"
    );
}

/// Two independent states: `a` (on layout `ga`, random, shown by the
/// view) and `b` (on `gb`, which nothing shows).
const TWO_STATES: &str = r#"{
  "format": "weft-graph", "version": 1, "seed": 7,
  "nodes": [
    {"id": "ga", "kind": "dense", "params": {"shape": [8, 8]}, "pos": [0, 0]},
    {"id": "gb", "kind": "dense", "params": {"shape": [8, 8]}, "pos": [0, 200]},
    {"id": "a", "kind": "field", "params": {"type": "f32", "init": 0}, "pos": [250, 0]},
    {"id": "b", "kind": "field", "params": {"type": "f32", "init": 0}, "pos": [250, 200]},
    {"id": "frame", "kind": "on_frame", "pos": [500, 0]},
    {"id": "inc_a", "kind": "kernel", "params": {"over": "a",
      "code": "fn kernel(i: i32, j: i32) {\n    a[(i, j)] = a[(i, j)] + random();\n}\n"}, "pos": [700, 0]},
    {"id": "inc_b", "kind": "kernel", "params": {"over": "b",
      "code": "fn kernel(i: i32, j: i32) {\n    b[(i, j)] = b[(i, j)] + 2.0;\n}\n"}, "pos": [700, 200]},
    {"id": "view", "kind": "image", "params": {"colormap": "inferno"}, "pos": [1000, 0]}
  ],
  "wires": [
    {"from": "ga.cells", "to": "a.layout"}, {"from": "gb.cells", "to": "b.layout"},
    {"from": "a.field", "to": "inc_a.a"}, {"from": "b.field", "to": "inc_b.b"},
    {"from": "a.field", "to": "view.field"}
  ],
  "exec": [{"from": "frame.then", "to": "inc_a"}, {"from": "inc_a.then", "to": "inc_b"}]
}"#;

fn weft(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .output()
        .unwrap()
}

fn root_of<'a>(roots: &'a [(String, Vec<u32>)], name: &str) -> &'a [u32] {
    &roots.iter().find(|(n, _)| n == name).unwrap().1
}

#[test]
fn a_bake_of_chosen_fields_shows_them_simulates_past_them_and_goes_stale_only_upstream() {
    let dir = std::env::temp_dir().join(format!("weft-bake-fields-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let graph = dir.join("two.json");
    std::fs::write(&graph, TWO_STATES).unwrap();
    let g = graph.to_str().unwrap();
    // An unknown field is refused, naming it and the fields there are.
    let bad = weft(&["bake", g, "--frames", "0:5", "--fields", "c"]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("no field 'c'") && err.contains("a, b"),
        "{}",
        err
    );
    let ok = weft(&[
        "bake",
        g,
        "--frames",
        "0:5",
        "--fields",
        "views",
        "--backend",
        "vm",
    ]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    // Each frame holds the view's root only.
    let cache = dir.join("two.cache");
    let frame3 = weft_runtime::snapshot::read(&weft_runtime::snapshot::folder(&cache, 3)).unwrap();
    assert!(frame3.snapshot.partial);
    assert!(!weft_runtime::snapshot::is_partial(
        &weft_runtime::snapshot::folder(&cache, 5)
    ));
    let names: Vec<&str> = frame3
        .snapshot
        .roots
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(names, vec!["ga"]);
    // A partial frame is no place to resume a run from: a clear error
    // (a copy of the cache without its complete last frame).
    let cut = dir.join("cut");
    for f in 0..5 {
        let to = weft_runtime::snapshot::folder(&cut, f);
        std::fs::create_dir_all(&to).unwrap();
        for e in std::fs::read_dir(weft_runtime::snapshot::folder(&cache, f)).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
    let resume = weft(&["run", g, "--resume", cut.to_str().unwrap(), "--frames", "8"]);
    assert!(!resume.status.success());
    let err = String::from_utf8_lossy(&resume.stderr);
    assert!(err.contains("not resumed from"), "{}", err);

    let mut h = harness_with(Some(graph.clone()), dir.join("config"));
    wait_for_sim(&mut h);
    use_backend(&mut h, Backend::Vm);
    let vp = &h.state().viewport;
    assert!(vp.baked_stale.is_empty(), "{}", vp.baked_stale_why);
    assert_eq!(vp.cache.where_is(3), Some(gui::frame_cache::Cached::Disk));
    assert!(vp.cache.is_partial(3));
    // Scrubbing to a baked frame shows it: its field is frame 3's, and no
    // frame ran.
    let runs = h.state().viewport.frames_run;
    seek(&mut h, 3);
    assert_eq!(
        h.state().viewport.frames_run,
        runs,
        "a baked frame was simulated"
    );
    assert!(h.state().viewport.display_only);
    let (f, roots) = app_state(&mut h);
    assert_eq!(f, 3);
    let fresh = independent(&h, Backend::Vm, 3);
    assert!(root_of(&roots, "ga") == root_of(&fresh, "ga"));
    // A step from a shown baked frame to another baked frame shows that.
    h.state_mut().viewport.step();
    settle(&mut h);
    assert_eq!(
        h.state().viewport.frames_run,
        runs,
        "a baked frame was simulated"
    );
    let (f, roots) = app_state(&mut h);
    assert_eq!(f, 4);
    assert!(root_of(&roots, "ga") == root_of(&independent(&h, Backend::Vm, 4), "ga"));
    // The bake's last frame is complete: a step there from a partial frame
    // restores it whole, and playing past it goes on from it.
    assert!(!h.state().viewport.cache.is_partial(5));
    h.state_mut().viewport.step();
    settle(&mut h);
    assert!(!h.state().viewport.display_only);
    assert_eq!(
        h.state().viewport.frames_run,
        runs,
        "a baked frame was simulated"
    );
    let (f, roots) = app_state(&mut h);
    assert_eq!(f, 5);
    assert!(
        roots == independent(&h, Backend::Vm, 5),
        "the complete last frame"
    );
    seek(&mut h, 8);
    assert_eq!(h.state().viewport.frames_run, runs + 3);
    let (f, roots) = app_state(&mut h);
    assert_eq!(f, 8);
    assert!(
        roots == independent(&h, Backend::Vm, 8),
        "frame 8 differs from a fresh run"
    );
    // From a partial frame, a step to a frame not baked simulates from a
    // complete state, so the field the bake left out is right too (from
    // the partial frame 3 it would be another frame's plus one step).
    h.state_mut().viewport.cache.clear();
    h.state_mut().viewport.take_baked();
    seek(&mut h, 3);
    assert!(h.state().viewport.display_only);
    h.state_mut().viewport.cache.drop_baked(&cache);
    h.state_mut().viewport.step();
    settle(&mut h);
    assert!(!h.state().viewport.display_only);
    let (f, roots) = app_state(&mut h);
    assert_eq!(f, 4);
    assert!(
        roots == independent(&h, Backend::Vm, 4),
        "a step from a partial frame"
    );
    // An edit to a kernel that does not feed the baked field keeps the bake.
    let code = |s: &str| serde_json::json!(s);
    set_param(
        &mut h,
        "inc_b",
        "code",
        code("fn kernel(i: i32, j: i32) {\n    b[(i, j)] = b[(i, j)] + 3.0;\n}\n"),
    );
    let vp = &h.state().viewport;
    assert!(vp.baked_stale.is_empty(), "{}", vp.baked_stale_why);
    assert!(vp.cache.is_partial(3));
    // An edit upstream of it makes the bake stale, with the reason.
    set_param(
        &mut h,
        "inc_a",
        "code",
        code("fn kernel(i: i32, j: i32) {\n    a[(i, j)] = a[(i, j)] + 2.0 * random();\n}\n"),
    );
    let vp = &h.state().viewport;
    assert_eq!(vp.baked_stale, vec![0, 1, 2, 3, 4, 5]);
    assert!(
        vp.baked_stale_why.contains("upstream"),
        "{}",
        vp.baked_stale_why
    );
    assert_eq!(vp.cache.where_is(3), None);
    drop(h);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Steps `n` passes (each 1/4 s on the harness's clock), with a pause
/// for the simulation thread, recording the frame shown after each.
fn frames_over(h: &mut Harness<'static, WeftApp>, n: usize) -> Vec<i32> {
    (0..n)
        .map(|_| {
            h.step();
            std::thread::sleep(std::time::Duration::from_millis(3));
            h.state().viewport.frame()
        })
        .collect()
}

/// The passes at which the frame shown changed.
fn changes(frames: &[i32]) -> Vec<usize> {
    (1..frames.len())
        .filter(|&i| frames[i] != frames[i - 1])
        .collect()
}

#[test]
fn the_flipbook_plays_cached_frames_at_its_rate_and_loops_or_stops() {
    let mut h = harness(GRAPH);
    wait_for_sim(&mut h);
    use_backend(&mut h, Backend::Vm);
    h.state_mut().timeline.start = 0;
    h.state_mut().timeline.end = 8;
    // Frames 0..=8 simulated once, so the flipbook plays them from the cache.
    play_to(&mut h, 8);
    seek(&mut h, 0);
    let simulated = h.state().viewport.frames_run;
    // The controls are on the timeline.
    h.get_by_label("Flipbook").click();
    h.run_steps(1);
    assert!(h.state().timeline.flipbook);
    assert!(h.state().timeline.loop_play, "Loop is on by default");
    h.state_mut().timeline.fps = 1.0;
    h.state_mut().viewport.playing = true;
    // 20 s of the harness's clock (a pass is 1/4 s): at 1 fps each frame
    // is held 4 passes (never fewer), and the range 0..=8 loops.
    let frames = frames_over(&mut h, 80);
    let at = changes(&frames);
    assert!(
        at.windows(2).all(|w| w[1] - w[0] >= 4),
        "a frame was shown for less than 1 s: changes at passes {:?} ({:?})",
        at,
        frames
    );
    assert!(
        at.len() >= 12 && at.len() <= 21,
        "{} frame changes in 20 s at 1 fps: {:?}",
        at.len(),
        frames
    );
    assert!(
        frames.windows(2).any(|w| w[0] == 8 && w[1] == 0),
        "the range loops from its end to its start: {:?}",
        frames
    );
    assert!(frames.iter().all(|f| (0..=8).contains(f)), "{:?}", frames);
    assert_eq!(
        h.state().viewport.frames_run,
        simulated,
        "the flipbook played cached frames without simulating"
    );
    // Loop off: playing stops at the end of the range.
    h.state_mut().viewport.playing = false;
    settle(&mut h);
    seek(&mut h, 5);
    h.get_by_label("Loop").click();
    h.run_steps(1);
    assert!(!h.state().timeline.loop_play);
    h.state_mut().viewport.playing = true;
    let frames = frames_over(&mut h, 40);
    assert_eq!(*frames.last().unwrap(), 8, "{:?}", frames);
    assert!(!h.state().viewport.playing, "playing stopped at the end");
    // Off, the flipbook's rate no longer holds frames back.
    h.get_by_label("Flipbook").click();
    h.get_by_label("Loop").click();
    h.run_steps(1);
    seek(&mut h, 0);
    h.state_mut().viewport.playing = true;
    let frames = frames_over(&mut h, 12);
    h.state_mut().viewport.playing = false;
    assert!(
        changes(&frames).len() > 6,
        "without the flipbook cached frames play faster than 1 fps: {:?}",
        frames
    );
}
