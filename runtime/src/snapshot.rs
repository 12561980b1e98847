//! Complete state snapshots of a running simulation, and their folders on
//! disk (`weft run --checkpoint DIR --every K`, `--resume DIR`).
//!
//! What a simulation's state is: the buffer of every root layout node that
//! is not a view's (fields, sparse pools and their metadata, dynamic list
//! lengths, optimizer histories), the frame counter, whether `on_start`
//! ran, and each kernel's launch count (the random streams follow them:
//! `random()` is a function of the seed, the kernel, its launch count and
//! the invocation). Restoring all of it into a simulation of the same
//! program makes its next frames exactly those of the run the snapshot
//! came from.
//!
//! On disk a snapshot is one folder `DIR/frame_NNNNNN/` holding
//! `snapshot.json` (format, frame, launch counts, the roots and their word
//! counts and checksums, and the graph document it was taken from) and one
//! `ROOT.bin` per root (its words, little-endian). Each root's entry records
//! the xxh3-64 of its file's bytes (`"xxh3": "16 hex digits"`); `read`
//! refuses a file whose bytes do not hash to it, naming the file, so a
//! flipped bit on disk (same size, so the word count still matches) is
//! never restored as state. Snapshots written before checksums have no
//! `xxh3` entries: they are still read, unverified. The folder is written under a
//! temporary name and renamed into place once every file in it is synced,
//! so a folder named `frame_NNNNNN` is complete: a run killed while writing
//! leaves only a temporary folder, which `latest` ignores (and the next
//! checkpoint of a run removes).

use crate::{RuntimeError, Simulation};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use weft_ir::ir::layout;

pub const FORMAT: &str = "weft-snapshot";
pub const VERSION: u64 = 1;

/// A simulation's complete state (see the module comment).
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    pub frame: i32,
    pub started: bool,
    /// Launch count per kernel, in `program.kernels` order, with its name.
    pub launches: Vec<(String, u32)>,
    /// Every non-view root layout node: its node id and words.
    pub roots: Vec<(String, Vec<u32>)>,
    /// Only some roots are held (a bake of chosen fields, `weft bake
    /// --fields`): such a frame can be shown, never resumed from.
    pub partial: bool,
}

impl Simulation {
    /// The complete state after the frames run so far (waits for them).
    pub fn snapshot(&mut self) -> Result<Snapshot, RuntimeError> {
        self.snapshot_of(None)
    }

    /// The state of the roots named in `only` (every non-view root when
    /// `None`): a partial snapshot when some are left out.
    pub fn snapshot_of(&mut self, only: Option<&[String]>) -> Result<Snapshot, RuntimeError> {
        self.sync()?;
        let mut roots = Vec::new();
        let mut partial = false;
        for r in self.program.roots().collect::<Vec<_>>() {
            if is_view_root(self, r) {
                continue;
            }
            let name = self.program.layouts[r].node_id.clone();
            if only.is_some_and(|o| !o.contains(&name)) {
                partial = true;
                continue;
            }
            roots.push((name, self.read_root(r)?));
        }
        let launches = self
            .program
            .kernels
            .iter()
            .zip(self.launch_counts())
            .map(|((_, k), n)| (k.name.clone(), *n))
            .collect();
        Ok(Snapshot {
            frame: self.frame,
            started: self.is_started(),
            launches,
            roots,
            partial,
        })
    }

    /// Makes `s` this simulation's state. The program must be the one the
    /// snapshot was taken from: every root of it with the same size, every
    /// kernel with the same name at the same index; otherwise an error
    /// names the first layout node or kernel that differs, and nothing
    /// changes.
    pub fn restore(&mut self, s: &Snapshot) -> Result<(), RuntimeError> {
        self.restore_roots(s, false)
    }

    /// Shows a partial snapshot (a bake of chosen fields): writes the roots
    /// it holds and sets the frame counter, so views and readers see that
    /// frame's fields. The other roots keep what they held, so the state
    /// is for display only: a caller must restore a complete snapshot (or
    /// reset) before stepping on. A complete snapshot is restored whole.
    pub fn show_partial(&mut self, s: &Snapshot) -> Result<(), RuntimeError> {
        self.restore_roots(s, s.partial)
    }

    fn restore_roots(&mut self, s: &Snapshot, partial_ok: bool) -> Result<(), RuntimeError> {
        let mut writes = Vec::new();
        for r in self.program.roots().collect::<Vec<_>>() {
            if is_view_root(self, r) {
                continue;
            }
            let name = &self.program.layouts[r].node_id;
            let Some((_, words)) = s.roots.iter().find(|(n, _)| n == name) else {
                if partial_ok {
                    continue;
                }
                let message = if s.partial {
                    format!(
                        "the snapshot of frame {} holds only {} (a bake of chosen fields): \
                         it can be shown, not resumed from; resume from a complete snapshot",
                        s.frame,
                        s.roots
                            .iter()
                            .map(|(n, _)| n.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                } else {
                    "the snapshot has no state for this layout node".into()
                };
                return Err(RuntimeError::Run {
                    node: name.clone(),
                    message,
                });
            };
            let want = layout::root_words(&self.program, r);
            if words.len() as u64 != want {
                return Err(RuntimeError::Run {
                    node: name.clone(),
                    message: format!(
                        "the snapshot holds {} words for this layout node; the graph needs {}",
                        words.len(),
                        want
                    ),
                });
            }
            writes.push((r, words));
        }
        if let Some((n, _)) = s.roots.iter().find(|(n, _)| {
            !self
                .program
                .roots()
                .any(|r| &self.program.layouts[r].node_id == n)
        }) {
            return Err(RuntimeError::Run {
                node: n.clone(),
                message:
                    "the snapshot holds state for this layout node, which the graph does not have"
                        .into(),
            });
        }
        let names: Vec<&str> = self
            .program
            .kernels
            .iter()
            .map(|(_, k)| k.name.as_str())
            .collect();
        let theirs: Vec<&str> = s.launches.iter().map(|(n, _)| n.as_str()).collect();
        if names != theirs {
            let at = names
                .iter()
                .zip(&theirs)
                .position(|(a, b)| a != b)
                .unwrap_or(names.len().min(theirs.len()));
            let node = names.get(at).or(theirs.get(at)).copied().unwrap_or("");
            return Err(RuntimeError::Run {
                node: node.to_string(),
                message: format!(
                    "the snapshot's kernels differ from the graph's here ({} kernels in the snapshot, {} in the graph)",
                    theirs.len(),
                    names.len()
                ),
            });
        }
        for (r, words) in writes {
            self.write_root(r, words)?;
        }
        let counts: Vec<u32> = s.launches.iter().map(|(_, n)| *n).collect();
        self.set_run_state(s.frame, s.started, &counts);
        self.sync()
    }
}

fn is_view_root(sim: &Simulation, r: weft_ir::ir::LayoutId) -> bool {
    sim.program
        .fields
        .iter()
        .any(|(h, f)| sim.program.is_view_field(h) && layout::root_of(&sim.program, f.layout) == r)
}

fn io(what: &str, p: &Path, e: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::Io(format!("cannot {} {}: {}", what, p.display(), e))
}

/// The checksum a root file's entry records: xxh3-64 of its bytes, as 16
/// lowercase hex digits.
fn checksum(bytes: &[u8]) -> String {
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(bytes))
}

/// The folder of frame `frame`'s snapshot in `dir`.
pub fn folder(dir: &Path, frame: i32) -> PathBuf {
    dir.join(format!("frame_{:06}", frame))
}

/// Writes `s` as `DIR/frame_NNNNNN/` (atomically: see the module comment),
/// with `graph` (the graph document the run was built from) inside, then
/// removes older snapshots beyond the newest `keep`, and temporary folders
/// a killed run left.
pub fn write(
    dir: &Path,
    s: &Snapshot,
    graph: &Value,
    keep: usize,
) -> Result<PathBuf, RuntimeError> {
    std::fs::create_dir_all(dir).map_err(|e| io("create", dir, e))?;
    let final_dir = folder(dir, s.frame);
    let tmp = dir.join(format!(".frame_{:06}.tmp{}", s.frame, std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir(&tmp).map_err(|e| io("create", &tmp, e))?;
    let mut roots = Vec::new();
    for (name, words) in &s.roots {
        let file = format!("{}.bin", name);
        let p = tmp.join(&file);
        let mut bytes = Vec::with_capacity(words.len() * 4);
        for w in words {
            bytes.extend_from_slice(&w.to_le_bytes());
        }
        weft_ir::io::write_atomic(&p, &bytes).map_err(|e| io("write", &p, e))?;
        roots.push(
            json!({"node": name, "words": words.len(), "file": file, "xxh3": checksum(&bytes)}),
        );
    }
    let meta = json!({
        "format": FORMAT,
        "version": VERSION,
        "frame": s.frame,
        "started": s.started,
        "launches": s.launches.iter().map(|(k, n)| json!([k, n])).collect::<Vec<_>>(),
        "roots": roots,
        "partial": s.partial,
        "graph": graph,
    });
    let p = tmp.join("snapshot.json");
    let text = serde_json::to_string_pretty(&meta).expect("JSON values serialise");
    weft_ir::io::write_atomic(&p, text.as_bytes()).map_err(|e| io("write", &p, e))?;
    // A snapshot of the same frame (a resumed run passing it again) is
    // replaced whole.
    if final_dir.exists() {
        std::fs::remove_dir_all(&final_dir).map_err(|e| io("replace", &final_dir, e))?;
    }
    std::fs::rename(&tmp, &final_dir).map_err(|e| io("rename", &tmp, e))?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    prune(dir, keep);
    Ok(final_dir)
}

/// Removes snapshots older than the newest `keep`, and temporary folders.
fn prune(dir: &Path, keep: usize) {
    let mut frames = list(dir);
    frames.sort_unstable();
    let old = frames.len().saturating_sub(keep.max(1));
    for f in &frames[..old] {
        let _ = std::fs::remove_dir_all(folder(dir, *f));
    }
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().to_string();
            // Another process's temporary folder may be in the making;
            // only this process's and those of processes gone are removed.
            if n.starts_with(".frame_") && n.contains(".tmp") {
                let pid = n.rsplit(".tmp").next().and_then(|p| p.parse::<u32>().ok());
                let alive = pid.is_some_and(|p| {
                    p != std::process::id() && Path::new(&format!("/proc/{}", p)).exists()
                });
                if !alive {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
    }
}

/// The frames of the complete snapshots in `dir`.
pub fn list(dir: &Path) -> Vec<i32> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().to_string();
            n.strip_prefix("frame_")?.parse::<i32>().ok()
        })
        .collect()
}

/// Whether the snapshot in folder `path` holds only some roots (a bake of
/// chosen fields); a folder that cannot be read counts as partial.
pub fn is_partial(path: &Path) -> bool {
    std::fs::read_to_string(path.join("snapshot.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .is_none_or(|v| v["partial"].as_bool().unwrap_or(false))
}

/// A snapshot read back, with the graph document it was taken from.
pub struct Loaded {
    pub path: PathBuf,
    pub snapshot: Snapshot,
    pub graph: Value,
}

/// Reads the snapshot in folder `path`.
pub fn read(path: &Path) -> Result<Loaded, RuntimeError> {
    let mp = path.join("snapshot.json");
    let text = std::fs::read_to_string(&mp).map_err(|e| io("read", &mp, e))?;
    let bad = |m: &str| RuntimeError::Io(format!("{}: {}", mp.display(), m));
    let v: Value = serde_json::from_str(&text).map_err(|e| bad(&e.to_string()))?;
    if v["format"] != FORMAT {
        return Err(bad("not a weft snapshot (format is not \"weft-snapshot\")"));
    }
    if v["version"].as_u64() != Some(VERSION) {
        return Err(bad(&format!(
            "snapshot version {} is not the version this build reads ({})",
            v["version"], VERSION
        )));
    }
    let frame = v["frame"]
        .as_i64()
        .and_then(|f| i32::try_from(f).ok())
        .ok_or_else(|| bad("no frame"))?;
    let started = v["started"].as_bool().ok_or_else(|| bad("no started"))?;
    let launches = v["launches"]
        .as_array()
        .ok_or_else(|| bad("no launches"))?
        .iter()
        .map(|e| {
            Some((
                e.get(0)?.as_str()?.to_string(),
                u32::try_from(e.get(1)?.as_u64()?).ok()?,
            ))
        })
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| bad("bad launches"))?;
    let mut roots = Vec::new();
    for r in v["roots"].as_array().ok_or_else(|| bad("no roots"))? {
        let (Some(node), Some(words), Some(file)) =
            (r["node"].as_str(), r["words"].as_u64(), r["file"].as_str())
        else {
            return Err(bad("bad root entry"));
        };
        if file.contains('/') || file.contains('\\') || file.starts_with('.') {
            return Err(bad(&format!("bad root file name '{}'", file)));
        }
        let fp = path.join(file);
        let bytes = std::fs::read(&fp).map_err(|e| io("read", &fp, e))?;
        if bytes.len() as u64 != words * 4 {
            return Err(RuntimeError::Io(format!(
                "{}: {} bytes, but the snapshot records {} words (a damaged snapshot)",
                fp.display(),
                bytes.len(),
                words
            )));
        }
        match &r["xxh3"] {
            // Written before snapshots had checksums: read unverified.
            Value::Null => {}
            Value::String(want) if *want == checksum(&bytes) => {}
            Value::String(want) => {
                return Err(RuntimeError::Io(format!(
                    "{}: its bytes hash to xxh3 {} but the snapshot records {} \
                     (the file was damaged or changed after it was written); \
                     this snapshot is refused",
                    fp.display(),
                    checksum(&bytes),
                    want
                )))
            }
            other => {
                return Err(bad(&format!(
                    "bad checksum {} for '{}' (16 hex digits expected)",
                    other, file
                )))
            }
        }
        let w = bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        roots.push((node.to_string(), w));
    }
    Ok(Loaded {
        path: path.to_path_buf(),
        snapshot: Snapshot {
            frame,
            started,
            launches,
            roots,
            partial: v["partial"].as_bool().unwrap_or(false),
        },
        graph: v["graph"].clone(),
    })
}

/// The newest snapshot in `dir` that reads back whole. A newer one that
/// does not (a damaged disk: complete folders are renamed into place only
/// once written) is reported in `skipped`, never silently passed over.
pub fn latest(dir: &Path) -> Result<(Loaded, Vec<String>), RuntimeError> {
    if !dir.is_dir() {
        return Err(RuntimeError::Io(format!(
            "--resume {}: no such folder",
            dir.display()
        )));
    }
    let mut frames = list(dir);
    frames.sort_unstable_by(|a, b| b.cmp(a));
    let mut skipped = Vec::new();
    for f in frames {
        match read(&folder(dir, f)) {
            Ok(l) => return Ok((l, skipped)),
            Err(e) => skipped.push(e.to_string()),
        }
    }
    Err(RuntimeError::Io(format!(
        "--resume {}: no complete snapshot in it{}",
        dir.display(),
        if skipped.is_empty() {
            String::new()
        } else {
            format!(" ({})", skipped.join("; "))
        }
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Snapshot {
        Snapshot {
            frame: 4,
            started: true,
            launches: vec![("k".into(), 4)],
            roots: vec![
                (
                    "grid".into(),
                    (0..64u32).map(|i| (i as f32).to_bits()).collect(),
                ),
                ("pool".into(), vec![7, 8, 9]),
            ],
            partial: false,
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("weft-snap-{}-{}", name, std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// One flipped bit in a root file (same size, so the word count still
    /// matches) is refused, naming the file; the intact snapshot reads.
    #[test]
    fn a_flipped_bit_is_refused_naming_the_file() {
        let d = scratch("flip");
        let s = sample();
        let f = write(&d, &s, &json!({}), 1).unwrap();
        assert_eq!(read(&f).unwrap().snapshot, s);
        let bin = f.join("grid.bin");
        let mut bytes = std::fs::read(&bin).unwrap();
        bytes[37] ^= 0x10;
        weft_ir::io::write_atomic(&bin, &bytes).unwrap();
        let e = read(&f)
            .err()
            .expect("a damaged file must be refused")
            .to_string();
        assert!(e.contains("grid.bin") && e.contains("damaged"), "{}", e);
        // `latest` passes over it, reporting it, and finds nothing else.
        let e = latest(&d).err().unwrap().to_string();
        assert!(e.contains("grid.bin"), "{}", e);
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A snapshot written before checksums (no `xxh3` entries) still reads.
    #[test]
    fn a_snapshot_without_checksums_still_reads() {
        let d = scratch("old");
        let s = sample();
        let f = write(&d, &s, &json!({}), 1).unwrap();
        let mp = f.join("snapshot.json");
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&mp).unwrap()).unwrap();
        for r in v["roots"].as_array_mut().unwrap() {
            assert!(r["xxh3"].is_string(), "written with a checksum");
            r.as_object_mut().unwrap().remove("xxh3");
        }
        weft_ir::io::write_atomic(&mp, v.to_string().as_bytes()).unwrap();
        assert_eq!(read(&f).unwrap().snapshot, s);
        let _ = std::fs::remove_dir_all(&d);
    }
}
