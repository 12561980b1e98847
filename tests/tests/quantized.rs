//! Quantized storage (issue 10) on every backend.
//!
//! References: the host codec `ir::quant` (itself tested against exhaustive
//! hand-written references in its unit tests) for what a store-then-load
//! must give, and the VM for cross-backend equality (bit-exact: the lowering
//! uses only integer ops and unfusable float ops). Parallel-write tests run
//! with one thread per core (and on the GPU) and check that no update is
//! lost in words shared by several fields.

use serde_json::{json, Value};
use weft_ir::ir::layout::root_words;
use weft_ir::ir::quant::Quant;
use weft_ir::ir::Storage;
use weft_runtime::{Backend, SimOptions, Simulation};
use weft_tests::*;

/// Fields as (name, type, storage, layout node, init); one dense node per
/// distinct layout name, all of shape `[n]`; one kernel `k` over `range`.
fn graph(n: u32, fields: &[(&str, &str, &str, &str, Value)], code: &str, range: u32) -> Value {
    let mut nodes = vec![];
    let mut wires = vec![];
    let mut layouts: Vec<&str> = vec![];
    for (name, ty, storage, layout, init) in fields {
        if !layouts.contains(layout) {
            layouts.push(layout);
            nodes.push(json!({"id": layout, "kind": "dense", "params": {"shape": [n]}}));
        }
        nodes.push(json!({"id": name, "kind": "field", "params": {"type": ty, "storage": storage, "init": init}}));
        wires.push(json!({"from": format!("{}.cells", layout), "to": format!("{}.layout", name)}));
        if code.contains(&format!("{}[", name)) {
            wires.push(json!({"from": format!("{}.field", name), "to": format!("k.{}", name)}));
        }
    }
    nodes.push(json!({"id": "k", "kind": "kernel", "params": {"code": code, "range": [range]}}));
    nodes.push(json!({"id": "start", "kind": "on_start"}));
    json!({"format": "weft-graph", "version": 1, "nodes": nodes, "wires": wires, "exec": [{"from": "start.then", "to": "k"}]})
}

fn backends() -> Vec<Backend> {
    let mut b = vec![Backend::Vm, Backend::Jit];
    if wgpu_available() {
        b.push(Backend::Wgpu);
    }
    b
}

fn sim(doc: &Value, backend: Backend) -> Simulation {
    let mut s = unstarted(doc, backend);
    s.start().unwrap_or_else(|e| panic!("{:?}: {}", backend, e));
    s
}

fn unstarted(doc: &Value, backend: Backend) -> Simulation {
    let p = build(doc).unwrap_or_else(|e| panic!("build: {}", e));
    let opts = SimOptions {
        backend,
        passes: weft_ir::passes::PassOptions {
            validate: true,
            ..Default::default()
        },
        ..Default::default()
    };
    Simulation::new(p, &opts).unwrap_or_else(|e| panic!("{:?}: {}", backend, e))
}

fn quant_of(s: &Simulation, name: &str) -> Quant {
    match s.program.fields[s.field(name).unwrap()].storage {
        Storage::Quant(q) => q,
        _ => panic!("{} is not quantized per component", name),
    }
}

/// Edge-case f32 inputs: zeros, signs, ties, denormal range, overflow, NaN/inf.
fn float_inputs() -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -0.5,
        1.5,
        2.5,
        3.999,
        -4.0,
        4.0,
        4.5,
        -7.0,
        1e-3,
        -1e-3,
        6.1e-5,
        3.0e-5,
        1e-7,
        1e-20,
        65504.0,
        131008.0,
        131072.0,
        1e9,
        -1e9,
        0.1,
        0.2,
        0.3,
        1.0 / 3.0,
        f32::MAX,
        f32::MIN_POSITIVE,
        1e-40,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1.0009766,
        1.0004883,
        2049.0,
        0.75,
        -0.25,
    ];
    let mut x = 1.1e-9f32;
    while v.len() < 128 {
        v.push(x);
        v.push(-x * 0.77);
        x *= 3.3;
    }
    v.truncate(128);
    v
}

fn int_inputs() -> Vec<i32> {
    let mut v = vec![
        0,
        1,
        -1,
        7,
        8,
        -8,
        -9,
        15,
        16,
        127,
        128,
        -128,
        -129,
        255,
        256,
        65535,
        -65536,
        i32::MAX,
        i32::MIN,
        3,
        -3,
        31,
        -32,
        33,
    ];
    let mut x = 5i32;
    while v.len() < 128 {
        v.push(x);
        v.push(-x);
        x = x.wrapping_mul(3).wrapping_add(1);
    }
    v.truncate(128);
    v
}

/// Store every input into quantized fields (some packed into shared words,
/// one alone in its word), load it back, and compare with the host codec.
#[test]
fn store_then_load_matches_the_host_codec_on_every_backend() {
    let fl = float_inputs();
    let il = int_inputs();
    let fields: Vec<(&str, &str, &str, &str, Value)> = vec![
        ("fs", "u32", "word", "src", json!(0)),
        ("is", "i32", "word", "src", json!(0)),
        // Packed: share words (compare-exchange stores).
        ("h", "f32", "float5m10", "p", json!(0)),
        ("m", "f32", "ufloat4m3", "p", json!(0)),
        ("x", "f32", "fixed7[-4,4]", "p", json!(0)),
        ("a", "i32", "int5", "q", json!(0)),
        ("b", "u32", "uint3", "q", json!(0)),
        ("c", "i32", "int17", "q", json!(0)),
        ("g", "f32", "float7m6", "r", json!(0)),
        ("y", "f32", "fixed12[0,1]", "r", json!(0)),
        // Alone in its one-word cell: plain stores.
        ("e", "f32", "float3m2", "s", json!(0)),
        ("w", "i32", "int32", "t", json!(0)),
        ("u", "u32", "uint1", "v", json!(0)),
        ("oh", "f32", "word", "o", json!(0)),
        ("om", "f32", "word", "o", json!(0)),
        ("ox", "f32", "word", "o", json!(0)),
        ("og", "f32", "word", "o", json!(0)),
        ("oy", "f32", "word", "o", json!(0)),
        ("oe", "f32", "word", "o", json!(0)),
        ("oa", "i32", "word", "o", json!(0)),
        ("ob", "u32", "word", "o", json!(0)),
        ("oc", "i32", "word", "o", json!(0)),
        ("ow", "i32", "word", "o", json!(0)),
        ("ou", "u32", "word", "o", json!(0)),
    ];
    let code = "fn kernel(i: i32) {
        let f = bitcast::<f32>(fs[i]);
        let n = is[i];
        h[i] = f; m[i] = f; x[i] = f; g[i] = f; y[i] = f; e[i] = f;
        a[i] = n; b[i] = n as u32; c[i] = n; w[i] = n; u[i] = n as u32;
        oh[i] = h[i]; om[i] = m[i]; ox[i] = x[i]; og[i] = g[i]; oy[i] = y[i]; oe[i] = e[i];
        oa[i] = a[i]; ob[i] = b[i]; oc[i] = c[i]; ow[i] = w[i]; ou[i] = u[i];
    }";
    let doc = graph(128, &fields, code, 128);
    let mut results: Vec<(Backend, Vec<Vec<u32>>)> = vec![];
    for backend in backends() {
        let mut s = unstarted(&doc, backend);
        // Inputs go in through the host (whole words) before the kernel runs.
        s.write_field(
            s.field("fs").unwrap(),
            &fl.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        )
        .unwrap();
        s.write_field(
            s.field("is").unwrap(),
            &il.iter().map(|&x| x as u32).collect::<Vec<_>>(),
        )
        .unwrap();
        s.start().unwrap();
        let mut all = vec![];
        for (q, o, src_is_float) in [
            ("h", "oh", true),
            ("m", "om", true),
            ("x", "ox", true),
            ("g", "og", true),
            ("y", "oy", true),
            ("e", "oe", true),
            ("a", "oa", false),
            ("b", "ob", false),
            ("c", "oc", false),
            ("w", "ow", false),
            ("u", "ou", false),
        ] {
            let t = quant_of(&s, q);
            let got = words(&s, o);
            let host = words(&s, q);
            for k in 0..128 {
                let input = if src_is_float {
                    fl[k].to_bits()
                } else {
                    il[k] as u32
                };
                let want = t.decode(t.encode(input));
                assert_eq!(
                    got[k],
                    want,
                    "{:?}: {} ({}) element {} from {:#x}",
                    backend,
                    q,
                    t.name(),
                    k,
                    input
                );
                assert_eq!(
                    host[k], want,
                    "{:?}: host read of {} element {}",
                    backend, q, k
                );
            }
            all.push(got);
        }
        results.push((backend, all));
    }
    for (b, r) in &results[1..] {
        assert_eq!(r, &results[0].1, "{:?} differs from the VM", b);
    }
    // Packing: seven fields of 16+7+7 / 5+3+17 / 14+12 bits take 3 words per cell.
    let p = build(&doc).unwrap();
    let words_of = |name: &str| {
        let l = p.layouts.iter().find(|(_, l)| l.node_id == name).unwrap().0;
        root_words(&p, l)
    };
    assert_eq!(words_of("p"), 128);
    assert_eq!(words_of("q"), 128);
    assert_eq!(words_of("r"), 128);
}

/// Each thread writes one of four packed fields of a cell (so four threads
/// write into every word at once), then atomically adds into packed
/// counters: nothing may be lost.
#[test]
fn parallel_stores_and_atomic_adds_into_shared_words_lose_nothing() {
    let n = 4096u32;
    let fields: Vec<(&str, &str, &str, &str, Value)> = vec![
        ("a", "u32", "uint8", "cells", json!(0)),
        ("b", "i32", "int8", "cells", json!(0)),
        ("c", "f32", "fixed8[0,255]", "cells", json!(0)),
        ("d", "f32", "ufloat4m4", "cells", json!(0)),
        ("cnt", "i32", "int10", "counters", json!(0)),
        ("fcnt", "f32", "float6m9", "counters", json!(0)),
        ("ucnt", "u32", "uint12", "counters", json!(0)),
    ];
    let code = "fn kernel(i: i32) {
        let cell = i / 4;
        let k = i % 4;
        let v = cell % 200;
        if k == 0 { a[cell] = v as u32; }
        if k == 1 { b[cell] = -v / 2; }
        if k == 2 { c[cell] = v as f32; }
        if k == 3 { d[cell] = (v % 16) as f32; }
        cnt[i % 8] += 1;
        fcnt[i % 8] += 1.0;
        ucnt[i % 8] += 2u32;
    }";
    let doc = graph(n / 4, &fields, code, n);
    let mut first: Option<Vec<Vec<u32>>> = None;
    for backend in backends() {
        let s = sim(&doc, backend);
        for cell in 0..(n / 4) as usize {
            let v = (cell % 200) as i32;
            assert_eq!(words(&s, "a")[cell], v as u32, "{:?} a[{}]", backend, cell);
            assert_eq!(i32s(&s, "b")[cell], -v / 2, "{:?} b[{}]", backend, cell);
            assert_eq!(f32s(&s, "c")[cell], v as f32, "{:?} c[{}]", backend, cell);
            assert_eq!(
                f32s(&s, "d")[cell],
                (v % 16) as f32,
                "{:?} d[{}]",
                backend,
                cell
            );
        }
        // 4096 / 8 = 512 adds per counter: int10 holds 511, so it saturates
        // (never wraps); float6m9 holds 512 exactly; uint12 holds 1024.
        for k in 0..8 {
            assert_eq!(i32s(&s, "cnt")[k], 511, "{:?} cnt[{}]", backend, k);
            assert_eq!(f32s(&s, "fcnt")[k], 512.0, "{:?} fcnt[{}]", backend, k);
            assert_eq!(words(&s, "ucnt")[k], 1024, "{:?} ucnt[{}]", backend, k);
        }
        let all: Vec<Vec<u32>> = ["a", "b", "c", "d"].iter().map(|f| words(&s, f)).collect();
        match &first {
            None => first = Some(all),
            Some(f) => assert_eq!(&all, f, "{:?} differs from the VM", backend),
        }
        // Four 8-bit fields in one word per cell: 4x less than four f32 arrays.
        let p = &s.program;
        let l = p
            .layouts
            .iter()
            .find(|(_, l)| l.node_id == "cells")
            .unwrap()
            .0;
        assert_eq!(root_words(p, l), (n / 4) as u64);
    }
}

#[test]
fn initial_values_are_encoded_and_checked() {
    let ok = graph(
        4,
        &[
            ("x", "f32", "fixed8[-1,1]", "l", json!(0.5)),
            ("v", "vec3", "float5m10", "l", json!([1.0, -2.5, 0.125])),
            ("o", "f32", "word", "m", json!(0)),
        ],
        "fn kernel(i: i32) { o[i] = x[i] + v[i].y; }",
        4,
    );
    for backend in backends() {
        let s = sim(&ok, backend);
        let xq = quant_of(&s, "x");
        let xv = f32::from_bits(xq.decode(xq.encode(0.5f32.to_bits())));
        assert_eq!(f32s(&s, "o"), vec![xv - 2.5; 4], "{:?}", backend);
        assert_eq!(f32s(&s, "v")[..3], [1.0, -2.5, 0.125]);
    }
    let cases = [
        (
            "int4",
            "i32",
            json!(8),
            "initial value 8 does not fit field 'x' with int4 storage",
        ),
        (
            "uint2",
            "u32",
            json!(4),
            "does not fit field 'x' with uint2 storage",
        ),
        (
            "fixed8[-1,1]",
            "f32",
            json!(1.5),
            "initial value 1.5 does not fit",
        ),
        ("ufloat5m10", "f32", json!(-1.0), "does not fit"),
        (
            "int4",
            "f32",
            json!(0),
            "int4 storage computes as i32 but the field's type is f32",
        ),
        ("float9m2", "f32", json!(0), "2 to 7 exponent bits"),
        ("fixed16", "f32", json!(0), "fixed point needs a range"),
        ("int99", "i32", json!(0), "1 to 32 bits"),
        ("halfish", "f32", json!(0), "unknown storage 'halfish'"),
    ];
    for (storage, ty, init, want) in cases {
        let g = graph(
            4,
            &[("x", ty, storage, "l", init)],
            "fn kernel(i: i32) { x[i] = x[i]; }",
            4,
        );
        let e = build(&g).expect_err(storage).to_string();
        assert!(e.contains("'x'") && e.contains(want), "{}: {}", storage, e);
    }
}

/// `rounding: "stochastic"`: every element is one of the two codes around
/// the stored value, the mean is the value (within 4 standard deviations),
/// and all backends draw the same numbers (the iteration's `random()`
/// sequence), so their words are identical.
#[test]
fn stochastic_rounding_is_unbiased_and_identical_across_backends() {
    let n = 20000u32;
    let mut doc = graph(
        n,
        &[
            ("x", "f32", "fixed8[0,1]", "l", json!(0)),
            ("y", "f32", "float5m2", "l", json!(0)),
            ("z", "f32", "fixed8[0,1]", "m", json!(0)),
        ],
        "fn kernel(i: i32) { x[i] = 0.3; y[i] = 1.1; z[i] = 0.3; }",
        n,
    );
    for node in doc["nodes"].as_array_mut().unwrap() {
        if node["id"] == "x" || node["id"] == "y" {
            node["params"]["rounding"] = json!("stochastic");
        }
    }
    let mut first: Option<Vec<Vec<u32>>> = None;
    for backend in backends() {
        let s = sim(&doc, backend);
        // (value, lower code, upper code)
        for (name, v, lo, hi) in [
            ("x", 0.3f64, 76.0 / 255.0, 77.0 / 255.0),
            ("y", 1.1, 1.0, 1.25),
        ] {
            let got = f32s(&s, name);
            let mut sum = 0.0f64;
            for (i, &g) in got.iter().enumerate() {
                let g = g as f64;
                assert!(
                    (g - lo).abs() < 1e-6 || (g - hi).abs() < 1e-6,
                    "{:?} {}[{}] = {}",
                    backend,
                    name,
                    i,
                    g
                );
                sum += g;
            }
            let p = (v - lo) / (hi - lo);
            let sigma = (hi - lo) * (p * (1.0 - p) / n as f64).sqrt();
            let mean = sum / n as f64;
            assert!(
                (mean - v).abs() < 4.0 * sigma,
                "{:?} {}: mean {} vs {} (sigma {})",
                backend,
                name,
                mean,
                v,
                sigma
            );
        }
        // Nearest rounding puts every element on the same code.
        assert!(f32s(&s, "z").iter().all(|&g| g == 77.0 / 255.0));
        let all: Vec<Vec<u32>> = ["x", "y"].iter().map(|f| words(&s, f)).collect();
        match &first {
            None => first = Some(all),
            Some(f) => assert_eq!(&all, f, "{:?} differs from the VM", backend),
        }
    }
    // Only fixed and float storage rounds.
    let mut bad = graph(
        4,
        &[("q", "i32", "int4", "l", json!(0))],
        "fn kernel(i: i32) { q[i] = 1; }",
        4,
    );
    for node in bad["nodes"].as_array_mut().unwrap() {
        if node["id"] == "q" {
            node["params"]["rounding"] = json!("stochastic");
        }
    }
    let e = build(&bad).expect_err("int rounding").to_string();
    assert!(
        e.contains("node 'q'") && e.contains("\"stochastic\" applies to fixedN"),
        "{}",
        e
    );
}

/// `f16` storage is IEEE binary16: f32 bit patterns (normals, f16
/// denormals, halfway ties, overflow, ±inf, NaN, ±0, f32 denormals) stored
/// through a kernel into f16 fields (two sharing a word, a vec2 in one word,
/// a bit_array of two per word) and dumped as `.npy` equal NumPy's
/// `float32 → float16 → float32` on every backend (NaN compared as NaN).
#[test]
fn f16_storage_matches_numpy_float16() {
    let n = 4096usize;
    let mut inputs: Vec<f32> = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        65504.0,
        65519.996,
        65520.0,
        -65520.0,
        65536.0,
        1e9,
        f32::MAX,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        2f32.powi(-14),                                 // smallest normal f16
        1023.0 * 2f32.powi(-24),                        // largest denormal f16
        2f32.powi(-24),                                 // smallest denormal f16
        2f32.powi(-25),                                 // half of it: a tie to 0
        f32::from_bits((2f32.powi(-25)).to_bits() + 1), // just above: rounds up
        1.5 * 2f32.powi(-24),                           // 1.5 x the smallest: tie to even (2)
        f32::MIN_POSITIVE,
        1e-40,
        1.0009766, // 1 + 2^-10
        1.0004883, // 1 + 2^-11: tie to even (1)
        1.0014648, // 1 + 3 x 2^-11: tie to even (1 + 2^-9)
        2049.0,
        2051.0,
        0.1,
        1.0 / 3.0,
    ];
    // Midpoints between neighbouring f16 values (ties) and just off them.
    let mut c = 1u32;
    while c < 0x7bff {
        let a = f32::from_bits(weft_ir::ir::quant::half_decode(c)) as f64;
        let b = f32::from_bits(weft_ir::ir::quant::half_decode(c + 1)) as f64;
        let mid = ((a + b) / 2.0) as f32;
        inputs.extend([
            mid,
            -mid,
            f32::from_bits(mid.to_bits() + 1),
            f32::from_bits(mid.to_bits() - 1),
        ]);
        c += 37;
    }
    // Random bit patterns: any, and with the exponent near f16's range.
    let mut x = 0x2545_f491u32;
    while inputs.len() < n {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let near = (x & 0x807f_ffff) | ((97 + (x >> 8) % 50) << 23);
        inputs.push(f32::from_bits(if inputs.len().is_multiple_of(3) {
            x
        } else {
            near
        }));
    }
    inputs.truncate(n);
    let bits: Vec<u32> = inputs.iter().map(|x| x.to_bits()).collect();

    let dir = std::env::temp_dir().join(format!("weft_f16_numpy_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let npy = |name: &str, words: Vec<u32>, shape: Vec<usize>| {
        let a = weft_runtime::memory::values_to_npy(weft_ir::types::Type::F32, shape, words);
        weft_ir::io::npy::write_npy(&dir.join(name), &a).unwrap();
    };
    npy("in.npy", bits.clone(), vec![n]);
    let script = "import sys, numpy as np
x = np.load(sys.argv[1]).astype(np.float32)
np.save(sys.argv[2], x.astype(np.float16).astype(np.float32))
np.save(sys.argv[3], (-x).astype(np.float16).astype(np.float32))";
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(dir.join("in.npy"))
        .arg(dir.join("ref.npy"))
        .arg(dir.join("neg.npy"))
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let load = |name: &str| weft_ir::io::npy::read_npy(&dir.join(name)).unwrap().words;
    let (want, want_neg) = (load("ref.npy"), load("neg.npy"));

    let g = json!({
        "format": "weft-graph", "version": 1,
        "nodes": [
            {"id": "src", "kind": "dense", "params": {"shape": [n]}},
            {"id": "fs", "kind": "field", "params": {"type": "u32"}},
            {"id": "p", "kind": "dense", "params": {"shape": [n]}},
            {"id": "h", "kind": "field", "params": {"type": "f32", "storage": "f16"}},
            {"id": "k", "kind": "field", "params": {"type": "f32", "storage": "f16"}},
            {"id": "vl", "kind": "dense", "params": {"shape": [n]}},
            {"id": "v", "kind": "field", "params": {"type": "vec2", "storage": "f16"}},
            {"id": "pairs", "kind": "dense", "params": {"shape": [n / 2]}},
            {"id": "halves", "kind": "bit_array", "params": {"shape": [2]}},
            {"id": "b", "kind": "field", "params": {"type": "f32", "storage": "f16"}},
            {"id": "run", "kind": "kernel", "params": {"range": [n], "code": "fn kernel(i: i32) {
                let f = bitcast::<f32>(fs[i]);
                h[i] = f;
                k[i] = -f;
                v[i] = vec2(f, -f);
                b[i] = f;
            }"}},
            {"id": "start", "kind": "on_start"}
        ],
        "wires": [
            {"from": "src.cells", "to": "fs.layout"},
            {"from": "p.cells", "to": "h.layout"},
            {"from": "p.cells", "to": "k.layout"},
            {"from": "vl.cells", "to": "v.layout"},
            {"from": "pairs.cells", "to": "halves.parent"},
            {"from": "halves.cells", "to": "b.layout"},
            {"from": "fs.field", "to": "run.fs"},
            {"from": "h.field", "to": "run.h"},
            {"from": "k.field", "to": "run.k"},
            {"from": "v.field", "to": "run.v"},
            {"from": "b.field", "to": "run.b"}
        ],
        "exec": [{"from": "start.then", "to": "run"}]
    });
    let same =
        |a: u32, b: u32| a == b || (f32::from_bits(a).is_nan() && f32::from_bits(b).is_nan());
    for backend in backends() {
        let mut s = unstarted(&g, backend);
        s.write_field(s.field("fs").unwrap(), &bits).unwrap();
        s.start().unwrap();
        for (name, neg, comps, comp) in [
            ("h", false, 1, 0),
            ("k", true, 1, 0),
            ("v", false, 2, 0),
            ("v", true, 2, 1),
            ("b", false, 1, 0),
        ] {
            let f = s.field(name).unwrap();
            let arr = weft_runtime::memory::field_to_npy(&s.program, f, s.read_field(f).unwrap());
            let path = dir.join(format!("{name}_{backend:?}.npy"));
            weft_ir::io::npy::write_npy(&path, &arr).unwrap();
            let dumped = weft_ir::io::npy::read_npy(&path).unwrap().words;
            let reference = if neg { &want_neg } else { &want };
            for i in 0..n {
                let got = dumped[i * comps + comp];
                assert!(
                    same(got, reference[i]),
                    "{:?}: {}[{}].{} from {:e} ({:#x}): got {:e} ({:#x}), NumPy {:e} ({:#x})",
                    backend,
                    name,
                    i,
                    comp,
                    inputs[i],
                    bits[i],
                    f32::from_bits(got),
                    got,
                    f32::from_bits(reference[i]),
                    reference[i]
                );
            }
        }
        // Two f16 per word: h and k share one, v takes one, b two per word.
        for (root, words) in [("p", n), ("vl", n), ("pairs", n / 2)] {
            let l = s
                .program
                .layouts
                .iter()
                .find(|(_, l)| l.node_id == root)
                .unwrap()
                .0;
            assert_eq!(root_words(&s.program, l), words as u64, "{root}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
