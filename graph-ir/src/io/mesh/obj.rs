//! Wavefront OBJ through `tobj`: every model in the file is one mesh
//! (its vertices appended, its indices offset), polygons fanned into
//! triangles by `tobj`'s `triangulate`. Positions only, indexed apart
//! from normals and UVs (`single_index: false`), so a vertex that carries
//! two normals or UVs stays one point for the queries. `tobj` numbers each
//! model's vertices in the order its faces first use them (a vertex no
//! face uses is dropped); faces keep the file's order.

use super::Mesh;

/// The mesh in `bytes`; the error is `tobj`'s, for the caller to name the
/// file.
pub(super) fn parse(bytes: &[u8]) -> Result<Mesh, String> {
    let opts = tobj::LoadOptions {
        single_index: false,
        triangulate: true,
        ignore_points: true,
        ignore_lines: true,
    };
    let mut reader = std::io::BufReader::new(bytes);
    // Materials are not read: a missing `.mtl` must not refuse the mesh.
    let (models, _) =
        tobj::load_obj_buf(&mut reader, &opts, |_| Err(tobj::LoadError::OpenFileFailed))
            .map_err(|e| e.to_string())?;
    let mut mesh = Mesh::default();
    for m in &models {
        let base = mesh.positions.len() as u64;
        let p = &m.mesh.positions;
        if p.len() % 3 != 0 {
            return Err(format!("object '{}' has a partial vertex", m.name));
        }
        mesh.positions
            .extend(p.chunks_exact(3).map(|c| [c[0], c[1], c[2]]));
        let idx = &m.mesh.indices;
        if idx.len() % 3 != 0 {
            return Err(format!("object '{}' has a partial triangle", m.name));
        }
        for t in idx.chunks_exact(3) {
            let v = |i: u32| (base + i as u64).min(u32::MAX as u64) as u32;
            mesh.triangles.push([v(t[0]), v(t[1]), v(t[2])]);
        }
    }
    Ok(mesh)
}
