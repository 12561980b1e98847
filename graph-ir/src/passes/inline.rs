//! Inlines helper-function calls.
//!
//! Pre: valid IR. Post: valid IR in which every call to a *single-exit*
//! helper (no `return` except, optionally, as the last instruction of its
//! body) is replaced by a copy of the helper's body. Helpers with early
//! returns stay real calls (every backend supports calls). Does not delete
//! the now-unused helper functions, so handles stay stable. Terminates
//! because the front end rejects recursion.

use crate::arena::Arena;
use crate::ir::*;
use std::collections::HashMap;

pub fn run(program: &mut Program) {
    for k in program.kernels.handles().collect::<Vec<_>>() {
        let kernel = &mut program.kernels[k];
        let functions = kernel.functions.clone();
        // Inline within helpers first (callees before callers is not needed:
        // repeating until no inlinable call remains reaches a fixpoint).
        for fid in kernel.functions.handles().collect::<Vec<_>>() {
            let mut f = kernel.functions[fid].clone();
            inline_all(&mut f, &functions);
            kernel.functions[fid] = f;
        }
        let functions = kernel.functions.clone();
        inline_all(&mut kernel.entry, &functions);
    }
}

fn single_exit(f: &Function) -> bool {
    fn has_return(f: &Function, b: &Block) -> bool {
        b.iter().any(|&h| matches!(f.insts[h].kind, InstKind::Return(_)) || f.insts[h].kind.blocks().iter().any(|nb| has_return(f, nb)))
    }
    let (last, rest) = match f.body.split_last() {
        Some((l, r)) => (Some(*l), r),
        None => (None, &[][..]),
    };
    let nested_last = last.is_some_and(|l| f.insts[l].kind.blocks().iter().any(|nb| has_return(f, nb)));
    !has_return(f, &rest.to_vec()) && !nested_last
}

fn inline_all(f: &mut Function, functions: &Arena<Function>) {
    for _round in 0..64 {
        let mut changed = false;
        let body = std::mem::take(&mut f.body);
        f.body = inline_block(f, &body, functions, &mut changed);
        if !changed {
            return;
        }
    }
}

fn inline_block(f: &mut Function, block: &Block, functions: &Arena<Function>, changed: &mut bool) -> Block {
    let mut out = Vec::with_capacity(block.len());
    for &h in block {
        let mut kind = f.insts[h].kind.clone();
        for b in kind.blocks_mut() {
            *b = inline_block(f, b, functions, changed);
        }
        f.insts[h].kind = kind.clone();
        if let InstKind::Call(fid, args) = &kind {
            let callee = &functions[*fid];
            if single_exit(callee) {
                *changed = true;
                let result = splice(f, h, callee, args, &mut out);
                if let Some(r) = result {
                    replace_uses(f, h, r);
                }
                continue;
            }
        }
        out.push(h);
    }
    out
}

/// Copies `callee`'s body into `f`, appending to `out`; returns the value the call produced.
fn splice(f: &mut Function, call: InstId, callee: &Function, args: &[InstId], out: &mut Block) -> Option<InstId> {
    let mut map: HashMap<InstId, InstId> = HashMap::new();
    let local_map: Vec<LocalId> = callee
        .locals
        .iter()
        .map(|(_, l)| f.locals.append(Local { name: format!("{}.{}", callee.name, l.name), ty: l.ty }))
        .collect();
    let span = f.insts[call].span;
    let mut result = None;
    let body = callee.body.clone();
    let copied = copy_block(f, callee, &body, args, &local_map, &mut map, span, &mut result);
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
        let new = f.insts.append(Inst { kind: InstKind::Break, ty: inst.ty, span: if inst.span.line == 0 { call_span } else { inst.span } });
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

fn replace_uses(f: &mut Function, old: InstId, new: InstId) {
    for h in f.insts.handles().collect::<Vec<_>>() {
        f.insts[h].kind.map_operands(|o| if o == old { new } else { o });
    }
}
