//! Stanford PLY (ASCII, binary little and big endian) through
//! `ply-rs-bw`: the `vertex` element's `x`, `y`, `z` (float or double) and
//! the `face` element's `vertex_indices` (or `vertex_index`) lists of any
//! integer type, each polygon fanned into triangles from its first vertex.
//! Other elements (edges, materials, ...) and other properties (normals,
//! colours) are read past; faces of fewer than three vertices are left out.

use super::Mesh;
use ply_rs_bw::parser::{Parser, Reader};
use ply_rs_bw::ply::{Property, PropertyAccess, PropertyAccessResult, PropertyType, ScalarType};

/// One vertex's position as read.
#[derive(Clone, Copy, Default)]
struct Vertex([f64; 3]);

impl PropertyAccess for Vertex {
    fn new() -> Self {
        Vertex::default()
    }
    fn set_property(&mut self, name: &str, property: Property) -> PropertyAccessResult {
        let axis = match name {
            "x" => 0,
            "y" => 1,
            "z" => 2,
            _ => return PropertyAccessResult::Ignored,
        };
        self.0[axis] = match property {
            Property::Float(v) => v as f64,
            Property::Double(v) => v,
            _ => return PropertyAccessResult::UnsupportedType,
        };
        PropertyAccessResult::Set
    }
}

/// One face's vertex indices as read; `None` for a negative index.
#[derive(Default)]
struct Face(Option<Vec<u32>>);

impl PropertyAccess for Face {
    fn new() -> Self {
        Face(Some(Vec::new()))
    }
    fn set_property(&mut self, name: &str, property: Property) -> PropertyAccessResult {
        if name != "vertex_indices" && name != "vertex_index" {
            return PropertyAccessResult::Ignored;
        }
        fn signed<T: Copy + TryInto<u32>>(v: &[T]) -> Option<Vec<u32>> {
            v.iter().map(|&i| i.try_into().ok()).collect()
        }
        self.0 = match property {
            Property::ListChar(v) => signed(&v),
            Property::ListUChar(v) => signed(&v),
            Property::ListShort(v) => signed(&v),
            Property::ListUShort(v) => signed(&v),
            Property::ListInt(v) => signed(&v),
            Property::ListUInt(v) => Some(v),
            _ => return PropertyAccessResult::UnsupportedType,
        };
        PropertyAccessResult::Set
    }
}

/// Any element this reader does not use: read past, nothing kept.
struct Skip;

impl PropertyAccess for Skip {
    fn new() -> Self {
        Skip
    }
}

fn is_int(t: &ScalarType) -> bool {
    !matches!(t, ScalarType::Float | ScalarType::Double)
}

/// The mesh in `bytes`; the error is for the caller to name the file.
pub(super) fn parse(bytes: &[u8]) -> Result<Mesh, String> {
    let mut reader = Reader::new(bytes);
    let header = Parser::<Skip>::new()
        .read_header(&mut reader)
        .map_err(|e| e.to_string())?;
    // A count the file cannot hold is refused before it is looped over
    // (an element of no properties reads no bytes).
    if let Some(e) = header
        .elements
        .values()
        .find(|e| e.count as u64 > super::MAX_ELEMENTS)
    {
        return Err(format!(
            "element '{}' has {} entries (at most {})",
            e.name,
            e.count,
            super::MAX_ELEMENTS
        ));
    }
    // What the two elements must declare, before any payload is read.
    let vertex = header
        .elements
        .values()
        .find(|e| e.name == "vertex")
        .ok_or("there is no 'vertex' element")?;
    for axis in ["x", "y", "z"] {
        match vertex.properties.get(axis).map(|p| &p.data_type) {
            Some(PropertyType::Scalar(ScalarType::Float | ScalarType::Double)) => {}
            Some(t) => {
                return Err(format!(
                    "vertex property '{}' is {:?}, not float or double",
                    axis, t
                ))
            }
            None => return Err(format!("the 'vertex' element has no '{}'", axis)),
        }
    }
    if let Some(face) = header.elements.values().find(|e| e.name == "face") {
        let list = ["vertex_indices", "vertex_index"]
            .iter()
            .find_map(|n| face.properties.get(*n))
            .ok_or("the 'face' element has no 'vertex_indices' list")?;
        match &list.data_type {
            PropertyType::List(count, index) if is_int(count) && is_int(index) => {}
            t => {
                return Err(format!(
                    "face property '{}' is {:?}, not a list of integers",
                    list.name, t
                ))
            }
        }
    }
    let mut mesh = Mesh::default();
    for element in header.elements.values() {
        match element.name.as_str() {
            "vertex" => {
                let vs = Parser::<Vertex>::new()
                    .read_payload_for_element(&mut reader, element, &header)
                    .map_err(|e| e.to_string())?;
                mesh.positions = vs.iter().map(|v| v.0.map(|c| c as f32)).collect::<Vec<_>>();
            }
            "face" => {
                let fs = Parser::<Face>::new()
                    .read_payload_for_element(&mut reader, element, &header)
                    .map_err(|e| e.to_string())?;
                for (n, f) in fs.iter().enumerate() {
                    let f =
                        f.0.as_ref()
                            .ok_or_else(|| format!("face {} has a negative vertex index", n))?;
                    for i in 2..f.len() {
                        mesh.triangles.push([f[0], f[i - 1], f[i]]);
                    }
                }
            }
            _ => {
                Parser::<Skip>::new()
                    .read_payload_for_element(&mut reader, element, &header)
                    .map_err(|e| e.to_string())?;
            }
        }
    }
    Ok(mesh)
}

#[cfg(test)]
mod tests {
    use super::super::{damaged_files_do_not_panic, parse, Format, Mesh, MeshError};

    fn ply(bytes: &[u8]) -> Result<Mesh, MeshError> {
        parse(bytes, Format::Ply, "t.ply")
    }

    const ASCII: &str = "ply\nformat ascii 1.0\ncomment by hand\n\
        element vertex 5\nproperty float x\nproperty float y\nproperty float z\n\
        property uchar red\n\
        element face 2\nproperty list uchar int vertex_indices\n\
        element edge 1\nproperty int vertex1\nproperty int vertex2\n\
        end_header\n\
        0 0 0 1\n1 0 0 2\n1 1 0 3\n0 1 0 4\n0.5 0.5 2.5 5\n\
        4 0 1 2 3\n3 0 1 4\n\
        0 1\n";

    /// A binary PLY: doubles, the face list as `vertex_index` with a
    /// ushort count and uint indices, a normal beside each position.
    fn binary(big: bool, faces: &[&[u32]]) -> Vec<u8> {
        let pts = [
            [0.0f64, 0.0, 0.0],
            [2.0, 0.0, 0.0],
            [2.0, 2.0, 0.0],
            [0.0, 2.0, -1.5],
        ];
        let mut b = format!(
            "ply\nformat binary_{}_endian 1.0\nelement vertex 4\n\
             property double x\nproperty double y\nproperty double z\nproperty float nx\n\
             element face {}\nproperty list ushort uint vertex_index\nend_header\n",
            if big { "big" } else { "little" },
            faces.len()
        )
        .into_bytes();
        for p in pts {
            for c in p {
                b.extend(if big {
                    c.to_be_bytes()
                } else {
                    c.to_le_bytes()
                });
            }
            b.extend(if big {
                1f32.to_be_bytes()
            } else {
                1f32.to_le_bytes()
            });
        }
        for f in faces {
            let n = f.len() as u16;
            b.extend(if big {
                n.to_be_bytes()
            } else {
                n.to_le_bytes()
            });
            for &i in *f {
                b.extend(if big {
                    i.to_be_bytes()
                } else {
                    i.to_le_bytes()
                });
            }
        }
        b
    }

    #[test]
    fn an_ascii_file_gives_its_fanned_polygons_and_skips_other_elements() {
        let m = ply(ASCII.as_bytes()).unwrap();
        assert_eq!(m.positions.len(), 5);
        assert_eq!(m.positions[4], [0.5, 0.5, 2.5]);
        assert_eq!(m.triangles, vec![[0, 1, 2], [0, 2, 3], [0, 1, 4]]);
    }

    #[test]
    fn binary_files_of_either_byte_order_read_the_same() {
        let faces: &[&[u32]] = &[&[0, 1, 2, 3], &[3, 2, 1]];
        for big in [false, true] {
            let m = ply(&binary(big, faces)).unwrap();
            assert_eq!(m.positions[3], [0.0, 2.0, -1.5], "big endian: {}", big);
            assert_eq!(m.triangles, vec![[0, 1, 2], [0, 2, 3], [3, 2, 1]]);
        }
    }

    #[test]
    fn faces_of_any_integer_list_type_are_read() {
        for (count, index) in [
            ("uchar", "uchar"),
            ("int", "short"),
            ("uint", "ushort"),
            ("char", "int"),
        ] {
            let text = format!(
                "ply\nformat ascii 1.0\nelement vertex 3\nproperty double x\nproperty double y\n\
                 property double z\nelement face 1\nproperty list {} {} vertex_index\nend_header\n\
                 0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n",
                count, index
            );
            let m = ply(text.as_bytes()).unwrap();
            assert_eq!(m.triangles, vec![[0, 1, 2]], "{} {}", count, index);
        }
    }

    #[test]
    fn wrong_types_missing_parts_and_damage_are_errors_naming_the_file() {
        let header = |x: &str, list: &str, faces: usize| {
            format!(
                "ply\nformat ascii 1.0\nelement vertex 3\nproperty {} x\nproperty float y\n\
                 property float z\nelement face {}\nproperty {} vertex_indices\nend_header\n\
                 0 0 0\n1 0 0\n0 1 0\n{}",
                x,
                faces,
                list,
                if faces > 0 { "3 0 1 2\n" } else { "" }
            )
        };
        let msg = |b: &[u8]| ply(b).unwrap_err().to_string();
        let e = msg(header("int", "list uchar int", 1).as_bytes());
        assert!(
            e.contains("'t.ply'") && e.contains("not float or double"),
            "{}",
            e
        );
        let e = msg(header("float", "list uchar float", 1).as_bytes());
        assert!(e.contains("not a list of integers"), "{}", e);
        let e = msg(header("float", "int", 1).as_bytes());
        assert!(e.contains("not a list of integers"), "{}", e);
        assert!(matches!(
            ply(header("float", "list uchar int", 0).as_bytes()),
            Err(MeshError::Empty { .. })
        ));
        // No face element at all: a point cloud, no triangles.
        let points =
            "ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty float y\n\
                      property float z\nend_header\n0 0 0\n";
        assert!(matches!(
            ply(points.as_bytes()),
            Err(MeshError::Empty { .. })
        ));
        let e = msg(b"ply\nformat ascii 1.0\nelement face 0\nproperty list uchar int vertex_indices\nend_header\n");
        assert!(e.contains("no 'vertex' element"), "{}", e);
        let e = msg(b"not a ply file");
        assert!(e.contains("not a valid PLY file"), "{}", e);
        // Truncated in the payload, and an index past the vertices.
        let full = binary(false, &[&[0, 1, 2]]);
        let e = msg(&full[..full.len() - 3]);
        assert!(e.contains("not a valid PLY file"), "{}", e);
        assert!(matches!(
            ply(&binary(true, &[&[0, 1, 7]])),
            Err(MeshError::BadIndex { index: 7, .. })
        ));
        let neg = header("float", "list uchar int", 0) + "3 0 -1 2\n";
        let neg = neg.replace("element face 0", "element face 1");
        assert!(
            msg(neg.as_bytes()).contains("negative"),
            "{}",
            msg(neg.as_bytes())
        );
        let huge = "ply\nformat binary_little_endian 1.0\nelement junk 4000000000\nend_header\n";
        assert!(
            msg(huge.as_bytes()).contains("at most"),
            "{}",
            msg(huge.as_bytes())
        );
    }

    #[test]
    fn damaged_ply_files_do_not_panic() {
        damaged_files_do_not_panic(ASCII.as_bytes(), Format::Ply);
        damaged_files_do_not_panic(&binary(false, &[&[0, 1, 2, 3], &[3, 2, 1]]), Format::Ply);
        damaged_files_do_not_panic(&binary(true, &[&[0, 1, 2, 3]]), Format::Ply);
    }
}
