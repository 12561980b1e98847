//! Bounds-check elimination by integer ranges.
//!
//! Pre: access-lowered IR (bounds checks are `BoundsCheck` instructions, not
//! yet legalized into traps). Post: the same IR without the `BoundsCheck`s
//! whose index is provably in `0..extent` on every execution, and without
//! those that repeat a check (same index value, same extent) made earlier in
//! the same block or an enclosing one; every other instruction is
//! untouched, so results do not change.
//!
//! Checks on one value plus different constants (`b`, `b + 1`, `b + 2`: the
//! cells of an unrolled stencil) that run one after the other in a block,
//! with nothing between them that can leave the block, are widened: the
//! first of them becomes the checks of the smallest and the largest offset,
//! and the others go (both ends in `0..extent` put every offset between them
//! there, with no wrap-around). A faulting invocation then stops at the
//! first check instead of at the access that is out of bounds; the fault
//! names the same field, line and an index that the kernel does use out of
//! bounds, and a fault ends the run either way.
//!
//! The proof is a forward interval analysis over i32 values: a kernel's loop
//! index `k` of a dense iteration lies in `0..shape[k]`, constants are
//! themselves, and `+ - *`, `min`/`max`/`clamp`, `%` and `&` by non-negative
//! constants and `>>` by constants propagate intervals when no step can
//! overflow. Locals, loads and anything else are unknown. A kernel `over` a
//! field under a sparse node keeps its checks on the loop indices: its
//! iteration comes from element lists, not from the shape.
//!
//! Why: the checks on `x[i]` in a kernel over `x`'s cells, or over a range
//! equal to the field's extent, are the common case (every particle and
//! grid kernel) and cost a compare and a branch per access on every
//! backend; the wgpu and JIT backends additionally keep their own
//! word-address guard, so memory safety does not rest on this pass.

use crate::ir::*;
use crate::types::{Scalar, Type};
use std::collections::{HashMap, HashSet};

pub fn run(program: &mut Program) {
    for k in program.kernels.handles().collect::<Vec<_>>() {
        let dense = match &program.kernels[k].iteration {
            Iteration::Range(s) => Some(s.clone()),
            Iteration::Field(f) => {
                let field = &program.fields[*f];
                dense_chain(program, field.layout).then(|| field.shape.clone())
            }
        };
        let kernel = &mut program.kernels[k];
        let body = std::mem::take(&mut kernel.entry.body);
        let mut ranges = Ranges {
            shape: dense,
            known: HashMap::new(),
            checked: vec![HashSet::new()],
        };
        kernel.entry.body = ranges.block(&mut kernel.entry, body);
        for fid in kernel.functions.handles().collect::<Vec<_>>() {
            let f = &mut kernel.functions[fid];
            let body = std::mem::take(&mut f.body);
            // A helper's arguments are not loop indices.
            let mut ranges = Ranges {
                shape: None,
                known: HashMap::new(),
                checked: vec![HashSet::new()],
            };
            f.body = ranges.block(f, body);
        }
    }
}

/// Whether `layout` and all its ancestors are dense nodes.
fn dense_chain(program: &Program, layout: LayoutId) -> bool {
    let mut at = Some(layout);
    while let Some(l) = at {
        let node = &program.layouts[l];
        if node.kind.is_sparse() {
            return false;
        }
        at = node.parent;
    }
    true
}

struct Ranges {
    /// Extents of the entry's arguments when they are plain loop indices.
    shape: Option<Vec<u32>>,
    /// Proven inclusive intervals of i32 values.
    known: HashMap<InstId, (i64, i64)>,
    /// (index, extent) of the checks that dominate the current point, one
    /// set per enclosing block.
    checked: Vec<HashSet<(InstId, u32)>>,
}

/// `index` as (base, constant offset) when it is an i32 `base + k` or
/// `base - k`; else (index, 0).
fn offset_of(f: &Function, index: InstId) -> (InstId, i64) {
    let konst = |h: InstId| match f.insts[h].kind {
        InstKind::Const(c) if f.insts[h].ty == Type::Scalar(Scalar::I32) => {
            Some(c.bits as i32 as i64)
        }
        _ => None,
    };
    if f.insts[index].ty == Type::Scalar(Scalar::I32) {
        match f.insts[index].kind {
            InstKind::Binary(BinaryOp::Add, a, b) => {
                if let Some(k) = konst(b) {
                    return (a, k);
                }
                if let Some(k) = konst(a) {
                    return (b, k);
                }
            }
            InstKind::Binary(BinaryOp::Sub, a, b) => {
                if let Some(k) = konst(b) {
                    return (a, -k);
                }
            }
            _ => {}
        }
    }
    (index, 0)
}

/// Whether running `h` may leave the block it is in other than by a fault:
/// a `return` anywhere in it, or a `break` / `continue` not inside a loop
/// of its own.
fn may_leave(f: &Function, h: InstId, in_loop: bool) -> bool {
    let kind = &f.insts[h].kind;
    match kind {
        InstKind::Return(_) => return true,
        InstKind::Break | InstKind::Continue if !in_loop => return true,
        _ => {}
    }
    let nested_loop = in_loop || matches!(kind, InstKind::RangeFor { .. } | InstKind::Loop { .. });
    kind.blocks()
        .into_iter()
        .any(|b| b.iter().any(|&i| may_leave(f, i, nested_loop)))
}

/// Widens runs of checks on `base + k` (see the module doc). Each run lies
/// between instructions that may leave the block.
fn widen(f: &mut Function, block: Block) -> Block {
    // (base, extent) -> (position of the first check, checks with offsets)
    type Group = (usize, Vec<(InstId, i64)>);
    let mut plans: Vec<Group> = Vec::new();
    let mut open: HashMap<(InstId, u32), usize> = HashMap::new();
    for (pos, &h) in block.iter().enumerate() {
        if let InstKind::BoundsCheck { index, extent, .. } = f.insts[h].kind {
            if extent as u64 <= i32::MAX as u64 + 1 {
                let (base, k) = offset_of(f, index);
                let g = *open.entry((base, extent)).or_insert_with(|| {
                    plans.push((pos, Vec::new()));
                    plans.len() - 1
                });
                plans[g].1.push((h, k));
            }
        } else if may_leave(f, h, false) {
            open.clear();
        }
    }
    let mut replace: HashMap<usize, Vec<InstId>> = HashMap::new();
    let mut drop: HashSet<InstId> = HashSet::new();
    for (pos, checks) in plans {
        let lo = checks.iter().min_by_key(|c| c.1).copied();
        let hi = checks.iter().max_by_key(|c| c.1).copied();
        let (Some(lo), Some(hi)) = (lo, hi) else {
            continue;
        };
        if lo.1 == hi.1 || lo.1 < i32::MIN as i64 || hi.1 > i32::MAX as i64 {
            continue;
        }
        let first = checks[0].0;
        let InstKind::BoundsCheck {
            index: first_index, ..
        } = f.insts[first].kind
        else {
            continue;
        };
        let (base, first_k) = offset_of(f, first_index);
        let mut emitted = Vec::new();
        for (check, k) in [lo, hi] {
            let InstKind::BoundsCheck {
                field,
                axis,
                extent,
                ..
            } = f.insts[check].kind
            else {
                continue;
            };
            let span = f.insts[check].span;
            let index = if k == first_k {
                first_index
            } else if k == 0 {
                base
            } else {
                let c = f.detached(
                    InstKind::Const(Const {
                        scalar: Scalar::I32,
                        bits: k as i32 as u32 as u64,
                    }),
                    Type::Scalar(Scalar::I32),
                    span,
                );
                let sum = f.detached(
                    InstKind::Binary(BinaryOp::Add, base, c),
                    Type::Scalar(Scalar::I32),
                    span,
                );
                emitted.extend([c, sum]);
                sum
            };
            emitted.push(f.detached(
                InstKind::BoundsCheck {
                    field,
                    axis,
                    index,
                    extent,
                },
                Type::Void,
                span,
            ));
        }
        drop.extend(checks.iter().map(|c| c.0));
        replace.insert(pos, emitted);
    }
    if replace.is_empty() {
        return block;
    }
    let mut out = Vec::with_capacity(block.len());
    for (pos, h) in block.into_iter().enumerate() {
        if let Some(new) = replace.remove(&pos) {
            out.extend(new);
        }
        if !drop.contains(&h) {
            out.push(h);
        }
    }
    out
}

const I32_RANGE: (i64, i64) = (i32::MIN as i64, i32::MAX as i64);

fn fits(r: (i64, i64)) -> Option<(i64, i64)> {
    (r.0 >= I32_RANGE.0 && r.1 <= I32_RANGE.1 && r.0 <= r.1).then_some(r)
}

impl Ranges {
    fn block(&mut self, f: &mut Function, b: Block) -> Block {
        let b = widen(f, b);
        let mut out = Vec::with_capacity(b.len());
        for h in b {
            if let InstKind::BoundsCheck { index, extent, .. } = f.insts[h].kind {
                if let Some((lo, hi)) = self.get(index) {
                    if lo >= 0 && hi < extent as i64 {
                        continue;
                    }
                }
                // An identical check earlier in this block or an enclosing
                // one has already run on every path to this one.
                if self.checked.iter().any(|s| s.contains(&(index, extent))) {
                    continue;
                }
                if let Some(top) = self.checked.last_mut() {
                    top.insert((index, extent));
                }
            }
            let mut kind = std::mem::replace(&mut f.insts[h].kind, InstKind::Break);
            for nested in kind.blocks_mut() {
                self.checked.push(HashSet::new());
                *nested = self.block(f, std::mem::take(nested));
                self.checked.pop();
            }
            f.insts[h].kind = kind;
            // Intervals belong to values (SSA), not to paths, so a fact
            // found inside a nested block holds wherever the value is used.
            if let Some(r) = self.range(f, h) {
                self.known.insert(h, r);
            }
            out.push(h);
        }
        out
    }

    fn get(&self, h: InstId) -> Option<(i64, i64)> {
        self.known.get(&h).copied()
    }

    /// The interval of an i32 / u32 value, when one is proven.
    fn range(&self, f: &Function, h: InstId) -> Option<(i64, i64)> {
        let inst = &f.insts[h];
        let s = inst.ty.scalar().filter(|_| inst.ty.components() == 1)?;
        if !matches!(s, Scalar::I32 | Scalar::U32) {
            return None;
        }
        let unsigned = s == Scalar::U32;
        let r = match &inst.kind {
            InstKind::Const(c) => {
                let v = if unsigned {
                    c.bits as i64
                } else {
                    c.bits as i32 as i64
                };
                (v, v)
            }
            InstKind::Arg(k) => {
                let e = *self.shape.as_ref()?.get(*k as usize)? as i64;
                (0, e - 1)
            }
            InstKind::Cast(a) => {
                // i32 <-> u32 keep their bits: the interval carries over
                // when it is non-negative (same value in both readings).
                let from = f.insts[*a].ty.scalar()?;
                if !matches!(from, Scalar::I32 | Scalar::U32) {
                    return None;
                }
                let r = self.get(*a)?;
                if r.0 < 0 {
                    return None;
                }
                r
            }
            InstKind::Binary(op, a, b) => {
                let (x, y) = (self.get(*a)?, self.get(*b)?);
                let r = match op {
                    BinaryOp::Add => (x.0 + y.0, x.1 + y.1),
                    BinaryOp::Sub => (x.0 - y.1, x.1 - y.0),
                    BinaryOp::Mul => {
                        let p = [x.0 * y.0, x.0 * y.1, x.1 * y.0, x.1 * y.1];
                        (*p.iter().min()?, *p.iter().max()?)
                    }
                    // Remainder and division by zero are defined (0 and the
                    // dividend): require a positive divisor to stay simple.
                    BinaryOp::Rem if x.0 >= 0 && y.0 > 0 => (0, x.1.min(y.1 - 1)),
                    BinaryOp::Div if x.0 >= 0 && y.0 > 0 => (x.0 / y.1, x.1 / y.0),
                    BinaryOp::BitAnd if x.0 >= 0 && y.0 >= 0 => (0, x.1.min(y.1)),
                    BinaryOp::Shr if x.0 >= 0 && y.0 >= 0 && y.1 < 32 => (x.0 >> y.1, x.1 >> y.0),
                    _ => return None,
                };
                // In u32 a negative intermediate wraps: only non-negative
                // results are meaningful there.
                if unsigned && r.0 < 0 {
                    return None;
                }
                r
            }
            InstKind::Builtin(b, args) => {
                let rs: Option<Vec<(i64, i64)>> = args.iter().map(|a| self.get(*a)).collect();
                let rs = rs?;
                match (b, rs.as_slice()) {
                    (Builtin::Min, [x, y]) => (x.0.min(y.0), x.1.min(y.1)),
                    (Builtin::Max, [x, y]) => (x.0.max(y.0), x.1.max(y.1)),
                    (Builtin::Clamp, [x, lo, hi]) if lo.1 <= hi.0 => {
                        (x.0.max(lo.0).min(hi.1), x.1.max(lo.0).min(hi.1))
                    }
                    _ => return None,
                }
            }
            _ => return None,
        };
        fits(r)
    }
}
