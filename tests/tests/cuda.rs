//! The cuda backend. Without a GPU (every CI run): every example's and
//! every language-corpus kernel's CUDA C is generated and compiled to PTX by
//! NVRTC, so CUDA code generation is checked on every commit; with
//! `CI=true` a missing NVRTC fails the test, locally it is skipped with a
//! visible message. Where a CUDA driver and device exist, the examples, the
//! corpus and the fault cases run on CUDA and are compared with the
//! reference interpreter; elsewhere those tests say that they skip.

use serde_json::{json, Value};
use weft_ir::ir::Program;
use weft_runtime::{Backend, RuntimeError, SimOptions, Simulation};
use weft_tests::corpus::{corpus, corpus_graph, edge_cases, edge_graph};
use weft_tests::*;

/// Every example graph in graphs/ (name, document).
fn examples() -> Vec<(String, Value)> {
    let mut names: Vec<String> = std::fs::read_dir(root().join("graphs"))
        .expect("graphs/ exists")
        .filter_map(|e| {
            let n = e.ok()?.file_name().into_string().ok()?;
            let stem = n.strip_suffix(".json")?;
            (!stem.ends_with(".expect")).then(|| stem.to_string())
        })
        .collect();
    names.sort();
    assert!(names.len() >= 10, "examples found: {:?}", names);
    names
        .into_iter()
        .map(|n| (n.clone(), example(&n)))
        .collect()
}

/// Every kernel the check compiles: (label, compiled program).
fn programs() -> Vec<(String, Program)> {
    let mut docs = examples();
    for (name, fields, code, range) in corpus() {
        docs.push((
            format!("corpus {}", name),
            corpus_graph(&fields, &code, &range),
        ));
    }
    for (name, code, ty, init) in edge_cases() {
        docs.push((format!("edge case {}", name), edge_graph(code, ty, init)));
    }
    docs.into_iter()
        .map(|(name, doc)| {
            let mut p = build(&doc).unwrap_or_else(|e| panic!("{}: {}", name, e));
            // As the cuda backend gets it (its capabilities: native f32
            // atomic add, i32 atomic min/max).
            let opts = weft_runtime::backend::tune_passes(Backend::Cuda, &Default::default());
            weft_ir::passes::run_pipeline(&mut p, &opts, None)
                .unwrap_or_else(|e| panic!("{}: {}", name, e));
            (name, p)
        })
        .collect()
}

/// Whether NVRTC can be loaded: a failure in CI, a visible skip elsewhere.
fn nvrtc_available() -> bool {
    match weft_runtime::cuda::nvrtc_status() {
        Ok(()) => true,
        Err(e) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("CI=true but NVRTC is missing (.ci/run installs it): {}", e)
        }
        Err(e) => {
            eprintln!("skipping the NVRTC part: {}", e);
            false
        }
    }
}

#[test]
fn cuda_source_is_generated_for_every_example_and_corpus_kernel() {
    let mut problems = Vec::new();
    let mut kernels = 0;
    for (name, p) in programs() {
        for (_, k) in p.kernels.iter() {
            kernels += 1;
            match weft_codegen::cuda::compile_kernel(&p, k) {
                Ok(c) => {
                    if !c.source.contains(weft_codegen::cuda::ENTRY) {
                        problems.push(format!("{} / {}: no entry point", name, k.name));
                    }
                }
                Err(e) => problems.push(format!("{}: {}", name, e)),
            }
        }
    }
    assert!(kernels > 50, "only {} kernels checked", kernels);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn nvrtc_compiles_every_example_and_corpus_kernel_to_ptx() {
    if !nvrtc_available() {
        return;
    }
    let mut problems = Vec::new();
    let mut compiled = 0;
    for (name, p) in programs() {
        for (_, k) in p.kernels.iter() {
            let c = match weft_codegen::cuda::compile_kernel(&p, k) {
                Ok(c) => c,
                Err(e) => {
                    problems.push(format!("{}: {}", name, e));
                    continue;
                }
            };
            match weft_runtime::cuda::compile_ptx(&c, None) {
                Ok(ptx) => {
                    compiled += 1;
                    if !ptx.contains(&format!(".entry {}", weft_codegen::cuda::ENTRY)) {
                        problems.push(format!("{} / {}: PTX without the entry", name, k.name));
                    }
                }
                Err(e) => problems.push(format!("{}: {}", name, e)),
            }
        }
    }
    eprintln!("NVRTC compiled {} kernels to PTX", compiled);
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// CUDA runs draw views: every example view's system kernels (image,
/// auto range, show_active, particles clear/splat/resolve) are ordinary
/// kernels, and `backend::compile_offline` plus NVRTC compile them.
#[test]
fn view_kernels_compile_with_nvrtc() {
    let nvrtc = nvrtc_available();
    let mut views = 0;
    for (name, p) in programs() {
        if p.views.is_empty() {
            continue;
        }
        assert_eq!(p.view_kernels.len(), p.views.len(), "{}", name);
        weft_runtime::backend::compile_offline(&p).unwrap_or_else(|e| panic!("{}: {}", name, e));
        for v in &p.view_kernels {
            views += 1;
            assert!(!v.launches.is_empty(), "{} / {}", name, v.node_id);
            for &k in &v.launches {
                let c = weft_codegen::cuda::compile_kernel(&p, &p.kernels[k])
                    .unwrap_or_else(|e| panic!("{} / {}: {}", name, v.node_id, e));
                if nvrtc {
                    weft_runtime::cuda::compile_ptx(&c, None)
                        .unwrap_or_else(|e| panic!("{} / {}: {}", name, v.node_id, e));
                }
            }
        }
    }
    assert!(views >= 10, "only {} views", views);
}

#[test]
fn float_atomic_add_is_native_in_the_ptx() {
    if !nvrtc_available() {
        return;
    }
    let g = corpus_graph(
        &[("s", "f32", vec![1], json!(0))],
        "fn kernel(i: i32) { atomic_add(s[0], i as f32); }",
        &[64],
    );
    let mut p = build(&g).unwrap();
    let opts = weft_runtime::backend::tune_passes(Backend::Cuda, &Default::default());
    weft_ir::passes::run_pipeline(&mut p, &opts, None).unwrap();
    let (_, k) = p.kernels.iter().next().unwrap();
    let c = weft_codegen::cuda::compile_kernel(&p, k).unwrap();
    assert!(c.source.contains("atomicAdd((float*)"), "{}", c.source);
    let ptx = weft_runtime::cuda::compile_ptx(&c, None).unwrap();
    assert!(
        ptx.contains("atom.global.add.f32") || ptx.contains("red.global.add.f32"),
        "no native f32 atomic in:\n{}",
        ptx
    );
}

#[test]
fn an_nvrtc_error_names_the_kernel_node() {
    if !nvrtc_available() {
        return;
    }
    let g = corpus_graph(
        &[("o", "f32", vec![4], json!(0))],
        "fn kernel(i: i32) { o[i] = 1.0; }",
        &[4],
    );
    let mut p = build(&g).unwrap();
    weft_ir::passes::run_pipeline(&mut p, &Default::default(), None).unwrap();
    let (_, k) = p.kernels.iter().next().unwrap();
    let mut c = weft_codegen::cuda::compile_kernel(&p, k).unwrap();
    c.source.push_str("\nthis is not C;\n");
    match weft_runtime::cuda::compile_ptx(&c, None) {
        Err(RuntimeError::Compile { node, message }) => {
            assert_eq!(node, k.name);
            assert!(message.contains("NVRTC"), "{}", message);
        }
        other => panic!("expected a compile error, got {:?}", other.map(|_| ())),
    }
}

fn sim(doc: &Value, frames: u32, backend: Backend) -> Result<Simulation, RuntimeError> {
    let p = build(doc)?;
    let opts = SimOptions {
        backend,
        threads: Some(1),
        ..Default::default()
    };
    let mut s = Simulation::new(p, &opts)?;
    s.start()?;
    for _ in 0..frames {
        s.step_frame()?;
    }
    // Frames run ahead of the host on a GPU: a fault in the last ones
    // surfaces here.
    s.sync()?;
    Ok(s)
}

/// Whether a CUDA device can be opened; says why not when it cannot (no
/// GPU in CI either, so this is a skip there too).
fn cuda_device() -> bool {
    let g = corpus_graph(
        &[("o", "f32", vec![1], json!(0))],
        "fn kernel(i: i32) { o[i] = 1.0; }",
        &[1],
    );
    match sim(&g, 0, Backend::Cuda) {
        Ok(_) => true,
        Err(RuntimeError::Unavailable(why)) => {
            eprintln!("skipping the CUDA run: {}", why);
            false
        }
        Err(e) => panic!("a CUDA driver is present but the backend fails: {}", e),
    }
}

/// Fields whose final value depends on the order in which threads' atomics
/// land (on the VM, one thread in index order; on a GPU, any order), with
/// why; `compare` skips them and the tests check what does not depend on
/// the order instead.
const ORDER_DEPENDENT: &[(&str, &str)] = &[
    // OR of bit i % 32, AND of !1 and XOR of 2 from every thread, interleaved.
    ("atomics", "bits"),
    // The value left by the last exchange, and the sum of the others.
    ("atomics", "ex"),
    // Each thread adds what a compare-exchange, XOR and min of other
    // threads' words returned.
    ("atomics_on_i32", "x"),
    // Float atomics add in another order on the GPU: positions and
    // velocities agree closely, the affine field C is dominated by that
    // noise (as on wgpu, tests/cross_backend.rs).
    ("mpm88", "C"),
];

/// Fields of `a` and `b`: integers exactly, floats within `rel` of the field's largest magnitude.
fn compare(name: &str, a: &Simulation, b: &Simulation, rel: f64) -> Vec<String> {
    let mut out = Vec::new();
    for (h, f) in a.program.fields.iter() {
        if ORDER_DEPENDENT.contains(&(name, f.name.as_str())) {
            continue;
        }
        let x = a.read_field(h).unwrap();
        let y = b.read_field(b.field(&f.name).unwrap()).unwrap();
        if !f.ty.is_float() {
            let bad = x.iter().zip(&y).filter(|(p, q)| p != q).count();
            if bad > 0 {
                out.push(format!(
                    "{}: integer field '{}' differs in {} words",
                    name, f.name, bad
                ));
            }
            continue;
        }
        let fx: Vec<f64> = x.iter().map(|&w| f32::from_bits(w) as f64).collect();
        let fy: Vec<f64> = y.iter().map(|&w| f32::from_bits(w) as f64).collect();
        let scale = fx
            .iter()
            .filter(|v| v.is_finite())
            .fold(0.0f64, |m, v| m.max(v.abs()));
        let bad = fx
            .iter()
            .zip(&fy)
            .filter(|(p, q)| {
                !((p.is_nan() && q.is_nan()) || *p == *q || (*p - *q).abs() <= 1e-6 + rel * scale)
            })
            .count();
        if bad > 0 {
            out.push(format!(
                "{}: float field '{}' differs in {} components",
                name, f.name, bad
            ));
        }
    }
    out
}

/// Mean magnitude of an f32 field's components.
fn mean_abs(s: &Simulation, field: &str) -> f64 {
    let w = s.read_field(s.field(field).unwrap()).unwrap();
    w.iter()
        .map(|&x| f32::from_bits(x).abs() as f64)
        .sum::<f64>()
        / w.len().max(1) as f64
}

/// i32 words of a field.
fn i32s(s: &Simulation, field: &str) -> Vec<i32> {
    let w = s.read_field(s.field(field).unwrap()).unwrap();
    w.into_iter().map(|x| x as i32).collect()
}

#[test]
fn examples_agree_with_the_interpreter_on_cuda() {
    if !cuda_device() {
        return;
    }
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
            // Fewer substeps: the atomics' order noise grows with each one.
            set_param(&mut g, "substeps", "count", json!(20));
        }
        let vm = sim(&g, frames, Backend::Vm).unwrap();
        match sim(&g, frames, Backend::Cuda) {
            // Float atomics add in another order on the GPU (mpm88).
            Ok(c) => {
                problems.extend(compare(
                    name,
                    &vm,
                    &c,
                    if name == "mpm88" { 1e-4 } else { 1e-5 },
                ));
                if name == "mpm88" {
                    let (a, b) = (mean_abs(&vm, "C"), mean_abs(&c, "C"));
                    if (a - b).abs() > 0.1 * a {
                        problems.push(format!("mpm88: mean |C| {} on vm vs {} on cuda", a, b));
                    }
                }
            }
            Err(e) => problems.push(format!("{} on cuda: {}", name, e)),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn language_corpus_agrees_with_the_interpreter_on_cuda() {
    if !cuda_device() {
        return;
    }
    let mut problems = Vec::new();
    for (name, fields, code, range) in corpus() {
        let g = corpus_graph(&fields, &code, &range);
        let vm = sim(&g, 1, Backend::Vm).unwrap();
        match sim(&g, 1, Backend::Cuda) {
            Ok(c) => {
                problems.extend(compare(name, &vm, &c, 1e-5));
                if name == "atomics" {
                    // Whatever the order: the last exchange leaves one
                    // thread's index, and the others' old values add up to
                    // the sum of all indices less that one.
                    let ex = i32s(&c, "ex");
                    let total: i64 = (0..range[0] as i64).sum();
                    if !(0..range[0] as i32).contains(&ex[0])
                        || ex[1] as i64 + ex[0] as i64 != total
                    {
                        problems.push(format!("atomics: ex = {:?} on cuda", ex));
                    }
                }
            }
            Err(e) => problems.push(format!("{} on cuda: {}", name, e)),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn edge_and_fault_cases_agree_with_the_interpreter_on_cuda() {
    if !cuda_device() {
        return;
    }
    let mut problems = Vec::new();
    for (name, code, ty, init) in edge_cases() {
        let g = edge_graph(code, ty, init);
        match (sim(&g, 2, Backend::Vm), sim(&g, 2, Backend::Cuda)) {
            (Ok(a), Ok(b)) => problems.extend(compare(name, &a, &b, 1e-5)),
            // A fault names the same node, line and value.
            (Err(a), Err(b)) if a.to_string() == b.to_string() => {}
            (a, b) => problems.push(format!(
                "{}: vm {:?} but cuda {:?}",
                name,
                a.err().map(|e| e.to_string()),
                b.err().map(|e| e.to_string())
            )),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn without_a_driver_cuda_is_unavailable_and_auto_never_picks_it() {
    let g = corpus_graph(
        &[("o", "f32", vec![1], json!(0))],
        "fn kernel(i: i32) { o[i] = 1.0; }",
        &[1],
    );
    if weft_runtime::cuda::driver_status().is_ok() {
        eprintln!("skipping: a CUDA driver is present here");
        return;
    }
    match sim(&g, 0, Backend::Cuda) {
        Err(e @ RuntimeError::Unavailable(_)) => {
            assert_eq!(e.exit_code(), 2);
            assert!(e.to_string().contains("cuda"), "{}", e);
        }
        other => panic!(
            "expected Unavailable, got {:?}",
            other.map(|s| s.backend_name())
        ),
    }
    let s = sim(&g, 0, Backend::Auto).unwrap();
    assert_ne!(s.backend(), Some(Backend::Cuda));
}

#[test]
fn a_fault_in_a_queued_frame_is_reported_by_the_next_read() {
    if !cuda_device() {
        return;
    }
    // tools/gpu/oob_frame.json writes out of bounds from frame 5 on.
    let path = root().join("tools/gpu/oob_frame.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let opts = SimOptions {
        backend: Backend::Cuda,
        ..Default::default()
    };
    let mut s = Simulation::new(build(&doc).unwrap(), &opts).unwrap();
    s.start().unwrap();
    // Frames run ahead of the host: frame 5's fault may surface at a later
    // frame, but by the read at the latest, never not at all.
    let mut fault = None;
    for _ in 0..5 {
        if let Err(e) = s.step_frame() {
            fault = Some(e);
            break;
        }
    }
    let fault = fault.or_else(|| s.read_field(s.field("x").unwrap()).err());
    let e = fault.expect("the fault of frame 5 was lost").to_string();
    assert!(
        e.contains("node 'step', code 3:12: index 4 is out of bounds"),
        "{}",
        e
    );
}
