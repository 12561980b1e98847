//! Aggregate values: structs, tuples and local arrays as whole values —
//! struct literals, field access and assignment, copies, tuple `let`,
//! `if` choosing between aggregates, helpers taking them (by value) and
//! helpers returning them.
//!
//! Everything is scalarised here, as local arrays are (`arrays.rs`): a
//! struct or tuple variable is one IR local per leaf (`Slot`), an aggregate
//! value is one IR value per leaf (`Agg`), and a helper parameter of an
//! aggregate type is one IR argument per leaf. The IR keeps single-result
//! calls: a helper that returns an aggregate is inlined at each call here
//! (its body lowered in the caller with the arguments bound to its
//! parameters; an early `return` stores the result and leaves a one-trip
//! `loop` around the body through the labelled-loop flags of `flow.rs`).
//! So every pass and backend sees plain locals, loads, stores and calls,
//! and autodiff differentiates aggregates like any local.

use super::structs::Ty;
use super::*;

/// An aggregate value, scalarised: one IR value per leaf.
#[derive(Clone, Debug)]
pub(super) enum Agg {
    Leaf(Val),
    Array(Type, Vec<Val>),
    Struct(usize, Vec<Agg>),
    Tuple(Vec<Agg>),
}

impl Agg {
    pub fn ty(&self) -> Ty {
        match self {
            Agg::Leaf(v) => Ty::Plain(v.ty),
            Agg::Array(t, vs) => Ty::Array(*t, vs.len() as u32),
            Agg::Struct(s, _) => Ty::Struct(*s),
            Agg::Tuple(xs) => Ty::Tuple(xs.iter().map(|x| x.ty()).collect()),
        }
    }

    pub fn leaves(&self, out: &mut Vec<InstId>) {
        match self {
            Agg::Leaf(v) => out.push(v.id),
            Agg::Array(_, vs) => out.extend(vs.iter().map(|v| v.id)),
            Agg::Struct(_, xs) | Agg::Tuple(xs) => xs.iter().for_each(|x| x.leaves(out)),
        }
    }
}

/// Where a struct or tuple variable lives: one local per leaf (an array
/// inside it is a local array of `FnLowerer::arrays`, so `p.w[i]`,
/// `for x in p.w` and `p.w.len()` work like on any array).
#[derive(Clone, Debug)]
pub(super) enum Slot {
    Leaf(LocalId, Type),
    Array(usize),
    Struct(usize, Vec<Slot>),
    Tuple(Vec<Slot>),
}

/// A struct or tuple variable (`Binding::Agg` indexes these).
pub(super) struct AggVar {
    pub slot: Slot,
    pub mutable: bool,
}

/// The `return` of a helper being inlined (it returns an aggregate).
#[derive(Clone)]
pub(super) struct InlineRet {
    pub name: String,
    pub ty: Ty,
    /// The result's locals, when the body returns early (a one-trip loop).
    pub result: Option<Slot>,
}

/// The label of the one-trip loop around an inlined body with early
/// `return`s; no user label can be spelled like it.
const RETURN_LABEL: &str = "#return";

impl<'a> FnLowerer<'a> {
    pub(super) fn parse_ty(&self, t: &syn::Type) -> R<Ty> {
        self.structs.parse(t, self.consts)
    }

    pub(super) fn ty_name(&self, t: &Ty) -> String {
        self.structs.name(t)
    }

    pub(super) fn slot_ty(&self, s: &Slot) -> Ty {
        match s {
            Slot::Leaf(_, t) => Ty::Plain(*t),
            Slot::Array(a) => Ty::Array(self.arrays[*a].elem, self.arrays[*a].elems.len() as u32),
            Slot::Struct(k, _) => Ty::Struct(*k),
            Slot::Tuple(xs) => Ty::Tuple(xs.iter().map(|x| self.slot_ty(x)).collect()),
        }
    }

    /// New locals for a value of type `t` (named `p.x`, `p.w[2]`, `t.0` in the IR).
    pub(super) fn new_slot(&mut self, name: &str, t: &Ty, mutable: bool) -> Slot {
        let structs = self.structs;
        match t {
            Ty::Plain(p) => {
                let l = self.func.locals.append(Local {
                    name: name.into(),
                    ty: *p,
                });
                Slot::Leaf(l, *p)
            }
            Ty::Array(e, n) => {
                let elems = (0..*n)
                    .map(|k| {
                        self.func.locals.append(Local {
                            name: format!("{}[{}]", name, k),
                            ty: *e,
                        })
                    })
                    .collect();
                self.arrays.push(arrays::ArrayVar {
                    elems,
                    elem: *e,
                    mutable,
                });
                Slot::Array(self.arrays.len() - 1)
            }
            Ty::Struct(k) => Slot::Struct(
                *k,
                structs.defs[*k]
                    .fields
                    .iter()
                    .map(|(f, ft)| self.new_slot(&format!("{}.{}", name, f), ft, mutable))
                    .collect(),
            ),
            Ty::Tuple(ts) => Slot::Tuple(
                ts.iter()
                    .enumerate()
                    .map(|(k, t)| self.new_slot(&format!("{}.{}", name, k), t, mutable))
                    .collect(),
            ),
        }
    }

    /// Stores `a` into `s`; the callers have checked that the types agree.
    pub(super) fn store_slot(&mut self, s: &Slot, a: &Agg, sp: Span) {
        match (s, a) {
            (Slot::Leaf(l, _), Agg::Leaf(v)) => {
                self.emit_at(InstKind::LocalStore(*l, v.id), Type::Void, sp);
            }
            (Slot::Array(arr), Agg::Array(_, vs)) => {
                let elems = self.arrays[*arr].elems.clone();
                for (l, v) in elems.iter().zip(vs) {
                    self.emit_at(InstKind::LocalStore(*l, v.id), Type::Void, sp);
                }
            }
            (Slot::Struct(_, ss), Agg::Struct(_, xs)) | (Slot::Tuple(ss), Agg::Tuple(xs)) => {
                for (s, x) in ss.iter().zip(xs) {
                    self.store_slot(s, x, sp);
                }
            }
            // Unreachable: every caller compares the types first.
            _ => {}
        }
    }

    pub(super) fn load_slot(&mut self, s: &Slot, sp: Span) -> Agg {
        match s {
            Slot::Leaf(l, t) => Agg::Leaf(self.val(InstKind::LocalLoad(*l), *t, sp)),
            Slot::Array(arr) => {
                let (elems, t) = (self.arrays[*arr].elems.clone(), self.arrays[*arr].elem);
                Agg::Array(
                    t,
                    elems
                        .iter()
                        .map(|&l| self.val(InstKind::LocalLoad(l), t, sp))
                        .collect(),
                )
            }
            Slot::Struct(k, ss) => {
                Agg::Struct(*k, ss.iter().map(|s| self.load_slot(s, sp)).collect())
            }
            Slot::Tuple(ss) => Agg::Tuple(ss.iter().map(|s| self.load_slot(s, sp)).collect()),
        }
    }

    /// Rebuilds a value of type `t` from its leaves (helper arguments).
    pub(super) fn agg_from_leaves(&self, t: &Ty, it: &mut impl Iterator<Item = Val>) -> Agg {
        match t {
            Ty::Plain(_) => Agg::Leaf(it.next().expect("one argument per leaf")),
            Ty::Array(e, n) => Agg::Array(
                *e,
                (0..*n)
                    .map(|_| it.next().expect("one argument per leaf"))
                    .collect(),
            ),
            Ty::Struct(k) => Agg::Struct(
                *k,
                self.structs.defs[*k]
                    .fields
                    .iter()
                    .map(|(_, ft)| self.agg_from_leaves(ft, it))
                    .collect(),
            ),
            Ty::Tuple(ts) => Agg::Tuple(ts.iter().map(|t| self.agg_from_leaves(t, it)).collect()),
        }
    }

    /// Binds `name` to the value `a` (a copy: new locals for an aggregate).
    pub(super) fn bind_value(&mut self, name: String, mutable: bool, a: Agg, sp: Span) {
        match a {
            Agg::Leaf(v) if mutable => {
                let local = self.func.locals.append(Local {
                    name: name.clone(),
                    ty: v.ty,
                });
                self.emit_at(InstKind::LocalStore(local, v.id), Type::Void, sp);
                self.bind(name, Binding::Local(local, v.ty));
            }
            Agg::Leaf(v) => self.bind(name, Binding::Value(v)),
            Agg::Array(_, vals) => self.new_array(name, mutable, &vals, sp),
            a => {
                let slot = self.new_slot(&name, &a.ty(), mutable);
                self.store_slot(&slot, &a, sp);
                self.aggs.push(AggVar { slot, mutable });
                self.bind(name, Binding::Agg(self.aggs.len() - 1));
            }
        }
    }

    /// Binds a `let` (or parameter) pattern to `a`: a name, `_`, a typed
    /// pattern, or a tuple of those (`let (x, (y, _)) = ...`).
    pub(super) fn bind_agg_pattern(&mut self, pat: &syn::Pat, a: Agg, init: &str) -> R<()> {
        match pat {
            syn::Pat::Ident(pi) => {
                if pi.by_ref.is_some() || pi.subpat.is_some() {
                    return Err(err(pat, "only plain names can be bound"));
                }
                self.bind_value(
                    pi.ident.to_string(),
                    pi.mutability.is_some(),
                    a,
                    span_of(pat),
                );
                Ok(())
            }
            syn::Pat::Wild(_) => Ok(()),
            syn::Pat::Paren(p) => self.bind_agg_pattern(&p.pat, a, init),
            syn::Pat::Type(pt) => {
                let want = self.parse_ty(&pt.ty)?;
                if want != a.ty() {
                    return Err(err(
                        pat,
                        format!(
                            "`{}` is declared {} but `{}` is {}",
                            self.text(&pt.pat),
                            self.ty_name(&want),
                            init,
                            self.ty_name(&a.ty())
                        ),
                    ));
                }
                self.bind_agg_pattern(&pt.pat, a, init)
            }
            syn::Pat::Tuple(tp) => {
                let Agg::Tuple(parts) = a else {
                    return Err(err(
                        pat,
                        format!(
                            "`{}` is {}, not a tuple; bind it to one name",
                            init,
                            self.ty_name(&a.ty())
                        ),
                    ));
                };
                if tp.elems.len() != parts.len() || tp.elems.iter().any(|p| matches!(p, syn::Pat::Rest(_))) {
                    return Err(err(
                        pat,
                        format!(
                            "tuple `let` needs as many names as values: the pattern has {} but `{}` has {} ({})",
                            tp.elems.len(),
                            init,
                            parts.len(),
                            self.ty_name(&Agg::Tuple(parts.clone()).ty())
                        ),
                    ));
                }
                for (p, x) in tp.elems.iter().zip(parts) {
                    self.bind_agg_pattern(p, x, init)?;
                }
                Ok(())
            }
            _ => Err(err(
                pat,
                "only names, `_` and tuples of them `(a, b)` can be bound; read a struct's fields with `p.x`",
            )),
        }
    }

    /// The error for an aggregate where a plain value is needed.
    pub(super) fn not_plain<T: Spanned>(&self, node: &T, t: &Ty) -> CodeError {
        let text = self.text(node);
        err(
            node,
            match t {
                Ty::Struct(k) => format!(
                    "`{}` is a struct `{}`; use its fields, e.g. `{}.{}`",
                    text,
                    self.structs.defs[*k].name,
                    text,
                    self.structs.defs[*k].fields[0].0
                ),
                Ty::Tuple(_) => format!(
                    "`{}` is a tuple {}; bind it with `let (a, b) = ...` or take one value with `.0`",
                    text,
                    self.ty_name(t)
                ),
                Ty::Array(..) => format!(
                    "`{}` is a local array ({}); use its elements, e.g. `{}[i]`",
                    text,
                    self.ty_name(t),
                    text
                ),
                Ty::Plain(p) => format!("`{}` is {}", text, p),
            },
        )
    }

    /// Field `member` of a value of type `t`: its position and type. `node`
    /// is the whole `base.member` expression.
    pub(super) fn member_of(
        &self,
        t: &Ty,
        member: &syn::Member,
        node: &syn::ExprField,
    ) -> R<(usize, Ty)> {
        let base = self.text(&node.base);
        match (t, member) {
            (Ty::Struct(k), syn::Member::Named(id)) => {
                let def = &self.structs.defs[*k];
                def.fields
                    .iter()
                    .position(|(n, _)| id == n)
                    .map(|p| (p, def.fields[p].1.clone()))
                    .ok_or_else(|| {
                        err(
                            id,
                            format!(
                                "struct `{}` has no field `{}`; its fields are {}",
                                def.name,
                                id,
                                self.structs.field_list(*k)
                            ),
                        )
                    })
            }
            (Ty::Struct(k), syn::Member::Unnamed(i)) => Err(err(
                i,
                format!(
                    "`{}` is a struct `{}`: name a field ({}), not `.{}`",
                    base,
                    self.structs.defs[*k].name,
                    self.structs.field_list(*k),
                    i.index
                ),
            )),
            (Ty::Tuple(ts), syn::Member::Unnamed(i)) => ts
                .get(i.index as usize)
                .map(|t| (i.index as usize, t.clone()))
                .ok_or_else(|| {
                    err(
                        i,
                        format!(
                            "`{}` is a tuple of {} values ({}); it has no `.{}`",
                            base,
                            ts.len(),
                            self.ty_name(t),
                            i.index
                        ),
                    )
                }),
            (Ty::Tuple(_), syn::Member::Named(id)) => Err(err(
                id,
                format!(
                    "`{}` is a tuple {}; take its values with `.0`, `.1`, ...",
                    base,
                    self.ty_name(t)
                ),
            )),
            _ => Err(err(
                node,
                format!(
                    "`{}` is {} and has no field `{}`",
                    base,
                    self.ty_name(t),
                    self.text(member)
                ),
            )),
        }
    }

    /// The aggregate type of `e` when it can be known without lowering it:
    /// a struct/tuple/array variable, a field of one (which may be plain),
    /// a struct literal or a call to a helper returning an aggregate.
    pub(super) fn static_ty(&self, e: &syn::Expr) -> Option<Ty> {
        match e {
            syn::Expr::Paren(p) => self.static_ty(&p.expr),
            syn::Expr::Group(g) => self.static_ty(&g.expr),
            syn::Expr::Path(p) => match self.lookup(&p.path.get_ident()?.to_string())? {
                Binding::Agg(a) => Some(self.slot_ty(&self.aggs[a].slot)),
                Binding::Array(a) => Some(Ty::Array(
                    self.arrays[a].elem,
                    self.arrays[a].elems.len() as u32,
                )),
                _ => None,
            },
            syn::Expr::Call(c) => {
                let syn::Expr::Path(f) = &*c.func else {
                    return None;
                };
                let sig = self.sigs.get(&f.path.get_ident()?.to_string())?;
                (!sig.ret.is_plain()).then(|| sig.ret.clone())
            }
            syn::Expr::Field(f) => {
                let bt = self.static_ty(&f.base)?;
                match (&bt, &f.member) {
                    (Ty::Struct(k), syn::Member::Named(id)) => self.structs.defs[*k]
                        .fields
                        .iter()
                        .find(|(n, _)| id == n)
                        .map(|(_, t)| t.clone()),
                    (Ty::Tuple(ts), syn::Member::Unnamed(i)) => ts.get(i.index as usize).cloned(),
                    // A bad member: say it is an aggregate so the error names it.
                    (Ty::Plain(_), _) => None,
                    _ => Some(bt),
                }
            }
            syn::Expr::Struct(s) => {
                let id = s.path.get_ident()?.to_string();
                self.structs.by_name.get(&id).map(|k| Ty::Struct(*k))
            }
            _ => None,
        }
    }

    /// Whether `e` is (syntactically or by its type) an aggregate value.
    pub(super) fn is_agg_expr(&self, e: &syn::Expr) -> bool {
        match e {
            syn::Expr::Paren(p) => self.is_agg_expr(&p.expr),
            syn::Expr::Struct(_) => true,
            syn::Expr::Tuple(t) => !t.elems.is_empty(),
            syn::Expr::Array(_) | syn::Expr::Repeat(_) => true,
            syn::Expr::If(i) => i.else_branch.is_some() && self.block_value_is_agg(&i.then_branch),
            syn::Expr::Block(b) => b.label.is_none() && self.block_value_is_agg(&b.block),
            other => self.static_ty(other).is_some_and(|t| !t.is_plain()),
        }
    }

    /// Whether a block ends in an aggregate value. A name declared in the
    /// block itself (`{ let q = P { .. }; q }`) is not in scope yet, so its
    /// `let` is looked at instead.
    fn block_value_is_agg(&self, b: &syn::Block) -> bool {
        let Some(syn::Stmt::Expr(tail, None)) = b.stmts.last() else {
            return false;
        };
        if let syn::Expr::Path(p) = strip_paren(tail) {
            if let Some(id) = p.path.get_ident() {
                for s in b.stmts.iter().rev() {
                    let syn::Stmt::Local(l) = s else { continue };
                    let (pat, ty) = match &l.pat {
                        syn::Pat::Type(pt) => (&*pt.pat, Some(&*pt.ty)),
                        p => (p, None),
                    };
                    if !matches!(pat, syn::Pat::Ident(pi) if pi.ident == *id) {
                        continue;
                    }
                    if let Some(t) = ty {
                        return self.parse_ty(t).is_ok_and(|t| !t.is_plain());
                    }
                    return l.init.as_ref().is_some_and(|i| self.is_agg_expr(&i.expr));
                }
            }
        }
        self.is_agg_expr(tail)
    }

    /// The variable part `e` names (`p`, `p.v`, `t.0`, `p.inner.w`) when its
    /// root is a struct or tuple variable: its slot, the root's name and
    /// whether it is mutable. `None` when `e` is not such a path, or goes
    /// on into a plain leaf (`p.v.x` is a swizzle of the leaf `p.v`).
    pub(super) fn agg_place(&self, e: &syn::Expr) -> R<Option<(Slot, String, bool)>> {
        match e {
            syn::Expr::Paren(p) => self.agg_place(&p.expr),
            syn::Expr::Path(p) => {
                let Some(id) = p.path.get_ident() else {
                    return Ok(None);
                };
                Ok(match self.lookup(&id.to_string()) {
                    Some(Binding::Agg(a)) => Some((
                        self.aggs[a].slot.clone(),
                        id.to_string(),
                        self.aggs[a].mutable,
                    )),
                    _ => None,
                })
            }
            syn::Expr::Field(f) => {
                let Some((slot, root, mutable)) = self.agg_place(&f.base)? else {
                    return Ok(None);
                };
                if matches!(slot, Slot::Leaf(..)) {
                    return Ok(None);
                }
                let (k, _) = self.member_of(&self.slot_ty(&slot), &f.member, f)?;
                let inner = match slot {
                    Slot::Struct(_, mut ss) | Slot::Tuple(mut ss) => ss.swap_remove(k),
                    other => other,
                };
                Ok(Some((inner, root, mutable)))
            }
            _ => Ok(None),
        }
    }

    /// `base.member` read as a plain value, where `base` is an aggregate.
    pub(super) fn lower_agg_member(&mut self, f: &syn::ExprField, e: &syn::Expr) -> R<Val> {
        let bt = self.static_ty(&f.base).expect("called for aggregate bases");
        let (k, mt) = self.member_of(&bt, &f.member, f)?;
        if !mt.is_plain() {
            return Err(self.not_plain(e, &mt));
        }
        if let Some((Slot::Leaf(l, t), ..)) = self.agg_place(e)? {
            return Ok(self.val(InstKind::LocalLoad(l), t, span_of(e)));
        }
        match self.lower_agg(&f.base, None)? {
            Agg::Struct(_, mut xs) | Agg::Tuple(mut xs) => match xs.swap_remove(k) {
                Agg::Leaf(v) => Ok(v),
                other => Err(self.not_plain(e, &other.ty())),
            },
            other => Err(self.not_plain(&f.base, &other.ty())),
        }
    }

    /// Lowers `e`, which should be a value of type `want`; `what` names the
    /// target in the message when it is not.
    pub(super) fn lower_typed(&mut self, e: &syn::Expr, want: &Ty, what: &str) -> R<Agg> {
        if let Ty::Plain(t) = want {
            if !self.is_agg_expr(e) {
                let v = self.lower_expr(e, Some(*t))?;
                return Ok(Agg::Leaf(self.coerce(v, *t, e, what)?));
            }
        }
        let a = self.lower_agg(e, Some(want))?;
        let got = a.ty();
        if got != *want {
            return Err(err(
                e,
                format!(
                    "`{}` is {} but {} expects {}",
                    self.text(e),
                    self.ty_name(&got),
                    what,
                    self.ty_name(want)
                ),
            ));
        }
        Ok(a)
    }

    /// Lowers any value: an aggregate, or a plain value as a leaf.
    pub(super) fn lower_any(&mut self, e: &syn::Expr, want: Option<&Ty>) -> R<Agg> {
        if self.is_agg_expr(e) {
            return self.lower_agg(e, want);
        }
        let plain = match want {
            Some(Ty::Plain(t)) => Some(*t),
            _ => None,
        };
        let v = self.lower_expr(e, plain)?;
        if v.ty == Type::Void {
            return Err(err(e, "this value is empty"));
        }
        Ok(Agg::Leaf(v))
    }

    /// Lowers an aggregate expression (a plain one becomes a leaf); the
    /// caller checks the type against `want`, which only guides literals.
    pub(super) fn lower_agg(&mut self, e: &syn::Expr, want: Option<&Ty>) -> R<Agg> {
        let sp = span_of(e);
        match e {
            syn::Expr::Paren(p) => self.lower_agg(&p.expr, want),
            syn::Expr::Group(g) => self.lower_agg(&g.expr, want),
            syn::Expr::Struct(s) => self.lower_struct_lit(s),
            syn::Expr::Tuple(t) if !t.elems.is_empty() => {
                let wants: Option<Vec<Ty>> = match want {
                    Some(Ty::Tuple(ts)) if ts.len() == t.elems.len() => Some(ts.clone()),
                    _ => None,
                };
                let mut parts = Vec::new();
                for (k, x) in t.elems.iter().enumerate() {
                    let w = wants.as_ref().map(|w| &w[k]);
                    parts.push(self.lower_any(x, w)?);
                }
                Ok(Agg::Tuple(parts))
            }
            syn::Expr::Array(_) | syn::Expr::Repeat(_) => {
                let w = match want {
                    Some(Ty::Array(t, n)) => Some((*t, *n)),
                    _ => None,
                };
                let vals = self.array_values(&self.text(e), w, e)?;
                Ok(Agg::Array(vals[0].ty, vals))
            }
            syn::Expr::Path(p) => {
                let b = p.path.get_ident().and_then(|i| self.lookup(&i.to_string()));
                match b {
                    Some(Binding::Agg(a)) => {
                        let slot = self.aggs[a].slot.clone();
                        Ok(self.load_slot(&slot, sp))
                    }
                    Some(Binding::Array(a)) => Ok(self.load_slot(&Slot::Array(a), sp)),
                    _ => self.lower_any(e, want),
                }
            }
            syn::Expr::Field(f) => {
                if let Some((slot, ..)) = self.agg_place(e)? {
                    return Ok(self.load_slot(&slot, sp));
                }
                if self.static_ty(&f.base).is_some_and(|t| !t.is_plain()) {
                    let bt = self.static_ty(&f.base).expect("checked");
                    let (k, _) = self.member_of(&bt, &f.member, f)?;
                    return match self.lower_agg(&f.base, None)? {
                        Agg::Struct(_, mut xs) | Agg::Tuple(mut xs) => Ok(xs.swap_remove(k)),
                        other => Err(self.not_plain(&f.base, &other.ty())),
                    };
                }
                self.lower_any(e, want)
            }
            syn::Expr::Call(c) if self.static_ty(e).is_some() => self.inline_call(c),
            syn::Expr::If(i) if self.is_agg_expr(e) => self.lower_agg_if(i, want),
            syn::Expr::Block(b) if self.is_agg_expr(e) => self.lower_block_agg(&b.block, want),
            _ => self.lower_any(e, want),
        }
    }

    /// `Name { field: value, ..., ..base }`.
    fn lower_struct_lit(&mut self, s: &syn::ExprStruct) -> R<Agg> {
        let structs = self.structs;
        let name = match (s.qself.is_none(), s.path.get_ident()) {
            (true, Some(id)) => id.to_string(),
            _ => {
                return Err(err(
                    &s.path,
                    format!("unknown struct `{}`", self.text(&s.path)),
                ))
            }
        };
        let Some(&k) = structs.by_name.get(&name) else {
            let known: Vec<&str> = structs.defs.iter().map(|d| d.name.as_str()).collect();
            return Err(err(
                &s.path,
                if known.is_empty() {
                    format!(
                        "unknown struct `{}`; no struct is declared in this code",
                        name
                    )
                } else {
                    format!(
                        "unknown struct `{}`; the structs of this code are {}",
                        name,
                        known.join(", ")
                    )
                },
            ));
        };
        let def = &structs.defs[k];
        let mut vals: Vec<Option<Agg>> = vec![None; def.fields.len()];
        for fv in &s.fields {
            let syn::Member::Named(id) = &fv.member else {
                return Err(err(
                    &fv.member,
                    format!("name the field: `{} {{ {}: ... }}`", name, def.fields[0].0),
                ));
            };
            let Some(fi) = def.fields.iter().position(|(n, _)| id == n) else {
                return Err(err(
                    id,
                    format!(
                        "struct `{}` has no field `{}`; its fields are {}",
                        name,
                        id,
                        structs.field_list(k)
                    ),
                ));
            };
            if vals[fi].is_some() {
                return Err(err(id, format!("field `{}` is given twice", id)));
            }
            let what = format!("field `{}` of `{}`", id, name);
            vals[fi] = Some(self.lower_typed(&fv.expr, &def.fields[fi].1, &what)?);
        }
        if let Some(rest) = &s.rest {
            let base = self.lower_typed(rest, &Ty::Struct(k), "`..`")?;
            if let Agg::Struct(_, xs) = base {
                for (v, x) in vals.iter_mut().zip(xs) {
                    if v.is_none() {
                        *v = Some(x);
                    }
                }
            }
        }
        let missing: Vec<&str> = def
            .fields
            .iter()
            .zip(&vals)
            .filter(|(_, v)| v.is_none())
            .map(|((n, _), _)| n.as_str())
            .collect();
        if !missing.is_empty() {
            return Err(err(
                s,
                format!(
                    "`{}` is missing field(s) {}: every field needs a value (or `..base` to copy the rest)",
                    name,
                    missing.join(", ")
                ),
            ));
        }
        Ok(Agg::Struct(k, vals.into_iter().flatten().collect()))
    }

    /// A block whose value is an aggregate: `{ ...; value }`.
    fn lower_block_agg(&mut self, b: &syn::Block, want: Option<&Ty>) -> R<Agg> {
        self.scopes.push(HashMap::new());
        let r = (|| {
            let n = b.stmts.len();
            for s in &b.stmts[..n.saturating_sub(1)] {
                self.lower_stmt(s, false, None)?;
            }
            match b.stmts.last() {
                Some(syn::Stmt::Expr(e, None)) => self.lower_agg(e, want),
                _ => Err(err(b, "this block must end in a value")),
            }
        })();
        self.scopes.pop();
        r
    }

    /// `if c { a } else { b }` with aggregate branches: both store into one
    /// set of locals.
    fn lower_agg_if(&mut self, i: &syn::ExprIf, want: Option<&Ty>) -> R<Agg> {
        let sp = span_of(i);
        let c = self.lower_expr(&i.cond, Some(Type::BOOL))?;
        let c = self.cond(c, &i.cond)?;
        let mut result: Option<Slot> = None;
        let accept = self.nested(|s| {
            let a = s.lower_block_agg(&i.then_branch, want)?;
            let slot = s.new_slot("if_value", &a.ty(), true);
            s.store_slot(&slot, &a, sp);
            result = Some(slot);
            Ok(())
        })?;
        let slot = result.expect("the branch stored its value");
        let ty = self.slot_ty(&slot);
        let reject = self.nested(|s| {
            let Some((_, e)) = &i.else_branch else {
                return Err(err(i, "an `if` with a value needs an `else`"));
            };
            let a = s.lower_agg(e, Some(&ty))?;
            if a.ty() != ty {
                return Err(err(
                    &**e,
                    format!(
                        "`if` branches differ: {} and {}",
                        s.ty_name(&ty),
                        s.ty_name(&a.ty())
                    ),
                ));
            }
            s.store_slot(&slot, &a, sp);
            Ok(())
        })?;
        self.emit_at(
            InstKind::If {
                cond: c.id,
                accept,
                reject,
            },
            Type::Void,
            sp,
        );
        Ok(self.load_slot(&slot, sp))
    }

    /// `left = right` where `left` is a struct or tuple variable or part.
    pub(super) fn lower_agg_assign(
        &mut self,
        (slot, root, mutable): (Slot, String, bool),
        left: &syn::Expr,
        right: &syn::Expr,
    ) -> R<()> {
        if !mutable {
            return Err(err(
                left,
                format!(
                    "`{}` is not mutable; declare it with `let mut {}`",
                    root, root
                ),
            ));
        }
        let want = self.slot_ty(&slot);
        // Every leaf of the right side is read before any is stored.
        let a = self.lower_typed(right, &want, &format!("`{}`", self.text(left)))?;
        self.store_slot(&slot, &a, span_of(right));
        Ok(())
    }

    /// An argument of a helper call, checked against the parameter's type.
    pub(super) fn lower_arg(&mut self, a: &syn::Expr, t: &Ty, what: &str) -> R<Agg> {
        if let Ty::Array(e, n) = t {
            let ids = self.array_arg(a, (*e, *n), what)?;
            return Ok(Agg::Array(
                *e,
                ids.into_iter().map(|id| Val { id, ty: *e }).collect(),
            ));
        }
        self.lower_typed(a, t, what)
    }

    /// A call of a helper that returns an aggregate: its body, inlined.
    pub(super) fn inline_call(&mut self, c: &syn::ExprCall) -> R<Agg> {
        let sigs = self.sigs;
        let name = match &*c.func {
            syn::Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
            _ => None,
        }
        .unwrap_or_default();
        let sig = &sigs[&name];
        if c.args.len() != sig.params.len() {
            return Err(err(
                c,
                format!(
                    "`{}` takes {} argument(s), got {}",
                    name,
                    sig.params.len(),
                    c.args.len()
                ),
            ));
        }
        let mut args = Vec::new();
        for (k, a) in c.args.iter().enumerate() {
            let what = format!("argument {} of `{}`", k + 1, name);
            args.push(self.lower_arg(a, &sig.params[k], &what)?);
        }
        self.inline_body(self.items[sig.item], args, span_of(c))
    }

    /// Lowers an uncalled helper returning an aggregate on its own, so its
    /// errors are reported like any helper's.
    pub(super) fn check_inlined_helper(mut self, f: &syn::ItemFn) -> R<()> {
        let sigs = self.sigs;
        let sig = &sigs[&f.sig.ident.to_string()];
        let sp = span_of(&f.sig.ident);
        let leaves: Vec<Val> = sig
            .args
            .iter()
            .enumerate()
            .map(|(i, &t)| self.val(InstKind::Arg(i as u32), t, sp))
            .collect();
        let mut it = leaves.into_iter();
        let args = sig
            .params
            .iter()
            .map(|t| self.agg_from_leaves(t, &mut it))
            .collect();
        self.inline_body(f, args, sp).map(|_| ())
    }

    /// `f`'s body lowered here with its parameters bound to `args`. The
    /// body sees only its parameters (not the caller's variables or loops).
    fn inline_body(&mut self, f: &syn::ItemFn, args: Vec<Agg>, sp: Span) -> R<Agg> {
        let saved_scopes = std::mem::replace(&mut self.scopes, vec![HashMap::new()]);
        let saved_loops = std::mem::take(&mut self.loops);
        let saved_ret = self.inline_ret.take();
        let r = self.inline_body_here(f, args, sp);
        self.scopes = saved_scopes;
        self.loops = saved_loops;
        self.inline_ret = saved_ret;
        r
    }

    fn inline_body_here(&mut self, f: &syn::ItemFn, args: Vec<Agg>, sp: Span) -> R<Agg> {
        let name = f.sig.ident.to_string();
        let ret = self.sigs[&name].ret.clone();
        for (input, a) in f.sig.inputs.iter().zip(args) {
            if let syn::FnArg::Typed(pt) = input {
                let what = self.text(&pt.pat);
                self.bind_agg_pattern(&pt.pat, a, &what)?;
            }
        }
        let stmts = &f.block.stmts;
        let must_return = format!(
            "`{}` must return a value of type {}",
            name,
            self.ty_name(&ret)
        );
        let what = format!("`{}`'s return type", name);
        let tail = match stmts.last() {
            Some(syn::Stmt::Expr(syn::Expr::Return(r), _)) => r.expr.as_deref(),
            Some(syn::Stmt::Expr(e, None)) => Some(e),
            _ => None,
        };
        let body = &stmts[..stmts.len() - tail.is_some() as usize];
        if count_returns(&f.block)
            == matches!(stmts.last(), Some(syn::Stmt::Expr(syn::Expr::Return(_), _))) as usize
        {
            // One exit, at the end: the tail is the result.
            self.inline_ret = Some(InlineRet {
                name: name.clone(),
                ty: ret.clone(),
                result: None,
            });
            self.scopes.push(HashMap::new());
            for s in body {
                self.lower_stmt(s, false, None)?;
            }
            let Some(t) = tail else {
                return Err(err(&f.block, must_return));
            };
            return self.lower_typed(t, &ret, &what);
        }
        // Early returns: a one-trip loop that every `return` leaves.
        let result = self.new_slot(&format!("{}_result", name), &ret, true);
        self.inline_ret = Some(InlineRet {
            name: name.clone(),
            ty: ret.clone(),
            result: Some(result.clone()),
        });
        let snap = self.enter_loop_named(Some(RETURN_LABEL.to_string()), sp);
        let lowered = self.nested(|s| {
            s.scopes.push(HashMap::new());
            for st in body {
                s.lower_stmt(st, false, None)?;
            }
            match tail {
                Some(t) => {
                    let a = s.lower_typed(t, &ret, &what)?;
                    s.store_slot(&result, &a, sp);
                    s.emit_at(InstKind::Break, Type::Void, sp);
                }
                None if s.diverges(s.blocks.last().expect("body")) => {}
                None => return Err(err(&f.block, must_return.clone())),
            }
            Ok(())
        })?;
        self.emit_at(InstKind::Loop { body: lowered }, Type::Void, sp);
        self.exit_loop(snap, sp)?;
        Ok(self.load_slot(&result, sp))
    }

    /// `return value` inside a helper being inlined.
    pub(super) fn lower_inline_return(&mut self, r: &syn::ExprReturn) -> R<Val> {
        let ctx = self.inline_ret.clone().expect("inside an inlined helper");
        let Some(x) = &r.expr else {
            return Err(err(
                r,
                format!(
                    "`{}` must return a value of type {}",
                    ctx.name,
                    self.ty_name(&ctx.ty)
                ),
            ));
        };
        let a = self.lower_typed(x, &ctx.ty, &format!("`{}`'s return type", ctx.name))?;
        let Some(slot) = ctx.result else {
            return Err(err(r, "`return` here must be the helper's last statement"));
        };
        self.store_slot(&slot, &a, span_of(r));
        // The one-trip loop is the outermost frame while the body is lowered.
        self.jump(0, true, span_of(r));
        Ok(self.unit())
    }

    /// Whether the innermost loop frame is an inlined helper's, which
    /// `break` and `continue` cannot leave.
    pub(super) fn in_return_frame(&self) -> bool {
        self.loops
            .last()
            .is_some_and(|f| f.label.as_deref() == Some(RETURN_LABEL))
    }
}

/// How many `return`s `b` contains.
fn count_returns(b: &syn::Block) -> usize {
    use syn::visit::Visit;
    struct Count(usize);
    impl<'a> Visit<'a> for Count {
        fn visit_expr_return(&mut self, r: &'a syn::ExprReturn) {
            self.0 += 1;
            syn::visit::visit_expr_return(self, r);
        }
    }
    let mut c = Count(0);
    c.visit_block(b);
    c.0
}
