//! The live viewport: compiles the graph in the background, runs it, and
//! draws its views.
//!
//! On wgpu the simulation shares eframe's device, and views are rendered by
//! the GPU view renderer into textures that egui draws directly (no copy to
//! the CPU). When only kernel scalars change, the running simulation keeps
//! its state and just takes the new values.

use serde_json::Value;
use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;
use weft_ir::graph::{build_program, BuildOptions, GraphDoc};
use weft_runtime::gpu::GpuContext;
use weft_runtime::gpu_render::GpuViewRenderer;
use weft_runtime::{Backend, SimOptions, Simulation};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViewBackend {
    Wgpu,
    Cpu,
    /// The compiled CPU backend.
    Jit,
}

struct ViewTexture {
    id: egui::TextureId,
    /// The wgpu texture (GPU path) or nothing (CPU path: egui owns it).
    texture: Option<wgpu::Texture>,
    handle: Option<egui::TextureHandle>,
    size: [u32; 2],
    name: String,
}

type Built = Result<(Simulation, Option<GpuViewRenderer>), String>;

pub struct Viewport {
    pub backend: ViewBackend,
    pub playing: bool,
    pub sim: Option<Simulation>,
    renderer: Option<GpuViewRenderer>,
    textures: Vec<ViewTexture>,
    gpu: Option<Arc<GpuContext>>,
    egui_renderer: Option<Arc<egui::mutex::RwLock<eframe::egui_wgpu::Renderer>>>,
    pending: Option<(u64, Receiver<Built>)>,
    /// The document revision the running simulation was built from.
    built_from: Option<(u64, GraphDoc)>,
    pub error: Option<String>,
    pub frame_ms: f64,
    pub frames_run: u64,
    pub needs_draw: bool,
    /// Show one view at a time (`tab` picks it) instead of tiling them all.
    pub tabbed: bool,
    pub tab: usize,
}

fn without_scalars(doc: &GraphDoc) -> GraphDoc {
    let mut d = doc.clone();
    for n in &mut d.nodes {
        n.params.remove("scalars");
        n.pos = [0.0, 0.0];
    }
    d
}

impl Viewport {
    pub fn new(render_state: Option<&eframe::egui_wgpu::RenderState>) -> Viewport {
        let gpu = render_state.map(|rs| {
            Arc::new(GpuContext::from_shared(
                &rs.adapter,
                rs.device.clone(),
                rs.queue.clone(),
            ))
        });
        Viewport {
            backend: if gpu.is_some() {
                ViewBackend::Wgpu
            } else {
                ViewBackend::Cpu
            },
            playing: false,
            sim: None,
            renderer: None,
            textures: vec![],
            egui_renderer: render_state.map(|rs| rs.renderer.clone()),
            gpu,
            pending: None,
            built_from: None,
            error: None,
            frame_ms: 0.0,
            frames_run: 0,
            needs_draw: false,
            tabbed: false,
            tab: 0,
        }
    }

    pub fn has_gpu(&self) -> bool {
        self.gpu.is_some()
    }

    /// Follows the document: scalars only → update in place; anything else → rebuild in the background.
    pub fn sync(
        &mut self,
        revision: u64,
        doc: &GraphDoc,
        base_dir: Option<PathBuf>,
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
        if let (Some(sim), Some((_, old))) = (&mut self.sim, &self.built_from) {
            if without_scalars(old) == without_scalars(doc) {
                for n in doc.nodes.iter().filter(|n| n.kind == "kernel") {
                    for (name, v) in n
                        .params
                        .get("scalars")
                        .and_then(Value::as_object)
                        .into_iter()
                        .flatten()
                    {
                        let x = match v {
                            Value::Object(d) => {
                                d.get("default").and_then(Value::as_f64).unwrap_or(0.0)
                            }
                            v => v.as_f64().unwrap_or(0.0),
                        };
                        let _ = sim.set_param(&n.id, name, x);
                    }
                }
                self.built_from = Some((revision, doc.clone()));
                self.needs_draw = true;
                return;
            }
        }
        self.rebuild(revision, doc, base_dir);
    }

    pub fn rebuild(&mut self, revision: u64, doc: &GraphDoc, base_dir: Option<PathBuf>) {
        let (tx, rx) = channel();
        let doc2 = doc.clone();
        let gpu = if self.backend == ViewBackend::Wgpu {
            self.gpu.clone()
        } else {
            None
        };
        let cpu_backend = if self.backend == ViewBackend::Jit {
            Backend::Jit
        } else {
            Backend::Cpu
        };
        std::thread::spawn(move || {
            let r = (|| -> Built {
                let program = build_program(
                    &doc2,
                    &BuildOptions {
                        base_dir: base_dir.unwrap_or_default(),
                    },
                )
                .map_err(|e| e.to_string())?;
                let backend = if gpu.is_some() {
                    Backend::Wgpu
                } else {
                    cpu_backend
                };
                let mut sim = Simulation::new(
                    program,
                    &SimOptions {
                        backend,
                        gpu,
                        ..Default::default()
                    },
                )
                .map_err(|e| e.to_string())?;
                sim.start().map_err(|e| e.to_string())?;
                let renderer = match sim.gpu_engine() {
                    Some(engine) => Some(
                        GpuViewRenderer::with_format(
                            engine,
                            &sim.program,
                            wgpu::TextureFormat::Rgba8Unorm,
                        )
                        .map_err(|e| e.to_string())?,
                    ),
                    None => None,
                };
                Ok((sim, renderer))
            })();
            let _ = tx.send(r);
        });
        self.pending = Some((revision, rx));
        self.built_from = Some((revision, doc.clone()));
    }

    /// Swaps in a finished background build; steps when playing.
    pub fn update(&mut self, ctx: &egui::Context) {
        if let Some((_, rx)) = &self.pending {
            match rx.try_recv() {
                Ok(Ok((sim, renderer))) => {
                    self.sim = Some(sim);
                    self.renderer = renderer;
                    self.textures.clear();
                    self.error = None;
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
        }
        if self.playing {
            self.step();
            ctx.request_repaint();
        }
        if self.needs_draw {
            self.draw(ctx);
        }
    }

    pub fn compiling(&self) -> bool {
        self.pending.is_some()
    }

    pub fn step(&mut self) {
        let Some(sim) = &mut self.sim else { return };
        let t = std::time::Instant::now();
        match sim.step_frame() {
            Ok(()) => {
                self.frame_ms = t.elapsed().as_secs_f64() * 1e3;
                self.frames_run += 1;
                self.needs_draw = true;
            }
            Err(e) => {
                self.error = Some(e.to_string());
                self.playing = false;
            }
        }
    }

    pub fn reset(&mut self) {
        if let Some(sim) = &mut self.sim {
            let r = sim.reset().and_then(|_| sim.start());
            if let Err(e) = r {
                self.error = Some(e.to_string());
            }
            self.needs_draw = true;
        }
    }

    /// Per-kernel median launch times (ms), for the status line.
    pub fn kernel_times(&self) -> Vec<(String, f64)> {
        let Some(sim) = &self.sim else { return vec![] };
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

    fn draw(&mut self, ctx: &egui::Context) {
        self.needs_draw = false;
        let Some(sim) = &self.sim else { return };
        match (&self.renderer, &self.gpu, &self.egui_renderer) {
            (Some(renderer), Some(gpu), Some(egui_renderer)) => {
                let mut enc = gpu
                    .device
                    .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                        label: Some("viewport"),
                    });
                for i in 0..renderer.len() {
                    let Some((name, w, h)) = renderer.view_info(i) else {
                        continue;
                    };
                    if self.textures.len() <= i {
                        let texture = gpu.device.create_texture(&wgpu::TextureDescriptor {
                            label: Some(name),
                            size: wgpu::Extent3d {
                                width: w.max(1),
                                height: h.max(1),
                                depth_or_array_layers: 1,
                            },
                            mip_level_count: 1,
                            sample_count: 1,
                            dimension: wgpu::TextureDimension::D2,
                            format: wgpu::TextureFormat::Rgba8Unorm,
                            usage: wgpu::TextureUsages::RENDER_ATTACHMENT
                                | wgpu::TextureUsages::TEXTURE_BINDING
                                | wgpu::TextureUsages::COPY_SRC,
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
                            name: name.to_string(),
                        });
                    }
                    let Some(tex) = self.textures[i].texture.as_ref() else {
                        continue;
                    };
                    let view = tex.create_view(&Default::default());
                    if let Err(e) = renderer.render(&mut enc, i, &view, None) {
                        self.error = Some(e.to_string());
                    }
                }
                gpu.queue.submit([enc.finish()]);
            }
            _ => match sim.render_views() {
                Ok(images) => {
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
                Err(e) => self.error = Some(e.to_string()),
            },
        }
    }

    /// Draws the views tiled in the available space, keeping aspect ratios; scroll to zoom.
    pub fn ui(&mut self, ui: &mut egui::Ui, zoom: &mut f32) {
        if self.textures.is_empty() {
            let msg = if self.compiling() {
                "compiling…"
            } else if self.error.is_some() {
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
                .button(format!("{:.0}%", *zoom * 100.0))
                .on_hover_text("Scroll over the views to zoom, drag to pan; click to fit")
                .clicked()
            {
                *zoom = 1.0;
            }
        });
        self.tab = self.tab.min(self.textures.len() - 1);
        let scroll = ui.input(|i| i.smooth_scroll_delta.y);
        if ui.rect_contains_pointer(ui.max_rect()) && scroll != 0.0 {
            *zoom = (*zoom * (1.0 + scroll * 0.002)).clamp(0.1, 20.0);
        }
        let shown: Vec<&ViewTexture> = if self.tabbed {
            vec![&self.textures[self.tab]]
        } else {
            self.textures.iter().collect()
        };
        // Zooming takes the wheel, so the area pans by dragging only.
        egui::ScrollArea::both()
            .scroll_source(
                egui::scroll_area::ScrollSource::DRAG | egui::scroll_area::ScrollSource::SCROLL_BAR,
            )
            .show(ui, |ui| {
                let avail = ui.available_width().max(64.0);
                let n = shown.len() as f32;
                ui.horizontal_wrapped(|ui| {
                    for t in shown {
                        let aspect = t.size[1] as f32 / t.size[0].max(1) as f32;
                        let w = (avail / n.min(2.0) - 8.0).max(64.0) * *zoom;
                        ui.vertical(|ui| {
                            ui.label(&t.name);
                            ui.image((t.id, egui::vec2(w, w * aspect)));
                        });
                    }
                });
            });
    }
}
