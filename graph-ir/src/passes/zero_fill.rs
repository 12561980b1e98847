//! Finds kernels whose whole effect is writing zero to one contiguous run
//! of words of a root buffer (clearing a grid each substep, zeroing
//! gradients), so that a backend may run them as a buffer fill.
//!
//! Pre: legalized IR (no `BoundsCheck`; a `Trap` makes a kernel not
//! qualify). Post: the IR is unchanged; `Kernel::zero_fill` is
//! `Some(range)` exactly when every launch of the kernel stores zero bits
//! to every word of `range` and does nothing else, `None` otherwise
//! (including every case the proof does not see). The kernel stays valid,
//! so a backend that ignores the mark still runs it and gets the same words.
//!
//! Why: on a GPU a fill is a copy-engine memset with no shader and no
//! dispatch. On lavapipe a dispatch costs 20–30 µs of fixed overhead plus
//! ~7 ns per store per invocation, a fill a plain `memset`.
//!
//! What counts as proof: the entry's body is straight-line code made of
//! non-negative integer constants, loop indices, integer casts and bitcasts,
//! `+`, `*` and `<<` by constants, and `BufStore`s of a zero constant. Every
//! address is then an affine function `c + Σ a_d · i_d` of the loop
//! indices. All stores share the same root and the same coefficients `a_d`,
//! and their constants `c` form a run `c0 .. c0 + m`. Taking the axes with
//! more than one index by increasing coefficient, each coefficient is `m`
//! times the product of the extents before it. Then the launch writes
//! exactly the words `c0 .. c0 + m · Π n_d`, each of them once. Every
//! intermediate value stays below 2^31 over the whole domain, so i32/u32
//! casts and 32-bit arithmetic are exact.

use crate::ir::layout::root_words;
use crate::ir::*;
use crate::types::{Scalar, Type};
use std::collections::BTreeSet;

pub fn run(program: &mut Program) {
    let found: Vec<(KernelId, Option<ZeroFill>)> = program
        .kernels
        .iter()
        .map(|(h, k)| (h, detect(program, k)))
        .collect();
    for (h, fill) in found {
        program.kernels[h].zero_fill = fill;
    }
}

/// `c + Σ coeff[d] · i_d`, with the largest value it takes over the launch.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Affine {
    constant: u64,
    coeff: [u64; 3],
    max: u64,
}

/// Values above this could overflow an i32 or change under an i32/u32 cast.
const LIMIT: u64 = 1 << 31;

fn detect(program: &Program, k: &Kernel) -> Option<ZeroFill> {
    if k.count_from.is_some() || !k.fault_sites.is_empty() || k.dims > 3 {
        return None;
    }
    let shape = k.iteration_shape(program);
    if shape.len() != k.dims || shape.contains(&0) {
        return None;
    }
    let f = &k.entry;
    let mut forms: Vec<Option<Affine>> = vec![None; f.insts.len()];
    let mut stores: Vec<(LayoutId, Affine)> = Vec::new();
    for &id in &f.body {
        let inst = &f.insts[id];
        let form = |v: InstId| forms[v.index()];
        let value = match &inst.kind {
            InstKind::Const(c) => match c.scalar {
                Scalar::I32 | Scalar::U32 if c.bits < LIMIT => Some(Affine {
                    constant: c.bits,
                    coeff: [0; 3],
                    max: c.bits,
                }),
                // Floats and bools only as stored values (checked below).
                _ => None,
            },
            InstKind::Arg(n) if (*n as usize) < k.dims => {
                let mut coeff = [0; 3];
                coeff[*n as usize] = 1;
                Some(Affine {
                    constant: 0,
                    coeff,
                    max: shape[*n as usize] as u64 - 1,
                })
            }
            InstKind::Cast(v) | InstKind::Bitcast(v) if is_int(inst.ty) && is_int(f.ty(*v)) => {
                Some(form(*v)?)
            }
            InstKind::Binary(op, a, b) if is_int(inst.ty) => {
                let (a, b) = (form(*a)?, form(*b)?);
                match op {
                    BinaryOp::Add => combine(&shape, a, b, |x, y| x.checked_add(y)),
                    BinaryOp::Mul => {
                        let (var, factor) = match (is_const(&a), is_const(&b)) {
                            (_, true) => (a, b.constant),
                            (true, false) => (b, a.constant),
                            (false, false) => return None,
                        };
                        scale(&shape, var, factor)
                    }
                    BinaryOp::Shl if is_const(&b) && b.constant < 31 => {
                        scale(&shape, a, 1u64 << b.constant)
                    }
                    _ => return None,
                }
            }
            InstKind::BufStore { root, addr, value } => {
                let stored = &f.insts[*value];
                let zero = matches!(stored.kind, InstKind::Const(c) if c.bits == 0);
                if !zero || !matches!(stored.ty, Type::Scalar(_)) {
                    return None;
                }
                stores.push((*root, form(*addr)?));
                None
            }
            _ => return None,
        };
        if let Some(a) = value {
            if a.max >= LIMIT {
                return None;
            }
        }
        forms[id.index()] = value;
    }
    covered(program, &shape, &stores)
}

fn is_int(t: Type) -> bool {
    matches!(t, Type::Scalar(Scalar::I32 | Scalar::U32))
}

fn is_const(a: &Affine) -> bool {
    a.coeff == [0; 3]
}

fn max_of(shape: &[u32], constant: u64, coeff: [u64; 3]) -> Option<u64> {
    shape.iter().zip(coeff).try_fold(constant, |acc, (&n, a)| {
        acc.checked_add(a.checked_mul(n as u64 - 1)?)
    })
}

/// `op` applied to the constants and to each coefficient of `a` and `b`.
fn combine(
    shape: &[u32],
    a: Affine,
    b: Affine,
    op: impl Fn(u64, u64) -> Option<u64>,
) -> Option<Affine> {
    let constant = op(a.constant, b.constant)?;
    let coeff = [
        op(a.coeff[0], b.coeff[0])?,
        op(a.coeff[1], b.coeff[1])?,
        op(a.coeff[2], b.coeff[2])?,
    ];
    Some(Affine {
        constant,
        coeff,
        max: max_of(shape, constant, coeff)?,
    })
}

fn scale(shape: &[u32], a: Affine, factor: u64) -> Option<Affine> {
    let by = Affine {
        constant: factor,
        coeff: [factor; 3],
        max: factor,
    };
    combine(shape, a, by, |x, y| x.checked_mul(y))
}

/// The word range the stores cover exactly, if they do.
fn covered(program: &Program, shape: &[u32], stores: &[(LayoutId, Affine)]) -> Option<ZeroFill> {
    let (root, first) = *stores.first()?;
    if stores
        .iter()
        .any(|(r, a)| *r != root || a.coeff != first.coeff)
    {
        return None;
    }
    let offsets: BTreeSet<u64> = stores.iter().map(|(_, a)| a.constant).collect();
    let start = *offsets.first()?;
    let run = offsets.len() as u64;
    if *offsets.last()? != start + run - 1 {
        return None;
    }
    let mut axes: Vec<(u64, u64)> = shape
        .iter()
        .zip(first.coeff)
        .filter(|(&n, _)| n > 1)
        .map(|(&n, a)| (a, n as u64))
        .collect();
    axes.sort_unstable();
    let mut stride = run;
    for (a, n) in axes {
        if a != stride {
            return None;
        }
        stride = stride.checked_mul(n)?;
    }
    if start + stride > root_words(program, root) {
        return None;
    }
    Some(ZeroFill {
        root,
        first: start,
        words: stride,
    })
}
