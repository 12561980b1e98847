//! A kernel's declared field ports (param `ports`): wired before the code
//! uses them (no error, nothing bound), an ordinary port once it does, and
//! bad lists refused naming the kernel and the param.

use serde_json::{json, Value};
use weft_ir::graph::{build_program, BuildOptions, GraphDoc, GraphErrors};
use weft_ir::ir::Program;

fn graph(ports: Value, code: &str, wires: Value) -> Value {
    json!({"format": "weft-graph", "version": 1,
        "nodes": [
            {"id": "cells", "kind": "dense", "params": {"shape": [8]}},
            {"id": "pos", "kind": "field", "params": {"type": "f32"}},
            {"id": "vel", "kind": "field", "params": {"type": "f32", "init": 2}},
            {"id": "k", "kind": "kernel", "params": {"range": [8], "ports": ports, "code": code, "scalars": {"dt": 0.5}}},
            {"id": "start", "kind": "on_start"}
        ],
        "wires": wires,
        "exec": [{"from": "start.then", "to": "k"}]})
}

fn build(doc: &Value) -> Result<Program, GraphErrors> {
    let d = GraphDoc::from_value(doc.clone())?;
    build_program(
        &d,
        &BuildOptions {
            base_dir: std::env::temp_dir(),
        },
    )
}

fn both_wired() -> Value {
    json!([
        {"from": "cells.cells", "to": "pos.layout"},
        {"from": "cells.cells", "to": "vel.layout"},
        {"from": "pos.field", "to": "k.x"},
        {"from": "vel.field", "to": "k.v"}
    ])
}

#[test]
fn a_declared_port_takes_a_wire_before_the_code_uses_it() {
    // `v` is declared and wired, the code does not use it yet: it builds and
    // binds only `x`.
    let p = build(&graph(
        json!(["x", "v"]),
        "fn kernel(i: i32) { x[i] = x[i] + 1.0; }",
        both_wired(),
    ))
    .unwrap_or_else(|e| panic!("{}", e));
    let k = &p.kernels[p.kernel_by_name("k").unwrap()];
    let bound: Vec<&str> = k.bindings.iter().map(|b| b.0.as_str()).collect();
    assert_eq!(bound, ["x"]);
    // Declared and unwired: no error either.
    let mut wires = both_wired();
    wires.as_array_mut().unwrap().pop();
    build(&graph(
        json!(["x", "v"]),
        "fn kernel(i: i32) { x[i] = x[i] + 1.0; }",
        wires.clone(),
    ))
    .unwrap_or_else(|e| panic!("{}", e));
    // Once the code uses it, it is an ordinary port: bound when wired...
    let p = build(&graph(
        json!(["x", "v"]),
        "fn kernel(i: i32) { x[i] = x[i] + v[i] * dt; }",
        both_wired(),
    ))
    .unwrap_or_else(|e| panic!("{}", e));
    let k = &p.kernels[p.kernel_by_name("k").unwrap()];
    let vel = p.field_by_name("vel").unwrap();
    assert!(k.bindings.iter().any(|b| b.0 == "v" && b.1 == vel));
    // ... and required.
    let err = build(&graph(
        json!(["x", "v"]),
        "fn kernel(i: i32) { x[i] = v[i]; }",
        wires,
    ))
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("node 'k', port 'v'") && err.contains("no field is wired"),
        "{}",
        err
    );
    // Without the declaration a wire to an unused name is refused, listing
    // the ports.
    let err = build(&graph(
        json!([]),
        "fn kernel(i: i32) { x[i] = 1.0; }",
        both_wired(),
    ))
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("node 'k', port 'v'") && err.contains("field ports: x"),
        "{}",
        err
    );
}

#[test]
fn bad_port_lists_are_refused() {
    for (ports, needle) in [
        (json!(["x", "x"]), "listed twice"),
        (json!(["1x"]), "not a valid identifier"),
        (json!("x"), "expected a list of port names"),
        (json!(["dt"]), "'dt' is a scalar of this kernel"),
    ] {
        let err = build(&graph(
            ports.clone(),
            "fn kernel(i: i32) { x[i] = 1.0; }",
            both_wired(),
        ))
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("node 'k', param 'ports'") && err.contains(needle),
            "{}: {}",
            ports,
            err
        );
    }
}
