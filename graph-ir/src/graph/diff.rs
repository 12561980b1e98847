//! What differs between two graph documents in what they compute: the
//! check `weft run --resume` makes before continuing a snapshot (a
//! snapshot continued by another graph would mix two simulations).
//!
//! Compared: every non-view node's kind and parameters, the data wires
//! and execution wires that do not end at a view, and the seed. Ignored:
//! editor positions, the description, frames and comments, and view nodes
//! (they draw the state, never change it), so a moved node or a reframed
//! camera does not block a resume.

use super::catalog::{self, Family};
use super::document::{GraphDoc, NodeDoc, WireDoc};

fn is_view(n: &NodeDoc) -> bool {
    catalog::kind(&n.kind).is_some_and(|k| k.family == Family::View)
}

fn short(v: &serde_json::Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 60 {
        format!("{}…", s.chars().take(60).collect::<String>())
    } else {
        s
    }
}

/// One line per difference, in a stable order (empty: the same simulation).
/// `before` is the snapshot's document, `now` the graph being run.
pub fn run_differences(before: &GraphDoc, now: &GraphDoc) -> Vec<String> {
    let mut out = Vec::new();
    if before.seed != now.seed {
        out.push(format!("the seed was {}, is {}", before.seed, now.seed));
    }
    let views = |d: &GraphDoc| -> Vec<String> {
        d.nodes
            .iter()
            .filter(|n| is_view(n))
            .map(|n| n.id.clone())
            .collect()
    };
    let (vb, vn) = (views(before), views(now));
    for b in before.nodes.iter().filter(|n| !is_view(n)) {
        match now.node(&b.id) {
            None => out.push(format!("node '{}' ({}) was removed", b.id, b.kind)),
            Some(n) if n.kind != b.kind => {
                out.push(format!("node '{}' was a {}, is a {}", b.id, b.kind, n.kind))
            }
            Some(n) => {
                let mut keys: Vec<&String> = b.params.keys().chain(n.params.keys()).collect();
                keys.sort();
                keys.dedup();
                for k in keys {
                    let (x, y) = (b.params.get(k), n.params.get(k));
                    if x != y {
                        let show = |v: Option<&serde_json::Value>| {
                            v.map(short).unwrap_or_else(|| "unset".into())
                        };
                        out.push(format!(
                            "node '{}' param '{}' was {}, is {}",
                            b.id,
                            k,
                            show(x),
                            show(y)
                        ));
                    }
                }
            }
        }
    }
    for n in now.nodes.iter().filter(|n| !is_view(n)) {
        if before.node(&n.id).is_none() {
            out.push(format!("node '{}' ({}) was added", n.id, n.kind));
        }
    }
    let ends_at_view = |w: &WireDoc, views: &[String]| {
        let node = |end: &str| end.split('.').next().unwrap_or("").to_string();
        views.contains(&node(&w.to)) || views.contains(&node(&w.from))
    };
    for (what, b, n) in [
        ("wire", &before.wires, &now.wires),
        ("execution wire", &before.exec, &now.exec),
    ] {
        for w in b.iter().filter(|w| !ends_at_view(w, &vb)) {
            if !n.contains(w) {
                out.push(format!("{} {} -> {} was removed", what, w.from, w.to));
            }
        }
        for w in n.iter().filter(|w| !ends_at_view(w, &vn)) {
            if !b.contains(w) {
                out.push(format!("{} {} -> {} was added", what, w.from, w.to));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> GraphDoc {
        serde_json::from_str(text).unwrap()
    }

    const BASE: &str = r#"{"format": "weft-graph", "version": 1, "nodes": [
        {"id": "grid", "kind": "dense", "params": {"shape": [8]}, "pos": [0, 0]},
        {"id": "u", "kind": "field", "params": {"type": "f32"}},
        {"id": "k", "kind": "kernel", "params": {"over": "u", "code": "fn kernel(i: i32) { u[i] = 1.0; }"}},
        {"id": "frame", "kind": "on_frame"},
        {"id": "view", "kind": "plot", "params": {"width": 64}}],
      "wires": [{"from": "grid.cells", "to": "u.layout"}, {"from": "u.field", "to": "k.u"},
                {"from": "u.field", "to": "view.field"}],
      "exec": [{"from": "frame.then", "to": "k"}]}"#;

    #[test]
    fn positions_descriptions_and_views_do_not_count() {
        let a = doc(BASE);
        let mut b = doc(BASE);
        b.nodes[0].pos = [100.0, 5.0];
        b.description = "moved".into();
        b.nodes[4].params.insert("width".into(), 128.into());
        b.wires.retain(|w| w.to != "view.field");
        assert!(
            run_differences(&a, &b).is_empty(),
            "{:?}",
            run_differences(&a, &b)
        );
    }

    #[test]
    fn every_compute_difference_is_named() {
        let a = doc(BASE);
        let mut b = doc(BASE);
        b.nodes[0]
            .params
            .insert("shape".into(), serde_json::json!([16]));
        b.nodes.remove(2);
        b.seed = 3;
        b.exec.clear();
        let d = run_differences(&a, &b);
        assert_eq!(
            d,
            vec![
                "the seed was 0, is 3",
                "node 'grid' param 'shape' was [8], is [16]",
                "node 'k' (kernel) was removed",
                "execution wire frame.then -> k was removed",
            ]
        );
    }
}
