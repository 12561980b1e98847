//! Compiles a program once and runs its schedule: `on_start` once, then the
//! `on_frame` chain per frame. Records per-kernel launch times.

use crate::cpu::interp::{launch, Launch};
use crate::gpu::{AdapterChoice, GpuContext, GpuEngine};
use crate::memory::{extract_field, insert_field, FieldMemory};
use crate::render::{render_view, Image};
use crate::RuntimeError;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use weft_codegen::cpu::{compile_kernel, CpuKernel};
use weft_codegen::jit::{JitKernel, JitOptions};
use weft_ir::ir::*;
use weft_ir::passes::{run_pipeline, PassOptions};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Backend {
    /// The reference interpreter.
    #[default]
    Cpu,
    /// Compute pipelines through wgpu (Vulkan, Metal, DX12, GL; lavapipe on CPU-only machines).
    Wgpu,
    /// wgpu on a hardware GPU when there is one, otherwise the CPU interpreter.
    Auto,
    /// The compiled CPU backend: kernels JIT-compiled to native code (Cranelift).
    Jit,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Wgpu => "wgpu",
            Backend::Auto => "auto",
            Backend::Jit => "jit",
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
    pub backend: Backend,
    /// A GPU device to share (the app's); otherwise one is opened when needed.
    pub gpu: Option<Arc<GpuContext>>,
    /// GPU: one submit per launch so per-kernel times can be measured.
    pub profile: bool,
    /// GPU: use the compare-exchange loop for f32 atomics even when the adapter has native ones.
    pub force_cas_float_atomics: bool,
}

impl std::fmt::Debug for GpuContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GpuContext({})", self.describe())
    }
}

enum Engine {
    Cpu {
        kernels: Vec<CpuKernel>,
        memory: FieldMemory,
        /// Native code per kernel when the backend is `Jit` (same field memory).
        jit: Option<Vec<Arc<JitKernel>>>,
    },
    Gpu(Box<GpuEngine>),
}

pub struct Simulation {
    pub program: Program,
    engine: Engine,
    backend: Backend,
    profile: bool,
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
        run_pipeline(&mut program, &opts.passes, None).map_err(|e| RuntimeError::Compile {
            node: e.kernel.clone(),
            message: e.to_string(),
        })?;
        let backend = match opts.backend {
            Backend::Auto => {
                let ctx = match &opts.gpu {
                    Some(c) => Some(c.clone()),
                    None => GpuContext::new(AdapterChoice::HardwareOnly)
                        .ok()
                        .map(Arc::new),
                };
                match ctx {
                    Some(c) => {
                        return Self::new(
                            program,
                            &SimOptions {
                                backend: Backend::Wgpu,
                                gpu: Some(c),
                                ..opts.clone()
                            },
                        )
                    }
                    None => Backend::Cpu,
                }
            }
            b => b,
        };
        let engine = match backend {
            Backend::Cpu | Backend::Auto => {
                let kernels = program
                    .kernels
                    .iter()
                    .map(|(_, k)| compile_kernel(&program, k))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| RuntimeError::Compile {
                        node: e.kernel.clone(),
                        message: e.to_string(),
                    })?;
                Engine::Cpu {
                    kernels,
                    memory: FieldMemory::new(&program),
                    jit: None,
                }
            }
            Backend::Jit => {
                let jopts = JitOptions::default();
                let jit = program
                    .kernels
                    .iter()
                    .map(|(_, k)| crate::jit::compile_cached(&program, k, &jopts))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| RuntimeError::Compile {
                        node: e.kernel.clone(),
                        message: e.to_string(),
                    })?;
                Engine::Cpu {
                    kernels: Vec::new(),
                    memory: FieldMemory::new(&program),
                    jit: Some(jit),
                }
            }
            Backend::Wgpu => {
                let ctx = match &opts.gpu {
                    Some(c) => c.clone(),
                    None => Arc::new(GpuContext::new(AdapterChoice::Any)?),
                };
                let gopts = weft_codegen::gpu::GpuOptions {
                    native_float_atomics: ctx.float_atomics && !opts.force_cas_float_atomics,
                };
                let engine = GpuEngine::new(&program, ctx, &gopts)?;
                let init = FieldMemory::new(&program);
                for r in program.roots() {
                    engine.write_root(r, &init.root_words(r));
                }
                Engine::Gpu(Box::new(engine))
            }
        };
        let compile_time = t0.elapsed();
        let kernels_len = program.kernels.len();
        let pool = match opts.threads {
            Some(n) => Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(n.max(1))
                    .build()
                    .map_err(|e| {
                        RuntimeError::Io(format!("cannot start {} worker threads: {}", n, e))
                    })?,
            ),
            None => None,
        };
        Ok(Simulation {
            program,
            engine,
            backend,
            profile: opts.profile,
            frame: 0,
            started: false,
            kernel_times: BTreeMap::new(),
            compile_time,
            pool,
            launches: vec![0; kernels_len],
        })
    }

    /// The backend actually running (never `Auto`).
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// GPU: one submit per launch so `kernel_times` can be measured (slower frames).
    pub fn set_profile(&mut self, on: bool) {
        self.profile = on;
    }

    /// The GPU engine, when running on wgpu (for drawing views from its buffers).
    pub fn gpu_engine(&self) -> Option<&GpuEngine> {
        match &self.engine {
            Engine::Gpu(g) => Some(g),
            Engine::Cpu { .. } => None,
        }
    }

    /// The GPU adapter in use, if any.
    pub fn device_name(&self) -> Option<String> {
        match &self.engine {
            Engine::Gpu(g) => Some(format!(
                "{}, f32 atomics: {}, kernel timing: {}",
                g.ctx.describe(),
                if g.native_float_atomics {
                    "native"
                } else {
                    "compare-exchange loop"
                },
                g.timing_method()
            )),
            Engine::Cpu { .. } => None,
        }
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
    pub fn reset(&mut self) -> Result<(), RuntimeError> {
        match &mut self.engine {
            Engine::Cpu { memory, .. } => memory.reset(&self.program),
            Engine::Gpu(g) => {
                let init = FieldMemory::new(&self.program);
                for r in self.program.roots() {
                    g.write_root(r, &init.root_words(r));
                }
            }
        }
        self.launches.iter_mut().for_each(|l| *l = 0);
        self.frame = 0;
        self.started = false;
        Ok(())
    }

    fn run_steps(&mut self, steps: &[Step]) -> Result<(), RuntimeError> {
        if let Engine::Gpu(_) = self.engine {
            let mut list = Vec::new();
            self.flatten(steps, &mut list);
            let Engine::Gpu(g) = &self.engine else {
                unreachable!("checked above")
            };
            let times = g.run(&self.program, &list, self.profile)?;
            for (k, d) in times {
                self.kernel_times
                    .entry(self.program.kernels[k].name.clone())
                    .or_default()
                    .push(d);
            }
            return Ok(());
        }
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

    /// The launches of `steps` in order: (kernel, frame, launch index).
    fn flatten(&mut self, steps: &[Step], out: &mut Vec<(KernelId, i32, u32)>) {
        for s in steps {
            match s {
                Step::Launch(k) => {
                    out.push((*k, self.frame, self.launches[k.index()]));
                    self.launches[k.index()] = self.launches[k.index()].wrapping_add(1);
                }
                Step::Repeat { count, body, .. } => {
                    for _ in 0..*count {
                        self.flatten(body, out);
                    }
                }
            }
        }
    }

    fn launch(&mut self, k: KernelId) -> Result<(), RuntimeError> {
        let Engine::Cpu {
            kernels,
            memory,
            jit,
        } = &self.engine
        else {
            unreachable!("CPU launches only")
        };
        let kernel = &self.program.kernels[k];
        if let Some(jit) = jit {
            let d = self.launch_jit(k, &jit[k.index()], memory)?;
            let name = kernel.name.clone();
            self.launches[k.index()] = self.launches[k.index()].wrapping_add(1);
            self.kernel_times.entry(name).or_default().push(d);
            return Ok(());
        }
        let ck = &kernels[k.index()];
        let shape = kernel.iteration_shape(&self.program);
        let params: Vec<u32> = kernel.params.iter().map(|p| p.value).collect();
        let buffers: Vec<&[std::sync::atomic::AtomicU32]> = ck
            .roots
            .iter()
            .map(|r| memory.buffers[r.index()].as_slice())
            .collect();
        let t = Instant::now();
        let launch_index = self.launches[k.index()];
        let l = Launch {
            program: &self.program,
            kernel: ck,
            buffers,
            params: &params,
            frame: self.frame,
            seed: self.program.seed,
            launch_index,
            shape: &shape,
        };
        match &self.pool {
            Some(pool) => pool.install(|| launch(&l))?,
            None => launch(&l)?,
        }
        let d = t.elapsed();
        self.launches[k.index()] = launch_index.wrapping_add(1);
        self.kernel_times
            .entry(kernel.name.clone())
            .or_default()
            .push(d);
        Ok(())
    }

    /// Runs one launch of a JIT-compiled kernel; returns its duration.
    fn launch_jit(
        &self,
        k: KernelId,
        jk: &JitKernel,
        memory: &FieldMemory,
    ) -> Result<Duration, RuntimeError> {
        let kernel = &self.program.kernels[k];
        let params: Vec<u32> = kernel.params.iter().map(|p| p.value).collect();
        let buffers = jk
            .roots
            .iter()
            .map(|r| memory.buffers[r.index()].as_slice())
            .collect();
        let launch_index = self.launches[k.index()];
        let l = crate::jit::Launch {
            kernel: jk,
            buffers,
            params: &params,
            frame: self.frame,
            seed: self.program.seed,
            launch_index,
        };
        let t = Instant::now();
        match &self.pool {
            Some(pool) => pool.install(|| crate::jit::launch(&l))?,
            None => crate::jit::launch(&l)?,
        }
        Ok(t.elapsed())
    }

    /// Sets a kernel's scalar parameter without recompiling or touching field state.
    pub fn set_param(&mut self, kernel: &str, name: &str, value: f64) -> Result<(), String> {
        let k = self
            .program
            .kernel_by_name(kernel)
            .ok_or_else(|| format!("no kernel node '{}'", kernel))?;
        let p = self.program.kernels[k]
            .params
            .iter_mut()
            .find(|p| p.name == name)
            .ok_or_else(|| format!("kernel '{}' has no scalar '{}'", kernel, name))?;
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
    pub fn read_field(&self, f: FieldId) -> Result<Vec<u32>, RuntimeError> {
        match &self.engine {
            Engine::Cpu { memory, .. } => Ok(memory.read_field(&self.program, f)),
            Engine::Gpu(g) => {
                let root =
                    weft_ir::graph::build::root_of(&self.program, self.program.fields[f].layout);
                Ok(extract_field(&self.program, f, &g.read_root(root)?))
            }
        }
    }

    pub fn write_field(&mut self, f: FieldId, words: &[u32]) -> Result<(), RuntimeError> {
        match &self.engine {
            Engine::Cpu { memory, .. } => memory.write_field(&self.program, f, words),
            Engine::Gpu(g) => {
                let root =
                    weft_ir::graph::build::root_of(&self.program, self.program.fields[f].layout);
                let mut all = g.read_root(root)?;
                insert_field(&self.program, f, words, &mut all);
                g.write_root(root, &all);
            }
        }
        Ok(())
    }

    /// Every view, rendered on the CPU: (view node id, image).
    pub fn render_views(&self) -> Result<Vec<(String, Image)>, RuntimeError> {
        let mut data: std::collections::HashMap<FieldId, Vec<u32>> =
            std::collections::HashMap::new();
        for v in &self.program.views {
            let fields = match v {
                View::Image { field, .. } => vec![*field],
                View::Particles {
                    positions,
                    color_field,
                    ..
                } => std::iter::once(*positions).chain(*color_field).collect(),
            };
            for f in fields {
                if let std::collections::hash_map::Entry::Vacant(e) = data.entry(f) {
                    e.insert(self.read_field(f)?);
                }
            }
        }
        Ok(self
            .program
            .views
            .iter()
            .map(|v| {
                (
                    v.node_id().to_string(),
                    render_view(&self.program, v, &|f| data[&f].clone()),
                )
            })
            .collect())
    }

    /// Every view, drawn on the GPU straight from the field buffers by a
    /// renderer made for this simulation (`GpuViewRenderer::new(sim.gpu_engine()?, &sim.program)`).
    pub fn render_views_gpu(
        &self,
        renderer: &crate::gpu_render::GpuViewRenderer,
    ) -> Result<Vec<(String, Image)>, RuntimeError> {
        let engine = self.gpu_engine().ok_or_else(|| {
            RuntimeError::Device(
                "GPU views need the wgpu backend; this simulation runs on the CPU".into(),
            )
        })?;
        if !renderer.is_for(engine) || renderer.len() != self.program.views.len() {
            return Err(RuntimeError::Device(
                "the GPU view renderer was made for another simulation".into(),
            ));
        }
        self.program
            .views
            .iter()
            .enumerate()
            .map(|(i, v)| Ok((v.node_id().to_string(), renderer.render_to_image(i)?)))
            .collect()
    }
}
