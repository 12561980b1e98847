//! The derivative table of the elementwise built-ins, written once for
//! both modes: [`term`] emits ∂r/∂aᵢ · g for one argument, where `g` is the
//! seed — the adjoint of the result in reverse mode (`rev_builtin` adds the
//! term to aᵢ's adjoint), the tangent of aᵢ in forward mode (`jvp_builtin`
//! sums the terms of every argument, in argument order).
//!
//! Only the built-ins whose derivative is "each argument's partial times a
//! seed" are here. The others are linear maps whose reverse form is the
//! transpose of their forward form, or piecewise rules written as selects
//! (min/max/clamp, atan2, smoothstep, fma, the vector and matrix
//! built-ins): they keep one rule per mode in `rev_builtin` and
//! `jvp_builtin`, since sharing them would change the instructions either
//! mode emits (and with them the rounding of its results).

use super::Ad;
use crate::ir::{BinaryOp, Builtin as B, InstId};
use crate::lower::emit::Build;

/// The number of arguments of `b` when its derivative is in the table.
pub(super) fn arity(b: B) -> Option<usize> {
    Some(match b {
        B::Sign
        | B::Floor
        | B::Ceil
        | B::Round
        | B::Trunc
        | B::Step
        | B::IsNan
        | B::IsInf
        | B::Any
        | B::All => 0,
        B::Abs
        | B::Saturate
        | B::Fract
        | B::Exp
        | B::Exp2
        | B::Log
        | B::Log2
        | B::Sqrt
        | B::Rsqrt
        | B::Sin
        | B::Cos
        | B::Sinh
        | B::Cosh
        | B::Tan
        | B::Tanh
        | B::Asin
        | B::Acos
        | B::Asinh
        | B::Acosh
        | B::Atan
        | B::Atanh => 1,
        B::Pow => 2,
        B::Lerp => 3,
        // One rule per mode (see the module doc).
        B::Min
        | B::Max
        | B::Clamp
        | B::Atan2
        | B::Smoothstep
        | B::Fma
        | B::Length
        | B::Distance
        | B::Normalize
        | B::Dot
        | B::Cross
        | B::Reflect
        | B::Transpose
        | B::Determinant
        | B::Inverse
        | B::Outer => return None,
    })
}

/// ∂r/∂aᵢ · g for a built-in of the table (`arity(b)` is `Some(n)`, `i < n`),
/// emitted in `s`: `a` the arguments and `r` the result in the emitted
/// function, `g` the seed. Each term emits what it needs itself, so the two
/// modes emit the same instructions per argument.
pub(super) fn term(s: &mut Ad, b: B, i: usize, a: &[InstId], r: InstId, g: InstId) -> InstId {
    let t = s.ty(a[0]);
    match (b, i) {
        (B::Abs, 0) => {
            let sg = s.builtin(B::Sign, vec![a[0]]);
            s.mul(g, sg)
        }
        (B::Saturate, 0) => {
            let z = s.fc(0.0, t);
            let o = s.fc(1.0, t);
            let below = s.bin(BinaryOp::Lt, a[0], z);
            let above = s.bin(BinaryOp::Gt, a[0], o);
            let inner = s.select(above, z, g);
            s.select(below, z, inner)
        }
        (B::Fract, 0) => g,
        // d(a^b) = b·a^(b-1)·da + a^b·ln(a)·db (the second term only where a > 0)
        (B::Pow, 0) => {
            let o = s.fc(1.0, t);
            let bm1 = s.sub(a[1], o);
            let p = s.builtin(B::Pow, vec![a[0], bm1]);
            let gb = s.mul(g, a[1]);
            s.mul(gb, p)
        }
        (B::Pow, 1) => {
            let z = s.fc(0.0, t);
            let pos = s.bin(BinaryOp::Gt, a[0], z);
            let l = s.builtin(B::Log, vec![a[0]]);
            let gr = s.mul(g, r);
            let y = s.mul(gr, l);
            s.mask(pos, y)
        }
        (B::Exp, 0) => s.mul(g, r),
        (B::Exp2, 0) => {
            let ln2 = s.fc(std::f32::consts::LN_2, t);
            let gr = s.mul(g, r);
            s.mul(gr, ln2)
        }
        (B::Log, 0) => s.div(g, a[0]),
        (B::Log2, 0) => {
            let ln2 = s.fc(std::f32::consts::LN_2, t);
            let q = s.mul(a[0], ln2);
            s.div(g, q)
        }
        (B::Sqrt, 0) => {
            let two = s.fc(2.0, t);
            let q = s.mul(two, r);
            s.div(g, q)
        }
        (B::Rsqrt, 0) => {
            let h = s.fc(-0.5, t);
            let rx = s.div(r, a[0]);
            let gh = s.mul(g, h);
            s.mul(gh, rx)
        }
        (B::Sin | B::Cos | B::Sinh | B::Cosh, 0) => {
            let (f, negate) = match b {
                B::Sin => (B::Cos, false),
                B::Cos => (B::Sin, true),
                B::Sinh => (B::Cosh, false),
                _ => (B::Sinh, false),
            };
            let q = s.builtin(f, vec![a[0]]);
            let c = s.mul(g, q);
            if negate {
                s.neg(c)
            } else {
                c
            }
        }
        // tan' = 1 + tan², tanh' = 1 - tanh²
        (B::Tan | B::Tanh, 0) => {
            let o = s.fc(1.0, t);
            let r2 = s.mul(r, r);
            let q = if b == B::Tan {
                s.add(o, r2)
            } else {
                s.sub(o, r2)
            };
            s.mul(g, q)
        }
        (B::Asin | B::Acos | B::Asinh | B::Acosh, 0) => {
            let o = s.fc(1.0, t);
            let x2 = s.mul(a[0], a[0]);
            let inner = match b {
                B::Asin | B::Acos => s.sub(o, x2),
                B::Asinh => s.add(x2, o),
                _ => s.sub(x2, o),
            };
            let q = s.builtin(B::Rsqrt, vec![inner]);
            let c = s.mul(g, q);
            if b == B::Acos {
                s.neg(c)
            } else {
                c
            }
        }
        (B::Atan | B::Atanh, 0) => {
            let o = s.fc(1.0, t);
            let x2 = s.mul(a[0], a[0]);
            let q = if b == B::Atan {
                s.add(o, x2)
            } else {
                s.sub(o, x2)
            };
            s.div(g, q)
        }
        // lerp(a, b, t) = a·(1 - t) + b·t
        (B::Lerp, 0) => {
            let o = s.fc(1.0, t);
            let omt = s.sub(o, a[2]);
            s.mul(g, omt)
        }
        (B::Lerp, 1) => s.mul(g, a[2]),
        (B::Lerp, 2) => {
            let ba = s.sub(a[1], a[0]);
            s.mul(g, ba)
        }
        _ => unreachable!("{:?} argument {} has no term in the table", b, i),
    }
}
