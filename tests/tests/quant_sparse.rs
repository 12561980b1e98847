//! Quantized storage under sparse nodes (issue 10): quantized fields, a
//! `bit_struct`, a shared-exponent vector and a `bit_array` under `pointer`
//! and `bitmasked` nodes, against their dense-quantized twins.
//!
//! The twin of each sparse field has the same storage on an all-dense
//! layout and receives exactly the same stores (the write kernel writes both;
//! the struct-for over the sparse field updates both at the visited index),
//! so on every index the two must read the same values: active cells hold
//! what was stored, inactive ones the encoded `init` that both started with.
//! The number of struct-for visits is checked against the blocks the writes
//! activated, and all backends must agree bit for bit with the VM.

use serde_json::{json, Value};
use weft_runtime::{Backend, SimOptions, Simulation};
use weft_tests::*;

fn backends() -> Vec<Backend> {
    let mut b = vec![Backend::Vm, Backend::Jit];
    if wgpu_available() {
        b.push(Backend::Wgpu);
    }
    b
}

fn run(doc: &Value, backend: Backend, frames: u32) -> Simulation {
    let p = build(doc).unwrap_or_else(|e| panic!("build: {}", e));
    let opts = SimOptions {
        backend,
        passes: weft_ir::passes::PassOptions {
            validate: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut s = Simulation::new(p, &opts).unwrap_or_else(|e| panic!("{:?}: {}", backend, e));
    s.start().unwrap_or_else(|e| panic!("{:?}: {}", backend, e));
    for _ in 0..frames {
        s.step_frame()
            .unwrap_or_else(|e| panic!("{:?}: {}", backend, e));
    }
    s
}

const SPARSE: &[(&str, &str, &str, &str)] = &[
    // (field, type, storage, init as JSON text)
    ("qa", "f32", "float5m6", "0.5"),
    ("ia", "i32", "int7", "-3"),
    ("sv", "vec2", "float6m12", "[1.0, -2.0]"),
    ("bx", "f32", "fixed10[0,4]", "1.0"),
    ("by", "u32", "uint6", "5"),
    ("bits", "u32", "uint1", "1"),
];

/// Sparse trees: `P` pointer [8] → `Pd` dense [16] holding qa, ia, sv (128
/// elements); `B` bitmasked [8] → `Bs` bit_struct holding bx, by (8
/// elements, one word each); `Q` pointer [4] → `Qd` dense [2] → `Qa`
/// bit_array [32] holding bits (256 elements). The twins `t_*` sit on dense
/// nodes of the same shapes. Kernel `w` (start) writes a subset; kernel
/// `s_*` (every frame) is a struct-for over a sparse field that updates it
/// and its twin and counts visits.
fn graph() -> Value {
    let mut nodes = vec![
        json!({"id": "P", "kind": "pointer", "params": {"shape": [8], "capacity": 8}}),
        json!({"id": "Pd", "kind": "dense", "params": {"shape": [16]}}),
        json!({"id": "B", "kind": "bitmasked", "params": {"shape": [8]}}),
        json!({"id": "Bs", "kind": "bit_struct"}),
        json!({"id": "Q", "kind": "pointer", "params": {"shape": [4], "capacity": 4}}),
        json!({"id": "Qd", "kind": "dense", "params": {"shape": [2]}}),
        json!({"id": "Qa", "kind": "bit_array", "params": {"shape": [32]}}),
        json!({"id": "TP", "kind": "dense", "params": {"shape": [8]}}),
        json!({"id": "TPd", "kind": "dense", "params": {"shape": [16]}}),
        json!({"id": "TB", "kind": "dense", "params": {"shape": [8]}}),
        json!({"id": "TBs", "kind": "bit_struct"}),
        json!({"id": "TQ", "kind": "dense", "params": {"shape": [4]}}),
        json!({"id": "TQd", "kind": "dense", "params": {"shape": [2]}}),
        json!({"id": "TQa", "kind": "bit_array", "params": {"shape": [32]}}),
        json!({"id": "visits", "kind": "field", "params": {"type": "i32"}}),
        json!({"id": "C", "kind": "dense", "params": {"shape": [3]}}),
        json!({"id": "start", "kind": "on_start"}),
        json!({"id": "frame", "kind": "on_frame"}),
    ];
    let mut wires = vec![
        json!({"from": "P.cells", "to": "Pd.parent"}),
        json!({"from": "B.cells", "to": "Bs.parent"}),
        json!({"from": "Q.cells", "to": "Qd.parent"}),
        json!({"from": "Qd.cells", "to": "Qa.parent"}),
        json!({"from": "TP.cells", "to": "TPd.parent"}),
        json!({"from": "TB.cells", "to": "TBs.parent"}),
        json!({"from": "TQ.cells", "to": "TQd.parent"}),
        json!({"from": "TQd.cells", "to": "TQa.parent"}),
        json!({"from": "C.cells", "to": "visits.layout"}),
    ];
    let place = |f: &str| match f {
        "qa" | "ia" | "sv" => "Pd",
        "bx" | "by" => "Bs",
        _ => "Qa",
    };
    for (f, ty, storage, init) in SPARSE {
        let init: Value = serde_json::from_str(init).unwrap();
        for (id, layout) in [
            (f.to_string(), place(f).to_string()),
            (format!("t_{f}"), format!("T{}", place(f))),
        ] {
            let mut params = json!({"type": ty, "storage": storage, "init": init});
            if *f == "sv" {
                params["shared_exponent"] = json!(true);
            }
            nodes.push(json!({"id": id, "kind": "field", "params": params}));
            wires.push(json!({"from": format!("{layout}.cells"), "to": format!("{id}.layout")}));
        }
    }
    // Writes: P blocks 1, 2 and 6 (elements 16..48 and 96..112), B cells 0,
    // 3 and 4, Q blocks 0 and 3 (elements 0..64 and 192..256, one bit in
    // three set to 0).
    let write = "fn kernel(i: i32) {
        let x = i as f32;
        if (i >= 16 && i < 48) || (i >= 96 && i < 112) {
            let a = x * 0.37 - 20.0;
            qa[i] = a; t_qa[i] = a;
            ia[i] = i - 70; t_ia[i] = i - 70;
            let v = vec2(x * 3.1 - 150.0, 1.0 / (x + 1.0));
            sv[i] = v; t_sv[i] = v;
        }
        if i < 8 && (i == 0 || i == 3 || i == 4) {
            bx[i] = x * 0.61; t_bx[i] = x * 0.61;
            by[i] = (i * 9) as u32; t_by[i] = (i * 9) as u32;
        }
        if (i < 64 || i >= 192) && i % 3 == 0 {
            bits[i] = 0u32; t_bits[i] = 0u32;
        }
    }";
    nodes.push(json!({"id": "w", "kind": "kernel", "params": {"code": write, "range": [256]}}));
    let mut ports = vec![
        "qa", "t_qa", "ia", "t_ia", "sv", "t_sv", "bx", "t_bx", "by", "t_by", "bits", "t_bits",
    ];
    for p in &ports {
        wires.push(json!({"from": format!("{p}.field"), "to": format!("w.{p}")}));
    }
    let sweeps = [
        (
            "s_p",
            "qa",
            "fn kernel(i: i32) {
            qa[i] = qa[i] * 0.5 + 0.25; t_qa[i] = t_qa[i] * 0.5 + 0.25;
            ia[i] += 2; t_ia[i] += 2;
            sv[i] = sv[i] * vec2(-0.5, 3.0); t_sv[i] = t_sv[i] * vec2(-0.5, 3.0);
            visits[0] += 1;
        }",
        ),
        (
            "s_b",
            "bx",
            "fn kernel(i: i32) {
            bx[i] += 0.25; t_bx[i] += 0.25;
            by[i] = by[i] + 1u32; t_by[i] = t_by[i] + 1u32;
            visits[1] += 1;
        }",
        ),
        (
            "s_q",
            "bits",
            "fn kernel(i: i32) {
            bits[i] = 1u32 - bits[i]; t_bits[i] = 1u32 - t_bits[i];
            visits[2] += 1;
        }",
        ),
    ];
    ports.push("visits");
    let mut exec = vec![json!({"from": "start.then", "to": "w"})];
    let mut prev = "frame.then".to_string();
    for (id, over, code) in sweeps {
        nodes.push(json!({"id": id, "kind": "kernel", "params": {"code": code, "over": over}}));
        for p in &ports {
            if code.contains(&format!("{p}[")) {
                wires.push(json!({"from": format!("{p}.field"), "to": format!("{id}.{p}")}));
            }
        }
        exec.push(json!({"from": prev, "to": id}));
        prev = format!("{id}.then");
    }
    json!({"format": "weft-graph", "version": 1, "nodes": nodes, "wires": wires, "exec": exec})
}

#[test]
fn sparse_quantized_fields_match_their_dense_twins_on_every_backend() {
    let doc = graph();
    let frames = 3;
    let mut first: Option<Vec<Vec<u32>>> = None;
    for backend in backends() {
        let s = run(&doc, backend, frames);
        let mut all = vec![];
        for (f, ..) in SPARSE {
            let (a, b) = (words(&s, f), words(&s, &format!("t_{f}")));
            assert_eq!(a, b, "{backend:?}: sparse {f} differs from its dense twin");
            all.push(a);
        }
        // Struct-for visits every element of the active blocks: P blocks
        // 1, 2, 6 (16 each), B cells 0, 3, 4, Q blocks 0, 3 (64 each).
        let f = frames as i32;
        assert_eq!(
            i32s(&s, "visits"),
            vec![48 * f, 3 * f, 128 * f],
            "{backend:?}: visits"
        );
        // Inactive cells read the (encoded) init; active ones what was stored.
        let qa = f32s(&s, "qa");
        assert_eq!(qa[0], 0.5, "{backend:?}");
        assert_ne!(qa[20], 0.5, "{backend:?}");
        assert_eq!(words(&s, "bits")[100], 1, "{backend:?}");
        assert_eq!(i32s(&s, "ia")[127], -3, "{backend:?}");
        match &first {
            None => first = Some(all),
            Some(v) => assert_eq!(&all, v, "{backend:?} differs from the VM"),
        }
    }
}

/// Host writes (`write_field`, like `--init` files) into a sparse quantized
/// field activate exactly the cells that differ from `init` and read back
/// the encoded values.
#[test]
fn host_writes_into_sparse_quantized_fields_round_trip() {
    let doc = graph();
    let p = build(&doc).unwrap();
    let opts = SimOptions {
        backend: Backend::Vm,
        ..Default::default()
    };
    let mut s = Simulation::new(p, &opts).unwrap();
    let sv = s.field("sv").unwrap();
    let mut v: Vec<f32> = [1.0f32, -2.0].repeat(128);
    v[2 * 70] = 12.5;
    v[2 * 70 + 1] = -0.125;
    let bits: Vec<u32> = v.iter().map(|x| x.to_bits()).collect();
    s.write_field(sv, &bits).unwrap();
    assert_eq!(f32s(&s, "sv"), v);
    let b = s.field("bits").unwrap();
    let mut w = vec![1u32; 256];
    w[200] = 0;
    s.write_field(b, &w).unwrap();
    assert_eq!(words(&s, "bits"), w);
}

/// `hash` and `dynamic` nodes move whole words (slots, list appends), so
/// quantized fields under them are refused, naming the field and the node.
#[test]
fn quantized_fields_under_hash_or_dynamic_are_errors_naming_the_node() {
    for (kind, params) in [
        ("hash", json!({"shape": [1024], "capacity": 64})),
        ("dynamic", json!({"shape": [16]})),
    ] {
        let doc = json!({"format": "weft-graph", "version": 1, "nodes": [
            {"id": "H", "kind": kind, "params": params},
            {"id": "x", "kind": "field", "params": {"type": "i32", "storage": "int8"}}
        ], "wires": [{"from": "H.cells", "to": "x.layout"}]});
        let e = build(&doc).expect_err(kind).to_string();
        assert!(
            e.contains("x") && e.contains(&format!("{kind} node 'H'")),
            "{kind}: {e}"
        );
    }
}
