//! Deterministic mutation fuzzer for graph loading, building, compiling and
//! (for small graphs) running one frame.
//!
//! Seeds are the example graphs in ../graphs and the bad-graph corpus in
//! tests/bad. Each mutant gets 1-3 structural mutations of its JSON value
//! (keys, values, nodes, ids, wires, kinds, shapes, kernel code) or one or two
//! byte-level mutations of its text. For every mutant:
//!
//! * nothing panics (parse, build, pass pipeline, codegen, run, render);
//! * every error is document-level (`Syntax` / `Document`) or names a node id
//!   that appears in the mutant (a node's id or a wire / exec endpoint), and
//!   errors from `build_program` or later always name a node;
//! * no case takes more than 10 s (a hang is reported with the mutant).
//!
//! Environment: `WEFT_FUZZ_SEED` (default fixed) and `WEFT_FUZZ_SCALE`
//! (multiplies the number of mutants, default 1) for longer local runs.
//! Failing mutants are written to `$CARGO_TARGET_TMPDIR/fuzz-failures/`.

use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};
use weft_ir::graph::{build_program, BuildOptions, GraphDoc, GraphError, GraphErrors};
use weft_ir::ir::layout::root_words;
use weft_ir::ir::{Program, Step};
use weft_runtime::{RuntimeError, SimOptions, Simulation};

const CASE_TIME_LIMIT: Duration = Duration::from_secs(10);
/// Run a frame only when the schedule's loop iterations (on_start + one frame) stay under this.
const MAX_RUN_ITERATIONS: u64 = 1_200_000;
/// Allocate field memory (Simulation::new) only up to this many words per root.
const MAX_ALLOC_WORDS: u64 = 1 << 20;
/// Frames actually run per example seed graph (they cost 0.1-0.4 s each in a debug build).
const MAX_RUNS_PER_EXAMPLE: usize = 12;

// ---------------------------------------------------------------- RNG

/// xorshift64* — small, deterministic, good enough for mutation choices.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

// ---------------------------------------------------------------- random JSON

const STRINGS: &[&str] = &[
    "",
    "x",
    "g",
    "k",
    "cells",
    "g.cells",
    "x.field",
    "f32",
    "vec2",
    "mat4",
    "dense",
    "kernel",
    "field",
    "on_frame",
    "repeat",
    "then",
    "body",
    "fn kernel(i: i32) {}",
    "fn kernel(i: i32, j: i32) { }",
    "weft-graph",
    "..",
    ".",
    "a.b.c",
    "é☃🦀",
    "\u{0}\u{1}",
    "   ",
    "9999999999999999999999",
    "nope.npy",
    "../graphs/mpm88_x0.npy",
    "/dev/zero",
    "/",
];

fn random_string(rng: &mut Rng) -> String {
    match rng.below(4) {
        0 => "z".repeat(rng.below(200) + 1),
        _ => rng.pick(STRINGS).to_string(),
    }
}

fn random_number(rng: &mut Rng) -> Value {
    match rng.below(16) {
        0 => json!(0),
        1 => json!(1),
        2 => json!(-1),
        3 => json!(2147483647),
        4 => json!(2147483648u64),
        5 => json!(-2147483649i64),
        6 => json!(u64::MAX),
        7 => json!(i64::MIN),
        8 => json!(1e300),
        9 => json!(-1e300),
        10 => json!(0.5),
        11 => json!(1e-45),
        12 => json!(1u64 << 30),
        13 => json!(1u64 << 31),
        14 => json!(1e12),
        _ => json!(rng.below(1000) as i64 - 500),
    }
}

fn random_value(rng: &mut Rng, depth: u32) -> Value {
    match rng.below(if depth > 2 { 6 } else { 9 }) {
        0 => Value::Null,
        1 => Value::Bool(rng.chance(50)),
        2 | 3 => random_number(rng),
        4 | 5 => Value::String(random_string(rng)),
        6 => Value::Array(vec![]),
        7 => Value::Array(
            (0..rng.below(5))
                .map(|_| random_value(rng, depth + 1))
                .collect(),
        ),
        _ => {
            let mut m = Map::new();
            for _ in 0..rng.below(4) {
                m.insert(random_string(rng), random_value(rng, depth + 1));
            }
            if rng.chance(30) {
                m.insert("npy".into(), Value::String(random_string(rng)));
            }
            Value::Object(m)
        }
    }
}

// ---------------------------------------------------------------- paths into a JSON value

#[derive(Clone, Debug)]
enum Seg {
    Key(String),
    Idx(usize),
}

fn all_paths(v: &Value, prefix: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                prefix.push(Seg::Key(k.clone()));
                out.push(prefix.clone());
                all_paths(c, prefix, out);
                prefix.pop();
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                prefix.push(Seg::Idx(i));
                out.push(prefix.clone());
                all_paths(c, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

fn get_mut<'a>(mut v: &'a mut Value, path: &[Seg]) -> Option<&'a mut Value> {
    for s in path {
        v = match (s, v) {
            (Seg::Key(k), Value::Object(m)) => m.get_mut(k)?,
            (Seg::Idx(i), Value::Array(a)) => a.get_mut(*i)?,
            _ => return None,
        };
    }
    Some(v)
}

/// Removes the value at `path` from its parent object or array.
fn remove_at(v: &mut Value, path: &[Seg]) {
    let Some((last, parent)) = path.split_last() else {
        return;
    };
    match (last, get_mut(v, parent)) {
        (Seg::Key(k), Some(Value::Object(m))) => {
            m.shift_remove(k);
        }
        (Seg::Idx(i), Some(Value::Array(a))) if *i < a.len() => {
            a.remove(*i);
        }
        _ => {}
    }
}

// ---------------------------------------------------------------- structural mutations

fn nodes_mut(v: &mut Value) -> Option<&mut Vec<Value>> {
    v.get_mut("nodes")?.as_array_mut()
}

fn node_ids(v: &Value) -> Vec<String> {
    v.get("nodes")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|n| n.get("id")?.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

const PORTS: &[&str] = &[
    "cells",
    "parent",
    "layout",
    "field",
    "positions",
    "color",
    "count",
    "loss",
    "then",
    "body",
    "x",
    "v",
    "T",
    "alive",
    "pixels",
    "",
    "nope",
    "cells.extra",
];
const KINDS: &[&str] = &[
    "dense",
    "field",
    "kernel",
    "on_start",
    "on_frame",
    "repeat",
    "image",
    "particles",
    "plot",
    "Dense",
    "",
    "kernel ",
];
const TOKENS: &[&str] = &[
    "i",
    "j",
    "p",
    "x",
    "v",
    "0",
    "1",
    "-1",
    "0.5",
    "1e40",
    "2147483647",
    "4294967296",
    "3u32",
    "1.0f64",
    "true",
    "+",
    "-",
    "*",
    "/",
    "%",
    "<<",
    ">>",
    "&&",
    "||",
    "==",
    "=",
    "+=",
    "!",
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    ";",
    ",",
    ".",
    "..",
    "..=",
    ":",
    "->",
    "let",
    "mut",
    "fn",
    "kernel",
    "if",
    "else",
    "for",
    "in",
    "return",
    "break",
    "continue",
    "as",
    "f32",
    "i32",
    "u32",
    "bool",
    "vec2",
    "vec3",
    "ivec2",
    "mat2",
    "mat4",
    "bvec2",
    "sqrt",
    "max",
    "select",
    "length",
    "atomic_add",
    "atomic_max",
    "frame()",
    "random()",
    "bitcast::<u32>",
    ".x",
    ".xy",
    ".w",
    "[0]",
    "[9]",
    "(i, j)",
    "(i, j, 0)",
    "self",
    "&",
    "loop",
    "while",
];

fn mutate_code(rng: &mut Rng, code: &str) -> String {
    let mut chars: Vec<char> = code.chars().collect();
    match rng.below(7) {
        0 if !chars.is_empty() => {
            let at = rng.below(chars.len());
            let n = (rng.below(6) + 1).min(chars.len() - at);
            chars.drain(at..at + n);
        }
        1 => {
            const CH: &[char] = &[
                '(', ')', '{', '}', '[', ']', ';', ',', '.', '+', '-', '*', '/', '<', '>', '=',
                '!', '&', '|', '^', '%', ':', '\'', '"', '#', '@', '$', '\\', ' ', '\n', '0', '9',
                'a', 'x', '_', 'é', '\u{0}',
            ];
            let at = rng.below(chars.len() + 1);
            chars.insert(at, *rng.pick(CH));
        }
        2 if !chars.is_empty() => {
            let at = rng.below(chars.len());
            chars[at] = char::from_u32(rng.below(0x80) as u32).unwrap_or('?');
        }
        _ => {
            // Token-level: split into identifier/number runs and single other chars.
            let mut toks: Vec<String> = Vec::new();
            for c in chars.iter().copied() {
                let word = c.is_alphanumeric() || c == '_';
                match toks.last_mut() {
                    Some(t) if word && t.chars().all(|c| c.is_alphanumeric() || c == '_') => {
                        t.push(c)
                    }
                    _ => toks.push(c.to_string()),
                }
            }
            let real: Vec<usize> = (0..toks.len())
                .filter(|&i| !toks[i].trim().is_empty())
                .collect();
            if real.is_empty() {
                return TOKENS[rng.below(TOKENS.len())].to_string();
            }
            let i = *rng.pick(&real);
            match rng.below(4) {
                0 => {
                    toks.remove(i);
                }
                1 => {
                    let t = toks[i].clone();
                    toks.insert(i, t);
                }
                2 => {
                    let j = *rng.pick(&real);
                    toks.swap(i, j);
                }
                _ => toks[i] = rng.pick(TOKENS).to_string(),
            }
            return toks.concat();
        }
    }
    chars.into_iter().collect()
}

/// One structural mutation; returns its description.
fn mutate_value(rng: &mut Rng, v: &mut Value, gentle: bool) -> String {
    let ids = node_ids(v);
    for _attempt in 0..8 {
        // Gentle mutations keep the document mostly valid so that more mutants
        // reach the kernel front end, the passes, codegen and the interpreter.
        let choice = if gentle {
            *rng.pick(&[15, 15, 15, 15, 16, 16, 11, 5, 17, 18, 19])
        } else {
            rng.below(20)
        };
        match choice {
            17 => match mutate_group(rng, v, gentle) {
                Some(d) => return d,
                None => continue,
            },
            18 => match mutate_asset(rng, v) {
                Some(d) => return d,
                None => continue,
            },
            19 => match mutate_expression(rng, v) {
                Some(d) => return d,
                None => continue,
            },
            0 => {
                let mut paths = Vec::new();
                all_paths(v, &mut Vec::new(), &mut paths);
                if paths.is_empty() {
                    continue;
                }
                let p = rng.pick(&paths).clone();
                remove_at(v, &p);
                return format!("delete {:?}", p);
            }
            1 | 2 => {
                let mut paths = Vec::new();
                all_paths(v, &mut Vec::new(), &mut paths);
                let new = random_value(rng, 0);
                if paths.is_empty() || rng.chance(3) {
                    *v = new;
                    return "replace the whole document".into();
                }
                let p = rng.pick(&paths).clone();
                let d = format!("replace {:?} with {}", p, new);
                if let Some(slot) = get_mut(v, &p) {
                    *slot = new;
                }
                return d;
            }
            3 => {
                let Some(nodes) = nodes_mut(v) else { continue };
                if nodes.is_empty() {
                    continue;
                }
                let i = rng.below(nodes.len());
                let n = nodes[i].clone();
                nodes.insert(rng.below(nodes.len() + 1), n);
                return format!("duplicate node #{}", i);
            }
            4 => {
                let Some(nodes) = nodes_mut(v) else { continue };
                if nodes.len() < 2 {
                    continue;
                }
                let (a, b) = (rng.below(nodes.len()), rng.below(nodes.len()));
                let ia = nodes[a].get("id").cloned();
                let ib = nodes[b].get("id").cloned();
                if let (Some(ia), Some(ib)) = (ia, ib) {
                    nodes[a]["id"] = ib;
                    nodes[b]["id"] = ia;
                    return format!("swap ids of nodes #{} and #{}", a, b);
                }
            }
            5 | 6 => {
                let which = if rng.chance(60) { "wires" } else { "exec" };
                let Some(ws) = v.get_mut(which).and_then(Value::as_array_mut) else {
                    continue;
                };
                if ws.is_empty() {
                    continue;
                }
                let i = rng.below(ws.len());
                let end = if rng.chance(50) { "from" } else { "to" };
                let Some(s) = ws[i].get(end).and_then(Value::as_str).map(str::to_string) else {
                    continue;
                };
                let node = s.split('.').next().unwrap_or("").to_string();
                let new = if rng.chance(20) {
                    node.clone()
                } else {
                    format!("{}.{}", node, rng.pick(PORTS))
                };
                ws[i][end] = Value::String(new.clone());
                return format!("{}[{}].{}: {} -> {}", which, i, end, s, new);
            }
            7 => {
                let which = if rng.chance(60) { "wires" } else { "exec" };
                let Some(ws) = v.get_mut(which).and_then(Value::as_array_mut) else {
                    continue;
                };
                if ws.is_empty() {
                    continue;
                }
                let i = rng.below(ws.len());
                ws.remove(i);
                return format!("drop {}[{}]", which, i);
            }
            8 | 9 => {
                let which = if rng.chance(60) { "wires" } else { "exec" };
                let end = |rng: &mut Rng| -> String {
                    let n = if ids.is_empty() || rng.chance(10) {
                        random_string(rng)
                    } else {
                        rng.pick(&ids).clone()
                    };
                    if rng.chance(15) {
                        n
                    } else {
                        format!("{}.{}", n, rng.pick(PORTS))
                    }
                };
                let w = json!({"from": end(rng), "to": end(rng)});
                let d = format!("add {} {}", which, w);
                match v.get_mut(which) {
                    Some(Value::Array(ws)) => ws.push(w),
                    Some(_) => continue,
                    None => {
                        if let Some(m) = v.as_object_mut() {
                            m.insert(which.into(), Value::Array(vec![w]));
                        } else {
                            continue;
                        }
                    }
                }
                return d;
            }
            10 => {
                let Some(nodes) = nodes_mut(v) else { continue };
                if nodes.is_empty() {
                    continue;
                }
                let i = rng.below(nodes.len());
                let k = rng.pick(KINDS);
                let Some(n) = nodes[i].as_object_mut() else {
                    continue;
                };
                n.insert("kind".into(), json!(k));
                return format!("node #{} kind -> {:?}", i, k);
            }
            11 => {
                // A shape (or range) entry.
                let Some(nodes) = nodes_mut(v) else { continue };
                let mut spots = Vec::new();
                for (i, n) in nodes.iter().enumerate() {
                    for key in ["shape", "range"] {
                        if let Some(a) = n
                            .get("params")
                            .and_then(|p| p.get(key))
                            .and_then(Value::as_array)
                        {
                            for j in 0..a.len() {
                                spots.push((i, key, j));
                            }
                        }
                    }
                }
                if spots.is_empty() {
                    continue;
                }
                let (i, key, j) = *rng.pick(&spots);
                let new = match rng.below(8) {
                    0 => json!(0),
                    1 => json!(-1),
                    2 => json!(1u64 << 31),
                    3 => json!(1e12),
                    4 => json!(1u64 << 30),
                    5 => json!(1),
                    6 => json!(65536),
                    _ => json!(3),
                };
                let d = format!("node #{} {}[{}] -> {}", i, key, j, new);
                nodes[i]["params"][key][j] = new;
                if rng.chance(15) {
                    if let Some(a) = nodes[i]["params"][key].as_array_mut() {
                        a.push(json!(2));
                    }
                }
                return d;
            }
            16 => {
                // A parameter value (or a scalar's value).
                let Some(nodes) = nodes_mut(v) else { continue };
                let mut spots = Vec::new();
                for (i, n) in nodes.iter().enumerate() {
                    if let Some(p) = n.get("params").and_then(Value::as_object) {
                        for (k, pv) in p {
                            if k != "code" {
                                spots.push((i, k.clone(), None));
                            }
                            if let Some(sc) = pv.as_object().filter(|_| k == "scalars") {
                                for name in sc.keys() {
                                    spots.push((i, k.clone(), Some(name.clone())));
                                }
                            }
                        }
                    }
                }
                if spots.is_empty() {
                    continue;
                }
                let (i, k, sub) = rng.pick(&spots).clone();
                let new = if rng.chance(60) {
                    random_number(rng)
                } else {
                    random_value(rng, 1)
                };
                let d = format!(
                    "node #{} param {}{} -> {}",
                    i,
                    k,
                    sub.as_ref().map(|s| format!(".{}", s)).unwrap_or_default(),
                    new
                );
                match sub {
                    Some(name) => nodes[i]["params"][k.as_str()][name.as_str()] = new,
                    None => nodes[i]["params"][k.as_str()] = new,
                }
                return d;
            }
            _ => {
                // Kernel code.
                let Some(nodes) = nodes_mut(v) else { continue };
                let kernels: Vec<usize> = (0..nodes.len())
                    .filter(|&i| {
                        nodes[i]
                            .get("params")
                            .and_then(|p| p.get("code"))
                            .is_some_and(Value::is_string)
                    })
                    .collect();
                if kernels.is_empty() {
                    continue;
                }
                let i = *rng.pick(&kernels);
                let code = nodes[i]["params"]["code"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                let mut new = code.clone();
                for _ in 0..rng.below(3) + 1 {
                    new = mutate_code(rng, &new);
                }
                nodes[i]["params"]["code"] = Value::String(new);
                return format!("mutate code of node #{}", i);
            }
        }
    }
    "no-op".into()
}

/// Paths (into `v`) of every inline group body, nested ones included.
fn group_bodies(v: &Value, prefix: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
    let Some(nodes) = v.get("nodes").and_then(Value::as_array) else {
        return;
    };
    for (i, n) in nodes.iter().enumerate() {
        if let Some(body) = n.get("group").filter(|b| b.is_object()) {
            prefix.extend([
                Seg::Key("nodes".into()),
                Seg::Idx(i),
                Seg::Key("group".into()),
            ]);
            out.push(prefix.clone());
            group_bodies(body, prefix, out);
            prefix.truncate(prefix.len() - 3);
        }
    }
}

/// A mutation inside a group: its body (any mutation, as of a document:
/// a body has `nodes`, `wires` and `exec` too) or its interface (ports,
/// promoted parameters, bypass).
fn mutate_group(rng: &mut Rng, v: &mut Value, gentle: bool) -> Option<String> {
    let mut bodies = Vec::new();
    group_bodies(v, &mut Vec::new(), &mut bodies);
    if bodies.is_empty() {
        return None;
    }
    let p = rng.pick(&bodies).clone();
    let body = get_mut(v, &p)?;
    let inner = node_ids(body);
    let pin = |rng: &mut Rng| -> String {
        if inner.is_empty() || rng.chance(15) {
            random_string(rng)
        } else if rng.chance(20) {
            rng.pick(&inner).clone()
        } else {
            format!("{}.{}", rng.pick(&inner), rng.pick(PORTS))
        }
    };
    let d = match rng.below(6) {
        0 | 1 => format!("in group {:?}: {}", p, mutate_value(rng, body, gentle)),
        2 => {
            let which = if rng.chance(50) { "inputs" } else { "outputs" };
            let ports = body.get_mut(which)?.as_array_mut()?;
            if ports.is_empty() || rng.chance(20) {
                let ty = *rng.pick(&["field", "layout", "exec", "bogus"]);
                ports.push(json!({"name": random_string(rng), "type": ty, "to": [pin(rng)], "from": pin(rng)}));
                format!("group {:?}: add a port to {}", p, which)
            } else {
                let i = rng.below(ports.len());
                let key = *rng.pick(&["name", "type", "to", "from"]);
                let new = match key {
                    "to" => json!([pin(rng), pin(rng)]),
                    "from" => json!(pin(rng)),
                    "type" => json!(*rng.pick(&["field", "layout", "exec", "bogus"])),
                    _ => json!(random_string(rng)),
                };
                ports[i][key] = new.clone();
                format!("group {:?}: {}[{}].{} -> {}", p, which, i, key, new)
            }
        }
        3 => {
            let params = body.get_mut("params")?.as_array_mut()?;
            if params.is_empty() || rng.chance(30) {
                params.push(json!({"name": random_string(rng), "target": format!("{}.{}", pin(rng), random_string(rng)), "default": random_number(rng)}));
                format!("group {:?}: add a promoted parameter", p)
            } else {
                let i = rng.below(params.len());
                let key = *rng.pick(&["name", "target", "default", "min"]);
                let new = match key {
                    "target" => json!(format!(
                        "{}.{}",
                        pin(rng),
                        rng.pick(&["alpha", "count", "code", "x"])
                    )),
                    "name" => json!(random_string(rng)),
                    _ => random_value(rng, 1),
                };
                params[i][key] = new.clone();
                format!("group {:?}: params[{}].{} -> {}", p, i, key, new)
            }
        }
        _ => {
            // The group node itself: bypass, or a promoted value.
            let node = get_mut(v, &p[..p.len() - 1])?;
            if rng.chance(50) {
                node["bypass"] = json!(rng.chance(80));
                format!(
                    "group node {:?}: bypass -> {}",
                    &p[..p.len() - 1],
                    node["bypass"]
                )
            } else {
                let names: Vec<String> = node["group"]["params"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|x| x["name"].as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                let name = if names.is_empty() || rng.chance(20) {
                    random_string(rng)
                } else {
                    rng.pick(&names).clone()
                };
                let new = if rng.chance(30) {
                    random_expression(rng, &inner)
                } else {
                    random_number(rng)
                };
                if !node["params"].is_object() {
                    node["params"] = json!({});
                }
                node["params"][name.as_str()] = new.clone();
                format!(
                    "group node {:?}: params.{} -> {}",
                    &p[..p.len() - 1],
                    name,
                    new
                )
            }
        }
    };
    Some(d)
}

/// The shipped assets' names (assets/NAME.vN.json).
fn asset_names() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets");
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| {
                let n = e.ok()?.file_name().to_string_lossy().to_string();
                Some(n.strip_suffix(".json")?.split_once(".v")?.0.to_string())
            })
            .collect()
        })
        .unwrap_or_default();
    out.sort();
    out.dedup();
    out
}

/// A mutation of an asset reference: another or an unknown name, a version
/// the library lacks, both a body and an asset, an asset on a non-group.
fn mutate_asset(rng: &mut Rng, v: &mut Value) -> Option<String> {
    let names = asset_names();
    let nodes = nodes_mut(v)?;
    if nodes.is_empty() {
        return None;
    }
    let with: Vec<usize> = (0..nodes.len())
        .filter(|&i| nodes[i].get("asset").is_some())
        .collect();
    let i = if with.is_empty() || rng.chance(20) {
        rng.below(nodes.len())
    } else {
        *rng.pick(&with)
    };
    let n = nodes[i].as_object_mut()?;
    let name = if names.is_empty() || rng.chance(20) {
        random_string(rng)
    } else {
        rng.pick(&names).clone()
    };
    let version = match rng.below(6) {
        0 => json!(0),
        1 => json!(2),
        2 => json!(99),
        3 => json!(-1),
        4 => json!("1"),
        _ => json!(1),
    };
    let d = match rng.below(4) {
        0 => {
            n.remove("asset");
            format!("node #{}: drop asset", i)
        }
        1 => {
            n.insert("asset".into(), json!({"name": name, "version": version}));
            if rng.chance(50) {
                n.insert("kind".into(), json!("group"));
            }
            format!("node #{}: asset -> {} v{}", i, name, version)
        }
        2 => {
            let a = n.entry("asset").or_insert(json!({}));
            a["version"] = version.clone();
            format!("node #{}: asset version -> {}", i, version)
        }
        _ => {
            n.insert("asset".into(), json!({"name": name, "version": 1}));
            n.insert("group".into(), json!({"nodes": []}));
            format!("node #{}: both a group body and asset {}", i, name)
        }
    };
    Some(d)
}

/// An expression parameter (`graph::refs`): references to real and
/// missing nodes and parameters, itself (a cycle), `frame`, bad syntax.
fn random_expression(rng: &mut Rng, ids: &[String]) -> Value {
    let id = |rng: &mut Rng| {
        if ids.is_empty() || rng.chance(15) {
            random_string(rng)
        } else {
            rng.pick(ids).clone()
        }
    };
    let param = |rng: &mut Rng| {
        rng.pick(&[
            "alpha", "count", "min", "max", "shape", "code", "nope", "scalars",
        ])
        .to_string()
    };
    let e = match rng.below(10) {
        0 => format!("= ch('{}.{}') * 2", id(rng), param(rng)),
        1 => "= frame * 0.1".to_string(),
        2 => format!("= ch(\"{}.{}\") + frame", id(rng), param(rng)),
        3 => "=".to_string(),
        4 => "= (1 +".to_string(),
        5 => "= 1 / 0".to_string(),
        6 => format!("= ch('{}')", id(rng)),
        7 => "= sin(frame) * 1e300".to_string(),
        8 => format!(
            "= ch('{}.{}') + ch('{}.{}')",
            id(rng),
            param(rng),
            id(rng),
            param(rng)
        ),
        _ => format!("  = {}", random_number(rng)),
    };
    json!(e)
}

/// Sets a parameter or a kernel scalar to an expression.
fn mutate_expression(rng: &mut Rng, v: &mut Value) -> Option<String> {
    let ids = node_ids(v);
    let nodes = nodes_mut(v)?;
    if nodes.is_empty() {
        return None;
    }
    let i = rng.below(nodes.len());
    let e = random_expression(rng, &ids);
    let n = nodes[i].as_object_mut()?;
    let params = n.entry("params").or_insert(json!({}));
    let p = params.as_object_mut()?;
    let scalars: Vec<String> = p
        .get("scalars")
        .and_then(Value::as_object)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    if !scalars.is_empty() && rng.chance(60) {
        let name = rng.pick(&scalars).clone();
        let slot = &mut p["scalars"][name.as_str()];
        if slot.is_object() && rng.chance(50) {
            slot["default"] = e.clone();
        } else {
            *slot = e.clone();
        }
        return Some(format!("node #{} scalar {} -> {}", i, name, e));
    }
    let keys: Vec<String> = p.keys().filter(|k| *k != "code").cloned().collect();
    let key = if keys.is_empty() || rng.chance(15) {
        random_string(rng)
    } else {
        rng.pick(&keys).clone()
    };
    p.insert(key.clone(), e.clone());
    Some(format!("node #{} param {} -> {}", i, key, e))
}

fn mutate_bytes(rng: &mut Rng, text: &str) -> (String, String) {
    let mut b = text.as_bytes().to_vec();
    let d = match rng.below(5) {
        0 => {
            let n = rng.below(b.len() + 1);
            b.truncate(n);
            format!("truncate to {} bytes", n)
        }
        1 if !b.is_empty() => {
            let i = rng.below(b.len());
            b[i] ^= (rng.below(255) + 1) as u8;
            format!("flip byte {}", i)
        }
        2 => {
            let i = rng.below(b.len() + 1);
            let g: Vec<u8> = (0..rng.below(8) + 1).map(|_| rng.next() as u8).collect();
            b.splice(i..i, g.iter().copied());
            format!("insert {:?} at {}", g, i)
        }
        3 if !b.is_empty() => {
            let i = rng.below(b.len());
            let n = (rng.below(40) + 1).min(b.len() - i);
            b.drain(i..i + n);
            format!("delete {} bytes at {}", n, i)
        }
        _ => {
            let i = rng.below(b.len() + 1);
            let g = [b"[", b"{", b"]", b"}", b",", b":", b"\"", b"\\"][rng.below(8)];
            b.splice(i..i, g.iter().copied());
            format!("insert {:?} at {}", String::from_utf8_lossy(g), i)
        }
    };
    (String::from_utf8_lossy(&b).into_owned(), d)
}

// ---------------------------------------------------------------- running one case

struct Seed {
    name: String,
    text: String,
    base_dir: PathBuf,
    /// Big graphs (mpm88) are built and compiled but never run.
    runnable: bool,
    example: bool,
    codes: HashSet<String>,
}

struct Mutant {
    label: String,
    text: String,
    base_dir: PathBuf,
    allow_run: bool,
    codes: HashSet<String>,
    /// Mutants of small seeds (a few dozen cells) may run code with small `for` loops.
    small: bool,
}

#[derive(Default, Debug)]
struct Outcome {
    parsed: bool,
    built: bool,
    compiled: bool,
    ran: bool,
    /// Problems with the product's behaviour.
    problems: Vec<String>,
    first_error: Option<String>,
}

/// Node ids a blamed error may name: node ids and wire / exec endpoint nodes of the mutant.
fn known_ids(text: &str) -> HashSet<String> {
    let mut out = HashSet::new();
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        return out;
    };
    out.extend(node_ids(&v));
    // A group node's inner nodes are named by their path (`g2p/k`): the
    // group is in the graph, its body (inline or an asset's) is its own.
    if let Some(nodes) = v.get("nodes").and_then(Value::as_array) {
        for n in nodes {
            if n.get("kind").and_then(Value::as_str) == Some("group") {
                if let Some(id) = n.get("id").and_then(Value::as_str) {
                    out.insert(format!("{}/*", id));
                }
            }
        }
    }
    for key in ["wires", "exec"] {
        if let Some(ws) = v.get(key).and_then(Value::as_array) {
            for w in ws {
                for end in ["from", "to"] {
                    if let Some(s) = w.get(end).and_then(Value::as_str) {
                        out.insert(s.split_once('.').map(|x| x.0).unwrap_or(s).to_string());
                        out.insert(s.to_string());
                    }
                }
            }
        }
    }
    out
}

/// Whether `id` names a node of the graph, or one inside a group node of it.
fn is_known(known: &HashSet<String>, id: &str) -> bool {
    known.contains(id)
        || id
            .split_once('/')
            .is_some_and(|(g, _)| known.contains(&format!("{}/*", g)))
}

fn check_errors(
    stage: &str,
    errs: &GraphErrors,
    known: &HashSet<String>,
    must_name_node: bool,
    out: &mut Outcome,
) {
    if errs.0.is_empty() {
        out.problems
            .push(format!("{}: failed with an empty error list", stage));
    }
    out.first_error
        .get_or_insert_with(|| errs.0.first().map(|e| e.to_string()).unwrap_or_default());
    for e in &errs.0 {
        match (e, e.node()) {
            (GraphError::Syntax { line, col, .. }, _) => {
                if must_name_node {
                    out.problems
                        .push(format!("{}: JSON syntax error after parsing: {}", stage, e));
                } else if *line == 0 || *col == 0 {
                    out.problems
                        .push(format!("{}: syntax error without line:col: {}", stage, e));
                }
            }
            (GraphError::Document { .. }, _) if must_name_node => out
                .problems
                .push(format!("{}: error names no node: {}", stage, e)),
            (_, Some(id)) if !is_known(known, id) => out.problems.push(format!(
                "{}: error names node '{}' which is not in the graph: {}",
                stage, id, e
            )),
            (GraphError::Code { line, col, .. }, _) if *line == 0 || *col == 0 => out
                .problems
                .push(format!("{}: code error without line:col: {}", stage, e)),
            _ => {}
        }
    }
}

fn check_runtime(stage: &str, e: &RuntimeError, known: &HashSet<String>, out: &mut Outcome) {
    out.first_error.get_or_insert_with(|| e.to_string());
    match e {
        RuntimeError::Graph(g) => check_errors(stage, g, known, true, out),
        RuntimeError::Compile { node, .. }
        | RuntimeError::Kernel { node, .. }
        | RuntimeError::Run { node, .. } => {
            if !is_known(known, node) {
                out.problems.push(format!(
                    "{}: error names node '{}' which is not in the graph: {}",
                    stage, node, e
                ));
            }
        }
        RuntimeError::Io(_) => out
            .problems
            .push(format!("{}: unexpected I/O error: {}", stage, e)),
        RuntimeError::Device(_) | RuntimeError::Unavailable(_) => out
            .problems
            .push(format!("{}: unexpected device error: {}", stage, e)),
    }
}

/// Loop iterations of on_start plus one frame (saturating).
fn schedule_work(p: &Program) -> u64 {
    fn steps(p: &Program, s: &[Step]) -> u64 {
        s.iter().fold(0u64, |acc, st| {
            acc.saturating_add(match st {
                Step::Launch(k) => p.kernels[*k]
                    .iteration_shape(p)
                    .iter()
                    .fold(1u64, |a, &x| a.saturating_mul(x as u64)),
                Step::Repeat { count, body, .. } => steps(p, body).saturating_mul(*count as u64),
                Step::Tape { body, .. } => steps(p, body),
                Step::Optimize { spec, body, .. } => {
                    steps(p, body).saturating_mul(spec.iterations as u64)
                }
                Step::Clear { .. } | Step::ListGen { .. } => 0,
            })
        })
    }
    steps(p, &p.schedule.on_start).saturating_add(steps(p, &p.schedule.on_frame))
}

fn kernel_codes(v: &Value) -> Vec<String> {
    v.get("nodes")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|n| n.get("params")?.get("code")?.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Mutated code may loop forever (the interpreter has no watchdog, by design),
/// so only run code that is unchanged, or has no `while` / `loop` and either
/// no `for` or (for the small seeds) only small integer literals.
fn code_may_run(m: &Mutant, v: &Value) -> bool {
    let small_literals = |c: &str| {
        c.split(|ch: char| !ch.is_ascii_digit())
            .filter(|d| !d.is_empty())
            .all(|d| d.parse::<u64>().is_ok_and(|n| n <= 64))
    };
    kernel_codes(v).iter().all(|c| {
        m.codes.contains(c)
            || !(c.contains("while")
                || c.contains("loop")
                || (c.contains("for") && !(m.small && small_literals(c))))
    })
}

fn run_case(m: &Mutant, may_run: bool) -> Outcome {
    let mut out = Outcome::default();
    let known = known_ids(&m.text);
    let doc = match GraphDoc::parse(&m.text) {
        Ok(d) => d,
        Err(e) => {
            check_errors("parse", &e, &known, false, &mut out);
            return out;
        }
    };
    out.parsed = true;
    // A parsed document round-trips through its own serializer.
    if let Err(e) = GraphDoc::parse(&doc.to_json()) {
        out.problems.push(format!(
            "the parsed document does not re-parse after to_json: {}",
            e
        ));
    }
    let mut program = match build_program(
        &doc,
        &BuildOptions {
            base_dir: m.base_dir.clone(),
        },
    ) {
        Ok(p) => p,
        Err(e) => {
            check_errors("build", &e, &known, true, &mut out);
            return out;
        }
    };
    out.built = true;
    let max_root = program
        .roots()
        .map(|r| root_words(&program, r))
        .max()
        .unwrap_or(0);
    if max_root > MAX_ALLOC_WORDS {
        // Compile without allocating field memory (which could be up to 1 GiB).
        if let Err(e) =
            weft_ir::passes::run_pipeline(&mut program, &SimOptions::default().passes, None)
        {
            check_runtime(
                "passes",
                &RuntimeError::Compile {
                    node: e.kernel.clone(),
                    message: e.to_string(),
                },
                &known,
                &mut out,
            );
            return out;
        }
        for (_, k) in program.kernels.iter() {
            if let Err(e) = weft_codegen::vm::compile_kernel(&program, k) {
                check_runtime(
                    "codegen",
                    &RuntimeError::Compile {
                        node: e.kernel.clone(),
                        message: e.to_string(),
                    },
                    &known,
                    &mut out,
                );
                return out;
            }
        }
        out.compiled = true;
        return out;
    }
    let work = schedule_work(&program);
    let value: Value = serde_json::from_str(&m.text).unwrap_or(Value::Null);
    let run = may_run && m.allow_run && work <= MAX_RUN_ITERATIONS && code_may_run(m, &value);
    let opts = SimOptions {
        backend: weft_tests::backend_under_test(),
        ..Default::default()
    };
    let mut sim = match Simulation::new(program, &opts) {
        Ok(s) => s,
        Err(e) => {
            check_runtime("compile", &e, &known, &mut out);
            return out;
        }
    };
    out.compiled = true;
    if !run {
        return out;
    }
    out.ran = true;
    if let Err(e) = sim.step_frame() {
        check_runtime("frame", &e, &known, &mut out);
        return out;
    }
    for (id, img) in sim.render_views().unwrap() {
        let _ = (id, img);
    }
    out
}

// ---------------------------------------------------------------- panic capture

static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

/// Panics in fuzz case threads (and the rayon workers they use) are recorded
/// quietly; a panic on the test's own thread is printed as usual.
fn install_quiet_panic_hook() {
    let default = std::panic::take_hook();
    let test_thread = std::thread::current().id();
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current().id() == test_thread {
            return default(info);
        }
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| info.payload().downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        let loc = info
            .location()
            .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
            .unwrap_or_default();
        *LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("{} at {}", msg, loc));
    }));
}

enum CaseResult {
    Done(Outcome),
    Panicked(String),
    TimedOut,
}

fn run_guarded(m: &Mutant, may_run: bool) -> (CaseResult, Duration) {
    let (tx, rx) = mpsc::channel();
    let label = m.label.clone();
    let mc = Mutant {
        label: m.label.clone(),
        text: m.text.clone(),
        base_dir: m.base_dir.clone(),
        allow_run: m.allow_run,
        codes: m.codes.clone(),
        small: m.small,
    };
    let t = Instant::now();
    std::thread::Builder::new()
        .name(format!("fuzz {}", label))
        .stack_size(64 << 20)
        .spawn(move || {
            let r =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_case(&mc, may_run)));
            let _ = tx.send(match r {
                Ok(o) => CaseResult::Done(o),
                Err(_) => CaseResult::Panicked(
                    LAST_PANIC
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .take()
                        .unwrap_or_else(|| "unknown panic".into()),
                ),
            });
        })
        .expect("spawn fuzz thread");
    match rx.recv_timeout(CASE_TIME_LIMIT) {
        Ok(r) => (r, t.elapsed()),
        Err(_) => (CaseResult::TimedOut, t.elapsed()),
    }
}

// ---------------------------------------------------------------- the test

/// A small graph that uses most of the kernel language (helpers, vectors,
/// matrices, swizzles, casts, loops, atomics, random(), frame(), scalars),
/// nested layouts and every view kind, so that mutants of it are cheap to run.
const KITCHEN_SINK: &str = r#"{
  "format": "weft-graph",
  "version": 1,
  "description": "fuzz seed",
  "seed": 7,
  "nodes": [
    { "id": "pts", "kind": "dense", "params": { "shape": [16] } },
    { "id": "p", "kind": "field", "params": { "type": "vec2", "init": [0.5, 0.5] } },
    { "id": "vel", "kind": "field", "params": { "type": "vec2" } },
    { "id": "m", "kind": "field", "params": { "type": "mat2" } },
    { "id": "cnt", "kind": "field", "params": { "type": "i32", "init": 2 } },
    { "id": "col", "kind": "field", "params": { "type": "u32" } },
    { "id": "w", "kind": "field", "params": { "type": "f32" } },
    { "id": "grid", "kind": "dense", "params": { "shape": [4, 4] } },
    { "id": "acc", "kind": "field", "params": { "type": "i32" } },
    { "id": "blk", "kind": "dense", "params": { "shape": [2, 2] } },
    { "id": "h", "kind": "field", "params": { "type": "f32" } },
    { "id": "gv", "kind": "field", "params": { "type": "vec3" } },
    { "id": "start", "kind": "on_start" },
    { "id": "init", "kind": "kernel", "params": { "over": "p", "code": "fn kernel(i: i32) {\n    let r = random();\n    p[i] = vec2(r, fract(r * 7.0));\n    vel[i] = vec2(0.0, -1.0) * 0.01;\n    m[i] = mat2(1.0);\n    cnt[i] = i % 3;\n    col[i] = (i as u32) * 4096u32 + 255u32;\n}\n" } },
    { "id": "frame", "kind": "on_frame" },
    { "id": "clear", "kind": "kernel", "params": { "range": [4, 4], "code": "fn kernel(i: i32, j: i32) {\n    acc[(i, j)] = 0;\n}\n" } },
    { "id": "sub", "kind": "repeat", "params": { "count": 3 } },
    { "id": "step", "kind": "kernel", "params": { "over": "p", "scalars": { "dt": 0.5, "n": { "type": "i32", "default": 3 } }, "code": "fn rot(a: f32) -> mat2 {\n    mat2(cos(a), sin(a), -sin(a), cos(a))\n}\n\nfn kernel(i: i32) {\n    let mut x = p[i];\n    let v = rot(0.1) * vel[i] * dt;\n    x = x + v;\n    for k in 0..3 {\n        if k == 1 {\n            continue;\n        }\n        x.y = clamp(x.y + 0.001 * k as f32, 0.0, 1.0);\n    }\n    p[i] = x;\n    m[i] = m[i] * transpose(rot(0.01)) + outer(v, v);\n    w[i] = length(x) + determinant(m[i]) + dot(x, v);\n    let cell = clamp((x * 4.0) as ivec2, ivec2(0, 0), ivec2(3, 3));\n    let old = atomic_add(acc[cell], 1);\n    cnt[i] += select(x.x > 0.5 && old < n, 1, -1);\n}\n" } },
    { "id": "paint", "kind": "kernel", "params": { "over": "h", "code": "fn kernel(i: i32, j: i32) {\n    let c = acc[(i / 2, j / 2)];\n    let t = frame() as f32 * 0.1;\n    h[(i, j)] = smoothstep(0.0, 4.0, c as f32) + sin(t + i as f32) * 0.1;\n    gv[(i, j)] = normalize(vec3(1.0, i as f32, j as f32 + 1.0)).zyx;\n}\n" } },
    { "id": "heat", "kind": "image", "params": { "colormap": "magma" } },
    { "id": "rgb", "kind": "image" },
    { "id": "dots", "kind": "particles", "params": { "width": 32, "height": 32, "radius": 2.0 } },
    { "id": "chart", "kind": "plot", "params": { "width": 24, "height": 12, "log": true } }
  ],
  "wires": [
    { "from": "pts.cells", "to": "p.layout" },
    { "from": "w.field", "to": "chart.field" },
    { "from": "pts.cells", "to": "vel.layout" },
    { "from": "pts.cells", "to": "m.layout" },
    { "from": "pts.cells", "to": "cnt.layout" },
    { "from": "pts.cells", "to": "col.layout" },
    { "from": "pts.cells", "to": "w.layout" },
    { "from": "grid.cells", "to": "acc.layout" },
    { "from": "grid.cells", "to": "blk.parent" },
    { "from": "blk.cells", "to": "h.layout" },
    { "from": "blk.cells", "to": "gv.layout" },
    { "from": "p.field", "to": "init.p" },
    { "from": "vel.field", "to": "init.vel" },
    { "from": "m.field", "to": "init.m" },
    { "from": "cnt.field", "to": "init.cnt" },
    { "from": "col.field", "to": "init.col" },
    { "from": "acc.field", "to": "clear.acc" },
    { "from": "p.field", "to": "step.p" },
    { "from": "vel.field", "to": "step.vel" },
    { "from": "m.field", "to": "step.m" },
    { "from": "w.field", "to": "step.w" },
    { "from": "acc.field", "to": "step.acc" },
    { "from": "cnt.field", "to": "step.cnt" },
    { "from": "acc.field", "to": "paint.acc" },
    { "from": "h.field", "to": "paint.h" },
    { "from": "gv.field", "to": "paint.gv" },
    { "from": "h.field", "to": "heat.field" },
    { "from": "gv.field", "to": "rgb" },
    { "from": "p.field", "to": "dots.positions" },
    { "from": "col.field", "to": "dots.color" }
  ],
  "exec": [
    { "from": "start.then", "to": "init" },
    { "from": "frame.then", "to": "clear" },
    { "from": "clear.then", "to": "sub" },
    { "from": "sub.body", "to": "step" },
    { "from": "sub.then", "to": "paint" }
  ]
}"#;

#[test]
fn kitchen_sink_seed_builds_and_runs() {
    let doc = GraphDoc::parse(KITCHEN_SINK).expect("seed parses");
    let program = build_program(&doc, &BuildOptions::default()).expect("seed builds");
    let mut sim = Simulation::new(program, &SimOptions::default()).expect("seed compiles");
    sim.step_frame().expect("frame 1");
    sim.step_frame().expect("frame 2");
    assert_eq!(sim.render_views().unwrap().len(), 4);
    let acc = sim.read_field(sim.field("acc").unwrap()).unwrap();
    assert_eq!(
        acc.iter().map(|&x| x as i32).sum::<i32>(),
        16 * 3,
        "every particle lands in one cell per substep"
    );
}

/// Hand-written edge cases, run as they are and used as mutation seeds:
/// (name, kernel code, field type, field init). Each runs over a 4-cell field `x`.
fn edge_cases() -> Vec<(String, String, &'static str, Value)> {
    let mut v: Vec<(String, String, &'static str, Value)> = vec![
        ("int_edges".into(), "fn kernel(i: i32) {\n    let a = -2147483647 - 1;\n    let b = a / -1;\n    let c = a % -1;\n    let d = abs(a);\n    let e = -a;\n    let f = a * -1;\n    let s = 1 << 40;\n    let t = a >> 99;\n    let m = min(a, 3) - 2147483647;\n    x[i] = (b + c + d + e + f + s + t + m) as f32 + sign(a) as f32 + (1e40 as i32) as f32 + (-1.0 as u32) as f32;\n}\n".into(), "f32", json!(0)),
        ("int_edges_runtime".into(), "fn kernel(i: i32) {\n    let a = x[i] as i32 - 2147483647 - 1;\n    let z = i - i - 1;\n    let s = 1 << (i + 40);\n    let u = (i as u32) / (i as u32 - i as u32);\n    let v = (i as u32) % 0u32;\n    x[i] = (a / z + a % z + abs(a) + -a + a * z + s + (a >> (i + 99))) as f32 + u as f32 + v as f32 + sign(a) as f32;\n}\n".into(), "f32", json!(0)),
        ("float_edges".into(), "fn kernel(i: i32) {\n    let z = x[i] * 0.0;\n    x[i] = sqrt(-1.0) + log(z) + pow(z, -1.0) + acosh(z) + z / z + 1.0 % z + normalize(vec2(z, z)).x + 1e30 * 1e30 + (z / z) as i32 as f32;\n}\n".into(), "f32", json!(0)),
        ("matrix_edges".into(), "fn kernel(i: i32) {\n    let m = mat2(0.0);\n    let n = inverse(m);\n    let c = m[i * 7];\n    x[i] = determinant(n) + c.x + n[i - 9][i];\n}\n".into(), "f32", json!(0)),
        ("vector_dynamic_index".into(), "fn kernel(i: i32) {\n    let mut v = vec4(1.0, 2.0, 3.0, 4.0);\n    v[i * 1000] = 5.0;\n    v[-i] = 6.0;\n    x[i] = v[i * 1000] + v[-2147483647 - 1];\n}\n".into(), "f32", json!(0)),
        ("ranges_at_int_limits".into(), "fn kernel(i: i32) {\n    let mut s = 0;\n    for k in 2147483640..2147483647 { s += 1; }\n    for k in 2147483640..=2147483647 { s += 1; }\n    for k in (-2147483647 - 1)..(-2147483647 + 2) { s += 1; }\n    for k in 4294967290u32..=4294967295u32 { s += 1; }\n    for k in (0..2147483647).step_by(1000000000) { s += 1; }\n    for k in (0..=2147483647).step_by(2147483647) { s += 1; }\n    for k in 5..-5 { s += 1000; }\n    x[i] = s as f32;\n}\n".into(), "f32", json!(0)),
        ("step_by_zero_at_runtime".into(), "fn kernel(i: i32) {\n    let mut s = 0;\n    for k in (0..10).step_by(i - i) { s += k; }\n    x[i] = s as f32;\n}\n".into(), "f32", json!(0)),
        ("index_out_of_bounds".into(), "fn kernel(i: i32) {\n    x[i + 100] = 1.0;\n}\n".into(), "f32", json!(0)),
        ("index_min_int".into(), "fn kernel(i: i32) {\n    x[-2147483647 - 1 + i] = 1.0;\n}\n".into(), "f32", json!(0)),
        ("atomics_on_i32".into(), "fn kernel(i: i32) {\n    let o = atomic_compare_exchange(x[0], 0, 1) + atomic_xor(x[(i + 1) % 4], -1) + atomic_min(x[i], -2147483647 - 1);\n    x[i] += o;\n}\n".into(), "i32", json!(2147483647)),
        ("bitcast_nan".into(), "fn kernel(i: i32) {\n    x[i] = bitcast::<f32>(2139095041u32) + bitcast::<f32>(i) + bitcast::<f32>(4294967295u32);\n}\n".into(), "f32", json!(0)),
        ("helper_named_like_field".into(), "fn x(a: f32) -> f32 {\n    a\n}\nfn kernel(i: i32) {\n    x[i] = 1.0;\n}\n".into(), "f32", json!(0)),
        ("unicode".into(), "// ünïcödé ☃ 🦀\nfn kernel(i: i32) {\n    let é = 1.0;\n    x[i] = é;\n}\n".into(), "f32", json!(0)),
        ("unicode_error".into(), "fn kernel(i: i32) {\n    let é☃ = 1.0; x[i] = zz;\n}\n".into(), "f32", json!(0)),
        ("empty_code".into(), String::new(), "f32", json!(0)),
        ("only_comments".into(), "// fn kernel(i: i32) { x[i] = 1.0; }\n/* /* nested */ */".into(), "f32", json!(0)),
        ("huge_literals".into(), "fn kernel(i: i32) {\n    x[i] = 1e39 + 340282366920938463463374607431768211456.0 + 99999999999999999999999 as f32;\n}\n".into(), "f32", json!(0)),
        ("deep_brackets_in_comment".into(), format!("// {}\n/* {} */\nfn kernel(i: i32) {{\n    x[i] = 1.0;\n}}\n", "(".repeat(500), "{[".repeat(500)), "f32", json!(0)),
        ("long_but_flat".into(), format!("fn kernel(i: i32) {{\n{}    x[i] = 1.0;\n}}\n", "    x[i] = x[i] + 1.0 - 0.5 * 2.0;\n".repeat(2000)), "f32", json!(0)),
        ("many_matrix_ops".into(), "fn kernel(i: i32) {\n    let a = mat4(1.0) * mat4(2.0) * transpose(mat4(3.0)) * inverse(mat4(4.0));\n    x[i] = determinant(a) + dot(a * vec4(1.0), vec4(1.0)) + length(cross(vec3(1.0, 0.0, 0.0), vec3(0.0, 1.0, 0.0)));\n}\n".into(), "f32", json!(0)),
        ("recursion_through_three".into(), "fn a(n: i32) -> i32 { b(n) }\nfn b(n: i32) -> i32 { c(n) }\nfn c(n: i32) -> i32 { if n > 0 { a(n - 1) } else { 0 } }\nfn kernel(i: i32) { x[i] = a(i) as f32; }\n".into(), "f32", json!(0)),
    ];
    // Deep nesting must give an error, not overflow the stack.
    for (name, expr) in [
        (
            "parens",
            format!("{}1.0{}", "(".repeat(5000), ")".repeat(5000)),
        ),
        (
            "blocks",
            format!("{}1.0{}", "{ ".repeat(5000), " }".repeat(5000)),
        ),
        (
            "ifs",
            format!(
                "{}1.0{}",
                "if i > 0 { ".repeat(3000),
                " } else { 0.0 }".repeat(3000)
            ),
        ),
        (
            "else_ifs",
            format!("{}{{ 1.0 }}", "if i == 1 { 1.0 } else ".repeat(5000)),
        ),
        (
            "calls",
            format!("{}1.0{}", "abs(".repeat(5000), ")".repeat(5000)),
        ),
        ("negations", format!("{}1.0", "-".repeat(20000))),
        ("sum", format!("1.0{}", " + 1.0".repeat(20000))),
        ("methods", format!("1.0{}", ".abs()".repeat(10000))),
        ("casts", format!("1.0{}", " as f32".repeat(10000))),
        (
            "indexing",
            format!("{}0{}", "x[".repeat(3000), "]".repeat(3000)),
        ),
    ] {
        v.push((
            format!("deep_{}", name),
            format!("fn kernel(i: i32) {{\n    x[i] = {};\n}}\n", expr),
            "f32",
            json!(0),
        ));
    }
    // Each helper calls the next twice: inlining everything would make 2^40 copies.
    v.push((
        "exponential_inlining".into(),
        format!(
            "{}fn f40(a: f32) -> f32 {{\n    a\n}}\nfn kernel(i: i32) {{\n    x[i] = f0(1.0);\n}}\n",
            (0..40).map(|k| format!("fn f{}(a: f32) -> f32 {{\n    f{}(a) + f{}(a)\n}}\n", k, k + 1, k + 1)).collect::<String>()
        ),
        "f32",
        json!(0),
    ));
    v
}

fn edge_graph(code: &str, ty: &str, init: &Value) -> String {
    serde_json::to_string_pretty(&json!({
        "format": "weft-graph", "version": 1,
        "nodes": [
            {"id": "g", "kind": "dense", "params": {"shape": [4]}},
            {"id": "x", "kind": "field", "params": {"type": ty, "init": init}},
            {"id": "k", "kind": "kernel", "params": {"over": "x", "code": code}},
            {"id": "t", "kind": "on_frame"}
        ],
        "wires": [{"from": "g.cells", "to": "x.layout"}, {"from": "x.field", "to": "k.x"}],
        "exec": [{"from": "t.then", "to": "k"}]
    }))
    .unwrap()
}

fn seeds() -> Vec<Seed> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let graphs = root.join("../graphs");
    let mut out = Vec::new();
    let codes_of = |text: &str| -> HashSet<String> {
        serde_json::from_str::<Value>(text)
            .map(|v| kernel_codes(&v).into_iter().collect())
            .unwrap_or_default()
    };
    for name in ["julia", "heat", "life", "mpm88"] {
        let text =
            std::fs::read_to_string(graphs.join(format!("{}.json", name))).expect("example graph");
        out.push(Seed {
            name: name.into(),
            codes: codes_of(&text),
            text,
            base_dir: graphs.clone(),
            runnable: name != "mpm88",
            example: true,
        });
    }
    // Groups and assets: an inline-grouped example, one using shipped
    // assets, and the assets' own test graphs.
    for name in ["heat_grouped", "mpm_sparse"] {
        let text =
            std::fs::read_to_string(graphs.join(format!("{}.json", name))).expect("example graph");
        out.push(Seed {
            name: name.into(),
            codes: codes_of(&text),
            text,
            base_dir: graphs.clone(),
            runnable: name == "heat_grouped",
            example: true,
        });
    }
    let asset_tests = root.join("../assets/tests");
    for name in ["advect2d", "emitter2d", "fit"] {
        let text = std::fs::read_to_string(asset_tests.join(format!("{}.json", name)))
            .expect("asset test graph");
        out.push(Seed {
            name: format!("assets/{}", name),
            codes: codes_of(&text),
            text,
            base_dir: asset_tests.clone(),
            runnable: false,
            example: false,
        });
    }
    out.push(Seed {
        name: "sink".into(),
        codes: codes_of(KITCHEN_SINK),
        text: KITCHEN_SINK.into(),
        base_dir: graphs.clone(),
        runnable: true,
        example: false,
    });
    let bad = root.join("bad");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&bad)
        .map(|d| {
            d.filter_map(|e| Some(e.ok()?.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "json"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("bad graph");
        let name = format!("bad/{}", f.file_stem().unwrap().to_string_lossy());
        out.push(Seed {
            name,
            codes: codes_of(&text),
            text,
            base_dir: bad.clone(),
            runnable: true,
            example: false,
        });
    }
    // A position that overflows f32: the document must still save and re-open.
    let mut v: Value = serde_json::from_str(&edge_graph(
        "fn kernel(i: i32) {\n    x[i] = 1.0;\n}\n",
        "f32",
        &json!(0),
    ))
    .unwrap();
    v["nodes"][1]["pos"] = json!([1e300, -1e300]);
    let text = serde_json::to_string_pretty(&v).unwrap();
    out.push(Seed {
        name: "edge/pos_overflow".into(),
        codes: codes_of(&text),
        text,
        base_dir: graphs.clone(),
        runnable: true,
        example: false,
    });
    // Edge cases last: a hang stops the run, and every other seed should have had its turn.
    for (name, code, ty, init) in edge_cases() {
        let text = edge_graph(&code, ty, &init);
        // The exponential-inlining program must compile quickly, but running it
        // really makes 2^40 calls: like any language, that takes forever.
        let runnable = name != "exponential_inlining";
        out.push(Seed {
            name: format!("edge/{}", name),
            codes: codes_of(&text),
            text,
            base_dir: graphs.clone(),
            runnable,
            example: false,
        });
    }
    out
}

#[test]
fn mutated_graphs_never_panic_hang_or_blame_unknown_nodes() {
    install_quiet_panic_hook();
    let seed: u64 = std::env::var("WEFT_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x005E_ED0F_3EF7);
    let scale: usize = std::env::var("WEFT_FUZZ_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let verbose = std::env::var_os("WEFT_FUZZ_VERBOSE").is_some();
    let fail_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fuzz-failures");
    let _ = std::fs::remove_dir_all(&fail_dir);
    let mut rng = Rng::new(seed);
    let seeds = seeds();
    assert!(
        seeds.len() >= 4 + 40,
        "expected the four examples and the bad corpus"
    );

    let (mut total, mut parsed, mut built, mut compiled, mut ran) =
        (0usize, 0usize, 0usize, 0usize, 0usize);
    // (problem, report) per misbehaving mutant.
    let mut failures: Vec<(String, String)> = Vec::new();
    let mut slowest = (Duration::ZERO, String::new());
    let t0 = Instant::now();
    'seeds: for s in &seeds {
        let count = scale
            * match s.name.as_str() {
                "mpm88" | "mpm_sparse" => 60,
                "heat_grouped" => 120,
                _ if s.name.starts_with("assets/") => 25,
                "sink" => 300,
                _ if s.name.starts_with("edge/") => 4,
                _ if s.example => 150,
                _ => 5,
            };
        let value: Value = serde_json::from_str(&s.text).unwrap_or(Value::Null);
        let mut runs = 0usize;
        for i in 0..=count {
            let (text, desc) = if i == 0 {
                (s.text.clone(), "unmutated".to_string())
            } else if rng.chance(25) || value.is_null() {
                let (mut t, mut d) = mutate_bytes(&mut rng, &s.text);
                if rng.chance(30) {
                    let (t2, d2) = mutate_bytes(&mut rng, &t);
                    t = t2;
                    d = format!("{}; {}", d, d2);
                }
                (t, d)
            } else {
                let mut v = value.clone();
                let gentle = rng.chance(if s.example || s.name == "sink" {
                    70
                } else {
                    40
                });
                let n = if gentle { 1 } else { rng.below(3) + 1 };
                let d: Vec<String> = (0..n)
                    .map(|_| mutate_value(&mut rng, &mut v, gentle))
                    .collect();
                (serde_json::to_string_pretty(&v).unwrap(), d.join("; "))
            };
            let m = Mutant {
                label: format!("{}#{}", s.name, i),
                text,
                base_dir: s.base_dir.clone(),
                allow_run: s.runnable,
                codes: s.codes.clone(),
                small: !s.example,
            };
            let may_run = !s.example || runs < MAX_RUNS_PER_EXAMPLE * scale;
            total += 1;
            let (result, took) = run_guarded(&m, may_run);
            if took > slowest.0 {
                slowest = (took, m.label.clone());
            }
            let problem = match result {
                CaseResult::Done(o) => {
                    if verbose {
                        println!(
                            "{:<28} {:<60} {}",
                            m.label,
                            desc.chars().take(60).collect::<String>(),
                            if o.ran {
                                "ran".to_string()
                            } else if o.compiled {
                                "compiled".to_string()
                            } else {
                                o.first_error
                                    .clone()
                                    .unwrap_or_default()
                                    .chars()
                                    .take(150)
                                    .collect()
                            }
                        );
                    }
                    parsed += o.parsed as usize;
                    built += o.built as usize;
                    compiled += o.compiled as usize;
                    ran += o.ran as usize;
                    if o.ran && s.example {
                        runs += 1;
                    }
                    (!o.problems.is_empty()).then(|| o.problems.join("\n    "))
                }
                CaseResult::Panicked(p) => Some(format!("PANIC: {}", p)),
                CaseResult::TimedOut => {
                    Some(format!("HANG: no result after {:?}", CASE_TIME_LIMIT))
                }
            };
            if let Some(p) = problem {
                let _ = std::fs::create_dir_all(&fail_dir);
                let file = fail_dir.join(format!("{}.json", m.label.replace(['/', '#'], "_")));
                let _ = std::fs::write(&file, &m.text);
                let shown: String = if m.text.len() > 800 {
                    format!(
                        "{}… ({} bytes, full text in {})",
                        &m.text[..m.text.floor_char_boundary(800)],
                        m.text.len(),
                        file.display()
                    )
                } else {
                    m.text.clone()
                };
                failures.push((
                    p.clone(),
                    format!(
                        "{} [{}]\n    {}\n  mutant ({}):\n{}",
                        m.label,
                        desc,
                        p,
                        file.display(),
                        shown
                    ),
                ));
                if p.starts_with("HANG") {
                    // The stuck thread keeps a core busy; stop here.
                    break 'seeds;
                }
            }
        }
    }
    let elapsed = t0.elapsed();
    // Back to the default hook so the verdict below is printed.
    let _ = std::panic::take_hook();
    println!(
        "fuzz: seed {:#x}, {} mutants from {} seed graphs: {} parsed, {} built, {} compiled, {} ran a frame; {} failed; {:.1?} total, slowest {} ({:.1?})",
        seed,
        total,
        seeds.len(),
        parsed,
        built,
        compiled,
        ran,
        failures.len(),
        elapsed,
        slowest.1,
        slowest.0
    );
    assert!(total >= 600 || scale == 0, "only {} mutants", total);
    if !failures.is_empty() {
        // One line per kind of problem (numbers blanked), then the first few mutants in full.
        let mut kinds: Vec<(String, usize, String)> = Vec::new();
        for (p, _) in &failures {
            let mut key = String::new();
            for c in p.lines().next().unwrap_or("").chars().take(160) {
                match (c.is_ascii_digit(), key.ends_with('#')) {
                    (true, true) => {}
                    (true, false) => key.push('#'),
                    _ => key.push(c),
                }
            }
            match kinds.iter_mut().find(|k| k.0 == key) {
                Some(k) => k.1 += 1,
                None => kinds.push((key, 1, p.lines().next().unwrap_or("").to_string())),
            }
        }
        let summary: Vec<String> = kinds
            .iter()
            .map(|(_, n, example)| format!("  {:>4} x {}", n, example))
            .collect();
        const SHOWN: usize = 12;
        let detail: Vec<&str> = failures.iter().take(SHOWN).map(|f| f.1.as_str()).collect();
        panic!(
            "{} of {} mutants misbehaved:\n{}\n\n{}{}",
            failures.len(),
            total,
            summary.join("\n"),
            detail.join("\n\n"),
            if failures.len() > SHOWN {
                format!(
                    "\n\n... and {} more; every failing mutant is in {}",
                    failures.len() - SHOWN,
                    fail_dir.display()
                )
            } else {
                String::new()
            }
        );
    }
}

/// `--set NODE.PARAM=VALUE` and `--init FIELD=FILE` overrides (graph::overrides)
/// on the example graphs and the kitchen sink: never a panic, and every error
/// is document-level or names a node of the graph.
#[test]
fn random_overrides_never_panic() {
    use weft_ir::graph::overrides::{apply_overrides, Overrides};
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let graphs = root.join("../graphs");
    let mut texts: Vec<(String, PathBuf)> = ["julia", "heat", "life", "mpm88", "heat_grouped"]
        .iter()
        .map(|n| {
            (
                std::fs::read_to_string(graphs.join(format!("{}.json", n))).unwrap(),
                graphs.clone(),
            )
        })
        .collect();
    texts.push((KITCHEN_SINK.to_string(), graphs.clone()));
    const VALUES: &[&str] = &[
        "1",
        "0",
        "-1",
        "0.5",
        "1e300",
        "2147483648",
        "[1,2]",
        "[0]",
        "[16]",
        "[4,4]",
        "[1,2,3,4]",
        "{}",
        "null",
        "true",
        "abc",
        "\"s\"",
        "",
        "=",
        "{\"type\":\"u32\"}",
        "{\"npy\":\"nope.npy\"}",
        "{\"npy\":\"/dev/zero\"}",
        "fn kernel(i: i32) {}",
        "=frame*2",
        "= ch('diffuse.scalars') + 1",
        "= ch('nope.x')",
        "= (",
    ];
    let bad = root.join("bad");
    let files: Vec<String> = [
        "fixture_f32_16.npy",
        "fixture_i32_16.npy",
        "fixture_f32_8.npy",
        "fixture_bad_magic.npy",
        "nope.npy",
        ".",
    ]
    .iter()
    .map(|f| bad.join(f).to_string_lossy().into_owned())
    .chain([
        "/dev/zero".to_string(),
        "/dev/null".to_string(),
        String::new(),
    ])
    .collect();
    let mut rng = Rng::new(0xC0FFEE);
    let mut failures = Vec::new();
    let mut applied = 0;
    let cases = 400
        * std::env::var("WEFT_FUZZ_SCALE")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(1usize);
    for case in 0..cases {
        let (text, base_dir) = &texts[case % texts.len()];
        let value: Value = serde_json::from_str(text).unwrap();
        let mut ids = node_ids(&value);
        // Nodes inside inline groups, by path (`heat/diffuse`).
        for n in value["nodes"].as_array().unwrap() {
            if let (Some(g), Some(inner)) = (n["id"].as_str(), n["group"]["nodes"].as_array()) {
                ids.extend(
                    inner
                        .iter()
                        .filter_map(|c| Some(format!("{}/{}", g, c["id"].as_str()?))),
                );
            }
        }
        let params_of = |id: &str, rng: &mut Rng| -> Vec<String> {
            let mut out: Vec<String> = if rng.chance(15) {
                vec!["nope".into(), "code".into(), "shape".into(), "init".into()]
            } else {
                vec![]
            };
            if let Some(n) = value["nodes"]
                .as_array()
                .and_then(|a| a.iter().find(|n| n["id"] == id))
            {
                if let Some(p) = n["params"].as_object() {
                    out.extend(p.keys().cloned());
                    if let Some(sc) = p.get("scalars").and_then(Value::as_object) {
                        out.extend(sc.keys().cloned());
                    }
                }
            }
            if out.is_empty() {
                out.push("nope".into());
            }
            out
        };
        let mut o = Overrides::default();
        for _ in 0..rng.below(3) + 1 {
            let node = if rng.chance(5) {
                "nope".to_string()
            } else {
                rng.pick(&ids).clone()
            };
            let choices = params_of(&node, &mut rng);
            let param = rng.pick(&choices).clone();
            o.sets.push(match rng.below(30) {
                0 => format!("{}{}", node, param),
                1 => format!("{}.{}", node, param),
                _ => format!("{}.{}={}", node, param, rng.pick(VALUES)),
            });
        }
        if rng.chance(40) {
            let fields: Vec<String> = value["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|n| n["kind"] == "field")
                .filter_map(|n| n["id"].as_str().map(str::to_string))
                .collect();
            let field = if rng.chance(10) {
                rng.pick(&ids).clone()
            } else {
                rng.pick(&fields).clone()
            };
            o.inits.push(if rng.chance(10) {
                field
            } else {
                format!("{}={}", field, rng.pick(&files))
            });
        }
        // A sweep (`weft sweep plan --vary`): each set an axis with a
        // second value, every combination applied and built, as the
        // planner validates them (`sweep::plan`: apply_overrides, then
        // build_program, per combination).
        let mut variants = vec![o.sets.clone()];
        if rng.chance(25) {
            for axis in 0..o.sets.len() {
                let (target, _) = o.sets[axis].split_once('=').unwrap_or((&o.sets[axis], ""));
                let other = format!("{}={}", target, rng.pick(VALUES));
                variants = variants
                    .into_iter()
                    .flat_map(|v| {
                        let mut w = v.clone();
                        w[axis] = other.clone();
                        [v, w]
                    })
                    .collect();
            }
        }
        for sets in variants {
            let o = Overrides { sets, ..o.clone() };
            let label = format!("case {}: sets {:?} inits {:?}", case, o.sets, o.inits);
            let known = known_ids(text);
            let text = text.clone();
            let base_dir = base_dir.clone();
            let r = std::panic::catch_unwind(move || {
                let mut doc = GraphDoc::parse(&text).unwrap();
                apply_overrides(&mut doc, &o)
                    .map(|_| build_program(&doc, &BuildOptions { base_dir }))
            });
            let mut out = Outcome::default();
            match r {
                Err(p) => failures.push(format!(
                    "{}: PANIC {:?}",
                    label,
                    p.downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                )),
                // Malformed overrides are usage errors: document-level is fine.
                Ok(Err(e)) => check_errors("overrides", &e, &known, false, &mut out),
                Ok(Ok(Err(e))) => {
                    applied += 1;
                    check_errors("build", &e, &known, true, &mut out)
                }
                Ok(Ok(Ok(_))) => applied += 1,
            }
            if !out.problems.is_empty() {
                failures.push(format!("{}: {}", label, out.problems.join("; ")));
            }
        }
    }
    println!("overrides: {} cases, {} applied", cases, applied);
    assert!(
        failures.is_empty(),
        "{} override cases misbehaved:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
