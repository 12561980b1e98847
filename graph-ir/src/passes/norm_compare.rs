//! Compares squared lengths instead of lengths: `length(v) < c` becomes
//! `dot(v, v) < T(c)` with a threshold computed at compile time, so the
//! comparison gives the same answer for every `v` without a square root.
//!
//! Pre: valid IR. Post: valid IR where a comparison (`<`, `<=`, `>`, `>=`,
//! either operand order) of `length(v)` or `distance(a, b)` (f32 vectors)
//! with a finite positive f32 constant `c`, when the length has no other
//! use, compares `dot(v, v)` (`dot(a - b, a - b)`) with a constant instead.
//! Nothing else changes.
//!
//! Why it is exact: every backend computes `length(v)` as
//! `sqrt(dot(v, v))`, the dot product in the same order as `dot`, and the
//! squared sum `s` is never negative (or NaN). A correctly rounded square
//! root is monotone, so `sqrt(s) < c` holds exactly when `s` is below the
//! smallest `s` whose root rounds to `c` or more; that bound is found by a
//! binary search over f32 values with the host's `sqrt` (IEEE, correctly
//! rounded). `<=`/`>` use the smallest `s` whose root rounds above `c`.
//! NaN and infinities compare the same way on both sides. On GPUs, whose
//! `sqrt` may be a few ulp off, the rewritten test is the exact one.
//!
//! Why: a square root per comparison is the most expensive operation in an
//! escape-time loop (julia's `while length(z) < 20.0`): 12–15 % of that
//! kernel on lavapipe.

use crate::ir::*;
use crate::types::{Scalar, Type};

pub fn run(program: &mut Program) {
    super::each_function(program, rewrite_function);
}

pub fn rewrite_function(f: &mut Function) {
    let mut uses = vec![0u32; f.insts.len()];
    for (_, inst) in f.insts.iter() {
        for o in inst.kind.operands() {
            uses[o.index()] += 1;
        }
    }
    let body = std::mem::take(&mut f.body);
    f.body = rewrite_block(f, &uses, body);
}

fn rewrite_block(f: &mut Function, uses: &[u32], block: Block) -> Block {
    let mut out = Vec::with_capacity(block.len());
    for h in block {
        let mut kind = std::mem::replace(&mut f.insts[h].kind, InstKind::Break);
        for b in kind.blocks_mut() {
            *b = rewrite_block(f, uses, std::mem::take(b));
        }
        f.insts[h].kind = kind;
        if let Some((norm, op, threshold)) = matched(f, uses, h) {
            let span = f.insts[h].span;
            // The difference of `distance`'s operands, then the squared sum,
            // in place of the norm (its only user is this comparison).
            let v = match f.insts[norm].kind.clone() {
                InstKind::Builtin(Builtin::Distance, args) => {
                    let d = f.detached(
                        InstKind::Binary(BinaryOp::Sub, args[0], args[1]),
                        f.insts[args[0]].ty,
                        span,
                    );
                    out.push(d);
                    d
                }
                InstKind::Builtin(_, args) => args[0],
                _ => unreachable!("matched() only accepts length and distance"),
            };
            let squared = f.detached(
                InstKind::Builtin(Builtin::Dot, vec![v, v]),
                Type::Scalar(Scalar::F32),
                span,
            );
            let bound = f.detached(
                InstKind::Const(Const::f32(threshold)),
                Type::Scalar(Scalar::F32),
                span,
            );
            out.push(squared);
            out.push(bound);
            f.insts[h].kind = InstKind::Binary(op, squared, bound);
        }
        out.push(h);
    }
    out
}

/// (the length or distance, the comparison on the squared sum, its bound).
fn matched(f: &Function, uses: &[u32], h: InstId) -> Option<(InstId, BinaryOp, f32)> {
    let InstKind::Binary(op, a, b) = f.insts[h].kind else {
        return None;
    };
    // Put the norm on the left: `c < n` is `n > c`.
    let (norm, c, op) = match (positive_const(f, a), positive_const(f, b)) {
        (None, Some(c)) => (a, c, op),
        (Some(c), None) => (b, c, flip(op)?),
        _ => return None,
    };
    let is_norm = match &f.insts[norm].kind {
        InstKind::Builtin(Builtin::Length | Builtin::Distance, args) => {
            matches!(f.insts[args[0]].ty, Type::Vector(Scalar::F32, _))
        }
        _ => false,
    };
    if !is_norm || uses[norm.index()] != 1 {
        return None;
    }
    // sqrt(s) < c  <=>  s < T(>= c);   sqrt(s) >= c <=> s >= T(>= c)
    // sqrt(s) <= c <=>  s < T(> c);    sqrt(s) > c  <=> s >= T(> c)
    Some(match op {
        BinaryOp::Lt => (norm, BinaryOp::Lt, first_root_reaching(c, false)),
        BinaryOp::Ge => (norm, BinaryOp::Ge, first_root_reaching(c, false)),
        BinaryOp::Le => (norm, BinaryOp::Lt, first_root_reaching(c, true)),
        BinaryOp::Gt => (norm, BinaryOp::Ge, first_root_reaching(c, true)),
        _ => return None,
    })
}

fn flip(op: BinaryOp) -> Option<BinaryOp> {
    Some(match op {
        BinaryOp::Lt => BinaryOp::Gt,
        BinaryOp::Le => BinaryOp::Ge,
        BinaryOp::Gt => BinaryOp::Lt,
        BinaryOp::Ge => BinaryOp::Le,
        _ => return None,
    })
}

fn positive_const(f: &Function, v: InstId) -> Option<f32> {
    match f.insts[v].kind {
        InstKind::Const(c) if c.scalar == Scalar::F32 => {
            let x = f32::from_bits(c.lo());
            (x.is_finite() && x > 0.0).then_some(x)
        }
        _ => None,
    }
}

/// The smallest non-negative f32 `s` whose square root rounds to at least
/// `c` (`strictly`: above `c`); +inf when no finite one does. Non-negative
/// floats order like their bit patterns.
pub fn first_root_reaching(c: f32, strictly: bool) -> f32 {
    let reaches = |bits: u32| {
        let r = f32::from_bits(bits).sqrt();
        if strictly {
            r > c
        } else {
            r >= c
        }
    };
    let (mut lo, mut hi) = (0u32, f32::INFINITY.to_bits());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if reaches(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    f32::from_bits(lo)
}

#[cfg(test)]
mod tests {
    use super::first_root_reaching;

    #[test]
    fn thresholds_agree_with_sqrt_on_both_sides() {
        for c in [20.0f32, 1.0, 0.5, 3.0e-20, 1.0e19, 2.0f32.sqrt(), 7.25] {
            for strictly in [false, true] {
                let t = first_root_reaching(c, strictly);
                let below = f32::from_bits(t.to_bits() - 1);
                let holds = |s: f32| {
                    if strictly {
                        s.sqrt() > c
                    } else {
                        s.sqrt() >= c
                    }
                };
                assert!(holds(t), "c {} strictly {}: T {}", c, strictly, t);
                assert!(
                    !holds(below),
                    "c {} strictly {}: below T {}",
                    c,
                    strictly,
                    below
                );
            }
        }
        // sqrt(399.99997) rounds to 20: the bound sits below 400.
        assert_eq!(first_root_reaching(20.0, false), 399.99997);
    }
}
