//! List-generation removal (thesis §4): a struct-for reuses the element
//! list an earlier list step built while no task between them may change
//! the mask of the list's sparse tree.
//!
//! Pre: abstract IR after `list_gen`. Post: the same schedule less every
//! `Step::ListGen { N }` whose list is current: a list step of N ran
//! earlier in the same frame (or `on_start`) and no task since may write
//! `Mask(root(N))` (`sfg::Effects`). Inside a repeat, a list counts as
//! current on entry only when the whole body leaves its mask alone, so a
//! list reused in the body is current in every iteration. Nothing is
//! assumed across frames (the host may edit fields between them). The
//! lists and the struct-fors' results are unchanged bit for bit: a list
//! step over an unchanged mask writes the same list.

use super::sfg::{kernel_effects, step_effects, Effects, State};
use crate::ir::layout::root_of;
use crate::ir::*;
use std::collections::BTreeSet;

pub fn run(program: &mut Program) {
    let mut s = std::mem::take(&mut program.schedule);
    walk(program, &mut s.on_start, &mut BTreeSet::new());
    walk(program, &mut s.on_frame, &mut BTreeSet::new());
    program.schedule = s;
}

/// Forgets the lists whose tree's mask `written` says may change.
fn forget(p: &Program, valid: &mut BTreeSet<LayoutId>, writes_mask: impl Fn(LayoutId) -> bool) {
    valid.retain(|&n| !writes_mask(root_of(p, n)));
}

fn walk(p: &Program, steps: &mut Vec<Step>, valid: &mut BTreeSet<LayoutId>) {
    let old = std::mem::take(steps);
    for mut s in old {
        match &mut s {
            Step::ListGen { layout } => {
                if !valid.insert(*layout) {
                    continue;
                }
            }
            Step::Launch(k) => {
                let e = kernel_effects(p, *k);
                forget(p, valid, |r| e.writes(State::Mask(r)));
            }
            Step::Clear { layout, .. } => {
                let r = root_of(p, *layout);
                forget(p, valid, |x| x == r);
            }
            Step::Repeat { count, body, .. } => {
                // What the whole body may write (`step_effects` of the repeat).
                let mut e = Effects::default();
                for b in body.iter() {
                    e.union(&step_effects(p, b));
                }
                let mut inner = valid.clone();
                forget(p, &mut inner, |r| e.writes(State::Mask(r)));
                walk(p, body, &mut inner);
                if *count > 0 {
                    *valid = inner;
                }
            }
            Step::Tape { body, .. } | Step::Optimize { body, .. } => {
                valid.clear();
                walk(p, body, &mut BTreeSet::new());
            }
        }
        steps.push(s);
    }
}
