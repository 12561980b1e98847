//! Reverse-mode automatic differentiation (`grad: true`, `tape`,
//! `passes::autodiff`). Every gradient is compared with an independent
//! reference: a hand-written derivative evaluated in f64, or central finite
//! differences of the forward program (run without a tape, in f32). Also:
//! the documented errors for constructs that cannot be differentiated (each
//! names the kernel node and line), the same gradients on vm, jit and wgpu,
//! and the mass-spring example against the peers' checksums.

use serde_json::{json, Value};
use weft_ir::passes::PassOptions;
use weft_runtime::{Backend, RuntimeError, SimOptions, Simulation};
use weft_tests::*;

/// An input field of the test graphs: (name, type, element count, values
/// per component in row-major order).
struct In<'a>(&'a str, &'a str, u32, Vec<f32>);

/// A graph with one kernel `k` over `range` reading the inputs and adding to
/// `loss[0]`; with `tape`, the kernel runs inside a tape seeded at `loss`.
/// `extra_kernels` are (id, code, range) run after `k` in the same chain.
fn graph(inputs: &[In], code: &str, range: u32, tape: bool, extra: &[(&str, &str, u32)]) -> Value {
    let mut nodes = vec![
        json!({"id": "one", "kind": "dense", "params": {"shape": [1]}}),
        json!({"id": "loss", "kind": "field", "params": {"type": "f32", "grad": true}}),
        json!({"id": "start", "kind": "on_start"}),
    ];
    let mut wires = vec![json!({"from": "one", "to": "loss"})];
    for In(name, ty, n, _) in inputs {
        let l = format!("{}_cells", name);
        nodes.push(json!({"id": l, "kind": "dense", "params": {"shape": [n]}}));
        nodes.push(json!({"id": name, "kind": "field", "params": {"type": ty, "grad": true}}));
        wires.push(json!({"from": l, "to": name}));
    }
    let mut kernels = vec![("k", code, range)];
    kernels.extend_from_slice(extra);
    let mut names: Vec<&str> = inputs.iter().map(|i| i.0).collect();
    names.push("loss");
    for (id, code, range) in &kernels {
        nodes.push(json!({"id": id, "kind": "kernel", "params": {"code": code, "range": [range]}}));
        for n in &names {
            if code.contains(&format!("{}[", n)) || code.contains(&format!("{}.grad[", n)) {
                wires.push(json!({"from": format!("{}.field", n), "to": format!("{}.{}", id, n)}));
            }
        }
    }
    let mut exec = vec![];
    if tape {
        nodes.push(json!({"id": "tp", "kind": "tape", "params": {"loss": "loss"}}));
        exec.push(json!({"from": "start", "to": "tp"}));
        exec.push(json!({"from": "tp.body", "to": "k"}));
    } else {
        exec.push(json!({"from": "start", "to": "k"}));
    }
    for w in kernels.windows(2) {
        exec.push(json!({"from": format!("{}.then", w[0].0), "to": w[1].0}));
    }
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

/// Runs the graph with the inputs' values; returns the loss and each input's gradient.
fn run_with(doc: &Value, inputs: &[In], backend: Backend) -> (f64, Vec<Vec<f32>>) {
    let mut sim = open(doc, backend).unwrap_or_else(|e| panic!("{}", e));
    for In(name, _, _, v) in inputs {
        let f = sim.field(name).expect("input field");
        sim.write_field(f, &v.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
            .expect("write");
    }
    sim.start().unwrap_or_else(|e| panic!("{}", e));
    let loss = f32s(&sim, "loss")[0] as f64;
    let grads = inputs
        .iter()
        .map(|i| {
            if sim.field(&format!("{}.grad", i.0)).is_some() {
                f32s(&sim, &format!("{}.grad", i.0))
            } else {
                vec![]
            }
        })
        .collect();
    (loss, grads)
}

/// Autodiff gradients and central finite differences (forward graph only,
/// step `h`) of the loss with respect to every input component.
fn ad_and_fd(inputs: &[In], code: &str, range: u32, h: f32) -> Vec<(String, f64, f64)> {
    let (_, ad) = run_with(&graph(inputs, code, range, true, &[]), inputs, Backend::Vm);
    let fwd = graph(inputs, code, range, false, &[]);
    let mut out = Vec::new();
    for (n, inp) in inputs.iter().enumerate() {
        for c in 0..inp.3.len() {
            let eval = |d: f32| {
                let moved: Vec<In> = inputs
                    .iter()
                    .enumerate()
                    .map(|(m, In(a, b, k, v))| {
                        let mut v = v.clone();
                        if m == n {
                            v[c] += d;
                        }
                        In(a, b, *k, v)
                    })
                    .collect();
                run_with(&fwd, &moved, Backend::Vm).0
            };
            let fd = (eval(h) - eval(-h)) / (2.0 * h as f64);
            out.push((format!("{}[{}]", inp.0, c), ad[n][c] as f64, fd));
        }
    }
    out
}

fn assert_close(what: &str, pairs: &[(String, f64, f64)], rel: f64, abs: f64) {
    let bad: Vec<String> = pairs
        .iter()
        .filter(|(_, a, b)| (a - b).abs() > abs + rel * a.abs().max(b.abs()))
        .map(|(n, a, b)| format!("{}: autodiff {} reference {}", n, a, b))
        .collect();
    assert!(bad.is_empty(), "{}:\n{}", what, bad.join("\n"));
}

#[test]
fn unary_builtins_match_hand_derivatives() {
    type D = fn(f64) -> f64;
    let cases: &[(&str, D, [f32; 3])] = &[
        ("abs", |x| x.signum(), [-1.5, 0.3, 2.0]),
        ("exp", |x| x.exp(), [-1.0, 0.2, 1.5]),
        (
            "exp2",
            |x| x.exp2() * std::f64::consts::LN_2,
            [-1.0, 0.2, 1.5],
        ),
        ("log", |x| 1.0 / x, [0.3, 1.0, 4.0]),
        (
            "log2",
            |x| 1.0 / (x * std::f64::consts::LN_2),
            [0.3, 1.0, 4.0],
        ),
        ("sqrt", |x| 0.5 / x.sqrt(), [0.3, 1.0, 4.0]),
        ("rsqrt", |x| -0.5 * x.powf(-1.5), [0.3, 1.0, 4.0]),
        ("sin", |x| x.cos(), [-1.0, 0.4, 2.5]),
        ("cos", |x| -x.sin(), [-1.0, 0.4, 2.5]),
        ("tan", |x| 1.0 / (x.cos() * x.cos()), [-1.0, 0.4, 1.2]),
        ("asin", |x| 1.0 / (1.0 - x * x).sqrt(), [-0.7, 0.1, 0.6]),
        ("acos", |x| -1.0 / (1.0 - x * x).sqrt(), [-0.7, 0.1, 0.6]),
        ("atan", |x| 1.0 / (1.0 + x * x), [-2.0, 0.1, 3.0]),
        ("sinh", |x| x.cosh(), [-1.0, 0.4, 2.0]),
        ("cosh", |x| x.sinh(), [-1.0, 0.4, 2.0]),
        ("tanh", |x| 1.0 - x.tanh() * x.tanh(), [-1.0, 0.4, 2.0]),
        ("asinh", |x| 1.0 / (x * x + 1.0).sqrt(), [-1.0, 0.4, 2.0]),
        ("acosh", |x| 1.0 / (x * x - 1.0).sqrt(), [1.2, 2.0, 5.0]),
        ("atanh", |x| 1.0 / (1.0 - x * x), [-0.7, 0.1, 0.6]),
        (
            "saturate",
            |x| if (0.0..=1.0).contains(&x) { 1.0 } else { 0.0 },
            [-0.5, 0.3, 1.5],
        ),
        ("fract", |_| 1.0, [-0.5, 0.3, 1.7]),
        ("floor", |_| 0.0, [-0.5, 0.3, 1.7]),
        ("ceil", |_| 0.0, [-0.5, 0.3, 1.7]),
        ("round", |_| 0.0, [-0.4, 0.3, 1.7]),
        ("trunc", |_| 0.0, [-0.5, 0.3, 1.7]),
        ("sign", |_| 0.0, [-0.5, 0.3, 1.7]),
    ];
    let mut problems = Vec::new();
    for (name, d, xs) in cases {
        let inputs = [In("x", "f32", 3, xs.to_vec())];
        let code = format!("fn kernel(i: i32) {{\n    loss[0] += {}(x[i]);\n}}\n", name);
        let (_, g) = run_with(&graph(&inputs, &code, 3, true, &[]), &inputs, Backend::Vm);
        for (k, &x) in xs.iter().enumerate() {
            let want = d(x as f64);
            if (g[0][k] as f64 - want).abs() > 1e-5 + 1e-4 * want.abs() {
                problems.push(format!(
                    "{}'({}) = {} but autodiff gave {}",
                    name, x, want, g[0][k]
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn multi_argument_builtins_match_finite_differences() {
    let a = || In("a", "f32", 2, vec![0.7, 1.3]);
    let b = || In("b", "f32", 2, vec![1.6, 0.4]);
    let c = || In("c", "f32", 2, vec![0.45, 0.9]);
    let cases = [
        "loss[0] += pow(a[i], b[i]);",
        "loss[0] += atan2(a[i], b[i]);",
        "loss[0] += min(a[i], b[i]) * 2.0 + max(a[i], b[i]);",
        "loss[0] += clamp(c[i], a[i] - 0.5, b[i]) * 3.0;",
        "loss[0] += lerp(a[i], b[i], c[i]);",
        "loss[0] += smoothstep(a[i] - 1.0, b[i] + 1.0, c[i]);",
        "loss[0] += fma(a[i], b[i], c[i]);",
        "loss[0] += a[i] / b[i] - a[i] * c[i] + (b[i] % 0.3);",
        "loss[0] += select(a[i] > 1.0, a[i] * b[i], c[i] * c[i]);",
    ];
    for body in cases {
        let code = format!("fn kernel(i: i32) {{\n    {}\n}}\n", body);
        let pairs = ad_and_fd(&[a(), b(), c()], &code, 2, 1e-3);
        assert_close(body, &pairs, 1e-2, 2e-3);
    }
}

#[test]
fn vector_and_matrix_builtins_match_finite_differences() {
    let u = || In("u", "vec3", 1, vec![0.3, -0.8, 1.1]);
    let w = || In("w", "vec3", 1, vec![0.9, 0.2, -0.4]);
    let m = || In("m", "mat2", 1, vec![1.2, 0.3, -0.4, 0.9]);
    let p = || In("p", "vec2", 1, vec![0.6, -1.1]);
    let vec_cases = [
        "loss[0] += length(u[i]) + distance(u[i], w[i]);",
        "loss[0] += dot(normalize(u[i]), vec3(0.3, -0.7, 1.1));",
        "loss[0] += dot(cross(u[i], w[i]), vec3(1.0, 2.0, 3.0));",
        "loss[0] += dot(reflect(u[i], normalize(w[i])), vec3(0.5, 1.0, -1.5));",
        "loss[0] += dot(u[i] * w[i] + u[i].zxy * 2.0, vec3(1.0, -1.0, 0.5)) + u[i].x * w[i].yy.y;",
    ];
    for body in vec_cases {
        let code = format!("fn kernel(i: i32) {{\n    {}\n}}\n", body);
        assert_close(body, &ad_and_fd(&[u(), w()], &code, 1, 1e-3), 1e-2, 2e-3);
    }
    let mat_cases = [
        "let r = m[i] * p[i];\n    loss[0] += r.x * 2.0 + r.y * r.y;",
        "let r = p[i] * m[i];\n    loss[0] += r.x - 3.0 * r.y;",
        "let q = m[i] * transpose(m[i]);\n    loss[0] += q[0][0] + 2.0 * q[1][0] - q[1][1];",
        "loss[0] += determinant(m[i]) * p[i].x;",
        "let q = inverse(m[i]);\n    loss[0] += q[0][1] + 0.5 * q[1][1] + q[0][0];",
        "let q = outer(p[i], vec2(p[i].y, 2.0));\n    loss[0] += q[0][0] + q[1][0] * 3.0 + q[1][1];",
    ];
    for body in mat_cases {
        let code = format!("fn kernel(i: i32) {{\n    {}\n}}\n", body);
        assert_close(body, &ad_and_fd(&[m(), p()], &code, 1, 1e-3), 1e-2, 2e-3);
    }
}

/// Control flow, including the peers' reported failure modes: values
/// computed before a loop and used after it (taichi#8027), nested loops with
/// carried state (doubled gradients), reassigned vector components
/// (warp#1697), branches, helpers.
#[test]
fn control_flow_matches_finite_differences() {
    let x = || In("x", "f32", 3, vec![0.3, 0.8, -0.6]);
    let cases = [
        // branches on data
        "let v = x[i];\n    if v > 0.5 { loss[0] += v * v * v; } else { loss[0] += sin(v) * 2.0; }",
        // a value from before a dynamic loop used after it
        "let a = x[i] * 2.0;\n    let mut acc = 0.0;\n    for k in 0..(i + 2) { acc += a * k as f32; }\n    loss[0] += acc * a;",
        // nested loops carrying a local
        "let mut p = 1.0;\n    for j in 0..3 {\n        for k in 0..2 { p = p * x[i] + sin(p) * 0.5; }\n    }\n    loss[0] += p;",
        // a carried local overwritten in a branch inside the loop
        "let mut s = x[i];\n    for k in 0..4 {\n        if s > 0.0 { s = s * s - 0.3; } else { s = cos(s); }\n    }\n    loss[0] += s;",
        // reassigned vector components
        "let mut v = vec2(x[i], 1.0);\n    v.x = v.x * v.x;\n    v.y = v.x * 3.0 + v.y;\n    v[0] = v.y * x[i];\n    loss[0] += v.x + v.y;",
        // step_by and inclusive ranges
        "let mut q = x[i];\n    for k in (1..=7).step_by(3) { q = q * 0.5 + x[i] * k as f32; }\n    loss[0] += q * q;",
    ];
    for body in cases {
        let code = format!("fn kernel(i: i32) {{\n    {}\n}}\n", body);
        assert_close(body, &ad_and_fd(&[x()], &code, 3, 1e-3), 1e-2, 2e-3);
    }
    // A helper function (inlined before differentiation).
    let code = "fn f(a: f32, b: f32) -> f32 {\n    if a > b { a * b } else { exp(a - b) }\n}\n\nfn kernel(i: i32) {\n    loss[0] += f(x[i], 0.1) + f(0.2, x[i] * x[i]);\n}\n";
    assert_close("helper", &ad_and_fd(&[x()], code, 3, 1e-3), 1e-2, 2e-3);
}

/// Scatter with `+=`, gather through an index field, then a second kernel:
/// the adjoint of an atomic reads the gradient of the element it added to.
#[test]
fn atomics_and_two_kernels_match_hand_derivatives() {
    let inputs = [
        In("x", "f32", 4, vec![0.5, -1.0, 2.0, 0.25]),
        In("y", "f32", 2, vec![0.0, 0.0]),
    ];
    // y[i % 2] += x[i]²; then loss = sum_j y[j]³ (so dL/dx_i = 3 y_{i%2}² · 2 x_i).
    let code = "fn kernel(i: i32) {\n    y[i % 2] += x[i] * x[i];\n}\n";
    let second = "fn kernel(j: i32) {\n    let v = y[j];\n    loss[0] += v * v * v;\n}\n";
    let doc = graph(&inputs, code, 4, true, &[("cube", second, 2)]);
    for backend in [Backend::Vm, Backend::Jit] {
        let (loss, g) = run_with(&doc, &inputs, backend);
        let xs = [0.5f64, -1.0, 2.0, 0.25];
        let y = [xs[0] * xs[0] + xs[2] * xs[2], xs[1] * xs[1] + xs[3] * xs[3]];
        assert!((loss - (y[0].powi(3) + y[1].powi(3))).abs() < 1e-4);
        for i in 0..4 {
            let want = 3.0 * y[i % 2] * y[i % 2] * 2.0 * xs[i];
            assert!(
                (g[0][i] as f64 - want).abs() < 1e-4 * want.abs() + 1e-6,
                "{}: d/dx[{}] = {} but autodiff gave {}",
                backend,
                i,
                want,
                g[0][i]
            );
        }
        // `y` was zero at tape entry and only written by the tape, so its
        // gradient is d loss / d y at entry = 3 y².
        assert!((g[1][0] as f64 - 3.0 * y[0] * y[0]).abs() < 1e-3);
    }
}

#[test]
fn gradient_fields_are_readable_and_zeroed_at_tape_entry() {
    // The tape zeroes x.grad; the kernel after the tape reads it as `x.grad[i]`.
    let doc = json!({"format": "weft-graph", "version": 1, "nodes": [
        {"id": "c", "kind": "dense", "params": {"shape": [3]}},
        {"id": "one", "kind": "dense", "params": {"shape": [1]}},
        {"id": "x", "kind": "field", "params": {"type": "f32", "init": 2.0, "grad": true}},
        {"id": "out", "kind": "field", "params": {"type": "f32"}},
        {"id": "loss", "kind": "field", "params": {"type": "f32", "grad": true}},
        {"id": "start", "kind": "on_start"},
        {"id": "poison", "kind": "kernel", "params": {"range": [3], "code": "fn kernel(i: i32) { x.grad[i] = 100.0; }"}},
        {"id": "tp", "kind": "tape", "params": {"loss": "loss"}},
        {"id": "k", "kind": "kernel", "params": {"range": [3], "code": "fn kernel(i: i32) { loss[0] += x[i] * x[i] * i as f32; }"}},
        {"id": "read", "kind": "kernel", "params": {"range": [3], "code": "fn kernel(i: i32) { out[i] = x.grad[i] + 1.0; }"}}
    ], "wires": [
        {"from": "c", "to": "x"}, {"from": "c", "to": "out"}, {"from": "one", "to": "loss"},
        {"from": "x.field", "to": "poison.x"}, {"from": "x.field", "to": "k.x"}, {"from": "loss.field", "to": "k.loss"},
        {"from": "x.field", "to": "read.x"}, {"from": "out.field", "to": "read.out"}
    ], "exec": [
        {"from": "start", "to": "poison"}, {"from": "poison", "to": "tp"},
        {"from": "tp.body", "to": "k"}, {"from": "tp.then", "to": "read"}
    ]});
    let sim = run(&doc, 0).unwrap_or_else(|e| panic!("{}", e));
    assert_eq!(f32s(&sim, "x.grad"), vec![0.0, 4.0, 8.0]);
    assert_eq!(f32s(&sim, "out"), vec![1.0, 5.0, 9.0]);
}

#[test]
fn backends_agree_on_gradients() {
    let inputs = [
        In("x", "f32", 5, vec![0.3, 0.8, -0.6, 1.4, 0.05]),
        In(
            "u",
            "vec2",
            5,
            vec![0.5, 1.0, -0.3, 0.2, 0.9, -1.2, 0.4, 0.4, 2.0, 0.1],
        ),
    ];
    let code = "fn kernel(i: i32) {\n    let mut p = u[i];\n    for k in 0..3 {\n        if p.x > 0.0 { p = p * x[i] + vec2(sin(p.y), 0.1); } else { p.y = p.y * p.x; }\n    }\n    loss[0] += length(p) + atan2(p.y, 1.5) * x[(i + 1) % 5];\n}\n";
    let doc = graph(&inputs, code, 5, true, &[]);
    let (l_vm, g_vm) = run_with(&doc, &inputs, Backend::Vm);
    let mut others = vec![Backend::Jit];
    if wgpu_available() {
        others.push(Backend::Wgpu);
    }
    for b in others {
        let (l, g) = run_with(&doc, &inputs, b);
        assert!(
            close(l as f32, l_vm as f32, 1e-5, 1e-6),
            "{}: loss {} vs vm {}",
            b,
            l,
            l_vm
        );
        for (n, (a, e)) in g.iter().zip(&g_vm).enumerate() {
            for (c, (x, y)) in a.iter().zip(e).enumerate() {
                assert!(
                    close(*x, *y, 1e-4, 1e-6),
                    "{}: grad {}[{}] {} vs vm {}",
                    b,
                    n,
                    c,
                    x,
                    y
                );
            }
        }
    }
    // And the VM's gradients are right.
    let fd = ad_and_fd(&inputs, code, 5, 1e-3);
    assert_close("cross-backend graph", &fd, 1e-2, 2e-3);
}

fn compile_error(code: &str, inputs: &[In]) -> String {
    match open(&graph(inputs, code, 2, true, &[]), Backend::Vm) {
        Ok(_) => panic!("expected an error for:\n{}", code),
        Err(e) => e.to_string(),
    }
}

#[test]
fn constructs_that_cannot_be_differentiated_are_errors_naming_node_and_line() {
    let x = || In("x", "f32", 2, vec![0.5, 1.0]);
    let cases: &[(&str, &str)] = &[
        ("fn kernel(i: i32) {\n    loss[0] += x[i] * random();\n}\n", "code 2:23: `random()` cannot be used"),
        ("fn kernel(i: i32) {\n    atomic_max(loss[0], x[i]);\n}\n", "code 2:5: `atomic_max` on field 'loss', which has a gradient"),
        ("fn kernel(i: i32) {\n    let old = atomic_add(loss[0], x[i]);\n    loss[0] += old;\n}\n", "the value an atomic returns"),
        ("fn kernel(i: i32) {\n    x[i] = x[i] * 2.0;\n    loss[0] += x[i];\n}\n", "code 2:5: overwrites field 'x', which this kernel read at line 2"),
    ];
    for (code, want) in cases {
        let e = compile_error(code, &[x()]);
        assert!(
            e.contains("node 'k'") && e.contains(want),
            "for\n{}\ngot: {}",
            code,
            e
        );
    }
    // Outside a tape the same kernels compile and run.
    assert!(cases[0].0.contains("random()"));
    let ok = graph(&[x()], cases[0].0, 2, false, &[]);
    assert!(open(&ok, Backend::Vm).is_ok());
}

#[test]
fn graph_errors_name_the_node() {
    let x = In("x", "f32", 2, vec![0.5, 1.0]);
    let mut doc = graph(&[x], "fn kernel(i: i32) { loss[0] += x[i]; }", 2, true, &[]);
    // loss without a gradient
    for n in doc["nodes"].as_array_mut().unwrap() {
        if n["id"] == "loss" {
            n["params"]["grad"] = json!(false);
        }
    }
    let e = build(&doc).unwrap_err().to_string();
    assert!(
        e.contains("node 'tp'") && e.contains("needs `\"grad\": true`"),
        "{}",
        e
    );
    // grad on an integer field
    let mut doc2 = doc.clone();
    for n in doc2["nodes"].as_array_mut().unwrap() {
        if n["id"] == "x" {
            n["params"]["type"] = json!("i32");
        }
    }
    let e = build(&doc2).unwrap_err().to_string();
    assert!(
        e.contains("node 'x'") && e.contains("only f32 fields"),
        "{}",
        e
    );
    // x.grad on a field without a gradient
    let doc3 = kernel_graph(
        &[F("y", "f32", &[2], json!(0))],
        "fn kernel(i: i32) { y[i] = y.grad[i]; }",
        &[2],
        json!({}),
    );
    let e = build(&doc3).unwrap_err().to_string();
    assert!(
        e.contains("node 'k'") && e.contains("has no gradient"),
        "{}",
        e
    );
}

/// The peers (../shared/peers/taichi_massspring_ad.py, warp_massspring_ad.py,
/// seed 0) print loss 0.389684 and grad_v0_sum −0.40204.
#[test]
fn mass_spring_matches_the_peers() {
    let sim = run(&example("mass_spring_ad"), 0).unwrap_or_else(|e| panic!("{}", e));
    let loss = f32s(&sim, "loss")[0] as f64;
    let gv0: f64 = f32s(&sim, "v0.grad").iter().map(|&x| x as f64).sum();
    assert!((loss - 0.389684).abs() < 2e-6, "loss {}", loss);
    assert!((gv0 - -0.40204).abs() < 2e-5, "grad_v0_sum {}", gv0);
}

/// One item of a tape body: a kernel (id, code, range) or a repeat (id,
/// count, index scalar, body).
enum Item<'a> {
    K(&'a str, &'a str, u32),
    R(&'a str, u32, &'a str, Vec<Item<'a>>),
}

/// A graph whose tape body is `items`; `inputs` have gradients, `extra`
/// fields (name, type, shape) do too. Every field named in a kernel's code
/// is wired to it; a repeat's index scalar is declared on its kernels.
fn tape_graph(inputs: &[In], extra: &[(&str, &str, &[u32])], items: &[Item]) -> Value {
    tape_graph_cp(inputs, extra, items, 0)
}

/// `tape_graph` with the tape's `checkpoint` param.
fn tape_graph_cp(
    inputs: &[In],
    extra: &[(&str, &str, &[u32])],
    items: &[Item],
    checkpoint: u32,
) -> Value {
    let mut nodes = vec![
        json!({"id": "one", "kind": "dense", "params": {"shape": [1]}}),
        json!({"id": "loss", "kind": "field", "params": {"type": "f32", "grad": true}}),
        json!({"id": "start", "kind": "on_start"}),
        json!({"id": "tp", "kind": "tape", "params": {"loss": "loss", "checkpoint": checkpoint}}),
    ];
    let mut wires = vec![json!({"from": "one", "to": "loss"})];
    let mut names = vec!["loss".to_string()];
    let mut fields: Vec<(String, String, Vec<u32>)> = inputs
        .iter()
        .map(|In(n, t, k, _)| (n.to_string(), t.to_string(), vec![*k]))
        .collect();
    fields.extend(
        extra
            .iter()
            .map(|(n, t, s)| (n.to_string(), t.to_string(), s.to_vec())),
    );
    for (name, ty, shape) in &fields {
        let l = format!("{}_cells", name);
        nodes.push(json!({"id": l, "kind": "dense", "params": {"shape": shape}}));
        nodes.push(json!({"id": name, "kind": "field", "params": {"type": ty, "grad": true}}));
        wires.push(json!({"from": l, "to": name}));
        names.push(name.clone());
    }
    let mut exec = vec![json!({"from": "start", "to": "tp"})];
    fn add(
        items: &[Item],
        from: String,
        index: Option<&str>,
        names: &[String],
        nodes: &mut Vec<Value>,
        wires: &mut Vec<Value>,
        exec: &mut Vec<Value>,
    ) {
        let mut from = from;
        for it in items {
            let id = match it {
                Item::K(id, code, range) => {
                    let scalars = match index {
                        Some(t) => json!({ t: 0 }),
                        None => json!({}),
                    };
                    nodes.push(json!({"id": id, "kind": "kernel", "params": {"code": code, "range": [range], "scalars": scalars}}));
                    for n in names {
                        if code.contains(&format!("{}[", n)) {
                            wires.push(json!({"from": format!("{}.field", n), "to": format!("{}.{}", id, n)}));
                        }
                    }
                    id
                }
                Item::R(id, count, t, body) => {
                    nodes.push(
                        json!({"id": id, "kind": "repeat", "params": {"count": count, "index": t}}),
                    );
                    add(
                        body,
                        format!("{}.body", id),
                        Some(t),
                        names,
                        nodes,
                        wires,
                        exec,
                    );
                    id
                }
            };
            exec.push(json!({"from": from, "to": id}));
            from = format!("{}.then", id);
        }
    }
    add(
        items,
        "tp.body".into(),
        None,
        &names,
        &mut nodes,
        &mut wires,
        &mut exec,
    );
    json!({"format": "weft-graph", "version": 1, "nodes": nodes, "wires": wires, "exec": exec})
}

/// Taichi's global data access rule: each way of breaking it is an error
/// naming the kernel node(s), the field and the lines, with the fix.
#[test]
fn access_rule_misuse_corpus() {
    use Item::*;
    let x = || In("x", "f32", 3, vec![0.3, 0.8, -0.6]);
    let y: (&str, &str, &[u32]) = ("y", "f32", &[3]);
    let loss_y = "fn kernel(i: i32) { loss[0] += y[i]; }";
    let cases: Vec<(Vec<Item>, Vec<&str>)> = vec![
        // A field read by one launch and overwritten by a later one.
        (
            vec![
                K("a", "fn kernel(i: i32) { y[i] = x[i] * x[i]; }", 3),
                K("b", "fn kernel(i: i32) { x[i] = 0.0; }", 3),
                K("c", loss_y, 3),
            ],
            vec!["node 'b', code 1:21", "field 'x' is read by kernel 'a' (line 1) and overwritten later in tape 'tp' by kernel 'b' (line 1)", "time axis"],
        ),
        // ... also by an accumulation.
        (
            vec![
                K("a", "fn kernel(i: i32) { y[i] = x[i] * x[i]; }", 3),
                K("b", "fn kernel(i: i32) { x[i] += 1.0; }", 3),
                K("c", loss_y, 3),
            ],
            vec!["node 'b'", "field 'x' is read by kernel 'a'"],
        ),
        // State updated in place inside a repeat (no time axis).
        (
            vec![
                R("steps", 3, "t", vec![
                    K("a", "fn kernel(i: i32) { y[i] = x[i] * 0.9; }", 3),
                    K("b", "fn kernel(i: i32) { x[i] = y[i] + 0.1; }", 3),
                ]),
                K("c", loss_y, 3),
            ],
            vec!["node 'b'", "field 'x' is read by kernel 'a' (line 1, repeat 'steps' with t = 0)"],
        ),
        // An element stored twice.
        (
            vec![
                K("a", "fn kernel(i: i32) { y[i] = x[i] * 2.0; }", 3),
                K("b", "fn kernel(i: i32) { y[i] = x[i] * 3.0; }", 3),
                K("c", loss_y, 3),
            ],
            vec!["node 'b'", "field 'y' is written by kernel 'a' (line 1) and written again by kernel 'b' (line 1)", "`+=`"],
        ),
        // A time axis indexed with the wrong slot: step t overwrites slot t.
        (
            vec![
                R("steps", 2, "t", vec![K("a", "fn kernel(i: i32) {\n    z[(t, i)] = z[(t, i)] * x[i];\n}", 3)]),
                K("c", "fn kernel(i: i32) { loss[0] += z[(2, i)]; }", 3),
            ],
            vec!["node 'a', code 2:5", "overwrites field 'z', which this kernel read at line 2"],
        ),
        // Reads of the next slot written by an earlier step.
        (
            vec![
                R("steps", 2, "t", vec![
                    K("a", "fn kernel(i: i32) { z[(t + 1, i)] = z[(t, i)] * x[i]; }", 3),
                    K("b", "fn kernel(i: i32) { z[(t, i)] = z[(t + 1, i)] * 0.5; }", 3),
                ]),
                K("c", "fn kernel(i: i32) { loss[0] += z[(2, i)]; }", 3),
            ],
            vec!["node 'b'", "field 'z' is read by kernel 'a' (line 1, repeat 'steps' with t = 0) and overwritten later in tape 'tp' by kernel 'b' (line 1, repeat 'steps' with t = 0)"],
        ),
        // Inside one kernel: read after write, and a second store.
        (
            vec![K("a", "fn kernel(i: i32) {\n    y[i] = x[i];\n    loss[0] += y[i];\n}", 3)],
            vec!["node 'a', code 3:16", "reads field 'y' after writing it at 2:5 in the same kernel", "split the kernel"],
        ),
        (
            vec![
                K("a", "fn kernel(i: i32) {\n    y[i] = x[i];\n    y[i] = x[i] * 2.0;\n}", 3),
                K("c", loss_y, 3),
            ],
            vec!["node 'a', code 3:5", "stores to field 'y' again after writing it at line 2"],
        ),
    ];
    for (items, want) in cases {
        let doc = tape_graph(&[x()], &[y, ("z", "f32", &[3, 3])], &items);
        let e = match open(&doc, Backend::Vm) {
            Ok(_) => panic!("expected an access rule error, want {:?}", want),
            Err(e) => e.to_string(),
        };
        for w in &want {
            assert!(e.contains(w), "want '{}' in:\n{}", w, e);
        }
    }
}

/// The same rule is element aware along the time axis: a state kept on one
/// (read slot t, write slot t + 1) is accepted, and its gradient matches
/// finite differences.
#[test]
fn time_axis_state_is_accepted_and_exact() {
    use Item::*;
    let x = In("x", "f32", 3, vec![0.3, 0.8, -0.6]);
    let items = || {
        vec![
            K("init", "fn kernel(i: i32) { z[(0, i)] = x[i]; }", 3),
            R(
                "steps",
                3,
                "t",
                vec![
                    K(
                        "a",
                        "fn kernel(i: i32) { w[(t, i)] = sin(z[(t, i)]) + z[(t, i)] * x[i]; }",
                        3,
                    ),
                    K(
                        "b",
                        "fn kernel(i: i32) { z[(t + 1, i)] = w[(t, i)] * 0.5 + z[(t, i)]; }",
                        3,
                    ),
                ],
            ),
            K(
                "c",
                "fn kernel(i: i32) { loss[0] += z[(3, i)] * z[(3, i)]; }",
                3,
            ),
        ]
    };
    let extra: [(&str, &str, &[u32]); 2] = [("z", "f32", &[4, 3]), ("w", "f32", &[3, 3])];
    let doc = tape_graph(std::slice::from_ref(&x), &extra, &items());
    let (l0, g) = run_with(&doc, std::slice::from_ref(&x), Backend::Vm);
    assert!(l0.is_finite());
    for c in 0..3 {
        let h = 1e-3f32;
        let eval = |d: f32| {
            let mut v = x.3.clone();
            v[c] += d;
            run_with(&doc, &[In("x", "f32", 3, v)], Backend::Vm).0
        };
        let fd = (eval(h) - eval(-h)) / (2.0 * h as f64);
        assert_close(
            "time axis",
            &[(format!("x[{}]", c), g[0][c] as f64, fd)],
            1e-2,
            2e-3,
        );
    }
    // The cpu and wgpu backends run the same expanded tape.
    let mut others = vec![Backend::Jit];
    if wgpu_available() {
        others.push(Backend::Wgpu);
    }
    for b in others {
        let (l, gb) = run_with(&doc, std::slice::from_ref(&x), b);
        assert!(
            close(l as f32, l0 as f32, 1e-5, 1e-6),
            "{}: loss {} vs vm {}",
            b,
            l,
            l0
        );
        for (c, (p, q)) in gb[0].iter().zip(&g[0]).enumerate() {
            assert!(
                close(*p, *q, 1e-4, 1e-6),
                "{}: x.grad[{}] {} vs vm {}",
                b,
                c,
                p,
                q
            );
        }
    }
}

/// The peers' users' reports of silently wrong gradients (warp#1694, #1293,
/// #1552, #1350, #1697; taichi#8027, #8356), each as a case that must give
/// the finite-difference gradient, or else a clear error.
#[test]
fn peers_known_failures_give_right_gradients_or_errors() {
    let x = || In("x", "f32", 3, vec![0.3, 0.8, -0.6]);
    let exact = [
        // A value computed before a dynamic loop and used after it (zero gradients).
        "let a = x[i] * x[i];\n    let mut s = 0.0;\n    for k in 0..(i + 1) { s += x[i] * 0.5 + k as f32; }\n    loss[0] += a * s + a;",
        // Nested dynamic loops carrying a local (doubled gradients).
        "let mut s = x[i];\n    for a in 0..(i + 2) {\n        for b in 0..(a + 1) { s = s * 0.9 + x[i] * 0.1; }\n    }\n    loss[0] += s * s;",
        // An accumulation into a field inside a dynamic loop.
        "for k in 0..(i + 2) { loss[0] += x[i] * x[i] * k as f32; }",
        // A local overwritten in a branch inside a loop (backward read the current value).
        "let mut s = x[i];\n    for k in 0..3 {\n        let old = s;\n        if k == 1 { s = s * s; } else { s = sin(s) + old; }\n    }\n    loss[0] += s;",
        // Reassigned vector components.
        "let mut v = vec3(x[i], 2.0, 1.0);\n    v.x = v.x * v.y;\n    v.y = sin(v.x) + v.z;\n    v.x = v.x * v.x;\n    v.z = v.x * v.y;\n    loss[0] += v.x + v.y * 2.0 + v.z;",
    ];
    for body in exact {
        let code = format!("fn kernel(i: i32) {{\n    {}\n}}\n", body);
        assert_close(body, &ad_and_fd(&[x()], &code, 3, 1e-3), 1e-2, 2e-3);
    }
    // `continue` (gradients of the skipped iterations were lost).
    let code = "fn kernel(i: i32) {\n    for k in 0..3 {\n        if k == 1 { continue; }\n        loss[0] += x[i] * x[i] * (k + 1) as f32;\n    }\n}\n";
    assert_close("continue", &ad_and_fd(&[x()], code, 3, 1e-3), 1e-2, 2e-3);
}

/// `while`, `loop`, `break`, `continue` and early `return`: rewritten to
/// flags and counted range loops before differentiation (`exits`).
#[test]
fn loop_exits_match_finite_differences() {
    let x = || In("x", "f32", 3, vec![0.3, 0.8, -0.6]);
    let cases = [
        // a while loop carrying a local, data-dependent trip count
        "let mut s = abs(x[i]) + 0.2;\n    while s < 3.0 { s = s * 1.5 + x[i] * 0.1; }\n    loss[0] += s * s;",
        // break out of a range loop
        "let mut s = 0.0;\n    for k in 0..10 {\n        s += x[i] * k as f32;\n        if s > 2.0 { break; }\n    }\n    loss[0] += s * x[i];",
        // continue inside a carried loop
        "let mut s = x[i];\n    for k in 0..5 {\n        if k == 2 { continue; }\n        s = s * 0.9 + sin(s) * 0.2;\n    }\n    loss[0] += s;",
        // early return
        "if x[i] < 0.0 { return; }\n    loss[0] += x[i] * x[i];",
        // loop with break after the body, counting trips
        "let mut s = x[i];\n    let mut n = 0;\n    loop {\n        s = sin(s) + x[i];\n        n += 1;\n        if n >= 4 { break; }\n    }\n    loss[0] += s;",
        // a while loop nested in a range loop, and a return inside a loop
        "let mut acc = 0.0;\n    for k in 0..3 {\n        let mut s = x[i] + k as f32 * 0.1;\n        let mut n = 0;\n        while n < k + 1 { s = s * s * 0.5 + 0.3; n += 1; }\n        acc += s;\n        if acc > 100.0 { return; }\n    }\n    loss[0] += acc;",
    ];
    for body in cases {
        let code = format!("fn kernel(i: i32) {{\n    {}\n}}\n", body);
        assert_close(body, &ad_and_fd(&[x()], &code, 3, 1e-3), 1e-2, 2e-3);
    }
    // The cpu and wgpu backends run the same adjoint.
    let inputs = [x()];
    let code = format!("fn kernel(i: i32) {{\n    {}\n}}\n", cases[0]);
    let doc = graph(&inputs, &code, 3, true, &[]);
    let (l_vm, g_vm) = run_with(&doc, &inputs, Backend::Vm);
    let mut others = vec![Backend::Jit];
    if wgpu_available() {
        others.push(Backend::Wgpu);
    }
    for b in others {
        let (l, g) = run_with(&doc, &inputs, b);
        assert!(
            close(l as f32, l_vm as f32, 1e-5, 1e-6),
            "{}: loss {} vs {}",
            b,
            l,
            l_vm
        );
        for (p, q) in g[0].iter().zip(&g_vm[0]) {
            assert!(
                close(*p, *q, 1e-4, 1e-6),
                "{}: {:?} vs {:?}",
                b,
                g[0],
                g_vm[0]
            );
        }
    }
}

/// `weft check` warns where a differentiable value is converted to an
/// integer inside a tape (its gradient would silently be zero).
#[test]
fn integer_casts_of_differentiable_values_are_warnings() {
    let x = In("x", "f32", 3, vec![0.3, 0.8, -0.6]);
    let code = "fn kernel(i: i32) {\n    let n = (x[i] * 4.0) as i32;\n    let c = i as f32;\n    loss[0] += n as f32 * c;\n}\n";
    let p = build(&graph(std::slice::from_ref(&x), code, 3, true, &[])).unwrap();
    let w: Vec<String> = weft_ir::passes::autodiff::warnings(&p)
        .iter()
        .map(|w| w.to_string())
        .collect();
    assert_eq!(w.len(), 1, "{:?}", w);
    assert!(
        w[0].starts_with(
            "warning: node 'k', code 2:13: this conversion of a differentiable value to i32"
        ),
        "{}",
        w[0]
    );
    // The gradient really is zero there (so the warning is about a real loss).
    let (_, g) = run_with(
        &graph(std::slice::from_ref(&x), code, 3, true, &[]),
        &[x],
        Backend::Vm,
    );
    assert_eq!(g[0], vec![0.0; 3]);
    // Outside a tape nothing is differentiated, so nothing is said.
    let p = build(&graph(
        &[In("x", "f32", 3, vec![0.0; 3])],
        code,
        3,
        false,
        &[],
    ))
    .unwrap();
    assert!(weft_ir::passes::autodiff::warnings(&p).is_empty());
}

/// A damped oscillator with a time-dependent force, 12 steps: in place
/// (`x[i] = x[i] + ...`, for a checkpointed tape) or on a time axis.
fn oscillator(checkpoint: Option<u32>) -> Value {
    use Item::*;
    let inputs = [
        In("x0", "f32", 4, vec![0.3, 0.8, -0.6, 1.1]),
        In("v0", "f32", 4, vec![0.1, -0.2, 0.4, 0.0]),
    ];
    match checkpoint {
        Some(k) => tape_graph_cp(
            &inputs,
            &[("x", "f32", &[4]), ("v", "f32", &[4]), ("f", "f32", &[4])],
            &[
                K("init", "fn kernel(i: i32) {\n    x[i] = x0[i];\n    v[i] = v0[i];\n}", 4),
                R("steps", 12, "t", vec![
                    K("force", "fn kernel(i: i32) {\n    let p = x[i];\n    f[i] = -p * p * p * 0.5 + sin(t as f32 * 0.3) * 0.2;\n}", 4),
                    K("integrate", "fn kernel(i: i32) {\n    let vn = v[i] * 0.98 + 0.1 * f[i];\n    v[i] = vn;\n    x[i] = x[i] + 0.1 * vn;\n}", 4),
                ]),
                K("measure", "fn kernel(i: i32) { loss[0] += x[i] * x[i] + v[i]; }", 4),
            ],
            k,
        ),
        None => tape_graph(
            &inputs,
            &[("x", "f32", &[13, 4]), ("v", "f32", &[13, 4]), ("f", "f32", &[12, 4])],
            &[
                K("init", "fn kernel(i: i32) {\n    x[(0, i)] = x0[i];\n    v[(0, i)] = v0[i];\n}", 4),
                R("steps", 12, "t", vec![
                    K("force", "fn kernel(i: i32) {\n    let p = x[(t, i)];\n    f[(t, i)] = -p * p * p * 0.5 + sin(t as f32 * 0.3) * 0.2;\n}", 4),
                    K("integrate", "fn kernel(i: i32) {\n    let vn = v[(t, i)] * 0.98 + 0.1 * f[(t, i)];\n    v[(t + 1, i)] = vn;\n    x[(t + 1, i)] = x[(t, i)] + 0.1 * vn;\n}", 4),
                ]),
                K("measure", "fn kernel(i: i32) { loss[0] += x[(12, i)] * x[(12, i)] + v[(12, i)]; }", 4),
            ],
        ),
    }
}

/// Loss, x0.grad, v0.grad and the final x of the oscillator.
fn oscillator_run(doc: &Value, backend: Backend) -> (f32, Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut sim = open(doc, backend).unwrap_or_else(|e| panic!("{}", e));
    for (name, v) in [
        ("x0", [0.3f32, 0.8, -0.6, 1.1]),
        ("v0", [0.1, -0.2, 0.4, 0.0]),
    ] {
        let f = sim.field(name).unwrap();
        sim.write_field(f, &v.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
            .unwrap();
    }
    sim.start().unwrap_or_else(|e| panic!("{}", e));
    let x = f32s(&sim, "x");
    (
        f32s(&sim, "loss")[0],
        f32s(&sim, "x0.grad"),
        f32s(&sim, "v0.grad"),
        x[x.len() - 4..].to_vec(),
    )
}

/// A checkpointed tape over in-place state gives the same gradients as the
/// full tape over a time axis, for every checkpoint interval, on every
/// backend; and both match finite differences.
#[test]
fn checkpointed_tape_matches_full_tape() {
    let (l, gx, gv, xf) = oscillator_run(&oscillator(None), Backend::Vm);
    // Finite differences of the full model.
    for (n, name) in ["x0", "v0"].iter().enumerate() {
        for c in 0..4 {
            let h = 1e-3f32;
            let eval = |d: f32| {
                let doc = oscillator(None);
                let mut sim = open(&doc, Backend::Vm).unwrap();
                let mut x0 = [0.3f32, 0.8, -0.6, 1.1];
                let mut v0 = [0.1f32, -0.2, 0.4, 0.0];
                if n == 0 {
                    x0[c] += d
                } else {
                    v0[c] += d
                }
                for (nm, v) in [("x0", x0), ("v0", v0)] {
                    let f = sim.field(nm).unwrap();
                    sim.write_field(f, &v.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
                        .unwrap();
                }
                sim.start().unwrap();
                f32s(&sim, "loss")[0] as f64
            };
            let fd = (eval(h) - eval(-h)) / (2.0 * h as f64);
            let ad = if n == 0 { gx[c] } else { gv[c] } as f64;
            assert_close(name, &[(format!("{}[{}]", name, c), ad, fd)], 1e-2, 2e-3);
        }
    }
    let mut backends = vec![Backend::Vm, Backend::Jit];
    if wgpu_available() {
        backends.push(Backend::Wgpu);
    }
    for b in backends {
        for k in [1, 2, 3, 4, 6, 12] {
            let (lc, gxc, gvc, xfc) = oscillator_run(&oscillator(Some(k)), b);
            let what = format!("{} checkpoint {}", b, k);
            assert!(close(lc, l, 1e-5, 1e-6), "{}: loss {} vs {}", what, lc, l);
            for (a, e) in gxc.iter().chain(&gvc).zip(gx.iter().chain(&gv)) {
                assert!(
                    close(*a, *e, 1e-5, 1e-6),
                    "{}: grads {:?} {:?} vs {:?} {:?}",
                    what,
                    gxc,
                    gvc,
                    gx,
                    gv
                );
            }
            // After the tape the state is the forward result again.
            for (a, e) in xfc.iter().zip(&xf) {
                assert!(
                    close(*a, *e, 1e-5, 1e-6),
                    "{}: final x {:?} vs {:?}",
                    what,
                    xfc,
                    xf
                );
            }
        }
    }
}

#[test]
fn checkpoint_misuse_is_an_error_naming_the_node() {
    use Item::*;
    let x = In("x", "f32", 3, vec![0.3, 0.8, -0.6]);
    let step = "fn kernel(i: i32) { y[i] = y[i] * x[i]; }";
    let y: (&str, &str, &[u32]) = ("y", "f32", &[3]);
    let cases: Vec<(Vec<Item>, u32, &str)> = vec![
        (
            vec![R("steps", 10, "t", vec![K("a", step, 3)])],
            4,
            "node 'tp': checkpoint 4 must divide the count 10 of repeat 'steps'",
        ),
        (
            vec![K("a", step, 3)],
            2,
            "node 'tp': checkpoint 2 needs exactly one `repeat` directly in the tape's body",
        ),
        (
            vec![R(
                "steps",
                4,
                "t",
                vec![R("sub", 2, "t", vec![K("a", step, 3)])],
            )],
            2,
            "node 'steps': the body of a checkpointed repeat may only launch kernels",
        ),
        // In place, but a kernel reads what it wrote.
        (
            vec![R(
                "steps",
                4,
                "t",
                vec![K(
                    "a",
                    "fn kernel(i: i32) {\n    y[i] = x[i];\n    loss[0] += y[i];\n}",
                    3,
                )],
            )],
            2,
            "node 'a', code 3:16: reads field 'y' after writing it",
        ),
    ];
    for (items, k, want) in cases {
        let doc = tape_graph_cp(std::slice::from_ref(&x), &[y], &items, k);
        match open(&doc, Backend::Vm) {
            Ok(_) => panic!("expected an error: {}", want),
            Err(e) => assert!(e.to_string().contains(want), "want '{}' in:\n{}", want, e),
        }
    }
}

/// The checkpointed variant (state in place, a checkpoint every 16 of 512
/// steps) gives the peers' checksums too, with 49 instead of 513 copies of
/// the state.
#[test]
fn checkpointed_mass_spring_matches_the_peers() {
    let doc = example("mass_spring_ad_ckpt");
    let mut sim = Simulation::new(
        build(&doc).unwrap(),
        &SimOptions {
            backend: Backend::Jit,
            threads: Some(1),
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{}", e));
    sim.start().unwrap_or_else(|e| panic!("{}", e));
    let loss = f32s(&sim, "loss")[0] as f64;
    let gv0: f64 = f32s(&sim, "v0.grad").iter().map(|&x| x as f64).sum();
    assert!((loss - 0.389684).abs() < 2e-6, "loss {}", loss);
    assert!((gv0 - -0.40204).abs() < 2e-5, "grad_v0_sum {}", gv0);
    // Checkpoints: 512 / 16 + 1 slots of x; segment: 16 slots.
    let p = &sim.program;
    let shape = |n: &str| p.fields[p.field_by_name(n).unwrap()].shape.clone();
    assert_eq!(shape("tape.ckpt.x"), vec![33, 1000]);
    assert_eq!(shape("tape.seg.x"), vec![16, 1000]);
}

/// `graphs/implicit_spring_ad.json`: Newton's method in a `while` loop with
/// carried locals inside a range loop; its gradients match central finite
/// differences of the forward run, on the cpu backend and wgpu alike.
#[test]
fn while_loop_example_is_gradient_checked() {
    let doc = example("implicit_spring_ad");
    let open_b = |b: Backend| {
        Simulation::new(
            build(&doc).unwrap(),
            &SimOptions {
                backend: b,
                threads: Some(1),
                ..Default::default()
            },
        )
        .unwrap_or_else(|e| panic!("{}", e))
    };
    let mut sim = open_b(Backend::Jit);
    let x0 = sim.read_field(sim.field("x0").unwrap()).unwrap();
    sim.start().unwrap();
    let ad = f32s(&sim, "x0.grad");
    assert!(ad.iter().any(|&g| g.abs() > 1e-4), "{:?}", ad);
    let f = sim.field("x0").unwrap();
    for c in [0usize, 17, 40, 63] {
        let x = f32::from_bits(x0[c]);
        let h = 1e-3f32;
        let mut eval = |v: f32| {
            sim.reset().unwrap();
            let mut w = x0.clone();
            w[c] = v.to_bits();
            sim.write_field(f, &w).unwrap();
            sim.start().unwrap();
            (f32s(&sim, "loss")[0] as f64, v as f64)
        };
        let (lp, xp) = eval(x + h);
        let (lm, xm) = eval(x - h);
        let fd = (lp - lm) / (xp - xm);
        assert_close(
            "implicit_spring_ad",
            &[(format!("x0[{}]", c), ad[c] as f64, fd)],
            2e-2,
            1e-5,
        );
    }
    if wgpu_available() {
        let mut g = open_b(Backend::Wgpu);
        g.start().unwrap();
        for (a, b) in f32s(&g, "x0.grad").iter().zip(&ad) {
            assert!(close(*a, *b, 1e-3, 1e-7), "wgpu {} vs cpu {}", a, b);
        }
    }
}

/// Local arrays are scalarised into locals before differentiation: weights
/// in an array, written with run-time and constant indices, read in a loop.
#[test]
fn local_arrays_match_finite_differences() {
    let x = || In("x", "f32", 3, vec![0.3, 0.8, -0.6]);
    let cases = [
        "let mut w = [0.0; 3];\n    for k in 0..3 { w[k] = x[k] * (k + 1) as f32; }\n    w[i] += sin(x[i]);\n    let mut s = 0.0;\n    for k in 0..3 { s += w[k] * w[(k + i) % 3]; }\n    loss[0] += s;",
        "let c: [f32; 3] = [x[0], x[1] * x[1], 2.0];\n    let mut v = [vec2(0.0, 0.0); 2];\n    v[i % 2] = vec2(c[i], c[2 - i]);\n    let mut acc = 0.0;\n    for q in 0..(i + 1) { acc += c[q] * v[q % 2].x + v[1].y; }\n    loss[0] += acc * acc;",
    ];
    for body in cases {
        let code = format!("fn kernel(i: i32) {{\n    {}\n}}\n", body);
        assert_close(body, &ad_and_fd(&[x()], &code, 3, 1e-3), 1e-2, 2e-3);
    }
}

/// A `#[block(N)]` kernel (shared arrays, barriers) inside a tape is
/// refused, naming the kernel, in reverse and forward mode alike.
#[test]
fn workgroup_kernels_are_refused_by_autodiff() {
    let code = "#[block(4)]\nfn kernel(i: i32) {\n    let s = shared([0.0; 4]);\n    s[i % 4] = x[i];\n    barrier();\n    atomic_add(loss[0], s[(i + 1) % 4] * x[i]);\n}";
    let mut doc = graph(&[In("x", "f32", 8, vec![1.0; 8])], code, 8, true, &[]);
    for mode in ["reverse", "forward"] {
        set_param(&mut doc, "tp", "mode", json!(mode));
        if mode == "forward" {
            set_param(&mut doc, "tp", "wrt", json!("x"));
        }
        let e = open(&doc, Backend::Vm)
            .map(|_| ())
            .expect_err(mode)
            .to_string();
        assert!(
            e.contains("'k'")
                && e.contains("#[block(4)]")
                && e.contains(&format!("{} mode cannot differentiate", mode)),
            "{}: {}",
            mode,
            e
        );
    }
}

/// Gradients are f32: a differentiated kernel computing in 64 bits is
/// refused in both modes, naming the kernel and the line of the first
/// 64-bit value.
#[test]
fn wide_kernels_are_refused_by_autodiff() {
    let code = "fn kernel(i: i32) {\n    let y = x[i] * 2.0;\n    let d = y as f64 * 0.5;\n    loss[0] += d as f32;\n}";
    let mut doc = graph(&[In("x", "f32", 8, vec![1.0; 8])], code, 8, true, &[]);
    for mode in ["reverse", "forward"] {
        set_param(&mut doc, "tp", "mode", json!(mode));
        if mode == "forward" {
            set_param(&mut doc, "tp", "wrt", json!("x"));
        }
        let e = open(&doc, Backend::Vm)
            .map(|_| ())
            .expect_err(mode)
            .to_string();
        assert!(
            e.contains("'k'")
                && e.contains("3:")
                && e.contains("f64")
                && e.contains(&format!("{} mode does not differentiate", mode)),
            "{}: {}",
            mode,
            e
        );
    }
}

/// Structs, tuples and helpers returning them or arrays are scalarised (and
/// inlined) before differentiation: a struct built by a helper, changed,
/// copied and passed by value; a tuple `let`; an array-returning helper; a
/// helper with early `return`s inside a loop returning a tuple holding a
/// struct; an `if` choosing a struct.
#[test]
fn structs_and_tuples_match_finite_differences() {
    let x = || In("x", "f32", 3, vec![0.3, 0.8, -0.6]);
    let defs = "struct P { x: f32, v: vec2, w: [f32; 2] }\nfn make(a: f32, b: f32) -> P { P { x: a * b, v: vec2(a, b * b), w: [sin(a), a + b] } }\nfn parts(p: P) -> (f32, f32) { (p.x + p.w[0], dot(p.v, p.v) * p.w[1]) }\nfn weights(fx: f32) -> [f32; 3] { [0.5 * (1.5 - fx) * (1.5 - fx), 0.75 - (fx - 1.0) * (fx - 1.0), 0.5 * (fx - 0.5) * (fx - 0.5)] }\nfn pick(a: f32) -> (f32, P) {\n    for k in 0..3 { if a * (k + 1) as f32 > 1.0 { return (a * a * k as f32, make(a, 2.0)); } }\n    (a * 3.0, make(1.0, a))\n}\nfn energy(p: P) -> f32 { p.x * p.x + p.v.y * p.w[1] }\n";
    for body in [
        "let mut p = make(x[i], x[(i + 1) % 3]);\n    p.v.x += p.x * 0.5;\n    let q = p;\n    p.w[1] = q.v.y * 2.0;\n    let (a, b) = parts(p);\n    let w = weights(x[i] + 0.3);\n    loss[0] += a * b + w[0] * w[1] + w[2] * q.v.x + energy(q);",
        "let t = pick(x[i]);\n    let s = if x[i] > 0.0 { t.1 } else { P { x: t.0, ..t.1 } };\n    loss[0] += t.0 * s.x + energy(s) + weights(x[(i + 2) % 3])[i];",
    ] {
        let code = format!("{}fn kernel(i: i32) {{\n    {}\n}}\n", defs, body);
        assert_close(body, &ad_and_fd(&[x()], &code, 3, 1e-3), 1e-2, 2e-3);
    }
}

/// A kernel computing with f16 is refused by reverse mode, naming the
/// kernel: binary16 rounding (integer operations) has no derivative.
#[test]
fn f16_kernels_are_refused_by_reverse_mode() {
    let e = compile_error(
        "fn kernel(i: i32) {\n    let h = x[i] as f16;\n    loss[0] += (h * h) as f32;\n}\n",
        &[In("x", "f32", 2, vec![0.5, 1.0])],
    );
    assert!(
        e.contains("kernel 'k' computes with f16 values, which reverse mode cannot differentiate"),
        "{}",
        e
    );
}
