//! The field spreadsheet (Houdini's geometry spreadsheet, Blender's
//! spreadsheet editor): one field of the running simulation as rows of
//! index, block and values, with per-column statistics, sorting, a filter
//! and pages of `PAGE_ROWS` rows.
//!
//! Reading: while the panel is open, the field's root buffer is read once
//! for each simulation frame it shows (`Simulation::read_root`, one copy of
//! the words), at most once per displayed frame and never while the previous
//! table is still being built. The rows, statistics, filter and sort are
//! made from that copy on a worker thread by `memory::for_each_stored_element`
//! (on sparse trees only the active blocks, never the whole domain), so the
//! simulation never waits for them.

use std::sync::mpsc::{channel, Receiver};
use weft_ir::ir::layout::{root_of, AddressPlan};
use weft_ir::ir::{Program, Storage};
use weft_ir::types::{Scalar, Type};
use weft_runtime::memory::for_each_stored_element;
use weft_runtime::Simulation;

/// Rows per page.
pub const PAGE_ROWS: usize = 200;
/// Rows kept for sorting and filtering; the statistics cover every stored
/// element, the list only the first `ROW_LIMIT` of them.
pub const ROW_LIMIT: usize = 1 << 22;

/// A column of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Column {
    Index,
    Block,
    /// A component's value.
    Value(usize),
    /// A quantized component's stored code.
    Code(usize),
}

/// What a table was made from: a new one is needed when any of it changes.
#[derive(Clone, Debug, PartialEq)]
pub struct Key {
    pub field: String,
    /// `Viewport::generation`: a new simulation or a reset.
    pub generation: u64,
    pub frame: i32,
    pub sort: Option<(Column, bool)>,
    pub filter: String,
}

/// One column's statistics over every stored element.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    pub nans: u64,
}

/// A field's rows for one frame.
pub struct Table {
    pub key: Key,
    pub ty: Type,
    pub dims: usize,
    /// Values per row (components).
    pub comps: usize,
    /// Codes per row (0 for word storage).
    pub ncodes: usize,
    /// The storage as the graph names it ("f32", "ufloat5m11"), and its bits per element.
    pub storage: String,
    pub sparse: bool,
    /// "block", or "list" when the last sparse level is `dynamic`.
    pub block_label: &'static str,
    /// Stored elements (every element of a dense field; active ones of a sparse one).
    pub total: u64,
    /// Per component.
    pub stats: Vec<Stats>,
    index: Vec<u32>,
    blocks: Vec<u64>,
    /// Component bit patterns (a 64-bit component's two words joined).
    values: Vec<u64>,
    codes: Vec<u32>,
    /// Rows that pass the filter, in display order.
    pub order: Vec<u32>,
}

/// One row as shown.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub index: Vec<u32>,
    pub block: Option<u64>,
    pub values: Vec<u64>,
    pub codes: Vec<u32>,
}

impl Table {
    /// Rows listed (at most `ROW_LIMIT`).
    pub fn listed(&self) -> usize {
        self.values.len() / self.comps.max(1)
    }

    /// The `k`-th row in display order (after filter and sort).
    pub fn row(&self, k: usize) -> Row {
        let r = self.order[k] as usize;
        Row {
            index: self.index[r * self.dims..(r + 1) * self.dims].to_vec(),
            block: self.sparse.then(|| self.blocks[r]),
            values: self.values[r * self.comps..(r + 1) * self.comps].to_vec(),
            codes: self.codes[r * self.ncodes..(r + 1) * self.ncodes].to_vec(),
        }
    }

    fn number(&self, r: usize, c: Column) -> f64 {
        match c {
            Column::Index => 0.0,
            Column::Block => self.blocks.get(r).copied().unwrap_or(0) as f64,
            Column::Value(c) => as_f64(self.ty, self.values[r * self.comps + c]),
            Column::Code(c) => self.codes[r * self.ncodes + c] as f64,
        }
    }
}

/// A component's bits (one word, or a 64-bit component's two) of type
/// `ty` as a number.
pub fn as_f64(ty: Type, w: u64) -> f64 {
    match ty.scalar() {
        Some(Scalar::I32) => w as u32 as i32 as f64,
        Some(Scalar::U32) => w as u32 as f64,
        Some(Scalar::I64) => w as i64 as f64,
        Some(Scalar::U64) => w as f64,
        Some(Scalar::F64) => f64::from_bits(w),
        _ => f32::from_bits(w as u32) as f64,
    }
}

/// A component of type `ty` as the spreadsheet shows it (floats: the
/// shortest text that reads back as the same value).
pub fn format_value(ty: Type, w: u64) -> String {
    match ty.scalar() {
        Some(Scalar::I32) => (w as u32 as i32).to_string(),
        Some(Scalar::U32) => (w as u32).to_string(),
        Some(Scalar::I64) => (w as i64).to_string(),
        Some(Scalar::U64) => w.to_string(),
        Some(Scalar::F64) => f64::from_bits(w).to_string(),
        _ => f32::from_bits(w as u32).to_string(),
    }
}

/// A statistic (min, max, mean) as shown.
pub fn format_stat(v: f64) -> String {
    if v == 0.0 || (1e-3..1e6).contains(&v.abs()) {
        format!("{:.6}", v)
    } else if v.is_finite() {
        format!("{:.4e}", v)
    } else {
        v.to_string()
    }
}

/// An index as shown: `7` or `(3, 5)`.
pub fn format_index(index: &[u32]) -> String {
    match index {
        [i] => i.to_string(),
        _ => format!(
            "({})",
            index
                .iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The column names of a field's components: `x`, `x.0` … for vectors,
/// `x.r0c1` for matrices.
pub fn component_names(ty: Type) -> Vec<String> {
    match ty {
        Type::Vector(_, n) => (0..n).map(|c| format!(".{}", c)).collect(),
        Type::Matrix(n) => (0..n * n)
            .map(|k| format!(".r{}c{}", k % n, k / n))
            .collect(),
        _ => vec![String::new()],
    }
}

/// Every field the spreadsheet offers: the program's fields (gradients
/// `x.grad` included) less the views' own image and helper fields.
pub fn field_names(p: &Program) -> Vec<String> {
    p.fields
        .iter()
        .filter(|(h, _)| {
            !p.view_kernels
                .iter()
                .any(|v| v.image == *h || v.scratch.contains(h))
        })
        .map(|(_, f)| f.name.clone())
        .collect()
}

/// Everything the worker needs, copied out of the simulation.
struct Job {
    key: Key,
    plan: AddressPlan,
    shape: Vec<u32>,
    ty: Type,
    storage: String,
    root: Vec<u32>,
}

/// Reads `key.field`'s root once and describes the job (`None`: no such field).
fn job(sim: &Simulation, key: Key) -> Result<Job, String> {
    let p = &sim.program;
    let f = p
        .field_by_name(&key.field)
        .ok_or_else(|| format!("no field '{}' in the running simulation", key.field))?;
    let field = &p.fields[f];
    let root = sim
        .read_root(root_of(p, field.layout))
        .map_err(|e| e.to_string())?;
    let storage = match field.storage {
        Storage::Word => field.ty.to_string(),
        Storage::Quant(q) => q.name(),
        Storage::Shared(s) => s.name(),
    };
    Ok(Job {
        plan: AddressPlan::new(p, f),
        shape: field.shape.clone(),
        ty: field.ty,
        storage,
        root,
        key,
    })
}

/// Builds the table: every stored element's statistics, the first
/// `ROW_LIMIT` rows, then the filter and the sort.
fn build(job: Job) -> Table {
    // Stored words per element are components, except that a 64-bit
    // component is two (joined below).
    let comps = job.plan.components / job.ty.scalar().map_or(1, Scalar::words);
    let ncodes = match job.plan.storage {
        Storage::Word => 0,
        Storage::Quant(_) => comps,
        Storage::Shared(_) => 1,
    };
    let dims = job.shape.len();
    let sparse = job.plan.is_sparse();
    let depth = job.plan.sparse_depth();
    let block_label = match depth.checked_sub(1).map(|k| job.plan.levels[k].kind) {
        Some(weft_ir::ir::LayoutKind::Dynamic) => "list",
        _ => "block",
    };
    let mut t = Table {
        key: job.key,
        ty: job.ty,
        dims,
        comps,
        ncodes,
        storage: job.storage,
        sparse,
        block_label,
        total: 0,
        stats: vec![Stats::default(); comps],
        index: vec![],
        blocks: vec![],
        values: vec![],
        codes: vec![],
        order: vec![],
    };
    let mut sums = vec![(0.0f64, 0u64, f64::INFINITY, f64::NEG_INFINITY); comps];
    let ty = job.ty;
    for_each_stored_element(&job.plan, &job.shape, &job.root, |e| {
        t.total += 1;
        let vals: Vec<u64> = if ty.is_wide() {
            e.values
                .chunks(2)
                .map(|p| p[0] as u64 | (p[1] as u64) << 32)
                .collect()
        } else {
            e.values.iter().map(|&w| w as u64).collect()
        };
        for (c, &w) in vals.iter().enumerate() {
            let v = as_f64(ty, w);
            let s = &mut sums[c];
            if v.is_nan() {
                t.stats[c].nans += 1;
            } else {
                s.0 += v;
                s.1 += 1;
                s.2 = s.2.min(v);
                s.3 = s.3.max(v);
            }
        }
        if (t.total as usize) <= ROW_LIMIT {
            t.index.extend_from_slice(e.index);
            if let Some(b) = e.block {
                t.blocks.push(b);
            }
            t.values.extend_from_slice(&vals);
            t.codes.extend_from_slice(e.codes);
        }
    });
    for (s, (sum, n, lo, hi)) in t.stats.iter_mut().zip(sums) {
        if n > 0 {
            s.min = lo;
            s.max = hi;
            s.mean = sum / n as f64;
        } else {
            (s.min, s.max, s.mean) = (f64::NAN, f64::NAN, f64::NAN);
        }
    }
    let rows = t.listed();
    let filter = Filter::parse(&t.key.filter);
    let range_column = match t.key.sort {
        Some((c @ (Column::Value(_) | Column::Code(_)), _)) => c,
        _ => Column::Value(0),
    };
    t.order = (0..rows as u32)
        .filter(|&r| filter.keeps(&t, r as usize, range_column))
        .collect();
    if let Some((col, ascending)) = t.key.sort {
        if col != Column::Index {
            let mut order = std::mem::take(&mut t.order);
            order.sort_by(|&a, &b| {
                let o = t
                    .number(a as usize, col)
                    .total_cmp(&t.number(b as usize, col));
                if ascending {
                    o
                } else {
                    o.reverse()
                }
            });
            t.order = order;
        } else {
            // Dense rows come in row-major order already.
            if sparse {
                let (d, idx) = (dims, &t.index);
                t.order
                    .sort_by(|&a, &b| idx[a as usize * d..][..d].cmp(&idx[b as usize * d..][..d]));
            }
            if !ascending {
                t.order.reverse();
            }
        }
    }
    t
}

/// The filter text: `lo..hi` keeps rows whose value (the sorted value
/// column, else the first component) lies in [lo, hi]; other text keeps rows
/// whose index, block or a value contains it.
enum Filter {
    All,
    Range(f64, f64),
    Text(String),
}

impl Filter {
    fn parse(s: &str) -> Filter {
        let s = s.trim();
        if s.is_empty() {
            return Filter::All;
        }
        if let Some((a, b)) = s.split_once("..") {
            let lo = if a.trim().is_empty() {
                Ok(f64::NEG_INFINITY)
            } else {
                a.trim().parse()
            };
            let hi = if b.trim().is_empty() {
                Ok(f64::INFINITY)
            } else {
                b.trim().parse()
            };
            if let (Ok(lo), Ok(hi)) = (lo, hi) {
                return Filter::Range(lo, hi);
            }
        }
        Filter::Text(s.to_lowercase())
    }

    fn keeps(&self, t: &Table, r: usize, column: Column) -> bool {
        match self {
            Filter::All => true,
            Filter::Range(lo, hi) => {
                let v = t.number(r, column);
                v >= *lo && v <= *hi
            }
            Filter::Text(s) => {
                let row_index = &t.index[r * t.dims..(r + 1) * t.dims];
                format_index(row_index).contains(s.as_str())
                    || t.blocks.get(r).is_some_and(|b| b.to_string().contains(s))
                    || t.values[r * t.comps..(r + 1) * t.comps]
                        .iter()
                        .any(|&w| format_value(t.ty, w).to_lowercase().contains(s.as_str()))
            }
        }
    }
}

/// The spreadsheet panel's state.
#[derive(Default)]
pub struct Spreadsheet {
    pub open: bool,
    /// The field shown (a name of the running program).
    pub field: Option<String>,
    pub sort: Option<(Column, bool)>,
    pub filter: String,
    /// First row shown (a multiple of `PAGE_ROWS`).
    pub first: usize,
    table: Option<Table>,
    pending: Option<(Key, Receiver<Table>)>,
    pub error: Option<String>,
    /// Root reads so far (one per table built).
    pub reads: u64,
    /// "View in viewport" was clicked for this field.
    pub view_request: Option<String>,
}

impl Spreadsheet {
    /// The last finished table.
    pub fn table(&self) -> Option<&Table> {
        self.table.as_ref()
    }

    /// Whether the shown table is the one `generation`/`frame` asks for
    /// (nothing is being rebuilt).
    pub fn is_current(&self, generation: u64, frame: i32) -> bool {
        self.pending.is_none()
            && self.table().is_some_and(|t| {
                t.key.generation == generation
                    && t.key.frame == frame
                    && Some(&t.key.field) == self.field.as_ref()
                    && t.key.sort == self.sort
                    && t.key.filter == self.filter
            })
    }

    /// Takes a finished table and starts the next one when the field,
    /// frame, sort or filter changed: at most one root read per call, none
    /// while the panel is closed or a table is still being built.
    pub fn poll(&mut self, sim: Option<&Simulation>, generation: u64, ctx: &egui::Context) {
        if let Some((_, rx)) = &self.pending {
            match rx.try_recv() {
                Ok(t) => {
                    self.table = Some(t);
                    self.pending = None;
                }
                Err(std::sync::mpsc::TryRecvError::Empty) => {
                    ctx.request_repaint();
                    return;
                }
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    self.error = Some("the spreadsheet's reader stopped unexpectedly".into());
                    self.pending = None;
                }
            }
        }
        let Some(sim) = sim.filter(|_| self.open) else {
            return;
        };
        let names = field_names(&sim.program);
        if self.field.as_ref().is_none_or(|f| !names.contains(f)) {
            self.field = names.first().cloned();
        }
        let Some(field) = self.field.clone() else {
            self.table = None;
            return;
        };
        if self.is_current(generation, sim.frame) {
            return;
        }
        let key = Key {
            field,
            generation,
            frame: sim.frame,
            sort: self.sort,
            filter: self.filter.clone(),
        };
        match job(sim, key.clone()) {
            Ok(job) => {
                self.reads += 1;
                self.error = None;
                let (tx, rx) = channel();
                let _ = super::platform::spawn("weft-sheet", move || {
                    let _ = tx.send(build(job));
                });
                self.pending = Some((key, rx));
                ctx.request_repaint();
            }
            Err(e) => self.error = Some(e),
        }
    }

    /// Shows `field` (the viewer flag's fallback, a field node's "Open in
    /// spreadsheet"), opening the panel.
    pub fn show_field(&mut self, field: &str) {
        self.open = true;
        if self.field.as_deref() != Some(field) {
            self.field = Some(field.to_string());
            self.first = 0;
        }
    }

    /// The panel's contents.
    /// The panel; `program` is the running simulation's, which may be
    /// away running a frame (the table is the last one read).
    pub fn ui(&mut self, ui: &mut egui::Ui, program: Option<&Program>) {
        let Some(program) = program else {
            ui.weak("no running simulation");
            return;
        };
        let names = field_names(program);
        ui.horizontal(|ui| {
            ui.label(egui::RichText::new("Spreadsheet").strong());
            let shown = self.field.clone().unwrap_or_default();
            egui::ComboBox::from_id_salt("sheet_field")
                .selected_text(&shown)
                .show_ui(ui, |ui| {
                    for n in &names {
                        if ui
                            .selectable_label(Some(n) == self.field.as_ref(), n)
                            .clicked()
                        {
                            self.field = Some(n.clone());
                            self.first = 0;
                        }
                    }
                });
            ui.label("filter");
            let before = self.filter.clone();
            ui.add(
                egui::TextEdit::singleline(&mut self.filter)
                    .desired_width(140.0)
                    .hint_text("text or lo..hi"),
            )
            .on_hover_text(
                "lo..hi keeps rows whose value (the sorted value column, else the first) \
                 is in the range; other text keeps rows whose index, block or a value contains it",
            );
            if self.filter != before {
                self.first = 0;
            }
            if let Some(t) = &self.table {
                ui.label(format!("frame {}", t.key.frame));
            }
            if self.pending.is_some() {
                ui.spinner();
            }
            if let Some(f) = &self.field {
                if ui
                    .button("View in viewport")
                    .on_hover_text(
                        "the viewer flag on this field (gradients too): image, particles or histogram",
                    )
                    .clicked()
                {
                    self.view_request = Some(f.clone());
                }
            }
        });
        if let Some(e) = &self.error {
            ui.colored_label(egui::Color32::from_rgb(255, 120, 120), e);
        }
        let Some(t) = &self.table else {
            return;
        };
        ui.label(format!(
            "{}: {}{}, shape {:?}{} — {} stored element{}{}",
            t.key.field,
            t.storage,
            if t.storage == t.ty.to_string() {
                String::new()
            } else {
                format!(" (decoded to {})", t.ty)
            },
            shape_of(program, &t.key.field),
            if t.sparse { ", sparse" } else { "" },
            t.total,
            if t.total == 1 { "" } else { "s" },
            if t.sparse {
                " (active blocks only)"
            } else {
                ""
            },
        ));
        let comps = component_names(t.ty);
        egui::Grid::new("sheet_stats").striped(true).show(ui, |ui| {
            ui.strong("");
            for h in ["min", "max", "mean", "NaN"] {
                ui.strong(h);
            }
            ui.end_row();
            for (c, s) in t.stats.iter().enumerate() {
                ui.label(format!("{}{}", t.key.field, comps[c]));
                ui.label(format_stat(s.min));
                ui.label(format_stat(s.max));
                ui.label(format_stat(s.mean));
                ui.label(s.nans.to_string());
                ui.end_row();
            }
        });
        let shown = t.order.len();
        let mut first = self
            .first
            .min(shown.saturating_sub(1) / PAGE_ROWS * PAGE_ROWS);
        ui.horizontal(|ui| {
            if ui
                .add_enabled(first > 0, egui::Button::new("◀ Prev"))
                .clicked()
            {
                first = first.saturating_sub(PAGE_ROWS);
            }
            if ui
                .add_enabled(first + PAGE_ROWS < shown, egui::Button::new("Next ▶"))
                .clicked()
            {
                first += PAGE_ROWS;
            }
            let last = (first + PAGE_ROWS).min(shown);
            ui.label(format!(
                "rows {}–{} of {}{}",
                if shown == 0 { 0 } else { first + 1 },
                last,
                shown,
                if shown < t.listed() {
                    format!(" (filtered from {})", t.listed())
                } else {
                    String::new()
                }
            ));
            if (t.listed() as u64) < t.total {
                ui.weak(format!(
                    "listing the first {} of {} elements; statistics cover all",
                    t.listed(),
                    t.total
                ));
            }
        });
        self.first = first;
        let mut columns = vec![(Column::Index, "index".to_string())];
        if t.sparse {
            columns.push((Column::Block, t.block_label.to_string()));
        }
        for (c, n) in comps.iter().enumerate() {
            columns.push((Column::Value(c), format!("{}{}", t.key.field, n)));
        }
        for (c, n) in comps.iter().take(t.ncodes).enumerate() {
            let n = if t.ncodes == 1 { "" } else { n.as_str() };
            columns.push((Column::Code(c), format!("bits{}", n)));
        }
        let mut sort = self.sort;
        egui::ScrollArea::both()
            .auto_shrink([false, false])
            .show(ui, |ui| {
                egui::Grid::new("sheet_rows")
                    .striped(true)
                    .min_col_width(60.0)
                    .show(ui, |ui| {
                        for (col, name) in &columns {
                            let arrow = match sort {
                                Some((c, true)) if c == *col => " ▲",
                                Some((c, false)) if c == *col => " ▼",
                                _ => "",
                            };
                            let b = ui
                                .button(egui::RichText::new(format!("{}{}", name, arrow)).strong())
                                .on_hover_text("sort by this column (again: reverse)");
                            if b.clicked() {
                                sort = match sort {
                                    Some((c, true)) if c == *col => Some((c, false)),
                                    _ => Some((*col, true)),
                                };
                            }
                        }
                        ui.end_row();
                        for k in first..(first + PAGE_ROWS).min(shown) {
                            let row = t.row(k);
                            ui.label(format_index(&row.index));
                            if let Some(b) = row.block {
                                ui.label(b.to_string());
                            }
                            for &w in &row.values {
                                ui.label(format_value(t.ty, w));
                            }
                            for &c in &row.codes {
                                ui.monospace(format!("{:#x}", c));
                            }
                            ui.end_row();
                        }
                    });
            });
        if sort != self.sort {
            self.sort = sort;
            self.first = 0;
        }
    }
}

fn shape_of(program: &Program, field: &str) -> Vec<u32> {
    program
        .field_by_name(field)
        .map(|f| program.fields[f].shape.clone())
        .unwrap_or_default()
}
