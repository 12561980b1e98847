//! The architecture invariants of docs/architecture.md, checked on the
//! sources: crate dependencies (read from each Cargo.toml) and imports
//! (searched in each crate's .rs files).

use std::path::{Path, PathBuf};
use weft_tests::root;

/// The `[dependencies]` names of a crate's Cargo.toml (not dev-dependencies).
fn deps(krate: &str) -> Vec<String> {
    let text = std::fs::read_to_string(root().join(krate).join("Cargo.toml")).unwrap();
    let mut out = Vec::new();
    let mut in_deps = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if in_deps {
            if let Some((name, _)) = line.split_once('=') {
                let name = name.trim();
                if !name.is_empty() && !name.starts_with('#') {
                    out.push(name.split('.').next().unwrap().to_string());
                }
            }
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// (file relative to the repository, line number, line) of every source line
/// under `dir` containing one of `needles`, outside `//` comments.
fn mentions(dir: &str, needles: &[&str]) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(&root().join(dir), &mut files);
    let mut hits = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if needles.iter().any(|x| code.contains(x)) {
                let rel = f.strip_prefix(root()).unwrap().display().to_string();
                hits.push(format!("{}:{}: {}", rel, n + 1, line.trim()));
            }
        }
    }
    hits
}

#[test]
fn dependencies_point_one_way() {
    // graph-ir <- codegen <- runtime <- open <- gui <- app (and web);
    // nothing depends on app, the runtime not on the editor or on the
    // facade above it.
    let ir = deps("graph-ir");
    for d in ["weft-codegen", "weft-runtime", "weft"] {
        assert!(!ir.contains(&d.to_string()), "graph-ir depends on {}", d);
    }
    let cg = deps("codegen");
    assert!(cg.contains(&"weft-ir".to_string()));
    for d in ["weft-runtime", "weft", "wgpu"] {
        assert!(!cg.contains(&d.to_string()), "codegen depends on {}", d);
    }
    let rt = deps("runtime");
    assert!(
        !rt.contains(&"weft".to_string()),
        "runtime depends on the app"
    );
    assert!(
        !rt.contains(&"weft-open".to_string()),
        "runtime depends on the facade above it"
    );
    let open = deps("open");
    for d in ["weft-gui", "weft", "weft-web"] {
        assert!(!open.contains(&d.to_string()), "open depends on {}", d);
    }
    for k in [
        "graph-ir", "codegen", "runtime", "open", "gui", "web", "tests",
    ] {
        assert!(
            !deps(k).contains(&"weft".to_string()),
            "{} depends on the app",
            k
        );
    }
    for k in ["graph-ir", "codegen", "runtime"] {
        assert!(
            !deps(k).contains(&"weft-gui".to_string()),
            "{} depends on the editor",
            k
        );
    }
}

#[test]
fn the_ir_crate_knows_nothing_of_gpus_or_ui() {
    let ir = deps("graph-ir");
    for d in [
        "naga",
        "wgpu",
        "eframe",
        "egui",
        "egui-snarl",
        "cudarc",
        "rayon",
    ] {
        assert!(!ir.contains(&d.to_string()), "graph-ir depends on {}", d);
    }
    let hits = mentions("graph-ir/src", &["naga::", "wgpu::", "egui::"]);
    assert!(hits.is_empty(), "{}", hits.join("\n"));
}

#[test]
fn backends_see_only_the_ir() {
    // Code generators and runtime engines read the IR, never the graph
    // document, the kernel language or the pass pipeline. A backend's spec
    // (`jit/spec.rs`, `cuda/spec.rs`, `wgpu_spec.rs`) says what it asks
    // of the pipeline (`BackendSpec::tune`), and only that.
    let needles = &["weft_ir::graph", "weft_ir::lang", "weft_ir::passes"];
    let mut hits = mentions("codegen/src", needles);
    for dir in ["runtime/src/vm", "runtime/src/jit", "runtime/src/cuda"] {
        hits.extend(mentions(dir, needles));
    }
    hits.retain(|h| !h.contains("/spec.rs:"));
    for dir in ["runtime/src/jit", "runtime/src/cuda"] {
        for h in mentions(dir, &["weft_ir::graph", "weft_ir::lang"]) {
            if h.contains("/spec.rs:") {
                hits.push(h);
            }
        }
    }
    for f in ["runtime/src/wgpu_backend.rs"] {
        let text = std::fs::read_to_string(root().join(f)).unwrap();
        for (n, l) in text.lines().enumerate() {
            if needles.iter().any(|x| l.contains(x)) {
                hits.push(format!("{}:{}: {}", f, n + 1, l.trim()));
            }
        }
    }
    assert!(hits.is_empty(), "{}", hits.join("\n"));
}

#[test]
fn backends_get_legalized_ir() {
    // Every example graph goes through the whole pipeline with the validator
    // on, ending in the legalized form that backends require.
    for name in ["julia", "mpm88", "heat", "life", "heat_color"] {
        let doc =
            weft_ir::graph::GraphDoc::load(&root().join(format!("graphs/{}.json", name))).unwrap();
        let mut p = weft_ir::graph::build_program(
            &doc,
            &weft_ir::graph::BuildOptions {
                base_dir: root().join("graphs"),
            },
        )
        .unwrap();
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
        weft_ir::ir::validate_program(&p, weft_ir::ir::IrForm::Legalized)
            .unwrap_or_else(|e| panic!("{}: {}", name, e));
    }
}

#[test]
fn the_runtime_never_reads_the_graph_document() {
    let hits = mentions(
        "runtime/src",
        &[
            "GraphDoc",
            "build_program",
            "graph::build",
            "graph::catalog",
            "graph::overrides",
        ],
    );
    assert!(hits.is_empty(), "{}", hits.join("\n"));
}

#[test]
fn passes_and_the_ir_do_not_import_the_graph_builder() {
    let mut hits = mentions("graph-ir/src/passes", &["graph::", "lang::"]);
    hits.extend(mentions("graph-ir/src/lower", &["graph::", "lang::"]));
    hits.extend(mentions(
        "graph-ir/src/ir",
        &["crate::graph", "crate::lang"],
    ));
    assert!(hits.is_empty(), "{}", hits.join("\n"));
}

/// Inside graph-ir the layers are `ir/` (with `lower/`, the building
/// blocks) below `schedule/`, below `passes/`: the IR (its validator too)
/// and the schedule do not import a pass, so a pass's helpers that a lower
/// layer needs live in that layer (`Type::is_f16`, `Function::uses_f16`,
/// `AddressPlan::list_level`).
#[test]
fn the_ir_and_the_schedule_do_not_import_passes() {
    // `passes::` paths and `use crate::{.., passes}` lists alike.
    let needles = &["passes::", "passes}", "passes,", "passes;"];
    let mut hits = mentions("graph-ir/src/ir", needles);
    hits.extend(mentions("graph-ir/src/schedule", needles));
    assert!(hits.is_empty(), "{}", hits.join("\n"));
}

#[test]
fn one_layout_module_answers_where_elements_are_stored() {
    // Only ir/layout.rs computes with cell sizes and offsets; the IR
    // definitions, printer (and its parser, which reads back what it
    // printed) and validator may name them.
    let allowed = [
        "graph-ir/src/ir/layout.rs",
        "graph-ir/src/ir/mod.rs",
        "graph-ir/src/ir/printer.rs",
        "graph-ir/src/ir/parse.rs",
        "graph-ir/src/ir/validate.rs",
        "graph-ir/src/graph/build.rs",
    ];
    let mut hits = Vec::new();
    for dir in [
        "graph-ir/src",
        "codegen/src",
        "runtime/src",
        "gui/src",
        "app/src",
    ] {
        hits.extend(mentions(
            dir,
            &[".cell_words", ".offset_in_parent", ".offset_in_cell"],
        ));
    }
    hits.retain(|h| !allowed.iter().any(|a| h.starts_with(a)));
    assert!(
        hits.is_empty(),
        "address math outside ir/layout.rs:\n{}",
        hits.join("\n")
    );
    // graph/build.rs only initialises the fields that layout::compute fills.
    let build = mentions("graph-ir/src/graph", &[".cell_words", ".offset_in_parent"]);
    assert!(build.is_empty(), "{}", build.join("\n"));
}

#[test]
fn one_backend_enum_and_one_launch_record() {
    let mut hits = Vec::new();
    for dir in ["runtime/src", "gui/src", "app/src", "codegen/src"] {
        hits.extend(mentions(
            dir,
            &["enum Backend", "enum ViewBackend", "enum BackendArg"],
        ));
    }
    hits.retain(|h| !h.starts_with("runtime/src/backend.rs"));
    assert!(hits.is_empty(), "{}", hits.join("\n"));
    // Launch-record words are indexed through `launch::word`, not literals.
    let literal = mentions("runtime/src", &["record_const(", "words[0]", "words[7]"]);
    assert!(literal.is_empty(), "{}", literal.join("\n"));
}

#[test]
fn the_editor_knows_it_is_in_a_browser_in_one_module() {
    // What differs between the desktop app and the editor page is decided
    // in `gui/src/gui/platform.rs`; the rest of the editor asks it.
    let mut hits = mentions("gui/src", &["target_arch", "wasm_bindgen", "web_sys::"]);
    hits.retain(|h| !h.starts_with("gui/src/gui/platform.rs"));
    assert!(hits.is_empty(), "{}", hits.join("\n"));
    let runtime = mentions("runtime/src", &["target_arch"]);
    let outside: Vec<_> = runtime
        .iter()
        .filter(|h| {
            !["runtime/src/platform.rs", "runtime/src/lib.rs"]
                .iter()
                .any(|p| h.starts_with(p))
        })
        .collect();
    assert!(outside.is_empty(), "{:?}", outside);
}

#[test]
fn the_runtime_does_not_import_the_graph_module() {
    // npy files, atomic writes and the errors naming graph nodes live in
    // `weft_ir::io` and `weft_ir::error`, which both sides use.
    let hits = mentions("runtime/src", &["weft_ir::graph"]);
    assert!(hits.is_empty(), "{}", hits.join("\n"));
}

#[test]
fn the_runtime_holds_no_shader_text() {
    // Kernels (and the indirect-dispatch shader, `codegen::wgpu::indirect`)
    // come from codegen; the runtime only hands them to the device.
    // Views are system kernels (`passes::views`) drawn on every backend.
    let hits = mentions("runtime/src", &["@compute", "@group("]);
    assert!(hits.is_empty(), "{}", hits.join("\n"));
    assert!(!root().join("runtime/src/wgpu_views.rs").exists());
}

#[test]
fn engines_say_what_they_are_through_the_trait() {
    // The `Engine` trait says what an engine can do (non-blocking reads,
    // back-pressure, device buffers) and names no concrete engine; which
    // backend runs is the simulation's `backend()`, from the spec that
    // opened it: no downcasts, no comparisons of backend names.
    let mut hits = Vec::new();
    for dir in ["runtime/src", "gui/src", "app/src", "web/src"] {
        hits.extend(mentions(
            dir,
            &[
                "downcast",
                "as_any",
                "backend_name() ==",
                "backend_name() !=",
                "wgpu_engine(",
                "fn wgpu(&self)",
            ],
        ));
    }
    assert!(hits.is_empty(), "{}", hits.join("\n"));
}

#[test]
fn auto_is_resolved_in_one_place() {
    // `auto` looks for a hardware GPU once per simulation, in the wgpu
    // spec's `auto_candidate` (called by the `auto` spec's `prepare`).
    let mut hits = Vec::new();
    for dir in ["runtime/src", "gui/src", "app/src", "web/src"] {
        hits.extend(mentions(dir, &["AdapterChoice::HardwareOnly"]));
    }
    hits.retain(|h| !h.starts_with("runtime/src/wgpu_spec.rs"));
    assert!(hits.is_empty(), "{}", hits.join("\n"));
}

#[test]
fn passes_holds_passes_only() {
    // Every file directly under passes/ is a pass the pipeline in mod.rs
    // runs; the building blocks several passes emit through are in lower/,
    // which imports no pass (so no import circle between passes).
    let dir = root().join("graph-ir/src/passes");
    let pipeline = std::fs::read_to_string(dir.join("mod.rs")).unwrap();
    // `NAME::run` as a whole path (called, or named as a `Simple` pass's function).
    let runs = |stem: &str| {
        pipeline
            .match_indices(&format!("{}::run", stem))
            .any(|(i, _)| {
                i == 0 || {
                    let c = pipeline.as_bytes()[i - 1];
                    !c.is_ascii_alphanumeric() && c != b'_'
                }
            })
    };
    let mut not_passes = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let Some(stem) = p.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if p.extension().is_some_and(|x| x == "rs") && stem != "mod" && !runs(stem) {
            not_passes.push(p.display().to_string());
        }
    }
    assert!(
        not_passes.is_empty(),
        "not run by the pipeline: {}",
        not_passes.join(", ")
    );
    let hits = mentions("graph-ir/src/lower", &["passes::", "super::super"]);
    assert!(hits.is_empty(), "{}", hits.join("\n"));
}

#[test]
fn random_numbers_and_atomic_loops_are_defined_once() {
    // `random()` is IR from `lower::random` (expanded by legalize): no
    // backend or runtime holds the generator's constants.
    let mut hits = Vec::new();
    for dir in [
        "codegen/src",
        "runtime/src",
        "graph-ir/src/passes",
        "graph-ir/src/ir",
    ] {
        hits.extend(mentions(dir, &["747796405", "2891336453", "277803737"]));
    }
    assert!(hits.is_empty(), "{}", hits.join("\n"));
    assert_eq!(mentions("graph-ir/src/lower", &["747796405"]).len(), 1);
    // Atomics a target lacks are legalize's compare-exchange loop; no
    // backend writes its own (the CPU backend's f32 add is its native
    // lowering of an operation it states in `CAPS`).
    let hits = mentions(
        "codegen/src",
        &["weft_atomic_f", "compare_exchange_weak", "fn float_rmw"],
    );
    assert!(hits.is_empty(), "{}", hits.join("\n"));
    let hits = mentions("runtime/src/vm", &["compare_exchange_weak"]);
    assert!(hits.is_empty(), "{}", hits.join("\n"));
}

/// Instructions are created in one place: `lower/emit.rs` (the `Build`
/// trait and `Function::detached` / `adopt`). A pass that grew the arena
/// itself would be a ninth copy of the emitter; the IR text parser is the
/// one reader that builds functions from outside.
#[test]
fn instructions_are_created_through_the_one_builder() {
    let mut hits = Vec::new();
    for dir in ["graph-ir/src", "codegen/src", "runtime/src", "open/src"] {
        hits.extend(mentions(dir, &["insts.append("]).into_iter().filter(|h| {
            !h.starts_with("graph-ir/src/lower/emit.rs:")
                && !h.starts_with("graph-ir/src/ir/parse.rs:")
        }));
    }
    assert!(hits.is_empty(), "{}", hits.join("\n"));
}

/// docs/architecture.md names every module of every crate (its file name
/// without `.rs`, or its folder's name for a `mod.rs`), so the map a
/// contributor reads first cannot silently fall behind the code.
#[test]
fn architecture_md_names_every_module() {
    let doc = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let words: std::collections::HashSet<&str> = doc
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    let mut missing = Vec::new();
    for krate in [
        "graph-ir", "codegen", "runtime", "open", "gui", "app", "web",
    ] {
        let mut files = Vec::new();
        rust_files(&root().join(krate).join("src"), &mut files);
        for f in files {
            let stem = f.file_stem().unwrap().to_string_lossy().to_string();
            let name = match stem.as_str() {
                "lib" | "main" => continue,
                "mod" => f
                    .parent()
                    .unwrap()
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .to_string(),
                _ => stem,
            };
            if !words.contains(name.as_str()) {
                missing.push(f.strip_prefix(root()).unwrap().display().to_string());
            }
        }
    }
    missing.sort();
    assert!(
        missing.is_empty(),
        "docs/architecture.md does not name these modules:\n{}",
        missing.join("\n")
    );
}

/// docs/architecture.md's "Dependencies" section names every external crate
/// of every Cargo.toml (and says why it was chosen).
#[test]
fn architecture_md_says_why_each_dependency_is_there() {
    let doc = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let section = doc
        .split("## Dependencies")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("a Dependencies section");
    let mut missing = Vec::new();
    for krate in [
        "graph-ir", "codegen", "runtime", "open", "gui", "app", "web", "tests",
    ] {
        let text = std::fs::read_to_string(root().join(krate).join("Cargo.toml")).unwrap();
        let mut in_deps = false;
        for line in text.lines() {
            let line = line.trim();
            if line.starts_with('[') {
                in_deps = line.ends_with("dependencies]");
                continue;
            }
            let Some((name, _)) = line.split_once('=').filter(|_| in_deps) else {
                continue;
            };
            let name = name.trim().split('.').next().unwrap();
            if name.is_empty() || name.starts_with('#') || name.starts_with("weft-") {
                continue;
            }
            if !section.contains(&format!("**{}**", name)) {
                missing.push(format!("{} ({})", name, krate));
            }
        }
    }
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "not in docs/architecture.md's Dependencies section: {}",
        missing.join(", ")
    );
}

/// Every file Weft writes goes through the one atomic writer,
/// `weft_ir::io::AtomicFile` / `write_atomic` (a temporary file in the same
/// folder, synced, renamed; a link at the final path replaced, never
/// written through): no `File::create`, `fs::write` or `OpenOptions`
/// anywhere else in the crates' sources. Tests (`#[cfg(test)]` items) may
/// make fixtures as they like; `web/build.rs`, a build script writing into
/// cargo's `OUT_DIR` at compile time, is not under a `src/` scanned here.
#[test]
fn files_are_written_through_the_one_atomic_writer() {
    const WRITER: &str = "graph-ir/src/io/mod.rs";
    let needles = ["File::create", "fs::write", "OpenOptions"];
    let mut hits = Vec::new();
    for dir in [
        "graph-ir/src",
        "codegen/src",
        "runtime/src",
        "open/src",
        "gui/src",
        "app/src",
        "web/src",
    ] {
        let mut files = Vec::new();
        rust_files(&root().join(dir), &mut files);
        for f in files {
            let rel = f.strip_prefix(root()).unwrap().display().to_string();
            if rel == WRITER {
                continue;
            }
            let text = std::fs::read_to_string(&f).unwrap();
            // Skip each `#[cfg(test)]` item: from the attribute to the
            // line where its braces close again.
            let mut depth: i64 = 0;
            let mut in_test = false;
            let mut opened = false;
            for (n, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                if !in_test && code.trim_start().starts_with("#[cfg(test)]") {
                    in_test = true;
                    opened = false;
                    depth = 0;
                    continue;
                }
                if in_test {
                    depth += code.matches('{').count() as i64 - code.matches('}').count() as i64;
                    opened |= code.contains('{');
                    if opened && depth <= 0 {
                        in_test = false;
                    } else if !opened && code.trim_end().ends_with(';') {
                        in_test = false; // a `#[cfg(test)] use ...;` or `mod x;`
                    }
                    continue;
                }
                // Whole names only: `AtomicFile::create` is the writer.
                let named = |x: &str| {
                    code.match_indices(x).any(|(at, _)| {
                        !code[..at]
                            .chars()
                            .next_back()
                            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                    })
                };
                if needles.iter().any(|x| named(x)) {
                    hits.push(format!("{}:{}: {}", rel, n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        hits.is_empty(),
        "files written outside weft_ir::io's atomic writer (use io::write_atomic or io::AtomicFile):\n{}",
        hits.join("\n")
    );
}
