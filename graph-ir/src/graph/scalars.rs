//! Kernel scalar declarations (`"scalars"` of a kernel node): the one parser
//! the builder, `--set` (`overrides`) and the app use. A declaration is a
//! plain number (`1` declares an i32, `1.0` an f32) or an object
//! `{"type", "default", "min", "max", "doc"}`; its value becomes a kernel
//! word by the one conversion rule, `ir::scalar::scalar_bits`.

use crate::ir::scalar::scalar_bits;
use crate::types::Type;
use serde_json::Value;

#[derive(Clone, Debug, PartialEq)]
pub struct ScalarDecl {
    pub ty: Type,
    /// The declared value; `None` when an object form gives none.
    pub default: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub doc: String,
}

impl ScalarDecl {
    /// Parses and checks the declaration of scalar `name`: its form, its
    /// range, and that its value is a valid value of its type. The errors
    /// name the scalar; callers add the node.
    pub fn parse(name: &str, v: &Value) -> Result<ScalarDecl, String> {
        let num = |v: &Value| v.as_f64().filter(|x| x.is_finite());
        let decl = match v {
            Value::Number(x) => ScalarDecl {
                ty: if x.is_i64() || x.is_u64() {
                    Type::I32
                } else {
                    Type::F32
                },
                default: x.as_f64(),
                min: None,
                max: None,
                doc: String::new(),
            },
            Value::Object(d) => {
                let ty = match d.get("type").and_then(Value::as_str) {
                    Some(t @ ("f32" | "i32" | "u32")) => Type::parse(t).expect("a scalar type"),
                    _ => {
                        return Err(format!(
                            "scalar '{}' needs \"type\": \"f32\", \"i32\" or \"u32\"",
                            name
                        ))
                    }
                };
                if d.keys()
                    .any(|k| !matches!(k.as_str(), "type" | "default" | "min" | "max" | "doc"))
                {
                    return Err(format!(
                        "scalar '{}' takes only \"type\", \"default\", \"min\", \"max\" and \"doc\"",
                        name
                    ));
                }
                for key in ["default", "min", "max"] {
                    if d.get(key).is_some_and(|x| num(x).is_none()) {
                        return Err(format!("scalar '{}' has a non-numeric {}", name, key));
                    }
                }
                let doc = match d.get("doc") {
                    None => String::new(),
                    Some(Value::String(s)) => s.clone(),
                    Some(_) => return Err(format!("scalar '{}': \"doc\" must be a string", name)),
                };
                let get = |key: &str| d.get(key).and_then(Value::as_f64);
                ScalarDecl {
                    ty,
                    default: get("default"),
                    min: get("min"),
                    max: get("max"),
                    doc,
                }
            }
            _ => {
                return Err(format!(
                    "scalar '{}' must be a number or {{\"type\": .., \"default\": ..}}",
                    name
                ))
            }
        };
        let (lo, hi) = decl.range();
        if lo > hi {
            return Err(format!("scalar '{}' has min {} above max {}", name, lo, hi));
        }
        if let Some(default) = decl.default.filter(|x| !(lo..=hi).contains(x)) {
            return Err(format!(
                "scalar '{}' default {} is outside its range {} to {}",
                name, default, lo, hi
            ));
        }
        decl.bits()
            .map_err(|m| format!("scalar '{}': {}", name, m))?;
        Ok(decl)
    }

    /// `min..=max`, unbounded where not declared.
    pub fn range(&self) -> (f64, f64) {
        (
            self.min.unwrap_or(f64::NEG_INFINITY),
            self.max.unwrap_or(f64::INFINITY),
        )
    }

    /// The scalar's value: its default, or without one the value nearest 0
    /// inside its range.
    pub fn value(&self) -> f64 {
        let (lo, hi) = self.range();
        self.default.unwrap_or_else(|| 0f64.clamp(lo, hi))
    }

    /// The value as the word a kernel reads.
    pub fn bits(&self) -> Result<u32, String> {
        scalar_bits(self.ty, self.value())
    }
}

/// Sets the value of the declaration `decl` of scalar `name` (its default,
/// or the number itself), keeping its type: a plain f32 stays an f32 when
/// set to a whole number, and a value its type cannot hold (2.5 for an i32)
/// is an error, the declaration unchanged.
pub fn set_value(name: &str, decl: &mut Value, value: f64) -> Result<(), String> {
    let mut d = ScalarDecl::parse(name, decl)?;
    d.default = Some(value);
    let (lo, hi) = d.range();
    if !(lo..=hi).contains(&value) {
        return Err(format!(
            "scalar '{}' default {} is outside its range {} to {}",
            name, value, lo, hi
        ));
    }
    d.bits().map_err(|m| format!("scalar '{}': {}", name, m))?;
    let number = if d.ty == Type::F32 {
        Value::from(value)
    } else {
        Value::from(value as i64)
    };
    match decl {
        Value::Object(o) => {
            o.insert("default".into(), number);
        }
        slot => *slot = number,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_numbers_declare_their_type_by_how_they_are_written() {
        let d = ScalarDecl::parse("n", &json!(3)).unwrap();
        assert_eq!((d.ty, d.value()), (Type::I32, 3.0));
        let d = ScalarDecl::parse("dt", &json!(3.0)).unwrap();
        assert_eq!((d.ty, d.value()), (Type::F32, 3.0));
    }

    #[test]
    fn objects_give_type_range_and_a_value_nearest_zero_without_default() {
        let d = ScalarDecl::parse("k", &json!({"type": "u32", "min": 4, "max": 9})).unwrap();
        assert_eq!((d.ty, d.value(), d.range()), (Type::U32, 4.0, (4.0, 9.0)));
        assert_eq!(d.bits(), Ok(4));
    }

    #[test]
    fn a_value_its_type_cannot_hold_is_refused_by_name() {
        let e = ScalarDecl::parse("n", &json!({"type": "i32", "default": 2.5})).unwrap_err();
        assert_eq!(e, "scalar 'n': 2.5 is not a valid i32");
        let e = ScalarDecl::parse("n", &json!(3_000_000_000u64)).unwrap_err();
        assert_eq!(e, "scalar 'n': 3000000000 is not a valid i32");
        let e = ScalarDecl::parse("n", &json!({"type": "f64"})).unwrap_err();
        assert!(e.contains("needs \"type\""), "{}", e);
    }

    #[test]
    fn set_value_keeps_the_type_and_applies_the_one_rule() {
        let mut plain_f32 = json!(0.5);
        set_value("a", &mut plain_f32, 2.0).unwrap();
        assert_eq!(plain_f32, json!(2.0));
        assert!(plain_f32.is_f64(), "still an f32 declaration");
        let mut plain_i32 = json!(3);
        assert_eq!(
            set_value("n", &mut plain_i32, 2.5),
            Err("scalar 'n': 2.5 is not a valid i32".to_string())
        );
        assert_eq!(plain_i32, json!(3), "unchanged");
        set_value("n", &mut plain_i32, 7.0).unwrap();
        assert_eq!(plain_i32, json!(7));
        let mut ranged = json!({"type": "f32", "default": 0.1, "max": 0.25});
        assert!(set_value("a", &mut ranged, 0.5)
            .unwrap_err()
            .contains("outside its range"));
        set_value("a", &mut ranged, 0.2).unwrap();
        assert_eq!(ranged["default"], json!(0.2));
    }
}
