//! Common subexpression elimination over structured blocks.
//!
//! Pre: valid IR of any form. Post: valid IR of the same form in which no
//! value-numbered instruction (below) repeats an equal instruction that
//! dominates it; each repeat is dropped from its block and its uses read the
//! earlier value.
//!
//! Dominance in structured control flow is lexical: an instruction dominates
//! the rest of its block and every block nested in it. So the pass walks
//! blocks in order with a stack of scopes; a value found in an enclosing
//! scope is reused, while values of an `if` branch or a loop body are
//! forgotten when the walk leaves it.
//!
//! A guard `if c { trap }` (legalized bounds and step checks) that repeats
//! a dominating guard on the same condition is dropped too: the invocation
//! stops at the first one, so the second can never fire. Repeated accesses
//! to one field element are thus checked once.
//!
//! Only instructions whose result depends on their operands alone are
//! numbered: constants, arguments, parameters, the frame number, arithmetic,
//! comparisons, selects, casts, vector/matrix construction and access at
//! constant indices, and built-ins. Loads (of locals and fields),
//! `random()`, loop counters, dynamic indexing (which checks its index),
//! calls and everything with an effect are left alone. Reusing an equal
//! computation gives the same bits, so results never change; this is why
//! lowered address arithmetic, which repeats the same index math for every
//! access to a field, shrinks for every backend at once.
//!
//! One kind of memory read is numbered too: a word load (`buf_load`) from a
//! root buffer that no function of the kernel stores to or updates
//! atomically. Every invocation of a launch runs that same kernel, so such a
//! buffer holds the same words for the whole launch, and a repeated load of
//! the same address reads what the dominating one read. The repeat is
//! dropped, never moved, so no load runs where it did not run before (a
//! load is not speculated past the bounds check that guards it). mpm88's
//! p2g reads `v[p]` in every step of its 3×3 stencil; each read is a gather
//! on a GPU, so this matters there.

use crate::ir::*;
use crate::types::Type;
use std::collections::{HashMap, HashSet};

pub fn run(program: &mut Program) {
    for k in program.kernels.handles().collect::<Vec<_>>() {
        let kernel = &mut program.kernels[k];
        let written = written_roots(kernel);
        cse_function_with(&mut kernel.entry, &written);
        for fid in kernel.functions.handles().collect::<Vec<_>>() {
            cse_function_with(&mut kernel.functions[fid], &written);
        }
    }
}

/// The root buffers a kernel's functions store to or update atomically.
fn written_roots(kernel: &Kernel) -> HashSet<LayoutId> {
    std::iter::once(&kernel.entry)
        .chain(kernel.functions.iter().map(|(_, f)| f))
        .flat_map(|f| f.insts.iter())
        .filter_map(|(_, inst)| match inst.kind {
            InstKind::BufStore { root, .. } | InstKind::BufAtomic { root, .. } => Some(root),
            _ => None,
        })
        .collect()
}

/// CSE of one function seen on its own: no buffer counts as unwritten, so
/// no load is numbered.
pub fn cse_function(f: &mut Function) {
    let mut walk = Walk {
        scopes: vec![HashMap::new()],
        subst: HashMap::new(),
        read_only: None,
    };
    let body = std::mem::take(&mut f.body);
    f.body = walk.block(f, body);
}

/// CSE of one function of a kernel whose stored-to roots are `written`.
fn cse_function_with(f: &mut Function, written: &HashSet<LayoutId>) {
    let mut walk = Walk {
        scopes: vec![HashMap::new()],
        subst: HashMap::new(),
        read_only: Some(written),
    };
    let body = std::mem::take(&mut f.body);
    f.body = walk.block(f, body);
}

/// An instruction's identity for numbering: its kind with operands already
/// replaced, and its type.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Key(String);

struct Walk<'w> {
    scopes: Vec<HashMap<Key, InstId>>,
    /// Dropped instruction → the earlier equal value its uses now read.
    subst: HashMap<InstId, InstId>,
    /// The kernel's written roots, when known: loads of any other root are
    /// numbered.
    read_only: Option<&'w HashSet<LayoutId>>,
}

impl Walk<'_> {
    fn block(&mut self, f: &mut Function, block: Block) -> Block {
        let mut out = Vec::with_capacity(block.len());
        for h in block {
            let subst = &self.subst;
            f.insts[h]
                .kind
                .map_operands(|v| subst.get(&v).copied().unwrap_or(v));
            let mut kind = std::mem::replace(&mut f.insts[h].kind, InstKind::Break);
            for b in kind.blocks_mut() {
                self.scopes.push(HashMap::new());
                *b = self.block(f, std::mem::take(b));
                self.scopes.pop();
            }
            f.insts[h].kind = kind;
            if let Some(cond) = trap_guard(f, h) {
                // After `if c { trap }` the invocation only goes on when `c`
                // is false, so a later guard on the same `c` never fires.
                let key = Key(format!("trap_if:{:?}", cond));
                if self.scopes.iter().any(|s| s.contains_key(&key)) {
                    continue;
                }
                self.scopes.last_mut().expect("scope").insert(key, h);
                out.push(h);
                continue;
            }
            let numbered = match (&f.insts[h].kind, self.read_only) {
                (InstKind::BufLoad { root, .. }, Some(written)) if !written.contains(root) => {
                    Some(Key(format!("{:?}:{:?}", f.insts[h].kind, f.insts[h].ty)))
                }
                (kind, _) => key(kind, f.insts[h].ty),
            };
            if let Some(key) = numbered {
                if let Some(&earlier) = self.scopes.iter().rev().find_map(|s| s.get(&key)) {
                    self.subst.insert(h, earlier);
                    continue;
                }
                self.scopes
                    .last_mut()
                    .expect("the function scope")
                    .insert(key, h);
            }
            out.push(h);
        }
        out
    }
}

/// The condition of an `if c { trap }` with nothing else in it.
fn trap_guard(f: &Function, h: InstId) -> Option<InstId> {
    match &f.insts[h].kind {
        InstKind::If {
            cond,
            accept,
            reject,
        } if reject.is_empty()
            && accept.len() == 1
            && matches!(f.insts[accept[0]].kind, InstKind::Trap { .. }) =>
        {
            Some(*cond)
        }
        _ => None,
    }
}

fn key(kind: &InstKind, ty: Type) -> Option<Key> {
    value_numbered(kind).then(|| Key(format!("{:?}:{:?}", kind, ty)))
}

/// Whether the instruction's value depends on its operands alone (and it
/// has no effect and cannot fault), so equal instances are interchangeable
/// and it may be computed anywhere its operands are available.
pub fn value_numbered(kind: &InstKind) -> bool {
    use InstKind::*;
    // Pure, minus what reads memory or loop state.
    kind.is_pure()
        && !matches!(
            kind,
            LocalLoad(_)
                | FieldLoad { .. }
                | FieldIsActive { .. }
                | FieldLength { .. }
                | BufLoad { .. }
                | LoopCounter(_)
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst(f: &mut Function, kind: InstKind, ty: Type) -> InstId {
        f.insts.append(Inst {
            kind,
            ty,
            span: Span::default(),
        })
    }

    /// `a + b` computed twice at the top and again inside an `if`, plus a
    /// value defined inside the `if` that must not leak out of it.
    #[test]
    fn repeats_reuse_dominating_values_only() {
        let mut f = Function::new("k", vec![Type::I32], Type::Void, Span::default());
        let l = f.locals.append(Local {
            name: "x".into(),
            ty: Type::I32,
        });
        let a = inst(&mut f, InstKind::Arg(0), Type::I32);
        let one = inst(&mut f, InstKind::Const(Const::i32(1)), Type::I32);
        let s1 = inst(&mut f, InstKind::Binary(BinaryOp::Add, a, one), Type::I32);
        let one2 = inst(&mut f, InstKind::Const(Const::i32(1)), Type::I32);
        let s2 = inst(&mut f, InstKind::Binary(BinaryOp::Add, a, one2), Type::I32);
        let c = inst(&mut f, InstKind::Binary(BinaryOp::Lt, s2, a), Type::BOOL);
        let inner = inst(&mut f, InstKind::Binary(BinaryOp::Mul, s2, s2), Type::I32);
        let st_in = inst(&mut f, InstKind::LocalStore(l, inner), Type::Void);
        let branch = inst(
            &mut f,
            InstKind::If {
                cond: c,
                accept: vec![inner, st_in],
                reject: vec![],
            },
            Type::Void,
        );
        let after = inst(&mut f, InstKind::Binary(BinaryOp::Mul, s1, s1), Type::I32);
        let ld1 = inst(&mut f, InstKind::LocalLoad(l), Type::I32);
        let ld2 = inst(&mut f, InstKind::LocalLoad(l), Type::I32);
        let sum = inst(&mut f, InstKind::Binary(BinaryOp::Add, ld1, ld2), Type::I32);
        let st = inst(&mut f, InstKind::LocalStore(l, sum), Type::Void);
        let st2 = inst(&mut f, InstKind::LocalStore(l, after), Type::Void);
        f.body = vec![
            a, one, s1, one2, s2, c, branch, after, ld1, ld2, sum, st, st2,
        ];
        cse_function(&mut f);
        // The second constant and the second sum are gone; their uses read
        // the first ones.
        assert_eq!(
            f.body,
            vec![a, one, s1, c, branch, after, ld1, ld2, sum, st, st2]
        );
        assert!(
            matches!(f.insts[c].kind, InstKind::Binary(BinaryOp::Lt, x, y) if x == s1 && y == a)
        );
        assert!(
            matches!(f.insts[inner].kind, InstKind::Binary(BinaryOp::Mul, x, y) if x == s1 && y == s1)
        );
        // `after` equals `inner`, but `inner` lives in the branch: it stays.
        let InstKind::If { accept, .. } = &f.insts[branch].kind else {
            panic!("if")
        };
        assert_eq!(accept, &vec![inner, st_in]);
        // Loads are never merged.
        assert!(
            matches!(f.insts[sum].kind, InstKind::Binary(BinaryOp::Add, x, y) if x == ld1 && y == ld2)
        );
    }

    /// Repeated word loads are merged only from a root nothing in the
    /// kernel writes; loads of a written root all stay.
    #[test]
    fn loads_of_unwritten_roots_are_reused() {
        let (ro, rw) = (LayoutId::new(0), LayoutId::new(1));
        let mut f = Function::new("k", vec![Type::I32], Type::Void, Span::default());
        let addr = inst(&mut f, InstKind::Const(Const::u32(3)), Type::U32);
        let a1 = inst(&mut f, InstKind::BufLoad { root: ro, addr }, Type::F32);
        let b1 = inst(&mut f, InstKind::BufLoad { root: rw, addr }, Type::F32);
        let st = inst(
            &mut f,
            InstKind::BufStore {
                root: rw,
                addr,
                value: a1,
            },
            Type::Void,
        );
        let a2 = inst(&mut f, InstKind::BufLoad { root: ro, addr }, Type::F32);
        let b2 = inst(&mut f, InstKind::BufLoad { root: rw, addr }, Type::F32);
        let sum = inst(&mut f, InstKind::Binary(BinaryOp::Add, a2, b2), Type::F32);
        let st2 = inst(
            &mut f,
            InstKind::BufStore {
                root: rw,
                addr,
                value: sum,
            },
            Type::Void,
        );
        f.body = vec![addr, a1, b1, st, a2, b2, sum, st2];
        let mut alone = f.clone();
        cse_function(&mut alone);
        assert_eq!(alone.body, f.body, "without the kernel, no load is merged");
        let written: HashSet<LayoutId> = [rw].into_iter().collect();
        cse_function_with(&mut f, &written);
        assert_eq!(f.body, vec![addr, a1, b1, st, b2, sum, st2]);
        assert!(
            matches!(f.insts[sum].kind, InstKind::Binary(BinaryOp::Add, x, y) if x == a1 && y == b2)
        );
    }
}
