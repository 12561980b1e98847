//! STL (ASCII and binary) through `stl_io`. An STL file repeats each
//! vertex in every triangle that uses it: positions that are exactly equal
//! (bit for bit after `-0.0` is taken as `0.0`) are welded into one vertex,
//! in the order they first appear, so the mesh is indexed like the other
//! formats'. Nearly equal positions are not merged. Facet normals are not
//! read (the winding is the file's).

use super::Mesh;
use std::collections::HashMap;

/// The mesh in `bytes`; the error is for the caller to name the file.
pub(super) fn parse(bytes: &[u8]) -> Result<Mesh, String> {
    let bytes = normalized(bytes);
    let mut cursor = std::io::Cursor::new(&bytes[..]);
    let triangles = stl_io::create_stl_reader(&mut cursor).map_err(|e| e.to_string())?;
    let mut mesh = Mesh::default();
    let mut index: HashMap<[u32; 3], u32> = HashMap::new();
    for t in triangles {
        let t = t.map_err(|e| e.to_string())?;
        let mut tri = [0u32; 3];
        for (slot, v) in tri.iter_mut().zip(t.vertices.iter()) {
            // + 0.0 turns -0.0 into 0.0, so the two weld.
            let p = [v[0] + 0.0, v[1] + 0.0, v[2] + 0.0];
            let next = mesh.positions.len() as u32;
            *slot = *index.entry(p.map(f32::to_bits)).or_insert_with(|| {
                mesh.positions.push(p);
                next
            });
        }
        mesh.triangles.push(tri);
        if mesh.triangles.len() as u64 > super::MAX_ELEMENTS {
            return Err(format!("more than {} triangles", super::MAX_ELEMENTS));
        }
    }
    Ok(mesh)
}

/// The bytes as `stl_io` takes them: `stl_io` calls any file that begins
/// with `solid ` ASCII, but many binary files' free 80-byte header begins
/// so too: a file whose size is exactly what its triangle count gives is
/// binary, and its header is blanked. An ASCII file whose first line is a
/// bare `solid` (no name) gets the space `stl_io` looks for.
fn normalized(bytes: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if bytes.len() >= 84 {
        let n = u32::from_le_bytes([bytes[80], bytes[81], bytes[82], bytes[83]]) as u64;
        if 84 + 50 * n == bytes.len() as u64 && bytes.starts_with(b"solid") {
            let mut b = bytes.to_vec();
            b[..80].fill(0);
            return b.into();
        }
    }
    if let Some(rest) = bytes.strip_prefix(b"solid") {
        if matches!(rest.first(), Some(b'\n' | b'\r')) {
            let mut b = b"solid ".to_vec();
            b.extend_from_slice(rest);
            return b.into();
        }
    }
    bytes.into()
}

#[cfg(test)]
mod tests {
    use super::super::{damaged_files_do_not_panic, parse, Format, Mesh, MeshError};

    fn stl(bytes: &[u8]) -> Result<Mesh, MeshError> {
        parse(bytes, Format::Stl, "t.stl")
    }

    /// A unit square as two triangles sharing an edge (one corner written
    /// as -0).
    const SQUARE: [[[f32; 3]; 3]; 2] = [
        [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 0.0]],
        [[-0.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.0, 1.0, 0.0]],
    ];

    fn ascii(first_line: &str, tris: &[[[f32; 3]; 3]]) -> String {
        let mut s = format!("{}\n", first_line);
        for t in tris {
            s += "  facet normal 0 0 1\n    outer loop\n";
            for v in t {
                s += &format!("      vertex {:e} {:e} {:e}\n", v[0], v[1], v[2]);
            }
            s += "    endloop\n  endfacet\n";
        }
        s + "endsolid square\n"
    }

    fn binary(header: &[u8], tris: &[[[f32; 3]; 3]]) -> Vec<u8> {
        let mut b = [0u8; 80].to_vec();
        b[..header.len()].copy_from_slice(header);
        b.extend((tris.len() as u32).to_le_bytes());
        for t in tris {
            b.extend([0f32, 0.0, 1.0].iter().flat_map(|c| c.to_le_bytes()));
            for v in t {
                b.extend(v.iter().flat_map(|c| c.to_le_bytes()));
            }
            b.extend([0u8, 0]);
        }
        b
    }

    fn is_square(m: &Mesh) {
        assert_eq!(m.positions.len(), 4, "{:?}", m.positions);
        assert_eq!(m.triangles, vec![[0, 1, 2], [0, 2, 3]]);
        assert_eq!(m.positions[3], [0.0, 1.0, 0.0]);
    }

    #[test]
    fn ascii_and_binary_files_are_welded_into_an_indexed_mesh() {
        is_square(&stl(ascii("solid square", &SQUARE).as_bytes()).unwrap());
        is_square(&stl(ascii("solid", &SQUARE).as_bytes()).unwrap());
        is_square(&stl(&binary(b"made by hand", &SQUARE)).unwrap());
        // A binary file whose free header begins like an ASCII one.
        is_square(&stl(&binary(b"solid exported by a CAD tool", &SQUARE)).unwrap());
    }

    #[test]
    fn nearly_equal_vertices_are_not_welded() {
        let mut tris = SQUARE;
        tris[1][1][0] = 1.0 + f32::EPSILON;
        assert_eq!(stl(&binary(b"", &tris)).unwrap().positions.len(), 5);
    }

    #[test]
    fn empty_truncated_and_broken_files_are_errors_naming_the_file() {
        assert!(matches!(
            stl(&binary(b"", &[])),
            Err(MeshError::Empty { .. })
        ));
        assert!(matches!(
            stl(ascii("solid empty", &[]).as_bytes()),
            Err(MeshError::Empty { .. })
        ));
        let full = binary(b"", &SQUARE);
        let e = stl(&full[..full.len() - 10]).unwrap_err().to_string();
        assert!(e.contains("'t.stl' is not a valid STL file"), "{}", e);
        let e = stl(&full[..40]).unwrap_err().to_string();
        assert!(e.contains("not a valid STL file"), "{}", e);
        let text = ascii("solid square", &SQUARE).replace("vertex 1e0 1e0 0e0", "vertex 1 x 0");
        assert!(stl(text.as_bytes()).is_err());
        let mut nan = SQUARE;
        nan[0][1][2] = f32::NAN;
        assert!(matches!(
            stl(&binary(b"", &nan)),
            Err(MeshError::NotFinite { .. })
        ));
    }

    #[test]
    fn damaged_stl_files_do_not_panic() {
        damaged_files_do_not_panic(ascii("solid square", &SQUARE).as_bytes(), Format::Stl);
        damaged_files_do_not_panic(&binary(b"solid x", &SQUARE), Format::Stl);
    }
}
