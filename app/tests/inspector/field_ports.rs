//! Kernel field ports declared in the inspector (**Add field port**), and a
//! field's `grad` pin, driven like a user would with egui_kittest. (A module
//! of the gui_optimize test crate: each test crate compiles the whole GUI
//! again, and CI's time is counted.)

use crate::gui::model::{pins, Command, Model};
use crate::gui::WeftApp;
use crate::support::{gpu_ok, harness_with, root, wait_for_sim};
use egui::accesskit::Role;
use egui::Event;
use egui_kittest::kittest::{By, Queryable};
use egui_kittest::Harness;
use serde_json::json;
use weft_ir::graph::GraphDoc;

fn cfg(tag: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("weft-field-ports-{}-{}", std::process::id(), tag))
}

fn input_pins(h: &Harness<'static, WeftApp>, node: &str) -> Vec<String> {
    let model = &h.state().model;
    pins(model.doc.node(node).unwrap(), &model.assets.library())
        .0
        .into_iter()
        .map(|p| p.name)
        .collect()
}

/// Types `name` into the box left of the "Add field port" button, then
/// clicks the button.
fn add_port(h: &mut Harness<'static, WeftApp>, name: &str) {
    let button = h.get_by_label("Add field port").rect();
    let input = h
        .get_all(By::new().role(Role::TextInput))
        .rfind(|n| {
            let r = n.rect();
            (r.center().y - button.center().y).abs() < 6.0 && r.max.x <= button.min.x + 1.0
        })
        .expect("a name box beside the button");
    input.focus();
    h.run_steps(2);
    h.event(Event::Text(name.into()));
    h.run_steps(2);
    h.get_by_label("Add field port").click();
    h.run_steps(3);
}

#[test]
fn a_field_port_added_in_the_inspector_takes_a_wire_before_the_code_uses_it() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness_with(Some(root().join("graphs/heat.json")), cfg("add"));
    h.run_steps(3);
    wait_for_sim(&mut h);
    h.state_mut().selected = Some("diffuse".into());
    h.run_steps(3);
    assert!(!input_pins(&h, "diffuse").contains(&"rate".to_string()));
    add_port(&mut h, "rate");
    let doc = h.state().model.doc.clone();
    assert_eq!(
        doc.node("diffuse").unwrap().params["ports"],
        json!(["rate"])
    );
    assert!(
        input_pins(&h, "diffuse").contains(&"rate".to_string()),
        "a pin at once"
    );
    assert!(h.state().model.dirty && h.state().model.can_undo());
    // The inspector lists it, marked as not in the code yet; a name already
    // taken cannot be added again.
    assert!(h.query_by_label("(not in the code yet)").is_some());
    add_port(&mut h, "rate");
    assert_eq!(
        h.state().model.doc.node("diffuse").unwrap().params["ports"],
        json!(["rate"])
    );
    assert!(h
        .query_by_label("'rate' is already a port of this kernel")
        .is_some());
    // Wire a field to it: accepted, and the graph still builds and runs.
    assert_eq!(
        h.state()
            .model
            .check_wire("source.field", "diffuse.rate", false),
        Ok(())
    );
    h.state_mut().model.push(Command::Connect {
        from: "source.field".into(),
        to: "diffuse.rate".into(),
        exec: false,
    });
    h.run_steps(3);
    let m = &h.state().model;
    assert!(m
        .doc
        .wires
        .iter()
        .any(|w| w.from == "source.field" && w.to == "diffuse.rate"));
    assert!(m.problems.is_empty(), "{:?}", m.problems);
    wait_for_sim(&mut h);
    assert!(
        h.state().viewport.error.is_none(),
        "{:?}",
        h.state().viewport.error
    );
    // Saved and loaded back, port and wire are there.
    let file = cfg("saved").with_extension("json");
    h.state_mut().model.save_as(&file).unwrap();
    let back = GraphDoc::load(&file).unwrap();
    assert_eq!(
        back.node("diffuse").unwrap().params["ports"],
        json!(["rate"])
    );
    assert!(back.wires.iter().any(|w| w.to == "diffuse.rate"));
    let _ = std::fs::remove_file(&file);
    // Removing it (×) takes its wire too, in one undo step.
    let with_port = h.state().model.doc.clone();
    h.get_by_label("×").click();
    h.run_steps(3);
    let m = &h.state().model;
    assert_eq!(m.doc.node("diffuse").unwrap().params["ports"], json!([]));
    assert!(!m.doc.wires.iter().any(|w| w.to == "diffuse.rate"));
    assert!(!input_pins(&h, "diffuse").contains(&"rate".to_string()));
    assert!(h.state().model.problems.is_empty());
    h.state_mut().model.undo();
    h.run_steps(2);
    assert_eq!(h.state().model.doc, with_port);
    // Undo the wire and the port: back to the file as loaded.
    h.state_mut().model.undo();
    h.state_mut().model.undo();
    h.run_steps(2);
    assert_eq!(
        h.state()
            .model
            .doc
            .node("diffuse")
            .unwrap()
            .params
            .get("ports"),
        None
    );
}

#[test]
fn a_field_with_grad_on_has_a_grad_pin_for_views_only() {
    let path = root().join("graphs/heat_inverse.json");
    let m = Model::new(GraphDoc::load(&path).unwrap(), Some(path));
    let outs = |id: &str| -> Vec<String> {
        pins(m.doc.node(id).unwrap(), &m.assets.library())
            .1
            .into_iter()
            .map(|p| p.name)
            .collect()
    };
    assert_eq!(outs("u0"), ["field", "grad"]);
    assert_eq!(outs("target"), ["field"], "no gradient, no pin");
    assert_eq!(
        m.check_wire("u0.grad", "estimate_view.field", false),
        Ok(())
    );
    let why = m.check_wire("u0.grad", "seed.u0", false).unwrap_err();
    assert!(why.contains("u0.grad[...]"), "{}", why);
}

/// The button labelled `label` in the inspector (the node in the editor
/// shows its parameters too).
fn inspector_button<'a>(
    h: &'a Harness<'static, WeftApp>,
    label: &'a str,
) -> egui_kittest::Node<'a> {
    let inspector = h
        .state()
        .layout
        .rects
        .inspector
        .expect("the inspector shows");
    h.get_all_by_label(label)
        .find(|n| inspector.contains(n.rect().center()))
        .unwrap_or_else(|| panic!("no '{}' in the inspector", label))
}

/// A 3-D particles view whose `domain` was left a 2-D rectangle (the graph
/// does not build: "vec3 positions need a 3-D domain") is fixed from the
/// inspector: the domain row's **3-D box** button turns the rectangle into
/// a box, in one edit, and the graph builds and runs.
#[test]
fn a_two_d_domain_becomes_a_three_d_box_in_the_inspector() {
    if !gpu_ok() {
        return;
    }
    let dir = cfg("domain3d");
    std::fs::create_dir_all(&dir).unwrap();
    let graph = dir.join("points.json");
    let doc = json!({"format": "weft-graph", "version": 1,
        "nodes": [
            {"id": "cells", "kind": "dense", "params": {"shape": [8]}, "pos": [0, 0]},
            {"id": "x", "kind": "field", "params": {"type": "vec3"}, "pos": [0, 120]},
            {"id": "start", "kind": "on_start", "pos": [0, 240]},
            {"id": "seed", "kind": "kernel", "params": {"over": "x",
                "code": "fn kernel(i: i32) {\n    x[i] = vec3(i as f32 / 8.0, 0.5, 0.5);\n}\n"}, "pos": [300, 0]},
            {"id": "view", "kind": "particles", "params": {"domain": [0, 0, 1, 1]}, "pos": [600, 0]}
        ],
        "wires": [
            {"from": "cells.cells", "to": "x.layout"},
            {"from": "x.field", "to": "seed.x"},
            {"from": "x.field", "to": "view.positions"}
        ],
        "exec": [{"from": "start.then", "to": "seed"}]});
    std::fs::write(&graph, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    let mut h = harness_with(Some(graph), dir.join("cfg"));
    h.run_steps(4);
    assert!(
        !h.state().model.problems_of("view").is_empty(),
        "a 2-D domain for vec3 positions is a problem of the view"
    );
    h.state_mut().selected = Some("view".into());
    h.run_steps(2);
    inspector_button(&h, "3-D box").click();
    h.run_steps(2);
    let d = h.state().model.doc.node("view").unwrap().params["domain"].clone();
    assert_eq!(d, json!([0.0, 0.0, 0.0, 1.0, 1.0, 1.0]));
    wait_for_sim(&mut h);
    assert!(
        h.state().model.problems_of("view").is_empty(),
        "{:?}",
        h.state().model.problems_of("view")
    );
    // And back.
    inspector_button(&h, "2-D rect").click();
    h.run_steps(2);
    let d = h.state().model.doc.node("view").unwrap().params["domain"].clone();
    assert_eq!(d, json!([0.0, 0.0, 1.0, 1.0]));
    let _ = std::fs::remove_dir_all(&dir);
}
