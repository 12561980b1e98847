//! IR → native code with Cranelift, for the compiled CPU backend (`jit`).
//!
//! Pre: a kernel that passed the lowered-IR validator (only `BufLoad` /
//! `BufStore` / `BufAtomic` field access). Post: a [`JitKernel`] holding
//! machine code for one *chunk function* per kernel plus one native function
//! per helper that the inliner kept.
//!
//! The chunk function runs the loop iterations `start..end` (linear,
//! row-major indices of the kernel's range) one after another; the runtime
//! splits a launch into chunks over rayon's pool. Where the kernel allows
//! (`lower/simd.rs`), the chunk function runs four consecutive iterations
//! at once on 128-bit lanes and leaves only the ragged ends to the scalar
//! code; `JitKernel::lanes` says whether it does. Its ABI is
//! [`ChunkFn`]: it reads buffers, parameters, frame and seed from a
//! [`JitCtx`] and returns 0, or 1 after writing a [`JitFault`] naming one of
//! [`JitKernel::sites`]: the kernel's own `Kernel::fault_sites` (a `Trap`
//! stores its site number as it is) followed by the address and call-depth
//! sites this backend adds. Every message is worded by
//! `weft_ir::ir::FaultSite::message`.
//!
//! Meaning: every operation computes exactly what the reference interpreter
//! computes (`weft_ir::ir::eval` and `weft_runtime::cpu::interp`): same
//! integer wrap/division rules, saturating float→int casts, f32 min/max with
//! Rust's NaN rules, the same summation order in dot products and matrix
//! products, the same random-number stream, and transcendental functions
//! through the very Rust functions the interpreter calls (`math`). So
//! kernels without float atomics give bit-identical fields.
//!
//! Safety: every buffer access checks its word address against the buffer's
//! length and faults (`FaultKind::Address`, never touching memory outside
//! the buffer) when it is out of range, whether or not the pipeline added
//! bounds checks. With bounds checks (the default), `legalize` has already
//! turned them into `Trap`s, so a bad index is reported like the
//! interpreter does: node, code line and the index. The JIT never expands a
//! `BoundsCheck` itself; it refuses one, like every backend.
//!
//! Errors: a construct this backend cannot compile, a Cranelift verifier or
//! code generation failure, even a panic inside Cranelift, becomes a
//! `CodegenError` naming the kernel; it never takes the process down.

mod lower;
mod math;

use crate::CodegenError;
use cranelift_codegen::ir::{types, AbiParam, Signature};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, FuncId, Linkage, Module};
use std::collections::HashMap;
use weft_ir::ir::*;

/// What this backend executes natively. f32 atomic add/sub stays one
/// operation so that the `Serial` and `Private` variants can make a
/// scatter-add (the particle-to-grid transfer) a plain float add; in the
/// `Atomic` variant it is x86's and AArch64's compare-exchange loop, as a
/// GPU driver lowers it. f32 min/max arrives as `legalize`'s loop.
pub const CAPS: weft_ir::ir::target::TargetCaps = weft_ir::ir::target::TargetCaps {
    f32_atomic_add: true,
    f32_atomic_add_beside_other_atomics: true,
    f32_atomic_min_max: false,
    i32_atomic_min_max: true,
    workgroups: false,
    ..weft_ir::ir::target::TargetCaps::BASELINE
};

/// What a launch hands to the chunk function (`#[repr(C)]`, read by generated code).
#[repr(C)]
#[derive(Debug)]
pub struct JitCtx {
    /// Base pointer of each buffer, in `JitKernel::roots` order.
    pub buffers: *const *mut u32,
    /// Length in words of each buffer, same order.
    pub lens: *const u64,
    /// Kernel parameters, one word each.
    pub params: *const u32,
    pub frame: i32,
    pub seed: u32,
    /// Earlier launches of this kernel in the run (feeds `random()`).
    pub launch_index: u32,
    pub _pad: u32,
}

/// Written by generated code when an iteration faults.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct JitFault {
    /// Index into `JitKernel::sites`.
    pub site: u32,
    pub _pad: u32,
    /// The offending value (an index, a step, a word address).
    pub value: i64,
}

/// `fn(ctx, start, end, fault) -> status`: runs iterations `start..end`.
pub type ChunkFn = unsafe extern "C" fn(*const JitCtx, u64, u64, *mut JitFault) -> u32;

/// Offsets of `JitCtx` fields, as generated code reads them.
pub(crate) mod ctx_offsets {
    pub const BUFFERS: i32 = 0;
    pub const LENS: i32 = 8;
    pub const PARAMS: i32 = 16;
    pub const FRAME: i32 = 24;
    pub const SEED: i32 = 28;
    pub const LAUNCH: i32 = 32;
}

/// Options of the JIT.
#[derive(Clone, Debug)]
pub struct JitOptions {
    /// Cranelift's optimiser (egraph: GVN, LICM, constant folding); off compiles faster.
    pub optimize: bool,
    /// Run Cranelift's IR verifier on every function (slow: about 3× the
    /// compile time; the JIT's own tests turn it on).
    pub verify: bool,
    /// Run four iterations at once on 128-bit lanes where the kernel allows
    /// (`lower/simd.rs`). On by default; `WEFT_JIT_SIMD=0` in the
    /// environment turns it off (to measure what it gains).
    pub simd: bool,
}

impl Default for JitOptions {
    fn default() -> Self {
        JitOptions {
            optimize: true,
            verify: false,
            simd: std::env::var("WEFT_JIT_SIMD").map_or(true, |v| v != "0"),
        }
    }
}

/// The module owning the machine code; freed when the kernel is dropped.
struct CodeOwner(Option<JITModule>);

// SAFETY: after `finalize_definitions` the module is never mutated again;
// it only owns executable memory that is freed once, on drop.
unsafe impl Send for CodeOwner {}
unsafe impl Sync for CodeOwner {}

impl Drop for CodeOwner {
    fn drop(&mut self) {
        if let Some(m) = self.0.take() {
            // SAFETY: the only pointers into this memory are the `JitKernel`'s
            // function pointers, which are dropped with it.
            unsafe { m.free_memory() };
        }
    }
}

/// A compiled kernel.
pub struct JitKernel {
    pub name: String,
    /// `Kernel::fused`: the nodes errors name by `Span::part`.
    pub fused: Vec<String>,
    /// Root layout of each `JitCtx::buffers` entry.
    pub roots: Vec<LayoutId>,
    /// `Kernel::fault_sites`, then the sites the JIT added (word addresses
    /// out of range, helper calls too deep).
    pub sites: Vec<FaultSite>,
    /// The kernel's iteration shape (baked into the code).
    pub shape: Vec<u32>,
    /// Indices (into `roots`) of the buffers that [`JitKernel::private_fn`]
    /// accumulates into thread-private copies, and whether each holds f32
    /// words (else integer words): reduce with float or wrapping integer adds.
    pub private: Vec<(usize, bool)>,
    /// Rough instructions per iteration (loops count as 16 trips), so the
    /// runtime can keep launches too small to pay for waking workers on the
    /// calling thread.
    pub cost: u64,
    /// The parallel chunk function (the privatised one where there is one)
    /// runs four iterations at a time on 128-bit lanes (`lower/simd.rs`),
    /// the scalar code doing only ragged ends.
    pub lanes: bool,
    chunk: ChunkFn,
    serial: Option<ChunkFn>,
    private_chunk: Option<ChunkFn>,
    _code: CodeOwner,
}

impl std::fmt::Debug for JitKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "JitKernel({})", self.name)
    }
}

impl JitKernel {
    /// The chunk function: safe on any number of threads (real atomics).
    pub fn chunk_fn(&self) -> ChunkFn {
        self.chunk
    }
    /// The chunk function for a launch that one thread runs from start to
    /// end: every atomic is a plain read-modify-write (atomic demotion).
    /// Same results as the interpreter on one thread, float atomics included.
    pub fn serial_fn(&self) -> ChunkFn {
        self.serial.unwrap_or(self.chunk)
    }
    /// Scatter privatisation: the chunk function in which the atomics on the
    /// `private` buffers are plain adds. Valid only when each thread passes
    /// its own copy (filled with the identity of its adds) of those buffers; the runtime then adds the copies
    /// into the shared buffer. `None` when no buffer qualifies.
    pub fn private_fn(&self) -> Option<ChunkFn> {
        self.private_chunk
    }
}

/// How a variant of the kernel emits atomics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Variant {
    /// Real atomics everywhere.
    Atomic,
    /// Plain read-modify-writes everywhere (one thread runs the launch).
    Serial,
    /// Plain read-modify-writes on the privatised roots only.
    Private,
}

/// Calls `visit` on every instruction reachable from `block`, nested blocks included.
fn walk(f: &Function, block: &Block, visit: &mut dyn FnMut(InstId, &Inst)) {
    for &h in block {
        let inst = &f.insts[h];
        visit(h, inst);
        for b in inst.kind.blocks() {
            walk(f, b, visit);
        }
    }
}

fn all_functions(kernel: &Kernel) -> impl Iterator<Item = &Function> {
    std::iter::once(&kernel.entry).chain(kernel.functions.iter().map(|(_, f)| f))
}

/// Roots that every instruction of the kernel touches only with atomic
/// add/sub whose old value is never used, and whose fields all have one
/// scalar class (f32, or i32/u32): their updates commute, so each thread may
/// accumulate into a private copy (starting at the adds' identity) that is added in afterwards.
/// Returns (root, holds floats).
fn privatisable_roots(
    program: &Program,
    kernel: &Kernel,
    roots: &[LayoutId],
) -> Vec<(LayoutId, bool)> {
    let mut out = Vec::new();
    for &r in roots {
        let mut ok = true;
        let mut class: Option<bool> = None;
        for f in all_functions(kernel) {
            let mut used = std::collections::HashSet::new();
            walk(f, &f.body, &mut |_, i| used.extend(i.kind.operands()));
            walk(f, &f.body, &mut |h, i| match &i.kind {
                InstKind::BufLoad { root, .. } | InstKind::BufStore { root, .. } if *root == r => {
                    ok = false
                }
                InstKind::BufAtomic { op, root, .. } if *root == r => {
                    let float = match i.ty.scalar() {
                        Some(weft_ir::types::Scalar::F32) => true,
                        Some(weft_ir::types::Scalar::I32 | weft_ir::types::Scalar::U32) => false,
                        _ => {
                            ok = false;
                            return;
                        }
                    };
                    if !matches!(op, AtomicOp::Add | AtomicOp::Sub)
                        || used.contains(&h)
                        || class.is_some_and(|c| c != float)
                    {
                        ok = false;
                    }
                    class = Some(float);
                }
                _ => {}
            });
        }
        let Some(float) = class else { continue };
        let fields_match = program
            .fields
            .iter()
            .filter(|(_, fd)| weft_ir::ir::layout::root_of(program, fd.layout) == r)
            .all(|(_, fd)| match fd.ty.scalar() {
                Some(weft_ir::types::Scalar::F32) => float,
                Some(weft_ir::types::Scalar::I32 | weft_ir::types::Scalar::U32) => !float,
                _ => false,
            });
        if ok && fields_match {
            out.push((r, float));
        }
    }
    out
}

/// Compiles one kernel. Never panics: Cranelift failures (even panics) come
/// back as a `CodegenError` naming the kernel.
pub fn compile_kernel(
    program: &Program,
    kernel: &Kernel,
    opts: &JitOptions,
) -> Result<JitKernel, CodegenError> {
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        compile_inner(program, kernel, opts)
    }));
    match run {
        Ok(r) => r,
        Err(p) => {
            let what = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(internal(
                kernel,
                &format!("code generator panicked: {}", what),
            ))
        }
    }
}

pub(crate) fn internal(kernel: &Kernel, message: &str) -> CodegenError {
    CodegenError {
        kernel: kernel.name.clone(),
        backend: "jit",
        message: format!("internal error: {}", message),
    }
}

/// Roots used by any function of the kernel, in first-use order.
fn collect_roots(kernel: &Kernel) -> Vec<LayoutId> {
    let mut roots = Vec::new();
    for f in all_functions(kernel) {
        for (_, inst) in f.insts.iter() {
            if let InstKind::BufLoad { root, .. }
            | InstKind::BufStore { root, .. }
            | InstKind::BufAtomic { root, .. } = inst.kind
            {
                if !roots.contains(&root) {
                    roots.push(root);
                }
            }
        }
    }
    roots
}

/// Instructions per iteration over every function of the kernel, a loop
/// body weighing 16 times its size (trip counts are rarely known here).
fn cost_estimate(kernel: &Kernel) -> u64 {
    let loops = all_functions(kernel).any(|f| {
        f.insts
            .iter()
            .any(|(_, i)| matches!(i.kind, InstKind::Loop { .. } | InstKind::RangeFor { .. }))
    });
    let insts: u64 = all_functions(kernel).map(|f| f.insts.len() as u64).sum();
    if loops {
        insts * 16
    } else {
        insts
    }
}

/// Which helpers the entry can reach through calls (the inliner leaves
/// inlined helpers behind; they are not compiled).
fn live_helpers(kernel: &Kernel) -> Vec<bool> {
    let mut live = vec![false; kernel.functions.len()];
    let mut work = vec![&kernel.entry];
    while let Some(f) = work.pop() {
        walk(f, &f.body, &mut |_, i| {
            if let InstKind::Call(c, _) = i.kind {
                if !live[c.index()] {
                    live[c.index()] = true;
                    work.push(&kernel.functions[c]);
                }
            }
        });
    }
    live
}

fn has_atomics(kernel: &Kernel) -> bool {
    all_functions(kernel).any(|f| {
        let mut any = false;
        walk(f, &f.body, &mut |_, i| {
            any |= matches!(i.kind, InstKind::BufAtomic { .. })
        });
        any
    })
}

/// The native signature of a helper: (ctx, fault, rng, depth, retptr, args…) -> status.
fn helper_signature(module: &JITModule, f: &Function) -> Signature {
    let mut sig = module.make_signature();
    for t in [types::I64, types::I64, types::I64] {
        sig.params.push(AbiParam::new(t));
    }
    sig.params.push(AbiParam::new(types::I32));
    sig.params.push(AbiParam::new(types::I64));
    for a in &f.args {
        for _ in 0..a.components() {
            sig.params.push(AbiParam::new(lower::clif_ty(*a)));
        }
    }
    sig.returns.push(AbiParam::new(types::I32));
    sig
}

/// `ChunkFn`'s signature: (ctx, start, end, fault) -> status.
fn chunk_sig_of(module: &JITModule) -> Signature {
    let mut sig = module.make_signature();
    for t in [types::I64, types::I64, types::I64, types::I64] {
        sig.params.push(AbiParam::new(t));
    }
    sig.returns.push(AbiParam::new(types::I32));
    sig
}

fn compile_inner(
    program: &Program,
    kernel: &Kernel,
    opts: &JitOptions,
) -> Result<JitKernel, CodegenError> {
    let err = |m: String| internal(kernel, &m);
    let mut flags = settings::builder();
    let set = |flags: &mut settings::Builder, k: &str, v: &str| {
        flags
            .set(k, v)
            .map_err(|e| err(format!("setting {}: {}", k, e)))
    };
    set(&mut flags, "use_colocated_libcalls", "false")?;
    set(&mut flags, "is_pic", "false")?;
    set(
        &mut flags,
        "opt_level",
        if opts.optimize { "speed" } else { "none" },
    )?;
    set(
        &mut flags,
        "enable_verifier",
        if opts.verify { "true" } else { "false" },
    )?;
    let isa_builder =
        cranelift_native::builder().map_err(|m| err(format!("host not supported: {}", m)))?;
    let isa = isa_builder
        .finish(settings::Flags::new(flags))
        .map_err(|e| err(format!("target: {}", e)))?;
    let mut jb = JITBuilder::with_isa(isa, default_libcall_names());
    let hosts = math::host_functions();
    for h in &hosts {
        jb.symbol(h.name, h.ptr);
    }
    let mut module = JITModule::new(jb);

    let mut host_ids: HashMap<&'static str, FuncId> = HashMap::new();
    for h in &hosts {
        let mut sig = module.make_signature();
        let t = if h.wide { types::F64 } else { types::F32 };
        for _ in 0..h.arity {
            sig.params.push(AbiParam::new(t));
        }
        sig.returns.push(AbiParam::new(t));
        let id = module
            .declare_function(h.name, Linkage::Import, &sig)
            .map_err(|e| err(format!("declaring {}: {}", h.name, e)))?;
        host_ids.insert(h.name, id);
    }

    let roots = collect_roots(kernel);
    let shape = kernel.iteration_shape(program);
    // A `Trap` names its site in the kernel's list; the JIT's own sites follow.
    let mut sites: Vec<FaultSite> = kernel.fault_sites.clone();

    let private = privatisable_roots(program, kernel, &roots);
    let private_roots: Vec<LayoutId> = private.iter().map(|(r, _)| *r).collect();
    let mut variants = vec![Variant::Atomic];
    if has_atomics(kernel) {
        variants.push(Variant::Serial);
    }
    if !private.is_empty() {
        variants.push(Variant::Private);
    }
    let mut ctx = module.make_context();
    let mut fctx = cranelift_frontend::FunctionBuilderContext::new();
    let live = live_helpers(kernel);
    let mut chunk_ids = Vec::new();
    let mut lanes = false;
    for (vi, &variant) in variants.iter().enumerate() {
        // Declare every helper first so that any function can call any other.
        let mut helper_ids = Vec::new();
        for (h, f) in kernel.functions.iter() {
            if !live[h.index()] {
                helper_ids.push(None);
                continue;
            }
            let sig = helper_signature(&module, f);
            let id = module
                .declare_function(
                    &format!("v{}_helper{}", vi, h.index()),
                    Linkage::Local,
                    &sig,
                )
                .map_err(|e| err(format!("declaring helper '{}': {}", f.name, e)))?;
            helper_ids.push(Some(id));
        }
        let chunk_sig = chunk_sig_of(&module);
        let chunk_id = module
            .declare_function(&format!("v{}_chunk", vi), Linkage::Local, &chunk_sig)
            .map_err(|e| err(format!("declaring the chunk function: {}", e)))?;
        let mut env = lower::Env {
            variant,
            private_roots: &private_roots,
            kernel,
            roots: &roots,
            sites: &mut sites,
            host_ids: &host_ids,
            helper_ids: &helper_ids,
        };
        for (i, (_, f)) in kernel.functions.iter().enumerate() {
            let Some(id) = helper_ids[i] else { continue };
            ctx.func.signature = helper_signature(&module, f);
            lower::build_helper(&mut module, &mut env, &mut ctx.func, &mut fctx, f)?;
            module
                .define_function(id, &mut ctx)
                .map_err(|e| err(format!("helper '{}': {:?}", f.name, e)))?;
            module.clear_context(&mut ctx);
        }
        ctx.func.signature = chunk_sig;
        lower::build_chunk(&mut module, &mut env, &mut ctx.func, &mut fctx, &shape)?;
        // `WEFT_JIT_DISASM=<kernel node id>` prints the machine code of that
        // kernel's chunk functions on stderr (for performance work).
        let disasm = std::env::var("WEFT_JIT_DISASM").ok() == Some(kernel.name.clone());
        ctx.set_disasm(disasm);
        module
            .define_function(chunk_id, &mut ctx)
            .map_err(|e| err(format!("kernel body: {:?}", e)))?;
        if let Some(code) = ctx.compiled_code().filter(|_| disasm) {
            eprintln!(
                "=== {} ({:?} variant)\n{}",
                kernel.name,
                variant,
                code.vcode.as_deref().unwrap_or("")
            );
        }
        module.clear_context(&mut ctx);
        let mut best = chunk_id;
        // The serial variant stays scalar: it promises the interpreter's
        // one-thread order of float atomics. With a privatised variant, the
        // all-atomic one only runs launches too small to privatise: lane
        // code there would mostly cost compile time.
        let lane_variant = match variant {
            Variant::Serial => false,
            Variant::Atomic => private.is_empty(),
            Variant::Private => true,
        };
        if opts.simd && lane_variant && lower::vectorizable(kernel, &shape) {
            ctx.func.signature = chunk_sig_of(&module);
            if lower::build_vector_chunk(
                &mut module,
                &mut env,
                &mut ctx.func,
                &mut fctx,
                &shape,
                chunk_id,
            )? {
                let id = module
                    .declare_function(
                        &format!("v{}_lanes", vi),
                        Linkage::Local,
                        &chunk_sig_of(&module),
                    )
                    .map_err(|e| err(format!("declaring the lane chunk function: {}", e)))?;
                ctx.set_disasm(disasm);
                // A lane instruction the host ISA lacks leaves the scalar
                // code in place; under the verifier (tests) it is an error.
                let defined = module.define_function(id, &mut ctx);
                if let (Err(e), true) = (&defined, opts.verify) {
                    return Err(err(format!("kernel body (lanes): {:?}", e)));
                }
                if defined.is_ok() {
                    if let Some(code) = ctx.compiled_code().filter(|_| disasm) {
                        eprintln!(
                            "=== {} ({:?} variant, four lanes)\n{}",
                            kernel.name,
                            variant,
                            code.vcode.as_deref().unwrap_or("")
                        );
                    }
                    best = id;
                    lanes = true;
                }
            }
            module.clear_context(&mut ctx);
        }
        chunk_ids.push((variant, best));
    }
    module
        .finalize_definitions()
        .map_err(|e| err(format!("linking: {}", e)))?;
    let get = |v: Variant| -> Option<ChunkFn> {
        chunk_ids.iter().find(|(x, _)| *x == v).map(|(_, id)| {
            let ptr = module.get_finalized_function(*id);
            // SAFETY: every chunk function was built with exactly `ChunkFn`'s signature.
            unsafe { std::mem::transmute::<*const u8, ChunkFn>(ptr) }
        })
    };
    let chunk = get(Variant::Atomic).ok_or_else(|| err("no chunk function".into()))?;
    let serial = get(Variant::Serial);
    let private_chunk = get(Variant::Private);
    let private = private
        .iter()
        .map(|(r, float)| {
            (
                roots.iter().position(|x| x == r).expect("a kernel root"),
                *float,
            )
        })
        .collect();
    Ok(JitKernel {
        name: kernel.name.clone(),
        fused: kernel.fused.clone(),
        roots,
        sites,
        shape,
        private,
        cost: cost_estimate(kernel),
        lanes,
        chunk,
        serial,
        private_chunk,
        _code: CodeOwner(Some(module)),
    })
}
