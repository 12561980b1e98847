//! The C expression of each IR operation on scalarised components: the
//! interpreter's arithmetic, casts, atomics, matrix products and built-ins
//! (`weft_ir::ir::eval` is the reference; sums fold in its order).

use super::emit::{from_word, sty, to_word};
use weft_ir::ir::builtins::Shape;
use weft_ir::ir::*;
use weft_ir::types::{Scalar, Type};

pub(super) fn unary(op: UnaryOp, s: Scalar, a: &str) -> String {
    match (op, s) {
        (UnaryOp::Neg, Scalar::F32 | Scalar::F64) => format!("(-{})", a),
        (UnaryOp::Neg, Scalar::I32) => format!("(int)(0u - (unsigned)({}))", a),
        (UnaryOp::Neg, Scalar::I64) => format!("(long long)(0ull - (u64)({}))", a),
        (UnaryOp::Neg, Scalar::U64) => format!("(0ull - {})", a),
        (UnaryOp::Not, Scalar::F64) => {
            format!("__longlong_as_double(~__double_as_longlong({}))", a)
        }
        (UnaryOp::Neg, _) => format!("(0u - {})", a),
        (UnaryOp::Not, Scalar::Bool) => format!("(unsigned)({} == 0u)", a),
        (UnaryOp::Not, Scalar::F32) => format!("__uint_as_float(~__float_as_uint({}))", a),
        (UnaryOp::Not, _) => format!("(~{})", a),
    }
}

/// `eval::binary`; `s` is the operand scalar type.
pub(super) fn binary(op: BinaryOp, s: Scalar, x: &str, y: &str) -> String {
    use BinaryOp::*;
    let cmp = |sym: &str| format!("(unsigned)({} {} {})", x, sym, y);
    match s {
        Scalar::F32 | Scalar::F16 => match op {
            Add => format!("({} + {})", x, y),
            Sub => format!("({} - {})", x, y),
            Mul => format!("({} * {})", x, y),
            Div => format!("({} / {})", x, y),
            Rem => format!("fmodf({}, {})", x, y),
            Eq | Ne | Lt | Le | Gt | Ge => cmp(op.symbol()),
            _ => "0.0f".into(),
        },
        Scalar::F64 => match op {
            Add => format!("({} + {})", x, y),
            Sub => format!("({} - {})", x, y),
            Mul => format!("({} * {})", x, y),
            Div => format!("({} / {})", x, y),
            Rem => format!("fmod({}, {})", x, y),
            Eq | Ne | Lt | Le | Gt | Ge => cmp(op.symbol()),
            _ => "0.0".into(),
        },
        Scalar::I64 => int_binary(op, x, y, true, true),
        Scalar::U64 => int_binary(op, x, y, false, true),
        Scalar::I32 => int_binary(op, x, y, true, false),
        Scalar::U32 => int_binary(op, x, y, false, false),
        Scalar::Bool => {
            let (a, b) = (format!("({} != 0u)", x), format!("({} != 0u)", y));
            match op {
                BitAnd | LogicalAnd => format!("(unsigned)({} & {})", a, b),
                BitOr | LogicalOr => format!("(unsigned)({} | {})", a, b),
                BitXor | Ne => format!("(unsigned)({} ^ {})", a, b),
                Eq => format!("(unsigned)({} == {})", a, b),
                _ => "0u".into(),
            }
        }
    }
}

/// `eval::binary` on 32- or 64-bit (`wide`) integers: signed `+ - *` and
/// `<<` wrap on the unsigned words (signed overflow is undefined in C),
/// shift counts are taken modulo the width, and `>>` on a signed type is
/// arithmetic in CUDA.
fn int_binary(op: BinaryOp, x: &str, y: &str, signed: bool, wide: bool) -> String {
    use BinaryOp::*;
    let (u, i, mask) = if wide {
        ("u64", "long long", "63ull")
    } else {
        ("unsigned", "int", "31u")
    };
    let plain = |sym: &str| format!("({} {} {})", x, sym, y);
    let wrap = |sym: &str| {
        if signed {
            format!("({})(({})({}) {} ({})({}))", i, u, x, sym, u, y)
        } else {
            plain(sym)
        }
    };
    match op {
        Add => wrap("+"),
        Sub => wrap("-"),
        Mul => wrap("*"),
        Div => plain("/"),
        Rem => plain("%"),
        BitAnd => plain("&"),
        BitOr => plain("|"),
        BitXor => plain("^"),
        Shl if signed => format!("({})(({})({}) << (({})({}) & {}))", i, u, x, u, y, mask),
        Shl => format!("({} << ({} & {}))", x, y, mask),
        Shr if signed => format!("({} >> (({})({}) & {}))", x, u, y, mask),
        Shr => format!("({} >> ({} & {}))", x, y, mask),
        Eq | Ne | Lt | Le | Gt | Ge => format!("(unsigned)({} {} {})", x, op.symbol(), y),
        _ => match (wide, signed) {
            (true, true) => "0ll",
            (true, false) => "0ull",
            (false, true) => "0",
            (false, false) => "0u",
        }
        .into(),
    }
}

/// `eval::cast` (float → int arrives in range: legalize made it saturate;
/// the `_rz` intrinsics saturate anyway, as Rust's `as` does).
pub(super) fn cast(from: Scalar, to: Scalar, a: &str) -> String {
    use Scalar::*;
    match (from, to) {
        (x, y) if x == y => a.to_string(),
        (F64, I32) => format!("__double2int_rz({})", a),
        (F64, U32) => format!("__double2uint_rz({})", a),
        (F64, I64) => format!("__double2ll_rz({})", a),
        (F64, U64) => format!("__double2ull_rz({})", a),
        (F32, I64) => format!("__float2ll_rz({})", a),
        (F32, U64) => format!("__float2ull_rz({})", a),
        // Round to nearest even, as Rust's `as`.
        (I64, F32) => format!("__ll2float_rn({})", a),
        (U64, F32) => format!("__ull2float_rn({})", a),
        (I64, F64) => format!("__ll2double_rn({})", a),
        (U64, F64) => format!("__ull2double_rn({})", a),
        (I32 | U32, F64) | (F32, F64) => format!("(double)({})", a),
        (F64, F32) => format!("__double2float_rn({})", a),
        (I32, I64 | U64) | (U32, I64 | U64) | (I64, U64) | (U64, I64) => {
            format!("({})({})", super::emit::sty(to), a)
        }
        (I64 | U64, I32 | U32) => format!("({})({})", super::emit::sty(to), a),
        (Bool, F64) => format!("({} != 0u ? 1.0 : 0.0)", a),
        (Bool, I64 | U64) => format!("({})({} != 0u)", super::emit::sty(to), a),
        (F64, Bool) => format!("(unsigned)({} != 0.0)", a),
        (Scalar::F32, Scalar::I32) => format!("__float2int_rz({})", a),
        (Scalar::F32, Scalar::U32) => format!("__float2uint_rz({})", a),
        (Scalar::I32 | Scalar::U32, Scalar::F32) => format!("(float)({})", a),
        (Scalar::I32, Scalar::U32) => format!("(unsigned)({})", a),
        (Scalar::U32, Scalar::I32) => format!("(int)({})", a),
        (Scalar::Bool, Scalar::F32) => format!("({} != 0u ? 1.0f : 0.0f)", a),
        (Scalar::Bool, Scalar::I32) => format!("(int)({} != 0u)", a),
        (Scalar::F32, Scalar::Bool) => format!("(unsigned)({} != 0.0f)", a),
        _ => format!("(unsigned)({} != 0)", a),
    }
}

/// The read-modify-write on the word at `p` (an `unsigned*`), returning the old value as `s`.
pub(super) fn atomic(op: AtomicOp, s: Scalar, p: &str, v: &str, cmp: Option<&str>) -> String {
    let w = to_word(s, v);
    let old = |e: String| from_word(s, &e);
    match (op, s) {
        (AtomicOp::Exchange, _) => old(format!("atomicExch({}, {})", p, w)),
        (AtomicOp::CompareExchange, _) => {
            let c = to_word(s, cmp.unwrap_or(v));
            old(format!("atomicCAS({}, {}, {})", p, c, w))
        }
        // Native float atomics; x - v is x + (-v) exactly in IEEE arithmetic.
        (AtomicOp::Add, Scalar::F32) => format!("atomicAdd((float*)({}), {})", p, v),
        (AtomicOp::Sub, Scalar::F32) => format!("atomicAdd((float*)({}), -({}))", p, v),
        (AtomicOp::Add, _) => old(format!("atomicAdd({}, {})", p, w)),
        (AtomicOp::Sub, _) => old(format!("atomicSub({}, {})", p, w)),
        (AtomicOp::Min, Scalar::I32) => format!("atomicMin((int*)({}), {})", p, v),
        (AtomicOp::Max, Scalar::I32) => format!("atomicMax((int*)({}), {})", p, v),
        (AtomicOp::Min, _) => old(format!("atomicMin({}, {})", p, w)),
        (AtomicOp::Max, _) => old(format!("atomicMax({}, {})", p, w)),
        (AtomicOp::And, _) => old(format!("atomicAnd({}, {})", p, w)),
        (AtomicOp::Or, _) => old(format!("atomicOr({}, {})", p, w)),
        (AtomicOp::Xor, _) => old(format!("atomicXor({}, {})", p, w)),
    }
}

/// Σ terms in the interpreter's order (left fold from the first term).
pub(super) fn fsum(terms: &[String]) -> String {
    let mut acc = terms[0].clone();
    for t in &terms[1..] {
        acc = format!("({} + {})", acc, t);
    }
    acc
}

pub(super) fn fdot(a: &[String], b: &[String]) -> String {
    let p: Vec<String> = a
        .iter()
        .zip(b)
        .map(|(x, y)| format!("({} * {})", x, y))
        .collect();
    fsum(&p)
}

/// The (n-1)×(n-1) matrix without row `row` and column `col` (column-major).
pub(super) fn minor(m: &[String], n: usize, row: usize, col: usize) -> Vec<String> {
    let mut out = Vec::with_capacity((n - 1) * (n - 1));
    for c in (0..n).filter(|&c| c != col) {
        for r in (0..n).filter(|&r| r != row) {
            out.push(m[c * n + r].clone());
        }
    }
    out
}

/// Cofactor expansion along the first column, in the JIT's order.
pub(super) fn det(m: &[String], n: usize) -> String {
    match n {
        1 => m[0].clone(),
        2 => format!("(({} * {}) - ({} * {}))", m[0], m[3], m[2], m[1]),
        _ => {
            let terms: Vec<String> = (0..n)
                .map(|c| {
                    let sign = if c % 2 == 0 { "1.0f" } else { "-1.0f" };
                    format!(
                        "(({} * {}) * {})",
                        sign,
                        m[c * n],
                        det(&minor(m, n, 0, c), n - 1)
                    )
                })
                .collect();
            fsum(&terms)
        }
    }
}

pub(super) fn matmul(a: &[String], b: &[String], at: Type, bt: Type) -> Option<Vec<String>> {
    Some(match (at, bt) {
        (Type::Matrix(n), Type::Vector(_, _)) => {
            let n = n as usize;
            (0..n)
                .map(|i| {
                    let p: Vec<String> = (0..n)
                        .map(|k| format!("({} * {})", a[k * n + i], b[k]))
                        .collect();
                    fsum(&p)
                })
                .collect()
        }
        (Type::Vector(_, _), Type::Matrix(n)) => {
            let n = n as usize;
            (0..n).map(|j| fdot(a, &b[j * n..j * n + n])).collect()
        }
        (Type::Matrix(n), Type::Matrix(_)) => {
            let n = n as usize;
            let mut out = vec![String::new(); n * n];
            for j in 0..n {
                for i in 0..n {
                    let p: Vec<String> = (0..n)
                        .map(|k| format!("({} * {})", a[k * n + i], b[j * n + k]))
                        .collect();
                    out[j * n + i] = fsum(&p);
                }
            }
            out
        }
        _ => return None,
    })
}

/// `eval::builtin_scalar` on one component.
pub(super) fn builtin_scalar(b: Builtin, s: Scalar, a: &[String]) -> Option<String> {
    use Builtin::*;
    if s == Scalar::F64 {
        return builtin_f64(b, a);
    }
    if s != Scalar::F32 {
        let signed = matches!(s, Scalar::I32 | Scalar::I64);
        let t = sty(s);
        return Some(match b {
            Abs if signed => format!("weft_iabs({})", a[0]),
            Abs => a[0].clone(),
            Sign if signed => format!("weft_isign({})", a[0]),
            Sign => format!("({})({} != 0u)", t, a[0]),
            Min => format!("min(({}){}, ({}){})", t, a[0], t, a[1]),
            Max => format!("max(({}){}, ({}){})", t, a[0], t, a[1]),
            Clamp => format!(
                "min(max(({t}){}, ({t}){}), ({t}){})",
                a[0],
                a[1],
                a[2],
                t = t
            ),
            _ => return None,
        });
    }
    let x = &a[0];
    Some(match b {
        Abs => format!("fabsf({})", x),
        Sign => format!("weft_fsign({})", x),
        Min => format!("weft_fmin({}, {})", x, a[1]),
        Max => format!("weft_fmax({}, {})", x, a[1]),
        Clamp => format!("weft_fmin(weft_fmax({}, {}), {})", x, a[1], a[2]),
        Saturate => format!("weft_fclamp({}, 0.0f, 1.0f)", x),
        Floor => format!("floorf({})", x),
        Ceil => format!("ceilf({})", x),
        Round => format!("rintf({})", x),
        Trunc => format!("truncf({})", x),
        Fract => format!("({} - floorf({}))", x, x),
        Pow => format!("powf({}, {})", x, a[1]),
        Exp => format!("expf({})", x),
        Exp2 => format!("exp2f({})", x),
        Log => format!("logf({})", x),
        Log2 => format!("log2f({})", x),
        Sqrt => format!("sqrtf({})", x),
        Rsqrt => format!("(1.0f / sqrtf({}))", x),
        Sin => format!("sinf({})", x),
        Cos => format!("cosf({})", x),
        Tan => format!("tanf({})", x),
        Asin => format!("asinf({})", x),
        Acos => format!("acosf({})", x),
        Atan => format!("atanf({})", x),
        Sinh => format!("sinhf({})", x),
        Cosh => format!("coshf({})", x),
        Tanh => format!("tanhf({})", x),
        Asinh => format!("asinhf({})", x),
        Acosh => format!("acoshf({})", x),
        Atanh => format!("atanhf({})", x),
        Atan2 => format!("atan2f({}, {})", x, a[1]),
        Lerp => format!("({} + (({} - {}) * {}))", x, a[1], x, a[2]),
        Smoothstep => {
            let t = format!(
                "weft_fclamp((({} - {}) / ({} - {})), 0.0f, 1.0f)",
                a[2], x, a[1], x
            );
            format!("(({t} * {t}) * (3.0f - (2.0f * {t})))", t = t)
        }
        Step => format!("({} < {} ? 0.0f : 1.0f)", a[1], x),
        Fma => format!("fmaf({}, {}, {})", x, a[1], a[2]),
        _ => return None,
    })
}

/// The f64 built-ins `eval::builtin_scalar` defines (no transcendentals);
/// `weft_fmin` & co. are overloaded for double in the prelude.
fn builtin_f64(b: Builtin, a: &[String]) -> Option<String> {
    use Builtin::*;
    let x = &a[0];
    Some(match b {
        Abs => format!("fabs({})", x),
        Sign => format!("weft_fsign({})", x),
        Min => format!("weft_fmin({}, {})", x, a[1]),
        Max => format!("weft_fmax({}, {})", x, a[1]),
        Clamp => format!("weft_fmin(weft_fmax({}, {}), {})", x, a[1], a[2]),
        Saturate => format!("weft_fclamp({}, 0.0, 1.0)", x),
        Floor => format!("floor({})", x),
        Ceil => format!("ceil({})", x),
        Round => format!("rint({})", x),
        Trunc => format!("trunc({})", x),
        Fract => format!("({} - floor({}))", x, x),
        Sqrt => format!("sqrt({})", x),
        Rsqrt => format!("(1.0 / sqrt({}))", x),
        Lerp => format!("({} + (({} - {}) * {}))", x, a[1], x, a[2]),
        Smoothstep => {
            let t = format!(
                "weft_fclamp((({} - {}) / ({} - {})), 0.0, 1.0)",
                a[2], x, a[1], x
            );
            format!("(({t} * {t}) * (3.0 - (2.0 * {t})))", t = t)
        }
        Step => format!("({} < {} ? 0.0 : 1.0)", a[1], x),
        Fma => format!("fma({}, {}, {})", x, a[1], a[2]),
        _ => return None,
    })
}

pub(super) fn builtin(b: Builtin, at: Type, a: &[Vec<String>]) -> Option<Vec<String>> {
    use Builtin::*;
    let n = at.components();
    let wise = matches!(b.shape(), Shape::FloatWise(_) | Shape::NumericWise(_))
        && !matches!(b, Normalize | Reflect);
    if wise {
        let s = at.scalar()?;
        return (0..n)
            .map(|c| {
                let args: Vec<String> = a.iter().map(|v| v[c].clone()).collect();
                builtin_scalar(b, s, &args)
            })
            .collect();
    }
    let wide = at.is_wide();
    let (sqrt, one, two) = if wide {
        ("sqrt", "1.0", "2.0")
    } else {
        ("sqrtf", "1.0f", "2.0f")
    };
    Some(match b {
        Length => vec![format!("{}({})", sqrt, fdot(&a[0], &a[0]))],
        Distance => {
            let d: Vec<String> = (0..n)
                .map(|k| format!("({} - {})", a[0][k], a[1][k]))
                .collect();
            vec![format!("{}({})", sqrt, fdot(&d, &d))]
        }
        Normalize => {
            let inv = format!("({} / {}({}))", one, sqrt, fdot(&a[0], &a[0]));
            a[0].iter().map(|x| format!("({} * {})", x, inv)).collect()
        }
        Dot => match at.scalar()? {
            Scalar::F32 | Scalar::F64 => vec![fdot(&a[0], &a[1])],
            s => {
                let t = sty(s);
                let w = if wide { "u64" } else { "unsigned" };
                let mut acc = format!("({})0", w);
                for (x, y) in a[0].iter().zip(&a[1]) {
                    acc = format!("({} + (({w})({}) * ({w})({})))", acc, x, y, w = w);
                }
                vec![format!("({})({})", t, acc)]
            }
        },
        Cross => {
            let (x, y) = (&a[0], &a[1]);
            let c = |i: usize, j: usize| format!("(({} * {}) - ({} * {}))", x[i], y[j], x[j], y[i]);
            vec![c(1, 2), c(2, 0), c(0, 1)]
        }
        Reflect => {
            let d = format!("({} * {})", two, fdot(&a[1], &a[0]));
            (0..n)
                .map(|k| format!("({} - ({} * {}))", a[0][k], d, a[1][k]))
                .collect()
        }
        Outer => {
            let mut m = Vec::with_capacity(n * n);
            for j in 0..n {
                for i in 0..n {
                    m.push(format!("({} * {})", a[0][i], a[1][j]));
                }
            }
            m
        }
        Transpose => {
            let Type::Matrix(k) = at else { return None };
            let k = k as usize;
            (0..k * k)
                .map(|i| a[0][(i % k) * k + i / k].clone())
                .collect()
        }
        Determinant => {
            let Type::Matrix(k) = at else { return None };
            vec![det(&a[0], k as usize)]
        }
        Inverse => {
            let Type::Matrix(k) = at else { return None };
            let k = k as usize;
            let m = &a[0];
            let d = det(m, k);
            let mut inv = vec![String::new(); k * k];
            for c in 0..k {
                for row in 0..k {
                    let sign = if (row + c) % 2 == 0 { "1.0f" } else { "-1.0f" };
                    let cof = det(&minor(m, k, c, row), k - 1);
                    inv[c * k + row] = format!("(({} * {}) / {})", sign, cof, d);
                }
            }
            inv
        }
        IsNan => a[0]
            .iter()
            .map(|x| format!("(unsigned)({} != {})", x, x))
            .collect(),
        IsInf => a[0]
            .iter()
            .map(|x| {
                if wide {
                    format!("(unsigned)(fabs({}) == (double)WEFT_INF)", x)
                } else {
                    format!("(unsigned)(fabsf({}) == WEFT_INF)", x)
                }
            })
            .collect(),
        Any | All => {
            let op = if b == Any { " | " } else { " & " };
            let bits: Vec<String> = a[0].iter().map(|x| format!("({} != 0u)", x)).collect();
            vec![format!("(unsigned)({})", bits.join(op))]
        }
        _ => return None,
    })
}
