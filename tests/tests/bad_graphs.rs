//! Data-driven corpus of bad graphs: every `tests/bad/NAME.json` must be
//! rejected, and `tests/bad/NAME.expect.txt` says how:
//!
//! ```text
//! node: <id, `a|b` for either, or - for a document-level error>
//! contains: <substring of the first error's message>   (one or more lines)
//! at: <line>:<col>                                       (optional, kernel code errors)
//! ```
//!
//! Files named `code_*` are kernel-code errors and must be `GraphError::Code`
//! with a 1-based line:col. `.npy` paths in the graphs are relative to tests/bad.

use std::path::{Path, PathBuf};
use weft_ir::graph::{build_program, BuildOptions, GraphDoc, GraphError};
use weft_runtime::{RuntimeError, SimOptions, Simulation};

fn bad_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("bad")
}

struct Expect {
    /// `None`: a document-level error; otherwise any one of these ids.
    node: Option<Vec<String>>,
    contains: Vec<String>,
    at: Option<(u32, u32)>,
}

fn parse_expect(text: &str) -> Result<Expect, String> {
    let mut node = None;
    let mut contains = Vec::new();
    let mut at = None;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        if let Some(v) = line.strip_prefix("node: ") {
            let v = v.trim();
            node = Some(if v == "-" {
                None
            } else {
                Some(v.split('|').map(|s| s.trim().to_string()).collect())
            });
        } else if let Some(v) = line.strip_prefix("contains: ") {
            contains.push(v.trim_end().to_string());
        } else if let Some(v) = line.strip_prefix("at: ") {
            let (l, c) = v
                .trim()
                .split_once(':')
                .ok_or_else(|| format!("bad `at:` line {:?}", line))?;
            at = Some((
                l.parse().map_err(|_| format!("bad line in {:?}", line))?,
                c.parse().map_err(|_| format!("bad col in {:?}", line))?,
            ));
        } else {
            return Err(format!("unrecognised expect line {:?}", line));
        }
    }
    let node = node.ok_or("missing `node:` line")?;
    if contains.is_empty() {
        return Err("missing `contains:` line".into());
    }
    Ok(Expect { node, contains, at })
}

/// The first error of a failed load: (node, message, GraphError if any).
struct Failure {
    node: Option<String>,
    message: String,
    graph_error: Option<GraphError>,
    all: String,
}

/// Parse, build and compile; `Ok(())` if the graph was accepted.
#[allow(clippy::result_large_err)] // a test helper: the failure is inspected, not propagated
fn load(text: &str) -> Result<(), Failure> {
    let from_graph = |e: weft_ir::graph::GraphErrors| {
        let first = e.0.first().cloned();
        Failure {
            node: first.as_ref().and_then(|f| f.node().map(str::to_string)),
            message: first.as_ref().map(|f| f.to_string()).unwrap_or_default(),
            graph_error: first,
            all: e.to_string(),
        }
    };
    let doc = GraphDoc::parse(text).map_err(from_graph)?;
    let program = build_program(
        &doc,
        &BuildOptions {
            base_dir: bad_dir(),
        },
    )
    .map_err(from_graph)?;
    match Simulation::new(program, &SimOptions::default()) {
        Ok(_) => Ok(()),
        Err(RuntimeError::Graph(g)) => Err(from_graph(g)),
        Err(e) => Err(Failure {
            node: e.node().map(str::to_string),
            message: e.to_string(),
            graph_error: None,
            all: e.to_string(),
        }),
    }
}

fn check_case(name: &str, text: &str, expect: &Expect) -> Result<(), String> {
    let f = match load(text) {
        Ok(()) => return Err("the graph was accepted".into()),
        Err(f) => f,
    };
    if std::env::var_os("WEFT_BAD_VERBOSE").is_some() {
        println!(
            "{:<36} {:?}",
            name,
            f.graph_error
                .as_ref()
                .map(|e| e.to_string())
                .unwrap_or_else(|| f.message.clone())
        );
    }
    let mut problems = Vec::new();
    match &expect.node {
        None if f.node.is_some() => problems.push(format!(
            "expected a document-level error, got one naming node {:?}",
            f.node.as_deref().unwrap()
        )),
        Some(ids) if !f.node.as_ref().is_some_and(|n| ids.contains(n)) => problems.push(format!(
            "expected the error to name node {}, got {:?}",
            ids.join(" or "),
            f.node
        )),
        _ => {}
    }
    for c in &expect.contains {
        if !f.message.contains(c.as_str()) {
            problems.push(format!("message does not contain {:?}", c));
        }
    }
    match &f.graph_error {
        Some(GraphError::Syntax { line, col, .. }) if *line == 0 || *col == 0 => {
            problems.push("JSON syntax error without a line:col".into())
        }
        _ => {}
    }
    if name.starts_with("code_") {
        match &f.graph_error {
            Some(GraphError::Code { line, col, .. }) => {
                if *line == 0 || *col == 0 {
                    problems.push(format!(
                        "kernel code error at {}:{}; positions are 1-based",
                        line, col
                    ));
                }
                if let Some((l, c)) = expect.at {
                    if (l, c) != (*line, *col) {
                        problems.push(format!(
                            "expected the error at code {}:{}, got {}:{}",
                            l, c, line, col
                        ));
                    }
                }
            }
            _ => {
                problems.push("a kernel code error must be GraphError::Code with a line:col".into())
            }
        }
    } else if expect.at.is_some() {
        problems.push("`at:` is only for code_* cases".into());
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{}\n      first error: {}\n      all errors:  {}",
            problems.join("\n      "),
            f.message,
            f.all.replace('\n', "\n                   ")
        ))
    }
}

#[test]
fn every_bad_graph_is_rejected_with_a_precise_error() {
    let dir = bad_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/bad exists")
        .map(|e| e.expect("readable dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 40,
        "the corpus has only {} cases",
        files.len()
    );
    let mut failures = Vec::new();
    for path in &files {
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let expect_path = dir.join(format!("{}.expect.txt", name));
        let result = std::fs::read_to_string(&expect_path)
            .map_err(|e| format!("cannot read {}: {}", expect_path.display(), e))
            .and_then(|t| parse_expect(&t))
            .and_then(|expect| {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("cannot read {}: {}", path.display(), e))?;
                match std::panic::catch_unwind(|| check_case(&name, &text, &expect)) {
                    Ok(r) => r,
                    Err(p) => Err(format!("PANIC: {}", panic_message(&p))),
                }
            });
        if let Err(e) = result {
            failures.push(format!("  {}: {}", name, e));
        }
    }
    // Every expectation file belongs to a graph.
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let n = p.file_name().unwrap().to_string_lossy().to_string();
        if let Some(stem) = n.strip_suffix(".expect.txt") {
            if !dir.join(format!("{}.json", stem)).exists() {
                failures.push(format!("  {}: expect file without a graph", n));
            }
        }
    }
    println!(
        "bad graphs: {} cases, {} failed",
        files.len(),
        failures.len()
    );
    if !failures.is_empty() {
        panic!(
            "{} of {} bad graphs were not rejected as expected:\n{}",
            failures.len(),
            files.len(),
            failures.join("\n")
        );
    }
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "non-string panic".into())
}

/// One parser and one conversion rule for kernel scalars: 2.5 for an i32
/// is the same error naming the node and the scalar from the builder,
/// `--set` and a running simulation's `set_param` (the app's sliders).
#[test]
fn a_scalar_value_its_type_cannot_hold_is_one_error_everywhere() {
    let expected = "node 'diffuse', param 'scalars': scalar 'n': 2.5 is not a valid i32";
    let heat = weft_tests::root().join("graphs/heat.json");
    // The file itself.
    let mut doc = GraphDoc::load(&heat).unwrap();
    let n = doc.node_mut("diffuse").unwrap();
    n.params.get_mut("scalars").unwrap()["n"] = serde_json::json!({"type": "i32", "default": 2.5});
    let base = BuildOptions {
        base_dir: weft_tests::root().join("graphs"),
    };
    let e = build_program(&doc, &base).unwrap_err();
    assert_eq!(e.0[0].to_string(), expected);
    // --set (a plain `"n": 128` declares an i32).
    let mut doc = GraphDoc::load(&heat).unwrap();
    let o = weft_ir::graph::overrides::Overrides {
        sets: vec!["diffuse.n=2.5".into()],
        inits: vec![],
    };
    let e = weft_ir::graph::overrides::apply_overrides(&mut doc, &o).unwrap_err();
    assert_eq!(e.0[0].to_string(), expected);
    // A running simulation keeps its value.
    let doc = GraphDoc::load(&heat).unwrap();
    let mut sim =
        Simulation::new(build_program(&doc, &base).unwrap(), &SimOptions::default()).unwrap();
    let e = sim.set_param("diffuse", "n", 2.5).unwrap_err();
    assert_eq!(e.to_string(), expected);
    let k = sim.program.kernel_by_name("diffuse").unwrap();
    let p = sim.program.kernels[k]
        .params
        .iter()
        .find(|p| p.name == "n")
        .unwrap();
    assert_eq!(p.value, 128, "unchanged");
    sim.set_param("diffuse", "n", 64.0).unwrap();
    let p = sim.program.kernels[k]
        .params
        .iter()
        .find(|p| p.name == "n")
        .unwrap();
    assert_eq!(p.value, 64);
}
