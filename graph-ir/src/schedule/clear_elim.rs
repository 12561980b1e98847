//! Redundant-clear removal: a `clear` of a node that nothing has activated
//! or deactivated since the last clear of the same node does nothing.
//!
//! Pre: abstract IR (`Step::Clear` still in the schedule). Post: the same
//! less every `Step::Clear { L }` for which an earlier clear of L ran in the
//! same frame (or `on_start`) and no task since may write the mask of L's
//! tree (`sfg::Effects`; a clear of another node of the tree only
//! deactivates, so it keeps L clear). Inside a repeat, L counts as clear on
//! entry only when the body leaves the tree's mask alone. The clear's
//! garbage collection goes with it, which is exact: with no mask change
//! since the last collection there is nothing to collect.

use super::sfg::{kernel_effects, step_effects, State};
use crate::ir::layout::root_of;
use crate::ir::*;
use std::collections::BTreeSet;

pub fn run(program: &mut Program) {
    let mut s = std::mem::take(&mut program.schedule);
    walk(program, &mut s.on_start, &mut BTreeSet::new());
    walk(program, &mut s.on_frame, &mut BTreeSet::new());
    program.schedule = s;
}

fn walk(p: &Program, steps: &mut Vec<Step>, clear: &mut BTreeSet<LayoutId>) {
    let old = std::mem::take(steps);
    for mut s in old {
        match &mut s {
            Step::Clear { layout, .. } => {
                if !clear.insert(*layout) {
                    continue;
                }
            }
            Step::Launch(k) => {
                let e = kernel_effects(p, *k);
                clear.retain(|&l| !e.writes(State::Mask(root_of(p, l))));
            }
            Step::ListGen { .. } => {}
            Step::Repeat { count, body, .. } => {
                // A clear in the body changes the mask too, but only
                // towards "clear": it is no reason to forget.
                // (Each step's effects once, not once per clear node.)
                let effects: Vec<_> = body
                    .iter()
                    .filter(|b| !matches!(b, Step::Clear { .. }))
                    .map(|b| step_effects(p, b))
                    .collect();
                let mut inner = clear.clone();
                inner.retain(|&l| !effects.iter().any(|e| e.writes(State::Mask(root_of(p, l)))));
                walk(p, body, &mut inner);
                if *count > 0 {
                    *clear = inner;
                }
            }
            Step::Tape { body, .. } | Step::Optimize { body, .. } => {
                clear.clear();
                walk(p, body, &mut BTreeSet::new());
            }
        }
        steps.push(s);
    }
}
