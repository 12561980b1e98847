//! `weft render`, checked with readers that are not Weft's: ffprobe counts
//! the movie's frames and reads its size and codec, ffmpeg decodes a frame
//! of it, the `png` crate decodes the PNG sequence, which is compared with
//! what `weft run` writes for the same frame. Under CI=true a missing
//! ffmpeg fails these tests instead of skipping them.

mod cli_support;

use cli_support::{root, text, tmp, weft};
use std::path::Path;
use std::process::Command;

/// Whether ffmpeg and ffprobe run here. Missing under CI: a failure (CI
/// installs them, `.ci/run`); elsewhere the movie checks are skipped.
fn have_ffmpeg() -> bool {
    let ok = |tool: &str| {
        Command::new(tool)
            .arg("-version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if ok("ffmpeg") && ok("ffprobe") {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("CI is set and ffmpeg/ffprobe are not on PATH: install ffmpeg (.ci/run does)");
    }
    eprintln!("skipped: ffmpeg/ffprobe are not on PATH");
    false
}

/// RGBA8 pixels and size of a PNG, decoded by the png crate.
fn read_png(path: &Path) -> (u32, u32, Vec<u8>) {
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {}", path.display(), e));
    let mut dec = png::Decoder::new(std::io::BufReader::new(f));
    dec.set_transformations(png::Transformations::EXPAND);
    let mut r = dec.read_info().unwrap();
    let mut buf = vec![0; r.output_buffer_size().unwrap()];
    let info = r.next_frame(&mut buf).unwrap();
    buf.truncate(info.buffer_size());
    let rgba = match info.color_type {
        png::ColorType::Rgba => buf,
        png::ColorType::Rgb => buf
            .chunks(3)
            .flat_map(|p| [p[0], p[1], p[2], 255])
            .collect(),
        c => panic!("{}: unexpected colour type {:?}", path.display(), c),
    };
    (info.width, info.height, rgba)
}

/// Mean absolute difference of the RGB channels, in levels of 255.
fn mean_abs_rgb(a: &[u8], b: &[u8]) -> f64 {
    assert_eq!(a.len(), b.len());
    let (mut sum, mut n) = (0u64, 0u64);
    for (p, q) in a.chunks(4).zip(b.chunks(4)) {
        for c in 0..3 {
            sum += (p[c] as i32 - q[c] as i32).unsigned_abs() as u64;
            n += 1;
        }
    }
    sum as f64 / n as f64
}

fn render(args: &[&str]) -> std::process::Output {
    let mut all = vec!["render"];
    all.extend_from_slice(args);
    weft(&all)
}

/// The one `error:` block a failed command prints, with its exit code.
fn one_error(o: &std::process::Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(!o.status.success(), "expected a failure: {}", text(o));
    assert_eq!(
        err.matches("error").count(),
        1,
        "one error message, not several: {}",
        err
    );
    err
}

/// Files in `dir` whose names start with a dot: the temporary files of
/// the atomic writer (`.NAME.tmpPID-N`).
fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with('.'))
        .collect()
}

#[test]
fn a_movie_has_its_frames_size_and_codec_and_matches_the_png_sequence() {
    if !have_ffmpeg() {
        return;
    }
    let dir = tmp("movie");
    let movie = dir.join("heat.mp4");
    let o = render(&[
        "graphs/heat.json",
        "--view",
        "view",
        "--frames",
        "2:11",
        "--size",
        "256x192",
        "--backend",
        "cpu",
        "--fps",
        "30",
        "--out",
        movie.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("render: frame 11 (10/10)"),
        "one progress line per frame when stderr is not a terminal: {}",
        text(&o)
    );
    let probe = Command::new("ffprobe")
        .args([
            "-v",
            "error",
            "-count_frames",
            "-select_streams",
            "v:0",
            "-show_entries",
            "stream=nb_read_frames,width,height,codec_name,pix_fmt,r_frame_rate",
            "-of",
            "json",
        ])
        .arg(&movie)
        .output()
        .unwrap();
    assert!(probe.status.success(), "{}", text(&probe));
    let v: serde_json::Value = serde_json::from_slice(&probe.stdout).unwrap();
    let s = &v["streams"][0];
    assert_eq!(s["codec_name"], "h264", "{}", v);
    assert_eq!(s["width"], 256, "{}", v);
    assert_eq!(s["height"], 192, "{}", v);
    assert_eq!(s["nb_read_frames"], "10", "{}", v);
    assert_eq!(s["pix_fmt"], "yuv420p", "{}", v);
    assert_eq!(s["r_frame_rate"], "30/1", "{}", v);
    assert!(temp_files(&dir).is_empty(), "{:?}", temp_files(&dir));

    // The same frames as PNGs; the movie's 5th frame (frame 6) decoded by
    // ffmpeg is that PNG up to H.264's loss.
    let seq = dir.join("seq/heat_####.png");
    let o = render(&[
        "graphs/heat.json",
        "--view",
        "view",
        "--frames",
        "2:11",
        "--size",
        "256x192",
        "--backend",
        "cpu",
        "--out",
        seq.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let decoded = dir.join("decoded.png");
    let d = Command::new("ffmpeg")
        .args(["-v", "error", "-y", "-i"])
        .arg(&movie)
        .args(["-vf", "select=eq(n\\,4)", "-vframes", "1"])
        .arg(&decoded)
        .output()
        .unwrap();
    assert!(d.status.success(), "{}", text(&d));
    let (w, h, movie_px) = read_png(&decoded);
    assert_eq!((w, h), (256, 192));
    let (_, _, png_px) = read_png(&dir.join("seq/heat_0006.png"));
    let diff = mean_abs_rgb(&movie_px, &png_px);
    assert!(diff < 6.0, "mean abs difference {} levels", diff);
    // And not some other frame: frame 2 differs from frame 6 by more.
    let (_, _, early) = read_png(&dir.join("seq/heat_0002.png"));
    assert!(
        mean_abs_rgb(&early, &png_px) > diff,
        "the decoded frame is frame 6, not any frame"
    );
}

#[test]
fn a_png_sequence_is_what_weft_run_draws_for_each_frame() {
    let dir = tmp("seq");
    let run_out = dir.join("run");
    let o = weft(&[
        "run",
        "graphs/heat.json",
        "--frames",
        "4",
        "--backend",
        "cpu",
        "--out",
        run_out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    // At the view's own size (128x128, one pixel per cell): the same pixels.
    let seq = dir.join("frames/heat_####.png");
    let o = render(&[
        "graphs/heat.json",
        "--view",
        "view",
        "--frames",
        "2:4",
        "--size",
        "128x128",
        "--backend",
        "cpu",
        "--out",
        seq.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let mut names: Vec<String> = std::fs::read_dir(dir.join("frames"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    assert_eq!(names, ["heat_0002.png", "heat_0003.png", "heat_0004.png"]);
    for f in 2..=4 {
        let ours = read_png(&dir.join(format!("frames/heat_{:04}.png", f)));
        let run = read_png(&run_out.join(format!("view_{:04}.png", f)));
        assert_eq!((ours.0, ours.1), (128, 128));
        assert!(ours == run, "frame {} differs from weft run's", f);
    }
    // At twice the size: an image view's cells become 2x2 blocks.
    let big = dir.join("big/heat_##.png");
    let o = render(&[
        "graphs/heat.json",
        "--view",
        "view",
        "--frames",
        "3:3",
        "--size",
        "256x256",
        "--backend",
        "cpu",
        "--out",
        big.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let (w, h, px) = read_png(&dir.join("big/heat_03.png"));
    assert_eq!((w, h), (256, 256));
    let (_, _, small) = read_png(&run_out.join("view_0003.png"));
    for y in 0..256usize {
        for x in 0..256usize {
            let a = &px[(y * 256 + x) * 4..][..4];
            let b = &small[((y / 2) * 128 + x / 2) * 4..][..4];
            assert_eq!(a, b, "pixel ({}, {})", x, y);
        }
    }
}

#[test]
fn a_sized_view_renders_as_weft_run_draws_it_with_that_size_set() {
    // A particles view has width/height of its own: the render redraws it
    // at --size, which is what `--set view.width= --set view.height=` gives.
    let dir = tmp("sized");
    let run_out = dir.join("run");
    let o = weft(&[
        "run",
        "graphs/particle_lists.json",
        "--frames",
        "2",
        "--backend",
        "cpu",
        "--threads",
        "1",
        "--set",
        "view.width=96",
        "--set",
        "view.height=64",
        "--out",
        run_out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let seq = dir.join("p_####.png");
    let o = render(&[
        "graphs/particle_lists.json",
        "--view",
        "view",
        "--frames",
        "2:2",
        "--size",
        "96x64",
        "--backend",
        "cpu",
        "--threads",
        "1",
        "--out",
        seq.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let ours = read_png(&dir.join("p_0002.png"));
    assert_eq!((ours.0, ours.1), (96, 64));
    assert!(ours == read_png(&run_out.join("view_0002.png")));
}

#[test]
fn a_link_at_the_destination_is_refused_and_its_target_untouched() {
    let dir = tmp("link");
    let target = dir.join("precious.png");
    std::fs::write(&target, b"the user's file").unwrap();
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&target, dir.join("out_0001.png")).unwrap();
        let o = render(&[
            "graphs/heat.json",
            "--view",
            "view",
            "--frames",
            "0:1",
            "--size",
            "64x64",
            "--backend",
            "cpu",
            "--out",
            dir.join("out_####.png").to_str().unwrap(),
        ]);
        let err = one_error(&o);
        assert!(err.contains("is a symbolic link"), "{}", err);
        assert_eq!(std::fs::read(&target).unwrap(), b"the user's file");
        // Refused before anything ran: not even frame 0 was written.
        assert!(!dir.join("out_0000.png").exists());
        assert!(std::fs::symlink_metadata(dir.join("out_0001.png"))
            .unwrap()
            .file_type()
            .is_symlink());
        let movie_link = dir.join("movie.mp4");
        std::os::unix::fs::symlink(&target, &movie_link).unwrap();
        let o = render(&[
            "graphs/heat.json",
            "--view",
            "view",
            "--frames",
            "0:1",
            "--size",
            "64x64",
            "--out",
            movie_link.to_str().unwrap(),
        ]);
        assert!(one_error(&o).contains("is a symbolic link"));
        assert_eq!(std::fs::read(&target).unwrap(), b"the user's file");
        assert!(temp_files(&dir).is_empty(), "{:?}", temp_files(&dir));
    }
}

#[test]
fn bad_flags_give_one_clear_error() {
    let dir = tmp("bad");
    let out_png = dir.join("f_####.png");
    let out_png = out_png.to_str().unwrap();
    let base = |view: &str, frames: &str, size: &str, out: &str| {
        render(&[
            "graphs/heat.json",
            "--view",
            view,
            "--frames",
            frames,
            "--size",
            size,
            "--backend",
            "cpu",
            "--out",
            out,
        ])
    };
    let o = base("nope", "0:2", "64x64", out_png);
    let err = one_error(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err.contains("--view nope: no view node 'nope'; views: view"),
        "{}",
        err
    );
    let o = base("view", "5:2", "64x64", out_png);
    assert!(one_error(&o).contains("frame range '5:2'"), "{}", text(&o));
    assert_eq!(o.status.code(), Some(2));
    let o = base("view", "0:2", "64", out_png);
    assert!(one_error(&o).contains("is not a size WIDTHxHEIGHT"));
    let o = base("view", "0:2", "0x64", out_png);
    assert!(one_error(&o).contains("must be 1 to 8192"));
    let movie = dir.join("m.mp4");
    let o = base("view", "0:2", "65x64", movie.to_str().unwrap());
    let err = one_error(&o);
    assert!(
        err.contains("needs an even width and height; use 66x64"),
        "{}",
        err
    );
    let o = base("view", "0:2", "64x64", dir.join("m.gif").to_str().unwrap());
    assert!(one_error(&o).contains("write NAME.mp4 for a movie"));
    // No ffmpeg: PATH emptied.
    let o = Command::new(env!("CARGO_BIN_EXE_weft"))
        .current_dir(root())
        .env("PATH", "")
        .args([
            "render",
            "graphs/heat.json",
            "--view",
            "view",
            "--frames",
            "0:2",
            "--size",
            "64x64",
            "--out",
        ])
        .arg(&movie)
        .output()
        .unwrap();
    let err = one_error(&o);
    assert!(
        err.contains("no `ffmpeg` on PATH") && err.contains("apt-get install ffmpeg"),
        "{}",
        err
    );
    assert_eq!(o.status.code(), Some(2));
    // Nothing was written by any of them.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}

/// A graph whose frame 3 indexes past its field: a fault naming kernel `k`.
fn faulting_graph(dir: &Path) -> std::path::PathBuf {
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
    g
}

#[test]
fn a_fault_names_the_node_and_leaves_no_half_written_movie() {
    let dir = tmp("fault");
    let g = faulting_graph(&dir);
    // A PNG sequence keeps the frames before the fault, each whole.
    let o = render(&[
        g.to_str().unwrap(),
        "--view",
        "view",
        "--frames",
        "0:5",
        "--size",
        "16x16",
        "--backend",
        "cpu",
        "--out",
        dir.join("f_####.png").to_str().unwrap(),
    ]);
    let err = one_error(&o);
    assert_eq!(o.status.code(), Some(1), "{}", err);
    assert!(
        err.contains("node 'k'") && err.contains("out of bounds"),
        "{}",
        err
    );
    for f in 0..=2 {
        assert_eq!(read_png(&dir.join(format!("f_{:04}.png", f))).0, 16);
    }
    assert!(!dir.join("f_0003.png").exists());
    if !have_ffmpeg() {
        return;
    }
    // A movie: the user's old file at the destination stays as it was, and
    // no temporary file is left beside it.
    let movie = dir.join("fault.mp4");
    std::fs::write(&movie, b"an older movie").unwrap();
    let o = render(&[
        g.to_str().unwrap(),
        "--view",
        "view",
        "--frames",
        "0:5",
        "--size",
        "16x16",
        "--backend",
        "cpu",
        "--out",
        movie.to_str().unwrap(),
    ]);
    let err = one_error(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(err.contains("node 'k'"), "{}", err);
    assert_eq!(std::fs::read(&movie).unwrap(), b"an older movie");
    assert!(temp_files(&dir).is_empty(), "{:?}", temp_files(&dir));
}

#[test]
fn a_render_resumes_from_a_checkpoint() {
    let dir = tmp("resume");
    let ck = dir.join("ck");
    let o = weft(&[
        "run",
        "graphs/heat.json",
        "--frames",
        "4",
        "--backend",
        "cpu",
        "--no-frames",
        "--checkpoint",
        ck.to_str().unwrap(),
        "--every",
        "4",
        "--out",
        dir.join("run").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let args = |out: &str, resume: bool| {
        let mut a = vec![
            "graphs/heat.json",
            "--view",
            "view",
            "--frames",
            "4:6",
            "--size",
            "128x128",
            "--backend",
            "cpu",
            "--out",
        ];
        a.push(out);
        if resume {
            a.extend(["--resume", ck.to_str().unwrap()]);
        }
        render(&a)
    };
    let fresh = dir.join("fresh_####.png");
    let resumed = dir.join("resumed_####.png");
    let o = args(fresh.to_str().unwrap(), false);
    assert!(o.status.success(), "{}", text(&o));
    let o = args(resumed.to_str().unwrap(), true);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("resumed from") && text(&o).contains("(frame 4)"),
        "{}",
        text(&o)
    );
    for f in 4..=6 {
        assert!(
            read_png(&dir.join(format!("fresh_{:04}.png", f)))
                == read_png(&dir.join(format!("resumed_{:04}.png", f))),
            "frame {}",
            f
        );
    }
    // A checkpoint past the first frame cannot draw it.
    let o = render(&[
        "graphs/heat.json",
        "--view",
        "view",
        "--frames",
        "2:6",
        "--size",
        "128x128",
        "--backend",
        "cpu",
        "--resume",
        ck.to_str().unwrap(),
        "--out",
        dir.join("early_####.png").to_str().unwrap(),
    ]);
    assert!(one_error(&o).contains("is at frame 4, after the first frame"));
}

#[test]
fn help_describes_every_flag() {
    let o = weft(&["render", "--help"]);
    assert!(o.status.success());
    let t = String::from_utf8_lossy(&o.stdout);
    for flag in [
        "--view",
        "--frames",
        "--size",
        "--out",
        "--backend",
        "--fps",
        "--resume",
        "--set",
    ] {
        assert!(t.contains(flag), "{} missing from --help:\n{}", flag, t);
    }
    assert!(t.contains("ffmpeg"), "{}", t);
}

#[test]
fn a_volume_over_another_view_renders_with_both_at_the_render_size() {
    // metaballs3d's surface view with a volume drawn over it (`under`):
    // the two must share a size, so a render of the volume resizes both,
    // as `weft run` draws it with both sizes set.
    let dir = tmp("under");
    let text_of = std::fs::read_to_string(root().join("graphs/metaballs3d.json")).unwrap();
    let mut g: serde_json::Value = serde_json::from_str(&text_of).unwrap();
    let view = g["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == "view")
        .unwrap()
        .clone();
    let field = g["wires"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["to"] == "view.field")
        .unwrap()["from"]
        .clone();
    let mut params = serde_json::json!({"under": "view", "mode": "mip"});
    for k in ["width", "height", "domain", "camera"] {
        params[k] = view["params"][k].clone();
    }
    g["nodes"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"id": "vol", "kind": "volume", "params": params}));
    g["wires"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"from": field, "to": "vol.field"}));
    let graph = dir.join("under.json");
    std::fs::write(&graph, g.to_string()).unwrap();
    let graph = graph.to_str().unwrap();
    let run_out = dir.join("run");
    let o = weft(&[
        "run",
        graph,
        "--frames",
        "1",
        "--backend",
        "cpu",
        "--out",
        run_out.to_str().unwrap(),
        "--set",
        "vol.width=200",
        "--set",
        "vol.height=120",
        "--set",
        "view.width=200",
        "--set",
        "view.height=120",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let out = dir.join("vol_####.png");
    let o = render(&[
        graph,
        "--view",
        "vol",
        "--frames",
        "1:1",
        "--size",
        "200x120",
        "--backend",
        "cpu",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let ours = read_png(&dir.join("vol_0001.png"));
    assert_eq!((ours.0, ours.1), (200, 120));
    assert!(ours == read_png(&run_out.join("vol_0001.png")));
}
