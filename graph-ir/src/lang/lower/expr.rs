//! Expressions: dispatch, literals (typed from context), paths, unary,
//! binary, logical and compound-assignment operators with their type rules.

use super::*;

impl<'a> FnLowerer<'a> {
    pub(super) fn lower_expr(&mut self, e: &syn::Expr, want: Option<Type>) -> R<Val> {
        let sp = span_of(e);
        match e {
            syn::Expr::Lit(l) => self.lower_lit(&l.lit, want),
            syn::Expr::Paren(p) => self.lower_expr(&p.expr, want),
            syn::Expr::Group(g) => self.lower_expr(&g.expr, want),
            syn::Expr::Path(p) => self.lower_path(p),
            syn::Expr::Unary(u) => self.lower_unary(u, want),
            syn::Expr::Binary(b) => self.lower_binary(b, want),
            syn::Expr::Assign(a) => {
                if let Some(arr) = self.array_named(&a.left) {
                    self.lower_array_assign(arr, &a.left, &a.right)?;
                    return Ok(self.unit());
                }
                if let Some(place @ (aggregates::Slot::Struct(..) | aggregates::Slot::Tuple(_), ..)) =
                    self.agg_place(&a.left)?
                {
                    self.lower_agg_assign(place, &a.left, &a.right)?;
                    return Ok(self.unit());
                }
                let place = self.lower_place(&a.left)?;
                let pty = self.place_type(&place);
                let v = self.lower_expr(&a.right, Some(pty))?;
                let target = self.text(&a.left);
                let v = self.coerce(v, pty, &a.right, &format!("`{}`", target))?;
                self.store_place(place, v, sp);
                Ok(self.unit())
            }
            syn::Expr::Cast(c) => {
                if let Some((bits, signed)) = narrow_int(&c.ty) {
                    return self.lower_narrow_cast(c, bits, signed);
                }
                let to = parse_type(&c.ty)?;
                let v = self.lower_expr(&c.expr, if is_literal(&c.expr) { Some(to) } else { None })?;
                if v.ty == to {
                    return Ok(v);
                }
                if v.ty.components() != to.components() || matches!(to, Type::Matrix(_)) || v.ty == Type::Void {
                    return Err(err(e, format!("cannot convert {} to {} with `as`", v.ty, to)));
                }
                // f16 values are rounded from f32 (`passes::half`); rounding
                // an f64 to f32 first could round a second time.
                if v.ty.scalar() == Some(Scalar::F64) && to.scalar() == Some(Scalar::F16) {
                    return Err(err(
                        e,
                        format!(
                            "f64 does not convert to f16 directly; write `{} as f32 as f16` (which rounds twice)",
                            self.text(&c.expr)
                        ),
                    ));
                }
                Ok(self.val(InstKind::Cast(v.id), to, sp))
            }
            syn::Expr::Field(f) => {
                if self.static_ty(&f.base).is_some_and(|t| !t.is_plain()) {
                    return self.lower_agg_member(f, e);
                }
                let base = self.lower_expr(&f.base, None)?;
                self.lower_member(base, &f.member, e)
            }
            syn::Expr::Index(ix) => self.lower_index(ix),
            syn::Expr::Call(c) => self.lower_call(c, want),
            syn::Expr::MethodCall(m) => self.lower_method(m, want),
            syn::Expr::If(i) => self.lower_if(i, want),
            syn::Expr::Block(b) => {
                if b.label.is_some() {
                    return Err(err(e, "block labels are not supported"));
                }
                let v = self.lower_block_stmts(&b.block.stmts, want)?;
                Ok(v.unwrap_or_else(|| self.unit()))
            }
            syn::Expr::ForLoop(f) => self.lower_for(f).map(|_| self.unit()),
            syn::Expr::While(w) => {
                let snap = self.enter_loop(w.label.as_ref(), sp)?;
                let body = self.nested(|s| {
                    let c = s.lower_expr(&w.cond, Some(Type::BOOL))?;
                    let c = s.cond(c, &w.cond)?;
                    let not = s.val(InstKind::Unary(UnaryOp::Not, c.id), Type::BOOL, sp);
                    let brk = s.nested(|s| {
                        s.emit_at(InstKind::Break, Type::Void, sp);
                        Ok(())
                    })?;
                    s.emit_at(InstKind::If { cond: not.id, accept: brk, reject: vec![] }, Type::Void, sp);
                    let r = s.lower_block_stmts(&w.body.stmts, None);
                    r.map(|_| ())
                })?;
                self.emit_at(InstKind::Loop { body }, Type::Void, sp);
                self.exit_loop(snap, sp)?;
                Ok(self.unit())
            }
            syn::Expr::Loop(l) => {
                let snap = self.enter_loop(l.label.as_ref(), sp)?;
                let body = self.nested(|s| {
                    let r = s.lower_block_stmts(&l.body.stmts, None);
                    r.map(|_| ())
                })?;
                self.emit_at(InstKind::Loop { body }, Type::Void, sp);
                self.exit_loop(snap, sp)?;
                Ok(self.unit())
            }
            syn::Expr::Break(b) => {
                if b.expr.is_some() {
                    return Err(err(e, "`break` takes no value in kernel code"));
                }
                self.lower_jump(b, b.label.as_ref(), true)
            }
            syn::Expr::Continue(c) => self.lower_jump(c, c.label.as_ref(), false),
            syn::Expr::Match(m) => self.lower_match(m, want),
            syn::Expr::Return(r) if self.inline_ret.is_some() => self.lower_inline_return(r),
            syn::Expr::Return(r) => {
                let ret = self.func.ret;
                let v = match &r.expr {
                    Some(x) => {
                        let v = self.lower_expr(x, Some(ret))?;
                        let name = format!("`{}`'s return type", self.func.name);
                        Some(self.coerce(v, ret, x, &name)?.id)
                    }
                    None if ret != Type::Void => {
                        return Err(err(e, format!("`{}` must return a value of type {}", self.func.name, ret)))
                    }
                    None => None,
                };
                self.emit_at(InstKind::Return(v), Type::Void, sp);
                Ok(self.unit())
            }
            syn::Expr::Tuple(t) if t.elems.is_empty() => Ok(self.unit()),
            syn::Expr::Tuple(_) => Err(err(
                e,
                "a tuple is not a plain value: bind it with `let (a, b) = ...`, return it from a helper, or index a field with it, e.g. `x[(i, j)]` (use vecN(...) for vectors)",
            )),
            syn::Expr::Struct(_) => match self.static_ty(e) {
                Some(t) => Err(self.not_plain(e, &t)),
                // Reports the unknown struct.
                None => self.lower_agg(e, None).and_then(|a| Err(self.not_plain(e, &a.ty()))),
            },
            syn::Expr::Array(_) | syn::Expr::Repeat(_) => Err(err(
                e,
                "an array literal starts a local array: `let w = [a, b, c];` or `let mut w = [0.0; N];` (arrays of arrays are not supported), or lists a field's indices, e.g. `x[[i, j]]`",
            )),
            syn::Expr::Range(_) => Err(err(e, "ranges are only allowed in `for` loops")),
            syn::Expr::Macro(_) => Err(err(e, "macros are not supported in kernel code")),
            syn::Expr::Reference(_) => Err(err(e, "references are not supported in kernel code")),
            syn::Expr::Closure(_) => Err(err(e, "closures are not supported; write a helper `fn`")),
            _ => Err(err(e, format!("`{}` is not supported in kernel code", self.text(e)))),
        }
    }

    pub(super) fn lower_lit(&mut self, lit: &syn::Lit, want: Option<Type>) -> R<Val> {
        let sp = span_of(lit);
        let want_scalar = want.and_then(|t| t.scalar());
        match lit {
            syn::Lit::Int(i) => {
                if let Some((bits, signed)) = narrow_suffix(i.suffix()) {
                    let v: u64 = i
                        .base10_parse()
                        .map_err(|_| err(lit, "integer literal out of range"))?;
                    return Ok(self.konst(narrow_literal(lit, v, false, bits, signed)?, sp));
                }
                let scalar = match i.suffix() {
                    "" => match want_scalar {
                        Some(s) if s.is_numeric() => s,
                        _ => Scalar::I32,
                    },
                    s => match Type::parse(s) {
                        Some(Type::Scalar(s)) if s.is_numeric() => s,
                        _ => return Err(err(lit, format!("unsupported literal suffix `{}`", s))),
                    },
                };
                let v: u64 = i
                    .base10_parse()
                    .map_err(|_| err(lit, "integer literal out of range"))?;
                let c = match scalar {
                    Scalar::I32 if v <= i32::MAX as u64 => Const::i32(v as i32),
                    Scalar::U32 if v <= u32::MAX as u64 => Const::u32(v as u32),
                    Scalar::I64 if v <= i64::MAX as u64 => Const::i64(v as i64),
                    Scalar::U64 => Const::u64(v),
                    Scalar::F32 => Const::f32(v as f32),
                    Scalar::F64 => Const::f64(v as f64),
                    Scalar::F16 => f16_literal(lit, v as f32)?,
                    s => return Err(err(lit, format!("`{}` does not fit in {}", v, s.name()))),
                };
                Ok(self.konst(c, sp))
            }
            syn::Lit::Float(f) => {
                // Unsuffixed float literals take f64 (parsed as f64, never
                // through f32) or f16 where one is wanted, else f32.
                let kind = match f.suffix() {
                    "" => want_scalar.filter(|s| matches!(s, Scalar::F64 | Scalar::F16)),
                    "f32" => None,
                    "f64" => Some(Scalar::F64),
                    "f16" => Some(Scalar::F16),
                    s => {
                        return Err(err(
                            lit,
                            format!(
                                "unsupported literal suffix `{}`; floats are f32, f64 or f16",
                                s
                            ),
                        ))
                    }
                };
                let c = match kind {
                    Some(Scalar::F64) => Const::f64(
                        f.base10_parse()
                            .map_err(|_| err(lit, "bad float literal"))?,
                    ),
                    Some(_) => f16_literal(
                        lit,
                        f.base10_parse()
                            .map_err(|_| err(lit, "bad float literal"))?,
                    )?,
                    None => Const::f32(
                        f.base10_parse()
                            .map_err(|_| err(lit, "bad float literal"))?,
                    ),
                };
                Ok(self.konst(c, sp))
            }
            syn::Lit::Bool(b) => Ok(self.konst(Const::bool(b.value), sp)),
            _ => Err(err(lit, "only number and bool literals are supported")),
        }
    }

    pub(super) fn lower_path(&mut self, p: &syn::ExprPath) -> R<Val> {
        let sp = span_of(p);
        let Some(ident) = p.path.get_ident() else {
            return Err(err(p, format!("unknown name `{}`", self.text(p))));
        };
        let name = ident.to_string();
        if let Some(b) = self.lookup(&name) {
            return Ok(match b {
                Binding::Value(v) => v,
                Binding::Local(l, ty) => self.val(InstKind::LocalLoad(l), ty, sp),
                Binding::Array(a) => {
                    return Err(err(
                        p,
                        format!(
                            "`{}` is a local array ({}); use its elements, e.g. `{}[i]`",
                            name,
                            self.array_type_name(a),
                            name
                        ),
                    ))
                }
                Binding::Shared(v) => {
                    return Err(err(
                        p,
                        format!(
                            "`{}` is a shared array ([{}; {}]); use its elements, e.g. `{}[i]`",
                            name, v.elem, v.len, name
                        ),
                    ))
                }
                Binding::Agg(a) => {
                    let t = self.slot_ty(&self.aggs[a].slot);
                    return Err(self.not_plain(p, &t));
                }
            });
        }
        if let Some(i) = self.env.params.iter().position(|(n, _)| *n == name) {
            let ty = self.env.params[i].1;
            return Ok(self.val(InstKind::Param(i as u32), ty, sp));
        }
        match name.as_str() {
            "PI" => return Ok(self.konst(Const::f32(std::f32::consts::PI), sp)),
            "TAU" => return Ok(self.konst(Const::f32(std::f32::consts::TAU), sp)),
            _ => {}
        }
        if let Some(c) = self.consts.get(&name) {
            return Ok(self.konst(*c, sp));
        }
        if self.env.fields.iter().any(|f| f.0 == name) {
            return Err(err(
                p,
                format!(
                    "`{}` is a field; read one element with `{}[index]`",
                    name, name
                ),
            ));
        }
        Err(err(p, format!("unknown name `{}`", name)))
    }

    pub(super) fn lower_unary(&mut self, u: &syn::ExprUnary, want: Option<Type>) -> R<Val> {
        let sp = span_of(u);
        // `-2147483648` is a literal, not the negation of an out-of-range one.
        if let (
            syn::UnOp::Neg(_),
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(i),
                ..
            }),
        ) = (&u.op, &*u.expr)
        {
            if let Some((bits, signed)) = narrow_suffix(i.suffix()) {
                let v: u64 = i
                    .base10_parse()
                    .map_err(|_| err(u, "integer literal out of range"))?;
                return Ok(self.konst(narrow_literal(u, v, true, bits, signed)?, sp));
            }
            let signed_ctx = matches!(i.suffix(), "i32")
                || (i.suffix().is_empty()
                    && !matches!(
                        want.and_then(|t| t.scalar()),
                        Some(
                            Scalar::F32
                                | Scalar::U32
                                | Scalar::F64
                                | Scalar::I64
                                | Scalar::U64
                                | Scalar::F16
                        )
                    ));
            let i64_ctx = matches!(i.suffix(), "i64")
                || (i.suffix().is_empty() && want.and_then(|t| t.scalar()) == Some(Scalar::I64));
            if i64_ctx {
                let v: u64 = i
                    .base10_parse()
                    .map_err(|_| err(u, "integer literal out of range"))?;
                if v > 1 << 63 {
                    return Err(err(u, format!("`-{}` does not fit in i64", v)));
                }
                return Ok(self.konst(Const::i64((v as i64).wrapping_neg()), sp));
            }
            if signed_ctx {
                let v: u64 = i
                    .base10_parse()
                    .map_err(|_| err(u, "integer literal out of range"))?;
                if v > 1 << 31 {
                    return Err(err(u, format!("`-{}` does not fit in i32", v)));
                }
                return Ok(self.konst(Const::i32((-(v as i64)) as i32), sp));
            }
        }
        let v = self.lower_expr(&u.expr, want)?;
        match u.op {
            syn::UnOp::Neg(_) => {
                if v.ty.scalar().is_none_or(|s| !s.is_numeric()) {
                    return Err(err(
                        u,
                        format!("cannot negate `{}` of type {}", self.text(&u.expr), v.ty),
                    ));
                }
                Ok(self.val(InstKind::Unary(UnaryOp::Neg, v.id), v.ty, sp))
            }
            syn::UnOp::Not(_) => {
                if v.ty.is_float() || v.ty == Type::Void {
                    return Err(err(
                        u,
                        format!(
                            "`!` needs bool or an integer, `{}` is {}",
                            self.text(&u.expr),
                            v.ty
                        ),
                    ));
                }
                Ok(self.val(InstKind::Unary(UnaryOp::Not, v.id), v.ty, sp))
            }
            _ => Err(err(u, "dereferencing is not supported in kernel code")),
        }
    }

    /// Lowers two operands, typing a literal operand from the other one.
    pub(super) fn lower_pair(
        &mut self,
        l: &syn::Expr,
        r: &syn::Expr,
        want: Option<Type>,
    ) -> R<(Val, Val)> {
        let scalar_of = |t: Type| t.scalar().map(Type::Scalar);
        match (is_literal(l), is_literal(r)) {
            (true, false) => {
                let rv = self.lower_expr(r, None)?;
                let lv = self.lower_expr(l, scalar_of(rv.ty))?;
                Ok((lv, rv))
            }
            (false, true) => {
                let lv = self.lower_expr(l, None)?;
                let rv = self.lower_expr(r, scalar_of(lv.ty))?;
                Ok((lv, rv))
            }
            (true, true) => {
                let w = want.and_then(scalar_of);
                Ok((self.lower_expr(l, w)?, self.lower_expr(r, w)?))
            }
            (false, false) => Ok((self.lower_expr(l, None)?, self.lower_expr(r, None)?)),
        }
    }

    pub(super) fn splat(&mut self, v: Val, to: Type, sp: Span) -> Val {
        match to {
            Type::Vector(_, n) => self.val(InstKind::Construct(vec![v.id; n as usize]), to, sp),
            Type::Matrix(n) => {
                let col = self.splat(v, Type::Vector(Scalar::F32, n), sp);
                self.val(InstKind::Construct(vec![col.id; n as usize]), to, sp)
            }
            _ => v,
        }
    }

    pub(super) fn lower_binary(&mut self, b: &syn::ExprBinary, want: Option<Type>) -> R<Val> {
        use syn::BinOp as B;
        let sp = span_of(b);
        let compound = match b.op {
            B::AddAssign(_) => Some(BinaryOp::Add),
            B::SubAssign(_) => Some(BinaryOp::Sub),
            B::MulAssign(_) => Some(BinaryOp::Mul),
            B::DivAssign(_) => Some(BinaryOp::Div),
            B::RemAssign(_) => Some(BinaryOp::Rem),
            B::BitAndAssign(_) => Some(BinaryOp::BitAnd),
            B::BitOrAssign(_) => Some(BinaryOp::BitOr),
            B::BitXorAssign(_) => Some(BinaryOp::BitXor),
            B::ShlAssign(_) => Some(BinaryOp::Shl),
            B::ShrAssign(_) => Some(BinaryOp::Shr),
            _ => None,
        };
        if let Some(op) = compound {
            return self.lower_compound(b, op);
        }
        if matches!(b.op, B::And(_) | B::Or(_)) {
            return self.lower_logical(b);
        }
        let op = match b.op {
            B::Add(_) => BinaryOp::Add,
            B::Sub(_) => BinaryOp::Sub,
            B::Mul(_) => BinaryOp::Mul,
            B::Div(_) => BinaryOp::Div,
            B::Rem(_) => BinaryOp::Rem,
            B::BitAnd(_) => BinaryOp::BitAnd,
            B::BitOr(_) => BinaryOp::BitOr,
            B::BitXor(_) => BinaryOp::BitXor,
            B::Shl(_) => BinaryOp::Shl,
            B::Shr(_) => BinaryOp::Shr,
            B::Eq(_) => BinaryOp::Eq,
            B::Ne(_) => BinaryOp::Ne,
            B::Lt(_) => BinaryOp::Lt,
            B::Le(_) => BinaryOp::Le,
            B::Gt(_) => BinaryOp::Gt,
            B::Ge(_) => BinaryOp::Ge,
            _ => return Err(err(b, "unsupported operator")),
        };
        let want = if op.is_comparison() { None } else { want };
        let (l, r) = self.lower_pair(&b.left, &b.right, want)?;
        self.binary(op, l, r, &b.left, &b.right, sp)
    }

    /// Applies a binary operator with broadcasting and type checks.
    pub(super) fn binary(
        &mut self,
        op: BinaryOp,
        l: Val,
        r: Val,
        ln: &syn::Expr,
        rn: &syn::Expr,
        sp: Span,
    ) -> R<Val> {
        let mismatch = |s: &Self| {
            err(
                ln,
                format!(
                    "`{}` is {} but `{}` is {}; `{}` needs matching types (convert one with `as`)",
                    s.text(ln),
                    l.ty,
                    s.text(rn),
                    r.ty,
                    op.symbol()
                ),
            )
        };
        if l.ty == Type::Void || r.ty == Type::Void {
            return Err(mismatch(self));
        }
        // Linear algebra products.
        if op == BinaryOp::Mul {
            match (l.ty, r.ty) {
                (Type::Matrix(n), Type::Vector(Scalar::F32, m))
                | (Type::Vector(Scalar::F32, m), Type::Matrix(n))
                    if n == m =>
                {
                    return Ok(self.val(
                        InstKind::Binary(BinaryOp::MatMul, l.id, r.id),
                        Type::Vector(Scalar::F32, n),
                        sp,
                    ))
                }
                (Type::Matrix(n), Type::Matrix(m)) if n == m => {
                    return Ok(self.val(InstKind::Binary(BinaryOp::MatMul, l.id, r.id), l.ty, sp))
                }
                _ => {}
            }
        }
        if matches!(op, BinaryOp::Shl | BinaryOp::Shr) {
            if !l.ty.is_int()
                || !r.ty.is_int()
                || (r.ty.components() != 1 && r.ty.components() != l.ty.components())
            {
                return Err(err(
                    ln,
                    format!("shifts need integers, got {} and {}", l.ty, r.ty),
                ));
            }
            let mut rv = r;
            if rv.ty.scalar() != l.ty.scalar() {
                let t = rv.ty.with_scalar(l.ty.scalar().expect("integer"));
                rv = self.val(InstKind::Cast(rv.id), t, sp);
            }
            if rv.ty != l.ty {
                rv = self.splat(rv, l.ty, sp);
            }
            return Ok(self.val(InstKind::Binary(op, l.id, rv.id), l.ty, sp));
        }
        // Broadcast a scalar against a vector/matrix of the same scalar type.
        let (mut l, mut r) = (l, r);
        if l.ty != r.ty && l.ty.scalar() == r.ty.scalar() {
            if l.ty.is_scalar() {
                l = self.splat(l, r.ty, sp);
            } else if r.ty.is_scalar() {
                r = self.splat(r, l.ty, sp);
            }
        }
        if l.ty != r.ty {
            return Err(mismatch(self));
        }
        let t = l.ty;
        let s = t.scalar().expect("non-void");
        let ok = match op {
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => {
                s.is_numeric()
            }
            BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor => !s.is_float(),
            BinaryOp::Eq | BinaryOp::Ne => !matches!(t, Type::Matrix(_)),
            _ => s.is_numeric() && !matches!(t, Type::Matrix(_)),
        };
        if !ok {
            return Err(err(
                ln,
                format!("`{}` is not defined for {}", op.symbol(), t),
            ));
        }
        let rt = if op.is_comparison() {
            vec_or_scalar(Scalar::Bool, t.components())
        } else {
            t
        };
        Ok(self.val(InstKind::Binary(op, l.id, r.id), rt, sp))
    }

    /// `a && b` / `a || b` evaluate `b` only when needed (it may read fields
    /// out of range otherwise). A `b` that can neither fault nor change
    /// anything (arithmetic on locals, parameters and constants) is simply
    /// evaluated: one `&&` / `||` instruction instead of a branch, which
    /// lanes and GPU invocations take without diverging.
    pub(super) fn lower_logical(&mut self, b: &syn::ExprBinary) -> R<Val> {
        let sp = span_of(b);
        let is_and = matches!(b.op, syn::BinOp::And(_));
        let l = self.lower_expr(&b.left, Some(Type::BOOL))?;
        let l = self.cond(l, &b.left)?;
        let mut r_id = None;
        let mut rhs = self.nested(|s| {
            let r = s.lower_expr(&b.right, Some(Type::BOOL))?;
            let r = s.cond(r, &b.right)?;
            r_id = Some(r.id);
            Ok(())
        })?;
        let r_id = r_id.expect("the right side was lowered");
        let harmless = rhs.iter().all(|h| {
            matches!(
                self.func.insts[*h].kind,
                InstKind::Const(_)
                    | InstKind::Arg(_)
                    | InstKind::Param(_)
                    | InstKind::Frame
                    | InstKind::Unary(..)
                    | InstKind::Binary(..)
                    | InstKind::Select { .. }
                    | InstKind::Cast(_)
                    | InstKind::Bitcast(_)
                    | InstKind::Construct(_)
                    | InstKind::Extract(..)
                    | InstKind::Insert { .. }
                    | InstKind::Swizzle(..)
                    | InstKind::LocalLoad(_)
            )
        });
        if harmless {
            self.blocks
                .last_mut()
                .expect("a block is always open")
                .extend(rhs);
            let op = if is_and {
                BinaryOp::LogicalAnd
            } else {
                BinaryOp::LogicalOr
            };
            return Ok(self.val(InstKind::Binary(op, l.id, r_id), Type::BOOL, sp));
        }
        let tmp = self.func.locals.append(Local {
            name: "logic".into(),
            ty: Type::BOOL,
        });
        self.emit_at(InstKind::LocalStore(tmp, l.id), Type::Void, sp);
        let store = self
            .func
            .detached(InstKind::LocalStore(tmp, r_id), Type::Void, sp);
        rhs.push(store);
        let (accept, reject) = if is_and { (rhs, vec![]) } else { (vec![], rhs) };
        self.emit_at(
            InstKind::If {
                cond: l.id,
                accept,
                reject,
            },
            Type::Void,
            sp,
        );
        Ok(self.val(InstKind::LocalLoad(tmp), Type::BOOL, sp))
    }

    /// Whether a field index is the kernel's loop indices themselves (in
    /// the entry function), so that no two iterations reach the element.
    fn own_element(&self, index: &[InstId]) -> bool {
        let arg_of = |mut h: InstId| loop {
            match &self.func.insts[h].kind {
                InstKind::Arg(k) => return Some(*k),
                InstKind::Extract(v, c) => match &self.func.insts[*v].kind {
                    InstKind::Construct(parts) => h = *parts.get(*c as usize)?,
                    _ => return None,
                },
                _ => return None,
            }
        };
        self.is_entry
            && !index.is_empty()
            && index
                .iter()
                .enumerate()
                .all(|(axis, &h)| arg_of(h) == Some(axis as u32))
    }

    pub(super) fn lower_compound(&mut self, b: &syn::ExprBinary, op: BinaryOp) -> R<Val> {
        let sp = span_of(b);
        let place = self.lower_place(&b.left)?;
        let pty = self.place_type(&place);
        let want = pty.scalar().map(Type::Scalar);
        let rv = self.lower_expr(
            &b.right,
            if is_literal(&b.right) {
                want
            } else {
                Some(pty)
            },
        )?;
        // 64-bit elements have no atomics (WGSL's are 32-bit): `+=` is a
        // plain read-modify-write, allowed only on the iteration's own
        // element, which no other iteration touches.
        if let Place::Field { ty, index, .. } = &place {
            if ty.is_wide()
                && matches!(op, BinaryOp::Add | BinaryOp::Sub)
                && !self.own_element(index)
            {
                return Err(err(
                    b,
                    format!(
                        "`{} {}= …` on a {} field would need a 64-bit atomic, which not every backend has (WGSL's atomics are 32-bit); only the iteration's own element (indexed by the loop indices themselves, e.g. `x[i]`) can be updated in place. Accumulate in a 32-bit field, or give each iteration its own element",
                        self.text(&b.left),
                        op.symbol(),
                        ty
                    ),
                ));
            }
        }
        // Parallel `+=` / `-=` on a whole field element are atomic, as in Taichi.
        if let Place::Field {
            field,
            ty,
            index,
            path,
        } = &place
        {
            if ty.is_wide() {
                // The iteration's own element (checked above): below.
            } else if path.is_empty() && matches!(op, BinaryOp::Add | BinaryOp::Sub) {
                let mut v = rv;
                if v.ty.is_scalar() && v.ty != *ty && v.ty.scalar() == ty.scalar() {
                    v = self.splat(v, *ty, sp);
                }
                let target = self.text(&b.left);
                let v = self.coerce(v, *ty, &b.right, &format!("`{}`", target))?;
                let aop = if op == BinaryOp::Add {
                    AtomicOp::Add
                } else {
                    AtomicOp::Sub
                };
                self.emit_at(
                    InstKind::FieldAtomic {
                        op: aop,
                        field: *field,
                        index: index.clone(),
                        value: v.id,
                        cmp: None,
                    },
                    *ty,
                    sp,
                );
                return Ok(self.unit());
            }
            if !path.is_empty() && matches!(op, BinaryOp::Add | BinaryOp::Sub) {
                // One component of a vector element: an atomic on the whole
                // element whose other components add exactly zero.
                if let (Type::Vector(s, n), [(Access::Const(c), _)]) = (*ty, path.as_slice()) {
                    let target = self.text(&b.left);
                    let v = self.coerce(rv, Type::Scalar(s), &b.right, &format!("`{}`", target))?;
                    let zero = self.konst(Const::zero(s), sp);
                    let parts: Vec<InstId> = (0..n as u32)
                        .map(|k| if k == *c { v.id } else { zero.id })
                        .collect();
                    let delta = self.val(InstKind::Construct(parts), *ty, sp);
                    let aop = if op == BinaryOp::Add {
                        AtomicOp::Add
                    } else {
                        AtomicOp::Sub
                    };
                    self.emit_at(
                        InstKind::FieldAtomic {
                            op: aop,
                            field: *field,
                            index: index.clone(),
                            value: delta.id,
                            cmp: None,
                        },
                        *ty,
                        sp,
                    );
                    return Ok(self.unit());
                }
                return Err(err(
                    b,
                    format!(
                        "atomic `{}=` works on whole field elements or one vector component; write `{}` += a full {} value instead",
                        op.symbol(),
                        self.text(&b.left),
                        self.field_elem_name(&place)
                    ),
                ));
            }
        }
        let cur = self.load_place(&place, sp);
        let nv = self.binary(op, cur, rv, &b.left, &b.right, sp)?;
        let target = self.text(&b.left);
        let nv = self.coerce(nv, pty, &b.right, &format!("`{}`", target))?;
        self.store_place(place, nv, sp);
        Ok(self.unit())
    }
}

/// `u8`, `i8`, `u16`, `i16` as (bits, signed): the narrow integer types,
/// which are storage and conversion targets, not compute types (see
/// docs/kernel-language.md, "Narrow integers"): their values compute as
/// u32 / i32.
pub(super) fn narrow_int(t: &syn::Type) -> Option<(u32, bool)> {
    let syn::Type::Path(p) = t else { return None };
    narrow_suffix(&p.path.get_ident()?.to_string())
}

pub(super) fn narrow_suffix(s: &str) -> Option<(u32, bool)> {
    match s {
        "u8" => Some((8, false)),
        "i8" => Some((8, true)),
        "u16" => Some((16, false)),
        "i16" => Some((16, true)),
        _ => None,
    }
}

/// The constant of a literal with a narrow suffix (`7u8`, `-3i8`): a u32
/// (unsigned) or i32 (signed) that must lie in the narrow type's range.
pub(super) fn narrow_literal<T: Spanned>(
    node: &T,
    v: u64,
    negative: bool,
    bits: u32,
    signed: bool,
) -> R<Const> {
    let name = format!("{}{}", if signed { "i" } else { "u" }, bits);
    let (lo, hi) = if signed {
        (-(1i64 << (bits - 1)), (1i64 << (bits - 1)) - 1)
    } else {
        (0, (1i64 << bits) - 1)
    };
    let x = if negative {
        -(v.min(1 << 40) as i64)
    } else {
        v.min(1 << 40) as i64
    };
    if x < lo || x > hi {
        return Err(err(
            node,
            format!(
                "`{}{}{}` does not fit in {} ({} to {})",
                if negative { "-" } else { "" },
                v,
                name,
                name,
                lo,
                hi
            ),
        ));
    }
    Ok(if signed {
        Const::i32(x as i32)
    } else {
        Const::u32(x as u32)
    })
}

impl FnLowerer<'_> {
    /// `x as u8` / `i8` / `u16` / `i16`, Rust's conversions with the result
    /// computed as u32 (unsigned) or i32 (signed): from an integer keep the
    /// low bits (`300 as u8` is 44, `200u32 as i8` is -56), from a float
    /// round toward zero and saturate, NaN is 0, from bool 0 or 1.
    fn lower_narrow_cast(&mut self, c: &syn::ExprCast, bits: u32, signed: bool) -> R<Val> {
        let sp = span_of(c);
        let name = format!("{}{}", if signed { "i" } else { "u" }, bits);
        let v = self.lower_expr(&c.expr, None)?;
        let Type::Scalar(s) = v.ty else {
            return Err(err(
                c,
                format!(
                    "`as {}` converts a scalar, not {} (narrow integers have no vectors)",
                    name, v.ty
                ),
            ));
        };
        let wide = if signed { Type::I32 } else { Type::U32 };
        let x = if v.ty == wide {
            v
        } else {
            self.val(InstKind::Cast(v.id), wide, sp)
        };
        let k = |s: &mut Self, n: i64| {
            s.konst(
                if signed {
                    Const::i32(n as i32)
                } else {
                    Const::u32(n as u32)
                },
                sp,
            )
        };
        Ok(match s {
            Scalar::Bool => x,
            // The wide conversion already saturated (NaN is 0); clamp to
            // the narrow range.
            Scalar::F32 | Scalar::F16 | Scalar::F64 => {
                let (lo, hi) = if signed {
                    (-(1i64 << (bits - 1)), (1i64 << (bits - 1)) - 1)
                } else {
                    (0, (1i64 << bits) - 1)
                };
                let hi_c = k(self, hi);
                let above = self.val(
                    InstKind::Binary(BinaryOp::Gt, x.id, hi_c.id),
                    Type::BOOL,
                    sp,
                );
                let x = self.val(
                    InstKind::Select {
                        cond: above.id,
                        accept: hi_c.id,
                        reject: x.id,
                    },
                    wide,
                    sp,
                );
                if !signed {
                    return Ok(x);
                }
                let lo_c = k(self, lo);
                let below = self.val(
                    InstKind::Binary(BinaryOp::Lt, x.id, lo_c.id),
                    Type::BOOL,
                    sp,
                );
                self.val(
                    InstKind::Select {
                        cond: below.id,
                        accept: lo_c.id,
                        reject: x.id,
                    },
                    wide,
                    sp,
                )
            }
            // Integers keep the low bits: a mask, or for signed targets a
            // shift up and an arithmetic shift down (sign extension).
            // (64-bit integers were cut to their low word above.)
            Scalar::I32 | Scalar::U32 | Scalar::I64 | Scalar::U64 => {
                if signed {
                    let sh = k(self, 32 - bits as i64);
                    let up = self.val(InstKind::Binary(BinaryOp::Shl, x.id, sh.id), wide, sp);
                    self.val(InstKind::Binary(BinaryOp::Shr, up.id, sh.id), wide, sp)
                } else {
                    let m = k(self, (1i64 << bits) - 1);
                    self.val(InstKind::Binary(BinaryOp::BitAnd, x.id, m.id), wide, sp)
                }
            }
        })
    }
}

/// An f16 literal: the nearest binary16 value; a finite literal beyond
/// f16's range (it would round to infinity) is an error.
fn f16_literal<T: Spanned>(node: &T, v: f32) -> R<Const> {
    let c = Const::f16(v);
    if v.is_finite() && f32::from_bits(c.lo()).is_infinite() {
        return Err(err(
            node,
            format!("`{}` does not fit in f16 (the largest f16 is 65504)", v),
        ));
    }
    Ok(c)
}
