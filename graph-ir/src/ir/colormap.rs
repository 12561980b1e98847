//! The colours views draw with: colormap polynomials, the `show_active`
//! overlay colours and the RGBA8 packing. The view kernels
//! (`passes::views`) evaluate these in IR on every backend; this module is
//! the one copy of the numbers (the app's legend evaluates the same
//! formulas on the host through [`colormap`]).

use super::Colormap;

/// Coefficients (powers t^0 .. t^6, per RGB channel) of polynomial fits of
/// matplotlib's perceptual colormaps (error well under 1/255); `None` for
/// the maps that are not polynomials (grayscale, coolwarm).
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
        Colormap::Grayscale | Colormap::Coolwarm | Colormap::Blackbody => return None,
    })
}

/// The cold, middle and warm colours of the coolwarm diverging map (linear between them).
pub const COOLWARM: [[f32; 3]; 3] = [
    [0.230, 0.299, 0.754],
    [0.865, 0.865, 0.865],
    [0.706, 0.016, 0.150],
];

/// The blackbody ramp's colours at t = 0, 1/4, 1/2, 3/4 and 1 (linear
/// between them): a stylised glowing-body ramp (black, deep red, orange,
/// yellow, near white) as fire shaders use, not a physical spectrum.
/// Evaluated as `s = t * 4`, segment `k` = how many of 1, 2, 3 are `<= s`,
/// `u = s - f32(k)`, `a + (b - a) * u` with `a, b` stops `k`, `k + 1`.
pub const BLACKBODY: [[f32; 3]; 5] = [
    [0.0, 0.0, 0.0],
    [0.55, 0.04, 0.0],
    [0.95, 0.3, 0.02],
    [1.0, 0.7, 0.22],
    [1.0, 0.98, 0.9],
];

/// Inactive cells of a `show_active` image: a two-tone grey checkerboard of
/// squares of `CHECKER` cells (`x / 8 + y / 8` even: the first tone),
/// unlike any colormap's colours.
pub const INACTIVE_RGB: [[f32; 3]; 2] = [[0.16, 0.16, 0.18], [0.22, 0.22, 0.25]];
/// Side of one checkerboard square, in cells.
pub const CHECKER: u32 = 8;

/// Outline colour of active blocks, blended over the cell colour.
pub const OUTLINE_RGB: [f32; 3] = [1.0, 0.85, 0.2];
pub const OUTLINE_ALPHA: f32 = 0.75;

/// The outermost sparse level whose cells span at least this many
/// elements per axis gets outlines; finer levels would paint every cell.
pub const MIN_OUTLINED_BLOCK: u64 = 4;

/// The zero line of a `plot` view (where 0 lies inside its linear range).
pub const PLOT_AXIS_RGB: [f32; 3] = [0.45, 0.47, 0.5];

/// A colour channel in 0..1 as a byte (clamped, rounded; NaN is 0).
pub fn to_u8(x: f32) -> u8 {
    (x.clamp(0.0, 1.0) * 255.0 + 0.5) as u8
}

/// A colormap's colour at `t` in 0..1 (NaN draws as 0), evaluated on the
/// host in the view kernels' order of operations (for legends).
pub fn colormap(map: Colormap, t: f32) -> [f32; 3] {
    let t = if t.is_nan() { 0.0 } else { t.clamp(0.0, 1.0) };
    if let Some(c) = colormap_poly(map) {
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
            let s = t * 4.0;
            let k = (1..4).filter(|&i| s >= i as f32).count();
            let u = s - k as f32;
            let (a, b) = (BLACKBODY[k], BLACKBODY[k + 1]);
            std::array::from_fn(|i| a[i] + (b[i] - a[i]) * u)
        }
        _ => [t, t, t],
    }
}
