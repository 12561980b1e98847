//! Adding a backend is its module plus one registry line: this test adds a
//! toy backend (the reference VM under a second name) in one place,
//! `backend::register`, and finds it in everything that offers a choice of
//! backend: the parser behind `--backend` (`backend_arg` is `str::parse`)
//! and its messages, replay's expectation keys, `weft check`
//! (`check_backends`), `Simulation::new`, and the app's and the web page's
//! chooser (`backend_menu::choices`).

use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use weft_gui::gui::backend_menu;
use weft_ir::graph::{build_program, BuildOptions, GraphDoc};
use weft_ir::ir::Program;
use weft_ir::passes::PassOptions;
use weft_runtime::backend::{self, check_backends};
use weft_runtime::engine::Engine;
use weft_runtime::spec::{check_pipeline, Prepared};
use weft_runtime::{Backend, BackendSpec, RuntimeError, SimOptions, Simulation};

/// The reference VM under another name, counting what is asked of it.
struct Toy;

static CHECKED: AtomicUsize = AtomicUsize::new(0);
static OPENED: AtomicUsize = AtomicUsize::new(0);

impl BackendSpec for Toy {
    fn name(&self) -> &'static str {
        "vm-toy"
    }
    fn aliases(&self) -> &'static [&'static str] {
        &["toy"]
    }
    fn summary(&self) -> &'static str {
        "the reference VM under a second name (a test's)"
    }
    fn record_name(&self) -> &'static str {
        "toy"
    }
    fn caps(&self) -> weft_ir::ir::target::TargetCaps {
        Backend::Vm.spec().caps()
    }
    fn prepare(&self, opts: &SimOptions) -> Result<Prepared, RuntimeError> {
        Ok(Prepared::tuned(Backend::of(&Toy), opts))
    }
    fn open(&self, program: &Program, opts: &SimOptions) -> Result<Box<dyn Engine>, RuntimeError> {
        OPENED.fetch_add(1, Ordering::SeqCst);
        Backend::Vm.spec().open(program, opts)
    }
    fn compile(&self, program: &Program) -> Result<(), RuntimeError> {
        Backend::Vm.spec().compile(program)
    }
    fn check_offline(&self, program: &Program, passes: &PassOptions) -> Result<(), RuntimeError> {
        CHECKED.fetch_add(1, Ordering::SeqCst);
        check_pipeline(self, program, &self.tune(passes))
    }
}

fn program() -> Program {
    let g = json!({"format": "weft-graph", "version": 1, "seed": 3, "nodes": [
        {"id": "L", "kind": "dense", "params": {"shape": [16]}},
        {"id": "x", "kind": "field", "params": {"init": 1.0}},
        {"id": "frame", "kind": "on_frame"},
        {"id": "step", "kind": "kernel", "params": {"range": [16],
            "code": "fn kernel(i: i32) { x[i] = x[i] * 1.5 + (i as f32); }"}}
    ], "wires": [
        {"from": "L.cells", "to": "x.layout"},
        {"from": "x.field", "to": "step.x"}
    ], "exec": [
        {"from": "frame.then", "to": "step"}
    ]});
    let doc = GraphDoc::from_value(g).unwrap();
    build_program(
        &doc,
        &BuildOptions {
            base_dir: std::env::temp_dir(),
        },
    )
    .unwrap()
}

/// Three frames on `backend`; the field's words.
fn run(backend: Backend) -> (Simulation, Vec<u32>) {
    let opts = SimOptions {
        backend,
        threads: Some(1),
        ..Default::default()
    };
    let mut sim = Simulation::new(program(), &opts).unwrap();
    for _ in 0..3 {
        sim.step_frame().unwrap();
    }
    let x = sim.field("x").unwrap();
    let words = sim.read_field(x).unwrap();
    (sim, words)
}

#[test]
fn a_backend_registered_in_one_place_is_offered_everywhere() {
    let toy = Backend::of(&Toy);
    assert_eq!(
        "vm-toy".parse::<Backend>(),
        Err(format!(
            "unknown backend 'vm-toy'; backends: {}",
            Backend::names()
        ))
    );
    let before = backend_menu::choices(Err(None));
    assert!(!before.iter().any(|c| c.backend == toy));

    backend::register(&Toy).unwrap();
    // A name is one backend's.
    let again = backend::register(&Toy).unwrap_err();
    assert!(
        again.contains("'vm-toy' is already registered"),
        "{}",
        again
    );

    // `--backend` (clap's value parser is `str::parse`), by name and alias.
    assert_eq!("vm-toy".parse::<Backend>(), Ok(toy));
    assert_eq!("toy".parse::<Backend>(), Ok(toy));
    assert!(Backend::all().contains(&toy));
    // Help and the message for an unknown name list it.
    let names = Backend::names();
    assert!(
        names.contains("vm-toy") && names.contains("toy (= vm-toy)"),
        "{}",
        names
    );
    let unknown = "vm-tyo".parse::<Backend>().unwrap_err();
    assert!(
        unknown.starts_with("unknown backend 'vm-tyo'"),
        "{}",
        unknown
    );
    assert!(unknown.contains("vm-toy"), "{}", unknown);

    // Replay finds the backend of an expectation entry by its record name.
    assert_eq!(Backend::for_record("toy"), Some(toy));
    assert_eq!(Backend::for_record("cpu"), Some(Backend::Vm));

    // `weft check` asks it to compile the program its own way.
    let checked = CHECKED.load(Ordering::SeqCst);
    check_backends(&program(), &PassOptions::default()).unwrap();
    assert_eq!(CHECKED.load(Ordering::SeqCst), checked + 1);

    // A simulation on it: opened through its spec, named by it, with the
    // VM's results.
    let opened = OPENED.load(Ordering::SeqCst);
    let (sim, words) = run(toy);
    assert_eq!(OPENED.load(Ordering::SeqCst), opened + 1);
    assert_eq!(sim.backend(), Some(toy));
    assert_eq!(sim.backend_name(), "vm-toy");
    let (vm, vm_words) = run(Backend::Vm);
    assert_eq!(vm.backend(), Some(Backend::Vm));
    assert_eq!(words, vm_words);

    // The app's and the page's chooser offer it, after the built-in ones,
    // with its summary as hover text.
    let after = backend_menu::choices(Err(None));
    assert_eq!(after.len(), before.len() + 1);
    let last = after.last().unwrap();
    assert_eq!(last.backend, toy);
    assert_eq!(last.disabled, None);
    assert_eq!(last.summary, Toy.summary());
}
