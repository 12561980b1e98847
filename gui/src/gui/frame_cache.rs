//! The frames the viewport has simulated, kept so that the timeline can
//! scrub back to them without simulating again.
//!
//! Each entry is a frame's complete state (`weft_runtime::snapshot`: every
//! non-view root's words, the frame counter, the launch counts the random
//! streams follow), so restoring one and playing on gives exactly the
//! frames an uninterrupted run gives. Entries live in memory within a
//! budget; past it, the frame farthest from the playhead goes first (the
//! oldest of two as far). With spilling on, an evicted frame is written to
//! a disk cache folder by the runtime's atomic snapshot writer (a folder
//! `frame_NNNNNN/` is complete or absent) and read back from there.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use weft_runtime::snapshot::{self, Snapshot};

/// Default memory budget of the frame cache (MiB).
pub const DEFAULT_BUDGET_MB: u32 = 512;

/// Where a frame of the cache is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cached {
    Memory,
    Disk,
}

pub struct FrameCache {
    mem: BTreeMap<i32, Snapshot>,
    /// Frames on disk: spilled ones (in `spill_dir`) and baked ones (in a
    /// bake's cache folder), each its snapshot folder.
    disk: BTreeMap<i32, PathBuf>,
    /// Baked frames that hold only some fields (a bake of chosen fields):
    /// shown, never simulated on from.
    partial: BTreeSet<i32>,
    /// Bytes of the frames in memory.
    bytes: usize,
    /// Memory budget (bytes).
    pub budget: usize,
    /// Write evicted frames to `spill_dir` instead of dropping them.
    pub spill: bool,
    spill_dir: PathBuf,
    /// The graph document the cached frames were simulated from (written
    /// into each spilled snapshot, as `weft run --checkpoint` does).
    graph: Value,
    /// Bumped by `clear`: a frame captured before it (still out on the
    /// simulation thread) is not taken (`insert_if`).
    pub epoch: u64,
    /// The last spill that failed (a full disk): shown on the timeline.
    pub error: Option<String>,
    /// Whether frames are captured as they are simulated: `None` =
    /// automatic (`captures`), else the timeline's "Cache frames" choice.
    pub capture: Option<bool>,
}

/// Bytes a snapshot takes in memory (its words; the rest is small).
pub fn size_of(s: &Snapshot) -> usize {
    s.roots.iter().map(|(_, w)| w.len() * 4).sum::<usize>() + 64 * (s.launches.len() + 1)
}

impl FrameCache {
    /// An empty cache of `budget_mb` MiB spilling (when `spill`) into
    /// `spill_dir`.
    pub fn new(budget_mb: u32, spill: bool, spill_dir: PathBuf) -> FrameCache {
        FrameCache {
            mem: BTreeMap::new(),
            disk: BTreeMap::new(),
            partial: BTreeSet::new(),
            bytes: 0,
            budget: budget_mb as usize * 1024 * 1024,
            spill,
            spill_dir,
            graph: Value::Null,
            epoch: 0,
            error: None,
            capture: None,
        }
    }

    /// The disk cache folder spilled frames go to.
    pub fn spill_dir(&self) -> &Path {
        &self.spill_dir
    }

    /// Forgets every frame (another build, other scalar values): the
    /// spilled ones are removed from disk too.
    pub fn clear(&mut self) {
        self.mem.clear();
        self.bytes = 0;
        // Spilled frames are this session's and go; baked ones stay in
        // their cache folder (only no longer used).
        self.partial.clear();
        for (_, p) in std::mem::take(&mut self.disk) {
            if p.starts_with(&self.spill_dir) {
                let _ = std::fs::remove_dir_all(p);
            }
        }
        self.error = None;
        self.epoch += 1;
    }

    /// The graph document later frames are simulated from.
    pub fn set_graph(&mut self, graph: Value) {
        self.graph = graph;
    }

    /// Whether the next simulated frame is captured. Automatic: on the
    /// CPU backends (a capture is a copy of host memory), off on GPUs,
    /// where it would read the whole state back every frame (the GPU rule:
    /// no per-frame host round-trips) — there, turn it on by hand, or bake.
    pub fn captures(&self, gpu: bool) -> bool {
        self.capture.unwrap_or(!gpu)
    }

    /// Keeps `s` (captured in epoch `epoch`) unless the cache was cleared
    /// since; then keeps the budget, the playhead at `playhead`.
    pub fn insert_if(&mut self, epoch: u64, s: Snapshot, playhead: i32) {
        if epoch == self.epoch {
            self.insert(s, playhead);
        }
    }

    /// Keeps `s`, then evicts frames until the memory budget holds (the
    /// frame at the playhead is kept even when it alone is over budget).
    pub fn insert(&mut self, s: Snapshot, playhead: i32) {
        let f = s.frame;
        if let Some(old) = self.mem.remove(&f) {
            self.bytes -= size_of(&old);
        }
        self.bytes += size_of(&s);
        self.mem.insert(f, s);
        self.evict(playhead);
    }

    /// Evicts frames, farthest from `playhead` first (the older of two as
    /// far), until the frames in memory fit the budget.
    pub fn evict(&mut self, playhead: i32) {
        while self.bytes > self.budget && self.mem.len() > 1 {
            let Some(&victim) = self
                .mem
                .keys()
                .filter(|&&k| k != playhead)
                .max_by_key(|&&k| ((k - playhead).unsigned_abs(), std::cmp::Reverse(k)))
            else {
                return;
            };
            let s = self.mem.remove(&victim).expect("a key of the map");
            self.bytes -= size_of(&s);
            if self.spill {
                match snapshot::write(&self.spill_dir, &s, &self.graph, usize::MAX) {
                    Ok(p) => {
                        self.disk.insert(victim, p);
                    }
                    Err(e) => self.error = Some(format!("disk cache: {}", e)),
                }
            }
        }
    }

    /// Where frame `f` is cached, if it is.
    pub fn where_is(&self, f: i32) -> Option<Cached> {
        if self.mem.contains_key(&f) {
            Some(Cached::Memory)
        } else if self.disk.contains_key(&f) {
            Some(Cached::Disk)
        } else {
            None
        }
    }

    /// Frame `f`'s state, from memory or read back from disk.
    pub fn get(&self, f: i32) -> Result<Option<Snapshot>, String> {
        if let Some(s) = self.mem.get(&f) {
            return Ok(Some(s.clone()));
        }
        if let Some(p) = self.disk.get(&f) {
            return snapshot::read(p)
                .map(|l| Some(l.snapshot))
                .map_err(|e| e.to_string());
        }
        Ok(None)
    }

    /// The latest cached complete state at or before `f`: a frame to
    /// simulate on from (a partial baked frame is not one).
    pub fn at_or_before(&self, f: i32) -> Option<i32> {
        let m = self.mem.range(..=f).next_back().map(|(k, _)| *k);
        let d = self
            .disk
            .range(..=f)
            .rev()
            .map(|(k, _)| *k)
            .find(|k| !self.partial.contains(k));
        m.max(d)
    }

    /// Whether cached frame `f` holds only some fields (shown, not
    /// simulated on from): a partial baked frame not simulated since.
    pub fn is_partial(&self, f: i32) -> bool {
        !self.mem.contains_key(&f) && self.partial.contains(&f)
    }

    /// Takes the frames of a baked cache folder (complete ones only: a
    /// frame folder is complete or absent); `partial` when the bake stored
    /// chosen fields only (its frames are then asked one by one: the last
    /// one is complete). Returns how many.
    pub fn add_baked(&mut self, dir: &Path, partial: bool) -> usize {
        let frames = snapshot::list(dir);
        for &f in &frames {
            let p = snapshot::folder(dir, f);
            if partial && snapshot::is_partial(&p) {
                self.partial.insert(f);
            }
            self.disk.insert(f, p);
        }
        frames.len()
    }

    /// Forgets the frames of the baked cache folder `dir` (a bake is about
    /// to replace it).
    pub fn drop_baked(&mut self, dir: &Path) {
        self.disk.retain(|f, p| {
            let keep = !p.starts_with(dir);
            if !keep {
                self.partial.remove(f);
            }
            keep
        });
    }

    /// Frames in memory and on disk.
    pub fn counts(&self) -> (usize, usize) {
        (self.mem.len(), self.disk.len())
    }

    /// Bytes of the frames in memory.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for FrameCache {
    fn drop(&mut self) {
        // The spill folder is this session's scratch space.
        if self.disk.values().any(|p| p.starts_with(&self.spill_dir)) {
            let _ = std::fs::remove_dir_all(&self.spill_dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(frame: i32, words: usize) -> Snapshot {
        Snapshot {
            frame,
            started: true,
            launches: vec![("k".into(), frame as u32)],
            roots: vec![("f".into(), vec![frame as u32; words])],
            partial: false,
        }
    }

    #[test]
    fn eviction_keeps_the_budget_and_the_frames_near_the_playhead() {
        let one = size_of(&snap(0, 1000));
        let mut c = FrameCache::new(0, false, PathBuf::new());
        c.budget = one * 3;
        for f in 0..8 {
            c.insert(snap(f, 1000), f);
            assert!(c.bytes() <= c.budget);
        }
        assert_eq!(c.counts(), (3, 0));
        assert_eq!(
            (5..8).map(|f| c.where_is(f)).collect::<Vec<_>>(),
            vec![Some(Cached::Memory); 3]
        );
        // Scrubbed back to 5: frame 4 coming in evicts 7 (farther), not 5.
        c.insert(snap(4, 1000), 5);
        assert_eq!(c.where_is(7), None);
        assert_eq!(c.where_is(5), Some(Cached::Memory));
    }

    #[test]
    fn spilled_frames_read_back_whole() {
        let dir = std::env::temp_dir().join(format!("weft-frame-cache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut c = FrameCache::new(0, true, dir.clone());
        c.budget = size_of(&snap(0, 100)) * 2;
        for f in 0..5 {
            c.insert(snap(f, 100), f);
        }
        assert_eq!(c.counts(), (2, 3));
        assert_eq!(c.where_is(1), Some(Cached::Disk));
        assert_eq!(c.get(1).unwrap(), Some(snap(1, 100)));
        assert_eq!(c.at_or_before(10), Some(4));
        c.clear();
        assert!(snapshot::list(&dir).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Scrubbing to a spilled frame, and a baked frame taken into the
    /// cache (`add_baked`), whose file was damaged on disk after it was
    /// written (one flipped bit, the size unchanged): refused, naming the
    /// file, never restored as that frame's state.
    #[test]
    fn a_damaged_spilled_or_baked_frame_is_refused_naming_the_file() {
        let dir = std::env::temp_dir().join(format!("weft-frame-cache-bad-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut c = FrameCache::new(0, true, dir.join("spill"));
        c.budget = size_of(&snap(0, 100)) * 2;
        for f in 0..5 {
            c.insert(snap(f, 100), f);
        }
        assert_eq!(c.where_is(1), Some(Cached::Disk));
        let flip = |p: &Path| {
            let mut b = std::fs::read(p).unwrap();
            b[17] ^= 0x40;
            weft_ir::io::write_atomic(p, &b).unwrap();
        };
        let bin = snapshot::folder(&dir.join("spill"), 1).join("f.bin");
        flip(&bin);
        let e = c.get(1).unwrap_err();
        assert!(e.contains("f.bin") && e.contains("damaged"), "{}", e);
        // A bake's frame, reused by a later session.
        let bake = dir.join("g.cache");
        snapshot::write(&bake, &snap(7, 100), &serde_json::json!({}), usize::MAX).unwrap();
        flip(&snapshot::folder(&bake, 7).join("f.bin"));
        let mut c = FrameCache::new(0, false, PathBuf::new());
        assert_eq!(c.add_baked(&bake, false), 1);
        let e = c.get(7).unwrap_err();
        assert!(e.contains("f.bin") && e.contains("damaged"), "{}", e);
        drop(c);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
