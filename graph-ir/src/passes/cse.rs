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
//! constant indices, and built-ins. Loads (of locals, fields or buffers),
//! `random()`, loop counters, dynamic indexing (which checks its index),
//! calls and everything with an effect are left alone. Reusing an equal
//! computation gives the same bits, so results never change; this is why
//! lowered address arithmetic, which repeats the same index math for every
//! access to a field, shrinks for every backend at once.

use crate::ir::*;
use crate::types::Type;
use std::collections::HashMap;

pub fn run(program: &mut Program) {
    super::each_function(program, cse_function);
}

pub fn cse_function(f: &mut Function) {
    let mut walk = Walk {
        scopes: vec![HashMap::new()],
        subst: HashMap::new(),
    };
    let body = std::mem::take(&mut f.body);
    f.body = walk.block(f, body);
}

/// An instruction's identity for numbering: its kind with operands already
/// replaced, and its type.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Key(String);

struct Walk {
    scopes: Vec<HashMap<Key, InstId>>,
    /// Dropped instruction → the earlier equal value its uses now read.
    subst: HashMap<InstId, InstId>,
}

impl Walk {
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
            if let Some(key) = key(&f.insts[h].kind, f.insts[h].ty) {
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
}
