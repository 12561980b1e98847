//! IR → `naga::Module` for the wgpu backend (one module per kernel).
//!
//! Pre: a kernel that passed the legalized-IR validator. Post: a module that
//! passes naga's validator, or a `CodegenError` naming the kernel; never a
//! panic. The module is built directly (no WGSL text) and matches the
//! reference VM's semantics: integer rules from `ir::eval` (shift amounts
//! masked), clamped dynamic component indices, overflow-safe range loops.
//! `random()` (as plain arithmetic on the invocation's state), saturating casts, matrix inverse and
//! determinant, fault checks and integer divisors that could fault (0, or
//! -1 with an `i32::MIN` dividend) arrive already rewritten by
//! `passes::legalize`; a `Trap` notes its fault site in a
//! private variable and returns (unless its site resumes, in kernels with
//! barriers), and `main` writes the error words once. In a block kernel
//! `main`'s range test is made per workgroup, so barriers stay in uniform
//! control flow as WGSL's uniformity rules (Tint) require.
//!
//! Bindings (group 0): 0 = this launch's record (a uniform buffer of
//! `vec4<u32>` at a dynamic offset: frame, launch, seed, total, shape[3],
//! threads per row, scalar params...), 1 = error words (first failed check + 1, its index),
//! 2.. = root buffers in `WgpuKernel::roots` order, as `array<u32>`, or
//! `array<atomic<u32>>` when the kernel uses atomics on that root.
//!
//! A root larger than the device's `max_storage_buffer_binding_size` is
//! split over several bindings (`WgpuOptions::chunk_words`): binding `j` of
//! the root is the window of words `[j * C, (j + 1) * C)` of the one buffer
//! (`C` a power of two). Every access of such a root picks its window at
//! run time, `if (addr >> log2 C) == j { … window_j[addr - j * C] … }` for
//! each window (the last one takes the rest), the loaded or atomic result
//! passing through a local variable. Roots within the limit keep one
//! binding and plain accesses.

pub mod indirect;

use crate::launch::word;
use crate::CodegenError;
use naga::{
    AddressSpace, ArraySize, AtomicFunction, BinaryOperator as BO, Block as NBlock,
    Expression as E, Function as NFunction, FunctionArgument, FunctionResult, GlobalVariable,
    Handle, Literal, LocalVariable, MathFunction as MF, Module, ResourceBinding, Scalar as NScalar,
    ScalarKind, Span, Statement as S, StorageAccess, Type as NType, TypeInner, UnaryOperator,
    VectorSize,
};
use std::collections::HashMap;
use weft_ir::ir::*;
use weft_ir::types::{Scalar, Type};

/// Invocations per workgroup when `WgpuOptions::workgroup_size` is not set
/// (see docs/performance.md, "wgpu vs Taichi Vulkan", for the measurement).
pub const WORKGROUP_SIZE: u32 = 256;

#[derive(Debug, Clone)]
pub struct WgpuKernel {
    pub name: String,
    pub module: Module,
    /// Root layout nodes bound at bindings 2.. in this order, with how each is declared.
    pub roots: Vec<(LayoutId, RootKind)>,
    /// Bindings each root of `roots` takes (1 unless split, see the module
    /// docs); root `k`'s window `j` is binding `2 + Σ chunks[..k] + j`.
    pub chunks: Vec<u32>,
    /// Words per window of a split root (`WgpuOptions::chunk_words`).
    pub chunk_words: u64,
    /// Every loop of the module ends: the kernel's own loops are proven to
    /// (`Kernel::loops_end`), and the only loops this backend adds are
    /// compare-exchange retries, which end once their exchange succeeds and
    /// act on memory on every trip. The runtime then creates the shader
    /// without naga's forced loop bounding (a 64-bit countdown on every
    /// iteration of every loop).
    pub loops_end: bool,
}

/// What WGSL executes natively: 32-bit integer atomics on `atomic<u32>`
/// words (unsigned min/max), and f32 atomic add where the adapter has
/// SHADER_FLOAT32_ATOMIC (`native_float_atomics`) on a buffer no other
/// atomic of the kernel touches (the buffer is then `atomic<f32>`). The
/// rest (f32 min/max, i32 min/max, other f32 adds) is `legalize`'s
/// compare-exchange loop. WGSL's `fma` may round twice (Vulkan does not
/// require it to fuse; lavapipe's f64 `fma` does not), its `mix` is not
/// Weft's `lerp` and its `min`/`max` leave a NaN to the driver, so those
/// arrive written out by `legalize` (`loose_float_builtins`). The
/// adapter's loop trip limit, if any, is the runtime's to add.
pub fn caps(native_float_atomics: bool) -> weft_ir::ir::target::TargetCaps {
    weft_ir::ir::target::TargetCaps {
        f32_atomic_add: native_float_atomics,
        workgroups: true,
        loose_float_builtins: true,
        ..weft_ir::ir::target::TargetCaps::BASELINE
    }
}

#[derive(Clone, Copy, Debug)]
pub struct WgpuOptions {
    /// The adapter has native f32 atomic add (SHADER_FLOAT32_ATOMIC): the
    /// program was legalized with `caps(true)`.
    pub native_float_atomics: bool,
    /// Invocations per workgroup (one per iteration; the runtime sizes
    /// dispatches with the same number).
    pub workgroup_size: u32,
    /// Words one binding of a root may cover (a power of two, the largest
    /// within the device's `max_storage_buffer_binding_size`); a larger
    /// root is split over several bindings (see the module docs).
    pub chunk_words: u64,
    /// Storage buffers one kernel may bind (the device's
    /// `max_storage_buffers_per_shader_stage`).
    pub max_storage_bindings: u32,
    /// The device has 64-bit scalars in shaders (SHADER_F64 and
    /// SHADER_INT64); a kernel using `f64`, `i64` or `u64` is refused
    /// without them, naming the node.
    pub wide: bool,
}

/// The largest power of two of words within `max_binding_bytes` (at least
/// 64 words, so that window offsets keep wgpu's 256-byte alignment).
pub fn chunk_words(max_binding_bytes: u64) -> u64 {
    let words = (max_binding_bytes / 4).max(64);
    1u64 << (63 - words.leading_zeros())
}

/// Bindings `root` takes in a kernel: one per window of `chunk_words`.
pub fn root_chunks(program: &Program, root: LayoutId, chunk_words: u64) -> u32 {
    weft_ir::ir::layout::root_words(program, root)
        .div_ceil(chunk_words)
        .max(1) as u32
}

impl Default for WgpuOptions {
    fn default() -> Self {
        WgpuOptions {
            native_float_atomics: false,
            workgroup_size: WORKGROUP_SIZE,
            chunk_words: 1 << 32,
            max_storage_bindings: u32::MAX,
            wide: true,
        }
    }
}

fn cerr(kernel: &Kernel, m: impl Into<String>) -> CodegenError {
    CodegenError {
        kernel: kernel.name.clone(),
        backend: "wgpu",
        message: m.into(),
    }
}

const SP: Span = Span::UNDEFINED;

struct Types {
    cache: HashMap<Type, Handle<NType>>,
}

fn nscalar(s: Scalar) -> NScalar {
    match s {
        Scalar::Bool => NScalar::BOOL,
        Scalar::I32 => NScalar::I32,
        Scalar::U32 => NScalar::U32,
        // f16 never gets here (`passes::half`; the validator checks).
        Scalar::F32 | Scalar::F16 => NScalar::F32,
        Scalar::I64 => NScalar::I64,
        Scalar::U64 => NScalar::U64,
        Scalar::F64 => NScalar::F64,
    }
}

fn vsize(n: u8) -> VectorSize {
    match n {
        2 => VectorSize::Bi,
        3 => VectorSize::Tri,
        _ => VectorSize::Quad,
    }
}

fn kind(s: Scalar) -> ScalarKind {
    nscalar(s).kind
}

impl Types {
    fn get(&mut self, m: &mut Module, t: Type) -> Handle<NType> {
        if let Some(h) = self.cache.get(&t) {
            return *h;
        }
        let inner = match t {
            Type::Scalar(s) => TypeInner::Scalar(nscalar(s)),
            Type::Vector(s, n) => TypeInner::Vector {
                size: vsize(n),
                scalar: nscalar(s),
            },
            Type::Matrix(n) => TypeInner::Matrix {
                columns: vsize(n),
                rows: vsize(n),
                scalar: NScalar::F32,
            },
            Type::Void => TypeInner::Scalar(NScalar::U32),
        };
        let h = m.types.insert(NType { name: None, inner }, SP);
        self.cache.insert(t, h);
        h
    }
}

/// How a kernel declares one root buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RootKind {
    /// `array<u32>`: no atomics on this root.
    Plain,
    /// `array<atomic<u32>>`: integer atomics, and f32 atomics as compare-exchange loops.
    AtomicU32,
    /// `array<atomic<f32>>`: only f32 add/sub atomics, done natively (SHADER_FLOAT32_ATOMIC).
    AtomicF32,
}

struct Globals {
    record: Handle<GlobalVariable>,
    errors: Handle<GlobalVariable>,
    /// Each root's windows (one global unless split) and how they are declared.
    roots: Vec<(LayoutId, Vec<Handle<GlobalVariable>>, RootKind)>,
    /// log2 of the words per window of a split root.
    chunk_shift: u32,
    /// The invocation's random state (`RngLoad` / `RngStore`).
    rng: Handle<GlobalVariable>,
    /// The invocation's loop trips (`TripsLoad` / `TripsStore`).
    trips: Handle<GlobalVariable>,
    /// The invocation's linear index (`Launch(Linear)`), set by `main`.
    linear: Handle<GlobalVariable>,
    /// This invocation's first fault: site + 1 (0: none) and its value.
    fault_code: Handle<GlobalVariable>,
    fault_value: Handle<GlobalVariable>,
    /// The kernel's shared arrays (`var<workgroup>`, as words), with each
    /// one's length in elements and words per element.
    shared: Vec<(Handle<GlobalVariable>, u32, u32)>,
}

/// Builds and validates the kernel's module; a panic inside (ours or
/// naga's) becomes an internal error naming the node.
pub fn compile_kernel(
    program: &Program,
    kernel: &Kernel,
    opts: &WgpuOptions,
) -> Result<WgpuKernel, CodegenError> {
    crate::guard(&kernel.name, "wgpu", || build_kernel(program, kernel, opts))
}

/// Everything `weft check` can verify without a device: the module builds,
/// validates, and naga writes it as SPIR-V and as WGSL (the writers run
/// inside `guard`, so a writer panic is an error naming the node).
pub fn check_kernel(
    program: &Program,
    kernel: &Kernel,
    opts: &WgpuOptions,
) -> Result<(), CodegenError> {
    let k = compile_kernel(program, kernel, opts)?;
    crate::guard(&kernel.name, "wgpu", || {
        let fail = |m: String| cerr(kernel, m);
        to_spirv(&k).map_err(fail)?;
        to_wgsl(&k).map_err(fail)?;
        Ok(())
    })
}

fn build_kernel(
    program: &Program,
    kernel: &Kernel,
    opts: &WgpuOptions,
) -> Result<WgpuKernel, CodegenError> {
    if !opts.wide {
        if let Some((t, span)) = wide_type_used(kernel) {
            return Err(CodegenError {
                kernel: kernel.node(span).to_string(),
                backend: "wgpu",
                message: format!(
                    "code {}: uses {}, but this GPU has no 64-bit {} in shaders (wgpu features SHADER_F64 and SHADER_INT64; WebGPU has neither); run it on the cpu, vm or cuda backend, or compute in 32 bits",
                    span,
                    t.name(),
                    if t == Scalar::F64 { "floats" } else { "integers" }
                ),
            });
        }
    }
    let mut m = Module::default();
    let mut types = Types {
        cache: HashMap::new(),
    };
    // Which roots are used, and how: (root, any atomic, any atomic that needs u32 words).
    let mut uses: Vec<(LayoutId, bool, bool)> = Vec::new();
    let mut note =
        |root: LayoutId, atomic: bool, needs_u32: bool| match uses.iter_mut().find(|r| r.0 == root)
        {
            Some(r) => {
                r.1 |= atomic;
                r.2 |= needs_u32;
            }
            None => uses.push((root, atomic, needs_u32)),
        };
    for f in std::iter::once(&kernel.entry).chain(kernel.functions.iter().map(|(_, f)| f)) {
        for (_, inst) in f.insts.iter() {
            match &inst.kind {
                InstKind::BufLoad { root, .. } | InstKind::BufStore { root, .. } => {
                    note(*root, false, false)
                }
                InstKind::BufAtomic { root, op, .. } => {
                    let native = opts.native_float_atomics
                        && inst.ty == Type::F32
                        && matches!(op, AtomicOp::Add | AtomicOp::Sub);
                    note(*root, true, !native)
                }
                _ => {}
            }
        }
    }
    let roots: Vec<(LayoutId, RootKind)> = uses
        .iter()
        .map(|&(r, atomic, needs_u32)| {
            (
                r,
                if !atomic {
                    RootKind::Plain
                } else if needs_u32 {
                    RootKind::AtomicU32
                } else {
                    RootKind::AtomicF32
                },
            )
        })
        .collect();
    let u32_ty = types.get(&mut m, Type::U32);
    let atomic_u32 = m.types.insert(
        NType {
            name: None,
            inner: TypeInner::Atomic(NScalar::U32),
        },
        SP,
    );
    let arr = |m: &mut Module, base: Handle<NType>| {
        m.types.insert(
            NType {
                name: None,
                inner: TypeInner::Array {
                    base,
                    size: ArraySize::Dynamic,
                    stride: 4,
                },
            },
            SP,
        )
    };
    let arr_u32 = arr(&mut m, u32_ty);
    let arr_atomic = arr(&mut m, atomic_u32);
    // atomic<f32> needs SHADER_FLOAT32_ATOMIC even when unused: declare it only when a root uses it.
    let arr_atomic_f32 = roots.iter().any(|r| r.1 == RootKind::AtomicF32).then(|| {
        let atomic_f32 = m.types.insert(
            NType {
                name: None,
                inner: TypeInner::Atomic(NScalar::F32),
            },
            SP,
        );
        arr(&mut m, atomic_f32)
    });
    let storage = |access| AddressSpace::Storage { access };
    // The record is a uniform buffer of `vec4<u32>` (uniform arrays need a
    // 16-byte stride), sized for this kernel's parameters. Why uniform:
    // lavapipe loads a storage word lane by lane (a bounds test and a stack
    // round trip per lane) even at a constant index, but a uniform word once
    // for all lanes; that was about a third of julia's time.
    let record_words = word::HEADER + kernel.params.len() as u32;
    let vec4_u32 = m.types.insert(
        NType {
            name: None,
            inner: TypeInner::Vector {
                size: VectorSize::Quad,
                scalar: NScalar::U32,
            },
        },
        SP,
    );
    let record_ty = m.types.insert(
        NType {
            name: None,
            inner: TypeInner::Array {
                base: vec4_u32,
                size: ArraySize::Constant(
                    std::num::NonZeroU32::new(record_words.div_ceil(4)).expect("HEADER > 0"),
                ),
                stride: 16,
            },
        },
        SP,
    );
    let record = m.global_variables.append(
        GlobalVariable {
            name: Some("launch".into()),
            space: AddressSpace::Uniform,
            binding: Some(ResourceBinding {
                group: 0,
                binding: 0,
            }),
            ty: record_ty,
            init: None,
            memory_decorations: Default::default(),
        },
        SP,
    );
    let errors = m.global_variables.append(
        GlobalVariable {
            name: Some("errors".into()),
            space: storage(StorageAccess::LOAD | StorageAccess::STORE),
            binding: Some(ResourceBinding {
                group: 0,
                binding: 1,
            }),
            ty: arr_atomic,
            init: None,
            memory_decorations: Default::default(),
        },
        SP,
    );
    if !opts.chunk_words.is_power_of_two() {
        return Err(cerr(kernel, "chunk_words must be a power of two"));
    }
    let chunks: Vec<u32> = roots
        .iter()
        .map(|(r, _)| root_chunks(program, *r, opts.chunk_words))
        .collect();
    // The error words plus one binding per window of every root.
    let storage_bindings = 1 + chunks.iter().map(|&c| c as u64).sum::<u64>();
    if storage_bindings > opts.max_storage_bindings as u64 {
        return Err(cerr(
            kernel,
            format!(
                "the kernel needs {} storage buffer bindings (its layout trees split into windows of {} words each), more than the {} the device allows (max_storage_buffers_per_shader_stage); use fewer or smaller layout trees in one kernel",
                storage_bindings, opts.chunk_words, opts.max_storage_bindings
            ),
        ));
    }
    let mut groots = Vec::new();
    let mut binding = 2;
    for ((root, rk), &n) in roots.iter().zip(&chunks) {
        let mut gs = Vec::new();
        for j in 0..n {
            let base = format!("buf_{}", program.layouts[*root].node_id.replace('-', "_"));
            gs.push(m.global_variables.append(
                GlobalVariable {
                    name: Some(if n == 1 {
                        base
                    } else {
                        format!("{}_{}", base, j)
                    }),
                    space: storage(StorageAccess::LOAD | StorageAccess::STORE),
                    binding: Some(ResourceBinding { group: 0, binding }),
                    ty: match rk {
                        RootKind::Plain => arr_u32,
                        RootKind::AtomicU32 => arr_atomic,
                        RootKind::AtomicF32 => {
                            arr_atomic_f32.expect("declared when a root needs it")
                        }
                    },
                    init: None,
                    memory_decorations: Default::default(),
                },
                SP,
            ));
            binding += 1;
        }
        groots.push((*root, gs, *rk));
    }
    let private = |m: &mut Module, name: &str| {
        m.global_variables.append(
            GlobalVariable {
                name: Some(name.into()),
                space: AddressSpace::Private,
                binding: None,
                ty: u32_ty,
                init: None,
                memory_decorations: Default::default(),
            },
            SP,
        )
    };
    let rng = private(&mut m, "rng_state");
    let trips = private(&mut m, "loop_trips");
    let linear = private(&mut m, "linear_index");
    let fault_code = private(&mut m, "fault_code");
    let fault_value = private(&mut m, "fault_value");
    let shared = kernel
        .workgroup
        .iter()
        .flat_map(|w| w.arrays.iter())
        .enumerate()
        .map(|(i, a)| {
            let size = std::num::NonZeroU32::new(a.words()).expect("validated: not empty");
            let ty = m.types.insert(
                NType {
                    name: None,
                    inner: TypeInner::Array {
                        base: u32_ty,
                        size: ArraySize::Constant(size),
                        stride: 4,
                    },
                },
                SP,
            );
            let g = m.global_variables.append(
                GlobalVariable {
                    name: Some(format!("shared_{}", i)),
                    space: AddressSpace::WorkGroup,
                    binding: None,
                    ty,
                    init: None,
                    memory_decorations: Default::default(),
                },
                SP,
            );
            (g, a.len, a.ty.components() as u32)
        })
        .collect();
    let globals = Globals {
        record,
        errors,
        roots: groots,
        chunk_shift: opts.chunk_words.trailing_zeros(),
        rng,
        trips,
        linear,
        fault_code,
        fault_value,
        shared,
    };

    let mut ctx = ModCtx {
        kernel,
        m,
        types,
        globals,
        funcs: Vec::new(),
        // A workgroup kernel's block is the dispatch's workgroup.
        workgroup_size: kernel
            .workgroup
            .as_ref()
            .map_or(opts.workgroup_size, |w| w.size),
        shape: kernel.iteration_shape(program),
        kernel_index: program
            .kernels
            .iter()
            .position(|(_, k)| std::ptr::eq(k, kernel))
            .map_or(u32::MAX, |i| i as u32),
    };
    // Helpers in order; calls only go to already-declared functions because
    // the front end forbids recursion: declare in dependency order.
    let order = call_order(kernel);
    let mut fmap: HashMap<usize, Handle<NFunction>> = HashMap::new();
    for fi in order {
        let f = &kernel.functions[FuncId::new(fi)];
        let nf = ctx.function(f, &fmap, false)?;
        let h = ctx.m.functions.append(nf, SP);
        fmap.insert(fi, h);
    }
    let body = ctx.function(&kernel.entry, &fmap, true)?;
    let body_h = ctx.m.functions.append(body, SP);
    let entry = ctx.entry_point(body_h)?;
    ctx.m.entry_points.push(entry);
    let _ = &ctx.funcs;
    let m = ctx.m;
    let mut v = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    );
    v.validate(&m).map_err(|e| {
        cerr(
            kernel,
            format!(
                "generated shader does not validate: {}",
                e.emit_to_string("")
            ),
        )
    })?;
    Ok(WgpuKernel {
        name: kernel.name.clone(),
        module: m,
        roots,
        chunks,
        chunk_words: opts.chunk_words,
        loops_end: kernel.loops_end,
    })
}

/// The first 64-bit scalar type a value of the kernel has, and where in
/// the code (a local's is its first use: values carry the positions).
fn wide_type_used(kernel: &Kernel) -> Option<(Scalar, weft_ir::ir::Span)> {
    std::iter::once(&kernel.entry)
        .chain(kernel.functions.iter().map(|(_, f)| f))
        .flat_map(|f| f.insts.iter().map(|(_, i)| (i.ty, i.span)))
        .find_map(|(t, sp)| t.scalar().filter(|s| s.is_wide()).map(|s| (s, sp)))
}

/// Helper functions ordered so that callees come before callers.
fn call_order(kernel: &Kernel) -> Vec<usize> {
    fn visit(k: &Kernel, f: usize, done: &mut Vec<usize>) {
        if done.contains(&f) {
            return;
        }
        for (_, inst) in k.functions[FuncId::new(f)].insts.iter() {
            if let InstKind::Call(c, _) = inst.kind {
                visit(k, c.index(), done);
            }
        }
        done.push(f);
    }
    let mut done = Vec::new();
    for f in 0..kernel.functions.len() {
        visit(kernel, f, &mut done);
    }
    done
}

/// Emits WGSL text for a kernel (for `weft emit wgsl`).
pub fn to_wgsl(k: &WgpuKernel) -> Result<String, String> {
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&k.module)
    .map_err(|e| e.emit_to_string(""))?;
    naga::back::wgsl::write_string(&k.module, &info, naga::back::wgsl::WriterFlags::empty())
        .map_err(|e| e.to_string())
}

/// Emits SPIR-V words for a kernel (for `weft emit spirv`).
pub fn to_spirv(k: &WgpuKernel) -> Result<Vec<u32>, String> {
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&k.module)
    .map_err(|e| e.emit_to_string(""))?;
    // As the runtime creates it: loop bounding only where a loop may not end.
    let opts = naga::back::spv::Options {
        force_loop_bounding: !k.loops_end,
        ..Default::default()
    };
    naga::back::spv::write_vec(&k.module, &info, &opts, None).map_err(|e| e.to_string())
}

struct ModCtx<'a> {
    kernel: &'a Kernel,
    m: Module,
    types: Types,
    globals: Globals,
    funcs: Vec<Handle<NFunction>>,
    workgroup_size: u32,
    /// The kernel's iteration shape (every launch record repeats it).
    shape: Vec<u32>,
    /// The kernel's index in `Program::kernels`, written with a fault so
    /// that the host names the kernel that failed: fault sites are numbered
    /// per kernel, and one submit runs many kernels.
    kernel_index: u32,
}

/// Builds one naga function's expressions and statements.
struct Fb<'c, 'a> {
    c: &'c mut ModCtx<'a>,
    f: NFunction,
}

impl Fb<'_, '_> {
    fn ty(&mut self, t: Type) -> Handle<NType> {
        self.c.types.get(&mut self.c.m, t)
    }
    /// Appends an expression that must be emitted, emitting it into `b`.
    fn e(&mut self, b: &mut NBlock, expr: E) -> Handle<E> {
        let h = self.f.expressions.append(expr, SP);
        b.push(S::Emit(naga::Range::new_from_bounds(h, h)), SP);
        h
    }
    /// Appends a pre-emitted expression (literal, argument, global, local, call/atomic result).
    fn pre(&mut self, expr: E) -> Handle<E> {
        self.f.expressions.append(expr, SP)
    }
    fn u32c(&mut self, v: u32) -> Handle<E> {
        self.pre(E::Literal(Literal::U32(v)))
    }
    fn i32c(&mut self, v: i32) -> Handle<E> {
        self.pre(E::Literal(Literal::I32(v)))
    }
    fn bin(&mut self, b: &mut NBlock, op: BO, l: Handle<E>, r: Handle<E>) -> Handle<E> {
        self.e(
            b,
            E::Binary {
                op,
                left: l,
                right: r,
            },
        )
    }
    fn math(&mut self, b: &mut NBlock, fun: MF, args: &[Handle<E>]) -> Handle<E> {
        self.e(
            b,
            E::Math {
                fun,
                arg: args[0],
                arg1: args.get(1).copied(),
                arg2: args.get(2).copied(),
                arg3: None,
            },
        )
    }
    fn cast(&mut self, b: &mut NBlock, x: Handle<E>, s: Scalar, convert: bool) -> Handle<E> {
        // An integer literal converted to another integer type is written
        // as the converted literal: naga's WGSL front end cannot evaluate
        // `u32(3li)` (a constant shift amount of an i64), so the emitted
        // text would not parse back.
        if let E::Literal(l) = self.f.expressions[x] {
            let v = match l {
                Literal::I32(v) => Some(v as i64 as u64),
                Literal::U32(v) => Some(v as u64),
                Literal::I64(v) => Some(v as u64),
                Literal::U64(v) => Some(v),
                _ => None,
            };
            // Two's complement wrapping, as WGSL's and SPIR-V's integer
            // conversions and bitcasts of the same width.
            let lit = v.and_then(|v| match s {
                Scalar::I32 => Some(Literal::I32(v as u32 as i32)),
                Scalar::U32 => Some(Literal::U32(v as u32)),
                Scalar::I64 => Some(Literal::I64(v as i64)),
                Scalar::U64 => Some(Literal::U64(v)),
                _ => None,
            });
            if let Some(lit) = lit {
                return self.pre(E::Literal(lit));
            }
        }
        let width = if s == Scalar::Bool {
            1
        } else {
            4 * s.words() as u8
        };
        self.e(
            b,
            E::As {
                expr: x,
                kind: kind(s),
                convert: if convert { Some(width) } else { None },
            },
        )
    }
    fn global(&mut self, g: Handle<GlobalVariable>) -> Handle<E> {
        self.pre(E::GlobalVariable(g))
    }
    fn record_const(&mut self, b: &mut NBlock, i: u32) -> Handle<E> {
        let g = self.global(self.c.globals.record);
        let v = self.e(
            b,
            E::AccessIndex {
                base: g,
                index: i / 4,
            },
        );
        let p = self.e(
            b,
            E::AccessIndex {
                base: v,
                index: i % 4,
            },
        );
        self.e(b, E::Load { pointer: p })
    }
    fn local(&mut self, name: &str, t: Type) -> Handle<E> {
        let ty = self.ty(t);
        let l = self.f.local_variables.append(
            LocalVariable {
                name: Some(name.into()),
                ty,
                init: None,
            },
            SP,
        );
        self.pre(E::LocalVariable(l))
    }

    /// A strong compare-exchange of the `u32` at `p` (the IR's meaning: the
    /// word held `cmp` and now holds `value` exactly when the old value
    /// returned is `cmp`), from WGSL's only one, which is weak: it may fail
    /// spuriously, leaving the word alone while its old value equals `cmp`
    /// (an LL/SC machine's lost reservation). Retried until it exchanged
    /// or saw another value, so no caller ever takes a spurious failure for
    /// a success and loses its write. Returns the old value.
    fn strong_cas(
        &mut self,
        b: &mut NBlock,
        p: Handle<E>,
        cmp: Handle<E>,
        value: Handle<E>,
    ) -> Handle<E> {
        let out = self.local("cas_old", Type::U32);
        let cmp_ty = self.c.m.generate_predeclared_type(
            naga::PredeclaredType::AtomicCompareExchangeWeakResult(NScalar::U32),
        );
        let res = self.pre(E::AtomicResult {
            ty: cmp_ty,
            comparison: true,
        });
        let mut body = NBlock::new();
        body.push(
            S::Atomic {
                pointer: p,
                fun: AtomicFunction::Exchange { compare: Some(cmp) },
                value,
                result: Some(res),
            },
            SP,
        );
        let old = self.e(
            &mut body,
            E::AccessIndex {
                base: res,
                index: 0,
            },
        );
        let exchanged = self.e(
            &mut body,
            E::AccessIndex {
                base: res,
                index: 1,
            },
        );
        body.push(
            S::Store {
                pointer: out,
                value: old,
            },
            SP,
        );
        let other = self.bin(&mut body, BO::NotEqual, old, cmp);
        let done = self.bin(&mut body, BO::LogicalOr, exchanged, other);
        let mut leave = NBlock::new();
        leave.push(S::Break, SP);
        body.push(
            S::If {
                condition: done,
                accept: leave,
                reject: NBlock::new(),
            },
            SP,
        );
        b.push(
            S::Loop {
                body,
                continuing: NBlock::new(),
                break_if: None,
            },
            SP,
        );
        self.e(b, E::Load { pointer: out })
    }
}

impl<'a> ModCtx<'a> {
    fn function(
        &mut self,
        f: &Function,
        fmap: &HashMap<usize, Handle<NFunction>>,
        is_entry: bool,
    ) -> Result<NFunction, CodegenError> {
        let kernel = self.kernel;
        let mut fb = Fb {
            c: self,
            f: NFunction {
                name: Some(if is_entry {
                    "kernel_body".into()
                } else {
                    format!("fn_{}", f.name)
                }),
                ..Default::default()
            },
        };
        for (k, t) in f.args.iter().enumerate() {
            let ty = fb.ty(*t);
            fb.f.arguments.push(FunctionArgument {
                name: Some(format!("a{}", k)),
                ty,
                binding: None,
            });
        }
        if f.ret != Type::Void {
            let ty = fb.ty(f.ret);
            fb.f.result = Some(FunctionResult { ty, binding: None });
        }
        let mut g = Gen {
            fb,
            f,
            values: HashMap::new(),
            locals: Vec::new(),
            fmap,
            kernel,
        };
        for (_, l) in f.locals.iter() {
            let h = g.fb.local(&l.name.replace('.', "_"), l.ty);
            g.locals.push(h);
        }
        let mut body = NBlock::new();
        g.block(&f.body, &mut body)?;
        if f.ret != Type::Void {
            // Unreachable by construction (every path returns), but naga wants a terminator.
            let ty = g.fb.ty(f.ret);
            let z = g.fb.pre(E::ZeroValue(ty));
            body.push(S::Return { value: Some(z) }, SP);
        }
        g.fb.f.body = body;
        Ok(g.fb.f)
    }

    fn entry_point(&mut self, body: Handle<NFunction>) -> Result<naga::EntryPoint, CodegenError> {
        let dims = self.kernel.dims;
        let uvec3 = self.types.get(&mut self.m, Type::Vector(Scalar::U32, 3));
        let workgroup_size = self.workgroup_size;
        let shape = self.shape.clone();
        let uses = |p: fn(&InstKind) -> bool| {
            std::iter::once(&self.kernel.entry)
                .chain(self.kernel.functions.iter().map(|(_, f)| f))
                .any(|f| f.insts.iter().any(|(_, i)| p(&i.kind)))
        };
        let uses_linear = uses(|k| matches!(k, InstKind::Launch(LaunchValue::Linear)));
        let traps = uses(|k| matches!(k, InstKind::Trap { .. }));
        let blocks = self.kernel.workgroup.is_some();
        let mut fb = Fb {
            c: self,
            f: NFunction {
                name: Some("main".into()),
                ..Default::default()
            },
        };
        fb.f.arguments.push(FunctionArgument {
            name: Some("gid".into()),
            ty: uvec3,
            binding: Some(naga::Binding::BuiltIn(naga::BuiltIn::GlobalInvocationId)),
        });
        if blocks {
            fb.f.arguments.push(FunctionArgument {
                name: Some("wid".into()),
                ty: uvec3,
                binding: Some(naga::Binding::BuiltIn(naga::BuiltIn::WorkGroupId)),
            });
        }
        let mut b = NBlock::new();
        let gid = fb.pre(E::FunctionArgument(0));
        let gx = fb.e(
            &mut b,
            E::AccessIndex {
                base: gid,
                index: 0,
            },
        );
        let gy = fb.e(
            &mut b,
            E::AccessIndex {
                base: gid,
                index: 1,
            },
        );
        let row = fb.record_const(&mut b, word::THREADS_PER_ROW);
        let t = fb.bin(&mut b, BO::Multiply, gy, row);
        let linear = fb.bin(&mut b, BO::Add, gx, t);
        let total = fb.record_const(&mut b, word::TOTAL);
        let past = if blocks {
            // A block kernel's range is a whole number of blocks, so the
            // block's first invocation decides for all of it: a test WGSL
            // knows to be the same across the workgroup (workgroup_id and
            // a uniform buffer), so the barriers in the body stay in
            // uniform control flow (Tint refuses them after a `return`
            // that depends on global_invocation_id).
            let wid = fb.pre(E::FunctionArgument(1));
            let wx = fb.e(
                &mut b,
                E::AccessIndex {
                    base: wid,
                    index: 0,
                },
            );
            let wy = fb.e(
                &mut b,
                E::AccessIndex {
                    base: wid,
                    index: 1,
                },
            );
            let size = fb.u32c(workgroup_size);
            let fx = fb.bin(&mut b, BO::Multiply, wx, size);
            let fy = fb.bin(&mut b, BO::Multiply, wy, row);
            let first = fb.bin(&mut b, BO::Add, fx, fy);
            fb.bin(&mut b, BO::GreaterEqual, first, total)
        } else {
            fb.bin(&mut b, BO::GreaterEqual, linear, total)
        };
        let mut ret = NBlock::new();
        ret.push(S::Return { value: None }, SP);
        b.push(
            S::If {
                condition: past,
                accept: ret,
                reject: NBlock::new(),
            },
            SP,
        );
        // Row-major decomposition of the linear index. The extents are the
        // kernel's iteration shape, which every launch record repeats
        // (`LaunchRecord::new`): as constants the divisions become
        // multiplies and shifts instead of per-invocation integer divides.
        // The outermost index needs no modulo (linear < total).
        let mut idx = vec![linear; dims];
        let mut rest = linear;
        for d in (0..dims).rev() {
            if d == 0 {
                idx[0] = fb.cast(&mut b, rest, Scalar::I32, false);
                break;
            }
            let ext = fb.u32c(shape.get(d).copied().unwrap_or(1).max(1));
            let i = fb.bin(&mut b, BO::Modulo, rest, ext);
            idx[d] = fb.cast(&mut b, i, Scalar::I32, false);
            rest = fb.bin(&mut b, BO::Divide, rest, ext);
        }
        if uses_linear {
            let g = fb.global(fb.c.globals.linear);
            b.push(
                S::Store {
                    pointer: g,
                    value: linear,
                },
                SP,
            );
        }
        if traps {
            let code = fb.global(fb.c.globals.fault_code);
            let zero = fb.u32c(0);
            b.push(
                S::Store {
                    pointer: code,
                    value: zero,
                },
                SP,
            );
        }
        b.push(
            S::Call {
                function: body,
                arguments: idx,
                result: None,
            },
            SP,
        );
        if traps {
            fb.record_fault(&mut b);
        }
        fb.f.body = b;
        Ok(naga::EntryPoint {
            name: "main".into(),
            stage: naga::ShaderStage::Compute,
            early_depth_test: None,
            workgroup_size: [workgroup_size, 1, 1],
            workgroup_size_overrides: None,
            function: fb.f,
            mesh_info: None,
            task_payload: None,
            incoming_ray_payload: None,
        })
    }
}

impl Fb<'_, '_> {
    /// Records this invocation's fault, if any, as the launch's first
    /// failure (if none yet): errors[0] = site + 1, errors[1] = its value,
    /// errors[2] = the kernel's index in the program.
    fn record_fault(&mut self, b: &mut NBlock) {
        let code_g = self.global(self.c.globals.fault_code);
        let code = self.e(b, E::Load { pointer: code_g });
        let zero = self.u32c(0);
        let failed = self.bin(b, BO::NotEqual, code, zero);
        let mut on_fault = NBlock::new();
        let g = self.global(self.c.globals.errors);
        let p0 = self.e(&mut on_fault, E::AccessIndex { base: g, index: 0 });
        // Strong: a spurious failure would drop the first fault unrecorded.
        let before = self.strong_cas(&mut on_fault, p0, zero, code);
        let exchanged = self.bin(&mut on_fault, BO::Equal, before, zero);
        let mut then = NBlock::new();
        let p1 = self.e(&mut then, E::AccessIndex { base: g, index: 1 });
        let vg = self.global(self.c.globals.fault_value);
        let value = self.e(&mut then, E::Load { pointer: vg });
        then.push(S::Store { pointer: p1, value }, SP);
        let p2 = self.e(&mut then, E::AccessIndex { base: g, index: 2 });
        let kernel = self.u32c(self.c.kernel_index);
        then.push(
            S::Store {
                pointer: p2,
                value: kernel,
            },
            SP,
        );
        on_fault.push(
            S::If {
                condition: exchanged,
                accept: then,
                reject: NBlock::new(),
            },
            SP,
        );
        b.push(
            S::If {
                condition: failed,
                accept: on_fault,
                reject: NBlock::new(),
            },
            SP,
        );
    }
}

struct Gen<'g, 'c, 'a> {
    fb: Fb<'c, 'a>,
    f: &'g Function,
    values: HashMap<InstId, Handle<E>>,
    locals: Vec<Handle<E>>,
    fmap: &'g HashMap<usize, Handle<NFunction>>,
    kernel: &'a Kernel,
}

impl Gen<'_, '_, '_> {
    fn v(&self, h: InstId) -> Handle<E> {
        self.values[&h]
    }
    fn t(&self, h: InstId) -> Type {
        self.f.insts[h].ty
    }
    fn block(&mut self, block: &Block, out: &mut NBlock) -> Result<(), CodegenError> {
        for &h in block {
            self.inst(h, out)?;
        }
        Ok(())
    }

    fn root(&self, l: LayoutId) -> (Vec<Handle<GlobalVariable>>, RootKind) {
        let r = self
            .fb
            .c
            .globals
            .roots
            .iter()
            .find(|r| r.0 == l)
            .expect("roots collected from the same instructions");
        (r.1.clone(), r.2)
    }

    /// Runs `f` on the pointer to word `addr` of `root` and returns what it
    /// returns (a value of type `result`). A root split over several
    /// bindings picks its window at run time (module docs): `f` runs once
    /// per window, inside `if (addr >> shift) == j`, and its result comes
    /// out through a local variable.
    fn word(
        &mut self,
        b: &mut NBlock,
        root: LayoutId,
        addr: Handle<E>,
        result: Option<Type>,
        mut f: impl FnMut(&mut Fb, &mut NBlock, Handle<E>) -> Result<Option<Handle<E>>, CodegenError>,
    ) -> Result<Option<Handle<E>>, CodegenError> {
        let (gs, _) = self.root(root);
        if gs.len() == 1 {
            let gv = self.fb.global(gs[0]);
            let p = self.fb.e(
                b,
                E::Access {
                    base: gv,
                    index: addr,
                },
            );
            return f(&mut self.fb, b, p);
        }
        let shift = self.fb.c.globals.chunk_shift;
        let tmp = result.map(|t| self.fb.local("split_word", t));
        let k = self.fb.u32c(shift);
        let chunk = self.fb.bin(b, BO::ShiftRight, addr, k);
        // One flat `if` per window; the last window takes every address
        // from its start on.
        let n = gs.len();
        for (j, &g) in gs.iter().enumerate() {
            let mut inner = NBlock::new();
            let start = self.fb.u32c(((j as u64) << shift) as u32);
            let local = self.fb.bin(&mut inner, BO::Subtract, addr, start);
            let gv = self.fb.global(g);
            let p = self.fb.e(
                &mut inner,
                E::Access {
                    base: gv,
                    index: local,
                },
            );
            if let (Some(v), Some(t)) = (f(&mut self.fb, &mut inner, p)?, tmp) {
                inner.push(
                    S::Store {
                        pointer: t,
                        value: v,
                    },
                    SP,
                );
            }
            let jc = self.fb.u32c(j as u32);
            let op = if j + 1 == n {
                BO::GreaterEqual
            } else {
                BO::Equal
            };
            let cond = self.fb.bin(b, op, chunk, jc);
            b.push(
                S::If {
                    condition: cond,
                    accept: inner,
                    reject: NBlock::new(),
                },
                SP,
            );
        }
        Ok(tmp.map(|t| self.fb.e(b, E::Load { pointer: t })))
    }

    /// `return` with a zero value when the function has a result.
    /// The float whose bits are the literal `bits` (of scalar `word`):
    /// stored to a variable and loaded back before the bitcast. WGSL
    /// evaluates `bitcast<f32>(2139095040u)` as a constant expression and
    /// Tint (the browsers' compiler) refuses a non-finite constant; a
    /// variable's value is not a constant expression, so the bitcast
    /// happens at run time and gives the bits unchanged.
    fn nonfinite(
        &mut self,
        b: &mut NBlock,
        bits: Handle<E>,
        word: Scalar,
        float: Scalar,
    ) -> Handle<E> {
        let var = self.fb.local("nonfinite_bits", Type::Scalar(word));
        b.push(
            S::Store {
                pointer: var,
                value: bits,
            },
            SP,
        );
        let w = self.fb.e(b, E::Load { pointer: var });
        self.fb.cast(b, w, float, false)
    }

    fn early_return(&mut self, b: &mut NBlock) {
        let value = match self.f.ret {
            Type::Void => None,
            t => {
                let ty = self.fb.ty(t);
                Some(self.fb.pre(E::ZeroValue(ty)))
            }
        };
        b.push(S::Return { value }, SP);
    }

    /// Notes fault `site` with `value` as this invocation's fault unless an
    /// earlier one (a trap in a helper returns to its caller) came first.
    /// Only `main` writes the error words, once, after the body returns: on
    /// lavapipe every `if` runs with a lane mask rather than a branch, so a
    /// compare-exchange per fault site cost a lane-by-lane loop at every
    /// checked access even when nothing failed.
    fn note_fault(&mut self, b: &mut NBlock, site: u32, value: Handle<E>) {
        let code = self.fb.global(self.fb.c.globals.fault_code);
        let cur = self.fb.e(b, E::Load { pointer: code });
        let zero = self.fb.u32c(0);
        let none = self.fb.bin(b, BO::Equal, cur, zero);
        let mut then = NBlock::new();
        let id = self.fb.u32c(site + 1);
        then.push(
            S::Store {
                pointer: code,
                value: id,
            },
            SP,
        );
        let val = self.fb.global(self.fb.c.globals.fault_value);
        then.push(
            S::Store {
                pointer: val,
                value,
            },
            SP,
        );
        b.push(
            S::If {
                condition: none,
                accept: then,
                reject: NBlock::new(),
            },
            SP,
        );
    }

    /// A word holding `v`'s bits. A bool has no bits to reinterpret (naga
    /// refuses the bitcast: "Unable to cast"), so it converts to 0 or 1;
    /// `passes::block_loops` keeps bools in shared arrays, and so may code.
    fn bits_as_u32(&mut self, b: &mut NBlock, v: Handle<E>, s: Scalar) -> Handle<E> {
        match s {
            Scalar::U32 => v,
            Scalar::Bool => self.fb.cast(b, v, Scalar::U32, true),
            _ => self.fb.cast(b, v, Scalar::U32, false),
        }
    }

    /// The inverse of `bits_as_u32` (a bool: the word is not 0).
    fn bits_from_u32(&mut self, b: &mut NBlock, v: Handle<E>, s: Scalar) -> Handle<E> {
        match s {
            Scalar::U32 => v,
            Scalar::Bool => self.fb.cast(b, v, Scalar::Bool, true),
            _ => self.fb.cast(b, v, s, false),
        }
    }

    /// isnan / isinf from the bit pattern: shader compilers may assume
    /// NaN-free arithmetic and fold `x != x` to false.
    fn float_class(
        &mut self,
        b: &mut NBlock,
        x: Handle<E>,
        n: usize,
        wide: bool,
        nan: bool,
    ) -> Handle<E> {
        let splat = |g: &mut Self, b: &mut NBlock, v: Handle<E>| {
            if n == 1 {
                v
            } else {
                g.fb.e(
                    b,
                    E::Splat {
                        size: vsize(n as u8),
                        value: v,
                    },
                )
            }
        };
        // A bitcast keeps the width: f64 bits are a u64 with f64's masks.
        let (bits, mask, inf) = if wide {
            (
                self.fb.cast(b, x, Scalar::U64, false),
                self.fb.pre(E::Literal(Literal::U64(0x7fff_ffff_ffff_ffff))),
                self.fb.pre(E::Literal(Literal::U64(0x7ff0_0000_0000_0000))),
            )
        } else {
            (
                self.fb.cast(b, x, Scalar::U32, false),
                self.fb.u32c(0x7fff_ffff),
                self.fb.u32c(0x7f80_0000),
            )
        };
        let mask = splat(self, b, mask);
        let mag = self.fb.bin(b, BO::And, bits, mask);
        let inf = splat(self, b, inf);
        self.fb
            .bin(b, if nan { BO::Greater } else { BO::Equal }, mag, inf)
    }

    /// Applies a binary op column by column (WGSL has no component-wise matrix * and /).
    fn per_column(
        &mut self,
        b: &mut NBlock,
        op: BO,
        l: Handle<E>,
        r: Handle<E>,
        n: u8,
        ty: Type,
    ) -> Handle<E> {
        let cols: Vec<Handle<E>> = (0..n as u32)
            .map(|c| {
                let a = self.fb.e(b, E::AccessIndex { base: l, index: c });
                let d = self.fb.e(b, E::AccessIndex { base: r, index: c });
                self.fb.bin(b, op, a, d)
            })
            .collect();
        let t = self.fb.ty(ty);
        self.fb.e(
            b,
            E::Compose {
                ty: t,
                components: cols,
            },
        )
    }

    fn inst(&mut self, h: InstId, b: &mut NBlock) -> Result<(), CodegenError> {
        let inst = &self.f.insts[h];
        let ty = inst.ty;
        let value: Option<Handle<E>> = match &inst.kind {
            // naga refuses non-finite float literals: build NaN / inf from
            // their bits, at run time (`nonfinite`).
            InstKind::Const(c)
                if c.scalar == Scalar::F32 && !f32::from_bits(c.lo()).is_finite() =>
            {
                let bits = self.fb.u32c(c.lo());
                Some(self.nonfinite(b, bits, Scalar::U32, Scalar::F32))
            }
            InstKind::Const(c)
                if c.scalar == Scalar::F64 && !f64::from_bits(c.bits).is_finite() =>
            {
                let bits = self.fb.pre(E::Literal(Literal::U64(c.bits)));
                Some(self.nonfinite(b, bits, Scalar::U64, Scalar::F64))
            }
            InstKind::Const(c) => Some(self.fb.pre(E::Literal(match c.scalar {
                Scalar::F32 | Scalar::F16 => Literal::F32(f32::from_bits(c.lo())),
                Scalar::I32 => Literal::I32(c.lo() as i32),
                Scalar::U32 => Literal::U32(c.lo()),
                Scalar::Bool => Literal::Bool(c.bits != 0),
                Scalar::F64 => Literal::F64(f64::from_bits(c.bits)),
                Scalar::I64 => Literal::I64(c.bits as i64),
                Scalar::U64 => Literal::U64(c.bits),
            }))),
            InstKind::Arg(i) => Some(self.fb.pre(E::FunctionArgument(*i))),
            InstKind::Param(i) => {
                let w = self.fb.record_const(b, word::HEADER + i);
                Some(self.bits_from_u32(b, w, ty.scalar().expect("scalar param")))
            }
            InstKind::Frame => {
                let w = self.fb.record_const(b, word::FRAME);
                Some(self.fb.cast(b, w, Scalar::I32, false))
            }
            InstKind::Unary(op, a) => {
                let op = match (op, ty.scalar()) {
                    (UnaryOp::Neg, _) => UnaryOperator::Negate,
                    (UnaryOp::Not, Some(Scalar::Bool)) => UnaryOperator::LogicalNot,
                    (UnaryOp::Not, _) => UnaryOperator::BitwiseNot,
                };
                let a = self.v(*a);
                if let Type::Matrix(n) = ty {
                    // -m: negate column by column.
                    let cols: Vec<Handle<E>> = (0..n as u32)
                        .map(|c| {
                            let col = self.fb.e(b, E::AccessIndex { base: a, index: c });
                            self.fb.e(b, E::Unary { op, expr: col })
                        })
                        .collect();
                    let t = self.fb.ty(ty);
                    Some(self.fb.e(
                        b,
                        E::Compose {
                            ty: t,
                            components: cols,
                        },
                    ))
                } else {
                    Some(self.fb.e(b, E::Unary { op, expr: a }))
                }
            }
            InstKind::Binary(op, l, r) => Some(self.binary(b, *op, *l, *r, ty)?),
            InstKind::Select {
                cond,
                accept,
                reject,
            } => {
                let (c, a, r) = (self.v(*cond), self.v(*accept), self.v(*reject));
                if let Type::Matrix(n) = ty {
                    let cols: Vec<Handle<E>> = (0..n as u32)
                        .map(|k| {
                            let x = self.fb.e(b, E::AccessIndex { base: a, index: k });
                            let y = self.fb.e(b, E::AccessIndex { base: r, index: k });
                            self.fb.e(
                                b,
                                E::Select {
                                    condition: c,
                                    accept: x,
                                    reject: y,
                                },
                            )
                        })
                        .collect();
                    let t = self.fb.ty(ty);
                    Some(self.fb.e(
                        b,
                        E::Compose {
                            ty: t,
                            components: cols,
                        },
                    ))
                } else {
                    Some(self.fb.e(
                        b,
                        E::Select {
                            condition: c,
                            accept: a,
                            reject: r,
                        },
                    ))
                }
            }
            InstKind::Cast(a) => {
                let from = self.t(*a).scalar().expect("typed");
                let to = ty.scalar().expect("typed");
                let av = self.v(*a);
                // Legalized float → integer casts only see values in range.
                Some(if from == to {
                    av
                } else if from.is_integer() && to.is_integer() && from.words() != to.words() {
                    // Widen or narrow within the source's signedness (naga
                    // picks sign- or zero-extension by the target's kind;
                    // Rust's `as` extends by the source's), then reinterpret.
                    let same_sign = match from {
                        Scalar::I32 => Scalar::I64,
                        Scalar::U32 => Scalar::U64,
                        Scalar::I64 => Scalar::I32,
                        _ => Scalar::U32,
                    };
                    let v = self.fb.cast(b, av, same_sign, true);
                    if same_sign == to {
                        v
                    } else {
                        self.fb.cast(b, v, to, false)
                    }
                } else {
                    self.fb.cast(b, av, to, true)
                })
            }
            InstKind::Bitcast(a) => {
                let av = self.v(*a);
                let from = self.t(*a);
                let to = ty.scalar().expect("typed");
                Some(match (from.components(), ty.components()) {
                    _ if from == ty => av,
                    // Two words (low first) to a 64-bit scalar:
                    // `u64(lo) | u64(hi) << 32`, then reinterpreted.
                    (2, 1) => {
                        let s = from.scalar().expect("typed");
                        let mut w = [av; 2];
                        for (k, x) in w.iter_mut().enumerate() {
                            let c = self.fb.e(
                                b,
                                E::AccessIndex {
                                    base: av,
                                    index: k as u32,
                                },
                            );
                            let c = self.bits_as_u32(b, c, s);
                            *x = self.fb.cast(b, c, Scalar::U64, true);
                        }
                        let sh = self.fb.u32c(32);
                        let hi = self.fb.bin(b, BO::ShiftLeft, w[1], sh);
                        let v = self.fb.bin(b, BO::InclusiveOr, w[0], hi);
                        if to == Scalar::U64 {
                            v
                        } else {
                            self.fb.cast(b, v, to, false)
                        }
                    }
                    // A 64-bit scalar to its two words.
                    (1, 2) => {
                        let s = from.scalar().expect("typed");
                        let v = if s == Scalar::U64 {
                            av
                        } else {
                            self.fb.cast(b, av, Scalar::U64, false)
                        };
                        let sh = self.fb.u32c(32);
                        let h = self.fb.bin(b, BO::ShiftRight, v, sh);
                        let lo = self.fb.cast(b, v, Scalar::U32, true);
                        let hi = self.fb.cast(b, h, Scalar::U32, true);
                        let lo = self.bits_from_u32(b, lo, to);
                        let hi = self.bits_from_u32(b, hi, to);
                        let t = self.fb.ty(ty);
                        self.fb.e(
                            b,
                            E::Compose {
                                ty: t,
                                components: vec![lo, hi],
                            },
                        )
                    }
                    _ => self.fb.cast(b, av, to, false),
                })
            }
            InstKind::Construct(parts) => {
                let comps: Vec<Handle<E>> = parts.iter().map(|p| self.v(*p)).collect();
                let t = self.fb.ty(ty);
                Some(self.fb.e(
                    b,
                    E::Compose {
                        ty: t,
                        components: comps,
                    },
                ))
            }
            InstKind::Extract(a, i) => {
                let av = self.v(*a);
                Some(self.fb.e(
                    b,
                    E::AccessIndex {
                        base: av,
                        index: *i,
                    },
                ))
            }
            InstKind::ExtractDyn(a, i) => {
                let len = match self.t(*a) {
                    Type::Vector(_, n) | Type::Matrix(n) => n as i32,
                    _ => return Err(cerr(self.kernel, "indexing a non-composite")),
                };
                let idx = self.clamped_index(b, *i, len);
                let av = self.v(*a);
                Some(self.fb.e(
                    b,
                    E::Access {
                        base: av,
                        index: idx,
                    },
                ))
            }
            InstKind::Insert { base, index, value } => {
                let n = match self.t(*base) {
                    Type::Vector(_, n) | Type::Matrix(n) => n as u32,
                    _ => return Err(cerr(self.kernel, "inserting into a non-composite")),
                };
                let bv = self.v(*base);
                let vv = self.v(*value);
                let comps: Vec<Handle<E>> = (0..n)
                    .map(|k| {
                        if k == *index {
                            vv
                        } else {
                            self.fb.e(b, E::AccessIndex { base: bv, index: k })
                        }
                    })
                    .collect();
                let t = self.fb.ty(ty);
                Some(self.fb.e(
                    b,
                    E::Compose {
                        ty: t,
                        components: comps,
                    },
                ))
            }
            InstKind::InsertDyn { base, index, value } => {
                let n = match self.t(*base) {
                    Type::Vector(_, n) | Type::Matrix(n) => n,
                    _ => return Err(cerr(self.kernel, "inserting into a non-composite")),
                };
                let idx = self.clamped_index(b, *index, n as i32);
                let bv = self.v(*base);
                let vv = self.v(*value);
                let comps: Vec<Handle<E>> = (0..n as u32)
                    .map(|k| {
                        let old = self.fb.e(b, E::AccessIndex { base: bv, index: k });
                        let kc = self.fb.i32c(k as i32);
                        let here = self.fb.bin(b, BO::Equal, idx, kc);
                        self.fb.e(
                            b,
                            E::Select {
                                condition: here,
                                accept: vv,
                                reject: old,
                            },
                        )
                    })
                    .collect();
                let t = self.fb.ty(ty);
                Some(self.fb.e(
                    b,
                    E::Compose {
                        ty: t,
                        components: comps,
                    },
                ))
            }
            InstKind::Swizzle(a, comps) => {
                let av = self.v(*a);
                let mut pattern = [naga::SwizzleComponent::X; 4];
                for (k, &c) in comps.iter().enumerate() {
                    pattern[k] = [
                        naga::SwizzleComponent::X,
                        naga::SwizzleComponent::Y,
                        naga::SwizzleComponent::Z,
                        naga::SwizzleComponent::W,
                    ][c as usize];
                }
                Some(self.fb.e(
                    b,
                    E::Swizzle {
                        size: vsize(comps.len() as u8),
                        vector: av,
                        pattern,
                    },
                ))
            }
            InstKind::Builtin(bi, args) => Some(self.builtin(b, *bi, args)?),
            InstKind::Call(fid, args) => {
                let func = *self
                    .fmap
                    .get(&fid.index())
                    .ok_or_else(|| cerr(self.kernel, "call to an undeclared helper"))?;
                let a: Vec<Handle<E>> = args.iter().map(|x| self.v(*x)).collect();
                let result = if ty == Type::Void {
                    None
                } else {
                    Some(self.fb.pre(E::CallResult(func)))
                };
                b.push(
                    S::Call {
                        function: func,
                        arguments: a,
                        result,
                    },
                    SP,
                );
                result
            }
            InstKind::Launch(v) => Some(match v {
                LaunchValue::Seed => self.fb.record_const(b, word::SEED),
                LaunchValue::Count => self.fb.record_const(b, word::LAUNCH),
                LaunchValue::Linear => {
                    let g = self.fb.global(self.fb.c.globals.linear);
                    self.fb.e(b, E::Load { pointer: g })
                }
            }),
            InstKind::RngLoad => {
                let g = self.fb.global(self.fb.c.globals.rng);
                Some(self.fb.e(b, E::Load { pointer: g }))
            }
            InstKind::RngStore(v) => {
                let g = self.fb.global(self.fb.c.globals.rng);
                let value = self.v(*v);
                b.push(S::Store { pointer: g, value }, SP);
                None
            }
            InstKind::TripsLoad => {
                let g = self.fb.global(self.fb.c.globals.trips);
                Some(self.fb.e(b, E::Load { pointer: g }))
            }
            InstKind::TripsStore(v) => {
                let g = self.fb.global(self.fb.c.globals.trips);
                let value = self.v(*v);
                b.push(S::Store { pointer: g, value }, SP);
                None
            }
            InstKind::LaneMax(v) => {
                let ty = self.fb.ty(Type::U32);
                let result = self.fb.pre(E::SubgroupOperationResult { ty });
                let argument = self.v(*v);
                b.push(
                    S::SubgroupCollectiveOperation {
                        op: naga::SubgroupOperation::Max,
                        collective_op: naga::CollectiveOperation::Reduce,
                        argument,
                        result,
                    },
                    SP,
                );
                Some(result)
            }
            InstKind::Random => {
                return Err(cerr(
                    self.kernel,
                    "random() reached codegen; legalize did not run",
                ))
            }
            InstKind::LocalLoad(l) => {
                let p = self.locals[l.index()];
                Some(self.fb.e(b, E::Load { pointer: p }))
            }
            InstKind::SharedLoad { array, index } => {
                let s = ty.scalar().expect("typed");
                let words = self.shared_words(b, *array, *index)?;
                let comps: Vec<Handle<E>> = words
                    .into_iter()
                    .map(|p| {
                        let w = self.fb.e(b, E::Load { pointer: p });
                        self.bits_from_u32(b, w, s)
                    })
                    .collect();
                Some(if comps.len() == 1 {
                    comps[0]
                } else {
                    let t = self.fb.ty(ty);
                    self.fb.e(
                        b,
                        E::Compose {
                            ty: t,
                            components: comps,
                        },
                    )
                })
            }
            InstKind::SharedStore {
                array,
                index,
                value,
            } => {
                let vt = self.t(*value);
                let s = vt.scalar().expect("typed");
                let vv = self.v(*value);
                let words = self.shared_words(b, *array, *index)?;
                let n = words.len();
                for (c, p) in words.into_iter().enumerate() {
                    let x = if n == 1 {
                        vv
                    } else {
                        self.fb.e(
                            b,
                            E::AccessIndex {
                                base: vv,
                                index: c as u32,
                            },
                        )
                    };
                    let w = self.bits_as_u32(b, x, s);
                    b.push(
                        S::Store {
                            pointer: p,
                            value: w,
                        },
                        SP,
                    );
                }
                None
            }
            InstKind::Barrier => {
                // Shared arrays and fields: what the block wrote before is
                // visible to all of it after (the IR's barrier).
                b.push(
                    S::ControlBarrier(naga::Barrier::WORK_GROUP | naga::Barrier::STORAGE),
                    SP,
                );
                None
            }
            InstKind::LocalStore(l, v) => {
                let p = self.locals[l.index()];
                let vv = self.v(*v);
                b.push(
                    S::Store {
                        pointer: p,
                        value: vv,
                    },
                    SP,
                );
                None
            }
            InstKind::Trap { site, value } => {
                let v = self.v(*value);
                let bits = self.bits_as_u32(b, v, self.t(*value).scalar().expect("scalar"));
                self.note_fault(b, *site, bits);
                // A resuming site (a kernel with barriers) goes on: a
                // `return` that depends on the invocation before a barrier
                // is refused by WGSL's uniformity rules.
                let resume = self
                    .kernel
                    .fault_sites
                    .get(*site as usize)
                    .is_some_and(|s| s.resume);
                if !resume {
                    self.early_return(b);
                }
                None
            }
            InstKind::BoundsCheck { .. } | InstKind::IndexCheck { .. } => {
                return Err(cerr(
                    self.kernel,
                    "a bounds check reached codegen; legalize did not run",
                ))
            }
            InstKind::BufLoad { root, addr } => {
                let rk = self.root(*root).1;
                let a = self.v(*addr);
                let wt = if rk == RootKind::AtomicF32 {
                    Type::F32
                } else {
                    Type::U32
                };
                let w = self
                    .word(b, *root, a, Some(wt), |fb, b, p| {
                        Ok(Some(fb.e(b, E::Load { pointer: p })))
                    })?
                    .expect("a load has a result");
                let s = ty.scalar().expect("scalar");
                Some(match rk {
                    RootKind::AtomicF32 if s == Scalar::F32 => w,
                    RootKind::AtomicF32 => self.fb.cast(b, w, s, false),
                    _ => self.bits_from_u32(b, w, s),
                })
            }
            InstKind::BufStore { root, addr, value } => {
                let rk = self.root(*root).1;
                let a = self.v(*addr);
                let vv = self.v(*value);
                let s = self.t(*value).scalar().expect("scalar");
                let w = match rk {
                    RootKind::AtomicF32 if s == Scalar::F32 => vv,
                    RootKind::AtomicF32 => self.fb.cast(b, vv, Scalar::F32, false),
                    _ => self.bits_as_u32(b, vv, s),
                };
                self.word(b, *root, a, None, |_, b, p| {
                    b.push(
                        S::Store {
                            pointer: p,
                            value: w,
                        },
                        SP,
                    );
                    Ok(None)
                })?;
                None
            }
            InstKind::BufAtomic {
                op,
                root,
                addr,
                value,
                cmp,
            } => Some(self.atomic(b, *op, *root, *addr, *value, *cmp, ty)?),
            InstKind::If {
                cond,
                accept,
                reject,
            } => {
                let c = self.v(*cond);
                let mut a = NBlock::new();
                self.block(accept, &mut a)?;
                let mut r = NBlock::new();
                self.block(reject, &mut r)?;
                b.push(
                    S::If {
                        condition: c,
                        accept: a,
                        reject: r,
                    },
                    SP,
                );
                None
            }
            InstKind::Loop { body } => {
                let mut nb = NBlock::new();
                self.block(body, &mut nb)?;
                b.push(
                    S::Loop {
                        body: nb,
                        continuing: NBlock::new(),
                        break_if: None,
                    },
                    SP,
                );
                None
            }
            InstKind::Break => {
                b.push(S::Break, SP);
                None
            }
            InstKind::Continue => {
                b.push(S::Continue, SP);
                None
            }
            InstKind::Return(v) => {
                let value = v.map(|x| self.v(x));
                b.push(S::Return { value }, SP);
                None
            }
            InstKind::FieldLoad { .. }
            | InstKind::FieldStore { .. }
            | InstKind::FieldAtomic { .. }
            | InstKind::FieldIsActive { .. }
            | InstKind::FieldActivate { .. }
            | InstKind::FieldDeactivate { .. }
            | InstKind::FieldAppend { .. }
            | InstKind::FieldLength { .. } => {
                return Err(cerr(
                    self.kernel,
                    "abstract field access reached codegen; access lowering did not run",
                ))
            }
            InstKind::RangeFor { .. } | InstKind::LoopCounter(_) => {
                return Err(cerr(
                    self.kernel,
                    "a range loop reached codegen; legalize did not run",
                ))
            }
        };
        if let Some(v) = value {
            self.values.insert(h, v);
        }
        Ok(())
    }

    /// Pointers to the words of element `index` (clamped, as on every
    /// backend) of shared array `a`.
    fn shared_words(
        &mut self,
        b: &mut NBlock,
        a: SharedId,
        index: InstId,
    ) -> Result<Vec<Handle<E>>, CodegenError> {
        let Some(&(g, len, n)) = self.fb.c.globals.shared.get(a as usize) else {
            return Err(cerr(
                self.kernel,
                "a shared array the kernel does not declare",
            ));
        };
        let i = self.clamped_index(b, index, len as i32);
        let nn = self.fb.i32c(n as i32);
        let first = self.fb.bin(b, BO::Multiply, i, nn);
        let gp = self.fb.global(g);
        Ok((0..n)
            .map(|c| {
                let cc = self.fb.i32c(c as i32);
                let at = self.fb.bin(b, BO::Add, first, cc);
                self.fb.e(
                    b,
                    E::Access {
                        base: gp,
                        index: at,
                    },
                )
            })
            .collect())
    }

    fn clamped_index(&mut self, b: &mut NBlock, i: InstId, len: i32) -> Handle<E> {
        let iv = self.v(i);
        let iv = if self.t(i).scalar() == Some(Scalar::U32) {
            let m = self.fb.u32c(len as u32 - 1);
            let c = self.fb.math(b, MF::Min, &[iv, m]);
            self.fb.cast(b, c, Scalar::I32, false)
        } else {
            iv
        };
        let (lo, hi) = (self.fb.i32c(0), self.fb.i32c(len - 1));
        self.fb.math(b, MF::Clamp, &[iv, lo, hi])
    }

    fn binary(
        &mut self,
        b: &mut NBlock,
        op: BinaryOp,
        l: InstId,
        r: InstId,
        ty: Type,
    ) -> Result<Handle<E>, CodegenError> {
        let (lv, rv) = (self.v(l), self.v(r));
        let lt = self.t(l);
        let s = lt.scalar().expect("typed");
        let nop = match op {
            BinaryOp::Add => BO::Add,
            BinaryOp::Sub => BO::Subtract,
            BinaryOp::Mul | BinaryOp::MatMul => BO::Multiply,
            BinaryOp::Div => BO::Divide,
            BinaryOp::Rem => BO::Modulo,
            BinaryOp::BitAnd if s == Scalar::Bool => BO::LogicalAnd,
            BinaryOp::BitOr if s == Scalar::Bool => BO::LogicalOr,
            BinaryOp::BitXor if s == Scalar::Bool => BO::NotEqual,
            BinaryOp::BitAnd => BO::And,
            BinaryOp::BitOr => BO::InclusiveOr,
            BinaryOp::BitXor => BO::ExclusiveOr,
            BinaryOp::Shl | BinaryOp::Shr => {
                // WGSL wants a u32 amount; the IR takes it modulo the width.
                let n = lt.components();
                let rs = self.t(r).scalar().expect("typed");
                let ru = if rs == Scalar::U32 {
                    rv
                } else {
                    // Truncating conversion keeps the low bits, which
                    // are all the mask below looks at.
                    self.fb.cast(b, rv, Scalar::U32, rs.is_wide())
                };
                let m = self.fb.u32c(if s.is_wide() { 63 } else { 31 });
                let m = if n == 1 {
                    m
                } else {
                    self.fb.e(
                        b,
                        E::Splat {
                            size: vsize(n as u8),
                            value: m,
                        },
                    )
                };
                let amount = self.fb.bin(b, BO::And, ru, m);
                let o = if op == BinaryOp::Shl {
                    BO::ShiftLeft
                } else {
                    BO::ShiftRight
                };
                return Ok(self.fb.bin(b, o, lv, amount));
            }
            BinaryOp::Eq => BO::Equal,
            BinaryOp::Ne => BO::NotEqual,
            BinaryOp::Lt => BO::Less,
            BinaryOp::Le => BO::LessEqual,
            BinaryOp::Gt => BO::Greater,
            BinaryOp::Ge => BO::GreaterEqual,
            BinaryOp::LogicalAnd => BO::LogicalAnd,
            BinaryOp::LogicalOr => BO::LogicalOr,
        };
        if let (Type::Matrix(n), BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem) = (lt, op) {
            return Ok(self.per_column(b, nop, lv, rv, n, ty));
        }
        Ok(self.fb.bin(b, nop, lv, rv))
    }

    fn builtin(
        &mut self,
        b: &mut NBlock,
        bi: Builtin,
        args: &[InstId],
    ) -> Result<Handle<E>, CodegenError> {
        let a: Vec<Handle<E>> = args.iter().map(|x| self.v(*x)).collect();
        let at = self.t(args[0]);
        let fun = match bi {
            Builtin::Abs => MF::Abs,
            // WGSL has no sign() of unsigned values; legalize rewrote it.
            Builtin::Sign if at.scalar() == Some(Scalar::U32) => {
                return Err(cerr(
                    self.kernel,
                    "sign() of an unsigned value reached codegen; legalize did not run",
                ))
            }
            Builtin::Sign => MF::Sign,
            Builtin::Min => MF::Min,
            Builtin::Max => MF::Max,
            Builtin::Clamp => MF::Clamp,
            Builtin::Saturate => MF::Saturate,
            Builtin::Floor => MF::Floor,
            Builtin::Ceil => MF::Ceil,
            Builtin::Round => MF::Round,
            Builtin::Trunc => MF::Trunc,
            Builtin::Fract => MF::Fract,
            Builtin::Pow => MF::Pow,
            Builtin::Exp => MF::Exp,
            Builtin::Exp2 => MF::Exp2,
            Builtin::Log => MF::Log,
            Builtin::Log2 => MF::Log2,
            Builtin::Sqrt => MF::Sqrt,
            Builtin::Rsqrt => MF::InverseSqrt,
            Builtin::Sin => MF::Sin,
            Builtin::Cos => MF::Cos,
            Builtin::Tan => MF::Tan,
            Builtin::Asin => MF::Asin,
            Builtin::Acos => MF::Acos,
            Builtin::Atan => MF::Atan,
            Builtin::Sinh => MF::Sinh,
            Builtin::Cosh => MF::Cosh,
            Builtin::Tanh => MF::Tanh,
            Builtin::Asinh => MF::Asinh,
            Builtin::Acosh => MF::Acosh,
            Builtin::Atanh => MF::Atanh,
            Builtin::Atan2 => MF::Atan2,
            Builtin::Lerp => MF::Mix,
            Builtin::Smoothstep => MF::SmoothStep,
            Builtin::Step => MF::Step,
            Builtin::Fma => MF::Fma,
            Builtin::Length => MF::Length,
            Builtin::Distance => MF::Distance,
            Builtin::Normalize => MF::Normalize,
            Builtin::Dot => MF::Dot,
            Builtin::Cross => MF::Cross,
            Builtin::Reflect => MF::Reflect,
            Builtin::Transpose => MF::Transpose,
            Builtin::Determinant | Builtin::Inverse | Builtin::Outer => {
                return Err(cerr(
                    self.kernel,
                    "a matrix built-in reached codegen; legalize did not run",
                ))
            }
            Builtin::IsNan => {
                return Ok(self.float_class(b, a[0], at.components(), at.is_wide(), true))
            }
            Builtin::IsInf => {
                return Ok(self.float_class(b, a[0], at.components(), at.is_wide(), false))
            }
            Builtin::Any | Builtin::All => {
                let fun = if bi == Builtin::Any {
                    naga::RelationalFunction::Any
                } else {
                    naga::RelationalFunction::All
                };
                return Ok(self.fb.e(
                    b,
                    E::Relational {
                        fun,
                        argument: a[0],
                    },
                ));
            }
        };
        Ok(self.fb.math(b, fun, &a))
    }

    #[allow(clippy::too_many_arguments)]
    fn atomic(
        &mut self,
        b: &mut NBlock,
        op: AtomicOp,
        root: LayoutId,
        addr: InstId,
        value: InstId,
        cmp: Option<InstId>,
        ty: Type,
    ) -> Result<Handle<E>, CodegenError> {
        let s = ty.scalar().expect("scalar atomic");
        let rk = self.root(root).1;
        let a = self.v(addr);
        let vv = self.v(value);
        if rk == RootKind::AtomicF32 {
            // Native float atomics: SPIR-V has only an atomic add, so subtract adds the negation.
            let f = self.fb.ty(Type::F32);
            let amount = if op == AtomicOp::Sub {
                self.fb.e(
                    b,
                    E::Unary {
                        op: UnaryOperator::Negate,
                        expr: vv,
                    },
                )
            } else {
                vv
            };
            let r = self.word(b, root, a, Some(Type::F32), |fb, b, p| {
                let r = fb.pre(E::AtomicResult {
                    ty: f,
                    comparison: false,
                });
                b.push(
                    S::Atomic {
                        pointer: p,
                        fun: AtomicFunction::Add,
                        value: amount,
                        result: Some(r),
                    },
                    SP,
                );
                Ok(Some(r))
            })?;
            return Ok(r.expect("an atomic has a result"));
        }
        let vu = self.bits_as_u32(b, vv, s);
        let u = self.fb.ty(Type::U32);
        let native = match (op, s) {
            (AtomicOp::Add, Scalar::I32 | Scalar::U32) => Some(AtomicFunction::Add),
            (AtomicOp::Sub, Scalar::I32 | Scalar::U32) => Some(AtomicFunction::Subtract),
            (AtomicOp::And, _) => Some(AtomicFunction::And),
            (AtomicOp::Or, _) => Some(AtomicFunction::InclusiveOr),
            (AtomicOp::Xor, _) => Some(AtomicFunction::ExclusiveOr),
            (AtomicOp::Min, Scalar::U32) => Some(AtomicFunction::Min),
            (AtomicOp::Max, Scalar::U32) => Some(AtomicFunction::Max),
            (AtomicOp::Exchange, _) => Some(AtomicFunction::Exchange { compare: None }),
            _ => None,
        };
        if let Some(fun) = native {
            let r = self.word(b, root, a, Some(Type::U32), |fb, b, p| {
                let r = fb.pre(E::AtomicResult {
                    ty: u,
                    comparison: false,
                });
                b.push(
                    S::Atomic {
                        pointer: p,
                        fun,
                        value: vu,
                        result: Some(r),
                    },
                    SP,
                );
                Ok(Some(r))
            })?;
            let r = r.expect("an atomic has a result");
            return Ok(self.bits_from_u32(b, r, s));
        }
        if op == AtomicOp::CompareExchange {
            let Some(c) = cmp else {
                return Err(cerr(self.kernel, "compare_exchange without a comparand"));
            };
            let cv = self.v(c);
            let cu = self.bits_as_u32(b, cv, s);
            let old = self.word(b, root, a, Some(Type::U32), |fb, b, p| {
                Ok(Some(fb.strong_cas(b, p, cu, vu)))
            })?;
            let old = old.expect("an atomic has a result");
            return Ok(self.bits_from_u32(b, old, s));
        }
        Err(cerr(
            self.kernel,
            format!(
                "atomic {} on {} reached the wgpu backend; legalize expands it",
                op.name(),
                ty
            ),
        ))
    }
}
