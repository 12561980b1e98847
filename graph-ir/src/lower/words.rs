//! A value as per-component 32-bit words and back: how `lower_access` and
//! the quantized-storage lowering (`lower::quantize`) split a vector or
//! matrix into the words they load and store.

use super::sparse::Emitter;
use crate::ir::*;
use crate::lower::emit::Build;
use crate::types::{Scalar, Type};

/// Turns per-component words into the kind for the original handle: the
/// single word's own instruction (moved), or a `Construct`.
pub fn assemble(e: &mut Emitter, ty: Type, words: Vec<InstId>) -> Option<InstKind> {
    if words.len() == 1 {
        let w = e.out.pop().expect("the word was emitted last");
        debug_assert_eq!(w, words[0]);
        return Some(e.f.insts[w].kind.clone());
    }
    Some(match ty {
        Type::Matrix(n) => {
            let cols: Vec<InstId> = words
                .chunks(n as usize)
                .map(|c| {
                    e.emit(
                        InstKind::Construct(c.to_vec()),
                        Type::Vector(Scalar::F32, n),
                    )
                })
                .collect();
            InstKind::Construct(cols)
        }
        _ => InstKind::Construct(words),
    })
}

/// Per-component scalars of a value (column-major for matrices).
pub fn split(e: &mut Emitter, ty: Type, v: InstId) -> Vec<InstId> {
    match ty {
        Type::Scalar(_) => vec![v],
        Type::Vector(s, n) => (0..n as u32)
            .map(|c| e.emit(InstKind::Extract(v, c), Type::Scalar(s)))
            .collect(),
        Type::Matrix(n) => {
            let mut out = Vec::new();
            for c in 0..n as u32 {
                let col = e.emit(InstKind::Extract(v, c), Type::Vector(Scalar::F32, n));
                for r in 0..n as u32 {
                    out.push(e.emit(InstKind::Extract(col, r), Type::F32));
                }
            }
            out
        }
        Type::Void => vec![],
    }
}
