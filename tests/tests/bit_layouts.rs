//! `bit_struct` and `bit_array` layout nodes (issue 10) on every backend.
//!
//! References: the i32 Game of Life (`graphs/life.json`) for the one-bit
//! versions (exact, same start: `random()` depends on the kernel id and the
//! loop index, not on the layout), the host codec `ir::quant` and plain
//! integer arithmetic for packed values, the VM for cross-backend equality,
//! and hand-counted words for the memory the layouts take.

use serde_json::{json, Value};
use weft_ir::ir::layout::root_words;
use weft_ir::ir::quant::Quant;
use weft_ir::ir::{print_program, Storage};
use weft_ir::passes::{run_pipeline, PassOptions};
use weft_runtime::{Backend, SimOptions, Simulation};
use weft_tests::*;

fn backends() -> Vec<Backend> {
    let mut b = vec![Backend::Vm, Backend::Jit];
    if wgpu_available() {
        b.push(Backend::Wgpu);
    }
    b
}

fn sim(doc: &Value, backend: Backend, frames: u32) -> Simulation {
    sim_with(doc, backend, frames, true)
}

/// `rewrites`: run the store fusion and atomic demotion passes.
fn sim_with(doc: &Value, backend: Backend, frames: u32, rewrites: bool) -> Simulation {
    let p = build(doc).unwrap_or_else(|e| panic!("build: {}", e));
    let opts = SimOptions {
        backend,
        passes: weft_ir::passes::PassOptions {
            validate: true,
            packed_word_rewrites: rewrites,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut s = Simulation::new(p, &opts).unwrap_or_else(|e| panic!("{:?}: {}", backend, e));
    s.start().unwrap_or_else(|e| panic!("{:?}: {}", backend, e));
    for _ in 0..frames {
        s.step_frame()
            .unwrap_or_else(|e| panic!("{:?}: {}", backend, e));
    }
    s
}

fn node<'a>(g: &'a mut Value, id: &str) -> &'a mut Value {
    g["nodes"]
        .as_array_mut()
        .expect("nodes")
        .iter_mut()
        .find(|n| n["id"] == id)
        .unwrap_or_else(|| panic!("no node {}", id))
}

fn words_of_root(s: &Simulation, node_id: &str) -> u64 {
    let p = &s.program;
    let l = p
        .layouts
        .iter()
        .find(|(_, l)| l.node_id == node_id)
        .unwrap_or_else(|| panic!("no layout {}", node_id))
        .0;
    root_words(p, l)
}

/// `graphs/life.json` on an n x n board.
fn life(n: u32) -> Value {
    let mut g = example("life");
    node(&mut g, "board")["params"]["shape"] = json!([n, n]);
    node(&mut g, "step")["params"]["scalars"]["n"] = json!(n);
    g
}

/// `graphs/life_bits.json` (32 cells per word, bit-vectorized step) on an n x n board.
fn life_bits(n: u32) -> Value {
    let mut g = example("life_bits");
    node(&mut g, "board")["params"]["shape"] = json!([n, n / 32]);
    node(&mut g, "step")["params"]["scalars"] = json!({"rows": n, "cols": n / 32});
    g
}

/// `graphs/life.json` with `alive` and `next` moved into one-bit bit_arrays
/// that pack a 4 x 8 tile of cells per word: the per-cell kernels stay as
/// they are, and every store is a compare-exchange on a word that 31 other
/// iterations write at the same time.
fn life_tiles(n: u32) -> Value {
    let mut g = life(n);
    node(&mut g, "board")["params"]["shape"] = json!([n / 4, n / 8]);
    for f in ["alive", "next"] {
        node(&mut g, f)["params"] = json!({"type": "u32", "storage": "uint1"});
    }
    for c in ["seed", "step"] {
        let code = node(&mut g, c)["params"]["code"]
            .as_str()
            .unwrap()
            .replace("1, 0)", "1u32, 0u32)")
            .replace("count += alive[(x, y)]", "count += alive[(x, y)] as i32")
            .replace("me == 1 &&", "me == 1u32 &&");
        node(&mut g, c)["params"]["code"] = json!(code);
    }
    let nodes = g["nodes"].as_array_mut().unwrap();
    nodes.push(json!({"id": "tile_a", "kind": "bit_array", "params": {"shape": [4, 8]}}));
    nodes.push(json!({"id": "tile_n", "kind": "bit_array", "params": {"shape": [4, 8]}}));
    let wires = g["wires"].as_array_mut().unwrap();
    wires.retain(|w| w["from"] != "board.cells");
    wires.extend([
        json!({"from": "board.cells", "to": "tile_a.parent"}),
        json!({"from": "board.cells", "to": "tile_n.parent"}),
        json!({"from": "tile_a.cells", "to": "alive.layout"}),
        json!({"from": "tile_n.cells", "to": "next.layout"}),
    ]);
    g
}

#[test]
fn one_bit_life_evolves_exactly_like_the_i32_version() {
    let n = 128;
    let frames = 6;
    let want = i32s(&sim(&life(n), Backend::Vm, frames), "alive");
    let live = want.iter().filter(|&&x| x == 1).count();
    assert!(
        live > 500 && live < 8000,
        "a live board after {} frames: {}",
        frames,
        live
    );
    for backend in backends() {
        let s = sim(&life_bits(n), backend, frames);
        let got: Vec<i32> = words(&s, "alive").iter().map(|&w| w as i32).collect();
        assert_eq!(got, want, "life_bits on {:?}", backend);
        // 32 cells per word: the board is n*n/32 packed words plus as many `next` words.
        assert_eq!(words_of_root(&s, "board"), 2 * (n * n / 32) as u64);
        let s = sim(&life_tiles(n), backend, frames);
        let got: Vec<i32> = words(&s, "alive").iter().map(|&w| w as i32).collect();
        assert_eq!(
            got, want,
            "per-cell life on 4x8 one-bit tiles on {:?}",
            backend
        );
        assert_eq!(words_of_root(&s, "board"), 2 * (n * n / 32) as u64);
    }
}

/// The word view and the cells are the same bits: cell `32 w + k` of a
/// [1, 32] bit_array is bit k of word w.
#[test]
fn word_view_holds_the_cells_bit_by_bit() {
    let g = json!({
        "format": "weft-graph", "version": 1,
        "nodes": [
            {"id": "rows", "kind": "dense", "params": {"shape": [3, 2]}},
            {"id": "bits", "kind": "bit_array", "params": {"shape": [1, 32]}},
            {"id": "b", "kind": "field", "params": {"type": "u32", "storage": "uint1"}},
            {"id": "w", "kind": "field", "params": {"type": "u32"}},
            {"id": "other", "kind": "dense", "params": {"shape": [3, 2]}},
            {"id": "set", "kind": "kernel", "params": {"range": [3, 64],
                "code": "fn kernel(i: i32, j: i32) { b[(i, j)] = select((i * 7 + j * 3) % 5 == 0, 1u32, 0u32); }"}},
            {"id": "get", "kind": "kernel", "params": {"range": [3, 2],
                "code": "fn kernel(i: i32, j: i32) { w[(i, j)] = words[(i, j)]; words[(i, j)] = !words[(i, j)]; }"}},
            {"id": "start", "kind": "on_start"}
        ],
        "wires": [
            {"from": "rows.cells", "to": "bits.parent"},
            {"from": "bits.cells", "to": "b.layout"},
            {"from": "other.cells", "to": "w.layout"},
            {"from": "b.field", "to": "set.b"},
            {"from": "bits.words", "to": "get.words"},
            {"from": "w.field", "to": "get.w"}
        ],
        "exec": [{"from": "start.then", "to": "set"}, {"from": "set.then", "to": "get"}]
    });
    for backend in backends() {
        let s = sim(&g, backend, 0);
        let w = words(&s, "w");
        let b = words(&s, "b");
        for i in 0..3 {
            for word in 0..2 {
                let mut want = 0u32;
                for k in 0..32 {
                    let j = word * 32 + k;
                    if (i * 7 + j * 3) % 5 == 0 {
                        want |= 1 << k;
                    }
                    // `get` inverted every bit afterwards.
                    let bit = b[(i * 64 + j) as usize];
                    assert_eq!(
                        bit,
                        u32::from((i * 7 + j * 3) % 5 != 0),
                        "{:?} b[{i},{j}]",
                        backend
                    );
                }
                assert_eq!(
                    w[(i * 2 + word) as usize],
                    want,
                    "{:?} word ({i},{word})",
                    backend
                );
            }
        }
        assert_eq!(words_of_root(&s, "rows"), 6);
    }
}

/// Three quantized fields (5 + 11 + 2x8 = 32 bits) in one word per cell,
/// written by different iterations at the same time, plus saturating atomic
/// adds into 4-bit counters packed 8 to a word.
#[test]
fn bit_struct_and_bit_array_keep_every_packed_value() {
    let n = 512u32;
    let g = json!({
        "format": "weft-graph", "version": 1,
        "nodes": [
            {"id": "cells", "kind": "dense", "params": {"shape": [n]}},
            {"id": "word", "kind": "bit_struct"},
            {"id": "a", "kind": "field", "params": {"type": "i32", "storage": "int5"}},
            {"id": "x", "kind": "field", "params": {"type": "f32", "storage": "fixed11[0,1]"}},
            {"id": "v", "kind": "field", "params": {"type": "vec2", "storage": "ufloat4m4"}},
            {"id": "groups", "kind": "dense", "params": {"shape": [4]}},
            {"id": "nibbles", "kind": "bit_array", "params": {"shape": [8]}},
            {"id": "cnt", "kind": "field", "params": {"type": "u32", "storage": "uint4"}},
            {"id": "k", "kind": "kernel", "params": {"range": [n * 3], "code": "fn kernel(t: i32) {
                let i = t / 3;
                let f = t % 3;
                if f == 0 { a[i] = i % 32 - 16; }
                if f == 1 { x[i] = (i % 100) as f32 / 99.0; }
                if f == 2 { v[i] = vec2((i % 16) as f32, 0.25 * (i % 8) as f32); }
                cnt[t % 32] += 1u32;
            }"}},
            {"id": "start", "kind": "on_start"}
        ],
        "wires": [
            {"from": "cells.cells", "to": "word.parent"},
            {"from": "word.cells", "to": "a.layout"},
            {"from": "word.cells", "to": "x.layout"},
            {"from": "word.cells", "to": "v.layout"},
            {"from": "groups.cells", "to": "nibbles.parent"},
            {"from": "nibbles.cells", "to": "cnt.layout"},
            {"from": "a.field", "to": "k.a"},
            {"from": "x.field", "to": "k.x"},
            {"from": "v.field", "to": "k.v"},
            {"from": "cnt.field", "to": "k.cnt"}
        ],
        "exec": [{"from": "start.then", "to": "k"}]
    });
    let mut first: Option<Vec<Vec<u32>>> = None;
    for backend in backends() {
        let s = sim(&g, backend, 0);
        let xq = match s.program.fields[s.field("x").unwrap()].storage {
            Storage::Quant(q) => q,
            _ => panic!("x is quantized per component"),
        };
        let round = |q: Quant, v: f32| f32::from_bits(q.decode(q.encode(v.to_bits())));
        let (a, x, v) = (i32s(&s, "a"), f32s(&s, "x"), f32s(&s, "v"));
        for i in 0..n as i32 {
            assert_eq!(a[i as usize], i % 32 - 16, "{:?} a[{}]", backend, i);
            let xi = (i % 100) as f32 / 99.0;
            assert_eq!(x[i as usize], round(xq, xi), "{:?} x[{}]", backend, i);
            // Small integers and quarters are exact in ufloat4m4.
            let want = [(i % 16) as f32, 0.25 * (i % 8) as f32];
            assert_eq!(
                v[2 * i as usize..2 * i as usize + 2],
                want,
                "{:?} v[{}]",
                backend,
                i
            );
        }
        // 3 * 512 / 32 = 48 adds per counter: uint4 saturates at 15.
        assert_eq!(words(&s, "cnt"), vec![15; 32], "{:?}", backend);
        assert_eq!(words_of_root(&s, "cells"), n as u64, "one word per cell");
        assert_eq!(words_of_root(&s, "groups"), 4, "eight counters per word");
        let all: Vec<Vec<u32>> = ["a", "x", "v", "cnt"]
            .iter()
            .map(|f| words(&s, f))
            .collect();
        match &first {
            None => first = Some(all),
            Some(f) => assert_eq!(&all, f, "{:?} differs from the VM", backend),
        }
    }
}

fn packed_graph(layout: Value, fields: &[(&str, &str, &str)], extra: Vec<Value>) -> Value {
    let mut nodes = vec![
        json!({"id": "top", "kind": "dense", "params": {"shape": [4, 4]}}),
        layout,
    ];
    let mut wires = vec![json!({"from": "top.cells", "to": "pack.parent"})];
    for (name, ty, storage) in fields {
        nodes
            .push(json!({"id": name, "kind": "field", "params": {"type": ty, "storage": storage}}));
        wires.push(json!({"from": "pack.cells", "to": format!("{}.layout", name)}));
    }
    for e in extra {
        if e.get("from").is_some() {
            wires.push(e);
        } else {
            nodes.push(e);
        }
    }
    json!({"format": "weft-graph", "version": 1, "nodes": nodes, "wires": wires})
}

#[test]
fn packed_nodes_that_do_not_fit_are_errors_naming_the_node() {
    let bs = json!({"id": "pack", "kind": "bit_struct"});
    let ba = json!({"id": "pack", "kind": "bit_array", "params": {"shape": [1, 32]}});
    let cases: Vec<(Value, &str)> = vec![
        (
            packed_graph(
                bs.clone(),
                &[("a", "i32", "int16"), ("v", "vec2", "float5m3")],
                vec![],
            ),
            "node 'pack', port 'cells': a bit_struct packs into one 32-bit word, but its fields need 34 bits ('a' 16 + 'v' 2x9)",
        ),
        (
            packed_graph(bs.clone(), &[("a", "f32", "word"), ("b", "u32", "uint1")], vec![]),
            "its fields need 33 bits",
        ),
        (
            packed_graph(
                bs.clone(),
                &[("a", "u32", "uint8")],
                vec![json!({"id": "inner", "kind": "dense", "params": {"shape": [1, 1]}}), json!({"from": "pack.cells", "to": "inner.parent"})],
            ),
            "node 'pack', port 'cells': a bit_struct holds fields only, but layout node 'inner' is wired to its cells",
        ),
        (
            packed_graph(ba.clone(), &[("b", "u32", "uint2")], vec![]),
            "node 'pack', port 'cells': a bit_array packs into one 32-bit word, but its 32 cells of 2 bits ('b', uint2) need 64 bits",
        ),
        (
            packed_graph(ba.clone(), &[("b", "u32", "uint1"), ("c", "u32", "uint1")], vec![]),
            "a bit_array packs exactly one field, but 2 are wired to its cells",
        ),
        (
            packed_graph(ba.clone(), &[("b", "u32", "word")], vec![]),
            "a bit_array packs one scalar field with quantized storage (e.g. uint1), but 'b' is a u32 with word storage",
        ),
        (
            packed_graph(ba.clone(), &[("b", "uvec2", "uint1")], vec![]),
            "but 'b' is a vec2<u32> with uint1 storage",
        ),
        (
            json!({"format": "weft-graph", "version": 1, "nodes": [
                {"id": "pack", "kind": "bit_struct"},
                {"id": "a", "kind": "field", "params": {"type": "u32", "storage": "uint3"}}
            ], "wires": [{"from": "pack.cells", "to": "a.layout"}]}),
            "node 'pack', port 'parent': required input 'parent' is not wired",
        ),
        (
            json!({"format": "weft-graph", "version": 1, "nodes": [
                {"id": "top", "kind": "hash", "params": {"shape": [8], "capacity": 8}},
                {"id": "pack", "kind": "bit_array", "params": {"shape": [32]}},
                {"id": "b", "kind": "field", "params": {"type": "u32", "storage": "uint1"}}
            ], "wires": [{"from": "top.cells", "to": "pack.parent"}, {"from": "pack.cells", "to": "b.layout"}]}),
            "node 'b', param 'storage': quantized storage is not supported under the hash node 'top' (only dense, pointer and bitmasked nodes)",
        ),
    ];
    for (g, want) in cases {
        let e = build(&g).expect_err(want).to_string();
        assert!(e.contains(want), "want {:?}\n got {}", want, e);
    }
}

/// Compare-exchange loops left in one kernel's legalized IR.
fn cas_loops(doc: &Value, kernel: &str, rewrites: bool) -> usize {
    let mut p = build(doc).unwrap();
    let opts = PassOptions {
        validate: true,
        packed_word_rewrites: rewrites,
        ..Default::default()
    };
    run_pipeline(&mut p, &opts, None).unwrap();
    print_program(&p, Some(kernel))
        .matches("buf_atomic_compare_exchange")
        .count()
}

/// Store fusion and atomic demotion change no result: every field's words
/// are the same with and without them, on every backend, and equal to the
/// VM's. Kernel `own` writes only its own bit_struct word (everything is
/// fused and demoted, `+=` included); `shift` also writes the next cell's
/// `x`, so its stores must stay compare-exchange loops (a wrong demotion
/// would lose bits to the neighbour's iteration); `tiles` stores single
/// bits of shared words.
#[test]
fn store_fusion_and_atomic_demotion_change_no_result() {
    let n = 4096u32;
    let g = json!({
        "format": "weft-graph", "version": 1,
        "nodes": [
            {"id": "cells", "kind": "dense", "params": {"shape": [n]}},
            {"id": "word", "kind": "bit_struct"},
            {"id": "a", "kind": "field", "params": {"type": "i32", "storage": "int7"}},
            {"id": "x", "kind": "field", "params": {"type": "f32", "storage": "fixed9[-1,1]"}},
            {"id": "v", "kind": "field", "params": {"type": "vec2", "storage": "float3m4"}},
            {"id": "rows", "kind": "dense", "params": {"shape": [16, 4]}},
            {"id": "tile", "kind": "bit_array", "params": {"shape": [4, 8]}},
            {"id": "b", "kind": "field", "params": {"type": "u32", "storage": "uint1"}},
            {"id": "own", "kind": "kernel", "params": {"over": "a", "code": "fn kernel(i: i32) {
                a[i] = i % 50 - 25;
                x[i] = sin(i as f32);
                v[i] = vec2(cos(i as f32) * 3.0, (i % 7) as f32 * 0.125);
                a[i] += 3;
                v[i].y += 0.5;
            }"}},
            {"id": "shift", "kind": "kernel", "params": {"over": "a", "code": "fn kernel(i: i32) {
                a[i] = a[i] * 2;
                x[(i + 1) % 4096] = cos(i as f32 * 0.3);
            }"}},
            {"id": "tiles", "kind": "kernel", "params": {"over": "b", "code": "fn kernel(i: i32, j: i32) {
                b[(i, j)] = select((i * 5 + j * 3) % 7 < 3, 1u32, 0u32);
            }"}},
            {"id": "start", "kind": "on_start"}
        ],
        "wires": [
            {"from": "cells.cells", "to": "word.parent"},
            {"from": "word.cells", "to": "a.layout"},
            {"from": "word.cells", "to": "x.layout"},
            {"from": "word.cells", "to": "v.layout"},
            {"from": "rows.cells", "to": "tile.parent"},
            {"from": "tile.cells", "to": "b.layout"},
            {"from": "a.field", "to": "own.a"},
            {"from": "x.field", "to": "own.x"},
            {"from": "v.field", "to": "own.v"},
            {"from": "a.field", "to": "shift.a"},
            {"from": "x.field", "to": "shift.x"},
            {"from": "b.field", "to": "tiles.b"}
        ],
        "exec": [
            {"from": "start.then", "to": "own"},
            {"from": "own.then", "to": "shift"},
            {"from": "shift.then", "to": "tiles"}
        ]
    });
    // The effect: 6 loops (one per component store or `+=`) become none.
    assert_eq!(cas_loops(&g, "own", false), 7);
    assert_eq!(cas_loops(&g, "own", true), 0);
    assert_eq!(cas_loops(&g, "shift", false), 2);
    assert_eq!(cas_loops(&g, "shift", true), 2);
    assert_eq!(cas_loops(&g, "tiles", true), 1);
    let names = ["a", "x", "v", "b"];
    let reference: Vec<Vec<u32>> = {
        let s = sim_with(&g, Backend::Vm, 0, false);
        names.iter().map(|f| words(&s, f)).collect()
    };
    // `shift` doubled every a after `own`: a = 2 (i % 50 - 22), saturated to int7.
    for i in 0..n as i32 {
        let want = (2 * (i % 50 - 22)).clamp(-64, 63);
        assert_eq!(reference[0][i as usize] as i32, want, "a[{}]", i);
    }
    for backend in backends() {
        for rewrites in [true, false] {
            let s = sim_with(&g, backend, 0, rewrites);
            let got: Vec<Vec<u32>> = names.iter().map(|f| words(&s, f)).collect();
            for (k, name) in names.iter().enumerate() {
                assert!(
                    got[k] == reference[k],
                    "{} on {:?} with rewrites {} differs from the VM without them",
                    name,
                    backend,
                    rewrites
                );
            }
        }
    }
}
