//! Built-in functions of the kernel language and their typing rules.
//!
//! The front end splats scalar arguments of component-wise built-ins to the
//! vector width before building IR, so in the IR every component-wise built-in
//! has arguments of one type.

use crate::types::{Scalar, Type};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Builtin {
    Abs,
    Sign,
    Min,
    Max,
    Clamp,
    Saturate,
    Floor,
    Ceil,
    Round,
    Trunc,
    Fract,
    Pow,
    Exp,
    Exp2,
    Log,
    Log2,
    Sqrt,
    Rsqrt,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Tanh,
    Asinh,
    Acosh,
    Atanh,
    Atan2,
    Lerp,
    Smoothstep,
    Step,
    Fma,
    Length,
    Distance,
    Normalize,
    Dot,
    Cross,
    Reflect,
    Transpose,
    Determinant,
    Inverse,
    Outer,
    IsNan,
    IsInf,
    Any,
    All,
}

/// How a built-in is typed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// N arguments of one float scalar/vector type; result the same type.
    FloatWise(usize),
    /// N arguments of one numeric scalar/vector type; result the same type.
    NumericWise(usize),
    /// Special rule, see `result_type`.
    Special(usize),
}

impl Builtin {
    pub const ALL: &'static [(&'static str, Builtin)] = &[
        ("abs", Builtin::Abs),
        ("sign", Builtin::Sign),
        ("min", Builtin::Min),
        ("max", Builtin::Max),
        ("clamp", Builtin::Clamp),
        ("saturate", Builtin::Saturate),
        ("floor", Builtin::Floor),
        ("ceil", Builtin::Ceil),
        ("round", Builtin::Round),
        ("trunc", Builtin::Trunc),
        ("fract", Builtin::Fract),
        ("pow", Builtin::Pow),
        ("exp", Builtin::Exp),
        ("exp2", Builtin::Exp2),
        ("log", Builtin::Log),
        ("log2", Builtin::Log2),
        ("sqrt", Builtin::Sqrt),
        ("rsqrt", Builtin::Rsqrt),
        ("sin", Builtin::Sin),
        ("cos", Builtin::Cos),
        ("tan", Builtin::Tan),
        ("asin", Builtin::Asin),
        ("acos", Builtin::Acos),
        ("atan", Builtin::Atan),
        ("sinh", Builtin::Sinh),
        ("cosh", Builtin::Cosh),
        ("tanh", Builtin::Tanh),
        ("asinh", Builtin::Asinh),
        ("acosh", Builtin::Acosh),
        ("atanh", Builtin::Atanh),
        ("atan2", Builtin::Atan2),
        ("lerp", Builtin::Lerp),
        ("smoothstep", Builtin::Smoothstep),
        ("step", Builtin::Step),
        ("fma", Builtin::Fma),
        ("length", Builtin::Length),
        ("distance", Builtin::Distance),
        ("normalize", Builtin::Normalize),
        ("dot", Builtin::Dot),
        ("cross", Builtin::Cross),
        ("reflect", Builtin::Reflect),
        ("transpose", Builtin::Transpose),
        ("determinant", Builtin::Determinant),
        ("inverse", Builtin::Inverse),
        ("outer", Builtin::Outer),
        ("isnan", Builtin::IsNan),
        ("isinf", Builtin::IsInf),
        ("any", Builtin::Any),
        ("all", Builtin::All),
    ];

    pub fn from_name(name: &str) -> Option<Builtin> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, b)| *b)
    }

    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, b)| *b == self)
            .map(|(n, _)| *n)
            .unwrap_or("?")
    }

    pub fn shape(self) -> Shape {
        use Builtin::*;
        match self {
            Abs | Sign => Shape::NumericWise(1),
            Min | Max => Shape::NumericWise(2),
            Clamp => Shape::NumericWise(3),
            Saturate | Floor | Ceil | Round | Trunc | Fract | Exp | Exp2 | Log | Log2 | Sqrt
            | Rsqrt | Sin | Cos | Tan | Asin | Acos | Atan | Sinh | Cosh | Tanh | Asinh | Acosh
            | Atanh | Normalize => Shape::FloatWise(1),
            Pow | Atan2 | Step | Reflect => Shape::FloatWise(2),
            Lerp | Smoothstep | Fma => Shape::FloatWise(3),
            Length | Transpose | Determinant | Inverse | IsNan | IsInf | Any | All => {
                Shape::Special(1)
            }
            Distance | Dot | Cross | Outer => Shape::Special(2),
        }
    }

    /// The built-ins without an exact IEEE definition (library functions
    /// whose bits differ between implementations): f32 only.
    pub fn is_transcendental(self) -> bool {
        use Builtin::*;
        matches!(
            self,
            Exp | Exp2
                | Log
                | Log2
                | Pow
                | Sin
                | Cos
                | Tan
                | Asin
                | Acos
                | Atan
                | Sinh
                | Cosh
                | Tanh
                | Asinh
                | Acosh
                | Atanh
                | Atan2
        )
    }

    pub fn arity(self) -> usize {
        match self.shape() {
            Shape::FloatWise(n) | Shape::NumericWise(n) | Shape::Special(n) => n,
        }
    }

    /// The result type for argument types (already splatted), or a plain-words reason.
    pub fn result_type(self, args: &[Type]) -> Result<Type, String> {
        use Builtin::*;
        if args.len() != self.arity() {
            return Err(format!(
                "`{}` takes {} argument(s), got {}",
                self.name(),
                self.arity(),
                args.len()
            ));
        }
        let same = |what: &str, ok: &dyn Fn(Type) -> bool| -> Result<Type, String> {
            let t = args[0];
            if let Some(bad) = args.iter().find(|a| **a != t) {
                return Err(format!(
                    "`{}` needs arguments of one type, got {} and {}",
                    self.name(),
                    t,
                    bad
                ));
            }
            if !ok(t) || t.is_scalar() && !ok(t) {
                return Err(format!(
                    "`{}` needs {} arguments, got {}",
                    self.name(),
                    what,
                    t
                ));
            }
            Ok(t)
        };
        // f16 too: `passes::half` computes in f32 and rounds the result.
        let float_sv = |t: Type| matches!(t, Type::Scalar(s) | Type::Vector(s, _) if s.is_float());
        let fvec = |t: Type| matches!(t, Type::Vector(s, _) if s.is_float());
        let num_sv = |t: Type| match t {
            Type::Scalar(s) | Type::Vector(s, _) => s.is_numeric(),
            _ => false,
        };
        match self.shape() {
            Shape::FloatWise(_) => {
                let t = same("f32, f64 or float vector", &float_sv)?;
                if t.is_wide() && self.is_transcendental() {
                    return Err(format!(
                        "`{}` of f64 is not available (GPU shading languages have no 64-bit `{}`, and Weft gives every backend the same meaning); convert with `as f32`",
                        self.name(),
                        self.name()
                    ));
                }
                if self == Normalize && !t.is_vector() {
                    return Err("`normalize` needs a float vector".into());
                }
                if self == Reflect && !t.is_vector() {
                    return Err("`reflect` needs float vectors".into());
                }
                Ok(t)
            }
            Shape::NumericWise(_) => same("numeric scalar or vector", &num_sv),
            Shape::Special(_) => match self {
                Length => match args[0] {
                    Type::Vector(s, _) if s.is_float() => Ok(Type::Scalar(s)),
                    t => Err(format!("`length` needs a float vector, got {}", t)),
                },
                Distance => match same("float vector", &fvec)? {
                    Type::Vector(s, _) => Ok(Type::Scalar(s)),
                    _ => unreachable!("checked vector above"),
                },
                Dot => match same(
                    "numeric vector",
                    &|t| matches!(t, Type::Vector(s, _) if s.is_numeric()),
                )? {
                    Type::Vector(s, _) => Ok(Type::Scalar(s)),
                    _ => unreachable!("checked vector above"),
                },
                Cross => same(
                    "vec3<f32> or vec3<f64>",
                    &|t| matches!(t, Type::Vector(s, 3) if s.is_float()),
                ),
                Outer => match same("float vector", &|t| {
                    matches!(t, Type::Vector(Scalar::F32, _))
                })? {
                    Type::Vector(_, n) => Ok(Type::Matrix(n)),
                    _ => unreachable!("checked vector above"),
                },
                Transpose | Inverse => match args[0] {
                    t @ Type::Matrix(_) => Ok(t),
                    t => Err(format!("`{}` needs a matrix, got {}", self.name(), t)),
                },
                Determinant => match args[0] {
                    Type::Matrix(_) => Ok(Type::F32),
                    t => Err(format!("`determinant` needs a matrix, got {}", t)),
                },
                IsNan | IsInf => match args[0] {
                    Type::Scalar(s) if s.is_float() => Ok(Type::BOOL),
                    Type::Vector(s, n) if s.is_float() => Ok(Type::Vector(Scalar::Bool, n)),
                    t => Err(format!(
                        "`{}` needs f32 or a float vector, got {}",
                        self.name(),
                        t
                    )),
                },
                Any | All => match args[0] {
                    Type::Vector(Scalar::Bool, _) => Ok(Type::BOOL),
                    t => Err(format!("`{}` needs a bool vector, got {}", self.name(), t)),
                },
                _ => unreachable!("every special builtin is listed above"),
            },
        }
    }
}
