//! Dead-store elimination across tasks: a launch whose every write is
//! overwritten, element for element, before anything reads it goes
//! (gradient stores nobody reads included: they are plain value writes).
//!
//! Pre: abstract IR. Post: the same less every `Launch(K1)` such that
//! - K1 writes only values of dense, word-stored fields (no mask, list or
//!   unknown state), may not fault, and draws no random numbers (which
//!   would shift its later launches' streams);
//! - in the same step list, the steps after it up to a launch K2 read none
//!   of those fields, may not fault (a fault there would show K1's
//!   values), and K1's fields are all covered (`sfg::Effects::covers`:
//!   every element written unconditionally at its own index) by launches
//!   among them before any is read.
//!
//! The end of a step list keeps K1 (a repeat's body runs again, a frame's
//! fields are seen by the host). Results are unchanged bit for bit: every
//! value K1 wrote is replaced before anyone can see it.

use super::sfg::{kernel_effects, step_effects, State};
use crate::ir::steps;
use crate::ir::*;
use std::collections::{BTreeMap, BTreeSet};

pub fn run(program: &mut Program) {
    let mut s = std::mem::take(&mut program.schedule);
    for list in s.lists_mut() {
        steps::walk_lists_mut(list, &mut |l| remove_dead(program, l));
    }
    program.schedule = s;
}

fn draws_random(k: &Kernel) -> bool {
    std::iter::once(&k.entry)
        .chain(k.functions.iter().map(|(_, f)| f))
        .any(|f| {
            f.insts
                .iter()
                .any(|(_, i)| matches!(i.kind, InstKind::Random | InstKind::Launch(_)))
        })
}

/// The fields K1 writes when it is a candidate (see the module doc).
fn candidate(p: &Program, k: KernelId) -> Option<BTreeSet<FieldId>> {
    let e = kernel_effects(p, k);
    if e.opaque || e.may_fault || e.writes.is_empty() || draws_random(&p.kernels[k]) {
        return None;
    }
    let mut fields = BTreeSet::new();
    for &s in &e.writes {
        match s {
            State::Value(f) if super::sfg::sparse_root(p, f).is_none() => {
                fields.insert(f);
            }
            _ => return None,
        }
    }
    Some(fields)
}

/// Removes the dead launches of one step list (the lists inside it are
/// already done).
fn remove_dead(p: &Program, steps: &mut Vec<Step>) {
    // One sweep from the end of the list, each step's effects computed
    // once, instead of a scan forward from every candidate (quadratic in
    // the list's length). Before step `i` is added, the sweep knows, of the
    // steps after `i`, the first that is a barrier (opaque or may fault),
    // and per field the first that reads it and the first that covers it.
    // K1 at `i` is dead exactly when every field it writes is covered by
    // some later step before any step reads it (a read in the covering
    // step itself counts, as the reads come first), and no barrier comes
    // before the last of those covers: what the forward scan decided.
    // Removing a step never changes the decision for an earlier one (the
    // scan looked only after it), so all are decided first, then removed.
    let mut barrier = usize::MAX;
    let mut next_read: BTreeMap<FieldId, usize> = BTreeMap::new();
    let mut next_cover: BTreeMap<FieldId, usize> = BTreeMap::new();
    let mut is_dead = vec![false; steps.len()];
    for i in (0..steps.len()).rev() {
        if let Step::Launch(k) = steps[i] {
            if let Some(fields) = candidate(p, k) {
                is_dead[i] = dead(&fields, barrier, &next_read, &next_cover);
            }
        }
        let e = step_effects(p, &steps[i]);
        if e.opaque || e.may_fault {
            barrier = i;
        }
        for s in &e.reads {
            if let State::Value(f) = *s {
                next_read.insert(f, i);
            }
        }
        for &f in &e.covers {
            next_cover.insert(f, i);
        }
    }
    let mut i = 0;
    steps.retain(|_| {
        i += 1;
        !is_dead[i - 1]
    });
}

/// Whether a launch writing `fields` is dead, given what the steps after
/// it do (see `remove_dead`).
fn dead(
    fields: &BTreeSet<FieldId>,
    barrier: usize,
    next_read: &BTreeMap<FieldId, usize>,
    next_cover: &BTreeMap<FieldId, usize>,
) -> bool {
    let mut last_cover = 0;
    for f in fields {
        let Some(&c) = next_cover.get(f) else {
            return false;
        };
        if next_read.get(f).is_some_and(|&r| r <= c) {
            return false;
        }
        last_cover = last_cover.max(c);
    }
    !fields.is_empty() && barrier > last_cover
}
