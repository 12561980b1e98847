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
//!
//! Its parts: `build` (following the document, background builds),
//! `playback` (the simulation thread, seeking, the frame cache), `present`
//! (views drawn and handed to egui), `panes` (the 1, 2 or 4 panes on
//! screen and the view each shows), `nav` (a 2-D view's fit, zoom and pan
//! in its pane), `pane_size` (3-D views drawn at their pane's pixel size),
//! `tiles` (the readout and colour bars) and `camera_input` (3-D cameras).
//! This file holds the state they share.

mod build;
mod camera_input;
mod nav;
mod pane_size;
pub mod panes;
mod playback;
mod present;
mod tiles;

pub use nav::ViewNav;

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
    /// Sampled nearest: a magnified picture shows crisp texels.
    id: egui::TextureId,
    /// The same picture sampled linearly, for a minified one (thin lines
    /// stay lines): registered with the GPU texture; on the CPU path made
    /// from `image` when a pane first needs it.
    linear: Option<egui::TextureId>,
    /// The wgpu texture (GPU path) or nothing (CPU path: egui owns it).
    texture: Option<wgpu::Texture>,
    handle: Option<egui::TextureHandle>,
    linear_handle: Option<egui::TextureHandle>,
    /// The last picture uploaded (CPU path), for `linear_handle`.
    image: Option<Arc<egui::ColorImage>>,
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
    /// Per-kernel times and launches of the last frames, for the status
    /// line and the inspector's Cook section.
    pub cook: super::node_info::CookInfo,
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
    /// The panes on screen and the view each shows.
    pub panes: panes::Panes,
    /// The sizes 3-D views are built at: their panes' (`pane_size`).
    pub sizes: pane_size::PaneSizes,
    /// The document the viewport follows as given (before `sizes`), and
    /// its revision: a pane resize rebuilds from it.
    followed: Option<(u64, GraphDoc)>,
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
    /// Flipbook (the timeline's fixed-rate playback): while playing, at
    /// most this many frames a second move on; a cached or baked frame is
    /// held for 1/fps, a simulated one shown as it comes, no faster.
    /// `None`: as fast as frames come.
    pub play_fps: Option<f32>,
    /// When playing last moved on under `play_fps` (egui's clock).
    last_tick: Option<f64>,
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

impl Viewport {
    pub fn new(render_state: Option<&eframe::egui_wgpu::RenderState>) -> Viewport {
        // A window that draws through OpenGL (no Vulkan driver) or without
        // compute shaders has no GPU for the simulation: `auto` then runs
        // on the CPU and the chooser says why wgpu is off.
        let unusable =
            render_state.and_then(|rs| WgpuContext::unusable_shared(&rs.adapter, &rs.device));
        let gpu = render_state.filter(|_| unusable.is_none()).map(|rs| {
            Arc::new(WgpuContext::from_shared(
                &rs.adapter,
                rs.device.clone(),
                rs.queue.clone(),
            ))
        });
        let mut v = Self::with(gpu, render_state.map(|rs| rs.renderer.clone()));
        v.no_gpu = unusable;
        v
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
            cook: Default::default(),
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
            panes: Default::default(),
            sizes: Default::default(),
            followed: None,
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
            play_fps: None,
            last_tick: None,
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
        self.cook = Default::default();
        self.clear_textures();
        self.pictures = None;
        self.pending = None;
        self.carry_state = false;
        self.built_from = None;
        self.followed = None;
        self.sizes = Default::default();
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
        // The stale bake strip was the old graph's (`take_baked` checks
        // the new one's once it is built).
        self.baked_stale.clear();
        self.baked_stale_why.clear();
    }

    pub fn has_gpu(&self) -> bool {
        self.gpu.is_some()
    }

    /// The document revision the viewport last built or updated to.
    pub fn built_revision(&self) -> Option<u64> {
        self.built_from.as_ref().map(|(r, _)| *r)
    }

    /// The running program (home or away).
    pub fn program(&self) -> Option<&Program> {
        self.running.as_ref().map(|r| &*r.program)
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
