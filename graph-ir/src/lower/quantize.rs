//! Quantized field access as plain IR: the hook of `passes::lower_access`
//! for fields whose `Storage` is `Quant`.
//!
//! Pre: one abstract `FieldLoad` / `FieldStore` / `FieldAtomic` on a
//! quantized field, and the word address of the word holding the element's
//! first bit (the field's `AddressPlan`, from `passes::lower_access`).
//! Post: only `BufLoad` / `BufStore` / `BufAtomic` on u32 words plus shifts,
//! masks, selects and conversions — no backend sees a quantized type.
//!
//! Encode and decode mirror `ir::quant::Quant::{encode, decode}` operation by
//! operation (same constants, same order, no operation an optimizer may fuse
//! differently), so the host, the VM, the JIT and wgpu agree bit for bit.
//!
//! Stores: a component that owns its whole word (the only thing in a
//! one-word cell) is a plain store. Otherwise other components, fields or
//! cells share the word, so the store is a compare-exchange retry loop
//! (lock-free: a thread only retries when another thread's write landed),
//! which keeps every other bit of the word intact under parallel writes.
//! Atomics decode the old value, apply the operation in the compute type and
//! encode the result inside the same kind of loop.

use super::sparse::Emitter;
use super::words::{assemble, split};
use crate::ir::layout::{AddressPlan, WORD_BITS};
use crate::ir::quant::{mask, Quant, SharedFloat};
use crate::ir::*;
use crate::lower::emit::Build;
use crate::types::{Scalar, Type};

/// Lowers one access; returns the kind for the original handle (the loaded or
/// old value), like `lower_access`'s word path.
pub fn lower(
    e: &mut Emitter,
    p: &Program,
    plan: &AddressPlan,
    q: Quant,
    kind: InstKind,
    base: InstId,
    sub_bits: Option<InstId>,
) -> Option<InstKind> {
    let fty = p.fields[plan.field].ty;
    let root = plan.root;
    // Bit position of component c relative to the word at `base`: constant,
    // because every cell and block size is a whole number of words.
    let pos = |c: usize| (plan.base_bits % WORD_BITS) + c as u64 * plan.component_bits;
    let word_of = |e: &mut Emitter, c: usize| {
        let w = pos(c) / WORD_BITS;
        if w == 0 {
            base
        } else {
            let k = e.u32c(w);
            e.emit(InstKind::Binary(BinaryOp::Add, base, k), Type::U32)
        }
    };
    // In a bit_array the bit inside the word also depends on the index
    // (`sub_bits`, from `passes::lower_access`'s `address`); its one scalar component
    // starts at bit 0 of its cell.
    let shift = |c: usize| match sub_bits {
        Some(s) => Shift::Dyn(s),
        None => Shift::Const((pos(c) % WORD_BITS) as u32),
    };
    let exclusive = owns_word(p, plan);
    match kind {
        InstKind::FieldLoad { .. } => {
            let vals = (0..plan.components)
                .map(|c| {
                    let a = word_of(e, c);
                    let w = e.emit(InstKind::BufLoad { root, addr: a }, Type::U32);
                    let raw = extract(e, q.bits(), w, shift(c));
                    decode(e, q, raw)
                })
                .collect();
            assemble(e, fty, vals)
        }
        InstKind::FieldStore { value, .. } => {
            let parts = split(e, fty, value);
            for (c, part) in parts.into_iter().enumerate() {
                let a = word_of(e, c);
                let rnd = rounding_bits(e, q);
                let enc = encode(e, q, part, rnd);
                if exclusive {
                    e.emit(
                        InstKind::BufStore {
                            root,
                            addr: a,
                            value: enc,
                        },
                        Type::Void,
                    );
                } else {
                    cas_loop(e, root, a, |e, old| {
                        let new = insert(e, q.bits(), old, enc, shift(c));
                        (new, vec![])
                    });
                }
            }
            None
        }
        InstKind::FieldAtomic { op, value, cmp, .. } => {
            let parts = split(e, fty, value);
            let cmp_parts = cmp.map(|c| split(e, fty, c));
            let scalar = q.compute_scalar();
            let olds = parts
                .into_iter()
                .enumerate()
                .map(|(c, part)| {
                    let a = word_of(e, c);
                    let local = e.f.locals.append(Local {
                        name: format!("quant_old{}", c),
                        ty: Type::Scalar(scalar),
                    });
                    let cmpc = cmp_parts.as_ref().map(|cp| cp[c]);
                    let rnd = rounding_bits(e, q);
                    cas_loop(e, root, a, |e, old| {
                        let raw = extract(e, q.bits(), old, shift(c));
                        let oldv = decode(e, q, raw);
                        let newv = apply(e, op, scalar, oldv, part, cmpc);
                        let enc = encode(e, q, newv, rnd);
                        let new = insert(e, q.bits(), old, enc, shift(c));
                        (new, vec![(local, oldv)])
                    });
                    e.emit(InstKind::LocalLoad(local), Type::Scalar(scalar))
                })
                .collect();
            assemble(e, fty, olds)
        }
        _ => unreachable!("only field accesses reach the quantize hook"),
    }
}

/// `lower` for a shared-exponent element (`Storage::Shared`): the whole
/// element is one code inside the word at `base`, so a store re-encodes all
/// components together (one word insertion, a compare-exchange loop unless
/// the element owns its word) and an atomic decodes, applies and re-encodes
/// the whole element in one loop.
pub fn lower_shared(
    e: &mut Emitter,
    p: &Program,
    plan: &AddressPlan,
    s: SharedFloat,
    kind: InstKind,
    base: InstId,
) -> Option<InstKind> {
    let fty = p.fields[plan.field].ty;
    let root = plan.root;
    let shift = Shift::Const((plan.base_bits % WORD_BITS) as u32);
    let width = s.bits();
    let exclusive = {
        let fd = &p.fields[plan.field];
        plan.levels.last().map_or(0, |l| l.cell_bits) == WORD_BITS
            && p.layouts[fd.layout].children == [LayoutChild::Field(plan.field)]
    };
    match kind {
        InstKind::FieldLoad { .. } => {
            let w = e.emit(InstKind::BufLoad { root, addr: base }, Type::U32);
            let raw = extract(e, width, w, shift);
            let vals = (0..plan.components)
                .map(|c| decode_shared(e, s, raw, c))
                .collect();
            assemble(e, fty, vals)
        }
        InstKind::FieldStore { value, .. } => {
            let parts = split(e, fty, value);
            let rnd = shared_rounding_bits(e, s);
            let code = encode_shared(e, s, &parts, rnd);
            if exclusive {
                e.emit(
                    InstKind::BufStore {
                        root,
                        addr: base,
                        value: code,
                    },
                    Type::Void,
                );
            } else {
                cas_loop(e, root, base, |e, old| {
                    (insert(e, width, old, code, shift), vec![])
                });
            }
            None
        }
        InstKind::FieldAtomic { op, value, cmp, .. } => {
            let parts = split(e, fty, value);
            let cmp_parts = cmp.map(|c| split(e, fty, c));
            let locals: Vec<LocalId> = (0..plan.components)
                .map(|c| {
                    e.f.locals.append(Local {
                        name: format!("quant_old{}", c),
                        ty: Type::F32,
                    })
                })
                .collect();
            let rnd = shared_rounding_bits(e, s);
            cas_loop(e, root, base, |e, old| {
                let raw = extract(e, width, old, shift);
                let mut saves = vec![];
                let mut news = vec![];
                for (c, &part) in parts.iter().enumerate() {
                    let oldv = decode_shared(e, s, raw, c);
                    let cmpc = cmp_parts.as_ref().map(|cp| cp[c]);
                    news.push(apply(e, op, Scalar::F32, oldv, part, cmpc));
                    saves.push((locals[c], oldv));
                }
                let code = encode_shared(e, s, &news, rnd);
                (insert(e, width, old, code, shift), saves)
            });
            let olds = locals
                .into_iter()
                .map(|l| e.emit(InstKind::LocalLoad(l), Type::F32))
                .collect();
            assemble(e, fty, olds)
        }
        _ => unreachable!("only field accesses reach the quantize hook"),
    }
}

/// `SharedFloat::decode` as IR: component `c` of the element code `raw`.
fn decode_shared(e: &mut Emitter, s: SharedFloat, raw: InstId, c: usize) -> InstId {
    let (bias, _, _) = s.consts();
    let m_bits = s.frac as u32;
    let ex = binc(e, BinaryOp::BitAnd, raw, mask(s.exp as u32));
    let k = binc(e, BinaryOp::Add, ex, 128 - bias - m_bits);
    let k = binc(e, BinaryOp::Shl, k, 23);
    let scale = e.emit(InstKind::Bitcast(k), Type::F32);
    let lane = binc(e, BinaryOp::Shr, raw, s.lane_shift(c));
    let lane = binc(e, BinaryOp::BitAnd, lane, mask(s.lane_bits()));
    let m = binc(e, BinaryOp::BitAnd, lane, mask(m_bits));
    let mf = e.emit(InstKind::Cast(m), Type::F32);
    let v = bin(e, BinaryOp::Mul, mf, scale, Type::F32);
    let mut bits = e.emit(InstKind::Bitcast(v), Type::U32);
    if s.signed {
        let sb = binc(e, BinaryOp::Shr, lane, m_bits);
        let sb = binc(e, BinaryOp::Shl, sb, 31);
        bits = bin(e, BinaryOp::BitOr, bits, sb, Type::U32);
    }
    e.emit(InstKind::Bitcast(bits), Type::F32)
}

/// 24 random bits for a stochastic shared-exponent store (one draw per
/// element store, outside any retry loop), as `rounding_bits`.
fn shared_rounding_bits(e: &mut Emitter, s: SharedFloat) -> Option<InstId> {
    if !s.stochastic() {
        return None;
    }
    let r = e.emit(InstKind::Random, Type::F32);
    let k = cf(e, 16_777_216.0);
    let r = bin(e, BinaryOp::Mul, r, k, Type::F32);
    Some(e.emit(InstKind::Cast(r), Type::U32))
}

/// `SharedFloat::encode` (with `r24`: `encode_stochastic`) as IR: the
/// element's compute values to its code.
fn encode_shared(e: &mut Emitter, s: SharedFloat, parts: &[InstId], r24: Option<InstId>) -> InstId {
    let (bias, max_bits, emax) = s.consts();
    let m_bits = s.frac as u32;
    let zero = cu(e, 0);
    let maxc = cu(e, max_bits);
    // (sign, clamped magnitude bits) per component.
    let mags: Vec<(InstId, InstId)> = parts
        .iter()
        .map(|&v| {
            let vb = e.emit(InstKind::Bitcast(v), Type::U32);
            let sg = binc(e, BinaryOp::Shr, vb, 31);
            let mut a = binc(e, BinaryOp::BitAnd, vb, 0x7fff_ffff);
            if !s.signed {
                let neg = bin(e, BinaryOp::Ne, sg, zero, Type::U32);
                a = sel(e, neg, zero, a, Type::U32);
            }
            let big = bin(e, BinaryOp::Gt, a, maxc, Type::U32);
            (sg, sel(e, big, maxc, a, Type::U32))
        })
        .collect();
    let mut amax = mags[0].1;
    for &(_, a) in &mags[1..] {
        let gt = bin(e, BinaryOp::Gt, a, amax, Type::U32);
        amax = sel(e, gt, a, amax, Type::U32);
    }
    let ea = binc(e, BinaryOp::Shr, amax, 23);
    let lim = cu(e, 127 - bias);
    let above = bin(e, BinaryOp::Gt, ea, lim, Type::U32);
    let d = bin(e, BinaryOp::Sub, ea, lim, Type::U32);
    let e0 = sel(e, above, d, zero, Type::U32);
    // Round `a` to the grid of exponent `ex` (see `SharedFloat::encode`).
    let round = |e: &mut Emitter, a: InstId, ex: InstId| {
        let x = binc(e, BinaryOp::Shr, a, 23);
        let zero = cu(e, 0);
        let is0 = bin(e, BinaryOp::Eq, x, zero, Type::U32);
        let imp = cu(e, 1 << 23);
        let imp = sel(e, is0, zero, imp, Type::U32);
        let sig = binc(e, BinaryOp::BitAnd, a, 0x7f_ffff);
        let mut sig = bin(e, BinaryOp::BitOr, sig, imp, Type::U32);
        let one = cu(e, 1);
        let x1 = sel(e, is0, one, x, Type::U32);
        let t = binc(e, BinaryOp::Add, ex, 151 - bias - m_bits);
        let full = bin(e, BinaryOp::Sub, t, x1, Type::U32);
        let c31 = cu(e, 31);
        let over = bin(e, BinaryOp::Gt, full, c31, Type::U32);
        let sh = sel(e, over, c31, full, Type::U32);
        let below = match r24 {
            None => {
                let half = bin(e, BinaryOp::Shl, one, sh, Type::U32);
                binc(e, BinaryOp::Shr, half, 1)
            }
            Some(r) => {
                let d = bin(e, BinaryOp::Sub, full, sh, Type::U32);
                let big = bin(e, BinaryOp::Gt, d, c31, Type::U32);
                let d = sel(e, big, c31, d, Type::U32);
                sig = bin(e, BinaryOp::Shr, sig, d, Type::U32);
                let hi = binc(e, BinaryOp::Shl, r, 8);
                let hi = binc(e, BinaryOp::Shr, hi, 1);
                let k = bin(e, BinaryOp::Sub, c31, sh, Type::U32);
                bin(e, BinaryOp::Shr, hi, k, Type::U32)
            }
        };
        let r = bin(e, BinaryOp::Add, sig, below, Type::U32);
        bin(e, BinaryOp::Shr, r, sh, Type::U32)
    };
    let top = round(e, amax, e0);
    let carry = binc(e, BinaryOp::Shr, top, m_bits);
    let ex = bin(e, BinaryOp::Add, e0, carry, Type::U32);
    let emc = cu(e, emax);
    let over = bin(e, BinaryOp::Gt, ex, emc, Type::U32);
    let ex = sel(e, over, emc, ex, Type::U32);
    let mmax = cu(e, mask(m_bits));
    let mut code = ex;
    for (c, &(sg, a)) in mags.iter().enumerate() {
        let m = round(e, a, ex);
        let big = bin(e, BinaryOp::Gt, m, mmax, Type::U32);
        let mut lane = sel(e, big, mmax, m, Type::U32);
        if s.signed {
            let sb = binc(e, BinaryOp::Shl, sg, m_bits);
            lane = bin(e, BinaryOp::BitOr, sb, lane, Type::U32);
        }
        let lane = binc(e, BinaryOp::Shl, lane, s.lane_shift(c));
        code = bin(e, BinaryOp::BitOr, code, lane, Type::U32);
    }
    code
}

/// Whether the element is the only thing stored in its one-word cell, so a
/// plain store of the whole word cannot clobber anything else.
fn owns_word(p: &Program, plan: &AddressPlan) -> bool {
    let fd = &p.fields[plan.field];
    let own_cell_bits = plan.levels.last().map_or(0, |l| l.cell_bits);
    plan.components == 1
        && own_cell_bits == WORD_BITS
        && p.layouts[fd.layout].children == [LayoutChild::Field(plan.field)]
}

/// `loop { old = load; new = f(old); if cas(addr, new, old) == old { break } }`.
/// `f` may ask for values computed from `old` to be saved in locals when
/// the exchange succeeds (the old values an atomic returns).
fn cas_loop(
    e: &mut Emitter,
    root: LayoutId,
    addr: InstId,
    f: impl FnOnce(&mut Emitter, InstId) -> (InstId, Vec<(LocalId, InstId)>),
) {
    let outer = std::mem::take(&mut e.out);
    let old = e.emit(InstKind::BufLoad { root, addr }, Type::U32);
    let (new, save) = f(e, old);
    let prev = e.emit(
        InstKind::BufAtomic {
            op: AtomicOp::CompareExchange,
            root,
            addr,
            value: new,
            cmp: Some(old),
        },
        Type::U32,
    );
    let done = e.emit(InstKind::Binary(BinaryOp::Eq, prev, old), Type::BOOL);
    let before_if = std::mem::take(&mut e.out);
    for (local, v) in save {
        e.emit(InstKind::LocalStore(local, v), Type::Void);
    }
    e.emit(InstKind::Break, Type::Void);
    let accept = std::mem::take(&mut e.out);
    e.out = before_if;
    e.emit(
        InstKind::If {
            cond: done,
            accept,
            reject: vec![],
        },
        Type::Void,
    );
    let body = std::mem::replace(&mut e.out, outer);
    e.emit(InstKind::Loop { body }, Type::Void);
}

/// The new value of an atomic read-modify-write, in the compute type.
fn apply(
    e: &mut Emitter,
    op: AtomicOp,
    s: Scalar,
    old: InstId,
    v: InstId,
    cmp: Option<InstId>,
) -> InstId {
    let t = Type::Scalar(s);
    let bin = |e: &mut Emitter, o| e.emit(InstKind::Binary(o, old, v), t);
    match op {
        AtomicOp::Add => bin(e, BinaryOp::Add),
        AtomicOp::Sub => bin(e, BinaryOp::Sub),
        AtomicOp::And => bin(e, BinaryOp::BitAnd),
        AtomicOp::Or => bin(e, BinaryOp::BitOr),
        AtomicOp::Xor => bin(e, BinaryOp::BitXor),
        AtomicOp::Min => e.emit(InstKind::Builtin(Builtin::Min, vec![old, v]), t),
        AtomicOp::Max => e.emit(InstKind::Builtin(Builtin::Max, vec![old, v]), t),
        AtomicOp::Exchange => v,
        AtomicOp::CompareExchange => {
            let c = cmp.expect("compare_exchange has a comparand");
            let eq = e.emit(InstKind::Binary(BinaryOp::Eq, old, c), Type::BOOL);
            e.emit(
                InstKind::Select {
                    cond: eq,
                    accept: v,
                    reject: old,
                },
                t,
            )
        }
    }
}

fn cu(e: &mut Emitter, v: u32) -> InstId {
    e.emit(InstKind::Const(Const::u32(v)), Type::U32)
}
fn ci(e: &mut Emitter, v: i32) -> InstId {
    e.emit(InstKind::Const(Const::i32(v)), Type::I32)
}
fn cf(e: &mut Emitter, v: f32) -> InstId {
    e.emit(InstKind::Const(Const::f32(v)), Type::F32)
}
fn bin(e: &mut Emitter, op: BinaryOp, a: InstId, b: InstId, t: Type) -> InstId {
    let ty = if op.is_comparison() { Type::BOOL } else { t };
    e.emit(InstKind::Binary(op, a, b), ty)
}
/// u32 `a op k` for a constant `k`.
fn binc(e: &mut Emitter, op: BinaryOp, a: InstId, k: u32) -> InstId {
    let k = cu(e, k);
    bin(e, op, a, k, Type::U32)
}
fn sel(e: &mut Emitter, cond: InstId, accept: InstId, reject: InstId, t: Type) -> InstId {
    e.emit(
        InstKind::Select {
            cond,
            accept,
            reject,
        },
        t,
    )
}

/// Where a component's bits start inside its word: known when compiling, or
/// (inside a `bit_array`) computed from the index, always below 32.
#[derive(Clone, Copy)]
enum Shift {
    Const(u32),
    Dyn(InstId),
}

/// The component's `bits()` low bits, from the word `w` at bit `shift`.
fn extract(e: &mut Emitter, width: u32, w: InstId, shift: Shift) -> InstId {
    let shift = match shift {
        Shift::Const(k) => k,
        Shift::Dyn(s) => {
            let x = bin(e, BinaryOp::Shr, w, s, Type::U32);
            return binc(e, BinaryOp::BitAnd, x, mask(width));
        }
    };
    let mut x = w;
    if shift > 0 {
        x = binc(e, BinaryOp::Shr, x, shift);
    }
    if shift + width < 32 {
        x = binc(e, BinaryOp::BitAnd, x, mask(width));
    }
    x
}

/// `old` with the component's bits at `shift` replaced by `enc`.
fn insert(e: &mut Emitter, width: u32, old: InstId, enc: InstId, shift: Shift) -> InstId {
    let shift = match shift {
        Shift::Const(k) => k,
        Shift::Dyn(s) => {
            let m = cu(e, mask(width));
            let m = bin(e, BinaryOp::Shl, m, s, Type::U32);
            let keep = binc(e, BinaryOp::BitXor, m, u32::MAX);
            let cleared = bin(e, BinaryOp::BitAnd, old, keep, Type::U32);
            let moved = bin(e, BinaryOp::Shl, enc, s, Type::U32);
            return bin(e, BinaryOp::BitOr, cleared, moved, Type::U32);
        }
    };
    let m = if width >= 32 {
        u32::MAX
    } else {
        mask(width) << shift
    };
    let cleared = binc(e, BinaryOp::BitAnd, old, !m);
    let moved = if shift > 0 {
        binc(e, BinaryOp::Shl, enc, shift)
    } else {
        enc
    };
    bin(e, BinaryOp::BitOr, cleared, moved, Type::U32)
}

/// `Quant::decode` as IR: raw low bits (u32) to the compute value.
fn decode(e: &mut Emitter, q: Quant, raw: InstId) -> InstId {
    match q {
        Quant::Int { bits, signed, .. } => {
            if signed {
                let k = 32 - bits as u32;
                let up = binc(e, BinaryOp::Shl, raw, k);
                let up = e.emit(InstKind::Bitcast(up), Type::I32);
                let kk = ci(e, k as i32);
                bin(e, BinaryOp::Shr, up, kk, Type::I32)
            } else {
                // `lower_access` moves the last emitted instruction into the
                // original handle: give it one of its own.
                e.emit(InstKind::Bitcast(raw), Type::U32)
            }
        }
        Quant::Fixed { .. } => {
            let (scale, _, off) = q.fixed_consts();
            let x = e.emit(InstKind::Cast(raw), Type::F32);
            let o = cf(e, off);
            let x = bin(e, BinaryOp::Add, x, o, Type::F32);
            let s = cf(e, scale);
            bin(e, BinaryOp::Mul, x, s, Type::F32)
        }
        Quant::Float {
            exp, frac, signed, ..
        } => {
            let (bias, _) = q.float_consts();
            let fr = frac as u32;
            let mag = binc(e, BinaryOp::BitAnd, raw, mask(exp as u32 + fr));
            let ex = binc(e, BinaryOp::Shr, mag, fr);
            let zero = cu(e, 0);
            let is_den = bin(e, BinaryOp::Eq, ex, zero, Type::U32);
            let mf = e.emit(InstKind::Cast(mag), Type::F32);
            let k = cf(e, f32::from_bits((127 + 1 - bias - fr) << 23));
            let den = bin(e, BinaryOp::Mul, mf, k, Type::F32);
            let den = e.emit(InstKind::Bitcast(den), Type::U32);
            let norm = binc(e, BinaryOp::Shl, mag, 23 - fr);
            let norm = binc(e, BinaryOp::Add, norm, (127 - bias) << 23);
            let mut bits = sel(e, is_den, den, norm, Type::U32);
            if signed {
                let s = binc(e, BinaryOp::Shr, raw, exp as u32 + fr);
                let s = binc(e, BinaryOp::Shl, s, 31);
                bits = bin(e, BinaryOp::BitOr, bits, s, Type::U32);
            }
            e.emit(InstKind::Bitcast(bits), Type::F32)
        }
        Quant::Half => {
            let bits = half_decode(e, raw);
            e.emit(InstKind::Bitcast(bits), Type::F32)
        }
    }
}

/// `quant::half_decode` as IR: binary16 bits (low 16 of a u32) to the f32's
/// bits (u32). Also used by `lower::half` for f16 compute values.
pub(crate) fn half_decode(e: &mut Emitter, raw: InstId) -> InstId {
    let s = binc(e, BinaryOp::BitAnd, raw, 0x8000);
    let s = binc(e, BinaryOp::Shl, s, 16);
    let ex = binc(e, BinaryOp::Shr, raw, 10);
    let ex = binc(e, BinaryOp::BitAnd, ex, 0x1f);
    let m = binc(e, BinaryOp::BitAnd, raw, 0x3ff);
    let mf = e.emit(InstKind::Cast(m), Type::F32);
    let k = cf(e, f32::from_bits(103 << 23));
    let den = bin(e, BinaryOp::Mul, mf, k, Type::F32);
    let den = e.emit(InstKind::Bitcast(den), Type::U32);
    let normal = binc(e, BinaryOp::BitAnd, raw, 0x7fff);
    let normal = binc(e, BinaryOp::Shl, normal, 13);
    let normal = binc(e, BinaryOp::Add, normal, 112 << 23);
    let special = binc(e, BinaryOp::Shl, m, 13);
    let special = binc(e, BinaryOp::BitOr, special, 0x7f80_0000);
    let c31 = cu(e, 31);
    let is_special = bin(e, BinaryOp::Eq, ex, c31, Type::U32);
    let mag = sel(e, is_special, special, normal, Type::U32);
    let zero = cu(e, 0);
    let is_den = bin(e, BinaryOp::Eq, ex, zero, Type::U32);
    let mag = sel(e, is_den, den, mag, Type::U32);
    bin(e, BinaryOp::BitOr, s, mag, Type::U32)
}

/// `quant::half_encode` as IR: an f32 (value `v`) to binary16 bits in the
/// low 16 of a u32, round to nearest even. Also used by `lower::half`.
pub(crate) fn half_encode(e: &mut Emitter, v: InstId) -> InstId {
    let vb = e.emit(InstKind::Bitcast(v), Type::U32);
    let s = binc(e, BinaryOp::Shr, vb, 16);
    let s = binc(e, BinaryOp::BitAnd, s, 0x8000);
    let a = binc(e, BinaryOp::BitAnd, vb, 0x7fff_ffff);
    // Normal: rebias, add 0xfff plus the lowest kept bit, drop 13 bits.
    let h = binc(e, BinaryOp::Sub, a, 112 << 23);
    let odd = binc(e, BinaryOp::Shr, h, 13);
    let odd = binc(e, BinaryOp::BitAnd, odd, 1);
    let n = binc(e, BinaryOp::Add, h, 0xfff);
    let n = bin(e, BinaryOp::Add, n, odd, Type::U32);
    let normal = binc(e, BinaryOp::Shr, n, 13);
    // Denormal: significand >> min(126 - e, 31), same even rounding.
    let ex = binc(e, BinaryOp::Shr, a, 23);
    let k126 = cu(e, 126);
    let full = bin(e, BinaryOp::Sub, k126, ex, Type::U32);
    let c31 = cu(e, 31);
    let over = bin(e, BinaryOp::Gt, full, c31, Type::U32);
    let sh = sel(e, over, c31, full, Type::U32);
    let m = binc(e, BinaryOp::BitAnd, a, 0x7f_ffff);
    let m = binc(e, BinaryOp::BitOr, m, 1 << 23);
    let one = cu(e, 1);
    let half = bin(e, BinaryOp::Shl, one, sh, Type::U32);
    let half = binc(e, BinaryOp::Shr, half, 1);
    let half = binc(e, BinaryOp::Sub, half, 1);
    let lsb = bin(e, BinaryOp::Shr, m, sh, Type::U32);
    let lsb = binc(e, BinaryOp::BitAnd, lsb, 1);
    let d = bin(e, BinaryOp::Add, m, half, Type::U32);
    let d = bin(e, BinaryOp::Add, d, lsb, Type::U32);
    let den = bin(e, BinaryOp::Shr, d, sh, Type::U32);
    let min_normal = cu(e, 0x3880_0000);
    let is_normal = bin(e, BinaryOp::Ge, a, min_normal, Type::U32);
    let mag = sel(e, is_normal, normal, den, Type::U32);
    let inf_from = cu(e, 0x477f_f000);
    let is_inf = bin(e, BinaryOp::Ge, a, inf_from, Type::U32);
    let inf = cu(e, 0x7c00);
    let mag = sel(e, is_inf, inf, mag, Type::U32);
    let inf32 = cu(e, 0x7f80_0000);
    let is_nan = bin(e, BinaryOp::Gt, a, inf32, Type::U32);
    let qnan = cu(e, 0x7e00);
    let mag = sel(e, is_nan, qnan, mag, Type::U32);
    bin(e, BinaryOp::BitOr, s, mag, Type::U32)
}

/// 24 random bits of the iteration's sequence as a u32 (`random()` is
/// exactly `bits * 2^-24`), for stochastic rounding; `None` otherwise.
/// Drawn once per store, outside any retry loop, so every backend draws the
/// same numbers.
fn rounding_bits(e: &mut Emitter, q: Quant) -> Option<InstId> {
    if !q.stochastic() {
        return None;
    }
    let r = e.emit(InstKind::Random, Type::F32);
    let k = cf(e, 16_777_216.0);
    let r = bin(e, BinaryOp::Mul, r, k, Type::F32);
    Some(e.emit(InstKind::Cast(r), Type::U32))
}

/// `Quant::encode` (with `r24`: `Quant::encode_stochastic`) as IR: a
/// compute value to raw low bits (u32).
fn encode(e: &mut Emitter, q: Quant, v: InstId, r24: Option<InstId>) -> InstId {
    match q {
        Quant::Int { bits, signed, wrap } => {
            let m = mask(bits as u32);
            let u = e.emit(InstKind::Bitcast(v), Type::U32);
            if wrap {
                return binc(e, BinaryOp::BitAnd, u, m);
            }
            if signed {
                let (lo, hi) = (
                    (-1i64 << (bits - 1)) as i32,
                    ((1i64 << (bits - 1)) - 1) as i32,
                );
                let lo_c = ci(e, lo);
                let below = bin(e, BinaryOp::Lt, v, lo_c, Type::I32);
                let x = sel(e, below, lo_c, v, Type::I32);
                let hi_c = ci(e, hi);
                let above = bin(e, BinaryOp::Gt, x, hi_c, Type::I32);
                let x = sel(e, above, hi_c, x, Type::I32);
                let x = e.emit(InstKind::Bitcast(x), Type::U32);
                binc(e, BinaryOp::BitAnd, x, m)
            } else {
                let m_c = cu(e, m);
                let above = bin(e, BinaryOp::Gt, u, m_c, Type::U32);
                sel(e, above, m_c, u, Type::U32)
            }
        }
        Quant::Fixed { bits, lo, .. } => {
            let (_, inv, _) = q.fixed_consts();
            let qmax = mask(bits as u32) as f32;
            let lo_c = cf(e, f32::from_bits(lo));
            let t = bin(e, BinaryOp::Sub, v, lo_c, Type::F32);
            let inv_c = cf(e, inv);
            let t = bin(e, BinaryOp::Mul, t, inv_c, Type::F32);
            // Comparisons are false for NaN, which therefore stores as code 0.
            let z = cf(e, 0.0);
            let pos = bin(e, BinaryOp::Gt, t, z, Type::F32);
            let t = sel(e, pos, t, z, Type::F32);
            let qm = cf(e, qmax);
            let below = bin(e, BinaryOp::Lt, t, qm, Type::F32);
            let t = sel(e, below, t, qm, Type::F32);
            if let Some(r) = r24 {
                let ti = e.emit(InstKind::Builtin(Builtin::Floor, vec![t]), Type::F32);
                let fr = bin(e, BinaryOp::Sub, t, ti, Type::F32);
                let u = e.emit(InstKind::Cast(r), Type::F32);
                let k = cf(e, 1.0 / 16_777_216.0);
                let u = bin(e, BinaryOp::Mul, u, k, Type::F32);
                let up = bin(e, BinaryOp::Gt, fr, u, Type::F32);
                let one = cu(e, 1);
                let zero = cu(e, 0);
                let inc = sel(e, up, one, zero, Type::U32);
                let ti = e.emit(InstKind::Cast(ti), Type::U32);
                return bin(e, BinaryOp::Add, ti, inc, Type::U32);
            }
            let h = cf(e, 0.5);
            let t = bin(e, BinaryOp::Add, t, h, Type::F32);
            let t = e.emit(InstKind::Builtin(Builtin::Floor, vec![t]), Type::F32);
            e.emit(InstKind::Cast(t), Type::U32)
        }
        Quant::Float {
            exp, frac, signed, ..
        } => {
            let (bias, max_bits) = q.float_consts();
            let fr = frac as u32;
            let vb = e.emit(InstKind::Bitcast(v), Type::U32);
            let s = binc(e, BinaryOp::Shr, vb, 31);
            let mut a = binc(e, BinaryOp::BitAnd, vb, 0x7fff_ffff);
            let zero = cu(e, 0);
            if !signed {
                let neg = bin(e, BinaryOp::Ne, s, zero, Type::U32);
                a = sel(e, neg, zero, a, Type::U32);
            }
            let maxc = cu(e, max_bits);
            let big = bin(e, BinaryOp::Gt, a, maxc, Type::U32);
            let a = sel(e, big, maxc, a, Type::U32);
            let ex = binc(e, BinaryOp::Shr, a, 23);
            // Normal range: round the fraction by adding half an ulp (a carry
            // correctly bumps the exponent), then rebias.
            // Added below the kept bits: half of them, or random bits
            // (`(r24 << 8) >> 1 >> (31 - k)`, as `Quant::encode_rounding`).
            let n = match r24 {
                None => binc(e, BinaryOp::Add, a, (1u32 << (23 - fr)) >> 1),
                Some(r) => {
                    let hi = binc(e, BinaryOp::Shl, r, 8);
                    let hi = binc(e, BinaryOp::Shr, hi, 1);
                    let add = binc(e, BinaryOp::Shr, hi, 31 - (23 - fr));
                    bin(e, BinaryOp::Add, a, add, Type::U32)
                }
            };
            let n = binc(e, BinaryOp::Shr, n, 23 - fr);
            let normal = binc(e, BinaryOp::Sub, n, (127 - bias) << fr);
            // Denormal range: shift the full significand right, rounding.
            let is_zero_e = bin(e, BinaryOp::Eq, ex, zero, Type::U32);
            let one = cu(e, 1);
            let e1 = sel(e, is_zero_e, one, ex, Type::U32);
            let kc = cu(e, 151 - bias - fr);
            let full = bin(e, BinaryOp::Sub, kc, e1, Type::U32);
            let c31 = cu(e, 31);
            let over = bin(e, BinaryOp::Gt, full, c31, Type::U32);
            let sh = sel(e, over, c31, full, Type::U32);
            let m = binc(e, BinaryOp::BitAnd, a, 0x7f_ffff);
            let implicit = cu(e, 1 << 23);
            let imp = sel(e, is_zero_e, zero, implicit, Type::U32);
            let mut m = bin(e, BinaryOp::BitOr, m, imp, Type::U32);
            if r24.is_some() {
                let d = bin(e, BinaryOp::Sub, full, sh, Type::U32);
                let big = bin(e, BinaryOp::Gt, d, c31, Type::U32);
                let d = sel(e, big, c31, d, Type::U32);
                m = bin(e, BinaryOp::Shr, m, d, Type::U32);
            }
            let add = match r24 {
                None => {
                    let r = bin(e, BinaryOp::Shl, one, sh, Type::U32);
                    binc(e, BinaryOp::Shr, r, 1)
                }
                Some(r) => {
                    let hi = binc(e, BinaryOp::Shl, r, 8);
                    let hi = binc(e, BinaryOp::Shr, hi, 1);
                    let k = bin(e, BinaryOp::Sub, c31, sh, Type::U32);
                    bin(e, BinaryOp::Shr, hi, k, Type::U32)
                }
            };
            let m = bin(e, BinaryOp::Add, m, add, Type::U32);
            let den = bin(e, BinaryOp::Shr, m, sh, Type::U32);
            let lim = cu(e, 127 - bias);
            let is_norm = bin(e, BinaryOp::Gt, ex, lim, Type::U32);
            let mag = sel(e, is_norm, normal, den, Type::U32);
            if signed {
                let sb = binc(e, BinaryOp::Shl, s, exp as u32 + fr);
                bin(e, BinaryOp::BitOr, sb, mag, Type::U32)
            } else {
                mag
            }
        }
        Quant::Half => half_encode(e, v),
    }
}

/// A compare-exchange retry loop exactly as `cas_loop` emits it, found again
/// by the passes that rewrite such loops (`store_fusion`, `atomic_demotion`):
///
/// ```text
/// loop { load = buf_load R[addr]; compute…; cas = buf_atomic_compare_exchange
///        R[addr], new, cmp load; eq = cas == load; if eq { saves…; break } }
/// ```
///
/// `compute` is pure and reads no memory, so the loop's only effects are the
/// word it replaces and the locals of `saves` (an atomic's old value).
#[derive(Clone, Debug)]
pub struct CasLoop {
    pub root: LayoutId,
    pub addr: InstId,
    pub load: InstId,
    pub compute: Vec<InstId>,
    pub new: InstId,
    pub cas: InstId,
    pub eq: InstId,
    pub branch: InstId,
    /// `LocalStore`s in the accept branch, before its `break`.
    pub saves: Vec<InstId>,
}

pub fn match_cas_loop(f: &Function, h: InstId) -> Option<CasLoop> {
    let InstKind::Loop { body } = &f.insts[h].kind else {
        return None;
    };
    let n = body.len();
    if n < 4 {
        return None;
    }
    let (load, cas, eq, branch) = (body[0], body[n - 3], body[n - 2], body[n - 1]);
    let InstKind::BufLoad { root, addr } = f.insts[load].kind else {
        return None;
    };
    let InstKind::BufAtomic {
        op: AtomicOp::CompareExchange,
        root: r2,
        addr: a2,
        value: new,
        cmp: Some(cmp),
    } = f.insts[cas].kind
    else {
        return None;
    };
    if r2 != root || a2 != addr || cmp != load {
        return None;
    }
    if !matches!(f.insts[eq].kind, InstKind::Binary(BinaryOp::Eq, a, b) if a == cas && b == load) {
        return None;
    }
    let InstKind::If {
        cond,
        accept,
        reject,
    } = &f.insts[branch].kind
    else {
        return None;
    };
    let (last, saves) = accept.split_last()?;
    if *cond != eq
        || !reject.is_empty()
        || !matches!(f.insts[*last].kind, InstKind::Break)
        || !saves
            .iter()
            .all(|&s| matches!(f.insts[s].kind, InstKind::LocalStore(..)))
    {
        return None;
    }
    let compute = body[1..n - 3].to_vec();
    let reads_nothing = compute.iter().all(|&c| {
        let k = &f.insts[c].kind;
        k.is_pure()
            && !matches!(
                k,
                InstKind::BufLoad { .. } | InstKind::FieldLoad { .. } | InstKind::LocalLoad(_)
            )
    });
    reads_nothing.then(|| CasLoop {
        root,
        addr,
        load,
        compute,
        new,
        cas,
        eq,
        branch,
        saves: saves.to_vec(),
    })
}
