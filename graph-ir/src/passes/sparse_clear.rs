//! Expands `clear` steps into system kernels.
//!
//! Pre: lowered IR whose schedule may hold `Step::Clear` (run by the
//! `lower_access` pass right after access lowering, so no validated form
//! ever contains one). Post: the same with every `Step::Clear { layout: L }`
//! replaced by launches of
//! 1. one clear kernel named after the `clear` node: for `hash` nodes one
//!    invocation per table slot, which resets the slot's cell and empties
//!    its key (tombstones included); for `bitmasked` and
//!    `pointer` nodes, one invocation per cell of L over the whole domain,
//!    which deactivates that cell when it and every level above are active
//!    (as `deactivate` does: a bitmasked cell is reset to its initial image
//!    and its bit cleared, a pointer reference is nulled); for `dynamic`
//!    nodes, one invocation per list, which empties it (length to 0, the
//!    elements that were in use reset);
//! 2. the garbage-collection kernel (`sparse_gc`) of every pointer node in
//!    L's subtree, L first, outer nodes first, so that the blocks the clear
//!    released are back in their pools when the next step runs, not only at
//!    the end of the frame.
//!
//! Each step is its own dispatch: nothing waits for another thread. Kernels
//! are built once per cleared node and shared by every `clear` of it.

use crate::arena::Arena;
use crate::ir::layout::{coord_extent, level_plans};
use crate::ir::steps::{self, Rewrite};
use crate::ir::*;
use crate::lower::emit::Build;
use crate::lower::sparse::{self, Emitter, Mode};
use crate::types::Type;
use std::collections::HashMap;

pub fn run(program: &mut Program) {
    let mut built: HashMap<LayoutId, Vec<Step>> = HashMap::new();
    let mut schedule = std::mem::take(&mut program.schedule);
    schedule.on_start = expand(program, &mut built, std::mem::take(&mut schedule.on_start));
    schedule.on_frame = expand(program, &mut built, std::mem::take(&mut schedule.on_frame));
    program.schedule = schedule;
}

fn expand(
    program: &mut Program,
    built: &mut HashMap<LayoutId, Vec<Step>>,
    steps: Vec<Step>,
) -> Vec<Step> {
    steps::rewrite(steps, &mut |s| match s {
        Step::Clear { node_id, layout } => Rewrite::Into(
            built
                .entry(layout)
                .or_insert_with(|| clear_launches(program, &node_id, layout))
                .clone(),
        ),
        s => Rewrite::Keep(s),
    })
}

fn clear_launches(program: &mut Program, node_id: &str, l: LayoutId) -> Vec<Step> {
    let k = clear_kernel(program, node_id, l);
    let mut out = vec![Step::Launch(program.kernels.append(k))];
    let mut subtree = Vec::new();
    fn preorder(p: &Program, l: LayoutId, out: &mut Vec<LayoutId>) {
        out.push(l);
        for c in &p.layouts[l].children {
            if let LayoutChild::Layout(cl) = *c {
                preorder(p, cl, out);
            }
        }
    }
    preorder(program, l, &mut subtree);
    for n in subtree {
        if matches!(program.layouts[n].kind, LayoutKind::Pointer { .. }) {
            let gc = super::sparse_gc::gc_kernel(program, n);
            out.push(Step::Launch(program.kernels.append(gc)));
        }
    }
    out
}

/// Invocations of the clear kernel of `l`, per axis: cells of `l` over the
/// whole domain, or for a dynamic node its lists (cells of its parent; one
/// for a root). The graph builder keeps the product within launch limits.
pub fn clear_range(p: &Program, l: LayoutId) -> Vec<u64> {
    let node = &p.layouts[l];
    match (node.kind, node.parent) {
        (LayoutKind::Hash { capacity }, _) => vec![capacity as u64],
        (LayoutKind::Dynamic, None) => vec![1],
        (LayoutKind::Dynamic, Some(parent)) => vec![coord_extent(p, parent, 0)],
        _ => (0..node.shape.len())
            .map(|d| coord_extent(p, l, d))
            .collect(),
    }
}

fn clear_kernel(p: &Program, node_id: &str, l: LayoutId) -> Kernel {
    let levels = level_plans(p, l);
    let root = levels[0].node;
    let at = levels.len() - 1;
    let range: Vec<u32> = clear_range(p, l).iter().map(|&x| x as u32).collect();
    let dims = range.len();
    let mut f = Function::new(node_id, vec![Type::I32; dims], Type::Void, Span::default());
    let mut sites = Vec::new();
    let mut e = Emitter {
        f: &mut f,
        out: vec![],
        span: Span::default(),
    };
    let idx: Vec<InstId> = (0..dims)
        .map(|d| {
            let a = e.emit(InstKind::Arg(d as u32), Type::I32);
            e.emit(InstKind::Cast(a), Type::U32)
        })
        .collect();
    if let LayoutKind::Hash { .. } = levels[at].kind {
        // A root: one invocation per slot empties it (cell reset, then keys).
        let level = &levels[at];
        let nk = level.axes.len() as u64;
        let cw = level.cell_bits / crate::ir::layout::WORD_BITS;
        let base = e.bink(BinaryOp::Mul, idx[0], nk + cw);
        let k0 = e.load(root, base);
        let used = e.cmpk(BinaryOp::Ne, k0, 0);
        let image = level.image;
        e.if_(used, |e| {
            let cell = e.bink(BinaryOp::Add, base, nk);
            let img = e.u32c(image);
            sparse::copy_words(e, root, img, cell, cw);
            for d in 0..nk {
                let a = e.bink(BinaryOp::Add, base, d);
                let z = e.u32c(0);
                e.store(root, a, z);
            }
        });
    } else if levels[at].kind == LayoutKind::Dynamic {
        let (block, active) =
            sparse::list_block(&mut e, root, &levels, idx[0], Mode::Probe, &mut sites);
        let level = levels[at].clone();
        match active {
            Some(a) => e.if_(a, |e| sparse::clear_list(e, root, &level, block)),
            None => sparse::clear_list(&mut e, root, &level, block),
        }
    } else {
        sparse::deactivate_level(&mut e, root, &levels, at, &idx, &mut sites);
    }
    let body = std::mem::take(&mut e.out);
    f.body = body;
    debug_assert!(sites.is_empty(), "probing walks never trap");
    Kernel {
        fused: Vec::new(),
        name: node_id.to_string(),
        iteration: Iteration::Range(range),
        dims,
        params: vec![],
        entry: f,
        functions: Arena::new(),
        bindings: vec![],
        fault_sites: sites,
        count_from: None,
        loops_end: false,
        zero_fill: None,
        workgroup: None,
    }
}
