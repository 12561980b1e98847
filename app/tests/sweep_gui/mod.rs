//! File > Open sweep… (kittest, in the gui_optimize crate: one fewer
//! compile of the GUI): a sweep made and collected by the `weft` binary
//! shows one thumbnail per variant with its values, and clicking one opens
//! the graph with those values set, as an untitled copy.

use super::*;
use std::process::Command;

fn weft(args: &[&str]) {
    let o = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("weft runs");
    assert!(
        o.status.success(),
        "weft {:?}: {}{}",
        args,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn sweep_panel_opens_a_variant_as_an_untitled_copy() {
    let dir = std::env::temp_dir().join(format!("weft-gui-sweep-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let sw = dir.join("sw");
    let s = sw.to_str().unwrap();
    weft(&[
        "sweep",
        "plan",
        "graphs/heat.json",
        "--vary",
        "diffuse.alpha=0.1,0.2",
        "--vary",
        "substeps.count=5,10",
        "--seeds",
        "1",
        "--frames",
        "2",
        "--out",
        s,
    ]);
    // Variant 1 stays missing: the panel says so instead of a picture.
    for i in ["0", "2", "3"] {
        weft(&["sweep", "run", s, "--index", i, "--backend", "cpu"]);
    }
    weft(&["sweep", "collect", s]);

    let mut h = harness("heat.json");
    h.get_by_label("File").click();
    h.run_steps(2);
    assert!(
        h.query_by_label("Open sweep…").is_some(),
        "File > Open sweep…"
    );
    h.key_press(egui::Key::Escape);
    h.run_steps(2);
    h.state_mut().sweep.load(&sw.join("manifest.json"));
    h.run_steps(3);
    {
        let p = &h.state().sweep;
        assert!(p.open && p.error.is_none(), "{:?}", p.error);
        let states: Vec<&str> = p.cells.iter().map(|c| c.state.as_str()).collect();
        assert_eq!(states, ["done", "missing", "done", "done"]);
    }
    assert!(h.query_by_label("#1 missing").is_some());
    assert!(h.query_by_label("#2 done").is_some());
    assert_eq!(h.query_all_by_label("diffuse.alpha=0.2").count(), 2);
    assert_eq!(h.query_all_by_label("substeps.count=10").count(), 2);
    assert_eq!(h.query_all_by_label("seed=0").count(), 4);

    h.get_by_label("variant 2").click();
    h.run_steps(3);
    let app = h.state();
    // The graph weft run --set would run, node for node.
    let mut expected =
        weft_ir::graph::overrides::read_doc(&root().join("graphs/heat.json")).unwrap();
    weft_ir::graph::overrides::apply_overrides(
        &mut expected,
        &weft_ir::graph::overrides::Overrides {
            sets: vec!["diffuse.alpha=0.2".into(), "substeps.count=5".into()],
            inits: vec![],
        },
    )
    .unwrap();
    assert_eq!(
        serde_json::to_value(&app.model.doc.nodes).unwrap(),
        serde_json::to_value(&expected.nodes).unwrap()
    );
    assert_eq!(app.model.doc.seed, 0);
    assert!(app.model.path.is_none(), "a variant opens untitled");
    assert!(
        app.model.title().contains("untitled"),
        "{}",
        app.model.title()
    );
    assert!(app.model.dirty, "saving or leaving asks first");
    assert!(app.model.problems.is_empty(), "{:?}", app.model.problems);
    let _ = std::fs::remove_dir_all(&dir);
}
