//! Semantics that used to be re-implemented per backend and now live once,
//! in the legalize pass: `sign` of unsigned values, integer `/` and `%` by a
//! literal zero, saturating casts, matrix determinant/inverse and fault
//! sites, range-loop trip counts, integer `dot` and `outer`. Results are compared with values computed here by hand (WGSL's
//! integer rules, Rust's `as`), on the VM, the JIT and — when an adapter exists —
//! on wgpu; every kernel must also pass the device-free checks of `weft check`.

use serde_json::{json, Value};
use weft_ir::ir::target::TargetCaps;
use weft_ir::ir::{FaultKind, InstKind};
use weft_runtime::{Backend, SimOptions, Simulation};
use weft_tests::*;

fn backends() -> Vec<Backend> {
    let mut v = vec![Backend::Vm, Backend::Jit];
    if wgpu_available() {
        v.push(Backend::Wgpu);
    }
    v
}

fn sim_on(doc: &Value, backend: Backend) -> Simulation {
    let p = build(doc).unwrap();
    let opts = SimOptions {
        backend,
        threads: Some(1),
        ..Default::default()
    };
    let mut s = Simulation::new(p, &opts).unwrap_or_else(|e| panic!("{}: {}", backend, e));
    weft_runtime::backend::compile_offline(&s.program)
        .unwrap_or_else(|e| panic!("device-free checks: {}", e));
    s.start().unwrap_or_else(|e| panic!("{}: {}", backend, e));
    s
}

#[test]
fn sign_of_unsigned_values_on_every_backend() {
    let g = kernel_graph(
        &[
            F("a", "u32", &[4], json!(0)),
            F("v", "uvec2", &[4], json!(0)),
        ],
        "fn kernel(i: i32) { let x = (i as u32) * 3000000000u32; a[i] = sign(x); v[i] = sign(uvec2(x, 0u32)); }",
        &[4],
        json!({}),
    );
    for b in backends() {
        let s = sim_on(&g, b);
        // x = i * 3e9 (wrapping): 0, 3000000000, 1705032704, 410065408.
        assert_eq!(words(&s, "a"), vec![0, 1, 1, 1], "{}", b);
        assert_eq!(words(&s, "v"), vec![0, 0, 1, 0, 1, 0, 1, 0], "{}", b);
    }
}

#[test]
fn integer_division_by_a_literal_zero_on_every_backend() {
    let g = kernel_graph(
        &[
            F("q", "i32", &[3], json!(0)),
            F("r", "i32", &[3], json!(0)),
            F("v", "ivec2", &[3], json!(0)),
            F("u", "u32", &[3], json!(0)),
        ],
        "fn kernel(i: i32) { let x = i * 7 - 5; q[i] = x / 0; r[i] = x % 0; v[i] = ivec2(x, -x) / ivec2(2, 0); u[i] = (i as u32 + 9u32) % 0u32; }",
        &[3],
        json!({}),
    );
    for b in backends() {
        let s = sim_on(&g, b);
        let xs: Vec<i32> = (0..3).map(|i| i * 7 - 5).collect();
        // WGSL: x / 0 == x, x % 0 == 0.
        assert_eq!(i32s(&s, "q"), xs, "{}", b);
        assert_eq!(i32s(&s, "r"), vec![0; 3], "{}", b);
        let v: Vec<i32> = xs.iter().flat_map(|&x| [x / 2, -x]).collect();
        assert_eq!(i32s(&s, "v"), v, "{}", b);
        assert_eq!(words(&s, "u"), vec![0; 3], "{}", b);
    }
}

#[test]
fn saturating_casts_match_rust_as() {
    let inputs = [
        f32::NAN,
        -1.0e30,
        -2147483904.0,
        -1.5,
        -0.0,
        0.75,
        2147483520.0,
        2147483648.0,
        4294967040.0,
        1.0e30,
        f32::INFINITY,
    ];
    let n = inputs.len() as u32;
    // The inputs come from a helper over the loop index, so constant
    // folding cannot see them and the cast runs on the backend.
    let mut code = String::from("fn pick(i: i32) -> f32 { let mut x = 0.0;");
    for (k, x) in inputs.iter().enumerate() {
        code.push_str(&format!(
            " if i == {} {{ x = bitcast::<f32>({}u32); }}",
            k,
            x.to_bits()
        ));
    }
    code.push_str(" x }\nfn kernel(i: i32) { let x = pick(i); s[i] = x as i32; u[i] = x as u32; }");
    let g = kernel_graph(
        &[F("s", "i32", &[n], json!(0)), F("u", "u32", &[n], json!(0))],
        &code,
        &[n],
        json!({}),
    );
    let want_s: Vec<i32> = inputs.iter().map(|&x| x as i32).collect();
    let want_u: Vec<u32> = inputs.iter().map(|&x| x as u32).collect();
    for b in backends() {
        let s = sim_on(&g, b);
        assert_eq!(i32s(&s, "s"), want_s, "{}", b);
        assert_eq!(words(&s, "u"), want_u, "{}", b);
    }
}

#[test]
fn determinant_and_inverse_match_a_hand_written_reference() {
    let g = kernel_graph(
        &[F("d", "f32", &[1], json!(0)), F("m", "mat3", &[1], json!(0))],
        "fn kernel(i: i32) { let a = mat3(vec3(2.0, 0.5, 1.0), vec3(-1.0, 3.0, 0.25), vec3(0.0, 1.5, 4.0)); d[i] = determinant(a); m[i] = inverse(a); }",
        &[1],
        json!({}),
    );
    // Column-major a[c][r], as written above.
    let a = [[2.0f32, 0.5, 1.0], [-1.0, 3.0, 0.25], [0.0, 1.5, 4.0]];
    let det2 = |p: f32, q: f32, r: f32, s: f32| p * s - r * q;
    let minor = |row: usize, col: usize| {
        let cs: Vec<usize> = (0..3).filter(|&c| c != col).collect();
        let rs: Vec<usize> = (0..3).filter(|&r| r != row).collect();
        det2(
            a[cs[0]][rs[0]],
            a[cs[0]][rs[1]],
            a[cs[1]][rs[0]],
            a[cs[1]][rs[1]],
        )
    };
    let det = a[0][0] * minor(0, 0) - a[1][0] * minor(0, 1) + a[2][0] * minor(0, 2);
    let mut inv = Vec::new();
    for c in 0..3 {
        for r in 0..3 {
            let cof = minor(c, r);
            let cof = if (r + c) % 2 == 1 { -cof } else { cof };
            inv.push(cof / det);
        }
    }
    for b in backends() {
        let s = sim_on(&g, b);
        let d = f32s(&s, "d")[0];
        let m = f32s(&s, "m");
        if b == Backend::Vm {
            assert_eq!(d.to_bits(), det.to_bits(), "vm determinant");
            let bits: Vec<u32> = m.iter().map(|x| x.to_bits()).collect();
            let want: Vec<u32> = inv.iter().map(|x| x.to_bits()).collect();
            assert_eq!(bits, want, "vm inverse");
        } else {
            assert!(close(d, det, 1e-6, 1e-6), "{}: {} vs {}", b, d, det);
            for (x, y) in m.iter().zip(&inv) {
                assert!(close(*x, *y, 1e-5, 1e-6), "{}: {:?} vs {:?}", b, m, inv);
            }
        }
    }
}

#[test]
fn faults_are_traps_with_sites_and_report_as_before() {
    let g = kernel_graph(
        &[F("x", "f32", &[4], json!(0))],
        "fn kernel(i: i32) { let mut s = 0.0; for k in (0..4).step_by(i) { s += k as f32; } x[i + 1] = s; }",
        &[4],
        json!({}),
    );
    let mut p = build(&g).unwrap();
    weft_ir::passes::run_pipeline(
        &mut p,
        &weft_ir::passes::PassOptions {
            bounds_checks: true,
            validate: true,
            ..Default::default()
        },
        None,
    )
    .unwrap();
    let k = &p.kernels.iter().next().unwrap().1;
    assert!(k
        .fault_sites
        .iter()
        .any(|s| matches!(s.kind, FaultKind::NonPositiveStep { signed: true })));
    assert!(k
        .fault_sites
        .iter()
        .any(|s| matches!(s.kind, FaultKind::OutOfBounds { extent: 4, .. })));
    let traps = k
        .entry
        .insts
        .iter()
        .filter(|(_, i)| matches!(i.kind, InstKind::Trap { .. }))
        .count();
    assert!(traps >= 2, "one trap per site");
    for b in backends() {
        let p = build(&g).unwrap();
        let mut s = Simulation::new(
            p,
            &SimOptions {
                backend: b,
                threads: Some(1),
                ..Default::default()
            },
        )
        .unwrap();
        let e = s.start().expect_err("iteration 0 has step 0").to_string();
        assert!(
            e.contains("`step_by` needs a positive step, got 0"),
            "{}: {}",
            b,
            e
        );
    }
}

#[test]
fn range_loops_at_type_limits_with_continue_on_every_backend() {
    // Each loop counts its iterations and sums the counters it visited;
    // `continue` must still advance the counter.
    let g = kernel_graph(
        &[
            F("n", "i32", &[6], json!(0)),
            F("s", "u32", &[6], json!(0)),
        ],
        "fn kernel(i: i32) {
            let mut cnt = 0;
            let mut acc = 0u32;
            if i == 0 { for k in 2147483640..=2147483647 { cnt += 1; acc += k as u32; } }
            if i == 1 { for k in (2147483600..2147483647).step_by(40) { cnt += 1; acc += k as u32; } }
            if i == 2 { for k in 4294967290u32..=4294967295u32 { if k % 2u32 == 0u32 { continue; } cnt += 1; acc += k; } }
            if i == 3 { for k in (-2147483647 - 1)..=-2147483645 { cnt += 1; acc += k as u32; } }
            if i == 4 { for k in 5..5 { cnt += 1; } for k in 6..=5 { cnt += 1; } }
            if i == 5 { for a in 0..3 { for b in (a..=7).step_by(3) { if b == 4 { continue; } cnt += 1; acc += (a * 10 + b) as u32; } } }
            n[i] = cnt;
            s[i] = acc;
        }",
        &[6],
        json!({}),
    );
    // By hand: (0) 8 values 2147483640..=2147483647; (1) 2147483600, 2147483640;
    // (2) the odd ones of 4294967290..=4294967295: ...91, ...93, ...95;
    // (3) four values from i32::MIN; (4) empty; (5) a=0: b=0,3,6; a=1: 1,(4),7;
    // a=2: 2,5.
    let sum = |v: &[i64]| v.iter().fold(0u32, |a, &x| a.wrapping_add(x as u32));
    let expect_n = vec![8u32, 2, 3, 4, 0, 7];
    let expect_s = vec![
        sum(&(2147483640..=2147483647).collect::<Vec<_>>()),
        sum(&[2147483600, 2147483640]),
        sum(&[4294967291, 4294967293, 4294967295]),
        sum(&(-2147483648..=-2147483645).collect::<Vec<_>>()),
        0,
        sum(&[0, 3, 6, 11, 17, 22, 25]),
    ];
    for b in backends() {
        let s = sim_on(&g, b);
        assert_eq!(words(&s, "n"), expect_n, "{}", b);
        assert_eq!(words(&s, "s"), expect_s, "{}", b);
        for (_, k) in s.program.kernels.iter() {
            fn has_range(f: &weft_ir::ir::Function, block: &[weft_ir::ir::InstId]) -> bool {
                block.iter().any(|&h| {
                    let kind = &f.insts[h].kind;
                    matches!(kind, InstKind::RangeFor { .. } | InstKind::LoopCounter(_))
                        || kind.blocks().iter().any(|b| has_range(f, b))
                })
            }
            assert!(
                !has_range(&k.entry, &k.entry.body),
                "legalized IR still has a range loop"
            );
        }
    }
}

#[test]
fn integer_dot_and_outer_products_on_every_backend() {
    let g = kernel_graph(
        &[
            F("d", "i32", &[2], json!(0)),
            F("u", "u32", &[2], json!(0)),
            F("m", "mat3", &[2], json!(0)),
        ],
        "fn kernel(i: i32) {
            let a = ivec3(i + 1, -2, 2147483647);
            d[i] = dot(a, ivec3(3, 4, 2));
            u[i] = dot(uvec2(4000000000u32, i as u32), uvec2(2u32, 7u32));
            m[i] = outer(vec3(1.5, -2.0, i as f32), vec3(0.5, 3.0, -1.0));
        }",
        &[2],
        json!({}),
    );
    for b in backends() {
        let s = sim_on(&g, b);
        let d: Vec<u32> = (0..2i32)
            .map(|i| {
                (3 * (i + 1))
                    .wrapping_add(-8)
                    .wrapping_add(2147483647i32.wrapping_mul(2)) as u32
            })
            .collect();
        assert_eq!(words(&s, "d"), d, "{}", b);
        let u: Vec<u32> = (0..2u32)
            .map(|i| 4000000000u32.wrapping_mul(2).wrapping_add(i * 7))
            .collect();
        assert_eq!(words(&s, "u"), u, "{}", b);
        let mut m = Vec::new();
        for i in 0..2 {
            let (a, c) = ([1.5f32, -2.0, i as f32], [0.5f32, 3.0, -1.0]);
            // Column-major: column j is a * c[j].
            for cj in c {
                for ai in a {
                    m.push((ai * cj).to_bits());
                }
            }
        }
        assert_eq!(words(&s, "m"), m, "{}", b);
    }
}

/// Rust's integer division with Weft's answers where a native division
/// faults: `x / 0 == x`, `x % 0 == 0`, `i32::MIN / -1 == i32::MIN`, `% == 0`.
fn weft_div(x: i32, y: i32) -> (i32, i32) {
    (x.checked_div(y).unwrap_or(x), x.checked_rem(y).unwrap_or(0))
}

#[test]
fn integer_division_by_run_time_values_on_every_backend() {
    // Operands chosen at run time (nothing folds): legalize guards the
    // divisor, every backend divides natively.
    let cases: [(i32, i32); 9] = [
        (i32::MIN, -1),
        (i32::MIN, 0),
        (-7, 2),
        (7, -2),
        (-7, -2),
        (5, 0),
        (i32::MAX, -1),
        (7, -1),
        (i32::MIN, 3),
    ];
    let mut code = String::from("fn kernel(i: i32) {\n    let mut a = 0;\n    let mut b = 0;\n");
    for (k, (a, b)) in cases.iter().enumerate() {
        // `-2147483647 - 1`: the literal 2147483648 is out of i32's range.
        let lit = |v: i32| {
            if v == i32::MIN {
                "(-2147483647 - 1)".to_string()
            } else {
                format!("({})", v)
            }
        };
        code += &format!(
            "    if i == {} {{ a = {}; b = {}; }}\n",
            k,
            lit(*a),
            lit(*b)
        );
    }
    code += "    q[i] = a / b;\n    r[i] = a % b;\n    v[i] = ivec2(a, a) / ivec2(b, 3);\n    w[i] = ivec2(a, a) % ivec2(b, -1);\n    uq[i] = (a as u32) / (b as u32);\n    ur[i] = (a as u32) % (b as u32);\n}\n";
    let n = cases.len() as u32;
    let g = kernel_graph(
        &[
            F("q", "i32", &[n], json!(0)),
            F("r", "i32", &[n], json!(0)),
            F("v", "ivec2", &[n], json!(0)),
            F("w", "ivec2", &[n], json!(0)),
            F("uq", "u32", &[n], json!(0)),
            F("ur", "u32", &[n], json!(0)),
        ],
        &code,
        &[n],
        json!({}),
    );
    let q: Vec<i32> = cases.iter().map(|&(a, b)| weft_div(a, b).0).collect();
    let r: Vec<i32> = cases.iter().map(|&(a, b)| weft_div(a, b).1).collect();
    let v: Vec<i32> = cases
        .iter()
        .flat_map(|&(a, b)| [weft_div(a, b).0, a / 3])
        .collect();
    let w: Vec<i32> = cases
        .iter()
        .flat_map(|&(a, b)| [weft_div(a, b).1, weft_div(a, -1).1])
        .collect();
    let (uq, ur): (Vec<u32>, Vec<u32>) = cases
        .iter()
        .map(|&(a, b)| {
            let (a, b) = (a as u32, b as u32);
            (a.checked_div(b).unwrap_or(a), a.checked_rem(b).unwrap_or(0))
        })
        .unzip();
    for b in backends() {
        let s = sim_on(&g, b);
        assert_eq!(i32s(&s, "q"), q, "{}", b);
        assert_eq!(i32s(&s, "r"), r, "{}", b);
        assert_eq!(i32s(&s, "v"), v, "{}", b);
        assert_eq!(i32s(&s, "w"), w, "{}", b);
        assert_eq!(words(&s, "uq"), uq, "{}", b);
        assert_eq!(words(&s, "ur"), ur, "{}", b);
    }
}

/// The kernel's entry after the whole pipeline (validated after every pass).
fn legalized_entry(code: &str) -> (weft_ir::ir::Program, weft_ir::ir::Function) {
    let g = kernel_graph(
        &[F("q", "i32", &[8], json!(0)), F("u", "u32", &[8], json!(0))],
        code,
        &[8],
        json!({}),
    );
    let mut p = build(&g).unwrap();
    weft_ir::passes::run_pipeline(
        &mut p,
        &weft_ir::passes::PassOptions {
            validate: true,
            ..Default::default()
        },
        None,
    )
    .unwrap();
    let f = p.kernels.iter().next().unwrap().1.entry.clone();
    (p, f)
}

fn count(f: &weft_ir::ir::Function, pred: impl Fn(&InstKind) -> bool) -> usize {
    f.insts.iter().filter(|(_, i)| pred(&i.kind)).count()
}

#[test]
fn a_constant_divisor_that_cannot_fault_costs_nothing_more() {
    use weft_ir::ir::BinaryOp;
    // mpm88's `/ 3`-style divisions stay one native division, unguarded.
    let (_, f) = legalized_entry(
        "fn kernel(i: i32) { q[i] = q[i] / 3 + q[i] % -7; u[i] = u[i] / 5u32 + u[i] % 16u32; }",
    );
    assert_eq!(count(&f, |k| matches!(k, InstKind::Select { .. })), 0);
    let divs = count(&f, |k| {
        matches!(k, InstKind::Binary(BinaryOp::Div | BinaryOp::Rem, ..))
    });
    assert!(divs >= 3, "{} divisions", divs);
    // A run-time divisor, and -1 (which overflows for i32::MIN), are guarded.
    let (_, f) = legalized_entry("fn kernel(i: i32) { q[i] = q[i] / -1 + i / q[i]; }");
    assert!(count(&f, |k| matches!(k, InstKind::Select { .. })) >= 2);
}

#[test]
fn the_validator_refuses_a_division_legalize_did_not_guard() {
    use weft_ir::ir::{validate_program, BinaryOp, IrForm};
    let (mut p, f) = legalized_entry("fn kernel(i: i32) { q[i] = i / q[i]; }");
    // Put the unguarded divisor back: the innermost `select`'s `reject` arm.
    let (div, mut unguarded) = f
        .insts
        .iter()
        .find_map(|(h, i)| match i.kind {
            InstKind::Binary(BinaryOp::Div, _, b) => {
                matches!(f.insts[b].kind, InstKind::Select { .. }).then_some((h, b))
            }
            _ => None,
        })
        .expect("a guarded division");
    while let InstKind::Select { reject, .. } = f.insts[unguarded].kind {
        unguarded = reject;
    }
    validate_program(&p, IrForm::Legalized).expect("legalize's output is valid");
    let k = p.kernels.handles().next().unwrap();
    if let InstKind::Binary(op, a, _) = p.kernels[k].entry.insts[div].kind.clone() {
        p.kernels[k].entry.insts[div].kind = InstKind::Binary(op, a, unguarded);
    }
    let e = validate_program(&p, IrForm::Legalized)
        .expect_err("an unguarded division is not legalized IR")
        .to_string();
    assert!(e.contains("divisor legalize did not guard"), "{}", e);
}

/// The error of running `code` once over a field of 8 on `backend`.
fn fault_on(code: &str, backend: Backend, bounds_checks: bool) -> String {
    let g = kernel_graph(
        &[F("x", "f32", &[8], json!(0)), F("y", "f32", &[8], json!(0))],
        code,
        &[8],
        json!({}),
    );
    let opts = SimOptions {
        backend,
        threads: Some(1),
        passes: weft_ir::passes::PassOptions {
            bounds_checks,
            validate: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut s =
        Simulation::new(build(&g).unwrap(), &opts).unwrap_or_else(|e| panic!("{}: {}", backend, e));
    match s.start() {
        Ok(()) => format!("{}: no fault", backend),
        Err(e) => e.to_string(),
    }
}

#[test]
fn out_of_range_access_has_one_outcome_on_every_backend() {
    // Bounds checks on (the default): legalize's trap, one message.
    for (code, message) in [
        (
            "fn kernel(i: i32) {\n    x[i + 1] = 1.0;\n}",
            "node 'k', code 2:5: index 8 is out of bounds for axis 0 of field 'x' (extent 8)",
        ),
        (
            "fn kernel(i: i32) {\n    y[i] = x[i - 3];\n}",
            "node 'k', code 2:12: index -3 is out of bounds for axis 0 of field 'x' (extent 8)",
        ),
        (
            "fn kernel(i: i32) {\n    atomic_add(x[i * 1000], 1.0);\n}",
            "index 1000 is out of bounds for axis 0 of field 'x' (extent 8)",
        ),
    ] {
        for b in backends() {
            let e = fault_on(code, b, true);
            assert!(e.contains(message), "{}: {}\n{}", b, code, e);
        }
    }
    // Without bounds checks the word address is still checked: the VM
    // faults like the JIT (it used to panic on a slice index).
    for code in [
        "fn kernel(i: i32) {\n    x[i + 1000000] = 1.0;\n}",
        "fn kernel(i: i32) {\n    y[i] = x[-1 - i];\n}",
        "fn kernel(i: i32) {\n    atomic_max(x[i + 1000000], 1.0);\n}",
    ] {
        let vm = fault_on(code, Backend::Vm, false);
        let jit = fault_on(code, Backend::Jit, false);
        assert!(
            vm.contains("node 'k', code 2:") && vm.contains("outside the field storage"),
            "{}\n{}",
            code,
            vm
        );
        assert_eq!(vm, jit, "{}", code);
    }
}

#[test]
fn atomics_a_target_lacks_give_the_same_values_on_every_backend() {
    // f32 min/max (with min/max's NaN rules), i32 min/max and f32 add:
    // each backend lacks some of them and gets `legalize`'s one
    // compare-exchange loop for those; the values are computed here.
    let g = kernel_graph(
        &[
            F("fmin", "f32", &[2], json!(0)),
            F("fmax", "f32", &[2], json!(0)),
            F("imin", "i32", &[1], json!(0)),
            F("imax", "i32", &[1], json!(0)),
            F("sum", "f32", &[1], json!(0)),
            F("old", "f32", &[64], json!(0)),
            F("count", "f32", &[1], json!(0)),
        ],
        "fn kernel(i: i32) {
            let x = (i as f32) - 20.5;
            atomic_min(fmin[0], x);
            atomic_max(fmax[0], x);
            let z = 0.0 * x;
            let nan = select(i == 5, z / z, x);
            atomic_min(fmin[1], nan);
            atomic_max(fmax[1], nan);
            atomic_min(imin[0], 7 - i * 3);
            atomic_max(imax[0], i * 5 - 100);
            atomic_add(sum[0], i as f32);
            old[i] = atomic_add(count[0], 1.0);
        }",
        &[64],
        json!({}),
    );
    for b in backends() {
        let s = sim_on(&g, b);
        assert_eq!(f32s(&s, "fmin"), vec![-20.5, -20.5], "{}", b);
        assert_eq!(f32s(&s, "fmax"), vec![42.5, 42.5], "{}", b);
        assert_eq!(words(&s, "imin"), vec![(7 - 63 * 3) as u32], "{}", b);
        assert_eq!(words(&s, "imax"), vec![215], "{}", b);
        assert_eq!(f32s(&s, "sum"), vec![2016.0], "{}", b);
        let mut old = f32s(&s, "old");
        old.sort_by(f32::total_cmp);
        assert_eq!(old, (0..64).map(|k| k as f32).collect::<Vec<_>>(), "{}", b);
    }
}

#[test]
fn legalize_expands_exactly_what_the_target_lacks() {
    use weft_ir::ir::AtomicOp;
    let g = kernel_graph(
        &[F("a", "f32", &[4], json!(0)), F("n", "i32", &[4], json!(0))],
        "fn kernel(i: i32) { atomic_add(a[0], 1.0); atomic_max(a[1], 2.0); atomic_min(n[0], i); atomic_add(n[1], i); }",
        &[4],
        json!({}),
    );
    // (op, scalar) of every atomic left, and how many compare-exchange
    // loops `match_cas_loop` finds.
    let atomics = |caps: TargetCaps| {
        let mut p = build(&g).unwrap();
        let opts = weft_ir::passes::PassOptions {
            target: caps,
            validate: true,
            ..Default::default()
        };
        weft_ir::passes::run_pipeline(&mut p, &opts, None).unwrap();
        assert_eq!(p.target, caps);
        let k = p.kernel_by_name("k").unwrap();
        let f = &p.kernels[k].entry;
        let (mut ops, mut loops) = (Vec::new(), 0);
        // The instructions in the body (the arena also holds dead ones).
        let mut stack = vec![f.body.clone()];
        while let Some(block) = stack.pop() {
            for h in block {
                let i = &f.insts[h];
                if let InstKind::BufAtomic { op, .. } = i.kind {
                    ops.push((op, i.ty.to_string()));
                }
                loops += weft_ir::lower::quantize::match_cas_loop(f, h).is_some() as usize;
                stack.extend(i.kind.blocks().into_iter().cloned());
            }
        }
        ops.sort_by_key(|(op, t)| format!("{:?}{}", op, t));
        (ops, loops)
    };
    let cx = |t: &str| (AtomicOp::CompareExchange, t.to_string());
    // The baseline: integer add stays, the rest are loops.
    let (ops, loops) = atomics(TargetCaps::BASELINE);
    assert_eq!(loops, 3);
    assert_eq!(
        ops,
        vec![
            (AtomicOp::Add, "i32".to_string()),
            cx("u32"),
            cx("u32"),
            cx("u32")
        ]
    );
    // The CPU backend: f32 add and i32 min are native, f32 max is a loop.
    let (ops, loops) = atomics(weft_codegen::jit::CAPS);
    assert_eq!(loops, 1);
    assert_eq!(
        ops,
        vec![
            (AtomicOp::Add, "f32".to_string()),
            (AtomicOp::Add, "i32".to_string()),
            cx("u32"),
            (AtomicOp::Min, "i32".to_string())
        ]
    );
    // wgpu with native f32 add: not on `a`, which f32 max (a loop of
    // compare-exchanges) shares, as WGSL types a buffer one way.
    let (_, loops) = atomics(weft_codegen::wgpu::caps(true));
    assert_eq!(loops, 3);
}

#[test]
fn random_is_plain_ir_after_legalize() {
    let g = kernel_graph(
        &[F("r", "f32", &[8], json!(0))],
        "fn kernel(i: i32) { r[i] = random(); }",
        &[8],
        json!({}),
    );
    let p = compiled(&g);
    let k = p.kernel_by_name("k").unwrap();
    let f = &p.kernels[k].entry;
    let kinds: Vec<&InstKind> = f.body.iter().map(|&h| &f.insts[h].kind).collect();
    assert!(!kinds.iter().any(|k| matches!(k, InstKind::Random)));
    // Seeded once, advanced once.
    let stores = kinds
        .iter()
        .filter(|k| matches!(k, InstKind::RngStore(_)))
        .count();
    assert_eq!(stores, 2);
}

/// `doc` legalized for `caps` (not the VM's own) and run on the VM and the
/// JIT: what `legalize` wrote for another target, checked against the
/// backends' native meaning without a device.
fn sim_legalized_for(
    doc: &Value,
    caps: TargetCaps,
    backend: Backend,
) -> Result<Simulation, weft_runtime::RuntimeError> {
    sim_legalized_init(doc, caps, backend, &[])
}

/// Like `sim_legalized_for`, with fields' words written before `on_start`
/// (JSON has no NaN or infinity).
fn sim_legalized_init(
    doc: &Value,
    caps: TargetCaps,
    backend: Backend,
    init: &[(&str, Vec<u32>)],
) -> Result<Simulation, weft_runtime::RuntimeError> {
    let opts = SimOptions {
        backend,
        threads: Some(1),
        passes: weft_ir::passes::PassOptions {
            target: caps,
            validate: true,
            ..weft_runtime::backend::tune_passes(backend, &Default::default())
        },
        ..Default::default()
    };
    let mut s = Simulation::with_engine(build(doc).unwrap(), &opts, |p| {
        weft_runtime::backend::open(backend, p, &opts)
    })?;
    for (name, w) in init {
        let f = s.field(name).expect("field");
        s.write_field(f, w)?;
    }
    s.start()?;
    Ok(s)
}

/// The bits of a float field's elements (f64: two words, low first).
fn f64_bits(s: &Simulation, name: &str) -> Vec<u64> {
    words(s, name)
        .chunks(2)
        .map(|w| w[0] as u64 | (w[1] as u64) << 32)
        .collect()
}

/// A small deterministic generator (xorshift64*), so the cases are the same every run.
fn cases(n: usize, seed: u64) -> Vec<u64> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            x.wrapping_mul(0x2545_f491_4f6c_dd1d)
        })
        .collect()
}

/// f64 operands for fma: mixed magnitudes, with the cancellations where a
/// twice-rounded `a*b + c` differs from the fused one (c close to -a*b),
/// signed zeros, infinities and NaN.
fn fma_operands_f64(n: usize) -> Vec<[f64; 3]> {
    let r = cases(3 * n, 0x9e37_79b9_7f4a_7c15);
    let val = |w: u64| {
        let m = f64::from_bits(0x3ff0_0000_0000_0000 | (w >> 12)); // [1, 2)
        let e = ((w & 0xff) as i32 % 80) - 40;
        let s = if w & 0x100 != 0 { -1.0 } else { 1.0 };
        s * m * 2f64.powi(e)
    };
    let mut v: Vec<[f64; 3]> = (0..n)
        .map(|i| {
            let (a, b) = (val(r[3 * i]), val(r[3 * i + 1]));
            let c = match i % 3 {
                // c cancels most of the product: the low half decides.
                0 => -(a * b) * (1.0 + f64::EPSILON * (r[3 * i + 2] % 7) as f64),
                1 => -(a * b),
                _ => val(r[3 * i + 2]),
            };
            [a, b, c]
        })
        .collect();
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    v.extend([
        [0.0, -1.0, 0.0],
        [-0.0, 1.0, -0.0],
        [1.5, 2.0, -3.0],
        [inf, 2.0, 1.0],
        [1e300, 1e10, -inf],
        [2.0, 3.0, nan],
        [0.0, inf, 1.0],
        [1e-200, 1e-200, 1.0],
        [1.0 + f64::EPSILON, 1.0 - f64::EPSILON, -1.0],
    ]);
    v
}

fn fma_graph_f64(ops: &[[f64; 3]]) -> Value {
    let n = ops.len() as u32;
    kernel_graph(
        &[
            F("a", "f64", &[n], json!(0)),
            F("b", "f64", &[n], json!(0)),
            F("c", "f64", &[n], json!(0)),
            F("o", "f64", &[n], json!(0)),
        ],
        "fn kernel(i: i32) { o[i] = fma(a[i], b[i], c[i]); }",
        &[n],
        json!({}),
    )
}

/// The words of f64 values (low word first).
fn f64_words(vals: impl Iterator<Item = f64>) -> Vec<u32> {
    vals.flat_map(|v| [v.to_bits() as u32, (v.to_bits() >> 32) as u32])
        .collect()
}

/// The same bits as a fused operation (Rust's `mul_add`, IEEE 754's
/// fusedMultiplyAdd), NaNs compared as NaN.
fn same_f64(got: u64, want: f64) -> bool {
    let g = f64::from_bits(got);
    (g.is_nan() && want.is_nan()) || got == want.to_bits()
}

#[test]
fn fma_is_fused_where_the_target_may_round_twice() {
    let ops = fma_operands_f64(600);
    let g = fma_graph_f64(&ops);
    let loose = weft_codegen::wgpu::caps(false);
    assert!(loose.loose_float_builtins);
    for b in [Backend::Vm, Backend::Jit] {
        let init: Vec<(&str, Vec<u32>)> = ["a", "b", "c"]
            .iter()
            .enumerate()
            .map(|(k, name)| (*name, f64_words(ops.iter().map(|o| o[k]))))
            .collect();
        let s = sim_legalized_init(&g, loose, b, &init).unwrap();
        let got = f64_bits(&s, "o");
        let mut bad = vec![];
        let mut twice = 0;
        for (o, &g) in ops.iter().zip(&got) {
            let want = o[0].mul_add(o[1], o[2]);
            if (o[0] * o[1] + o[2]).to_bits() != want.to_bits() {
                twice += 1;
            }
            if !same_f64(g, want) {
                bad.push(format!(
                    "fma{:?} = {:e}, not {:e}",
                    o,
                    f64::from_bits(g),
                    want
                ));
            }
        }
        // The cases would catch a twice-rounded fma: many of them differ.
        assert!(
            twice > 100,
            "only {} cases tell fused from twice rounded",
            twice
        );
        assert!(bad.is_empty(), "{}: {}", b, bad.join("\n"));
    }
}

#[test]
fn fma_f32_is_fused_where_the_target_may_round_twice() {
    let r = cases(3000, 7);
    let val = |w: u64| {
        let m = f32::from_bits(0x3f80_0000 | (w >> 41) as u32); // [1, 2)
        let e = ((w & 0xff) as i32 % 40) - 20;
        let s = if w & 0x100 != 0 { -1.0 } else { 1.0 };
        s * m * 2f32.powi(e)
    };
    let ops: Vec<[f32; 3]> = (0..1000)
        .map(|i| {
            let (a, b) = (val(r[3 * i]), val(r[3 * i + 1]));
            let c = if i % 2 == 0 {
                -(a * b)
            } else {
                val(r[3 * i + 2])
            };
            [a, b, c]
        })
        .collect();
    let col = |k: usize| ops.iter().map(|o| o[k].to_bits()).collect::<Vec<u32>>();
    let g = kernel_graph(
        &[
            F("a", "f32", &[1000], json!(0)),
            F("b", "f32", &[1000], json!(0)),
            F("c", "f32", &[1000], json!(0)),
            F("o", "f32", &[1000], json!(0)),
            F("l", "f32", &[1000], json!(0)),
        ],
        "fn kernel(i: i32) { o[i] = fma(a[i], b[i], c[i]); l[i] = lerp(a[i], b[i], c[i]); }",
        &[1000],
        json!({}),
    );
    let init = [("a", col(0)), ("b", col(1)), ("c", col(2))];
    let s = sim_legalized_init(&g, weft_codegen::wgpu::caps(false), Backend::Vm, &init).unwrap();
    let (o, l) = (f32s(&s, "o"), f32s(&s, "l"));
    let mut twice = 0;
    for (i, op) in ops.iter().enumerate() {
        let want = op[0].mul_add(op[1], op[2]);
        twice += ((op[0] * op[1] + op[2]).to_bits() != want.to_bits()) as usize;
        assert_eq!(o[i].to_bits(), want.to_bits(), "fma{:?}", op);
        let lerp = op[0] + (op[1] - op[0]) * op[2];
        assert_eq!(l[i].to_bits(), lerp.to_bits(), "lerp{:?}", op);
    }
    assert!(
        twice > 100,
        "only {} cases tell fused from twice rounded",
        twice
    );
}

#[test]
fn min_max_with_nan_are_written_out_for_a_loose_target() {
    // a NaN operand gives the other one, a tie (±0) gives the first.
    let g = kernel_graph(
        &[F("o", "f32", &[10], json!(0))],
        "fn kernel(i: i32) {
            let nan = bitcast::<f32>(2143289344u32);
            o[0] = min(nan, 2.0); o[1] = min(2.0, nan); o[2] = max(nan, -3.0); o[3] = max(-3.0, nan);
            o[4] = min(0.0, -0.0); o[5] = min(-0.0, 0.0); o[6] = max(0.0, -0.0);
            o[7] = clamp(nan, 1.0, 2.0); o[8] = saturate(nan); o[9] = clamp(5.0, 1.0, nan);
        }",
        &[1],
        json!({}),
    );
    let loose = weft_codegen::wgpu::caps(false);
    let p = {
        let mut p = build(&g).unwrap();
        let opts = weft_ir::passes::PassOptions {
            target: loose,
            validate: true,
            ..Default::default()
        };
        weft_ir::passes::run_pipeline(&mut p, &opts, None).unwrap();
        p
    };
    // No float min/max/clamp/saturate reaches the shader emitter.
    let k = p.kernel_by_name("k").unwrap();
    let f = &p.kernels[k].entry;
    let mut stack = vec![f.body.clone()];
    while let Some(block) = stack.pop() {
        for h in block {
            if let InstKind::Builtin(b, _) = &f.insts[h].kind {
                use weft_ir::ir::Builtin::*;
                assert!(
                    !matches!(b, Min | Max | Clamp | Saturate | Fma | Lerp),
                    "{:?} left for the driver",
                    b
                );
            }
            stack.extend(f.insts[h].kind.blocks().into_iter().cloned());
        }
    }
    let want = [2.0f32, 2.0, -3.0, -3.0, 0.0, -0.0, 0.0, 1.0, f32::NAN, 5.0];
    for b in [Backend::Vm, Backend::Jit] {
        for caps in [loose, b.spec().caps()] {
            let s = sim_legalized_for(&g, caps, b).unwrap();
            let o = f32s(&s, "o");
            for (i, (g, w)) in o.iter().zip(want).enumerate() {
                assert!(
                    g.to_bits() == w.to_bits() || g.is_nan() && w.is_nan(),
                    "{} {:?}: o[{}] = {:?}, want {:?}",
                    b,
                    caps.loose_float_builtins,
                    i,
                    g,
                    w
                );
            }
        }
    }
}

/// A target that silently leaves a loop after `limit` trips gets a
/// counter that faults first, naming the kernel's node and line; below the
/// limit nothing changes.
#[test]
fn loops_fault_before_a_target_trip_limit_cuts_them_short() {
    let caps = TargetCaps {
        loop_trip_limit: Some(1000),
        ..Backend::Vm.spec().caps()
    };
    let code = |n: u32| {
        format!(
            "fn kernel(i: i32) {{\n    let mut s = 0u32;\n    for k in 0u32..{}u32 {{\n        s += k;\n    }}\n    o[i] = s;\n}}",
            n
        )
    };
    let g = |n: u32| kernel_graph(&[F("o", "u32", &[2], json!(0))], &code(n), &[2], json!({}));
    // 998 iterations are 999 trips (the last finds the range done): fine.
    for b in [Backend::Vm, Backend::Jit] {
        let s = sim_legalized_for(&g(998), caps, b).unwrap();
        assert_eq!(words(&s, "o"), vec![998 * 997 / 2; 2], "{}", b);
        let e = sim_legalized_for(&g(999), caps, b)
            .err()
            .map(|e| e.to_string());
        let e = e.unwrap_or_else(|| panic!("{}: 999 iterations did not fault", b));
        assert!(
            e.contains("node 'k', code 3:") && e.contains("1000 trips"),
            "{}: {}",
            b,
            e
        );
    }
    // Nested loops count together: 40 × (40 + 1) + 40 + 1 trips > 1000.
    let nested = kernel_graph(
        &[F("o", "u32", &[1], json!(0))],
        "fn kernel(i: i32) {\n    let mut s = 0u32;\n    for a in 0..40 {\n        for b in 0..40 {\n            s += 1u32;\n        }\n    }\n    o[i] = s;\n}",
        &[1],
        json!({}),
    );
    let e = sim_legalized_for(&nested, caps, Backend::Vm).err();
    assert!(e.is_some_and(|e| e.to_string().contains("trips")));
    // Without the limit, the same loops run to the end.
    let s = sim_legalized_for(
        &nested,
        TargetCaps {
            loop_trip_limit: None,
            ..caps
        },
        Backend::Vm,
    )
    .unwrap();
    assert_eq!(words(&s, "o"), vec![1600]);
}

/// The trips a limited target counts for code an invocation skips (llvmpipe
/// runs an `if` arm nobody takes, and each loop in it makes one trip) and
/// for a helper's loops (one count for the invocation, not one per call),
/// on the VM and the JIT with a limit of 1000: over it they fault, under it
/// they give the unlimited result. Before, each kernel counted under 1000
/// (601 and 401 trips; the helper's count started again at every call).
#[test]
fn skipped_code_and_helpers_count_towards_a_trip_limit() {
    let caps = TargetCaps {
        loop_trip_limit: Some(1000),
        lane_max: true,
        ..Backend::Vm.spec().caps()
    };
    let skipped = |n: u32| {
        format!(
            "fn kernel(i: i32) {{
    let mut s = 0u32;
    for k in 0u32..{}u32 {{
        if (i as u32) > 1000u32 {{
            for j in 0u32..(k % 3u32 + 2u32) {{ s += j; }}
        }}
        s += k;
    }}
    o[i] = s;
}}",
            n
        )
    };
    let helper = |n: u32| {
        format!(
            "fn h(n: u32, x: u32) -> u32 {{
    if n == 7u32 {{ return 0u32; }}
    let mut s = 0u32;
    for k in 0u32..n {{ s += k ^ x; }}
    s
}}
fn kernel(i: i32) {{
    let mut s = 0u32;
    for r in 0u32..3u32 {{ s += h({}u32, r); }}
    o[i] = s;
}}",
            n
        )
    };
    let unlimited = TargetCaps {
        loop_trip_limit: None,
        ..caps
    };
    for (what, code, over, under) in [
        (
            "an if nobody takes",
            &skipped as &dyn Fn(u32) -> String,
            600,
            400,
        ),
        ("a helper called three times", &helper, 400, 250),
    ] {
        for b in [Backend::Vm, Backend::Jit] {
            let g =
                |n: u32| kernel_graph(&[F("o", "u32", &[2], json!(0))], &code(n), &[2], json!({}));
            let want = words(&sim_legalized_for(&g(under), unlimited, b).unwrap(), "o");
            let got = sim_legalized_for(&g(under), caps, b).unwrap();
            assert_eq!(words(&got, "o"), want, "{} on {}", what, b);
            let e = sim_legalized_for(&g(over), caps, b)
                .err()
                .map(|e| e.to_string());
            let e = e.unwrap_or_else(|| panic!("{} on {}: {} trips did not fault", what, b, over));
            assert!(e.contains("1000 trips"), "{} on {}: {}", what, b, e);
        }
    }
}

/// The VM's IR of a `#[block(N)]` kernel keeps values across a barrier in
/// shared arrays, bools too (`block_loops`); the wgpu emitter bitcast a
/// bool to a word, which naga refuses ("Unable to cast"), so `weft check`
/// refused a kernel that `weft run --backend wgpu` ran. A bool is stored
/// as 0 or 1 now; both IRs validate, and the kernel computes the same on
/// every backend.
#[test]
fn bools_kept_across_a_barrier_compile_for_wgpu() {
    let code = "#[block(64)]\nfn kernel(i: i32) {\n    let s = shared([0u32; 64]);\n    let t = thread_index();\n    let a = if t < 32 { xu[i + 1] + (i as u32) } else { 0u32 };\n    barrier();\n    if t < 32 { s[t] = a; }\n    barrier();\n    out[i] = s[t % 32];\n}";
    let g = kernel_graph(
        &[
            F("xu", "u32", &[129], json!(3)),
            F("out", "u32", &[129], json!(0)),
        ],
        code,
        &[128],
        json!({}),
    );
    for b in [Backend::Vm, Backend::Wgpu] {
        let mut p = build(&g).unwrap();
        let opts = weft_runtime::backend::tune_passes(b, &Default::default());
        weft_ir::passes::run_pipeline(&mut p, &opts, None).unwrap();
        for (_, k) in p.kernels.iter() {
            let o = weft_codegen::wgpu::WgpuOptions::default();
            weft_codegen::wgpu::check_kernel(&p, k, &o)
                .unwrap_or_else(|e| panic!("{}'s IR on wgpu: {}", b, e));
        }
    }
    // out[i] = what thread i % 32 of i's block loaded: xu + its index.
    let want: Vec<u32> = (0..128u32)
        .map(|i| 3 + i - i % 64 + i % 32)
        .chain([0])
        .collect();
    for b in backends() {
        let s = sim_on(&g, b);
        assert_eq!(words(&s, "out"), want, "{}", b);
    }
}

/// A block kernel with barriers, legalized for a target with workgroups
/// (wgpu, CUDA): every check of its entry resumes (`FaultSite::resume`),
/// so no fault returns before a barrier; for the VM (no workgroups: the
/// block runs as one invocation) the same checks stop as everywhere else.
/// The printed IR says so and parses back to the same text.
#[test]
fn block_kernel_checks_resume_only_on_targets_with_workgroups() {
    let g = kernel_graph(
        &[F("o", "f32", &[256], json!(0))],
        "#[block(64)]\nfn kernel(i: i32) {\n    let s = shared([0.0; 128]);\n    s[i * 3] = 1.0;\n    barrier();\n    o[i * 2] = s[(i + 1) % 64];\n}",
        &[256],
        json!({}),
    );
    for (backend, resume) in [
        (Backend::Wgpu, true),
        (Backend::Cuda, true),
        (Backend::Vm, false),
    ] {
        let mut p = build(&g).unwrap();
        let opts = weft_runtime::backend::tune_passes(backend, &Default::default());
        weft_ir::passes::run_pipeline(&mut p, &opts, None).unwrap();
        let (_, k) = p.kernels.iter().find(|(_, k)| k.name == "k").unwrap();
        assert!(
            k.fault_sites
                .iter()
                .any(|s| matches!(s.kind, FaultKind::LocalIndex { len: 128 })),
            "{:?}",
            k.fault_sites
        );
        assert!(
            k.fault_sites.iter().all(|s| s.resume == resume),
            "{}: {:?}",
            backend,
            k.fault_sites
        );
        let text = weft_ir::ir::print_program(&p, None);
        assert_eq!(text.contains(", resumes"), resume, "{}", text);
        let back = weft_ir::ir::parse_program(&text).unwrap();
        assert_eq!(weft_ir::ir::print_program(&back, None), text);
    }
}

/// A loop whose work nothing uses is deleted before trips are counted (as
/// Mesa's compiler deletes it, so it never runs on lavapipe); a loop whose
/// result is stored counts.
#[test]
fn loops_nothing_uses_are_not_counted() {
    let caps = TargetCaps {
        loop_trip_limit: Some(1000),
        ..Backend::Vm.spec().caps()
    };
    let g = kernel_graph(
        &[F("o", "u32", &[4], json!(0))],
        "fn kernel(i: i32) {\n    let mut dead = 0u32;\n    for k in 0..5000 {\n        dead += o[k % 4];\n    }\n    let mut s = 0u32;\n    for k in 0u32..10u32 {\n        s += k;\n    }\n    o[i] = s;\n}",
        &[4],
        json!({}),
    );
    let s = sim_legalized_for(&g, caps, Backend::Vm).unwrap();
    assert_eq!(words(&s, "o"), vec![45; 4]);
    let used = g.to_string().replace("o[i] = s;", "o[i] = s + dead;");
    let used: Value = serde_json::from_str(&used).unwrap();
    assert!(sim_legalized_for(&used, caps, Backend::Vm).is_err());
}

/// WGSL has only a weak compare-exchange, which may fail spuriously: the
/// word is left alone although it held the comparand, and `old_value`
/// equals the comparand. Every one the wgpu backend emits (bit-packed
/// stores, float atomics' loops, the launch's first fault) must look at
/// `exchanged` and retry, or a spurious failure is taken for success and a
/// write is lost without a word.
#[test]
fn wgpu_compare_exchange_never_takes_a_spurious_failure_for_success() {
    let mut cas = 0;
    for name in ["life_bits", "mpm88"] {
        let mut p = build(&example(name)).unwrap_or_else(|e| panic!("{}: {}", name, e));
        let passes = weft_runtime::backend::tune_passes(Backend::Wgpu, &Default::default());
        weft_ir::passes::run_pipeline(&mut p, &passes, None).unwrap();
        let opts = weft_codegen::wgpu::WgpuOptions {
            native_float_atomics: false,
            ..Default::default()
        };
        for (_, k) in p.kernels.iter() {
            let gk = weft_codegen::wgpu::compile_kernel(&p, k, &opts).unwrap();
            let text = weft_codegen::wgpu::to_wgsl(&gk).unwrap();
            let calls = text.matches("atomicCompareExchangeWeak(").count();
            let checked = text.matches(".exchanged").count();
            assert!(
                checked >= calls,
                "{} / {}: {} compare-exchanges, {} look at `exchanged`:\n{}",
                name,
                k.label(),
                calls,
                checked,
                text
            );
            cas += calls;
        }
    }
    // Bit-packed stores (life_bits) and f32 scatter-adds without native
    // float atomics (mpm88) are compare-exchange loops.
    assert!(cas >= 3, "only {} compare-exchanges emitted", cas);
}
