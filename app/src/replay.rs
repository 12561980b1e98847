//! `weft replay`: re-run graphs and compare with NAME.expect.json.

use crate::cli::ReplayArgs;
use crate::load::Overrides;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use weft_runtime::expect::{all_stats, compare, BackendExpect, Expectation, Tolerance};
use weft_runtime::Backend;
use weft_runtime::{RuntimeError, SimOptions};

pub fn expect_path(graph: &Path) -> PathBuf {
    let stem = graph
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_default();
    graph.with_file_name(format!("{}.expect.json", stem))
}

fn collect(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut v: Vec<PathBuf> = std::fs::read_dir(p)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|x| {
                    x.extension().is_some_and(|e| e == "json")
                        && !x.to_string_lossy().ends_with(".expect.json")
                        && expect_path(x).exists()
                })
                .collect();
            v.sort();
            out.extend(v);
        } else {
            out.push(p.clone());
        }
    }
    out
}

pub fn replay(a: ReplayArgs) -> i32 {
    let graphs = collect(&a.paths);
    if graphs.is_empty() {
        eprintln!("error: no graphs with a NAME.expect.json beside them were found");
        return 2;
    }
    let named: Option<Backend> = match a.backend {
        Some(b) if b == Backend::Auto => {
            eprintln!("error: replay compares named backends: use --backend cpu, vm, wgpu or cuda (or neither, for every recorded backend)");
            return 2;
        }
        b => b,
    };
    let mut failed = 0;
    let mut runs = 0;
    for g in &graphs {
        let ep = expect_path(g);
        let existing: Option<Expectation> = match std::fs::read_to_string(&ep) {
            Err(_) => None,
            Ok(t) => {
                match serde_json::from_str::<Expectation>(&t) {
                    Ok(e) if e.format == "weft-expect" && e.version == 1 => Some(e),
                    Ok(e) => {
                        eprintln!("FAIL {}: {} is format '{}' version {}; expected 'weft-expect' version 1", g.display(), ep.display(), e.format, e.version);
                        failed += 1;
                        continue;
                    }
                    Err(e) if !a.update => {
                        eprintln!(
                            "FAIL {}: {} is not a valid expectation file: {}",
                            g.display(),
                            ep.display(),
                            e
                        );
                        failed += 1;
                        continue;
                    }
                    Err(_) => None,
                }
            }
        };
        if existing.is_none() && !a.update {
            eprintln!(
                "FAIL {}: cannot read expectations {} (record them with --update)",
                g.display(),
                ep.display()
            );
            failed += 1;
            continue;
        }
        let recorded_backends: Vec<String> = existing
            .as_ref()
            .map(|e| e.backends.keys().cloned().collect())
            .unwrap_or_default();
        // A recorded entry without a named backend replays on the backend that
        // recorded it: `cpu` entries on the reference VM.
        let backends: Vec<(Option<Backend>, String)> = match named {
            Some(b) => vec![(Some(b), b.record_name().to_string())],
            None if recorded_backends.is_empty() => {
                vec![(Some(Backend::Vm), Backend::Vm.record_name().to_string())]
            }
            None => recorded_backends
                .into_iter()
                .map(|k| (Backend::for_record(&k), k))
                .collect(),
        };
        let recorded = existing.as_ref().map(|e| e.frames);
        let frames = if a.update {
            a.frames.or(recorded).unwrap_or(3)
        } else {
            recorded.unwrap_or(3)
        };
        let mut exp = existing.unwrap_or(Expectation {
            format: "weft-expect".into(),
            version: 1,
            frames,
            tolerance: Tolerance::default(),
            field_tolerance: BTreeMap::new(),
            backends: BTreeMap::new(),
        });
        if a.update && exp.frames != frames {
            // Other backends' entries were recorded for a different frame count.
            exp.backends.clear();
            exp.frames = frames;
        }
        for (b, backend) in backends {
            // Entries are keyed by `Backend::record_name`.
            let Some(b) = b else {
                eprintln!(
                    "FAIL {}: unknown backend '{}' in the expectations (backends: {})",
                    g.display(),
                    backend,
                    Backend::names()
                );
                failed += 1;
                continue;
            };
            // A recorded wgpu entry on a machine without any adapter is skipped,
            // unless it was asked for by name or this is CI.
            if b == Backend::Wgpu
                && named.is_none()
                && std::env::var("CI").as_deref() != Ok("true")
                && !wgpu_available()
            {
                println!("skip {} ({}): no wgpu adapter on this machine (install a GPU driver, or Mesa's lavapipe: mesa-vulkan-drivers)", g.display(), backend);
                continue;
            }
            runs += 1;
            let stats = match run_graph(g, frames, a.threads, b, !a.no_interkernel) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("FAIL {} ({}): {}", g.display(), backend, e);
                    failed += 1;
                    continue;
                }
            };
            if a.update {
                exp.backends
                    .insert(backend.clone(), BackendExpect { fields: stats });
                continue;
            }
            // cuda without an entry of its own is held to the `cpu` entry
            // (the reference VM's results, with the file's tolerances): no
            // machine that records expectations has a CUDA device.
            let entry = match exp.backends.get(&backend) {
                None if b == Backend::Cuda => exp
                    .backends
                    .get(Backend::Vm.record_name())
                    .map(|e| (e, " against the cpu entry")),
                e => e.map(|e| (e, "")),
            };
            let Some((be, against)) = entry else {
                eprintln!(
                    "FAIL {}: {} has no '{}' entry (record it with --update --backend {})",
                    g.display(),
                    ep.display(),
                    backend,
                    backend
                );
                failed += 1;
                continue;
            };
            let diffs = compare(&be.fields, &stats, &exp.tolerance, &exp.field_tolerance);
            if diffs.is_empty() {
                println!(
                    "ok   {} ({} frames, {}{})",
                    g.display(),
                    frames,
                    backend,
                    against
                );
            } else {
                failed += 1;
                println!(
                    "FAIL {} ({} frames, {}{})",
                    g.display(),
                    frames,
                    backend,
                    against
                );
                for d in diffs {
                    println!("     {}", d);
                }
            }
        }
        if a.update {
            let text = serde_json::to_string_pretty(&exp).expect("serializes") + "\n";
            if let Err(e) = weft_ir::io::write_atomic(&ep, text.as_bytes()) {
                eprintln!("FAIL {}: cannot write {}: {}", g.display(), ep.display(), e);
                failed += 1;
                continue;
            }
            let names: Vec<&String> = exp.backends.keys().collect();
            println!(
                "recorded {} ({} frames; {})",
                ep.display(),
                frames,
                names
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    if failed > 0 {
        eprintln!("{} of {} runs failed", failed, runs.max(failed));
        1
    } else {
        0
    }
}

fn wgpu_available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        weft_runtime::wgpu_backend::WgpuContext::new(weft_runtime::wgpu_backend::AdapterChoice::Any)
            .is_ok()
    })
}

fn run_graph(
    g: &Path,
    frames: u32,
    threads: usize,
    backend: Backend,
    interkernel: bool,
) -> Result<BTreeMap<String, weft_runtime::expect::FieldStats>, RuntimeError> {
    let (_, mut sim) = weft_open::file(
        g,
        &Overrides::default(),
        &SimOptions {
            threads: Some(threads),
            backend,
            passes: weft_ir::passes::PassOptions {
                interkernel,
                ..Default::default()
            },
            ..Default::default()
        },
    )?;
    sim.start()?;
    for _ in 0..frames {
        sim.step_frame()?;
    }
    all_stats(&sim)
}
