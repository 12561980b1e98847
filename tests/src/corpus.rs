//! The language corpus: small kernels covering the language, its built-ins
//! and its edge cases, shared by the backend comparisons (`cross_jit`) and
//! the CUDA source check (`cuda`), which compiles every one of them.

use crate::{kernel_graph, F};
use serde_json::{json, Value};

pub type Case = (
    &'static str,
    Vec<(&'static str, &'static str, Vec<u32>, Value)>,
    String,
    Vec<u32>,
);

/// Narrow integer conversions (`as u8`/`i8`/`u16`/`i16`: Rust's wrapping
/// from integers, saturating from floats), their literal suffixes, and f16
/// compute: scalars, a `vec3<f16>`, a helper taking and returning f16,
/// built-ins, conversions both ways (in both corpora; the language test
/// checks it against Rust and NumPy's float16).
pub const NARROW_F16: &str = "fn sq(h: f16) -> f16 { h * h }
          fn kernel(i: i32) {
            let x = i * 37 - 300;
            let fx = (i as f32 - 7.5) * 41.3;
            o[i * 8] = (x as u8) as i32;
            o[i * 8 + 1] = x as i8;
            o[i * 8 + 2] = (x * 1000) as u16 as i32;
            o[i * 8 + 3] = (x * 1000) as i16;
            o[i * 8 + 4] = (fx as u8) as i32;
            o[i * 8 + 5] = fx as i8 + (fx * 1000.0) as i16;
            o[i * 8 + 6] = ((200u32 + i as u32) as i8) + (-1 as u8) as i32 + (300 as u8) as i32;
            o[i * 8 + 7] = (7u8 + 1000u16 + (i as u32)) as i32 + -128i8 + 32767i16 + (-3.7 as u8) as i32;
            let h: f16 = 1.5f16 + (i as f16) * 0.1;
            let g = sq(h) / 3.0 - h;
            let v = vec3(fx, 1.0, -2.5) as vec3<f16>;
            let w = v * h + 0.25;
            f[i * 6] = h as f32;
            f[i * 6 + 1] = g as f32;
            f[i * 6 + 2] = w.x as f32;
            f[i * 6 + 3] = w.z as f32 + (fx as f16 + 1000.0) as f32;
            f[i * 6 + 4] = sqrt(h + 2.0) as f32 + max(-h, 0.5) as f32;
            let mut acc = 0.0f16;
            for k in 0..i { acc += 0.1f16 * (k as f16); }
            f[i * 6 + 5] = acc as f32 + (-h) as i32 as f32 + select(h > 2.0f16, 1.0, 0.0);
          }";

/// `match`, labelled loops and `const` items (in both corpora: this one
/// and the cross-backend one).
pub const MATCH_LABELS_CONSTS: &str = "const N: i32 = 4;
          const HALF: f32 = 1.0 / 2.0;
          const MASK: u32 = (1u32 << 4) - 1u32;
          const BIG: i32 = N * 1000 + 7;
          fn classify(x: i32) -> i32 {
            match x { 0 => 10, 1 | 2 => 20, 3..=5 => 30, N..=8 => 40, -3..=-1 => 50, n => n * 2 }
          }
          fn kernel(i: i32) {
            let mut acc = classify(i - 4) + BIG;
            'outer: for a in 0..N {
                for b in 0..N {
                    if b > a { continue 'outer; }
                    if a * b > i { break 'outer; }
                    acc += a * 10 + b;
                }
                acc += 1000;
            }
            let mut k = 0;
            'w: while k < 20 {
                k += 1;
                let mut m = 0;
                loop {
                    m += 1;
                    if m == 3 { continue 'w; }
                    if k + m > i { break 'w; }
                }
            }
            acc += k * 100000;
            let mut deep = 0;
            'a: for x in 0..3 { for y in 0..3 { for z in 0..3 {
                if z == 2 && y == i % 3 { continue 'a; }
                if x + y + z == i % 5 + 2 { break 'a; }
                deep += 1;
            } deep += 10; } deep += 100; }
            match i % 3 { 0 => { acc += 7; } 1 => acc -= 3, _ => {} }
            let u = match (i as u32) & MASK { 0..=3 => 1u32, 7 | 9 => 5u32, _ => 2u32 };
            o[i] = acc + u as i32 + deep * 1000000;
            f[i] = HALF * i as f32 + select(i > N, PI, 0.0);
        }";

/// Local arrays: literals, `[x; N]` with a `const` length, constant and
/// run-time indices (in unrolled loops and in loops whose bounds are only
/// known while running), compound assignment, vector elements, copies and
/// `len()` (in both corpora).
pub const LOCAL_ARRAYS: &str = "const N: i32 = 5;
          fn dot3(a: [f32; 3], mut b: [f32; 3], k: i32) -> f32 {
            b[k % 3] += 1.0;
            a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
          }
          fn kernel(i: i32) {
            let k: [i32; 3] = [1, -2, 3];
            let mut w = [0.0; N];
            for j in 0..N { w[j] = (i + j) as f32 * 0.5; }
            let m = i % N;
            w[m] += 10.0;
            w[(i + 1) % N] *= 2.0;
            let mut s = 0.0;
            for j in 0..w.len() { s += w[j] * k[j % 3] as f32; }
            let mut v = [vec2(0.0, 0.0); 3];
            v[i % 3].y = 1.5;
            v[2].x = w[m];
            let mut c = k;
            c[i % 3] = c[i % 3] * 10;
            let mut t = 0;
            let mut q = 0;
            while q < i % 7 { t += c[q % 3] * (q + 1); q += 1; }
            for j in 0..i { if j < N { w[j] = w[j] - 1.0; } }
            o[i] = c[0] + c[1] * 100 + c[2] * 10000 + t * 1000000;
            let g = [w[0], w[1], w[2]];
            let mut h = [1.0, 2.0, 3.0];
            h[i % 3] += 1.0;
            h = [h[2], h[0], h[1]];
            let mut hs = 0.0;
            for x in h { hs = hs * 2.0 + x; }
            f[i] = s + v[0].y * 10.0 + v[1].y * 100.0 + v[2].y * 1000.0 + v[2].x + w[i % N] * 0.25 + dot3(g, g, i) * 0.125 + hs;
        }";

/// 64-bit scalars (in both corpora): f64 arithmetic, the exact built-ins
/// and f64 vectors, i64 / u64 arithmetic with wrap-around, shifts and
/// Weft's division rules, every conversion with saturation and NaN, a
/// helper taking and returning 64-bit values, `+=` on the own element.
pub const WIDE_TYPES: &str = "const K: i64 = -9223372036854775807 - 1;
          fn mix(a: f64, b: i64) -> f64 { a * b as f64 + 0.125 }
          fn kernel(i: i32) {
            let x = (i as f64) * 0.37 - 3.1;
            let mut acc = 0.0f64;
            for j in 0..10 { acc += sqrt(abs(x) + j as f64) * 0.1; }
            d[i] = mix(x, 3) + acc + floor(x * 1.5) - round(x) + fma(x, x, -1.0) + min(x, 0.5) - clamp(x, -1.0, 1.0);
            d[i] += 1.0e-12;
            let a = (i as i64 - 30) * 98765432101;
            let z = a - a;
            q[i] = a / 7 + a % 13 + (a >> 3) + (a << 17) + a * a + a / z + a % z + K / -1 + abs(a) + sign(a) + min(a, 5) + (a ^ 0x7f7f7f7f7f);
            let b = (i as u64) * 0xF00DF00DF00Du64 + 3;
            w[i] = b / 11 + b % 7 + (b >> 50) + (b << 13) + !b + b * b + max(b, 1u64 << 60);
            let v0 = dvec3(x, x * 2.0, -x);
            v[i] = normalize(v0 + dvec3(0.1, 0.2, 0.3)) * length(v0) + cross(v0, dvec3(0.0, 0.0, 1.0)) * dot(v0, v0);
            let big = 1.0e19f64 * (i as f64 - 32.0);
            f[i] = (big as i32) as f32 + (big as u32) as f32 + (big as i64) as f32 + (big as u64) as f32
                 + (x as f32) + (a as f32) + (b as f32) + (sqrt(x) as i64) as f32 + ((a as u32) as i32) as f32;
          }";

/// Workgroups: `#[block(16)]` over 64 invocations (4 blocks), shared
/// arrays of f32, vec2 and u32 with their initial values, a block scan in
/// an unrolled loop of barriers, values, a `let mut` and the random state
/// living across barriers, run-time and constant shared indices, and
/// `thread_index()` / `block_index()`. Race-free, so every backend gives
/// the same bits.
pub const WORKGROUPS: &str = "const B: i32 = 16;
          #[block(B)]
          fn kernel(i: i32) {
            let s = shared([0.0; B]);
            let w = shared([vec2(1.0, 0.0); 8]);
            let cnt = shared([3u32; 4]);
            let t = thread_index();
            let r = random();
            let mut acc = (i * 3) as f32;
            let q = i * 5 % 7;
            s[t] = (i * 7 % 11) as f32 + r;
            if t < 8 { w[t].y = t as f32; }
            barrier();
            for d in 0..4 {
              let off = 1 << d;
              let v = if t >= off { s[t - off] } else { 0.0 };
              barrier();
              s[t] += v;
              barrier();
            }
            acc += s[B - 1 - t] + w[t % 8].x + w[(t + 3) % 8].y + q as f32;
            let r2 = random();
            f[i] = acc + r2 * 0.001;
            if t == 0 { cnt[1] = 5u32; }
            barrier();
            o[i] = block_index() * 1000 + t * 10 + cnt[1] as i32 + cnt[(i + 2) % 4] as i32 + q;
        }";

/// Structs and tuples: declarations holding vectors, a matrix, a local
/// array and a tuple; literals (also with `..base`), field reads and
/// writes (`p.x.y`, `c.w[k]`, `c.rot[1].x`), copies, a struct passed by
/// value to a helper that changes its copy, helpers returning a struct, a
/// tuple (single exit and with early `return`s inside a loop) and an
/// array, tuple `let`, `.0`, an `if` choosing a struct (in both corpora).
pub const STRUCTS_TUPLES: &str = "struct Particle { x: vec3, v: vec3, m: f32 }
          struct Cell { p: Particle, w: [f32; 3], id: i32, t: (f32, i32), rot: mat2 }
          fn split(x: f32) -> (f32, i32) {
            let k = floor(x);
            (x - k, k as i32)
          }
          fn weights(fx: f32) -> [f32; 3] {
            [0.5 * (1.5 - fx) * (1.5 - fx), 0.75 - (fx - 1.0) * (fx - 1.0), 0.5 * (fx - 0.5) * (fx - 0.5)]
          }
          fn advance(p: Particle, g: vec3, dt: f32) -> Particle {
            let mut q = p;
            q.v += g * dt;
            q.x += q.v * dt;
            q
          }
          fn energy(p: Particle) -> f32 { 0.5 * p.m * (p.v.x * p.v.x + p.v.y * p.v.y + p.v.z * p.v.z) }
          fn bump(mut p: Particle) -> f32 { p.m += 1.0; p.m }
          fn classify(x: i32) -> (i32, Particle) {
            if x < 3 { return (1, Particle { x: vec3(0.0), v: vec3(1.0), m: 2.0 }); }
            for k in 0..x {
              if k * k > x { return (k, Particle { x: vec3(k as f32), v: vec3(0.0), m: 1.0 }); }
            }
            (0 - x, Particle { x: vec3(1.0, 2.0, 3.0), v: vec3(0.5), m: 0.5 })
          }
          fn kernel(i: i32) {
            let fi = i as f32;
            let mut p = Particle { x: vec3(fi, 0.5 * fi, 1.0), v: vec3(0.0, 1.0, -1.0), m: 1.0 + fi * 0.25 };
            p.v += vec3(0.0, -9.75, 0.0) * 0.125;
            p.x.y = p.x.y * 2.0;
            let q = p;
            p.m = 7.0;
            let r = advance(q, vec3(0.0, -1.0, 0.0), 0.5);
            let (fx, base) = split(fi * 0.375 + 0.25);
            let w = weights(fx);
            let t = split(fi * 1.25);
            let mut c = Cell { p: r, w: weights(t.0), id: base, t: t, rot: mat2(fi, 1.0, 0.5, 2.0) };
            c.w[i % 3] += 1.0;
            c.p.v.x = c.w[1];
            c.rot[1].x = 3.0;
            let mut ws = 0.0;
            for x in c.w { ws = ws * 2.0 + x; }
            let (kk, cp) = classify(i);
            let pick = if i % 2 == 0 { q } else { Particle { m: 3.0, ..r } };
            let d = Cell { id: 5, ..c };
            let mv = c.rot * vec2(1.0, 2.0);
            o[i] = base * 1000 + t.1 * 100 + c.id * 10 + kk + d.id * 100000 + c.t.1 * 1000000 + c.w.len();
            f[i] = energy(p) + energy(q) * 2.0 + r.x.x + r.x.y + r.x.z + w[0] + w[1] * 3.0 + weights(fx)[2] + ws + c.p.v.x
                + cp.x.x + cp.v.y + pick.m + pick.x.y + d.p.m + bump(q) * 10.0 + q.m + mv.x + mv.y * 0.5;
        }";

/// Kernels covering the language, its built-ins and its edge cases.
pub fn corpus() -> Vec<Case> {
    let c = |s: &str| s.to_string();
    vec![
        ("arith", vec![("o", "f32", vec![64], json!(0)), ("io", "i32", vec![64], json!(0)), ("uo", "u32", vec![64], json!(0))],
         c("fn kernel(i: i32) { o[i] = i as f32 * 0.5 + 1.0 / (i as f32 + 1.0); io[i] = (i * 7 - 200) / 3 + (i * 7 - 200) % 3 + (-i >> 2) + (i << 29); uo[i] = (i as u32) * 2654435761u32 ^ ((i as u32) >> 3u32); }"),
         vec![64]),
        ("int_edges", vec![("o", "i32", vec![12], json!(0)), ("u", "u32", vec![6], json!(0))],
         c("fn kernel(i: i32) {
            if i == 0 { o[i] = 7 / (i - i); } if i == 1 { o[i] = 7 % (i - i); } if i == 2 { o[i] = 1 << (31 + i); }
            if i == 3 { o[i] = -16 >> 2; } if i == 4 { o[i] = 2147483647 + i - 3; } if i == 5 { o[i] = (-2147483648) / (i - 6); }
            if i == 6 { o[i] = 3.99 as i32 + (-3.99) as i32; } if i == 7 { o[i] = 1e20 as i32; } if i == 8 { o[i] = (0.0 / 0.0) as i32; }
            if i == 9 { o[i] = -1e20 as i32; } if i == 10 { o[i] = (-2147483648 + i - 10) % (i - 11); }
            if i == 11 { o[i] = abs(-2147483647 - 1 + i - 11) + sign(i - 20) + min(i, -3) + max(i, 40) + clamp(i * 9, 0, 50); }
            if i < 6 { u[i] = select(i == 0, 4000000000u32 / 3u32, (-5.0 + i as f32) as u32 + 4294967295u32 * (i as u32)) + (i as u32) % ((i as u32) - 2u32) + min(i as u32, 3u32) + clamp(i as u32, 2u32, 4u32); }
        }"), vec![12]),
        ("float_edges", vec![("o", "f32", vec![16, 12], json!(0))],
         c("fn kernel(i: i32) {
            let z = bitcast::<f32>(select(i % 4 == 0, 0x80000000u32, 0u32));
            let n = bitcast::<f32>(0x7fc00000u32 + (i as u32));
            let a = (i as f32 - 8.0) * 0.5;
            o[(i, 0)] = min(z, 0.0); o[(i, 1)] = max(0.0, z); o[(i, 2)] = min(n, a); o[(i, 3)] = max(a, n);
            o[(i, 4)] = clamp(n, -1.0, 1.0); o[(i, 5)] = clamp(a, n, 1.0); o[(i, 6)] = saturate(n) + saturate(a);
            o[(i, 7)] = a % 0.75 + a % z; o[(i, 8)] = (n as i32) as f32 + (a * 1e30) as u32 as f32;
            o[(i, 9)] = sign(n) + sign(z) + step(n, a); o[(i, 10)] = round(a) + fract(-a) + trunc(-a);
            o[(i, 11)] = select(n != n, 1.0, 0.0) + select(a >= n, 2.0, 0.0) + select(z == 0.0, 4.0, 0.0);
        }"), vec![16]),
        ("control", vec![("o", "i32", vec![16], json!(0))],
         c("fn kernel(i: i32) {
            let mut acc = 0;
            for k in (0..i).step_by(3) { acc += k; }
            for k in 0..=5 { if k == 2 { continue; } if k == 4 { break; } acc += 100 * k; }
            let mut n = 0; while n < 100 { n += 7; if n > 50 { break; } } acc += n;
            let mut m = 0; loop { m += 1; if m * m > i { break; } } acc += 1000 * m;
            for k in 2147483640..=2147483647 { acc += 1; }
            for k in (4294967290u32..=4294967295u32).step_by(2u32) { acc += 3; }
            for k in 5..-5 { acc += 1000; }
            for a in 0..3 { for b in a..4 { if b == 2 { continue; } acc += a * b; } }
            if i == 9 { o[i] = -1; return; }
            o[i] = acc + select(i % 2 == 0, 10000, 20000);
        }"), vec![16]),
        ("helpers", vec![("o", "f32", vec![8], json!(0)), ("w", "vec3", vec![8], json!(0))],
         c("fn sq(x: f32) -> f32 { x * x }
          fn clamp01(x: f32) -> f32 { if x < 0.0 { return 0.0; } if x > 1.0 { return 1.0; } x }
          fn both(x: f32) -> f32 { clamp01(sq(x) - 0.5) }
          fn pick(v: vec3, k: i32) -> vec3 { for j in 0..k { if j == 2 { return v * 2.0; } } v.zyx }
          fn f(x: f32) -> f32 { if x > 0.0 { return 1.0; } else { return 2.0; } }
          fn g(x: f32) -> f32 { loop { if x > 0.0 { return x; } return -x; } }
          fn kernel(i: i32) { o[i] = both(i as f32 * 0.25) + f(i as f32) + g(i as f32 - 0.5); w[i] = pick(vec3(1.0, 2.0, i as f32), i); }"), vec![8]),
        ("vectors", vec![("o", "vec4", vec![8], json!(0)), ("iv", "ivec3", vec![8], json!(0)), ("b", "u32", vec![8], json!(0))],
         c("fn kernel(i: i32) {
            let f = i as f32;
            let mut v = vec4(f, f + 1.0, vec2(f + 2.0, f + 3.0));
            v.xy = v.yx; v[2] = v.w * 2.0; v[i % 4] += 100.0; v[i * 1000] -= 1.0; v[-i] += 0.25;
            o[i] = v + vec4(1.0) * 0.5; o[i].w -= v[i - 4];
            iv[i] = ivec3(i, i * 2, i * 3).zyx + 1;
            b[i] = select(all(v.xy < vec2(50.0)), 1u32, 0u32) + select(any(iv[i] == ivec3(1)), 2u32, 0u32) + bitcast::<u32>(f) % 7u32 + select(!(i > 3) || i == 7, 8u32, 0u32);
        }"), vec![8]),
        ("matrices", vec![("m", "mat3", vec![4], json!(0)), ("v", "vec3", vec![4], json!(0)), ("d", "f32", vec![4], json!(0)), ("m2", "mat2", vec![4], json!(0))],
         c("fn kernel(i: i32) {
            let f = i as f32 + 1.0;
            let b = mat3(2.0 * f, 0.0, 1.0, 1.0, 3.0, 0.0, 0.0, 1.0, 4.0 + f);
            m[i] = inverse(b) * transpose(b) + outer(vec3(1.0, f, 3.0), vec3(0.0, 1.0, f)) * 0.5 - b / f;
            v[i] = b * vec3(1.0, 2.0, f) + vec3(1.0, 0.0, 1.0) * b;
            d[i] = determinant(b) + (b * b)[1][0] + b[2][2] + b[i][i - 1];
            let a = mat2(f, 1.0, 2.0, -f);
            m2[i] = inverse(a) + a * a + transpose(a) * determinant(a);
        }"), vec![4]),
        ("math", vec![("o", "f32", vec![64, 16], json!(0))],
         c("fn kernel(i: i32) {
            let x = (i as f32 - 32.0) * 0.13; let p = abs(x) + 0.01;
            o[(i, 0)] = sqrt(p); o[(i, 1)] = floor(x) + ceil(x) * 2.0 + round(x) * 3.0 + trunc(x) * 5.0; o[(i, 2)] = fract(x);
            o[(i, 3)] = clamp(x, -1.0, 2.0) + saturate(x) + sign(x) + min(x, 0.5) + max(x, -0.5); o[(i, 4)] = smoothstep(-1.0, 1.0, x) + step(0.5, x);
            o[(i, 5)] = lerp(1.0, 3.0, x); o[(i, 6)] = fma(x, 2.0, 1.0); o[(i, 7)] = length(vec3(x, 1.0, 2.0)); o[(i, 8)] = dot(vec2(x, 2.0), vec2(3.0, x)) + (dot(ivec2(i, 2), ivec2(3, i)) as f32);
            o[(i, 9)] = normalize(vec2(x, 1.0)).y; o[(i, 10)] = cross(vec3(x, 1.0, 0.0), vec3(0.0, 1.0, x)).x; o[(i, 11)] = distance(vec2(x, 0.0), vec2(0.0, 1.0));
            o[(i, 12)] = reflect(vec2(x, -1.0), vec2(0.0, 1.0)).y; o[(i, 13)] = rsqrt(p); o[(i, 14)] = select(isnan(bitcast::<f32>(0x7fc00000u32 + (i as u32) * select(i > 32, 1u32, 0u32))), 1.0, 0.0);
            o[(i, 15)] = select(isinf(bitcast::<f32>(0x7f800000u32 | (((i % 2) as u32) << 31u32)) * select(i > 10, 1.0, 0.0)), 1.0, 0.0) + (x % 0.7);
        }"), vec![64]),
        ("transcendental", vec![("o", "f32", vec![64, 12], json!(0))],
         c("fn kernel(i: i32) {
            let x = (i as f32 - 32.0) * 0.09; let p = abs(x) + 0.01;
            o[(i, 0)] = sin(x); o[(i, 1)] = cos(x); o[(i, 2)] = exp(x * 0.5); o[(i, 3)] = log(p); o[(i, 4)] = pow(p, 1.7);
            o[(i, 5)] = atan2(x, 1.5); o[(i, 6)] = tanh(x); o[(i, 7)] = exp2(x * 0.3) + log2(p);
            o[(i, 8)] = tan(x * 0.3) + asin(clamp(x * 0.2, -1.0, 1.0)) + acos(clamp(x * 0.2, -1.0, 1.0)) + atan(x);
            o[(i, 9)] = sinh(x * 0.5) + cosh(x * 0.5); o[(i, 10)] = asinh(x) + acosh(p + 1.0) + atanh(x * 0.3);
            o[(i, 11)] = sqrt(-p) + log(-p) + pow(-p, 0.5);
        }"), vec![64]),
        ("random", vec![("r", "f32", vec![4096], json!(0)), ("r2", "f32", vec![4096], json!(0))],
         c("fn noise(s: f32) -> f32 { if s > 0.5 { return random(); } random() * s }
          fn kernel(i: i32) { r[i] = random(); r2[i] = random() + frame() as f32 + noise(r[i]); }"), vec![4096]),
        ("atomics", vec![("count", "i32", vec![1], json!(0)), ("fsum", "f32", vec![2], json!(0)), ("hi", "i32", vec![1], json!(-5)),
                        ("lo", "u32", vec![1], json!(4000000000u32)), ("slot", "i32", vec![4096], json!(0)), ("vsum", "vec2", vec![1], json!(0)),
                        ("bits", "u32", vec![1], json!(0)), ("cas", "i32", vec![1], json!(0)), ("fmin", "f32", vec![2], json!(100.0)),
                        ("ex", "i32", vec![2], json!(0))],
         c("fn kernel(i: i32) {
            let old = atomic_add(count[0], 1); slot[old] += 1;
            fsum[0] += 0.5; fsum[1] -= 0.25 + i as f32 * 0.001; atomic_max(hi[0], i % 977); atomic_min(lo[0], (i as u32) + 10u32);
            vsum[0] += vec2(1.0, 2.0); vsum[0].y -= 1.0;
            atomic_or(bits[0], 1u32 << ((i % 32) as u32)); atomic_min(fmin[0], (i % 50) as f32 - 3.5); atomic_max(fmin[1], (i % 70) as f32);
            atomic_and(bits[0], 0xfffffffeu32); atomic_xor(bits[0], 2u32); atomic_sub(count[0], 0);
            ex[1] += atomic_exchange(ex[0], i);
            loop { let cur = cas[0]; if atomic_compare_exchange(cas[0], cur, cur + 2) == cur { break; } }
        }"), vec![4096]),
        ("three_d_and_mat4", vec![("a", "i32", vec![5, 6, 7], json!(0)), ("m", "mat4", vec![5], json!(0)), ("d", "f32", vec![5], json!(0)), ("u", "u32", vec![5], json!(0))],
         c("fn pick(v: ivec3) -> i32 { if v.x > v.y { return v.x; } if v.y > v.z { return v.y; } v.z }
          fn kernel(i: i32, j: i32, k: i32) {
            a[(i, j, k)] = i * 100 + j * 10 + k + pick(ivec3(i, j, k));
            if j == 0 && k == 0 {
                let f = i as f32 + 2.0;
                let mut b = mat4(f);
                b[1][0] = 0.5; b[3][2] = -1.0 + f * 0.1; b[2][3] = 0.25;
                let c = i % 4;
                b[c] = b[c] + vec4(0.1, 0.2, 0.3, 0.4);
                m[i] = inverse(b) * 2.0 + transpose(b);
                d[i] = determinant(b);
                let mut s = 0u32;
                for q in (3u32..40u32).step_by(5u32) { s += q ^ (i as u32); }
                u[i] = s;
            }
        }"), vec![5, 6, 7]),
        ("layouts", vec![("a", "i32", vec![16, 16], json!(0)), ("b", "vec2", vec![16, 16], json!(0))],
         c("fn kernel(i: i32, j: i32) { a[(i, j)] = i * 1000 + j; b[(j, i)] = vec2((i + j) as f32, 0.5); }"), vec![16, 16]),
        ("bits", vec![("u", "u32", vec![4], json!(0)), ("f", "f32", vec![2], json!(0)), ("bo", "i32", vec![4], json!(0))],
         c("fn kernel(i: i32) {
            u[0] = bitcast::<u32>(1.0); u[1] = bitcast::<u32>(-2) >> 28u32; u[2] = !0u32 ^ 0xFFu32; u[3] = (1u32 << 31u32) >> 33u32;
            f[0] = bitcast::<f32>(0x40490fdbu32); f[1] = -bitcast::<f32>(0x7fc00001u32);
            let t = true; bo[0] = select(t, 1, 0); bo[1] = select(!(1 > 2), 1, 0); bo[2] = select((i == 0) != (1.5 > 2.0), 1, 0); bo[3] = select(f[0] > 3.0 && t == (i == 0), 1, 0);
        }"), vec![1]),
        ("long_and_deep", vec![("x", "f32", vec![4], json!(1))],
         format!("{}fn f12(a: f32) -> f32 {{ if a > 100.0 {{ return a; }} a * 1.5 }}\nfn kernel(i: i32) {{\n{}    x[i] = f0(x[i]);\n}}\n",
            (0..12).map(|k| format!("fn f{}(a: f32) -> f32 {{ if a < 0.0 {{ return 0.0; }} f{}(a) + f{}(a * 0.5) }}\n", k, k + 1, k + 1)).collect::<String>(),
            "    x[i] = x[i] + 1.0 - 0.5 * 2.0;\n".repeat(300)),
         vec![4]),
        ("match_labels_consts", vec![("o", "i32", vec![16], json!(0)), ("f", "f32", vec![16], json!(0))],
         c(MATCH_LABELS_CONSTS), vec![16]),
        ("local_arrays", vec![("o", "i32", vec![16], json!(0)), ("f", "f32", vec![16], json!(0))],
         c(LOCAL_ARRAYS), vec![16]),
        ("workgroups", vec![("o", "i32", vec![64], json!(0)), ("f", "f32", vec![64], json!(0))],
         c(WORKGROUPS), vec![64]),
        ("structs_tuples", vec![("o", "i32", vec![16], json!(0)), ("f", "f32", vec![16], json!(0))],
         c(STRUCTS_TUPLES), vec![16]),
        ("wide_types", vec![("d", "f64", vec![64], json!(0.5)), ("q", "i64", vec![64], json!(0)), ("w", "u64", vec![64], json!(0)),
                            ("v", "vec3<f64>", vec![64], json!(0)), ("f", "f32", vec![64], json!(0))],
         c(WIDE_TYPES), vec![64]),
        ("narrow_f16", vec![("o", "i32", vec![128], json!(0)), ("f", "f32", vec![96], json!(0))],
         c(NARROW_F16), vec![16]),
    ]
}

pub fn corpus_graph(fields: &[(&str, &str, Vec<u32>, Value)], code: &str, range: &[u32]) -> Value {
    let fs: Vec<F> = fields
        .iter()
        .map(|(n, t, s, i)| F(n, t, s, i.clone()))
        .collect();
    kernel_graph(&fs, code, range, json!({}))
}

/// Edge cases over a 4-cell field `x` run every frame (as in the fuzz corpus).
pub fn edge_graph(code: &str, ty: &str, init: Value) -> Value {
    json!({
        "format": "weft-graph", "version": 1,
        "nodes": [
            {"id": "g", "kind": "dense", "params": {"shape": [4]}},
            {"id": "x", "kind": "field", "params": {"type": ty, "init": init}},
            {"id": "k", "kind": "kernel", "params": {"over": "x", "code": code}},
            {"id": "t", "kind": "on_frame"}
        ],
        "wires": [{"from": "g.cells", "to": "x.layout"}, {"from": "x.field", "to": "k.x"}],
        "exec": [{"from": "t.then", "to": "k"}]
    })
}

pub fn edge_cases() -> Vec<(&'static str, &'static str, &'static str, Value)> {
    vec![
        ("int_edges_runtime", "fn kernel(i: i32) {\n    let a = x[i] as i32 - 2147483647 - 1;\n    let z = i - i - 1;\n    let s = 1 << (i + 40);\n    let u = (i as u32) / (i as u32 - i as u32);\n    let v = (i as u32) % 0u32;\n    x[i] = (a / z + a % z + abs(a) + -a + a * z + s + (a >> (i + 99))) as f32 + u as f32 + v as f32 + sign(a) as f32;\n}\n", "f32", json!(0)),
        ("float_edges", "fn kernel(i: i32) {\n    let z = x[i] * 0.0;\n    x[i] = sqrt(-1.0) + log(z) + pow(z, -1.0) + acosh(z) + z / z + 1.0 % z + normalize(vec2(z, z)).x + 1e30 * 1e30 + (z / z) as i32 as f32;\n}\n", "f32", json!(0)),
        ("matrix_edges", "fn kernel(i: i32) {\n    let m = mat2(0.0);\n    let n = inverse(m);\n    let c = m[i * 7];\n    x[i] = determinant(n) + c.x + n[i - 9][i];\n}\n", "f32", json!(0)),
        ("vector_dynamic_index", "fn kernel(i: i32) {\n    let mut v = vec4(1.0, 2.0, 3.0, 4.0);\n    v[i * 1000] = 5.0;\n    v[-i] = 6.0;\n    x[i] = v[i * 1000] + v[-2147483647 - 1];\n}\n", "f32", json!(0)),
        ("step_by_zero_at_runtime", "fn kernel(i: i32) {\n    let mut s = 0;\n    for k in (0..10).step_by(i - i) { s += k; }\n    x[i] = s as f32;\n}\n", "f32", json!(0)),
        ("index_out_of_bounds", "fn kernel(i: i32) {\n    x[i + 100] = 1.0;\n}\n", "f32", json!(0)),
        ("index_min_int", "fn kernel(i: i32) {\n    x[-2147483647 - 1 + i] = 1.0;\n}\n", "f32", json!(0)),
        ("read_out_of_bounds", "fn kernel(i: i32) {\n    let k = i - 2;\n    x[i] = x[k * 3] + 1.0;\n}\n", "f32", json!(0)),
        ("atomics_on_i32", "fn kernel(i: i32) {\n    let o = atomic_compare_exchange(x[0], 0, 1) + atomic_xor(x[(i + 1) % 4], -1) + atomic_min(x[i], -2147483647 - 1);\n    x[i] += o;\n}\n", "i32", json!(2147483647)),
        ("bitcast_nan", "fn kernel(i: i32) {\n    x[i] = bitcast::<f32>(2139095041u32) + bitcast::<f32>(i) + bitcast::<f32>(4294967295u32);\n}\n", "f32", json!(0)),
        ("many_matrix_ops", "fn kernel(i: i32) {\n    let a = mat4(1.0) * mat4(2.0) * transpose(mat4(3.0)) * inverse(mat4(4.0));\n    x[i] = determinant(a) + dot(a * vec4(1.0), vec4(1.0)) + length(cross(vec3(1.0, 0.0, 0.0), vec3(0.0, 1.0, 0.0)));\n}\n", "f32", json!(0)),
    ]
}
