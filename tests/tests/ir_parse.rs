//! The IR text parser (`weft_ir::ir::parse`) against the printer: for every
//! golden file and every shipped example at every pipeline stage,
//! `print(parse(text)) == text`.

use rayon::prelude::*;
use weft_ir::ir::{parse_program, print_program};
use weft_ir::passes::{run_pipeline, PassOptions, Stage};
use weft_tests::*;

fn round_trip(what: &str, text: &str) -> Option<String> {
    match parse_program(text) {
        Ok(p) => {
            let again = print_program(&p, None);
            (again != text).then(|| {
                let line = text
                    .lines()
                    .zip(again.lines())
                    .position(|(a, b)| a != b)
                    .map_or(0, |n| n + 1);
                format!("{}: printed back differently from line {}", what, line)
            })
        }
        Err(e) => Some(format!("{}: {}", what, e)),
    }
}

#[test]
fn golden_files_round_trip() {
    let mut problems = vec![];
    let mut n = 0;
    for e in std::fs::read_dir(root().join("tests/golden")).unwrap() {
        let path = e.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        n += 1;
        problems.extend(round_trip(&path.display().to_string(), &text));
        // The sizes the text does not show are the layout module's.
        if let Ok(p) = parse_program(&text) {
            if p.roots().any(|r| p.layouts[r].tree_words == 0) {
                problems.push(format!("{}: layout sizes not computed", path.display()));
            }
        }
    }
    assert!(n >= 40, "only {} golden files", n);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_example_round_trips_at_every_stage() {
    let mut names: Vec<String> = std::fs::read_dir(root().join("graphs"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().ok()?;
            let stem = name.strip_suffix(".json")?;
            (!stem.ends_with(".expect")).then(|| stem.to_string())
        })
        .collect();
    names.sort();
    assert!(names.len() >= 20, "{:?}", names);
    let problems: Vec<String> = names
        .par_iter()
        .flat_map(|name| {
            let doc = example(name);
            let mut out = vec![];
            for stage in Stage::ALL {
                let mut p = build(&doc).unwrap_or_else(|e| panic!("{}: {}", name, e));
                let opts = PassOptions {
                    validate: false,
                    ..Default::default()
                };
                run_pipeline(&mut p, &opts, Some(stage))
                    .unwrap_or_else(|e| panic!("{} at {}: {}", name, stage, e));
                let text = print_program(&p, None);
                out.extend(round_trip(&format!("{} at {}", name, stage), &text));
            }
            out
        })
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
