//! Where a view's picture sits in its pane: fitted and centred
//! (letterboxed to keep its aspect), zoomed about the pointer, panned, and
//! which texture filter its on-screen scale wants.

/// One view's zoom (1 = fit the pane) and pan (points the picture's centre
/// is moved from the pane's centre).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ViewNav {
    pub zoom: f32,
    pub pan: egui::Vec2,
}

impl Default for ViewNav {
    fn default() -> ViewNav {
        ViewNav {
            zoom: 1.0,
            pan: egui::Vec2::ZERO,
        }
    }
}

/// The zoom range: a quarter of the fitted size up to 64× it (with a small
/// picture in a large pane that is far past one texel per screen pixel).
const ZOOM: (f32, f32) = (0.25, 64.0);

impl ViewNav {
    /// The screen rect a picture of `size` texels takes in `pane`.
    pub fn shown(&self, pane: egui::Rect, size: [u32; 2]) -> egui::Rect {
        let d = egui::vec2(size[0].max(1) as f32, size[1].max(1) as f32);
        let fit = (pane.width() / d.x).min(pane.height() / d.y).max(0.0);
        egui::Rect::from_center_size(pane.center() + self.pan, d * fit * self.zoom)
    }

    /// Zooms by `factor` keeping the picture point under `at` where it is.
    pub fn zoom_about(&mut self, pane: egui::Rect, size: [u32; 2], at: egui::Pos2, factor: f32) {
        let before = self.shown(pane, size);
        let u = (at - before.min) / before.size().max(egui::vec2(1e-6, 1e-6));
        let old = self.zoom;
        self.zoom = (old * factor).clamp(ZOOM.0, ZOOM.1);
        let size_after = before.size() * (self.zoom / old);
        // The new centre puts the same picture point `u` back under `at`.
        let centre = at - (u - egui::vec2(0.5, 0.5)) * size_after;
        self.pan = centre - pane.center();
    }

    /// Whether the picture is drawn larger than one texel per screen pixel
    /// (`ppp`: pixels per point): then each texel is a crisp square
    /// (nearest); smaller, texels are blended (linear), so thin lines do
    /// not break into dots.
    pub fn magnified(&self, pane: egui::Rect, size: [u32; 2], ppp: f32) -> bool {
        self.shown(pane, size).width() * ppp > size[0] as f32 + 0.5
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pane() -> egui::Rect {
        egui::Rect::from_min_size(egui::pos2(10.0, 20.0), egui::vec2(400.0, 200.0))
    }

    #[test]
    fn fits_centred_keeping_the_aspect() {
        let r = ViewNav::default().shown(pane(), [100, 100]);
        assert_eq!(
            r.size(),
            egui::vec2(200.0, 200.0),
            "letterboxed: the height limits"
        );
        assert_eq!(r.center(), pane().center());
        let wide = ViewNav::default().shown(pane(), [800, 100]);
        assert_eq!(wide.size(), egui::vec2(400.0, 50.0));
    }

    #[test]
    fn zoom_keeps_the_point_under_the_pointer() {
        let mut n = ViewNav::default();
        let at = egui::pos2(150.0, 60.0);
        let before = n.shown(pane(), [64, 64]);
        let u = (at - before.min) / before.size();
        n.zoom_about(pane(), [64, 64], at, 3.0);
        let after = n.shown(pane(), [64, 64]);
        let u2 = (at - after.min) / after.size();
        assert!((u - u2).length() < 1e-4, "{:?} {:?}", u, u2);
        assert_eq!(n.zoom, 3.0);
        n.zoom_about(pane(), [64, 64], at, 1e6);
        assert_eq!(n.zoom, ZOOM.1, "clamped");
    }

    #[test]
    fn small_pictures_are_magnified_large_ones_minified() {
        let n = ViewNav::default();
        assert!(n.magnified(pane(), [64, 64], 1.0));
        assert!(!n.magnified(pane(), [1024, 512], 1.0));
        // 200 points are 400 pixels at ppp 2: a 300-texel picture is magnified.
        assert!(n.magnified(pane(), [300, 300], 2.0));
    }
}
