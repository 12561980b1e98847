//! The `weft` binary as a user runs it: outputs, exit codes, messages.

use std::path::{Path, PathBuf};
use std::process::Command;

mod cli_export_more;

mod cli_support;
use cli_support::{root, text, tmp, weft};

#[test]
fn every_command_has_help() {
    for cmd in [
        vec!["--help"],
        vec!["run", "--help"],
        vec!["render", "--help"],
        vec!["bake", "--help"],
        vec!["check", "--help"],
        vec!["ir", "--help"],
        vec!["bench", "--help"],
        vec!["replay", "--help"],
        vec!["nodes", "--help"],
        vec!["schema", "--help"],
    ] {
        let o = weft(&cmd);
        assert!(o.status.success(), "{:?}", cmd);
        assert!(text(&o).contains("Usage"), "{:?}", cmd);
    }
}

#[test]
fn run_writes_frames_and_dumps() {
    let out = tmp("run");
    let o = weft(&[
        "run",
        "graphs/julia.json",
        "--frames",
        "2",
        "--out",
        out.to_str().unwrap(),
        "--dump",
        "pixels",
        "--set",
        "paint.speed=0.15",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(out.join("view_0001.png").exists() && out.join("view_0002.png").exists());
    let a = weft_ir::io::npy::read_npy(&out.join("pixels.npy")).unwrap();
    assert_eq!(a.shape, vec![640, 320]);
    // --init replaces a field's initial data; --dump-all writes every field.
    let init = out.join("x.npy");
    std::fs::copy(root().join("graphs/mpm88_x0.npy"), &init).unwrap();
    let o = weft(&[
        "run",
        "graphs/mpm88.json",
        "--frames",
        "1",
        "--no-frames",
        "--set",
        "substeps.count=1",
        "--init",
        &format!("x={}", init.display()),
        "--out",
        out.to_str().unwrap(),
        "--dump-all",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    for f in ["x", "v", "C", "J", "grid_v", "grid_m"] {
        assert!(out.join(format!("{}.npy", f)).exists(), "{} dumped", f);
    }
    let c = weft_ir::io::npy::read_npy(&out.join("C.npy")).unwrap();
    assert_eq!(c.shape, vec![8192, 2, 2]);
}

/// A dumped f64 / i64 / u64 field is a float64 / int64 / uint64 `.npy`
/// that NumPy reads; NumPy recomputes the f64 formula itself.
#[test]
fn wide_dumps_are_float64_npy_that_numpy_reads() {
    let dir = tmp("wide");
    let code = "fn kernel(i: i32) {\n    let x = i as f64 / 7.0;\n    d[i] = x * x * x - sqrt(x + 2.0) / 3.0;\n    q[i] = (i as i64 - 25) * 100000000000;\n    v[i] = v[i] * x + dvec3(0.5, 0.25, 0.125);\n}";
    let g = serde_json::json!({
        "format": "weft-graph", "version": 1,
        "nodes": [
            {"id": "g", "kind": "dense", "params": {"shape": [50]}},
            {"id": "d", "kind": "field", "params": {"type": "f64"}},
            {"id": "q", "kind": "field", "params": {"type": "i64"}},
            {"id": "v", "kind": "field", "params": {"type": "vec3<f64>", "init": [1, 2, 3]}},
            {"id": "k", "kind": "kernel", "params": {"over": "d", "code": code}},
            {"id": "s", "kind": "on_start"}
        ],
        "wires": [
            {"from": "g.cells", "to": "d.layout"}, {"from": "g.cells", "to": "q.layout"},
            {"from": "g.cells", "to": "v.layout"}, {"from": "d.field", "to": "k.d"},
            {"from": "q.field", "to": "k.q"}, {"from": "v.field", "to": "k.v"}
        ],
        "exec": [{"from": "s.then", "to": "k"}]
    });
    let path = dir.join("g.json");
    std::fs::write(&path, serde_json::to_string(&g).unwrap()).unwrap();
    let o = weft(&[
        "run",
        path.to_str().unwrap(),
        "--backend",
        "cpu",
        "--frames",
        "0",
        "--no-frames",
        "--dump-all",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let script = "import numpy as np, sys
d = np.load(sys.argv[1] + '/d.npy'); q = np.load(sys.argv[1] + '/q.npy'); v = np.load(sys.argv[1] + '/v.npy')
assert d.dtype == np.float64 and q.dtype == np.int64 and v.dtype == np.float64, (d.dtype, q.dtype, v.dtype)
assert d.shape == (50,) and v.shape == (50, 3), (d.shape, v.shape)
x = np.arange(50, dtype=np.float64) / 7.0
assert np.array_equal(d, x * x * x - np.sqrt(x + 2.0) / 3.0), np.abs(d - (x * x * x - np.sqrt(x + 2.0) / 3.0)).max()
assert np.array_equal(q, (np.arange(50, dtype=np.int64) - 25) * 100000000000)
want = np.array([1.0, 2.0, 3.0])[None, :] * x[:, None] + np.array([0.5, 0.25, 0.125])
assert np.array_equal(v, want)
print('ok')";
    let py = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(&dir)
        .output()
        .expect("python3 runs");
    assert!(
        py.status.success() && String::from_utf8_lossy(&py.stdout).contains("ok"),
        "numpy: {}{}",
        String::from_utf8_lossy(&py.stdout),
        String::from_utf8_lossy(&py.stderr)
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn invalid_graphs_exit_2_naming_the_node() {
    let dir = tmp("bad");
    let bad = dir.join("bad.json");
    std::fs::write(&bad, r#"{"format": "weft-graph", "version": 1, "nodes": [
        {"id": "L", "kind": "dense", "params": {"shape": [4]}},
        {"id": "x", "kind": "field", "params": {"type": "vec2"}},
        {"id": "k", "kind": "kernel", "params": {"range": [4], "code": "fn kernel(i: i32) {\n    x[i] = 1.0;\n}"}}],
      "wires": [{"from": "L.cells", "to": "x.layout"}, {"from": "x", "to": "k.x"}]}"#).unwrap();
    let o = weft(&["run", bad.to_str().unwrap(), "--out", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let t = text(&o);
    assert!(
        t.contains("node 'k', code 2:12")
            && t.contains("`1.0` is f32 but `x[i]` expects vec2<f32>"),
        "{}",
        t
    );
    std::fs::write(
        &bad,
        "{\"format\": \"weft-graph\",\n \"version\": 1,\n \"nodes\": [}",
    )
    .unwrap();
    let o = weft(&["check", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("line 3:"), "{}", text(&o));
    let o = weft(&["run", "graphs/julia.json", "--set", "nosuch.speed=1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("no node 'nosuch'"));
    // A scalar's declared range holds for --set too.
    let o = weft(&["run", "graphs/heat.json", "--set", "diffuse.alpha=0.5"]);
    assert_eq!(o.status.code(), Some(2));
    let t = text(&o);
    assert!(
        t.contains("diffuse") && t.contains("'alpha' default 0.5 is outside its range 0 to 0.25"),
        "{}",
        t
    );
    // A value its type cannot hold is refused by the one rule, naming the
    // node and the scalar (`"n": 128` declares an i32).
    let o = weft(&["run", "graphs/heat.json", "--set", "diffuse.n=2.5"]);
    assert_eq!(o.status.code(), Some(2));
    let t = text(&o);
    assert!(
        t.contains("node 'diffuse', param 'scalars': scalar 'n': 2.5 is not a valid i32"),
        "{}",
        t
    );
}

#[test]
fn check_prints_every_error() {
    let dir = tmp("check");
    let bad = dir.join("two.json");
    std::fs::write(
        &bad,
        r#"{"format": "weft-graph", "version": 1, "nodes": [
        {"id": "a", "kind": "dense", "params": {"shape": [0]}},
        {"id": "b", "kind": "wibble"}]}"#,
    )
    .unwrap();
    let o = weft(&["check", bad.to_str().unwrap(), "graphs/heat.json"]);
    assert_eq!(o.status.code(), Some(2));
    let t = text(&o);
    assert!(
        t.contains("node 'a', param 'shape'") && t.contains("node 'b': unknown node kind 'wibble'"),
        "{}",
        t
    );
    assert!(t.contains("graphs/heat.json: ok"), "{}", t);
}

/// wgpu refuses an OpenGL-only adapter (forced here with `WGPU_BACKEND=gl`)
/// with one readable message and exit 1, instead of computing integers
/// by OpenGL's rules (`-68 % 3` came out as 2 on llvmpipe's GL).
#[test]
fn wgpu_refuses_an_opengl_only_adapter() {
    let g = root().join("graphs/heat.json");
    let dir = tmp("gl");
    let o = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args([
            "run",
            g.to_str().unwrap(),
            "--backend",
            "wgpu",
            "--frames",
            "1",
            "--out",
        ])
        .arg(&dir)
        .env("WGPU_BACKEND", "gl")
        .output()
        .expect("weft runs");
    let t = text(&o);
    if t.contains("no GPU adapter found") {
        // No GL driver either: nothing to refuse here. CI installs Mesa's
        // GL driver (.ci/run), so there this is a failure.
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but no OpenGL adapter (apt-get install libgl1-mesa-dri libegl-mesa0): {}",
            t
        );
        eprintln!("skipping: no OpenGL adapter here: {}", t);
        return;
    }
    assert_eq!(o.status.code(), Some(1), "{}", t);
    assert!(
        t.contains("through Gl")
            && t.contains("integer rules differ")
            && t.contains("--backend cpu"),
        "{}",
        t
    );
}

#[test]
fn runtime_faults_exit_1_naming_the_kernel() {
    let dir = tmp("oob");
    let g = dir.join("oob.json");
    std::fs::write(&g, r#"{"format": "weft-graph", "version": 1, "nodes": [
        {"id": "L", "kind": "dense", "params": {"shape": [4]}},
        {"id": "x", "kind": "field"},
        {"id": "k", "kind": "kernel", "params": {"range": [5], "code": "fn kernel(i: i32) { x[i] = 1.0; }"}},
        {"id": "s", "kind": "on_start"}],
      "wires": [{"from": "L.cells", "to": "x.layout"}, {"from": "x", "to": "k.x"}],
      "exec": [{"from": "s", "to": "k"}]}"#).unwrap();
    // One outcome on every backend: the check is expanded once (legalize)
    // and the message worded once (`FaultSite::message`).
    let mut backends = vec!["vm", "cpu"];
    if gpu_available() {
        backends.push("wgpu");
    }
    for b in backends {
        let o = weft(&[
            "run",
            g.to_str().unwrap(),
            "--backend",
            b,
            "--out",
            dir.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(1), "{}: {}", b, text(&o));
        let t = text(&o);
        assert!(
            t.contains(
                "node 'k', code 1:21: index 4 is out of bounds for axis 0 of field 'x' (extent 4)"
            ),
            "{}: {}",
            b,
            t
        );
    }
}

#[test]
fn ir_prints_each_stage() {
    for stage in [
        "front",
        "inline",
        "const_fold",
        "simplify",
        "lower_access",
        "final",
    ] {
        let o = weft(&[
            "ir",
            "graphs/heat.json",
            "--kernel",
            "diffuse",
            "--stage",
            stage,
        ]);
        assert!(o.status.success(), "{}", text(&o));
        let t = text(&o);
        assert!(t.contains("kernel 'diffuse'"));
        assert_eq!(
            t.contains("buf_load"),
            matches!(stage, "lower_access" | "final"),
            "stage {}",
            stage
        );
    }
    assert_eq!(
        weft(&["ir", "graphs/heat.json", "--stage", "bogus"])
            .status
            .code(),
        Some(2)
    );
}

/// The cpu backend unrolls whole 3×3 stencils; the GPU backends keep the
/// outer loop (their drivers compile the rest), and `ir --backend` shows
/// what each gets.
#[test]
fn ir_shows_each_backends_unrolling() {
    let loops = |backend: Option<&str>| {
        let mut args = vec!["ir", "graphs/mpm88.json", "--kernel", "p2g/k"];
        if let Some(b) = backend {
            args.extend(["--backend", b]);
        }
        let o = weft(&args);
        assert!(o.status.success(), "{}", text(&o));
        text(&o).matches(" = for ").count()
    };
    assert_eq!(loops(Some("cpu")), 0);
    assert_eq!(loops(Some("wgpu")), 0);
    assert_eq!(loops(Some("vm")), 1);
    assert_eq!(loops(None), 1);
}

#[test]
fn bench_json_has_the_documented_keys() {
    let o = weft(&["bench", "graphs/heat.json", "--frames", "2", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    for k in ["compile_ms", "frame_ms", "kernels", "backend"] {
        assert!(v.get(k).is_some(), "missing {}", k);
    }
    for k in ["median", "min", "max"] {
        assert!(v["frame_ms"][k].as_f64().is_some());
    }
    // Every timed frame, and the summary is taken over them.
    let samples: Vec<f64> = v["frame_ms"]["samples"]
        .as_array()
        .expect("frame samples")
        .iter()
        .map(|x| x.as_f64().expect("milliseconds"))
        .collect();
    assert_eq!(samples.len(), 2);
    // One draw time per view, at the view's size.
    let view = &v["views"]["view"];
    assert!(view["median_ms"].as_f64().is_some(), "{}", v);
    assert_eq!(view["width"].as_u64(), Some(128), "{}", v);
    let lo = samples.iter().cloned().fold(f64::INFINITY, f64::min);
    assert_eq!(v["frame_ms"]["min"].as_f64(), Some(lo));
    assert!(v["kernels"]["diffuse"]["median_ms"].as_f64().is_some());
}

#[test]
fn replay_passes_then_reports_a_mismatch() {
    let dir = tmp("replay");
    for f in ["heat.json", "heat.expect.json"] {
        std::fs::copy(root().join("graphs").join(f), dir.join(f)).unwrap();
    }
    let o = weft(&["replay", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let p = dir.join("heat.expect.json");
    let mut e: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    let s = e["backends"]["cpu"]["fields"]["T"]["sum"].as_f64().unwrap();
    e["backends"]["cpu"]["fields"]["T"]["sum"] = serde_json::json!(s * 1.5 + 1.0);
    std::fs::write(&p, serde_json::to_string(&e).unwrap()).unwrap();
    let o = weft(&["replay", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("field 'T': sum expected"), "{}", text(&o));
    // --update re-records and the replay passes again.
    assert!(weft(&["replay", "--update", dir.to_str().unwrap()])
        .status
        .success());
    assert!(weft(&["replay", dir.to_str().unwrap()]).status.success());
}

#[test]
fn schema_command_matches_the_committed_schema() {
    let o = weft(&["schema"]);
    let committed = std::fs::read_to_string(root().join("docs/graph.schema.json")).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        committed,
        "docs/graph.schema.json is stale: run `weft schema > docs/graph.schema.json`"
    );
}

fn gpu_available() -> bool {
    let o = weft(&[
        "run",
        "graphs/heat.json",
        "--backend",
        "wgpu",
        "--frames",
        "0",
        "--no-frames",
        "--out",
        std::env::temp_dir().to_str().unwrap(),
    ]);
    if o.status.success() {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI=true but wgpu cannot run: {}",
        text(&o)
    );
    eprintln!("skipping: no wgpu adapter ({})", text(&o));
    false
}

#[test]
fn wgpu_backend_runs_renders_and_emits() {
    if !gpu_available() {
        return;
    }
    let out = tmp("wgpu");
    let o = weft(&[
        "run",
        "graphs/life.json",
        "--backend",
        "wgpu",
        "--frames",
        "2",
        "--out",
        out.to_str().unwrap(),
        "--dump",
        "alive",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("backend: wgpu on"), "{}", text(&o));
    assert!(out.join("view_0002.png").exists() && out.join("alive.npy").exists());
    let o = weft(&["emit", "wgsl", "graphs/heat.json", "--kernel", "diffuse"]);
    assert!(o.status.success(), "{}", text(&o));
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(
        t.contains("@compute") && t.contains("fn kernel_body"),
        "{}",
        t
    );
    let o = weft(&[
        "emit",
        "spirv",
        "graphs/heat.json",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let spv = std::fs::read(out.join("diffuse.spv")).unwrap();
    assert_eq!(&spv[..4], &0x0723_0203u32.to_le_bytes(), "SPIR-V magic");
    let o = weft(&[
        "bench",
        "graphs/heat.json",
        "--backend",
        "wgpu",
        "--frames",
        "2",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("bench json");
    assert_eq!(v["backend"], "wgpu");
    assert!(v["kernels"]["diffuse"]["median_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(v["kernels"]["diffuse"]["buffer_fill"], false);
    // What the kernel times measure is said; lavapipe's timestamps do not
    // measure its work, so it is timed by wall time (issue 50 item 5).
    let timing = v["kernel_timing"].as_str().expect("kernel_timing");
    if v["device"].as_str().unwrap_or("").contains("llvmpipe") {
        assert!(timing.contains("software adapter"), "{}", timing);
    } else {
        assert!(!timing.is_empty());
    }
    // mpm88's grid clear only zeroes its buffer: wgpu runs it as a fill.
    let o = weft(&[
        "bench",
        "graphs/mpm88.json",
        "--backend",
        "wgpu",
        "--frames",
        "1",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("bench json");
    assert_eq!(
        v["kernels"]["clear_grid"]["buffer_fill"],
        true,
        "{}",
        text(&o)
    );
    assert_eq!(v["kernels"]["p2g/k"]["buffer_fill"], false);
    assert!(v["kernels"]["clear_grid"]["median_ms"].as_f64().unwrap() > 0.0);
}

#[test]
fn oversized_fields_for_the_device_are_a_clear_error() {
    if !gpu_available() {
        return;
    }
    // 2^27 words = 512 MiB: inside Weft's cap, beyond most adapters' storage-buffer binding limit.
    let dir = tmp("big");
    let g = dir.join("big.json");
    std::fs::write(
        &g,
        r#"{"format": "weft-graph", "version": 1, "nodes": [
        {"id": "huge", "kind": "dense", "params": {"shape": [134217728]}},
        {"id": "x", "kind": "field"}],
      "wires": [{"from": "huge.cells", "to": "x.layout"}]}"#,
    )
    .unwrap();
    let o = weft(&[
        "run",
        g.to_str().unwrap(),
        "--backend",
        "wgpu",
        "--frames",
        "0",
        "--no-frames",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let t = text(&o);
    if o.status.success() {
        eprintln!("this adapter binds 512 MiB storage buffers; nothing to check");
        return;
    }
    assert_eq!(o.status.code(), Some(1), "{}", t);
    assert!(
        t.contains("layout node 'huge' needs 512 MiB") && t.contains("allows at most"),
        "{}",
        t
    );
}

#[test]
fn jit_backend_runs_benches_and_replays_against_the_interpreter() {
    let out = tmp("jit");
    let o = weft(&[
        "run",
        "graphs/life.json",
        "--backend",
        "cpu",
        "--frames",
        "2",
        "--out",
        out.to_str().unwrap(),
        "--dump",
        "alive",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("backend: cpu"), "{}", text(&o));
    assert!(out.join("alive.npy").exists());
    let o = weft(&[
        "bench",
        "graphs/heat.json",
        "--backend",
        "jit",
        "--frames",
        "2",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&o.stdout).trim()).unwrap();
    assert_eq!(v["backend"], "cpu");
    // `jit` is an alias; the compiled backend is held to the `cpu` entries the
    // interpreter recorded.
    let o = weft(&[
        "replay",
        "graphs/heat.json",
        "graphs/life.json",
        "--backend",
        "jit",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("ok   graphs/heat.json"), "{}", text(&o));
}

/// Every example with expectations replays on the compiled CPU backend and
/// on wgpu (the `cpu` entries were recorded on the reference VM), so an
/// example added without expectations, or one that drifts, fails here.
#[test]
fn every_example_replays_on_cpu_and_wgpu() {
    for e in std::fs::read_dir(root().join("graphs")).unwrap() {
        let p = e.unwrap().path();
        let name = p.to_str().unwrap();
        if name.ends_with(".json") && !name.ends_with(".expect.json") {
            let expect = name.replace(".json", ".expect.json");
            assert!(Path::new(&expect).exists(), "{} has no expectations", name);
        }
    }
    let o = weft(&["replay", "graphs", "--backend", "cpu"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("ok   graphs/sparse_blob.json"),
        "{}",
        text(&o)
    );
    if !gpu_available() {
        return;
    }
    let o = weft(&["replay", "graphs", "--backend", "wgpu"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("(3 frames, wgpu)"), "{}", text(&o));
}

/// The benchmark graphs in bench/ (what `tools/bench_peers.py` times) stay
/// valid: each checks clean and runs one frame on the compiled CPU backend.
#[test]
fn bench_graphs_check_and_run() {
    for e in std::fs::read_dir(root().join("bench")).unwrap() {
        let p = e.unwrap().path();
        let name = p.to_str().unwrap();
        if !name.ends_with(".json") {
            continue;
        }
        let o = weft(&["check", name]);
        assert!(o.status.success(), "{}: {}", name, text(&o));
        let out = tmp("bench-graphs");
        let o = weft(&[
            "run",
            name,
            "--backend",
            "cpu",
            "--frames",
            "1",
            "--no-frames",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}: {}", name, text(&o));
    }
}

// ---- `weft grad --forward` (issue 11) ----

/// A small graph without a tape: `weft grad` puts one around on_start.
fn forward_graph(dir: &Path) -> PathBuf {
    let code = "fn kernel(i: i32) {\n    let mut s = x[i];\n    while s < 2.0 { s = s * 1.5 + 0.1; }\n    loss[0] += s * sin(x[i]);\n}\n";
    let doc = serde_json::json!({"format": "weft-graph", "version": 1,
        "nodes": [
            {"id": "one", "kind": "dense", "params": {"shape": [1]}},
            {"id": "loss", "kind": "field", "params": {"type": "f32", "grad": true}},
            {"id": "cells", "kind": "dense", "params": {"shape": [4]}},
            {"id": "x", "kind": "field", "params": {"type": "f32", "grad": true, "init": {"npy": "x0.npy"}}},
            {"id": "start", "kind": "on_start"},
            {"id": "k", "kind": "kernel", "params": {"code": code, "range": [4]}}],
        "wires": [{"from": "one", "to": "loss"}, {"from": "cells", "to": "x"},
                  {"from": "x.field", "to": "k.x"}, {"from": "loss.field", "to": "k.loss"}],
        "exec": [{"from": "start", "to": "k"}]});
    write_f32_npy(&dir.join("x0.npy"), vec![4], &[0.3, 0.7, 1.1, 0.5]);
    let p = dir.join("fwd.json");
    std::fs::write(&p, serde_json::to_string(&doc).unwrap()).unwrap();
    p
}

fn write_f32_npy(path: &Path, shape: Vec<usize>, v: &[f32]) {
    use weft_ir::io::npy::{write_npy, DType, NpyArray};
    let a = NpyArray {
        dtype: DType::F32,
        shape,
        words: v.iter().map(|x| x.to_bits()).collect(),
    };
    write_npy(path, &a).unwrap();
}

/// The number after `label` in the output.
fn number_after(out: &str, label: &str) -> f64 {
    let rest = &out[out.find(label).unwrap_or_else(|| panic!("{}", out)) + label.len()..];
    rest.split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn grad_forward_prints_the_directional_derivative() {
    let d = tmp("grad-forward");
    let g = forward_graph(&d);
    let (g, dirf) = (g.to_str().unwrap(), d.join("dir.npy"));
    let help = text(&weft(&["grad", "--help"]));
    assert!(
        help.contains("--forward") && help.contains("--dir <FILE.npy>"),
        "{}",
        help
    );
    let dir = [0.5f32, -1.0, 0.25, 2.0];
    write_f32_npy(&dirf, vec![4], &dir);
    let o = weft(&[
        "grad",
        g,
        "--loss",
        "loss",
        "--wrt",
        "x",
        "--dump-grads",
        d.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let grad = weft_ir::io::npy::read_npy(&d.join("x.grad.npy")).unwrap();
    let dot: f64 = grad
        .words
        .iter()
        .zip(dir)
        .map(|(w, v)| f32::from_bits(*w) as f64 * v as f64)
        .sum();
    for backend in ["vm", "cpu", "wgpu"] {
        if backend == "wgpu" && std::env::var("CI").is_err() {
            continue;
        }
        let o = weft(&[
            "grad",
            g,
            "--loss",
            "loss",
            "--wrt",
            "x",
            "--forward",
            "--dir",
            dirf.to_str().unwrap(),
            "--backend",
            backend,
            "--dump-grads",
            d.to_str().unwrap(),
        ]);
        let out = text(&o);
        assert!(o.status.success(), "{}", out);
        let jvp = number_after(&out, "dir =");
        assert!(
            (jvp - dot).abs() < 1e-4 * dot.abs() + 1e-6,
            "{}: {} vs reverse {}",
            backend,
            jvp,
            dot
        );
        assert!(d.join("x.tangent.npy").exists() && d.join("loss.tangent.npy").exists());
    }
}

#[test]
fn grad_forward_bad_input_is_a_clear_error() {
    let d = tmp("grad-forward-bad");
    let g = forward_graph(&d);
    let g = g.to_str().unwrap();
    let bad = d.join("bad.npy");
    write_f32_npy(&bad, vec![3], &[1.0, 2.0, 3.0]);
    let good = d.join("good.npy");
    write_f32_npy(&good, vec![4], &[1.0, 2.0, 3.0, 4.0]);
    let cases: [(Vec<&str>, &str); 4] = [
        (
            vec!["--wrt", "x", "--dir", bad.to_str().unwrap()],
            "has shape [3] but field 'x' (f32) needs [4]",
        ),
        (
            vec!["--wrt", "nope", "--dir", good.to_str().unwrap()],
            "--wrt nope: no field node 'nope'",
        ),
        (
            vec!["--wrt", "x"],
            "--forward needs one --dir FILE.npy per --wrt field",
        ),
        (vec!["--wrt", "x", "--dir", "missing.npy"], "cannot read"),
    ];
    for (args, want) in cases {
        let mut all = vec!["grad", g, "--loss", "loss", "--forward"];
        all.extend(args);
        let o = weft(&all);
        assert!(!o.status.success(), "{:?}", all);
        assert!(text(&o).contains(want), "{:?}: {}", all, text(&o));
    }
}

// ---- custom gradients (issue 11) ----

/// A periodic stencil kernel `k` with the given `backward` code, then a loss.
fn custom_graph(dir: &Path, backward: &str) -> PathBuf {
    let code = "fn kernel(i: i32) {\n    y[i] = 0.2 * x[(i + 7) % 8] + 0.5 * x[i] + 0.3 * x[(i + 1) % 8];\n}\n";
    let sq = "fn kernel(i: i32) {\n    loss[0] += y[i] * y[i] * (i + 1) as f32;\n}\n";
    let doc = serde_json::json!({"format": "weft-graph", "version": 1,
        "nodes": [
            {"id": "one", "kind": "dense", "params": {"shape": [1]}},
            {"id": "loss", "kind": "field", "params": {"type": "f32", "grad": true}},
            {"id": "cells", "kind": "dense", "params": {"shape": [8]}},
            {"id": "x", "kind": "field", "params": {"type": "f32", "grad": true, "init": {"npy": "x0.npy"}}},
            {"id": "y", "kind": "field", "params": {"type": "f32", "grad": true}},
            {"id": "start", "kind": "on_start"},
            {"id": "k", "kind": "kernel", "params": {"code": code, "backward": backward, "range": [8]}},
            {"id": "sq", "kind": "kernel", "params": {"code": sq, "range": [8]}}],
        "wires": [{"from": "one", "to": "loss"}, {"from": "cells", "to": "x"}, {"from": "cells", "to": "y"},
                  {"from": "x.field", "to": "k.x"}, {"from": "y.field", "to": "k.y"},
                  {"from": "y.field", "to": "sq.y"}, {"from": "loss.field", "to": "sq.loss"}],
        "exec": [{"from": "start", "to": "k"}, {"from": "k.then", "to": "sq"}]});
    write_f32_npy(
        &dir.join("x0.npy"),
        vec![8],
        &[0.3, -0.7, 1.1, 0.5, -0.2, 0.9, -1.3, 0.4],
    );
    let p = dir.join("custom.json");
    std::fs::write(&p, serde_json::to_string(&doc).unwrap()).unwrap();
    p
}

#[test]
fn gradcheck_passes_a_right_custom_backward_and_fails_a_wrong_one() {
    let d = tmp("gradcheck-custom");
    let right = "fn kernel(i: i32) {\n    x.grad[i] += 0.2 * y.grad[(i + 1) % 8] + 0.5 * y.grad[i] + 0.3 * y.grad[(i + 7) % 8];\n}\n";
    // The weights of the two neighbours swapped: the transpose done wrong.
    let wrong = "fn kernel(i: i32) {\n    x.grad[i] += 0.3 * y.grad[(i + 1) % 8] + 0.5 * y.grad[i] + 0.2 * y.grad[(i + 7) % 8];\n}\n";
    for (backward, ok) in [(right, true), (wrong, false)] {
        let g = custom_graph(&d, backward);
        let o = weft(&[
            "gradcheck",
            g.to_str().unwrap(),
            "--loss",
            "loss",
            "--wrt",
            "x",
            "--samples",
            "8",
        ]);
        let out = text(&o);
        assert_eq!(o.status.success(), ok, "{}", out);
        assert_eq!(out.contains("FAIL"), !ok, "{}", out);
    }
}

/// `weft emit cuda` prints each kernel's CUDA C without a GPU; `--backend
/// cuda` runs where a CUDA driver is, and elsewhere exits 2 with one line
/// saying why (the machine has no driver; `auto` quietly runs without it).
#[test]
fn cuda_emits_everywhere_and_runs_only_with_a_driver() {
    let o = weft(&["emit", "cuda", "graphs/heat.json", "--kernel", "diffuse"]);
    assert!(o.status.success(), "{}", text(&o));
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(
        t.contains("// kernel 'diffuse'")
            && t.contains("extern \"C\" __global__ void weft_kernel("),
        "{}",
        t
    );
    let out = tmp("cuda");
    let o = weft(&[
        "run",
        "graphs/life.json",
        "--backend",
        "cuda",
        "--frames",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    match weft_runtime::cuda::driver_status() {
        Ok(()) => {
            assert!(o.status.success(), "{}", text(&o));
            assert!(text(&o).contains("backend: cuda on"), "{}", text(&o));
        }
        Err(why) => {
            eprintln!("no CUDA driver ({}): checking the refusal", why);
            assert_eq!(o.status.code(), Some(2), "{}", text(&o));
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                err.contains("the cuda backend cannot run here") && err.contains("no CUDA driver"),
                "{}",
                err
            );
            assert!(!err.contains("panicked"), "{}", err);
            let o = weft(&[
                "run",
                "graphs/life.json",
                "--backend",
                "auto",
                "--frames",
                "1",
                "--out",
                out.to_str().unwrap(),
            ]);
            assert!(o.status.success(), "{}", text(&o));
            assert!(!text(&o).contains("backend: cuda"), "{}", text(&o));
        }
    }
}

#[cfg(unix)]
#[test]
fn a_reader_that_stops_early_ends_weft_quietly() {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    // ~200 KB of CUDA C, more than a pipe holds: weft is still writing
    // when the reader goes away (`weft emit cuda G | head -c 100`).
    let mut child = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["emit", "cuda", "graphs/mass_spring_ad_ckpt.json"])
        .current_dir(root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("weft runs");
    let mut head = [0u8; 100];
    child.stdout.take().unwrap().read_exact(&mut head).unwrap();
    // The read end is dropped here.
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{}", err);
    // Ended by SIGPIPE (13 on Linux and the BSDs), as `cat` would be.
    assert_eq!(o.status.signal(), Some(13), "{:?}: {}", o.status, err);
}

/// Whether `python3` with NumPy runs here: a failure in CI (`.ci/run`
/// installs it), a visible skip elsewhere.
fn numpy_available() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import numpy"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "CI=true but python3 with numpy is missing (.ci/run installs it)"
        );
        eprintln!("skipping the NumPy part: python3 with numpy is missing");
    }
    ok
}

#[test]
fn dump_all_writes_a_hash_field_as_its_active_elements() {
    // graphs/hash_particles.json's `rho` spans 2^40 cells: dumping it
    // densely would allocate 4 TiB.
    let dir = tmp("dump_hash");
    let o = weft(&[
        "run",
        "graphs/hash_particles.json",
        "--frames",
        "1",
        "--dump-all",
        "--no-frames",
        "--backend",
        "cpu",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("rho: 1099511627776 elements under a hash root; wrote its"),
        "{}",
        text(&o)
    );
    assert!(!dir.join("rho.npy").exists());
    if !numpy_available() {
        return;
    }
    // NumPy reads the files. `smooth` took the square root of each cell's
    // deposits, and each particle's bilinear deposits add up to 1; the
    // window `win` is rho around particle 1056, cells without a tile 0.
    let script = r#"
import sys, numpy as np
d = sys.argv[1]
c = np.load(d + "/rho.coords.npy"); v = np.load(d + "/rho.values.npy")
w = np.load(d + "/win.npy"); p = np.load(d + "/pos.npy")
assert c.dtype == np.int32 and c.shape[1] == 2 and v.shape == (c.shape[0],), (c.dtype, c.shape, v.shape)
total = (v.astype(np.float64) ** 2).sum()
assert abs(total - 2048) < 0.05, total
assert len(set(map(tuple, c.tolist()))) == len(c), "a coordinate listed twice"
cx, cy = np.floor(p[1056]).astype(np.int64) - 128
rho = dict(zip(map(tuple, c.tolist()), v.tolist()))
for i in range(256):
    for j in range(256):
        assert w[i, j] == rho.get((cx + i, cy + j), 0.0), (i, j, w[i, j])
print("ok", len(v))
"#;
    let py = Command::new("python3")
        .args(["-c", script, dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(py.status.success(), "{}", text(&py));
}

/// Every example runs `--frames 2 --dump-all` on cpu and wgpu without an
/// abort, and every field comes out as a readable `.npy` of the field's size
/// (a hash field over 2^26 elements as its active elements: coords + values).
#[test]
fn every_example_dumps_every_field_on_cpu_and_wgpu() {
    let mut backends = vec!["cpu"];
    if gpu_available() {
        backends.push("wgpu");
    }
    let mut graphs: Vec<PathBuf> = std::fs::read_dir(root().join("graphs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.to_string_lossy();
            n.ends_with(".json") && !n.ends_with(".expect.json")
        })
        .collect();
    graphs.sort();
    assert!(graphs.len() >= 10, "{:?}", graphs);
    let mut problems = Vec::new();
    for g in &graphs {
        let text_of = std::fs::read_to_string(g).unwrap();
        let doc = weft_ir::graph::GraphDoc::parse(&text_of).unwrap();
        let program = weft_ir::graph::build_program(
            &doc,
            &weft_ir::graph::BuildOptions {
                base_dir: root().join("graphs"),
            },
        )
        .unwrap_or_else(|e| panic!("{}: {}", g.display(), e));
        let stem = g.file_stem().unwrap().to_string_lossy().to_string();
        for b in &backends {
            let out = tmp(&format!("dump_all_{stem}_{b}"));
            let o = weft(&[
                "run",
                g.to_str().unwrap(),
                "--frames",
                "2",
                "--dump-all",
                "--no-frames",
                "--backend",
                b,
                "--out",
                out.to_str().unwrap(),
            ]);
            if o.status.code() != Some(0) {
                problems.push(format!("{stem} on {b}: {:?}\n{}", o.status, text(&o)));
                continue;
            }
            for (_, f) in program.fields.iter() {
                let whole = out.join(format!("{}.npy", f.name));
                let (coords, values) = (
                    out.join(format!("{}.coords.npy", f.name)),
                    out.join(format!("{}.values.npy", f.name)),
                );
                let per_elem = f.ty.words();
                if whole.exists() {
                    match weft_ir::io::npy::read_npy(&whole) {
                        Ok(a) if a.words.len() as u64 == f.cells() * per_elem as u64 => {}
                        Ok(a) => problems.push(format!(
                            "{stem} on {b}: {} holds {} words, the field {}",
                            whole.display(),
                            a.words.len(),
                            f.cells() * per_elem as u64
                        )),
                        Err(e) => problems.push(format!("{stem} on {b}: {}: {e}", whole.display())),
                    }
                } else if coords.exists() && values.exists() {
                    let c = weft_ir::io::npy::read_npy(&coords);
                    let v = weft_ir::io::npy::read_npy(&values);
                    match (c, v) {
                        (Ok(c), Ok(v)) if c.shape[0] == v.shape[0] => {}
                        (c, v) => problems.push(format!(
                            "{stem} on {b}: {}: coords {:?} values {:?}",
                            f.name,
                            c.map(|a| a.shape),
                            v.map(|a| a.shape)
                        )),
                    }
                } else {
                    problems.push(format!("{stem} on {b}: no dump of field '{}'", f.name));
                }
            }
            let _ = std::fs::remove_dir_all(&out);
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `hash_particles.json` (a random walk drawing new `random()` numbers
/// every frame, float atomics into a hash-table grid) for 24 frames; a run
/// with `--checkpoint --every 4` killed with SIGKILL once its frame-8
/// snapshot exists; the same command resumed with `--resume`: its final
/// fields equal the uninterrupted run's bit for bit on vm and on cpu with
/// one thread (atomics in a fixed order), and on wgpu the positions do
/// (they follow the random numbers only) and the atomically summed grid
/// agrees within 1e-4 relative.
#[test]
fn a_killed_run_resumes_to_the_uninterrupted_result() {
    let mut backends = vec!["vm", "cpu"];
    if gpu_available() {
        backends.push("wgpu");
    }
    for backend in backends {
        let d = tmp(&format!("resume-{}", backend));
        let (full, ck, res) = (d.join("full"), d.join("ck"), d.join("res"));
        let base = |frames: &str, out: &Path| -> Vec<String> {
            [
                "run",
                "graphs/hash_particles.json",
                "--backend",
                backend,
                "--threads",
                "1",
                "--no-frames",
                "--frames",
                frames,
                "--out",
                out.to_str().unwrap(),
            ]
            .iter()
            .map(|s| s.to_string())
            .collect()
        };
        let dumps = ["--dump", "pos", "--dump", "heading", "--dump", "rho"];
        let mut args = base("24", &full);
        args.extend(dumps.iter().map(|s| s.to_string()));
        let o = weft(&args.iter().map(|s| s.as_str()).collect::<Vec<_>>());
        assert!(o.status.success(), "{}", text(&o));
        // The run to kill: far more frames than it gets to.
        let mut args = base("100000", &res);
        args.extend(
            ["--checkpoint", ck.to_str().unwrap(), "--every", "4"]
                .iter()
                .map(|s| s.to_string()),
        );
        let mut child = Command::new(env!("CARGO_BIN_EXE_weft"))
            .args(&args)
            .current_dir(root())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let t0 = std::time::Instant::now();
        while !ck.join("frame_000008").exists() {
            assert!(
                t0.elapsed().as_secs() < 300,
                "{}: no frame-8 snapshot",
                backend
            );
            assert!(child.try_wait().unwrap().is_none(), "{}: exited", backend);
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        child.kill().unwrap();
        let status = child.wait().unwrap();
        assert!(
            status.code().is_none(),
            "{}: not killed: {}",
            backend,
            status
        );
        let mut args = base("24", &res);
        args.extend(
            ["--resume", ck.to_str().unwrap()]
                .iter()
                .chain(&dumps)
                .map(|s| s.to_string()),
        );
        let o = weft(&args.iter().map(|s| s.as_str()).collect::<Vec<_>>());
        assert!(o.status.success(), "{}", text(&o));
        assert!(text(&o).contains("resumed from"), "{}", text(&o));
        let exact: &[&str] = if backend == "wgpu" {
            &["pos.npy", "heading.npy"]
        } else {
            &["pos.npy", "heading.npy", "rho.coords.npy", "rho.values.npy"]
        };
        for f in exact {
            let (a, b) = (
                std::fs::read(full.join(f)).unwrap(),
                std::fs::read(res.join(f)).unwrap(),
            );
            assert!(a == b, "{}: {} differs after the resume", backend, f);
        }
        if backend == "wgpu" {
            // The hash table's slots fill in the order the GPU's atomic
            // inserts happened: compare the grid cell by cell.
            let cells = |dir: &Path| -> std::collections::BTreeMap<(u32, u32), f32> {
                let read = |f: &str| {
                    weft_ir::io::npy::parse_npy(&std::fs::read(dir.join(f)).unwrap()).unwrap()
                };
                let (c, v) = (read("rho.coords.npy"), read("rho.values.npy"));
                c.words
                    .chunks(2)
                    .zip(&v.words)
                    .map(|(k, w)| ((k[0], k[1]), f32::from_bits(*w)))
                    .collect()
            };
            let (a, b) = (cells(&full), cells(&res));
            assert_eq!(
                a.keys().collect::<Vec<_>>(),
                b.keys().collect::<Vec<_>>(),
                "wgpu: the grid's active cells differ after the resume"
            );
            for (k, x) in &a {
                let y = b[k];
                assert!(
                    (x - y).abs() <= 1e-4 * x.abs().max(1.0),
                    "wgpu: rho at {:?}: {} vs {}",
                    k,
                    x,
                    y
                );
            }
        }
        let _ = std::fs::remove_dir_all(&d);
    }
}

/// Snapshots are refused by a different graph, naming the difference; a
/// damaged newest snapshot is skipped with a warning, never used; temporary
/// folders a killed write leaves are ignored; an empty folder named by both
/// `--checkpoint` and `--resume` starts from frame 0.
#[test]
fn snapshots_are_checked_before_a_resume() {
    let d = tmp("snapshot-checks");
    let ck = d.join("ck");
    let run = |extra: &[&str]| {
        let mut a = vec![
            "run",
            "graphs/heat.json",
            "--backend",
            "cpu",
            "--no-frames",
            "--out",
            d.to_str().unwrap(),
        ];
        a.extend_from_slice(extra);
        weft(&a)
    };
    let c = ck.to_str().unwrap();
    let o = run(&[
        "--frames",
        "6",
        "--checkpoint",
        c,
        "--resume",
        c,
        "--every",
        "3",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("starting from frame 0"), "{}", text(&o));
    assert!(ck.join("frame_000003").join("snapshot.json").exists());
    assert!(ck.join("frame_000006").join("snapshot.json").exists());
    // An edited scalar: refused, naming the node and the parameter.
    let o = run(&["--frames", "8", "--resume", c, "--set", "diffuse.alpha=0.1"]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("different graph: node 'diffuse' param 'scalars'"),
        "{}",
        text(&o)
    );
    // A different view only (views never change the state): accepted.
    let o = run(&[
        "--frames",
        "7",
        "--resume",
        c,
        "--set",
        "view.colormap=magma",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("frame_000006 (frame 6)"), "{}", text(&o));
    // A newest snapshot cut short, and a temporary folder: the one before.
    let bad = ck.join("frame_000009");
    std::fs::create_dir_all(&bad).unwrap();
    for e in std::fs::read_dir(ck.join("frame_000006")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), bad.join(e.file_name())).unwrap();
    }
    let bin = std::fs::read_dir(&bad)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "bin"))
        .unwrap();
    let bytes = std::fs::read(&bin).unwrap();
    std::fs::write(&bin, &bytes[..bytes.len() / 2]).unwrap();
    std::fs::create_dir_all(ck.join(".frame_000012.tmp1")).unwrap();
    let o = run(&["--frames", "8", "--resume", c]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("skipped a damaged snapshot")
            && text(&o).contains("frame_000006 (frame 6)"),
        "{}",
        text(&o)
    );
    // A folder without snapshots.
    let o = run(&[
        "--frames",
        "8",
        "--resume",
        d.join("nothing").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(text(&o).contains("no such folder"), "{}", text(&o));
    let _ = std::fs::remove_dir_all(&d);
}

/// A bit flipped in the newest snapshot's `.bin` (same size, so its word
/// count still matches) is caught by the checksum `snapshot.json` records:
/// that frame is refused, naming the file, and the run resumes from the one
/// before. (Before checksums it was restored as good state.)
#[test]
fn a_flipped_bit_in_a_snapshot_is_refused_naming_the_file() {
    let d = tmp("snapshot-flip");
    let ck = d.join("ck");
    let c = ck.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut a = vec![
            "run",
            "graphs/heat.json",
            "--backend",
            "cpu",
            "--no-frames",
            "--out",
            d.to_str().unwrap(),
        ];
        a.extend_from_slice(extra);
        weft(&a)
    };
    let o = run(&["--frames", "6", "--checkpoint", c, "--every", "3"]);
    assert!(o.status.success(), "{}", text(&o));
    let bin = ck.join("frame_000006").join("grid.bin");
    let mut bytes = std::fs::read(&bin).unwrap();
    bytes[1234] ^= 0x01;
    std::fs::write(&bin, &bytes).unwrap();
    let o = run(&["--frames", "8", "--resume", c]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("skipped a damaged snapshot")
            && text(&o).contains("frame_000006/grid.bin")
            && text(&o).contains("frame_000003 (frame 3)"),
        "{}",
        text(&o)
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// `--dump u` into an output folder where `u.npy` is a symbolic link to a
/// file outside it: the link is replaced by the dump, the outside file is
/// never created (before, the dump was written through the link).
#[cfg(unix)]
#[test]
fn a_dump_replaces_a_link_never_writes_through_it() {
    let d = tmp("dump-link");
    let out = d.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let outside = d.join("outside.npy");
    std::os::unix::fs::symlink(&outside, out.join("T.npy")).unwrap();
    std::os::unix::fs::symlink(d.join("outside.png"), out.join("view_0001.png")).unwrap();
    let o = weft(&[
        "run",
        "graphs/heat.json",
        "--backend",
        "cpu",
        "--frames",
        "1",
        "--out",
        out.to_str().unwrap(),
        "--dump",
        "T",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!outside.exists(), "the dump was written through the link");
    assert!(
        !d.join("outside.png").exists(),
        "a frame was written through the link"
    );
    for f in ["T.npy", "view_0001.png"] {
        let m = std::fs::symlink_metadata(out.join(f)).unwrap();
        assert!(m.file_type().is_file(), "{} is not a plain file", f);
    }
    let a = weft_ir::io::npy::read_npy(&out.join("T.npy")).unwrap();
    assert_eq!(a.shape, vec![128, 128]);
    let _ = std::fs::remove_dir_all(&d);
}

/// A 512³ domain with several f32 fields (2.5 GiB, over the old fixed
/// 1 GiB cap) builds and `weft check` prints its memory where the budget
/// allows it; a smaller `--max-memory` is a clear error naming the layout
/// node, and a tree past the 2^32-word address space is refused at build.
#[test]
fn memory_limit_follows_max_memory() {
    let g = "tests/scale/smoke512.json";
    let o = weft(&["check", "--max-memory", "64GiB", g]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("layout tree 'grid': 671088640 words (2560.000 MiB)"),
        "{}",
        t
    );
    assert!(
        t.contains("memory: 2.5 GiB in all; --max-memory allows 64.0 GiB; at most 16.0 GiB per layout tree (32-bit word addresses)"),
        "{}",
        t
    );
    let o = weft(&["check", "--max-memory", "1GiB", g]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).trim(),
        "tests/scale/smoke512.json: error: layout node 'grid': the layout needs 2.5 GiB; --max-memory allows 1.0 GiB"
    );
    // `run` applies the same limit before allocating anything.
    let out = tmp("max-memory");
    let o = weft(&[
        "run",
        g,
        "--backend",
        "cpu",
        "--max-memory",
        "1.5G",
        "--no-frames",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains(
            "error: layout node 'grid': the layout needs 2.5 GiB; --max-memory allows 1.5 GiB"
        ),
        "{}",
        text(&o)
    );
    let o = weft(&["check", "--max-memory", "lots", g]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("'lots' is not a size"), "{}", text(&o));
    // Past 2^32 words no flag helps: word addresses are 32-bit.
    let dir = tmp("address-space");
    let huge = dir.join("huge.json");
    let src = std::fs::read_to_string(root().join(g))
        .unwrap()
        .replace("[512, 512, 512]", "[2048, 2048, 2048]");
    assert!(src.contains("2048"), "the shape was replaced");
    std::fs::write(&huge, src).unwrap();
    let o = weft(&["check", "--max-memory", "1TiB", huge.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("node 'grid', param 'shape': the layout needs more than 4294967296 words (16 GiB) of storage; word addresses are 32-bit on every backend"),
        "{}",
        text(&o)
    );
}

/// `weft run` of a turntable (`orbit_degrees_per_frame`): frame k's picture
/// is the one of the same run with the camera's yaw saved as yaw + k·step.
#[test]
fn run_turntable_frame_k_is_the_turned_camera() {
    let size = ["--set", "view3d.width=96", "--set", "view3d.height=96"];
    let run = |name: &str, set: &str| -> PathBuf {
        let out = tmp(name);
        let mut args = vec![
            "run",
            "graphs/mpm3d.json",
            "--backend",
            "cpu",
            "--threads",
            "1",
            "--frames",
            "2",
            "--out",
            out.to_str().unwrap(),
            "--set",
            set,
        ];
        args.extend_from_slice(&size);
        let o = weft(&args);
        assert!(o.status.success(), "{}", text(&o));
        out
    };
    let turn = run("turntable", "view3d.orbit_degrees_per_frame=25");
    // mpm3d saves yaw 30, pitch 20: frame 2 is at yaw 80.
    let fixed = run("turned", r#"view3d.camera={"yaw": 80, "pitch": 20}"#);
    let read = |d: &Path, f: &str| std::fs::read(d.join(f)).expect("a PNG frame");
    assert_eq!(
        read(&turn, "view3d_0002.png"),
        read(&fixed, "view3d_0002.png"),
        "frame 2 of the turntable is the camera turned by 2 steps"
    );
    assert_ne!(
        read(&turn, "view3d_0001.png"),
        read(&fixed, "view3d_0001.png"),
        "frame 1 is turned by one step only"
    );
    let _ = std::fs::remove_dir_all(turn);
    let _ = std::fs::remove_dir_all(fixed);
}

/// A Python interpreter that imports `modules`, or `None` (a failure under
/// `CI=true`, where `.ci/run` installs them). Which one: `python3` (pyenv;
/// PyPI's plyfile, usd-core, bpy) or Debian's `/usr/bin/python3`
/// (python3-openvdb's `pyopenvdb`).
fn python_with(modules: &str) -> Option<&'static str> {
    for py in ["python3", "/usr/bin/python3"] {
        let ok = Command::new(py)
            .args(["-c", &format!("import {}", modules)])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(py);
        }
    }
    assert_ne!(
        std::env::var("CI").as_deref(),
        Ok("true"),
        "CI=true but no python3 imports {} (.ci/run installs it)",
        modules
    );
    eprintln!("skipping a reader check: no python3 imports {}", modules);
    None
}

fn python_ok(py: &str, script: &str, args: &[&str]) {
    let o = Command::new(py)
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    eprintln!("{}", text(&o));
}

/// mpm3d for 3 frames on cpu exported as PLY (x, v, J), USD points, a VDB
/// (grid_m) and a USD volume (grid_v, a vec3 grid): each read back with the
/// format's own reader and compared with the `--dump` of frame 3.
#[test]
fn exports_read_back_with_the_formats_own_readers() {
    let dir = tmp("export_mpm");
    let d = dir.to_str().unwrap();
    let o = weft(&[
        "run",
        "graphs/mpm3d.json",
        "--frames",
        "3",
        "--no-frames",
        "--backend",
        "cpu",
        "--out",
        d,
        "--export",
        "x,v,J=ply",
        "--export",
        "x,v,J=usd",
        "--export",
        "grid_m=vdb",
        "--export",
        "grid_v=usd",
        "--dump",
        "x",
        "--dump",
        "v",
        "--dump",
        "J",
        "--dump",
        "grid_m",
        "--dump",
        "grid_v",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    for f in 1..=3 {
        for n in ["x_{:04}.ply", "grid_m_{:04}.vdb", "grid_v_{:04}.vdb"] {
            let p = dir.join(n.replace("{:04}", &format!("{:04}", f)));
            assert!(p.exists(), "{} missing", p.display());
        }
    }
    if let Some(py) = python_with("plyfile, numpy") {
        let script = r#"
import sys, numpy as np
from plyfile import PlyData
d = sys.argv[1]
x, v, J = (np.load(d + "/%s.npy" % n) for n in "xvJ")
for f in (1, 2, 3):
    e = PlyData.read(d + "/x_%04d.ply" % f)["vertex"]
    assert len(e.data) == len(x), (f, len(e.data))
    assert [p.name for p in e.properties] == ["x", "y", "z", "v_0", "v_1", "v_2", "J"]
    assert all(p.val_dtype in ("f4", "float32", "<f4", "float") for p in e.properties), [p.val_dtype for p in e.properties]
e = PlyData.read(d + "/x_0003.ply")["vertex"]
assert PlyData.read(d + "/x_0003.ply").byte_order == "<"
for c, a in enumerate("xyz"):
    assert np.array_equal(e[a].view(np.uint32), x[:, c].view(np.uint32)), a
    assert np.array_equal(e["v_%d" % c].view(np.uint32), v[:, c].view(np.uint32)), c
assert np.array_equal(e["J"].view(np.uint32), J.view(np.uint32))
assert not np.array_equal(PlyData.read(d + "/x_0001.ply")["vertex"]["y"], e["y"]), "frames differ"
print("plyfile ok", len(x))
"#;
        python_ok(py, script, &[d]);
    }
    if let Some(py) = python_with("pxr.Usd, numpy") {
        let script = r#"
import sys, numpy as np
from pxr import Usd, UsdGeom, UsdVol
d = sys.argv[1]
x, v, J = (np.load(d + "/%s.npy" % n) for n in "xvJ")
s = Usd.Stage.Open(d + "/x.usda")
assert (s.GetStartTimeCode(), s.GetEndTimeCode(), s.GetTimeCodesPerSecond()) == (1, 3, 24)
assert UsdGeom.GetStageUpAxis(s) == "Y" and UsdGeom.GetStageMetersPerUnit(s) == 1
p = UsdGeom.Points(s.GetDefaultPrim())
assert p and p.GetPrim().GetName() == "x"
assert p.GetPointsAttr().GetTimeSamples() == [1, 2, 3]
P = np.array(p.GetPointsAttr().Get(3), dtype=np.float32)
assert P.shape == x.shape and np.array_equal(P.view(np.uint32), x.view(np.uint32))
assert len(p.GetPointsAttr().Get(1)) == len(x)
assert not np.array_equal(np.array(p.GetPointsAttr().Get(1), dtype=np.float32), P)
assert list(p.GetWidthsAttr().Get()) == [np.float32(0.01)] and p.GetWidthsInterpolation() == "constant"
pv = UsdGeom.PrimvarsAPI(p.GetPrim())
for n, a in (("v", v), ("J", J)):
    q = pv.GetPrimvar(n)
    assert q.GetInterpolation() == "vertex" and q.GetAttr().GetTimeSamples() == [1, 2, 3], n
    got = np.array(q.Get(3), dtype=np.float32)
    assert np.array_equal(got.view(np.uint32), a.view(np.uint32)), n
lo, hi = (np.array(e) for e in p.GetExtentAttr().Get(3))
assert (lo <= x.min(0)).all() and (hi >= x.max(0)).all()
s = Usd.Stage.Open(d + "/grid_v.usda")
vol = UsdVol.Volume(s.GetDefaultPrim())
assert vol and vol.GetFieldPaths() == {"grid_v": "/grid_v/grid_v"}
a = UsdVol.OpenVDBAsset(s.GetPrimAtPath("/grid_v/grid_v"))
assert a.GetFieldNameAttr().Get() == "grid_v"
assert a.GetFilePathAttr().GetTimeSamples() == [1, 2, 3]
for f in (1, 2, 3):
    r = a.GetFilePathAttr().Get(f).resolvedPath
    assert r.endswith("/grid_v_%04d.vdb" % f), r
print("usd ok")
"#;
        python_ok(py, script, &[d]);
    }
    if let Some(py) = python_with("pyopenvdb, numpy") {
        let script = r#"
import sys, numpy as np, pyopenvdb as vdb
d = sys.argv[1]
m = np.load(d + "/grid_m.npy"); gv = np.load(d + "/grid_v.npy")
grids, meta = vdb.readAll(d + "/grid_m_0003.vdb")
assert len(grids) == 1
g = grids[0]
assert g.name == "grid_m" and g.valueTypeName == "float" and g.gridClass == "fog volume"
assert g.background == 0.0
assert g.transform.voxelSize() == (1 / 32,) * 3, g.transform.voxelSize()
assert g.transform.indexToWorld((0, 0, 0)) == (1 / 64,) * 3
assert g.transform.indexToWorld((31, 31, 31)) == (1 - 1 / 64,) * 3
assert g.activeVoxelCount() == np.count_nonzero(m) > 0, (g.activeVoxelCount(), np.count_nonzero(m))
a = np.zeros(m.shape, np.float32)
g.copyToArray(a, ijk=(0, 0, 0))
assert np.array_equal(a.view(np.uint32), m.view(np.uint32))
for it in g.iterOnValues():
    assert it["active"] and it["count"] == 1 and it["value"] == m[it["min"]] != 0, it
(g2,), _ = vdb.readAll(d + "/grid_v_0003.vdb")
assert g2.name == "grid_v" and g2.valueTypeName == "vec3s"
assert g2.activeVoxelCount() == np.count_nonzero(np.any(gv != 0, axis=-1))
b = np.zeros(gv.shape, np.float32)
g2.copyToArray(b, ijk=(0, 0, 0))
assert np.array_equal(b, gv)
print("openvdb ok", g.activeVoxelCount(), g.leafCount())
"#;
        python_ok(py, script, &[d]);
    }
    if let Some(py) = python_with("bpy") {
        let o = Command::new(py)
            .arg(root().join("tools/blender_import_check.py"))
            .args([
                dir.join("x_0001.ply").to_str().unwrap(),
                "3",
                dir.join("grid_m_0003.vdb").to_str().unwrap(),
                "grid_m",
                "0.03125",
            ])
            .output()
            .unwrap();
        assert!(
            o.status.success() && text(&o).contains("blender ok"),
            "{}",
            text(&o)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// sparse3d (a 512³ pointer → bitmasked → dense domain) for 2 frames on
/// cpu exported as a VDB: OpenVDB reads exactly the cells the layout
/// stores (its active tiles: what the runtime's own walk lists, here from
/// the same run in process) with their values, and nothing else.
#[test]
fn a_sparse_field_exports_only_its_active_blocks() {
    let dir = tmp("export_sparse");
    let d = dir.to_str().unwrap();
    let o = weft(&[
        "run",
        "graphs/sparse3d.json",
        "--frames",
        "2",
        "--no-frames",
        "--backend",
        "cpu",
        "--out",
        d,
        "--export",
        "d=vdb",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // The same run in process: the stored elements of `d` at frame 2.
    let src = std::fs::read_to_string(root().join("graphs/sparse3d.json")).unwrap();
    let doc = weft_ir::graph::GraphDoc::parse(&src).unwrap();
    let program = weft_ir::graph::build_program(
        &doc,
        &weft_ir::graph::BuildOptions {
            base_dir: root().join("graphs"),
        },
    )
    .unwrap();
    let mut sim = weft_runtime::Simulation::new(
        program,
        &weft_runtime::SimOptions {
            backend: weft_runtime::Backend::Jit,
            ..Default::default()
        },
    )
    .unwrap();
    sim.start().unwrap();
    sim.step_frame().unwrap();
    sim.step_frame().unwrap();
    sim.sync().unwrap();
    let f = sim.field("d").unwrap();
    let layout = sim.program.fields[f].layout;
    let words = sim
        .read_root(weft_ir::ir::layout::root_of(&sim.program, layout))
        .unwrap();
    let plan = weft_ir::ir::layout::AddressPlan::new(&sim.program, f);
    let shape = sim.program.fields[f].shape.clone();
    let (mut coords, mut values) = (Vec::new(), Vec::new());
    weft_runtime::memory::for_each_stored_element(&plan, &shape, &words, |e| {
        coords.extend_from_slice(e.index);
        values.push(e.values[0]);
    });
    let n = values.len();
    assert!(
        n > 0 && (n as u64) < sim.program.fields[f].cells() / 100,
        "{n}"
    );
    use weft_ir::io::npy::{write_npy, DType, NpyArray};
    let npy = |name: &str, dtype, shape, words| {
        write_npy(
            &dir.join(name),
            &NpyArray {
                dtype,
                shape,
                words,
            },
        )
        .unwrap()
    };
    npy("coords.npy", DType::I32, vec![n, 3], coords);
    npy("values.npy", DType::F32, vec![n], values);
    let Some(py) = python_with("pyopenvdb, numpy") else {
        return;
    };
    let script = r#"
import sys, numpy as np, pyopenvdb as vdb
d = sys.argv[1]
c = np.load(d + "/coords.npy"); v = np.load(d + "/values.npy")
(g,), _ = vdb.readAll(d + "/d_0002.vdb")
assert g.name == "d" and g.gridClass == "fog volume"
assert g.transform.voxelSize() == (1 / 512,) * 3
assert g.activeVoxelCount() == len(c), (g.activeVoxelCount(), len(c))
on = {}
for it in g.iterOnValues():
    assert it["count"] == 1, it
    on[it["min"]] = it["value"]
want = dict(zip(map(tuple, c.tolist()), v.tolist()))
assert on == want
# Leaves hold whole 4^3 tiles: at most 8 tiles per 8^3 leaf.
assert g.leafCount() * 512 >= len(c) and len(c) % 64 == 0
print("sparse openvdb ok", len(c), g.leafCount())
"#;
    python_ok(py, script, &[d]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Export specs that cannot be written are refused before the run (exit 2,
/// a usage error), naming the field; an unwritable path fails the run
/// (exit 1) naming the path; never a panic.
#[test]
fn bad_exports_are_clear_errors() {
    let dir = tmp("export_bad");
    let d = dir.to_str().unwrap();
    let run = |spec: &str| {
        weft(&[
            "run",
            "graphs/mpm3d.json",
            "--frames",
            "1",
            "--no-frames",
            "--backend",
            "vm",
            "--out",
            d,
            "--export",
            spec,
        ])
    };
    for (spec, code, msg) in [
        ("nope=ply", 2, "no field or view node 'nope'"),
        ("x=obj", 2, "unknown format 'obj'"),
        (
            "J=ply",
            2,
            "node 'J': --export J=ply: the first field is the points' positions",
        ),
        (
            "x=vdb",
            2,
            "node 'x': --export x=vdb: a volume is a 3-axis f32 or vec3 field",
        ),
        (
            "x,grid_m=ply",
            2,
            "node 'grid_m': --export: attribute 'grid_m' is on another layout",
        ),
        ("x,C=ply", 2, "node 'C': cannot export a mat3"),
        ("grid_m,grid_v=vdb", 2, "takes one field"),
    ] {
        let o = run(spec);
        assert_eq!(o.status.code(), Some(code), "{spec}: {}", text(&o));
        assert!(text(&o).contains(msg), "{spec}: {}", text(&o));
        assert!(!text(&o).contains("panicked"), "{}", text(&o));
    }
    std::fs::write(dir.join("file"), "").unwrap();
    let bad = format!("x=ply:{}/file/x_#.ply", d);
    let o = run(&bad);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("export: cannot create"), "{}", text(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

/// PLY of a `dynamic` layout holds only the appended elements: the
/// particle_lists example with a `vec2` copy of each particle's position
/// appended next to its index (`mpos`, on the lists' layout).
#[test]
fn a_dynamic_layout_exports_only_its_appended_elements() {
    let dir = tmp("export_dynamic");
    let d = dir.to_str().unwrap();
    let src = std::fs::read_to_string(root().join("graphs/particle_lists.json")).unwrap();
    let mut g: serde_json::Value = serde_json::from_str(&src).unwrap();
    g["nodes"].as_array_mut().unwrap().push(serde_json::json!({
        "id": "mpos", "kind": "field", "params": {"type": "vec2", "init": 0}, "pos": [220, 550]
    }));
    for w in [("bucket.cells", "mpos.layout"), ("mpos.field", "bin.mpos")] {
        g["wires"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"from": w.0, "to": w.1}));
    }
    let bin = g["nodes"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|n| n["id"] == "bin")
        .unwrap();
    let code = bin["params"]["code"].as_str().unwrap().replace(
        "let k = append(members, c.x * cells + c.y, p);",
        "let l = c.x * cells + c.y;\n    let k = append(members, l, p);\n    mpos[l * 32 + k] = pos[p];",
    );
    assert!(
        code.contains("mpos["),
        "the example's append changed: {code}"
    );
    bin["params"]["code"] = code.into();
    let graph = dir.join("lists.json");
    std::fs::write(&graph, serde_json::to_string(&g).unwrap()).unwrap();
    let o = weft(&[
        "run",
        graph.to_str().unwrap(),
        "--frames",
        "2",
        "--no-frames",
        "--backend",
        "cpu",
        "--out",
        d,
        "--export",
        "mpos,members=ply",
        "--dump",
        "mpos",
        "--dump",
        "members",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let Some(py) = python_with("plyfile, numpy") else {
        return;
    };
    let script = r#"
import sys, numpy as np
from plyfile import PlyData
d = sys.argv[1]
m = np.load(d + "/members.npy"); p = np.load(d + "/mpos.npy")
e = PlyData.read(d + "/mpos_0002.ply")["vertex"]
live = m >= 0
assert 0 < live.sum() < len(m) and len(e.data) == live.sum(), (len(e.data), live.sum(), len(m))
assert [q.name for q in e.properties] == ["x", "y", "z", "members"]
assert np.array_equal(e["members"], m[live])
assert np.array_equal(e["x"], p[live, 0]) and np.array_equal(e["y"], p[live, 1])
assert (e["z"] == 0).all()
print("dynamic ply ok", len(e.data))
"#;
    python_ok(py, script, &[d]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bake_writes_complete_frames_of_the_range_and_refuses_bad_ones() {
    let out = tmp("bake");
    let cache = out.join("c");
    let o = weft(&[
        "bake",
        "graphs/life.json",
        "--frames",
        "2:4",
        "--backend",
        "vm",
        "--out",
        cache.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("baked 3 frames"), "{}", text(&o));
    let mut frames = weft_runtime::snapshot::list(&cache);
    frames.sort_unstable();
    assert_eq!(frames, vec![2, 3, 4]);
    for f in frames {
        let l = weft_runtime::snapshot::read(&weft_runtime::snapshot::folder(&cache, f)).unwrap();
        assert_eq!(l.snapshot.frame, f);
    }
    let o = weft(&["bake", "graphs/life.json", "--frames", "4:2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("not after the last"), "{}", text(&o));
    // A folder that is not a cache is never replaced.
    std::fs::write(out.join("keep.txt"), "mine").unwrap();
    let o = weft(&[
        "bake",
        "graphs/life.json",
        "--frames",
        "0:0",
        "--backend",
        "vm",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("is not a weft cache"), "{}", text(&o));
    assert!(out.join("keep.txt").exists());
    let _ = std::fs::remove_dir_all(&out);
}

/// `weft bake --threads 1` on cpu: a graph with float atomics (mpm88's
/// particle-to-grid scatter) bakes to the same bytes every time, equal to
/// the reference VM's serial order.
#[test]
fn bake_with_one_thread_repeats_float_atomics_exactly() {
    let out = tmp("bake_threads");
    let bake = |name: &str, backend: &str| {
        let cache = out.join(name);
        let o = weft(&[
            "bake",
            "graphs/mpm88.json",
            "--frames",
            "1:1",
            "--backend",
            backend,
            "--threads",
            "1",
            "--fields",
            "x,grid_m",
            "--out",
            cache.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", text(&o));
        let l = weft_runtime::snapshot::read(&weft_runtime::snapshot::folder(&cache, 1)).unwrap();
        l.snapshot.roots
    };
    let a = bake("a", "cpu");
    assert_eq!(a, bake("b", "cpu"), "two one-thread cpu bakes");
    assert_eq!(
        a,
        bake("vm", "vm"),
        "cpu with one thread adds in the VM's order"
    );
    let o = weft(&[
        "bake",
        "graphs/mpm88.json",
        "--frames",
        "0:0",
        "--threads",
        "0",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let _ = std::fs::remove_dir_all(&out);
}

/// The library setting (`library.json` in the config folder, which the app
/// edits under Edit > Asset library folders…) adds folders to the asset
/// library on the command line too; a broken setting is named in the
/// missing asset's error, never ignored silently.
#[test]
fn the_library_setting_adds_folders_on_the_command_line() {
    let tmp = std::env::temp_dir().join(format!("weft-libsetting-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let (config, studio, work) = (tmp.join("config"), tmp.join("studio"), tmp.join("work"));
    for d in [&config, &studio, &work] {
        std::fs::create_dir_all(d).unwrap();
    }
    // A studio asset: the shipped advect2d under another name.
    let mut a: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("assets/advect2d.v1.json")).unwrap(),
    )
    .unwrap();
    a["asset"]["name"] = "studio_advect".into();
    std::fs::write(studio.join("studio_advect.v1.json"), a.to_string()).unwrap();
    // Its test graph, moved to a folder with no assets/ above it and
    // pointed at the studio asset.
    let g = std::fs::read_to_string(root().join("assets/tests/advect2d.json"))
        .unwrap()
        .replace("\"advect2d\"", "\"studio_advect\"");
    assert!(g.contains("studio_advect"));
    let graph = work.join("g.json");
    std::fs::write(&graph, g).unwrap();
    let run = |setting: Option<&str>| {
        if let Some(s) = setting {
            std::fs::create_dir_all(config.join("weft")).unwrap();
            std::fs::write(config.join("weft/library.json"), s).unwrap();
        }
        Command::new(env!("CARGO_BIN_EXE_weft"))
            .args([
                "run",
                graph.to_str().unwrap(),
                "--frames",
                "2",
                "--no-frames",
                "--backend",
                "vm",
            ])
            .arg("--out")
            .arg(tmp.join("out"))
            .env("XDG_CONFIG_HOME", &config)
            .env_remove("WEFT_ASSET_PATH")
            .current_dir(&work)
            .output()
            .unwrap()
    };
    let o = run(None);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("asset 'studio_advect' version 1 is not in the library"),
        "{}",
        text(&o)
    );
    let o = run(Some(&format!(
        "{{\"folders\": [{:?}]}}",
        studio.to_str().unwrap()
    )));
    assert!(o.status.success(), "{}", text(&o));
    // A relative folder is relative to the config folder.
    std::fs::rename(&studio, config.join("weft/studio")).unwrap();
    let o = run(Some("{\"folders\": [\"studio\"]}"));
    assert!(o.status.success(), "{}", text(&o));
    let o = run(Some("{\"folders\": \"studio\"}"));
    assert!(!o.status.success());
    assert!(
        text(&o).contains("library.json is not a library setting"),
        "{}",
        text(&o)
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

/// A view inside a group is named by its path (`diffusion/inner_view`):
/// its PNG frames go into the group's folder under `--out`, as a grouped
/// field's `--dump` does, instead of failing the run after the frame ran.
#[test]
fn a_view_inside_a_group_writes_its_frames_into_the_groups_folder() {
    let dir = tmp("grouped_view");
    let mut g: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("graphs/heat_grouped.json")).unwrap(),
    )
    .unwrap();
    let nodes = g["nodes"].as_array_mut().unwrap();
    let outer = nodes.iter().find(|n| n["id"] == "view").unwrap()["params"].clone();
    let group = nodes.iter_mut().find(|n| n["id"] == "diffusion").unwrap();
    // The same picture settings as the top-level view of T: after `apply`
    // T holds T_next, so the two pictures are the same bytes.
    group["group"]["nodes"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"id": "inner_view", "kind": "image", "params": outer}));
    group["group"]["wires"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"from": "T_next.field", "to": "inner_view.field"}));
    let file = dir.join("gv.json");
    std::fs::write(&file, serde_json::to_string(&g).unwrap()).unwrap();
    let out = dir.join("out");
    let o = weft(&[
        "run",
        file.to_str().unwrap(),
        "--frames",
        "2",
        "--backend",
        "vm",
        "--out",
        out.to_str().unwrap(),
        "--dump",
        "diffusion/T_next",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(out.join("diffusion/T_next.npy").exists());
    for f in 1..=2 {
        let inner = std::fs::read(out.join(format!("diffusion/inner_view_{:04}.png", f)))
            .unwrap_or_else(|e| panic!("frame {}: {}", f, e));
        let top = std::fs::read(out.join(format!("view_{:04}.png", f))).unwrap();
        assert_eq!(inner, top, "frame {}: the inner view draws T_next = T", f);
    }
}

/// f32 values of OUT/FIELD.npy.
fn npy_f32(out: &Path, field: &str) -> Vec<f32> {
    let a = weft_ir::io::npy::read_npy(&out.join(format!("{}.npy", field))).unwrap();
    a.words.into_iter().map(f32::from_bits).collect()
}

#[test]
fn a_set_two_groups_down_goes_through_both_promotions() {
    let g = "tests/groups/promoted_three_levels.json";
    // P1 promotes gain (default 2) onto sA's s, which targets k.s.
    for (sets, s) in [
        (vec![], 2.0f32),
        (vec!["P1/sA/k.s=-1.5"], -1.5),
        (vec!["P1/sA.s=-1.5"], -1.5),
        (vec!["P1.gain=-1.5"], -1.5),
        (vec!["P1/sA/k.s=-1.5", "P1.gain=3"], -1.5),
    ] {
        let out = tmp("three_levels");
        let mut args = vec![
            "run",
            g,
            "--frames",
            "1",
            "--no-frames",
            "--dump",
            "x",
            "--out",
            out.to_str().unwrap(),
        ];
        for set in &sets {
            args.push("--set");
            args.push(set);
        }
        let o = weft(&args);
        assert!(o.status.success(), "{:?}: {}", sets, text(&o));
        assert_eq!(
            npy_f32(&out, "x"),
            vec![s, 2.0 * s, 3.0 * s, 4.0 * s],
            "{:?}",
            sets
        );
        std::fs::remove_dir_all(&out).unwrap();
    }
    // Through P1.gain, its range applies (min -4, max 4), naming it.
    let out = tmp("three_levels_bad");
    let o = weft(&[
        "run",
        g,
        "--frames",
        "1",
        "--no-frames",
        "--out",
        out.to_str().unwrap(),
        "--set",
        "P1/sA/k.s=9",
    ]);
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("'P1'") && text(&o).contains("gain") && text(&o).contains("outside"),
        "{}",
        text(&o)
    );
}

#[test]
fn set_replaces_a_frame_expression_with_a_number() {
    let d = tmp("set_expr");
    let g = d.join("g.json");
    std::fs::write(
        &g,
        r#"{"format": "weft-graph", "version": 1, "nodes": [
        {"id": "cells", "kind": "dense", "params": {"shape": [2]}},
        {"id": "x", "kind": "field", "params": {"type": "f32"}},
        {"id": "frame", "kind": "on_frame"},
        {"id": "drive", "kind": "kernel", "params": {"over": "x",
            "scalars": {"w": "= sin(frame*0.3)*2"},
            "code": "fn kernel(i: i32) { x[i] = x[i] + w; }"}}],
        "wires": [{"from": "cells.cells", "to": "x.layout"}, {"from": "x.field", "to": "drive.x"}],
        "exec": [{"from": "frame.then", "to": "drive"}]}"#,
    )
    .unwrap();
    let out = d.join("out");
    let o = weft(&[
        "run",
        g.to_str().unwrap(),
        "--frames",
        "3",
        "--no-frames",
        "--dump",
        "x",
        "--out",
        out.to_str().unwrap(),
        "--set",
        "drive.w=0.5",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    // Three frames of a constant 0.5 (the expression is gone).
    assert_eq!(npy_f32(&out, "x"), vec![1.5, 1.5]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn usage_errors_and_messages_name_what_is_wrong() {
    let d = tmp("usage_names");
    // bake --fields with an unknown name: a usage error (2), as run --dump.
    let out = d.join("bake");
    let o = weft(&[
        "bake",
        "graphs/heat.json",
        "--frames",
        "0:1",
        "--fields",
        "T,nosuch",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("'nosuch'"), "{}", text(&o));
    assert!(!out.join("cache.json").exists(), "nothing baked");
    // `weft nodes` lists group too.
    let o = weft(&["nodes"]);
    assert!(o.status.success());
    assert!(
        text(&o).lines().any(|l| l.starts_with("group (group)")),
        "{}",
        text(&o)
    );
    // A negative seed names "seed".
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("graphs/heat.json")).unwrap())
            .unwrap();
    v["seed"] = (-1).into();
    let g = d.join("seed.json");
    std::fs::write(&g, v.to_string()).unwrap();
    let o = weft(&["check", g.to_str().unwrap()]);
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("\"seed\""), "{}", text(&o));
    // A bypassed kernel whose code does not compile: check passes, warning
    // by name.
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("graphs/heat.json")).unwrap())
            .unwrap();
    for n in v["nodes"].as_array_mut().unwrap() {
        if n["id"] == "apply" {
            n["bypass"] = true.into();
            n["params"]["code"] =
                "fn kernel(i: i32, j: i32) { T[(i, j)] = T_next[(i, j)] + nosuch; }".into();
        }
    }
    let g = d.join("bypassed.json");
    std::fs::write(&g, v.to_string()).unwrap();
    let o = weft(&["check", g.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("warning: node 'apply' is bypassed") && text(&o).contains("nosuch"),
        "{}",
        text(&o)
    );
    std::fs::remove_dir_all(&d).unwrap();
}

/// `weft check` compiles what each backend compiles: a `#[block(64)]`
/// kernel that `weft run --backend wgpu` runs was refused because the
/// check handed the VM's IR (blocks made loops) to the shader validator
/// ("Expression [433] is invalid = Unable to cast").
#[test]
fn check_compiles_each_backends_own_ir() {
    let dir = tmp("check_block");
    let g = dir.join("block.json");
    let code = "#[block(64)]\nfn kernel(i: i32) {\n    let s = shared([0u32; 64]);\n    let t = thread_index();\n    let a = if t < 32 { xu[i + 1] } else { 0u32 };\n    barrier();\n    if t < 32 { s[t] = a; }\n    barrier();\n    out[i] = s[t % 32];\n}\n";
    let doc = format!(
        r#"{{"format": "weft-graph", "version": 1, "nodes": [
        {{"id": "cells", "kind": "dense", "params": {{"shape": [129]}}}},
        {{"id": "xu", "kind": "field", "params": {{"type": "u32", "init": 3}}}},
        {{"id": "out", "kind": "field", "params": {{"type": "u32"}}}},
        {{"id": "start", "kind": "on_start"}},
        {{"id": "k", "kind": "kernel", "params": {{"range": [128], "code": {}}}}}],
        "wires": [{{"from": "cells.cells", "to": "xu.layout"}}, {{"from": "cells.cells", "to": "out.layout"}},
                  {{"from": "xu.field", "to": "k.xu"}}, {{"from": "out.field", "to": "k.out"}}],
        "exec": [{{"from": "start.then", "to": "k"}}]}}"#,
        serde_json::to_string(code).unwrap()
    );
    std::fs::write(&g, doc).unwrap();
    let o = weft(&["check", g.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // And the graph does run (on the VM: the same kernel, blocks as loops).
    let o = weft(&["run", g.to_str().unwrap(), "--frames", "0"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn a_frame_driven_scalar_outside_its_range_fails_the_run() {
    let d = tmp("frame_range");
    let g = d.join("g.json");
    // w = 2·sin(0.3·frame): 0.59 on frame 1, 1.13 on frame 2 (max 1).
    std::fs::write(
        &g,
        r#"{"format": "weft-graph", "version": 1, "nodes": [
        {"id": "cells", "kind": "dense", "params": {"shape": [1]}},
        {"id": "x", "kind": "field", "params": {"type": "f32"}},
        {"id": "frame", "kind": "on_frame"},
        {"id": "drive", "kind": "kernel", "params": {"over": "x",
            "scalars": {"w": {"type": "f32", "default": "= sin(frame*0.3)*2", "min": -1, "max": 1}},
            "code": "fn kernel(i: i32) { x[i] = w; }"}}],
        "wires": [{"from": "cells.cells", "to": "x.layout"}, {"from": "x.field", "to": "drive.x"}],
        "exec": [{"from": "frame.then", "to": "drive"}]}"#,
    )
    .unwrap();
    let out = d.join("out");
    let run = |frames: &str| {
        weft(&[
            "run",
            g.to_str().unwrap(),
            "--frames",
            frames,
            "--no-frames",
            "--dump",
            "x",
            "--out",
            out.to_str().unwrap(),
        ])
    };
    let o = run("1");
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(npy_f32(&out, "x"), vec![((0.3f64).sin() * 2.0) as f32]);
    let o = run("3");
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("node 'drive'")
            && text(&o).contains("scalar 'w' at frame 2")
            && text(&o).contains("outside its range -1 to 1"),
        "{}",
        text(&o)
    );
    std::fs::remove_dir_all(&d).unwrap();
}

/// `weft gui GRAPH --screenshot FILE` finishes for every shipped example
/// (it never did for smoke3d, mpm3d, dem3d and mpm_quant: the window's
/// surface errors stopped the simulation, or a fault read-back raced the
/// window thread, and the shot waited for frames that never came), exits
/// 0 and writes a picture of the window; a file that is not a graph is
/// refused with a message and exit 1, its picture written all the same.
/// Runs on a virtual display (`xvfb-run`, which CI installs).
#[test]
fn every_examples_screenshot_finishes() {
    let have_xvfb = Command::new("xvfb-run").arg("--help").output().is_ok();
    if !have_xvfb {
        assert!(
            std::env::var_os("CI").is_none(),
            "xvfb-run is missing (apt-get install xvfb)"
        );
        eprintln!("skipped: no xvfb-run");
        return;
    }
    let dir = tmp("screenshots");
    let shoot = |graph: &Path, png: &Path| -> (Option<i32>, String, f64) {
        let t0 = std::time::Instant::now();
        let mut child = Command::new("xvfb-run")
            .args(["-a", "-s", "-screen 0 1600x1000x24"])
            .arg(env!("CARGO_BIN_EXE_weft"))
            .arg("gui")
            .arg(graph)
            .arg("--screenshot")
            .arg(png)
            .args(["--after-frames", "2"])
            .env("XDG_RUNTIME_DIR", std::env::temp_dir())
            .env("WEFT_CONFIG_DIR", dir.join("config"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("xvfb-run starts");
        // Two frames of the slowest example take ~13 s on lavapipe here.
        let deadline = std::time::Duration::from_secs(240);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s.code();
            }
            if t0.elapsed() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut err);
        }
        (status, err, t0.elapsed().as_secs_f64())
    };
    let mut bad = Vec::new();
    let mut graphs: Vec<PathBuf> = std::fs::read_dir(root().join("graphs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "json")
                && !p.to_string_lossy().ends_with(".expect.json")
        })
        .collect();
    graphs.sort();
    assert!(graphs.len() > 20, "{:?}", graphs);
    for g in &graphs {
        let name = g.file_stem().unwrap().to_string_lossy().to_string();
        let png = dir.join(format!("{}.png", name));
        let (status, err, s) = shoot(g, &png);
        let size = png::Decoder::new(std::io::BufReader::new(
            std::fs::File::open(&png)
                .unwrap_or_else(|e| panic!("{}: no picture: {} ({})", name, e, err)),
        ))
        .read_info()
        .map(|r| (r.info().width, r.info().height))
        .map_err(|e| e.to_string());
        eprintln!("{}: exit {:?} in {:.1} s, {:?}", name, status, s, size);
        if status != Some(0) || !size.as_ref().is_ok_and(|&(w, h)| w >= 800 && h >= 600) {
            bad.push(format!(
                "{}: exit {:?} after {:.0} s, picture {:?}: {}",
                name, status, s, size, err
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    // Not a graph: refused, with the reason and a failed exit.
    let expect = root().join("graphs/heat.expect.json");
    let (status, err, _) = shoot(&expect, &dir.join("expect.png"));
    assert_eq!(status, Some(1), "{}", err);
    assert!(
        err.contains("error: --screenshot: the graph does not run"),
        "{}",
        err
    );
}
