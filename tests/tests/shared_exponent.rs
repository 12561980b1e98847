//! Shared-exponent storage (`shared_exponent: true` on a floatEmM vec/mat
//! field) on every backend.
//!
//! References: the host codec `ir::quant::SharedFloat` (tested in its unit
//! tests against a brute-force f64 reference) for what a store-then-load
//! gives, exact integer arithmetic for parallel atomic adds, and the VM for
//! cross-backend equality (the lowering is integer ops plus exact float
//! multiplies by powers of two, so results are bit-identical).

use serde_json::{json, Value};
use weft_ir::ir::layout::root_words;
use weft_ir::ir::quant::SharedFloat;
use weft_ir::ir::Storage;
use weft_runtime::{Backend, SimOptions, Simulation};
use weft_tests::*;

fn backends() -> Vec<Backend> {
    let mut b = vec![Backend::Vm, Backend::Jit];
    if wgpu_available() {
        b.push(Backend::Wgpu);
    }
    b
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

fn shared_of(s: &Simulation, name: &str) -> SharedFloat {
    match s.program.fields[s.field(name).unwrap()].storage {
        Storage::Shared(q) => q,
        _ => panic!("{} has no shared exponent", name),
    }
}

fn field(id: &str, ty: &str, storage: &str, shared: bool) -> Value {
    let mut params = json!({"type": ty, "storage": storage});
    if shared {
        params["shared_exponent"] = json!(true);
    }
    json!({"id": id, "kind": "field", "params": params})
}

/// A dense root `l` of shape [n] holding `word_fields`, a bit_struct `bs`
/// under it holding `packed`, a dense root `own` holding `alone`, and one
/// kernel `k` over `range` with `code`.
fn graph(n: u32, fields: &[(&str, &str, &str, bool, &str)], code: &str, range: u32) -> Value {
    let mut nodes = vec![
        json!({"id": "l", "kind": "dense", "params": {"shape": [n]}}),
        json!({"id": "own", "kind": "dense", "params": {"shape": [n]}}),
        json!({"id": "bs", "kind": "bit_struct"}),
        json!({"id": "k", "kind": "kernel", "params": {"code": code, "range": [range]}}),
        json!({"id": "start", "kind": "on_start"}),
    ];
    let mut wires = vec![json!({"from": "l.cells", "to": "bs.parent"})];
    for (name, ty, storage, shared, layout) in fields {
        nodes.push(field(name, ty, storage, *shared));
        wires.push(json!({"from": format!("{}.cells", layout), "to": format!("{}.layout", name)}));
        wires.push(json!({"from": format!("{}.field", name), "to": format!("k.{}", name)}));
    }
    json!({"format": "weft-graph", "version": 1, "nodes": nodes, "wires": wires,
           "exec": [{"from": "start.then", "to": "k"}]})
}

/// Edge-case pairs: zeros, signs, one component far smaller than the other,
/// saturation, NaN / infinities, ties on the grid of the larger component.
fn pairs() -> Vec<[f32; 2]> {
    let step = 2f32.powi(-11); // float6m12: one significand step at 1.0
    let mut v = vec![
        [0.0, 0.0],
        [-0.0, 0.0],
        [1.0, -1.0],
        [1.0, 1.5 * step],
        [1.0, -2.5 * step],
        [1000.0, 0.01],
        [-0.01, 1000.0],
        [1e-30, 1e-25],
        [3.0e9, 1.0],
        [4.3e9, -1e12],
        [f32::INFINITY, 2.0],
        [f32::NAN, -3.0],
        [0.1, 0.2],
        [-0.3, 0.7],
        [f32::MIN_POSITIVE, 1e-40],
    ];
    let mut x = 1.7e-12f32;
    while v.len() < 64 {
        v.push([x, -x * 0.37]);
        v.push([-x * 13.0, x]);
        x *= 4.1;
    }
    v.truncate(64);
    v
}

#[test]
fn store_then_load_matches_the_host_codec_on_every_backend() {
    let n = 64u32;
    let input = pairs();
    let fields = [
        ("src", "vec2", "word", false, "l"),
        ("src3", "vec3", "word", false, "l"),
        ("o2", "vec2", "word", false, "l"),
        ("o3", "vec3", "word", false, "l"),
        ("ot", "u32", "word", false, "l"),
        // Alone in its word (plain stores).
        ("v", "vec2", "float6m12", true, "own"),
        // Packed with another field in a bit_struct (compare-exchange).
        ("w", "vec3", "ufloat4m9", true, "bs"),
        ("tag", "u32", "uint1", false, "bs"),
    ];
    let code = "fn kernel(i: i32) {
        v[i] = src[i];
        tag[i] = (i % 2) as u32;
        w[i] = src3[i];
        o2[i] = v[i];
        o3[i] = w[i];
        ot[i] = tag[i];
    }";
    let doc = graph(n, &fields, code, n);
    let mut results: Vec<(Backend, Vec<Vec<u32>>)> = vec![];
    for backend in backends() {
        let mut s = unstarted(&doc, backend);
        let src: Vec<u32> = input.iter().flatten().map(|x| x.to_bits()).collect();
        let src3: Vec<u32> = input
            .iter()
            .flat_map(|p| [p[0], p[1], p[0] * 0.5 - p[1]])
            .map(|x| x.to_bits())
            .collect();
        s.write_field(s.field("src").unwrap(), &src).unwrap();
        s.write_field(s.field("src3").unwrap(), &src3).unwrap();
        s.start().unwrap();
        let (sv, sw) = (shared_of(&s, "v"), shared_of(&s, "w"));
        let (o2, o3, ot) = (words(&s, "o2"), words(&s, "o3"), words(&s, "ot"));
        let (hv, hw) = (words(&s, "v"), words(&s, "w"));
        for k in 0..n as usize {
            let code = sv.encode(&src[2 * k..2 * k + 2]);
            let code3 = sw.encode(&src3[3 * k..3 * k + 3]);
            for c in 0..2 {
                let want = sv.decode(code, c);
                assert_eq!(
                    o2[2 * k + c],
                    want,
                    "{backend:?} v[{k}].{c} of {:?}",
                    input[k]
                );
                assert_eq!(hv[2 * k + c], want, "{backend:?} host read of v[{k}].{c}");
            }
            for c in 0..3 {
                let want = sw.decode(code3, c);
                assert_eq!(o3[3 * k + c], want, "{backend:?} w[{k}].{c}");
                assert_eq!(hw[3 * k + c], want, "{backend:?} host read of w[{k}].{c}");
            }
            assert_eq!(
                ot[k],
                (k % 2) as u32,
                "{backend:?} tag[{k}] survives w's stores"
            );
        }
        results.push((backend, vec![o2, o3]));
    }
    for (b, r) in &results[1..] {
        assert_eq!(r, &results[0].1, "{:?} differs from the VM", b);
    }
    // A vec2 in one word (6 + 2 x 13 bits); w (4 + 3 x 9) and tag share one.
    let p = build(&doc).unwrap();
    let words_of = |name: &str| {
        let l = p.layouts.iter().find(|(_, l)| l.node_id == name).unwrap().0;
        root_words(&p, l)
    };
    assert_eq!(words_of("own"), n as u64);
    assert_eq!(words_of("l"), n as u64 * (2 + 3 + 2 + 3 + 1 + 1));
}

/// Two threads per cell: one stores the shared-exponent vector, the other
/// the field beside it in the same word; then every thread adds into
/// shared-exponent accumulators (the sums are integers below 2^12, exact in
/// 12-bit significands): nothing may be lost, on any backend.
#[test]
fn parallel_stores_and_atomic_adds_lose_nothing() {
    let n = 4096u32;
    let fields = [
        ("pv", "vec2", "float4m12", true, "bs"),
        ("tag", "u32", "uint1", false, "bs"),
        ("acc", "vec2", "float6m12", true, "own"),
    ];
    let code = "fn kernel(i: i32) {
        let cell = i / 2;
        let v = (cell % 300) as f32;
        if i % 2 == 0 { pv[cell] = vec2(v, -v / 4.0); } else { tag[cell] = (cell % 2) as u32; }
        acc[i % 4] += vec2(1.0, 0.5);
    }";
    let doc = graph(n / 2, &fields, code, n);
    let mut first: Option<Vec<u32>> = None;
    for backend in backends() {
        let mut s = unstarted(&doc, backend);
        s.start().unwrap();
        let pv = f32s(&s, "pv");
        let tag = words(&s, "tag");
        for cell in 0..(n / 2) as usize {
            let v = (cell % 300) as f32;
            assert_eq!(
                [pv[2 * cell], pv[2 * cell + 1]],
                [v, -v / 4.0],
                "{backend:?} pv[{cell}]"
            );
            assert_eq!(tag[cell], (cell % 2) as u32, "{backend:?} tag[{cell}]");
        }
        let acc = f32s(&s, "acc");
        for k in 0..4 {
            assert_eq!(
                [acc[2 * k], acc[2 * k + 1]],
                [1024.0, 512.0],
                "{backend:?} acc[{k}]"
            );
        }
        let all = words(&s, "pv");
        match &first {
            None => first = Some(all),
            Some(f) => assert_eq!(&all, f, "{backend:?} differs from the VM"),
        }
    }
}

#[test]
fn bad_shared_exponents_are_errors_naming_the_field() {
    let cases = [
        ("vec3", "float5m10", "5 + 3 x 11 = 38 bits"),
        ("f32", "float5m10", "a scalar has only one"),
        ("vec2", "fixed8[0,1]", "needs floatEmM or ufloatEmM"),
        ("vec2", "word", "needs floatEmM or ufloatEmM"),
    ];
    for (ty, storage, want) in cases {
        let g = graph(
            4,
            &[("x", ty, storage, true, "own")],
            "fn kernel(i: i32) { x[i] = x[i]; }",
            4,
        );
        let e = build(&g).expect_err(storage).to_string();
        assert!(
            e.contains("x") && e.contains("shared_exponent") && e.contains(want),
            "{storage}: {e}"
        );
    }
    // Initial values beyond the largest value are refused.
    let mut g = graph(
        4,
        &[("x", "vec2", "float2m4", true, "own")],
        "fn kernel(i: i32) { x[i] = x[i]; }",
        4,
    );
    g["nodes"][5]["params"]["init"] = json!([100.0, 1.0]);
    let e = build(&g).expect_err("init").to_string();
    assert!(e.contains("does not fit field 'x'"), "{e}");
}
