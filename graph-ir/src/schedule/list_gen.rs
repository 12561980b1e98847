//! Makes list generation explicit: a `Step::ListGen` of the listed node
//! before every launch of a struct-for over a sparse field.
//!
//! Pre: abstract IR whose schedule holds no `Step::ListGen`. Post: the same
//! with one `ListGen { layout: N }` right before every `Launch(k)` of a
//! kernel iterating over the cells of a sparse field, N being the node
//! whose element list it runs over (`sfg::list_node`,
//! `passes::sparse_iter`). This is the unoptimised schedule (one list per
//! struct-for, as before the SFG existed); `list_reuse` then drops the
//! list steps whose list is still current. Runs also with the optimiser
//! off, since `passes::sparse_list` expands the steps it leaves.

use super::sfg::list_node;
use crate::ir::steps::{self, Rewrite};
use crate::ir::*;

pub fn run(program: &mut Program) {
    let lists: Vec<Option<LayoutId>> = program
        .kernels
        .iter()
        .map(|(_, k)| match k.iteration {
            Iteration::Field(f) => list_node(program, f),
            Iteration::Range(_) => None,
        })
        .collect();
    let of = |k: KernelId| lists.get(k.index()).copied().flatten();
    let s = &mut program.schedule;
    insert(&mut s.on_start, &of);
    insert(&mut s.on_frame, &of);
}

/// Puts `ListGen { list(k) }` before every launch of a `k` that has a list.
pub(crate) fn insert(list_steps: &mut Vec<Step>, list: &dyn Fn(KernelId) -> Option<LayoutId>) {
    *list_steps = steps::rewrite(std::mem::take(list_steps), &mut |s| match s {
        Step::Launch(k) => match list(k) {
            Some(layout) => Rewrite::Into(vec![Step::ListGen { layout }, s]),
            None => Rewrite::Keep(s),
        },
        s => Rewrite::Keep(s),
    });
}
