//! The one way a graph becomes a running simulation: a `GraphSource`
//! (its document with any overrides applied, the folder its data files
//! are found from, its asset library) is built into a `Program` and
//! opened on a backend (`Simulation::new`: the backend's spec resolves
//! `auto`, opens its device once and tunes the passes).
//!
//! `weft run` / `bench` / `replay`, the app's viewport and the web page
//! come here (and the Python module will), so one graph resolves its
//! assets and its backend the same way in each. It is a crate of its own
//! because it joins the two sides the crate tower keeps apart: the graph
//! document (`weft_ir::graph`) and the runtime, which sees only the IR.
//! `grad` and bake open an already built program with `Simulation::new`
//! themselves: they rewrite or hash it first.
//!
//! `render` (`weft render` and the app's Render dialog: one view over a
//! frame range as an MP4 or a PNG sequence) is here for the same reason:
//! both front ends build and step the same simulation through it.

pub mod render;

use std::path::Path;
use weft_ir::graph::overrides::Overrides;
use weft_ir::graph::{GraphDoc, GraphSource};
use weft_runtime::{RuntimeError, SimOptions, Simulation};

/// Builds `source` and opens it on `opts.backend`.
pub fn simulation(source: &GraphSource, opts: &SimOptions) -> Result<Simulation, RuntimeError> {
    Simulation::new(source.build()?, opts)
}

/// Opens the graph file at `path` with `overrides` (`--set`, `--init`)
/// applied, with the asset library a graph in its folder sees; returns
/// the document as overridden (what a snapshot or a bake records) with
/// the simulation.
pub fn file(
    path: &Path,
    overrides: &Overrides,
    opts: &SimOptions,
) -> Result<(GraphDoc, Simulation), RuntimeError> {
    let source = source(path, overrides)?;
    let sim = simulation(&source, opts)?;
    Ok((source.doc, sim))
}

/// The graph file at `path` as a source, with `overrides` applied and the
/// asset library a graph in its folder sees: what `file` opens, for a
/// caller that builds it itself (`render` rebuilds a view at its size).
pub fn source(path: &Path, overrides: &Overrides) -> Result<GraphSource, RuntimeError> {
    let mut source = GraphSource::load(path)?;
    source.apply(overrides)?;
    Ok(source)
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_runtime::Backend;

    fn vm() -> SimOptions {
        SimOptions {
            backend: Backend::Vm,
            ..Default::default()
        }
    }

    fn dir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("weft-open-{}-{}", tag, std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A graph whose kernel writes scalar `s` into every cell of `u`,
    /// inside a group `g` that promotes `s` as `gain`.
    fn write_graph(d: &Path) -> std::path::PathBuf {
        let text = serde_json::json!({
            "format": "weft-graph", "version": 1,
            "nodes": [
                {"id": "grid", "kind": "dense", "params": {"shape": [4]}},
                {"id": "u", "kind": "field", "params": {"type": "f32"}},
                {"id": "frame", "kind": "on_frame"},
                {"id": "g", "kind": "group", "group": {
                    "inputs": [{"name": "u", "type": "field", "to": ["k.u"]},
                               {"name": "run", "type": "exec", "to": ["k"]}],
                    "params": [{"name": "gain", "target": "k.s"}],
                    "nodes": [{"id": "k", "kind": "kernel", "params": {"over": "u",
                        "scalars": {"s": 1.0},
                        "code": "fn kernel(i: i32) { u[i] = s; }"}}]
                }}],
            "wires": [{"from": "grid.cells", "to": "u.layout"}, {"from": "u.field", "to": "g.u"}],
            "exec": [{"from": "frame.then", "to": "g.run"}]
        });
        let p = d.join("g.json");
        std::fs::write(&p, text.to_string()).unwrap();
        p
    }

    /// The overrides reach the simulation (an inner `--set` through the
    /// promoted parameter), the document returned carries them, and the
    /// program is the one `GraphSource::build` makes of the same source.
    #[test]
    fn a_file_opens_with_its_overrides_applied() {
        let d = dir("file");
        let p = write_graph(&d);
        let o = Overrides {
            sets: vec!["g/k.s=2.5".into()],
            inits: vec![],
        };
        let (doc, mut sim) = file(&p, &o, &vm()).unwrap();
        assert_eq!(sim.backend_name(), "vm");
        sim.start().unwrap();
        sim.step_frame().unwrap();
        let u = sim.field("u").unwrap();
        let words = sim.read_field(u).unwrap();
        assert!(
            words.iter().all(|w| f32::from_bits(*w) == 2.5),
            "{:?}",
            words
        );
        let mut source = GraphSource::load(&p).unwrap();
        source.apply(&o).unwrap();
        assert_eq!(
            serde_json::to_value(&doc).unwrap(),
            serde_json::to_value(&source.doc).unwrap()
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A graph that does not build is refused with the node it names.
    #[test]
    fn a_graph_that_does_not_build_names_its_node() {
        let d = dir("bad");
        let p = write_graph(&d);
        let o = Overrides {
            sets: vec!["g/k.code=fn kernel(i: i32) { u[i] = nope; }".into()],
            inits: vec![],
        };
        let e = file(&p, &o, &vm()).err().expect("an error");
        assert!(e.to_string().contains("g/k"), "{}", e);
        let _ = std::fs::remove_dir_all(&d);
    }
}
