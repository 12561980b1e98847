//! The view tiles on screen: layout, zoom and pan, the readout under the
//! pointer and colour bars.

use super::*;

impl Viewport {
    /// Field words of `f` for the readout and colour bar, read back at most
    /// four times a second and only for views on screen.
    pub(super) fn probe(&mut self, f: FieldId, now: f64) -> Option<&[u32]> {
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
    pub(super) fn view_tile(
        &mut self,
        ui: &mut egui::Ui,
        k: usize,
        w: f32,
        now: f64,
    ) -> Option<String> {
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

    /// "T[37, 80] = 0.4213" for the cell (x, y) of an image view's field.
    pub(super) fn value_at(&mut self, field: FieldId, x: u32, y: u32, now: f64) -> String {
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
    pub(super) fn colour_bar(
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
