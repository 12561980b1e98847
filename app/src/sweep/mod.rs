//! `weft sweep`: wedges (parameter sweeps) of a saved graph, run here or as a
//! job array on a cluster's own scheduler (Slurm, Kubernetes Indexed Jobs).
//!
//! A sweep is a folder: `manifest.json` (written once, by `plan`, via a
//! temporary file and a rename), `graph.json` (a copy of the graph as
//! planned) and one folder per variant, `NNNN/`, holding what `weft run`
//! writes there (frames, dumps), its log and `result.json`. A variant writes
//! only inside its own folder, so any number of them may run at once on
//! any number of machines sharing the folder.

pub mod collect;
pub mod font;
pub mod manifest;
pub mod plan;
pub mod run;
pub mod submit;

use clap::{Args, Subcommand};
use weft_runtime::Backend;

#[derive(Args)]
pub struct SweepArgs {
    #[command(subcommand)]
    pub command: SweepCommand,
}

#[derive(Subcommand)]
pub enum SweepCommand {
    /// Write a sweep's manifest: the cartesian product of every --vary (and --seeds), each value checked against the graph. Writes nothing else.
    Plan(plan::PlanArgs),
    /// Run one variant (--index, or $SLURM_ARRAY_TASK_ID, or $JOB_COMPLETION_INDEX) into SWEEP/NNNN/, or all of them here (--local).
    Run(run::SweepRunArgs),
    /// Write a job-array script for a scheduler: Slurm (submitted with sbatch) or a Kubernetes Indexed Job (written only).
    Submit(submit::SubmitArgs),
    /// List each variant as done, failed, running (or killed) or missing.
    Status(collect::StatusArgs),
    /// Write SWEEP/contact_sheet.png (each variant's frame, labelled with its values) and SWEEP/metrics.csv.
    Collect(collect::CollectArgs),
}

pub fn sweep(a: SweepArgs) -> i32 {
    match a.command {
        SweepCommand::Plan(a) => plan::plan(a),
        SweepCommand::Run(a) => run::run(a),
        SweepCommand::Submit(a) => submit::submit(a),
        SweepCommand::Status(a) => collect::status(a),
        SweepCommand::Collect(a) => collect::collect(a),
    }
}

/// `--backend NAME`, as `weft run` takes it.
pub(crate) fn backend_arg(s: &str) -> Result<Backend, String> {
    s.parse()
}

/// A usage or planning error: printed, exit code 2.
pub(crate) fn usage(message: impl std::fmt::Display) -> i32 {
    eprintln!("error: {}", message.to_string().replace('\n', "\nerror: "));
    2
}

/// An error while running or writing: printed, exit code 1.
pub(crate) fn failure(message: impl std::fmt::Display) -> i32 {
    eprintln!("error: {}", message.to_string().replace('\n', "\nerror: "));
    1
}
