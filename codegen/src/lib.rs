//! weft-codegen: turns validated, lowered IR into each backend's executable
//! form. `cpu` flattens structured IR into a register-machine program that
//! the reference interpreter in weft-runtime executes.

pub mod cpu;
pub mod gpu;
pub mod jit;

/// Codegen may refuse valid IR (an unsupported construct on a backend), but never panics.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("node '{kernel}': {backend} backend cannot compile this kernel: {message}")]
pub struct CodegenError {
    pub kernel: String,
    pub backend: &'static str,
    pub message: String,
}
