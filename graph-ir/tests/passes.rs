//! Unit tests of each pass on small graphs: what each pass changes, that
//! the IR still validates, and that it does not change results.

use serde_json::json;
use weft_ir::graph::{build_program, BuildOptions, GraphDoc};
use weft_ir::ir::{print_program, validate_program, InstKind, Program};
use weft_ir::passes::{const_fold, inline, lower_access, run_pipeline, simplify, PassOptions};

fn program(code: &str, shape: &[u32]) -> Program {
    let g = json!({"format": "weft-graph", "version": 1, "nodes": [
        {"id": "L", "kind": "dense", "params": {"shape": shape}},
        {"id": "x", "kind": "field", "params": {"type": "vec2"}},
        {"id": "k", "kind": "kernel", "params": {"range": shape, "code": code}}
    ], "wires": [{"from": "L.cells", "to": "x.layout"}, {"from": "x", "to": "k.x"}]});
    build_program(&GraphDoc::from_value(g).unwrap(), &BuildOptions::default()).unwrap()
}

fn count(p: &Program, pred: impl Fn(&InstKind) -> bool) -> usize {
    let k = &p.kernels.iter().next().unwrap().1;
    fn walk(
        f: &weft_ir::ir::Function,
        b: &weft_ir::ir::Block,
        pred: &dyn Fn(&InstKind) -> bool,
    ) -> usize {
        b.iter()
            .map(|&h| {
                pred(&f.insts[h].kind) as usize
                    + f.insts[h]
                        .kind
                        .blocks()
                        .iter()
                        .map(|nb| walk(f, nb, pred))
                        .sum::<usize>()
            })
            .sum()
    }
    walk(&k.entry, &k.entry.body, &pred)
}

#[test]
fn inline_replaces_single_exit_calls() {
    let mut p = program("fn two(a: f32) -> f32 { a * 2.0 }\nfn kernel(i: i32) { x[i] = vec2(two(1.0), two(i as f32)); }", &[8]);
    assert_eq!(count(&p, |k| matches!(k, InstKind::Call(..))), 2);
    inline::run(&mut p);
    validate_program(&p, false).unwrap();
    assert_eq!(count(&p, |k| matches!(k, InstKind::Call(..))), 0);
}

#[test]
fn const_fold_and_simplify_remove_constant_work() {
    let mut p = program("fn kernel(i: i32) { let a = 2.0 * 3.0 + 1.0; let b = (7 / 2) as f32; if 1 > 2 { x[i] = vec2(0.0); } x[i] = vec2(a, b); }", &[8]);
    const_fold::run(&mut p);
    validate_program(&p, false).unwrap();
    let text = print_program(&p, None);
    assert!(
        text.contains("const 7.0f") && text.contains("const 3.0f"),
        "{}",
        text
    );
    simplify::run(&mut p);
    validate_program(&p, false).unwrap();
    // The dead branch and the unused operands are gone: one store, two constants feeding it.
    assert_eq!(count(&p, |k| matches!(k, InstKind::If { .. })), 0);
    assert_eq!(count(&p, |k| matches!(k, InstKind::FieldStore { .. })), 1);
    assert!(
        count(&p, |k| matches!(k, InstKind::Const(_))) <= 2,
        "{}",
        print_program(&p, None)
    );
}

#[test]
fn lower_access_produces_word_accesses_with_checks() {
    let mut p = program(
        "fn kernel(i: i32, j: i32) { x[(i, j)] = x[(j, i)] + vec2(1.0); }",
        &[4, 4],
    );
    lower_access::run(&mut p, true, true);
    validate_program(&p, true).unwrap();
    assert_eq!(
        count(&p, |k| matches!(
            k,
            InstKind::FieldLoad { .. } | InstKind::FieldStore { .. }
        )),
        0
    );
    assert_eq!(
        count(&p, |k| matches!(k, InstKind::BufLoad { .. })),
        2,
        "one load per component"
    );
    assert_eq!(count(&p, |k| matches!(k, InstKind::BufStore { .. })), 2);
    assert_eq!(
        count(&p, |k| matches!(k, InstKind::BoundsCheck { .. })),
        4,
        "two axes, two accesses"
    );
    let mut q = program(
        "fn kernel(i: i32, j: i32) { x[(i, j)] = vec2(1.0); }",
        &[4, 4],
    );
    lower_access::run(&mut q, false, true);
    assert_eq!(count(&q, |k| matches!(k, InstKind::BoundsCheck { .. })), 0);
}

#[test]
fn full_pipeline_validates_after_every_pass_on_every_example() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join("graphs");
    for name in ["julia", "mpm88", "heat", "life"] {
        let doc = GraphDoc::load(&root.join(format!("{}.json", name))).unwrap();
        let mut p = build_program(
            &doc,
            &BuildOptions {
                base_dir: root.clone(),
            },
        )
        .unwrap();
        run_pipeline(
            &mut p,
            &PassOptions {
                bounds_checks: true,
                validate: true,
                ..Default::default()
            },
            None,
        )
        .unwrap_or_else(|e| panic!("{}: {}", name, e));
    }
}

#[test]
fn large_helpers_called_twice_stay_functions() {
    // A helper over the size limit, called from two places.
    let mut body = String::from("let mut a = x;");
    for k in 0..120 {
        body.push_str(&format!(" a = a * 1.0001 + {}.0;", k % 7));
    }
    let code = format!("fn big(x: f32) -> f32 {{ {} a }}\nfn small(x: f32) -> f32 {{ x + 1.0 }}\nfn kernel(i: i32) {{ x[i] = vec2(big(1.0) + small(2.0), big(i as f32)); }}", body);
    let mut p = program(&code, &[8]);
    inline::run(&mut p);
    validate_program(&p, false).unwrap();
    let text = print_program(&p, None);
    let entry = &text[text.find("entry kernel").unwrap()..];
    assert_eq!(entry.matches("call fn0").count(), 2, "big stays a function");
    assert_eq!(entry.matches("call fn1").count(), 0, "small is inlined");
}

/// Every shipped example compiles with the optimiser on and off (the
/// validator runs after every pass), and the optimiser never adds a
/// launch. Prints the launches per frame (docs/performance.md).
#[test]
fn examples_compile_both_ways_with_no_more_launches() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../graphs");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "json")
                && !p.to_string_lossy().ends_with(".expect.json")
        })
        .collect();
    names.sort();
    for path in names {
        let count = |interkernel: bool| {
            let (_, mut p) = weft_ir::graph::overrides::load_program(
                &path,
                &weft_ir::graph::overrides::Overrides::default(),
            )
            .unwrap();
            let opts = PassOptions {
                validate: true,
                interkernel,
                ..Default::default()
            };
            run_pipeline(&mut p, &opts, None).unwrap();
            weft_ir::schedule::launches_per_frame(&p)
        };
        let (off, on) = (count(false), count(true));
        println!(
            "{:<24} off {:>6} on {:>6} ({:.2}x)",
            path.file_stem().unwrap().to_string_lossy(),
            off,
            on,
            off as f64 / on.max(1) as f64
        );
        assert!(
            on <= off,
            "{}: {} launches with the optimiser, {} without",
            path.display(),
            on,
            off
        );
    }
}
