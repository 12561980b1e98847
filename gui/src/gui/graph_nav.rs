//! Where the node editor looks: frame all / frame selected, the fit a graph
//! opens with, and Ctrl+wheel zoom in even steps.
//!
//! egui-snarl owns the view transform and reports it each frame through
//! `SnarlViewer::current_transform`, where the viewer may replace it. This
//! module computes the replacement; the viewer applies it.

use egui::emath::TSTransform;
use egui::{Pos2, Rect, Vec2};

/// Zoom per wheel notch: ten notches go from 1:1 to about 4×.
pub const ZOOM_STEP: f32 = 1.15;
/// The editor's zoom limits (egui-snarl's defaults).
pub const MIN_SCALE: f32 = 0.2;
pub const MAX_SCALE: f32 = 2.0;
/// Framing never magnifies past 1:1, so a small graph is not blown up.
const FIT_MAX_SCALE: f32 = 1.0;
/// Nor shrinks past 1:2, so text stays legible (about 7 px): a larger
/// graph shows from its top-left corner along each axis it overflows (where
/// data flow starts: layouts and fields), the rest a pan away.
pub const FIT_MIN_SCALE: f32 = 0.5;
/// Room around framed nodes, in screen points.
const FIT_MARGIN: f32 = 16.0;

/// The transform that shows `bounds` (graph space) centred in `screen`, as
/// large as fits up to 1:1.
pub fn fit(bounds: Rect, screen: Rect) -> TSTransform {
    let avail = (screen.size() - Vec2::splat(2.0 * FIT_MARGIN)).max(Vec2::splat(1.0));
    let size = bounds.size().max(Vec2::splat(1.0));
    let scale = (avail.x / size.x)
        .min(avail.y / size.y)
        .clamp(FIT_MIN_SCALE, FIT_MAX_SCALE);
    // Centred on each axis that fits, from the top-left on one that does not.
    let centred = screen.center().to_vec2() - bounds.center().to_vec2() * scale;
    let start = screen.min.to_vec2() + Vec2::splat(FIT_MARGIN) - bounds.min.to_vec2() * scale;
    let drawn = size * scale;
    let t = Vec2::new(
        if drawn.x > avail.x {
            start.x
        } else {
            centred.x
        },
        if drawn.y > avail.y {
            start.y
        } else {
            centred.y
        },
    );
    TSTransform::from_translation(t) * TSTransform::from_scaling(scale)
}

/// The union of the given node rects (graph space); `None` when there are none.
pub fn bounds<'a>(rects: impl IntoIterator<Item = &'a Rect>) -> Option<Rect> {
    rects
        .into_iter()
        .copied()
        .reduce(|a, b| a.union(b))
        .filter(|r| r.is_finite())
}

/// Ctrl/Cmd+wheel notches this frame (positive zooms in). Wheel events in
/// points count one notch per 50 points, as a typical mouse sends. Wheel
/// events in lines count one click per frame: X11 (winit over XInput2)
/// delivers each click of a wheel twice in the same frame, which summed
/// zoomed by two steps (1.32×) instead of one (1.15×).
pub fn zoom_notches(ctx: &egui::Context) -> f32 {
    ctx.input(|i| {
        let mut lines: f32 = 0.0;
        let mut other = 0.0;
        for e in &i.raw.events {
            if let egui::Event::MouseWheel {
                unit,
                delta,
                modifiers,
                ..
            } = e
            {
                if !(modifiers.command || modifiers.ctrl) {
                    continue;
                }
                match unit {
                    egui::MouseWheelUnit::Line if delta.y.abs() > lines.abs() => lines = delta.y,
                    egui::MouseWheelUnit::Line => {}
                    egui::MouseWheelUnit::Page => other += delta.y * 3.0,
                    egui::MouseWheelUnit::Point => other += delta.y / 50.0,
                }
            }
        }
        lines + other
    })
}

/// `prev` zoomed by `notches` steps about the screen point `at`, within the limits.
pub fn zoom_about(prev: TSTransform, at: Pos2, notches: f32) -> TSTransform {
    let target = (prev.scaling * ZOOM_STEP.powf(notches)).clamp(MIN_SCALE, MAX_SCALE);
    let k = target / prev.scaling;
    TSTransform::from_translation(at.to_vec2())
        * TSTransform::from_scaling(k)
        * TSTransform::from_translation(-at.to_vec2())
        * prev
}

/// Room a new node is given (graph space): a typical node's size.
const NEW_NODE: Vec2 = Vec2::new(230.0, 100.0);

/// Where a node added at `at` (graph space) goes: there, or straight below
/// the nodes it would cover, so that a new node never lands on another
/// (several nodes added at one spot stack downwards).
pub fn free_spot<'a>(at: Pos2, rects: impl IntoIterator<Item = &'a Rect> + Clone) -> Pos2 {
    let mut p = at;
    for _ in 0..256 {
        let want = Rect::from_min_size(p, NEW_NODE);
        let Some(below) = rects
            .clone()
            .into_iter()
            .filter(|r| r.expand(8.0).intersects(want))
            .map(|r| r.bottom())
            .reduce(f32::max)
        else {
            break;
        };
        p.y = below + 20.0;
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_centres_and_caps_at_one_to_one() {
        let screen = Rect::from_min_size(Pos2::new(100.0, 50.0), Vec2::new(800.0, 600.0));
        let small = Rect::from_min_size(Pos2::ZERO, Vec2::new(100.0, 100.0));
        let t = fit(small, screen);
        assert_eq!(t.scaling, 1.0);
        assert!(((t * small.center()) - screen.center()).length() < 1e-3);
        let wide = Rect::from_min_size(Pos2::new(-500.0, 0.0), Vec2::new(1200.0, 200.0));
        let t = fit(wide, screen);
        let shown = t * wide;
        assert!(
            screen.contains_rect(shown),
            "{:?} inside {:?}",
            shown,
            screen
        );
        assert!((shown.width() - (800.0 - 2.0 * FIT_MARGIN)).abs() < 1e-2);
    }

    #[test]
    fn new_nodes_stack_below_the_ones_they_would_cover() {
        let a = Rect::from_min_size(Pos2::new(0.0, 0.0), Vec2::new(200.0, 80.0));
        let b = Rect::from_min_size(Pos2::new(0.0, 100.0), Vec2::new(200.0, 150.0));
        let p = free_spot(Pos2::new(10.0, 10.0), [&a, &b]);
        assert_eq!(p, Pos2::new(10.0, 270.0));
        assert_eq!(
            free_spot(Pos2::new(900.0, 0.0), [&a, &b]),
            Pos2::new(900.0, 0.0)
        );
    }

    #[test]
    fn framing_a_large_graph_keeps_text_legible() {
        let screen = Rect::from_min_size(Pos2::new(0.0, 0.0), Vec2::new(800.0, 600.0));
        let huge = Rect::from_min_size(Pos2::new(0.0, 0.0), Vec2::new(20000.0, 9000.0));
        let t = fit(huge, screen);
        assert_eq!(t.scaling, FIT_MIN_SCALE);
        // Its top-left corner (where data flow starts) is in view.
        let corner = t * huge.min;
        assert!((corner - (screen.min + Vec2::splat(FIT_MARGIN))).length() < 1e-3);
        // A graph too wide but not too tall is centred vertically.
        let wide = Rect::from_min_size(Pos2::new(100.0, 50.0), Vec2::new(4000.0, 400.0));
        let t = fit(wide, screen);
        assert!(((t * wide.min).x - FIT_MARGIN).abs() < 1e-3);
        assert!(((t * wide.center()).y - screen.center().y).abs() < 1e-3);
    }

    #[test]
    fn zoom_steps_are_even_and_keep_the_point_under_the_pointer() {
        let prev =
            TSTransform::from_translation(Vec2::new(30.0, 40.0)) * TSTransform::from_scaling(0.5);
        let at = Pos2::new(400.0, 300.0);
        let before = prev.inverse() * at;
        let mut t = prev;
        for _ in 0..3 {
            t = zoom_about(t, at, 1.0);
        }
        assert!((t.scaling - 0.5 * ZOOM_STEP.powi(3)).abs() < 1e-5);
        assert!(((t.inverse() * at) - before).length() < 1e-3);
        assert_eq!(zoom_about(prev, at, 100.0).scaling, MAX_SCALE);
    }
}
