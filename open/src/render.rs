//! Renders: one view of a graph drawn for a frame range at a chosen size,
//! written as an H.264 MP4 (through an `ffmpeg` found on PATH) or as a PNG
//! sequence. `weft render` and the app's Render dialog both call
//! [`render`], so a frame rendered from either is the same file.
//!
//! The simulation is the one `weft run` opens (`GraphSource::build`, then
//! `Simulation::new`), stepped frame by frame; frame 0 is the state after
//! `on_start`, frame N the state after N frames, as `weft run` numbers its
//! PNGs (`VIEW_000N.png`). A view with `width` / `height` parameters is
//! rebuilt at the render size (the same override `--set V.width=W` makes,
//! applied to the views drawn under it too, which must match it); an
//! `image` view, whose picture has one pixel per cell of its field, is
//! drawn at the field's size and scaled to the render size by nearest
//! neighbour (each cell stays a sharp block; another aspect ratio
//! stretches it).
//!
//! Why ffmpeg on PATH: there is no maintained pure-Rust H.264 encoder of
//! usable quality. `less-avc` is pure Rust but writes lossless PCM
//! all-intra frames only (movies as large as the raw pictures);
//! `rusty_h264-encoder` is young (all-intra, DC prediction, no deblocking
//! at 0.2). `openh264` builds Cisco's C++ library from source (a C++
//! compiler and nasm on every build machine) or loads Cisco's binary at
//! run time, and encodes Baseline profile only; `ffmpeg-next` links
//! libav*, so every build of Weft would need FFmpeg's development headers
//! of a matching version. Spawning the `ffmpeg` a render node or
//! workstation already has keeps the build pure Rust and the encoder
//! (libx264) the one users know; the PNG sequence needs nothing outside
//! Weft.
//!
//! Writes: an MP4 is encoded into a temporary file beside the destination
//! (`weft_ir::io::AtomicFile`) and renamed over it only when ffmpeg
//! finished, so a fault, an ffmpeg failure or a cancel leaves the
//! destination as it was (the temporary file, ours alone, is removed).
//! Each PNG of a sequence is written whole or not at all the same way; a
//! render stopped half-way keeps the frames it completed. A destination
//! that is a symbolic link is refused before anything is simulated or
//! written, for either kind.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use weft_ir::graph::overrides::Overrides;
use weft_ir::graph::GraphSource;
use weft_ir::io::AtomicFile;
use weft_ir::ir::{Program, View};
use weft_runtime::render::Image;
use weft_runtime::{RuntimeError, SimOptions, Simulation};

/// The largest render side, as a view's own `width` / `height` allow.
pub const MAX_SIDE: u32 = 8192;

/// What to render.
#[derive(Clone, Debug, PartialEq)]
pub struct RenderSpec {
    /// The view node id (`smoke/view` inside a group).
    pub view: String,
    /// The frame range, both included.
    pub first: i32,
    pub last: i32,
    pub width: u32,
    pub height: u32,
    /// `NAME.mp4`, or a path with a run of `#` ending in `.png`.
    pub out: PathBuf,
    /// Frames per second of the movie (unused for a PNG sequence).
    pub fps: u32,
    /// Start from the newest snapshot in this folder (`weft run --checkpoint`).
    pub resume: Option<PathBuf>,
}

/// Where the frames go, chosen by the output path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// An H.264 MP4 file.
    Movie(PathBuf),
    /// One PNG per frame: the path's last run of `#` is the frame number.
    Sequence(PathBuf),
}

impl Output {
    /// `*.mp4` is a movie; a file name with a run of `#` ending in `.png`
    /// a PNG sequence; anything else is refused, saying both forms.
    pub fn of(path: &Path) -> Result<Output, RenderError> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_lowercase())
            .unwrap_or_default();
        if name.contains('#') && name.ends_with(".png") {
            return Ok(Output::Sequence(path.to_path_buf()));
        }
        if name.ends_with(".mp4") && !name.contains('#') {
            return Ok(Output::Movie(path.to_path_buf()));
        }
        Err(RenderError::Output(format!(
            "--out {}: write NAME.mp4 for a movie, or a file name with a run of # \
             ending in .png for a PNG sequence (frames/smoke_####.png)",
            path.display()
        )))
    }

    /// The file frame `frame` goes to (a movie: the movie).
    pub fn file_of(&self, frame: i32) -> PathBuf {
        match self {
            Output::Movie(p) => p.clone(),
            Output::Sequence(t) => weft_runtime::export::frame_path(t, frame),
        }
    }
}

/// Why a render did not finish. Each says what to change: the flag, the
/// node, or what to install.
#[derive(Clone, Debug, PartialEq)]
pub enum RenderError {
    /// `--view`: no view node of that id; the views there are.
    NoSuchView {
        view: String,
        available: Vec<String>,
    },
    /// `--frames`: an empty or negative range, or one a snapshot is past.
    Frames(String),
    /// `--size`: zero, too large, or odd for an MP4.
    Size(String),
    /// `--out`: neither kind, a link, a folder, or not writable.
    Output(String),
    /// `--fps` out of range.
    Fps(String),
    /// An MP4 needs ffmpeg and none is on PATH.
    NoFfmpeg,
    /// ffmpeg could not start, or failed (its own words).
    Encoder(String),
    /// The graph does not build, the backend does not open, or a frame
    /// faulted: the runtime's error, naming the node.
    Sim(RuntimeError),
    /// Cancelled after `frames` frames were rendered (an MP4: none kept).
    Cancelled { frames: u32 },
}

impl std::fmt::Display for RenderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RenderError::NoSuchView { view, available } if available.is_empty() => write!(
                f,
                "--view {}: the graph has no view nodes to render (add an image, particles, surface, volume, plot or histogram view)",
                view
            ),
            RenderError::NoSuchView { view, available } => write!(
                f,
                "--view {}: no view node '{}'; views: {}",
                view,
                view,
                available.join(", ")
            ),
            RenderError::Frames(m)
            | RenderError::Size(m)
            | RenderError::Output(m)
            | RenderError::Fps(m)
            | RenderError::Encoder(m) => f.write_str(m),
            RenderError::NoFfmpeg => f.write_str(
                "an .mp4 is encoded by ffmpeg, and there is no `ffmpeg` on PATH: install it \
                 (Debian/Ubuntu: apt-get install ffmpeg; Fedora: dnf install ffmpeg; macOS: \
                 brew install ffmpeg; Windows: winget install ffmpeg) or render a PNG sequence \
                 (--out frames/NAME_####.png)",
            ),
            RenderError::Sim(e) => write!(f, "{}", e),
            RenderError::Cancelled { frames } => write!(
                f,
                "render cancelled after {} frame{}",
                frames,
                if *frames == 1 { "" } else { "s" }
            ),
        }
    }
}

impl std::error::Error for RenderError {}

impl From<RuntimeError> for RenderError {
    fn from(e: RuntimeError) -> Self {
        RenderError::Sim(e)
    }
}

impl RenderError {
    /// The graph node the error is about, when there is one (the app
    /// selects it from the Problems panel).
    pub fn node(&self) -> Option<&str> {
        match self {
            RenderError::NoSuchView { .. } => None,
            RenderError::Sim(e) => e.node(),
            _ => None,
        }
    }

    /// The CLI's exit code: 2 for bad usage or an invalid graph (as
    /// `RuntimeError::exit_code`), 1 for a failure while rendering.
    pub fn exit_code(&self) -> i32 {
        match self {
            RenderError::NoSuchView { .. }
            | RenderError::Frames(_)
            | RenderError::Size(_)
            | RenderError::Output(_)
            | RenderError::Fps(_)
            | RenderError::NoFfmpeg => 2,
            RenderError::Sim(e) => e.exit_code(),
            RenderError::Encoder(_) | RenderError::Cancelled { .. } => 1,
        }
    }
}

/// How far a render is, after each frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// The frame just simulated (and, from `first` on, drawn).
    pub frame: i32,
    /// Frames of the range written so far.
    pub rendered: u32,
    /// Frames in the range.
    pub total: u32,
}

/// What a finished render wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rendered {
    pub frames: u32,
    /// The movie, or every PNG written, in frame order.
    pub files: Vec<PathBuf>,
    /// The backend that ran it (never `auto`).
    pub backend: &'static str,
    /// The snapshot resumed from (`resume`): its folder and frame.
    pub resumed: Option<(PathBuf, i32)>,
    /// Damaged snapshots passed over on the way to it (newest first).
    pub skipped: Vec<String>,
}

/// Checks everything about `spec` that needs no graph: the range, the
/// size, the output path (its kind, links, folders) and, for an MP4, that
/// ffmpeg is on PATH. Returns the output and the ffmpeg to run.
pub fn check_spec(spec: &RenderSpec) -> Result<(Output, Option<PathBuf>), RenderError> {
    if spec.first < 0 || spec.last < spec.first {
        return Err(RenderError::Frames(format!(
            "--frames {}:{}: the first frame must be 0 or more and not after the last",
            spec.first, spec.last
        )));
    }
    let (w, h) = (spec.width, spec.height);
    if w == 0 || h == 0 || w > MAX_SIDE || h > MAX_SIDE {
        return Err(RenderError::Size(format!(
            "--size {}x{}: width and height must be 1 to {} pixels",
            w, h, MAX_SIDE
        )));
    }
    let out = Output::of(&spec.out)?;
    if let Output::Movie(_) = out {
        // yuv420p stores colour per 2x2 block: libx264 refuses odd sides.
        // Refused rather than padded, so the movie is the size asked for.
        if w % 2 == 1 || h % 2 == 1 {
            return Err(RenderError::Size(format!(
                "--size {}x{}: an H.264 MP4 (yuv420p) needs an even width and height; use {}x{} \
                 (or render a PNG sequence, which takes any size)",
                w,
                h,
                w + w % 2,
                h + h % 2
            )));
        }
        if !(1..=240).contains(&spec.fps) {
            return Err(RenderError::Fps(format!(
                "--fps {}: frames per second must be 1 to 240",
                spec.fps
            )));
        }
    }
    // Refused before anything is simulated: no file of this render is
    // written through a link, and a folder in the way is named.
    let files: Vec<PathBuf> = match &out {
        Output::Movie(p) => vec![p.clone()],
        Output::Sequence(_) => (spec.first..=spec.last).map(|f| out.file_of(f)).collect(),
    };
    for p in &files {
        if let Ok(m) = std::fs::symlink_metadata(p) {
            if m.file_type().is_symlink() {
                return Err(RenderError::Output(format!(
                    "{} is a symbolic link: a render does not write through links; remove it or choose another --out",
                    p.display()
                )));
            }
            if m.is_dir() {
                return Err(RenderError::Output(format!(
                    "{} is a folder: choose a file path for --out",
                    p.display()
                )));
            }
        }
    }
    let ffmpeg = match out {
        Output::Movie(_) => Some(find_on_path("ffmpeg").ok_or(RenderError::NoFfmpeg)?),
        Output::Sequence(_) => None,
    };
    Ok((out, ffmpeg))
}

/// An executable named `name` in a folder of PATH.
fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    let exe = format!("{}{}", name, std::env::consts::EXE_SUFFIX);
    std::env::split_paths(&path)
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| d.join(&exe))
        .find(|p| is_executable(p))
}

#[cfg(unix)]
fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(p: &Path) -> bool {
    p.is_file()
}

/// The view ids of a program, in graph order.
pub fn view_ids(p: &Program) -> Vec<String> {
    p.views.iter().map(|v| v.node_id().to_string()).collect()
}

/// The size a view draws at in `p`, built or compiled: its `width` and
/// `height`, or an image view's one pixel per cell (every `stride`-th
/// cell of a field too large for one picture, as `passes::views` draws).
pub fn view_size(p: &Program, view: &str) -> Option<(u32, u32)> {
    let v = p.views.iter().find(|v| v.node_id() == view)?;
    Some(match v {
        View::Image { field, .. } => {
            let s = &p.fields[*field].shape;
            let (w, h) = (*s.first()?, *s.get(1)?);
            let stride = weft_ir::passes::views::image_stride(w, h);
            (w.div_ceil(stride), h.div_ceil(stride))
        }
        View::Particles { width, height, .. }
        | View::Plot { width, height, .. }
        | View::Histogram { width, height, .. }
        | View::Surface { width, height, .. }
        | View::Volume { width, height, .. } => (*width, *height),
    })
}

/// The views that must share `view`'s size: it, the views it is drawn
/// over (`under`) and the volumes drawn over it, transitively (the app's
/// viewport sizes them together too).
pub fn size_group(p: &Program, view: &str) -> Vec<String> {
    let mut group = vec![view.to_string()];
    let mut i = 0;
    while i < group.len() {
        for v in &p.views {
            if let View::Volume {
                node_id,
                under: Some(u),
                ..
            } = v
            {
                for (a, b) in [(node_id, u), (u, node_id)] {
                    if *a == group[i] && !group.contains(b) {
                        group.push(b.clone());
                    }
                }
            }
        }
        i += 1;
    }
    group
}

/// The program to render from: `source` built, and rebuilt with the
/// view's `width` / `height` at the render size when it has them.
/// Returns it with whether the picture must be scaled (an `image` view).
fn program_at_size(
    source: &GraphSource,
    spec: &RenderSpec,
) -> Result<(Program, bool), RenderError> {
    let program = source.build().map_err(RuntimeError::from)?;
    let Some(view) = program.views.iter().find(|v| v.node_id() == spec.view) else {
        return Err(RenderError::NoSuchView {
            view: spec.view.clone(),
            available: view_ids(&program),
        });
    };
    if let View::Image { .. } = view {
        let scale = view_size(&program, &spec.view) != Some((spec.width, spec.height));
        return Ok((program, scale));
    }
    if view_size(&program, &spec.view) == Some((spec.width, spec.height)) {
        return Ok((program, false));
    }
    let mut sized = source.clone();
    let sets = size_group(&program, &spec.view)
        .into_iter()
        .flat_map(|v| {
            [
                format!("{}.width={}", v, spec.width),
                format!("{}.height={}", v, spec.height),
            ]
        })
        .collect();
    sized
        .apply(&Overrides {
            sets,
            inits: vec![],
        })
        .map_err(RuntimeError::from)?;
    Ok((sized.build().map_err(RuntimeError::from)?, false))
}

/// `img` scaled to `w`x`h` by nearest neighbour (pixel centres).
pub fn scale_nearest(img: &Image, w: u32, h: u32) -> Image {
    if (img.width, img.height) == (w, h) {
        return img.clone();
    }
    let mut rgba = Vec::with_capacity((w * h * 4) as usize);
    let (sw, sh) = (img.width as u64, img.height as u64);
    for y in 0..h as u64 {
        let sy = ((2 * y + 1) * sh / (2 * h as u64)).min(sh - 1);
        for x in 0..w as u64 {
            let sx = ((2 * x + 1) * sw / (2 * w as u64)).min(sw - 1);
            let i = ((sy * sw + sx) * 4) as usize;
            rgba.extend_from_slice(&img.rgba[i..i + 4]);
        }
    }
    Image {
        width: w,
        height: h,
        rgba,
    }
}

/// Restores the newest complete snapshot in `dir` into `sim` after
/// checking that it was taken from `doc` (`graph::diff::run_differences`;
/// a snapshot of another graph is refused, naming what differs). Returns
/// the snapshot's folder, its frame and the damaged snapshots skipped.
/// `weft run --resume` and renders share it.
pub fn resume(
    sim: &mut Simulation,
    doc: &weft_ir::graph::GraphDoc,
    dir: &Path,
) -> Result<(PathBuf, i32, Vec<String>), RuntimeError> {
    use weft_runtime::snapshot;
    let (loaded, skipped) = snapshot::latest(dir)?;
    let before: weft_ir::graph::GraphDoc =
        serde_json::from_value(loaded.graph.clone()).map_err(|e| {
            RuntimeError::Io(format!(
                "{}: its graph does not read: {}",
                loaded.path.display(),
                e
            ))
        })?;
    let diffs = weft_ir::graph::diff::run_differences(&before, doc);
    if !diffs.is_empty() {
        return Err(RuntimeError::Io(format!(
            "cannot resume from {}: it was taken from a different graph: {}",
            loaded.path.display(),
            diffs.join("; ")
        )));
    }
    sim.restore(&loaded.snapshot)?;
    Ok((loaded.path, loaded.snapshot.frame, skipped))
}

/// Renders `spec` from `source` on `opts`' backend: simulates up to
/// `spec.last` (from a snapshot with `spec.resume`), draws the view for
/// every frame from `spec.first` on and writes it. `progress` hears of
/// every frame simulated; `cancel`, set from another thread, stops after
/// the frame under way (an MP4 is then not written at all).
pub fn render(
    source: &GraphSource,
    opts: &SimOptions,
    spec: &RenderSpec,
    cancel: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
) -> Result<Rendered, RenderError> {
    let (out, ffmpeg) = check_spec(spec)?;
    let (program, scale) = program_at_size(source, spec)?;
    let mut sim = Simulation::new(program, opts)?;
    let mut resumed = None;
    let mut skipped = Vec::new();
    if let Some(dir) = &spec.resume {
        // Against the document as given: the render size is not part of
        // the simulated state, so a snapshot of the graph resumes here.
        let (path, frame, passed) = resume(&mut sim, &source.doc, dir)?;
        skipped = passed;
        if frame > spec.first {
            return Err(RenderError::Frames(format!(
                "--frames {}:{}: the snapshot resumed ({}) is at frame {}, after the first frame \
                 to render; render from frame {} or resume from an earlier checkpoint",
                spec.first,
                spec.last,
                path.display(),
                frame,
                frame
            )));
        }
        resumed = Some((path, frame));
    }
    sim.start()?;
    let total = (spec.last - spec.first + 1) as u32;
    let mut movie = match (&out, ffmpeg) {
        (Output::Movie(p), Some(ffmpeg)) => Some(Movie::start(&ffmpeg, p, spec)?),
        _ => None,
    };
    let mut files = Vec::new();
    let mut rendered = 0u32;
    loop {
        if cancel.load(Ordering::Relaxed) {
            // `movie` dropped: ffmpeg stopped, its temporary file removed.
            return Err(RenderError::Cancelled { frames: rendered });
        }
        if sim.frame >= spec.first {
            let img = sim
                .render_view(&spec.view)?
                .ok_or_else(|| RenderError::NoSuchView {
                    view: spec.view.clone(),
                    available: view_ids(&sim.program),
                })?;
            let img = if scale {
                scale_nearest(&img, spec.width, spec.height)
            } else {
                img
            };
            match &mut movie {
                // A Ctrl+C reaches ffmpeg too, which then stops reading:
                // that is the cancel, not an encoder failure.
                Some(m) => m.write(&img).map_err(|e| {
                    if cancel.load(Ordering::Relaxed) {
                        RenderError::Cancelled { frames: rendered }
                    } else {
                        e
                    }
                })?,
                None => {
                    let path = out.file_of(sim.frame);
                    create_parent(&path)?;
                    img.write_png(&path).map_err(RenderError::Output)?;
                    files.push(path);
                }
            }
            rendered += 1;
        }
        progress(Progress {
            frame: sim.frame,
            rendered,
            total,
        });
        if sim.frame >= spec.last {
            break;
        }
        sim.step_frame()?;
    }
    if let Some(m) = movie {
        files.push(m.finish()?);
    }
    Ok(Rendered {
        frames: rendered,
        files,
        backend: sim.backend_name(),
        resumed,
        skipped,
    })
}

fn create_parent(path: &Path) -> Result<(), RenderError> {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => std::fs::create_dir_all(d)
            .map_err(|e| RenderError::Output(format!("cannot create {}: {}", d.display(), e))),
        _ => Ok(()),
    }
}

/// An ffmpeg encoding raw RGBA frames from its stdin into a temporary file
/// beside the destination. Dropped unfinished, ffmpeg is killed and the
/// temporary file removed; the destination is never touched.
struct Movie {
    child: Child,
    stdin: Option<ChildStdin>,
    /// ffmpeg's stderr, read on a thread of its own so a chatty ffmpeg never
    /// blocks on a full pipe while we block on its stdin.
    stderr: Option<std::thread::JoinHandle<String>>,
    file: Option<AtomicFile>,
    dest: PathBuf,
}

impl Movie {
    fn start(ffmpeg: &Path, dest: &Path, spec: &RenderSpec) -> Result<Movie, RenderError> {
        create_parent(dest)?;
        let file = AtomicFile::create(dest)
            .map_err(|e| RenderError::Output(format!("cannot write {}: {}", dest.display(), e)))?;
        let mut child = Command::new(ffmpeg)
            .args(["-hide_banner", "-loglevel", "error", "-nostats", "-y"])
            .args(["-f", "rawvideo", "-pix_fmt", "rgba"])
            .arg("-s")
            .arg(format!("{}x{}", spec.width, spec.height))
            .arg("-r")
            .arg(spec.fps.to_string())
            .args(["-i", "-", "-c:v", "libx264", "-pix_fmt", "yuv420p"])
            // Near-transparent quality (libx264's default is 23): a render
            // is a deliverable, and simulation pictures have fine detail.
            .args(["-crf", "18", "-f", "mp4"])
            // The temporary file we created: ffmpeg's mp4 muxer seeks
            // back to write its index, so it writes a file, not a pipe.
            .arg(file.temp_path())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                RenderError::Encoder(format!("cannot start {}: {}", ffmpeg.display(), e))
            })?;
        let stdin = child.stdin.take();
        let stderr = child.stderr.take().map(|mut s| {
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = s.read_to_string(&mut text);
                text
            })
        });
        Ok(Movie {
            child,
            stdin,
            stderr,
            file: Some(file),
            dest: dest.to_path_buf(),
        })
    }

    fn write(&mut self, img: &Image) -> Result<(), RenderError> {
        let stdin = self.stdin.as_mut().expect("open until finish");
        if let Err(e) = stdin.write_all(&img.rgba) {
            // ffmpeg stopped reading: it failed, and says why on stderr.
            let _ = self.child.kill();
            let _ = self.child.wait();
            return Err(self.failure(&format!("ffmpeg stopped reading frames ({})", e)));
        }
        Ok(())
    }

    /// ffmpeg's own words, after what we saw.
    fn failure(&mut self, what: &str) -> RenderError {
        let said = self
            .stderr
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        let said = said.trim();
        let hint = if said.contains("libx264") {
            " (this ffmpeg has no libx264 encoder: install a build with it, e.g. your distribution's ffmpeg package)"
        } else {
            ""
        };
        RenderError::Encoder(format!(
            "cannot encode {}: {}{}{}",
            self.dest.display(),
            what,
            if said.is_empty() {
                String::new()
            } else {
                format!(": {}", said)
            },
            hint
        ))
    }

    /// Closes ffmpeg's input, waits for it, and renames the movie into place.
    fn finish(mut self) -> Result<PathBuf, RenderError> {
        drop(self.stdin.take());
        let status = self
            .child
            .wait()
            .map_err(|e| RenderError::Encoder(format!("ffmpeg did not finish: {}", e)))?;
        if !status.success() {
            return Err(self.failure(&format!("ffmpeg exited with {}", status)));
        }
        let file = self.file.take().expect("committed once");
        file.commit().map_err(|e| {
            RenderError::Output(format!("cannot write {}: {}", self.dest.display(), e))
        })?;
        Ok(self.dest.clone())
    }
}

impl Drop for Movie {
    fn drop(&mut self) {
        if self.file.is_some() {
            // Unfinished (a fault, a cancel): stop ffmpeg before its
            // temporary file is removed by the AtomicFile's own drop.
            drop(self.stdin.take());
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_by_name() {
        assert_eq!(
            Output::of(Path::new("a/b.mp4")).unwrap(),
            Output::Movie("a/b.mp4".into())
        );
        let s = Output::of(Path::new("f/smoke_####.png")).unwrap();
        assert_eq!(s.file_of(7), PathBuf::from("f/smoke_0007.png"));
        for bad in ["a.gif", "a.png", "a_##.mp4", "x"] {
            let e = Output::of(Path::new(bad)).unwrap_err();
            assert!(e.to_string().contains("run of #"), "{}", e);
        }
    }

    #[test]
    fn nearest_scaling_keeps_cells_whole() {
        let img = Image {
            width: 2,
            height: 1,
            rgba: vec![1, 1, 1, 255, 2, 2, 2, 255],
        };
        let s = scale_nearest(&img, 4, 2);
        let firsts: Vec<u8> = s.rgba.chunks(4).map(|p| p[0]).collect();
        assert_eq!(firsts, vec![1, 1, 2, 2, 1, 1, 2, 2]);
    }

    #[test]
    fn odd_sizes_are_refused_for_a_movie_only() {
        let mut spec = RenderSpec {
            view: "v".into(),
            first: 0,
            last: 1,
            width: 65,
            height: 64,
            out: std::env::temp_dir().join("weft-render-odd.mp4"),
            fps: 24,
            resume: None,
        };
        let e = check_spec(&spec).unwrap_err();
        assert!(
            e.to_string().contains("even width and height; use 66x64"),
            "{}",
            e
        );
        spec.out = std::env::temp_dir().join("weft-render-odd_####.png");
        assert!(check_spec(&spec).is_ok());
    }
}
