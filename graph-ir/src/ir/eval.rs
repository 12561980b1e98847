//! The meaning of every scalar operation, on bit patterns held in a `u64`
//! (32-bit scalars in the low word, the high word zero).
//!
//! Constant folding and the reference interpreter both call these, so a
//! folded constant always equals what the program would have computed.
//! Integer arithmetic wraps; division by zero gives the dividend and
//! remainder by zero gives 0 (WGSL's rules, so every backend can agree);
//! shift amounts are taken modulo the width; float→int conversion saturates.

use super::{BinaryOp, Builtin, UnaryOp};
use crate::types::Scalar;

#[inline]
fn f(b: u64) -> f32 {
    f32::from_bits(b as u32)
}
#[inline]
fn fb(x: f32) -> u64 {
    x.to_bits() as u64
}
#[inline]
fn d(b: u64) -> f64 {
    f64::from_bits(b)
}
#[inline]
fn db(x: f64) -> u64 {
    x.to_bits()
}

/// An f32 (bits) rounded to the nearest binary16 value, as f32 bits: the
/// value an f16 operation gives (f16 values are f32 bit patterns holding
/// binary16 values, see `lower::half`).
#[inline]
pub fn round_f16(a: u64) -> u64 {
    super::quant::half_decode(super::quant::half_encode(a as u32)) as u64
}

#[inline]
pub fn unary(op: UnaryOp, s: Scalar, a: u64) -> u64 {
    match (op, s) {
        (UnaryOp::Neg, Scalar::F32 | Scalar::F16) => fb(-f(a)),
        (UnaryOp::Neg, Scalar::F64) => db(-d(a)),
        (UnaryOp::Neg, Scalar::I64 | Scalar::U64) => (a as i64).wrapping_neg() as u64,
        (UnaryOp::Neg, _) => (a as u32 as i32).wrapping_neg() as u32 as u64,
        (UnaryOp::Not, Scalar::Bool) => (a == 0) as u64,
        (UnaryOp::Not, _) => !a & s.mask(),
    }
}

macro_rules! int_ops {
    ($op:expr, $x:expr, $y:expr, $b:expr, $signed:ty, $bits:expr) => {{
        let (x, y): ($signed, $signed) = ($x, $y);
        match $op {
            Add => Some(x.wrapping_add(y)),
            Sub => Some(x.wrapping_sub(y)),
            Mul => Some(x.wrapping_mul(y)),
            Div => Some(x.checked_div(y).unwrap_or(x)),
            Rem => Some(x.checked_rem(y).unwrap_or(0)),
            BitAnd => Some(x & y),
            BitOr => Some(x | y),
            BitXor => Some(x ^ y),
            Shl => Some(x.wrapping_shl(($b % $bits) as u32)),
            Shr => Some(x.wrapping_shr(($b % $bits) as u32)),
            Eq => return (x == y) as u64,
            Ne => return (x != y) as u64,
            Lt => return (x < y) as u64,
            Le => return (x <= y) as u64,
            Gt => return (x > y) as u64,
            Ge => return (x >= y) as u64,
            _ => None,
        }
    }};
}

/// `s` is the operand scalar type; comparisons return a bool (0/1).
/// Integer division by zero gives the dividend (and `MIN / -1` too: Rust's
/// `checked_div` refuses both), remainder by zero gives 0; shift amounts
/// are taken modulo the width.
#[inline]
pub fn binary(op: BinaryOp, s: Scalar, a: u64, b: u64) -> u64 {
    use BinaryOp::*;
    match s {
        // Computed in f32, then rounded: correctly rounded for + - * /
        // (f32 has 24 >= 2 x 11 + 2 significand bits).
        Scalar::F16 if op.is_comparison() => binary(op, Scalar::F32, a, b),
        Scalar::F16 => round_f16(binary(op, Scalar::F32, a, b)),
        Scalar::F32 | Scalar::F64 => {
            let wide = s == Scalar::F64;
            let (x, y) = if wide {
                (d(a), d(b))
            } else {
                (f(a) as f64, f(b) as f64)
            };
            // Comparisons in f64 equal those in f32 (widening is exact);
            // arithmetic is done in the operand's own width.
            let arith = |g32: fn(f32, f32) -> f32, g64: fn(f64, f64) -> f64| {
                if wide {
                    db(g64(d(a), d(b)))
                } else {
                    fb(g32(f(a), f(b)))
                }
            };
            match op {
                Add => arith(|x, y| x + y, |x, y| x + y),
                Sub => arith(|x, y| x - y, |x, y| x - y),
                Mul => arith(|x, y| x * y, |x, y| x * y),
                Div => arith(|x, y| x / y, |x, y| x / y),
                Rem => arith(|x, y| x % y, |x, y| x % y),
                Eq => (x == y) as u64,
                Ne => (x != y) as u64,
                Lt => (x < y) as u64,
                Le => (x <= y) as u64,
                Gt => (x > y) as u64,
                Ge => (x >= y) as u64,
                _ => 0,
            }
        }
        Scalar::I32 => int_ops!(op, a as u32 as i32, b as u32 as i32, b, i32, 32)
            .map_or(0, |v| v as u32 as u64),
        Scalar::U32 => int_ops!(op, a as u32, b as u32, b, u32, 32).map_or(0, |v| v as u64),
        Scalar::I64 => int_ops!(op, a as i64, b as i64, b, i64, 64).map_or(0, |v| v as u64),
        Scalar::U64 => int_ops!(op, a, b, b, u64, 64).unwrap_or(0),
        Scalar::Bool => {
            let (x, y) = (a != 0, b != 0);
            (match op {
                BitAnd | LogicalAnd => x & y,
                BitOr | LogicalOr => x | y,
                BitXor | Ne => x ^ y,
                Eq => x == y,
                _ => false,
            }) as u64
        }
    }
}

/// Numeric conversion, as Rust's `as`: integers wrap (or sign-/zero-extend
/// by the source's signedness), float → int saturates with NaN → 0, int →
/// float and f64 → f32 round to nearest even; bools are 0/1 and anything
/// non-zero converts to `true`.
#[inline]
pub fn cast(from: Scalar, to: Scalar, a: u64) -> u64 {
    use Scalar::*;
    match (from, to) {
        (F16, F16) => return a,
        (F16, _) => return cast(F32, to, a),
        // One rounding: integers that f32 would round are beyond f16's range.
        (_, F16) => return round_f16(cast(from, F32, a)),
        _ => {}
    }
    if to == Bool {
        return match from {
            F32 => (f(a) != 0.0) as u64,
            F64 => (d(a) != 0.0) as u64,
            _ => (a != 0) as u64,
        };
    }
    // Widen the source to an exact i128 or f64, then narrow per target.
    enum V {
        I(i128),
        F(f64),
    }
    let v = match from {
        Bool => V::I((a != 0) as i128),
        I32 => V::I(a as u32 as i32 as i128),
        U32 => V::I(a as u32 as i128),
        I64 => V::I(a as i64 as i128),
        U64 => V::I(a as i128),
        F32 | F16 => V::F(f(a) as f64),
        F64 => V::F(d(a)),
    };
    match (v, to) {
        (V::I(i), I32 | U32) => i as u32 as u64,
        (V::I(i), I64 | U64) => i as u64,
        (V::I(i), F32) => fb(match from {
            I64 => i as i64 as f32,
            U64 => i as u64 as f32,
            _ => i as i64 as f32,
        }),
        (V::I(i), F64) => db(i as f64),
        (V::F(x), I32) => x as i32 as u32 as u64,
        (V::F(x), U32) => x as u32 as u64,
        (V::F(x), I64) => x as i64 as u64,
        (V::F(x), U64) => x as u64,
        (V::F(x), F32) => fb(x as f32),
        (V::F(x), F64) => db(x),
        (_, Bool | F16) => unreachable!("handled above"),
    }
}

/// Component-wise built-ins on one component. Returns `None` for built-ins
/// that are not component-wise (length, dot, ...), and for transcendental
/// built-ins on `f64`, which the front end refuses (no GPU backend has them
/// in 64 bits; `f64::sin` here would be a meaning only the CPU has).
#[inline]
pub fn builtin_scalar(b: Builtin, s: Scalar, args: &[u64]) -> Option<u64> {
    use Builtin::*;
    if s == Scalar::F16 {
        return builtin_scalar(b, Scalar::F32, args).map(round_f16);
    }
    match s {
        Scalar::F32 => builtin_f32(b, args),
        Scalar::F64 => builtin_f64(b, args),
        Scalar::I32 => {
            let i = |k: usize| args[k] as u32 as i32;
            int_builtin!(b, i, |v: i32| v as u32 as u64, wrapping_abs, signum)
        }
        Scalar::I64 => {
            let i = |k: usize| args[k] as i64;
            int_builtin!(b, i, |v: i64| v as u64, wrapping_abs, signum)
        }
        Scalar::U32 | Scalar::U64 | Scalar::Bool => {
            let i = |k: usize| args[k];
            Some(match b {
                Abs => args[0],
                Sign => (args[0] != 0) as u64,
                Min => i(0).min(i(1)),
                Max => i(0).max(i(1)),
                Clamp => i(0).max(i(1)).min(i(2)),
                _ => return None,
            })
        }
        Scalar::F16 => unreachable!("handled above"),
    }
}

macro_rules! int_builtin {
    ($b:expr, $i:expr, $out:expr, $abs:ident, $sign:ident) => {{
        let i = $i;
        let out = $out;
        Some(out(match $b {
            Abs => i(0).$abs(),
            Sign => i(0).$sign(),
            Min => i(0).min(i(1)),
            Max => i(0).max(i(1)),
            Clamp => i(0).max(i(1)).min(i(2)),
            _ => return None,
        }))
    }};
}
use int_builtin;

/// The built-ins both float widths compute the same way, as one `match`
/// on `$b` over the value `$x` and the lazily read `$y()`, `$z()`, with
/// the arms only one width has added before the fallback.
macro_rules! float_builtin {
    ($b:expr, $x:ident, $y:ident, $z:ident, { $($extra:tt)* }) => {{
        use Builtin::*;
        match $b {
            Abs => $x.abs(),
            Sign => {
                if $x > 0.0 {
                    1.0
                } else if $x < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            }
            // Weft's min/max, spelled out rather than left to the host's
            // `f32::min` (whose choice between +0 and -0 is unspecified):
            // a NaN operand gives the other one, a tie gives `x`. The JIT
            // and `legalize` (for WGSL) compute exactly this.
            Min => {
                let y = $y();
                if $x.is_nan() || y < $x { y } else { $x }
            }
            Max => {
                let y = $y();
                if $x.is_nan() || y > $x { y } else { $x }
            }
            Clamp => {
                let (lo, hi) = ($y(), $z());
                let m = if $x.is_nan() || lo > $x { lo } else { $x };
                if m.is_nan() || hi < m { hi } else { m }
            }
            Saturate => $x.clamp(0.0, 1.0),
            Floor => $x.floor(),
            Ceil => $x.ceil(),
            Round => $x.round_ties_even(),
            Trunc => $x.trunc(),
            Fract => $x - $x.floor(),
            Sqrt => $x.sqrt(),
            Rsqrt => 1.0 / $x.sqrt(),
            Lerp => $x + ($y() - $x) * $z(),
            Smoothstep => {
                let t = (($z() - $x) / ($y() - $x)).clamp(0.0, 1.0);
                t * t * (3.0 - 2.0 * t)
            }
            Step => {
                if $y() < $x {
                    0.0
                } else {
                    1.0
                }
            }
            Fma => $x.mul_add($y(), $z()),
            $($extra)*
            _ => return None,
        }
    }};
}

/// The f64 built-ins: the ones IEEE defines exactly (and the same formulas
/// as f32 for the compound ones), so every backend agrees.
fn builtin_f64(b: Builtin, args: &[u64]) -> Option<u64> {
    let x = d(args[0]);
    let y = || d(args[1]);
    let z = || d(args[2]);
    Some(db(float_builtin!(b, x, y, z, {})))
}

fn builtin_f32(b: Builtin, args: &[u64]) -> Option<u64> {
    let x = f(args[0]);
    let y = || f(args[1]);
    let z = || f(args[2]);
    Some(fb(float_builtin!(b, x, y, z, {
        Pow => x.powf(y()),
        Exp => x.exp(),
        Exp2 => x.exp2(),
        Log => x.ln(),
        Log2 => x.log2(),
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
    })))
}
