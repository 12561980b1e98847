//! The orbit camera of 3-D views in the viewport: gestures (Blender's and
//! Houdini's conventions), framing and axis views, as pure functions of a
//! `Camera`, and the state of a drag in progress.
//!
//! | gesture                  | Blender              | Houdini   |
//! |--------------------------|----------------------|-----------|
//! | orbit                    | middle-drag          | Alt+LMB   |
//! | pan                      | Shift+middle-drag    | Alt+MMB   |
//! | zoom (dolly)             | wheel, Ctrl+middle   | Alt+RMB   |
//! | frame the domain         | Home                 |           |
//! | frame what the view shows| F                    |           |
//! | front / side / top       | 1 / 3 / 7 (numpad or top row; Ctrl: back / other side / bottom) |
//!
//! A drag moves the live camera (`Simulation::set_view_camera`: no
//! recompile; the views redraw without a simulation step); its camera is a
//! function of the drag's start camera and the pointer's offset from where
//! it started, so the result depends only on where the pointer went. On
//! release (and after a key) the camera becomes the view node's `camera`
//! param: one undoable edit, saved with the graph, which `weft run`
//! renders identically.

use egui::{Key, Modifiers, PointerButton, Vec2};
use serde_json::{json, Value};
use weft_ir::ir::layout::AddressPlan;
use weft_ir::ir::{Camera, Program, View};
use weft_ir::passes::views::camera::{framing_distance, Frame};
use weft_runtime::memory::for_each_stored_element;

/// Degrees of yaw or pitch per point of pointer travel.
pub const ORBIT_DEG_PER_POINT: f32 = 0.4;
/// A zoom drag: the distance scales by `exp(dy * ZOOM_PER_POINT)` (down: away).
pub const ZOOM_PER_POINT: f64 = 0.01;
/// The wheel: the distance scales by `exp(-scroll * WHEEL_PER_POINT)` (up: closer).
pub const WHEEL_PER_POINT: f64 = 0.002;

/// What a drag does to the camera.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gesture {
    Orbit,
    Pan,
    Zoom,
}

impl Gesture {
    /// The gesture a drag with `button` and `mods` starts (both conventions),
    /// or none (a plain left drag pans the picture, as on a 2-D view).
    pub fn of(button: PointerButton, mods: Modifiers) -> Option<Gesture> {
        match button {
            PointerButton::Middle if mods.shift || mods.alt => Some(Gesture::Pan),
            PointerButton::Middle if mods.ctrl || mods.command => Some(Gesture::Zoom),
            PointerButton::Middle => Some(Gesture::Orbit),
            PointerButton::Primary if mods.alt => Some(Gesture::Orbit),
            PointerButton::Secondary if mods.alt => Some(Gesture::Zoom),
            _ => None,
        }
    }
}

/// Orbit by a pointer offset in points, as if grabbing the scene: right
/// turns it to the right (yaw down), down tilts its top towards the viewer
/// (pitch up); pitch stays within -90..=90.
pub fn orbit(c: Camera, d: Vec2) -> Camera {
    Camera {
        yaw: c.yaw - d.x * ORBIT_DEG_PER_POINT,
        pitch: (c.pitch + d.y * ORBIT_DEG_PER_POINT).clamp(-90.0, 90.0),
        ..c
    }
}

/// Pan by a pointer offset of `d` image pixels of a `w` x `h` view: the
/// point under the pointer at the target's depth follows it.
pub fn pan(c: Camera, d: Vec2, w: u32, h: u32) -> Camera {
    let fr = Frame::new(&c, w, h);
    let s = c.distance as f64 / fr.focal as f64;
    let target = std::array::from_fn(|i| {
        (c.target[i] as f64 - s * (d.x as f64 * fr.right[i] as f64)
            + s * (d.y as f64 * fr.up[i] as f64)) as f32
    });
    Camera { target, ..c }
}

/// Zoom: the distance times `factor` (the target stays).
pub fn dolly(c: Camera, factor: f64) -> Camera {
    let d = (c.distance as f64 * factor) as f32;
    Camera {
        distance: if d.is_finite() && d > 0.0 {
            d
        } else {
            c.distance
        },
        ..c
    }
}

/// A zoom drag by `dy` points (down: away).
pub fn zoom_drag(c: Camera, dy: f32) -> Camera {
    dolly(c, (dy as f64 * ZOOM_PER_POINT).exp())
}

/// The wheel by `scroll` points (up: closer).
pub fn wheel(c: Camera, scroll: f32) -> Camera {
    dolly(c, (-(scroll as f64) * WHEEL_PER_POINT).exp())
}

/// The wheel's vertical travel in this pass's events, in points (a line
/// is 50 points, a page 500), unsmoothed, so that one notch is one step.
/// The largest event of the pass counts (X11 delivers each wheel click
/// twice in one frame).
pub fn wheel_points(events: &[egui::Event]) -> f32 {
    events
        .iter()
        .map(|e| match e {
            egui::Event::MouseWheel { unit, delta, .. } => match unit {
                egui::MouseWheelUnit::Point => delta.y,
                egui::MouseWheelUnit::Line => delta.y * 50.0,
                egui::MouseWheelUnit::Page => delta.y * 500.0,
            },
            _ => 0.0,
        })
        .fold(0.0, |a: f32, d| if d.abs() > a.abs() { d } else { a })
}

/// Home: the target at the domain box's centre, the distance that
/// frames it (as the default camera's), yaw and pitch kept.
pub fn frame_domain(c: Camera, domain: &[f32; 6], w: u32, h: u32) -> Camera {
    Camera {
        target: std::array::from_fn(|i| 0.5 * (domain[i] + domain[i + 3])),
        distance: framing_distance(domain, c.fov, w, h),
        ..c
    }
}

/// F: what a 3-D view shows, as a world box (min x, y, z, max x, y, z),
/// from its field's stored elements (`root`: the words of that field's
/// layout tree, read once when F is pressed): a particles view's finite
/// positions; a volume's cells above its `min` (any active cell of a
/// sparse field when the range is automatic); a surface's cells above its
/// `level` (the region the surface encloses). `None` when nothing shows.
pub fn shown_bounds(p: &Program, view: &View, root: &[u32]) -> Option<[f32; 6]> {
    let mut lo = [f32::INFINITY; 3];
    let mut hi = [f32::NEG_INFINITY; 3];
    let mut add = |a: [f32; 3], b: [f32; 3]| {
        for i in 0..3 {
            lo[i] = lo[i].min(a[i]);
            hi[i] = hi[i].max(b[i]);
        }
    };
    let (field, threshold, domain) = match view {
        View::Particles { positions, .. } => {
            let f = *positions;
            if p.fields[f].ty.components() != 3 {
                return None;
            }
            let plan = AddressPlan::new(p, f);
            for_each_stored_element(&plan, &p.fields[f].shape, root, |e| {
                let q: [f32; 3] = std::array::from_fn(|i| f32::from_bits(e.values[i]));
                if q.iter().all(|x| x.is_finite()) {
                    add(q, q);
                }
            });
            return (lo[0] <= hi[0]).then_some([lo[0], lo[1], lo[2], hi[0], hi[1], hi[2]]);
        }
        View::Volume {
            field,
            range,
            scene,
            ..
        } => (*field, range.map(|r| r.0), scene.domain),
        View::Surface {
            field,
            level,
            scene,
            ..
        } => (*field, Some(*level), scene.domain),
        _ => return None,
    };
    let f = &p.fields[field];
    if f.shape.len() != 3 {
        return None;
    }
    let n: [f32; 3] = std::array::from_fn(|i| f.shape[i] as f32);
    let h: [f32; 3] = std::array::from_fn(|i| (domain[i + 3] - domain[i]) / n[i]);
    let plan = AddressPlan::new(p, field);
    for_each_stored_element(&plan, &f.shape, root, |e| {
        let v = f32::from_bits(e.values[0]);
        let shows = match threshold {
            Some(t) => v > t,
            // Automatic range: a sparse field's stored (active) cells; a
            // dense field's non-zero ones.
            None => e.block.is_some() || v != 0.0,
        };
        if shows {
            let a: [f32; 3] = std::array::from_fn(|i| domain[i] + e.index[i] as f32 * h[i]);
            let b: [f32; 3] = std::array::from_fn(|i| a[i] + h[i]);
            add(a, b);
        }
    });
    (lo[0] <= hi[0]).then_some([lo[0], lo[1], lo[2], hi[0], hi[1], hi[2]])
}

/// F: `frame_domain` of what the view shows (`shown_bounds`), grown to at
/// least a hundredth of the domain's size so a single particle is framed
/// at a sensible distance; the whole domain when nothing shows.
pub fn frame_shown(
    c: Camera,
    shown: Option<[f32; 6]>,
    domain: &[f32; 6],
    w: u32,
    h: u32,
) -> Camera {
    let Some(mut b) = shown else {
        return frame_domain(c, domain, w, h);
    };
    let size = (0..3)
        .map(|i| domain[i + 3] - domain[i])
        .fold(0.0f32, f32::max)
        * 0.01;
    for i in 0..3 {
        let grow = (size - (b[i + 3] - b[i])).max(0.0) * 0.5;
        b[i] -= grow;
        b[i + 3] += grow;
    }
    frame_domain(c, &b, w, h)
}

/// Numeric-pad views: 1 front (yaw 0, pitch 0), 3 side (yaw 90), 7 top
/// (pitch 90); with Ctrl the opposite (back, yaw -90, bottom). Target,
/// distance and fov stay.
pub fn axis_view(c: Camera, key: Key, opposite: bool) -> Option<Camera> {
    let (yaw, pitch) = match (key, opposite) {
        (Key::Num1, false) => (0.0, 0.0),
        (Key::Num1, true) => (180.0, 0.0),
        (Key::Num3, false) => (90.0, 0.0),
        (Key::Num3, true) => (-90.0, 0.0),
        (Key::Num7, false) => (0.0, 90.0),
        (Key::Num7, true) => (0.0, -90.0),
        _ => return None,
    };
    Some(Camera { yaw, pitch, ..c })
}

/// An f32 as the JSON number that reads back as the same f32 (its
/// shortest decimal form).
fn num(x: f32) -> Value {
    let v: f64 = format!("{}", x).parse().unwrap_or(0.0);
    json!(v)
}

/// The camera as a view node's `camera` param (every key written, so the
/// saved file renders exactly this camera whatever the defaults become).
pub fn to_param(c: &Camera) -> Value {
    json!({
        "target": c.target.map(num).to_vec(),
        "distance": num(c.distance),
        "yaw": num(c.yaw),
        "pitch": num(c.pitch),
        "fov": num(c.fov),
    })
}

/// A drag in progress on a 3-D view.
#[derive(Clone, Debug)]
pub struct Drag {
    pub view: String,
    pub gesture: Gesture,
    pub start: Camera,
    pub from: egui::Pos2,
}

/// The orbit state of the viewport.
#[derive(Default)]
pub struct OrbitState {
    /// The live camera of each 3-D view, once moved (else the program's).
    pub cams: std::collections::HashMap<String, Camera>,
    pub drag: Option<Drag>,
    /// Cameras set while the simulation was away: applied when it returns.
    pub deferred: Vec<(String, Camera)>,
    /// A camera to write into its view node's `camera` param (one
    /// undoable edit; the app takes it after the viewport's pass).
    pub edit: Option<(String, Value)>,
    /// Each view tile's rectangle on screen in the last pass (tests aim at it).
    pub tiles: std::collections::HashMap<String, egui::Rect>,
    /// F pressed while the simulation was away: (view, camera then, domain,
    /// width, height), framed when it returns (its state is read then).
    pub frame_shown: Option<(String, Camera, [f32; 6], u32, u32)>,
}

impl OrbitState {
    /// A new build: its cameras are the saved ones.
    pub fn forget_cameras(&mut self) {
        self.cams.clear();
        self.deferred.clear();
        self.drag = None;
        self.frame_shown = None;
    }

    /// The pending edit of a view's `camera` param, if any.
    pub fn take_edit(&mut self) -> Option<(String, Value)> {
        self.edit.take()
    }
}
