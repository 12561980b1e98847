//! `half`: the kernel language's `f16` compute type as f32 operations.
//!
//! Pre: valid abstract IR in which types may have f16 components
//! (`Scalar::F16`), as the front end writes them: an f16 value is the f32
//! bit pattern of a binary16 value (constants too, already rounded).
//! Post: valid IR without f16. Every f16 type becomes f32, and every
//! operation that makes a new f16 value (arithmetic, built-ins, conversions
//! to f16) is followed by rounding to binary16 — `half_encode` then
//! `half_decode` of `lower::quantize`, integer operations only, the very
//! sequence `f16` field storage uses — so every backend computes the same
//! bits and no backend sees f16. `+ - * /` (and `sqrt`) computed in f32 and
//! rounded once are the correctly rounded binary16 results: f32 has
//! 24 ≥ 2 × 11 + 2 significand bits, so the double rounding is harmless.
//! Negation, copies, selects, loads and stores of f16 values move exact
//! binary16 values and only change type; f16 → f32 is exact and
//! disappears; f16 → integer converts the f32.
//!
//! Runs after `autodiff`, which refuses kernels with f16 values (a
//! rounding made of integer operations has no derivative; see
//! docs/kernel-language.md), and before `views` and `lower_access`.

use crate::ir::*;
use crate::lower::emit::Build;
use crate::lower::quantize::{half_decode, half_encode};
use crate::lower::sparse::Emitter;
use crate::lower::words::{assemble, split};
use crate::types::{Scalar, Type};
use std::collections::{HashMap, HashSet};

pub fn run(program: &mut Program) {
    super::each_function(program, lower_function);
    // Block-shared arrays of f16 hold the f32 form as well.
    for k in program.kernels.handles().collect::<Vec<_>>() {
        if let Some(w) = &mut program.kernels[k].workgroup {
            for a in &mut w.arrays {
                a.ty = widen(a.ty);
            }
        }
    }
}

fn widen(t: Type) -> Type {
    if t.is_f16() {
        t.with_scalar(Scalar::F32)
    } else {
        t
    }
}

fn lower_function(f: &mut Function) {
    if !f.uses_f16() {
        return;
    }
    // Which values were f16 before any is retyped (operands are looked up
    // while their definitions may already have changed).
    let was: HashSet<InstId> = f
        .insts
        .iter()
        .filter(|(_, i)| i.ty.is_f16())
        .map(|(h, _)| h)
        .collect();
    for t in f.args.iter_mut() {
        *t = widen(*t);
    }
    f.ret = widen(f.ret);
    for l in f.locals.handles().collect::<Vec<_>>() {
        f.locals[l].ty = widen(f.locals[l].ty);
    }
    let mut replace = HashMap::new();
    let body = std::mem::take(&mut f.body);
    f.body = lower_block(f, body, &was, &mut replace);
    // Every instruction: operands of removed conversions, and the types of
    // instructions no block holds any more (dead, but typed like the rest).
    let handles: Vec<InstId> = f.insts.handles().collect();
    for h in handles {
        let inst = &mut f.insts[h];
        inst.kind.map_operands(|o| *replace.get(&o).unwrap_or(&o));
        inst.ty = widen(inst.ty);
        if let InstKind::Const(c) = &mut inst.kind {
            if c.scalar == Scalar::F16 {
                c.scalar = Scalar::F32;
            }
        }
    }
}

fn lower_block(
    f: &mut Function,
    block: Block,
    was: &HashSet<InstId>,
    replace: &mut HashMap<InstId, InstId>,
) -> Block {
    let mut out = Vec::with_capacity(block.len());
    for h in block {
        let mut kind = f.insts[h].kind.clone();
        for b in kind.blocks_mut() {
            *b = lower_block(f, std::mem::take(b), was, replace);
        }
        f.insts[h].kind = kind.clone();
        let ty = f.insts[h].ty;
        let wide = widen(ty);
        f.insts[h].ty = wide;
        let span = f.insts[h].span;
        let mut e = Emitter {
            f,
            out: Vec::new(),
            span,
        };
        let new_kind = match kind {
            InstKind::Const(c) if c.scalar == Scalar::F16 => Some(InstKind::Const(Const {
                scalar: Scalar::F32,
                bits: c.bits,
            })),
            InstKind::Cast(a) if was.contains(&a) => {
                if wide.scalar() == Some(Scalar::F32) {
                    // f16 → f32 (or f16 → f16): exact, the value itself.
                    replace.insert(h, a);
                    continue;
                }
                None // f16 → integer or bool: the f32's conversion.
            }
            InstKind::Cast(a) if ty.is_f16() => {
                // To f16: to f32 first (exact for f32; integers beyond
                // 2^24 that f32 rounds are far beyond f16's range), then
                // one rounding.
                let x = if e.f.insts[a].ty.scalar() == Some(Scalar::F32) {
                    a
                } else {
                    e.emit(InstKind::Cast(a), wide)
                };
                Some(round(&mut e, x, wide))
            }
            InstKind::Binary(op, ..) if ty.is_f16() && !op.is_comparison() => {
                let r = e.emit(kind, wide);
                Some(round(&mut e, r, wide))
            }
            InstKind::Builtin(..) if ty.is_f16() => {
                let r = e.emit(kind, wide);
                Some(round(&mut e, r, wide))
            }
            _ => None,
        };
        out.extend(std::mem::take(&mut e.out));
        if let Some(k) = new_kind {
            f.insts[h].kind = k;
        }
        out.push(h);
    }
    out
}

/// `x` (f32 components) rounded to binary16 per component; returns the
/// kind for the original handle (`words::assemble`).
fn round(e: &mut Emitter, x: InstId, ty: Type) -> InstKind {
    let parts = split(e, ty, x);
    let rounded: Vec<InstId> = parts
        .into_iter()
        .map(|p| {
            let b = half_encode(e, p);
            let d = half_decode(e, b);
            e.emit(InstKind::Bitcast(d), Type::F32)
        })
        .collect();
    assemble(e, ty, rounded).expect("a value has components")
}
