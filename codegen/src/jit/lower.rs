//! Lowers one IR function to a Cranelift function.
//!
//! Pre: a validated, access-lowered IR function. Post: a complete Cranelift
//! function (all blocks filled). Every IR value becomes one Cranelift value
//! per component (`F32` for float components, `I32` for i32/u32/bool words,
//! bools being the raw word as the interpreter keeps it); locals become
//! Cranelift variables (SSA construction by
//! `cranelift_frontend`). Structured control flow maps onto blocks: code after
//! a `break` / `continue` / `return` in the same IR block is unreachable and
//! is not emitted.

use super::{ctx_offsets, math};
use crate::CodegenError;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::immediates::{Ieee32, Ieee64};
use cranelift_codegen::ir::{
    self, types, AtomicRmwOp, Block as CBlock, FuncRef, InstBuilder, MemFlagsData, StackSlotData,
    StackSlotKind, Value,
};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_jit::JITModule;
use cranelift_module::{FuncId, Module};
use std::collections::HashMap;
use weft_ir::ir::*;
use weft_ir::types::{Scalar, Type};

/// What every function of one kernel shares while being lowered.
pub(super) struct Env<'a> {
    /// How atomics are emitted in the function being built.
    pub variant: super::Variant,
    /// Roots whose atomics become plain read-modify-writes in `Variant::Private`.
    pub private_roots: &'a [LayoutId],
    pub kernel: &'a Kernel,
    pub roots: &'a [LayoutId],
    pub sites: &'a mut Vec<FaultSite>,
    pub host_ids: &'a HashMap<&'static str, FuncId>,
    pub helper_ids: &'a [Option<FuncId>],
}

/// The Cranelift type of one component of `t`.
pub(super) fn clif_ty(t: Type) -> ir::Type {
    t.scalar().map_or(types::I32, scalar_clif)
}

fn scalar_clif(s: Scalar) -> ir::Type {
    match s {
        Scalar::F32 => types::F32,
        Scalar::F64 => types::F64,
        Scalar::I64 | Scalar::U64 => types::I64,
        _ => types::I32,
    }
}

/// Bytes of one component of `t` in memory (helper results, shared arrays).
fn comp_bytes(t: Type) -> i32 {
    4 * t.scalar().map_or(1, Scalar::words) as i32
}

/// How a `return` leaves the function being lowered.
enum Exit {
    /// The kernel body: go on with the next iteration.
    Entry { next: CBlock },
    /// A helper: store the value through `retptr`, return status 0.
    Helper { retptr: Value },
}

struct LoopTargets {
    cont: CBlock,
    exit: CBlock,
    cont_used: bool,
    exit_used: bool,
}

struct Lower<'e, 'a, 'b> {
    b: FunctionBuilder<'b>,
    module: &'e mut JITModule,
    env: &'e mut Env<'a>,
    f: &'a Function,
    vals: HashMap<InstId, Vec<Value>>,
    locals: Vec<Vec<Variable>>,
    loops: Vec<LoopTargets>,
    /// The current Cranelift block already ends in a terminator.
    filled: bool,
    fault: Value,
    ctx: Value,
    rng: Value,
    depth: Value,
    bufs: Vec<(Value, Value)>,
    params: Vec<Value>,
    frame: Value,
    args: Vec<Vec<Value>>,
    launch: Option<(Value, Value, Variable)>,
    exit: Exit,
    fail: CBlock,
    /// Shared fault path: params (site: i32, value: i64); records and fails.
    fault_block: CBlock,
    fault_used: bool,
    /// Checks already made on this path, per nested IR block: (value, extent
    /// or `ADDR | root`). A repeated check of the same value is dominated by
    /// the first one and is not emitted again.
    checked: Vec<std::collections::HashSet<(Value, u64)>>,
    host_refs: HashMap<&'static str, FuncRef>,
    helper_refs: HashMap<usize, FuncRef>,
    /// The arithmetic helpers (`binary`, `cast`, `builtin`, …) build lane
    /// vectors (`F32X4` / `I32X4`, bools as all-ones lane masks) instead of
    /// scalars: set by the four-lane lowering (`simd`) around each call.
    vmode: bool,
    /// State of the four-lane lowering, when this function is built by it.
    simd: Option<simd::Simd>,
    /// See `Setup::shared`.
    shared: Vec<(Value, u32)>,
}

mod simd;
pub(super) use simd::{build_vector_chunk, vectorizable};

/// Loads what every function needs from the context (in the entry block).
fn load_env(
    b: &mut FunctionBuilder,
    env: &Env,
    ctx: Value,
) -> (Vec<(Value, Value)>, Vec<Value>, Value) {
    let fl = MemFlagsData::trusted().with_readonly();
    let bp = b.ins().load(types::I64, fl, ctx, ctx_offsets::BUFFERS);
    let lp = b.ins().load(types::I64, fl, ctx, ctx_offsets::LENS);
    let bufs = (0..env.roots.len())
        .map(|r| {
            let base = b.ins().load(types::I64, fl, bp, 8 * r as i32);
            let len = b.ins().load(types::I64, fl, lp, 8 * r as i32);
            (base, len)
        })
        .collect();
    let pp = b.ins().load(types::I64, fl, ctx, ctx_offsets::PARAMS);
    let params = (0..env.kernel.params.len())
        .map(|i| b.ins().load(types::I32, fl, pp, 4 * i as i32))
        .collect();
    let frame = b.ins().load(types::I32, fl, ctx, ctx_offsets::FRAME);
    (bufs, params, frame)
}

/// Variables for the linear index (`I64`, set to `start`) and the per-axis
/// indices of `start` (`I32`, row-major over `shape`): decomposed once per
/// chunk, then advanced with carries.
fn index_vars(b: &mut FunctionBuilder, shape: &[u32], start: Value) -> (Variable, Vec<Variable>) {
    let dims = shape.len().max(1);
    let lin = b.declare_var(types::I64);
    let idx: Vec<Variable> = (0..dims).map(|_| b.declare_var(types::I32)).collect();
    let mut rest = start;
    for d in (0..dims).rev() {
        let s = shape.get(d).copied().unwrap_or(1).max(1) as i64;
        let i = b.ins().urem_imm_s(rest, s);
        let i32v = b.ins().ireduce(types::I32, i);
        b.def_var(idx[d], i32v);
        rest = b.ins().udiv_imm_s(rest, s);
    }
    b.def_var(lin, start);
    (lin, idx)
}

/// Builds the chunk function: `(ctx, start, end, fault) -> status`.
pub(super) fn build_chunk(
    module: &mut JITModule,
    env: &mut Env,
    func: &mut ir::Function,
    fctx: &mut FunctionBuilderContext,
    shape: &[u32],
) -> Result<(), CodegenError> {
    let kernel = env.kernel;
    let f = &kernel.entry;
    let mut b = FunctionBuilder::new(func, fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let p = b.block_params(entry).to_vec();
    let (ctx, start, end, fault) = (p[0], p[1], p[2], p[3]);
    let (bufs, params, frame) = load_env(&mut b, env, ctx);
    let (rng, depth) = private_words(&mut b);
    let launch = uses_launch(f).then(|| load_seed_launch(&mut b, ctx));
    let shared = match &kernel.workgroup {
        None => vec![],
        Some(w) if w.size == 1 => w
            .arrays
            .iter()
            .map(|a| {
                let slot = b.create_sized_stack_slot(StackSlotData::new(
                    StackSlotKind::ExplicitSlot,
                    4 * a.words(),
                    2,
                ));
                (b.ins().stack_addr(types::I64, slot, 0), a.len)
            })
            .collect(),
        Some(_) => {
            return Err(super::internal(
                kernel,
                "a workgroup kernel reached the JIT with blocks of more than one invocation (passes::block_loops did not run)",
            ))
        }
    };

    let dims = shape.len().max(1);
    let (lin, idx) = index_vars(&mut b, shape, start);
    let head = b.create_block();
    let body = b.create_block();
    let next = b.create_block();
    let done = b.create_block();
    let (fail, fault_block) = fault_blocks(&mut b);
    let any = b.ins().icmp(IntCC::UnsignedLessThan, start, end);
    b.ins().brif(any, head, &[], done, &[]);

    b.switch_to_block(head);
    b.ins().jump(body, &[]);
    b.switch_to_block(body);
    let args: Vec<Vec<Value>> = idx.iter().map(|v| vec![b.use_var(*v)]).collect();
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
            args,
            launch: launch.map(|(seed, count)| (seed, count, lin)),
            exit: Exit::Entry { next },
            fail,
            fault_block,
            shared,
        },
    );
    l.declare_locals();
    l.block(&f.body)?;
    if !l.filled {
        l.b.ins().jump(next, &[]);
    }
    l.finish_fault_block();
    let mut b = l.b;
    // Next iteration: advance the linear index and the per-axis indices (carry, branch-free).
    b.switch_to_block(next);
    let lv = b.use_var(lin);
    let lv1 = b.ins().iadd_imm_s(lv, 1);
    b.def_var(lin, lv1);
    let mut carry: Option<Value> = None;
    for d in (0..dims).rev() {
        let cur = b.use_var(idx[d]);
        let inc = match carry {
            None => b.ins().iadd_imm_s(cur, 1),
            Some(c) => {
                let c32 = b.ins().uextend(types::I32, c);
                b.ins().iadd(cur, c32)
            }
        };
        if d == 0 {
            b.def_var(idx[d], inc);
        } else {
            let s = shape.get(d).copied().unwrap_or(1) as i64;
            let sv = b.ins().iconst(types::I32, s);
            let wrap = b.ins().icmp(IntCC::Equal, inc, sv);
            let zero = b.ins().iconst(types::I32, 0);
            let v = b.ins().select(wrap, zero, inc);
            b.def_var(idx[d], v);
            carry = Some(wrap);
        }
    }
    let more = b.ins().icmp(IntCC::UnsignedLessThan, lv1, end);
    b.ins().brif(more, head, &[], done, &[]);
    b.switch_to_block(done);
    let zero = b.ins().iconst(types::I32, 0);
    b.ins().return_(&[zero]);
    b.switch_to_block(fail);
    b.set_cold_block(fail);
    let one = b.ins().iconst(types::I32, 1);
    b.ins().return_(&[one]);
    b.seal_all_blocks();
    let cfg = module.target_config();
    b.finalize(cfg);
    Ok(())
}

/// Builds a helper: `(ctx, fault, rng, depth, retptr, args…) -> status`.
pub(super) fn build_helper<'a>(
    module: &mut JITModule,
    env: &mut Env<'a>,
    func: &mut ir::Function,
    fctx: &mut FunctionBuilderContext,
    f: &'a Function,
) -> Result<(), CodegenError> {
    let mut b = FunctionBuilder::new(func, fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let p = b.block_params(entry).to_vec();
    let (ctx, fault, rng, depth, retptr) = (p[0], p[1], p[2], p[3], p[4]);
    let mut at = 5;
    let mut args = Vec::new();
    for t in &f.args {
        let n = t.components();
        args.push(p[at..at + n].to_vec());
        at += n;
    }
    let (bufs, params, frame) = load_env(&mut b, env, ctx);
    let (fail, fault_block) = fault_blocks(&mut b);
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
            args,
            launch: None,
            exit: Exit::Helper { retptr },
            fail,
            fault_block,
            shared: vec![],
        },
    );
    l.declare_locals();
    l.block(&f.body)?;
    if !l.filled {
        // Falling off the end returns nothing.
        let zero = l.b.ins().iconst(types::I32, 0);
        l.b.ins().return_(&[zero]);
    }
    l.finish_fault_block();
    let mut b = l.b;
    b.switch_to_block(fail);
    b.set_cold_block(fail);
    let one = b.ins().iconst(types::I32, 1);
    b.ins().return_(&[one]);
    b.seal_all_blocks();
    let cfg = module.target_config();
    b.finalize(cfg);
    Ok(())
}

/// The invocation's private words (the random state at 0, the loop trip
/// count `TripsLoad` at 4) and the call depth of an entry (0).
pub(super) fn private_words(b: &mut FunctionBuilder) -> (Value, Value) {
    let slot = b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 8, 2));
    let words = b.ins().stack_addr(types::I64, slot, 0);
    let depth = b.ins().iconst(types::I32, 0);
    (words, depth)
}

/// The blocks a function's faults branch to: `fail` (leave with status 1)
/// and the fault block, whose parameters are the site and the value.
pub(super) fn fault_blocks(b: &mut FunctionBuilder) -> (CBlock, CBlock) {
    let fail = b.create_block();
    let fault_block = b.create_block();
    b.append_block_param(fault_block, types::I32);
    b.append_block_param(fault_block, types::I64);
    (fail, fault_block)
}

/// What a function's lowering starts from: values loaded in its entry
/// block and the blocks its exits and faults branch to.
struct Setup {
    ctx: Value,
    fault: Value,
    rng: Value,
    depth: Value,
    bufs: Vec<(Value, Value)>,
    params: Vec<Value>,
    frame: Value,
    args: Vec<Vec<Value>>,
    /// The run's seed, this launch's count and the linear-index variable
    /// (`InstKind::Launch`), in an entry that reads them.
    launch: Option<(Value, Value, Variable)>,
    exit: Exit,
    fail: CBlock,
    fault_block: CBlock,
    /// Each shared array's address and length (the entry of a workgroup
    /// kernel: one invocation is its whole block, `passes::block_loops`).
    shared: Vec<(Value, u32)>,
}

impl<'e, 'a, 'b> Lower<'e, 'a, 'b> {
    fn new(
        b: FunctionBuilder<'b>,
        module: &'e mut JITModule,
        env: &'e mut Env<'a>,
        f: &'a Function,
        s: Setup,
    ) -> Self {
        Lower {
            b,
            module,
            env,
            f,
            vals: HashMap::new(),
            locals: vec![],
            loops: vec![],
            filled: false,
            fault: s.fault,
            ctx: s.ctx,
            rng: s.rng,
            depth: s.depth,
            bufs: s.bufs,
            params: s.params,
            frame: s.frame,
            args: s.args,
            launch: s.launch,
            exit: s.exit,
            fail: s.fail,
            fault_block: s.fault_block,
            shared: s.shared,
            fault_used: false,
            checked: vec![],
            host_refs: HashMap::new(),
            helper_refs: HashMap::new(),
            vmode: false,
            simd: None,
        }
    }
}

/// Whether `f` reads a launch value (`random()`'s seed chain does).
pub(super) fn uses_launch(f: &Function) -> bool {
    f.insts
        .iter()
        .any(|(_, i)| matches!(i.kind, InstKind::Launch(_)))
}

/// The run's seed and this launch's index (what `random()` streams start from).
fn load_seed_launch(b: &mut FunctionBuilder, ctx: Value) -> (Value, Value) {
    let fl = MemFlagsData::trusted().with_readonly();
    (
        b.ins().load(types::I32, fl, ctx, ctx_offsets::SEED),
        b.ins().load(types::I32, fl, ctx, ctx_offsets::LAUNCH),
    )
}

impl Lower<'_, '_, '_> {
    fn err(&self, h: InstId, m: &str) -> CodegenError {
        super::internal(
            self.env.kernel,
            &format!("{} (at code {})", m, self.f.insts[h].span),
        )
    }

    fn declare_locals(&mut self) {
        for (_, loc) in self.f.locals.iter() {
            let ty = clif_ty(loc.ty);
            let vars: Vec<Variable> = (0..loc.ty.components())
                .map(|_| {
                    let v = self.b.declare_var(ty);
                    let z = self.zero(ty);
                    self.b.def_var(v, z);
                    v
                })
                .collect();
            self.locals.push(vars);
        }
    }

    fn zero(&mut self, ty: ir::Type) -> Value {
        let z = if ty.lane_type() == types::F32 {
            self.b.ins().f32const(Ieee32::with_bits(0))
        } else if ty.lane_type() == types::F64 {
            self.b.ins().f64const(Ieee64::with_bits(0))
        } else {
            self.b.ins().iconst(ty.lane_type(), 0)
        };
        self.lanes(z)
    }
    fn i32c(&mut self, v: u32) -> Value {
        let c = self.b.ins().iconst(types::I32, v as i64);
        self.lanes(c)
    }
    fn f32c(&mut self, v: f32) -> Value {
        let c = self.b.ins().f32const(Ieee32::with_bits(v.to_bits()));
        self.lanes(c)
    }
    /// A float constant of `x`'s float type (`f64` or, lanes included, `f32`).
    fn fc(&mut self, x: Value, v: f64) -> Value {
        if self.b.func.dfg.value_type(x) == types::F64 {
            self.b.ins().f64const(Ieee64::with_float(v))
        } else {
            self.f32c(v as f32)
        }
    }
    /// An integer constant of `x`'s integer type (`i64`, or `i32` lanes included).
    fn ic(&mut self, x: Value, v: i64) -> Value {
        if self.b.func.dfg.value_type(x) == types::I64 {
            self.b.ins().iconst(types::I64, v)
        } else {
            self.i32c(v as u32)
        }
    }
    /// A scalar as the helpers' current value shape: itself, or splat over
    /// four lanes in `vmode`.
    fn lanes(&mut self, x: Value) -> Value {
        if self.vmode {
            let t = self.b.func.dfg.value_type(x);
            self.b.ins().splat(t.by(4).expect("32-bit lanes"), x)
        } else {
            x
        }
    }
    /// The helpers' type for one component of scalar type `t` (`F32`/`I32`).
    fn vt(&self, t: ir::Type) -> ir::Type {
        if self.vmode {
            t.by(4).expect("32-bit lanes")
        } else {
            t
        }
    }
    /// A Cranelift condition as a bool value: an `i8` widened to a 0/1
    /// word, or (in `vmode`) the comparison's lane mask as it is.
    fn word(&mut self, c: Value) -> Value {
        if self.vmode {
            return c;
        }
        self.b.ins().uextend(types::I32, c)
    }
    /// A bool value as an integer 0/1 (the interpreter's bool → int cast).
    fn bit01(&mut self, w: Value) -> Value {
        if self.vmode {
            let one = self.i32c(1);
            self.b.ins().band(w, one)
        } else {
            w
        }
    }
    /// `c ? a : b` where `c` is a Cranelift condition (`i8`), or a lane mask in `vmode`.
    fn sel(&mut self, c: Value, a: Value, b: Value) -> Value {
        let ct = self.b.func.dfg.value_type(c);
        if ct.is_vector() {
            let at = self.b.func.dfg.value_type(a);
            let m = if at == ct {
                c
            } else {
                self.b.ins().bitcast(at, MemFlagsData::new(), c)
            };
            self.b.ins().bitselect(m, a, b)
        } else {
            self.b.ins().select(c, a, b)
        }
    }
    fn icmp(&mut self, cc: IntCC, a: Value, b: Value) -> Value {
        let c = self.b.ins().icmp(cc, a, b);
        self.word(c)
    }
    fn fcmp(&mut self, cc: FloatCC, a: Value, b: Value) -> Value {
        let c = self.b.ins().fcmp(cc, a, b);
        self.word(c)
    }
    /// `a != 0` as a bool value.
    fn nz(&mut self, a: Value) -> Value {
        if self.vmode {
            let z = self.i32c(0);
            return self.b.ins().icmp(IntCC::NotEqual, a, z);
        }
        let c = self.b.ins().icmp_imm_s(IntCC::NotEqual, a, 0);
        self.word(c)
    }
    fn v(&self, h: InstId) -> Vec<Value> {
        self.vals.get(&h).cloned().unwrap_or_default()
    }
    fn v1(&self, h: InstId) -> Value {
        self.vals[&h][0]
    }
    fn ty(&self, h: InstId) -> Type {
        self.f.insts[h].ty
    }

    fn site(&mut self, span: Span, kind: FaultKind) -> u32 {
        self.env.sites.push(FaultSite {
            span,
            kind,
            resume: false,
        });
        (self.env.sites.len() - 1) as u32
    }

    /// Faults at `site` (recording `value`, an I64) when `cond` (i8) holds.
    fn fault_if(&mut self, cond: Value, site: u32, value: Value) {
        let ok = self.b.create_block();
        let s = self.i32c(site);
        self.b
            .ins()
            .brif(cond, self.fault_block, &[s.into(), value.into()], ok, &[]);
        self.fault_used = true;
        self.b.switch_to_block(ok);
    }

    /// True when `key` was already checked on every path to here; records it otherwise.
    fn already_checked(&mut self, key: (Value, u64)) -> bool {
        if self.checked.iter().any(|s| s.contains(&key)) {
            return true;
        }
        if let Some(top) = self.checked.last_mut() {
            top.insert(key);
        }
        false
    }

    /// Emits the shared fault path (after the body, so that the current block is done).
    fn finish_fault_block(&mut self) {
        if !self.fault_used {
            return;
        }
        let fb = self.fault_block;
        self.b.switch_to_block(fb);
        self.b.set_cold_block(fb);
        let p = self.b.block_params(fb).to_vec();
        self.b
            .ins()
            .store(MemFlagsData::trusted(), p[0], self.fault, 0);
        self.b
            .ins()
            .store(MemFlagsData::trusted(), p[1], self.fault, 8);
        self.b.ins().jump(self.fail, &[]);
    }

    fn host(&mut self, name: &'static str) -> FuncRef {
        if let Some(r) = self.host_refs.get(name) {
            return *r;
        }
        let id = self.env.host_ids[name];
        let r = self.module.declare_func_in_func(id, self.b.func);
        self.host_refs.insert(name, r);
        r
    }
    fn call_host(&mut self, name: &'static str, args: &[Value]) -> Value {
        if self.vmode {
            // No vector versions: one call per lane.
            return self.per_lane(types::F32, args, |l, a| l.call_host(name, a));
        }
        let r = self.host(name);
        let c = self.b.ins().call(r, args);
        self.b.inst_results(c)[0]
    }

    fn block(&mut self, blk: &Block) -> Result<(), CodegenError> {
        self.checked.push(Default::default());
        for &h in blk {
            if self.filled {
                // Unreachable: after a break, continue or return.
                break;
            }
            self.inst(h)?;
        }
        self.checked.pop();
        Ok(())
    }

    fn inst(&mut self, h: InstId) -> Result<(), CodegenError> {
        let f = self.f;
        let inst = &f.insts[h];
        let ty = inst.ty;
        let span = inst.span;
        let out: Vec<Value> = match &inst.kind {
            InstKind::Const(k) => vec![match k.scalar {
                Scalar::F32 => self.b.ins().f32const(Ieee32::with_bits(k.lo())),
                Scalar::F64 => self.b.ins().f64const(Ieee64::with_bits(k.bits)),
                Scalar::I64 | Scalar::U64 => self.b.ins().iconst(types::I64, k.bits as i64),
                _ => self.i32c(k.lo()),
            }],
            InstKind::Arg(i) => self
                .args
                .get(*i as usize)
                .cloned()
                .ok_or_else(|| self.err(h, "argument out of range"))?,
            InstKind::Param(i) => {
                let w = *self
                    .params
                    .get(*i as usize)
                    .ok_or_else(|| self.err(h, "parameter out of range"))?;
                vec![self.word_as(w, ty)]
            }
            InstKind::Frame => vec![self.frame],
            InstKind::Launch(v) => {
                let (seed, count, lin) = self
                    .launch
                    .ok_or_else(|| self.err(h, "a launch value outside the kernel's entry"))?;
                vec![match v {
                    LaunchValue::Seed => seed,
                    LaunchValue::Count => count,
                    LaunchValue::Linear => {
                        let l = self.b.use_var(lin);
                        self.b.ins().ireduce(types::I32, l)
                    }
                }]
            }
            InstKind::RngLoad => {
                vec![self
                    .b
                    .ins()
                    .load(types::I32, MemFlagsData::trusted(), self.rng, 0)]
            }
            InstKind::RngStore(v) => {
                let x = self.v(*v)[0];
                self.b.ins().store(MemFlagsData::trusted(), x, self.rng, 0);
                vec![]
            }
            InstKind::TripsLoad => {
                vec![self
                    .b
                    .ins()
                    .load(types::I32, MemFlagsData::trusted(), self.rng, 4)]
            }
            InstKind::TripsStore(v) => {
                let x = self.v(*v)[0];
                self.b.ins().store(MemFlagsData::trusted(), x, self.rng, 4);
                vec![]
            }
            // One invocation at a time: its group is itself.
            InstKind::LaneMax(v) => self.v(*v),
            InstKind::Random => {
                return Err(self.err(h, "random() reached codegen; legalize did not run"))
            }
            InstKind::Unary(op, a) => {
                let s = ty.scalar().ok_or_else(|| self.err(h, "untyped unary"))?;
                self.v(*a)
                    .into_iter()
                    .map(|x| self.unary(*op, s, x))
                    .collect()
            }
            InstKind::Binary(BinaryOp::MatMul, a, b) => {
                let (at, bt) = (self.ty(*a), self.ty(*b));
                let (va, vb) = (self.v(*a), self.v(*b));
                self.matmul(&va, &vb, at, bt)
                    .ok_or_else(|| self.err(h, "matmul of unsupported types"))?
            }
            InstKind::Binary(op, a, b) => {
                let s = self
                    .ty(*a)
                    .scalar()
                    .ok_or_else(|| self.err(h, "untyped binary"))?;
                let (va, vb) = (self.v(*a), self.v(*b));
                let rt = clif_ty(ty);
                va.into_iter()
                    .zip(vb)
                    .map(|(x, y)| self.binary(*op, s, x, y, rt))
                    .collect()
            }
            InstKind::Select {
                cond,
                accept,
                reject,
            } => {
                let c = self.v(*cond);
                let (a, r) = (self.v(*accept), self.v(*reject));
                (0..a.len())
                    .map(|k| {
                        let ck = if c.len() == 1 { c[0] } else { c[k] };
                        self.b.ins().select(ck, a[k], r[k])
                    })
                    .collect()
            }
            InstKind::Cast(a) => {
                let from = self
                    .ty(*a)
                    .scalar()
                    .ok_or_else(|| self.err(h, "untyped cast"))?;
                let to = ty.scalar().ok_or_else(|| self.err(h, "untyped cast"))?;
                self.v(*a)
                    .into_iter()
                    .map(|x| self.cast(from, to, x))
                    .collect()
            }
            InstKind::Bitcast(a) => {
                let to = clif_ty(ty);
                let src = self.v(*a);
                match (src.len(), ty.components()) {
                    // Two words (low first) to a 64-bit scalar.
                    (2, 1) => {
                        let w: Vec<Value> = src
                            .iter()
                            .map(|&x| {
                                let i = self.retype(x, types::I32);
                                self.b.ins().uextend(types::I64, i)
                            })
                            .collect();
                        let hi = self.b.ins().ishl_imm_s(w[1], 32);
                        let v = self.b.ins().bor(w[0], hi);
                        vec![self.retype(v, to)]
                    }
                    // A 64-bit scalar to its two words.
                    (1, 2) => {
                        let v = self.retype(src[0], types::I64);
                        let lo = self.b.ins().ireduce(types::I32, v);
                        let h = self.b.ins().ushr_imm_s(v, 32);
                        let hi = self.b.ins().ireduce(types::I32, h);
                        vec![self.retype(lo, to), self.retype(hi, to)]
                    }
                    _ => src.into_iter().map(|x| self.retype(x, to)).collect(),
                }
            }
            InstKind::Construct(parts) => parts.iter().flat_map(|p| self.v(*p)).collect(),
            InstKind::Extract(a, i) => {
                let n = ty.components();
                let src = self.v(*a);
                let at = *i as usize * n;
                src.get(at..at + n)
                    .ok_or_else(|| self.err(h, "extract out of range"))?
                    .to_vec()
            }
            InstKind::ExtractDyn(a, i) => {
                let len = match self.ty(*a) {
                    Type::Vector(_, l) | Type::Matrix(l) => l as usize,
                    _ => return Err(self.err(h, "indexing a non-composite")),
                };
                let n = ty.components();
                let src = self.v(*a);
                let idx = self.clamp_index(self.v1(*i), len);
                let mut out: Vec<Value> = src[0..n].to_vec();
                for k in 1..len {
                    let is_k = self.b.ins().icmp_imm_s(IntCC::Equal, idx, k as i64);
                    for c in 0..n {
                        out[c] = self.b.ins().select(is_k, src[k * n + c], out[c]);
                    }
                }
                out
            }
            InstKind::Insert { base, index, value } => {
                let mut out = self.v(*base);
                let vv = self.v(*value);
                let at = *index as usize * vv.len();
                if at + vv.len() > out.len() {
                    return Err(self.err(h, "insert out of range"));
                }
                out[at..at + vv.len()].copy_from_slice(&vv);
                out
            }
            InstKind::InsertDyn { base, index, value } => {
                let mut out = self.v(*base);
                let vv = self.v(*value);
                let elem = vv.len().max(1);
                let len = out.len() / elem;
                let idx = self.clamp_index(self.v1(*index), len);
                for k in 0..len {
                    let is_k = self.b.ins().icmp_imm_s(IntCC::Equal, idx, k as i64);
                    for c in 0..elem {
                        out[k * elem + c] = self.b.ins().select(is_k, vv[c], out[k * elem + c]);
                    }
                }
                out
            }
            InstKind::Swizzle(a, comps) => {
                let src = self.v(*a);
                comps
                    .iter()
                    .map(|&c| {
                        src.get(c as usize)
                            .copied()
                            .ok_or_else(|| self.err(h, "swizzle out of range"))
                    })
                    .collect::<Result<_, _>>()?
            }
            InstKind::Builtin(bi, args) => {
                let at = self.ty(args[0]);
                let vs: Vec<Vec<Value>> = args.iter().map(|a| self.v(*a)).collect();
                self.builtin(*bi, at, &vs)
                    .ok_or_else(|| self.err(h, "built-in with unsupported arguments"))?
            }
            InstKind::Call(fid, args) => self.call(h, *fid, args)?,
            InstKind::SharedLoad { array, index } => {
                let p = self.shared_element(h, *array, *index)?;
                let ct = clif_ty(ty);
                (0..ty.components())
                    .map(|c| {
                        self.b
                            .ins()
                            .load(ct, MemFlagsData::trusted(), p, comp_bytes(ty) * c as i32)
                    })
                    .collect()
            }
            InstKind::SharedStore {
                array,
                index,
                value,
            } => {
                let p = self.shared_element(h, *array, *index)?;
                for (c, x) in self.v(*value).into_iter().enumerate() {
                    self.b
                        .ins()
                        .store(MemFlagsData::trusted(), x, p, 4 * c as i32);
                }
                vec![]
            }
            InstKind::Barrier => {
                return Err(self.err(
                    h,
                    "a barrier reached the JIT (passes::block_loops did not run)",
                ))
            }
            InstKind::LocalLoad(l) => {
                let vars = self.locals[l.index()].clone();
                vars.iter().map(|v| self.b.use_var(*v)).collect()
            }
            InstKind::LocalStore(l, v) => {
                let vars = self.locals[l.index()].clone();
                for (var, x) in vars.iter().zip(self.v(*v)) {
                    self.b.def_var(*var, x);
                }
                vec![]
            }
            InstKind::Trap { site, value } => {
                // A legalized fault: the site is the kernel's own (first in
                // `JitKernel::sites`); the value's bits are recorded as they
                // are and `FaultSite::message` reads them by the site's kind.
                if self.env.kernel.fault_sites.get(*site as usize).is_none() {
                    return Err(CodegenError {
                        kernel: self.env.kernel.name.clone(),
                        backend: "jit",
                        message: format!("trap at unknown fault site {}", site),
                    });
                }
                let v = self.v1(*value);
                let wide = self.b.ins().uextend(types::I64, v);
                let always = self.b.ins().iconst(types::I8, 1);
                self.fault_if(always, *site, wide);
                vec![]
            }
            InstKind::BufLoad { root, addr } => {
                let p = self.address(*root, self.v1(*addr), span)?;
                vec![self
                    .b
                    .ins()
                    .load(clif_ty(ty), MemFlagsData::trusted(), p, 0)]
            }
            InstKind::BufStore { root, addr, value } => {
                let p = self.address(*root, self.v1(*addr), span)?;
                let v = self.v1(*value);
                self.b.ins().store(MemFlagsData::trusted(), v, p, 0);
                vec![]
            }
            InstKind::BufAtomic {
                op,
                root,
                addr,
                value,
                cmp,
            } => {
                let s = ty.scalar().ok_or_else(|| self.err(h, "untyped atomic"))?;
                if !super::CAPS.has_atomic(*op, s) {
                    return Err(self.err(h, "an atomic the CPU backend lacks; legalize expands it"));
                }
                let p = self.address(*root, self.v1(*addr), span)?;
                let v = self.v1(*value);
                let c = cmp.map(|c| self.v1(c));
                let plain = match self.env.variant {
                    super::Variant::Atomic => false,
                    super::Variant::Serial => true,
                    super::Variant::Private => self.env.private_roots.contains(root),
                };
                if plain {
                    vec![self.plain_rmw(*op, s, p, v, c)]
                } else {
                    vec![self.atomic(*op, s, p, v, c)]
                }
            }
            InstKind::FieldLoad { .. }
            | InstKind::FieldStore { .. }
            | InstKind::FieldAtomic { .. }
            | InstKind::FieldIsActive { .. }
            | InstKind::FieldActivate { .. }
            | InstKind::FieldDeactivate { .. }
            | InstKind::FieldAppend { .. }
            | InstKind::FieldLength { .. } => {
                return Err(self.err(
                    h,
                    "abstract field access reached codegen; access lowering did not run",
                ))
            }
            InstKind::RangeFor { .. } | InstKind::LoopCounter(_) => {
                return Err(self.err(h, "a range loop reached codegen; legalize did not run"))
            }
            InstKind::BoundsCheck { .. } | InstKind::IndexCheck { .. } => {
                return Err(self.err(h, "a bounds check reached codegen; legalize did not run"))
            }
            InstKind::If {
                cond,
                accept,
                reject,
            } => {
                let c = self.v1(*cond);
                self.lower_if(c, accept, reject)?;
                vec![]
            }
            InstKind::Loop { body } => {
                let head = self.b.create_block();
                let exit = self.b.create_block();
                self.b.ins().jump(head, &[]);
                self.b.switch_to_block(head);
                self.loops.push(LoopTargets {
                    cont: head,
                    exit,
                    cont_used: true,
                    exit_used: false,
                });
                self.block(body)?;
                if !self.filled {
                    self.b.ins().jump(head, &[]);
                }
                let t = self.loops.pop().expect("pushed above");
                if t.exit_used {
                    self.b.switch_to_block(exit);
                    self.filled = false;
                } else {
                    self.filled = true;
                }
                vec![]
            }
            InstKind::Break | InstKind::Continue => {
                let is_break = matches!(inst.kind, InstKind::Break);
                let Some(t) = self.loops.last_mut() else {
                    return Err(self.err(h, "break/continue outside a loop"));
                };
                let target = if is_break {
                    t.exit_used = true;
                    t.exit
                } else {
                    t.cont_used = true;
                    t.cont
                };
                self.b.ins().jump(target, &[]);
                self.filled = true;
                vec![]
            }
            InstKind::Return(v) => {
                match self.exit {
                    Exit::Entry { next } => {
                        self.b.ins().jump(next, &[]);
                    }
                    Exit::Helper { retptr } => {
                        if let Some(v) = v {
                            let step = comp_bytes(self.ty(*v));
                            for (k, x) in self.v(*v).into_iter().enumerate() {
                                self.b.ins().store(
                                    MemFlagsData::trusted(),
                                    x,
                                    retptr,
                                    step * k as i32,
                                );
                            }
                        }
                        let zero = self.i32c(0);
                        self.b.ins().return_(&[zero]);
                    }
                }
                self.filled = true;
                vec![]
            }
        };
        if ty != Type::Void {
            if out.len() != ty.components() {
                return Err(self.err(
                    h,
                    &format!("value of type {} lowered to {} components", ty, out.len()),
                ));
            }
            self.vals.insert(h, out);
        }
        Ok(())
    }

    /// A word (I32) reinterpreted as one component of `ty`.
    fn word_as(&mut self, w: Value, ty: Type) -> Value {
        self.retype(w, clif_ty(ty))
    }
    fn retype(&mut self, x: Value, to: ir::Type) -> Value {
        let from = self.b.func.dfg.value_type(x);
        if from == to {
            x
        } else {
            self.b.ins().bitcast(to, MemFlagsData::new(), x)
        }
    }

    /// `(index as i32).clamp(0, len - 1)`.
    /// The address of element `index` (clamped, as the VM does) of shared array `a`.
    fn shared_element(
        &mut self,
        h: InstId,
        a: SharedId,
        index: InstId,
    ) -> Result<Value, CodegenError> {
        let Some(&(base, len)) = self.shared.get(a as usize) else {
            return Err(self.err(h, "a shared array outside the kernel's entry"));
        };
        let n = self
            .env
            .kernel
            .workgroup
            .as_ref()
            .map_or(1, |w| w.arrays[a as usize].ty.components());
        let i = self.v1(index);
        let i = self.clamp_index(i, len as usize);
        let i = self.b.ins().uextend(types::I64, i);
        let off = self.b.ins().imul_imm_s(i, 4 * n as i64);
        Ok(self.b.ins().iadd(base, off))
    }

    fn clamp_index(&mut self, i: Value, len: usize) -> Value {
        let z = self.i32c(0);
        let hi = self.i32c(len.saturating_sub(1) as u32);
        let a = self.b.ins().smax(i, z);
        self.b.ins().smin(a, hi)
    }

    /// Pointer to word `addr` (I32) of `root`; faults when it is outside the buffer.
    fn address(&mut self, root: LayoutId, addr: Value, span: Span) -> Result<Value, CodegenError> {
        let r = self
            .env
            .roots
            .iter()
            .position(|&x| x == root)
            .ok_or_else(|| super::internal(self.env.kernel, "buffer not collected"))?;
        let (base, len) = self.bufs[r];
        let a = self.b.ins().uextend(types::I64, addr);
        if !self.already_checked((addr, (1 << 40) | r as u64)) {
            let bad = self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, a, len);
            let site = self.site(span, FaultKind::Address);
            self.fault_if(bad, site, a);
        }
        let off = self.b.ins().ishl_imm_s(a, 2);
        Ok(self.b.ins().iadd(base, off))
    }

    fn unary(&mut self, op: UnaryOp, s: Scalar, a: Value) -> Value {
        match (op, s) {
            (UnaryOp::Neg, Scalar::F32 | Scalar::F64) => self.b.ins().fneg(a),
            (UnaryOp::Neg, _) => self.b.ins().ineg(a),
            (UnaryOp::Not, Scalar::Bool) if self.vmode => self.b.ins().bnot(a),
            (UnaryOp::Not, Scalar::Bool) => {
                let c = self.b.ins().icmp_imm_s(IntCC::Equal, a, 0);
                self.word(c)
            }
            (UnaryOp::Not, Scalar::F64) => {
                let w = self.retype(a, types::I64);
                let n = self.b.ins().bnot(w);
                self.retype(n, types::F64)
            }
            (UnaryOp::Not, Scalar::F32) => {
                let (ti, tf) = (self.vt(types::I32), self.vt(types::F32));
                let w = self.retype(a, ti);
                let n = self.b.ins().bnot(w);
                self.retype(n, tf)
            }
            (UnaryOp::Not, _) => self.b.ins().bnot(a),
        }
    }

    /// `eval::binary`: `s` is the operand scalar, `rt` the result's Cranelift type.
    fn binary(&mut self, op: BinaryOp, s: Scalar, x: Value, y: Value, rt: ir::Type) -> Value {
        use BinaryOp::*;
        match s {
            Scalar::F32 | Scalar::F64 | Scalar::F16 => match op {
                Add => self.b.ins().fadd(x, y),
                Sub => self.b.ins().fsub(x, y),
                Mul => self.b.ins().fmul(x, y),
                Div => self.b.ins().fdiv(x, y),
                Rem if s == Scalar::F64 => self.call_host("weft_jit_fmod64", &[x, y]),
                Rem => self.call_host("weft_jit_fmod", &[x, y]),
                Eq => self.fcmp(FloatCC::Equal, x, y),
                Ne => self.fcmp(FloatCC::NotEqual, x, y),
                Lt => self.fcmp(FloatCC::LessThan, x, y),
                Le => self.fcmp(FloatCC::LessThanOrEqual, x, y),
                Gt => self.fcmp(FloatCC::GreaterThan, x, y),
                Ge => self.fcmp(FloatCC::GreaterThanOrEqual, x, y),
                _ => self.zero(rt),
            },
            Scalar::I32 | Scalar::U32 | Scalar::I64 | Scalar::U64 => {
                let signed = matches!(s, Scalar::I32 | Scalar::I64);
                match op {
                    Add => self.b.ins().iadd(x, y),
                    Sub => self.b.ins().isub(x, y),
                    Mul => self.b.ins().imul(x, y),
                    Div | Rem => self.division(op == Div, signed, x, y),
                    BitAnd => self.b.ins().band(x, y),
                    BitOr => self.b.ins().bor(x, y),
                    BitXor => self.b.ins().bxor(x, y),
                    Shl => self.b.ins().ishl(x, y),
                    Shr if signed => self.b.ins().sshr(x, y),
                    Shr => self.b.ins().ushr(x, y),
                    Eq => self.icmp(IntCC::Equal, x, y),
                    Ne => self.icmp(IntCC::NotEqual, x, y),
                    Lt if signed => self.icmp(IntCC::SignedLessThan, x, y),
                    Le if signed => self.icmp(IntCC::SignedLessThanOrEqual, x, y),
                    Gt if signed => self.icmp(IntCC::SignedGreaterThan, x, y),
                    Ge if signed => self.icmp(IntCC::SignedGreaterThanOrEqual, x, y),
                    Lt => self.icmp(IntCC::UnsignedLessThan, x, y),
                    Le => self.icmp(IntCC::UnsignedLessThanOrEqual, x, y),
                    Gt => self.icmp(IntCC::UnsignedGreaterThan, x, y),
                    Ge => self.icmp(IntCC::UnsignedGreaterThanOrEqual, x, y),
                    _ => self.zero(rt),
                }
            }
            Scalar::Bool => {
                // Lane bools are already exact masks; scalar words are normalised.
                let (a, b) = if self.vmode {
                    (x, y)
                } else {
                    (self.nz(x), self.nz(y))
                };
                match op {
                    BitAnd | LogicalAnd => self.b.ins().band(a, b),
                    BitOr | LogicalOr => self.b.ins().bor(a, b),
                    BitXor | Ne => self.b.ins().bxor(a, b),
                    Eq => self.icmp(IntCC::Equal, a, b),
                    _ => self.zero(rt),
                }
            }
        }
    }

    /// Native integer division and remainder. `legalize` guarantees the
    /// operands cannot trap (no zero divisor, no `i32::MIN / -1`: the
    /// validator checks every divisor is a safe constant or legalize's
    /// `select`), so Weft's rules for those cases live there, not here.
    fn division(&mut self, div: bool, signed: bool, x: Value, y: Value) -> Value {
        if self.vmode {
            // No vector integer division: one lane at a time.
            return self.per_lane(types::I32, &[x, y], |l, a| {
                l.division(div, signed, a[0], a[1])
            });
        }
        match (div, signed) {
            (true, true) => self.b.ins().sdiv(x, y),
            (true, false) => self.b.ins().udiv(x, y),
            (false, true) => self.b.ins().srem(x, y),
            (false, false) => self.b.ins().urem(x, y),
        }
    }

    /// `eval::cast`.
    fn cast(&mut self, from: Scalar, to: Scalar, a: Value) -> Value {
        if from.is_wide() || to.is_wide() {
            return self.cast_wide(from, to, a);
        }
        match (from, to) {
            (x, y) if x == y => a,
            (Scalar::F32, Scalar::I32) => {
                let t = self.vt(types::I32);
                self.b.ins().fcvt_to_sint_sat(t, a)
            }
            (Scalar::F32, Scalar::U32) => {
                let t = self.vt(types::I32);
                self.b.ins().fcvt_to_uint_sat(t, a)
            }
            (Scalar::I32, Scalar::F32) => {
                let t = self.vt(types::F32);
                self.b.ins().fcvt_from_sint(t, a)
            }
            (Scalar::U32, Scalar::F32) => {
                let t = self.vt(types::F32);
                self.b.ins().fcvt_from_uint(t, a)
            }
            (Scalar::I32, Scalar::U32) | (Scalar::U32, Scalar::I32) => a,
            (Scalar::Bool, Scalar::F32) => {
                let (one, zero) = (self.f32c(1.0), self.f32c(0.0));
                if self.vmode {
                    self.sel(a, one, zero)
                } else {
                    self.b.ins().select(a, one, zero)
                }
            }
            (Scalar::Bool, Scalar::I32 | Scalar::U32) => self.bit01(a),
            (Scalar::F32, Scalar::Bool) => {
                let z = self.f32c(0.0);
                self.fcmp(FloatCC::NotEqual, a, z)
            }
            _ => self.nz(a),
        }
    }

    /// `eval::cast` where either side is 64-bit (never in lanes:
    /// `simd::vectorizable` keeps such kernels scalar).
    fn cast_wide(&mut self, from: Scalar, to: Scalar, a: Value) -> Value {
        use Scalar::*;
        let t = scalar_clif(to);
        match (from, to) {
            (x, y) if x == y => a,
            (I64, U64) | (U64, I64) => a,
            (F32 | F64, I32 | I64) => self.b.ins().fcvt_to_sint_sat(t, a),
            (F32 | F64, U32 | U64) => self.b.ins().fcvt_to_uint_sat(t, a),
            (I32 | I64, F32 | F64) => self.b.ins().fcvt_from_sint(t, a),
            (U32 | U64, F32 | F64) => self.b.ins().fcvt_from_uint(t, a),
            (F32, F64) => self.b.ins().fpromote(t, a),
            (F64, F32) => self.b.ins().fdemote(t, a),
            (I32, I64 | U64) => self.b.ins().sextend(t, a),
            (U32, I64 | U64) => self.b.ins().uextend(t, a),
            (I64 | U64, I32 | U32) => self.b.ins().ireduce(t, a),
            (Bool, F64) => {
                let one = self.b.ins().f64const(Ieee64::with_float(1.0));
                let zero = self.b.ins().f64const(Ieee64::with_float(0.0));
                self.b.ins().select(a, one, zero)
            }
            (Bool, _) => {
                let w = self.bit01(a);
                self.b.ins().uextend(t, w)
            }
            (F64, Bool) => {
                let z = self.b.ins().f64const(Ieee64::with_float(0.0));
                self.fcmp(FloatCC::NotEqual, a, z)
            }
            _ => self.nz(a),
        }
    }

    /// Rust's `f32::min` / `f32::max` (as compiled for the interpreter): a
    /// NaN `x` yields `y`; otherwise `y` when it is strictly smaller (larger), else `x`.
    fn fminmax(&mut self, max: bool, x: Value, y: Value) -> Value {
        let x_nan = self.b.ins().fcmp(FloatCC::Unordered, x, x);
        let cc = if max {
            FloatCC::GreaterThan
        } else {
            FloatCC::LessThan
        };
        let pick_y = self.b.ins().fcmp(cc, y, x);
        let m = self.sel(pick_y, y, x);
        self.sel(x_nan, y, m)
    }

    /// Rust's `f32::clamp(lo, hi)` with constant bounds.
    fn fclamp(&mut self, x: Value, lo: f32, hi: f32) -> Value {
        let (l, h) = (self.fc(x, lo as f64), self.fc(x, hi as f64));
        let below = self.b.ins().fcmp(FloatCC::LessThan, x, l);
        let x = self.sel(below, l, x);
        let above = self.b.ins().fcmp(FloatCC::GreaterThan, x, h);
        self.sel(above, h, x)
    }

    /// `eval::builtin_scalar` on one component.
    fn builtin_scalar(&mut self, b: Builtin, s: Scalar, a: &[Value]) -> Option<Value> {
        use Builtin::*;
        if !s.is_float() {
            let signed = matches!(s, Scalar::I32 | Scalar::I64);
            return Some(match b {
                Abs if signed => self.b.ins().iabs(a[0]),
                Abs => a[0],
                Sign if signed => {
                    let (z, one, m1) = (self.ic(a[0], 0), self.ic(a[0], 1), self.ic(a[0], -1));
                    let pos = self.b.ins().icmp(IntCC::SignedGreaterThan, a[0], z);
                    let neg = self.b.ins().icmp(IntCC::SignedLessThan, a[0], z);
                    let t = self.sel(neg, m1, z);
                    self.sel(pos, one, t)
                }
                Sign => {
                    let b = self.nz(a[0]);
                    let b = self.bit01(b);
                    if s.is_wide() {
                        self.b.ins().uextend(types::I64, b)
                    } else {
                        b
                    }
                }
                Min if signed => self.b.ins().smin(a[0], a[1]),
                Min => self.b.ins().umin(a[0], a[1]),
                Max if signed => self.b.ins().smax(a[0], a[1]),
                Max => self.b.ins().umax(a[0], a[1]),
                Clamp if signed => {
                    let t = self.b.ins().smax(a[0], a[1]);
                    self.b.ins().smin(t, a[2])
                }
                Clamp => {
                    let t = self.b.ins().umax(a[0], a[1]);
                    self.b.ins().umin(t, a[2])
                }
                _ => self.i32c(0),
            });
        }
        if let Some(sym) = math::builtin_symbol(b) {
            // No f64 transcendentals anywhere (`eval::builtin_scalar`).
            if s == Scalar::F64 {
                return None;
            }
            return Some(self.call_host(sym, a));
        }
        let x = a[0];
        Some(match b {
            Abs => self.b.ins().fabs(x),
            Sign => {
                let (z, one, m1) = (self.fc(x, 0.0), self.fc(x, 1.0), self.fc(x, -1.0));
                let pos = self.b.ins().fcmp(FloatCC::GreaterThan, x, z);
                let neg = self.b.ins().fcmp(FloatCC::LessThan, x, z);
                let t = self.sel(neg, m1, z);
                self.sel(pos, one, t)
            }
            Min => self.fminmax(false, x, a[1]),
            Max => self.fminmax(true, x, a[1]),
            Clamp => {
                let t = self.fminmax(true, x, a[1]);
                self.fminmax(false, t, a[2])
            }
            Saturate => self.fclamp(x, 0.0, 1.0),
            Floor => self.b.ins().floor(x),
            Ceil => self.b.ins().ceil(x),
            Round => self.b.ins().nearest(x),
            Trunc => self.b.ins().trunc(x),
            Fract => {
                let fl = self.b.ins().floor(x);
                self.b.ins().fsub(x, fl)
            }
            Sqrt => self.b.ins().sqrt(x),
            Rsqrt => {
                let one = self.fc(x, 1.0);
                let r = self.b.ins().sqrt(x);
                self.b.ins().fdiv(one, r)
            }
            Lerp => {
                let d = self.b.ins().fsub(a[1], x);
                let m = self.b.ins().fmul(d, a[2]);
                self.b.ins().fadd(x, m)
            }
            Smoothstep => {
                let num = self.b.ins().fsub(a[2], x);
                let den = self.b.ins().fsub(a[1], x);
                let q = self.b.ins().fdiv(num, den);
                let t = self.fclamp(q, 0.0, 1.0);
                let tt = self.b.ins().fmul(t, t);
                let (two, three) = (self.fc(x, 2.0), self.fc(x, 3.0));
                let t2 = self.b.ins().fmul(two, t);
                let r = self.b.ins().fsub(three, t2);
                self.b.ins().fmul(tt, r)
            }
            Step => {
                let (z, one) = (self.fc(x, 0.0), self.fc(x, 1.0));
                let lt = self.b.ins().fcmp(FloatCC::LessThan, a[1], x);
                self.sel(lt, z, one)
            }
            Fma => self.b.ins().fma(x, a[1], a[2]),
            _ => return None,
        })
    }

    /// Σ products in the interpreter's order (`Iterator::sum` folds from -0.0,
    /// which leaves the first term exact).
    fn fsum(&mut self, terms: &[Value]) -> Value {
        let mut acc = terms[0];
        for &t in &terms[1..] {
            acc = self.b.ins().fadd(acc, t);
        }
        acc
    }
    fn fdot(&mut self, a: &[Value], b: &[Value]) -> Value {
        let p: Vec<Value> = a
            .iter()
            .zip(b)
            .map(|(x, y)| self.b.ins().fmul(*x, *y))
            .collect();
        self.fsum(&p)
    }

    fn det(&mut self, m: &[Value], n: usize) -> Value {
        match n {
            1 => m[0],
            2 => {
                let a = self.b.ins().fmul(m[0], m[3]);
                let c = self.b.ins().fmul(m[2], m[1]);
                self.b.ins().fsub(a, c)
            }
            _ => {
                let terms: Vec<Value> = (0..n)
                    .map(|c| {
                        let sign = self.f32c(if c % 2 == 0 { 1.0 } else { -1.0 });
                        let sm = self.b.ins().fmul(sign, m[c * n]);
                        let minor = minor(m, n, 0, c);
                        let d = self.det(&minor, n - 1);
                        self.b.ins().fmul(sm, d)
                    })
                    .collect();
                self.fsum(&terms)
            }
        }
    }

    fn builtin(&mut self, b: Builtin, at: Type, a: &[Vec<Value>]) -> Option<Vec<Value>> {
        use Builtin::*;
        let n = at.components();
        let wise = matches!(
            b.shape(),
            builtins::Shape::FloatWise(_) | builtins::Shape::NumericWise(_)
        ) && !matches!(b, Normalize | Reflect);
        if wise {
            let s = at.scalar()?;
            return (0..n)
                .map(|c| {
                    let args: Vec<Value> = a.iter().map(|v| v[c]).collect();
                    self.builtin_scalar(b, s, &args)
                })
                .collect();
        }
        Some(match b {
            Length => vec![{
                let d = self.fdot(&a[0], &a[0]);
                self.b.ins().sqrt(d)
            }],
            Distance => {
                let d: Vec<Value> = (0..n)
                    .map(|k| self.b.ins().fsub(a[0][k], a[1][k]))
                    .collect();
                let s = self.fdot(&d, &d);
                vec![self.b.ins().sqrt(s)]
            }
            Normalize => {
                let d = self.fdot(&a[0], &a[0]);
                let r = self.b.ins().sqrt(d);
                let one = self.fc(d, 1.0);
                let inv = self.b.ins().fdiv(one, r);
                a[0].iter().map(|x| self.b.ins().fmul(*x, inv)).collect()
            }
            Dot => match at.scalar()? {
                Scalar::F32 | Scalar::F64 => vec![self.fdot(&a[0], &a[1])],
                _ => {
                    let mut acc = self.ic(a[0][0], 0);
                    for (x, y) in a[0].iter().zip(&a[1]) {
                        let p = self.b.ins().imul(*x, *y);
                        acc = self.b.ins().iadd(acc, p);
                    }
                    vec![acc]
                }
            },
            Cross => {
                let (x, y) = (&a[0], &a[1]);
                let mut c = |i: usize, j: usize| {
                    let p = self.b.ins().fmul(x[i], y[j]);
                    let q = self.b.ins().fmul(x[j], y[i]);
                    self.b.ins().fsub(p, q)
                };
                vec![c(1, 2), c(2, 0), c(0, 1)]
            }
            Reflect => {
                let two = self.fc(a[0][0], 2.0);
                let dt = self.fdot(&a[1], &a[0]);
                let d = self.b.ins().fmul(two, dt);
                (0..n)
                    .map(|k| {
                        let p = self.b.ins().fmul(d, a[1][k]);
                        self.b.ins().fsub(a[0][k], p)
                    })
                    .collect()
            }
            Outer => {
                let mut m = Vec::with_capacity(n * n);
                for j in 0..n {
                    for i in 0..n {
                        m.push(self.b.ins().fmul(a[0][i], a[1][j]));
                    }
                }
                m
            }
            Transpose => {
                let Type::Matrix(k) = at else { return None };
                let k = k as usize;
                (0..k * k).map(|i| a[0][(i % k) * k + i / k]).collect()
            }
            Determinant => {
                let Type::Matrix(k) = at else { return None };
                vec![self.det(&a[0], k as usize)]
            }
            Inverse => {
                let Type::Matrix(k) = at else { return None };
                let k = k as usize;
                let m = &a[0];
                let d = self.det(m, k);
                let mut inv = vec![d; k * k];
                for c in 0..k {
                    for row in 0..k {
                        let sign = self.f32c(if (row + c) % 2 == 0 { 1.0 } else { -1.0 });
                        let mi = minor(m, k, c, row);
                        let cof = self.det(&mi, k - 1);
                        let sc = self.b.ins().fmul(sign, cof);
                        inv[c * k + row] = self.b.ins().fdiv(sc, d);
                    }
                }
                inv
            }
            IsNan => a[0]
                .iter()
                .map(|x| self.fcmp(FloatCC::Unordered, *x, *x))
                .collect(),
            IsInf => a[0]
                .iter()
                .map(|x| {
                    let ab = self.b.ins().fabs(*x);
                    let inf = self.fc(*x, f64::INFINITY);
                    self.fcmp(FloatCC::Equal, ab, inf)
                })
                .collect(),
            Any | All => {
                let bits: Vec<Value> = a[0].iter().map(|x| self.nz(*x)).collect();
                let mut acc = bits[0];
                for &x in &bits[1..] {
                    acc = if b == Any {
                        self.b.ins().bor(acc, x)
                    } else {
                        self.b.ins().band(acc, x)
                    };
                }
                vec![acc]
            }
            _ => return None,
        })
    }

    fn matmul(&mut self, a: &[Value], b: &[Value], at: Type, bt: Type) -> Option<Vec<Value>> {
        Some(match (at, bt) {
            (Type::Matrix(n), Type::Vector(_, _)) => {
                let n = n as usize;
                (0..n)
                    .map(|i| {
                        let p: Vec<Value> = (0..n)
                            .map(|k| self.b.ins().fmul(a[k * n + i], b[k]))
                            .collect();
                        self.fsum(&p)
                    })
                    .collect()
            }
            (Type::Vector(_, _), Type::Matrix(n)) => {
                let n = n as usize;
                (0..n)
                    .map(|j| {
                        let col = b[j * n..j * n + n].to_vec();
                        self.fdot(a, &col)
                    })
                    .collect()
            }
            (Type::Matrix(n), Type::Matrix(_)) => {
                let n = n as usize;
                let mut out = vec![a[0]; n * n];
                for j in 0..n {
                    for i in 0..n {
                        let p: Vec<Value> = (0..n)
                            .map(|k| self.b.ins().fmul(a[k * n + i], b[j * n + k]))
                            .collect();
                        out[j * n + i] = self.fsum(&p);
                    }
                }
                out
            }
            _ => return None,
        })
    }

    /// Read-modify-write with the interpreter's semantics; returns the old value.
    fn atomic(&mut self, op: AtomicOp, s: Scalar, p: Value, v: Value, cmp: Option<Value>) -> Value {
        let fl = MemFlagsData::trusted();
        let vi = self.retype(v, types::I32);
        let rt = scalar_clif(s);
        let old = match (op, s) {
            (AtomicOp::Exchange, _) => {
                self.b
                    .ins()
                    .atomic_rmw(types::I32, fl, AtomicRmwOp::Xchg, p, vi)
            }
            (AtomicOp::CompareExchange, _) => {
                let c = cmp.unwrap_or(vi);
                let ci = self.retype(c, types::I32);
                self.b.ins().atomic_cas(fl, p, ci, vi)
            }
            (_, Scalar::F32) => self.float_add(op == AtomicOp::Sub, p, v),
            (AtomicOp::Add, _) => self
                .b
                .ins()
                .atomic_rmw(types::I32, fl, AtomicRmwOp::Add, p, vi),
            (AtomicOp::Sub, _) => self
                .b
                .ins()
                .atomic_rmw(types::I32, fl, AtomicRmwOp::Sub, p, vi),
            (AtomicOp::Min, Scalar::I32) => {
                self.b
                    .ins()
                    .atomic_rmw(types::I32, fl, AtomicRmwOp::Smin, p, vi)
            }
            (AtomicOp::Max, Scalar::I32) => {
                self.b
                    .ins()
                    .atomic_rmw(types::I32, fl, AtomicRmwOp::Smax, p, vi)
            }
            (AtomicOp::Min, _) => self
                .b
                .ins()
                .atomic_rmw(types::I32, fl, AtomicRmwOp::Umin, p, vi),
            (AtomicOp::Max, _) => self
                .b
                .ins()
                .atomic_rmw(types::I32, fl, AtomicRmwOp::Umax, p, vi),
            (AtomicOp::And, _) => self
                .b
                .ins()
                .atomic_rmw(types::I32, fl, AtomicRmwOp::And, p, vi),
            (AtomicOp::Or, _) => self
                .b
                .ins()
                .atomic_rmw(types::I32, fl, AtomicRmwOp::Or, p, vi),
            (AtomicOp::Xor, _) => self
                .b
                .ins()
                .atomic_rmw(types::I32, fl, AtomicRmwOp::Xor, p, vi),
        };
        self.retype(old, rt)
    }

    /// The same read-modify-write as `atomic`, as a plain load and store: for
    /// memory no other thread touches during the launch (one thread runs it,
    /// or the buffer is this thread's private copy).
    fn plain_rmw(
        &mut self,
        op: AtomicOp,
        s: Scalar,
        p: Value,
        v: Value,
        cmp: Option<Value>,
    ) -> Value {
        let fl = MemFlagsData::trusted();
        if s == Scalar::F32 && matches!(op, AtomicOp::Add | AtomicOp::Sub) {
            // The scatter-add of particle codes: stay in float registers.
            let old = self.b.ins().load(types::F32, fl, p, 0);
            let new = if op == AtomicOp::Add {
                self.b.ins().fadd(old, v)
            } else {
                self.b.ins().fsub(old, v)
            };
            self.b.ins().store(fl, new, p, 0);
            return old;
        }
        let vi = self.retype(v, types::I32);
        let old = self.b.ins().load(types::I32, fl, p, 0);
        let signed = s == Scalar::I32;
        let new = match (op, s) {
            (AtomicOp::Exchange, _) => vi,
            (AtomicOp::CompareExchange, _) => {
                let c = cmp.unwrap_or(vi);
                let ci = self.retype(c, types::I32);
                let eq = self.b.ins().icmp(IntCC::Equal, old, ci);
                self.b.ins().select(eq, vi, old)
            }
            (AtomicOp::Add, _) => self.b.ins().iadd(old, vi),
            (AtomicOp::Sub, _) => self.b.ins().isub(old, vi),
            (AtomicOp::Min, _) if signed => self.b.ins().smin(old, vi),
            (AtomicOp::Max, _) if signed => self.b.ins().smax(old, vi),
            (AtomicOp::Min, _) => self.b.ins().umin(old, vi),
            (AtomicOp::Max, _) => self.b.ins().umax(old, vi),
            (AtomicOp::And, _) => self.b.ins().band(old, vi),
            (AtomicOp::Or, _) => self.b.ins().bor(old, vi),
            (AtomicOp::Xor, _) => self.b.ins().bxor(old, vi),
        };
        self.b.ins().store(fl, new, p, 0);
        self.retype(old, scalar_clif(s))
    }

    /// f32 atomic add (`sub`: subtract) as the hardware's compare-exchange
    /// loop on the bits (CAPS: the only f32 atomic this backend takes);
    /// returns the old word.
    fn float_add(&mut self, sub: bool, p: Value, v: Value) -> Value {
        let fl = MemFlagsData::trusted();
        let cur0 = self.b.ins().atomic_load(types::I32, fl, p);
        let lp = self.b.create_block();
        let done = self.b.create_block();
        self.b.append_block_param(lp, types::I32);
        self.b.append_block_param(done, types::I32);
        self.b.ins().jump(lp, &[cur0.into()]);
        self.b.switch_to_block(lp);
        let cur = self.b.block_params(lp)[0];
        let cf = self.retype(cur, types::F32);
        let new = if sub {
            self.b.ins().fsub(cf, v)
        } else {
            self.b.ins().fadd(cf, v)
        };
        let ni = self.retype(new, types::I32);
        let old = self.b.ins().atomic_cas(fl, p, cur, ni);
        let ok = self.b.ins().icmp(IntCC::Equal, old, cur);
        self.b
            .ins()
            .brif(ok, done, &[old.into()], lp, &[old.into()]);
        self.b.switch_to_block(done);
        self.b.block_params(done)[0]
    }

    fn lower_if(
        &mut self,
        cond: Value,
        accept: &Block,
        reject: &Block,
    ) -> Result<(), CodegenError> {
        let then_b = self.b.create_block();
        let merge = self.b.create_block();
        let else_b = if reject.is_empty() {
            merge
        } else {
            self.b.create_block()
        };
        self.b.ins().brif(cond, then_b, &[], else_b, &[]);
        let mut merge_used = reject.is_empty();
        self.b.switch_to_block(then_b);
        self.filled = false;
        self.block(accept)?;
        if !self.filled {
            self.b.ins().jump(merge, &[]);
            merge_used = true;
        }
        if !reject.is_empty() {
            self.b.switch_to_block(else_b);
            self.filled = false;
            self.block(reject)?;
            if !self.filled {
                self.b.ins().jump(merge, &[]);
                merge_used = true;
            }
        }
        if merge_used {
            self.b.switch_to_block(merge);
            self.filled = false;
        } else {
            self.filled = true;
        }
        Ok(())
    }

    fn call(
        &mut self,
        h: InstId,
        fid: FuncId_,
        args: &[InstId],
    ) -> Result<Vec<Value>, CodegenError> {
        let idx = fid.index();
        let id = self
            .env
            .helper_ids
            .get(idx)
            .copied()
            .flatten()
            .ok_or_else(|| self.err(h, "call of an unknown helper"))?;
        let fref = match self.helper_refs.get(&idx) {
            Some(r) => *r,
            None => {
                let r = self.module.declare_func_in_func(id, self.b.func);
                self.helper_refs.insert(idx, r);
                r
            }
        };
        let too_deep = self.b.ins().icmp_imm_s(
            IntCC::SignedGreaterThanOrEqual,
            self.depth,
            MAX_CALL_DEPTH as i64,
        );
        let site = self.site(Span::default(), FaultKind::CallDepth);
        let z = self.b.ins().iconst(types::I64, 0);
        self.fault_if(too_deep, site, z);
        let ty = self.ty(h);
        let n = ty.components();
        let step = comp_bytes(ty);
        let slot = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            (step as usize * n.max(1)) as u32,
            if step == 8 { 3 } else { 2 },
        ));
        let retptr = self.b.ins().stack_addr(types::I64, slot, 0);
        let rt = clif_ty(ty);
        for k in 0..n {
            let zero = self.zero(rt);
            self.b
                .ins()
                .stack_store(types::I64, zero, slot, step * k as i32);
        }
        let d1 = self.b.ins().iadd_imm_s(self.depth, 1);
        let mut cargs = vec![self.ctx, self.fault, self.rng, d1, retptr];
        for a in args {
            cargs.extend(self.v(*a));
        }
        let c = self.b.ins().call(fref, &cargs);
        let status = self.b.inst_results(c)[0];
        let ok = self.b.create_block();
        self.b.ins().brif(status, self.fail, &[], ok, &[]);
        self.b.switch_to_block(ok);
        Ok((0..n)
            .map(|k| {
                self.b
                    .ins()
                    .stack_load(types::I64, rt, slot, step * k as i32)
            })
            .collect())
    }
}

type FuncId_ = weft_ir::ir::FuncId;

/// The (n-1)×(n-1) matrix without row `row` and column `col` (column-major).
fn minor(m: &[Value], n: usize, row: usize, col: usize) -> Vec<Value> {
    let mut out = Vec::with_capacity((n - 1) * (n - 1));
    for c in (0..n).filter(|&c| c != col) {
        for r in (0..n).filter(|&r| r != row) {
            out.push(m[c * n + r]);
        }
    }
    out
}
