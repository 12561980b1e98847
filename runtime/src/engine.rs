//! The one engine interface: what every backend's engine does once it is
//! open, and nothing about which backend it is (that is its
//! `spec::BackendSpec`, which opened it).
//!
//! An engine owns its root buffers (allocated when it is opened, one per
//! root layout node, sized by `ir::layout`), copies words in and out of them,
//! and runs a frame's launch records in order, reporting faults as
//! `RuntimeError`s naming the kernel node and, where it can, per-launch
//! times. The schedule executor (`sim.rs`) is shared: it turns the schedule
//! into `LaunchRecord`s and hands them to whichever engine runs. An engine
//! that keeps frames in flight on a device answers the non-blocking
//! questions a browser page must ask (`ready_for_frame`, `finished`,
//! `start_read`) and hands out the device buffers views are drawn into
//! (`device_buffer`); the others answer at once from host memory.

use crate::memory::{extract_field, insert_field, FieldMemory};
use crate::RuntimeError;
use std::sync::Mutex;
use std::time::Duration;
use weft_codegen::launch::LaunchRecord;
use weft_ir::ir::layout::root_of;
use weft_ir::ir::{FieldId, KernelId, LayoutId, Program};

/// What every backend's engine implements.
pub trait Engine: Send {
    /// A name for status lines, for an engine opened outside the registry
    /// (`Simulation::with_engine`); a simulation opened through a
    /// `BackendSpec` shows that backend's name instead.
    fn name(&self) -> &'static str {
        "custom"
    }

    /// Overwrites a root buffer with `words`.
    fn write_root(&self, root: LayoutId, words: &[u32]) -> Result<(), RuntimeError>;

    /// A copy of a root buffer's words.
    fn read_root(&self, root: LayoutId) -> Result<Vec<u32>, RuntimeError>;

    /// Runs the launches in order. Returns the time of each launch it
    /// measured: every launch when `timing` is set, otherwise whatever it
    /// measures anyway (possibly nothing).
    fn run(
        &mut self,
        program: &Program,
        launches: &[LaunchRecord],
        timing: bool,
    ) -> Result<Vec<(KernelId, Duration)>, RuntimeError>;

    /// Waits for every launch run so far and reports a fault not reported
    /// yet. An engine may return from `run` before its launches finish (the
    /// wgpu engine keeps a few frames in flight), so a fault can surface at
    /// a later `run`, at a read, or here.
    fn sync(&mut self) -> Result<(), RuntimeError> {
        Ok(())
    }

    /// The device in use, for status lines (`None` on the host).
    fn device_name(&self) -> Option<String> {
        None
    }

    /// How `run` times launches when asked (`timing`): said next to every
    /// per-kernel time, so a reader knows what the number measures.
    fn timing_method(&self) -> &'static str {
        "wall time per launch"
    }

    /// Whether field state lives in device memory (a GPU), so that reading
    /// it costs a copy and timing a launch costs a submit of its own.
    fn on_device(&self) -> bool {
        false
    }

    /// Frames `run` may leave queued on a device before the host waits
    /// (0: `run` returns with its launches done). An engine that runs ahead
    /// times launches only when asked (`timing`), since a timed launch
    /// waits for itself.
    fn frames_in_flight(&self) -> usize {
        0
    }

    /// Without waiting: retires what has finished (reporting a fault among
    /// it) and says whether another frame fits in flight. A browser page,
    /// which must never wait, asks before every frame.
    fn ready_for_frame(&self) -> Result<bool, RuntimeError> {
        Ok(true)
    }

    /// Without waiting: whether everything run so far has finished (a
    /// fault among it reported).
    fn finished(&self) -> Result<bool, RuntimeError> {
        Ok(true)
    }

    /// Starts copying a root buffer back without waiting for it; the words
    /// arrive through `PendingRead::take` (at once on the host).
    fn start_read(&self, root: LayoutId) -> PendingRead {
        PendingRead::ready(self.read_root(root))
    }

    /// The wgpu buffer holding a root's words, when they live on a wgpu
    /// device: a window on the same device copies views out of it into
    /// textures without a read-back.
    fn device_buffer(&self, _root: LayoutId) -> Option<&wgpu::Buffer> {
        None
    }

    /// Whether views drawn by this engine can be shown straight from
    /// `device_buffer` (they stay on the device).
    fn views_on_device(&self) -> bool {
        false
    }

    /// A field in logical row-major order (an engine may read it more directly).
    fn read_field(&self, program: &Program, field: FieldId) -> Result<Vec<u32>, RuntimeError> {
        let root = root_of(program, program.fields[field].layout);
        Ok(extract_field(program, field, &self.read_root(root)?))
    }

    /// Overwrites a field from logical row-major words.
    fn write_field(
        &self,
        program: &Program,
        field: FieldId,
        words: &[u32],
    ) -> Result<(), RuntimeError> {
        let root = root_of(program, program.fields[field].layout);
        let mut all = self.read_root(root)?;
        insert_field(program, field, words, &mut all)?;
        self.write_root(root, &all)
    }

    /// Restores every field's initial value.
    fn reset(&mut self, program: &Program) -> Result<(), RuntimeError> {
        write_initial_values(&*self, program)
    }
}

/// Writes every field's initial value into `engine`'s root buffers.
pub fn write_initial_values<E: Engine + ?Sized>(
    engine: &E,
    program: &Program,
) -> Result<(), RuntimeError> {
    let init = FieldMemory::new(program);
    for r in program.roots() {
        engine.write_root(r, &init.root_words(r))?;
    }
    Ok(())
}

type Poll = dyn Fn() -> Option<Result<Vec<u32>, RuntimeError>> + Send + Sync;

/// A root buffer's words on their way back (`Engine::start_read`).
pub struct PendingRead(Box<Poll>);

impl PendingRead {
    /// A read that `poll` completes: `None` until the words have arrived,
    /// then the words, handed over once.
    pub fn new(
        poll: impl Fn() -> Option<Result<Vec<u32>, RuntimeError>> + Send + Sync + 'static,
    ) -> PendingRead {
        PendingRead(Box::new(poll))
    }

    /// A read that has already arrived.
    pub fn ready(words: Result<Vec<u32>, RuntimeError>) -> PendingRead {
        let cell = Mutex::new(Some(words));
        PendingRead::new(move || cell.lock().ok()?.take())
    }

    /// The words once they have arrived (`None` until then, and after
    /// they were taken).
    pub fn take(&self) -> Option<Result<Vec<u32>, RuntimeError>> {
        (self.0)()
    }
}
