//! Forward-mode automatic differentiation (`tape` with `"mode": "forward"`,
//! `passes/autodiff/forward.rs`). The reference is reverse mode, itself
//! checked against finite differences in `autodiff.rs`: for a direction d,
//! the forward tape's d loss · d (the sum of `loss.grad`) must equal
//! dot(gradient, d) from a reverse tape — on built-ins, branches, loops with
//! carried locals, `while`, helpers, atomics, matrices and the mass-spring
//! rollout — and vm, cpu and wgpu must agree. Also: the documented errors.

use serde_json::{json, Value};
use weft_ir::passes::PassOptions;
use weft_runtime::{Backend, RuntimeError, SimOptions, Simulation};
use weft_tests::*;

/// An input field: (name, type, element count, values per component).
struct In<'a>(&'a str, &'a str, u32, Vec<f32>);

/// One kernel `k` over `range` inside a tape in `mode` ("forward",
/// "reverse", or "none": no tape); forward tapes are seeded at every input.
/// Every input and `loss` has a gradient.
fn graph(inputs: &[In], code: &str, range: u32, mode: &str) -> Value {
    let mut nodes = vec![
        json!({"id": "one", "kind": "dense", "params": {"shape": [1]}}),
        json!({"id": "loss", "kind": "field", "params": {"type": "f32", "grad": true}}),
        json!({"id": "start", "kind": "on_start"}),
        json!({"id": "k", "kind": "kernel", "params": {"code": code, "range": [range]}}),
    ];
    let mut wires = vec![
        json!({"from": "one", "to": "loss"}),
        json!({"from": "loss.field", "to": "k.loss"}),
    ];
    for In(name, ty, n, _) in inputs {
        let l = format!("{}_cells", name);
        nodes.push(json!({"id": l, "kind": "dense", "params": {"shape": [n]}}));
        nodes.push(json!({"id": name, "kind": "field", "params": {"type": ty, "grad": true}}));
        wires.push(json!({"from": l, "to": name}));
        wires.push(json!({"from": format!("{}.field", name), "to": format!("k.{}", name)}));
    }
    let mut tape = json!({"loss": "loss"});
    if mode == "forward" {
        let wrt: Vec<&str> = inputs.iter().map(|i| i.0).collect();
        tape = json!({"loss": "loss", "mode": "forward", "wrt": wrt.join(",")});
    }
    let exec = if mode == "none" {
        vec![json!({"from": "start", "to": "k"})]
    } else {
        nodes.push(json!({"id": "tp", "kind": "tape", "params": tape}));
        vec![
            json!({"from": "start", "to": "tp"}),
            json!({"from": "tp.body", "to": "k"}),
        ]
    };
    json!({"format": "weft-graph", "version": 1, "nodes": nodes, "wires": wires, "exec": exec})
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

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// A reproducible direction in [-1, 1) per component.
fn direction(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(747796405).wrapping_add(2891336453);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

/// (loss, d loss · dirs) by forward mode.
fn jvp(inputs: &[In], dirs: &[Vec<f32>], code: &str, range: u32, b: Backend) -> (f64, f64) {
    let mut sim =
        open(&graph(inputs, code, range, "forward"), b).unwrap_or_else(|e| panic!("{}", e));
    for (In(name, ..), d) in inputs.iter().zip(dirs) {
        let f = sim.field(name).unwrap();
        sim.write_field(f, &bits(&inputs.iter().find(|i| i.0 == *name).unwrap().3))
            .unwrap();
        let g = sim.field(&format!("{}.grad", name)).unwrap();
        sim.write_field(g, &bits(d)).unwrap();
    }
    sim.start().unwrap_or_else(|e| panic!("{}", e));
    let loss = f32s(&sim, "loss")[0] as f64;
    let t: f64 = f32s(&sim, "loss.grad").iter().map(|&x| x as f64).sum();
    (loss, t)
}

/// (loss, dot(gradient, dirs)) by reverse mode.
fn vjp_dot(inputs: &[In], dirs: &[Vec<f32>], code: &str, range: u32, b: Backend) -> (f64, f64) {
    let mut sim =
        open(&graph(inputs, code, range, "reverse"), b).unwrap_or_else(|e| panic!("{}", e));
    for In(name, _, _, v) in inputs {
        let f = sim.field(name).unwrap();
        sim.write_field(f, &bits(v)).unwrap();
    }
    sim.start().unwrap_or_else(|e| panic!("{}", e));
    let loss = f32s(&sim, "loss")[0] as f64;
    let mut dot = 0.0;
    for (In(name, ..), d) in inputs.iter().zip(dirs) {
        let g = f32s(&sim, &format!("{}.grad", name));
        dot += g
            .iter()
            .zip(d)
            .map(|(a, b)| *a as f64 * *b as f64)
            .sum::<f64>();
    }
    (loss, dot)
}

fn agree(what: &str, fwd: f64, rev: f64) {
    assert!(
        (fwd - rev).abs() <= 1e-4 * fwd.abs().max(rev.abs()) + 1e-5,
        "{}: forward {} vs reverse {}",
        what,
        fwd,
        rev
    );
}

fn x3() -> In<'static> {
    In("x", "f32", 3, vec![0.3, 0.8, -0.6])
}

fn check(inputs: &[In], code: &str, range: u32) {
    let dirs: Vec<Vec<f32>> = inputs
        .iter()
        .enumerate()
        .map(|(n, i)| direction(i.3.len(), n as u32 + 7))
        .collect();
    let (lf, f) = jvp(inputs, &dirs, code, range, Backend::Vm);
    let (lr, r) = vjp_dot(inputs, &dirs, code, range, Backend::Vm);
    assert!(
        close(lf as f32, lr as f32, 1e-6, 1e-7),
        "{}: loss {} vs {}",
        code,
        lf,
        lr
    );
    assert!(r.abs() > 1e-6, "{}: the reference is zero", code);
    agree(code, f, r);
}

fn kernel(body: &str) -> String {
    format!("fn kernel(i: i32) {{\n    {}\n}}\n", body)
}

#[test]
fn forward_matches_reverse_on_builtins() {
    let pos = || In("x", "f32", 3, vec![0.3, 0.8, 0.45]);
    let bodies = [
        "loss[0] += abs(x[i] - 0.5) + min(x[i], 0.5) + max(x[i] * 2.0, 0.7);",
        "loss[0] += clamp(x[i] * 3.0, 0.5, 2.0) + saturate(x[i] * 2.0 - 0.3) + fract(x[i] * 3.0);",
        "loss[0] += pow(x[i] + 0.2, 1.7) + pow(1.5, x[i]) + exp(x[i]) + exp2(x[i]);",
        "loss[0] += log(x[i] + 1.0) + log2(x[i] + 1.0) + sqrt(x[i] + 0.1) + rsqrt(x[i] + 0.1);",
        "loss[0] += sin(x[i]) + cos(x[i]) + tan(x[i]) + sinh(x[i]) + cosh(x[i]) + tanh(x[i]);",
        "loss[0] += asin(x[i] * 0.9) + acos(x[i] * 0.9) + atan(x[i]) + asinh(x[i]) + acosh(x[i] + 1.5) + atanh(x[i] * 0.9);",
        "loss[0] += atan2(x[i], 0.7) + atan2(0.4, x[i]) + lerp(x[i], x[i] * x[i], x[i]) + smoothstep(0.1, x[i] + 0.5, 0.4) + fma(x[i], x[i], 0.5);",
        "loss[0] += floor(x[i] * 3.0) * x[i] + step(0.5, x[i]) + sign(x[i]) * x[i] + (x[i] % 0.25) + x[i] / (x[i] + 1.0);",
    ];
    for body in bodies {
        check(&[pos()], &kernel(body), 3);
    }
}

#[test]
fn forward_matches_reverse_on_vectors_and_matrices() {
    let u = || In("u", "vec3", 2, vec![0.5, 1.0, -0.3, 0.2, 0.9, -1.2]);
    let m = || {
        In(
            "m",
            "mat2",
            2,
            vec![1.2, 0.3, -0.4, 0.9, 0.7, 0.1, 0.2, 1.1],
        )
    };
    let bodies = [
        "let v = u[i];\n    loss[0] += length(v) + distance(v, vec3(0.1, 0.2, 0.3)) + dot(normalize(v), vec3(1.0, 2.0, 3.0));",
        "let v = u[i];\n    let c = cross(v, vec3(0.3, -0.2, 0.5)) + reflect(v, normalize(vec3(1.0, 1.0, 0.0)));\n    loss[0] += c.x * 2.0 + c.y * c.z;",
        "let a = m[i];\n    let b = inverse(a) * transpose(a);\n    loss[0] += determinant(a) * 0.5 + b[0].x + b[1].y * 2.0 + (a * vec2(1.0, 2.0)).y;",
        "let v = u[i];\n    let o = outer(v.xy, v.yz);\n    let w = vec2(0.5, 0.25) * o;\n    loss[0] += w.x + w.y * o[1].x;",
    ];
    check(&[u()], &kernel(bodies[0]), 2);
    check(&[u()], &kernel(bodies[1]), 2);
    check(&[m()], &kernel(bodies[2]), 2);
    check(&[u()], &kernel(bodies[3]), 2);
}

#[test]
fn forward_matches_reverse_on_control_flow() {
    let bodies = [
        // branches
        "let mut s = x[i];\n    if s > 0.5 { s = s * s; } else { s = sin(s) + 1.0; }\n    loss[0] += select(s > 0.3, s * 2.0, s);",
        // a range loop carrying a local, nested in a dynamic loop
        "let mut s = x[i];\n    for a in 0..(i + 2) {\n        for b in 0..(a + 1) { s = s * 0.9 + x[i] * 0.1; }\n    }\n    loss[0] += s * s;",
        // a while loop with a carried local and a data-dependent trip count
        "let mut s = abs(x[i]) + 0.2;\n    while s < 3.0 { s = s * 1.5 + x[i] * 0.1; }\n    loss[0] += s * s;",
        // break, continue and an early return
        "let mut s = 0.0;\n    for k in 0..10 {\n        if k == 1 { continue; }\n        s += x[i] * k as f32;\n        if s > 2.0 { break; }\n    }\n    if x[i] < -0.5 { return; }\n    loss[0] += s * x[i];",
        // reassigned vector components
        "let mut v = vec3(x[i], 2.0, 1.0);\n    v.x = v.x * v.y;\n    v.y = sin(v.x) + v.z;\n    v.x = v.x * v.x;\n    v.z = v.x * v.y;\n    loss[0] += v.x + v.y * 2.0 + v.z;",
    ];
    for body in bodies {
        check(&[x3()], &kernel(body), 3);
    }
    // a helper function
    let code = "fn f(a: f32, b: f32) -> f32 {\n    let mut s = a;\n    for k in 0..3 { s = s * b + 0.1; }\n    s\n}\n\nfn kernel(i: i32) {\n    loss[0] += f(x[i], x[(i + 1) % 3]) + f(0.5, x[i]);\n}\n";
    check(&[x3()], code, 3);
}

/// Reads of other elements, in-place field updates and several kernels
/// with a repeat: forward mode needs no access rule, so a graph reverse
/// mode refuses (state updated in place) still has exact tangents; the
/// reference is a finite difference along the direction.
#[test]
fn forward_mode_rolls_out_in_place_state() {
    let inputs = [In("x", "f32", 4, vec![0.3, 0.8, -0.6, 0.1])];
    let step = "fn kernel(i: i32) {\n    x[i] = x[i] + 0.1 * sin(x[i]) * x[i];\n}\n";
    let sum = "fn kernel(i: i32) {\n    loss[0] += x[i] * x[i];\n}\n";
    let doc = |mode: &str, x: &[f32], d: Option<&[f32]>, b: Backend| -> (f64, f64) {
        let mut nodes = vec![
            json!({"id": "one", "kind": "dense", "params": {"shape": [1]}}),
            json!({"id": "loss", "kind": "field", "params": {"type": "f32", "grad": true}}),
            json!({"id": "cells", "kind": "dense", "params": {"shape": [4]}}),
            json!({"id": "x", "kind": "field", "params": {"type": "f32", "grad": true}}),
            json!({"id": "start", "kind": "on_start"}),
            json!({"id": "steps", "kind": "repeat", "params": {"count": 5}}),
            json!({"id": "step", "kind": "kernel", "params": {"code": step, "range": [4]}}),
            json!({"id": "sum", "kind": "kernel", "params": {"code": sum, "range": [4]}}),
        ];
        let mut exec = vec![
            json!({"from": "steps.body", "to": "step"}),
            json!({"from": "steps.then", "to": "sum"}),
        ];
        if mode == "forward" {
            nodes.push(json!({"id": "tp", "kind": "tape", "params": {"loss": "loss", "mode": "forward", "wrt": "x"}}));
            exec.push(json!({"from": "start", "to": "tp"}));
            exec.push(json!({"from": "tp.body", "to": "steps"}));
        } else {
            exec.push(json!({"from": "start", "to": "steps"}));
        }
        let wires = vec![
            json!({"from": "one", "to": "loss"}),
            json!({"from": "cells", "to": "x"}),
            json!({"from": "x.field", "to": "step.x"}),
            json!({"from": "x.field", "to": "sum.x"}),
            json!({"from": "loss.field", "to": "sum.loss"}),
        ];
        let g = json!({"format": "weft-graph", "version": 1, "nodes": nodes, "wires": wires, "exec": exec});
        let mut sim = open(&g, b).unwrap_or_else(|e| panic!("{}", e));
        sim.write_field(sim.field("x").unwrap(), &bits(x)).unwrap();
        if let Some(d) = d {
            sim.write_field(sim.field("x.grad").unwrap(), &bits(d))
                .unwrap();
        }
        sim.start().unwrap();
        let t = f32s(&sim, "loss.grad").iter().map(|&v| v as f64).sum();
        (f32s(&sim, "loss")[0] as f64, t)
    };
    let x = &inputs[0].3;
    let d = direction(4, 3);
    let (_, t) = doc("forward", x, Some(&d), Backend::Vm);
    let h = 1e-3f32;
    let moved = |s: f32| -> Vec<f32> { x.iter().zip(&d).map(|(a, b)| a + s * b).collect() };
    let lp = doc("plain", &moved(h), None, Backend::Vm).0;
    let lm = doc("plain", &moved(-h), None, Backend::Vm).0;
    let fd = (lp - lm) / (2.0 * h as f64);
    assert!(
        (t - fd).abs() < 1e-2 * fd.abs() + 1e-4,
        "forward {} vs finite difference {}",
        t,
        fd
    );
    let mut others = vec![Backend::Jit];
    if wgpu_available() {
        others.push(Backend::Wgpu);
    }
    for b in others {
        let (_, tb) = doc("forward", x, Some(&d), b);
        assert!(
            close(tb as f32, t as f32, 1e-5, 1e-7),
            "{}: {} vs vm {}",
            b,
            tb,
            t
        );
    }
}

#[test]
fn backends_agree_on_tangents() {
    let inputs = [
        In("x", "f32", 5, vec![0.3, 0.8, -0.6, 1.4, 0.05]),
        In(
            "u",
            "vec2",
            5,
            vec![0.5, 1.0, -0.3, 0.2, 0.9, -1.2, 0.4, 0.4, 2.0, 0.1],
        ),
    ];
    let code = "fn kernel(i: i32) {\n    let mut p = u[i];\n    for k in 0..3 {\n        if p.x > 0.0 { p = p * x[i] + vec2(sin(p.y), 0.1); } else { p.y = p.y * p.x; }\n    }\n    let mut s = abs(x[i]) + 0.2;\n    while s < 3.0 { s = s * 1.5 + p.x * 0.01; }\n    loss[0] += length(p) + atan2(p.y, 1.5) * x[(i + 1) % 5] + s;\n}\n";
    let dirs = vec![direction(5, 1), direction(10, 2)];
    let (_, vm) = jvp(&inputs, &dirs, code, 5, Backend::Vm);
    let (_, rev) = vjp_dot(&inputs, &dirs, code, 5, Backend::Vm);
    agree("vm forward vs reverse", vm, rev);
    let mut others = vec![Backend::Jit];
    if wgpu_available() {
        others.push(Backend::Wgpu);
    }
    for b in others {
        let (_, t) = jvp(&inputs, &dirs, code, 5, b);
        assert!(
            close(t as f32, vm as f32, 1e-4, 1e-6),
            "{}: {} vs vm {}",
            b,
            t,
            vm
        );
    }
}

/// The mass-spring rollout (512 steps, 1000 masses) along a random
/// direction of v0: forward mode and dot(reverse gradient, direction).
#[test]
fn mass_spring_forward_matches_reverse() {
    let doc = example("mass_spring_ad");
    let d = direction(2000, 11);
    let sim = |forward: bool, b: Backend| {
        let mut program = build(&doc).unwrap();
        if forward {
            let v0 = program.field_by_name("v0").unwrap();
            fn set(steps: &mut [weft_ir::ir::Step], v0: weft_ir::ir::FieldId) {
                for s in steps {
                    if let weft_ir::ir::Step::Tape { mode, .. } = s {
                        *mode = weft_ir::ir::TapeMode::Forward { seeded: vec![v0] };
                    }
                }
            }
            set(&mut program.schedule.on_start, v0);
        }
        let mut sim = Simulation::new(
            program,
            &SimOptions {
                backend: b,
                threads: Some(1),
                ..Default::default()
            },
        )
        .unwrap_or_else(|e| panic!("{}", e));
        if forward {
            sim.write_field(sim.field("v0.grad").unwrap(), &bits(&d))
                .unwrap();
        }
        sim.start().unwrap_or_else(|e| panic!("{}", e));
        sim
    };
    let rev = sim(false, Backend::Jit);
    let g = f32s(&rev, "v0.grad");
    let dot: f64 = g.iter().zip(&d).map(|(a, b)| *a as f64 * *b as f64).sum();
    let mut backends = vec![Backend::Jit];
    if wgpu_available() {
        backends.push(Backend::Wgpu);
    }
    for b in backends {
        let fwd = sim(true, b);
        let loss = f32s(&fwd, "loss")[0] as f64;
        assert!((loss - 0.389684).abs() < 2e-6, "{}: loss {}", b, loss);
        let t: f64 = f32s(&fwd, "loss.grad").iter().map(|&x| x as f64).sum();
        assert!(
            (t - dot).abs() < 1e-3 * dot.abs() + 1e-7,
            "{}: forward {} vs reverse {}",
            b,
            t,
            dot
        );
    }
}

fn build_error(doc: &Value) -> String {
    match open(doc, Backend::Vm) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn forward_mode_errors_name_the_node() {
    let set = |doc: &mut Value, key: &str, v: Value| {
        for n in doc["nodes"].as_array_mut().unwrap() {
            if n["id"] == "tp" {
                n["params"][key] = v.clone();
            }
        }
    };
    let base = || graph(&[x3()], &kernel("loss[0] += x[i];"), 3, "forward");
    let mut doc = base();
    set(&mut doc, "wrt", json!("nope"));
    let e = build_error(&doc);
    assert!(
        e.contains("tp") && e.contains("'nope' is not a field node"),
        "{}",
        e
    );
    let mut doc = graph(&[x3()], &kernel("loss[0] += x[i];"), 3, "reverse");
    set(&mut doc, "wrt", json!("x"));
    let e = build_error(&doc);
    assert!(e.contains("tp") && e.contains("only applies"), "{}", e);
    let e = build_error(&graph(
        &[x3()],
        &kernel("loss[0] += x.grad[i];"),
        3,
        "forward",
    ));
    assert!(
        e.contains("'k'") && e.contains("code 2:") && e.contains("hold tangents"),
        "{}",
        e
    );
    let e = build_error(&graph(
        &[x3()],
        &kernel("atomic_max(loss[0], x[i]);"),
        3,
        "forward",
    ));
    assert!(e.contains("'k'") && e.contains("atomic_max"), "{}", e);
}

/// The forward-mode example of docs/graph-format.md gives the values the
/// text states (loss 9, d loss · d = 18).
#[test]
fn documented_forward_example_gives_its_values() {
    let text = std::fs::read_to_string(root().join("docs/graph-format.md")).unwrap();
    let start = text
        .find("```json\n{\n  \"format\": \"weft-graph\",\n  \"version\": 1,\n  \"nodes\": [\n    { \"id\": \"cells\", \"kind\": \"dense\", \"params\": { \"shape\": [4] } },\n    { \"id\": \"x\"")
        .expect("the forward-mode example");
    let body = &text[start + 8..];
    let doc: Value = serde_json::from_str(&body[..body.find("```").unwrap()]).unwrap();
    assert_eq!(doc["nodes"][6]["params"]["mode"], "forward");
    for b in [Backend::Vm, Backend::Jit] {
        let mut sim = open(&doc, b).unwrap_or_else(|e| panic!("{}", e));
        sim.start().unwrap();
        assert_eq!(f32s(&sim, "loss"), vec![9.0]);
        assert_eq!(f32s(&sim, "loss.grad"), vec![18.0]);
        assert_eq!(f32s(&sim, "x.grad"), vec![0.0, 1.0, 2.0, 3.0]);
    }
}

/// The peers' reported failures (zero gradients for a value computed before
/// a dynamic loop and used after it, taichi#8027 / warp#1293; doubled
/// gradients in nested dynamic loops, warp#1552; `continue`, warp#1350;
/// a local overwritten in a branch, warp#1694; reassigned vector
/// components, warp#1697 / taichi#8356), in forward mode: the same number
/// as reverse mode (which `autodiff.rs` checks against finite differences).
#[test]
fn peers_known_failures_forward_matches_reverse() {
    let bodies = [
        "let a = x[i] * x[i];\n    let mut s = 0.0;\n    for k in 0..(i + 1) { s += x[i] * 0.5 + k as f32; }\n    loss[0] += a * s + a;",
        "let mut s = x[i];\n    for a in 0..(i + 2) {\n        for b in 0..(a + 1) { s = s * 0.9 + x[i] * 0.1; }\n    }\n    loss[0] += s * s;",
        "for k in 0..(i + 2) { loss[0] += x[i] * x[i] * k as f32; }",
        "let mut s = x[i];\n    for k in 0..3 {\n        let old = s;\n        if k == 1 { s = s * s; } else { s = sin(s) + old; }\n    }\n    loss[0] += s;",
        "let mut v = vec3(x[i], 2.0, 1.0);\n    v.x = v.x * v.y;\n    v.y = sin(v.x) + v.z;\n    v.x = v.x * v.x;\n    v.z = v.x * v.y;\n    loss[0] += v.x + v.y * 2.0 + v.z;",
        "for k in 0..3 {\n        if k == 1 { continue; }\n        loss[0] += x[i] * x[i] * (k + 1) as f32;\n    }",
    ];
    for body in bodies {
        check(&[x3()], &kernel(body), 3);
    }
}

/// Built-ins applied component-wise to vectors, unary minus, f32 casts and
/// `step` (the scalar forms are checked in `autodiff.rs`): reverse and
/// forward mode against central finite differences of the plain run.
#[test]
fn vector_builtins_match_finite_differences_in_both_modes() {
    let u = || In("u", "vec3", 2, vec![0.3, 0.8, 0.45, 0.6, 0.2, 0.7]);
    let bodies = [
        "let v = u[i];\n    loss[0] += dot(sin(v) + cos(v) * 2.0 + exp(v) - abs(v - vec3(0.5, 0.5, 0.5)), vec3(1.0, 2.0, 3.0));",
        "let v = u[i];\n    let w = sqrt(v) + log(v + vec3(1.0, 1.0, 1.0)) + pow(v, vec3(1.5, 2.0, 2.5)) + tanh(v) + atan(v);\n    loss[0] += w.x + w.y * 2.0 + w.z * 3.0;",
        "let v = u[i];\n    let w = min(v, vec3(0.5, 0.5, 0.5)) + max(v * 2.0, vec3(0.7, 0.7, 0.7)) + clamp(v, vec3(0.25, 0.25, 0.25), vec3(0.65, 0.65, 0.65));\n    loss[0] += w.x + w.y * 2.0 + w.z * 3.0;",
        "let v = u[i];\n    let w = lerp(v, v * v, v.zxy) + smoothstep(vec3(0.0, 0.1, 0.2), vec3(1.0, 0.9, 1.1), v) + fma(v, v.yzx, v);\n    loss[0] += w.x + w.y * 2.0 + w.z * 3.0;",
        "let v = -u[i];\n    let s = (v.x as f32) * step(0.5, u[i].y) + fract(v.y * 3.0) * v.z;\n    loss[0] += s * s + v.z;",
    ];
    let h = 1e-3f32;
    for body in bodies {
        let code = kernel(body);
        let inputs = [u()];
        let d = direction(6, 5);
        let (_, fwd) = jvp(&inputs, std::slice::from_ref(&d), &code, 2, Backend::Vm);
        let (_, rev) = vjp_dot(&inputs, std::slice::from_ref(&d), &code, 2, Backend::Vm);
        let plain = graph(&inputs, &code, 2, "none");
        let eval = |s: f32| {
            let mut sim = open(&plain, Backend::Vm).unwrap_or_else(|e| panic!("{}", e));
            let moved: Vec<f32> = inputs[0].3.iter().zip(&d).map(|(a, b)| a + s * b).collect();
            sim.write_field(sim.field("u").unwrap(), &bits(&moved))
                .unwrap();
            sim.start().unwrap();
            f32s(&sim, "loss")[0] as f64
        };
        let fd = (eval(h) - eval(-h)) / (2.0 * h as f64);
        for (what, v) in [("forward", fwd), ("reverse", rev)] {
            assert!(
                (v - fd).abs() <= 1e-2 * fd.abs() + 2e-3,
                "{}: {} {} vs finite difference {}",
                body,
                what,
                v,
                fd
            );
        }
    }
}

/// Local arrays (scalarised before differentiation) carry tangents like
/// any local: constant and run-time indices, a loop over the array.
#[test]
fn forward_matches_reverse_through_local_arrays() {
    let body = "let mut w = [0.0; 3];\n    for k in 0..3 { w[k] = x[k] * (k + 1) as f32; }\n    w[i] += sin(x[i]);\n    let mut s = 0.0;\n    for k in 0..(i + 2) { s += w[k % 3] * w[(k + i) % 3]; }\n    loss[0] += s;";
    check(&[x3()], &kernel(body), 3);
}

/// Structs, tuples and aggregate-returning helpers (scalarised and inlined
/// before differentiation): forward and reverse mode against central finite
/// differences of the plain run.
#[test]
fn structs_and_tuples_match_finite_differences_in_both_modes() {
    let defs = "struct P { x: f32, v: vec2, w: [f32; 2] }\nfn make(a: f32, b: f32) -> P { P { x: a * b, v: vec2(a, b * b), w: [sin(a), a + b] } }\nfn parts(p: P) -> (f32, f32) { (p.x + p.w[0], dot(p.v, p.v) * p.w[1]) }\nfn weights(fx: f32) -> [f32; 3] { [0.5 * (1.5 - fx) * (1.5 - fx), 0.75 - (fx - 1.0) * (fx - 1.0), 0.5 * (fx - 0.5) * (fx - 0.5)] }\nfn pick(a: f32) -> (f32, P) {\n    for k in 0..3 { if a * (k + 1) as f32 > 1.0 { return (a * a * k as f32, make(a, 2.0)); } }\n    (a * 3.0, make(1.0, a))\n}\nfn energy(p: P) -> f32 { p.x * p.x + p.v.y * p.w[1] }\n";
    let h = 1e-3f32;
    for body in [
        "let mut p = make(x[i], x[(i + 1) % 3]);\n    p.v.x += p.x * 0.5;\n    let q = p;\n    p.w[1] = q.v.y * 2.0;\n    let (a, b) = parts(p);\n    let w = weights(x[i] + 0.3);\n    loss[0] += a * b + w[0] * w[1] + w[2] * q.v.x + energy(q);",
        "let t = pick(x[i]);\n    let s = if x[i] > 0.0 { t.1 } else { P { x: t.0, ..t.1 } };\n    loss[0] += t.0 * s.x + energy(s) + weights(x[(i + 2) % 3])[i];",
    ] {
        let code = format!("{}fn kernel(i: i32) {{\n    {}\n}}\n", defs, body);
        let inputs = [x3()];
        let d = direction(3, 5);
        let (_, fwd) = jvp(&inputs, std::slice::from_ref(&d), &code, 3, Backend::Vm);
        let (_, rev) = vjp_dot(&inputs, std::slice::from_ref(&d), &code, 3, Backend::Vm);
        let plain = graph(&inputs, &code, 3, "none");
        let eval = |s: f32| {
            let mut sim = open(&plain, Backend::Vm).unwrap_or_else(|e| panic!("{}", e));
            let moved: Vec<f32> = inputs[0].3.iter().zip(&d).map(|(a, b)| a + s * b).collect();
            sim.write_field(sim.field("x").unwrap(), &bits(&moved))
                .unwrap();
            sim.start().unwrap();
            f32s(&sim, "loss")[0] as f64
        };
        let fd = (eval(h) - eval(-h)) / (2.0 * h as f64);
        assert!(fd.abs() > 1e-3, "{}: the reference is zero", body);
        for (what, v) in [("forward", fwd), ("reverse", rev)] {
            assert!(
                (v - fd).abs() <= 1e-2 * fd.abs() + 2e-3,
                "{}: {} {} vs finite difference {}",
                body,
                what,
                v,
                fd
            );
        }
    }
}
