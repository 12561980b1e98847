//! Folds instructions whose operands are all constants.
//!
//! Pre: valid IR. Post: valid IR where scalar unary/binary/cast/bitcast and
//! component-wise built-ins of constant scalars are `Const`, and constant
//! components of constant `Construct`s are forwarded through `Extract`.
//! Uses `ir::eval`, the same semantics the interpreter runs, so folding never
//! changes a result. Does not remove the now-unused operands (simplify does).

use crate::ir::*;
use crate::types::Type;

pub fn run(program: &mut Program) {
    super::each_function(program, fold_function);
}

fn konst(f: &Function, h: InstId) -> Option<Const> {
    match f.insts[h].kind {
        InstKind::Const(c) => Some(c),
        _ => None,
    }
}

fn fold_function(f: &mut Function) {
    // Arena order is not execution order, so walk blocks (operands come first).
    let body = f.body.clone();
    fold_block(f, &body);
}

fn fold_block(f: &mut Function, block: &Block) {
    for &h in block {
        for b in f.insts[h]
            .kind
            .blocks()
            .into_iter()
            .cloned()
            .collect::<Vec<_>>()
        {
            fold_block(f, &b);
        }
        if let Some(c) = fold(f, h) {
            f.insts[h].kind = InstKind::Const(c);
        } else if let Some(fwd) = forward(f, h) {
            let (ty, kind) = (f.insts[fwd].ty, f.insts[fwd].kind.clone());
            if ty == f.insts[h].ty && matches!(kind, InstKind::Const(_)) {
                f.insts[h].kind = kind;
            }
        }
    }
}

/// `Extract(Construct(..), i)` where the selected component is a scalar constant.
fn forward(f: &Function, h: InstId) -> Option<InstId> {
    let InstKind::Extract(base, i) = f.insts[h].kind else {
        return None;
    };
    if !f.insts[h].ty.is_scalar() || !matches!(f.insts[base].ty, Type::Vector(..)) {
        return None;
    }
    f.construct_part(base, i)
}

fn fold(f: &Function, h: InstId) -> Option<Const> {
    let inst = &f.insts[h];
    let Type::Scalar(rs) = inst.ty else {
        return None;
    };
    match &inst.kind {
        InstKind::Unary(op, a) => {
            let a = konst(f, *a)?;
            Some(Const {
                scalar: rs,
                bits: eval::unary(*op, a.scalar, a.bits),
            })
        }
        InstKind::Binary(op, a, b) if *op != BinaryOp::MatMul => {
            let (a, b) = (konst(f, *a)?, konst(f, *b)?);
            Some(Const {
                scalar: rs,
                bits: eval::binary(*op, a.scalar, a.bits, b.bits),
            })
        }
        InstKind::Cast(a) => {
            let a = konst(f, *a)?;
            Some(Const {
                scalar: rs,
                bits: eval::cast(a.scalar, rs, a.bits),
            })
        }
        InstKind::Bitcast(a) => Some(Const {
            scalar: rs,
            bits: konst(f, *a)?.bits,
        }),
        InstKind::Select {
            cond,
            accept,
            reject,
        } => {
            let c = konst(f, *cond)?;
            konst(f, if c.bits != 0 { *accept } else { *reject })
        }
        InstKind::Builtin(b, args) => {
            let cs: Vec<Const> = args.iter().map(|a| konst(f, *a)).collect::<Option<_>>()?;
            let s = cs.first()?.scalar;
            let words: Vec<u64> = cs.iter().map(|c| c.bits).collect();
            let bits = eval::builtin_scalar(*b, s, &words)?;
            Some(Const { scalar: rs, bits })
        }
        _ => None,
    }
}
