//! Views become system kernels: every backend draws them like any other
//! kernel, from the same IR.
//!
//! Pre: abstract IR (field access is still `FieldLoad` / `FieldAtomic` /
//! `FieldIsActive` on logical indices, so `lower_access` later emits the
//! viewed field's own address plan: dense, pointer, bitmasked, hash,
//! dynamic, quantized and bit-packed fields need nothing here) with
//! computed layouts; `program.view_kernels` empty. Post: per view one
//! `ViewKernels` entry (same order as `program.views`): a u32 image field
//! `[height, pitch]` on a dense root of its own (one RGBA8 word per pixel,
//! red in the low byte, top row first, `pitch` = width rounded up to 64),
//! helper fields, and the kernels of one render in launch order, all named
//! after the view node so errors name it. The schedule is unchanged: the
//! runtime launches `launches` when it renders, never in a frame.
//!
//! Every view is a sequence of whole-image passes over an image field —
//! clear, reduce (into a small field with integer atomics), splat (one
//! invocation per primitive scattering into pixels with integer atomics),
//! resolve (one invocation per pixel). A 3-D volume ray-marcher (reduce +
//! per-pixel march) and a 3-D point splatter (clear + splat + resolve)
//! are further views of the same shape.
//!
//! - `image` (field `[w, h]`, x to the right, y up): auto range (no
//!   `min`/`max`, scalar fields) = a reset kernel and a reduce kernel
//!   writing order-independent min/max keys of the finite values into
//!   `VIEW.range` (u32 `[2]`) with integer `atomic_min`/`atomic_max` of an
//!   order-preserving u32 key of the f32 (every target has 32-bit integer
//!   atomics); then one invocation per cell: normalise, colormap
//!   polynomial (or coolwarm / grayscale; vec3/vec4 fields as RGB(A)),
//!   `show_active`: an inactive cell (`is_active` of the element) is the
//!   checkerboard, and a cell on the border of an active block of the
//!   outermost sparse level (`is_active` at that level) is outlined.
//! - `particles`: clear; splat: per particle with a finite position, over
//!   its disc's footprint, `atomic_max(pixel, index + 1)` where the disc
//!   covers the pixel (so the highest index is on top, the painter's order
//!   of the old renderer, whatever order threads run in); a second splat
//!   finds the disc just below the top one (`VIEW.under`); resolve: per
//!   pixel, those two discs blended over the background in index order with
//!   their soft-edge coverage (the painter's picture, except where a third
//!   disc shows through two soft edges).
//!
//! - `particles` of vec3 positions (`particles3d.rs`, through the 3-D
//!   camera of `camera.rs`): fill the depth and index words; splat the
//!   depth (`atomic_min` of the depth's bits); splat the index where the
//!   depth is the particle's (`atomic_min`); resolve: the winner lit as a
//!   sphere, or the background. Its `VIEW.depth` is `ViewKernels::depth`.
//! - `volume` (3-axis scalar field, `volume.rs`): auto range = reset +
//!   reduce (active cells under sparse layouts); one invocation per pixel
//!   marching its camera ray (emission–absorption, mip or a slice plane)
//!   into the image and `VIEW.depth`; `show_active`: one invocation per
//!   outermost sparse block drawing an active block's edges. With `under`
//!   the other 3-D view's launches come first (volumes are built after
//!   every other view) and the march reads its image and depth.
//!
//! - `plot` (1-D f32 field, `plot.rs`): auto range = reset + reduce as
//!   for `image`, over the plotted values; then one invocation per pixel
//!   column writing the whole column: background, zero line, and the rows
//!   the polyline covers within the column (direct stores, so no thread
//!   order can change a pixel).
//! - `histogram` (any field, `histogram.rs`): reset (bins, counters, range
//!   keys), auto range = reduce as for `image` over the elements' values
//!   (vector magnitudes; active cells only under sparse layouts), count
//!   (one invocation per element, `atomic_add` into `VIEW.bins`, non-finite
//!   values into `VIEW.nonfinite`), then one invocation per pixel column
//!   drawing its bar scaled to the largest bin.
//!
//! Does not: touch the schedule or any user kernel.

use crate::ir::colormap::{self, BLACKBODY, CHECKER, COOLWARM, INACTIVE_RGB, MIN_OUTLINED_BLOCK};
use crate::ir::colormap::{OUTLINE_ALPHA, OUTLINE_RGB};
use crate::ir::layout::{self, AddressPlan};
use crate::ir::*;
use crate::lower::emit::Build;
use crate::lower::emit::Emit;
use crate::types::{Scalar, Type};

use super::PassError;

pub mod camera;
pub mod ground;
mod histogram;
pub mod overlay3d;
pub mod particles3d;
mod plot;
pub mod surface;
pub mod volume;
pub mod volume_light;

/// Image rows are padded to a multiple of this many pixels (256 bytes: the
/// row alignment GPU buffer-to-texture copies need).
pub const ROW_ALIGN: u32 = 64;

/// An `image` view of a field wider or taller than this draws every
/// `stride`-th cell (`stride` = the smallest integer that brings the longer
/// side within it): a 4096² image is 64 MiB, under every adapter's
/// storage-buffer limit (lavapipe's is 128 MiB), and more pixels than a
/// viewport shows.
pub const MAX_IMAGE_SIDE: u32 = 4096;

/// The cell stride of an `image` view of a `w` × `h` field.
pub fn image_stride(w: u32, h: u32) -> u32 {
    w.max(h).div_ceil(MAX_IMAGE_SIDE).max(1)
}

pub fn run(program: &mut Program) -> Result<(), PassError> {
    let views = program.views.clone();
    // Volumes last: one may draw over (`under`) another view's kernels.
    let order = (0..views.len())
        .filter(|&i| !matches!(views[i], View::Volume { .. }))
        .chain((0..views.len()).filter(|&i| matches!(views[i], View::Volume { .. })));
    let mut built: Vec<Option<ViewKernels>> = vec![None; views.len()];
    // Each 3-D view's launches before its overlays (what a volume drawn
    // over it, `under`, repeats), and its overlay launches.
    let mut bare: Vec<Option<Vec<KernelId>>> = vec![None; views.len()];
    let mut overlays: Vec<Vec<KernelId>> = vec![Vec::new(); views.len()];
    for i in order {
        // A volume's `under` view's overlays: the volume's launches redraw
        // that view's picture bare, so they draw its overlays again after
        // the march has read it.
        let mut redraw = Vec::new();
        let v = &views[i];
        let vk = match v {
            View::Image {
                node_id,
                field,
                colormap,
                range,
                show_active,
            } => image(program, node_id, *field, *colormap, *range, *show_active)?,
            View::Particles {
                node_id,
                positions,
                color_field,
                color,
                background,
                radius,
                width,
                height,
                scene: Some(scene),
                ..
            } => particles3d::particles3d(
                program,
                node_id,
                *positions,
                *color_field,
                *color,
                *background,
                *radius,
                (*width, *height),
                scene,
            )?,
            View::Particles { .. } => particles(program, v)?,
            View::Plot { .. } => {
                // Its named sources become field ids (the fields an optimize
                // node adds exist now).
                let (vk, resolved) = plot::plot(program, v)?;
                program.views[i] = resolved;
                vk
            }
            View::Histogram { .. } => histogram::histogram(program, v)?,
            View::Volume { node_id, under, .. } => {
                let under = match under {
                    None => None,
                    Some(u) => {
                        let found = built
                            .iter()
                            .zip(bare.iter().zip(&overlays))
                            .filter_map(|(k, (b, o))| Some((k.as_ref()?, b.as_ref()?, o)))
                            .find(|(k, _, _)| &k.node_id == u)
                            .and_then(|(k, b, o)| k.depth.map(|d| (k, b, o, d)));
                        let Some((k, launches, over, depth)) = found else {
                            return Err(PassError {
                                pass: "views",
                                kernel: node_id.clone(),
                                message: format!(
                                    "'under' names '{}', which is not a 3-D view drawn before this volume (a particles view of vec3 positions, or a surface view)",
                                    u
                                ),
                                user: Some(Span::default()),
                            });
                        };
                        redraw = over.clone();
                        Some((
                            volume::Under {
                                image: k.image,
                                depth,
                            },
                            launches.clone(),
                        ))
                    }
                };
                volume::volume(program, node_id, v, under)?
            }
            View::Surface {
                node_id,
                field,
                mesh,
                level,
                max_triangles,
                color,
                background,
                width,
                height,
                scene,
            } => surface::surface(
                program,
                node_id,
                surface::Source {
                    field: *field,
                    mesh: *mesh,
                },
                *level,
                *max_triangles,
                *color,
                *background,
                (*width, *height),
                scene,
            )?,
        };
        let mut vk = vk;
        if let (Some(scene), Some(depth)) = (v.scene(), vk.depth) {
            bare[i] = Some(vk.launches.clone());
            vk.launches.extend(redraw);
            let name = camera::field_name(&vk.node_id);
            let camera = *vk
                .scratch
                .iter()
                .find(|&&f| program.fields[f].name == name)
                .expect("a 3-D view's scratch holds its camera field");
            let t = overlay3d::Target {
                image: vk.image,
                depth,
                camera,
                width: vk.width,
                height: vk.height,
            };
            for k in overlay3d::kernels(&t, scene) {
                let id = add(program, &vk.node_id, k);
                overlays[i].push(id);
                vk.launches.push(id);
            }
        }
        built[i] = Some(vk);
    }
    program
        .view_kernels
        .extend(built.into_iter().map(|k| k.expect("every view is built")));
    if !views.is_empty() {
        layout::compute(program).map_err(|e| PassError {
            pass: "views",
            kernel: views[0].node_id().to_string(),
            message: e.message,
            user: None,
        })?;
    }
    Ok(())
}

fn check_size(node: &str, w: u32, h: u32) -> Result<u32, PassError> {
    if w == 0 || h == 0 || w > 1 << 14 || h > 1 << 14 {
        return Err(PassError {
            pass: "views",
            kernel: node.to_string(),
            message: format!(
                "a view is drawn at 1 to 16384 pixels per side; this one is {} x {}",
                w, h
            ),
            user: Some(Span::default()),
        });
    }
    Ok(w.div_ceil(ROW_ALIGN) * ROW_ALIGN)
}

/// A u32 field of `shape` on a dense root of its own, every word `init`.
fn new_field(program: &mut Program, name: &str, shape: Vec<u32>, init: u32) -> FieldId {
    let l = program.layouts.append(LayoutNode::new(
        name,
        LayoutKind::Dense,
        shape.clone(),
        None,
    ));
    let h = program.fields.append(Field {
        name: name.to_string(),
        ty: Type::U32,
        storage: Storage::Word,
        layout: l,
        shape,
        offset_in_cell: 0,
        init: FieldInit::Constant(vec![init]),
    });
    program.layouts[l].children.push(LayoutChild::Field(h));
    h
}

fn image(
    program: &mut Program,
    node: &str,
    field: FieldId,
    map: Colormap,
    range: Option<(f32, f32)>,
    show_active: bool,
) -> Result<ViewKernels, PassError> {
    let (ty, shape) = {
        let f = &program.fields[field];
        (f.ty, f.shape.clone())
    };
    let stride = image_stride(shape[0], shape[1]);
    let (w, h) = (shape[0].div_ceil(stride), shape[1].div_ceil(stride));
    let pitch = check_size(node, w, h)?;
    let img = new_field(program, &format!("{}.image", node), vec![h, pitch], 0);
    let mut launches = Vec::new();
    let mut scratch = Vec::new();
    let comps = ty.components();
    let auto = range.is_none() && comps == 1;
    let keys = if auto {
        let keys = new_field(program, &format!("{}.range", node), vec![2], 0);
        scratch.push(keys);
        let k = reset_range(keys);
        launches.push(add(program, node, k));
        let k = reduce_range(field, ty, &[w, h], stride, keys);
        launches.push(add(program, node, k));
        Some(keys)
    } else {
        None
    };
    // The outermost sparse level of the field's path, outlined when its
    // blocks span at least `MIN_OUTLINED_BLOCK` cells per axis.
    let plan = AddressPlan::new(program, field);
    let outline = plan
        .levels
        .iter()
        .position(|l| l.kind.is_sparse())
        .filter(|&o| {
            plan.levels[o]
                .axes
                .iter()
                .all(|a| a.divisor >= MIN_OUTLINED_BLOCK)
        })
        .map(|o| {
            let divisors: Vec<u32> = plan.levels[o]
                .axes
                .iter()
                .map(|a| a.divisor.min(u32::MAX as u64) as u32)
                .collect();
            (o as u32, divisors)
        });
    let spec = ImageSpec {
        field,
        ty,
        map,
        range,
        keys,
        show_active,
        outline: if show_active { outline } else { None },
        img,
        h,
        stride,
    };
    let k = draw_image(&spec, &[w, h]);
    launches.push(add(program, node, k));
    Ok(ViewKernels {
        node_id: node.to_string(),
        image: img,
        width: w,
        height: h,
        pitch,
        scratch,
        depth: None,
        launches,
    })
}

fn add(program: &mut Program, node: &str, mut k: Kernel) -> KernelId {
    k.name = node.to_string();
    program.kernels.append(k)
}

/// The colour of particle `k` (f32 RGB) in both particle views: its
/// colour field's vec3, or its packed RGB8 word (red in bits 16..24), or
/// the view's one colour.
fn particle_rgb(
    e: &mut Emit,
    color_field: Option<(FieldId, Type)>,
    color: [f32; 3],
    k: InstId,
) -> [InstId; 3] {
    match color_field {
        Some((c, ty @ Type::Vector(..))) => {
            let v = e.load(c, ty, vec![k]);
            std::array::from_fn(|i| e.extract(v, i as u32))
        }
        Some((c, ty)) => {
            let v = e.load(c, ty, vec![k]);
            std::array::from_fn(|i| e.unit(v, 16 - 8 * i as u32))
        }
        None => color.map(|c| e.f32c(c)),
    }
}

/// The views' colour helpers on the shared builder.
trait Rgba {
    /// An f32 in 0..1 as a byte in the low bits of a u32 (clamped and
    /// rounded; NaN is 0, as the saturating cast gives).
    fn byte(&mut self, x: InstId) -> InstId;
    /// Bytes (u32 each, 0..=255) packed as one RGBA8 word, red lowest.
    fn pack(&mut self, bytes: [InstId; 4]) -> InstId;
    /// The byte at bit `shift` of the u32 `word`, as an f32 in 0..1
    /// (byte / 255): the one decoding of a packed colour channel.
    fn unit(&mut self, word: InstId, shift: u32) -> InstId;
}

impl Rgba for Emit {
    fn byte(&mut self, x: InstId) -> InstId {
        let zero = self.f32c(0.0);
        let one = self.f32c(1.0);
        let c = self.call(Builtin::Clamp, vec![x, zero, one]);
        let k = self.f32c(255.0);
        let s = self.bin(BinaryOp::Mul, c, k);
        let half = self.f32c(0.5);
        let r = self.bin(BinaryOp::Add, s, half);
        self.cast(r, Type::U32)
    }
    fn pack(&mut self, bytes: [InstId; 4]) -> InstId {
        let mut word = bytes[0];
        for (i, &b) in bytes.iter().enumerate().skip(1) {
            let sh = self.u32c(8 * i as u32);
            let s = self.bin(BinaryOp::Shl, b, sh);
            word = self.bin(BinaryOp::BitOr, word, s);
        }
        word
    }
    fn unit(&mut self, word: InstId, shift: u32) -> InstId {
        let sh = self.u32c(shift);
        let b = self.bin(BinaryOp::Shr, word, sh);
        let m = self.u32c(255);
        let b = self.bin(BinaryOp::BitAnd, b, m);
        let f = self.cast(b, Type::F32);
        let d = self.f32c(255.0);
        self.bin(BinaryOp::Div, f, d)
    }
}

/// The u32 key of an f32 that orders like the float (for the finite
/// values the reduction sees): flip every bit of a negative number, only
/// the sign bit of a positive one.
fn order_key(e: &mut Emit, v: InstId) -> InstId {
    let b = e.bitcast(v, Type::U32);
    let k31 = e.u32c(31);
    let sign = e.bin(BinaryOp::Shr, b, k31);
    let one = e.u32c(1);
    let neg = e.bin(BinaryOp::Eq, sign, one);
    let all = e.u32c(u32::MAX);
    let top = e.u32c(0x8000_0000);
    let mask = e.select(neg, all, top);
    e.bin(BinaryOp::BitXor, b, mask)
}

/// The f32 whose `order_key` is `k`.
fn from_key(e: &mut Emit, k: InstId) -> InstId {
    let k31 = e.u32c(31);
    let top = e.bin(BinaryOp::Shr, k, k31);
    let one = e.u32c(1);
    let pos = e.bin(BinaryOp::Eq, top, one);
    let sign = e.u32c(0x8000_0000);
    let all = e.u32c(u32::MAX);
    let mask = e.select(pos, sign, all);
    let b = e.bin(BinaryOp::BitXor, k, mask);
    e.bitcast(b, Type::F32)
}

/// One invocation: the range keys back to "nothing seen" (min key
/// `u32::MAX`, max key 0), before each reduction.
fn reset_range(keys: FieldId) -> Kernel {
    let mut e = Emit::new("view", 1);
    let z = e.i32c(0);
    let o = e.i32c(1);
    let max = e.u32c(u32::MAX);
    let zero = e.u32c(0);
    e.store(keys, vec![z], max);
    e.store(keys, vec![o], zero);
    e.range_kernel(vec![1], vec![("range", keys)])
}

/// One invocation per cell: the finite values' min and max keys, by
/// integer atomics (the result does not depend on the order).
fn reduce_range(field: FieldId, ty: Type, shape: &[u32], stride: u32, keys: FieldId) -> Kernel {
    let mut e = Emit::new("view", 2);
    let pixel = e.args(2);
    let idx = cell_of(&mut e, &pixel, stride);
    let v = e.load(field, ty, idx);
    let s = e.as_f32(v);
    let ok = e.finite(s);
    e.if_(ok, |e| {
        let k = order_key(e, s);
        let z = e.i32c(0);
        let o = e.i32c(1);
        e.atomic(AtomicOp::Min, keys, vec![z], k);
        e.atomic(AtomicOp::Max, keys, vec![o], k);
    });
    e.range_kernel(shape.to_vec(), vec![("field", field), ("range", keys)])
}

struct ImageSpec {
    field: FieldId,
    ty: Type,
    map: Colormap,
    range: Option<(f32, f32)>,
    keys: Option<FieldId>,
    show_active: bool,
    /// The outlined sparse level and its block size per axis.
    outline: Option<(u32, Vec<u32>)>,
    img: FieldId,
    h: u32,
    /// Pixel (x, y) shows cell (x * stride, y * stride).
    stride: u32,
}

/// The cell a pixel shows: its own index, or every `stride`-th cell.
fn cell_of(e: &mut Emit, pixel: &[InstId], stride: u32) -> Vec<InstId> {
    if stride == 1 {
        return pixel.to_vec();
    }
    let s = e.i32c(stride as i32);
    pixel.iter().map(|&i| e.bin(BinaryOp::Mul, i, s)).collect()
}

/// The colormap's RGB at `t` (f32), in `colormap::colormap`'s order of
/// operations.
fn colormap_rgb(e: &mut Emit, map: Colormap, t: InstId) -> [InstId; 3] {
    let zero = e.f32c(0.0);
    let one = e.f32c(1.0);
    let nan = e.call(Builtin::IsNan, vec![t]);
    let c = e.call(Builtin::Clamp, vec![t, zero, one]);
    let t = e.select(nan, zero, c);
    if let Some(poly) = colormap::colormap_poly(map) {
        return std::array::from_fn(|k| {
            let mut v = e.f32c(poly[6][k]);
            for row in poly[..6].iter().rev() {
                let m = e.bin(BinaryOp::Mul, v, t);
                let c = e.f32c(row[k]);
                v = e.bin(BinaryOp::Add, m, c);
            }
            e.call(Builtin::Clamp, vec![v, zero, one])
        });
    }
    match map {
        Colormap::Coolwarm => {
            let half = e.f32c(0.5);
            let low = e.bin(BinaryOp::Lt, t, half);
            let two = e.f32c(2.0);
            let t2 = e.bin(BinaryOp::Mul, t, two);
            let t2m = e.bin(BinaryOp::Sub, t2, one);
            let u = e.select(low, t2, t2m);
            let [cold, mid, warm] = COOLWARM;
            std::array::from_fn(|k| {
                let ca = e.f32c(cold[k]);
                let ma = e.f32c(mid[k]);
                let wa = e.f32c(warm[k]);
                let a = e.select(low, ca, ma);
                let b = e.select(low, ma, wa);
                let d = e.bin(BinaryOp::Sub, b, a);
                let m = e.bin(BinaryOp::Mul, d, u);
                e.bin(BinaryOp::Add, a, m)
            })
        }
        Colormap::Blackbody => {
            let four = e.f32c(4.0);
            let s = e.bin(BinaryOp::Mul, t, four);
            let above: Vec<InstId> = (1..4)
                .map(|k| {
                    let kc = e.f32c(k as f32);
                    e.bin(BinaryOp::Ge, s, kc)
                })
                .collect();
            // The segment's first stop index, as f32, and its two stops.
            let mut base = e.f32c(0.0);
            for (k, &a) in above.iter().enumerate() {
                let kc = e.f32c((k + 1) as f32);
                base = e.select(a, kc, base);
            }
            let u = e.bin(BinaryOp::Sub, s, base);
            std::array::from_fn(|c| {
                let mut a = e.f32c(BLACKBODY[0][c]);
                let mut b = e.f32c(BLACKBODY[1][c]);
                for (k, &ab) in above.iter().enumerate() {
                    let ak = e.f32c(BLACKBODY[k + 1][c]);
                    let bk = e.f32c(BLACKBODY[k + 2][c]);
                    a = e.select(ab, ak, a);
                    b = e.select(ab, bk, b);
                }
                let d = e.bin(BinaryOp::Sub, b, a);
                let m = e.bin(BinaryOp::Mul, d, u);
                e.bin(BinaryOp::Add, a, m)
            })
        }
        _ => [t, t, t],
    }
}

/// One invocation per cell (x, y) of the field: its pixel (x, h-1-y).
fn draw_image(s: &ImageSpec, shape: &[u32]) -> Kernel {
    let mut e = Emit::new("view", 2);
    let pixel = e.args(2);
    let (x, y) = (pixel[0], pixel[1]);
    let idx = cell_of(&mut e, &pixel, s.stride);
    let v = e.load(s.field, s.ty, idx.clone());
    let comps = s.ty.components();
    // The normalising range: fixed, the reduction's, or 0..1.
    let (lo, span) = match (s.range, s.keys) {
        (Some((lo, hi)), _) => {
            let span = if hi > lo { hi - lo } else { 1.0 };
            (e.f32c(lo), e.f32c(span))
        }
        (None, Some(keys)) => {
            let z = e.i32c(0);
            let o = e.i32c(1);
            let lk = e.load(keys, Type::U32, vec![z]);
            let hk = e.load(keys, Type::U32, vec![o]);
            // No finite value: 0..1 (the keys are still at their reset).
            let empty = e.bin(BinaryOp::Gt, lk, hk);
            let lo = from_key(&mut e, lk);
            let hi = from_key(&mut e, hk);
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
    };
    let norm = |e: &mut Emit, c: InstId| {
        let c = e.as_f32(c);
        let d = e.bin(BinaryOp::Sub, c, lo);
        e.bin(BinaryOp::Div, d, span)
    };
    let value_rgb: [InstId; 3] = if comps == 1 {
        let t = norm(&mut e, v);
        colormap_rgb(&mut e, s.map, t)
    } else {
        std::array::from_fn(|c| {
            let x = e.extract(v, c as u32);
            norm(&mut e, x)
        })
    };
    let rgb: [InstId; 3] = if s.show_active {
        let active = e.emit(
            InstKind::FieldIsActive {
                field: s.field,
                index: idx.clone(),
                level: None,
            },
            Type::BOOL,
        );
        // Checkerboard: (x / 8 + y / 8) even → first tone.
        let k = e.i32c(CHECKER as i32);
        let qx = e.bin(BinaryOp::Div, x, k);
        let qy = e.bin(BinaryOp::Div, y, k);
        let q = e.bin(BinaryOp::Add, qx, qy);
        let one = e.i32c(1);
        let odd = e.bin(BinaryOp::BitAnd, q, one);
        let zero = e.i32c(0);
        let even = e.bin(BinaryOp::Eq, odd, zero);
        let mut rgb = std::array::from_fn(|c| {
            let a = e.f32c(INACTIVE_RGB[0][c]);
            let b = e.f32c(INACTIVE_RGB[1][c]);
            let checker = e.select(even, a, b);
            e.select(active, value_rgb[c], checker)
        });
        if let Some((level, divisors)) = &s.outline {
            let block = e.emit(
                InstKind::FieldIsActive {
                    field: s.field,
                    index: idx.clone(),
                    level: Some(*level),
                },
                Type::BOOL,
            );
            // On the border of its block: index % size is 0 or size - 1 on some axis.
            let mut edge = e.emit(InstKind::Const(Const::bool(false)), Type::BOOL);
            for (d, &size) in divisors.iter().enumerate() {
                let i = e.cast(idx[d], Type::U32);
                let n = e.u32c(size);
                let r = e.bin(BinaryOp::Rem, i, n);
                let z = e.u32c(0);
                let last = e.u32c(size - 1);
                let a = e.bin(BinaryOp::Eq, r, z);
                let b = e.bin(BinaryOp::Eq, r, last);
                let ab = e.bin(BinaryOp::LogicalOr, a, b);
                edge = e.bin(BinaryOp::LogicalOr, edge, ab);
            }
            let on = e.bin(BinaryOp::LogicalAnd, block, edge);
            let zero = e.f32c(0.0);
            let one = e.f32c(1.0);
            let alpha = e.f32c(OUTLINE_ALPHA);
            rgb = std::array::from_fn(|c| {
                let o = e.f32c(OUTLINE_RGB[c]);
                let cl = e.call(Builtin::Clamp, vec![rgb[c], zero, one]);
                let d = e.bin(BinaryOp::Sub, o, cl);
                let m = e.bin(BinaryOp::Mul, d, alpha);
                let blended = e.bin(BinaryOp::Add, rgb[c], m);
                e.select(on, blended, rgb[c])
            });
        }
        rgb
    } else {
        value_rgb
    };
    // vec4 fields carry their own alpha (not normalised); the rest are opaque.
    let alpha = if s.ty == Type::Vector(Scalar::F32, 4) {
        e.extract(v, 3)
    } else {
        e.f32c(1.0)
    };
    let bytes = [rgb[0], rgb[1], rgb[2], alpha].map(|c| e.byte(c));
    let word = e.pack(bytes);
    let top = e.i32c(s.h as i32 - 1);
    let row = e.bin(BinaryOp::Sub, top, y);
    e.store(s.img, vec![row, x], word);
    e.range_kernel(
        shape.to_vec(),
        std::iter::once(("field", s.field))
            .chain(s.keys.map(|k| ("range", k)))
            .chain(std::iter::once(("image", s.img)))
            .collect(),
    )
}

struct ParticleSpec {
    positions: FieldId,
    color_field: Option<(FieldId, Type)>,
    color: [f32; 3],
    background: [f32; 3],
    radius: f32,
    width: u32,
    height: u32,
    domain: [f32; 4],
    img: FieldId,
    /// u32 `[height, width]`: per pixel, the disc just below the top one
    /// (index + 1, 0 for none).
    under: FieldId,
}

fn particles(program: &mut Program, v: &View) -> Result<ViewKernels, PassError> {
    let View::Particles {
        node_id,
        positions,
        color_field,
        color,
        background,
        radius,
        width,
        height,
        domain,
        ..
    } = v
    else {
        unreachable!("called for particles views")
    };
    let pitch = check_size(node_id, *width, *height)?;
    let img = new_field(
        program,
        &format!("{}.image", node_id),
        vec![*height, pitch],
        0,
    );
    let under = new_field(
        program,
        &format!("{}.under", node_id),
        vec![*height, *width],
        0,
    );
    let s = ParticleSpec {
        under,
        positions: *positions,
        color_field: color_field.map(|c| (c, program.fields[c].ty)),
        color: *color,
        background: *background,
        radius: radius.max(0.0),
        width: *width,
        height: *height,
        domain: *domain,
        img,
    };
    let n = program.fields[*positions].shape[0];
    let launches = vec![
        add(program, node_id, clear_image(img, *height, pitch)),
        add(program, node_id, clear_image(under, *height, *width)),
        add(program, node_id, splat(&s, n, false)),
        add(program, node_id, splat(&s, n, true)),
        add(program, node_id, resolve(&s)),
    ];
    Ok(ViewKernels {
        node_id: node_id.clone(),
        image: img,
        width: *width,
        height: *height,
        pitch,
        scratch: vec![under],
        depth: None,
        launches,
    })
}

/// One invocation per word of the image: 0 (a buffer fill on backends
/// that take `zero_fill` marks).
fn clear_image(img: FieldId, h: u32, pitch: u32) -> Kernel {
    let mut e = Emit::new("view", 2);
    let idx = e.args(2);
    let z = e.u32c(0);
    e.store(img, idx, z);
    e.range_kernel(vec![h, pitch], vec![("image", img)])
}

/// Particle `k`'s centre in pixels (x right, y down, f32 each), and
/// whether its position is finite.
fn centre(e: &mut Emit, s: &ParticleSpec, k: InstId) -> (InstId, InstId, InstId) {
    let p = e.load(s.positions, Type::Vector(Scalar::F32, 2), vec![k]);
    let px = e.extract(p, 0);
    let py = e.extract(p, 1);
    let fx = e.finite(px);
    let fy = e.finite(py);
    let ok = e.bin(BinaryOp::LogicalAnd, fx, fy);
    let d = s.domain;
    let (w, h) = (s.width as f32, s.height as f32);
    let d0 = e.f32c(d[0]);
    let dx = e.f32c(d[2] - d[0]);
    let wc = e.f32c(w);
    let a = e.bin(BinaryOp::Sub, px, d0);
    let a = e.bin(BinaryOp::Div, a, dx);
    let cx = e.bin(BinaryOp::Mul, a, wc);
    let d1 = e.f32c(d[1]);
    let dy = e.f32c(d[3] - d[1]);
    let hc = e.f32c(h);
    let one = e.f32c(1.0);
    let b = e.bin(BinaryOp::Sub, py, d1);
    let b = e.bin(BinaryOp::Div, b, dy);
    let b = e.bin(BinaryOp::Sub, one, b);
    let cy = e.bin(BinaryOp::Mul, b, hc);
    (ok, cx, cy)
}

/// The disc's coverage of pixel (x, y) (i32 each): `clamp(r + 0.5 - d, 0, 1)`
/// with `d` the distance from the pixel's centre to the disc's.
fn coverage(
    e: &mut Emit,
    s: &ParticleSpec,
    cx: InstId,
    cy: InstId,
    x: InstId,
    y: InstId,
) -> InstId {
    let half = e.f32c(0.5);
    let fx = e.cast(x, Type::F32);
    let fx = e.bin(BinaryOp::Add, fx, half);
    let ddx = e.bin(BinaryOp::Sub, fx, cx);
    let fy = e.cast(y, Type::F32);
    let fy = e.bin(BinaryOp::Add, fy, half);
    let ddy = e.bin(BinaryOp::Sub, fy, cy);
    let xx = e.bin(BinaryOp::Mul, ddx, ddx);
    let yy = e.bin(BinaryOp::Mul, ddy, ddy);
    let sum = e.bin(BinaryOp::Add, xx, yy);
    let d = e.call(Builtin::Sqrt, vec![sum]);
    let r = e.f32c(s.radius + 0.5);
    let c = e.bin(BinaryOp::Sub, r, d);
    let zero = e.f32c(0.0);
    let one = e.f32c(1.0);
    e.call(Builtin::Clamp, vec![c, zero, one])
}

/// First and last pixel (i32) of a disc's footprint on one axis of `n` pixels.
fn footprint(e: &mut Emit, c: InstId, reach: f32, n: u32) -> (InstId, InstId) {
    let r = e.f32c(reach);
    let lo = e.bin(BinaryOp::Sub, c, r);
    let lo = e.call(Builtin::Floor, vec![lo]);
    let zero = e.f32c(0.0);
    let lo = e.call(Builtin::Max, vec![lo, zero]);
    let hi = e.bin(BinaryOp::Add, c, r);
    let hi = e.call(Builtin::Ceil, vec![hi]);
    let last = e.f32c(n as f32 - 1.0);
    let hi = e.call(Builtin::Min, vec![hi, last]);
    (e.cast(lo, Type::I32), e.cast(hi, Type::I32))
}

/// One invocation per particle: `atomic_max(pixel, k + 1)` over every
/// pixel its disc covers; with `under`, into the `under` word of the pixels
/// where a higher disc is on top (the second highest disc, after the first
/// splat has settled the top one).
fn splat(s: &ParticleSpec, n: u32, under: bool) -> Kernel {
    let mut e = Emit::new("view", 1);
    let k = e.args(1)[0];
    let (ok, cx, cy) = centre(&mut e, s, k);
    e.if_(ok, |e| {
        let reach = s.radius + 1.0;
        let (x0, x1) = footprint(e, cx, reach, s.width);
        let (y0, y1) = footprint(e, cy, reach, s.height);
        let ku = e.cast(k, Type::U32);
        let one = e.u32c(1);
        let tag = e.bin(BinaryOp::Add, ku, one);
        e.range_incl(y0, y1, |e, y| {
            e.range_incl(x0, x1, |e, x| {
                let c = coverage(e, s, cx, cy, x, y);
                let zero = e.f32c(0.0);
                let covers = e.bin(BinaryOp::Gt, c, zero);
                if under {
                    e.if_(covers, |e| {
                        let top = e.load(s.img, Type::U32, vec![y, x]);
                        let below = e.bin(BinaryOp::Lt, tag, top);
                        e.if_(below, |e| e.atomic(AtomicOp::Max, s.under, vec![y, x], tag));
                    });
                } else {
                    e.if_(covers, |e| e.atomic(AtomicOp::Max, s.img, vec![y, x], tag));
                }
            });
        });
    });
    e.range_kernel(
        vec![n],
        vec![
            ("positions", s.positions),
            ("image", s.img),
            ("under", s.under),
        ],
    )
}

/// One invocation per pixel: the disc below the top one, then the top
/// disc (words `k + 1`, 0 for none), each blended over what is below it
/// with its soft-edge coverage as the painter did: `old + (c - old) *
/// coverage`, rounded to bytes after each disc, starting from the
/// background's bytes. Exactly the painter's picture wherever at most two
/// discs cover a pixel or the second one covers it fully.
fn resolve(s: &ParticleSpec) -> Kernel {
    let mut e = Emit::new("view", 2);
    let idx = e.args(2);
    let (y, x) = (idx[0], idx[1]);
    let bg = s.background.map(colormap::to_u8);
    let rgb_locals: [LocalId; 3] = std::array::from_fn(|i| {
        let c = e.f32c(bg[i] as f32 / 255.0);
        e.local(["r", "g", "b"][i], Type::F32, c)
    });
    let under = e.load(s.under, Type::U32, vec![y, x]);
    let top = e.load(s.img, Type::U32, vec![y, x]);
    for tag in [under, top] {
        let zero = e.u32c(0);
        let some = e.bin(BinaryOp::Ne, tag, zero);
        e.if_(some, |e| {
            let one = e.u32c(1);
            let k = e.bin(BinaryOp::Sub, tag, one);
            let k = e.cast(k, Type::I32);
            let (_, cx, cy) = centre(e, s, k);
            let cover = coverage(e, s, cx, cy, x, y);
            let rgb = particle_rgb(e, s.color_field, s.color, k);
            for i in 0..3 {
                let old = e.get(rgb_locals[i]);
                let d = e.bin(BinaryOp::Sub, rgb[i], old);
                let m = e.bin(BinaryOp::Mul, d, cover);
                let c = e.bin(BinaryOp::Add, old, m);
                let byte = e.byte(c);
                let f = e.cast(byte, Type::F32);
                let k255 = e.f32c(255.0);
                let q = e.bin(BinaryOp::Div, f, k255);
                e.set(rgb_locals[i], q);
            }
        });
    }
    let bytes: [InstId; 3] = std::array::from_fn(|i| {
        let c = e.get(rgb_locals[i]);
        e.byte(c)
    });
    let opaque = e.u32c(255);
    let word = e.pack([bytes[0], bytes[1], bytes[2], opaque]);
    e.store(s.img, vec![y, x], word);
    let mut bindings = vec![("positions", s.positions)];
    if let Some((c, _)) = s.color_field {
        bindings.push(("color", c));
    }
    bindings.push(("image", s.img));
    bindings.push(("under", s.under));
    e.range_kernel(vec![s.height, s.width], bindings)
}
