//! The example graphs against independent references: Julia pixels computed
//! here, heat on a tiny grid against hand arithmetic, Life against a plain
//! Rust implementation, and physical invariants of mpm88.

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
    for name in ["julia", "heat", "life", "mpm88"] {
        let mut g = example(name);
        if name == "mpm88" {
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
