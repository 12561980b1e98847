//! Inlines helper-function calls.
//!
//! Pre: valid IR. Post: valid IR in which calls to *single-exit* helpers (no
//! `return` except, optionally, as the last instruction of the body) are
//! replaced by a copy of the helper's body — unless the helper is large
//! (more than `LARGE_HELPER` instructions) and called from more than one
//! place, which stays a real function so that GPU shaders stay small (the
//! ILGPU guidance on WGSL size limits). Helpers with early returns stay real
//! calls too (every backend supports calls). Does not delete the now-unused
//! helper functions, so handles stay stable. Terminates because the front
//! end rejects recursion.

use crate::arena::Arena;
use crate::ir::*;
use std::collections::{HashMap, HashSet};

/// Helpers with more instructions than this stay functions when called more than once.
pub const LARGE_HELPER: usize = 200;
/// No function grows past this many instructions by inlining; further calls
/// stay calls (helpers calling helpers twice would otherwise grow exponentially).
pub const INLINE_BUDGET: usize = 4_000;

pub fn run(program: &mut Program) {
    for k in program.kernels.handles().collect::<Vec<_>>() {
        let kernel = &mut program.kernels[k];
        // Count call sites per helper across the kernel.
        let mut calls: HashMap<FuncId, usize> = HashMap::new();
        for f in std::iter::once(&kernel.entry).chain(kernel.functions.iter().map(|(_, f)| f)) {
            for (_, inst) in f.insts.iter() {
                if let InstKind::Call(c, _) = inst.kind {
                    *calls.entry(c).or_default() += 1;
                }
            }
        }
        let keep: HashSet<FuncId> = kernel
            .functions
            .iter()
            .filter(|(h, f)| {
                calls.get(h).copied().unwrap_or(0) > 1 && reachable_size(f) > LARGE_HELPER
            })
            .map(|(h, _)| h)
            .collect();
        let mut functions = kernel.functions.clone();
        // Inline within helpers first (callees before callers is not needed:
        // repeating until no inlinable call remains reaches a fixpoint).
        for fid in kernel.functions.handles().collect::<Vec<_>>() {
            let mut f = kernel.functions[fid].clone();
            inline_all(&mut f, &functions, &keep);
            kernel.functions[fid] = f.clone();
            functions[fid] = f;
        }
        inline_all(&mut kernel.entry, &functions, &keep);
    }
}

fn reachable_size(f: &Function) -> usize {
    fn walk(f: &Function, b: &Block) -> usize {
        b.iter()
            .map(|&h| {
                1 + f.insts[h]
                    .kind
                    .blocks()
                    .iter()
                    .map(|nb| walk(f, nb))
                    .sum::<usize>()
            })
            .sum()
    }
    walk(f, &f.body)
}

fn single_exit(f: &Function) -> bool {
    fn has_return(f: &Function, b: &Block) -> bool {
        b.iter().any(|&h| {
            matches!(f.insts[h].kind, InstKind::Return(_))
                || f.insts[h].kind.blocks().iter().any(|nb| has_return(f, nb))
        })
    }
    let (last, rest) = match f.body.split_last() {
        Some((l, r)) => (Some(*l), r),
        None => (None, &[][..]),
    };
    let nested_last =
        last.is_some_and(|l| f.insts[l].kind.blocks().iter().any(|nb| has_return(f, nb)));
    !has_return(f, &rest.to_vec()) && !nested_last
}

fn inline_all(f: &mut Function, functions: &Arena<Function>, keep: &HashSet<FuncId>) {
    for _round in 0..64 {
        let mut changed = false;
        let mut budget = INLINE_BUDGET.saturating_sub(reachable_size(f));
        let mut results: HashMap<InstId, InstId> = HashMap::new();
        let body = std::mem::take(&mut f.body);
        f.body = inline_block(
            f,
            &body,
            functions,
            keep,
            &mut budget,
            &mut results,
            &mut changed,
        );
        replace_uses(f, &results);
        if !changed {
            return;
        }
    }
}

fn inline_block(
    f: &mut Function,
    block: &Block,
    functions: &Arena<Function>,
    keep: &HashSet<FuncId>,
    budget: &mut usize,
    results: &mut HashMap<InstId, InstId>,
    changed: &mut bool,
) -> Block {
    let mut out = Vec::with_capacity(block.len());
    for &h in block {
        let mut kind = f.insts[h].kind.clone();
        for b in kind.blocks_mut() {
            *b = inline_block(f, b, functions, keep, budget, results, changed);
        }
        f.insts[h].kind = kind.clone();
        if let InstKind::Call(fid, args) = &kind {
            let callee = &functions[*fid];
            let size = reachable_size(callee);
            if !keep.contains(fid) && single_exit(callee) && size <= *budget {
                *budget -= size;
                *changed = true;
                // Arguments may themselves be results of calls inlined earlier this round.
                let args: Vec<InstId> = args.iter().map(|a| resolve(results, *a)).collect();
                let result = splice(f, h, callee, &args, &mut out);
                if let Some(r) = result {
                    results.insert(h, r);
                }
                continue;
            }
        }
        out.push(h);
    }
    out
}

/// Copies `callee`'s body into `f`, appending to `out`; returns the value the call produced.
fn splice(
    f: &mut Function,
    call: InstId,
    callee: &Function,
    args: &[InstId],
    out: &mut Block,
) -> Option<InstId> {
    let mut map: HashMap<InstId, InstId> = HashMap::new();
    let local_map: Vec<LocalId> = callee
        .locals
        .iter()
        .map(|(_, l)| {
            f.locals.append(Local {
                name: format!("{}.{}", callee.name, l.name),
                ty: l.ty,
            })
        })
        .collect();
    let span = f.insts[call].span;
    let mut result = None;
    let body = callee.body.clone();
    let copied = copy_block(
        f,
        callee,
        &body,
        args,
        &local_map,
        &mut map,
        span,
        &mut result,
    );
    out.extend(copied);
    result
}

#[allow(clippy::too_many_arguments)]
fn copy_block(
    f: &mut Function,
    callee: &Function,
    block: &Block,
    args: &[InstId],
    locals: &[LocalId],
    map: &mut HashMap<InstId, InstId>,
    call_span: Span,
    result: &mut Option<InstId>,
) -> Block {
    let mut out = Vec::new();
    for &h in block {
        let inst = &callee.insts[h];
        match &inst.kind {
            InstKind::Arg(i) => {
                map.insert(h, args[*i as usize]);
                continue;
            }
            InstKind::Return(v) => {
                *result = v.map(|v| map[&v]);
                continue;
            }
            _ => {}
        }
        // Reserve the handle first so LoopCounter inside a RangeFor body can refer to it.
        let new = f.detached(
            InstKind::Break,
            inst.ty,
            if inst.span.line == 0 {
                call_span
            } else {
                inst.span
            },
        );
        map.insert(h, new);
        let mut kind = inst.kind.clone();
        kind.map_operands(|o| map[&o]);
        match &mut kind {
            InstKind::LocalLoad(l) | InstKind::LocalStore(l, _) => *l = locals[l.index()],
            InstKind::LoopCounter(l) => *l = map[l],
            _ => {}
        }
        for b in kind.blocks_mut() {
            *b = copy_block(f, callee, b, args, locals, map, call_span, result);
        }
        f.insts[new].kind = kind;
        out.push(new);
    }
    out
}

fn resolve(results: &HashMap<InstId, InstId>, mut v: InstId) -> InstId {
    while let Some(&r) = results.get(&v) {
        v = r;
    }
    v
}

/// Rewrites every use of an inlined call to the value the inlined body produced.
fn replace_uses(f: &mut Function, results: &HashMap<InstId, InstId>) {
    if results.is_empty() {
        return;
    }
    for h in f.insts.handles().collect::<Vec<_>>() {
        f.insts[h].kind.map_operands(|o| resolve(results, o));
    }
}
