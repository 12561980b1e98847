//! The `weft` command line (run, render, check, ir, bench, replay, emit) and, with
//! no command or `weft gui`, the desktop app.
//!
//! Exit codes: 0 success; 1 a failure while running (kernel fault, I/O,
//! replay mismatch); 2 an invalid graph or bad usage.

mod bench;
mod cli;
mod grad;
use weft_gui::gui;
mod load;
mod render;
mod replay;
mod run;
mod sweep;

use clap::Parser;

fn main() {
    let args = cli::Cli::parse();
    // Not for the commands that pipe frames into ffmpeg (render, and the
    // app's Render dialog): an ffmpeg that fails would end Weft with
    // SIGPIPE before it could say why. Rust's default (ignored, EPIPE
    // returned) lets the render report ffmpeg's own error instead.
    if !matches!(
        args.command,
        None | Some(cli::Command::Gui(_)) | Some(cli::Command::Render(_))
    ) {
        quiet_on_closed_pipe();
    }
    let code = match args.command {
        None => gui::platform::run(gui::GuiOptions {
            native_file_dialogs: true,
            ..Default::default()
        }),
        Some(cli::Command::Gui(a)) => gui::platform::run(gui::GuiOptions {
            graph: a.graph,
            screenshot: a.screenshot,
            after_frames: a.after_frames,
            config_dir: None,
            native_file_dialogs: !a.weft_file_dialog,
            documents_dir: None,
            backend: a.backend,
            ..Default::default()
        }),
        Some(cli::Command::Run(a)) => run::run(a),
        Some(cli::Command::Render(a)) => render::render(a),
        Some(cli::Command::Bake(a)) => bake(a),
        Some(cli::Command::Check(a)) => run::check(a),
        Some(cli::Command::Ir(a)) => run::ir(a),
        Some(cli::Command::Bench(a)) => bench::bench(a),
        Some(cli::Command::Replay(a)) => replay::replay(a),
        Some(cli::Command::Emit(a)) => run::emit(a),
        Some(cli::Command::Grad(a)) => grad::grad(a),
        Some(cli::Command::Gradcheck(a)) => grad::gradcheck(a),
        Some(cli::Command::Sweep(a)) => sweep::sweep(a),
        Some(cli::Command::Nodes) => run::nodes(),
        Some(cli::Command::Schema) => {
            print!("{}", weft_ir::graph::schema::graph_schema_text());
            0
        }
    };
    std::process::exit(code);
}

/// `weft bake`: `gui::bake::bake`, the code the app's Bake button runs.
fn bake(a: cli::BakeArgs) -> i32 {
    let doc = match weft_ir::graph::GraphDoc::load(&a.graph) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {}", e);
            return 2;
        }
    };
    let base = a
        .graph
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_default();
    let contents = a.fields.unwrap_or_default();
    // Unknown `--fields` names are a usage error (2), as `weft run --dump
    // nosuch` is, found before anything is baked; a graph that does not
    // build is left to `bake`, which reports it as before.
    let source = weft_ir::graph::GraphSource::in_folder(doc, base);
    if let Ok(p) = source.build() {
        if let Err(e) = gui::bake::baked_roots(&p, &contents) {
            eprintln!("error: {}", e);
            return 2;
        }
    }
    let out = a.out.unwrap_or_else(|| gui::bake::cache_dir_for(&a.graph));
    let (first, last) = a.frames;
    let never = std::sync::atomic::AtomicBool::new(false);
    let r = gui::bake::bake(
        &source,
        &weft_runtime::SimOptions {
            threads: a.threads.map(|t| t as usize),
            ..gui::bake::options(a.backend)
        },
        first,
        last,
        &contents,
        &out,
        &never,
        &|f| eprint!("\rbaked frame {}", f),
    );
    eprintln!();
    match r {
        Ok(n) => {
            println!(
                "baked {} frames ({}..{}) into {}",
                n,
                first,
                last,
                out.display()
            );
            0
        }
        Err(e) => {
            eprintln!("error: {}", e.replace('\n', "\nerror: "));
            1
        }
    }
}

/// Prints an error in one readable block and returns its exit code.
pub fn fail(e: &weft_runtime::RuntimeError) -> i32 {
    eprintln!("error: {}", e.to_string().replace('\n', "\nerror: "));
    e.exit_code()
}

/// Output piped into a reader that stops early (`weft emit cuda G | head`)
/// ends the process quietly, as other command-line tools do. Rust ignores
/// SIGPIPE, so every `println!` after the reader closed would panic
/// ("failed printing to stdout: Broken pipe"); the default action ends the
/// process at the first such write instead.
fn quiet_on_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: restores the default action of one signal before any thread
    // starts; no handler runs Rust code.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
