//! Sparse layouts (`pointer`, `bitmasked`): the same computation on a sparse
//! and on a dense layout gives identical values on every cell (inactive
//! cells read as the init value) on the VM, the JIT and wgpu; concurrent
//! activation allocates a block once; struct-for visits each active cell
//! once; garbage collection keeps pool use bounded; pool exhaustion and bad
//! graphs are errors naming the node.

use serde_json::{json, Value};
use weft_ir::ir::layout::{pool_in_use, root_of};
use weft_runtime::{Backend, SimOptions, Simulation};
use weft_tests::*;

/// `x` (f32, init 0.5) on a 64×64 domain: `pointer [8,8] → bitmasked [4,4]
/// → dense [2,2]` when `sparse`, else one dense node. `start` runs once in
/// on_start, `frame` (when given) every frame.
fn graph(sparse: bool, capacity: u32, start: &str, frame: Option<(&str, Value)>) -> Value {
    let mut nodes = vec![];
    let mut wires = vec![];
    if sparse {
        nodes.push(json!({"id": "P", "kind": "pointer", "params": {"shape": [8, 8], "capacity": capacity}}));
        nodes.push(json!({"id": "B", "kind": "bitmasked", "params": {"shape": [4, 4]}}));
        nodes.push(json!({"id": "D", "kind": "dense", "params": {"shape": [2, 2]}}));
        wires.push(json!({"from": "P.cells", "to": "B.parent"}));
        wires.push(json!({"from": "B.cells", "to": "D.parent"}));
    } else {
        nodes.push(json!({"id": "D", "kind": "dense", "params": {"shape": [64, 64]}}));
    }
    wires.push(json!({"from": "D.cells", "to": "x.layout"}));
    nodes.push(json!({"id": "x", "kind": "field", "params": {"type": "f32", "init": 0.5}}));
    nodes.push(json!({"id": "n", "kind": "field", "params": {"type": "i32", "init": 0}}));
    nodes.push(json!({"id": "n_cells", "kind": "dense", "params": {"shape": [1]}}));
    wires.push(json!({"from": "n_cells.cells", "to": "n.layout"}));
    nodes.push(json!({"id": "s", "kind": "on_start"}));
    nodes.push(json!({"id": "w", "kind": "kernel", "params": {"range": [64, 64], "code": start}}));
    wires.push(json!({"from": "x.field", "to": "w.x"}));
    let mut exec = vec![json!({"from": "s.then", "to": "w"})];
    if let Some((code, params)) = frame {
        nodes.push(json!({"id": "f", "kind": "on_frame"}));
        let mut p = params;
        p["code"] = json!(code);
        nodes.push(json!({"id": "k", "kind": "kernel", "params": p}));
        wires.push(json!({"from": "x.field", "to": "k.x"}));
        if code.contains("n[") {
            wires.push(json!({"from": "n.field", "to": "k.n"}));
        }
        exec.push(json!({"from": "f.then", "to": "k"}));
    }
    json!({"format": "weft-graph", "version": 1, "nodes": nodes, "wires": wires, "exec": exec})
}

const DISC: &str = "fn kernel(i: i32, j: i32) {
    let dx = (i - 20) as f32; let dy = (j - 30) as f32;
    if dx * dx + dy * dy < 60.0 { x[(i, j)] = (i * 64 + j) as f32; }
    if i == 5 && j == 5 { atomic_add(x[(i, j)], 2.0); }
}";

fn open(doc: &Value, backend: Backend) -> Option<Simulation> {
    if backend == Backend::Wgpu && !wgpu_available() {
        return None;
    }
    let opts = SimOptions {
        backend,
        passes: weft_ir::passes::PassOptions {
            validate: true,
            ..Default::default()
        },
        ..Default::default()
    };
    Some(Simulation::new(build(doc).expect("graph builds"), &opts).expect("compiles"))
}

fn run(doc: &Value, backend: Backend, frames: u32) -> Option<Simulation> {
    let mut s = open(doc, backend)?;
    s.start().expect("on_start runs");
    for _ in 0..frames {
        s.step_frame().expect("frame runs");
    }
    Some(s)
}

/// Blocks of `P` in use.
fn pool_use(s: &Simulation) -> u32 {
    let p = &s.program;
    let l = p.layouts.iter().find(|(_, l)| l.node_id == "P").unwrap().0;
    let words = s.read_root(root_of(p, l)).unwrap();
    pool_in_use(p, l, &words)
}

const BACKENDS: [Backend; 3] = [Backend::Vm, Backend::Jit, Backend::Wgpu];

#[test]
fn sparse_matches_dense_and_struct_for_visits_active_cells() {
    // Struct-for adds 1 to every active cell per frame. Activity is kept per
    // bitmasked cell (a 2×2 dense block), so the dense reference adds 1 to
    // every cell whose 2×2 block holds a cell the disc wrote.
    let inc = "fn kernel(i: i32, j: i32) { x[(i, j)] += 1.0; }";
    let dense_inc = "fn written(i: i32, j: i32) -> bool {
        let dx = (i - 20) as f32; let dy = (j - 30) as f32;
        dx * dx + dy * dy < 60.0 || (i == 5 && j == 5)
    }
    fn kernel(i: i32, j: i32) {
        let bi = i - i % 2; let bj = j - j % 2;
        if written(bi, bj) || written(bi + 1, bj) || written(bi, bj + 1) || written(bi + 1, bj + 1) {
            x[(i, j)] += 1.0;
        }
    }";
    let reference = run(
        &graph(
            false,
            0,
            DISC,
            Some((dense_inc, json!({"range": [64, 64]}))),
        ),
        Backend::Vm,
        3,
    )
    .unwrap();
    let want = f32s(&reference, "x");
    // Hand check of the reference: inactive cells keep the init value.
    assert_eq!(want[0], 0.5);
    assert_eq!(want[5 * 64 + 5], 0.5 + 2.0 + 3.0);
    assert_eq!(want[20 * 64 + 30], (20 * 64 + 30) as f32 + 3.0);
    for b in BACKENDS {
        let Some(s) = run(
            &graph(true, 16, DISC, Some((inc, json!({"over": "x"})))),
            b,
            3,
        ) else {
            continue;
        };
        assert_eq!(f32s(&s, "x"), want, "{:?}", b);
        // The disc (radius < 8 around (20, 30)) and (5, 5) touch 6 blocks of 8×8... plus the corner one.
        let used = pool_use(&s);
        assert!((2..=9).contains(&used), "{:?}: {} blocks", b, used);
    }
}

#[test]
fn concurrent_activation_allocates_one_block() {
    // Every thread writes into block (0, 0) at once; each adds 1 atomically.
    let code = "fn kernel(i: i32, j: i32) { atomic_add(x[(i % 8, j % 8)], 1.0); }";
    for b in BACKENDS {
        let Some(s) = run(&graph(true, 4, code, None), b, 0) else {
            continue;
        };
        let x = f32s(&s, "x");
        assert_eq!(x[0], 0.5 + 64.0, "{:?}", b);
        assert_eq!(x[7 * 64 + 7], 0.5 + 64.0, "{:?}", b);
        assert_eq!(x[8], 0.5, "{:?}", b);
        // Before garbage collection frees nothing (the block is active): one block.
        assert_eq!(pool_use(&s), 1, "{:?}", b);
    }
}

#[test]
fn is_active_activate_deactivate() {
    let code = "fn kernel(i: i32, j: i32) {
        if i == 0 && j == 0 { activate(x[(9, 9)]); }
    }";
    let probe = "fn kernel(i: i32, j: i32) {
        // Written in frame 1: (9, 9) active, (40, 40) not; then (9, 9) deactivated.
        if i == 0 && j == 0 {
            n[0] = select(is_active(x[(9, 9)]), 1, 0) + select(is_active(x[(40, 40)]), 10, 0);
            // (9, 7) is in another bitmasked cell than (9, 9), whose whole
            // 2×2 dense block `deactivate` resets.
            x[(9, 7)] = 7.0;
            deactivate(x[(9, 9)]);
            n[0] += select(is_active(x[(9, 9)]), 100, 0) + select(is_active(x[(9, 7)]), 1000, 0);
        }
    }";
    for b in BACKENDS {
        let Some(s) = run(
            &graph(true, 4, code, Some((probe, json!({"range": [1, 1]})))),
            b,
            1,
        ) else {
            continue;
        };
        assert_eq!(i32s(&s, "n"), vec![1 + 1000], "{:?}", b);
        let x = f32s(&s, "x");
        assert_eq!(x[9 * 64 + 9], 0.5, "{:?}", b);
        assert_eq!(x[9 * 64 + 7], 7.0, "{:?}", b);
    }
}

#[test]
fn moving_blob_keeps_pool_use_bounded() {
    // A disc of radius 5 jumps between 16 places (16 cells apart, so the old
    // and the new disc never share a block); last frame's cells are
    // deactivated, so garbage collection frees the blocks it left. After
    // each frame at most 9 blocks are in use; the pool (20) holds the old and
    // the new disc during a frame, while the places visited cover more
    // blocks than that, so without recycling the run would fail early.
    let step = "fn center(t: i32) -> vec2 {
        vec2((8 + (t * 16) % 64) as f32, (8 + ((t / 4) * 16) % 64) as f32)
    }
    fn kernel(i: i32, j: i32) {
        let t = frame();
        let p = vec2(i as f32, j as f32);
        if distance(p, center(t - 1)) < 5.0 { deactivate(x[(i, j)]); }
        if distance(p, center(t)) < 5.0 { x[(i, j)] = 1.0; }
    }";
    let frames: i32 = std::env::var("WEFT_SPARSE_FRAMES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let Some(mut s) = open(
        &graph(
            true,
            20,
            "fn kernel(i: i32, j: i32) { let v = x[(i, j)]; }",
            Some((step, json!({"range": [64, 64]}))),
        ),
        Backend::Jit,
    ) else {
        return;
    };
    s.start().unwrap();
    let mut peak = 0;
    for _ in 0..frames {
        s.step_frame().unwrap();
        peak = peak.max(pool_use(&s));
    }
    assert!(peak <= 9, "peak pool use {}", peak);
    // Hand check of the final state: exactly the last disc is active.
    let x = f32s(&s, "x");
    let t = frames;
    let (cx, cy) = ((8 + (t * 16) % 64) as f32, (8 + ((t / 4) * 16) % 64) as f32);
    for i in 0..64 {
        for j in 0..64 {
            let inside = ((i as f32 - cx).powi(2) + (j as f32 - cy).powi(2)).sqrt() < 5.0;
            assert_eq!(x[i * 64 + j], if inside { 1.0 } else { 0.5 }, "({i}, {j})");
        }
    }
}

#[test]
fn pool_exhaustion_names_the_node() {
    for b in BACKENDS {
        let Some(mut s) = open(&graph(true, 3, DISC, None), b) else {
            continue;
        };
        let e = s.start().expect_err("the pool is too small").to_string();
        assert!(
            e.contains("'P'") && e.contains("capacity"),
            "{:?}: {}",
            b,
            e
        );
    }
}

#[test]
fn bad_sparse_graphs_are_rejected_naming_the_node() {
    let mut g = graph(true, 16, DISC, None);
    g["nodes"][0]["params"]["capacity"] = json!(0);
    let e = build(&g).expect_err("capacity 0").to_string();
    assert!(e.contains("'P'") && e.contains("capacity"), "{}", e);

    let mut g = graph(true, 16, DISC, None);
    g["wires"] = json!([{"from": "P.cells", "to": "B.parent"}, {"from": "D.cells", "to": "x.layout"}, {"from": "x.field", "to": "w.x"}, {"from": "n_cells.cells", "to": "n.layout"}]);
    let e = build(&g).expect_err("empty bitmasked").to_string();
    assert!(e.contains("'B'"), "{}", e);

    let mut g = graph(true, 16, DISC, None);
    let npy = std::env::temp_dir().join(format!("weft_sparse_{}.npy", std::process::id()));
    weft_ir::graph::npy::write_npy(
        &npy,
        &weft_ir::graph::npy::NpyArray {
            dtype: weft_ir::graph::npy::DType::F32,
            shape: vec![64, 64],
            words: vec![0; 64 * 64],
        },
    )
    .unwrap();
    g["nodes"][3]["params"]["init"] = json!({"npy": npy.to_str().unwrap()});
    let e = build(&g).expect_err("data init under sparse").to_string();
    let _ = std::fs::remove_file(&npy);
    assert!(
        e.contains("'x'") && e.contains("'B'") && e.contains("constant"),
        "{}",
        e
    );
}

#[test]
fn host_writes_activate_and_reads_see_init() {
    let Some(mut s) = run(
        &graph(
            true,
            4,
            "fn kernel(i: i32, j: i32) { let v = x[(i, j)]; }",
            None,
        ),
        Backend::Vm,
        0,
    ) else {
        return;
    };
    let f = s.field("x").unwrap();
    let mut w = vec![0.5f32.to_bits(); 64 * 64];
    w[3 * 64 + 60] = 2.0f32.to_bits();
    s.write_field(f, &w).unwrap();
    assert_eq!(s.read_field(f).unwrap(), w);
    assert_eq!(pool_use(&s), 1);
    // Too many blocks for the pool: an error naming the pointer node.
    let all = vec![1.0f32.to_bits(); 64 * 64];
    let e = s
        .write_field(f, &all)
        .expect_err("pool too small")
        .to_string();
    assert!(e.contains("'P'"), "{}", e);
}

/// `show_active` views: the activity mask marks exactly the active cells,
/// and outlines the border of each active block of the outermost sparse
/// node (here: `x` written at one element of the 8×8 pointer blocks of a
/// 64×64 domain), compared with a hand-made mask.
#[test]
fn activity_mask_marks_active_cells_and_block_borders() {
    let doc = graph(
        true,
        16,
        "fn kernel(i: i32, j: i32) { if i == 13 && j == 50 { x[(i, j)] = 2.0; } }",
        None,
    );
    let mut sim = open(&doc, Backend::Vm).expect("vm");
    sim.start().expect("start");
    let p = &sim.program;
    let x = p.field_by_name("x").expect("x");
    let words = sim.read_root(root_of(p, p.fields[x].layout)).expect("root");
    let mask = weft_runtime::render::activity_mask(p, x, &words).expect("sparse field");
    // The write activates pointer block (1, 6) (elements 8..16 × 48..56)
    // and, inside it, the bitmasked tile of 2×2 elements holding (13, 50).
    for i in 0..64u32 {
        for j in 0..64u32 {
            let in_block = (8..16).contains(&i) && (48..56).contains(&j);
            let in_tile = (12..14).contains(&i) && (50..52).contains(&j);
            let border = in_block && (i % 8 == 0 || i % 8 == 7 || j % 8 == 0 || j % 8 == 7);
            let want = (in_tile as u8) * weft_runtime::render::CELL_ACTIVE
                + (border as u8) * weft_runtime::render::BLOCK_EDGE;
            assert_eq!(mask[(i * 64 + j) as usize], want, "cell ({}, {})", i, j);
        }
    }
    // A dense field has no mask: every cell is always active.
    let dense = build(&graph(
        false,
        16,
        "fn kernel(i: i32, j: i32) { x[(i, j)] = 1.0; }",
        None,
    ))
    .unwrap();
    let xd = dense.field_by_name("x").unwrap();
    assert!(weft_runtime::render::activity_mask(&dense, xd, &[]).is_none());
}

/// graphs/sparse_blob.json on a 1024² domain: the blob moves, the VM and
/// the JIT agree exactly and wgpu closely, and pool use stays
/// bounded while tiles are pruned behind it.
#[test]
fn sparse_blob_moves_with_bounded_memory_on_every_backend() {
    let mut g = example("sparse_blob");
    for n in g["nodes"].as_array_mut().unwrap() {
        if n["id"] == "blocks" {
            n["params"]["shape"] = json!([16, 16]);
        }
    }
    let frames = 40;
    let mut results = Vec::new();
    for backend in [Backend::Vm, Backend::Jit, Backend::Wgpu] {
        let Some(mut sim) = open(&g, backend) else {
            continue;
        };
        sim.start().expect("start");
        let p = sim.program.clone();
        let blocks = p
            .layouts
            .iter()
            .find(|(_, l)| l.node_id == "blocks")
            .unwrap()
            .0;
        let mut peak = 0;
        for _ in 0..frames {
            sim.step_frame().expect("frame");
            let words = sim.read_root(root_of(&p, blocks)).unwrap();
            peak = peak.max(pool_in_use(&p, blocks, &words));
        }
        let d = f32s(&sim, "d");
        // Centre of mass: starts at (600, 500); drifts +2 per frame in x.
        let (mut m, mut cx) = (0.0f64, 0.0f64);
        for (k, &v) in d.iter().enumerate() {
            m += v as f64;
            cx += v as f64 * (k / 1024) as f64;
        }
        let cx = cx / m;
        assert!(
            (cx - (600.0 + 2.0 * frames as f64)).abs() < 3.0,
            "{:?}: centre x {}",
            backend,
            cx
        );
        // The blob (radius 90) spans at most 4×4 of the 64-cell blocks.
        assert!(peak <= 16, "{:?}: {} blocks in use", backend, peak);
        results.push((backend, d));
    }
    // The JIT is bit-identical to the VM; wgpu's `sin` (in the velocity)
    // may differ in the last bits, which advection then carries along.
    for (b, d) in &results[1..] {
        let worst = d
            .iter()
            .zip(&results[0].1)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        let limit = if *b == Backend::Jit { 0.0 } else { 1e-4 };
        assert!(worst <= limit, "{:?} differs from the VM by {}", b, worst);
    }
}

/// graphs/mpm_sparse.json against the same graph with its grid stored
/// dense (1024×1024): the particles end bit-identical (one thread, so the
/// grid's float atomics add in the same order), the sparse grid holds only
/// blocks near the particles, and wgpu stays close.
#[test]
fn mpm_sparse_matches_a_dense_grid() {
    let sparse = example("mpm_sparse");
    let mut dense = sparse.clone();
    let nodes = dense["nodes"].as_array_mut().unwrap();
    nodes.retain(|n| n["id"] != "grid_blocks");
    for n in nodes.iter_mut() {
        if n["id"] == "grid" {
            n["params"]["shape"] = json!([1024, 1024]);
        }
        if n["id"] == "blocks_view" {
            n["params"]["show_active"] = json!(false);
        }
    }
    dense["wires"]
        .as_array_mut()
        .unwrap()
        .retain(|w| w["from"] != "grid_blocks.cells");
    let frames = 2;
    let single = |doc: &Value, backend: Backend| {
        let opts = SimOptions {
            backend,
            threads: Some(1),
            ..Default::default()
        };
        let mut s = Simulation::new(build(doc).expect("graph builds"), &opts).expect("compiles");
        s.start().unwrap();
        for _ in 0..frames {
            s.step_frame().unwrap();
        }
        s
    };
    let s = single(&sparse, Backend::Jit);
    let d = single(&dense, Backend::Jit);
    assert_eq!(words(&s, "x"), words(&d, "x"), "particle positions differ");
    assert_eq!(
        words(&s, "grid_m"),
        words(&d, "grid_m"),
        "grid masses differ"
    );
    let p = &s.program;
    let blocks = p
        .layouts
        .iter()
        .find(|(_, l)| l.node_id == "grid_blocks")
        .unwrap()
        .0;
    let used = pool_in_use(p, blocks, &s.read_root(root_of(p, blocks)).unwrap());
    assert!(used > 10 && used < 200, "{} of 16384 blocks in use", used);
    if let Some(mut g) = open(&sparse, Backend::Wgpu) {
        g.start().unwrap();
        for _ in 0..frames {
            g.step_frame().unwrap();
        }
        let worst = f32s(&g, "x")
            .iter()
            .zip(f32s(&s, "x"))
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(worst < 1e-3, "wgpu particles differ by {}", worst);
    }
}
