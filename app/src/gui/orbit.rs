//! The orbit camera of 3-D views in the viewport: gestures (Blender's and
//! Houdini's conventions), framing and axis views, as pure functions of a
//! `Camera`, and the state of a drag in progress.
//!
//! | gesture                  | Blender              | Houdini   |
//! |--------------------------|----------------------|-----------|
//! | orbit                    | middle-drag          | Alt+LMB   |
//! | pan                      | Shift+middle-drag    | Alt+MMB   |
//! | zoom (dolly)             | wheel, Ctrl+middle   | Alt+RMB   |
//! | frame the domain         | Home or F            |           |
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
use weft_ir::ir::Camera;
use weft_ir::passes::views::camera::{framing_distance, Frame};

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

/// Home / F: the target at the domain box's centre, the distance that
/// frames it (as the default camera's), yaw and pitch kept.
pub fn frame_domain(c: Camera, domain: &[f32; 6], w: u32, h: u32) -> Camera {
    Camera {
        target: std::array::from_fn(|i| 0.5 * (domain[i] + domain[i + 3])),
        distance: framing_distance(domain, c.fov, w, h),
        ..c
    }
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
}

impl OrbitState {
    /// A new build: its cameras are the saved ones.
    pub fn forget_cameras(&mut self) {
        self.cams.clear();
        self.deferred.clear();
        self.drag = None;
    }

    /// The pending edit of a view's `camera` param, if any.
    pub fn take_edit(&mut self) -> Option<(String, Value)> {
        self.edit.take()
    }
}
