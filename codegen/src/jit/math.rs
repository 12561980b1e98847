//! Host functions that JIT-compiled kernels call for the operations whose
//! exact bits must match the reference interpreter: transcendental functions
//! and the float remainder. Each one is the very Rust expression that
//! `weft_ir::ir::eval` evaluates, so results are bit-identical by
//! construction (both end up in the same libm routine).
//!
//! Everything else (arithmetic, `sqrt`, rounding, `fma`, min/max, …) is
//! emitted inline as Cranelift instructions with the same IEEE semantics.

use weft_ir::ir::Builtin;

macro_rules! unary {
    ($($name:ident => $e:expr;)*) => {
        $(extern "C" fn $name(x: f32) -> f32 { let f: fn(f32) -> f32 = $e; f(x) })*
    };
}

unary! {
    weft_jit_sin => |x| x.sin();
    weft_jit_cos => |x| x.cos();
    weft_jit_tan => |x| x.tan();
    weft_jit_asin => |x| x.asin();
    weft_jit_acos => |x| x.acos();
    weft_jit_atan => |x| x.atan();
    weft_jit_sinh => |x| x.sinh();
    weft_jit_cosh => |x| x.cosh();
    weft_jit_tanh => |x| x.tanh();
    weft_jit_asinh => |x| x.asinh();
    weft_jit_acosh => |x| x.acosh();
    weft_jit_atanh => |x| x.atanh();
    weft_jit_exp => |x| x.exp();
    weft_jit_exp2 => |x| x.exp2();
    weft_jit_ln => |x| x.ln();
    weft_jit_log2 => |x| x.log2();
}

extern "C" fn weft_jit_pow(x: f32, y: f32) -> f32 {
    x.powf(y)
}
extern "C" fn weft_jit_atan2(x: f32, y: f32) -> f32 {
    x.atan2(y)
}
extern "C" fn weft_jit_fmod(x: f32, y: f32) -> f32 {
    x % y
}
extern "C" fn weft_jit_fmod64(x: f64, y: f64) -> f64 {
    x % y
}

/// A host function: its symbol, number of float arguments, their width
/// (`f32`, or `f64` when `wide`) and address.
pub(crate) struct HostFn {
    pub name: &'static str,
    pub arity: usize,
    pub wide: bool,
    pub ptr: *const u8,
}

/// Every host function the JIT may call.
pub(crate) fn host_functions() -> Vec<HostFn> {
    let u = |name, f: extern "C" fn(f32) -> f32| HostFn {
        name,
        arity: 1,
        wide: false,
        ptr: f as *const u8,
    };
    let b = |name, f: extern "C" fn(f32, f32) -> f32| HostFn {
        name,
        arity: 2,
        wide: false,
        ptr: f as *const u8,
    };
    vec![
        u("weft_jit_sin", weft_jit_sin),
        u("weft_jit_cos", weft_jit_cos),
        u("weft_jit_tan", weft_jit_tan),
        u("weft_jit_asin", weft_jit_asin),
        u("weft_jit_acos", weft_jit_acos),
        u("weft_jit_atan", weft_jit_atan),
        u("weft_jit_sinh", weft_jit_sinh),
        u("weft_jit_cosh", weft_jit_cosh),
        u("weft_jit_tanh", weft_jit_tanh),
        u("weft_jit_asinh", weft_jit_asinh),
        u("weft_jit_acosh", weft_jit_acosh),
        u("weft_jit_atanh", weft_jit_atanh),
        u("weft_jit_exp", weft_jit_exp),
        u("weft_jit_exp2", weft_jit_exp2),
        u("weft_jit_ln", weft_jit_ln),
        u("weft_jit_log2", weft_jit_log2),
        b("weft_jit_pow", weft_jit_pow),
        b("weft_jit_atan2", weft_jit_atan2),
        b("weft_jit_fmod", weft_jit_fmod),
        HostFn {
            name: "weft_jit_fmod64",
            arity: 2,
            wide: true,
            ptr: weft_jit_fmod64 as *const u8,
        },
    ]
}

/// The host function computing a component-wise float built-in, if it needs one.
pub(crate) fn builtin_symbol(b: Builtin) -> Option<&'static str> {
    use Builtin::*;
    Some(match b {
        Sin => "weft_jit_sin",
        Cos => "weft_jit_cos",
        Tan => "weft_jit_tan",
        Asin => "weft_jit_asin",
        Acos => "weft_jit_acos",
        Atan => "weft_jit_atan",
        Sinh => "weft_jit_sinh",
        Cosh => "weft_jit_cosh",
        Tanh => "weft_jit_tanh",
        Asinh => "weft_jit_asinh",
        Acosh => "weft_jit_acosh",
        Atanh => "weft_jit_atanh",
        Exp => "weft_jit_exp",
        Exp2 => "weft_jit_exp2",
        Log => "weft_jit_ln",
        Log2 => "weft_jit_log2",
        Pow => "weft_jit_pow",
        Atan2 => "weft_jit_atan2",
        _ => return None,
    })
}
