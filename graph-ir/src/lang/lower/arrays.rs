//! Local arrays: `let mut w = [0.0; 27];`, `let k: [i32; 3] = [1, 2, 3];`,
//! `w[i]` read and written with constant or run-time indices, `w.len()`.
//!
//! An array is scalarised here, so no backend has an array type: each
//! element is an IR local of its own. A constant index names that local
//! (and is checked now: an error at the index). A run-time index is checked
//! while running (`IndexCheck`, which `legalize` turns into the one fault
//! path: node, line and column, "index 5 is out of range for a local array
//! of 3 elements"), then reads through a chain of `select`s over the
//! elements and writes through a `select` into every element. Loops over an
//! array with constant bounds are unrolled later, and constant folding then
//! turns those chains back into direct accesses. Everything after this file
//! sees plain locals, loads, stores and selects, so autodiff, every pass
//! and every backend handle arrays with no code of their own.

use super::*;

/// One array variable: its elements' locals and their type.
pub(super) struct ArrayVar {
    pub elems: Vec<LocalId>,
    pub elem: Type,
    pub mutable: bool,
}

/// The index of an array element being assigned.
#[derive(Clone, Copy)]
pub(super) enum ArrayIndex {
    Const(u32),
    Dyn(InstId),
}

/// The most elements one array may have: a run-time index costs a
/// `select` per element, so a larger array wants a field instead.
pub const MAX_ARRAY_LEN: u32 = 1024;

/// `[T; N]` → (T, N); `None` for any other type.
pub(super) fn parse_array_type(
    t: &syn::Type,
    consts: &HashMap<String, Const>,
) -> R<Option<(Type, u32)>> {
    let syn::Type::Array(a) = t else {
        return Ok(None);
    };
    if matches!(&*a.elem, syn::Type::Array(_)) {
        return Err(err(
            &a.elem,
            "arrays of arrays are not supported; use one array of n * m elements",
        ));
    }
    let elem = parse_type(&a.elem)?;
    let len = array_len(&a.len, consts)?;
    Ok(Some((elem, len)))
}

/// A length: an integer literal or a `const` item, 1..=MAX_ARRAY_LEN.
fn array_len(e: &syn::Expr, consts: &HashMap<String, Const>) -> R<u32> {
    {
        let n: Option<i64> = match strip_paren(e) {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(i),
                ..
            }) => i.base10_parse::<i64>().ok(),
            syn::Expr::Path(p) => p
                .path
                .get_ident()
                .and_then(|id| consts.get(&id.to_string()))
                .and_then(|c| match c.scalar {
                    Scalar::I32 => Some(c.bits as i32 as i64),
                    Scalar::U32 => Some(c.bits as i64),
                    _ => None,
                }),
            _ => None,
        };
        match n {
            Some(n) if n >= 1 && n <= MAX_ARRAY_LEN as i64 => Ok(n as u32),
            Some(n) => Err(err(
                e,
                format!("an array has 1 to {} elements, not {}", MAX_ARRAY_LEN, n),
            )),
            None => Err(err(
                e,
                "an array's length is an integer literal or a `const` item",
            )),
        }
    }
}

impl<'a> FnLowerer<'a> {
    pub(super) fn array_type(&self, t: &syn::Type) -> R<Option<(Type, u32)>> {
        parse_array_type(t, self.consts)
    }

    fn array_len(&self, e: &syn::Expr) -> R<u32> {
        array_len(e, self.consts)
    }

    /// A new immutable array holding `values`, bound to no name (an array
    /// value being indexed, e.g. `weights(x)[i]`).
    pub(super) fn temp_array(&mut self, values: &[Val], sp: Span) -> usize {
        let elem = values[0].ty;
        let mut elems = Vec::with_capacity(values.len());
        for (k, v) in values.iter().enumerate() {
            let l = self.func.locals.append(Local {
                name: format!("tmp[{}]", k),
                ty: elem,
            });
            self.emit_at(InstKind::LocalStore(l, v.id), Type::Void, sp);
            elems.push(l);
        }
        self.arrays.push(ArrayVar {
            elems,
            elem,
            mutable: false,
        });
        self.arrays.len() - 1
    }

    /// Binds `name` to a new array whose elements start as `values`.
    pub(super) fn new_array(&mut self, name: String, mutable: bool, values: &[Val], sp: Span) {
        let elem = values[0].ty;
        let mut elems = Vec::with_capacity(values.len());
        for (k, v) in values.iter().enumerate() {
            let l = self.func.locals.append(Local {
                name: format!("{}[{}]", name, k),
                ty: elem,
            });
            self.emit_at(InstKind::LocalStore(l, v.id), Type::Void, sp);
            elems.push(l);
        }
        self.arrays.push(ArrayVar {
            elems,
            elem,
            mutable,
        });
        self.bind(name, Binding::Array(self.arrays.len() - 1));
    }

    /// The elements of the array argument `a` of a call (by value), checked
    /// against the parameter's `[T; N]`.
    pub(super) fn array_arg(
        &mut self,
        a: &syn::Expr,
        (t, n): (Type, u32),
        what: &str,
    ) -> R<Vec<InstId>> {
        let sp = span_of(a);
        let Some(arr) = self.array_named(a) else {
            if let Some(structs::Ty::Array(..)) = self.static_ty(a) {
                // An array value: a call returning one.
                let v = self.lower_typed(a, &structs::Ty::Array(t, n), what)?;
                let mut ids = Vec::new();
                v.leaves(&mut ids);
                return Ok(ids);
            }
            return Err(err(
                a,
                format!(
                    "{} is [{}; {}]: pass a local array of that type",
                    what, t, n
                ),
            ));
        };
        if self.arrays[arr].elem != t || self.arrays[arr].elems.len() != n as usize {
            return Err(err(
                a,
                format!(
                    "{} is [{}; {}] but `{}` is {}",
                    what,
                    t,
                    n,
                    self.text(a),
                    self.array_type_name(arr)
                ),
            ));
        }
        let elems = self.arrays[arr].elems.clone();
        Ok(elems
            .iter()
            .map(|&l| self.emit_at(InstKind::LocalLoad(l), t, sp))
            .collect())
    }

    /// Whether `let` binds an array: an array type, `[...]`, `[x; N]`,
    /// another array variable or array field of a struct, or a call
    /// returning an array.
    pub(super) fn is_array_let(&self, declared: Option<&syn::Type>, init: &syn::Expr) -> bool {
        matches!(declared, Some(syn::Type::Array(_)))
            || matches!(
                strip_paren(init),
                syn::Expr::Array(_) | syn::Expr::Repeat(_)
            )
            || matches!(self.static_ty(init), Some(structs::Ty::Array(..)))
    }

    /// The array variable `e` names: a name bound to one, or an array
    /// field of a struct variable (`p.w`).
    pub(super) fn array_named(&self, e: &syn::Expr) -> Option<usize> {
        match strip_paren(e) {
            syn::Expr::Path(p) => match self.lookup(&p.path.get_ident()?.to_string()) {
                Some(Binding::Array(a)) => Some(a),
                _ => None,
            },
            f @ syn::Expr::Field(_) => match self.agg_place(f) {
                Ok(Some((aggregates::Slot::Array(a), ..))) => Some(a),
                _ => None,
            },
            _ => None,
        }
    }

    /// `let [mut] NAME[: [T; N]] = INIT;` for an array.
    pub(super) fn lower_array_let(
        &mut self,
        pat: &syn::Pat,
        declared: Option<&syn::Type>,
        init: &syn::Expr,
    ) -> R<()> {
        let sp = span_of(init);
        let (name, mutable) = match pat {
            syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                (pi.ident.to_string(), pi.mutability.is_some())
            }
            _ => return Err(err(pat, "an array is bound to a plain name")),
        };
        let want = match declared {
            Some(t) => match self.array_type(t)? {
                Some(tn) => Some(tn),
                None => {
                    return Err(err(
                        init,
                        format!(
                            "`{}` is declared {} but is given an array",
                            name,
                            parse_type(t).map(|t| t.to_string()).unwrap_or_default()
                        ),
                    ))
                }
            },
            None => None,
        };
        let values = self.array_values(&name, want, init)?;
        self.new_array(name, mutable, &values, sp);
        Ok(())
    }

    /// The element values of an array expression (`[...]`, `[x; N]` or an
    /// array variable) for `name`, checked against `want` (`[T; N]`).
    pub(super) fn array_values(
        &mut self,
        name: &str,
        want: Option<(Type, u32)>,
        init: &syn::Expr,
    ) -> R<Vec<Val>> {
        let sp = span_of(init);
        let want_elem = want.map(|w| w.0);
        let values: Vec<Val> = match strip_paren(init) {
            syn::Expr::Array(a) => {
                if a.elems.is_empty() {
                    return Err(err(init, "an array needs at least one element"));
                }
                let mut out = Vec::new();
                let mut elem = want_elem;
                for e in &a.elems {
                    let v = self.lower_expr(e, elem)?;
                    let t = *elem.get_or_insert(v.ty);
                    out.push(self.coerce(v, t, e, "this array's elements")?);
                }
                out
            }
            syn::Expr::Repeat(r) => {
                let n = self.array_len(&r.len)?;
                let v = self.lower_expr(&r.expr, want_elem)?;
                vec![v; n as usize]
            }
            other => match self.array_named(other) {
                Some(src) => {
                    let (elems, ty) = (self.arrays[src].elems.clone(), self.arrays[src].elem);
                    elems
                        .iter()
                        .map(|&l| self.val(InstKind::LocalLoad(l), ty, sp))
                        .collect()
                }
                None if matches!(self.static_ty(other), Some(structs::Ty::Array(..))) => {
                    match self.lower_agg(other, None)? {
                        aggregates::Agg::Array(_, vals) => vals,
                        a => return Err(self.not_plain(other, &a.ty())),
                    }
                }
                None => {
                    return Err(err(
                        init,
                        format!(
                            "`{}` is an array but `{}` is not one",
                            name,
                            self.text(init)
                        ),
                    ))
                }
            },
        };
        let elem = values[0].ty;
        if elem == Type::Void {
            return Err(err(init, "an array's elements need a value"));
        }
        if let Some((t, n)) = want {
            if t != elem {
                return Err(err(
                    init,
                    format!("`{}` is [{}; {}] but its elements are {}", name, t, n, elem),
                ));
            }
            if n as usize != values.len() {
                return Err(err(
                    init,
                    format!(
                        "`{}` is [{}; {}] but is given {} element(s)",
                        name,
                        t,
                        n,
                        values.len()
                    ),
                ));
            }
        }
        Ok(values)
    }

    /// `w = [...]`, `w = [x; N]` or `w = other`: every element, same type and length.
    pub(super) fn lower_array_assign(
        &mut self,
        arr: usize,
        left: &syn::Expr,
        init: &syn::Expr,
    ) -> R<()> {
        let name = self.text(left);
        if !self.arrays[arr].mutable {
            return Err(err(
                left,
                format!(
                    "`{}` is not mutable; declare it with `let mut {}`",
                    name, name
                ),
            ));
        }
        let want = (self.arrays[arr].elem, self.arrays[arr].elems.len() as u32);
        // Read every value before storing any (`w = v` where v aliases w is fine either way).
        let values = self.array_values(&name, Some(want), init)?;
        let sp = span_of(init);
        for (k, v) in values.iter().enumerate() {
            let l = self.arrays[arr].elems[k];
            self.emit_at(InstKind::LocalStore(l, v.id), Type::Void, sp);
        }
        Ok(())
    }

    /// `for x in w { ... }`: a loop over the indices whose body sees each
    /// element, read when its turn comes.
    pub(super) fn lower_for_array(&mut self, arr: usize, f: &syn::ExprForLoop) -> R<()> {
        let sp = span_of(f);
        let n = self.arrays[arr].elems.len() as i32;
        let (b, e, one) = (
            self.konst(Const::i32(0), sp),
            self.konst(Const::i32(n), sp),
            self.konst(Const::i32(1), sp),
        );
        let psp = span_of(&f.pat);
        self.range_for(f, (b, e, one), false, |s, k| {
            s.array_load(arr, ArrayIndex::Dyn(k.id), psp)
        })
    }

    /// The index of `arr[index]`: checked now when constant, else while
    /// running (one `IndexCheck`, emitted here).
    pub(super) fn array_index(&mut self, arr: usize, index: &syn::Expr) -> R<ArrayIndex> {
        let len = self.arrays[arr].elems.len() as u32;
        Ok(match self.checked_index(index, len, "an array")? {
            (_, Some(c)) => ArrayIndex::Const(c),
            (i, None) => ArrayIndex::Dyn(i),
        })
    }

    /// The one index rule of local and shared arrays: an `i32` (a `u32` is
    /// converted) below `len`; a constant out of range is an error here
    /// (`what` names the array kind), a run-time index gets an
    /// `IndexCheck` (the one out-of-bounds rule, a fault on every backend).
    /// Gives the i32 index and its value when it is a constant.
    pub(super) fn checked_index(
        &mut self,
        index: &syn::Expr,
        len: u32,
        what: &str,
    ) -> R<(InstId, Option<u32>)> {
        let sp = span_of(index);
        let i = self.lower_expr(index, Some(Type::I32))?;
        let i = match i.ty {
            Type::Scalar(Scalar::I32) => i,
            Type::Scalar(Scalar::U32) => self.val(InstKind::Cast(i.id), Type::I32, sp),
            t => {
                return Err(err(
                    index,
                    format!(
                        "index `{}` is {} but must be an integer",
                        self.text(index),
                        t
                    ),
                ))
            }
        };
        if let Some(c) = self.const_int(i.id) {
            if c < 0 || c >= len as i64 {
                return Err(err(
                    index,
                    format!(
                        "index {} is out of range for {} of {} elements",
                        c, what, len
                    ),
                ));
            }
            return Ok((i.id, Some(c as u32)));
        }
        self.emit_at(InstKind::IndexCheck { index: i.id, len }, Type::Void, sp);
        Ok((i.id, None))
    }

    /// The value of element `index` of `arr`.
    pub(super) fn array_load(&mut self, arr: usize, index: ArrayIndex, sp: Span) -> Val {
        let (elems, ty) = (self.arrays[arr].elems.clone(), self.arrays[arr].elem);
        match index {
            ArrayIndex::Const(c) => self.val(InstKind::LocalLoad(elems[c as usize]), ty, sp),
            ArrayIndex::Dyn(i) => {
                let vals: Vec<Val> = elems
                    .iter()
                    .map(|&l| self.val(InstKind::LocalLoad(l), ty, sp))
                    .collect();
                let mut out = *vals.last().expect("arrays have elements");
                for (k, v) in vals.iter().enumerate().rev().skip(1) {
                    let is_k = self.is_index(i, k, sp);
                    out = self.val(
                        InstKind::Select {
                            cond: is_k,
                            accept: v.id,
                            reject: out.id,
                        },
                        ty,
                        sp,
                    );
                }
                out
            }
        }
    }

    /// Stores `v` into element `index` of `arr`.
    pub(super) fn array_store(&mut self, arr: usize, index: ArrayIndex, v: Val, sp: Span) {
        let (elems, ty) = (self.arrays[arr].elems.clone(), self.arrays[arr].elem);
        match index {
            ArrayIndex::Const(c) => {
                self.emit_at(
                    InstKind::LocalStore(elems[c as usize], v.id),
                    Type::Void,
                    sp,
                );
            }
            ArrayIndex::Dyn(i) => {
                for (k, &l) in elems.iter().enumerate() {
                    let cur = self.val(InstKind::LocalLoad(l), ty, sp);
                    let is_k = self.is_index(i, k, sp);
                    let new = self.val(
                        InstKind::Select {
                            cond: is_k,
                            accept: v.id,
                            reject: cur.id,
                        },
                        ty,
                        sp,
                    );
                    self.emit_at(InstKind::LocalStore(l, new.id), Type::Void, sp);
                }
            }
        }
    }

    fn is_index(&mut self, i: InstId, k: usize, sp: Span) -> InstId {
        let kc = self.konst(Const::i32(k as i32), sp);
        self.emit_at(InstKind::Binary(BinaryOp::Eq, i, kc.id), Type::BOOL, sp)
    }

    /// The array's type as the user wrote it, for messages.
    pub(super) fn array_type_name(&self, arr: usize) -> String {
        format!(
            "[{}; {}]",
            self.arrays[arr].elem,
            self.arrays[arr].elems.len()
        )
    }
}
