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
    // A `schedule on_start` / `schedule on_frame` section after the
    // program is its schedule (`weft_ir::schedule::print_schedule`).
    let (program, schedule) = match case.input.find("schedule on_") {
        Some(at) => (&case.input[..at], Some(&case.input[at..])),
        None => (case.input.as_str(), None),
    };
    let mut p = parse_program(program).map_err(|e| format!("input: {}", e))?;
    if let Some(s) = schedule {
        weft_ir::schedule::parse_schedule(s, &mut p).map_err(|e| format!("schedule: {}", e))?;
    }
    validate_program(&p, case.form).map_err(|e| format!("input is not valid IR: {}", e))?;
    let opts = PassOptions {
        validate: true,
        ..Default::default()
    };
    let mut form = case.form;
    for pass in &case.passes {
        form = run_pass(&mut p, pass, &opts, form).map_err(|e| e.to_string())?;
    }
    let mut out = print_program(&p, None);
    if schedule.is_some() {
        out += &weft_ir::schedule::print_schedule(&p);
    }
    Ok(out)
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

/// Runs one file; with `bless`, a differing expectation is rewritten.
fn check_file(path: &Path, bless: bool) -> Result<(), String> {
    let case = read_case(path)?;
    // The folder names the pass the case is about.
    let folder = path
        .parent()
        .and_then(|d| d.file_name())
        .map(|d| d.to_string_lossy().to_string())
        .unwrap_or_default();
    if !case.passes.contains(&folder) {
        return Err(format!(
            "'; run:' does not name the folder's pass '{}'",
            folder
        ));
    }
    let got = run_case(&case)?;
    if got == case.expected {
        Ok(())
    } else if bless {
        std::fs::write(path, format!("{}{}", case.head, got)).map_err(|e| e.to_string())?;
        eprintln!("blessed {}", path.display());
        Ok(())
    } else {
        Err(format!(
            "output differs (- expected, + got; WEFT_BLESS=1 rewrites it):\n{}",
            diff(&case.expected, &got)
        ))
    }
}

#[test]
fn filetests() {
    let bless = std::env::var_os("WEFT_BLESS").is_some();
    let files = cases();
    assert!(!files.is_empty(), "no tests/filetests/*/*.wir");
    let problems: Vec<String> = files
        .iter()
        .filter_map(|path| {
            let name = path
                .strip_prefix(root())
                .unwrap_or(path)
                .display()
                .to_string();
            check_file(path, bless)
                .err()
                .map(|e| format!("{}: {}", name, e))
        })
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// A wrong expectation fails with a diff, blessing rewrites it, and a
/// program the parser refuses is reported with its line.
#[test]
fn the_runner_reports_and_blesses() {
    let dir = std::env::temp_dir().join(format!("weft-filetests-{}", std::process::id()));
    let path = dir.join("simplify").join("case.wir");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let input = [
        "layout L0 'c' Dense shape=[4] cell_words=1 offset=0",
        "field F0 'n' : i32 shape=[4] layout=L0 offset=0",
        "kernel 'k' over range [4] params()",
        "  entry kernel(i32) -> () {",
        "    %0 = arg 0 : i32",
        "    %1 = const 0i : i32",
        "    %2 = %0 + %1 : i32",
        "    field_store n[%0] = %2",
        "  }",
        "",
        "",
    ]
    .join("\n");
    std::fs::write(
        &path,
        format!("; run: simplify\n{}; expect:\nwrong\n", input),
    )
    .unwrap();
    let e = check_file(&path, false).unwrap_err();
    assert!(
        e.contains("- wrong") && e.contains("+     field_store n[%0] = %0"),
        "{}",
        e
    );
    check_file(&path, true).unwrap();
    check_file(&path, false).unwrap();
    let blessed = std::fs::read_to_string(&path).unwrap();
    assert!(
        blessed.starts_with("; run: simplify\nlayout L0"),
        "{}",
        blessed
    );
    let bad = input.replace("%0 + %1", "%0 +? %1");
    std::fs::write(&path, format!("; run: simplify\n{}; expect:\n", bad)).unwrap();
    let e = check_file(&path, false).unwrap_err();
    assert!(e.starts_with("input: line 7, column"), "{}", e);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_mismatch_shows_a_diff() {
    let d = diff("a\nb\nc\n", "a\nx\nc\n");
    assert_eq!(d, "  a\n+ x\n- b\n  c\n");
}
