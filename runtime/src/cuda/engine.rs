//! `CudaEngine`: root buffers in device memory, one stream, one module per
//! kernel (PTX from NVRTC, cached by content), launches queued without host
//! synchronisation. A frame that can fault queues a copy of the fault words
//! into page-locked memory behind its launches; the host waits only for the
//! frame `FRAMES_IN_FLIGHT` back and reads that frame's copy then, so a
//! fault surfaces a few frames late (or at `sync`, or at the next read of
//! a buffer, which first waits for every queued frame), as on wgpu. Timed
//! (profiled) launches wait for themselves; their times come from CUDA
//! events.

use super::nvrtc::{compile_ptx, driver_status, unavailable};
use crate::engine::Engine;
use crate::memory::FieldMemory;
use crate::memory_limit::{Limit, MemoryLimits};
use crate::RuntimeError;
use cudarc::driver::{
    sys, CudaContext, CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, LaunchConfig,
    PinnedHostSlice, PushKernelArg,
};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use weft_codegen::cuda::{compile_kernel, fault_word, CudaKernel, ENTRY};
use weft_codegen::launch::{word, LaunchRecord};
use weft_ir::ir::{KernelId, LayoutId, Program};

struct Compiled {
    code: CudaKernel,
    func: CudaFunction,
    _module: Arc<CudaModule>,
}

pub struct CudaEngine {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    /// Indexed by kernel handle.
    kernels: Vec<Compiled>,
    /// Indexed by layout handle; only roots have buffers. Behind a mutex
    /// because `Engine::write_root` takes `&self` and a copy into device
    /// memory needs the slice mutably.
    buffers: Mutex<Vec<Option<CudaSlice<u32>>>>,
    /// Words of each root (indexed by layout handle; 0 elsewhere).
    lens: Vec<u64>,
    /// Behind a mutex because a read of a buffer (`&self`) first waits
    /// for the queued frames and reports their faults.
    queue: Mutex<FrameQueue>,
    device: String,
    /// What fault messages need (field and node names): a fault can surface
    /// frames after the program that ran it was handed back.
    fault_program: Program,
}

/// The fault words and the frames queued behind the host.
struct FrameQueue {
    faults: CudaSlice<u32>,
    /// Frames queued without a wait, oldest first.
    in_flight: VecDeque<InFlight>,
    /// Page-locked copies of the fault words that no frame holds now.
    spare: Vec<PinnedHostSlice<u32>>,
}

/// Frames that may be queued ahead of the device (as on wgpu): a frame's
/// time on the host is then the device's time, not the time to enqueue it,
/// and a fault surfaces at most this many frames late.
const FRAMES_IN_FLIGHT: usize = 2;

/// A frame queued without a host wait.
struct InFlight {
    /// Recorded after the frame's last command.
    done: CudaEvent,
    /// A launch of the frame may report a fault of the program's meaning
    /// (`CudaKernel::traps`): launches after it check the fault words.
    traps: bool,
    /// For a frame with a launch that can fault: the fault words as they
    /// were after it (copied by the stream) and its launches, which the
    /// words' tag indexes.
    faults: Option<(PinnedHostSlice<u32>, Vec<LaunchRecord>)>,
}

fn device_err(what: &str, e: impl std::fmt::Debug) -> RuntimeError {
    RuntimeError::Device(format!("CUDA: {} failed: {:?}", what, e))
}

impl CudaEngine {
    /// Opens device 0, compiles every kernel and uploads every field's
    /// initial value. Without a driver or a device: `Unavailable`. The root
    /// buffers must fit the device's free memory (`cuMemGetInfo`), or
    /// `max_memory` when given (`memory_limit`).
    pub fn open(program: &Program, max_memory: Option<u64>) -> Result<CudaEngine, RuntimeError> {
        driver_status().map_err(|w| unavailable(&w))?;
        // cudarc panics on some driver failures (a symbol the installed
        // driver lacks): treat a panic while opening as "not available".
        let ctx = std::panic::catch_unwind(|| CudaContext::new(0))
            .map_err(|p| unavailable(&weft_codegen::panic_message(p.as_ref())))?
            .map_err(|e| unavailable(&format!("no usable CUDA device ({:?})", e)))?;
        let name = ctx.name().unwrap_or_else(|_| "CUDA device".into());
        // Free device memory now (other processes' allocations excluded).
        let free = ctx.mem_get_info().ok().map(|(free, _)| Limit {
            bytes: free as u64,
            source: format!("the CUDA device {} has {{}} free (cuMemGetInfo)", name),
        });
        MemoryLimits::with_budget(free, max_memory).check(program)?;
        let (major, minor) = ctx
            .compute_capability()
            .map_err(|e| device_err("reading the compute capability", e))?;
        let arch = format!("compute_{}{}", major, minor);
        let stream = ctx.default_stream();
        let mut kernels = Vec::new();
        for (_, k) in program.kernels.iter() {
            let code = compile_kernel(program, k).map_err(|e| RuntimeError::Compile {
                node: e.kernel.clone(),
                message: e.to_string(),
            })?;
            let ptx = compile_ptx(&code, Some(&arch))?;
            let module = ctx
                .load_module(cudarc::nvrtc::Ptx::from_src(ptx.as_str()))
                .map_err(|e| RuntimeError::Compile {
                    node: k.name.clone(),
                    message: format!(
                        "node '{}': the CUDA driver refused the PTX: {:?}",
                        k.name, e
                    ),
                })?;
            let func = module
                .load_function(ENTRY)
                .map_err(|e| device_err("loading the kernel function", e))?;
            kernels.push(Compiled {
                code,
                func,
                _module: module,
            });
        }
        let init = FieldMemory::new(program);
        let mut buffers: Vec<Option<CudaSlice<u32>>> = Vec::new();
        buffers.resize_with(program.layouts.len(), || None);
        for r in program.roots() {
            let mut words = init.root_words(r);
            if words.is_empty() {
                // A zero-length allocation has no address; keep one word.
                words.push(0);
            }
            let s = stream
                .clone_htod(&words)
                .map_err(|e| device_err("allocating a root buffer", e))?;
            buffers[r.index()] = Some(s);
        }
        let lens = program.layouts.iter().map(|(_, l)| l.tree_words).collect();
        let faults = stream
            .alloc_zeros::<u32>(fault_word::COUNT)
            .map_err(|e| device_err("allocating the fault words", e))?;
        Ok(CudaEngine {
            ctx,
            stream,
            kernels,
            buffers: Mutex::new(buffers),
            lens,
            queue: Mutex::new(FrameQueue {
                faults,
                in_flight: VecDeque::new(),
                spare: Vec::new(),
            }),
            device: format!("{} (sm_{}{})", name, major, minor),
            fault_program: program.clone(),
        })
    }

    fn buffers(
        &self,
    ) -> Result<std::sync::MutexGuard<'_, Vec<Option<CudaSlice<u32>>>>, RuntimeError> {
        self.buffers
            .lock()
            .map_err(|_| RuntimeError::Device("CUDA: buffer table poisoned".into()))
    }

    fn queue(&self) -> Result<std::sync::MutexGuard<'_, FrameQueue>, RuntimeError> {
        self.queue
            .lock()
            .map_err(|_| RuntimeError::Device("CUDA: frame queue poisoned".into()))
    }

    /// Reads the fault words now (waiting for the stream); on a fault,
    /// clears them and names the launch's kernel and line.
    fn check_faults(
        &self,
        q: &mut FrameQueue,
        launches: &[LaunchRecord],
    ) -> Result<(), RuntimeError> {
        let w = self
            .stream
            .clone_dtoh(&q.faults)
            .map_err(|e| device_err("reading the fault words", e))?;
        self.report(q, &w, launches)
    }

    /// The fault that words `w` hold, if any, named by the launch in
    /// `launches` that made it; the device's fault words are cleared, and
    /// the copies that later frames in flight took of them are dropped
    /// (they hold this same fault).
    fn report(
        &self,
        q: &mut FrameQueue,
        w: &[u32],
        launches: &[LaunchRecord],
    ) -> Result<(), RuntimeError> {
        if w[fault_word::SITE] == 0 {
            return Ok(());
        }
        self.stream
            .memset_zeros(&mut q.faults)
            .map_err(|e| device_err("clearing the fault words", e))?;
        for f in q.in_flight.iter_mut() {
            if let Some((host, _)) = f.faults.take() {
                q.spare.push(host);
            }
        }
        let value =
            (w[fault_word::VALUE_LO] as u64 | ((w[fault_word::VALUE_HI] as u64) << 32)) as i64;
        let site = (w[fault_word::SITE] - 1) as usize;
        let rec = launches
            .get(w[fault_word::TAG] as usize)
            .ok_or_else(|| RuntimeError::Device("CUDA: a fault names no launch".into()))?;
        let k = &self.kernels[rec.kernel.index()].code;
        let s = k.sites.get(site);
        Err(RuntimeError::Kernel {
            node: weft_ir::ir::node_of(&k.name, &k.fused, s.map_or(0, |s| s.span.part)).to_string(),
            line: s.map_or(0, |s| s.span.line),
            col: s.map_or(0, |s| s.span.col),
            message: s
                .map(|s| s.message(&self.fault_program, value as u32))
                .unwrap_or_else(|| "internal error: unknown fault site".into()),
        })
    }

    /// Queues the end of a frame (and, when it can fault, a copy of the
    /// fault words behind it), then waits for the oldest frames until at
    /// most `FRAMES_IN_FLIGHT` are queued.
    fn queue_frame(
        &self,
        q: &mut FrameQueue,
        launches: &[LaunchRecord],
        can_fault: bool,
    ) -> Result<(), RuntimeError> {
        let faults = if can_fault {
            let mut host = match q.spare.pop() {
                Some(h) => h,
                // SAFETY: the copy below fills every word before anything reads it.
                None => unsafe { self.ctx.alloc_pinned::<u32>(fault_word::COUNT) }
                    .map_err(|e| device_err("allocating page-locked memory", e))?,
            };
            self.stream
                .memcpy_dtoh(&q.faults, &mut host)
                .map_err(|e| device_err("copying the fault words", e))?;
            Some((host, launches.to_vec()))
        } else {
            None
        };
        let done = self
            .stream
            .record_event(Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING))
            .map_err(|e| device_err("recording the end of a frame", e))?;
        let traps = launches.iter().any(|rec| {
            self.kernels
                .get(rec.kernel.index())
                .is_some_and(|c| c.code.traps)
        });
        q.in_flight.push_back(InFlight {
            done,
            traps,
            faults,
        });
        while q.in_flight.len() > FRAMES_IN_FLIGHT {
            self.retire_oldest(q)?;
        }
        Ok(())
    }

    /// Waits for the oldest queued frame and reports its fault.
    fn retire_oldest(&self, q: &mut FrameQueue) -> Result<(), RuntimeError> {
        let Some(f) = q.in_flight.pop_front() else {
            return Ok(());
        };
        f.done
            .synchronize()
            .map_err(|e| device_err("waiting for a frame", e))?;
        let Some((host, launches)) = f.faults else {
            return Ok(());
        };
        let w = host
            .as_slice()
            .map_err(|e| device_err("reading the fault words", e))?
            .to_vec();
        q.spare.push(host);
        self.report(q, &w, &launches)
    }

    /// Waits for every queued frame, reporting the first fault among them.
    fn retire_all(&self) -> Result<(), RuntimeError> {
        let mut q = self.queue()?;
        while !q.in_flight.is_empty() {
            self.retire_oldest(&mut q)?;
        }
        Ok(())
    }
}

impl Engine for CudaEngine {
    fn on_device(&self) -> bool {
        true
    }

    fn reset(&mut self, program: &Program) -> Result<(), RuntimeError> {
        // Faults of frames before the reset are not reported after it.
        self.stream
            .synchronize()
            .map_err(|e| device_err("waiting for the GPU", e))?;
        {
            let mut q = self.queue()?;
            let q = &mut *q;
            for f in q.in_flight.drain(..) {
                if let Some((host, _)) = f.faults {
                    q.spare.push(host);
                }
            }
            self.stream
                .memset_zeros(&mut q.faults)
                .map_err(|e| device_err("clearing the fault words", e))?;
        }
        crate::engine::write_initial_values(&*self, program)
    }

    fn sync(&mut self) -> Result<(), RuntimeError> {
        self.retire_all()?;
        self.stream
            .synchronize()
            .map_err(|e| device_err("waiting for the GPU", e))
    }

    fn write_root(&self, root: LayoutId, words: &[u32]) -> Result<(), RuntimeError> {
        let mut b = self.buffers()?;
        let slot = b
            .get_mut(root.index())
            .and_then(|s| s.as_mut())
            .ok_or_else(|| RuntimeError::Device("CUDA: no buffer for this root".into()))?;
        if words.len() > slot.len() {
            return Err(RuntimeError::Device(format!(
                "CUDA: {} words do not fit a root buffer of {}",
                words.len(),
                slot.len()
            )));
        }
        let mut view = slot.slice_mut(0..words.len());
        self.stream
            .memcpy_htod(words, &mut view)
            .map_err(|e| device_err("copying to the device", e))
    }

    fn read_root(&self, root: LayoutId) -> Result<Vec<u32>, RuntimeError> {
        // Whatever ran before the read has to have succeeded for the words
        // to mean anything (as on wgpu): a queued frame's fault is
        // reported here, not lost.
        self.retire_all()?;
        let b = self.buffers()?;
        let slot = b
            .get(root.index())
            .and_then(|s| s.as_ref())
            .ok_or_else(|| RuntimeError::Device("CUDA: no buffer for this root".into()))?;
        let mut v = self
            .stream
            .clone_dtoh(slot)
            .map_err(|e| device_err("copying from the device", e))?;
        // Drops the one-word stand-in of an empty root.
        v.truncate(self.lens.get(root.index()).copied().unwrap_or(0) as usize);
        Ok(v)
    }

    fn run(
        &mut self,
        _program: &Program,
        launches: &[LaunchRecord],
        timing: bool,
    ) -> Result<Vec<(KernelId, Duration)>, RuntimeError> {
        let mut events = Vec::new();
        let mut q = self.queue()?;
        let q = &mut *q;
        // Launches check the fault words (and stop when an earlier one
        // faulted) only after one that may trap, here or in a frame still
        // queued.
        let mut armed = q.in_flight.iter().any(|f| f.traps);
        {
            let b = self.buffers()?;
            for (tag, rec) in launches.iter().enumerate() {
                let c = self.kernels.get(rec.kernel.index()).ok_or_else(|| {
                    RuntimeError::Device("CUDA: launch of an unknown kernel".into())
                })?;
                let total = rec.total();
                if total == 0 {
                    continue;
                }
                let blocks = total.div_ceil(c.code.block as u64);
                if blocks > i32::MAX as u64 || total > u32::MAX as u64 {
                    return Err(RuntimeError::Run {
                        node: c.code.name.clone(),
                        message: format!(
                            "{} iterations are more than one CUDA launch can run",
                            total
                        ),
                    });
                }
                let words = rec.words(0, c.code.params as u32);
                debug_assert_eq!(words.len(), word::HEADER as usize + c.code.params);
                let tag = tag as u32;
                let bufs: Vec<(&CudaSlice<u32>, u64)> = c
                    .code
                    .roots
                    .iter()
                    .map(|r| {
                        b.get(r.index())
                            .and_then(|s| s.as_ref())
                            .map(|s| (s, self.lens[r.index()]))
                            .ok_or_else(|| {
                                RuntimeError::Device("CUDA: no buffer for a root".into())
                            })
                    })
                    .collect::<Result<_, _>>()?;
                let mut l = self.stream.launch_builder(&c.func);
                for w in &words {
                    l.arg(w);
                }
                l.arg(&q.faults);
                l.arg(&tag);
                let check = armed as u32;
                l.arg(&check);
                armed |= c.code.traps;
                for (s, n) in &bufs {
                    l.arg(*s);
                    l.arg(n);
                }
                if timing {
                    l.record_kernel_launch(sys::CUevent_flags::CU_EVENT_DEFAULT);
                }
                let cfg = LaunchConfig {
                    grid_dim: (blocks as u32, 1, 1),
                    block_dim: (c.code.block, 1, 1),
                    shared_mem_bytes: 0,
                };
                // SAFETY: the arguments follow the generated entry's ABI
                // (`weft_codegen::cuda`): record words, fault words, tag,
                // check_err, then (words, length) per root in `code.roots`
                // order.
                let ev =
                    unsafe { l.launch(cfg) }.map_err(|e| device_err("launching a kernel", e))?;
                if let Some(ev) = ev {
                    events.push((rec.kernel, ev));
                }
            }
        }
        // No host wait here (as on wgpu): the stream orders the next frame
        // after this one, the fault words come back behind the frame, and
        // the host waits only for the frame `FRAMES_IN_FLIGHT` back. A read
        // of a buffer waits for the frames before it.
        let can_fault = launches.iter().any(|rec| {
            self.kernels
                .get(rec.kernel.index())
                .is_some_and(|c| !c.code.sites.is_empty())
        });
        if timing {
            // Timed launches run alone: earlier frames first, then this one.
            while !q.in_flight.is_empty() {
                self.retire_oldest(q)?;
            }
            self.stream
                .synchronize()
                .map_err(|e| device_err("waiting for the GPU", e))?;
            self.check_faults(q, launches)?;
        } else {
            self.queue_frame(q, launches, can_fault)?;
        }
        let mut times = Vec::new();
        for (k, (start, end)) in events {
            let ms = start
                .elapsed_ms(&end)
                .map_err(|e| device_err("reading a kernel timer", e))?;
            times.push((k, Duration::from_secs_f64(ms.max(0.0) as f64 / 1e3)));
        }
        Ok(times)
    }

    fn device_name(&self) -> Option<String> {
        Some(format!("{}, CUDA through NVRTC", self.device))
    }

    fn timing_method(&self) -> &'static str {
        "CUDA events around each launch"
    }

    fn frames_in_flight(&self) -> usize {
        FRAMES_IN_FLIGHT
    }
}

impl Drop for CudaEngine {
    fn drop(&mut self) {
        // Finish queued work before buffers and modules are freed.
        let _ = self.stream.synchronize();
        let _ = &self.ctx;
    }
}
