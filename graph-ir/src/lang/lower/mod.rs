//! Type-checks kernel code and lowers it to IR.
//!
//! Pre: `code` is the text of one kernel node. Post: a `LoweredKernel` whose
//! functions validate (`ir::validate_kernel`), or the first error at its
//! line:col in plain words. Literals take their type from context (`x * 2`
//! with `x: f32` makes `2` an f32); otherwise operand types must match and the
//! user converts with `as`. Helper functions become IR functions (the inline
//! pass decides later which to inline); recursion is rejected here.
//!
//! One file per job: this file checks signatures and recursion and defines
//! the per-function lowering state; `function.rs` lowers statements and
//! control flow, `expr.rs` operators, literals and the typing rules of
//! operands, `places.rs` field and vector element access (loads, stores,
//! compound assignment targets), `calls.rs` helper calls, built-ins,
//! constructors and atomics, `flow.rs` loop labels and `match` (lowered to
//! plain `if`/`break`/`continue`), `consts.rs` `const` items (evaluated here,
//! at compile time), `arrays.rs` local arrays (scalarised here into one local
//! per element), `structs.rs` `struct` items and the front end's aggregate
//! types, `aggregates.rs` struct, tuple and whole-array values (scalarised
//! into one local or value per leaf; helpers returning them are inlined).

use super::source::{snippet, span_of};
use super::{parse, CodeError};
use crate::arena::Arena;
use crate::ir::*;
use crate::lower::emit::Build;
use crate::types::{Scalar, Type};
use std::collections::HashMap;
use syn::spanned::Spanned;

mod aggregates;
mod arrays;
mod calls;
mod consts;
mod expr;
mod flow;
mod function;
pub mod mesh_query;
mod places;
mod shared;
mod structs;

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
    /// `Some` for a `#[block(N)]` kernel: its size and shared arrays.
    pub workgroup: Option<Workgroup>,
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
    /// The IR function; `None` for a helper returning an aggregate, which
    /// is inlined at each call instead (IR calls have one plain result).
    id: Option<FuncId>,
    /// The IR function's arguments: each declared parameter's leaves (an
    /// array `[T; N]` as N arguments of type T, a struct field by field).
    args: Vec<Type>,
    /// The declared parameters' types.
    params: Vec<structs::Ty>,
    ret: structs::Ty,
    /// The helper's position in `Decls::items`.
    item: usize,
}

/// Everything declared at the top level of the code, shared by the
/// lowering of every function.
struct Decls<'a> {
    sigs: HashMap<String, Sig>,
    consts: HashMap<String, Const>,
    structs: structs::Structs,
    items: Vec<&'a syn::ItemFn>,
}

pub fn lower_kernel(code: &str, env: &KernelEnv) -> R<LoweredKernel> {
    let mut file = parse(code)?;
    mesh_query::expand(&mut file, env)?;
    let mut fns: Vec<&syn::ItemFn> = Vec::new();
    let mut const_items: Vec<&syn::ItemConst> = Vec::new();
    let mut struct_items: Vec<&syn::ItemStruct> = Vec::new();
    for item in &file.items {
        match item {
            syn::Item::Fn(f) => fns.push(f),
            syn::Item::Const(c) => const_items.push(c),
            syn::Item::Struct(s) => struct_items.push(s),
            other => {
                return Err(err(
                    other,
                    "only `fn`, `struct` and `const` items are allowed in kernel code",
                ))
            }
        }
    }
    let consts = consts::eval_consts(code, &const_items)?;
    let structs = structs::declare_structs(&struct_items, &consts)?;
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
    let block = shared::block_attr(fns[entry_pos], &consts)?;
    shared::check_code(&fns, entry_pos, block)?;
    // Signatures first, so helpers may call each other in any order.
    let mut sigs: HashMap<String, Sig> = HashMap::new();
    let mut helper_order = Vec::new();
    let mut inlined = Vec::new();
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
        let mut params = Vec::new();
        for input in &f.sig.inputs {
            match input {
                syn::FnArg::Typed(pt) => {
                    let t = structs.parse(&pt.ty, &consts)?;
                    structs.leaves(&t, &mut args);
                    params.push(t);
                }
                syn::FnArg::Receiver(r) => {
                    return Err(err(r, "`self` is not allowed in kernel code"))
                }
            }
        }
        let ret = match &f.sig.output {
            syn::ReturnType::Default => structs::Ty::Plain(Type::Void),
            syn::ReturnType::Type(_, t) => structs.parse(t, &consts)?,
        };
        let id = if ret.is_plain() {
            helper_order.push(n);
            Some(FuncId::new(helper_order.len() - 1))
        } else {
            inlined.push(n);
            None
        };
        sigs.insert(
            name,
            Sig {
                id,
                args,
                params,
                ret,
                item: n,
            },
        );
    }
    check_recursion(&fns, &sigs)?;
    let decls = Decls {
        sigs,
        consts,
        structs,
        items: fns.clone(),
    };

    let mut functions = Arena::new();
    for &n in &helper_order {
        let f = fns[n];
        let sig = &decls.sigs[&f.sig.ident.to_string()];
        // Only helpers with plain results are in `helper_order`.
        let ret = match sig.ret {
            structs::Ty::Plain(t) => t,
            _ => Type::Void,
        };
        let func = Function::new(
            &f.sig.ident.to_string(),
            sig.args.clone(),
            ret,
            span_of(&f.sig.ident),
        );
        let (lowered, _) = FnLowerer::new(code, env, &decls, func, false).lower_fn(f)?;
        functions.append(lowered);
    }
    // Helpers returning aggregates are inlined where called; checked here
    // on their own too, so an uncalled one still reports its errors.
    for &n in &inlined {
        let f = fns[n];
        let sig = &decls.sigs[&f.sig.ident.to_string()];
        let func = Function::new(
            &f.sig.ident.to_string(),
            sig.args.clone(),
            Type::Void,
            span_of(&f.sig.ident),
        );
        FnLowerer::new(code, env, &decls, func, false).check_inlined_helper(f)?;
    }
    let ef = fns[entry_pos];
    let entry_args = entry_arg_types(ef, env.dims)?;
    let func = Function::new(
        ENTRY_NAME,
        vec![Type::I32; env.dims],
        Type::Void,
        span_of(&ef.sig.ident),
    );
    let mut lw = FnLowerer::new(code, env, &decls, func, true);
    lw.entry_vector_arg = entry_args;
    lw.block = block;
    let (entry, arrays) = lw.lower_fn(ef)?;
    let workgroup = block.map(|size| Workgroup { size, arrays });
    Ok(LoweredKernel {
        entry,
        functions,
        workgroup,
    })
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
    "barrier",
    "shared",
    "thread_index",
    "block_index",
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
    if let Some((bits, signed)) = expr::narrow_suffix(&text) {
        let (wide, range) = if signed {
            (
                "i32",
                format!("{}..={}", -(1i64 << (bits - 1)), (1i64 << (bits - 1)) - 1),
            )
        } else {
            ("u32", format!("0..={}", (1i64 << bits) - 1))
        };
        return Err(err(
            t,
            format!(
                "`{}` is a storage and conversion type, not a compute type: `x as {}` gives a {} in {}; declare {} here",
                text, text, wide, range, wide
            ),
        ));
    }
    Type::parse(&text).ok_or_else(|| {
        err(t, format!("unknown type `{}`; use i32, u32, f32, f16, bool, vecN, ivecN, uvecN, bvecN, vecN<f16> or matN (N = 2..4)", text))
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
    /// A local array: an index into `FnLowerer::arrays`.
    Array(usize),
    /// A block-shared array (`shared.rs`).
    Shared(shared::SharedVar),
    /// A struct or tuple variable: an index into `FnLowerer::aggs`.
    Agg(usize),
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
    /// An element of a local array (`ty` is the element type).
    Array {
        array: usize,
        index: arrays::ArrayIndex,
        ty: Type,
        path: Vec<(Access, Type)>,
    },
    /// An element of a block-shared array (`index` is checked already).
    Shared {
        array: SharedId,
        index: InstId,
        ty: Type,
        path: Vec<(Access, Type)>,
    },
}

struct FnLowerer<'a> {
    code: &'a str,
    env: &'a KernelEnv<'a>,
    sigs: &'a HashMap<String, Sig>,
    /// `const` items, evaluated.
    consts: &'a HashMap<String, Const>,
    structs: &'a structs::Structs,
    /// Every `fn` item of the code (an inlined helper's body is read here).
    items: &'a [&'a syn::ItemFn],
    func: Function,
    blocks: Vec<Block>,
    scopes: Vec<HashMap<String, Binding>>,
    /// Enclosing loops, innermost last (labels and their flags).
    loops: Vec<flow::LoopFrame>,
    is_entry: bool,
    entry_vector_arg: bool,
    /// The local arrays declared so far (`Binding::Array` indexes here).
    arrays: Vec<arrays::ArrayVar>,
    /// The entry's `#[block(N)]`, if any.
    block: Option<u32>,
    /// Shared arrays declared so far (`SharedId` indexes here).
    shared: Vec<SharedArray>,
    /// The struct and tuple variables so far (`Binding::Agg` indexes here).
    aggs: Vec<aggregates::AggVar>,
    /// Set while the body of a helper returning an aggregate is inlined.
    inline_ret: Option<aggregates::InlineRet>,
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

fn strip_paren(e: &syn::Expr) -> &syn::Expr {
    match e {
        syn::Expr::Paren(p) => strip_paren(&p.expr),
        other => other,
    }
}
