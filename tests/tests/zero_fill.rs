//! The `zero_fill` pass marks kernels that only write zero to one run of
//! words; the wgpu backend runs those launches as buffer fills. The marks
//! must be exact: a fill that covered one word too many would erase data
//! that the kernel leaves alone (an interleaved field, the rest of a range),
//! and every backend must end with the same words as the kernel computes.

use serde_json::{json, Value};
use weft_ir::ir::ZeroFill;
use weft_runtime::{Backend, SimOptions, Simulation};
use weft_tests::*;

/// `cells` (8 × 8) holds `a: f32 = 1` and `b: vec2 = (2, 3)` interleaved
/// per cell; `c: i32 = 5` has 24 cells, `d: f32 = 1` has 4. The `on_start`
/// kernels run in this order.
fn graph() -> Value {
    let kernels = [
        // Leaves `a` alone: not a fill of the cells' words.
        (
            "clear_b",
            json!({"over": "b"}),
            "fn kernel(i: i32, j: i32) {\n    b[(i, j)] = vec2(0.0, 0.0);\n}\n",
        ),
        // Rows 0..4 of both fields: words 0..96 of `cells`, rows 4..8 kept.
        (
            "clear_head",
            json!({"range": [4, 8]}),
            "fn kernel(i: i32, j: i32) {\n    a[(i, j)] = 0.0;\n    b[(i, j)] = vec2(0.0);\n}\n",
        ),
        // Words 8..16 of `c`.
        (
            "clear_middle",
            json!({"range": [8]}),
            "fn kernel(i: i32) {\n    c[i + 8] = 0;\n}\n",
        ),
        // -0.0 is not zero bits.
        (
            "minus_zero",
            json!({"over": "d"}),
            "fn kernel(i: i32) {\n    d[i] = -0.0;\n}\n",
        ),
        // A store under a condition is not proven to cover its range.
        (
            "clear_some",
            json!({"range": [24]}),
            "fn kernel(i: i32) {\n    if i > 19 {\n        c[i] = 0;\n    }\n}\n",
        ),
    ];
    let mut nodes = vec![
        json!({"id": "cells", "kind": "dense", "params": {"shape": [8, 8]}}),
        json!({"id": "a", "kind": "field", "params": {"type": "f32", "init": 1}}),
        json!({"id": "b", "kind": "field", "params": {"type": "vec2", "init": [2, 3]}}),
        json!({"id": "c_cells", "kind": "dense", "params": {"shape": [24]}}),
        json!({"id": "c", "kind": "field", "params": {"type": "i32", "init": 5}}),
        json!({"id": "d_cells", "kind": "dense", "params": {"shape": [4]}}),
        json!({"id": "d", "kind": "field", "params": {"type": "f32", "init": 1}}),
        json!({"id": "start", "kind": "on_start"}),
    ];
    let mut wires = vec![
        json!({"from": "cells.cells", "to": "a.layout"}),
        json!({"from": "cells.cells", "to": "b.layout"}),
        json!({"from": "c_cells.cells", "to": "c.layout"}),
        json!({"from": "d_cells.cells", "to": "d.layout"}),
    ];
    let mut exec = vec![];
    let mut prev = "start.then".to_string();
    for (id, iteration, code) in kernels {
        let mut params = iteration.as_object().unwrap().clone();
        params.insert("code".into(), json!(code));
        nodes.push(json!({"id": id, "kind": "kernel", "params": params}));
        for f in ["a", "b", "c", "d"] {
            if code.contains(&format!("{}[", f)) {
                wires.push(json!({"from": format!("{}.field", f), "to": format!("{}.{}", id, f)}));
            }
        }
        exec.push(json!({"from": prev, "to": id}));
        prev = format!("{}.then", id);
    }
    json!({"format": "weft-graph", "version": 1, "nodes": nodes, "wires": wires, "exec": exec})
}

fn fill_of(doc: &Value, kernel: &str) -> Option<(String, u64, u64)> {
    let p = compiled(doc);
    let (_, k) = p
        .kernels
        .iter()
        .find(|(_, k)| k.name == kernel)
        .unwrap_or_else(|| panic!("no kernel {}", kernel));
    k.zero_fill.map(|ZeroFill { root, first, words }| {
        (p.layouts[root].node_id.clone(), first, first + words)
    })
}

#[test]
fn exactly_the_kernels_that_only_zero_a_word_run_are_marked() {
    let g = graph();
    assert_eq!(fill_of(&g, "clear_b"), None);
    assert_eq!(fill_of(&g, "clear_head"), Some(("cells".into(), 0, 96)));
    assert_eq!(fill_of(&g, "clear_middle"), Some(("c_cells".into(), 8, 16)));
    assert_eq!(fill_of(&g, "minus_zero"), None);
    assert_eq!(fill_of(&g, "clear_some"), None);
}

#[test]
fn mpm88_clears_its_grid_with_a_fill_and_nothing_else() {
    let g = example("mpm88");
    assert_eq!(
        fill_of(&g, "clear_grid"),
        Some(("grid".into(), 0, 128 * 128 * 3))
    );
    // p2g and g2p are the kernels of the mpm_p2g / mpm_g2p assets.
    for k in ["p2g/k", "grid_update", "g2p/k"] {
        assert_eq!(fill_of(&g, k), None, "{}", k);
    }
}

fn check_words(s: &Simulation, what: &str) {
    // Hand-computed: rows 0..4 of `a` cleared, `b` cleared everywhere.
    let a: Vec<f32> = (0..64).map(|n| if n < 32 { 0.0 } else { 1.0 }).collect();
    assert_eq!(f32s(s, "a"), a, "{}: a", what);
    assert_eq!(f32s(s, "b"), vec![0.0; 128], "{}: b", what);
    let c: Vec<i32> = (0..24)
        .map(|n| if (8..16).contains(&n) || n > 19 { 0 } else { 5 })
        .collect();
    assert_eq!(i32s(s, "c"), c, "{}: c", what);
    assert_eq!(words(s, "d"), vec![(-0.0f32).to_bits(); 4], "{}: d", what);
}

#[test]
fn fills_leave_every_other_word_alone_on_every_backend() {
    let backends = local_backends();
    let program = build(&graph()).unwrap_or_else(|e| panic!("{}", e));
    for backend in backends {
        for profile in [false, true] {
            let opts = SimOptions {
                backend,
                profile,
                ..Default::default()
            };
            let mut s = Simulation::new(program.clone(), &opts)
                .unwrap_or_else(|e| panic!("{}: {}", backend, e));
            s.start().unwrap_or_else(|e| panic!("{}: {}", backend, e));
            check_words(&s, &format!("{} profile={}", backend, profile));
            if profile && backend == Backend::Wgpu {
                // A timed fill is reported like any launch.
                let times = &s.kernel_times["clear_head"];
                assert_eq!(times.len(), 1);
            }
        }
    }
}
