//! Generated chain graphs for start-up scaling (issue 48, item 18): `n`
//! kernel nodes in one long execution chain over a few fields on one dense
//! grid, each kernel reading the field the previous one wrote. The same
//! generator feeds the scaling tests (`tests/tests/chain_scale.rs`) and the
//! benchmark in docs/performance.md
//! (`cargo run -p weft-tests --example chain_graph -- 5000 > chain5k.json`).
//!
//! The shape is meant to look like a large hand-made graph rather than a
//! best case for any one pass:
//! - the first tenth of the kernels run in `on_start`, the rest per frame;
//! - in the frame chain, every [`REPEAT_EVERY`]th kernel starts a `repeat`
//!   of [`REPEAT_BODY`] kernels (every other repeat has an `index` scalar
//!   that its first kernel reads, which keeps it from being looped);
//! - most kernels read and write only their own cell (they fuse), every
//!   [`STENCIL_EVERY`]th reads its neighbours (which ends a fused run);
//! - every [`SCRATCH_EVERY`]th kernel writes only a scratch field that no
//!   kernel reads (a dead store for `dead_store`, all but the frame's last);
//! - every kernel has its own scalars.
//!
//! [`chain_graph_fused`] leaves the stencils out: every frame kernel
//! outside a repeat then fuses into one long run.

use serde_json::{json, Value};

/// Fields the chain cycles through: kernel `i` writes `f{i % FIELDS}`.
pub const FIELDS: usize = 4;
/// One kernel in this many reads neighbouring cells.
pub const STENCIL_EVERY: usize = 7;
/// In the frame chain, a repeat starts at every this many kernels...
pub const REPEAT_EVERY: usize = 50;
/// ... and holds this many of them.
pub const REPEAT_BODY: usize = 5;
/// One kernel in this many writes only the scratch field.
pub const SCRATCH_EVERY: usize = 13;
/// Side of the square grid.
pub const SIDE: u32 = 32;

/// The kernel code of chain kernel `i` (writes `f{i % FIELDS}`, reads the
/// field kernel `i - 1` wrote).
fn code(i: usize, indexed: bool, stencils: bool) -> String {
    let dst = format!("f{}", i % FIELDS);
    let src = format!("f{}", (i + FIELDS - 1) % FIELDS);
    let t = if indexed { " + 0.001 * (t as f32)" } else { "" };
    if i % SCRATCH_EVERY == SCRATCH_EVERY - 1 {
        format!("fn kernel(i: i32, j: i32) {{\n    scratch[(i, j)] = a * {src}[(i, j)]{t};\n}}\n")
    } else if stencils && i % STENCIL_EVERY == STENCIL_EVERY - 1 {
        format!(
            "fn kernel(i: i32, j: i32) {{\n    let l = {src}[(max(i - 1, 0), j)];\n    let r = {src}[(min(i + 1, {m}), j)];\n    let d = {src}[(i, max(j - 1, 0))];\n    let u = {src}[(i, min(j + 1, {m}))];\n    {dst}[(i, j)] = a * {src}[(i, j)] + (1.0 - a) * 0.25 * (l + r + d + u){t};\n}}\n",
            m = SIDE - 1
        )
    } else {
        format!(
            "fn kernel(i: i32, j: i32) {{\n    let x = {src}[(i, j)];\n    {dst}[(i, j)] = a * x + b * {dst}[(i, j)]{t};\n}}\n"
        )
    }
}

/// The chain graph with `n` kernel nodes (see the module doc).
pub fn chain_graph(n: usize) -> Value {
    graph(n, true)
}

/// [`chain_graph`] without stencil kernels (long fused runs).
pub fn chain_graph_fused(n: usize) -> Value {
    graph(n, false)
}

fn graph(n: usize, stencils: bool) -> Value {
    let mut nodes = vec![json!({"id": "grid", "kind": "dense", "params": {"shape": [SIDE, SIDE]}})];
    let mut wires = vec![];
    nodes.push(json!({"id": "scratch", "kind": "field", "params": {"type": "f32", "init": 0}}));
    wires.push(json!({"from": "grid.cells", "to": "scratch.layout"}));
    for f in 0..FIELDS {
        nodes.push(json!({"id": format!("f{}", f), "kind": "field", "params": {"type": "f32", "init": f as f32 * 0.5}}));
        wires.push(json!({"from": "grid.cells", "to": format!("f{}.layout", f)}));
    }
    nodes.push(json!({"id": "start", "kind": "on_start"}));
    nodes.push(json!({"id": "frame", "kind": "on_frame"}));
    let mut exec = vec![];
    let on_start = n / 10;
    // The pin the next node of the chain hangs from.
    let mut from = "start.then".to_string();
    // When inside a repeat: (repeat id, kernels left in its body).
    let mut inside: Option<(String, usize)> = None;
    for i in 0..n {
        let id = format!("k{:05}", i);
        if i == on_start {
            from = "frame.then".into();
        }
        let frame_pos = i.wrapping_sub(on_start);
        let mut indexed = false;
        if i >= on_start && inside.is_none() && frame_pos % REPEAT_EVERY == 0 && i + 1 < n {
            let r = format!("r{:05}", i);
            let with_index = (frame_pos / REPEAT_EVERY) % 2 == 1;
            let mut params = json!({"count": 3});
            if with_index {
                params["index"] = json!("t");
                indexed = true;
            }
            nodes.push(json!({"id": r, "kind": "repeat", "params": params}));
            exec.push(json!({"from": from, "to": r}));
            from = format!("{}.body", r);
            inside = Some((r, REPEAT_BODY.min(n - i)));
        }
        let mut scalars = json!({"a": 0.5 + (i % 5) as f64 * 0.1, "b": 0.25});
        if indexed {
            scalars["t"] = json!(0);
        }
        let scratch = i % SCRATCH_EVERY == SCRATCH_EVERY - 1;
        let over = if scratch {
            "scratch".to_string()
        } else {
            format!("f{}", i % FIELDS)
        };
        if scratch {
            wires.push(json!({"from": "scratch.field", "to": format!("{}.scratch", id)}));
        }
        nodes.push(json!({"id": id, "kind": "kernel", "params": {"over": over, "code": code(i, indexed, stencils), "scalars": scalars}}));
        for f in 0..FIELDS {
            if (f == i % FIELDS && !scratch) || f == (i + FIELDS - 1) % FIELDS {
                wires
                    .push(json!({"from": format!("f{}.field", f), "to": format!("{}.f{}", id, f)}));
            }
        }
        exec.push(json!({"from": from, "to": id}));
        from = format!("{}.then", id);
        if let Some((r, left)) = inside.take() {
            if left > 1 {
                inside = Some((r, left - 1));
            } else {
                // The chain goes on after the repeat.
                from = format!("{}.then", r);
            }
        }
    }
    json!({
        "format": "weft-graph",
        "version": 1,
        "description": format!("{} kernels in one chain over {} fields (generated by tests/src/chain.rs).", n, FIELDS),
        "nodes": nodes,
        "wires": wires,
        "exec": exec,
    })
}
