//! Groups, bypass and parameter references (`graph::groups`,
//! `graph::refs`): a grouped graph gives bit-identical fields to its
//! hand-flattened twin on vm, cpu and wgpu; a bypassed kernel equals the
//! graph without its launch; `frame` expressions animate kernel scalars
//! without a rebuild.

use serde_json::{json, Value};
use weft_ir::graph::overrides::{apply_overrides, Overrides};
use weft_ir::graph::{build_program, BuildOptions, GraphDoc};
use weft_runtime::{Backend, SimOptions, Simulation};
use weft_tests::*;

fn load(rel: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(root().join(rel)).unwrap()).unwrap()
}

fn backends() -> Vec<Backend> {
    let mut b = vec![Backend::Vm, Backend::Jit];
    if wgpu_available() {
        b.push(Backend::Wgpu);
    } else {
        eprintln!("no wgpu adapter: wgpu not compared");
    }
    b
}

fn sim(doc: &GraphDoc, backend: Backend, frames: u32) -> Simulation {
    let p = build_program(
        doc,
        &BuildOptions {
            base_dir: root().join("graphs"),
        },
    )
    .unwrap_or_else(|e| panic!("{}", e));
    let mut s = Simulation::new(
        p,
        &SimOptions {
            backend,
            threads: Some(1),
            ..Default::default()
        },
    )
    .unwrap();
    s.start().unwrap();
    for _ in 0..frames {
        s.step_frame().unwrap();
    }
    s
}

fn doc(v: &Value) -> GraphDoc {
    GraphDoc::from_value(v.clone()).unwrap()
}

/// Every field of `b`'s program, as words, from both simulations.
fn same_fields(a: &Simulation, b: &Simulation, names: &[&str], what: &str) {
    for n in names {
        assert_eq!(words(a, n), words(b, n), "{}: field '{}' differs", what, n);
    }
}

#[test]
fn a_grouped_graph_equals_its_hand_flattened_twin_on_every_backend() {
    let grouped = doc(&load("graphs/heat_grouped.json"));
    let twin = flat_twin("tests/groups/heat_flat_twin.json");
    let fields = ["T", "source", "diffusion/T_next"];
    for b in backends() {
        let (g, t) = (sim(&grouped, b, 3), sim(&twin, b, 3));
        same_fields(&g, &t, &fields, &format!("{:?}", b));
        // And the group does what heat.json does.
        let heat = sim(&doc(&example("heat")), b, 3);
        assert_eq!(words(&g, "T"), words(&heat, "T"), "{:?}", b);
    }
}

#[test]
fn set_reaches_promoted_and_inner_parameters() {
    let mut a = doc(&load("graphs/heat_grouped.json"));
    apply_overrides(
        &mut a,
        &Overrides {
            sets: vec!["diffusion.rate=0.1".into()],
            inits: vec![],
        },
    )
    .unwrap();
    let mut b = doc(&load("graphs/heat_grouped.json"));
    apply_overrides(
        &mut b,
        &Overrides {
            sets: vec![
                "diffusion/step.alpha=0.1".into(),
                "diffusion.rate=0.1".into(),
            ],
            inits: vec![],
        },
    )
    .unwrap();
    let base = sim(&doc(&load("graphs/heat_grouped.json")), Backend::Vm, 2);
    let (sa, sb) = (sim(&a, Backend::Vm, 2), sim(&b, Backend::Vm, 2));
    assert_eq!(words(&sa, "T"), words(&sb, "T"));
    assert_ne!(
        words(&sa, "T"),
        words(&base, "T"),
        "the promoted value reached the kernel"
    );
    let mut bad = doc(&load("graphs/heat_grouped.json"));
    let e = apply_overrides(
        &mut bad,
        &Overrides {
            sets: vec!["diffusion.nope=1".into()],
            inits: vec![],
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("diffusion") && e.contains("no promoted parameter 'nope'"),
        "{}",
        e
    );
    // Out of the promoted range: the group node is named.
    let mut v = load("graphs/heat_grouped.json");
    set_param(&mut v, "diffusion", "rate", json!(0.5));
    let e = build_program(
        &doc(&v),
        &BuildOptions {
            base_dir: root().join("graphs"),
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("'diffusion'") && e.contains("outside"), "{}", e);
}

#[test]
fn an_inner_build_error_names_the_full_path() {
    let mut v = load("graphs/heat_grouped.json");
    let g = v["nodes"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|n| n["id"] == "diffusion")
        .unwrap();
    g["group"]["nodes"][1]["params"]["code"] =
        json!("fn kernel(i: i32, j: i32) { T_next[(i, j)] = nope; }");
    let e = build_program(
        &doc(&v),
        &BuildOptions {
            base_dir: root().join("graphs"),
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("diffusion/step"), "{}", e);
}

/// Two kernels add 1 and 10 to a field each frame; bypassing the second
/// equals the graph without it.
fn adder(bypass: bool, with_second: bool) -> Value {
    let mut nodes = vec![
        json!({"id": "cells", "kind": "dense", "params": {"shape": [8]}}),
        json!({"id": "x", "kind": "field", "params": {"type": "f32"}}),
        json!({"id": "frame", "kind": "on_frame"}),
        json!({"id": "one", "kind": "kernel", "params": {"over": "x", "code": "fn kernel(i: i32) { x[i] = x[i] + 1.0; }"}}),
        json!({"id": "last", "kind": "kernel", "params": {"over": "x", "code": "fn kernel(i: i32) { x[i] = x[i] * 2.0; }"}}),
    ];
    let mut wires = vec![
        json!({"from": "cells.cells", "to": "x.layout"}),
        json!({"from": "x.field", "to": "one.x"}),
        json!({"from": "x.field", "to": "last.x"}),
    ];
    let mut exec = vec![json!({"from": "frame.then", "to": "one"})];
    if with_second {
        nodes.push(json!({"id": "ten", "kind": "kernel", "bypass": bypass, "params": {"over": "x", "code": "fn kernel(i: i32) { x[i] = x[i] + 10.0; }"}}));
        wires.push(json!({"from": "x.field", "to": "ten.x"}));
        exec.push(json!({"from": "one.then", "to": "ten"}));
        exec.push(json!({"from": "ten.then", "to": "last"}));
    } else {
        exec.push(json!({"from": "one.then", "to": "last"}));
    }
    json!({"format": "weft-graph", "version": 1, "nodes": nodes, "wires": wires, "exec": exec})
}

#[test]
fn a_bypassed_kernel_equals_the_graph_without_its_launch() {
    for b in backends() {
        let bypassed = sim(&doc(&adder(true, true)), b, 3);
        let without = sim(&doc(&adder(false, false)), b, 3);
        let with = sim(&doc(&adder(false, true)), b, 3);
        assert_eq!(words(&bypassed, "x"), words(&without, "x"), "{:?}", b);
        assert_ne!(words(&bypassed, "x"), words(&with, "x"), "{:?}", b);
    }
}

#[test]
fn frame_expressions_animate_a_kernel_scalar_without_a_rebuild() {
    let v = json!({"format": "weft-graph", "version": 1, "nodes": [
        {"id": "cells", "kind": "dense", "params": {"shape": [4]}},
        {"id": "x", "kind": "field", "params": {"type": "f32"}},
        {"id": "frame", "kind": "on_frame"},
        {"id": "src", "kind": "kernel", "params": {"range": [1], "scalars": {"base": 0.5},
            "code": "fn kernel(i: i32) { }"}},
        {"id": "k", "kind": "kernel", "params": {"over": "x",
            "scalars": {"s": "= ch('src.base') * frame + 1", "n": {"type": "i32", "default": "= ch('src.base') * 4"}},
            "code": "fn kernel(i: i32) { x[i] = x[i] + s + n as f32; }"}}],
        "wires": [{"from": "cells.cells", "to": "x.layout"}, {"from": "x.field", "to": "k.x"}],
        "exec": [{"from": "frame.then", "to": "src"}, {"from": "src.then", "to": "k"}]});
    for b in backends() {
        let s = sim(&doc(&v), b, 3);
        // frames 1, 2, 3: s = 1.5, 2, 2.5; n = 2 each frame.
        let want = (1.5f32 + 2.0) + (2.0 + 2.0) + (2.5 + 2.0);
        assert_eq!(f32s(&s, "x"), vec![want; 4], "{:?}", b);
    }
}

/// Two group nodes with one id are reported as that id, not as duplicates
/// of the nodes inside them (found by the fuzzer on mpm88's asset groups).
#[test]
fn a_duplicated_group_id_names_the_group() {
    let mut g = example("mpm88");
    let nodes = g["nodes"].as_array_mut().unwrap();
    let g2p = nodes.iter().find(|n| n["id"] == "g2p").unwrap().clone();
    nodes.push(g2p);
    let e = build(&g).expect_err("must fail").to_string();
    assert!(
        e.contains("node 'g2p': duplicate node id") && !e.contains("g2p/k"),
        "{}",
        e
    );
}

/// `x` of tests/groups/promoted_three_levels.json after on_start with
/// `sets`: x[i] = s·(i+1), s the value that reached the kernel.
fn three_levels(sets: &[&str]) -> Result<Vec<f32>, String> {
    let mut d = doc(&load("tests/groups/promoted_three_levels.json"));
    apply_overrides(
        &mut d,
        &Overrides {
            sets: sets.iter().map(|s| s.to_string()).collect(),
            inits: vec![],
        },
    )
    .map_err(|e| e.to_string())?;
    let s = sim(&d, Backend::Vm, 0);
    Ok(words(&s, "x").into_iter().map(f32::from_bits).collect())
}

#[test]
fn a_set_through_promotions_reaches_the_kernel_at_every_depth() {
    let times = |s: f32| (1..=4).map(|i| s * i as f32).collect::<Vec<f32>>();
    // Unset: P1's gain default (2) wins over sA's s and k's own 1.
    assert_eq!(three_levels(&[]).unwrap(), times(2.0));
    // The same edit from each of the three levels.
    for set in ["P1.gain=-1.5", "P1/sA.s=-1.5", "P1/sA/k.s=-1.5"] {
        assert_eq!(three_levels(&[set]).unwrap(), times(-1.5), "--set {}", set);
    }
    // The most specific wins, in either order.
    for sets in [
        ["P1.gain=3", "P1/sA/k.s=-1.5"],
        ["P1/sA/k.s=-1.5", "P1.gain=3"],
        ["P1/sA.s=3", "P1/sA/k.s=-1.5"],
    ] {
        assert_eq!(three_levels(&sets).unwrap(), times(-1.5), "{:?}", sets);
    }
    // Through P1.gain: its range applies, and the error names it.
    let e2 = {
        let mut d = doc(&load("tests/groups/promoted_three_levels.json"));
        apply_overrides(
            &mut d,
            &Overrides {
                sets: vec!["P1/sA/k.s=9".into()],
                inits: vec![],
            },
        )
        .unwrap();
        build_program(
            &d,
            &BuildOptions {
                base_dir: root().join("tests/groups"),
            },
        )
        .unwrap_err()
        .to_string()
    };
    assert!(
        e2.contains("'P1'") && e2.contains("gain") && e2.contains("outside"),
        "{}",
        e2
    );
}

/// A frame-driven scalar with a declared range is checked every frame as
/// `--set` is: a frame whose value falls outside stops with an error
/// naming the kernel, the scalar and the frame; the kernel never sees it.
#[test]
fn a_frame_driven_scalar_outside_its_range_stops_the_run() {
    let v = json!({"format": "weft-graph", "version": 1, "nodes": [
        {"id": "cells", "kind": "dense", "params": {"shape": [1]}},
        {"id": "x", "kind": "field", "params": {"type": "f32"}},
        {"id": "frame", "kind": "on_frame"},
        {"id": "drive", "kind": "kernel", "params": {"over": "x",
            "scalars": {"w": {"type": "f32", "default": "= sin(frame*0.3)*2", "min": -1, "max": 1}},
            "code": "fn kernel(i: i32) { x[i] = w; }"}}],
        "wires": [{"from": "cells.cells", "to": "x.layout"}, {"from": "x.field", "to": "drive.x"}],
        "exec": [{"from": "frame.then", "to": "drive"}]});
    for b in backends() {
        // Frame 1: 2·sin(0.3) = 0.59, inside.
        let mut s = sim(&doc(&v), b, 1);
        let first = f32s(&s, "x")[0];
        assert_eq!(first, ((0.3f64).sin() * 2.0) as f32, "{:?}", b);
        // Frame 2: 2·sin(0.6) = 1.13, above max 1.
        let e = s
            .step_frame()
            .expect_err("frame 2 is out of range")
            .to_string();
        assert!(
            e.contains("node 'drive'")
                && e.contains("scalar 'w'")
                && e.contains("frame 2")
                && e.contains("outside its range -1 to 1"),
            "{:?}: {}",
            b,
            e
        );
        assert_eq!(f32s(&s, "x")[0], first, "{:?}: the kernel got the value", b);
    }
}
