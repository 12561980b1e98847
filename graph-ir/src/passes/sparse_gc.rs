//! Adds the garbage-collection system kernels of pointer nodes.
//!
//! Pre: lowered IR (`IrForm::Lowered`). Post: the same, plus one kernel per
//! pointer node (named after the node, iterating over its pool's slots),
//! launched at the end of `on_start` and of every frame, outer pointer nodes
//! first. Nothing is added for programs without pointer nodes.
//!
//! Each invocation looks at one slot. A slot in use (bitmap bit set, owner
//! word set) is freed when
//! - it is an orphan: its owner cell, found again from the coordinate in the
//!   owner word, no longer refers to it (`deactivate` nulled the cell, or an
//!   outer block was freed and reset), or
//! - its contents have sparse children and none of them is active any more
//!   (the block's last active child went): the owner cell is nulled first.
//!
//! Freeing resets the slot's words from the node's initial image, clears the
//! owner word, then clears the bitmap bit, which keeps the invariant that
//! every free slot is an initial cell (allocation never writes a slot it has
//! not won). GC runs in its own dispatch, after every write of the frame,
//! so it never races with activation.

use crate::arena::Arena;
use crate::ir::layout::{activity_ranges, level_plans, MAX_ACTIVITY_RANGES, WORD_BITS};
use crate::ir::*;
use crate::lower::emit::Build;
use crate::lower::sparse::{self, Emitter, Mode};
use crate::types::Type;

pub fn run(program: &mut Program) {
    let mut order = Vec::new();
    fn preorder(p: &Program, l: LayoutId, out: &mut Vec<LayoutId>) {
        out.push(l);
        for c in &p.layouts[l].children {
            if let LayoutChild::Layout(cl) = *c {
                preorder(p, cl, out);
            }
        }
    }
    for r in program.roots().collect::<Vec<_>>() {
        preorder(program, r, &mut order);
    }
    let mut launches = Vec::new();
    for l in order {
        if matches!(program.layouts[l].kind, LayoutKind::Pointer { .. }) {
            let k = gc_kernel(program, l);
            launches.push(Step::Launch(program.kernels.append(k)));
        }
    }
    program.schedule.on_start.extend(launches.iter().cloned());
    program.schedule.on_frame.extend(launches);
}

pub(super) fn gc_kernel(p: &Program, l: LayoutId) -> Kernel {
    let node = &p.layouts[l];
    let pool = node.pool.expect("pointer nodes have a pool");
    let levels = level_plans(p, l);
    let root = levels[0].node;
    let at = levels.len() - 1;
    let cw = levels[at].cell_bits / WORD_BITS;
    let ranges = activity_ranges(p, l);
    let auto_free = !ranges.is_empty() && ranges.len() <= MAX_ACTIVITY_RANGES;
    let mut f = Function::new(&node.node_id, vec![Type::I32], Type::Void, Span::default());
    let mut sites = Vec::new();
    let mut e = Emitter {
        f: &mut f,
        out: vec![],
        span: Span::default(),
    };
    let arg = e.emit(InstKind::Arg(0), Type::I32);
    let s = e.emit(InstKind::Cast(arg), Type::U32);
    let word = e.bink(BinaryOp::Shr, s, 5);
    let maddr = e.bink(BinaryOp::Add, word, pool.bitmap);
    let low = e.bink(BinaryOp::BitAnd, s, 31);
    let one = e.u32c(1);
    let bit = e.bin(BinaryOp::Shl, one, low);
    let bits = e.load(root, maddr);
    let has = e.bin(BinaryOp::BitAnd, bits, bit);
    let used = e.cmpk(BinaryOp::Ne, has, 0);
    let oaddr = e.bink(BinaryOp::Add, s, pool.owner);
    let owner = e.load(root, oaddr);
    let owned = e.cmpk(BinaryOp::Ne, owner, 0);
    let in_use = e.and(used, owned);
    e.if_(in_use, |e| {
        // The owner cell's coordinate, unravelled row-major per axis.
        let mut c = e.bink(BinaryOp::Sub, owner, 1);
        let dims = levels[at].axes.len();
        let mut idx = vec![c; dims];
        for d in (0..dims).rev() {
            let ext = levels[at].axes[d].coord_extent;
            idx[d] = e.bink(BinaryOp::Rem, c, ext);
            c = e.bink(BinaryOp::Div, c, ext);
        }
        let w = sparse::walk(e, root, &levels, &idx, Mode::Probe, at, &mut sites);
        let pa = e.bin(BinaryOp::Add, w.blocks[at], w.lins[at]);
        let r = e.load(root, pa);
        let s1 = e.bink(BinaryOp::Add, s, 1);
        let mine = e.cmp(BinaryOp::Eq, r, s1);
        let live = e.and(w.active.expect("probed"), mine);
        let free = e.new_local("free", Type::BOOL);
        let orphan = e.not(live);
        e.set(free, orphan);
        if auto_free {
            e.if_(live, |e| {
                let any = e.new_local("any", Type::U32);
                let z = e.u32c(0);
                e.set(any, z);
                let base = e.bink(BinaryOp::Mul, s, cw);
                let base = e.bink(BinaryOp::Add, base, pool.data);
                for &(off, len) in &ranges {
                    let start = e.bink(BinaryOp::Add, base, off);
                    e.for_n(len, |e, i| {
                        let a = e.bin(BinaryOp::Add, start, i);
                        let v = e.load(root, a);
                        let acc = e.get(any);
                        let acc = e.bin(BinaryOp::BitOr, acc, v);
                        e.set(any, acc);
                    });
                }
                let acc = e.get(any);
                let empty = e.cmpk(BinaryOp::Eq, acc, 0);
                e.if_(empty, |e| {
                    let z = e.u32c(0);
                    e.store(root, pa, z);
                    let t = e.emit(InstKind::Const(Const::bool(true)), Type::BOOL);
                    e.set(free, t);
                });
            });
        }
        let go = e.get(free);
        e.if_(go, |e| {
            let base = e.bink(BinaryOp::Mul, s, cw);
            let dst = e.bink(BinaryOp::Add, base, pool.data);
            let image = e.u32c(node.image);
            sparse::copy_words(e, root, image, dst, cw);
            let z = e.u32c(0);
            e.store(root, oaddr, z);
            let mask = e.not(bit);
            e.atomic(AtomicOp::And, root, maddr, mask, None);
        });
    });
    let body = std::mem::take(&mut e.out);
    f.body = body;
    debug_assert!(sites.is_empty(), "probing walks never trap");
    Kernel {
        fused: Vec::new(),
        name: node.node_id.clone(),
        iteration: Iteration::Range(vec![pool.capacity]),
        dims: 1,
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
