//! Files a program provides from memory instead of a file system: the web
//! build (no file system in a browser) provides the shipped examples,
//! assets and `.npy` files it carries, and graphs fetched from a URL, under
//! paths such as `/weft/graphs/heat.json`. The readers of graphs, assets
//! and `.npy` initial values ask here first, then the file system, so the
//! builder and the asset library work the same from either.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

static FILES: RwLock<BTreeMap<PathBuf, Arc<[u8]>>> = RwLock::new(BTreeMap::new());

/// Makes `bytes` readable at `path` (replacing what was provided there).
pub fn provide(path: impl Into<PathBuf>, bytes: impl Into<Arc<[u8]>>) {
    if let Ok(mut f) = FILES.write() {
        f.insert(path.into(), bytes.into());
    }
}

fn provided(path: &Path) -> Option<Arc<[u8]>> {
    FILES.read().ok()?.get(path).cloned()
}

/// The bytes at `path`: provided, else from the file system.
pub fn read(path: &Path) -> std::io::Result<Vec<u8>> {
    match provided(path) {
        Some(b) => Ok(b.to_vec()),
        None => std::fs::read(path),
    }
}

/// The text at `path`: provided, else from the file system.
pub fn read_to_string(path: &Path) -> std::io::Result<String> {
    match provided(path) {
        Some(b) => String::from_utf8(b.to_vec())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
        None => std::fs::read_to_string(path),
    }
}

/// Whether `path` is a provided file or a regular file on disk.
pub fn is_file(path: &Path) -> bool {
    provided(path).is_some() || path.is_file()
}

/// Whether `path` is a file whose bytes were provided (not on disk).
pub fn is_provided(path: &Path) -> bool {
    provided(path).is_some()
}

/// The files directly in `dir`: provided ones, then those on disk.
pub fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = FILES
        .read()
        .map(|f| {
            f.keys()
                .filter(|p| p.parent() == Some(dir))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    if let Ok(rd) = std::fs::read_dir(dir) {
        out.extend(rd.flatten().map(|e| e.path()));
    }
    out
}
