//! Helpers for Weft's integration tests: build small graphs in code, run
//! them on the reference backend, read fields back as numbers.

pub mod chain;
pub mod corpus;
pub mod view_reference;
pub mod volume_lit;

use serde_json::{json, Value};
use weft_ir::graph::{build_program, BuildOptions, GraphDoc, GraphErrors};
use weft_runtime::{RuntimeError, SimOptions, Simulation};

/// Repository root (the workspace).
pub fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// A hand-flattened twin (`tests/groups/*_flat_twin.json`): a plain graph
/// with the path ids the flattener gives nodes inside groups (`fit/opt`).
/// A graph file may not use such ids (`GraphDoc::parse` refuses `/`, which
/// is reserved for those paths), so the twin is read as the in-memory
/// flattened document it stands for, without that check.
pub fn flat_twin(rel: &str) -> GraphDoc {
    let text = std::fs::read_to_string(root().join(rel)).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {}", rel, e))
}

/// Sets parameter `key` of node `id` of a graph document.
pub fn set_param(g: &mut Value, id: &str, key: &str, v: Value) {
    let nodes = g["nodes"].as_array_mut().expect("nodes");
    let n = nodes
        .iter_mut()
        .find(|n| n["id"] == id)
        .unwrap_or_else(|| panic!("no node '{}'", id));
    n["params"][key] = v;
}

/// A field for `kernel_graph`: (name, type, shape, init).
pub struct F<'a>(pub &'a str, pub &'a str, pub &'a [u32], pub Value);

/// One kernel run once in `on_start` over `range`, with each field on its own dense node.
pub fn kernel_graph(fields: &[F], code: &str, range: &[u32], scalars: Value) -> Value {
    let mut nodes = vec![];
    let mut wires = vec![];
    for F(name, ty, shape, init) in fields {
        let layout = format!("{}_cells", name);
        nodes.push(json!({"id": layout, "kind": "dense", "params": {"shape": shape}}));
        nodes.push(json!({"id": name, "kind": "field", "params": {"type": ty, "init": init}}));
        wires.push(json!({"from": format!("{}.cells", layout), "to": format!("{}.layout", name)}));
        if code.contains(&format!("{}[", name)) {
            wires.push(json!({"from": format!("{}.field", name), "to": format!("k.{}", name)}));
        }
    }
    nodes.push(json!({"id": "k", "kind": "kernel", "params": {"code": code, "range": range, "scalars": scalars}}));
    nodes.push(json!({"id": "start", "kind": "on_start"}));
    json!({"format": "weft-graph", "version": 1, "nodes": nodes, "wires": wires, "exec": [{"from": "start.then", "to": "k"}]})
}

pub fn build(doc: &Value) -> Result<weft_ir::ir::Program, GraphErrors> {
    let d = GraphDoc::from_value(doc.clone())?;
    build_program(
        &d,
        &BuildOptions {
            base_dir: root().join("graphs"),
        },
    )
}

/// The graph built and taken through the whole pass pipeline (default
/// options, the IR validator after every pass), as a backend gets it.
pub fn compiled(doc: &Value) -> weft_ir::ir::Program {
    let mut p = build(doc).unwrap_or_else(|e| panic!("{}", e));
    weft_ir::passes::run_pipeline(
        &mut p,
        &weft_ir::passes::PassOptions {
            validate: true,
            ..Default::default()
        },
        None,
    )
    .unwrap_or_else(|e| panic!("{}", e));
    p
}

/// The backend `run` uses: the reference interpreter, or the one named by
/// the environment variable `WEFT_TEST_BACKEND` (`cpu`), so that whole test
/// files can be replayed on another CPU backend
/// (`WEFT_TEST_BACKEND=cpu cargo test -p weft-tests --test language`).
pub fn backend_under_test() -> weft_runtime::Backend {
    match std::env::var("WEFT_TEST_BACKEND").as_deref() {
        Ok("cpu" | "jit") => weft_runtime::Backend::Jit,
        _ => weft_runtime::Backend::Vm,
    }
}

/// (npy paths are relative to graphs/.)
/// Builds, compiles and runs `on_start` plus `frames` frames.
pub fn run(doc: &Value, frames: u32) -> Result<Simulation, RuntimeError> {
    let p = build(doc)?;
    let mut sim = Simulation::new(
        p,
        &SimOptions {
            passes: weft_ir::passes::PassOptions {
                validate: true,
                ..Default::default()
            },
            backend: backend_under_test(),
            ..Default::default()
        },
    )?;
    sim.start()?;
    for _ in 0..frames {
        sim.step_frame()?;
    }
    Ok(sim)
}

/// Runs a single-kernel graph and returns the simulation (panics with the error text on failure).
pub fn run_kernel(fields: &[F], code: &str, range: &[u32]) -> Simulation {
    let g = kernel_graph(fields, code, range, json!({}));
    run(&g, 0).unwrap_or_else(|e| panic!("kernel failed: {}\ncode:\n{}", e, code))
}

pub fn words(sim: &Simulation, name: &str) -> Vec<u32> {
    sim.read_field(
        sim.field(name)
            .unwrap_or_else(|| panic!("no field {}", name)),
    )
    .unwrap_or_else(|e| panic!("reading {}: {}", name, e))
}
pub fn f32s(sim: &Simulation, name: &str) -> Vec<f32> {
    words(sim, name).into_iter().map(f32::from_bits).collect()
}
pub fn i32s(sim: &Simulation, name: &str) -> Vec<i32> {
    words(sim, name).into_iter().map(|w| w as i32).collect()
}

/// Loads an example graph from graphs/.
pub fn example(name: &str) -> Value {
    let text = std::fs::read_to_string(root().join("graphs").join(format!("{}.json", name)))
        .expect("example exists");
    serde_json::from_str(&text).expect("example is JSON")
}

/// Relative closeness for floats.
pub fn close(a: f32, b: f32, rel: f32, abs: f32) -> bool {
    (a - b).abs() <= abs + rel * a.abs().max(b.abs()) || (a.is_nan() && b.is_nan())
}

/// Whether a wgpu adapter can be opened. With `CI=true` a missing adapter
/// fails the test (CI must run the wgpu paths); locally the wgpu part is
/// skipped with a visible message.
pub fn wgpu_available() -> bool {
    match weft_runtime::wgpu_backend::WgpuContext::new(
        weft_runtime::wgpu_backend::AdapterChoice::Any,
    ) {
        Ok(_) => true,
        Err(e) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("CI=true but no wgpu adapter: {}", e)
        }
        Err(e) => {
            eprintln!("skipping the wgpu part: no wgpu adapter ({})", e);
            false
        }
    }
}

/// The interpreter, the compiled CPU backend and, when an adapter opens
/// (always under `CI=true`), wgpu: the backends a cross-backend test compares.
pub fn local_backends() -> Vec<weft_runtime::Backend> {
    let mut v = vec![weft_runtime::Backend::Vm, weft_runtime::Backend::Jit];
    if wgpu_available() {
        v.push(weft_runtime::Backend::Wgpu);
    }
    v
}
