//! Golden IR snapshots: the printed IR of small kernels after each stage.
//! Re-record with `UPDATE_GOLDEN=1 cargo test -p weft-tests --test golden_ir`.

use serde_json::json;
use weft_ir::ir::print_program;
use weft_ir::passes::{run_pipeline, PassOptions, Stage};
use weft_tests::*;

fn check(name: &str, doc: &serde_json::Value) {
    let mut problems = Vec::new();
    for stage in Stage::ALL {
        let mut p = build(doc).unwrap();
        run_pipeline(
            &mut p,
            &PassOptions {
                bounds_checks: true,
                validate: true,
                ..Default::default()
            },
            Some(stage),
        )
        .unwrap();
        let text = print_program(&p, None);
        let path = root()
            .join("tests/golden")
            .join(format!("{}.{}.txt", name, stage.name()));
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::write(&path, &text).unwrap();
            continue;
        }
        match std::fs::read_to_string(&path) {
            Ok(want) if want == text => {}
            Ok(want) => problems.push(format!(
                "{} differs:\n--- expected\n{}\n--- got\n{}",
                path.display(),
                want,
                text
            )),
            Err(_) => problems.push(format!(
                "{} is missing (record with UPDATE_GOLDEN=1)",
                path.display()
            )),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn saxpy_with_helper() {
    let g = kernel_graph(
        &[F("x", "f32", &[16], json!(1)), F("y", "f32", &[16], json!(0))],
        "fn axpy(a: f32, x: f32, y: f32) -> f32 { a * x + y }\nfn kernel(i: i32) { y[i] = axpy(2.0 * 1.5, x[i], y[i]); }",
        &[16],
        json!({}),
    );
    check("saxpy", &g);
}

#[test]
fn blocked_vector_field_access() {
    let mut g = kernel_graph(
        &[F("v", "vec2", &[8, 8], json!(0))],
        "fn kernel(i: i32, j: i32) { v[(i, j)] += vec2(1.0, 0.0); }",
        &[8, 8],
        json!({}),
    );
    let nodes = g["nodes"].as_array_mut().unwrap();
    nodes.push(json!({"id": "blocks", "kind": "dense", "params": {"shape": [2, 2]}}));
    nodes.iter_mut().find(|n| n["id"] == "v_cells").unwrap()["params"]["shape"] = json!([4, 4]);
    g["wires"]
        .as_array_mut()
        .unwrap()
        .push(json!({"from": "blocks.cells", "to": "v_cells.parent"}));
    check("blocked", &g);
}

/// The adjoint kernel and the expanded tape of a one-kernel tape.
#[test]
fn tape_adjoint() {
    let g = json!({"format": "weft-graph", "version": 1, "nodes": [
        {"id": "c", "kind": "dense", "params": {"shape": [4]}},
        {"id": "one", "kind": "dense", "params": {"shape": [1]}},
        {"id": "x", "kind": "field", "params": {"type": "f32", "init": 1, "grad": true}},
        {"id": "loss", "kind": "field", "params": {"type": "f32", "grad": true}},
        {"id": "start", "kind": "on_start"},
        {"id": "tp", "kind": "tape", "params": {"loss": "loss"}},
        {"id": "k", "kind": "kernel", "params": {"range": [4], "code": "fn kernel(i: i32) { loss[0] += sin(x[i]) * x[i]; }"}}
    ], "wires": [
        {"from": "c", "to": "x"}, {"from": "one", "to": "loss"},
        {"from": "x.field", "to": "k.x"}, {"from": "loss.field", "to": "k.loss"}
    ], "exec": [{"from": "start", "to": "tp"}, {"from": "tp.body", "to": "k"}]});
    check("tape", &g);
}

/// Stores into two fields of one `bit_struct` word: two compare-exchange
/// loops after `final`, one after `store_fusion`, none (a plain load and
/// store) after `atomic_demotion`, since each iteration owns its cell's word.
#[test]
fn bit_struct_store_fusion_and_demotion() {
    let g = json!({"format": "weft-graph", "version": 1, "nodes": [
        {"id": "cells", "kind": "dense", "params": {"shape": [16]}},
        {"id": "word", "kind": "bit_struct"},
        {"id": "a", "kind": "field", "params": {"type": "i32", "storage": "int5"}},
        {"id": "x", "kind": "field", "params": {"type": "f32", "storage": "fixed11[0,1]"}},
        {"id": "start", "kind": "on_start"},
        {"id": "k", "kind": "kernel", "params": {"over": "a", "code": "fn kernel(i: i32) { a[i] = i - 8; x[i] = 0.5; }"}}
    ], "wires": [
        {"from": "cells.cells", "to": "word.parent"},
        {"from": "word.cells", "to": "a.layout"}, {"from": "word.cells", "to": "x.layout"},
        {"from": "a.field", "to": "k.a"}, {"from": "x.field", "to": "k.x"}
    ], "exec": [{"from": "start", "to": "k"}]});
    check("bit_struct", &g);
}
