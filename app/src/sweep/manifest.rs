//! The sweep folder's files: `manifest.json` (what to run) and each
//! variant's `NNNN/result.json` (what happened), both written whole via a
//! temporary file and a rename, so a reader never sees half of one.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

pub const MANIFEST: &str = "manifest.json";
pub const RESULT: &str = "result.json";
pub const FORMAT: &str = "weft-sweep";

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    /// Always "weft-sweep".
    pub format: String,
    pub version: u32,
    /// The graph file as planned (absolute): variants run it, so paths in
    /// it (a field's `init` .npy) resolve as they do for `weft run`.
    pub graph: PathBuf,
    /// The graph as planned, copied into the sweep (relative to it).
    pub graph_copy: String,
    /// FNV-1a 64 of the graph file's bytes: a variant refuses to run a
    /// graph edited since planning.
    pub graph_hash: String,
    /// Frames each variant runs after on_start.
    pub frames: u32,
    /// Fields each variant dumps as NNNN/FIELD.npy.
    pub dumps: Vec<String>,
    /// Fields whose sum, max and mean go into result.json and metrics.csv.
    pub metrics: Vec<String>,
    /// The loss field of the graph's tape, if it has one (its sum is the loss).
    #[serde(default)]
    pub loss: Option<String>,
    /// What varies: NODE.PARAM (or `seed`) and its values, in --vary order.
    pub axes: Vec<Axis>,
    pub variants: Vec<Variant>,
    /// How the folder is laid out (for people reading the manifest).
    pub layout: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Axis {
    pub name: String,
    pub values: Vec<Value>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Variant {
    pub index: usize,
    /// The variant's folder, relative to the sweep: "0000", "0001", ...
    pub dir: String,
    /// `--set` values, exactly as `weft run --set` takes them.
    pub sets: Vec<String>,
    /// `--seed`, when the sweep varies the seed.
    #[serde(default)]
    pub seed: Option<u32>,
}

impl Variant {
    /// `NODE.PARAM=VALUE` labels, plus `seed=S`, in axis order.
    pub fn labels(&self) -> Vec<String> {
        let mut l = self.sets.clone();
        if let Some(s) = self.seed {
            l.push(format!("seed={}", s));
        }
        l
    }
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Started and not finished: still running, or killed.
    Running,
    Done,
    Failed,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Metric {
    pub field: String,
    pub sum: f64,
    pub max: f64,
    pub mean: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunResult {
    pub index: usize,
    pub status: Status,
    pub host: String,
    pub pid: u32,
    /// Seconds since the Unix epoch.
    pub started: f64,
    #[serde(default)]
    pub finished: Option<f64>,
    /// Wall-clock seconds of the run.
    #[serde(default)]
    pub seconds: Option<f64>,
    /// `weft run`'s exit code.
    #[serde(default)]
    pub exit_code: Option<i32>,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub metrics: Vec<Metric>,
    /// The sum of the tape's loss field.
    #[serde(default)]
    pub loss: Option<f64>,
}

pub fn fnv1a64(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("fnv1a64:{:016x}", h)
}

/// Writes `bytes` to `path` whole, through Weft's one atomic writer
/// (`weft_ir::io::write_atomic`: a temporary file beside it, then a rename).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), String> {
    weft_ir::io::write_atomic(path, bytes)
        .map_err(|e| format!("cannot write {}: {}", path.display(), e))
}

pub fn load(sweep: &Path) -> Result<Manifest, String> {
    let path = sweep.join(MANIFEST);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "cannot read {}: {} (make one with `weft sweep plan`)",
            path.display(),
            e
        )
    })?;
    let m: Manifest = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a sweep manifest: {}", path.display(), e))?;
    if m.format != FORMAT {
        return Err(format!(
            "{}: format is '{}', not '{}'",
            path.display(),
            m.format,
            FORMAT
        ));
    }
    if m.version != 1 {
        return Err(format!(
            "{}: version {} (this build reads version 1)",
            path.display(),
            m.version
        ));
    }
    for (i, v) in m.variants.iter().enumerate() {
        // The folder name comes from the file: it must stay inside the sweep.
        if v.index != i || v.dir != dir_name(i) {
            return Err(format!(
                "{}: variant {} has index {} and folder '{}' (expected {} and '{}')",
                path.display(),
                i,
                v.index,
                v.dir,
                i,
                dir_name(i)
            ));
        }
    }
    Ok(m)
}

pub fn dir_name(index: usize) -> String {
    format!("{:04}", index)
}

/// The variant's result.json: None when it has none (never started), an
/// error when it is unreadable.
pub fn read_result(sweep: &Path, v: &Variant) -> Result<Option<RunResult>, String> {
    let path = sweep.join(&v.dir).join(RESULT);
    match std::fs::read_to_string(&path) {
        Ok(t) => serde_json::from_str(&t)
            .map(Some)
            .map_err(|e| format!("{}: {}", path.display(), e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {}", path.display(), e)),
    }
}

pub fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "unknown".into())
}
