//! File formats and file writing shared by the graph side (the builder reads
//! `.npy` initial values) and the runtime (dumps, PNGs, expectation files):
//! neither side owns them, so both import them from here.
//!
//! Every file Weft writes goes through [`AtomicFile`] (or
//! [`write_atomic`], its one-call form): dumps, frames, exports,
//! snapshots, bakes, sweep folders, editor settings, autosave and recovery
//! files, backups, graph saves, expectations. `tests/architecture.rs`
//! fails if a `File::create`, `fs::write` or `OpenOptions` appears anywhere
//! else outside tests.

pub mod mesh;
pub mod npy;
pub mod provided;

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Temporary names taken by this process so far: two threads writing the
/// same path at once (a bake and the editor's spill) never share one.
static TEMPS: AtomicU64 = AtomicU64::new(0);

/// A file being written: bytes go to a new temporary file in the same
/// folder as `path`; [`AtomicFile::commit`] syncs it and renames it over
/// `path`, so a crash or a full disk never leaves a half-written file where
/// a complete one was, and a reader sees the old file or the new one.
///
/// A symbolic link at `path` (the final component) is replaced by the new
/// file, never written through: the file it points to, inside or outside
/// the output folder, is left as it was. (`rename` replaces the directory
/// entry; it does not follow a link.) The temporary file is created with
/// `O_EXCL` (`create_new`), which refuses an existing name, a link
/// included, so nothing planted beside the output is written through
/// either. Replacing was chosen over refusing so that rerunning into an
/// output folder always succeeds, and it is what PNG frames always did.
///
/// Dropped without `commit`, the temporary file is removed and `path` is
/// untouched.
pub struct AtomicFile {
    path: PathBuf,
    tmp: PathBuf,
    file: Option<File>,
}

impl AtomicFile {
    /// Starts writing `path` (nothing at `path` changes until `commit`).
    pub fn create(path: &Path) -> std::io::Result<AtomicFile> {
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| "file".into());
        let pid = std::process::id();
        loop {
            let n = TEMPS.fetch_add(1, Ordering::Relaxed);
            let tmp = dir.join(format!(".{}.tmp{}-{}", name, pid, n));
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)
            {
                Ok(file) => {
                    return Ok(AtomicFile {
                        path: path.to_path_buf(),
                        tmp,
                        file: Some(file),
                    })
                }
                // A name left by a dead process with this pid (or planted):
                // take the next one rather than touch it.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < (1 << 20) => {
                    continue
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The temporary file, for a writer that needs a `File` (a child
    /// process's output).
    pub fn file(&self) -> &File {
        self.file
            .as_ref()
            .expect("an AtomicFile holds its file until commit")
    }

    /// The temporary file's path, for a child process that must open the
    /// file by name (ffmpeg's MP4 muxer seeks back to write its index, so
    /// it cannot write to a pipe or an inherited descriptor). The file is
    /// this `AtomicFile`'s own: it is renamed by `commit`, removed on drop.
    pub fn temp_path(&self) -> &Path {
        &self.tmp
    }

    /// Syncs the bytes written and renames the temporary file over the
    /// final path (then syncs the folder, so the rename survives a crash).
    pub fn commit(mut self) -> std::io::Result<()> {
        let file = self.file.take().expect("commit runs once");
        let done = file.sync_all().and_then(|_| {
            drop(file);
            std::fs::rename(&self.tmp, &self.path)
        });
        if done.is_err() {
            let _ = std::fs::remove_file(&self.tmp);
            return done;
        }
        // Committed: nothing for Drop to remove.
        self.tmp = PathBuf::new();
        if let Some(d) = self
            .path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .and_then(|d| File::open(d).ok())
        {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file
            .as_mut()
            .expect("an AtomicFile holds its file until commit")
            .write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file
            .as_mut()
            .expect("an AtomicFile holds its file until commit")
            .flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if !self.tmp.as_os_str().is_empty() {
            self.file = None;
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Writes `bytes` as the whole of `path` through [`AtomicFile`] (graphs,
/// images, expectations, preferences, snapshot files: everything).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = AtomicFile::create(path)?;
    f.write_all(bytes)?;
    f.commit()
}

/// Opens (creating it if needed) a small file that is written in place:
/// a lock file, whose descriptor must stay the same file while it is held
/// (a sweep variant's `run.lock`), or a log a child process writes while
/// it runs (a variant's `run.log`, followed live), so neither can be
/// renamed over at the end. A link at
/// `path` is removed first, as [`AtomicFile`] replaces one, so the file
/// locked and written is never one that a link points to.
pub fn open_in_place(path: &Path) -> std::io::Result<File> {
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        std::fs::remove_file(path)?;
    }
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("weft-io-{}-{}", name, std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A link planted at the output path is replaced; the file it points
    /// to (outside the folder) is neither created nor changed.
    #[cfg(unix)]
    #[test]
    fn a_link_at_the_output_is_replaced_not_written_through() {
        let d = scratch("link");
        let out = d.join("out");
        std::fs::create_dir_all(&out).unwrap();
        let outside = d.join("outside.txt");
        std::os::unix::fs::symlink(&outside, out.join("u.npy")).unwrap();
        write_atomic(&out.join("u.npy"), b"new").unwrap();
        assert!(!outside.exists(), "wrote through the link");
        let m = std::fs::symlink_metadata(out.join("u.npy")).unwrap();
        assert!(m.file_type().is_file());
        assert_eq!(std::fs::read(out.join("u.npy")).unwrap(), b"new");
        // An existing outside file keeps its bytes.
        std::fs::write(&outside, b"theirs").unwrap();
        std::fs::remove_file(out.join("u.npy")).unwrap();
        std::os::unix::fs::symlink(&outside, out.join("u.npy")).unwrap();
        write_atomic(&out.join("u.npy"), b"mine").unwrap();
        assert_eq!(std::fs::read(&outside).unwrap(), b"theirs");
        assert_eq!(std::fs::read(out.join("u.npy")).unwrap(), b"mine");
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A lock file planted as a link to a file outside is replaced by a
    /// file of its own: the outside file is neither created nor changed.
    #[cfg(unix)]
    #[test]
    fn a_file_opened_in_place_is_never_one_a_link_points_to() {
        use std::io::Write;
        let d = scratch("in_place");
        let outside = d.join("outside.txt");
        std::os::unix::fs::symlink(&outside, d.join("run.lock")).unwrap();
        let mut f = open_in_place(&d.join("run.lock")).unwrap();
        f.write_all(b"123@host").unwrap();
        drop(f);
        assert!(!outside.exists(), "created through the link");
        std::fs::write(&outside, b"theirs").unwrap();
        std::fs::remove_file(d.join("run.lock")).unwrap();
        std::os::unix::fs::symlink(&outside, d.join("run.lock")).unwrap();
        let mut f = open_in_place(&d.join("run.lock")).unwrap();
        f.write_all(b"456@host").unwrap();
        drop(f);
        assert_eq!(std::fs::read(&outside).unwrap(), b"theirs");
        assert_eq!(std::fs::read(d.join("run.lock")).unwrap(), b"456@host");
        let _ = std::fs::remove_dir_all(&d);
    }

    /// An uncommitted file leaves the old one and no temporary behind.
    #[test]
    fn an_uncommitted_write_changes_nothing() {
        let d = scratch("drop");
        let p = d.join("a.txt");
        write_atomic(&p, b"old").unwrap();
        {
            let mut f = AtomicFile::create(&p).unwrap();
            f.write_all(b"half").unwrap();
        }
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        let names: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 1, "{:?}", names);
        let _ = std::fs::remove_dir_all(&d);
    }
}
