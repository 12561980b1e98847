//! The `mesh` node and the kernel language's mesh queries against an
//! independent reference: the transform recomputed in f64 from the file's
//! vertices, and `mesh_closest` / `mesh_ray` against brute force over
//! every triangle in f64 (closest point by projection onto the plane and
//! the three edges; rays by the plane crossing and edge sides), on the
//! interpreter, the CPU backend and wgpu. Points lie at random, exactly on
//! vertices and on edges; rays start inside and outside and graze edges.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use weft_ir::io::npy::{write_npy, DType, NpyArray};
use weft_runtime::{Backend, SimOptions, Simulation};
use weft_tests::*;

type V = [f64; 3];

fn sub(a: V, b: V) -> V {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}
fn dot(a: V, b: V) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}
fn cross(a: V, b: V) -> V {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}
fn add_s(a: V, b: V, s: f64) -> V {
    [a[0] + b[0] * s, a[1] + b[1] * s, a[2] + b[2] * s]
}

/// A deterministic generator (no dependency, the same on every machine).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A bumpy closed sphere (rings × segments) plus a separate quad, written
/// as OBJ text: positions and 1-based faces.
fn mesh_obj() -> (String, Vec<V>, Vec<[usize; 3]>) {
    let (rings, segs) = (9, 14);
    let mut p: Vec<V> = vec![[0.0, 1.0, 0.0]];
    for r in 1..rings {
        let th = std::f64::consts::PI * r as f64 / rings as f64;
        for s in 0..segs {
            let ph = 2.0 * std::f64::consts::PI * s as f64 / segs as f64;
            let rad = 1.0 + 0.15 * (3.0 * ph).sin() * th.sin();
            p.push([
                rad * th.sin() * ph.cos(),
                rad * th.cos(),
                rad * th.sin() * ph.sin(),
            ]);
        }
    }
    p.push([0.0, -1.0, 0.0]);
    let bottom = p.len() - 1;
    let at = |r: usize, s: usize| 1 + (r - 1) * segs + s % segs;
    let mut t = Vec::new();
    for s in 0..segs {
        t.push([0, at(1, s + 1), at(1, s)]);
        t.push([bottom, at(rings - 1, s), at(rings - 1, s + 1)]);
    }
    for r in 1..rings - 1 {
        for s in 0..segs {
            t.push([at(r, s), at(r, s + 1), at(r + 1, s + 1)]);
            t.push([at(r, s), at(r + 1, s + 1), at(r + 1, s)]);
        }
    }
    let q = p.len();
    p.extend([
        [1.6, -0.5, -0.5],
        [1.6, -0.5, 0.5],
        [1.6, 0.5, 0.5],
        [1.6, 0.5, -0.5],
    ]);
    let mut text = String::from("# test mesh\no sphere\n");
    for v in &p[..q] {
        text += &format!("v {} {} {}\n", v[0] as f32, v[1] as f32, v[2] as f32);
    }
    for f in &t {
        text += &format!("f {} {} {}\n", f[0] + 1, f[1] + 1, f[2] + 1);
    }
    text += "o quad\n";
    for v in &p[q..] {
        text += &format!("v {} {} {}\n", v[0], v[1], v[2]);
    }
    text += &format!("f {} {} {} {}\n", q + 1, q + 2, q + 3, q + 4);
    t.push([q, q + 1, q + 2]);
    t.push([q, q + 2, q + 3]);
    // The reference reads the positions as the file holds them (f32 text).
    let p = p.iter().map(|v| v.map(|x| x as f32 as f64)).collect();
    (text, p, t)
}

/// The closest point of triangle (a, b, c) to p, brute force: the plane's
/// projection if it lies inside, else the nearest point of the 3 edges.
fn closest_on_triangle(p: V, a: V, b: V, c: V) -> V {
    let n = cross(sub(b, a), sub(c, a));
    let nn = dot(n, n);
    if nn > 0.0 {
        let q = add_s(p, n, -dot(sub(p, a), n) / nn);
        let inside = [(a, b), (b, c), (c, a)]
            .iter()
            .all(|&(u, v)| dot(cross(sub(v, u), sub(q, u)), n) >= 0.0);
        if inside {
            return q;
        }
    }
    let seg = |u: V, v: V| {
        let d = sub(v, u);
        let t = (dot(sub(p, u), d) / dot(d, d).max(1e-300)).clamp(0.0, 1.0);
        add_s(u, d, t)
    };
    let mut best = seg(a, b);
    for q in [seg(b, c), seg(c, a)] {
        if dot(sub(q, p), sub(q, p)) < dot(sub(best, p), sub(best, p)) {
            best = q;
        }
    }
    best
}

/// The two smallest distances from p to the mesh, with the nearest face.
fn brute_closest(p: V, pts: &[V], tris: &[[usize; 3]]) -> (f64, usize, f64, V) {
    let mut d: Vec<(f64, usize, V)> = tris
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let q = closest_on_triangle(p, pts[t[0]], pts[t[1]], pts[t[2]]);
            (dot(sub(q, p), sub(q, p)).sqrt(), i, q)
        })
        .collect();
    d.sort_by(|a, b| a.0.total_cmp(&b.0));
    (d[0].0, d[0].1, d[1].0, d[0].2)
}

/// The nearest ray hit (t ≥ 0, both sides) and the next one, by the plane
/// crossing and the sides of the three edges.
fn brute_ray(o: V, d: V, pts: &[V], tris: &[[usize; 3]]) -> Option<(f64, usize, f64)> {
    let mut hits: Vec<(f64, usize)> = Vec::new();
    for (i, t) in tris.iter().enumerate() {
        let (a, b, c) = (pts[t[0]], pts[t[1]], pts[t[2]]);
        let n = cross(sub(b, a), sub(c, a));
        let den = dot(n, d);
        if den == 0.0 {
            continue;
        }
        let s = dot(sub(a, o), n) / den;
        if s < 0.0 {
            continue;
        }
        let q = add_s(o, d, s);
        if [(a, b), (b, c), (c, a)]
            .iter()
            .all(|&(u, v)| dot(cross(sub(v, u), sub(q, u)), n) >= 0.0)
        {
            hits.push((s, i));
        }
    }
    hits.sort_by(|a, b| a.0.total_cmp(&b.0));
    let next = hits.get(1).map_or(f64::INFINITY, |h| h.0);
    hits.first().map(|&(t, f)| (t, f, next))
}

fn npy_vec3(path: &Path, v: &[V]) {
    let words = v.iter().flatten().map(|&x| (x as f32).to_bits()).collect();
    write_npy(
        path,
        &NpyArray {
            dtype: DType::F32,
            shape: vec![v.len(), 3],
            words,
        },
    )
    .unwrap();
}

struct Case {
    dir: PathBuf,
    points: Vec<V>,
    tris: Vec<[usize; 3]>,
    queries: Vec<V>,
    origins: Vec<V>,
    dirs: Vec<V>,
}

fn case() -> Case {
    let dir = std::env::temp_dir().join(format!("weft_mesh_query_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (text, points, tris) = mesh_obj();
    std::fs::write(dir.join("bumpy.obj"), text).unwrap();
    let mut rng = Lcg(7);
    let mut queries: Vec<V> = (0..400)
        .map(|_| [0.0; 3].map(|_: f64| rng.next() * 4.0 - 2.0))
        .collect();
    // Points exactly on vertices and edge midpoints (of the file's mesh:
    // the node's transform below is the identity for the query test).
    for t in tris.iter().step_by(7) {
        queries.push(points[t[0]]);
        let m = add_s(points[t[1]], sub(points[t[2]], points[t[1]]), 0.5);
        queries.push(m);
    }
    let mut origins = Vec::new();
    let mut dirs = Vec::new();
    for k in 0..300 {
        let o: V = if k % 3 == 0 {
            [0.0; 3].map(|_: f64| rng.next() * 0.6 - 0.3)
        } else {
            [0.0; 3].map(|_: f64| rng.next() * 6.0 - 3.0)
        };
        let d: V = [0.0; 3].map(|_: f64| rng.next() * 2.0 - 1.0);
        origins.push(o);
        dirs.push(d);
    }
    // Rays along the axes (zero direction components) and through vertices.
    for t in tris.iter().step_by(11) {
        let v = points[t[0]];
        origins.push([v[0] * 3.0, v[1] * 3.0, v[2] * 3.0]);
        dirs.push(sub(v, [v[0] * 3.0, v[1] * 3.0, v[2] * 3.0]));
    }
    origins.push([-3.0, 0.05, 0.0]);
    dirs.push([1.0, 0.0, 0.0]);
    origins.push([0.0, -3.0, 0.0]);
    dirs.push([0.0, 1.0, 0.0]);
    npy_vec3(&dir.join("q.npy"), &queries);
    npy_vec3(&dir.join("ro.npy"), &origins);
    npy_vec3(&dir.join("rd.npy"), &dirs);
    Case {
        dir,
        points,
        tris,
        queries,
        origins,
        dirs,
    }
}

fn graph(c: &Case, mesh_params: Value) -> Value {
    let nq = c.queries.len();
    let nr = c.origins.len();
    let mut params = json!({"file": c.dir.join("bumpy.obj").display().to_string()});
    for (k, v) in mesh_params.as_object().unwrap() {
        params[k] = v.clone();
    }
    let field = |id: &str, ty: &str, init: Value| json!({"id": id, "kind": "field", "params": {"type": ty, "init": init}});
    let mut nodes = vec![
        json!({"id": "m", "kind": "mesh", "params": params}),
        json!({"id": "qs", "kind": "dense", "params": {"shape": [nq]}}),
        json!({"id": "rs", "kind": "dense", "params": {"shape": [nr]}}),
        json!({"id": "closest", "kind": "kernel", "params": {"range": [nq], "code":
            "fn kernel(i: i32) { let r = mesh_closest(m, q[i], 10.0); dist[i] = r.dist; pt[i] = r.point; face[i] = r.face; \
             let w = r.bary; bsum[i] = w.x + w.y + w.z; \
             let near = mesh_closest(m, q[i], 0.05); nearhit[i] = select(near.hit, 1, 0); }"}}),
        json!({"id": "rays", "kind": "kernel", "params": {"range": [nr], "code":
            "fn kernel(i: i32) { let h = mesh_ray(m, ro[i], rd[i], 100.0); rt[i] = h.t; rface[i] = h.face; rhit[i] = select(h.hit, 1, 0); rn[i] = h.normal; }"}}),
        json!({"id": "start", "kind": "on_start"}),
    ];
    let mut wires = vec![];
    for (id, layout, ty, init) in [
        (
            "q",
            "qs",
            "vec3",
            json!({"npy": c.dir.join("q.npy").display().to_string()}),
        ),
        ("dist", "qs", "f32", json!(0)),
        ("pt", "qs", "vec3", json!(0)),
        ("face", "qs", "i32", json!(0)),
        ("bsum", "qs", "f32", json!(0)),
        ("nearhit", "qs", "i32", json!(0)),
        (
            "ro",
            "rs",
            "vec3",
            json!({"npy": c.dir.join("ro.npy").display().to_string()}),
        ),
        (
            "rd",
            "rs",
            "vec3",
            json!({"npy": c.dir.join("rd.npy").display().to_string()}),
        ),
        ("rt", "rs", "f32", json!(0)),
        ("rface", "rs", "i32", json!(0)),
        ("rhit", "rs", "i32", json!(0)),
        ("rn", "rs", "vec3", json!(0)),
    ] {
        nodes.push(field(id, ty, init));
        wires.push(json!({"from": format!("{}.cells", layout), "to": format!("{}.layout", id)}));
        let k = if layout == "qs" { "closest" } else { "rays" };
        wires.push(json!({"from": format!("{}.field", id), "to": format!("{}.{}", k, id)}));
    }
    wires.push(json!({"from": "m.mesh", "to": "closest.m"}));
    wires.push(json!({"from": "m.mesh", "to": "rays.m"}));
    json!({"format": "weft-graph", "version": 1, "nodes": nodes, "wires": wires,
           "exec": [{"from": "start.then", "to": "closest"}, {"from": "closest.then", "to": "rays"}]})
}

fn sim_on(doc: &Value, backend: Backend) -> Simulation {
    let p = build(doc).unwrap_or_else(|e| panic!("{}", e));
    let mut s = Simulation::new(
        p,
        &SimOptions {
            backend,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{:?}: {}", backend, e));
    s.start().unwrap_or_else(|e| panic!("{:?}: {}", backend, e));
    s
}

fn ivec3s(s: &Simulation, name: &str) -> Vec<[usize; 3]> {
    i32s(s, name)
        .chunks(3)
        .map(|c| [c[0] as usize, c[1] as usize, c[2] as usize])
        .collect()
}

fn vec3s(s: &Simulation, name: &str) -> Vec<V> {
    f32s(s, name)
        .chunks(3)
        .map(|c| [c[0] as f64, c[1] as f64, c[2] as f64])
        .collect()
}

#[test]
fn closest_points_and_ray_hits_match_brute_force_on_every_backend() {
    let c = case();
    let doc = graph(&c, json!({}));
    for backend in local_backends() {
        let s = sim_on(&doc, backend);
        // The reader numbers vertices by first use: compare corner by corner.
        let (pts, tris) = (vec3s(&s, "m.points"), ivec3s(&s, "m.triangles"));
        assert_eq!(tris.len(), c.tris.len());
        for (t, (got, want)) in tris.iter().zip(&c.tris).enumerate() {
            for k in 0..3 {
                assert_eq!(
                    pts[got[k]], c.points[want[k]],
                    "{:?}: triangle {} corner {}",
                    backend, t, k
                );
            }
        }
        let dist = f32s(&s, "dist");
        let pt = vec3s(&s, "pt");
        let face = i32s(&s, "face");
        let bsum = f32s(&s, "bsum");
        let near = i32s(&s, "nearhit");
        let mut faces_checked = 0;
        for (i, &q) in c.queries.iter().enumerate() {
            let (d, f, second, cp) = brute_closest(q, &pts, &tris);
            let got = dist[i] as f64;
            assert!(
                (got - d).abs() <= 2e-6 + 2e-6 * d,
                "{:?} query {} {:?}: distance {} against {}",
                backend,
                i,
                q,
                got,
                d
            );
            let e = sub(pt[i], cp);
            assert!(
                dot(e, e).sqrt() <= 1e-5,
                "{:?} query {}: point {:?} against {:?}",
                backend,
                i,
                pt[i],
                cp
            );
            if second - d > 1e-4 {
                assert_eq!(face[i] as usize, f, "{:?} query {}: face", backend, i);
                faces_checked += 1;
            }
            assert!(
                (bsum[i] - 1.0).abs() < 1e-5,
                "{:?} query {}: barycentrics sum to {}",
                backend,
                i,
                bsum[i]
            );
            if (d - 0.05).abs() > 1e-5 {
                assert_eq!(
                    near[i],
                    (d <= 0.05) as i32,
                    "{:?} query {}: hit within 0.05 at distance {}",
                    backend,
                    i,
                    d
                );
            }
        }
        assert!(faces_checked > 100, "{}", faces_checked);
        // Points on vertices are at distance 0 exactly.
        for (k, t) in c.tris.iter().step_by(7).enumerate() {
            let i = 400 + 2 * k;
            assert_eq!(c.queries[i], c.points[t[0]]);
            assert_eq!(dist[i], 0.0, "{:?}: a query on a vertex", backend);
        }
        let rt = f32s(&s, "rt");
        let rface = i32s(&s, "rface");
        let rhit = i32s(&s, "rhit");
        let rn = vec3s(&s, "rn");
        let mut hits = 0;
        for i in 0..c.origins.len() {
            let (o, d) = (c.origins[i], c.dirs[i]);
            match brute_ray(o, d, &pts, &tris) {
                Some((t, f, next)) => {
                    // A graze of an edge may go either way in f32.
                    if rhit[i] == 0 {
                        panic!(
                            "{:?} ray {} {:?} {:?}: missed, the reference hits face {} at t {}",
                            backend, i, o, d, f, t
                        );
                    }
                    let scale = dot(d, d).sqrt();
                    assert!(
                        (rt[i] as f64 - t).abs() * scale <= 1e-4,
                        "{:?} ray {}: t {} against {}",
                        backend,
                        i,
                        rt[i],
                        t
                    );
                    if (next - t) * scale > 1e-4 {
                        assert_eq!(rface[i] as usize, f, "{:?} ray {}: face", backend, i);
                        let tri = tris[f];
                        let n = cross(sub(pts[tri[1]], pts[tri[0]]), sub(pts[tri[2]], pts[tri[0]]));
                        let n = n.map(|x| x / dot(n, n).sqrt());
                        let e = sub(rn[i], n);
                        assert!(dot(e, e).sqrt() < 1e-5, "{:?} ray {}: normal", backend, i);
                    }
                    hits += 1;
                }
                None => {
                    assert_eq!(
                        rhit[i], 0,
                        "{:?} ray {}: hit where the reference misses",
                        backend, i
                    );
                    assert_eq!(rt[i], 100.0);
                    assert_eq!(rface[i], -1);
                }
            }
        }
        assert!(hits > 100, "{}", hits);
    }
}

#[test]
fn the_transform_scales_then_rotates_xyz_then_translates() {
    let c = case();
    let doc = graph(
        &c,
        json!({"translate": [0.5, -1.0, 2.0], "rotate": [30.0, -45.0, 120.0], "scale": 1.5}),
    );
    let s = sim_on(&doc, Backend::Vm);
    let (pts, tris) = (vec3s(&s, "m.points"), ivec3s(&s, "m.triangles"));
    // Each corner's point against the file's, transformed here.
    let corners: Vec<(V, V)> = tris
        .iter()
        .zip(&c.tris)
        .flat_map(|(g, w)| (0..3).map(move |k| (g[k], w[k])))
        .map(|(g, w)| (pts[g], c.points[w]))
        .collect();
    let (ax, ay, az) = (
        30f64.to_radians(),
        (-45f64).to_radians(),
        120f64.to_radians(),
    );
    let rx = |v: V| {
        [
            v[0],
            v[1] * ax.cos() - v[2] * ax.sin(),
            v[1] * ax.sin() + v[2] * ax.cos(),
        ]
    };
    let ry = |v: V| {
        [
            v[0] * ay.cos() + v[2] * ay.sin(),
            v[1],
            -v[0] * ay.sin() + v[2] * ay.cos(),
        ]
    };
    let rz = |v: V| {
        [
            v[0] * az.cos() - v[1] * az.sin(),
            v[0] * az.sin() + v[1] * az.cos(),
            v[2],
        ]
    };
    for (got, v) in &corners {
        let w = rz(ry(rx(v.map(|x| x * 1.5))));
        let want = [w[0] + 0.5, w[1] - 1.0, w[2] + 2.0];
        let e = sub(*got, want);
        assert!(dot(e, e).sqrt() < 1e-5, "{:?} against {:?}", got, want);
    }
    // Normals: unit, and pointing away from the sphere's centre (at the
    // translation) for the sphere's vertices.
    let normals = vec3s(&s, "m.normals");
    let sphere: std::collections::BTreeSet<usize> =
        tris[..c.tris.len() - 2].iter().flatten().copied().collect();
    for &v in &sphere {
        let (n, p) = (normals[v], pts[v]);
        assert!((dot(n, n) - 1.0).abs() < 1e-5);
        assert!(
            dot(n, sub(p, [0.5, -1.0, 2.0])) > 0.0,
            "normal {:?} at {:?}",
            n,
            p
        );
    }
}

#[test]
fn bad_mesh_files_and_queries_are_refused_naming_the_node() {
    let c = case();
    let err = |doc: &Value| build(doc).map(|_| ()).unwrap_err().to_string();
    let mut doc = graph(
        &c,
        json!({"file": c.dir.join("none.obj").display().to_string()}),
    );
    let e = err(&doc);
    assert!(e.contains("node 'm'") && e.contains("none.obj"), "{}", e);
    std::fs::write(c.dir.join("empty.obj"), "v 0 0 0\n").unwrap();
    set_param(
        &mut doc,
        "m",
        "file",
        json!(c.dir.join("empty.obj").display().to_string()),
    );
    let e = err(&doc);
    assert!(
        e.contains("node 'm'") && e.contains("no triangles"),
        "{}",
        e
    );
    // A query on a port wired to a plain field.
    let mut doc = graph(&c, json!({}));
    let wires = doc["wires"].as_array_mut().unwrap();
    wires.retain(|w| w["to"] != "closest.m");
    wires.push(json!({"from": "dist.field", "to": "closest.m"}));
    let e = err(&doc);
    assert!(
        e.contains("closest") && e.contains("is not a mesh"),
        "{}",
        e
    );
    // Wrong arity, naming the line and column.
    let mut doc = graph(&c, json!({}));
    set_param(&mut doc, "closest", "code", json!("fn kernel(i: i32) { let r = mesh_closest(m, q[i]); dist[i] = r.dist; pt[i] = r.point; face[i] = r.face; bsum[i] = 0.0; nearhit[i] = 0; }"));
    let e = err(&doc);
    assert!(e.contains("`mesh_closest` takes 3 arguments"), "{}", e);
}
