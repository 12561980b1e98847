//! Type-checks kernel code and lowers it to IR.
//!
//! Pre: `code` is the text of one kernel node. Post: a `LoweredKernel` whose
//! functions validate (`ir::validate_kernel`), or the first error at its
//! line:col in plain words. Literals take their type from context (`x * 2`
//! with `x: f32` makes `2` an f32); otherwise operand types must match and the
//! user converts with `as`. Helper functions become IR functions (the inline
//! pass decides later which to inline); recursion is rejected here.

use super::source::{snippet, span_of};
use super::{parse, CodeError};
use crate::arena::Arena;
use crate::ir::*;
use crate::types::{Scalar, Type};
use std::collections::HashMap;
use syn::spanned::Spanned;

/// What the code of one kernel can see.
pub struct KernelEnv<'a> {
    /// Number of loop axes (1-3): the entry function takes this many i32s (or one ivecN).
    pub dims: usize,
    /// Scalar parameters by name and type, in order.
    pub params: &'a [(String, Type)],
    /// Field ports bound to fields: (port name, field, element type, number of axes).
    pub fields: &'a [(String, FieldId, Type, usize)],
}

pub struct LoweredKernel {
    pub entry: Function,
    pub functions: Arena<Function>,
}

pub const ENTRY_NAME: &str = "kernel";

type R<T> = Result<T, CodeError>;

fn err<T: Spanned>(node: &T, message: impl Into<String>) -> CodeError {
    let s = span_of(node);
    CodeError {
        line: s.line,
        col: s.col,
        message: message.into(),
    }
}

struct Sig {
    id: FuncId,
    args: Vec<Type>,
    ret: Type,
}

pub fn lower_kernel(code: &str, env: &KernelEnv) -> R<LoweredKernel> {
    let file = parse(code)?;
    let mut fns: Vec<&syn::ItemFn> = Vec::new();
    for item in &file.items {
        match item {
            syn::Item::Fn(f) => fns.push(f),
            other => return Err(err(other, "only `fn` items are allowed in kernel code")),
        }
    }
    let entry_pos = fns
        .iter()
        .position(|f| f.sig.ident == ENTRY_NAME)
        .ok_or_else(|| CodeError {
            line: 1,
            col: 1,
            message: format!(
                "kernel code needs an entry function `fn {}(...)` taking the loop indices",
                ENTRY_NAME
            ),
        })?;
    // Signatures first, so helpers may call each other in any order.
    let mut sigs: HashMap<String, Sig> = HashMap::new();
    let mut helper_order = Vec::new();
    for (n, f) in fns.iter().enumerate() {
        let name = f.sig.ident.to_string();
        if Builtin::from_name(&name).is_some() || RESERVED.contains(&name.as_str()) {
            return Err(err(
                &f.sig.ident,
                format!("`{}` is a built-in function and cannot be redefined", name),
            ));
        }
        if sigs.contains_key(&name) || (n != entry_pos && name == ENTRY_NAME) {
            return Err(err(
                &f.sig.ident,
                format!("function `{}` is defined twice", name),
            ));
        }
        if n == entry_pos {
            continue;
        }
        if !f.sig.generics.params.is_empty() {
            return Err(err(&f.sig.generics, "helper functions cannot be generic"));
        }
        let mut args = Vec::new();
        for input in &f.sig.inputs {
            match input {
                syn::FnArg::Typed(pt) => args.push(parse_type(&pt.ty)?),
                syn::FnArg::Receiver(r) => {
                    return Err(err(r, "`self` is not allowed in kernel code"))
                }
            }
        }
        let ret = match &f.sig.output {
            syn::ReturnType::Default => Type::Void,
            syn::ReturnType::Type(_, t) => parse_type(t)?,
        };
        let id = FuncId::new(helper_order.len());
        helper_order.push(n);
        sigs.insert(name, Sig { id, args, ret });
    }
    check_recursion(&fns, &sigs)?;

    let mut functions = Arena::new();
    for &n in &helper_order {
        let f = fns[n];
        let sig = &sigs[&f.sig.ident.to_string()];
        let func = Function::new(
            &f.sig.ident.to_string(),
            sig.args.clone(),
            sig.ret,
            span_of(&f.sig.ident),
        );
        let lowered = FnLowerer::new(code, env, &sigs, func, false).lower_fn(f)?;
        functions.append(lowered);
    }
    let ef = fns[entry_pos];
    let entry_args = entry_arg_types(ef, env.dims)?;
    let func = Function::new(
        ENTRY_NAME,
        vec![Type::I32; env.dims],
        Type::Void,
        span_of(&ef.sig.ident),
    );
    let mut lw = FnLowerer::new(code, env, &sigs, func, true);
    lw.entry_vector_arg = entry_args;
    let entry = lw.lower_fn(ef)?;
    Ok(LoweredKernel { entry, functions })
}

/// Names that are language functions rather than math built-ins.
pub const RESERVED: &[&str] = &[
    "random",
    "frame",
    "select",
    "bitcast",
    "atomic_add",
    "atomic_sub",
    "atomic_min",
    "atomic_max",
    "atomic_and",
    "atomic_or",
    "atomic_xor",
    "atomic_exchange",
    "atomic_compare_exchange",
];

/// Checks the entry signature; returns true when it takes one ivecN instead of N i32s.
fn entry_arg_types(f: &syn::ItemFn, dims: usize) -> R<bool> {
    let inputs: Vec<&syn::PatType> = f
        .sig
        .inputs
        .iter()
        .map(|a| match a {
            syn::FnArg::Typed(t) => Ok(t),
            syn::FnArg::Receiver(r) => Err(err(r, "`self` is not allowed in kernel code")),
        })
        .collect::<R<_>>()?;
    if !matches!(f.sig.output, syn::ReturnType::Default) {
        return Err(err(&f.sig.output, "the entry function returns nothing"));
    }
    let want = if dims == 1 {
        "i32".to_string()
    } else {
        format!("{} i32 arguments or one ivec{}", dims, dims)
    };
    if inputs.len() == 1 && dims > 1 {
        let t = parse_type(&inputs[0].ty)?;
        if t == Type::Vector(Scalar::I32, dims as u8) {
            return Ok(true);
        }
    }
    if inputs.len() != dims {
        return Err(err(
            &f.sig,
            format!(
                "this kernel loops over {} axes, so `fn {}` takes {}",
                dims, ENTRY_NAME, want
            ),
        ));
    }
    for i in &inputs {
        if parse_type(&i.ty)? != Type::I32 {
            return Err(err(
                &i.ty,
                format!("loop indices are i32; `fn {}` takes {}", ENTRY_NAME, want),
            ));
        }
    }
    Ok(false)
}

fn check_recursion(fns: &[&syn::ItemFn], sigs: &HashMap<String, Sig>) -> R<()> {
    use syn::visit::Visit;
    struct Calls(Vec<(String, CodeError)>);
    impl<'a> Visit<'a> for Calls {
        fn visit_expr_call(&mut self, c: &'a syn::ExprCall) {
            if let syn::Expr::Path(p) = &*c.func {
                if let Some(id) = p.path.get_ident() {
                    self.0.push((id.to_string(), err(c, "")));
                }
            }
            syn::visit::visit_expr_call(self, c);
        }
    }
    let mut graph: HashMap<String, Vec<(String, CodeError)>> = HashMap::new();
    for f in fns {
        let mut c = Calls(vec![]);
        c.visit_block(&f.block);
        graph.insert(
            f.sig.ident.to_string(),
            c.0.into_iter()
                .filter(|(n, _)| sigs.contains_key(n))
                .collect(),
        );
    }
    // Depth-first search for a cycle, reporting the call that closes it.
    fn dfs(
        n: &str,
        graph: &HashMap<String, Vec<(String, CodeError)>>,
        stack: &mut Vec<String>,
        done: &mut Vec<String>,
    ) -> R<()> {
        if done.iter().any(|d| d == n) {
            return Ok(());
        }
        stack.push(n.to_string());
        for (callee, at) in graph.get(n).into_iter().flatten() {
            if let Some(pos) = stack.iter().position(|s| s == callee) {
                let mut cycle: Vec<String> = stack[pos..].to_vec();
                cycle.push(callee.clone());
                return Err(CodeError {
                    message: format!("recursion is not allowed: {}", cycle.join(" calls ")),
                    ..at.clone()
                });
            }
            dfs(callee, graph, stack, done)?;
        }
        stack.pop();
        done.push(n.to_string());
        Ok(())
    }
    let mut names: Vec<&String> = graph.keys().collect();
    names.sort();
    let mut done = Vec::new();
    for n in names {
        dfs(n, &graph, &mut Vec::new(), &mut done)?;
    }
    Ok(())
}

pub(crate) fn parse_type(t: &syn::Type) -> R<Type> {
    let text = match t {
        syn::Type::Path(p) if p.qself.is_none() => {
            let seg = p
                .path
                .segments
                .last()
                .ok_or_else(|| err(t, "unknown type"))?;
            let mut s = seg.ident.to_string();
            if let syn::PathArguments::AngleBracketed(a) = &seg.arguments {
                let inner: Vec<String> = a
                    .args
                    .iter()
                    .map(|g| match g {
                        syn::GenericArgument::Type(syn::Type::Path(p)) => p
                            .path
                            .get_ident()
                            .map(|i| i.to_string())
                            .unwrap_or_default(),
                        _ => String::new(),
                    })
                    .collect();
                s = format!("{}<{}>", s, inner.join(","));
            }
            s
        }
        syn::Type::Tuple(tt) if tt.elems.is_empty() => return Ok(Type::Void),
        _ => {
            return Err(err(
                t,
                "unsupported type; use i32, u32, f32, bool, vecN, ivecN, uvecN, bvecN or matN",
            ))
        }
    };
    Type::parse(&text).ok_or_else(|| {
        err(t, format!("unknown type `{}`; use i32, u32, f32, bool, vecN, ivecN, uvecN, bvecN or matN (N = 2..4)", text))
    })
}

#[derive(Clone, Copy, Debug)]
struct Val {
    id: InstId,
    ty: Type,
}

#[derive(Clone, Copy)]
enum Binding {
    Value(Val),
    Local(LocalId, Type),
}

/// One step into a composite when assigning: `.x`, `.xy`, `[2]`, `[i]`.
#[derive(Clone)]
enum Access {
    Const(u32),
    Dyn(InstId),
    Swizzle(Vec<u8>),
}

enum Place {
    Local {
        local: LocalId,
        ty: Type,
        path: Vec<(Access, Type)>,
    },
    Field {
        field: FieldId,
        ty: Type,
        index: Vec<InstId>,
        path: Vec<(Access, Type)>,
    },
}

struct FnLowerer<'a> {
    code: &'a str,
    env: &'a KernelEnv<'a>,
    sigs: &'a HashMap<String, Sig>,
    func: Function,
    blocks: Vec<Block>,
    scopes: Vec<HashMap<String, Binding>>,
    loop_depth: usize,
    is_entry: bool,
    entry_vector_arg: bool,
}

fn is_literal(e: &syn::Expr) -> bool {
    match e {
        syn::Expr::Lit(l) => matches!(l.lit, syn::Lit::Int(_) | syn::Lit::Float(_)),
        syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => is_literal(&u.expr),
        syn::Expr::Paren(p) => is_literal(&p.expr),
        _ => false,
    }
}

fn swizzle_index(c: char) -> Option<u8> {
    match c {
        'x' | 'r' => Some(0),
        'y' | 'g' => Some(1),
        'z' | 'b' => Some(2),
        'w' | 'a' => Some(3),
        _ => None,
    }
}

fn composite_len(t: Type) -> Option<u32> {
    match t {
        Type::Vector(_, n) | Type::Matrix(n) => Some(n as u32),
        _ => None,
    }
}

fn element_type(t: Type) -> Type {
    match t {
        Type::Vector(s, _) => Type::Scalar(s),
        Type::Matrix(n) => Type::Vector(Scalar::F32, n),
        other => other,
    }
}

fn vec_or_scalar(s: Scalar, n: usize) -> Type {
    if n == 1 {
        Type::Scalar(s)
    } else {
        Type::Vector(s, n as u8)
    }
}

impl<'a> FnLowerer<'a> {
    fn new(
        code: &'a str,
        env: &'a KernelEnv<'a>,
        sigs: &'a HashMap<String, Sig>,
        func: Function,
        is_entry: bool,
    ) -> Self {
        FnLowerer {
            code,
            env,
            sigs,
            func,
            blocks: vec![Vec::new()],
            scopes: vec![HashMap::new()],
            loop_depth: 0,
            is_entry,
            entry_vector_arg: false,
        }
    }

    fn text<T: Spanned>(&self, node: &T) -> String {
        snippet(self.code, node)
    }

    fn emit(&mut self, kind: InstKind, ty: Type, span: Span) -> InstId {
        let id = self.func.insts.append(Inst { kind, ty, span });
        self.blocks
            .last_mut()
            .expect("a block is always open")
            .push(id);
        id
    }

    fn val(&mut self, kind: InstKind, ty: Type, span: Span) -> Val {
        Val {
            id: self.emit(kind, ty, span),
            ty,
        }
    }

    fn konst(&mut self, c: Const, span: Span) -> Val {
        self.val(InstKind::Const(c), Type::Scalar(c.scalar), span)
    }

    fn lookup(&self, name: &str) -> Option<Binding> {
        self.scopes.iter().rev().find_map(|s| s.get(name).copied())
    }

    fn bind(&mut self, name: String, b: Binding) {
        self.scopes
            .last_mut()
            .expect("a scope is always open")
            .insert(name, b);
    }

    fn lower_fn(mut self, f: &syn::ItemFn) -> R<Function> {
        let sp = span_of(&f.sig.ident);
        if self.is_entry && self.entry_vector_arg {
            let comps: Vec<InstId> = (0..self.env.dims)
                .map(|i| self.emit(InstKind::Arg(i as u32), Type::I32, sp))
                .collect();
            let ty = Type::Vector(Scalar::I32, self.env.dims as u8);
            let v = self.val(InstKind::Construct(comps), ty, sp);
            if let syn::FnArg::Typed(pt) = &f.sig.inputs[0] {
                self.bind_pattern(&pt.pat, v)?;
            }
        } else {
            for (i, input) in f.sig.inputs.iter().enumerate() {
                if let syn::FnArg::Typed(pt) = input {
                    let ty = self.func.args[i];
                    let v = self.val(InstKind::Arg(i as u32), ty, span_of(&pt.pat));
                    self.bind_pattern(&pt.pat, v)?;
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
                self.emit(InstKind::Return(Some(v.id)), Type::Void, span_of(&f.block));
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
        Ok(self.func)
    }

    /// True when control cannot reach the end of `block`: it ends in a
    /// `return`, an `if` whose branches both diverge, or a `loop` without `break`.
    fn diverges(&self, block: &Block) -> bool {
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

    fn bind_pattern(&mut self, pat: &syn::Pat, v: Val) -> R<()> {
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
                    self.emit(InstKind::LocalStore(local, v.id), Type::Void, span_of(pat));
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
    fn lower_block_stmts(&mut self, stmts: &[syn::Stmt], want: Option<Type>) -> R<Option<Val>> {
        self.scopes.push(HashMap::new());
        let mut tail = None;
        for (n, s) in stmts.iter().enumerate() {
            let last = n + 1 == stmts.len();
            match s {
                syn::Stmt::Local(l) => self.lower_let(l)?,
                syn::Stmt::Expr(e, semi) => {
                    let v = self.lower_expr(e, if last && semi.is_none() { want } else { None })?;
                    if last && semi.is_none() {
                        tail = Some(v);
                    }
                }
                syn::Stmt::Item(i) => {
                    return Err(err(
                        i,
                        "items cannot be declared inside a function; move it to the top level",
                    ))
                }
                syn::Stmt::Macro(m) => {
                    return Err(err(m, "macros are not supported in kernel code"))
                }
            }
        }
        self.scopes.pop();
        Ok(tail)
    }

    fn lower_let(&mut self, l: &syn::Local) -> R<()> {
        let (pat, declared) = match &l.pat {
            syn::Pat::Type(pt) => (&*pt.pat, Some(parse_type(&pt.ty)?)),
            p => (p, None),
        };
        let Some(init) = &l.init else {
            return Err(err(
                l,
                "variables must be initialised where they are declared: `let x = ...;`",
            ));
        };
        if init.diverge.is_some() {
            return Err(err(l, "`let ... else` is not supported"));
        }
        if let (syn::Pat::Tuple(pt), syn::Expr::Tuple(et)) = (pat, &*init.expr) {
            if declared.is_some() || pt.elems.len() != et.elems.len() {
                return Err(err(
                    l,
                    "tuple `let` needs as many names as values: `let (a, b) = (x, y);`",
                ));
            }
            let vals = et
                .elems
                .iter()
                .map(|e| self.lower_expr(e, None))
                .collect::<R<Vec<_>>>()?;
            for (p, v) in pt.elems.iter().zip(vals) {
                if v.ty == Type::Void {
                    return Err(err(p, "this value is empty"));
                }
                self.bind_pattern(p, v)?;
            }
            return Ok(());
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
    fn coerce<T: Spanned>(&mut self, v: Val, want: Type, node: &T, what: &str) -> R<Val> {
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

    fn lower_expr(&mut self, e: &syn::Expr, want: Option<Type>) -> R<Val> {
        let sp = span_of(e);
        match e {
            syn::Expr::Lit(l) => self.lower_lit(&l.lit, want),
            syn::Expr::Paren(p) => self.lower_expr(&p.expr, want),
            syn::Expr::Group(g) => self.lower_expr(&g.expr, want),
            syn::Expr::Path(p) => self.lower_path(p),
            syn::Expr::Unary(u) => self.lower_unary(u, want),
            syn::Expr::Binary(b) => self.lower_binary(b, want),
            syn::Expr::Assign(a) => {
                let place = self.lower_place(&a.left)?;
                let pty = self.place_type(&place);
                let v = self.lower_expr(&a.right, Some(pty))?;
                let target = self.text(&a.left);
                let v = self.coerce(v, pty, &a.right, &format!("`{}`", target))?;
                self.store_place(place, v, sp);
                Ok(self.unit())
            }
            syn::Expr::Cast(c) => {
                let to = parse_type(&c.ty)?;
                let v = self.lower_expr(&c.expr, if is_literal(&c.expr) { Some(to) } else { None })?;
                if v.ty == to {
                    return Ok(v);
                }
                if v.ty.components() != to.components() || matches!(to, Type::Matrix(_)) || v.ty == Type::Void {
                    return Err(err(e, format!("cannot convert {} to {} with `as`", v.ty, to)));
                }
                Ok(self.val(InstKind::Cast(v.id), to, sp))
            }
            syn::Expr::Field(f) => {
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
                if w.label.is_some() {
                    return Err(err(e, "loop labels are not supported"));
                }
                let body = self.nested(|s| {
                    let c = s.lower_expr(&w.cond, Some(Type::BOOL))?;
                    let c = s.cond(c, &w.cond)?;
                    let not = s.val(InstKind::Unary(UnaryOp::Not, c.id), Type::BOOL, sp);
                    let brk = s.nested(|s| {
                        s.emit(InstKind::Break, Type::Void, sp);
                        Ok(())
                    })?;
                    s.emit(InstKind::If { cond: not.id, accept: brk, reject: vec![] }, Type::Void, sp);
                    s.loop_depth += 1;
                    let r = s.lower_block_stmts(&w.body.stmts, None);
                    s.loop_depth -= 1;
                    r.map(|_| ())
                })?;
                self.emit(InstKind::Loop { body }, Type::Void, sp);
                Ok(self.unit())
            }
            syn::Expr::Loop(l) => {
                if l.label.is_some() {
                    return Err(err(e, "loop labels are not supported"));
                }
                let body = self.nested(|s| {
                    s.loop_depth += 1;
                    let r = s.lower_block_stmts(&l.body.stmts, None);
                    s.loop_depth -= 1;
                    r.map(|_| ())
                })?;
                self.emit(InstKind::Loop { body }, Type::Void, sp);
                Ok(self.unit())
            }
            syn::Expr::Break(b) => {
                if b.label.is_some() || b.expr.is_some() {
                    return Err(err(e, "`break` takes no label or value in kernel code"));
                }
                if self.loop_depth == 0 {
                    return Err(err(e, "`break` outside a loop"));
                }
                self.emit(InstKind::Break, Type::Void, sp);
                Ok(self.unit())
            }
            syn::Expr::Continue(c) => {
                if c.label.is_some() {
                    return Err(err(e, "`continue` takes no label in kernel code"));
                }
                if self.loop_depth == 0 {
                    return Err(err(e, "`continue` outside a loop"));
                }
                self.emit(InstKind::Continue, Type::Void, sp);
                Ok(self.unit())
            }
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
                self.emit(InstKind::Return(v), Type::Void, sp);
                Ok(self.unit())
            }
            syn::Expr::Tuple(t) if t.elems.is_empty() => Ok(self.unit()),
            syn::Expr::Tuple(_) | syn::Expr::Array(_) => Err(err(
                e,
                "tuples and arrays are only allowed as field indices, e.g. `x[(i, j)]`; use vecN(...) for values",
            )),
            syn::Expr::Range(_) => Err(err(e, "ranges are only allowed in `for` loops")),
            syn::Expr::Macro(_) => Err(err(e, "macros are not supported in kernel code")),
            syn::Expr::Reference(_) => Err(err(e, "references are not supported in kernel code")),
            syn::Expr::Closure(_) => Err(err(e, "closures are not supported; write a helper `fn`")),
            _ => Err(err(e, format!("`{}` is not supported in kernel code", self.text(e)))),
        }
    }

    fn unit(&self) -> Val {
        // A void value never reaches an operand: every consumer checks for Void first.
        Val {
            id: InstId::new(usize::MAX >> 40),
            ty: Type::Void,
        }
    }

    fn nested(&mut self, f: impl FnOnce(&mut Self) -> R<()>) -> R<Block> {
        self.blocks.push(Vec::new());
        let r = f(self);
        let b = self.blocks.pop().expect("nested block");
        r.map(|_| b)
    }

    fn cond<T: Spanned>(&mut self, c: Val, node: &T) -> R<Val> {
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

    fn lower_lit(&mut self, lit: &syn::Lit, want: Option<Type>) -> R<Val> {
        let sp = span_of(lit);
        let want_scalar = want.and_then(|t| t.scalar());
        match lit {
            syn::Lit::Int(i) => {
                let scalar = match i.suffix() {
                    "i32" => Scalar::I32,
                    "u32" => Scalar::U32,
                    "f32" => Scalar::F32,
                    "" => match want_scalar {
                        Some(s @ (Scalar::U32 | Scalar::F32 | Scalar::I32)) => s,
                        _ => Scalar::I32,
                    },
                    s => return Err(err(lit, format!("unsupported literal suffix `{}`", s))),
                };
                let v: u64 = i
                    .base10_parse()
                    .map_err(|_| err(lit, "integer literal out of range"))?;
                let c = match scalar {
                    Scalar::I32 if v <= i32::MAX as u64 => Const::i32(v as i32),
                    Scalar::U32 if v <= u32::MAX as u64 => Const::u32(v as u32),
                    Scalar::F32 => Const::f32(v as f32),
                    s => return Err(err(lit, format!("`{}` does not fit in {}", v, s.name()))),
                };
                Ok(self.konst(c, sp))
            }
            syn::Lit::Float(f) => {
                if !matches!(f.suffix(), "" | "f32") {
                    return Err(err(
                        lit,
                        format!(
                            "unsupported literal suffix `{}`; kernel floats are f32",
                            f.suffix()
                        ),
                    ));
                }
                let v: f32 = f
                    .base10_parse()
                    .map_err(|_| err(lit, "bad float literal"))?;
                Ok(self.konst(Const::f32(v), sp))
            }
            syn::Lit::Bool(b) => Ok(self.konst(Const::bool(b.value), sp)),
            _ => Err(err(lit, "only number and bool literals are supported")),
        }
    }

    fn lower_path(&mut self, p: &syn::ExprPath) -> R<Val> {
        let sp = span_of(p);
        let Some(ident) = p.path.get_ident() else {
            return Err(err(p, format!("unknown name `{}`", self.text(p))));
        };
        let name = ident.to_string();
        if let Some(b) = self.lookup(&name) {
            return Ok(match b {
                Binding::Value(v) => v,
                Binding::Local(l, ty) => self.val(InstKind::LocalLoad(l), ty, sp),
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

    fn lower_unary(&mut self, u: &syn::ExprUnary, want: Option<Type>) -> R<Val> {
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
            let signed_ctx = matches!(i.suffix(), "i32")
                || (i.suffix().is_empty()
                    && !matches!(
                        want.and_then(|t| t.scalar()),
                        Some(Scalar::F32 | Scalar::U32)
                    ));
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
                if v.ty.scalar() == Some(Scalar::F32) || v.ty == Type::Void {
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
    fn lower_pair(&mut self, l: &syn::Expr, r: &syn::Expr, want: Option<Type>) -> R<(Val, Val)> {
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

    fn splat(&mut self, v: Val, to: Type, sp: Span) -> Val {
        match to {
            Type::Vector(_, n) => self.val(InstKind::Construct(vec![v.id; n as usize]), to, sp),
            Type::Matrix(n) => {
                let col = self.splat(v, Type::Vector(Scalar::F32, n), sp);
                self.val(InstKind::Construct(vec![col.id; n as usize]), to, sp)
            }
            _ => v,
        }
    }

    fn lower_binary(&mut self, b: &syn::ExprBinary, want: Option<Type>) -> R<Val> {
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
    fn binary(
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
            BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor => s != Scalar::F32,
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

    /// `a && b` / `a || b` evaluate `b` only when needed (it may read fields out of range otherwise).
    fn lower_logical(&mut self, b: &syn::ExprBinary) -> R<Val> {
        let sp = span_of(b);
        let is_and = matches!(b.op, syn::BinOp::And(_));
        let l = self.lower_expr(&b.left, Some(Type::BOOL))?;
        let l = self.cond(l, &b.left)?;
        let tmp = self.func.locals.append(Local {
            name: "logic".into(),
            ty: Type::BOOL,
        });
        self.emit(InstKind::LocalStore(tmp, l.id), Type::Void, sp);
        let rhs = self.nested(|s| {
            let r = s.lower_expr(&b.right, Some(Type::BOOL))?;
            let r = s.cond(r, &b.right)?;
            s.emit(InstKind::LocalStore(tmp, r.id), Type::Void, sp);
            Ok(())
        })?;
        let (accept, reject) = if is_and { (rhs, vec![]) } else { (vec![], rhs) };
        self.emit(
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

    fn lower_compound(&mut self, b: &syn::ExprBinary, op: BinaryOp) -> R<Val> {
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
        // Parallel `+=` / `-=` on a whole field element are atomic, as in Taichi.
        if let Place::Field {
            field,
            ty,
            index,
            path,
        } = &place
        {
            if path.is_empty() && matches!(op, BinaryOp::Add | BinaryOp::Sub) {
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
                self.emit(
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
                    let zero = self.konst(
                        Const {
                            scalar: s,
                            bits: if s == Scalar::F32 {
                                0.0f32.to_bits()
                            } else {
                                0
                            },
                        },
                        sp,
                    );
                    let parts: Vec<InstId> = (0..n as u32)
                        .map(|k| if k == *c { v.id } else { zero.id })
                        .collect();
                    let delta = self.val(InstKind::Construct(parts), *ty, sp);
                    let aop = if op == BinaryOp::Add {
                        AtomicOp::Add
                    } else {
                        AtomicOp::Sub
                    };
                    self.emit(
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

    fn field_elem_name(&self, p: &Place) -> String {
        match p {
            Place::Field { ty, .. } => ty.to_string(),
            Place::Local { ty, .. } => ty.to_string(),
        }
    }

    fn field_port(&self, e: &syn::Expr) -> Option<(FieldId, Type, usize)> {
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
    fn lower_field_index(&mut self, idx: &syn::Expr, ndim: usize, fname: &str) -> R<Vec<InstId>> {
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
                    out.push(self.emit(InstKind::Cast(v.id), Type::I32, sp))
                }
                Type::Vector(s, n) if s.is_integer() => {
                    for c in 0..n {
                        let x = self.emit(InstKind::Extract(v.id, c as u32), Type::Scalar(s), sp);
                        out.push(if s == Scalar::U32 {
                            self.emit(InstKind::Cast(x), Type::I32, sp)
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
    fn check_unwired(&self, base: &syn::Expr) -> R<()> {
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

    fn lower_index(&mut self, ix: &syn::ExprIndex) -> R<Val> {
        let sp = span_of(ix);
        if let Some((field, ty, ndim)) = self.field_port(&ix.expr) {
            let name = self.text(&ix.expr);
            let index = self.lower_field_index(&ix.index, ndim, &name)?;
            return Ok(self.val(InstKind::FieldLoad { field, index }, ty, sp));
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

    fn const_int(&self, id: InstId) -> Option<i64> {
        match &self.func.insts[id].kind {
            InstKind::Const(c) if c.scalar == Scalar::I32 => Some(c.bits as i32 as i64),
            InstKind::Const(c) if c.scalar == Scalar::U32 => Some(c.bits as i64),
            _ => None,
        }
    }

    fn lower_member(&mut self, base: Val, member: &syn::Member, node: &syn::Expr) -> R<Val> {
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

    fn swizzle(&self, ty: Type, s: &str, node: &syn::Expr) -> R<Vec<u8>> {
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

    fn lower_place(&mut self, e: &syn::Expr) -> R<Place> {
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

    fn place_path<'p>(&self, p: &'p mut Place) -> &'p mut Vec<(Access, Type)> {
        match p {
            Place::Local { path, .. } | Place::Field { path, .. } => path,
        }
    }

    fn place_type(&self, p: &Place) -> Type {
        match p {
            Place::Local { ty, path, .. } | Place::Field { ty, path, .. } => {
                path.last().map(|x| x.1).unwrap_or(*ty)
            }
        }
    }

    fn load_root(&mut self, p: &Place, sp: Span) -> Val {
        match p {
            Place::Local { local, ty, .. } => self.val(InstKind::LocalLoad(*local), *ty, sp),
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

    fn access(&mut self, base: Val, acc: &Access, ty: Type, sp: Span) -> Val {
        match acc {
            Access::Const(i) => self.val(InstKind::Extract(base.id, *i), ty, sp),
            Access::Dyn(i) => self.val(InstKind::ExtractDyn(base.id, *i), ty, sp),
            Access::Swizzle(c) => self.val(InstKind::Swizzle(base.id, c.clone()), ty, sp),
        }
    }

    fn load_place(&mut self, p: &Place, sp: Span) -> Val {
        let mut v = self.load_root(p, sp);
        let path = match p {
            Place::Local { path, .. } | Place::Field { path, .. } => path.clone(),
        };
        for (acc, ty) in &path {
            v = self.access(v, acc, *ty, sp);
        }
        v
    }

    fn store_place(&mut self, p: Place, v: Val, sp: Span) {
        let path = match &p {
            Place::Local { path, .. } | Place::Field { path, .. } => path.clone(),
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
                self.emit(InstKind::LocalStore(local, new_root.id), Type::Void, sp);
            }
            Place::Field { field, index, .. } => {
                self.emit(
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

    // ---- calls ----

    fn lower_call(&mut self, c: &syn::ExprCall, want: Option<Type>) -> R<Val> {
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
                if v.ty.components() != to.components()
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
        if let Some(b) = Builtin::from_name(&name) {
            let vals = self.lower_builtin_args(b, &args, want, c)?;
            return self.builtin(b, vals, c);
        }
        if let Some(sig) = self.sigs.get(&name) {
            if args.len() != sig.args.len() {
                return Err(err(
                    c,
                    format!(
                        "`{}` takes {} argument(s), got {}",
                        name,
                        sig.args.len(),
                        args.len()
                    ),
                ));
            }
            let mut ids = Vec::new();
            for (k, a) in args.iter().enumerate() {
                let v = self.lower_expr(a, Some(sig.args[k]))?;
                let v = self.coerce(
                    v,
                    sig.args[k],
                    *a,
                    &format!("argument {} of `{}`", k + 1, name),
                )?;
                ids.push(v.id);
            }
            let (id, ret) = (sig.id, sig.ret);
            let call = self.emit(InstKind::Call(id, ids), ret, sp);
            return Ok(Val { id: call, ty: ret });
        }
        Err(err(&c.func, format!("unknown function `{}`", name)))
    }

    fn lower_method(&mut self, m: &syn::ExprMethodCall, want: Option<Type>) -> R<Val> {
        let name = m.method.to_string();
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

    fn lower_builtin_args<T: Spanned>(
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

    fn builtin<T: Spanned>(&mut self, b: Builtin, vals: Vec<Val>, node: &T) -> R<Val> {
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

    fn lower_constructor(&mut self, t: Type, args: &[&syn::Expr], node: &syn::ExprCall) -> R<Val> {
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
                        self.emit(InstKind::Construct(comps), Type::Vector(Scalar::F32, n), sp)
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
                        self.emit(
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

    fn lower_atomic(&mut self, opname: &str, args: &[&syn::Expr], c: &syn::ExprCall) -> R<Val> {
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

    // ---- control flow ----

    fn lower_if(&mut self, i: &syn::ExprIf, want: Option<Type>) -> R<Val> {
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
                    s.emit(InstKind::LocalStore(l, v.id), Type::Void, sp);
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
                            s.emit(InstKind::LocalStore(l, v.id), Type::Void, sp);
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
        self.emit(
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

    fn lower_for(&mut self, f: &syn::ExprForLoop) -> R<()> {
        let sp = span_of(f);
        if f.label.is_some() {
            return Err(err(f, "loop labels are not supported"));
        }
        // Accept `a..b`, `a..=b`, `(a..b).step_by(s)`.
        let (range, step) = match &*f.expr {
            syn::Expr::MethodCall(m) if m.method == "step_by" && m.args.len() == 1 => {
                (strip_paren(&m.receiver), Some(&m.args[0]))
            }
            other => (strip_paren(other), None),
        };
        let syn::Expr::Range(r) = range else {
            return Err(err(
                &f.expr,
                "`for` loops run over ranges: `for i in a..b` or `for i in (a..b).step_by(s)`",
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
        let for_id = self.func.insts.append(Inst {
            kind: InstKind::Break,
            ty: Type::Void,
            span: sp,
        });
        let body = self.nested(|s| {
            s.scopes.push(HashMap::new());
            let counter = s.val(InstKind::LoopCounter(for_id), b.ty, span_of(&f.pat));
            s.bind_pattern(&f.pat, counter)?;
            s.loop_depth += 1;
            let r = s.lower_block_stmts(&f.body.stmts, None);
            s.loop_depth -= 1;
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
        Ok(())
    }
}

fn strip_paren(e: &syn::Expr) -> &syn::Expr {
    match e {
        syn::Expr::Paren(p) => strip_paren(&p.expr),
        other => other,
    }
}
