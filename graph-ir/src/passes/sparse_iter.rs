//! Struct-for over sparse fields: a kernel `over` a field whose layout has
//! sparse levels visits only the active cells, and its launch follows the
//! number of active blocks, not the layout's capacity.
//!
//! Pre: lowered IR (`IrForm::Lowered`). Post: the same, where every kernel
//! that iterated over the cells of a sparse field iterates over (entries of
//! an element list) × (the field's cells inside one listed block), with
//! `Kernel::count_from` naming the list's length word so that backends launch
//! only the rows in use. `passes::sparse_list` adds the system kernels that
//! fill the list before each such launch; which list:
//! - with a pointer level on the path, the innermost pointer node P's list
//!   of pool slots in use. A slot gives P's cell coordinate through its
//!   owner word; the invocation runs the body only when that cell still
//!   refers to the slot and every level is active;
//! - else with a hash root, the list of table slots holding live keys; a
//!   slot's key words give the cell's coordinate;
//! - else (bitmasked / dynamic levels under dense ones only) the outermost
//!   sparse node's list of blocks with an active cell (a non-zero activity
//!   header or list length); the body runs for active cells (appended
//!   elements) only.
//!
//! Every invocation first checks its row against that length (GPU backends
//! round the launch up to whole workgroups). Loop indices then come from
//! locals (the body's `Arg` instructions are rewritten to read them), so the
//! body itself is unchanged. Random numbers are drawn per launch index, so
//! they differ from a dense run's.

use crate::ir::layout::AddressPlan;
use crate::ir::*;
use crate::lower::emit::Build;
use crate::lower::sparse::{self, Emitter, Mode};
use crate::types::Type;

/// Rewrites every struct-for over a sparse field; returns each rewritten
/// kernel with the layout node whose element list it runs over.
pub fn run(program: &mut Program) -> Vec<(KernelId, LayoutId)> {
    let mut users = Vec::new();
    for k in program.kernels.handles().collect::<Vec<_>>() {
        let Iteration::Field(field) = program.kernels[k].iteration else {
            continue;
        };
        let plan = AddressPlan::new(program, field);
        if !plan.is_sparse() {
            continue;
        }
        let li = plan.list_level();
        let list = program.layouts[plan.levels[li].node]
            .list
            .expect("layout::compute gives every listed node a list");
        let kernel = &mut program.kernels[k];
        let shape = program.fields[field].shape.clone();
        rewrite(kernel, &plan, &shape, li, list);
        users.push((k, plan.levels[li].node));
    }
    users
}

fn rewrite(kernel: &mut Kernel, plan: &AddressPlan, shape: &[u32], li: usize, list: ListWords) {
    let dims = shape.len();
    let root = plan.root;
    let pointer = matches!(plan.levels[li].kind, LayoutKind::Pointer { .. }).then_some(li);
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
    // Rows past the list's length do nothing; a row's list entry is `s`.
    let a0 = e.emit(InstKind::Arg(0), Type::I32);
    let a1 = e.emit(InstKind::Arg(1), Type::I32);
    let row = e.emit(InstKind::Cast(a0), Type::U32);
    let mut sub = e.emit(InstKind::Cast(a1), Type::U32);
    let count = e.u32c(list.count);
    let count = e.load(root, count);
    let in_list = e.cmp(BinaryOp::Lt, row, count);
    let prologue = std::mem::take(&mut e.out);
    let ia = e.bink(BinaryOp::Add, row, list.items);
    let s = e.load(root, ia);
    let (idx, check) = match (pointer, hash) {
        (None, Some(_)) => {
            // Table slots × cells inside one hash cell; a slot holding a
            // live key gives the cell's coordinate.
            let level = &plan.levels[0];
            let nk = level.axes.len() as u64;
            let stride = nk + level.cell_bits / crate::ir::layout::WORD_BITS;
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
            let w = sparse::walk(
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
            kernel.iteration = Iteration::Range(vec![list.len, cells_per_slot as u32]);
            (idx, ok)
        }
        (Some(pl), _) => {
            let level = &plan.levels[pl];
            let pool = level.pool.expect("pointer levels have a pool");
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
            let w = sparse::walk(
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
            kernel.iteration = Iteration::Range(vec![list.len, cells_per_block as u32]);
            (idx, ok)
        }
        (None, None) => {
            // Blocks of the outermost sparse level L (cells of its parent,
            // whose levels are all dense) × the field's cells in one block.
            // idx_d = (block coordinate)_d * per_d + (cell inside the block)_d.
            let (per, ext): (Vec<u64>, Vec<u64>) = if li == 0 {
                (shape.iter().map(|&x| x as u64).collect(), vec![1; dims])
            } else {
                let p = &plan.levels[li - 1];
                p.axes.iter().map(|a| (a.divisor, a.coord_extent)).unzip()
            };
            let mut c = s;
            let mut idx = vec![s; dims];
            for d in (0..dims).rev() {
                let g = e.bink(BinaryOp::Rem, c, ext[d]);
                c = e.bink(BinaryOp::Div, c, ext[d]);
                let l = e.bink(BinaryOp::Rem, sub, per[d]);
                sub = e.bink(BinaryOp::Div, sub, per[d]);
                let gd = e.bink(BinaryOp::Mul, g, per[d]);
                idx[d] = e.bin(BinaryOp::Add, gd, l);
            }
            let last = plan.levels.len() - 1;
            let w = sparse::walk(
                &mut e,
                root,
                &plan.levels,
                &idx,
                Mode::Probe,
                last,
                &mut sites,
            );
            let cells_per_block: u64 = per.iter().product();
            kernel.iteration = Iteration::Range(vec![list.len, cells_per_block as u32]);
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
    let listed = std::mem::replace(&mut e.out, prologue);
    e.emit(
        InstKind::If {
            cond: in_list,
            accept: listed,
            reject: vec![],
        },
        Type::Void,
    );
    let out = std::mem::take(&mut e.out);
    let f = &mut kernel.entry;
    f.body = out;
    f.args = vec![Type::I32, Type::I32];
    kernel.dims = 2;
    kernel.count_from = Some(DeviceCount {
        root,
        word: list.count,
    });
    kernel.fault_sites = sites;
}
