//! `weft sweep plan`: the cartesian product of every `--vary` (and
//! `--seeds`), each value applied to the graph and built before anything is
//! written, then `manifest.json` and `graph.json` in the sweep folder.

use super::manifest::{self, Axis, Manifest, Variant};
use clap::Args;
use serde_json::Value;
use std::path::{Path, PathBuf};
use weft_ir::graph::overrides::{read_doc, Overrides};
use weft_ir::graph::GraphSource;

/// Most variants one sweep may hold.
const MAX_VARIANTS: usize = 100_000;

#[derive(Args)]
pub struct PlanArgs {
    /// The graph file (.json).
    pub graph: PathBuf,
    /// A parameter or kernel scalar to vary: NODE.PARAM=START:STOP:COUNT (COUNT evenly spaced values, both ends included; integers when START, STOP and the step are) or NODE.PARAM=V1,V2,... (each VALUE as for `weft run --set`: JSON, else a string; commas inside [..], {..} or "..." do not split). Repeatable: the sweep is every combination.
    #[arg(long = "vary", value_name = "NODE.PARAM=VALUES")]
    pub vary: Vec<String>,
    /// Also vary the seed of random(): the graph's seed, seed+1, ..., seed+N-1.
    #[arg(long, value_name = "N")]
    pub seeds: Option<u32>,
    /// Frames each variant runs after on_start.
    #[arg(long, default_value_t = 1)]
    pub frames: u32,
    /// Dump this field as NNNN/FIELD.npy in every variant (repeatable).
    #[arg(long = "dump", value_name = "FIELD")]
    pub dumps: Vec<String>,
    /// Record the sum, max and mean of this field at the end of every variant (repeatable; it is dumped too). A graph with a tape records its loss without asking.
    #[arg(long = "metric", value_name = "FIELD")]
    pub metrics: Vec<String>,
    /// The sweep folder to create (it must not hold a manifest yet).
    #[arg(long)]
    pub out: PathBuf,
}

/// One `--vary`: the axis and each value's `--set` text.
fn parse_vary(spec: &str) -> Result<(String, Vec<(Value, String)>), String> {
    let (lhs, rhs) = spec
        .split_once('=')
        .ok_or_else(|| format!("--vary {}: expected NODE.PARAM=VALUES", spec))?;
    if !lhs.contains('.') || lhs.starts_with('.') || lhs.ends_with('.') {
        return Err(format!("--vary {}: expected NODE.PARAM=VALUES", spec));
    }
    let values = match parse_range(rhs) {
        Some(r) => r.map_err(|m| format!("--vary {}: {}", spec, m))?,
        None => split_top_level(rhs)
            .into_iter()
            .map(|piece| {
                let v = serde_json::from_str(piece)
                    .unwrap_or_else(|_| Value::String(piece.to_string()));
                (v, piece.to_string())
            })
            .collect(),
    };
    if values.is_empty() || values.iter().any(|(_, t)| t.is_empty()) {
        return Err(format!("--vary {}: an empty value", spec));
    }
    Ok((lhs.to_string(), values))
}

/// START:STOP:COUNT, or None when `s` is not three numbers.
fn parse_range(s: &str) -> Option<Result<Vec<(Value, String)>, String>> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 3 {
        return None;
    }
    let start: f64 = parts[0].trim().parse().ok()?;
    let stop: f64 = parts[1].trim().parse().ok()?;
    let Ok(count) = parts[2].trim().parse::<usize>() else {
        return Some(Err(format!(
            "COUNT '{}' is not a whole number of at least 1",
            parts[2]
        )));
    };
    if count == 0 || !start.is_finite() || !stop.is_finite() {
        return Some(Err(
            "START:STOP:COUNT needs finite numbers and COUNT of at least 1".into(),
        ));
    }
    let ints = parts[0].trim().parse::<i64>().is_ok()
        && parts[1].trim().parse::<i64>().is_ok()
        && (count == 1 || (stop - start) % (count as f64 - 1.0) == 0.0);
    let values = (0..count)
        .map(|i| {
            let t = if count == 1 {
                0.0
            } else {
                i as f64 / (count - 1) as f64
            };
            let x = start + (stop - start) * t;
            let v = if ints {
                Value::from(x.round() as i64)
            } else {
                // 12 significant digits: 0.15, not 0.15000000000000002.
                let r: f64 = format!("{:.12e}", x).parse().unwrap_or(x);
                Value::from(r)
            };
            let text = v.to_string();
            (v, text)
        })
        .collect();
    Some(Ok(values))
}

/// Splits at commas outside brackets, braces and strings.
fn split_top_level(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut in_str, mut escaped, mut start) = (0i32, false, false, 0);
    for (i, c) in s.char_indices() {
        if in_str {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '[' | '{' => depth += 1,
            ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(s[start..].trim());
    out
}

/// Applies `sets` (and `seed`) to the graph and builds it: the errors
/// `weft run --set` would give, naming the node.
pub fn check_sets(graph: &Path, sets: &[String]) -> Result<(), String> {
    let mut source = GraphSource::load(graph).map_err(|e| e.to_string())?;
    source
        .apply(&Overrides {
            sets: sets.to_vec(),
            inits: vec![],
        })
        .map_err(|e| e.to_string())?;
    source.build().map_err(|e| e.to_string())?;
    Ok(())
}

pub fn plan(a: PlanArgs) -> i32 {
    match plan_inner(&a) {
        Ok(m) => {
            println!(
                "planned {} variants of {} in {}",
                m.variants.len(),
                m.graph.display(),
                a.out.display()
            );
            0
        }
        Err((code, m)) => {
            eprintln!("error: {}", m.replace('\n', "\nerror: "));
            code
        }
    }
}

fn plan_inner(a: &PlanArgs) -> Result<Manifest, (i32, String)> {
    let bad = |m: String| (2, m);
    let graph = std::fs::canonicalize(&a.graph)
        .map_err(|e| bad(format!("cannot open {}: {}", a.graph.display(), e)))?;
    let bytes = std::fs::read(&graph)
        .map_err(|e| bad(format!("cannot read {}: {}", graph.display(), e)))?;
    let doc = read_doc(&graph).map_err(|e| bad(e.to_string()))?;
    // The graph as it is must build; then every value of every axis alone.
    let base_dir = graph.parent().map(Path::to_path_buf).unwrap_or_default();
    let program = GraphSource::in_folder(doc.clone(), base_dir)
        .build()
        .map_err(|e| bad(e.to_string()))?;
    let mut axes: Vec<Axis> = Vec::new();
    let mut texts: Vec<Vec<String>> = Vec::new();
    for spec in &a.vary {
        let (name, values) = parse_vary(spec).map_err(bad)?;
        if axes.iter().any(|x| x.name == name) {
            return Err(bad(format!("--vary {}: {} is varied twice", spec, name)));
        }
        for (_, text) in &values {
            let set = format!("{}={}", name, text);
            check_sets(&graph, std::slice::from_ref(&set))
                .map_err(|m| bad(format!("--vary {} (value {}): {}", spec, text, m)))?;
        }
        texts.push(
            values
                .iter()
                .map(|(_, t)| format!("{}={}", name, t))
                .collect(),
        );
        axes.push(Axis {
            name,
            values: values.into_iter().map(|(v, _)| v).collect(),
        });
    }
    let seeds: Option<Vec<u32>> = match a.seeds {
        Some(0) => return Err(bad("--seeds 0: need at least one seed".into())),
        Some(n) => Some((0..n).map(|i| doc.seed.wrapping_add(i)).collect()),
        None => None,
    };
    if let Some(s) = &seeds {
        axes.push(Axis {
            name: "seed".into(),
            values: s.iter().map(|&x| Value::from(x)).collect(),
        });
    }
    let count = axes
        .iter()
        .try_fold(1usize, |n, x| n.checked_mul(x.values.len()))
        .filter(|&n| n <= MAX_VARIANTS)
        .ok_or_else(|| {
            bad(format!(
                "the sweep has more than {} variants; vary fewer values",
                MAX_VARIANTS
            ))
        })?;
    let fields: Vec<&str> = program
        .fields
        .iter()
        .filter(|(h, _)| !program.is_view_field(*h))
        .map(|(_, f)| f.name.as_str())
        .collect();
    for (flag, list) in [("--dump", &a.dumps), ("--metric", &a.metrics)] {
        for f in list {
            if !fields.contains(&f.as_str()) {
                return Err(bad(format!(
                    "{} {}: no field node '{}' (fields: {})",
                    flag,
                    f,
                    f,
                    fields.join(", ")
                )));
            }
        }
    }
    let loss = doc
        .nodes
        .iter()
        .find(|n| n.kind == "tape")
        .and_then(|n| n.params.get("loss"))
        .and_then(Value::as_str)
        .map(str::to_string);
    // Variants: the last axis varies fastest.
    let mut variants = Vec::with_capacity(count);
    for index in 0..count {
        let mut rest = index;
        let mut pick = vec![0; axes.len()];
        for (k, x) in axes.iter().enumerate().rev() {
            pick[k] = rest % x.values.len();
            rest /= x.values.len();
        }
        let sets: Vec<String> = texts
            .iter()
            .enumerate()
            .map(|(k, t)| t[pick[k]].clone())
            .collect();
        let seed = seeds.as_ref().map(|s| s[pick[axes.len() - 1]]);
        variants.push(Variant {
            index,
            dir: manifest::dir_name(index),
            sets,
            seed,
        });
    }
    // Values that pass alone may clash together (a shape and a scalar sized
    // for it): build every combination of two or more axes too.
    if texts.len() > 1 {
        for v in &variants {
            check_sets(&graph, &v.sets)
                .map_err(|m| bad(format!("variant {} ({}): {}", v.index, v.sets.join(" "), m)))?;
        }
    }
    let mut dumps = a.dumps.clone();
    for f in a.metrics.iter().chain(loss.iter()) {
        if !dumps.contains(f) {
            dumps.push(f.clone());
        }
    }
    let m = Manifest {
        format: manifest::FORMAT.into(),
        version: 1,
        graph: graph.clone(),
        graph_copy: "graph.json".into(),
        graph_hash: manifest::fnv1a64(&bytes),
        frames: a.frames,
        dumps,
        metrics: a.metrics.clone(),
        loss,
        axes,
        variants,
        layout: "manifest.json; graph.json (the graph as planned); NNNN/ per variant: \
                 VIEW_FRAME.png frames and FIELD.npy dumps as `weft run` writes them, \
                 run.log, result.json (status, timings, metrics); contact_sheet.png and \
                 metrics.csv from `weft sweep collect`"
            .into(),
    };
    if a.out.join(manifest::MANIFEST).exists() {
        return Err(bad(format!(
            "{} already holds a sweep (manifest.json); plan into a new folder",
            a.out.display()
        )));
    }
    std::fs::create_dir_all(&a.out)
        .map_err(|e| (1, format!("cannot create {}: {}", a.out.display(), e)))?;
    manifest::write_atomic(&a.out.join(&m.graph_copy), &bytes).map_err(|e| (1, e))?;
    let text = serde_json::to_string_pretty(&m).expect("a manifest serialises");
    manifest::write_atomic(&a.out.join(manifest::MANIFEST), text.as_bytes()).map_err(|e| (1, e))?;
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_lists() {
        let (n, v) = parse_vary("a.b=0:1:3").unwrap();
        assert_eq!(n, "a.b");
        let t: Vec<&str> = v.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(t, ["0.0", "0.5", "1.0"]);
        let (_, v) = parse_vary("a.b=5:20:4").unwrap();
        let t: Vec<&str> = v.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(t, ["5", "10", "15", "20"]);
        let (_, v) = parse_vary("g.shape=[8,8],[16,16],hello").unwrap();
        let t: Vec<&str> = v.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(t, ["[8,8]", "[16,16]", "hello"]);
        assert!(parse_vary("nodot=1,2").is_err());
        assert!(parse_vary("a.b=1:2:0").is_err());
        assert!(parse_vary("a.b=1,,2").is_err());
    }
}
