//! `mesh` nodes: the file read (`io::mesh`), the node's transform applied,
//! vertex normals and the BVH (`bvh.rs`) computed, and all of it stored as
//! ordinary dense fields with data initial values, so kernels, views,
//! dumps and every backend see nothing new:
//!
//! | field | layout | type | holds |
//! |---|---|---|---|
//! | `ID.points` | `ID.vertices` `[V]` | vec3 | positions after the transform |
//! | `ID.normals` | `ID.vertices` | vec3 | unit area-weighted vertex normals |
//! | `ID.triangles` | `ID.faces` `[T]` | ivec3 | vertex indices |
//! | `ID.lo`, `ID.hi` | `ID.bvh` `[2T−1]` | vec3 | each BVH node's box |
//! | `ID.tree` | `ID.bvh` | ivec2 | (escape, triangle or −1) |
//!
//! The `mesh` output is `ID.tree`; a kernel port wired to it is a mesh for
//! the queries, which find the other fields by these names.

use super::*;
use crate::io::mesh;

/// The fields a mesh node adds, by output port (`mesh` is the tree).
pub(super) fn output_field_name(node: &str, port: &str) -> String {
    match port {
        "mesh" => format!("{}.tree", node),
        p => format!("{}.{}", node, p),
    }
}

/// The mesh fields' names for the node whose tree field is `tree`, if it
/// is a mesh's: (points, triangles, lo, hi, tree).
pub(super) fn parts_of(tree: &str) -> Option<[String; 5]> {
    let node = tree.strip_suffix(".tree")?;
    Some(["points", "triangles", "lo", "hi", "tree"].map(|p| format!("{}.{}", node, p)))
}

/// The node's transform: x' = translate + R (scale · x), R = Rz · Ry · Rx.
struct Transform {
    scale: f32,
    rot: [[f64; 3]; 3],
    translate: [f64; 3],
}

impl Transform {
    fn of(n: &Node) -> Transform {
        let v3 = |name: &str| -> [f64; 3] {
            let a = n.p(name).as_array();
            std::array::from_fn(|i| {
                a.and_then(|a| a.get(i))
                    .and_then(Value::as_f64)
                    .unwrap_or(0.0)
            })
        };
        let [rx, ry, rz] = v3("rotate").map(f64::to_radians);
        let (sx, cx) = rx.sin_cos();
        let (sy, cy) = ry.sin_cos();
        let (sz, cz) = rz.sin_cos();
        // Rz · Ry · Rx, rows.
        let rot = [
            [cz * cy, cz * sy * sx - sz * cx, cz * sy * cx + sz * sx],
            [sz * cy, sz * sy * sx + cz * cx, sz * sy * cx - cz * sx],
            [-sy, cy * sx, cy * cx],
        ];
        Transform {
            scale: n.p("scale").as_f64().unwrap_or(1.0) as f32,
            rot,
            translate: v3("translate"),
        }
    }
    fn rotate(&self, v: [f64; 3]) -> [f64; 3] {
        std::array::from_fn(|r| (0..3).map(|c| self.rot[r][c] * v[c]).sum())
    }
    fn point(&self, p: [f32; 3]) -> [f32; 3] {
        let s = p.map(|x| (x * self.scale) as f64);
        let r = self.rotate(s);
        std::array::from_fn(|i| (r[i] + self.translate[i]) as f32)
    }
}

/// Unit vertex normals: each triangle's cross product (twice its area
/// times its normal) summed at its vertices; a vertex with none (or only
/// degenerate triangles) gets (0, 0, 0).
fn vertex_normals(points: &[[f32; 3]], triangles: &[[u32; 3]]) -> Vec<[f32; 3]> {
    let mut acc = vec![[0f64; 3]; points.len()];
    for t in triangles {
        let p = t.map(|i| points[i as usize].map(f64::from));
        let e1: [f64; 3] = std::array::from_fn(|k| p[1][k] - p[0][k]);
        let e2: [f64; 3] = std::array::from_fn(|k| p[2][k] - p[0][k]);
        let c = [
            e1[1] * e2[2] - e1[2] * e2[1],
            e1[2] * e2[0] - e1[0] * e2[2],
            e1[0] * e2[1] - e1[1] * e2[0],
        ];
        for &i in t {
            for k in 0..3 {
                acc[i as usize][k] += c[k];
            }
        }
    }
    acc.iter()
        .map(|a| {
            let l = (a[0] * a[0] + a[1] * a[1] + a[2] * a[2]).sqrt();
            if l > 0.0 {
                a.map(|x| (x / l) as f32)
            } else {
                [0.0; 3]
            }
        })
        .collect()
}

impl Builder<'_> {
    /// Every mesh node's layouts and fields (before `layout::compute`).
    pub(super) fn meshes(&mut self) {
        for i in self.of_family(Family::Geometry) {
            let n = &self.nodes[i];
            let id = n.id().to_string();
            let Some(rel) = n.p("file").as_str().filter(|s| !s.is_empty()) else {
                self.errors.push(GraphError::param(
                    &id,
                    "file",
                    "a mesh node needs a file, e.g. \"file\": \"collider.obj\"",
                ));
                continue;
            };
            let m = match mesh::read(&self.opts.base_dir.join(rel)) {
                Ok(m) => m,
                Err(e) => {
                    self.errors
                        .push(GraphError::param(&id, "file", e.to_string()));
                    continue;
                }
            };
            let xf = Transform::of(n);
            let points: Vec<[f32; 3]> = m.positions.iter().map(|&p| xf.point(p)).collect();
            if let Some(v) = points.iter().position(|p| p.iter().any(|c| !c.is_finite())) {
                self.errors.push(GraphError::param(
                    &id,
                    "scale",
                    format!(
                        "the transform takes vertex {} of '{}' out of the f32 range",
                        v, rel
                    ),
                ));
                continue;
            }
            let normals = vertex_normals(&points, &m.triangles);
            let tree = super::bvh::build(&points, &m.triangles);
            let f3 = |v: &[[f32; 3]]| {
                v.iter()
                    .flatten()
                    .map(|x| x.to_bits())
                    .collect::<Vec<u32>>()
            };
            let vertices = self.mesh_layout(&id, "vertices", points.len());
            self.mesh_field(
                &id,
                "points",
                vertices,
                Type::Vector(Scalar::F32, 3),
                f3(&points),
            );
            self.mesh_field(
                &id,
                "normals",
                vertices,
                Type::Vector(Scalar::F32, 3),
                f3(&normals),
            );
            let faces = self.mesh_layout(&id, "faces", m.triangles.len());
            let tris: Vec<u32> = m.triangles.iter().flatten().copied().collect();
            self.mesh_field(&id, "triangles", faces, Type::Vector(Scalar::I32, 3), tris);
            let bvh = self.mesh_layout(&id, "bvh", tree.len());
            let lo: Vec<[f32; 3]> = tree.iter().map(|t| t.lo).collect();
            let hi: Vec<[f32; 3]> = tree.iter().map(|t| t.hi).collect();
            let links: Vec<u32> = tree
                .iter()
                .flat_map(|t| [t.escape as u32, t.triangle as u32])
                .collect();
            self.mesh_field(&id, "lo", bvh, Type::Vector(Scalar::F32, 3), f3(&lo));
            self.mesh_field(&id, "hi", bvh, Type::Vector(Scalar::F32, 3), f3(&hi));
            self.mesh_field(&id, "tree", bvh, Type::Vector(Scalar::I32, 2), links);
        }
    }

    fn mesh_layout(&mut self, node: &str, part: &str, len: usize) -> LayoutId {
        self.program.layouts.append(LayoutNode::new(
            &format!("{}.{}", node, part),
            LayoutKind::Dense,
            vec![len as u32],
            None,
        ))
    }

    fn mesh_field(&mut self, node: &str, part: &str, layout: LayoutId, ty: Type, data: Vec<u32>) {
        let shape = self.program.layouts[layout].shape.clone();
        let h = self.program.fields.append(Field {
            name: format!("{}.{}", node, part),
            ty,
            storage: Storage::Word,
            layout,
            shape,
            offset_in_cell: 0,
            init: FieldInit::Data(data),
        });
        self.program.layouts[layout]
            .children
            .push(LayoutChild::Field(h));
    }
}

/// The field an output port carries: a field node's own (or its
/// gradient), a mesh node's part by port name. (A function, not a
/// method, so closures that hold other parts of the builder can call it.)
pub(super) fn wired_field(
    nodes: &[Node],
    program: &Program,
    src: usize,
    out: &str,
) -> Option<FieldId> {
    let n = &nodes[src];
    match n.kind.family {
        Family::Geometry => program.field_by_name(&output_field_name(n.id(), out)),
        _ if out == "grad" => program.field_by_name(&format!("{}.grad", n.id())),
        _ => program.field_by_name(n.id()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normals_of_a_flat_quad_point_up_its_winding() {
        let p = [
            [0.0, 0.0, 0.0],
            [1.0, 0.0, 0.0],
            [1.0, 1.0, 0.0],
            [0.0, 1.0, 0.0],
            [5.0, 5.0, 5.0],
        ];
        let n = vertex_normals(&p, &[[0, 1, 2], [0, 2, 3]]);
        for v in &n[..4] {
            assert_eq!(*v, [0.0, 0.0, 1.0]);
        }
        assert_eq!(n[4], [0.0; 3]);
    }
}
