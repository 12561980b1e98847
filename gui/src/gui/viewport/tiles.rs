//! What a pane shows beside its picture: the field value under the
//! pointer (read back at most four times a second) and a scalar image's
//! colour bar.

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
