//! Simplification and dead-code elimination.
//!
//! Pre: valid IR. Post: valid IR where
//! - integer `x + 0`, `x - 0`, `x * 1`, `0 + x`, `1 * x` are replaced by `x`;
//! - `v[k]` with a constant `k` in range becomes a fixed component extract;
//! - `if` on a constant condition is replaced by the taken branch;
//! - stores to locals that are never loaded are removed;
//! - pure instructions whose values are unused are removed (to a fixpoint).
//!
//! Does not move code across control flow, merge blocks or touch atomics,
//! stores, calls, `random()` or bounds checks.

use crate::ir::*;
use std::collections::HashSet;

pub fn run(program: &mut Program) {
    super::each_function(program, simplify_function);
}

pub fn simplify_function(f: &mut Function) {
    identities(f);
    let body = std::mem::take(&mut f.body);
    f.body = const_ifs(f, body);
    loop {
        let live = live_values(f);
        let loaded: HashSet<LocalId> = reachable(f)
            .into_iter()
            .filter_map(|h| match f.insts[h].kind {
                InstKind::LocalLoad(l) => Some(l),
                _ => None,
            })
            .collect();
        let mut removed = false;
        let body = std::mem::take(&mut f.body);
        f.body = sweep(f, body, &live, &loaded, &mut removed);
        if !removed {
            break;
        }
    }
}

fn is_const(f: &Function, h: InstId, v: u32) -> bool {
    matches!(f.insts[h].kind, InstKind::Const(c) if c.bits == v && c.scalar.is_integer())
}

fn identities(f: &mut Function) {
    let handles: Vec<InstId> = f.insts.handles().collect();
    let mut subst: Vec<(InstId, InstId)> = Vec::new();
    for &h in &handles {
        // A computed index that is a constant in range (e.g. a counter of an
        // unrolled loop) picks a fixed component.
        if let InstKind::ExtractDyn(v, k) = f.insts[h].kind {
            if let InstKind::Const(c) = f.insts[k].kind {
                let n = match f.insts[v].ty {
                    crate::types::Type::Vector(_, n) | crate::types::Type::Matrix(n) => n as u32,
                    _ => 0,
                };
                if c.scalar.is_integer() && c.bits < n {
                    f.insts[h].kind = InstKind::Extract(v, c.bits);
                }
            }
        }
        if !f.insts[h].ty.is_int() || !f.insts[h].ty.is_scalar() {
            continue;
        }
        if let InstKind::Binary(op, a, b) = f.insts[h].kind {
            let r = match op {
                BinaryOp::Add if is_const(f, b, 0) => Some(a),
                BinaryOp::Add if is_const(f, a, 0) => Some(b),
                BinaryOp::Sub if is_const(f, b, 0) => Some(a),
                BinaryOp::Mul if is_const(f, b, 1) => Some(a),
                BinaryOp::Mul if is_const(f, a, 1) => Some(b),
                _ => None,
            };
            if let Some(r) = r {
                subst.push((h, r));
            }
        }
    }
    if subst.is_empty() {
        return;
    }
    let resolve = |mut x: InstId| {
        while let Some(&(_, to)) = subst.iter().find(|(from, _)| *from == x) {
            x = to;
        }
        x
    };
    for &h in &handles {
        f.insts[h].kind.map_operands(resolve);
    }
}

fn const_ifs(f: &mut Function, block: Block) -> Block {
    let mut out = Vec::with_capacity(block.len());
    for h in block {
        let mut kind = f.insts[h].kind.clone();
        for b in kind.blocks_mut() {
            *b = const_ifs(f, std::mem::take(b));
        }
        if let InstKind::If {
            cond,
            accept,
            reject,
        } = &kind
        {
            if let InstKind::Const(c) = f.insts[*cond].kind {
                out.extend(if c.bits != 0 {
                    accept.clone()
                } else {
                    reject.clone()
                });
                continue;
            }
        }
        f.insts[h].kind = kind;
        out.push(h);
    }
    out
}

fn reachable(f: &Function) -> Vec<InstId> {
    fn walk(f: &Function, b: &Block, out: &mut Vec<InstId>) {
        for &h in b {
            out.push(h);
            for nb in f.insts[h].kind.blocks() {
                walk(f, nb, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(f, &f.body, &mut out);
    out
}

fn live_values(f: &Function) -> HashSet<InstId> {
    let mut used = HashSet::new();
    for h in reachable(f) {
        used.extend(f.insts[h].kind.operands());
        if let InstKind::LoopCounter(l) = f.insts[h].kind {
            used.insert(l);
        }
    }
    used
}

fn sweep(
    f: &mut Function,
    block: Block,
    live: &HashSet<InstId>,
    loaded: &HashSet<LocalId>,
    removed: &mut bool,
) -> Block {
    let mut out = Vec::with_capacity(block.len());
    for h in block {
        let mut kind = f.insts[h].kind.clone();
        for b in kind.blocks_mut() {
            *b = sweep(f, std::mem::take(b), live, loaded, removed);
        }
        let dead = match &kind {
            InstKind::LocalStore(l, _) => !loaded.contains(l),
            k => k.is_pure() && !live.contains(&h),
        };
        if dead {
            *removed = true;
            continue;
        }
        f.insts[h].kind = kind;
        out.push(h);
    }
    out
}
