//! `passes::termination`: which kernels' loops provably end. A GPU backend
//! leaves out the compiler's per-iteration loop bound only for those, so a
//! wrong "ends" would let a shader compiler assume away a loop that runs
//! forever; every case that is not a plain counted loop must say "not proven".

use serde_json::json;
use weft_tests::*;

fn loops_end(code: &str) -> bool {
    let g = kernel_graph(
        &[F("a", "i32", &[4], json!(0))],
        code,
        &[4],
        json!({"n": {"type": "i32", "default": 10}}),
    );
    let p = compiled(&g);
    let ends = p.kernels.iter().all(|(_, k)| k.loops_end);
    ends
}

fn body(stmts: &str) -> String {
    format!("fn kernel(i: i32) {{\n{}\n    a[i] = 1;\n}}\n", stmts)
}

#[test]
fn counted_loops_end() {
    for (what, code) in [
        ("no loop", body("")),
        ("range loop", body("for k in 0..n { a[i] += k; }")),
        (
            "julia's while: a float test and a counter",
            body(
                "let mut z = 0.5;\n let mut it = 0;\n while z < 20.0 && it < 50 { z = z * z + 1.0; it += 1; }\n a[i] = it;",
            ),
        ),
        (
            "counter bound by a scalar, step one",
            body("let mut k = i; while k < n { a[i] += k; k += 1; }"),
        ),
        (
            "loop with an early break test on the counter",
            body("let mut k = 0; loop { if k >= 8 { break; } a[i] += k; k = k + 2; }"),
        ),
        (
            "nested counted loops",
            body("let mut k = 0; while k < 3 { for j in 0..4 { a[i] += j; } k += 1; }"),
        ),
        (
            "a helper's counted loop",
            "fn sum(m: i32) -> i32 {\n    let mut s = 0;\n    let mut k = 0;\n    while k < m { s += k; k += 1; }\n    s\n}\nfn kernel(i: i32) {\n    a[i] = sum(i);\n}\n".to_string(),
        ),
    ] {
        assert!(loops_end(&code), "{}: should be proven to end\n{}", what, code);
    }
}

#[test]
fn loops_that_may_not_end_are_not_proven() {
    for (what, code) in [
        (
            "float condition only",
            body("let mut z = 0.5; while z < 20.0 { z = z * z; }"),
        ),
        (
            "counter stepped only in a branch",
            body("let mut k = 0; while k < 10 { if a[i] > 0 { k += 1; } }"),
        ),
        (
            "counter stepped down",
            body("let mut k = 0; while k < 10 { k -= 1; }"),
        ),
        (
            "the bound moves with the counter",
            body("let mut k = 0; let mut m = 10; while k < m { k += 1; m += 1; }"),
        ),
        (
            "the test reads the counter before the loop",
            body("let mut k = 0; let s = k; while s < 10 { k += 1; }"),
        ),
        (
            "continue skips the step",
            body("let mut k = 0; while k < 10 { if a[i] == 0 { continue; } k += 1; }"),
        ),
        (
            "a step of two can wrap past a bound near the maximum",
            body("let mut k = 0; while k < 2147483647 { k += 2; }"),
        ),
        (
            "counter written twice",
            body("let mut k = 0; while k < 10 { k += 1; k = 0; }"),
        ),
        (
            "an inner loop that may not end",
            body("let mut k = 0; while k < 3 { let mut z = 0.5; while z < 2.0 { z = z * 1.5; } k += 1; }"),
        ),
        (
            "loop without a break test",
            body("let mut k = 0; loop { k += 1; if a[i] == k { break; } }"),
        ),
    ] {
        assert!(!loops_end(&code), "{}: must not be proven\n{}", what, code);
    }
}
