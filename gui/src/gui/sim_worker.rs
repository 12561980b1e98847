//! Runs the viewport's simulation frames on a thread of their own, so that
//! the window never waits for one (issue: a click while mpm_quant played on
//! lavapipe took 1.3 s to show, because each UI frame first ran a 200–450
//! ms simulation frame).
//!
//! The simulation moves: while a frame runs, the worker owns it and the
//! viewport has none at home (`Viewport::running` keeps what the panels
//! need to know about it: the program, the frame, the backend). When the
//! frame is done, the simulation comes back with its result, the frame's
//! time and its views drawn; it stays home for at least one UI pass, in
//! which the panels read what they need (spreadsheet, memory readout,
//! pixel readout), and then goes out for the next frame. So a read never
//! holds the simulation for more than one UI pass, and a UI pass never
//! waits for the simulation.
//!
//! Jobs carry a token: a frame that returns after the viewport forgot it
//! (another graph opened, the app cleared) is dropped.

use super::platform::Instant;
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use weft_ir::ir::layout::root_of;
use weft_runtime::engine::PendingRead;
use weft_runtime::render::Image;
use weft_runtime::snapshot::Snapshot;
use weft_runtime::{RuntimeError, Simulation};

/// How the views of a frame were drawn.
pub enum Drawn {
    /// By the view kernels into their image buffers on the window's GPU
    /// (the viewport copies them into textures; nothing came to the host).
    OnGpu,
    /// Read back as pictures (the CPU backends, CUDA).
    Images(Vec<(String, Image)>),
    /// On wgpu where nothing may wait (a browser page): drawn on the
    /// simulation's GPU, the pictures on their way back.
    Reading(PendingPictures),
}

/// Views' pictures read back without waiting (`WgpuEngine::start_read`).
pub struct PendingPictures {
    reads: Vec<PictureRead>,
}

/// A view's name, width, height and pitch, its read, and its words once come.
type PictureRead = (String, [u32; 3], PendingRead, Option<Vec<u32>>);

impl PendingPictures {
    /// The pictures once every one has come (never waits).
    pub fn take(&mut self) -> Option<Result<Vec<(String, Image)>, RuntimeError>> {
        for (_, _, read, words) in &mut self.reads {
            if words.is_none() {
                match read.take() {
                    Some(Ok(w)) => *words = Some(w),
                    Some(Err(e)) => return Some(Err(e)),
                    None => {}
                }
            }
        }
        if self.reads.iter().any(|r| r.3.is_none()) {
            return None;
        }
        Some(Ok(self
            .reads
            .iter()
            .map(|(name, [w, h, pitch], _, words)| {
                let words = words.as_deref().unwrap_or_default();
                (name.clone(), Image::from_words(*w, *h, *pitch, words))
            })
            .collect()))
    }
}

/// Whether `sim` runs on wgpu where no wait is allowed (a browser page):
/// frames are then submitted without waiting for them, and pictures come
/// back frames later (`Drawn::Reading`).
pub fn must_not_wait(sim: &Simulation) -> bool {
    weft_runtime::platform::MUST_NOT_WAIT && sim.engine().on_device()
}

/// Draws the views of `sim`: on the GPU in place when `on_gpu`, else read back.
pub fn draw(sim: &mut Simulation, on_gpu: bool) -> Result<Drawn, RuntimeError> {
    if on_gpu {
        sim.draw_views().map(|_| Drawn::OnGpu)
    } else if must_not_wait(sim) {
        sim.draw_views()?;
        let program = &sim.program;
        let engine = sim.engine();
        let reads = program
            .view_kernels
            .iter()
            .map(|v| {
                let root = root_of(program, program.fields[v.image].layout);
                (
                    v.node_id.clone(),
                    [v.width, v.height, v.pitch],
                    engine.start_read(root),
                    None,
                )
            })
            .collect();
        Ok(Drawn::Reading(PendingPictures { reads }))
    } else {
        sim.render_views().map(Drawn::Images)
    }
}

/// One frame to run.
pub struct FrameJob {
    pub sim: Simulation,
    /// Time every launch of this frame (`Simulation::set_profile`).
    pub profile: bool,
    /// Launches per submission (`Simulation::step_frame_sliced`).
    pub slice: Option<usize>,
    /// Draw the views afterwards: `Some(on_gpu)`.
    pub draw: Option<bool>,
    /// Take the frame's complete state afterwards (the timeline's frame
    /// cache), here on the simulation thread.
    pub capture: bool,
}

/// A frame run, with the simulation that ran it.
pub struct FrameDone {
    pub sim: Simulation,
    /// The frame's launches, or the fault that stopped it.
    pub result: Result<usize, RuntimeError>,
    /// Wall time of the frame (GPU work included: the worker waited for it).
    pub ms: f64,
    pub profiled: bool,
    pub drawn: Option<Result<Drawn, RuntimeError>>,
    /// The frame's state, when the job asked for it and the frame ran.
    pub snapshot: Option<Result<Snapshot, RuntimeError>>,
}

/// What `SimWorker::take` found.
pub enum Returned {
    /// Nothing is out, or the frame is still running.
    Nothing,
    Frame(Box<FrameDone>),
    /// The worker thread ended (a panic in a backend): the simulation is lost.
    Lost,
}

pub struct SimWorker {
    jobs: Sender<(u64, FrameJob, egui::Context)>,
    done: Receiver<(u64, FrameDone)>,
    /// The token of the frame out now.
    away: Option<u64>,
    next: u64,
}

impl Default for SimWorker {
    fn default() -> Self {
        Self::new()
    }
}

impl SimWorker {
    pub fn new() -> SimWorker {
        let (jobs, job_rx) = channel::<(u64, FrameJob, egui::Context)>();
        let (done_tx, done) = channel();
        // In a browser page there is one thread and no worker: `send`
        // then hands every frame back, to run in the UI pass
        // (`Viewport::dispatch`).
        if !super::platform::IN_BROWSER {
            // Ends when the viewport (the sender) is dropped.
            let spawned = super::platform::spawn("weft-sim", move || {
                for (token, job, ctx) in job_rx {
                    if done_tx.send((token, run(job))).is_err() {
                        break;
                    }
                    // The window sleeps while a frame runs (no busy
                    // repainting taking the cores the frame needs): the
                    // frame's end wakes it.
                    ctx.request_repaint();
                }
            });
            if let Err(e) = spawned {
                // Sending then fails, and `send` hands the simulation back.
                eprintln!("weft: could not start the simulation thread: {}", e);
            }
        }
        SimWorker {
            jobs,
            done,
            away: None,
            next: 0,
        }
    }

    /// Whether a frame is out (the simulation is not at home).
    pub fn is_away(&self) -> bool {
        self.away.is_some()
    }

    /// Sends a frame out. On failure (no worker thread) the simulation
    /// comes back to be run here instead.
    pub fn send(&mut self, job: FrameJob, ctx: &egui::Context) -> Result<(), Box<FrameJob>> {
        self.next += 1;
        match self.jobs.send((self.next, job, ctx.clone())) {
            Ok(()) => {
                self.away = Some(self.next);
                Ok(())
            }
            Err(e) => Err(Box::new(e.0 .1)),
        }
    }

    /// The frame out now, when it is done (never waits).
    pub fn take(&mut self) -> Returned {
        loop {
            match self.done.try_recv() {
                Ok((token, done)) if Some(token) == self.away => {
                    self.away = None;
                    return Returned::Frame(Box::new(done));
                }
                // A frame forgotten by `forget`: its simulation is dropped.
                Ok(_) => continue,
                Err(TryRecvError::Empty) => return Returned::Nothing,
                Err(TryRecvError::Disconnected) => {
                    let was_away = self.away.take().is_some();
                    return if was_away {
                        Returned::Lost
                    } else {
                        Returned::Nothing
                    };
                }
            }
        }
    }

    /// Forgets the frame out now: when it comes back it is dropped.
    pub fn forget(&mut self) {
        self.away = None;
    }
}

/// Runs one frame (and draws it) on the worker thread.
pub fn run(job: FrameJob) -> FrameDone {
    let FrameJob {
        mut sim,
        profile,
        slice,
        draw: draw_on,
        capture,
    } = job;
    sim.set_profile(profile);
    let t = Instant::now();
    let result = if must_not_wait(&sim) {
        // Submitted, not waited for: the caller asked
        // `WgpuEngine::ready_for_frame` first, and a fault shows when the
        // engine retires the frame.
        sim.step_frame().map(|_| 0)
    } else {
        // A profiled frame is submitted one launch at a time anyway.
        sim.step_frame_sliced(if profile { None } else { slice })
    };
    let ms = t.elapsed().as_secs_f64() * 1e3;
    sim.set_profile(false);
    let drawn = match (&result, draw_on) {
        (Ok(_), Some(on_gpu)) => Some(draw(&mut sim, on_gpu)),
        _ => None,
    };
    let snapshot = (capture && result.is_ok()).then(|| sim.snapshot());
    FrameDone {
        sim,
        result,
        ms,
        profiled: profile,
        drawn,
        snapshot,
    }
}
