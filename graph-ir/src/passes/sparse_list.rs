//! List generation: the system kernels that compact a sparse node's active
//! blocks into its element list before every struct-for over it.
//!
//! Pre: lowered IR (`IrForm::Lowered`) in which `sparse_iter` rewrote the
//! struct-fors (`users`: each kernel and the layout node whose list it runs
//! over) and whose schedule holds `Step::ListGen` where a list must be
//! (re)built (`schedule::list_gen`, `schedule::list_reuse`). Post: the same,
//! plus three kernels per listed node, every `Step::ListGen` replaced by
//! their launches in this order; no `Step::ListGen` is left. A program whose
//! schedule has no list step at all (a filetest that skipped the schedule
//! stage) gets one before every launch of a user first. Nothing changes in
//! programs without sparse struct-fors.
//!
//! The candidates (pool slots, table slots, or blocks of a bitmasked /
//! dynamic node under dense ones) are cut into chunks of `LIST_CHUNK`:
//! - `<node>.list_count`: one invocation per chunk counts its active
//!   candidates into the chunk's word;
//! - `<node>.list_scan`: one invocation turns the chunk counts into start
//!   positions (an exclusive prefix sum) and writes the list's length;
//! - `<node>.list`: one invocation per chunk writes its active candidates
//!   from its start position, in order.
//!
//! The list is thus sorted by candidate (no dependence on thread timing
//! beyond which slot each block got when it was allocated), every step is its own
//! launch (no thread ever waits for another workgroup), and the length
//! stays on the device: the struct-for's launch reads it
//! (`Kernel::count_from`; an indirect dispatch on the GPU). Work here
//! follows the number of candidates (the pool or table capacity, with a
//! serial scan over capacity / 64 chunks); the struct-for itself follows
//! the active blocks.

use crate::arena::Arena;
use crate::ir::layout::{level_plans, WORD_BITS};
use crate::ir::steps::{self, Rewrite};
use crate::ir::*;
use crate::lower::emit::Build;
use crate::lower::sparse::{self, Emitter, Mode};
use crate::types::Type;
use std::collections::HashMap;

pub fn run(program: &mut Program, users: &[(KernelId, LayoutId)]) {
    let mut gen: HashMap<LayoutId, [KernelId; 3]> = HashMap::new();
    let mut s = std::mem::take(&mut program.schedule);
    // A program that no list step reached (`schedule::list_gen` did not run:
    // a filetest) gets one before every launch of a user, as the pipeline's
    // `list_gen` would have put it.
    let listed = has_list(&s.on_start) || has_list(&s.on_frame);
    if !listed && !users.is_empty() {
        let before: HashMap<KernelId, LayoutId> = users.iter().copied().collect();
        crate::schedule::list_gen::insert(&mut s.on_start, &|k| before.get(&k).copied());
        crate::schedule::list_gen::insert(&mut s.on_frame, &|k| before.get(&k).copied());
    }
    expand(program, &mut gen, &mut s.on_start);
    expand(program, &mut gen, &mut s.on_frame);
    program.schedule = s;
}

fn has_list(list: &[Step]) -> bool {
    let mut any = false;
    steps::walk(list, &mut |s| any |= matches!(s, Step::ListGen { .. }));
    any
}

/// Replaces every `Step::ListGen` with the launches of its node's three
/// list kernels (built once per node).
fn expand(program: &mut Program, gen: &mut HashMap<LayoutId, [KernelId; 3]>, list: &mut Vec<Step>) {
    *list = steps::rewrite(std::mem::take(list), &mut |s| {
        let Step::ListGen { layout: l } = s else {
            return Rewrite::Keep(s);
        };
        let ks = match gen.get(&l) {
            Some(&ks) => ks,
            None => {
                let count = chunk_kernel(program, l, Pass::Count);
                let scan = scan_kernel(program, l);
                let write = chunk_kernel(program, l, Pass::Write);
                let ks = [
                    program.kernels.append(count),
                    program.kernels.append(scan),
                    program.kernels.append(write),
                ];
                gen.insert(l, ks);
                ks
            }
        };
        Rewrite::Into(ks.iter().map(|&g| Step::Launch(g)).collect())
    });
}

fn system_kernel(name: String, len: u32, f: Function) -> Kernel {
    Kernel {
        fused: Vec::new(),
        name,
        iteration: Iteration::Range(vec![len]),
        dims: 1,
        params: vec![],
        entry: f,
        functions: Arena::new(),
        bindings: vec![],
        fault_sites: vec![],
        count_from: None,
        loops_end: false,
        zero_fill: None,
        workgroup: None,
    }
}

/// What a per-chunk invocation does with its active candidates.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// Counts them into the chunk's word.
    Count,
    /// Writes them into the list from the chunk's start position.
    Write,
}

/// `.list_scan`: chunk counts → start positions; the total → the count word.
fn scan_kernel(p: &Program, l: LayoutId) -> Kernel {
    let node = &p.layouts[l];
    let list = node.list.expect("listed nodes have a list");
    let root = layout::root_of(p, l);
    let name = format!("{}.list_scan", node.node_id);
    let mut f = Function::new(&name, vec![Type::I32], Type::Void, Span::default());
    let mut e = Emitter {
        f: &mut f,
        out: vec![],
        span: Span::default(),
    };
    let acc = e.new_local("acc", Type::U32);
    let z = e.u32c(0);
    e.set(acc, z);
    e.for_n(list.len.div_ceil(LIST_CHUNK) as u64, |e, c| {
        let a = e.bink(BinaryOp::Add, c, list.chunks);
        let n = e.load(root, a);
        let start = e.get(acc);
        e.store(root, a, start);
        let next = e.bin(BinaryOp::Add, start, n);
        e.set(acc, next);
    });
    let ca = e.u32c(list.count);
    let total = e.get(acc);
    e.store(root, ca, total);
    let body = std::mem::take(&mut e.out);
    f.body = body;
    system_kernel(name, 1, f)
}

/// `.list_count` / `.list`: one invocation per chunk of candidates.
fn chunk_kernel(p: &Program, l: LayoutId, pass: Pass) -> Kernel {
    let node = &p.layouts[l];
    let list = node.list.expect("listed nodes have a list");
    let root = layout::root_of(p, l);
    let name = match pass {
        Pass::Count => format!("{}.list_count", node.node_id),
        Pass::Write => format!("{}.list", node.node_id),
    };
    let mut f = Function::new(&name, vec![Type::I32], Type::Void, Span::default());
    let mut sites = Vec::new();
    let mut e = Emitter {
        f: &mut f,
        out: vec![],
        span: Span::default(),
    };
    let arg = e.emit(InstKind::Arg(0), Type::I32);
    let c = e.emit(InstKind::Cast(arg), Type::U32);
    let ca = e.bink(BinaryOp::Add, c, list.chunks);
    let at = e.new_local("at", Type::U32);
    let first = match pass {
        Pass::Count => e.u32c(0),
        Pass::Write => e.load(root, ca),
    };
    e.set(at, first);
    let base = e.bink(BinaryOp::Mul, c, LIST_CHUNK as u64);
    e.for_n(LIST_CHUNK as u64, |e, k| {
        let s = e.bin(BinaryOp::Add, base, k);
        let inside = e.cmpk(BinaryOp::Lt, s, list.len as u64);
        e.if_(inside, |e| {
            let active = is_active(e, p, l, root, s, &mut sites);
            e.if_(active, |e| {
                let n = e.get(at);
                if pass == Pass::Write {
                    let ia = e.bink(BinaryOp::Add, n, list.items);
                    e.store(root, ia, s);
                }
                let n1 = e.bink(BinaryOp::Add, n, 1);
                e.set(at, n1);
            });
        });
    });
    if pass == Pass::Count {
        let n = e.get(at);
        e.store(root, ca, n);
    }
    let body = std::mem::take(&mut e.out);
    f.body = body;
    debug_assert!(sites.is_empty(), "reading walks never trap");
    system_kernel(name, list.len.div_ceil(LIST_CHUNK), f)
}

/// Whether candidate `s` (u32) of node `l`'s list is active.
fn is_active(
    e: &mut Emitter,
    p: &Program,
    l: LayoutId,
    root: LayoutId,
    s: InstId,
    sites: &mut Vec<FaultSite>,
) -> InstId {
    let node = &p.layouts[l];
    match node.kind {
        LayoutKind::Pointer { .. } => {
            // A slot with an owner holds a block (the struct-for checks
            // that its owner cell still refers to it).
            let pool = node.pool.expect("pointer nodes have a pool");
            let oaddr = e.bink(BinaryOp::Add, s, pool.owner);
            let owner = e.load(root, oaddr);
            e.cmpk(BinaryOp::Ne, owner, 0)
        }
        LayoutKind::Hash { .. } => {
            // Key word 0 of a slot: 0 = empty, a tombstone = deactivated.
            let level = &level_plans(p, l)[0];
            let stride = level.axes.len() as u64 + level.cell_bits / WORD_BITS;
            let base = e.bink(BinaryOp::Mul, s, stride);
            let k0 = e.load(root, base);
            let used = e.cmpk(BinaryOp::Ne, k0, 0);
            let live = e.cmpk(BinaryOp::Ne, k0, HASH_TOMBSTONE as u64);
            e.and(used, live)
        }
        LayoutKind::Bitmasked | LayoutKind::Dynamic => {
            // Block `s` is cell `s` (row-major over the domain) of the
            // parent, reached through dense levels only; its first cell at
            // this level has index (block coordinate × extent) per axis.
            let levels = level_plans(p, l);
            let last = levels.len() - 1;
            let block = if last == 0 {
                e.u32c(0)
            } else {
                let up = &levels[last - 1];
                let dims = up.axes.len();
                let mut c = s;
                let mut idx = vec![s; dims];
                for d in (0..dims).rev() {
                    let g = e.bink(BinaryOp::Rem, c, up.axes[d].coord_extent);
                    c = e.bink(BinaryOp::Div, c, up.axes[d].coord_extent);
                    idx[d] = e.bink(BinaryOp::Mul, g, levels[last].axes[d].extent as u64);
                }
                let w = sparse::walk(e, root, &levels, &idx, Mode::Read, last - 1, sites);
                e.bink(
                    BinaryOp::Add,
                    w.cells[last - 1],
                    levels[last].offset_bits / WORD_BITS,
                )
            };
            // Any activity bit of the block, or a non-empty list.
            let any = e.new_local("any", Type::U32);
            let z = e.u32c(0);
            e.set(any, z);
            e.for_n(node.header_words, |e, i| {
                let a = e.bin(BinaryOp::Add, block, i);
                let v = e.load(root, a);
                let acc = e.get(any);
                let acc = e.bin(BinaryOp::BitOr, acc, v);
                e.set(any, acc);
            });
            let acc = e.get(any);
            e.cmpk(BinaryOp::Ne, acc, 0)
        }
        LayoutKind::Dense => unreachable!("dense nodes have no list"),
    }
}
