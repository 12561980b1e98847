//! The compiled CPU backend (`--backend cpu`): runs kernels that
//! `weft_codegen::jit` compiled to native code with Cranelift.
//!
//! A launch splits the kernel's linear range into chunks and runs them on
//! rayon's pool; each chunk is one call of the kernel's chunk function, which
//! loops over its iterations without leaving native code. Fields live in the
//! same `FieldMemory` as the interpreter's (32-bit words; plain accesses are
//! plain loads/stores, `+=` on fields real atomic read-modify-writes).
//!
//! Compiled kernels are cached by content for the life of the process: an
//! unchanged kernel in an edited graph (or a reopened graph) is not
//! recompiled. With one worker thread, iterations run in order, so even
//! float atomics add in the interpreter's order and results repeat exactly.

use crate::kernel_cache::{Keep, KernelCache, KernelKey};
use crate::RuntimeError;
use rayon::prelude::*;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use weft_codegen::jit::{compile_kernel, ChunkFn, JitCtx, JitFault, JitKernel, JitOptions};
use weft_codegen::CodegenError;
use weft_ir::ir::{Kernel, Program};

/// Native code compiled by this process, kept while a simulation holds it.
fn cache() -> &'static KernelCache<JitKernel> {
    static CACHE: OnceLock<KernelCache<JitKernel>> = OnceLock::new();
    CACHE.get_or_init(|| KernelCache::new(Keep::WhileUsed))
}

/// Kernels compiled by this process (cache misses), for tests and diagnostics.
pub fn compiled() -> usize {
    cache().compiled()
}

/// Compiles `kernel`, or returns the cached code for an identical kernel.
pub fn compile_cached(
    program: &Program,
    kernel: &Kernel,
    opts: &JitOptions,
) -> Result<Arc<JitKernel>, CodegenError> {
    cache().get_or_compile(KernelKey::of_kernel(program, kernel, opts), || {
        compile_kernel(program, kernel, opts)
    })
}

pub struct Launch<'a> {
    /// The program the kernel came from: fault messages name its fields and nodes.
    pub program: &'a Program,
    pub kernel: &'a JitKernel,
    /// Buffers in `kernel.roots` order.
    pub buffers: Vec<&'a [AtomicU32]>,
    pub params: &'a [u32],
    pub frame: i32,
    pub seed: u32,
    /// Earlier launches of this kernel in the run (feeds `random()`).
    pub launch_index: u32,
    /// Worker threads of the pool the launch may use.
    pub threads: usize,
    /// Iterations to run: the first `total` of the kernel's range (all of
    /// it, or fewer for a launch bounded by `Kernel::count_from`).
    pub total: u64,
}

/// The context shared by the worker threads of one launch.
struct Shared(JitCtx);
// SAFETY: the pointers in the context point at data borrowed for the whole
// launch (buffers of atomics, parameter words) that generated code only reads
// or accesses word-wise (plain loads/stores as relaxed atomics, real atomics).
unsafe impl Sync for Shared {}
impl Shared {
    fn get(&self) -> &JitCtx {
        &self.0
    }
}

/// Iterations per chunk: enough chunks for load balance, few enough calls.
fn chunk_len(total: u64, threads: usize) -> u64 {
    (total / (threads as u64 * 16)).clamp(64, 1 << 16)
}

/// Launches with fewer iterations, or less estimated work (iterations ×
/// `JitKernel::cost`), run on the calling thread alone: waking the pool and
/// waiting for it costs tens of microseconds, more than such a launch takes
/// (a mass-spring step's kernels are thousands of launches of a few
/// thousand iterations each).
const SERIAL_BELOW: u64 = 1024;
const SERIAL_WORK_BELOW: u64 = 1 << 21;
/// Wide launches (a grid sweep: mpm88's `clear_grid` and `grid_update`,
/// 16384 cells of a few instructions each) run on the pool from less
/// work: launched from a worker (`JitEngine::run`), splitting them costs
/// little, keeps the other worker busy instead of going to sleep between
/// the particle kernels, and halves what was a quarter of mpm88's frame
/// on one thread. Narrower launches (mass-spring's 3807 springs) keep
/// the bound above.
const WIDE: u64 = 8192;
const WIDE_WORK_BELOW: u64 = 1 << 18;

/// Whether a launch runs on the calling thread (see [`SERIAL_BELOW`]).
fn runs_serially(kernel: &JitKernel, total: u64, threads: usize) -> bool {
    let work = total.saturating_mul(kernel.cost);
    threads <= 1
        || total < SERIAL_BELOW
        || work
            < if total >= WIDE {
                WIDE_WORK_BELOW
            } else {
                SERIAL_WORK_BELOW
            }
}

/// A scratch buffer and the fill word it is back at when unused.
type Scratch = (u32, Vec<u32>);

/// Scratch buffers for privatised scatters, reused across launches: each
/// is back at its fill word after the reduction that used it.
fn scratch() -> &'static Mutex<Vec<Scratch>> {
    static POOL: OnceLock<Mutex<Vec<Scratch>>> = OnceLock::new();
    POOL.get_or_init(|| Mutex::new(Vec::new()))
}

/// What a private copy starts as, and is reset to: the identity of its
/// adds. For floats that is -0.0, not +0.0 (`x + -0.0` is `x` for every
/// `x`, -0.0 included), so the reduction adds every word without testing
/// it, in a loop the compiler vectorises.
fn fill_word(float: bool) -> u32 {
    if float {
        (-0.0f32).to_bits()
    } else {
        0
    }
}

fn take_filled(len: usize, fill: u32) -> Vec<u32> {
    let mut pool = scratch().lock().unwrap_or_else(|e| e.into_inner());
    match pool.iter().position(|(f, b)| *f == fill && b.len() == len) {
        Some(i) => pool.swap_remove(i).1,
        None => vec![fill; len],
    }
}

fn give_back(bufs: Vec<Scratch>) {
    let mut pool = scratch().lock().unwrap_or_else(|e| e.into_inner());
    pool.extend(bufs);
    // Keep a bounded number of scratch buffers.
    let n = pool.len();
    if n > 32 {
        pool.drain(..n - 32);
    }
}

/// Adds a private copy's words into the shared ones and resets the copy to
/// its fill word.
fn add_into(shared: &mut [u32], private: &mut [u32], float: bool) {
    if float {
        for (s, p) in shared.iter_mut().zip(private.iter_mut()) {
            *s = (f32::from_bits(*s) + f32::from_bits(*p)).to_bits();
        }
    } else {
        for (s, p) in shared.iter_mut().zip(private.iter()) {
            *s = s.wrapping_add(*p);
        }
    }
    private.fill(fill_word(float));
}

/// Raw pointers made shareable for the disjoint-range reduction.
struct Ptrs(Vec<*mut u32>);
// SAFETY: buffers are shared as during any launch (word-wise accesses, real
// atomics where threads meet); private copies are each used by one worker,
// and the reduction's workers touch disjoint ranges of words.
unsafe impl Sync for Ptrs {}
impl Ptrs {
    fn get(&self) -> &[*mut u32] {
        &self.0
    }
}

fn fault_error(program: &Program, kernel: &JitKernel, fault: JitFault) -> RuntimeError {
    let site = kernel.sites.get(fault.site as usize);
    RuntimeError::Kernel {
        node: weft_ir::ir::node_of(&kernel.name, &kernel.fused, site.map_or(0, |s| s.span.part))
            .to_string(),
        line: site.map(|s| s.span.line).unwrap_or(0),
        col: site.map(|s| s.span.col).unwrap_or(0),
        message: site
            .map(|s| s.message(program, fault.value as u32))
            .unwrap_or_else(|| "internal error: unknown fault site".into()),
    }
}

/// Runs one launch on rayon's current pool:
/// - on one thread (or a small range): the serial variant, atomics demoted
///   to plain read-modify-writes — bit-identical to the interpreter on one thread;
/// - when the kernel scatters with atomic adds into buffers small enough to
///   copy (`JitKernel::private`): chunks over the pool, each worker adding
///   into its own private copy (the first to arrive into the shared
///   buffers), the copies then added into the shared buffers. Float sums
///   then depend on which worker ran which chunk, as with real atomics;
/// - otherwise: chunks with real atomics.
pub fn launch(l: &Launch) -> Result<(), RuntimeError> {
    let total = l.total;
    if total == 0 {
        return Ok(());
    }
    let ptrs = Ptrs(l.buffers.iter().map(|b| b.as_ptr() as *mut u32).collect());
    let lens: Vec<u64> = l.buffers.iter().map(|b| b.len() as u64).collect();
    let make_ctx = |buffers: &[*mut u32]| JitCtx {
        buffers: buffers.as_ptr(),
        lens: lens.as_ptr(),
        params: l.params.as_ptr(),
        frame: l.frame,
        seed: l.seed,
        launch_index: l.launch_index,
        _pad: 0,
    };
    let call = |f: ChunkFn, ctx: &JitCtx, start: u64, end: u64| -> Result<(), JitFault> {
        let mut fault = JitFault::default();
        // SAFETY: `f` was compiled for this kernel's buffers (in
        // `kernel.roots` order, as passed) and parameters; it checks every
        // word address against `lens` before touching memory.
        let status = unsafe { f(ctx, start, end, &mut fault) };
        if status == 0 {
            Ok(())
        } else {
            Err(fault)
        }
    };
    let threads = l.threads.max(1);
    if runs_serially(l.kernel, total, threads) {
        let ctx = make_ctx(ptrs.get());
        return call(l.kernel.serial_fn(), &ctx, 0, total)
            .map_err(|f| fault_error(l.program, l.kernel, f));
    }
    let private_words: u64 = l.kernel.private.iter().map(|(i, _)| lens[*i]).sum();
    if let Some(pf) = l
        .kernel
        .private_fn()
        .filter(|_| private_words <= 16 * total)
    {
        // Chunks go to whichever worker is free (as for every other
        // launch), and each worker adds into its own copy, made when it
        // takes its first chunk. A fixed part per thread would wait for
        // the slowest thread: on a loaded machine, or a VM whose other
        // core is late, that made two threads slower than one. The first
        // worker to arrive adds into the shared buffers themselves (nobody
        // else touches them until the reduction): one copy fewer to fill
        // and add in, and none at all when one worker does every chunk.
        let workers = rayon::current_num_threads().max(threads);
        let slots: Vec<Mutex<Option<Vec<Vec<u32>>>>> =
            (0..workers).map(|_| Mutex::new(None)).collect();
        let shared_taken = std::sync::atomic::AtomicBool::new(false);
        let step = chunk_len(total, threads);
        (0..total.div_ceil(step))
            .into_par_iter()
            .try_for_each(|c| {
                let w = rayon::current_thread_index().unwrap_or(0) % workers;
                let mut slot = slots[w].lock().unwrap_or_else(|e| e.into_inner());
                let bufs = slot.get_or_insert_with(|| {
                    if !shared_taken.swap(true, Ordering::Relaxed) {
                        vec![]
                    } else {
                        l.kernel
                            .private
                            .iter()
                            .map(|(i, float)| take_filled(lens[*i] as usize, fill_word(*float)))
                            .collect()
                    }
                });
                let mut mine = ptrs.get().to_vec();
                for ((i, _), b) in l.kernel.private.iter().zip(bufs.iter_mut()) {
                    mine[*i] = b.as_mut_ptr();
                }
                let start = c * step;
                call(pf, &make_ctx(&mine), start, (start + step).min(total))
            })
            .map_err(|f| fault_error(l.program, l.kernel, f))?;
        let mut copies: Vec<Vec<Vec<u32>>> = slots
            .into_iter()
            .filter_map(|s| s.into_inner().unwrap_or_else(|e| e.into_inner()))
            .filter(|b| !b.is_empty())
            .collect();
        for (k, (i, float)) in l.kernel.private.iter().enumerate() {
            let shared = Ptrs(vec![ptrs.get()[*i]]);
            let privs = Ptrs(copies.iter_mut().map(|c| c[k].as_mut_ptr()).collect());
            let n = lens[*i] as usize;
            // Small blocks: the two or three blocks of a 128² grid would
            // leave one of two threads idle half the time.
            let block = 1 << 12;
            (0..n.div_ceil(block)).into_par_iter().for_each(|b| {
                let lo = b * block;
                let len = block.min(n - lo);
                // SAFETY: blocks are disjoint ranges inside the shared
                // buffer and each copy (all `n` words long); no kernel runs
                // while the reduction does, so nothing else touches them.
                let s = unsafe { std::slice::from_raw_parts_mut(shared.get()[0].add(lo), len) };
                for &p in privs.get() {
                    let c = unsafe { std::slice::from_raw_parts_mut(p.add(lo), len) };
                    add_into(s, c, *float);
                }
            });
        }
        for c in copies {
            let fills = l.kernel.private.iter().map(|(_, f)| fill_word(*f));
            give_back(fills.zip(c).collect());
        }
        return Ok(());
    }
    let ctx = Shared(make_ctx(ptrs.get()));
    let f = l.kernel.chunk_fn();
    let step = chunk_len(total, threads);
    let chunks = total.div_ceil(step);
    (0..chunks)
        .into_par_iter()
        .try_for_each(|c| {
            let start = c * step;
            call(f, ctx.get(), start, (start + step).min(total))
        })
        .map_err(|f| fault_error(l.program, l.kernel, f))
}

/// Runs `launches` in order on the current thread's pool (see `JitEngine::run`).
fn run_launches(
    program: &Program,
    kernels: &[Arc<JitKernel>],
    memory: &crate::memory::FieldMemory,
    launches: &[weft_codegen::launch::LaunchRecord],
    threads: usize,
) -> Result<Vec<(weft_ir::ir::KernelId, std::time::Duration)>, RuntimeError> {
    let mut times = Vec::with_capacity(launches.len());
    for rec in launches {
        let shape = crate::memory::launch_shape(program, memory, rec);
        let kernel = &kernels[rec.kernel.index()];
        let buffers: Vec<&[AtomicU32]> = kernel
            .roots
            .iter()
            .map(|r| memory.buffers[r.index()].as_slice())
            .collect();
        let l = Launch {
            program,
            kernel,
            buffers,
            params: &rec.params,
            frame: rec.frame,
            seed: rec.seed,
            launch_index: rec.launch_index,
            threads,
            total: shape.iter().map(|&s| s as u64).product(),
        };
        let t = std::time::Instant::now();
        launch(&l)?;
        times.push((rec.kernel, t.elapsed()));
    }
    Ok(times)
}

/// The compiled CPU backend as an `Engine`: native code per kernel over the
/// same host field memory as the VM.
pub struct JitEngine {
    kernels: Vec<Arc<JitKernel>>,
    memory: crate::memory::FieldMemory,
    /// Worker threads when a count was asked for (`None`: rayon's global pool).
    pool: Option<rayon::ThreadPool>,
}

impl JitEngine {
    /// Compiles every kernel (or takes it from the cache) and allocates field memory.
    pub fn new(program: &Program, threads: Option<usize>) -> Result<JitEngine, RuntimeError> {
        let opts = JitOptions::default();
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
        // Kernels compile independently: on the worker threads, so that the
        // first frame waits for the slowest kernel rather than the sum.
        let compile = || {
            let ks: Vec<&Kernel> = program.kernels.iter().map(|(_, k)| k).collect();
            ks.par_iter()
                .map(|k| compile_cached(program, k, &opts))
                .collect::<Result<Vec<_>, _>>()
        };
        let kernels = match &pool {
            Some(p) => p.install(compile),
            None => compile(),
        }
        .map_err(|e| RuntimeError::Compile {
            node: e.kernel.clone(),
            message: e.to_string(),
        })?;
        Ok(JitEngine {
            kernels,
            memory: crate::memory::FieldMemory::new(program),
            pool,
        })
    }
}

impl crate::engine::Engine for JitEngine {
    fn write_root(&self, root: weft_ir::ir::LayoutId, words: &[u32]) -> Result<(), RuntimeError> {
        for (cell, &w) in self.memory.buffers[root.index()].iter().zip(words) {
            cell.store(w, Ordering::Relaxed);
        }
        Ok(())
    }

    fn read_root(&self, root: weft_ir::ir::LayoutId) -> Result<Vec<u32>, RuntimeError> {
        Ok(self.memory.root_words(root))
    }

    fn run(
        &mut self,
        program: &Program,
        launches: &[weft_codegen::launch::LaunchRecord],
        _timing: bool,
    ) -> Result<Vec<(weft_ir::ir::KernelId, std::time::Duration)>, RuntimeError> {
        let kernels = &self.kernels;
        let memory = &self.memory;
        let threads = match &self.pool {
            Some(pool) => pool.current_num_threads(),
            None => rayon::current_num_threads(),
        };
        let all = || run_launches(program, kernels, memory, launches, threads);
        // The whole list runs on one worker of the pool: a parallel launch
        // then forks from a worker (its sibling picks up the other part)
        // instead of handing each launch from this thread to the pool and
        // sleeping until it is done: two wake-ups fewer per launch, and
        // 200 launches a frame in mpm88. Serial launches run on that
        // worker in order, as they would here. A list of serial launches
        // only stays on this thread (no hand-off at all).
        let parallel = threads > 1
            && launches.iter().any(|rec| {
                let shape = crate::memory::launch_shape(program, memory, rec);
                let total = shape.iter().map(|&s| s as u64).product();
                !runs_serially(&kernels[rec.kernel.index()], total, threads)
            });
        match &self.pool {
            Some(pool) if parallel => pool.install(all),
            None if parallel => rayon::scope(|_| all()),
            _ => all(),
        }
    }

    fn read_field(
        &self,
        program: &Program,
        field: weft_ir::ir::FieldId,
    ) -> Result<Vec<u32>, RuntimeError> {
        Ok(self.memory.read_field(program, field))
    }

    fn write_field(
        &self,
        program: &Program,
        field: weft_ir::ir::FieldId,
        words: &[u32],
    ) -> Result<(), RuntimeError> {
        self.memory.write_field(program, field, words)
    }

    fn reset(&mut self, program: &Program) -> Result<(), RuntimeError> {
        self.memory.reset(program);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Words a private copy never touched leave the shared words exactly as
    /// they were (-0.0 and NaN included); touched ones add; the copy is
    /// left at its fill word.
    #[test]
    fn untouched_private_words_add_nothing() {
        let f = |x: f32| x.to_bits();
        let fill = fill_word(true);
        let mut shared = vec![f(-0.0), f(1.5), f32::NAN.to_bits(), f(5.0), f(0.0)];
        let mut private = vec![fill, fill, fill, f(2.0), f(-0.0)];
        add_into(&mut shared, &mut private, true);
        assert_eq!(
            shared,
            vec![f(-0.0), f(1.5), f32::NAN.to_bits(), f(7.0), f(0.0)]
        );
        assert!(private.iter().all(|&w| w == fill));

        let mut shared = vec![u32::MAX, 7];
        let mut private = vec![2, fill_word(false)];
        add_into(&mut shared, &mut private, false);
        assert_eq!(shared, vec![1, 7]);
        assert_eq!(private, vec![0, 0]);
    }
}
