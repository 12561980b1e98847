//! A `surface` view's iso-surface as an indexed triangle mesh, and its PLY
//! form (`vertex` + `face` elements).
//!
//! The view's kernels append triangles to `NODE.triangles` in thread order
//! (`passes::views::surface`); each carries a key unique to its cell,
//! tetrahedron and part. Sorting by key makes the mesh the same on every
//! backend and thread count. Vertices are welded by their exact bits: the
//! extraction computes a vertex on a shared edge from the same endpoints
//! in the same order in every tetrahedron and cell, so neighbours' copies
//! are bit-identical and the welded mesh is closed where the surface is.
//! A triangle whose corners weld to fewer than three vertices (the surface
//! passing exactly through a sample) has no area and is left out.
//!
//! Winding: the extraction's triangles face either way (the view shades
//! both sides). `orient` turns every face of a connected piece to agree
//! with its neighbours across shared edges, then turns the whole piece so
//! that its normals (counter-clockwise winding, right-handed) point from
//! where the field is above `level` to where it is below: out of a blob of
//! density, into the negative side of a signed distance.

use std::collections::HashMap;

/// An indexed triangle mesh (world coordinates of the view's domain).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Mesh {
    pub vertices: Vec<[f32; 3]>,
    pub faces: Vec<[u32; 3]>,
}

/// The mesh of `count` triangles: `tris` holds 9 f32 words per slot (x, y,
/// z of each corner), `keys` one key per slot.
pub fn from_triangles(tris: &[u32], keys: &[u32], count: usize) -> Mesh {
    let count = count.min(keys.len()).min(tris.len() / 9);
    let mut order: Vec<usize> = (0..count).collect();
    order.sort_by_key(|&s| keys[s]);
    let mut index: HashMap<[u32; 3], u32> = HashMap::new();
    let mut mesh = Mesh::default();
    for s in order {
        let t = &tris[s * 9..s * 9 + 9];
        let mut face = [0u32; 3];
        for (c, f) in face.iter_mut().enumerate() {
            let bits = [t[c * 3], t[c * 3 + 1], t[c * 3 + 2]];
            *f = *index.entry(bits).or_insert_with(|| {
                mesh.vertices.push(bits.map(f32::from_bits));
                mesh.vertices.len() as u32 - 1
            });
        }
        if face[0] != face[1] && face[1] != face[2] && face[0] != face[2] {
            mesh.faces.push(face);
        }
    }
    mesh
}

/// Makes the winding consistent (see the module's doc). `value(p)`: the
/// field at world point `p` (interpolated); `eps`: a small world distance
/// (a quarter of a cell) to probe each side of a face.
pub fn orient(mesh: &mut Mesh, value: impl Fn([f32; 3]) -> f32, eps: f32) {
    let n = mesh.faces.len();
    // Undirected edge -> faces using it.
    let mut edges: HashMap<(u32, u32), Vec<usize>> = HashMap::new();
    for (f, face) in mesh.faces.iter().enumerate() {
        for c in 0..3 {
            let (a, b) = (face[c], face[(c + 1) % 3]);
            edges.entry((a.min(b), a.max(b))).or_default().push(f);
        }
    }
    let has_directed =
        |face: &[u32; 3], a: u32, b: u32| (0..3).any(|c| face[c] == a && face[(c + 1) % 3] == b);
    let mut seen = vec![false; n];
    for start in 0..n {
        if seen[start] {
            continue;
        }
        // Flood one connected piece, flipping neighbours to agree.
        seen[start] = true;
        let mut piece = vec![start];
        let mut next = 0;
        while next < piece.len() {
            let f = piece[next];
            next += 1;
            let face = mesh.faces[f];
            for c in 0..3 {
                let (a, b) = (face[c], face[(c + 1) % 3]);
                for &g in &edges[&(a.min(b), a.max(b))] {
                    if seen[g] {
                        continue;
                    }
                    seen[g] = true;
                    // Agreeing faces run a shared edge in opposite directions.
                    if has_directed(&mesh.faces[g], a, b) {
                        mesh.faces[g].swap(1, 2);
                    }
                    piece.push(g);
                }
            }
        }
        // Probe the field beside the piece's largest face.
        let normal = |face: &[u32; 3]| {
            let [p, q, r] = face.map(|i| mesh.vertices[i as usize]);
            let (e1, e2) = (sub(q, p), sub(r, p));
            let nrm = [
                e1[1] * e2[2] - e1[2] * e2[1],
                e1[2] * e2[0] - e1[0] * e2[2],
                e1[0] * e2[1] - e1[1] * e2[0],
            ];
            let centre = [0, 1, 2].map(|a| (p[a] + q[a] + r[a]) / 3.0);
            (nrm, centre)
        };
        let len = |v: [f32; 3]| (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt();
        let Some(&big) = piece.iter().max_by(|&&a, &&b| {
            len(normal(&mesh.faces[a]).0).total_cmp(&len(normal(&mesh.faces[b]).0))
        }) else {
            continue;
        };
        let (nrm, centre) = normal(&mesh.faces[big]);
        let l = len(nrm);
        if l == 0.0 || !l.is_finite() {
            continue;
        }
        let at = |s: f32| value([0, 1, 2].map(|a| centre[a] + s * eps * nrm[a] / l));
        // The normal must point towards lower values.
        if at(1.0) > at(-1.0) {
            for &f in &piece {
                mesh.faces[f].swap(1, 2);
            }
        }
    }
}

fn sub(a: [f32; 3], b: [f32; 3]) -> [f32; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

/// Binary little-endian PLY: `vertex` (x, y, z float) and `face`
/// (`vertex_indices`, a list of 3 uint32 counted by a uchar).
pub fn ply_bytes(mesh: &Mesh, comment: &str) -> Vec<u8> {
    let mut h = String::from("ply\nformat binary_little_endian 1.0\n");
    if !comment.is_empty() {
        h += &format!("comment {}\n", comment.replace('\n', " "));
    }
    h += &format!(
        "element vertex {}\nproperty float x\nproperty float y\nproperty float z\n",
        mesh.vertices.len()
    );
    h += &format!(
        "element face {}\nproperty list uchar uint vertex_indices\nend_header\n",
        mesh.faces.len()
    );
    let mut out = h.into_bytes();
    out.reserve(mesh.vertices.len() * 12 + mesh.faces.len() * 13);
    for v in &mesh.vertices {
        for c in v {
            out.extend(c.to_le_bytes());
        }
    }
    for f in &mesh.faces {
        out.push(3);
        for i in f {
            out.extend(i.to_le_bytes());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tri(p: [[f32; 3]; 3]) -> Vec<u32> {
        p.iter().flatten().map(|v| v.to_bits()).collect()
    }

    #[test]
    fn sorted_by_key_and_welded() {
        let a = [0.0, 0.0, 0.0];
        let b = [1.0, 0.0, 0.0];
        let c = [0.0, 1.0, 0.0];
        let d = [1.0, 1.0, 0.0];
        // Slot 0 holds the later key: it comes second.
        let mut tris = tri([b, d, c]);
        tris.extend(tri([a, b, c]));
        let m = from_triangles(&tris, &[7, 3], 2);
        assert_eq!(m.vertices, vec![a, b, c, d]);
        assert_eq!(m.faces, vec![[0, 1, 2], [1, 3, 2]]);
    }

    #[test]
    fn degenerate_triangles_are_dropped() {
        let a = [0.5, 0.0, 0.0];
        let tris = tri([a, a, [0.0, 1.0, 0.0]]);
        let m = from_triangles(&tris, &[0], 1);
        assert!(m.faces.is_empty());
    }

    /// The 8 faces of an octahedron around the origin, wound at random,
    /// come out all pointing out of a field that is high inside.
    #[test]
    fn orientation_agrees_and_points_to_lower_values() {
        let v = [
            [1.0, 0.0, 0.0],
            [-1.0, 0.0, 0.0],
            [0.0, 1.0, 0.0],
            [0.0, -1.0, 0.0],
            [0.0, 0.0, 1.0],
            [0.0, 0.0, -1.0],
        ];
        let mut faces = Vec::new();
        for (k, (x, y, z)) in [0, 1]
            .iter()
            .flat_map(|&x| [2, 3].map(move |y| (x, y)))
            .flat_map(|(x, y)| [4, 5].map(move |z| (x, y, z)))
            .enumerate()
        {
            faces.push(if k % 3 == 0 { [x, y, z] } else { [x, z, y] });
        }
        let mut m = Mesh {
            vertices: v.to_vec(),
            faces,
        };
        let inside_high = |p: [f32; 3]| 1.0 - (p[0].abs() + p[1].abs() + p[2].abs());
        orient(&mut m, inside_high, 0.01);
        for f in &m.faces {
            let [p, q, r] = f.map(|i| v[i as usize]);
            let (e1, e2) = (sub(q, p), sub(r, p));
            let n = [
                e1[1] * e2[2] - e1[2] * e2[1],
                e1[2] * e2[0] - e1[0] * e2[2],
                e1[0] * e2[1] - e1[1] * e2[0],
            ];
            let c: f32 = (0..3).map(|a| n[a] * (p[a] + q[a] + r[a])).sum();
            assert!(c > 0.0, "face {:?} points inwards", f);
        }
        // A field high outside turns them all around.
        orient(&mut m, |p| -inside_high(p), 0.01);
        let f = m.faces[0];
        let [p, q, r] = f.map(|i| v[i as usize]);
        let (e1, e2) = (sub(q, p), sub(r, p));
        let n = [
            e1[1] * e2[2] - e1[2] * e2[1],
            e1[2] * e2[0] - e1[0] * e2[2],
            e1[0] * e2[1] - e1[1] * e2[0],
        ];
        assert!((0..3).map(|a| n[a] * (p[a] + q[a] + r[a])).sum::<f32>() < 0.0);
    }

    #[test]
    fn ply_header_and_sizes() {
        let m = Mesh {
            vertices: vec![[0.0; 3], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]],
            faces: vec![[0, 1, 2]],
        };
        let b = ply_bytes(&m, "");
        let text = "ply\nformat binary_little_endian 1.0\nelement vertex 3\n\
                    property float x\nproperty float y\nproperty float z\n\
                    element face 1\nproperty list uchar uint vertex_indices\nend_header\n";
        assert_eq!(&b[..text.len()], text.as_bytes());
        assert_eq!(b.len(), text.len() + 3 * 12 + 13);
        assert_eq!(b[text.len() + 36], 3);
    }
}
