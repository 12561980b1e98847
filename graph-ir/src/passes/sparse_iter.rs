//! Struct-for over sparse fields: a kernel `over` a field whose layout has
//! sparse levels visits only the active cells.
//!
//! Pre: lowered IR (`IrForm::Lowered`). Post: the same, where every kernel
//! that iterated over the cells of a sparse field iterates over a plain
//! range instead, with the loop indices computed and checked in IR:
//! - with a pointer level on the path, the range is (pool slots of the
//!   innermost pointer node P) × (the field's cells inside one cell of P). A
//!   slot in use gives P's cell coordinate through its owner word; the
//!   invocation runs the body only when that cell still refers to the slot
//!   and every level is active. Work is proportional to the pool's capacity,
//!   not to the virtual domain, and is decided on the device (no readback);
//! - else with a hash root, the range is (table slots) × (the field's cells
//!   inside one hash cell); a slot holding a live key gives the cell's
//!   coordinate from its key words;
//! - with only bitmasked / dynamic levels, the range stays the field's
//!   shape and the body runs for active cells (appended elements) only.
//!
//! Loop indices then come from locals (the body's `Arg` instructions are
//! rewritten to read them), so the body itself is unchanged. Random numbers
//! are drawn per launch index, so they differ from a dense run's.

use super::sparse_ir::{self, Emitter, Mode};
use crate::ir::layout::AddressPlan;
use crate::ir::*;
use crate::types::Type;

pub fn run(program: &mut Program) {
    for k in program.kernels.handles().collect::<Vec<_>>() {
        let Iteration::Field(field) = program.kernels[k].iteration else {
            continue;
        };
        let plan = AddressPlan::new(program, field);
        if !plan.is_sparse() {
            continue;
        }
        let kernel = &mut program.kernels[k];
        let shape = program.fields[field].shape.clone();
        rewrite(kernel, &plan, &shape);
    }
}

fn rewrite(kernel: &mut Kernel, plan: &AddressPlan, shape: &[u32]) {
    let dims = shape.len();
    let root = plan.root;
    let pointer = plan
        .levels
        .iter()
        .rposition(|l| matches!(l.kind, LayoutKind::Pointer { .. }));
    let f = &mut kernel.entry;
    // The body's loop indices become locals.
    let idx_locals: Vec<LocalId> = (0..dims)
        .map(|d| {
            f.locals.append(Local {
                name: format!("index{}", d),
                ty: Type::I32,
            })
        })
        .collect();
    for h in f.insts.handles().collect::<Vec<_>>() {
        if let InstKind::Arg(d) = f.insts[h].kind {
            f.insts[h].kind = InstKind::LocalLoad(idx_locals[d as usize]);
        }
    }
    let body = std::mem::take(&mut f.body);
    let mut sites = std::mem::take(&mut kernel.fault_sites);
    let span = f.span;
    let mut e = Emitter {
        f,
        out: vec![],
        span,
    };
    let hash = match plan.levels[0].kind {
        LayoutKind::Hash { capacity } if pointer.is_none() => Some(capacity),
        _ => None,
    };
    let (idx, check) = match (pointer, hash) {
        (None, Some(capacity)) => {
            // Slots × cells inside one hash cell; a slot holding a live key
            // gives the cell's coordinate.
            let level = &plan.levels[0];
            let nk = level.axes.len() as u64;
            let stride = nk + level.cell_bits / crate::ir::layout::WORD_BITS;
            let a0 = e.emit(InstKind::Arg(0), Type::I32);
            let a1 = e.emit(InstKind::Arg(1), Type::I32);
            let s = e.emit(InstKind::Cast(a0), Type::U32);
            let mut sub = e.emit(InstKind::Cast(a1), Type::U32);
            let base = e.bink(BinaryOp::Mul, s, stride);
            let k0 = e.load(root, base);
            let used = e.cmpk(BinaryOp::Ne, k0, 0);
            let live = e.cmpk(BinaryOp::Ne, k0, HASH_TOMBSTONE as u64);
            let mut ok = e.and(used, live);
            let mut idx = vec![s; dims];
            for d in (0..dims).rev() {
                let step = level.axes[d];
                let ka = e.bink(BinaryOp::Add, base, d as u64);
                let kd = e.load(root, ka);
                let set = e.cmpk(BinaryOp::Ne, kd, 0);
                ok = e.and(ok, set);
                let g = e.bink(BinaryOp::Sub, kd, 1);
                let l = e.bink(BinaryOp::Rem, sub, step.divisor);
                sub = e.bink(BinaryOp::Div, sub, step.divisor);
                let gd = e.bink(BinaryOp::Mul, g, step.divisor);
                idx[d] = e.bin(BinaryOp::Add, gd, l);
            }
            // Deeper sparse levels (and the hash cell itself) must be active.
            let last = plan.levels.len() - 1;
            let w = sparse_ir::walk(
                &mut e,
                root,
                &plan.levels,
                &idx,
                Mode::Probe,
                last,
                &mut sites,
            );
            let ok = e.and(ok, w.active.expect("probed"));
            let cells_per_slot: u64 = level.axes.iter().map(|a| a.divisor).product();
            kernel.iteration = Iteration::Range(vec![capacity, cells_per_slot as u32]);
            (idx, ok)
        }
        (Some(pl), _) => {
            let level = &plan.levels[pl];
            let pool = level.pool.expect("pointer levels have a pool");
            let a0 = e.emit(InstKind::Arg(0), Type::I32);
            let a1 = e.emit(InstKind::Arg(1), Type::I32);
            let s = e.emit(InstKind::Cast(a0), Type::U32);
            let mut sub = e.emit(InstKind::Cast(a1), Type::U32);
            let oaddr = e.bink(BinaryOp::Add, s, pool.owner);
            let owner = e.load(root, oaddr);
            let owned = e.cmpk(BinaryOp::Ne, owner, 0);
            let mut c = e.bink(BinaryOp::Sub, owner, 1);
            // idx_d = (P's coordinate)_d * divisor_d + (cell inside P's cell)_d.
            let mut idx = vec![s; dims];
            for d in (0..dims).rev() {
                let step = level.axes[d];
                let g = e.bink(BinaryOp::Rem, c, step.coord_extent);
                c = e.bink(BinaryOp::Div, c, step.coord_extent);
                let l = e.bink(BinaryOp::Rem, sub, step.divisor);
                sub = e.bink(BinaryOp::Div, sub, step.divisor);
                let gd = e.bink(BinaryOp::Mul, g, step.divisor);
                idx[d] = e.bin(BinaryOp::Add, gd, l);
            }
            let last = plan.levels.len() - 1;
            let w = sparse_ir::walk(
                &mut e,
                root,
                &plan.levels,
                &idx,
                Mode::Probe,
                last,
                &mut sites,
            );
            let pa = e.bin(BinaryOp::Add, w.blocks[pl], w.lins[pl]);
            let r = e.load(root, pa);
            let s1 = e.bink(BinaryOp::Add, s, 1);
            let mine = e.cmp(BinaryOp::Eq, r, s1);
            let ok = e.and(owned, mine);
            let ok = e.and(ok, w.active.expect("probed"));
            let cells_per_block: u64 = level.axes.iter().map(|a| a.divisor).product();
            kernel.iteration = Iteration::Range(vec![pool.capacity, cells_per_block as u32]);
            (idx, ok)
        }
        (None, None) => {
            let idx: Vec<InstId> = (0..dims)
                .map(|d| {
                    let a = e.emit(InstKind::Arg(d as u32), Type::I32);
                    e.emit(InstKind::Cast(a), Type::U32)
                })
                .collect();
            let last = plan.levels.len() - 1;
            let w = sparse_ir::walk(
                &mut e,
                root,
                &plan.levels,
                &idx,
                Mode::Probe,
                last,
                &mut sites,
            );
            kernel.iteration = Iteration::Range(shape.to_vec());
            (idx, w.active.expect("probed"))
        }
    };
    let stores = e.block(|e| {
        for (d, &i) in idx.iter().enumerate() {
            let v = e.emit(InstKind::Cast(i), Type::I32);
            e.set(idx_locals[d], v);
        }
    });
    let mut accept = stores;
    accept.extend(body);
    e.emit(
        InstKind::If {
            cond: check,
            accept,
            reject: vec![],
        },
        Type::Void,
    );
    let out = std::mem::take(&mut e.out);
    let f = &mut kernel.entry;
    f.body = out;
    if pointer.is_some() || hash.is_some() {
        f.args = vec![Type::I32, Type::I32];
        kernel.dims = 2;
    }
    kernel.fault_sites = sites;
}
