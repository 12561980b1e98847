//! `const` items: `const N: i32 = 4;` at the top level of kernel code.
//!
//! Pre: the items' initialisers are constant expressions (literals, other
//! consts, `PI`/`TAU`, arithmetic, comparisons, `as` between scalars).
//! Post: every const evaluated once, at compile time, to a scalar `Const`
//! with Rust's rules (integer overflow, division by zero and shifts of 32 or
//! more bits are errors); a name becomes a literal wherever it is used, so
//! consts also give array lengths and `match` patterns.

use super::*;

#[derive(Clone, Copy, Debug)]
enum Cv {
    /// Any integer (i32, u32, i64, u64 all fit).
    I(i128),
    F(f32),
    /// An f64.
    D(f64),
    B(bool),
}

struct Eval<'a> {
    code: &'a str,
    defs: HashMap<String, &'a syn::ItemConst>,
    done: HashMap<String, Const>,
    stack: Vec<String>,
}

/// Evaluates every const item; errors name the item or the sub-expression at fault.
pub(super) fn eval_consts<'a>(
    code: &'a str,
    items: &[&'a syn::ItemConst],
) -> R<HashMap<String, Const>> {
    let mut ev = Eval {
        code,
        defs: HashMap::new(),
        done: HashMap::new(),
        stack: Vec::new(),
    };
    for c in items {
        let name = c.ident.to_string();
        if ev.defs.insert(name.clone(), c).is_some() {
            return Err(err(&c.ident, format!("const `{}` is defined twice", name)));
        }
        if !c.generics.params.is_empty() {
            return Err(err(&c.generics, "const items cannot be generic"));
        }
    }
    for c in items {
        ev.item(&c.ident.to_string())?;
    }
    Ok(ev.done)
}

impl<'a> Eval<'a> {
    fn item(&mut self, name: &str) -> R<Const> {
        if let Some(c) = self.done.get(name) {
            return Ok(*c);
        }
        let item = self.defs[name];
        if self.stack.iter().any(|s| s == name) {
            return Err(err(
                &item.ident,
                format!("const `{}` depends on itself", name),
            ));
        }
        let ty = parse_type(&item.ty)?;
        let Type::Scalar(s) = ty else {
            return Err(err(
                &item.ty,
                format!(
                    "const items hold one scalar (i32, u32, f32 or bool), not {}",
                    ty
                ),
            ));
        };
        if s == Scalar::F16 {
            return Err(err(
                &item.ty,
                "const items hold i32, u32, f32 or bool, not f16; write an f32 const and convert it with `as f16` where it is used",
            ));
        }
        self.stack.push(name.to_string());
        let v = self.eval(&item.expr, s)?;
        self.stack.pop();
        let c = self.to_const(v, s, &item.expr)?;
        self.done.insert(name.to_string(), c);
        Ok(c)
    }

    fn to_const(&self, v: Cv, s: Scalar, node: &syn::Expr) -> R<Const> {
        let mismatch = |got: &str| {
            Err(err(
                node,
                format!(
                    "`{}` is {} but the const is {}",
                    snippet(self.code, node),
                    got,
                    s.name()
                ),
            ))
        };
        match (v, s) {
            (Cv::I(i), Scalar::I32) => Ok(Const::i32(self.fit(i, s, node)? as i32)),
            (Cv::I(i), Scalar::U32) => Ok(Const::u32(self.fit(i, s, node)? as u32)),
            (Cv::I(i), Scalar::I64) => Ok(Const::i64(self.fit(i, s, node)? as i64)),
            (Cv::I(i), Scalar::U64) => Ok(Const::u64(self.fit(i, s, node)? as u64)),
            (Cv::F(f), Scalar::F32) => Ok(Const::f32(f)),
            (Cv::D(f), Scalar::F64) => Ok(Const::f64(f)),
            (Cv::B(b), Scalar::Bool) => Ok(Const::bool(b)),
            (Cv::I(_), _) => mismatch("an integer"),
            (Cv::F(_), _) => mismatch("f32"),
            (Cv::D(_), _) => mismatch("f64"),
            (Cv::B(_), _) => mismatch("bool"),
        }
    }

    /// Evaluates `e` as a value of scalar type `s` (the type literals take).
    fn eval(&mut self, e: &syn::Expr, s: Scalar) -> R<Cv> {
        let v = match e {
            syn::Expr::Paren(p) => return self.eval(&p.expr, s),
            syn::Expr::Group(g) => return self.eval(&g.expr, s),
            syn::Expr::Lit(l) => match &l.lit {
                syn::Lit::Int(i) => {
                    if let Some((bits, signed)) = super::expr::narrow_suffix(i.suffix()) {
                        let v: u64 = i
                            .base10_parse()
                            .map_err(|_| err(i, "integer literal out of range"))?;
                        let c = super::expr::narrow_literal(i, v, false, bits, signed)?;
                        return Ok(from_const(c));
                    }
                    let ls = match i.suffix() {
                        "" => s,
                        x => match Type::parse(x) {
                            Some(Type::Scalar(t)) if t.is_numeric() => t,
                            _ => return Err(err(i, format!("unsupported literal suffix `{}`", x))),
                        },
                    };
                    let v: u64 = i
                        .base10_parse()
                        .map_err(|_| err(i, "integer literal out of range"))?;
                    match ls {
                        Scalar::F32 => Cv::F(v as f32),
                        Scalar::F64 => Cv::D(v as f64),
                        Scalar::Bool => return Err(err(i, "an integer is not a bool")),
                        _ => Cv::I(self.fit(v as i128, ls, e)?),
                    }
                }
                syn::Lit::Float(f) => match f.suffix() {
                    "f64" => Cv::D(f.base10_parse().map_err(|_| err(f, "bad float literal"))?),
                    "" if s == Scalar::F64 => {
                        Cv::D(f.base10_parse().map_err(|_| err(f, "bad float literal"))?)
                    }
                    "" | "f32" => Cv::F(f.base10_parse().map_err(|_| err(f, "bad float literal"))?),
                    x => return Err(err(f, format!("unsupported literal suffix `{}`", x))),
                },
                syn::Lit::Bool(b) => Cv::B(b.value),
                _ => return Err(err(l, "only number and bool literals are supported")),
            },
            syn::Expr::Path(p) => {
                let Some(id) = p.path.get_ident() else {
                    return Err(err(p, format!("unknown name `{}`", snippet(self.code, e))));
                };
                let name = id.to_string();
                match name.as_str() {
                    "PI" if s == Scalar::F64 => Cv::D(std::f64::consts::PI),
                    "TAU" if s == Scalar::F64 => Cv::D(std::f64::consts::TAU),
                    "PI" => Cv::F(std::f32::consts::PI),
                    "TAU" => Cv::F(std::f32::consts::TAU),
                    _ if self.defs.contains_key(&name) => {
                        let c = self.item(&name)?;
                        from_const(c)
                    }
                    _ => {
                        return Err(err(
                            p,
                            format!("`{}` is not a const; a const's value is computed from literals and other consts", name),
                        ))
                    }
                }
            }
            syn::Expr::Unary(u) => {
                let v = self.eval(&u.expr, s)?;
                match (&u.op, v) {
                    (syn::UnOp::Neg(_), Cv::I(i)) => Cv::I(-i),
                    (syn::UnOp::Neg(_), Cv::F(f)) => Cv::F(-f),
                    (syn::UnOp::Neg(_), Cv::D(f)) => Cv::D(-f),
                    (syn::UnOp::Not(_), Cv::B(b)) => Cv::B(!b),
                    (syn::UnOp::Not(_), Cv::I(i)) if s == Scalar::U32 => Cv::I(!(i as u32) as i128),
                    (syn::UnOp::Not(_), Cv::I(i)) if s == Scalar::U64 => Cv::I(!(i as u64) as i128),
                    (syn::UnOp::Not(_), Cv::I(i)) if s == Scalar::I64 => Cv::I(!(i as i64) as i128),
                    (syn::UnOp::Not(_), Cv::I(i)) => Cv::I(!(i as i32) as i128),
                    _ => return Err(err(u, format!("`{}` is not a constant operation", snippet(self.code, e)))),
                }
            }
            syn::Expr::Cast(c) => {
                if let Some((bits, signed)) = super::expr::narrow_int(&c.ty) {
                    // As `lower_narrow_cast`: integers keep the low bits,
                    // floats saturate (NaN is 0), the result is u32 / i32.
                    let from = self.type_of(&c.expr).unwrap_or(Scalar::I32);
                    let v = self.eval(&c.expr, from)?;
                    let half = 1i128 << (bits - 1);
                    let w = match v {
                        Cv::I(i) => i as u32,
                        Cv::F(f) if signed => return Ok(Cv::I((f as i128).clamp(-half, half - 1))),
                        Cv::F(f) => return Ok(Cv::I((f as i128).clamp(0, 2 * half - 1))),
                        Cv::D(f) if signed => return Ok(Cv::I((f as i128).clamp(-half, half - 1))),
                        Cv::D(f) => return Ok(Cv::I((f as i128).clamp(0, 2 * half - 1))),
                        Cv::B(b) => b as u32,
                    };
                    let k = 32 - bits;
                    return Ok(Cv::I(if signed {
                        ((w << k) as i32 >> k) as i128
                    } else {
                        ((w << k) >> k) as i128
                    }));
                }
                let to = parse_type(&c.ty)?;
                let Type::Scalar(ts) = to else {
                    return Err(err(&c.ty, "consts convert between scalars only"));
                };
                if ts == Scalar::F16 || self.type_of(&c.expr) == Some(Scalar::F16) {
                    return Err(err(&c.ty, "const items do not hold f16 values; convert in the kernel"));
                }
                let from = self.type_of(&c.expr).unwrap_or(ts);
                let v = self.eval(&c.expr, from)?;
                // Rust's `as` (the kernel's `eval::cast`): integers wrap,
                // floats saturate into integers.
                let d = |x: f64| match ts {
                    Scalar::I32 => Cv::I(x as i32 as i128),
                    Scalar::U32 => Cv::I(x as u32 as i128),
                    Scalar::I64 => Cv::I(x as i64 as i128),
                    Scalar::U64 => Cv::I(x as u64 as i128),
                    Scalar::F32 => Cv::F(x as f32),
                    Scalar::F64 => Cv::D(x),
                    Scalar::Bool => Cv::B(x != 0.0),
                    Scalar::F16 => unreachable!("refused above"),
                };
                match (v, ts) {
                    (Cv::I(i), Scalar::F32) => Cv::F(match from {
                        Scalar::U64 => i as u64 as f32,
                        _ => i as i64 as f32,
                    }),
                    (Cv::I(i), Scalar::F64) => Cv::D(i as f64),
                    (Cv::I(i), Scalar::I32) => Cv::I(i as u32 as i32 as i128),
                    (Cv::I(i), Scalar::U32) => Cv::I(i as u32 as i128),
                    (Cv::I(i), Scalar::I64) => Cv::I(i as u64 as i64 as i128),
                    (Cv::I(i), Scalar::U64) => Cv::I(i as u64 as i128),
                    (Cv::F(f), ts) if ts != Scalar::Bool => {
                        if ts == Scalar::F32 {
                            Cv::F(f)
                        } else {
                            d(f as f64)
                        }
                    }
                    (Cv::D(f), ts) if ts != Scalar::Bool => d(f),
                    (Cv::B(b), Scalar::Bool) => Cv::B(b),
                    _ => return Err(err(e, format!("cannot convert `{}` to {} with `as`", snippet(self.code, &c.expr), ts.name()))),
                }
            }
            syn::Expr::Binary(b) => return self.binary(b, s),
            _ => {
                return Err(err(
                    e,
                    format!("`{}` is not a constant expression; a const's value is computed from literals and other consts", snippet(self.code, e)),
                ))
            }
        };
        Ok(v)
    }

    /// The scalar type of a const expression when it is known without context.
    fn type_of(&self, e: &syn::Expr) -> Option<Scalar> {
        match e {
            syn::Expr::Paren(p) => self.type_of(&p.expr),
            syn::Expr::Path(p) => {
                let n = p.path.get_ident()?.to_string();
                match n.as_str() {
                    "PI" | "TAU" => Some(Scalar::F32),
                    _ => match &self.defs.get(&n)?.ty.as_ref() {
                        syn::Type::Path(tp) => match Type::parse(&tp.path.get_ident()?.to_string())
                        {
                            Some(Type::Scalar(s)) => Some(s),
                            _ => None,
                        },
                        _ => None,
                    },
                }
            }
            syn::Expr::Lit(l) => match &l.lit {
                syn::Lit::Float(f) if f.suffix() == "f64" => Some(Scalar::F64),
                syn::Lit::Float(_) => Some(Scalar::F32),
                syn::Lit::Bool(_) => Some(Scalar::Bool),
                syn::Lit::Int(i) => match (i.suffix(), Type::parse(i.suffix())) {
                    ("u8" | "u16", _) => Some(Scalar::U32),
                    (_, Some(Type::Scalar(s))) => Some(s),
                    _ => Some(Scalar::I32),
                },
                _ => None,
            },
            syn::Expr::Binary(b) if !is_comparison(&b.op) => {
                self.type_of(&b.left).or_else(|| self.type_of(&b.right))
            }
            syn::Expr::Unary(u) => self.type_of(&u.expr),
            syn::Expr::Cast(c) if super::expr::narrow_int(&c.ty).is_some() => {
                super::expr::narrow_int(&c.ty)
                    .map(|(_, signed)| if signed { Scalar::I32 } else { Scalar::U32 })
            }
            syn::Expr::Cast(c) => match parse_type(&c.ty) {
                Ok(Type::Scalar(s)) => Some(s),
                _ => None,
            },
            _ => None,
        }
    }

    fn binary(&mut self, b: &syn::ExprBinary, s: Scalar) -> R<Cv> {
        use syn::BinOp as B;
        let node = b;
        // Comparisons type their operands from the operands themselves.
        let os = if is_comparison(&b.op) {
            self.type_of(&b.left)
                .or_else(|| self.type_of(&b.right))
                .unwrap_or(Scalar::I32)
        } else {
            s
        };
        let l = self.eval(&b.left, os)?;
        let r = self.eval(
            &b.right,
            if matches!(b.op, B::Shl(_) | B::Shr(_)) {
                Scalar::I32
            } else {
                os
            },
        )?;
        let bad = || {
            Err(err(
                b,
                format!(
                    "`{}` is not a constant operation on these types",
                    snippet(self.code, node)
                ),
            ))
        };
        let v = match (l, r) {
            (Cv::I(x), Cv::I(y)) => {
                let v = match b.op {
                    B::Add(_) => x.checked_add(y),
                    B::Sub(_) => x.checked_sub(y),
                    B::Mul(_) => x.checked_mul(y),
                    B::Div(_) | B::Rem(_) if y == 0 => {
                        return Err(err(
                            b,
                            format!("`{}` divides by zero", snippet(self.code, node)),
                        ))
                    }
                    B::Div(_) => x.checked_div(y),
                    B::Rem(_) => x.checked_rem(y),
                    B::BitAnd(_) => Some(x & y),
                    B::BitOr(_) => Some(x | y),
                    B::BitXor(_) => Some(x ^ y),
                    B::Shl(_) | B::Shr(_) if !(0..32 * os.words() as i128).contains(&y) => {
                        return Err(err(
                            b,
                            format!(
                                "`{}` shifts by {} bits; a shift needs 0..{}",
                                snippet(self.code, node),
                                y,
                                32 * os.words()
                            ),
                        ))
                    }
                    B::Shl(_) => Some(match os {
                        Scalar::U32 => ((x as u32) << y) as i128,
                        Scalar::I64 => ((x as i64) << y) as i128,
                        Scalar::U64 => ((x as u64) << y) as i128,
                        _ => ((x as i32) << y) as i128,
                    }),
                    B::Shr(_) => Some(match os {
                        Scalar::U32 => ((x as u32) >> y) as i128,
                        Scalar::I64 => ((x as i64) >> y) as i128,
                        Scalar::U64 => ((x as u64) >> y) as i128,
                        _ => ((x as i32) >> y) as i128,
                    }),
                    B::Eq(_) => return Ok(Cv::B(x == y)),
                    B::Ne(_) => return Ok(Cv::B(x != y)),
                    B::Lt(_) => return Ok(Cv::B(x < y)),
                    B::Le(_) => return Ok(Cv::B(x <= y)),
                    B::Gt(_) => return Ok(Cv::B(x > y)),
                    B::Ge(_) => return Ok(Cv::B(x >= y)),
                    _ => return bad(),
                };
                match v {
                    Some(v) => Cv::I(self.fit(v, os, node)?),
                    None => {
                        return Err(err(
                            b,
                            format!("`{}` overflows {}", snippet(self.code, node), os.name()),
                        ))
                    }
                }
            }
            (Cv::F(x), Cv::F(y)) => match b.op {
                B::Add(_) => Cv::F(x + y),
                B::Sub(_) => Cv::F(x - y),
                B::Mul(_) => Cv::F(x * y),
                B::Div(_) => Cv::F(x / y),
                B::Rem(_) => Cv::F(x % y),
                B::Eq(_) => Cv::B(x == y),
                B::Ne(_) => Cv::B(x != y),
                B::Lt(_) => Cv::B(x < y),
                B::Le(_) => Cv::B(x <= y),
                B::Gt(_) => Cv::B(x > y),
                B::Ge(_) => Cv::B(x >= y),
                _ => return bad(),
            },
            (Cv::D(x), Cv::D(y)) => match b.op {
                B::Add(_) => Cv::D(x + y),
                B::Sub(_) => Cv::D(x - y),
                B::Mul(_) => Cv::D(x * y),
                B::Div(_) => Cv::D(x / y),
                B::Rem(_) => Cv::D(x % y),
                B::Eq(_) => Cv::B(x == y),
                B::Ne(_) => Cv::B(x != y),
                B::Lt(_) => Cv::B(x < y),
                B::Le(_) => Cv::B(x <= y),
                B::Gt(_) => Cv::B(x > y),
                B::Ge(_) => Cv::B(x >= y),
                _ => return bad(),
            },
            (Cv::B(x), Cv::B(y)) => match b.op {
                B::And(_) | B::BitAnd(_) => Cv::B(x && y),
                B::Or(_) | B::BitOr(_) => Cv::B(x || y),
                B::BitXor(_) | B::Ne(_) => Cv::B(x != y),
                B::Eq(_) => Cv::B(x == y),
                _ => return bad(),
            },
            _ => {
                return Err(err(
                    b,
                    format!(
                        "`{}` mixes types; convert one side with `as`",
                        snippet(self.code, node)
                    ),
                ))
            }
        };
        Ok(v)
    }
}

fn is_comparison(op: &syn::BinOp) -> bool {
    use syn::BinOp as B;
    matches!(
        op,
        B::Eq(_) | B::Ne(_) | B::Lt(_) | B::Le(_) | B::Gt(_) | B::Ge(_)
    )
}

fn from_const(c: Const) -> Cv {
    match c.scalar {
        Scalar::I32 => Cv::I(c.bits as u32 as i32 as i128),
        Scalar::U32 | Scalar::U64 => Cv::I(c.bits as i128),
        Scalar::I64 => Cv::I(c.bits as i64 as i128),
        Scalar::F32 => Cv::F(f32::from_bits(c.bits as u32)),
        Scalar::F64 => Cv::D(f64::from_bits(c.bits)),
        _ => Cv::B(c.bits != 0),
    }
}

impl Eval<'_> {
    /// Checks that an integer fits its scalar type.
    fn fit<T: Spanned>(&self, v: i128, s: Scalar, node: &T) -> R<i128> {
        let ok = match s {
            Scalar::I32 => (i32::MIN as i128..=i32::MAX as i128).contains(&v),
            Scalar::U32 => (0..=u32::MAX as i128).contains(&v),
            Scalar::I64 => (i64::MIN as i128..=i64::MAX as i128).contains(&v),
            Scalar::U64 => (0..=u64::MAX as i128).contains(&v),
            _ => true,
        };
        if ok {
            Ok(v)
        } else {
            Err(err(
                node,
                format!(
                    "`{}` is {}, which does not fit in {}",
                    snippet(self.code, node),
                    v,
                    s.name()
                ),
            ))
        }
    }
}
