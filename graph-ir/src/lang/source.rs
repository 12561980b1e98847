//! Source positions and snippets for error messages.

use crate::ir::Span;
use proc_macro2::Span as PmSpan;
use syn::spanned::Spanned;

pub fn span_of<T: Spanned>(node: &T) -> Span {
    let s = node.span().start();
    Span::new(s.line as u32, s.column as u32 + 1)
}

/// The source text a syntax node covers, for naming it in messages.
pub fn snippet<T: Spanned>(code: &str, node: &T) -> String {
    text_of(code, node.span())
}

fn text_of(code: &str, span: PmSpan) -> String {
    let (a, b) = (span.start(), span.end());
    let lines: Vec<&str> = code.lines().collect();
    let char_slice = |line: &str, from: usize, to: Option<usize>| -> String {
        let it = line.chars().skip(from);
        match to {
            Some(t) => it.take(t.saturating_sub(from)).collect(),
            None => it.collect(),
        }
    };
    if a.line == 0 || a.line > lines.len() || b.line > lines.len() {
        return String::from("expression");
    }
    let text = if a.line == b.line {
        char_slice(lines[a.line - 1], a.column, Some(b.column))
    } else {
        let mut s = char_slice(lines[a.line - 1], a.column, None);
        for l in &lines[a.line..b.line - 1] {
            s.push(' ');
            s.push_str(l.trim());
        }
        s.push(' ');
        s.push_str(&char_slice(lines[b.line - 1], 0, Some(b.column)));
        s
    };
    let text: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.chars().count() > 40 {
        format!("{}…", text.chars().take(40).collect::<String>())
    } else {
        text
    }
}
