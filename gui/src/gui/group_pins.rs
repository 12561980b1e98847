//! Group nodes in the editor: a group (inline body or asset reference)
//! draws as one node whose pins are its ports.

use super::model::{Pin, PinKind};
use weft_ir::graph::assets::Library;
use weft_ir::graph::catalog::PortType;
use weft_ir::graph::{GroupDoc, GroupPortType, NodeDoc};

/// The group's interface: its inline body, or its asset read from `lib`,
/// the editor's library (`None` when the asset is missing; the build
/// reports it).
pub fn interface(node: &NodeDoc, lib: &Library) -> Option<GroupDoc> {
    if let Some(g) = &node.group {
        return Some((**g).clone());
    }
    let a = node.asset.as_ref()?;
    lib.load(a).ok()
}

fn pin(name: &str, t: GroupPortType) -> Pin {
    Pin {
        name: name.to_string(),
        kind: match t {
            GroupPortType::Field => PinKind::Data(PortType::Field),
            GroupPortType::Layout => PinKind::Data(PortType::Layout),
            GroupPortType::Exec => PinKind::Exec,
        },
    }
}

/// Input and output pins of a group node: exec ports first on the inputs
/// and last on the outputs, as on other nodes.
pub fn pins(node: &NodeDoc, lib: &Library) -> (Vec<Pin>, Vec<Pin>) {
    let Some(g) = interface(node, lib) else {
        return (vec![], vec![]);
    };
    let is_exec = |t: GroupPortType| t == GroupPortType::Exec;
    let mut ins: Vec<Pin> = g
        .inputs
        .iter()
        .filter(|p| is_exec(p.ty))
        .map(|p| pin(&p.name, p.ty))
        .collect();
    ins.extend(
        g.inputs
            .iter()
            .filter(|p| !is_exec(p.ty))
            .map(|p| pin(&p.name, p.ty)),
    );
    let mut outs: Vec<Pin> = g
        .outputs
        .iter()
        .filter(|p| !is_exec(p.ty))
        .map(|p| pin(&p.name, p.ty))
        .collect();
    outs.extend(
        g.outputs
            .iter()
            .filter(|p| is_exec(p.ty))
            .map(|p| pin(&p.name, p.ty)),
    );
    (ins, outs)
}

/// The inspector of a group node: what it does, its asset, and its
/// promoted parameters (numbers as drag values within their range; an
/// expression or other value shown as text).
pub fn inspector(
    ui: &mut egui::Ui,
    node: &NodeDoc,
    lib: &Library,
    commands: &mut Vec<super::model::Command>,
) {
    if let Some(a) = &node.asset {
        ui.label(format!("group — asset {} version {}", a.name, a.version));
        super::asset_update::offer(ui, node, lib, commands);
    } else {
        ui.label("group");
    }
    let Some(g) = interface(node, lib) else {
        ui.colored_label(
            egui::Color32::from_rgb(255, 110, 110),
            "the asset is not in the library",
        );
        return;
    };
    if !g.doc.is_empty() {
        ui.add(egui::Label::new(&g.doc).wrap());
    }
    if node.bypass {
        ui.weak("bypassed: its kernels do not run");
    }
    ui.separator();
    ui.label("promoted parameters");
    for p in &g.params {
        let value = node.params.get(&p.name).or(p.default.as_ref());
        ui.horizontal(|ui| {
            let label = ui.label(&p.name);
            if !p.doc.is_empty() {
                label.on_hover_text(&p.doc);
            }
            match value.and_then(serde_json::Value::as_f64) {
                Some(mut x) => {
                    let lo = p.min.unwrap_or(f64::NEG_INFINITY);
                    let hi = p.max.unwrap_or(f64::INFINITY);
                    let int = value.is_some_and(|v| v.is_i64() || v.is_u64());
                    let speed = if int { 1.0 } else { (x.abs() * 0.01).max(1e-4) };
                    let r = ui.add(egui::DragValue::new(&mut x).range(lo..=hi).speed(speed));
                    if r.changed() {
                        let v = if int {
                            serde_json::Value::from(x.round() as i64)
                        } else {
                            serde_json::Value::from(x)
                        };
                        commands.push(super::model::Command::SetParam {
                            node: node.id.clone(),
                            param: p.name.clone(),
                            value: v,
                        });
                    }
                }
                None => {
                    ui.weak(
                        value
                            .map(|v| v.to_string())
                            .unwrap_or_else(|| "(the inner node's value)".into()),
                    );
                }
            }
        });
    }
}
