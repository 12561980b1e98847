//! The host renderer that views were drawn with before they became IR
//! kernels (`weft_ir::passes::views`), kept as an independent reference for
//! tests: it reads field words on the host (`AddressPlan`) and paints
//! particles one after another in index order, where the kernels run per
//! pixel and per particle on every backend.

use crate::volume_lit::{self, Active, Cells, Glow, Grid, Smoke};
use weft_ir::ir::colormap::{
    colormap_poly, BLACKBODY, COOLWARM, MIN_OUTLINED_BLOCK, OUTLINE_ALPHA, OUTLINE_RGB,
};
use weft_ir::ir::layout::{AddressPlan, LevelPlan};
use weft_ir::ir::{Camera, Colormap, FieldId, LayoutKind, Program, Scene, View};
use weft_ir::types::{Scalar, Type};
use weft_runtime::render::Image;

fn to_u8(x: f32) -> u8 {
    (x.clamp(0.0, 1.0) * 255.0 + 0.5) as u8
}

/// `colormap` with `colormap_poly(map)` looked up once by the caller (the
/// per-pixel loop of a large image spends most of its time here).
fn colormap_with(map: Colormap, poly: Option<&[[f32; 3]; 7]>, t: f32) -> [f32; 3] {
    let t = if t.is_nan() { 0.0 } else { t.clamp(0.0, 1.0) };
    if let Some(c) = poly {
        let mut out = [0.0; 3];
        for (k, o) in out.iter_mut().enumerate() {
            let mut v = c[6][k];
            for i in (0..6).rev() {
                v = v * t + c[i][k];
            }
            *o = v.clamp(0.0, 1.0);
        }
        return out;
    }
    match map {
        Colormap::Coolwarm => {
            let [cold, mid, warm] = COOLWARM;
            let (a, b, u) = if t < 0.5 {
                (cold, mid, t * 2.0)
            } else {
                (mid, warm, t * 2.0 - 1.0)
            };
            [
                a[0] + (b[0] - a[0]) * u,
                a[1] + (b[1] - a[1]) * u,
                a[2] + (b[2] - a[2]) * u,
            ]
        }
        Colormap::Blackbody => {
            // Stops at 0, 1/4, 1/2, 3/4, 1 (`colormap::BLACKBODY`).
            let s = t * 4.0;
            let k = if s >= 3.0 {
                3
            } else if s >= 2.0 {
                2
            } else if s >= 1.0 {
                1
            } else {
                0
            };
            let u = s - k as f32;
            let (a, b) = (BLACKBODY[k], BLACKBODY[k + 1]);
            [
                a[0] + (b[0] - a[0]) * u,
                a[1] + (b[1] - a[1]) * u,
                a[2] + (b[2] - a[2]) * u,
            ]
        }
        _ => [t, t, t],
    }
}

/// `activity_mask` bit: every layout level above the cell is active.
pub const CELL_ACTIVE: u8 = 1;
/// `activity_mask` bit: the cell lies on the border of an active cell of the
/// outermost sparse node (the "blocks" an overlay outlines).
pub const BLOCK_EDGE: u8 = 2;
/// `activity_mask` bit: the cell's block of the outermost sparse node is
/// active (allocated), whatever the levels below it say.
pub const OUTER_ACTIVE: u8 = 4;

/// Per-cell activity of a 2D field in logical row-major order (`CELL_ACTIVE`,
/// `BLOCK_EDGE`), read from its root buffer `words`; `None` for a field
/// whose layout path has no sparse node (every cell is always active).
pub fn activity_mask(p: &Program, field: FieldId, words: &[u32]) -> Option<Vec<u8>> {
    let plan = AddressPlan::new(p, field);
    let outer = plan.levels.iter().position(is_sparse_level)?;
    let outline = plan.levels[outer]
        .axes
        .iter()
        .all(|a| a.divisor >= MIN_OUTLINED_BLOCK);
    // The plan cut after the outer sparse level answers "is that block active".
    let mut block_plan = plan.clone();
    block_plan.levels.truncate(outer + 1);
    let shape = &p.fields[field].shape;
    // Activity changes only from one cell of the innermost sparse level to
    // the next, so walk once per such cell, not once per element.
    let mut out = vec![0u8; shape.iter().map(|&s| s as usize).product()];
    let outer_level = &plan.levels[outer];
    plan.for_each_block(shape, words, |first, lin0, (_, active), table| {
        let outer_active = block_plan.read_address(first, words).1;
        let block_active = outline && outer_active;
        let mut at = [0u32; 3];
        for e in table {
            let mut flags = 0;
            if outer_active {
                flags |= OUTER_ACTIVE;
            }
            if active {
                flags |= CELL_ACTIVE;
            }
            if block_active {
                for (d, a) in at.iter_mut().enumerate().take(first.len()) {
                    *a = first[d] + e.local[d];
                }
                if on_block_edge(outer_level, &at[..first.len()]) {
                    flags |= BLOCK_EDGE;
                }
            }
            out[lin0 + e.lin] = flags;
        }
    });
    Some(out)
}

fn is_sparse_level(level: &LevelPlan) -> bool {
    !matches!(level.kind, LayoutKind::Dense)
}

fn on_block_edge(level: &LevelPlan, index: &[u32]) -> bool {
    level.axes.iter().zip(index).any(|(a, &i)| {
        let r = i as u64 % a.divisor;
        r == 0 || r == a.divisor - 1
    })
}

/// Inactive cells of a `show_active` image: a two-tone grey checkerboard of
/// 8-pixel squares, unlike any colormap's colours.
pub fn inactive_rgb(x: u32, y: u32) -> [f32; 3] {
    if (x / 8 + y / 8).is_multiple_of(2) {
        [0.16, 0.16, 0.18]
    } else {
        [0.22, 0.22, 0.25]
    }
}

/// Renders one view from field data read with `read(field) -> words`;
/// `activity(field)` gives an `activity_mask` for `show_active` images.
pub fn render_view(
    p: &Program,
    view: &View,
    read: &dyn Fn(FieldId) -> Vec<u32>,
    activity: &dyn Fn(FieldId) -> Option<Vec<u8>>,
) -> Image {
    match view {
        View::Image {
            field,
            colormap: map,
            range,
            show_active,
            ..
        } => {
            let mask = if *show_active { activity(*field) } else { None };
            let f = &p.fields[*field];
            let (fw, fh) = (f.shape[0], f.shape[1]);
            // Large fields are drawn every `stride`-th cell (the pass's rule).
            let stride = weft_ir::passes::views::image_stride(fw, fh);
            let (w, h) = (fw.div_ceil(stride), fh.div_ceil(stride));
            let cell_of = |x: u32, y: u32| (x * stride * fh + y * stride) as usize;
            let (words, vty) = view_words(f.ty, read(*field));
            let mut img = Image::new(w, h, [0, 0, 0, 255]);
            let comps = f.ty.components();
            let value = |k: usize| -> f32 {
                let b = words[k];
                match vty.scalar() {
                    Some(Scalar::I32) => b as i32 as f32,
                    Some(Scalar::U32) => b as f32,
                    _ => f32::from_bits(b),
                }
            };
            let (lo, hi) = match range {
                Some(r) => *r,
                None if comps == 1 => {
                    let mut lo = f32::INFINITY;
                    let mut hi = f32::NEG_INFINITY;
                    for x in 0..w {
                        for y in 0..h {
                            let v = value(cell_of(x, y));
                            if v.is_finite() {
                                lo = lo.min(v);
                                hi = hi.max(v);
                            }
                        }
                    }
                    if lo > hi {
                        (0.0, 1.0)
                    } else {
                        (lo, hi)
                    }
                }
                None => (0.0, 1.0),
            };
            let span = if hi > lo { hi - lo } else { 1.0 };
            let poly = colormap_poly(*map);
            for x in 0..w {
                for y in 0..h {
                    let cell = cell_of(x, y);
                    let flags = mask.as_ref().map_or(CELL_ACTIVE, |m| m[cell]);
                    let mut rgb = if flags & CELL_ACTIVE == 0 {
                        inactive_rgb(x, y)
                    } else if comps == 1 {
                        colormap_with(*map, poly.as_ref(), (value(cell) - lo) / span)
                    } else {
                        let c = |k: usize| (value(cell * comps + k) - lo) / span;
                        [c(0), c(1), c(2)]
                    };
                    if flags & BLOCK_EDGE != 0 {
                        for (c, o) in rgb.iter_mut().zip(OUTLINE_RGB) {
                            *c += (o - c.clamp(0.0, 1.0)) * OUTLINE_ALPHA;
                        }
                    }
                    let alpha = if f.ty == Type::Vector(Scalar::F32, 4) {
                        value(cell * 4 + 3)
                    } else {
                        1.0
                    };
                    let i = (((h - 1 - y) * w + x) * 4) as usize;
                    img.rgba[i..i + 4].copy_from_slice(&[
                        to_u8(rgb[0]),
                        to_u8(rgb[1]),
                        to_u8(rgb[2]),
                        to_u8(alpha),
                    ]);
                }
            }
            img
        }
        View::Particles {
            positions,
            color_field,
            color,
            background,
            radius,
            width,
            height,
            domain,
            scene,
            ..
        } => {
            if let Some(scene) = scene {
                let (mut img, depth) = particles_3d_view(p, view, read).expect("a 3-D view");
                overlay_3d(&mut img, &depth, scene);
                return img;
            }
            let bg = [
                to_u8(background[0]),
                to_u8(background[1]),
                to_u8(background[2]),
                255,
            ];
            let mut img = Image::new(*width, *height, bg);
            let pos = read(*positions);
            let colors = color_field.map(|c| (read(c), p.fields[c].ty));
            let n = pos.len() / 2;
            let (w, h) = (*width as f32, *height as f32);
            let rad = radius.max(0.0);
            for k in 0..n {
                let (px, py) = (f32::from_bits(pos[2 * k]), f32::from_bits(pos[2 * k + 1]));
                if !px.is_finite() || !py.is_finite() {
                    continue;
                }
                let cx = (px - domain[0]) / (domain[2] - domain[0]) * w;
                let cy = (1.0 - (py - domain[1]) / (domain[3] - domain[1])) * h;
                let rgb = match &colors {
                    Some((c, Type::Vector(..))) => [
                        f32::from_bits(c[3 * k]),
                        f32::from_bits(c[3 * k + 1]),
                        f32::from_bits(c[3 * k + 2]),
                    ],
                    Some((c, _)) => {
                        let v = c[k];
                        [
                            ((v >> 16) & 255) as f32 / 255.0,
                            ((v >> 8) & 255) as f32 / 255.0,
                            (v & 255) as f32 / 255.0,
                        ]
                    }
                    None => *color,
                };
                let reach = rad + 1.0;
                let (x0, x1) = (
                    (cx - reach).floor().max(0.0) as i64,
                    (cx + reach).ceil().min(w - 1.0) as i64,
                );
                let (y0, y1) = (
                    (cy - reach).floor().max(0.0) as i64,
                    (cy + reach).ceil().min(h - 1.0) as i64,
                );
                for y in y0..=y1 {
                    for x in x0..=x1 {
                        let d =
                            ((x as f32 + 0.5 - cx).powi(2) + (y as f32 + 0.5 - cy).powi(2)).sqrt();
                        let cover = (rad + 0.5 - d).clamp(0.0, 1.0);
                        if cover <= 0.0 {
                            continue;
                        }
                        let i = ((y as u32 * width + x as u32) * 4) as usize;
                        for (c, &target) in rgb.iter().enumerate() {
                            let old = img.rgba[i + c] as f32 / 255.0;
                            img.rgba[i + c] = to_u8(old + (target - old) * cover);
                        }
                    }
                }
            }
            img
        }
        View::Plot {
            field,
            count,
            width,
            height,
            range,
            log,
            thickness,
            color,
            background,
            ..
        } => {
            let field = field.id().expect("a compiled program's plot reads a field");
            let count = count
                .as_ref()
                .map(|c| c.id().expect("a compiled program's plot count is a field"));
            let values: Vec<f32> = read(field).into_iter().map(f32::from_bits).collect();
            let count = count.map(|c| read(c)[0] as i32);
            plot(
                &values,
                count,
                *width,
                *height,
                *range,
                *log,
                *thickness,
                *color,
                *background,
            )
        }
        View::Volume { scene, .. } => {
            let (mut img, depth) = volume_view(p, view, read, activity);
            overlay_3d(&mut img, &depth, scene);
            img
        }
        View::Histogram {
            field,
            bins,
            width,
            height,
            range,
            log,
            color,
            background,
            ..
        } => {
            let values = histogram_values(p, *field, read, activity);
            let counts = histogram_counts(&values, *bins, *range);
            histogram(&counts.bins, *width, *height, *log, *color, *background)
        }
        View::Surface {
            field,
            mesh: drawn,
            level,
            max_triangles,
            color,
            background,
            width,
            height,
            scene,
            ..
        } => {
            let mesh = match drawn {
                // A mesh node's triangles, key = triangle index.
                Some((points, tris)) => {
                    let pts: Vec<f32> = read(*points).into_iter().map(f32::from_bits).collect();
                    read(*tris)
                        .chunks(3)
                        .enumerate()
                        .map(|(t, v)| {
                            let at = |k: usize| {
                                let i = v[k] as usize * 3;
                                [pts[i], pts[i + 1], pts[i + 2]]
                            };
                            ([at(0), at(1), at(2)], t as u32)
                        })
                        .collect()
                }
                None => {
                    let f = &p.fields[*field];
                    let shape = [f.shape[0], f.shape[1], f.shape[2]];
                    let values: Vec<f32> = read(*field).into_iter().map(f32::from_bits).collect();
                    surface_mesh(&values, shape, *level, &scene.domain)
                }
            };
            let (mut img, mut depth) = surface_depth(
                &mesh,
                *max_triangles,
                *color,
                *background,
                *width,
                *height,
                scene,
            );
            if scene.show_ground {
                let kept = &mesh[..mesh.len().min(*max_triangles as usize)];
                let mask = surface_shadows(kept, scene, *width, *height);
                ground_3d(&mut img, &mut depth, scene, *background, Some(&mask));
                // The overflow border stays over the ground.
                let b = weft_ir::passes::views::surface::OVERFLOW_BORDER;
                if mesh.len() > *max_triangles as usize {
                    for y in 0..*height {
                        for x in 0..*width {
                            if x < b || y < b || x >= width - b || y >= height - b {
                                let i = ((y * width + x) * 4) as usize;
                                img.rgba[i..i + 4].copy_from_slice(&[255, 0, 0, 255]);
                            }
                        }
                    }
                }
            }
            overlay_3d(&mut img, &depth, scene);
            img
        }
    }
}

/// The values a `histogram` view counts, from the definition in
/// `weft_ir::passes::views::histogram`: every element (active cells only
/// under a sparse layout), a scalar as f32, a vector's or matrix's
/// magnitude summed in component order.
/// A field's words as a view computes with them: a 64-bit component (two
/// words, low first) becomes the f32 it converts to (`as f32`, what the
/// view kernels do); other fields are unchanged. Gives the words' type.
fn view_words(ty: Type, words: Vec<u32>) -> (Vec<u32>, Type) {
    let Some(s) = ty.scalar().filter(|s| s.is_wide()) else {
        return (words, ty);
    };
    let f = words
        .chunks(2)
        .map(|w| {
            let b = w[0] as u64 | (w[1] as u64) << 32;
            let v = match s {
                Scalar::F64 => f64::from_bits(b) as f32,
                Scalar::I64 => b as i64 as f32,
                _ => b as f32,
            };
            v.to_bits()
        })
        .collect();
    (f, ty.with_scalar(Scalar::F32))
}

pub fn histogram_values(
    p: &Program,
    field: FieldId,
    read: &dyn Fn(FieldId) -> Vec<u32>,
    activity: &dyn Fn(FieldId) -> Option<Vec<u8>>,
) -> Vec<f32> {
    let f = &p.fields[field];
    let comps = f.ty.components();
    let (words, vty) = view_words(f.ty, read(field));
    let mask = activity(field);
    let scalar = |b: u32| -> f32 {
        match vty.scalar() {
            Some(Scalar::I32) => b as i32 as f32,
            Some(Scalar::U32) => b as f32,
            _ => f32::from_bits(b),
        }
    };
    (0..words.len() / comps)
        .filter(|&k| mask.as_ref().is_none_or(|m| m[k] & CELL_ACTIVE != 0))
        .map(|k| {
            let w = &words[k * comps..(k + 1) * comps];
            if comps == 1 {
                scalar(w[0])
            } else {
                let mut acc = scalar(w[0]) * scalar(w[0]);
                for &c in &w[1..] {
                    acc += scalar(c) * scalar(c);
                }
                acc.sqrt()
            }
        })
        .collect()
}

/// A histogram's counts: per bin, non-finite, below and above a fixed range.
pub struct HistogramCounts {
    pub bins: Vec<u32>,
    pub nonfinite: u32,
    pub outside: [u32; 2],
}

/// Counts `values` into `bins` bins of `range` (auto: the finite values'
/// min..max, 0..1 when there are none), as the view's count kernel does.
pub fn histogram_counts(values: &[f32], bins: u32, range: Option<(f32, f32)>) -> HistogramCounts {
    let finite = values.iter().copied().filter(|v| v.is_finite());
    let (lo, hi) = range.unwrap_or_else(|| {
        let lo = finite.clone().fold(f32::INFINITY, f32::min);
        let hi = finite.fold(f32::NEG_INFINITY, f32::max);
        if lo > hi {
            (0.0, 1.0)
        } else {
            (lo, hi)
        }
    });
    let span = if hi > lo { hi - lo } else { 1.0 };
    let mut out = HistogramCounts {
        bins: vec![0; bins as usize],
        nonfinite: 0,
        outside: [0, 0],
    };
    for &v in values {
        if !v.is_finite() {
            out.nonfinite += 1;
        } else if v < lo {
            out.outside[0] += 1;
        } else if v > hi {
            out.outside[1] += 1;
        } else {
            let b = (((v - lo) / span) * bins as f32)
                .floor()
                .clamp(0.0, bins as f32 - 1.0) as usize;
            out.bins[b] += 1;
        }
    }
    out
}

/// A `histogram` view's picture of `counts`: one bar per bin, one pixel
/// column at a time (`weft_ir::passes::views::histogram`).
pub fn histogram(
    counts: &[u32],
    width: u32,
    height: u32,
    log: bool,
    color: [f32; 3],
    background: [f32; 3],
) -> Image {
    let word = |c: [f32; 3]| [to_u8(c[0]), to_u8(c[1]), to_u8(c[2]), 255];
    let mut img = Image::new(width, height, word(background));
    let bar = word(color);
    let bins = counts.len() as i32;
    let f = |c: u32| {
        if log {
            (1.0 + c as f32).log2()
        } else {
            c as f32
        }
    };
    let peak = counts.iter().copied().max().unwrap_or(0);
    let bin_of = |x: i32| x * bins / width as i32;
    for x in 0..width as i32 {
        let b = bin_of(x);
        let c = counts[b as usize];
        let frac = if peak > 0 { f(c) / f(peak) } else { 0.0 };
        let mut rows = (frac * height as f32 + 0.5).floor() as i32;
        if c > 0 {
            rows = rows.max(1);
        }
        let gap = width as i32 >= 4 * bins && x > 0 && bin_of(x - 1) != b;
        if gap {
            continue;
        }
        for r in (height as i32 - rows).max(0)..height as i32 {
            let i = ((r as u32 * width + x as u32) * 4) as usize;
            img.rgba[i..i + 4].copy_from_slice(&bar);
        }
    }
    img
}

/// A `plot` view from the definition in `weft_ir::passes::views::plot`:
/// the last values of a ring (or all of `values`) as a polyline, one
/// pixel column at a time.
#[allow(clippy::too_many_arguments)]
pub fn plot(
    values: &[f32],
    count: Option<i32>,
    width: u32,
    height: u32,
    range: Option<(f32, f32)>,
    log: bool,
    thickness: u32,
    color: [f32; 3],
    background: [f32; 3],
) -> Image {
    let n = values.len() as i32;
    let (m, start) = match count {
        None => (n, 0),
        Some(c) => (c.clamp(0, n), if c > n { c % n } else { 0 }),
    };
    let log10 = |v: f32| v.log2() * std::f32::consts::LOG10_2;
    // Point k: its value in plotted units, if drawn.
    let point = |k: i32| -> Option<f32> {
        let v = values[((start + k) % n) as usize];
        let y = if log { log10(v) } else { v };
        (y.is_finite() && (!log || v > 0.0)).then_some(y)
    };
    let (lo, hi) = match range {
        Some((a, b)) if log => (log10(a), log10(b)),
        Some(r) => r,
        None => {
            let ys: Vec<f32> = (0..m).filter_map(point).collect();
            if ys.is_empty() {
                (0.0, 1.0)
            } else {
                (
                    ys.iter().copied().fold(f32::INFINITY, f32::min),
                    ys.iter().copied().fold(f32::NEG_INFINITY, f32::max),
                )
            }
        }
    };
    let row = |y: f32| -> f32 {
        let t = if hi > lo { (y - lo) / (hi - lo) } else { 0.5 };
        let r = (1.0 - t) * (height as f32 - 1.0);
        if r.is_nan() || r < -1.0 {
            -1.0
        } else {
            r.min(height as f32)
        }
    };
    let zero_row = (!log && lo < 0.0 && hi > 0.0).then(|| (row(0.0) + 0.5).floor() as i32);
    let sx = if m > 1 {
        (width as f32 - 1.0) / (m - 1) as f32
    } else {
        0.0
    };
    let word = |c: [f32; 3]| [to_u8(c[0]), to_u8(c[1]), to_u8(c[2]), 255];
    let mut img = Image::new(width, height, word(background));
    let axis = word(weft_ir::ir::colormap::PLOT_AXIS_RGB);
    let line = word(color);
    for x in 0..width {
        let (a, b) = (x as f32 - 0.5, x as f32 + 0.5);
        let xk = |k: i32| k as f32 * sx;
        // Every k whose point or segment may touch the column (all of them
        // when the scale is 0); the tests below decide.
        let ks = if sx > 0.0 {
            let top = (m - 1).max(0) as f32;
            let k0 = ((a / sx).floor() - 1.0).clamp(0.0, top) as i32;
            let k1 = ((b / sx).ceil() + 1.0).clamp(0.0, top) as i32;
            k0..=k1
        } else {
            0..=m - 1
        };
        let mut ys: Vec<f32> = Vec::new();
        for k in ks {
            let Some(y) = point(k) else { continue };
            let (x1, r1) = (xk(k), row(y));
            if a <= x1 && x1 <= b {
                ys.push(r1);
            }
            if k + 1 >= m {
                continue;
            }
            let Some(y2) = point(k + 1) else { continue };
            let (x2, r2) = (xk(k + 1), row(y2));
            let (xa, xb) = (x1.max(a), x2.min(b));
            if xa > xb {
                continue;
            }
            if x2 - x1 > 0.0 {
                let at = |xp: f32| r1 + (r2 - r1) * ((xp - x1) / (x2 - x1));
                ys.push(at(xa));
                ys.push(at(xb));
            } else {
                ys.push(r1);
                ys.push(r2);
            }
        }
        let lit = (!ys.is_empty()).then(|| {
            let lo = ys.iter().copied().fold(f32::INFINITY, f32::min);
            let hi = ys.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let w = thickness as i32;
            (
                (lo + 0.5).floor() as i32 - (w - 1) / 2,
                (hi + 0.5).floor() as i32 + w / 2,
            )
        });
        for r in 0..height as i32 {
            let c = match lit {
                Some((r0, r1)) if r0 <= r && r <= r1 => line,
                _ if zero_row == Some(r) => axis,
                _ => continue,
            };
            let i = ((r as u32 * width + x) * 4) as usize;
            img.rgba[i..i + 4].copy_from_slice(&c);
        }
    }
    img
}

/// The frame constants of an orbit camera, from the definition in
/// `weft_ir::passes::views::camera` (f64 on the host, rounded to f32).
pub struct CameraFrame {
    pub eye: [f32; 3],
    pub right: [f32; 3],
    pub up: [f32; 3],
    pub back: [f32; 3],
    pub focal: f32,
    pub near: f32,
    pub half: [f32; 2],
}

fn sin_cos_deg(deg: f64) -> (f64, f64) {
    let q = deg.rem_euclid(360.0);
    if q == 0.0 {
        (0.0, 1.0)
    } else if q == 90.0 {
        (1.0, 0.0)
    } else if q == 180.0 {
        (0.0, -1.0)
    } else if q == 270.0 {
        (-1.0, 0.0)
    } else {
        deg.to_radians().sin_cos()
    }
}

impl CameraFrame {
    pub fn new(c: &Camera, width: u32, height: u32) -> CameraFrame {
        let (sy, cy) = sin_cos_deg(c.yaw as f64);
        let (sp, cp) = sin_cos_deg(c.pitch as f64);
        let back = [cp * sy, sp, cp * cy];
        let d = c.distance as f64;
        CameraFrame {
            eye: [0, 1, 2].map(|i| (c.target[i] as f64 + d * back[i]) as f32),
            right: [cy as f32, 0.0, -sy as f32],
            up: [(-sp * sy) as f32, cp as f32, (-sp * cy) as f32],
            back: back.map(|x| x as f32),
            focal: (0.5 * height as f64 / (0.5 * (c.fov as f64).to_radians()).tan()) as f32,
            near: (0.001 * d) as f32,
            half: [width as f32 * 0.5, height as f32 * 0.5],
        }
    }

    /// `(cx, cy, depth)` of a world point in pixels, `None` when it is not
    /// visible (non-finite, or not beyond the near plane).
    pub fn project(&self, p: [f32; 3]) -> Option<(f32, f32, f32)> {
        if !p.iter().all(|x| x.is_finite()) {
            return None;
        }
        let d = [p[0] - self.eye[0], p[1] - self.eye[1], p[2] - self.eye[2]];
        let dot = |b: [f32; 3]| d[0] * b[0] + d[1] * b[1] + d[2] * b[2];
        let (xc, yc, depth) = (dot(self.right), dot(self.up), -dot(self.back));
        let cx = self.half[0] + (xc / depth) * self.focal;
        let cy = self.half[1] - (yc / depth) * self.focal;
        (depth > self.near && cx.is_finite() && cy.is_finite()).then_some((cx, cy, depth))
    }

    /// The projected ends of the world segment `a`..`b` clipped at the
    /// near plane (`overlay3d::clipped_edge`), `None` when it is not drawn.
    #[allow(clippy::type_complexity)]
    pub fn clip_edge(
        &self,
        a: [f32; 3],
        b: [f32; 3],
    ) -> Option<((f32, f32, f32), (f32, f32, f32))> {
        use weft_ir::passes::views::overlay3d::NEAR_CLIP;
        let depth = |p: [f32; 3]| {
            let d = [p[0] - self.eye[0], p[1] - self.eye[1], p[2] - self.eye[2]];
            -(d[0] * self.back[0] + d[1] * self.back[1] + d[2] * self.back[2])
        };
        match (self.project(a), self.project(b)) {
            (Some(p), Some(q)) => Some((p, q)),
            (None, None) => None,
            (p, q) => {
                let zc = self.near * NEAR_CLIP;
                let (da, db) = (depth(a), depth(b));
                let front = if p.is_some() { da } else { db };
                if front <= zc {
                    return None;
                }
                let u = (zc - da) / (db - da);
                let c: [f32; 3] = std::array::from_fn(|i| a[i] + (b[i] - a[i]) * u);
                let p = p.or_else(|| self.project(c))?;
                let q = q.or_else(|| self.project(c))?;
                // Clip the line to the image grown by a pixel.
                let (dx, dy) = (q.0 - p.0, q.1 - p.1);
                let wx = self.half[0] * 2.0 + 1.0;
                let wy = self.half[1] * 2.0 + 1.0;
                let (mut s0, mut s1) = (0.0f32, 1.0f32);
                for (pk, qk) in [
                    (-dx, p.0 - -1.0),
                    (dx, wx - p.0),
                    (-dy, p.1 - -1.0),
                    (dy, wy - p.1),
                ] {
                    let r = qk / pk;
                    if pk < 0.0 {
                        s0 = s0.max(r);
                    }
                    if pk > 0.0 {
                        s1 = s1.min(r);
                    }
                    if pk == 0.0 && qk < 0.0 {
                        return None;
                    }
                }
                if s0 > s1 {
                    return None;
                }
                let (ip, iq) = (1.0 / p.2, 1.0 / q.2);
                let at = |s: f32| (p.0 + dx * s, p.1 + dy * s, 1.0 / (ip + (iq - ip) * s));
                Some((at(s0), at(s1)))
            }
        }
    }
}

/// A 3-D `particles` view from the definition in
/// `weft_ir::passes::views::particles3d`, painted particle by particle
/// with a depth test (nearer wins; equal depth: lower index) instead of
/// the kernels' atomic passes.
pub fn particles_3d(
    points: &[[f32; 3]],
    color_of: &dyn Fn(usize) -> [f32; 3],
    background: [f32; 3],
    radius: f32,
    width: u32,
    height: u32,
    camera: &Camera,
) -> Image {
    particles_3d_depth(points, color_of, background, radius, width, height, camera).0
}

/// `particles_3d` and its depth words (`ViewKernels::depth`: the bits of
/// the nearest covering particle's depth, `u32::MAX` where none).
pub fn particles_3d_depth(
    points: &[[f32; 3]],
    color_of: &dyn Fn(usize) -> [f32; 3],
    background: [f32; 3],
    radius: f32,
    width: u32,
    height: u32,
    camera: &Camera,
) -> (Image, Vec<u32>) {
    const LIGHT: [f32; 3] = [-0.4, 0.6, 0.692_820_3];
    let fr = CameraFrame::new(camera, width, height);
    let bg = [
        to_u8(background[0]),
        to_u8(background[1]),
        to_u8(background[2]),
        255,
    ];
    let mut img = Image::new(width, height, bg);
    let mut best: Vec<Option<(f32, usize)>> = vec![None; (width * height) as usize];
    let (w, h) = (width as f32, height as f32);
    let reach = radius + 1.0;
    for (k, &p) in points.iter().enumerate() {
        let Some((cx, cy, depth)) = fr.project(p) else {
            continue;
        };
        if !(cx > -reach && cx < w + reach && cy > -reach && cy < h + reach) {
            continue;
        }
        let x0 = (cx - reach).floor().max(0.0) as i64;
        let x1 = (cx + reach).ceil().min(w - 1.0) as i64;
        let y0 = (cy - reach).floor().max(0.0) as i64;
        let y1 = (cy + reach).ceil().min(h - 1.0) as i64;
        let rw = (radius * depth) / fr.focal;
        let ir2 = (1.0 / (radius as f64 * radius as f64)) as f32;
        for y in y0..=y1 {
            for x in x0..=x1 {
                let dx = (x as f32 + 0.5) - cx;
                let dy = cy - (y as f32 + 0.5);
                let dd = dx * dx + dy * dy;
                if dd > radius * radius {
                    continue;
                }
                let nz = (1.0 - dd * ir2).max(0.0).sqrt();
                let z = (depth - rw * nz).max(fr.near);
                let b = &mut best[(y as u32 * width + x as u32) as usize];
                if b.is_none_or(|(d, _)| z < d) {
                    *b = Some((z, k));
                }
            }
        }
    }
    let ir = (1.0 / radius as f64) as f32;
    let ir2 = (1.0 / (radius as f64 * radius as f64)) as f32;
    for y in 0..height {
        for x in 0..width {
            let Some((_, k)) = best[(y * width + x) as usize] else {
                continue;
            };
            let (cx, cy, _) = fr.project(points[k]).expect("a winner is visible");
            let dx = (x as f32 + 0.5) - cx;
            let dy = cy - (y as f32 + 0.5);
            let dd = dx * dx + dy * dy;
            let n = [dx * ir, dy * ir, (1.0 - dd * ir2).max(0.0).sqrt()];
            let ndl = (n[0] * LIGHT[0] + n[1] * LIGHT[1] + n[2] * LIGHT[2]).max(0.0);
            let shade = 0.25 + 0.75 * ndl;
            let c = color_of(k);
            let i = ((y * width + x) * 4) as usize;
            img.rgba[i..i + 4].copy_from_slice(&[
                to_u8(c[0] * shade),
                to_u8(c[1] * shade),
                to_u8(c[2] * shade),
                255,
            ]);
        }
    }
    let depth = best
        .iter()
        .map(|b| b.map_or(u32::MAX, |(d, _)| d.to_bits()))
        .collect();
    (img, depth)
}

/// Whether the outermost sparse block holding a cell is active, and that
/// level's block size in cells.
pub type BlockActive<'a> = (&'a dyn Fn([usize; 3]) -> bool, [u32; 3]);

/// What a `volume` reference render reads: the field's values and block
/// activity, and what it draws over.
pub struct VolumeInput<'a> {
    /// The value of cell (i, j, k) as f32.
    pub value: &'a dyn Fn([usize; 3]) -> f32,
    pub shape: [u32; 3],
    /// Whether the outermost sparse block holding a cell is active
    /// (`None`: a dense field), and that level's block size in cells (the
    /// march skips an inactive block whole).
    pub block_active: Option<BlockActive<'a>>,
    /// `show_active`: the outermost sparse level's block size and the
    /// first cell of every active block.
    pub boxes: Option<([u32; 3], Vec<[u32; 3]>)>,
    /// The under view's picture and depth words (`[height * width]`).
    pub under: Option<(&'a Image, &'a [u32])>,
    /// `lit` mode's emission field: its values and (sparse) outer-block
    /// activity.
    pub emission: Option<(Cells<'a>, Option<Active<'a>>)>,
    /// Hashed per-pixel sample offsets (`volume_light::jitter`).
    pub jitter: bool,
}

/// The finite min and span of a field's values (active cells only), as an
/// auto range: `(0, 1)` when there is none, span 1 when all are equal.
fn auto_range(value: Cells, active: Option<Active>, shape: [u32; 3]) -> (f32, f32) {
    let (mut mn, mut mx) = (f32::INFINITY, f32::NEG_INFINITY);
    for i in 0..shape[0] as usize {
        for j in 0..shape[1] as usize {
            for k in 0..shape[2] as usize {
                let v = value([i, j, k]);
                if active.is_none_or(|a| a([i, j, k])) && v.is_finite() {
                    mn = mn.min(v);
                    mx = mx.max(v);
                }
            }
        }
    }
    if mn > mx {
        (0.0, 1.0)
    } else {
        (mn, if mx > mn { mx - mn } else { 1.0 })
    }
}

/// A `volume` view from the definition in `weft_ir::passes::views::volume`
/// (f32 operations in the same order): the picture and the depth words.
#[allow(clippy::too_many_arguments)]
pub fn volume(
    input: &VolumeInput,
    mode: &weft_ir::ir::VolumeMode,
    map: Colormap,
    range: Option<(f32, f32)>,
    background: [f32; 3],
    width: u32,
    height: u32,
    scene: &weft_ir::ir::Scene,
) -> (Image, Vec<u32>) {
    use weft_ir::ir::VolumeMode;
    let fr = CameraFrame::new(&scene.camera, width, height);
    let dom = scene.domain;
    let shape = input.shape;
    let poly = colormap_poly(map);
    let cmap = |t: f32| colormap_with(map, poly.as_ref(), t);
    let (lo, span) = match range {
        Some((a, b)) => (a, if b > a { b - a } else { 1.0 }),
        None => {
            let (mut mn, mut mx) = (f32::INFINITY, f32::NEG_INFINITY);
            for i in 0..shape[0] as usize {
                for j in 0..shape[1] as usize {
                    for k in 0..shape[2] as usize {
                        let v = (input.value)([i, j, k]);
                        let on = input.block_active.is_none_or(|(f, _)| f([i, j, k]));
                        if on && v.is_finite() {
                            mn = mn.min(v);
                            mx = mx.max(v);
                        }
                    }
                }
            }
            if mn > mx {
                (0.0, 1.0)
            } else {
                (mn, if mx > mn { mx - mn } else { 1.0 })
            }
        }
    };
    let cell: [f32; 3] =
        std::array::from_fn(|i| ((dom[i + 3] as f64 - dom[i] as f64) / shape[i] as f64) as f32);
    let sc: [f32; 3] =
        std::array::from_fn(|i| (shape[i] as f64 / (dom[i + 3] as f64 - dom[i] as f64)) as f32);
    let corners = |p: [f32; 3]| -> [(usize, usize, f32); 3] {
        std::array::from_fn(|i| {
            let n = shape[i];
            let g = ((p[i] - dom[i]) * sc[i] - 0.5).clamp(0.0, (n - 1) as f32);
            let fl = g.floor();
            let i0 = fl as i32;
            let i1 = (i0 + 1).min(n as i32 - 1);
            (i0 as usize, i1 as usize, g - fl)
        })
    };
    let active = |c: &[(usize, usize, f32); 3]| {
        input
            .block_active
            .is_none_or(|(f, _)| f([c[0].0, c[1].0, c[2].0]))
    };
    // The sample index to jump to from an inactive block (`volume::skip_to`).
    let skip_to = |c: &[(usize, usize, f32); 3],
                   eye: [f32; 3],
                   inv: [f32; 3],
                   t0: f32,
                   dt: f32,
                   off: f32|
     -> i32 {
        let size = input.block_active.map_or([1; 3], |(_, s)| s);
        let mut exit = f32::INFINITY;
        for i in 0..3 {
            let sz = size[i].max(1) as i32;
            let b0 = (c[i].0 as i32 / sz) * sz;
            let b1 = b0 + sz;
            let face = |j: i32| dom[i] + (j as f32 + 0.5) * cell[i];
            let lo_b = if b0 == 0 { f32::NEG_INFINITY } else { face(b0) };
            let hi_b = if b1 >= shape[i] as i32 {
                f32::INFINITY
            } else {
                face(b1)
            };
            let out = ((lo_b - eye[i]) * inv[i]).max((hi_b - eye[i]) * inv[i]);
            exit = if i == 0 { out } else { exit.min(out) };
        }
        (((exit - t0) / dt - off).clamp(-1.0, 4096.0)).floor() as i32
    };
    let trilinear = |c: &[(usize, usize, f32); 3]| -> f32 {
        let v = |x: usize, y: usize, z: usize| {
            let pick = |k: usize, b: usize| if b == 0 { c[k].0 } else { c[k].1 };
            (input.value)([pick(0, x), pick(1, y), pick(2, z)])
        };
        let lerp = |a: f32, b: f32, f: f32| a + (b - a) * f;
        let (fx, fy, fz) = (c[0].2, c[1].2, c[2].2);
        let c00 = lerp(v(0, 0, 0), v(1, 0, 0), fx);
        let c10 = lerp(v(0, 1, 0), v(1, 1, 0), fx);
        let c01 = lerp(v(0, 0, 1), v(1, 0, 1), fx);
        let c11 = lerp(v(0, 1, 1), v(1, 1, 1), fx);
        lerp(lerp(c00, c10, fy), lerp(c01, c11, fy), fz)
    };
    // `lit`: the transmittance grids and the emission's range.
    let lit = match mode {
        VolumeMode::Lit(cfg) => Some(cfg.as_ref()),
        _ => None,
    };
    let outer = input.block_active.map(|(f, _)| f);
    let smoke = Smoke {
        value: input.value,
        active: outer,
        shape,
        dom,
        lo,
        span,
    };
    let grids: Vec<Grid> = match lit {
        Some(cfg) if cfg.shadow_density > 0.0 => (0..cfg.lights.len())
            .map(|l| volume_lit::transmittance(cfg, l, &smoke, input.jitter))
            .collect(),
        _ => Vec::new(),
    };
    let glow_ramp = |t: f32| {
        let map = lit
            .and_then(|c| c.emission)
            .map_or(Colormap::Blackbody, |e| e.colormap);
        colormap_with(map, colormap_poly(map).as_ref(), t)
    };
    let glow = match (lit.and_then(|c| c.emission), &input.emission) {
        (Some(spec), Some((value, active))) => {
            let (elo, espan) = match spec.range {
                Some((a, b)) => (a, if b > a { b - a } else { 1.0 }),
                None => auto_range(*value, *active, shape),
            };
            Some(Glow {
                value: *value,
                active: *active,
                lo: elo,
                span: espan,
                ramp: &glow_ramp,
            })
        }
        _ => None,
    };
    let mut img = Image::new(width, height, [0, 0, 0, 255]);
    let mut depth = vec![u32::MAX; (width * height) as usize];
    for y in 0..height {
        for x in 0..width {
            let px = y * width + x;
            let off = if input.jitter {
                volume_lit::jitter(x, y, width)
            } else {
                0.5
            };
            let a = ((x as f32 + 0.5) - fr.half[0]) / fr.focal;
            let b = (fr.half[1] - (y as f32 + 0.5)) / fr.focal;
            let d: [f32; 3] =
                std::array::from_fn(|i| (a * fr.right[i] + b * fr.up[i]) - fr.back[i]);
            let mut inv = [0.0f32; 3];
            let mut tn = [(0.0f32, 0.0f32); 3];
            for i in 0..3 {
                let dn = if d[i] == 0.0 { 1e-30 } else { d[i] };
                inv[i] = 1.0 / dn;
                let ta = (dom[i] - fr.eye[i]) * inv[i];
                let tb = (dom[i + 3] - fr.eye[i]) * inv[i];
                tn[i] = (ta.min(tb), ta.max(tb));
            }
            let tmin = tn[0].0.max(tn[1].0).max(tn[2].0);
            let tmax = tn[0].1.min(tn[1].1).min(tn[2].1);
            let t0 = tmin.max(fr.near);
            let (under_word, bg) = match input.under {
                Some((im, dw)) => {
                    let i = (px * 4) as usize;
                    (
                        dw[px as usize],
                        [0, 1, 2].map(|c| im.rgba[i + c] as f32 / 255.0),
                    )
                }
                None => (u32::MAX, background.map(|c| to_u8(c) as f32 / 255.0)),
            };
            let stop = if under_word != u32::MAX {
                f32::from_bits(under_word)
            } else {
                f32::INFINITY
            };
            let point = |t: f32| -> [f32; 3] { std::array::from_fn(|i| fr.eye[i] + t * d[i]) };
            let norm = |v: f32| (v - lo) / span;
            let mut rgb = [0.0f32; 3];
            let mut dep = under_word;
            match mode {
                VolumeMode::Emission { .. } | VolumeMode::Mip { .. } | VolumeMode::Lit(_) => {
                    let step = match mode {
                        VolumeMode::Emission { step, .. } | VolumeMode::Mip { step } => *step,
                        VolumeMode::Lit(l) => l.step,
                        VolumeMode::Slice { .. } => unreachable!(),
                    };
                    let t1 = tmax.min(stop);
                    let ds = step * cell[0].min(cell[1]).min(cell[2]);
                    let len = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();
                    let dt = ds / len;
                    let mut alpha = 0.0f32;
                    let mut best = f32::NEG_INFINITY;
                    let mut found = false;
                    if t0 < t1 {
                        let n = ((t1 - t0) / dt).ceil().min(4096.0) as i32;
                        let mut s = 0;
                        while s < n {
                            let k = s;
                            s += 1;
                            let t = t0 + (k as f32 + off) * dt;
                            if t >= t1 {
                                continue;
                            }
                            let c = corners(point(t));
                            if !active(&c) {
                                s = s.max(skip_to(&c, fr.eye, inv, t0, dt, off));
                                continue;
                            }
                            let v = trilinear(&c);
                            if let Some(cfg) = lit {
                                let tn = norm(v);
                                let tc = if tn.is_nan() { 0.0 } else { tn.clamp(0.0, 1.0) };
                                let a = 1.0 - (-((cfg.density * tc) * cfg.step)).exp();
                                let (scat, em) = volume_lit::shade(
                                    cfg,
                                    &grids,
                                    &dom,
                                    point(t),
                                    &c,
                                    glow.as_ref(),
                                );
                                let rest = 1.0 - alpha;
                                let w = rest * a;
                                for i in 0..3 {
                                    rgb[i] = (rgb[i] + w * scat[i]) + rest * em[i];
                                }
                                alpha += w;
                                if alpha >= 0.5 && !found {
                                    dep = t.to_bits();
                                    found = true;
                                }
                                if alpha >= 0.99 {
                                    break;
                                }
                            } else if let VolumeMode::Emission { density, step } = *mode {
                                let tn = norm(v);
                                let col = cmap(tn);
                                let tc = if tn.is_nan() { 0.0 } else { tn.clamp(0.0, 1.0) };
                                let a = 1.0 - (-((density * tc) * step)).exp();
                                let w = (1.0 - alpha) * a;
                                for i in 0..3 {
                                    rgb[i] += w * col[i];
                                }
                                alpha += w;
                                if alpha >= 0.5 && !found {
                                    dep = t.to_bits();
                                    found = true;
                                }
                                if alpha >= 0.99 {
                                    break;
                                }
                            } else if v.is_finite() && v > best {
                                best = v;
                                dep = t.to_bits();
                                found = true;
                            }
                        }
                    }
                    if let VolumeMode::Emission { .. } | VolumeMode::Lit(_) = mode {
                        for i in 0..3 {
                            rgb[i] += (1.0 - alpha) * bg[i];
                        }
                    } else {
                        rgb = if found { cmap(norm(best)) } else { bg };
                    }
                }
                &VolumeMode::Slice { axis, position } => {
                    rgb = bg;
                    let a = axis as usize;
                    let lo_a = dom[a];
                    let plane = lo_a + position * (dom[a + 3] - lo_a);
                    let t = (plane - fr.eye[a]) * inv[a];
                    let p = point(t);
                    let others: Vec<usize> = (0..3).filter(|&i| i != a).collect();
                    let inside = others.iter().all(|&b| p[b] >= dom[b] && p[b] <= dom[b + 3]);
                    if t > fr.near && t < stop && inside {
                        let c = corners(p);
                        rgb = if active(&c) {
                            cmap(norm(trilinear(&c)))
                        } else {
                            [0.16, 0.16, 0.18]
                        };
                        let r = 1.5 * t / fr.focal;
                        if others
                            .iter()
                            .any(|&b| p[b] - dom[b] < r || dom[b + 3] - p[b] < r)
                        {
                            rgb = OUTLINE_RGB;
                        }
                        dep = t.to_bits();
                    }
                }
            }
            let i = (px * 4) as usize;
            img.rgba[i..i + 4].copy_from_slice(&[to_u8(rgb[0]), to_u8(rgb[1]), to_u8(rgb[2]), 255]);
            depth[px as usize] = dep;
        }
    }
    if let Some((size, blocks)) = &input.boxes {
        let word = OUTLINE_RGB.map(to_u8);
        for first in blocks {
            let faces: [[f32; 2]; 3] = std::array::from_fn(|i| {
                let end = (first[i] + size[i]).min(shape[i]);
                [first[i], end].map(|j| dom[i] + j as f32 * cell[i])
            });
            let corner = |k: usize| {
                [
                    faces[0][k & 1],
                    faces[1][(k >> 1) & 1],
                    faces[2][(k >> 2) & 1],
                ]
            };
            for a in 0..8usize {
                for bit in [1usize, 2, 4] {
                    if a & bit != 0 {
                        continue;
                    }
                    let Some((p, q)) = fr.clip_edge(corner(a), corner(a | bit)) else {
                        continue;
                    };
                    line((p.0, p.1), (q.0, q.1), width, height, |_, x, y| {
                        let i = ((y * width + x) * 4) as usize;
                        img.rgba[i..i + 4].copy_from_slice(&[word[0], word[1], word[2], 255]);
                    });
                }
            }
        }
    }
    (img, depth)
}

/// A 3-D `particles` view's picture and depth words.
fn particles_3d_view(
    p: &Program,
    view: &View,
    read: &dyn Fn(FieldId) -> Vec<u32>,
) -> Option<(Image, Vec<u32>)> {
    let View::Particles {
        positions,
        color_field,
        color,
        background,
        radius,
        width,
        height,
        scene: Some(scene),
        ..
    } = view
    else {
        return None;
    };
    let pos = read(*positions);
    let colors = color_field.map(|c| (read(c), p.fields[c].ty));
    let color_of = |k: usize| match &colors {
        Some((c, Type::Vector(..))) => [
            f32::from_bits(c[3 * k]),
            f32::from_bits(c[3 * k + 1]),
            f32::from_bits(c[3 * k + 2]),
        ],
        Some((c, _)) => {
            let v = c[k];
            [
                ((v >> 16) & 255) as f32 / 255.0,
                ((v >> 8) & 255) as f32 / 255.0,
                (v & 255) as f32 / 255.0,
            ]
        }
        None => *color,
    };
    let points: Vec<[f32; 3]> = pos
        .chunks(3)
        .map(|c| [0, 1, 2].map(|i| f32::from_bits(c[i])))
        .collect();
    let (mut img, mut depth) = particles_3d_depth(
        &points,
        &color_of,
        *background,
        *radius,
        *width,
        *height,
        &scene.camera,
    );
    if scene.show_ground {
        let mask = particle_shadows(&points, *radius, scene, *width, *height);
        ground_3d(&mut img, &mut depth, scene, *background, Some(&mask));
    }
    Some((img, depth))
}

/// A `volume` view's picture and depth words, reading its field (and the
/// view under it) like `render_view`. Sparse fields: samples and block
/// boxes follow the outermost sparse level's activity (`OUTER_ACTIVE`).
pub fn volume_view(
    p: &Program,
    view: &View,
    read: &dyn Fn(FieldId) -> Vec<u32>,
    activity: &dyn Fn(FieldId) -> Option<Vec<u8>>,
) -> (Image, Vec<u32>) {
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
        under,
        jitter,
        ..
    } = view
    else {
        panic!("not a volume view")
    };
    let f = &p.fields[*field];
    let shape = [f.shape[0], f.shape[1], f.shape[2]];
    let words = read(*field);
    let scalar = match f.ty {
        Type::Scalar(s) => s,
        t => panic!("a volume of {}", t),
    };
    let lin = |c: [usize; 3]| (c[0] * shape[1] as usize + c[1]) * shape[2] as usize + c[2];
    let value = |c: [usize; 3]| {
        let b = words[lin(c)];
        match scalar {
            Scalar::I32 => b as i32 as f32,
            Scalar::U32 => b as f32,
            _ => f32::from_bits(b),
        }
    };
    let mask = activity(*field);
    // The IR skips samples (and outlines blocks) by the outermost sparse
    // level's activity.
    let block_active = |c: [usize; 3]| mask.as_ref().is_none_or(|m| m[lin(c)] & OUTER_ACTIVE != 0);
    let plan = AddressPlan::new(p, *field);
    let boxes = match (&mask, plan.levels.iter().find(|l| is_sparse_level(l))) {
        (Some(m), Some(level)) if *show_active => {
            let size: [u32; 3] = std::array::from_fn(|i| level.axes[i].divisor as u32);
            let mut firsts = Vec::new();
            for a in (0..shape[0]).step_by(size[0] as usize) {
                for b in (0..shape[1]).step_by(size[1] as usize) {
                    for c in (0..shape[2]).step_by(size[2] as usize) {
                        if m[lin([a as usize, b as usize, c as usize])] & OUTER_ACTIVE != 0 {
                            firsts.push([a, b, c]);
                        }
                    }
                }
            }
            Some((size, firsts))
        }
        _ => None,
    };
    // A lit view's emission field: its values and outer-block activity.
    let emission = mode.emission_field().map(|ef| {
        let words = read(ef);
        let sc = match p.fields[ef].ty {
            Type::Scalar(s) => s,
            t => panic!("an emission field of {}", t),
        };
        let value = move |c: [usize; 3]| {
            let b = words[lin(c)];
            match sc {
                Scalar::I32 => b as i32 as f32,
                Scalar::U32 => b as f32,
                _ => f32::from_bits(b),
            }
        };
        let m = activity(ef);
        let sparse = AddressPlan::new(p, ef).levels.iter().any(is_sparse_level);
        let active = (sparse && m.is_some()).then(|| {
            let m = m.expect("checked");
            move |c: [usize; 3]| m[lin(c)] & OUTER_ACTIVE != 0
        });
        (value, active)
    });
    let under_view = match under {
        Some(u) => {
            let v = p
                .views
                .iter()
                .find(|v| v.node_id() == u)
                .expect("the under view exists");
            Some(particles_3d_view(p, v, read).expect("the under view is 3-D"))
        }
        // The ground, drawn first on the background, as a view under it.
        None if scene.show_ground => {
            let bg = background.map(to_u8);
            let mut img = Image::new(*width, *height, [bg[0], bg[1], bg[2], 255]);
            let mut depth = vec![u32::MAX; (*width * *height) as usize];
            ground_3d(&mut img, &mut depth, scene, *background, None);
            Some((img, depth))
        }
        None => None,
    };
    let input = VolumeInput {
        value: &value,
        shape,
        block_active: match (&mask, plan.levels.iter().find(|l| is_sparse_level(l))) {
            (Some(_), Some(level)) => Some((
                &block_active,
                std::array::from_fn(|i| level.axes[i].divisor as u32),
            )),
            _ => None,
        },
        boxes,
        under: under_view.as_ref().map(|(i, d)| (i, d.as_slice())),
        emission: emission
            .as_ref()
            .map(|(v, a)| (v as Cells, a.as_ref().map(|a| a as Active))),
        jitter: *jitter,
    };
    volume(
        &input,
        mode,
        *colormap,
        *range,
        *background,
        *width,
        *height,
        scene,
    )
}

/// A triangle of a `surface` view: its vertices and its key (`cell * 12 +
/// tet * 2 + j`).
pub type SurfaceTriangle = ([[f32; 3]; 3], u32);

/// The triangles of a `surface` view in key order, from the definition in
/// `weft_ir::passes::views::surface` (marching tetrahedra; `values`
/// row-major `[nx, ny, nz]`).
pub fn surface_mesh(
    values: &[f32],
    shape: [u32; 3],
    level: f32,
    domain: &[f32; 6],
) -> Vec<SurfaceTriangle> {
    // The 6 tets around the cell's diagonal from corner 0 to corner 7
    // (corner c = (c & 1, c >> 1 & 1, c >> 2 & 1)).
    const TETS: [[usize; 4]; 6] = [
        [0, 7, 1, 3],
        [0, 7, 3, 2],
        [0, 7, 2, 6],
        [0, 7, 6, 4],
        [0, 7, 4, 5],
        [0, 7, 5, 1],
    ];
    let [nx, ny, nz] = shape.map(|n| n as usize);
    let h: [f32; 3] = std::array::from_fn(|a| (domain[a + 3] - domain[a]) / shape[a] as f32);
    let mut out = Vec::new();
    for i in 0..nx - 1 {
        for j in 0..ny - 1 {
            for k in 0..nz - 1 {
                let cell = ((i * (ny - 1) + j) * (nz - 1) + k) as u32;
                let corner = |c: usize| [i + (c & 1), j + (c >> 1 & 1), k + (c >> 2 & 1)];
                let value = |c: usize| {
                    let [a, b, d] = corner(c);
                    values[(a * ny + b) * nz + d]
                };
                let point = |c: usize| -> [f32; 3] {
                    let g = corner(c);
                    std::array::from_fn(|a| domain[a] + (g[a] as f32 + 0.5) * h[a])
                };
                for (t, tet) in TETS.iter().enumerate() {
                    // The crossing on the tet edge between local corners a, b:
                    // from the lexicographically lower grid point.
                    let cross = |a: usize, b: usize| -> [f32; 3] {
                        let (ca, cb) = (corner(tet[a]), corner(tet[b]));
                        let (lo, hi) = if ca < cb {
                            (tet[a], tet[b])
                        } else {
                            (tet[b], tet[a])
                        };
                        let (vl, vh) = (value(lo), value(hi));
                        let (pl, ph) = (point(lo), point(hi));
                        let tt = (level - vl) / (vh - vl);
                        std::array::from_fn(|c| pl[c] + tt * (ph[c] - pl[c]))
                    };
                    let above: Vec<usize> = (0..4).filter(|&c| value(tet[c]) > level).collect();
                    let below: Vec<usize> = (0..4).filter(|c| !above.contains(c)).collect();
                    let tris: Vec<[[f32; 3]; 3]> = match (above.len(), below.len()) {
                        (1, 3) => {
                            let s = above[0];
                            vec![below.map_ref(|&o| cross(s, o))]
                        }
                        (3, 1) => {
                            let s = below[0];
                            vec![above.map_ref(|&o| cross(s, o))]
                        }
                        (2, 2) => {
                            let (a, b, c, d) = (above[0], above[1], below[0], below[1]);
                            let (ac, ad, bd, bc) =
                                (cross(a, c), cross(a, d), cross(b, d), cross(b, c));
                            vec![[ac, ad, bd], [ac, bd, bc]]
                        }
                        _ => vec![],
                    };
                    for (jj, tri) in tris.into_iter().enumerate() {
                        out.push((tri, cell * 12 + (t * 2 + jj) as u32));
                    }
                }
            }
        }
    }
    out
}

trait MapRef {
    fn map_ref(&self, f: impl Fn(&usize) -> [f32; 3]) -> [[f32; 3]; 3];
}

impl MapRef for Vec<usize> {
    fn map_ref(&self, f: impl Fn(&usize) -> [f32; 3]) -> [[f32; 3]; 3] {
        [f(&self[0]), f(&self[1]), f(&self[2])]
    }
}

/// A `surface` view from the definition in
/// `weft_ir::passes::views::surface`, painted triangle by triangle with a
/// depth test (nearer wins; equal depth: lower key) instead of the
/// kernels' atomic passes. The buffer keeps the first `max_triangles`
/// triangles in key order (the VM's order).
pub fn surface(
    mesh: &[SurfaceTriangle],
    max_triangles: u32,
    color: [f32; 3],
    background: [f32; 3],
    width: u32,
    height: u32,
    scene: &Scene,
) -> Image {
    surface_depth(mesh, max_triangles, color, background, width, height, scene).0
}

/// `surface` and its depth words (`ViewKernels::depth`: the bits of the
/// nearest triangle's depth, `u32::MAX` where none).
pub fn surface_depth(
    mesh: &[SurfaceTriangle],
    max_triangles: u32,
    color: [f32; 3],
    background: [f32; 3],
    width: u32,
    height: u32,
    scene: &Scene,
) -> (Image, Vec<u32>) {
    const LIGHT: [f32; 3] = [-0.303_045_8, 0.808_122_2, 0.505_076_3];
    let fr = CameraFrame::new(&scene.camera, width, height);
    let bg = [
        to_u8(background[0]),
        to_u8(background[1]),
        to_u8(background[2]),
        255,
    ];
    let mut img = Image::new(width, height, bg);
    let mut best: Vec<Option<(f32, u32, usize)>> = vec![None; (width * height) as usize];
    let edge = |a: (f32, f32), b: (f32, f32), p: (f32, f32)| {
        (b.0 - a.0) * (p.1 - a.1) - (b.1 - a.1) * (p.0 - a.0)
    };
    let kept = &mesh[..mesh.len().min(max_triangles as usize)];
    let project = |v: &[[f32; 3]; 3]| -> Option<[(f32, f32, f32); 3]> {
        Some([fr.project(v[0])?, fr.project(v[1])?, fr.project(v[2])?])
    };
    for (slot, (v, key)) in kept.iter().enumerate() {
        let Some(pr) = project(v) else { continue };
        let a = pr.map(|(x, y, _)| (x, y));
        let area = edge(a[0], a[1], a[2]);
        if area == 0.0 {
            continue;
        }
        let r = pr.map(|(_, _, d)| 1.0 / d);
        let span = |c: [f32; 3], n: u32| {
            let lo = c[0].min(c[1]).min(c[2]).floor().clamp(0.0, n as f32) as i64;
            let hi = c[0].max(c[1]).max(c[2]).ceil().clamp(-1.0, n as f32 - 1.0) as i64;
            (lo, hi)
        };
        let (x0, x1) = span(a.map(|p| p.0), width);
        let (y0, y1) = span(a.map(|p| p.1), height);
        for y in y0..=y1 {
            for x in x0..=x1 {
                let p = (x as f32 + 0.5, y as f32 + 0.5);
                let w = [
                    edge(a[1], a[2], p),
                    edge(a[2], a[0], p),
                    edge(a[0], a[1], p),
                ];
                let covers = w.iter().all(|&q| q >= 0.0) || w.iter().all(|&q| q <= 0.0);
                if !covers {
                    continue;
                }
                let d = area / (w[0] * r[0] + w[1] * r[1] + w[2] * r[2]);
                if !(d.is_finite() && d > 0.0) {
                    continue;
                }
                let b = &mut best[(y as u32 * width + x as u32) as usize];
                if b.is_none_or(|(bd, bk, _)| d < bd || (d == bd && *key < bk)) {
                    *b = Some((d, *key, slot));
                }
            }
        }
    }
    for y in 0..height {
        for x in 0..width {
            let i = ((y * width + x) * 4) as usize;
            if let Some((_, _, slot)) = best[(y * width + x) as usize] {
                let v = &kept[slot].0;
                let pr = project(v).expect("a winner is visible");
                let a = pr.map(|(x, y, _)| (x, y));
                let area = edge(a[0], a[1], a[2]);
                let e1: [f32; 3] = std::array::from_fn(|c| v[1][c] - v[0][c]);
                let e2: [f32; 3] = std::array::from_fn(|c| v[2][c] - v[0][c]);
                let n = [
                    e1[1] * e2[2] - e1[2] * e2[1],
                    e1[2] * e2[0] - e1[0] * e2[2],
                    e1[0] * e2[1] - e1[1] * e2[0],
                ];
                let len = (n[0] * n[0] + n[1] * n[1] + n[2] * n[2]).sqrt();
                let sign = if area > 0.0 { -1.0f32 } else { 1.0 };
                let lit = |l: [f32; 3]| {
                    if len > 0.0 {
                        (n[0] * l[0] + n[1] * l[1] + n[2] * l[2]) * (sign / len)
                    } else {
                        0.0
                    }
                };
                let (ndl, ndv) = (lit(LIGHT), lit(fr.back));
                let shade = (0.2 + 0.6 * ndl.max(0.0)) + 0.3 * ndv.max(0.0);
                img.rgba[i..i + 4].copy_from_slice(&[
                    to_u8(color[0] * shade),
                    to_u8(color[1] * shade),
                    to_u8(color[2] * shade),
                    255,
                ]);
            }
            let b = 3;
            if mesh.len() > max_triangles as usize
                && (x < b || y < b || x >= width - b || y >= height - b)
            {
                img.rgba[i..i + 4].copy_from_slice(&[255, 0, 0, 255]);
            }
        }
    }
    let depth = best
        .iter()
        .map(|b| b.map_or(u32::MAX, |(d, _, _)| d.to_bits()))
        .collect();
    (img, depth)
}

/// A line from pixel position `p` to `q`, from the definition in
/// `weft_ir::passes::views::overlay3d`: `plot(f, x, y)` per step inside
/// the image.
pub fn line(
    p: (f32, f32),
    q: (f32, f32),
    width: u32,
    height: u32,
    mut plot: impl FnMut(f32, u32, u32),
) {
    let (dx, dy) = (q.0 - p.0, q.1 - p.1);
    let m = dx.abs().max(dy.abs()).ceil().min(4096.0) as i32;
    let den = m.max(1) as f32;
    for s in 0..=m {
        let f = s as f32 / den;
        let gx = (p.0 + dx * f).floor();
        let gy = (p.1 + dy * f).floor();
        if gx >= 0.0 && gx < width as f32 && gy >= 0.0 && gy < height as f32 {
            plot(f, gx as u32, gy as u32);
        }
    }
}

/// The overlays of a 3-D view (`show_box`, `show_axes`) over its picture
/// and depth words, from the definition in
/// `weft_ir::passes::views::overlay3d`.
pub fn overlay_3d(img: &mut Image, depth: &[u32], scene: &Scene) {
    use weft_ir::passes::views::overlay3d::{AXIS_LEN, AXIS_RGB, BOX_RGB};
    let (width, height) = (img.width, img.height);
    let fr = CameraFrame::new(&scene.camera, width, height);
    let put = |img: &mut Image, x: u32, y: u32, rgb: [f32; 3]| {
        let i = ((y * width + x) * 4) as usize;
        img.rgba[i..i + 4].copy_from_slice(&[to_u8(rgb[0]), to_u8(rgb[1]), to_u8(rgb[2]), 255]);
    };
    if scene.show_box {
        let d = &scene.domain;
        let corner = |k: usize| -> [f32; 3] {
            std::array::from_fn(|i| if (k >> i) & 1 == 0 { d[i] } else { d[i + 3] })
        };
        for a in 0..8usize {
            for bit in [1usize, 2, 4] {
                if a & bit != 0 {
                    continue;
                }
                let Some((p, q)) = fr.clip_edge(corner(a), corner(a | bit)) else {
                    continue;
                };
                let (i0, i1) = (1.0 / p.2, 1.0 / q.2);
                line((p.0, p.1), (q.0, q.1), width, height, |f, x, y| {
                    let z = 1.0 / (i0 + (i1 - i0) * f);
                    if z.to_bits() < depth[(y * width + x) as usize] {
                        put(img, x, y, BOX_RGB);
                    }
                });
            }
        }
    }
    if scene.show_axes {
        let len = AXIS_LEN.min((width.min(height) as f32 / 4.0).floor());
        let off = (len * 1.25).floor();
        let o = (off + 0.5, (height as f32 - off) - 0.5);
        for (i, rgb) in AXIS_RGB.iter().enumerate() {
            let e = (o.0 + len * fr.right[i], o.1 - len * fr.up[i]);
            line(o, e, width, height, |_, x, y| put(img, x, y, *rgb));
        }
    }
}

/// Where a point casts its shadow on the ground plane `y0` along
/// `weft_ir::passes::views::surface::LIGHT`, `None` below the plane
/// (`weft_ir::passes::views::ground`).
fn ground_cast(p: [f32; 3], y0: f32) -> Option<[f32; 3]> {
    use weft_ir::passes::views::surface::LIGHT;
    let k = (p[1] - y0) / LIGHT[1];
    (p[1] >= y0).then_some([p[0] - LIGHT[0] * k, y0, p[2] - LIGHT[2] * k])
}

/// The shadow mask of a 3-D particles view (`ground::particle_shadows`).
pub fn particle_shadows(
    points: &[[f32; 3]],
    radius: f32,
    scene: &Scene,
    w: u32,
    h: u32,
) -> Vec<bool> {
    use weft_ir::passes::views::ground::MAX_SHADOW_RADIUS;
    let fr = CameraFrame::new(&scene.camera, w, h);
    let mut mask = vec![false; (w * h) as usize];
    for &p in points {
        let Some(s) = ground_cast(p, scene.domain[1]) else {
            continue;
        };
        let (Some(pp), Some(ps)) = (fr.project(p), fr.project(s)) else {
            continue;
        };
        let r = (radius * (pp.2 / ps.2)).min(MAX_SHADOW_RADIUS);
        let reach = r + 1.0;
        let x0 = (ps.0 - reach).floor().max(0.0) as i64;
        let x1 = (ps.0 + reach).ceil().min(w as f32 - 1.0) as i64;
        let y0 = (ps.1 - reach).floor().max(0.0) as i64;
        let y1 = (ps.1 + reach).ceil().min(h as f32 - 1.0) as i64;
        for y in y0..=y1 {
            for x in x0..=x1 {
                let dx = (x as f32 + 0.5) - ps.0;
                let dy = ps.1 - (y as f32 + 0.5);
                if dx * dx + dy * dy <= r * r {
                    mask[(y as u32 * w + x as u32) as usize] = true;
                }
            }
        }
    }
    mask
}

/// The shadow mask of a surface view (`ground::surface_shadows`).
pub fn surface_shadows(kept: &[SurfaceTriangle], scene: &Scene, w: u32, h: u32) -> Vec<bool> {
    let fr = CameraFrame::new(&scene.camera, w, h);
    let mut mask = vec![false; (w * h) as usize];
    let edge = |a: (f32, f32), b: (f32, f32), p: (f32, f32)| {
        (b.0 - a.0) * (p.1 - a.1) - (b.1 - a.1) * (p.0 - a.0)
    };
    for (v, _) in kept {
        let pr: Option<Vec<(f32, f32)>> = v
            .iter()
            .map(|&p| {
                let s = ground_cast(p, scene.domain[1])?;
                fr.project(s).map(|(x, y, _)| (x, y))
            })
            .collect();
        let Some(a) = pr else { continue };
        if edge(a[0], a[1], a[2]) == 0.0 {
            continue;
        }
        let span = |c: [f32; 3], n: u32| {
            let lo = c[0].min(c[1]).min(c[2]).floor().clamp(0.0, n as f32) as i64;
            let hi = c[0].max(c[1]).max(c[2]).ceil().clamp(-1.0, n as f32 - 1.0) as i64;
            (lo, hi)
        };
        let (x0, x1) = span([a[0].0, a[1].0, a[2].0], w);
        let (y0, y1) = span([a[0].1, a[1].1, a[2].1], h);
        for y in y0..=y1 {
            for x in x0..=x1 {
                let p = (x as f32 + 0.5, y as f32 + 0.5);
                let e = [
                    edge(a[1], a[2], p),
                    edge(a[2], a[0], p),
                    edge(a[0], a[1], p),
                ];
                if e.iter().all(|&q| q >= 0.0) || e.iter().all(|&q| q <= 0.0) {
                    mask[(y as u32 * w + x as u32) as usize] = true;
                }
            }
        }
    }
    mask
}

/// The ground of a 3-D view (`show_ground`) drawn into its picture and
/// depth words where it is nearer, from the definition in
/// `weft_ir::passes::views::ground`.
pub fn ground_3d(
    img: &mut Image,
    depth: &mut [u32],
    scene: &Scene,
    background: [f32; 3],
    mask: Option<&[bool]>,
) {
    use weft_ir::passes::views::ground::{
        Geometry, DEPTH_BIAS, LINE_ALPHA, LINE_RGB, PLANE_ALPHA, PLANE_RGB, SHADOW,
    };
    let (w, h) = (img.width, img.height);
    let fr = CameraFrame::new(&scene.camera, w, h);
    let g = Geometry::of(&scene.domain);
    for y in 0..h {
        for x in 0..w {
            let a = ((x as f32 + 0.5) - fr.half[0]) / fr.focal;
            let b = (fr.half[1] - (y as f32 + 0.5)) / fr.focal;
            let d: [f32; 3] =
                std::array::from_fn(|i| (a * fr.right[i] + b * fr.up[i]) - fr.back[i]);
            let t = (g.y0 - fr.eye[1]) / d[1];
            let hx = fr.eye[0] + t * d[0];
            let hz = fr.eye[2] + t * d[2];
            let m = (hx - g.centre[0]).abs().max((hz - g.centre[1]).abs());
            let key = (t * DEPTH_BIAS).to_bits();
            let px = (y * w + x) as usize;
            if !(t.is_finite() && t > fr.near && m < g.half && key < depth[px]) {
                continue;
            }
            let f = 1.0 - m / g.half;
            let dist = |hv: f32, o: f32| {
                let u = (hv - o) / g.step;
                (u - (u + 0.5).floor()).abs()
            };
            let dl = dist(hx, g.origin[0]).min(dist(hz, g.origin[1])) * g.step;
            let lw = t / fr.focal;
            let dn = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();
            let st = (lw * dn) / d[1].abs();
            let line = (1.0 - dl / lw).clamp(0.0, 1.0) * 1.0f32.min(g.step / (8.0 * st));
            let a_plane = PLANE_ALPHA * f;
            let a_line = (LINE_ALPHA * line) * f;
            let dark = mask.is_some_and(|m| m[px]);
            let i = px * 4;
            for c in 0..3 {
                let bg = background[c];
                let mut v = bg + (PLANE_RGB[c] - bg) * a_plane;
                v += (LINE_RGB[c] - v) * a_line;
                if dark {
                    v *= 1.0 - SHADOW * f;
                }
                img.rgba[i + c] = to_u8(v);
            }
            img.rgba[i + 3] = 255;
            depth[px] = key;
        }
    }
}
