//! 64-bit scalars (`f64`, `i64`, `u64`): kernels against the same
//! arithmetic written in Rust, on every local backend, and the errors for
//! what 64-bit values cannot do (the `.npy` dumps NumPy reads back are
//! checked through the CLI in `app/tests/cli.rs`).

use serde_json::json;
use weft_runtime::Backend;
use weft_tests::*;

fn wide(sim: &weft_runtime::Simulation, name: &str) -> Vec<u64> {
    words(sim, name)
        .chunks(2)
        .map(|w| w[0] as u64 | (w[1] as u64) << 32)
        .collect()
}

fn run_on(backend: Backend, fields: &[F], code: &str, range: &[u32]) -> weft_runtime::Simulation {
    let g = kernel_graph(fields, code, range, json!({}));
    let program = build(&g).unwrap_or_else(|e| panic!("{}\n{}", e, code));
    let opts = weft_runtime::SimOptions {
        backend,
        passes: weft_ir::passes::PassOptions {
            validate: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut sim = weft_runtime::Simulation::new(program, &opts)
        .unwrap_or_else(|e| panic!("{:?}: {}\n{}", backend, e, code));
    sim.start()
        .unwrap_or_else(|e| panic!("{:?}: {}\n{}", backend, e, code));
    sim
}

/// Per invocation: f64 arithmetic and the exact built-ins, i64 and u64
/// arithmetic with wrap-around, shifts, Weft's division rules, and every
/// conversion with its edge cases (saturation, NaN, rounding to f32).
const CODE: &str = "fn scale(v: f64, k: i64) -> f64 { v * k as f64 }
fn kernel(i: i32) {
    let x = (i as f64) * 0.1 - 7.3;
    let y = x * x / 3.0 + sqrt(abs(x)) - floor(x * 2.5) + fma(x, 1.5, -0.25) + min(x, 2.0) * max(x, -1.0);
    d[i] = y + 1.0e-12 * (i as f64) + scale(x, 3i64) - round(x) + clamp(x, -1.0, 1.0) + fract(x);
    let a = (i as i64) * 123456789012 - 9000000000000;
    let z = i as i64 - i as i64;
    q[i] = a / 7 + a % 11 - (a >> 5) + ((a << 3) ^ (a & 0xffff)) + a * a + a / z + a % z + abs(a) + sign(a);
    let b = (i as u64) * 0xDEADBEEFCAFEu64 + 1;
    w[i] = b / 13 + b % 17 + (b >> 40) + (b << 20) + !b + b * b + min(b, 99999999999u64);
    let big = 1.0e20f64 * (i as f64 - 3.5);
    c[i] = (x as i64) as f64 + (y as f32) as f64 + (a as f64) * 1.0e-9 + ((b as f32) as f64) * 1.0e-12;
    n[i] = (big as i32) as i64 + (big as u32) as i64 + (big as u64 as i64) / 1000000000 + ((x * 1.0e9) as i32) as i64 + ((-1i64) as u32) as i64 + ((a as i32) as i64);
    f[i] = y as f32 + (a % 1000) as f32 + (b % 1000u64) as f32;
}
";

fn expected(i: i32) -> (f64, i64, u64, f64, i64, f32) {
    let x = (i as f64) * 0.1 - 7.3;
    let y = x * x / 3.0 + x.abs().sqrt() - (x * 2.5).floor()
        + x.mul_add(1.5, -0.25)
        + x.min(2.0) * x.max(-1.0);
    let d = y + 1.0e-12 * (i as f64) + x * 3.0 - x.round_ties_even()
        + x.clamp(-1.0, 1.0)
        + (x - x.floor());
    let a = (i as i64) * 123456789012 - 9000000000000;
    // Weft: a / 0 == a, a % 0 == 0.
    let q = (a / 7)
        .wrapping_add(a % 11)
        .wrapping_sub(a >> 5)
        .wrapping_add((a << 3) ^ (a & 0xffff))
        .wrapping_add(a.wrapping_mul(a))
        .wrapping_add(a)
        .wrapping_add(0)
        .wrapping_add(a.wrapping_abs())
        .wrapping_add(a.signum());
    let b = (i as u64).wrapping_mul(0xDEADBEEFCAFE).wrapping_add(1);
    let w = (b / 13)
        .wrapping_add(b % 17)
        .wrapping_add(b >> 40)
        .wrapping_add(b << 20)
        .wrapping_add(!b)
        .wrapping_add(b.wrapping_mul(b))
        .wrapping_add(b.min(99999999999));
    let big = 1.0e20f64 * (i as f64 - 3.5);
    let c =
        (x as i64) as f64 + (y as f32) as f64 + (a as f64) * 1.0e-9 + ((b as f32) as f64) * 1.0e-12;
    let n = ((big as i32) as i64)
        .wrapping_add((big as u32) as i64)
        .wrapping_add((big as u64 as i64) / 1000000000)
        .wrapping_add(((x * 1.0e9) as i32) as i64)
        .wrapping_add(((-1i64) as u32) as i64)
        .wrapping_add((a as i32) as i64);
    let f = y as f32 + (a % 1000) as f32 + (b % 1000) as f32;
    (d, q, w, c, n, f)
}

const N: u32 = 200;

fn fields() -> Vec<F<'static>> {
    vec![
        F("d", "f64", &[N], json!(0)),
        F("q", "i64", &[N], json!(0)),
        F("w", "u64", &[N], json!(0)),
        F("c", "f64", &[N], json!(0)),
        F("n", "i64", &[N], json!(0)),
        F("f", "f32", &[N], json!(0)),
    ]
}

#[test]
fn wide_types_match_rust_on_every_backend() {
    for backend in local_backends() {
        let sim = run_on(backend, &fields(), CODE, &[N]);
        let (d, q, w, c, n) = (
            wide(&sim, "d"),
            wide(&sim, "q"),
            wide(&sim, "w"),
            wide(&sim, "c"),
            wide(&sim, "n"),
        );
        let f = f32s(&sim, "f");
        for i in 0..N as i32 {
            let (ed, eq, ew, ec, en, ef) = expected(i);
            let k = i as usize;
            let at = |what: &str| format!("{:?}: {}[{}]", backend, what, i);
            assert_eq!(
                f64::from_bits(d[k]).to_bits(),
                ed.to_bits(),
                "{} = {} want {}",
                at("d"),
                f64::from_bits(d[k]),
                ed
            );
            assert_eq!(q[k] as i64, eq, "{}", at("q"));
            assert_eq!(w[k], ew, "{}", at("w"));
            assert_eq!(
                f64::from_bits(c[k]).to_bits(),
                ec.to_bits(),
                "{} = {} want {}",
                at("c"),
                f64::from_bits(c[k]),
                ec
            );
            assert_eq!(n[k] as i64, en, "{}", at("n"));
            assert_eq!(
                f[k].to_bits(),
                ef.to_bits(),
                "{} = {} want {}",
                at("f"),
                f[k],
                ef
            );
        }
    }
}

/// Initial values, literals and consts keep every bit (an f64 literal is
/// never parsed through f32; i64 and u64 initial values above 2^53 are
/// taken from the JSON number exactly).
#[test]
fn wide_literals_consts_and_initial_values_are_exact() {
    let code = "const BIG: u64 = 18446744073709551615;
const TENTH: f64 = 0.1;
const M: i64 = -9223372036854775807 - 1;
fn kernel(i: i32) {
    d[i] = d[i] + TENTH + 0.2 + 1e-300;
    q[i] = q[i] + M / 2 + -9223372036854775807i64;
    w[i] = w[i] ^ BIG;
}";
    let fields = [
        F("d", "f64", &[2], json!(0.7)),
        F("q", "i64", &[2], json!(9007199254740993i64)),
        F("w", "u64", &[2], json!(18446744073709551000u64)),
    ];
    for backend in local_backends() {
        let sim = run_on(backend, &fields, code, &[2]);
        let want_d = 0.7f64 + 0.1 + 0.2 + 1e-300;
        assert_eq!(wide(&sim, "d")[1], want_d.to_bits(), "{:?}", backend);
        let want_q = 9007199254740993i64
            .wrapping_add(i64::MIN / 2)
            .wrapping_add(-9223372036854775807);
        assert_eq!(wide(&sim, "q")[1] as i64, want_q, "{:?}", backend);
        assert_eq!(
            wide(&sim, "w")[0],
            18446744073709551000u64 ^ u64::MAX,
            "{:?}",
            backend
        );
    }
}

fn build_error(code: &str, ty: &str) -> String {
    let g = kernel_graph(&[F("x", ty, &[4], json!(0))], code, &[4], json!({}));
    match build(&g) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("expected an error for:\n{}", code),
    }
}

/// What 64-bit values cannot do is refused with the node, line and column.
#[test]
fn wide_type_errors_name_the_line() {
    let e = build_error("fn kernel(i: i32) {\n    x[i] = sin(x[i]);\n}", "f64");
    assert!(
        e.contains("'k'") && e.contains("2:12") && e.contains("`sin` of f64"),
        "{}",
        e
    );
    // `+=` on the iteration's own element is a plain add; elsewhere it
    // would need a 64-bit atomic.
    let e = build_error(
        "fn kernel(i: i32) {\n    x[i] += 1.0;\n    atomic_add(x[0], 1.0);\n}",
        "f64",
    );
    assert!(
        e.contains("'k'") && e.contains("3:5") && e.contains("64-bit atomics"),
        "{}",
        e
    );
    let e = build_error(
        "fn kernel(i: i32) {\n    x[i] -= 1;\n    x[3 - i] += 1;\n}",
        "i64",
    );
    assert!(
        e.contains("'k'") && e.contains("3:5") && e.contains("64-bit atomic"),
        "{}",
        e
    );
    let e = build_error("fn kernel(i: i32) {\n    x[i] = 1.5f64 + 2.0f32;\n}", "f64");
    assert!(e.contains("'k'") && e.contains("2:12"), "{}", e);
    let e = build_error(
        "fn kernel(i: i32) {\n    x[i] = 9223372036854775808i64;\n}",
        "i64",
    );
    assert!(
        e.contains("'k'") && e.contains("does not fit in i64"),
        "{}",
        e
    );
    let e = build_error(
        "const S: i64 = 1i64 << 64;\nfn kernel(i: i32) {\n    x[i] = S;\n}",
        "i64",
    );
    assert!(e.contains("'k'") && e.contains("0..64"), "{}", e);
}

/// f64 → f16 would round twice through f32; it must be written out.
#[test]
fn f64_to_f16_is_refused_naming_the_line() {
    let e = build_error(
        "fn kernel(i: i32) {\n    let h = x[i] as f16;\n    x[i] = h as f64;\n}",
        "f64",
    );
    assert!(
        e.contains("'k'") && e.contains("2:13") && e.contains("as f32 as f16"),
        "{}",
        e
    );
}

/// Without SHADER_F64 and SHADER_INT64 (WebGPU, many GPUs), a kernel
/// using 64-bit values is refused naming its node, not miscompiled.
#[test]
fn wgpu_without_64_bit_shaders_refuses_naming_the_node() {
    let g = kernel_graph(
        &[F("x", "f64", &[4], json!(0))],
        "fn kernel(i: i32) { x[i] = x[i] * 2.0; }",
        &[4],
        json!({}),
    );
    let program = compiled(&g);
    let (_, k) = program.kernels.iter().next().unwrap();
    let opts = weft_codegen::wgpu::WgpuOptions {
        wide: false,
        ..Default::default()
    };
    let e = weft_codegen::wgpu::compile_kernel(&program, k, &opts).expect_err("refused");
    let m = e.to_string();
    assert!(
        m.contains("'k'") || m.contains("k:") || e.kernel == "k",
        "{}",
        m
    );
    assert!(
        m.contains("f64") && m.contains("SHADER_F64") && m.contains("code 1:"),
        "{}",
        m
    );
    // With the features the same kernel compiles and validates.
    weft_codegen::wgpu::compile_kernel(&program, k, &weft_codegen::wgpu::WgpuOptions::default())
        .expect("compiles with SHADER_F64");
}

/// `graphs/heat_f64.json` (heat with f64 temperature fields) on every
/// local backend against the same scheme in NumPy float64: bit for bit,
/// since every operation is an exact IEEE one.
#[test]
fn heat_f64_matches_numpy_float64() {
    let frames = 2;
    let script = "import numpy as np, sys
n = 128; frames = int(sys.argv[1]); subs = 20
alpha = float(np.float32(0.2))
i, j = np.meshgrid(np.arange(n), np.arange(n), indexing='ij')
def disc(cx, cy, r):
    d = np.sqrt(((i.astype(np.float32) - np.float32(cx)) ** 2 + (j.astype(np.float32) - np.float32(cy)) ** 2).astype(np.float32))
    return d < np.float32(r)
src = np.where(disc(32, 64, 6) | disc(96, 40, 8) | disc(80, 100, 4), 1.0, 0.0)
T = np.zeros((n, n))
for _ in range(frames * subs):
    c = T[1:-1, 1:-1]
    lap = T[2:, 1:-1] + T[:-2, 1:-1] + T[1:-1, 2:] + T[1:-1, :-2] - 4.0 * c
    N = np.zeros((n, n))
    N[1:-1, 1:-1] = np.maximum(c + alpha * lap, src[1:-1, 1:-1])
    T = N
sys.stdout.buffer.write(T.astype('<f8').tobytes())";
    let py = std::process::Command::new("python3")
        .args(["-c", script, &frames.to_string()])
        .output()
        .expect("python3 runs");
    assert!(
        py.status.success(),
        "{}",
        String::from_utf8_lossy(&py.stderr)
    );
    let want: Vec<u64> = py
        .stdout
        .chunks(8)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(want.len(), 128 * 128);
    for backend in local_backends() {
        let p = build(&example("heat_f64")).unwrap();
        let mut sim = weft_runtime::Simulation::new(
            p,
            &weft_runtime::SimOptions {
                backend,
                ..Default::default()
            },
        )
        .unwrap();
        sim.start().unwrap();
        for _ in 0..frames {
            sim.step_frame().unwrap();
        }
        let got = wide(&sim, "T");
        let bad = got.iter().zip(&want).filter(|(a, b)| a != b).count();
        assert_eq!(
            bad,
            0,
            "{:?}: {} of {} cells differ from NumPy",
            backend,
            bad,
            got.len()
        );
    }
}
