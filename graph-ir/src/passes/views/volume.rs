//! `volume` views of 3-axis scalar fields: ray-marched through the 3-D
//! camera, in IR.
//!
//! The definition (the reference renderer in `weft-tests` follows it in
//! plain Rust; f32 operations in this order):
//! - Space: field axis 0 is x, 1 is y, 2 is z. Cell `(i, j, k)` of an
//!   `n0 x n1 x n2` field fills `[lo + i*c, lo + (i+1)*c)` per axis of the
//!   `domain` box `[lo x, lo y, lo z, hi x, hi y, hi z]` (`c = (hi - lo) /
//!   n` per axis). The default domain is the box from the origin to
//!   `(n0, n1, n2) / max(n0, n1, n2)` (the longest axis spans 0..1, cells
//!   are cubes).
//! - Rays: pixel (x, y)'s ray `eye + t*d` (`camera::ray`; `t` is the
//!   camera depth). Box entry and exit (slabs): per axis `dn = d` (or
//!   `1e-30` where `d == 0`), `inv = 1 / dn`, `ta = (lo - eye) * inv`,
//!   `tb = (hi - eye) * inv` (`lo - eye`, `hi - eye` rounded to f32 on the
//!   host); `t0 = max(max(max(min(ta,tb)_x, min_y), min_z), near)`, `t1 =
//!   min(min(max(ta,tb)_x, max_y), max_z)`. With an `under` view whose depth
//!   word at the pixel is not `u32::MAX`: `t1 = min(t1, its depth)`.
//! - Samples (emission and mip): world spacing `ds = step * cell` (`cell` =
//!   the smallest `c` of the three axes, f32), `len = sqrt((d.x*d.x +
//!   d.y*d.y) + d.z*d.z)`, `dt = ds / len`; when `t0 < t1`, `n =
//!   i32(min(ceil((t1 - t0) / dt), MAX_SAMPLES))`; sample `s` in `0..n` at
//!   `t = t0 + (f32(s) + 0.5) * dt`, taken only when `t < t1`, at `p = eye +
//!   t*d` (per component `eye + t*d.c`).
//! - Sampling is trilinear, clamped to the cell centres: per axis `g =
//!   clamp((p - lo) * sc - 0.5, 0, n - 1)` (`sc = f32(n / (hi - lo))`),
//!   `i0 = i32(floor(g))`, `f = g - floor(g)`, `i1 = min(i0 + 1, n - 1)`; the
//!   eight values (as f32) blend along x, then y, then z: `a + (b - a) * f`.
//!   Sparse fields: a sample whose cell `(i0, i1.., )`'s block of the
//!   outermost sparse level is inactive contributes nothing and loads
//!   nothing, and the ray skips the block whole (`skip_to`): per axis the
//!   block's first cell `b0 = (i0 / size) * size` and `b1 = b0 + size`,
//!   the faces `lo + (f32(b) + 0.5) * c` (the samples whose `i0` lies in
//!   the block; `-inf` when `b0 = 0`, `+inf` when `b1 >= n`), the slab
//!   exit `min over axes of max((face_lo - eye) * inv, (face_hi - eye) *
//!   inv)`, and the march goes on at sample `max(s + 1, i32(floor(clamp(
//!   (exit - t0) / dt - 0.5, -1, MAX_SAMPLES))))`: on the same sample grid
//!   (active parts sample at the same `t`), from the last sample at or
//!   before the exit (looked at again, so f32 rounding of the exit never
//!   skips an active sample).
//! - Values: `tn = (v - lo) / span` with the fixed `range` (span 1 when
//!   `hi <= lo`), or the frame's finite min..max (active cells only under
//!   sparse layouts; 0..1 when there is none) as the `image` view does;
//!   colour = the colormap at `tn` (clamped, NaN = 0).
//! - `emission`: `tc = clamp(tn, 0, 1)` (NaN = 0), `a = 1 - exp(-((density *
//!   tc) * step))`; front to back `w = (1 - A) * a`, `C = C + w * colour`,
//!   `A = A + w` (from `C = 0`, `A = 0`); the march ends once `A >= 0.99`.
//!   Pixel = `C + (1 - A) * background` per channel, then bytes
//!   (`byte(x)`: clamp to 0..1, times 255 plus 0.5, truncate), alpha 255.
//!   Depth: the first sample's `t` at which `A >= 0.5`.
//! - `mip`: the largest finite sample value (the first sample of equal
//!   ones; its `t` is the depth); pixel = its colour, or the background
//!   where no sample was taken.
//! - `slice`: the plane `p[axis] = lo + position * (hi - lo)` (f32): `t =
//!   (plane - eye[axis]) * inv[axis]`; it shows when `t > near`, `t < t1`
//!   (the under view's depth, else +inf; the box's exit is not used) and
//!   the other two coordinates `p = eye + t*d` lie in `[lo, hi]`: then the
//!   sample at `p` coloured (a sample in an inactive sparse block is
//!   `INACTIVE_RGB[0]`), and `OUTLINE_RGB` within `1.5 * t / focal` (1.5
//!   pixels) of the rectangle's border (`p - lo < r` or `hi - p < r`, in
//!   order of the two axes). Depth: `t`.
//! - Background: the `background` param's bytes / 255, or the `under`
//!   view's pixel bytes / 255. Depth where the volume shows nothing: the
//!   under view's depth word (`u32::MAX` without one).
//! - `show_active` (sparse fields): after the march, every active block of
//!   the outermost sparse level is drawn as its 12 box edges in
//!   `OUTLINE_RGB`, over the picture (no depth test): each edge, clipped
//!   at the near plane (`overlay3d::clipped_edge`), is a line from end to end
//!   (`overlay3d::line`: `m = i32(min(ceil(max(|dx|, |dy|)), 4096))` pixel
//!   steps, point `q = c0 + (c1 - c0) * (f32(s) / f32(max(m, 1)))` for `s`
//!   in `0..=m`, pixel `(floor(q.x), floor(q.y))` where inside the image). Corner coordinates: `lo + f32(
//!   cell) * c` with the block's first cell and `min(first + size, n)`.

use super::camera;
use super::overlay3d;
use super::volume_light::{self, Emitter, Lit};
use super::*;
use crate::ir::colormap::INACTIVE_RGB;
use crate::lower::emit::Build;

/// The most samples one ray takes.
pub const MAX_SAMPLES: f32 = 4096.0;
/// The march stops at this accumulated opacity.
pub const OPAQUE: f32 = 0.99;
/// Line steps per box edge, at most (`overlay3d::line` steps them).
pub use super::overlay3d::MAX_EDGE_STEPS;

/// The `under` view's image, its row pitch and its depth field.
#[derive(Clone, Copy)]
pub(super) struct Under {
    pub image: FieldId,
    pub depth: FieldId,
}

pub(super) struct Spec {
    pub field: FieldId,
    pub ty: Type,
    pub shape: [u32; 3],
    mode: VolumeMode,
    map: Colormap,
    pub range: Option<(f32, f32)>,
    pub keys: Option<FieldId>,
    background: [f32; 3],
    width: u32,
    height: u32,
    /// The view's camera field (`camera::new_field`).
    camera: FieldId,
    pub domain: [f32; 6],
    /// The outermost sparse level and its block size per axis.
    pub sparse: Option<(u32, [u32; 3])>,
    img: FieldId,
    depth: FieldId,
    under: Option<Under>,
    /// `lit` mode's lighting, grids and emission.
    lit: Option<Lit>,
    /// Per-pixel hashed ray offsets (`volume_light::jitter`).
    pub jitter: bool,
}

/// World size of one cell per axis.
pub fn cell_size(domain: &[f32; 6], shape: [u32; 3]) -> [f32; 3] {
    std::array::from_fn(|i| ((domain[i + 3] as f64 - domain[i] as f64) / shape[i] as f64) as f32)
}

pub(super) fn volume(
    program: &mut Program,
    node_id: &str,
    v: &View,
    under: Option<(Under, Vec<KernelId>)>,
) -> Result<ViewKernels, PassError> {
    let View::Volume {
        field,
        mode,
        colormap,
        range,
        background,
        show_active,
        width,
        height,
        scene,
        jitter,
        ..
    } = v
    else {
        unreachable!("called for volume views")
    };
    let (width, height) = (*width, *height);
    let pitch = check_size(node_id, width, height)?;
    let (ty, shape) = {
        let f = &program.fields[*field];
        (f.ty, [f.shape[0], f.shape[1], f.shape[2]])
    };
    let img = new_field(
        program,
        &format!("{}.image", node_id),
        vec![height, pitch],
        0,
    );
    let depth = new_field(
        program,
        &format!("{}.depth", node_id),
        vec![height, width],
        u32::MAX,
    );
    let plan = AddressPlan::new(program, *field);
    let sparse = plan
        .levels
        .iter()
        .position(|l| l.kind.is_sparse())
        .map(|o| {
            let d: [u32; 3] =
                std::array::from_fn(|i| plan.levels[o].axes[i].divisor.min(u32::MAX as u64) as u32);
            (o as u32, d)
        });
    let mut launches: Vec<KernelId> = under.as_ref().map(|u| u.1.clone()).unwrap_or_default();
    let mut scratch = vec![depth];
    let keys = if range.is_none() {
        let keys = new_field(program, &format!("{}.range", node_id), vec![2], 0);
        scratch.push(keys);
        launches.push(add(program, node_id, reset_range(keys)));
        launches.push(add(
            program,
            node_id,
            reduce3(*field, ty, shape, sparse.is_some(), keys),
        ));
        Some(keys)
    } else {
        None
    };
    let cam = camera::new_field(program, node_id, &camera::frame(scene, width, height));
    scratch.push(cam);
    // The ground: drawn first, on the background, as if a view under the
    // volume had drawn it (with `under`, that view draws its own).
    let mut under = under.map(|u| u.0);
    if scene.show_ground && under.is_none() {
        let gimg = new_field(
            program,
            &format!("{}.ground_image", node_id),
            vec![height, pitch],
            0,
        );
        let gdepth = new_field(
            program,
            &format!("{}.ground_depth", node_id),
            vec![height, width],
            u32::MAX,
        );
        scratch.extend([gimg, gdepth]);
        let bg = overlay3d::word(*background);
        launches.push(add(program, node_id, ground::fill(gimg, height, pitch, bg)));
        launches.push(add(
            program,
            node_id,
            ground::fill(gdepth, height, width, u32::MAX),
        ));
        let t = ground::Target {
            image: gimg,
            depth: gdepth,
            camera: cam,
            shadow: None,
            width,
            height,
            background: *background,
        };
        launches.push(add(program, node_id, ground::ground(&t, &scene.domain)));
        under = Some(Under {
            image: gimg,
            depth: gdepth,
        });
    }
    let lit = match mode {
        VolumeMode::Lit(cfg) => Some(lit_fields(
            program,
            node_id,
            cfg,
            shape,
            &mut scratch,
            &mut launches,
        )),
        _ => None,
    };
    let mut s = Spec {
        field: *field,
        ty,
        shape,
        mode: mode.clone(),
        map: *colormap,
        range: *range,
        keys,
        background: *background,
        width,
        height,
        camera: cam,
        domain: scene.domain,
        sparse,
        img,
        depth,
        under,
        lit: None,
        jitter: *jitter,
    };
    // The transmittance grids read the field (and its range) first.
    if let Some(lit) = lit {
        for l in 0..lit.grids.len() {
            launches.push(add(
                program,
                node_id,
                volume_light::transmittance(&s, &lit, l),
            ));
        }
        s.lit = Some(lit);
    }
    launches.push(add(program, node_id, march(&s)));
    if *show_active {
        if let Some((level, size)) = sparse {
            launches.push(add(program, node_id, boxes(&s, level, size)));
        }
    }
    Ok(ViewKernels {
        node_id: node_id.to_string(),
        image: img,
        width,
        height,
        pitch,
        scratch,
        depth: Some(depth),
        launches,
    })
}

/// A `lit` view's emission range keys and transmittance grids (their
/// reset and reduce launches appended; the grids' kernels come once the
/// `Spec` exists).
fn lit_fields(
    program: &mut Program,
    node_id: &str,
    cfg: &VolumeLighting,
    shape: [u32; 3],
    scratch: &mut Vec<FieldId>,
    launches: &mut Vec<KernelId>,
) -> Lit {
    let emission = cfg.emission.map(|em| {
        let ty = program.fields[em.field].ty;
        let plan = AddressPlan::new(program, em.field);
        let level = plan
            .levels
            .iter()
            .position(|l| l.kind.is_sparse())
            .map(|o| o as u32);
        let keys = em.range.is_none().then(|| {
            let keys = new_field(program, &format!("{}.emission_range", node_id), vec![2], 0);
            scratch.push(keys);
            launches.push(add(program, node_id, reset_range(keys)));
            launches.push(add(
                program,
                node_id,
                reduce3(em.field, ty, shape, level.is_some(), keys),
            ));
            keys
        });
        Emitter {
            field: em.field,
            ty,
            keys,
            level,
        }
    });
    let grid = volume_light::grid_shape(shape, cfg.shadow_cells);
    let grids = if cfg.shadow_density > 0.0 {
        (0..cfg.lights.len())
            .map(|l| {
                let g = new_field(
                    program,
                    &format!("{}.light{}", node_id, l),
                    grid.to_vec(),
                    0,
                );
                // f32 words (the transmittance), stored as such.
                program.fields[g].ty = Type::F32;
                scratch.push(g);
                g
            })
            .collect()
    } else {
        Vec::new()
    };
    Lit {
        cfg: cfg.clone(),
        grids,
        grid,
        emission,
    }
}

/// One invocation per cell: the finite values' min and max keys (active
/// cells only when `sparse`).
fn reduce3(field: FieldId, ty: Type, shape: [u32; 3], sparse: bool, keys: FieldId) -> Kernel {
    let mut e = Emit::new("view", 3);
    let idx = e.args(3);
    let body = |e: &mut Emit| {
        let v = e.load(field, ty, idx.clone());
        let s = e.as_f32(v);
        let ok = e.finite(s);
        e.if_(ok, |e| {
            let k = order_key(e, s);
            let z = e.i32c(0);
            let o = e.i32c(1);
            e.atomic(AtomicOp::Min, keys, vec![z], k);
            e.atomic(AtomicOp::Max, keys, vec![o], k);
        });
    };
    if sparse {
        let active = e.emit(
            InstKind::FieldIsActive {
                field,
                index: idx.clone(),
                level: None,
            },
            Type::BOOL,
        );
        e.if_(active, body);
    } else {
        body(&mut e);
    }
    e.range_kernel(shape.to_vec(), vec![("field", field), ("range", keys)])
}

/// The view field's normalising `(lo, span)` (`range_of`).
pub(super) fn lo_span(e: &mut Emit, s: &Spec) -> (InstId, InstId) {
    range_of(e, s.range, s.keys)
}

/// A normalising `(lo, span)`: fixed, or the reduction's (0..1 when it
/// saw no finite value).
pub(super) fn range_of(
    e: &mut Emit,
    range: Option<(f32, f32)>,
    keys: Option<FieldId>,
) -> (InstId, InstId) {
    match (range, keys) {
        (Some((lo, hi)), _) => {
            let span = if hi > lo { hi - lo } else { 1.0 };
            (e.f32c(lo), e.f32c(span))
        }
        (None, Some(keys)) => {
            let z = e.i32c(0);
            let o = e.i32c(1);
            let lk = e.load(keys, Type::U32, vec![z]);
            let hk = e.load(keys, Type::U32, vec![o]);
            let empty = e.bin(BinaryOp::Gt, lk, hk);
            let lo = from_key(e, lk);
            let hi = from_key(e, hk);
            let zero = e.f32c(0.0);
            let one = e.f32c(1.0);
            let lo = e.select(empty, zero, lo);
            let hi = e.select(empty, one, hi);
            let wide = e.bin(BinaryOp::Gt, hi, lo);
            let d = e.bin(BinaryOp::Sub, hi, lo);
            let span = e.select(wide, d, one);
            (lo, span)
        }
        (None, None) => (e.f32c(0.0), e.f32c(1.0)),
    }
}

/// Per axis `(i0, i1, f)` of the trilinear sample at world `p` of the
/// view's field.
fn corners(e: &mut Emit, s: &Spec, p: [InstId; 3]) -> [(InstId, InstId, InstId); 3] {
    corners_in(e, s.shape, &s.domain, p)
}

/// Per axis `(i0, i1, f)` of the trilinear sample at world `p` of a grid
/// of `shape` cells filling `domain`.
pub(super) fn corners_in(
    e: &mut Emit,
    shape: [u32; 3],
    domain: &[f32; 6],
    p: [InstId; 3],
) -> [(InstId, InstId, InstId); 3] {
    std::array::from_fn(|i| {
        let n = shape[i];
        let sc = (n as f64 / (domain[i + 3] as f64 - domain[i] as f64)) as f32;
        let lo = e.f32c(domain[i]);
        let scc = e.f32c(sc);
        let half = e.f32c(0.5);
        let g = e.bin(BinaryOp::Sub, p[i], lo);
        let g = e.bin(BinaryOp::Mul, g, scc);
        let g = e.bin(BinaryOp::Sub, g, half);
        let zero = e.f32c(0.0);
        let top = e.f32c((n - 1) as f32);
        let g = e.call(Builtin::Clamp, vec![g, zero, top]);
        let fl = e.call(Builtin::Floor, vec![g]);
        let f = e.bin(BinaryOp::Sub, g, fl);
        let i0 = e.cast(fl, Type::I32);
        let one = e.i32c(1);
        let up = e.bin(BinaryOp::Add, i0, one);
        let last = e.i32c(n as i32 - 1);
        let i1 = e.call(Builtin::Min, vec![up, last]);
        (i0, i1, f)
    })
}

/// Whether the outermost sparse block holding cell `idx` is active
/// (always true for dense fields).
fn block_active(e: &mut Emit, s: &Spec, idx: Vec<InstId>) -> Option<InstId> {
    s.sparse.map(|(level, _)| {
        e.emit(
            InstKind::FieldIsActive {
                field: s.field,
                index: idx,
                level: Some(level),
            },
            Type::BOOL,
        )
    })
}

/// The trilinear value of the view's field at the corners `c` (f32).
fn trilinear(e: &mut Emit, s: &Spec, c: &[(InstId, InstId, InstId); 3]) -> InstId {
    trilinear_in(e, s.field, s.ty, c)
}

/// The trilinear value of `field` (of type `ty`) at the corners `c` (f32).
pub(super) fn trilinear_in(
    e: &mut Emit,
    field: FieldId,
    ty: Type,
    c: &[(InstId, InstId, InstId); 3],
) -> InstId {
    let mut v = [[[c[0].0; 2]; 2]; 2];
    for (z, vz) in v.iter_mut().enumerate() {
        for (y, vy) in vz.iter_mut().enumerate() {
            for (x, vx) in vy.iter_mut().enumerate() {
                let pick = |k: usize, b: usize| if b == 0 { c[k].0 } else { c[k].1 };
                let l = e.load(field, ty, vec![pick(0, x), pick(1, y), pick(2, z)]);
                *vx = e.as_f32(l);
            }
        }
    }
    let lerp = |e: &mut Emit, a: InstId, b: InstId, f: InstId| {
        let d = e.bin(BinaryOp::Sub, b, a);
        let m = e.bin(BinaryOp::Mul, d, f);
        e.bin(BinaryOp::Add, a, m)
    };
    let (fx, fy, fz) = (c[0].2, c[1].2, c[2].2);
    let c00 = lerp(e, v[0][0][0], v[0][0][1], fx);
    let c10 = lerp(e, v[0][1][0], v[0][1][1], fx);
    let c01 = lerp(e, v[1][0][0], v[1][0][1], fx);
    let c11 = lerp(e, v[1][1][0], v[1][1][1], fx);
    let c0 = lerp(e, c00, c10, fy);
    let c1 = lerp(e, c01, c11, fy);
    lerp(e, c0, c1, fz)
}

/// `eye + t * d` per component.
fn point(e: &mut Emit, eye: [InstId; 3], d: [InstId; 3], t: InstId) -> [InstId; 3] {
    std::array::from_fn(|i| {
        let m = e.bin(BinaryOp::Mul, t, d[i]);
        e.bin(BinaryOp::Add, eye[i], m)
    })
}

/// The sample index a ray jumps to from a sample in the inactive block
/// holding cell `i0` (the outermost sparse level's): the last sample at or
/// before the ray's exit from the region whose samples read that block
/// (per axis from the block's first cell + 0.5 to its end + 0.5, in
/// cells; open towards the domain's faces at the first and last block).
/// The march takes the larger of it and the next index, so the sample at
/// the exit is looked at again and f32 rounding of the exit never skips
/// an active sample. `(t0, dt)`: the march's first `t` and its spacing.
fn skip_to(
    e: &mut Emit,
    s: &Spec,
    inv: &[InstId; 3],
    fr: &camera::Frame<InstId>,
    i0: &[InstId],
    (t0, dt, off): (InstId, InstId, InstId),
) -> InstId {
    let size = s.sparse.map_or([1; 3], |(_, size)| size);
    let cell = cell_size(&s.domain, s.shape);
    let mut exit: Option<InstId> = None;
    for i in 0..3 {
        let sz = e.i32c(size[i].max(1) as i32);
        let q = e.bin(BinaryOp::Div, i0[i], sz);
        let b0 = e.bin(BinaryOp::Mul, q, sz);
        let b1 = e.bin(BinaryOp::Add, b0, sz);
        let face = |e: &mut Emit, j: InstId| {
            let f = e.cast(j, Type::F32);
            let h = e.f32c(0.5);
            let f = e.bin(BinaryOp::Add, f, h);
            let c = e.f32c(cell[i]);
            let m = e.bin(BinaryOp::Mul, f, c);
            let lo = e.f32c(s.domain[i]);
            e.bin(BinaryOp::Add, lo, m)
        };
        let lo_b = face(e, b0);
        let hi_b = face(e, b1);
        let zero = e.i32c(0);
        let at_lo = e.bin(BinaryOp::Eq, b0, zero);
        let ninf = e.f32c(f32::NEG_INFINITY);
        let lo_b = e.select(at_lo, ninf, lo_b);
        let n = e.i32c(s.shape[i] as i32);
        let at_hi = e.bin(BinaryOp::Ge, b1, n);
        let inf = e.f32c(f32::INFINITY);
        let hi_b = e.select(at_hi, inf, hi_b);
        let a = e.bin(BinaryOp::Sub, lo_b, fr.eye[i]);
        let b = e.bin(BinaryOp::Sub, hi_b, fr.eye[i]);
        let ta = e.bin(BinaryOp::Mul, a, inv[i]);
        let tb = e.bin(BinaryOp::Mul, b, inv[i]);
        let out = e.call(Builtin::Max, vec![ta, tb]);
        exit = Some(match exit {
            None => out,
            Some(x) => e.call(Builtin::Min, vec![x, out]),
        });
    }
    let exit = exit.expect("three axes");
    let x = e.bin(BinaryOp::Sub, exit, t0);
    let x = e.bin(BinaryOp::Div, x, dt);
    let x = e.bin(BinaryOp::Sub, x, off);
    let lo = e.f32c(-1.0);
    let hi = e.f32c(MAX_SAMPLES);
    let x = e.call(Builtin::Clamp, vec![x, lo, hi]);
    let x = e.call(Builtin::Floor, vec![x]);
    e.cast(x, Type::I32)
}

/// One invocation per pixel: its ray marched (or the slice plane), over
/// the background or the under view's pixel, into the image and depth.
fn march(s: &Spec) -> Kernel {
    let mut e = Emit::new("view", 2);
    let idx = e.args(2);
    let (y, x) = (idx[0], idx[1]);
    let fr = camera::load(&mut e, s.camera);
    let fr = &fr;
    let d = camera::ray(&mut e, fr, x, y);
    let eye = camera::eye(fr);
    let near = camera::near(fr);
    // Slabs.
    let mut inv = [d[0]; 3];
    let mut tn_all = Vec::new();
    for i in 0..3 {
        let zero = e.f32c(0.0);
        let z = e.bin(BinaryOp::Eq, d[i], zero);
        let tiny = e.f32c(1e-30);
        let dn = e.select(z, tiny, d[i]);
        let one = e.f32c(1.0);
        inv[i] = e.bin(BinaryOp::Div, one, dn);
        // f32 subtractions, as the host did them when the frame was
        // constants (both round correctly: the same bits).
        let lo_i = e.f32c(s.domain[i]);
        let hi_i = e.f32c(s.domain[i + 3]);
        let a = e.bin(BinaryOp::Sub, lo_i, fr.eye[i]);
        let b = e.bin(BinaryOp::Sub, hi_i, fr.eye[i]);
        let ta = e.bin(BinaryOp::Mul, a, inv[i]);
        let tb = e.bin(BinaryOp::Mul, b, inv[i]);
        let lo = e.call(Builtin::Min, vec![ta, tb]);
        let hi = e.call(Builtin::Max, vec![ta, tb]);
        tn_all.push((lo, hi));
    }
    let mut tmin = tn_all[0].0;
    let mut tmax = tn_all[0].1;
    for &(lo, hi) in &tn_all[1..] {
        tmin = e.call(Builtin::Max, vec![tmin, lo]);
        tmax = e.call(Builtin::Min, vec![tmax, hi]);
    }
    let t0 = e.call(Builtin::Max, vec![tmin, near]);
    // The under view's depth and colour, or none and the background.
    let none = e.u32c(u32::MAX);
    let (under_word, bg) = match s.under {
        Some(u) => {
            let w = e.load(u.depth, Type::U32, vec![y, x]);
            let c = e.load(u.image, Type::U32, vec![y, x]);
            let bg: [InstId; 3] = std::array::from_fn(|i| e.unit(c, 8 * i as u32));
            (w, bg)
        }
        None => (
            none,
            s.background
                .map(|c| e.f32c(colormap::to_u8(c) as f32 / 255.0)),
        ),
    };
    let has_under = e.bin(BinaryOp::Ne, under_word, none);
    let under_t = e.bitcast(under_word, Type::F32);
    let inf = e.f32c(f32::INFINITY);
    let stop = e.select(has_under, under_t, inf);
    let box_end = e.call(Builtin::Min, vec![tmax, stop]);
    let t1 = match s.mode {
        VolumeMode::Slice { .. } => stop,
        _ => box_end,
    };
    // Where in its spacing each sample lies: the middle, or the pixel's
    // hashed offset.
    let off = if s.jitter {
        volume_light::jitter(&mut e, x, y, s.width)
    } else {
        e.f32c(0.5)
    };
    let (lo, span) = lo_span(&mut e, s);
    let zero = e.f32c(0.0);
    let rgb_l: [LocalId; 3] = std::array::from_fn(|i| e.local(["r", "g", "b"][i], Type::F32, zero));
    let dep = e.local("depth", Type::U32, under_word);
    let norm = |e: &mut Emit, v: InstId| {
        let dv = e.bin(BinaryOp::Sub, v, lo);
        e.bin(BinaryOp::Div, dv, span)
    };
    match &s.mode {
        VolumeMode::Emission { .. } | VolumeMode::Mip { .. } | VolumeMode::Lit(_) => {
            let step = match &s.mode {
                VolumeMode::Emission { step, .. } | VolumeMode::Mip { step } => *step,
                VolumeMode::Lit(l) => l.step,
                VolumeMode::Slice { .. } => unreachable!("a marching mode"),
            };
            let em_range = s
                .lit
                .as_ref()
                .and_then(|l| volume_light::emission_range(&mut e, l));
            let cell = cell_size(&s.domain, s.shape);
            let ds = step * cell[0].min(cell[1]).min(cell[2]);
            let xx = e.bin(BinaryOp::Mul, d[0], d[0]);
            let yy = e.bin(BinaryOp::Mul, d[1], d[1]);
            let zz = e.bin(BinaryOp::Mul, d[2], d[2]);
            let l2 = e.bin(BinaryOp::Add, xx, yy);
            let l2 = e.bin(BinaryOp::Add, l2, zz);
            let len = e.call(Builtin::Sqrt, vec![l2]);
            let dsc = e.f32c(ds);
            let dt = e.bin(BinaryOp::Div, dsc, len);
            let alpha = e.local("alpha", Type::F32, zero);
            let ninf = e.f32c(f32::NEG_INFINITY);
            let best = e.local("best", Type::F32, ninf);
            let fals = e.emit(InstKind::Const(Const::bool(false)), Type::BOOL);
            let found = e.local("found", Type::BOOL, fals);
            let hit = e.bin(BinaryOp::Lt, t0, t1);
            e.if_(hit, |e| {
                let span_t = e.bin(BinaryOp::Sub, t1, t0);
                let q = e.bin(BinaryOp::Div, span_t, dt);
                let q = e.call(Builtin::Ceil, vec![q]);
                let cap = e.f32c(MAX_SAMPLES);
                let q = e.call(Builtin::Min, vec![q, cap]);
                let n = e.cast(q, Type::I32);
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
                    let at = e.bin(BinaryOp::Mul, fk, dt);
                    let t = e.bin(BinaryOp::Add, t0, at);
                    let inside = e.bin(BinaryOp::Lt, t, t1);
                    e.if_(inside, |e| {
                        let p = point(e, eye, d, t);
                        let c = corners(e, s, p);
                        let sample = |e: &mut Emit| {
                            let v = trilinear(e, s, &c);
                            match &s.mode {
                                VolumeMode::Lit(cfg) => {
                                    let lit = s.lit.as_ref().expect("lit mode has its grids");
                                    let tn = norm(e, v);
                                    let zero = e.f32c(0.0);
                                    let one = e.f32c(1.0);
                                    let nan = e.call(Builtin::IsNan, vec![tn]);
                                    let tc = e.call(Builtin::Clamp, vec![tn, zero, one]);
                                    let tc = e.select(nan, zero, tc);
                                    let den = e.f32c(cfg.density);
                                    let sg = e.bin(BinaryOp::Mul, den, tc);
                                    let st = e.f32c(cfg.step);
                                    let sg = e.bin(BinaryOp::Mul, sg, st);
                                    let ng = e.emit(InstKind::Unary(UnaryOp::Neg, sg), Type::F32);
                                    let ex = e.call(Builtin::Exp, vec![ng]);
                                    let a = e.bin(BinaryOp::Sub, one, ex);
                                    let acc = e.get(alpha);
                                    let rest = e.bin(BinaryOp::Sub, one, acc);
                                    let w = e.bin(BinaryOp::Mul, rest, a);
                                    // Empty space scatters nothing (w = 0
                                    // adds exactly 0): skip the lights.
                                    let some = e.bin(BinaryOp::Gt, a, zero);
                                    e.if_(some, |e| {
                                        let scat = volume_light::scatter(e, s, lit, p);
                                        for i in 0..3 {
                                            let old = e.get(rgb_l[i]);
                                            let m = e.bin(BinaryOp::Mul, w, scat[i]);
                                            let nv = e.bin(BinaryOp::Add, old, m);
                                            e.set(rgb_l[i], nv);
                                        }
                                    });
                                    if let Some(em) = volume_light::glow(e, lit, &c, em_range) {
                                        for i in 0..3 {
                                            let old = e.get(rgb_l[i]);
                                            let g = e.bin(BinaryOp::Mul, rest, em[i]);
                                            let nv = e.bin(BinaryOp::Add, old, g);
                                            e.set(rgb_l[i], nv);
                                        }
                                    }
                                    let acc = e.bin(BinaryOp::Add, acc, w);
                                    e.set(alpha, acc);
                                    let half = e.f32c(0.5);
                                    let dense = e.bin(BinaryOp::Ge, acc, half);
                                    let f = e.get(found);
                                    let nf = e.emit(InstKind::Unary(UnaryOp::Not, f), Type::BOOL);
                                    let first = e.bin(BinaryOp::LogicalAnd, dense, nf);
                                    e.if_(first, |e| {
                                        let tb = e.bitcast(t, Type::U32);
                                        e.set(dep, tb);
                                        let tr =
                                            e.emit(InstKind::Const(Const::bool(true)), Type::BOOL);
                                        e.set(found, tr);
                                    });
                                    let op = e.f32c(OPAQUE);
                                    let done = e.bin(BinaryOp::Ge, acc, op);
                                    e.if_(done, |e| {
                                        e.emit(InstKind::Break, Type::Void);
                                    });
                                }
                                VolumeMode::Emission { density, step } => {
                                    let (density, step) = (*density, *step);
                                    let tn = norm(e, v);
                                    let rgb = colormap_rgb(e, s.map, tn);
                                    let zero = e.f32c(0.0);
                                    let one = e.f32c(1.0);
                                    let nan = e.call(Builtin::IsNan, vec![tn]);
                                    let tc = e.call(Builtin::Clamp, vec![tn, zero, one]);
                                    let tc = e.select(nan, zero, tc);
                                    let den = e.f32c(density);
                                    let sg = e.bin(BinaryOp::Mul, den, tc);
                                    let st = e.f32c(step);
                                    let sg = e.bin(BinaryOp::Mul, sg, st);
                                    let ng = e.emit(InstKind::Unary(UnaryOp::Neg, sg), Type::F32);
                                    let ex = e.call(Builtin::Exp, vec![ng]);
                                    let a = e.bin(BinaryOp::Sub, one, ex);
                                    let acc = e.get(alpha);
                                    let rest = e.bin(BinaryOp::Sub, one, acc);
                                    let w = e.bin(BinaryOp::Mul, rest, a);
                                    for i in 0..3 {
                                        let old = e.get(rgb_l[i]);
                                        let m = e.bin(BinaryOp::Mul, w, rgb[i]);
                                        let nv = e.bin(BinaryOp::Add, old, m);
                                        e.set(rgb_l[i], nv);
                                    }
                                    let acc = e.bin(BinaryOp::Add, acc, w);
                                    e.set(alpha, acc);
                                    let half = e.f32c(0.5);
                                    let dense = e.bin(BinaryOp::Ge, acc, half);
                                    let f = e.get(found);
                                    let nf = e.emit(InstKind::Unary(UnaryOp::Not, f), Type::BOOL);
                                    let first = e.bin(BinaryOp::LogicalAnd, dense, nf);
                                    e.if_(first, |e| {
                                        let tb = e.bitcast(t, Type::U32);
                                        e.set(dep, tb);
                                        let tr =
                                            e.emit(InstKind::Const(Const::bool(true)), Type::BOOL);
                                        e.set(found, tr);
                                    });
                                    let op = e.f32c(OPAQUE);
                                    let done = e.bin(BinaryOp::Ge, acc, op);
                                    e.if_(done, |e| {
                                        e.emit(InstKind::Break, Type::Void);
                                    });
                                }
                                _ => {
                                    let ok = e.finite(v);
                                    let b = e.get(best);
                                    let more = e.bin(BinaryOp::Gt, v, b);
                                    let take = e.bin(BinaryOp::LogicalAnd, ok, more);
                                    e.if_(take, |e| {
                                        e.set(best, v);
                                        let tb = e.bitcast(t, Type::U32);
                                        e.set(dep, tb);
                                        let tr =
                                            e.emit(InstKind::Const(Const::bool(true)), Type::BOOL);
                                        e.set(found, tr);
                                    });
                                }
                            }
                        };
                        let i0 = vec![c[0].0, c[1].0, c[2].0];
                        match block_active(e, s, i0.clone()) {
                            Some(a) => {
                                e.if_(a, sample);
                                let na = e.emit(InstKind::Unary(UnaryOp::Not, a), Type::BOOL);
                                e.if_(na, |e| {
                                    let j = skip_to(e, s, &inv, fr, &i0, (t0, dt, off));
                                    let next = e.call(Builtin::Max, vec![k1, j]);
                                    e.set(kl, next);
                                });
                            }
                            None => sample(e),
                        }
                    });
                });
            });
            match s.mode {
                VolumeMode::Emission { .. } | VolumeMode::Lit(_) => {
                    let acc = e.get(alpha);
                    let one = e.f32c(1.0);
                    let rest = e.bin(BinaryOp::Sub, one, acc);
                    for i in 0..3 {
                        let c = e.get(rgb_l[i]);
                        let m = e.bin(BinaryOp::Mul, rest, bg[i]);
                        let v = e.bin(BinaryOp::Add, c, m);
                        e.set(rgb_l[i], v);
                    }
                }
                _ => {
                    for i in 0..3 {
                        e.set(rgb_l[i], bg[i]);
                    }
                    let f = e.get(found);
                    e.if_(f, |e| {
                        let b = e.get(best);
                        let tn = norm(e, b);
                        let rgb = colormap_rgb(e, s.map, tn);
                        for i in 0..3 {
                            e.set(rgb_l[i], rgb[i]);
                        }
                    });
                }
            }
        }
        &VolumeMode::Slice { axis, position } => {
            let a = axis as usize;
            for i in 0..3 {
                e.set(rgb_l[i], bg[i]);
            }
            let lo_a = s.domain[a];
            let plane = lo_a + position * (s.domain[a + 3] - lo_a);
            let plane_c = e.f32c(plane);
            let pc = e.bin(BinaryOp::Sub, plane_c, fr.eye[a]);
            let t = e.bin(BinaryOp::Mul, pc, inv[a]);
            let front = e.bin(BinaryOp::Gt, t, near);
            let before = e.bin(BinaryOp::Lt, t, t1);
            let mut ok = e.bin(BinaryOp::LogicalAnd, front, before);
            let p = point(&mut e, eye, d, t);
            let others: Vec<usize> = (0..3).filter(|&i| i != a).collect();
            for &b in &others {
                let lo = e.f32c(s.domain[b]);
                let hi = e.f32c(s.domain[b + 3]);
                let ge = e.bin(BinaryOp::Ge, p[b], lo);
                let le = e.bin(BinaryOp::Le, p[b], hi);
                let both = e.bin(BinaryOp::LogicalAnd, ge, le);
                ok = e.bin(BinaryOp::LogicalAnd, ok, both);
            }
            e.if_(ok, |e| {
                let c = corners(e, s, p);
                let paint = |e: &mut Emit| {
                    let v = trilinear(e, s, &c);
                    let tn = norm(e, v);
                    let rgb = colormap_rgb(e, s.map, tn);
                    for i in 0..3 {
                        e.set(rgb_l[i], rgb[i]);
                    }
                };
                let i0 = vec![c[0].0, c[1].0, c[2].0];
                match block_active(e, s, i0) {
                    Some(act) => {
                        for i in 0..3 {
                            let g = e.f32c(INACTIVE_RGB[0][i]);
                            e.set(rgb_l[i], g);
                        }
                        e.if_(act, paint);
                    }
                    None => paint(e),
                }
                let k = e.f32c(1.5);
                let focal = camera::focal(fr);
                let r = e.bin(BinaryOp::Mul, k, t);
                let r = e.bin(BinaryOp::Div, r, focal);
                let mut edge = e.emit(InstKind::Const(Const::bool(false)), Type::BOOL);
                for &b in &others {
                    let lo = e.f32c(s.domain[b]);
                    let hi = e.f32c(s.domain[b + 3]);
                    let dl = e.bin(BinaryOp::Sub, p[b], lo);
                    let dh = e.bin(BinaryOp::Sub, hi, p[b]);
                    let nl = e.bin(BinaryOp::Lt, dl, r);
                    let nh = e.bin(BinaryOp::Lt, dh, r);
                    let n = e.bin(BinaryOp::LogicalOr, nl, nh);
                    edge = e.bin(BinaryOp::LogicalOr, edge, n);
                }
                e.if_(edge, |e| {
                    for i in 0..3 {
                        let o = e.f32c(OUTLINE_RGB[i]);
                        e.set(rgb_l[i], o);
                    }
                });
                let tb = e.bitcast(t, Type::U32);
                e.set(dep, tb);
            });
        }
    }
    let bytes: [InstId; 3] = std::array::from_fn(|i| {
        let c = e.get(rgb_l[i]);
        e.byte(c)
    });
    let opaque = e.u32c(255);
    let word = e.pack([bytes[0], bytes[1], bytes[2], opaque]);
    e.store(s.img, vec![y, x], word);
    let dw = e.get(dep);
    e.store(s.depth, vec![y, x], dw);
    let mut bindings = vec![("field", s.field), ("camera", s.camera)];
    if let Some(k) = s.keys {
        bindings.push(("range", k));
    }
    if let Some(u) = s.under {
        bindings.push(("under_image", u.image));
        bindings.push(("under_depth", u.depth));
    }
    bindings.push(("image", s.img));
    bindings.push(("depth", s.depth));
    e.range_kernel(vec![s.height, s.width], bindings)
}

/// One invocation per block of the outermost sparse level: an active
/// block's 12 edges drawn in `OUTLINE_RGB` over the image.
fn boxes(s: &Spec, level: u32, size: [u32; 3]) -> Kernel {
    let nb: [u32; 3] = std::array::from_fn(|i| s.shape[i].div_ceil(size[i].max(1)));
    let mut e = Emit::new("view", 3);
    let b = e.args(3);
    let first: Vec<InstId> = (0..3)
        .map(|i| {
            let k = e.i32c(size[i] as i32);
            e.bin(BinaryOp::Mul, b[i], k)
        })
        .collect();
    let active = e.emit(
        InstKind::FieldIsActive {
            field: s.field,
            index: first.clone(),
            level: Some(level),
        },
        Type::BOOL,
    );
    let cell = cell_size(&s.domain, s.shape);
    let fr = camera::load(&mut e, s.camera);
    e.if_(active, |e| {
        // World coordinates of the block's low and high faces per axis.
        let faces: [[InstId; 2]; 3] = std::array::from_fn(|i| {
            let k = e.i32c(size[i] as i32);
            let end = e.bin(BinaryOp::Add, first[i], k);
            let n = e.i32c(s.shape[i] as i32);
            let end = e.call(Builtin::Min, vec![end, n]);
            let lo = e.f32c(s.domain[i]);
            let c = e.f32c(cell[i]);
            [first[i], end].map(|j| {
                let f = e.cast(j, Type::F32);
                let m = e.bin(BinaryOp::Mul, f, c);
                e.bin(BinaryOp::Add, lo, m)
            })
        });
        let corners: Vec<[InstId; 3]> = (0..8)
            .map(|k| {
                [
                    faces[0][k & 1],
                    faces[1][(k >> 1) & 1],
                    faces[2][(k >> 2) & 1],
                ]
            })
            .collect();
        let word = OUTLINE_RGB.map(colormap::to_u8);
        let word = word[0] as u32 | (word[1] as u32) << 8 | (word[2] as u32) << 16 | 255 << 24;
        for a in 0..8usize {
            for bit in [1usize, 2, 4] {
                if a & bit != 0 {
                    continue;
                }
                let (ok, p, q) = overlay3d::clipped_edge(e, &fr, corners[a], corners[a | bit]);
                let (px, py, qx, qy) = (p.cx, p.cy, q.cx, q.cy);
                e.if_(ok, |e| {
                    overlay3d::line(e, (px, py), (qx, qy), (s.width, s.height), |e, _, x, y| {
                        let wv = e.u32c(word);
                        e.store(s.img, vec![y, x], wv);
                    });
                });
            }
        }
    });
    e.range_kernel(
        nb.to_vec(),
        vec![("field", s.field), ("camera", s.camera), ("image", s.img)],
    )
}
