//! Rewrites everything a backend would otherwise re-implement by hand into
//! plain IR, so the semantics live once, here.
//!
//! Pre: valid lowered IR (`IrForm::Lowered`), after the last simplification.
//! Post: valid `IrForm::Legalized` IR in which
//! - bounds checks are `if (u32(index) >= extent) { trap }` and a range
//!   loop's step is checked by `if (step <= 0) { trap }` before the loop;
//!   each `Trap` names a `Kernel::fault_sites` entry that says what to report;
//! - `determinant` / `inverse` are cofactor expansions in scalar arithmetic,
//!   in exactly the reference interpreter's order of operations;
//! - float → integer casts saturate explicitly (NaN → 0, out of range →
//!   the type's min/max), so the remaining `Cast` only sees in-range values;
//! - `sign` of unsigned values is `min(x, 1)`;
//! - integer `/` and `%` by a constant zero (component) divide by one
//!   instead, which gives WGSL's results (`x / 0 == x`, `x % 0 == 0`) and
//!   leaves no constant zero divisor for a shader validator to refuse.
//!
//! Not done here: range-loop trip counts stay in the backends (they need
//! 33-bit counts for full-range loops), and nothing is simplified after the
//! rewrite. Every rewrite computes the same bits as `ir::eval` / the
//! interpreter did before it, so results do not change.

use crate::ir::*;
use crate::types::{Scalar, Type};

pub fn run(program: &mut Program) {
    for k in program.kernels.handles().collect::<Vec<_>>() {
        let kernel = &mut program.kernels[k];
        let mut sites = std::mem::take(&mut kernel.fault_sites);
        legalize_function(&mut kernel.entry, &mut sites);
        for fid in kernel.functions.handles().collect::<Vec<_>>() {
            legalize_function(&mut kernel.functions[fid], &mut sites);
        }
        kernel.fault_sites = sites;
    }
}

struct Emitter<'a> {
    f: &'a mut Function,
    out: Vec<InstId>,
    span: Span,
}

impl Emitter<'_> {
    fn emit(&mut self, kind: InstKind, ty: Type) -> InstId {
        let h = self.f.insts.append(Inst {
            kind,
            ty,
            span: self.span,
        });
        self.out.push(h);
        h
    }
    fn konst(&mut self, c: Const) -> InstId {
        self.emit(InstKind::Const(c), Type::Scalar(c.scalar))
    }
    /// A constant of `ty`'s shape (a vector repeats it).
    fn splat(&mut self, c: Const, ty: Type) -> InstId {
        let s = self.konst(c);
        match ty {
            Type::Vector(sc, n) => {
                let parts = vec![s; n as usize];
                self.emit(InstKind::Construct(parts), Type::Vector(sc, n))
            }
            _ => s,
        }
    }
    fn bin(&mut self, op: BinaryOp, a: InstId, b: InstId, ty: Type) -> InstId {
        self.emit(InstKind::Binary(op, a, b), ty)
    }
    fn ty(&self, h: InstId) -> Type {
        self.f.insts[h].ty
    }
    /// Moves the kind of `last` (the instruction emitted last) into `h`, so
    /// the original handle holds the result and its uses stay valid.
    fn finish(&mut self, h: InstId, last: InstId) {
        let popped = self.out.pop();
        debug_assert_eq!(popped, Some(last), "the result was emitted last");
        self.f.insts[h].kind = self.f.insts[last].kind.clone();
    }
}

fn legalize_function(f: &mut Function, sites: &mut Vec<FaultSite>) {
    let body = std::mem::take(&mut f.body);
    f.body = legalize_block(f, body, sites);
}

fn legalize_block(f: &mut Function, block: Block, sites: &mut Vec<FaultSite>) -> Block {
    let mut out = Vec::with_capacity(block.len());
    for h in block {
        let mut kind = f.insts[h].kind.clone();
        for b in kind.blocks_mut() {
            *b = legalize_block(f, std::mem::take(b), sites);
        }
        f.insts[h].kind = kind.clone();
        let span = f.insts[h].span;
        let ty = f.insts[h].ty;
        let mut e = Emitter {
            f,
            out: Vec::new(),
            span,
        };
        let mut keep = true;
        match kind {
            InstKind::BoundsCheck {
                field,
                axis,
                index,
                extent,
            } => {
                let site = push_site(
                    sites,
                    span,
                    FaultKind::OutOfBounds {
                        field,
                        axis,
                        extent,
                    },
                );
                // A negative i32 is a huge u32, so one unsigned compare covers both ends.
                let iu = e.emit(InstKind::Cast(index), Type::U32);
                let ext = e.konst(Const::u32(extent));
                let bad = e.bin(BinaryOp::Ge, iu, ext, Type::BOOL);
                trap_if(&mut e, bad, site, index);
                keep = false;
            }
            InstKind::RangeFor { step, .. } => {
                let t = e.ty(step);
                let signed = t.scalar() == Some(Scalar::I32);
                let site = push_site(sites, span, FaultKind::NonPositiveStep { signed });
                let zero = e.konst(Const {
                    scalar: t.scalar().expect("integer step"),
                    bits: 0,
                });
                let bad = e.bin(BinaryOp::Le, step, zero, Type::BOOL);
                trap_if(&mut e, bad, site, step);
            }
            InstKind::Builtin(Builtin::Determinant, ref args) => {
                let m = elements(&mut e, args[0]);
                let d = det(&mut e, &m);
                e.finish(h, d);
            }
            InstKind::Builtin(Builtin::Inverse, ref args) => {
                let r = inverse(&mut e, args[0]);
                e.finish(h, r);
            }
            InstKind::Builtin(Builtin::Sign, ref args) if ty.scalar() == Some(Scalar::U32) => {
                let one = e.splat(Const::u32(1), ty);
                let r = e.emit(InstKind::Builtin(Builtin::Min, vec![args[0], one]), ty);
                e.finish(h, r);
            }
            InstKind::Cast(a) if e.ty(a).is_float() && ty.is_int() => {
                let r = saturating_cast(&mut e, a, ty);
                e.finish(h, r);
            }
            InstKind::Binary(op @ (BinaryOp::Div | BinaryOp::Rem), a, b)
                if ty.is_int() && has_zero(e.f, b) =>
            {
                let nb = nonzero_divisor(&mut e, b);
                e.f.insts[h].kind = InstKind::Binary(op, a, nb);
            }
            _ => {}
        }
        out.extend(std::mem::take(&mut e.out));
        if keep {
            out.push(h);
        }
    }
    out
}

fn push_site(sites: &mut Vec<FaultSite>, span: Span, kind: FaultKind) -> u32 {
    sites.push(FaultSite { span, kind });
    (sites.len() - 1) as u32
}

/// Emits `if bad { trap site value }`.
fn trap_if(e: &mut Emitter, bad: InstId, site: u32, value: InstId) {
    let trap = e.f.insts.append(Inst {
        kind: InstKind::Trap { site, value },
        ty: Type::Void,
        span: e.span,
    });
    e.emit(
        InstKind::If {
            cond: bad,
            accept: vec![trap],
            reject: vec![],
        },
        Type::Void,
    );
}

/// `m[c][r]` for every column c and row r of a matrix value.
fn elements(e: &mut Emitter, m: InstId) -> Vec<Vec<InstId>> {
    let Type::Matrix(n) = e.ty(m) else {
        unreachable!("the validator checked determinant/inverse take a matrix")
    };
    (0..n as u32)
        .map(|c| {
            let col = e.emit(InstKind::Extract(m, c), Type::Vector(Scalar::F32, n));
            (0..n as u32)
                .map(|r| e.emit(InstKind::Extract(col, r), Type::F32))
                .collect()
        })
        .collect()
}

/// Determinant by cofactor expansion along row 0 of a column-major element
/// grid: `m00·det(M0) − m10·det(M1) + m20·det(M2) …`, the interpreter's order.
fn det(e: &mut Emitter, m: &[Vec<InstId>]) -> InstId {
    let n = m.len();
    if n == 1 {
        return m[0][0];
    }
    if n == 2 {
        let p = e.bin(BinaryOp::Mul, m[0][0], m[1][1], Type::F32);
        let q = e.bin(BinaryOp::Mul, m[1][0], m[0][1], Type::F32);
        return e.bin(BinaryOp::Sub, p, q, Type::F32);
    }
    let mut acc: Option<InstId> = None;
    for c in 0..n {
        let sub: Vec<Vec<InstId>> = (0..n)
            .filter(|&cc| cc != c)
            .map(|cc| m[cc][1..].to_vec())
            .collect();
        let d = det(e, &sub);
        let term = e.bin(BinaryOp::Mul, m[c][0], d, Type::F32);
        acc = Some(match acc {
            None => term,
            Some(s) => {
                let op = if c % 2 == 0 {
                    BinaryOp::Add
                } else {
                    BinaryOp::Sub
                };
                e.bin(op, s, term, Type::F32)
            }
        });
    }
    acc.expect("n > 0")
}

/// inverse(m) = adjugate / determinant: element (c, r) is cofactor(row c, column r) / det.
fn inverse(e: &mut Emitter, m: InstId) -> InstId {
    let el = elements(e, m);
    let n = el.len();
    let d = det(e, &el);
    let mut cols = Vec::with_capacity(n);
    for c in 0..n {
        let mut comps = Vec::with_capacity(n);
        for r in 0..n {
            let minor: Vec<Vec<InstId>> = (0..n)
                .filter(|&cc| cc != r)
                .map(|cc| (0..n).filter(|&rr| rr != c).map(|rr| el[cc][rr]).collect())
                .collect();
            let mut cof = det(e, &minor);
            if (r + c) % 2 == 1 {
                cof = e.emit(InstKind::Unary(UnaryOp::Neg, cof), Type::F32);
            }
            comps.push(e.bin(BinaryOp::Div, cof, d, Type::F32));
        }
        cols.push(e.emit(
            InstKind::Construct(comps),
            Type::Vector(Scalar::F32, n as u8),
        ));
    }
    e.emit(InstKind::Construct(cols), Type::Matrix(n as u8))
}

/// Rust's `as` from f32 to i32/u32, component-wise: NaN → 0, saturating at
/// both ends. The inner `Cast` only ever sees values in range.
fn saturating_cast(e: &mut Emitter, x: InstId, ty: Type) -> InstId {
    let s = ty.scalar().expect("integer type");
    let fty = e.ty(x);
    let bty = fty.with_scalar(Scalar::Bool);
    // The largest f32 below 2^31 (2^32) and the type's bounds as f32.
    let (lo, hi, top, max) = match s {
        Scalar::I32 => (
            -2147483648.0f32,
            2147483520.0f32,
            2147483648.0f32,
            Const::i32(i32::MAX),
        ),
        _ => (0.0, 4294967040.0, 4294967296.0, Const::u32(u32::MAX)),
    };
    let lo = e.splat(Const::f32(lo), fty);
    let hi = e.splat(Const::f32(hi), fty);
    let clamped = e.emit(InstKind::Builtin(Builtin::Clamp, vec![x, lo, hi]), fty);
    let conv = e.emit(InstKind::Cast(clamped), ty);
    let top = e.splat(Const::f32(top), fty);
    let too_big = e.bin(BinaryOp::Ge, x, top, bty);
    let max = e.splat(max, ty);
    let sat = e.emit(
        InstKind::Select {
            cond: too_big,
            accept: max,
            reject: conv,
        },
        ty,
    );
    let nan = e.emit(InstKind::Builtin(Builtin::IsNan, vec![x]), bty);
    let zero = e.splat(Const { scalar: s, bits: 0 }, ty);
    e.emit(
        InstKind::Select {
            cond: nan,
            accept: zero,
            reject: sat,
        },
        ty,
    )
}

/// Whether `h` is a constant zero, or a vector built with one.
fn has_zero(f: &Function, h: InstId) -> bool {
    match &f.insts[h].kind {
        InstKind::Const(c) => c.bits == 0,
        InstKind::Construct(parts) => parts.iter().any(|p| has_zero(f, *p)),
        _ => false,
    }
}

/// A copy of the divisor `h` with every constant zero component replaced by one.
fn nonzero_divisor(e: &mut Emitter, h: InstId) -> InstId {
    match e.f.insts[h].kind.clone() {
        InstKind::Const(c) if c.bits == 0 => e.konst(Const {
            scalar: c.scalar,
            bits: 1,
        }),
        InstKind::Construct(parts) if parts.iter().any(|p| has_zero(e.f, *p)) => {
            let ty = e.ty(h);
            let parts = parts.iter().map(|&p| nonzero_divisor(e, p)).collect();
            e.emit(InstKind::Construct(parts), ty)
        }
        _ => h,
    }
}
