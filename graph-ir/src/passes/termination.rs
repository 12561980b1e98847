//! Proves that every loop of a kernel runs a finite number of iterations.
//!
//! Pre: valid IR before legalization (range loops are still `RangeFor`).
//! Post: the IR is unchanged; `Kernel::loops_end` is true when every loop
//! in the kernel's entry and helper functions provably ends, false when
//! one may not (or the proof does not see why it would).
//!
//! Why: shader compilers may assume that a loop without side effects ends
//! (LLVM does), so naga makes every loop count down a 64-bit counter and
//! break, unless told that the module has no infinite loop. That counter is
//! a vector compare, a select and a subtract on every iteration of every
//! loop; a GPU backend can drop it exactly where this pass proves it is
//! never needed, and keeps it everywhere else.
//!
//! What counts as proof:
//! - a `RangeFor`: its trip count is computed once, before the loop;
//! - a `Loop` whose body, at its top level, has a check `if c { break }`
//!   where `c` is true whenever a local counter `v` (read at the body's top
//!   level before the check) is at least a bound `K` (`!(... && v < K)`,
//!   `v >= K`, `... || v >= K` and the like), `K` being a constant, a
//!   kernel scalar or a value computed before the loop; `v` is written exactly once in the loop,
//!   at the body's top level, as `v + step` with a positive constant step
//!   (of a value of `v` read at the top level), and no `continue` skips an
//!   iteration's step. While `v < K`, `v + step` cannot wrap when the step is
//!   one or `K + step - 1` fits the type, so `v` reaches `K` in at most
//!   `(K - v0) / step + 1` iterations.
//!
//! Nested loops must end too (each is checked by itself). Anything else
//! (a counter stored in a branch, a bound that changes in the loop, a
//! float condition) is "not proven", which is always safe.

use crate::ir::*;
use crate::types::{Scalar, Type};
use std::collections::HashSet;

pub fn run(program: &mut Program) {
    for h in program.kernels.handles().collect::<Vec<_>>() {
        let k = &mut program.kernels[h];
        k.loops_end =
            function_loops_end(&k.entry) && k.functions.iter().all(|(_, f)| function_loops_end(f));
    }
}

/// Whether every loop of `f` provably ends.
pub fn function_loops_end(f: &Function) -> bool {
    block_loops_end(f, &f.body)
}

fn block_loops_end(f: &Function, b: &Block) -> bool {
    b.iter().all(|&h| {
        let kind = &f.insts[h].kind;
        let own = match kind {
            InstKind::Loop { body } => counted_loop(f, body),
            _ => true,
        };
        own && kind.blocks().into_iter().all(|nb| block_loops_end(f, nb))
    })
}

/// A local counter compared with a bound: the loop exits once `v >= bound`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Exit {
    counter: LocalId,
    /// The read of the counter that the check compares.
    read: InstId,
    bound: InstId,
}

fn counted_loop(f: &Function, body: &Block) -> bool {
    if has_continue(f, body) {
        return false;
    }
    let mut inside = HashSet::new();
    defined(f, body, &mut inside);
    let top: Vec<InstId> = body.clone();
    let pos = |h: InstId| top.iter().position(|&t| t == h);
    for (at, &h) in top.iter().enumerate() {
        let InstKind::If {
            cond,
            accept,
            reject,
        } = &f.insts[h].kind
        else {
            continue;
        };
        if !reject.is_empty() || !breaks_at_top(f, accept) {
            continue;
        }
        for exit in exits_when_true(f, *cond) {
            let read_before_check = pos(exit.read).is_some_and(|p| p < at);
            let bound_fixed = !inside.contains(&exit.bound)
                || matches!(
                    f.insts[exit.bound].kind,
                    InstKind::Const(_) | InstKind::Param(_)
                );
            if read_before_check && bound_fixed && steps_once(f, body, &top, exit) {
                return true;
            }
        }
    }
    false
}

/// The counters and bounds for which `v >= bound` makes `c` true.
fn exits_when_true(f: &Function, c: InstId) -> Vec<Exit> {
    match &f.insts[c].kind {
        InstKind::Unary(UnaryOp::Not, x) => holds_only_if_below(f, *x),
        InstKind::Binary(BinaryOp::LogicalOr | BinaryOp::BitOr, a, b) if is_bool(f, c) => {
            let mut v = exits_when_true(f, *a);
            v.extend(exits_when_true(f, *b));
            v
        }
        InstKind::Binary(BinaryOp::Ge, v, k) | InstKind::Binary(BinaryOp::Le, k, v) => {
            compared(f, *v, *k)
        }
        _ => vec![],
    }
}

/// The counters and bounds for which `x` true implies `v < bound`.
fn holds_only_if_below(f: &Function, x: InstId) -> Vec<Exit> {
    match &f.insts[x].kind {
        InstKind::Binary(BinaryOp::LogicalAnd | BinaryOp::BitAnd, a, b) if is_bool(f, x) => {
            let mut v = holds_only_if_below(f, *a);
            v.extend(holds_only_if_below(f, *b));
            v
        }
        InstKind::Binary(BinaryOp::Lt, v, k) | InstKind::Binary(BinaryOp::Gt, k, v) => {
            compared(f, *v, *k)
        }
        InstKind::Unary(UnaryOp::Not, y) => exits_when_true(f, *y),
        _ => vec![],
    }
}

/// The exit of a comparison of `v` (a read of a counter, or nothing) with `k`.
fn compared(f: &Function, v: InstId, k: InstId) -> Vec<Exit> {
    counter_of(f, v)
        .map(|counter| Exit {
            counter,
            read: v,
            bound: k,
        })
        .into_iter()
        .collect()
}

fn is_bool(f: &Function, h: InstId) -> bool {
    f.insts[h].ty == Type::BOOL
}

/// `Some(v)` when `h` reads an integer local `v`.
fn counter_of(f: &Function, h: InstId) -> Option<LocalId> {
    match f.insts[h].kind {
        InstKind::LocalLoad(v) if matches!(f.insts[h].ty, Type::I32 | Type::U32) => Some(v),
        _ => None,
    }
}

/// `v` is written once in the loop, at the top level, as `v + step`
/// (`step` a positive constant) of a top-level read of `v`, and cannot wrap
/// while below the bound.
fn steps_once(f: &Function, body: &Block, top: &[InstId], exit: Exit) -> bool {
    let mut stores = Vec::new();
    stores_of(f, body, exit.counter, &mut stores);
    let [store] = stores[..] else {
        return false;
    };
    if !top.contains(&store) {
        return false;
    }
    let InstKind::LocalStore(_, value) = f.insts[store].kind else {
        return false;
    };
    let InstKind::Binary(BinaryOp::Add, a, b) = f.insts[value].kind else {
        return false;
    };
    let (read, step) = if counter_of(f, a) == Some(exit.counter) {
        (a, b)
    } else if counter_of(f, b) == Some(exit.counter) {
        (b, a)
    } else {
        return false;
    };
    if !top.contains(&read) {
        return false;
    }
    let ty = f.insts[value].ty;
    let Some(step) = constant(f, step, ty) else {
        return false;
    };
    if step <= 0 {
        return false;
    }
    if step == 1 {
        return true;
    }
    // A larger step must not wrap past the type's maximum while v < K.
    let max = if ty == Type::I32 {
        i32::MAX as i64
    } else {
        u32::MAX as i64
    };
    constant(f, exit.bound, ty).is_some_and(|k| k + step - 1 <= max)
}

/// The value of a constant integer instruction of type `ty`.
fn constant(f: &Function, h: InstId, ty: Type) -> Option<i64> {
    match (&f.insts[h].kind, ty) {
        (InstKind::Const(c), Type::I32) if c.scalar == Scalar::I32 => Some(c.bits as i32 as i64),
        (InstKind::Const(c), Type::U32) if c.scalar == Scalar::U32 => Some(c.bits as i64),
        _ => None,
    }
}

fn stores_of(f: &Function, b: &Block, v: LocalId, out: &mut Vec<InstId>) {
    for &h in b {
        let kind = &f.insts[h].kind;
        if matches!(kind, InstKind::LocalStore(l, _) if *l == v) {
            out.push(h);
        }
        for nb in kind.blocks() {
            stores_of(f, nb, v, out);
        }
    }
}

/// Whether a `break` is among the block's top-level statements (so the
/// block, once entered, leaves the loop unless it returns first).
fn breaks_at_top(f: &Function, b: &Block) -> bool {
    b.iter()
        .any(|&h| matches!(f.insts[h].kind, InstKind::Break))
}

/// A `continue` of this loop (not of a loop nested in it).
fn has_continue(f: &Function, b: &Block) -> bool {
    b.iter().any(|&h| match &f.insts[h].kind {
        InstKind::Continue => true,
        InstKind::Loop { .. } | InstKind::RangeFor { .. } => false,
        k => k.blocks().into_iter().any(|nb| has_continue(f, nb)),
    })
}

/// Every instruction of `b`, at any depth.
fn defined(f: &Function, b: &Block, out: &mut HashSet<InstId>) {
    for &h in b {
        out.insert(h);
        for nb in f.insts[h].kind.blocks() {
            defined(f, nb, out);
        }
    }
}
