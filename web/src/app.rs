//! The page: choose a graph and a backend, run it, see its views. Nothing
//! here is browser-specific (that is `web.rs`), so it builds natively too.
//!
//! The browser's main thread must never wait for the GPU: a frame is run
//! only when the wgpu engine has room for it (`WgpuEngine::ready_for_frame`,
//! the native frames-in-flight rule), views are drawn the same way, and
//! fields and pictures come back through `WgpuEngine::start_read`, frames
//! later.
//!
//! The simulation's WebGPU device is its own, not the one egui draws with:
//! headless Chromium (the tests) cannot present a WebGPU canvas, and losing
//! the canvas would lose the simulation's device with it. So egui draws
//! through WebGL2 and views are uploaded as images, as on the VM.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use weft_gui::gui::backend_menu;
use weft_ir::graph::overrides::Overrides;
use weft_ir::ir::layout::root_of;
use weft_ir::ir::{FieldId, Program};
use weft_runtime::engine::PendingRead;
use weft_runtime::memory::extract_field;
use weft_runtime::wgpu_backend::WgpuContext;
use weft_runtime::{Backend, RuntimeError, SimOptions, Simulation};

mod shipped {
    include!(concat!(env!("OUT_DIR"), "/shipped.rs"));
}
pub use shipped::EXAMPLES;

/// Where the shipped examples are provided (`weft_ir::io::provided`).
pub const GRAPHS_DIR: &str = "/weft/graphs";

/// Provides the shipped examples, their `.npy` files and the asset library
/// under `/weft/graphs` and `/weft/assets`, where the builder and the asset
/// library find them as if on disk.
pub fn provide_shipped() {
    for (path, bytes) in shipped::FILES {
        weft_ir::io::provided::provide(*path, *bytes);
    }
}

/// The path of a shipped example.
pub fn example_path(name: &str) -> PathBuf {
    Path::new(GRAPHS_DIR).join(format!("{}.json", name))
}

/// What the page was asked for (by its URL, see `web.rs`).
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// The graph file (a provided path).
    pub graph: PathBuf,
    /// `NODE.PARAM=VALUE` overrides, as `weft run --set`.
    pub sets: Vec<String>,
    /// `None`: wgpu where WebGPU can run compute, else the VM.
    pub backend: Option<Backend>,
    /// Test mode: run this many frames, then read every field back.
    pub test_frames: Option<i32>,
    /// Open the editor (`editor.rs`) rather than the plain viewer.
    pub editor: bool,
}

/// One field read back at the end of a test run.
pub struct FieldResult {
    pub name: String,
    pub float: bool,
    pub words: Vec<u32>,
}

/// The outcome of a test run, published to the page by `web.rs`.
pub enum TestOutcome {
    Done {
        backend: &'static str,
        device: String,
        frames: i32,
        fields: Vec<FieldResult>,
    },
    Failed(String),
}

enum Test {
    Running(i32),
    /// Every frame submitted; waiting for the GPU, then for each field's
    /// read (started, then its root's words).
    Reading(Vec<(FieldId, Option<PendingRead>, Option<Vec<u32>>)>),
    Finished,
}

struct ViewTexture {
    handle: egui::TextureHandle,
    size: [u32; 2],
    name: String,
}

pub struct WebApp {
    /// The WebGPU device, or why there is none.
    gpu: Result<Arc<WgpuContext>, String>,
    request: Request,
    backend: Backend,
    sim: Option<Simulation>,
    error: Option<String>,
    playing: bool,
    needs_draw: bool,
    /// Each view's picture on its way back from the GPU.
    pictures: Vec<(usize, PendingRead)>,
    textures: Vec<ViewTexture>,
    test: Option<Test>,
    outcome: Option<TestOutcome>,
}

impl WebApp {
    pub fn new(gpu: Result<Arc<WgpuContext>, String>, request: Request) -> WebApp {
        let backend = match request.backend {
            Some(b) => b,
            None if gpu.is_ok() => Backend::Wgpu,
            None => Backend::Vm,
        };
        let mut app = WebApp {
            gpu,
            test: request.test_frames.map(Test::Running),
            request,
            backend,
            sim: None,
            error: None,
            playing: true,
            needs_draw: false,
            pictures: Vec::new(),
            textures: Vec::new(),
            outcome: None,
        };
        app.load();
        app
    }

    /// Where the run is, for the test hook while it runs: the frame, and
    /// what the page waits for.
    pub fn progress(&self) -> String {
        let frame = self.sim.as_ref().map_or(-1, |s| s.frame);
        let phase = match &self.test {
            Some(Test::Running(_)) => "running frames",
            Some(Test::Reading(r)) if r.iter().all(|(_, p, _)| p.is_none()) => {
                "waiting for the GPU"
            }
            Some(Test::Reading(_)) => "reading fields back",
            Some(Test::Finished) => "finished",
            None => "playing",
        };
        format!(
            "frame {}, {}, {} pictures pending",
            frame,
            phase,
            self.pictures.len()
        )
    }

    /// The result of the test run, once (see `Request::test_frames`).
    pub fn take_outcome(&mut self) -> Option<TestOutcome> {
        self.outcome.take()
    }

    fn fail(&mut self, e: String) {
        if self.test.is_some() {
            self.test = Some(Test::Finished);
            self.outcome = Some(TestOutcome::Failed(e.clone()));
        }
        self.error = Some(e);
        self.playing = false;
    }

    /// Builds the requested graph and opens the chosen backend.
    fn load(&mut self) {
        self.sim = None;
        self.textures.clear();
        self.pictures.clear();
        self.error = None;
        match self.open() {
            Ok(sim) => {
                self.sim = Some(sim);
                self.needs_draw = true;
            }
            Err(e) => self.fail(e.to_string()),
        }
    }

    fn open(&self) -> Result<Simulation, RuntimeError> {
        let overrides = Overrides {
            sets: self.request.sets.clone(),
            inits: Vec::new(),
        };

        let gpu = match (&self.gpu, self.backend) {
            (Err(why), b) if b.spec().shares_window_gpu() => {
                return Err(RuntimeError::Unavailable(why.clone()))
            }
            (gpu, _) => gpu.as_ref().ok().cloned(),
        };
        let opts = SimOptions {
            backend: self.backend,
            gpu,
            ..Default::default()
        };
        let (_, mut sim) = weft_open::file(&self.request.graph, &overrides, &opts)?;
        sim.start()?;
        Ok(sim)
    }

    /// Whether the engine takes another submit without a wait.
    fn ready(sim: &Simulation) -> Result<bool, RuntimeError> {
        sim.engine().ready_for_frame()
    }

    /// One pass of the page: at most one frame and one drawing of the views.
    fn advance(&mut self, ctx: &egui::Context) -> Result<(), RuntimeError> {
        let Some(sim) = self.sim.as_mut() else {
            return Ok(());
        };
        let stepping = match self.test {
            Some(Test::Running(n)) => sim.frame < n,
            Some(_) => false,
            None => self.playing,
        };
        if stepping && Self::ready(sim)? {
            sim.step_frame()?;
            self.needs_draw = true;
        }
        if self.needs_draw && self.pictures.is_empty() && Self::ready(sim)? {
            self.needs_draw = false;
            self.draw(ctx)?;
        }
        self.receive(ctx)?;
        self.advance_test()
    }

    fn advance_test(&mut self) -> Result<(), RuntimeError> {
        let Some(sim) = self.sim.as_mut() else {
            return Ok(());
        };
        match &mut self.test {
            Some(Test::Running(n)) if sim.frame >= *n => {
                let fields: Vec<FieldId> = sim
                    .program
                    .fields
                    .iter()
                    // A field too large to read whole (a hash root's
                    // domain of 2^40 elements) is left out, as `--dump` and
                    // `weft replay` summarise it instead of reading it.
                    .filter(|(h, f)| {
                        !sim.program.is_view_field(*h)
                            && f.cells() <= weft_runtime::memory::READ_WHOLE_LIMIT
                    })
                    .map(|(h, _)| h)
                    .collect();
                self.test = Some(Test::Reading(
                    fields.into_iter().map(|f| (f, None, None)).collect(),
                ));
            }
            Some(Test::Reading(reads)) => {
                if !sim.engine().on_device() {
                    // The VM's fields are in host memory.
                    let fields = reads
                        .iter()
                        .map(|(f, _, _)| Ok(field_result(&sim.program, *f, sim.read_field(*f)?)))
                        .collect::<Result<Vec<_>, RuntimeError>>()?;
                    self.finish(fields);
                    return Ok(());
                }
                let engine = sim.engine();
                // Faults of the last frames first: the fields mean nothing after one.
                if !engine.finished()? {
                    return Ok(());
                }
                // Reads arrive in any order and `take` hands each over once:
                // keep what has come until every one has.
                for (f, read, words) in reads.iter_mut() {
                    if read.is_none() {
                        let root = root_of(&sim.program, sim.program.fields[*f].layout);
                        *read = Some(engine.start_read(root));
                    }
                    if words.is_none() {
                        if let Some(w) = read.as_ref().and_then(|r| r.take()) {
                            *words = Some(w?);
                        }
                    }
                }
                if reads.iter().any(|(_, _, w)| w.is_none()) {
                    return Ok(());
                }
                let fields = reads
                    .iter()
                    .map(|(f, _, root)| {
                        let root = root.as_deref().unwrap_or_default();
                        field_result(&sim.program, *f, extract_field(&sim.program, *f, root))
                    })
                    .collect();
                self.finish(fields);
            }
            _ => {}
        }
        Ok(())
    }

    fn finish(&mut self, fields: Vec<FieldResult>) {
        let Some(sim) = self.sim.as_ref() else { return };
        self.outcome = Some(TestOutcome::Done {
            backend: sim.backend_name(),
            device: sim.device_name().unwrap_or_else(|| "host".into()),
            frames: sim.frame,
            fields,
        });
        self.test = Some(Test::Finished);
    }

    /// Draws the views: on the VM into host images at once, on the GPU
    /// into their image fields, read back frames later (`receive`).
    fn draw(&mut self, ctx: &egui::Context) -> Result<(), RuntimeError> {
        let Some(sim) = self.sim.as_mut() else {
            return Ok(());
        };
        if sim.program.view_kernels.is_empty() {
            return Ok(());
        }
        if !sim.engine().on_device() {
            let images = sim.render_views()?;
            for (i, (name, img)) in images.into_iter().enumerate() {
                self.show(ctx, i, name, img);
            }
            return Ok(());
        }
        sim.draw_views()?;
        let engine = sim.engine();
        self.pictures = (0..sim.program.view_kernels.len())
            .map(|i| {
                let v = &sim.program.view_kernels[i];
                (
                    i,
                    engine.start_read(root_of(&sim.program, sim.program.fields[v.image].layout)),
                )
            })
            .collect();
        Ok(())
    }

    /// Shows the pictures that have come back.
    fn receive(&mut self, ctx: &egui::Context) -> Result<(), RuntimeError> {
        let Some(sim) = self.sim.as_ref() else {
            return Ok(());
        };
        let mut arrived = Vec::new();
        let mut waiting = Vec::new();
        for (i, read) in std::mem::take(&mut self.pictures) {
            match read.take() {
                Some(words) => {
                    let v = &sim.program.view_kernels[i];
                    let img = weft_runtime::render::Image::from_words(
                        v.width, v.height, v.pitch, &words?,
                    );
                    arrived.push((i, v.node_id.clone(), img));
                }
                None => waiting.push((i, read)),
            }
        }
        self.pictures = waiting;
        for (i, name, img) in arrived {
            self.show(ctx, i, name, img);
        }
        Ok(())
    }

    fn show(
        &mut self,
        ctx: &egui::Context,
        i: usize,
        name: String,
        img: weft_runtime::render::Image,
    ) {
        let color = egui::ColorImage::from_rgba_unmultiplied(
            [img.width as usize, img.height as usize],
            &img.rgba,
        );
        if let Some(t) = self.textures.get_mut(i) {
            t.handle.set(color, egui::TextureOptions::NEAREST);
            return;
        }
        let handle = ctx.load_texture(
            format!("view {}", name),
            color,
            egui::TextureOptions::NEAREST,
        );
        self.textures.push(ViewTexture {
            handle,
            size: [img.width, img.height],
            name,
        });
    }

    fn toolbar(&mut self, ui: &mut egui::Ui) {
        ui.horizontal_wrapped(|ui| {
            ui.strong("Weft");
            let current = self
                .request
                .graph
                .file_stem()
                .map(|s| s.to_string_lossy().to_string())
                .unwrap_or_default();
            let mut pick = None;
            egui::ComboBox::from_label("graph")
                .selected_text(&current)
                .show_ui(ui, |ui| {
                    for e in EXAMPLES {
                        if ui.selectable_label(*e == current, *e).clicked() {
                            pick = Some(example_path(e));
                        }
                    }
                });
            let mut backend = self.backend;
            egui::ComboBox::from_label("backend")
                .selected_text(backend.name())
                .show_ui(ui, |ui| {
                    let window_gpu = self.gpu.as_ref().map(|_| ()).map_err(|e| Some(e.as_str()));
                    backend_menu::show(ui, &mut backend, &backend_menu::choices(window_gpu));
                });
            if let Some(p) = pick {
                self.request.graph = p;
                self.request.sets.clear();
                self.load();
            } else if backend != self.backend {
                self.backend = backend;
                self.load();
            }
            if ui
                .button(if self.playing { "Pause" } else { "Play" })
                .clicked()
            {
                self.playing = !self.playing;
            }
            if ui.button("Reset").clicked() {
                self.load();
            }
            if let Some(sim) = &self.sim {
                ui.label(format!(
                    "frame {} on {}",
                    sim.frame,
                    sim.device_name()
                        .unwrap_or_else(|| sim.backend_name().into())
                ));
            }
        });
        if let Some(e) = &self.error {
            ui.colored_label(egui::Color32::LIGHT_RED, e);
        }
    }

    fn views(&self, ui: &mut egui::Ui) {
        if self.textures.is_empty() {
            ui.label("this graph has no views");
            return;
        }
        let avail = ui.available_size();
        let n = self.textures.len() as f32;
        ui.horizontal_wrapped(|ui| {
            for t in &self.textures {
                let [w, h] = t.size;
                let scale = ((avail.x / n) / w as f32).min(avail.y / h as f32).max(0.1);
                ui.vertical(|ui| {
                    ui.label(&t.name);
                    ui.image((
                        t.handle.id(),
                        egui::vec2(w as f32 * scale, h as f32 * scale) * 0.95,
                    ));
                });
            }
        });
    }
}

fn field_result(program: &Program, f: FieldId, words: Vec<u32>) -> FieldResult {
    let field = &program.fields[f];
    FieldResult {
        name: field.name.clone(),
        float: field.ty.is_float(),
        words,
    }
}

impl eframe::App for WebApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        let ctx = ui.ctx().clone();
        if let Err(e) = self.advance(&ctx) {
            self.fail(e.to_string());
        }
        egui::Panel::top("toolbar").show(ui, |ui| self.toolbar(ui));
        egui::CentralPanel::default().show(ui, |ui| self.views(ui));
        // GPU work and buffer maps finish between passes: keep asking.
        ctx.request_repaint();
    }
}
