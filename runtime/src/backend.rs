//! The backend registry: every backend Weft can run on, in one list, and
//! what is asked of all of them together. The CLI's `--backend`, replay,
//! `weft check`, `Simulation::new` and the app's and the web page's
//! choosers all go through it; none of them names a backend to decide what
//! it can do.
//!
//! A backend is a module holding its engine (`engine::Engine`) and its
//! spec (`spec::BackendSpec`), plus one line in [`BUILT_IN`]. A backend
//! from outside this crate (a test's, a plugin's) joins with [`register`]
//! and is then offered, parsed and checked like the built-in ones.

use crate::engine::Engine;
use crate::spec::{BackendSpec, Prepared, SimOptions};
use crate::RuntimeError;
use std::sync::RwLock;
use weft_ir::ir::target::TargetCaps;
use weft_ir::ir::Program;
use weft_ir::passes::PassOptions;

pub use crate::spec::Backend;

/// The built-in backends, in the order the choosers show them.
static BUILT_IN: [&dyn BackendSpec; 5] = [
    &AutoSpec,
    &crate::vm::VmSpec,
    &crate::jit::spec::JitSpec,
    &crate::wgpu_spec::WgpuSpec,
    &crate::cuda::spec::CudaSpec,
];

/// Backends registered at run time, after the built-in ones.
static ADDED: RwLock<Vec<&'static dyn BackendSpec>> = RwLock::new(Vec::new());

/// Adds a backend to the registry for the rest of the process. Refused when
/// its name or one of its aliases already names a backend.
pub fn register(spec: &'static dyn BackendSpec) -> Result<(), String> {
    let mut names = vec![spec.name()];
    names.extend(spec.aliases());
    if let Some(taken) = names.iter().find(|n| Backend::parse(n).is_some()) {
        return Err(format!(
            "backend '{}' is already registered (backends: {})",
            taken,
            Backend::names()
        ));
    }
    ADDED
        .write()
        .map_err(|_| "the backend registry is poisoned".to_string())?
        .push(spec);
    Ok(())
}

/// Every backend: the built-in ones, then the registered ones.
pub fn all() -> Vec<&'static dyn BackendSpec> {
    let mut v: Vec<&'static dyn BackendSpec> = BUILT_IN.to_vec();
    if let Ok(added) = ADDED.read() {
        v.extend(added.iter().copied());
    }
    v
}

impl Backend {
    /// Every backend's handle, in the registry's order.
    pub fn all() -> Vec<Backend> {
        all().into_iter().map(Backend::of).collect()
    }

    /// A backend by name or alias (`jit` for the compiled CPU backend).
    pub fn parse(name: &str) -> Option<Backend> {
        all()
            .into_iter()
            .find(|s| s.name() == name || s.aliases().contains(&name))
            .map(Backend::of)
    }

    /// The backend that runs a `.expect.json` entry: the first in the
    /// registry with that record name (`cpu`: the reference VM).
    pub fn for_record(record: &str) -> Option<Backend> {
        all()
            .into_iter()
            .find(|s| s.record_name() == record)
            .map(Backend::of)
    }

    /// The names `parse` accepts, for help and error messages.
    pub fn names() -> String {
        let specs = all();
        let mut v: Vec<String> = specs.iter().map(|s| s.name().to_string()).collect();
        for s in &specs {
            for a in s.aliases() {
                v.push(format!("{} (= {})", a, s.name()));
            }
        }
        v.join(", ")
    }
}

impl Default for Backend {
    /// The reference VM.
    fn default() -> Backend {
        Backend::Vm
    }
}

impl std::str::FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Backend::parse(s)
            .ok_or_else(|| format!("unknown backend '{}'; backends: {}", s, Backend::names()))
    }
}

/// `auto`: wgpu on the shared context or a hardware adapter, else the
/// compiled CPU backend. It resolves in `prepare` (once per simulation:
/// the adapter it finds is the one the simulation runs on).
pub struct AutoSpec;

/// The backends `auto` tries, in order; each says in `auto_candidate`
/// whether it takes the run.
const AUTO_ORDER: [Backend; 2] = [Backend::Wgpu, Backend::Jit];

#[allow(non_upper_case_globals)]
impl Backend {
    /// wgpu on a hardware GPU when there is one, otherwise the compiled
    /// CPU backend (never cuda).
    pub const Auto: Backend = Backend::of(&AutoSpec);
}

impl BackendSpec for AutoSpec {
    fn name(&self) -> &'static str {
        "auto"
    }

    fn summary(&self) -> &'static str {
        "the window's GPU through wgpu, else the compiled CPU backend"
    }

    fn unavailable(&self) -> Option<&'static str> {
        crate::platform::NO_AUTO
    }

    fn caps(&self) -> TargetCaps {
        TargetCaps::BASELINE
    }

    fn prepare(&self, opts: &SimOptions) -> Result<Prepared, RuntimeError> {
        AUTO_ORDER
            .iter()
            .find_map(|b| b.spec().auto_candidate(opts))
            .unwrap_or_else(|| {
                Err(RuntimeError::Unavailable(
                    "auto: no backend can run here".into(),
                ))
            })
    }

    fn open(&self, program: &Program, opts: &SimOptions) -> Result<Box<dyn Engine>, RuntimeError> {
        let p = self.prepare(opts)?;
        p.backend.spec().open(program, &p.opts)
    }

    /// `auto` builds nothing itself: what it resolves to is checked as itself.
    fn compile(&self, _program: &Program) -> Result<(), RuntimeError> {
        Ok(())
    }

    fn check_offline(&self, _program: &Program, _passes: &PassOptions) -> Result<(), RuntimeError> {
        Ok(())
    }
}

/// Opens the engine for `backend` on a compiled (legalized) program,
/// allocating and initialising its root buffers (`BackendSpec::open`).
pub fn open(
    backend: Backend,
    program: &Program,
    opts: &SimOptions,
) -> Result<Box<dyn Engine>, RuntimeError> {
    backend.spec().open(program, opts)
}

/// Pass options tuned for `backend` without a device (`BackendSpec::tune`).
pub fn tune_passes(backend: Backend, passes: &PassOptions) -> PassOptions {
    backend.spec().tune(passes)
}

/// What `weft check` compiles: `program` as built (before the pass
/// pipeline) run through each backend's own pipeline and code generator,
/// as `weft run` would (`BackendSpec::check_offline`: the VM's program,
/// the JIT's machine code, the wgpu backend's naga module, the CUDA C and,
/// where NVRTC is present, its PTX). An error names the backend, the
/// kernel's node and what failed.
pub fn check_backends(program: &Program, passes: &PassOptions) -> Result<(), RuntimeError> {
    for spec in all() {
        spec.check_offline(program, passes)?;
    }
    Ok(())
}

/// Builds the code of every backend for every kernel of a compiled
/// (legalized) program, without a device (`BackendSpec::compile`: each
/// backend whose capabilities cover what the program was legalized for).
pub fn compile_offline(program: &Program) -> Result<(), RuntimeError> {
    for spec in all() {
        spec.compile(program)?;
    }
    Ok(())
}
