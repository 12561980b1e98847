//! Group nodes in the editor: a group (inline body or asset reference)
//! draws as one node whose pins are its ports.

use super::model::{Pin, PinKind};
use weft_ir::graph::assets::Library;
use weft_ir::graph::catalog::PortType;
use weft_ir::graph::{GroupDoc, GroupPortType, NodeDoc};

/// The group's interface: its inline body, or its asset read from the
/// library (`None` when the asset is missing; the build reports it).
pub fn interface(node: &NodeDoc) -> Option<GroupDoc> {
    if let Some(g) = &node.group {
        return Some((**g).clone());
    }
    let a = node.asset.as_ref()?;
    let here = std::env::current_dir().unwrap_or_default();
    Library::for_graph(&here).load(a).ok()
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
pub fn pins(node: &NodeDoc) -> (Vec<Pin>, Vec<Pin>) {
    let Some(g) = interface(node) else {
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
