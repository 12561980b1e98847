//! The wgpu backend as the registry lists it: what it asks of the pass
//! pipeline (its unroll budget, its capabilities on the device it opens),
//! how `auto` and the app share its device, and what `weft check` builds
//! for it. Its engine is `wgpu_backend.rs`, which sees only compiled IR.

use crate::engine::Engine;
use crate::spec::{check_pipeline, codegen_error, Backend, BackendSpec, Prepared, SimOptions};
use crate::wgpu_backend::WgpuEngine;
use crate::wgpu_context::{AdapterChoice, WgpuContext, LLVMPIPE_LOOP_TRIPS};
use crate::RuntimeError;
use std::sync::Arc;
use weft_codegen::wgpu::WgpuOptions;
use weft_ir::ir::target::TargetCaps;
use weft_ir::ir::Program;
use weft_ir::passes::{unroll::UnrollOptions, PassOptions};

/// The wgpu backend as the registry lists it.
pub struct WgpuSpec;

#[allow(non_upper_case_globals)]
impl Backend {
    /// Compute pipelines through wgpu (Vulkan, Metal, DX12, GL; lavapipe on CPU-only machines).
    pub const Wgpu: Backend = Backend::of(&WgpuSpec);
}

impl WgpuSpec {
    /// Prepared on `ctx`: the adapter decides whether f32 atomic add is
    /// native, and the pipeline must know before `legalize`.
    fn prepare_on(&self, ctx: Arc<WgpuContext>, opts: &SimOptions) -> Prepared {
        let mut passes = self.tune(&opts.passes);
        passes.target =
            weft_codegen::wgpu::caps(ctx.float_atomics && !opts.force_cas_float_atomics);
        passes.target.loop_trip_limit = ctx.loop_trip_limit();
        passes.target.lane_max = ctx.subgroups && passes.target.loop_trip_limit.is_some();
        Prepared {
            backend: Backend::Wgpu,
            opts: SimOptions {
                backend: Backend::Wgpu,
                passes,
                gpu: Some(ctx),
                ..opts.clone()
            },
        }
    }
}

impl BackendSpec for WgpuSpec {
    fn name(&self) -> &'static str {
        "wgpu"
    }

    fn summary(&self) -> &'static str {
        "compute shaders through wgpu (Vulkan, Metal, DX12, WebGPU)"
    }

    fn shares_window_gpu(&self) -> bool {
        true
    }

    /// Without a device: the portable compare-exchange loop for f32 atomics.
    fn caps(&self) -> TargetCaps {
        weft_codegen::wgpu::caps(false)
    }

    fn tune(&self, passes: &PassOptions) -> PassOptions {
        PassOptions {
            unroll: UnrollOptions::STENCILS,
            target: self.caps(),
            ..passes.clone()
        }
    }

    /// Opens the device (any adapter, lavapipe included) unless `opts`
    /// share one.
    fn prepare(&self, opts: &SimOptions) -> Result<Prepared, RuntimeError> {
        let ctx = match &opts.gpu {
            Some(c) => c.clone(),
            None => Arc::new(WgpuContext::new(AdapterChoice::Any)?),
        };
        Ok(self.prepare_on(ctx, opts))
    }

    /// `auto` on the shared context or a hardware adapter.
    fn auto_candidate(&self, opts: &SimOptions) -> Option<Result<Prepared, RuntimeError>> {
        let ctx = match &opts.gpu {
            Some(c) => c.clone(),
            None => Arc::new(WgpuContext::new(AdapterChoice::HardwareOnly).ok()?),
        };
        Some(Ok(self.prepare_on(ctx, opts)))
    }

    fn open(&self, program: &Program, opts: &SimOptions) -> Result<Box<dyn Engine>, RuntimeError> {
        let ctx = match &opts.gpu {
            Some(c) => c.clone(),
            None => Arc::new(WgpuContext::new(AdapterChoice::Any)?),
        };
        Ok(Box::new(WgpuEngine::open(program, ctx, opts)?))
    }

    /// The naga module of every kernel, validated (with native f32 atomic
    /// add when the program was legalized for it).
    fn compile(&self, program: &Program) -> Result<(), RuntimeError> {
        let native_float_atomics = program.target.f32_atomic_add;
        if !weft_codegen::wgpu::caps(native_float_atomics).covers(&program.target) {
            return Ok(());
        }
        let opts = WgpuOptions {
            native_float_atomics,
            ..Default::default()
        };
        for (_, k) in program.kernels.iter() {
            weft_codegen::wgpu::check_kernel(program, k, &opts).map_err(codegen_error)?;
        }
        Ok(())
    }

    /// Twice: once as on lavapipe (its loop trip counters, compare-exchange
    /// float atomics), once with native f32 atomic add.
    fn check_offline(&self, program: &Program, passes: &PassOptions) -> Result<(), RuntimeError> {
        let lavapipe = TargetCaps {
            loop_trip_limit: Some(LLVMPIPE_LOOP_TRIPS),
            lane_max: true,
            ..weft_codegen::wgpu::caps(false)
        };
        for target in [lavapipe, weft_codegen::wgpu::caps(true)] {
            let passes = PassOptions {
                target,
                ..self.tune(passes)
            };
            check_pipeline(self, program, &passes)?;
        }
        Ok(())
    }
}
