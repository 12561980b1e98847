//! The documentation's graphs are real: the worked example in
//! docs/graph-format.md and every complete graph in the docs load and run.

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
    let sim = run(first, 2).unwrap_or_else(|e| panic!("worked example fails: {}", e));
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
