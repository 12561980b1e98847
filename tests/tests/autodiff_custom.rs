//! Custom gradients: a kernel's `backward` code replaces its generated
//! adjoint in a reverse tape. References: the generated adjoint where the
//! two must agree (a periodic stencil whose backward gathers instead of
//! scattering), hand-computed gradients (a straight-through estimator the
//! generated adjoint would make zero), and vm / cpu / wgpu agreeing. Also
//! the errors for bad backward code, each naming the node, param and line.

use serde_json::{json, Value};
use weft_ir::passes::PassOptions;
use weft_runtime::{Backend, RuntimeError, SimOptions, Simulation};
use weft_tests::*;

const N: u32 = 8;

/// x (N cells, grad) → kernel `k` (code, optional backward) → y (N, grad)
/// → kernel `sq`: loss += y[i]² · (i + 1), all in one tape.
fn graph(code: &str, backward: Option<&str>) -> Value {
    let mut k = json!({"code": code, "range": [N]});
    if let Some(b) = backward {
        k["backward"] = json!(b);
    }
    let sq = "fn kernel(i: i32) {\n    loss[0] += y[i] * y[i] * (i + 1) as f32;\n}\n";
    json!({"format": "weft-graph", "version": 1,
        "nodes": [
            {"id": "one", "kind": "dense", "params": {"shape": [1]}},
            {"id": "loss", "kind": "field", "params": {"type": "f32", "grad": true}},
            {"id": "cells", "kind": "dense", "params": {"shape": [N]}},
            {"id": "x", "kind": "field", "params": {"type": "f32", "grad": true}},
            {"id": "y", "kind": "field", "params": {"type": "f32", "grad": true}},
            {"id": "start", "kind": "on_start"},
            {"id": "tp", "kind": "tape", "params": {"loss": "loss"}},
            {"id": "k", "kind": "kernel", "params": k},
            {"id": "sq", "kind": "kernel", "params": {"code": sq, "range": [N]}}],
        "wires": [
            {"from": "one", "to": "loss"}, {"from": "cells", "to": "x"}, {"from": "cells", "to": "y"},
            {"from": "x.field", "to": "k.x"}, {"from": "y.field", "to": "k.y"},
            {"from": "y.field", "to": "sq.y"}, {"from": "loss.field", "to": "sq.loss"}],
        "exec": [{"from": "start", "to": "tp"}, {"from": "tp.body", "to": "k"}, {"from": "k.then", "to": "sq"}]})
}

fn open(doc: &Value, backend: Backend) -> Result<Simulation, RuntimeError> {
    Simulation::new(
        build(doc)?,
        &SimOptions {
            backend,
            threads: Some(1),
            passes: PassOptions {
                validate: true,
                ..Default::default()
            },
            ..Default::default()
        },
    )
}

fn x0() -> Vec<f32> {
    (0..N).map(|i| ((i * 7 % 5) as f32 - 2.0) * 0.37).collect()
}

/// (y, x.grad) after the tape.
fn run(doc: &Value, b: Backend) -> (Vec<f32>, Vec<f32>) {
    let mut sim = open(doc, b).unwrap_or_else(|e| panic!("{}", e));
    let x: Vec<u32> = x0().iter().map(|v| v.to_bits()).collect();
    sim.write_field(sim.field("x").unwrap(), &x).unwrap();
    sim.start().unwrap_or_else(|e| panic!("{}", e));
    (f32s(&sim, "y"), f32s(&sim, "x.grad"))
}

fn backends() -> Vec<Backend> {
    let mut v = vec![Backend::Vm, Backend::Jit];
    if wgpu_available() {
        v.push(Backend::Wgpu);
    }
    v
}

/// An asymmetric periodic stencil. Its generated adjoint scatters three
/// atomic adds per thread into `x.grad`; the custom backward is the
/// transposed stencil, gathering from `y.grad` into one element per thread.
const STENCIL: &str = "fn kernel(i: i32) {\n    y[i] = 0.2 * x[(i + 7) % 8] + 0.5 * x[i] + 0.3 * x[(i + 1) % 8];\n}\n";
const GATHER: &str = "fn kernel(i: i32) {\n    x.grad[i] += 0.2 * y.grad[(i + 1) % 8] + 0.5 * y.grad[i] + 0.3 * y.grad[(i + 7) % 8];\n}\n";

#[test]
fn gather_backward_matches_the_generated_adjoint() {
    let (y_ref, g_gen) = run(&graph(STENCIL, None), Backend::Vm);
    // By hand: dL/dy_i = 2 y_i (i + 1); dL/dx_j = 0.2 gy_{j+1} + 0.5 gy_j + 0.3 gy_{j-1}.
    let gy: Vec<f64> = (0..N as usize)
        .map(|i| 2.0 * y_ref[i] as f64 * (i + 1) as f64)
        .collect();
    let n = N as usize;
    for j in 0..n {
        let want = 0.2 * gy[(j + 1) % n] + 0.5 * gy[j] + 0.3 * gy[(j + n - 1) % n];
        assert!(
            close(g_gen[j], want as f32, 1e-5, 1e-6),
            "generated {} vs hand {}",
            g_gen[j],
            want
        );
    }
    for b in backends() {
        let (y, g) = run(&graph(STENCIL, Some(GATHER)), b);
        assert_eq!(y.len(), y_ref.len());
        for (a, e) in y.iter().zip(&y_ref) {
            assert!(close(*a, *e, 1e-6, 1e-7), "{}: y {} vs {}", b, a, e);
        }
        for (a, e) in g.iter().zip(&g_gen) {
            assert!(
                close(*a, *e, 1e-5, 1e-6),
                "{}: custom {:?} vs generated {:?}",
                b,
                g,
                g_gen
            );
        }
    }
    // The backward is recorded for `k` (the straight-through test shows
    // that it is what a tape runs).
    let p = open(&graph(STENCIL, Some(GATHER)), Backend::Vm)
        .unwrap()
        .program;
    let k = p.kernel_by_name("k").unwrap();
    assert!(p.custom_backward_of(k).is_some());
}

/// A straight-through estimator: the kernel quantizes (derivative zero
/// almost everywhere), its backward passes the gradient through unchanged.
#[test]
fn straight_through_backward_gives_the_documented_gradient() {
    let code = "fn kernel(i: i32) {\n    y[i] = round(x[i] * 4.0) / 4.0;\n}\n";
    let through = "fn kernel(i: i32) {\n    x.grad[i] += y.grad[i];\n}\n";
    let (_, g_gen) = run(&graph(code, None), Backend::Vm);
    assert!(g_gen.iter().all(|&g| g == 0.0), "generated: {:?}", g_gen);
    for b in backends() {
        let (y, g) = run(&graph(code, Some(through)), b);
        for i in 0..N as usize {
            let want = 2.0 * y[i] * (i + 1) as f32;
            assert!(
                close(g[i], want, 1e-6, 1e-7),
                "{}: x.grad[{}] {} vs {}",
                b,
                i,
                g[i],
                want
            );
        }
    }
    // A clipped gradient, with a helper function in the backward code.
    let clipped = "fn clip(g: f32) -> f32 {\n    clamp(g, -1.0, 1.0)\n}\n\nfn kernel(i: i32) {\n    x.grad[i] += clip(y.grad[i]);\n}\n";
    for b in backends() {
        let (y, g) = run(&graph(code, Some(clipped)), b);
        for i in 0..N as usize {
            let want = (2.0 * y[i] * (i + 1) as f32).clamp(-1.0, 1.0);
            assert!(
                close(g[i], want, 1e-6, 1e-7),
                "{}: x.grad[{}] {} vs {}",
                b,
                i,
                g[i],
                want
            );
        }
    }
}

#[test]
fn bad_backward_code_is_an_error_naming_node_param_and_line() {
    let cases: &[(&str, &str, &str)] = &[
        (
            STENCIL,
            "fn kernel(i: i32) {\n    x.grad[i] += y.grad[i] * true;\n}\n",
            "node 'k', param 'backward': line 2:",
        ),
        (
            STENCIL,
            "fn kernel(i: i32) {\n    x[i] = y.grad[i];\n}\n",
            "line 2:5: a backward may only write gradients (`x.grad[...]`), not field 'x'",
        ),
        (
            STENCIL,
            "fn kernel(i: i32) {\n    x.grad[i] += y[i];\n}\n",
            "reads field 'y', which the kernel's code does not read",
        ),
        (
            STENCIL,
            "fn kernel(i: i32, j: i32) {\n    x.grad[i] += y.grad[i];\n}\n",
            "node 'k', param 'backward': line",
        ),
    ];
    for (code, backward, want) in cases {
        match open(&graph(code, Some(backward)), Backend::Vm) {
            Ok(_) => panic!("expected an error for {}", backward),
            Err(e) => assert!(e.to_string().contains(want), "{}:\n{}", backward, e),
        }
    }
    // The access rule still applies to the kernel itself.
    let in_place = "fn kernel(i: i32) {\n    y[i] = x[i];\n    x[i] = x[i] * 2.0;\n}\n";
    let e = open(
        &graph(
            in_place,
            Some("fn kernel(i: i32) {\n    x.grad[i] += y.grad[i];\n}\n"),
        ),
        Backend::Vm,
    )
    .err()
    .expect("an access-rule error")
    .to_string();
    assert!(
        e.contains("'k'") && e.contains("global data access rule"),
        "{}",
        e
    );
}
