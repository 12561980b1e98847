//! The Weft kernel language: a Rust-syntax subset parsed with `syn`.
//!
//! `source` handles positions and snippets, `ports` finds the field ports a
//! kernel's code uses, and `lower` type-checks the code and builds IR (type
//! inference happens there, because only the front end knows literals and
//! source text to name in errors).

mod lower;
mod ports;
mod source;

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
    let chars: Vec<char> = code.chars().collect();
    let (mut i, mut line, mut col) = (0usize, 1u32, 1u32);
    let too_deep = |line, col, message: &str| {
        Err(CodeError {
            line,
            col,
            message: message.into(),
        })
    };
    while i < chars.len() {
        let (c, next) = (chars[i], chars.get(i + 1).copied());
        let (at_line, at_col) = (line, col);
        let start = i;
        // Skip comments and string literals; find the extent of this token.
        let mut counts = 0usize;
        let mut significant = true;
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            significant = false;
        } else if c == '/' && next == Some('*') {
            let mut depth = 0usize;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            significant = false;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c.is_ascii_digit() {
            while i < chars.len()
                && (chars[i].is_alphanumeric()
                    || chars[i] == '_'
                    || (chars[i] == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)))
            {
                i += 1;
            }
        } else if c.is_alphanumeric() || c == '_' {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            if KEYWORDS.contains(&word.as_str()) {
                counts = 1;
            }
        } else {
            i += 1;
            if c.is_whitespace() {
                significant = false;
            } else if "+-*/%!&|^<>=.".contains(c) {
                counts = 1;
            }
        }
        for &ch in &chars[start..i.min(chars.len())] {
            if ch == '\n' {
                line += 1;
                col = 1;
            } else {
                col += 1;
            }
        }
        if !significant {
            continue;
        }
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
