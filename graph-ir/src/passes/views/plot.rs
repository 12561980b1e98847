//! `plot` views: a 1-D f32 field as a line chart, in IR.
//!
//! The definition (the reference renderer in `weft-tests` follows it in
//! plain Rust; every step is an f32 operation in this order):
//! - Points: `n` = the field's length. Without a count field, the `m = n`
//!   points are the elements in order. With one (`c` = its one i32), the
//!   field is a ring holding values `0..c` (value i in slot i mod n):
//!   `m = clamp(c, 0, n)`, `start = c > n ? c % n : 0`, and point k
//!   (`0 <= k < m`) is slot `(start + k) % n` — the last m values, oldest
//!   first.
//! - Value: `y = v` (linear) or `y = log2(v) * LOG10_2` (`log`, where
//!   `v > 0`). A point is drawn when `y` is finite (and `v > 0` with
//!   `log`); others leave gaps.
//! - Range: fixed `(min, max)` (through the same log), or auto: the min
//!   and max of the drawn points' `y` by integer atomics of the
//!   order-preserving keys the `image` view uses (`VIEW.range`; nothing
//!   drawn: 0..1). `t = (y - lo) / (hi - lo)` when `hi > lo`, else 0.5.
//! - Position: `X_k = f32(k) * sx` with `sx = f32(W - 1) / f32(m - 1)`
//!   (0 when `m <= 1`); `Y = (1 - t) * f32(H - 1)` (row 0 at the top),
//!   then NaN or below -1 becomes -1 and above H becomes H.
//! - Column x (one invocation) covers `[a, b] = [f32(x) - 0.5, f32(x) + 0.5]`.
//!   It collects the `Y` of every drawn point with `a <= X_k <= b`, and for
//!   every segment (k, k+1) of two drawn points with `max(X_k, a) <=
//!   min(X_k+1, b)` the segment's `Y` at both ends of that overlap
//!   (`Y_k + (Y_k+1 - Y_k) * ((x' - X_k) / (X_k+1 - X_k))`, or both
//!   endpoints' `Y` when `X_k+1 == X_k`). It visits only the k in
//!   `clamp(floor(a / sx) - 1, 0, m - 1) ..= clamp(ceil(b / sx) + 1, 0, m - 1)`
//!   (all of `0..m` when `sx == 0`), which holds every k that can qualify.
//! - Pixels of the column, row r: the line colour where `floor(ymin + 0.5)
//!   - (w - 1) / 2 <= r <= floor(ymax + 0.5) + w / 2` (something collected;
//!   w = `thickness`, integer division), else the axis
//!   colour on the zero row (linear scale with `lo < 0 < hi`: `floor(Y(0)
//!   + 0.5)`), else the background; alpha 255.

use super::*;
use crate::lower::emit::Build;

struct PlotSpec {
    field: FieldId,
    count: Option<FieldId>,
    n: u32,
    width: u32,
    height: u32,
    /// The fixed range in plotted units (after the log).
    range: Option<(f32, f32)>,
    log: bool,
    thickness: u32,
    keys: Option<FieldId>,
    line: u32,
    axis: u32,
    background: u32,
    img: FieldId,
}

/// log10 as the kernels compute it.
pub fn log10(v: f32) -> f32 {
    v.log2() * std::f32::consts::LOG10_2
}

fn word(rgb: [f32; 3]) -> u32 {
    let b = rgb.map(colormap::to_u8);
    b[0] as u32 | (b[1] as u32) << 8 | (b[2] as u32) << 16 | 255 << 24
}

/// The plot's kernels, and the view with its sources resolved to fields.
pub(super) fn plot(program: &mut Program, v: &View) -> Result<(ViewKernels, View), PassError> {
    let View::Plot {
        node_id,
        field,
        count,
        width,
        height,
        range,
        log,
        thickness,
        color,
        background,
    } = v
    else {
        unreachable!("called for plot views")
    };
    let err = |message: String| PassError {
        pass: "views",
        kernel: node_id.clone(),
        message,
        user: Some(Span::default()),
    };
    let resolve = |s: &ViewSource, port: &str| match s {
        ViewSource::Field(f) => Ok(*f),
        ViewSource::Added(name) => program.field_by_name(name).ok_or_else(|| {
            err(format!(
                "port '{}': no field '{}' (is its optimize node in the schedule?)",
                port, name
            ))
        }),
    };
    let f = resolve(field, "field")?;
    let c = count.as_ref().map(|c| resolve(c, "count")).transpose()?;
    let fd = &program.fields[f];
    if fd.shape.len() != 1 || fd.ty != Type::F32 {
        return Err(err(format!(
            "port 'field': a plot needs a 1D f32 field; '{}' is {}-D {}",
            fd.name,
            fd.shape.len(),
            fd.ty
        )));
    }
    let n = fd.shape[0];
    if let Some(c) = c {
        let cd = &program.fields[c];
        if cd.shape != [1] || cd.ty != Type::I32 {
            return Err(err(format!(
                "port 'count': the count must be an i32 field of shape [1]; '{}' is {:?} {}",
                cd.name, cd.shape, cd.ty
            )));
        }
    }
    let pitch = check_size(node_id, *width, *height)?;
    let img = new_field(
        program,
        &format!("{}.image", node_id),
        vec![*height, pitch],
        0,
    );
    let mut launches = Vec::new();
    let mut scratch = Vec::new();
    let keys = if range.is_none() {
        let keys = new_field(program, &format!("{}.range", node_id), vec![2], 0);
        scratch.push(keys);
        launches.push(add(program, node_id, reset_range(keys)));
        Some(keys)
    } else {
        None
    };
    let s = PlotSpec {
        field: f,
        count: c,
        n,
        width: *width,
        height: *height,
        range: range.map(|(a, b)| if *log { (log10(a), log10(b)) } else { (a, b) }),
        log: *log,
        thickness: (*thickness).max(1),
        keys,
        line: word(*color),
        axis: word(colormap::PLOT_AXIS_RGB),
        background: word(*background),
        img,
    };
    if keys.is_some() {
        launches.push(add(program, node_id, reduce(&s)));
    }
    launches.push(add(program, node_id, draw(&s)));
    let resolved = View::Plot {
        node_id: node_id.clone(),
        field: ViewSource::Field(f),
        count: c.map(ViewSource::Field),
        width: *width,
        height: *height,
        range: *range,
        log: *log,
        thickness: *thickness,
        color: *color,
        background: *background,
    };
    Ok((
        ViewKernels {
            node_id: node_id.clone(),
            image: img,
            width: *width,
            height: *height,
            pitch,
            scratch,
            depth: None,
            launches,
        },
        resolved,
    ))
}

/// The number of points `m` and the slot of the first, `start` (i32 each).
fn points(e: &mut Emit, s: &PlotSpec) -> (InstId, InstId) {
    let n = e.i32c(s.n as i32);
    match s.count {
        None => {
            let zero = e.i32c(0);
            (n, zero)
        }
        Some(cf) => {
            let z = e.i32c(0);
            let c = e.load(cf, Type::I32, vec![z]);
            let zero = e.i32c(0);
            let m = e.call(Builtin::Clamp, vec![c, zero, n]);
            let wrapped = e.bin(BinaryOp::Gt, c, n);
            let r = e.bin(BinaryOp::Rem, c, n);
            let start = e.select(wrapped, r, zero);
            (m, start)
        }
    }
}

/// Point k's value in plotted units and whether it is drawn.
fn point(e: &mut Emit, s: &PlotSpec, start: InstId, k: InstId) -> (InstId, InstId) {
    let i = e.bin(BinaryOp::Add, start, k);
    let n = e.i32c(s.n as i32);
    let past = e.bin(BinaryOp::Ge, i, n);
    let back = e.bin(BinaryOp::Sub, i, n);
    let i = e.select(past, back, i);
    let v = e.load(s.field, Type::F32, vec![i]);
    if s.log {
        let l = e.call(Builtin::Log2, vec![v]);
        let c = e.f32c(std::f32::consts::LOG10_2);
        let y = e.bin(BinaryOp::Mul, l, c);
        let fin = e.finite(y);
        let zero = e.f32c(0.0);
        let pos = e.bin(BinaryOp::Gt, v, zero);
        let ok = e.bin(BinaryOp::LogicalAnd, fin, pos);
        (y, ok)
    } else {
        let ok = e.finite(v);
        (v, ok)
    }
}

/// One invocation per slot: the drawn points' min and max keys.
fn reduce(s: &PlotSpec) -> Kernel {
    let keys = s.keys.expect("auto range");
    let mut e = Emit::new("view", 1);
    let k = e.args(1)[0];
    let (m, start) = points(&mut e, s);
    let inside = e.bin(BinaryOp::Lt, k, m);
    e.if_(inside, |e| {
        let (y, ok) = point(e, s, start, k);
        e.if_(ok, |e| {
            let key = order_key(e, y);
            let z = e.i32c(0);
            let o = e.i32c(1);
            e.atomic(AtomicOp::Min, keys, vec![z], key);
            e.atomic(AtomicOp::Max, keys, vec![o], key);
        });
    });
    e.range_kernel(vec![s.n], bindings(s))
}

fn bindings(s: &PlotSpec) -> Vec<(&'static str, FieldId)> {
    std::iter::once(("field", s.field))
        .chain(s.count.map(|c| ("count", c)))
        .chain(s.keys.map(|k| ("range", k)))
        .chain(std::iter::once(("image", s.img)))
        .collect()
}

/// `Y` of a value: `(1 - t) * (H - 1)`, NaN and below -1 as -1, above H as H.
fn row_of(e: &mut Emit, s: &PlotSpec, y: InstId, lo: InstId, span: InstId, wide: InstId) -> InstId {
    let d = e.bin(BinaryOp::Sub, y, lo);
    let t = e.bin(BinaryOp::Div, d, span);
    let half = e.f32c(0.5);
    let t = e.select(wide, t, half);
    let one = e.f32c(1.0);
    let u = e.bin(BinaryOp::Sub, one, t);
    let hm = e.f32c(s.height as f32 - 1.0);
    let r = e.bin(BinaryOp::Mul, u, hm);
    let neg = e.f32c(-1.0);
    let above = e.bin(BinaryOp::Ge, r, neg);
    let r = e.select(above, r, neg);
    let hc = e.f32c(s.height as f32);
    let below = e.bin(BinaryOp::Le, r, hc);
    e.select(below, r, hc)
}

/// One invocation per pixel column: the whole column (see the module doc).
fn draw(s: &PlotSpec) -> Kernel {
    let mut e = Emit::new("view", 1);
    let x = e.args(1)[0];
    let (m, start) = points(&mut e, s);
    // The range in plotted units.
    let (lo, hi) = match (s.range, s.keys) {
        (Some((lo, hi)), _) => (e.f32c(lo), e.f32c(hi)),
        (None, Some(keys)) => {
            let z = e.i32c(0);
            let o = e.i32c(1);
            let lk = e.load(keys, Type::U32, vec![z]);
            let hk = e.load(keys, Type::U32, vec![o]);
            let empty = e.bin(BinaryOp::Gt, lk, hk);
            let lo = from_key(&mut e, lk);
            let hi = from_key(&mut e, hk);
            let zero = e.f32c(0.0);
            let one = e.f32c(1.0);
            (e.select(empty, zero, lo), e.select(empty, one, hi))
        }
        (None, None) => unreachable!("a plot has a fixed range or range keys"),
    };
    let wide = e.bin(BinaryOp::Gt, hi, lo);
    let d = e.bin(BinaryOp::Sub, hi, lo);
    let one = e.f32c(1.0);
    let span = e.select(wide, d, one);
    // The zero line's row, or -1.
    let zero_row = if s.log {
        e.i32c(-1)
    } else {
        let zero = e.f32c(0.0);
        let a = e.bin(BinaryOp::Lt, lo, zero);
        let b = e.bin(BinaryOp::Gt, hi, zero);
        let inside = e.bin(BinaryOp::LogicalAnd, a, b);
        let r = row_of(&mut e, s, zero, lo, span, wide);
        let half = e.f32c(0.5);
        let r = e.bin(BinaryOp::Add, r, half);
        let r = e.call(Builtin::Floor, vec![r]);
        let r = e.cast(r, Type::I32);
        let none = e.i32c(-1);
        e.select(inside, r, none)
    };
    // x scale.
    let one_i = e.i32c(1);
    let many = e.bin(BinaryOp::Gt, m, one_i);
    let m1 = e.bin(BinaryOp::Sub, m, one_i);
    let m1f = e.cast(m1, Type::F32);
    let wm = e.f32c(s.width as f32 - 1.0);
    let q = e.bin(BinaryOp::Div, wm, m1f);
    let zf = e.f32c(0.0);
    let sx = e.select(many, q, zf);
    let xf = e.cast(x, Type::F32);
    let half = e.f32c(0.5);
    let a = e.bin(BinaryOp::Sub, xf, half);
    let b = e.bin(BinaryOp::Add, xf, half);
    // The points to visit.
    let zero_i = e.i32c(0);
    let top = e.call(Builtin::Max, vec![m1, zero_i]);
    let topf = e.cast(top, Type::F32);
    let qa = e.bin(BinaryOp::Div, a, sx);
    let qa = e.call(Builtin::Floor, vec![qa]);
    let qa = e.bin(BinaryOp::Sub, qa, one);
    let qa = e.call(Builtin::Clamp, vec![qa, zf, topf]);
    let k0 = e.cast(qa, Type::I32);
    let qb = e.bin(BinaryOp::Div, b, sx);
    let qb = e.call(Builtin::Ceil, vec![qb]);
    let qb = e.bin(BinaryOp::Add, qb, one);
    let qb = e.call(Builtin::Clamp, vec![qb, zf, topf]);
    let k1 = e.cast(qb, Type::I32);
    let scaled = e.bin(BinaryOp::Gt, sx, zf);
    let k0 = e.select(scaled, k0, zero_i);
    let k1 = e.select(scaled, k1, m1);
    let big = e.f32c(1.0e30);
    let ymin = e.local("ymin", Type::F32, big);
    let nbig = e.f32c(-1.0e30);
    let ymax = e.local("ymax", Type::F32, nbig);
    let take = |e: &mut Emit, y: InstId| {
        let cur = e.get(ymin);
        let lt = e.bin(BinaryOp::Lt, y, cur);
        let v = e.select(lt, y, cur);
        e.set(ymin, v);
        let cur = e.get(ymax);
        let gt = e.bin(BinaryOp::Gt, y, cur);
        let v = e.select(gt, y, cur);
        e.set(ymax, v);
    };
    e.range_incl(k0, k1, |e, k| {
        let (yk, okk) = point(e, s, start, k);
        let kf = e.cast(k, Type::F32);
        let xk = e.bin(BinaryOp::Mul, kf, sx);
        let rk = row_of(e, s, yk, lo, span, wide);
        let ge = e.bin(BinaryOp::Le, a, xk);
        let le = e.bin(BinaryOp::Le, xk, b);
        let inx = e.bin(BinaryOp::LogicalAnd, ge, le);
        let hit = e.bin(BinaryOp::LogicalAnd, okk, inx);
        e.if_(hit, |e| take(e, rk));
        let last = e.bin(BinaryOp::Sub, m, one_i);
        let more = e.bin(BinaryOp::Lt, k, last);
        let seg = e.bin(BinaryOp::LogicalAnd, okk, more);
        e.if_(seg, |e| {
            let k2 = e.bin(BinaryOp::Add, k, one_i);
            let (y2, ok2) = point(e, s, start, k2);
            e.if_(ok2, |e| {
                let k2f = e.cast(k2, Type::F32);
                let x2 = e.bin(BinaryOp::Mul, k2f, sx);
                let r2 = row_of(e, s, y2, lo, span, wide);
                let xa = e.call(Builtin::Max, vec![xk, a]);
                let xb = e.call(Builtin::Min, vec![x2, b]);
                let overlap = e.bin(BinaryOp::Le, xa, xb);
                e.if_(overlap, |e| {
                    let dx = e.bin(BinaryOp::Sub, x2, xk);
                    let zf = e.f32c(0.0);
                    let slope = e.bin(BinaryOp::Gt, dx, zf);
                    let dr = e.bin(BinaryOp::Sub, r2, rk);
                    let at = |e: &mut Emit, xp: InstId| {
                        let o = e.bin(BinaryOp::Sub, xp, xk);
                        let f = e.bin(BinaryOp::Div, o, dx);
                        let m = e.bin(BinaryOp::Mul, dr, f);
                        e.bin(BinaryOp::Add, rk, m)
                    };
                    let ya = at(e, xa);
                    let yb = at(e, xb);
                    let ya = e.select(slope, ya, rk);
                    let yb = e.select(slope, yb, r2);
                    take(e, ya);
                    take(e, yb);
                });
            });
        });
    });
    let lo_y = e.get(ymin);
    let hi_y = e.get(ymax);
    let any = e.bin(BinaryOp::Le, lo_y, hi_y);
    let r0 = e.bin(BinaryOp::Add, lo_y, half);
    let r0 = e.call(Builtin::Floor, vec![r0]);
    let r1 = e.bin(BinaryOp::Add, hi_y, half);
    let r1 = e.call(Builtin::Floor, vec![r1]);
    // Rows lie in -1..=H here, so the casts are exact.
    let r0 = e.select(any, r0, zf);
    let r1 = e.select(any, r1, zf);
    let r0 = e.cast(r0, Type::I32);
    let r1 = e.cast(r1, Type::I32);
    // Thickness: (w - 1) / 2 rows more above, w / 2 below.
    let up = e.i32c(((s.thickness - 1) / 2) as i32);
    let r0 = e.bin(BinaryOp::Sub, r0, up);
    let down = e.i32c((s.thickness / 2) as i32);
    let r1 = e.bin(BinaryOp::Add, r1, down);
    let line_w = e.u32c(s.line);
    let axis_w = e.u32c(s.axis);
    let bg_w = e.u32c(s.background);
    let last_row = e.i32c(s.height as i32 - 1);
    e.range_incl(zero_i, last_row, |e, r| {
        let a = e.bin(BinaryOp::Ge, r, r0);
        let b = e.bin(BinaryOp::Le, r, r1);
        let on = e.bin(BinaryOp::LogicalAnd, a, b);
        let on = e.bin(BinaryOp::LogicalAnd, on, any);
        let is_zero = e.bin(BinaryOp::Eq, r, zero_row);
        let w = e.select(is_zero, axis_w, bg_w);
        let w = e.select(on, line_w, w);
        e.store(s.img, vec![r, x], w);
    });
    e.range_kernel(vec![s.width], bindings(s))
}
