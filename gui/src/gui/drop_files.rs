//! Files dropped on the window: a mesh file becomes a `mesh` node reading
//! it, placed under the pointer (or in a free spot of the canvas), its id
//! taken from the file's name. One paste command, so one undo step; the
//! path is stored relative to the graph's folder when the file is inside
//! it (so the graph can move with its meshes), else absolute.

use super::model::Command;
use serde_json::json;
use std::path::{Path, PathBuf};
use weft_ir::io::mesh::Format;

/// The node JSON that reads the mesh at `file`, for a graph saved at
/// `graph` (or unsaved: `None`), at canvas position `pos`; `None` for a
/// file that is not a mesh.
pub fn mesh_node(file: &Path, graph: Option<&Path>, pos: [f32; 2]) -> Option<String> {
    Format::of(file)?;
    let stem = file.file_stem()?.to_string_lossy();
    let mut id: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if !id.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        id.insert_str(0, "mesh_");
    }
    let folder = graph.and_then(Path::parent);
    let shown: PathBuf = match folder.and_then(|d| file.strip_prefix(d).ok()) {
        Some(rel) if !rel.as_os_str().is_empty() => rel.to_path_buf(),
        _ => file.to_path_buf(),
    };
    let node = json!({
        "id": id,
        "kind": "mesh",
        "params": {"file": shown.to_string_lossy().replace('\\', "/")},
        "pos": pos,
    });
    Some(json!({"nodes": [node]}).to_string())
}

/// The commands for this frame's dropped files at canvas position `pos`,
/// and the names of dropped files that are not meshes (for the status
/// line).
pub fn dropped(
    ctx: &egui::Context,
    graph: Option<&Path>,
    pos: [f32; 2],
) -> (Vec<Command>, Vec<String>) {
    let files = ctx.input(|i| i.raw.dropped_files.clone());
    let mut commands = Vec::new();
    let mut refused = Vec::new();
    for (k, f) in files.iter().enumerate() {
        let path = f.path();
        let at = [pos[0] + 30.0 * k as f32, pos[1] + 30.0 * k as f32];
        match mesh_node(path, graph, at) {
            Some(json) => commands.push(Command::Paste {
                json,
                offset: [0.0, 0.0],
            }),
            None => refused.push(path.display().to_string()),
        }
    }
    (commands, refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mesh_beside_the_graph_is_named_by_its_file_and_kept_relative() {
        let j = mesh_node(
            Path::new("/p/scene/meshes/Rock-01.obj"),
            Some(Path::new("/p/scene/g.json")),
            [1.0, 2.0],
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(v["nodes"][0]["id"], "Rock_01");
        assert_eq!(v["nodes"][0]["params"]["file"], "meshes/Rock-01.obj");
        let j = mesh_node(
            Path::new("/elsewhere/9.obj"),
            Some(Path::new("/p/g.json")),
            [0.0, 0.0],
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(v["nodes"][0]["id"], "mesh_9");
        assert_eq!(v["nodes"][0]["params"]["file"], "/elsewhere/9.obj");
        assert!(mesh_node(Path::new("/p/notes.txt"), None, [0.0, 0.0]).is_none());
    }
}
