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
use crate::ir::*;
use std::collections::BTreeSet;

pub fn run(program: &mut Program) {
    let mut s = std::mem::take(&mut program.schedule);
    walk(program, &mut s.on_start);
    walk(program, &mut s.on_frame);
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

fn dead(p: &Program, mut pending: BTreeSet<FieldId>, after: &[Step]) -> bool {
    for s in after {
        let e = step_effects(p, s);
        if e.opaque || e.may_fault || pending.iter().any(|&f| e.reads(State::Value(f))) {
            return false;
        }
        pending.retain(|f| !e.covers.contains(f));
        if pending.is_empty() {
            return true;
        }
    }
    false
}

fn walk(p: &Program, steps: &mut Vec<Step>) {
    for s in steps.iter_mut() {
        if let Step::Repeat { body, .. } | Step::Tape { body, .. } | Step::Optimize { body, .. } = s
        {
            walk(p, body);
        }
    }
    let mut i = 0;
    while i < steps.len() {
        if let Step::Launch(k) = steps[i] {
            if let Some(fields) = candidate(p, k) {
                if dead(p, fields, &steps[i + 1..]) {
                    steps.remove(i);
                    continue;
                }
            }
        }
        i += 1;
    }
}
