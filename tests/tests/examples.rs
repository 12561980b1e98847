//! The example graphs against independent references: Julia pixels computed
//! here, heat on a tiny grid against hand arithmetic, Life against a plain
//! Rust implementation, physical invariants of mpm88 and mpm3d, and mpm3d's
//! checksums against the peers' (Taichi, Warp).

use serde_json::json;
use weft_tests::*;

#[test]
fn julia_pixels_match_an_independent_computation() {
    let mut sim = run(&example("julia"), 2).unwrap();
    let px = f32s(&sim, "pixels");
    let (w, h, n) = (640usize, 320usize, 320.0f32);
    let t = 2.0f32 * 0.03;
    let c = (-0.8f32, t.cos() * 0.2);
    let mut mismatches = 0;
    for i in 0..w {
        for j in 0..h {
            let (mut zx, mut zy) = ((i as f32 / n - 1.0) * 2.0, (j as f32 / n - 0.5) * 2.0);
            let mut it = 0;
            while (zx * zx + zy * zy).sqrt() < 20.0 && it < 50 {
                let nx = zx * zx - zy * zy + c.0;
                let ny = zy * zx * 2.0 + c.1;
                zx = nx;
                zy = ny;
                it += 1;
            }
            let want = 1.0 - it as f32 * 0.02;
            if px[i * h + j] != want {
                mismatches += 1;
            }
        }
    }
    assert_eq!(mismatches, 0, "pixels differing from the reference");
    let views = sim.render_views().unwrap();
    let img = &views[0].1;
    assert_eq!((img.width, img.height), (640, 320));
    assert!(!img.is_blank());
}

#[test]
fn heat_on_a_tiny_grid_matches_hand_arithmetic() {
    let mut g = example("heat");
    set_param(&mut g, "grid", "shape", json!([5, 5]));
    set_param(
        &mut g,
        "diffuse",
        "scalars",
        json!({"alpha": 0.2, "boundary": 0.0, "n": 5}),
    );
    set_param(
        &mut g,
        "init_sources",
        "code",
        json!("fn kernel(i: i32, j: i32) { source[(i, j)] = select(i == 2 && j == 2, 1.0, 0.0); }"),
    );
    set_param(&mut g, "substeps", "count", json!(3));
    let sim = run(&g, 1).unwrap();
    let t = f32s(&sim, "T");
    let at = |i: usize, j: usize| t[i * 5 + j];
    // Substep 1: the source cell becomes 1. Substep 2: its 4 neighbours get
    // 0.2 * 1 = 0.2. Substep 3: an edge-adjacent neighbour (1,2) has
    // lap = 1 + 0 + 0 + 0 - 4 * 0.2 = 0.2, so 0.2 + 0.2 * 0.2 = 0.24; a
    // diagonal (1,1) has lap = 0.2 + 0.2 = 0.4, so 0.08; the source stays 1.
    assert_eq!(at(2, 2), 1.0);
    for (i, j) in [(1, 2), (3, 2), (2, 1), (2, 3)] {
        assert!(
            close(at(i, j), 0.24, 1e-6, 0.0),
            "({},{}) = {}",
            i,
            j,
            at(i, j)
        );
    }
    for (i, j) in [(1, 1), (1, 3), (3, 1), (3, 3)] {
        assert!(
            close(at(i, j), 0.08, 1e-6, 0.0),
            "({},{}) = {}",
            i,
            j,
            at(i, j)
        );
    }
    for k in 0..5 {
        for (i, j) in [(0, k), (4, k), (k, 0), (k, 4)] {
            assert_eq!(at(i, j), 0.0, "boundary ({},{}) is fixed", i, j);
        }
    }
}

fn life_step(a: &[i32], n: usize) -> Vec<i32> {
    let mut out = vec![0; n * n];
    for i in 0..n {
        for j in 0..n {
            let mut c = 0;
            for di in -1i32..=1 {
                for dj in -1i32..=1 {
                    let (x, y) = (i as i32 + di, j as i32 + dj);
                    if (di, dj) != (0, 0) && x >= 0 && y >= 0 && x < n as i32 && y < n as i32 {
                        c += a[x as usize * n + y as usize];
                    }
                }
            }
            let me = a[i * n + j];
            out[i * n + j] = (c == 3 || (me == 1 && c == 2)) as i32;
        }
    }
    out
}

#[test]
fn life_matches_a_plain_implementation() {
    let p = build(&example("life")).unwrap();
    let mut sim = weft_runtime::Simulation::new(p, &Default::default()).unwrap();
    sim.start().unwrap();
    let mut reference = i32s(&sim, "alive");
    let density = reference.iter().filter(|&&x| x == 1).count() as f32 / reference.len() as f32;
    assert!(
        (density - 0.2).abs() < 0.01,
        "random start density {}",
        density
    );
    for _ in 0..4 {
        sim.step_frame().unwrap();
        reference = life_step(&reference, 512);
    }
    assert_eq!(i32s(&sim, "alive"), reference);
}

#[test]
fn mpm88_first_substep_conserves_mass_and_applies_gravity() {
    let mut g = example("mpm88");
    set_param(&mut g, "substeps", "count", json!(1));
    let sim = run(&g, 1).unwrap();
    let n = 8192.0f64;
    let p_mass = (1.0f64 / 128.0 * 0.5).powi(2);
    let grid_m: f64 = f32s(&sim, "grid_m").iter().map(|&x| x as f64).sum();
    assert!(
        (grid_m - n * p_mass).abs() < 1e-4 * n * p_mass,
        "grid mass {} vs particle mass {}",
        grid_m,
        n * p_mass
    );
    // Momentum change over the first substep is the gravity impulse: every
    // particle's velocity goes from (0, -1) to (0, -1 - dt g).
    let v = f32s(&sim, "v");
    let (sx, sy) = v.chunks(2).fold((0.0f64, 0.0f64), |(a, b), c| {
        (a + c[0] as f64, b + c[1] as f64)
    });
    let dt_g = 2e-4 * 9.8;
    assert!((sx / n).abs() < 1e-6, "mean vx {}", sx / n);
    assert!(
        ((sy / n) - (-1.0 - dt_g)).abs() < 1e-5,
        "mean vy {} vs {}",
        sy / n,
        -1.0 - dt_g
    );
}

#[test]
fn mpm88_particles_stay_in_the_domain() {
    let mut g = example("mpm88");
    set_param(&mut g, "substeps", "count", json!(25));
    let sim = run(&g, 8).unwrap();
    let x = f32s(&sim, "x");
    assert!(
        x.iter().all(|&c| c.is_finite() && (0.0..=1.0).contains(&c)),
        "a particle left the unit square"
    );
    let mean_y = x.chunks(2).map(|p| p[1] as f64).sum::<f64>() / 8192.0;
    assert!(
        mean_y < 0.37,
        "particles fell from mean y 0.4 under gravity (mean y {})",
        mean_y
    );
    let j = f32s(&sim, "J");
    assert!(j.iter().all(|&v| v.is_finite() && v > 0.0));
}

#[test]
fn every_example_draws_a_non_blank_frame() {
    for name in ["julia", "heat", "life", "mpm88", "mpm3d"] {
        let mut g = example(name);
        if name.starts_with("mpm") {
            set_param(&mut g, "substeps", "count", json!(2));
        }
        let mut sim = run(&g, 1).unwrap();
        let views = sim.render_views().unwrap();
        assert!(!views.is_empty(), "{} has a view", name);
        for (id, img) in views {
            assert!(!img.is_blank(), "{} view {} is blank", name, id);
        }
    }
}

#[test]
fn blocked_and_flat_layouts_give_the_same_field() {
    let code = "fn kernel(i: i32, j: i32) { a[(i, j)] = i * 1000 + j; b[(i, j)] = vec2((i + j) as f32, 0.5); }";
    let flat = kernel_graph(
        &[
            F("a", "i32", &[32, 32], json!(0)),
            F("b", "vec2", &[32, 32], json!(0)),
        ],
        code,
        &[32, 32],
        json!({}),
    );
    // Same fields on a dense [4,4] of dense [8,8] blocks, stored together (AOS).
    let mut blocked = flat.clone();
    let nodes = blocked["nodes"].as_array_mut().unwrap();
    nodes.retain(|n| n["kind"] != "dense");
    nodes.push(json!({"id": "outer", "kind": "dense", "params": {"shape": [4, 4]}}));
    nodes.push(json!({"id": "inner", "kind": "dense", "params": {"shape": [8, 8]}}));
    let wires = blocked["wires"].as_array_mut().unwrap();
    wires.retain(|w| !w["from"].as_str().unwrap().ends_with(".cells"));
    wires.push(json!({"from": "outer.cells", "to": "inner.parent"}));
    wires.push(json!({"from": "inner.cells", "to": "a.layout"}));
    wires.push(json!({"from": "inner.cells", "to": "b.layout"}));
    let s1 = run(&flat, 0).unwrap();
    let s2 = run(&blocked, 0).unwrap();
    assert_eq!(words(&s1, "a"), words(&s2, "a"));
    assert_eq!(words(&s1, "b"), words(&s2, "b"));
    // The storage really is blocked and interleaved: cell (0, 8) of `a` lives in block 1.
    let p = &s2.program;
    let a = p.field_by_name("a").unwrap();
    let addr = weft_runtime::memory::field_address(p, a, &[0, 8]);
    assert_eq!(
        addr,
        8 * 8 * 3,
        "block 1 starts after 64 cells of 3 words (a + b.xy)"
    );
    assert_eq!(
        weft_runtime::memory::field_address(p, p.field_by_name("b").unwrap(), &[0, 0]),
        1
    );
}

/// `mass_spring_ad` replays its recorded expectations (loss and every
/// gradient field) on the VM; `tests/autodiff.rs` checks the same run against
/// the peers' checksums.
#[test]
fn mass_spring_ad_replays_its_expectations() {
    let text = std::fs::read_to_string(root().join("graphs/mass_spring_ad.expect.json"))
        .expect("expectation file");
    let exp: weft_runtime::expect::Expectation =
        serde_json::from_str(&text).expect("expectation JSON");
    let sim = weft_runtime::Simulation::new(
        build(&example("mass_spring_ad")).unwrap(),
        &weft_runtime::SimOptions {
            threads: Some(1),
            ..Default::default()
        },
    )
    .unwrap();
    let mut sim = sim;
    sim.start().unwrap();
    for _ in 0..exp.frames {
        sim.step_frame().unwrap();
    }
    let stats = weft_runtime::expect::all_stats(&sim).unwrap();
    let diffs = weft_runtime::expect::compare(
        &exp.backends["cpu"].fields,
        &stats,
        &exp.tolerance,
        &exp.field_tolerance,
    );
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
    assert!(exp.backends["cpu"].fields.contains_key("v0.grad"));
}

#[test]
fn mpm3d_first_substep_conserves_mass_and_applies_gravity() {
    let mut g = example("mpm3d");
    set_param(&mut g, "substeps", "count", json!(1));
    let sim = run(&g, 1).unwrap();
    let n = 8192.0f64;
    // p_mass = p_vol = (dx / 2)^2 with dx = 1/32, as Taichi's mpm3d.py has it.
    let p_mass = (1.0f64 / 32.0 * 0.5).powi(2);
    let grid_m: f64 = f32s(&sim, "grid_m").iter().map(|&x| x as f64).sum();
    assert!(
        (grid_m - n * p_mass).abs() < 1e-5 * n * p_mass,
        "grid mass {} vs particle mass {}",
        grid_m,
        n * p_mass
    );
    // From rest, the first substep's velocity is the gravity impulse: (0, -dt g, 0).
    let v = f32s(&sim, "v");
    let mut s = [0.0f64; 3];
    for c in v.chunks(3) {
        for d in 0..3 {
            s[d] += c[d] as f64;
        }
    }
    let dt_g = 4e-4 * 9.8;
    assert!((s[0] / n).abs() < 1e-7, "mean vx {}", s[0] / n);
    assert!((s[2] / n).abs() < 1e-7, "mean vz {}", s[2] / n);
    assert!(
        ((s[1] / n) + dt_g).abs() < 1e-6,
        "mean vy {} vs {}",
        s[1] / n,
        -dt_g
    );
}

/// The checksums the peer scripts print (../shared/peers/taichi_mpm3d.py,
/// warp_mpm3d.py): x_sum, x_sqsum, v_sum, J_sum, each the float64 sum of
/// the float32 fields.
struct Checksums {
    x_sum: f64,
    x_sqsum: f64,
    v_sum: f64,
    j_sum: f64,
}

/// `example` run 20 frames on the compiled CPU backend with one thread (so
/// the grid's float atomics add in particle order, as the peers' serial
/// runs do), and its checksums.
fn mpm3d_checksums(name: &str) -> Checksums {
    let mut sim = weft_runtime::Simulation::new(
        build(&example(name)).unwrap(),
        &weft_runtime::SimOptions {
            backend: weft_runtime::Backend::Jit,
            threads: Some(1),
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{}", e));
    sim.start().unwrap_or_else(|e| panic!("{}", e));
    for _ in 0..20 {
        sim.step_frame().unwrap_or_else(|e| panic!("{}", e));
    }
    let sum =
        |f: &str, g: fn(f64) -> f64| -> f64 { f32s(&sim, f).iter().map(|&x| g(x as f64)).sum() };
    Checksums {
        x_sum: sum("x", |x| x),
        x_sqsum: sum("x", |x| x * x),
        v_sum: sum("v", |x| x),
        j_sum: sum("J", |x| x),
    }
}

/// Asserts `c` against a peer run that computes in Weft's order (Warp, or
/// Taichi with fast_math off): x_sum and J_sum exactly (every float32 x in
/// [0.1, 1) and J near 1 add up exactly in float64, in any order, so equal
/// sums mean equal fields up to a cancelling pair), x_sqsum and v_sum to
/// 1e-12 (only the float64 summation order differs: NumPy's is pairwise).
/// And against Taichi's default (fast_math on) run within the peers'
/// README tolerances: rel 1e-5 for x and J, 1e-4 for v.
fn assert_matches_peers(c: &Checksums, same_order: &Checksums, taichi_fast_math: &Checksums) {
    let rel = |a: f64, b: f64| (a - b).abs() / b.abs();
    assert_eq!(c.x_sum, same_order.x_sum, "x_sum");
    assert_eq!(c.j_sum, same_order.j_sum, "J_sum");
    assert!(
        rel(c.x_sqsum, same_order.x_sqsum) < 1e-12,
        "x_sqsum {}",
        c.x_sqsum
    );
    assert!(rel(c.v_sum, same_order.v_sum) < 1e-12, "v_sum {}", c.v_sum);
    let t = taichi_fast_math;
    assert!(
        rel(c.x_sum, t.x_sum) < 1e-5,
        "x_sum {} vs {}",
        c.x_sum,
        t.x_sum
    );
    assert!(rel(c.x_sqsum, t.x_sqsum) < 1e-5, "x_sqsum {}", c.x_sqsum);
    assert!(rel(c.j_sum, t.j_sum) < 1e-5, "J_sum {}", c.j_sum);
    assert!(rel(c.v_sum, t.v_sum) < 1e-4, "v_sum {}", c.v_sum);
}

/// `graphs/mpm3d.json` from the peers' start (`taichi_mpm3d.py --dump-init`,
/// seed 42) after 20 frames (500 substeps), single-threaded, against the
/// peers' checksums. Recorded 2026-11-26 on a 2-vCPU x86-64 machine:
/// - Warp 1.19.0, `warp_mpm3d.py` (device cpu, serial), and Taichi 1.7.4,
///   `taichi_mpm3d.py --arch cpu --threads 1` with `ti.init(fast_math=False)`
///   (the script run with `ti.init` patched): identical checksums, and
///   Taichi's x, v and J equal Weft's bit for bit
///   (`tools/compare_taichi_mpm3d.py`).
/// - Taichi 1.7.4, `taichi_mpm3d.py --arch cpu --threads 1` as shipped
///   (fast_math on): 1e-8 relative from the others.
#[test]
fn mpm3d_matches_the_peers_after_20_frames() {
    let c = mpm3d_checksums("mpm3d");
    let warp = Checksums {
        x_sum: 7331.0636116713285,
        x_sqsum: 2718.896019851538,
        v_sum: -7057.601210425271,
        j_sum: 8158.087028622627,
    };
    let taichi = Checksums {
        x_sum: 7331.063521772623,
        x_sqsum: 2718.8960087541573,
        v_sum: -7057.600091053355,
        j_sum: 8158.087051987648,
    };
    assert_matches_peers(&c, &warp, &taichi);
}

/// `graphs/mpm3d_x8.json` (65536 particles, 64³, dt 4e-4) from
/// `taichi_mpm3d.py --particles 65536 --grid 64 --dump-init` after 20
/// frames, against the peers run with `--particles 65536 --grid 64 --dt
/// 4e-4` (their default ×8 dt of 2e-4 is still in free fall after 20
/// frames). Recorded 2026-11-26: Warp 1.19.0 `warp_mpm3d.py` (cpu, serial)
/// and Taichi 1.7.4 `taichi_mpm3d.py --arch cpu --threads 1` (fast_math on;
/// with it off, its x, v and J equal Weft's bit for bit:
/// `tools/compare_taichi_mpm3d.py --x8`).
#[test]
fn mpm3d_x8_matches_the_peers_after_20_frames() {
    let c = mpm3d_checksums("mpm3d_x8");
    let warp = Checksums {
        x_sum: 57334.36174168438,
        x_sqsum: 20990.577640936663,
        v_sum: -79750.4882300419,
        j_sum: 65323.69515103102,
    };
    let taichi = Checksums {
        x_sum: 57334.3612446934,
        x_sqsum: 20990.577575131392,
        v_sum: -79750.48404821714,
        j_sum: 65323.695119977,
    };
    assert_matches_peers(&c, &warp, &taichi);
}

/// `graphs/smoke3d.json` on a 20³ grid for 8 frames against the NumPy
/// reference `tools/smoke3d_reference.py` (the same scheme written as
/// vectorised float32 NumPy, not from the graph's kernels): vm and cpu
/// equal it bit for bit (same f32 operations in the same order); wgpu
/// within 1e-5 absolute (its division and `floor` may differ in the last
/// bit, as WGSL allows; measured 2e-6 on lavapipe).
#[test]
fn smoke3d_matches_the_numpy_reference() {
    let n = 20;
    let frames = 8;
    let dir = std::env::temp_dir().join(format!("weft_smoke3d_ref_{}", std::process::id()));
    let out = std::process::Command::new("python3")
        .arg(root().join("tools/smoke3d_reference.py"))
        .args(["--n", &n.to_string(), "--frames", &frames.to_string()])
        .arg("--out")
        .arg(&dir)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reference = |f: &str| -> Vec<f32> {
        let a = weft_ir::io::npy::read_npy(&dir.join(format!("{}.npy", f))).unwrap();
        a.words.iter().map(|&w| f32::from_bits(w)).collect()
    };
    let mut g = example("smoke3d");
    set_param(&mut g, "grid", "shape", json!([n, n, n]));
    for node in g["nodes"].as_array_mut().unwrap() {
        if node["kind"] == "kernel" {
            node["params"]["scalars"]["n"]["default"] = json!(n);
        }
    }
    for backend in local_backends() {
        let mut sim = weft_runtime::Simulation::new(
            build(&g).unwrap(),
            &weft_runtime::SimOptions {
                backend,
                ..Default::default()
            },
        )
        .unwrap_or_else(|e| panic!("{}", e));
        sim.start().unwrap_or_else(|e| panic!("{}", e));
        for _ in 0..frames {
            sim.step_frame().unwrap_or_else(|e| panic!("{}", e));
        }
        for f in ["density", "temperature", "vel"] {
            let (ours, theirs) = (f32s(&sim, f), reference(f));
            assert_eq!(ours.len(), theirs.len(), "{}", f);
            let worst = ours
                .iter()
                .zip(&theirs)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f32, f32::max);
            if backend == weft_runtime::Backend::Wgpu {
                assert!(worst <= 1e-5, "{:?} {}: off by {}", backend, f, worst);
            } else {
                assert_eq!(worst, 0.0, "{:?} {}: off by {}", backend, f, worst);
            }
        }
        // The smoke moved: the source pushed it up past its own sphere.
        let d = f32s(&sim, "density");
        let top = (0..d.len())
            .filter(|&i| d[i] > 0.05)
            .map(|i| (i / n) % n)
            .max();
        assert!(
            top.unwrap_or(0) > n / 3,
            "{:?}: smoke top {:?}",
            backend,
            top
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `graphs/dem3d.json`'s contact forces, found through its per-cell lists
/// (a `dynamic` layout, rebuilt every substep), against an all-pairs
/// computation in plain Rust from the same positions and velocities, after
/// 3 frames of the collapse on every backend here. Contacts add in list
/// order (which the appends' order decides), so sums agree to rounding:
/// 1e-4 relative to the largest force.
#[test]
fn dem3d_cell_list_forces_match_all_pairs() {
    let g = example("dem3d");
    let scalar = |node: &str, name: &str| -> f32 {
        let n = g["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["id"] == node)
            .unwrap();
        n["params"]["scalars"][name]["default"].as_f64().unwrap() as f32
    };
    let (radius, mass, gravity) = (
        scalar("contacts", "radius"),
        scalar("contacts", "mass"),
        scalar("contacts", "gravity"),
    );
    let (k, c, ct) = (
        scalar("contacts", "stiffness"),
        scalar("contacts", "damping"),
        scalar("contacts", "tangential"),
    );
    for backend in local_backends() {
        let mut sim = weft_runtime::Simulation::new(
            build(&g).unwrap(),
            &weft_runtime::SimOptions {
                backend,
                ..Default::default()
            },
        )
        .unwrap_or_else(|e| panic!("{}", e));
        sim.start().unwrap();
        for _ in 0..3 {
            sim.step_frame().unwrap_or_else(|e| panic!("{}", e));
        }
        // One more frame that only computes forces: with dt 0 the state
        // stays, so `force` belongs to the positions read below.
        sim.set_param("integrate", "dt", 0.0).unwrap();
        sim.step_frame().unwrap();
        let (x, v, f) = (f32s(&sim, "x"), f32s(&sim, "v"), f32s(&sim, "force"));
        let n = x.len() / 3;
        let p = |a: &[f32], i: usize| [a[3 * i] as f64, a[3 * i + 1] as f64, a[3 * i + 2] as f64];
        let (r, k, c, ct) = (radius as f64, k as f64, c as f64, ct as f64);
        let wall = |d: f64, vn: f64| if d < r { k * (r - d) - c * vn } else { 0.0 };
        let mut contacts = 0;
        let mut worst = 0.0f64;
        let mut largest = 0.0f64;
        let mut expected = vec![[0.0f64; 3]; n];
        for (i, e) in expected.iter_mut().enumerate() {
            let (qi, ui) = (p(&x, i), p(&v, i));
            let mut fi = [0.0, -(gravity as f64) * mass as f64, 0.0];
            for j in 0..n {
                let d: [f64; 3] = std::array::from_fn(|a| qi[a] - p(&x, j)[a]);
                let dist = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();
                if j == i || dist >= 2.0 * r || dist == 0.0 {
                    continue;
                }
                contacts += 1;
                let nrm = d.map(|e| e / dist);
                let rel: [f64; 3] = std::array::from_fn(|a| ui[a] - p(&v, j)[a]);
                let vn = rel[0] * nrm[0] + rel[1] * nrm[1] + rel[2] * nrm[2];
                let s = k * (2.0 * r - dist) - c * vn;
                for a in 0..3 {
                    fi[a] += s * nrm[a] - ct * (rel[a] - vn * nrm[a]);
                }
            }
            for a in 0..3 {
                fi[a] += wall(qi[a], ui[a]) - wall(1.0 - qi[a], -ui[a]);
            }
            *e = fi;
            largest = largest.max(fi.iter().fold(0.0f64, |m, e| m.max(e.abs())));
        }
        for (i, e) in expected.iter().enumerate() {
            for a in 0..3 {
                worst = worst.max((f[3 * i + a] as f64 - e[a]).abs());
            }
        }
        assert!(contacts > 300, "{:?}: only {} contacts", backend, contacts);
        assert!(
            worst <= 1e-4 * largest,
            "{:?}: force off by {} (largest {})",
            backend,
            worst,
            largest
        );
    }
}

/// A list field's checksum ignores the order of each list's elements (the
/// order threads appended them in, which a GPU does not fix) but not which
/// list holds which element: `weft replay` holds cuda and wgpu to it.
#[test]
fn list_checksums_ignore_append_order_within_a_list_only() {
    let mut sim = run(&example("particle_lists"), 2).unwrap();
    let h = sim.field("members").unwrap();
    let words = sim.read_field(h).unwrap();
    let stats = |sim: &weft_runtime::Simulation| {
        weft_runtime::expect::all_stats(sim).unwrap()["members"].clone()
    };
    let before = stats(&sim);
    assert!(before.checksum.is_some());
    // The lists are 32 slots a cell; the appended entries come first.
    let list = 32;
    let full = words
        .chunks(list)
        .position(|l| l.iter().filter(|&&w| w as i32 >= 0).count() >= 3)
        .expect("a list with three members");
    let mut swapped = words.clone();
    swapped[full * list..full * list + 3].reverse();
    assert_ne!(swapped, words);
    sim.write_field(h, &swapped).unwrap();
    assert_eq!(stats(&sim).checksum, before.checksum);
    // Moving an element to another list changes it.
    let other = (full + 1) % (words.len() / list);
    let mut moved = words.clone();
    moved.swap(full * list, other * list + list - 1);
    sim.write_field(h, &moved).unwrap();
    assert_ne!(stats(&sim).checksum, before.checksum);
}
