//! Atomic demotion: a compare-exchange loop or an atomic on a word that only
//! one iteration of the launch ever writes becomes a plain load, modify, store.
//!
//! Pre: lowered IR after CSE (and `store_fusion`). Post: in every kernel
//! whose writes into a root buffer provably never share a word between
//! iterations, each `lower::quantize::CasLoop` on that root is straight-line code:
//! `load; compute; store; saves` (the saved old value of an atomic is the
//! loaded one, exactly what the successful exchange would have saved).
//!
//! The proof: every write (store, atomic, compare-exchange) into the root,
//! anywhere in the kernel, must be in the entry function at an address that
//! is an affine function of the loop indices, `Σ a_k i_k + c_t`, with the
//! same coefficients for all writes and only the constants `c_t` differing
//! (components of one element, or fields of one cell). With the indices in
//! `0..extent_k`, sorted by coefficient, each coefficient must exceed the
//! largest value all smaller terms can reach plus the spread of the
//! constants, and every axis with more than one index must appear. Then two
//! different iterations never write the same word (the largest differing
//! term outweighs everything else), so nobody else's bits can change
//! between this iteration's load and store. Addresses are evaluated
//! symbolically through `+`, `*` and `<<` by constants, and `/` or `%`
//! that provably do nothing (`x % 1`, or an operand already below the
//! divisor), the shape the dense address plan takes after constant folding.
//!
//! Ordinary word atomics (`x[p] += v` on a field element the iteration owns,
//! like mpm88's g2p position update) become `load; op; store` the same way
//! (add, sub, and, or, xor; the atomic's value is the loaded one).
//!
//! Does not: demote anything in a kernel with a write it cannot analyse
//! (data-dependent or sparse addresses, `bit_array` words written per
//! cell, writes in helper functions), or min, max and exchange atomics.

use crate::ir::*;
use crate::lower::quantize::match_cas_loop;
use crate::types::{Scalar, Type};
use std::collections::HashMap;

pub fn run(program: &mut Program) {
    for k in program.kernels.handles().collect::<Vec<_>>() {
        let shape = program.kernels[k].iteration_shape(program);
        let kernel = &mut program.kernels[k];
        let owned = owned_roots(kernel, &shape);
        if owned.is_empty() {
            continue;
        }
        let body = std::mem::take(&mut kernel.entry.body);
        kernel.entry.body = demote_block(&mut kernel.entry, body, &owned);
    }
}

/// A u32 value `Σ coef[k] · arg_k + c` over the loop indices, with its
/// largest possible value.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Affine {
    coef: Vec<u64>,
    c: u64,
    max: u64,
}

impl Affine {
    fn constant(dims: usize, c: u64) -> Affine {
        Affine {
            coef: vec![0; dims],
            c,
            max: c,
        }
    }
    fn as_const(&self) -> Option<u64> {
        self.coef.iter().all(|&a| a == 0).then_some(self.c)
    }
    fn scale(&self, k: u64, shape: &[u32]) -> Option<Affine> {
        let coef: Option<Vec<u64>> = self.coef.iter().map(|&a| a.checked_mul(k)).collect();
        Affine {
            coef: coef?,
            c: self.c.checked_mul(k)?,
            max: 0,
        }
        .bounded(shape)
    }
    /// Fills in `max`; `None` when a u32 could wrap.
    fn bounded(mut self, shape: &[u32]) -> Option<Affine> {
        let mut max = self.c;
        for (a, &e) in self.coef.iter().zip(shape) {
            max = max.checked_add(a.checked_mul(e.saturating_sub(1) as u64)?)?;
        }
        self.max = max;
        (max <= u32::MAX as u64).then_some(self)
    }
}

fn affine(
    f: &Function,
    h: InstId,
    shape: &[u32],
    memo: &mut HashMap<InstId, Option<Affine>>,
) -> Option<Affine> {
    if let Some(a) = memo.get(&h) {
        return a.clone();
    }
    let dims = shape.len();
    let inst = &f.insts[h];
    let r = match inst.kind {
        InstKind::Const(c) if c.scalar == Scalar::U32 => Some(Affine::constant(dims, c.bits)),
        InstKind::Cast(x) if inst.ty == Type::U32 => match f.insts[x].kind {
            // Loop indices are i32 in 0..extent: the cast keeps the value.
            InstKind::Arg(k) if (k as usize) < dims && f.insts[x].ty == Type::I32 => {
                let mut coef = vec![0; dims];
                coef[k as usize] = 1;
                Affine { coef, c: 0, max: 0 }.bounded(shape)
            }
            _ => None,
        },
        InstKind::Binary(op, a, b) if inst.ty == Type::U32 => {
            let x = affine(f, a, shape, memo);
            let y = affine(f, b, shape, memo);
            match (op, x, y) {
                (BinaryOp::Add, Some(x), Some(y)) => Affine {
                    coef: x.coef.iter().zip(&y.coef).map(|(p, q)| p + q).collect(),
                    c: x.c + y.c,
                    max: 0,
                }
                .bounded(shape),
                (BinaryOp::Mul, Some(x), Some(y)) => match (x.as_const(), y.as_const()) {
                    (_, Some(k)) => x.scale(k, shape),
                    (Some(k), _) => y.scale(k, shape),
                    _ => None,
                },
                (BinaryOp::Shl, Some(x), Some(y)) => match y.as_const() {
                    Some(k) if k < 32 => x.scale(1 << k, shape),
                    _ => None,
                },
                (BinaryOp::Rem, Some(x), Some(y)) => match y.as_const() {
                    Some(1) => Some(Affine::constant(dims, 0)),
                    Some(m) if x.max < m => Some(x),
                    _ => None,
                },
                (BinaryOp::Div, Some(x), Some(y)) => match y.as_const() {
                    Some(1) => Some(x),
                    Some(d) if d > 0 && x.max < d => Some(Affine::constant(dims, 0)),
                    _ => None,
                },
                _ => None,
            }
        }
        _ => None,
    };
    memo.insert(h, r.clone());
    r
}

/// Roots of the kernel's buffers whose words are each written by at most
/// one iteration (see the module docs).
fn owned_roots(kernel: &Kernel, shape: &[u32]) -> Vec<LayoutId> {
    fn writes(f: &Function, block: &Block, out: &mut Vec<(LayoutId, InstId)>) {
        for &h in block {
            match f.insts[h].kind {
                InstKind::BufStore { root, addr, .. } | InstKind::BufAtomic { root, addr, .. } => {
                    out.push((root, addr))
                }
                _ => {}
            }
            for b in f.insts[h].kind.blocks() {
                writes(f, b, out);
            }
        }
    }
    let mut in_helpers = Vec::new();
    for (_, f) in kernel.functions.iter() {
        writes(f, &f.body, &mut in_helpers);
    }
    let mut entry = Vec::new();
    writes(&kernel.entry, &kernel.entry.body, &mut entry);
    let mut memo = HashMap::new();
    let mut roots: Vec<LayoutId> = entry.iter().map(|w| w.0).collect();
    roots.sort_by_key(|r| r.index());
    roots.dedup();
    roots.retain(|&r| {
        if in_helpers.iter().any(|w| w.0 == r) {
            return false;
        }
        let forms: Option<Vec<Affine>> = entry
            .iter()
            .filter(|w| w.0 == r)
            .map(|w| affine(&kernel.entry, w.1, shape, &mut memo))
            .collect();
        forms.is_some_and(|forms| disjoint_per_iteration(&forms, shape))
    });
    roots
}

/// Whether `forms` (same coefficients, constants differing) never give two
/// different iterations the same value.
fn disjoint_per_iteration(forms: &[Affine], shape: &[u32]) -> bool {
    let Some(first) = forms.first() else {
        return false;
    };
    if forms.iter().any(|f| f.coef != first.coef) {
        return false;
    }
    let lo = forms.iter().map(|f| f.c).min().unwrap_or(0);
    let hi = forms.iter().map(|f| f.c).max().unwrap_or(0);
    let spread = hi - lo;
    let mut terms: Vec<(u64, u64)> = Vec::new();
    for (&a, &e) in first.coef.iter().zip(shape) {
        if e > 1 {
            if a == 0 {
                return false; // two iterations differing only here collide
            }
            terms.push((a, e as u64 - 1));
        }
    }
    terms.sort();
    let mut reach = spread;
    for (a, top) in terms {
        if a <= reach {
            return false;
        }
        reach += a * top;
    }
    true
}

fn demote_block(f: &mut Function, block: Block, owned: &[LayoutId]) -> Block {
    let mut out = Vec::with_capacity(block.len());
    for h in block {
        let mut kind = f.insts[h].kind.clone();
        for b in kind.blocks_mut() {
            *b = demote_block(f, std::mem::take(b), owned);
        }
        f.insts[h].kind = kind;
        match match_cas_loop(f, h).filter(|l| owned.contains(&l.root)) {
            Some(l) => {
                out.push(l.load);
                out.extend(&l.compute);
                // The exchange's handle becomes the plain store.
                f.insts[l.cas].kind = InstKind::BufStore {
                    root: l.root,
                    addr: l.addr,
                    value: l.new,
                };
                f.insts[l.cas].ty = Type::Void;
                out.push(l.cas);
                out.extend(&l.saves);
            }
            None => match plain_rmw(f, h, owned) {
                Some((op, store)) => {
                    // The atomic's handle becomes the load, so its uses
                    // (the old value) stay valid.
                    out.extend([h, op, store]);
                }
                None => out.push(h),
            },
        }
    }
    out
}

/// An ordinary word atomic (`+=` on a field element) on an owned root as
/// `load; op; store`: turns `h` into the load and returns the new operation
/// and store (`None` for atomics this does not cover: min, max, exchange).
fn plain_rmw(f: &mut Function, h: InstId, owned: &[LayoutId]) -> Option<(InstId, InstId)> {
    let InstKind::BufAtomic {
        op,
        root,
        addr,
        value,
        cmp: None,
    } = f.insts[h].kind
    else {
        return None;
    };
    if !owned.contains(&root) {
        return None;
    }
    let bin = match op {
        AtomicOp::Add => BinaryOp::Add,
        AtomicOp::Sub => BinaryOp::Sub,
        AtomicOp::And => BinaryOp::BitAnd,
        AtomicOp::Or => BinaryOp::BitOr,
        AtomicOp::Xor => BinaryOp::BitXor,
        _ => return None,
    };
    let (ty, span) = (f.insts[h].ty, f.insts[h].span);
    f.insts[h].kind = InstKind::BufLoad { root, addr };
    let new = f.detached(InstKind::Binary(bin, h, value), ty, span);
    let store = f.detached(
        InstKind::BufStore {
            root,
            addr,
            value: new,
        },
        Type::Void,
        span,
    );
    Some((new, store))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(coef: &[u64], c: u64, shape: &[u32]) -> Affine {
        Affine {
            coef: coef.to_vec(),
            c,
            max: 0,
        }
        .bounded(shape)
        .expect("fits u32")
    }

    /// Hand-checked cases: row-major cells of one or two words, a missing
    /// axis, overlapping rows, and component offsets that reach the next cell.
    #[test]
    fn ownership_needs_every_axis_and_room_between_cells() {
        let s = [64, 8];
        // addr = 8 i + j: row-major, one word per cell.
        assert!(disjoint_per_iteration(&[form(&[8, 1], 0, &s)], &s));
        // Two components per cell: addr = 16 i + 2 j (+ 1).
        assert!(disjoint_per_iteration(
            &[form(&[16, 2], 0, &s), form(&[16, 2], 1, &s)],
            &s
        ));
        // ... but one word per cell cannot hold a second word's offset.
        assert!(!disjoint_per_iteration(
            &[form(&[8, 1], 0, &s), form(&[8, 1], 1, &s)],
            &s
        ));
        // j missing: iterations (i, 0) and (i, 1) share the word.
        assert!(!disjoint_per_iteration(&[form(&[8, 0], 0, &s)], &s));
        // Rows overlap: 4 i + j with j up to 7.
        assert!(!disjoint_per_iteration(&[form(&[4, 1], 0, &s)], &s));
        // Different coefficients (another field's index pattern).
        assert!(!disjoint_per_iteration(
            &[form(&[8, 1], 0, &s), form(&[1, 8], 0, &s)],
            &s
        ));
        // An axis of extent 1 may be absent.
        assert!(disjoint_per_iteration(
            &[form(&[0, 1], 0, &[1, 8])],
            &[1, 8]
        ));
    }
}
