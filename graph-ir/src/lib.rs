//! weft-ir: the graph document, the node catalog, the kernel language front
//! end, the IR, its validator and all IR passes. No GPU, UI or CUDA deps.

pub mod arena;
pub mod ir;
pub mod lang;
pub mod types;

pub use arena::{Arena, Handle};
pub use types::{Scalar, Type};
pub mod graph;
pub mod passes;
