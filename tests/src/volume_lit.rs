//! The `lit` mode of `volume` views in plain Rust, from the definition in
//! `weft_ir::passes::views::volume_light` (f32 operations in the same
//! order): the light-space transmittance grids, the per-pixel jitter and
//! the shading of one sample. `view_reference::volume` marches the rays.

use weft_ir::ir::{LightKind, VolumeLighting};

/// Per axis `(i0, i1, f)` of a trilinear sample.
pub type Corners = [(usize, usize, f32); 3];

/// A cell's value by its index (i, j, k).
pub type Cells<'a> = &'a dyn Fn([usize; 3]) -> f32;
/// Whether a cell's outermost sparse block is active.
pub type Active<'a> = &'a dyn Fn([usize; 3]) -> bool;

/// The trilinear corners at world `p` of `shape` cells filling `dom`.
pub fn corners(shape: [u32; 3], dom: &[f32; 6], p: [f32; 3]) -> Corners {
    std::array::from_fn(|i| {
        let n = shape[i];
        let sc = (n as f64 / (dom[i + 3] as f64 - dom[i] as f64)) as f32;
        let g = ((p[i] - dom[i]) * sc - 0.5).clamp(0.0, (n - 1) as f32);
        let fl = g.floor();
        let i0 = fl as i32;
        let i1 = (i0 + 1).min(n as i32 - 1);
        (i0 as usize, i1 as usize, g - fl)
    })
}

/// Blends the eight values at `c` along x, then y, then z.
pub fn trilinear(value: Cells, c: &Corners) -> f32 {
    let v = |x: usize, y: usize, z: usize| {
        let pick = |k: usize, b: usize| if b == 0 { c[k].0 } else { c[k].1 };
        value([pick(0, x), pick(1, y), pick(2, z)])
    };
    let lerp = |a: f32, b: f32, f: f32| a + (b - a) * f;
    let (fx, fy, fz) = (c[0].2, c[1].2, c[2].2);
    let c00 = lerp(v(0, 0, 0), v(1, 0, 0), fx);
    let c10 = lerp(v(0, 1, 0), v(1, 1, 0), fx);
    let c01 = lerp(v(0, 0, 1), v(1, 0, 1), fx);
    let c11 = lerp(v(0, 1, 1), v(1, 1, 1), fx);
    lerp(lerp(c00, c10, fy), lerp(c01, c11, fy), fz)
}

/// `clamp(x, 0, 1)`, NaN = 0.
fn unit(x: f32) -> f32 {
    if x.is_nan() {
        0.0
    } else {
        x.clamp(0.0, 1.0)
    }
}

/// The field a lit volume draws: values, activity, shape, box and the
/// normalising `(lo, span)`.
pub struct Smoke<'a> {
    pub value: Cells<'a>,
    pub active: Option<Active<'a>>,
    pub shape: [u32; 3],
    pub dom: [f32; 6],
    pub lo: f32,
    pub span: f32,
}

impl Smoke<'_> {
    /// The sample's `tc` at corners `c` (0 in an inactive block).
    pub fn tc(&self, c: &Corners) -> f32 {
        if self.active.is_some_and(|a| !a([c[0].0, c[1].0, c[2].0])) {
            return 0.0;
        }
        unit((trilinear(self.value, c) - self.lo) / self.span)
    }
}

/// One light's transmittance grid (`[m0][m1][m2]`, x slowest).
pub struct Grid {
    pub shape: [u32; 3],
    pub t: Vec<f32>,
}

/// The transmittance grid of light `l`.
pub fn transmittance(cfg: &VolumeLighting, l: usize, smoke: &Smoke, jittered: bool) -> Grid {
    let dom = smoke.dom;
    let k = cfg.shadow_cells;
    let m = smoke.shape.map(|n| n.div_ceil(k));
    let cell: [f32; 3] = std::array::from_fn(|i| {
        ((dom[i + 3] as f64 - dom[i] as f64) / smoke.shape[i] as f64) as f32
    });
    let ds = cell[0].min(cell[1]).min(cell[2]);
    let g = cfg.density * cfg.shadow_density;
    let cut = 16.0 / g;
    let mut t = Vec::with_capacity((m[0] * m[1] * m[2]) as usize);
    for a in 0..m[0] {
        for b in 0..m[1] {
            for c in 0..m[2] {
                let idx = [a, b, c];
                let q: [f32; 3] = std::array::from_fn(|i| {
                    let cc = ((dom[i + 3] as f64 - dom[i] as f64) / m[i] as f64) as f32;
                    dom[i] + (idx[i] as f32 + 0.5) * cc
                });
                let (dir, mut tend) = match cfg.lights[l].kind {
                    LightKind::Directional { toward } => (toward, f32::INFINITY),
                    LightKind::Point { position } => {
                        let v: [f32; 3] = std::array::from_fn(|i| position[i] - q[i]);
                        let r = ((v[0] * v[0] + v[1] * v[1]) + v[2] * v[2]).sqrt();
                        let rr = r.max(1e-20);
                        (v.map(|x| x / rr), r)
                    }
                };
                let mut exit = f32::INFINITY;
                for i in 0..3 {
                    let dn = if dir[i] == 0.0 { 1e-30 } else { dir[i] };
                    let inv = 1.0 / dn;
                    let out = ((dom[i] - q[i]) * inv).max((dom[i + 3] - q[i]) * inv);
                    exit = if i == 0 { out } else { exit.min(out) };
                }
                tend = exit.min(tend);
                let n = (tend / ds).ceil().min(4096.0) as i32;
                let o = if jittered {
                    hash01((a * m[1] + b) * m[2] + c)
                } else {
                    0.5
                };
                let mut tau = 0.0f32;
                for s in 0..n {
                    let ts = (s as f32 + o) * ds;
                    if ts >= tend {
                        continue;
                    }
                    let p: [f32; 3] = std::array::from_fn(|i| q[i] + ts * dir[i]);
                    tau += smoke.tc(&corners(smoke.shape, &dom, p));
                    if tau >= cut {
                        break;
                    }
                }
                t.push((-(g * tau)).exp());
            }
        }
    }
    Grid { shape: m, t }
}

/// Pixel (x, y)'s jitter in `[0, 1)`.
pub fn jitter(x: u32, y: u32, width: u32) -> f32 {
    hash01(y.wrapping_mul(width).wrapping_add(x))
}

/// `h` mixed into `[0, 1)`.
pub fn hash01(h: u32) -> f32 {
    let mut h = h;
    h ^= h >> 16;
    h = h.wrapping_mul(0x7feb_352d);
    h ^= h >> 15;
    h = h.wrapping_mul(0x846c_a68b);
    h ^= h >> 16;
    (h >> 8) as f32 * (1.0 / 16_777_216.0)
}

/// The emission field as a sample reads it: values, activity, the
/// normalising `(lo, span)` and its colormap.
pub struct Glow<'a> {
    pub value: Cells<'a>,
    pub active: Option<Active<'a>>,
    pub lo: f32,
    pub span: f32,
    pub ramp: &'a dyn Fn(f32) -> [f32; 3],
}

/// The scattered light and the emission (times `step`) of the sample at
/// `p` whose corners in the field are `c`.
pub fn shade(
    cfg: &VolumeLighting,
    grids: &[Grid],
    dom: &[f32; 6],
    p: [f32; 3],
    c: &Corners,
    glow: Option<&Glow>,
) -> ([f32; 3], [f32; 3]) {
    let mut light = cfg.ambient;
    for (l, src) in cfg.lights.iter().enumerate() {
        let t = match grids.get(l) {
            Some(g) => {
                let m = g.shape;
                let cc = corners(m, dom, p);
                let at = |i: [usize; 3]| g.t[(i[0] * m[1] as usize + i[1]) * m[2] as usize + i[2]];
                trilinear(&at, &cc)
            }
            None => 1.0,
        };
        let mut k = src.intensity * t;
        if let LightKind::Point { position } = src.kind {
            let v: [f32; 3] = std::array::from_fn(|i| position[i] - p[i]);
            let r2 = ((v[0] * v[0] + v[1] * v[1]) + v[2] * v[2]).max(1e-4);
            k *= 1.0 / r2;
        }
        for (l, c) in light.iter_mut().zip(src.color) {
            *l += c * k;
        }
    }
    let scat: [f32; 3] = std::array::from_fn(|ch| cfg.albedo[ch] * light[ch]);
    let mut em = [0.0f32; 3];
    if let (Some(g), Some(spec)) = (glow, cfg.emission.as_ref()) {
        if g.active.is_none_or(|a| a([c[0].0, c[1].0, c[2].0])) {
            let te = unit((trilinear(g.value, c) - g.lo) / g.span);
            let rgb = (g.ramp)(te);
            let k = spec.intensity * te;
            for ch in 0..3 {
                em[ch] = cfg.step * (k * rgb[ch]);
            }
        }
    }
    (scat, em)
}
