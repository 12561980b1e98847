//! The overlays of 3-D views: the domain's bounding box and an axis gizmo,
//! in IR (appended to a 3-D view's launches, after its picture).
//!
//! The definition (the reference renderer in `weft-tests` follows it in
//! plain Rust; f32 operations in this order):
//! - Lines (`line`, also the `show_active` block boxes of `volume.rs`):
//!   from pixel position `p` to `q` (`camera.rs` pixel coordinates),
//!   `dx = q.x - p.x`, `dy = q.y - p.y`, `m = i32(min(ceil(max(|dx|,
//!   |dy|)), MAX_EDGE_STEPS))` steps; for `s` in `0..=m`, `f = f32(s) /
//!   f32(max(m, 1))`, the point `(p.x + dx*f, p.y + dy*f)` lights pixel
//!   `(floor(x), floor(y))` where that lies inside the image.
//! - `show_box`: the 12 edges of the view's `domain` box (corner `k` =
//!   `(lo or hi x, lo or hi y, lo or hi z)` by bits 0, 1, 2 of `k`; edges
//!   `(a, a | bit)` for `a` in `0..8`, `bit` in `1, 2, 4` with `a & bit ==
//!   0`, in that order; one invocation per edge) through the loaded camera
//!   (`camera::project`); an edge with one corner behind the near plane
//!   is clipped there (`clipped_edge`: the hidden end moves along the
//!   edge to depth `near * NEAR_CLIP`), one with both behind is not
//!   drawn. Depth along the edge:
//!   perspective-correct, `iz = i0 + (i1 - i0) * f` with `i0 = 1 / depth0`,
//!   `i1 = 1 / depth1`, `z = 1 / iz`. Depth test: a step lights its pixel
//!   in `BOX_RGB` when `bits(z) < VIEW.depth` at the pixel (u32 compare:
//!   nearer than what the view drew there, or the pixel is empty,
//!   `u32::MAX`); the depth field is not written, so the edges' order does
//!   not matter. The box is drawn over the finished picture of this view
//!   only: a volume marches over its `under` view's picture without that
//!   view's overlays (its launches repeat the view's without them, then
//!   redraw them on that view's image after the march).
//! - `show_axes`: a triad drawn on top of everything (no depth test), by
//!   one invocation, x then y then z (a later axis covers an earlier one):
//!   length `len = min(AXIS_LEN, floor(min(W, H) / 4))` pixels, origin
//!   `o = (off + 0.5, (H - off) - 0.5)` with `off = floor(len * 1.25)` (a
//!   pixel centre near the bottom-left corner); world axis `i`'s end is
//!   `(o.x + len * right[i], o.y - len * up[i])` (the axis in camera space:
//!   its right and up components of the loaded frame; an axis pointing at
//!   the viewer shrinks to a dot), drawn as a `line` from `o` in
//!   `AXIS_RGB[i]`.

use super::camera::{self, Frame};
use super::*;
use crate::ir::Scene;
use crate::lower::emit::Build;

/// Line steps per edge, at most.
pub const MAX_EDGE_STEPS: f32 = 4096.0;
/// The domain box's colour (light grey).
pub const BOX_RGB: [f32; 3] = [0.78, 0.78, 0.78];
/// The x, y and z axes' colours (red, green, blue).
pub const AXIS_RGB: [[f32; 3]; 3] = [[0.95, 0.25, 0.2], [0.3, 0.85, 0.3], [0.3, 0.5, 1.0]];
/// The axes' length in pixels (smaller on images under 160 pixels).
pub const AXIS_LEN: f32 = 40.0;

/// The axis gizmo's length and origin (pixel coordinates) on a `width` x
/// `height` image.
pub fn axes_geometry(width: u32, height: u32) -> (f32, [f32; 2]) {
    let len = AXIS_LEN.min((width.min(height) as f32 / 4.0).floor());
    let off = (len * 1.25).floor();
    (len, [off + 0.5, (height as f32 - off) - 0.5])
}

/// An RGB colour as an opaque RGBA8 word.
pub fn word(rgb: [f32; 3]) -> u32 {
    let b = rgb.map(colormap::to_u8);
    b[0] as u32 | (b[1] as u32) << 8 | (b[2] as u32) << 16 | 255 << 24
}

/// Emits a line from pixel position `p` to `q` (see the definition):
/// `plot(e, f, x, y)` for every step inside a `width` x `height` image,
/// with the step's fraction `f` along the line and its pixel (i32).
pub(super) fn line(
    e: &mut Emit,
    p: (InstId, InstId),
    q: (InstId, InstId),
    (width, height): (u32, u32),
    mut plot: impl FnMut(&mut Emit, InstId, InstId, InstId),
) {
    let (px, py) = p;
    let dx = e.bin(BinaryOp::Sub, q.0, px);
    let dy = e.bin(BinaryOp::Sub, q.1, py);
    let ax = e.call(Builtin::Abs, vec![dx]);
    let ay = e.call(Builtin::Abs, vec![dy]);
    let m = e.call(Builtin::Max, vec![ax, ay]);
    let m = e.call(Builtin::Ceil, vec![m]);
    let cap = e.f32c(MAX_EDGE_STEPS);
    let m = e.call(Builtin::Min, vec![m, cap]);
    let mi = e.cast(m, Type::I32);
    let one = e.i32c(1);
    let den = e.call(Builtin::Max, vec![mi, one]);
    let den = e.cast(den, Type::F32);
    let zero = e.i32c(0);
    e.range_incl(zero, mi, |e, st| {
        let fs = e.cast(st, Type::F32);
        let f = e.bin(BinaryOp::Div, fs, den);
        let ox = e.bin(BinaryOp::Mul, dx, f);
        let gx = e.bin(BinaryOp::Add, px, ox);
        let oy = e.bin(BinaryOp::Mul, dy, f);
        let gy = e.bin(BinaryOp::Add, py, oy);
        let gx = e.call(Builtin::Floor, vec![gx]);
        let gy = e.call(Builtin::Floor, vec![gy]);
        let z = e.f32c(0.0);
        let w = e.f32c(width as f32);
        let h = e.f32c(height as f32);
        let c0 = e.bin(BinaryOp::Ge, gx, z);
        let c1 = e.bin(BinaryOp::Lt, gx, w);
        let c2 = e.bin(BinaryOp::Ge, gy, z);
        let c3 = e.bin(BinaryOp::Lt, gy, h);
        let a = e.bin(BinaryOp::LogicalAnd, c0, c1);
        let b = e.bin(BinaryOp::LogicalAnd, c2, c3);
        let inb = e.bin(BinaryOp::LogicalAnd, a, b);
        e.if_(inb, |e| {
            let ix = e.cast(gx, Type::I32);
            let iy = e.cast(gy, Type::I32);
            plot(e, f, ix, iy);
        });
    });
}

/// The 12 edges of a box as corner pairs, in the definition's order.
pub fn box_edges() -> Vec<(usize, usize)> {
    let mut v = Vec::with_capacity(12);
    for a in 0..8usize {
        for bit in [1usize, 2, 4] {
            if a & bit == 0 {
                v.push((a, a | bit));
            }
        }
    }
    v
}

/// Corner `k` of the box `d` (`[lo x, lo y, lo z, hi x, hi y, hi z]`).
pub fn corner(d: &[f32; 6], k: usize) -> [f32; 3] {
    std::array::from_fn(|i| if (k >> i) & 1 == 0 { d[i] } else { d[i + 3] })
}

/// What the overlay kernels draw on: the view's image, depth and camera
/// fields and its size.
pub(super) struct Target {
    pub image: FieldId,
    pub depth: FieldId,
    pub camera: FieldId,
    pub width: u32,
    pub height: u32,
}

/// The overlay kernels a scene asks for (none when both are off).
pub(super) fn kernels(t: &Target, scene: &Scene) -> Vec<Kernel> {
    let mut v = Vec::new();
    if scene.show_box {
        v.push(bbox(t, &scene.domain));
    }
    if scene.show_axes {
        v.push(axes(t));
    }
    v
}

/// An edge crossing the camera's near plane is clipped at depth `near *
/// NEAR_CLIP` (just beyond the plane, so the clipped end projects).
pub const NEAR_CLIP: f32 = 1.001;

/// The projected ends of the world segment `a`..`b` clipped at the near
/// plane, and whether to draw it: both ends visible (the segment as is),
/// or one visible beyond `near * NEAR_CLIP` and the other not (that end
/// replaced by `c = a + (b - a) * u`, `u = (zc - depth_a) / (depth_b -
/// depth_a)`, `zc = near * NEAR_CLIP`, and both ends visible after it;
/// that line is then clipped to the image grown by one pixel, `[-1, W +
/// 1] x [-1, H + 1]` (Liang-Barsky: per side `r = q / p`, `s0 = max(s0,
/// r)` where `p < 0`, `s1 = min(s1, r)` where `p > 0`, left, right,
/// bottom, top; nothing where `s0 > s1` or a side has `p == 0`, `q < 0`),
/// its ends `p + (q - p) * s` with `1 / depth` interpolated the same way).
pub(super) fn clipped_edge(
    e: &mut Emit,
    fr: &Frame<InstId>,
    a: [InstId; 3],
    b: [InstId; 3],
) -> (InstId, camera::Projected, camera::Projected) {
    let p = camera::project(e, fr, a);
    let q = camera::project(e, fr, b);
    let both = e.bin(BinaryOp::LogicalAnd, p.ok, q.ok);
    let k = e.f32c(NEAR_CLIP);
    let zc = e.bin(BinaryOp::Mul, fr.near, k);
    let pf = e.bin(BinaryOp::Gt, p.depth, zc);
    let qf = e.bin(BinaryOp::Gt, q.depth, zc);
    let np = e.emit(InstKind::Unary(UnaryOp::Not, p.ok), Type::BOOL);
    let nq = e.emit(InstKind::Unary(UnaryOp::Not, q.ok), Type::BOOL);
    let cp = e.bin(BinaryOp::LogicalAnd, p.ok, nq);
    let cp = e.bin(BinaryOp::LogicalAnd, cp, pf);
    let cq = e.bin(BinaryOp::LogicalAnd, q.ok, np);
    let cq = e.bin(BinaryOp::LogicalAnd, cq, qf);
    let clip = e.bin(BinaryOp::LogicalOr, cp, cq);
    let num = e.bin(BinaryOp::Sub, zc, p.depth);
    let den = e.bin(BinaryOp::Sub, q.depth, p.depth);
    let u = e.bin(BinaryOp::Div, num, den);
    let c: [InstId; 3] = std::array::from_fn(|i| {
        let d = e.bin(BinaryOp::Sub, b[i], a[i]);
        let m = e.bin(BinaryOp::Mul, d, u);
        e.bin(BinaryOp::Add, a[i], m)
    });
    let a2: [InstId; 3] = std::array::from_fn(|i| e.select(p.ok, a[i], c[i]));
    let b2: [InstId; 3] = std::array::from_fn(|i| e.select(q.ok, b[i], c[i]));
    let p2 = camera::project(e, fr, a2);
    let q2 = camera::project(e, fr, b2);
    // A clipped end lies far off the image: clip the line to the image
    // grown by a pixel (Liang-Barsky), 1 / depth linear along it.
    let dx = e.bin(BinaryOp::Sub, q2.cx, p2.cx);
    let dy = e.bin(BinaryOp::Sub, q2.cy, p2.cy);
    let zero = e.f32c(0.0);
    let one = e.f32c(1.0);
    let two = e.f32c(2.0);
    let m1 = e.f32c(-1.0);
    let wx = e.bin(BinaryOp::Mul, fr.half[0], two);
    let wx = e.bin(BinaryOp::Add, wx, one);
    let wy = e.bin(BinaryOp::Mul, fr.half[1], two);
    let wy = e.bin(BinaryOp::Add, wy, one);
    let ndx = e.emit(InstKind::Unary(UnaryOp::Neg, dx), Type::F32);
    let ndy = e.emit(InstKind::Unary(UnaryOp::Neg, dy), Type::F32);
    let lx = e.bin(BinaryOp::Sub, p2.cx, m1);
    let rx = e.bin(BinaryOp::Sub, wx, p2.cx);
    let ly = e.bin(BinaryOp::Sub, p2.cy, m1);
    let ry = e.bin(BinaryOp::Sub, wy, p2.cy);
    let (mut s0, mut s1) = (zero, one);
    let mut out = e.emit(InstKind::Const(Const::bool(false)), Type::BOOL);
    for (pk, qk) in [(ndx, lx), (dx, rx), (ndy, ly), (dy, ry)] {
        let r = e.bin(BinaryOp::Div, qk, pk);
        let neg = e.bin(BinaryOp::Lt, pk, zero);
        let pos = e.bin(BinaryOp::Gt, pk, zero);
        let mx = e.call(Builtin::Max, vec![s0, r]);
        s0 = e.select(neg, mx, s0);
        let mn = e.call(Builtin::Min, vec![s1, r]);
        s1 = e.select(pos, mn, s1);
        let par = e.bin(BinaryOp::Eq, pk, zero);
        let off = e.bin(BinaryOp::Lt, qk, zero);
        let gone = e.bin(BinaryOp::LogicalAnd, par, off);
        out = e.bin(BinaryOp::LogicalOr, out, gone);
    }
    let empty = e.bin(BinaryOp::Gt, s0, s1);
    let out = e.bin(BinaryOp::LogicalOr, out, empty);
    let ip = e.bin(BinaryOp::Div, one, p2.depth);
    let iq = e.bin(BinaryOp::Div, one, q2.depth);
    let di = e.bin(BinaryOp::Sub, iq, ip);
    let at = |e: &mut Emit, s: InstId, orig: &camera::Projected| {
        let mx = e.bin(BinaryOp::Mul, dx, s);
        let cx = e.bin(BinaryOp::Add, p2.cx, mx);
        let my = e.bin(BinaryOp::Mul, dy, s);
        let cy = e.bin(BinaryOp::Add, p2.cy, my);
        let mi = e.bin(BinaryOp::Mul, di, s);
        let i = e.bin(BinaryOp::Add, ip, mi);
        let one = e.f32c(1.0);
        let depth = e.bin(BinaryOp::Div, one, i);
        camera::Projected {
            ok: orig.ok,
            cx: e.select(both, orig.cx, cx),
            cy: e.select(both, orig.cy, cy),
            depth: e.select(both, orig.depth, depth),
        }
    };
    let p3 = at(e, s0, &p2);
    let q3 = at(e, s1, &q2);
    let shown = e.emit(InstKind::Unary(UnaryOp::Not, out), Type::BOOL);
    let clip = e.bin(BinaryOp::LogicalAnd, clip, shown);
    let draw = e.bin(BinaryOp::LogicalOr, both, clip);
    let draw = e.bin(BinaryOp::LogicalAnd, draw, p2.ok);
    let draw = e.bin(BinaryOp::LogicalAnd, draw, q2.ok);
    (draw, p3, q3)
}

/// One invocation per edge of the domain box, depth-tested.
fn bbox(t: &Target, domain: &[f32; 6]) -> Kernel {
    let mut e = Emit::new("view", 1);
    let k = e.args(1)[0];
    let fr: Frame<InstId> = camera::load(&mut e, t.camera);
    let edges = box_edges();
    // The edge's two corners: constants picked by the invocation index.
    let mut ends: [[InstId; 3]; 2] = [0, 1].map(|j| {
        let c = corner(domain, [edges[0].0, edges[0].1][j]);
        c.map(|x| e.f32c(x))
    });
    for (n, &(a, b)) in edges.iter().enumerate().skip(1) {
        let kn = e.i32c(n as i32);
        let is = e.bin(BinaryOp::Eq, k, kn);
        for (j, c) in [a, b].into_iter().enumerate() {
            let c = corner(domain, c);
            for i in 0..3 {
                let v = e.f32c(c[i]);
                ends[j][i] = e.select(is, v, ends[j][i]);
            }
        }
    }
    let (ok, p, q) = clipped_edge(&mut e, &fr, ends[0], ends[1]);
    let colour = word(BOX_RGB);
    e.if_(ok, |e| {
        let one = e.f32c(1.0);
        let i0 = e.bin(BinaryOp::Div, one, p.depth);
        let i1 = e.bin(BinaryOp::Div, one, q.depth);
        let di = e.bin(BinaryOp::Sub, i1, i0);
        line(
            e,
            (p.cx, p.cy),
            (q.cx, q.cy),
            (t.width, t.height),
            |e, f, x, y| {
                let s = e.bin(BinaryOp::Mul, di, f);
                let iz = e.bin(BinaryOp::Add, i0, s);
                let one = e.f32c(1.0);
                let z = e.bin(BinaryOp::Div, one, iz);
                let key = e.bitcast(z, Type::U32);
                let there = e.load(t.depth, Type::U32, vec![y, x]);
                let nearer = e.bin(BinaryOp::Lt, key, there);
                e.if_(nearer, |e| {
                    let w = e.u32c(colour);
                    e.store(t.image, vec![y, x], w);
                });
            },
        );
    });
    e.range_kernel(
        vec![12],
        vec![("camera", t.camera), ("depth", t.depth), ("image", t.image)],
    )
}

/// One invocation: the x, y and z axes from the corner, on top.
fn axes(t: &Target) -> Kernel {
    let mut e = Emit::new("view", 1);
    let _ = e.args(1);
    let fr: Frame<InstId> = camera::load(&mut e, t.camera);
    let (len, o) = axes_geometry(t.width, t.height);
    for (i, rgb) in AXIS_RGB.iter().enumerate() {
        let ox = e.f32c(o[0]);
        let oy = e.f32c(o[1]);
        let l = e.f32c(len);
        let mx = e.bin(BinaryOp::Mul, l, fr.right[i]);
        let ex = e.bin(BinaryOp::Add, ox, mx);
        let my = e.bin(BinaryOp::Mul, l, fr.up[i]);
        let ey = e.bin(BinaryOp::Sub, oy, my);
        let colour = word(*rgb);
        line(
            &mut e,
            (ox, oy),
            (ex, ey),
            (t.width, t.height),
            |e, _, x, y| {
                let w = e.u32c(colour);
                e.store(t.image, vec![y, x], w);
            },
        );
    }
    e.range_kernel(vec![1], vec![("camera", t.camera), ("image", t.image)])
}
