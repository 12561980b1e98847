//! The ground of 3-D views (`show_ground`): a grid on the floor of the
//! view's `domain`, and the shadows particles and surfaces cast on it, in
//! IR. The ground is part of a view's picture (drawn after its objects,
//! before its overlays), so a volume drawn over the view (`under`) sees
//! it as background, and its depth ends the volume's rays.
//!
//! The definition (the reference renderer in `weft-tests` follows it in
//! plain Rust; f32 operations in this order):
//! - Plane: `y = y0`, the domain's min y. Square: centre `(cx, cz)` =
//!   the middle of the domain's x and z ranges, half side `S = EXTENT *
//!   E` with `E = max(x extent, z extent)`; grid lines every `g = E /
//!   DIVISIONS` from the domain's min x and min z.
//! - Per pixel (x, y): its ray `d` (`camera::ray`), `t = (y0 - eye.y) /
//!   d.y`, hit `hx = eye.x + t*d.x`, `hz = eye.z + t*d.z`, `m = max(|hx -
//!   cx|, |hz - cz|)`. The ground shows when `t` is finite, `t > near`,
//!   `m < S` and `bits(t * DEPTH_BIAS)` is below the pixel's depth word
//!   (nearer than what the view drew, or nothing was drawn; the bias keeps
//!   the domain box's bottom edges, which lie on the plane, in front).
//!   There: fade `f = 1 - m / S`; `u = (hx - x_min) / g`, `v = (hz -
//!   z_min) / g`, `du = |u - floor(u + 0.5)|`, `dv` the same, `dl =
//!   min(du, dv) * g` (world distance to the nearest line); `lw = t /
//!   focal` (a pixel's world size at that depth), `st = (lw * |d|) / |d.y|`
//!   with `|d| = sqrt((d.x*d.x + d.y*d.y) + d.z*d.z)` (its size along the
//!   plane); `line = clamp(1 - dl / lw, 0, 1) * min(1, g / (8 * st))`
//!   (lines fade where grid cells shrink under 8 pixels). Colour per
//!   channel: `c = bg + (PLANE_RGB - bg) * (PLANE_ALPHA * f)`, then `c =
//!   c + (LINE_RGB - c) * ((LINE_ALPHA * line) * f)`, then where the shadow
//!   mask is set `c = c * (1 - SHADOW * f)`; the pixel becomes
//!   `byte(c)` with alpha 255 and its depth word `bits(t * DEPTH_BIAS)`.
//! - Shadows (particles and surfaces; a volume casts none): one
//!   directional key light towards `surface::LIGHT` (world space). A point
//!   `p` with `p.y >= y0` casts onto `s(p) = (p.x - L.x*k, y0, p.z -
//!   L.z*k)` with `k = (p.y - y0) / L.y`. A particle marks the mask
//!   (`VIEW.shadow`, u32 per pixel, cleared to 0 each frame) over the
//!   disc of radius `r = min(radius * (depth(p) / depth(s(p))),
//!   MAX_SHADOW_RADIUS)` pixels around `s(p)`'s projection (the particle's
//!   world size at the shadow's depth), covering pixel centres with `dd <=
//!   r*r` as its splat does, when both `p` and `s(p)` are visible. A
//!   surface triangle with every vertex at `y >= y0` marks the pixels whose
//!   centres its shadow triangle `s(v0) s(v1) s(v2)` covers (the
//!   surface's coverage rule: edge functions all `>= 0` or all `<= 0`,
//!   non-zero area, every vertex visible).

use super::camera::{self, Frame};
use super::*;
use crate::lower::emit::Build;

/// Half the ground square's side, in units of the domain's larger
/// horizontal extent.
pub const EXTENT: f32 = 1.5;
/// Grid cells per larger horizontal extent of the domain.
pub const DIVISIONS: f32 = 8.0;
pub const PLANE_RGB: [f32; 3] = [0.30, 0.32, 0.34];
pub const PLANE_ALPHA: f32 = 0.35;
pub const LINE_RGB: [f32; 3] = [0.62, 0.64, 0.67];
pub const LINE_ALPHA: f32 = 0.55;
/// How much a shadow darkens the ground (at its centre, fading with it).
pub const SHADOW: f32 = 0.55;
/// The ground's depth words are of `t * DEPTH_BIAS`.
pub const DEPTH_BIAS: f32 = 1.002;
/// A particle's shadow disc is at most this many pixels across (radius).
pub const MAX_SHADOW_RADIUS: f32 = 64.0;

/// The ground's geometry of a domain box: `y0`, the square's centre
/// `(cx, cz)`, its half side `S`, the grid step `g` and its origin
/// `(x_min, z_min)`.
#[derive(Clone, Copy, Debug)]
pub struct Geometry {
    pub y0: f32,
    pub centre: [f32; 2],
    pub half: f32,
    pub step: f32,
    pub origin: [f32; 2],
}

impl Geometry {
    pub fn of(d: &[f32; 6]) -> Geometry {
        let e = (d[3] - d[0]).max(d[5] - d[2]);
        Geometry {
            y0: d[1],
            centre: [(d[0] + d[3]) * 0.5, (d[2] + d[5]) * 0.5],
            half: EXTENT * e,
            step: e / DIVISIONS,
            origin: [d[0], d[2]],
        }
    }
}

/// The fields the ground kernels draw on.
pub(super) struct Target {
    pub image: FieldId,
    pub depth: FieldId,
    pub camera: FieldId,
    /// `VIEW.shadow` (u32 per pixel), when the view casts shadows.
    pub shadow: Option<FieldId>,
    pub width: u32,
    pub height: u32,
    pub background: [f32; 3],
}

/// The ground of a view whose own geometry casts shadows on it (the
/// particle and surface views): the view's shadow mask field, the mask
/// cleared, `shadows` (the view's casters marking it) and the plane, one
/// launch each after the view's own; the mask joins its scratch fields.
#[allow(clippy::too_many_arguments)]
pub(super) fn append_shadowed(
    program: &mut Program,
    node_id: &str,
    mut t: Target,
    domain: &[f32; 6],
    shadows: impl FnOnce(&Target) -> Kernel,
    launches: &mut Vec<KernelId>,
    scratch: &mut Vec<FieldId>,
) {
    let mask = shadow_field(program, node_id, t.width, t.height);
    scratch.push(mask);
    t.shadow = Some(mask);
    launches.push(add(program, node_id, clear(mask, t.width, t.height)));
    let k = shadows(&t);
    launches.push(add(program, node_id, k));
    launches.push(add(program, node_id, ground(&t, domain)));
}

/// The shadow mask field of a view (`[height, width]` u32).
pub(super) fn shadow_field(program: &mut Program, node_id: &str, w: u32, h: u32) -> FieldId {
    new_field(program, &format!("{}.shadow", node_id), vec![h, w], 0)
}

/// One invocation per pixel: the mask cleared.
pub(super) fn clear(mask: FieldId, w: u32, h: u32) -> Kernel {
    let mut e = Emit::new("view", 2);
    let idx = e.args(2);
    let z = e.u32c(0);
    e.store(mask, idx, z);
    e.range_kernel(vec![h, w], vec![("shadow", mask)])
}

/// One invocation per word: `word`.
pub(super) fn fill(f: FieldId, h: u32, w: u32, word: u32) -> Kernel {
    let mut e = Emit::new("view", 2);
    let idx = e.args(2);
    let v = e.u32c(word);
    e.store(f, idx, v);
    e.range_kernel(vec![h, w], vec![("image", f)])
}

/// `s(p)`: where the point `p` casts its shadow on the plane `y0`, and
/// whether it does (`p.y >= y0`).
fn cast(e: &mut Emit, p: [InstId; 3], y0: f32) -> ([InstId; 3], InstId) {
    let y0c = e.f32c(y0);
    let h = e.bin(BinaryOp::Sub, p[1], y0c);
    let ly = e.f32c(surface::LIGHT[1]);
    let k = e.bin(BinaryOp::Div, h, ly);
    let lx = e.f32c(surface::LIGHT[0]);
    let mx = e.bin(BinaryOp::Mul, lx, k);
    let sx = e.bin(BinaryOp::Sub, p[0], mx);
    let lz = e.f32c(surface::LIGHT[2]);
    let mz = e.bin(BinaryOp::Mul, lz, k);
    let sz = e.bin(BinaryOp::Sub, p[2], mz);
    let above = e.bin(BinaryOp::Ge, p[1], y0c);
    ([sx, y0c, sz], above)
}

/// One invocation per particle: its shadow disc into the mask.
pub(super) fn particle_shadows(
    t: &Target,
    positions: FieldId,
    n: u32,
    radius: f32,
    domain: &[f32; 6],
) -> Kernel {
    let mask = t.shadow.expect("a shadow mask");
    let mut e = Emit::new("view", 1);
    let k = e.args(1)[0];
    let fr: Frame<InstId> = camera::load(&mut e, t.camera);
    let p = e.load(positions, Type::Vector(Scalar::F32, 3), vec![k]);
    let c: [InstId; 3] = std::array::from_fn(|i| e.extract(p, i as u32));
    let (s, above) = cast(&mut e, c, domain[1]);
    let pp = camera::project(&mut e, &fr, c);
    let ps = camera::project(&mut e, &fr, s);
    let ok = e.bin(BinaryOp::LogicalAnd, pp.ok, ps.ok);
    let ok = e.bin(BinaryOp::LogicalAnd, ok, above);
    e.if_(ok, |e| {
        let q = e.bin(BinaryOp::Div, pp.depth, ps.depth);
        let rc = e.f32c(radius);
        let r = e.bin(BinaryOp::Mul, rc, q);
        let cap = e.f32c(MAX_SHADOW_RADIUS);
        let r = e.call(Builtin::Min, vec![r, cap]);
        let one = e.f32c(1.0);
        let reach = e.bin(BinaryOp::Add, r, one);
        let span = |e: &mut Emit, c: InstId, n: u32| {
            let lo = e.bin(BinaryOp::Sub, c, reach);
            let lo = e.call(Builtin::Floor, vec![lo]);
            let zero = e.f32c(0.0);
            let lo = e.call(Builtin::Max, vec![lo, zero]);
            let hi = e.bin(BinaryOp::Add, c, reach);
            let hi = e.call(Builtin::Ceil, vec![hi]);
            let last = e.f32c(n as f32 - 1.0);
            let hi = e.call(Builtin::Min, vec![hi, last]);
            (e.cast(lo, Type::I32), e.cast(hi, Type::I32))
        };
        let (x0, x1) = span(e, ps.cx, t.width);
        let (y0, y1) = span(e, ps.cy, t.height);
        // Off-image discs are skipped before the loops (an inclusive loop
        // whose start is past its end by more than one runs away on wgpu).
        let xs = e.bin(BinaryOp::Le, x0, x1);
        let ys = e.bin(BinaryOp::Le, y0, y1);
        let on = e.bin(BinaryOp::LogicalAnd, xs, ys);
        e.if_(on, |e| {
            let r2 = e.bin(BinaryOp::Mul, r, r);
            e.range_incl(y0, y1, |e, y| {
                e.range_incl(x0, x1, |e, x| {
                    let half = e.f32c(0.5);
                    let fx = e.cast(x, Type::F32);
                    let fx = e.bin(BinaryOp::Add, fx, half);
                    let dx = e.bin(BinaryOp::Sub, fx, ps.cx);
                    let fy = e.cast(y, Type::F32);
                    let fy = e.bin(BinaryOp::Add, fy, half);
                    let dy = e.bin(BinaryOp::Sub, ps.cy, fy);
                    let xx = e.bin(BinaryOp::Mul, dx, dx);
                    let yy = e.bin(BinaryOp::Mul, dy, dy);
                    let dd = e.bin(BinaryOp::Add, xx, yy);
                    let covers = e.bin(BinaryOp::Le, dd, r2);
                    e.if_(covers, |e| {
                        let one = e.u32c(1);
                        e.store(mask, vec![y, x], one);
                    });
                });
            });
        });
    });
    e.range_kernel(
        vec![n],
        vec![
            ("positions", positions),
            ("camera", t.camera),
            ("shadow", mask),
        ],
    )
}

/// One invocation per triangle slot of a surface: its shadow triangle
/// into the mask.
pub(super) fn surface_shadows(
    t: &Target,
    tris: FieldId,
    count: FieldId,
    max: u32,
    domain: &[f32; 6],
) -> Kernel {
    let mask = t.shadow.expect("a shadow mask");
    let mut e = Emit::new("view", 1);
    let k = e.args(1)[0];
    let fr: Frame<InstId> = camera::load(&mut e, t.camera);
    let z = e.i32c(0);
    let cnt = e.load(count, Type::U32, vec![z]);
    let maxc = e.u32c(max);
    let n = e.call(Builtin::Min, vec![cnt, maxc]);
    let ku = e.cast(k, Type::U32);
    let live = e.bin(BinaryOp::Lt, ku, n);
    e.if_(live, |e| {
        let mut ok = live;
        let mut a = Vec::new();
        for v in 0..3 {
            let p: [InstId; 3] = std::array::from_fn(|c| {
                let vi = e.i32c(3 * v + c as i32);
                e.load(tris, Type::F32, vec![k, vi])
            });
            let (s, above) = cast(e, p, domain[1]);
            let pr = camera::project(e, &fr, s);
            ok = e.bin(BinaryOp::LogicalAnd, ok, above);
            ok = e.bin(BinaryOp::LogicalAnd, ok, pr.ok);
            a.push((pr.cx, pr.cy));
        }
        let area = surface::edge(e, a[0], a[1], a[2]);
        let zero = e.f32c(0.0);
        let nonzero = e.bin(BinaryOp::Ne, area, zero);
        let ok = e.bin(BinaryOp::LogicalAnd, ok, nonzero);
        e.if_(ok, |e| {
            let (x0, x1) = surface::span(e, [a[0].0, a[1].0, a[2].0], t.width);
            let (y0, y1) = surface::span(e, [a[0].1, a[1].1, a[2].1], t.height);
            let xs = e.bin(BinaryOp::Le, x0, x1);
            let ys = e.bin(BinaryOp::Le, y0, y1);
            let on = e.bin(BinaryOp::LogicalAnd, xs, ys);
            e.if_(on, |e| {
                e.range_incl(y0, y1, |e, y| {
                    e.range_incl(x0, x1, |e, x| {
                        let (covers, _) = surface::covers(e, &a, x, y);
                        e.if_(covers, |e| {
                            let one = e.u32c(1);
                            e.store(mask, vec![y, x], one);
                        });
                    });
                });
            });
        });
    });
    e.range_kernel(
        vec![max],
        vec![
            ("camera", t.camera),
            ("triangles", tris),
            ("triangle_count", count),
            ("shadow", mask),
        ],
    )
}

/// One invocation per pixel: the ground where it is nearer than the
/// picture (see the definition).
pub(super) fn ground(t: &Target, domain: &[f32; 6]) -> Kernel {
    let g = Geometry::of(domain);
    let mut e = Emit::new("view", 2);
    let idx = e.args(2);
    let (y, x) = (idx[0], idx[1]);
    let fr: Frame<InstId> = camera::load(&mut e, t.camera);
    let d = camera::ray(&mut e, &fr, x, y);
    let eye = camera::eye(&fr);
    let y0 = e.f32c(g.y0);
    let num = e.bin(BinaryOp::Sub, y0, eye[1]);
    let tt = e.bin(BinaryOp::Div, num, d[1]);
    let mx = e.bin(BinaryOp::Mul, tt, d[0]);
    let hx = e.bin(BinaryOp::Add, eye[0], mx);
    let mz = e.bin(BinaryOp::Mul, tt, d[2]);
    let hz = e.bin(BinaryOp::Add, eye[2], mz);
    let ccx = e.f32c(g.centre[0]);
    let ccz = e.f32c(g.centre[1]);
    let ax = e.bin(BinaryOp::Sub, hx, ccx);
    let ax = e.call(Builtin::Abs, vec![ax]);
    let az = e.bin(BinaryOp::Sub, hz, ccz);
    let az = e.call(Builtin::Abs, vec![az]);
    let m = e.call(Builtin::Max, vec![ax, az]);
    let half = e.f32c(g.half);
    let fin = e.finite(tt);
    let near = camera::near(&fr);
    let front = e.bin(BinaryOp::Gt, tt, near);
    let inside = e.bin(BinaryOp::Lt, m, half);
    let bias = e.f32c(DEPTH_BIAS);
    let biased = e.bin(BinaryOp::Mul, tt, bias);
    let key = e.bitcast(biased, Type::U32);
    let there = e.load(t.depth, Type::U32, vec![y, x]);
    let nearer = e.bin(BinaryOp::Lt, key, there);
    let hit = e.bin(BinaryOp::LogicalAnd, fin, front);
    let hit = e.bin(BinaryOp::LogicalAnd, hit, inside);
    let hit = e.bin(BinaryOp::LogicalAnd, hit, nearer);
    e.if_(hit, |e| {
        let one = e.f32c(1.0);
        let q = e.bin(BinaryOp::Div, m, half);
        let f = e.bin(BinaryOp::Sub, one, q);
        let step = e.f32c(g.step);
        let dist = |e: &mut Emit, h: InstId, o: f32| {
            let oc = e.f32c(o);
            let a = e.bin(BinaryOp::Sub, h, oc);
            let u = e.bin(BinaryOp::Div, a, step);
            let hf = e.f32c(0.5);
            let r = e.bin(BinaryOp::Add, u, hf);
            let r = e.call(Builtin::Floor, vec![r]);
            let du = e.bin(BinaryOp::Sub, u, r);
            e.call(Builtin::Abs, vec![du])
        };
        let du = dist(e, hx, g.origin[0]);
        let dv = dist(e, hz, g.origin[1]);
        let dm = e.call(Builtin::Min, vec![du, dv]);
        let dl = e.bin(BinaryOp::Mul, dm, step);
        let lw = e.bin(BinaryOp::Div, tt, fr.focal);
        let sq: [InstId; 3] = std::array::from_fn(|i| e.bin(BinaryOp::Mul, d[i], d[i]));
        let n2 = e.bin(BinaryOp::Add, sq[0], sq[1]);
        let n2 = e.bin(BinaryOp::Add, n2, sq[2]);
        let dn = e.call(Builtin::Sqrt, vec![n2]);
        let ady = e.call(Builtin::Abs, vec![d[1]]);
        let st = e.bin(BinaryOp::Mul, lw, dn);
        let st = e.bin(BinaryOp::Div, st, ady);
        let r = e.bin(BinaryOp::Div, dl, lw);
        let l = e.bin(BinaryOp::Sub, one, r);
        let zero = e.f32c(0.0);
        let l = e.call(Builtin::Clamp, vec![l, zero, one]);
        let eight = e.f32c(8.0);
        let s8 = e.bin(BinaryOp::Mul, eight, st);
        let dens = e.bin(BinaryOp::Div, step, s8);
        let dens = e.call(Builtin::Min, vec![one, dens]);
        let line = e.bin(BinaryOp::Mul, l, dens);
        let pa = e.f32c(PLANE_ALPHA);
        let a_plane = e.bin(BinaryOp::Mul, pa, f);
        let la = e.f32c(LINE_ALPHA);
        let a_line = e.bin(BinaryOp::Mul, la, line);
        let a_line = e.bin(BinaryOp::Mul, a_line, f);
        let shade = match t.shadow {
            Some(mask) => {
                let w = e.load(mask, Type::U32, vec![y, x]);
                let z = e.u32c(0);
                let dark = e.bin(BinaryOp::Ne, w, z);
                let sh = e.f32c(SHADOW);
                let sf = e.bin(BinaryOp::Mul, sh, f);
                let lit = e.bin(BinaryOp::Sub, one, sf);
                Some((dark, lit))
            }
            None => None,
        };
        let bytes: [InstId; 3] = std::array::from_fn(|i| {
            let bg = e.f32c(t.background[i]);
            let pl = e.f32c(PLANE_RGB[i]);
            let dp = e.bin(BinaryOp::Sub, pl, bg);
            let dp = e.bin(BinaryOp::Mul, dp, a_plane);
            let c = e.bin(BinaryOp::Add, bg, dp);
            let ln = e.f32c(LINE_RGB[i]);
            let dc = e.bin(BinaryOp::Sub, ln, c);
            let dc = e.bin(BinaryOp::Mul, dc, a_line);
            let mut c = e.bin(BinaryOp::Add, c, dc);
            if let Some((dark, lit)) = shade {
                let cs = e.bin(BinaryOp::Mul, c, lit);
                c = e.select(dark, cs, c);
            }
            e.byte(c)
        });
        let opaque = e.u32c(255);
        let word = e.pack([bytes[0], bytes[1], bytes[2], opaque]);
        e.store(t.image, vec![y, x], word);
        e.store(t.depth, vec![y, x], key);
    });
    let mut bindings = vec![("camera", t.camera), ("depth", t.depth)];
    if let Some(m) = t.shadow {
        bindings.push(("shadow", m));
    }
    bindings.push(("image", t.image));
    e.range_kernel(vec![t.height, t.width], bindings)
}
