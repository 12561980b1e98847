//! Baking: a frame range of a graph's simulation written to a cache folder
//! beside the graph (`GRAPH_NAME.cache/`), which the app reopens with the
//! graph and plays back without simulating. The app's Bake button and
//! `weft bake` run this same code, so they write the same files.
//!
//! A cache folder holds `cache.json` (format, the frame range asked for,
//! the backend, and the graph document baked, editor positions left out)
//! and one `frame_NNNNNN/` folder per frame: the frame's state (the fields `Contents` chose)
//! written by the runtime's atomic snapshot writer (complete or absent;
//! a cancelled bake keeps the frames completed so far). `cache.json` also
//! records a hash of the graph upstream of the cached state (`upstream`:
//! all but what the one document diff, `graph::diff`, says leaves the
//! state alone: editor positions, comments and frames, the description,
//! views and their settings). The app takes the frames
//! only while the graph it runs has that hash: after an edit upstream the
//! cache is stale, shown so on the timeline and never mixed in; an edit
//! downstream (a view's colour map) leaves it in use.
//!
//! A bake stores the fields the views read (the default; `--fields views`),
//! chosen fields (`--fields T,rho`) or every field's state (`--fields all`,
//! the app's "all fields"). Unless that is every root, each frame is a
//! partial snapshot holding the roots of those fields, which the app shows
//! but does not simulate on from; the bake's last frame is stored complete,
//! so playing past the bake goes on from it. Its staleness follows those
//! fields only: `cache.json` hashes the part of the graph *upstream* of
//! them (`ir::access::upstream`: the kernels that write their roots, and
//! transitively the kernels that write what those read, with the layout
//! and field nodes of every root involved and every execution node), so an
//! edit to a kernel that does not feed them leaves the cache in use.

use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;
use weft_ir::graph::{catalog, diff, GraphDoc, GraphSource};
use weft_ir::ir::{access, layout, LayoutId, Program, Step};
use weft_runtime::{snapshot, Backend, SimOptions, Simulation};

pub const FORMAT: &str = "weft-cache";
pub const CACHE_FILE: &str = "cache.json";

/// The cache folder of graph file `graph`: `NAME.cache` beside it.
pub fn cache_dir_for(graph: &Path) -> PathBuf {
    graph.with_extension("cache")
}

/// The graph document as a cache records it: editor positions left out
/// (they change nothing simulated).
pub fn canonical(doc: &GraphDoc) -> Value {
    let mut v = serde_json::to_value(doc).unwrap_or(Value::Null);
    if let Some(nodes) = v.get_mut("nodes").and_then(Value::as_array_mut) {
        for n in nodes {
            if let Some(o) = n.as_object_mut() {
                o.remove("pos");
            }
        }
    }
    v
}

/// The part of `doc` the baked state depends on: the document less what
/// the one document diff counts as changing nothing or only the drawing
/// (`graph::diff::simulated`: editor positions, comments, frames, the
/// description, views and their settings), so the cache goes stale
/// exactly on the edits `graph::diff::classify` says change the state.
pub fn upstream(doc: &GraphDoc) -> Value {
    serde_json::to_value(diff::simulated(doc)).unwrap_or(Value::Null)
}

/// A stable hash (FNV-1a, 64 bits, hex) of `upstream(doc)`: what a cache
/// records to know it is stale.
pub fn upstream_hash(doc: &GraphDoc) -> String {
    fnv(&serde_json::to_string(&upstream(doc)).unwrap_or_default())
}

/// What each baked frame stores.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Contents {
    /// Every field's state (complete snapshots): frames play on and a run
    /// can resume from them.
    Everything,
    /// The fields the graph's views read (every field's state in a graph
    /// without views).
    #[default]
    Views,
    /// The named fields (field node ids; `x.grad` for a gradient).
    Fields(Vec<String>),
}

impl Contents {
    /// `--fields`: `views`, `all`, or field names separated by commas.
    pub fn parse(s: &str) -> Result<Contents, String> {
        let names: Vec<String> = s
            .split(',')
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .collect();
        match names.as_slice() {
            [] => Err("--fields needs field names (T,rho), 'views' or 'all'".into()),
            [v] if v == "views" => Ok(Contents::Views),
            [v] if v == "all" => Ok(Contents::Everything),
            _ => Ok(Contents::Fields(names)),
        }
    }
}

/// The roots a bake of `contents` stores (`None`: all of them).
pub fn baked_roots(
    program: &Program,
    contents: &Contents,
) -> Result<Option<BTreeSet<LayoutId>>, String> {
    let fields = match contents {
        Contents::Everything => return Ok(None),
        Contents::Views => {
            let f: Vec<_> = program.views.iter().flat_map(|v| v.fields()).collect();
            if f.is_empty() {
                return Ok(None);
            }
            f
        }
        Contents::Fields(names) => names
            .iter()
            .map(|n| {
                program
                    .field_by_name(n)
                    .filter(|&f| !program.is_view_field(f))
                    .ok_or_else(|| {
                        let have: Vec<&str> = program
                            .fields
                            .iter()
                            .filter(|(h, _)| !program.is_view_field(*h))
                            .map(|(_, f)| f.name.as_str())
                            .collect();
                        format!(
                            "--fields: the graph has no field '{}' (its fields: {})",
                            n,
                            have.join(", ")
                        )
                    })
            })
            .collect::<Result<_, _>>()?,
    };
    let roots: BTreeSet<LayoutId> = fields
        .into_iter()
        .map(|f| layout::root_of(program, program.fields[f].layout))
        .collect();
    // Fields on every root are the complete state.
    let all = program.roots().all(|r| {
        roots.contains(&r)
            || program
                .fields
                .iter()
                .any(|(h, f)| program.is_view_field(h) && layout::root_of(program, f.layout) == r)
    });
    Ok((!all).then_some(roots))
}

fn has_tape(steps: &[Step]) -> bool {
    steps.iter().any(|s| match s {
        Step::Tape { .. } | Step::Optimize { .. } => true,
        Step::Repeat { body, .. } => has_tape(body),
        Step::Launch(_) | Step::Clear { .. } | Step::ListGen { .. } => false,
    })
}

/// The hash a bake of `roots` records: of the graph upstream of those
/// roots (see the module comment). A graph with a tape or an optimizer
/// (they write gradients and parameters outside any kernel) hashes like a
/// complete bake.
pub fn roots_upstream_hash(
    source: &GraphSource,
    program: &Program,
    roots: &BTreeSet<LayoutId>,
) -> Result<String, String> {
    let doc = &source.doc;
    if has_tape(&program.schedule.on_start) || has_tape(&program.schedule.on_frame) {
        return Ok(upstream_hash(doc));
    }
    let (kernels, state) = access::upstream(program, roots);
    // Every node of a fused kernel is upstream (the kernels fusion joined
    // are no longer in the program: `schedule::unlaunched`).
    let kernels: BTreeSet<&str> = kernels
        .iter()
        .flat_map(|&k| {
            let k = &program.kernels[k];
            std::iter::once(k.name.as_str()).chain(k.fused.iter().map(String::as_str))
        })
        .collect();
    let state_nodes: BTreeSet<&str> = program
        .layouts
        .iter()
        .filter(|(h, _)| state.contains(&layout::root_of(program, *h)))
        .map(|(_, l)| l.node_id.as_str())
        .chain(
            program
                .fields
                .iter()
                .filter(|(_, f)| state.contains(&layout::root_of(program, f.layout)))
                .map(|(_, f)| f.name.as_str()),
        )
        .collect();
    let flat = source.flat(doc).map_err(|e| e.to_string())?;
    // Kernels not upstream are bypassed (their exec wires joined around
    // them, as the graph's own bypass does); views and the field and
    // layout nodes of other roots go.
    let mut d = flat;
    d.nodes
        .retain_mut(|n| match catalog::kind(&n.kind).map(|k| k.family) {
            Some(catalog::Family::View) => false,
            Some(catalog::Family::Kernel) => {
                n.bypass = !kernels.contains(n.id.as_str());
                true
            }
            Some(catalog::Family::Field | catalog::Family::Layout) => {
                state_nodes.contains(n.id.as_str())
            }
            _ => true,
        });
    let ids: BTreeSet<String> = d.nodes.iter().map(|n| n.id.clone()).collect();
    let node_of = |end: &str| end.split('.').next().unwrap_or(end).to_string();
    d.wires
        .retain(|w| ids.contains(&node_of(&w.from)) && ids.contains(&node_of(&w.to)));
    d.exec
        .retain(|w| ids.contains(&node_of(&w.from)) && ids.contains(&node_of(&w.to)));
    let d = source.flat(&d).map_err(|e| e.to_string())?;
    let mut names: Vec<&str> = program
        .layouts
        .iter()
        .filter(|(h, _)| roots.contains(h))
        .map(|(_, l)| l.node_id.as_str())
        .collect();
    names.sort_unstable();
    Ok(fnv(&format!(
        "{}\n{}",
        names.join(","),
        serde_json::to_string(&upstream(&d)).unwrap_or_default()
    )))
}

fn fnv(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{:016x}", h)
}

/// Bakes frames `first..=last` of `source` into `out` (replacing a cache
/// there), each frame storing `contents`; its assets resolve through the
/// source's library, as the viewport's build does. `progress` gets each frame
/// written; a `cancel` set stops after the frame being written. Returns
/// the frames written.
#[allow(clippy::too_many_arguments)]
pub fn bake(
    source: &GraphSource,
    opts: &SimOptions,
    first: i32,
    last: i32,
    contents: &Contents,
    out: &Path,
    cancel: &AtomicBool,
    progress: &dyn Fn(i32),
) -> Result<usize, String> {
    if first < 0 || last < first {
        return Err(format!(
            "frame range {}:{} is empty (the first frame must be 0 or more and not after the last)",
            first, last
        ));
    }
    let doc = &source.doc;
    let program = source.build().map_err(|e| e.to_string())?;
    let roots = baked_roots(&program, contents)?;
    let (hash, root_names) = match &roots {
        None => (upstream_hash(doc), None),
        Some(r) => {
            let mut names: Vec<String> = r
                .iter()
                .map(|&h| program.layouts[h].node_id.clone())
                .collect();
            names.sort();
            (roots_upstream_hash(source, &program, r)?, Some(names))
        }
    };
    let mut sim = Simulation::new(program, opts).map_err(|e| e.to_string())?;
    sim.start().map_err(|e| e.to_string())?;
    let graph = canonical(doc);
    if out.join(CACHE_FILE).exists() {
        std::fs::remove_dir_all(out)
            .map_err(|e| format!("cannot replace {}: {}", out.display(), e))?;
    } else if out.exists() && std::fs::read_dir(out).is_ok_and(|mut d| d.next().is_some()) {
        return Err(format!(
            "{} exists and is not a weft cache (no {}): choose another folder",
            out.display(),
            CACHE_FILE
        ));
    }
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {}", out.display(), e))?;
    let meta = json!({
        "format": FORMAT,
        "version": 1,
        "frames": [first, last],
        "backend": sim.backend_name(),
        "upstream": hash,
        "roots": root_names,
        "graph": graph,
    });
    let text = serde_json::to_string_pretty(&meta).expect("JSON values serialise");
    weft_ir::io::write_atomic(&out.join(CACHE_FILE), text.as_bytes())
        .map_err(|e| format!("cannot write {}: {}", out.join(CACHE_FILE).display(), e))?;
    let mut written = 0;
    while sim.frame <= last {
        if cancel.load(Ordering::Relaxed) {
            break;
        }
        if sim.frame >= first {
            let s = sim
                .snapshot_of(root_names.as_deref())
                .map_err(|e| e.to_string())?;
            snapshot::write(out, &s, &graph, usize::MAX).map_err(|e| e.to_string())?;
            written += 1;
            progress(sim.frame);
        }
        if sim.frame == last {
            break;
        }
        sim.step_frame().map_err(|e| e.to_string())?;
    }
    // A bake of chosen fields ends on one complete frame (the last one, or
    // where a cancel stopped it), so playing past it goes on from there
    // instead of simulating again from the start.
    if root_names.is_some() && sim.frame >= first && written > 0 {
        let s = sim.snapshot().map_err(|e| e.to_string())?;
        snapshot::write(out, &s, &graph, usize::MAX).map_err(|e| e.to_string())?;
    }
    Ok(written)
}

/// Whether a cache folder's frames may be used with a build.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheState {
    /// No cache there.
    Absent,
    /// Its frames are of this graph: complete states, or (`partial`)
    /// only some roots, for display.
    Fresh { partial: bool },
    /// Baked before an edit upstream of its fields (or it no longer fits
    /// the graph): why.
    Stale(String),
}

/// Checks the cache in `dir` against the build of `source`.
pub fn check_cache(dir: &Path, source: &GraphSource) -> CacheState {
    let doc = &source.doc;
    let Ok(text) = std::fs::read_to_string(dir.join(CACHE_FILE)) else {
        return CacheState::Absent;
    };
    let Ok(v) = serde_json::from_str::<Value>(&text) else {
        return CacheState::Stale(format!("{} is not valid JSON", CACHE_FILE));
    };
    if v["format"] != FORMAT {
        return CacheState::Absent;
    }
    let recorded = v["upstream"].as_str().unwrap_or_default();
    let Some(names) = v["roots"].as_array() else {
        return if recorded == upstream_hash(doc) {
            CacheState::Fresh { partial: false }
        } else {
            CacheState::Stale("the graph changed upstream of its state since the bake".into())
        };
    };
    // The program as `bake` hashed it: built, before the pipeline. The
    // running simulation's program is optimised (fused kernels, kernels
    // nothing launches dropped), so its upstream kernels are not the
    // same list, and its hash would differ from the bake's.
    let program = match source.build() {
        Ok(p) => p,
        Err(e) => return CacheState::Stale(e.to_string()),
    };
    let program = &program;
    let mut roots = BTreeSet::new();
    for n in names {
        let n = n.as_str().unwrap_or_default();
        match program.roots().find(|&r| program.layouts[r].node_id == n) {
            Some(r) => {
                roots.insert(r);
            }
            None => return CacheState::Stale(format!("the graph has no layout node '{}' now", n)),
        }
    }
    // The views draw from the baked roots only: a view of another field
    // would show a state from another frame.
    for view in &program.views {
        for f in view.fields() {
            let r = layout::root_of(program, program.fields[f].layout);
            if !roots.contains(&r) {
                return CacheState::Stale(format!(
                    "view '{}' shows field '{}', which the bake did not store",
                    view.node_id(),
                    program.fields[f].name
                ));
            }
        }
    }
    match roots_upstream_hash(source, program, &roots) {
        Ok(h) if h == recorded => CacheState::Fresh { partial: true },
        Ok(_) => CacheState::Stale(
            "the graph changed upstream of the baked fields since the bake".into(),
        ),
        Err(e) => CacheState::Stale(e),
    }
}

/// A bake running on a thread of its own (the window stays live).
pub struct BakeJob {
    pub first: i32,
    pub last: i32,
    pub out: PathBuf,
    /// The document revision baked (a later edit makes the result unused).
    pub revision: u64,
    cancel: Arc<AtomicBool>,
    /// The last frame written (`first - 1` before any).
    done_frame: Arc<AtomicI32>,
    result: Receiver<Result<usize, String>>,
}

impl BakeJob {
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        doc: GraphDoc,
        assets: &super::asset_menu::AssetLibraries,
        opts: SimOptions,
        first: i32,
        last: i32,
        contents: Contents,
        out: PathBuf,
        revision: u64,
        ctx: egui::Context,
    ) -> BakeJob {
        let cancel = Arc::new(AtomicBool::new(false));
        let done_frame = Arc::new(AtomicI32::new(first - 1));
        let (tx, result) = channel();
        let (c, d, o) = (cancel.clone(), done_frame.clone(), out.clone());
        // The library the viewport builds with (the editor's `assets`).
        let source = assets.source(&doc, assets.base_dir());
        let _ = super::platform::spawn("weft-bake", move || {
            let r = bake(&source, &opts, first, last, &contents, &o, &c, &|f| {
                d.store(f, Ordering::Relaxed);
                ctx.request_repaint();
            });
            let _ = tx.send(r);
            ctx.request_repaint();
        });
        BakeJob {
            first,
            last,
            out,
            revision,
            cancel,
            done_frame,
            result,
        }
    }

    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    /// Frames written so far.
    pub fn written(&self) -> i32 {
        self.done_frame.load(Ordering::Relaxed) - self.first + 1
    }

    /// The outcome, once the bake ended (frames written, or the error).
    pub fn poll(&self) -> Option<Result<usize, String>> {
        match self.result.try_recv() {
            Ok(r) => Some(r),
            Err(std::sync::mpsc::TryRecvError::Empty) => None,
            Err(_) => Some(Err("the bake stopped unexpectedly".into())),
        }
    }
}

/// Options of a bake run like the viewport's simulation (`backend`).
pub fn options(backend: Backend) -> SimOptions {
    SimOptions {
        backend,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_ir::graph::{build_program, BuildOptions};

    /// `doc` in `base` with the library a graph there sees.
    fn src(doc: &GraphDoc, base: &Path) -> GraphSource {
        GraphSource::in_folder(doc.clone(), base.to_path_buf())
    }

    /// Two roots: `a`, `b` on `da` (written by `w` and `r`, which the
    /// optimiser fuses, and by `idle`, which never runs), `c` on `dc`.
    fn doc(r_code: &str) -> GraphDoc {
        let k = |id: &str, code: &str| json!({"id": id, "kind": "kernel", "params": {"range": [8], "code": code}});
        let f = |id: &str| json!({"id": id, "kind": "field", "params": {"type": "f32", "init": 0}});
        let v = json!({
            "format": "weft-graph", "version": 1,
            "nodes": [
                {"id": "da", "kind": "dense", "params": {"shape": [8]}},
                {"id": "dc", "kind": "dense", "params": {"shape": [8]}},
                f("a"), f("b"), f("c"),
                {"id": "frame", "kind": "on_frame"},
                k("w", "fn kernel(i: i32) { a[i] = a[i] + 1.0; }"),
                k("r", r_code),
                k("idle", "fn kernel(i: i32) { b[i] = 7.0; }"),
                k("other", "fn kernel(i: i32) { c[i] = c[i] + 1.0; }")
            ],
            "wires": [
                {"from": "da.cells", "to": "a.layout"}, {"from": "da.cells", "to": "b.layout"},
                {"from": "dc.cells", "to": "c.layout"},
                {"from": "a.field", "to": "w.a"}, {"from": "a.field", "to": "r.a"},
                {"from": "b.field", "to": "r.b"}, {"from": "b.field", "to": "idle.b"},
                {"from": "c.field", "to": "other.c"}
            ],
            "exec": [
                {"from": "frame.then", "to": "w"}, {"from": "w.then", "to": "r"},
                {"from": "r.then", "to": "other"}
            ]
        });
        GraphDoc::parse(&v.to_string()).unwrap()
    }

    /// A partial bake of a graph the optimiser fuses stays fresh for the
    /// build it was baked from, and goes stale when the second fused node
    /// (upstream of the baked field) changes, not when a node off its
    /// path does.
    #[test]
    fn a_partial_bake_of_a_fused_graph_is_fresh_until_its_upstream_changes() {
        let dir = std::env::temp_dir().join(format!("weft-bake-fused-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let base = std::env::temp_dir();
        let d = doc("fn kernel(i: i32) { b[i] = a[i] * 2.0; }");
        let opts = SimOptions {
            backend: Backend::Vm,
            threads: Some(1),
            ..Default::default()
        };
        let contents = Contents::parse("b").unwrap();
        let cancel = AtomicBool::new(false);
        bake(
            &src(&d, &base),
            &opts,
            0,
            2,
            &contents,
            &dir,
            &cancel,
            &|_| {},
        )
        .unwrap();
        // The running build fuses w and r and drops idle.
        let mut sim = Simulation::new(
            build_program(
                &d,
                &BuildOptions {
                    base_dir: base.clone(),
                },
            )
            .unwrap(),
            &opts,
        )
        .unwrap();
        sim.start().unwrap();
        assert!(sim
            .program
            .kernels
            .iter()
            .any(|(_, k)| k.label().starts_with("w+r")));
        assert!(!sim.program.has_kernel_node("idle"));
        assert_eq!(
            check_cache(&dir, &src(&d, &base)),
            CacheState::Fresh { partial: true }
        );
        let mut off_path = d.clone();
        off_path
            .nodes
            .iter_mut()
            .find(|n| n.id == "other")
            .unwrap()
            .params
            .insert(
                "code".into(),
                json!("fn kernel(i: i32) { c[i] = c[i] + 2.0; }"),
            );
        assert_eq!(
            check_cache(&dir, &src(&off_path, &base)),
            CacheState::Fresh { partial: true }
        );
        let upstream = doc("fn kernel(i: i32) { b[i] = a[i] * 3.0; }");
        assert!(matches!(
            check_cache(&dir, &src(&upstream, &base)),
            CacheState::Stale(_)
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A complete bake follows the one document diff: moving a node, a
    /// comment, the description or a view's setting leave it fresh; a
    /// scalar's value makes it stale.
    #[test]
    fn a_bake_is_stale_exactly_when_the_document_diff_says_the_state_changes() {
        let dir = std::env::temp_dir().join(format!("weft-bake-diff-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let base = std::env::temp_dir();
        let mut d = doc("fn kernel(i: i32) { b[i] = a[i] * s; }");
        d.nodes
            .iter_mut()
            .find(|n| n.id == "r")
            .unwrap()
            .params
            .insert("scalars".into(), json!({"s": 2.0}));
        let opts = SimOptions {
            backend: Backend::Vm,
            threads: Some(1),
            ..Default::default()
        };
        let cancel = AtomicBool::new(false);
        bake(
            &src(&d, &base),
            &opts,
            0,
            1,
            &Contents::Everything,
            &dir,
            &cancel,
            &|_| {},
        )
        .unwrap();
        let fresh = CacheState::Fresh { partial: false };
        assert_eq!(check_cache(&dir, &src(&d, &base)), fresh);
        let mut e = d.clone();
        e.nodes[0].pos = [300.0, 20.0];
        e.description = "edited".into();
        e.frames.push(weft_ir::graph::FrameDoc {
            id: "note".into(),
            title: "a comment".into(),
            text: "why".into(),
            rect: [0.0, 0.0, 40.0, 40.0],
            color: weft_ir::graph::document::default_frame_color(),
        });
        assert_eq!(diff::classify(&d, &e).effect(), diff::Effect::Nothing);
        assert_eq!(check_cache(&dir, &src(&e, &base)), fresh);
        let mut s = d.clone();
        s.nodes.iter_mut().find(|n| n.id == "r").unwrap().params["scalars"]["s"] = json!(3.0);
        assert_eq!(diff::classify(&d, &s).effect(), diff::Effect::Scalars);
        assert!(matches!(
            check_cache(&dir, &src(&s, &base)),
            CacheState::Stale(_)
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
