//! The one backend interface: every backend is an [`Engine`], chosen by one
//! [`Backend`] enum that the CLI, the app, replay and bench all use.
//!
//! An engine owns its root buffers (allocated when it is opened, one per
//! root layout node, sized by `ir::layout`), copies words in and out of them,
//! and runs a frame's launch records in order, reporting faults as
//! `RuntimeError`s naming the kernel node and, where it can, per-launch
//! times. The schedule executor (`sim.rs`) is shared: it turns the schedule
//! into `LaunchRecord`s and hands them to whichever engine runs. Adding a
//! backend means one module implementing `Engine` plus one arm in `open`.

use crate::memory::{extract_field, insert_field, FieldMemory};
use crate::memory_limit::MemoryLimits;
use crate::sim::SimOptions;
use crate::vm::VmEngine;
use crate::wgpu_backend::{AdapterChoice, WgpuContext, WgpuEngine};
use crate::RuntimeError;
use std::sync::Arc;
use std::time::Duration;
use weft_codegen::launch::LaunchRecord;
use weft_ir::ir::layout::root_of;
use weft_ir::ir::{FieldId, KernelId, LayoutId, Program};
use weft_ir::passes::{legalize::TargetCaps, unroll::UnrollOptions, PassOptions};

/// Which backend to run on, as users name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub enum Backend {
    /// The reference VM: IR flattened to a register machine, interpreted,
    /// multi-threaded with rayon. The correctness oracle for every other backend.
    #[default]
    Vm,
    /// Compute pipelines through wgpu (Vulkan, Metal, DX12, GL; lavapipe on CPU-only machines).
    Wgpu,
    /// wgpu on a hardware GPU when there is one, otherwise the compiled CPU backend.
    Auto,
    /// The compiled CPU backend (`cpu`): kernels JIT-compiled to native code
    /// (Cranelift), multi-threaded with rayon, over the VM's field memory.
    Jit,
    /// CUDA C compiled by NVRTC, launched through the CUDA driver (NVIDIA
    /// GPUs only; never chosen by `Auto`).
    Cuda,
}

impl Backend {
    pub const ALL: [Backend; 5] = [
        Backend::Auto,
        Backend::Vm,
        Backend::Jit,
        Backend::Wgpu,
        Backend::Cuda,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Backend::Vm => "vm",
            Backend::Wgpu => "wgpu",
            Backend::Auto => "auto",
            Backend::Jit => "cpu",
            Backend::Cuda => "cuda",
        }
    }

    /// A backend by name; `jit` is accepted for the compiled CPU backend.
    pub fn parse(name: &str) -> Option<Backend> {
        match name {
            "jit" => Some(Backend::Jit),
            _ => Backend::ALL.into_iter().find(|b| b.name() == name),
        }
    }

    /// The key of this backend's entry in `.expect.json` files. Both CPU
    /// backends share the `cpu` entry: the JIT is bit-identical to the VM
    /// except for the order of float atomics, which the tolerances cover.
    pub fn record_name(self) -> &'static str {
        match self {
            Backend::Vm | Backend::Jit => "cpu",
            b => b.name(),
        }
    }

    /// The names `parse` accepts, for help and error messages.
    pub fn names() -> String {
        let mut v: Vec<&str> = Backend::ALL.iter().map(|b| b.name()).collect();
        v.push("jit (= cpu)");
        v.join(", ")
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Backend::parse(s)
            .ok_or_else(|| format!("unknown backend '{}'; backends: {}", s, Backend::names()))
    }
}

/// What every backend implements. An engine says what it is through this
/// trait (`backend`, `wgpu`), so nothing downcasts engines or compares
/// backend names.
pub trait Engine: Send {
    /// Which of the built-in backends this engine is (never `Auto`); `None`
    /// for an engine added outside this crate (a test's).
    fn backend(&self) -> Option<Backend>;

    /// The backend's name for status lines: `Backend::name`, or an outside
    /// engine's own.
    fn name(&self) -> &'static str {
        self.backend().map_or("custom", Backend::name)
    }

    /// The wgpu engine itself when this is one, so the app can draw views
    /// straight from its buffers on the device it shares with the window.
    fn wgpu(&self) -> Option<&WgpuEngine> {
        None
    }

    /// Overwrites a root buffer with `words`.
    fn write_root(&self, root: LayoutId, words: &[u32]) -> Result<(), RuntimeError>;

    /// A copy of a root buffer's words.
    fn read_root(&self, root: LayoutId) -> Result<Vec<u32>, RuntimeError>;

    /// Runs the launches in order. Returns the time of each launch it
    /// measured: every launch when `timing` is set, otherwise whatever it
    /// measures anyway (possibly nothing).
    fn run(
        &mut self,
        program: &Program,
        launches: &[LaunchRecord],
        timing: bool,
    ) -> Result<Vec<(KernelId, Duration)>, RuntimeError>;

    /// Waits for every launch run so far and reports a fault not reported
    /// yet. An engine may return from `run` before its launches finish (the
    /// wgpu engine keeps a few frames in flight), so a fault can surface at
    /// a later `run`, at a read, or here.
    fn sync(&mut self) -> Result<(), RuntimeError> {
        Ok(())
    }

    /// The device in use, for status lines (`None` on the host).
    fn device_name(&self) -> Option<String> {
        None
    }

    /// Frames `run` may leave queued on a device before the host waits
    /// (0: `run` returns with its launches done). An engine that runs ahead
    /// times launches only when asked (`timing`), since a timed launch
    /// waits for itself.
    fn frames_in_flight(&self) -> usize {
        0
    }

    /// A field in logical row-major order (an engine may read it more directly).
    fn read_field(&self, program: &Program, field: FieldId) -> Result<Vec<u32>, RuntimeError> {
        let root = root_of(program, program.fields[field].layout);
        Ok(extract_field(program, field, &self.read_root(root)?))
    }

    /// Overwrites a field from logical row-major words.
    fn write_field(
        &self,
        program: &Program,
        field: FieldId,
        words: &[u32],
    ) -> Result<(), RuntimeError> {
        let root = root_of(program, program.fields[field].layout);
        let mut all = self.read_root(root)?;
        insert_field(program, field, words, &mut all)?;
        self.write_root(root, &all)
    }

    /// Restores every field's initial value.
    fn reset(&mut self, program: &Program) -> Result<(), RuntimeError> {
        write_initial_values(&*self, program)
    }
}

/// Writes every field's initial value into `engine`'s root buffers.
pub fn write_initial_values<E: Engine + ?Sized>(
    engine: &E,
    program: &Program,
) -> Result<(), RuntimeError> {
    let init = FieldMemory::new(program);
    for r in program.roots() {
        engine.write_root(r, &init.root_words(r))?;
    }
    Ok(())
}

/// Opens the engine for `backend` on a compiled (legalized) program,
/// allocating and initialising its root buffers. `Auto` picks wgpu on a
/// hardware adapter (or the shared context in `opts`), else the compiled
/// CPU backend.
pub fn open(
    backend: Backend,
    program: &Program,
    opts: &SimOptions,
) -> Result<Box<dyn Engine>, RuntimeError> {
    match backend {
        Backend::Vm => {
            MemoryLimits::cpu(opts.max_memory).check(program)?;
            Ok(Box::new(VmEngine::new(program, opts.threads)?))
        }
        Backend::Jit => {
            MemoryLimits::cpu(opts.max_memory).check(program)?;
            crate::platform::open_jit(program, opts.threads)
        }
        Backend::Cuda => crate::platform::open_cuda(program, opts.max_memory),
        Backend::Wgpu => {
            let ctx = match &opts.gpu {
                Some(c) => c.clone(),
                None => Arc::new(WgpuContext::new(AdapterChoice::Any)?),
            };
            Ok(Box::new(WgpuEngine::open(program, ctx, opts)?))
        }
        Backend::Auto => {
            let (backend, gpu) = resolve_auto(opts);
            let opts = SimOptions {
                gpu,
                ..opts.clone()
            };
            open(backend, program, &opts)
        }
    }
}

/// What `auto` means on this machine: wgpu on the given GPU context or a
/// hardware adapter (returned, so that it is opened once), else the
/// compiled CPU backend.
pub fn resolve_auto(opts: &SimOptions) -> (Backend, Option<Arc<WgpuContext>>) {
    let ctx = match &opts.gpu {
        Some(c) => Some(c.clone()),
        None => WgpuContext::new(AdapterChoice::HardwareOnly)
            .ok()
            .map(Arc::new),
    };
    match ctx {
        Some(c) => (Backend::Wgpu, Some(c)),
        None => (Backend::Jit, None),
    }
}

/// Pass options tuned for the backend that will compile the program:
/// the pipeline is the same for every backend; its code-size budgets
/// differ (results never depend on them) and `legalize` expands what the
/// backend's code generator says it lacks (`target_caps`). wgpu's f32
/// atomic add depends on the adapter: `Simulation::new` sets it from the
/// context; without one it is the portable compare-exchange loop.
pub fn tune_passes(backend: Backend, passes: &PassOptions) -> PassOptions {
    PassOptions {
        unroll: match backend {
            Backend::Jit | Backend::Wgpu => UnrollOptions::STENCILS,
            _ => passes.unroll,
        },
        target: target_caps(backend, false),
        ..passes.clone()
    }
}

/// What `backend`'s code generator executes natively (for wgpu: with or
/// without the adapter's f32 atomic add).
pub fn target_caps(backend: Backend, wgpu_float_atomics: bool) -> TargetCaps {
    match backend {
        Backend::Vm => weft_codegen::vm::CAPS,
        Backend::Jit => crate::platform::JIT_CAPS,
        Backend::Cuda => weft_codegen::cuda::CAPS,
        Backend::Wgpu => weft_codegen::wgpu::caps(wgpu_float_atomics),
        Backend::Auto => TargetCaps::BASELINE,
    }
}

/// What `weft check` compiles: `program` as built (before the pass
/// pipeline), run through each backend's own pipeline (`tune_passes`, its
/// `TargetCaps`) and handed to that backend's code generator, as `weft run`
/// would: the VM's program, the JIT's machine code (Cranelift), the wgpu
/// backend's naga module validated (once as on lavapipe, with its loop
/// trip counters and compare-exchange float atomics, once with native f32
/// atomic add), and the CUDA C, compiled by NVRTC where NVRTC is present.
/// An error names the backend, the kernel's node and what failed.
pub fn check_backends(program: &Program, passes: &PassOptions) -> Result<(), RuntimeError> {
    let lavapipe = TargetCaps {
        loop_trip_limit: Some(crate::wgpu_backend::LLVMPIPE_LOOP_TRIPS),
        ..weft_codegen::wgpu::caps(false)
    };
    let mut targets = vec![(Backend::Vm, None), (Backend::Wgpu, Some(lavapipe))];
    targets.push((Backend::Wgpu, Some(weft_codegen::wgpu::caps(true))));
    targets.push((Backend::Cuda, None));
    if crate::platform::available(Backend::Jit) {
        targets.insert(1, (Backend::Jit, None));
    }
    for (backend, caps) in targets {
        let mut opts = tune_passes(backend, passes);
        if let Some(c) = caps {
            opts.target = c;
        }
        let on = |e: String| format!("on --backend {}: {}", backend.name(), e);
        let mut p = program.clone();
        weft_ir::passes::run_pipeline(&mut p, &opts, None).map_err(|e| RuntimeError::Compile {
            node: e.kernel.clone(),
            message: on(e.to_string()),
        })?;
        let compile_err = |e: weft_codegen::CodegenError| RuntimeError::Compile {
            node: e.kernel.clone(),
            message: on(e.to_string()),
        };
        for (_, k) in p.kernels.iter() {
            match backend {
                Backend::Vm => {
                    weft_codegen::vm::compile_kernel(&p, k).map_err(compile_err)?;
                }
                Backend::Jit => crate::platform::compile_jit(&p, k).map_err(compile_err)?,
                Backend::Wgpu => {
                    let opts = weft_codegen::wgpu::WgpuOptions {
                        native_float_atomics: p.target.f32_atomic_add,
                        ..Default::default()
                    };
                    weft_codegen::wgpu::check_kernel(&p, k, &opts).map_err(compile_err)?;
                }
                Backend::Cuda => {
                    let c = weft_codegen::cuda::compile_kernel(&p, k).map_err(compile_err)?;
                    crate::platform::compile_nvrtc(&c).map_err(|e| RuntimeError::Compile {
                        node: k.name.clone(),
                        message: on(e),
                    })?;
                }
                Backend::Auto => {}
            }
        }
    }
    Ok(())
}

/// Builds the code of every backend that can be built without a device,
/// for every kernel of a compiled (legalized) program, so that a graph that
/// passes `weft check` never fails to compile on one of them: the VM's
/// program, the wgpu backend's naga module, validated and written as SPIR-V and WGSL, and the cuda
/// backend's CUDA C (NVRTC, where present, is the test suite's business:
/// `weft check` must not depend on it).
pub fn check_offline(program: &Program) -> Result<(), RuntimeError> {
    let compile_err = |e: weft_codegen::CodegenError| RuntimeError::Compile {
        node: e.kernel.clone(),
        message: e.to_string(),
    };
    // Each backend whose capabilities cover what the program was legalized
    // for (`weft check` legalizes for the baseline, which all of them do).
    let covers = |caps: TargetCaps| caps.covers(&program.target);
    for (_, k) in program.kernels.iter() {
        if covers(weft_codegen::vm::CAPS) {
            weft_codegen::vm::compile_kernel(program, k).map_err(compile_err)?;
        }
        let native_float_atomics = program.target.f32_atomic_add;
        if covers(weft_codegen::wgpu::caps(native_float_atomics)) {
            let opts = weft_codegen::wgpu::WgpuOptions {
                native_float_atomics,
                ..Default::default()
            };
            weft_codegen::wgpu::check_kernel(program, k, &opts).map_err(compile_err)?;
        }
        if covers(weft_codegen::cuda::CAPS) {
            weft_codegen::cuda::compile_kernel(program, k).map_err(compile_err)?;
        }
    }
    Ok(())
}
