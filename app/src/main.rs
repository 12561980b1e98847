//! The `weft` command line: run, check, ir, bench, replay.
//!
//! Exit codes: 0 success; 1 a failure while running (kernel fault, I/O,
//! replay mismatch); 2 an invalid graph or bad usage.

mod bench;
mod cli;
mod replay;
mod run;

use clap::Parser;

fn main() {
    let args = cli::Cli::parse();
    let code = match args.command {
        cli::Command::Run(a) => run::run(a),
        cli::Command::Check(a) => run::check(a),
        cli::Command::Ir(a) => run::ir(a),
        cli::Command::Bench(a) => bench::bench(a),
        cli::Command::Replay(a) => replay::replay(a),
        cli::Command::Emit(a) => run::emit(a),
        cli::Command::Nodes => run::nodes(),
        cli::Command::Schema => {
            print!("{}", weft_ir::graph::schema::graph_schema_text());
            0
        }
    };
    std::process::exit(code);
}

/// Prints an error in one readable block and returns its exit code.
pub fn fail(e: &weft_runtime::RuntimeError) -> i32 {
    eprintln!("error: {}", e.to_string().replace('\n', "\nerror: "));
    e.exit_code()
}
