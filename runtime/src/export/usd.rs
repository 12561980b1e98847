//! Text USD (`.usda`) stages: a `UsdGeomPoints` prim with per-frame time
//! samples of `points`, `extent` and primvars (constant `widths`), or a
//! `UsdVolVolume` whose `OpenVDBAsset` field's `filePath` is time-sampled to
//! per-frame `.vdb` files, or a `UsdGeomMesh` (a `surface` view's
//! iso-surface) whose points and topology are time-sampled (the topology
//! changes from frame to frame). Time code = frame number; Y up; 1 unit =
//! 1 metre.

use super::mesh::Mesh;
use super::ply::{Attribute, Kind};
use std::fmt::Write;

/// One frame of a point cloud.
pub struct PointsFrame {
    pub frame: i32,
    pub points: Vec<[f32; 3]>,
    pub primvars: Vec<Attribute>,
}

/// A valid prim name: letters, digits and `_`, not starting with a digit.
pub fn prim_name(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    s
}

/// A float as USD's text format reads it back to the same f32.
fn num(v: f32) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        // Debug: the shortest text that reads back to the same f32.
        format!("{:?}", v)
    }
}

fn tuple(vals: &[f32]) -> String {
    let v: Vec<String> = vals.iter().map(|&x| num(x)).collect();
    format!("({})", v.join(", "))
}

fn header(s: &mut String, default_prim: &str, first: i32, last: i32, fps: f64, doc: &str) {
    let _ = write!(
        s,
        "#usda 1.0\n(\n    defaultPrim = \"{}\"\n    doc = \"{}\"\n    startTimeCode = {}\n    endTimeCode = {}\n    \
         timeCodesPerSecond = {}\n    framesPerSecond = {}\n    upAxis = \"Y\"\n    metersPerUnit = 1\n)\n\n",
        default_prim,
        doc.replace('"', "'"),
        first,
        last,
        fps,
        fps
    );
}

/// The USD type of an attribute's array, `None` where USD has none (a
/// vector of u32).
pub fn usd_type(kind: Kind, components: usize) -> Option<String> {
    Some(match (kind, components) {
        (Kind::Float, 1) => "float[]".into(),
        (Kind::Int, 1) => "int[]".into(),
        (Kind::Uint, 1) => "uint[]".into(),
        (Kind::Float, n @ 2..=4) => format!("float{}[]", n),
        (Kind::Int, n @ 2..=4) => format!("int{}[]", n),
        _ => return None,
    })
}

fn values(a: &Attribute, out: &mut String) {
    out.push('[');
    for (i, e) in a.words.chunks(a.components.max(1)).enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let one = |w: u32| match a.kind {
            Kind::Float => num(f32::from_bits(w)),
            Kind::Int => (w as i32).to_string(),
            Kind::Uint => w.to_string(),
        };
        if a.components == 1 {
            out.push_str(&one(e[0]));
        } else {
            let v: Vec<String> = e.iter().map(|&w| one(w)).collect();
            let _ = write!(out, "({})", v.join(", "));
        }
    }
    out.push(']');
}

/// A stage with one `Points` prim named `prim` holding every frame.
/// Every frame must list the same primvars in the same order.
pub fn points_stage(prim: &str, width: f32, fps: f64, frames: &[PointsFrame], doc: &str) -> String {
    let prim = prim_name(prim);
    let mut s = String::new();
    let first = frames.first().map_or(0, |f| f.frame);
    let last = frames.last().map_or(0, |f| f.frame);
    header(&mut s, &prim, first, last, fps, doc);
    let _ = writeln!(s, "def Points \"{}\"\n{{", prim);
    let _ = writeln!(
        s,
        "    float[] widths = [{}] (\n        interpolation = \"constant\"\n    )",
        num(width)
    );
    s.push_str("    point3f[] points.timeSamples = {\n");
    for f in frames {
        let _ = write!(s, "        {}: [", f.frame);
        for (i, p) in f.points.iter().enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            s.push_str(&tuple(p));
        }
        s.push_str("],\n");
    }
    s.push_str("    }\n    float3[] extent.timeSamples = {\n");
    for f in frames {
        let (mut lo, mut hi) = ([f32::INFINITY; 3], [f32::NEG_INFINITY; 3]);
        for p in f.points.iter().filter(|p| p.iter().all(|c| c.is_finite())) {
            for c in 0..3 {
                lo[c] = lo[c].min(p[c] - width / 2.0);
                hi[c] = hi[c].max(p[c] + width / 2.0);
            }
        }
        if lo[0] > hi[0] {
            (lo, hi) = ([0.0; 3], [0.0; 3]);
        }
        let _ = writeln!(s, "        {}: [{}, {}],", f.frame, tuple(&lo), tuple(&hi));
    }
    s.push_str("    }\n");
    let names: Vec<&Attribute> = frames
        .first()
        .map(|f| f.primvars.iter().collect())
        .unwrap_or_default();
    for (k, a) in names.iter().enumerate() {
        let Some(ty) = usd_type(a.kind, a.components) else {
            continue;
        };
        let name = prim_name(&a.name);
        let _ = writeln!(
            s,
            "    {} primvars:{} (\n        interpolation = \"vertex\"\n    )\n    {} primvars:{}.timeSamples = {{",
            ty, name, ty, name
        );
        for f in frames {
            let _ = write!(s, "        {}: ", f.frame);
            values(&f.primvars[k], &mut s);
            s.push_str(",\n");
        }
        s.push_str("    }\n");
    }
    s.push_str("}\n");
    s
}

/// A stage with one `Volume` prim named `prim` whose `OpenVDBAsset` field
/// (grid `grid`) reads `files[i].1` (a path relative to the .usda) at
/// frame `files[i].0`. `extent`: the volume's world box.
pub fn volume_stage(
    prim: &str,
    grid: &str,
    fps: f64,
    extent: [[f64; 3]; 2],
    files: &[(i32, String)],
    doc: &str,
) -> String {
    let prim = prim_name(prim);
    let mut s = String::new();
    let first = files.first().map_or(0, |f| f.0);
    let last = files.last().map_or(0, |f| f.0);
    header(&mut s, &prim, first, last, fps, doc);
    let e = |v: [f64; 3]| format!("({}, {}, {})", v[0], v[1], v[2]);
    let _ = write!(
        s,
        "def Volume \"{p}\"\n{{\n    float3[] extent = [{lo}, {hi}]\n    rel field:{g} = </{p}/{g}>\n\n    \
         def OpenVDBAsset \"{g}\"\n    {{\n        token fieldName = \"{name}\"\n        asset filePath.timeSamples = {{\n",
        p = prim,
        g = prim_name(grid),
        name = grid,
        lo = e(extent[0]),
        hi = e(extent[1]),
    );
    for (frame, path) in files {
        let _ = writeln!(s, "            {}: @{}@,", frame, path);
    }
    s.push_str("        }\n    }\n}\n");
    s
}

/// One frame of a mesh.
pub struct MeshFrame {
    pub frame: i32,
    pub mesh: Mesh,
}

/// A stage with one `Mesh` prim named `prim` holding every frame
/// (triangles wound counter-clockwise, right-handed; no subdivision).
pub fn mesh_stage(prim: &str, fps: f64, frames: &[MeshFrame], doc: &str) -> String {
    let prim = prim_name(prim);
    let mut s = String::new();
    let first = frames.first().map_or(0, |f| f.frame);
    let last = frames.last().map_or(0, |f| f.frame);
    header(&mut s, &prim, first, last, fps, doc);
    let _ = writeln!(
        s,
        "def Mesh \"{}\"\n{{\n    uniform token subdivisionScheme = \"none\"\n    uniform token orientation = \"rightHanded\"",
        prim
    );
    s.push_str("    point3f[] points.timeSamples = {\n");
    for f in frames {
        let _ = write!(s, "        {}: [", f.frame);
        for (i, p) in f.mesh.vertices.iter().enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            s.push_str(&tuple(p));
        }
        s.push_str("],\n");
    }
    s.push_str("    }\n    int[] faceVertexCounts.timeSamples = {\n");
    for f in frames {
        let threes = vec!["3"; f.mesh.faces.len()];
        let _ = writeln!(s, "        {}: [{}],", f.frame, threes.join(", "));
    }
    s.push_str("    }\n    int[] faceVertexIndices.timeSamples = {\n");
    for f in frames {
        let idx: Vec<String> = f
            .mesh
            .faces
            .iter()
            .flatten()
            .map(|i| i.to_string())
            .collect();
        let _ = writeln!(s, "        {}: [{}],", f.frame, idx.join(", "));
    }
    s.push_str("    }\n    float3[] extent.timeSamples = {\n");
    for f in frames {
        let (mut lo, mut hi) = ([f32::INFINITY; 3], [f32::NEG_INFINITY; 3]);
        for p in &f.mesh.vertices {
            for c in 0..3 {
                lo[c] = lo[c].min(p[c]);
                hi[c] = hi[c].max(p[c]);
            }
        }
        if lo[0] > hi[0] {
            (lo, hi) = ([0.0; 3], [0.0; 3]);
        }
        let _ = writeln!(s, "        {}: [{}, {}],", f.frame, tuple(&lo), tuple(&hi));
    }
    s.push_str("    }\n}\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_read_back_exactly() {
        for v in [0.1f32, 1.0 / 3.0, 1e-30, 3.4e38, -0.0, f32::MIN_POSITIVE] {
            assert_eq!(num(v).parse::<f32>().unwrap().to_bits(), v.to_bits());
        }
        assert_eq!(num(f32::NAN), "nan");
    }

    #[test]
    fn prim_names_are_identifiers() {
        assert_eq!(prim_name("grid-v"), "grid_v");
        assert_eq!(prim_name("3d"), "_3d");
    }
}
