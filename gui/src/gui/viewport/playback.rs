//! Playing: frames sent to the simulation thread and taken back, slicing
//! on a shared GPU, seeking through the frame cache and baked frames,
//! reset, and the per-kernel times.

use super::*;

impl Viewport {
    /// Takes a frame that came back and swaps in a finished background
    /// build; never waits for either (`end_pass` sends frames out).
    /// Returns a message for the status line when a rebuild replaced a
    /// running simulation.
    pub fn update(&mut self, ctx: &egui::Context) -> Option<String> {
        self.receive(ctx);
        self.receive_pictures(ctx);
        let mut status = None;
        if !self.worker.is_away() {
            status = self.swap_in_build(ctx);
            if !self.playing {
                self.settle();
            }
            if self.pending.is_none() {
                self.follow_seek();
            }
        }
        // While a frame is out the window sleeps until input or the
        // frame's end (the simulation thread wakes it).
        if !self.worker.is_away() && (self.playing || self.queued_steps > 0) {
            ctx.request_repaint();
        }
        if self.needs_draw && self.sim.is_some() && !self.gpu_busy(ctx) {
            self.draw(ctx);
        }
        status
    }

    /// Shows the pictures that came back (wgpu in a browser page).
    pub(super) fn receive_pictures(&mut self, ctx: &egui::Context) {
        let Some(p) = &mut self.pictures else { return };
        match p.take() {
            None => ctx.request_repaint(),
            Some(r) => {
                self.pictures = None;
                match r {
                    Ok(images) => self.present(ctx, Drawn::Images(images)),
                    Err(e) => self.error = Some(e.to_string()),
                }
            }
        }
    }

    /// Where nothing may wait (wgpu in a browser page): whether the GPU
    /// has no room for another frame or drawing yet, or pictures are on
    /// their way; the next pass asks again.
    pub(super) fn gpu_busy(&mut self, ctx: &egui::Context) -> bool {
        let Some(sim) = self.sim.as_ref().filter(|s| sim_worker::must_not_wait(s)) else {
            return false;
        };
        let ready = match sim.engine().ready_for_frame() {
            Ok(r) => r,
            Err(e) => {
                self.fault = Some(Fault::from(&e));
                self.playing = false;
                return true;
            }
        };
        let busy = !ready || self.pictures.is_some();
        if busy {
            ctx.request_repaint();
        }
        busy
    }

    /// The end of a UI pass: the panels have read what they need, so the
    /// simulation goes out for its next frame (when playing, or for Step).
    pub fn end_pass(&mut self, ctx: &egui::Context) {
        if self.worker.is_away()
            || self.sim.is_none()
            || self.pending.is_some()
            || self.gpu_busy(ctx)
        {
            return;
        }
        // A seek asked for in this pass: a cached frame is restored now
        // rather than simulated to.
        self.follow_seek();
        if self.needs_draw {
            ctx.request_repaint();
        }
        let seeking = self
            .seek_to
            .zip(self.sim.as_ref())
            .is_some_and(|(t, sim)| sim.frame < t);
        let next = self.sim.as_ref().map_or(0, |s| s.frame + 1);
        if !self.playing {
            self.last_tick = None;
        } else if !seeking && self.queued_steps == 0 && !self.play_due(ctx) {
            // A flipbook holds the frame shown until its time is up.
            return;
        }
        if seeking {
            self.dispatch(ctx);
        } else if self.playing && self.queued_steps == 0 && self.cache.where_is(next).is_some() {
            // The next frame is cached (baked, or simulated before a
            // scrub back): it is shown from the cache, not simulated.
            self.seek_to = Some(next);
            self.follow_seek();
            ctx.request_repaint();
        } else if (self.playing || self.queued_steps > 0) && self.display_only {
            // A partial baked frame is shown: the next frame is simulated
            // from the last complete state before it.
            self.queued_steps = self.queued_steps.saturating_sub(1);
            self.seek_to = Some(next);
            self.follow_seek();
            if self.sim.as_ref().is_some_and(|s| s.frame < next) {
                self.dispatch(ctx);
            }
            ctx.request_repaint();
        } else if self.playing || self.queued_steps > 0 {
            self.queued_steps = self.queued_steps.saturating_sub(1);
            self.dispatch(ctx);
        }
    }

    /// Whether playing may move on to the next frame now: always, unless a
    /// flipbook rate (`play_fps`) is set and 1/fps has not passed since the
    /// last frame moved on; then a repaint is asked for when it will have.
    /// On time, the beat is kept (a late pass does not push the next frame
    /// back); after a pause it starts afresh. Counts the frame as moved on.
    pub fn play_due(&mut self, ctx: &egui::Context) -> bool {
        let Some(fps) = self.play_fps.filter(|f| *f > 0.0) else {
            return true;
        };
        let now = ctx.input(|i| i.time);
        let period = 1.0 / fps as f64;
        match self.last_tick {
            Some(t) if now < t + period - 1e-9 => {
                ctx.request_repaint_after(std::time::Duration::from_secs_f64(t + period - now));
                false
            }
            Some(t) if now < t + 2.0 * period => {
                self.last_tick = Some(t + period);
                true
            }
            _ => {
                self.last_tick = Some(now);
                true
            }
        }
    }

    /// Takes the baked cache's frames when the running build is of the
    /// graph baked (editor positions aside); otherwise leaves them unused.
    pub fn take_baked(&mut self) -> usize {
        use crate::gui::bake::{check_cache, CacheState};
        self.baked_stale.clear();
        self.baked_stale_why.clear();
        if self.running.is_none() && self.sim.is_none() {
            return 0;
        }
        let (Some(dir), Some((_, doc))) = (&self.bake_dir, &self.built_from) else {
            return 0;
        };
        match check_cache(
            dir,
            &self.built_assets.source(doc, self.built_assets.base_dir()),
        ) {
            CacheState::Fresh { partial } => self.cache.add_baked(dir, partial),
            CacheState::Stale(why) => {
                self.baked_stale = weft_runtime::snapshot::list(dir);
                self.baked_stale.sort_unstable();
                self.baked_stale_why = why;
                0
            }
            CacheState::Absent => 0,
        }
    }

    /// Asks for frame `frame` (the timeline): a cached frame is restored
    /// (no kernel runs); another is simulated forward to from the nearest
    /// earlier cached frame (or from the frame the simulation is at, when
    /// that is nearer).
    pub fn seek(&mut self, frame: i32) {
        if self.running.is_some() {
            self.seek_to = Some(frame.max(0));
            self.queued_steps = 0;
        }
    }

    /// Carries out `seek_to` while the simulation is home: restores the
    /// frame, or the frame to simulate forward from (`end_pass` then sends
    /// frames out until it is reached).
    pub(super) fn follow_seek(&mut self) {
        let Some(target) = self.seek_to else { return };
        let Some(sim) = self.sim.as_mut() else { return };
        let now = sim.frame;
        if now == target {
            self.seek_to = None;
            return;
        }
        if self.cache.is_partial(target) {
            // A frame of a bake of chosen fields: shown as baked.
            let r = self
                .cache
                .get(target)
                .and_then(|s| s.ok_or_else(|| format!("frame {} left the cache", target)))
                .and_then(|s| sim.show_partial(&s).map_err(|e| e.to_string()));
            match r {
                Ok(()) => self.display_only = true,
                Err(e) => {
                    self.error = Some(format!("frame cache: {}", e));
                    self.cache.clear();
                    self.display_only = false;
                    let _ = sim.reset().and_then(|_| sim.start());
                }
            }
            return self.seek_done(target);
        }
        // The state shown may be a partial frame's: then it is no place to
        // simulate on from.
        let invalid = self.display_only;
        let from = match self.cache.at_or_before(target) {
            Some(c) if c == target || c > now || target < now || invalid => Some(c),
            Some(_) => None,
            None if target < now || invalid => {
                // Nothing cached before it (a cache of later frames only):
                // from the start.
                let r = sim.reset().and_then(|_| sim.start());
                if let Err(e) = r {
                    self.fault = Some(Fault::from(&e));
                    self.seek_to = None;
                    return;
                }
                None
            }
            None => None,
        };
        if let Some(c) = from {
            let r = self
                .cache
                .get(c)
                .and_then(|s| s.ok_or_else(|| format!("frame {} left the cache", c)));
            let restored = r.and_then(|s| sim.restore(&s).map_err(|e| e.to_string()));
            if let Err(e) = restored {
                // A cache that no longer fits the simulation is dropped;
                // the frame is simulated instead, from the start.
                self.error = Some(format!("frame cache: {}", e));
                self.cache.clear();
                let _ = sim.reset().and_then(|_| sim.start());
            }
        }
        self.display_only = false;
        self.seek_done(target);
    }

    /// After a restore for a seek to `target`: the views draw the frame
    /// the simulation is at; the seek ends there when it is reached.
    pub(super) fn seek_done(&mut self, target: i32) {
        let Some(sim) = self.sim.as_ref() else { return };
        let frame = sim.frame;
        if let Some(r) = &mut self.running {
            r.frame = frame;
        }
        if frame >= target {
            self.seek_to = None;
        }
        self.probe.clear();
        self.generation += 1;
        self.needs_draw = true;
    }

    /// Options that open another simulation like `sim` (same backend, the
    /// window's GPU shared): the f32 twin of a quantized field.
    pub fn twin_options(&self, sim: &Simulation) -> SimOptions {
        SimOptions {
            backend: sim.backend().unwrap_or(self.backend),
            gpu: self.gpu.clone(),
            ..Default::default()
        }
    }

    /// No frame out or asked for, no build under way: what tests wait for.
    pub fn is_idle(&self) -> bool {
        !self.worker.is_away()
            && self.queued_steps == 0
            && self.pending.is_none()
            && self.seek_to.is_none()
    }

    /// Whether a frame is running on the simulation thread.
    pub fn is_away(&self) -> bool {
        self.worker.is_away()
    }

    /// The frame the simulation has completed (the last one back home).
    pub fn frame(&self) -> i32 {
        self.running.as_ref().map_or(0, |r| r.frame)
    }

    /// While paused: the GPU's last frames finish and a fault in them is
    /// shown (frames run a little ahead of the host while playing).
    pub(super) fn settle(&mut self) {
        let Some(sim) = &mut self.sim else { return };
        if sim_worker::must_not_wait(sim) {
            // Nothing waits here: faults show as the engine retires frames.
            return;
        }
        if let Err(e) = sim.sync() {
            self.fault = Some(Fault::from(&e));
        }
    }

    /// One frame (the Step button): sent out as soon as the simulation is home.
    pub fn step(&mut self) {
        if self.running.is_some() {
            self.queued_steps += 1;
        }
    }

    /// Sends the simulation out to run the next frame and draw it.
    pub(super) fn dispatch(&mut self, ctx: &egui::Context) {
        let Some(sim) = self.sim.take() else { return };
        // On a GPU, per-kernel times need one submit per launch and its
        // timestamps (`Simulation::set_profile`), which slows a frame: the
        // first frame and then one in `PROFILE_EVERY` are timed that way,
        // so the status line shows every kernel's time on wgpu and cuda
        // too, at a small cost. CPU backends time every launch anyway.
        let gpu = sim.engine().on_device();
        let on_gpu = self.draws_on_gpu(&sim);
        let no_wait = sim_worker::must_not_wait(&sim);
        let job = FrameJob {
            sim,
            // Profiling reads timestamps back by waiting for them.
            profile: gpu && self.frames_run.is_multiple_of(PROFILE_EVERY) && !no_wait,
            // Only a device the window draws on needs room between slices.
            slice: if on_gpu { self.slice } else { None },
            draw: Some(on_gpu),
            capture: self.cache.captures(gpu),
        };
        self.capture_epoch = self.cache.epoch;
        if let Err(job) = self.worker.send(job, ctx) {
            // No simulation thread: the frame runs here.
            let done = sim_worker::run(*job);
            self.arrive(ctx, done);
        }
    }

    /// Takes the frame back when it is done. Returns whether one came.
    pub(super) fn receive(&mut self, ctx: &egui::Context) -> bool {
        let r = self.worker.take();
        self.take_returned(ctx, r)
    }

    pub(super) fn take_returned(&mut self, ctx: &egui::Context, r: Returned) -> bool {
        match r {
            Returned::Nothing => false,
            Returned::Frame(done) => {
                self.arrive(ctx, *done);
                true
            }
            Returned::Lost => {
                self.sim = None;
                self.running = None;
                self.playing = false;
                self.error = Some(
                    "the simulation thread stopped unexpectedly: edit the graph or Reset to rebuild"
                        .into(),
                );
                true
            }
        }
    }

    /// A frame is back: its time, its fault, its pictures; then what
    /// waited for it (a reset, scalar edits).
    pub(super) fn arrive(&mut self, ctx: &egui::Context, done: sim_worker::FrameDone) {
        let sim = done.sim;
        match done.result {
            Ok(launches) => {
                // A profiled frame is slower than the others: the rate
                // label keeps the last unprofiled frame's time.
                if !done.profiled || self.frame_ms == 0.0 {
                    self.frame_ms = done.ms;
                }
                if !done.profiled {
                    self.slice = slice_for(done.ms, launches);
                }
                self.frames_run += 1;
            }
            Err(e) => {
                self.fault = Some(Fault::from(&e));
                self.playing = false;
                self.queued_steps = 0;
                self.seek_to = None;
            }
        }
        self.cook = super::super::node_info::CookInfo::of(&sim);
        let drawn = done.drawn;
        let deferred = std::mem::take(&mut self.deferred_scalars);
        if let Some(r) = &mut self.running {
            r.frame = sim.frame;
        }
        match done.snapshot {
            Some(Ok(s)) => self.cache.insert_if(self.capture_epoch, s, sim.frame),
            Some(Err(e)) => self.cache.error = Some(format!("frame cache: {}", e)),
            None => {}
        }
        if self.seek_to.is_some_and(|t| sim.frame >= t) {
            self.seek_to = None;
        }
        self.sim = Some(sim);
        match drawn {
            Some(Ok(d)) => self.present(ctx, d),
            Some(Err(e)) => self.error = Some(e.to_string()),
            None => {}
        }
        if std::mem::take(&mut self.deferred_reset) {
            self.reset();
        }
        for (view, cam) in std::mem::take(&mut self.orbit.deferred) {
            self.set_camera(&view, cam);
        }
        if let Some((view, cur, domain, w, h)) = self.orbit.frame_shown.take() {
            let cam = crate::gui::orbit::frame_shown(cur, self.shown_bounds(&view), &domain, w, h);
            self.set_camera(&view, cam);
            self.orbit.edit = Some((view, crate::gui::orbit::to_param(&cam)));
        }
        for (node, name, value) in &deferred {
            self.set_scalar(node, name, *value);
        }
    }

    pub fn reset(&mut self) {
        if self.worker.is_away() {
            self.deferred_reset = true;
            return;
        }
        if let Some(sim) = &mut self.sim {
            self.fault = None;
            // The rate label measures frames run since the reset.
            self.frames_run = 0;
            self.frame_ms = 0.0;
            self.queued_steps = 0;
            self.display_only = false;
            let r = sim.reset().and_then(|_| sim.start());
            if let Err(e) = r {
                self.fault = Some(Fault::from(&e));
            }
            if let Some(r) = &mut self.running {
                r.frame = sim.frame;
            }
            self.loss.clear();
            self.generation += 1;
            self.needs_draw = true;
        }
    }

    /// Per-kernel median launch times (ms), for the status line.
    pub fn kernel_times(&self) -> Vec<(String, f64)> {
        self.cook.medians()
    }
}
