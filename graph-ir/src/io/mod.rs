//! File formats and file writing shared by the graph side (the builder reads
//! `.npy` initial values) and the runtime (dumps, PNGs, expectation files):
//! neither side owns them, so both import them from here.

pub mod npy;
pub mod provided;

use std::path::Path;

/// Writes to a temporary file beside `path`, then renames it over `path`, so
/// a crash or a full disk never leaves a half-written file where a complete
/// one was (graphs, images, expectations, preferences).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| "graph".into());
    let tmp = dir.join(format!(".{}.tmp{}", name, std::process::id()));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}
