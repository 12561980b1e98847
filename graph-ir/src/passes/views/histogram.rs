//! `histogram` views: the distribution of any field's values, in IR.
//!
//! The definition (the reference renderer in `weft-tests` follows it in
//! plain Rust; every step is an f32 operation in this order):
//! - Elements: every element of the field (any number of axes). A field
//!   under a sparse layout counts only its active cells (`is_active` of the
//!   element, as the `image` view's `show_active` knows them); a dense
//!   field counts every cell.
//! - Value: a scalar's value as f32 (i32/u32 converted; quantized storage
//!   decoded on load). A vector's or matrix's is its magnitude (Euclidean
//!   length, Frobenius norm for a matrix): `sqrt(c0*c0 + c1*c1 + ...)`
//!   summed in component order (matrices column by column).
//! - Non-finite values (NaN, ±inf, or a vector with one) are not binned;
//!   they are counted in `VIEW.nonfinite` (u32 `[1]`).
//! - Range: fixed `(min, max)` or auto: the min and max of the counted
//!   finite values by integer atomics of the order-preserving keys the
//!   `image` view uses (`VIEW.range`; nothing finite: 0..1). With a fixed
//!   range, values below `min` or above `max` are dropped, not binned:
//!   counted in `VIEW.outside` (u32 `[2]`: below, above).
//! - Bin: `t = (v - lo) / span` with `span = hi - lo` when `hi > lo`, else
//!   1; `b = clamp(i32(floor(t * f32(bins))), 0, bins - 1)` (so `max`
//!   itself lands in the last bin, and a single-valued field in bin 0).
//!   `VIEW.bins` (u32 `[bins]`) gets one `atomic_add` per binned element.
//! - Drawing: one invocation per pixel column x: its bin `b = x * bins /
//!   width` (integer division), `peak` = the largest bin count (a loop over
//!   the bins), `f(c) = c` or, with `log`, `log2(1 + c)` (the same ratio
//!   as ln(1 + c)); `frac = f(count) / f(peak)` (0 when peak is 0), `rows =
//!   i32(floor(frac * f32(H) + 0.5))`, at least 1 when the count is > 0.
//!   Row r (0 at the top) is the bar colour when `r >= H - rows`, else the
//!   background. When `width >= 4 * bins`, the first column of every bin
//!   but the first is background (a gap between bars). Alpha 255.
//!
//! Launches: reset (one invocation per bin: zeroes the bins, the counters
//! and the range keys), the range reduce (auto only, one invocation per
//! element), count (one invocation per element), draw (one per column):
//! no invocation waits on another workgroup.

use super::*;
use crate::lower::emit::Build;

struct HistSpec {
    field: FieldId,
    ty: Type,
    shape: Vec<u32>,
    sparse: bool,
    bins: u32,
    width: u32,
    height: u32,
    range: Option<(f32, f32)>,
    log: bool,
    keys: Option<FieldId>,
    counts: FieldId,
    nonfinite: FieldId,
    outside: FieldId,
    bar: u32,
    background: u32,
    img: FieldId,
}

fn word(rgb: [f32; 3]) -> u32 {
    let b = rgb.map(colormap::to_u8);
    b[0] as u32 | (b[1] as u32) << 8 | (b[2] as u32) << 16 | 255 << 24
}

/// The histogram's kernels.
pub(super) fn histogram(program: &mut Program, v: &View) -> Result<ViewKernels, PassError> {
    let View::Histogram {
        node_id,
        field,
        bins,
        width,
        height,
        range,
        log,
        color,
        background,
    } = v
    else {
        unreachable!("called for histogram views")
    };
    let err = |message: String| PassError {
        pass: "views",
        kernel: node_id.clone(),
        message,
        user: Some(Span::default()),
    };
    let (ty, shape) = {
        let fd = &program.fields[*field];
        (fd.ty, fd.shape.clone())
    };
    if shape.is_empty() || shape.len() > 3 || ty.components() == 0 {
        return Err(err(format!(
            "port 'field': a histogram needs a field of 1 to 3 axes; '{}' is {}-D {}",
            program.fields[*field].name,
            shape.len(),
            ty
        )));
    }
    if !(1..=1024).contains(bins) {
        return Err(err(format!("'bins' must be 1 to 1024; it is {}", bins)));
    }
    let pitch = check_size(node_id, *width, *height)?;
    let img = new_field(
        program,
        &format!("{}.image", node_id),
        vec![*height, pitch],
        0,
    );
    let counts = new_field(program, &format!("{}.bins", node_id), vec![*bins], 0);
    let nonfinite = new_field(program, &format!("{}.nonfinite", node_id), vec![1], 0);
    let outside = new_field(program, &format!("{}.outside", node_id), vec![2], 0);
    let keys = range
        .is_none()
        .then(|| new_field(program, &format!("{}.range", node_id), vec![2], 0));
    let plan = AddressPlan::new(program, *field);
    let sparse = plan.levels.iter().any(|l| l.kind.is_sparse());
    let s = HistSpec {
        field: *field,
        ty,
        shape,
        sparse,
        bins: *bins,
        width: *width,
        height: *height,
        range: *range,
        log: *log,
        keys,
        counts,
        nonfinite,
        outside,
        bar: word(*color),
        background: word(*background),
        img,
    };
    let mut launches = vec![add(program, node_id, reset(&s))];
    if keys.is_some() {
        launches.push(add(program, node_id, reduce(&s)));
    }
    launches.push(add(program, node_id, count(&s)));
    launches.push(add(program, node_id, draw(&s)));
    Ok(ViewKernels {
        node_id: node_id.clone(),
        image: img,
        width: *width,
        height: *height,
        pitch,
        scratch: std::iter::once(counts)
            .chain([nonfinite, outside])
            .chain(keys)
            .collect(),
        depth: None,
        launches,
    })
}

fn bindings(s: &HistSpec) -> Vec<(&'static str, FieldId)> {
    vec![
        ("field", s.field),
        ("bins", s.counts),
        ("nonfinite", s.nonfinite),
        ("outside", s.outside),
    ]
    .into_iter()
    .chain(s.keys.map(|k| ("range", k)))
    .chain(std::iter::once(("image", s.img)))
    .collect()
}

/// One invocation per bin: the bin to 0; the first also resets the
/// counters and the range keys ("nothing seen").
fn reset(s: &HistSpec) -> Kernel {
    let mut e = Emit::new("view", 1);
    let i = e.args(1)[0];
    let zero = e.u32c(0);
    e.store(s.counts, vec![i], zero);
    let z = e.i32c(0);
    let first = e.bin(BinaryOp::Eq, i, z);
    e.if_(first, |e| {
        let z = e.i32c(0);
        let o = e.i32c(1);
        let zero = e.u32c(0);
        e.store(s.nonfinite, vec![z], zero);
        e.store(s.outside, vec![z], zero);
        e.store(s.outside, vec![o], zero);
        if let Some(keys) = s.keys {
            let max = e.u32c(u32::MAX);
            e.store(keys, vec![z], max);
            e.store(keys, vec![o], zero);
        }
    });
    e.range_kernel(vec![s.bins], bindings(s))
}

/// The element's value (f32; a vector's or matrix's magnitude).
fn value(e: &mut Emit, s: &HistSpec, idx: Vec<InstId>) -> InstId {
    let v = e.load(s.field, s.ty, idx);
    let comps: Vec<InstId> = match s.ty {
        Type::Scalar(_) => return e.as_f32(v),
        Type::Vector(_, n) => (0..n as u32).map(|c| e.extract(v, c)).collect(),
        Type::Matrix(n) => {
            let mut out = Vec::new();
            for c in 0..n as u32 {
                let col = e.emit(InstKind::Extract(v, c), Type::Vector(Scalar::F32, n));
                for r in 0..n as u32 {
                    out.push(e.extract(col, r));
                }
            }
            out
        }
        Type::Void => unreachable!("fields have a value type"),
    };
    let mut acc = None;
    for c in comps {
        let c = e.as_f32(c);
        let sq = e.bin(BinaryOp::Mul, c, c);
        acc = Some(match acc {
            None => sq,
            Some(a) => e.bin(BinaryOp::Add, a, sq),
        });
    }
    let acc = acc.expect("vectors have components");
    e.call(Builtin::Sqrt, vec![acc])
}

/// A per-element kernel: `body(value)` for each counted element.
fn per_element(s: &HistSpec, body: impl FnOnce(&mut Emit, InstId)) -> Kernel {
    let mut e = Emit::new("view", s.shape.len());
    let idx = e.args(s.shape.len());
    if s.sparse {
        let active = e.emit(
            InstKind::FieldIsActive {
                field: s.field,
                index: idx.clone(),
                level: None,
            },
            Type::BOOL,
        );
        e.if_(active, |e| {
            let v = value(e, s, idx);
            body(e, v)
        });
    } else {
        let v = value(&mut e, s, idx);
        body(&mut e, v);
    }
    e.range_kernel(s.shape.clone(), bindings(s))
}

/// One invocation per element: the finite values' min and max keys.
fn reduce(s: &HistSpec) -> Kernel {
    let keys = s.keys.expect("auto range");
    per_element(s, |e, v| {
        let ok = e.finite(v);
        e.if_(ok, |e| {
            let k = order_key(e, v);
            let z = e.i32c(0);
            let o = e.i32c(1);
            e.atomic(AtomicOp::Min, keys, vec![z], k);
            e.atomic(AtomicOp::Max, keys, vec![o], k);
        });
    })
}

/// The range `(lo, hi)` (f32 each), fixed or from the keys.
fn range(e: &mut Emit, s: &HistSpec) -> (InstId, InstId) {
    match (s.range, s.keys) {
        (Some((lo, hi)), _) => (e.f32c(lo), e.f32c(hi)),
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
            (e.select(empty, zero, lo), e.select(empty, one, hi))
        }
        (None, None) => unreachable!("a histogram has a fixed range or range keys"),
    }
}

/// One invocation per element: its bin's (or counter's) `atomic_add`.
fn count(s: &HistSpec) -> Kernel {
    per_element(s, |e, v| {
        let one = e.u32c(1);
        let z = e.i32c(0);
        let ok = e.finite(v);
        let bad = e.emit(InstKind::Unary(UnaryOp::Not, ok), Type::BOOL);
        e.if_(bad, |e| e.atomic(AtomicOp::Add, s.nonfinite, vec![z], one));
        e.if_(ok, |e| {
            let (lo, hi) = range(e, s);
            let below = e.bin(BinaryOp::Lt, v, lo);
            let above = e.bin(BinaryOp::Gt, v, hi);
            let o = e.i32c(1);
            e.if_(below, |e| e.atomic(AtomicOp::Add, s.outside, vec![z], one));
            e.if_(above, |e| e.atomic(AtomicOp::Add, s.outside, vec![o], one));
            let out = e.bin(BinaryOp::LogicalOr, below, above);
            let inside = e.emit(InstKind::Unary(UnaryOp::Not, out), Type::BOOL);
            e.if_(inside, |e| {
                let wide = e.bin(BinaryOp::Gt, hi, lo);
                let d = e.bin(BinaryOp::Sub, hi, lo);
                let onef = e.f32c(1.0);
                let span = e.select(wide, d, onef);
                let dv = e.bin(BinaryOp::Sub, v, lo);
                let t = e.bin(BinaryOp::Div, dv, span);
                let n = e.f32c(s.bins as f32);
                let q = e.bin(BinaryOp::Mul, t, n);
                let q = e.call(Builtin::Floor, vec![q]);
                let lastf = e.f32c(s.bins as f32 - 1.0);
                let zf = e.f32c(0.0);
                let q = e.call(Builtin::Clamp, vec![q, zf, lastf]);
                let b = e.cast(q, Type::I32);
                e.atomic(AtomicOp::Add, s.counts, vec![b], one);
            });
        });
    })
}

/// `f(c)` of a count (u32): `c` or `log2(1 + c)`, f32.
fn scale(e: &mut Emit, s: &HistSpec, c: InstId) -> InstId {
    let f = e.cast(c, Type::F32);
    if s.log {
        let one = e.f32c(1.0);
        let f = e.bin(BinaryOp::Add, one, f);
        e.call(Builtin::Log2, vec![f])
    } else {
        f
    }
}

/// One invocation per pixel column: the whole column (see the module doc).
fn draw(s: &HistSpec) -> Kernel {
    let mut e = Emit::new("view", 1);
    let x = e.args(1)[0];
    let nb = e.i32c(s.bins as i32);
    let w = e.i32c(s.width as i32);
    let xb = e.bin(BinaryOp::Mul, x, nb);
    let b = e.bin(BinaryOp::Div, xb, w);
    let zu = e.u32c(0);
    let peak = e.local("peak", Type::U32, zu);
    let zero_i = e.i32c(0);
    let last = e.i32c(s.bins as i32 - 1);
    e.range_incl(zero_i, last, |e, k| {
        let c = e.load(s.counts, Type::U32, vec![k]);
        let p = e.get(peak);
        let gt = e.bin(BinaryOp::Gt, c, p);
        let m = e.select(gt, c, p);
        e.set(peak, m);
    });
    let p = e.get(peak);
    let c = e.load(s.counts, Type::U32, vec![b]);
    let fp = scale(&mut e, s, p);
    let fc = scale(&mut e, s, c);
    let some = e.bin(BinaryOp::Gt, p, zu);
    let frac = e.bin(BinaryOp::Div, fc, fp);
    let zf = e.f32c(0.0);
    let frac = e.select(some, frac, zf);
    let hf = e.f32c(s.height as f32);
    let r = e.bin(BinaryOp::Mul, frac, hf);
    let half = e.f32c(0.5);
    let r = e.bin(BinaryOp::Add, r, half);
    let r = e.call(Builtin::Floor, vec![r]);
    let rows = e.cast(r, Type::I32);
    let one_i = e.i32c(1);
    let at_least = e.call(Builtin::Max, vec![rows, one_i]);
    let nonzero = e.bin(BinaryOp::Gt, c, zu);
    let rows = e.select(nonzero, at_least, rows);
    let h = e.i32c(s.height as i32);
    let top = e.bin(BinaryOp::Sub, h, rows);
    // A gap column: the first of its bin (not the first bin).
    let gap = if s.width >= 4 * s.bins {
        let xm = e.bin(BinaryOp::Sub, x, one_i);
        let pb = e.bin(BinaryOp::Mul, xm, nb);
        let pb = e.bin(BinaryOp::Div, pb, w);
        let first = e.bin(BinaryOp::Ne, pb, b);
        let inner = e.bin(BinaryOp::Gt, x, zero_i);
        e.bin(BinaryOp::LogicalAnd, first, inner)
    } else {
        e.emit(InstKind::Const(Const::bool(false)), Type::BOOL)
    };
    let bar_w = e.u32c(s.bar);
    let bg_w = e.u32c(s.background);
    let last_row = e.i32c(s.height as i32 - 1);
    e.range_incl(zero_i, last_row, |e, r| {
        let on = e.bin(BinaryOp::Ge, r, top);
        let open = e.emit(InstKind::Unary(UnaryOp::Not, gap), Type::BOOL);
        let on = e.bin(BinaryOp::LogicalAnd, on, open);
        let w = e.select(on, bar_w, bg_w);
        e.store(s.img, vec![r, x], w);
    });
    e.range_kernel(vec![s.width], bindings(s))
}
