//! A code editor for kernel code: an editable monospace text area with line
//! numbers, syntax highlighting for the Weft kernel language and underlined
//! problems whose messages show on hover, plus the pieces a caller needs to
//! debounce checks while the user types (`Debounce`).
//!
//! Problem positions are 1-based line:col in characters, as the compiler
//! reports them (`weft_ir::lang::CodeError`). Positions that no longer exist
//! (the code changed since it was checked) are clamped to the code.

use std::hash::{Hash, Hasher};
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use egui::text::{LayoutJob, TextFormat};
use egui::{
    pos2, vec2, Color32, FontId, Galley, Rect, Response, Sense, Stroke, Style, TextBuffer,
    TextEdit, TextStyle, Ui,
};
use weft_ir::ir::Builtin;
use weft_ir::lang::lexer::{self, is_ident_char, TokenKind as LexKind};

/// A problem to underline: 1-based line and column, and the message shown on hover.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeProblem {
    pub line: u32,
    pub col: u32,
    pub message: String,
}

/// A kernel's problems placed in its code: a code error at its line:col, a
/// port's error (an unwired field) at the first use of the port's name in
/// the code (comments and strings skipped), anything else at 1:1.
pub fn code_problems(problems: &[&weft_ir::graph::GraphError], code: &str) -> Vec<CodeProblem> {
    use weft_ir::graph::GraphError;
    let tokens = lexer::tokenize(code);
    problems
        .iter()
        .map(|p| {
            let (line, col) = match p {
                GraphError::Code { line, col, .. } => (*line, *col),
                GraphError::Port { port, .. } => tokens
                    .iter()
                    .find(|t| t.kind == LexKind::Word && code[t.range.clone()] == **port)
                    .map_or((1, 1), |t| (t.line, t.col)),
                _ => (1, 1),
            };
            let message = match p {
                GraphError::Code { message, .. } => message.clone(),
                other => other.to_string(),
            };
            CodeProblem { line, col, message }
        })
        .collect()
}

const KEYWORDS: &[&str] = &[
    "fn", "let", "mut", "if", "else", "for", "in", "while", "loop", "break", "continue", "return",
    "as", "true", "false",
];

const TYPES: &[&str] = &[
    "i32", "u32", "f32", "f16", "u8", "i8", "u16", "i16", "bool", "vec2", "vec3", "vec4", "ivec2",
    "ivec3", "ivec4", "uvec2", "uvec3", "uvec4", "bvec2", "bvec3", "bvec4", "mat2", "mat3", "mat4",
];

/// Functions the language provides besides `Builtin::ALL`.
use weft_ir::lang::SPECIAL_FUNCTIONS;

const CONSTANTS: &[&str] = &["PI", "TAU"];

/// Width of the padding on each side of the line numbers.
const GUTTER_PAD: f32 = 6.0;
/// Rows the editor shows at least.
const MIN_ROWS: usize = 6;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TokenKind {
    Whitespace,
    Comment,
    Keyword,
    Type,
    /// Built-in and special functions (`sin`, `random`, `atomic_add`, ...).
    Builtin,
    /// A helper function name: after `fn`, or called.
    Function,
    /// Numbers and the constants `PI` / `TAU`.
    Number,
    Str,
    Punct,
    Ident,
}

/// Splits `code` with the kernel language's lexer and classifies words for
/// colouring; the ranges cover all of `code`.
fn tokenize(code: &str) -> Vec<(Range<usize>, TokenKind)> {
    let tokens = lexer::tokenize(code);
    let mut out = Vec::with_capacity(tokens.len());
    // Whether the previous significant token was the keyword `fn`.
    let mut after_fn = false;
    for (n, t) in tokens.iter().enumerate() {
        let word = &code[t.range.clone()];
        let kind = match t.kind {
            LexKind::Whitespace => TokenKind::Whitespace,
            LexKind::Comment => TokenKind::Comment,
            LexKind::Str => TokenKind::Str,
            LexKind::Number => TokenKind::Number,
            LexKind::Punct => TokenKind::Punct,
            LexKind::Word => {
                let called = tokens[n + 1..]
                    .iter()
                    .find(|t| t.kind != LexKind::Whitespace)
                    .is_some_and(|t| code[t.range.clone()].starts_with('('));
                if KEYWORDS.contains(&word) {
                    TokenKind::Keyword
                } else if TYPES.contains(&word) {
                    TokenKind::Type
                } else if CONSTANTS.contains(&word) {
                    TokenKind::Number
                } else if called
                    && (Builtin::from_name(word).is_some() || SPECIAL_FUNCTIONS.contains(&word))
                {
                    TokenKind::Builtin
                } else if called || after_fn {
                    TokenKind::Function
                } else {
                    TokenKind::Ident
                }
            }
        };
        if !matches!(kind, TokenKind::Whitespace | TokenKind::Comment) {
            after_fn = kind == TokenKind::Keyword && word == "fn";
        }
        out.push((t.range.clone(), kind));
    }
    out
}

/// Colours for each token kind, for the current light or dark theme.
struct Theme {
    keyword: Color32,
    ty: Color32,
    builtin: Color32,
    function: Color32,
    number: Color32,
    string: Color32,
    comment: Color32,
    punct: Color32,
    ident: Color32,
}

impl Theme {
    fn for_style(style: &Style) -> Self {
        let ident = style
            .visuals
            .override_text_color
            .unwrap_or_else(|| style.visuals.widgets.inactive.text_color());
        if style.visuals.dark_mode {
            // After Atom's "One Dark".
            Theme {
                keyword: Color32::from_rgb(0xC6, 0x78, 0xDD),
                ty: Color32::from_rgb(0xE5, 0xC0, 0x7B),
                builtin: Color32::from_rgb(0x56, 0xB6, 0xC2),
                function: Color32::from_rgb(0x61, 0xAF, 0xEF),
                number: Color32::from_rgb(0xD1, 0x9A, 0x66),
                string: Color32::from_rgb(0x98, 0xC3, 0x79),
                comment: Color32::from_rgb(0x7F, 0x84, 0x8E),
                punct: Color32::from_rgb(0x9D, 0xA5, 0xB4),
                ident,
            }
        } else {
            // After Atom's "One Light".
            Theme {
                keyword: Color32::from_rgb(0xA6, 0x26, 0xA4),
                ty: Color32::from_rgb(0xB7, 0x6B, 0x01),
                builtin: Color32::from_rgb(0x01, 0x84, 0xBC),
                function: Color32::from_rgb(0x40, 0x78, 0xF2),
                number: Color32::from_rgb(0x98, 0x68, 0x01),
                string: Color32::from_rgb(0x50, 0xA1, 0x4F),
                comment: Color32::from_rgb(0x8E, 0x90, 0x98),
                punct: Color32::from_rgb(0x5C, 0x60, 0x6B),
                ident,
            }
        }
    }

    fn format(&self, kind: TokenKind, font_id: &FontId) -> TextFormat {
        let color = match kind {
            TokenKind::Whitespace | TokenKind::Ident => self.ident,
            TokenKind::Comment => self.comment,
            TokenKind::Keyword => self.keyword,
            TokenKind::Type => self.ty,
            TokenKind::Builtin => self.builtin,
            TokenKind::Function => self.function,
            TokenKind::Number => self.number,
            TokenKind::Str => self.string,
            TokenKind::Punct => self.punct,
        };
        TextFormat {
            italics: kind == TokenKind::Comment,
            ..TextFormat::simple(font_id.clone(), color)
        }
    }
}

/// Where a problem sits in the code: its (clamped) line and the byte and
/// char ranges of the token it points at (empty on an empty line).
struct Spot {
    line: u32,
    bytes: Range<usize>,
    chars: Range<usize>,
}

/// Finds the token at a 1-based `line`:`col` (in chars): an identifier or
/// number to its end, or else one character. Lines past the end clamp to the
/// last line, columns past the end of a line to its last character.
fn locate(code: &str, line: u32, col: u32) -> Spot {
    let lines: Vec<&str> = code.split('\n').collect();
    let l = (line.max(1) as usize).min(lines.len()) - 1;
    let (mut byte0, mut char0) = (0usize, 0usize);
    for text in &lines[..l] {
        byte0 += text.len() + 1;
        char0 += text.chars().count() + 1;
    }
    let text = lines[l];
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let line_no = l as u32 + 1;
    if chars.is_empty() {
        return Spot {
            line: line_no,
            bytes: byte0..byte0,
            chars: char0..char0,
        };
    }
    let c0 = (col.max(1) as usize - 1).min(chars.len() - 1);
    let mut c1 = c0 + 1;
    if is_ident_char(chars[c0].1) {
        let number = chars[c0].1.is_ascii_digit();
        while c1 < chars.len() {
            let ch = chars[c1].1;
            let fraction =
                number && ch == '.' && chars.get(c1 + 1).is_some_and(|c| c.1.is_ascii_digit());
            if is_ident_char(ch) || fraction {
                c1 += 1;
            } else {
                break;
            }
        }
    }
    let byte_of = |c: usize| chars.get(c).map_or(text.len(), |x| x.0);
    Spot {
        line: line_no,
        bytes: byte0 + byte_of(c0)..byte0 + byte_of(c1),
        chars: char0 + c0..char0 + c1,
    }
}

/// Syntax highlighting as a LayoutJob (used by `code_editor`; public for
/// tests). Monospace font; colours follow `style.visuals.dark_mode`; the token
/// at each problem's position gets a red underline. Wrapping and line height
/// are left to the caller.
pub fn highlight(code: &str, style: &Style, problems: &[CodeProblem]) -> LayoutJob {
    let theme = Theme::for_style(style);
    let font_id = TextStyle::Monospace.resolve(style);
    let underline = Stroke::new(1.5, Color32::RED);

    // Byte ranges to underline, sorted and merged.
    let mut marked: Vec<Range<usize>> = problems
        .iter()
        .map(|p| locate(code, p.line, p.col).bytes)
        .filter(|r| !r.is_empty())
        .collect();
    marked.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<usize>> = Vec::new();
    for r in marked {
        match merged.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }

    let mut job = LayoutJob {
        keep_trailing_whitespace: true,
        ..Default::default()
    };
    for (range, kind) in tokenize(code) {
        let format = theme.format(kind, &font_id);
        let mut a = range.start;
        while a < range.end {
            let (b, under) = match merged.iter().find(|m| m.end > a) {
                Some(m) if m.start <= a => (m.end.min(range.end), true),
                Some(m) => (m.start.min(range.end), false),
                None => (range.end, false),
            };
            let mut f = format.clone();
            if under {
                f.underline = underline;
            }
            job.append(&code[a..b], 0.0, f);
            a = b;
        }
    }
    if job.sections.is_empty() {
        // An empty section still gives the (empty) first row its height.
        job.append("", 0.0, theme.format(TokenKind::Ident, &font_id));
    }
    job
}

/// The messages to show for a hover at char index `hovered` on `line`: the
/// problems whose token contains the pointer, or else all of that line's.
fn hover_messages(
    code: &str,
    problems: &[CodeProblem],
    line: u32,
    hovered: Option<usize>,
) -> String {
    let spots: Vec<(Spot, &CodeProblem)> = problems
        .iter()
        .map(|p| (locate(code, p.line, p.col), p))
        .collect();
    let on_token: Vec<&CodeProblem> = spots
        .iter()
        .filter(|(s, _)| hovered.is_some_and(|h| s.chars.start <= h && h <= s.chars.end))
        .map(|(_, p)| *p)
        .collect();
    let chosen = if on_token.is_empty() {
        spots
            .iter()
            .filter(|(s, _)| s.line == line)
            .map(|(_, p)| *p)
            .collect()
    } else {
        on_token
    };
    chosen
        .iter()
        .map(|p| format!("{}:{}: {}", p.line, p.col, p.message))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The 1-based line of char index `index` in `code`.
fn line_of_char(code: &str, index: usize) -> u32 {
    1 + code.chars().take(index).filter(|&c| c == '\n').count() as u32
}

/// Draws an editable code area with line numbers, syntax highlighting and
/// underlined problems (hovering a problem's token, its line, or its line
/// number shows the message). Returns the TextEdit response (`changed()` when
/// edited). The editor takes the available width and grows with the code;
/// put it in a `ScrollArea` to bound its height.
pub fn code_editor(
    ui: &mut Ui,
    id_salt: impl Hash,
    code: &mut String,
    problems: &[CodeProblem],
) -> Response {
    let id = {
        let mut h = std::hash::DefaultHasher::new();
        id_salt.hash(&mut h);
        ui.make_persistent_id(("weft_code_editor", h.finish()))
    };
    let font_id = TextStyle::Monospace.resolve(ui.style());
    let (row_height, digit_width) = ui
        .ctx()
        .fonts_mut(|f| (f.row_height(&font_id), f.glyph_width(&font_id, '0')));
    let line_height = row_height + ui.spacing().extra_text_line_spacing;
    let line_count = code.split('\n').count();
    let digits = line_count.to_string().len().max(2);
    let gutter_width = digits as f32 * digit_width + 2.0 * GUTTER_PAD;
    let problem_lines: Vec<u32> = problems
        .iter()
        .map(|p| locate(code, p.line, p.col).line)
        .collect();

    let mut layouter = |ui: &Ui, text: &dyn TextBuffer, wrap_width: f32| -> Arc<Galley> {
        let mut job = highlight(text.as_str(), ui.style(), problems);
        job.wrap.max_width = wrap_width;
        for section in &mut job.sections {
            section.format.line_height = Some(line_height);
        }
        ui.ctx().fonts_mut(|f| f.layout_job(job))
    };

    ui.horizontal_top(|ui| {
        ui.spacing_mut().item_spacing.x = 0.0;
        let (gutter_top, _) = ui.allocate_exact_size(vec2(gutter_width, 0.0), Sense::hover());
        let output = TextEdit::multiline(code)
            .id(id)
            .code_editor()
            .desired_width(f32::INFINITY)
            .desired_rows(MIN_ROWS)
            .layouter(&mut layouter)
            .show(ui);
        let response = output.response.response;
        let galley = output.galley;
        let galley_pos = output.galley_pos;

        // The gutter: line numbers aligned with the first row of each line.
        let gutter = Rect::from_min_max(
            pos2(gutter_top.left(), response.rect.top()),
            pos2(gutter_top.right(), response.rect.bottom()),
        );
        let visuals = ui.visuals().clone();
        let painter = ui.painter_at(gutter);
        painter.rect_filled(
            gutter,
            visuals.widgets.inactive.corner_radius,
            visuals.faint_bg_color,
        );
        let mut line_rows: Vec<(u32, f32)> = Vec::new();
        let mut line = 1u32;
        let mut starts_line = true;
        for row in &galley.rows {
            if starts_line {
                let y = galley_pos.y + row.pos.y;
                let color = if problem_lines.contains(&line) {
                    visuals.error_fg_color
                } else {
                    visuals.weak_text_color()
                };
                let mut job =
                    LayoutJob::simple_singleline(line.to_string(), font_id.clone(), color);
                for section in &mut job.sections {
                    section.format.line_height = Some(line_height);
                }
                let number = ui.ctx().fonts_mut(|f| f.layout_job(job));
                let x = gutter.right() - GUTTER_PAD - number.size().x;
                painter.galley(pos2(x, y), number, color);
                line_rows.push((line, y));
            }
            starts_line = row.ends_with_newline;
            if starts_line {
                line += 1;
            }
        }

        // Hover: over the text, the problem under the pointer (or the line's);
        // over the gutter, the problems of that line.
        if !problems.is_empty() {
            let mut tip = String::new();
            if let Some(pos) = response.hover_pos() {
                let cursor = galley.cursor_from_pos(pos - galley_pos);
                let index = cursor.index.0;
                tip = hover_messages(code, problems, line_of_char(code, index), Some(index));
            }
            let gutter_response = ui.interact(gutter, id.with("gutter"), Sense::hover());
            if let Some(pos) = gutter_response.hover_pos() {
                let hovered_line = line_rows
                    .iter()
                    .rev()
                    .find(|(_, y)| *y <= pos.y)
                    .map_or(1, |(l, _)| *l);
                tip = hover_messages(code, problems, hovered_line, None);
                if !tip.is_empty() {
                    gutter_response.on_hover_text_at_pointer(tip.clone());
                }
            } else if !tip.is_empty() {
                response.clone().on_hover_text_at_pointer(tip);
            }
        }
        response
    })
    .inner
}

/// Debounce helper: tracks the last edit time; `due(now)` is true once
/// `delay` has passed since the last `touch` (once per quiet period). Times
/// are seconds, e.g. `ui.input(|i| i.time)`.
#[derive(Clone, Debug)]
pub struct Debounce {
    delay: f64,
    last_touch: Option<f64>,
}

impl Debounce {
    pub fn new(delay: Duration) -> Self {
        Debounce {
            delay: delay.as_secs_f64(),
            last_touch: None,
        }
    }

    /// Records an edit at `now`.
    pub fn touch(&mut self, now: f64) {
        self.last_touch = Some(now);
    }

    /// True once `delay` has passed since the last `touch`; then false until the next `touch`.
    pub fn due(&mut self, now: f64) -> bool {
        match self.last_touch {
            Some(t) if now - t >= self.delay => {
                self.last_touch = None;
                true
            }
            _ => false,
        }
    }

    /// Time until `due` fires, while pending (for `ctx.request_repaint_after`).
    pub fn remaining(&self, now: f64) -> Option<Duration> {
        self.last_touch
            .map(|t| Duration::from_secs_f64((t + self.delay - now).max(0.0)))
    }
}
