//! The Weft kernel language: a Rust-syntax subset parsed with `syn`.
//!
//! `source` handles positions and snippets, `ports` finds the field ports a
//! kernel's code uses, and `lower` type-checks the code and builds IR (type
//! inference happens there, because only the front end knows literals and
//! source text to name in errors).

mod lower;
mod ports;
mod source;

pub use lower::{lower_kernel, KernelEnv, LoweredKernel};
pub use ports::field_ports;

/// An error in kernel code, at a 1-based line:col of the code.
#[derive(Clone, Debug, PartialEq)]
pub struct CodeError {
    pub line: u32,
    pub col: u32,
    pub message: String,
}

impl std::fmt::Display for CodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.col, self.message)
    }
}

/// Parses kernel code into a syn file, mapping syntax errors to positions.
pub(crate) fn parse(code: &str) -> Result<syn::File, CodeError> {
    syn::parse_file(code).map_err(|e| {
        let start = e.span().start();
        CodeError { line: start.line as u32, col: start.column as u32 + 1, message: format!("syntax error: {}", e) }
    })
}
