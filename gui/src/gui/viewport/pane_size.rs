//! 3-D views drawn at their pane's pixel size. A particles (vec3),
//! surface or volume view draws at its node's `width` / `height`; the
//! viewport builds the document it runs with those set to the size of the
//! pane showing the view (in pixels), through the same override `--set
//! V.width=W` and `weft render` use, so the saved graph keeps its own
//! size. While a pane is being resized the old picture is shown scaled,
//! and the view is rebuilt (carrying the running state over) at most once
//! every `DEBOUNCE_S`, once the size has held that long.

use crate::gui::asset_menu::AssetLibraries;
use std::borrow::Cow;
use std::collections::BTreeMap;
use weft_ir::graph::overrides::{apply_overrides_with, Overrides};
use weft_ir::graph::GraphDoc;
use weft_ir::ir::Program;

/// How long a new pane size must hold before the view is rebuilt at it.
pub const DEBOUNCE_S: f64 = 0.3;

/// The sides a pane's view is drawn at: no smaller than a legible picture,
/// no larger than a view's `width` parameter allows.
const SIDE: (u32, u32) = (16, 8192);

#[derive(Default)]
pub struct PaneSizes {
    /// The size each pane-sized view is built at now, by view node id. A
    /// view no pane shows keeps its last size (switching a pane to another
    /// view and back rebuilds nothing).
    pub applied: BTreeMap<String, (u32, u32)>,
    /// What the panes asked for in this pass (the largest pane, when two
    /// show the same view).
    wanted: BTreeMap<String, (u32, u32)>,
    /// Since when (egui clock) the panes have asked for sizes other than
    /// the applied ones.
    differs_since: Option<f64>,
}

impl PaneSizes {
    /// A pane `px` pixels large shows `view` this pass.
    pub fn want(&mut self, view: &str, px: egui::Vec2) {
        let side = |v: f32| (v.round().max(0.0) as u32).clamp(SIDE.0, SIDE.1);
        let (w, h) = (side(px.x), side(px.y));
        let e = self.wanted.entry(view.to_string()).or_insert((w, h));
        if w * h > e.0 * e.1 {
            *e = (w, h);
        }
    }

    /// At the end of a pass: whether the applied sizes changed (the
    /// viewport then rebuilds its views). A change is taken once the panes
    /// have asked for it for `DEBOUNCE_S`, and never while a build is
    /// under way (it is taken after, from the newest sizes).
    pub fn settle(&mut self, now: f64, building: bool) -> bool {
        let wanted = std::mem::take(&mut self.wanted);
        let differs = wanted.iter().any(|(v, s)| self.applied.get(v) != Some(s));
        if !differs {
            self.differs_since = None;
            return false;
        }
        let since = *self.differs_since.get_or_insert(now);
        if building || now - since < DEBOUNCE_S {
            return false;
        }
        self.applied.extend(wanted);
        self.differs_since = None;
        true
    }

    /// Whether a resize is waiting (the window should wake to take it).
    pub fn waiting(&self) -> bool {
        self.differs_since.is_some()
    }

    /// `doc` with each pane-sized view (and the views sized with it: a
    /// volume drawn over another view shares its size) at its applied
    /// size. Views `program` does not have are left alone; a document the
    /// override cannot apply to is built as it is.
    pub fn apply<'a>(
        &self,
        doc: &'a GraphDoc,
        program: Option<&Program>,
        assets: &AssetLibraries,
    ) -> Cow<'a, GraphDoc> {
        let Some(program) = program.filter(|_| !self.applied.is_empty()) else {
            return Cow::Borrowed(doc);
        };
        let mut sets = vec![];
        for (view, (w, h)) in &self.applied {
            if !program.views.iter().any(|v| v.node_id() == view) {
                continue;
            }
            for v in weft_open::render::size_group(program, view) {
                sets.push(format!("{}.width={}", v, w));
                sets.push(format!("{}.height={}", v, h));
            }
        }
        if sets.is_empty() {
            return Cow::Borrowed(doc);
        }
        let mut sized = doc.clone();
        let o = Overrides {
            sets,
            inits: vec![],
        };
        match apply_overrides_with(&mut sized, &o, &assets.library()) {
            Ok(()) => Cow::Owned(sized),
            Err(_) => Cow::Borrowed(doc),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_size_is_taken_once_it_has_held() {
        let mut s = PaneSizes::default();
        s.want("v", egui::vec2(300.4, 200.0));
        assert!(!s.settle(0.0, false), "not at once");
        s.want("v", egui::vec2(300.0, 200.0));
        assert!(!s.settle(0.1, false));
        s.want("v", egui::vec2(300.0, 200.0));
        assert!(!s.settle(0.5, true), "not during a build");
        s.want("v", egui::vec2(300.0, 200.0));
        assert!(s.settle(0.5, false));
        assert_eq!(s.applied["v"], (300, 200));
        s.want("v", egui::vec2(300.0, 200.0));
        assert!(!s.settle(0.9, false), "nothing new");
        assert!(!s.waiting());
    }

    #[test]
    fn the_largest_pane_wins_and_sides_are_bounded() {
        let mut s = PaneSizes::default();
        s.want("v", egui::vec2(100.0, 100.0));
        s.want("v", egui::vec2(400.0, 300.0));
        s.want("w", egui::vec2(2.0, 99999.0));
        s.settle(0.0, false);
        s.want("v", egui::vec2(400.0, 300.0));
        s.want("w", egui::vec2(2.0, 99999.0));
        assert!(s.settle(1.0, false));
        assert_eq!(s.applied["v"], (400, 300));
        assert_eq!(s.applied["w"], (16, 8192));
    }
}
