//! The inspector's storage section for a quantized field: its storage
//! type, the bits one element takes (`Field::element_bits`, as the layout
//! packs it), the bytes that saves against plain f32 words over the
//! field's elements, and on demand its error against an f32 twin run
//! (`Twins`: the same graph in f32 words run to the same frame).

use serde_json::json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;
use weft_ir::graph::GraphDoc;
use weft_ir::ir::{Program, Storage};
use weft_runtime::{SimOptions, Simulation};

/// A quantized field's storage numbers.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantInfo {
    /// The storage as the graph names it (`ufloat5m11`, `int5`, …).
    pub storage: String,
    /// Bits of one element as stored (all components).
    pub element_bits: u64,
    /// Bits of one element as 32-bit words.
    pub word_bits: u64,
    /// Elements of the field.
    pub elements: u64,
}

impl QuantInfo {
    pub fn bytes(&self) -> u64 {
        (self.elements * self.element_bits).div_ceil(8)
    }
    pub fn word_bytes(&self) -> u64 {
        self.elements * self.word_bits / 8
    }
    pub fn saved_bytes(&self) -> u64 {
        self.word_bytes().saturating_sub(self.bytes())
    }
}

/// The numbers for field `name` of `p`; `None` when it is not quantized.
pub fn quant_info(p: &Program, name: &str) -> Option<QuantInfo> {
    let f = &p.fields[p.field_by_name(name)?];
    if f.storage == Storage::Word {
        return None;
    }
    Some(QuantInfo {
        storage: f.storage.name(),
        element_bits: f.element_bits(),
        word_bits: 32 * f.ty.components() as u64,
        elements: f.cells(),
    })
}

/// The inspector section (nothing for a field stored in words).
pub fn ui_for(ui: &mut egui::Ui, p: &Program, name: &str) {
    let Some(q) = quant_info(p, name) else {
        return;
    };
    let bytes = super::memory_readout::bytes;
    ui.separator();
    ui.strong("Storage");
    ui.label(format!(
        "{}: {} bits per element (f32 words: {})",
        q.storage, q.element_bits, q.word_bits
    ));
    ui.label(format!(
        "{} for {} elements instead of {}: {} saved ({:.1}x smaller)",
        bytes(q.bytes()),
        q.elements,
        bytes(q.word_bytes()),
        bytes(q.saved_bytes()),
        q.word_bits as f64 / q.element_bits.max(1) as f64
    ));
}

/// The f32 twin of a document: every field stored in plain words (its
/// `storage` and the params that go with it removed), and the packing
/// layouts that need quantized fields replaced by `dense` nodes of the
/// same shape (a `bit_struct` becomes a `dense` of 1s, a `bit_array` a
/// `dense` of its own shape), so every field keeps its shape, its values'
/// type and its place in the schedule. The same seed gives the same
/// random numbers: what differs is only what quantization rounds away.
pub fn twin_doc(doc: &GraphDoc) -> Result<GraphDoc, String> {
    let mut d = doc.clone();
    let axes_of = |id: &str| -> Option<usize> {
        let to = format!("{}.parent", id);
        let w = doc.wires.iter().find(|w| w.to == to)?;
        let parent = doc.node(weft_ir::graph::document::split_endpoint(&w.from).0)?;
        parent.params.get("shape")?.as_array().map(|a| a.len())
    };
    for n in &mut d.nodes {
        match n.kind.as_str() {
            "field" => {
                for k in ["storage", "shared_exponent", "rounding", "overflow"] {
                    n.params.remove(k);
                }
            }
            "bit_struct" => {
                let axes = axes_of(&n.id).ok_or_else(|| {
                    format!("node '{}': its parent has no shape, so no f32 twin", n.id)
                })?;
                n.kind = "dense".into();
                n.params.insert("shape".into(), json!(vec![1; axes]));
            }
            "bit_array" => {
                let words = format!("{}.words", n.id);
                if doc.wires.iter().any(|w| w.from == words) {
                    return Err(format!(
                        "node '{}': kernels read its packed words (`words`), which a twin in f32 words does not have",
                        n.id
                    ));
                }
                n.kind = "dense".into();
            }
            _ => {}
        }
    }
    Ok(d)
}

/// A quantized field against its f32 twin at one frame.
#[derive(Clone, Debug, PartialEq)]
pub struct TwinError {
    pub field: String,
    pub frame: i32,
    /// The backend both ran on.
    pub backend: &'static str,
    /// Components compared (elements × components).
    pub values: usize,
    pub max_abs: f64,
    pub rms: f64,
    /// The twin's value range, to read the errors against.
    pub range: (f64, f64),
    /// Components finite in one run and not in the other.
    pub nonfinite_mismatch: usize,
}

/// Compares the quantized run's values `a` with the twin's `b` (both f32 words).
pub fn compare(field: &str, frame: i32, backend: &'static str, a: &[u32], b: &[u32]) -> TwinError {
    let (mut max_abs, mut sq, mut n, mut bad) = (0.0f64, 0.0f64, 0usize, 0usize);
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (f32::from_bits(x) as f64, f32::from_bits(y) as f64);
        if x.is_finite() != y.is_finite() {
            bad += 1;
            continue;
        }
        if !x.is_finite() {
            continue;
        }
        let e = (x - y).abs();
        max_abs = max_abs.max(e);
        sq += e * e;
        n += 1;
        lo = lo.min(y);
        hi = hi.max(y);
    }
    TwinError {
        field: field.to_string(),
        frame,
        backend,
        values: n,
        max_abs,
        rms: if n > 0 { (sq / n as f64).sqrt() } else { 0.0 },
        range: if n > 0 { (lo, hi) } else { (0.0, 0.0) },
        nonfinite_mismatch: bad,
    }
}

type TwinResult = Result<TwinError, String>;

/// The on-demand twin runs: at most one at a time, each a background
/// thread that builds the twin, runs it to the frame the running
/// simulation was at when asked, and compares the field there.
#[derive(Default)]
pub struct Twins {
    /// A field asked for, waiting for the simulation to be home.
    pub request: Option<String>,
    running: Option<(String, Receiver<TwinResult>, Arc<AtomicI32>, i32)>,
    /// The last result per field.
    pub results: HashMap<String, TwinResult>,
}

impl Twins {
    /// Starts the twin of `field` from the running simulation `sim` (at
    /// home) of document `doc`, its assets resolved from `assets` (the
    /// editor's, as the viewport's build). `opts` open the twin like the
    /// simulation.
    pub fn start(
        &mut self,
        field: &str,
        doc: &GraphDoc,
        assets: &super::asset_menu::AssetLibraries,
        sim: &Simulation,
        opts: SimOptions,
    ) {
        let frame = sim.frame;
        let Some(f) = sim.field(field) else {
            self.results.insert(
                field.into(),
                Err(format!(
                    "'{}' is not a field of the running simulation",
                    field
                )),
            );
            return;
        };
        let words = match sim.read_field(f) {
            Ok(w) => w,
            Err(e) => {
                self.results.insert(field.into(), Err(e.to_string()));
                return;
            }
        };
        let backend = sim.backend_name();
        let progress = Arc::new(AtomicI32::new(0));
        let (tx, rx) = channel();
        let (name, p2) = (field.to_string(), progress.clone());
        let doc = doc.clone();
        let assets = assets.clone();
        let _ = super::platform::spawn("weft-quant-twin", move || {
            let r = (|| -> TwinResult {
                let twin = twin_doc(&doc)?;
                // Assets resolve as the viewport's build does.
                let program = assets
                    .build(&twin, assets.base_dir())
                    .map_err(|e| format!("the f32 twin does not build: {}", e))?;
                let mut t = Simulation::new(program, &opts).map_err(|e| e.to_string())?;
                t.start().map_err(|e| e.to_string())?;
                let mut slice = None;
                while t.frame < frame {
                    let at = super::platform::Instant::now();
                    let n = t.step_frame_sliced(slice).map_err(|e| e.to_string())?;
                    // Room for the window on a GPU they share, as for the simulation.
                    slice = super::viewport::slice_for(at.elapsed().as_secs_f64() * 1e3, n);
                    p2.store(t.frame, Ordering::Relaxed);
                }
                let tf = t.field(&name).ok_or("the twin lost the field")?;
                let b = t.read_field(tf).map_err(|e| e.to_string())?;
                Ok(compare(&name, frame, backend, &words, &b))
            })();
            let _ = tx.send(r);
        });
        self.results.remove(field);
        self.running = Some((field.to_string(), rx, progress, frame));
    }

    /// Takes a finished run's result.
    pub fn poll(&mut self, ctx: &egui::Context) {
        let Some((field, rx, ..)) = &self.running else {
            return;
        };
        match rx.try_recv() {
            Ok(r) => {
                self.results.insert(field.clone(), r);
                self.running = None;
            }
            Err(std::sync::mpsc::TryRecvError::Empty) => {
                ctx.request_repaint_after(std::time::Duration::from_millis(100))
            }
            Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                self.results.insert(
                    field.clone(),
                    Err("the twin run stopped unexpectedly".into()),
                );
                self.running = None;
            }
        }
    }

    /// Whether a twin run is under way.
    pub fn busy(&self) -> bool {
        self.running.is_some()
    }

    /// The inspector's twin line and button for quantized field `name`.
    pub fn ui_for(&mut self, ui: &mut egui::Ui, p: &Program, name: &str) {
        if quant_info(p, name).is_none() {
            return;
        }
        match &self.running {
            Some((f, _, progress, frame)) if f == name => {
                ui.horizontal(|ui| {
                    ui.spinner();
                    ui.label(format!(
                        "f32 twin: frame {} of {}",
                        progress.load(Ordering::Relaxed),
                        frame
                    ));
                });
            }
            _ => {
                let b = ui
                    .add_enabled(!self.busy(), egui::Button::new("Compare with an f32 twin"))
                    .on_hover_text(
                        "runs the same graph with every field in f32 words to this frame, \
                         then compares this field",
                    );
                if b.clicked() {
                    self.request = Some(name.to_string());
                }
            }
        }
        match self.results.get(name) {
            Some(Ok(e)) => {
                ui.label(format!(
                    "vs f32 twin at frame {} ({}): max |error| {:.3e}, RMS {:.3e} over {} values (twin's range {:.4} … {:.4}){}",
                    e.frame,
                    e.backend,
                    e.max_abs,
                    e.rms,
                    e.values,
                    e.range.0,
                    e.range.1,
                    if e.nonfinite_mismatch > 0 {
                        format!("; {} values finite in one run only", e.nonfinite_mismatch)
                    } else {
                        String::new()
                    }
                ));
            }
            Some(Err(e)) => {
                ui.colored_label(egui::Color32::from_rgb(255, 110, 110), e);
            }
            None => {}
        }
    }
}
