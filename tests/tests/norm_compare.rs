//! `norm_compare`: `length(v) < c` is compiled as `dot(v, v) < T(c)`, and
//! the answer is the same as taking the square root for every v, right at
//! the boundary too (x = 20 ± k ulp with c = 20 puts x * x on both sides
//! of the threshold and of the values whose root rounds to 20).

use serde_json::json;
use weft_ir::ir::{Builtin, InstKind};
use weft_runtime::{Backend, SimOptions, Simulation};
use weft_tests::*;

const CODE: &str = "fn kernel(i: i32) {
    let x = 20.0 + (i - 128) as f32 * 0.0000019073486328125;
    let v = vec2(x, 0.0);
    let w = vec2(x, 3.0);
    let mut bits = 0;
    if length(v) < 20.0 { bits += 1; }
    if length(v) <= 20.0 { bits += 2; }
    if 20.0 < length(v) { bits += 4; }
    if length(v) >= 20.0 { bits += 8; }
    if distance(w, vec2(0.0, 3.0)) < 20.0 { bits += 16; }
    if length(w) > 20.223748 { bits += 32; }
    let l = length(v);
    if l < 20.0 { bits += 64; }
    let u = vec2(19.0, 6.244998 + (i - 128) as f32 * 0.000000476837158203125);
    if length(u) < 20.0 { bits += 128; }
    if length(u) <= 20.0 { bits += 256; }
    if length(u) > 20.0 { bits += 512; }
    if length(u) >= 20.0 { bits += 1024; }
    out[i] = bits;
    kept[i] = l;
}
";

fn graph() -> serde_json::Value {
    kernel_graph(
        &[
            F("out", "i32", &[256], json!(0)),
            F("kept", "f32", &[256], json!(0)),
        ],
        CODE,
        &[256],
        json!({}),
    )
}

/// The bits computed on the host with a square root, in the VM's order of
/// operations (`dot` sums the products left to right).
fn reference() -> Vec<i32> {
    (0..256)
        .map(|i| {
            let x = 20.0f32 + (i - 128) as f32 * 2.0f32.powi(-19);
            let lv = (x * x + 0.0 * 0.0).sqrt();
            let lw = (x * x + 3.0 * 3.0).sqrt();
            let mut bits = 0;
            bits += (lv < 20.0) as i32;
            bits += 2 * (lv <= 20.0) as i32;
            bits += 4 * (lv > 20.0) as i32;
            bits += 8 * (lv >= 20.0) as i32;
            bits += 16 * ((x * x + 0.0 * 0.0).sqrt() < 20.0) as i32;
            bits += 32 * (lw > 20.223748) as i32;
            bits += 64 * (lv < 20.0) as i32;
            let b = 6.244998f32 + (i - 128) as f32 * 2.0f32.powi(-21);
            let lu = (19.0f32 * 19.0 + b * b).sqrt();
            bits += 128 * (lu < 20.0) as i32;
            bits += 256 * (lu <= 20.0) as i32;
            bits += 512 * (lu > 20.0) as i32;
            bits += 1024 * (lu >= 20.0) as i32;
            bits
        })
        .collect()
}

#[test]
fn single_use_norms_compared_with_constants_lose_their_square_root() {
    let p = compiled(&graph());
    let k = &p.kernels.iter().next().unwrap().1;
    let count = |b: Builtin| {
        k.entry
            .insts
            .iter()
            .filter(|(h, i)| {
                matches!(&i.kind, InstKind::Builtin(x, _) if *x == b)
                    && reachable(&k.entry).contains(h)
            })
            .count()
    };
    // Only `l`, which is also stored, keeps its length.
    assert_eq!(count(Builtin::Length), 1);
    assert_eq!(count(Builtin::Distance), 0);
    assert!(count(Builtin::Dot) >= 2);
}

fn reachable(f: &weft_ir::ir::Function) -> Vec<weft_ir::ir::InstId> {
    fn walk(
        f: &weft_ir::ir::Function,
        b: &[weft_ir::ir::InstId],
        out: &mut Vec<weft_ir::ir::InstId>,
    ) {
        for &h in b {
            out.push(h);
            for nb in f.insts[h].kind.blocks() {
                walk(f, nb, out);
            }
        }
    }
    let mut out = vec![];
    walk(f, &f.body, &mut out);
    out
}

#[test]
fn the_comparisons_agree_with_square_roots_at_the_boundary() {
    let want = reference();
    // Both sides of the boundary are exercised.
    assert!(want.iter().any(|b| b & 1 == 1) && want.iter().any(|b| b & 1 == 0));
    assert!(
        want.iter().any(|b| b & 2 == 2 && b & 8 == 8),
        "a root that rounds to exactly 20"
    );
    let backends = local_backends();
    let program = build(&graph()).unwrap_or_else(|e| panic!("{}", e));
    for backend in backends {
        let opts = SimOptions {
            backend,
            ..Default::default()
        };
        let mut s = Simulation::new(program.clone(), &opts).unwrap();
        s.start().unwrap();
        let got = i32s(&s, "out");
        // A GPU may fuse `x * x + y * y` into one rounding: the bits of
        // |w| and |u|, whose sums have two non-zero products, are exact
        // only on the CPU backends. The others square a vector with y = 0,
        // exact everywhere.
        let mask = if backend == Backend::Wgpu {
            1 | 2 | 4 | 8 | 16 | 64
        } else {
            !0
        };
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g & mask, w & mask, "{}: x index {}", backend, i);
        }
    }
}
