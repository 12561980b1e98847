//! The state-flow graph (SFG) of a schedule (Taichi thesis, ch. 4): tasks
//! (kernel launches, list generation, clears) and the states they read and
//! write, each field's values, each sparse tree's mask and each listed
//! node's element list, taken from the kernels' IR.
//!
//! Pre: abstract IR (field accesses still name their fields); lowered
//! system kernels (`buf_` accesses) are summarised as opaque (they read
//! and write every state). Post: nothing changes; [`kernel_effects`] and
//! [`step_effects`] are what the schedule passes decide with, and
//! [`Sfg::build`] / [`Sfg::print`] what `weft ir --stage schedule` shows.
//!
//! States:
//! - `Value(F)`: the values of field F (stores, atomics, appends write it;
//!   loads, atomics and list lengths read it);
//! - `Mask(R)`: which cells of the sparse tree under root R are active,
//!   with its pools (activating stores and `activate`, `deactivate`, `clear`
//!   write it; loads of sparse fields, `is_active`, struct-fors and list
//!   generation read it). One state per root keeps the analysis sound where
//!   a child's activity shows in its parent's list;
//! - `List(N)`: the element list of sparse node N that struct-fors over N's
//!   fields run over (list generation writes it, struct-fors read it).
//!
//! Activation demotion, as an analysis: a store in a struct-for over field
//! G into a field F on G's own cells, at the loop index, hits a cell the
//! struct-for found active, so it writes `Value(F)` but not the mask (unless
//! the kernel also deactivates cells of that tree).

use crate::ir::layout::{root_of, AddressPlan};
use crate::ir::*;
use crate::lower::activation_demotion::KnownActive;
use crate::Scalar;
use std::collections::BTreeSet;
use std::fmt::Write;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum State {
    Value(FieldId),
    Mask(LayoutId),
    List(LayoutId),
}

impl State {
    pub fn name(self, p: &Program) -> String {
        match self {
            State::Value(f) => format!("value({})", p.fields[f].name),
            State::Mask(r) => format!("mask({})", p.layouts[r].node_id),
            State::List(n) => format!("list({})", p.layouts[n].node_id),
        }
    }
}

/// What a task (or a group of tasks) reads and writes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Effects {
    pub reads: BTreeSet<State>,
    pub writes: BTreeSet<State>,
    /// Dense fields of plain word storage every element of which the task
    /// writes unconditionally, at its own loop index (it leaves none of
    /// their old values visible).
    pub covers: BTreeSet<FieldId>,
    /// The task may stop with a run-time error (a bounds check, a loop
    /// that may not end, a capacity), or its faults are unknown.
    pub may_fault: bool,
    /// Lowered code the analysis does not read: every state is read and
    /// written.
    pub opaque: bool,
}

impl Effects {
    pub fn reads(&self, s: State) -> bool {
        self.opaque || self.reads.contains(&s)
    }
    pub fn writes(&self, s: State) -> bool {
        self.opaque || self.writes.contains(&s)
    }
    /// Whether the task may change the mask (and so the lists) of root `r`.
    pub fn writes_mask(&self, r: LayoutId) -> bool {
        self.writes(State::Mask(r))
    }
    /// Effects of running `self` then `other` (covers are not kept: a
    /// group is never a killing write).
    pub fn union(&mut self, other: &Effects) {
        self.reads.extend(other.reads.iter().copied());
        self.writes.extend(other.writes.iter().copied());
        self.may_fault |= other.may_fault;
        self.opaque |= other.opaque;
        self.covers.clear();
    }
}

/// The sparse root of field `f`'s layout, when any level of it is sparse.
pub fn sparse_root(p: &Program, f: FieldId) -> Option<LayoutId> {
    let plan = AddressPlan::new(p, f);
    plan.is_sparse().then_some(plan.root)
}

/// The node whose element list a struct-for over sparse field `f` runs
/// over (`passes::sparse_iter`), or `None` for a dense field.
pub fn list_node(p: &Program, f: FieldId) -> Option<LayoutId> {
    let plan = AddressPlan::new(p, f);
    if !plan.is_sparse() {
        return None;
    }
    Some(plan.levels[plan.list_level()].node)
}

/// Every field stored under root `r`.
fn fields_under(p: &Program, r: LayoutId) -> impl Iterator<Item = FieldId> + '_ {
    p.fields
        .iter()
        .filter(move |(_, f)| root_of(p, f.layout) == r)
        .map(|(h, _)| h)
}

/// Read and write sets of one launch of kernel `k`.
pub fn kernel_effects(p: &Program, k: KernelId) -> Effects {
    effects_of(p, &p.kernels[k])
}

/// Read and write sets of one launch of `kernel` (a kernel of `p`, or one
/// being built from them, as `fusion` does).
pub fn effects_of(p: &Program, kernel: &Kernel) -> Effects {
    let mut e = Effects::default();
    let over = match kernel.iteration {
        Iteration::Field(g) => Some(g),
        Iteration::Range(_) => None,
    };
    if let Some(g) = over {
        if let Some(r) = sparse_root(p, g) {
            e.reads.insert(State::Mask(r));
            if let Some(n) = list_node(p, g) {
                e.reads.insert(State::List(n));
            }
        }
    }
    let functions: Vec<&Function> = std::iter::once(&kernel.entry)
        .chain(kernel.functions.iter().map(|(_, f)| f))
        .collect();
    // Activation demotion's one definition of a write at a known-active cell.
    let known = KnownActive::new(p, kernel);
    for (fi, f) in functions.iter().enumerate() {
        let in_entry = fi == 0;
        // Instructions of the entry's top-level block run in every invocation.
        let top: BTreeSet<InstId> = if in_entry {
            f.body.iter().copied().collect()
        } else {
            BTreeSet::new()
        };
        for (h, i) in f.insts.iter() {
            let own_cell =
                |field: FieldId, index: &[InstId]| known.own_cell(p, f, in_entry, field, index);
            let write = |e: &mut Effects, field: FieldId, index: Option<&[InstId]>| {
                e.writes.insert(State::Value(field));
                if let Some(r) = sparse_root(p, field) {
                    let known_active = index.is_some_and(|index| {
                        known.write_is_known_active(p, f, in_entry, field, index)
                    });
                    if !known_active {
                        e.writes.insert(State::Mask(r));
                    }
                }
            };
            let read = |e: &mut Effects, field: FieldId| {
                e.reads.insert(State::Value(field));
                if let Some(r) = sparse_root(p, field) {
                    e.reads.insert(State::Mask(r));
                }
            };
            match &i.kind {
                InstKind::FieldLoad { field, index } => {
                    read(&mut e, *field);
                    e.may_fault |= !own_cell(*field, index);
                }
                InstKind::FieldStore { field, index, .. } => {
                    write(&mut e, *field, Some(index));
                    let own = own_cell(*field, index);
                    e.may_fault |= !own;
                    if own
                        && top.contains(&h)
                        && sparse_root(p, *field).is_none()
                        && matches!(p.fields[*field].storage, Storage::Word)
                        && !p.word_views.iter().any(|&(_, w)| w == *field)
                    {
                        e.covers.insert(*field);
                    }
                }
                InstKind::FieldAtomic { field, index, .. } => {
                    read(&mut e, *field);
                    write(&mut e, *field, Some(index));
                    e.may_fault |= !own_cell(*field, index);
                }
                InstKind::FieldActivate { field, index } => {
                    write(&mut e, *field, Some(index));
                    e.may_fault |= !own_cell(*field, index);
                }
                InstKind::FieldAppend { field, .. } => {
                    read(&mut e, *field);
                    write(&mut e, *field, None);
                    e.may_fault = true;
                }
                InstKind::FieldLength { field, .. } => {
                    read(&mut e, *field);
                    e.may_fault = true;
                }
                InstKind::FieldIsActive { field, index, .. } => {
                    read(&mut e, *field);
                    e.may_fault |= !own_cell(*field, index);
                }
                InstKind::FieldDeactivate { field, .. } => {
                    if let Some(r) = sparse_root(p, *field) {
                        e.writes.insert(State::Mask(r));
                        e.reads.insert(State::Mask(r));
                        for g in fields_under(p, r) {
                            e.writes.insert(State::Value(g));
                        }
                    }
                    e.may_fault = true;
                }
                InstKind::BufLoad { .. }
                | InstKind::BufStore { .. }
                | InstKind::BufAtomic { .. } => {
                    e.opaque = true;
                    e.may_fault = true;
                }
                // A `for` over a constant positive step always ends and
                // cannot fault; any other step may be refused at run time.
                InstKind::RangeFor { step, .. } if positive_const(f, *step) => {}
                InstKind::BoundsCheck { .. }
                | InstKind::IndexCheck { .. }
                | InstKind::Trap { .. }
                | InstKind::Loop { .. }
                | InstKind::RangeFor { .. }
                | InstKind::ExtractDyn(..)
                | InstKind::InsertDyn { .. }
                | InstKind::Call(..) => e.may_fault = true,
                _ => {}
            }
        }
    }
    if e.opaque {
        e.covers.clear();
    }
    e
}

/// Whether `v` is a constant integer greater than zero.
fn positive_const(f: &Function, v: InstId) -> bool {
    match f.insts[v].kind {
        InstKind::Const(c) => match c.scalar {
            Scalar::I32 => c.lo() as i32 > 0,
            Scalar::I64 => c.bits as i64 > 0,
            Scalar::U32 | Scalar::U64 => c.bits > 0,
            _ => false,
        },
        _ => false,
    }
}

/// Read and write sets of a schedule step (a repeat: of its whole body).
pub fn step_effects(p: &Program, s: &Step) -> Effects {
    match s {
        Step::Launch(k) => kernel_effects(p, *k),
        Step::ListGen { layout } => {
            let mut e = Effects::default();
            e.reads.insert(State::Mask(root_of(p, *layout)));
            e.writes.insert(State::List(*layout));
            e
        }
        Step::Clear { layout, .. } => {
            let r = root_of(p, *layout);
            let mut e = Effects::default();
            e.reads.insert(State::Mask(r));
            e.writes.insert(State::Mask(r));
            for g in fields_under(p, r) {
                e.writes.insert(State::Value(g));
            }
            e
        }
        Step::Repeat { body, .. } | Step::Tape { body, .. } | Step::Optimize { body, .. } => {
            let mut e = Effects::default();
            if matches!(s, Step::Tape { .. } | Step::Optimize { .. }) {
                e.opaque = true;
            }
            for b in body {
                e.union(&step_effects(p, b));
            }
            e
        }
    }
}

/// One task of the graph: where it is in the schedule, what it is.
#[derive(Clone, Debug)]
pub struct Task {
    /// The repeats around it, outermost first (node id, count).
    pub nest: Vec<(String, u32)>,
    pub label: String,
    pub effects: Effects,
}

/// Tasks in schedule order and the flow edges between them: (writer,
/// reader, state) for every read of a state written by an earlier task
/// (the last one before it in schedule order).
#[derive(Clone, Debug, Default)]
pub struct Sfg {
    pub tasks: Vec<Task>,
    pub edges: Vec<(usize, usize, State)>,
}

impl Sfg {
    pub fn build(p: &Program, steps: &[Step]) -> Sfg {
        let mut g = Sfg::default();
        fn walk(p: &Program, steps: &[Step], nest: &mut Vec<(String, u32)>, g: &mut Sfg) {
            for s in steps {
                match s {
                    Step::Repeat {
                        node_id,
                        count,
                        body,
                        ..
                    } => {
                        nest.push((node_id.clone(), *count));
                        walk(p, body, nest, g);
                        nest.pop();
                    }
                    Step::Tape { node_id, body, .. } | Step::Optimize { node_id, body, .. } => {
                        nest.push((node_id.clone(), 1));
                        walk(p, body, nest, g);
                        nest.pop();
                    }
                    _ => g.tasks.push(Task {
                        nest: nest.clone(),
                        label: label(p, s),
                        effects: step_effects(p, s),
                    }),
                }
            }
        }
        walk(p, steps, &mut vec![], &mut g);
        let mut last: std::collections::BTreeMap<State, usize> = Default::default();
        for (t, task) in g.tasks.iter().enumerate() {
            for &s in &task.effects.reads {
                if let Some(&w) = last.get(&s) {
                    g.edges.push((w, t, s));
                }
            }
            for &s in &task.effects.writes {
                last.insert(s, t);
            }
        }
        g
    }

    /// One line per task: its position, repeats, reads and writes, and the
    /// tasks whose writes it reads.
    pub fn print(&self, p: &Program) -> String {
        let mut out = String::new();
        // The edges into each task, in edge order (one pass over the edges,
        // not one per task).
        let mut into: Vec<Vec<usize>> = vec![Vec::new(); self.tasks.len()];
        for (i, e) in self.edges.iter().enumerate() {
            if let Some(v) = into.get_mut(e.1) {
                v.push(i);
            }
        }
        for (t, task) in self.tasks.iter().enumerate() {
            let nest: String = task
                .nest
                .iter()
                .map(|(n, c)| format!("{}x{} / ", n, c))
                .collect();
            let set =
                |s: &BTreeSet<State>| s.iter().map(|s| s.name(p)).collect::<Vec<_>>().join(" ");
            let from: Vec<String> = into[t]
                .iter()
                .map(|&i| {
                    let e = &self.edges[i];
                    format!("t{}:{}", e.0, e.2.name(p))
                })
                .collect();
            let _ = writeln!(
                out,
                "  t{} {}{}{}{} reads[{}] writes[{}] after[{}]",
                t,
                nest,
                task.label,
                if task.effects.opaque { " opaque" } else { "" },
                if task.effects.may_fault {
                    " may_fault"
                } else {
                    ""
                },
                set(&task.effects.reads),
                set(&task.effects.writes),
                from.join(" ")
            );
        }
        out
    }
}

fn label(p: &Program, s: &Step) -> String {
    match s {
        Step::Launch(k) => format!("launch '{}'", p.kernels[*k].label()),
        Step::ListGen { layout } => format!("list '{}'", p.layouts[*layout].node_id),
        Step::Clear { node_id, .. } => format!("clear '{}'", node_id),
        _ => String::new(),
    }
}
