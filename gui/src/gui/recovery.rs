//! Crash recovery: every editor session autosaves its unsaved graph into a
//! file of its own, `CONFIG/recovery/PID-NANOS.json`, with the path the
//! graph was opened from. One shared file let two windows overwrite each
//! other's work, a save in one delete the other's, and a recovered graph
//! come back untitled (its relative `npy` files and assets no longer
//! resolving, Ctrl+S asking for a name).
//!
//! At start the editor offers the files no running session owns: on Linux
//! a file whose process is still alive belongs to another window and is
//! left alone; elsewhere every other file is offered (a live window writes
//! its own again at its next autosave). A file of this process is never a
//! live window's (one editor per process), so it is offered too. The
//! recovery file of versions before per-session files, `CONFIG/recovery.json`
//! (a bare graph), is offered as an untitled graph.
//!
//! Recovering adopts the file: it is renamed to this session's, so a crash
//! before the next autosave loses nothing, and a save removes it.

use super::platform;
use std::path::{Path, PathBuf};
use weft_ir::graph::GraphDoc;

const FORMAT: &str = "weft-recovery";

/// This session's recovery file under `config`.
pub fn session_file(config: &Path) -> PathBuf {
    let nanos = platform::unix_time().as_nanos();
    config
        .join("recovery")
        .join(format!("{}-{}.json", platform::process_id(), nanos))
}

/// The recovery file's text: the graph (as its JSON) and where it came from.
pub fn encode(graph_json: &str, path: Option<&Path>) -> Result<String, String> {
    let graph: serde_json::Value =
        serde_json::from_str(graph_json).map_err(|e| format!("graph: {}", e))?;
    let saved = platform::unix_time().as_secs();
    let v = serde_json::json!({
        "format": FORMAT,
        "version": 1,
        "pid": platform::process_id(),
        "saved_unix": saved,
        "path": path.map(|p| p.to_string_lossy().into_owned()),
        "graph": graph,
    });
    serde_json::to_string_pretty(&v).map_err(|e| e.to_string())
}

/// Unsaved work found at start.
#[derive(Clone, Debug)]
pub struct Offer {
    /// The recovery file.
    pub file: PathBuf,
    /// Where the graph was opened from (`None`: it was never saved).
    pub path: Option<PathBuf>,
    /// When it was autosaved (seconds since 1970; 0 when unknown).
    pub saved_unix: u64,
    pub doc: GraphDoc,
}

impl Offer {
    /// One line for the offer: the graph's file (or "an untitled graph")
    /// and how long ago it was autosaved.
    pub fn describe(&self, now_unix: u64) -> String {
        let what = match &self.path {
            Some(p) => p.display().to_string(),
            None => "an untitled graph".into(),
        };
        if self.saved_unix == 0 || now_unix < self.saved_unix {
            return what;
        }
        let s = now_unix - self.saved_unix;
        let ago = match s {
            0..=59 => format!("{} s ago", s),
            60..=3599 => format!("{} min ago", s / 60),
            3600..=172_799 => format!("{} h ago", s / 3600),
            _ => format!("{} days ago", s / 86_400),
        };
        format!("{} (autosaved {})", what, ago)
    }
}

/// Reads one recovery file: the per-session wrapper, or a bare graph (the
/// older `recovery.json`). The pid is `None` for a bare graph.
fn read(file: &Path) -> Result<(Offer, Option<u32>), String> {
    let text = std::fs::read_to_string(file).map_err(|e| e.to_string())?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    if v.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
        let doc = GraphDoc::parse(&text).map_err(|e| e.to_string())?;
        let offer = Offer {
            file: file.to_path_buf(),
            path: None,
            saved_unix: 0,
            doc,
        };
        return Ok((offer, None));
    }
    let graph = v.get("graph").ok_or("no graph in the recovery file")?;
    let doc = GraphDoc::parse(&graph.to_string()).map_err(|e| e.to_string())?;
    let offer = Offer {
        file: file.to_path_buf(),
        path: v.get("path").and_then(|p| p.as_str()).map(PathBuf::from),
        saved_unix: v.get("saved_unix").and_then(|s| s.as_u64()).unwrap_or(0),
        doc,
    };
    let pid = v.get("pid").and_then(|p| p.as_u64()).map(|p| p as u32);
    Ok((offer, pid))
}

/// Whether another running process has this pid (Linux: `/proc`;
/// elsewhere unknown, so no).
fn other_process_alive(pid: u32) -> bool {
    pid != platform::process_id()
        && cfg!(target_os = "linux")
        && Path::new("/proc").join(pid.to_string()).exists()
}

/// The unsaved work under `config` that no running session owns, newest
/// first, and a line for each recovery file that does not read back (it
/// is left where it is).
pub fn offers(config: &Path) -> (Vec<Offer>, Vec<String>) {
    let mut files = vec![];
    let legacy = config.join("recovery.json");
    if legacy.exists() {
        files.push(legacy);
    }
    if let Ok(dir) = std::fs::read_dir(config.join("recovery")) {
        for e in dir.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "json") {
                files.push(p);
            }
        }
    }
    let mut found = vec![];
    let mut problems = vec![];
    for f in files {
        match read(&f) {
            Ok((_, Some(pid))) if other_process_alive(pid) => {}
            Ok((offer, _)) => found.push(offer),
            Err(e) => problems.push(format!(
                "recovery file {} does not read back: {}",
                f.display(),
                e
            )),
        }
    }
    found.sort_by(|a, b| b.saved_unix.cmp(&a.saved_unix).then(a.file.cmp(&b.file)));
    (found, problems)
}

/// Makes `offer`'s file this session's (`session`): renamed, so that the
/// recovered work stays on disk until it is saved.
pub fn adopt(offer: &Offer, session: &Path) -> std::io::Result<()> {
    if let Some(dir) = session.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::rename(&offer.file, session)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_file_reads_back_with_its_path() {
        let dir = std::env::temp_dir().join(format!("weft-recovery-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let file = session_file(&dir);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        let doc = crate::gui::model::empty_doc();
        let text = encode(&doc.to_json(), Some(Path::new("/some/graph.json"))).unwrap();
        std::fs::write(&file, text).unwrap();
        let (found, problems) = offers(&dir);
        assert!(problems.is_empty(), "{:?}", problems);
        assert_eq!(found.len(), 1, "this process's own file is offered");
        assert_eq!(
            found[0].path.as_deref(),
            Some(Path::new("/some/graph.json"))
        );
        assert_eq!(found[0].doc, doc);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
