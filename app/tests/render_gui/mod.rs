//! File > Render… (kittest, in the gui_optimize crate: one fewer compile of
//! the GUI): the dialog renders a PNG sequence that is the one `weft
//! render` writes for the same frames on the same backend, and Cancel
//! stops a movie without leaving it, or its temporary file, behind.

use super::*;

fn open_render_dialog(h: &mut Harness<'static, WeftApp>) {
    h.get_by_label("File").click();
    h.run_steps(2);
    h.get_by_label("Render…").click();
    h.run_steps(2);
    assert!(h.state().render.open, "File > Render… opens the window");
}

/// Steps until the render under way ended.
fn wait_for_render(h: &mut Harness<'static, WeftApp>) {
    for _ in 0..6000 {
        h.step();
        if h.state().render.job.is_none() {
            h.step();
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("the render never ended");
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("weft-gui-render-{}-{}", tag, std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Names in `dir`, sorted.
fn names(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn the_render_dialog_writes_the_png_sequence_weft_render_writes() {
    if !gpu_ok() {
        return;
    }
    let dir = scratch("seq");
    let mut h = harness("heat.json");
    wait_for_sim(&mut h);
    open_render_dialog(&mut h);
    {
        let r = &h.state().render;
        // Filled from the graph: its one view at its own size, and the
        // timeline's play range.
        assert_eq!(r.view, "view");
        assert_eq!((r.width, r.height), (128, 128));
    }
    {
        let r = &mut h.state_mut().render;
        r.first = 1;
        r.last = 3;
        r.width = 64;
        r.height = 48;
        r.out = dir.join("app_####.png").display().to_string();
    }
    h.run_steps(1);
    h.get_by_label("Start render").click();
    h.run_steps(1);
    assert!(
        h.state().render.job.is_some(),
        "the render runs in the background"
    );
    wait_for_render(&mut h);
    let backend = match &h.state().render.message {
        Some(Ok(m)) => {
            assert!(m.contains("rendered 3 frames of 'view'"), "{}", m);
            m.split(" on ")
                .nth(1)
                .unwrap()
                .split(':')
                .next()
                .unwrap()
                .to_string()
        }
        other => panic!("the render failed: {:?}", other),
    };
    assert_eq!(
        names(&dir),
        ["app_0001.png", "app_0002.png", "app_0003.png"]
    );
    // The CLI's render of the same frames on the same backend: the same files.
    let cli = std::process::Command::new(env!("CARGO_BIN_EXE_weft"))
        .current_dir(root())
        .args([
            "render",
            "graphs/heat.json",
            "--view",
            "view",
            "--frames",
            "1:3",
        ])
        .args(["--size", "64x48", "--backend", &backend, "--out"])
        .arg(dir.join("cli_####.png"))
        .output()
        .unwrap();
    assert!(
        cli.status.success(),
        "{}",
        String::from_utf8_lossy(&cli.stderr)
    );
    for f in 1..=3 {
        let app = std::fs::read(dir.join(format!("app_{:04}.png", f))).unwrap();
        let cli = std::fs::read(dir.join(format!("cli_{:04}.png", f))).unwrap();
        // PNG header: width and height at bytes 16..24, big-endian.
        assert_eq!(&app[16..24], &[0, 0, 0, 64, 0, 0, 0, 48]);
        assert!(
            app == cli,
            "frame {}: the app's PNG differs from weft render's",
            f
        );
    }
    assert!(h.state().render.problem.is_none());
}

#[test]
fn cancel_stops_a_render_and_keeps_nothing_half_written() {
    if !gpu_ok() {
        return;
    }
    let movie_ok = std::process::Command::new("ffmpeg")
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !movie_ok && std::env::var_os("CI").is_some() {
        panic!("CI is set and ffmpeg is not on PATH: install ffmpeg (.ci/run does)");
    }
    let dir = scratch("cancel");
    let mut h = harness("heat.json");
    wait_for_sim(&mut h);
    open_render_dialog(&mut h);
    let out = if movie_ok {
        dir.join("long.mp4")
    } else {
        dir.join("long_######.png")
    };
    {
        let r = &mut h.state_mut().render;
        r.first = 0;
        r.last = 100_000;
        r.out = out.display().to_string();
    }
    h.run_steps(1);
    h.get_by_label("Start render").click();
    // Some frames in, then Cancel.
    for _ in 0..3000 {
        h.step();
        if h.state()
            .render
            .job
            .as_ref()
            .is_some_and(|j| j.rendered() >= 3)
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(h
        .state()
        .render
        .job
        .as_ref()
        .is_some_and(|j| j.rendered() >= 3));
    h.get_by_label("Cancel render").click();
    wait_for_render(&mut h);
    match &h.state().render.message {
        Some(Err(m)) => assert!(m.contains("render cancelled after"), "{}", m),
        other => panic!("expected a cancel: {:?}", other),
    }
    // A cancel is not a problem of the graph.
    assert!(h.state().render.problem.is_none());
    let left = names(&dir);
    assert!(
        left.iter().all(|n| !n.starts_with('.')),
        "a temporary file was left: {:?}",
        left
    );
    if movie_ok {
        assert!(left.is_empty(), "no movie is kept: {:?}", left);
    } else {
        // The PNGs completed stay, each whole.
        assert!(left.len() >= 3 && left.len() < 100_000, "{:?}", left);
    }
}

#[test]
fn a_fault_while_rendering_is_a_problem_naming_its_node() {
    if !gpu_ok() {
        return;
    }
    let dir = scratch("problem");
    // Frame 3 indexes past the field: a fault of kernel `k`.
    let g = dir.join("fault.json");
    std::fs::write(
        &g,
        r#"{"format": "weft-graph", "version": 1, "nodes": [
        {"id": "L", "kind": "dense", "params": {"shape": [8, 8]}},
        {"id": "u", "kind": "field"},
        {"id": "k", "kind": "kernel", "params": {"over": "u",
            "code": "fn kernel(i: i32, j: i32) { u[(i + (frame() / 3) * 8, j)] = 1.0; }"}},
        {"id": "f", "kind": "on_frame"},
        {"id": "view", "kind": "image", "params": {"min": 0, "max": 1}}],
      "wires": [{"from": "L.cells", "to": "u.layout"}, {"from": "u.field", "to": "k.u"},
                {"from": "u.field", "to": "view.field"}],
      "exec": [{"from": "f.then", "to": "k"}]}"#,
    )
    .unwrap();
    let out = dir.join("frames");
    std::fs::create_dir_all(&out).unwrap();
    let mut h = harness_with(Some(g), dir.join("cfg"));
    wait_for_sim(&mut h);
    open_render_dialog(&mut h);
    {
        let r = &mut h.state_mut().render;
        r.first = 0;
        r.last = 5;
        r.out = out.join("f_####.png").display().to_string();
    }
    h.run_steps(1);
    h.get_by_label("Start render").click();
    wait_for_render(&mut h);
    let (node, text) = h.state().render.problem.clone().expect("a problem");
    assert_eq!(node.as_deref(), Some("k"), "{}", text);
    assert!(
        text.contains("node 'k'") && text.contains("out of bounds"),
        "{}",
        text
    );
    // The frames before the fault, each whole; none after.
    assert_eq!(names(&out), ["f_0000.png", "f_0001.png", "f_0002.png"]);
    // In the Problems panel (the window, which says it too, closed); a
    // click there selects the node.
    h.state_mut().render.open = false;
    h.run_steps(2);
    h.get_by_label(text.as_str()).click();
    h.run_steps(2);
    assert_eq!(h.state().selected.as_deref(), Some("k"));
}
