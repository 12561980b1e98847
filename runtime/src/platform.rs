//! What differs between a native build and the web build (wasm32 in a
//! browser, `web/`): the one place in the runtime that knows which it is.
//!
//! The browser has no Cranelift JIT (WebAssembly cannot map executable
//! memory), no CUDA, one thread, and a main thread that must never wait:
//! GPU work finishes and buffers map while the page's event loop runs, so
//! the web build asks `Engine::ready_for_frame` before each frame and
//! reads fields back with `Engine::start_read`, never with a blocking
//! read.

use crate::engine::Engine;
use crate::RuntimeError;
use std::future::Future;
use std::sync::{Arc, Mutex};
use weft_ir::ir::Program;

/// Whether every wait on the GPU must be avoided (the browser's main thread).
/// The wgpu engine then reads its error words back after every submit, so
/// that it knows when each one finished without waiting for it.
pub const MUST_NOT_WAIT: bool = cfg!(target_arch = "wasm32");

/// Why the compiled CPU backend is not offered here (`None`: it is).
pub const NO_JIT: Option<&str> = if MUST_NOT_WAIT {
    Some("the compiled CPU backend (Cranelift JIT) does not exist in WebAssembly: use wgpu or vm")
} else {
    None
};

/// Why cuda is not offered here (`None`: it is, where a driver is found).
pub const NO_CUDA: Option<&str> = if MUST_NOT_WAIT {
    Some("CUDA does not exist in the browser: use wgpu (WebGPU) or vm")
} else {
    None
};

/// Why `auto` is not offered here: a page has its one device, and no
/// compiled CPU backend to fall back on.
pub const NO_AUTO: Option<&str> = if MUST_NOT_WAIT {
    Some("in the browser, choose wgpu (WebGPU) or vm")
} else {
    None
};

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use super::*;

    pub const JIT_CAPS: weft_ir::ir::target::TargetCaps = weft_codegen::jit::CAPS;

    pub fn open_jit(
        program: &Program,
        threads: Option<usize>,
    ) -> Result<Box<dyn Engine>, RuntimeError> {
        Ok(Box::new(crate::jit::JitEngine::new(program, threads)?))
    }

    pub fn open_cuda(
        program: &Program,
        max_memory: Option<u64>,
    ) -> Result<Box<dyn Engine>, RuntimeError> {
        Ok(Box::new(crate::cuda::CudaEngine::open(
            program, max_memory,
        )?))
    }

    pub fn compile_jit(
        p: &Program,
        k: &weft_ir::ir::Kernel,
    ) -> Result<(), weft_codegen::CodegenError> {
        weft_codegen::jit::compile_kernel(p, k, &Default::default()).map(drop)
    }

    /// Whether the CUDA driver library is on this machine.
    pub fn cuda_driver() -> Result<(), String> {
        crate::cuda::driver_status()
    }

    /// NVRTC's verdict on generated CUDA C, where NVRTC is installed
    /// (absent, the generated C is all that is checked).
    pub fn compile_nvrtc(c: &weft_codegen::cuda::CudaKernel) -> Result<(), String> {
        if crate::cuda::nvrtc_status().is_err() {
            return Ok(());
        }
        crate::cuda::compile_ptx(c, None)
            .map(drop)
            .map_err(|e| e.to_string())
    }

    pub fn wait_for<F: Future>(f: F) -> Result<F::Output, RuntimeError> {
        Ok(pollster::block_on(f))
    }

    pub fn scope_error(
        scope: wgpu::ErrorScopeGuard,
        _sink: &Arc<Mutex<Vec<String>>>,
    ) -> Option<wgpu::Error> {
        pollster::block_on(scope.pop())
    }
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use super::*;

    /// Never used to compile: `open_jit` refuses first.
    pub const JIT_CAPS: weft_ir::ir::target::TargetCaps = weft_codegen::vm::CAPS;

    pub fn open_jit(
        _program: &Program,
        _threads: Option<usize>,
    ) -> Result<Box<dyn Engine>, RuntimeError> {
        Err(RuntimeError::Unavailable(
            "the compiled CPU backend (cpu, Cranelift) does not exist in WebAssembly: \
             in the browser, graphs run on wgpu (WebGPU) or the vm"
                .into(),
        ))
    }

    pub fn open_cuda(
        _program: &Program,
        _max_memory: Option<u64>,
    ) -> Result<Box<dyn Engine>, RuntimeError> {
        Err(RuntimeError::Unavailable(
            "CUDA does not exist in the browser: graphs run on wgpu (WebGPU) or the vm".into(),
        ))
    }

    /// No JIT in WebAssembly (`NO_JIT` leaves it out of `weft check`).
    pub fn compile_jit(
        _p: &Program,
        _k: &weft_ir::ir::Kernel,
    ) -> Result<(), weft_codegen::CodegenError> {
        Ok(())
    }

    pub fn cuda_driver() -> Result<(), String> {
        Err(super::NO_CUDA.unwrap_or_default().to_string())
    }

    /// No NVRTC in a browser: the generated C is all that is checked.
    pub fn compile_nvrtc(_c: &weft_codegen::cuda::CudaKernel) -> Result<(), String> {
        Ok(())
    }

    pub fn wait_for<F: Future>(_f: F) -> Result<F::Output, RuntimeError> {
        Err(RuntimeError::Unavailable(
            "a browser page cannot wait for its GPU: the web build opens the device \
             asynchronously and shares it (WgpuContext::from_shared)"
                .into(),
        ))
    }

    /// The scope's error arrives later: it joins the device's errors, which
    /// the engine reports (naming the kernel) when it retires the next submit.
    pub fn scope_error(
        scope: wgpu::ErrorScopeGuard,
        sink: &Arc<Mutex<Vec<String>>>,
    ) -> Option<wgpu::Error> {
        let sink = sink.clone();
        let popped = scope.pop();
        wasm_bindgen_futures::spawn_local(async move {
            if let Some(e) = popped.await {
                if let Ok(mut v) = sink.lock() {
                    v.push(e.to_string());
                }
            }
        });
        None
    }
}

pub use imp::{
    compile_jit, compile_nvrtc, cuda_driver, open_cuda, open_jit, scope_error, wait_for, JIT_CAPS,
};
