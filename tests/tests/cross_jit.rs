//! The compiled CPU backend (`jit`) against the reference interpreter: every
//! example, a corpus of kernels covering the language and its edge cases,
//! and the fault cases give bit-identical fields (or the same error). With
//! one worker thread even float atomics add in the same order, so every
//! field is compared bit for bit. Also: bad indices never reach memory
//! outside a buffer (bounds checks off), compile failures are errors naming
//! the kernel, and unchanged kernels are not recompiled.
//!
//! The whole language test file also runs on the JIT with
//! `WEFT_TEST_BACKEND=jit cargo test -p weft-tests --test language` (CI does).

use serde_json::{json, Value};
use std::sync::Arc;
use weft_ir::passes::PassOptions;
use weft_runtime::{Backend, RuntimeError, SimOptions, Simulation};
use weft_tests::corpus::{corpus, corpus_graph, edge_cases, edge_graph};
use weft_tests::*;

fn sim_with(
    doc: &Value,
    frames: u32,
    backend: Backend,
    threads: usize,
    passes: PassOptions,
) -> Result<Simulation, RuntimeError> {
    let p = build(doc)?;
    let opts = SimOptions {
        backend,
        threads: Some(threads),
        passes,
        ..Default::default()
    };
    let mut s = Simulation::new(p, &opts)?;
    s.start()?;
    for _ in 0..frames {
        s.step_frame()?;
    }
    Ok(s)
}

fn sim(
    doc: &Value,
    frames: u32,
    backend: Backend,
    threads: usize,
) -> Result<Simulation, RuntimeError> {
    sim_with(
        doc,
        frames,
        backend,
        threads,
        PassOptions {
            validate: true,
            ..Default::default()
        },
    )
}

/// Every field, bit for bit; returns the differences.
fn diff(name: &str, a: &Simulation, b: &Simulation) -> Vec<String> {
    let mut out = Vec::new();
    for (h, f) in a.program.fields.iter() {
        let x = a.read_field(h).unwrap();
        let y = b.read_field(b.field(&f.name).unwrap()).unwrap();
        let bad: Vec<usize> = (0..x.len()).filter(|&k| x[k] != y[k]).collect();
        if let Some(&k) = bad.first() {
            out.push(format!(
                "{}: field '{}' differs in {} of {} words; first at {}: vm {:#010x} ({}) jit {:#010x} ({})",
                name,
                f.name,
                bad.len(),
                x.len(),
                k,
                x[k],
                f32::from_bits(x[k]),
                y[k],
                f32::from_bits(y[k])
            ));
        }
    }
    out
}

/// Runs `doc` on both backends; the same fields, or the same error.
fn agree(name: &str, doc: &Value, frames: u32, threads: usize) -> Vec<String> {
    let vm = sim(doc, frames, Backend::Vm, 1);
    let jit = sim(doc, frames, Backend::Jit, threads);
    match (vm, jit) {
        (Ok(a), Ok(b)) => {
            assert_eq!(b.backend(), Some(Backend::Jit));
            diff(name, &a, &b)
        }
        (Err(a), Err(b)) if a.to_string() == b.to_string() => vec![],
        (a, b) => vec![format!(
            "{}: vm {:?} but jit {:?}",
            name,
            a.err().map(|e| e.to_string()),
            b.err().map(|e| e.to_string())
        )],
    }
}

#[test]
fn examples_are_bit_identical_to_the_interpreter() {
    let mut problems = Vec::new();
    for (name, frames) in [
        ("julia", 2),
        ("heat", 2),
        ("heat_color", 2),
        ("life", 3),
        ("mpm88", 1),
    ] {
        let mut g = example(name);
        if name == "mpm88" {
            set_param(&mut g, "substeps", "count", json!(10));
        }
        problems.extend(agree(name, &g, frames, 1));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn kernels_without_atomics_are_identical_on_many_threads() {
    let mut problems = Vec::new();
    for (name, frames) in [("julia", 1), ("life", 2), ("heat", 1)] {
        problems.extend(agree(name, &example(name), frames, 4));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn language_corpus_is_bit_identical_to_the_interpreter() {
    let mut problems = Vec::new();
    for (name, fields, code, range) in corpus() {
        let g = corpus_graph(&fields, &code, &range);
        // Two frames: the kernel runs once in on_start; frames exercise launch indices.
        let vm = sim(&g, 0, Backend::Vm, 1)
            .unwrap_or_else(|e| panic!("{} on the interpreter: {}", name, e));
        // Cranelift's verifier accepts every generated function.
        let mut p = build(&g).unwrap();
        weft_ir::passes::run_pipeline(&mut p, &Default::default(), None).unwrap();
        for (_, k) in p.kernels.iter() {
            let opts = weft_codegen::jit::JitOptions {
                optimize: true,
                verify: true,
                simd: true,
            };
            if let Err(e) = weft_codegen::jit::compile_kernel(&p, k, &opts) {
                problems.push(format!("{}: verifier: {}", name, e));
            }
        }
        match sim(&g, 0, Backend::Jit, 1) {
            Ok(j) => problems.extend(diff(name, &vm, &j)),
            Err(e) => problems.push(format!("{} on the jit: {}", name, e)),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn edge_and_fault_cases_agree_with_the_interpreter() {
    let mut problems = Vec::new();
    for (name, code, ty, init) in edge_cases() {
        problems.extend(agree(name, &edge_graph(code, ty, init), 2, 1));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn faults_name_the_kernel_and_line_like_the_interpreter() {
    let g = kernel_graph(
        &[F("x", "f32", &[8], json!(0))],
        "fn kernel(i: i32) {\n    x[i + 1] = 1.0;\n}",
        &[8],
        json!({}),
    );
    let e = sim(&g, 0, Backend::Jit, 2)
        .err()
        .expect("must fail")
        .to_string();
    assert!(
        e.contains("node 'k', code 2:5")
            && e.contains("index 8 is out of bounds for axis 0 of field 'x' (extent 8)"),
        "{}",
        e
    );
    let g = kernel_graph(
        &[F("o", "i32", &[1], json!(0))],
        "fn kernel(i: i32) {\n  for k in (0..10).step_by(i - 1) { o[0] += 1; }\n}",
        &[1],
        json!({}),
    );
    let e = sim(&g, 0, Backend::Jit, 1)
        .err()
        .expect("must fail")
        .to_string();
    assert!(
        e.contains("node 'k', code 2:3") && e.contains("positive step, got -1"),
        "{}",
        e
    );
}

#[test]
fn without_bounds_checks_bad_indices_never_leave_the_buffer() {
    let no_checks = PassOptions {
        bounds_checks: false,
        validate: true,
        ..Default::default()
    };
    for (code, ok) in [
        ("fn kernel(i: i32) {\n    x[i + 1000000] = 1.0;\n}", false),
        ("fn kernel(i: i32) {\n    x[-1 - i] = 2.0;\n}", false),
        ("fn kernel(i: i32) {\n    y[i] = x[i * 100000];\n}", false),
        (
            "fn kernel(i: i32) {\n    x[(i * 65536) % 8] += 1.0;\n}",
            true,
        ),
        (
            "fn kernel(i: i32) {\n    atomic_add(x[i - 2147483647], 1.0);\n}",
            false,
        ),
    ] {
        let g = kernel_graph(
            &[F("x", "f32", &[8], json!(0)), F("y", "f32", &[8], json!(0))],
            code,
            &[8],
            json!({}),
        );
        match sim_with(&g, 0, Backend::Jit, 2, no_checks.clone()) {
            Ok(_) => assert!(ok, "{} ran without a fault", code),
            Err(e) => {
                let m = e.to_string();
                assert!(!ok, "{}: {}", code, m);
                assert!(
                    m.contains("node 'k', code 2:") && m.contains("outside the field storage"),
                    "{}",
                    m
                );
            }
        }
    }
}

#[test]
fn compile_failures_are_errors_naming_the_kernel() {
    // IR that skipped access lowering is valid IR the JIT must refuse, not crash on.
    let g = kernel_graph(
        &[F("x", "f32", &[8], json!(0))],
        "fn kernel(i: i32) { x[i] = x[i] * 2.0; }",
        &[8],
        json!({}),
    );
    let mut p = build(&g).unwrap();
    weft_ir::passes::run_pipeline(
        &mut p,
        &Default::default(),
        Some(weft_ir::passes::Stage::Simplify),
    )
    .unwrap();
    let k = p.kernel_by_name("k").unwrap();
    let e = weft_codegen::jit::compile_kernel(&p, &p.kernels[k], &Default::default())
        .expect_err("unlowered access must be refused");
    let m = e.to_string();
    assert!(
        m.contains("node 'k'") && m.contains("jit") && m.contains("internal error"),
        "{}",
        m
    );
}

#[test]
fn unchanged_kernels_are_not_recompiled() {
    let compile_all = |g: &Value| {
        let mut p = build(g).unwrap();
        weft_ir::passes::run_pipeline(&mut p, &Default::default(), None).unwrap();
        p.kernels
            .iter()
            .map(|(_, k)| {
                (
                    k.name.clone(),
                    weft_runtime::jit::compile_cached(&p, k, &Default::default()).unwrap(),
                )
            })
            .collect::<Vec<_>>()
    };
    let mut g = example("heat");
    let a = compile_all(&g);
    let b = compile_all(&g);
    assert!(a.iter().zip(&b).all(|(x, y)| Arc::ptr_eq(&x.1, &y.1)));
    set_param(
        &mut g,
        "apply",
        "code",
        json!("fn kernel(i: i32, j: i32) { T[(i, j)] = T_next[(i, j)] * 0.5; }"),
    );
    let c = compile_all(&g);
    for ((name, x), (_, y)) in a.iter().zip(&c) {
        assert_eq!(
            Arc::ptr_eq(x, y),
            name != "apply",
            "kernel {} recompiled: {}",
            name,
            !Arc::ptr_eq(x, y)
        );
    }
}

/// The kernel of `doc` ("k") as the JIT compiles it with default options.
fn compiled_k(doc: &Value) -> Arc<weft_codegen::jit::JitKernel> {
    let mut p = build(doc).unwrap();
    weft_ir::passes::run_pipeline(&mut p, &Default::default(), None).unwrap();
    let k = p.kernel_by_name("k").unwrap();
    weft_runtime::jit::compile_cached(&p, &p.kernels[k], &Default::default()).unwrap()
}

/// The four-lane code (`codegen/src/jit/lower/simd.rs`) where lanes
/// diverge: per-lane `if`s, loops with per-lane trip counts and
/// `break` / `continue`, early `return`, bool locals, integer division by
/// per-lane divisors (zero included), per-lane calls of transcendental
/// functions, gathers and scatters at computed indices, contiguous rows of
/// a 2-D field, ragged ranges (not a multiple of four), a uniform `if` on
/// the frame, and integer atomics (exact in any order, here on two threads
/// over privatised copies). Each kernel must really get lanes, and give the
/// interpreter's fields bit for bit.
#[test]
fn four_lane_code_agrees_with_the_interpreter() {
    let diverge = "fn kernel(i: i32) {
        let mut z = vec2(i as f32 * 0.05 - 1.0, 0.3);
        let mut it = 0;
        while length(z) < 2.0 && it < 40 {
            z = vec2(z.x * z.x - z.y * z.y, 2.0 * z.x * z.y) + vec2(-0.7, 0.27);
            it += 1;
            if it == 7 && i % 3 == 0 { continue; }
            if it > 30 && i % 2 == 1 { break; }
        }
        let big = it > 10;
        if big { o[i] = sin(z.x) + 1.0 / (it as f32); } else { o[i] = -z.y; }
        if i % 5 == 1 { return; }
        n[i] = it / (i % 4) + it % (i % 7 - 3) + select(big, 100, 0) + select(!big || i > 30, 1000, 0);
    }";
    let rows = "fn kernel(i: i32, j: i32) {
        if frame() % 2 == 0 {
            b[(i, j)] = a[(i, (j * 5 + i) % 16)] * 1.5 + (i * 16 + j) as f32 * 0.25 + a[(i, j)];
        } else {
            a[(i, j)] = b[((i + j) % 8, 15 - j)] - exp(b[(i, j)] * 0.01) + max(b[(i, j)], 3.0);
        }
    }";
    let ragged = "fn kernel(i: i32) {
        let k = (i * 37) % 13;
        let mut v = k * k - i / 3;
        if k < 5 { v = -v; }
        n[i] = v;
        o[i] = floor(i as f32 * 0.7) + select(k > 6, 0.5, -0.5);
    }";
    let histogram = "fn kernel(i: i32) {
        let mut s = 0;
        for k in 0..(i % 5) { s += k * i; }
        if i % 3 != 0 { atomic_add(h[(i * 7) % 16], s + 1); }
        atomic_max(m[i % 4], s);
    }";
    // `z` is dead after its loop (its stores go unmasked), `w` is not.
    let escape = "fn kernel(i: i32) {
        let mut z = i as f32 * 0.1;
        let mut w = 1.0;
        let mut k = 0;
        while z < 50.0 && k < 100 {
            z = z * 1.3 + 1.0;
            w = w * 0.5 + z;
            k += 1;
        }
        n[i] = k;
        o[i] = w;
    }";
    let mut cases: Vec<(&str, Value, u32)> = vec![
        (
            "escape",
            kernel_graph(
                &[
                    F("o", "f32", &[64], json!(0)),
                    F("n", "i32", &[64], json!(0)),
                ],
                escape,
                &[64],
                json!({}),
            ),
            0,
        ),
        (
            "diverge",
            kernel_graph(
                &[
                    F("o", "f32", &[64], json!(0)),
                    F("n", "i32", &[64], json!(0)),
                ],
                diverge,
                &[64],
                json!({}),
            ),
            0,
        ),
        (
            "ragged",
            kernel_graph(
                &[
                    F("o", "f32", &[15], json!(0)),
                    F("n", "i32", &[15], json!(0)),
                ],
                ragged,
                &[15],
                json!({}),
            ),
            0,
        ),
        (
            "histogram",
            kernel_graph(
                &[
                    F("h", "i32", &[16], json!(0)),
                    F("m", "i32", &[4], json!(0)),
                ],
                histogram,
                &[20000],
                json!({}),
            ),
            0,
        ),
    ];
    let mut g = kernel_graph(
        &[
            F("a", "f32", &[8, 16], json!(1)),
            F("b", "f32", &[8, 16], json!(0)),
        ],
        rows,
        &[8, 16],
        json!({}),
    );
    every_frame(&mut g);
    cases.push(("rows", g, 4));
    // Gathers of both words of a vec2 / ivec2 at permuted indices (one
    // 64-bit load per lane, lanes interleaved apart again).
    let pairs = "fn kernel(i: i32) {
        if frame() % 2 == 0 {
            q[i] = vec2(i as f32 * 0.5 + o[i], 3.0 - i as f32);
            c[i] = ivec2(i * 3 + frame(), 100 - i);
        } else {
            let j = (i * 7) % 32;
            let p = q[j];
            let d = c[(j + 3) % 32];
            o[i] = p.x * 2.0 - p.y + (d.x - d.y) as f32;
        }
    }";
    let mut g = kernel_graph(
        &[
            F("q", "vec2", &[32], json!(0)),
            F("c", "ivec2", &[32], json!(0)),
            F("o", "f32", &[32], json!(0)),
        ],
        pairs,
        &[32],
        json!({}),
    );
    every_frame(&mut g);
    cases.push(("pairs", g, 5));
    // `random()` per lane: each lane's stream is its iteration's, and a
    // lane that skips a call (masked) does not advance its stream.
    let dice = "fn kernel(i: i32) {
        let a = random();
        if i % 3 == 0 { o[i] = a + random(); } else { o[i] = a * 2.0; }
        n[i] = (random() * 1000.0) as i32 + n[i];
    }";
    let mut g = kernel_graph(
        &[
            F("o", "f32", &[64], json!(0)),
            F("n", "i32", &[64], json!(0)),
        ],
        dice,
        &[64],
        json!({}),
    );
    every_frame(&mut g);
    cases.push(("dice", g, 3));
    // Unsigned `/` and `%` by powers of two (shifts and masks in lanes).
    let bits = "fn kernel(i: i32) {
        let u = (i as u32) * 2654435761u32 + 12345u32;
        w[i] = (u / 32u32) ^ (u % 64u32) + u / 1u32 + u % 1u32 + u % 3u32;
    }";
    let g = kernel_graph(&[F("w", "u32", &[64], json!(0))], bits, &[64], json!({}));
    cases.push(("bits", g, 0));
    // A `vec3` scatter-add (a run of three neighbouring words, one 64-bit
    // and one 32-bit add per lane in the privatised lane code) where lanes
    // 0 and 1, and 2 and 3, of every group hit the same cell: the adds
    // must still come in iteration order. On two threads each chunk of
    // the range (8192 iterations: `chunk_len`) adds into its own cells,
    // so whichever worker's copy a chunk lands in, the sums are the
    // interpreter's.
    let collide = "fn kernel(i: i32) {
        let c = (i / 2) % 64 + (i / 8192) * 64;
        let x = i as f32 * 0.001 + 0.1;
        g[c] += vec3(x, x * 1.7, 1.0 / (x + 3.0));
    }";
    let g = kernel_graph(
        &[F("g", "vec3", &[2048], json!(0))],
        collide,
        &[262144],
        json!({}),
    );
    cases.push(("collide", g, 0));
    // Runs of neighbouring word stores (a `vec2`, a `mat2`'s four words,
    // an `ivec2`: one 64-bit store per lane and pair) where pairs of lanes
    // write the same cells: the later iteration's words must win.
    let stores = "fn kernel(i: i32) {
        let x = i as f32 * 0.25 - 3.0;
        q[i / 2] = vec2(x, 1.0 - x);
        m[(i / 2) % 16] = mat2(x, x * 2.0, -x, 0.5);
        c[i / 2] = ivec2(i, -i);
    }";
    let g = kernel_graph(
        &[
            F("q", "vec2", &[32], json!(0)),
            F("m", "mat2", &[16], json!(0)),
            F("c", "ivec2", &[32], json!(0)),
        ],
        stores,
        &[64],
        json!({}),
    );
    cases.push(("stores", g, 0));
    let mut problems = Vec::new();
    for (name, g, frames) in &cases {
        assert!(compiled_k(g).lanes, "{}: the kernel got no lane code", name);
        problems.extend(agree(name, g, *frames, 2));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Runs the test graph's kernel `k` every frame instead of once at start.
fn every_frame(g: &mut Value) {
    g["nodes"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id": "tick", "kind": "on_frame"}));
    g["exec"] = json!([{"from": "tick.then", "to": "k"}]);
}

/// A fault in one lane, under a mask, reports that iteration's index as
/// the interpreter does (the first faulting iteration in order).
#[test]
fn a_fault_in_one_lane_reports_that_lane() {
    let g = kernel_graph(
        &[F("x", "f32", &[16], json!(0))],
        "fn kernel(i: i32) {\n    if i % 4 == 2 && i > 5 {\n        x[i + 100] = 1.0;\n    }\n}",
        &[16],
        json!({}),
    );
    assert!(compiled_k(&g).lanes);
    let e = sim(&g, 0, Backend::Jit, 2)
        .err()
        .expect("must fail")
        .to_string();
    assert!(
        e.contains("node 'k', code 3:") && e.contains("index 106 is out of bounds"),
        "{}",
        e
    );
}

/// The examples' hot kernels get lane code (a change that silently sent
/// them back to one iteration at a time would cost 2–3× on the cpu backend).
#[test]
fn hot_example_kernels_get_lane_code() {
    for (name, kernels) in [
        ("julia", &["paint"][..]),
        (
            "mpm88",
            &["p2g/k", "g2p/k", "grid_update", "clear_grid"][..],
        ),
        ("life", &["step"][..]),
        ("heat", &["diffuse"][..]),
        ("mass_spring_ad", &["compute_forces", "integrate"][..]),
    ] {
        let mut p = build(&example(name)).unwrap();
        weft_ir::passes::run_pipeline(&mut p, &Default::default(), None).unwrap();
        for k in kernels {
            let h = p.kernel_by_name(k).unwrap();
            let jk =
                weft_codegen::jit::compile_kernel(&p, &p.kernels[h], &Default::default()).unwrap();
            assert!(jk.lanes, "{}: kernel '{}' got no lane code", name, k);
        }
    }
}
