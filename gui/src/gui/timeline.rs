//! The timeline, a bar across the window under the viewport and the node
//! editor: a frame slider, the play range (start
//! and end: playing past the end goes back to the start), and a strip that
//! shows which frames are cached (in memory, on disk) with the playhead.
//! Clicking or dragging on the strip (or the slider) scrubs: a cached frame
//! is restored as it was simulated (no kernel runs), another is simulated
//! forward to (`Viewport::seek`). The cache's memory budget and whether
//! evicted frames spill to disk are set here too.

use super::bake::{self, BakeJob};
use super::frame_cache::Cached;
use super::viewport::Viewport;
use egui::{Color32, Sense, Stroke};
use std::path::{Path, PathBuf};

/// Cached frame in memory.
pub const MEMORY: Color32 = Color32::from_rgb(80, 170, 110);
/// Cached frame on disk.
pub const DISK: Color32 = Color32::from_rgb(80, 130, 210);
/// A stale baked frame (hatched).
pub const STALE: Color32 = Color32::from_rgb(200, 60, 60);
/// Not cached.
const EMPTY: Color32 = Color32::from_rgb(45, 45, 50);

pub struct Timeline {
    /// The play range: playing loops from `end` back to `start`.
    pub start: i32,
    pub end: i32,
    /// The strip's area on screen, as last drawn (tests point into it).
    pub strip_rect: egui::Rect,
    /// The bake under way (Bake button), and how the last one ended.
    pub bake: Option<BakeJob>,
    pub bake_message: Option<Result<String, String>>,
    /// Bake every field's state (`weft bake --fields all`) instead of the
    /// fields the views read.
    pub bake_all_fields: bool,
    /// Flipbook: play at `fps` frames a second (cached and baked frames
    /// are shown from the cache, held 1/fps each), as Houdini's flipbook
    /// plays a cached range; off, playing goes as fast as frames come.
    pub flipbook: bool,
    pub fps: f32,
    /// Playing past `end` goes back to `start`; off, it stops at `end`.
    pub loop_play: bool,
}

/// What the timeline asks of the app after its pass.
#[derive(Default)]
pub struct Asked {
    /// New frame cache settings (MiB, spill) for the preferences.
    pub cache_prefs: Option<(u32, bool)>,
    /// Bake the play range into this cache folder.
    pub bake: Option<PathBuf>,
}

impl Timeline {
    /// Another graph takes over: a bake under way is cancelled (the
    /// frames it wrote stay in its cache folder) and the last bake's
    /// message goes, so nothing of the old graph is shown as the new one's.
    pub fn forget_graph(&mut self) {
        if let Some(job) = self.bake.take() {
            job.cancel();
        }
        self.bake_message = None;
    }
}

impl Default for Timeline {
    fn default() -> Timeline {
        Timeline {
            start: 0,
            end: 240,
            strip_rect: egui::Rect::NOTHING,
            bake: None,
            bake_message: None,
            bake_all_fields: false,
            flipbook: false,
            fps: 24.0,
            loop_play: true,
        }
    }
}

impl Timeline {
    /// The frame at screen x `x` in the strip.
    pub fn frame_at(&self, x: f32) -> i32 {
        let r = self.strip_rect;
        let n = (self.end - self.start + 1).max(1) as f32;
        let t = ((x - r.left()) / r.width().max(1.0)).clamp(0.0, 0.999_999);
        self.start + (t * n).floor() as i32
    }

    /// The strip's x at the middle of frame `f`.
    pub fn x_of(&self, f: i32) -> f32 {
        let r = self.strip_rect;
        let n = (self.end - self.start + 1).max(1) as f32;
        r.left() + (f - self.start) as f32 * r.width() / n + r.width() / n * 0.5
    }

    /// Before the viewport's pass: the flipbook rate goes to the
    /// viewport, and playing past the end of the range goes back to its
    /// start (with a flipbook, once the last frame has had its time) or,
    /// without Loop, stops there.
    pub fn follow_play(&mut self, vp: &mut Viewport, ctx: &egui::Context) {
        vp.play_fps = self.flipbook.then_some(self.fps);
        if vp.playing && vp.seek_to.is_none() && vp.frame() >= self.end && self.end > self.start {
            if !self.loop_play {
                vp.playing = false;
            } else if vp.play_due(ctx) {
                vp.seek(self.start);
            }
        }
    }

    /// Starts baking the play range of `doc` into `out` on a thread of its
    /// own, on the backend the viewport's simulation runs on, with the
    /// editor's asset library `assets` (the one the viewport builds with).
    pub fn start_bake(
        &mut self,
        doc: weft_ir::graph::GraphDoc,
        assets: &super::asset_menu::AssetLibraries,
        vp: &mut Viewport,
        revision: u64,
        out: PathBuf,
        ctx: &egui::Context,
    ) {
        let backend = vp
            .sim
            .as_ref()
            .and_then(|s| s.backend())
            .unwrap_or(vp.backend);
        self.bake_message = None;
        // The folder is replaced: its old frames are no longer there.
        vp.cache.drop_baked(&out);
        vp.baked_stale.clear();
        self.bake = Some(BakeJob::start(
            doc,
            assets,
            bake::options(backend),
            self.start,
            self.end,
            if self.bake_all_fields {
                bake::Contents::Everything
            } else {
                bake::Contents::Views
            },
            out,
            revision,
            ctx.clone(),
        ));
    }

    /// Draws the timeline (`graph`: the open graph's file, where its cache
    /// goes; `revision`: the document's now); returns what it asks of the app.
    pub fn ui(
        &mut self,
        ui: &mut egui::Ui,
        vp: &mut Viewport,
        graph: Option<&Path>,
        revision: u64,
    ) -> Asked {
        let mut asked = Asked::default();
        let mut changed = None;
        let shown = vp.seek_to.unwrap_or_else(|| vp.frame());
        ui.horizontal_wrapped(|ui| {
            ui.label("Frame");
            let mut f = shown;
            let slider = ui.add(
                egui::Slider::new(&mut f, self.start..=self.end.max(self.start))
                    .clamping(egui::SliderClamping::Never),
            );
            if slider.changed() && f != shown {
                vp.seek(f);
            }
            ui.separator();
            ui.label("Start");
            ui.add(egui::DragValue::new(&mut self.start).range(0..=self.end));
            ui.label("End");
            ui.add(egui::DragValue::new(&mut self.end).range(self.start + 1..=1_000_000));
            ui.checkbox(&mut self.loop_play, "Loop")
                .on_hover_text("playing past End goes back to Start; off: it stops at End");
            ui.checkbox(&mut self.flipbook, "Flipbook").on_hover_text(
                "play at a fixed rate: each frame is held for 1/FPS s (cached and baked \
                 frames play without simulating; Bake the range first to flip through it)",
            );
            ui.add_enabled(
                self.flipbook,
                egui::DragValue::new(&mut self.fps)
                    .range(1.0..=240.0)
                    .speed(0.5)
                    .suffix(" fps"),
            )
            .on_hover_text("frames per second of the flipbook");
            ui.separator();
            let gpu = vp.on_gpu_backend();
            let mut on = vp.cache.captures(gpu);
            if ui
                .checkbox(&mut on, "Cache frames")
                .on_hover_text(if gpu {
                    "keep each simulated frame to scrub back to; on a GPU this reads the whole state back every frame, so it is off unless you turn it on (or Bake)"
                } else {
                    "keep each simulated frame to scrub back to"
                })
                .changed()
            {
                vp.cache.capture = Some(on);
            }
            let (m, d) = vp.cache.counts();
            let mb = |b: usize| b as f64 / (1024.0 * 1024.0);
            let mut budget = (vp.cache.budget / (1024 * 1024)) as u32;
            ui.label(format!(
                "cached: {} in memory ({:.1} of",
                m,
                mb(vp.cache.bytes())
            ))
            .on_hover_text("frames kept to scrub back to without simulating");
            let b = ui
                .add(
                    egui::DragValue::new(&mut budget)
                        .range(1..=1_000_000)
                        .suffix(" MiB)"),
                )
                .on_hover_text("memory budget of the frame cache");
            ui.label(format!("{} on disk", d));
            let mut spill = vp.cache.spill;
            let no_disk = super::platform::unavailable(super::platform::Feature::SpillToDisk);
            let s = ui
                .add_enabled(
                    no_disk.is_none(),
                    egui::Checkbox::new(&mut spill, "Spill to disk"),
                )
                .on_hover_text(format!(
                    "frames evicted from memory are written to {}",
                    vp.cache.spill_dir().display()
                ))
                .on_disabled_hover_text(no_disk.unwrap_or_default());
            if b.changed() || s.changed() {
                vp.cache.budget = budget as usize * 1024 * 1024;
                vp.cache.spill = spill;
                let at = vp.frame();
                vp.cache.evict(at);
                changed = Some((budget, spill));
            }
            if let Some(e) = &vp.cache.error {
                ui.colored_label(Color32::from_rgb(255, 110, 110), e);
            }
        });
        self.bake_row(ui, vp, graph, revision, &mut asked);
        self.strip(ui, vp, shown);
        asked.cache_prefs = changed;
        asked
    }

    /// Bake (the play range, into `GRAPH.cache/`), its progress and Cancel.
    fn bake_row(
        &mut self,
        ui: &mut egui::Ui,
        vp: &mut Viewport,
        graph: Option<&Path>,
        revision: u64,
        asked: &mut Asked,
    ) {
        if let Some(job) = &self.bake {
            if let Some(r) = job.poll() {
                let job = self.bake.take().expect("checked");
                self.bake_message = Some(r.map(|n| {
                    // Baked from the document as it is now: its frames play.
                    if job.revision == revision {
                        vp.take_baked();
                    }
                    format!(
                        "baked {} frame{} of {}..{} into {}",
                        n,
                        if n == 1 { "" } else { "s" },
                        job.first,
                        job.last,
                        job.out.display()
                    )
                }));
            }
        }
        ui.horizontal_wrapped(|ui| {
            if let Some(job) = &self.bake {
                let total = job.last - job.first + 1;
                ui.add(
                    egui::ProgressBar::new(job.written() as f32 / total as f32)
                        .desired_width(160.0)
                        .text(format!("baking {} / {}", job.written(), total)),
                );
                if ui.button("Cancel").clicked() {
                    job.cancel();
                }
                return;
            }
            let no_bake = super::platform::unavailable(super::platform::Feature::Bake);
            let out = graph.filter(|_| no_bake.is_none()).map(bake::cache_dir_for);
            let b = ui.add_enabled(out.is_some(), egui::Button::new("Bake"));
            let b = match &out {
                None if no_bake.is_some() => b.on_disabled_hover_text(no_bake.unwrap_or_default()),
                Some(o) => b.on_hover_text(format!(
                    "simulate frames {}..{} and write every field's state to {} (reopens with the graph)",
                    self.start,
                    self.end,
                    o.display()
                )),
                None => b.on_disabled_hover_text("save the graph first: its cache goes beside it"),
            };
            if b.clicked() {
                asked.bake = out.clone();
            }
            ui.checkbox(&mut self.bake_all_fields, "all fields").on_hover_text(
                "bake every field's state, so play and `weft run --resume` go on from any \
                 baked frame. Off: only the fields the views read (smaller; their frames are \
                 shown, and the bake's last frame is stored whole to play on from)",
            );
            if !vp.baked_stale.is_empty() {
                ui.colored_label(STALE, "stale")
                    .on_hover_text(format!(
                        "{} baked frames are stale ({}): they are not shown (frames are \
                         simulated instead) until re-baked",
                        vp.baked_stale.len(),
                        vp.baked_stale_why
                    ));
                if ui.add_enabled(out.is_some(), egui::Button::new("Re-bake")).clicked() {
                    asked.bake = out;
                }
            }
            match &self.bake_message {
                Some(Ok(m)) => {
                    ui.label(m);
                }
                Some(Err(e)) => {
                    ui.colored_label(Color32::from_rgb(255, 110, 110), format!("bake: {}", e));
                }
                None => {}
            }
        });
    }

    /// The cache strip with the playhead; click or drag to scrub.
    fn strip(&mut self, ui: &mut egui::Ui, vp: &mut Viewport, shown: i32) {
        let w = ui.available_width();
        let (rect, resp) = ui.allocate_exact_size(egui::vec2(w, 16.0), Sense::click_and_drag());
        self.strip_rect = rect;
        let p = ui.painter_at(rect);
        p.rect_filled(rect, 2.0, EMPTY);
        let n = (self.end - self.start + 1).max(1);
        let cell = rect.width() / n as f32;
        for f in self.start..=self.end {
            let c = match vp.cache.where_is(f) {
                Some(Cached::Memory) => MEMORY,
                Some(Cached::Disk) => DISK,
                None => continue,
            };
            let x0 = rect.left() + (f - self.start) as f32 * cell;
            p.rect_filled(
                egui::Rect::from_min_max(
                    egui::pos2(x0, rect.top() + 3.0),
                    egui::pos2(x0 + cell.max(1.0), rect.bottom() - 3.0),
                ),
                0.0,
                c,
            );
        }
        // Stale baked frames: red hatching where no current frame is.
        for &f in &vp.baked_stale {
            if f < self.start || f > self.end || vp.cache.where_is(f).is_some() {
                continue;
            }
            let x0 = rect.left() + (f - self.start) as f32 * cell;
            let r = egui::Rect::from_min_max(
                egui::pos2(x0, rect.top() + 3.0),
                egui::pos2(x0 + cell.max(1.0), rect.bottom() - 3.0),
            );
            p.rect_filled(r, 0.0, STALE.gamma_multiply(0.35));
            let hatch = p.with_clip_rect(r);
            let h = r.height();
            let mut x = (x0 / 6.0).floor() * 6.0 - h;
            while x < r.right() {
                hatch.line_segment(
                    [egui::pos2(x, r.bottom()), egui::pos2(x + h, r.top())],
                    Stroke::new(1.0, STALE),
                );
                x += 6.0;
            }
        }
        if (self.start..=self.end).contains(&shown) {
            let x = self.x_of(shown);
            p.line_segment(
                [egui::pos2(x, rect.top()), egui::pos2(x, rect.bottom())],
                Stroke::new(2.0, Color32::from_rgb(255, 200, 60)),
            );
        }
        if resp.clicked() || resp.dragged() {
            if let Some(pos) = resp.interact_pointer_pos() {
                let f = self.frame_at(pos.x);
                if f != shown {
                    vp.seek(f);
                }
            }
        }
        resp.on_hover_text("cached frames: green in memory, blue on disk; click or drag to scrub");
    }
}
