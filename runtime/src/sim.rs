//! Compiles a program once and runs its schedule: `on_start` once, then the
//! `on_frame` chain per frame. The one schedule executor: the schedule
//! becomes launch records (`weft_codegen::launch`) that whichever backend
//! engine runs; per-kernel launch times are recorded.

use crate::engine::Engine;
use crate::render::Image;
pub use crate::spec::SimOptions;
use crate::spec::{Backend, Prepared};
use crate::RuntimeError;
use std::collections::BTreeMap;
use std::time::Duration;
// std's clock panics in WebAssembly; web-time is std's natively.
use web_time::Instant;
use weft_codegen::launch::LaunchRecord;
use weft_ir::error::GraphError;
use weft_ir::ir::layout;
use weft_ir::ir::node_of;
use weft_ir::ir::scalar::scalar_bits;
use weft_ir::ir::*;
use weft_ir::passes::run_pipeline;

pub struct Simulation {
    pub program: Program,
    engine: Box<dyn Engine>,
    /// The backend that opened `engine` (never `auto`; `None` for an
    /// engine from `with_engine`).
    backend: Option<Backend>,
    profile: bool,
    /// Frames completed (0 after `on_start`).
    pub frame: i32,
    started: bool,
    /// Launch durations per kernel node id.
    pub kernel_times: BTreeMap<String, Vec<Duration>>,
    pub compile_time: Duration,
    /// Launches so far per kernel (indexed like `program.kernels`).
    launches: Vec<u32>,
    /// The camera of each 3-D view (by view node id): the saved one until
    /// `set_view_camera` changes it. Its frame is in the view's camera
    /// field; a turntable view's is rewritten before each draw.
    cameras: BTreeMap<String, Camera>,
}

impl Simulation {
    /// Prepares `opts.backend` (its spec resolves `auto`, opens its device
    /// once and tunes the passes), runs the pass pipeline, then opens its
    /// engine (code generation for every kernel, field allocation and
    /// initial values) on that device.
    pub fn new(program: Program, opts: &SimOptions) -> Result<Simulation, RuntimeError> {
        let Prepared { backend, opts } = opts.backend.spec().prepare(opts)?;
        let mut sim = Self::with_engine(program, &opts, |p| backend.spec().open(p, &opts))?;
        sim.backend = Some(backend);
        Ok(sim)
    }

    /// Like `new`, with the engine made by `open` from the compiled program:
    /// how a backend outside this crate (or a test's) runs a simulation.
    pub fn with_engine(
        mut program: Program,
        opts: &SimOptions,
        open: impl FnOnce(&Program) -> Result<Box<dyn Engine>, RuntimeError>,
    ) -> Result<Simulation, RuntimeError> {
        let t0 = Instant::now();
        if let Some(s) = opts.seed {
            program.seed = s;
        }
        run_pipeline(&mut program, &opts.passes, None).map_err(|e| RuntimeError::Compile {
            node: e.kernel.clone(),
            message: e.to_string(),
        })?;
        let engine = open(&program)?;
        let compile_time = t0.elapsed();
        let kernels_len = program.kernels.len();
        let cameras = program
            .views
            .iter()
            .filter_map(|v| Some((v.node_id().to_string(), v.scene()?.camera)))
            .collect();
        Ok(Simulation {
            program,
            engine,
            backend: None,
            profile: opts.profile,
            frame: 0,
            started: false,
            kernel_times: BTreeMap::new(),
            compile_time,
            launches: vec![0; kernels_len],
            cameras,
        })
    }

    /// The name of the backend actually running (never `auto`).
    pub fn backend_name(&self) -> &'static str {
        self.backend
            .map_or_else(|| self.engine.name(), Backend::name)
    }

    /// The backend actually running (never `Auto`; `None` for an engine
    /// from `with_engine`).
    pub fn backend(&self) -> Option<Backend> {
        self.backend
    }

    /// GPU: one submit per launch so `kernel_times` can be measured (slower frames).
    pub fn set_profile(&mut self, on: bool) {
        self.profile = on;
    }

    /// The engine running the simulation: its non-blocking reads and
    /// back-pressure (`Engine::ready_for_frame`, `start_read`) and the
    /// device buffers views are drawn into (`Engine::device_buffer`).
    pub fn engine(&self) -> &dyn Engine {
        &*self.engine
    }

    /// Frames the engine may run ahead of the host (0 on the CPU): see
    /// `Engine::frames_in_flight`.
    pub fn frames_in_flight(&self) -> usize {
        self.engine.frames_in_flight()
    }

    /// The device in use, if any.
    pub fn device_name(&self) -> Option<String> {
        self.engine.device_name()
    }

    /// Runs `on_start` (once; later calls do nothing).
    pub fn start(&mut self) -> Result<(), RuntimeError> {
        if self.started {
            return Ok(());
        }
        self.started = true;
        let steps = self.program.schedule.on_start.clone();
        self.run_steps(&steps)?;
        // Once per run: a fault in the set-up is reported by `start` itself
        // (in a browser, which cannot wait, by the first frame that retires it).
        if crate::platform::MUST_NOT_WAIT {
            return Ok(());
        }
        self.engine.sync()
    }

    /// Waits for every frame run so far and reports a fault not reported
    /// yet. Frames on a GPU run ahead of the host (a fault surfaces a frame
    /// or two late, or at the next read of a field); call this after the
    /// last frame when nothing is read back.
    pub fn sync(&mut self) -> Result<(), RuntimeError> {
        self.engine.sync()
    }

    /// Advances one frame (running `on_start` first if needed).
    pub fn step_frame(&mut self) -> Result<(), RuntimeError> {
        self.start()?;
        self.frame += 1;
        self.animate()?;
        let steps = self.program.schedule.on_frame.clone();
        self.run_steps(&steps)
    }

    /// Advances one frame and waits for it, submitting its launches `slice`
    /// at a time and waiting for each slice before the next (`None`: all
    /// at once). Returns the frame's number of launches.
    ///
    /// Why slices: a GPU queue runs work in order, and the app's window
    /// draws on the same device as its simulation. On a slow device
    /// (lavapipe: a frame of mpm_quant takes 200–450 ms) a whole frame
    /// submitted at once would hold the window's next picture until it
    /// ends; in slices, the window's work goes in between them. The result
    /// is the same as `step_frame` then `sync`: the launches, their order
    /// and their counters are those of one frame.
    pub fn step_frame_sliced(&mut self, slice: Option<usize>) -> Result<usize, RuntimeError> {
        self.start()?;
        self.frame += 1;
        self.animate()?;
        let steps = self.program.schedule.on_frame.clone();
        let mut list = Vec::new();
        self.flatten(&steps, &mut Vec::new(), &mut list);
        let slice = slice.unwrap_or(list.len()).max(1);
        for part in list.chunks(slice) {
            self.run_list(part)?;
            self.engine.sync()?;
        }
        self.engine.sync()?;
        Ok(list.len())
    }

    /// Whether `on_start` ran.
    pub fn is_started(&self) -> bool {
        self.started
    }

    /// Launches so far per kernel (indexed like `program.kernels`): the
    /// random streams follow them.
    pub fn launch_counts(&self) -> &[u32] {
        &self.launches
    }

    /// Sets the frame counter, whether `on_start` ran and the launch counts
    /// (`snapshot::restore`, after the roots are written; `counts` indexed
    /// like `program.kernels`).
    pub(crate) fn set_run_state(&mut self, frame: i32, started: bool, counts: &[u32]) {
        self.frame = frame;
        self.started = started;
        for (n, c) in self.launches.iter_mut().zip(counts) {
            *n = *c;
        }
    }

    /// Restores initial field values and the frame counter.
    pub fn reset(&mut self) -> Result<(), RuntimeError> {
        self.engine.reset(&self.program)?;
        self.launches.iter_mut().for_each(|l| *l = 0);
        self.frame = 0;
        self.started = false;
        // The camera fields start at the saved cameras: the ones set since stay.
        let cams: Vec<(String, Camera)> =
            self.cameras.iter().map(|(k, c)| (k.clone(), *c)).collect();
        for (node, cam) in cams {
            self.write_camera(&node, &cam)?;
        }
        Ok(())
    }

    fn run_steps(&mut self, steps: &[Step]) -> Result<(), RuntimeError> {
        let mut list = Vec::new();
        self.flatten(steps, &mut Vec::new(), &mut list);
        self.run_list(&list)
    }

    fn run_list(&mut self, list: &[LaunchRecord]) -> Result<(), RuntimeError> {
        let times = self.engine.run(&self.program, list, self.profile)?;
        for (k, d) in times {
            self.kernel_times
                .entry(self.program.kernels[k].label())
                .or_default()
                .push(d);
        }
        Ok(())
    }

    /// The launches of `steps` in order, as launch records. `indices` are
    /// the enclosing repeats' index scalars and their current values.
    fn flatten(
        &mut self,
        steps: &[Step],
        indices: &mut Vec<(String, u32)>,
        out: &mut Vec<LaunchRecord>,
    ) {
        for s in steps {
            match s {
                Step::Launch(k) => {
                    let n = &mut self.launches[k.index()];
                    let mut rec = LaunchRecord::new(&self.program, *k, self.frame, *n);
                    *n = n.wrapping_add(1);
                    let kernel = &self.program.kernels[*k];
                    // Inner repeats shadow outer ones with the same index name.
                    // A fused kernel (`schedule::fusion`) has each node's scalar.
                    for (name, value) in indices.iter() {
                        for (i, p) in kernel.params.iter().enumerate() {
                            if &p.name == name {
                                rec.params[i] = *value;
                            }
                        }
                    }
                    out.push(rec);
                }
                Step::Repeat {
                    count,
                    body,
                    index,
                    reverse,
                    start,
                    ..
                } => {
                    for it in 0..*count {
                        let value = start + if *reverse { count - 1 - it } else { it };
                        if let Some(name) = index {
                            indices.push((name.clone(), value));
                        }
                        self.flatten(body, indices, out);
                        if index.is_some() {
                            indices.pop();
                        }
                    }
                }
                // `passes::autodiff` expands every tape before a program can
                // run, and the validator rejects one that survives; a body
                // met here runs forward only.
                Step::Tape { body, .. } => self.flatten(body, indices, out),
                // `passes::optimize` expands every optimize node likewise.
                Step::Optimize { body, .. } => self.flatten(body, indices, out),
                // `passes::sparse_clear` expands every clear into launches
                // during access lowering (the validator rejects a survivor).
                Step::Clear { .. } | Step::ListGen { .. } => {}
            }
        }
    }

    /// Sets a kernel's scalar parameter without recompiling or touching
    /// field state (the app's sliders call this on every change of a drag).
    /// `value` becomes the kernel's word by the one rule of the builder and
    /// `--set` (`ir::scalar::scalar_bits`): 2.5 for an i32 is an error
    /// naming the node and the scalar, and nothing changes.
    /// Sets the kernel scalars animated by `frame` expressions
    /// (`Program::animated`) to their values at the frame about to run.
    fn animate(&mut self) -> Result<(), RuntimeError> {
        for i in 0..self.program.animated.len() {
            let a = &self.program.animated[i];
            let (k, s) = (a.kernel.clone(), a.scalar.clone());
            let v = a.value(self.frame as u64).map_err(|m| {
                RuntimeError::from(weft_ir::error::GraphErrors(vec![GraphError::scalar(
                    &k, &s, m,
                )]))
            })?;
            self.set_param(&k, &s, v)
                .map_err(|e| RuntimeError::from(weft_ir::error::GraphErrors(vec![e])))?;
        }
        Ok(())
    }

    pub fn set_param(&mut self, kernel: &str, name: &str, value: f64) -> Result<(), GraphError> {
        self.program
            .has_kernel_node(kernel)
            .then_some(())
            .ok_or_else(|| {
                GraphError::node_msg(kernel, "is not a kernel of the running simulation")
            })?;
        // A kernel differentiated by a tape has an adjoint kernel of the same
        // name whose scalars must stay equal to the forward kernel's.
        let mut found = false;
        let handles: Vec<KernelId> = self.program.kernels.handles().collect();
        for h in handles {
            let k = &mut self.program.kernels[h];
            if !k.has_node(kernel) {
                continue;
            }
            // The node's own scalar; in a fused kernel, the one of that part.
            let (own, fused) = (&k.name, &k.fused);
            if let Some(p) = k
                .params
                .iter_mut()
                .find(|p| p.name == name && node_of(own, fused, p.part) == kernel)
            {
                found = true;
                p.value =
                    scalar_bits(p.ty, value).map_err(|m| GraphError::scalar(kernel, name, m))?;
            }
        }
        if !found {
            return Err(GraphError::scalar(
                kernel,
                name,
                "the kernel has no such scalar",
            ));
        }
        Ok(())
    }

    pub fn field(&self, name: &str) -> Option<FieldId> {
        self.program.field_by_name(name)
    }

    /// Field contents in logical row-major order, one word per component.
    /// A copy of a root layout's whole buffer (sparse metadata included).
    pub fn read_root(&self, root: weft_ir::ir::LayoutId) -> Result<Vec<u32>, RuntimeError> {
        self.engine.read_root(root)
    }

    /// Overwrites a root layout's whole buffer (a state copied from another
    /// simulation of the same program).
    pub fn write_root(
        &mut self,
        root: weft_ir::ir::LayoutId,
        words: &[u32],
    ) -> Result<(), RuntimeError> {
        self.engine.write_root(root, words)
    }

    /// Takes over `old`'s running state, for a program rebuilt with
    /// display-only changes (a view's parameters): the buffer of every root
    /// layout node both programs have with the same size (fields, sparse
    /// pools, optimizer histories), the frame counter, whether `on_start`
    /// ran, and the launch counts of kernels of the same name at the same
    /// index (the random streams follow them). Views redraw from the state.
    pub fn carry_state_from(&mut self, old: &mut Simulation) -> Result<(), RuntimeError> {
        old.sync()?;
        let roots: Vec<LayoutId> = self.program.roots().collect();
        for r in roots {
            let name = &self.program.layouts[r].node_id;
            // A camera field holds the new build's camera (the saved one).
            if self
                .cameras
                .keys()
                .any(|v| *name == weft_ir::passes::views::camera::field_name(v))
            {
                continue;
            }
            let Some(o) = old
                .program
                .roots()
                .find(|o| &old.program.layouts[*o].node_id == name)
            else {
                continue;
            };
            let words = old.read_root(o)?;
            if words.len() == self.read_root(r)?.len() {
                self.write_root(r, &words)?;
            }
        }
        self.frame = old.frame;
        self.started = old.started;
        for (k, n) in self.program.kernels.handles().zip(self.launches.iter_mut()) {
            let name = &self.program.kernels[k].name;
            if let Some(c) = old
                .program
                .kernels
                .handles()
                .zip(&old.launches)
                .find(|(o, _)| o.index() == k.index() && &old.program.kernels[*o].name == name)
            {
                *n = *c.1;
            }
        }
        self.kernel_times = old.kernel_times.clone();
        self.engine.sync()
    }

    pub fn read_field(&self, f: FieldId) -> Result<Vec<u32>, RuntimeError> {
        self.engine.read_field(&self.program, f)
    }

    pub fn write_field(&mut self, f: FieldId, words: &[u32]) -> Result<(), RuntimeError> {
        self.engine.write_field(&self.program, f, words)
    }

    /// The camera a 3-D view draws with now (before any turntable turn).
    pub fn view_camera(&self, node_id: &str) -> Option<Camera> {
        self.cameras.get(node_id).copied()
    }

    /// Moves a 3-D view's orbit camera: its frame (`camera::Frame`, the
    /// f64 definition rounded to f32, as the compiled views always had) is
    /// written into the view's camera field. No recompile, no field state
    /// touched; the next draw shows it. An error names the node when it is
    /// not a 3-D view of the running program, or the camera is invalid.
    pub fn set_view_camera(&mut self, node_id: &str, camera: Camera) -> Result<(), RuntimeError> {
        let bad = |m: String| RuntimeError::Run {
            node: node_id.to_string(),
            message: m,
        };
        if !self.cameras.contains_key(node_id) {
            return Err(bad(
                "is not a 3-D view of the running simulation".to_string()
            ));
        }
        let ok = camera.target.iter().all(|x| x.is_finite())
            && camera.distance.is_finite()
            && camera.distance > 0.0
            && camera.yaw.is_finite()
            && (-90.0..=90.0).contains(&camera.pitch)
            && (1.0..=170.0).contains(&camera.fov);
        if !ok {
            return Err(bad(format!(
                "camera {:?}: the target must be finite, the distance above 0, the pitch in -90..=90 and the fov in 1..=170",
                camera
            )));
        }
        self.write_camera(node_id, &camera)?;
        self.cameras.insert(node_id.to_string(), camera);
        // A volume draws the view under it through the same camera: that
        // view moves with it.
        let under = self.program.views.iter().find_map(|v| match v {
            View::Volume {
                node_id: n,
                under: Some(u),
                ..
            } if n == node_id => Some(u.clone()),
            _ => None,
        });
        if let Some(u) = under {
            if u != node_id && self.cameras.contains_key(&u) {
                return self.set_view_camera(&u, camera);
            }
        }
        Ok(())
    }

    /// Writes the frame of `camera` into the view's camera field.
    fn write_camera(&mut self, node_id: &str, camera: &Camera) -> Result<(), RuntimeError> {
        use weft_ir::passes::views::camera as cam;
        let Some(v) = self
            .program
            .view_kernels
            .iter()
            .find(|v| v.node_id == node_id)
        else {
            return Ok(());
        };
        let (w, h) = (v.width, v.height);
        let Some(f) = self.program.field_by_name(&cam::field_name(node_id)) else {
            return Ok(());
        };
        let words = cam::Frame::new(camera, w, h).words();
        self.write_field(f, &words)
    }

    /// Turntable views (`orbit_degrees_per_frame`): the camera of frame
    /// `f` is the view's camera with yaw + f * degrees.
    fn turn_tables(&mut self) -> Result<(), RuntimeError> {
        let turns: Vec<(String, Camera)> = self
            .program
            .views
            .iter()
            .filter_map(|v| {
                let s = v.scene()?;
                if s.orbit == 0.0 {
                    return None;
                }
                let mut c = *self.cameras.get(v.node_id())?;
                c.yaw = turntable_yaw(c.yaw, s.orbit, self.frame);
                Some((v.node_id().to_string(), c))
            })
            .collect();
        for (node, c) in turns {
            self.write_camera(&node, &c)?;
        }
        Ok(())
    }

    /// Runs every view's system kernels (`Program::view_kernels`) on the
    /// engine: afterwards each view's picture is in its image field, where
    /// `render_views` reads it and a GPU front end can show it in place.
    /// The schedule's launch counters are untouched, so drawing never
    /// changes what a frame computes.
    pub fn draw_views(&mut self) -> Result<(), RuntimeError> {
        self.turn_tables()?;
        let list: Vec<LaunchRecord> = self
            .program
            .view_kernels
            .iter()
            .flat_map(|v| v.launches.iter())
            .map(|&k| LaunchRecord::new(&self.program, k, self.frame, 0))
            .collect();
        if list.is_empty() {
            return Ok(());
        }
        self.engine.run(&self.program, &list, false)?;
        Ok(())
    }

    /// One view's kernels (the view node `node_id`), drawn on the
    /// simulation's engine and not read back (what `weft bench` times).
    /// False when the program has no such view.
    pub fn draw_view(&mut self, node_id: &str) -> Result<bool, RuntimeError> {
        let list: Vec<LaunchRecord> = match self
            .program
            .view_kernels
            .iter()
            .find(|v| v.node_id == node_id)
        {
            Some(v) => v
                .launches
                .iter()
                .map(|&k| LaunchRecord::new(&self.program, k, self.frame, 0))
                .collect(),
            None => return Ok(false),
        };
        self.engine.run(&self.program, &list, false)?;
        Ok(true)
    }

    /// One view (the view node `node_id`) drawn on the simulation's engine
    /// and read back: what `weft render` and the app's Render dialog take
    /// per frame, without drawing or reading the other views. A volume
    /// drawn over another view (`under`) needs that view's picture and
    /// depth first, so the views under it are drawn first, deepest first.
    /// `None` when the program has no such view.
    pub fn render_view(&mut self, node_id: &str) -> Result<Option<Image>, RuntimeError> {
        let Some(index) = self
            .program
            .view_kernels
            .iter()
            .position(|v| v.node_id == node_id)
        else {
            return Ok(None);
        };
        let mut chain = vec![node_id.to_string()];
        while let Some(u) = self.program.views.iter().find_map(|v| match v {
            View::Volume {
                node_id: n,
                under: Some(u),
                ..
            } if n == chain.last().expect("never empty") => Some(u.clone()),
            _ => None,
        }) {
            // A cycle is refused when the graph is built; stop anyway
            // rather than loop.
            if chain.contains(&u) {
                break;
            }
            chain.push(u);
        }
        self.turn_tables()?;
        for v in chain.iter().rev() {
            self.draw_view(v)?;
        }
        let v = &self.program.view_kernels[index];
        let root = layout::root_of(&self.program, self.program.fields[v.image].layout);
        let words = self.engine.read_root(root)?;
        Ok(Some(Image::from_words(v.width, v.height, v.pitch, &words)))
    }

    /// Every view, drawn on the simulation's engine and read back (one read
    /// of its image field per view): (view node id, image).
    pub fn render_views(&mut self) -> Result<Vec<(String, Image)>, RuntimeError> {
        self.draw_views()?;
        self.program
            .view_kernels
            .iter()
            .map(|v| {
                let root = layout::root_of(&self.program, self.program.fields[v.image].layout);
                let words = self.engine.read_root(root)?;
                Ok((
                    v.node_id.clone(),
                    Image::from_words(v.width, v.height, v.pitch, &words),
                ))
            })
            .collect()
    }
}

/// The yaw of a turntable at `frame` (degrees, f32): `yaw + frame * step`,
/// computed in f64 and rounded once.
pub fn turntable_yaw(yaw: f32, step: f32, frame: i32) -> f32 {
    (yaw as f64 + frame as f64 * step as f64) as f32
}
