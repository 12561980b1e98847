//! Function bodies: the lowering state, statements, `let`, blocks,
//! conditions and structured control flow (`if`, `for`).

use super::*;

/// The front end writes through the one IR builder: its open block is
/// the innermost of its block stack, and every instruction carries the
/// span of the syntax it comes from (`Build::emit_at`), so `span` is
/// only a default for the provided helpers.
impl Build for FnLowerer<'_> {
    fn func(&mut self) -> &mut Function {
        &mut self.func
    }
    fn func_ref(&self) -> &Function {
        &self.func
    }
    fn push(&mut self, h: InstId) {
        self.blocks
            .last_mut()
            .expect("a block is always open")
            .push(h);
    }
    fn span(&self) -> Span {
        Span::default()
    }
    fn swap_block(&mut self, b: Block) -> Block {
        std::mem::replace(self.blocks.last_mut().expect("a block is always open"), b)
    }
}

impl<'a> FnLowerer<'a> {
    pub(super) fn new(
        code: &'a str,
        env: &'a KernelEnv<'a>,
        decls: &'a Decls<'a>,
        func: Function,
        is_entry: bool,
    ) -> Self {
        FnLowerer {
            code,
            env,
            sigs: &decls.sigs,
            consts: &decls.consts,
            structs: &decls.structs,
            items: &decls.items,
            func,
            blocks: vec![Vec::new()],
            scopes: vec![HashMap::new()],
            loops: Vec::new(),
            is_entry,
            entry_vector_arg: false,
            arrays: Vec::new(),
            block: None,
            shared: Vec::new(),
            aggs: Vec::new(),
            inline_ret: None,
        }
    }

    pub(super) fn text<T: Spanned>(&self, node: &T) -> String {
        snippet(self.code, node)
    }

    pub(super) fn val(&mut self, kind: InstKind, ty: Type, span: Span) -> Val {
        Val {
            id: self.emit_at(kind, ty, span),
            ty,
        }
    }

    pub(super) fn konst(&mut self, c: Const, span: Span) -> Val {
        self.val(InstKind::Const(c), Type::Scalar(c.scalar), span)
    }

    pub(super) fn lookup(&self, name: &str) -> Option<Binding> {
        self.scopes.iter().rev().find_map(|s| s.get(name).copied())
    }

    pub(super) fn bind(&mut self, name: String, b: Binding) {
        self.scopes
            .last_mut()
            .expect("a scope is always open")
            .insert(name, b);
    }

    /// Lowers `f`; also gives the shared arrays it declared (the entry's).
    pub(super) fn lower_fn(mut self, f: &syn::ItemFn) -> R<(Function, Vec<SharedArray>)> {
        let sp = span_of(&f.sig.ident);
        if self.is_entry && self.entry_vector_arg {
            let comps: Vec<InstId> = (0..self.env.dims)
                .map(|i| self.emit_at(InstKind::Arg(i as u32), Type::I32, sp))
                .collect();
            let ty = Type::Vector(Scalar::I32, self.env.dims as u8);
            let v = self.val(InstKind::Construct(comps), ty, sp);
            if let syn::FnArg::Typed(pt) = &f.sig.inputs[0] {
                self.bind_pattern(&pt.pat, v)?;
            }
        } else if self.is_entry {
            for (i, input) in f.sig.inputs.iter().enumerate() {
                if let syn::FnArg::Typed(pt) = input {
                    let ty = self.func.args[i];
                    let v = self.val(InstKind::Arg(i as u32), ty, span_of(&pt.pat));
                    self.bind_pattern(&pt.pat, v)?;
                }
            }
        } else {
            // Array and struct parameters arrive as one argument per leaf.
            let params = self.sigs[&f.sig.ident.to_string()].params.clone();
            let mut i = 0usize;
            for (input, t) in f.sig.inputs.iter().zip(params) {
                if let syn::FnArg::Typed(pt) = input {
                    let sp = span_of(&pt.pat);
                    let mut leaves = Vec::new();
                    self.structs.leaves(&t, &mut leaves);
                    let vals: Vec<Val> = leaves
                        .iter()
                        .enumerate()
                        .map(|(k, &lt)| self.val(InstKind::Arg((i + k) as u32), lt, sp))
                        .collect();
                    i += vals.len();
                    if t.is_plain() {
                        self.bind_pattern(&pt.pat, vals[0])?;
                    } else {
                        if let (structs::Ty::Array(..), false) =
                            (&t, matches!(&*pt.pat, syn::Pat::Ident(_)))
                        {
                            return Err(err(&pt.pat, "an array is bound to a plain name"));
                        }
                        let a = self.agg_from_leaves(&t, &mut vals.into_iter());
                        let what = self.text(&pt.pat);
                        self.bind_agg_pattern(&pt.pat, a, &what)?;
                    }
                }
            }
        }
        let ret = self.func.ret;
        let tail = self.lower_block_stmts(
            &f.block.stmts,
            if ret == Type::Void { None } else { Some(ret) },
        )?;
        match (tail, ret) {
            (Some(v), r)
                if r != Type::Void
                    && v.ty == Type::Void
                    && self.diverges(self.blocks.last().expect("body")) => {}
            (Some(v), r) if r != Type::Void => {
                let v = self.coerce(v, r, &f.block, "the return value")?;
                self.emit_at(InstKind::Return(Some(v.id)), Type::Void, span_of(&f.block));
            }
            (Some(v), _) if v.ty != Type::Void => {
                return Err(err(
                    &f.block,
                    format!(
                        "`{}` returns nothing but its body ends in a value of type {}",
                        f.sig.ident, v.ty
                    ),
                ))
            }
            (_, r) if r != Type::Void && !self.diverges(self.blocks.last().expect("body")) => {
                return Err(err(
                    &f.block,
                    format!("`{}` must return a value of type {}", f.sig.ident, r),
                ))
            }
            _ => {}
        }
        self.func.body = self.blocks.pop().expect("function body block");
        Ok((self.func, self.shared))
    }

    /// True when control cannot reach the end of `block`: it ends in a
    /// `return`, an `if` whose branches both diverge, or a `loop` without `break`.
    pub(super) fn diverges(&self, block: &Block) -> bool {
        fn breaks(f: &Function, b: &Block) -> bool {
            b.iter().any(|&h| match &f.insts[h].kind {
                InstKind::Break => true,
                InstKind::If { accept, reject, .. } => breaks(f, accept) || breaks(f, reject),
                _ => false,
            })
        }
        match block.last().map(|h| &self.func.insts[*h].kind) {
            Some(InstKind::Return(_)) => true,
            Some(InstKind::If { accept, reject, .. }) => {
                self.diverges(accept) && self.diverges(reject)
            }
            Some(InstKind::Loop { body }) => !breaks(&self.func, body),
            _ => false,
        }
    }

    pub(super) fn bind_pattern(&mut self, pat: &syn::Pat, v: Val) -> R<()> {
        match pat {
            syn::Pat::Ident(pi) => {
                if pi.by_ref.is_some() || pi.subpat.is_some() {
                    return Err(err(pat, "only plain names can be bound"));
                }
                let name = pi.ident.to_string();
                if pi.mutability.is_some() {
                    let local = self.func.locals.append(Local {
                        name: name.clone(),
                        ty: v.ty,
                    });
                    self.emit_at(InstKind::LocalStore(local, v.id), Type::Void, span_of(pat));
                    self.bind(name, Binding::Local(local, v.ty));
                } else {
                    self.bind(name, Binding::Value(v));
                }
                Ok(())
            }
            syn::Pat::Type(pt) => self.bind_pattern(&pt.pat, v),
            syn::Pat::Wild(_) => Ok(()),
            _ => Err(err(pat, "only plain names can be bound (no destructuring)")),
        }
    }

    /// Lowers statements in a fresh scope; returns the trailing expression's value, if any.
    pub(super) fn lower_block_stmts(
        &mut self,
        stmts: &[syn::Stmt],
        want: Option<Type>,
    ) -> R<Option<Val>> {
        self.scopes.push(HashMap::new());
        let mut tail = None;
        for (n, s) in stmts.iter().enumerate() {
            tail = self.lower_stmt(s, n + 1 == stmts.len(), want)?;
        }
        self.scopes.pop();
        Ok(tail)
    }

    /// One statement; returns the value of a `last` expression without `;`.
    pub(super) fn lower_stmt(
        &mut self,
        s: &syn::Stmt,
        last: bool,
        want: Option<Type>,
    ) -> R<Option<Val>> {
        match s {
            syn::Stmt::Local(l) => self.lower_let(l)?,
            // A call of a helper returning an aggregate, result unused.
            syn::Stmt::Expr(e @ syn::Expr::Call(_), Some(_)) if self.is_agg_expr(e) => {
                self.lower_agg(e, None)?;
            }
            syn::Stmt::Expr(e, semi) => {
                let v = self.lower_expr(e, if last && semi.is_none() { want } else { None })?;
                if last && semi.is_none() {
                    return Ok(Some(v));
                }
            }
            syn::Stmt::Item(i) => {
                return Err(err(
                    i,
                    "items cannot be declared inside a function; move it to the top level",
                ))
            }
            syn::Stmt::Macro(m) => return Err(err(m, "macros are not supported in kernel code")),
        }
        Ok(None)
    }

    pub(super) fn lower_let(&mut self, l: &syn::Local) -> R<()> {
        let (pat, declared_ty) = match &l.pat {
            syn::Pat::Type(pt) => (&*pt.pat, Some(&*pt.ty)),
            p => (p, None),
        };
        if let Some(init) = &l.init {
            if init.diverge.is_none() && Self::is_shared_let(&init.expr) {
                if let Some(t) = declared_ty {
                    return Err(err(t, "a shared array takes its type from its initial value: `let s = shared([0.0; 64]);`"));
                }
                return self.lower_shared_let(pat, &init.expr);
            }
            if init.diverge.is_none() && self.is_array_let(declared_ty, &init.expr) {
                return self.lower_array_let(pat, declared_ty, &init.expr);
            }
            let declared = declared_ty.map(|t| self.parse_ty(t)).transpose()?;
            if init.diverge.is_none()
                && (declared.as_ref().is_some_and(|t| !t.is_plain())
                    || self.is_agg_expr(&init.expr))
            {
                // A struct or tuple (or a tuple `let` of several values).
                let a = match &declared {
                    Some(t) => {
                        let what = format!("`{}`", self.text(pat));
                        self.lower_typed(&init.expr, t, &what)?
                    }
                    None => self.lower_agg(&init.expr, None)?,
                };
                let text = self.text(&init.expr);
                return self.bind_agg_pattern(pat, a, &text);
            }
        }
        let declared = declared_ty.map(parse_type).transpose()?;
        let Some(init) = &l.init else {
            return Err(err(
                l,
                "variables must be initialised where they are declared: `let x = ...;`",
            ));
        };
        if init.diverge.is_some() {
            return Err(err(l, "`let ... else` is not supported"));
        }
        let v = self.lower_expr(&init.expr, declared)?;
        if v.ty == Type::Void {
            return Err(err(
                &init.expr,
                format!("`{}` has no value to bind", self.text(&init.expr)),
            ));
        }
        let v = match declared {
            Some(t) => self.coerce(v, t, &init.expr, &self.text(pat))?,
            None => v,
        };
        self.bind_pattern(pat, v)
    }

    /// Checks that `v` has type `want`, naming `what` in the message.
    pub(super) fn coerce<T: Spanned>(
        &mut self,
        v: Val,
        want: Type,
        node: &T,
        what: &str,
    ) -> R<Val> {
        if v.ty == want {
            return Ok(v);
        }
        Err(err(
            node,
            format!(
                "`{}` is {} but {} expects {}",
                self.text(node),
                v.ty,
                what,
                want
            ),
        ))
    }

    pub(super) fn unit(&self) -> Val {
        // A void value never reaches an operand: every consumer checks for Void first.
        Val {
            id: InstId::new((u32::MAX >> 8) as usize),
            ty: Type::Void,
        }
    }

    pub(super) fn nested(&mut self, f: impl FnOnce(&mut Self) -> R<()>) -> R<Block> {
        self.blocks.push(Vec::new());
        let r = f(self);
        let b = self.blocks.pop().expect("nested block");
        r.map(|_| b)
    }

    pub(super) fn cond<T: Spanned>(&mut self, c: Val, node: &T) -> R<Val> {
        match c.ty {
            Type::Scalar(Scalar::Bool) => Ok(c),
            Type::Vector(Scalar::Bool, _) => Err(err(
                node,
                format!(
                    "`{}` compares vectors component-wise; wrap it in all(...) or any(...)",
                    self.text(node)
                ),
            )),
            t => Err(err(
                node,
                format!(
                    "`{}` is {} but a condition must be bool",
                    self.text(node),
                    t
                ),
            )),
        }
    }

    pub(super) fn lower_if(&mut self, i: &syn::ExprIf, want: Option<Type>) -> R<Val> {
        let sp = span_of(i);
        let c = self.lower_expr(&i.cond, Some(Type::BOOL))?;
        let c = self.cond(c, &i.cond)?;
        let mut result: Option<(LocalId, Type)> = None;
        let needs_value = i.else_branch.is_some()
            && i.then_branch
                .stmts
                .last()
                .is_some_and(|s| matches!(s, syn::Stmt::Expr(_, None)));
        let accept = self.nested(|s| {
            let v = s.lower_block_stmts(&i.then_branch.stmts, want)?;
            if let (true, Some(v)) = (needs_value, v) {
                if v.ty != Type::Void {
                    let l = s.func.locals.append(Local {
                        name: "if_value".into(),
                        ty: v.ty,
                    });
                    s.emit_at(InstKind::LocalStore(l, v.id), Type::Void, sp);
                    result = Some((l, v.ty));
                }
            }
            Ok(())
        })?;
        let reject = match &i.else_branch {
            None => vec![],
            Some((_, e)) => self.nested(|s| {
                let want2 = result.map(|r| r.1).or(want);
                let v = match &**e {
                    syn::Expr::Block(b) => s.lower_block_stmts(&b.block.stmts, want2)?,
                    other => Some(s.lower_expr(other, want2)?),
                };
                if let Some((l, ty)) = result {
                    match v {
                        Some(v) if v.ty == ty => {
                            s.emit_at(InstKind::LocalStore(l, v.id), Type::Void, sp);
                        }
                        Some(v) => {
                            return Err(err(
                                &**e,
                                format!("`if` branches differ: {} and {}", ty, v.ty),
                            ));
                        }
                        None => {
                            return Err(err(
                                &**e,
                                format!("the `else` branch must end in a {} value", ty),
                            ))
                        }
                    }
                }
                Ok(())
            })?,
        };
        self.emit_at(
            InstKind::If {
                cond: c.id,
                accept,
                reject,
            },
            Type::Void,
            sp,
        );
        Ok(match result {
            Some((l, ty)) => self.val(InstKind::LocalLoad(l), ty, sp),
            None => self.unit(),
        })
    }

    pub(super) fn lower_for(&mut self, f: &syn::ExprForLoop) -> R<()> {
        let sp = span_of(f);
        if let Some(arr) = self.array_named(&f.expr) {
            return self.lower_for_array(arr, f);
        }
        // Accept `a..b`, `a..=b`, `(a..b).step_by(s)`, or a local array.
        let (range, step) = match &*f.expr {
            syn::Expr::MethodCall(m) if m.method == "step_by" && m.args.len() == 1 => {
                (strip_paren(&m.receiver), Some(&m.args[0]))
            }
            other => (strip_paren(other), None),
        };
        let syn::Expr::Range(r) = range else {
            return Err(err(
                &f.expr,
                "`for` loops run over ranges or local arrays: `for i in a..b`, `for i in (a..b).step_by(s)`, `for x in w`",
            ));
        };
        let (Some(start), Some(end)) = (&r.start, &r.end) else {
            return Err(err(r, "`for` ranges need both ends: `a..b`"));
        };
        let (b, e) = self.lower_pair(start, end, Some(Type::I32))?;
        if b.ty != e.ty || !b.ty.is_int() || !b.ty.is_scalar() {
            return Err(err(
                r,
                format!(
                    "range ends must be integers of one type, got {} and {}",
                    b.ty, e.ty
                ),
            ));
        }
        let inclusive = matches!(r.limits, syn::RangeLimits::Closed(_));
        let st = match step {
            Some(s) => {
                let v = self.lower_expr(s, Some(b.ty))?;
                if v.ty != b.ty {
                    return Err(err(
                        s,
                        format!("the step is {} but the range is {}", v.ty, b.ty),
                    ));
                }
                if self
                    .const_int(v.id)
                    .is_some_and(|c| c <= 0 || (b.ty == Type::I32 && c >= 1 << 31))
                {
                    return Err(err(s, "`step_by` needs a positive step"));
                }
                v
            }
            None => self.konst(
                Const {
                    scalar: b.ty.scalar().expect("int"),
                    bits: 1,
                },
                sp,
            ),
        };
        if shared::contains_barrier(&f.body) {
            return self.lower_unrolled_for(f, (b, e, st), inclusive);
        }
        self.range_for(f, (b, e, st), inclusive, |_, counter| counter)
    }

    /// Emits the `RangeFor` of loop `f` over `begin..end` (`..=` when
    /// `inclusive`) by `step`; its body binds `f`'s pattern to
    /// `bind(counter)` (the counter itself, or a local array's element).
    pub(super) fn range_for(
        &mut self,
        f: &syn::ExprForLoop,
        (b, e, st): (Val, Val, Val),
        inclusive: bool,
        bind: impl FnOnce(&mut Self, Val) -> Val,
    ) -> R<()> {
        let sp = span_of(f);
        let snap = self.enter_loop(f.label.as_ref(), sp)?;
        let for_id = self.func.detached(InstKind::Break, Type::Void, sp);
        let body = self.nested(|s| {
            s.scopes.push(HashMap::new());
            let counter = s.val(InstKind::LoopCounter(for_id), b.ty, span_of(&f.pat));
            let v = bind(s, counter);
            s.bind_pattern(&f.pat, v)?;
            let r = s.lower_block_stmts(&f.body.stmts, None);
            s.scopes.pop();
            r.map(|_| ())
        })?;
        self.func.insts[for_id].kind = InstKind::RangeFor {
            begin: b.id,
            end: e.id,
            step: st.id,
            inclusive,
            body,
        };
        self.blocks.last_mut().expect("open block").push(for_id);
        self.exit_loop(snap, sp)?;
        Ok(())
    }
}
