//! Rewrites everything a backend would otherwise re-implement by hand into
//! plain IR, so the semantics live once, here.
//!
//! Pre: valid lowered IR (`IrForm::Lowered`), after the last simplification,
//! and the target's capabilities ([`TargetCaps`]).
//! Post: valid `IrForm::Legalized` IR in which
//! - bounds checks are `if (u32(index) >= extent) { trap }` and a range
//!   loop's step is checked by `if (step <= 0) { trap }` before the loop;
//!   each `Trap` names a `Kernel::fault_sites` entry that says what to report;
//!   in the entry of a kernel with barriers on a target with workgroups
//!   these sites resume (`FaultSite::resume`) and everything after a check
//!   uses the checked value made safe (`select(bad, 0, index)`, a step of
//!   1), so a fault never makes a block's control flow diverge (see
//!   [`Checks`]);
//! - `determinant` / `inverse` are cofactor expansions in scalar arithmetic,
//!   in exactly the reference interpreter's order of operations;
//! - float → integer casts saturate explicitly (NaN → 0, out of range →
//!   the type's min/max), so the remaining `Cast` only sees in-range values;
//! - `sign` of unsigned values is `min(x, 1)`;
//! - integer `/` and `%` only see operands a native division cannot fault
//!   on: where the divisor may be 0 (or, for i32, -1 with an `i32::MIN`
//!   dividend) it is replaced by 1, which gives Weft's rules (`eval::binary`,
//!   WGSL's): `x / 0 == x`, `x % 0 == 0`, `i32::MIN / -1 == i32::MIN`,
//!   `i32::MIN % -1 == 0`. A constant divisor that cannot fault is left
//!   alone (no added work), a constant zero becomes a constant one (no
//!   constant zero divisor for a shader validator to refuse), anything
//!   else gets `select`s (see [`safe_divisor`]);
//! - a range loop is a `Loop` over locals holding the next counter value,
//!   the iterations left and a `more` flag (see [`range_loop`]); no
//!   `RangeFor` or `LoopCounter` remains;
//! - `random()` is the generator of `lower::random` on the invocation's
//!   state (`RngLoad` / `RngStore`), seeded at the top of the entry of a
//!   kernel that calls it anywhere;
//! - an atomic read-modify-write the target lacks ([`TargetCaps`]) is a
//!   compare-exchange loop on the word's bits ([`cas_loop`]);
//! - integer `dot` is a sum of component products and `outer` builds its
//!   columns as `a * b[j]`;
//! - on a target with `loose_float_builtins`, float `fma`, `lerp`, `min`,
//!   `max`, `clamp` and `saturate` are plain arithmetic, compares and
//!   selects with `eval`'s meaning ([`float_builtin`]), and f64 `round`
//!   is written from `floor` ([`round_ties_even`]);
//! - on a target with a `loop_trip_limit`, every loop head counts the
//!   invocation's trips and traps before the target would leave a loop
//!   early ([`count_loop_trips`]).
//!
//! Nothing is simplified after the rewrite. Every rewrite computes the same bits as `ir::eval` / the
//! interpreter did before it, so results do not change.

use crate::ir::*;
use crate::lower::emit::Build;
use crate::lower::random;
use crate::lower::sparse::Emitter;
use crate::types::{Scalar, Type};
use std::collections::HashMap;

pub use crate::ir::target::TargetCaps;

pub fn run(program: &mut Program, caps: &TargetCaps) {
    program.target = *caps;
    for k in program.kernels.handles().collect::<Vec<_>>() {
        let kernel = &mut program.kernels[k];
        let random = std::iter::once(&kernel.entry)
            .chain(kernel.functions.iter().map(|(_, f)| f))
            .any(|f| {
                f.insts
                    .iter()
                    .any(|(_, i)| matches!(i.kind, InstKind::Random))
            });
        let mut sites = std::mem::take(&mut kernel.fault_sites);
        // Where invocations wait for each other, a check that failed must
        // not stop its invocation before a barrier (see `Checks::resume`).
        let barriers = kernel
            .entry
            .insts
            .iter()
            .any(|(_, i)| matches!(i.kind, InstKind::Barrier));
        let caps = &KernelCaps {
            caps: *caps,
            shared_roots: shared_atomic_roots(kernel),
        };
        let mut checks = Checks {
            resume: caps.caps.workgroups && kernel.workgroup.is_some() && barriers,
            subst: HashMap::new(),
        };
        legalize_function(&mut kernel.entry, &mut sites, caps, &mut checks);
        // A trap in a helper returns to its caller, which goes on, so only
        // the entry's own checks need to resume.
        let mut helper_checks = Checks {
            resume: false,
            subst: HashMap::new(),
        };
        for fid in kernel.functions.handles().collect::<Vec<_>>() {
            legalize_function(
                &mut kernel.functions[fid],
                &mut sites,
                caps,
                &mut helper_checks,
            );
        }
        if let Some(limit) = caps.caps.loop_trip_limit {
            // After every rewrite above, so the loops legalize adds
            // (range loops, compare-exchange retries) are counted too.
            // In a block kernel with barriers the entry's trip check
            // resumes like its other checks (the fault is recorded, no
            // invocation returns before a barrier).
            count_loop_trips(kernel, &mut sites, limit, checks.resume, caps.caps.lane_max);
        }
        kernel.fault_sites = sites;
        if random {
            // Every invocation starts its stream before its first statement.
            let f = &mut kernel.entry;
            let mut e = Emitter {
                f,
                out: Vec::new(),
                span: Span::default(),
            };
            random::seed(&mut |k, t| e.emit(k, t), &kernel.name);
            let mut body = e.out;
            body.append(&mut kernel.entry.body);
            kernel.entry.body = body;
        }
    }
}

/// The target's capabilities as they apply to one kernel.
struct KernelCaps {
    caps: TargetCaps,
    /// Roots the kernel accesses with an atomic other than f32 add/sub
    /// (after legalize such an atomic is one, or a compare-exchange loop).
    shared_roots: Vec<LayoutId>,
}

impl KernelCaps {
    fn has_atomic(&self, op: AtomicOp, s: Scalar, root: LayoutId) -> bool {
        self.caps.has_atomic(op, s)
            && (s != Scalar::F32
                || self.caps.f32_atomic_add_beside_other_atomics
                || !self.shared_roots.contains(&root))
    }
}

fn shared_atomic_roots(kernel: &Kernel) -> Vec<LayoutId> {
    let mut out = Vec::new();
    for f in std::iter::once(&kernel.entry).chain(kernel.functions.iter().map(|(_, f)| f)) {
        for (_, i) in f.insts.iter() {
            if let InstKind::BufAtomic { op, root, .. } = i.kind {
                let f32_add = i.ty == Type::F32 && matches!(op, AtomicOp::Add | AtomicOp::Sub);
                if !f32_add && !out.contains(&root) {
                    out.push(root);
                }
            }
        }
    }
    out
}

/// How the checks of one function fail.
struct Checks {
    /// The function is the entry of a kernel whose invocations meet at
    /// barriers on a target with workgroups: a failed check notes its
    /// fault and the invocation goes on (`FaultSite::resume`), so every
    /// invocation of the block still reaches every barrier (an invocation
    /// that returned early would leave the others waiting, and WGSL
    /// refuses a barrier after a `return` that depends on the invocation).
    /// What the check guarded is made safe instead: the checked index (or
    /// step) is replaced, for everything after the check, by one that
    /// cannot fault (`subst`). The launch still fails with the first fault
    /// an invocation noted, naming the same node and line.
    resume: bool,
    /// Checked values → their safe replacements, for the instructions
    /// after the check in its block (and blocks inside that).
    subst: HashMap<InstId, InstId>,
}

fn legalize_function(
    f: &mut Function,
    sites: &mut Vec<FaultSite>,
    caps: &KernelCaps,
    checks: &mut Checks,
) {
    let body = std::mem::take(&mut f.body);
    f.body = legalize_block(f, body, sites, caps, checks);
}

/// `select(bad, safe, value)`: `value` when the check passed, and a value
/// that cannot fault (`safe`, of `value`'s scalar type) when it failed.
fn guarded(e: &mut Emitter, bad: InstId, value: InstId, safe: u64) -> InstId {
    let t = e.ty(value);
    let s = e.konst(Const {
        scalar: t.scalar().expect("a checked value is a scalar"),
        bits: safe,
    });
    e.emit(
        InstKind::Select {
            cond: bad,
            accept: s,
            reject: value,
        },
        t,
    )
}

fn legalize_block(
    f: &mut Function,
    block: Block,
    sites: &mut Vec<FaultSite>,
    caps: &KernelCaps,
    checks: &mut Checks,
) -> Block {
    let mut out = Vec::with_capacity(block.len());
    // Replacements made in this block end with it: a value checked inside
    // an `if` is not known safe after the `if`.
    let outer = checks.subst.clone();
    for h in block {
        if !checks.subst.is_empty() {
            let subst = &checks.subst;
            f.insts[h]
                .kind
                .map_operands(|x| subst.get(&x).copied().unwrap_or(x));
        }
        let mut kind = f.insts[h].kind.clone();
        for b in kind.blocks_mut() {
            *b = legalize_block(f, std::mem::take(b), sites, caps, checks);
        }
        f.insts[h].kind = kind.clone();
        let span = f.insts[h].span;
        let ty = f.insts[h].ty;
        let mut e = Emitter {
            f,
            out: Vec::new(),
            span,
        };
        let mut keep = true;
        match kind {
            InstKind::BoundsCheck {
                field,
                axis,
                index,
                extent,
            } => {
                let site = push_site(
                    sites,
                    span,
                    FaultKind::OutOfBounds {
                        field,
                        axis,
                        extent,
                    },
                    checks.resume,
                );
                // A negative i32 is a huge u32, so one unsigned compare covers both ends.
                let iu = e.emit(InstKind::Cast(index), Type::U32);
                let ext = e.konst(Const::u32(extent));
                let bad = e.bin_ty(BinaryOp::Ge, iu, ext, Type::BOOL);
                trap_if(&mut e, bad, site, index);
                if checks.resume {
                    // Index 0 is inside every axis (an axis has extent >= 1).
                    let safe = guarded(&mut e, bad, index, 0);
                    checks.subst.insert(index, safe);
                }
                keep = false;
            }
            InstKind::IndexCheck { index, len } => {
                let site = push_site(sites, span, FaultKind::LocalIndex { len }, checks.resume);
                let iu = e.emit(InstKind::Cast(index), Type::U32);
                let n = e.konst(Const::u32(len));
                let bad = e.bin_ty(BinaryOp::Ge, iu, n, Type::BOOL);
                trap_if(&mut e, bad, site, index);
                if checks.resume {
                    // Element 0 exists: arrays have at least one.
                    let safe = guarded(&mut e, bad, index, 0);
                    checks.subst.insert(index, safe);
                }
                keep = false;
            }
            InstKind::RangeFor {
                begin,
                end,
                step,
                inclusive,
                body,
            } => {
                let t = e.ty(step);
                let signed = t.scalar() == Some(Scalar::I32);
                let site = push_site(
                    sites,
                    span,
                    FaultKind::NonPositiveStep { signed },
                    checks.resume,
                );
                let zero = e.konst(Const {
                    scalar: t.scalar().expect("integer step"),
                    bits: 0,
                });
                let bad = e.bin_ty(BinaryOp::Le, step, zero, Type::BOOL);
                trap_if(&mut e, bad, site, step);
                // Going on with a step of 1 ends the loop like any other.
                let step = if checks.resume {
                    guarded(&mut e, bad, step, 1)
                } else {
                    step
                };
                let body = range_loop(&mut e, h, begin, end, step, inclusive, body);
                e.f.insts[h].kind = InstKind::Loop { body };
            }
            InstKind::Builtin(Builtin::Dot, ref args) if e.ty(args[0]).is_int() => {
                let n = e.ty(args[0]).components() as u32;
                let mut acc: Option<InstId> = None;
                for c in 0..n {
                    let x = e.emit(InstKind::Extract(args[0], c), ty);
                    let y = e.emit(InstKind::Extract(args[1], c), ty);
                    let p = e.bin_ty(BinaryOp::Mul, x, y, ty);
                    acc = Some(match acc {
                        None => p,
                        Some(s) => e.bin_ty(BinaryOp::Add, s, p, ty),
                    });
                }
                // Vectors have at least two components, so the sum was emitted last.
                e.finish(h, acc.expect("vectors have components"));
            }
            InstKind::Builtin(Builtin::Outer, ref args) => {
                // Column j = a * b[j], so no backend needs an outer product.
                let vt = e.ty(args[0]);
                let n = vt.components() as u32;
                let cols = (0..n)
                    .map(|j| {
                        let bj = e.emit(InstKind::Extract(args[1], j), Type::F32);
                        let s = e.emit(InstKind::Construct(vec![bj; n as usize]), vt);
                        e.bin_ty(BinaryOp::Mul, args[0], s, vt)
                    })
                    .collect();
                let r = e.emit(InstKind::Construct(cols), ty);
                e.finish(h, r);
            }
            InstKind::Builtin(Builtin::Determinant, ref args) => {
                let m = elements(&mut e, args[0]);
                let d = det(&mut e, &m);
                e.finish(h, d);
            }
            InstKind::Builtin(Builtin::Inverse, ref args) => {
                let r = inverse(&mut e, args[0]);
                e.finish(h, r);
            }
            InstKind::Builtin(Builtin::Sign, ref args) if ty.scalar() == Some(Scalar::U32) => {
                let one = e.splat(Const::u32(1), ty);
                let r = e.emit(InstKind::Builtin(Builtin::Min, vec![args[0], one]), ty);
                e.finish(h, r);
            }
            InstKind::Cast(a) if e.ty(a).is_float() && ty.is_int() => {
                let r = saturating_cast(&mut e, a, ty);
                e.finish(h, r);
            }
            InstKind::Random => {
                let r = random::next(&mut |k, t| e.emit(k, t));
                e.finish(h, r);
            }
            InstKind::BufAtomic {
                op,
                root,
                addr,
                value,
                cmp: None,
            } if ty
                .scalar()
                .is_some_and(|s| !caps.has_atomic(op, s, root) && s != Scalar::Bool) =>
            {
                let r = cas_loop(
                    &mut e,
                    op,
                    ty,
                    root,
                    addr,
                    value,
                    caps.caps.loose_float_builtins,
                );
                e.finish(h, r);
            }
            InstKind::Builtin(b, ref args)
                if caps.caps.loose_float_builtins
                    && ty.scalar().is_some_and(|s| s.is_float())
                    && matches!(
                        b,
                        Builtin::Fma
                            | Builtin::Lerp
                            | Builtin::Min
                            | Builtin::Max
                            | Builtin::Clamp
                            | Builtin::Saturate
                    ) =>
            {
                let r = float_builtin(&mut e, b, args, ty);
                e.finish(h, r);
            }
            InstKind::Builtin(Builtin::Round, ref args)
                if caps.caps.loose_float_builtins && ty.scalar() == Some(Scalar::F64) =>
            {
                let r = round_ties_even(&mut e, args[0], ty);
                e.finish(h, r);
            }
            InstKind::Binary(op @ (BinaryOp::Div | BinaryOp::Rem), a, b) if ty.is_int() => {
                if let Some(nb) = safe_divisor(&mut e, a, b) {
                    e.f.insts[h].kind = InstKind::Binary(op, a, nb);
                }
            }
            _ => {}
        }
        out.extend(std::mem::take(&mut e.out));
        if keep {
            out.push(h);
        }
    }
    checks.subst = outer;
    out
}

/// An atomic `op` the target lacks, as a compare-exchange loop on the word's
/// bits (the one copy of this loop; `lower::quantize::match_cas_loop`
/// recognises its shape):
///
/// ```text
/// loop { cur = load; new = bits(op(value_of(cur), value));
///        if (compare_exchange(new, cur) == cur) { old = cur; break } }
/// bits_to(old)
/// ```
///
/// Lock-free: a thread retries only when another one changed the word.
/// Emits everything into `e`; the result (the old value) is emitted last.
fn cas_loop(
    e: &mut Emitter,
    op: AtomicOp,
    ty: Type,
    root: LayoutId,
    addr: InstId,
    value: InstId,
    loose: bool,
) -> InstId {
    let old = e.f.locals.append(Local {
        name: format!("atomic_old{}", e.f.locals.len()),
        ty: Type::U32,
    });
    let outer = std::mem::take(&mut e.out);
    let cur = e.emit(InstKind::BufLoad { root, addr }, Type::U32);
    let cur_v = e.emit(InstKind::Bitcast(cur), ty);
    let new_v = match op {
        AtomicOp::Add => e.bin_ty(BinaryOp::Add, cur_v, value, ty),
        AtomicOp::Sub => e.bin_ty(BinaryOp::Sub, cur_v, value, ty),
        AtomicOp::Min | AtomicOp::Max if loose && ty.is_float() => {
            fmin_max(e, op == AtomicOp::Max, cur_v, value, ty)
        }
        AtomicOp::Min => e.emit(InstKind::Builtin(Builtin::Min, vec![cur_v, value]), ty),
        AtomicOp::Max => e.emit(InstKind::Builtin(Builtin::Max, vec![cur_v, value]), ty),
        AtomicOp::And => e.bin_ty(BinaryOp::BitAnd, cur_v, value, ty),
        AtomicOp::Or => e.bin_ty(BinaryOp::BitOr, cur_v, value, ty),
        AtomicOp::Xor => e.bin_ty(BinaryOp::BitXor, cur_v, value, ty),
        AtomicOp::Exchange | AtomicOp::CompareExchange => value,
    };
    let new = e.emit(InstKind::Bitcast(new_v), Type::U32);
    let prev = e.emit(
        InstKind::BufAtomic {
            op: AtomicOp::CompareExchange,
            root,
            addr,
            value: new,
            cmp: Some(cur),
        },
        Type::U32,
    );
    let done = e.bin_ty(BinaryOp::Eq, prev, cur, Type::BOOL);
    let span = e.span;
    let save =
        e.f.detached(InstKind::LocalStore(old, cur), Type::Void, span);
    let brk = e.f.detached(InstKind::Break, Type::Void, span);
    e.emit(
        InstKind::If {
            cond: done,
            accept: vec![save, brk],
            reject: vec![],
        },
        Type::Void,
    );
    let body = std::mem::replace(&mut e.out, outer);
    e.emit(InstKind::Loop { body }, Type::Void);
    let o = e.emit(InstKind::LocalLoad(old), Type::U32);
    e.emit(InstKind::Bitcast(o), ty)
}

/// Rewrites a `RangeFor` as a `Loop` over locals, so no backend computes a
/// trip count. The count never overflows: a non-empty loop stores its last
/// iteration number `k` (at most 2^32 − 1, even for a loop over every u32)
/// and a `more` flag, and the counter advances at the head of the body, so
/// a `continue` (a jump to the head) steps it like a normal iteration does.
/// `LoopCounter(h)` reads a local holding the current iteration's value.
///
/// Emits the set-up before the loop into `e` and returns the loop body.
fn range_loop(
    e: &mut Emitter,
    h: InstId,
    begin: InstId,
    end: InstId,
    step: InstId,
    inclusive: bool,
    mut body: Block,
) -> Block {
    let t = e.ty(begin);
    let unsigned = |e: &mut Emitter, v: InstId| {
        if t == Type::U32 {
            v
        } else {
            e.emit(InstKind::Bitcast(v), Type::U32)
        }
    };
    let local = |e: &mut Emitter, name: &str, ty: Type| {
        e.f.locals.append(Local {
            name: format!("{name}{}", h.index()),
            ty,
        })
    };
    let (counter, cur, left, more) = (
        local(e, "for_next", t),
        local(e, "for_index", t),
        local(e, "for_left", Type::U32),
        local(e, "for_more", Type::BOOL),
    );
    let nonempty = e.bin_ty(
        if inclusive {
            BinaryOp::Ge
        } else {
            BinaryOp::Gt
        },
        end,
        begin,
        Type::BOOL,
    );
    // `end - begin` is exact in u32 whenever the loop is not empty.
    let (bu, eu) = (unsigned(e, begin), unsigned(e, end));
    let mut span = e.bin_ty(BinaryOp::Sub, eu, bu, Type::U32);
    if !inclusive {
        let one = e.konst(Const::u32(1));
        span = e.bin_ty(BinaryOp::Sub, span, one, Type::U32);
    }
    // The step is positive here (the trap above), but the validator holds
    // every division to the same rule: a constant step stays as it is (no
    // added work), a run-time one gets legalize's guard.
    let su = unsigned(e, step);
    let su = safe_divisor(e, span, su).unwrap_or(su);
    let last = e.bin_ty(BinaryOp::Div, span, su, Type::U32);
    e.emit(InstKind::LocalStore(counter, begin), Type::Void);
    e.emit(InstKind::LocalStore(left, last), Type::Void);
    e.emit(InstKind::LocalStore(more, nonempty), Type::Void);

    let mut head = Emitter {
        f: &mut *e.f,
        out: Vec::new(),
        span: e.span,
    };
    let m = head.emit(InstKind::LocalLoad(more), Type::BOOL);
    let done = head.emit(InstKind::Unary(UnaryOp::Not, m), Type::BOOL);
    let brk = head.f.detached(InstKind::Break, Type::Void, head.span);
    head.emit(
        InstKind::If {
            cond: done,
            accept: vec![brk],
            reject: vec![],
        },
        Type::Void,
    );
    let idx = head.emit(InstKind::LocalLoad(counter), t);
    head.emit(InstKind::LocalStore(cur, idx), Type::Void);
    let l = head.emit(InstKind::LocalLoad(left), Type::U32);
    let zero = head.konst(Const::u32(0));
    let again = head.bin_ty(BinaryOp::Ne, l, zero, Type::BOOL);
    head.emit(InstKind::LocalStore(more, again), Type::Void);
    let one = head.konst(Const::u32(1));
    let l1 = head.bin_ty(BinaryOp::Sub, l, one, Type::U32);
    head.emit(InstKind::LocalStore(left, l1), Type::Void);
    let next = head.bin_ty(BinaryOp::Add, idx, step, t);
    head.emit(InstKind::LocalStore(counter, next), Type::Void);
    let mut out = std::mem::take(&mut head.out);
    replace_counter(e.f, &body, h, cur);
    out.append(&mut body);
    out
}

/// Turns every `LoopCounter(of)` in `block` (at any depth) into a load of `cur`.
fn replace_counter(f: &mut Function, block: &Block, of: InstId, cur: LocalId) {
    for &i in block {
        if matches!(f.insts[i].kind, InstKind::LoopCounter(l) if l == of) {
            f.insts[i].kind = InstKind::LocalLoad(cur);
        }
        let nested: Vec<Block> = f.insts[i].kind.blocks().into_iter().cloned().collect();
        for b in &nested {
            replace_counter(f, b, of, cur);
        }
    }
}

fn push_site(sites: &mut Vec<FaultSite>, span: Span, kind: FaultKind, resume: bool) -> u32 {
    sites.push(FaultSite { span, kind, resume });
    (sites.len() - 1) as u32
}

/// Emits `if bad { trap site value }`.
fn trap_if(e: &mut Emitter, bad: InstId, site: u32, value: InstId) {
    let trap =
        e.f.detached(InstKind::Trap { site, value }, Type::Void, e.span);
    e.emit(
        InstKind::If {
            cond: bad,
            accept: vec![trap],
            reject: vec![],
        },
        Type::Void,
    );
}

/// Counts the loop trips of one invocation for a target that leaves a loop
/// silently after `limit` of them (`TargetCaps::loop_trip_limit`): the
/// invocation's count (`TripsLoad` / `TripsStore`, shared by every function
/// it calls) is zeroed at the top of the entry, and at the head of every
/// trip of every loop `if trips >= limit - 1 { trap } trips += 1`.
///
/// The driver counts a trip at its end and leaves the loop when the count
/// reaches `limit`, whether or not the loop was about to end anyway, so the
/// last trip it runs to the end is the `limit`-th: the check faults at the
/// head of that trip, before the driver can cut anything short. A program
/// may therefore make at most `limit - 1` trips (a range loop of n
/// iterations makes n + 1: its last trip only finds the range done).
///
/// llvmpipe runs code whether or not any invocation takes it: an `if` arm
/// that no invocation of a group takes still runs, masked, and each loop in
/// it makes one trip (measured on Mesa 22.3.6: a 40,000-trip loop around an
/// `if` nobody took, holding a loop, stopped after 32,768 trips). So an
/// invocation that skips code (the other arm of an `if`, the rest of a loop
/// body after a `break` or `continue`, the rest of a helper after a
/// `return`) adds one trip for every loop in what it skipped
/// ([`TripCounter::statics`], with the loops of called helpers, which the
/// driver inlines).
///
/// llvmpipe's count belongs to the invocations it runs side by side (its
/// subgroup of 8), and counts a trip while any of them is in the loop. On
/// a target with `lane_max` every invocation keeps its group's count: the
/// largest count among the group's active invocations (`LaneMax`) at the
/// head of every trip of a loop that holds loops, and after every loop
/// and every `if` and call that holds one (an innermost loop's head needs
/// none: its invocations entered with one count and each adds one a trip;
/// a `LaneMax` a trip made julia's loop 2.85× slower on lavapipe). An `if` with loops in both arms becomes two (`if c { a }` then
/// `if !c { b }`: the driver runs the arms one after the other, and each
/// invocation must see both), and a `break`, `continue` or `return` that
/// ends an arm holding loops moves to an `if` of its own after the merge,
/// so the invocations that leave tell the others their count first.
/// What is left uncounted is a group whose invocations leave a loop from
/// inside nested `if`s after loops the others skipped (documented in
/// kernel-language.md).
fn count_loop_trips(
    kernel: &mut Kernel,
    sites: &mut Vec<FaultSite>,
    limit: u32,
    resume: bool,
    lanes: bool,
) {
    remove_dead_loops(&mut kernel.entry);
    for fid in kernel.functions.handles().collect::<Vec<_>>() {
        remove_dead_loops(&mut kernel.functions[fid]);
    }
    // Static loop counts of the helpers, callees first (the front end
    // rejects recursion, so the memo always ends).
    let mut fn_loops: HashMap<FuncId, u32> = HashMap::new();
    fn loops_of(
        functions: &crate::arena::Arena<Function>,
        fid: FuncId,
        memo: &mut HashMap<FuncId, u32>,
    ) -> u32 {
        if let Some(&n) = memo.get(&fid) {
            return n;
        }
        let f = &functions[fid];
        let mut callees = Vec::new();
        fn calls(f: &Function, b: &Block, out: &mut Vec<FuncId>) {
            for &h in b {
                if let InstKind::Call(c, _) = f.insts[h].kind {
                    out.push(c);
                }
                for nb in f.insts[h].kind.blocks() {
                    calls(f, nb, out);
                }
            }
        }
        calls(f, &f.body, &mut callees);
        for c in callees {
            loops_of(functions, c, memo);
        }
        let n = TripCounter::count_static(f, &f.body, memo);
        memo.insert(fid, n);
        n
    }
    for fid in kernel.functions.handles().collect::<Vec<_>>() {
        loops_of(&kernel.functions, fid, &mut fn_loops);
    }
    let entry_loops = TripCounter::count_static(&kernel.entry, &kernel.entry.body, &fn_loops);
    if entry_loops == 0 {
        return;
    }
    for fid in kernel.functions.handles().collect::<Vec<_>>() {
        if fn_loops[&fid] == 0 {
            continue;
        }
        let f = &mut kernel.functions[fid];
        let body = std::mem::take(&mut f.body);
        let mut c = TripCounter {
            f,
            sites,
            limit,
            resume: false,
            lanes,
            helper: true,
            fn_loops: &fn_loops,
        };
        let body = c.block(body, 0, 0);
        f.body = body;
    }
    let f = &mut kernel.entry;
    let body = std::mem::take(&mut f.body);
    let mut c = TripCounter {
        f,
        sites,
        limit,
        resume,
        lanes,
        helper: false,
        fn_loops: &fn_loops,
    };
    let mut body = c.block(body, 0, 0);
    let mut e = Emitter {
        f: &mut *c.f,
        out: Vec::new(),
        span: Span::default(),
    };
    let zero = e.konst(Const::u32(0));
    e.emit(InstKind::TripsStore(zero), Type::Void);
    let mut out = e.out;
    out.append(&mut body);
    kernel.entry.body = out;
}

/// The rewrite of one function for [`count_loop_trips`].
struct TripCounter<'a> {
    f: &'a mut Function,
    sites: &'a mut Vec<FaultSite>,
    limit: u32,
    resume: bool,
    /// Keep the group's count (`TargetCaps::lane_max`).
    lanes: bool,
    /// A helper: a `return` goes on in the caller.
    helper: bool,
    /// The loops of each helper, its callees' included.
    fn_loops: &'a HashMap<FuncId, u32>,
}

impl TripCounter<'_> {
    /// The loops in `b`, nested ones and called helpers' included: the
    /// trips the driver makes when it runs `b` with no invocation active.
    fn count_static(f: &Function, b: &[InstId], fn_loops: &HashMap<FuncId, u32>) -> u32 {
        b.iter()
            .map(|&h| {
                let own = match f.insts[h].kind {
                    InstKind::Loop { .. } => 1,
                    InstKind::Call(c, _) => fn_loops.get(&c).copied().unwrap_or(0),
                    _ => 0,
                };
                own + f.insts[h]
                    .kind
                    .blocks()
                    .into_iter()
                    .map(|nb| Self::count_static(f, nb, fn_loops))
                    .sum::<u32>()
            })
            .sum()
    }

    fn statics(&self, b: &[InstId]) -> u32 {
        Self::count_static(self.f, b, self.fn_loops)
    }

    fn emitter(&mut self, span: Span) -> Emitter<'_> {
        Emitter {
            f: &mut *self.f,
            out: Vec::new(),
            span,
        }
    }

    /// `trips += n`.
    fn add(&mut self, n: u32, span: Span) -> Vec<InstId> {
        let mut e = self.emitter(span);
        if n > 0 {
            let t = e.emit(InstKind::TripsLoad, Type::U32);
            let k = e.konst(Const::u32(n));
            let s = e.bin_ty(BinaryOp::Add, t, k, Type::U32);
            e.emit(InstKind::TripsStore(s), Type::Void);
        }
        e.out
    }

    /// `trips = lane_max(trips)` where the group's invocations meet again.
    fn sync(&mut self, span: Span) -> Vec<InstId> {
        let mut e = self.emitter(span);
        let t = e.emit(InstKind::TripsLoad, Type::U32);
        let m = e.emit(InstKind::LaneMax(t), Type::U32);
        e.emit(InstKind::TripsStore(m), Type::Void);
        e.out
    }

    fn jump(kind: &InstKind) -> bool {
        matches!(
            kind,
            InstKind::Break | InstKind::Continue | InstKind::Return(None)
        )
    }

    /// Rewrites `block`. `rest_loop`: the loops the driver runs after this
    /// block up to the end of the innermost loop body (of the function
    /// outside any loop); `rest_out`: those after that loop to the end of
    /// the function.
    fn block(&mut self, block: Block, rest_loop: u32, rest_out: u32) -> Block {
        let mut out = Vec::new();
        for (i, &h) in block.iter().enumerate() {
            let after = self.statics(&block[i + 1..]);
            let span = self.f.insts[h].span;
            let kind = self.f.insts[h].kind.clone();
            match kind {
                InstKind::Loop { body } => {
                    // The invocations at a trip's head differ in count only
                    // where the body holds loops (they started the loop
                    // with one count and each added one per trip).
                    let inner = self.statics(&body) > 0;
                    let body = self.block(body, 0, rest_loop + after + rest_out);
                    let site = push_site(
                        self.sites,
                        span,
                        FaultKind::LoopTrips { limit: self.limit },
                        self.resume,
                    );
                    let limit = self.limit;
                    let lanes = self.lanes;
                    let mut e = self.emitter(span);
                    let mut n = e.emit(InstKind::TripsLoad, Type::U32);
                    if lanes && inner {
                        n = e.emit(InstKind::LaneMax(n), Type::U32);
                    }
                    let last = e.konst(Const::u32(limit.saturating_sub(1)));
                    let bad = e.bin_ty(BinaryOp::Ge, n, last, Type::BOOL);
                    trap_if(&mut e, bad, site, n);
                    let one = e.konst(Const::u32(1));
                    let next = e.bin_ty(BinaryOp::Add, n, one, Type::U32);
                    e.emit(InstKind::TripsStore(next), Type::Void);
                    let mut head = e.out;
                    head.extend(body);
                    self.f.insts[h].kind = InstKind::Loop { body: head };
                    out.push(h);
                    if lanes {
                        out.extend(self.sync(span));
                    }
                }
                InstKind::If {
                    cond,
                    mut accept,
                    mut reject,
                } => {
                    let (sa, sb) = (self.statics(&accept), self.statics(&reject));
                    if !self.lanes || sa + sb == 0 {
                        let a = self.arm(accept, sb, rest_loop + after, rest_out, span);
                        let r = self.arm(reject, sa, rest_loop + after, rest_out, span);
                        self.f.insts[h].kind = InstKind::If {
                            cond,
                            accept: a,
                            reject: r,
                        };
                        out.push(h);
                        if self.lanes && sa + sb > 0 {
                            out.extend(self.sync(span));
                        }
                        continue;
                    }
                    // A jump that ends an arm holding loops waits until
                    // the group has met after the `if`.
                    let take_jump = |arm: &mut Block, s: u32, f: &Function| {
                        if s > 0 && arm.last().is_some_and(|&j| Self::jump(&f.insts[j].kind)) {
                            arm.pop()
                        } else {
                            None
                        }
                    };
                    let ja = take_jump(&mut accept, sa, self.f);
                    let jb = take_jump(&mut reject, sb, self.f);
                    let halves: Vec<(Block, Block)> = if sa > 0 && sb > 0 {
                        vec![(accept, Vec::new()), (Vec::new(), reject)]
                    } else {
                        vec![(accept, reject)]
                    };
                    for (k, (a, r)) in halves.into_iter().enumerate() {
                        let (xa, xr) = (self.statics(&a), self.statics(&r));
                        // What the driver runs after this half, in this block.
                        let later = if k == 0 && sa > 0 && sb > 0 { sb } else { 0 };
                        let a = self.arm(a, xr, rest_loop + after + later, rest_out, span);
                        let r = self.arm(r, xa, rest_loop + after + later, rest_out, span);
                        let kind = InstKind::If {
                            cond,
                            accept: a,
                            reject: r,
                        };
                        let g = if k == 0 {
                            self.f.insts[h].kind = kind;
                            h
                        } else {
                            self.f.detached(kind, Type::Void, span)
                        };
                        out.push(g);
                        out.extend(self.sync(span));
                    }
                    for (j, accepting) in [(ja, true), (jb, false)] {
                        let Some(j) = j else { continue };
                        let mut arm = self.jump_adjust(
                            &self.f.insts[j].kind.clone(),
                            rest_loop + after,
                            rest_out,
                            span,
                        );
                        arm.push(j);
                        let (accept, reject) = if accepting {
                            (arm, Vec::new())
                        } else {
                            (Vec::new(), arm)
                        };
                        let g = self.f.detached(
                            InstKind::If {
                                cond,
                                accept,
                                reject,
                            },
                            Type::Void,
                            span,
                        );
                        out.push(g);
                    }
                }
                InstKind::Break | InstKind::Continue | InstKind::Return(_) => {
                    out.extend(self.jump_adjust(&kind, rest_loop + after, rest_out, span));
                    out.push(h);
                }
                InstKind::Call(fid, _) => {
                    out.push(h);
                    if self.lanes && self.fn_loops.get(&fid).is_some_and(|&n| n > 0) {
                        out.extend(self.sync(span));
                    }
                }
                mut other => {
                    for b in other.blocks_mut() {
                        *b = self.block(std::mem::take(b), rest_loop + after, rest_out);
                    }
                    self.f.insts[h].kind = other;
                    out.push(h);
                }
            }
        }
        out
    }

    /// An `if` arm: rewritten, and ended by the trips of the other arm
    /// (`other` loops), which the driver runs too.
    fn arm(&mut self, arm: Block, other: u32, rest_loop: u32, rest_out: u32, span: Span) -> Block {
        let ends_in_jump = arm.last().is_some_and(|&j| {
            matches!(
                self.f.insts[j].kind,
                InstKind::Break | InstKind::Continue | InstKind::Return(_)
            )
        });
        let mut b = self.block(arm, rest_loop + other, rest_out);
        if !ends_in_jump {
            b.extend(self.add(other, span));
        }
        b
    }

    /// What an invocation leaving by `jump` adds first: the loops the
    /// driver still runs without it (to the end of the loop body for a
    /// `break` or `continue`, of the helper for a `return`; nothing for a
    /// `return` from the entry, after which the invocation counts no more).
    fn jump_adjust(
        &mut self,
        jump: &InstKind,
        rest_loop: u32,
        rest_out: u32,
        span: Span,
    ) -> Vec<InstId> {
        let n = match jump {
            InstKind::Break | InstKind::Continue => rest_loop,
            InstKind::Return(_) if self.helper => rest_loop + rest_out,
            _ => 0,
        };
        self.add(n, span)
    }
}

/// Deletes the loops whose work nothing uses (no store to memory, no
/// atomic, call or barrier, no local read afterwards by anything that is
/// used), as Mesa's compiler does: their trips would count towards the
/// limit in Weft's count while the driver never runs them (the reverse
/// pass of an autodiff tape recomputes sums nothing needs). Aggressive
/// dead-code elimination: loops start dead and become live from the
/// effects inside them; a `break` or `continue` makes its condition live
/// only in a live loop, a trap only outside dead loops (a fault in code
/// whose results nothing uses is dropped with it).
fn remove_dead_loops(f: &mut Function) {
    use std::collections::HashSet;
    struct At {
        h: InstId,
        loops: Vec<InstId>,
        /// Enclosing `If`s with the number of loops around each.
        ifs: Vec<(InstId, usize)>,
    }
    fn walk(
        f: &Function,
        b: &Block,
        loops: &mut Vec<InstId>,
        ifs: &mut Vec<(InstId, usize)>,
        out: &mut Vec<At>,
    ) {
        for &h in b {
            out.push(At {
                h,
                loops: loops.clone(),
                ifs: ifs.clone(),
            });
            match &f.insts[h].kind {
                InstKind::Loop { body } => {
                    loops.push(h);
                    walk(f, body, loops, ifs, out);
                    loops.pop();
                }
                InstKind::If { accept, reject, .. } => {
                    ifs.push((h, loops.len()));
                    walk(f, accept, loops, ifs, out);
                    walk(f, reject, loops, ifs, out);
                    ifs.pop();
                }
                k => {
                    for blk in k.blocks() {
                        walk(f, blk, loops, ifs, out);
                    }
                }
            }
        }
    }
    let mut all = Vec::new();
    walk(f, &f.body, &mut Vec::new(), &mut Vec::new(), &mut all);
    let (mut live, mut locals, mut loops) = (HashSet::new(), HashSet::new(), HashSet::new());
    loop {
        let before = (live.len(), locals.len(), loops.len());
        for at in &all {
            let kind = &f.insts[at.h].kind;
            let inner = at.loops.last();
            let effect = match kind {
                InstKind::LocalStore(l, _) => locals.contains(l),
                InstKind::Trap { .. } => at.loops.iter().all(|l| loops.contains(l)),
                InstKind::Break | InstKind::Continue => inner.is_some_and(|l| loops.contains(l)),
                InstKind::If { .. } | InstKind::Loop { .. } => false,
                k => !k.is_pure(),
            };
            if effect {
                live.insert(at.h);
                let jump = matches!(kind, InstKind::Break | InstKind::Continue);
                for &(i, depth) in &at.ifs {
                    // A jump only needs the conditions inside its own loop.
                    if !jump || depth == at.loops.len() {
                        live.insert(i);
                    }
                }
                if !jump {
                    loops.extend(at.loops.iter().copied());
                }
            }
            if live.contains(&at.h) {
                let ops = match kind {
                    InstKind::If { cond, .. } => vec![*cond],
                    k => k.operands(),
                };
                live.extend(ops);
                if let InstKind::LocalLoad(l) = kind {
                    locals.insert(*l);
                }
            }
        }
        if before == (live.len(), locals.len(), loops.len()) {
            break;
        }
    }
    fn prune(f: &mut Function, b: Block, loops: &HashSet<InstId>) -> Block {
        let mut out = Vec::with_capacity(b.len());
        for h in b {
            if matches!(f.insts[h].kind, InstKind::Loop { .. }) && !loops.contains(&h) {
                continue;
            }
            let mut kind = f.insts[h].kind.clone();
            for blk in kind.blocks_mut() {
                *blk = prune(f, std::mem::take(blk), loops);
            }
            f.insts[h].kind = kind;
            out.push(h);
        }
        out
    }
    let body = std::mem::take(&mut f.body);
    f.body = prune(f, body, &loops);
}

/// `fma`, `lerp` and float `min` / `max` / `clamp` / `saturate` with
/// `eval`'s meaning, for a target whose own are not Weft's
/// (`TargetCaps::loose_float_builtins`). The result is emitted last.
fn float_builtin(e: &mut Emitter, b: Builtin, args: &[InstId], ty: Type) -> InstId {
    match b {
        Builtin::Lerp => {
            // x + (y - x) * t, rounded after each operation (never WGSL's mix).
            let d = e.bin_ty(BinaryOp::Sub, args[1], args[0], ty);
            let m = e.bin_ty(BinaryOp::Mul, d, args[2], ty);
            e.bin_ty(BinaryOp::Add, args[0], m, ty)
        }
        Builtin::Min => fmin_max(e, false, args[0], args[1], ty),
        Builtin::Max => fmin_max(e, true, args[0], args[1], ty),
        Builtin::Clamp => {
            // eval: x.max(lo).min(hi).
            let lo = fmin_max(e, true, args[0], args[1], ty);
            fmin_max(e, false, lo, args[2], ty)
        }
        Builtin::Saturate => {
            // eval: x.clamp(0, 1), which keeps a NaN.
            let zero = e.splat(float_const(ty, 0.0), ty);
            let one = e.splat(float_const(ty, 1.0), ty);
            let bt = bool_like(ty);
            let below = e.bin_ty(BinaryOp::Lt, args[0], zero, bt);
            let above = e.bin_ty(BinaryOp::Gt, args[0], one, bt);
            let hi = select(e, above, one, args[0], ty);
            select(e, below, zero, hi, ty)
        }
        Builtin::Fma => match ty {
            Type::Vector(s, n) => {
                let st = Type::Scalar(s);
                let parts = (0..n as u32)
                    .map(|c| {
                        let [x, y, z] =
                            [0, 1, 2].map(|k| e.emit(InstKind::Extract(args[k], c), st));
                        fused_fma(e, x, y, z, st)
                    })
                    .collect();
                e.emit(InstKind::Construct(parts), ty)
            }
            _ => fused_fma(e, args[0], args[1], args[2], ty),
        },
        _ => unreachable!("only the built-ins matched by the caller"),
    }
}

fn float_const(ty: Type, v: f64) -> Const {
    match ty.scalar() {
        Some(Scalar::F64) => Const {
            scalar: Scalar::F64,
            bits: v.to_bits(),
        },
        _ => Const::f32(v as f32),
    }
}

fn bool_like(ty: Type) -> Type {
    match ty {
        Type::Vector(_, n) => Type::Vector(Scalar::Bool, n),
        _ => Type::BOOL,
    }
}

fn select(e: &mut Emitter, cond: InstId, accept: InstId, reject: InstId, ty: Type) -> InstId {
    e.emit(
        InstKind::Select {
            cond,
            accept,
            reject,
        },
        ty,
    )
}

/// `eval`'s float `min` (`max`): a NaN operand gives the other operand,
/// ties (±0 included) give `x`. The NaN tests are `isnan`, which every
/// backend answers from the bits, so no compare ever sees a NaN.
/// f64 `round` (to nearest, ties to even, as `eval`'s `round_ties_even`)
/// from `floor`, for wgpu: llvmpipe's own f64 `round` is not (measured on
/// Mesa 22.3.6: `round(-5.5)` gave -5 and `round(0.5000000000000009)` 0;
/// its f32 `round` and f64 `floor` are right). `x - floor(x)` is exact, so
/// the fraction decides without rounding; a result of zero takes `x`'s
/// sign (`round(-0.4)` is -0.0); NaN and infinities pass through.
fn round_ties_even(e: &mut Emitter, x: InstId, ty: Type) -> InstId {
    let bt = bool_like(ty);
    let r = e.emit(InstKind::Builtin(Builtin::Floor, vec![x]), ty);
    let frac = e.bin_ty(BinaryOp::Sub, x, r, ty);
    let zero = e.splat(float_const(ty, 0.0), ty);
    let half = e.splat(float_const(ty, 0.5), ty);
    let one = e.splat(float_const(ty, 1.0), ty);
    let up = e.bin_ty(BinaryOp::Add, r, one, ty);
    // r is odd when r - 2 floor(r / 2) is not zero (exact for every r).
    let hr = e.bin_ty(BinaryOp::Mul, r, half, ty);
    let fh = e.emit(InstKind::Builtin(Builtin::Floor, vec![hr]), ty);
    let twice = e.bin_ty(BinaryOp::Add, fh, fh, ty);
    let rest = e.bin_ty(BinaryOp::Sub, r, twice, ty);
    let odd = e.bin_ty(BinaryOp::Ne, rest, zero, bt);
    let above = e.bin_ty(BinaryOp::Gt, frac, half, bt);
    let tie = e.bin_ty(BinaryOp::Eq, frac, half, bt);
    let at_tie = select(e, odd, up, r, ty);
    let m = select(e, above, up, r, ty);
    let m = select(e, tie, at_tie, m, ty);
    let is_zero = e.bin_ty(BinaryOp::Eq, m, zero, bt);
    let signed = e.bin_ty(BinaryOp::Mul, x, zero, ty);
    select(e, is_zero, signed, m, ty)
}

fn fmin_max(e: &mut Emitter, max: bool, x: InstId, y: InstId, ty: Type) -> InstId {
    let bt = bool_like(ty);
    let x_nan = e.emit(InstKind::Builtin(Builtin::IsNan, vec![x]), bt);
    let y_nan = e.emit(InstKind::Builtin(Builtin::IsNan, vec![y]), bt);
    let op = if max { BinaryOp::Gt } else { BinaryOp::Lt };
    let pick_y = e.bin_ty(op, y, x, bt);
    let m = select(e, pick_y, y, x, ty);
    let m = select(e, y_nan, x, m, ty);
    select(e, x_nan, y, m, ty)
}

/// `fma(a, b, c)` rounded once, in plain f32 / f64 arithmetic that rounds
/// after every operation (Boldo and Melquiond, "Emulation of FMA and
/// correctly rounded sums: proved algorithms using rounding to odd", IEEE
/// Trans. Computers 57(4), 2008, algorithm 5.4):
///
/// ```text
/// (uh, ul) = a·b exactly (Dekker's product)   (th, tl) = c + uh exactly (TwoSum)
/// v = tl + ul rounded to odd                  result = th + v
/// ```
///
/// Round-to-odd is `tl + ul` rounded to nearest, moved one unit in the
/// last place towards the exact sum when it was inexact and its last bit is
/// even. The result is the correctly rounded `a·b + c` unless a step
/// overflows or the product underflows (|a·b| below 2^-969 for f64, 2^-101
/// for f32, or |a|, |b| above 2^995 / 2^114 where Dekker's split
/// overflows): there it falls back to `a·b + c` rounded twice, and an
/// infinite or NaN `c` with finite `a`, `b` gives `c`, as a fused
/// operation does.
fn fused_fma(e: &mut Emitter, a: InstId, b: InstId, c: InstId, ty: Type) -> InstId {
    let wide = ty.scalar() == Some(Scalar::F64);
    let (ut, split) = if wide {
        (Type::Scalar(Scalar::U64), 134_217_729.0) // 2^27 + 1
    } else {
        (Type::U32, 4_097.0) // 2^12 + 1
    };
    let bin = |e: &mut Emitter, op, x, y| e.bin_ty(op, x, y, ty);
    use BinaryOp::{Add, Mul, Sub};
    // Dekker / Veltkamp: x = hi + lo, each half of the significand.
    let halves = |e: &mut Emitter, x: InstId| {
        let k = e.konst(float_const(ty, split));
        let t = bin(e, Mul, k, x);
        let d = bin(e, Sub, t, x);
        let hi = bin(e, Sub, t, d);
        let lo = bin(e, Sub, x, hi);
        (hi, lo)
    };
    let uh = bin(e, Mul, a, b);
    let (ah, al) = halves(e, a);
    let (bh, bl) = halves(e, b);
    let p = bin(e, Mul, ah, bh);
    let r = bin(e, Sub, p, uh);
    let p = bin(e, Mul, ah, bl);
    let r = bin(e, Add, r, p);
    let p = bin(e, Mul, al, bh);
    let r = bin(e, Add, r, p);
    let p = bin(e, Mul, al, bl);
    let ul = bin(e, Add, r, p);
    // TwoSum: s + err == x + y exactly.
    let two_sum = |e: &mut Emitter, x: InstId, y: InstId| {
        let s = bin(e, Add, x, y);
        let yv = bin(e, Sub, s, x);
        let xv = bin(e, Sub, s, yv);
        let dx = bin(e, Sub, x, xv);
        let dy = bin(e, Sub, y, yv);
        let err = bin(e, Add, dx, dy);
        (s, err)
    };
    let (th, tl) = two_sum(e, c, uh);
    let (v, ve) = two_sum(e, tl, ul);
    // Round to odd: an inexact v with an even last bit steps towards ve
    // (v is not zero then: a zero sum is exact).
    let zero = e.konst(float_const(ty, 0.0));
    let (uzero, uone) = if wide {
        let z = e.konst(Const {
            scalar: Scalar::U64,
            bits: 0,
        });
        let o = e.konst(Const {
            scalar: Scalar::U64,
            bits: 1,
        });
        (z, o)
    } else {
        (e.konst(Const::u32(0)), e.konst(Const::u32(1)))
    };
    let vb = e.emit(InstKind::Bitcast(v), ut);
    let low = e.bin_ty(BinaryOp::BitAnd, vb, uone, ut);
    let even = e.bin_ty(BinaryOp::Eq, low, uzero, Type::BOOL);
    let inexact = e.bin_ty(BinaryOp::Ne, ve, zero, Type::BOOL);
    let odd_needed = e.bin_ty(BinaryOp::LogicalAnd, even, inexact, Type::BOOL);
    let v_pos = e.bin_ty(BinaryOp::Gt, v, zero, Type::BOOL);
    let ve_pos = e.bin_ty(BinaryOp::Gt, ve, zero, Type::BOOL);
    let away = e.bin_ty(BinaryOp::Eq, v_pos, ve_pos, Type::BOOL);
    let up = e.bin_ty(BinaryOp::Add, vb, uone, ut);
    let down = e.bin_ty(BinaryOp::Sub, vb, uone, ut);
    let stepped = select(e, away, up, down, ut);
    let vb = select(e, odd_needed, stepped, vb, ut);
    let v = e.emit(InstKind::Bitcast(vb), ty);
    let fused = bin(e, Add, th, v);
    // Where the expansion does not hold: twice rounded, or c itself.
    let naive = bin(e, Add, uh, c);
    let finite = |e: &mut Emitter, x: InstId| {
        let n = e.emit(InstKind::Builtin(Builtin::IsNan, vec![x]), Type::BOOL);
        let i = e.emit(InstKind::Builtin(Builtin::IsInf, vec![x]), Type::BOOL);
        let bad = e.bin_ty(BinaryOp::LogicalOr, n, i, Type::BOOL);
        e.emit(InstKind::Unary(UnaryOp::Not, bad), Type::BOOL)
    };
    let fused_ok = finite(e, fused);
    let product = e.bin_ty(BinaryOp::Ne, uh, zero, Type::BOOL);
    let ok = e.bin_ty(BinaryOp::LogicalAnd, fused_ok, product, Type::BOOL);
    let r = select(e, ok, fused, naive, ty);
    let a_ok = finite(e, a);
    let b_ok = finite(e, b);
    let c_ok = finite(e, c);
    let ab_ok = e.bin_ty(BinaryOp::LogicalAnd, a_ok, b_ok, Type::BOOL);
    let c_bad = e.emit(InstKind::Unary(UnaryOp::Not, c_ok), Type::BOOL);
    let just_c = e.bin_ty(BinaryOp::LogicalAnd, ab_ok, c_bad, Type::BOOL);
    select(e, just_c, c, r, ty)
}

/// `m[c][r]` for every column c and row r of a matrix value.
fn elements(e: &mut Emitter, m: InstId) -> Vec<Vec<InstId>> {
    let Type::Matrix(n) = e.ty(m) else {
        unreachable!("the validator checked determinant/inverse take a matrix")
    };
    (0..n as u32)
        .map(|c| {
            let col = e.emit(InstKind::Extract(m, c), Type::Vector(Scalar::F32, n));
            (0..n as u32)
                .map(|r| e.emit(InstKind::Extract(col, r), Type::F32))
                .collect()
        })
        .collect()
}

/// Determinant by cofactor expansion along row 0 of a column-major element
/// grid: `m00·det(M0) − m10·det(M1) + m20·det(M2) …`, the interpreter's order.
fn det(e: &mut Emitter, m: &[Vec<InstId>]) -> InstId {
    let n = m.len();
    if n == 1 {
        return m[0][0];
    }
    if n == 2 {
        let p = e.bin_ty(BinaryOp::Mul, m[0][0], m[1][1], Type::F32);
        let q = e.bin_ty(BinaryOp::Mul, m[1][0], m[0][1], Type::F32);
        return e.bin_ty(BinaryOp::Sub, p, q, Type::F32);
    }
    let mut acc: Option<InstId> = None;
    for c in 0..n {
        let sub: Vec<Vec<InstId>> = (0..n)
            .filter(|&cc| cc != c)
            .map(|cc| m[cc][1..].to_vec())
            .collect();
        let d = det(e, &sub);
        let term = e.bin_ty(BinaryOp::Mul, m[c][0], d, Type::F32);
        acc = Some(match acc {
            None => term,
            Some(s) => {
                let op = if c % 2 == 0 {
                    BinaryOp::Add
                } else {
                    BinaryOp::Sub
                };
                e.bin_ty(op, s, term, Type::F32)
            }
        });
    }
    acc.expect("n > 0")
}

/// inverse(m) = adjugate / determinant: element (c, r) is cofactor(row c, column r) / det.
fn inverse(e: &mut Emitter, m: InstId) -> InstId {
    let el = elements(e, m);
    let n = el.len();
    let d = det(e, &el);
    let mut cols = Vec::with_capacity(n);
    for c in 0..n {
        let mut comps = Vec::with_capacity(n);
        for r in 0..n {
            let minor: Vec<Vec<InstId>> = (0..n)
                .filter(|&cc| cc != r)
                .map(|cc| (0..n).filter(|&rr| rr != c).map(|rr| el[cc][rr]).collect())
                .collect();
            let mut cof = det(e, &minor);
            if (r + c) % 2 == 1 {
                cof = e.emit(InstKind::Unary(UnaryOp::Neg, cof), Type::F32);
            }
            comps.push(e.bin_ty(BinaryOp::Div, cof, d, Type::F32));
        }
        cols.push(e.emit(
            InstKind::Construct(comps),
            Type::Vector(Scalar::F32, n as u8),
        ));
    }
    e.emit(InstKind::Construct(cols), Type::Matrix(n as u8))
}

/// Rust's `as` from a float (f32, f64) to an integer (i32, u32, i64, u64),
/// component-wise: NaN → 0, saturating at both ends. The inner `Cast` only
/// ever sees values in range.
fn saturating_cast(e: &mut Emitter, x: InstId, ty: Type) -> InstId {
    let s = ty.scalar().expect("integer type");
    let fty = e.ty(x);
    let fs = fty.scalar().expect("float type");
    let bty = fty.with_scalar(Scalar::Bool);
    // `top` is 2^bits (2^(bits-1) when signed), the first value out of
    // range above; `hi` the largest source float below it (exact in the
    // source type, so the clamp and the compare agree on every backend).
    let bits = 32 * s.words() as i32;
    let signed = matches!(s, Scalar::I32 | Scalar::I64);
    let top = 2f64.powi(if signed { bits - 1 } else { bits });
    let lo = if signed { -top } else { 0.0 };
    let hi = if fs == Scalar::F64 {
        f64::from_bits(top.to_bits() - 1)
    } else {
        f32::from_bits((top as f32).to_bits() - 1) as f64
    };
    let max = Const {
        scalar: s,
        bits: if signed { s.mask() >> 1 } else { s.mask() },
    };
    let lo = e.splat(Const::float(fs, lo), fty);
    let hi = e.splat(Const::float(fs, hi), fty);
    let clamped = e.emit(InstKind::Builtin(Builtin::Clamp, vec![x, lo, hi]), fty);
    let conv = e.emit(InstKind::Cast(clamped), ty);
    let top = e.splat(Const::float(fs, top), fty);
    let too_big = e.bin_ty(BinaryOp::Ge, x, top, bty);
    let max = e.splat(max, ty);
    let sat = e.emit(
        InstKind::Select {
            cond: too_big,
            accept: max,
            reject: conv,
        },
        ty,
    );
    let nan = e.emit(InstKind::Builtin(Builtin::IsNan, vec![x]), bty);
    let zero = e.splat(Const { scalar: s, bits: 0 }, ty);
    e.emit(
        InstKind::Select {
            cond: nan,
            accept: zero,
            reject: sat,
        },
        ty,
    )
}

/// The constant bits of `h`'s components, when every one is a constant.
fn const_components(f: &Function, h: InstId) -> Option<Vec<u64>> {
    match &f.insts[h].kind {
        InstKind::Const(c) => Some(vec![c.bits]),
        // A bit reinterpretation keeps the bits (range loops divide by a
        // bitcast step).
        InstKind::Bitcast(x) => const_components(f, *x),
        InstKind::Construct(parts) => {
            let mut out = Vec::new();
            for p in parts {
                out.extend(const_components(f, *p)?);
            }
            Some(out)
        }
        _ => None,
    }
}

/// A divisor for `a / b` (`a % b`) on which the native division cannot
/// fault and that gives Weft's result, or `None` when `b` is already one.
///
/// Dividing by 1 gives exactly what Weft defines for the faulting cases
/// (`a / 1 == a`, `a % 1 == 0`), so only the divisor changes:
/// - every component a known constant that cannot fault: `None` (a
///   division by a non-zero constant costs nothing more than before);
/// - known constants, some zero, none -1 (for i32): zeros become ones;
/// - otherwise `select(b == 0, 1, b)`, and for i32 where `b` may be -1
///   (and `a` may be `i32::MIN`): `select(b == -1, select(a == MIN, 1, -1), ·)`.
fn safe_divisor(e: &mut Emitter, a: InstId, b: InstId) -> Option<InstId> {
    let ty = e.ty(b);
    let s = ty.scalar().expect("integer divisor");
    let signed = matches!(s, Scalar::I32 | Scalar::I64);
    let minus_one = s.mask(); // -1's bits
    let min = 1u64 << (32 * s.words() - 1); // MIN's bits
    let known = const_components(e.f, b);
    let dividend = const_components(e.f, a);
    // Whether component k of the dividend may be i32::MIN.
    let may_be_min = |k: usize| dividend.as_ref().is_none_or(|d| d.get(k) == Some(&min));
    let may_overflow = signed
        && match &known {
            Some(bits) => bits
                .iter()
                .enumerate()
                .any(|(k, &v)| v == minus_one && may_be_min(k)),
            None => dividend.as_ref().is_none_or(|d| d.contains(&min)),
        };
    match &known {
        Some(bits) if !bits.contains(&0) && !may_overflow => return None,
        Some(_) if !may_overflow => return Some(nonzero_divisor(e, b)),
        _ => {}
    }
    let bty = ty.with_scalar(Scalar::Bool);
    let k = |v: u64| Const { scalar: s, bits: v };
    let one = e.splat(k(1), ty);
    let mut safe = if known.as_ref().is_some_and(|bits| !bits.contains(&0)) {
        b
    } else {
        let zero = e.splat(k(0), ty);
        let is_zero = e.bin_ty(BinaryOp::Eq, b, zero, bty);
        e.emit(
            InstKind::Select {
                cond: is_zero,
                accept: one,
                reject: b,
            },
            ty,
        )
    };
    if may_overflow {
        let m1 = e.splat(k(minus_one), ty);
        let minv = e.splat(k(min), ty);
        let is_m1 = e.bin_ty(BinaryOp::Eq, b, m1, bty);
        let is_min = e.bin_ty(BinaryOp::Eq, a, minv, bty);
        let for_m1 = e.emit(
            InstKind::Select {
                cond: is_min,
                accept: one,
                reject: m1,
            },
            ty,
        );
        safe = e.emit(
            InstKind::Select {
                cond: is_m1,
                accept: for_m1,
                reject: safe,
            },
            ty,
        );
    }
    Some(safe)
}

/// A copy of the divisor `h` with every constant zero component replaced by one.
fn nonzero_divisor(e: &mut Emitter, h: InstId) -> InstId {
    match e.f.insts[h].kind.clone() {
        InstKind::Const(c) if c.bits == 0 => e.konst(Const {
            scalar: c.scalar,
            bits: 1,
        }),
        InstKind::Bitcast(x) if const_components(e.f, x).is_some_and(|b| b.contains(&0)) => {
            let ty = e.ty(h);
            let inner = nonzero_divisor(e, x);
            e.emit(InstKind::Bitcast(inner), ty)
        }
        InstKind::Construct(parts) => {
            let ty = e.ty(h);
            let parts = parts.iter().map(|&p| nonzero_divisor(e, p)).collect();
            e.emit(InstKind::Construct(parts), ty)
        }
        _ => h,
    }
}
