//! The mesh queries of the kernel language, `mesh_closest(m, p, max_dist)`
//! and `mesh_ray(m, origin, dir, t_max)`, defined once here as kernel
//! code: a call becomes a call of a helper written for the mesh port `m`,
//! and the helpers (with the structs they return) are added to the
//! kernel's code before it is lowered. So a query is plain IR on every
//! backend — a loop over the BVH fields of the mesh node (see
//! `graph::build::bvh`: a walk by escape links, no stack) — and the
//! language's own rules (helpers returning structs are inlined, loops
//! count their trips on lavapipe) apply unchanged.
//!
//! The fields of the mesh wired to port `m` reach the code under the
//! hidden names [`part_name`]`(m, part)`, which the graph builder binds.

use super::{CodeError, KernelEnv, R};
use syn::visit_mut::VisitMut;

/// The queries, by name: (name, arguments after the mesh).
pub const QUERIES: &[(&str, usize)] = &[("mesh_closest", 2), ("mesh_ray", 3)];

/// The structs the queries return; kernel code using a query cannot
/// declare structs of these names.
pub const RESULT_STRUCTS: &[&str] = &["MeshPoint", "MeshHit"];

/// The mesh fields a query reads.
pub const PARTS: &[&str] = &["points", "triangles", "lo", "hi", "tree"];

/// The name under which field `part` of the mesh wired to `port` is bound.
pub fn part_name(port: &str, part: &str) -> String {
    format!("__weft_mesh_{}_{}", port, part)
}

fn helper_name(query: &str, port: &str) -> String {
    format!("__weft_{}_{}", query, port)
}

const STRUCTS: &str = r#"
struct MeshPoint { hit: bool, face: i32, bary: vec3, point: vec3, dist: f32 }
struct MeshHit { hit: bool, t: f32, face: i32, bary: vec3, normal: vec3 }

fn __weft_inverse(x: f32) -> f32 {
    if abs(x) > 1e-30 { 1.0 / x } else { 1e30 }
}

fn __weft_closest_weights(p: vec3, a: vec3, b: vec3, c: vec3) -> vec3 {
    let ab = b - a;
    let ac = c - a;
    let ap = p - a;
    let d1 = dot(ab, ap);
    let d2 = dot(ac, ap);
    let bp = p - b;
    let d3 = dot(ab, bp);
    let d4 = dot(ac, bp);
    let cp = p - c;
    let d5 = dot(ab, cp);
    let d6 = dot(ac, cp);
    let vc = d1 * d4 - d3 * d2;
    let vb = d5 * d2 - d1 * d6;
    let va = d3 * d6 - d5 * d4;
    let mut w = vec3(1.0, 0.0, 0.0);
    if d1 <= 0.0 && d2 <= 0.0 {
        w = vec3(1.0, 0.0, 0.0);
    } else if d3 >= 0.0 && d4 <= d3 {
        w = vec3(0.0, 1.0, 0.0);
    } else if d6 >= 0.0 && d5 <= d6 {
        w = vec3(0.0, 0.0, 1.0);
    } else if vc <= 0.0 && d1 >= 0.0 && d3 <= 0.0 {
        let v = d1 / (d1 - d3);
        w = vec3(1.0 - v, v, 0.0);
    } else if vb <= 0.0 && d2 >= 0.0 && d6 <= 0.0 {
        let t = d2 / (d2 - d6);
        w = vec3(1.0 - t, 0.0, t);
    } else if va <= 0.0 && d4 - d3 >= 0.0 && d5 - d6 >= 0.0 {
        let t = (d4 - d3) / ((d4 - d3) + (d5 - d6));
        w = vec3(0.0, 1.0 - t, t);
    } else if va + vb + vc > 0.0 {
        let den = 1.0 / (va + vb + vc);
        let v = vb * den;
        let t = vc * den;
        w = vec3(1.0 - v - t, v, t);
    }
    w
}
"#;

/// The two query helpers for the mesh on port `m`.
fn helpers(m: &str) -> String {
    let f = |part: &str| part_name(m, part);
    format!(
        r#"
fn {closest}(p: vec3, max_dist: f32) -> MeshPoint {{
    let mut best = max_dist * max_dist;
    let mut face = -1;
    let mut bary = vec3(0.0, 0.0, 0.0);
    let mut point = p;
    let mut n = 0;
    while n >= 0 {{
        let link = {tree}[n];
        let e = max(max({lo}[n] - p, p - {hi}[n]), vec3(0.0, 0.0, 0.0));
        if dot(e, e) <= best {{
            if link.y >= 0 {{
                let t = {tris}[link.y];
                let a = {pts}[t.x];
                let b = {pts}[t.y];
                let c = {pts}[t.z];
                let w = __weft_closest_weights(p, a, b, c);
                let q = a * w.x + b * w.y + c * w.z;
                let d = q - p;
                let d2 = dot(d, d);
                if d2 < best || (d2 == best && (face < 0 || link.y < face)) {{
                    best = d2;
                    face = link.y;
                    bary = w;
                    point = q;
                }}
                n = link.x;
            }} else {{
                n = n + 1;
            }}
        }} else {{
            n = link.x;
        }}
    }}
    let dist = if face >= 0 {{ sqrt(best) }} else {{ max_dist }};
    MeshPoint {{ hit: face >= 0, face, bary, point, dist }}
}}

fn {ray}(o: vec3, d: vec3, t_max: f32) -> MeshHit {{
    // Boxes: slabs. A zero (or tiny) direction component gets a large
    // finite inverse instead of an infinite one (an origin exactly on a
    // box's face would give 0 * inf = NaN): a slab then admits a little
    // more than it should, never less, and the triangle test decides.
    let inv = vec3(__weft_inverse(d.x), __weft_inverse(d.y), __weft_inverse(d.z));
    // Triangles: the watertight test of Woop, Benthin and Wald (2013).
    // Axes permuted so that z is the direction's largest component; the
    // triangle sheared into the ray's frame; the three edge functions
    // computed from the sheared vertices the same way for the two
    // triangles that share an edge, so a ray through an edge or vertex of
    // a closed mesh hits at least one of them.
    let ad = abs(d);
    let mut ez = vec3(0.0, 0.0, 1.0);
    let mut ex = vec3(1.0, 0.0, 0.0);
    let mut ey = vec3(0.0, 1.0, 0.0);
    if ad.x >= ad.y && ad.x >= ad.z {{
        ez = vec3(1.0, 0.0, 0.0);
        ex = vec3(0.0, 1.0, 0.0);
        ey = vec3(0.0, 0.0, 1.0);
    }} else if ad.y >= ad.z {{
        ez = vec3(0.0, 1.0, 0.0);
        ex = vec3(0.0, 0.0, 1.0);
        ey = vec3(1.0, 0.0, 0.0);
    }}
    let dz = dot(d, ez);
    if dz < 0.0 {{
        let swap = ex;
        ex = ey;
        ey = swap;
    }}
    let sx = dot(d, ex) / dz;
    let sy = dot(d, ey) / dz;
    let sz = 1.0 / dz;
    let mut best = t_max;
    let mut face = -1;
    let mut bary = vec3(0.0, 0.0, 0.0);
    let mut normal = vec3(0.0, 0.0, 0.0);
    let mut n = 0;
    while n >= 0 {{
        let link = {tree}[n];
        let t0 = ({lo}[n] - o) * inv;
        let t1 = ({hi}[n] - o) * inv;
        let near = min(t0, t1);
        let far = max(t0, t1);
        let enter = max(max(near.x, near.y), max(near.z, 0.0));
        // Widened by a few rounding errors of the products above, so a ray
        // that touches a box only at its edge or corner (a vertex of the
        // mesh lies there) still enters it.
        let exit = min(min(far.x, far.y), min(far.z, best)) * 1.0000005;
        if enter <= exit {{
            if link.y >= 0 {{
                let tri = {tris}[link.y];
                let pa = {pts}[tri.x];
                let pb = {pts}[tri.y];
                let pc = {pts}[tri.z];
                let a = pa - o;
                let b = pb - o;
                let c = pc - o;
                let az = dot(a, ez);
                let bz = dot(b, ez);
                let cz = dot(c, ez);
                let ax = dot(a, ex) - sx * az;
                let ay = dot(a, ey) - sy * az;
                let bx = dot(b, ex) - sx * bz;
                let by = dot(b, ey) - sy * bz;
                let cx = dot(c, ex) - sx * cz;
                let cy = dot(c, ey) - sy * cz;
                let u = cx * by - cy * bx;
                let v = ax * cy - ay * cx;
                let w = bx * ay - by * ax;
                let neg = u < 0.0 || v < 0.0 || w < 0.0;
                let pos = u > 0.0 || v > 0.0 || w > 0.0;
                let det = u + v + w;
                if !(neg && pos) && det != 0.0 {{
                    let tt = u * (sz * az) + v * (sz * bz) + w * (sz * cz);
                    let t = tt / det;
                    if t >= 0.0 && (t < best || (t == best && (face < 0 || link.y < face))) {{
                        best = t;
                        face = link.y;
                        bary = vec3(u / det, v / det, w / det);
                        normal = normalize(cross(pb - pa, pc - pa));
                    }}
                }}
                n = link.x;
            }} else {{
                n = n + 1;
            }}
        }} else {{
            n = link.x;
        }}
    }}
    let t = if face >= 0 {{ best }} else {{ t_max }};
    MeshHit {{ hit: face >= 0, t, face, bary, normal }}
}}
"#,
        closest = helper_name("mesh_closest", m),
        ray = helper_name("mesh_ray", m),
        tree = f("tree"),
        lo = f("lo"),
        hi = f("hi"),
        tris = f("triangles"),
        pts = f("points"),
    )
}

/// Rewrites every query call of `file` into a call of its mesh's helper
/// and adds the helpers; code without queries is left as it is.
pub(super) fn expand(file: &mut syn::File, env: &KernelEnv) -> R<()> {
    let mut r = Rewriter {
        env,
        ports: Vec::new(),
        error: None,
    };
    r.visit_file_mut(file);
    if let Some(e) = r.error {
        return Err(e);
    }
    if r.ports.is_empty() {
        return Ok(());
    }
    for item in &file.items {
        if let syn::Item::Struct(s) = item {
            if RESULT_STRUCTS.iter().any(|n| s.ident == n) {
                return Err(super::err(
                    &s.ident,
                    format!(
                        "struct `{}` is the result of the mesh queries this code calls; give yours another name",
                        s.ident
                    ),
                ));
            }
        }
    }
    let mut code = STRUCTS.to_string();
    for m in &r.ports {
        code.push_str(&helpers(m));
    }
    let added = syn::parse_file(&code).map_err(|e| CodeError {
        line: 1,
        col: 1,
        message: format!("internal error: the mesh query code does not parse: {}", e),
    })?;
    file.items.extend(added.items);
    Ok(())
}

struct Rewriter<'a, 'e> {
    env: &'a KernelEnv<'e>,
    ports: Vec<String>,
    error: Option<CodeError>,
}

impl VisitMut for Rewriter<'_, '_> {
    fn visit_expr_call_mut(&mut self, c: &mut syn::ExprCall) {
        syn::visit_mut::visit_expr_call_mut(self, c);
        if self.error.is_some() {
            return;
        }
        let syn::Expr::Path(f) = &*c.func else {
            return;
        };
        let Some(ident) = f.path.get_ident().cloned() else {
            return;
        };
        let Some(&(query, extra)) = QUERIES.iter().find(|(q, _)| ident == q) else {
            return;
        };
        let fail = |message: String| Some(super::err(&ident, message));
        if c.args.len() != extra + 1 {
            let usage = if query == "mesh_closest" {
                "mesh_closest(m, p, max_dist)"
            } else {
                "mesh_ray(m, origin, dir, t_max)"
            };
            self.error = fail(format!(
                "`{}` takes {} arguments: {}",
                query,
                extra + 1,
                usage
            ));
            return;
        }
        let port = match c.args.first() {
            Some(syn::Expr::Path(p)) if p.path.get_ident().is_some() => {
                p.path.get_ident().map(|i| i.to_string())
            }
            _ => None,
        };
        let Some(port) = port else {
            self.error = fail(format!(
                "the first argument of `{}` is the name of a kernel port wired to a mesh node's `mesh` output",
                query
            ));
            return;
        };
        let bound = PARTS
            .iter()
            .all(|p| self.env.fields.iter().any(|f| f.0 == part_name(&port, p)));
        if !bound {
            self.error = fail(format!(
                "`{}` is not a mesh: wire a mesh node's `mesh` output to port '{}' to query it with `{}`",
                port, port, query
            ));
            return;
        }
        let args: Vec<syn::Expr> = c.args.iter().skip(1).cloned().collect();
        c.args = args.into_iter().collect();
        let name = syn::Ident::new(&helper_name(query, &port), ident.span());
        *c.func = syn::Expr::Path(syn::ExprPath {
            attrs: Vec::new(),
            qself: None,
            path: name.into(),
        });
        if !self.ports.contains(&port) {
            self.ports.push(port);
        }
    }
}
