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
