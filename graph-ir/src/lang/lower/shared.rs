//! Workgroups: `#[block(N)]` on `fn kernel`, block-shared arrays
//! (`let tile = shared([0.0; 66]);`), `barrier()`, `thread_index()` and
//! `block_index()`.
//!
//! A kernel with `#[block(N)]` runs in blocks of N consecutive invocations
//! of its range (row-major order). Their shared arrays become
//! `Workgroup::arrays` and their accesses `SharedLoad` / `SharedStore`,
//! each run-time index checked while running (`IndexCheck`, the local
//! array fault). What makes a barrier safe is settled here, in the source,
//! so that every backend gets the same rule and the IR only needs "at the
//! top level of the entry":
//! - `barrier()` is called in `fn kernel` only, never inside `if`,
//!   `match`, `while`, `loop`, a closure or the right side of `&&` / `||`
//!   (places where some invocations of a block could skip it while others
//!   wait), and a `#[block(N)]` kernel has no `return`;
//! - a `for` loop around a barrier has constant bounds and is unrolled
//!   here, with no `break` or `continue` of its own;
//! - a shared array is declared at the top level of `fn kernel`; its
//!   declaration fills it (each invocation a strided share) and ends with
//!   a barrier, so it holds its initial value on every backend.

use super::*;
use syn::visit::Visit;

/// One declared shared array: its index in `Workgroup::arrays`.
#[derive(Clone, Copy)]
pub(super) struct SharedVar {
    pub id: SharedId,
    pub elem: Type,
    pub len: u32,
}

/// The most iterations a `for` loop around `barrier()` may unroll to.
const MAX_BARRIER_LOOP: i64 = 256;

/// `#[block(N)]` on the entry: the block size, checked.
pub(super) fn block_attr(f: &syn::ItemFn, consts: &HashMap<String, Const>) -> R<Option<u32>> {
    let mut out = None;
    for a in &f.attrs {
        if !a.path().is_ident("block") {
            return Err(err(
                a,
                "the only attribute kernel code takes is `#[block(N)]` on `fn kernel`",
            ));
        }
        let e: syn::Expr = a
            .parse_args()
            .map_err(|_| err(a, "write the block size as `#[block(64)]`"))?;
        let n = count(&e, consts)?;
        if n < 1 || n > MAX_WORKGROUP as i64 {
            return Err(err(
                &e,
                format!("a block has 1 to {} invocations, not {}", MAX_WORKGROUP, n),
            ));
        }
        if out.replace(n as u32).is_some() {
            return Err(err(a, "`#[block(N)]` is given twice"));
        }
    }
    Ok(out)
}

/// An integer literal or `const` item (a block size, a shared length).
fn count(e: &syn::Expr, consts: &HashMap<String, Const>) -> R<i64> {
    let n = match strip_paren(e) {
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
    n.ok_or_else(|| err(e, "write an integer literal or a `const` item here"))
}

/// Refuses attributes on helpers and workgroup built-ins outside a
/// `#[block(N)]` kernel's entry, and barriers that some invocations of a
/// block could skip (see the module comment).
pub(super) fn check_code(fns: &[&syn::ItemFn], entry_pos: usize, block: Option<u32>) -> R<()> {
    for (n, f) in fns.iter().enumerate() {
        if n != entry_pos {
            if let Some(a) = f.attrs.first() {
                return Err(err(a, "`#[block(N)]` belongs on `fn kernel`"));
            }
        }
        let mut v = BarrierCheck {
            in_entry: n == entry_pos,
            block,
            divergent: Vec::new(),
            loops: Vec::new(),
            error: None,
        };
        v.visit_block(&f.block);
        if let Some(e) = v.error {
            return Err(e);
        }
    }
    Ok(())
}

/// Whether `b` calls `barrier()` anywhere.
pub(super) fn contains_barrier(b: &syn::Block) -> bool {
    struct Find(bool);
    impl<'a> Visit<'a> for Find {
        fn visit_expr_call(&mut self, c: &'a syn::ExprCall) {
            self.0 |= call_name(c) == Some("barrier");
            syn::visit::visit_expr_call(self, c);
        }
    }
    let mut f = Find(false);
    f.visit_block(b);
    f.0
}

fn call_name(c: &syn::ExprCall) -> Option<&'static str> {
    let syn::Expr::Path(p) = &*c.func else {
        return None;
    };
    let id = p.path.get_ident()?;
    ["barrier", "shared", "thread_index", "block_index"]
        .into_iter()
        .find(|n| id == n)
}

struct BarrierCheck {
    in_entry: bool,
    block: Option<u32>,
    /// Enclosing constructs that some invocations may skip, innermost last.
    divergent: Vec<&'static str>,
    /// Enclosing loops: (label, contains a barrier).
    loops: Vec<(Option<String>, bool)>,
    error: Option<CodeError>,
}

impl BarrierCheck {
    fn fail<T: Spanned>(&mut self, node: &T, m: String) {
        if self.error.is_none() {
            self.error = Some(err(node, m));
        }
    }
    fn under<F: FnOnce(&mut Self)>(&mut self, what: &'static str, f: F) {
        self.divergent.push(what);
        f(self);
        self.divergent.pop();
    }
    fn jump<T: Spanned>(&mut self, node: &T, label: Option<&syn::Lifetime>, what: &str) {
        let target = match label {
            None => self.loops.last(),
            Some(l) => {
                let name = l.ident.to_string();
                self.loops
                    .iter()
                    .rev()
                    .find(|(n, _)| n.as_deref() == Some(&name))
            }
        };
        if target.is_some_and(|(_, barrier)| *barrier) {
            self.fail(
                node,
                format!(
                    "`{}` out of a `for` loop that contains barrier(): such a loop is unrolled so that every invocation of the block reaches each barrier, and cannot be left early",
                    what
                ),
            );
        }
    }
}

impl<'a> Visit<'a> for BarrierCheck {
    fn visit_expr_call(&mut self, c: &'a syn::ExprCall) {
        if let Some(name) = call_name(c) {
            if !self.in_entry {
                self.fail(
                    c,
                    format!(
                        "`{}()` can only be used in `fn kernel`, not in a helper",
                        name
                    ),
                );
            } else if self.block.is_none() {
                self.fail(
                    c,
                    format!(
                        "`{}()` needs a block size: put `#[block(64)]` (1 to {}) on `fn kernel`",
                        name, MAX_WORKGROUP
                    ),
                );
            } else if name == "barrier" {
                if let Some(d) = self.divergent.last() {
                    let d = *d;
                    self.fail(
                        c,
                        format!(
                            "barrier() inside {}: every invocation of a block must reach each barrier, so barriers stand outside conditions (a `for` loop with constant bounds is fine)",
                            d
                        ),
                    );
                }
            } else if name == "shared" && !self.divergent.is_empty() {
                self.fail(
                    c,
                    "a shared array is declared at the top level of `fn kernel`".into(),
                );
            }
        }
        syn::visit::visit_expr_call(self, c);
    }
    fn visit_expr_if(&mut self, i: &'a syn::ExprIf) {
        self.under("`if`", |s| syn::visit::visit_expr_if(s, i));
    }
    fn visit_expr_match(&mut self, m: &'a syn::ExprMatch) {
        self.under("`match`", |s| syn::visit::visit_expr_match(s, m));
    }
    fn visit_expr_while(&mut self, w: &'a syn::ExprWhile) {
        let label = w.label.as_ref().map(|l| l.name.ident.to_string());
        self.loops.push((label, false));
        self.under("`while`", |s| syn::visit::visit_expr_while(s, w));
        self.loops.pop();
    }
    fn visit_expr_loop(&mut self, l: &'a syn::ExprLoop) {
        let label = l.label.as_ref().map(|l| l.name.ident.to_string());
        self.loops.push((label, false));
        self.under("`loop`", |s| syn::visit::visit_expr_loop(s, l));
        self.loops.pop();
    }
    fn visit_expr_for_loop(&mut self, f: &'a syn::ExprForLoop) {
        let label = f.label.as_ref().map(|l| l.name.ident.to_string());
        let barrier = contains_barrier(&f.body);
        self.loops.push((label, barrier));
        if barrier {
            syn::visit::visit_expr_for_loop(self, f);
        } else {
            self.under("a `for` loop", |s| syn::visit::visit_expr_for_loop(s, f));
        }
        self.loops.pop();
    }
    fn visit_expr_closure(&mut self, c: &'a syn::ExprClosure) {
        self.under("a closure", |s| syn::visit::visit_expr_closure(s, c));
    }
    fn visit_expr_binary(&mut self, b: &'a syn::ExprBinary) {
        if matches!(b.op, syn::BinOp::And(_) | syn::BinOp::Or(_)) {
            self.visit_expr(&b.left);
            self.under("the right side of `&&` / `||`", |s| s.visit_expr(&b.right));
        } else {
            syn::visit::visit_expr_binary(self, b);
        }
    }
    fn visit_expr_return(&mut self, r: &'a syn::ExprReturn) {
        if self.in_entry && self.block.is_some() {
            self.fail(
                r,
                "`return` is not allowed in a `#[block(N)]` kernel: every invocation of a block runs to its end (wrap the rest in `if` instead)".into(),
            );
        }
        syn::visit::visit_expr_return(self, r);
    }
    fn visit_expr_break(&mut self, b: &'a syn::ExprBreak) {
        self.jump(b, b.label.as_ref(), "break");
        syn::visit::visit_expr_break(self, b);
    }
    fn visit_expr_continue(&mut self, c: &'a syn::ExprContinue) {
        self.jump(c, c.label.as_ref(), "continue");
    }
}

impl<'a> FnLowerer<'a> {
    /// The shared array `e` names, if it is one.
    pub(super) fn shared_named(&self, e: &syn::Expr) -> Option<SharedVar> {
        let syn::Expr::Path(p) = strip_paren(e) else {
            return None;
        };
        match self.lookup(&p.path.get_ident()?.to_string()) {
            Some(Binding::Shared(v)) => Some(v),
            _ => None,
        }
    }

    /// Whether `init` declares a shared array (`shared(...)`).
    pub(super) fn is_shared_let(init: &syn::Expr) -> bool {
        matches!(strip_paren(init), syn::Expr::Call(c) if call_name(c) == Some("shared"))
    }

    /// `let [mut] name = shared([x; N]);`: declares the array, then fills
    /// it (invocation t of the block stores elements t, t + B, ...) and
    /// waits at a barrier, so every element holds `x` before any use.
    pub(super) fn lower_shared_let(&mut self, pat: &syn::Pat, init: &syn::Expr) -> R<()> {
        let sp = span_of(init);
        let syn::Expr::Call(c) = strip_paren(init) else {
            return Err(err(init, "expected `shared([value; N])`"));
        };
        let name = match pat {
            syn::Pat::Ident(pi) => pi.ident.to_string(),
            p => return Err(err(p, "a shared array is bound to a plain name")),
        };
        let Some(block) = self.block else {
            return Err(err(
                c,
                "`shared()` needs a block size: put `#[block(64)]` on `fn kernel`",
            ));
        };
        if !self.is_entry || self.blocks.len() != 1 {
            return Err(err(
                c,
                "a shared array is declared at the top level of `fn kernel`",
            ));
        }
        let [arg] = c.args.iter().collect::<Vec<_>>()[..] else {
            return Err(err(c, "`shared` takes one array: `shared([0.0; 64])`"));
        };
        let syn::Expr::Repeat(r) = strip_paren(arg) else {
            return Err(err(
                arg,
                "a shared array starts as one repeated value: `shared([0.0; 64])`",
            ));
        };
        let len = count(&r.len, self.consts)?;
        if len < 1 || len > MAX_SHARED_WORDS as i64 {
            return Err(err(
                &r.len,
                format!(
                    "a shared array has 1 to {} elements, not {}",
                    MAX_SHARED_WORDS, len
                ),
            ));
        }
        let len = len as u32;
        let x = self.lower_expr(&r.expr, None)?;
        let number = matches!(x.ty, Type::Scalar(_) | Type::Vector(..))
            && x.ty.scalar().is_some_and(Scalar::is_numeric);
        if !number || !self.is_constant(x.id) {
            return Err(err(
                &r.expr,
                "a shared array's initial value is a constant number or vector of numbers (e.g. `0.0`, `0u32`, `vec2(0.0, 0.0)`)",
            ));
        }
        if x.ty.is_wide() {
            return Err(err(
                &r.expr,
                format!(
                    "shared arrays hold 32-bit values; {} is 64-bit (keep it in a local, or split it with `bitcast::<uvec2>`)",
                    x.ty
                ),
            ));
        }
        let words: u32 = self
            .shared
            .iter()
            .map(SharedArray::words)
            .sum::<u32>()
            .saturating_add(len.saturating_mul(x.ty.components() as u32));
        if words > MAX_SHARED_WORDS {
            return Err(err(
                init,
                format!(
                    "the kernel's shared arrays would need {} bytes; a block has {} (WebGPU's limit)",
                    words as u64 * 4,
                    MAX_SHARED_WORDS * 4
                ),
            ));
        }
        let id = self.shared.len() as SharedId;
        self.shared.push(SharedArray {
            name: name.clone(),
            ty: x.ty,
            len,
        });
        self.bind(
            name,
            Binding::Shared(SharedVar {
                id,
                elem: x.ty,
                len,
            }),
        );
        // Invocation t fills elements r * block + t for r in 0..rounds: a
        // loop whose bounds are the same for the whole block, so the
        // barrier after it stays in uniform control flow (WGSL refuses a
        // barrier after a loop each invocation leaves at its own trip).
        let t = self.thread_index(sp, block);
        let rounds = len.div_ceil(block);
        let zero = self.konst(Const::i32(0), sp);
        let end = self.konst(Const::i32(rounds as i32), sp);
        let one = self.konst(Const::i32(1), sp);
        let for_id = self.func.detached(InstKind::Break, Type::Void, sp);
        let body = self.nested(|s| {
            let r = s.val(InstKind::LoopCounter(for_id), Type::I32, sp);
            let b = s.konst(Const::i32(block as i32), sp);
            let rb = s.val(InstKind::Binary(BinaryOp::Mul, r.id, b.id), Type::I32, sp);
            let k = s.val(InstKind::Binary(BinaryOp::Add, rb.id, t.id), Type::I32, sp);
            let store = |s: &mut Self| {
                s.emit_at(
                    InstKind::SharedStore {
                        array: id,
                        index: k.id,
                        value: x.id,
                    },
                    Type::Void,
                    sp,
                );
                Ok(())
            };
            if len.is_multiple_of(block) {
                store(s)
            } else {
                // The last round covers the array's end only.
                let n = s.konst(Const::i32(len as i32), sp);
                let inside = s.val(InstKind::Binary(BinaryOp::Lt, k.id, n.id), Type::BOOL, sp);
                let accept = s.nested(store)?;
                s.emit_at(
                    InstKind::If {
                        cond: inside.id,
                        accept,
                        reject: vec![],
                    },
                    Type::Void,
                    sp,
                );
                Ok(())
            }
        })?;
        self.func.insts[for_id].kind = InstKind::RangeFor {
            begin: zero.id,
            end: end.id,
            step: one.id,
            inclusive: false,
            body,
        };
        self.blocks.last_mut().expect("open block").push(for_id);
        self.emit_at(InstKind::Barrier, Type::Void, sp);
        Ok(())
    }

    /// Whether `id` is built from constants only.
    fn is_constant(&self, id: InstId) -> bool {
        match &self.func.insts[id].kind {
            InstKind::Const(_) => true,
            InstKind::Construct(parts) => parts.iter().all(|&p| self.is_constant(p)),
            InstKind::Unary(_, a) | InstKind::Cast(a) => self.is_constant(*a),
            _ => false,
        }
    }

    /// This invocation's index in its block (i32, `0..block`).
    pub(super) fn thread_index(&mut self, sp: Span, block: u32) -> Val {
        let lin = self.val(InstKind::Launch(LaunchValue::Linear), Type::U32, sp);
        let b = self.konst(Const::u32(block), sp);
        let t = self.val(InstKind::Binary(BinaryOp::Rem, lin.id, b.id), Type::U32, sp);
        self.val(InstKind::Cast(t.id), Type::I32, sp)
    }

    /// The built-ins of this file: `barrier()`, `thread_index()`,
    /// `block_index()` (`shared` is only a `let`).
    pub(super) fn lower_workgroup_call(&mut self, c: &syn::ExprCall, name: &str) -> R<Val> {
        let sp = span_of(c);
        if !c.args.is_empty() {
            return Err(err(c, format!("`{}` takes no arguments", name)));
        }
        // `check_code` has refused every other use already.
        let Some(block) = self.block.filter(|_| self.is_entry) else {
            return Err(err(
                c,
                format!("`{}()` needs `#[block(N)]` on `fn kernel`", name),
            ));
        };
        match name {
            "barrier" => {
                self.emit_at(InstKind::Barrier, Type::Void, sp);
                Ok(self.unit())
            }
            "thread_index" => Ok(self.thread_index(sp, block)),
            "block_index" => {
                let lin = self.val(InstKind::Launch(LaunchValue::Linear), Type::U32, sp);
                let b = self.konst(Const::u32(block), sp);
                let q = self.val(InstKind::Binary(BinaryOp::Div, lin.id, b.id), Type::U32, sp);
                Ok(self.val(InstKind::Cast(q.id), Type::I32, sp))
            }
            _ => Err(err(
                c,
                "a shared array is declared with `let name = shared([0.0; N]);`",
            )),
        }
    }

    /// `name[index]` of a shared array: the index as i32, checked now when
    /// constant, else while running.
    pub(super) fn shared_index(&mut self, v: SharedVar, index: &syn::Expr) -> R<InstId> {
        Ok(self.checked_index(index, v.len, "a shared array")?.0)
    }

    /// A `for` loop whose body calls `barrier()`: unrolled, each iteration
    /// lowered at the current level with the counter a constant, so the
    /// barriers land at the top level of the entry.
    pub(super) fn lower_unrolled_for(
        &mut self,
        f: &syn::ExprForLoop,
        (b, e, st): (Val, Val, Val),
        inclusive: bool,
    ) -> R<()> {
        let (Some(b0), Some(e0), Some(s0)) = (
            self.fold_int(b.id),
            self.fold_int(e.id),
            self.fold_int(st.id),
        ) else {
            return Err(err(
                &f.expr,
                "a `for` loop around barrier() needs constant bounds and step (it is unrolled so that every invocation of the block reaches each barrier)",
            ));
        };
        if s0 <= 0 {
            return Err(err(&f.expr, "`step_by` needs a positive step"));
        }
        let last = if inclusive { e0 } else { e0 - 1 };
        let count = if last < b0 { 0 } else { (last - b0) / s0 + 1 };
        if count > MAX_BARRIER_LOOP {
            return Err(err(
                &f.expr,
                format!(
                    "a `for` loop around barrier() is unrolled and may run at most {} times, not {}",
                    MAX_BARRIER_LOOP, count
                ),
            ));
        }
        let s = b.ty.scalar().expect("an integer range");
        for k in 0..count {
            let v = b0 + k * s0;
            self.scopes.push(HashMap::new());
            let c = self.konst(
                Const {
                    scalar: s,
                    bits: v as u64 & s.mask(),
                },
                span_of(&f.pat),
            );
            let r = self
                .bind_pattern(&f.pat, c)
                .and_then(|_| self.lower_block_stmts(&f.body.stmts, None));
            self.scopes.pop();
            r?;
        }
        Ok(())
    }

    /// The value of an integer expression built from constants.
    fn fold_int(&self, id: InstId) -> Option<i64> {
        let inst = &self.func.insts[id];
        let s = inst.ty.scalar().filter(|s| s.is_integer())?;
        let bits = |v: i64| v as u64 & s.mask();
        let v = match &inst.kind {
            InstKind::Const(_) => return self.const_int(id),
            InstKind::Unary(op, a) => eval::unary(*op, s, bits(self.fold_int(*a)?)),
            InstKind::Binary(op, a, b) if !op.is_comparison() => {
                eval::binary(*op, s, bits(self.fold_int(*a)?), bits(self.fold_int(*b)?))
            }
            InstKind::Cast(a) => {
                let from = self.func.insts[*a].ty.scalar()?;
                eval::cast(from, s, bits(self.fold_int(*a)?))
            }
            _ => return None,
        };
        Some(if s == Scalar::I32 {
            v as i32 as i64
        } else {
            v as i64
        })
    }
}
