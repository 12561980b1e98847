//! More of `weft run --export`: a `surface` view's iso-surface as a mesh
//! (read back by plyfile, usd-core and Blender, checked against the
//! analytic sphere it approximates), views standing for their fields, and
//! VDB compression (read back by OpenVDB).

use super::{python_ok, python_with, text, tmp, weft};
use serde_json::json;

/// A 32³ field `0.35 - |p - c|` (positive inside a sphere of radius 0.35
/// around the centre of the unit box) and a surface view of it at level 0.
fn sphere_graph() -> serde_json::Value {
    let code = "fn kernel(i: i32, j: i32, k: i32) {
    let p = vec3((i as f32 + 0.5) / 32.0, (j as f32 + 0.5) / 32.0, (k as f32 + 0.5) / 32.0);
    let d = p - vec3(0.5, 0.5, 0.5);
    s[(i, j, k)] = 0.35 - sqrt(dot(d, d));
}";
    json!({
        "format": "weft-graph", "version": 1,
        "nodes": [
            {"id": "grid", "kind": "dense", "params": {"shape": [32, 32, 32]}, "pos": [0, 0]},
            {"id": "s", "kind": "field", "params": {"type": "f32"}, "pos": [300, 0]},
            {"id": "tick", "kind": "on_frame", "pos": [600, 0]},
            {"id": "fill", "kind": "kernel", "params": {"over": "s", "code": code}, "pos": [900, 0]},
            {"id": "surf", "kind": "surface", "params": {"level": 0.0, "width": 64, "height": 64,
                "domain": [0, 0, 0, 1, 1, 1]}, "pos": [1200, 0]}
        ],
        "wires": [
            {"from": "grid.cells", "to": "s.layout"},
            {"from": "s.field", "to": "fill.s"},
            {"from": "s.field", "to": "surf.field"}
        ],
        "exec": [{"from": "tick.then", "to": "fill"}]
    })
}

fn export(dir: &std::path::Path, backend: &str, extra: &[&str]) -> std::process::Output {
    let graph = dir.join("sphere.json");
    std::fs::write(&graph, serde_json::to_string(&sphere_graph()).unwrap()).unwrap();
    let out = dir.join(backend);
    let mut args = vec![
        "run",
        graph.to_str().unwrap(),
        "--frames",
        "2",
        "--no-frames",
        "--backend",
        backend,
        "--out",
        out.to_str().unwrap(),
        "--export",
        "surf=ply",
        "--export",
        "surf=usd",
    ];
    args.extend_from_slice(extra);
    weft(&args)
}

/// The mesh is the same on vm and cpu (sorted by the triangles' keys,
/// welded by bits), closed, wound outwards, and its volume and radius are
/// those of the sphere; plyfile and usd-core read the same mesh.
#[test]
fn a_surface_view_exports_as_a_closed_outward_mesh() {
    let dir = tmp("export_mesh");
    for backend in ["vm", "cpu"] {
        let o = export(&dir, backend, &[]);
        assert_eq!(o.status.code(), Some(0), "{backend}: {}", text(&o));
    }
    let read = |b: &str, f: &str| std::fs::read(dir.join(b).join(f)).expect("an exported file");
    assert_eq!(
        read("vm", "surf_0002.ply"),
        read("cpu", "surf_0002.ply"),
        "vm and cpu export the same mesh"
    );
    assert!(dir.join("cpu/surf.usda").exists());
    let Some(py) = python_with("plyfile, numpy") else {
        return;
    };
    let script = r#"
import sys, math, numpy as np
from plyfile import PlyData
d = sys.argv[1]
ply = PlyData.read(d + "/surf_0002.ply")
v = np.stack([ply["vertex"][a] for a in "xyz"], axis=1).astype(np.float64)
f = np.stack(ply["face"]["vertex_indices"]).astype(np.int64)
assert f.shape[1] == 3 and len(f) > 1000, f.shape
assert f.min() >= 0 and f.max() < len(v)
# Closed and consistently wound: every directed edge once, its reverse once.
e = np.concatenate([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]])
de = set(map(tuple, e))
assert len(de) == len(e), "a directed edge twice: faces disagree"
assert all((b, a) in de for a, b in de), "an open edge"
# Radius: linear interpolation of |p - c| along cell edges is exact to
# h^2 / (8 r) on axis edges; diagonals a few times that.
r = np.linalg.norm(v - 0.5, axis=1)
assert abs(r - 0.35).max() < 0.003, abs(r - 0.35).max()
# Volume (divergence theorem): positive = wound outwards, near 4/3 pi r^3.
a, b, c = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]
vol = np.einsum("ij,ij->i", a, np.cross(b, c)).sum() / 6
exact = 4 / 3 * math.pi * 0.35 ** 3
assert abs(vol / exact - 1) < 0.01, (vol, exact)
np.save(d + "/ply_v.npy", v); np.save(d + "/ply_f.npy", f)
print("mesh ok", len(v), "vertices", len(f), "faces, volume", vol, "of", exact)
"#;
    python_ok(py, script, &[dir.join("cpu").to_str().unwrap()]);
    let Some(py) = python_with("pxr, numpy") else {
        return;
    };
    let script = r#"
import sys, numpy as np
from pxr import Usd, UsdGeom
d = sys.argv[1]
stage = Usd.Stage.Open(d + "/surf.usda")
mesh = UsdGeom.Mesh(stage.GetPrimAtPath("/surf"))
assert mesh, "no Mesh prim /surf"
assert stage.GetStartTimeCode() == 1 and stage.GetEndTimeCode() == 2
v = np.array(mesh.GetPointsAttr().Get(2), dtype=np.float64)
idx = np.array(mesh.GetFaceVertexIndicesAttr().Get(2)).reshape(-1, 3)
counts = np.array(mesh.GetFaceVertexCountsAttr().Get(2))
assert (counts == 3).all() and len(counts) == len(idx)
assert np.array_equal(v, np.load(d + "/ply_v.npy")), "USD points differ from the PLY's"
assert np.array_equal(idx, np.load(d + "/ply_f.npy")), "USD faces differ from the PLY's"
assert mesh.GetOrientationAttr().Get() == "rightHanded"
ext = np.array(mesh.GetExtentAttr().Get(2))
assert np.allclose(ext, [v.min(0), v.max(0)])
print("usd mesh ok", len(v))
"#;
    python_ok(py, script, &[dir.join("cpu").to_str().unwrap()]);
    // Blender's own PLY importer: the same counts, every edge manifold,
    // every face's normal (Blender computes it from the winding) outwards.
    let Some(py) = python_with("bpy, bmesh") else {
        return;
    };
    let script = r#"
import sys, bpy, bmesh
from mathutils import Vector
d = sys.argv[1]
bpy.ops.wm.read_factory_settings(use_empty=True)
bpy.ops.wm.ply_import(filepath=d + "/surf_0002.ply")
(obj,) = bpy.data.objects
me = obj.data
import numpy as np
v = np.load(d + "/ply_v.npy"); f = np.load(d + "/ply_f.npy")
assert len(me.vertices) == len(v) and len(me.polygons) == len(f), (len(me.vertices), len(me.polygons))
bm = bmesh.new(); bm.from_mesh(me)
assert all(e.is_manifold for e in bm.edges), "Blender finds non-manifold edges"
c = Vector((0.5, 0.5, 0.5))
bad = [p.index for p in me.polygons if p.normal.dot(p.center - c) <= 0]
assert not bad, "%d faces point inwards in Blender" % len(bad)
print("blender mesh ok", len(me.vertices), len(me.polygons))
"#;
    python_ok(py, script, &[dir.join("cpu").to_str().unwrap()]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A full triangle buffer is an error naming the view, not a holed mesh;
/// a picture view and `vdb` of a surface are refused with the way out.
#[test]
fn surface_export_refuses_what_it_cannot_write_whole() {
    let dir = tmp("export_mesh_bad");
    let o = export(&dir, "cpu", &["--set", "surf.max_triangles=100"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("node 'surf'") && text(&o).contains("raise max_triangles"),
        "{}",
        text(&o)
    );
    assert!(!dir.join("cpu/surf_0001.ply").exists(), "no partial mesh");
    let graph = dir.join("sphere.json");
    for (spec, msg) in [
        ("surf=vdb", "a surface view exports as a mesh (ply or usd); the field it shows, 's', exports as vdb"),
        ("surf,s=ply", "a surface view's mesh takes no attributes"),
    ] {
        let o = weft(&[
            "run",
            graph.to_str().unwrap(),
            "--frames",
            "1",
            "--no-frames",
            "--backend",
            "vm",
            "--out",
            dir.to_str().unwrap(),
            "--export",
            spec,
        ]);
        assert_eq!(o.status.code(), Some(2), "{spec}: {}", text(&o));
        assert!(text(&o).contains(msg), "{spec}: {}", text(&o));
    }
    let o = weft(&[
        "run",
        "graphs/mpm3d.json",
        "--frames",
        "1",
        "--no-frames",
        "--backend",
        "vm",
        "--out",
        dir.to_str().unwrap(),
        "--export",
        "speeds=ply",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("view 'speeds' draws a 2-D picture"),
        "{}",
        text(&o)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A particles view exports as the positions it draws: the same PLY as
/// naming its position field.
#[test]
fn a_particles_view_exports_its_positions() {
    let dir = tmp("export_view_points");
    let d = dir.to_str().unwrap();
    let o = weft(&[
        "run",
        "graphs/mpm3d.json",
        "--frames",
        "1",
        "--no-frames",
        "--backend",
        "cpu",
        "--out",
        d,
        "--export",
        "view3d=ply",
        "--export",
        "x=ply",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let a = std::fs::read(dir.join("view3d_0001.ply")).unwrap();
    let b = std::fs::read(dir.join("x_0001.ply")).unwrap();
    assert!(a.len() > 8192 * 12);
    assert_eq!(a, b, "the view's export is its position field's");
    let _ = std::fs::remove_dir_all(&dir);
}

/// smoke3d's density as a zipped VDB (the default) and a raw one: OpenVDB
/// reads the same grid from both, the same as `--dump`, and zip is smaller.
#[test]
fn zipped_and_raw_vdbs_hold_the_same_grid() {
    let dir = tmp("export_vdb_zip");
    let d = dir.to_str().unwrap();
    let o = weft(&[
        "run",
        "graphs/smoke3d.json",
        "--frames",
        "3",
        "--no-frames",
        "--backend",
        "cpu",
        "--out",
        d,
        "--export",
        &format!("density=vdb:{}/zip_####.vdb", d),
        "--dump",
        "density",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = weft(&[
        "run",
        "graphs/smoke3d.json",
        "--frames",
        "3",
        "--no-frames",
        "--backend",
        "cpu",
        "--out",
        d,
        "--vdb-compression",
        "none",
        "--export",
        &format!("density=vdb:{}/raw_####.vdb", d),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let size = |f: &str| std::fs::metadata(dir.join(f)).unwrap().len();
    assert!(
        size("zip_0003.vdb") < size("raw_0003.vdb"),
        "zip {} bytes, raw {}",
        size("zip_0003.vdb"),
        size("raw_0003.vdb")
    );
    let Some(py) = python_with("pyopenvdb, numpy") else {
        return;
    };
    let script = r#"
import sys, numpy as np, pyopenvdb as vdb
d = sys.argv[1]
m = np.load(d + "/density.npy")
grids = []
for name in ("zip", "raw"):
    (g,), _ = vdb.readAll(d + "/%s_0003.vdb" % name)
    a = np.zeros(m.shape, np.float32)
    g.copyToArray(a, ijk=(0, 0, 0))
    assert np.array_equal(a.view(np.uint32), m.view(np.uint32)), name
    assert g.activeVoxelCount() == np.count_nonzero(m), name
    grids.append(g.activeVoxelCount())
print("openvdb zip ok", grids)
"#;
    python_ok(py, script, &[d]);
    let _ = std::fs::remove_dir_all(&dir);
}
