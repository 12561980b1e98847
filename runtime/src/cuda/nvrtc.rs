//! Where the cuda backend meets CUDA: kernels as CUDA C (`weft_codegen::cuda`), compiled to
//! PTX by NVRTC and launched through the CUDA driver, both loaded at run
//! time with `cudarc` (dynamic loading), so the binary starts on machines
//! without CUDA.
//!
//! cudarc panics when it touches a library that is not there, so every
//! entry point probes first ([`nvrtc_status`], [`driver_status`]) and
//! turns absence into [`RuntimeError::Unavailable`]. NVRTC alone needs no
//! GPU: [`compile_ptx`] is what CI uses to check every example's and every
//! corpus kernel's source.
//!
//! NVRTC is found through the dynamic loader's search path
//! (`LD_LIBRARY_PATH`), under the names cudarc tries (`libnvrtc.so`,
//! `libnvrtc.so.13`, …); the PyPI wheel `nvidia-cuda-nvrtc` puts it in
//! `site-packages/nvidia/cu13/lib` (see `.ci/run`).

use crate::kernel_cache::{Keep, KernelCache, KernelKey};
use crate::RuntimeError;
use std::sync::{Arc, OnceLock};
use weft_codegen::cuda::CudaKernel;

/// Whether NVRTC can be loaded; `Err` says what is missing.
pub fn nvrtc_status() -> Result<(), String> {
    // SAFETY: only tries to dlopen the library under cudarc's candidate names.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(
            "NVRTC (libnvrtc.so) was not found on the library path; install the CUDA toolkit \
             or `pip install nvidia-cuda-nvrtc` and add its lib folder to LD_LIBRARY_PATH"
                .into(),
        )
    }
}

/// Whether the CUDA driver library can be loaded; `Err` says what is missing.
pub fn driver_status() -> Result<(), String> {
    // SAFETY: only tries to dlopen the library under cudarc's candidate names.
    if unsafe { cudarc::driver::sys::is_culib_present() } {
        Ok(())
    } else {
        Err("no CUDA driver: libcuda.so (the NVIDIA driver) was not found on this machine".into())
    }
}

/// The error for `--backend cuda` where it cannot run.
pub(crate) fn unavailable(why: &str) -> RuntimeError {
    RuntimeError::Unavailable(format!(
        "the cuda backend cannot run here: {}; use --backend auto, cpu or wgpu",
        why
    ))
}

/// Options NVRTC compiles every kernel with.
fn nvrtc_options(arch: Option<&str>) -> Vec<String> {
    let mut o = vec![
        // Products and sums stay separate operations, as on the interpreter.
        "--fmad=false".to_string(),
        // IEEE division, square root and denormals (the interpreter's f32).
        "--prec-div=true".into(),
        "--prec-sqrt=true".into(),
        "--ftz=false".into(),
    ];
    if let Some(a) = arch {
        o.push(format!("--gpu-architecture={}", a));
    }
    o
}

/// PTX already built in this process, by (source, architecture): kernels
/// are cached by content, so reopening a simulation or editing one kernel
/// recompiles only what changed.
fn ptx_cache() -> &'static KernelCache<String> {
    static CACHE: OnceLock<KernelCache<String>> = OnceLock::new();
    CACHE.get_or_init(|| KernelCache::new(Keep::Always))
}

/// Compiles a kernel's source to PTX for `arch` (e.g. `compute_90`; `None`:
/// NVRTC's default). An NVRTC error is a `Compile` error naming the kernel
/// with NVRTC's log; a missing NVRTC is `Unavailable`.
pub fn compile_ptx(kernel: &CudaKernel, arch: Option<&str>) -> Result<Arc<String>, RuntimeError> {
    nvrtc_status().map_err(|w| unavailable(&w))?;
    let key = KernelKey::of_source(&kernel.source, &arch);
    if let Some(p) = ptx_cache().get(&key) {
        return Ok(p);
    }
    let opts = cudarc::nvrtc::CompileOptions {
        options: nvrtc_options(arch),
        name: Some(format!("{}.cu", kernel.name)),
        ..Default::default()
    };
    let src = kernel.source.clone();
    // cudarc unwraps some NVRTC results internally: a panic becomes an error too.
    let res = std::panic::catch_unwind(move || cudarc::nvrtc::compile_ptx_with_opts(src, opts));
    let ptx = match res {
        Ok(Ok(p)) => p.to_src(),
        Ok(Err(e)) => {
            let detail = match &e {
                cudarc::nvrtc::CompileError::CompileError { log, .. } => {
                    log.to_string_lossy().into_owned()
                }
                other => format!("{:?}", other),
            };
            return Err(RuntimeError::Compile {
                node: kernel.name.clone(),
                message: format!(
                    "node '{}': NVRTC cannot compile the generated CUDA C (please report it): {}",
                    kernel.name, detail
                ),
            });
        }
        Err(p) => {
            return Err(RuntimeError::Compile {
                node: kernel.name.clone(),
                message: format!(
                    "node '{}': NVRTC failed: {}",
                    kernel.name,
                    weft_codegen::panic_message(p.as_ref())
                ),
            })
        }
    };
    let ptx = Arc::new(ptx);
    ptx_cache().insert(key, ptx.clone());
    Ok(ptx)
}
