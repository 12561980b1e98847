//! The Weft kernel language: a Rust-syntax subset parsed with `syn`.
//!
//! `lexer` is the token splitter shared with the app's code editor,
//! `source` handles positions and snippets, `ports` finds the field ports a
//! kernel's code uses, and `lower` type-checks the code and builds IR (type
//! inference happens there, because only the front end knows literals and
//! source text to name in errors).

pub mod lexer;
mod lower;
mod ports;
mod source;

pub use lower::mesh_query;
/// Functions the language provides besides the math built-ins (`random`, `frame`, `select`, `atomic_*`, ...).
pub use lower::RESERVED as SPECIAL_FUNCTIONS;
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
    check_nesting(code)?;
    syn::parse_file(code).map_err(|e| {
        let start = e.span().start();
        CodeError {
            line: start.line as u32,
            col: start.column as u32 + 1,
            message: format!("syntax error: {}", e),
        }
    })
}

/// Deepest bracket nesting accepted in kernel code.
pub const MAX_NESTING: usize = 100;
/// Most operators (and `as`, `else`, `if`, ...) in one expression, counted
/// through every open bracket.
pub const MAX_CHAIN: usize = 512;

/// The parser, the front end and the passes recurse on nesting, so very deep
/// code would overflow the stack (an abort) instead of giving an error. This
/// lexical pre-check bounds the depth any of them can reach.
fn check_nesting(code: &str) -> Result<(), CodeError> {
    const KEYWORDS: &[&str] = &[
        "as", "else", "if", "return", "break", "match", "while", "loop", "for", "let",
    ];
    let mut levels: Vec<usize> = Vec::new();
    let mut chain = 0usize;
    let mut pending_reset = false;
    let too_deep = |line, col, message: &str| {
        Err(CodeError {
            line,
            col,
            message: message.into(),
        })
    };
    for tok in lexer::tokenize(code) {
        let (at_line, at_col) = (tok.line, tok.col);
        let text = &code[tok.range.clone()];
        let c = text.chars().next().unwrap_or(' ');
        let counts = match tok.kind {
            lexer::TokenKind::Whitespace | lexer::TokenKind::Comment => continue,
            lexer::TokenKind::Word => KEYWORDS.contains(&text) as usize,
            lexer::TokenKind::Punct => "+-*/%!&|^<>=.".contains(c) as usize,
            lexer::TokenKind::Str | lexer::TokenKind::Number => 0,
        };
        // After a closing brace, a new statement starts unless the expression goes on.
        if pending_reset && counts == 0 {
            if let Some(n) = levels.last_mut() {
                chain -= *n;
                *n = 0;
            }
        }
        pending_reset = false;
        match c {
            '(' | '[' | '{' => {
                levels.push(0);
                if levels.len() > MAX_NESTING {
                    return too_deep(at_line, at_col, &format!("code nests brackets more than {} levels deep; use helper functions or variables", MAX_NESTING));
                }
            }
            ')' | ']' | '}' => {
                chain -= levels.pop().unwrap_or(0);
                pending_reset = c == '}';
            }
            ';' | ',' => {
                if let Some(n) = levels.last_mut() {
                    chain -= *n;
                    *n = 0;
                }
            }
            _ => {
                if let (Some(n), 1) = (levels.last_mut(), counts) {
                    *n += 1;
                    chain += 1;
                    if chain > MAX_CHAIN {
                        return too_deep(at_line, at_col, &format!("this expression is too long or too deeply nested (more than {} operators); split it with `let` variables", MAX_CHAIN));
                    }
                }
            }
        }
    }
    Ok(())
}
