//! glTF 2.0 (`.gltf` JSON, `.glb` binary) through the `gltf` crate, with
//! neither its importer nor image decoding: the document is parsed and
//! validated by `gltf`, buffers are resolved here (a GLB's binary chunk, a
//! base64 `data:` URI, or a file beside the glTF file read through
//! [`crate::io::provided`]) and accessors are read here with every range
//! checked, so a damaged file is refused, never a panic.
//!
//! What is read: every primitive of mode TRIANGLES of every mesh that a
//! node of the default scene (else the first scene; with no scene, every
//! node without a parent) places, each instance once, **with the nodes'
//! transforms applied**: positions are in the scene's world space (a
//! transform that mirrors reverses the triangles' order so they stay
//! counter-clockwise seen from outside). Skins and morph targets are not
//! applied (the rest pose). Other primitive modes (points, lines, strips,
//! fans), sparse accessors and positions that are not float VEC3 are
//! refused.

use super::Mesh;
use ::gltf::accessor::{DataType, Dimensions};
use ::gltf::mesh::{Mode, Semantic};
use std::borrow::Cow;
use std::path::Path;

type Matrix = [[f64; 4]; 4];

const IDENTITY: Matrix = [
    [1.0, 0.0, 0.0, 0.0],
    [0.0, 1.0, 0.0, 0.0],
    [0.0, 0.0, 1.0, 0.0],
    [0.0, 0.0, 0.0, 1.0],
];

/// Column-major product `a * b` (glTF's matrices are column-major).
fn mul(a: &Matrix, b: &Matrix) -> Matrix {
    let mut m = [[0.0; 4]; 4];
    for (c, col) in m.iter_mut().enumerate() {
        for (r, v) in col.iter_mut().enumerate() {
            *v = (0..4).map(|k| a[k][r] * b[c][k]).sum();
        }
    }
    m
}

fn det3(m: &Matrix) -> f64 {
    m[0][0] * (m[1][1] * m[2][2] - m[2][1] * m[1][2])
        - m[1][0] * (m[0][1] * m[2][2] - m[2][1] * m[0][2])
        + m[2][0] * (m[0][1] * m[1][2] - m[1][1] * m[0][2])
}

/// The mesh in `bytes`; external buffers are looked for in `folder`. The
/// error is for the caller to name the file.
pub(super) fn parse(bytes: &[u8], folder: Option<&Path>) -> Result<Mesh, String> {
    let raw = ::gltf::Gltf::from_slice_without_validation(bytes).map_err(|e| e.to_string())?;
    let blob = raw.blob;
    let root = raw.document.into_json();
    // `gltf`'s validation (1.4) indexes the accessors by a primitive's
    // POSITION before it checks that index: checked here first.
    let positions =
        ::gltf::json::validation::Checked::Valid(::gltf::json::mesh::Semantic::Positions);
    for (i, m) in root.meshes.iter().enumerate() {
        for (j, p) in m.primitives.iter().enumerate() {
            if let Some(a) = p
                .attributes
                .get(&positions)
                .filter(|a| a.value() >= root.accessors.len())
            {
                return Err(format!(
                    "mesh {} primitive {}: POSITION is accessor {}, but there are {}",
                    i,
                    j,
                    a.value(),
                    root.accessors.len()
                ));
            }
        }
    }
    let doc = &::gltf::Document::from_json(root).map_err(|e| e.to_string())?;
    let mut buffers: Vec<Cow<[u8]>> = Vec::new();
    for b in doc.buffers() {
        let data: Cow<[u8]> = match b.source() {
            ::gltf::buffer::Source::Bin => blob
                .as_deref()
                .ok_or_else(|| {
                    format!(
                        "buffer {} has no uri and there is no GLB binary chunk",
                        b.index()
                    )
                })?
                .into(),
            ::gltf::buffer::Source::Uri(uri) => load_uri(uri, folder)?.into(),
        };
        if data.len() < b.length() {
            return Err(format!(
                "buffer {} has {} bytes, fewer than its byteLength {}",
                b.index(),
                data.len(),
                b.length()
            ));
        }
        buffers.push(data);
    }

    // Each node has at most one parent and a root none: then a walk from
    // the roots is a tree, visiting each node once (no cycle can be met).
    let mut parent = vec![None; doc.nodes().len()];
    for n in doc.nodes() {
        for c in n.children() {
            if let Some(p) = parent[c.index()].replace(n.index()) {
                return Err(format!(
                    "node {} is a child of both node {} and node {}",
                    c.index(),
                    p,
                    n.index()
                ));
            }
        }
    }
    let roots: Vec<::gltf::Node> = match doc.default_scene().or_else(|| doc.scenes().next()) {
        Some(scene) => scene.nodes().collect(),
        None => doc
            .nodes()
            .filter(|n| parent[n.index()].is_none())
            .collect(),
    };
    if let Some(r) = roots.iter().find(|r| parent[r.index()].is_some()) {
        return Err(format!("scene root node {} has a parent", r.index()));
    }

    let mut mesh = Mesh::default();
    let mut stack: Vec<(::gltf::Node, Matrix)> =
        roots.into_iter().rev().map(|n| (n, IDENTITY)).collect();
    let mut visits = 0usize;
    while let Some((node, above)) = stack.pop() {
        visits += 1;
        if visits > doc.nodes().len().max(1) * 64 {
            return Err("the scene lists its nodes too many times".into());
        }
        let local = node.transform().matrix().map(|c| c.map(|v| v as f64));
        let world = mul(&above, &local);
        if let Some(m) = node.mesh() {
            for p in m.primitives() {
                let name = format!(
                    "mesh {} ('{}') primitive {}",
                    m.index(),
                    m.name().unwrap_or(""),
                    p.index()
                );
                add_primitive(&mut mesh, &p, &world, &buffers)
                    .map_err(|e| format!("{}: {}", name, e))?;
            }
        }
        let children: Vec<_> = node.children().collect();
        stack.extend(children.into_iter().rev().map(|c| (c, world)));
    }
    Ok(mesh)
}

fn add_primitive(
    mesh: &mut Mesh,
    p: &::gltf::Primitive,
    world: &Matrix,
    buffers: &[Cow<[u8]>],
) -> Result<(), String> {
    if p.mode() != Mode::Triangles {
        return Err(format!("mode {:?} is not read (only TRIANGLES)", p.mode()));
    }
    let pos = p.get(&Semantic::Positions).ok_or("it has no POSITION")?;
    if pos.data_type() != DataType::F32 || pos.dimensions() != Dimensions::Vec3 {
        return Err(format!(
            "POSITION is {:?} {:?}, not float VEC3",
            pos.data_type(),
            pos.dimensions()
        ));
    }
    let (data, stride, count) = accessor_bytes(&pos, buffers)?;
    let base = mesh.positions.len();
    if (base + count) as u64 > super::MAX_ELEMENTS {
        return Err(format!("more than {} vertices", super::MAX_ELEMENTS));
    }
    let f = |b: &[u8], i: usize| {
        f32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]) as f64
    };
    for k in 0..count {
        let e = &data[k * stride..k * stride + 12];
        let v = [f(e, 0), f(e, 1), f(e, 2)];
        let w = |r: usize| {
            (world[0][r] * v[0] + world[1][r] * v[1] + world[2][r] * v[2] + world[3][r]) as f32
        };
        mesh.positions.push([w(0), w(1), w(2)]);
    }
    let indices: Vec<u32> = match p.indices() {
        None => (0..count as u32).collect(),
        Some(a) => {
            if a.dimensions() != Dimensions::Scalar {
                return Err(format!("indices are {:?}, not SCALAR", a.dimensions()));
            }
            let size = match a.data_type() {
                DataType::U8 => 1,
                DataType::U16 => 2,
                DataType::U32 => 4,
                t => return Err(format!("indices are {:?}, not an unsigned integer", t)),
            };
            let (data, stride, n) = accessor_bytes(&a, buffers)?;
            (0..n)
                .map(|k| {
                    let e = &data[k * stride..];
                    match size {
                        1 => e[0] as u32,
                        2 => u16::from_le_bytes([e[0], e[1]]) as u32,
                        _ => u32::from_le_bytes([e[0], e[1], e[2], e[3]]),
                    }
                })
                .collect()
        }
    };
    if !indices.len().is_multiple_of(3) {
        return Err(format!("{} indices are not whole triangles", indices.len()));
    }
    if let Some(&i) = indices.iter().find(|&&i| i as usize >= count) {
        return Err(format!("index {} is past its {} vertices", i, count));
    }
    let mirrored = det3(world) < 0.0;
    for t in indices.chunks_exact(3) {
        let t = t
            .iter()
            .map(|&i| (base + i as usize) as u32)
            .collect::<Vec<_>>();
        mesh.triangles.push(if mirrored {
            [t[0], t[2], t[1]]
        } else {
            [t[0], t[1], t[2]]
        });
    }
    Ok(())
}

/// An accessor's bytes, checked to hold all its elements: the slice (from
/// the first element), the stride between elements, and their count.
fn accessor_bytes<'b>(
    a: &::gltf::Accessor,
    buffers: &'b [Cow<[u8]>],
) -> Result<(&'b [u8], usize, usize), String> {
    if a.sparse().is_some() {
        return Err(format!("accessor {} is sparse (not read)", a.index()));
    }
    let view = a
        .view()
        .ok_or_else(|| format!("accessor {} has no bufferView", a.index()))?;
    let size = a.size();
    let stride = view.stride().unwrap_or(size);
    if stride < size {
        return Err(format!(
            "bufferView {} has a stride {} below the element's {} bytes",
            view.index(),
            stride,
            size
        ));
    }
    let count = a.count();
    if count == 0 {
        return Ok((&[], stride, 0));
    }
    let buffer = &buffers[view.buffer().index()];
    let short = || {
        format!(
            "accessor {} reaches past its bufferView or buffer",
            a.index()
        )
    };
    let view_end = view.offset().checked_add(view.length()).ok_or_else(short)?;
    let in_view = buffer.get(view.offset()..view_end).ok_or_else(short)?;
    let end = stride
        .checked_mul(count - 1)
        .and_then(|n| n.checked_add(size))
        .and_then(|n| n.checked_add(a.offset()))
        .ok_or_else(short)?;
    let data = in_view.get(a.offset()..end).ok_or_else(short)?;
    Ok((data, stride, count))
}

/// A buffer's bytes from its URI: base64 `data:` or a file in `folder`.
fn load_uri(uri: &str, folder: Option<&Path>) -> Result<Vec<u8>, String> {
    use base64::Engine;
    if let Some(data) = uri.strip_prefix("data:") {
        let (_, b64) = data
            .split_once(";base64,")
            .ok_or("a data: URI that is not base64 is not read")?;
        return base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|e| format!("buffer data URI: {}", e));
    }
    if uri.contains("://") || uri.starts_with('/') {
        return Err(format!(
            "buffer '{}': only files beside the glTF file are read",
            uri
        ));
    }
    let name = percent_decoded(uri).ok_or_else(|| format!("buffer URI '{}' is not valid", uri))?;
    let folder = folder.ok_or_else(|| {
        format!(
            "buffer '{}' is a file beside the glTF file, but no folder was given to find it",
            name
        )
    })?;
    let path = folder.join(&name);
    crate::io::provided::read(&path).map_err(|e| format!("buffer '{}': {}", path.display(), e))
}

/// A URI's `%XX` escapes decoded (glTF URIs are percent-encoded).
fn percent_decoded(uri: &str) -> Option<String> {
    let b = uri.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::super::{
        damaged_files_do_not_panic, parse, parse_in, read, Format, Mesh, MeshError,
    };
    use base64::Engine;
    use serde_json::{json, Value};
    use std::path::Path;

    /// A unit square: four float VEC3 positions, then six u16 indices.
    fn square_bin() -> Vec<u8> {
        let mut b: Vec<u8> = [
            [0f32, 0.0, 0.0],
            [1.0, 0.0, 0.0],
            [1.0, 1.0, 0.0],
            [0.0, 1.0, 0.0],
        ]
        .iter()
        .flatten()
        .flat_map(|c| c.to_le_bytes())
        .collect();
        b.extend([0u16, 1, 2, 0, 2, 3].iter().flat_map(|i| i.to_le_bytes()));
        b
    }

    /// The square's mesh placed twice by the scene: under a parent moved
    /// by x = 10 in a node scaled by 2, and mirrored in x. A third node,
    /// outside the scene, places it again (not read).
    fn document(uri: Option<&str>) -> Value {
        let mut buffer = json!({"byteLength": 60});
        if let Some(u) = uri {
            buffer["uri"] = json!(u);
        }
        json!({
            "asset": {"version": "2.0"},
            "scene": 0,
            "scenes": [{"nodes": [0, 2]}],
            "nodes": [
                {"translation": [10.0, 0.0, 0.0], "children": [1]},
                {"scale": [2.0, 2.0, 2.0], "mesh": 0},
                {"matrix": [-1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0], "mesh": 0},
                {"mesh": 0}
            ],
            "meshes": [{"name": "square", "primitives": [{"attributes": {"POSITION": 0}, "indices": 1, "mode": 4}]}],
            "accessors": [
                {"bufferView": 0, "componentType": 5126, "count": 4, "type": "VEC3",
                 "min": [0.0, 0.0, 0.0], "max": [1.0, 1.0, 0.0]},
                {"bufferView": 1, "componentType": 5123, "count": 6, "type": "SCALAR"}
            ],
            "bufferViews": [
                {"buffer": 0, "byteOffset": 0, "byteLength": 48},
                {"buffer": 0, "byteOffset": 48, "byteLength": 12}
            ],
            "buffers": [buffer]
        })
    }

    fn embedded() -> Vec<u8> {
        let b64 = base64::engine::general_purpose::STANDARD.encode(square_bin());
        let uri = format!("data:application/octet-stream;base64,{}", b64);
        serde_json::to_vec(&document(Some(&uri))).unwrap()
    }

    fn glb(doc: &Value, bin: &[u8]) -> Vec<u8> {
        let mut j = serde_json::to_vec(doc).unwrap();
        while !j.len().is_multiple_of(4) {
            j.push(b' ');
        }
        let mut bin = bin.to_vec();
        while !bin.len().is_multiple_of(4) {
            bin.push(0);
        }
        let mut b = b"glTF".to_vec();
        b.extend(2u32.to_le_bytes());
        b.extend((12 + 8 + j.len() as u32 + 8 + bin.len() as u32).to_le_bytes());
        b.extend((j.len() as u32).to_le_bytes());
        b.extend(0x4E4F_534Au32.to_le_bytes());
        b.extend(j);
        b.extend((bin.len() as u32).to_le_bytes());
        b.extend(0x004E_4942u32.to_le_bytes());
        b.extend(bin);
        b
    }

    fn gltf(bytes: &[u8]) -> Result<Mesh, MeshError> {
        parse(bytes, Format::Gltf, "t.gltf")
    }

    /// The scene's two instances in world space.
    fn is_placed_twice(m: &Mesh) {
        assert_eq!(m.positions.len(), 8);
        assert_eq!(
            m.positions[..4],
            [
                [10.0, 0.0, 0.0],
                [12.0, 0.0, 0.0],
                [12.0, 2.0, 0.0],
                [10.0, 2.0, 0.0]
            ]
        );
        assert_eq!(
            m.positions[4..],
            [
                [0.0, 0.0, 0.0],
                [-1.0, 0.0, 0.0],
                [-1.0, 1.0, 0.0],
                [0.0, 1.0, 0.0]
            ]
        );
        // The mirrored copy's triangles turn the other way round, so they
        // stay counter-clockwise seen from outside.
        assert_eq!(
            m.triangles,
            vec![[0, 1, 2], [0, 2, 3], [4, 6, 5], [4, 7, 6]]
        );
    }

    #[test]
    fn embedded_and_binary_files_give_the_scene_in_world_space() {
        is_placed_twice(&gltf(&embedded()).unwrap());
        is_placed_twice(
            &parse(&glb(&document(None), &square_bin()), Format::Gltf, "t.glb").unwrap(),
        );
    }

    #[test]
    fn external_buffers_are_read_beside_the_file() {
        let dir = std::env::temp_dir().join(format!("weft-gltf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("my square.bin"), square_bin()).unwrap();
        let text = serde_json::to_vec(&document(Some("my%20square.bin"))).unwrap();
        std::fs::write(dir.join("sq.gltf"), &text).unwrap();
        is_placed_twice(&read(&dir.join("sq.gltf")).unwrap());
        // Bytes alone cannot find the buffer; with the folder they can.
        let e = gltf(&text).unwrap_err().to_string();
        assert!(e.contains("no folder was given"), "{}", e);
        is_placed_twice(&parse_in(&text, Format::Gltf, "sq.gltf", Some(&dir)).unwrap());
        std::fs::remove_file(dir.join("my square.bin")).unwrap();
        let e = read(&dir.join("sq.gltf")).unwrap_err().to_string();
        assert!(e.contains("my square.bin"), "{}", e);
        let _ = std::fs::remove_dir_all(&dir);
        // Provided files (the web build's) are found the same way.
        crate::io::provided::provide("/provided/meshes/sq.bin", square_bin());
        let text = serde_json::to_vec(&document(Some("sq.bin"))).unwrap();
        crate::io::provided::provide("/provided/meshes/sq.gltf", text);
        is_placed_twice(&read(Path::new("/provided/meshes/sq.gltf")).unwrap());
    }

    #[test]
    fn other_modes_and_bad_accessors_are_refused_naming_the_file() {
        let err = |doc: &Value| {
            parse(&glb(doc, &square_bin()), Format::Gltf, "t.glb")
                .unwrap_err()
                .to_string()
        };
        let mut d = document(None);
        d["meshes"][0]["primitives"][0]["mode"] = json!(1);
        let e = err(&d);
        assert!(
            e.contains("'t.glb' is not a valid glTF file") && e.contains("Lines"),
            "{}",
            e
        );
        assert!(
            e.contains("only TRIANGLES") && e.contains("'square'"),
            "{}",
            e
        );
        let mut d = document(None);
        d["accessors"][0]["componentType"] = json!(5123);
        assert!(err(&d).contains("not float VEC3"), "{}", err(&d));
        let mut d = document(None);
        d["accessors"][1]["count"] = json!(60);
        assert!(err(&d).contains("reaches past"), "{}", err(&d));
        let mut d = document(None);
        d["accessors"][1]["count"] = json!(5);
        assert!(err(&d).contains("not whole triangles"), "{}", err(&d));
        let mut d = document(None);
        d["buffers"][0]["byteLength"] = json!(600);
        assert!(err(&d).contains("fewer than its byteLength"), "{}", err(&d));
        let mut d = document(None);
        d["nodes"][1]["children"] = json!([0]);
        assert!(err(&d).contains("has a parent"), "{}", err(&d));
        let mut d = document(None);
        d["scenes"][0]["nodes"] = json!([]);
        assert!(matches!(
            parse(&glb(&d, &square_bin()), Format::Gltf, "t.glb"),
            Err(MeshError::Empty { .. })
        ));
        let mut bad_index = square_bin();
        bad_index[48] = 9;
        let e = parse(&glb(&document(None), &bad_index), Format::Gltf, "t.glb").unwrap_err();
        assert!(
            e.to_string().contains("index 9 is past its 4 vertices"),
            "{}",
            e
        );
        assert!(gltf(b"{\"asset\": 3}").is_err());
        assert!(gltf(b"glTF\x02\0\0\0").is_err());
    }

    #[test]
    fn without_a_scene_every_root_node_is_read() {
        let mut d = document(None);
        d.as_object_mut().unwrap().remove("scene");
        d.as_object_mut().unwrap().remove("scenes");
        let m = parse(&glb(&d, &square_bin()), Format::Gltf, "t.glb").unwrap();
        assert_eq!(m.triangles.len(), 6);
    }

    #[test]
    fn damaged_gltf_files_do_not_panic() {
        damaged_files_do_not_panic(&glb(&document(None), &square_bin()), Format::Gltf);
        damaged_files_do_not_panic(&embedded(), Format::Gltf);
    }
}
