//! Command-line arguments.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use weft_runtime::Backend;

#[derive(Parser)]
#[command(name = "weft", version, about = "Weft: node-graph simulation. Run, check, inspect and replay graph files.", long_about = None)]
pub struct Cli {
    /// Without a command, `weft` opens the desktop app.
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand)]
pub enum Command {
    /// Open the desktop app (node editor, inspector, live viewport).
    Gui(GuiArgs),
    /// Run a graph headless: write each view as PNG frames and dump fields as .npy.
    Run(RunArgs),
    /// Render one view over a frame range to an H.264 MP4 (through ffmpeg) or a PNG sequence, at any size.
    Render(RenderArgs),
    /// Bake a frame range into a cache folder the app plays back without simulating (the app's Bake button).
    Bake(BakeArgs),
    /// Load, validate and compile graphs without running them; print every error.
    Check(CheckArgs),
    /// Print the IR of a graph after a pipeline stage.
    Ir(IrArgs),
    /// Time compilation, frames, kernels and views of a graph.
    Bench(BenchArgs),
    /// Re-run graphs that have NAME.expect.json beside them and compare.
    Replay(ReplayArgs),
    /// Print the code the GPU backends generate for a graph's kernels (WGSL or SPIR-V for wgpu, CUDA C for cuda).
    Emit(EmitArgs),
    /// Gradients of a loss field with respect to fields (reverse mode; `--forward`: a directional derivative).
    Grad(GradArgs),
    /// Compare autodiff gradients with central finite differences.
    Gradcheck(GradcheckArgs),
    /// Wedges: run a graph over a grid of parameter values, here or as a Slurm / Kubernetes job array, then a contact sheet and metrics.csv.
    Sweep(crate::sweep::SweepArgs),
    /// List every node kind with its ports and parameters.
    Nodes,
    /// Print the JSON Schema of graph files.
    Schema,
}

/// `--backend NAME`: any name `weft_runtime::Backend::parse` accepts.
fn backend_arg(s: &str) -> Result<Backend, String> {
    s.parse()
}

#[derive(Args, Clone)]
pub struct GraphOverrides {
    /// Set a node parameter or kernel scalar: NODE.PARAM=VALUE (VALUE is JSON, or a string).
    #[arg(long = "set", value_name = "NODE.PARAM=VALUE")]
    pub sets: Vec<String>,
    /// Initial data for a field from a NumPy file: FIELD=FILE.npy.
    #[arg(long = "init", value_name = "FIELD=FILE.npy")]
    pub inits: Vec<String>,
    /// Seed of random() (overrides the graph's "seed").
    #[arg(long)]
    pub seed: Option<u32>,
    /// CPU worker threads (default: one per core; 1 makes float atomics repeat exactly).
    #[arg(long)]
    pub threads: Option<usize>,
    /// wgpu: invocations per workgroup of every kernel (default 256).
    #[arg(long, value_name = "N")]
    pub workgroup_size: Option<u32>,
    /// Memory all layout trees together may take, e.g. 40GiB or 512MiB (default: what the machine has: free RAM for cpu, vm and lavapipe, free device memory for cuda). Device limits (wgpu's max_buffer_size, 16 GiB per layout tree) still apply.
    #[arg(long, value_name = "SIZE", value_parser = memory_arg)]
    pub max_memory: Option<u64>,
    /// Turn off the inter-kernel optimiser over the frame schedule (list reuse, redundant clears, dead stores, task fusion, activation demotion, no compiling of kernels nothing launches: see `weft ir GRAPH --stage schedule`). Results are the same either way; for A/B timing and debugging.
    #[arg(long)]
    pub no_interkernel: bool,
}

/// `--max-memory SIZE`: `weft_runtime::memory_limit::parse_bytes`.
fn memory_arg(s: &str) -> Result<u64, String> {
    weft_runtime::memory_limit::parse_bytes(s)
}

/// `weft bake`: the same cache folder as the app's Bake button.
#[derive(Args)]
#[command(
    after_help = "The cache folder holds cache.json (the frame range, the backend and the graph \
document baked) and one frame_NNNNNN/ folder per frame with that frame's state \
(the fields --fields chose, the frame counter, the random streams), each written whole or not at all. \
Opened in the app (`weft gui GRAPH`), GRAPH.cache/ beside the graph is picked up: its frames \
show on the timeline and play without simulating, as long as the graph is the one baked.\n\n\
Example:\n  weft bake graphs/life.json --frames 0:120 --backend cpu"
)]
pub struct BakeArgs {
    /// The graph file (.json).
    pub graph: PathBuf,
    /// The frame range A:B to bake, both included (frame 0 is the state after on_start).
    #[arg(long, value_parser = frame_range_arg)]
    pub frames: (i32, i32),
    /// auto, cpu (`jit`), vm, wgpu or cuda, as for `weft run`. Caches baked on the same backend are identical.
    #[arg(long, default_value = "auto", value_parser = backend_arg)]
    pub backend: Backend,
    /// The cache folder (default: GRAPH_NAME.cache beside the graph, where the app looks). A cache there is replaced.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// What each frame stores: `views` (default: the fields the views read; everything in a graph without
    /// views), `all` (every field's state: any baked frame can be played on from and resumed), or field names,
    /// comma-separated (`T,rho`; `x.grad` for a gradient). Unless that is the whole state, frames hold only
    /// those fields and the last frame is stored whole; only an edit upstream of those fields makes the cache stale.
    #[arg(long, value_parser = crate::gui::bake::Contents::parse)]
    pub fields: Option<crate::gui::bake::Contents>,
    /// CPU worker threads (default: one per core). 1 makes floating-point atomics add in a fixed order, so a
    /// graph with them (MPM's particle-to-grid) bakes to the same bytes every time on cpu.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
}

/// `weft render`: one view, a frame range, a size, a movie or PNGs.
#[derive(Args)]
#[command(
    after_help = "Frame N is the state after N frames (0: after on_start), numbered as `weft run` \
numbers VIEW_000N.png; frames before A are simulated but not drawn. The view is drawn at --size \
whatever its own width/height parameters say (a view with them is rebuilt at that size, with the \
views under a volume; an image view, one pixel per cell of its field, is scaled by nearest \
neighbour). An .mp4 is encoded by the ffmpeg on PATH (libx264, yuv420p, crf 18) into a temporary \
file beside PATH and renamed into place when it is complete: a fault or Ctrl+C leaves no half-written \
movie. A PNG sequence writes each frame whole; a link at a destination is refused before anything runs.\n\n\
Examples:\n  weft render graphs/heat.json --view view --frames 0:120 --size 512x512 --out heat.mp4\n  \
weft render graphs/smoke3d.json --view view --frames 1:48 --size 1280x720 --out frames/smoke_####.png"
)]
pub struct RenderArgs {
    /// The graph file (.json).
    pub graph: PathBuf,
    /// The view node to draw (its id; `GROUP/ID` inside a group). A wrong id lists the graph's views.
    #[arg(long, value_name = "VIEW")]
    pub view: String,
    /// The frames A:B to draw, both included; the simulation runs up to B.
    #[arg(long, value_name = "A:B", value_parser = frame_range_arg)]
    pub frames: (i32, i32),
    /// The picture's size in pixels, WIDTHxHEIGHT (1 to 8192 each; even for an .mp4, which H.264 in yuv420p needs).
    #[arg(long, value_name = "WxH", value_parser = size_arg)]
    pub size: (u32, u32),
    /// NAME.mp4 for an H.264 movie (needs ffmpeg on PATH), or a file name with a run of # ending in .png for a
    /// PNG sequence (frames/smoke_####.png: # is the zero-padded frame number). An existing file is replaced
    /// only when the render completes.
    #[arg(long, value_name = "PATH")]
    pub out: PathBuf,
    /// auto (wgpu on a hardware GPU, else cpu), cpu (`jit`), vm, wgpu or cuda, as for `weft run`.
    #[arg(long, default_value = "auto", value_parser = backend_arg)]
    pub backend: Backend,
    /// Frames per second of the movie (1 to 240; a PNG sequence has none).
    #[arg(long, value_name = "N", default_value_t = 24)]
    pub fps: u32,
    /// Start from the newest complete snapshot in DIR (`weft run --checkpoint DIR`) instead of frame 0; it must
    /// be of this graph and at or before frame A.
    #[arg(long, value_name = "DIR")]
    pub resume: Option<PathBuf>,
    #[command(flatten)]
    pub overrides: GraphOverrides,
}

/// `--size WxH`.
fn size_arg(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("'{}' is not a size WIDTHxHEIGHT (e.g. 1280x720)", s);
    let (w, h) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    let w: u32 = w.trim().parse().map_err(|_| bad())?;
    let h: u32 = h.trim().parse().map_err(|_| bad())?;
    let max = weft_open::render::MAX_SIDE;
    if w == 0 || h == 0 || w > max || h > max {
        return Err(format!(
            "size '{}': width and height must be 1 to {} pixels",
            s, max
        ));
    }
    Ok((w, h))
}

fn frame_range_arg(s: &str) -> Result<(i32, i32), String> {
    let (a, b) = s
        .split_once(':')
        .ok_or_else(|| format!("'{}' is not a frame range A:B (e.g. 0:120)", s))?;
    let p = |t: &str| {
        t.trim()
            .parse::<i32>()
            .map_err(|_| format!("'{}' in '{}' is not a frame number", t, s))
    };
    let (a, b) = (p(a)?, p(b)?);
    if a < 0 || b < a {
        return Err(format!(
            "frame range '{}': the first frame must be 0 or more and not after the last",
            s
        ));
    }
    Ok((a, b))
}

#[derive(Args)]
pub struct RunArgs {
    /// The graph file (.json).
    pub graph: PathBuf,
    /// Frames to run after on_start (with --resume: the frame to end at).
    #[arg(long, default_value_t = 1)]
    pub frames: u32,
    /// auto (wgpu on a hardware GPU, else cpu), cpu (kernels compiled to native code; `jit` is an alias), vm (the reference interpreter), wgpu or cuda (NVIDIA GPUs; needs the CUDA driver and NVRTC).
    #[arg(long, default_value = "auto", value_parser = backend_arg)]
    pub backend: Backend,
    /// Output directory: VIEW_FRAME.png per view per frame (frame numbered from 0001), FIELD.npy dumps.
    #[arg(long, default_value = "out")]
    pub out: PathBuf,
    /// Write this field as OUT/FIELD.npy at the end of the run (repeatable).
    #[arg(long = "dump", value_name = "FIELD")]
    pub dumps: Vec<String>,
    /// Dump every field.
    #[arg(long)]
    pub dump_all: bool,
    /// Do not write PNG frames.
    #[arg(long)]
    pub no_frames: bool,
    /// Write complete state snapshots into this folder (DIR/frame_NNNNNN/, each written whole or not at all), every --every frames and after the last frame.
    #[arg(long, value_name = "DIR")]
    pub checkpoint: Option<PathBuf>,
    /// With --checkpoint: frames between snapshots.
    #[arg(long, value_name = "K", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub every: u32,
    /// With --checkpoint: snapshots kept (older ones are removed).
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    pub keep: u32,
    /// Export fields every frame: FIELDS=FORMAT[:PATH] (repeatable). ply: `x` or `x,v,J` (a vec3/vec2 position field, then attributes on its layout) as one binary PLY per frame; vdb: one 3-axis f32 or vec3 field as one OpenVDB grid per frame (voxel size 1/max(shape): the unit box); usd: points (a position field and primvars) or a volume (a 3-axis field, with its per-frame .vdb files) in one .usda holding every frame (24 per second; a volume's is rewritten every frame, a point cloud's written when the run ends). A view's node id in place of FIELDS exports what it shows: a surface view its iso-surface as a triangle mesh (ply with faces, or a usd Mesh), a particles view its positions, a volume view its field. PATH: per-frame files with a run of # for the frame number (default OUT/FIELD_####.ply or .vdb); for usd the .usda (default OUT/FIELD.usda).
    #[arg(long = "export", value_name = "FIELDS=FORMAT[:PATH]")]
    pub exports: Vec<weft_runtime::export::ExportSpec>,
    /// With --export ...=usd on points: the points' width (world units).
    #[arg(long, value_name = "W", default_value_t = 0.01)]
    pub point_width: f32,
    /// With --export ...=vdb (or a usd volume): how grid values are stored: zip (zlib, OpenVDB's default where Blosc is absent; every OpenVDB reader, Houdini and Blender read it) or none (raw, larger, faster to write).
    #[arg(long, value_name = "KIND", default_value = "zip", value_parser = ["zip", "none"])]
    pub vdb_compression: String,
    /// Continue from the newest complete snapshot in DIR, up to frame --frames (a snapshot of another or an edited graph is refused, naming what differs). With --checkpoint DIR as well, an empty DIR starts from frame 0, so one command serves a first run and its retries.
    #[arg(long, value_name = "DIR")]
    pub resume: Option<PathBuf>,
    #[command(flatten)]
    pub overrides: GraphOverrides,
}

#[derive(Args)]
pub struct GuiArgs {
    /// A graph file to open.
    pub graph: Option<PathBuf>,
    /// Write a screenshot of the whole window to FILE (PNG) and exit.
    #[arg(long, value_name = "FILE")]
    pub screenshot: Option<PathBuf>,
    /// With --screenshot: run this many simulation frames first.
    #[arg(long, default_value_t = 10)]
    pub after_frames: u32,
    /// Use Weft's own file dialog instead of the platform's (it is also used
    /// whenever the platform's cannot open, e.g. without a desktop portal).
    #[arg(long)]
    pub weft_file_dialog: bool,
    /// Start on this backend (default: the one last chosen in the toolbar, when this machine offers it, else auto): BACKEND as `weft run --backend` takes it.
    #[arg(long, value_name = "BACKEND", value_parser = backend_arg)]
    pub backend: Option<Backend>,
}

#[derive(Args)]
pub struct CheckArgs {
    /// Graph files to check.
    #[arg(required = true)]
    pub graphs: Vec<PathBuf>,
    /// Memory the layout trees may take, e.g. 40GiB (default: this machine's free RAM); a graph that needs more fails the check.
    #[arg(long, value_name = "SIZE", value_parser = memory_arg)]
    pub max_memory: Option<u64>,
}

#[derive(Args)]
pub struct IrArgs {
    pub graph: PathBuf,
    /// Only this kernel node.
    #[arg(long)]
    pub kernel: Option<String>,
    /// Pipeline stage: front, inline, const_fold, simplify, autodiff, schedule (prints the frame schedule before and after the inter-kernel optimiser, its state-flow graph, and the program; fused launches show as 'a+b'), lower_access, final, store_fusion, atomic_demotion, legalize.
    #[arg(long, default_value = "final")]
    pub stage: String,
    /// Print the IR as this backend gets it (the pipeline is the same for all; code-size budgets such as loop unrolling differ, and legalize writes the atomics a backend lacks as compare-exchange loops): vm, cpu, wgpu or cuda (default: the default budgets and no optional atomics, which every backend accepts).
    #[arg(long, value_parser = backend_arg)]
    pub backend: Option<Backend>,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum EmitFormat {
    /// WGSL text written by naga from the generated module.
    Wgsl,
    /// SPIR-V (binary, written to --out).
    Spirv,
    /// CUDA C for the cuda backend (what NVRTC compiles at run time; needs no GPU).
    Cuda,
}

#[derive(Args)]
pub struct EmitArgs {
    #[arg(value_enum)]
    pub format: EmitFormat,
    pub graph: PathBuf,
    /// Only this kernel node.
    #[arg(long)]
    pub kernel: Option<String>,
    /// For spirv: the directory to write KERNEL.spv files into.
    #[arg(long, default_value = "out")]
    pub out: PathBuf,
}

#[derive(Args)]
pub struct BenchArgs {
    pub graph: PathBuf,
    /// Frames to time (after one warm-up frame).
    #[arg(long, default_value_t = 10)]
    pub frames: u32,
    /// auto (wgpu on a hardware GPU, else cpu), cpu (kernels compiled to native code; `jit` is an alias), vm (the reference interpreter), wgpu or cuda (NVIDIA GPUs; needs the CUDA driver and NVRTC).
    #[arg(long, default_value = "auto", value_parser = backend_arg)]
    pub backend: Backend,
    /// Print one JSON object instead of a table (with every timed frame in `frame_ms.samples`; per kernel `median_ms`, `launches` and `buffer_fill`: wgpu ran it as a buffer fill; per view `median_ms` of one draw, `width`, `height`).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub overrides: GraphOverrides,
}

#[derive(Args)]
pub struct ReplayArgs {
    /// Graph files or directories (every *.json with a *.expect.json beside it).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Re-record the expectations instead of comparing.
    #[arg(long)]
    pub update: bool,
    /// With --update: frames to record (default: the recorded count, or 3 for a new file).
    #[arg(long)]
    pub frames: Option<u32>,
    /// Only this backend: cpu, vm, wgpu or cuda; cpu and vm are both held to the file's `cpu` entry, cuda to its own `cuda` entry or else the `cpu` one (default: every backend recorded in the file, `cpu` entries on the reference VM; the VM for a new file).
    #[arg(long, value_parser = backend_arg)]
    pub backend: Option<Backend>,
    /// CPU worker threads. The default, 1, makes floating-point atomics add in a fixed order so runs repeat exactly.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Turn off the inter-kernel optimiser over the frame schedule; the recorded fields must match either way.
    #[arg(long)]
    pub no_interkernel: bool,
}

/// What `weft grad` and `weft gradcheck` differentiate.
#[derive(Args, Clone)]
pub struct GradTarget {
    /// The graph file (.json).
    pub graph: PathBuf,
    /// The loss field (needs "grad": true). Its gradient is seeded with 1 in every
    /// element, so the loss is the sum of its elements.
    #[arg(long)]
    pub loss: String,
    /// Frames to run after on_start. A graph without a `tape` node gets one around
    /// on_start and these frames (frame() reads 0 inside it); a graph with a tape
    /// runs as `weft run` does, and its tape's loss must be --loss.
    #[arg(long, default_value_t = 0)]
    pub frames: u32,
    /// vm (default), cpu (`jit` is another name), wgpu or cuda.
    #[arg(long, default_value = "vm", value_parser = backend_arg)]
    pub backend: Backend,
    #[command(flatten)]
    pub overrides: GraphOverrides,
}

/// `weft grad GRAPH --loss FIELD --wrt FIELD... [--dump-grads DIR]`: runs the
/// graph under a tape and prints the loss and, per field, the sum, absolute
/// sum and largest magnitude of d loss / d field (as the field was at tape entry).
///
/// With `--forward --wrt FIELD --dir FILE.npy`: forward mode instead (one run
/// of tangent kernels): prints the directional derivative d loss · dir, the
/// sum over the loss field of its derivative along dir (FIELD moved by dir at
/// tape entry), without computing the whole gradient.
#[derive(Args)]
pub struct GradArgs {
    #[command(flatten)]
    pub target: GradTarget,
    /// A field to differentiate with respect to (repeatable; needs "grad": true).
    #[arg(long, required = true, num_args = 1..)]
    pub wrt: Vec<String>,
    /// Write each gradient as DIR/FIELD.grad.npy (with --forward: every field's
    /// tangent as DIR/FIELD.tangent.npy).
    #[arg(long, value_name = "DIR")]
    pub dump_grads: Option<PathBuf>,
    /// Forward mode (a Jacobian-vector product along --dir) instead of reverse mode.
    #[arg(long)]
    pub forward: bool,
    /// With --forward: the direction for each --wrt field, in the same order, as
    /// a .npy file of the field's shape (+ [N] for vecN, + [N, N] for matN), f32.
    #[arg(long, value_name = "FILE.npy", requires = "forward")]
    pub dir: Vec<PathBuf>,
}

/// `weft gradcheck GRAPH --loss FIELD --wrt FIELD [--samples N]`: compares the
/// autodiff gradient of sampled components of FIELD with central finite
/// differences (f32 runs, step `--step · max(1, |x|)`), prints the relative
/// error of each and exits with 1 when one exceeds `--tolerance`.
#[derive(Args)]
pub struct GradcheckArgs {
    #[command(flatten)]
    pub target: GradTarget,
    /// The field to perturb (needs "grad": true).
    #[arg(long)]
    pub wrt: String,
    /// How many components to check (spread evenly over the field).
    #[arg(long, default_value_t = 8)]
    pub samples: usize,
    /// Relative finite-difference step.
    #[arg(long, default_value_t = 1e-2)]
    pub step: f64,
    /// Largest accepted relative error |ad - fd| / max(|ad|, |fd|, --abs). f32
    /// finite differences of long rollouts carry a few percent of noise.
    #[arg(long, default_value_t = 5e-2)]
    pub tolerance: f64,
    /// Gradients smaller than this count as this size when comparing (0: purely relative).
    #[arg(long = "abs", default_value_t = 0.0)]
    pub abs: f64,
}
