//! The documentation's graphs are real: the worked example in
//! docs/graph-format.md and every complete graph in the docs load and run;
//! graph-format.md documents every node kind and parameter.

use weft_tests::*;

fn json_blocks(doc: &str) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(root().join("docs").join(doc)).unwrap();
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(start) = rest.find("```json\n") {
        let body = &rest[start + 8..];
        let end = body.find("```").expect("closed code block");
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&body[..end]) {
            out.push(v);
        }
        rest = &body[end + 3..];
    }
    out
}

#[test]
fn graph_format_worked_example_runs() {
    let blocks = json_blocks("graph-format.md");
    let first = blocks
        .first()
        .expect("graph-format.md has a ```json worked example");
    assert_eq!(
        first["format"], "weft-graph",
        "the first json block is a whole graph"
    );
    let mut sim = run(first, 2).unwrap_or_else(|e| panic!("worked example fails: {}", e));
    let u = f32s(&sim, "u");
    assert!(u.iter().any(|&x| x != 0.0), "field u changed");
    assert!(sim
        .render_views()
        .unwrap()
        .iter()
        .all(|(_, img)| !img.is_blank()));
}

#[test]
fn every_complete_graph_in_the_docs_runs() {
    let mut n = 0;
    for doc in ["graph-format.md", "kernel-language.md"] {
        for g in json_blocks(doc)
            .into_iter()
            .filter(|v| v["format"] == "weft-graph" && v["nodes"].is_array())
        {
            run(&g, 1).unwrap_or_else(|e| panic!("a graph in {} fails: {}\n{}", doc, e, g));
            n += 1;
        }
    }
    assert!(n >= 2, "found {} graphs", n);
}

/// The catalog (what `weft nodes` prints) and graph-format.md agree: the
/// families table lists every kind under its family, every kind has its
/// own section, and each section names every parameter of its kind.
#[test]
fn graph_format_documents_every_node_kind_and_parameter() {
    let doc = std::fs::read_to_string(root().join("docs/graph-format.md")).unwrap();
    let mut problems = Vec::new();
    for k in weft_ir::graph::catalog::kinds() {
        let family = k.family.name();
        let row = doc
            .lines()
            .find(|l| l.starts_with(&format!("| {} ", family)))
            .unwrap_or("");
        if !row.contains(&format!("`{}`", k.name)) {
            problems.push(format!(
                "the families table's '{}' row does not list `{}`",
                family, k.name
            ));
        }
        let head = format!("### `{}` (", k.name);
        let Some(at) = doc.find(&head) else {
            problems.push(format!("no section '{}…)'", head));
            continue;
        };
        let rest = &doc[at + head.len()..];
        let section = &rest[..rest.find("\n### ").unwrap_or(rest.len())];
        for p in k.params {
            if !section.contains(&format!("`{}`", p.name)) {
                problems.push(format!(
                    "section of `{}` does not name its parameter `{}`",
                    k.name, p.name
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `jsonschema`'s verdict on each file against the generated graph schema:
/// `None` when Python's `jsonschema` is missing (a failure under `CI=true`,
/// where `.ci/run` installs it).
fn schema_verdicts(files: &[std::path::PathBuf]) -> Option<Vec<(String, bool, String)>> {
    use std::io::Write;
    let have = std::process::Command::new("python3")
        .args(["-c", "import jsonschema"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("CI=true but Python's jsonschema is missing (.ci/run installs it)");
        }
        eprintln!("skipped: Python's jsonschema is not installed");
        return None;
    }
    let dir = std::env::temp_dir().join(format!("weft-schema-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let schema = dir.join("graph.schema.json");
    std::fs::write(&schema, weft_ir::graph::schema::graph_schema_text()).unwrap();
    let mut child = std::process::Command::new("python3")
        .arg(root().join("tests/scripts/validate_schema.py"))
        .arg(&schema)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let list: String = files.iter().map(|f| format!("{}\n", f.display())).collect();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(list.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "validate_schema.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let verdicts: Vec<(String, bool, String)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["file"].as_str().unwrap().to_string(),
                v["ok"].as_bool().unwrap(),
                v["error"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(verdicts.len(), files.len(), "one verdict per file");
    Some(verdicts)
}

fn json_files(dir: &str) -> Vec<std::path::PathBuf> {
    let mut out: Vec<_> = std::fs::read_dir(root().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        // Replay expectations beside the graphs are not graphs.
        .filter(|p| !p.to_string_lossy().ends_with(".expect.json"))
        .collect();
    out.sort();
    out
}

/// Every graph `weft check` accepts validates against docs/graph.schema.json
/// (as generated: `weft schema`, checked equal to the committed file in
/// app/tests/cli.rs) with an independent validator: every shipped graph,
/// every asset and asset test graph, the group corpus, and the complete
/// graphs of the docs. Groups, assets, `bypass` and expression strings
/// included.
#[test]
fn every_accepted_graph_validates_against_the_schema() {
    let mut files = Vec::new();
    for d in ["graphs", "assets", "assets/tests", "tests/groups"] {
        files.extend(json_files(d));
    }
    // The hand-flattened twins hold the path ids (`fit/opt`) only the
    // flattener makes, which a file may not use: `weft check` and the
    // schema refuse them alike (below); tests read them as flattened
    // documents (`weft_tests::flat_twin`).
    let (twins, mut files): (Vec<_>, Vec<_>) = files
        .into_iter()
        .partition(|p| p.to_string_lossy().ends_with("_flat_twin.json"));
    assert_eq!(twins.len(), 2, "{:?}", twins);
    for t in &twins {
        let text = std::fs::read_to_string(t).unwrap();
        let e = weft_ir::graph::GraphDoc::parse(&text)
            .unwrap_err()
            .to_string();
        assert!(e.contains("reserved for the paths"), "{}", e);
    }
    let dir = std::env::temp_dir().join(format!("weft-schema-docs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for doc in ["graph-format.md", "kernel-language.md"] {
        for (i, g) in json_blocks(doc).into_iter().enumerate() {
            if g["format"] == "weft-graph" {
                let p = dir.join(format!("{}-{}.json", doc, i));
                std::fs::write(&p, g.to_string()).unwrap();
                files.push(p);
            }
        }
    }
    assert!(files.len() > 50, "found only {} graphs", files.len());
    // The loader's own verdict first: the schema must not be stricter.
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        if let Err(e) = weft_ir::graph::GraphDoc::parse(&text) {
            panic!("{} does not load: {}", f.display(), e);
        }
    }
    let Some(v) = schema_verdicts(&files) else {
        return;
    };
    let _ = std::fs::remove_dir_all(&dir);
    let Some(t) = schema_verdicts(&twins) else {
        return;
    };
    assert!(t.iter().all(|(_, ok, _)| !ok), "{:?}", t);
    let bad: Vec<String> = v
        .iter()
        .filter(|(_, ok, _)| !ok)
        .map(|(f, _, e)| format!("{}: {}", f, e))
        .collect();
    assert!(
        bad.is_empty(),
        "graphs the schema refuses:\n{}",
        bad.join("\n")
    );
}

/// The invalid corpus fails the schema where a schema can say so: the
/// graphs below are wrong in shape (a missing or unknown key, a wrong type,
/// a bad id, a value out of range), which JSON Schema states; the rest of
/// tests/bad is wrong in meaning (kernel code, wiring, sizes), which only
/// the builder can tell.
#[test]
fn the_invalid_corpus_fails_the_schema_where_it_can() {
    const STRUCTURAL: &[&str] = &[
        "doc_future_version",
        "doc_missing_format",
        "doc_missing_nodes",
        "doc_missing_version",
        "doc_negative_version",
        "doc_node_without_id",
        "doc_nodes_not_list",
        "doc_not_object",
        "doc_string_version",
        "doc_unknown_key",
        "doc_version_zero",
        "doc_wires_not_list",
        "doc_wrong_format",
        "exec_repeat_count_float",
        "exec_repeat_count_zero",
        "frame_negative_size",
        "frame_unknown_key",
        "node_bad_id_chars",
        "node_bad_pos",
        "node_id_with_slash",
        "node_unknown_key",
        "node_unknown_kind",
        "param_code_not_string",
        "param_field_type_unknown",
        "param_init_string",
        "param_scalar_bad_type",
        "param_shape_empty",
        "param_shape_float",
        "param_shape_four_axes",
        "param_shape_missing",
        "param_shape_negative",
        "param_shape_not_list",
        "param_shape_zero",
        "param_unknown",
        "scalar_non_numeric_max",
        "view_particles_radius_out_of_range",
        "view_particles_zero_width",
    ];
    let files: Vec<_> = STRUCTURAL
        .iter()
        .map(|n| root().join("tests/bad").join(format!("{}.json", n)))
        .collect();
    for f in &files {
        assert!(f.exists(), "{} is gone", f.display());
    }
    let Some(v) = schema_verdicts(&files) else {
        return;
    };
    let passed: Vec<&str> = v
        .iter()
        .filter(|(_, ok, _)| *ok)
        .map(|(f, _, _)| f.as_str())
        .collect();
    assert!(
        passed.is_empty(),
        "bad graphs the schema accepts:\n{}",
        passed.join("\n")
    );
}
