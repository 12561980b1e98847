//! The driver's part of loading: a graph file plus `--set` / `--init`
//! overrides becomes a `Program` (the runtime only ever sees that program).

use std::path::Path;
pub use weft_ir::graph::overrides::Overrides;
use weft_ir::graph::GraphDoc;
use weft_ir::ir::Program;
use weft_runtime::RuntimeError;

/// Reads, overrides, validates and builds a graph file.
pub fn load_program(path: &Path, o: &Overrides) -> Result<(GraphDoc, Program), RuntimeError> {
    Ok(weft_ir::graph::overrides::load_program(path, o)?)
}
