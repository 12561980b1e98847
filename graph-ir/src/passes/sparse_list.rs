//! List generation: the system kernels that compact a sparse node's active
//! blocks into its element list before every struct-for over it.
//!
//! Pre: lowered IR (`IrForm::Lowered`) in which `sparse_iter` rewrote the
//! struct-fors (`users`: each kernel and the layout node whose list it runs
//! over). Post: the same, plus two kernels per listed node (named
//! `<node>.list_reset` and `<node>.list`), launched, in that order, right
//! before every launch of a user in `on_start`, `on_frame` and repeats.
//! Nothing changes in programs without sparse struct-fors.
//!
//! - `.list_reset` (one invocation) zeroes the list's counter;
//! - `.list` looks at every candidate entry (pool slot, table slot, or block
//!   of a bitmasked / dynamic node under dense ones) and appends the active
//!   ones: one 32-bit atomic add on the counter gives the entry's position.
//!
//! They are separate launches (no thread ever waits for another workgroup),
//! and the count stays on the device: the struct-for's launch reads it
//! (`Kernel::count_from`; an indirect dispatch on the GPU). The list's order
//! depends on thread timing, which only changes the order in which a
//! struct-for visits blocks, never which cells it visits. Work here follows
//! the number of candidates, which is the pool or table capacity; the
//! struct-for itself follows the active blocks.

use super::sparse_ir::{self, Emitter, Mode};
use crate::arena::Arena;
use crate::ir::layout::level_plans;
use crate::ir::*;
use crate::types::Type;
use std::collections::HashMap;

pub fn run(program: &mut Program, users: &[(KernelId, LayoutId)]) {
    if users.is_empty() {
        return;
    }
    let mut gen: HashMap<LayoutId, (KernelId, KernelId)> = HashMap::new();
    let mut before: HashMap<KernelId, (KernelId, KernelId)> = HashMap::new();
    for &(k, l) in users {
        let pair = match gen.get(&l) {
            Some(&p) => p,
            None => {
                let reset = reset_kernel(program, l);
                let list = list_kernel(program, l);
                let p = (program.kernels.append(reset), program.kernels.append(list));
                gen.insert(l, p);
                p
            }
        };
        before.insert(k, pair);
    }
    let s = &mut program.schedule;
    insert(&mut s.on_start, &before);
    insert(&mut s.on_frame, &before);
}

/// Puts the list kernels of each user's node before every launch of it.
fn insert(steps: &mut Vec<Step>, before: &HashMap<KernelId, (KernelId, KernelId)>) {
    let old = std::mem::take(steps);
    for mut s in old {
        match &mut s {
            Step::Launch(k) => {
                if let Some(&(reset, list)) = before.get(k) {
                    steps.push(Step::Launch(reset));
                    steps.push(Step::Launch(list));
                }
            }
            Step::Repeat { body, .. } | Step::Tape { body, .. } => insert(body, before),
            Step::Clear { .. } => {}
        }
        steps.push(s);
    }
}

fn system_kernel(name: String, len: u32, f: Function) -> Kernel {
    Kernel {
        name,
        iteration: Iteration::Range(vec![len]),
        dims: 1,
        params: vec![],
        entry: f,
        functions: Arena::new(),
        bindings: vec![],
        fault_sites: vec![],
        count_from: None,
    }
}

fn reset_kernel(p: &Program, l: LayoutId) -> Kernel {
    let node = &p.layouts[l];
    let list = node.list.expect("listed nodes have a list");
    let root = layout::root_of(p, l);
    let name = format!("{}.list_reset", node.node_id);
    let mut f = Function::new(&name, vec![Type::I32], Type::Void, Span::default());
    let mut e = Emitter {
        f: &mut f,
        out: vec![],
        span: Span::default(),
    };
    let a = e.u32c(list.count);
    let z = e.u32c(0);
    e.store(root, a, z);
    let body = std::mem::take(&mut e.out);
    f.body = body;
    system_kernel(name, 1, f)
}

fn list_kernel(p: &Program, l: LayoutId) -> Kernel {
    let node = &p.layouts[l];
    let list = node.list.expect("listed nodes have a list");
    let root = layout::root_of(p, l);
    let name = format!("{}.list", node.node_id);
    let mut f = Function::new(&name, vec![Type::I32], Type::Void, Span::default());
    let mut sites = Vec::new();
    let mut e = Emitter {
        f: &mut f,
        out: vec![],
        span: Span::default(),
    };
    let arg = e.emit(InstKind::Arg(0), Type::I32);
    let s = e.emit(InstKind::Cast(arg), Type::U32);
    let active = match node.kind {
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
            let stride = node.shape.len() as u64 + node.cell_words;
            let base = e.bink(BinaryOp::Mul, s, stride);
            let k0 = e.load(root, base);
            let used = e.cmpk(BinaryOp::Ne, k0, 0);
            let live = e.cmpk(BinaryOp::Ne, k0, HASH_TOMBSTONE as u64);
            e.and(used, live)
        }
        LayoutKind::Bitmasked | LayoutKind::Dynamic => {
            // Block `s` is cell `s` (row-major over the domain) of the
            // parent, reached through dense levels only.
            let block = match node.parent {
                None => e.u32c(0),
                Some(parent) => {
                    let levels = level_plans(p, parent);
                    let last = levels.len() - 1;
                    let dims = node.shape.len();
                    let mut c = s;
                    let mut idx = vec![s; dims];
                    for d in (0..dims).rev() {
                        let ext = levels[last].axes[d].coord_extent;
                        idx[d] = e.bink(BinaryOp::Rem, c, ext);
                        c = e.bink(BinaryOp::Div, c, ext);
                    }
                    let w =
                        sparse_ir::walk(&mut e, root, &levels, &idx, Mode::Read, last, &mut sites);
                    e.bink(BinaryOp::Add, w.cells[last], node.offset_in_parent)
                }
            };
            // Any activity bit of the block, or a non-empty list.
            let any = e.local("any", Type::U32);
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
    };
    e.if_(active, |e| {
        let ca = e.u32c(list.count);
        let one = e.u32c(1);
        let at = e.atomic(AtomicOp::Add, root, ca, one, None);
        let ia = e.bink(BinaryOp::Add, at, list.items);
        e.store(root, ia, s);
    });
    let body = std::mem::take(&mut e.out);
    f.body = body;
    debug_assert!(sites.is_empty(), "reading walks never trap");
    system_kernel(name, list.len, f)
}
