//! Four loop iterations at once: the kernel body over `F32X4` / `I32X4` lanes.
//!
//! Pre: a validated, access-lowered kernel for which [`vectorizable`] holds
//! (no helper calls, a 1-D range or a last axis whose extent
//! is a multiple of 4, so that an aligned group of four linear indices
//! never wraps a row). Post: a function with `ChunkFn`'s signature that runs
//! `start..end` as aligned groups of four consecutive iterations, calling
//! the kernel's scalar chunk function for the ragged ends; or
//! `Ok(false)` when the body uses something the lane lowering does not
//! handle (a run-time index into a vector, say), and the kernel keeps its
//! scalar chunk function.
//!
//! Meaning: lane k computes exactly what the scalar lowering computes for
//! iteration `group + k`, through the same helpers (`binary`, `cast`,
//! `builtin`, … in `vmode`): lane-wise IEEE f32 arithmetic is the same
//! arithmetic, and what has no vector instruction (integer division,
//! transcendental functions through the interpreter's Rust functions) runs
//! one lane at a time. So fields are bit-identical to the scalar code; only
//! the order of side effects between the four iterations of a group
//! differs, which a parallel launch leaves unspecified anyway (float
//! atomics, as everywhere, add in an unspecified order).
//!
//! Values are uniform (`V::U`, one scalar for all lanes: parameters,
//! constants, the outer loop indices), affine (`V::A`, `base + k·stride`:
//! the innermost index and its sums and constant multiples, so that
//! `field[i, j]` over consecutive `j` is one vector load or store), or
//! per-lane vectors (`V::L`). Divergent control flow runs under an
//! execution mask, as ISPC does: an `if` on a per-lane condition runs each
//! side for the lanes that take it (skipping a side no lane takes), a loop
//! repeats while any lane is still in it, `break` / `continue` / `return`
//! take lanes out. Locals are per-lane vectors written under the mask.
//!
//! Safety: every lane's memory access is checked like the scalar code's; a
//! fault reports the first faulting lane. Lanes that are masked off never
//! load, store or fault.

use super::{clif_ty, load_env, Env, Exit, Lower, Setup};
use crate::CodegenError;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::immediates::Ieee32;
use cranelift_codegen::ir::{
    self, types, ConstantData, InstBuilder, MemFlagsData, StackSlotData, StackSlotKind, Value,
};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_jit::JITModule;
use cranelift_module::{FuncId, Module};
use std::collections::{HashMap, HashSet};
use weft_ir::ir::*;
use weft_ir::types::{Scalar, Type};

/// Lanes per group.
const LANES: u8 = 4;

/// One component of a value in the lane lowering.
#[derive(Clone, Copy, Debug)]
pub(in crate::jit) enum V {
    /// The same scalar in every lane (bools as 0/1 words).
    U(Value),
    /// One value per lane (`F32X4` / `I32X4`; bools as 0 / all-ones masks).
    L(Value),
    /// An integer that is `base + k * stride` in lane k.
    A(Value, i64),
}

/// State of the lane lowering of one kernel body.
pub(in crate::jit) struct Simd {
    /// Lanes still running at this point (`I32X4` mask).
    exec: Variable,
    /// `exec` is known to be all lanes here (no divergence, no return yet):
    /// accesses need no mask.
    full: bool,
    /// Lanes that returned from the kernel body.
    ret: Variable,
    /// `return`s lowered so far (a construct that contains one may leave
    /// fewer lanes running after it).
    returns: u32,
    /// Enclosing loops, innermost last.
    loops: Vec<VLoop>,
    /// Which locals hold the same value in every lane (scalar variables).
    uniform_local: Vec<bool>,
    /// Loops whose lanes may leave at different trips (run masked).
    masked_loops: HashSet<InstId>,
    /// Local stores that need no mask (see `unmasked_stores`).
    unmasked: HashSet<InstId>,
    vals: HashMap<InstId, Vec<V>>,
    locals: Vec<Vec<Variable>>,
    args: Vec<V>,
    /// The instruction the lowering stopped at, for `WEFT_JIT_DISASM`.
    why: Option<String>,
    /// A 16-byte slot gathered vectors are written to (see `pin`).
    pin: ir::StackSlot,
    /// Loads of two adjacent words, first → second (see `adjacent_loads`).
    pairs: HashMap<InstId, InstId>,
    /// Second loads of a pair whose lanes the first one's gather already
    /// assembled.
    paired: HashMap<InstId, Value>,
    /// Runs of neighbouring scatter-adds, first add → its run (see `add_runs`).
    add_runs: HashMap<InstId, Vec<(InstId, u32)>>,
    /// Each add of a run → the run's first add.
    run_of: HashMap<InstId, InstId>,
    /// First adds of the runs lowered together, at their last add.
    deferred: HashSet<InstId>,
    /// Each lane's `random()` state (`I32X4`), when the kernel calls it.
    rng: Option<Variable>,
}

/// Word loads `buf_load R[a]` followed in their block, with only pure
/// instructions between, by `buf_load R[a + 1]` of the same 32-bit type
/// (the two components of a `vec2`, or a cell's neighbouring fields):
/// first → second. A gather of such a pair loads 64 bits per lane, half
/// the loads and lane inserts of two gathers.
fn adjacent_loads(f: &Function) -> HashMap<InstId, InstId> {
    fn walk(f: &Function, b: &Block, out: &mut HashMap<InstId, InstId>) {
        for (i, &h) in b.iter().enumerate() {
            for nested in f.insts[h].kind.blocks() {
                walk(f, nested, out);
            }
            let InstKind::BufLoad { root, addr } = f.insts[h].kind else {
                continue;
            };
            let ty = f.insts[h].ty;
            if ty != Type::F32 && ty != Type::I32 && ty != Type::U32 {
                continue;
            }
            for &g in &b[i + 1..] {
                match f.insts[g].kind {
                    InstKind::BufLoad { root: r, addr: a }
                        if r == root && f.insts[g].ty == ty && plus_one(f, a, addr) =>
                    {
                        out.insert(h, g);
                        break;
                    }
                    ref k if k.is_pure() => {}
                    _ => break,
                }
            }
        }
    }
    fn plus_one(f: &Function, a: InstId, base: InstId) -> bool {
        let one = |x: InstId| matches!(f.insts[x].kind, InstKind::Const(c) if c == Const::u32(1));
        matches!(f.insts[a].kind, InstKind::Binary(BinaryOp::Add, x, y)
            if (x == base && one(y)) || (y == base && one(x)))
    }
    let mut out = HashMap::new();
    walk(f, &f.body, &mut out);
    out
}

/// Runs of f32 scatter-adds to neighbouring words: `buf_atomic_add R[a]`
/// followed in its block, with only pure instructions between, by adds to
/// `R[a + c]` (`c` a distinct constant 1 to 3) of the same root, none with
/// its old value used (a `vec2` or `vec3` added into a cell, or a cell's
/// neighbouring fields, as in a particle-to-grid transfer); and likewise
/// runs of 32-bit word stores (a cell's `vec2` and neighbouring fields
/// written, as in a grid sweep over an interleaved grid): first access →
/// the run's accesses and word offsets, in program order. Where the adds
/// are plain read-modify-writes (`Simd::word_run`), and for stores, a
/// lane's words are accessed together, a pair of neighbouring words as one
/// 64-bit load, add and store (or one 64-bit store), after one check of
/// the run's addresses.
fn add_runs(f: &Function) -> HashMap<InstId, Vec<(InstId, u32)>> {
    fn uses(f: &Function, b: &Block, out: &mut HashSet<InstId>) {
        for &h in b {
            out.extend(f.insts[h].kind.operands());
            for nested in f.insts[h].kind.blocks() {
                uses(f, nested, out);
            }
        }
    }
    fn walk(
        f: &Function,
        b: &Block,
        used: &HashSet<InstId>,
        out: &mut HashMap<InstId, Vec<(InstId, u32)>>,
    ) {
        // (root, address, is a store)
        let add = |h: InstId| match f.insts[h].kind {
            InstKind::BufAtomic {
                op: AtomicOp::Add,
                root,
                addr,
                cmp: None,
                ..
            } if f.insts[h].ty == Type::F32 && !used.contains(&h) => Some((root, addr, false)),
            InstKind::BufStore { root, addr, value }
                if matches!(f.insts[value].ty, Type::F32 | Type::I32 | Type::U32) =>
            {
                Some((root, addr, true))
            }
            _ => None,
        };
        let mut taken = HashSet::new();
        for (i, &h) in b.iter().enumerate() {
            for nested in f.insts[h].kind.blocks() {
                walk(f, nested, used, out);
            }
            if taken.contains(&h) {
                continue;
            }
            let Some((root, base, store)) = add(h) else {
                continue;
            };
            let mut run = vec![(h, 0u32)];
            for &g in &b[i + 1..] {
                match add(g) {
                    Some((r, a, st)) if r == root && st == store => match plus_const(f, a, base) {
                        Some(c) if (1..=3).contains(&c) && run.iter().all(|x| x.1 != c) => {
                            run.push((g, c))
                        }
                        _ => break,
                    },
                    None if f.insts[g].kind.is_pure() => {}
                    _ => break,
                }
            }
            if run.len() > 1 {
                taken.extend(run.iter().map(|x| x.0));
                out.insert(h, run);
            }
        }
    }
    /// `c` when `a` is `base + c` (u32) for a constant `c`.
    fn plus_const(f: &Function, a: InstId, base: InstId) -> Option<u32> {
        let c = |x: InstId| match f.insts[x].kind {
            InstKind::Const(k) if k.scalar == Scalar::U32 => Some(k.lo()),
            _ => None,
        };
        match f.insts[a].kind {
            InstKind::Binary(BinaryOp::Add, x, y) if x == base => c(y),
            InstKind::Binary(BinaryOp::Add, x, y) if y == base => c(x),
            _ => None,
        }
    }
    let mut used = HashSet::new();
    uses(f, &f.body, &mut used);
    let mut out = HashMap::new();
    walk(f, &f.body, &used, &mut out);
    out
}

/// A loop being lowered.
#[derive(Clone, Copy)]
enum VLoop {
    /// Lanes leave at different trips: the lanes still looping.
    Masked(Variable),
    /// Every lane runs the same trips: an ordinary loop.
    Uniform { head: ir::Block, exit: ir::Block },
}

/// Which locals are uniform (every lane holds the same value wherever the
/// local is read) and which loops need masks, by a fixpoint over the entry
/// function: a value is per-lane when it depends on the innermost loop
/// index, an atomic's result or a per-lane local; code is under per-lane
/// control inside an `if` on a per-lane value, inside a masked loop and
/// after a `return`; a local stored a per-lane value or under per-lane
/// control is per-lane; a loop is masked when it is entered under per-lane
/// control, contains a `return`, or a `break` / `continue` of it sits
/// under per-lane control.
fn uniformity(f: &Function, last_arg: u32) -> (Vec<bool>, HashSet<InstId>) {
    struct Walk<'a> {
        f: &'a Function,
        last_arg: u32,
        var_local: Vec<bool>,
        var_val: HashSet<InstId>,
        masked: HashSet<InstId>,
        /// Enclosing loops and whether control was per-lane at their entry.
        loops: Vec<(InstId, bool)>,
        changed: bool,
    }
    impl Walk<'_> {
        /// Returns whether the block contains a `return`.
        fn block(&mut self, blk: &Block, mut ctx: bool) -> bool {
            let mut returned = false;
            for &h in blk {
                let inst = &self.f.insts[h];
                let varying = match &inst.kind {
                    InstKind::Arg(i) => *i == self.last_arg,
                    InstKind::LocalLoad(l) => self.var_local[l.index()],
                    InstKind::BufAtomic { .. }
                    | InstKind::RngLoad
                    | InstKind::Launch(LaunchValue::Linear) => true,
                    k => k.operands().iter().any(|o| self.var_val.contains(o)),
                };
                if varying && self.var_val.insert(h) {
                    self.changed = true;
                }
                let ret = match &inst.kind {
                    InstKind::LocalStore(l, v) => {
                        if (ctx || self.var_val.contains(v)) && !self.var_local[l.index()] {
                            self.var_local[l.index()] = true;
                            self.changed = true;
                        }
                        false
                    }
                    InstKind::If {
                        cond,
                        accept,
                        reject,
                    } => {
                        let inner = ctx || self.var_val.contains(cond);
                        let a = self.block(accept, inner);
                        let r = self.block(reject, inner);
                        a || r
                    }
                    InstKind::Loop { body } => {
                        let masked = self.masked.contains(&h);
                        self.loops.push((h, ctx));
                        let r = self.block(body, ctx || masked);
                        self.loops.pop();
                        if (ctx || r) && self.masked.insert(h) {
                            self.changed = true;
                        }
                        r
                    }
                    InstKind::Break | InstKind::Continue => {
                        if let Some(&(l, entry_ctx)) = self.loops.last() {
                            if ctx && !entry_ctx && self.masked.insert(l) {
                                self.changed = true;
                            }
                        }
                        false
                    }
                    InstKind::Return(_) => true,
                    _ => false,
                };
                if ret {
                    returned = true;
                    ctx = true;
                }
            }
            returned
        }
    }
    let mut w = Walk {
        f,
        last_arg,
        var_local: vec![false; f.locals.len()],
        var_val: HashSet::new(),
        masked: HashSet::new(),
        loops: vec![],
        changed: true,
    };
    while w.changed {
        w.changed = false;
        w.block(&f.body, false);
    }
    (w.var_local.iter().map(|v| !v).collect(), w.masked)
}

/// Stores to a local that a masked-off lane can never read back, which
/// therefore need no mask: at the top level of the body of a masked loop
/// that sits at the top level of the kernel and has no `continue` or
/// `return`, to a local that is read nowhere but inside that loop. A lane
/// masked off there has left the loop for good, so whatever the store
/// leaves in its lane is never seen. Taking the select off the store takes
/// it off the loop-carried chain (julia's `z = z * z + c` no longer waits
/// for the escape test of the same trip).
fn unmasked_stores(f: &Function, masked: &HashSet<InstId>) -> HashSet<InstId> {
    let mut out = HashSet::new();
    let mut loads_total: HashMap<LocalId, usize> = HashMap::new();
    super::super::walk(f, &f.body, &mut |_, i| {
        if let InstKind::LocalLoad(l) = i.kind {
            *loads_total.entry(l).or_default() += 1;
        }
    });
    for &h in &f.body {
        let InstKind::Loop { body } = &f.insts[h].kind else {
            continue;
        };
        if !masked.contains(&h) {
            continue;
        }
        let mut exits_early = false;
        let mut loads_inside: HashMap<LocalId, usize> = HashMap::new();
        super::super::walk(f, body, &mut |_, i| match i.kind {
            InstKind::Continue | InstKind::Return(_) => exits_early = true,
            InstKind::LocalLoad(l) => *loads_inside.entry(l).or_default() += 1,
            _ => {}
        });
        if exits_early {
            continue;
        }
        for &s in body {
            if let InstKind::LocalStore(l, _) = f.insts[s].kind {
                if loads_inside.get(&l) == loads_total.get(&l) {
                    out.insert(s);
                }
            }
        }
    }
    out
}

/// Why the lane lowering stopped.
enum Stop {
    /// A construct it does not handle: keep the scalar code.
    Unsupported,
    Err(CodegenError),
}

impl From<CodegenError> for Stop {
    fn from(e: CodegenError) -> Self {
        Stop::Err(e)
    }
}

/// Whether a kernel may get a four-lane chunk function at all (the lowering
/// itself may still find a construct it does not handle).
pub(in crate::jit) fn vectorizable(kernel: &Kernel, shape: &[u32]) -> bool {
    if shape.len() > 1 && shape.last().is_some_and(|e| e % LANES as u32 != 0) {
        return false;
    }
    // A pointer pool's claim protocol (passes/sparse_ir.rs) lets a racer
    // that lost a cell hold a slot until the publishing step; four lanes
    // racing for one block in lock step hold three at once, so a pool that
    // is exactly full could report itself exhausted. Those kernels keep the
    // scalar code (one iteration at a time per thread).
    if kernel
        .fault_sites
        .iter()
        .any(|s| matches!(s.kind, FaultKind::PoolExhausted { .. }))
    {
        return false;
    }
    let mut ok = true;
    let f = &kernel.entry;
    // Lanes are 32 bits: 64-bit values keep the scalar code.
    super::super::walk(f, &f.body, &mut |_, i| {
        ok &= !never_in_lanes(&i.kind) && !i.ty.is_wide()
    });
    ok
}

/// Helper calls and what legalized IR no longer holds.
fn never_in_lanes(kind: &InstKind) -> bool {
    matches!(
        kind,
        InstKind::Call(..)
            | InstKind::BoundsCheck { .. }
            | InstKind::IndexCheck { .. }
            | InstKind::RangeFor { .. }
            | InstKind::LoopCounter(_)
            | InstKind::FieldLoad { .. }
            | InstKind::FieldStore { .. }
            | InstKind::FieldAtomic { .. }
            | InstKind::FieldIsActive { .. }
            | InstKind::FieldActivate { .. }
            | InstKind::FieldDeactivate { .. }
            | InstKind::FieldAppend { .. }
            | InstKind::FieldLength { .. }
            | InstKind::SharedLoad { .. }
            | InstKind::SharedStore { .. }
            | InstKind::Barrier
    )
}

fn vec_of(t: ir::Type) -> ir::Type {
    t.by(LANES as u32).expect("32-bit lanes")
}

/// Lane type and bool-ness of one component of `t`.
fn lane_kind(t: Type) -> (ir::Type, bool) {
    (clif_ty(t), t.scalar() == Some(Scalar::Bool))
}

/// Builds the four-lane chunk function `(ctx, start, end, fault) -> status`;
/// `scalar` is the kernel's scalar chunk function (same variant). Returns
/// `Ok(false)` (and leaves `func` to be cleared) when the body cannot be
/// lowered to lanes.
pub(in crate::jit) fn build_vector_chunk(
    module: &mut JITModule,
    env: &mut Env,
    func: &mut ir::Function,
    fctx: &mut FunctionBuilderContext,
    shape: &[u32],
    scalar: FuncId,
) -> Result<bool, CodegenError> {
    let kernel = env.kernel;
    let f = &kernel.entry;
    let mut b = FunctionBuilder::new(func, fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let p = b.block_params(entry).to_vec();
    let (ctx, start, end, fault) = (p[0], p[1], p[2], p[3]);
    let (bufs, params, frame) = load_env(&mut b, env, ctx);
    let sref = module.declare_func_in_func(scalar, b.func);
    let ret_block = b.create_block();
    b.append_block_param(ret_block, types::I32);

    // Aligned groups: [s4, e4); the scalar function runs the ends.
    let s3 = b.ins().iadd_imm_s(start, LANES as i64 - 1);
    let s4 = b.ins().band_imm_s(s3, -(LANES as i64));
    let e4 = b.ins().band_imm_s(end, -(LANES as i64));
    let groups = b.ins().icmp(IntCC::UnsignedLessThan, s4, e4);
    let all_scalar = b.create_block();
    let pre = b.create_block();
    b.ins().brif(groups, pre, &[], all_scalar, &[]);
    b.switch_to_block(all_scalar);
    let c = b.ins().call(sref, &[ctx, start, end, fault]);
    let st = b.inst_results(c)[0];
    b.ins().jump(ret_block, &[st.into()]);

    b.switch_to_block(pre);
    let c = b.ins().call(sref, &[ctx, start, s4, fault]);
    let st = b.inst_results(c)[0];
    let setup = b.create_block();
    b.ins().brif(st, ret_block, &[st.into()], setup, &[]);
    b.switch_to_block(setup);

    let seed_launch = super::uses_launch(f).then(|| super::load_seed_launch(&mut b, ctx));
    let dims = shape.len().max(1);
    let (lin, idx) = super::index_vars(&mut b, shape, s4);
    let head = b.create_block();
    let next = b.create_block();
    let tail = b.create_block();
    let (fail, fault_block) = super::fault_blocks(&mut b);
    let exec = b.declare_var(types::I32X4);
    let ret = b.declare_var(types::I32X4);
    let (rng, depth) = super::private_words(&mut b);

    let (uniform_local, masked_loops) = uniformity(f, dims as u32 - 1);
    let mut l = Lower::new(
        b,
        module,
        env,
        f,
        Setup {
            ctx,
            fault,
            rng,
            depth,
            bufs,
            params,
            frame,
            args: vec![],
            launch: seed_launch.map(|(seed, count)| (seed, count, lin)),
            exit: Exit::Entry { next },
            fail,
            fault_block,
            shared: vec![],
        },
    );
    let pin =
        l.b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 16, 4));
    let uses_rng = f
        .insts
        .iter()
        .any(|(_, i)| matches!(i.kind, InstKind::RngLoad | InstKind::RngStore(_)));
    let rng_lanes = uses_rng.then(|| l.b.declare_var(types::I32X4));
    l.simd = Some(Simd {
        pin,
        pairs: adjacent_loads(f),
        paired: HashMap::new(),
        run_of: add_runs(f)
            .iter()
            .flat_map(|(&first, run)| run.iter().map(move |x| (x.0, first)))
            .collect(),
        add_runs: add_runs(f),
        deferred: HashSet::new(),
        rng: rng_lanes,
        exec,
        full: true,
        ret,
        returns: 0,
        loops: vec![],
        uniform_local,
        unmasked: unmasked_stores(f, &masked_loops),
        masked_loops,
        vals: HashMap::new(),
        locals: vec![],
        args: vec![],
        why: None,
    });
    let lowered = l.hoist_invariants().and_then(|()| {
        l.b.ins().jump(head, &[]);
        l.b.switch_to_block(head);
        let args: Vec<V> = (0..dims)
            .map(|d| {
                let v = l.b.use_var(idx[d]);
                if d + 1 == dims {
                    V::A(v, 1)
                } else {
                    V::U(v)
                }
            })
            .collect();
        l.sm().args = args;
        if let Some(var) = l.sm().rng {
            // Defined on every path (the entry stores it before any load).
            let zero = l.vzero(types::I32X4);
            l.b.def_var(var, zero);
        }
        let ones = l.b.ins().iconst(types::I32, -1);
        let all = l.b.ins().splat(types::I32X4, ones);
        l.b.def_var(exec, all);
        let none = l.vzero(types::I32X4);
        l.b.def_var(ret, none);
        l.declare_vlocals();
        l.vblock(&f.body)
    });
    match lowered {
        Ok(()) => {}
        Err(Stop::Unsupported) => {
            if std::env::var("WEFT_JIT_DISASM").ok().as_deref() == Some(kernel.name.as_str()) {
                let why = l.sm().why.take().unwrap_or_default();
                eprintln!("=== {}: no lane code: {}", kernel.name, why);
            }
            // The builder never finished: give the next function a clean context.
            drop(l);
            *fctx = FunctionBuilderContext::new();
            return Ok(false);
        }
        Err(Stop::Err(e)) => return Err(e),
    }
    l.b.ins().jump(next, &[]);
    l.finish_fault_block();
    let mut b = l.b;

    // Next group: four further on; the last axis never wraps inside a group.
    b.switch_to_block(next);
    let lv = b.use_var(lin);
    let lv4 = b.ins().iadd_imm_s(lv, LANES as i64);
    b.def_var(lin, lv4);
    let mut carry: Option<Value> = None;
    for d in (0..dims).rev() {
        let cur = b.use_var(idx[d]);
        let inc = match carry {
            None if d + 1 == dims => b.ins().iadd_imm_s(cur, LANES as i64),
            None => break,
            Some(c) => {
                let c32 = b.ins().uextend(types::I32, c);
                b.ins().iadd(cur, c32)
            }
        };
        if d == 0 {
            b.def_var(idx[d], inc);
        } else {
            let s = shape.get(d).copied().unwrap_or(1) as i64;
            let wrap = b.ins().icmp_imm_s(IntCC::Equal, inc, s);
            let z = b.ins().iconst(types::I32, 0);
            let v = b.ins().select(wrap, z, inc);
            b.def_var(idx[d], v);
            carry = Some(wrap);
        }
    }
    let more = b.ins().icmp(IntCC::UnsignedLessThan, lv4, e4);
    b.ins().brif(more, head, &[], tail, &[]);
    b.switch_to_block(tail);
    let c = b.ins().call(sref, &[ctx, e4, end, fault]);
    let st = b.inst_results(c)[0];
    b.ins().jump(ret_block, &[st.into()]);
    b.switch_to_block(ret_block);
    let st = b.block_params(ret_block)[0];
    b.ins().return_(&[st]);
    b.switch_to_block(fail);
    b.set_cold_block(fail);
    let one = b.ins().iconst(types::I32, 1);
    b.ins().return_(&[one]);
    b.seal_all_blocks();
    let cfg = module.target_config();
    b.finalize(cfg);
    Ok(true)
}

impl Lower<'_, '_, '_> {
    fn sm(&mut self) -> &mut Simd {
        self.simd.as_mut().expect("the lane lowering")
    }

    fn declare_vlocals(&mut self) {
        let mut all = Vec::new();
        for (h, loc) in self.f.locals.iter() {
            let uniform = self.sm().uniform_local[h.index()];
            let vt = if uniform {
                clif_ty(loc.ty)
            } else {
                vec_of(clif_ty(loc.ty))
            };
            let vars: Vec<Variable> = (0..loc.ty.components())
                .map(|_| {
                    let v = self.b.declare_var(vt);
                    let z = self.vzero(vt);
                    self.b.def_var(v, z);
                    v
                })
                .collect();
            all.push(vars);
        }
        self.sm().locals = all;
    }

    fn vzero(&mut self, vt: ir::Type) -> Value {
        let z = if vt.lane_type() == types::F32 {
            self.b.ins().f32const(Ieee32::with_bits(0))
        } else {
            self.b.ins().iconst(types::I32, 0)
        };
        if vt.is_vector() {
            self.b.ins().splat(vt, z)
        } else {
            z
        }
    }

    fn vconst_i32(&mut self, lanes: [i64; 4]) -> Value {
        let bytes: Vec<u8> = lanes
            .iter()
            .flat_map(|x| (*x as i32).to_le_bytes())
            .collect();
        let c = self.b.func.dfg.constants.insert(ConstantData::from(bytes));
        self.b.ins().vconst(types::I32X4, c)
    }

    fn vv(&self, h: InstId) -> Vec<V> {
        self.simd
            .as_ref()
            .and_then(|s| s.vals.get(&h).cloned())
            .unwrap_or_default()
    }
    fn vv1(&self, h: InstId) -> V {
        self.vv(h)[0]
    }

    /// The value as a lane vector of `lane` (`F32` / `I32`); bools as masks.
    fn mat(&mut self, v: V, lane: ir::Type, boolean: bool) -> Value {
        match v {
            V::L(x) => x,
            V::U(x) => {
                let x = if boolean { self.b.ins().ineg(x) } else { x };
                self.b.ins().splat(vec_of(lane), x)
            }
            V::A(base, s) => {
                let sp = self.b.ins().splat(types::I32X4, base);
                let off = self.vconst_i32([0, s, 2 * s, 3 * s]);
                self.b.ins().iadd(sp, off)
            }
        }
    }

    /// The value as a lane vector with bools as 0/1 words (what memory holds).
    fn mat_word(&mut self, v: V, lane: ir::Type, boolean: bool) -> Value {
        let m = self.mat(v, lane, boolean);
        if boolean {
            let one = self.b.ins().iconst(types::I32, 1);
            let ones = self.b.ins().splat(types::I32X4, one);
            self.b.ins().band(m, ones)
        } else {
            m
        }
    }

    /// Lane `k` as a scalar (bools as 0/1 words).
    fn lane_of(&mut self, v: V, k: u8, boolean: bool) -> Value {
        match v {
            V::U(x) => x,
            V::L(x) => {
                let e = self.b.ins().extractlane(x, k);
                if boolean {
                    self.b.ins().band_imm_s(e, 1)
                } else {
                    e
                }
            }
            V::A(base, s) => self.b.ins().iadd_imm_s(base, k as i64 * s),
        }
    }

    /// Runs `f` on each lane's scalars of the vectors `args`; a vector of the results.
    pub(super) fn per_lane(
        &mut self,
        lane: ir::Type,
        args: &[Value],
        f: impl Fn(&mut Self, &[Value]) -> Value,
    ) -> Value {
        let was = self.vmode;
        self.vmode = false;
        let mut out: Option<Value> = None;
        for k in 0..LANES {
            let a: Vec<Value> = args
                .iter()
                .map(|x| self.b.ins().extractlane(*x, k))
                .collect();
            let r = f(self, &a);
            out = Some(match out {
                None => self.b.ins().scalar_to_vector(vec_of(lane), r),
                Some(v) => self.b.ins().insertlane(v, r, k),
            });
        }
        self.vmode = was;
        out.expect("four lanes")
    }

    fn exec_mask(&mut self) -> Value {
        let e = self.sm().exec;
        self.b.use_var(e)
    }

    /// Component-wise `f` over operands (each a list of components with its
    /// IR type): on scalars when every component is uniform, else on lane
    /// vectors in `vmode`.
    fn apply(
        &mut self,
        ops: &[(Vec<V>, Type)],
        f: impl FnOnce(&mut Self, &[Vec<Value>]) -> Option<Vec<Value>>,
    ) -> Result<Vec<V>, Stop> {
        let uniform = ops
            .iter()
            .all(|(vs, _)| vs.iter().all(|v| matches!(v, V::U(_))));
        if uniform {
            let args: Vec<Vec<Value>> = ops
                .iter()
                .map(|(vs, _)| {
                    vs.iter()
                        .map(|v| match v {
                            V::U(x) => *x,
                            _ => unreachable!("checked uniform"),
                        })
                        .collect()
                })
                .collect();
            let out = f(self, &args).ok_or(Stop::Unsupported)?;
            return Ok(out.into_iter().map(V::U).collect());
        }
        let args: Vec<Vec<Value>> = ops
            .iter()
            .map(|(vs, t)| {
                let (lane, boolean) = lane_kind(*t);
                vs.iter().map(|v| self.mat(*v, lane, boolean)).collect()
            })
            .collect();
        self.vmode = true;
        let out = f(self, &args);
        self.vmode = false;
        Ok(out
            .ok_or(Stop::Unsupported)?
            .into_iter()
            .map(V::L)
            .collect())
    }

    fn vblock(&mut self, blk: &Block) -> Result<(), Stop> {
        self.checked.push(Default::default());
        for &h in blk {
            if self.filled {
                // After a break, continue or return: no lane runs the rest.
                break;
            }
            if let Err(e) = self.vinst(h) {
                if matches!(e, Stop::Unsupported) && self.sm().why.is_none() {
                    let i = &self.f.insts[h];
                    let why = format!("{:?} at code {}", i.kind, i.span);
                    self.sm().why = Some(why);
                }
                return Err(e);
            }
        }
        self.checked.pop();
        Ok(())
    }

    /// An affine image of `a op b` when the operation keeps lanes affine.
    fn affine(&mut self, op: BinaryOp, a: V, b: V, bh: InstId, ah: InstId) -> Option<V> {
        let konst = |l: &Self, h: InstId| match l.f.insts[h].kind {
            InstKind::Const(c) if c.scalar != Scalar::F32 => Some(c.bits as i32 as i64),
            _ => None,
        };
        Some(match (op, a, b) {
            (BinaryOp::Add, V::A(x, s), V::U(u)) | (BinaryOp::Add, V::U(u), V::A(x, s)) => {
                V::A(self.b.ins().iadd(x, u), s)
            }
            (BinaryOp::Add, V::A(x, s), V::A(y, t)) => V::A(self.b.ins().iadd(x, y), s + t),
            (BinaryOp::Sub, V::A(x, s), V::U(u)) => V::A(self.b.ins().isub(x, u), s),
            (BinaryOp::Sub, V::A(x, s), V::A(y, t)) => V::A(self.b.ins().isub(x, y), s - t),
            (BinaryOp::Mul, V::A(x, s), V::U(u)) => {
                let c = konst(self, bh)?;
                V::A(self.b.ins().imul(x, u), s.wrapping_mul(c))
            }
            (BinaryOp::Mul, V::U(u), V::A(x, s)) => {
                let c = konst(self, ah)?;
                V::A(self.b.ins().imul(u, x), s.wrapping_mul(c))
            }
            (BinaryOp::Shl, V::A(x, s), V::U(u)) => {
                let c = konst(self, bh)?;
                if !(0..31).contains(&c) {
                    return None;
                }
                V::A(self.b.ins().ishl(x, u), s << c)
            }
            _ => return None,
        })
        .filter(|v| matches!(v, V::A(_, s) if s.unsigned_abs() < (1 << 28)))
    }

    /// Lowers, before the group loop, every pure instruction whose operands
    /// are the same in every group (constants, parameters, the frame, and
    /// arithmetic and built-ins of them): julia's `cos(frame() * speed)`
    /// runs once per chunk instead of once per group.
    fn hoist_invariants(&mut self) -> Result<(), Stop> {
        let f = self.f;
        let mut invariant: HashSet<InstId> = HashSet::new();
        let mut order = Vec::new();
        fn visit(
            f: &Function,
            h: InstId,
            invariant: &mut HashSet<InstId>,
            seen: &mut HashSet<InstId>,
            order: &mut Vec<InstId>,
        ) -> bool {
            if invariant.contains(&h) {
                return true;
            }
            if !seen.insert(h) {
                return false;
            }
            let kind = &f.insts[h].kind;
            let ok = match kind {
                InstKind::Const(_) | InstKind::Param(_) | InstKind::Frame => true,
                InstKind::Unary(..)
                | InstKind::Binary(..)
                | InstKind::Select { .. }
                | InstKind::Cast(_)
                | InstKind::Bitcast(_)
                | InstKind::Construct(_)
                | InstKind::Extract(..)
                | InstKind::Insert { .. }
                | InstKind::Swizzle(..)
                | InstKind::Builtin(..) => kind
                    .operands()
                    .into_iter()
                    .all(|o| visit(f, o, invariant, seen, order)),
                _ => false,
            };
            if ok {
                invariant.insert(h);
                order.push(h);
            }
            ok
        }
        let mut seen = HashSet::new();
        let mut all = Vec::new();
        super::super::walk(f, &f.body, &mut |h, _| all.push(h));
        for h in all {
            visit(f, h, &mut invariant, &mut seen, &mut order);
        }
        for h in order {
            self.vinst(h)?;
        }
        Ok(())
    }

    fn vinst(&mut self, h: InstId) -> Result<(), Stop> {
        let f = self.f;
        if self.simd.as_ref().is_some_and(|s| s.vals.contains_key(&h)) {
            // Hoisted before the group loop.
            return Ok(());
        }
        let inst = &f.insts[h];
        let ty = inst.ty;
        let span = inst.span;
        let out: Vec<V> = match &inst.kind {
            InstKind::Const(k) => vec![V::U(if k.scalar == Scalar::F32 {
                self.b.ins().f32const(Ieee32::with_bits(k.lo()))
            } else {
                self.b.ins().iconst(types::I32, k.bits as i64)
            })],
            InstKind::Arg(i) => vec![*self.sm().args.get(*i as usize).ok_or(Stop::Unsupported)?],
            InstKind::Param(i) => {
                let w = *self.params.get(*i as usize).ok_or(Stop::Unsupported)?;
                vec![V::U(self.word_as(w, ty))]
            }
            InstKind::Frame => vec![V::U(self.frame)],
            InstKind::Unary(op, a) => {
                let s = ty.scalar().ok_or(Stop::Unsupported)?;
                let op = *op;
                self.apply(&[(self.vv(*a), self.ty(*a))], |l, x| {
                    Some(x[0].iter().map(|v| l.unary(op, s, *v)).collect())
                })?
            }
            InstKind::Binary(BinaryOp::MatMul, a, b) => {
                let (at, bt) = (self.ty(*a), self.ty(*b));
                self.apply(&[(self.vv(*a), at), (self.vv(*b), bt)], |l, x| {
                    l.matmul(&x[0], &x[1], at, bt)
                })?
            }
            InstKind::Binary(op, a, b) => {
                let at = self.ty(*a);
                let s = at.scalar().ok_or(Stop::Unsupported)?;
                let (va, vb) = (self.vv(*a), self.vv(*b));
                let rt = clif_ty(ty);
                let mut out = Vec::with_capacity(va.len());
                for (x, y) in va.into_iter().zip(vb) {
                    let int = matches!(s, Scalar::I32 | Scalar::U32);
                    if let Some(v) = int.then(|| self.affine(*op, x, y, *b, *a)).flatten() {
                        out.push(v);
                        continue;
                    }
                    if let (Some(d), V::L(_) | V::A(..)) = (self.pow2_divisor(*op, s, *b), x) {
                        // Unsigned division by 2^k is a shift, the remainder a
                        // mask; lanes have no integer division.
                        let xv = self.mat(x, types::I32, false);
                        let r = if *op == BinaryOp::Div {
                            self.b.ins().ushr_imm_s(xv, d.trailing_zeros() as i64)
                        } else {
                            let m = self.b.ins().iconst(types::I32, (d - 1) as i64);
                            let m = self.b.ins().splat(types::I32X4, m);
                            self.b.ins().band(xv, m)
                        };
                        out.push(V::L(r));
                        continue;
                    }
                    let shift = matches!(op, BinaryOp::Shl | BinaryOp::Shr);
                    if int && shift && !matches!((x, y), (V::U(_), V::U(_))) {
                        // Lane shifts take one scalar amount; per-lane amounts go lane by lane.
                        let xv = self.mat(x, types::I32, false);
                        let r = match y {
                            V::U(n) => {
                                self.vmode = true;
                                let r = self.binary(*op, s, xv, n, rt);
                                self.vmode = false;
                                r
                            }
                            _ => {
                                let yv = self.mat(y, types::I32, false);
                                let op = *op;
                                self.per_lane(types::I32, &[xv, yv], |l, a| {
                                    l.binary(op, s, a[0], a[1], rt)
                                })
                            }
                        };
                        out.push(V::L(r));
                        continue;
                    }
                    let op = *op;
                    let r = self.apply(&[(vec![x], at), (vec![y], at)], |l, v| {
                        Some(vec![l.binary(op, s, v[0][0], v[1][0], rt)])
                    })?;
                    out.extend(r);
                }
                out
            }
            InstKind::Select {
                cond,
                accept,
                reject,
            } => {
                let c = self.vv(*cond);
                let (a, r) = (self.vv(*accept), self.vv(*reject));
                let (lane, boolean) = lane_kind(ty);
                let mut out = Vec::with_capacity(a.len());
                for k in 0..a.len() {
                    let ck = if c.len() == 1 { c[0] } else { c[k] };
                    out.push(match (ck, a[k], r[k]) {
                        (V::U(c), V::U(x), V::U(y)) => V::U(self.b.ins().select(c, x, y)),
                        (V::U(c), x, y) => {
                            let (x, y) = (self.mat(x, lane, boolean), self.mat(y, lane, boolean));
                            V::L(self.b.ins().select(c, x, y))
                        }
                        (m, x, y) => {
                            let m = self.mat(m, types::I32, true);
                            let (x, y) = (self.mat(x, lane, boolean), self.mat(y, lane, boolean));
                            V::L(self.sel(m, x, y))
                        }
                    });
                }
                out
            }
            InstKind::Cast(a) => {
                let from = self.ty(*a).scalar().ok_or(Stop::Unsupported)?;
                let to = ty.scalar().ok_or(Stop::Unsupported)?;
                let ints = |s: Scalar| matches!(s, Scalar::I32 | Scalar::U32);
                let mut out = Vec::new();
                for x in self.vv(*a) {
                    if let (V::A(..), true, true) = (x, ints(from), ints(to)) {
                        out.push(x);
                        continue;
                    }
                    let at = self.ty(*a);
                    out.extend(self.apply(&[(vec![x], at)], |l, v| {
                        Some(vec![l.cast(from, to, v[0][0])])
                    })?);
                }
                out
            }
            InstKind::Bitcast(a) => {
                let at = self.ty(*a);
                if at.scalar() == Some(Scalar::Bool) || ty.scalar() == Some(Scalar::Bool) {
                    return Err(Stop::Unsupported);
                }
                let to = clif_ty(ty);
                let mut out = Vec::new();
                for x in self.vv(*a) {
                    if matches!(x, V::A(..)) && to == types::I32 {
                        out.push(x);
                        continue;
                    }
                    out.extend(self.apply(&[(vec![x], at)], |l, v| {
                        let t = l.vt(to);
                        Some(vec![l.retype(v[0][0], t)])
                    })?);
                }
                out
            }
            InstKind::Construct(parts) => parts.iter().flat_map(|p| self.vv(*p)).collect(),
            InstKind::Extract(a, i) => {
                let n = ty.components();
                let src = self.vv(*a);
                let at = *i as usize * n;
                src.get(at..at + n).ok_or(Stop::Unsupported)?.to_vec()
            }
            InstKind::Insert { base, index, value } => {
                let mut out = self.vv(*base);
                let vv = self.vv(*value);
                let at = *index as usize * vv.len();
                if at + vv.len() > out.len() {
                    return Err(Stop::Unsupported);
                }
                out[at..at + vv.len()].copy_from_slice(&vv);
                out
            }
            InstKind::ExtractDyn(a, i) => {
                let V::U(iv) = self.vv1(*i) else {
                    return Err(Stop::Unsupported);
                };
                let len = match self.ty(*a) {
                    Type::Vector(_, l) | Type::Matrix(l) => l as usize,
                    _ => return Err(Stop::Unsupported),
                };
                let n = ty.components();
                let src = self.vv(*a);
                let (lane, boolean) = lane_kind(ty);
                let idx = self.clamp_index(iv, len);
                let mut out: Vec<V> = src[0..n].to_vec();
                for k in 1..len {
                    let is_k = self.b.ins().icmp_imm_s(IntCC::Equal, idx, k as i64);
                    for c in 0..n {
                        out[c] = self.vselect(is_k, src[k * n + c], out[c], lane, boolean);
                    }
                }
                out
            }
            InstKind::InsertDyn { base, index, value } => {
                let V::U(iv) = self.vv1(*index) else {
                    return Err(Stop::Unsupported);
                };
                let mut out = self.vv(*base);
                let vv = self.vv(*value);
                let (lane, boolean) = lane_kind(self.ty(*value));
                let elem = vv.len().max(1);
                let len = out.len() / elem;
                let idx = self.clamp_index(iv, len);
                for k in 0..len {
                    let is_k = self.b.ins().icmp_imm_s(IntCC::Equal, idx, k as i64);
                    for c in 0..elem {
                        out[k * elem + c] =
                            self.vselect(is_k, vv[c], out[k * elem + c], lane, boolean);
                    }
                }
                out
            }
            InstKind::Swizzle(a, comps) => {
                let src = self.vv(*a);
                comps
                    .iter()
                    .map(|&c| src.get(c as usize).copied().ok_or(Stop::Unsupported))
                    .collect::<Result<_, _>>()?
            }
            InstKind::Builtin(bi, args) => {
                let at = self.ty(args[0]);
                let ops: Vec<(Vec<V>, Type)> =
                    args.iter().map(|a| (self.vv(*a), self.ty(*a))).collect();
                let bi = *bi;
                self.apply(&ops, |l, x| l.builtin(bi, at, x))?
            }
            InstKind::LocalLoad(loc) => {
                let vars = self.sm().locals[loc.index()].clone();
                let uniform = self.sm().uniform_local[loc.index()];
                vars.iter()
                    .map(|v| {
                        let x = self.b.use_var(*v);
                        if uniform {
                            V::U(x)
                        } else {
                            V::L(x)
                        }
                    })
                    .collect()
            }
            InstKind::LocalStore(loc, v) if self.sm().uniform_local[loc.index()] => {
                // Uniform control and a value equal in every lane (see
                // `uniformity`): every lane runs here, lane 0 speaks for all.
                let vars = self.sm().locals[loc.index()].clone();
                let (_, boolean) = lane_kind(self.ty(*v));
                for (var, x) in vars.iter().zip(self.vv(*v)) {
                    let x = self.lane_of(x, 0, boolean);
                    self.b.def_var(*var, x);
                }
                vec![]
            }
            InstKind::LocalStore(loc, v) => {
                let vars = self.sm().locals[loc.index()].clone();
                let (lane, boolean) = lane_kind(self.ty(*v));
                let free = self.sm().full || self.sm().unmasked.contains(&h);
                let m = (!free).then(|| self.exec_mask());
                for (var, x) in vars.iter().zip(self.vv(*v)) {
                    let nv = self.mat(x, lane, boolean);
                    let nv = match m {
                        Some(m) => {
                            let old = self.b.use_var(*var);
                            self.sel(m, nv, old)
                        }
                        None => nv,
                    };
                    self.b.def_var(*var, nv);
                }
                vec![]
            }
            InstKind::Trap { site, value } => {
                // The kernel's own site; the value's bits go out as they
                // are (`FaultSite::message` reads them by the site's kind).
                let s = *site;
                if self.env.kernel.fault_sites.get(s as usize).is_none() {
                    return Err(Stop::Unsupported);
                }
                let (lane, boolean) = lane_kind(self.ty(*value));
                let v = self.mat(self.vv1(*value), lane, boolean);
                let v = if lane == types::F32 {
                    self.b.ins().bitcast(types::I32X4, MemFlagsData::new(), v)
                } else {
                    v
                };
                let m = if self.sm().full {
                    let ones = self.b.ins().iconst(types::I32, -1);
                    self.b.ins().splat(types::I32X4, ones)
                } else {
                    self.exec_mask()
                };
                self.fault_lanes(m, v, s, false);
                vec![]
            }
            InstKind::Launch(v) => {
                let (seed, count, lin) = self.launch.ok_or(Stop::Unsupported)?;
                vec![match v {
                    LaunchValue::Seed => V::U(seed),
                    LaunchValue::Count => V::U(count),
                    LaunchValue::Linear => {
                        // Lane k runs iteration lin + k.
                        let l = self.b.use_var(lin);
                        V::A(self.b.ins().ireduce(types::I32, l), 1)
                    }
                }]
            }
            InstKind::RngLoad => {
                let var = self.sm().rng.ok_or(Stop::Unsupported)?;
                vec![V::L(self.b.use_var(var))]
            }
            InstKind::RngStore(v) => {
                let var = self.sm().rng.ok_or(Stop::Unsupported)?;
                let next = self.mat(self.vv1(*v), types::I32, false);
                let next = if self.sm().full {
                    next
                } else {
                    // Only running lanes take a number from their stream.
                    let m = self.exec_mask();
                    let st = self.b.use_var(var);
                    self.sel(m, next, st)
                };
                self.b.def_var(var, next);
                vec![]
            }
            // Only targets with a loop trip limit count trips (none on the CPU).
            InstKind::Random
            | InstKind::TripsLoad
            | InstKind::TripsStore(_)
            | InstKind::LaneMax(_) => return Err(Stop::Unsupported),
            InstKind::BufLoad { root, addr } => 'load: {
                if let Some(x) = self.sm().paired.remove(&h) {
                    break 'load vec![V::L(x)];
                }
                let (lane, boolean) = lane_kind(ty);
                let a = self.vv1(*addr);
                let full = self.sm().full;
                let pair = self.sm().pairs.get(&h).copied();
                match a {
                    V::L(_) | V::A(..) if full && pair.is_some() && !matches!(a, V::A(_, 1)) => {
                        let (x, y) = self.gather_pair(*root, a, lane, span)?;
                        self.sm().paired.insert(pair.expect("matched"), y);
                        vec![V::L(x)]
                    }
                    V::U(x) if full => {
                        let p = self.address(*root, x, span)?;
                        vec![V::U(self.b.ins().load(lane, MemFlagsData::trusted(), p, 0))]
                    }
                    V::A(base, 1) if full => {
                        let p = self.run_address(*root, base, span)?;
                        let x = self.b.ins().load(
                            vec_of(lane),
                            MemFlagsData::new().with_notrap(),
                            p,
                            0,
                        );
                        vec![V::L(self.loaded_lanes(x, boolean))]
                    }
                    _ => {
                        let x = self.gather(*root, a, lane, span)?;
                        vec![V::L(self.loaded_lanes(x, boolean))]
                    }
                }
            }
            InstKind::BufStore { root, addr, value } => 'store: {
                if let Some(first) = self.sm().run_of.get(&h).copied() {
                    // A run of neighbouring word stores on all four lanes,
                    // lowered at its last store (only pure code between).
                    // (Consecutive words, `V::A(_, 1)`, are one vector store.)
                    if h == first
                        && self.sm().full
                        && !matches!(self.vv1(*addr), V::U(_) | V::A(_, 1))
                    {
                        self.sm().deferred.insert(first);
                    }
                    if self.sm().deferred.contains(&first) {
                        let run = self.sm().add_runs[&first].clone();
                        if run.last().map(|x| x.0) == Some(h) {
                            self.word_run(&run, span, true)?;
                        }
                        break 'store vec![];
                    }
                }
                let (lane, boolean) = lane_kind(self.ty(*value));
                let a = self.vv1(*addr);
                let v = self.vv1(*value);
                let full = self.sm().full;
                match (a, v) {
                    (V::U(x), V::U(y)) if full => {
                        let p = self.address(*root, x, span)?;
                        self.b.ins().store(MemFlagsData::trusted(), y, p, 0);
                    }
                    (V::A(base, 1), v) if full => {
                        let p = self.run_address(*root, base, span)?;
                        let x = self.mat_word(v, lane, boolean);
                        self.b
                            .ins()
                            .store(MemFlagsData::new().with_notrap(), x, p, 0);
                    }
                    _ => self.scatter(*root, a, v, (lane, boolean), span)?,
                }
                vec![]
            }
            InstKind::BufAtomic {
                op,
                root,
                addr,
                value,
                cmp,
            } => {
                let s = ty.scalar().ok_or(Stop::Unsupported)?;
                if !crate::jit::CAPS.has_atomic(*op, s) {
                    return Err(Stop::Unsupported);
                }
                let (lane, _) = lane_kind(ty);
                let plain = match self.env.variant {
                    crate::jit::Variant::Atomic => false,
                    crate::jit::Variant::Serial => true,
                    crate::jit::Variant::Private => self.env.private_roots.contains(root),
                };
                if let Some(first) = self.sm().run_of.get(&h).copied() {
                    // A run of neighbouring plain adds on all four lanes is
                    // lowered at its last add (only pure code lies between).
                    if h == first && plain && self.sm().full && !matches!(self.vv1(*addr), V::U(_))
                    {
                        self.sm().deferred.insert(first);
                    }
                    if self.sm().deferred.contains(&first) {
                        let run = self.sm().add_runs[&first].clone();
                        if run.last().map(|x| x.0) == Some(h) {
                            self.word_run(&run, span, false)?;
                        }
                        // (The old values are unused.)
                        let z = self.vzero(types::F32X4);
                        self.sm().vals.insert(h, vec![V::L(z)]);
                        return Ok(());
                    }
                }
                let (a, v) = (self.vv1(*addr), self.vv1(*value));
                let c = cmp.map(|c| self.vv1(c));
                let (op, root) = (*op, *root);
                let ptrs = self.lane_ptrs(root, a, span)?;
                let x = self.each_lane(lane, |l, k| {
                    let p = l.lane_ptr(&ptrs, root, a, k, span)?;
                    let vk = l.lane_of(v, k, false);
                    let ck = c.map(|c| l.lane_of(c, k, false));
                    Ok(if plain {
                        l.plain_rmw(op, s, p, vk, ck)
                    } else {
                        l.atomic(op, s, p, vk, ck)
                    })
                })?;
                vec![V::L(x)]
            }
            InstKind::If {
                cond,
                accept,
                reject,
            } => {
                let lone_trap = match (accept.as_slice(), reject.is_empty()) {
                    ([t], true) => matches!(f.insts[*t].kind, InstKind::Trap { .. }),
                    _ => false,
                };
                match self.vv1(*cond) {
                    V::U(c) => self.vif_uniform(c, accept, reject)?,
                    // A legalized bounds check, `if bad { trap }`: the trap
                    // under the lanes that take the `if`, with no branch
                    // around it (its check is the only branch).
                    V::L(m) if lone_trap => {
                        let e = self.exec_mask();
                        let t = self.b.ins().band(e, m);
                        let exec = self.sm().exec;
                        let full = self.sm().full;
                        self.b.def_var(exec, t);
                        self.sm().full = false;
                        self.vinst(accept[0])?;
                        self.b.def_var(exec, e);
                        self.sm().full = full;
                    }
                    V::L(m) => self.vif_masked(m, accept, reject)?,
                    V::A(..) => return Err(Stop::Unsupported),
                }
                vec![]
            }
            InstKind::Loop { body } => {
                if self.sm().masked_loops.contains(&h) {
                    self.vloop(body)?;
                } else {
                    self.vloop_uniform(body)?;
                }
                vec![]
            }
            InstKind::Break | InstKind::Continue => {
                let brk = matches!(inst.kind, InstKind::Break);
                match *self.sm().loops.last().ok_or(Stop::Unsupported)? {
                    VLoop::Masked(live) => {
                        if brk {
                            let e = self.exec_mask();
                            let l = self.b.use_var(live);
                            let keep = self.b.ins().band_not(l, e);
                            self.b.def_var(live, keep);
                        }
                        self.lanes_off();
                    }
                    VLoop::Uniform { head, exit } => {
                        self.b.ins().jump(if brk { exit } else { head }, &[]);
                        // Nothing follows in this block; later code of the
                        // construct lands in a block no path reaches.
                        let dead = self.b.create_block();
                        self.b.switch_to_block(dead);
                        self.filled = true;
                    }
                }
                vec![]
            }
            InstKind::Return(_) => {
                let e = self.exec_mask();
                let ret = self.sm().ret;
                let r = self.b.use_var(ret);
                let r = self.b.ins().bor(r, e);
                self.b.def_var(ret, r);
                for lp in self.sm().loops.clone() {
                    // (`uniformity` makes every loop around a return masked.)
                    let VLoop::Masked(live) = lp else {
                        return Err(Stop::Unsupported);
                    };
                    let l = self.b.use_var(live);
                    let keep = self.b.ins().band_not(l, e);
                    self.b.def_var(live, keep);
                }
                self.sm().returns += 1;
                self.lanes_off();
                vec![]
            }
            k => {
                debug_assert!(never_in_lanes(k));
                return Err(Stop::Unsupported);
            }
        };
        if ty != Type::Void {
            if out.len() != ty.components() {
                return Err(Stop::Unsupported);
            }
            self.sm().vals.insert(h, out);
        }
        Ok(())
    }

    /// No lane runs the rest of this block.
    fn lanes_off(&mut self) {
        let z = self.vzero(types::I32X4);
        let e = self.sm().exec;
        self.b.def_var(e, z);
        self.filled = true;
    }

    /// `c ? x : y` on components with a scalar condition (`i8`).
    fn vselect(&mut self, c: Value, x: V, y: V, lane: ir::Type, boolean: bool) -> V {
        match (x, y) {
            (V::U(a), V::U(b)) => V::U(self.b.ins().select(c, a, b)),
            _ => {
                let (a, b) = (self.mat(x, lane, boolean), self.mat(y, lane, boolean));
                V::L(self.b.ins().select(c, a, b))
            }
        }
    }

    /// Words loaded from memory as lane values (bools as masks).
    fn loaded_lanes(&mut self, x: Value, boolean: bool) -> Value {
        if boolean {
            let z = self.vzero(types::I32X4);
            self.b.ins().icmp(IntCC::NotEqual, x, z)
        } else {
            x
        }
    }

    /// Pointer to words `base .. base + 4` of `root`, faulting (with the
    /// first word outside the buffer) unless all four are inside.
    fn run_address(&mut self, root: LayoutId, base: Value, span: Span) -> Result<Value, Stop> {
        let r = self
            .env
            .roots
            .iter()
            .position(|&x| x == root)
            .ok_or_else(|| super::super::internal(self.env.kernel, "buffer not collected"))?;
        let (ptr, len) = self.bufs[r];
        let a = self.b.ins().uextend(types::I64, base);
        let last = self.b.ins().iadd_imm_s(a, LANES as i64 - 1);
        let bad = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThanOrEqual, last, len);
        let site = self.site(span, FaultKind::Address);
        // The first lane outside: `base` itself, or the buffer's end.
        let first = self.b.ins().umax(a, len);
        self.fault_if(bad, site, first);
        let off = self.b.ins().ishl_imm_s(a, 2);
        Ok(self.b.ins().iadd(ptr, off))
    }

    /// Runs `f` for each lane that is running (all four when `full`),
    /// collecting its scalar results into a lane vector of `lane`.
    fn each_lane(
        &mut self,
        lane: ir::Type,
        mut f: impl FnMut(&mut Self, u8) -> Result<Value, Stop>,
    ) -> Result<Value, Stop> {
        let full = self.sm().full;
        let var = self.b.declare_var(vec_of(lane));
        let z = self.vzero(vec_of(lane));
        self.b.def_var(var, z);
        let m = (!full).then(|| self.exec_mask());
        for k in 0..LANES {
            let join = match m {
                Some(m) => {
                    let bit = self.b.ins().extractlane(m, k);
                    let on = self.b.create_block();
                    let join = self.b.create_block();
                    self.b.ins().brif(bit, on, &[], join, &[]);
                    self.b.switch_to_block(on);
                    // Checks made for this lane alone must not cover the others.
                    self.checked.push(Default::default());
                    Some(join)
                }
                None => None,
            };
            let x = f(self, k)?;
            let cur = self.b.use_var(var);
            let nv = self.b.ins().insertlane(cur, x, k);
            self.b.def_var(var, nv);
            if let Some(join) = join {
                self.checked.pop();
                self.b.ins().jump(join, &[]);
                self.b.switch_to_block(join);
            }
        }
        Ok(self.b.use_var(var))
    }

    /// Per-lane pointers to word `a` of `root`, after one vector check of
    /// the running lanes' addresses against the buffer (a fault reports the
    /// first bad lane). `None` for a uniform address, which each lane
    /// checks under its own guard (no running lane may mean no check).
    fn lane_ptrs(&mut self, root: LayoutId, a: V, span: Span) -> Result<Option<Vec<Value>>, Stop> {
        if matches!(a, V::U(_)) {
            return Ok(None);
        }
        let r = self
            .env
            .roots
            .iter()
            .position(|&x| x == root)
            .ok_or_else(|| super::super::internal(self.env.kernel, "buffer not collected"))?;
        let (ptr, len) = self.bufs[r];
        let av = self.mat(a, types::I32, false);
        if !self.already_checked((av, (1 << 40) | r as u64)) {
            let max = self.b.ins().iconst(types::I64, u32::MAX as i64);
            let lim = self.b.ins().umin(len, max);
            let lim = self.b.ins().ireduce(types::I32, lim);
            let lims = self.b.ins().splat(types::I32X4, lim);
            let mut bad = self
                .b
                .ins()
                .icmp(IntCC::UnsignedGreaterThanOrEqual, av, lims);
            if !self.sm().full {
                let m = self.exec_mask();
                bad = self.b.ins().band(bad, m);
            }
            let site = self.site(span, FaultKind::Address);
            self.fault_lanes(bad, av, site, false);
        }
        Ok(Some(self.ptrs_of(ptr, a)))
    }

    /// Each lane's pointer to word `a` of the buffer at `ptr` (unchecked).
    fn ptrs_of(&mut self, ptr: Value, a: V) -> Vec<Value> {
        // Per-lane addresses widen to 64-bit lanes first: one extract per
        // lane, where an extracted 32-bit lane took a zero-extending move too.
        let wide = match a {
            V::L(x) => Some([self.b.ins().uwiden_low(x), self.b.ins().uwiden_high(x)]),
            _ => None,
        };
        (0..LANES)
            .map(|k| {
                let w = match wide {
                    Some(h) => self.b.ins().extractlane(h[k as usize / 2], k % 2),
                    None => {
                        let ak = self.lane_of(a, k, false);
                        self.b.ins().uextend(types::I64, ak)
                    }
                };
                let off = self.b.ins().ishl_imm_s(w, 2);
                self.b.ins().iadd(ptr, off)
            })
            .collect()
    }

    /// Lane `k`'s pointer: from `ptrs`, or checked on its own.
    fn lane_ptr(
        &mut self,
        ptrs: &Option<Vec<Value>>,
        root: LayoutId,
        a: V,
        k: u8,
        span: Span,
    ) -> Result<Value, Stop> {
        match ptrs {
            Some(p) => Ok(p[k as usize]),
            None => {
                let ak = self.lane_of(a, k, false);
                Ok(self.address(root, ak, span)?)
            }
        }
    }

    fn gather(&mut self, root: LayoutId, a: V, lane: ir::Type, span: Span) -> Result<Value, Stop> {
        let ptrs = self.lane_ptrs(root, a, span)?;
        let v = self.each_lane(lane, |l, k| {
            let p = l.lane_ptr(&ptrs, root, a, k, span)?;
            Ok(l.b.ins().load(lane, MemFlagsData::trusted(), p, 0))
        })?;
        self.pin(v);
        Ok(v)
    }

    /// Words `a` and `a + 1` of every lane, with one 64-bit load per lane:
    /// the lanes of `(w0, w1)` pairs are interleaved into a vector of first
    /// words and one of second words. Each word is checked as its own load
    /// would check it, first the first ones.
    fn gather_pair(
        &mut self,
        root: LayoutId,
        a: V,
        lane: ir::Type,
        span: Span,
    ) -> Result<(Value, Value), Stop> {
        if matches!(a, V::U(_)) {
            return Err(super::super::internal(self.env.kernel, "uniform pair address").into());
        }
        let av = self.mat(a, types::I32, false);
        let r = self.root_index(root)?;
        if !self.already_checked((av, (1 << 40) | r as u64)) {
            // One check that `a + 1` is inside for every lane; the cold
            // path checks `a`, then `a + 1`, as two loads would.
            let one = self.b.ins().iconst(types::I32, 1);
            let ones = self.b.ins().splat(types::I32X4, one);
            let next = self.b.ins().iadd(av, ones);
            self.check_words_at(r, av, 1, &[(av, span), (next, span)], span);
        }
        let ptrs = self.ptrs_of(self.bufs[r].0, a);
        let words: Vec<Value> = ptrs
            .iter()
            .map(|&p| {
                self.b
                    .ins()
                    .load(types::I64, MemFlagsData::new().with_notrap(), p, 0)
            })
            .collect();
        let little = MemFlagsData::new().with_endianness(ir::Endianness::Little);
        let mut halves = Vec::new();
        for k in [0, 2] {
            let v = self.b.ins().scalar_to_vector(types::I64X2, words[k]);
            let v = self.b.ins().insertlane(v, words[k + 1], 1);
            halves.push(self.b.ins().bitcast(types::I8X16, little, v));
        }
        let mut out = Vec::new();
        for first in [0u8, 1] {
            // 32-bit lanes `first`, `first + 2` of each half: bytes of
            // lanes first, first+2 (a) then 4+first, 4+first+2 (b).
            let mut mask = Vec::with_capacity(16);
            for l in [first, first + 2, 4 + first, 6 + first] {
                mask.extend((0..4).map(|b| l * 4 + b));
            }
            let imm = self.b.func.dfg.immediates.push(ConstantData::from(mask));
            let v = self.b.ins().shuffle(halves[0], halves[1], imm);
            let v = self.b.ins().bitcast(vec_of(lane), little, v);
            self.pin(v);
            out.push(v);
        }
        Ok((out[0], out[1]))
    }

    /// `d` when `op` is an unsigned `/` or `%` by the constant power of two `d`.
    fn pow2_divisor(&self, op: BinaryOp, s: Scalar, divisor: InstId) -> Option<u32> {
        let is_div = matches!(op, BinaryOp::Div | BinaryOp::Rem);
        match self.f.insts[divisor].kind {
            InstKind::Const(c) if is_div && s == Scalar::U32 && c.lo().is_power_of_two() => {
                Some(c.lo())
            }
            _ => None,
        }
    }

    /// Makes `v` computed here. Cranelift's optimiser places pure
    /// instructions (lane inserts, arithmetic) just before their first
    /// effectful use, so a stencil's gathered words would all stay live, as
    /// scalars, until the kernel's final stores, and spill; a store of the
    /// assembled vector is such a use.
    fn pin(&mut self, v: Value) {
        let slot = self.sm().pin;
        // (The type is the slot address's.)
        self.b.ins().stack_store(types::I64, v, slot, 0);
    }

    fn root_index(&self, root: LayoutId) -> Result<usize, Stop> {
        Ok(self
            .env
            .roots
            .iter()
            .position(|&x| x == root)
            .ok_or_else(|| super::super::internal(self.env.kernel, "buffer not collected"))?)
    }

    /// One vector check that words `a .. a + n` of buffer `r` are inside it
    /// for every lane (all four lanes run). When one is not, a cold path
    /// checks each of `words` (an address vector and the span of the access
    /// it belongs to) in order, as the accesses one by one would, so the
    /// fault names the same access and value. Those addresses must be
    /// `a + c` for constants `c` up to `n`.
    fn check_words_at(&mut self, r: usize, av: Value, n: u32, words: &[(Value, Span)], span: Span) {
        let len = self.bufs[r].1;
        let max = self.b.ins().iconst(types::I64, u32::MAX as i64);
        let lim64 = self.b.ins().umin(len, max);
        // `a + n` inside (and no `a + c` wrapping): `a < lim - n`, saturating at 0.
        let nn = self.b.ins().iconst(types::I64, n as i64);
        let room = self.b.ins().umax(lim64, nn);
        let room = self.b.ins().isub(room, nn);
        let room = self.b.ins().ireduce(types::I32, room);
        let rooms = self.b.ins().splat(types::I32X4, room);
        let bad = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThanOrEqual, av, rooms);
        let any = self.b.ins().vany_true(bad);
        let slow = self.b.create_block();
        let cont = self.b.create_block();
        self.b.ins().brif(any, slow, &[], cont, &[]);
        self.b.switch_to_block(slow);
        self.b.set_cold_block(slow);
        let lim = self.b.ins().ireduce(types::I32, lim64);
        let lims = self.b.ins().splat(types::I32X4, lim);
        for &(x, sp) in words {
            let bad_x = self
                .b
                .ins()
                .icmp(IntCC::UnsignedGreaterThanOrEqual, x, lims);
            let site = self.site(sp, FaultKind::Address);
            self.fault_lanes(bad_x, x, site, false);
        }
        // Reached only when an `a + c` wrapped around 2^32 inside a buffer
        // of 2^32 words: the words are not neighbours in memory.
        let site = self.site(span, FaultKind::Address);
        self.fault_lanes(bad, av, site, false);
        self.b.ins().jump(cont, &[]);
        self.b.switch_to_block(cont);
    }

    /// A run of plain f32 scatter-adds to words `a + c` (see `add_runs`),
    /// at its last add. One vector check that every lane's `a + c` lies in
    /// the buffer (the cold path repeats each add's own check, in program
    /// order, to report the fault the adds one by one would report); then
    /// lane by lane, in lane order, the lane's words: a pair of neighbouring
    /// words as one 64-bit load, two-lane add and store, a lone word as a
    /// scalar add. Each word still adds `old + value` in lane order, so a
    /// word that several lanes hit gets their adds in iteration order (as
    /// the interpreter adds them); unlike add after add over all lanes, a
    /// lane's words are all updated before the next lane's.
    ///
    /// With `store`, the run is of plain word stores instead (a pair as one
    /// 64-bit store): as for adds, a lane's words are all written before
    /// the next lane's, which is the interpreter's order.
    fn word_run(&mut self, run: &[(InstId, u32)], span: Span, store: bool) -> Result<(), Stop> {
        let f = self.f;
        let part = |h: InstId| match f.insts[h].kind {
            InstKind::BufAtomic {
                root, addr, value, ..
            }
            | InstKind::BufStore { root, addr, value } => Ok((root, addr, value)),
            _ => Err(Stop::Unsupported),
        };
        let (root, addr, _) = part(run[0].0)?;
        let r = self.root_index(root)?;
        let ptr = self.bufs[r].0;
        let a = self.vv1(addr);
        let av = self.mat(a, types::I32, false);
        let mut words = Vec::new();
        for &(h, _) in run {
            let (_, ah, _) = part(h)?;
            let x = self.vv1(ah);
            words.push((self.mat(x, types::I32, false), f.insts[h].span));
        }
        let n = run.iter().map(|x| x.1).max().unwrap_or(0);
        self.check_words_at(r, av, n, &words, span);

        // The value of each word offset, and the interleaved pairs.
        let little = MemFlagsData::new().with_endianness(ir::Endianness::Little);
        // Every value as f32 lanes (integer words bitcast: only bits move).
        let mut vals: [Option<Value>; 4] = [None; 4];
        for &(h, c) in run {
            let (_, _, vh) = part(h)?;
            let v = self.vv1(vh);
            let (lane, _) = lane_kind(self.ty(vh));
            let x = self.mat(v, lane, false);
            vals[c as usize] = Some(if lane == types::F32 {
                x
            } else {
                self.b.ins().bitcast(types::F32X4, little, x)
            });
        }
        let shuffle = |l: &mut Self, x: Value, y: Value, lanes: [u8; 4]| {
            let x = l.b.ins().bitcast(types::I8X16, little, x);
            let y = l.b.ins().bitcast(types::I8X16, little, y);
            let mask: Vec<u8> = lanes
                .iter()
                .flat_map(|&k| (0..4).map(move |b| k * 4 + b))
                .collect();
            let imm = l.b.func.dfg.immediates.push(ConstantData::from(mask));
            let v = l.b.ins().shuffle(x, y, imm);
            l.b.ins().bitcast(types::F32X4, little, v)
        };
        // Word offset → lanes 0..4's (v_c, v_c+1) in their low two lanes.
        let mut pairs: [Option<[Value; 4]>; 4] = [None; 4];
        let mut c = 0;
        while c + 1 < 4 {
            if let (Some(x), Some(y)) = (vals[c], vals[c + 1]) {
                let lo = shuffle(self, x, y, [0, 4, 1, 5]);
                let hi = shuffle(self, x, y, [2, 6, 3, 7]);
                let lo1 = shuffle(self, lo, lo, [2, 3, 2, 3]);
                let hi1 = shuffle(self, hi, hi, [2, 3, 2, 3]);
                pairs[c] = Some([lo, lo1, hi, hi1]);
                c += 2;
            } else {
                c += 1;
            }
        }
        let fl = MemFlagsData::new().with_notrap();
        let ptrs = self.ptrs_of(ptr, a);
        for k in 0..LANES {
            let p = ptrs[k as usize];
            let mut c = 0;
            while c < 4 {
                let at = 4 * c as i32;
                if let Some(pv) = pairs[c] {
                    if store {
                        let new = self.b.ins().bitcast(types::F64X2, little, pv[k as usize]);
                        let new = self.b.ins().extractlane(new, 0);
                        self.b.ins().store(fl, new, p, at);
                        c += 2;
                        continue;
                    }
                    let old = self.b.ins().load(types::F64, fl, p, at);
                    let old = self.b.ins().scalar_to_vector(types::F64X2, old);
                    let old = self.b.ins().bitcast(types::F32X4, little, old);
                    let new = self.b.ins().fadd(old, pv[k as usize]);
                    let new = self.b.ins().bitcast(types::F64X2, little, new);
                    let new = self.b.ins().extractlane(new, 0);
                    self.b.ins().store(fl, new, p, at);
                    c += 2;
                    continue;
                }
                if let Some(x) = vals[c] {
                    let xk = self.b.ins().extractlane(x, k);
                    if store {
                        self.b.ins().store(fl, xk, p, at);
                        c += 1;
                        continue;
                    }
                    let old = self.b.ins().load(types::F32, fl, p, at);
                    let new = self.b.ins().fadd(old, xk);
                    self.b.ins().store(fl, new, p, at);
                }
                c += 1;
            }
        }
        Ok(())
    }

    fn scatter(
        &mut self,
        root: LayoutId,
        a: V,
        v: V,
        (lane, boolean): (ir::Type, bool),
        span: Span,
    ) -> Result<(), Stop> {
        let ptrs = self.lane_ptrs(root, a, span)?;
        self.each_lane(lane, |l, k| {
            let p = l.lane_ptr(&ptrs, root, a, k, span)?;
            let vk = l.lane_of(v, k, boolean);
            l.b.ins().store(MemFlagsData::trusted(), vk, p, 0);
            Ok(vk)
        })?;
        Ok(())
    }

    /// Faults at `site` when any lane of `bad` (a mask) is set, reporting
    /// that first lane's value from `vals` (`I32X4`).
    fn fault_lanes(&mut self, bad: Value, vals: Value, site: u32, signed: bool) {
        let any = self.b.ins().vany_true(bad);
        let cold = self.b.create_block();
        let ok = self.b.create_block();
        self.b.ins().brif(any, cold, &[], ok, &[]);
        self.b.switch_to_block(cold);
        self.b.set_cold_block(cold);
        let widen = |l: &mut Self, x: Value| {
            if signed {
                l.b.ins().sextend(types::I64, x)
            } else {
                l.b.ins().uextend(types::I64, x)
            }
        };
        let last = self.b.ins().extractlane(vals, LANES - 1);
        let mut v = widen(self, last);
        for k in (0..LANES - 1).rev() {
            let bk = self.b.ins().extractlane(bad, k);
            let xk = self.b.ins().extractlane(vals, k);
            let xk = widen(self, xk);
            v = self.b.ins().select(bk, xk, v);
        }
        let s = self.b.ins().iconst(types::I32, site as i64);
        self.b.ins().jump(self.fault_block, &[s.into(), v.into()]);
        self.fault_used = true;
        self.b.switch_to_block(ok);
    }

    /// An `if` on a uniform condition: an ordinary branch.
    fn vif_uniform(&mut self, c: Value, accept: &Block, reject: &Block) -> Result<(), Stop> {
        let (full0, returns0) = (self.sm().full, self.sm().returns);
        let then_b = self.b.create_block();
        let else_b = self.b.create_block();
        let merge = self.b.create_block();
        self.b.ins().brif(c, then_b, &[], else_b, &[]);
        for (blk, side) in [(then_b, accept), (else_b, reject)] {
            self.b.switch_to_block(blk);
            self.filled = false;
            self.vblock(side)?;
            self.filled = false;
            self.b.ins().jump(merge, &[]);
        }
        self.b.switch_to_block(merge);
        let returned = self.sm().returns != returns0;
        self.sm().full = full0 && !returned;
        Ok(())
    }

    /// An `if` on a per-lane condition: each side runs for its lanes, and
    /// is skipped when it has none.
    fn vif_masked(&mut self, c: Value, accept: &Block, reject: &Block) -> Result<(), Stop> {
        let (full0, returns0) = (self.sm().full, self.sm().returns);
        self.sm().full = false;
        let exec = self.sm().exec;
        let m = self.b.use_var(exec);
        let t = self.b.ins().band(m, c);
        let fm = self.b.ins().band_not(m, c);
        let mut ends = Vec::new();
        for (mask, side) in [(t, accept), (fm, reject)] {
            if side.is_empty() {
                ends.push(mask);
                continue;
            }
            self.b.def_var(exec, mask);
            let any = self.b.ins().vany_true(mask);
            let run = self.b.create_block();
            let join = self.b.create_block();
            self.b.ins().brif(any, run, &[], join, &[]);
            self.b.switch_to_block(run);
            self.filled = false;
            self.vblock(side)?;
            self.filled = false;
            self.b.ins().jump(join, &[]);
            self.b.switch_to_block(join);
            ends.push(self.b.use_var(exec));
        }
        let e = self.b.ins().bor(ends[0], ends[1]);
        self.b.def_var(exec, e);
        let returned = self.sm().returns != returns0;
        self.sm().full = full0 && !returned;
        Ok(())
    }

    /// A loop every lane runs the same number of trips: an ordinary loop.
    fn vloop_uniform(&mut self, body: &Block) -> Result<(), Stop> {
        let head = self.b.create_block();
        let exit = self.b.create_block();
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(head);
        self.sm().loops.push(VLoop::Uniform { head, exit });
        self.filled = false;
        self.vblock(body)?;
        self.filled = false;
        self.sm().loops.pop();
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(exit);
        Ok(())
    }

    /// A loop that repeats while any lane is still in it.
    fn vloop(&mut self, body: &Block) -> Result<(), Stop> {
        let (full0, returns0) = (self.sm().full, self.sm().returns);
        self.sm().full = false;
        let exec = self.sm().exec;
        let m0 = self.b.use_var(exec);
        let live = self.b.declare_var(types::I32X4);
        self.b.def_var(live, m0);
        let head = self.b.create_block();
        let latch = self.b.create_block();
        let exit = self.b.create_block();
        let any0 = self.b.ins().vany_true(m0);
        self.b.ins().brif(any0, head, &[], exit, &[]);
        self.b.switch_to_block(head);
        let l = self.b.use_var(live);
        self.b.def_var(exec, l);
        self.sm().loops.push(VLoop::Masked(live));
        self.filled = false;
        self.vblock(body)?;
        self.filled = false;
        self.sm().loops.pop();
        self.b.ins().jump(latch, &[]);
        self.b.switch_to_block(latch);
        let l = self.b.use_var(live);
        let any = self.b.ins().vany_true(l);
        self.b.ins().brif(any, head, &[], exit, &[]);
        self.b.switch_to_block(exit);
        let returned = self.sm().returns != returns0;
        let after = if returned {
            let ret = self.sm().ret;
            let r = self.b.use_var(ret);
            self.b.ins().band_not(m0, r)
        } else {
            m0
        };
        self.b.def_var(exec, after);
        self.sm().full = full0 && !returned;
        Ok(())
    }
}
