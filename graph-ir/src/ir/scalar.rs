//! The one conversion rule for kernel scalars: a number as the graph file,
//! `--set`, the app's sliders and `Simulation::set_param` give it (an f64)
//! becomes the 32-bit word a kernel reads. An f32 takes the nearest f32; an
//! integer scalar takes only whole numbers in its type's range, so 2.5 for
//! an i32 is an error everywhere instead of silently becoming 2 in one place.

use crate::types::{Scalar, Type};

/// The word of scalar type `ty` holding `v`, or why `v` is no `ty`.
pub fn scalar_bits(ty: Type, v: f64) -> Result<u32, String> {
    match ty {
        Type::Scalar(Scalar::F32) => Ok((v as f32).to_bits()),
        Type::Scalar(Scalar::I32)
            if v.fract() == 0.0 && v >= i32::MIN as f64 && v <= i32::MAX as f64 =>
        {
            Ok(v as i32 as u32)
        }
        Type::Scalar(Scalar::U32) if v.fract() == 0.0 && v >= 0.0 && v <= u32::MAX as f64 => {
            Ok(v as u32)
        }
        _ => Err(format!("{} is not a valid {}", v, ty)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_round_to_the_nearest_f32() {
        assert_eq!(scalar_bits(Type::F32, 0.1), Ok(0.1f32.to_bits()));
        assert_eq!(scalar_bits(Type::F32, 3.0), Ok(3.0f32.to_bits()));
        assert_eq!(
            scalar_bits(Type::F32, -1e300),
            Ok(f32::NEG_INFINITY.to_bits())
        );
    }

    #[test]
    fn integers_take_whole_numbers_in_range_only() {
        assert_eq!(scalar_bits(Type::I32, -3.0), Ok(-3i32 as u32));
        assert_eq!(scalar_bits(Type::I32, i32::MIN as f64), Ok(i32::MIN as u32));
        assert_eq!(scalar_bits(Type::U32, u32::MAX as f64), Ok(u32::MAX));
        assert_eq!(
            scalar_bits(Type::I32, 2.5),
            Err("2.5 is not a valid i32".to_string())
        );
        assert_eq!(
            scalar_bits(Type::U32, -1.0),
            Err("-1 is not a valid u32".to_string())
        );
        assert!(scalar_bits(Type::I32, 2147483648.0).is_err());
        assert!(scalar_bits(Type::U32, 4294967296.0).is_err());
        assert!(scalar_bits(Type::I32, f64::NAN).is_err());
        assert!(scalar_bits(Type::BOOL, 1.0).is_err());
    }
}
