//! The meaning of every scalar operation, on 32-bit patterns.
//!
//! Constant folding and the reference interpreter both call these, so a
//! folded constant always equals what the program would have computed.
//! Integer arithmetic wraps; division by zero gives the dividend and
//! remainder by zero gives 0 (WGSL's rules, so every backend can agree);
//! shift amounts are taken modulo 32; float→int conversion saturates.

use super::{BinaryOp, Builtin, UnaryOp};
use crate::types::Scalar;

#[inline]
fn f(b: u32) -> f32 {
    f32::from_bits(b)
}
#[inline]
fn fb(x: f32) -> u32 {
    x.to_bits()
}

/// An f32 (bits) rounded to the nearest binary16 value, as f32 bits: the
/// value an f16 operation gives (f16 values are f32 bit patterns holding
/// binary16 values, see `lower::half`).
#[inline]
pub fn round_f16(a: u32) -> u32 {
    super::quant::half_decode(super::quant::half_encode(a))
}

#[inline]
pub fn unary(op: UnaryOp, s: Scalar, a: u32) -> u32 {
    match (op, s) {
        (UnaryOp::Neg, Scalar::F32 | Scalar::F16) => fb(-f(a)),
        (UnaryOp::Neg, _) => (a as i32).wrapping_neg() as u32,
        (UnaryOp::Not, Scalar::Bool) => (a == 0) as u32,
        (UnaryOp::Not, _) => !a,
    }
}

/// `s` is the operand scalar type; comparisons return a bool (0/1).
#[inline]
pub fn binary(op: BinaryOp, s: Scalar, a: u32, b: u32) -> u32 {
    use BinaryOp::*;
    match s {
        // Computed in f32, then rounded: correctly rounded for + - * /
        // (f32 has 24 >= 2 x 11 + 2 significand bits).
        Scalar::F16 if op.is_comparison() => binary(op, Scalar::F32, a, b),
        Scalar::F16 => round_f16(binary(op, Scalar::F32, a, b)),
        Scalar::F32 => {
            let (x, y) = (f(a), f(b));
            match op {
                Add => fb(x + y),
                Sub => fb(x - y),
                Mul => fb(x * y),
                Div => fb(x / y),
                Rem => fb(x % y),
                Eq => (x == y) as u32,
                Ne => (x != y) as u32,
                Lt => (x < y) as u32,
                Le => (x <= y) as u32,
                Gt => (x > y) as u32,
                Ge => (x >= y) as u32,
                _ => 0,
            }
        }
        Scalar::I32 => {
            let (x, y) = (a as i32, b as i32);
            (match op {
                Add => x.wrapping_add(y),
                Sub => x.wrapping_sub(y),
                Mul => x.wrapping_mul(y),
                Div => {
                    if y == 0 || (x == i32::MIN && y == -1) {
                        x
                    } else {
                        x / y
                    }
                }
                Rem => {
                    if y == 0 || (x == i32::MIN && y == -1) {
                        0
                    } else {
                        x % y
                    }
                }
                BitAnd => x & y,
                BitOr => x | y,
                BitXor => x ^ y,
                Shl => x.wrapping_shl(b & 31),
                Shr => x.wrapping_shr(b & 31),
                Eq => (x == y) as i32,
                Ne => (x != y) as i32,
                Lt => (x < y) as i32,
                Le => (x <= y) as i32,
                Gt => (x > y) as i32,
                Ge => (x >= y) as i32,
                _ => 0,
            }) as u32
        }
        Scalar::U32 => match op {
            Add => a.wrapping_add(b),
            Sub => a.wrapping_sub(b),
            Mul => a.wrapping_mul(b),
            Div => a.checked_div(b).unwrap_or(a),
            Rem => a.checked_rem(b).unwrap_or(0),
            BitAnd => a & b,
            BitOr => a | b,
            BitXor => a ^ b,
            Shl => a.wrapping_shl(b & 31),
            Shr => a.wrapping_shr(b & 31),
            Eq => (a == b) as u32,
            Ne => (a != b) as u32,
            Lt => (a < b) as u32,
            Le => (a <= b) as u32,
            Gt => (a > b) as u32,
            Ge => (a >= b) as u32,
            _ => 0,
        },
        Scalar::Bool => {
            let (x, y) = (a != 0, b != 0);
            (match op {
                BitAnd | LogicalAnd => x & y,
                BitOr | LogicalOr => x | y,
                BitXor | Ne => x ^ y,
                Eq => x == y,
                _ => false,
            }) as u32
        }
    }
}

#[inline]
pub fn cast(from: Scalar, to: Scalar, a: u32) -> u32 {
    match (from, to) {
        (Scalar::F16, Scalar::F16) => a,
        (Scalar::F16, _) => cast(Scalar::F32, to, a),
        // One rounding: integers that f32 would round are beyond f16's range.
        (_, Scalar::F16) => round_f16(cast(from, Scalar::F32, a)),
        (Scalar::I32, Scalar::I32)
        | (Scalar::U32, Scalar::U32)
        | (Scalar::F32, Scalar::F32)
        | (Scalar::Bool, Scalar::Bool) => a,
        (Scalar::F32, Scalar::I32) => f(a) as i32 as u32,
        (Scalar::F32, Scalar::U32) => f(a) as u32,
        (Scalar::I32, Scalar::F32) => fb(a as i32 as f32),
        (Scalar::U32, Scalar::F32) => fb(a as f32),
        (Scalar::I32, Scalar::U32) | (Scalar::U32, Scalar::I32) => a,
        (Scalar::Bool, Scalar::F32) => fb(if a != 0 { 1.0 } else { 0.0 }),
        (Scalar::Bool, _) => (a != 0) as u32,
        (Scalar::F32, Scalar::Bool) => (f(a) != 0.0) as u32,
        (_, Scalar::Bool) => (a != 0) as u32,
    }
}

/// Component-wise built-ins on one component. Returns `None` for built-ins
/// that are not component-wise (length, dot, ...).
#[inline]
pub fn builtin_scalar(b: Builtin, s: Scalar, args: &[u32]) -> Option<u32> {
    use Builtin::*;
    if s == Scalar::F16 {
        return builtin_scalar(b, Scalar::F32, args).map(round_f16);
    }
    if s != Scalar::F32 {
        let i = |k: usize| args[k] as i32;
        return Some(match (b, s) {
            (Abs, Scalar::I32) => i(0).wrapping_abs() as u32,
            (Abs, _) => args[0],
            (Sign, Scalar::I32) => i(0).signum() as u32,
            (Sign, _) => (args[0] != 0) as u32,
            (Min, Scalar::I32) => i(0).min(i(1)) as u32,
            (Min, _) => args[0].min(args[1]),
            (Max, Scalar::I32) => i(0).max(i(1)) as u32,
            (Max, _) => args[0].max(args[1]),
            (Clamp, Scalar::I32) => i(0).max(i(1)).min(i(2)) as u32,
            (Clamp, _) => args[0].max(args[1]).min(args[2]),
            _ => return None,
        });
    }
    let x = f(args[0]);
    let y = || f(args[1]);
    let z = || f(args[2]);
    Some(fb(match b {
        Abs => x.abs(),
        Sign => {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                0.0
            }
        }
        Min => x.min(y()),
        Max => x.max(y()),
        Clamp => x.max(y()).min(z()),
        Saturate => x.clamp(0.0, 1.0),
        Floor => x.floor(),
        Ceil => x.ceil(),
        Round => x.round_ties_even(),
        Trunc => x.trunc(),
        Fract => x - x.floor(),
        Pow => x.powf(y()),
        Exp => x.exp(),
        Exp2 => x.exp2(),
        Log => x.ln(),
        Log2 => x.log2(),
        Sqrt => x.sqrt(),
        Rsqrt => 1.0 / x.sqrt(),
        Sin => x.sin(),
        Cos => x.cos(),
        Tan => x.tan(),
        Asin => x.asin(),
        Acos => x.acos(),
        Atan => x.atan(),
        Sinh => x.sinh(),
        Cosh => x.cosh(),
        Tanh => x.tanh(),
        Asinh => x.asinh(),
        Acosh => x.acosh(),
        Atanh => x.atanh(),
        Atan2 => x.atan2(y()),
        Lerp => x + (y() - x) * z(),
        Smoothstep => {
            let t = ((z() - x) / (y() - x)).clamp(0.0, 1.0);
            t * t * (3.0 - 2.0 * t)
        }
        Step => {
            if y() < x {
                0.0
            } else {
                1.0
            }
        }
        Fma => x.mul_add(y(), z()),
        _ => return None,
    }))
}
