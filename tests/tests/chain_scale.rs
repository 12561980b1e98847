//! Start-up on long chains (issue 48, item 18): the generated chain graphs
//! (`weft_tests::chain`) compile, the inter-kernel optimiser leaves their
//! results bit for bit as without it, and their optimised schedules are the
//! recorded ones. The goldens were checked equal to what the optimiser made
//! before the schedule passes were made linear (`weft ir --stage schedule`
//! and `--stage final` of 300- and 2,000-kernel chains, both shapes, printed
//! identically by the old and the new passes): they hold the passes to the
//! same result. How start-up grows with the graph is measured by
//! `weft bench` (docs/performance.md), not here: this machine is shared.
//! Re-record with `UPDATE_GOLDEN=1 cargo test -p weft-tests --test chain_scale`.

use weft_ir::ir::print_program;
use weft_ir::passes::{run_pipeline, PassOptions, Stage};
use weft_ir::schedule::print_schedule;
use weft_runtime::{Backend, SimOptions, Simulation};
use weft_tests::chain::{chain_graph, chain_graph_fused, FIELDS};
use weft_tests::*;

fn options(interkernel: bool) -> PassOptions {
    PassOptions {
        validate: true,
        interkernel,
        ..Default::default()
    }
}

/// The program after the schedule stage, as text: the schedule, then every
/// kernel (fused ones included).
fn scheduled(doc: &serde_json::Value) -> String {
    let mut p = build(doc).unwrap_or_else(|e| panic!("{}", e));
    run_pipeline(&mut p, &options(true), Some(Stage::Schedule)).unwrap_or_else(|e| panic!("{}", e));
    print_schedule(&p) + &print_program(&p, None)
}

fn check_golden(name: &str, text: &str) {
    let path = root().join("tests/scale").join(format!("{}.txt", name));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "{} is missing (record with UPDATE_GOLDEN=1)",
            path.display()
        )
    });
    if want != text {
        let line = want
            .lines()
            .zip(text.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(want.lines().count().min(text.lines().count()));
        panic!(
            "{} differs from the optimised program, first at line {}:\n--- expected\n{}\n--- got\n{}",
            path.display(),
            line + 1,
            want.lines().nth(line).unwrap_or("(end)"),
            text.lines().nth(line).unwrap_or("(end)")
        );
    }
}

/// The chain with stencils (short fused runs, dead scratch stores, repeats
/// looped or not) is optimised as recorded.
#[test]
fn chain_schedule_is_the_recorded_one() {
    check_golden("chain120.schedule", &scheduled(&chain_graph(120)));
}

/// The chain without stencils (one long fused run per frame segment) is
/// optimised as recorded.
#[test]
fn fused_chain_schedule_is_the_recorded_one() {
    check_golden(
        "chain_fused120.schedule",
        &scheduled(&chain_graph_fused(120)),
    );
}

/// Every field after `on_start` and two frames, with the optimiser on or off.
fn fields_after(doc: &serde_json::Value, interkernel: bool) -> (Vec<Vec<u32>>, u64) {
    let p = build(doc).unwrap_or_else(|e| panic!("{}", e));
    let mut sim = Simulation::new(
        p,
        &SimOptions {
            passes: options(interkernel),
            backend: Backend::Vm,
            threads: Some(1),
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{}", e));
    sim.start().unwrap();
    for _ in 0..2 {
        sim.step_frame().unwrap();
    }
    let names = (0..FIELDS)
        .map(|f| format!("f{}", f))
        .chain(["scratch".to_string()]);
    let words = names.map(|n| weft_tests::words(&sim, &n)).collect();
    (words, weft_ir::schedule::launches_per_frame(&sim.program))
}

/// The optimiser changes the chains (fewer launches) but not their fields,
/// on the reference VM (both shapes).
#[test]
fn chains_compute_the_same_with_and_without_the_optimiser() {
    for doc in [chain_graph(80), chain_graph_fused(80)] {
        let (off, launches_off) = fields_after(&doc, false);
        let (on, launches_on) = fields_after(&doc, true);
        assert!(
            launches_on < launches_off,
            "{} launches with the optimiser, {} without",
            launches_on,
            launches_off
        );
        assert!(off == on, "the optimiser changed a field of the chain");
        // Not a trivial chain: the fields moved away from their initial values.
        assert!(off[0].iter().any(|&w| w != 0), "f0 stayed 0");
    }
}
