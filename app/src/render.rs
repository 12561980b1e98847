//! `weft render`: the command-line face of `weft_open::render` (the app's
//! Render dialog calls the same function), with progress on stderr and
//! Ctrl+C turned into a cancel, so an interrupted movie leaves neither a
//! half-written file at the destination nor its temporary file beside it.

use crate::cli::RenderArgs;
use crate::run::{overrides, sim_options};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use weft_open::render::{render as render_spec, Progress, RenderError, RenderSpec};

/// Set by SIGINT while a render runs: the render stops after its frame.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

pub fn render(a: RenderArgs) -> i32 {
    let spec = RenderSpec {
        view: a.view.clone(),
        first: a.frames.0,
        last: a.frames.1,
        width: a.size.0,
        height: a.size.1,
        out: a.out.clone(),
        fps: a.fps,
        resume: a.resume.clone(),
    };
    // Usage errors (the output path, odd sizes, ffmpeg missing) before the
    // graph is even loaded: nothing is simulated for a render that cannot
    // be written.
    if let Err(e) = weft_open::render::check_spec(&spec) {
        return fail(&e);
    }
    let source = match weft_open::source(&a.graph, &overrides(&a.overrides)) {
        Ok(s) => s,
        Err(e) => return crate::fail(&e),
    };
    let opts = sim_options(&a.overrides, a.backend, false);
    catch_interrupt();
    let total = (spec.last - spec.first + 1) as u64;
    let bar = std::io::stderr().is_terminal().then(|| {
        let b = ProgressBar::new(total);
        b.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} frames {elapsed} eta {eta} {msg}")
                .expect("valid template"),
        );
        b
    });
    let mut on_frame = |p: Progress| match &bar {
        Some(b) => {
            b.set_position(p.rendered as u64);
            if p.frame < spec.first {
                b.set_message(format!("simulating frame {}", p.frame));
            } else {
                b.set_message(String::new());
            }
        }
        // Not a terminal (a log, CI): one line per frame drawn.
        None if p.frame >= spec.first => {
            eprintln!("render: frame {} ({}/{})", p.frame, p.rendered, p.total)
        }
        None => {}
    };
    let r = render_spec(&source, &opts, &spec, &INTERRUPTED, &mut on_frame);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    match r {
        Ok(done) => {
            for s in &done.skipped {
                eprintln!("warning: skipped a damaged snapshot: {}", s);
            }
            if let Some((path, frame)) = &done.resumed {
                eprintln!("resumed from {} (frame {})", path.display(), frame);
            }
            let what = match done.files.as_slice() {
                [one] => one.display().to_string(),
                [first, .., last] => format!("{} .. {}", first.display(), last.display()),
                [] => "nothing".into(),
            };
            println!(
                "rendered {} frame{} of '{}' ({}x{}, {}) on {}: {}",
                done.frames,
                if done.frames == 1 { "" } else { "s" },
                spec.view,
                spec.width,
                spec.height,
                if spec
                    .out
                    .extension()
                    .is_some_and(|e| e.eq_ignore_ascii_case("mp4"))
                {
                    format!("H.264 at {} fps", spec.fps)
                } else {
                    "PNG".to_string()
                },
                done.backend,
                what
            );
            0
        }
        Err(e @ RenderError::Cancelled { .. }) => {
            eprintln!("{}", e);
            // The shell's code for a command ended by SIGINT.
            130
        }
        Err(e) => fail(&e),
    }
}

/// Prints a render error in one readable block and returns its exit code.
fn fail(e: &RenderError) -> i32 {
    eprintln!("error: {}", e.to_string().replace('\n', "\nerror: "));
    e.exit_code()
}

#[cfg(unix)]
extern "C" fn on_interrupt(_: libc::c_int) {
    // Async-signal-safe: one atomic store.
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// Ctrl+C cancels the render (see the module doc) instead of killing the
/// process mid-write.
fn catch_interrupt() {
    #[cfg(unix)]
    // SAFETY: the handler only stores to an atomic, which is
    // async-signal-safe; it is installed before any render thread starts.
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_interrupt as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
}
