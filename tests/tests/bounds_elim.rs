//! The `bounds_elim` pass: bounds checks on indices proven in range (loop
//! indices of a dense iteration, arithmetic on them) and repeated checks
//! disappear from the compiled kernel; a check that can fail stays, and
//! still reports the same error on every backend.

use serde_json::{json, Value};
use weft_ir::ir::FaultKind;
use weft_runtime::{Backend, SimOptions, Simulation};
use weft_tests::*;

/// Out-of-bounds fault sites left in the only kernel after the whole pipeline.
fn bounds_sites(doc: &Value) -> Vec<(String, u32)> {
    let mut p = build(doc).unwrap();
    weft_ir::passes::run_pipeline(
        &mut p,
        &weft_ir::passes::PassOptions {
            bounds_checks: true,
            validate: true,
            ..Default::default()
        },
        None,
    )
    .unwrap();
    let k = &p.kernels.iter().next().unwrap().1;
    k.fault_sites
        .iter()
        .filter_map(|s| match s.kind {
            FaultKind::OutOfBounds { field, extent, .. } => {
                Some((p.fields[field].name.clone(), extent))
            }
            _ => None,
        })
        .collect()
}

/// The graph on `backend`, one thread (float sums in the interpreter's order).
fn sim(doc: &Value, backend: Backend) -> Simulation {
    let program = build(doc).unwrap_or_else(|e| panic!("{}", e));
    let opts = SimOptions {
        backend,
        threads: Some(1),
        ..Default::default()
    };
    Simulation::new(program, &opts).unwrap_or_else(|e| panic!("{}: {}", backend, e))
}

#[test]
fn checks_proven_by_the_loop_range_are_removed() {
    let g = kernel_graph(
        &[
            F("a", "f32", &[8], json!(1.0)),
            F("b", "f32", &[4], json!(0)),
        ],
        "fn kernel(i: i32) {\n    b[i % 4] += a[i] + a[(i * 3) % 8] + a[min(i, 7)];\n}\n",
        &[8],
        json!({}),
    );
    assert_eq!(bounds_sites(&g), vec![]);
    // Removing the checks changes no result: b[k] = sum over i = k, k + 4 of 3.
    for backend in local_backends() {
        let mut s = sim(&g, backend);
        s.start().unwrap();
        let b = f32s(&s, "b");
        assert_eq!(b, vec![6.0; 4], "{}", backend);
    }
}

#[test]
fn a_check_that_can_fail_stays_once_and_reports_the_same_error_everywhere() {
    // `i + 1` reaches 8 at i = 7; its check is made once although `a[j]` is
    // read twice; `a[i]` needs none.
    let g = kernel_graph(
        &[
            F("a", "f32", &[8], json!(1.0)),
            F("c", "f32", &[8], json!(0)),
        ],
        "fn kernel(i: i32) {\n    let j = i + 1;\n    c[i] = a[j] * a[j] + a[i];\n}\n",
        &[8],
        json!({}),
    );
    assert_eq!(bounds_sites(&g), vec![("a".to_string(), 8)]);
    let mut errors = vec![];
    for backend in local_backends() {
        let mut s = sim(&g, backend);
        let e = s.start().expect_err("j = 8 is out of range").to_string();
        assert!(e.contains("'k'") && e.contains('8'), "{}: {}", backend, e);
        errors.push(e);
    }
    assert!(errors.windows(2).all(|w| w[0] == w[1]), "{:?}", errors);
}

#[test]
fn a_kernel_over_a_sparse_field_still_visits_exactly_the_active_cells() {
    // Over a field under a pointer node the loop indices come from element
    // lists: the pass must not use the shape as a proof there, and the
    // kernel still visits and writes exactly the active cells.
    let g = json!({
        "format": "weft-graph", "version": 1,
        "nodes": [
            {"id": "blocks", "kind": "pointer", "params": {"shape": [4], "capacity": 4}},
            {"id": "cells", "kind": "dense", "params": {"shape": [8]}},
            {"id": "x", "kind": "field", "params": {"type": "f32"}},
            {"id": "seed", "kind": "kernel", "params": {"range": [32],
                "code": "fn kernel(i: i32) {\n    if i < 8 {\n        x[i] = 1.0;\n    }\n}\n"}},
            {"id": "double", "kind": "kernel", "params": {"over": "x",
                "code": "fn kernel(i: i32) {\n    x[i] = x[i] * 2.0;\n}\n"}},
            {"id": "start", "kind": "on_start"}
        ],
        "wires": [
            {"from": "blocks.cells", "to": "cells.parent"},
            {"from": "cells.cells", "to": "x.layout"},
            {"from": "x.field", "to": "seed.x"},
            {"from": "x.field", "to": "double.x"}
        ],
        "exec": [
            {"from": "start.then", "to": "seed"},
            {"from": "seed.then", "to": "double"}
        ]
    });
    for backend in local_backends() {
        let mut s = sim(&g, backend);
        s.start().unwrap();
        let x = f32s(&s, "x");
        let want: Vec<f32> = (0..32).map(|i| if i < 8 { 2.0 } else { 0.0 }).collect();
        assert_eq!(x, want, "{}", backend);
    }
}

#[test]
fn the_first_failing_check_of_an_invocation_is_the_one_reported() {
    // At i = 7 both accesses are out of range: `b[9]` on line 2 comes first
    // and must be the fault reported (its line, field and index), on every
    // backend; the wgpu backend notes faults in the invocation and writes
    // the error words once at its end, which must not change which one.
    let g = kernel_graph(
        &[
            F("a", "f32", &[8], json!(1.0)),
            F("b", "f32", &[8], json!(2.0)),
            F("c", "f32", &[8], json!(0)),
        ],
        "fn kernel(i: i32) {\n    let x = b[i / 7 * 9];\n    c[i] = x + a[i + 1];\n}\n",
        &[8],
        json!({}),
    );
    let mut errors = vec![];
    for backend in local_backends() {
        let mut s = sim(&g, backend);
        let e = s.start().expect_err("b[9] is out of range").to_string();
        assert!(
            e.contains("code 2:") && e.contains("index 9") && e.contains("'b'"),
            "{}: {}",
            backend,
            e
        );
        errors.push(e);
    }
    assert!(errors.windows(2).all(|w| w[0] == w[1]), "{:?}", errors);
}

#[test]
fn a_fault_names_the_kernel_that_failed_when_one_submit_runs_several() {
    // Both kernels have a check numbered 0; `first` passes it and `second`,
    // launched after it in the same frame, fails it on another line. The
    // wgpu backend runs the whole frame in one submit, so its error words
    // must say which kernel failed, not only which site.
    let g = json!({
        "format": "weft-graph", "version": 1,
        "nodes": [
            {"id": "cells", "kind": "dense", "params": {"shape": [4]}},
            {"id": "f", "kind": "field", "params": {"type": "f32"}},
            {"id": "first", "kind": "kernel", "params": {"over": "f", "scalars": {"k": 0},
             "code": "fn kernel(i: i32) {\n    f[i + k] = 1.0;\n}\n"}},
            {"id": "second", "kind": "kernel", "params": {"over": "f",
             "code": "fn kernel(i: i32) {\n    let x = 2.0;\n    f[i + 1] = x;\n}\n"}},
            {"id": "start", "kind": "on_start"}
        ],
        "wires": [
            {"from": "cells.cells", "to": "f.layout"},
            {"from": "f.field", "to": "first.f"},
            {"from": "f.field", "to": "second.f"}
        ],
        "exec": [
            {"from": "start.then", "to": "first"},
            {"from": "first.then", "to": "second"}
        ]
    });
    for backend in local_backends() {
        let e = sim(&g, backend)
            .start()
            .expect_err("f[4] is out of range")
            .to_string();
        assert!(
            e.contains("node 'second'") && e.contains("code 3:") && e.contains("index 4"),
            "{}: {}",
            backend,
            e
        );
    }
}

#[test]
fn a_fault_in_the_last_frame_run_is_reported_by_sync() {
    // Frames 1 and 2 are fine; frame 3 writes f[4]. A GPU engine returns
    // from a frame before the GPU has run it, so the fault may surface at a
    // later call: here frame 3 is the last, and `sync` must report it (on
    // the CPU backends `step_frame` already did).
    let g = faults_in_frame_3();
    for backend in local_backends() {
        let mut s = sim(&g, backend);
        s.step_frame().expect("frame 1 is fine");
        s.step_frame().expect("frame 2 is fine");
        let e = s
            .step_frame()
            .and_then(|_| s.sync())
            .expect_err("frame 3 writes f[4]")
            .to_string();
        assert!(
            e.contains("node 'k'") && e.contains("code 2:5:") && e.contains("index 4"),
            "{}: {}",
            backend,
            e
        );
        // Reported once: the run can go on (or be reset) after it.
        s.sync().expect("the fault was reported already");
    }
}

/// Frames 1 and 2 are fine; frame 3 writes f[4].
fn faults_in_frame_3() -> Value {
    json!({
        "format": "weft-graph", "version": 1,
        "nodes": [
            {"id": "cells", "kind": "dense", "params": {"shape": [4]}},
            {"id": "f", "kind": "field", "params": {"type": "f32"}},
            {"id": "k", "kind": "kernel", "params": {"over": "f",
             "code": "fn kernel(i: i32) {\n    f[i + frame() / 3] = 1.0;\n}\n"}},
            {"id": "tick", "kind": "on_frame"}
        ],
        "wires": [
            {"from": "cells.cells", "to": "f.layout"},
            {"from": "f.field", "to": "k.f"}
        ],
        "exec": [{"from": "tick.then", "to": "k"}]
    })
}

#[test]
fn a_reset_forgets_a_fault_of_the_run_it_throws_away() {
    // Frame 3 faults; whether the engine has reported it yet or not, a reset
    // starts a new run that reports nothing until it faults itself.
    for backend in local_backends() {
        let mut s = sim(&faults_in_frame_3(), backend);
        s.step_frame().expect("frame 1 is fine");
        s.step_frame().expect("frame 2 is fine");
        let _ = s.step_frame();
        s.reset().expect("reset");
        s.start()
            .unwrap_or_else(|e| panic!("{}: start after reset: {}", backend, e));
        s.step_frame().expect("frame 1 again");
        s.sync().expect("nothing failed since the reset");
        let e = s
            .step_frame()
            .and_then(|_| s.step_frame())
            .and_then(|_| s.sync())
            .expect_err("frame 3 again");
        assert!(e.to_string().contains("index 4"), "{}: {}", backend, e);
    }
}

/// A 2-D field `g` (10 x 10, g[x, y] = 10 x + y), a particle position per
/// invocation in `p` and the 3 x 3 stencil sum around it in `out`: the
/// index math of mpm's P2G / G2P.
fn stencil_graph(positions: [[f32; 2]; 2]) -> Value {
    let [[a, b], [c, d]] = positions;
    let place = format!(
        "fn kernel(q: i32) {{\n    if q == 0 {{\n        p[q] = vec2({:?}, {:?});\n    }} else {{\n        p[q] = vec2({:?}, {:?});\n    }}\n}}\n",
        a, b, c, d
    );
    json!({
        "format": "weft-graph", "version": 1,
        "nodes": [
            {"id": "grid", "kind": "dense", "params": {"shape": [10, 10]}},
            {"id": "g", "kind": "field", "params": {"type": "f32"}},
            {"id": "parts", "kind": "dense", "params": {"shape": [2]}},
            {"id": "p", "kind": "field", "params": {"type": "vec2"}},
            {"id": "place", "kind": "kernel", "params": {"over": "p", "code": place}},
            {"id": "out", "kind": "field", "params": {"type": "f32"}},
            {"id": "fill", "kind": "kernel", "params": {"over": "g",
                "code": "fn kernel(x: i32, y: i32) {\n    g[(x, y)] = (x * 10 + y) as f32;\n}\n"}},
            {"id": "gather", "kind": "kernel", "params": {"over": "out",
                "code": "fn kernel(q: i32) {\n    let base = (p[q] - 0.5) as ivec2;\n    let mut s = 0.0;\n    for i in 0..3 {\n        for j in 0..3 {\n            s += g[base + ivec2(i, j)];\n        }\n    }\n    out[q] = s;\n}\n"}},
            {"id": "start", "kind": "on_start"}
        ],
        "wires": [
            {"from": "p.field", "to": "place.p"},
            {"from": "grid.cells", "to": "g.layout"},
            {"from": "parts.cells", "to": "p.layout"},
            {"from": "parts.cells", "to": "out.layout"},
            {"from": "g.field", "to": "fill.g"},
            {"from": "g.field", "to": "gather.g"},
            {"from": "p.field", "to": "gather.p"},
            {"from": "out.field", "to": "gather.out"}
        ],
        "exec": [
            {"from": "start.then", "to": "place"},
            {"from": "place.then", "to": "fill"},
            {"from": "fill.then", "to": "gather"}
        ]
    })
}

/// Out-of-bounds sites of kernel `name` after the whole pipeline.
fn sites_of(doc: &Value, name: &str) -> usize {
    let p = compiled(doc);
    let (_, k) = p.kernels.iter().find(|(_, k)| k.name == name).unwrap();
    k.fault_sites
        .iter()
        .filter(|s| matches!(s.kind, FaultKind::OutOfBounds { .. }))
        .count()
}

#[test]
fn a_stencil_is_checked_at_the_two_ends_of_each_axis() {
    // Nine cells, two axes: 18 checks as written; the cells' indices share
    // their axes' values (base.x + 0, 1, 2), and the checks of each axis
    // are widened to its smallest and largest offset.
    let g = stencil_graph([[1.7, 2.2], [7.9, 5.5]]);
    assert_eq!(sites_of(&g, "gather"), 4);
    // Sums by hand: base (1, 1) and (7, 5); the cells x0..x0+2, y0..y0+2.
    let sum = |x0: i32, y0: i32| -> f32 {
        let mut s = 0.0;
        for x in x0..x0 + 3 {
            for y in y0..y0 + 3 {
                s += (x * 10 + y) as f32;
            }
        }
        s
    };
    for backend in local_backends() {
        let mut s = sim(&g, backend);
        s.start().unwrap();
        assert_eq!(f32s(&s, "out"), vec![sum(1, 1), sum(7, 5)], "{}", backend);
    }
}

#[test]
fn a_stencil_that_leaves_the_grid_faults_with_its_largest_index_everywhere() {
    // Base x = 8: cells x = 8, 9 are in the grid and x = 10 is not. The
    // widened check fails before any cell is read, with the index the
    // kernel would have used (10), the field and the line.
    let g = stencil_graph([[1.7, 2.2], [9.1, 5.5]]);
    let mut errors = vec![];
    for backend in local_backends() {
        let mut s = sim(&g, backend);
        let e = s.start().expect_err("x = 10 is out of range").to_string();
        assert!(
            e.contains("'gather'")
                && e.contains("'g'")
                && e.contains("index 10")
                && e.contains("code 6:"),
            "{}: {}",
            backend,
            e
        );
        errors.push(e);
    }
    assert!(errors.windows(2).all(|w| w[0] == w[1]), "{:?}", errors);
}

#[test]
fn a_check_after_an_early_return_is_not_moved_above_it() {
    // Invocations i > 0 return before reading b[j + 9], which is out of
    // range for them: widening b[j] and b[j + 9] into one place would make
    // them fault. Only invocation 0 reads b[9].
    let g = kernel_graph(
        &[
            F("b", "f32", &[10], json!(2.0)),
            F("c", "f32", &[4], json!(0)),
        ],
        "fn kernel(i: i32) {\n    let j = i;\n    let x = b[j];\n    if i > 0 {\n        c[i] = x;\n        return;\n    }\n    c[i] = x + b[j + 9];\n}\n",
        &[4],
        json!({}),
    );
    for backend in local_backends() {
        let mut s = sim(&g, backend);
        s.start().unwrap_or_else(|e| panic!("{}: {}", backend, e));
        assert_eq!(f32s(&s, "c"), vec![4.0, 2.0, 2.0, 2.0], "{}", backend);
    }
}

#[test]
fn frames_that_cannot_fault_run_between_ones_that_can() {
    // `on_start` runs a kernel with a check (`f[i + n]`, n a parameter), the
    // frames one without (`f[i]` over f): the GPU engine reads error words
    // back only for submits whose kernels have checks, and both kinds of
    // submit share its queue. The values after five frames and a sync are
    // the hand-computed ones, and nothing is reported.
    let g = json!({
        "format": "weft-graph", "version": 1,
        "nodes": [
            {"id": "cells", "kind": "dense", "params": {"shape": [4]}},
            {"id": "f", "kind": "field", "params": {"type": "f32"}},
            {"id": "seed", "kind": "kernel", "params": {"range": [4], "scalars": {"n": 0},
             "code": "fn kernel(i: i32) {\n    f[i + n] = i as f32;\n}\n"}},
            {"id": "bump", "kind": "kernel", "params": {"over": "f",
             "code": "fn kernel(i: i32) {\n    f[i] += 1.0;\n}\n"}},
            {"id": "start", "kind": "on_start"},
            {"id": "tick", "kind": "on_frame"}
        ],
        "wires": [
            {"from": "cells.cells", "to": "f.layout"},
            {"from": "f.field", "to": "seed.f"},
            {"from": "f.field", "to": "bump.f"}
        ],
        "exec": [
            {"from": "start.then", "to": "seed"},
            {"from": "tick.then", "to": "bump"}
        ]
    });
    assert_eq!(sites_of(&g, "seed"), 1);
    assert_eq!(sites_of(&g, "bump"), 0);
    for backend in local_backends() {
        let mut s = sim(&g, backend);
        s.start().unwrap();
        for _ in 0..5 {
            s.step_frame().unwrap();
        }
        s.sync().unwrap_or_else(|e| panic!("{}: {}", backend, e));
        assert_eq!(f32s(&s, "f"), vec![5.0, 6.0, 7.0, 8.0], "{}", backend);
    }
}
