//! Save selection as asset (Edit menu, or "Save as asset…" in a group
//! node's inspector): a dialog asks for the asset's name, version, doc and
//! which inner parameters to promote, and writes `NAME.vN.json` to the
//! editor's user library (`AssetLibraries::user_library_dir`). An existing version is
//! never overwritten: the dialog refuses and names the next free one.
//! The new asset is listed by the add-node menu at once.

use super::asset_menu::AssetLibraries;
use super::group_edit;
use weft_ir::graph::assets::Library;
use weft_ir::graph::{AssetInfo, AssetRef, GraphDoc, GroupDoc};

/// The open dialog: what is being saved and the fields typed so far.
#[derive(Clone, Debug, Default)]
pub struct Draft {
    /// The selected nodes (one inline group node: its body is saved).
    pub ids: Vec<String>,
    pub name: String,
    pub version: u32,
    pub doc: String,
    /// (node, parameter, promote?) for every inner parameter.
    pub promote: Vec<(String, String, bool)>,
    /// Why the last Save was refused.
    pub error: String,
}

/// The parameters of `node` worth offering for promotion: its kind's
/// numbers, integers, booleans, colours and choices, and its kernel
/// scalars (the inspector's Promote buttons reach the others).
fn promotable(node: &weft_ir::graph::NodeDoc) -> Vec<String> {
    use weft_ir::graph::catalog::ParamType as T;
    let mut names: Vec<String> = weft_ir::graph::catalog::kind(&node.kind)
        .map(|k| {
            k.params
                .iter()
                .filter(|p| matches!(p.ty, T::Int | T::Bool | T::Number | T::Color | T::Enum(_)))
                .map(|p| p.name.to_string())
                .collect()
        })
        .unwrap_or_default();
    if let Some(s) = node.params.get("scalars").and_then(|v| v.as_object()) {
        names.extend(s.keys().cloned());
    }
    names
}

/// The body `ids` make as a group: a single inline group node's own body
/// (its node's values of promoted parameters become their defaults), else
/// the selection packed as by Ctrl+G (its assets' pins read from `lib`).
fn body_of(doc: &GraphDoc, ids: &[String], lib: &Library) -> Result<GroupDoc, String> {
    if let [id] = ids {
        if let Some(n) = doc.node(id) {
            if let Some(g) = &n.group {
                let mut g = (**g).clone();
                for p in &mut g.params {
                    if let Some(v) = n.params.get(&p.name) {
                        p.default = Some(v.clone());
                    }
                }
                return Ok(g);
            }
            if n.asset.is_some() {
                return Err(format!(
                    "'{}' is an asset already: open its file to change it",
                    id
                ));
            }
        }
    }
    let packed = group_edit::group_nodes(doc, ids, "__asset", lib)?;
    packed
        .node("__asset")
        .and_then(|n| n.group.as_deref().cloned())
        .ok_or_else(|| "the selection made no group".to_string())
}

impl Draft {
    /// A dialog for the nodes `ids` of `doc`, named after a single group
    /// node, at the next free version of that name in `lib`.
    pub fn new(doc: &GraphDoc, ids: Vec<String>, lib: &Library) -> Draft {
        let name = match ids.as_slice() {
            [id] if doc.node(id).is_some_and(|n| n.group.is_some()) => id.clone(),
            _ => "my_asset".to_string(),
        };
        let mut promote = Vec::new();
        if let Ok(body) = body_of(doc, &ids, lib) {
            for n in &body.nodes {
                for p in promotable(n) {
                    let on = group_edit::promoted(&body, &n.id, &p).is_some();
                    promote.push((n.id.clone(), p, on));
                }
            }
        }
        let version = next_version(&name, lib);
        Draft {
            ids,
            name,
            version,
            doc: String::new(),
            promote,
            error: String::new(),
        }
    }
}

/// One more than the newest version of `name` in `lib` (1 if none).
pub fn next_version(name: &str, lib: &Library) -> u32 {
    lib.versions(name).last().map_or(1, |v| v + 1)
}

/// The asset file `d` describes: the body of `d.ids` in `doc`, with the
/// chosen parameters promoted (`lib`: the library its assets come from).
pub fn asset_doc(doc: &GraphDoc, d: &Draft, lib: &Library) -> Result<GraphDoc, String> {
    let name = d.name.trim();
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!(
            "the asset name '{}' must be letters, digits and _",
            name
        ));
    }
    if d.version == 0 {
        return Err("versions start at 1".into());
    }
    let mut body = body_of(doc, &d.ids, lib)?;
    for (node, param, on) in &d.promote {
        if *on {
            group_edit::promote(&mut body, node, param)?;
        }
    }
    Ok(GraphDoc {
        format: doc.format.clone(),
        version: doc.version,
        description: d.doc.clone(),
        seed: doc.seed,
        nodes: body.nodes,
        wires: body.wires,
        exec: body.exec,
        frames: body.frames,
        asset: Some(AssetInfo {
            name: name.to_string(),
            version: d.version,
            doc: d.doc.clone(),
            inputs: body.inputs,
            outputs: body.outputs,
            params: body.params,
        }),
    })
}

/// Writes the asset to the user library of `assets` (the editor's).
/// Refuses a version the library has already (anywhere in it), and a file
/// the library cannot read back.
pub fn save(
    doc: &GraphDoc,
    d: &Draft,
    assets: &AssetLibraries,
) -> Result<std::path::PathBuf, String> {
    let lib = assets.library();
    let file = asset_doc(doc, d, &lib)?;
    let name = d.name.trim();
    if let Some(p) = lib.path(name, d.version) {
        return Err(format!(
            "asset '{}' version {} exists already ({}): save it as version {}",
            name,
            d.version,
            p.display(),
            next_version(name, &lib)
        ));
    }
    let dir = assets
        .user_library_dir()
        .ok_or("no user library folder (HOME is not set)")?;
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {}", dir.display(), e))?;
    let path = dir.join(format!("{}.v{}.json", name, d.version));
    file.save_atomic(&path)
        .map_err(|e| format!("{}: {}", path.display(), e))?;
    let r = AssetRef {
        name: name.to_string(),
        version: d.version,
    };
    if let Err(e) = weft_ir::graph::assets::Library::new(vec![dir]).load(&r) {
        let _ = std::fs::remove_file(&path);
        return Err(format!("not saved, the asset would not load: {}", e));
    }
    Ok(path)
}

/// The dialog window; the asset goes to the user library of `assets`.
/// Returns a line for the log when it saved.
pub fn window(
    ctx: &egui::Context,
    open: &mut Option<Draft>,
    doc: &GraphDoc,
    assets: &AssetLibraries,
) -> Option<String> {
    let d = open.as_mut()?;
    let mut close = false;
    let mut saved = None;
    egui::Window::new("Save selection as asset")
        .collapsible(false)
        .resizable(false)
        .show(ctx, |ui| {
            ui.weak(format!("from: {}", d.ids.join(", ")));
            egui::Grid::new("asset-save").num_columns(2).show(ui, |ui| {
                ui.label("Name");
                let r = ui.text_edit_singleline(&mut d.name);
                if r.changed() {
                    d.version = next_version(d.name.trim(), &assets.library());
                }
                ui.end_row();
                ui.label("Version");
                ui.add(egui::DragValue::new(&mut d.version).range(1..=9999));
                ui.end_row();
                ui.label("Doc");
                ui.add(
                    egui::TextEdit::multiline(&mut d.doc)
                        .desired_rows(2)
                        .hint_text("what it does, its ports and parameters"),
                );
                ui.end_row();
            });
            if !d.promote.is_empty() {
                ui.label("Promote onto the asset's group node:");
                egui::ScrollArea::vertical()
                    .id_salt("asset-save-params")
                    .max_height(320.0)
                    .show(ui, |ui| {
                        for (node, param, on) in &mut d.promote {
                            ui.checkbox(on, format!("{}.{}", node, param));
                        }
                    });
            }
            if !d.error.is_empty() {
                ui.colored_label(egui::Color32::from_rgb(255, 140, 120), &d.error);
            }
            ui.horizontal(|ui| {
                if ui.button("Save asset").clicked() {
                    match save(doc, d, assets) {
                        Ok(p) => {
                            saved = Some(format!(
                                "saved asset {} v{} to {} (Shift+A finds it)",
                                d.name.trim(),
                                d.version,
                                p.display()
                            ));
                            close = true;
                        }
                        Err(e) => d.error = e,
                    }
                }
                if ui.button("Cancel").clicked() {
                    close = true;
                }
            });
        });
    if close {
        *open = None;
    }
    saved
}
