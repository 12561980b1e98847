//! Loop-invariant code motion.
//!
//! Pre: valid IR of any form. Post: valid IR of the same form in which every
//! value-numbered instruction (the pure, operand-only kinds of
//! [`super::cse`]) at the top level of a loop body whose operands are all
//! defined outside the loop is moved to just before the loop. Nested loops
//! are treated first, so an invariant climbs as far out as it can.
//!
//! Moving such an instruction out of a loop that runs zero times computes a
//! value nobody reads; none of these kinds can fault (integer division by
//! zero is defined in the IR), so speculation is safe and results do not
//! change. Instructions inside an `if` in the body stay where they are: they
//! may be expensive and rarely run. After legalization every range loop is a
//! `Loop`, so this covers range loops too (their per-iteration index math
//! on values from outside the loop is what moves).

use super::cse::value_numbered;
use crate::ir::*;
use std::collections::HashSet;

pub fn run(program: &mut Program) {
    super::each_function(program, licm_function);
}

pub fn licm_function(f: &mut Function) {
    let body = std::mem::take(&mut f.body);
    f.body = block(f, body);
}

fn block(f: &mut Function, b: Block) -> Block {
    let mut out = Vec::with_capacity(b.len());
    for h in b {
        let mut kind = std::mem::replace(&mut f.insts[h].kind, InstKind::Break);
        for nested in kind.blocks_mut() {
            *nested = block(f, std::mem::take(nested));
        }
        if let InstKind::Loop { body } = &mut kind {
            let mut inside = HashSet::new();
            defined(f, body, &mut inside);
            let mut kept = Vec::with_capacity(body.len());
            for &i in body.iter() {
                let inst = &f.insts[i];
                if value_numbered(&inst.kind)
                    && inst.kind.operands().iter().all(|o| !inside.contains(o))
                {
                    inside.remove(&i);
                    out.push(i);
                } else {
                    kept.push(i);
                }
            }
            *body = kept;
        }
        f.insts[h].kind = kind;
        out.push(h);
    }
    out
}

/// Every instruction of `b`, at any depth.
fn defined(f: &Function, b: &Block, into: &mut HashSet<InstId>) {
    for &h in b {
        into.insert(h);
        for nested in f.insts[h].kind.blocks() {
            defined(f, nested, into);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Type;

    fn inst(f: &mut Function, kind: InstKind, ty: Type) -> InstId {
        f.detached(kind, ty, Span::default())
    }

    /// loop { x = load l; k = a * 3; y = x + k; store l y; if c { z = a + 1 } break }:
    /// `3` and `a * 3` move out, the load-dependent sum and the branch stay.
    #[test]
    fn invariants_move_before_the_loop() {
        let mut f = Function::new("k", vec![Type::I32], Type::Void, Span::default());
        let l = f.locals.append(Local {
            name: "x".into(),
            ty: Type::I32,
        });
        let a = inst(&mut f, InstKind::Arg(0), Type::I32);
        let c = inst(&mut f, InstKind::Const(Const::bool(true)), Type::BOOL);
        let x = inst(&mut f, InstKind::LocalLoad(l), Type::I32);
        let three = inst(&mut f, InstKind::Const(Const::i32(3)), Type::I32);
        let k = inst(&mut f, InstKind::Binary(BinaryOp::Mul, a, three), Type::I32);
        let y = inst(&mut f, InstKind::Binary(BinaryOp::Add, x, k), Type::I32);
        let st = inst(&mut f, InstKind::LocalStore(l, y), Type::Void);
        let one = inst(&mut f, InstKind::Const(Const::i32(1)), Type::I32);
        let z = inst(&mut f, InstKind::Binary(BinaryOp::Add, a, one), Type::I32);
        let branch = inst(
            &mut f,
            InstKind::If {
                cond: c,
                accept: vec![one, z],
                reject: vec![],
            },
            Type::Void,
        );
        let brk = inst(&mut f, InstKind::Break, Type::Void);
        let lp = inst(
            &mut f,
            InstKind::Loop {
                body: vec![x, three, k, y, st, branch, brk],
            },
            Type::Void,
        );
        f.body = vec![a, c, lp];
        licm_function(&mut f);
        assert_eq!(f.body, vec![a, c, three, k, lp]);
        let InstKind::Loop { body } = &f.insts[lp].kind else {
            panic!("loop")
        };
        assert_eq!(body, &vec![x, y, st, branch, brk]);
    }
}
