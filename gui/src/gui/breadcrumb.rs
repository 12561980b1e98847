//! The breadcrumb bar at the top of the node editor while a group is
//! entered: `graph > diffusion > inner`. A click on a crumb leaves to it.

use egui::{Context, Pos2};

/// Draws the bar at `at` (the editor's top-left corner) for the entered
/// groups `path` (outermost first). Returns the depth a click asks to
/// leave to (0: the top graph), if one was clicked.
pub fn show(ctx: &Context, at: Pos2, path: &[String]) -> Option<usize> {
    if path.is_empty() {
        return None;
    }
    let mut clicked = None;
    egui::Area::new(egui::Id::new("group_breadcrumb"))
        .fixed_pos(at + egui::vec2(8.0, 6.0))
        .order(egui::Order::Foreground)
        .show(ctx, |ui| {
            egui::Frame::popup(ui.style()).show(ui, |ui| {
                ui.horizontal(|ui| {
                    if ui
                        .link("graph")
                        .on_hover_text("leave to the top graph (U or Ctrl+Tab: one level up)")
                        .clicked()
                    {
                        clicked = Some(0);
                    }
                    for (i, id) in path.iter().enumerate() {
                        ui.label(">");
                        if i + 1 == path.len() {
                            ui.strong(id);
                        } else if ui.link(id).clicked() {
                            clicked = Some(i + 1);
                        }
                    }
                });
            });
        });
    clicked
}
