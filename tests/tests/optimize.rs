//! The `optimize` node (`passes::optimize`): gradient descent against its
//! closed form on a quadratic, Adam against a hand-written reference of the
//! update, the loss history ring, the same results on vm, cpu and wgpu, and
//! the documented errors (each naming the node and parameter).

use serde_json::{json, Value};
use weft_ir::passes::PassOptions;
use weft_runtime::{Backend, SimOptions, Simulation};
use weft_tests::*;

/// A graph fitting `fields` (id, type, count, init) to the loss computed by
/// `code` (a kernel over `range` reading the fields and `loss`), with an
/// optimize node `fit` of `params` in `event` (on_start or on_frame).
fn fit_graph(
    fields: &[(&str, &str, u32, Value)],
    code: &str,
    range: u32,
    params: Value,
    event: &str,
) -> Value {
    let mut nodes = vec![
        json!({"id": "one", "kind": "dense", "params": {"shape": [1]}}),
        json!({"id": "loss", "kind": "field", "params": {"grad": true}}),
        json!({"id": "ev", "kind": event}),
        json!({"id": "fit", "kind": "optimize", "params": params}),
        json!({"id": "k", "kind": "kernel", "params": {"code": code, "range": [range]}}),
    ];
    let mut wires = vec![
        json!({"from": "one", "to": "loss"}),
        json!({"from": "loss.field", "to": "k.loss"}),
    ];
    for (id, ty, n, init) in fields {
        let l = format!("{}_cells", id);
        nodes.push(json!({"id": l, "kind": "dense", "params": {"shape": [n]}}));
        nodes.push(
            json!({"id": id, "kind": "field", "params": {"type": ty, "grad": true, "init": init}}),
        );
        wires.push(json!({"from": l, "to": id}));
        if code.contains(&format!("{}[", id)) {
            wires.push(json!({"from": format!("{}.field", id), "to": format!("k.{}", id)}));
        }
    }
    json!({"format": "weft-graph", "version": 1, "nodes": nodes, "wires": wires,
        "exec": [{"from": "ev", "to": "fit"}, {"from": "fit.body", "to": "k"}]})
}

fn open(doc: &Value, backend: Backend) -> Simulation {
    Simulation::new(
        build(doc).unwrap_or_else(|e| panic!("{}", e)),
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
    .unwrap_or_else(|e| panic!("{}", e))
}

fn backends() -> Vec<Backend> {
    let mut b = vec![Backend::Vm, Backend::Jit];
    if wgpu_available() {
        b.push(Backend::Wgpu);
    }
    b
}

const QUADRATIC: &str = "fn kernel(i: i32) { let d = x[i] - c[i]; loss[0] += d * d; }";
const X0: [f32; 4] = [1.0, -2.0, 3.0, 0.5];
const C: [f32; 4] = [0.5, 1.0, -1.0, 2.0];

fn quadratic(params: Value) -> Value {
    // x starts at 0 (the tests write X0), c is a constant target: a field
    // without a gradient is a constant of the tape.
    let mut g = fit_graph(
        &[("x", "f32", 4, json!(0.0))],
        QUADRATIC,
        4,
        params,
        "on_start",
    );
    let nodes = g["nodes"].as_array_mut().unwrap();
    nodes.push(json!({"id": "c_cells", "kind": "dense", "params": {"shape": [4]}}));
    nodes.push(json!({"id": "c", "kind": "field"}));
    let wires = g["wires"].as_array_mut().unwrap();
    wires.push(json!({"from": "c_cells", "to": "c"}));
    wires.push(json!({"from": "c.field", "to": "k.c"}));
    g
}

fn set(sim: &mut Simulation, name: &str, v: &[f32]) {
    let f = sim.field(name).unwrap();
    sim.write_field(f, &v.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
        .unwrap();
}

#[test]
fn gradient_descent_on_a_quadratic_matches_the_closed_form() {
    // loss = sum (x - c)^2, g = 2 (x - c): one step multiplies x - c by
    // (1 - 2 lr), so after k steps x = c + (1 - 2 lr)^k (x0 - c) and the
    // loss of iteration k is (1 - 2 lr)^(2k) * sum (x0 - c)^2.
    let (lr, k) = (0.1f64, 5);
    let doc =
        quadratic(json!({"loss": "loss", "wrt": ["x"], "method": "gd", "lr": lr, "iterations": k}));
    let l0: f64 = X0
        .iter()
        .zip(C)
        .map(|(&a, b)| ((a - b) as f64).powi(2))
        .sum();
    for backend in backends() {
        let mut sim = open(&doc, backend);
        set(&mut sim, "x", &X0);
        set(&mut sim, "c", &C);
        sim.start().unwrap();
        let r = 1.0 - 2.0 * lr;
        let x = f32s(&sim, "x");
        for i in 0..4 {
            let want = C[i] as f64 + r.powi(k) * (X0[i] - C[i]) as f64;
            assert!(
                close(x[i], want as f32, 1e-5, 1e-6),
                "{:?}: x[{}] = {} want {}",
                backend,
                i,
                x[i],
                want
            );
        }
        let hist = f32s(&sim, "fit.loss");
        assert_eq!(hist.len(), 1000, "default history");
        for (it, h) in hist.iter().take(k as usize).enumerate() {
            let want = r.powi(2 * it as i32) * l0;
            assert!(
                close(*h, want as f32, 1e-5, 1e-6),
                "{:?}: loss[{}] = {} want {}",
                backend,
                it,
                h,
                want
            );
        }
        assert!(hist[k as usize..].iter().all(|&h| h == 0.0));
        assert_eq!(i32s(&sim, "fit.step"), vec![k]);
        // The loss field holds the last iteration's loss (it is zeroed
        // before each iteration, not accumulated across them).
        assert!(close(
            f32s(&sim, "loss")[0],
            hist[k as usize - 1],
            1e-6,
            0.0
        ));
        // The gradient is that of the last iteration's parameters.
        let g = f32s(&sim, "x.grad");
        let x4: Vec<f64> = (0..4)
            .map(|i| C[i] as f64 + r.powi(k - 1) * (X0[i] - C[i]) as f64)
            .collect();
        for i in 0..4 {
            assert!(
                close(g[i], (2.0 * (x4[i] - C[i] as f64)) as f32, 1e-5, 1e-6),
                "{:?} grad",
                backend
            );
        }
    }
}

/// Adam as in Kingma & Ba (2015), Algorithm 1, in f64: the reference.
struct AdamRef {
    m: Vec<f64>,
    v: Vec<f64>,
    t: i32,
}

impl AdamRef {
    fn step(&mut self, x: &mut [f64], g: &[f64], lr: f64, b1: f64, b2: f64, eps: f64) {
        self.t += 1;
        for i in 0..x.len() {
            self.m[i] = b1 * self.m[i] + (1.0 - b1) * g[i];
            self.v[i] = b2 * self.v[i] + (1.0 - b2) * g[i] * g[i];
            let mhat = self.m[i] / (1.0 - b1.powi(self.t));
            let vhat = self.v[i] / (1.0 - b2.powi(self.t));
            x[i] -= lr * mhat / (vhat.sqrt() + eps);
        }
    }
}

#[test]
fn adam_matches_a_hand_written_reference() {
    // A vec2 field p (3 elements) and a scalar field s (2): loss =
    // sum_i w_i |p_i - a_i|^2 + sum_j s_j^4, so g_p = 2 w_i (p_i - a_i) and
    // g_s = 4 s^3, with different scales per component (where Adam and gd differ).
    let code = "fn kernel(i: i32) {
        if i < 3 {
            let w = 1.0 + 3.0 * (i as f32);
            let d = p[i] - vec2(0.5, -1.0);
            loss[0] += w * dot(d, d);
        } else {
            let v = s[i - 3];
            loss[0] += v * v * v * v;
        }
    }";
    let p0 = [1.0f32, 2.0, -1.5, 0.25, 3.0, -2.0];
    let s0 = [0.8f32, -1.2];
    let (lr, b1, b2, eps, iters) = (0.05, 0.8, 0.95, 1e-6, 6);
    let doc = fit_graph(
        &[("p", "vec2", 3, json!(0.0)), ("s", "f32", 2, json!(0.0))],
        code,
        5,
        json!({"loss": "loss", "wrt": ["p", "s"], "method": "adam", "lr": lr, "iterations": iters,
               "beta1": b1, "beta2": b2, "eps": eps}),
        "on_start",
    );
    // The reference, in f64 from the same f32 starting values.
    let mut x: Vec<f64> = p0.iter().chain(&s0).map(|&v| v as f64).collect();
    let mut adam = AdamRef {
        m: vec![0.0; 8],
        v: vec![0.0; 8],
        t: 0,
    };
    let mut losses = vec![];
    let (b1f, b2f, epsf) = (b1 as f32 as f64, b2 as f32 as f64, eps as f32 as f64);
    for _ in 0..iters {
        let mut g = vec![0.0; 8];
        let mut l = 0.0;
        for i in 0..3 {
            let w = 1.0 + 3.0 * i as f64;
            for (c, a) in [0.5, -1.0].iter().enumerate() {
                let d = x[2 * i + c] - a;
                l += w * d * d;
                g[2 * i + c] = 2.0 * w * d;
            }
        }
        for j in 0..2 {
            let v = x[6 + j];
            l += v.powi(4);
            g[6 + j] = 4.0 * v.powi(3);
        }
        losses.push(l);
        adam.step(&mut x, &g, lr as f32 as f64, b1f, b2f, epsf);
    }
    for backend in backends() {
        let mut sim = open(&doc, backend);
        set(&mut sim, "p", &p0);
        set(&mut sim, "s", &s0);
        sim.start().unwrap();
        let got: Vec<f32> = f32s(&sim, "p").into_iter().chain(f32s(&sim, "s")).collect();
        for (i, (&a, &b)) in got.iter().zip(&x).enumerate() {
            assert!(
                close(a, b as f32, 2e-5, 2e-6),
                "{:?}: component {}: {} vs reference {}",
                backend,
                i,
                a,
                b
            );
        }
        let hist = f32s(&sim, "fit.loss");
        for (it, &l) in losses.iter().enumerate() {
            assert!(
                close(hist[it], l as f32, 2e-5, 1e-6),
                "{:?}: loss {}: {} vs {}",
                backend,
                it,
                hist[it],
                l
            );
        }
        // The moments are fields: m of the last step is readable.
        assert_eq!(f32s(&sim, "fit.m.p").len(), 6);
        assert_eq!(f32s(&sim, "fit.v.s").len(), 2);
        let pow = f32s(&sim, "fit.beta_pow");
        assert!(
            close(pow[0], (b1 as f32).powi(iters), 1e-6, 0.0)
                && close(pow[1], (b2 as f32).powi(iters), 1e-6, 0.0)
        );
        // Adam's moment buffers appear in the memory report like any layout.
        let mem = weft_ir::ir::layout::memory_lines(&sim.program).join("\n");
        for name in ["fit.m.p", "fit.v.p", "fit.m.s", "fit.v.s", "fit.loss"] {
            assert!(
                mem.contains(&format!("'{}'", name)),
                "{} missing from\n{}",
                name,
                mem
            );
        }
    }
}

#[test]
fn backends_agree_and_the_history_ring_spans_frames() {
    // In on_frame: 2 iterations per frame, a ring of 3 slots, 4 frames → 8
    // iterations; slot n % 3 holds the loss of iteration n, the last three.
    let doc = quadratic(
        json!({"loss": "loss", "wrt": ["x"], "method": "adam", "lr": 0.2, "iterations": 2, "history": 3}),
    );
    let mut doc = doc;
    doc["nodes"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .for_each(|n| {
            if n["id"] == "ev" {
                n["kind"] = json!("on_frame");
            }
        });
    let mut runs = vec![];
    for backend in backends() {
        let mut sim = open(&doc, backend);
        set(&mut sim, "x", &X0);
        set(&mut sim, "c", &C);
        // Every iteration's loss, read after each frame from the ring.
        let mut all = vec![];
        for _ in 0..4 {
            sim.step_frame().unwrap();
            let n = i32s(&sim, "fit.step")[0] as usize;
            let ring = f32s(&sim, "fit.loss");
            all.push(ring[(n - 2) % 3]);
            all.push(ring[(n - 1) % 3]);
        }
        assert_eq!(i32s(&sim, "fit.step"), vec![8]);
        for w in all.windows(2) {
            assert!(w[1] < w[0], "{:?}: the loss falls: {:?}", backend, all);
        }
        runs.push((backend, f32s(&sim, "x"), all));
        // Reset restores the parameters' start and empties the history.
        sim.reset().unwrap();
        assert_eq!(i32s(&sim, "fit.step"), vec![0]);
        assert!(f32s(&sim, "fit.m.x").iter().all(|&m| m == 0.0));
    }
    let (_, x_ref, l_ref) = &runs[0];
    for (b, x, l) in &runs[1..] {
        for (a, r) in x.iter().zip(x_ref).chain(l.iter().zip(l_ref)) {
            assert!(
                close(*a, *r, 1e-5, 1e-6),
                "{:?} differs from vm: {:?} vs {:?}",
                b,
                x,
                x_ref
            );
        }
    }
}

fn error_of(doc: &Value) -> String {
    match build(doc) {
        Err(e) => e.to_string(),
        Ok(p) => match Simulation::new(p, &SimOptions::default()) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("expected an error"),
        },
    }
}

#[test]
fn bad_parameters_are_errors_naming_the_node() {
    let base = json!({"loss": "loss", "wrt": ["x"], "method": "gd", "lr": 0.1, "iterations": 2});
    let with = |k: &str, v: Value| {
        let mut p = base.clone();
        p[k] = v;
        quadratic(p)
    };
    for (doc, want) in [
        (with("wrt", json!(["nope"])), "'nope' is not a field node"),
        (
            with("wrt", json!(["c"])),
            "the updated field 'c' needs `\"grad\": true`",
        ),
        (with("wrt", json!([])), "non-empty list"),
        (with("wrt", json!(["x", "x"])), "'x' is listed twice"),
        (with("wrt", json!(["loss"])), "'loss' is the loss field"),
        (
            with("loss", json!("c")),
            "the loss field 'c' needs `\"grad\": true`",
        ),
        (with("lr", json!(0.0)), "lr must be greater than 0"),
        (with("lr", json!(-1.0)), "lr must be 0 to"),
        (with("iterations", json!(0)), "iterations must be 1 to"),
        (with("method", json!("sgd")), "expected one of gd, adam"),
    ] {
        let e = error_of(&doc);
        assert!(
            e.contains("'fit'") && e.contains(want),
            "{}\nwanted: {}",
            e,
            want
        );
    }
    let mut adam = base.clone();
    adam["method"] = json!("adam");
    adam["beta1"] = json!(1.0);
    let e = error_of(&quadratic(adam.clone()));
    assert!(
        e.contains("'fit'") && e.contains("beta1 must be at least 0 and below 1"),
        "{}",
        e
    );
    adam["beta1"] = json!(0.9);
    adam["eps"] = json!(0.0);
    let e = error_of(&quadratic(adam));
    assert!(
        e.contains("'fit'") && e.contains("eps must be greater than 0"),
        "{}",
        e
    );
}

#[test]
fn nesting_sparse_and_quantized_fields_are_refused() {
    let base = json!({"loss": "loss", "wrt": ["x"], "method": "gd", "lr": 0.1});
    // An optimize node inside a tape, and a tape inside an optimize node.
    let mut doc = quadratic(base.clone());
    doc["nodes"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id": "tp", "kind": "tape", "params": {"loss": "loss"}}));
    doc["exec"] = json!([{"from": "ev", "to": "tp"}, {"from": "tp.body", "to": "fit"}, {"from": "fit.body", "to": "k"}]);
    let e = error_of(&doc);
    assert!(
        e.contains("'fit'") && e.contains("cannot be inside tape 'tp'"),
        "{}",
        e
    );
    doc["exec"] = json!([{"from": "ev", "to": "fit"}, {"from": "fit.body", "to": "tp"}, {"from": "tp.body", "to": "k"}]);
    let e = error_of(&doc);
    assert!(
        e.contains("'tp'") && e.contains("inside optimize 'fit'"),
        "{}",
        e
    );
    // x under a bitmasked node.
    let mut doc = quadratic(base.clone());
    for n in doc["nodes"].as_array_mut().unwrap() {
        if n["id"] == "x_cells" {
            n["kind"] = json!("bitmasked");
        }
    }
    let e = error_of(&doc);
    assert!(
        e.contains("'fit'") && e.contains("sparse node 'x_cells'"),
        "{}",
        e
    );
    // x with fixed-point storage.
    let mut doc = quadratic(base);
    for n in doc["nodes"].as_array_mut().unwrap() {
        if n["id"] == "x" {
            n["params"]["storage"] = json!("fixed16[-4,4]");
        }
    }
    let e = error_of(&doc);
    assert!(
        e.contains("'fit'") && e.contains("quantized storage"),
        "{}",
        e
    );
}

/// The loss of every iteration so far, oldest first, from the ring.
fn loss_history(sim: &Simulation, node: &str) -> Vec<f32> {
    let n = i32s(sim, &format!("{}.step", node))[0] as usize;
    let ring = f32s(sim, &format!("{}.loss", node));
    let kept = n.min(ring.len());
    (n - kept..n).map(|it| ring[it % ring.len()]).collect()
}

#[test]
fn heat_inverse_loss_falls_monotonically_on_every_backend() {
    // graphs/heat_inverse.json: Adam on the initial temperature so that 16
    // diffusion steps reach a target image; 4 iterations per frame.
    let doc = example("heat_inverse");
    let mut finals = vec![];
    for backend in backends() {
        // The VM and lavapipe are slower: fewer frames there.
        let frames = if backend == Backend::Jit { 40 } else { 6 };
        let mut sim = open(&doc, backend);
        sim.start().unwrap();
        for _ in 0..frames {
            sim.step_frame().unwrap();
        }
        let l = loss_history(&sim, "fit");
        assert_eq!(l.len(), 4 * frames, "{:?}", backend);
        // Starting from u0 = 0 the loss is the target's number of hot cells.
        let hot = f32s(&sim, "target").iter().filter(|&&t| t == 1.0).count();
        assert_eq!(l[0], hot as f32, "{:?}", backend);
        for (it, w) in l.windows(2).enumerate() {
            assert!(
                w[1] < w[0],
                "{:?}: the loss rose at iteration {}: {:?}",
                backend,
                it + 1,
                l
            );
        }
        if backend == Backend::Jit {
            assert!(l[l.len() - 1] < 0.15 * l[0], "the fit gets close: {:?}", l);
        }
        // The views show the estimate, its diffusion and the target.
        for (name, img) in sim.render_views().unwrap() {
            assert!(!img.is_blank(), "view {} is blank", name);
        }
        finals.push((backend, l[4 * 6 - 1]));
    }
    for (b, l) in &finals[1..] {
        assert!(
            close(*l, finals[0].1, 1e-4, 0.0),
            "{:?}: iteration 24 loss {} vs {}",
            b,
            l,
            finals[0].1
        );
    }
}
