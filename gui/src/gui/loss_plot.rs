//! The loss per iteration of every `optimize` node, drawn as a line plot
//! with egui's painter (no plotting dependency).
//!
//! The simulation keeps each node's losses in a ring field `NODE.loss` and
//! counts iterations in `NODE.step` (`passes::optimize`), so the app reads
//! them back only now and then (at most five times a second while playing,
//! at once after a single step) and loses nothing in between, as long as
//! fewer than `history` iterations ran since the last read.

use std::collections::BTreeMap;
use weft_runtime::Simulation;

/// Iterations kept per node for the plot (older ones are dropped).
const MAX_POINTS: usize = 100_000;
/// Seconds between read-backs while the graph plays.
const PLAYING_INTERVAL: f64 = 0.2;

#[derive(Default)]
pub struct Series {
    /// Loss of iteration `first + k` at `values[k]`.
    pub values: Vec<f32>,
    pub first: usize,
    /// Iterations the simulation had completed at the last read.
    pub read_step: usize,
    /// Iterations that ran while not being read (they left the ring).
    pub missed: usize,
}

#[derive(Default)]
pub struct LossPlots {
    /// By optimize node id.
    pub series: BTreeMap<String, Series>,
    /// Simulation frame and time (s) of the last read.
    read_at: Option<(i32, f64)>,
}

impl LossPlots {
    pub fn clear(&mut self) {
        self.series.clear();
        self.read_at = None;
    }

    /// Reads new losses when the simulation advanced since the last read
    /// and `playing` allows a read at time `now`.
    pub fn poll(&mut self, sim: &Simulation, now: f64, playing: bool) {
        if sim.program.optimizers.is_empty() {
            return;
        }
        if let Some((frame, at)) = self.read_at {
            if frame == sim.frame || (playing && now - at < PLAYING_INTERVAL) {
                return;
            }
        }
        self.read_at = Some((sim.frame, now));
        for o in &sim.program.optimizers {
            let (Ok(step), Ok(ring)) = (sim.read_field(o.step), sim.read_field(o.loss_history))
            else {
                continue;
            };
            let n = step.first().copied().unwrap_or(0) as i32 as usize;
            let s = self.series.entry(o.node_id.clone()).or_default();
            if n < s.read_step {
                // The simulation was reset.
                *s = Series::default();
            }
            let len = ring.len().max(1);
            let from = s.read_step.max(n.saturating_sub(len));
            if s.values.is_empty() {
                s.first = from;
            } else {
                s.missed += from - s.read_step;
            }
            s.values
                .extend((from..n).map(|it| f32::from_bits(ring[it % len])));
            if s.values.len() > MAX_POINTS {
                let drop = s.values.len() - MAX_POINTS;
                s.values.drain(..drop);
                s.first += drop;
            }
            s.read_step = n;
        }
    }

    /// One plot per optimize node, `width` wide.
    pub fn ui(&self, ui: &mut egui::Ui, width: f32) {
        for (node, s) in &self.series {
            plot(ui, node, s, width, 120.0);
        }
    }

    /// The plot of one node, if it has run.
    pub fn ui_for(&self, ui: &mut egui::Ui, node: &str, width: f32) {
        match self.series.get(node) {
            Some(s) => plot(ui, node, s, width, 120.0),
            None => {
                ui.weak("the loss plot appears once the node has run (press Play or Step)");
            }
        }
    }
}

/// A line plot of `s.values` against the iteration number; the y axis is
/// logarithmic when every value is positive (losses fall by orders of magnitude).
fn plot(ui: &mut egui::Ui, node: &str, s: &Series, width: f32, height: f32) {
    let last = s.values.last().copied();
    let missed = if s.missed > 0 {
        format!(
            " ({} iterations ran between two reads and left the history ring: raise `history`)",
            s.missed
        )
    } else {
        String::new()
    };
    ui.label(match last {
        Some(l) => format!(
            "{} — loss {:.6} at iteration {}{}",
            node,
            l,
            s.first + s.values.len() - 1,
            missed
        ),
        None => format!("{} — loss (no iterations yet)", node),
    })
    .on_hover_text(
        "The loss (sum of the loss field) of every iteration of this optimize node, \
         before its update. Hover the plot to read a value.",
    );
    let (rect, resp) =
        ui.allocate_exact_size(egui::vec2(width.max(120.0), height), egui::Sense::hover());
    let painter = ui.painter_at(rect);
    painter.rect_filled(rect, 2.0, egui::Color32::from_gray(24));
    let text_color = egui::Color32::from_gray(170);
    let font = egui::FontId::monospace(10.0);
    let finite: Vec<f32> = s.values.iter().copied().filter(|v| v.is_finite()).collect();
    if finite.is_empty() {
        return;
    }
    let log = finite.iter().all(|&v| v > 0.0);
    let y_of = |v: f32| if log { v.log10() } else { v };
    let (mut lo, mut hi) = finite
        .iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), &v| {
            (a.min(y_of(v)), b.max(y_of(v)))
        });
    if hi - lo < 1e-6 {
        lo -= 0.5;
        hi += 0.5;
    }
    // Room for the value labels on the left and the iteration labels below.
    let area = egui::Rect::from_min_max(
        rect.min + egui::vec2(58.0, 6.0),
        rect.max - egui::vec2(8.0, 16.0),
    );
    let n = s.values.len();
    let x_at = |k: usize| {
        area.left()
            + area.width()
                * if n > 1 {
                    k as f32 / (n - 1) as f32
                } else {
                    0.5
                }
    };
    let y_at = |v: f32| area.bottom() - area.height() * (y_of(v) - lo) / (hi - lo);
    let grid = egui::Stroke::new(1.0, egui::Color32::from_gray(45));
    painter.line_segment([area.left_bottom(), area.right_bottom()], grid);
    painter.line_segment([area.left_top(), area.left_bottom()], grid);
    let unlog = |y: f32| if log { 10f32.powf(y) } else { y };
    for (y, align) in [
        (hi, egui::Align2::RIGHT_TOP),
        (lo, egui::Align2::RIGHT_BOTTOM),
    ] {
        painter.text(
            egui::pos2(
                area.left() - 4.0,
                if y == hi { area.top() } else { area.bottom() },
            ),
            align,
            format!("{:.3e}", unlog(y)),
            font.clone(),
            text_color,
        );
    }
    if log {
        painter.text(
            egui::pos2(area.left() - 4.0, area.center().y),
            egui::Align2::RIGHT_CENTER,
            "log",
            font.clone(),
            text_color,
        );
    }
    painter.text(
        egui::pos2(area.left(), rect.bottom() - 2.0),
        egui::Align2::LEFT_BOTTOM,
        format!("{}", s.first),
        font.clone(),
        text_color,
    );
    painter.text(
        egui::pos2(area.right(), rect.bottom() - 2.0),
        egui::Align2::RIGHT_BOTTOM,
        format!("{}", s.first + n - 1),
        font.clone(),
        text_color,
    );
    // At most about one point per pixel column: long runs stay cheap to draw.
    let stride = (n / area.width().max(1.0) as usize).max(1);
    let points: Vec<egui::Pos2> = (0..n)
        .step_by(stride)
        .chain(std::iter::once(n - 1))
        .filter(|&k| s.values[k].is_finite())
        .map(|k| egui::pos2(x_at(k), y_at(s.values[k])))
        .collect();
    let line = egui::Stroke::new(1.5, egui::Color32::from_rgb(255, 170, 60));
    if points.len() == 1 {
        painter.circle_filled(points[0], 2.5, line.color);
    } else {
        painter.add(egui::Shape::line(points, line));
    }
    if let Some(p) = resp.hover_pos().filter(|p| area.x_range().contains(p.x)) {
        let k = if n > 1 {
            (((p.x - area.left()) / area.width()) * (n - 1) as f32).round() as usize
        } else {
            0
        }
        .min(n - 1);
        painter.line_segment(
            [
                egui::pos2(x_at(k), area.top()),
                egui::pos2(x_at(k), area.bottom()),
            ],
            egui::Stroke::new(1.0, egui::Color32::from_gray(110)),
        );
        painter.text(
            egui::pos2(area.right(), area.top()),
            egui::Align2::RIGHT_TOP,
            format!("iteration {}: {:.6}", s.first + k, s.values[k]),
            font,
            egui::Color32::WHITE,
        );
    }
}
