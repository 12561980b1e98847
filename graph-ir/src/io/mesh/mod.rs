//! Triangle meshes read from other tools' files (the `mesh` node's
//! input): one [`Mesh`] whatever the format, so the node, the BVH and the
//! queries never see a file format. Each format is a module of its own
//! over a well-kept reader crate; this module picks one by the file's
//! extension and checks what every format must give (finite vertices,
//! indices in range, at least one triangle), naming the file.
//!
//! Bytes come through [`super::provided`] first, so the web build reads a
//! mesh it carries the same way as a file (a glTF file's external buffers
//! too). Coordinates are taken as the file has them: no unit or axis
//! conversion (a Y-up glTF stays Y-up), except that glTF's node transforms
//! are applied.

mod gltf;
mod obj;
mod ply;
mod stl;

use std::path::Path;

/// A triangle mesh: vertex positions and triangles (counter-clockwise seen
/// from outside, as the formats store them), in the file's own units and
/// axes, before the node's transform.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Mesh {
    pub positions: Vec<[f32; 3]>,
    /// Vertex indices, three per triangle (polygons are fanned into
    /// triangles by the reader).
    pub triangles: Vec<[u32; 3]>,
}

/// The formats read, by file extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Wavefront `.obj` (every object and group in the file, one mesh).
    Obj,
    /// Stanford `.ply`, ASCII or binary (the `vertex` and `face` elements).
    Ply,
    /// `.stl`, ASCII or binary (exactly equal vertices welded).
    Stl,
    /// glTF 2.0: `.gltf` (JSON, buffers embedded or beside it) or `.glb`
    /// (the scene's triangles in world space).
    Gltf,
}

impl Format {
    /// The format a path's extension names (case-insensitive).
    pub fn of(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "obj" => Format::Obj,
            "ply" => Format::Ply,
            "stl" => Format::Stl,
            "gltf" | "glb" => Format::Gltf,
            _ => return None,
        })
    }
    /// The extensions read, for error messages and file dialogs.
    pub const EXTENSIONS: &'static [&'static str] = &["obj", "ply", "stl", "gltf", "glb"];
    /// The format's name, as errors give it.
    pub fn name(self) -> &'static str {
        match self {
            Format::Obj => "OBJ",
            Format::Ply => "PLY",
            Format::Stl => "STL",
            Format::Gltf => "glTF",
        }
    }
}

/// Why a mesh file was not read: every message names the file (the node
/// is named by the caller, the graph builder).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum MeshError {
    #[error("cannot read mesh file '{path}': {message}")]
    Io { path: String, message: String },
    #[error("mesh file '{path}': unknown format (the extensions read are: {})", Format::EXTENSIONS.join(", "))]
    UnknownFormat { path: String },
    #[error("mesh file '{path}' is not a valid {format} file: {message}")]
    Format {
        path: String,
        format: &'static str,
        message: String,
    },
    #[error("mesh file '{path}' has no triangles")]
    Empty { path: String },
    #[error("mesh file '{path}': vertex {vertex} is not finite ({value:?})")]
    NotFinite {
        path: String,
        vertex: usize,
        value: [f32; 3],
    },
    #[error("mesh file '{path}': triangle {triangle} uses vertex {index}, but the mesh has {count} vertices")]
    BadIndex {
        path: String,
        triangle: usize,
        index: u32,
        count: usize,
    },
    #[error("mesh file '{path}' is too large: {what} (at most {max})")]
    TooLarge {
        path: String,
        what: String,
        max: u64,
    },
}

/// At most this many vertices or triangles (a field's axis and the BVH's
/// node indices are i32).
pub const MAX_ELEMENTS: u64 = 1 << 28;

/// Reads the mesh at `path`, in the format its extension names.
pub fn read(path: &Path) -> Result<Mesh, MeshError> {
    let shown = path.display().to_string();
    let format = Format::of(path).ok_or_else(|| MeshError::UnknownFormat {
        path: shown.clone(),
    })?;
    let bytes = super::provided::read(path).map_err(|e| MeshError::Io {
        path: shown.clone(),
        message: e.to_string(),
    })?;
    parse_in(&bytes, format, &shown, path.parent())
}

/// Reads a mesh from a file's bytes; `path` only names it in errors. A
/// glTF file whose buffers are files beside it is refused here: read it
/// with [`read`] or [`parse_in`], which know its folder.
pub fn parse(bytes: &[u8], format: Format, path: &str) -> Result<Mesh, MeshError> {
    parse_in(bytes, format, path, None)
}

/// [`parse`] for a file in `folder`: a glTF file's external buffers (URIs
/// relative to the file) are read from there, through
/// [`super::provided::read`].
pub fn parse_in(
    bytes: &[u8],
    format: Format,
    path: &str,
    folder: Option<&Path>,
) -> Result<Mesh, MeshError> {
    let mesh = match format {
        Format::Obj => obj::parse(bytes),
        Format::Ply => ply::parse(bytes),
        Format::Stl => stl::parse(bytes),
        Format::Gltf => gltf::parse(bytes, folder),
    }
    .map_err(|message| MeshError::Format {
        path: path.to_string(),
        format: format.name(),
        message,
    })?;
    check(mesh, path)
}

/// What every format must give: at least one triangle, finite vertices,
/// indices in range, sizes an i32 index holds.
fn check(mesh: Mesh, path: &str) -> Result<Mesh, MeshError> {
    let path = path.to_string();
    for (what, n) in [
        ("vertices", mesh.positions.len()),
        ("triangles", mesh.triangles.len()),
    ] {
        if n as u64 > MAX_ELEMENTS {
            return Err(MeshError::TooLarge {
                path,
                what: format!("{} {}", n, what),
                max: MAX_ELEMENTS,
            });
        }
    }
    if mesh.triangles.is_empty() {
        return Err(MeshError::Empty { path });
    }
    if let Some((vertex, &value)) = mesh
        .positions
        .iter()
        .enumerate()
        .find(|(_, p)| p.iter().any(|c| !c.is_finite()))
    {
        return Err(MeshError::NotFinite {
            path,
            vertex,
            value,
        });
    }
    let count = mesh.positions.len();
    for (triangle, t) in mesh.triangles.iter().enumerate() {
        if let Some(&index) = t.iter().find(|&&i| i as usize >= count) {
            return Err(MeshError::BadIndex {
                path,
                triangle,
                index,
                count,
            });
        }
    }
    Ok(mesh)
}

/// Feeds `parse` every truncation of a valid file (a few hundred, evenly
/// spread) and copies with bytes overwritten at random: each must come
/// back, as a mesh or a [`MeshError`], never a panic.
#[cfg(test)]
pub(crate) fn damaged_files_do_not_panic(valid: &[u8], format: Format) {
    let step = (valid.len() / 300).max(1);
    for n in (0..valid.len()).step_by(step) {
        let _ = parse(&valid[..n], format, "damaged");
    }
    // A fixed xorshift: the same copies every run.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..2000 {
        let mut b = valid.to_vec();
        for _ in 0..1 + next() % 4 {
            let at = (next() as usize) % b.len().max(1);
            if let Some(x) = b.get_mut(at) {
                *x = match next() % 3 {
                    0 => next() as u8,
                    1 => 0xff,
                    _ => {
                        let text = b"0123456789-. \n";
                        text[(next() as usize) % text.len()]
                    }
                };
            }
        }
        let _ = parse(&b, format, "damaged");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(text: &str) -> Result<Mesh, MeshError> {
        parse(text.as_bytes(), Format::Obj, "t.obj")
    }

    #[test]
    fn a_quad_is_two_triangles_of_its_four_vertices() {
        let m = obj("v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nf 1 2 3 4\n").unwrap();
        assert_eq!(m.positions.len(), 4);
        assert_eq!(m.triangles, vec![[0, 1, 2], [0, 2, 3]]);
        assert_eq!(m.positions[2], [1.0, 1.0, 0.0]);
    }

    #[test]
    fn objects_and_groups_are_one_mesh_with_their_own_vertices() {
        let text = "o a\nv 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n\
                    o b\nv 5 0 0\nv 6 0 0\nv 5 1 0\nf 4 5 6\n";
        let m = obj(text).unwrap();
        assert_eq!(m.positions.len(), 6);
        assert_eq!(m.triangles, vec![[0, 1, 2], [3, 4, 5]]);
    }

    #[test]
    fn bad_files_are_refused_naming_the_file() {
        let e = obj("v 0 0 0\nv 1 0 0\n").unwrap_err();
        assert_eq!(e.to_string(), "mesh file 't.obj' has no triangles");
        let e = obj("v 0 0 0\nv 1 0 0\nv nan 0 0\nf 1 2 3\n").unwrap_err();
        assert!(matches!(e, MeshError::NotFinite { vertex: 2, .. }), "{}", e);
        let e = obj("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 9\n").unwrap_err();
        assert!(e.to_string().contains("'t.obj'"), "{}", e);
        let e = read(Path::new("/nonexistent/x.obj")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/x.obj"), "{}", e);
        let e = read(Path::new("x.fbx")).unwrap_err();
        assert!(e.to_string().contains("unknown format"), "{}", e);
    }

    #[test]
    fn formats_are_known_by_their_extensions() {
        for (name, f) in [
            ("a.OBJ", Format::Obj),
            ("a.ply", Format::Ply),
            ("a.Stl", Format::Stl),
            ("a.gltf", Format::Gltf),
            ("a.glb", Format::Gltf),
        ] {
            assert_eq!(Format::of(Path::new(name)), Some(f), "{}", name);
        }
        for ext in Format::EXTENSIONS {
            assert!(Format::of(Path::new(&format!("x.{}", ext))).is_some());
        }
        assert_eq!(Format::of(Path::new("a.usd")), None);
    }

    #[test]
    fn damaged_obj_files_do_not_panic() {
        let text = "o a\nv 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nf 1 2 3 4\nf 1/1/1 2/2/2 3/3/3\n";
        damaged_files_do_not_panic(text.as_bytes(), Format::Obj);
    }
}
