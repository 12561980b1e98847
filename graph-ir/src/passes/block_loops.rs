//! Workgroup kernels for targets that run one invocation at a time (the VM
//! and the cpu JIT): each block becomes one invocation that runs its
//! threads in loops, one loop per stretch of code between barriers.
//!
//! Pre: valid `IrForm::Legalized` IR; a workgroup kernel (`Kernel::workgroup`
//! with size B > 1) runs over a dense range that B divides, has no `Return`
//! in its entry, and has its barriers at the top level of its entry (the
//! front end's rules, see `lang::lower::shared`; the validator checks the
//! placement and the range).
//! Post: valid legalized IR in which every workgroup kernel has size 1 and
//! no `Barrier`: it iterates over its blocks (`range [total / B]`, one i32
//! argument), and its entry is, per region (the statements between two
//! barriers), a loop over the block's threads t = 0..B that sets what the
//! region reads of its invocation (loop indices, linear index) and runs
//! the region. What outlives a region lives per thread in arrays of B
//! elements added to `Workgroup::arrays`: SSA values used by a later region
//! (constants, parameters and the frame are recomputed instead), locals
//! used in more than one region, and the random state of kernels that
//! draw numbers. Shared arrays stay as they are: one invocation is now the
//! whole block, so its arrays are the block's.
//!
//! Why it gives the GPU's result: between two barriers the threads of a
//! block are unordered on a GPU, and a correct program's result does not
//! depend on their order; running them one after another is one such
//! order. Every thread reaches every barrier (the front end's rules), so
//! "all threads finish region k before any starts region k + 1" is exactly
//! a barrier's guarantee. A fault stops the block's invocation, and with
//! it the launch, as a fault on the GPU fails the launch.

use crate::ir::*;
use crate::lower::emit::Build;
use crate::lower::sparse::Emitter;
use crate::types::Type;
use std::collections::{HashMap, HashSet};

pub fn run(program: &mut Program) {
    for k in program.kernels.handles().collect::<Vec<_>>() {
        let kernel = &mut program.kernels[k];
        if kernel.workgroup.as_ref().is_some_and(|w| w.size > 1) {
            block_loops(kernel);
        }
    }
}

fn block_loops(kernel: &mut Kernel) {
    let w = kernel.workgroup.as_mut().expect("a workgroup kernel");
    let size = w.size;
    let Iteration::Range(shape) = kernel.iteration.clone() else {
        unreachable!("the validator keeps workgroup kernels on ranges")
    };
    let total: u64 = shape.iter().map(|&s| s as u64).product();
    let uses_rng = std::iter::once(&kernel.entry)
        .chain(kernel.functions.iter().map(|(_, f)| f))
        .any(|f| {
            f.insts
                .iter()
                .any(|(_, i)| matches!(i.kind, InstKind::RngLoad | InstKind::RngStore(_)))
        });
    let f = &mut kernel.entry;
    let span = f.span;

    // The regions: top-level statements between barriers.
    let mut regions: Vec<Block> = vec![Vec::new()];
    for &h in &f.body {
        if matches!(f.insts[h].kind, InstKind::Barrier) {
            regions.push(Vec::new());
        } else {
            regions.last_mut().expect("a region").push(h);
        }
    }
    let mut region_of: HashMap<InstId, usize> = HashMap::new();
    for (r, b) in regions.iter().enumerate() {
        mark(f, b, r, &mut region_of);
    }

    // Per-thread state read through the thread loop's locals.
    let idx_locals: Vec<LocalId> = (0..shape.len())
        .map(|d| {
            f.locals.append(Local {
                name: format!("block.index{}", d),
                ty: Type::I32,
            })
        })
        .collect();
    let lin_local = f.locals.append(Local {
        name: "block.linear".into(),
        ty: Type::U32,
    });
    let next_local = f.locals.append(Local {
        name: "block.next_thread".into(),
        ty: Type::I32,
    });
    for h in f.insts.handles().collect::<Vec<_>>() {
        match f.insts[h].kind {
            InstKind::Arg(d) => f.insts[h].kind = InstKind::LocalLoad(idx_locals[d as usize]),
            InstKind::Launch(LaunchValue::Linear) => {
                f.insts[h].kind = InstKind::LocalLoad(lin_local)
            }
            _ => {}
        }
    }

    // Locals used in more than one region live per thread.
    let mut local_regions: HashMap<LocalId, HashSet<usize>> = HashMap::new();
    for (&h, &r) in &region_of {
        if let InstKind::LocalLoad(l) | InstKind::LocalStore(l, _) = f.insts[h].kind {
            local_regions.entry(l).or_default().insert(r);
        }
    }
    let mut per_thread: Vec<(LocalId, SharedId)> = Vec::new();
    let mut spilled: Vec<LocalId> = local_regions
        .iter()
        .filter(|(_, rs)| rs.len() > 1)
        .map(|(&l, _)| l)
        .collect();
    spilled.sort_by_key(|l| l.index());
    for l in spilled {
        let id = w.arrays.len() as SharedId;
        w.arrays.push(SharedArray {
            name: format!("thread.{}", f.locals[l].name),
            ty: f.locals[l].ty,
            len: size,
        });
        per_thread.push((l, id));
    }

    // SSA values read by a later region than their own.
    let mut crossing: Vec<(InstId, usize)> = Vec::new();
    let mut users: Vec<(InstId, usize)> = region_of.iter().map(|(&h, &r)| (h, r)).collect();
    users.sort_by_key(|(h, _)| h.index());
    let mut seen = HashSet::new();
    for &(h, r) in &users {
        for o in f.insts[h].kind.operands() {
            if region_of.get(&o).is_some_and(|&ro| ro != r) && seen.insert((o, r)) {
                crossing.push((o, r));
            }
        }
    }
    let recompute = |k: &InstKind| {
        matches!(
            k,
            InstKind::Const(_)
                | InstKind::Param(_)
                | InstKind::Frame
                | InstKind::Launch(LaunchValue::Seed | LaunchValue::Count)
        )
    };
    let mut value_array: HashMap<InstId, SharedId> = HashMap::new();
    for &(o, _) in &crossing {
        if !recompute(&f.insts[o].kind) && !value_array.contains_key(&o) {
            let id = w.arrays.len() as SharedId;
            w.arrays.push(SharedArray {
                name: format!("thread.v{}", o.index()),
                ty: f.insts[o].ty,
                len: size,
            });
            value_array.insert(o, id);
        }
    }
    let rng_array = uses_rng.then(|| {
        let id = w.arrays.len() as SharedId;
        w.arrays.push(SharedArray {
            name: "thread.rng".into(),
            ty: Type::U32,
            len: size,
        });
        id
    });

    // Build: the block index, then one thread loop per region.
    let mut e = Emitter {
        f,
        out: Vec::new(),
        span,
    };
    let mut body = Vec::new();
    let blk = e.emit_in(&mut body, InstKind::Arg(0), Type::I32);
    let blk_u = e.emit_in(&mut body, InstKind::Cast(blk), Type::U32);
    let size_u = e.konst_in(&mut body, Const::u32(size));
    let first = e.emit_in(
        &mut body,
        InstKind::Binary(BinaryOp::Mul, blk_u, size_u),
        Type::U32,
    );
    let last_region = regions.len() - 1;
    for (r, region) in regions.into_iter().enumerate() {
        let zero = e.konst_in(&mut body, Const::i32(0));
        e.emit_in(
            &mut body,
            InstKind::LocalStore(next_local, zero),
            Type::Void,
        );
        let mut lb = Vec::new();
        let t = e.emit_in(&mut lb, InstKind::LocalLoad(next_local), Type::I32);
        let size_i = e.konst_in(&mut lb, Const::i32(size as i32));
        let done = e.emit_in(
            &mut lb,
            InstKind::Binary(BinaryOp::Ge, t, size_i),
            Type::BOOL,
        );
        let brk = e.f.detached(InstKind::Break, Type::Void, span);
        e.emit_in(
            &mut lb,
            InstKind::If {
                cond: done,
                accept: vec![brk],
                reject: vec![],
            },
            Type::Void,
        );
        let one = e.konst_in(&mut lb, Const::i32(1));
        let t1 = e.emit_in(&mut lb, InstKind::Binary(BinaryOp::Add, t, one), Type::I32);
        e.emit_in(&mut lb, InstKind::LocalStore(next_local, t1), Type::Void);
        // The thread's linear index and loop indices (row-major).
        let t_u = e.emit_in(&mut lb, InstKind::Cast(t), Type::U32);
        let lin = e.emit_in(
            &mut lb,
            InstKind::Binary(BinaryOp::Add, first, t_u),
            Type::U32,
        );
        e.emit_in(&mut lb, InstKind::LocalStore(lin_local, lin), Type::Void);
        let mut rest = lin;
        for d in (0..shape.len()).rev() {
            let v = if d == 0 {
                rest
            } else {
                let ext = e.konst_in(&mut lb, Const::u32(shape[d]));
                let i = e.emit_in(
                    &mut lb,
                    InstKind::Binary(BinaryOp::Rem, rest, ext),
                    Type::U32,
                );
                rest = e.emit_in(
                    &mut lb,
                    InstKind::Binary(BinaryOp::Div, rest, ext),
                    Type::U32,
                );
                i
            };
            let vi = e.emit_in(&mut lb, InstKind::Cast(v), Type::I32);
            e.emit_in(&mut lb, InstKind::LocalStore(idx_locals[d], vi), Type::Void);
        }
        if let (Some(a), true) = (rng_array, r > 0) {
            let s = e.emit_in(
                &mut lb,
                InstKind::SharedLoad { array: a, index: t },
                Type::U32,
            );
            e.emit_in(&mut lb, InstKind::RngStore(s), Type::Void);
        }
        // Values from earlier regions: reloaded (or recomputed) here.
        let mut subst: HashMap<InstId, InstId> = HashMap::new();
        for &(o, ur) in &crossing {
            if ur != r {
                continue;
            }
            let ty = e.f.insts[o].ty;
            let v = match value_array.get(&o) {
                Some(&a) => e.emit_in(&mut lb, InstKind::SharedLoad { array: a, index: t }, ty),
                None => {
                    let k = e.f.insts[o].kind.clone();
                    e.emit_in(&mut lb, k, ty)
                }
            };
            subst.insert(o, v);
        }
        rewrite(e.f, &region, &subst, &per_thread, t);
        lb.extend(region.iter().copied());
        // Values later regions read, and the random state, saved.
        let mut saved: Vec<(InstId, SharedId)> = value_array
            .iter()
            .filter(|(o, _)| region_of.get(o) == Some(&r))
            .map(|(&o, &a)| (o, a))
            .collect();
        saved.sort_by_key(|(o, _)| o.index());
        for (o, a) in saved {
            let kind = InstKind::SharedStore {
                array: a,
                index: t,
                value: o,
            };
            e.emit_in(&mut lb, kind, Type::Void);
        }
        if let (Some(a), true) = (rng_array, r < last_region) {
            let s = e.emit_in(&mut lb, InstKind::RngLoad, Type::U32);
            let kind = InstKind::SharedStore {
                array: a,
                index: t,
                value: s,
            };
            e.emit_in(&mut lb, kind, Type::Void);
        }
        e.emit_in(&mut body, InstKind::Loop { body: lb }, Type::Void);
    }
    let f = e.f;
    f.body = body;
    f.args = vec![Type::I32];
    kernel.dims = 1;
    kernel.iteration = Iteration::Range(vec![(total / size as u64) as u32]);
    kernel.workgroup.as_mut().expect("a workgroup kernel").size = 1;
}

/// Records the region of every instruction of `b`, at any depth.
fn mark(f: &Function, b: &Block, r: usize, out: &mut HashMap<InstId, usize>) {
    for &h in b {
        out.insert(h, r);
        for nested in f.insts[h].kind.blocks() {
            mark(f, nested, r, out);
        }
    }
}

/// Points operands of `b` (at any depth) at their reloads, and turns the
/// per-thread locals' loads and stores into element `t` of their arrays.
fn rewrite(
    f: &mut Function,
    b: &Block,
    subst: &HashMap<InstId, InstId>,
    per_thread: &[(LocalId, SharedId)],
    t: InstId,
) {
    for &h in b {
        let mut kind = std::mem::replace(&mut f.insts[h].kind, InstKind::Break);
        kind.map_operands(|o| subst.get(&o).copied().unwrap_or(o));
        for nested in kind.blocks() {
            rewrite(f, nested, subst, per_thread, t);
        }
        kind = match kind {
            InstKind::LocalLoad(l) => match per_thread.iter().find(|p| p.0 == l) {
                Some(&(_, a)) => InstKind::SharedLoad { array: a, index: t },
                None => InstKind::LocalLoad(l),
            },
            InstKind::LocalStore(l, v) => match per_thread.iter().find(|p| p.0 == l) {
                Some(&(_, a)) => InstKind::SharedStore {
                    array: a,
                    index: t,
                    value: v,
                },
                None => InstKind::LocalStore(l, v),
            },
            other => other,
        };
        f.insts[h].kind = kind;
    }
}
