//! weft-runtime: the backend interface and its backends (the reference
//! `vm`, the compiled CPU backend `jit`, `wgpu`, `cuda`), field memory, the schedule executor and the view renderers
//! shared by the CLI and the app. It sees only the IR, never the graph
//! document.

pub mod backend;
/// The cuda backend: its spec everywhere (a browser's chooser shows it,
/// disabled), NVRTC and the engine natively.
pub mod cuda {
    #[cfg(not(target_arch = "wasm32"))]
    pub mod engine;
    #[cfg(not(target_arch = "wasm32"))]
    pub mod nvrtc;
    pub mod spec;
    #[cfg(not(target_arch = "wasm32"))]
    pub use engine::CudaEngine;
    #[cfg(not(target_arch = "wasm32"))]
    pub use nvrtc::*;
}
pub mod engine;
pub mod expect;
pub mod export;
/// The compiled CPU backend (`cpu`): its spec everywhere (a browser's
/// chooser shows it, disabled), its engine natively.
pub mod kernel_cache;
pub mod jit {
    #[cfg(not(target_arch = "wasm32"))]
    pub mod engine;
    pub mod spec;
    #[cfg(not(target_arch = "wasm32"))]
    pub use engine::*;
}
pub mod memory;
pub mod memory_limit;
pub mod platform;
pub mod render;
pub mod sim;
pub mod snapshot;
pub mod spec;
pub mod vm;
pub mod wgpu_backend;
pub mod wgpu_context;
pub mod wgpu_spec;

pub use engine::Engine;
pub use sim::Simulation;
pub use spec::{Backend, BackendSpec, SimOptions};

use weft_ir::error::GraphErrors;

/// Everything that can go wrong from loading a graph to running it; every
/// variant that concerns a node names it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RuntimeError {
    #[error("{0}")]
    Graph(GraphErrors),
    #[error("{message}")]
    Compile { node: String, message: String },
    #[error("node '{node}', code {line}:{col}: {message}")]
    Kernel {
        node: String,
        line: u32,
        col: u32,
        message: String,
    },
    /// A run-time failure caused by a graph node outside kernel code (a
    /// sparse pool that a host write overflows).
    #[error("node '{node}': {message}")]
    Run { node: String, message: String },
    #[error("{0}")]
    Io(String),
    /// The GPU or its driver failed (no adapter, limits, device lost).
    #[error("{0}")]
    Device(String),
    /// The backend asked for cannot run on this machine at all (no CUDA
    /// driver): a usage error, like an invalid graph, not a failure while running.
    #[error("{0}")]
    Unavailable(String),
}

impl RuntimeError {
    pub fn node(&self) -> Option<&str> {
        match self {
            RuntimeError::Graph(g) => g.0.first().and_then(|e| e.node()),
            RuntimeError::Compile { node, .. }
            | RuntimeError::Kernel { node, .. }
            | RuntimeError::Run { node, .. } => Some(node),
            RuntimeError::Io(_) | RuntimeError::Device(_) | RuntimeError::Unavailable(_) => None,
        }
    }
    /// Exit code for the CLI: 2 for an invalid graph, 1 for a failure while running.
    pub fn exit_code(&self) -> i32 {
        match self {
            RuntimeError::Graph(_)
            | RuntimeError::Compile { .. }
            | RuntimeError::Unavailable(_) => 2,
            _ => 1,
        }
    }
}

impl From<GraphErrors> for RuntimeError {
    fn from(e: GraphErrors) -> Self {
        RuntimeError::Graph(e)
    }
}
