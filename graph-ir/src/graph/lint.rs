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
    /// A bypassed kernel (or one inside a bypassed group) that would not
    /// build if switched back on; `message` is the error it would give.
    BypassedBroken { node: String, message: String },
}

impl GraphWarning {
    pub fn node(&self) -> &str {
        match self {
            GraphWarning::NeverRuns { node } | GraphWarning::BypassedBroken { node, .. } => node,
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
            GraphWarning::BypassedBroken { node, message } => write!(
                f,
                "warning: node '{}' is bypassed, and does not build if switched back on: {}",
                node, message
            ),
        }
    }
}

/// Bypassed kernels whose code (or wiring) does not build. Bypass removes
/// a kernel before anything compiles it, so without this a broken kernel
/// passes `weft check` until someone switches it back on. The graph is
/// built once more with every bypass switched off; the errors that name a
/// bypassed node (or a node inside a bypassed group) become warnings.
/// Nothing when the graph has no bypassed node.
pub fn bypassed_warnings(doc: &GraphDoc, opts: &super::BuildOptions) -> Vec<GraphWarning> {
    fn collect(nodes: &mut [super::NodeDoc], prefix: &str, out: &mut Vec<String>) {
        for n in nodes {
            let path = format!("{}{}", prefix, n.id);
            if std::mem::take(&mut n.bypass) {
                out.push(path.clone());
            }
            if let Some(g) = n.group.as_mut() {
                collect(&mut g.nodes, &format!("{}/", path), out);
            }
        }
    }
    let mut on = doc.clone();
    let mut bypassed = Vec::new();
    collect(&mut on.nodes, "", &mut bypassed);
    if bypassed.is_empty() {
        return vec![];
    }
    let Err(errors) = super::build_program(&on, opts) else {
        return vec![];
    };
    let mut out = Vec::new();
    for e in errors.0 {
        let Some(node) = e.node() else { continue };
        let hit = bypassed
            .iter()
            .any(|b| node == b || node.starts_with(&format!("{}/", b)));
        if hit {
            out.push(GraphWarning::BypassedBroken {
                node: node.to_string(),
                message: e.to_string(),
            });
        }
    }
    out
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
