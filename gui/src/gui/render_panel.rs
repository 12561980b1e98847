//! File > Render…: the app's side of `weft render`. The dialog fills a
//! `weft_open::render::RenderSpec` (view, frame range, size, output path,
//! fps) and runs `weft_open::render::render`, the function the CLI runs,
//! on a thread of its own, so a frame rendered here is the file `weft
//! render` writes for it. The document rendered is the one in the editor
//! as it is when Render is pressed (with the editor's asset library), on
//! the backend the viewport runs on; the viewport's own simulation is not
//! touched.
//!
//! Cancel stops after the frame under way: a movie's temporary file (its
//! own, beside the destination) is removed and nothing is left at the
//! destination; the PNGs of a sequence completed so far stay, each whole.
//! A failure is shown in the window and in the Problems panel, naming the
//! node (a click there selects it).

use super::asset_menu::AssetLibraries;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;
use weft_ir::graph::GraphDoc;
use weft_ir::ir::Program;
use weft_open::render::{self, RenderError, RenderSpec, Rendered};
use weft_runtime::{Backend, SimOptions};

/// The dialog's fields and the render under way.
pub struct RenderPanel {
    pub open: bool,
    /// The view node to draw.
    pub view: String,
    pub first: i32,
    pub last: i32,
    pub width: u32,
    pub height: u32,
    /// `NAME.mp4` or `NAME_####.png`; relative to the graph's folder.
    pub out: String,
    pub fps: u32,
    pub job: Option<RenderJob>,
    /// How the last render ended (shown in the window).
    pub message: Option<Result<String, String>>,
    /// The last render's failure, for the Problems panel: (node, message).
    pub problem: Option<(Option<String>, String)>,
    /// Render pressed: started by the app, which has the document.
    pub start_requested: bool,
    /// The view the size fields were last filled from.
    sized_for: Option<String>,
}

impl Default for RenderPanel {
    fn default() -> RenderPanel {
        RenderPanel {
            open: false,
            view: String::new(),
            first: 0,
            last: 48,
            width: 512,
            height: 512,
            out: String::new(),
            fps: 24,
            job: None,
            message: None,
            problem: None,
            start_requested: false,
            sized_for: None,
        }
    }
}

/// A render running on a thread of its own (the window stays live).
pub struct RenderJob {
    pub spec: RenderSpec,
    cancel: Arc<AtomicBool>,
    rendered: Arc<AtomicU32>,
    result: Receiver<Result<Rendered, RenderError>>,
}

impl RenderJob {
    /// Starts rendering `spec` from `doc` (its data files and assets from
    /// `assets`, as the viewport builds) on `backend`.
    pub fn start(
        doc: GraphDoc,
        assets: &AssetLibraries,
        backend: Backend,
        spec: RenderSpec,
        ctx: egui::Context,
    ) -> RenderJob {
        let cancel = Arc::new(AtomicBool::new(false));
        let rendered = Arc::new(AtomicU32::new(0));
        let (tx, result) = channel();
        let source = assets.source(&doc, assets.base_dir());
        let opts = SimOptions {
            backend,
            ..Default::default()
        };
        let (c, r, s) = (cancel.clone(), rendered.clone(), spec.clone());
        let _ = super::platform::spawn("weft-render", move || {
            let out = render::render(&source, &opts, &s, &c, &mut |p| {
                r.store(p.rendered, Ordering::Relaxed);
                ctx.request_repaint();
            });
            let _ = tx.send(out);
            ctx.request_repaint();
        });
        RenderJob {
            spec,
            cancel,
            rendered,
            result,
        }
    }

    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    /// Frames written so far.
    pub fn rendered(&self) -> u32 {
        self.rendered.load(Ordering::Relaxed)
    }

    pub fn total(&self) -> u32 {
        (self.spec.last - self.spec.first + 1).max(1) as u32
    }

    /// The outcome, once the render ended.
    pub fn poll(&self) -> Option<Result<Rendered, RenderError>> {
        match self.result.try_recv() {
            Ok(r) => Some(r),
            Err(std::sync::mpsc::TryRecvError::Empty) => None,
            Err(_) => Some(Err(RenderError::Encoder(
                "the render thread stopped unexpectedly".into(),
            ))),
        }
    }
}

impl RenderPanel {
    /// Opens the dialog; the first time, and for another graph, its fields
    /// start from the first view and the timeline's play range.
    pub fn show(&mut self, program: Option<&Program>, start: i32, end: i32) {
        self.open = true;
        let views = program.map(render::view_ids).unwrap_or_default();
        if self.view.is_empty() || !views.contains(&self.view) {
            self.view = views.first().cloned().unwrap_or_default();
            self.first = start;
            self.last = end.max(start);
            self.sized_for = None;
        }
        self.fill_size(program);
    }

    /// The size fields follow the view chosen (its own picture's size),
    /// until the user changes them for that view.
    fn fill_size(&mut self, program: Option<&Program>) {
        if self.sized_for.as_deref() == Some(self.view.as_str()) {
            return;
        }
        if let Some((w, h)) = program.and_then(|p| render::view_size(p, &self.view)) {
            self.width = w;
            self.height = h;
            self.sized_for = Some(self.view.clone());
        }
        if self.out.is_empty() {
            self.out = format!("render/{}_####.png", self.view.replace('/', "_"));
        }
    }

    /// The spec the fields describe, paths relative to `base`.
    pub fn spec(&self, base: &Path) -> RenderSpec {
        let out = PathBuf::from(self.out.trim());
        RenderSpec {
            view: self.view.clone(),
            first: self.first,
            last: self.last,
            width: self.width,
            height: self.height,
            out: if out.is_relative() {
                base.join(out)
            } else {
                out
            },
            fps: self.fps,
            resume: None,
        }
    }

    /// Another graph takes over: a render under way is cancelled (the
    /// frames of a sequence it wrote stay) and its messages go.
    pub fn forget_graph(&mut self) {
        if let Some(job) = self.job.take() {
            job.cancel();
        }
        self.message = None;
        self.problem = None;
        self.view.clear();
        self.sized_for = None;
    }

    /// Takes the outcome of the render under way, once it ended.
    pub fn poll(&mut self) {
        let Some(r) = self.job.as_ref().and_then(RenderJob::poll) else {
            return;
        };
        let job = self.job.take().expect("checked");
        match r {
            Ok(done) => {
                self.problem = None;
                self.message = Some(Ok(format!(
                    "rendered {} frame{} of '{}' on {}: {}",
                    done.frames,
                    if done.frames == 1 { "" } else { "s" },
                    job.spec.view,
                    done.backend,
                    match done.files.as_slice() {
                        [one] => one.display().to_string(),
                        [a, .., b] => format!("{} .. {}", a.display(), b.display()),
                        [] => String::new(),
                    }
                )));
            }
            Err(e @ RenderError::Cancelled { .. }) => {
                self.message = Some(Err(format!("{} (nothing half-written was kept)", e)));
            }
            Err(e) => {
                let text = format!("render: {}", e);
                self.problem = Some((e.node().map(str::to_string), text.clone()));
                self.message = Some(Err(text));
            }
        }
    }

    /// The window (File > Render… opens it). `program`: the running one,
    /// for the list of views.
    pub fn ui(&mut self, ctx: &egui::Context, program: Option<&Program>) {
        self.poll();
        if !self.open {
            return;
        }
        let mut open = self.open;
        egui::Window::new("Render")
            .open(&mut open)
            .pivot(egui::Align2::CENTER_CENTER)
            .default_pos(ctx.content_rect().center())
            .resizable(false)
            .show(ctx, |ui| {
                let running = self.job.is_some();
                ui.add_enabled_ui(!running, |ui| self.fields(ui, program));
                ui.horizontal(|ui| {
                    if let Some(job) = &self.job {
                        let (n, total) = (job.rendered(), job.total());
                        ui.add(
                            egui::ProgressBar::new(n as f32 / total as f32)
                                .desired_width(200.0)
                                .text(format!("rendering {} / {}", n, total)),
                        );
                        if ui.button("Cancel render").clicked() {
                            job.cancel();
                        }
                    } else if ui
                        .add_enabled(!self.view.is_empty(), egui::Button::new("Start render"))
                        .on_disabled_hover_text("the graph has no view to render")
                        .clicked()
                    {
                        self.start_requested = true;
                    }
                });
                match &self.message {
                    Some(Ok(m)) => {
                        ui.label(m);
                    }
                    Some(Err(m)) => {
                        ui.colored_label(egui::Color32::from_rgb(255, 120, 100), m);
                    }
                    None => {}
                }
            });
        self.open = open;
    }

    fn fields(&mut self, ui: &mut egui::Ui, program: Option<&Program>) {
        let views = program.map(render::view_ids).unwrap_or_default();
        egui::Grid::new("render_fields")
            .num_columns(2)
            .show(ui, |ui| {
                ui.label("View");
                egui::ComboBox::from_id_salt("render_view")
                    .selected_text(&self.view)
                    .show_ui(ui, |ui| {
                        for v in &views {
                            ui.selectable_value(&mut self.view, v.clone(), v);
                        }
                    });
                ui.end_row();
                ui.label("Frames");
                ui.horizontal(|ui| {
                    ui.add(egui::DragValue::new(&mut self.first).range(0..=self.last));
                    ui.label("to");
                    ui.add(egui::DragValue::new(&mut self.last).range(self.first..=1_000_000));
                });
                ui.end_row();
                ui.label("Size");
                ui.horizontal(|ui| {
                    let max = render::MAX_SIDE;
                    ui.add(egui::DragValue::new(&mut self.width).range(1..=max));
                    ui.label("x");
                    ui.add(egui::DragValue::new(&mut self.height).range(1..=max));
                });
                ui.end_row();
                ui.label("Output");
                ui.horizontal(|ui| {
                    ui.add(
                        egui::TextEdit::singleline(&mut self.out)
                            .id_salt("render_out")
                            .desired_width(240.0),
                    )
                    .on_hover_text(
                        "NAME.mp4: an H.264 movie (needs ffmpeg on PATH); NAME_####.png: a PNG \
                         per frame (# is the frame number). Relative to the graph's folder.",
                    );
                    let stem = self.out_stem();
                    if ui.small_button("mp4").clicked() {
                        self.out = format!("{}.mp4", stem);
                    }
                    if ui.small_button("png").clicked() {
                        self.out = format!("{}_####.png", stem);
                    }
                });
                ui.end_row();
                ui.label("FPS");
                ui.add(egui::DragValue::new(&mut self.fps).range(1..=240))
                    .on_hover_text("frames per second of the movie");
                ui.end_row();
            });
        self.fill_size(program);
    }

    /// The output path without its extension or frame-number run.
    fn out_stem(&self) -> String {
        let s = self.out.trim();
        let s = s
            .strip_suffix(".mp4")
            .or_else(|| s.strip_suffix(".png"))
            .unwrap_or(s);
        s.trim_end_matches('#').trim_end_matches('_').to_string()
    }
}
