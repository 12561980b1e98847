//! The `lit` mode of `volume` views: single scattering of lights through
//! smoke with self-shadowing, from light-space transmittance grids that IR
//! kernels compute every render, plus ambient light and emission.
//!
//! The definition (`volume.rs` defines space, rays, trilinear sampling,
//! values and the background; the reference renderer in `weft-tests`
//! follows this in plain Rust, f32 operations in this order):
//! - Extinction: a sample's `tc` is `clamp(tn, 0, 1)` (NaN = 0) of the
//!   field's value, as in `emission`; its opacity `a = 1 -
//!   exp(-((density * tc) * step))`.
//! - Transmittance grids: with `shadow_density > 0`, one per light, of
//!   shape `m = ceil(n / k)` per axis (`k = shadow_cells`), each cell `c`
//!   the fraction of the light reaching its centre `q = lo + (f32(c) +
//!   0.5) * cc` (`cc = f32((hi - lo) / m)` per axis). Towards the light: `L =
//!   toward` (directional; `tend = +inf`) or, for a point light at `P`,
//!   `v = P - q`, `r = sqrt((v.x*v.x + v.y*v.y) + v.z*v.z)`, `L = v / max(r,
//!   1e-20)`, `tend = r`. The box exit from `q`: per axis `inv = 1 / (L or
//!   1e-30 where L == 0)`, `out = max((lo - q) * inv, (hi - q) * inv)`,
//!   `tend = min(min(min(out_x, out_y), out_z), tend)`. Shadow samples
//!   `ds = cell` apart (the smallest side of a field cell, whatever `k`):
//!   `ns = i32(min(ceil(tend / ds), MAX_SAMPLES))`, sample `s` at `t =
//!   (f32(s) + o) * ds` (taken when `t < tend`), at `q + t*L` (per
//!   component), trilinear in the field; `o` is 0.5, or with `jitter` the
//!   hash below of the grid cell's index `(c.x * m.y + c.y) * m.z + c.z`;
//!   `tau = tau + tc` (a sample in an inactive block of a sparse field
//!   adds nothing); the march ends once `tau >= cut`. Then `T = exp(-(g *
//!   tau))` with `g = density * shadow_density` and `cut = 16 / g` (host,
//!   f32). With `shadow_density = 0` there are no grids and every `T` is 1.
//! - Shading a sample at `p`: per light `T` = the grid's trilinear value
//!   at `p` (the field's formula with the grid's shape `m`), `fall` = 1
//!   (directional) or `1 / max((v.x*v.x + v.y*v.y) + v.z*v.z, 1e-4)` with
//!   `v = P - p` (point); per channel `light = ambient`, then for each light
//!   in order `light = light + color * ((intensity * T) * fall)`; `scat =
//!   albedo * light`. Emission (with an `emission` field, same shape): its
//!   trilinear value's `te = clamp((v - lo) / span, 0, 1)` (NaN = 0; its
//!   own fixed or auto range, like the view's), `em = step * ((intensity *
//!   te) * ramp(te))` per channel (`ramp`: its colormap); a sample in an
//!   inactive block of a sparse emission field emits nothing.
//! - Compositing, front to back from `C = 0`, `A = 0`: `rest = 1 - A`, `w =
//!   rest * a`, `C = (C + w * scat) + rest * em`, `A = A + w`; the depth is
//!   the first sample's `t` with `A >= 0.5`; the march ends once `A >=
//!   0.99` (`OPAQUE`). Pixel = `C + (1 - A) * background`, then bytes.
//!   Emission adds light without opacity: fire glows where there is no
//!   smoke, and smoke in front of it hides it.
//! - Jitter (`jitter`, on by default in this mode): sample `s` of a ray lies
//!   at `t0 + (f32(s) + j) * dt` instead of `+ 0.5`, with `j` the pixel's
//!   hash of `h = u32(y) * u32(width) + u32(x)` (wrapping): `h = h ^ (h >> 16)`, `h =
//!   h * 0x7feb352d`, `h = h ^ (h >> 15)`, `h = h * 0x846ca68b`, `h = h ^ (h
//!   >> 16)` (wrapping), `j = f32(h >> 8) * 2^-24` (in `[0, 1)`): neighbouring
//!   pixels sample the smoke at different depths, which turns the bands of
//!   a regular step into fine noise. The same pixel always gets the same
//!   `j`, so a still frame does not flicker and backends agree.

use super::volume::{corners_in, trilinear_in, Spec};
use super::*;
use crate::lower::emit::Build;

/// Lights one `lit` view takes, at most.
pub const MAX_LIGHTS: usize = 4;

/// A lit view's lighting as its kernels need it.
#[derive(Clone)]
pub(super) struct Lit {
    pub cfg: VolumeLighting,
    /// One transmittance grid per light (f32), or none with
    /// `shadow_density = 0`.
    pub grids: Vec<FieldId>,
    /// The grids' shape.
    pub grid: [u32; 3],
    pub emission: Option<Emitter>,
}

/// The emission field as the march reads it.
#[derive(Clone, Copy)]
pub(super) struct Emitter {
    pub field: FieldId,
    pub ty: Type,
    /// Auto range: the reduction's keys.
    pub keys: Option<FieldId>,
    /// Its outermost sparse level, if sparse.
    pub level: Option<u32>,
}

/// The transmittance grid's shape for `shape` and `shadow_cells`.
pub fn grid_shape(shape: [u32; 3], k: u32) -> [u32; 3] {
    shape.map(|n| n.div_ceil(k.max(1)))
}

/// `(g, cut)` of the shadow march (host f32, in this order).
pub fn shadow_gain(cfg: &VolumeLighting) -> (f32, f32) {
    let g = cfg.density * cfg.shadow_density;
    (g, 16.0 / g)
}

/// The pixel's jitter `j` in `[0, 1)`.
pub(super) fn jitter(e: &mut Emit, x: InstId, y: InstId, width: u32) -> InstId {
    let xu = e.cast(x, Type::U32);
    let yu = e.cast(y, Type::U32);
    let w = e.u32c(width);
    let h = e.bin(BinaryOp::Mul, yu, w);
    let h = e.bin(BinaryOp::Add, h, xu);
    hash01(e, h)
}

/// `h` (u32) mixed into `[0, 1)`.
fn hash01(e: &mut Emit, h: InstId) -> InstId {
    let mut h = h;
    let mix = |e: &mut Emit, h: InstId, sh: u32| {
        let s = e.u32c(sh);
        let t = e.bin(BinaryOp::Shr, h, s);
        e.bin(BinaryOp::BitXor, h, t)
    };
    h = mix(e, h, 16);
    let m1 = e.u32c(0x7feb_352d);
    h = e.bin(BinaryOp::Mul, h, m1);
    h = mix(e, h, 15);
    let m2 = e.u32c(0x846c_a68b);
    h = e.bin(BinaryOp::Mul, h, m2);
    h = mix(e, h, 16);
    let eight = e.u32c(8);
    let top = e.bin(BinaryOp::Shr, h, eight);
    let f = e.cast(top, Type::F32);
    let k = e.f32c(1.0 / 16_777_216.0);
    e.bin(BinaryOp::Mul, f, k)
}

/// `clamp(x, 0, 1)` with NaN = 0.
fn unit(e: &mut Emit, x: InstId) -> InstId {
    let zero = e.f32c(0.0);
    let one = e.f32c(1.0);
    let nan = e.call(Builtin::IsNan, vec![x]);
    let c = e.call(Builtin::Clamp, vec![x, zero, one]);
    e.select(nan, zero, c)
}

/// The field value's `tc` at world `p`, or 0 in an inactive sparse block.
fn extinction_at(e: &mut Emit, s: &Spec, p: [InstId; 3], lo: InstId, span: InstId) -> InstId {
    let c = corners_in(e, s.shape, &s.domain, p);
    let zero = e.f32c(0.0);
    let out = e.local("tc", Type::F32, zero);
    let body = |e: &mut Emit| {
        let v = trilinear_in(e, s.field, s.ty, &c);
        let d = e.bin(BinaryOp::Sub, v, lo);
        let tn = e.bin(BinaryOp::Div, d, span);
        let tc = unit(e, tn);
        e.set(out, tc);
    };
    match s.sparse {
        Some((level, _)) => {
            let a = e.emit(
                InstKind::FieldIsActive {
                    field: s.field,
                    index: vec![c[0].0, c[1].0, c[2].0],
                    level: Some(level),
                },
                Type::BOOL,
            );
            e.if_(a, body);
        }
        None => body(e),
    }
    e.get(out)
}

/// One invocation per transmittance cell of light `l`: the light's
/// transmittance at the cell's centre, marched through the field.
pub(super) fn transmittance(s: &Spec, lit: &Lit, l: usize) -> Kernel {
    let mut e = Emit::new("view", 3);
    let idx = e.args(3);
    let m = lit.grid;
    let grid = lit.grids[l];
    let light = lit.cfg.lights[l];
    let q: [InstId; 3] = std::array::from_fn(|i| {
        let cc = ((s.domain[i + 3] as f64 - s.domain[i] as f64) / m[i] as f64) as f32;
        let f = e.cast(idx[i], Type::F32);
        let h = e.f32c(0.5);
        let f = e.bin(BinaryOp::Add, f, h);
        let ccc = e.f32c(cc);
        let o = e.bin(BinaryOp::Mul, f, ccc);
        let lo = e.f32c(s.domain[i]);
        e.bin(BinaryOp::Add, lo, o)
    });
    let (dir, mut tend) = match light.kind {
        LightKind::Directional { toward } => (toward.map(|c| e.f32c(c)), e.f32c(f32::INFINITY)),
        LightKind::Point { position } => {
            let v: [InstId; 3] = std::array::from_fn(|i| {
                let pc = e.f32c(position[i]);
                e.bin(BinaryOp::Sub, pc, q[i])
            });
            let r = length(&mut e, v);
            let tiny = e.f32c(1e-20);
            let rr = e.call(Builtin::Max, vec![r, tiny]);
            (v.map(|c| e.bin(BinaryOp::Div, c, rr)), r)
        }
    };
    let mut exit: Option<InstId> = None;
    for i in 0..3 {
        let zero = e.f32c(0.0);
        let z = e.bin(BinaryOp::Eq, dir[i], zero);
        let tiny = e.f32c(1e-30);
        let dn = e.select(z, tiny, dir[i]);
        let one = e.f32c(1.0);
        let inv = e.bin(BinaryOp::Div, one, dn);
        let lo = e.f32c(s.domain[i]);
        let hi = e.f32c(s.domain[i + 3]);
        let a = e.bin(BinaryOp::Sub, lo, q[i]);
        let b = e.bin(BinaryOp::Sub, hi, q[i]);
        let ta = e.bin(BinaryOp::Mul, a, inv);
        let tb = e.bin(BinaryOp::Mul, b, inv);
        let out = e.call(Builtin::Max, vec![ta, tb]);
        exit = Some(match exit {
            None => out,
            Some(x) => e.call(Builtin::Min, vec![x, out]),
        });
    }
    let exit = exit.expect("three axes");
    tend = e.call(Builtin::Min, vec![exit, tend]);
    let cell = super::volume::cell_size(&s.domain, s.shape);
    let ds = cell[0].min(cell[1]).min(cell[2]);
    let dsc = e.f32c(ds);
    // Where in its spacing each shadow sample lies: the middle, or the
    // grid cell's hashed offset (neighbouring cells' rays then cross the
    // smoke's edges at different places: noise, not rings).
    let off = if s.jitter {
        let lin = (0..3).fold(None, |acc: Option<InstId>, i| {
            let u = e.cast(idx[i], Type::U32);
            Some(match acc {
                None => u,
                Some(a) => {
                    let mc = e.u32c(m[i]);
                    let am = e.bin(BinaryOp::Mul, a, mc);
                    e.bin(BinaryOp::Add, am, u)
                }
            })
        });
        hash01(&mut e, lin.expect("three axes"))
    } else {
        e.f32c(0.5)
    };
    let q_n = e.bin(BinaryOp::Div, tend, dsc);
    let q_n = e.call(Builtin::Ceil, vec![q_n]);
    let cap = e.f32c(super::volume::MAX_SAMPLES);
    let q_n = e.call(Builtin::Min, vec![q_n, cap]);
    let n = e.cast(q_n, Type::I32);
    let (lo, span) = super::volume::lo_span(&mut e, s);
    let (g, cut) = shadow_gain(&lit.cfg);
    let zero = e.f32c(0.0);
    let tau = e.local("tau", Type::F32, zero);
    let first = e.i32c(0);
    let kl = e.local("sample", Type::I32, first);
    e.loop_(|e| {
        let k = e.get(kl);
        let end = e.bin(BinaryOp::Ge, k, n);
        e.if_(end, |e| {
            e.emit(InstKind::Break, Type::Void);
        });
        let one = e.i32c(1);
        let k1 = e.bin(BinaryOp::Add, k, one);
        e.set(kl, k1);
        let fk = e.cast(k, Type::F32);
        let fk = e.bin(BinaryOp::Add, fk, off);
        let t = e.bin(BinaryOp::Mul, fk, dsc);
        let inside = e.bin(BinaryOp::Lt, t, tend);
        e.if_(inside, |e| {
            let p: [InstId; 3] = std::array::from_fn(|i| {
                let m = e.bin(BinaryOp::Mul, t, dir[i]);
                e.bin(BinaryOp::Add, q[i], m)
            });
            let tc = extinction_at(e, s, p, lo, span);
            let old = e.get(tau);
            let nt = e.bin(BinaryOp::Add, old, tc);
            e.set(tau, nt);
            let cutc = e.f32c(cut);
            let dark = e.bin(BinaryOp::Ge, nt, cutc);
            e.if_(dark, |e| {
                e.emit(InstKind::Break, Type::Void);
            });
        });
    });
    let gc = e.f32c(g);
    let t = e.get(tau);
    let gt = e.bin(BinaryOp::Mul, gc, t);
    let ng = e.emit(InstKind::Unary(UnaryOp::Neg, gt), Type::F32);
    let tr = e.call(Builtin::Exp, vec![ng]);
    e.store(grid, idx.clone(), tr);
    let mut bindings = vec![("field", s.field), ("light", grid)];
    if let Some(k) = s.keys {
        bindings.push(("range", k));
    }
    e.range_kernel(m.to_vec(), bindings)
}

/// `sqrt((v.x*v.x + v.y*v.y) + v.z*v.z)`.
fn length(e: &mut Emit, v: [InstId; 3]) -> InstId {
    let r2 = length2(e, v);
    e.call(Builtin::Sqrt, vec![r2])
}

fn length2(e: &mut Emit, v: [InstId; 3]) -> InstId {
    let xx = e.bin(BinaryOp::Mul, v[0], v[0]);
    let yy = e.bin(BinaryOp::Mul, v[1], v[1]);
    let zz = e.bin(BinaryOp::Mul, v[2], v[2]);
    let s = e.bin(BinaryOp::Add, xx, yy);
    e.bin(BinaryOp::Add, s, zz)
}

/// The emission field's normalising `(lo, span)` (load once per pixel).
pub(super) fn emission_range(e: &mut Emit, lit: &Lit) -> Option<(InstId, InstId)> {
    let spec = lit.cfg.emission.as_ref()?;
    let src = lit.emission.as_ref()?;
    Some(super::volume::range_of(e, spec.range, src.keys))
}

/// The light the sample at `p` scatters towards the camera, per channel
/// (`albedo * light`).
pub(super) fn scatter(e: &mut Emit, s: &Spec, lit: &Lit, p: [InstId; 3]) -> [InstId; 3] {
    let cfg = &lit.cfg;
    let mut light: [InstId; 3] = cfg.ambient.map(|a| e.f32c(a));
    let coarse = (!lit.grids.is_empty()).then(|| corners_in(e, lit.grid, &s.domain, p));
    for (l, src) in cfg.lights.iter().enumerate() {
        let t = match &coarse {
            Some(cc) => trilinear_in(e, lit.grids[l], Type::F32, cc),
            None => e.f32c(1.0),
        };
        let fall = match src.kind {
            LightKind::Directional { .. } => None,
            LightKind::Point { position } => {
                let v: [InstId; 3] = std::array::from_fn(|i| {
                    let pc = e.f32c(position[i]);
                    e.bin(BinaryOp::Sub, pc, p[i])
                });
                let r2 = length2(e, v);
                let floor = e.f32c(1e-4);
                let r2 = e.call(Builtin::Max, vec![r2, floor]);
                let one = e.f32c(1.0);
                Some(e.bin(BinaryOp::Div, one, r2))
            }
        };
        let ic = e.f32c(src.intensity);
        let mut k = e.bin(BinaryOp::Mul, ic, t);
        if let Some(f) = fall {
            k = e.bin(BinaryOp::Mul, k, f);
        }
        for (l, &c) in light.iter_mut().zip(&src.color) {
            let col = e.f32c(c);
            let m = e.bin(BinaryOp::Mul, col, k);
            *l = e.bin(BinaryOp::Add, *l, m);
        }
    }
    std::array::from_fn(|ch| {
        let a = e.f32c(cfg.albedo[ch]);
        e.bin(BinaryOp::Mul, a, light[ch])
    })
}

/// The emission of the sample whose corners in the field are `c`, per
/// channel and already times `step` (0 in an inactive sparse block), or
/// `None` without an emission field. `em_range`: `emission_range`'s.
pub(super) fn glow(
    e: &mut Emit,
    lit: &Lit,
    c: &Corners,
    em_range: Option<(InstId, InstId)>,
) -> Option<[InstId; 3]> {
    let (src, spec, (lo, span)) = match (&lit.emission, &lit.cfg.emission, em_range) {
        (Some(src), Some(spec), Some(r)) => (*src, *spec, r),
        _ => return None,
    };
    let step = lit.cfg.step;
    let zero = e.f32c(0.0);
    let out: [LocalId; 3] =
        std::array::from_fn(|i| e.local(["er", "eg", "eb"][i], Type::F32, zero));
    let body = |e: &mut Emit| {
        let v = trilinear_in(e, src.field, src.ty, c);
        let d = e.bin(BinaryOp::Sub, v, lo);
        let tn = e.bin(BinaryOp::Div, d, span);
        let te = unit(e, tn);
        let rgb = colormap_rgb(e, spec.colormap, te);
        let ic = e.f32c(spec.intensity);
        let k = e.bin(BinaryOp::Mul, ic, te);
        let st = e.f32c(step);
        for ch in 0..3 {
            let m = e.bin(BinaryOp::Mul, k, rgb[ch]);
            let m = e.bin(BinaryOp::Mul, st, m);
            e.set(out[ch], m);
        }
    };
    match src.level {
        Some(level) => {
            let a = e.emit(
                InstKind::FieldIsActive {
                    field: src.field,
                    index: vec![c[0].0, c[1].0, c[2].0],
                    level: Some(level),
                },
                Type::BOOL,
            );
            e.if_(a, body);
        }
        None => body(e),
    }
    Some(out.map(|l| e.get(l)))
}

/// Per axis `(i0, i1, f)` of a trilinear sample.
pub(super) type Corners = [(InstId, InstId, InstId); 3];
