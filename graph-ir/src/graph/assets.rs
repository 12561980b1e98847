//! The asset library: graph files with an `"asset"` interface that group
//! nodes reference by name and version.
//!
//! An asset named `NAME` at version `N` is the file `NAME.vN.json` in one
//! of the library folders, searched in this order (the first hit wins):
//! 1. the folders listed in the environment variable `WEFT_ASSET_PATH`
//!    (separated like `PATH`: `:` on Unix, `;` on Windows);
//! 2. the user library: `assets/` in the platform's config folder
//!    (`$XDG_CONFIG_HOME/weft/assets` or `~/.config/weft/assets` on Linux,
//!    `~/Library/Application Support/weft/assets` on macOS,
//!    `%APPDATA%\weft\assets` on Windows);
//! 3. the folders listed in the library setting, `library.json` beside
//!    that folder (`{"folders": ["/studio/assets", "shared"]}`; a relative
//!    folder is relative to the config folder). The app edits it (Edit >
//!    Asset library folders…) and `weft` on the command line reads the same
//!    file, so a graph finds the same assets headless;
//! 4. the shipped library: `assets/` at the repository root (the nearest
//!    `assets/` folder above the graph's own folder, else above the
//!    executable, else the one this build was made from).

use super::document::{AssetRef, GroupDoc};
use super::GraphDoc;
use std::path::{Path, PathBuf};

/// The environment variable listing extra library folders.
pub const ASSET_PATH_VAR: &str = "WEFT_ASSET_PATH";

#[derive(Clone, Debug)]
pub struct Library {
    pub dirs: Vec<PathBuf>,
    /// Why a library setting could not be read (shown with a missing
    /// asset's error, so a broken setting is never silent).
    pub notes: Vec<String>,
}

/// The library setting's file: `library.json` in the platform's config
/// folder (beside the user library).
pub fn setting_file() -> Option<PathBuf> {
    user_dir().and_then(|u| u.parent().map(|p| p.join("library.json")))
}

#[derive(serde::Serialize, serde::Deserialize, Default)]
struct Setting {
    #[serde(default)]
    folders: Vec<String>,
}

/// The folders the library setting lists, as written (empty when there is
/// no setting file); an error names the file and what is wrong with it.
pub fn setting_folders() -> Result<Vec<String>, String> {
    let Some(file) = setting_file() else {
        return Ok(vec![]);
    };
    let text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(format!("cannot read {}: {}", file.display(), e)),
    };
    serde_json::from_str::<Setting>(&text)
        .map(|s| s.folders)
        .map_err(|e| {
            format!(
                "{} is not a library setting ({}); expected {{\"folders\": [\"/path\", ...]}}",
                file.display(),
                e
            )
        })
}

/// A listed folder as a path: relative ones are relative to the config folder.
pub fn setting_folder_path(folder: &str) -> PathBuf {
    let p = PathBuf::from(folder);
    match setting_file().and_then(|f| f.parent().map(Path::to_path_buf)) {
        Some(base) if p.is_relative() => base.join(p),
        _ => p,
    }
}

/// Writes the library setting (atomically: a temporary file renamed over it).
pub fn save_setting_folders(folders: &[String]) -> Result<(), String> {
    let file = setting_file().ok_or("no config folder on this platform (HOME is not set)")?;
    let dir = file.parent().ok_or("the setting file has no folder")?;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {}", dir.display(), e))?;
    let text = serde_json::to_string_pretty(&Setting {
        folders: folders.to_vec(),
    })
    .map_err(|e| e.to_string())?;
    crate::io::write_atomic(&file, (text + "\n").as_bytes())
        .map_err(|e| format!("cannot write {}: {}", file.display(), e))
}

/// The user library folder of this platform.
pub fn user_dir() -> Option<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let base = if cfg!(windows) {
        std::env::var_os("APPDATA").map(PathBuf::from)
    } else if cfg!(target_os = "macos") {
        home.map(|h| h.join("Library").join("Application Support"))
    } else {
        std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| home.map(|h| h.join(".config")))
    };
    base.map(|b| b.join("weft").join("assets"))
}

/// The shipped library: the nearest `assets/` (holding a README.md) above
/// `base_dir`, else above the running executable (`target/debug/weft` in
/// a checkout, or an install that keeps `assets/` beside `bin/`), else the
/// repository this build was made from.
pub fn shipped_dir(base_dir: &Path) -> Option<PathBuf> {
    let abs = std::fs::canonicalize(base_dir).unwrap_or_else(|_| base_dir.to_path_buf());
    let exe = std::env::current_exe()
        .ok()
        .and_then(|e| std::fs::canonicalize(e).ok());
    let from_exe = exe.iter().flat_map(|e| e.ancestors().skip(1));
    for a in abs
        .ancestors()
        .filter(|a| !a.as_os_str().is_empty())
        .chain(from_exe)
    {
        let d = a.join("assets");
        if crate::io::provided::is_file(&d.join("README.md")) {
            return Some(d);
        }
    }
    let built = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()?
        .join("assets");
    built.is_dir().then_some(built)
}

impl Library {
    pub fn new(dirs: Vec<PathBuf>) -> Library {
        Library {
            dirs,
            notes: vec![],
        }
    }

    /// The library a graph in `base_dir` sees (see the module doc).
    pub fn for_graph(base_dir: &Path) -> Library {
        let mut dirs: Vec<PathBuf> = std::env::var_os(ASSET_PATH_VAR)
            .map(|v| {
                std::env::split_paths(&v)
                    .filter(|p| !p.as_os_str().is_empty())
                    .collect()
            })
            .unwrap_or_default();
        dirs.extend(user_dir());
        let mut notes = Vec::new();
        match setting_folders() {
            Ok(f) => dirs.extend(f.iter().map(|f| setting_folder_path(f))),
            Err(e) => notes.push(e),
        }
        dirs.extend(shipped_dir(base_dir));
        Library { dirs, notes }
    }

    /// The file of `name` at `version`, where the library has it.
    pub fn path(&self, name: &str, version: u32) -> Option<PathBuf> {
        self.dirs
            .iter()
            .map(|d| d.join(format!("{}.v{}.json", name, version)))
            .find(|p| crate::io::provided::is_file(p))
    }

    /// Every version of `name` in the library, ascending.
    pub fn versions(&self, name: &str) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .list()
            .into_iter()
            .filter(|(n, _, _)| n == name)
            .map(|(_, v, _)| v)
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// (name, version, file) of every asset file in the library folders.
    pub fn list(&self) -> Vec<(String, u32, PathBuf)> {
        let mut out = Vec::new();
        for d in &self.dirs {
            for p in crate::io::provided::files_in(d) {
                let Some(file) = p.file_name().and_then(|f| f.to_str()) else {
                    continue;
                };
                let Some(stem) = file.strip_suffix(".json") else {
                    continue;
                };
                let Some((name, v)) = stem.rsplit_once(".v") else {
                    continue;
                };
                if let Ok(v) = v.parse::<u32>() {
                    out.push((name.to_string(), v, p));
                }
            }
        }
        out.sort();
        out
    }

    /// Reads the asset `a` as a group body. The error names the asset; the
    /// caller adds the group node.
    pub fn load(&self, a: &AssetRef) -> Result<GroupDoc, String> {
        let Some(path) = self.path(&a.name, a.version) else {
            let have = self.versions(&a.name);
            let where_ = self
                .dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ");
            let notes: String = self.notes.iter().map(|n| format!("; {}", n)).collect();
            return Err(if have.is_empty() {
                format!(
                    "asset '{}' version {} is not in the library (no '{}.v{}.json' in: {}){}",
                    a.name, a.version, a.name, a.version, where_, notes
                )
            } else {
                format!(
                    "asset '{}' has no version {} in the library (it has: {}); the graph keeps the version it was made with",
                    a.name,
                    a.version,
                    have.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", ")
                )
            });
        };
        let doc = GraphDoc::load(&path)
            .map_err(|e| format!("asset '{}' ({}): {}", a.name, path.display(), e))?;
        let Some(info) = doc.asset else {
            return Err(format!(
                "asset '{}': {} has no \"asset\" interface",
                a.name,
                path.display()
            ));
        };
        if info.name != a.name || info.version != a.version {
            return Err(format!(
                "asset '{}': {} declares itself '{}' version {}",
                a.name,
                path.display(),
                info.name,
                info.version
            ));
        }
        Ok(GroupDoc {
            doc: info.doc,
            inputs: info.inputs,
            outputs: info.outputs,
            params: info.params,
            nodes: doc.nodes,
            wires: doc.wires,
            exec: doc.exec,
            frames: vec![],
        })
    }
}
