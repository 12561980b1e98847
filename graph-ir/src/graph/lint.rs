//! Warnings about a graph that builds but probably does not do what its
//! author meant. Unlike `GraphError`s they do not stop a run; the app lists
//! them in Problems and `weft check` prints them.
//!
//! Pre: none (works on any document, valid or not). Post: every warning names
//! the node it is about.

use super::catalog;
use super::document::split_endpoint;
use super::GraphDoc;
use std::collections::{HashSet, VecDeque};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GraphWarning {
    /// A kernel that no execution wire chain from `on_start` / `on_frame` reaches.
    NeverRuns { node: String },
}

impl GraphWarning {
    pub fn node(&self) -> &str {
        match self {
            GraphWarning::NeverRuns { node } => node,
        }
    }
}

impl std::fmt::Display for GraphWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GraphWarning::NeverRuns { node } => write!(
                f,
                "warning: node '{}': kernel never runs: no execution wire from on_start or on_frame reaches it",
                node
            ),
        }
    }
}

/// The warnings of a document, in node order.
pub fn warnings(doc: &GraphDoc) -> Vec<GraphWarning> {
    // Execution starts at the event nodes (those with exec outputs and no exec input).
    let mut reached: HashSet<&str> = HashSet::new();
    let mut queue: VecDeque<&str> = doc
        .nodes
        .iter()
        .filter(|n| catalog::kind(&n.kind).is_some_and(|k| !k.exec_in && !k.exec_outs.is_empty()))
        .map(|n| n.id.as_str())
        .collect();
    while let Some(id) = queue.pop_front() {
        if !reached.insert(id) {
            continue;
        }
        for w in &doc.exec {
            if split_endpoint(&w.from).0 == id {
                queue.push_back(split_endpoint(&w.to).0);
            }
        }
    }
    doc.nodes
        .iter()
        .filter(|n| n.kind == "kernel" && !reached.contains(n.id.as_str()))
        .map(|n| GraphWarning::NeverRuns { node: n.id.clone() })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(exec: &[(&str, &str)]) -> GraphDoc {
        let nodes = serde_json::json!([
            {"id": "start", "kind": "on_start"},
            {"id": "frame", "kind": "on_frame"},
            {"id": "sub", "kind": "repeat", "params": {"count": 2}},
            {"id": "a", "kind": "kernel"},
            {"id": "b", "kind": "kernel"},
            {"id": "c", "kind": "kernel"},
        ]);
        let exec: Vec<serde_json::Value> = exec
            .iter()
            .map(|(f, t)| serde_json::json!({"from": f, "to": t}))
            .collect();
        serde_json::from_value(serde_json::json!({
            "format": "weft-graph", "version": 1, "nodes": nodes, "exec": exec
        }))
        .unwrap()
    }

    #[test]
    fn kernels_reached_through_repeat_bodies_run_and_the_rest_are_named() {
        let d = doc(&[("frame.then", "sub"), ("sub.body", "a"), ("a.then", "b")]);
        assert_eq!(
            warnings(&d),
            vec![GraphWarning::NeverRuns { node: "c".into() }]
        );
        let d = doc(&[]);
        assert_eq!(
            warnings(&d)
                .iter()
                .map(GraphWarning::node)
                .collect::<Vec<_>>(),
            vec!["a", "b", "c"]
        );
        assert!(warnings(&d)[0].to_string().contains("node 'a'"));
    }
}
