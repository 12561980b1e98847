use super::*;
use std::path::PathBuf;
use weft_ir::graph::{build_program, BuildOptions};
use weft_runtime::{Backend, SimOptions, Simulation};

fn graphs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../graphs")
}

fn heat() -> GraphDoc {
    GraphDoc::load(&graphs().join("heat.json")).expect("heat.json loads")
}

/// The library the shipped graphs see.
fn lib() -> Library {
    Library::for_graph(&graphs())
}

fn ids(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// Every field's words after `frames` frames on the vm backend, by the
/// field's name without its group path (`group1/T_next` → `T_next`).
fn run(doc: &GraphDoc, frames: i32) -> Vec<(String, Vec<u32>)> {
    let program = build_program(doc, &BuildOptions { base_dir: graphs() })
        .unwrap_or_else(|e| panic!("builds: {}", e));
    let fields: Vec<_> = program
        .fields
        .iter()
        .map(|(h, f)| (f.name.rsplit('/').next().unwrap().to_string(), h))
        .collect();
    let opts = SimOptions {
        backend: Backend::Vm,
        threads: Some(1),
        ..Default::default()
    };
    let mut sim = Simulation::new(program, &opts).expect("simulation starts");
    sim.start().expect("start");
    while sim.frame < frames {
        sim.step_frame().expect("steps");
    }
    let mut out: Vec<_> = fields
        .into_iter()
        .map(|(n, h)| (n, sim.read_field(h).expect("reads")))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn grouping_keeps_the_fields_bit_for_bit() {
    let doc = heat();
    let grouped = group_nodes(
        &doc,
        &ids(&["diffuse", "apply", "T_next"]),
        "group1",
        &lib(),
    )
    .unwrap();
    let g = grouped.node("group1").unwrap();
    let body = g.group.as_ref().unwrap();
    // Three ports in (layout, T, source, the exec from substeps), none out.
    let names: Vec<(&str, GroupPortType)> = body
        .inputs
        .iter()
        .map(|p| (p.name.as_str(), p.ty))
        .collect();
    assert!(
        names.contains(&("cells", GroupPortType::Layout)),
        "{:?}",
        names
    );
    assert!(names.contains(&("T", GroupPortType::Field)), "{:?}", names);
    assert!(
        names.contains(&("source", GroupPortType::Field)),
        "{:?}",
        names
    );
    assert!(names.contains(&("run", GroupPortType::Exec)), "{:?}", names);
    let t = body.inputs.iter().find(|p| p.name == "T").unwrap();
    assert_eq!(t.to, ids(&["diffuse.T", "apply.T"]));
    assert!(body.nodes.iter().any(|n| n.id == "diffuse"));
    assert!(grouped.node("diffuse").is_none());
    // At the centre of the packed nodes.
    let c = ["diffuse", "apply", "T_next"]
        .iter()
        .map(|i| doc.node(i).unwrap().pos)
        .fold([0.0, 0.0], |a, p| [a[0] + p[0] / 3.0, a[1] + p[1] / 3.0]);
    assert!(
        (g.pos[0] - c[0]).abs() < 1e-3 && (g.pos[1] - c[1]).abs() < 1e-3,
        "{:?} is not the centre {:?}",
        g.pos,
        c
    );
    assert_eq!(run(&grouped, 3), run(&doc, 3));
}

#[test]
fn a_group_with_outputs_and_exec_out_runs_the_same() {
    // The fields and the first kernel: wires go out of the group to the
    // kernels and the view, and an exec wire leaves it (diffuse → apply).
    let doc = heat();
    let grouped =
        group_nodes(&doc, &ids(&["T", "T_next", "diffuse", "grid"]), "g", &lib()).unwrap();
    let body = grouped.node("g").unwrap().group.clone().unwrap();
    assert!(body
        .outputs
        .iter()
        .any(|p| p.ty == GroupPortType::Exec && p.from.as_deref() == Some("diffuse.then")));
    assert!(body
        .outputs
        .iter()
        .any(|p| p.ty == GroupPortType::Layout && p.from.as_deref() == Some("grid.cells")));
    assert_eq!(run(&grouped, 2), run(&doc, 2));
    // And back: ungrouping gives the original graph (the same nodes,
    // wires and exec wires).
    let back = ungroup(&grouped, "g", &lib()).unwrap();
    let sorted = |mut v: Vec<WireDoc>| {
        v.sort_by(|a, b| (&a.from, &a.to).cmp(&(&b.from, &b.to)));
        v
    };
    assert_eq!(sorted(back.wires.clone()), sorted(doc.wires.clone()));
    assert_eq!(sorted(back.exec.clone()), sorted(doc.exec.clone()));
    let mut a: Vec<_> = back.nodes.iter().map(|n| (&n.id, n.pos)).collect();
    let mut b: Vec<_> = doc.nodes.iter().map(|n| (&n.id, n.pos)).collect();
    a.sort_by(|x, y| x.0.cmp(y.0));
    b.sort_by(|x, y| x.0.cmp(y.0));
    assert_eq!(a, b);
}

#[test]
fn ungrouping_the_shipped_group_keeps_the_fields_and_the_promoted_value() {
    let doc = GraphDoc::load(&graphs().join("heat_grouped.json")).unwrap();
    let mut set = doc.clone();
    set.node_mut("diffusion")
        .unwrap()
        .params
        .insert("rate".into(), Value::from(0.1));
    let flat = ungroup(&set, "diffusion", &lib()).unwrap();
    assert!(flat.nodes.iter().all(|n| n.kind != GROUP));
    let step = flat.node("step").unwrap();
    assert_eq!(step.params["scalars"]["alpha"]["default"], Value::from(0.1));
    assert_eq!(run(&flat, 2), run(&set, 2));
    // An id taken outside is renamed inside (and its wires follow).
    let mut clash = doc.clone();
    clash.nodes.push(NodeDoc {
        id: "apply".into(),
        kind: "on_start".into(),
        ..Default::default()
    });
    let flat = ungroup(&clash, "diffusion", &lib()).unwrap();
    assert!(flat.node("apply_2").is_some());
    assert!(flat.exec.iter().any(|w| w.to == "apply_2"));
}

#[test]
fn the_body_document_round_trips_and_edits_reach_the_ports() {
    let doc = GraphDoc::load(&graphs().join("heat_grouped.json")).unwrap();
    let g = doc.node("diffusion").unwrap().clone();
    let body = body_doc(&g, &doc).unwrap();
    let inputs = body.node(INPUTS).unwrap();
    let (_, outs) = node_pins(inputs, &lib());
    assert_eq!(
        outs.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        ["cells", "T", "source", "run"]
    );
    assert!(body
        .exec
        .iter()
        .any(|w| w.from == "@inputs.run" && w.to == "step"));
    let mut back = g.clone();
    write_body(&mut back, &body);
    assert_eq!(back, g);
    // A wire from the inputs node to another pin feeds that pin too.
    let mut edited = body.clone();
    edited.wires.retain(|w| w.to != "step.source");
    edited.wires.push(WireDoc {
        from: "@inputs.T".into(),
        to: "step.source".into(),
    });
    write_body(&mut back, &edited);
    let b = back.group.unwrap();
    assert!(b
        .inputs
        .iter()
        .find(|p| p.name == "source")
        .unwrap()
        .to
        .is_empty());
    assert_eq!(
        b.inputs.iter().find(|p| p.name == "T").unwrap().to,
        ids(&["step.T", "apply.T", "step.source"])
    );
}

#[test]
fn promote_takes_name_range_and_doc_and_unpromote_keeps_the_value() {
    let doc = heat();
    let mut grouped = group_nodes(&doc, &ids(&["diffuse", "apply"]), "g", &lib()).unwrap();
    let before = run(&grouped, 1);
    let node = grouped.node_mut("g").unwrap();
    let body = node.group.as_mut().unwrap();
    assert!(promote(body, "diffuse", "alpha").unwrap());
    assert!(!promote(body, "diffuse", "alpha").unwrap());
    let p = body.params[0].clone();
    assert_eq!(p.name, "diffuse_alpha");
    assert_eq!(p.target, "diffuse.alpha");
    assert_eq!((p.min, p.max), (Some(0.0), Some(0.25)));
    assert!(!p.doc.is_empty());
    // A catalog parameter: the repeat count is not in the group, so a
    // missing node is refused; the kernel's `over` is promoted with its doc.
    assert!(promote(body, "nope", "x").is_err());
    assert!(promote(body, "diffuse", "over").unwrap());
    assert_eq!(run(&grouped, 1), before);
    // Setting it on the group changes the run; un-promoting keeps the value.
    let node = grouped.node_mut("g").unwrap();
    node.params
        .insert("diffuse_alpha".into(), Value::from(0.05));
    let set = run(&grouped, 1);
    assert_ne!(set, before);
    let node = grouped.node_mut("g").unwrap();
    assert!(unpromote(node, "diffuse", "alpha").unwrap());
    assert!(node.params.is_empty());
    assert_eq!(run(&grouped, 1), set);
}
