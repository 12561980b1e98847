//! Memory and activity of the running simulation's layout trees: each
//! tree's buffer next to what dense storage of its fields would take (the
//! numbers `weft check` prints, `layout::memory_report`), and for each
//! pool (`pointer` blocks, `hash` slots) how much is in use, read live
//! (`layout::pool_usage` on the root's words), and for each `dynamic` node
//! its lists: elements in use over all lists, the longest list against a
//! list's capacity (`layout::dynamic_usage`, the lists' length words).
//!
//! Pools and lists are read at most twice a second while playing and once
//! per frame otherwise, and only when the program has one. A pool above
//! `WARN_FRACTION` of its capacity, or a list above it of a list's
//! capacity, is a warning (Problems list, node title) before it runs out.

use weft_ir::ir::layout::{dynamic_usage, memory_report, pool_usage, root_of, ListUsage};
use weft_ir::ir::{LayoutKind, Program};
use weft_runtime::Simulation;

/// A pool fuller than this (of its capacity) is warned about.
pub const WARN_FRACTION: f64 = 0.9;
/// Seconds between reads while playing.
const PLAYING_INTERVAL: f64 = 0.5;

/// One pool's use.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolUsage {
    /// The layout node.
    pub node: String,
    /// "blocks" (pointer) or "slots" (hash).
    pub unit: &'static str,
    pub in_use: u32,
    pub capacity: u32,
    /// Bytes of one block / slot.
    pub unit_bytes: u64,
}

impl PoolUsage {
    pub fn fraction(&self) -> f64 {
        self.in_use as f64 / self.capacity.max(1) as f64
    }

    /// The warning for a pool above `WARN_FRACTION`, naming the node.
    pub fn warning(&self) -> Option<String> {
        (self.fraction() > WARN_FRACTION).then(|| {
            format!(
                "{}: {} of {} {} in use ({:.0}%); raise `capacity` before it runs out",
                self.node,
                self.in_use,
                self.capacity,
                self.unit,
                self.fraction() * 100.0
            )
        })
    }
}

/// The lists of one `dynamic` node.
#[derive(Clone, Debug, PartialEq)]
pub struct ListsUsage {
    /// The layout node.
    pub node: String,
    pub usage: ListUsage,
}

impl ListsUsage {
    /// Elements in use over the capacity of all lists.
    pub fn fraction(&self) -> f64 {
        self.usage.elements as f64 / (self.usage.lists * self.usage.capacity).max(1) as f64
    }

    /// The longest list against a list's capacity.
    pub fn longest_fraction(&self) -> f64 {
        self.usage.longest as f64 / self.usage.capacity.max(1) as f64
    }

    /// The warning for a list above `WARN_FRACTION` of its capacity
    /// (an append to a full list stops the run), naming the node.
    pub fn warning(&self) -> Option<String> {
        (self.longest_fraction() > WARN_FRACTION).then(|| {
            format!(
                "{}: the longest list holds {} of {} elements ({:.0}%); raise the node's `shape` before an append to a full list stops the run",
                self.node,
                self.usage.longest,
                self.usage.capacity,
                self.longest_fraction() * 100.0
            )
        })
    }
}

/// One layout tree's buffer.
#[derive(Clone, Debug, PartialEq)]
pub struct TreeUsage {
    /// The root layout node.
    pub root: String,
    pub bytes: u64,
    /// What dense storage of the same fields would take.
    pub dense_bytes: u64,
    pub sparse: bool,
}

#[derive(Default)]
pub struct MemoryReadout {
    pub trees: Vec<TreeUsage>,
    pub pools: Vec<PoolUsage>,
    pub lists: Vec<ListsUsage>,
    /// (generation, frame, time) of the last read.
    read_at: Option<(u64, i32, f64)>,
    /// Root reads so far.
    pub reads: u64,
}

/// Every tree of `p` (static: sizes are fixed at compile time).
pub fn trees(p: &Program) -> Vec<TreeUsage> {
    p.roots()
        .map(|r| {
            let m = memory_report(p, r);
            TreeUsage {
                root: p.layouts[r].node_id.clone(),
                bytes: m.total_words * 4,
                dense_bytes: m.dense_words * 4,
                sparse: p
                    .layouts
                    .iter()
                    .any(|(l, n)| n.kind.is_sparse() && root_of(p, l) == r),
            }
        })
        .collect()
}

/// Every pool and every `dynamic` node's lists of the simulation, read
/// from its roots (one read per root).
pub fn pools_and_lists(sim: &Simulation) -> Result<(Vec<PoolUsage>, Vec<ListsUsage>), String> {
    let p = &sim.program;
    let mut out = vec![];
    let mut lists = vec![];
    let mut roots: Vec<(weft_ir::ir::LayoutId, Vec<u32>)> = vec![];
    for (l, n) in p.layouts.iter() {
        let unit = match n.kind {
            LayoutKind::Pointer { .. } => "blocks",
            LayoutKind::Hash { .. } => "slots",
            LayoutKind::Dynamic => "",
            _ => continue,
        };
        let r = root_of(p, l);
        if !roots.iter().any(|(h, _)| *h == r) {
            roots.push((r, sim.read_root(r).map_err(|e| e.to_string())?));
        }
        let words = &roots.iter().find(|(h, _)| *h == r).expect("read above").1;
        if n.kind == LayoutKind::Dynamic {
            if let Some(usage) = dynamic_usage(p, l, words) {
                lists.push(ListsUsage {
                    node: n.node_id.clone(),
                    usage,
                });
            }
            continue;
        }
        let Some((in_use, capacity, unit_words)) = pool_usage(p, l, words) else {
            continue;
        };
        out.push(PoolUsage {
            node: n.node_id.clone(),
            unit,
            in_use,
            capacity,
            unit_bytes: unit_words * 4,
        });
    }
    Ok((out, lists))
}

fn has_pools(p: &Program) -> bool {
    p.layouts.iter().any(|(_, n)| {
        matches!(
            n.kind,
            LayoutKind::Pointer { .. } | LayoutKind::Hash { .. } | LayoutKind::Dynamic
        )
    })
}

impl MemoryReadout {
    /// Reads the pools when the simulation moved on (see the module doc).
    pub fn poll(&mut self, sim: Option<&Simulation>, generation: u64, now: f64, playing: bool) {
        let Some(sim) = sim else {
            self.trees.clear();
            self.pools.clear();
            self.lists.clear();
            self.read_at = None;
            return;
        };
        if let Some((g, frame, at)) = self.read_at {
            let same = g == generation && frame == sim.frame;
            if same || (g == generation && playing && now - at < PLAYING_INTERVAL) {
                return;
            }
        }
        self.read_at = Some((generation, sim.frame, now));
        self.trees = trees(&sim.program);
        if has_pools(&sim.program) {
            self.reads += 1;
            // A failed read (a fault) is reported by the viewport.
            (self.pools, self.lists) = pools_and_lists(sim).unwrap_or_default();
        } else {
            self.pools.clear();
            self.lists.clear();
        }
    }

    /// (node, message) for every pool, and every dynamic node's longest
    /// list, above `WARN_FRACTION`.
    pub fn warnings(&self) -> Vec<(String, String)> {
        let pools = self
            .pools
            .iter()
            .filter_map(|u| u.warning().map(|w| (u.node.clone(), w)));
        let lists = self
            .lists
            .iter()
            .filter_map(|u| u.warning().map(|w| (u.node.clone(), w)));
        pools.chain(lists).collect()
    }

    /// The inspector's memory section for layout node `node` of `p`.
    pub fn ui_for(&self, ui: &mut egui::Ui, p: &Program, node: &str) {
        let Some((l, _)) = p.layouts.iter().find(|(_, n)| n.node_id == node) else {
            return;
        };
        let root = &p.layouts[root_of(p, l)].node_id;
        ui.separator();
        ui.strong("Memory");
        if let Some(t) = self.trees.iter().find(|t| &t.root == root) {
            let mut line = format!("layout tree '{}': {}", t.root, bytes(t.bytes));
            if t.sparse {
                line += &format!(
                    ", dense equivalent {} ({:.1}x)",
                    bytes(t.dense_bytes),
                    t.dense_bytes as f64 / t.bytes.max(1) as f64
                );
            }
            ui.label(line);
        }
        if let Some(u) = self.pools.iter().find(|u| u.node == node) {
            ui.label(format!(
                "{} {} of {} in use ({:.1}%)",
                u.in_use,
                u.unit,
                u.capacity,
                u.fraction() * 100.0
            ));
            ui.label(format!(
                "{} of {} pool",
                bytes(u.in_use as u64 * u.unit_bytes),
                bytes(u.capacity as u64 * u.unit_bytes)
            ));
            ui.add(egui::ProgressBar::new(u.fraction() as f32));
            if let Some(w) = u.warning() {
                ui.colored_label(egui::Color32::from_rgb(240, 200, 90), w);
            }
        }
        if let Some(u) = self.lists.iter().find(|u| u.node == node) {
            let t = &u.usage;
            ui.label(format!(
                "{} of {} elements in use over {} lists ({:.1}%)",
                t.elements,
                t.lists * t.capacity,
                t.lists,
                u.fraction() * 100.0
            ));
            ui.add(egui::ProgressBar::new(u.fraction() as f32));
            ui.label(format!(
                "longest list: {} of {} ({:.1}%)",
                t.longest,
                t.capacity,
                u.longest_fraction() * 100.0
            ));
            ui.add(egui::ProgressBar::new(u.longest_fraction() as f32));
            if let Some(w) = u.warning() {
                ui.colored_label(egui::Color32::from_rgb(240, 200, 90), w);
            }
        }
    }
}

/// Bytes as people read them.
pub fn bytes(b: u64) -> String {
    match b {
        b if b >= 1 << 30 => format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.2} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{} B", b),
    }
}
