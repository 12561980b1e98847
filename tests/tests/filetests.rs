//! Filetests (Cranelift's habit): each `tests/filetests/PASS/*.wir` file
//! holds the passes to run, a program in the IR printer's text and the
//! text expected after those passes. See tests/filetests/README.md;
//! `WEFT_BLESS=1 cargo test -p weft-tests --test filetests` rewrites the
//! expectations (read every change before committing it).

use std::path::{Path, PathBuf};
use weft_ir::ir::{parse_program, print_program, validate_program, IrForm};
use weft_ir::passes::{run_pass, PassOptions};
use weft_tests::root;

const EXPECT: &str = "; expect:";

struct Case {
    passes: Vec<String>,
    form: IrForm,
    /// Everything up to and including the `; expect:` line.
    head: String,
    input: String,
    expected: String,
}

fn read_case(path: &Path) -> Result<Case, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let Some(at) = text.find(&format!("\n{}\n", EXPECT)) else {
        return Err(format!("no '{}' line", EXPECT));
    };
    let head = text[..at + EXPECT.len() + 2].to_string();
    let expected = text[at + EXPECT.len() + 2..].to_string();
    let mut passes = None;
    let mut form = None;
    let mut input = String::new();
    for line in text[..at + 1].lines() {
        if let Some(c) = line.strip_prefix(';') {
            let c = c.trim();
            if let Some(p) = c.strip_prefix("run:") {
                passes = Some(p.split(',').map(|s| s.trim().to_string()).collect());
            } else if let Some(f) = c.strip_prefix("form:") {
                form = Some(match f.trim() {
                    "abstract" => IrForm::Abstract,
                    "lowered" => IrForm::Lowered,
                    "legalized" => IrForm::Legalized,
                    other => return Err(format!("unknown form '{}'", other)),
                });
            }
        } else {
            input.push_str(line);
            input.push('\n');
        }
    }
    let passes: Vec<String> = passes.ok_or("no '; run: PASS, ...' line")?;
    // Without `; form:`, buffer accesses mean lowered IR.
    let form = form.unwrap_or(if input.contains("buf_") {
        IrForm::Lowered
    } else {
        IrForm::Abstract
    });
    Ok(Case {
        passes,
        form,
        head,
        input: input.trim_start_matches('\n').to_string(),
        expected,
    })
}

/// The program after the case's passes, printed.
fn run_case(case: &Case) -> Result<String, String> {
    let mut p = parse_program(&case.input).map_err(|e| format!("input: {}", e))?;
    validate_program(&p, case.form).map_err(|e| format!("input is not valid IR: {}", e))?;
    let opts = PassOptions {
        validate: true,
        ..Default::default()
    };
    let mut form = case.form;
    for pass in &case.passes {
        form = run_pass(&mut p, pass, &opts, form).map_err(|e| e.to_string())?;
    }
    Ok(print_program(&p, None))
}

/// A line diff (longest common subsequence): `-` expected, `+` got.
fn diff(want: &str, got: &str) -> String {
    let a: Vec<&str> = want.lines().collect();
    let b: Vec<&str> = got.lines().collect();
    let mut l = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            l[i][j] = if a[i] == b[j] {
                l[i + 1][j + 1] + 1
            } else {
                l[i + 1][j].max(l[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out += &format!("  {}\n", a[i]);
            i += 1;
            j += 1;
        } else if j < b.len() && (i == a.len() || l[i][j + 1] >= l[i + 1][j]) {
            out += &format!("+ {}\n", b[j]);
            j += 1;
        } else {
            out += &format!("- {}\n", a[i]);
            i += 1;
        }
    }
    out
}

fn cases() -> Vec<PathBuf> {
    let mut out = vec![];
    for dir in std::fs::read_dir(root().join("tests/filetests")).unwrap() {
        let dir = dir.unwrap().path();
        if dir.is_dir() {
            for f in std::fs::read_dir(&dir).unwrap() {
                let f = f.unwrap().path();
                if f.extension().is_some_and(|e| e == "wir") {
                    out.push(f);
                }
            }
        }
    }
    out.sort();
    out
}

#[test]
fn filetests() {
    let bless = std::env::var_os("WEFT_BLESS").is_some();
    let files = cases();
    assert!(!files.is_empty(), "no tests/filetests/*/*.wir");
    let mut problems = vec![];
    for path in &files {
        let name = path
            .strip_prefix(root())
            .unwrap_or(path)
            .display()
            .to_string();
        let case = match read_case(path) {
            Ok(c) => c,
            Err(e) => {
                problems.push(format!("{}: {}", name, e));
                continue;
            }
        };
        // The folder names the pass the case is about.
        let folder = path
            .parent()
            .and_then(|d| d.file_name())
            .unwrap()
            .to_string_lossy();
        if !case.passes.iter().any(|p| *p == folder) {
            problems.push(format!(
                "{}: '; run:' does not name the folder's pass '{}'",
                name, folder
            ));
        }
        match run_case(&case) {
            Ok(got) if got == case.expected => {}
            Ok(got) if bless => {
                std::fs::write(path, format!("{}{}", case.head, got)).unwrap();
                eprintln!("blessed {}", name);
            }
            Ok(got) => problems.push(format!(
                "{}: output differs (- expected, + got; WEFT_BLESS=1 rewrites it):\n{}",
                name,
                diff(&case.expected, &got)
            )),
            Err(e) => problems.push(format!("{}: {}", name, e)),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[test]
fn a_mismatch_shows_a_diff() {
    let d = diff("a\nb\nc\n", "a\nx\nc\n");
    assert_eq!(d, "  a\n+ x\n- b\n  c\n");
}
