//! The reference VM's interpreter: executes `weft_codegen::vm` code, one loop
//! iteration per call, in parallel over the kernel's range with rayon.
//!
//! Clarity over speed: every op's meaning comes from `weft_ir::ir::eval`
//! (shared with constant folding). Kernels without atomics give identical
//! results for any thread count because iterations share no state.

use crate::RuntimeError;
use rayon::prelude::*;
use std::sync::atomic::{AtomicU32, Ordering};
use weft_codegen::vm::{Op, VmFunction, VmKernel};
use weft_ir::ir::eval;
use weft_ir::ir::{
    AtomicOp, BinaryOp, Builtin, FaultKind, FaultSite, LaunchValue, Program, Span, MAX_CALL_DEPTH,
};
use weft_ir::types::{Scalar, Type};

pub struct Launch<'a> {
    pub program: &'a Program,
    pub kernel: &'a VmKernel,
    /// Buffers in `kernel.roots` order.
    pub buffers: Vec<&'a [AtomicU32]>,
    pub params: &'a [u32],
    pub frame: i32,
    pub seed: u32,
    /// Earlier launches of this kernel in the run (feeds `random()`).
    pub launch_index: u32,
    pub shape: &'a [u32],
}

/// What one invocation has beside its registers: the random state (shared
/// with the functions it calls) and its linear index.
struct Invocation {
    rng: u32,
    /// Loop trips so far (`TripsLoad` / `TripsStore`).
    trips: u32,
    linear: u32,
}

struct Fault {
    span: Span,
    message: String,
}

pub fn launch(l: &Launch) -> Result<(), RuntimeError> {
    let total: u64 = l.shape.iter().map(|&s| s as u64).product();
    let regs = l.kernel.entry.regs as usize;
    let dims = l.shape.len();
    let result = (0..total as usize)
        .into_par_iter()
        .with_min_len(256)
        .try_for_each_init(
            || vec![0u64; regs],
            |r, lin| {
                let mut rest = lin as u64;
                for d in (0..dims).rev() {
                    let (slot, _) = l.kernel.entry.arg_slots[d];
                    r[slot as usize] = rest % l.shape[d] as u64;
                    rest /= l.shape[d] as u64;
                }
                let mut inv = Invocation {
                    rng: 0,
                    trips: 0,
                    linear: lin as u32,
                };
                exec(l, &l.kernel.entry, r, &mut inv, 0).map(|_| ())
            },
        );
    result.map_err(|f| RuntimeError::Kernel {
        node: weft_ir::ir::node_of(&l.kernel.name, &l.kernel.fused, f.span.part).to_string(),
        line: f.span.line,
        col: f.span.col,
        message: f.message,
    })
}

fn exec(
    l: &Launch,
    f: &VmFunction,
    r: &mut [u64],
    inv: &mut Invocation,
    depth: u32,
) -> Result<(u32, u32), Fault> {
    let ops = &f.ops;
    let mut pc = 0usize;
    macro_rules! s {
        ($x:expr) => {
            r[$x as usize]
        };
    }
    loop {
        match &ops[pc] {
            Op::Const { dst, bits } => s!(*dst) = *bits,
            Op::Copy { dst, src, n: 1 } => s!(*dst) = s!(*src),
            Op::Copy { dst, src, n } => {
                let (d, sr, n) = (*dst as usize, *src as usize, *n as usize);
                r.copy_within(sr..sr + n, d);
            }
            Op::AddF { dst, a, b } => s!(*dst) = wb(w(s!(*a)) + w(s!(*b))),
            Op::SubF { dst, a, b } => s!(*dst) = wb(w(s!(*a)) - w(s!(*b))),
            Op::MulF { dst, a, b } => s!(*dst) = wb(w(s!(*a)) * w(s!(*b))),
            Op::AddU { dst, a, b } => s!(*dst) = (s!(*a) as u32).wrapping_add(s!(*b) as u32) as u64,
            Op::MulU { dst, a, b } => s!(*dst) = (s!(*a) as u32).wrapping_mul(s!(*b) as u32) as u64,
            Op::Pack { dst, src } => s!(*dst) = (s!(*src) & 0xffff_ffff) | (s!(*src + 1) << 32),
            Op::Unpack { dst, src } => {
                let v = s!(*src);
                s!(*dst) = v & 0xffff_ffff;
                s!(*dst + 1) = v >> 32;
            }
            Op::Unary { op, s, dst, a, n } => {
                for c in 0..*n {
                    s!(dst + c) = eval::unary(*op, *s, s!(a + c));
                }
            }
            Op::Binary {
                op,
                s,
                dst,
                a,
                b,
                n,
            } => {
                for c in 0..*n {
                    s!(dst + c) = eval::binary(*op, *s, s!(a + c), s!(b + c));
                }
            }
            Op::Select {
                dst,
                cond,
                cond_n,
                a,
                b,
                n,
            } => {
                for c in 0..*n {
                    let k = if *cond_n == 1 {
                        s!(*cond)
                    } else {
                        s!(cond + c)
                    };
                    s!(dst + c) = if k != 0 { s!(a + c) } else { s!(b + c) };
                }
            }
            Op::Cast {
                from,
                to,
                dst,
                a,
                n,
            } => {
                for c in 0..*n {
                    s!(dst + c) = eval::cast(*from, *to, s!(a + c));
                }
            }
            Op::ExtractDyn {
                dst,
                src,
                index,
                elem,
                len,
            } => {
                let i = (s!(*index) as u32 as i32).clamp(0, *len as i32 - 1) as u32;
                let from = (src + i * elem) as usize;
                r.copy_within(from..from + *elem as usize, *dst as usize);
            }
            Op::InsertDyn {
                dst,
                index,
                value,
                elem,
                len,
            } => {
                let i = (s!(*index) as u32 as i32).clamp(0, *len as i32 - 1) as u32;
                let v = *value as usize;
                r.copy_within(v..v + *elem as usize, (dst + i * elem) as usize);
            }
            Op::BuiltinWise {
                b,
                s,
                dst,
                args,
                nargs,
                n,
            } => {
                let mut a = [0u64; 3];
                for c in 0..*n {
                    for k in 0..*nargs as usize {
                        a[k] = s!(args[k] + c);
                    }
                    s!(dst + c) = eval::builtin_scalar(*b, *s, &a[..*nargs as usize]).unwrap_or(0);
                }
            }
            Op::BuiltinSpecial { b, ty, dst, args } => special(*b, *ty, *dst, *args, r),
            Op::MatMul {
                dst,
                a,
                b,
                a_ty,
                b_ty,
            } => matmul(*dst, *a, *b, *a_ty, *b_ty, r),
            Op::Param { dst, index } => s!(*dst) = l.params[*index as usize] as u64,
            Op::Frame { dst } => s!(*dst) = l.frame as u32 as u64,
            Op::Launch { dst, value } => {
                s!(*dst) = match value {
                    LaunchValue::Seed => l.seed,
                    LaunchValue::Count => l.launch_index,
                    LaunchValue::Linear => inv.linear,
                } as u64
            }
            Op::RngLoad { dst } => s!(*dst) = inv.rng as u64,
            Op::RngStore { src } => inv.rng = s!(*src) as u32,
            Op::TripsLoad { dst } => s!(*dst) = inv.trips as u64,
            Op::TripsStore { src } => inv.trips = s!(*src) as u32,
            Op::BufLoad {
                dst,
                root,
                addr,
                span,
            } => {
                s!(*dst) = word(l, *root, s!(*addr) as u32, *span)?.load(Ordering::Relaxed) as u64;
            }
            Op::BufStore {
                root,
                addr,
                src,
                span,
            } => {
                word(l, *root, s!(*addr) as u32, *span)?.store(s!(*src) as u32, Ordering::Relaxed);
            }
            Op::BufAtomic {
                op,
                s: _,
                dst,
                root,
                addr,
                value,
                cmp,
                span,
            } => {
                let cell = word(l, *root, s!(*addr) as u32, *span)?;
                s!(*dst) = atomic(cell, *op, s!(*value) as u32, s!(*cmp) as u32) as u64;
            }
            Op::Trap { site, value } => {
                return Err(match l.kernel.fault_sites.get(*site as usize) {
                    Some(site) => Fault {
                        span: site.span,
                        message: site.message(l.program, s!(*value) as u32),
                    },
                    None => Fault {
                        span: Span::default(),
                        message: format!("internal error: unknown fault site {}", site),
                    },
                });
            }
            Op::Jump { target } => {
                pc = *target as usize;
                continue;
            }
            Op::JumpIfFalse { cond, target } => {
                if s!(*cond) == 0 {
                    pc = *target as usize;
                    continue;
                }
            }
            Op::Call {
                func,
                args,
                dst,
                ret_n,
            } => {
                if depth >= MAX_CALL_DEPTH {
                    return Err(fault(l, Span::default(), FaultKind::CallDepth, 0));
                }
                let callee = &l.kernel.functions[*func as usize];
                let mut cr = vec![0u64; callee.regs as usize];
                for (k, (slot, n)) in args.iter().enumerate() {
                    let (cs, _) = callee.arg_slots[k];
                    cr[cs as usize..(cs + n) as usize]
                        .copy_from_slice(&r[*slot as usize..(slot + n) as usize]);
                }
                let (src, n) = exec(l, callee, &mut cr, inv, depth + 1)?;
                let n = n.min(*ret_n) as usize;
                r[*dst as usize..*dst as usize + n]
                    .copy_from_slice(&cr[src as usize..src as usize + n]);
            }
            Op::Return { src, n } => return Ok((*src, *n)),
        }
        pc += 1;
    }
}

/// The fault of `kind` at `span`, worded as every backend words it.
fn fault(l: &Launch, span: Span, kind: FaultKind, value: u32) -> Fault {
    Fault {
        span,
        message: FaultSite {
            span,
            kind,
            resume: false,
        }
        .message(l.program, value),
    }
}

/// Word `addr` of buffer `root`. Legalized bounds checks keep addresses in
/// range; a program compiled without them faults here, as the JIT and CUDA
/// do, instead of panicking or touching another field's words.
fn word<'b>(l: &Launch<'b>, root: u32, addr: u32, span: Span) -> Result<&'b AtomicU32, Fault> {
    l.buffers
        .get(root as usize)
        .copied()
        .and_then(|b| b.get(addr as usize))
        .ok_or_else(|| fault(l, span, FaultKind::Address, addr))
}

/// The atomics of the VM's `CAPS` (codegen refuses the others: `legalize`
/// wrote them as compare-exchange loops). Unsigned min/max and the bit
/// operations act on the word, add and sub wrap, as on every target.
fn atomic(cell: &AtomicU32, op: AtomicOp, v: u32, cmp: u32) -> u32 {
    match op {
        AtomicOp::Exchange => cell.swap(v, Ordering::AcqRel),
        AtomicOp::CompareExchange => {
            match cell.compare_exchange(cmp, v, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(old) | Err(old) => old,
            }
        }
        AtomicOp::Add => cell.fetch_add(v, Ordering::AcqRel),
        AtomicOp::Sub => cell.fetch_sub(v, Ordering::AcqRel),
        AtomicOp::Min => cell.fetch_min(v, Ordering::AcqRel),
        AtomicOp::Max => cell.fetch_max(v, Ordering::AcqRel),
        AtomicOp::And => cell.fetch_and(v, Ordering::AcqRel),
        AtomicOp::Or => cell.fetch_or(v, Ordering::AcqRel),
        AtomicOp::Xor => cell.fetch_xor(v, Ordering::AcqRel),
    }
}

#[inline]
fn w(b: u64) -> f32 {
    f32::from_bits(b as u32)
}
#[inline]
fn wb(x: f32) -> u64 {
    x.to_bits() as u64
}

/// A float component type the specials compute in: `f32` or `f64`, read
/// from and written to registers as their bit patterns.
trait Flt:
    Copy
    + Default
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::SubAssign
    + std::ops::MulAssign
    + std::iter::Sum
{
    const ONE: Self;
    const TWO: Self;
    fn get(b: u64) -> Self;
    fn put(self) -> u64;
    fn sqrt(self) -> Self;
    fn is_nan(self) -> bool;
    fn is_infinite(self) -> bool;
}

impl Flt for f32 {
    const ONE: Self = 1.0;
    const TWO: Self = 2.0;
    fn get(b: u64) -> Self {
        w(b)
    }
    fn put(self) -> u64 {
        wb(self)
    }
    fn sqrt(self) -> Self {
        f32::sqrt(self)
    }
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
    fn is_infinite(self) -> bool {
        f32::is_infinite(self)
    }
}

impl Flt for f64 {
    const ONE: Self = 1.0;
    const TWO: Self = 2.0;
    fn get(b: u64) -> Self {
        f64::from_bits(b)
    }
    fn put(self) -> u64 {
        self.to_bits()
    }
    fn sqrt(self) -> Self {
        f64::sqrt(self)
    }
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
    fn is_infinite(self) -> bool {
        f64::is_infinite(self)
    }
}

/// Reads `n` (≤ 16) float registers into a stack array.
#[inline]
fn rf<T: Flt>(r: &[u64], at: u32, n: usize) -> [T; 16] {
    let mut out = [T::default(); 16];
    for (k, o) in out.iter_mut().enumerate().take(n) {
        *o = T::get(r[at as usize + k]);
    }
    out
}

#[inline]
fn wf<T: Flt>(r: &mut [u64], at: u32, v: &[T]) {
    for (k, x) in v.iter().enumerate() {
        r[at as usize + k] = x.put();
    }
}

fn dot<T: Flt>(a: &[T], b: &[T]) -> T {
    a.iter().zip(b).map(|(&x, &y)| x * y).sum()
}

fn special(b: Builtin, ty: Type, dst: u32, args: [u32; 2], r: &mut [u64]) {
    match ty.scalar() {
        Some(Scalar::F64) => special_float::<f64>(b, ty, dst, args, r),
        Some(Scalar::F32) => special_float::<f32>(b, ty, dst, args, r),
        Some(s) => special_other(b, s, ty.components(), dst, args, r),
        None => {}
    }
}

/// Integer and bool specials (`dot` of integer vectors, `any`, `all`).
fn special_other(b: Builtin, s: Scalar, n: usize, dst: u32, args: [u32; 2], r: &mut [u64]) {
    match b {
        Builtin::Dot => {
            let mut acc = 0u64;
            for c in 0..n as u32 {
                let p = eval::binary(
                    BinaryOp::Mul,
                    s,
                    r[(args[0] + c) as usize],
                    r[(args[1] + c) as usize],
                );
                acc = eval::binary(BinaryOp::Add, s, acc, p);
            }
            r[dst as usize] = acc;
        }
        Builtin::Any | Builtin::All => {
            let it = (0..n as u32).map(|c| r[(args[0] + c) as usize] != 0);
            let v = if b == Builtin::Any {
                it.into_iter().any(|x| x)
            } else {
                it.into_iter().all(|x| x)
            };
            r[dst as usize] = v as u64;
        }
        _ => {}
    }
}

fn special_float<T: Flt>(b: Builtin, ty: Type, dst: u32, args: [u32; 2], r: &mut [u64]) {
    let n = ty.components();
    match b {
        Builtin::Length => {
            let a = &rf::<T>(r, args[0], n)[..n];
            wf(r, dst, &[dot(a, a).sqrt()]);
        }
        Builtin::Distance => {
            let (a, c) = (rf::<T>(r, args[0], n), rf::<T>(r, args[1], n));
            let mut d = [T::default(); 16];
            for k in 0..n {
                d[k] = a[k] - c[k];
            }
            wf(r, dst, &[dot(&d[..n], &d[..n]).sqrt()]);
        }
        Builtin::Normalize => {
            let mut a = rf::<T>(r, args[0], n);
            let inv = T::ONE / dot(&a[..n], &a[..n]).sqrt();
            a.iter_mut().for_each(|x| *x *= inv);
            wf(r, dst, &a[..n]);
        }
        Builtin::Dot => {
            let v = dot(&rf::<T>(r, args[0], n)[..n], &rf::<T>(r, args[1], n)[..n]);
            wf(r, dst, &[v]);
        }
        Builtin::Cross => {
            let (a, c) = (rf::<T>(r, args[0], 3), rf::<T>(r, args[1], 3));
            wf(
                r,
                dst,
                &[
                    a[1] * c[2] - a[2] * c[1],
                    a[2] * c[0] - a[0] * c[2],
                    a[0] * c[1] - a[1] * c[0],
                ],
            );
        }
        Builtin::Reflect => {
            let (mut i, nn) = (rf::<T>(r, args[0], n), rf::<T>(r, args[1], n));
            let d = T::TWO * dot(&nn[..n], &i[..n]);
            for k in 0..n {
                i[k] -= d * nn[k];
            }
            wf(r, dst, &i[..n]);
        }
        Builtin::Outer => {
            let (a, c) = (rf::<T>(r, args[0], n), rf::<T>(r, args[1], n));
            // Column j of a ⊗ c is a * c[j].
            let mut m = [T::default(); 16];
            for j in 0..n {
                for i in 0..n {
                    m[j * n + i] = a[i] * c[j];
                }
            }
            wf(r, dst, &m[..n * n]);
        }
        Builtin::Transpose => {
            let Type::Matrix(k) = ty else { return };
            let k = k as usize;
            let m = rf::<T>(r, args[0], k * k);
            let t: Vec<T> = (0..k * k).map(|i| m[(i % k) * k + i / k]).collect();
            wf(r, dst, &t);
        }
        Builtin::IsNan | Builtin::IsInf => {
            for c in 0..n as u32 {
                let x = T::get(r[(args[0] + c) as usize]);
                r[(dst + c) as usize] = if b == Builtin::IsNan {
                    x.is_nan()
                } else {
                    x.is_infinite()
                } as u64;
            }
        }
        _ => {}
    }
}

fn matmul(dst: u32, a: u32, b: u32, at: Type, bt: Type, r: &mut [u64]) {
    match (at, bt) {
        (Type::Matrix(n), Type::Vector(_, _)) => {
            let n = n as usize;
            let (m, v) = (rf::<f32>(r, a, n * n), rf::<f32>(r, b, n));
            let mut out = [0.0f32; 4];
            for (i, o) in out.iter_mut().enumerate().take(n) {
                *o = (0..n).map(|k| m[k * n + i] * v[k]).sum();
            }
            wf(r, dst, &out[..n]);
        }
        (Type::Vector(_, _), Type::Matrix(n)) => {
            let n = n as usize;
            let (v, m) = (rf::<f32>(r, a, n), rf::<f32>(r, b, n * n));
            let mut out = [0.0f32; 4];
            for (j, o) in out.iter_mut().enumerate().take(n) {
                *o = dot(&v[..n], &m[j * n..j * n + n]);
            }
            wf(r, dst, &out[..n]);
        }
        (Type::Matrix(n), Type::Matrix(_)) => {
            let n = n as usize;
            let (ma, mb) = (rf::<f32>(r, a, n * n), rf::<f32>(r, b, n * n));
            let mut out = [0.0f32; 16];
            for j in 0..n {
                for i in 0..n {
                    out[j * n + i] = (0..n).map(|k| ma[k * n + i] * mb[j * n + k]).sum();
                }
            }
            wf(r, dst, &out[..n * n]);
        }
        _ => {}
    }
}
