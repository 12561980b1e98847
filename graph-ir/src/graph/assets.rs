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
//! 3. the shipped library: `assets/` at the repository root (the nearest
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
        if d.join("README.md").is_file() {
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
        Library { dirs }
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
        dirs.extend(shipped_dir(base_dir));
        Library { dirs }
    }

    /// The file of `name` at `version`, where the library has it.
    pub fn path(&self, name: &str, version: u32) -> Option<PathBuf> {
        self.dirs
            .iter()
            .map(|d| d.join(format!("{}.v{}.json", name, version)))
            .find(|p| p.is_file())
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
            let Ok(rd) = std::fs::read_dir(d) else {
                continue;
            };
            for e in rd.flatten() {
                let p = e.path();
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
            return Err(if have.is_empty() {
                format!(
                    "asset '{}' version {} is not in the library (no '{}.v{}.json' in: {})",
                    a.name, a.version, a.name, a.version, where_
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
