//! The compiled CPU backend (`cpu`, alias `jit`) as the registry lists it.
//! Its engine exists only natively: what differs in a browser is asked of
//! `platform`.

use crate::engine::Engine;
use crate::memory_limit::MemoryLimits;
use crate::platform;
use crate::spec::{check_pipeline, codegen_error, Backend, BackendSpec, Prepared, SimOptions};
use crate::RuntimeError;
use weft_ir::ir::target::TargetCaps;
use weft_ir::ir::Program;
use weft_ir::passes::{unroll::UnrollOptions, PassOptions};

pub struct JitSpec;

#[allow(non_upper_case_globals)]
impl Backend {
    /// The compiled CPU backend (`cpu`): kernels JIT-compiled to native code
    /// (Cranelift), multi-threaded with rayon, over the VM's field memory.
    pub const Jit: Backend = Backend::of(&JitSpec);
}

impl BackendSpec for JitSpec {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn aliases(&self) -> &'static [&'static str] {
        &["jit"]
    }

    fn summary(&self) -> &'static str {
        "compiled CPU backend (native code)"
    }

    fn unavailable(&self) -> Option<&'static str> {
        platform::NO_JIT
    }

    fn caps(&self) -> TargetCaps {
        platform::JIT_CAPS
    }

    fn tune(&self, passes: &PassOptions) -> PassOptions {
        PassOptions {
            unroll: UnrollOptions::STENCILS,
            target: self.caps(),
            ..passes.clone()
        }
    }

    fn prepare(&self, opts: &SimOptions) -> Result<Prepared, RuntimeError> {
        Ok(Prepared::tuned(Backend::Jit, opts))
    }

    /// `auto` without a hardware GPU.
    fn auto_candidate(&self, opts: &SimOptions) -> Option<Result<Prepared, RuntimeError>> {
        Some(self.prepare(opts))
    }

    fn open(&self, program: &Program, opts: &SimOptions) -> Result<Box<dyn Engine>, RuntimeError> {
        MemoryLimits::cpu(opts.max_memory).check(program)?;
        platform::open_jit(program, opts.threads)
    }

    fn compile(&self, program: &Program) -> Result<(), RuntimeError> {
        if self.unavailable().is_some() || !self.caps().covers(&program.target) {
            return Ok(());
        }
        for (_, k) in program.kernels.iter() {
            platform::compile_jit(program, k).map_err(codegen_error)?;
        }
        Ok(())
    }

    /// Machine code from Cranelift for every kernel (nothing where there is
    /// no JIT: a browser).
    fn check_offline(&self, program: &Program, passes: &PassOptions) -> Result<(), RuntimeError> {
        if self.unavailable().is_some() {
            return Ok(());
        }
        check_pipeline(self, program, &self.tune(passes))
    }
}
