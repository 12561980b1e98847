//! A wgpu device opened once and shared: by the simulations of a run (the
//! wgpu backend's engines, `wgpu_backend.rs`), by `auto` when it looks for a
//! hardware GPU, and by the app's window. Its own module so that what a
//! simulation is opened with (`spec::SimOptions`) can name it without
//! importing the engine.

use crate::kernel_cache::{Keep, KernelCache};
use crate::RuntimeError;
use std::sync::{Arc, Mutex};
use weft_codegen::wgpu::WgpuKernel;

/// Which adapters `WgpuContext::new` accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdapterChoice {
    /// Any adapter, software rasterizers (lavapipe) included.
    Any,
    /// Only hardware (discrete, integrated or virtual) GPUs.
    HardwareOnly,
}

/// A wgpu device shared by simulations (and later by the app's viewport).
/// llvmpipe's `LP_MAX_TGSI_LOOP_ITERATIONS` (see [`WgpuContext::loop_trip_limit`]).
pub const LLVMPIPE_LOOP_TRIPS: u32 = 65_535;

pub struct WgpuContext {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: wgpu::AdapterInfo,
    pub limits: wgpu::Limits,
    pub float_atomics: bool,
    /// 64-bit scalars in shaders (SHADER_F64 and SHADER_INT64), for
    /// kernels that use `f64`, `i64` or `u64`.
    pub wide: bool,
    /// GPU timestamps are available for timing kernels (never on a
    /// software adapter: see `software`).
    pub timestamps: bool,
    /// A software adapter (lavapipe, SwiftShader: `DeviceType::Cpu`). Its
    /// timestamp queries exist but do not measure its work (lavapipe gave
    /// 0.02 ms per kernel in an 848 ms frame), so kernels are timed by
    /// wall time from submit to completion instead.
    pub software: bool,
    /// The device was opened with subgroup operations (`LaneMax`).
    pub subgroups: bool,
    pub(crate) errors: Arc<Mutex<Vec<String>>>,
    /// Compiled kernels by content, so a graph edit recompiles only what
    /// changed; kept while the device lives.
    pub(crate) pipelines: KernelCache<CachedKernel>,
}

pub(crate) struct CachedKernel {
    pub(crate) code: WgpuKernel,
    pub(crate) pipeline: wgpu::ComputePipeline,
    pub(crate) layout: wgpu::BindGroupLayout,
}

impl WgpuContext {
    pub fn new(choice: AdapterChoice) -> Result<WgpuContext, RuntimeError> {
        // Vulkan / Metal / DX12 (WebGPU in a browser) only. OpenGL is looked
        // at only to say why it is refused: GLSL leaves integer `%` of
        // negative operands undefined (llvmpipe's GL gives 2 for -68 % 3,
        // Weft -2), so kernels would compute wrong integers without an error.
        let instance_for = |backends: wgpu::Backends| {
            let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
            desc.backends &= backends;
            wgpu::Instance::new(desc)
        };
        let adapters = crate::platform::wait_for(
            instance_for(wgpu::Backends::PRIMARY).enumerate_adapters(wgpu::Backends::PRIMARY),
        )?;
        if adapters.is_empty() {
            let gl = crate::platform::wait_for(
                instance_for(wgpu::Backends::SECONDARY)
                    .enumerate_adapters(wgpu::Backends::SECONDARY),
            )?;
            if let Some(a) = gl.first() {
                return Err(RuntimeError::Device(format!(
                    "the only GPU adapter is {} through {:?}, which wgpu kernels do not use: OpenGL's integer rules differ from Weft's (`%` of negative numbers), so results would be wrong. Use Vulkan (on a machine without a GPU: apt-get install mesa-vulkan-drivers), Metal or DX12, or --backend cpu",
                    a.get_info().name,
                    a.get_info().backend
                )));
            }
        }
        let score = |a: &wgpu::Adapter| match a.get_info().device_type {
            wgpu::DeviceType::DiscreteGpu => 4,
            wgpu::DeviceType::IntegratedGpu => 3,
            wgpu::DeviceType::VirtualGpu => 2,
            wgpu::DeviceType::Other => 1,
            wgpu::DeviceType::Cpu => 0,
        };
        let found: Vec<String> = adapters
            .iter()
            .map(|a| {
                format!(
                    "{} ({:?}, {:?})",
                    a.get_info().name,
                    a.get_info().device_type,
                    a.get_info().backend
                )
            })
            .collect();
        let adapter = adapters
            .into_iter()
            .filter(|a| a.get_downlevel_capabilities().flags.contains(wgpu::DownlevelFlags::COMPUTE_SHADERS))
            .filter(|a| choice == AdapterChoice::Any || score(a) >= 2)
            .max_by_key(score)
            .ok_or_else(|| {
                RuntimeError::Device(if found.is_empty() {
                    "no GPU adapter found (on a machine without a GPU, install Mesa's lavapipe: apt-get install mesa-vulkan-drivers)".to_string()
                } else {
                    format!("no suitable GPU adapter among: {}", found.join(", "))
                })
            })?;
        let info = adapter.get_info();
        let float_atomics = adapter
            .features()
            .contains(wgpu::Features::SHADER_FLOAT32_ATOMIC);
        let software = info.device_type == wgpu::DeviceType::Cpu;
        let timestamps = adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY) && !software;
        let wide_features = wgpu::Features::SHADER_F64 | wgpu::Features::SHADER_INT64;
        let wide = adapter.features().contains(wide_features);
        let mut required_features = wgpu::Features::empty();
        if wide {
            required_features |= wide_features;
        }
        if float_atomics {
            required_features |= wgpu::Features::SHADER_FLOAT32_ATOMIC;
        }
        if timestamps {
            required_features |= wgpu::Features::TIMESTAMP_QUERY;
        }
        // Subgroup operations: legalize's loop trip count on llvmpipe
        // keeps each invocation's count at its subgroup's (`LaneMax`).
        let subgroups = adapter.features().contains(wgpu::Features::SUBGROUP);
        if subgroups {
            required_features |= wgpu::Features::SUBGROUP;
        }
        let limits = adapter.limits();
        let (device, queue) =
            crate::platform::wait_for(adapter.request_device(&wgpu::DeviceDescriptor {
                label: Some("weft"),
                required_features,
                required_limits: limits.clone(),
                ..Default::default()
            }))?
            .map_err(|e| RuntimeError::Device(format!("cannot open {}: {}", info.name, e)))?;
        let errors = Arc::new(Mutex::new(Vec::new()));
        let sink = errors.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            if let Ok(mut v) = sink.lock() {
                v.push(e.to_string());
            }
        }));
        let sink = errors.clone();
        device.set_device_lost_callback(move |reason, message| {
            if let Ok(mut v) = sink.lock() {
                v.push(format!("device lost ({:?}): {}", reason, message));
            }
        });
        Ok(WgpuContext {
            device,
            queue,
            info,
            limits,
            float_atomics,
            wide,
            timestamps,
            software,
            subgroups,
            errors,
            pipelines: KernelCache::new(Keep::Always),
        })
    }

    /// Loop trips one invocation may make, all loops together, before the
    /// driver silently leaves the loop it is in ([`TargetCaps::loop_trip_limit`]).
    ///
    /// llvmpipe (lavapipe) guards every shader with one counter of loop
    /// trips, `LP_MAX_TGSI_LOOP_ITERATIONS` = 65,535, set at the top of
    /// the shader and decremented at the end of every trip of every loop,
    /// a final trip included; at zero the loop exits as if it had ended,
    /// with no error. Measured on Mesa 22.3.6 (LLVM 15, 256-bit lanes):
    /// a 100,000-iteration `for` loop ran 65,535 iterations; 300 × 300
    /// nested loops stopped at 65,101 (217 × (300 + 1 + 1) + 1 trips); two
    /// loops of 40,000 in a row gave 40,000 + 25,534. The counter belongs
    /// to the 8 invocations llvmpipe runs side by side (a lane with 0
    /// iterations in a first loop and 70,000 in a second made 1 when its
    /// neighbour used the trips up in the first). The limit is compiled
    /// into Mesa: no environment variable lifts it. Other drivers have
    /// none that Weft knows of.
    ///
    /// [`TargetCaps::loop_trip_limit`]: weft_ir::ir::target::TargetCaps::loop_trip_limit
    pub fn loop_trip_limit(&self) -> Option<u32> {
        let llvmpipe = |s: &str| s.to_ascii_lowercase().contains("llvmpipe");
        (llvmpipe(&self.info.name) || llvmpipe(&self.info.driver)).then_some(LLVMPIPE_LOOP_TRIPS)
    }

    /// Why a device the caller opened (the window's) cannot run Weft's
    /// kernels, or `None` when it can: an OpenGL adapter (its integer `%`
    /// differs from Weft's, as `new` says), or one without compute shaders
    /// (GL llvmpipe reports a workgroup size limit of 0). The app then
    /// treats its window as having no GPU: `auto` passes wgpu by and the
    /// chooser shows wgpu disabled with this reason.
    pub fn unusable_shared(adapter: &wgpu::Adapter, device: &wgpu::Device) -> Option<String> {
        let info = adapter.get_info();
        let compute = adapter
            .get_downlevel_capabilities()
            .flags
            .contains(wgpu::DownlevelFlags::COMPUTE_SHADERS);
        unusable_reason(
            &info.name,
            info.backend,
            compute,
            device.limits().max_compute_invocations_per_workgroup,
        )
    }

    /// Wraps a device the caller already opened (the app shares eframe's).
    pub fn from_shared(
        adapter: &wgpu::Adapter,
        device: wgpu::Device,
        queue: wgpu::Queue,
    ) -> WgpuContext {
        let features = device.features();
        let errors = Arc::new(Mutex::new(Vec::new()));
        let sink = errors.clone();
        // The device's one error handler sees the window's errors too: a
        // surface that could not be reconfigured while a long simulation
        // frame ran is the window's, not a kernel's, and is said as such
        // rather than stopping the simulation at whichever node ran last.
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            let text = e.to_string();
            if is_window_error(&text) {
                eprintln!("warning: the window's GPU surface: {}", text.trim());
                return;
            }
            if let Ok(mut v) = sink.lock() {
                v.push(text);
            }
        }));
        let info = adapter.get_info();
        let software = info.device_type == wgpu::DeviceType::Cpu;
        WgpuContext {
            limits: device.limits(),
            float_atomics: features.contains(wgpu::Features::SHADER_FLOAT32_ATOMIC),
            wide: features.contains(wgpu::Features::SHADER_F64 | wgpu::Features::SHADER_INT64),
            timestamps: features.contains(wgpu::Features::TIMESTAMP_QUERY) && !software,
            software,
            subgroups: features.contains(wgpu::Features::SUBGROUP),
            device,
            queue,
            info,
            errors,
            pipelines: KernelCache::new(Keep::Always),
        }
    }

    /// How many kernels this context has compiled (for tests and the app's status line).
    pub fn compiled_count(&self) -> usize {
        self.pipelines.compiled()
    }

    pub fn describe(&self) -> String {
        format!(
            "{} ({:?}, {:?})",
            self.info.name, self.info.device_type, self.info.backend
        )
    }

    /// Errors reported by wgpu since the last call.
    pub(crate) fn take_errors(&self) -> Vec<String> {
        self.errors
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default()
    }

    pub(crate) fn wait(&self) -> Result<(), RuntimeError> {
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| RuntimeError::Device(format!("waiting for the GPU failed: {}", e)))?;
        Ok(())
    }
}

impl std::fmt::Debug for WgpuContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WgpuContext({})", self.describe())
    }
}

/// Whether a wgpu error on a shared device came from the window's surface
/// (wgpu names the call it failed in: `In Surface::configure`, …); the
/// simulation has no surface.
fn is_window_error(text: &str) -> bool {
    text.contains("In Surface::")
}

/// `WgpuContext::unusable_shared`'s rule, on what an adapter reports.
fn unusable_reason(
    name: &str,
    backend: wgpu::Backend,
    compute_shaders: bool,
    max_invocations: u32,
) -> Option<String> {
    if backend == wgpu::Backend::Gl {
        return Some(format!(
            "the window draws with {} through OpenGL, which wgpu kernels do not use (OpenGL's integer rules differ from Weft's); install a Vulkan driver (apt-get install mesa-vulkan-drivers) or use cpu",
            name
        ));
    }
    if !compute_shaders || max_invocations == 0 {
        return Some(format!(
            "the window's GPU ({}) cannot run compute shaders",
            name
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_on_opengl_or_without_compute_is_refused_with_its_reason() {
        let gl = unusable_reason("llvmpipe", wgpu::Backend::Gl, false, 0).unwrap();
        assert!(gl.contains("OpenGL") && gl.contains("llvmpipe"), "{}", gl);
        let none = unusable_reason("x", wgpu::Backend::Vulkan, true, 0).unwrap();
        assert!(none.contains("cannot run compute shaders"), "{}", none);
        assert_eq!(
            unusable_reason("lavapipe", wgpu::Backend::Vulkan, true, 1024),
            None
        );
    }

    /// What the app saw on lavapipe while smoke3d's frame ran: the
    /// window's surface error, which stopped the simulation at node
    /// `jacobi_a` before (and `weft gui --screenshot` never finished).
    #[test]
    fn the_windows_surface_errors_are_not_the_simulations() {
        let seen = "Validation Error\n\nCaused by:\n  In Surface::configure\n    Failed to wait for GPU to come idle before reconfiguring the Surface\n";
        assert!(is_window_error(seen));
        let kernel =
            "Validation Error\n\nCaused by:\n  In a ComputePass\n    In a dispatch command\n";
        assert!(!is_window_error(kernel));
    }
}
