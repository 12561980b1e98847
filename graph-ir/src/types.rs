//! Value types shared by the kernel language, the IR and the field storage.
//!
//! Every component of every type is one 32-bit word, except the 64-bit
//! scalars (`f64`, `i64`, `u64`), which are two (low word first). All
//! backends address field memory as arrays of `u32` and reinterpret bits per
//! component, so a 64-bit component is two consecutive words.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scalar {
    Bool,
    I32,
    U32,
    F32,
    /// 64-bit scalars: two words in field memory. Backends without them
    /// (wgpu without `SHADER_F64` / `SHADER_INT64`) refuse kernels that
    /// use them, naming the node (`TargetCaps::wide`).
    I64,
    U64,
    F64,
    /// IEEE binary16, a kernel-language compute type. It exists only from
    /// the front end to `lower::half`, which turns every f16 value into an
    /// f32 holding a binary16 value (rounded after each operation); no
    /// later pass and no backend sees it.
    F16,
}

impl Scalar {
    pub fn name(self) -> &'static str {
        match self {
            Scalar::Bool => "bool",
            Scalar::I32 => "i32",
            Scalar::U32 => "u32",
            Scalar::F32 => "f32",
            Scalar::I64 => "i64",
            Scalar::U64 => "u64",
            Scalar::F64 => "f64",
            Scalar::F16 => "f16",
        }
    }
    pub fn is_integer(self) -> bool {
        matches!(self, Scalar::I32 | Scalar::U32 | Scalar::I64 | Scalar::U64)
    }
    pub fn is_float(self) -> bool {
        matches!(self, Scalar::F32 | Scalar::F64 | Scalar::F16)
    }
    pub fn is_signed(self) -> bool {
        matches!(
            self,
            Scalar::I32 | Scalar::I64 | Scalar::F32 | Scalar::F64 | Scalar::F16
        )
    }
    /// A 64-bit scalar (two words).
    pub fn is_wide(self) -> bool {
        matches!(self, Scalar::I64 | Scalar::U64 | Scalar::F64)
    }
    /// 32-bit words per value.
    pub fn words(self) -> usize {
        if self.is_wide() {
            2
        } else {
            1
        }
    }
    /// The mask of the value's bits in a `u64` pattern.
    pub fn mask(self) -> u64 {
        if self.is_wide() {
            u64::MAX
        } else {
            u32::MAX as u64
        }
    }
    pub fn is_numeric(self) -> bool {
        !matches!(self, Scalar::Bool)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    Void,
    Scalar(Scalar),
    /// A vector of 2 to 4 components.
    Vector(Scalar, u8),
    /// A square f32 matrix of size 2 to 4, stored column-major.
    Matrix(u8),
}

impl Type {
    pub const F32: Type = Type::Scalar(Scalar::F32);
    pub const I32: Type = Type::Scalar(Scalar::I32);
    pub const U32: Type = Type::Scalar(Scalar::U32);
    pub const BOOL: Type = Type::Scalar(Scalar::Bool);

    /// Number of components (scalars) of a value of this type.
    pub fn components(self) -> usize {
        match self {
            Type::Void => 0,
            Type::Scalar(_) => 1,
            Type::Vector(_, n) => n as usize,
            Type::Matrix(n) => (n as usize) * (n as usize),
        }
    }
    /// Number of 32-bit words a value of this type occupies.
    pub fn words(self) -> usize {
        self.components() * self.scalar().map_or(1, Scalar::words)
    }
    /// Whether any component is a 64-bit scalar.
    pub fn is_wide(self) -> bool {
        self.scalar().is_some_and(Scalar::is_wide)
    }
    /// The scalar type of each component.
    pub fn scalar(self) -> Option<Scalar> {
        match self {
            Type::Void => None,
            Type::Scalar(s) | Type::Vector(s, _) => Some(s),
            Type::Matrix(_) => Some(Scalar::F32),
        }
    }
    pub fn is_scalar(self) -> bool {
        matches!(self, Type::Scalar(_))
    }
    pub fn is_vector(self) -> bool {
        matches!(self, Type::Vector(..))
    }
    pub fn is_float(self) -> bool {
        self.scalar().is_some_and(Scalar::is_float)
    }
    pub fn is_int(self) -> bool {
        self.scalar().is_some_and(Scalar::is_integer)
    }
    /// Whether any component is the kernel language's f16 (which
    /// `passes::half` removes).
    pub fn is_f16(self) -> bool {
        self.scalar() == Some(Scalar::F16)
    }
    pub fn with_scalar(self, s: Scalar) -> Type {
        match self {
            Type::Scalar(_) => Type::Scalar(s),
            Type::Vector(_, n) => Type::Vector(s, n),
            other => other,
        }
    }
    /// Parses the names users write: `f32`, `f64`, `i64`, `vec3`, `vec3<f32>`,
    /// `vec2<f64>` (or GLSL's `dvec2`), `ivec2`, `uvec4`, `mat3`.
    pub fn parse(name: &str) -> Option<Type> {
        let name = name.replace(' ', "");
        let scalar = |s: &str| match s {
            "f32" => Some(Scalar::F32),
            "f16" => Some(Scalar::F16),
            "i32" => Some(Scalar::I32),
            "u32" => Some(Scalar::U32),
            "bool" => Some(Scalar::Bool),
            "i64" => Some(Scalar::I64),
            "u64" => Some(Scalar::U64),
            "f64" => Some(Scalar::F64),
            _ => None,
        };
        if let Some(s) = scalar(&name) {
            return Some(Type::Scalar(s));
        }
        let (base, generic) = match name.find('<') {
            Some(p) if name.ends_with('>') => (&name[..p], Some(&name[p + 1..name.len() - 1])),
            Some(_) => return None,
            None => (name.as_str(), None),
        };
        let size = |c: char| {
            c.to_digit(10)
                .filter(|n| (2..=4).contains(n))
                .map(|n| n as u8)
        };
        let last = base.chars().last()?;
        let n = size(last)?;
        let stem = &base[..base.len() - 1];
        let prefix_scalar = match stem {
            "vec" | "mat" => None,
            "ivec" => Some(Scalar::I32),
            "uvec" => Some(Scalar::U32),
            "bvec" => Some(Scalar::Bool),
            "dvec" => Some(Scalar::F64),
            _ => return None,
        };
        let s = match (prefix_scalar, generic) {
            (Some(s), None) => s,
            (None, None) => Scalar::F32,
            (None, Some(g)) => scalar(g)?,
            (Some(_), Some(_)) => return None,
        };
        if stem == "mat" {
            return (s == Scalar::F32).then_some(Type::Matrix(n));
        }
        Some(Type::Vector(s, n))
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Void => write!(f, "()"),
            Type::Scalar(s) => write!(f, "{}", s.name()),
            Type::Vector(s, n) => write!(f, "vec{}<{}>", n, s.name()),
            Type::Matrix(n) => write!(f, "mat{}<f32>", n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn parses_type_names() {
        assert_eq!(Type::parse("vec3"), Some(Type::Vector(Scalar::F32, 3)));
        assert_eq!(Type::parse("vec3<i32>"), Some(Type::Vector(Scalar::I32, 3)));
        assert_eq!(Type::parse("ivec2"), Some(Type::Vector(Scalar::I32, 2)));
        assert_eq!(Type::parse("mat4"), Some(Type::Matrix(4)));
        assert_eq!(Type::parse("mat4<i32>"), None);
        assert_eq!(Type::parse("vec5"), None);
        assert_eq!(Type::parse("u32"), Some(Type::U32));
        assert_eq!(Type::parse("float"), None);
        assert_eq!(format!("{}", Type::Vector(Scalar::F32, 2)), "vec2<f32>");
    }
}
