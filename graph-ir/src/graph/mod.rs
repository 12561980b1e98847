//! The graph document and its translation to the IR.

pub mod assets;
pub mod build;
pub mod catalog;
pub mod diff;
pub mod document;
pub mod expr;
pub mod expr_body;
pub mod groups;
pub mod lint;
pub mod overrides;
pub mod refs;
pub mod scalars;
pub mod schema;
pub mod source;

pub use crate::error::{GraphError, GraphErrors};
pub use crate::ir::layout::MAX_LAYOUT_WORDS;
pub use build::{build_program, BuildOptions, MAX_RANGE};
pub use document::{
    AssetInfo, AssetRef, FrameDoc, GraphDoc, GroupDoc, GroupPort, GroupPortType, NodeDoc,
    PromotedParam, WireDoc,
};
pub use lint::GraphWarning;
pub use source::GraphSource;
