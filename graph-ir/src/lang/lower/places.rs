//! Places: field ports and their indices, vector components and matrix
//! columns, swizzles, and loading from / storing to them.

use super::*;

impl<'a> FnLowerer<'a> {
    pub(super) fn field_elem_name(&self, p: &Place) -> String {
        match p {
            Place::Field { ty, .. } => ty.to_string(),
            Place::Local { ty, .. } | Place::Array { ty, .. } | Place::Shared { ty, .. } => {
                ty.to_string()
            }
        }
    }

    pub(super) fn field_port(&self, e: &syn::Expr) -> Option<(FieldId, Type, usize)> {
        if let Some(base) = grad_base(e) {
            // `x.grad`: the gradient of the field wired to port `x`, listed in
            // the environment under the name "x.grad" when it has one.
            let syn::Expr::Path(p) = base else {
                return None;
            };
            let name = p.path.get_ident()?.to_string();
            if self.lookup(&name).is_some() {
                return None;
            }
            let key = format!("{}.grad", name);
            return self
                .env
                .fields
                .iter()
                .find(|f| f.0 == key)
                .map(|f| (f.1, f.2, f.3));
        }
        let syn::Expr::Path(p) = e else { return None };
        let name = p.path.get_ident()?.to_string();
        if self.lookup(&name).is_some() {
            return None;
        }
        self.env
            .fields
            .iter()
            .find(|f| f.0 == name)
            .map(|f| (f.1, f.2, f.3))
    }

    /// Lowers a field index expression: scalar, `(i, j)`, `[i, j]` or an ivecN.
    pub(super) fn lower_field_index(
        &mut self,
        idx: &syn::Expr,
        ndim: usize,
        fname: &str,
    ) -> R<Vec<InstId>> {
        let sp = span_of(idx);
        let parts: Vec<&syn::Expr> = match idx {
            syn::Expr::Tuple(t) => t.elems.iter().collect(),
            syn::Expr::Array(a) => a.elems.iter().collect(),
            other => vec![other],
        };
        let mut out = Vec::new();
        for p in &parts {
            let v = self.lower_expr(p, Some(Type::I32))?;
            match v.ty {
                Type::Scalar(Scalar::I32) => out.push(v.id),
                Type::Scalar(Scalar::U32) => {
                    out.push(self.emit_at(InstKind::Cast(v.id), Type::I32, sp))
                }
                Type::Vector(s, n) if s.is_integer() => {
                    for c in 0..n {
                        let x =
                            self.emit_at(InstKind::Extract(v.id, c as u32), Type::Scalar(s), sp);
                        out.push(if s == Scalar::U32 {
                            self.emit_at(InstKind::Cast(x), Type::I32, sp)
                        } else {
                            x
                        });
                    }
                }
                t => {
                    return Err(err(
                        p,
                        format!(
                            "field index `{}` is {} but indices must be integers",
                            self.text(p),
                            t
                        ),
                    ))
                }
            }
        }
        if out.len() != ndim {
            return Err(err(
                idx,
                format!(
                    "`{}` has {} axes but is indexed with {} index(es)",
                    fname,
                    ndim,
                    out.len()
                ),
            ));
        }
        Ok(out)
    }

    /// `name[...]` where `name` is neither a local, a scalar nor a wired field.
    pub(super) fn check_unwired(&self, base: &syn::Expr) -> R<()> {
        if let Some(syn::Expr::Path(p)) = grad_base(base) {
            if let Some(id) = p.path.get_ident() {
                let name = id.to_string();
                if self.lookup(&name).is_none() && self.env.fields.iter().any(|f| f.0 == name) {
                    return Err(err(
                        base,
                        format!(
                            "the field wired to port `{}` has no gradient; set `\"grad\": true` on the field node",
                            name
                        ),
                    ));
                }
            }
        }
        if let syn::Expr::Path(p) = base {
            if let Some(id) = p.path.get_ident() {
                if self.lookup(&id.to_string()).is_none()
                    && !self.env.params.iter().any(|(n, _)| id == n)
                {
                    return Err(err(
                        base,
                        format!(
                            "`{}` is not a field wired to this kernel (no wire reaches port `{}`)",
                            id, id
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    pub(super) fn lower_index(&mut self, ix: &syn::ExprIndex) -> R<Val> {
        let sp = span_of(ix);
        if let Some((field, ty, ndim)) = self.field_port(&ix.expr) {
            let name = self.text(&ix.expr);
            let index = self.lower_field_index(&ix.index, ndim, &name)?;
            return Ok(self.val(InstKind::FieldLoad { field, index }, ty, sp));
        }
        if let Some(a) = self.array_named(&ix.expr) {
            let i = self.array_index(a, &ix.index)?;
            return Ok(self.array_load(a, i, sp));
        }
        if let Some(v) = self.shared_named(&ix.expr) {
            let index = self.shared_index(v, &ix.index)?;
            let kind = InstKind::SharedLoad { array: v.id, index };
            return Ok(self.val(kind, v.elem, sp));
        }
        if let Some(structs::Ty::Array(..)) = self.static_ty(&ix.expr) {
            // An array value (`weights(x)[i]`): indexed in a temporary.
            if let aggregates::Agg::Array(_, vals) = self.lower_agg(&ix.expr, None)? {
                let a = self.temp_array(&vals, sp);
                let i = self.array_index(a, &ix.index)?;
                return Ok(self.array_load(a, i, sp));
            }
        }
        self.check_unwired(&ix.expr)?;
        let base = self.lower_expr(&ix.expr, None)?;
        let Some(len) = composite_len(base.ty) else {
            return Err(err(
                &ix.expr,
                format!(
                    "`{}` is {} and cannot be indexed",
                    self.text(&ix.expr),
                    base.ty
                ),
            ));
        };
        let et = element_type(base.ty);
        let i = self.lower_expr(&ix.index, Some(Type::I32))?;
        if let Some(c) = self.const_int(i.id) {
            if c < 0 || c as u32 >= len {
                return Err(err(
                    &ix.index,
                    format!("index {} is out of range for {}", c, base.ty),
                ));
            }
            return Ok(self.val(InstKind::Extract(base.id, c as u32), et, sp));
        }
        if !i.ty.is_int() || !i.ty.is_scalar() {
            return Err(err(
                &ix.index,
                format!(
                    "index `{}` is {} but must be an integer",
                    self.text(&ix.index),
                    i.ty
                ),
            ));
        }
        Ok(self.val(InstKind::ExtractDyn(base.id, i.id), et, sp))
    }

    pub(super) fn const_int(&self, id: InstId) -> Option<i64> {
        match &self.func.insts[id].kind {
            InstKind::Const(c) if c.scalar == Scalar::I32 => Some(c.bits as i32 as i64),
            InstKind::Const(c) if c.scalar == Scalar::U32 => Some(c.bits as i64),
            _ => None,
        }
    }

    pub(super) fn lower_member(
        &mut self,
        base: Val,
        member: &syn::Member,
        node: &syn::Expr,
    ) -> R<Val> {
        let sp = span_of(node);
        match member {
            syn::Member::Named(id) => {
                let comps = self.swizzle(base.ty, &id.to_string(), node)?;
                let s = base.ty.scalar().expect("vector");
                if comps.len() == 1 {
                    Ok(self.val(
                        InstKind::Extract(base.id, comps[0] as u32),
                        Type::Scalar(s),
                        sp,
                    ))
                } else {
                    let t = Type::Vector(s, comps.len() as u8);
                    Ok(self.val(InstKind::Swizzle(base.id, comps), t, sp))
                }
            }
            syn::Member::Unnamed(i) => Err(err(
                node,
                format!("`.{}` is not supported; use `[{}]`", i.index, i.index),
            )),
        }
    }

    pub(super) fn swizzle(&self, ty: Type, s: &str, node: &syn::Expr) -> R<Vec<u8>> {
        let Type::Vector(_, n) = ty else {
            return Err(err(
                node,
                format!("`.{}` needs a vector, but this is {}", s, ty),
            ));
        };
        let comps: Option<Vec<u8>> = s.chars().map(swizzle_index).collect();
        match comps {
            Some(c) if !c.is_empty() && c.len() <= 4 && c.iter().all(|&i| i < n) => Ok(c),
            _ => Err(err(
                node,
                format!("`.{}` is not a valid swizzle of {}", s, ty),
            )),
        }
    }

    // ---- places (assignment targets) ----

    pub(super) fn lower_place(&mut self, e: &syn::Expr) -> R<Place> {
        if let Some((slot, root, mutable)) = self.agg_place(e)? {
            return match slot {
                aggregates::Slot::Leaf(local, ty) if mutable => Ok(Place::Local {
                    local,
                    ty,
                    path: vec![],
                }),
                aggregates::Slot::Leaf(..) => Err(err(
                    e,
                    format!(
                        "`{}` is not mutable; declare it with `let mut {}`",
                        root, root
                    ),
                )),
                aggregates::Slot::Array(a) => Err(err(
                    e,
                    format!(
                        "`{}` is a local array ({}); assign its elements, e.g. `{}[i] = ...`",
                        self.text(e),
                        self.array_type_name(a),
                        self.text(e)
                    ),
                )),
                other => {
                    let t = self.slot_ty(&other);
                    Err(err(
                        e,
                        format!(
                            "`{}` is {}: assign a whole value with `=` or assign its fields",
                            self.text(e),
                            self.ty_name(&t)
                        ),
                    ))
                }
            };
        }
        match e {
            syn::Expr::Paren(p) => self.lower_place(&p.expr),
            syn::Expr::Path(p) => {
                let name = p
                    .path
                    .get_ident()
                    .map(|i| i.to_string())
                    .unwrap_or_default();
                match self.lookup(&name) {
                    Some(Binding::Local(local, ty)) => Ok(Place::Local {
                        local,
                        ty,
                        path: vec![],
                    }),
                    Some(Binding::Shared(_)) => Err(err(
                        e,
                        format!(
                            "`{}` is a shared array; assign its elements, e.g. `{}[i] = ...`",
                            name, name
                        ),
                    )),
                    Some(Binding::Array(_)) => Err(err(
                        e,
                        format!(
                            "`{}` is a local array; assign its elements, e.g. `{}[i] = ...`",
                            name, name
                        ),
                    )),
                    Some(Binding::Agg(_)) => Err(err(e, "a struct is assigned whole with `=`")),
                    Some(Binding::Value(_)) => Err(err(
                        e,
                        format!(
                            "`{}` is not mutable; declare it with `let mut {}`",
                            name, name
                        ),
                    )),
                    None if self.env.fields.iter().any(|f| f.0 == name) => Err(err(
                        e,
                        format!(
                            "`{}` is a field; assign one element with `{}[index] = ...`",
                            name, name
                        ),
                    )),
                    None if self.env.params.iter().any(|p| p.0 == name) => Err(err(
                        e,
                        format!("`{}` is a kernel parameter and cannot be assigned", name),
                    )),
                    None => Err(err(e, format!("unknown name `{}`", name))),
                }
            }
            syn::Expr::Index(ix) => {
                if let Some((field, ty, ndim)) = self.field_port(&ix.expr) {
                    let name = self.text(&ix.expr);
                    let index = self.lower_field_index(&ix.index, ndim, &name)?;
                    return Ok(Place::Field {
                        field,
                        ty,
                        index,
                        path: vec![],
                    });
                }
                if let Some(v) = self.shared_named(&ix.expr) {
                    let index = self.shared_index(v, &ix.index)?;
                    return Ok(Place::Shared {
                        array: v.id,
                        index,
                        ty: v.elem,
                        path: vec![],
                    });
                }
                if let Some(a) = self.array_named(&ix.expr) {
                    if !self.arrays[a].mutable {
                        let name = self.text(&ix.expr);
                        return Err(err(
                            &ix.expr,
                            format!(
                                "`{}` is not mutable; declare it with `let mut {}`",
                                name, name
                            ),
                        ));
                    }
                    let index = self.array_index(a, &ix.index)?;
                    return Ok(Place::Array {
                        array: a,
                        index,
                        ty: self.arrays[a].elem,
                        path: vec![],
                    });
                }
                self.check_unwired(&ix.expr)?;
                let mut place = self.lower_place(&ix.expr)?;
                let cur = self.place_type(&place);
                let Some(len) = composite_len(cur) else {
                    return Err(err(
                        &ix.expr,
                        format!("`{}` is {} and cannot be indexed", self.text(&ix.expr), cur),
                    ));
                };
                let i = self.lower_expr(&ix.index, Some(Type::I32))?;
                let acc = match self.const_int(i.id) {
                    Some(c) if c < 0 || c as u32 >= len => {
                        return Err(err(
                            &ix.index,
                            format!("index {} is out of range for {}", c, cur),
                        ))
                    }
                    Some(c) => Access::Const(c as u32),
                    None if i.ty.is_int() && i.ty.is_scalar() => Access::Dyn(i.id),
                    None => {
                        return Err(err(
                            &ix.index,
                            format!("index is {} but must be an integer", i.ty),
                        ))
                    }
                };
                self.place_path(&mut place).push((acc, element_type(cur)));
                Ok(place)
            }
            syn::Expr::Field(f) => {
                let mut place = self.lower_place(&f.base)?;
                let cur = self.place_type(&place);
                let syn::Member::Named(id) = &f.member else {
                    return Err(err(e, "tuple fields are not supported"));
                };
                let comps = self.swizzle(cur, &id.to_string(), e)?;
                let mut seen = [false; 4];
                for &c in &comps {
                    if std::mem::replace(&mut seen[c as usize], true) {
                        return Err(err(e, "a swizzle assigned to cannot repeat a component"));
                    }
                }
                let s = cur.scalar().expect("vector");
                let t = vec_or_scalar(s, comps.len());
                let acc = if comps.len() == 1 {
                    Access::Const(comps[0] as u32)
                } else {
                    Access::Swizzle(comps)
                };
                self.place_path(&mut place).push((acc, t));
                Ok(place)
            }
            _ => Err(err(e, format!("cannot assign to `{}`", self.text(e)))),
        }
    }

    pub(super) fn place_path<'p>(&self, p: &'p mut Place) -> &'p mut Vec<(Access, Type)> {
        match p {
            Place::Local { path, .. }
            | Place::Field { path, .. }
            | Place::Array { path, .. }
            | Place::Shared { path, .. } => path,
        }
    }

    pub(super) fn place_type(&self, p: &Place) -> Type {
        match p {
            Place::Local { ty, path, .. }
            | Place::Field { ty, path, .. }
            | Place::Array { ty, path, .. }
            | Place::Shared { ty, path, .. } => path.last().map(|x| x.1).unwrap_or(*ty),
        }
    }

    pub(super) fn load_root(&mut self, p: &Place, sp: Span) -> Val {
        match p {
            Place::Local { local, ty, .. } => self.val(InstKind::LocalLoad(*local), *ty, sp),
            Place::Array { array, index, .. } => self.array_load(*array, *index, sp),
            Place::Shared {
                array, index, ty, ..
            } => self.val(
                InstKind::SharedLoad {
                    array: *array,
                    index: *index,
                },
                *ty,
                sp,
            ),
            Place::Field {
                field, ty, index, ..
            } => self.val(
                InstKind::FieldLoad {
                    field: *field,
                    index: index.clone(),
                },
                *ty,
                sp,
            ),
        }
    }

    pub(super) fn access(&mut self, base: Val, acc: &Access, ty: Type, sp: Span) -> Val {
        match acc {
            Access::Const(i) => self.val(InstKind::Extract(base.id, *i), ty, sp),
            Access::Dyn(i) => self.val(InstKind::ExtractDyn(base.id, *i), ty, sp),
            Access::Swizzle(c) => self.val(InstKind::Swizzle(base.id, c.clone()), ty, sp),
        }
    }

    pub(super) fn load_place(&mut self, p: &Place, sp: Span) -> Val {
        let mut v = self.load_root(p, sp);
        let path = match p {
            Place::Local { path, .. }
            | Place::Field { path, .. }
            | Place::Array { path, .. }
            | Place::Shared { path, .. } => path.clone(),
        };
        for (acc, ty) in &path {
            v = self.access(v, acc, *ty, sp);
        }
        v
    }

    pub(super) fn store_place(&mut self, p: Place, v: Val, sp: Span) {
        let path = match &p {
            Place::Local { path, .. }
            | Place::Field { path, .. }
            | Place::Array { path, .. }
            | Place::Shared { path, .. } => path.clone(),
        };
        let new_root = if path.is_empty() {
            v
        } else {
            // Read the chain of enclosing values, then rebuild it inside-out.
            let mut chain = vec![self.load_root(&p, sp)];
            for (acc, ty) in &path[..path.len() - 1] {
                let last = *chain.last().expect("non-empty");
                let nv = self.access(last, acc, *ty, sp);
                chain.push(nv);
            }
            let mut cur = v;
            for (n, (acc, _)) in path.iter().enumerate().rev() {
                let base = chain[n];
                cur = match acc {
                    Access::Const(i) => self.val(
                        InstKind::Insert {
                            base: base.id,
                            index: *i,
                            value: cur.id,
                        },
                        base.ty,
                        sp,
                    ),
                    Access::Dyn(i) => self.val(
                        InstKind::InsertDyn {
                            base: base.id,
                            index: *i,
                            value: cur.id,
                        },
                        base.ty,
                        sp,
                    ),
                    Access::Swizzle(comps) => {
                        let s = base.ty.scalar().expect("vector");
                        let mut b = base;
                        for (k, &c) in comps.iter().enumerate() {
                            let x =
                                self.val(InstKind::Extract(cur.id, k as u32), Type::Scalar(s), sp);
                            b = self.val(
                                InstKind::Insert {
                                    base: b.id,
                                    index: c as u32,
                                    value: x.id,
                                },
                                base.ty,
                                sp,
                            );
                        }
                        b
                    }
                };
            }
            cur
        };
        match p {
            Place::Local { local, .. } => {
                self.emit_at(InstKind::LocalStore(local, new_root.id), Type::Void, sp);
            }
            Place::Array { array, index, .. } => self.array_store(array, index, new_root, sp),
            Place::Shared { array, index, .. } => {
                let kind = InstKind::SharedStore {
                    array,
                    index,
                    value: new_root.id,
                };
                self.emit_at(kind, Type::Void, sp);
            }
            Place::Field { field, index, .. } => {
                self.emit_at(
                    InstKind::FieldStore {
                        field,
                        index,
                        value: new_root.id,
                    },
                    Type::Void,
                    sp,
                );
            }
        }
    }
}

/// The base of `x.grad` (`x`), or `None` for any other expression.
fn grad_base(e: &syn::Expr) -> Option<&syn::Expr> {
    match e {
        syn::Expr::Paren(p) => grad_base(&p.expr),
        syn::Expr::Field(f) if matches!(&f.member, syn::Member::Named(m) if m == "grad") => {
            Some(&f.base)
        }
        _ => None,
    }
}
