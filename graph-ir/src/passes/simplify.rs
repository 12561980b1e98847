//! Simplification and dead-code elimination.
//!
//! Pre: valid IR. Post: valid IR where
//! - integer `x + 0`, `x - 0`, `x * 1`, `0 + x`, `1 * x` are replaced by `x`;
//! - `v[k]` with a constant `k` in range becomes a fixed component extract;
//! - a component of an integer vector operation with a built operand,
//!   `(a + vec2(0, 1)).y`, becomes the scalar operation on components,
//!   `a.y + 1` (index math of unrolled stencils: the cells' indices then
//!   share their axes' values, so CSE and `bounds_elim` see `a.y + 1` for
//!   every cell in that column instead of nine unrelated vectors);
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
    let body = std::mem::take(&mut f.body);
    f.body = scalarize_extracts(f, body);
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

fn is_const(f: &Function, h: InstId, v: u64) -> bool {
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
                if c.scalar.is_integer() && c.bits < n as u64 {
                    f.insts[h].kind = InstKind::Extract(v, c.bits as u32);
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

/// `Extract(Binary(op, a, b), i)` on integer vectors, where `a` or `b` is
/// a `Construct`, becomes `Binary(op, a[i], b[i])`; a built operand's
/// component is its scalar part itself, any other a new `Extract` placed
/// before the instruction. Integer operations are exact per component, so
/// no value changes.
fn scalarize_extracts(f: &mut Function, block: Block) -> Block {
    let mut out = Vec::with_capacity(block.len());
    for h in block {
        let mut kind = std::mem::replace(&mut f.insts[h].kind, InstKind::Break);
        for b in kind.blocks_mut() {
            *b = scalarize_extracts(f, std::mem::take(b));
        }
        f.insts[h].kind = kind;
        if let Some((op, a, b, i)) = scalarizable(f, h) {
            let span = f.insts[h].span;
            let ty = f.insts[a].ty.scalar().map(crate::types::Type::Scalar);
            let mut component = |v: InstId, out: &mut Vec<InstId>| {
                if let Some(p) = f.construct_part(v, i) {
                    return p;
                }
                let e = f.detached(
                    InstKind::Extract(v, i),
                    ty.unwrap_or(crate::types::Type::Void),
                    span,
                );
                out.push(e);
                e
            };
            let ca = component(a, &mut out);
            let cb = component(b, &mut out);
            f.insts[h].kind = InstKind::Binary(op, ca, cb);
        }
        out.push(h);
    }
    out
}

fn scalarizable(f: &Function, h: InstId) -> Option<(BinaryOp, InstId, InstId, u32)> {
    let InstKind::Extract(v, i) = f.insts[h].kind else {
        return None;
    };
    let InstKind::Binary(op, a, b) = f.insts[v].kind else {
        return None;
    };
    let vt = f.insts[v].ty;
    let componentwise = !matches!(
        op,
        BinaryOp::MatMul | BinaryOp::LogicalAnd | BinaryOp::LogicalOr
    );
    let ints = vt.is_vector() && vt.is_int() && !op.is_comparison();
    let same = f.insts[a].ty == vt && f.insts[b].ty == vt;
    let built = |x: InstId| matches!(f.insts[x].kind, InstKind::Construct(_));
    (componentwise && ints && same && (built(a) || built(b))).then_some((op, a, b, i))
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
