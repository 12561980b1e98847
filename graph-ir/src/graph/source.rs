//! A graph as a simulation is made from it: the document, the folder its
//! data files are found from, and the asset library its group nodes
//! resolve against. The library is a value the caller chooses (the CLI:
//! `Library::for_graph` of the graph's folder; the app: that with its own
//! user library), never a global, and every step — `--set` into an asset
//! group, the build — resolves assets through that one value, so a run,
//! a bake and the app's viewport of the same source build the same program.
//!
//! `weft run` / `bench` / `replay` / `sweep`, the app's viewport and bake
//! and the web page all start here; opening a backend for the built
//! program is `Simulation::new` (the runtime sees only the IR).

use super::assets::Library;
use super::overrides::{apply_overrides_with, Overrides};
use super::{build_program, groups, BuildOptions, GraphDoc, GraphErrors};
use crate::ir::Program;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug)]
pub struct GraphSource {
    pub doc: GraphDoc,
    /// The folder `.npy` paths in the graph are relative to (the graph
    /// file's folder).
    pub base_dir: PathBuf,
    /// Where group nodes' assets are found.
    pub library: Library,
}

impl GraphSource {
    pub fn new(doc: GraphDoc, base_dir: PathBuf, library: Library) -> GraphSource {
        GraphSource {
            doc,
            base_dir,
            library,
        }
    }

    /// A document in `base_dir` with the library a graph there sees
    /// (`Library::for_graph`).
    pub fn in_folder(doc: GraphDoc, base_dir: PathBuf) -> GraphSource {
        let library = Library::for_graph(&base_dir);
        GraphSource::new(doc, base_dir, library)
    }

    /// Reads the graph file at `path`, with the library a graph in its
    /// folder sees.
    pub fn load(path: &Path) -> Result<GraphSource, GraphErrors> {
        let doc = GraphDoc::load(path)?;
        let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Ok(GraphSource::in_folder(doc, base_dir))
    }

    /// Applies `--set` / `--init` overrides to the document (validated
    /// like the file itself); a `--set` into an asset group's inner node
    /// inlines the asset from this source's library.
    pub fn apply(&mut self, o: &Overrides) -> Result<(), GraphErrors> {
        apply_overrides_with(&mut self.doc, o, &self.library)
    }

    /// Builds the program: groups, assets (from this source's library)
    /// and bypass flattened, then `build_program`.
    pub fn build(&self) -> Result<Program, GraphErrors> {
        let opts = BuildOptions {
            base_dir: self.base_dir.clone(),
        };
        if groups::needs_flattening(&self.doc) {
            let flat = groups::flatten(&self.doc, &self.library)?;
            return build_program(&flat, &opts);
        }
        build_program(&self.doc, &opts)
    }

    /// The plain document (groups, assets and bypass flattened against
    /// this source's library), or the document itself when it has none.
    pub fn flat(&self, doc: &GraphDoc) -> Result<GraphDoc, GraphErrors> {
        if groups::needs_flattening(doc) {
            groups::flatten(doc, &self.library)
        } else {
            Ok(doc.clone())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asset_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("weft-source-{}-{}", tag, std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// An asset `fill` whose kernel writes `value` into its field port.
    fn write_asset(dir: &Path, value: f32) {
        let text = serde_json::json!({
            "format": "weft-graph", "version": 1,
            "asset": {"name": "fill", "version": 1,
                      "inputs": [{"name": "u", "type": "field", "to": ["k.u"]},
                                 {"name": "run", "type": "exec", "to": ["k"]}]},
            "nodes": [{"id": "k", "kind": "kernel", "params": {"over": "u",
                "code": format!("fn kernel(i: i32) {{ u[i] = {:?}; }}", value)}}]
        });
        std::fs::write(dir.join("fill.v1.json"), text.to_string()).unwrap();
    }

    fn graph() -> GraphDoc {
        GraphDoc::parse(
            &serde_json::json!({
                "format": "weft-graph", "version": 1,
                "nodes": [
                    {"id": "grid", "kind": "dense", "params": {"shape": [4]}},
                    {"id": "u", "kind": "field", "params": {"type": "f32"}},
                    {"id": "g", "kind": "group", "asset": {"name": "fill", "version": 1}},
                    {"id": "frame", "kind": "on_frame"}],
                "wires": [{"from": "grid.cells", "to": "u.layout"}, {"from": "u.field", "to": "g.u"}],
                "exec": [{"from": "frame.then", "to": "g.run"}]
            })
            .to_string(),
        )
        .unwrap()
    }

    /// The library is the source's own: two sources of one document with
    /// two libraries build two programs, and an override into the asset
    /// inlines the body of the source's library.
    #[test]
    fn assets_resolve_through_the_sources_library() {
        let (a, b) = (asset_dir("a"), asset_dir("b"));
        write_asset(&a, 1.0);
        write_asset(&b, 2.0);
        let code = |s: &GraphSource| {
            let p = s.build().unwrap();
            p.kernels
                .iter()
                .map(|(_, k)| k.name.clone())
                .collect::<Vec<_>>()
        };
        let sa = GraphSource::new(graph(), a.clone(), Library::new(vec![a.clone()]));
        let sb = GraphSource::new(graph(), a.clone(), Library::new(vec![b.clone()]));
        assert_eq!(code(&sa), vec!["g/k".to_string()]);
        let flat =
            |s: &GraphSource| s.flat(&s.doc).unwrap().node("g/k").unwrap().params["code"].clone();
        assert!(flat(&sa).as_str().unwrap().contains("1.0"));
        assert!(flat(&sb).as_str().unwrap().contains("2.0"));
        let mut sb = sb;
        sb.apply(&Overrides {
            sets: vec!["g/k.range=[4]".into()],
            inits: vec![],
        })
        .unwrap();
        let inlined = sb.doc.node("g").unwrap().group.as_ref().unwrap();
        assert!(inlined.nodes[0].params["code"]
            .as_str()
            .unwrap()
            .contains("2.0"));
        // A library without the asset: the error names the group.
        let none = GraphSource::new(graph(), a.clone(), Library::new(vec![]));
        let e = none.build().unwrap_err().to_string();
        assert!(e.contains("'g'"), "{}", e);
        let _ = std::fs::remove_dir_all(&a);
        let _ = std::fs::remove_dir_all(&b);
    }
}
