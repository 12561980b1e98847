//! What a backend is to the rest of Weft: a [`BackendSpec`] (its names,
//! whether it exists here, how it prepares a simulation, opens its engine
//! and checks a graph without a device), the [`Backend`] handle that users
//! choose by name, and the [`SimOptions`] a simulation is opened with.
//!
//! Each backend's module defines its spec beside its engine; the registry
//! (`backend.rs`) lists them, and everything that offers a choice of
//! backend (`--backend`, replay, `weft check`, the app's and the web page's
//! choosers) iterates the registry. Adding a backend is its module (engine
//! and spec) plus one line in the registry.

use crate::engine::Engine;
use crate::wgpu_context::WgpuContext;
use crate::RuntimeError;
use std::sync::Arc;
use weft_ir::ir::target::TargetCaps;
use weft_ir::ir::Program;
use weft_ir::passes::{run_pipeline, PassOptions};

#[derive(Clone, Debug, Default)]
pub struct SimOptions {
    pub passes: PassOptions,
    /// Overrides the graph's seed.
    pub seed: Option<u32>,
    /// Worker threads for kernel launches (`None`: one per core). With one
    /// thread, floating-point atomics add in a fixed order, so runs repeat exactly.
    pub threads: Option<usize>,
    pub backend: Backend,
    /// A GPU device to share (the app's); otherwise one is opened when needed.
    pub gpu: Option<Arc<WgpuContext>>,
    /// GPU: one submit per launch so per-kernel times can be measured.
    pub profile: bool,
    /// GPU: use the compare-exchange loop for f32 atomics even when the adapter has native ones.
    pub force_cas_float_atomics: bool,
    /// GPU: invocations per workgroup (`None`: the backend's default).
    pub workgroup_size: Option<u32>,
    /// Bytes all root buffers together may take (`--max-memory`), instead
    /// of what the machine has (`memory_limit`); device limits still apply.
    pub max_memory: Option<u64>,
    /// wgpu, for tests: bind at most this many bytes per binding (below the
    /// device's `max_storage_buffer_binding_size`), so that small roots are
    /// split over several bindings as large ones are on real devices.
    pub wgpu_max_binding_bytes: Option<u64>,
}

/// One backend as the registry lists it. Everything that differs between
/// backends before an engine exists is answered here.
pub trait BackendSpec: Sync {
    /// The name users type (`--backend`) and the choosers show.
    fn name(&self) -> &'static str;

    /// Other names `--backend` accepts for it.
    fn aliases(&self) -> &'static [&'static str] {
        &[]
    }

    /// One line saying what it is (the choosers' hover text).
    fn summary(&self) -> &'static str;

    /// The key of its entry in `.expect.json` files.
    fn record_name(&self) -> &'static str {
        self.name()
    }

    /// Why it cannot exist on this platform at all (a browser page), in
    /// one line; `None`: it can.
    fn unavailable(&self) -> Option<&'static str> {
        None
    }

    /// Whether this machine has what it needs (a driver); may take a moment,
    /// so a chooser asks once. `Err` says what is missing.
    fn probe(&self) -> Result<(), String> {
        Ok(())
    }

    /// Whether it runs on the wgpu device a window shares with it (a
    /// chooser offers it only when the window has one).
    fn shares_window_gpu(&self) -> bool {
        false
    }

    /// What its code generator executes natively, known without a device.
    fn caps(&self) -> TargetCaps;

    /// Pass options tuned for it, known without a device: the pipeline is
    /// the same for every backend; its code-size budgets differ (results
    /// never depend on them) and `legalize` expands what `caps` lacks.
    fn tune(&self, passes: &PassOptions) -> PassOptions {
        PassOptions {
            target: self.caps(),
            ..passes.clone()
        }
    }

    /// Everything decided before the pipeline runs, once per simulation:
    /// which backend runs (`auto` resolves here), its device opened (once;
    /// the options carry it to `open`), and the passes tuned for it and for
    /// that device.
    fn prepare(&self, opts: &SimOptions) -> Result<Prepared, RuntimeError>;

    /// What `auto` gets from this backend: `Some` when `auto` should run on
    /// it (prepared), `None` when `auto` passes it by.
    fn auto_candidate(&self, _opts: &SimOptions) -> Option<Result<Prepared, RuntimeError>> {
        None
    }

    /// Opens its engine on a compiled (legalized) program, allocating and
    /// initialising its root buffers; with `opts` from `prepare`, on the
    /// device `prepare` opened.
    fn open(&self, program: &Program, opts: &SimOptions) -> Result<Box<dyn Engine>, RuntimeError>;

    /// Builds its code for every kernel of a compiled program, without a
    /// device. A program legalized for capabilities it lacks is not one it
    /// would be given: `Ok` without building anything.
    fn compile(&self, program: &Program) -> Result<(), RuntimeError>;

    /// What `weft check` asks of it: `program` as built (before the pass
    /// pipeline) through its own pipeline (`tune`) and code generator, as
    /// `weft run` would compile it, without a device. An error names the
    /// backend, the kernel's node and what failed.
    fn check_offline(&self, program: &Program, passes: &PassOptions) -> Result<(), RuntimeError> {
        check_pipeline(self, program, &self.tune(passes))
    }
}

/// What `BackendSpec::prepare` decides: the backend that runs (never
/// `auto`) and the options to compile and open it with (passes tuned, the
/// device opened).
pub struct Prepared {
    pub backend: Backend,
    pub opts: SimOptions,
}

impl Prepared {
    /// `backend` with the passes its spec tunes without a device.
    pub fn tuned(backend: Backend, opts: &SimOptions) -> Prepared {
        Prepared {
            backend,
            opts: SimOptions {
                backend,
                passes: backend.spec().tune(&opts.passes),
                ..opts.clone()
            },
        }
    }
}

/// `program` (as built) through the pass pipeline with `passes`, as
/// `spec`'s backend would compile it; an error names the backend.
pub fn compile_for(
    spec: &(impl BackendSpec + ?Sized),
    program: &Program,
    passes: &PassOptions,
) -> Result<Program, RuntimeError> {
    let mut p = program.clone();
    run_pipeline(&mut p, passes, None).map_err(|e| RuntimeError::Compile {
        node: e.kernel.clone(),
        message: format!("on --backend {}: {}", spec.name(), e),
    })?;
    Ok(p)
}

/// The default `check_offline`: the pipeline with `passes`, then `compile`.
pub fn check_pipeline(
    spec: &(impl BackendSpec + ?Sized),
    program: &Program,
    passes: &PassOptions,
) -> Result<(), RuntimeError> {
    let p = compile_for(spec, program, passes)?;
    spec.compile(&p).map_err(|e| on_backend(spec.name(), e))
}

/// A compile error said to be `backend`'s.
pub fn on_backend(backend: &str, e: RuntimeError) -> RuntimeError {
    match e {
        RuntimeError::Compile { node, message } => RuntimeError::Compile {
            node,
            message: format!("on --backend {}: {}", backend, message),
        },
        e => e,
    }
}

/// A code generator's error as a `Compile` error naming the kernel's node.
pub fn codegen_error(e: weft_codegen::CodegenError) -> RuntimeError {
    RuntimeError::Compile {
        node: e.kernel.clone(),
        message: e.to_string(),
    }
}

/// Which backend to run on: a handle to its spec in the registry. Two
/// handles are equal when they name the same backend. The built-in ones
/// have constants beside their engines (`Backend::Vm` in `vm`, …); any
/// backend, built in or registered, is found by name (`Backend::parse`).
#[derive(Clone, Copy)]
pub struct Backend(&'static dyn BackendSpec);

impl Backend {
    /// The handle of `spec`.
    pub const fn of(spec: &'static dyn BackendSpec) -> Backend {
        Backend(spec)
    }

    /// Its spec: everything the registry knows about it.
    pub fn spec(self) -> &'static dyn BackendSpec {
        self.0
    }

    pub fn name(self) -> &'static str {
        self.0.name()
    }

    /// The key of this backend's entry in `.expect.json` files. Both CPU
    /// backends share the `cpu` entry: the JIT is bit-identical to the VM
    /// except for the order of float atomics, which the tolerances cover.
    pub fn record_name(self) -> &'static str {
        self.0.record_name()
    }
}

impl PartialEq for Backend {
    fn eq(&self, other: &Backend) -> bool {
        self.name() == other.name()
    }
}

impl Eq for Backend {}

impl std::hash::Hash for Backend {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.name().hash(h)
    }
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
