//! weft-codegen: turns lowered, legalized IR into each backend's executable
//! form. `vm` flattens structured IR into a register-machine program that
//! the reference VM in weft-runtime executes; `wgpu` builds one validated
//! `naga::Module` per kernel; `cuda` writes CUDA C per kernel (compiled by
//! NVRTC in the runtime); `jit` compiles to native code with Cranelift. `launch` is the launch-record layout both the
//! generators and the runtime read.
//!
//! The contract: IR that passed `weft_ir::ir::validate_program` as
//! `IrForm::Legalized` (the pass pipeline validates its result in every
//! build, release included) never makes a code generator panic; what a
//! generator cannot compile it refuses with a `CodegenError`. `guard`'s
//! `catch_unwind` is kept only as a last resort, for a bug in a generator
//! or a dependency (naga's writers, Cranelift): it turns such a panic into
//! an internal-error message naming the kernel node instead of aborting
//! the process. Nothing may rely on it.

pub mod cuda;
// Cranelift cannot map executable memory in WebAssembly (see Cargo.toml).
#[cfg(not(target_arch = "wasm32"))]
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
/// naga) into an internal-error `CodegenError` naming the node. A last
/// resort (see the crate docs): valid IR must not get here.
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
