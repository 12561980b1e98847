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
