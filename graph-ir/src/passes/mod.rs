//! IR passes and the one ordered pipeline that runs them.
//!
//! Each pass lives in its own file with its pre/postconditions. The
//! validator runs after every pass when `PassOptions::validate` is set (tests
//! and debug builds set it).

pub mod const_fold;
pub mod inline;
pub mod lower_access;
pub mod simplify;

use crate::ir::{validate_program, Program};

#[derive(Clone, Debug)]
pub struct PassOptions {
    /// Insert bounds checks on field accesses (run-time errors instead of wrong memory).
    pub bounds_checks: bool,
    /// Run the IR validator after every pass.
    pub validate: bool,
}

impl Default for PassOptions {
    fn default() -> Self {
        PassOptions {
            bounds_checks: true,
            validate: cfg!(debug_assertions),
        }
    }
}

/// Pipeline stages in order; `weft ir --stage NAME` prints the IR after one.
pub const STAGES: &[&str] = &[
    "front",
    "inline",
    "const_fold",
    "simplify",
    "lower_access",
    "final",
];

#[derive(Debug, Clone, PartialEq)]
pub struct PassError {
    pub pass: &'static str,
    pub kernel: String,
    pub message: String,
}

impl std::fmt::Display for PassError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "node '{}': internal compiler error after pass {}: {}",
            self.kernel, self.pass, self.message
        )
    }
}

/// Runs the pipeline; stops after `stop_after` when given (a name from `STAGES`).
pub fn run_pipeline(
    program: &mut Program,
    opts: &PassOptions,
    stop_after: Option<&str>,
) -> Result<(), PassError> {
    let check = |p: &Program, pass: &'static str, lowered: bool| -> Result<(), PassError> {
        if opts.validate {
            validate_program(p, lowered).map_err(|e| PassError {
                pass,
                kernel: e.kernel.clone(),
                message: e.to_string(),
            })?;
        }
        Ok(())
    };
    check(program, "front", false)?;
    if stop_after == Some("front") {
        return Ok(());
    }
    inline::run(program);
    check(program, "inline", false)?;
    if stop_after == Some("inline") {
        return Ok(());
    }
    const_fold::run(program);
    check(program, "const_fold", false)?;
    if stop_after == Some("const_fold") {
        return Ok(());
    }
    simplify::run(program);
    check(program, "simplify", false)?;
    if stop_after == Some("simplify") {
        return Ok(());
    }
    lower_access::run(program, opts.bounds_checks);
    check(program, "lower_access", true)?;
    if stop_after == Some("lower_access") {
        return Ok(());
    }
    // Address arithmetic from lowering folds and shrinks further.
    const_fold::run(program);
    simplify::run(program);
    check(program, "final", true)?;
    Ok(())
}
