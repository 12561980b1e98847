//! weft-ir: the graph document, the node catalog, the kernel language front
//! end, the IR, its validator and all IR passes (with the IR building blocks
//! they share, `lower`), plus what the graph side and the runtime both use:
//! the errors that name graph nodes (`error`) and file I/O (`io`: `.npy`,
//! atomic writes). No GPU, UI or CUDA deps.

pub mod arena;
pub mod error;
pub mod io;
pub mod ir;
pub mod lang;
pub mod lower;
pub mod schedule;
pub mod types;

pub use arena::{Arena, Handle};
pub use types::{Scalar, Type};
pub mod graph;
pub mod passes;
