//! Draws views to RGBA images on the CPU (used by `weft run`; the GPU
//! renderer of a later issue must match it within a small tolerance).
//!
//! Images: axis 0 of the field is x (left to right), axis 1 is y (bottom to
//! top), one pixel per cell. Particles: discs with a one-pixel soft edge,
//! drawn in index order.

use weft_ir::ir::layout::{AddressPlan, LevelPlan};
use weft_ir::ir::{Colormap, FieldId, LayoutKind, Program, View};
use weft_ir::types::{Scalar, Type};

#[derive(Clone, Debug, PartialEq)]
pub struct Image {
    pub width: u32,
    pub height: u32,
    /// Row-major from the top row, 4 bytes per pixel.
    pub rgba: Vec<u8>,
}

impl Image {
    pub fn new(width: u32, height: u32, bg: [u8; 4]) -> Image {
        let rgba = bg
            .iter()
            .copied()
            .cycle()
            .take((width * height * 4) as usize)
            .collect();
        Image {
            width,
            height,
            rgba,
        }
    }
    pub fn pixel(&self, x: u32, y: u32) -> [u8; 4] {
        let i = ((y * self.width + x) * 4) as usize;
        [
            self.rgba[i],
            self.rgba[i + 1],
            self.rgba[i + 2],
            self.rgba[i + 3],
        ]
    }
    /// True when every pixel has the same colour.
    pub fn is_blank(&self) -> bool {
        self.rgba.chunks(4).all(|p| p == &self.rgba[..4])
    }

    pub fn write_png(&self, path: &std::path::Path) -> Result<(), String> {
        let mut bytes = Vec::new();
        {
            let mut enc = png::Encoder::new(&mut bytes, self.width, self.height);
            enc.set_color(png::ColorType::Rgba);
            enc.set_depth(png::BitDepth::Eight);
            let mut w = enc.write_header().map_err(|e| e.to_string())?;
            w.write_image_data(&self.rgba).map_err(|e| e.to_string())?;
        }
        weft_ir::io::write_atomic(path, &bytes)
            .map_err(|e| format!("cannot write {}: {}", path.display(), e))
    }
}

fn to_u8(x: f32) -> u8 {
    (x.clamp(0.0, 1.0) * 255.0 + 0.5) as u8
}

/// Coefficients (powers t^0 .. t^6, per RGB channel) of polynomial fits of
/// matplotlib's perceptual colormaps (error well under 1/255). The CPU and
/// GPU renderers both evaluate these, so they cannot drift apart.
#[allow(clippy::excessive_precision)]
pub fn colormap_poly(map: Colormap) -> Option<[[f32; 3]; 7]> {
    Some(match map {
        Colormap::Viridis => [
            [0.277_727_3, 0.005_407_344_5, 0.334_099_8],
            [0.105_093_04, 1.404_613_5, 1.384_590_2],
            [-0.330_861_8, 0.214_847_56, 0.095_095_165],
            [-4.634_230_6, -5.799_101, -19.332_441],
            [6.228_27, 14.179_933, 56.690_55],
            [4.776_385, -13.745_145, -65.353_03],
            [-5.435_455_6, 4.645_852_6, 26.312_435],
        ],
        Colormap::Inferno => [
            [0.000_218_940_37, 0.001_651_004_6, -0.019_480_899],
            [0.106_513_42, 0.563_956_4, 3.932_712_4],
            [11.602_493, -3.972_854, -15.942_394],
            [-41.703_996, 17.436_399, 44.354_145],
            [77.162_94, -33.402_358, -81.807_304],
            [-71.319_43, 32.626_064, 73.209_52],
            [25.131_126, -12.242_669, -23.070_326],
        ],
        Colormap::Magma => [
            [-0.002_136_485, -0.000_749_655, -0.005_386_127],
            [0.251_660_5, 0.677_523_2, 2.494_026_6],
            [8.353_717, -3.577_719_5, 0.314_467_9],
            [-27.668_73, 14.264_73, -13.649_213],
            [52.176_14, -27.943_607, 12.944_169],
            [-50.768_52, 29.046_58, 4.234_153],
            [18.655_705, -11.489_774, -5.601_961_6],
        ],
        Colormap::Grayscale | Colormap::Coolwarm => return None,
    })
}

/// The cold, middle and warm colours of the coolwarm diverging map (linear between them).
pub const COOLWARM: [[f32; 3]; 3] = [
    [0.230, 0.299, 0.754],
    [0.865, 0.865, 0.865],
    [0.706, 0.016, 0.150],
];

/// A colormap's colour at `t` in 0..1 (NaN draws as 0).
pub fn colormap(map: Colormap, t: f32) -> [f32; 3] {
    colormap_with(map, colormap_poly(map).as_ref(), t)
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
        _ => [t, t, t],
    }
}

/// `activity_mask` bit: every layout level above the cell is active.
pub const CELL_ACTIVE: u8 = 1;
/// `activity_mask` bit: the cell lies on the border of an active cell of the
/// outermost sparse node (the "blocks" an overlay outlines).
pub const BLOCK_EDGE: u8 = 2;

/// The outermost sparse level of `plan` whose cells span at least this many
/// elements per axis gets outlines; finer levels would paint every cell.
pub const MIN_OUTLINED_BLOCK: u64 = 4;

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
        let block_active = outline && block_plan.read_address(first, words).1;
        let mut at = [0u32; 3];
        for e in table {
            let mut flags = 0;
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

/// Outline colour of active blocks, blended over the cell colour.
pub const OUTLINE_RGB: [f32; 3] = [1.0, 0.85, 0.2];
pub const OUTLINE_ALPHA: f32 = 0.75;

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
            let (w, h) = (f.shape[0], f.shape[1]);
            let words = read(*field);
            let mut img = Image::new(w, h, [0, 0, 0, 255]);
            let comps = f.ty.components();
            let value = |k: usize| -> f32 {
                let b = words[k];
                match f.ty.scalar() {
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
                    for k in 0..words.len() {
                        let v = value(k);
                        if v.is_finite() {
                            lo = lo.min(v);
                            hi = hi.max(v);
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
                    let cell = (x * h + y) as usize;
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
            ..
        } => {
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
    }
}
