//! Newer asset versions: a group node that references an asset version
//! older than the newest in the library shows a badge, and its inspector
//! offers "Update to vN" with what changes in the interface. Nothing
//! changes until the user clicks; the update is one undo step.

use super::model::Command;
use weft_ir::graph::assets::Library;
use weft_ir::graph::document::split_endpoint;
use weft_ir::graph::{AssetRef, GraphDoc, GroupDoc, GroupPort, NodeDoc};

/// The newest version of `node`'s asset in `lib` (the editor's library),
/// where it is newer than the one the node references.
pub fn newer(node: &NodeDoc, lib: &Library) -> Option<u32> {
    let a = node.asset.as_ref()?;
    let newest = *lib.versions(&a.name).last()?;
    (newest > a.version).then_some(newest)
}

/// The title badge of a group node with a newer asset version.
pub fn badge(node: &NodeDoc, lib: &Library) -> String {
    newer(node, lib)
        .map(|v| format!("  ·  newer: v{}", v))
        .unwrap_or_default()
}

fn port_line(p: &GroupPort) -> String {
    format!("{} ({:?})", p.name, p.ty).to_lowercase()
}

/// What changes in the interface from `old` to `new`: ports and promoted
/// parameters added, removed or changed, one line each.
pub fn diff(old: &GroupDoc, new: &GroupDoc) -> Vec<String> {
    let mut out = Vec::new();
    for (what, a, b) in [
        ("input", &old.inputs, &new.inputs),
        ("output", &old.outputs, &new.outputs),
    ] {
        for p in b {
            match a.iter().find(|q| q.name == p.name) {
                None => out.push(format!("+ {} port {}", what, port_line(p))),
                Some(q) if q.ty != p.ty => out.push(format!(
                    "~ {} port {}: was {}",
                    what,
                    port_line(p),
                    port_line(q)
                )),
                _ => {}
            }
        }
        for q in a {
            if !b.iter().any(|p| p.name == q.name) {
                out.push(format!(
                    "- {} port {} (its wires are removed)",
                    what,
                    port_line(q)
                ));
            }
        }
    }
    let show =
        |v: &Option<serde_json::Value>| v.as_ref().map(|v| v.to_string()).unwrap_or("none".into());
    for p in &new.params {
        match old.params.iter().find(|q| q.name == p.name) {
            None => out.push(format!(
                "+ parameter {} (default {})",
                p.name,
                show(&p.default)
            )),
            Some(q) => {
                let mut what = Vec::new();
                if q.default != p.default {
                    what.push(format!(
                        "default {} -> {}",
                        show(&q.default),
                        show(&p.default)
                    ));
                }
                if (q.min, q.max) != (p.min, p.max) {
                    what.push(format!(
                        "range {:?}..{:?} -> {:?}..{:?}",
                        q.min, q.max, p.min, p.max
                    ));
                }
                if q.target != p.target {
                    what.push(format!("sets {} (was {})", p.target, q.target));
                }
                if !what.is_empty() {
                    out.push(format!("~ parameter {}: {}", p.name, what.join(", ")));
                }
            }
        }
    }
    for q in &old.params {
        if !new.params.iter().any(|p| p.name == q.name) {
            out.push(format!("- parameter {} (its value is dropped)", q.name));
        }
    }
    if out.is_empty() {
        out.push("same interface (the body may compute differently)".into());
    }
    out
}

/// The inspector's offer, under a group node's header.
pub fn offer(ui: &mut egui::Ui, node: &NodeDoc, lib: &Library, commands: &mut Vec<Command>) {
    let (Some(a), Some(v)) = (&node.asset, newer(node, lib)) else {
        return;
    };
    let (Ok(old), Ok(new)) = (
        lib.load(a),
        lib.load(&AssetRef {
            name: a.name.clone(),
            version: v,
        }),
    ) else {
        return;
    };
    ui.group(|ui| {
        ui.label(format!(
            "{} version {} is in the library (this node uses {}). What changes:",
            a.name, v, a.version
        ));
        for line in diff(&old, &new) {
            ui.monospace(line);
        }
        if ui.button(format!("Update to v{}", v)).clicked() {
            commands.push(Command::UpdateAsset {
                node: node.id.clone(),
                version: v,
            });
        }
    });
}

/// Applies `Command::UpdateAsset`: the node references `version`; values
/// of promoted parameters the new version lacks are dropped, and wires to
/// ports it lacks removed (the summary said so). The new version is read
/// from `lib`, the editor's library.
pub fn apply(doc: &mut GraphDoc, id: &str, version: u32, lib: &Library) -> Result<bool, String> {
    let n = doc
        .node_mut(id)
        .ok_or_else(|| format!("no node '{}'", id))?;
    let a = n
        .asset
        .as_mut()
        .ok_or_else(|| format!("'{}' references no asset", id))?;
    if a.version == version {
        return Ok(false);
    }
    let new = lib
        .load(&AssetRef {
            name: a.name.clone(),
            version,
        })
        .map_err(|m| format!("group '{}': {}", id, m))?;
    a.version = version;
    n.params
        .retain(|k, _| new.params.iter().any(|p| &p.name == k));
    let has = |ports: &[GroupPort], end: &str| {
        let (node, port) = split_endpoint(end);
        node != id || port.is_empty() || ports.iter().any(|p| p.name == port)
    };
    for list in [&mut doc.wires, &mut doc.exec] {
        list.retain(|w| has(&new.outputs, &w.from) && has(&new.inputs, &w.to));
    }
    Ok(true)
}
