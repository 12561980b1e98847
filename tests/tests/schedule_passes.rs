//! Each schedule pass (`weft_ir::schedule`, issue 31) on a small graph: a
//! case it transforms and the cases it must not (a read between two
//! writes, a fault site between them, a mask change between two
//! struct-fors, a touched node between two clears). Every graph also runs
//! on the VM with the optimiser on and off, and its root buffers must come
//! out bit for bit the same.

use serde_json::{json, Value};
use weft_ir::passes::{run_pipeline, PassOptions, Stage};
use weft_ir::schedule::print_schedule;
use weft_runtime::{Backend, SimOptions, Simulation};
use weft_tests::*;

enum S<'a> {
    /// A kernel node: id, code, `Some("s")` for a struct-for over `s`
    /// (else a range of 8, or 16 when the code touches `s`).
    K(&'a str, &'a str, Option<&'a str>),
    /// A `clear` of the sparse node holding `s`.
    Clear,
}

/// Dense f32 fields `a`, `b`, `c` of 8 cells; a sparse f32 field `s` of 16
/// cells (bitmasked 4 over dense 4), all activated by `on_start`; the
/// frame runs `steps` in order.
fn frame_graph(steps: &[S]) -> Value {
    let mut nodes = vec![
        json!({"id": "dn", "kind": "dense", "params": {"shape": [8]}}),
        json!({"id": "sb", "kind": "bitmasked", "params": {"shape": [4]}}),
        json!({"id": "sc", "kind": "dense", "params": {"shape": [4]}}),
        json!({"id": "start", "kind": "on_start"}),
        json!({"id": "frame", "kind": "on_frame"}),
        json!({"id": "activate", "kind": "kernel", "params": {"range": [16], "code": "fn kernel(i: i32) { s[i] = i as f32; }"}}),
    ];
    let mut wires = vec![
        json!({"from": "sb.cells", "to": "sc.parent"}),
        json!({"from": "sc.cells", "to": "s.layout"}),
        json!({"from": "s.field", "to": "activate.s"}),
    ];
    for f in ["a", "b", "c"] {
        nodes.push(json!({"id": f, "kind": "field", "params": {"type": "f32", "init": 0}}));
        wires.push(json!({"from": "dn.cells", "to": format!("{}.layout", f)}));
    }
    nodes.push(json!({"id": "s", "kind": "field", "params": {"type": "f32", "init": 0}}));
    let mut exec = vec![json!({"from": "start.then", "to": "activate"})];
    let mut prev = "frame".to_string();
    for (n, s) in steps.iter().enumerate() {
        let id = match s {
            S::K(id, code, over) => {
                let mut params = json!({"code": code});
                match over {
                    Some(f) => params["over"] = json!(f),
                    None => params["range"] = json!([if code.contains("s[") { 16 } else { 8 }]),
                }
                nodes.push(json!({"id": id, "kind": "kernel", "params": params}));
                for f in ["a", "b", "c", "s"] {
                    if code.contains(&format!("{}[", f)) {
                        wires.push(
                            json!({"from": format!("{}.field", f), "to": format!("{}.{}", id, f)}),
                        );
                    }
                }
                id.to_string()
            }
            S::Clear => {
                let id = format!("clear{}", n);
                nodes.push(json!({"id": id, "kind": "clear"}));
                wires.push(json!({"from": "sb.cells", "to": format!("{}.layout", id)}));
                id
            }
        };
        exec.push(json!({"from": format!("{}.then", prev), "to": id}));
        prev = id;
    }
    json!({"format": "weft-graph", "version": 1, "nodes": nodes, "wires": wires, "exec": exec})
}

fn options(interkernel: bool) -> PassOptions {
    PassOptions {
        validate: true,
        interkernel,
        ..Default::default()
    }
}

/// `g` compiled with the optimiser `on` or off for `backend`, started
/// (one worker thread on cpu, so float sums repeat).
fn started(g: &Value, backend: Backend, on: bool) -> Simulation {
    let mut sim = Simulation::new(
        build(g).unwrap_or_else(|e| panic!("{}", e)),
        &SimOptions {
            passes: options(on),
            backend,
            threads: Some(1),
            ..Default::default()
        },
    )
    .unwrap();
    sim.start().unwrap();
    sim
}

/// The frame's schedule text after the schedule stage, optimiser off and
/// on; the graph also runs 2 frames both ways on the VM with identical roots.
fn schedules(g: &Value) -> (String, String) {
    let text = |on: bool| {
        let mut p = build(g).unwrap_or_else(|e| panic!("{}", e));
        run_pipeline(&mut p, &options(on), Some(Stage::Schedule)).unwrap();
        let all = print_schedule(&p);
        all[all.find("schedule on_frame").unwrap()..].to_string()
    };
    let roots = |on: bool| {
        let mut sim = started(g, Backend::Vm, on);
        for _ in 0..2 {
            sim.step_frame().unwrap();
        }
        let roots: Vec<_> = sim.program.roots().collect();
        roots
            .into_iter()
            .map(|r| sim.read_root(r).unwrap())
            .collect::<Vec<_>>()
    };
    assert!(
        roots(true) == roots(false),
        "results change with the optimiser"
    );
    (text(false), text(true))
}

fn count(text: &str, what: &str) -> usize {
    text.lines().filter(|l| l.contains(what)).count()
}

/// Launches of kernel node `node` in a schedule's text, alone or fused
/// with others (`launch K7 'w1+r'`).
fn launched(text: &str, node: &str) -> usize {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("launch "))
        .filter(|l| {
            let label = l.split('\'').nth(1).unwrap_or("");
            label.split('+').any(|n| n == node)
        })
        .count()
}

const W1: &str = "fn kernel(i: i32) { a[i] = 1.0; }";
const W2: &str = "fn kernel(i: i32) { a[i] = 2.0; }";

#[test]
fn dead_store_drops_a_store_overwritten_before_any_read() {
    let (off, on) = schedules(&frame_graph(&[S::K("w1", W1, None), S::K("w2", W2, None)]));
    assert_eq!(launched(&off, "w1"), 1, "{}", off);
    assert_eq!(launched(&on, "w1"), 0, "{}", on);
    assert_eq!(launched(&on, "w2"), 1, "{}", on);
}

#[test]
fn dead_store_keeps_a_store_read_between_the_two_writes() {
    let (_, on) = schedules(&frame_graph(&[
        S::K("w1", W1, None),
        S::K("r", "fn kernel(i: i32) { b[i] = a[i]; }", None),
        S::K("w2", W2, None),
    ]));
    assert_eq!(launched(&on, "w1"), 1, "{}", on);
}

#[test]
fn dead_store_keeps_a_store_a_fault_site_between_could_show() {
    // `c[(i + 1) % 8]` is not the own cell: a bounds check may stop the
    // frame there, with `a` as w1 left it.
    let (_, on) = schedules(&frame_graph(&[
        S::K("w1", W1, None),
        S::K(
            "f",
            "fn kernel(i: i32) { c[i] = c[(i + 1) % 8] + 1.0; }",
            None,
        ),
        S::K("w2", W2, None),
    ]));
    assert_eq!(launched(&on, "w1"), 1, "{}", on);
}

#[test]
fn dead_store_keeps_a_partial_overwrite() {
    let (_, on) = schedules(&frame_graph(&[
        S::K("w1", W1, None),
        S::K("w2", "fn kernel(i: i32) { if i > 3 { a[i] = 2.0; } }", None),
    ]));
    assert_eq!(launched(&on, "w1"), 1, "{}", on);
}

const BUMP: &str = "fn kernel(i: i32) { s[i] = s[i] + 1.0; }";

#[test]
fn list_reuse_drops_a_list_whose_mask_nothing_changed() {
    let (off, on) = schedules(&frame_graph(&[
        S::K("s1", BUMP, Some("s")),
        S::K("w1", W1, None),
        S::K("s2", BUMP, Some("s")),
    ]));
    assert_eq!(count(&off, "list "), 2, "{}", off);
    assert_eq!(count(&on, "list "), 1, "{}", on);
}

#[test]
fn list_reuse_regenerates_after_a_deactivation() {
    let (_, on) = schedules(&frame_graph(&[
        S::K("s1", BUMP, Some("s")),
        S::K(
            "d",
            "fn kernel(i: i32) { if i == 5 { deactivate(s[i]); } }",
            None,
        ),
        S::K("s2", BUMP, Some("s")),
    ]));
    assert_eq!(count(&on, "list "), 2, "{}", on);
}

#[test]
fn list_reuse_regenerates_after_an_activating_store() {
    // A range kernel's store into `s` may activate cells.
    let (_, on) = schedules(&frame_graph(&[
        S::K("s1", BUMP, Some("s")),
        S::K("act", "fn kernel(i: i32) { s[i] = 3.0; }", None),
        S::K("s2", BUMP, Some("s")),
    ]));
    assert_eq!(count(&on, "list "), 2, "{}", on);
}

#[test]
fn clear_elim_drops_a_second_clear_of_an_untouched_node() {
    let (off, on) = schedules(&frame_graph(&[S::Clear, S::K("w1", W1, None), S::Clear]));
    assert_eq!(count(&off, "clear "), 2, "{}", off);
    assert_eq!(count(&on, "clear "), 1, "{}", on);
}

#[test]
fn clear_elim_keeps_a_clear_after_an_activation() {
    let (_, on) = schedules(&frame_graph(&[
        S::Clear,
        S::K("act", "fn kernel(i: i32) { s[i] = 3.0; }", None),
        S::Clear,
    ]));
    assert_eq!(count(&on, "clear "), 2, "{}", on);
}

/// The lowered IR of kernel `k` (after `lower_access`), optimiser on or off.
fn lowered(g: &Value, k: &str, on: bool) -> String {
    let mut p = build(g).unwrap_or_else(|e| panic!("{}", e));
    run_pipeline(&mut p, &options(on), Some(Stage::LowerAccess)).unwrap();
    weft_ir::ir::print_program(&p, Some(k))
}

/// Activation demotion: a struct-for's store at its own loop index into its
/// own sparse cells addresses the cell without activating it (no atomic on
/// the activity word); results are the same (`schedules` runs both ways).
#[test]
fn activation_demotion_drops_the_activation_of_a_known_active_cell() {
    let g = frame_graph(&[S::K("s1", BUMP, Some("s"))]);
    let _ = schedules(&g);
    let (off, on) = (lowered(&g, "s1", false), lowered(&g, "s1", true));
    assert!(count(&off, "atomic") > 0, "{}", off);
    assert_eq!(count(&on, "atomic"), 0, "{}", on);
}

/// Stores it must leave activating: at another index, from a range kernel,
/// and in a struct-for that also deactivates cells of the tree.
#[test]
fn activation_demotion_keeps_stores_it_cannot_prove_active() {
    for (code, over) in [
        ("fn kernel(i: i32) { s[(i + 1) % 16] = 2.0; }", Some("s")),
        ("fn kernel(i: i32) { s[i] = s[i] + 1.0; }", None),
        (
            "fn kernel(i: i32) { s[i] = s[i] + 1.0; if i == 3 { deactivate(s[5]); } }",
            Some("s"),
        ),
    ] {
        let g = frame_graph(&[S::K("s1", code, over)]);
        let _ = schedules(&g);
        let (off, on) = (lowered(&g, "s1", false), lowered(&g, "s1", true));
        assert_eq!(
            count(&off, "atomic"),
            count(&on, "atomic"),
            "{}: demoted a store it cannot prove active\n{}",
            code,
            on
        );
        assert!(count(&on, "atomic") > 0, "{}\n{}", code, on);
    }
}

// Task fusion: consecutive launches over one iteration space whose
// invocations cannot see each other become one kernel (`schedule::fusion`).

const DOUBLE: &str = "fn kernel(i: i32) { a[i] = i as f32 * 2.0; }";
const PLUS: &str = "fn kernel(i: i32) { b[i] = a[i] + 1.0; }";
const PRODUCT: &str = "fn kernel(i: i32) { c[i] = b[i] * a[i]; }";

#[test]
fn fusion_joins_launches_that_meet_only_at_their_own_elements() {
    let (off, on) = schedules(&frame_graph(&[
        S::K("w", DOUBLE, None),
        S::K("r", PLUS, None),
        S::K("p", PRODUCT, None),
    ]));
    assert_eq!(count(&off, "launch "), 3, "{}", off);
    assert_eq!(count(&on, "launch "), 1, "{}", on);
    assert_eq!(count(&on, "'w+r+p'"), 1, "{}", on);
}

/// Loops with a constant positive step always end and cannot fault, so
/// two kernels with loops still fuse.
#[test]
fn fusion_joins_kernels_with_constant_loops() {
    let (_, on) = schedules(&frame_graph(&[
        S::K(
            "l1",
            "fn kernel(i: i32) { let mut s = 0.0; for k in 0..3 { s += a[i] * k as f32; } b[i] = s; }",
            None,
        ),
        S::K(
            "l2",
            "fn kernel(i: i32) { for k in (0..4).step_by(2) { c[i] = c[i] + b[i] + k as f32; } }",
            None,
        ),
    ]));
    assert_eq!(count(&on, "'l1+l2'"), 1, "{}", on);
}

#[test]
fn fusion_joins_struct_fors_over_the_same_cells_sharing_one_list() {
    let (off, on) = schedules(&frame_graph(&[
        S::K("s1", BUMP, Some("s")),
        S::K("s2", BUMP, Some("s")),
    ]));
    assert_eq!(count(&off, "launch "), 2, "{}", off);
    assert_eq!(count(&on, "'s1+s2'"), 1, "{}", on);
    assert_eq!(count(&on, "list "), 1, "{}", on);
}

/// Pairs it must keep apart; `schedules` also checks every case gives the
/// same roots both ways.
#[test]
fn fusion_keeps_apart_launches_whose_invocations_could_see_each_other() {
    let cases: [(&str, &[S]); 9] = [
        (
            "a read of another invocation's element after the write",
            &[
                S::K("w", DOUBLE, None),
                S::K("x", "fn kernel(i: i32) { b[i] = a[(i + 1) % 8]; }", None),
            ],
        ),
        (
            "a write of an element another invocation read before",
            &[
                S::K("x", "fn kernel(i: i32) { b[i] = a[(i + 1) % 8]; }", None),
                S::K("w", DOUBLE, None),
            ],
        ),
        (
            "different ranges",
            &[
                S::K("w", DOUBLE, None),
                S::K("x", "fn kernel(i: i32) { s[i] = s[i] * 2.0; }", None),
            ],
        ),
        (
            "two launches that may both fault (the first fault would change)",
            &[
                S::K(
                    "w",
                    "fn kernel(i: i32) { c[i] = c[(i + 1) % 8] + 1.0; }",
                    None,
                ),
                S::K(
                    "x",
                    "fn kernel(i: i32) { b[i] = b[(i + 7) % 8] * 2.0; }",
                    None,
                ),
            ],
        ),
        (
            "two loops whose steps may be refused at run time",
            &[
                S::K(
                    "w",
                    "fn kernel(i: i32) { for k in (0..4).step_by(i % 3 + 1) { a[i] = a[i] + 1.0; } }",
                    None,
                ),
                S::K(
                    "x",
                    "fn kernel(i: i32) { for k in (0..4).step_by(i % 2 + 1) { b[i] = b[i] + 1.0; } }",
                    None,
                ),
            ],
        ),
        (
            "random numbers (streams are per kernel node)",
            &[
                S::K("w", "fn kernel(i: i32) { a[i] = random(); }", None),
                S::K("x", PLUS, None),
            ],
        ),
        (
            "an early return in the first (it would skip the second)",
            &[
                S::K(
                    "w",
                    "fn kernel(i: i32) { if i > 3 { return; } a[i] = 1.0; }",
                    None,
                ),
                S::K("x", "fn kernel(i: i32) { b[i] = 2.0; }", None),
            ],
        ),
        (
            "activating stores into one sparse tree (a mask both change)",
            &[
                S::K("w", "fn kernel(i: i32) { s[i] = 3.0; }", None),
                S::K("x", "fn kernel(i: i32) { s[i] = s[i] + 1.0; }", None),
            ],
        ),
        (
            "a struct-for after a store that may activate other cells",
            &[
                S::K(
                    "w",
                    "fn kernel(i: i32) { s[(i + 1) % 16] = 1.0; }",
                    Some("s"),
                ),
                S::K("x", BUMP, Some("s")),
            ],
        ),
    ];
    for (why, steps) in cases {
        let (_, on) = schedules(&frame_graph(steps));
        assert_eq!(count(&on, "+"), 0, "{}: fused\n{}", why, on);
    }
}

/// The fused kernel computes the two launches' bits on every backend.
#[test]
fn fused_kernels_agree_with_the_separate_launches_on_every_backend() {
    let g = frame_graph(&[
        S::K("w", DOUBLE, None),
        S::K("r", PLUS, None),
        S::K("p", PRODUCT, None),
        S::K("s1", BUMP, Some("s")),
        S::K("s2", "fn kernel(i: i32) { s[i] = s[i] * 0.5; }", Some("s")),
    ]);
    let run = |backend, on: bool| {
        let mut sim = started(&g, backend, on);
        for _ in 0..3 {
            sim.step_frame().unwrap();
        }
        ["a", "b", "c", "s"].map(|f| words(&sim, f))
    };
    let reference = run(Backend::Vm, false);
    for backend in local_backends() {
        assert!(
            run(backend, true) == reference,
            "{:?}: the fused kernels differ from separate launches on the VM",
            backend
        );
    }
}

/// A fault in the second part of a fused kernel names that part's node and
/// code line, on every backend.
#[test]
fn a_fault_in_a_fused_kernel_names_the_node_it_came_from() {
    let g = frame_graph(&[
        S::K("w", DOUBLE, None),
        S::K(
            "f",
            "fn kernel(i: i32) {\n    b[i] = a[i];\n    c[i + 4] = 1.0;\n}",
            None,
        ),
    ]);
    let mut p = build(&g).unwrap();
    run_pipeline(&mut p, &options(true), Some(Stage::Schedule)).unwrap();
    assert!(
        print_schedule(&p).contains("'w+f'"),
        "{}",
        print_schedule(&p)
    );
    for backend in local_backends() {
        let mut sim = started(&g, backend, true);
        // GPU frames run ahead: the fault surfaces by the next wait.
        let err = sim
            .step_frame()
            .and_then(|_| sim.sync())
            .expect_err("c[i + 4] is out of bounds for i >= 4");
        match err {
            weft_runtime::RuntimeError::Kernel { node, line, .. } => {
                assert_eq!((node.as_str(), line), ("f", 3), "{:?}", backend)
            }
            other => panic!("{:?}: {}", backend, other),
        }
    }
}

/// The kernels fusion joined are no longer launched, so no backend
/// compiles them (`schedule::unlaunched`): the program keeps the fused
/// kernel and the views' kernels, with every handle still pointing at the
/// kernel it named. Without the optimiser every kernel stays.
#[test]
fn kernels_fusion_joined_are_not_compiled() {
    let g = frame_graph(&[
        S::K("w", "fn kernel(i: i32) { a[i] = 1.0; }", None),
        S::K("r", "fn kernel(i: i32) { b[i] = a[i] * 2.0; }", None),
        S::K("t", "fn kernel(i: i32) { c[i] = b[i] + a[i]; }", None),
    ]);
    let launched = |p: &weft_ir::ir::Program| {
        let mut ks = vec![];
        fn walk(steps: &[weft_ir::ir::Step], ks: &mut Vec<String>, p: &weft_ir::ir::Program) {
            for s in steps {
                match s {
                    weft_ir::ir::Step::Launch(k) => ks.push(p.kernels[*k].label()),
                    weft_ir::ir::Step::Repeat { body, .. } => walk(body, ks, p),
                    _ => {}
                }
            }
        }
        walk(&p.schedule.on_start, &mut ks, p);
        walk(&p.schedule.on_frame, &mut ks, p);
        for v in &p.view_kernels {
            ks.extend(v.launches.iter().map(|k| p.kernels[*k].label()));
        }
        ks.sort();
        ks.dedup();
        ks
    };
    for on in [false, true] {
        let mut p = build(&g).unwrap();
        run_pipeline(&mut p, &options(on), None).unwrap();
        let all: Vec<String> = p.kernels.iter().map(|(_, k)| k.label()).collect();
        if on {
            assert!(all.contains(&"w+r+t".to_string()), "{:?}", all);
            let mut sorted = all.clone();
            sorted.sort();
            assert_eq!(sorted, launched(&p), "only launched kernels are left");
        } else {
            for k in ["w", "r", "t"] {
                assert!(all.contains(&k.to_string()), "{:?}", all);
            }
        }
    }
    // And the fused run computes what the three launches do.
    let mut sim = started(&g, Backend::Vm, true);
    sim.step_frame().unwrap();
    assert_eq!(f32s(&sim, "c")[5], 3.0);
}

/// A kernel no execution wire reaches is not compiled either, and a
/// `frame` expression on its scalar (which animates nothing) does not stop
/// the frames of the kernels that run.
#[test]
fn a_kernel_that_never_runs_is_dropped_with_its_animated_scalar() {
    let mut g = frame_graph(&[S::K("w", "fn kernel(i: i32) { a[i] = 1.0; }", None)]);
    let nodes = g["nodes"].as_array_mut().unwrap();
    nodes.push(json!({"id": "idle", "kind": "kernel", "params": {
        "range": [8], "code": "fn kernel(i: i32) { b[i] = k; }",
        "scalars": {"k": "= frame * 0.5"}}}));
    g["wires"]
        .as_array_mut()
        .unwrap()
        .push(json!({"from": "b.field", "to": "idle.b"}));
    let mut p = build(&g).unwrap();
    run_pipeline(&mut p, &options(true), None).unwrap();
    assert!(!p.has_kernel_node("idle"));
    assert!(p.animated.is_empty());
    for on in [false, true] {
        let mut sim = started(&g, Backend::Vm, on);
        for _ in 0..2 {
            sim.step_frame().unwrap();
        }
        assert_eq!(f32s(&sim, "a")[3], 1.0);
    }
}

/// Scalars keep their node in a fused kernel: `set_param` on one node's
/// scalar changes that node's part only, even where both have one of the
/// same name.
#[test]
fn scalars_of_a_fused_kernel_keep_their_node() {
    let mut g = frame_graph(&[
        S::K("w", "fn kernel(i: i32) { a[i] = k; }", None),
        S::K("r", "fn kernel(i: i32) { b[i] = a[i] * k; }", None),
    ]);
    set_param(&mut g, "w", "scalars", json!({"k": 1.0}));
    set_param(&mut g, "r", "scalars", json!({"k": 2.0}));
    let mut sim = started(&g, Backend::Vm, true);
    assert_eq!(sim.program.schedule.on_frame.len(), 1, "not fused");
    sim.step_frame().unwrap();
    assert_eq!((f32s(&sim, "a")[3], f32s(&sim, "b")[3]), (1.0, 2.0));
    sim.set_param("r", "k", 5.0).unwrap();
    sim.step_frame().unwrap();
    assert_eq!((f32s(&sim, "a")[3], f32s(&sim, "b")[3]), (1.0, 5.0));
    sim.set_param("w", "k", 3.0).unwrap();
    sim.step_frame().unwrap();
    assert_eq!((f32s(&sim, "a")[3], f32s(&sim, "b")[3]), (3.0, 15.0));
    sim.set_param("r", "nope", 1.0)
        .expect_err("r has no scalar 'nope'");
}

/// A frame of `repeat` x`count` (index scalar `index`) around one kernel over 8 cells.
fn repeat_graph(count: u32, index: Option<&str>, code: &str) -> Value {
    let mut g = frame_graph(&[]);
    let nodes = g["nodes"].as_array_mut().unwrap();
    nodes.push(json!({"id": "rep", "kind": "repeat", "params": {"count": count, "index": index}}));
    let mut params = json!({"code": code, "range": [8]});
    if let Some(i) = index {
        params["scalars"] = json!({ i: 0 });
    }
    nodes.push(json!({"id": "k", "kind": "kernel", "params": params}));
    for f in ["a", "b"] {
        if code.contains(&format!("{}[", f)) {
            g["wires"]
                .as_array_mut()
                .unwrap()
                .push(json!({"from": format!("{}.field", f), "to": format!("k.{}", f)}));
        }
    }
    let exec = g["exec"].as_array_mut().unwrap();
    exec.push(json!({"from": "frame.then", "to": "rep"}));
    exec.push(json!({"from": "rep.body", "to": "k"}));
    g
}

#[test]
fn fusion_loops_a_repeat_of_one_launch_inside_the_kernel() {
    let g = repeat_graph(
        5,
        None,
        "fn kernel(i: i32) { a[i] = a[i] * 1.5 + i as f32; }",
    );
    let (off, on) = schedules(&g);
    assert_eq!(count(&off, "repeat 'rep' x5"), 1, "{}", off);
    assert_eq!(count(&on, "repeat"), 0, "{}", on);
    assert_eq!(count(&on, "launch "), 1, "{}", on);
    // Every backend agrees with the VM running the repeat.
    let run = |backend, on: bool| {
        let mut sim = started(&g, backend, on);
        for _ in 0..2 {
            sim.step_frame().unwrap();
        }
        assert_eq!(
            sim.launch_counts().iter().sum::<u32>(),
            if on { 3 } else { 11 }
        );
        words(&sim, "a")
    };
    let reference = run(Backend::Vm, false);
    for backend in local_backends() {
        assert_eq!(run(backend, true), reference, "{:?}", backend);
    }
}

#[test]
fn fusion_keeps_repeats_whose_repetitions_could_see_each_other() {
    for (why, g) in [
        (
            "a neighbour read",
            repeat_graph(
                3,
                None,
                "fn kernel(i: i32) { a[i] = a[(i + 1) % 8] + 1.0; }",
            ),
        ),
        (
            "an index scalar the kernel reads",
            repeat_graph(
                3,
                Some("t"),
                "fn kernel(i: i32) { a[i] = a[i] + t as f32; }",
            ),
        ),
        (
            "random numbers",
            repeat_graph(3, None, "fn kernel(i: i32) { a[i] = a[i] + random(); }"),
        ),
    ] {
        let (_, on) = schedules(&g);
        assert_eq!(count(&on, "repeat 'rep' x3"), 1, "{}: looped\n{}", why, on);
    }
}
