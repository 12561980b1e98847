//! What the IR validator costs per compile (docs/performance.md, "IR
//! validation"): for each graph, the pass pipeline as release builds run it
//! (the validator once, on the result), the validator alone on that result,
//! and the pipeline validating after every pass (debug builds and tests).
//!
//! `cargo run --release -p weft-ir --example validation_cost -- graphs/*.json`

use std::path::Path;
use std::time::{Duration, Instant};
use weft_ir::graph::{build_program, BuildOptions, GraphDoc};
use weft_ir::ir::{validate_program, IrForm, Program};
use weft_ir::passes::{run_pipeline, PassOptions};

/// The median of `reps` runs of `f`.
fn median(reps: usize, mut f: impl FnMut() -> Duration) -> Duration {
    let mut t: Vec<Duration> = (0..reps).map(|_| f()).collect();
    t.sort();
    t[reps / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    if paths.is_empty() {
        eprintln!("usage: validation_cost GRAPH.json...");
        std::process::exit(2);
    }
    println!("| graph | kernels | pipeline (validated once) | validator alone | pipeline validated after every pass |");
    println!("|---|---|---|---|---|");
    for path in paths.iter().filter(|p| !p.ends_with(".expect.json")) {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("{}: {}", path, e);
                continue;
            }
        };
        let base_dir = Path::new(path)
            .parent()
            .unwrap_or(Path::new("."))
            .to_path_buf();
        let front = match GraphDoc::parse(&text)
            .and_then(|d| build_program(&d, &BuildOptions { base_dir }))
        {
            Ok(p) => p,
            Err(e) => {
                eprintln!("{}: {}", path, e);
                continue;
            }
        };
        let pipeline = |validate: bool| {
            let mut p: Program = front.clone();
            let opts = PassOptions {
                validate,
                ..Default::default()
            };
            let t = Instant::now();
            run_pipeline(&mut p, &opts, None).expect("the pipeline runs");
            (t.elapsed(), p)
        };
        let reps = 15;
        let once = median(reps, || pipeline(false).0);
        let every = median(reps, || pipeline(true).0);
        let (_, result) = pipeline(false);
        let alone = median(reps, || {
            let t = Instant::now();
            validate_program(&result, IrForm::Legalized).expect("valid");
            t.elapsed()
        });
        println!(
            "| {} | {} | {} | {} ({:.1}%) | {} |",
            Path::new(path).file_stem().unwrap().to_string_lossy(),
            result.kernels.len(),
            ms(once),
            ms(alone),
            100.0 * alone.as_secs_f64() / once.as_secs_f64(),
            ms(every)
        );
    }
}
