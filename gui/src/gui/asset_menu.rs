//! Assets in the add-node menu (Shift+A / Tab): the asset library (shipped,
//! user library, `WEFT_ASSET_PATH`) searched next to the built-in node
//! kinds; choosing one adds a group node that references the asset's
//! newest version.
//!
//! The library is a value the app chooses, never a global:
//! `AssetLibraries` (the open graph's folder and the chosen user library)
//! is owned by the editor's `Model`, which keeps its folder current
//! whenever it validates. Everything that resolves an asset (the pins, the
//! menu, asset updates and saves, the viewport's build, a bake, the f32
//! twin) is handed that value or the `Library` made from it, so they all
//! see the same assets, and two editors with different user libraries do
//! not see each other's.

use egui::Ui;
use std::path::PathBuf;
use weft_ir::graph::assets::Library;
use weft_ir::graph::{GraphDoc, GraphSource};

/// Where the editor's asset library comes from: the folder of the graph
/// being edited (None: untitled) and the user library folder chosen for
/// this editor (None: the platform's, `assets::user_dir`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AssetLibraries {
    pub base: Option<PathBuf>,
    pub user: Option<PathBuf>,
}

impl AssetLibraries {
    /// Uses `dir` as the user library instead of the platform's config
    /// folder (tests use a temporary folder; None restores the default).
    pub fn set_user_library(&mut self, dir: Option<PathBuf>) {
        self.user = dir;
    }

    /// The folder of the graph being edited (None: untitled).
    pub fn set_base(&mut self, dir: Option<PathBuf>) {
        self.base = dir;
    }

    /// The folder builds resolve against: the graph's, else none (the
    /// empty path, as a build of an untitled graph has always had).
    pub fn base_dir(&self) -> PathBuf {
        self.base.clone().unwrap_or_default()
    }

    /// The user library: the folder `set_user_library` chose, else the
    /// platform's (`assets::user_dir`). Save selection as asset writes here.
    pub fn user_library_dir(&self) -> Option<PathBuf> {
        self.user.clone().or_else(weft_ir::graph::assets::user_dir)
    }

    /// The library the open graph sees: its folder's, else the
    /// executable's (see `shipped_dir`).
    pub fn library(&self) -> Library {
        self.library_for(self.base.clone())
    }

    /// The library a graph in `base` sees, with this editor's user
    /// library: the chosen one replaces the platform's at the front.
    pub fn library_for(&self, base: Option<PathBuf>) -> Library {
        let base = base.or_else(|| {
            std::env::current_exe()
                .ok()
                .and_then(|e| e.parent().map(PathBuf::from))
        });
        let mut lib = Library::for_graph(&base.unwrap_or_default());
        if let Some(u) = &self.user {
            let default = weft_ir::graph::assets::user_dir();
            lib.dirs.retain(|d| Some(d) != default.as_ref());
            lib.dirs.insert(0, u.clone());
        }
        lib
    }

    /// The graph `doc` in `base_dir` as the app builds it: a `GraphSource`
    /// whose library is this one (`library_for`, the one the menu lists),
    /// so what the menu adds is what runs, in the viewport and in a bake
    /// alike.
    pub fn source(&self, doc: &GraphDoc, base_dir: PathBuf) -> GraphSource {
        let library = self.library_for(Some(base_dir.clone()));
        GraphSource::new(doc.clone(), base_dir, library)
    }

    /// Builds `doc` as the app does (`source`).
    pub fn build(
        &self,
        doc: &GraphDoc,
        base_dir: PathBuf,
    ) -> Result<weft_ir::ir::Program, weft_ir::graph::GraphErrors> {
        self.source(doc, base_dir).build()
    }
}

/// One asset as the menu lists it: its newest version.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub name: String,
    pub version: u32,
    pub doc: String,
}

/// Every asset of `lib` at its newest version, by name (an unreadable file
/// is listed with its error as the doc, so a broken asset is visible).
pub fn entries(lib: &Library) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    for (name, version) in lib
        .list()
        .into_iter()
        .map(|(n, v, _)| (n, v))
        .collect::<std::collections::BTreeSet<_>>()
    {
        if let Some(e) = out.iter_mut().find(|e| e.name == name) {
            if e.version >= version {
                continue;
            }
        }
        let doc = match lib.path(&name, version).map(|p| GraphDoc::load(&p)) {
            Some(Ok(d)) => d.asset.map(|a| a.doc).unwrap_or_default(),
            Some(Err(e)) => format!("cannot read: {}", e),
            None => String::new(),
        };
        out.retain(|e| e.name != name);
        out.push(Entry { name, version, doc });
    }
    out
}

/// The entries matching `query`: name first (prefix, then substring), then
/// doc; all of them for an empty query.
pub fn search(entries: &[Entry], query: &str) -> Vec<Entry> {
    let q = query.trim().to_lowercase();
    let mut hits: Vec<(u8, &Entry)> = entries
        .iter()
        .filter_map(|e| {
            let n = e.name.to_lowercase();
            let r = if q.is_empty() || n.starts_with(&q) {
                0
            } else if n.contains(&q) {
                1
            } else if e.doc.to_lowercase().contains(&q) {
                2
            } else {
                return None;
            };
            Some((r, e))
        })
        .collect();
    hits.sort_by_key(|(r, e)| (*r, e.name.clone()));
    hits.into_iter().map(|(_, e)| e.clone()).collect()
}

/// The menu's asset section under the node kinds; `enter_takes_first`
/// when no node kind matched the search; `lib` is the editor's library.
/// Returns the chosen asset.
pub fn section(
    ui: &mut Ui,
    lib: &Library,
    search_text: &mut String,
    enter_takes_first: bool,
) -> Option<Entry> {
    let hits = search(&entries(lib), search_text);
    if hits.is_empty() {
        return None;
    }
    ui.separator();
    ui.label(egui::RichText::new("assets").small());
    let enter = enter_takes_first
        && !search_text.trim().is_empty()
        && ui.input(|i| i.key_pressed(egui::Key::Enter));
    let mut chosen = None;
    egui::ScrollArea::vertical()
        .id_salt("asset-menu")
        .max_height(220.0)
        .show(ui, |ui| {
            for (n, e) in hits.iter().enumerate() {
                let b = ui
                    .horizontal(|ui| {
                        let b = ui.button(format!("{}  v{}", e.name, e.version));
                        let short: String = e.doc.chars().take(48).collect();
                        ui.weak(if short.len() < e.doc.len() {
                            format!("{}…", short)
                        } else {
                            short
                        });
                        b
                    })
                    .inner
                    .on_hover_text(&e.doc);
                if b.clicked() || (enter && n == 0) {
                    chosen = Some(e.clone());
                }
            }
        });
    if chosen.is_some() {
        search_text.clear();
    }
    chosen
}

/// The graph JSON (for `Command::Paste`) of a group node referencing `e`
/// at `pos`, named after the asset (renamed by the paste if taken).
pub fn node_json(e: &Entry, pos: [f32; 2]) -> String {
    serde_json::json!({"nodes": [{
        "id": e.name, "kind": "group",
        "asset": {"name": e.name, "version": e.version},
        "pos": pos
    }]})
    .to_string()
}
