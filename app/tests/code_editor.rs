//! Tests of the kernel code editor widget (gui/src/gui/code_editor.rs).
//!
use egui::accesskit::Role;
use egui::text::LayoutJob;
use egui::{Color32, Stroke};
use egui_kittest::kittest::Queryable;
use egui_kittest::Harness;
use std::time::Duration;
use weft_gui::gui::code_editor::{self, code_editor, highlight, CodeProblem, Debounce};

const CODE: &str = "fn kernel(i: i32) {\n    let a: i32 = 1.5;\n}";

fn problem(line: u32, col: u32, message: &str) -> CodeProblem {
    CodeProblem {
        line,
        col,
        message: message.into(),
    }
}

/// The section of `job` containing byte `at`.
fn section_at(job: &LayoutJob, at: usize) -> &egui::text::LayoutSection {
    job.sections
        .iter()
        .find(|s| s.byte_range.start.0 <= at && at < s.byte_range.end.0)
        .unwrap_or_else(|| panic!("no section covers byte {at}"))
}

fn color_at(job: &LayoutJob, text: &str, needle: &str) -> Color32 {
    section_at(job, text.find(needle).expect("needle in text"))
        .format
        .color
}

/// The byte ranges of `job` drawn with an underline.
fn underlined(job: &LayoutJob) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for s in &job.sections {
        if s.format.underline != Stroke::NONE {
            let (a, b) = (s.byte_range.start.0, s.byte_range.end.0);
            match out.last_mut() {
                Some(last) if last.1 == a => last.1 = b,
                _ => out.push((a, b)),
            }
        }
    }
    out
}

#[test]
fn highlight_colours_tokens_by_kind() {
    let code = "fn helper(x: f32) -> f32 { sin(x) * PI }\n\
                fn kernel(i: i32) {\n    // a comment\n    let mut a = 12;\n    a += i;\n}";
    for dark in [true, false] {
        let style = egui::Style {
            visuals: if dark {
                egui::Visuals::dark()
            } else {
                egui::Visuals::light()
            },
            ..Default::default()
        };
        let job = highlight(code, &style, &[]);
        assert_eq!(job.text, code);
        let keyword = color_at(&job, code, "let");
        let ident = color_at(&job, code, "a = 12");
        let ty = color_at(&job, code, "f32");
        let builtin = color_at(&job, code, "sin");
        let number = color_at(&job, code, "12");
        let comment = color_at(&job, code, "// a comment");
        let function = color_at(&job, code, "helper");
        assert_eq!(keyword, color_at(&job, code, "mut"));
        assert_eq!(keyword, color_at(&job, code, "fn"));
        assert_eq!(number, color_at(&job, code, "PI"));
        let all = [keyword, ident, ty, builtin, number, comment, function];
        for (n, a) in all.iter().enumerate() {
            for b in &all[n + 1..] {
                assert_ne!(a, b, "two token kinds share a colour (dark: {dark})");
            }
        }
        // Identifiers use the theme's text colour, so they read on its background.
        assert_eq!(ident, style.visuals.widgets.inactive.text_color());
        // Monospace everywhere.
        let mono = egui::TextStyle::Monospace.resolve(&style);
        assert!(job.sections.iter().all(|s| s.format.font_id == mono));
        // A comment runs to the end of its line only.
        let comment_section = section_at(&job, code.find("// a").unwrap());
        assert_eq!(
            &code[comment_section.byte_range.start.0..comment_section.byte_range.end.0],
            "// a comment"
        );
    }
}

#[test]
fn highlight_numbers_whole() {
    let code = "let a = 1.5e-3 + 0x1F + 2. + v.x + 1_000u32;\nfor k in 0..n {}";
    let job = highlight(code, &egui::Style::default(), &[]);
    for num in ["1.5e-3", "0x1F", "2.", "1_000u32"] {
        let s = section_at(&job, code.find(num).unwrap());
        let text = &code[s.byte_range.start.0..s.byte_range.end.0];
        assert_eq!(text, num);
    }
    // `0..n` is 0, a range and n.
    let at = code.find("0..n").unwrap();
    let s = section_at(&job, at);
    assert_eq!(&code[s.byte_range.start.0..s.byte_range.end.0], "0");
}

#[test]
fn problem_underlines_its_token() {
    let style = egui::Style::default();
    // Line 2, col 5 is `let`.
    let job = highlight(CODE, &style, &[problem(2, 5, "here")]);
    let start = CODE.find("let").unwrap();
    assert_eq!(underlined(&job), vec![(start, start + 3)]);
    let s = section_at(&job, start);
    assert_eq!(s.format.underline, Stroke::new(1.5, Color32::RED));
    // The underlined keyword keeps its keyword colour.
    assert_eq!(
        s.format.color,
        color_at(&highlight(CODE, &style, &[]), CODE, "let")
    );

    // A number is underlined whole; a punctuation mark alone.
    let job = highlight(CODE, &style, &[problem(2, 18, "a"), problem(2, 10, "b")]);
    let num = CODE.find("1.5").unwrap();
    let colon = CODE.find(": i32 =").unwrap();
    assert_eq!(underlined(&job), vec![(colon, colon + 1), (num, num + 3)]);

    // Positions past the end are clamped, not dropped or panicking.
    let job = highlight(CODE, &style, &[problem(9, 99, "eof")]);
    let last = CODE.len() - 1;
    assert_eq!(underlined(&job), vec![(last, last + 1)]);
    let job = highlight("", &style, &[problem(1, 1, "empty")]);
    assert!(underlined(&job).is_empty());
    assert!(!job.sections.is_empty());
}

#[test]
fn debounce_fires_once_per_quiet_period() {
    let mut d = Debounce::new(Duration::from_millis(300));
    assert!(!d.due(0.0));
    d.touch(1.0);
    assert!(!d.due(1.1));
    d.touch(1.2); // typing again restarts the wait
    assert!(!d.due(1.4));
    assert_eq!(
        d.remaining(1.4).map(|r| (r.as_secs_f64() * 10.0).round()),
        Some(1.0)
    );
    assert!(d.due(1.5));
    assert!(!d.due(1.6));
    assert!(!d.due(10.0));
    assert_eq!(d.remaining(10.0), None);
    d.touch(11.0);
    assert!(d.due(12.0));
    assert!(!d.due(12.0));
}

#[test]
fn typing_edits_the_code() {
    let mut harness = Harness::new_ui_state(
        |ui, state: &mut (String, bool)| {
            let response = code_editor(ui, "kernel-code", &mut state.0, &[]);
            if response.changed() {
                state.1 = true;
            }
        },
        (String::from("fn kernel(i: i32) {\n}"), false),
    );
    harness.run();
    assert!(!harness.state().1);
    let editor = harness.get_by_role(Role::MultilineTextInput);
    editor.click();
    harness.run();
    harness
        .get_by_role(Role::MultilineTextInput)
        .type_text("// hi");
    harness.run();
    assert_eq!(harness.state().0, "fn kernel(i: i32) {\n}// hi");
    assert!(harness.state().1, "changed() was not reported");
}

#[test]
fn hovering_a_problem_shows_its_message() {
    let problems = vec![problem(2, 18, "`1.5` is f32 but `a` is i32")];
    let mut harness = Harness::builder()
        .with_size(egui::vec2(480.0, 160.0))
        .build_ui_state(
            |ui, code: &mut String| {
                code_editor(ui, "hover", code, &problems);
            },
            CODE.to_string(),
        );
    harness.run();
    assert!(harness.query_by_label_contains("is f32 but").is_none());
    // Hover the second line of the editor, over the code.
    let rect = harness.get_by_role(Role::MultilineTextInput).rect();
    let style = harness.ctx.global_style();
    let font = egui::TextStyle::Monospace.resolve(&style);
    let (row, w) = harness
        .ctx
        .fonts_mut(|f| (f.row_height(&font), f.glyph_width(&font, '0')));
    let pos = egui::pos2(rect.left() + 4.0 + 18.5 * w, rect.top() + 2.0 + 1.5 * row);
    harness.hover_at(pos);
    harness.run();
    let tip = harness.get_by_label_contains("is f32 but");
    assert!(
        format!("{tip:?}").contains("2:18: `1.5` is f32 but `a` is i32"),
        "tooltip names the position: {tip:?}"
    );

    // Over a line without a problem: no tooltip.
    harness.hover_at(egui::pos2(pos.x, rect.top() + 2.0 + 0.5 * row));
    harness.run();
    assert!(harness.query_by_label_contains("is f32 but").is_none());

    // Over the line number of the line with the problem.
    harness.hover_at(egui::pos2(rect.left() - 8.0, pos.y));
    harness.run();
    assert!(harness.query_by_label_contains("is f32 but").is_some());
}

/// The snapshot renders with wgpu (lavapipe on CI machines). Without an
/// adapter: fail on CI, skip elsewhere.
fn wgpu_renderer() -> Option<egui_kittest::wgpu::WgpuTestRenderer> {
    // `WgpuTestRenderer::new` panics when it finds no adapter.
    let renderer = std::panic::catch_unwind(egui_kittest::wgpu::WgpuTestRenderer::new);
    match renderer {
        Ok(r) => Some(r),
        Err(_) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("no wgpu adapter on CI")
        }
        Err(_) => {
            println!("skipping: no wgpu adapter");
            None
        }
    }
}

#[test]
fn snapshot_with_a_problem() {
    snapshot(egui::Theme::Dark, "code_editor");
}

#[test]
fn snapshot_with_a_problem_light() {
    snapshot(egui::Theme::Light, "code_editor_light");
}

fn snapshot(theme: egui::Theme, name: &str) {
    let Some(renderer) = wgpu_renderer() else {
        return;
    };
    let code = "// Julia set step\nfn kernel(i: i32, j: i32) {\n    let mut z = vec2(i as f32, j as f32) * 0.01;\n    let a: i32 = 1.5;\n    u[(i, j)] = length(z) + random();\n}";
    let problems = vec![problem(4, 18, "`a` is i32 but `1.5` is f32")];
    let mut harness = Harness::builder()
        .with_size(egui::vec2(520.0, 150.0))
        .with_theme(theme)
        .renderer(renderer)
        .build_ui_state(
            |ui, code: &mut String| {
                code_editor(ui, "snapshot", code, &problems);
            },
            code.to_string(),
        );
    harness.run();
    let image = harness.render().expect("render");
    // Not blank, and the underline is there.
    let first = *image.get_pixel(0, 0);
    assert!(image.pixels().any(|p| *p != first), "blank image");
    let red = image
        .pixels()
        .filter(|p| p[0] > 200 && p[1] < 60 && p[2] < 60)
        .count();
    assert!(red >= 10, "no red underline ({red} red pixels)");
    harness.snapshot(name);
}

#[test]
fn an_unwired_port_is_underlined_at_its_first_use() {
    let code = "// x is a field\nfn kernel(i: i32) {\n    let a = 1.0;\n    x[i] = a;\n}\n";
    let port = weft_ir::graph::GraphError::Port {
        node: "k".into(),
        port: "x".into(),
        message: "not wired".into(),
    };
    let other = weft_ir::graph::GraphError::Node {
        node: "k".into(),
        message: "never runs".into(),
    };
    let p = code_editor::code_problems(&[&port, &other], code);
    assert_eq!((p[0].line, p[0].col), (4, 5), "the use, not the comment");
    assert_eq!(p[0].message, port.to_string());
    assert_eq!((p[1].line, p[1].col), (1, 1));
}
