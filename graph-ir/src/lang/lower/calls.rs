//! Calls: helper functions, methods, built-ins, type constructors and
//! atomics.

use super::*;

impl<'a> FnLowerer<'a> {
    pub(super) fn lower_call(&mut self, c: &syn::ExprCall, want: Option<Type>) -> R<Val> {
        let sp = span_of(c);
        let syn::Expr::Path(fp) = &*c.func else {
            return Err(err(&c.func, "only named functions can be called"));
        };
        let seg = fp.path.segments.last().ok_or_else(|| err(c, "bad call"))?;
        let name = seg.ident.to_string();
        let args: Vec<&syn::Expr> = c.args.iter().collect();
        // Constructors: vec2(...), ivec3(...), mat2(...), vec2::<f32>(...).
        let mut ctor_name = name.clone();
        if let syn::PathArguments::AngleBracketed(a) = &seg.arguments {
            if name != "bitcast" {
                if let Some(syn::GenericArgument::Type(t)) = a.args.first() {
                    ctor_name = format!("{}<{}>", name, self.text(t));
                }
            }
        }
        if fp.path.segments.len() == 1 {
            if let Some(t) = Type::parse(&ctor_name).filter(|t| !t.is_scalar()) {
                return self.lower_constructor(t, &args, c);
            }
        }
        if fp.path.segments.len() != 1 {
            return Err(err(
                &c.func,
                format!("unknown function `{}`", self.text(&c.func)),
            ));
        }
        let argc = |n: usize| -> R<()> {
            if args.len() != n {
                return Err(err(
                    c,
                    format!("`{}` takes {} argument(s), got {}", name, n, args.len()),
                ));
            }
            Ok(())
        };
        match name.as_str() {
            "barrier" | "thread_index" | "block_index" | "shared" => {
                return self.lower_workgroup_call(c, &name);
            }
            "random" => {
                argc(0)?;
                return Ok(self.val(InstKind::Random, Type::F32, sp));
            }
            "frame" => {
                argc(0)?;
                return Ok(self.val(InstKind::Frame, Type::I32, sp));
            }
            "select" => {
                argc(3)?;
                let cnd = self.lower_expr(args[0], Some(Type::BOOL))?;
                let (a, b) = self.lower_pair(args[1], args[2], want)?;
                if a.ty != b.ty {
                    return Err(err(
                        c,
                        format!("`select` arms differ: {} and {}", a.ty, b.ty),
                    ));
                }
                let ok = cnd.ty == Type::BOOL
                    || (cnd.ty.scalar() == Some(Scalar::Bool)
                        && cnd.ty.components() == a.ty.components()
                        && a.ty.is_vector());
                if !ok {
                    return Err(err(args[0], format!("`select` condition is {} but must be bool (or a bool vector of the arms' width)", cnd.ty)));
                }
                return Ok(self.val(
                    InstKind::Select {
                        cond: cnd.id,
                        accept: a.id,
                        reject: b.id,
                    },
                    a.ty,
                    sp,
                ));
            }
            "bitcast" => {
                argc(1)?;
                let to = match &seg.arguments {
                    syn::PathArguments::AngleBracketed(a) => match a.args.first() {
                        Some(syn::GenericArgument::Type(t)) => parse_type(t)?,
                        _ => return Err(err(c, "write `bitcast::<T>(x)`")),
                    },
                    _ => return Err(err(c, "write `bitcast::<T>(x)` with the target type")),
                };
                let v = self.lower_expr(args[0], None)?;
                if v.ty.scalar() == Some(Scalar::F16) || to.scalar() == Some(Scalar::F16) {
                    return Err(err(
                        c,
                        "bitcast does not take f16 (an f16 is 16 bits, not a 32-bit word); convert with `as f32` first",
                    ));
                }
                // Component for component, or a 64-bit scalar to / from
                // its two words (`uvec2`, low first).
                let pair = |x: Type, y: Type| {
                    x.is_wide() && x.is_scalar() && matches!(y, Type::Vector(s, 2) if !s.is_wide())
                };
                let same = v.ty.components() == to.components() && v.ty.words() == to.words();
                if !(same || pair(v.ty, to) || pair(to, v.ty))
                    || to.scalar() == Some(Scalar::Bool)
                    || v.ty.scalar() == Some(Scalar::Bool)
                    || matches!(to, Type::Matrix(_))
                {
                    return Err(err(c, format!("cannot reinterpret {} as {}", v.ty, to)));
                }
                return Ok(self.val(InstKind::Bitcast(v.id), to, sp));
            }
            _ => {}
        }
        if let Some(op) = name.strip_prefix("atomic_") {
            return self.lower_atomic(op, &args, c);
        }
        if matches!(name.as_str(), "is_active" | "activate" | "deactivate") {
            argc(1)?;
            return self.lower_activity(&name, args[0], sp);
        }
        // `length(v)` of a vector stays the built-in; `length(x, l)` is a list's.
        let list_op = match name.as_str() {
            "append" => true,
            "length" => args.len() == 2,
            _ => false,
        };
        if list_op && !self.sigs.contains_key(&name) {
            argc(if name == "append" { 3 } else { 2 })?;
            return self.lower_list_op(&name, &args, sp);
        }
        if let Some(b) = Builtin::from_name(&name) {
            let vals = self.lower_builtin_args(b, &args, want, c)?;
            return self.builtin(b, vals, c);
        }
        let sigs = self.sigs;
        if let Some(sig) = sigs.get(&name) {
            if args.len() != sig.params.len() {
                return Err(err(
                    c,
                    format!(
                        "`{}` takes {} argument(s), got {}",
                        name,
                        sig.params.len(),
                        args.len()
                    ),
                ));
            }
            let (Some(id), structs::Ty::Plain(ret)) = (sig.id, &sig.ret) else {
                // Returns an aggregate: only `let`, arguments, fields and `.0` take it.
                return Err(self.not_plain(c, &sig.ret));
            };
            let mut ids = Vec::new();
            for (k, a) in args.iter().enumerate() {
                let what = format!("argument {} of `{}`", k + 1, name);
                self.lower_arg(a, &sig.params[k], &what)?.leaves(&mut ids);
            }
            let call = self.emit_at(InstKind::Call(id, ids), *ret, sp);
            return Ok(Val { id: call, ty: *ret });
        }
        Err(err(&c.func, format!("unknown function `{}`", name)))
    }

    pub(super) fn lower_method(&mut self, m: &syn::ExprMethodCall, want: Option<Type>) -> R<Val> {
        let name = m.method.to_string();
        if let Some(t) = self.static_ty(&m.receiver).filter(|t| {
            !matches!(t, structs::Ty::Plain(_)) && self.array_named(&m.receiver).is_none()
        }) {
            if let (structs::Ty::Array(_, n), true) = (&t, name == "len" && m.args.is_empty()) {
                return Ok(self.konst(Const::i32(*n as i32), span_of(m)));
            }
            return Err(self.not_plain(&m.receiver, &t));
        }
        if let Some(a) = self.array_named(&m.receiver) {
            if name == "len" && m.args.is_empty() {
                let n = self.arrays[a].elems.len() as i32;
                return Ok(self.konst(Const::i32(n), span_of(m)));
            }
            return Err(err(
                &m.method,
                format!("a local array has one method, `len()`; not `{}`", name),
            ));
        }
        let Some(b) = Builtin::from_name(&name) else {
            return Err(err(
                &m.method,
                format!(
                    "unknown method `{}`; methods are the math built-ins, e.g. `x.sqrt()`",
                    name
                ),
            ));
        };
        let mut args: Vec<&syn::Expr> = vec![&m.receiver];
        args.extend(m.args.iter());
        let vals = self.lower_builtin_args(b, &args, want, m)?;
        self.builtin(b, vals, m)
    }

    pub(super) fn lower_builtin_args<T: Spanned>(
        &mut self,
        b: Builtin,
        args: &[&syn::Expr],
        want: Option<Type>,
        node: &T,
    ) -> R<Vec<Val>> {
        if args.len() != b.arity() {
            return Err(err(
                node,
                format!(
                    "`{}` takes {} argument(s), got {}",
                    b.name(),
                    b.arity(),
                    args.len()
                ),
            ));
        }
        let sp = span_of(node);
        let mut vals: Vec<Option<Val>> = vec![None; args.len()];
        for (k, a) in args.iter().enumerate() {
            if !is_literal(a) {
                vals[k] = Some(self.lower_expr(a, None)?);
            }
        }
        let anchor = vals
            .iter()
            .flatten()
            .map(|v| v.ty)
            .find(|t| t.is_vector())
            .or_else(|| vals.iter().flatten().map(|v| v.ty).next())
            .or(want);
        let lit_ty = match (b.shape(), anchor) {
            // Float built-ins take f32 literals, or f64 ones beside f64 arguments.
            (crate::ir::builtins::Shape::FloatWise(_), Some(t)) if t.is_wide() => {
                Some(Type::Scalar(Scalar::F64))
            }
            (crate::ir::builtins::Shape::FloatWise(_), Some(t))
                if t.scalar() == Some(Scalar::F16) =>
            {
                Some(Type::Scalar(Scalar::F16))
            }
            (crate::ir::builtins::Shape::FloatWise(_), _) => Some(Type::F32),
            (_, Some(t)) => t.scalar().map(Type::Scalar),
            _ => None,
        };
        for (k, a) in args.iter().enumerate() {
            if vals[k].is_none() {
                vals[k] = Some(self.lower_expr(a, lit_ty)?);
            }
        }
        let mut out: Vec<Val> = vals.into_iter().map(|v| v.expect("lowered")).collect();
        if matches!(
            b.shape(),
            crate::ir::builtins::Shape::FloatWise(_) | crate::ir::builtins::Shape::NumericWise(_)
        ) {
            if let Some(vt) = out.iter().map(|v| v.ty).find(|t| t.is_vector()) {
                for v in out.iter_mut() {
                    if v.ty.is_scalar() && v.ty.scalar() == vt.scalar() {
                        *v = self.splat(*v, vt, sp);
                    }
                }
            }
        }
        Ok(out)
    }

    pub(super) fn builtin<T: Spanned>(&mut self, b: Builtin, vals: Vec<Val>, node: &T) -> R<Val> {
        let tys: Vec<Type> = vals.iter().map(|v| v.ty).collect();
        let rt = b.result_type(&tys).map_err(|m| {
            let hint = if tys.iter().any(|t| t.is_int())
                && matches!(b.shape(), crate::ir::builtins::Shape::FloatWise(_))
            {
                " (convert integers with `as f32`)"
            } else {
                ""
            };
            err(node, format!("{}{}", m, hint))
        })?;
        Ok(self.val(
            InstKind::Builtin(b, vals.iter().map(|v| v.id).collect()),
            rt,
            span_of(node),
        ))
    }

    pub(super) fn lower_constructor(
        &mut self,
        t: Type,
        args: &[&syn::Expr],
        node: &syn::ExprCall,
    ) -> R<Val> {
        let sp = span_of(node);
        let s = t.scalar().expect("composite");
        let mut vals = Vec::new();
        for a in args {
            let v = self.lower_expr(a, Some(Type::Scalar(s)))?;
            vals.push(v);
        }
        if let Type::Matrix(n) = t {
            // matN(s): s on the diagonal; matN(columns...); matN(n*n scalars, column-major).
            if vals.len() == 1 && vals[0].ty == Type::F32 {
                let zero = self.konst(Const::f32(0.0), sp);
                let cols: Vec<InstId> = (0..n)
                    .map(|c| {
                        let comps: Vec<InstId> = (0..n)
                            .map(|r| if r == c { vals[0].id } else { zero.id })
                            .collect();
                        self.emit_at(InstKind::Construct(comps), Type::Vector(Scalar::F32, n), sp)
                    })
                    .collect();
                return Ok(self.val(InstKind::Construct(cols), t, sp));
            }
            let col_t = Type::Vector(Scalar::F32, n);
            if vals.len() == n as usize && vals.iter().all(|v| v.ty == col_t) {
                return Ok(self.val(
                    InstKind::Construct(vals.iter().map(|v| v.id).collect()),
                    t,
                    sp,
                ));
            }
            if vals.len() == (n * n) as usize && vals.iter().all(|v| v.ty == Type::F32) {
                let cols: Vec<InstId> = vals
                    .chunks(n as usize)
                    .map(|c| {
                        self.emit_at(
                            InstKind::Construct(c.iter().map(|v| v.id).collect()),
                            col_t,
                            sp,
                        )
                    })
                    .collect();
                return Ok(self.val(InstKind::Construct(cols), t, sp));
            }
            return Err(err(
                node,
                format!(
                    "{} takes one f32 (diagonal), {} column vectors or {} f32s",
                    t,
                    n,
                    n * n
                ),
            ));
        }
        if vals.len() == 1 && vals[0].ty == Type::Scalar(s) {
            return Ok(self.splat(vals[0], t, sp));
        }
        let mut total = 0;
        for (k, v) in vals.iter().enumerate() {
            if v.ty.scalar() != Some(s) || matches!(v.ty, Type::Matrix(_)) {
                return Err(err(
                    args[k],
                    format!(
                        "`{}` is {} but {} is built from {} values",
                        self.text(args[k]),
                        v.ty,
                        t,
                        s.name()
                    ),
                ));
            }
            total += v.ty.components();
        }
        if total != t.components() {
            return Err(err(
                node,
                format!("{} needs {} components, got {}", t, t.components(), total),
            ));
        }
        Ok(self.val(
            InstKind::Construct(vals.iter().map(|v| v.id).collect()),
            t,
            sp,
        ))
    }

    /// `is_active(x[i])`, `activate(x[i])`, `deactivate(x[i])` on a whole
    /// field element (meaningful on sparse layouts; on dense ones every cell
    /// is always active and the last two do nothing).
    fn lower_activity(&mut self, name: &str, arg: &syn::Expr, sp: Span) -> R<Val> {
        let Place::Field {
            field, index, path, ..
        } = self.lower_place(arg)?
        else {
            return Err(err(
                arg,
                format!("`{}` takes a field element, e.g. `{}(x[i])`", name, name),
            ));
        };
        if !path.is_empty() {
            return Err(err(
                arg,
                format!(
                    "`{}` works on whole field elements, not on components",
                    name
                ),
            ));
        }
        Ok(match name {
            "is_active" => self.val(
                InstKind::FieldIsActive {
                    field,
                    index,
                    level: None,
                },
                Type::BOOL,
                sp,
            ),
            "activate" => self.val(InstKind::FieldActivate { field, index }, Type::Void, sp),
            _ => self.val(InstKind::FieldDeactivate { field, index }, Type::Void, sp),
        })
    }

    /// `append(x, list, value)` and `length(x, list)` on a field wired to
    /// port `x` (the graph builder checks that its layout node is dynamic).
    fn lower_list_op(&mut self, name: &str, args: &[&syn::Expr], sp: Span) -> R<Val> {
        let Some((field, ty, _)) = self.field_port(args[0]) else {
            return Err(err(
                args[0],
                format!(
                    "the first argument of `{}` is a field port, e.g. `{}(x, i{})`",
                    name,
                    name,
                    if name == "append" { ", v" } else { "" }
                ),
            ));
        };
        let list = self.lower_expr(args[1], Some(Type::I32))?;
        let list = self.coerce(list, Type::I32, args[1], "the list number")?;
        if name == "length" {
            return Ok(self.val(
                InstKind::FieldLength {
                    field,
                    list: list.id,
                },
                Type::I32,
                sp,
            ));
        }
        let value = self.lower_expr(args[2], Some(ty))?;
        let value = self.coerce(value, ty, args[2], "the field element")?;
        Ok(self.val(
            InstKind::FieldAppend {
                field,
                list: list.id,
                value: value.id,
            },
            Type::I32,
            sp,
        ))
    }

    pub(super) fn lower_atomic(
        &mut self,
        opname: &str,
        args: &[&syn::Expr],
        c: &syn::ExprCall,
    ) -> R<Val> {
        let sp = span_of(c);
        let op = match opname {
            "add" => AtomicOp::Add,
            "sub" => AtomicOp::Sub,
            "min" => AtomicOp::Min,
            "max" => AtomicOp::Max,
            "and" => AtomicOp::And,
            "or" => AtomicOp::Or,
            "xor" => AtomicOp::Xor,
            "exchange" => AtomicOp::Exchange,
            "compare_exchange" => AtomicOp::CompareExchange,
            _ => return Err(err(&c.func, format!("unknown atomic `atomic_{}`", opname))),
        };
        let n = if op == AtomicOp::CompareExchange {
            3
        } else {
            2
        };
        if args.len() != n {
            return Err(err(
                c,
                format!(
                    "`atomic_{}` takes {} arguments, got {}",
                    opname,
                    n,
                    args.len()
                ),
            ));
        }
        let place = self.lower_place(args[0])?;
        let Place::Field {
            field,
            ty,
            index,
            path,
        } = place
        else {
            return Err(err(
                args[0],
                "the first argument of an atomic must be a field element, e.g. `x[i]`",
            ));
        };
        if !path.is_empty() {
            return Err(err(
                args[0],
                "atomics work on whole field elements, not on components",
            ));
        }
        let scalar = ty.scalar().expect("field type");
        let allowed = match op {
            AtomicOp::Add | AtomicOp::Sub | AtomicOp::Min | AtomicOp::Max => true,
            AtomicOp::And | AtomicOp::Or | AtomicOp::Xor => scalar.is_integer() && ty.is_scalar(),
            AtomicOp::Exchange | AtomicOp::CompareExchange => ty.is_scalar(),
        };
        if !allowed {
            return Err(err(
                c,
                format!("`atomic_{}` is not available for {} fields", opname, ty),
            ));
        }
        if ty.is_wide() {
            return Err(err(
                c,
                format!(
                    "`atomic_{}` is not available for {} fields: atomics are 32-bit on every backend (WGSL has no 64-bit atomics)",
                    opname, ty
                ),
            ));
        }
        let mut vals = Vec::new();
        for a in &args[1..] {
            let v = self.lower_expr(a, Some(ty))?;
            let v = if v.ty.is_scalar() && !ty.is_scalar() && v.ty.scalar() == Some(scalar) {
                self.splat(v, ty, sp)
            } else {
                v
            };
            let v = self.coerce(
                v,
                ty,
                *a,
                &format!("`atomic_{}` on `{}`", opname, self.text(args[0])),
            )?;
            vals.push(v.id);
        }
        let (value, cmp) = if op == AtomicOp::CompareExchange {
            (vals[1], Some(vals[0]))
        } else {
            (vals[0], None)
        };
        Ok(self.val(
            InstKind::FieldAtomic {
                op,
                field,
                index,
                value,
                cmp,
            },
            ty,
            sp,
        ))
    }
}
