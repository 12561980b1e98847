//! The window's areas and how they share it. Top to bottom: the menu; the
//! main area; the timeline, the spreadsheet (Alt+S), the status line, the
//! log and Problems, each a full-width bar. The main area is the viewport
//! left of the node editor (a divider between them, its place remembered in
//! the preferences) with the inspector on the right; Ctrl+Space maximises
//! the viewport over the whole main area, as in Blender, and again
//! restores it. View > Viewport in its own window detaches the viewport
//! into a second OS window (an egui immediate viewport; inside a test
//! harness or a backend without multiple windows, an egui window in the
//! main one), leaving the main area to the node editor; closing that window
//! docks it again. Every area is an egui panel, which clips what it draws to
//! itself, and the bars' heights are bounded so the main area always keeps
//! `MIN_MAIN_H`: no area draws over another at any window size.

/// The least height the bars leave the main area (points).
pub const MIN_MAIN_H: f32 = 220.0;
/// The least width of the viewport, the node editor and the inspector.
pub const MIN_VIEWPORT_W: f32 = 160.0;
pub const MIN_EDITOR_W: f32 = 160.0;
pub const MIN_INSPECTOR_W: f32 = 200.0;

/// Where each area was drawn in the last pass.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AreaRects {
    /// The main area between the bars.
    pub main: egui::Rect,
    pub viewport: egui::Rect,
    /// `None` while the viewport is maximised.
    pub node_editor: Option<egui::Rect>,
    pub inspector: Option<egui::Rect>,
    pub timeline: egui::Rect,
    /// `None` while the spreadsheet is closed.
    pub spreadsheet: Option<egui::Rect>,
    pub problems: egui::Rect,
}

impl Default for AreaRects {
    fn default() -> AreaRects {
        AreaRects {
            main: egui::Rect::NOTHING,
            viewport: egui::Rect::NOTHING,
            node_editor: None,
            inspector: None,
            timeline: egui::Rect::NOTHING,
            spreadsheet: None,
            problems: egui::Rect::NOTHING,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct WindowLayout {
    /// The viewport covers the whole main area (Ctrl+Space).
    pub maximised: bool,
    /// The viewport is in a window of its own (View > Viewport in its own
    /// window); the main area is the node editor's and the inspector's.
    pub detached: bool,
    pub rects: AreaRects,
}

impl WindowLayout {
    /// The tallest a bar may be with `available` height left above the
    /// bars still to come (`below_h` tall together, as last drawn) and the
    /// main area.
    pub fn bar_max(available: f32, below_h: f32, min: f32) -> f32 {
        (available - below_h - MIN_MAIN_H).max(min)
    }

    /// The widest the inspector may be in a main area `w` wide: the
    /// viewport and the node editor keep their least widths.
    pub fn inspector_max(w: f32) -> f32 {
        (w - MIN_VIEWPORT_W - MIN_EDITOR_W).max(MIN_INSPECTOR_W)
    }

    /// The widest the viewport may be with `w` left beside the inspector.
    pub fn viewport_max(w: f32) -> f32 {
        (w - MIN_EDITOR_W).max(MIN_VIEWPORT_W)
    }

    /// Whether `p` is over the viewport (the node editor's keys leave it alone).
    pub fn over_viewport(&self, p: Option<egui::Pos2>) -> bool {
        p.is_some_and(|p| self.rects.viewport.contains(p))
    }

    /// Where a code or expression window first opens: over the node
    /// editor whose node it edits, not over the viewport.
    pub fn body_window_pos(&self) -> egui::Pos2 {
        let r = self.rects;
        r.node_editor.unwrap_or(r.main).left_top() + egui::vec2(24.0, 24.0)
    }
}
