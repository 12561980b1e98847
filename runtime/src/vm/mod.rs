//! The reference VM backend: kernels flattened by `weft_codegen::vm`,
//! executed by the interpreter in `interp.rs` over host field memory
//! (`memory.rs`), in parallel with rayon. Every launch is timed.

pub mod interp;

use crate::engine::Engine;
use crate::memory::FieldMemory;
use crate::memory_limit::MemoryLimits;
use crate::spec::{codegen_error, Backend, BackendSpec, Prepared, SimOptions};
use crate::RuntimeError;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
// std's clock panics in WebAssembly; web-time is std's natively.
use web_time::Instant;
use weft_codegen::launch::LaunchRecord;
use weft_codegen::vm::{compile_kernel, VmKernel};
use weft_ir::ir::target::TargetCaps;
use weft_ir::ir::{FieldId, KernelId, LayoutId, Program};

pub struct VmEngine {
    kernels: Vec<VmKernel>,
    memory: FieldMemory,
    /// Worker threads when a count was asked for (`None`: rayon's global pool).
    pool: Option<rayon::ThreadPool>,
}

impl VmEngine {
    /// Compiles every kernel and allocates field memory with initial values.
    pub fn new(program: &Program, threads: Option<usize>) -> Result<VmEngine, RuntimeError> {
        let kernels = program
            .kernels
            .iter()
            .map(|(_, k)| compile_kernel(program, k))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| RuntimeError::Compile {
                node: e.kernel.clone(),
                message: e.to_string(),
            })?;
        let pool = match threads {
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
        Ok(VmEngine {
            kernels,
            memory: FieldMemory::new(program),
            pool,
        })
    }
}

impl Engine for VmEngine {
    fn write_root(&self, root: LayoutId, words: &[u32]) -> Result<(), RuntimeError> {
        for (cell, &w) in self.memory.buffers[root.index()].iter().zip(words) {
            cell.store(w, Ordering::Relaxed);
        }
        Ok(())
    }

    fn read_root(&self, root: LayoutId) -> Result<Vec<u32>, RuntimeError> {
        Ok(self.memory.root_words(root))
    }

    fn run(
        &mut self,
        program: &Program,
        launches: &[LaunchRecord],
        _timing: bool,
    ) -> Result<Vec<(KernelId, Duration)>, RuntimeError> {
        let mut times = Vec::with_capacity(launches.len());
        for rec in launches {
            let shape = crate::memory::launch_shape(program, &self.memory, rec);
            let kernel = &self.kernels[rec.kernel.index()];
            let buffers: Vec<&[AtomicU32]> = kernel
                .roots
                .iter()
                .map(|r| self.memory.buffers[r.index()].as_slice())
                .collect();
            let l = interp::Launch {
                program,
                kernel,
                buffers,
                params: &rec.params,
                frame: rec.frame,
                seed: rec.seed,
                launch_index: rec.launch_index,
                shape: &shape,
            };
            let t = Instant::now();
            match &self.pool {
                Some(pool) => pool.install(|| interp::launch(&l))?,
                None => interp::launch(&l)?,
            }
            times.push((rec.kernel, t.elapsed()));
        }
        Ok(times)
    }

    fn read_field(&self, program: &Program, field: FieldId) -> Result<Vec<u32>, RuntimeError> {
        Ok(self.memory.read_field(program, field))
    }

    fn write_field(
        &self,
        program: &Program,
        field: FieldId,
        words: &[u32],
    ) -> Result<(), RuntimeError> {
        self.memory.write_field(program, field, words)
    }

    fn reset(&mut self, program: &Program) -> Result<(), RuntimeError> {
        self.memory.reset(program);
        Ok(())
    }
}

/// The reference VM as the registry lists it.
pub struct VmSpec;

#[allow(non_upper_case_globals)]
impl Backend {
    /// The reference VM: IR flattened to a register machine, interpreted,
    /// multi-threaded with rayon. The correctness oracle for every other backend.
    pub const Vm: Backend = Backend::of(&VmSpec);
}

impl BackendSpec for VmSpec {
    fn name(&self) -> &'static str {
        "vm"
    }

    fn summary(&self) -> &'static str {
        "reference interpreter"
    }

    fn record_name(&self) -> &'static str {
        "cpu"
    }

    fn caps(&self) -> TargetCaps {
        weft_codegen::vm::CAPS
    }

    fn prepare(&self, opts: &SimOptions) -> Result<Prepared, RuntimeError> {
        Ok(Prepared::tuned(Backend::Vm, opts))
    }

    fn open(&self, program: &Program, opts: &SimOptions) -> Result<Box<dyn Engine>, RuntimeError> {
        MemoryLimits::cpu(opts.max_memory).check(program)?;
        Ok(Box::new(VmEngine::new(program, opts.threads)?))
    }

    fn compile(&self, program: &Program) -> Result<(), RuntimeError> {
        if !self.caps().covers(&program.target) {
            return Ok(());
        }
        for (_, k) in program.kernels.iter() {
            compile_kernel(program, k).map_err(codegen_error)?;
        }
        Ok(())
    }
}
