//! Rewrites `break`, `continue`, early `return` and `loop`/`while` of a
//! kernel's entry into forms the adjoint generator handles exactly: flags
//! and range loops. Applied to a copy of the kernel used only to build its
//! adjoint; the forward kernel keeps its own control flow.
//!
//! - `break` / `continue` / `return` set a bool local (per loop: `brk`,
//!   `cont`; per kernel: `ret`) and the rest of every enclosing block up to
//!   the loop (or the kernel) runs under `if !(flags)`. A loop body that
//!   can break or return runs under `if !(brk || ret)`, so the remaining
//!   iterations of a range loop do nothing.
//! - `loop { B }` (and `while c { B }`, which the front end lowers to a
//!   `loop` starting with `if !c { break; }`) becomes: snapshot of the
//!   locals B touches; a **counting loop** `loop { if brk || ret { break; }
//!   n += 1; B' }` whose only job is to find the trip count n; restore the
//!   snapshot; then `for _ in 0..n { B' }`, a range loop that recomputes
//!   the same iterations (B' is the flag form of B). The adjoint generator
//!   recomputes the counting loop forward and never reverses it (its effects
//!   on locals are undone by the restore, and the range loop redoes them);
//!   it differentiates the range loop, carried locals included, as any other.
//!
//! Pre: abstract IR of a kernel entry (helpers inlined). Post: no `break`,
//! `continue` or `return` except the final `return` of the entry and the
//! `break` of counting loops; every `loop` is a counting loop.

use crate::ir::*;
use crate::types::Type;
use std::collections::HashMap;

struct Cx<'a> {
    f: &'a mut Function,
    ret: LocalId,
    /// Returns rewritten so far (to know whether a loop body can return).
    returns: usize,
}

#[derive(Clone, Copy)]
struct Flags {
    brk: Option<LocalId>,
    cont: Option<LocalId>,
}

/// Whether `b` (not looking into nested loops for `break`/`continue`) has an
/// exit that this rewrite handles.
fn has_exit(f: &Function, b: &Block, in_nested_loop: bool) -> bool {
    b.iter().any(|&i| match &f.insts[i].kind {
        InstKind::Break | InstKind::Continue => !in_nested_loop,
        InstKind::Return(_) => true,
        InstKind::Loop { .. } => true,
        InstKind::RangeFor { body, .. } => has_exit(f, body, true),
        InstKind::If { accept, reject, .. } => {
            has_exit(f, accept, in_nested_loop) || has_exit(f, reject, in_nested_loop)
        }
        _ => false,
    })
}

/// Whether `b` has any exit or `loop` at any depth.
fn any_exit(f: &Function, b: &Block) -> bool {
    b.iter().any(|&i| {
        matches!(
            f.insts[i].kind,
            InstKind::Break | InstKind::Continue | InstKind::Return(_) | InstKind::Loop { .. }
        ) || f.insts[i].kind.blocks().iter().any(|nb| any_exit(f, nb))
    })
}

/// Rewrites `f`'s entry in place; returns whether anything changed.
pub(super) fn lower(f: &mut Function) -> bool {
    let mut body = std::mem::take(&mut f.body);
    let last = match body.last() {
        Some(&r) if matches!(f.insts[r].kind, InstKind::Return(_)) => body.pop(),
        _ => None,
    };
    if !any_exit(f, &body) {
        body.extend(last);
        f.body = body;
        return false;
    }
    let ret = f.locals.append(Local {
        name: "ad_ret".into(),
        ty: Type::BOOL,
    });
    let span = body.first().map(|&i| f.insts[i].span).unwrap_or_default();
    let mut cx = Cx { f, ret, returns: 0 };
    let mut out = Vec::new();
    cx.set(&mut out, ret, false, span);
    let flags = Flags {
        brk: None,
        cont: None,
    };
    cx.block(body, flags, &mut out);
    out.extend(last);
    cx.f.body = out;
    true
}

impl Cx<'_> {
    fn emit(&mut self, out: &mut Block, kind: InstKind, ty: Type, span: Span) -> InstId {
        crate::lower::emit::append(self.f, out, kind, ty, span)
    }
    fn set(&mut self, out: &mut Block, l: LocalId, v: bool, span: Span) {
        let c = self.emit(out, InstKind::Const(Const::bool(v)), Type::BOOL, span);
        self.emit(out, InstKind::LocalStore(l, c), Type::Void, span);
    }
    fn bool_local(&mut self, name: &str) -> LocalId {
        self.f.locals.append(Local {
            name: name.into(),
            ty: Type::BOOL,
        })
    }
    /// `!(a || b || ...)` of the flags.
    fn none_set(&mut self, out: &mut Block, flags: &[LocalId], span: Span) -> InstId {
        let mut acc: Option<InstId> = None;
        for &l in flags {
            let v = self.emit(out, InstKind::LocalLoad(l), Type::BOOL, span);
            acc = Some(match acc {
                None => v,
                Some(a) => self.emit(
                    out,
                    InstKind::Binary(BinaryOp::LogicalOr, a, v),
                    Type::BOOL,
                    span,
                ),
            });
        }
        let any = acc.expect("at least one flag");
        self.emit(out, InstKind::Unary(UnaryOp::Not, any), Type::BOOL, span)
    }
    fn guard(&mut self, out: &mut Block, flags: &[LocalId], rest: Block, span: Span) {
        if rest.is_empty() {
            return;
        }
        let c = self.none_set(out, flags, span);
        self.emit(
            out,
            InstKind::If {
                cond: c,
                accept: rest,
                reject: Vec::new(),
            },
            Type::Void,
            span,
        );
    }
    fn active(&self, fl: Flags) -> Vec<LocalId> {
        fl.brk
            .into_iter()
            .chain(fl.cont)
            .chain(std::iter::once(self.ret))
            .collect()
    }

    /// Rewrites `b` into `out`; returns whether it may set a flag of `fl`
    /// or `ret` (then what follows it must be guarded).
    fn block(&mut self, b: Block, fl: Flags, out: &mut Block) -> bool {
        let mut it = b.into_iter();
        while let Some(i) = it.next() {
            let span = self.f.insts[i].span;
            let exits = match self.f.insts[i].kind.clone() {
                InstKind::Break => {
                    let l = fl
                        .brk
                        .expect("the front end refuses `break` outside a loop");
                    self.set(out, l, true, span);
                    return true;
                }
                InstKind::Continue => {
                    let l = fl
                        .cont
                        .expect("the front end refuses `continue` outside a loop");
                    self.set(out, l, true, span);
                    return true;
                }
                InstKind::Return(_) => {
                    self.returns += 1;
                    self.set(out, self.ret, true, span);
                    return true;
                }
                InstKind::If {
                    cond,
                    accept,
                    reject,
                } => {
                    let (mut a, mut r) = (Vec::new(), Vec::new());
                    let ea = self.block(accept, fl, &mut a);
                    let er = self.block(reject, fl, &mut r);
                    self.f.insts[i].kind = InstKind::If {
                        cond,
                        accept: a,
                        reject: r,
                    };
                    out.push(i);
                    ea || er
                }
                InstKind::RangeFor {
                    begin,
                    end,
                    step,
                    inclusive,
                    body,
                } => {
                    let before = self.returns;
                    let nb = if has_exit(self.f, &body, false) {
                        self.loop_body(body, out, span)
                    } else {
                        let mut nb = Vec::new();
                        self.block(body, fl_none(), &mut nb);
                        nb
                    };
                    self.f.insts[i].kind = InstKind::RangeFor {
                        begin,
                        end,
                        step,
                        inclusive,
                        body: nb,
                    };
                    out.push(i);
                    self.returns > before
                }
                InstKind::Loop { body } => {
                    let before = self.returns;
                    self.counted_loop(body, out, span);
                    self.returns > before
                }
                _ => {
                    out.push(i);
                    false
                }
            };
            if exits {
                let rest: Block = it.collect();
                let mut nr = Vec::new();
                self.block(rest, fl, &mut nr);
                let flags = self.active(fl);
                self.guard(out, &flags, nr, span);
                return true;
            }
        }
        false
    }

    /// A loop body in flag form: `if !(brk || ret) { cont = false; B' }`,
    /// with `brk = false` emitted into `out` before the loop. Returns the
    /// new body.
    fn loop_body(&mut self, body: Block, out: &mut Block, span: Span) -> Block {
        let brk = self.bool_local("ad_brk");
        let cont = self.bool_local("ad_cont");
        self.set(out, brk, false, span);
        let fl = Flags {
            brk: Some(brk),
            cont: Some(cont),
        };
        let mut inner = Vec::new();
        self.set(&mut inner, cont, false, span);
        self.block(body, fl, &mut inner);
        let mut nb = Vec::new();
        self.guard(&mut nb, &[brk, self.ret], inner, span);
        nb
    }

    /// `loop { B }` → snapshot; counting loop; restore; `for _ in 0..n { B' }`.
    fn counted_loop(&mut self, body: Block, out: &mut Block, span: Span) {
        let brk = self.bool_local("ad_brk");
        let cont = self.bool_local("ad_cont");
        let n = self.f.locals.append(Local {
            name: "ad_trips".into(),
            ty: Type::I32,
        });
        let fl = Flags {
            brk: Some(brk),
            cont: Some(cont),
        };
        // B' once; the counting loop gets a copy with fresh instructions.
        let mut b = Vec::new();
        self.block(body, fl, &mut b);
        let mut touched = Vec::new();
        locals_in(self.f, &b, &mut touched);
        for l in [brk, cont, self.ret] {
            if !touched.contains(&l) {
                touched.push(l);
            }
        }
        self.set(out, brk, false, span);
        let snaps: Vec<(LocalId, LocalId)> = touched
            .iter()
            .map(|&l| {
                let local = self.f.locals[l].clone();
                let s = self.f.locals.append(Local {
                    name: format!("ad_snap_{}", local.name),
                    ty: local.ty,
                });
                (l, s)
            })
            .collect();
        for &(l, s) in &snaps {
            let ty = self.f.locals[l].ty;
            let v = self.emit(out, InstKind::LocalLoad(l), ty, span);
            self.emit(out, InstKind::LocalStore(s, v), Type::Void, span);
        }
        let zero = self.emit(out, InstKind::Const(Const::i32(0)), Type::I32, span);
        self.emit(out, InstKind::LocalStore(n, zero), Type::Void, span);
        // The counting loop.
        let mut cb = Vec::new();
        let none = self.none_set(&mut cb, &[brk, self.ret], span);
        let any = self.emit(
            &mut cb,
            InstKind::Unary(UnaryOp::Not, none),
            Type::BOOL,
            span,
        );
        let brk_inst = self.f.detached(InstKind::Break, Type::Void, span);
        self.emit(
            &mut cb,
            InstKind::If {
                cond: any,
                accept: vec![brk_inst],
                reject: Vec::new(),
            },
            Type::Void,
            span,
        );
        let c = self.emit(&mut cb, InstKind::LocalLoad(n), Type::I32, span);
        let one = self.emit(&mut cb, InstKind::Const(Const::i32(1)), Type::I32, span);
        let c1 = self.emit(
            &mut cb,
            InstKind::Binary(BinaryOp::Add, c, one),
            Type::I32,
            span,
        );
        self.emit(&mut cb, InstKind::LocalStore(n, c1), Type::Void, span);
        self.set(&mut cb, cont, false, span);
        let copy = copy_block(self.f, &b);
        cb.extend(copy);
        self.emit(out, InstKind::Loop { body: cb }, Type::Void, span);
        // Back to the state at loop entry, then the same iterations as a
        // range loop. Each of them started with no flag set.
        for &(l, s) in &snaps {
            let ty = self.f.locals[l].ty;
            let v = self.emit(out, InstKind::LocalLoad(s), ty, span);
            self.emit(out, InstKind::LocalStore(l, v), Type::Void, span);
        }
        let mut rb = Vec::new();
        for l in [brk, cont, self.ret] {
            self.set(&mut rb, l, false, span);
        }
        rb.extend(b);
        let begin = self.emit(out, InstKind::Const(Const::i32(0)), Type::I32, span);
        let end = self.emit(out, InstKind::LocalLoad(n), Type::I32, span);
        let step = self.emit(out, InstKind::Const(Const::i32(1)), Type::I32, span);
        self.emit(
            out,
            InstKind::RangeFor {
                begin,
                end,
                step,
                inclusive: false,
                body: rb,
            },
            Type::Void,
            span,
        );
    }
}

fn fl_none() -> Flags {
    Flags {
        brk: None,
        cont: None,
    }
}

fn locals_in(f: &Function, b: &Block, out: &mut Vec<LocalId>) {
    for &i in b {
        match f.insts[i].kind {
            InstKind::LocalLoad(l) | InstKind::LocalStore(l, _) if !out.contains(&l) => out.push(l),
            _ => {}
        }
        for nb in f.insts[i].kind.blocks() {
            locals_in(f, nb, out);
        }
    }
}

/// A copy of `b` with fresh instructions (operands and loop counters
/// renamed), so that the same code can appear twice in one function.
fn copy_block(f: &mut Function, b: &Block) -> Block {
    fn go(f: &mut Function, b: &Block, map: &mut HashMap<InstId, InstId>) -> Block {
        let mut out = Vec::new();
        for &i in b {
            let mut inst = f.insts[i].clone();
            // Reserve the new handle first: loop counters inside refer to it.
            let h = f.detached(InstKind::Break, Type::Void, inst.span);
            map.insert(i, h);
            let mut blocks: Vec<Block> = Vec::new();
            for nb in inst.kind.blocks() {
                blocks.push(go(f, nb, map));
            }
            for (slot, nb) in inst.kind.blocks_mut().into_iter().zip(blocks) {
                *slot = nb;
            }
            inst.kind
                .map_operands(|x| map.get(&x).copied().unwrap_or(x));
            if let InstKind::LoopCounter(l) = inst.kind {
                inst.kind = InstKind::LoopCounter(map.get(&l).copied().unwrap_or(l));
            }
            f.insts[h] = inst;
            out.push(h);
        }
        out
    }
    go(f, b, &mut HashMap::new())
}
