//! Loop labels (`'outer: for ...`, `break 'outer`, `continue 'outer`) and
//! `match` on integers, both lowered to the IR's plain control flow.
//!
//! A `break`/`continue` naming the innermost loop is the IR's own. One that
//! names an outer loop sets that loop's flag local (1 = break, 2 = continue)
//! and breaks the innermost loop; after every inner loop that may have set a
//! flag, the enclosing body checks it and breaks on (or, at the named loop,
//! breaks or continues) — so each IR `Break`/`Continue` still targets the
//! innermost loop, which every backend translates as is.
//!
//! `match` becomes a chain of `if`/`else` on comparisons of the scrutinee,
//! evaluated once; a value-producing `match` stores into a local like `if`.

use super::*;

/// One enclosing loop while lowering its body.
pub(super) struct LoopFrame {
    pub label: Option<String>,
    /// i32 local: 0 = go on, 1 = break this loop, 2 = continue it.
    pub flag: Option<LocalId>,
    /// How many `break`/`continue` from deeper loops named this one so far.
    pub deep_uses: usize,
}

impl<'a> FnLowerer<'a> {
    /// Opens a loop: its flag (for a labelled one) is cleared before the loop.
    /// Returns the enclosing frames' use counts, for `exit_loop`.
    pub(super) fn enter_loop(&mut self, label: Option<&syn::Label>, sp: Span) -> R<Vec<usize>> {
        Ok(self.enter_loop_named(label.map(|l| l.name.ident.to_string()), sp))
    }

    /// `enter_loop` for a label given by name (also the one-trip loop
    /// around an inlined helper, `aggregates.rs`).
    pub(super) fn enter_loop_named(&mut self, label: Option<String>, sp: Span) -> Vec<usize> {
        let snap = self.loops.iter().map(|f| f.deep_uses).collect();
        let (name, flag) = match label {
            Some(name) => {
                let flag = self.func.locals.append(Local {
                    name: format!("loop_{}", name),
                    ty: Type::I32,
                });
                let zero = self.konst(Const::i32(0), sp);
                self.emit_at(InstKind::LocalStore(flag, zero.id), Type::Void, sp);
                (Some(name), Some(flag))
            }
            None => (None, None),
        };
        self.loops.push(LoopFrame {
            label: name,
            flag,
            deep_uses: 0,
        });
        snap
    }

    /// Closes the loop just emitted; after it, checks the flags of enclosing
    /// loops that a `break`/`continue` inside it named.
    pub(super) fn exit_loop(&mut self, snap: Vec<usize>, sp: Span) -> R<()> {
        self.loops.pop();
        let top = self.loops.len();
        for k in (0..top).rev() {
            if self.loops[k].deep_uses == snap[k] {
                continue;
            }
            let flag = self.loops[k].flag.expect("only labelled loops are named");
            let f = self.val(InstKind::LocalLoad(flag), Type::I32, sp);
            if k + 1 == top {
                // The named loop encloses this point directly.
                for (code, op) in [(1, InstKind::Break), (2, InstKind::Continue)] {
                    let c = self.konst(Const::i32(code), sp);
                    let is = self.val(InstKind::Binary(BinaryOp::Eq, f.id, c.id), Type::BOOL, sp);
                    let body = self.nested(|s| {
                        if code == 2 {
                            let zero = s.konst(Const::i32(0), sp);
                            s.emit_at(InstKind::LocalStore(flag, zero.id), Type::Void, sp);
                        }
                        s.emit_at(op, Type::Void, sp);
                        Ok(())
                    })?;
                    self.emit_at(
                        InstKind::If {
                            cond: is.id,
                            accept: body,
                            reject: vec![],
                        },
                        Type::Void,
                        sp,
                    );
                }
            } else {
                // Leave this loop too; the check after it goes on outwards.
                let zero = self.konst(Const::i32(0), sp);
                let set = self.val(
                    InstKind::Binary(BinaryOp::Ne, f.id, zero.id),
                    Type::BOOL,
                    sp,
                );
                let body = self.nested(|s| {
                    s.emit_at(InstKind::Break, Type::Void, sp);
                    Ok(())
                })?;
                self.emit_at(
                    InstKind::If {
                        cond: set.id,
                        accept: body,
                        reject: vec![],
                    },
                    Type::Void,
                    sp,
                );
                self.loops[top - 1].deep_uses += 1;
            }
        }
        Ok(())
    }

    /// `break` or `continue`, with or without a label.
    pub(super) fn lower_jump<T: Spanned>(
        &mut self,
        node: &T,
        label: Option<&syn::Lifetime>,
        is_break: bool,
    ) -> R<Val> {
        let sp = span_of(node);
        let word = if is_break { "break" } else { "continue" };
        if self.loops.is_empty() || (label.is_none() && self.in_return_frame()) {
            return Err(err(node, format!("`{}` outside a loop", word)));
        }
        let top = self.loops.len() - 1;
        let k = match label {
            None => top,
            Some(l) => {
                let name = l.ident.to_string();
                self.loops
                    .iter()
                    .rposition(|f| f.label.as_deref() == Some(&name))
                    .ok_or_else(|| {
                        err(
                            l,
                            format!(
                                "unknown loop label `'{}`; label a loop with `'{}: for ...`",
                                name, name
                            ),
                        )
                    })?
            }
        };
        self.jump(k, is_break, sp);
        Ok(self.unit())
    }

    /// Leaves (or continues) the loop `self.loops[k]`: directly when it is
    /// the innermost, else through its flag.
    pub(super) fn jump(&mut self, k: usize, is_break: bool, sp: Span) {
        let top = self.loops.len() - 1;
        if k == top {
            let op = if is_break {
                InstKind::Break
            } else {
                InstKind::Continue
            };
            self.emit_at(op, Type::Void, sp);
        } else {
            let flag = self.loops[k].flag.expect("a named loop has a flag");
            let code = self.konst(Const::i32(if is_break { 1 } else { 2 }), sp);
            self.emit_at(InstKind::LocalStore(flag, code.id), Type::Void, sp);
            self.loops[k].deep_uses += 1;
            self.emit_at(InstKind::Break, Type::Void, sp);
        }
    }

    pub(super) fn lower_match(&mut self, m: &syn::ExprMatch, want: Option<Type>) -> R<Val> {
        let sp = span_of(m);
        let x = self.lower_expr(&m.expr, Some(Type::I32))?;
        if !(x.ty == Type::I32 || x.ty == Type::U32) {
            return Err(err(
                &m.expr,
                format!(
                    "`match` works on i32 and u32 values; `{}` is {}",
                    self.text(&m.expr),
                    x.ty
                ),
            ));
        }
        let Some(last) = m
            .arms
            .iter()
            .position(|a| is_catch_all(&a.pat, self.consts))
        else {
            return Err(err(
                m,
                "`match` on integers needs a last arm `_ => ...` for the values no other arm covers",
            ));
        };
        let mut st = MatchState {
            result: None,
            plain_void: false,
            want,
        };
        self.match_arms(x, &m.arms[..=last], &mut st)?;
        Ok(match st.result {
            Some((l, ty)) => self.val(InstKind::LocalLoad(l), ty, sp),
            None => self.unit(),
        })
    }

    fn match_arms(&mut self, x: Val, arms: &[syn::Arm], st: &mut MatchState) -> R<()> {
        let arm = &arms[0];
        if let Some((_, g)) = &arm.guard {
            return Err(err(
                &**g,
                "match guards are not supported; test inside the arm with `if`",
            ));
        }
        if arms.len() == 1 {
            // The catch-all arm.
            self.scopes.push(HashMap::new());
            if let syn::Pat::Ident(pi) = &arm.pat {
                self.bind_pattern(&syn::Pat::Ident(pi.clone()), x)?;
            }
            let r = self.match_body(arm, st);
            self.scopes.pop();
            return r;
        }
        let c = self.pattern_cond(x, &arm.pat)?;
        let accept = self.nested(|s| s.match_body(arm, st))?;
        let reject = self.nested(|s| s.match_arms(x, &arms[1..], st))?;
        self.emit_at(
            InstKind::If {
                cond: c.id,
                accept,
                reject,
            },
            Type::Void,
            span_of(arm),
        );
        Ok(())
    }

    fn match_body(&mut self, arm: &syn::Arm, st: &mut MatchState) -> R<()> {
        let sp = span_of(&arm.body);
        let want = st.result.map(|r| r.1).or(st.want);
        let v = self.lower_expr(&arm.body, want)?;
        if v.ty == Type::Void {
            let diverges = self.diverges(self.blocks.last().expect("arm block"));
            if !diverges {
                if let Some((_, ty)) = st.result {
                    return Err(err(
                        &arm.body,
                        format!(
                            "this arm has no value but the match's other arms are {}",
                            ty
                        ),
                    ));
                }
                st.plain_void = true;
            }
            return Ok(());
        }
        match st.result {
            None if st.plain_void => {
                return Err(err(
                    &arm.body,
                    format!("this arm is {} but an earlier arm has no value", v.ty),
                ))
            }
            None => {
                let l = self.func.locals.append(Local {
                    name: "match_value".into(),
                    ty: v.ty,
                });
                st.result = Some((l, v.ty));
                self.emit_at(InstKind::LocalStore(l, v.id), Type::Void, sp);
            }
            Some((l, ty)) if ty == v.ty => {
                self.emit_at(InstKind::LocalStore(l, v.id), Type::Void, sp);
            }
            Some((_, ty)) => {
                return Err(err(
                    &arm.body,
                    format!("`match` arms differ: {} and {}", ty, v.ty),
                ))
            }
        }
        Ok(())
    }

    /// The bool that is true when `x` matches `pat` (not a catch-all).
    fn pattern_cond(&mut self, x: Val, pat: &syn::Pat) -> R<Val> {
        let sp = span_of(pat);
        match pat {
            syn::Pat::Or(o) => {
                let mut acc: Option<Val> = None;
                for p in &o.cases {
                    if is_catch_all(p, self.consts) {
                        return Err(err(p, "a name or `_` inside `|` matches everything; use it as the last arm on its own"));
                    }
                    let c = self.pattern_cond(x, p)?;
                    acc = Some(match acc {
                        None => c,
                        Some(a) => self.val(InstKind::Binary(BinaryOp::LogicalOr, a.id, c.id), Type::BOOL, sp),
                    });
                }
                Ok(acc.expect("syn parses at least one case"))
            }
            syn::Pat::Paren(p) => self.pattern_cond(x, &p.pat),
            syn::Pat::Range(r) => {
                let mut acc: Option<Val> = None;
                let closed = matches!(r.limits, syn::RangeLimits::Closed(_));
                if let Some(a) = &r.start {
                    let a = self.pattern_value(x, a)?;
                    acc = Some(self.val(InstKind::Binary(BinaryOp::Ge, x.id, a.id), Type::BOOL, sp));
                }
                if let Some(b) = &r.end {
                    let b = self.pattern_value(x, b)?;
                    let op = if closed { BinaryOp::Le } else { BinaryOp::Lt };
                    let c = self.val(InstKind::Binary(op, x.id, b.id), Type::BOOL, sp);
                    acc = Some(match acc {
                        None => c,
                        Some(a) => self.val(InstKind::Binary(BinaryOp::LogicalAnd, a.id, c.id), Type::BOOL, sp),
                    });
                }
                acc.ok_or_else(|| err(r, "a range pattern needs an end"))
            }
            syn::Pat::Lit(l) => {
                let e = syn::Expr::Lit(l.clone());
                let v = self.pattern_value(x, &e)?;
                Ok(self.val(InstKind::Binary(BinaryOp::Eq, x.id, v.id), Type::BOOL, sp))
            }
            syn::Pat::Ident(pi) => {
                let e = syn::Expr::Path(syn::ExprPath {
                    attrs: vec![],
                    qself: None,
                    path: pi.ident.clone().into(),
                });
                let v = self.pattern_value(x, &e)?;
                Ok(self.val(InstKind::Binary(BinaryOp::Eq, x.id, v.id), Type::BOOL, sp))
            }
            syn::Pat::Path(p) => {
                let e = syn::Expr::Path(p.clone());
                let v = self.pattern_value(x, &e)?;
                Ok(self.val(InstKind::Binary(BinaryOp::Eq, x.id, v.id), Type::BOOL, sp))
            }
            _ => Err(err(
                pat,
                "`match` arms take integer literals, consts, ranges `a..=b`, alternatives `a | b`, a name or `_`",
            )),
        }
    }

    /// A pattern's constant (a literal, a negated literal or a const), typed as the scrutinee.
    fn pattern_value(&mut self, x: Val, e: &syn::Expr) -> R<Val> {
        let v = match strip_paren(e) {
            // syn reads `-3` in a pattern as one literal with a sign.
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(i),
                ..
            }) => {
                let n: i64 = i
                    .base10_parse()
                    .map_err(|_| err(e, "integer literal out of range"))?;
                let c = match (x.ty.scalar(), i.suffix()) {
                    (Some(Scalar::I32), "" | "i32") if i32::try_from(n).is_ok() => {
                        Const::i32(n as i32)
                    }
                    (Some(Scalar::U32), "" | "u32") if u32::try_from(n).is_ok() => {
                        Const::u32(n as u32)
                    }
                    _ => {
                        return Err(err(
                            e,
                            format!(
                                "`{}` is not a value of the matched type {}",
                                self.text(e),
                                x.ty
                            ),
                        ))
                    }
                };
                self.konst(c, span_of(e))
            }
            syn::Expr::Path(p)
                if p.path
                    .get_ident()
                    .is_some_and(|i| self.consts.contains_key(&i.to_string())) =>
            {
                self.lower_expr(e, Some(x.ty))?
            }
            _ => {
                return Err(err(
                    e,
                    format!("`{}` is not an integer literal or const", self.text(e)),
                ))
            }
        };
        if v.ty != x.ty {
            return Err(err(
                e,
                format!(
                    "`{}` is {} but the matched value is {}",
                    self.text(e),
                    v.ty,
                    x.ty
                ),
            ));
        }
        Ok(v)
    }
}

pub(super) struct MatchState {
    result: Option<(LocalId, Type)>,
    plain_void: bool,
    want: Option<Type>,
}

/// `_` or a plain name that is not a const.
fn is_catch_all(p: &syn::Pat, consts: &HashMap<String, Const>) -> bool {
    match p {
        syn::Pat::Wild(_) => true,
        syn::Pat::Ident(pi) => pi.subpat.is_none() && !consts.contains_key(&pi.ident.to_string()),
        _ => false,
    }
}
