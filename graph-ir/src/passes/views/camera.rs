//! The 3-D camera of views, in IR (reused by every 3-D view).
//!
//! The definition (the reference renderer in `weft-tests` follows it in
//! plain Rust; vm and cpu agree with it bit for bit):
//! - World: right-handed, y up. A view's `domain` box is `[min x, min y,
//!   min z, max x, max y, max z]`.
//! - Camera (the view node's `"camera"` param, every key optional): an
//!   orbit camera around `target` (default: the domain box's centre) at
//!   `distance` (default: frames the box, below), `yaw` degrees about +y
//!   (default 30), `pitch` degrees above the horizon (default 20, within
//!   -90..=90), perspective with a vertical field of view `fov` degrees
//!   (default 40, within 1..=170). Yaw 0, pitch 0 looks along -z (front:
//!   x right, y up); yaw 90 looks along -x (side: -z right); pitch 90 looks
//!   down -y (top: x right, -z up).
//! - Frame constants, computed once on the host in f64 and rounded to f32
//!   (sine and cosine of an exact multiple of 90 degrees are exactly 0 or
//!   ±1): `sy, cy = sin, cos(yaw)`, `sp, cp = sin, cos(pitch)`; back `w =
//!   (cp*sy, sp, cp*cy)` (from the target to the eye), right `u = (cy, 0,
//!   -sy)`, up `v = (-sp*sy, cp, -sp*cy)`; `eye = target + distance * w`;
//!   focal length in pixels `fp = 0.5 * H / tan(0.5 * fov)`; `near =
//!   0.001 * distance`. Default distance: `R / sin(h)` with `R` half the
//!   box's diagonal and `tan(h) = tan(0.5 * fov) * min(1, W / H)` (the
//!   box's bounding sphere fits the narrower side of the image).
//! - Projection of a world point `p` (f32 operations in this order):
//!   `d = p - eye` (per component); `xc = (d.x*u.x + d.y*u.y) + d.z*u.z`,
//!   `yc` the same with `v`, `depth = -((d.x*w.x + d.y*w.y) + d.z*w.z)`;
//!   `cx = W/2 + (xc / depth) * fp`, `cy = H/2 - (yc / depth) * fp`: the
//!   point's position in pixels (x right, y down; pixel (i, j) covers
//!   `[i, i+1) x [j, j+1)`, its centre at `(i + 0.5, j + 0.5)`, as in 2-D).
//!   The point is visible when its coordinates are finite, `depth > near`
//!   (points behind the camera or at the eye are skipped) and `cx`, `cy`
//!   are finite.
//! - Runtime frame: the frame constants are data, not IR constants. Every
//!   3-D view has an f32 field `NODE.camera` of `FRAME_WORDS` words (eye,
//!   right, up, back, focal, near, half: `Frame::words`), a system field
//!   of the view (in `ViewKernels::scratch`: not dumped, not listed) whose
//!   initial value is the frame of the node's saved camera. Its kernels
//!   load it at their start (`load`) and project through the loaded
//!   values, so the host moves the camera by writing that field
//!   (`Simulation::set_view_camera`) with no recompile; the arithmetic,
//!   and so every picture, is that of the constants it replaced.
//! - The ray of pixel (x, y) (`ray`): `a = ((f32(x) + 0.5) - W/2) / fp`,
//!   `b = (H/2 - (f32(y) + 0.5)) / fp`, direction `d = (a*u + b*v) - w`
//!   per component (`(a*u.x + b*v.x) - w.x`, ...), from `eye`: the point
//!   `eye + t*d` projects to the pixel's centre at camera depth `t` (`d`
//!   is not unit length; its camera-space depth component is exactly 1).

use super::*;
use crate::ir::{Camera, Scene};
use crate::lower::emit::Build;

/// Camera defaults (degrees).
pub const DEFAULT_YAW: f32 = 30.0;
pub const DEFAULT_PITCH: f32 = 20.0;
pub const DEFAULT_FOV: f32 = 40.0;
/// The near plane as a fraction of the camera's distance.
pub const NEAR: f64 = 0.001;

/// `(sin, cos)` of `deg` degrees in f64, exact at multiples of 90.
pub fn sin_cos_deg(deg: f64) -> (f64, f64) {
    if deg.rem_euclid(90.0) == 0.0 {
        match (deg.rem_euclid(360.0) / 90.0) as u32 {
            0 => (0.0, 1.0),
            1 => (1.0, 0.0),
            2 => (0.0, -1.0),
            _ => (-1.0, 0.0),
        }
    } else {
        deg.to_radians().sin_cos()
    }
}

/// The distance at which the domain box's bounding sphere fills the
/// narrower side of a `width` x `height` image at vertical `fov` degrees.
pub fn framing_distance(domain: &[f32; 6], fov: f32, width: u32, height: u32) -> f32 {
    let r = (0..3)
        .map(|i| (domain[i + 3] as f64 - domain[i] as f64).powi(2))
        .sum::<f64>()
        .sqrt()
        * 0.5;
    let t = (0.5 * (fov as f64).to_radians()).tan() * (width as f64 / height as f64).min(1.0);
    let h = t.atan();
    (r / h.sin()) as f32
}

/// The frame constants of a camera for a `width` x `height` image (f32,
/// from the f64 definition above); `Frame<InstId>`: the same values loaded
/// from a view's camera field inside a kernel (`load`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Frame<T = f32> {
    pub eye: [T; 3],
    pub right: [T; 3],
    pub up: [T; 3],
    pub back: [T; 3],
    pub focal: T,
    pub near: T,
    pub half: [T; 2],
}

/// Words of a view's camera field (`Frame::words`).
pub const FRAME_WORDS: u32 = 16;

/// The name of a view node's camera field.
pub fn field_name(node_id: &str) -> String {
    format!("{}.camera", node_id)
}

impl<T: Copy> Frame<T> {
    /// The values in the camera field's order: eye, right, up, back,
    /// focal, near, half.
    pub fn values(&self) -> [T; FRAME_WORDS as usize] {
        let mut v = Vec::with_capacity(FRAME_WORDS as usize);
        for a in [self.eye, self.right, self.up, self.back] {
            v.extend_from_slice(&a);
        }
        v.extend_from_slice(&[self.focal, self.near]);
        v.extend_from_slice(&self.half);
        std::array::from_fn(|i| v[i])
    }
    fn from_values(v: [T; FRAME_WORDS as usize]) -> Frame<T> {
        let a = |i: usize| [v[i], v[i + 1], v[i + 2]];
        Frame {
            eye: a(0),
            right: a(3),
            up: a(6),
            back: a(9),
            focal: v[12],
            near: v[13],
            half: [v[14], v[15]],
        }
    }
}

impl Frame {
    /// The words of the view's camera field (f32 bits).
    pub fn words(&self) -> Vec<u32> {
        self.values().iter().map(|x| x.to_bits()).collect()
    }

    pub fn new(c: &Camera, width: u32, height: u32) -> Frame {
        let (sy, cy) = sin_cos_deg(c.yaw as f64);
        let (sp, cp) = sin_cos_deg(c.pitch as f64);
        let back = [cp * sy, sp, cp * cy];
        let right = [cy, 0.0, -sy];
        let up = [-sp * sy, cp, -sp * cy];
        let dist = c.distance as f64;
        let eye: [f64; 3] = std::array::from_fn(|i| c.target[i] as f64 + dist * back[i]);
        let f = |a: [f64; 3]| a.map(|x| x as f32);
        Frame {
            eye: f(eye),
            right: f(right),
            up: f(up),
            back: f(back),
            focal: (0.5 * height as f64 / (0.5 * (c.fov as f64).to_radians()).tan()) as f32,
            near: (NEAR * dist) as f32,
            half: [width as f32 * 0.5, height as f32 * 0.5],
        }
    }
}

/// A scene's camera frame for a `width` x `height` image.
pub fn frame(scene: &Scene, width: u32, height: u32) -> Frame {
    Frame::new(&scene.camera, width, height)
}

/// A new f32 camera field `NODE.camera` on a dense root of its own,
/// holding `fr` at start.
pub(super) fn new_field(program: &mut Program, node_id: &str, fr: &Frame) -> FieldId {
    let name = field_name(node_id);
    let shape = vec![FRAME_WORDS];
    let l = program.layouts.append(LayoutNode::new(
        &name,
        LayoutKind::Dense,
        shape.clone(),
        None,
    ));
    let h = program.fields.append(Field {
        name,
        ty: Type::F32,
        storage: Storage::Word,
        layout: l,
        shape,
        offset_in_cell: 0,
        init: FieldInit::Data(fr.words()),
    });
    program.layouts[l].children.push(LayoutChild::Field(h));
    h
}

/// Loads the frame from a camera field (at a kernel's start; the kernel
/// binds the field as `"camera"`).
pub(super) fn load(e: &mut Emit, field: FieldId) -> Frame<InstId> {
    let v: [InstId; FRAME_WORDS as usize] = std::array::from_fn(|i| {
        let idx = e.i32c(i as i32);
        e.load(field, Type::F32, vec![idx])
    });
    Frame::from_values(v)
}

/// A projected point: whether it is visible, its pixel position and depth
/// (f32 each).
pub(super) struct Projected {
    pub ok: InstId,
    pub cx: InstId,
    pub cy: InstId,
    pub depth: InstId,
}

/// `(a.x*b.x + a.y*b.y) + a.z*b.z`.
fn dot(e: &mut Emit, a: [InstId; 3], b: [InstId; 3]) -> InstId {
    let terms: [InstId; 3] = std::array::from_fn(|i| e.bin(BinaryOp::Mul, a[i], b[i]));
    let s = e.bin(BinaryOp::Add, terms[0], terms[1]);
    e.bin(BinaryOp::Add, s, terms[2])
}

/// Emits the projection of the world point `p` (three f32 values) through
/// a loaded frame.
pub(super) fn project(e: &mut Emit, fr: &Frame<InstId>, p: [InstId; 3]) -> Projected {
    let fin: [InstId; 3] = p.map(|c| e.finite(c));
    let d: [InstId; 3] = std::array::from_fn(|i| e.bin(BinaryOp::Sub, p[i], fr.eye[i]));
    let xc = dot(e, d, fr.right);
    let yc = dot(e, d, fr.up);
    let zc = dot(e, d, fr.back);
    let depth = e.emit(InstKind::Unary(UnaryOp::Neg, zc), Type::F32);
    let focal = fr.focal;
    let qx = e.bin(BinaryOp::Div, xc, depth);
    let mx = e.bin(BinaryOp::Mul, qx, focal);
    let hx = fr.half[0];
    let cx = e.bin(BinaryOp::Add, hx, mx);
    let qy = e.bin(BinaryOp::Div, yc, depth);
    let my = e.bin(BinaryOp::Mul, qy, focal);
    let hy = fr.half[1];
    let cy = e.bin(BinaryOp::Sub, hy, my);
    let near = fr.near;
    let front = e.bin(BinaryOp::Gt, depth, near);
    let fx = e.finite(cx);
    let fy = e.finite(cy);
    let mut ok = e.bin(BinaryOp::LogicalAnd, fin[0], fin[1]);
    for c in [fin[2], front, fx, fy] {
        ok = e.bin(BinaryOp::LogicalAnd, ok, c);
    }
    Projected { ok, cx, cy, depth }
}

/// The eye of a loaded frame.
pub(super) fn eye(fr: &Frame<InstId>) -> [InstId; 3] {
    fr.eye
}

/// The near plane's depth of a loaded frame.
pub(super) fn near(fr: &Frame<InstId>) -> InstId {
    fr.near
}

/// Pixels per world unit at camera depth 1 (the focal length) of a loaded
/// frame.
pub(super) fn focal(fr: &Frame<InstId>) -> InstId {
    fr.focal
}

/// Emits the direction of pixel (x, y)'s ray (i32 pixel indices; see the
/// definition above) through a loaded frame: `eye + t * d` lies at camera
/// depth `t`.
pub(super) fn ray(e: &mut Emit, fr: &Frame<InstId>, x: InstId, y: InstId) -> [InstId; 3] {
    let half = e.f32c(0.5);
    let focal = fr.focal;
    let fx = e.cast(x, Type::F32);
    let px = e.bin(BinaryOp::Add, fx, half);
    let ax = e.bin(BinaryOp::Sub, px, fr.half[0]);
    let a = e.bin(BinaryOp::Div, ax, focal);
    let fy = e.cast(y, Type::F32);
    let py = e.bin(BinaryOp::Add, fy, half);
    let by = e.bin(BinaryOp::Sub, fr.half[1], py);
    let b = e.bin(BinaryOp::Div, by, focal);
    std::array::from_fn(|i| {
        let au = e.bin(BinaryOp::Mul, a, fr.right[i]);
        let bv = e.bin(BinaryOp::Mul, b, fr.up[i]);
        let s = e.bin(BinaryOp::Add, au, bv);
        e.bin(BinaryOp::Sub, s, fr.back[i])
    })
}
