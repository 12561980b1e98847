//! `surface` views: the iso-surface of a 3-axis f32 field at `level`,
//! extracted into a triangle buffer and rasterised, in IR.
//!
//! The definition (the reference renderer in `weft-tests` follows it in
//! plain Rust; f32 operations in this order):
//! - Samples: the field `[nx, ny, nz]` (dense or sparse; inactive cells
//!   read as any load reads them) has sample `(i, j, k)` at the world point
//!   `p.a = dmin.a + (f32(i.a) + 0.5) * h.a` per axis `a`, with `h.a =
//!   (dmax.a - dmin.a) / f32(n.a)` (host f32) and `domain = [dmin, dmax]`.
//! - Extraction (marching tetrahedra; one invocation per cell of 2 x 2 x 2
//!   samples, `(nx-1) x (ny-1) x (nz-1)` cells): corner `c` in 0..8 is the
//!   sample `(i + (c & 1), j + (c >> 1 & 1), k + (c >> 2 & 1))`; the cell is
//!   split into the 6 tetrahedra `TETS` around its diagonal 0–7 (the same
//!   split in every cell, so faces match). A tet corner is *above* when
//!   `v > level` (NaN is not above); `code` = the above bits. Its edges
//!   `EDGES` that join an above and a not-above corner carry a vertex:
//!   endpoints ordered by `(dx, dy, dz)` lexicographically (so a shared
//!   edge gives the same bits in every tet and cell), `t = (level - v_lo) /
//!   (v_hi - v_lo)`, `q.a = p_lo.a + t * (p_hi.a - p_lo.a)`. One above (or
//!   one not above) corner `s`: the triangle of the edges from `s` to the
//!   other three in corner order; two above `a < b`, two not `c < d`: the
//!   triangles `(ac, ad, bd)` and `(ac, bd, bc)`.
//! - Buffer: each triangle takes `slot = atomic_add(NODE.triangle_count,
//!   1)` and, when `slot < max_triangles`, writes its vertices to
//!   `NODE.triangles[slot, 0..9]` (f32: x, y, z of each vertex in turn)
//!   and its key `cell * 12 + tet * 2 +
//!   j` (`cell = (i * (ny-1) + j) * (nz-1) + k`) to `NODE.triangle_keys`.
//!   The slots depend on thread order; the keys and the picture do not.
//!   `triangle_count > max_triangles` is an overflow: triangles were
//!   dropped, and the view draws a red border `OVERFLOW_BORDER` pixels wide.
//! - Raster (one invocation per slot below `min(count, max_triangles)`,
//!   three passes, each a launch): the vertices projected (`camera.rs`;
//!   a triangle with a vertex that is not visible is skipped) to `a0, a1,
//!   a2` with depths `d0, d1, d2`; `edge(a, b, p) = (b.x - a.x) * (p.y -
//!   a.y) - (b.y - a.y) * (p.x - a.x)`, `area = edge(a0, a1, a2)` (0:
//!   skipped). Pixel `(x, y)` (centre `p = (f32(x) + 0.5, f32(y) + 0.5)`,
//!   over the clamped bounding box `floor(min)..=ceil(max)` per axis) is
//!   covered when `w0 = edge(a1, a2, p)`, `w1 = edge(a2, a0, p)`, `w2 =
//!   edge(a0, a1, p)` are all `>= 0` or all `<= 0` (edges included both
//!   sides: no cracks). Its depth (perspective-correct) is `area / ((w0 *
//!   r0 + w1 * r1) + w2 * r2)` with `r = 1 / d`, kept when finite and above
//!   0. Passes: `atomic_min(NODE.depth, bits(depth))` (`u32::MAX` start);
//!   where the bits equal, `atomic_min(image, key)`; where the key equals,
//!   `NODE.winner = slot`. The nearest triangle wins, the lowest key among
//!   equally near ones.
//! - Resolve (per pixel): the winner's face normal `n = cross(v1 - v0, v2 -
//!   v0)` (components `e1.y*e2.z - e1.z*e2.y`, ...), turned to face the
//!   camera (negated when the screen `area > 0`: pixel y points down),
//!   lit by a light fixed in world space: `ndl = ((n.x*L.x + n.y*L.y) +
//!   n.z*L.z) * (sign / len)` with `len = sqrt((n.x*n.x + n.y*n.y) +
//!   n.z*n.z)`, 0 when `len` is 0, and a headlight along the camera's
//!   back vector `w`: `ndv` the same with `w` for `L`; `shade = (AMBIENT +
//!   DIFFUSE * max(ndl, 0)) + HEADLIGHT * max(ndv, 0)`; each channel
//!   `byte(color * shade)`, alpha 255. Other pixels: the background's
//!   bytes. Overflow border last (after the ground, `ground.rs`, when the
//!   view has one).

use super::camera::{self, Frame};
use super::*;
use crate::ir::Scene;
use crate::lower::emit::Build;

/// Direction towards the light, world space (from above, front-left at the
/// default camera; unit length within f32 rounding).
pub const LIGHT: [f32; 3] = [-0.303_045_8, 0.808_122_2, 0.505_076_3];
pub const AMBIENT: f32 = 0.2;
pub const DIFFUSE: f32 = 0.6;
/// A headlight along the camera's view (its back vector): the side of the
/// surface the key light misses is not flat ambient.
pub const HEADLIGHT: f32 = 0.3;
/// Width in pixels of the red border drawn when triangles were dropped.
pub const OVERFLOW_BORDER: u32 = 3;
pub const OVERFLOW_RGB: [u8; 3] = [255, 0, 0];
/// The 6 tetrahedra of a cell (corner `c`: `dx = c & 1`, `dy = c >> 1 &
/// 1`, `dz = c >> 2 & 1`).
pub const TETS: [[usize; 4]; 6] = [
    [0, 7, 1, 3],
    [0, 7, 3, 2],
    [0, 7, 2, 6],
    [0, 7, 6, 4],
    [0, 7, 4, 5],
    [0, 7, 5, 1],
];
/// A tetrahedron's edges (tet corner pairs).
pub const EDGES: [(usize, usize); 6] = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)];

/// The lexicographic `(dx, dy, dz)` order key of cube corner `c`.
pub fn corner_key(c: usize) -> usize {
    (c & 1) * 4 + (c >> 1 & 1) * 2 + (c >> 2 & 1)
}

fn edge_of(a: usize, b: usize) -> usize {
    let e = (a.min(b), a.max(b));
    EDGES.iter().position(|&x| x == e).expect("a tet edge")
}

/// The triangles (as `EDGES` indices) of a tet whose above corners are the
/// bits of `code`.
pub fn tet_triangles(code: u32) -> Vec<[usize; 3]> {
    let above: Vec<usize> = (0..4).filter(|&i| code >> i & 1 == 1).collect();
    let below: Vec<usize> = (0..4).filter(|&i| code >> i & 1 == 0).collect();
    match above.len() {
        1 | 3 => {
            let (s, others) = if above.len() == 1 {
                (above[0], below)
            } else {
                (below[0], above)
            };
            vec![[
                edge_of(s, others[0]),
                edge_of(s, others[1]),
                edge_of(s, others[2]),
            ]]
        }
        2 => {
            let (a, b, c, d) = (above[0], above[1], below[0], below[1]);
            vec![
                [edge_of(a, c), edge_of(a, d), edge_of(b, d)],
                [edge_of(a, c), edge_of(b, d), edge_of(b, c)],
            ]
        }
        _ => vec![],
    }
}

struct Spec {
    field: FieldId,
    shape: [u32; 3],
    level: f32,
    max: u32,
    color: [f32; 3],
    background: [f32; 3],
    width: u32,
    height: u32,
    domain: [f32; 6],
    /// The view's camera field (`camera::new_field`).
    camera: FieldId,
    img: FieldId,
    depth: FieldId,
    winner: FieldId,
    tris: FieldId,
    keys: FieldId,
    count: FieldId,
    /// `show_ground`: the overflow border is drawn after the ground.
    ground: bool,
}

/// Whether pixel (x, y) is on the overflow border of an overflowing mesh.
fn overflow_edge(e: &mut Emit, s: &Spec, x: InstId, y: InstId) -> InstId {
    let z = e.i32c(0);
    let count = e.load(s.count, Type::U32, vec![z]);
    let max = e.u32c(s.max);
    let over = e.bin(BinaryOp::Gt, count, max);
    let b = OVERFLOW_BORDER as i32;
    let bc = e.i32c(b);
    let xl = e.bin(BinaryOp::Lt, x, bc);
    let yl = e.bin(BinaryOp::Lt, y, bc);
    let xr = e.i32c(s.width as i32 - b);
    let xh = e.bin(BinaryOp::Ge, x, xr);
    let yr = e.i32c(s.height as i32 - b);
    let yh = e.bin(BinaryOp::Ge, y, yr);
    let edge = e.bin(BinaryOp::LogicalOr, xl, yl);
    let edge = e.bin(BinaryOp::LogicalOr, edge, xh);
    let edge = e.bin(BinaryOp::LogicalOr, edge, yh);
    e.bin(BinaryOp::LogicalAnd, over, edge)
}

/// One invocation per pixel: the overflow border over the ground.
fn border(s: &Spec) -> Kernel {
    let mut e = Emit::new("view", 2);
    let idx = e.args(2);
    let (y, x) = (idx[0], idx[1]);
    let red = overflow_edge(&mut e, s, x, y);
    let [r, g, b] = OVERFLOW_RGB;
    let word = r as u32 | (g as u32) << 8 | (b as u32) << 16 | 255 << 24;
    e.if_(red, |e| {
        let w = e.u32c(word);
        e.store(s.img, vec![y, x], w);
    });
    e.range_kernel(
        vec![s.height, s.width],
        vec![("triangle_count", s.count), ("image", s.img)],
    )
}

/// A field of `ty` and `shape` on a dense root of its own, every
/// component's word `init`.
fn typed_field(program: &mut Program, name: &str, ty: Type, shape: Vec<u32>, init: u32) -> FieldId {
    let l = program.layouts.append(LayoutNode::new(
        name,
        LayoutKind::Dense,
        shape.clone(),
        None,
    ));
    let h = program.fields.append(Field {
        name: name.to_string(),
        ty,
        storage: Storage::Word,
        layout: l,
        shape,
        offset_in_cell: 0,
        init: FieldInit::Constant(vec![init; ty.components()]),
    });
    program.layouts[l].children.push(LayoutChild::Field(h));
    h
}

/// What a surface view draws: the iso-surface of `field`, or, with
/// `mesh`, a mesh node's triangles (`field` is then its tree).
pub(super) struct Source {
    pub field: FieldId,
    /// (points, triangles) of the mesh.
    pub mesh: Option<(FieldId, FieldId)>,
}

#[allow(clippy::too_many_arguments)]
pub(super) fn surface(
    program: &mut Program,
    node_id: &str,
    source: Source,
    level: f32,
    max_triangles: u32,
    color: [f32; 3],
    background: [f32; 3],
    (width, height): (u32, u32),
    scene: &Scene,
) -> Result<ViewKernels, PassError> {
    let pitch = check_size(node_id, width, height)?;
    let fail = |message: String| PassError {
        pass: "views",
        kernel: node_id.to_string(),
        message,
        user: Some(Span::default()),
    };
    let field = source.field;
    let f = &program.fields[field];
    let mesh_triangles = source.mesh.map(|(_, t)| program.fields[t].shape[0]);
    if mesh_triangles.is_none()
        && (f.shape.len() != 3 || f.shape.iter().any(|&n| n < 2) || f.ty != Type::F32)
    {
        return Err(fail(format!(
            "a surface needs a 3-axis f32 field with at least 2 samples per axis; '{}' is {:?} {}",
            f.name, f.shape, f.ty
        )));
    }
    let shape = match mesh_triangles {
        Some(_) => [2, 2, 2],
        None => [f.shape[0], f.shape[1], f.shape[2]],
    };
    let cells: u64 = shape.iter().map(|&n| n as u64 - 1).product();
    if cells * 12 >= u32::MAX as u64 {
        return Err(fail(format!(
            "a surface extracts from at most {} cells; '{}' has {}",
            u32::MAX / 12,
            f.name,
            cells
        )));
    }
    if max_triangles == 0 {
        return Err(fail("max_triangles must be at least 1".to_string()));
    }
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
    let winner = new_field(
        program,
        &format!("{}.winner", node_id),
        vec![height, width],
        u32::MAX,
    );
    let tris = typed_field(
        program,
        &format!("{}.triangles", node_id),
        Type::F32,
        vec![max_triangles, 9],
        0,
    );
    let keys = new_field(
        program,
        &format!("{}.triangle_keys", node_id),
        vec![max_triangles],
        0,
    );
    let count = new_field(program, &format!("{}.triangle_count", node_id), vec![1], 0);
    let cam = camera::new_field(program, node_id, &camera::frame(scene, width, height));
    let s = Spec {
        field,
        shape,
        level,
        max: max_triangles,
        color,
        background,
        width,
        height,
        domain: scene.domain,
        camera: cam,
        img,
        depth,
        winner,
        tris,
        keys,
        count,
        ground: scene.show_ground,
    };
    let mut launches = vec![
        add(program, node_id, reset_count(&s)),
        add(program, node_id, fill(img, height, pitch)),
        add(program, node_id, fill(depth, height, width)),
        add(program, node_id, fill(winner, height, width)),
        add(
            program,
            node_id,
            match (source.mesh, mesh_triangles) {
                (Some(m), Some(n)) => gather(&s, m, n),
                _ => extract(&s),
            },
        ),
        add(program, node_id, raster(&s, Pass::Depth)),
        add(program, node_id, raster(&s, Pass::Key)),
        add(program, node_id, raster(&s, Pass::Slot)),
        add(program, node_id, resolve(&s)),
    ];
    let mut scratch = vec![depth, winner, tris, keys, count, cam];
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
        let shadows = |t: &ground::Target| {
            ground::surface_shadows(t, tris, count, max_triangles, &scene.domain)
        };
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
        launches.push(add(program, node_id, border(&s)));
    }
    Ok(ViewKernels {
        node_id: node_id.to_string(),
        image: img,
        width,
        height,
        pitch,
        scratch,
        launches,
        depth: Some(depth),
    })
}

fn reset_count(s: &Spec) -> Kernel {
    let mut e = Emit::new("view", 1);
    let i = e.args(1);
    let z = e.u32c(0);
    e.store(s.count, i, z);
    e.range_kernel(vec![1], vec![("triangle_count", s.count)])
}

/// One invocation per word: `u32::MAX`.
fn fill(f: FieldId, h: u32, w: u32) -> Kernel {
    let mut e = Emit::new("view", 2);
    let idx = e.args(2);
    let v = e.u32c(u32::MAX);
    e.store(f, idx, v);
    e.range_kernel(vec![h, w], vec![("image", f)])
}

/// One invocation per triangle of a mesh: its vertices into slot `t` of
/// the buffer (key `t`), when `t < max_triangles`; invocation 0 sets the
/// count to the mesh's triangle count (above the capacity: the overflow
/// border shows it).
fn gather(s: &Spec, (points, triangles): (FieldId, FieldId), n: u32) -> Kernel {
    let mut e = Emit::new("view", 1);
    let idx = e.args(1);
    let t = idx[0];
    let zero = e.i32c(0);
    let first = e.bin(BinaryOp::Eq, t, zero);
    e.if_(first, |e| {
        let total = e.u32c(n);
        let z = e.i32c(0);
        e.store(s.count, vec![z], total);
    });
    let max = e.i32c(s.max as i32);
    let fits = e.bin(BinaryOp::Lt, t, max);
    e.if_(fits, |e| {
        let tri = e.load(triangles, Type::Vector(Scalar::I32, 3), vec![t]);
        for v in 0..3 {
            let vi = e.extract(tri, v as u32);
            let p = e.load(points, Type::Vector(Scalar::F32, 3), vec![vi]);
            for c in 0..3 {
                let x = e.extract(p, c as u32);
                let k = e.i32c(3 * v + c);
                e.store(s.tris, vec![t, k], x);
            }
        }
        let key = e.cast(t, Type::U32);
        e.store(s.keys, vec![t], key);
    });
    e.range_kernel(
        vec![n],
        vec![
            ("points", points),
            ("triangles_in", triangles),
            ("triangles", s.tris),
            ("triangle_keys", s.keys),
            ("triangle_count", s.count),
        ],
    )
}

/// One invocation per cell: its tets' triangles into the buffer.
fn extract(s: &Spec) -> Kernel {
    let mut e = Emit::new("view", 3);
    let idx = e.args(3);
    let h: [f32; 3] = std::array::from_fn(|a| (s.domain[a + 3] - s.domain[a]) / s.shape[a] as f32);
    let mut vals = Vec::new();
    let mut pos = Vec::new();
    for c in 0..8usize {
        let ci: Vec<InstId> = (0..3)
            .map(|a| {
                let d = e.i32c((c >> a & 1) as i32);
                e.bin(BinaryOp::Add, idx[a], d)
            })
            .collect();
        vals.push(e.load(s.field, Type::F32, ci.clone()));
        let p: [InstId; 3] = std::array::from_fn(|a| {
            let f = e.cast(ci[a], Type::F32);
            let half = e.f32c(0.5);
            let f = e.bin(BinaryOp::Add, f, half);
            let ha = e.f32c(h[a]);
            let f = e.bin(BinaryOp::Mul, f, ha);
            let lo = e.f32c(s.domain[a]);
            e.bin(BinaryOp::Add, lo, f)
        });
        pos.push(p);
    }
    let level = e.f32c(s.level);
    // cell = (i * (ny-1) + j) * (nz-1) + k, as u32.
    let iu: Vec<InstId> = idx.iter().map(|&i| e.cast(i, Type::U32)).collect();
    let ny = e.u32c(s.shape[1] - 1);
    let nz = e.u32c(s.shape[2] - 1);
    let cell = e.bin(BinaryOp::Mul, iu[0], ny);
    let cell = e.bin(BinaryOp::Add, cell, iu[1]);
    let cell = e.bin(BinaryOp::Mul, cell, nz);
    let cell = e.bin(BinaryOp::Add, cell, iu[2]);
    let twelve = e.u32c(12);
    let base = e.bin(BinaryOp::Mul, cell, twelve);
    for (t, tet) in TETS.iter().enumerate() {
        let mut code = e.u32c(0);
        for (i, &c) in tet.iter().enumerate() {
            let above = e.bin(BinaryOp::Gt, vals[c], level);
            let bit = e.u32c(1 << i);
            let zero = e.u32c(0);
            let b = e.select(above, bit, zero);
            code = e.bin(BinaryOp::BitOr, code, b);
        }
        // Every edge's crossing point (only the crossing ones are used).
        let points: Vec<[InstId; 3]> = EDGES
            .iter()
            .map(|&(a, b)| {
                let (lo, hi) = if corner_key(tet[a]) < corner_key(tet[b]) {
                    (tet[a], tet[b])
                } else {
                    (tet[b], tet[a])
                };
                let num = e.bin(BinaryOp::Sub, level, vals[lo]);
                let den = e.bin(BinaryOp::Sub, vals[hi], vals[lo]);
                let tt = e.bin(BinaryOp::Div, num, den);
                std::array::from_fn(|k| {
                    let d = e.bin(BinaryOp::Sub, pos[hi][k], pos[lo][k]);
                    let m = e.bin(BinaryOp::Mul, tt, d);
                    e.bin(BinaryOp::Add, pos[lo][k], m)
                })
            })
            .collect();
        for c in 1..15u32 {
            let cc = e.u32c(c);
            let is = e.bin(BinaryOp::Eq, code, cc);
            e.if_(is, |e| {
                for (j, tri) in tet_triangles(c).iter().enumerate() {
                    let one = e.u32c(1);
                    let z = e.i32c(0);
                    let slot = e.emit(
                        InstKind::FieldAtomic {
                            op: AtomicOp::Add,
                            field: s.count,
                            index: vec![z],
                            value: one,
                            cmp: None,
                        },
                        Type::U32,
                    );
                    let max = e.u32c(s.max);
                    let fits = e.bin(BinaryOp::Lt, slot, max);
                    e.if_(fits, |e| {
                        // `min` though `slot < max` here: lavapipe faulted
                        // on the bounds check of the bare atomic result.
                        let last = e.u32c(s.max - 1);
                        let si = e.call(Builtin::Min, vec![slot, last]);
                        let si = e.cast(si, Type::I32);
                        for (v, &edge) in tri.iter().enumerate() {
                            for (c, &x) in points[edge].iter().enumerate() {
                                let vi = e.i32c(3 * v as i32 + c as i32);
                                e.store(s.tris, vec![si, vi], x);
                            }
                        }
                        let local = e.u32c((t * 2 + j) as u32);
                        let key = e.bin(BinaryOp::Add, base, local);
                        e.store(s.keys, vec![si], key);
                    });
                }
            });
        }
    }
    e.range_kernel(
        s.shape.map(|n| n - 1).to_vec(),
        vec![
            ("field", s.field),
            ("triangles", s.tris),
            ("triangle_keys", s.keys),
            ("triangle_count", s.count),
        ],
    )
}

#[derive(Clone, Copy, PartialEq)]
enum Pass {
    Depth,
    Key,
    Slot,
}

/// `(b.x - a.x) * (p.y - a.y) - (b.y - a.y) * (p.x - a.x)`.
pub(super) fn edge(
    e: &mut Emit,
    a: (InstId, InstId),
    b: (InstId, InstId),
    p: (InstId, InstId),
) -> InstId {
    let bx = e.bin(BinaryOp::Sub, b.0, a.0);
    let py = e.bin(BinaryOp::Sub, p.1, a.1);
    let by = e.bin(BinaryOp::Sub, b.1, a.1);
    let px = e.bin(BinaryOp::Sub, p.0, a.0);
    let l = e.bin(BinaryOp::Mul, bx, py);
    let r = e.bin(BinaryOp::Mul, by, px);
    e.bin(BinaryOp::Sub, l, r)
}

/// The clamped pixel span `floor(min)..=ceil(max)` of three screen
/// coordinates on an axis of `n` pixels (the start past the end when the
/// triangle misses the image on that axis).
pub(super) fn span(e: &mut Emit, c: [InstId; 3], n: u32) -> (InstId, InstId) {
    let lo = e.call(Builtin::Min, vec![c[0], c[1]]);
    let lo = e.call(Builtin::Min, vec![lo, c[2]]);
    let hi = e.call(Builtin::Max, vec![c[0], c[1]]);
    let hi = e.call(Builtin::Max, vec![hi, c[2]]);
    let lo = e.call(Builtin::Floor, vec![lo]);
    let zero = e.f32c(0.0);
    let nf = e.f32c(n as f32);
    let lo = e.call(Builtin::Clamp, vec![lo, zero, nf]);
    let hi = e.call(Builtin::Ceil, vec![hi]);
    let m1 = e.f32c(-1.0);
    let last = e.f32c(n as f32 - 1.0);
    let hi = e.call(Builtin::Clamp, vec![hi, m1, last]);
    (e.cast(lo, Type::I32), e.cast(hi, Type::I32))
}

/// Whether pixel (x, y)'s centre is inside or on the edges of the screen
/// triangle `a` (the three edge functions all `>= 0` or all `<= 0`), and
/// the edge functions.
pub(super) fn covers(
    e: &mut Emit,
    a: &[(InstId, InstId)],
    x: InstId,
    y: InstId,
) -> (InstId, [InstId; 3]) {
    let half = e.f32c(0.5);
    let px = e.cast(x, Type::F32);
    let px = e.bin(BinaryOp::Add, px, half);
    let py = e.cast(y, Type::F32);
    let py = e.bin(BinaryOp::Add, py, half);
    let p = (px, py);
    let w = [
        edge(e, a[1], a[2], p),
        edge(e, a[2], a[0], p),
        edge(e, a[0], a[1], p),
    ];
    let zero = e.f32c(0.0);
    let mut pos = e.bin(BinaryOp::Ge, w[0], zero);
    let mut neg = e.bin(BinaryOp::Le, w[0], zero);
    for &wi in &w[1..] {
        let g = e.bin(BinaryOp::Ge, wi, zero);
        pos = e.bin(BinaryOp::LogicalAnd, pos, g);
        let l = e.bin(BinaryOp::Le, wi, zero);
        neg = e.bin(BinaryOp::LogicalAnd, neg, l);
    }
    (e.bin(BinaryOp::LogicalOr, pos, neg), w)
}

/// Triangle `slot`'s vertices (three f32 each).
fn vertices(e: &mut Emit, s: &Spec, slot: InstId) -> [[InstId; 3]; 3] {
    std::array::from_fn(|v| {
        std::array::from_fn(|c| {
            let vi = e.i32c(3 * v as i32 + c as i32);
            e.load(s.tris, Type::F32, vec![slot, vi])
        })
    })
}

/// The projections of a triangle's vertices, whether all are visible, and
/// its screen `area`.
fn project_tri(
    e: &mut Emit,
    fr: &Frame<InstId>,
    v: &[[InstId; 3]; 3],
) -> (Vec<camera::Projected>, InstId, InstId) {
    let pr: Vec<camera::Projected> = v.iter().map(|&p| camera::project(e, fr, p)).collect();
    let ok = e.bin(BinaryOp::LogicalAnd, pr[0].ok, pr[1].ok);
    let ok = e.bin(BinaryOp::LogicalAnd, ok, pr[2].ok);
    let a: Vec<(InstId, InstId)> = pr.iter().map(|p| (p.cx, p.cy)).collect();
    let area = edge(e, a[0], a[1], a[2]);
    (pr, ok, area)
}

/// One invocation per slot over its triangle's bounding box.
fn raster(s: &Spec, pass: Pass) -> Kernel {
    let mut e = Emit::new("view", 1);
    let k = e.args(1)[0];
    let fr = camera::load(&mut e, s.camera);
    let z = e.i32c(0);
    let count = e.load(s.count, Type::U32, vec![z]);
    let max = e.u32c(s.max);
    let n = e.call(Builtin::Min, vec![count, max]);
    let ku = e.cast(k, Type::U32);
    let live = e.bin(BinaryOp::Lt, ku, n);
    e.if_(live, |e| {
        let v = vertices(e, s, k);
        let (pr, ok, area) = project_tri(e, &fr, &v);
        let zero = e.f32c(0.0);
        let nonzero = e.bin(BinaryOp::Ne, area, zero);
        let ok = e.bin(BinaryOp::LogicalAnd, ok, nonzero);
        e.if_(ok, |e| {
            let a: Vec<(InstId, InstId)> = pr.iter().map(|p| (p.cx, p.cy)).collect();
            let one = e.f32c(1.0);
            let r: Vec<InstId> = pr
                .iter()
                .map(|p| e.bin(BinaryOp::Div, one, p.depth))
                .collect();
            let (x0, x1) = span(e, [a[0].0, a[1].0, a[2].0], s.width);
            let (y0, y1) = span(e, [a[0].1, a[1].1, a[2].1], s.height);
            let key = if pass == Pass::Depth {
                None
            } else {
                Some(e.load(s.keys, Type::U32, vec![k]))
            };
            // Off-image boxes are skipped before the loops (an inclusive
            // loop whose start is past its end by more than one runs away
            // on wgpu).
            let xs = e.bin(BinaryOp::Le, x0, x1);
            let ys = e.bin(BinaryOp::Le, y0, y1);
            let on = e.bin(BinaryOp::LogicalAnd, xs, ys);
            e.if_(on, |e| {
                e.range_incl(y0, y1, |e, y| {
                    e.range_incl(x0, x1, |e, x| {
                        let (covers, w) = covers(e, &a, x, y);
                        e.if_(covers, |e| {
                            let t0 = e.bin(BinaryOp::Mul, w[0], r[0]);
                            let t1 = e.bin(BinaryOp::Mul, w[1], r[1]);
                            let t2 = e.bin(BinaryOp::Mul, w[2], r[2]);
                            let sum = e.bin(BinaryOp::Add, t0, t1);
                            let sum = e.bin(BinaryOp::Add, sum, t2);
                            let d = e.bin(BinaryOp::Div, area, sum);
                            let fin = e.finite(d);
                            let zero = e.f32c(0.0);
                            let pos = e.bin(BinaryOp::Gt, d, zero);
                            let good = e.bin(BinaryOp::LogicalAnd, fin, pos);
                            e.if_(good, |e| {
                                let bits = e.bitcast(d, Type::U32);
                                match (pass, key) {
                                    (Pass::Depth, _) => {
                                        e.atomic(AtomicOp::Min, s.depth, vec![y, x], bits)
                                    }
                                    (Pass::Key, Some(key)) => {
                                        let near = e.load(s.depth, Type::U32, vec![y, x]);
                                        let mine = e.bin(BinaryOp::Eq, near, bits);
                                        e.if_(mine, |e| {
                                            e.atomic(AtomicOp::Min, s.img, vec![y, x], key)
                                        });
                                    }
                                    (_, Some(key)) => {
                                        let best = e.load(s.img, Type::U32, vec![y, x]);
                                        let mine = e.bin(BinaryOp::Eq, best, key);
                                        e.if_(mine, |e| e.store(s.winner, vec![y, x], ku));
                                    }
                                    _ => unreachable!("a key outside the depth pass"),
                                }
                            });
                        });
                    });
                })
            });
        });
    });
    e.range_kernel(
        vec![s.max],
        vec![
            ("camera", s.camera),
            ("triangles", s.tris),
            ("triangle_keys", s.keys),
            ("triangle_count", s.count),
            ("image", s.img),
            ("depth", s.depth),
            ("winner", s.winner),
        ],
    )
}

/// One invocation per pixel: its winner shaded, or the background; the
/// overflow border.
fn resolve(s: &Spec) -> Kernel {
    let mut e = Emit::new("view", 2);
    let idx = e.args(2);
    let (y, x) = (idx[0], idx[1]);
    let fr = camera::load(&mut e, s.camera);
    let word_of = |c: [u8; 3]| c[0] as u32 | (c[1] as u32) << 8 | (c[2] as u32) << 16 | 255 << 24;
    let bg = s.background.map(colormap::to_u8);
    let init = e.u32c(word_of(bg));
    let out = e.local("word", Type::U32, init);
    let winner = e.load(s.winner, Type::U32, vec![y, x]);
    let none = e.u32c(u32::MAX);
    let some = e.bin(BinaryOp::Ne, winner, none);
    e.if_(some, |e| {
        let k = e.cast(winner, Type::I32);
        let v = vertices(e, s, k);
        let (_, _, area) = project_tri(e, &fr, &v);
        let e1: [InstId; 3] = std::array::from_fn(|i| e.bin(BinaryOp::Sub, v[1][i], v[0][i]));
        let e2: [InstId; 3] = std::array::from_fn(|i| e.bin(BinaryOp::Sub, v[2][i], v[0][i]));
        let n: [InstId; 3] = std::array::from_fn(|i| {
            let (a, b) = ((i + 1) % 3, (i + 2) % 3);
            let l = e.bin(BinaryOp::Mul, e1[a], e2[b]);
            let r = e.bin(BinaryOp::Mul, e1[b], e2[a]);
            e.bin(BinaryOp::Sub, l, r)
        });
        let sq: [InstId; 3] = std::array::from_fn(|i| e.bin(BinaryOp::Mul, n[i], n[i]));
        let len = e.bin(BinaryOp::Add, sq[0], sq[1]);
        let len = e.bin(BinaryOp::Add, len, sq[2]);
        let len = e.call(Builtin::Sqrt, vec![len]);
        let zero = e.f32c(0.0);
        let back = e.bin(BinaryOp::Gt, area, zero);
        let m1 = e.f32c(-1.0);
        let p1 = e.f32c(1.0);
        let sign = e.select(back, m1, p1);
        let scale = e.bin(BinaryOp::Div, sign, len);
        let terms: [InstId; 3] = std::array::from_fn(|i| {
            let l = e.f32c(LIGHT[i]);
            e.bin(BinaryOp::Mul, n[i], l)
        });
        let ndl = e.bin(BinaryOp::Add, terms[0], terms[1]);
        let ndl = e.bin(BinaryOp::Add, ndl, terms[2]);
        let ndl = e.bin(BinaryOp::Mul, ndl, scale);
        let has = e.bin(BinaryOp::Gt, len, zero);
        let ndl = e.select(has, ndl, zero);
        let ndl = e.call(Builtin::Max, vec![ndl, zero]);
        let dif = e.f32c(DIFFUSE);
        let amb = e.f32c(AMBIENT);
        let lit = e.bin(BinaryOp::Mul, dif, ndl);
        let shade = e.bin(BinaryOp::Add, amb, lit);
        let hterms: [InstId; 3] = std::array::from_fn(|i| e.bin(BinaryOp::Mul, n[i], fr.back[i]));
        let ndv = e.bin(BinaryOp::Add, hterms[0], hterms[1]);
        let ndv = e.bin(BinaryOp::Add, ndv, hterms[2]);
        let ndv = e.bin(BinaryOp::Mul, ndv, scale);
        let ndv = e.select(has, ndv, zero);
        let ndv = e.call(Builtin::Max, vec![ndv, zero]);
        let head = e.f32c(HEADLIGHT);
        let hl = e.bin(BinaryOp::Mul, head, ndv);
        let shade = e.bin(BinaryOp::Add, shade, hl);
        let bytes: [InstId; 3] = std::array::from_fn(|i| {
            let c = e.f32c(s.color[i]);
            let c = e.bin(BinaryOp::Mul, c, shade);
            e.byte(c)
        });
        let opaque = e.u32c(255);
        let word = e.pack([bytes[0], bytes[1], bytes[2], opaque]);
        e.set(out, word);
    });
    // The overflow border (after the ground, when there is one).
    if !s.ground {
        let red = overflow_edge(&mut e, s, x, y);
        e.if_(red, |e| {
            let w = e.u32c(word_of(OVERFLOW_RGB));
            e.set(out, w);
        });
    }
    let word = e.get(out);
    e.store(s.img, vec![y, x], word);
    e.range_kernel(
        vec![s.height, s.width],
        vec![
            ("camera", s.camera),
            ("triangles", s.tris),
            ("triangle_count", s.count),
            ("winner", s.winner),
            ("image", s.img),
        ],
    )
}
