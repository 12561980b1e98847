//! The cuda backend as the registry lists it. Its engine and NVRTC exist
//! only natively: what differs in a browser is asked of `platform`.

use crate::engine::Engine;
use crate::platform;
use crate::spec::{
    codegen_error, compile_for, on_backend, Backend, BackendSpec, Prepared, SimOptions,
};
use crate::RuntimeError;
use weft_ir::ir::target::TargetCaps;
use weft_ir::ir::Program;
use weft_ir::passes::PassOptions;

pub struct CudaSpec;

#[allow(non_upper_case_globals)]
impl Backend {
    /// CUDA C compiled by NVRTC, launched through the CUDA driver (NVIDIA
    /// GPUs only; never chosen by `Auto`).
    pub const Cuda: Backend = Backend::of(&CudaSpec);
}

impl BackendSpec for CudaSpec {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn summary(&self) -> &'static str {
        "NVIDIA GPU through CUDA (views drawn on the host)"
    }

    fn unavailable(&self) -> Option<&'static str> {
        platform::NO_CUDA
    }

    fn probe(&self) -> Result<(), String> {
        platform::cuda_driver()
    }

    fn caps(&self) -> TargetCaps {
        weft_codegen::cuda::CAPS
    }

    fn prepare(&self, opts: &SimOptions) -> Result<Prepared, RuntimeError> {
        Ok(Prepared::tuned(Backend::Cuda, opts))
    }

    fn open(&self, program: &Program, opts: &SimOptions) -> Result<Box<dyn Engine>, RuntimeError> {
        platform::open_cuda(program, opts.max_memory)
    }

    /// The CUDA C of every kernel (NVRTC is `check_offline`'s business).
    fn compile(&self, program: &Program) -> Result<(), RuntimeError> {
        if !self.caps().covers(&program.target) {
            return Ok(());
        }
        for (_, k) in program.kernels.iter() {
            weft_codegen::cuda::compile_kernel(program, k).map_err(codegen_error)?;
        }
        Ok(())
    }

    /// The CUDA C, compiled by NVRTC where NVRTC is present.
    fn check_offline(&self, program: &Program, passes: &PassOptions) -> Result<(), RuntimeError> {
        let p = compile_for(self, program, &self.tune(passes))?;
        for (_, k) in p.kernels.iter() {
            let c = weft_codegen::cuda::compile_kernel(&p, k)
                .map_err(|e| on_backend(self.name(), codegen_error(e)))?;
            platform::compile_nvrtc(&c).map_err(|e| RuntimeError::Compile {
                node: k.name.clone(),
                message: format!("on --backend {}: {}", self.name(), e),
            })?;
        }
        Ok(())
    }
}
