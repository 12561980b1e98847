//! The shipped asset library (assets/): every asset has a test graph in
//! assets/tests/ that uses it and is listed in assets/README.md; each test
//! graph runs on vm, cpu and wgpu, and the backends agree on every field.

use weft_ir::graph::{build_program, BuildOptions, GraphDoc};
use weft_runtime::{Backend, SimOptions, Simulation};
use weft_tests::*;

fn test_graphs() -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(root().join("assets/tests"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    v.sort();
    v
}

fn run(path: &std::path::Path, backend: Backend) -> (GraphDoc, Simulation) {
    let doc = GraphDoc::load(path).unwrap();
    let p = build_program(
        &doc,
        &BuildOptions {
            base_dir: path.parent().unwrap().to_path_buf(),
        },
    )
    .unwrap_or_else(|e| panic!("{}: {}", path.display(), e));
    let mut s = Simulation::new(
        p,
        &SimOptions {
            backend,
            threads: Some(1),
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{}: {}", path.display(), e));
    s.start().unwrap();
    for _ in 0..3 {
        s.step_frame().unwrap();
    }
    (doc, s)
}

#[test]
fn every_asset_is_documented_and_has_a_test_graph() {
    let readme = std::fs::read_to_string(root().join("assets/README.md")).unwrap();
    let tests: String = test_graphs()
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    let mut n = 0;
    for e in std::fs::read_dir(root().join("assets")).unwrap() {
        let p = e.unwrap().path();
        let Some(file) = p.file_name().and_then(|f| f.to_str()) else {
            continue;
        };
        let Some(stem) = file.strip_suffix(".v1.json") else {
            continue;
        };
        let doc = GraphDoc::load(&p).unwrap();
        let info = doc.asset.expect("an asset interface");
        assert_eq!(info.name, stem);
        assert!(!info.doc.is_empty(), "{} has no doc", stem);
        assert!(
            info.params.iter().all(|p| !p.doc.is_empty()),
            "{}: undocumented parameter",
            stem
        );
        assert!(
            readme.contains(&format!("`{}`", stem)),
            "assets/README.md does not list {}",
            stem
        );
        assert!(
            tests.contains(&format!("\"name\": \"{}\"", stem)),
            "no test graph uses {}",
            stem
        );
        n += 1;
    }
    assert!(n >= 8, "{} assets", n);
}

#[test]
fn every_asset_test_graph_agrees_on_vm_cpu_and_wgpu() {
    let mut backends = vec![Backend::Jit];
    if wgpu_available() {
        backends.push(Backend::Wgpu);
    } else {
        eprintln!("no wgpu adapter: wgpu not compared");
    }
    for path in test_graphs() {
        let (doc, vm) = run(&path, Backend::Vm);
        let fields: Vec<&str> = doc
            .nodes
            .iter()
            .filter(|n| n.kind == "field")
            .map(|n| n.id.as_str())
            .collect();
        let mut nonzero = false;
        for f in &fields {
            let a = f32s(&vm, f);
            assert!(
                a.iter().all(|x| x.is_finite()),
                "{}: {} not finite",
                path.display(),
                f
            );
            nonzero |= a.iter().any(|&x| x != 0.0);
        }
        assert!(nonzero, "{}: every field is zero", path.display());
        for &b in &backends {
            let (_, other) = run(&path, b);
            for f in &fields {
                let (a, o) = (f32s(&vm, f), f32s(&other, f));
                // Relative L2 difference: float atomics (P2G) add in another
                // order on a GPU, so values agree to rounding, not bit for bit.
                let d: f64 = a
                    .iter()
                    .zip(&o)
                    .map(|(x, y)| ((x - y) as f64).powi(2))
                    .sum();
                let n: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum();
                let rel = (d / n.max(1e-30)).sqrt();
                assert!(
                    rel <= 1e-3,
                    "{} {:?}: field {} differs by {:e} (relative L2)",
                    path.display(),
                    b,
                    f,
                    rel
                );
            }
        }
    }
}

fn sim_of(doc: &GraphDoc, base: &std::path::Path, backend: Backend, frames: u32) -> Simulation {
    let p = build_program(
        doc,
        &BuildOptions {
            base_dir: base.to_path_buf(),
        },
    )
    .unwrap_or_else(|e| panic!("{}", e));
    let mut s = Simulation::new(
        p,
        &SimOptions {
            backend,
            threads: Some(1),
            ..Default::default()
        },
    )
    .unwrap();
    s.start().unwrap();
    for _ in 0..frames {
        s.step_frame().unwrap();
    }
    s
}

/// Element-wise agreement: bit for bit where the backend sums atomics in a
/// fixed order (vm, cpu with one thread), to rounding on a GPU.
fn agree(a: &Simulation, b: &Simulation, f: &str, exact: bool, what: &str) {
    if exact {
        assert_eq!(words(a, f), words(b, f), "{}: field '{}' differs", what, f);
        return;
    }
    let (x, y) = (f32s(a, f), f32s(b, f));
    let d: f64 = x
        .iter()
        .zip(&y)
        .map(|(p, q)| ((p - q) as f64).powi(2))
        .sum();
    let n: f64 = x.iter().map(|p| (*p as f64).powi(2)).sum();
    assert!(
        (d / n.max(1e-30)).sqrt() <= 1e-5,
        "{}: field '{}' differs",
        what,
        f
    );
}

const FIT_FIELDS: [&str; 5] = ["u0", "u", "result", "target", "fit/loss"];

#[test]
fn the_fit_asset_equals_its_hand_flattened_twin() {
    let grouped = GraphDoc::load(&root().join("assets/tests/fit.json")).unwrap();
    let twin = flat_twin("tests/groups/fit_flat_twin.json");
    // Flattening rewrote the optimizer's node ids: its own loss field to
    // the flattened path, the `params` port to the field wired to it.
    let lib = weft_ir::graph::assets::Library::for_graph(&root().join("assets/tests"));
    let flat = weft_ir::graph::groups::flatten(&grouped, &lib).unwrap();
    let opt = flat.node("fit/opt").unwrap();
    assert_eq!(opt.params["loss"], "fit/loss");
    assert_eq!(opt.params["wrt"], serde_json::json!(["u0"]));
    let mut backends = vec![(Backend::Vm, true), (Backend::Jit, true)];
    if wgpu_available() {
        backends.push((Backend::Wgpu, false));
    }
    let base = root().join("assets/tests");
    for (b, exact) in backends {
        let (g, t) = (sim_of(&grouped, &base, b, 3), sim_of(&twin, &base, b, 3));
        for f in FIT_FIELDS {
            agree(&g, &t, f, exact, &format!("{:?}", b));
        }
        // It fits: the loss went down.
        let start = sim_of(&grouped, &base, b, 1);
        assert!(
            f32s(&g, "fit/loss")[0] < f32s(&start, "fit/loss")[0],
            "{:?}",
            b
        );
    }
}

#[test]
fn a_node_id_that_leaves_its_group_is_an_error_naming_the_group() {
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("assets/fit.v1.json")).unwrap())
            .unwrap();
    // The fit asset's body as an inline group whose optimizer names a field
    // outside it (`u`) instead of a port.
    let mut g = v["asset"].take();
    for k in ["name", "version"] {
        g.as_object_mut().unwrap().remove(k);
    }
    g["nodes"] = v["nodes"].take();
    g["wires"] = v["wires"].take();
    g["nodes"][2]["params"]["wrt"] = serde_json::json!(["params", "u"]);
    let mut d: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("assets/tests/fit.json")).unwrap(),
    )
    .unwrap();
    for n in d["nodes"].as_array_mut().unwrap() {
        if n["id"] == "fit" {
            n.as_object_mut().unwrap().remove("asset");
            n["group"] = g.clone();
        }
    }
    let e = build_program(
        &GraphDoc::from_value(d).unwrap(),
        &BuildOptions {
            base_dir: root().join("assets/tests"),
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("'fit'") && e.contains("wrt") && e.contains("'u'") && e.contains("params"),
        "{}",
        e
    );
}

#[test]
fn set_reaches_an_asset_groups_inner_nodes() {
    use weft_ir::graph::overrides::{apply_overrides, load_program, Overrides};
    let run = |path: &str, sets: &[&str]| {
        let o = Overrides {
            sets: sets.iter().map(|s| s.to_string()).collect(),
            inits: vec![],
        };
        let p = if path.ends_with("_flat_twin.json") {
            // Path ids, which only a flattened document has: see `flat_twin`.
            let mut d = flat_twin(path);
            apply_overrides(&mut d, &o).unwrap_or_else(|e| panic!("{}", e));
            build_program(
                &d,
                &BuildOptions {
                    base_dir: root().join("tests/groups"),
                },
            )
            .unwrap_or_else(|e| panic!("{}", e))
        } else {
            load_program(&root().join(path), &o)
                .unwrap_or_else(|e| panic!("{}", e))
                .1
        };
        let mut s = Simulation::new(
            p,
            &SimOptions {
                backend: Backend::Vm,
                threads: Some(1),
                ..Default::default()
            },
        )
        .unwrap();
        s.start().unwrap();
        for _ in 0..2 {
            s.step_frame().unwrap();
        }
        s
    };
    // An inner parameter no promoted parameter covers: the same as setting
    // it on the hand-flattened twin.
    let grouped = run("assets/tests/fit.json", &["fit/opt.beta1=0.5"]);
    let twin = run("tests/groups/fit_flat_twin.json", &["fit/opt.beta1=0.5"]);
    let base = run("assets/tests/fit.json", &[]);
    for f in FIT_FIELDS {
        agree(&grouped, &twin, f, true, "--set fit/opt.beta1");
    }
    assert_ne!(words(&grouped, "u0"), words(&base, "u0"));
    // An inner parameter a promoted one targets goes through it (else the
    // promoted default would overwrite it).
    let inner = run("assets/tests/emitter2d.json", &["emit/k.cy=0.3"]);
    let promoted = run("assets/tests/emitter2d.json", &["emit.cy=0.3"]);
    let base = run("assets/tests/emitter2d.json", &[]);
    assert_eq!(words(&inner, "x"), words(&promoted, "x"));
    assert_ne!(words(&inner, "x"), words(&base, "x"));
    let e = load_program(
        &root().join("assets/tests/fit.json"),
        &Overrides {
            sets: vec!["fit/nope.lr=1".into()],
            inits: vec![],
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("no node 'fit/nope'"), "{}", e);
}
