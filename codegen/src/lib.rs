//! weft-codegen: turns lowered, legalized IR into each backend's executable
//! form. `vm` flattens structured IR into a register-machine program that
//! the reference VM in weft-runtime executes; `wgpu` builds one validated
//! `naga::Module` per kernel; `cuda` writes CUDA C per kernel (compiled by
//! NVRTC in the runtime); `jit` compiles to native code with Cranelift. `launch` is the launch-record layout both the
//! generators and the runtime read.
//!
//! Code generators must not panic on valid IR; `guard` is the last line of
//! defence that turns a panic (ours or a dependency's) into an error naming
//! the kernel node.

pub mod cuda;
pub mod jit;
pub mod launch;
pub mod vm;
pub mod wgpu;

/// Codegen may refuse valid IR (an unsupported construct on a backend), but never panics.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("node '{kernel}': {backend} backend cannot compile this kernel: {message}")]
pub struct CodegenError {
    pub kernel: String,
    pub backend: &'static str,
    pub message: String,
}

/// Runs a code generator for `kernel`, turning a panic inside it (or inside
/// naga) into an internal-error `CodegenError` naming the node.
pub fn guard<T>(
    kernel: &str,
    backend: &'static str,
    f: impl FnOnce() -> Result<T, CodegenError>,
) -> Result<T, CodegenError> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => Err(CodegenError {
            kernel: kernel.to_string(),
            backend,
            message: format!(
                "internal compiler error (please report it): {}",
                panic_message(payload.as_ref())
            ),
        }),
    }
}

/// The text of a caught panic.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}
