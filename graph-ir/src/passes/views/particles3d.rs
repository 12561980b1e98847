//! `particles` views of vec3 positions: lit round splats, the nearest
//! particle per pixel, in IR.
//!
//! The definition (the reference renderer in `weft-tests` follows it in
//! plain Rust; f32 operations in this order):
//! - Each particle with a visible projection (`camera.rs`: finite, in
//!   front of the near plane) at `(cx, cy)` and `depth` is a disc of
//!   `radius` pixels on screen (`r`; the same size at every depth). It is
//!   skipped when its disc lies wholly outside the image (`cx <= -(r + 1)`
//!   or `cx >= W + r + 1`, the same for `cy` with `H`).
//! - It covers pixel (x, y) when `dd <= r*r` with `dx = (f32(x) + 0.5) -
//!   cx`, `dy = cy - (f32(y) + 0.5)` (y up) and `dd = dx*dx + dy*dy`,
//!   visiting the pixels `max(floor(c - (r + 1)), 0) ..= min(ceil(c + (r +
//!   1)), N - 1)` per axis.
//! - Depth rule (32-bit atomics only, each pass a launch of its own): a
//!   particle is a sphere of world radius `rw = (radius * depth) / fp`
//!   (`fp` the focal length); at a covered pixel its surface lies at `z =
//!   max(depth - rw * nz, near)` with `nz = sqrt(max(1 - dd * ir2, 0))`
//!   (`ir2` below). `VIEW.depth` (u32 per pixel) starts at `u32::MAX` and
//!   takes the `atomic_min` of the bits of `z` (a positive f32, whose bits
//!   order like its value) over every covered pixel; then every particle
//!   whose `z` bits at the pixel equal the pixel's takes
//!   `atomic_min(image, index)` (the image starts at `u32::MAX`): the
//!   nearest surface wins (spheres that overlap cut each other where they
//!   meet), the lowest index among equally near ones, whatever order
//!   threads run in.
//! - Shading (per pixel, of its winner): the splat is a sphere facing the
//!   camera, normal `n = (dx * ir, dy * ir, sqrt(max(1 - dd * ir2, 0)))`
//!   in camera space (x right, y up, z towards the viewer) with `ir =
//!   f32(1 / r)`, `ir2 = f32(1 / r²)`; one directional light towards
//!   `LIGHT` (upper left, in front) and ambient: `shade = AMBIENT +
//!   DIFFUSE * max((n.x*L.x + n.y*L.y) + n.z*L.z, 0)`; each channel
//!   `byte(colour * shade)` (clamp to 0..1, times 255 plus 0.5, truncate),
//!   alpha 255. The colour: the `color` field's vec3, or its u32
//!   `0xRRGGBB` (each byte / 255), or the `color` param. Pixels no
//!   particle covers: the background's bytes.

use super::camera::{self, Frame};
use super::*;
use crate::ir::Scene;
use crate::lower::emit::Build;

/// Direction towards the light in camera space (unit length).
pub const LIGHT: [f32; 3] = [-0.4, 0.6, 0.692_820_3];
pub const AMBIENT: f32 = 0.25;
pub const DIFFUSE: f32 = 0.75;

struct Spec {
    positions: FieldId,
    color_field: Option<(FieldId, Type)>,
    color: [f32; 3],
    background: [f32; 3],
    radius: f32,
    width: u32,
    height: u32,
    /// The view's camera field (`camera::new_field`).
    camera: FieldId,
    img: FieldId,
    depth: FieldId,
}

#[allow(clippy::too_many_arguments)]
pub(super) fn particles3d(
    program: &mut Program,
    node_id: &str,
    positions: FieldId,
    color_field: Option<FieldId>,
    color: [f32; 3],
    background: [f32; 3],
    radius: f32,
    (width, height): (u32, u32),
    scene: &Scene,
) -> Result<ViewKernels, PassError> {
    let pitch = check_size(node_id, width, height)?;
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
    let frame: Frame = camera::frame(scene, width, height);
    let cam = camera::new_field(program, node_id, &frame);
    let s = Spec {
        positions,
        color_field: color_field.map(|c| (c, program.fields[c].ty)),
        color,
        background,
        radius,
        width,
        height,
        camera: cam,
        img,
        depth,
    };
    let n = program.fields[positions].shape[0];
    let mut launches = vec![
        add(program, node_id, fill(img, height, pitch)),
        add(program, node_id, fill(depth, height, width)),
        add(program, node_id, splat(&s, n, false)),
        add(program, node_id, splat(&s, n, true)),
        add(program, node_id, resolve(&s)),
    ];
    let mut scratch = vec![depth, cam];
    if scene.show_ground {
        let t = ground::Target {
            image: img,
            depth,
            camera: cam,
            shadow: None,
            width,
            height,
            background,
        };
        let shadows =
            |t: &ground::Target| ground::particle_shadows(t, positions, n, radius, &scene.domain);
        let (launches, scratch) = (&mut launches, &mut scratch);
        ground::append_shadowed(
            program,
            node_id,
            t,
            &scene.domain,
            shadows,
            launches,
            scratch,
        );
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

/// One invocation per word: `u32::MAX`.
fn fill(f: FieldId, h: u32, w: u32) -> Kernel {
    let mut e = Emit::new("view", 2);
    let idx = e.args(2);
    let v = e.u32c(u32::MAX);
    e.store(f, idx, v);
    e.range_kernel(vec![h, w], vec![("image", f)])
}

/// Particle `k`'s projection, and whether its disc can touch the image.
fn project(e: &mut Emit, s: &Spec, fr: &Frame<InstId>, k: InstId) -> camera::Projected {
    let p = e.load(s.positions, Type::Vector(Scalar::F32, 3), vec![k]);
    let c: [InstId; 3] = std::array::from_fn(|i| e.extract(p, i as u32));
    let mut pr = camera::project(e, fr, c);
    let reach = s.radius + 1.0;
    for (c, n) in [(pr.cx, s.width), (pr.cy, s.height)] {
        let lo = e.f32c(-reach);
        let hi = e.f32c(n as f32 + reach);
        let a = e.bin(BinaryOp::Gt, c, lo);
        let b = e.bin(BinaryOp::Lt, c, hi);
        let ab = e.bin(BinaryOp::LogicalAnd, a, b);
        pr.ok = e.bin(BinaryOp::LogicalAnd, pr.ok, ab);
    }
    pr
}

/// `(dx, dy, dd)` of pixel (x, y) from a disc centred at (cx, cy).
fn offset(e: &mut Emit, cx: InstId, cy: InstId, x: InstId, y: InstId) -> [InstId; 3] {
    let half = e.f32c(0.5);
    let fx = e.cast(x, Type::F32);
    let fx = e.bin(BinaryOp::Add, fx, half);
    let dx = e.bin(BinaryOp::Sub, fx, cx);
    let fy = e.cast(y, Type::F32);
    let fy = e.bin(BinaryOp::Add, fy, half);
    let dy = e.bin(BinaryOp::Sub, cy, fy);
    let xx = e.bin(BinaryOp::Mul, dx, dx);
    let yy = e.bin(BinaryOp::Mul, dy, dy);
    let dd = e.bin(BinaryOp::Add, xx, yy);
    [dx, dy, dd]
}

/// `sqrt(max(1 - dd * ir2, 0))`: the camera-facing component of the
/// sphere's unit normal at squared pixel distance `dd` from its centre.
fn sphere_nz(e: &mut Emit, radius: f32, dd: InstId) -> InstId {
    let ir2 = e.f32c((1.0 / (radius as f64 * radius as f64)) as f32);
    let one = e.f32c(1.0);
    let t = e.bin(BinaryOp::Mul, dd, ir2);
    let t = e.bin(BinaryOp::Sub, one, t);
    let zero = e.f32c(0.0);
    let t = e.call(Builtin::Max, vec![t, zero]);
    e.call(Builtin::Sqrt, vec![t])
}

/// One invocation per particle over its disc's pixels: the depth pass
/// (`atomic_min(depth, bits(depth))`), or with `index` the index pass
/// (`atomic_min(image, k)` where the pixel's depth is this particle's).
fn splat(s: &Spec, n: u32, index: bool) -> Kernel {
    let mut e = Emit::new("view", 1);
    let k = e.args(1)[0];
    let fr = camera::load(&mut e, s.camera);
    let pr = project(&mut e, s, &fr, k);
    e.if_(pr.ok, |e| {
        let reach = s.radius + 1.0;
        let (x0, x1) = footprint(e, pr.cx, reach, s.width);
        let (y0, y1) = footprint(e, pr.cy, reach, s.height);
        let ku = e.cast(k, Type::U32);
        // The sphere's world radius: `radius` pixels at its depth.
        let rc = e.f32c(s.radius);
        let rw = e.bin(BinaryOp::Mul, rc, pr.depth);
        let rw = e.bin(BinaryOp::Div, rw, fr.focal);
        e.range_incl(y0, y1, |e, y| {
            e.range_incl(x0, x1, |e, x| {
                let [_, _, dd] = offset(e, pr.cx, pr.cy, x, y);
                let r2 = e.f32c(s.radius * s.radius);
                let covers = e.bin(BinaryOp::Le, dd, r2);
                // The depth of the sphere's surface at this pixel (so
                // touching spheres cut each other where they meet).
                let nz = sphere_nz(e, s.radius, dd);
                let dz = e.bin(BinaryOp::Mul, rw, nz);
                let z = e.bin(BinaryOp::Sub, pr.depth, dz);
                let z = e.call(Builtin::Max, vec![z, fr.near]);
                let key = e.bitcast(z, Type::U32);
                if index {
                    e.if_(covers, |e| {
                        let near = e.load(s.depth, Type::U32, vec![y, x]);
                        let mine = e.bin(BinaryOp::Eq, near, key);
                        e.if_(mine, |e| e.atomic(AtomicOp::Min, s.img, vec![y, x], ku));
                    });
                } else {
                    e.if_(covers, |e| {
                        e.atomic(AtomicOp::Min, s.depth, vec![y, x], key)
                    });
                }
            });
        });
    });
    e.range_kernel(
        vec![n],
        vec![
            ("positions", s.positions),
            ("image", s.img),
            ("depth", s.depth),
            ("camera", s.camera),
        ],
    )
}

/// One invocation per pixel: its winner shaded, or the background.
fn resolve(s: &Spec) -> Kernel {
    let mut e = Emit::new("view", 2);
    let idx = e.args(2);
    let (y, x) = (idx[0], idx[1]);
    let fr = camera::load(&mut e, s.camera);
    let bg = s.background.map(colormap::to_u8);
    let bg_word = bg[0] as u32 | (bg[1] as u32) << 8 | (bg[2] as u32) << 16 | 255 << 24;
    let init = e.u32c(bg_word);
    let out = e.local("word", Type::U32, init);
    let winner = e.load(s.img, Type::U32, vec![y, x]);
    let none = e.u32c(u32::MAX);
    let some = e.bin(BinaryOp::Ne, winner, none);
    e.if_(some, |e| {
        let k = e.cast(winner, Type::I32);
        let pr = project(e, s, &fr, k);
        let [dx, dy, dd] = offset(e, pr.cx, pr.cy, x, y);
        let ir = e.f32c((1.0 / s.radius as f64) as f32);
        let nx = e.bin(BinaryOp::Mul, dx, ir);
        let ny = e.bin(BinaryOp::Mul, dy, ir);
        let zero = e.f32c(0.0);
        let nz = sphere_nz(e, s.radius, dd);
        let terms: [InstId; 3] = std::array::from_fn(|i| {
            let l = e.f32c(LIGHT[i]);
            e.bin(BinaryOp::Mul, [nx, ny, nz][i], l)
        });
        let ndl = e.bin(BinaryOp::Add, terms[0], terms[1]);
        let ndl = e.bin(BinaryOp::Add, ndl, terms[2]);
        let ndl = e.call(Builtin::Max, vec![ndl, zero]);
        let dif = e.f32c(DIFFUSE);
        let amb = e.f32c(AMBIENT);
        let lit = e.bin(BinaryOp::Mul, dif, ndl);
        let shade = e.bin(BinaryOp::Add, amb, lit);
        let rgb = super::particle_rgb(e, s.color_field, s.color, k);
        let bytes: [InstId; 3] = std::array::from_fn(|i| {
            let c = e.bin(BinaryOp::Mul, rgb[i], shade);
            e.byte(c)
        });
        let opaque = e.u32c(255);
        let word = e.pack([bytes[0], bytes[1], bytes[2], opaque]);
        e.set(out, word);
    });
    let word = e.get(out);
    e.store(s.img, vec![y, x], word);
    let mut bindings = vec![("positions", s.positions)];
    if let Some((c, _)) = s.color_field {
        bindings.push(("color", c));
    }
    bindings.push(("image", s.img));
    bindings.push(("camera", s.camera));
    e.range_kernel(vec![s.height, s.width], bindings)
}
