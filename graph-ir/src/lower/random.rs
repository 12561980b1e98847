//! `random()`: the one definition of Weft's random-number generator, as
//! plain IR that `legalize` emits (no backend implements it).
//!
//! The generator is the PCG hash of Jarkko & Olano (2020),
//! "Hash Functions for GPU Rendering":
//!
//! ```text
//! pcg(v)  = let s = v * 747796405 + 2891336453 (wrapping, u32);
//!           let w = ((s >> ((s >> 28) + 4)) ^ s) * 277803737;
//!           (w >> 22) ^ w
//! ```
//!
//! Each invocation of a kernel that calls `random()` (in its entry or in
//! any function it calls) starts with the state
//! `pcg(seed ^ pcg(frame ^ pcg(kernel_hash ^ pcg(launch ^ pcg(linear)))))`
//! ([`LaunchValue`]: the run's seed, how many launches of the node ran
//! before, the invocation's row-major linear index; `frame` as u32 bits;
//! `kernel_hash` the FNV-1a hash of the kernel's name, so a node's numbers
//! do not change when other nodes are edited). Each `random()` advances
//! the state, `s = pcg(s)`, and returns `(s >> 8) as f32 * 2^-24`: 24
//! random bits, uniform in [0, 1), converted exactly.
//!
//! The state lives in `RngLoad` / `RngStore`: one u32 private to the
//! invocation, shared by every function it calls, which is all a backend
//! provides.

use crate::ir::{BinaryOp, Const, InstId, InstKind, LaunchValue};
use crate::types::Type;

/// The PCG hash's multiplier, increment and output multiplier.
const PCG: (u32, u32, u32) = (747796405, 2891336453, 277803737);

/// FNV-1a of a kernel's name: its part of every stream's seed.
pub fn kernel_hash(name: &str) -> u32 {
    name.bytes().fold(0x811c9dc5u32, |h, b| {
        (h ^ b as u32).wrapping_mul(0x01000193)
    })
}

/// Emits `pcg(v)` for a u32 `v`.
pub fn pcg(emit: &mut impl FnMut(InstKind, Type) -> InstId, v: InstId) -> InstId {
    let k = |emit: &mut dyn FnMut(InstKind, Type) -> InstId, c: u32| {
        emit(InstKind::Const(Const::u32(c)), Type::U32)
    };
    let bin = |emit: &mut dyn FnMut(InstKind, Type) -> InstId, op, a, b| {
        emit(InstKind::Binary(op, a, b), Type::U32)
    };
    let (mul, inc, out) = (k(emit, PCG.0), k(emit, PCG.1), k(emit, PCG.2));
    let (c28, c4, c22) = (k(emit, 28), k(emit, 4), k(emit, 22));
    let t = bin(emit, BinaryOp::Mul, v, mul);
    let s = bin(emit, BinaryOp::Add, t, inc);
    let top = bin(emit, BinaryOp::Shr, s, c28);
    let amount = bin(emit, BinaryOp::Add, top, c4);
    let x = bin(emit, BinaryOp::Shr, s, amount);
    let x = bin(emit, BinaryOp::BitXor, x, s);
    let w = bin(emit, BinaryOp::Mul, x, out);
    let hi = bin(emit, BinaryOp::Shr, w, c22);
    bin(emit, BinaryOp::BitXor, hi, w)
}

/// Emits the seeding of the invocation's state (at the top of the entry of
/// a kernel named `kernel` that calls `random()`).
pub fn seed(emit: &mut impl FnMut(InstKind, Type) -> InstId, kernel: &str) {
    let lin = emit(InstKind::Launch(LaunchValue::Linear), Type::U32);
    let launch = emit(InstKind::Launch(LaunchValue::Count), Type::U32);
    let khash = emit(InstKind::Const(Const::u32(kernel_hash(kernel))), Type::U32);
    let frame = emit(InstKind::Frame, Type::I32);
    let frame = emit(InstKind::Bitcast(frame), Type::U32);
    let seed = emit(InstKind::Launch(LaunchValue::Seed), Type::U32);
    let mut h = pcg(emit, lin);
    for word in [launch, khash, frame, seed] {
        let x = emit(InstKind::Binary(BinaryOp::BitXor, word, h), Type::U32);
        h = pcg(emit, x);
    }
    emit(InstKind::RngStore(h), Type::Void);
}

/// Emits one `random()`: advances the state and returns the f32 (emitted last).
pub fn next(emit: &mut impl FnMut(InstKind, Type) -> InstId) -> InstId {
    let s = emit(InstKind::RngLoad, Type::U32);
    let s = pcg(emit, s);
    emit(InstKind::RngStore(s), Type::Void);
    let c8 = emit(InstKind::Const(Const::u32(8)), Type::U32);
    let bits = emit(InstKind::Binary(BinaryOp::Shr, s, c8), Type::U32);
    let f = emit(InstKind::Cast(bits), Type::F32);
    let scale = emit(InstKind::Const(Const::f32(1.0 / 16_777_216.0)), Type::F32);
    emit(InstKind::Binary(BinaryOp::Mul, f, scale), Type::F32)
}
