//! A backend is one module: this file adds a do-nothing backend (it keeps
//! root buffers on the host and records the launches it is given) without
//! touching any other file, and checks what the shared schedule executor
//! hands it against a hand-written expectation of the schedule.

use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use weft_codegen::launch::LaunchRecord;
use weft_ir::ir::{KernelId, LayoutId, Program};
use weft_runtime::{Engine, RuntimeError, SimOptions, Simulation};
use weft_tests::*;

struct Recorder {
    roots: Mutex<Vec<Vec<u32>>>,
    launches: Arc<Mutex<Vec<LaunchRecord>>>,
}

impl Engine for Recorder {
    /// Not one of the registry's backends: it names itself.
    fn name(&self) -> &'static str {
        "recorder"
    }
    fn write_root(&self, root: LayoutId, words: &[u32]) -> Result<(), RuntimeError> {
        self.roots.lock().unwrap()[root.index()] = words.to_vec();
        Ok(())
    }
    fn read_root(&self, root: LayoutId) -> Result<Vec<u32>, RuntimeError> {
        Ok(self.roots.lock().unwrap()[root.index()].clone())
    }
    fn run(
        &mut self,
        _program: &Program,
        launches: &[LaunchRecord],
        _timing: bool,
    ) -> Result<Vec<(KernelId, Duration)>, RuntimeError> {
        self.launches.lock().unwrap().extend_from_slice(launches);
        Ok(vec![])
    }
}

#[test]
fn a_do_nothing_backend_receives_the_schedule_as_launch_records() {
    let g = json!({"format": "weft-graph", "version": 1, "seed": 9, "nodes": [
        {"id": "L", "kind": "dense", "params": {"shape": [8]}},
        {"id": "x", "kind": "field", "params": {"init": 2.5}},
        {"id": "start", "kind": "on_start"},
        {"id": "frame", "kind": "on_frame"},
        {"id": "sub", "kind": "repeat", "params": {"count": 2}},
        {"id": "init", "kind": "kernel", "params": {"range": [8], "code": "fn kernel(i: i32) { x[i] = 0.0; }"}},
        {"id": "step", "kind": "kernel", "params": {"range": [8], "code": "fn kernel(i: i32) { x[i] += dt; }", "scalars": {"dt": 0.5}}}
    ], "wires": [
        {"from": "L.cells", "to": "x.layout"},
        {"from": "x.field", "to": "init.x"}, {"from": "x.field", "to": "step.x"}
    ], "exec": [
        {"from": "start.then", "to": "init"},
        {"from": "frame.then", "to": "sub"},
        {"from": "sub.body", "to": "step"}
    ]});
    let p = build(&g).unwrap();
    let launches = Arc::new(Mutex::new(Vec::new()));
    let log = launches.clone();
    // Without the inter-kernel optimiser: it would run `sub`'s two
    // repetitions of `step` as one launch looping twice inside the kernel
    // (`schedule::fusion`), and this test is about the records themselves.
    let opts = SimOptions {
        passes: weft_ir::passes::PassOptions {
            interkernel: false,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut sim = Simulation::with_engine(p, &opts, move |p| {
        let roots = (0..p.layouts.len())
            .map(|i| {
                let l = weft_ir::Handle::new(i);
                vec![0; weft_ir::ir::layout::root_words(p, l) as usize]
            })
            .collect();
        let e = Recorder {
            roots: Mutex::new(roots),
            launches: log,
        };
        // Like every engine, it starts with the fields' initial values.
        let mut boxed: Box<dyn Engine> = Box::new(e);
        boxed.reset(p)?;
        Ok(boxed)
    })
    .unwrap();
    assert_eq!(sim.backend_name(), "recorder");
    assert_eq!(
        sim.backend(),
        None,
        "an outside engine is none of the built-in backends"
    );
    sim.start().unwrap();
    sim.step_frame().unwrap();
    // A frame in slices (the app's, on a slow shared GPU) hands the
    // engine the same records, in the same order.
    assert_eq!(sim.step_frame_sliced(Some(1)).unwrap(), 2);
    let init = sim.program.kernel_by_name("init").unwrap();
    let step = sim.program.kernel_by_name("step").unwrap();
    let got = launches.lock().unwrap().clone();
    let half = 0.5f32.to_bits();
    let rec = |kernel, frame, launch_index, params: Vec<u32>| LaunchRecord {
        kernel,
        frame,
        launch_index,
        seed: 9,
        shape: vec![8],
        params,
    };
    assert_eq!(
        got,
        vec![
            rec(init, 0, 0, vec![]),
            rec(step, 1, 0, vec![half]),
            rec(step, 1, 1, vec![half]),
            rec(step, 2, 2, vec![half]),
            rec(step, 2, 3, vec![half]),
        ]
    );
    // The do-nothing backend ran nothing: x keeps its initial value.
    assert_eq!(f32s(&sim, "x"), vec![2.5; 8]);
}

#[test]
fn a_frame_in_slices_computes_what_a_whole_frame_does() {
    // heat: no atomics, so every backend repeats it bit for bit.
    let doc = example("heat");
    let mut backends = vec![weft_runtime::Backend::Vm, weft_runtime::Backend::Jit];
    if wgpu_available() {
        backends.push(weft_runtime::Backend::Wgpu);
    }
    for b in backends {
        let opts = SimOptions {
            backend: b,
            ..Default::default()
        };
        let mut whole = Simulation::new(build(&doc).unwrap(), &opts).unwrap();
        let mut sliced = Simulation::new(build(&doc).unwrap(), &opts).unwrap();
        for _ in 0..3 {
            whole.step_frame().unwrap();
            whole.sync().unwrap();
            // 20 substeps of (diffuse, apply): 40 launches, 7 at a time.
            assert_eq!(sliced.step_frame_sliced(Some(7)).unwrap(), 40);
        }
        assert_eq!(whole.frame, sliced.frame);
        assert_eq!(words(&whole, "T"), words(&sliced, "T"), "{:?}", b);
        assert_ne!(f32s(&whole, "T").iter().sum::<f32>(), 0.0);
    }
}

/// Per-kernel times measure the kernels' work on every backend (issue 50
/// item 5: on lavapipe they were GPU timestamps of 0.02 ms each in an 848
/// ms frame). Two heavy kernels (fused or not) run each frame with profiling on; the sum
/// of their timed launches lies between a quarter of the frame's wall time
/// and the frame's wall time (each launch is timed inside it). On a
/// software adapter the engine says it times by wall time, and why.
#[test]
fn kernel_times_add_up_to_the_frame() {
    let heavy = "fn kernel(i: i32, j: i32) {\n    let mut s = a[(i, j)];\n    for k in 0..200 {\n        s = sin(s + k as f32 * 0.001) * 0.5 + 0.25;\n    }\n    a[(i, j)] = s;\n}\n";
    let g = json!({"format": "weft-graph", "version": 1,
    "nodes": [
        {"id": "cells", "kind": "dense", "params": {"shape": [128, 128]}},
        {"id": "a", "kind": "field", "params": {"type": "f32", "init": 0.5}},
        {"id": "frame", "kind": "on_frame"},
        {"id": "first", "kind": "kernel", "params": {"over": "a", "code": heavy}},
        {"id": "second", "kind": "kernel", "params": {"over": "a", "code": heavy}}
    ],
    "wires": [
        {"from": "cells.cells", "to": "a.layout"},
        {"from": "a.field", "to": "first.a"},
        {"from": "a.field", "to": "second.a"}
    ],
    "exec": [
        {"from": "frame.then", "to": "first"},
        {"from": "first.then", "to": "second"}
    ]});
    let program = build(&g).unwrap_or_else(|e| panic!("{}", e));
    for backend in local_backends() {
        let opts = SimOptions {
            backend,
            profile: true,
            ..Default::default()
        };
        let mut s = Simulation::new(program.clone(), &opts)
            .unwrap_or_else(|e| panic!("{}: {}", backend, e));
        s.start().unwrap();
        s.step_frame().unwrap();
        s.sync().unwrap();
        s.kernel_times.clear();
        let t = std::time::Instant::now();
        s.step_frame().unwrap();
        s.sync().unwrap();
        let wall = t.elapsed();
        let sum: Duration = s.kernel_times.values().flatten().sum();
        let n: usize = s.kernel_times.values().map(Vec::len).sum();
        // The optimiser may fuse the two into one kernel.
        assert!(
            n >= 1,
            "{}: the kernels are timed: {:?}",
            backend,
            s.kernel_times
        );
        assert!(
            sum * 4 >= wall && sum <= wall,
            "{}: kernel times sum to {:?} in a frame of {:?} (timed by {})",
            backend,
            sum,
            wall,
            s.engine().timing_method()
        );
        let device = s.engine().device_name().unwrap_or_default();
        if device.contains("llvmpipe") || device.contains("SwiftShader") {
            assert!(
                s.engine().timing_method().contains("software adapter"),
                "{}: {}",
                device,
                s.engine().timing_method()
            );
        }
    }
}
