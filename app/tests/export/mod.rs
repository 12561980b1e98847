//! File > Export… (kittest, in the gui_optimize crate: one fewer compile of
//! the GUI): a frame exported from the app is the file `weft run --export`
//! writes for that frame, and recording while playing writes every frame
//! the simulation runs until Stop.

use super::*;

/// A PLY file without its `comment` header lines (they name the graph as
/// each side was given it).
fn ply_without_comments(path: &std::path::Path) -> Vec<u8> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {}", path.display(), e));
    let end = bytes
        .windows(11)
        .position(|w| w == b"end_header\n")
        .expect("a PLY header")
        + 11;
    let header: String = String::from_utf8_lossy(&bytes[..end])
        .lines()
        .filter(|l| !l.starts_with("comment"))
        .map(|l| format!("{}\n", l))
        .collect();
    let mut out = header.into_bytes();
    out.extend_from_slice(&bytes[end..]);
    out
}

fn open_export_window(h: &mut Harness<'static, WeftApp>, specs: String) {
    h.get_by_label("File").click();
    h.run_steps(2);
    h.get_by_label("Export…").click();
    h.run_steps(2);
    assert!(h.state().export.open, "File > Export… opens the window");
    h.state_mut().export.specs = specs;
    h.run_steps(1);
}

#[test]
fn export_this_frame_equals_the_headless_export() {
    let dir = std::env::temp_dir().join(format!("weft-gui-export-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut h = harness("particle_lists.json");
    wait_for_sim(&mut h);
    h.state_mut().viewport.playing = true;
    play_until(&mut h, 3);
    h.state_mut().viewport.playing = false;
    settle(&mut h);
    let frame = h.state().viewport.frame();
    let backend = h.state().viewport.sim.as_ref().unwrap().backend_name();
    // Positions (vec2: z = 0) and an integer attribute, which no float
    // summation order can change.
    let app_path = dir.join("app_####.ply");
    open_export_window(&mut h, format!("pos,neighbours=ply:{}", app_path.display()));
    h.get_by_label("Export this frame").click();
    h.run_steps(2);
    settle(&mut h);
    match &h.state().export.message {
        Some(Ok(m)) => assert!(m.contains(&format!("frame {}", frame)), "{}", m),
        other => panic!("the export failed: {:?}", other),
    }
    let cli = std::process::Command::new(env!("CARGO_BIN_EXE_weft"))
        .current_dir(root())
        .args([
            "run",
            "graphs/particle_lists.json",
            "--no-frames",
            "--backend",
        ])
        .arg(backend)
        .args(["--frames", &frame.to_string(), "--out"])
        .arg(&dir)
        .arg("--export")
        .arg(format!("pos,neighbours=ply:{}/cli_####.ply", dir.display()))
        .output()
        .unwrap();
    assert!(
        cli.status.success(),
        "{}",
        String::from_utf8_lossy(&cli.stderr)
    );
    let name = |p: &str| dir.join(format!("{}_{:04}.ply", p, frame));
    assert!(
        ply_without_comments(&name("app")) == ply_without_comments(&name("cli")),
        "the app's and the CLI's frame {} differ",
        frame
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn recording_while_playing_writes_every_frame_until_stop() {
    let dir = std::env::temp_dir().join(format!("weft-gui-record-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut h = harness("particle_lists.json");
    wait_for_sim(&mut h);
    settle(&mut h);
    let start = h.state().viewport.frame();
    open_export_window(&mut h, format!("pos=ply:{}/rec_####.ply", dir.display()));
    h.get_by_label("Record while playing").click();
    h.run_steps(2);
    h.state_mut().viewport.playing = true;
    play_until(&mut h, start + 4);
    h.state_mut().viewport.playing = false;
    settle(&mut h);
    let end = h.state().viewport.frame();
    h.get_by_label("Stop").click();
    h.run_steps(2);
    settle(&mut h);
    match &h.state().export.message {
        Some(Ok(m)) => assert!(m.contains("recorded"), "{}", m),
        other => panic!("the recording failed: {:?}", other),
    }
    for f in start + 1..=end {
        assert!(
            dir.join(format!("rec_{:04}.ply", f)).exists(),
            "frame {} of {}..={} was not written",
            f,
            start + 1,
            end
        );
    }
    // Stopped: further frames are not written.
    h.state_mut().viewport.playing = true;
    play_until(&mut h, end + 2);
    h.state_mut().viewport.playing = false;
    settle(&mut h);
    assert!(!dir.join(format!("rec_{:04}.ply", end + 2)).exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `surface` view's id exports the mesh it draws: the app's file for the
/// frame it shows is the CLI's for that frame (the mesh is sorted and
/// welded, so the order the kernels appended the triangles in is gone).
#[test]
fn a_surface_view_exports_the_mesh_the_cli_writes() {
    let dir = std::env::temp_dir().join(format!("weft-gui-export-mesh-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut h = harness("metaballs3d.json");
    wait_for_sim(&mut h);
    h.state_mut().viewport.playing = true;
    play_until(&mut h, 2);
    h.state_mut().viewport.playing = false;
    settle(&mut h);
    let frame = h.state().viewport.frame();
    let backend = h.state().viewport.sim.as_ref().unwrap().backend_name();
    open_export_window(&mut h, format!("view=ply:{}/app_####.ply", dir.display()));
    h.get_by_label("Export this frame").click();
    h.run_steps(2);
    settle(&mut h);
    match &h.state().export.message {
        Some(Ok(m)) => assert!(m.contains(&format!("frame {}", frame)), "{}", m),
        other => panic!("the export failed: {:?}", other),
    }
    let cli = std::process::Command::new(env!("CARGO_BIN_EXE_weft"))
        .current_dir(root())
        .args(["run", "graphs/metaballs3d.json", "--no-frames", "--backend"])
        .arg(backend)
        .args(["--frames", &frame.to_string(), "--out"])
        .arg(&dir)
        .arg("--export")
        .arg(format!("view=ply:{}/cli_####.ply", dir.display()))
        .output()
        .unwrap();
    assert!(
        cli.status.success(),
        "{}",
        String::from_utf8_lossy(&cli.stderr)
    );
    let name = |p: &str| dir.join(format!("{}_{:04}.ply", p, frame));
    let app = ply_without_comments(&name("app"));
    assert!(
        String::from_utf8_lossy(&app[..200]).contains("element face"),
        "a mesh"
    );
    assert!(
        app == ply_without_comments(&name("cli")),
        "the app's and the CLI's mesh of frame {} differ",
        frame
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Recording USD while playing a range twice (a looping playback; here a
/// Reset and the same frames again) keeps one time sample per frame: the
/// second pass replaces the first's samples (issue 52 item 7: a `.usda`
/// grew to 2.1 GB with `endTimeCode` short of its samples). Read back
/// with usd-core.
#[test]
fn recording_a_looping_range_keeps_one_sample_per_frame() {
    let dir = std::env::temp_dir().join(format!("weft-gui-record-loop-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut h = harness("particle_lists.json");
    wait_for_sim(&mut h);
    settle(&mut h);
    let usda = dir.join("rec.usda");
    open_export_window(&mut h, format!("pos=usd:{}", usda.display()));
    h.get_by_label("Record while playing").click();
    h.run_steps(2);
    let mut last = 0;
    for _ in 0..2 {
        let start = h.state().viewport.frame();
        h.state_mut().viewport.playing = true;
        play_until(&mut h, start + 3);
        h.state_mut().viewport.playing = false;
        settle(&mut h);
        last = last.max(h.state().viewport.frame());
        h.get_by_label("Reset").click();
        h.run_steps(2);
        settle(&mut h);
    }
    h.get_by_label("Stop").click();
    h.run_steps(2);
    settle(&mut h);
    assert!(usda.exists(), "{:?}", h.state().export.message);
    let text = std::fs::read_to_string(&usda).unwrap();
    assert!(
        text.contains(&format!("endTimeCode = {}", last)),
        "{}",
        &text[..400.min(text.len())]
    );
    // One sample line per frame in every time-sampled attribute (a reader
    // may keep one of two samples at a time; the file must not hold two).
    let blocks = text.matches("timeSamples = {").count();
    let samples = text
        .lines()
        .filter(|l| {
            let t = l.trim_start();
            l.starts_with("        ")
                && t.split(':')
                    .next()
                    .is_some_and(|n| n.parse::<i32>().is_ok())
        })
        .count();
    let first = text
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("startTimeCode = ")?
                .parse::<i32>()
                .ok()
        })
        .expect("startTimeCode");
    assert!(blocks > 0);
    assert_eq!(
        samples,
        blocks * (last - first + 1) as usize,
        "{} attributes over frames {}..={}",
        blocks,
        first,
        last
    );
    let py = ["python3", "/usr/bin/python3"].into_iter().find(|py| {
        std::process::Command::new(py)
            .args(["-c", "import pxr"])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let Some(py) = py else {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "CI=true but no usd-core"
        );
        return;
    };
    let script = "import sys\nfrom pxr import Usd, UsdGeom\ns = Usd.Stage.Open(sys.argv[1])\nfor p in s.Traverse():\n    if p.IsA(UsdGeom.Points):\n        t = UsdGeom.Points(p).GetPointsAttr().GetTimeSamples()\n        print(len(t), len(set(t)), int(min(t)), int(max(t)), int(s.GetEndTimeCode()))\n";
    let o = std::process::Command::new(py)
        .arg("-c")
        .arg(script)
        .arg(&usda)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "{}{}",
        out,
        String::from_utf8_lossy(&o.stderr)
    );
    let n: Vec<i64> = out.split_whitespace().map(|x| x.parse().unwrap()).collect();
    assert_eq!(n.len(), 5, "{}", out);
    assert_eq!(n[0], n[1], "no frame has two samples: {}", out);
    assert_eq!(n[0], n[3] - n[2] + 1, "one sample per frame: {}", out);
    assert_eq!(n[3], n[4], "endTimeCode is the last sample: {}", out);
    assert_eq!(n[3], last as i64);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A spec without a path writes into the graph's own folder,
/// `GRAPH.export/` beside the graph file (issue 52 item 7: every graph
/// wrote into one shared `export/`, and smoke3d's `field1.usda` replaced
/// another graph's): two graphs in one folder keep their own files.
#[test]
fn each_graph_exports_into_a_folder_of_its_own() {
    let dir = std::env::temp_dir().join(format!("weft-gui-export-own-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let graph = dir.join("lists_a.json");
    std::fs::copy(root().join("graphs/particle_lists.json"), &graph).unwrap();
    let mut h = support::harness_with(Some(graph), dir.join("cfg"));
    wait_for_sim(&mut h);
    settle(&mut h);
    open_export_window(&mut h, "pos=ply".into());
    h.get_by_label("Export this frame").click();
    h.run_steps(2);
    settle(&mut h);
    let frame = h.state().viewport.frame();
    let own = dir
        .join("lists_a.export")
        .join(format!("pos_{:04}.ply", frame));
    assert!(
        own.exists(),
        "{} ({:?})",
        own.display(),
        h.state().export.message
    );
    assert!(!dir.join("export").exists(), "no shared export folder");
    let _ = std::fs::remove_dir_all(&dir);
}
