//! The live viewport: compiles the graph in the background, runs it, and
//! draws its views.
//!
//! Frames run on the simulation thread (`sim_worker`): the window never
//! waits for one. While a frame runs the simulation is away; `running`
//! keeps what the panels show of it meanwhile.
//!
//! Views are drawn by their system kernels on the simulation's own backend
//! (`Simulation::draw_views`). On wgpu the simulation shares eframe's
//! device, and each view's image field is copied from its storage buffer
//! into a texture that egui draws directly (no copy to the CPU); on the
//! other backends the image words are read back. When only kernel scalars change, the running simulation keeps
//! its state and just takes the new values.

use super::asset_menu::AssetLibraries;
use super::frame_cache::{FrameCache, DEFAULT_BUDGET_MB};
use super::sim_worker::{self, Drawn, FrameJob, Returned, SimWorker};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;
use weft_ir::graph::build::camera_param;
use weft_ir::graph::diff::{self, Effect};
use weft_ir::graph::scalars::ScalarDecl;
use weft_ir::graph::{GraphDoc, NodeDoc};
use weft_ir::ir::{Camera, FieldId, Program, View};
use weft_runtime::wgpu_backend::WgpuContext;
use weft_runtime::{Backend, SimOptions, Simulation};

struct ViewTexture {
    id: egui::TextureId,
    /// The wgpu texture (GPU path) or nothing (CPU path: egui owns it).
    texture: Option<wgpu::Texture>,
    handle: Option<egui::TextureHandle>,
    size: [u32; 2],
    name: String,
}

type Built = Result<Simulation, String>;

/// On a GPU backend, one frame in this many is run with per-launch
/// timestamps for the per-kernel times (see `Viewport::step`).
pub const PROFILE_EVERY: u64 = 30;

/// On a GPU shared with the window, a frame is submitted in slices of
/// about this many milliseconds of work, so the window's own drawing never
/// queues behind more than that (`Simulation::step_frame_sliced`).
pub const SLICE_MS: f64 = 25.0;

/// What the panels know of the running simulation, also while it is away
/// on the simulation thread running a frame.
#[derive(Clone)]
pub struct Running {
    /// The program as compiled (its scalars' values may have changed since).
    pub program: Arc<Program>,
    pub frame: i32,
    pub backend_name: &'static str,
}

impl Running {
    fn of(sim: &Simulation) -> Running {
        Running {
            program: Arc::new(sim.program.clone()),
            frame: sim.frame,
            backend_name: sim.backend_name(),
        }
    }
}

pub struct Viewport {
    /// The backend the user chose (`Auto` until they pick one). The runtime
    /// resolves it (`Simulation::new`, given the window's GPU): wgpu runs on
    /// the window's device and draws views there; the others copy views
    /// back and draw them on the host.
    pub backend: Backend,
    pub playing: bool,
    /// The simulation when it is at home (not running a frame on the
    /// simulation thread): what reads field state needs.
    pub sim: Option<Simulation>,
    /// The running simulation as the panels see it, home or away.
    pub running: Option<Running>,
    worker: SimWorker,
    /// Frames asked for by Step and not yet sent out.
    queued_steps: u32,
    /// Launches per submission (see `SLICE_MS`; `None`: a frame at once).
    pub slice: Option<usize>,
    /// Scalar values (kernel node, scalar, value) and a reset that came
    /// while the simulation was away.
    deferred_scalars: Vec<(String, String, f64)>,
    deferred_reset: bool,
    /// Per-kernel median times of the last frames, for the status line.
    kernel_ms: Vec<(String, f64)>,
    textures: Vec<ViewTexture>,
    gpu: Option<Arc<WgpuContext>>,
    /// Views' pictures on their way back (wgpu in a browser page).
    pictures: Option<sim_worker::PendingPictures>,
    /// Why there is no GPU for wgpu (a browser without WebGPU), shown on
    /// the backend chooser's disabled entry.
    pub no_gpu: Option<String>,
    egui_renderer: Option<Arc<egui::mutex::RwLock<eframe::egui_wgpu::Renderer>>>,
    pending: Option<(u64, Receiver<Built>)>,
    /// The document revision the running simulation was built from.
    built_from: Option<(u64, GraphDoc)>,
    pub error: Option<String>,
    /// A run-time error of the running simulation (a kernel's out-of-bounds
    /// index, a full pool): shown in the Problems panel and on the node it
    /// names; cleared by Reset and by a rebuild.
    pub fault: Option<Fault>,
    /// The pending build only changes how the state is drawn: it takes
    /// over the running simulation's state instead of restarting.
    carry_state: bool,
    pub frame_ms: f64,
    pub frames_run: u64,
    pub needs_draw: bool,
    /// Show one view at a time (`tab` picks it) instead of tiling them all.
    pub tabbed: bool,
    pub tab: usize,
    /// Zoom and pan of each view, by view node id.
    pub view_nav: std::collections::HashMap<String, ViewNav>,
    /// Field values read back for the pixel readout and colour bars, with
    /// the frame they are from (refreshed at most a few times a second).
    probe: std::collections::HashMap<FieldId, (i32, f64, Vec<u32>)>,
    /// The value under the pointer, as the readout shows it.
    pub readout: Option<String>,
    /// The loss per iteration of every optimize node of the running simulation.
    pub loss: super::loss_plot::LossPlots,
    /// Counts new simulations and resets: with the frame, it says whether
    /// field state read earlier (the spreadsheet's) is still current.
    pub generation: u64,
    /// The orbit cameras of 3-D views (`orbit`).
    pub orbit: super::orbit::OrbitState,
    /// Every frame simulated since the build (or the last scalar edit),
    /// for the timeline to scrub back to (`frame_cache`).
    pub cache: FrameCache,
    /// The frame the timeline asked for: restored from the cache, or
    /// simulated forward to (from the nearest earlier cached frame).
    pub seek_to: Option<i32>,
    /// The cache epoch of the frame out now (its capture is dropped if
    /// the cache was cleared meanwhile).
    capture_epoch: u64,
    /// The baked cache folder of the open graph (`bake::cache_dir_for`):
    /// its frames are taken when the build is of the graph baked.
    pub bake_dir: Option<PathBuf>,
    /// The frames of a baked cache that is stale (the graph changed
    /// upstream of its state since): shown on the timeline, never used.
    pub baked_stale: Vec<i32>,
    /// Why the baked cache is stale.
    pub baked_stale_why: String,
    /// The simulation shows a partial baked frame (only the baked fields
    /// are that frame's): the next frame is simulated from the last
    /// complete state, never from this one.
    pub display_only: bool,
    /// The asset library and graph folder the running build used (assets
    /// and data files are found from it; a bake's cache is checked
    /// against it).
    built_assets: AssetLibraries,
}

/// A disk cache folder of this process's own for spilled frames.
fn spill_dir() -> PathBuf {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    super::platform::scratch_dir(&format!("weft-frames-{}", n))
}

/// One view's zoom (1 = fit the tile) and pan (points).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ViewNav {
    pub zoom: f32,
    pub pan: egui::Vec2,
}

impl Default for ViewNav {
    fn default() -> ViewNav {
        ViewNav {
            zoom: 1.0,
            pan: egui::Vec2::ZERO,
        }
    }
}

impl Viewport {
    pub fn new(render_state: Option<&eframe::egui_wgpu::RenderState>) -> Viewport {
        let gpu = render_state.map(|rs| {
            Arc::new(WgpuContext::from_shared(
                &rs.adapter,
                rs.device.clone(),
                rs.queue.clone(),
            ))
        });
        Self::with(gpu, render_state.map(|rs| rs.renderer.clone()))
    }

    /// A viewport whose simulation has a GPU of its own, not the one the
    /// window draws with (a browser page: WebGPU for the simulation, egui
    /// on WebGL2), or none (`Err`: why, shown on the backend chooser).
    /// Views are read back as pictures. The backend starts as wgpu when
    /// there is a GPU, else the VM.
    pub fn with_own_gpu(gpu: Result<Arc<WgpuContext>, String>) -> Viewport {
        let mut v = Self::with(gpu.as_ref().ok().cloned(), None);
        v.backend = if gpu.is_ok() {
            Backend::Wgpu
        } else {
            Backend::Vm
        };
        v.no_gpu = gpu.err();
        v
    }

    fn with(
        gpu: Option<Arc<WgpuContext>>,
        egui_renderer: Option<Arc<egui::mutex::RwLock<eframe::egui_wgpu::Renderer>>>,
    ) -> Viewport {
        Viewport {
            backend: Backend::Auto,
            playing: false,
            sim: None,
            running: None,
            worker: SimWorker::new(),
            queued_steps: 0,
            slice: None,
            deferred_scalars: vec![],
            deferred_reset: false,
            kernel_ms: vec![],
            textures: vec![],
            egui_renderer,
            gpu,
            no_gpu: None,
            pictures: None,
            pending: None,
            built_from: None,
            error: None,
            fault: None,
            carry_state: false,
            frame_ms: 0.0,
            frames_run: 0,
            needs_draw: false,
            tabbed: false,
            tab: 0,
            view_nav: Default::default(),
            probe: Default::default(),
            readout: None,
            loss: Default::default(),
            generation: 0,
            orbit: Default::default(),
            cache: FrameCache::new(DEFAULT_BUDGET_MB, false, spill_dir()),
            seek_to: None,
            capture_epoch: 0,
            bake_dir: None,
            baked_stale: Vec::new(),
            baked_stale_why: String::new(),
            display_only: false,
            built_assets: Default::default(),
        }
    }

    /// Forgets the running simulation and what it was built from: another
    /// document takes over, and it must be built even if its revision number
    /// equals the old one's.
    pub fn clear(&mut self) {
        self.sim = None;
        self.running = None;
        self.worker.forget();
        self.queued_steps = 0;
        self.slice = None;
        self.deferred_scalars.clear();
        self.deferred_reset = false;
        self.kernel_ms.clear();
        self.textures.clear();
        self.pictures = None;
        self.pending = None;
        self.carry_state = false;
        self.built_from = None;
        self.error = None;
        self.fault = None;
        self.frame_ms = 0.0;
        self.frames_run = 0;
        self.probe.clear();
        self.view_nav.clear();
        self.readout = None;
        self.loss.clear();
        self.orbit = Default::default();
        self.cache.clear();
        self.seek_to = None;
    }

    pub fn has_gpu(&self) -> bool {
        self.gpu.is_some()
    }

    /// The document revision the viewport last built or updated to.
    pub fn built_revision(&self) -> Option<u64> {
        self.built_from.as_ref().map(|(r, _)| *r)
    }

    /// Follows the document, as the one document diff (`graph::diff`)
    /// classifies the edit from the running build's: nothing (a node
    /// moved, a comment) → the simulation and its frame cache stay;
    /// scalars → the running simulation takes the new values, the frames
    /// cached before go; views only → a 3-D camera is taken in place, other
    /// view edits rebuild and carry the running state over (the cache
    /// stays); anything else → rebuild in the background.
    pub fn sync(
        &mut self,
        revision: u64,
        doc: &GraphDoc,
        assets: &AssetLibraries,
        has_problems: bool,
    ) {
        if self
            .built_from
            .as_ref()
            .is_some_and(|(r, _)| *r == revision)
            || self.pending.as_ref().is_some_and(|(r, _)| *r == revision)
        {
            return;
        }
        if has_problems {
            return;
        }
        if let (Some(_), Some((_, old))) = (&self.running, &self.built_from) {
            let edit = diff::classify(old, doc);
            if edit.effect() < Effect::Rebuild {
                self.built_from = Some((revision, doc.clone()));
                self.cache
                    .set_graph(serde_json::to_value(doc).unwrap_or(Value::Null));
                if !edit.scalars.is_empty() {
                    // Other scalar values: the cached frames are another
                    // simulation's; from here on frames are cached anew
                    // (a bake of these values is taken again).
                    self.cache.clear();
                    self.take_baked();
                }
                for s in &edit.scalars {
                    self.set_scalar(&s.node, &s.name, s.value);
                }
                if edit.changes_views() {
                    if edit.views_are_cameras_only() && self.follow_cameras(doc) {
                        // Only 3-D cameras changed: the running
                        // simulation takes them, no rebuild.
                    } else {
                        // Views are IR kernels compiled with the program:
                        // rebuild it, and carry the running state into the
                        // new build.
                        self.rebuild_display_only(revision, doc, assets);
                        return;
                    }
                }
                if edit.effect() > Effect::Nothing {
                    self.needs_draw = true;
                }
                return;
            }
        }
        self.rebuild(revision, doc, assets);
    }

    /// Gives the running simulation a kernel node's scalar values (a
    /// slider being dragged): no rebuild, the fields keep their state.
    /// Declarations are read by the one parser (`graph::scalars`).
    pub fn set_scalars(&mut self, node: &NodeDoc) {
        let decls = node.params.get("scalars").and_then(Value::as_object);
        for (name, decl) in decls.into_iter().flatten() {
            // An invalid declaration is reported on its node by validation.
            if let Ok(d) = ScalarDecl::parse(name, decl) {
                self.set_scalar(&node.id, name, d.value());
            }
        }
    }

    /// Gives the running simulation kernel `node`'s scalar `name` (the
    /// node's path inside groups), converted by the one rule
    /// (`Simulation::set_param`); while the simulation is away, when it
    /// comes back.
    pub fn set_scalar(&mut self, node: &str, name: &str, value: f64) {
        if self.worker.is_away() {
            // Applied when the frame out now comes back.
            self.deferred_scalars
                .retain(|(n, s, _)| !(n == node && s == name));
            self.deferred_scalars
                .push((node.to_string(), name.to_string(), value));
            return;
        }
        let Some(sim) = self.sim.as_mut() else {
            return;
        };
        // A valid declaration's value is valid for its type; a scalar the
        // running build does not have has no use in it either, so a
        // refusal here changes nothing.
        let _ = sim.set_param(node, name, value);
        self.needs_draw = true;
    }

    /// A rebuild for a change to what is drawn only (a view's parameters,
    /// a view added or removed by the viewer flag): the new build goes on
    /// from the running state instead of restarting at frame 0.
    pub fn rebuild_display_only(&mut self, revision: u64, doc: &GraphDoc, assets: &AssetLibraries) {
        self.rebuild(revision, doc, assets);
        self.carry_state = true;
    }

    /// Builds `doc` in the background against `assets` (the editor's
    /// library and the graph's folder), replacing the simulation when done.
    pub fn rebuild(&mut self, revision: u64, doc: &GraphDoc, assets: &AssetLibraries) {
        self.built_assets = assets.clone();
        let assets = assets.clone();
        let (tx, rx) = channel();
        let doc2 = doc.clone();
        // The runtime resolves the choice (`auto` included); the window's
        // GPU goes along so that wgpu, when it runs, shares its device.
        let opts = SimOptions {
            backend: self.backend,
            gpu: self.gpu.clone(),
            ..Default::default()
        };
        let _ = super::platform::spawn("weft-build", move || {
            let r = (|| -> Built {
                let program = assets
                    .build(&doc2, assets.base_dir())
                    .map_err(|e| e.to_string())?;
                let mut sim = Simulation::new(program, &opts).map_err(|e| e.to_string())?;
                sim.start().map_err(|e| e.to_string())?;
                Ok(sim)
            })();
            let _ = tx.send(r);
        });
        self.pending = Some((revision, rx));
        self.cache
            .set_graph(serde_json::to_value(doc).unwrap_or(Value::Null));
        self.built_from = Some((revision, doc.clone()));
        self.carry_state = false;
    }

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
    fn receive_pictures(&mut self, ctx: &egui::Context) {
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
    fn gpu_busy(&mut self, ctx: &egui::Context) -> bool {
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

    /// Takes the baked cache's frames when the running build is of the
    /// graph baked (editor positions aside); otherwise leaves them unused.
    pub fn take_baked(&mut self) -> usize {
        use super::bake::{check_cache, CacheState};
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
    fn follow_seek(&mut self) {
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
    fn seek_done(&mut self, target: i32) {
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

    /// A finished background build replaces the simulation (or, for a
    /// display-only edit, takes over its state). Only while it is home.
    fn swap_in_build(&mut self, ctx: &egui::Context) -> Option<String> {
        let (_, rx) = self.pending.as_ref()?;
        let mut status = None;
        match rx.try_recv() {
            Ok(Ok(mut sim)) if self.carry_state && self.sim.is_some() => {
                // A display-only edit: the new build goes on from the
                // running state (frame, fields, timings kept).
                let mut old = self.sim.take().expect("checked");
                if let Err(e) = sim.carry_state_from(&mut old) {
                    self.fault = Some(Fault::from(&e));
                }
                self.running = Some(Running::of(&sim));
                self.sim = Some(sim);
                // The new build's cameras are the saved ones.
                self.orbit.forget_cameras();
                // Same state, a new program (views added or removed):
                // readers of field state look again.
                self.generation += 1;
                self.textures.clear();
                self.pictures = None;
                self.error = None;
                self.pending = None;
                self.carry_state = false;
                self.needs_draw = true;
            }
            Ok(Ok(mut sim)) => {
                self.cache.clear();
                self.seek_to = None;
                // Frame 0 for the timeline (where nothing may wait, the
                // state cannot be read back at once: not kept).
                if !sim_worker::must_not_wait(&sim) {
                    match sim.snapshot() {
                        Ok(s) => self.cache.insert(s, sim.frame),
                        Err(e) => self.fault = Some(Fault::from(&e)),
                    }
                }
                self.display_only = false;
                if self.running.as_ref().is_some_and(|s| s.frame > 0) {
                    status = Some("recompiled — restarted at frame 0".to_string());
                }
                self.frames_run = 0;
                self.frame_ms = 0.0;
                self.slice = None;
                self.kernel_ms.clear();
                self.probe.clear();
                self.loss.clear();
                self.orbit.forget_cameras();
                self.running = Some(Running::of(&sim));
                self.sim = Some(sim);
                self.take_baked();
                self.generation += 1;
                self.textures.clear();
                self.pictures = None;
                self.error = None;
                self.fault = None;
                self.pending = None;
                self.needs_draw = true;
            }
            Ok(Err(e)) => {
                self.error = Some(e);
                self.pending = None;
            }
            Err(std::sync::mpsc::TryRecvError::Empty) => ctx.request_repaint(),
            Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                self.error = Some("the background compile stopped unexpectedly".into());
                self.pending = None;
            }
        }
        status
    }

    pub fn compiling(&self) -> bool {
        self.pending.is_some()
    }

    /// Whether a frame is running on the simulation thread.
    pub fn is_away(&self) -> bool {
        self.worker.is_away()
    }

    /// The running program (home or away).
    pub fn program(&self) -> Option<&Program> {
        self.running.as_ref().map(|r| &*r.program)
    }

    /// The frame the simulation has completed (the last one back home).
    pub fn frame(&self) -> i32 {
        self.running.as_ref().map_or(0, |r| r.frame)
    }

    /// While paused: the GPU's last frames finish and a fault in them is
    /// shown (frames run a little ahead of the host while playing).
    fn settle(&mut self) {
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
    fn dispatch(&mut self, ctx: &egui::Context) {
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
    fn receive(&mut self, ctx: &egui::Context) -> bool {
        let r = self.worker.take();
        self.take_returned(ctx, r)
    }

    fn take_returned(&mut self, ctx: &egui::Context, r: Returned) -> bool {
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
    fn arrive(&mut self, ctx: &egui::Context, done: sim_worker::FrameDone) {
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
        self.kernel_ms = kernel_medians(&sim);
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
            let cam = super::orbit::frame_shown(cur, self.shown_bounds(&view), &domain, w, h);
            self.set_camera(&view, cam);
            self.orbit.edit = Some((view, super::orbit::to_param(&cam)));
        }
        for (node, name, value) in &deferred {
            self.set_scalar(node, name, *value);
        }
    }

    /// Whether the running simulation is on a GPU backend (its state lives
    /// in device memory).
    pub fn on_gpu_backend(&self) -> bool {
        self.running
            .as_ref()
            .is_some_and(|r| matches!(r.backend_name, "wgpu" | "cuda"))
    }

    fn draws_on_gpu(&self, sim: &Simulation) -> bool {
        sim.engine().views_on_device() && self.gpu.is_some() && self.egui_renderer.is_some()
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
        self.kernel_ms.clone()
    }

    /// Draws the views here (the simulation is home): after an edit that
    /// changes only what is drawn, a reset, a new build.
    fn draw(&mut self, ctx: &egui::Context) {
        self.needs_draw = false;
        let Some(sim) = self.sim.as_mut() else { return };
        let on_gpu =
            self.gpu.is_some() && self.egui_renderer.is_some() && sim.engine().views_on_device();
        match sim_worker::draw(sim, on_gpu) {
            Ok(d) => self.present(ctx, d),
            Err(e) => self.error = Some(e.to_string()),
        }
    }

    /// Puts drawn views on screen: GPU pictures are copied from their
    /// buffers into textures on the device; read-back ones are uploaded.
    fn present(&mut self, ctx: &egui::Context, drawn: Drawn) {
        let Some(sim) = self.sim.as_ref() else { return };
        match drawn {
            Drawn::OnGpu => {
                let (Some(gpu), Some(egui_renderer)) = (&self.gpu, &self.egui_renderer) else {
                    return;
                };
                let engine = sim.engine();
                let mut enc = gpu
                    .device
                    .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                        label: Some("viewport"),
                    });
                for (i, v) in sim.program.view_kernels.iter().enumerate() {
                    let (w, h) = (v.width, v.height);
                    if self.textures.len() <= i {
                        let texture = gpu.device.create_texture(&wgpu::TextureDescriptor {
                            label: Some(&v.node_id),
                            size: wgpu::Extent3d {
                                width: w,
                                height: h,
                                depth_or_array_layers: 1,
                            },
                            mip_level_count: 1,
                            sample_count: 1,
                            dimension: wgpu::TextureDimension::D2,
                            format: wgpu::TextureFormat::Rgba8Unorm,
                            usage: wgpu::TextureUsages::TEXTURE_BINDING
                                | wgpu::TextureUsages::COPY_DST,
                            view_formats: &[],
                        });
                        let view = texture.create_view(&Default::default());
                        let id = egui_renderer.write().register_native_texture(
                            &gpu.device,
                            &view,
                            wgpu::FilterMode::Nearest,
                        );
                        self.textures.push(ViewTexture {
                            id,
                            texture: Some(texture),
                            handle: None,
                            size: [w, h],
                            name: v.node_id.clone(),
                        });
                    }
                    let Some(tex) = self.textures[i].texture.as_ref() else {
                        continue;
                    };
                    let root = weft_ir::ir::layout::root_of(
                        &sim.program,
                        sim.program.fields[v.image].layout,
                    );
                    let Some(buffer) = engine.device_buffer(root) else {
                        continue;
                    };
                    // The image field is the whole of its root buffer, rows
                    // padded to 64 pixels = 256 bytes, the copy's row alignment.
                    enc.copy_buffer_to_texture(
                        wgpu::TexelCopyBufferInfo {
                            buffer,
                            layout: wgpu::TexelCopyBufferLayout {
                                offset: 0,
                                bytes_per_row: Some(v.pitch * 4),
                                rows_per_image: Some(h),
                            },
                        },
                        tex.as_image_copy(),
                        wgpu::Extent3d {
                            width: w,
                            height: h,
                            depth_or_array_layers: 1,
                        },
                    );
                }
                gpu.queue.submit([enc.finish()]);
            }
            Drawn::Reading(p) => {
                self.pictures = Some(p);
                ctx.request_repaint();
            }
            Drawn::Images(images) => {
                for (i, (name, img)) in images.into_iter().enumerate() {
                    let color = egui::ColorImage::from_rgba_unmultiplied(
                        [img.width as usize, img.height as usize],
                        &img.rgba,
                    );
                    if self.textures.len() <= i {
                        let handle = ctx.load_texture(
                            format!("view {}", name),
                            color,
                            egui::TextureOptions::NEAREST,
                        );
                        self.textures.push(ViewTexture {
                            id: handle.id(),
                            texture: None,
                            handle: Some(handle),
                            size: [img.width, img.height],
                            name,
                        });
                    } else if let Some(h) = &mut self.textures[i].handle {
                        h.set(color, egui::TextureOptions::NEAREST);
                    }
                }
            }
        }
    }
}

/// Launches per submission for a frame of `launches` that took `ms`:
/// slices of about `SLICE_MS` when the frame takes longer than that.
pub fn slice_for(ms: f64, launches: usize) -> Option<usize> {
    if ms <= SLICE_MS || launches < 2 {
        return None;
    }
    let per_launch = ms / launches as f64;
    Some(((SLICE_MS / per_launch) as usize).clamp(1, launches))
}

/// The median of each kernel's last 30 launch times (ms).
fn kernel_medians(sim: &Simulation) -> Vec<(String, f64)> {
    sim.kernel_times
        .iter()
        .map(|(k, v)| {
            let mut ms: Vec<f64> = v
                .iter()
                .rev()
                .take(30)
                .map(|d| d.as_secs_f64() * 1e3)
                .collect();
            ms.sort_by(|a, b| a.total_cmp(b));
            (k.clone(), ms.get(ms.len() / 2).copied().unwrap_or(0.0))
        })
        .collect()
}

impl Viewport {
    /// Field words of `f` for the readout and colour bar, read back at most
    /// four times a second and only for views on screen.
    fn probe(&mut self, f: FieldId, now: f64) -> Option<&[u32]> {
        // Away running a frame: the last words read stand.
        let Some(sim) = self.sim.as_ref() else {
            return self.probe.get(&f).map(|(_, _, w)| w.as_slice());
        };
        let fresh = self
            .probe
            .get(&f)
            .is_some_and(|(frame, at, _)| *frame == sim.frame || now - at < 0.25);
        if !fresh {
            let words = sim.read_field(f).ok()?;
            self.probe.insert(f, (sim.frame, now, words));
        }
        self.probe.get(&f).map(|(_, _, w)| w.as_slice())
    }

    /// Draws the views tiled (or one tab) in the available space, each with
    /// its own zoom (wheel) and pan (drag; double-click resets), a readout of
    /// the field value under the pointer, and a colour bar for scalar images.
    pub fn ui(&mut self, ui: &mut egui::Ui) {
        let now = ui.input(|i| i.time);
        if let Some(sim) = &self.sim {
            self.loss.poll(sim, now, self.playing);
        }
        if self.textures.is_empty() {
            let msg = if self.compiling() {
                "compiling…"
            } else if self.error.is_some() && self.sim.is_none() {
                // A run-time fault of a running graph is shown above the
                // views; this is for a graph that did not compile.
                "the graph does not run: see Problems"
            } else {
                "no views: add an image or particles node"
            };
            ui.centered_and_justified(|ui| ui.label(msg));
            return;
        }
        ui.horizontal(|ui| {
            ui.selectable_value(&mut self.tabbed, false, "Tiled");
            ui.selectable_value(&mut self.tabbed, true, "Tabs");
            ui.separator();
            if self.tabbed {
                for (k, t) in self.textures.iter().enumerate() {
                    ui.selectable_value(&mut self.tab, k, &t.name);
                }
                ui.separator();
            }
            if ui
                .button("Fit views")
                .on_hover_text("Wheel over a view zooms it, drag pans it, double-click fits it")
                .clicked()
            {
                self.view_nav.clear();
            }
        });
        self.tab = self.tab.min(self.textures.len() - 1);
        let shown: Vec<usize> = if self.tabbed {
            vec![self.tab]
        } else {
            (0..self.textures.len()).collect()
        };
        // What is under the pointer (last frame's), on a line that never scrolls away.
        ui.monospace(
            self.readout
                .clone()
                .unwrap_or_else(|| "hover a view to read its values".into()),
        );
        let avail = ui.available_width().max(64.0);
        // The loss plots of optimize nodes stay in sight below the views.
        let plots_h = 150.0 * self.loss.series.len() as f32;
        let avail_h = ui.available_height() - plots_h;
        let n = shown.len() as f32;
        let mut readout = None;
        egui::ScrollArea::vertical().show(ui, |ui| {
            ui.horizontal_wrapped(|ui| {
                for k in shown {
                    let size = self.textures[k].size;
                    let aspect = size[1] as f32 / size[0].max(1) as f32;
                    // As wide as the column allows, as tall as the panel allows
                    // (title and colour bar below): two columns, or more when
                    // three or more views fit larger side by side in a low panel.
                    let width_in = |cols: f32| {
                        let rows = (n / cols).ceil().max(1.0);
                        (avail / cols - 8.0).min((avail_h / rows - 64.0) / aspect)
                    };
                    let w = (n.min(2.0) as usize..=n as usize)
                        .map(|c| width_in(c as f32))
                        .fold(f32::NEG_INFINITY, f32::max)
                        .max(64.0);
                    ui.vertical(|ui| {
                        if let Some(r) = self.view_tile(ui, k, w, now) {
                            readout = Some(r);
                        }
                    });
                }
            });
            self.loss.ui(ui, avail - 8.0);
        });
        self.readout = readout;
    }

    /// One view: its name, the image in a tile of width `w`, the readout and colour bar.
    fn view_tile(&mut self, ui: &mut egui::Ui, k: usize, w: f32, now: f64) -> Option<String> {
        let (id, size, name) = {
            let t = &self.textures[k];
            (t.id, t.size, t.name.clone())
        };
        let image = self.program().and_then(|p| {
            p.views.iter().find_map(|v| match v {
                View::Image {
                    node_id,
                    field,
                    colormap,
                    range,
                    ..
                } if *node_id == name => Some((*field, *colormap, *range)),
                _ => None,
            })
        });
        let scene = self.scene_of(&name);
        ui.label(&name);
        let aspect = size[1] as f32 / size[0].max(1) as f32;
        let (tile, resp) =
            ui.allocate_exact_size(egui::vec2(w, w * aspect), egui::Sense::click_and_drag());
        self.orbit.tiles.insert(name.clone(), tile);
        let mut wheel_taken = false;
        if let Some((domain, vw, vh)) = scene {
            let moved = self.orbit_input(ui, &resp, &name, &domain, (vw, vh), tile);
            wheel_taken = true;
            if let Some(cam) = moved {
                self.set_camera(&name, cam);
            }
        }
        let nav = self.view_nav.entry(name.clone()).or_default();
        let orbiting = self.orbit.drag.as_ref().is_some_and(|d| d.view == name);
        if resp.dragged_by(egui::PointerButton::Primary) && !orbiting {
            nav.pan += resp.drag_delta();
        }
        if resp.double_clicked() {
            *nav = ViewNav::default();
        }
        let hover = resp.hover_pos();
        if let Some(p) = hover.filter(|_| !wheel_taken) {
            let scroll = ui.input(|i| i.smooth_scroll_delta.y);
            if scroll != 0.0 {
                // Zoom about the pointer: the image point under it stays put.
                let old = nav.zoom;
                nav.zoom = (old * (1.0 + scroll * 0.002)).clamp(0.25, 64.0);
                let anchor = p - tile.min - nav.pan;
                nav.pan -= anchor * (nav.zoom / old - 1.0);
            }
        }
        let shown = egui::Rect::from_min_size(tile.min + nav.pan, tile.size() * nav.zoom);
        let painter = ui.painter_at(tile);
        painter.rect_filled(tile, 0.0, egui::Color32::from_gray(20));
        painter.image(
            id,
            shown,
            egui::Rect::from_min_max(egui::pos2(0.0, 0.0), egui::pos2(1.0, 1.0)),
            egui::Color32::WHITE,
        );
        let zoom = nav.zoom;
        let mut readout = None;
        if let Some(p) = hover.filter(|p| shown.contains(*p)) {
            let u = (p - shown.min) / shown.size();
            let x = ((u.x * size[0] as f32) as u32).min(size[0].saturating_sub(1));
            let row = ((u.y * size[1] as f32) as u32).min(size[1].saturating_sub(1));
            let y = size[1] - 1 - row;
            readout = Some(match image {
                Some((field, ..)) => self.value_at(field, x, y, now),
                None => format!("pixel ({}, {})", x, row),
            });
        }
        ui.weak(format!("{:.0}%", zoom * 100.0));
        if let Some((field, map, range)) = image {
            self.colour_bar(ui, field, map, range, w, now);
        }
        readout
    }

    /// A 3-D view's domain box and image size, from the running program.
    fn scene_of(&self, view: &str) -> Option<([f32; 6], u32, u32)> {
        let p = self.program()?;
        let v = p.views.iter().find(|v| v.node_id() == view)?;
        let vk = p.view_kernels.iter().find(|k| k.node_id == view)?;
        Some((v.scene()?.domain, vk.width, vk.height))
    }

    /// A 3-D view's camera now: the one last set here, else the program's.
    pub fn camera_of(&self, view: &str) -> Option<Camera> {
        if let Some(c) = self.orbit.cams.get(view) {
            return Some(*c);
        }
        let p = self.program()?;
        Some(
            p.views
                .iter()
                .find(|v| v.node_id() == view)?
                .scene()?
                .camera,
        )
    }

    /// Moves a 3-D view's camera in the running simulation (no rebuild):
    /// now if it is home, else when it comes back; its views redraw
    /// without a step.
    pub fn set_camera(&mut self, view: &str, cam: Camera) {
        self.orbit.cams.insert(view.to_string(), cam);
        if self.worker.is_away() {
            self.orbit.deferred.retain(|(v, _)| v != view);
            self.orbit.deferred.push((view.to_string(), cam));
            return;
        }
        let Some(sim) = self.sim.as_mut() else { return };
        if let Err(e) = sim.set_view_camera(view, cam) {
            self.error = Some(e.to_string());
        }
        self.needs_draw = true;
    }

    /// The cameras of `doc`'s 3-D views given to the running simulation
    /// (those that differ from the live ones). False when one cannot be:
    /// not a 3-D view of the running program, or an invalid camera (a
    /// rebuild then reports it).
    fn follow_cameras(&mut self, doc: &GraphDoc) -> bool {
        let mut set = Vec::new();
        for n in &doc.nodes {
            let Some(v) = n.params.get("camera") else {
                continue;
            };
            let Some((domain, w, h)) = self.scene_of(&n.id) else {
                if v.is_null() {
                    continue;
                }
                return false;
            };
            match camera_param(&domain, v, w, h) {
                Ok(c) if Some(c) != self.camera_of(&n.id) => set.push((n.id.clone(), c)),
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        for (view, c) in set {
            self.set_camera(&view, c);
        }
        true
    }

    /// Orbit, pan and zoom drags, the wheel and the view keys over a 3-D
    /// view's tile (`orbit` lists them). Returns the camera to show now;
    /// a finished gesture also leaves the edit of the node's `camera` param.
    fn orbit_input(
        &mut self,
        ui: &egui::Ui,
        resp: &egui::Response,
        view: &str,
        domain: &[f32; 6],
        (w, h): (u32, u32),
        tile: egui::Rect,
    ) -> Option<Camera> {
        use super::orbit::{self as o, Drag, Gesture};
        let cur = self.camera_of(view)?;
        let (mods, raw_scroll) = ui.input(|i| (i.modifiers, o::wheel_points(&i.events)));
        for b in [
            egui::PointerButton::Middle,
            egui::PointerButton::Primary,
            egui::PointerButton::Secondary,
        ] {
            if resp.drag_started_by(b) {
                // Measured from where the button went down (a drag starts
                // a few points later).
                let origin = ui.input(|i| i.pointer.press_origin());
                if let (Some(g), Some(from)) = (Gesture::of(b, mods), origin) {
                    self.orbit.drag = Some(Drag {
                        view: view.to_string(),
                        gesture: g,
                        start: cur,
                        from,
                    });
                }
            }
        }
        let mut out = None;
        let drag = self.orbit.drag.clone().filter(|d| d.view == view);
        if let (Some(d), Some(p)) = (&drag, resp.interact_pointer_pos()) {
            let delta = p - d.from;
            let cam = match d.gesture {
                Gesture::Orbit => o::orbit(d.start, delta),
                // Points to image pixels.
                Gesture::Pan => o::pan(d.start, delta * (w as f32 / tile.width()), w, h),
                Gesture::Zoom => o::zoom_drag(d.start, delta.y),
            };
            if cam != cur {
                out = Some(cam);
            }
        }
        if drag.is_some() && !resp.dragged() {
            // Released: the camera becomes the node's param (one undo step).
            self.orbit.drag = None;
            let cam = out.unwrap_or(cur);
            self.orbit.edit = Some((view.to_string(), o::to_param(&cam)));
        }
        if resp.hovered() && drag.is_none() {
            let mut key_cam = None;
            if raw_scroll != 0.0 {
                key_cam = Some(o::wheel(cur, raw_scroll));
            }
            if !ui.ctx().egui_wants_keyboard_input() {
                let pressed = |k| ui.input(|i| i.key_pressed(k));
                if pressed(egui::Key::Home) {
                    key_cam = Some(o::frame_domain(cur, domain, w, h));
                }
                if pressed(egui::Key::F) {
                    if self.sim.is_some() {
                        let shown = self.shown_bounds(view);
                        key_cam = Some(o::frame_shown(cur, shown, domain, w, h));
                    } else {
                        // Away running a frame: framed when it is back.
                        self.orbit.frame_shown = Some((view.to_string(), cur, *domain, w, h));
                    }
                }
                for k in [egui::Key::Num1, egui::Key::Num3, egui::Key::Num7] {
                    if pressed(k) {
                        key_cam = o::axis_view(cur, k, mods.ctrl || mods.command);
                    }
                }
            }
            if let Some(c) = key_cam {
                self.orbit.edit = Some((view.to_string(), o::to_param(&c)));
                out = Some(c);
            }
        }
        out
    }

    /// What the 3-D view `view` shows, as a world box (`orbit::shown_bounds`),
    /// read from the simulation once; `None` while it is away running a
    /// frame (F then frames the domain) or when nothing shows.
    fn shown_bounds(&self, view: &str) -> Option<[f32; 6]> {
        let sim = self.sim.as_ref()?;
        let p = &sim.program;
        let v = p.views.iter().find(|v| v.node_id() == view)?;
        let field = match v {
            View::Particles { positions, .. } => *positions,
            View::Volume { field, .. } | View::Surface { field, .. } => *field,
            _ => return None,
        };
        let root = sim
            .read_root(weft_ir::ir::layout::root_of(p, p.fields[field].layout))
            .ok()?;
        super::orbit::shown_bounds(p, v, &root)
    }

    /// "T[37, 80] = 0.4213" for the cell (x, y) of an image view's field.
    fn value_at(&mut self, field: FieldId, x: u32, y: u32, now: f64) -> String {
        let Some(program) = self.program() else {
            return String::new();
        };
        let f = &program.fields[field];
        let (fname, ty, h) = (f.name.clone(), f.ty, f.shape[1]);
        let comps = ty.components();
        let cell = (x * h + y) as usize;
        let Some(words) = self.probe(field, now) else {
            return format!("{}[{}, {}]", fname, x, y);
        };
        let show = |b: u32| match ty.scalar() {
            Some(weft_ir::Scalar::I32) => format!("{}", b as i32),
            Some(weft_ir::Scalar::U32) => format!("{}", b),
            _ => format!("{:.4}", f32::from_bits(b)),
        };
        let vals: Vec<String> = (0..comps)
            .filter_map(|c| words.get(cell * comps + c).copied())
            .map(show)
            .collect();
        let v = if vals.len() == 1 {
            vals[0].clone()
        } else {
            format!("({})", vals.join(", "))
        };
        format!("{}[{}, {}] = {}", fname, x, y, v)
    }

    /// The colormap of a scalar image view from its low to its high value.
    fn colour_bar(
        &mut self,
        ui: &mut egui::Ui,
        field: FieldId,
        map: weft_ir::ir::Colormap,
        range: Option<(f32, f32)>,
        w: f32,
        now: f64,
    ) {
        let Some(program) = self.program() else {
            return;
        };
        let ty = program.fields[field].ty;
        if ty.components() != 1 {
            return;
        }
        let (lo, hi) = match range {
            Some(r) => r,
            None => {
                let Some(words) = self.probe(field, now) else {
                    return;
                };
                let value = |b: u32| match ty.scalar() {
                    Some(weft_ir::Scalar::I32) => b as i32 as f32,
                    Some(weft_ir::Scalar::U32) => b as f32,
                    _ => f32::from_bits(b),
                };
                let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
                for v in words.iter().map(|b| value(*b)).filter(|v| v.is_finite()) {
                    lo = lo.min(v);
                    hi = hi.max(v);
                }
                if lo > hi {
                    (0.0, 1.0)
                } else {
                    (lo, hi)
                }
            }
        };
        let (bar, _) = ui.allocate_exact_size(egui::vec2(w, 10.0), egui::Sense::hover());
        let steps = 64;
        for s in 0..steps {
            let t = s as f32 / (steps - 1) as f32;
            let c = weft_ir::ir::colormap::colormap(map, t);
            let x0 = bar.left() + bar.width() * s as f32 / steps as f32;
            let x1 = bar.left() + bar.width() * (s + 1) as f32 / steps as f32;
            ui.painter().rect_filled(
                egui::Rect::from_min_max(egui::pos2(x0, bar.top()), egui::pos2(x1, bar.bottom())),
                0.0,
                egui::Color32::from_rgb(
                    (c[0] * 255.0) as u8,
                    (c[1] * 255.0) as u8,
                    (c[2] * 255.0) as u8,
                ),
            );
        }
        if w < 170.0 {
            // A narrow tile has no room for both ends side by side.
            ui.scope(|ui| {
                ui.set_max_width(w);
                ui.add(
                    egui::Label::new(
                        egui::RichText::new(format!(
                            "{:.4} … {:.4}{}",
                            lo,
                            hi,
                            if range.is_none() { " (auto)" } else { "" }
                        ))
                        .small(),
                    )
                    .wrap(),
                );
            });
            return;
        }
        ui.horizontal(|ui| {
            ui.set_width(w);
            ui.small(format!("{:.4}", lo));
            ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), |ui| {
                ui.small(format!(
                    "{:.4}{}",
                    hi,
                    if range.is_none() { "  (auto)" } else { "" }
                ));
            });
        });
    }
}

/// A run-time error and the graph node it names (when it names one).
#[derive(Clone, Debug, PartialEq)]
pub struct Fault {
    pub node: Option<String>,
    pub message: String,
}

impl From<&weft_runtime::RuntimeError> for Fault {
    fn from(e: &weft_runtime::RuntimeError) -> Self {
        Fault {
            node: e.node().map(str::to_string),
            message: format!("run-time error: {}", e),
        }
    }
}
