//! The one hand-written lexer of kernel code, shared by the front end's
//! nesting pre-check (`lang::check_nesting`) and the app's code editor
//! (syntax highlighting). `syn` does the real parsing; this lexer only needs
//! to agree with Rust on where comments, strings, numbers and words start
//! and end, so that neither user counts brackets or operators inside them.

use std::ops::Range;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenKind {
    Whitespace,
    /// `// ...` to the end of the line, or a (nested) `/* ... */`.
    Comment,
    /// A string literal (it may span lines; an unterminated one runs to the end).
    Str,
    /// A numeric literal, including suffixes, exponents and a fraction.
    Number,
    /// An identifier or keyword.
    Word,
    /// Any other single character.
    Punct,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    /// Byte range in the code.
    pub range: Range<usize>,
    pub kind: TokenKind,
    /// 1-based line and column (in characters) of the first character.
    pub line: u32,
    pub col: u32,
}

pub fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Splits `code` into tokens whose ranges cover all of it, in order.
pub fn tokenize(code: &str) -> Vec<Token> {
    let chars: Vec<(usize, char)> = code.char_indices().collect();
    let n = chars.len();
    let byte_at = |i: usize| chars.get(i).map_or(code.len(), |c| c.0);
    let char_at = |i: usize| chars.get(i).map(|c| c.1);
    let mut out = Vec::new();
    let (mut i, mut line, mut col) = (0usize, 1u32, 1u32);
    while i < n {
        let start = i;
        let c = chars[i].1;
        let next = char_at(i + 1);
        let kind = if c == '/' && next == Some('/') {
            while i < n && chars[i].1 != '\n' {
                i += 1;
            }
            TokenKind::Comment
        } else if c == '/' && next == Some('*') {
            let mut depth = 0usize;
            while i < n {
                if chars[i].1 == '/' && char_at(i + 1) == Some('*') {
                    depth += 1;
                    i += 2;
                } else if chars[i].1 == '*' && char_at(i + 1) == Some('/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            TokenKind::Comment
        } else if c == '"' {
            i += 1;
            while i < n && chars[i].1 != '"' {
                i += if chars[i].1 == '\\' { 2 } else { 1 };
            }
            i = (i + 1).min(n);
            TokenKind::Str
        } else if c.is_ascii_digit() {
            let radix_prefix = c == '0' && matches!(next, Some('x' | 'X' | 'b' | 'B' | 'o' | 'O'));
            i += 1;
            while i < n {
                let ch = chars[i].1;
                let after = char_at(i + 1);
                let exponent_sign = !radix_prefix
                    && (ch == '+' || ch == '-')
                    && matches!(chars[i - 1].1, 'e' | 'E')
                    && after.is_some_and(|a| a.is_ascii_digit());
                let fraction_dot = !radix_prefix
                    && ch == '.'
                    && chars[start..i].iter().all(|c| c.1 != '.')
                    && after.is_none_or(|a| a.is_ascii_digit() || !(is_ident_char(a) || a == '.'));
                if is_ident_char(ch) || exponent_sign || fraction_dot {
                    i += 1;
                } else {
                    break;
                }
            }
            TokenKind::Number
        } else if is_ident_char(c) {
            while i < n && is_ident_char(chars[i].1) {
                i += 1;
            }
            TokenKind::Word
        } else if c.is_whitespace() {
            while i < n && chars[i].1.is_whitespace() {
                i += 1;
            }
            TokenKind::Whitespace
        } else {
            i += 1;
            TokenKind::Punct
        };
        let end = i.min(n);
        out.push(Token {
            range: byte_at(start)..byte_at(end),
            kind,
            line,
            col,
        });
        for &(_, ch) in &chars[start..end] {
            if ch == '\n' {
                line += 1;
                col = 1;
            } else {
                col += 1;
            }
        }
        i = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(code: &str) -> Vec<(&str, TokenKind)> {
        tokenize(code)
            .into_iter()
            .filter(|t| t.kind != TokenKind::Whitespace)
            .map(|t| (&code[t.range], t.kind))
            .collect()
    }

    #[test]
    fn literals_comments_and_positions() {
        use TokenKind::*;
        assert_eq!(
            kinds("x = 1.5e-3 + 0x1F; // c\n/* a /* b */ */ y.max(2.)"),
            vec![
                ("x", Word),
                ("=", Punct),
                ("1.5e-3", Number),
                ("+", Punct),
                ("0x1F", Number),
                (";", Punct),
                ("// c", Comment),
                ("/* a /* b */ */", Comment),
                ("y", Word),
                (".", Punct),
                ("max", Word),
                ("(", Punct),
                ("2.", Number),
                (")", Punct),
            ]
        );
        let t = tokenize("a\n  \"s\ns\" b");
        let b = t.last().unwrap();
        assert_eq!((b.line, b.col), (3, 4));
        assert_eq!(t.iter().map(|t| t.range.len()).sum::<usize>(), 11);
    }
}
