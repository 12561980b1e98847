//! Compiles a program once and runs its schedule: `on_start` once, then the
//! `on_frame` chain per frame. Records per-kernel launch times.

use crate::cpu::interp::{launch, Launch};
use crate::memory::FieldMemory;
use crate::render::{render_view, Image};
use crate::RuntimeError;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use weft_codegen::cpu::{compile_kernel, CpuKernel};
use weft_ir::ir::*;
use weft_ir::passes::{run_pipeline, PassOptions};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The reference interpreter.
    Cpu,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct SimOptions {
    pub passes: PassOptions,
    /// Overrides the graph's seed.
    pub seed: Option<u32>,
    /// Worker threads for kernel launches (`None`: one per core). With one
    /// thread, floating-point atomics add in a fixed order, so runs repeat exactly.
    pub threads: Option<usize>,
}


pub struct Simulation {
    pub program: Program,
    kernels: Vec<CpuKernel>,
    memory: FieldMemory,
    /// Frames completed (0 after `on_start`).
    pub frame: i32,
    started: bool,
    /// Launch durations per kernel node id.
    pub kernel_times: BTreeMap<String, Vec<Duration>>,
    pub compile_time: Duration,
    pool: Option<rayon::ThreadPool>,
    /// Launches so far per kernel (indexed like `program.kernels`).
    launches: Vec<u32>,
}

impl Simulation {
    /// Runs the pass pipeline and code generation for every kernel, then allocates fields.
    pub fn new(mut program: Program, opts: &SimOptions) -> Result<Simulation, RuntimeError> {
        let t0 = Instant::now();
        if let Some(s) = opts.seed {
            program.seed = s;
        }
        run_pipeline(&mut program, &opts.passes, None).map_err(|e| RuntimeError::Compile { node: e.kernel.clone(), message: e.to_string() })?;
        let kernels = program
            .kernels
            .iter()
            .map(|(_, k)| compile_kernel(&program, k))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| RuntimeError::Compile { node: e.kernel.clone(), message: e.to_string() })?;
        let compile_time = t0.elapsed();
        let memory = FieldMemory::new(&program);
        let kernels_len = kernels.len();
        let pool = match opts.threads {
            Some(n) => Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(n.max(1))
                    .build()
                    .map_err(|e| RuntimeError::Io(format!("cannot start {} worker threads: {}", n, e)))?,
            ),
            None => None,
        };
        Ok(Simulation { program, kernels, memory, frame: 0, started: false, kernel_times: BTreeMap::new(), compile_time, pool, launches: vec![0; kernels_len] })
    }

    pub fn backend(&self) -> Backend {
        Backend::Cpu
    }

    /// Runs `on_start` (once; later calls do nothing).
    pub fn start(&mut self) -> Result<(), RuntimeError> {
        if self.started {
            return Ok(());
        }
        self.started = true;
        let steps = self.program.schedule.on_start.clone();
        self.run_steps(&steps)
    }

    /// Advances one frame (running `on_start` first if needed).
    pub fn step_frame(&mut self) -> Result<(), RuntimeError> {
        self.start()?;
        self.frame += 1;
        let steps = self.program.schedule.on_frame.clone();
        self.run_steps(&steps)
    }

    /// Restores initial field values and the frame counter.
    pub fn reset(&mut self) {
        self.memory.reset(&self.program);
        self.launches.iter_mut().for_each(|l| *l = 0);
        self.frame = 0;
        self.started = false;
    }

    fn run_steps(&mut self, steps: &[Step]) -> Result<(), RuntimeError> {
        for s in steps {
            match s {
                Step::Launch(k) => self.launch(*k)?,
                Step::Repeat { count, body, .. } => {
                    for _ in 0..*count {
                        self.run_steps(body)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn launch(&mut self, k: KernelId) -> Result<(), RuntimeError> {
        let kernel = &self.program.kernels[k];
        let ck = &self.kernels[k.index()];
        let shape = kernel.iteration_shape(&self.program);
        let params: Vec<u32> = kernel.params.iter().map(|p| p.value).collect();
        let buffers: Vec<&[std::sync::atomic::AtomicU32]> = ck.roots.iter().map(|r| self.memory.buffers[r.index()].as_slice()).collect();
        let t = Instant::now();
        let launch_index = self.launches[k.index()];
        let l = Launch { program: &self.program, kernel: ck, buffers, params: &params, frame: self.frame, seed: self.program.seed, launch_index, shape: &shape };
        match &self.pool {
            Some(pool) => pool.install(|| launch(&l))?,
            None => launch(&l)?,
        }
        let d = t.elapsed();
        self.launches[k.index()] = launch_index.wrapping_add(1);
        self.kernel_times.entry(kernel.name.clone()).or_default().push(d);
        Ok(())
    }

    /// Sets a kernel's scalar parameter without recompiling or touching field state.
    pub fn set_param(&mut self, kernel: &str, name: &str, value: f64) -> Result<(), String> {
        let k = self.program.kernel_by_name(kernel).ok_or_else(|| format!("no kernel node '{}'", kernel))?;
        let p = self.program.kernels[k].params.iter_mut().find(|p| p.name == name).ok_or_else(|| format!("kernel '{}' has no scalar '{}'", kernel, name))?;
        p.value = match p.ty.scalar() {
            Some(weft_ir::Scalar::F32) => (value as f32).to_bits(),
            Some(weft_ir::Scalar::U32) => value as u32,
            _ => value as i32 as u32,
        };
        Ok(())
    }

    pub fn field(&self, name: &str) -> Option<FieldId> {
        self.program.field_by_name(name)
    }

    /// Field contents in logical row-major order, one word per component.
    pub fn read_field(&self, f: FieldId) -> Vec<u32> {
        self.memory.read_field(&self.program, f)
    }

    pub fn write_field(&mut self, f: FieldId, words: &[u32]) {
        self.memory.write_field(&self.program, f, words)
    }

    /// Every view, rendered: (view node id, image).
    pub fn render_views(&self) -> Vec<(String, Image)> {
        self.program
            .views
            .iter()
            .map(|v| (v.node_id().to_string(), render_view(&self.program, v, &|f| self.read_field(f))))
            .collect()
    }
}
