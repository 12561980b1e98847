//! Expression kernels (a kernel body as a node sub-graph): they compute the
//! same as the formula they wire up, and every error names the expression node.

use serde_json::json;
use weft_tests::*;

#[test]
fn colour_mapping_expression_matches_its_formula() {
    let sim = run(&example("heat_color"), 3).unwrap();
    let t = f32s(&sim, "T");
    let rgb = f32s(&sim, "rgb");
    let (cold, warm) = ([0.05f32, 0.1, 0.4], [1.0f32, 0.55, 0.1]);
    for (c, &tv) in t.iter().enumerate() {
        for k in 0..3 {
            let want = if tv > 0.9 {
                1.0
            } else {
                cold[k] + (warm[k] - cold[k]) * tv
            };
            assert_eq!(
                rgb[c * 3 + k],
                want,
                "cell {} channel {} (T = {})",
                c,
                k,
                tv
            );
        }
    }
    assert!(t.iter().any(|&x| x > 0.9) && t.iter().any(|&x| x < 0.9));
}

fn expr_graph(expr: serde_json::Value) -> serde_json::Value {
    let uses_x = expr.to_string().contains("\"field\":\"x\"");
    let mut wires = vec![json!({"from": "L.cells", "to": "x.layout"})];
    if uses_x {
        wires.push(json!({"from": "x", "to": "k.x"}));
    }
    json!({"format": "weft-graph", "version": 1, "nodes": [
        {"id": "L", "kind": "dense", "params": {"shape": [8]}},
        {"id": "x", "kind": "field", "params": {"type": "f32"}},
        {"id": "k", "kind": "kernel", "params": {"range": [8], "scalars": {"s": 2.0}, "expr": expr}},
        {"id": "go", "kind": "on_start"}],
      "wires": wires,
      "exec": [{"from": "go", "to": "k"}]})
}

#[test]
fn arithmetic_indices_and_atomics_in_expressions() {
    let g = expr_graph(json!({"nodes": [
        {"id": "i", "kind": "index", "params": {"axis": 0}},
        {"id": "fi", "kind": "cast", "params": {"type": "f32"}},
        {"id": "s", "kind": "scalar", "params": {"name": "s"}},
        {"id": "sq", "kind": "op", "params": {"op": "*"}},
        {"id": "root", "kind": "call", "params": {"fn": "sqrt"}},
        {"id": "w", "kind": "write", "params": {"field": "x"}},
        {"id": "zero", "kind": "const", "params": {"type": "i32", "value": 0}},
        {"id": "one", "kind": "const", "params": {"value": 1.0}},
        {"id": "count", "kind": "atomic_add", "params": {"field": "x"}}
    ], "wires": [
        {"from": "i", "to": "fi.x"}, {"from": "fi", "to": "sq.a"}, {"from": "s", "to": "sq.b"},
        {"from": "sq", "to": "root.a"}, {"from": "root", "to": "w.value"},
        {"from": "one", "to": "count.value"}, {"from": "zero", "to": "count.i"}
    ]}));
    let sim = run(&g, 0).unwrap();
    let x = f32s(&sim, "x");
    // Writes happen in node order: x[i] = sqrt(2i), then every iteration adds 1 to x[0]
    // (iterations race, so only x[0]'s final value is checked: 8 ones added to sqrt(0)).
    assert_eq!(x[0], 8.0);
    for (i, &v) in x.iter().enumerate().skip(1) {
        assert_eq!(v, (i as f32 * 2.0).sqrt());
    }
}

#[test]
fn errors_name_the_expression_node() {
    let cases = [
        (
            json!({"nodes": [{"id": "a", "kind": "wibble"}]}),
            "expression node 'a'",
            "unknown expression node kind 'wibble'",
        ),
        (
            json!({"nodes": [{"id": "w", "kind": "write", "params": {"field": "x"}}]}),
            "expression node 'w', input 'value'",
            "not wired",
        ),
        (
            json!({"nodes": [{"id": "v", "kind": "const", "params": {"type": "vec3", "value": [1, 2, 3]}}, {"id": "w", "kind": "write", "params": {"field": "x"}}],
                   "wires": [{"from": "v", "to": "w.value"}]}),
            "expression node 'w'",
            "expects f32",
        ),
        (
            json!({"nodes": [{"id": "a", "kind": "unary", "params": {"op": "-"}}, {"id": "b", "kind": "unary", "params": {"op": "-"}}],
                   "wires": [{"from": "a", "to": "b.x"}, {"from": "b", "to": "a.x"}]}),
            "expression node '",
            "cycle",
        ),
        (
            json!({"nodes": [{"id": "s", "kind": "scalar", "params": {"name": "nope"}}]}),
            "expression node 's'",
            "no scalar 'nope'",
        ),
        (
            json!({"nodes": [{"id": "i", "kind": "index", "params": {"axis": 2}}]}),
            "expression node 'i'",
            "axis 2 does not exist",
        ),
        (
            json!({"nodes": [{"id": "c", "kind": "const"}, {"id": "f", "kind": "call", "params": {"fn": "frobnicate"}}], "wires": [{"from": "c", "to": "f.a"}]}),
            "expression node 'f'",
            "not a built-in",
        ),
        (
            json!({"nodes": [{"id": "c", "kind": "const"}], "wires": [{"from": "c", "to": "c.nope"}]}),
            "expression node 'c', input 'nope'",
            "has no input 'nope'",
        ),
    ];
    let mut problems = Vec::new();
    for (expr, node, needle) in cases {
        match build(&expr_graph(expr.clone())) {
            Ok(_) => problems.push(format!("accepted {}", expr)),
            Err(e) => {
                let t = e.to_string();
                if !(t.contains("node 'k'") && t.contains(node) && t.contains(needle)) {
                    problems.push(format!("{} -> {}", expr, t));
                }
            }
        }
    }
    let mut both = expr_graph(json!({"nodes": []}));
    both["nodes"][2]["params"]["code"] = json!("fn kernel(i: i32) {}");
    let e = build(&both).err().unwrap().to_string();
    if !e.contains("either 'code' or 'expr'") {
        problems.push(e);
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
