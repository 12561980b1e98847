//! Baking: a frame range of a graph's simulation written to a cache folder
//! beside the graph (`GRAPH_NAME.cache/`), which the app reopens with the
//! graph and plays back without simulating. The app's Bake button and
//! `weft bake` run this same code, so they write the same files.
//!
//! A cache folder holds `cache.json` (format, the frame range asked for,
//! the backend, and the graph document baked, editor positions left out)
//! and one `frame_NNNNNN/` folder per frame: the frame's complete state
//! written by the runtime's atomic snapshot writer (complete or absent;
//! a cancelled bake keeps the frames completed so far). `cache.json` also
//! records a hash of the graph upstream of the cached state (`upstream`:
//! all but editor positions and view settings). The app takes the frames
//! only while the graph it runs has that hash: after an edit upstream the
//! cache is stale, shown so on the timeline and never mixed in; an edit
//! downstream (a view's colour map) leaves it in use.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;
use weft_ir::graph::{build_program, catalog, BuildOptions, GraphDoc};
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

/// The part of `doc` the baked state depends on: everything but editor
/// positions and the settings of view nodes (colour maps, ranges,
/// cameras), which change only how the state is drawn.
pub fn upstream(doc: &GraphDoc) -> Value {
    let mut d = doc.clone();
    for n in &mut d.nodes {
        if catalog::kind(&n.kind).is_some_and(|k| k.family == catalog::Family::View) {
            n.params.clear();
        }
    }
    canonical(&d)
}

/// A stable hash (FNV-1a, 64 bits, hex) of `upstream(doc)`: what a cache
/// records to know it is stale.
pub fn upstream_hash(doc: &GraphDoc) -> String {
    let text = serde_json::to_string(&upstream(doc)).unwrap_or_default();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{:016x}", h)
}

/// Bakes frames `first..=last` of `doc` into `out` (replacing a cache
/// there). `progress` gets each frame written; a `cancel` set stops after
/// the frame being written. Returns the frames written.
#[allow(clippy::too_many_arguments)]
pub fn bake(
    doc: &GraphDoc,
    base_dir: &Path,
    opts: &SimOptions,
    first: i32,
    last: i32,
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
    let program = build_program(
        doc,
        &BuildOptions {
            base_dir: base_dir.to_path_buf(),
        },
    )
    .map_err(|e| e.to_string())?;
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
        "upstream": upstream_hash(doc),
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
            let s = sim.snapshot().map_err(|e| e.to_string())?;
            snapshot::write(out, &s, &graph, usize::MAX).map_err(|e| e.to_string())?;
            written += 1;
            progress(sim.frame);
        }
        if sim.frame == last {
            break;
        }
        sim.step_frame().map_err(|e| e.to_string())?;
    }
    Ok(written)
}

/// The upstream hash a cache folder records, if it is a cache.
pub fn baked_upstream(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join(CACHE_FILE)).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    (v["format"] == FORMAT)
        .then(|| v["upstream"].as_str().map(str::to_string))
        .flatten()
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
        base_dir: PathBuf,
        opts: SimOptions,
        first: i32,
        last: i32,
        out: PathBuf,
        revision: u64,
        ctx: egui::Context,
    ) -> BakeJob {
        let cancel = Arc::new(AtomicBool::new(false));
        let done_frame = Arc::new(AtomicI32::new(first - 1));
        let (tx, result) = channel();
        let (c, d, o) = (cancel.clone(), done_frame.clone(), out.clone());
        std::thread::spawn(move || {
            let r = bake(&doc, &base_dir, &opts, first, last, &o, &c, &|f| {
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
