//! The wgpu backend: compute pipelines from `weft_codegen::wgpu`, fields in
//! storage buffers that stay on the GPU between kernels and frames.
//!
//! One frame (or `on_start`) is one buffer write of all launch records and
//! one submit: every launch has a record at its own dynamic offset, bind
//! groups and pipelines are created once. Fields are read back only for
//! dumps, statistics and views. Validation errors, device loss and failed
//! bounds checks become `RuntimeError`s naming the node, never panics.

use crate::engine::{Engine, PendingRead};
use crate::kernel_cache::KernelKey;
use crate::memory::FieldMemory;
use crate::memory_limit::{free_ram, Limit, MemoryLimits};
use crate::spec::SimOptions;
use crate::wgpu_context::CachedKernel;
pub use crate::wgpu_context::{AdapterChoice, WgpuContext, LLVMPIPE_LOOP_TRIPS};
use crate::RuntimeError;
use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
// std's clock panics in WebAssembly; web-time is std's natively.
use web_time::Instant;
use weft_codegen::launch::{word, LaunchRecord};
use weft_codegen::wgpu::{compile_kernel, WgpuOptions, WORKGROUP_SIZE};
use weft_ir::ir::layout::root_words;
use weft_ir::ir::*;

struct Compiled {
    cached: Arc<CachedKernel>,
    bind_group: wgpu::BindGroup,
}

pub struct WgpuEngine {
    pub ctx: Arc<WgpuContext>,
    kernels: Vec<Compiled>,
    /// Indexed by layout handle; only roots have buffers.
    buffers: Vec<Option<wgpu::Buffer>>,
    records: wgpu::Buffer,
    record_capacity: u64,
    record_stride: u64,
    errors: wgpu::Buffer,
    /// Submits whose error words are still on their way back, oldest first.
    in_flight: Mutex<VecDeque<InFlight>>,
    /// Readback buffers of retired submits, for reuse.
    spare_readbacks: Mutex<Vec<wgpu::Buffer>>,
    /// What fault messages need (field and node names, fault sites): a
    /// fault can surface after the program that ran it was handed back.
    fault_program: Program,
    params_words: u32,
    /// Whether f32 atomics use the adapter's native support (else compare-exchange loops).
    pub native_float_atomics: bool,
    /// Invocations per workgroup of every kernel (and of dispatch sizing).
    workgroup_size: u32,
    /// Two timestamps per profiled launch, when the adapter has them.
    timer: Option<(wgpu::QuerySet, wgpu::Buffer, wgpu::Buffer)>,
    /// Launches bounded by a device word (`Kernel::count_from`), by kernel.
    indirect: Vec<Option<IndirectLaunch>>,
    /// Dispatch arguments of those launches (16 bytes each) and the shader
    /// that computes them from the device word.
    indirect_args: Option<(wgpu::Buffer, wgpu::ComputePipeline)>,
}

/// How one kernel with `count_from` is dispatched: a one-thread dispatch of
/// the arguments shader (its own dispatch, so it sees everything earlier
/// launches wrote), then `dispatch_workgroups_indirect` from `offset`. The
/// count never leaves the GPU.
struct IndirectLaunch {
    offset: u64,
    bind_group: wgpu::BindGroup,
}

/// Workgroups (x, y) of a launch of `total` invocations, `wg` per
/// workgroup: rows of at most `max_dim` workgroups.
fn grid(total: u64, wg: u64, max_dim: u64) -> (u64, u64) {
    let groups = total.div_ceil(wg);
    let gx = groups.clamp(1, max_dim);
    (gx, groups.div_ceil(gx).max(1))
}

const MAX_RECORDS_PER_SUBMIT: u64 = 4096;

/// Submits that may run ahead of the host: a frame's submit returns at
/// once, and the host waits only when more than this many frames' error
/// words have not come back, so the CPU records frame k+1 while the GPU
/// runs frame k, and no frame pays a round trip of its own. A fault
/// surfaces at most this many frames late (or at `Engine::sync`, or at the
/// next read of a field), naming the kernel and line that failed.
pub const FRAMES_IN_FLIGHT: usize = 2;

/// One submit's error words on their way back: the submit copies them into
/// `readback`, which is mapped without waiting. A submit whose kernels have
/// no fault site has no words to read (`None`): only its GPU errors and its
/// place in the queue are tracked.
struct InFlight {
    readback: Option<wgpu::Buffer>,
    submission: wgpu::SubmissionIndex,
    /// The kernels the submit ran, in order (the shader names the failing one).
    kernels: Vec<KernelId>,
    mapped: Arc<Mutex<Option<Result<(), wgpu::BufferAsyncError>>>>,
}

/// What root buffers may take on this device (`memory_limit`): each at
/// most `max_buffer_size` (a root over `max_storage_buffer_binding_size`
/// is split over several bindings, see `weft_codegen::wgpu`); all
/// together the free RAM when the adapter is the CPU (lavapipe), no budget
/// otherwise (wgpu does not report device memory), or `max_memory`.
pub fn memory_limits(ctx: &WgpuContext, max_memory: Option<u64>) -> MemoryLimits {
    let budget = if ctx.info.device_type == wgpu::DeviceType::Cpu {
        free_ram()
    } else {
        None
    };
    let mut m = MemoryLimits::with_budget(budget, max_memory);
    m.per_buffer = Some(Limit {
        bytes: ctx.limits.max_buffer_size,
        source: format!(
            "the wgpu device '{}' allows {{}} per buffer (max_buffer_size)",
            ctx.info.name
        ),
    });
    m
}

impl WgpuEngine {
    /// Opens the engine for a simulation: code-generation options from the
    /// context and `opts`, root buffers holding every field's initial value.
    pub fn open(
        program: &Program,
        ctx: Arc<WgpuContext>,
        opts: &SimOptions,
    ) -> Result<WgpuEngine, RuntimeError> {
        let max = ctx
            .limits
            .max_compute_invocations_per_workgroup
            .min(ctx.limits.max_compute_workgroup_size_x);
        // The default never exceeds what the device allows.
        let workgroup_size = opts.workgroup_size.unwrap_or(WORKGROUP_SIZE.min(max));
        if workgroup_size == 0 || workgroup_size > max {
            return Err(RuntimeError::Device(format!(
                "workgroup size {} is outside 1..={} on {}",
                workgroup_size, max, ctx.info.name
            )));
        }
        let binding = ctx.limits.max_storage_buffer_binding_size;
        let gopts = WgpuOptions {
            native_float_atomics: ctx.float_atomics && !opts.force_cas_float_atomics,
            workgroup_size,
            chunk_words: weft_codegen::wgpu::chunk_words(
                opts.wgpu_max_binding_bytes
                    .map_or(binding, |b| b.min(binding)),
            ),
            max_storage_bindings: ctx.limits.max_storage_buffers_per_shader_stage,
            wide: ctx.wide,
        };
        memory_limits(&ctx, opts.max_memory).check(program)?;
        let engine = WgpuEngine::new(program, ctx, &gopts)?;
        let init = FieldMemory::new(program);
        for r in program.roots() {
            engine.write_words(r, &init.root_words(r));
        }
        Ok(engine)
    }

    pub fn new(
        program: &Program,
        ctx: Arc<WgpuContext>,
        opts: &WgpuOptions,
    ) -> Result<WgpuEngine, RuntimeError> {
        let dev = &ctx.device;
        let max_buffer = ctx.limits.max_buffer_size;
        let mut buffers: Vec<Option<wgpu::Buffer>> =
            (0..program.layouts.len()).map(|_| None).collect();
        for r in program.roots() {
            let bytes = (root_words(program, r) * 4).max(4);
            if bytes > max_buffer {
                return Err(RuntimeError::Device(format!(
                    "layout node '{}' needs {} MiB, but {} allows at most {} MiB per buffer (max_buffer_size)",
                    program.layouts[r].node_id,
                    bytes >> 20,
                    ctx.info.name,
                    max_buffer >> 20
                )));
            }
            buffers[r.index()] = Some(dev.create_buffer(&wgpu::BufferDescriptor {
                label: Some(&program.layouts[r].node_id),
                size: bytes.div_ceil(4) * 4,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }));
        }
        let params_words = program
            .kernels
            .iter()
            .map(|(_, k)| k.params.len() as u32)
            .max()
            .unwrap_or(0);
        // Records are uniform buffers of vec4<u32> (see codegen::wgpu): whole
        // 16-byte rows, at the uniform offset alignment.
        let align = ctx.limits.min_uniform_buffer_offset_alignment.max(16) as u64;
        let record_bytes = ((word::HEADER + params_words).div_ceil(4) * 16) as u64;
        let record_stride = record_bytes.div_ceil(align) * align;
        let record_capacity = MAX_RECORDS_PER_SUBMIT;
        let records = dev.create_buffer(&wgpu::BufferDescriptor {
            label: Some("launch records"),
            size: record_stride * record_capacity,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let errors = dev.create_buffer(&wgpu::BufferDescriptor {
            label: Some("errors"),
            size: 16,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let compiled = Self::compile_all(program, &ctx, opts)?;
        let mut kernels = Vec::new();
        for ((_, k), cached) in program.kernels.iter().zip(compiled) {
            let scope = dev.push_error_scope(wgpu::ErrorFilter::Validation);
            let mut bind = vec![
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: &records,
                        offset: 0,
                        size: std::num::NonZeroU64::new(record_bytes),
                    }),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: errors.as_entire_binding(),
                },
            ];
            let code = &cached.code;
            for ((r, _), &n) in code.roots.iter().zip(&code.chunks) {
                let buffer = buffers[r.index()].as_ref().expect("roots have buffers");
                let words = root_words(program, *r).max(1);
                for j in 0..n as u64 {
                    // A split root: window j of the one buffer (codegen's module docs).
                    let resource = if n == 1 {
                        buffer.as_entire_binding()
                    } else {
                        let start = j * code.chunk_words;
                        wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                            buffer,
                            offset: start * 4,
                            size: std::num::NonZeroU64::new(
                                code.chunk_words.min(words - start) * 4,
                            ),
                        })
                    };
                    bind.push(wgpu::BindGroupEntry {
                        binding: bind.len() as u32,
                        resource,
                    });
                }
            }
            let bind_group = dev.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(&k.name),
                layout: &cached.layout,
                entries: &bind,
            });
            if let Some(e) = crate::platform::scope_error(scope, &ctx.errors) {
                return Err(RuntimeError::Compile {
                    node: k.name.clone(),
                    message: format!(
                        "node '{}': the wgpu backend rejected the kernel's bindings: {}",
                        k.name, e
                    ),
                });
            }
            kernels.push(Compiled { cached, bind_group });
        }
        let (indirect, indirect_args) =
            Self::indirect_launches(program, &ctx, &buffers, opts.workgroup_size)?;
        let timer = ctx.timestamps.then(|| {
            let qs = dev.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("kernel timer"),
                ty: wgpu::QueryType::Timestamp,
                count: 2,
            });
            let resolve = dev.create_buffer(&wgpu::BufferDescriptor {
                label: Some("timestamps"),
                size: 16,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            let read = dev.create_buffer(&wgpu::BufferDescriptor {
                label: Some("timestamps readback"),
                size: 16,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            (qs, resolve, read)
        });
        Ok(WgpuEngine {
            ctx,
            kernels,
            buffers,
            records,
            record_capacity,
            record_stride,
            errors,
            in_flight: Mutex::new(VecDeque::new()),
            spare_readbacks: Mutex::new(Vec::new()),
            fault_program: program.clone(),
            params_words,
            native_float_atomics: opts.native_float_atomics,
            workgroup_size: opts.workgroup_size,
            timer,
            indirect,
            indirect_args,
        })
    }

    /// The arguments buffer, the shader and one bind group per kernel with
    /// `count_from` (nothing when no kernel has one).
    #[allow(clippy::type_complexity)]
    fn indirect_launches(
        program: &Program,
        ctx: &WgpuContext,
        buffers: &[Option<wgpu::Buffer>],
        workgroup_size: u32,
    ) -> Result<
        (
            Vec<Option<IndirectLaunch>>,
            Option<(wgpu::Buffer, wgpu::ComputePipeline)>,
        ),
        RuntimeError,
    > {
        let mut out: Vec<Option<IndirectLaunch>> = program.kernels.iter().map(|_| None).collect();
        let users: Vec<(KernelId, DeviceCount)> = program
            .kernels
            .iter()
            .filter_map(|(h, k)| k.count_from.map(|c| (h, c)))
            .collect();
        if users.is_empty() {
            return Ok((out, None));
        }
        let dev = &ctx.device;
        let scope = dev.push_error_scope(wgpu::ErrorFilter::Validation);
        let wgsl = weft_codegen::wgpu::indirect::args_wgsl(workgroup_size);
        let module = dev.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("indirect dispatch arguments"),
            source: wgpu::ShaderSource::Wgsl(wgsl.into()),
        });
        let pipeline = dev.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("indirect dispatch arguments"),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        let args = dev.create_buffer(&wgpu::BufferDescriptor {
            label: Some("indirect dispatch arguments"),
            size: 16 * users.len() as u64,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::INDIRECT
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let layout = pipeline.get_bind_group_layout(0);
        let max_dim = ctx.limits.max_compute_workgroups_per_dimension as u64;
        for (n, (k, c)) in users.iter().enumerate() {
            let kernel = &program.kernels[*k];
            let shape = kernel.iteration_shape(program);
            let total: u64 = shape.iter().map(|&s| s as u64).product();
            let inner: u64 = shape.iter().skip(1).map(|&s| s as u64).product();
            let (gx_max, _) = grid(total, workgroup_size as u64, max_dim);
            let params = dev.create_buffer(&wgpu::BufferDescriptor {
                label: Some(&kernel.name),
                size: 16,
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            // Bind only a window around the count word: a root may be
            // larger than one binding allows.
            let root_buf = buffers[c.root.index()]
                .as_ref()
                .expect("roots have buffers");
            let align = ctx.limits.min_storage_buffer_offset_alignment.max(4) as u64;
            let window = (c.word * 4) / align * align;
            let window_bytes = (root_buf.size() - window).min(2 * align);
            let words = [
                (c.word - window / 4) as u32,
                inner as u32,
                gx_max as u32,
                4 * n as u32,
            ];
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            ctx.queue.write_buffer(&params, 0, &bytes);
            let bind_group = dev.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(&kernel.name),
                layout: &layout,
                entries: &[
                    wgpu::BindGroupEntry {
                        binding: 0,
                        resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                            buffer: root_buf,
                            offset: window,
                            size: std::num::NonZeroU64::new(window_bytes),
                        }),
                    },
                    wgpu::BindGroupEntry {
                        binding: 1,
                        resource: args.as_entire_binding(),
                    },
                    wgpu::BindGroupEntry {
                        binding: 2,
                        resource: params.as_entire_binding(),
                    },
                ],
            });
            out[k.index()] = Some(IndirectLaunch {
                offset: 16 * n as u64,
                bind_group,
            });
        }
        if let Some(e) = crate::platform::scope_error(scope, &ctx.errors) {
            return Err(RuntimeError::Device(format!(
                "the indirect dispatch shader was rejected on {}: {}",
                ctx.info.name, e
            )));
        }
        Ok((out, Some((args, pipeline))))
    }

    /// The storage buffer holding a root layout node's words (for GPU views).
    pub fn root_buffer(&self, root: LayoutId) -> Option<&wgpu::Buffer> {
        self.buffers[root.index()].as_ref()
    }

    /// Every kernel's pipeline, from the context's cache or compiled. The
    /// driver's shader compilation (LLVM on lavapipe) dominates a cold
    /// start, so cache misses compile on parallel threads (error scopes are
    /// per thread); the first error in kernel order is reported.
    fn compile_all(
        program: &Program,
        ctx: &WgpuContext,
        opts: &WgpuOptions,
    ) -> Result<Vec<Arc<CachedKernel>>, RuntimeError> {
        let keys: Vec<KernelKey> = program
            .kernels
            .iter()
            .map(|(_, k)| KernelKey::of_kernel(program, k, opts))
            .collect();
        let mut slots: Vec<Option<Arc<CachedKernel>>> =
            keys.iter().map(|key| ctx.pipelines.get(key)).collect();
        // One compilation per distinct missing key (tapes repeat kernels).
        let mut todo: Vec<(usize, KernelKey)> = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            if slots[i].is_none() && !todo.iter().any(|t| t.1 == *key) {
                todo.push((i, *key));
            }
        }
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .min(todo.len())
            .max(1);
        let kernels: Vec<&Kernel> = program.kernels.iter().map(|(_, k)| k).collect();
        let next = std::sync::atomic::AtomicUsize::new(0);
        let results: Mutex<Vec<(usize, Result<CachedKernel, RuntimeError>)>> =
            Mutex::new(Vec::new());
        let work = || loop {
            let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(&(i, _)) = todo.get(n) else { break };
            let r = Self::compile(program, kernels[i], ctx, opts);
            if let Ok(mut v) = results.lock() {
                v.push((i, r));
            }
        };
        if threads == 1 {
            // One thread compiles here (a browser page cannot start threads).
            work();
        } else {
            std::thread::scope(|scope| {
                for _ in 0..threads {
                    scope.spawn(work);
                }
            });
        }
        let mut results = results.into_inner().unwrap_or_default();
        results.sort_by_key(|r| r.0);
        let mut fresh: std::collections::HashMap<KernelKey, Arc<CachedKernel>> = Default::default();
        for (i, r) in results {
            let c = Arc::new(r?);
            ctx.pipelines.insert(keys[i], c.clone());
            fresh.insert(keys[i], c);
        }
        keys.iter()
            .zip(slots.iter_mut())
            .map(|(key, slot)| {
                slot.take()
                    .or_else(|| fresh.get(key).cloned())
                    .ok_or_else(|| {
                        RuntimeError::Device(
                            "a kernel's pipeline compilation did not finish".into(),
                        )
                    })
            })
            .collect()
    }

    fn compile(
        program: &Program,
        k: &Kernel,
        ctx: &WgpuContext,
        opts: &WgpuOptions,
    ) -> Result<CachedKernel, RuntimeError> {
        let dev = &ctx.device;
        let code = compile_kernel(program, k, opts).map_err(|e| RuntimeError::Compile {
            node: e.kernel.clone(),
            message: e.to_string(),
        })?;
        let scope = dev.push_error_scope(wgpu::ErrorFilter::Validation);
        // wgpu translates the module (naga's SPIR-V/MSL/HLSL writers) here; a
        // panic in there is caught and reported against the node.
        let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let desc = wgpu::ShaderModuleDescriptor {
                label: Some(&k.name),
                source: wgpu::ShaderSource::Naga(Cow::Owned(code.module.clone())),
            };
            let module = if code.loops_end {
                let mut checks = wgpu::ShaderRuntimeChecks::checked();
                checks.force_loop_bounding = false;
                // SAFETY: wgpu asks that a module created without loop
                // bounding has no infinite loop; `passes::termination`
                // proved that every loop of this kernel ends (see
                // `WgpuKernel::loops_end`). Every other check stays on.
                unsafe { dev.create_shader_module_trusted(desc, checks) }
            } else {
                dev.create_shader_module(desc)
            };
            let storage = |binding: u32, read_only: bool| wgpu::BindGroupLayoutEntry {
                binding,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Storage { read_only },
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            };
            let record = wgpu::BindGroupLayoutEntry {
                binding: 0,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Uniform,
                    has_dynamic_offset: true,
                    min_binding_size: None,
                },
                count: None,
            };
            let mut entries = vec![record, storage(1, false)];
            let bindings: u32 = code.chunks.iter().sum();
            for n in 0..bindings {
                entries.push(storage(2 + n, false));
            }
            let layout = dev.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some(&k.name),
                entries: &entries,
            });
            let pl = dev.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(&k.name),
                bind_group_layouts: &[Some(&layout)],
                immediate_size: 0,
            });
            let pipeline = dev.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(&k.name),
                layout: Some(&pl),
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache: None,
            });
            (layout, pipeline)
        }));
        let popped = crate::platform::scope_error(scope, &ctx.errors);
        let (layout, pipeline) = built.map_err(|p| RuntimeError::Compile {
            node: k.name.clone(),
            message: format!(
                "node '{}': internal error in the wgpu backend (please report it): {}",
                k.name,
                weft_codegen::panic_message(p.as_ref())
            ),
        })?;
        if let Some(e) = popped {
            return Err(RuntimeError::Compile {
                node: k.name.clone(),
                message: format!(
                    "node '{}': the wgpu backend rejected the kernel: {}",
                    k.name, e
                ),
            });
        }
        Ok(CachedKernel {
            code,
            pipeline,
            layout,
        })
    }

    pub fn write_words(&self, root: LayoutId, words: &[u32]) {
        if let Some(b) = &self.buffers[root.index()] {
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            self.ctx.queue.write_buffer(b, 0, &bytes);
        }
    }

    pub fn read_words(&self, root: LayoutId) -> Result<Vec<u32>, RuntimeError> {
        // Whatever ran before the read has to have succeeded for the words
        // to mean anything.
        self.retire(0)?;
        let Some(b) = &self.buffers[root.index()] else {
            return Ok(Vec::new());
        };
        let bytes = self.read_buffer(b, b.size())?;
        Ok(bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }

    /// Starts copying a root buffer back without waiting for it: the words
    /// arrive through `PendingRead::take` once the GPU has finished
    /// everything submitted so far (in a browser, frames later).
    pub fn start_read(&self, root: LayoutId) -> PendingRead {
        let state = Arc::new(Mutex::new(None));
        let Some(b) = &self.buffers[root.index()] else {
            return PendingRead::ready(Ok(Vec::new()));
        };
        let staging = self.ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size: b.size(),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = self
            .ctx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("readback"),
            });
        enc.copy_buffer_to_buffer(b, 0, &staging, 0, b.size());
        self.ctx.queue.submit([enc.finish()]);
        let note = state.clone();
        staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            if let Ok(mut m) = note.lock() {
                *m = Some(r);
            }
        });
        let _ = self.ctx.device.poll(wgpu::PollType::Poll);
        PendingRead::new(move || take_mapped(&staging, &state))
    }

    /// Retires the submits that have finished, reporting a fault among them,
    /// and says whether another frame fits within `FRAMES_IN_FLIGHT`
    /// without a wait. The web build asks before every frame.
    pub fn ready_for_frame(&self) -> Result<bool, RuntimeError> {
        self.retire(usize::MAX)?;
        Ok(self.in_flight.lock().map_or(0, |q| q.len()) < FRAMES_IN_FLIGHT)
    }

    /// Whether every submit so far has finished (faults reported), without waiting.
    pub fn finished(&self) -> Result<bool, RuntimeError> {
        self.retire(usize::MAX)?;
        Ok(self.in_flight.lock().map(|q| q.is_empty()).unwrap_or(true))
    }

    fn read_buffer(&self, b: &wgpu::Buffer, size: u64) -> Result<Vec<u8>, RuntimeError> {
        let dev = &self.ctx.device;
        let staging = dev.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = dev.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("readback"),
        });
        enc.copy_buffer_to_buffer(b, 0, &staging, 0, size);
        self.ctx.queue.submit([enc.finish()]);
        self.map_read(&staging)
    }

    fn map_read(&self, staging: &wgpu::Buffer) -> Result<Vec<u8>, RuntimeError> {
        let slice = staging.slice(..);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.ctx.wait()?;
        // Natively the wait ran the callback, or another thread's poll of
        // the shared device is running it right now (tests and the app share
        // one device): give that one a moment. In a browser it has not run
        // yet (reads there go through `start_read`), which is "no answer".
        let answer = match rx.try_recv() {
            Err(std::sync::mpsc::TryRecvError::Empty) if !crate::platform::MUST_NOT_WAIT => {
                // Keep polling while waiting, as `fault_words` does: the
                // other thread's poll may have returned without running the
                // callback (the window's surface timing out on a long
                // lavapipe frame), and then only a poll of ours runs it.
                self.ctx.wait()?;
                let t0 = Instant::now();
                loop {
                    match rx.try_recv() {
                        Err(std::sync::mpsc::TryRecvError::Empty)
                            if t0.elapsed() < std::time::Duration::from_secs(10) =>
                        {
                            let _ = self.ctx.device.poll(wgpu::PollType::Poll);
                            std::thread::sleep(std::time::Duration::from_micros(200));
                        }
                        other => break other,
                    }
                }
            }
            other => other,
        };
        match answer {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                return Err(RuntimeError::Device(format!(
                    "reading back from the GPU failed: {}",
                    e
                )))
            }
            Err(_) => {
                // wgpu drops the callback of a refused map and reports why
                // as an uncaptured error.
                let why = self.ctx.take_errors().join("; ");
                return Err(RuntimeError::Device(format!(
                    "reading back from the GPU failed: no answer{}",
                    if why.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", why)
                    }
                )));
            }
        }
        let data = slice
            .get_mapped_range()
            .map_err(|e| RuntimeError::Device(format!("reading back from the GPU failed: {}", e)))?
            .to_vec();
        staging.unmap();
        Ok(data)
    }

    /// How profiled launches are timed.
    pub fn timing_description(&self) -> &'static str {
        if self.timer.is_some() {
            "GPU timestamps"
        } else if self.ctx.software {
            "wall time from submit to completion (a software adapter's GPU timestamps do not measure its work)"
        } else {
            "wall time from submit to completion (this adapter has no GPU timestamps)"
        }
    }

    /// Runs launches in order in as few submits as possible; with `timing`,
    /// one submit per launch, timed by GPU timestamps when the adapter has
    /// them, otherwise by wall time from submit to completion.
    fn run_launches(
        &self,
        program: &Program,
        launches: &[LaunchRecord],
        timing: bool,
    ) -> Result<Vec<(KernelId, Duration)>, RuntimeError> {
        let mut times = Vec::new();
        if timing {
            // Profiled launches are timed alone.
            self.retire(0)?;
        }
        let chunk = if timing {
            1
        } else {
            self.record_capacity as usize
        };
        for part in launches.chunks(chunk) {
            let mut data = vec![0u8; (self.record_stride as usize) * part.len()];
            let mut dispatches = Vec::new();
            for (n, rec) in part.iter().enumerate() {
                let k = rec.kernel;
                let kernel = &program.kernels[k];
                let total = rec.total();
                let max_dim = self.ctx.limits.max_compute_workgroups_per_dimension as u64;
                // A workgroup kernel's blocks are its dispatch's workgroups.
                let wg = kernel
                    .workgroup
                    .as_ref()
                    .map_or(self.workgroup_size, |w| w.size) as u64;
                let (gx, gy) = grid(total, wg, max_dim);
                if gy > max_dim {
                    return Err(RuntimeError::Device(format!(
                        "node '{}': {} iterations exceed what one dispatch can cover on {}",
                        kernel.name, total, self.ctx.info.name
                    )));
                }
                let words = rec.words((gx * wg) as u32, self.params_words);
                let at = n * self.record_stride as usize;
                for (i, w) in words.iter().enumerate() {
                    data[at + i * 4..at + i * 4 + 4].copy_from_slice(&w.to_le_bytes());
                }
                dispatches.push((
                    k,
                    (n as u64 * self.record_stride) as u32,
                    gx as u32,
                    gy as u32,
                ));
            }
            self.ctx.queue.write_buffer(&self.records, 0, &data);
            let mut enc = self
                .ctx
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("frame"),
                });
            let timer = if timing { self.timer.as_ref() } else { None };
            // Launches proven to only zero a word range (`Kernel::zero_fill`)
            // become buffer fills between compute passes; the rest run in
            // as few passes as possible. A timed fill is bracketed by two
            // empty passes that carry its timestamps.
            let mut at = 0;
            while at < dispatches.len() {
                let fill = program.kernels[dispatches[at].0].zero_fill;
                if let Some(z) = fill {
                    let buffer = self.buffers[z.root.index()]
                        .as_ref()
                        .expect("roots have buffers");
                    let stamp = |begin: Option<u32>, end: Option<u32>| {
                        timer.map(|(qs, _, _)| wgpu::ComputePassTimestampWrites {
                            query_set: qs,
                            beginning_of_pass_write_index: begin,
                            end_of_pass_write_index: end,
                        })
                    };
                    if timer.is_some() {
                        enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                            label: Some("fill start"),
                            timestamp_writes: stamp(Some(0), None),
                        });
                    }
                    enc.clear_buffer(buffer, z.first * 4, Some(z.words * 4));
                    if timer.is_some() {
                        enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                            label: Some("fill end"),
                            timestamp_writes: stamp(None, Some(1)),
                        });
                    }
                    at += 1;
                    continue;
                }
                let end = dispatches[at..]
                    .iter()
                    .position(|d| program.kernels[d.0].zero_fill.is_some())
                    .map_or(dispatches.len(), |n| at + n);
                let timestamp_writes = timer.map(|(qs, _, _)| wgpu::ComputePassTimestampWrites {
                    query_set: qs,
                    beginning_of_pass_write_index: Some(0),
                    end_of_pass_write_index: Some(1),
                });
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("kernels"),
                    timestamp_writes,
                });
                for &(k, offset, gx, gy) in &dispatches[at..end] {
                    let c = &self.kernels[k.index()];
                    match (&self.indirect[k.index()], &self.indirect_args) {
                        (Some(ind), Some((args, args_pipeline))) => {
                            // Arguments from the device word, then the launch.
                            pass.set_pipeline(args_pipeline);
                            pass.set_bind_group(0, &ind.bind_group, &[]);
                            pass.dispatch_workgroups(1, 1, 1);
                            pass.set_pipeline(&c.cached.pipeline);
                            pass.set_bind_group(0, &c.bind_group, &[offset]);
                            pass.dispatch_workgroups_indirect(args, ind.offset);
                        }
                        _ => {
                            pass.set_pipeline(&c.cached.pipeline);
                            pass.set_bind_group(0, &c.bind_group, &[offset]);
                            pass.dispatch_workgroups(gx, gy, 1);
                        }
                    }
                }
                drop(pass);
                at = end;
            }
            if let Some((qs, resolve, read)) = timer {
                enc.resolve_query_set(qs, 0..2, resolve, 0);
                enc.copy_buffer_to_buffer(resolve, 0, read, 0, 16);
            }
            // The error words come back with the launches' own submit,
            // without a wait of their own (`FRAMES_IN_FLIGHT`).
            let can_fault = crate::platform::MUST_NOT_WAIT
                || part.iter().any(|rec| {
                    !self.fault_program.kernels[rec.kernel]
                        .fault_sites
                        .is_empty()
                });
            let readback = can_fault.then(|| self.readback_buffer());
            if let Some(rb) = &readback {
                enc.copy_buffer_to_buffer(&self.errors, 0, rb, 0, 16);
            }
            let t = timing.then(Instant::now);
            let submission = self.ctx.queue.submit([enc.finish()]);
            self.track(readback, submission, part);
            if !timing {
                self.retire(FRAMES_IN_FLIGHT)?;
                continue;
            }
            self.retire(0)?;
            let wall = t.map(|t| t.elapsed()).unwrap_or_default();
            let d = match timer {
                Some((_, _, read)) => {
                    let b = self.map_read(read)?;
                    let ts = |i: usize| {
                        u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"))
                    };
                    let ns = ts(1).saturating_sub(ts(0)) as f64
                        * self.ctx.queue.get_timestamp_period() as f64;
                    Duration::from_nanos(ns as u64)
                }
                None => wall,
            };
            times.push((part[0].kernel, d));
        }
        Ok(times)
    }

    fn readback_buffer(&self) -> wgpu::Buffer {
        let spare = self.spare_readbacks.lock().ok().and_then(|mut v| v.pop());
        spare.unwrap_or_else(|| {
            self.ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("errors readback"),
                size: 16,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })
    }

    /// Maps a submit's error words as soon as the GPU is done with it.
    fn track(
        &self,
        readback: Option<wgpu::Buffer>,
        submission: wgpu::SubmissionIndex,
        part: &[LaunchRecord],
    ) {
        let mapped = Arc::new(Mutex::new(None));
        let note = mapped.clone();
        if let Some(rb) = &readback {
            rb.slice(..).map_async(wgpu::MapMode::Read, move |r| {
                if let Ok(mut m) = note.lock() {
                    *m = Some(r);
                }
            });
        }
        let kernels = part.iter().map(|rec| rec.kernel).collect();
        if let Ok(mut q) = self.in_flight.lock() {
            q.push_back(InFlight {
                readback,
                submission,
                kernels,
                mapped,
            });
        }
    }

    /// Checks the error words of finished submits, oldest first, waiting
    /// for the oldest ones until at most `keep` remain in flight. The first
    /// fault found is the error; the submits after it are dropped (their
    /// words may repeat it) and the error words are cleared.
    fn retire(&self, keep: usize) -> Result<(), RuntimeError> {
        let lost = || RuntimeError::Device("the GPU's error words were lost".into());
        let _ = self.ctx.device.poll(wgpu::PollType::Poll);
        loop {
            let mut q = self.in_flight.lock().map_err(|_| lost())?;
            let Some(front) = q.front() else {
                return Ok(());
            };
            // Without error words, a submit is known to be done only by
            // waiting for it (which returns at once when it is).
            let done =
                front.readback.is_some() && front.mapped.lock().map_err(|_| lost())?.is_some();
            // A page cannot wait: an unfinished submit stays in flight (a
            // frame of more launches than one submit holds makes several),
            // and `ready_for_frame` holds the next frame until they drain.
            // Taking it as finished read error words that had not come back
            // ("no answer": mass_spring_ad_ckpt's 2,000-launch frame).
            if !done && (q.len() <= keep || crate::platform::MUST_NOT_WAIT) {
                return Ok(());
            }
            if !done {
                let submission = front.submission.clone();
                drop(q);
                self.ctx
                    .device
                    .poll(wgpu::PollType::Wait {
                        submission_index: Some(submission),
                        timeout: None,
                    })
                    .map_err(|e| {
                        RuntimeError::Device(format!("waiting for the GPU failed: {}", e))
                    })?;
                q = self.in_flight.lock().map_err(|_| lost())?;
            }
            let f = q.pop_front().ok_or_else(lost)?;
            drop(q);
            let fault = match f.readback {
                Some(readback) => self.fault_words(readback, &f.mapped)?,
                None => Vec::new(),
            };
            if let Some(e) = self.ctx.take_errors().into_iter().next() {
                let node = f
                    .kernels
                    .first()
                    .map(|&k| self.fault_program.kernels[k].name.clone())
                    .unwrap_or_default();
                self.drop_in_flight();
                return Err(RuntimeError::Device(format!(
                    "node '{}': GPU error: {}",
                    node, e
                )));
            }
            if fault.first().is_some_and(|&site| site != 0) {
                self.drop_in_flight();
                self.ctx.queue.write_buffer(&self.errors, 0, &[0u8; 16]);
                return Err(self.fault_error(&f.kernels, &fault));
            }
        }
    }

    /// The error words of a finished submit, and its readback buffer back
    /// to the spares.
    fn fault_words(
        &self,
        readback: wgpu::Buffer,
        mapped: &Mutex<Option<Result<(), wgpu::BufferAsyncError>>>,
    ) -> Result<Vec<u32>, RuntimeError> {
        let lost = || RuntimeError::Device("the GPU's error words were lost".into());
        let mut state = mapped.lock().map_err(|_| lost())?.take();
        // The submit is done, but on a device shared with the window the
        // window thread's poll may be the one running the map callback
        // right now (mpm3d in the app: "no answer" at frame 0): give it a
        // moment, as `map_read` does. A page cannot wait, and never gets here
        // with an unfinished map (`retire` keeps such a submit in flight).
        if state.is_none() && !crate::platform::MUST_NOT_WAIT {
            let t0 = Instant::now();
            while state.is_none() && t0.elapsed() < std::time::Duration::from_secs(10) {
                let _ = self.ctx.device.poll(wgpu::PollType::Poll);
                std::thread::sleep(std::time::Duration::from_micros(200));
                state = mapped.lock().map_err(|_| lost())?.take();
            }
        }
        match state {
            Some(Ok(())) => {}
            Some(Err(e)) => {
                // A refused map usually follows a refused submit: say why.
                let why = self.ctx.take_errors().join("; ");
                return Err(RuntimeError::Device(format!(
                    "reading back from the GPU failed: {}{}",
                    e,
                    if why.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", why)
                    }
                )));
            }
            None => {
                return Err(RuntimeError::Device(
                    "reading back from the GPU failed: no answer".into(),
                ))
            }
        }
        let fault: Vec<u32> = {
            let view = readback.slice(..).get_mapped_range().map_err(|e| {
                RuntimeError::Device(format!("reading back from the GPU failed: {}", e))
            })?;
            view.chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        };
        readback.unmap();
        if let Ok(mut spare) = self.spare_readbacks.lock() {
            spare.push(readback);
        }
        Ok(fault)
    }

    /// Forgets the submits in flight after a failure (their words are waited
    /// for, so that their buffers are not mapped when reused).
    fn drop_in_flight(&self) {
        let _ = self.ctx.wait();
        if let Ok(mut q) = self.in_flight.lock() {
            q.clear();
        }
    }

    /// The fault in error words `w` (site + 1, value, kernel index) of a
    /// submit that ran `kernels`: fault sites are numbered per kernel.
    fn fault_error(&self, kernels: &[KernelId], w: &[u32]) -> RuntimeError {
        let program = &self.fault_program;
        let (site, value) = ((w[0] - 1) as usize, w[1]);
        let failed = kernels
            .iter()
            .find(|k| k.index() == w[2] as usize)
            .map(|&k| &program.kernels[k]);
        match failed.and_then(|k| Some((k, k.fault_sites.get(site)?))) {
            Some((kernel, s)) => RuntimeError::Kernel {
                node: kernel.node(s.span).to_string(),
                line: s.span.line,
                col: s.span.col,
                message: s.message(program, value),
            },
            None => RuntimeError::Device(format!("a kernel reported fault {:#x}", w[0])),
        }
    }
}

impl Engine for WgpuEngine {
    fn on_device(&self) -> bool {
        true
    }

    fn ready_for_frame(&self) -> Result<bool, RuntimeError> {
        WgpuEngine::ready_for_frame(self)
    }

    fn finished(&self) -> Result<bool, RuntimeError> {
        WgpuEngine::finished(self)
    }

    fn start_read(&self, root: LayoutId) -> PendingRead {
        WgpuEngine::start_read(self, root)
    }

    fn device_buffer(&self, root: LayoutId) -> Option<&wgpu::Buffer> {
        self.root_buffer(root)
    }

    fn views_on_device(&self) -> bool {
        true
    }

    fn write_root(&self, root: LayoutId, words: &[u32]) -> Result<(), RuntimeError> {
        self.write_words(root, words);
        Ok(())
    }

    fn read_root(&self, root: LayoutId) -> Result<Vec<u32>, RuntimeError> {
        self.read_words(root)
    }

    fn run(
        &mut self,
        program: &Program,
        launches: &[LaunchRecord],
        timing: bool,
    ) -> Result<Vec<(KernelId, Duration)>, RuntimeError> {
        self.run_launches(program, launches, timing)
    }

    fn sync(&mut self) -> Result<(), RuntimeError> {
        self.retire(0)
    }

    /// Frames still in flight belong to the run being thrown away: they
    /// finish, and a fault among them is not reported after the reset.
    fn reset(&mut self, program: &Program) -> Result<(), RuntimeError> {
        self.drop_in_flight();
        self.ctx.queue.write_buffer(&self.errors, 0, &[0u8; 16]);
        crate::engine::write_initial_values(self, program)
    }

    fn frames_in_flight(&self) -> usize {
        FRAMES_IN_FLIGHT
    }

    fn timing_method(&self) -> &'static str {
        self.timing_description()
    }

    fn device_name(&self) -> Option<String> {
        Some(format!(
            "{}, f32 atomics: {}, kernel timing: {}",
            self.ctx.describe(),
            if self.native_float_atomics {
                "native"
            } else {
                "compare-exchange loop"
            },
            self.timing_description()
        ))
    }
}

/// The words of a mapped staging buffer once its mapping has arrived
/// (`None` until then), handed over once.
fn take_mapped(
    staging: &wgpu::Buffer,
    state: &Mutex<Option<Result<(), wgpu::BufferAsyncError>>>,
) -> Option<Result<Vec<u32>, RuntimeError>> {
    let state = state.lock().ok()?.take()?;
    let read = state
        .map_err(|e| e.to_string())
        .and_then(|()| {
            let view = staging
                .slice(..)
                .get_mapped_range()
                .map_err(|e| e.to_string())?;
            Ok(view
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect())
        })
        .map_err(|e| {
            RuntimeError::Device(format!("reading a field back from the GPU failed: {}", e))
        });
    staging.unmap();
    Some(read)
}
