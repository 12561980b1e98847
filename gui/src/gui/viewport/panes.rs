//! The viewport's panes: one, two side by side or four in a 2×2 grid, each
//! showing the view picked in its header. A 2-D view (image, plot,
//! histogram, 2-D particles) is fitted to its pane, letterboxed to keep its
//! aspect, and zooms about the pointer (wheel), pans (middle-, Space- or
//! plain drag) and fits again (F over it, double-click); a 3-D view orbits
//! (`camera_input`) and is drawn at its pane's pixel size (`pane_size`).

use super::nav::ViewNav;
use super::*;

/// How many panes the viewport is split into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PaneCount {
    One,
    /// Two side by side.
    Two,
    /// Four in a 2×2 grid.
    Four,
}

impl PaneCount {
    pub const ALL: [PaneCount; 3] = [PaneCount::One, PaneCount::Two, PaneCount::Four];

    pub fn n(self) -> usize {
        match self {
            PaneCount::One => 1,
            PaneCount::Two => 2,
            PaneCount::Four => 4,
        }
    }
}

/// The panes: how many, the view each shows, where they were drawn.
#[derive(Clone, Debug)]
pub struct Panes {
    pub count: PaneCount,
    /// The view picked in each pane's header (its node id); `None`: the
    /// view at the pane's own place in the views' order.
    pub chosen: [Option<String>; 4],
    /// Each shown pane's rect (header included) in the last pass.
    pub rects: Vec<egui::Rect>,
    /// The whole panes area in the last pass.
    pub area: egui::Rect,
    /// The views there were in the last pass that drew any.
    known: Vec<String>,
}

impl Default for Panes {
    fn default() -> Panes {
        Panes {
            count: PaneCount::One,
            chosen: Default::default(),
            rects: vec![],
            area: egui::Rect::NOTHING,
            known: vec![],
        }
    }
}

impl Panes {
    /// The view pane `i` shows of `views` (in the program's order): the one
    /// picked in its header while it exists, else the `i`-th (wrapping
    /// round when there are fewer views than panes).
    pub fn view_of<'a>(&self, i: usize, views: &'a [String]) -> Option<&'a str> {
        if views.is_empty() {
            return None;
        }
        self.chosen[i]
            .as_deref()
            .and_then(|c| views.iter().find(|v| *v == c))
            .or_else(|| views.get(i % views.len()))
            .map(String::as_str)
    }
}

/// An image view's field, colormap and range (`None`: automatic).
type ImageView = (FieldId, weft_ir::ir::Colormap, Option<(f32, f32)>);

/// The gap between panes (points).
const GAP: f32 = 4.0;
/// A pane's header: the view chooser and the zoom.
const HEADER_H: f32 = 22.0;
/// A scalar image's colour bar and its range, under the picture.
const BAR_H: f32 = 30.0;

/// The rects of `count` panes filling `area`.
pub fn pane_rects(area: egui::Rect, count: PaneCount) -> Vec<egui::Rect> {
    let halves = |r: egui::Rect| {
        let w = ((r.width() - GAP) / 2.0).max(0.0);
        [
            egui::Rect::from_min_size(r.min, egui::vec2(w, r.height())),
            egui::Rect::from_min_max(egui::pos2(r.max.x - w, r.min.y), r.max),
        ]
    };
    match count {
        PaneCount::One => vec![area],
        PaneCount::Two => halves(area).to_vec(),
        PaneCount::Four => {
            let h = ((area.height() - GAP) / 2.0).max(0.0);
            let top = egui::Rect::from_min_size(area.min, egui::vec2(area.width(), h));
            let bottom = egui::Rect::from_min_max(egui::pos2(area.min.x, area.max.y - h), area.max);
            halves(top).into_iter().chain(halves(bottom)).collect()
        }
    }
}

impl Viewport {
    /// Whether no view has a picture yet.
    pub fn textures_empty(&self) -> bool {
        self.textures.is_empty()
    }

    /// The view pane `i` shows (of the views drawn now).
    pub fn pane_view(&self, i: usize) -> Option<String> {
        let names: Vec<String> = self.textures.iter().map(|t| t.name.clone()).collect();
        self.panes.view_of(i, &names).map(str::to_string)
    }

    /// Draws the panes in the space left in `ui`, the pane count and the
    /// readout of the value under the pointer above them, and the loss
    /// plots of optimize nodes below.
    pub fn ui(&mut self, ui: &mut egui::Ui) {
        let now = ui.input(|i| i.time);
        if let Some(sim) = &self.sim {
            self.loss.poll(sim, now, self.playing);
        }
        self.panes.rects.clear();
        self.panes.area = ui.available_rect_before_wrap();
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
            ui.label("Panes");
            for c in PaneCount::ALL {
                ui.selectable_value(&mut self.panes.count, c, c.n().to_string())
                    .on_hover_text(match c {
                        PaneCount::One => "one view",
                        PaneCount::Two => "two views side by side",
                        PaneCount::Four => "four views in a 2×2 grid",
                    });
            }
            ui.separator();
            if ui
                .button("Fit views")
                .on_hover_text(
                    "Over a 2-D view: the wheel zooms about the pointer, middle- or \
                     Space-drag pans, F or double-click fits it",
                )
                .clicked()
            {
                self.view_nav.clear();
            }
            ui.separator();
            // What is under the pointer (last pass's), on a line that never moves.
            let text = self
                .readout
                .clone()
                .unwrap_or_else(|| "hover a view to read its values".into());
            ui.add(egui::Label::new(egui::RichText::new(text).monospace()).truncate());
        });
        let full = ui.available_rect_before_wrap();
        // The loss plots of optimize nodes stay in sight below the panes.
        let plots_h = (150.0 * self.loss.series.len() as f32).min(full.height() / 2.0);
        let area = egui::Rect::from_min_max(
            full.min,
            egui::pos2(full.max.x, (full.max.y - plots_h).max(full.min.y)),
        );
        self.panes.area = area;
        let names: Vec<String> = self.textures.iter().map(|t| t.name.clone()).collect();
        // A field flagged to the viewport (its `viewer-` view, `viewer_flag`)
        // is shown in the first pane once it appears, as Houdini shows the
        // flagged node; unflagged, the pane goes back to its own view.
        if let Some(new) = names
            .iter()
            .find(|n| n.starts_with("viewer-") && !self.panes.known.contains(n))
        {
            self.panes.chosen[0] = Some(new.clone());
        }
        self.panes.known = names.clone();
        let rects = pane_rects(area, self.panes.count);
        let mut readout = None;
        for (i, r) in rects.iter().enumerate() {
            if let Some(text) = self.pane(ui, i, *r, &names, now) {
                readout = Some(text);
            }
        }
        self.panes.rects = rects;
        if plots_h > 0.0 {
            let below = egui::Rect::from_min_max(egui::pos2(full.min.x, area.max.y), full.max);
            let mut plots = ui.new_child(egui::UiBuilder::new().max_rect(below));
            plots.set_clip_rect(below.intersect(ui.clip_rect()));
            egui::ScrollArea::vertical()
                .id_salt("loss plots")
                .show(&mut plots, |ui| self.loss.ui(ui, below.width() - 8.0));
        }
        ui.allocate_rect(full, egui::Sense::hover());
        self.readout = readout;
        if self.sizes.settle(now, self.compiling()) {
            self.rebuild_at_pane_sizes();
        }
        if self.sizes.waiting() {
            ui.ctx()
                .request_repaint_after(std::time::Duration::from_secs_f64(pane_size::DEBOUNCE_S));
        }
    }

    /// Pane `i` in `rect`: its header (the view chooser, the zoom), the
    /// picture, a colour bar for a scalar image. Returns the readout of
    /// the value under the pointer.
    fn pane(
        &mut self,
        ui: &mut egui::Ui,
        i: usize,
        rect: egui::Rect,
        names: &[String],
        now: f64,
    ) -> Option<String> {
        let name = self.panes.view_of(i, names)?.to_string();
        let k = names.iter().position(|n| *n == name)?;
        let (size, nearest) = (self.textures[k].size, self.textures[k].id);
        let header = egui::Rect::from_min_max(
            rect.min,
            egui::pos2(rect.max.x, (rect.min.y + HEADER_H).min(rect.max.y)),
        );
        let image = self.image_of(&name);
        let bar_h = if image.is_some() { BAR_H } else { 0.0 };
        let body = egui::Rect::from_min_max(
            egui::pos2(rect.min.x, header.max.y),
            egui::pos2(rect.max.x, (rect.max.y - bar_h).max(header.max.y)),
        );
        let clip = ui.clip_rect();
        let painter = ui.painter_at(rect);
        painter.rect_filled(body, 0.0, egui::Color32::from_gray(20));

        let scene = self.scene_of(&name);
        let resp = ui.interact(
            body,
            ui.id().with(("pane", i)),
            egui::Sense::click_and_drag(),
        );
        let mut nav = self.view_nav.get(&name).copied().unwrap_or_default();
        if let Some((domain, vw, vh)) = scene {
            // Drawn at the pane's pixel size (the old picture, scaled,
            // until the rebuild at the new size is in).
            let ppp = ui.ctx().pixels_per_point();
            self.sizes.want(&name, body.size() * ppp);
            nav = ViewNav::default();
            let shown = nav.shown(body, size);
            self.orbit.tiles.insert(name.clone(), shown);
            if let Some(cam) = self.orbit_input(ui, &resp, &name, &domain, (vw, vh), shown) {
                self.set_camera(&name, cam);
            }
        } else {
            self.navigate(ui, &resp, body, size, &mut nav);
            self.view_nav.insert(name.clone(), nav);
            self.orbit.tiles.insert(name.clone(), nav.shown(body, size));
        }
        let shown = nav.shown(body, size);
        let ppp = ui.ctx().pixels_per_point();
        let id = if nav.magnified(body, size, ppp) {
            nearest
        } else {
            self.linear_texture(ui.ctx(), k)
        };
        ui.painter_at(body).image(
            id,
            shown,
            egui::Rect::from_min_max(egui::pos2(0.0, 0.0), egui::pos2(1.0, 1.0)),
            egui::Color32::WHITE,
        );

        let mut head = ui.new_child(
            egui::UiBuilder::new()
                .max_rect(header.shrink2(egui::vec2(4.0, 0.0)))
                .layout(egui::Layout::left_to_right(egui::Align::Center)),
        );
        head.set_clip_rect(header.intersect(clip));
        let mut pick = name.clone();
        egui::ComboBox::from_id_salt(("pane view", i))
            .selected_text(&name)
            .show_ui(&mut head, |ui| {
                for n in names {
                    ui.selectable_value(&mut pick, n.clone(), n);
                }
            })
            .response
            // Named for the view it shows (screen readers, kittest).
            .on_hover_text("the view this pane shows")
            .widget_info(|| egui::WidgetInfo::labeled(egui::WidgetType::ComboBox, true, &name));
        if pick != name {
            self.panes.chosen[i] = Some(pick);
        }
        head.with_layout(egui::Layout::right_to_left(egui::Align::Center), |ui| {
            let texel = shown.width() * ppp / size[0].max(1) as f32;
            ui.weak(format!("{}×{}  {:.0}%", size[0], size[1], texel * 100.0))
                .on_hover_text("the picture's size in pixels, and screen pixels per picture pixel");
        });

        if let Some((field, map, range)) = image {
            let bar = egui::Rect::from_min_max(
                egui::pos2(rect.min.x + 4.0, body.max.y + 2.0),
                egui::pos2(rect.max.x - 4.0, rect.max.y),
            );
            let mut bar_ui = ui.new_child(egui::UiBuilder::new().max_rect(bar));
            bar_ui.set_clip_rect(bar.intersect(clip));
            self.colour_bar(&mut bar_ui, field, map, range, bar.width(), now);
        }

        let hover = resp.hover_pos().filter(|p| shown.contains(*p))?;
        let u = (hover - shown.min) / shown.size();
        let x = ((u.x * size[0] as f32) as u32).min(size[0].saturating_sub(1));
        let row = ((u.y * size[1] as f32) as u32).min(size[1].saturating_sub(1));
        let y = size[1] - 1 - row;
        Some(match image {
            Some((field, ..)) => self.value_at(field, x, y, now),
            None => format!("{}: pixel ({}, {})", name, x, row),
        })
    }

    /// A 2-D view's zoom (wheel or pinch about the pointer), pan (middle-,
    /// Space- or plain drag) and fit (double-click, F over it).
    fn navigate(
        &self,
        ui: &egui::Ui,
        resp: &egui::Response,
        body: egui::Rect,
        size: [u32; 2],
        nav: &mut ViewNav,
    ) {
        if resp.dragged_by(egui::PointerButton::Primary)
            || resp.dragged_by(egui::PointerButton::Middle)
        {
            nav.pan += resp.drag_delta();
        }
        let typing = ui.ctx().egui_wants_keyboard_input();
        if resp.double_clicked()
            || (resp.hovered() && !typing && ui.input(|i| i.key_pressed(egui::Key::F)))
        {
            *nav = ViewNav::default();
        }
        if let Some(p) = resp.hover_pos() {
            let (scroll, pinch) = ui.input(|i| (i.smooth_scroll_delta.y, i.zoom_delta()));
            let factor = (scroll * 0.002).exp() * pinch;
            if factor != 1.0 {
                nav.zoom_about(body, size, p, factor);
            }
        }
    }

    /// The field, colormap and range of the image view `name`.
    fn image_of(&self, name: &str) -> Option<ImageView> {
        self.program()?.views.iter().find_map(|v| match v {
            View::Image {
                node_id,
                field,
                colormap,
                range,
                ..
            } if node_id == name => Some((*field, *colormap, *range)),
            _ => None,
        })
    }

    /// Rebuilds the views at the panes' sizes from the document the
    /// viewport follows, carrying the running state over.
    fn rebuild_at_pane_sizes(&mut self) {
        let Some((revision, doc)) = self.followed.clone() else {
            return;
        };
        let assets = self.built_assets.clone();
        self.rebuild_display_only(revision, &doc, &assets);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panes_fill_the_area_without_overlapping() {
        let area = egui::Rect::from_min_size(egui::pos2(5.0, 7.0), egui::vec2(801.0, 403.0));
        for c in PaneCount::ALL {
            let r = pane_rects(area, c);
            assert_eq!(r.len(), c.n());
            for (a, ra) in r.iter().enumerate() {
                assert!(area.contains_rect(*ra), "{:?} in {:?}", ra, area);
                for rb in &r[a + 1..] {
                    assert!(!ra.intersects(*rb) || ra.intersect(*rb).area() == 0.0);
                }
            }
        }
    }

    #[test]
    fn panes_show_the_views_in_order_unless_one_is_picked() {
        let views: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let mut p = Panes::default();
        let shown: Vec<_> = (0..4).map(|i| p.view_of(i, &views)).collect();
        assert_eq!(shown, [Some("a"), Some("b"), Some("c"), Some("a")]);
        p.chosen[1] = Some("c".into());
        assert_eq!(p.view_of(1, &views), Some("c"));
        p.chosen[1] = Some("gone".into());
        assert_eq!(p.view_of(1, &views), Some("b"), "a removed view falls back");
        assert_eq!(p.view_of(0, &[]), None);
    }
}
