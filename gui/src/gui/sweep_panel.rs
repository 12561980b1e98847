//! File > Open sweep…: a sweep folder collected by `weft sweep collect`,
//! shown as its contact sheet — one thumbnail per variant (the frame the
//! sheet shows), its parameter values and state under it. Clicking a
//! thumbnail opens the graph with those values set, as an untitled copy.
//!
//! The folder's files are read as JSON here (the GUI module has no access
//! to the CLI's `sweep` types): `manifest.json` (graph, variants with their
//! `--set` values and seed), `collect.json` (view and frame) and each
//! variant's `NNNN/result.json` (its status).

use serde_json::Value;
use std::path::{Path, PathBuf};

/// One variant's thumbnail.
pub struct Cell {
    pub index: usize,
    /// `NODE.PARAM=VALUE` as `weft run --set` takes it.
    pub sets: Vec<String>,
    pub seed: Option<u32>,
    /// done, failed, running or missing.
    pub state: String,
    pub image: PathBuf,
    texture: Option<Result<egui::TextureHandle, String>>,
}

impl Cell {
    pub fn labels(&self) -> Vec<String> {
        let mut l = self.sets.clone();
        if let Some(s) = self.seed {
            l.push(format!("seed={}", s));
        }
        l
    }
}

/// What a click asks for: the graph with these values, untitled.
#[derive(Clone, Debug, PartialEq)]
pub struct Pick {
    pub graph: PathBuf,
    pub sets: Vec<String>,
    pub seed: Option<u32>,
}

#[derive(Default)]
pub struct SweepPanel {
    pub open: bool,
    /// The sweep folder shown.
    pub dir: Option<PathBuf>,
    pub graph: PathBuf,
    pub cells: Vec<Cell>,
    /// Why the last folder could not be shown.
    pub error: Option<String>,
    /// Thumbnail size (points).
    pub thumb: f32,
}

impl SweepPanel {
    pub fn new() -> SweepPanel {
        SweepPanel {
            thumb: 160.0,
            ..Default::default()
        }
    }

    /// Shows the sweep at `path` (its folder, or its manifest.json).
    pub fn load(&mut self, path: &Path) {
        self.open = true;
        let dir = if path.is_dir() {
            path.to_path_buf()
        } else {
            path.parent().map(Path::to_path_buf).unwrap_or_default()
        };
        match read_sweep(&dir) {
            Ok((graph, cells)) => {
                self.graph = graph;
                self.cells = cells;
                self.error = None;
            }
            Err(e) => {
                self.cells.clear();
                self.error = Some(e);
            }
        }
        self.dir = Some(dir);
    }

    /// The window; returns the variant clicked this pass.
    pub fn ui(&mut self, ctx: &egui::Context) -> Option<Pick> {
        if !self.open {
            return None;
        }
        let mut open = self.open;
        let mut pick = None;
        egui::Window::new("Sweep")
            .open(&mut open)
            .default_size([720.0, 560.0])
            .show(ctx, |ui| {
                if let Some(d) = &self.dir {
                    ui.label(format!("{} — {}", d.display(), self.graph.display()));
                }
                if let Some(e) = &self.error {
                    ui.colored_label(ui.visuals().error_fg_color, e);
                    return;
                }
                ui.label("Click a variant to open the graph with its values (an untitled copy).");
                ui.separator();
                let thumb = self.thumb;
                let per_row = ((ui.available_width() / (thumb + 12.0)).floor() as usize).max(1);
                egui::ScrollArea::vertical().show(ui, |ui| {
                    for row in self.cells.chunks_mut(per_row) {
                        ui.horizontal_top(|ui| {
                            for c in row {
                                ui.allocate_ui(egui::vec2(thumb + 4.0, thumb + 80.0), |ui| {
                                    ui.vertical(|ui| {
                                        if show_cell(ui, ctx, c, thumb) {
                                            pick = Some(Pick {
                                                graph: self.graph.clone(),
                                                sets: c.sets.clone(),
                                                seed: c.seed,
                                            });
                                        }
                                    });
                                });
                            }
                        });
                        ui.add_space(6.0);
                    }
                });
            });
        self.open = open;
        pick
    }
}

/// One thumbnail and its labels; true when clicked.
fn show_cell(ui: &mut egui::Ui, ctx: &egui::Context, c: &mut Cell, thumb: f32) -> bool {
    if c.texture.is_none() && c.state == "done" {
        c.texture = Some(load_texture(ctx, &c.image));
    }
    let name = format!("variant {}", c.index);
    let response = match &c.texture {
        Some(Ok(t)) => {
            let size = t.size_vec2();
            let scale = thumb / size.x.max(size.y).max(1.0);
            ui.add(egui::Button::image(
                egui::Image::new(t).fit_to_exact_size(size * scale),
            ))
        }
        other => {
            let why = match other {
                Some(Err(e)) => e.clone(),
                _ => c.state.clone(),
            };
            ui.add_sized([thumb, thumb], egui::Button::new(why))
        }
    };
    let response = response.on_hover_text(c.labels().join("\n"));
    response
        .widget_info(|| egui::WidgetInfo::labeled(egui::WidgetType::Button, true, name.clone()));
    let colour = if c.state == "done" {
        ui.visuals().text_color()
    } else {
        ui.visuals().error_fg_color
    };
    ui.colored_label(colour, format!("#{} {}", c.index, c.state));
    for l in c.labels() {
        ui.add(egui::Label::new(egui::RichText::new(l).small()).truncate());
    }
    response.clicked()
}

fn load_texture(ctx: &egui::Context, path: &Path) -> Result<egui::TextureHandle, String> {
    let file =
        std::fs::File::open(path).map_err(|e| format!("cannot open {}: {}", path.display(), e))?;
    let mut dec = png::Decoder::new(std::io::BufReader::new(file));
    dec.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = dec
        .read_info()
        .map_err(|e| format!("{}: {}", path.display(), e))?;
    let mut buf = vec![0; reader.output_buffer_size().unwrap_or(0)];
    let info = reader
        .next_frame(&mut buf)
        .map_err(|e| format!("{}: {}", path.display(), e))?;
    let channels = info.color_type.samples();
    let mut rgba = Vec::with_capacity((info.width * info.height * 4) as usize);
    for p in buf[..info.buffer_size()].chunks_exact(channels) {
        match channels {
            1 => rgba.extend_from_slice(&[p[0], p[0], p[0], 255]),
            2 => rgba.extend_from_slice(&[p[0], p[0], p[0], p[1]]),
            3 => rgba.extend_from_slice(&[p[0], p[1], p[2], 255]),
            _ => rgba.extend_from_slice(&p[..4]),
        }
    }
    let image = egui::ColorImage::from_rgba_unmultiplied(
        [info.width as usize, info.height as usize],
        &rgba,
    );
    Ok(ctx.load_texture(
        format!("sweep-thumb-{}", path.display()),
        image,
        egui::TextureOptions::NEAREST,
    ))
}

fn read_json(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {}", path.display(), e))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {}", path.display(), e))
}

/// The graph and one cell per variant of the sweep in `dir`.
pub fn read_sweep(dir: &Path) -> Result<(PathBuf, Vec<Cell>), String> {
    let m = read_json(&dir.join("manifest.json"))?;
    if m["format"] != "weft-sweep" {
        return Err(format!(
            "{}: not a sweep manifest (made by `weft sweep plan`)",
            dir.join("manifest.json").display()
        ));
    }
    let collected = read_json(&dir.join("collect.json"))
        .map_err(|e| format!("{} (run `weft sweep collect {}` first)", e, dir.display()))?;
    let view = collected["view"].as_str().unwrap_or("view").to_string();
    let frame = collected["frame"].as_u64().unwrap_or(1);
    let graph = PathBuf::from(m["graph"].as_str().unwrap_or_default());
    let variants = m["variants"]
        .as_array()
        .ok_or_else(|| format!("{}: no variants", dir.join("manifest.json").display()))?;
    let mut cells = Vec::new();
    for (i, v) in variants.iter().enumerate() {
        let sub = format!("{:04}", i);
        if v["dir"].as_str() != Some(sub.as_str()) {
            return Err(format!(
                "manifest.json: variant {} is not in folder {}",
                i, sub
            ));
        }
        let state = read_json(&dir.join(&sub).join("result.json"))
            .ok()
            .and_then(|r| r["status"].as_str().map(str::to_string))
            .unwrap_or_else(|| "missing".into());
        cells.push(Cell {
            index: i,
            sets: v["sets"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
            seed: v["seed"].as_u64().map(|s| s as u32),
            state,
            image: dir.join(&sub).join(format!("{}_{:04}.png", view, frame)),
            texture: None,
        });
    }
    Ok((graph, cells))
}
