//! Views drawn by their IR kernels (`weft_ir::passes::views`) on every
//! backend: the same simulation state (run on the reference VM, then copied
//! root buffer by root buffer into a cpu and a wgpu simulation of the same
//! graph) must give the same RGBA on vm, cpu and wgpu, and the pictures must
//! match the host renderer views used to be drawn with
//! (`weft_tests::view_reference`, an independent implementation reading
//! fields through the host's `AddressPlan`).
//!
//! Tolerances: vm and cpu are bit-identical (the JIT calls the VM's math).
//! wgpu may differ by `GPU_LEVELS` levels of 255 per channel: the kernels
//! evaluate colormap polynomials and disc distances in f32, and Vulkan
//! drivers may fuse a multiply and an add or round `sqrt` differently, which
//! moves a channel that lies on a rounding boundary by one level. Against
//! the old host renderer: images at least 99.5% of pixels within 3 levels
//! and no channel anywhere by more than 40; particles `PARTICLE_SHARE` of
//! pixels within 3 levels — the kernels blend the top two discs of a pixel
//! over the background, where the painter blended every disc in turn, which
//! differs where three or more soft edges stack (docs/graph-format.md).
//! 3-D particles, volumes and plots equal the reference exactly (it computes the same f32
//! operations from the definitions in `weft_ir::passes::views::{particles3d, volume, plot}`);
//! volumes on wgpu (lavapipe) are held to the same `GPU_LEVELS` (1 level of 255 per channel,
//! on every pixel), and to an independent NumPy ray-march (99% of pixels within 2 levels, none
//! beyond 8; it agrees exactly today).
//!
//! Without a wgpu adapter the wgpu comparison fails when CI=true and is
//! skipped (with a visible message) otherwise.

use serde_json::{json, Value};
use std::sync::{Arc, OnceLock};
use weft_runtime::render::Image;
use weft_runtime::wgpu_backend::{AdapterChoice, WgpuContext};
use weft_runtime::{Backend, SimOptions, Simulation};
use weft_tests::*;

/// Levels of 255 a wgpu channel may differ from the VM's (see above).
const GPU_LEVELS: u8 = 1;

/// Share of a particles view's pixels within 3 levels of the old painter's
/// picture (the test graphs pack up to 3000 discs into 200x150 pixels;
/// pixels under three or more soft edges differ, see the module comment).
const PARTICLE_SHARE: f64 = 0.88;

/// One device shared by every test (opening lavapipe is slow).
fn gpu() -> Option<Arc<WgpuContext>> {
    static CTX: OnceLock<Result<Arc<WgpuContext>, String>> = OnceLock::new();
    match CTX.get_or_init(|| {
        WgpuContext::new(AdapterChoice::Any)
            .map(Arc::new)
            .map_err(|e| e.to_string())
    }) {
        Ok(c) => Some(c.clone()),
        Err(e) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("CI=true but no wgpu adapter: {}", e)
        }
        Err(e) => {
            eprintln!("skipping the wgpu comparison: no wgpu adapter ({})", e);
            None
        }
    }
}

fn open(doc: &Value, backend: Backend, gpu: Option<Arc<WgpuContext>>) -> Simulation {
    let p = build(doc).unwrap_or_else(|e| panic!("graph does not build: {}", e));
    let opts = SimOptions {
        backend,
        gpu,
        ..Default::default()
    };
    let mut s = Simulation::new(p, &opts).unwrap_or_else(|e| panic!("simulation: {}", e));
    s.start().unwrap_or_else(|e| panic!("on_start: {}", e));
    s
}

/// A graph run for some frames on the VM, whose views `check` draws on
/// every backend from that same state.
struct Runs {
    doc: Value,
    vm: Simulation,
}

impl std::ops::Deref for Runs {
    type Target = Simulation;
    fn deref(&self) -> &Simulation {
        &self.vm
    }
}

impl std::ops::DerefMut for Runs {
    fn deref_mut(&mut self) -> &mut Simulation {
        &mut self.vm
    }
}

impl Runs {
    fn new(doc: &Value, frames: u32) -> Runs {
        let mut vm = open(doc, Backend::Vm, None);
        for _ in 0..frames {
            vm.step_frame().unwrap_or_else(|e| panic!("frame: {}", e));
        }
        Runs {
            doc: doc.clone(),
            vm,
        }
    }

    /// The VM's state in a new simulation on `backend`.
    fn copy_to(&self, backend: Backend, gpu: Option<Arc<WgpuContext>>) -> Simulation {
        let mut s = open(&self.doc, backend, gpu);
        let p = &self.vm.program;
        for r in p.roots() {
            let words = self.vm.read_root(r).expect("vm root");
            s.write_root(r, &words).expect("write root");
        }
        s
    }

    /// Draws every view on vm, cpu and wgpu and against the reference
    /// renderer, checks the tolerances; returns the VM's images.
    fn check(&mut self, name: &str) -> Vec<(String, Image)> {
        let vm = self
            .vm
            .render_views()
            .unwrap_or_else(|e| panic!("{}: vm views: {}", name, e));
        assert!(!vm.is_empty(), "{} has no views", name);
        let reference = reference_views(&self.vm);
        let mut bad = Vec::new();
        for (((id, a), (id2, r)), view) in vm.iter().zip(&reference).zip(&self.vm.program.views) {
            assert_eq!(id, id2);
            let s = diff(r, a);
            let line = s.line(name, id, "reference", "vm");
            eprintln!("{}", line);
            // Particles: where three or more discs stack their soft edges,
            // the kernels blend only the top two (docs/graph-format.md), so
            // dense clusters of small discs differ from the painter.
            let (share, max) = match view {
                // 3-D particles follow the definition operation by
                // operation (`views::camera`, `views::particles3d`).
                weft_ir::ir::View::Particles { scene: Some(_), .. } => (1.0, 0),
                weft_ir::ir::View::Particles { .. } => (PARTICLE_SHARE, 255),
                // Plots follow the reference's definition operation by operation.
                weft_ir::ir::View::Plot { .. } => (1.0, 0),
                // Volumes follow `views::volume`'s definition operation by operation.
                weft_ir::ir::View::Volume { .. } => (1.0, 0),
                // Surfaces follow `views::surface` operation by operation.
                weft_ir::ir::View::Surface { .. } => (1.0, 0),
                _ => (0.995, 40),
            };
            if s.within3 < share || s.max > max {
                dump(name, id, "reference", r);
                dump(name, id, "vm", a);
                bad.push(line);
            }
        }
        let mut others = vec![("cpu", self.copy_to(Backend::Jit, None))];
        if let Some(ctx) = gpu() {
            // A view image over the adapter's storage-buffer limit (lavapipe:
            // 128 MiB) cannot open on wgpu. `image` views stay within 4096²
            // (64 MiB, `views::MAX_IMAGE_SIDE`), but a huge `particles` view
            // could exceed it: reported, not a silent pass.
            let p = build(&self.doc).expect("builds");
            let mut p2 = p.clone();
            weft_ir::passes::run_pipeline(&mut p2, &Default::default(), None).expect("compiles");
            let too_big = p2
                .view_kernels
                .iter()
                .any(|v| v.height as u64 * v.pitch as u64 * 4 > 128 << 20);
            if too_big {
                eprintln!(
                    "{}: a view image is over 128 MiB; wgpu comparison skipped",
                    name
                );
            } else {
                others.push(("wgpu", self.copy_to(Backend::Wgpu, Some(ctx))));
            }
        }
        for (label, mut sim) in others {
            let imgs = sim
                .render_views()
                .unwrap_or_else(|e| panic!("{}: {} views: {}", name, label, e));
            let allowed = if label == "wgpu" { GPU_LEVELS } else { 0 };
            for ((id, a), (_, b)) in vm.iter().zip(&imgs) {
                let s = diff(a, b);
                if s.max > allowed {
                    dump(name, id, "vm", a);
                    dump(name, id, label, b);
                    bad.push(s.line(name, id, "vm", label));
                }
            }
        }
        assert!(bad.is_empty(), "views differ:\n{}", bad.join("\n"));
        vm
    }
}

/// Every view of `sim` drawn by the old host renderer from its fields.
fn reference_views(sim: &Simulation) -> Vec<(String, Image)> {
    use weft_tests::view_reference::{activity_mask, render_view};
    let p = &sim.program;
    p.views
        .iter()
        .map(|v| {
            let read = |f| sim.read_field(f).expect("read field");
            let activity = |f: weft_ir::ir::FieldId| {
                let root = weft_ir::ir::layout::root_of(p, p.fields[f].layout);
                activity_mask(p, f, &sim.read_root(root).expect("read root"))
            };
            (v.node_id().to_string(), render_view(p, v, &read, &activity))
        })
        .collect()
}

fn dump(name: &str, id: &str, label: &str, img: &Image) {
    let dir = std::env::temp_dir().join("weft_views");
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("{}_{}_{}.png", name, id, label));
    let _ = img.write_png(&path);
    eprintln!("wrote {}", path.display());
}

/// NaN and ±inf bit patterns as kernel scalars (run-time values: the wgpu
/// code generator folds constant `bitcast`s into float literals, and naga
/// rejects NaN and infinite literals).
fn special_floats() -> Value {
    json!({
        "nan_bits": {"type": "u32", "default": 2143289344u32},
        "inf_bits": {"type": "u32", "default": 2139095040u32},
        "ninf_bits": {"type": "u32", "default": 4286578688u32}
    })
}

/// Adds a view node wired to fields: `ports` = [(port, field node id)].
fn add_view(g: &mut Value, id: &str, kind: &str, params: Value, ports: &[(&str, &str)]) {
    g["nodes"]
        .as_array_mut()
        .expect("nodes")
        .push(json!({"id": id, "kind": kind, "params": params}));
    for (port, field) in ports {
        g["wires"]
            .as_array_mut()
            .expect("wires")
            .push(json!({"from": format!("{}.field", field), "to": format!("{}.{}", id, port)}));
    }
}

struct Stats {
    /// Fraction of pixels whose channels all differ by at most 3.
    within3: f64,
    max: u8,
    /// Pixels with any channel differing at all.
    differing: usize,
    worst: (u32, u32, [u8; 4], [u8; 4]),
    size: (u32, u32),
}

impl Stats {
    fn line(&self, name: &str, id: &str, a: &str, b: &str) -> String {
        format!(
            "{}/{}: {}x{}, {} vs {}: {:.4}% of pixels within 3 levels, {} pixels differ at all, max diff {} (at {:?}: {:?} vs {:?})",
            name,
            id,
            self.size.0,
            self.size.1,
            a,
            b,
            self.within3 * 100.0,
            self.differing,
            self.max,
            (self.worst.0, self.worst.1),
            self.worst.2,
            self.worst.3
        )
    }
}

fn diff(a_img: &Image, b_img: &Image) -> Stats {
    assert_eq!(
        (a_img.width, a_img.height),
        (b_img.width, b_img.height),
        "image sizes differ"
    );
    let (mut ok, mut max, mut differing, mut worst) = (0usize, 0u8, 0usize, (0, 0, [0; 4], [0; 4]));
    for y in 0..a_img.height {
        for x in 0..a_img.width {
            let (a, b) = (a_img.pixel(x, y), b_img.pixel(x, y));
            let d = (0..4).map(|c| a[c].abs_diff(b[c])).max().unwrap_or(0);
            if d <= 3 {
                ok += 1;
            }
            if d > 0 {
                differing += 1;
            }
            if d > max {
                max = d;
                worst = (x, y, a, b);
            }
        }
    }
    Stats {
        within3: ok as f64 / (a_img.width as f64 * a_img.height as f64),
        max,
        differing,
        worst,
        size: (a_img.width, a_img.height),
    }
}

/// Every example graph with views, after a few frames.
#[test]
fn every_example_draws_the_same_on_every_backend() {
    let mut names: Vec<String> = std::fs::read_dir(root().join("graphs"))
        .expect("graphs/ exists")
        .filter_map(|e| {
            let n = e.ok()?.file_name().into_string().ok()?;
            let stem = n.strip_suffix(".json")?;
            (!stem.ends_with(".expect")).then(|| stem.to_string())
        })
        .collect();
    names.sort();
    let mut drawn = 0;
    for name in names {
        // mpm3d_x8 is mpm3d's kernels and view at 8x the size: ~10 s more
        // on the VM for nothing mpm3d does not already check here.
        if name == "mpm3d_x8" {
            continue;
        }
        let mut g = example(&name);
        let has_views = build(&g).map(|p| !p.views.is_empty()).unwrap_or(false);
        if !has_views {
            continue;
        }
        shrink(&name, &mut g);
        let mut sim = Runs::new(&g, 2);
        for (id, img) in sim.check(&name) {
            assert!(!img.is_blank(), "{}/{}: the image is blank", name, id);
        }
        drawn += 1;
    }
    assert!(drawn >= 8, "only {} examples have views", drawn);
}

/// Keeps the slow examples' frames short (the VM runs them).
fn shrink(name: &str, g: &mut Value) {
    let has = |g: &Value, id: &str| {
        g["nodes"]
            .as_array()
            .is_some_and(|n| n.iter().any(|n| n["id"] == id))
    };
    if has(g, "substeps") && name.starts_with("mpm") {
        set_param(g, "substeps", "count", json!(2));
    }
    // The VM ray-marches every pixel: a 512² volume view is minutes there.
    if name == "blob3d" {
        set_param(g, "view3d", "width", json!(96));
        set_param(g, "view3d", "height", json!(72));
    }
    if ["smoke3d", "sparse3d", "dem3d"].contains(&name) {
        set_param(g, "view", "width", json!(96));
        set_param(g, "view", "height", json!(72));
    }
    // smoke3d on 16³ (80 Jacobi sweeps of 64³ are a minute per frame on
    // the VM); dem3d with 2 substeps per frame.
    if name == "smoke3d" {
        set_param(g, "grid", "shape", json!([16, 16, 16]));
        for node in g["nodes"].as_array_mut().expect("nodes") {
            if node["kind"] == "kernel" {
                node["params"]["scalars"]["n"]["default"] = json!(16);
            }
        }
    }
    if name == "dem3d" {
        set_param(g, "substeps", "count", json!(2));
    }
}

#[test]
fn life_auto_range_and_every_colormap() {
    // The example with its fixed range removed, drawn with each colormap.
    for map in ["viridis", "inferno", "magma", "grayscale", "coolwarm"] {
        let mut g = example("life");
        set_param(&mut g, "view", "colormap", json!(map));
        for n in g["nodes"].as_array_mut().unwrap() {
            if n["id"] == "view" {
                let p = n["params"].as_object_mut().unwrap();
                p.remove("min");
                p.remove("max");
            }
        }
        let mut sim = Runs::new(&g, 1);
        sim.check(&format!("life_{}", map));
    }
}

/// A gradient with NaN, ±inf and negative values, auto range, every colormap.
#[test]
fn scalar_f32_auto_range_with_nan_and_inf() {
    let code = "fn kernel(i: i32, j: i32) {
        let mut v = (i as f32 - 20.0) * 0.37 + sin(j as f32 * 0.3) * 4.0;
        if i == 3 && j == 5 { v = bitcast::<f32>(nan_bits); }
        if i == 7 { v = bitcast::<f32>(inf_bits); }
        if j == 2 && i > 50 { v = bitcast::<f32>(ninf_bits); }
        s[(i, j)] = v;
    }";
    let mut g = kernel_graph(
        &[F("s", "f32", &[97, 41], json!(0))],
        code,
        &[97, 41],
        special_floats(),
    );
    for map in ["viridis", "inferno", "magma", "grayscale", "coolwarm"] {
        add_view(
            &mut g,
            &format!("v_{}", map),
            "image",
            json!({"colormap": map}),
            &[("field", "s")],
        );
    }
    // A fixed range that the data exceeds on both sides.
    add_view(
        &mut g,
        "fixed",
        "image",
        json!({"colormap": "coolwarm", "min": -3.0, "max": 5.5}),
        &[("field", "s")],
    );
    let mut sim = Runs::new(&g, 0);
    sim.check("f32_nan_inf");
}

#[test]
fn all_non_finite_uses_unit_range() {
    let code = "fn kernel(i: i32, j: i32) { s[(i, j)] = select(i % 2 == 0, bitcast::<f32>(nan_bits), bitcast::<f32>(inf_bits)); }";
    let mut g = kernel_graph(
        &[F("s", "f32", &[8, 4], json!(0))],
        code,
        &[8, 4],
        special_floats(),
    );
    add_view(
        &mut g,
        "v",
        "image",
        json!({"colormap": "viridis"}),
        &[("field", "s")],
    );
    // A constant field: hi == lo, so span 1.
    g["nodes"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id": "c_cells", "kind": "dense", "params": {"shape": [5, 3]}}));
    g["nodes"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id": "c", "kind": "field", "params": {"type": "f32", "init": 0.25}}));
    g["wires"]
        .as_array_mut()
        .unwrap()
        .push(json!({"from": "c_cells.cells", "to": "c.layout"}));
    add_view(
        &mut g,
        "const",
        "image",
        json!({"colormap": "magma"}),
        &[("field", "c")],
    );
    let mut sim = Runs::new(&g, 0);
    sim.check("non_finite");
}

#[test]
fn integer_images() {
    let code = "fn kernel(i: i32, j: i32) {
        a[(i, j)] = (i * 7 - j * 13) % 50 - 20;
        u[(i, j)] = (i as u32) * 2654435761u32 ^ (j as u32);
    }";
    let mut g = kernel_graph(
        &[
            F("a", "i32", &[70, 33], json!(0)),
            F("u", "u32", &[70, 33], json!(0)),
        ],
        code,
        &[70, 33],
        json!({}),
    );
    add_view(
        &mut g,
        "i32_auto",
        "image",
        json!({"colormap": "viridis"}),
        &[("field", "a")],
    );
    add_view(
        &mut g,
        "i32_fixed",
        "image",
        json!({"colormap": "grayscale", "min": -10, "max": 10}),
        &[("field", "a")],
    );
    add_view(
        &mut g,
        "u32_auto",
        "image",
        json!({"colormap": "inferno"}),
        &[("field", "u")],
    );
    let mut sim = Runs::new(&g, 0);
    sim.check("integers");
}

#[test]
fn vector_images() {
    let code = "fn kernel(i: i32, j: i32) {
        let x = i as f32 / 63.0;
        let y = j as f32 / 47.0;
        c[(i, j)] = vec3(x * 1.4 - 0.2, y, 0.5 + sin(x * 9.0) * 0.7);
        d[(i, j)] = vec4(y, x, 1.0 - x, x * 1.2 - 0.1);
        if i == 5 && j == 6 {
            c[(i, j)] = vec3(bitcast::<f32>(nan_bits), bitcast::<f32>(inf_bits), bitcast::<f32>(ninf_bits));
            d[(i, j)] = vec4(0.5, 0.5, 0.5, bitcast::<f32>(nan_bits));
        }
    }";
    let mut g = kernel_graph(
        &[
            F("c", "vec3", &[64, 48], json!(0)),
            F("d", "vec4", &[64, 48], json!(0)),
        ],
        code,
        &[64, 48],
        special_floats(),
    );
    add_view(&mut g, "vec3_auto", "image", json!({}), &[("field", "c")]);
    add_view(
        &mut g,
        "vec3_fixed",
        "image",
        json!({"min": -0.5, "max": 2.0}),
        &[("field", "c")],
    );
    add_view(&mut g, "vec4_auto", "image", json!({}), &[("field", "d")]);
    let mut sim = Runs::new(&g, 0);
    sim.check("vectors");
}

fn particle_code(color: &str) -> String {
    format!(
        "fn kernel(p: i32) {{
        let t = p as f32;
        let r = fract(sin(t * 12.9898) * 43758.5453) * 1.2;
        let a = t * 2.39996;
        x[p] = vec2(cos(a) * r, sin(a) * r * 0.8);
        if p % 97 == 3 {{ x[p] = vec2(bitcast::<f32>(nan_bits), 0.0); }}
        if p % 89 == 5 {{ x[p] = vec2(0.1, bitcast::<f32>(inf_bits)); }}
        {}
    }}",
        color
    )
}

#[test]
fn particles_with_u32_colours() {
    let code = particle_code("col[p] = ((p as u32) * 2654435761u32) & 16777215u32;");
    let mut g = kernel_graph(
        &[
            F("x", "vec2", &[3000], json!(0)),
            F("col", "u32", &[3000], json!(0)),
        ],
        &code,
        &[3000],
        special_floats(),
    );
    let params = |radius: f64| json!({"width": 200, "height": 150, "radius": radius, "domain": [-1.0, -1.0, 1.0, 1.0], "background": [0.1, 0.2, 0.3]});
    add_view(
        &mut g,
        "r3",
        "particles",
        params(3.0),
        &[("positions", "x"), ("color", "col")],
    );
    add_view(
        &mut g,
        "r0",
        "particles",
        params(0.0),
        &[("positions", "x"), ("color", "col")],
    );
    add_view(
        &mut g,
        "r0_3",
        "particles",
        params(0.3),
        &[("positions", "x"), ("color", "col")],
    );
    add_view(
        &mut g,
        "big",
        "particles",
        params(12.5),
        &[("positions", "x"), ("color", "col")],
    );
    add_view(
        &mut g,
        "constant",
        "particles",
        json!({"width": 97, "height": 211, "radius": 1.5, "color": [1.0, 0.5, 0.0], "domain": [-0.5, -1.2, 0.9, 0.3]}),
        &[("positions", "x")],
    );
    let mut sim = Runs::new(&g, 0);
    sim.check("particles_u32");
}

#[test]
fn particles_with_vec3_colours() {
    let code =
        particle_code("col[p] = vec3(fract(t * 0.013), fract(t * 0.007), 1.0 - fract(t * 0.011));");
    let mut g = kernel_graph(
        &[
            F("x", "vec2", &[2500], json!(0)),
            F("col", "vec3", &[2500], json!(0)),
        ],
        &code,
        &[2500],
        special_floats(),
    );
    add_view(
        &mut g,
        "v",
        "particles",
        json!({"width": 256, "height": 256, "radius": 2.2, "domain": [-1.0, -1.0, 1.0, 1.0]}),
        &[("positions", "x"), ("color", "col")],
    );
    let mut sim = Runs::new(&g, 0);
    sim.check("particles_vec3");
}

/// dense [4, 4] of dense [16, 16] with interleaved fields (and a field on
/// the outer node), and a 1-D blocked particle layout.
#[test]
fn blocked_layouts() {
    let code = "fn kernel(i: i32, j: i32) {
        a[(i, j)] = sin(i as f32 * 0.21) + cos(j as f32 * 0.17) * 2.0 + select(i % 16 == 0, 1.5, 0.0);
        b[(i, j)] = vec3(i as f32 / 63.0, j as f32 / 63.0, select((i / 16 + j / 16) % 2 == 0, 0.2, 0.9));
        n[(i, j)] = i * 64 + j;
    }";
    let g = json!({
        "format": "weft-graph", "version": 1,
        "nodes": [
            {"id": "outer", "kind": "dense", "params": {"shape": [4, 4]}},
            {"id": "inner", "kind": "dense", "params": {"shape": [16, 16]}},
            {"id": "o", "kind": "field", "params": {"type": "f32", "init": 7}},
            {"id": "a", "kind": "field", "params": {"type": "f32"}},
            {"id": "b", "kind": "field", "params": {"type": "vec3"}},
            {"id": "n", "kind": "field", "params": {"type": "i32"}},
            {"id": "k", "kind": "kernel", "params": {"code": code, "range": [64, 64]}},
            {"id": "start", "kind": "on_start"},
            {"id": "va", "kind": "image", "params": {"colormap": "viridis"}},
            {"id": "vb", "kind": "image", "params": {}},
            {"id": "vn", "kind": "image", "params": {"colormap": "magma"}},
            {"id": "vo", "kind": "image", "params": {"colormap": "grayscale", "min": 0, "max": 10}},
            {"id": "pouter", "kind": "dense", "params": {"shape": [8]}},
            {"id": "pinner", "kind": "dense", "params": {"shape": [64]}},
            {"id": "m", "kind": "field", "params": {"type": "f32"}},
            {"id": "x", "kind": "field", "params": {"type": "vec2"}},
            {"id": "col", "kind": "field", "params": {"type": "vec3"}},
            {"id": "kp", "kind": "kernel", "params": {"code": "fn kernel(p: i32) {\n let t = p as f32;\n x[p] = vec2(fract(t * 0.6180339), fract(t * 0.3819660));\n col[p] = vec3(fract(t * 0.01), 0.5, 1.0 - fract(t * 0.03));\n m[p] = t;\n}", "range": [512]}},
            {"id": "vp", "kind": "particles", "params": {"width": 128, "height": 96, "radius": 2.5}}
        ],
        "wires": [
            {"from": "outer.cells", "to": "inner.parent"},
            {"from": "outer.cells", "to": "o.layout"},
            {"from": "inner.cells", "to": "a.layout"},
            {"from": "inner.cells", "to": "b.layout"},
            {"from": "inner.cells", "to": "n.layout"},
            {"from": "a.field", "to": "k.a"},
            {"from": "b.field", "to": "k.b"},
            {"from": "n.field", "to": "k.n"},
            {"from": "a.field", "to": "va.field"},
            {"from": "b.field", "to": "vb.field"},
            {"from": "n.field", "to": "vn.field"},
            {"from": "o.field", "to": "vo.field"},
            {"from": "pouter.cells", "to": "pinner.parent"},
            {"from": "pinner.cells", "to": "m.layout"},
            {"from": "pinner.cells", "to": "x.layout"},
            {"from": "pinner.cells", "to": "col.layout"},
            {"from": "x.field", "to": "kp.x"},
            {"from": "col.field", "to": "kp.col"},
            {"from": "m.field", "to": "kp.m"},
            {"from": "x.field", "to": "vp.positions"},
            {"from": "col.field", "to": "vp.color"}
        ],
        "exec": [{"from": "start.then", "to": "k"}, {"from": "k.then", "to": "kp"}]
    });
    let mut sim = Runs::new(&g, 0);
    // The storage really is blocked: cell (0, 16) of `a` is in the second outer cell.
    let p = &sim.program;
    let a = p.field_by_name("a").unwrap();
    assert!(
        weft_runtime::memory::field_address(p, a, &[0, 16])
            > weft_runtime::memory::field_address(p, a, &[1, 0])
    );
    sim.check("blocked");
}

/// Views of quantized fields decode in WGSL exactly like the host does for
/// the reference renderer: scalar float, packed fixed-point vector, small int, and
/// particles with fixed-point positions packed into one word.
#[test]
fn quantized_images_and_particles() {
    let code = "fn kernel(i: i32, j: i32) {
        let x = i as f32 / 63.0;
        let y = j as f32 / 47.0;
        s[(i, j)] = sin(x * 7.0) * cos(y * 5.0) * 300.0;
        c[(i, j)] = vec3(x * 1.4 - 0.2, y, 0.5 + sin(x * 9.0) * 0.7);
        n[(i, j)] = (i - j) / 3;
    }";
    let mut g = kernel_graph(
        &[
            F("s", "f32", &[64, 48], json!(0)),
            F("c", "vec3", &[64, 48], json!(0)),
            F("n", "i32", &[64, 48], json!(0)),
        ],
        code,
        &[64, 48],
        json!({}),
    );
    set_param(&mut g, "s", "storage", json!("float5m10"));
    set_param(&mut g, "c", "storage", json!("fixed8[-0.5,1.5]"));
    set_param(&mut g, "n", "storage", json!("int6"));
    add_view(&mut g, "s_auto", "image", json!({}), &[("field", "s")]);
    add_view(
        &mut g,
        "c_fixed",
        "image",
        json!({"min": -0.5, "max": 1.5}),
        &[("field", "c")],
    );
    add_view(&mut g, "n_auto", "image", json!({}), &[("field", "n")]);
    let mut sim = Runs::new(&g, 0);
    sim.check("quantized");

    let code = "fn kernel(p: i32) {
        let t = p as f32;
        let r = fract(sin(t * 12.9898) * 43758.5453) * 0.9;
        let a = t * 2.39996;
        x[p] = vec2(cos(a) * r, sin(a) * r * 0.8);
    }";
    let mut g = kernel_graph(
        &[F("x", "vec2", &[3000], json!(0))],
        code,
        &[3000],
        json!({}),
    );
    set_param(&mut g, "x", "storage", json!("fixed16[-1,1]"));
    add_view(
        &mut g,
        "p",
        "particles",
        json!({"width": 200, "height": 150, "radius": 2.0, "domain": [-1.0, -1.0, 1.0, 1.0]}),
        &[("positions", "x")],
    );
    let mut sim = Runs::new(&g, 0);
    sim.check("quantized_particles");

    // Shared-exponent positions (one word per particle).
    set_param(&mut g, "x", "storage", json!("float6m12"));
    set_param(&mut g, "x", "shared_exponent", json!(true));
    let mut sim = Runs::new(&g, 0);
    sim.check("shared_exponent_particles");
}

/// `show_active` on a sparse field (pointer → bitmasked → dense): the
/// inactive checkerboard and the outlines of active pointer blocks, on every
/// backend and as the reference draws them (graphs/sparse_blob on 1024²).
#[test]
fn sparse_activity_overlay() {
    let mut g = example("sparse_blob");
    set_param(&mut g, "blocks", "shape", json!([16, 16]));
    let mut sim = Runs::new(&g, 3);
    let views = sim.check("sparse_blob");
    let img = &views[0].1;
    let count = |rgb: [f32; 3]| {
        let want = rgb.map(|c| (c * 255.0 + 0.5) as u8);
        (0..img.height)
            .flat_map(|y| (0..img.width).map(move |x| (x, y)))
            .filter(|&(x, y)| img.pixel(x, y)[..3] == want)
            .count()
    };
    let [a, b] = weft_ir::ir::colormap::INACTIVE_RGB;
    let inactive = count(a) + count(b);
    assert!(
        inactive > 1024 * 1024 * 9 / 10,
        "{} inactive pixels",
        inactive
    );
    let outlined = (0..img.height)
        .flat_map(|y| (0..img.width).map(move |x| (x, y)))
        .filter(|&(x, y)| {
            let p = img.pixel(x, y);
            p[0] > 200 && p[1] > 150 && p[2] < 120
        })
        .count();
    assert!(outlined > 64 * 4, "{} outline pixels", outlined);
}

/// Views of fields in `bit_array`s: the bit inside the word depends on the
/// index (one-bit life cells 32 to a word; 4-bit values in 2x4 tiles).
#[test]
fn bit_array_images() {
    let mut g = example("life_bits");
    set_param(&mut g, "board", "shape", json!([256, 8]));
    set_param(&mut g, "step", "scalars", json!({"rows": 256, "cols": 8}));
    let mut sim = Runs::new(&g, 2);
    sim.check("life_bits");

    let code = "fn kernel(i: i32, j: i32) { t[(i, j)] = ((i * 3 + j * 5) % 16) as u32; }";
    let mut g = kernel_graph(
        &[F("t", "u32", &[1, 1], json!(0))],
        code,
        &[40, 64],
        json!({}),
    );
    set_param(&mut g, "t_cells", "shape", json!([20, 16]));
    set_param(&mut g, "t", "storage", json!("uint4"));
    let nodes = g["nodes"].as_array_mut().unwrap();
    nodes.push(json!({"id": "tile", "kind": "bit_array", "params": {"shape": [2, 4]}}));
    let wires = g["wires"].as_array_mut().unwrap();
    wires.retain(|w| w["to"] != "t.layout");
    wires.push(json!({"from": "t_cells.cells", "to": "tile.parent"}));
    wires.push(json!({"from": "tile.cells", "to": "t.layout"}));
    add_view(&mut g, "t_auto", "image", json!({}), &[("field", "t")]);
    let mut sim = Runs::new(&g, 0);
    let f = sim.field("t").unwrap();
    assert_eq!(sim.program.fields[f].shape, vec![40, 64]);
    sim.check("bit_array_tiles");

    // The same tiles under a pointer node, written in a few blocks only:
    // the view walks the references, then picks the bit (inactive blocks
    // show the init value, 3).
    let code = "fn kernel(i: i32, j: i32) { if (i / 8 + j / 16) % 3 == 0 { t[(i, j)] = ((i * 3 + j * 5) % 16) as u32; } }";
    let mut g = kernel_graph(
        &[F("t", "u32", &[1, 1], json!(3))],
        code,
        &[40, 64],
        json!({}),
    );
    set_param(&mut g, "t_cells", "shape", json!([4, 4]));
    set_param(&mut g, "t", "storage", json!("uint4"));
    let nodes = g["nodes"].as_array_mut().unwrap();
    nodes.push(
        json!({"id": "blocks", "kind": "pointer", "params": {"shape": [5, 4], "capacity": 20}}),
    );
    nodes.push(json!({"id": "tile", "kind": "bit_array", "params": {"shape": [2, 4]}}));
    let wires = g["wires"].as_array_mut().unwrap();
    wires.retain(|w| w["to"] != "t.layout");
    wires.push(json!({"from": "blocks.cells", "to": "t_cells.parent"}));
    wires.push(json!({"from": "t_cells.cells", "to": "tile.parent"}));
    wires.push(json!({"from": "tile.cells", "to": "t.layout"}));
    add_view(&mut g, "t_sparse", "image", json!({}), &[("field", "t")]);
    let mut sim = Runs::new(&g, 0);
    let f = sim.field("t").unwrap();
    assert_eq!(sim.program.fields[f].shape, vec![40, 64]);
    sim.check("bit_array_under_pointer");
}

/// A field under a `hash` root, then a `pointer` root: the view kernel probes
/// the table / follows references like kernel reads do (absent cells show
/// the init value); compared with the reference renderer, which reads through the
/// host's `AddressPlan::read_address`.
#[test]
fn hash_layout_images() {
    let code = "fn kernel(i: i32, j: i32) {
        let d = distance(vec2(i as f32, j as f32), vec2(37.0, 21.0));
        if d < 12.0 { x[(i, j)] = d; }
        if i == 60 && j == 3 { x[(i, j)] = 20.0; }
    }";
    let mut g = json!({
        "format": "weft-graph", "version": 1,
        "nodes": [
            {"id": "H", "kind": "hash", "params": {"shape": [8, 8], "capacity": 16}},
            {"id": "B", "kind": "dense", "params": {"shape": [8, 8]}},
            {"id": "x", "kind": "field", "params": {"type": "f32", "init": -5.0}},
            {"id": "s", "kind": "on_start"},
            {"id": "w", "kind": "kernel", "params": {"range": [64, 64], "code": code}}
        ],
        "wires": [
            {"from": "H.cells", "to": "B.parent"}, {"from": "B.cells", "to": "x.layout"},
            {"from": "x.field", "to": "w.x"}
        ],
        "exec": [{"from": "s.then", "to": "w"}]
    });
    add_view(
        &mut g,
        "v",
        "image",
        json!({"colormap": "viridis", "min": -5.0, "max": 20.0}),
        &[("field", "x")],
    );
    let mut s = Runs::new(&g, 0);
    s.check("hash");
    // The same under a pointer root (its view reads references the same way).
    g["nodes"][0] =
        json!({"id": "H", "kind": "pointer", "params": {"shape": [8, 8], "capacity": 16}});
    let mut s = Runs::new(&g, 0);
    s.check("pointer");
}

/// A 1-D series with NaN, ±inf, negative and zero values: auto and fixed
/// ranges, log scale, a ring with a count below, at and past its length, a
/// count field that is not set, more points than columns, tiny images and
/// line thicknesses 1, 2 (default) and 5.
#[test]
fn plots_of_series_rings_and_gaps() {
    let code = "fn kernel(i: i32) {
        let x = i as f32;
        let mut v = sin(x * 0.05) * 3.0 + x * 0.01;
        if i == 40 || (i >= 90 && i < 95) { v = bitcast::<f32>(nan_bits); }
        if i == 130 { v = bitcast::<f32>(inf_bits); }
        if i == 170 { v = bitcast::<f32>(ninf_bits); }
        if i == 200 { v = 0.0; }
        if i < 300 {
            s[i] = v;
            p[i] = exp(-x * 0.02) * 100.0 + select(i % 7 == 0, 0.0, 0.5);
        }
        big[i] = cos(x * 0.013) * x;
    }";
    let mut g = kernel_graph(
        &[
            F("s", "f32", &[300], json!(0)),
            F("p", "f32", &[300], json!(0)),
            F("big", "f32", &[1000], json!(0)),
            F("few", "f32", &[1], json!(2.5)),
            F("c_part", "i32", &[1], json!(120)),
            F("c_wrap", "i32", &[1], json!(1234)),
            F("c_neg", "i32", &[1], json!(-5)),
        ],
        code,
        &[1000],
        special_floats(),
    );
    add_view(
        &mut g,
        "auto",
        "plot",
        json!({"width": 200, "height": 80}),
        &[("field", "s")],
    );
    add_view(
        &mut g,
        "fixed",
        "plot",
        json!({"width": 131, "height": 57, "min": -2.0, "max": 2.0, "color": [0.2, 1.0, 0.4], "thickness": 1}),
        &[("field", "s")],
    );
    add_view(
        &mut g,
        "log",
        "plot",
        json!({"log": true, "width": 96, "height": 64, "thickness": 5}),
        &[("field", "s")],
    );
    add_view(
        &mut g,
        "log_fixed",
        "plot",
        json!({"log": true, "min": 0.1, "max": 50.0, "width": 120, "height": 40}),
        &[("field", "p")],
    );
    add_view(
        &mut g,
        "dense",
        "plot",
        json!({"width": 64, "height": 48}),
        &[("field", "big")],
    );
    add_view(
        &mut g,
        "one_point",
        "plot",
        json!({"width": 9, "height": 7}),
        &[("field", "few")],
    );
    add_view(
        &mut g,
        "one_column",
        "plot",
        json!({"width": 1, "height": 30}),
        &[("field", "s")],
    );
    for (id, c) in [("part", "c_part"), ("wrap", "c_wrap"), ("neg", "c_neg")] {
        add_view(
            &mut g,
            id,
            "plot",
            json!({"width": 150, "height": 50}),
            &[("field", "p")],
        );
        g["wires"]
            .as_array_mut()
            .unwrap()
            .push(json!({"from": format!("{}.field", c), "to": format!("{}.count", id)}));
    }
    let mut sim = Runs::new(&g, 0);
    let imgs = sim.check("plots");
    for (id, img) in &imgs {
        // `neg` plots nothing; `one_column` is all line (every value in one column).
        if id != "neg" && id != "one_column" {
            assert!(!img.is_blank(), "plots/{}: blank", id);
        }
    }
}

/// heat_inverse's loss history (`fit.loss` with `fit.step` as its count)
/// once the ring has wrapped: a short ring, enough frames.
#[test]
fn loss_ring_plot_after_wrapping() {
    let mut g = example("heat_inverse");
    set_param(&mut g, "fit", "history", json!(10));
    let mut sim = Runs::new(&g, 4);
    sim.check("heat_inverse_ring");
}

#[test]
fn plot_errors_name_the_node_and_port() {
    let mut g = kernel_graph(
        &[
            F("s", "f32", &[4, 4], json!(0)),
            F("c", "f32", &[1], json!(0)),
        ],
        "fn kernel(i: i32, j: i32) { s[(i, j)] = 1.0; }",
        &[4, 4],
        json!({}),
    );
    add_view(&mut g, "pl", "plot", json!({}), &[("field", "s")]);
    let e = build(&g).expect_err("a 2D field").to_string();
    assert!(
        e.contains("pl") && e.contains("field") && e.contains("1D f32"),
        "{}",
        e
    );
    let mut g = kernel_graph(
        &[F("s", "f32", &[4], json!(0)), F("c", "f32", &[1], json!(0))],
        "fn kernel(i: i32) { s[i] = 1.0; }",
        &[4],
        json!({}),
    );
    add_view(
        &mut g,
        "pl",
        "plot",
        json!({}),
        &[("field", "s"), ("count", "c")],
    );
    let e = build(&g).expect_err("an f32 count").to_string();
    assert!(
        e.contains("pl") && e.contains("count") && e.contains("i32"),
        "{}",
        e
    );
    for (params, word) in [
        (json!({"min": 1.0}), "max"),
        (json!({"min": 2.0, "max": 1.0}), "min"),
        (json!({"min": 0.0, "max": 1.0, "log": true}), "log"),
    ] {
        let mut g = kernel_graph(
            &[F("s", "f32", &[4], json!(0))],
            "fn kernel(i: i32) { s[i] = 1.0; }",
            &[4],
            json!({}),
        );
        add_view(&mut g, "pl", "plot", params, &[("field", "s")]);
        let e = build(&g).expect_err("a bad range").to_string();
        assert!(e.contains("pl") && e.contains(word), "{}", e);
    }
    // An optimize node's loss is for views only.
    let mut g = example("heat_inverse");
    g["wires"]
        .as_array_mut()
        .unwrap()
        .push(json!({"from": "fit.loss", "to": "show.result"}));
    let e = build(&g)
        .expect_err("a kernel reading fit.loss")
        .to_string();
    assert!(e.contains("show") && e.contains("fit.loss"), "{}", e);
    // ... and for `plot`s: an image of it, or its ports swapped.
    let mut g = example("heat_inverse");
    for w in g["wires"].as_array_mut().unwrap() {
        if w["to"] == "target_view.field" {
            w["from"] = json!("fit.loss");
        }
    }
    let e = build(&g).expect_err("an image of fit.loss").to_string();
    assert!(e.contains("target_view") && e.contains("plot"), "{}", e);
    let mut g = example("heat_inverse");
    for w in g["wires"].as_array_mut().unwrap() {
        if w["to"] == "loss_plot.field" {
            w["from"] = json!("fit.step");
        } else if w["to"] == "loss_plot.count" {
            w["from"] = json!("fit.loss");
        }
    }
    let e = build(&g).expect_err("swapped ports").to_string();
    assert!(e.contains("loss_plot") && e.contains("fit.step"), "{}", e);
    // An optimize node outside the schedule adds no fields: the pass says so.
    let mut g = example("heat_inverse");
    g["exec"]
        .as_array_mut()
        .unwrap()
        .retain(|e| e["to"] != "fit");
    let mut p = build(&g).expect("builds");
    let e = weft_ir::passes::run_pipeline(&mut p, &Default::default(), None)
        .expect_err("no fit.loss")
        .to_string();
    assert!(e.contains("loss_plot") && e.contains("fit.loss"), "{}", e);
}

/// Plots read their field through its own address plan: a quantized f32
/// field and a bitmasked one (inactive cells read `init`).
#[test]
fn plots_of_quantized_and_sparse_fields() {
    let code = "fn kernel(i: i32) {
        let x = i as f32;
        q[i] = sin(x * 0.07) * 40.0;
        if i < 120 && i % 9 != 4 { b[i] = cos(x * 0.05) + x * 0.01; }
    }";
    let mut g = kernel_graph(
        &[
            F("q", "f32", &[200], json!(0)),
            F("b", "f32", &[200], json!(-1.0)),
        ],
        code,
        &[200],
        json!({}),
    );
    set_param(&mut g, "q", "storage", json!("float5m10"));
    for n in g["nodes"].as_array_mut().unwrap() {
        if n["id"] == "b_cells" {
            n["kind"] = json!("bitmasked");
        }
    }
    add_view(
        &mut g,
        "q_plot",
        "plot",
        json!({"width": 160, "height": 60}),
        &[("field", "q")],
    );
    add_view(
        &mut g,
        "b_plot",
        "plot",
        json!({"width": 160, "height": 60, "thickness": 3}),
        &[("field", "b")],
    );
    let mut sim = Runs::new(&g, 0);
    for (id, img) in sim.check("plots_layouts") {
        assert!(!img.is_blank(), "plots_layouts/{}: blank", id);
    }
}

/// The graph of the histogram tests: a 1-D f32 series with NaN and ±inf,
/// a 2-D bitmasked field written in some cells only, a vec2 field (with a
/// NaN component), a 2-D i32 field, a 3-D u32 field and a quantized f32
/// field, under auto and fixed ranges, log heights, 1 and 1024 bins and
/// wide bars (gap columns).
fn histogram_graph() -> Value {
    let code = "fn kernel(i: i32) {
        let x = i as f32;
        let mut v = sin(x * 0.05) * 3.0 + x * 0.01;
        if i % 37 == 4 { v = bitcast::<f32>(nan_bits); }
        if i == 130 { v = bitcast::<f32>(inf_bits); }
        if i == 170 { v = bitcast::<f32>(ninf_bits); }
        if i < 300 { s[i] = v; q[i] = cos(x * 0.03) * 20.0; }
        if i < 1024 {
            let a = i / 32;
            let b = i % 32;
            if (a / 8 + b / 8) % 3 == 0 { sp[(a, b)] = x * 0.25 - 60.0; }
            n[(a, b)] = (i * 7) % 23 - 11;
        }
        if i < 200 {
            vv[i] = vec2(cos(x * 0.1) * x * 0.01, sin(x * 0.1));
            if i == 17 { vv[i] = vec2(bitcast::<f32>(nan_bits), 1.0); }
        }
        if i < 120 { u[(i / 30, (i / 6) % 5, i % 6)] = (i * i % 50) as u32; }
    }";
    let mut g = kernel_graph(
        &[
            F("s", "f32", &[300], json!(0)),
            F("q", "f32", &[300], json!(0)),
            F("sp", "f32", &[32, 32], json!(-1000.0)),
            F("n", "i32", &[32, 32], json!(0)),
            F("vv", "vec2", &[200], json!(0)),
            F("u", "u32", &[4, 5, 6], json!(0)),
        ],
        code,
        &[1024],
        special_floats(),
    );
    set_param(&mut g, "q", "storage", json!("float5m10"));
    set_param(&mut g, "sp_cells", "shape", json!([32, 32]));
    for n in g["nodes"].as_array_mut().unwrap() {
        if n["id"] == "sp_cells" {
            n["kind"] = json!("bitmasked");
        }
    }
    let views: &[(&str, &str, Value)] = &[
        ("h_s", "s", json!({"width": 200, "height": 80})),
        (
            "h_s_fixed",
            "s",
            json!({"bins": 16, "min": -2.0, "max": 2.0, "width": 131, "height": 57, "color": [0.2, 1.0, 0.4]}),
        ),
        ("h_s_one", "s", json!({"bins": 1, "width": 9, "height": 7})),
        (
            "h_sp",
            "sp",
            json!({"bins": 32, "width": 160, "height": 60}),
        ),
        (
            "h_n",
            "n",
            json!({"bins": 23, "width": 100, "height": 40, "log": true}),
        ),
        ("h_vv", "vv", json!({"bins": 40, "log": true})),
        (
            "h_u",
            "u",
            json!({"bins": 1024, "width": 300, "height": 50}),
        ),
        ("h_q", "q", json!({"bins": 10, "width": 64, "height": 32})),
    ];
    for (id, f, params) in views {
        add_view(&mut g, id, "histogram", params.clone(), &[("field", f)]);
    }
    g
}

/// Histograms drawn by their kernels on vm, cpu and wgpu equal the
/// reference renderer's picture exactly (`check`).
#[test]
fn histograms_of_any_field() {
    let mut sim = Runs::new(&histogram_graph(), 0);
    for (id, img) in sim.check("histograms") {
        // One bin fills the whole image with its bar.
        if id != "h_s_one" {
            assert!(!img.is_blank(), "histograms/{}: blank", id);
        }
    }
}

/// The counts the kernels leave in `VIEW.bins`, `VIEW.nonfinite` and
/// `VIEW.outside` on every backend equal a count made here from the
/// fields' values read back (the sparse field's active cells from the
/// kernel's own condition, vector magnitudes with `hypot`).
#[test]
fn histogram_counts_match_the_values() {
    let runs = Runs::new(&histogram_graph(), 0);
    let mut sims = vec![
        ("vm", runs.copy_to(Backend::Vm, None)),
        ("cpu", runs.copy_to(Backend::Jit, None)),
    ];
    if let Some(ctx) = gpu() {
        sims.push(("wgpu", runs.copy_to(Backend::Wgpu, Some(ctx))));
    }
    let p = &runs.program;
    for (label, sim) in &mut sims {
        sim.render_views().expect("views");
        for v in &p.views {
            let weft_ir::ir::View::Histogram {
                node_id,
                field,
                bins,
                range,
                ..
            } = v
            else {
                continue;
            };
            let name = p.fields[*field].name.clone();
            let words = sim.read_field(*field).expect("field");
            let ty = p.fields[*field].ty;
            let values: Vec<f32> = match (name.as_str(), ty) {
                ("sp", _) => (0..1024)
                    .filter(|i| (i / 32 / 8 + i % 32 / 8) % 3 == 0)
                    .map(|i| f32::from_bits(words[i]))
                    .collect(),
                ("n", _) => words.iter().map(|&w| w as i32 as f32).collect(),
                ("u", _) => words.iter().map(|&w| w as f32).collect(),
                ("vv", _) => words
                    .chunks(2)
                    .map(|c| {
                        let (a, b) = (f32::from_bits(c[0]), f32::from_bits(c[1]));
                        (a * a + b * b).sqrt()
                    })
                    .collect(),
                _ => words.iter().map(|&w| f32::from_bits(w)).collect(),
            };
            // Independent: the finite values' range, then each value's bin.
            let fin: Vec<f32> = values.iter().copied().filter(|v| v.is_finite()).collect();
            let (lo, hi) = range.unwrap_or((
                fin.iter().copied().fold(f32::INFINITY, f32::min),
                fin.iter().copied().fold(f32::NEG_INFINITY, f32::max),
            ));
            let mut want = vec![0u32; *bins as usize];
            let (mut nonfinite, mut below, mut above) = (0u32, 0u32, 0u32);
            for &x in &values {
                if x.is_nan() || x.is_infinite() {
                    nonfinite += 1;
                } else if x < lo {
                    below += 1;
                } else if x > hi {
                    above += 1;
                } else {
                    let span = if hi > lo { hi - lo } else { 1.0 };
                    let b = ((x - lo) / span * *bins as f32).floor() as i64;
                    want[b.clamp(0, *bins as i64 - 1) as usize] += 1;
                }
            }
            let read = |suffix: &str| {
                let f = sim
                    .field(&format!("{}.{}", node_id, suffix))
                    .unwrap_or_else(|| panic!("no field {}.{}", node_id, suffix));
                sim.read_field(f).expect("read")
            };
            assert_eq!(read("bins"), want, "{} {}: bins", label, node_id);
            assert_eq!(read("nonfinite"), vec![nonfinite], "{} {}", label, node_id);
            assert_eq!(read("outside"), vec![below, above], "{} {}", label, node_id);
            let counted = want.iter().sum::<u32>() + nonfinite + below + above;
            assert_eq!(counted as usize, values.len(), "{} {}", label, node_id);
        }
    }
    // The graph exercises what it claims: NaNs, values outside a fixed range.
    let vm = &mut sims[0].1;
    let f = vm.field("h_s.nonfinite").unwrap();
    assert!(vm.read_field(f).unwrap()[0] > 5);
    let f = vm.field("h_vv.nonfinite").unwrap();
    assert_eq!(vm.read_field(f).unwrap()[0], 1);
    let f = vm.field("h_s_fixed.outside").unwrap();
    let o = vm.read_field(f).unwrap();
    assert!(o[0] > 0 && o[1] > 0, "{:?}", o);
}

#[test]
fn histogram_errors_name_the_node() {
    let g0 = kernel_graph(
        &[F("s", "f32", &[4], json!(0))],
        "fn kernel(i: i32) { s[i] = 1.0; }",
        &[4],
        json!({}),
    );
    for (params, word) in [
        (json!({"min": 1.0}), "max"),
        (json!({"min": 2.0, "max": 1.0}), "min"),
        (json!({"bins": 0}), "bins"),
        (json!({"bins": 5000}), "bins"),
    ] {
        let mut g = g0.clone();
        add_view(&mut g, "hist", "histogram", params, &[("field", "s")]);
        let e = build(&g).expect_err("bad params").to_string();
        assert!(e.contains("hist") && e.contains(word), "{}", e);
    }
}

/// Histograms of mpm88's particle velocities (vec2 magnitudes) and affine
/// matrices (mat2, Frobenius norm) after a frame, on every backend.
#[test]
fn histograms_of_simulated_vectors_and_matrices() {
    let mut g = example("mpm88");
    add_view(
        &mut g,
        "speeds",
        "histogram",
        json!({"bins": 48, "width": 192, "height": 64}),
        &[("field", "v")],
    );
    add_view(
        &mut g,
        "affine",
        "histogram",
        json!({"log": true, "width": 128, "height": 48}),
        &[("field", "C")],
    );
    let mut sim = Runs::new(&g, 1);
    for (id, img) in sim.check("mpm88_histograms") {
        if id == "speeds" || id == "affine" {
            assert!(!img.is_blank(), "mpm88_histograms/{}: blank", id);
        }
    }
}

/// A field node's `grad` output draws its gradient field `ID.grad`: the
/// image of `u0.grad` after a few optimize iterations of heat_inverse is
/// the render of the gradient read back from the simulation (and not of
/// `u0` itself); without `grad: true` the view is refused, naming it.
#[test]
fn gradient_images() {
    let mut g = example("heat_inverse");
    add_view(
        &mut g,
        "grad_view",
        "image",
        json!({"colormap": "coolwarm"}),
        &[],
    );
    g["wires"]
        .as_array_mut()
        .unwrap()
        .push(json!({"from": "u0.grad", "to": "grad_view.field"}));
    let mut sim = Runs::new(&g, 2);
    let views = sim.check("heat_inverse_grad");
    let p = &sim.program;
    let u0 = p.field_by_name("u0").unwrap();
    let grad = p.field_by_name("u0.grad").unwrap();
    let view = p
        .views
        .iter()
        .find(|v| v.node_id() == "grad_view")
        .expect("grad view");
    let weft_ir::ir::View::Image { field, .. } = view else {
        panic!("not an image: {:?}", view)
    };
    assert_eq!(*field, grad);
    // The gradient is not zero (an optimize iteration ran backward) and
    // differs from u0, so the picture is of the gradient.
    let gw = sim.read_field(grad).unwrap();
    assert!(gw.iter().any(|&w| f32::from_bits(w) != 0.0));
    assert_ne!(gw, sim.read_field(u0).unwrap());
    let img = &views.iter().find(|(id, _)| id == "grad_view").unwrap().1;
    let none = |_| None;
    let read = |f| sim.read_field(f).unwrap();
    let want = weft_tests::view_reference::render_view(p, view, &read, &none);
    let s = diff(&want, img);
    assert!(
        s.within3 >= 0.995 && s.max <= 40,
        "{}",
        s.line("heat_inverse", "grad_view", "u0.grad reference", "vm")
    );
    // The same view of `u0` itself looks different.
    let mut of_u0 = view.clone();
    if let weft_ir::ir::View::Image { field, .. } = &mut of_u0 {
        *field = u0;
    }
    let other = weft_tests::view_reference::render_view(p, &of_u0, &read, &none);
    assert!(
        diff(&other, img).within3 < 0.5,
        "the view draws u0, not its gradient"
    );

    // Without `grad: true` the wire is refused at the view's port.
    let wire = |g: &mut Value, from: &str, to: &str| {
        for w in g["wires"].as_array_mut().unwrap() {
            if w["to"] == to {
                w["from"] = json!(from);
            }
        }
    };
    let mut bad = g.clone();
    wire(&mut bad, "result.grad", "grad_view.field");
    let err = build(&bad).expect_err("no gradient").to_string();
    assert!(
        err.contains("node 'grad_view', port 'field'")
            && err.contains("result.grad")
            && err.contains("\"grad\": true"),
        "{}",
        err
    );
    // A kernel port takes the field; its code reads `port.grad[...]`.
    let mut bad = g.clone();
    wire(&mut bad, "u0.grad", "seed.u0");
    let err = build(&bad).expect_err("grad into a kernel").to_string();
    assert!(
        err.contains("node 'seed', port 'u0'") && err.contains("u0.grad[...]"),
        "{}",
        err
    );
}

/// 400 vec3 particles in the box [-1, 1]³: a cloud, a column of 20
/// overlapping particles along z (different depths on the same pixels in
/// the front view), some behind or beside the camera, some non-finite.
fn particles_3d_graph(color: &str) -> Value {
    let code = format!(
        "fn kernel(p: i32) {{
        let t = p as f32;
        let a = fract(sin(t * 12.9898) * 43758.5453) * 2.0 - 1.0;
        let b = fract(sin(t * 78.233) * 12345.678) * 2.0 - 1.0;
        let c = fract(sin(t * 39.425) * 24680.135) * 2.0 - 1.0;
        x[p] = vec3(a, b * 0.8, c);
        if p < 20 {{ x[p] = vec3(0.2 + t * 0.004, 0.1, 0.9 - t * 0.09); }}
        if p % 97 == 3 {{ x[p] = vec3(bitcast::<f32>(nan_bits), 0.0, 0.0); }}
        if p % 89 == 5 {{ x[p] = vec3(0.1, 0.0, bitcast::<f32>(inf_bits)); }}
        if p % 61 == 7 {{ x[p] = vec3(a, b, 40.0); }}
        if p % 53 == 9 {{ x[p] = vec3(60.0, b, c); }}
        {}
    }}",
        color
    );
    let (ty, init) = if color.contains("vec3") {
        ("vec3", json!(0))
    } else {
        ("u32", json!(0))
    };
    kernel_graph(
        &[F("x", "vec3", &[400], json!(0)), F("col", ty, &[400], init)],
        &code,
        &[400],
        special_floats(),
    )
}

#[test]
fn particles_3d_match_the_reference_on_every_backend() {
    let mut g = particles_3d_graph(
        "col[p] = vec3(fract(t * 0.013), fract(t * 0.007), 1.0 - fract(t * 0.011));",
    );
    let domain = json!([-1.0, -1.0, -1.0, 1.0, 1.0, 1.0]);
    let views = [
        ("default", json!(null), 3.0),
        ("front", json!({"yaw": 0, "pitch": 0}), 4.0),
        ("side", json!({"yaw": 90, "pitch": 0, "fov": 30}), 2.5),
        ("top", json!({"yaw": 0, "pitch": 90, "distance": 5}), 3.0),
        // Inside the cloud: many particles behind the camera.
        (
            "inside",
            json!({"target": [0.0, 0.0, -0.5], "distance": 0.6, "yaw": 10, "pitch": -15, "fov": 70}),
            6.5,
        ),
    ];
    for (id, camera, radius) in views {
        let mut params = json!({"width": 160, "height": 120, "radius": radius, "domain": domain, "background": [0.1, 0.2, 0.3]});
        if !camera.is_null() {
            params["camera"] = camera;
        }
        add_view(
            &mut g,
            id,
            "particles",
            params,
            &[("positions", "x"), ("color", "col")],
        );
    }
    add_view(
        &mut g,
        "constant",
        "particles",
        json!({"width": 97, "height": 211, "radius": 1.5, "color": [1.0, 0.5, 0.0], "domain": domain}),
        &[("positions", "x")],
    );
    let mut sim = Runs::new(&g, 0);
    let imgs = sim.check("particles_3d");
    // The front view shows the column's nearest particle (index 0, z = 0.9)
    // where the column's discs overlap: its colour, not a farther one's.
    let front = &imgs.iter().find(|(id, _)| id == "front").expect("front").1;
    let drawn = front
        .rgba
        .chunks(4)
        .filter(|p| p[..3] != [26, 51, 77])
        .count();
    assert!(
        drawn > 1000,
        "the front view draws particles ({} pixels)",
        drawn
    );
}

#[test]
fn particles_3d_u32_colours() {
    let mut g = particles_3d_graph("col[p] = ((p as u32) * 2654435761u32) & 16777215u32;");
    add_view(
        &mut g,
        "u",
        "particles",
        json!({"width": 128, "height": 128, "radius": 5.0, "domain": [-1.0, -1.0, -1.0, 1.0, 1.0, 1.0], "camera": {"yaw": -40, "pitch": 35}}),
        &[("positions", "x"), ("color", "col")],
    );
    let mut sim = Runs::new(&g, 0);
    sim.check("particles_3d_u32");
}

/// Projection by hand from the formula in `weft_ir::passes::views::camera`
/// (not the reference renderer): a 100 x 100 image, fov 90 (focal length
/// 0.5 * 100 / tan(45°) = 50 pixels), distance 2 around the origin. The
/// white particle 1 lies at camera-space (x, y) = (0.5, 0.25), depth 2 in
/// each of the front, side and top views, so its centre is
/// (50 + 0.5 / 2 × 50, 50 - 0.25 / 2 × 50) = (62.5, 43.75). With radius 3 it covers the
/// pixels whose centres are within 3 of it: columns 60..=64 (column 59's
/// nearest centre, (59.5, 43.5), is sqrt(9 + 0.0625) away), rows 41..=46
/// (in column 62: 41.5 and 46.5 are 2.25 and 2.75 from 43.75). The red
/// particle 0 projects to the same centre from twice as far (depth 4), so
/// the white one wins; particle 2 lies behind the camera (depth -0.5) and
/// draws nothing (it would mirror to (0, 75)).
#[test]
fn particles_3d_projection_by_hand_per_axis_view() {
    // (camera, particle 0, particle 1, particle 2) in world space.
    let cases = [
        (
            "front",
            json!({"yaw": 0, "pitch": 0}),
            "vec3(1.0, 0.5, -2.0)",
            "vec3(0.5, 0.25, 0.0)",
            "vec3(0.5, 0.25, 2.5)",
        ),
        (
            "side",
            json!({"yaw": 90, "pitch": 0}),
            "vec3(-2.0, 0.5, -1.0)",
            "vec3(0.0, 0.25, -0.5)",
            "vec3(2.5, 0.25, -0.5)",
        ),
        (
            "top",
            json!({"yaw": 0, "pitch": 90}),
            "vec3(1.0, -2.0, -0.5)",
            "vec3(0.5, 0.0, -0.25)",
            "vec3(0.5, 2.5, -0.25)",
        ),
    ];
    for (name, mut camera, p0, p1, p2) in cases {
        camera["target"] = json!([0.0, 0.0, 0.0]);
        camera["distance"] = json!(2.0);
        camera["fov"] = json!(90.0);
        let code = format!(
            "fn kernel(p: i32) {{
            if p == 0 {{ x[p] = {}; col[p] = 16711680u32; }}
            if p == 1 {{ x[p] = {}; col[p] = 16777215u32; }}
            if p == 2 {{ x[p] = {}; col[p] = 65280u32; }}
        }}",
            p0, p1, p2
        );
        let mut g = kernel_graph(
            &[
                F("x", "vec3", &[3], json!(0)),
                F("col", "u32", &[3], json!(0)),
            ],
            &code,
            &[3],
            json!({}),
        );
        add_view(
            &mut g,
            "view",
            "particles",
            json!({"width": 100, "height": 100, "radius": 3.0, "background": [0.0, 0.0, 0.0], "domain": [-1.0, -1.0, -1.0, 1.0, 1.0, 1.0], "camera": camera}),
            &[("positions", "x"), ("color", "col")],
        );
        let mut sim = Runs::new(&g, 0);
        let imgs = sim.check(&format!("particles_3d_hand_{}", name));
        let img = &imgs[0].1;
        let px = |x: u32, y: u32| {
            let i = ((y * img.width + x) * 4) as usize;
            [img.rgba[i], img.rgba[i + 1], img.rgba[i + 2]]
        };
        let (mut x0, mut x1, mut y0, mut y1) = (u32::MAX, 0, u32::MAX, 0);
        for y in 0..img.height {
            for x in 0..img.width {
                let c = px(x, y);
                if c != [0, 0, 0] {
                    // Only the white particle shows: grey, lit.
                    assert!(
                        c[0] == c[1] && c[1] == c[2],
                        "{}: ({}, {}) is {:?}",
                        name,
                        x,
                        y,
                        c
                    );
                    (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
                }
            }
        }
        assert_eq!(
            (x0, x1, y0, y1),
            (60, 64, 41, 46),
            "{}: the splat's pixels",
            name
        );
        assert!(
            px(62, 43)[0] > 150,
            "{}: the lit centre {:?}",
            name,
            px(62, 43)
        );
    }
}

#[test]
fn particles_3d_errors_name_the_node_and_param() {
    let g0 = kernel_graph(
        &[
            F("x", "vec3", &[4], json!(0)),
            F("y", "vec2", &[4], json!(0)),
        ],
        "fn kernel(i: i32) { x[i] = vec3(0.0, 0.0, 0.0); y[i] = vec2(0.0, 0.0); }",
        &[4],
        json!({}),
    );
    let box3 = json!([0.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
    for (positions, params, word) in [
        ("x", json!({}), "3-D domain"),
        ("x", json!({"domain": [0.0, 0.0, 1.0, 1.0]}), "3-D domain"),
        (
            "x",
            json!({"domain": [0.0, 0.0, 0.0, 1.0, 0.0, 1.0]}),
            "max > min",
        ),
        ("x", json!({"domain": [0.0, 0.0, 0.0, 1.0, 1.0]}), "6 (3-D)"),
        (
            "x",
            json!({"domain": box3, "camera": {"pitch": 120}}),
            "'pitch'",
        ),
        ("x", json!({"domain": box3, "camera": {"fov": 0}}), "'fov'"),
        (
            "x",
            json!({"domain": box3, "camera": {"distance": -1}}),
            "'distance'",
        ),
        (
            "x",
            json!({"domain": box3, "camera": {"target": [1, 2]}}),
            "'target'",
        ),
        (
            "x",
            json!({"domain": box3, "camera": {"zoom": 2}}),
            "'zoom'",
        ),
        ("x", json!({"domain": box3, "camera": 5}), "camera"),
        ("x", json!({"domain": box3, "radius": 0.0}), "radius"),
        ("y", json!({"camera": {"yaw": 10}}), "vec3 positions"),
        ("x", json!({"domain": box3, "show_box": 1}), "show_box"),
        (
            "x",
            json!({"domain": box3, "show_axes": "yes"}),
            "show_axes",
        ),
        ("y", json!({"show_box": true}), "show_box is for 3-D"),
    ] {
        let mut g = g0.clone();
        add_view(
            &mut g,
            "cloud",
            "particles",
            params.clone(),
            &[("positions", positions)],
        );
        let e = build(&g).expect_err("bad params").to_string();
        assert!(e.contains("cloud") && e.contains(word), "{}: {}", params, e);
    }
    let mut g = g0.clone();
    add_view(
        &mut g,
        "cloud",
        "particles",
        json!({"domain": box3}),
        &[("positions", "x")],
    );
    build(&g).expect("a 3-D domain alone builds (default camera)");
}

/// A cloud of 3-D particles moving each frame, with a particles view of
/// `params` (camera, turntable).
fn cloud_graph(params: Value) -> Value {
    let code = "fn kernel(p: i32) {
        let t = p as f32 + 0.25 * frame() as f32;
        x[p] = vec3(fract(t * 0.6180339), fract(t * 0.3819660), fract(t * 0.1234567));
        col[p] = vec3(fract(t * 0.01), 0.5, 1.0 - fract(t * 0.03));
    }";
    let mut g = kernel_graph(
        &[
            F("x", "vec3", &[300], json!(0)),
            F("col", "vec3", &[300], json!(0)),
        ],
        code,
        &[300],
        json!({}),
    );
    let mut p =
        json!({"width": 96, "height": 80, "radius": 2.5, "domain": [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]});
    for (k, v) in params.as_object().expect("params").iter() {
        p[k] = v.clone();
    }
    add_view(
        &mut g,
        "view",
        "particles",
        p,
        &[("positions", "x"), ("color", "col")],
    );
    g
}

/// `Simulation::set_view_camera` moves the camera with no rebuild: the
/// picture is the one of a build that saved that camera, on every backend,
/// and the camera field holds the host-computed frame's bits.
#[test]
fn particles_3d_runtime_camera_equals_the_saved_camera() {
    use weft_ir::passes::views::camera::{field_name, Frame};
    let moved = weft_ir::ir::Camera {
        target: [0.4, 0.6, 0.45],
        distance: 2.25,
        yaw: -57.5,
        pitch: 63.0,
        fov: 35.0,
    };
    let saved = cloud_graph(json!({"camera": {
        "target": moved.target, "distance": moved.distance, "yaw": moved.yaw,
        "pitch": moved.pitch, "fov": moved.fov}}));
    let mut want = Runs::new(&saved, 2);
    let want_imgs = want.check("runtime_camera_saved");
    let mut backends = vec![(Backend::Vm, None), (Backend::Jit, None)];
    if let Some(ctx) = gpu() {
        backends.push((Backend::Wgpu, Some(ctx)));
    }
    for (backend, ctx) in backends {
        let mut sim = open(&cloud_graph(json!({})), backend, ctx);
        for _ in 0..2 {
            sim.step_frame().expect("frame");
        }
        let before = sim.render_views().expect("views");
        assert_ne!(
            before[0].1.rgba, want_imgs[0].1.rgba,
            "the default camera differs"
        );
        sim.set_view_camera("view", moved).expect("set camera");
        assert_eq!(sim.view_camera("view"), Some(moved));
        let f = sim.field(&field_name("view")).expect("camera field");
        assert!(sim.program.is_view_field(f), "a system field");
        assert_eq!(
            sim.read_field(f).expect("read"),
            Frame::new(&moved, 96, 80).words()
        );
        let got = sim.render_views().expect("views");
        let s = diff(&want_imgs[0].1, &got[0].1);
        let allowed = if backend == Backend::Wgpu {
            GPU_LEVELS
        } else {
            0
        };
        assert!(
            s.max <= allowed,
            "{:?}: {}",
            backend,
            s.line("runtime camera", "view", "saved", "set")
        );
        // A reset keeps the camera set since the start.
        sim.reset().expect("reset");
        assert_eq!(
            sim.read_field(f).expect("read"),
            Frame::new(&moved, 96, 80).words()
        );
    }
    let mut sim = open(&cloud_graph(json!({})), Backend::Vm, None);
    let e = sim.set_view_camera("nope", moved).unwrap_err().to_string();
    assert!(e.contains("'nope'") && e.contains("3-D view"), "{}", e);
    let bad = weft_ir::ir::Camera {
        pitch: 91.0,
        ..moved
    };
    let e = sim.set_view_camera("view", bad).unwrap_err().to_string();
    assert!(e.contains("'view'") && e.contains("pitch"), "{}", e);
}

/// A turntable (`orbit_degrees_per_frame`): frame k is drawn with the
/// saved yaw + k * step, the picture of a build saving that yaw.
#[test]
fn particles_3d_turntable_frame_k_is_the_turned_camera() {
    let step = 12.5f32;
    let cam = json!({"yaw": 20.0, "pitch": 25.0});
    let mut turn = open(
        &cloud_graph(json!({"camera": cam, "orbit_degrees_per_frame": step})),
        Backend::Vm,
        None,
    );
    for k in 1..=3 {
        turn.step_frame().expect("frame");
        let got = turn.render_views().expect("views");
        let yaw = weft_runtime::sim::turntable_yaw(20.0, step, k);
        assert_eq!(yaw, 20.0 + k as f32 * step);
        let mut fixed = Runs::new(
            &cloud_graph(json!({"camera": {"yaw": yaw, "pitch": 25.0}})),
            k as u32,
        );
        let want = fixed.render_views().expect("views");
        assert_eq!(want[0].1.rgba, got[0].1.rgba, "frame {}", k);
    }
    // The saved camera stays the base of the turn.
    assert_eq!(turn.view_camera("view").map(|c| c.yaw), Some(20.0));
    let e = build(&cloud_graph(json!({"orbit_degrees_per_frame": "fast"})))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("view") && e.contains("orbit_degrees_per_frame"),
        "{}",
        e
    );
}

/// A 16³ f32 blob (two soft spheres, values 0..~1.3, NaN-free) and a few
/// vec3 particles inside it, for the `volume` tests.
fn volume_graph(sparse: bool) -> Value {
    let code = "fn kernel(i: i32) {
        let n = 16;
        if i < n * n * n {
            let a = i / (n * n);
            let b = (i / n) % n;
            let c = i % n;
            let p = vec3(a as f32, b as f32, c as f32) / 15.0;
            let v = smoothstep(0.45, 0.1, distance(p, vec3(0.4, 0.5, 0.5)))
                + 0.3 * smoothstep(0.3, 0.0, distance(p, vec3(0.8, 0.3, 0.7)));
            if v > 0.0 || !sparse_only {
                d[(a, b, c)] = v;
            }
        }
        if i < 40 {
            let t = i as f32;
            x[i] = vec3(0.2 + 0.015 * t, 0.5 + 0.2 * sin(t), 0.5 + 0.2 * cos(t * 0.7));
        }
    }";
    let code = code.replace("sparse_only", if sparse { "true" } else { "false" });
    let mut g = kernel_graph(
        &[
            F("d", "f32", &[16, 16, 16], json!(0)),
            F("x", "vec3", &[40], json!(0)),
        ],
        &code,
        &[4096],
        json!({}),
    );
    if sparse {
        // d on bitmasked [4,4,4] -> dense [4,4,4]: blocks of 4³ cells.
        for n in g["nodes"].as_array_mut().unwrap() {
            if n["id"] == "d_cells" {
                n["kind"] = json!("bitmasked");
                n["params"]["shape"] = json!([4, 4, 4]);
            }
        }
        g["nodes"]
            .as_array_mut()
            .unwrap()
            .push(json!({"id": "d_inner", "kind": "dense", "params": {"shape": [4, 4, 4]}}));
        for w in g["wires"].as_array_mut().unwrap() {
            if w["from"] == "d_cells.cells" {
                w["from"] = json!("d_inner.cells");
            }
        }
        g["wires"]
            .as_array_mut()
            .unwrap()
            .push(json!({"from": "d_cells.cells", "to": "d_inner.parent"}));
    }
    g
}

/// `volume` views (emission with auto and fixed ranges, mip, the three
/// slices, several cameras, over a particles view) equal the plain-Rust
/// reference (`view_reference::volume`, the definition in
/// `weft_ir::passes::views::volume`) exactly on vm and cpu, and wgpu
/// within `GPU_LEVELS` levels.
#[test]
fn volume_views_match_the_reference_on_every_backend() {
    let mut g = volume_graph(false);
    let domain = json!([0.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
    let base = json!({"width": 64, "height": 48, "background": [0.1, 0.2, 0.3]});
    let with = |extra: Value| {
        let mut p = base.clone();
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        p
    };
    let views = [
        ("auto", json!({})),
        (
            "front",
            json!({"min": 0.0, "max": 1.0, "density": 2.0, "camera": {"yaw": 0, "pitch": 0}, "colormap": "viridis"}),
        ),
        (
            "side_fine",
            json!({"min": 0.1, "max": 0.9, "step": 0.25, "density": 8.0, "camera": {"yaw": 90, "pitch": 0, "fov": 30}}),
        ),
        (
            "mip",
            json!({"mode": "mip", "camera": {"yaw": -40, "pitch": 35}}),
        ),
        (
            "slice_x",
            json!({"mode": "slice", "slice_axis": "x", "slice_position": 0.4}),
        ),
        (
            "slice_y",
            json!({"mode": "slice", "slice_axis": "y", "slice_position": 0.5, "camera": {"pitch": 60}}),
        ),
        (
            "slice_z",
            json!({"mode": "slice", "slice_axis": "z", "slice_position": 0.0, "camera": {"yaw": 0, "pitch": 0}}),
        ),
        // Inside the box: rays start at the near plane.
        (
            "inside",
            json!({"camera": {"target": [0.4, 0.5, 0.5], "distance": 0.2, "yaw": 20, "pitch": 10, "fov": 80}}),
        ),
    ];
    for (id, extra) in views {
        add_view(&mut g, id, "volume", with(extra), &[("field", "d")]);
    }
    add_view(
        &mut g,
        "parts",
        "particles",
        with(json!({"radius": 2.5, "domain": domain, "color": [0.2, 1.0, 0.4]})),
        &[("positions", "x")],
    );
    add_view(
        &mut g,
        "smoke",
        "volume",
        with(json!({"under": "parts", "min": 0.0, "max": 1.2, "density": 1.0})),
        &[("field", "d")],
    );
    let mut sim = Runs::new(&g, 0);
    let imgs = sim.check("volume");
    let get = |id: &str| &imgs.iter().find(|(i, _)| i == id).expect(id).1;
    for (id, img) in &imgs {
        let bg = [26u8, 51, 77];
        let shown = img.rgba.chunks(4).filter(|p| p[..3] != bg).count();
        assert!(shown > 200, "volume/{}: {} pixels drawn", id, shown);
    }
    // The particles show through the smoke: pixels differ from the smoke
    // alone (same params, no `under`) where a particle lies.
    let parts = get("parts");
    let smoke = get("smoke");
    let auto_like = {
        let mut g2 = volume_graph(false);
        add_view(
            &mut g2,
            "alone",
            "volume",
            with(json!({"min": 0.0, "max": 1.2, "density": 1.0})),
            &[("field", "d")],
        );
        Runs::new(&g2, 0).check("volume_alone")[0].1.clone()
    };
    let bgp = [26u8, 51, 77];
    let mut through = 0;
    for i in 0..(64 * 48) {
        let q = &parts.rgba[4 * i..4 * i + 3];
        if q != bgp && smoke.rgba[4 * i..4 * i + 3] != auto_like.rgba[4 * i..4 * i + 3] {
            through += 1;
        }
    }
    assert!(through > 20, "{} particle pixels change the smoke", through);
}

/// Sparse volumes: samples in inactive blocks contribute nothing (the
/// reference skips them too), and `show_active` draws the active blocks'
/// wire boxes.
#[test]
fn sparse_volume_skips_inactive_blocks_and_draws_boxes() {
    let mut g = volume_graph(true);
    let p = json!({"width": 64, "height": 48, "min": 0.0, "max": 1.0, "show_active": true});
    add_view(&mut g, "boxes", "volume", p.clone(), &[("field", "d")]);
    let mut mip = p.clone();
    mip["mode"] = json!("mip");
    mip["show_active"] = json!(false);
    add_view(&mut g, "mip", "volume", mip, &[("field", "d")]);
    let mut slice = p.clone();
    slice["mode"] = json!("slice");
    slice["slice_axis"] = json!("y");
    slice["slice_position"] = json!(0.1);
    add_view(&mut g, "slice", "volume", slice, &[("field", "d")]);
    add_view(
        &mut g,
        "auto",
        "volume",
        json!({"width": 64, "height": 48}),
        &[("field", "d")],
    );
    let mut sim = Runs::new(&g, 0);
    let imgs = sim.check("volume_sparse");
    let outline = weft_ir::ir::colormap::OUTLINE_RGB.map(|c| (c * 255.0 + 0.5) as u8);
    let lines = imgs[0]
        .1
        .rgba
        .chunks(4)
        .filter(|p| p[..3] == outline)
        .count();
    assert!(lines > 100, "{} box-edge pixels", lines);
    // Some blocks are inactive (the blob does not fill the box).
    let p = &sim.program;
    let f = p.field_by_name("d").unwrap();
    let root = weft_ir::ir::layout::root_of(p, p.fields[f].layout);
    let mask = weft_tests::view_reference::activity_mask(p, f, &sim.read_root(root).unwrap())
        .expect("sparse");
    let inactive = mask.iter().filter(|m| **m & 1 == 0).count();
    assert!(
        inactive > 0 && inactive < mask.len(),
        "{} inactive cells",
        inactive
    );
}

#[test]
fn volume_errors_name_the_node_and_port() {
    let g0 = volume_graph(false);
    let mut g2 = kernel_graph(
        &[F("flat", "f32", &[8, 8], json!(0))],
        "fn kernel(i: i32, j: i32) { flat[(i, j)] = 1.0; }",
        &[8, 8],
        json!({}),
    );
    add_view(&mut g2, "vol", "volume", json!({}), &[("field", "flat")]);
    let e = build(&g2).expect_err("a 2-axis field").to_string();
    assert!(
        e.contains("vol") && e.contains("field") && e.contains("3-axis"),
        "{}",
        e
    );
    let parts = json!({"domain": [0.0, 0.0, 0.0, 1.0, 1.0, 1.0], "width": 64, "height": 48});
    for (params, word) in [
        (json!({"mode": "fog"}), "'mode'"),
        (json!({"mode": "slice", "slice_axis": "w"}), "slice_axis"),
        (
            json!({"mode": "slice", "slice_position": 2.0}),
            "slice_position",
        ),
        (json!({"step": 0.0}), "'step'"),
        (json!({"min": 1.0}), "'min'"),
        (json!({"min": 1.0, "max": 0.0}), "'min'"),
        (json!({"domain": [0.0, 0.0, 1.0, 1.0]}), "3-D domain"),
        (json!({"camera": {"pitch": 100}}), "'pitch'"),
        (json!({"under": "nowhere"}), "no view node 'nowhere'"),
        (
            json!({"under": "parts", "width": 64, "height": 40}),
            "64 x 48",
        ),
        (
            json!({"under": "parts", "width": 64, "height": 48, "camera": {"yaw": 5}}),
            "camera",
        ),
        (json!({"under": "other"}), "not a 3-D view"),
        (json!({"under": 3}), "under"),
    ] {
        let mut g = g0.clone();
        add_view(
            &mut g,
            "parts",
            "particles",
            parts.clone(),
            &[("positions", "x")],
        );
        add_view(&mut g, "other", "histogram", json!({}), &[("field", "d")]);
        add_view(&mut g, "vol", "volume", params.clone(), &[("field", "d")]);
        let e = build(&g).expect_err("bad params").to_string();
        assert!(e.contains("vol") && e.contains(word), "{}: {}", params, e);
    }
}

/// An independent NumPy ray-march (`tests/scripts/volume_numpy.py`,
/// vectorised over pixels, float32) agrees with the vm's emission and mip
/// pictures: at least 99% of pixels within 2 levels of 255, none off by
/// more than 8 (numpy's `exp` and the kernels' may differ in the last
/// bit, which can move a byte that lies on a rounding boundary).
#[test]
fn volume_matches_a_numpy_ray_march() {
    let mut g = volume_graph(false);
    let common = json!({"width": 64, "height": 48, "min": 0.0, "max": 1.0, "colormap": "viridis", "background": [0.1, 0.2, 0.3]});
    let mut em = common.clone();
    em["density"] = json!(1.5);
    em["step"] = json!(0.4);
    add_view(&mut g, "em", "volume", em, &[("field", "d")]);
    let mut mip = common.clone();
    mip["mode"] = json!("mip");
    mip["camera"] = json!({"yaw": -50, "pitch": 30});
    add_view(&mut g, "mip", "volume", mip, &[("field", "d")]);
    let mut sim = open(&g, Backend::Vm, None);
    let imgs = sim.render_views().expect("views");
    let p = &sim.program;
    let d = p.field_by_name("d").unwrap();
    let values: Vec<f32> = sim
        .read_field(d)
        .unwrap()
        .iter()
        .map(|b| f32::from_bits(*b))
        .collect();
    let poly = weft_ir::ir::colormap::colormap_poly(weft_ir::ir::Colormap::Viridis).unwrap();
    for (view, (id, img)) in p.views.iter().zip(&imgs) {
        let weft_ir::ir::View::Volume {
            mode,
            scene,
            width,
            height,
            ..
        } = view
        else {
            continue;
        };
        let fr = weft_ir::passes::views::camera::Frame::new(&scene.camera, *width, *height);
        let (mode, density, step) = match mode {
            weft_ir::ir::VolumeMode::Emission { density, step } => ("emission", *density, *step),
            weft_ir::ir::VolumeMode::Mip { step } => ("mip", 0.0, *step),
            _ => unreachable!(),
        };
        let input = json!({
            "values": values, "shape": [16, 16, 16], "domain": scene.domain,
            "eye": fr.eye, "right": fr.right, "up": fr.up, "back": fr.back,
            "focal": fr.focal, "near": fr.near, "width": width, "height": height,
            "mode": mode, "lo": 0.0, "hi": 1.0, "density": density, "step": step,
            "background": [26, 51, 77], "poly": poly,
        });
        let mut child = std::process::Command::new("python3")
            .arg(root().join("tests/scripts/volume_numpy.py"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs");
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.to_string().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "the NumPy script fails");
        let rgb: Vec<u8> = serde_json::from_slice(&out.stdout).expect("JSON bytes");
        let (mut within, mut worst) = (0usize, 0u8);
        for i in 0..(width * height) as usize {
            let dmax = (0..3)
                .map(|c| img.rgba[4 * i + c].abs_diff(rgb[3 * i + c]))
                .max()
                .unwrap();
            if dmax <= 2 {
                within += 1;
            }
            worst = worst.max(dmax);
        }
        let share = within as f64 / (width * height) as f64;
        eprintln!(
            "numpy vs vm, {}: {:.4}% within 2 levels, max {}",
            id,
            share * 100.0,
            worst
        );
        assert!(
            share >= 0.99 && worst <= 8,
            "{}: {:.4}% within 2, max {}",
            id,
            share * 100.0,
            worst
        );
        let shown = img
            .rgba
            .chunks(4)
            .filter(|q| q[..3] != [26, 51, 77])
            .count();
        assert!(shown > 300, "{}: {} pixels drawn", id, shown);
    }
}

/// A 24³ field on the box [-1, 1]³: `0.6 - |p|` (a sphere of radius 0.6
/// around the origin at level 0) and, with `blob`, the max with a smaller
/// sphere of radius 0.3 around (0.5, 0.4, 0.2).
fn sphere_graph(blob: bool) -> Value {
    let code = format!(
        "fn kernel(i: i32, j: i32, k: i32) {{
        let x = -1.0 + (i as f32 + 0.5) * (2.0 / 24.0);
        let y = -1.0 + (j as f32 + 0.5) * (2.0 / 24.0);
        let z = -1.0 + (k as f32 + 0.5) * (2.0 / 24.0);
        let a = 0.6 - sqrt(x * x + y * y + z * z);
        let dx = x - 0.5;
        let dy = y - 0.4;
        let dz = z - 0.2;
        let b = 0.3 - sqrt(dx * dx + dy * dy + dz * dz);
        s[(i, j, k)] = {};
        t[(i, j)] = 0.0;
    }}",
        if blob { "max(a, b)" } else { "a" }
    );
    kernel_graph(
        &[
            F("s", "f32", &[24, 24, 24], json!(0)),
            F("t", "f32", &[24, 24], json!(0)),
        ],
        &code,
        &[24, 24, 24],
        json!({}),
    )
}

const BOX: [f32; 6] = [-1.0, -1.0, -1.0, 1.0, 1.0, 1.0];

#[test]
fn surface_matches_the_reference_on_every_backend() {
    let mut g = sphere_graph(true);
    let views = [
        ("default", json!(null)),
        ("front", json!({"yaw": 0, "pitch": 0})),
        ("top", json!({"yaw": 0, "pitch": 90, "distance": 4})),
        (
            "inside",
            json!({"target": [0.0, 0.0, 0.0], "distance": 0.3, "yaw": 20, "pitch": 10, "fov": 80}),
        ),
    ];
    for (id, camera) in views {
        let mut params = json!({"width": 160, "height": 120, "domain": BOX, "background": [0.1, 0.2, 0.3], "max_triangles": 8000});
        if !camera.is_null() {
            params["camera"] = camera;
        }
        add_view(&mut g, id, "surface", params, &[("field", "s")]);
    }
    add_view(
        &mut g,
        "level",
        "surface",
        json!({"width": 97, "height": 131, "domain": BOX, "level": 0.25, "color": [0.3, 0.9, 0.4], "max_triangles": 8000}),
        &[("field", "s")],
    );
    let mut sim = Runs::new(&g, 0);
    let imgs = sim.check("surface");
    let front = &imgs.iter().find(|(id, _)| id == "front").expect("front").1;
    let drawn = front
        .rgba
        .chunks(4)
        .filter(|p| p[..3] != [26, 51, 77])
        .count();
    // The sphere of radius 0.6 (a disc of about 22 pixels' radius at the
    // distance that frames the box) covers over a thousand pixels.
    dump("surface", "front", "vm", front);
    assert!(
        drawn > 1000,
        "the front view draws the surface ({} pixels)",
        drawn
    );
}

/// The triangles a surface view extracted (after a render): vertices.
fn surface_triangles(sim: &Simulation, node: &str) -> (u32, Vec<[[f32; 3]; 3]>) {
    let p = &sim.program;
    let count = p
        .field_by_name(&format!("{}.triangle_count", node))
        .expect("count field");
    let tris = p
        .field_by_name(&format!("{}.triangles", node))
        .expect("triangle field");
    let count = sim.read_field(count).expect("count")[0];
    let words = sim.read_field(tris).expect("triangles");
    let kept = (count as usize).min(words.len() / 9);
    let v = (0..kept)
        .map(|t| {
            std::array::from_fn(|v| {
                std::array::from_fn(|c| f32::from_bits(words[t * 9 + v * 3 + c]))
            })
        })
        .collect();
    (count, v)
}

#[test]
fn sphere_surface_vertices_lie_on_the_sphere() {
    let mut g = sphere_graph(false);
    add_view(
        &mut g,
        "ball",
        "surface",
        json!({"width": 64, "height": 64, "domain": BOX}),
        &[("field", "s")],
    );
    add_view(
        &mut g,
        "small",
        "surface",
        json!({"width": 64, "height": 48, "domain": BOX, "max_triangles": 10}),
        &[("field", "s")],
    );
    for backend in [Backend::Vm, Backend::Jit] {
        let mut sim = open(&g, backend, None);
        let imgs = sim.render_views().expect("render");
        let (count, tris) = surface_triangles(&sim, "ball");
        assert!(
            count > 500,
            "{:?}: a sphere has many triangles ({})",
            backend,
            count
        );
        assert_eq!(tris.len(), count as usize);
        // Sample spacing 2/24: every vertex lies on a cell edge whose ends
        // straddle the sphere, so within one cell of radius 0.6.
        let h = 2.0 / 24.0;
        for v in tris.iter().flatten() {
            let r = (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt();
            assert!(
                (r - 0.6).abs() <= h,
                "{:?}: vertex {:?} at radius {}",
                backend,
                v,
                r
            );
        }
        // Closed: every edge is shared by exactly two triangles.
        let mut edges = std::collections::HashMap::new();
        for t in &tris {
            for (a, b) in [(0, 1), (1, 2), (2, 0)] {
                let (p, q) = (t[a].map(f32::to_bits), t[b].map(f32::to_bits));
                *edges
                    .entry(if p < q { (p, q) } else { (q, p) })
                    .or_insert(0) += 1;
            }
        }
        assert!(
            edges.values().all(|&n| n == 2),
            "{:?}: the sphere's mesh is closed",
            backend
        );
        // Overflow: the count says how many there were, 10 are kept, and
        // the view shows a red border.
        let (small, kept) = surface_triangles(&sim, "small");
        assert_eq!(
            small, count,
            "{:?}: the count reports every triangle",
            backend
        );
        assert_eq!(kept.len(), 10);
        let img = &imgs.iter().find(|(id, _)| id == "small").expect("small").1;
        for (x, y) in [(0, 0), (63, 47), (2, 20), (30, 45)] {
            let i = ((y * 64 + x) * 4) as usize;
            assert_eq!(
                img.rgba[i..i + 4],
                [255, 0, 0, 255],
                "{:?}: border at {},{}",
                backend,
                x,
                y
            );
        }
        let ball = &imgs.iter().find(|(id, _)| id == "ball").expect("ball").1;
        assert_ne!(ball.rgba[0..3], [255, 0, 0], "no border without overflow");
    }
}

#[test]
fn surface_errors_name_the_node_and_port() {
    let g0 = sphere_graph(false);
    for (field, params, port, word) in [
        ("t", json!({}), "field", "3-axis f32"),
        (
            "s",
            json!({"max_triangles": 0}),
            "max_triangles",
            "max_triangles",
        ),
        ("s", json!({"domain": [0, 0, 1, 1]}), "domain", "3-D domain"),
        ("s", json!({"camera": {"pitch": 100}}), "camera", "'pitch'"),
    ] {
        let mut g = g0.clone();
        add_view(
            &mut g,
            "iso",
            "surface",
            params.clone(),
            &[("field", field)],
        );
        let e = build(&g).expect_err("bad surface").to_string();
        assert!(
            e.contains("iso") && e.contains(port) && e.contains(word),
            "{}: {}",
            params,
            e
        );
    }
}

/// A volume drawn over a surface (`under`): with no opacity (density 0)
/// its picture is the surface's, pixel for pixel (the surface's picture is
/// its background); with opacity the smoke changes it; on every backend.
/// Moving the volume's camera at run time moves the surface under it too.
#[test]
fn volume_over_a_surface() {
    let mut g = sphere_graph(false);
    let base = json!({"width": 80, "height": 60, "domain": BOX});
    let mut iso = base.clone();
    iso["max_triangles"] = json!(8000);
    add_view(&mut g, "iso", "surface", iso, &[("field", "s")]);
    for (id, density) in [("clear", 0.0), ("smoke", 4.0)] {
        let mut v = base.clone();
        v["under"] = json!("iso");
        v["density"] = json!(density);
        v["min"] = json!(-0.2);
        v["max"] = json!(0.6);
        add_view(&mut g, id, "volume", v, &[("field", "s")]);
    }
    let moved = weft_ir::ir::Camera {
        target: [0.1, 0.0, -0.1],
        distance: 4.0,
        yaw: 75.0,
        pitch: -20.0,
        fov: 40.0,
    };
    let mut backends = vec![(Backend::Vm, None), (Backend::Jit, None)];
    if let Some(ctx) = gpu() {
        backends.push((Backend::Wgpu, Some(ctx)));
    }
    for (backend, ctx) in backends {
        let mut sim = open(&g, backend, ctx);
        let draw = |sim: &mut Simulation| -> std::collections::BTreeMap<String, Vec<u8>> {
            sim.render_views()
                .expect("views")
                .into_iter()
                .map(|(id, img)| (id, img.rgba))
                .collect()
        };
        let a = draw(&mut sim);
        let drawn = a["iso"]
            .chunks(4)
            .filter(|p| p[..3] != [18, 38, 46])
            .count();
        assert!(drawn > 300, "{:?}: the surface shows ({})", backend, drawn);
        assert!(
            a["clear"] == a["iso"],
            "{:?}: clear smoke over the surface",
            backend
        );
        assert!(a["smoke"] != a["iso"], "{:?}: the smoke shows", backend);
        sim.set_view_camera("clear", moved).expect("camera");
        let b = draw(&mut sim);
        assert!(
            b["iso"] != a["iso"],
            "{:?}: the surface under it moved",
            backend
        );
        assert!(b["clear"] == b["iso"], "{:?}: after the move", backend);
    }
}

/// Pixels of `img` with exactly the colour `rgb` (an overlay's bytes).
fn pixels_of(img: &Image, rgb: [f32; 3]) -> Vec<(u32, u32)> {
    let b = rgb.map(|c| (c.clamp(0.0, 1.0) * 255.0 + 0.5) as u8);
    (0..img.height)
        .flat_map(|y| (0..img.width).map(move |x| (x, y)))
        .filter(|&(x, y)| {
            let i = ((y * img.width + x) * 4) as usize;
            img.rgba[i..i + 3] == b
        })
        .collect()
}

/// `show_box` and `show_axes` on every 3-D view kind (particles, volumes
/// of each mode, a volume over particles, surfaces; several cameras, one
/// inside the box) equal the reference (`view_reference::overlay_3d`, the
/// definition in `weft_ir::passes::views::overlay3d`) exactly on vm and
/// cpu, and wgpu within `GPU_LEVELS`; and each picture shows the box and
/// the three axes.
#[test]
fn overlays_match_the_reference_on_every_backend() {
    use weft_ir::passes::views::overlay3d::{AXIS_RGB, BOX_RGB};
    let on = |mut p: Value| {
        p["show_box"] = json!(true);
        p["show_axes"] = json!(true);
        p
    };
    // Particles and volumes (and a volume over particles).
    let mut g = volume_graph(false);
    let base = json!({"width": 96, "height": 72, "background": [0.1, 0.2, 0.3], "domain": [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]});
    let with = |extra: Value| {
        let mut p = base.clone();
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        on(p)
    };
    add_view(
        &mut g,
        "parts",
        "particles",
        with(json!({"radius": 4.0, "color": [0.2, 1.0, 0.4]})),
        &[("positions", "x")],
    );
    add_view(
        &mut g,
        "parts_front",
        "particles",
        with(json!({"radius": 3.0, "camera": {"yaw": 0, "pitch": 0}})),
        &[("positions", "x")],
    );
    for (id, extra) in [
        ("smoke", json!({"density": 6.0})),
        (
            "mip",
            json!({"mode": "mip", "camera": {"yaw": -40, "pitch": 35}}),
        ),
        ("slice", json!({"mode": "slice", "slice_axis": "z"})),
        (
            "inside",
            json!({"camera": {"target": [0.4, 0.5, 0.5], "distance": 0.2, "yaw": 20, "pitch": 10, "fov": 80}}),
        ),
        ("over_parts", json!({"under": "parts", "density": 3.0})),
    ] {
        add_view(&mut g, id, "volume", with(extra), &[("field", "d")]);
    }
    let mut sim = Runs::new(&g, 1);
    let mut imgs = sim.check("overlays_volume");
    // Surfaces.
    let mut g = sphere_graph(true);
    for (id, camera) in [
        ("iso", json!(null)),
        ("iso_top", json!({"yaw": 0, "pitch": 90, "distance": 4})),
    ] {
        let mut params = json!({"width": 120, "height": 90, "domain": BOX, "max_triangles": 8000});
        if !camera.is_null() {
            params["camera"] = camera;
        }
        add_view(&mut g, id, "surface", on(params), &[("field", "s")]);
    }
    let mut sim = Runs::new(&g, 0);
    imgs.extend(sim.check("overlays_surface"));
    for (id, img) in &imgs {
        dump("overlays", id, "vm", img);
        if id != "inside" {
            let n = pixels_of(img, BOX_RGB).len();
            assert!(n > 100, "{}: the box shows ({} pixels)", id, n);
        }
        for (i, rgb) in AXIS_RGB.iter().enumerate() {
            // The top view sees the y axis end on, the front view the z
            // axis: a dot.
            let end_on = (id == "iso_top" && i == 1) || (id == "parts_front" && i == 2);
            let min = if end_on { 0 } else { 5 };
            let n = pixels_of(img, *rgb).len();
            assert!(n >= min, "{}: axis {} shows ({} pixels)", id, i, n);
        }
    }
}

/// The box and the axes by hand, from the projection formula in
/// `weft_ir::passes::views::camera` (not the reference renderer): the unit
/// box seen from the front (yaw 0, pitch 0) around its centre at distance
/// 2 with fov 90 on 100 x 100 pixels (focal length 50). Its front face (z
/// = 1) lies at depth 1.5: corners at 50 ± 0.5 / 1.5 × 50 = 33.33 and
/// 66.67, so its edges light rows and columns 33 and 66 from 33 to 66;
/// the back face (depth 2.5) at 50 ± 10: rows and columns 40 and 60 from
/// 40 to 60. A red particle at the centre (depth 2, a disc of 20 pixels: a
/// sphere of world radius 20 · 2 / 50 = 0.8) hides the back edges (its
/// surface at depth ≤ 2.5 there) but not the front ones: 17 pixels off
/// centre its surface is at depth 2 - 0.8·sqrt(1 - (17/20)²) = 1.58,
/// behind the front face (1.5), and the corners are off the disc. Axes:
/// 25 pixels long (100 / 4) from pixel (31, 68) (31 = floor(25 × 1.25)):
/// x red to the right (columns 32..=56 of row 68), y green upwards
/// (column 31, rows 43..=67), z blue seen end on: the origin pixel.
#[test]
fn overlay_box_and_axes_by_hand_in_a_front_view() {
    use weft_ir::passes::views::overlay3d::{AXIS_RGB, BOX_RGB};
    let code = "fn kernel(p: i32) {
        x[p] = vec3(bitcast::<f32>(nan_bits), 0.0, 0.0);
        if p == 0 { x[p] = vec3(0.5, 0.5, 0.5); }
    }";
    let mut g = kernel_graph(
        &[F("x", "vec3", &[4], json!(0))],
        code,
        &[4],
        special_floats(),
    );
    add_view(
        &mut g,
        "view",
        "particles",
        json!({"width": 100, "height": 100, "radius": 20.0, "color": [1.0, 0.0, 0.0],
               "background": [0.0, 0.0, 0.0], "domain": [0.0, 0.0, 0.0, 1.0, 1.0, 1.0],
               "camera": {"yaw": 0, "pitch": 0, "target": [0.5, 0.5, 0.5], "distance": 2.0, "fov": 90.0},
               "show_box": true, "show_axes": true}),
        &[("positions", "x")],
    );
    let mut sim = Runs::new(&g, 0);
    let imgs = sim.check("overlay_by_hand");
    let img = &imgs[0].1;
    let boxed: std::collections::BTreeSet<(u32, u32)> =
        pixels_of(img, BOX_RGB).into_iter().collect();
    let px = |x: u32, y: u32| {
        let i = ((y * img.width + x) * 4) as usize;
        [img.rgba[i], img.rgba[i + 1], img.rgba[i + 2]]
    };
    // Front face: all four edges, over the particle and off it.
    for t in 33..=66 {
        for p in [(t, 33), (t, 66), (33, t), (66, t)] {
            assert!(
                boxed.contains(&p),
                "front edge pixel {:?}: {:?}",
                p,
                px(p.0, p.1)
            );
        }
    }
    // Back face: every pixel of it lies within 15 of the disc's centre
    // (radius 20 around (50, 50)), and the sphere is nearer than the back
    // face (depth 2.5): hidden, the particle shows.
    for t in 41..=59 {
        for p in [(t, 40), (40, t)] {
            assert!(!boxed.contains(&p), "back edge pixel {:?} is hidden", p);
            assert!(
                px(p.0, p.1)[0] > px(p.0, p.1)[1],
                "{:?} shows the particle",
                p
            );
        }
    }
    // Nothing else is grey but the 12 edges: nothing in the middle.
    assert!(!boxed.contains(&(50, 50)));
    let b = |rgb: [f32; 3]| rgb.map(|c| (c * 255.0 + 0.5) as u8);
    for x in 32..=56 {
        assert_eq!(px(x, 68), b(AXIS_RGB[0]), "x axis at ({}, 68)", x);
    }
    assert_ne!(px(57, 68), b(AXIS_RGB[0]), "the x axis ends at column 56");
    for y in 43..=67 {
        assert_eq!(px(31, y), b(AXIS_RGB[1]), "y axis at (31, {})", y);
    }
    assert_eq!(px(31, 68), b(AXIS_RGB[2]), "z axis end on: the origin");
}

/// A camera inside the domain box: the box edges that cross the near
/// plane (one corner in front of the camera, one behind) are clipped there
/// and drawn (before, an edge was drawn only when both corners were
/// visible). vm and cpu equal the
/// reference exactly, wgpu within `GPU_LEVELS` (`Runs::check`); the grey
/// pixels lie on the clipped edges the reference's `clip_edge` gives.
#[test]
fn box_edges_crossing_the_near_plane_are_clipped_and_drawn() {
    use weft_ir::passes::views::overlay3d::{box_edges, corner, BOX_RGB};
    use weft_tests::view_reference::CameraFrame;
    let mut g = volume_graph(false);
    let camera =
        json!({"target": [0.5, 0.5, 0.5], "distance": 0.1, "yaw": 20, "pitch": 10, "fov": 90});
    add_view(
        &mut g,
        "inside",
        "particles",
        json!({"width": 96, "height": 72, "radius": 2.0, "background": [0.0, 0.0, 0.0],
               "domain": [0.0, 0.0, 0.0, 1.0, 1.0, 1.0], "camera": camera, "show_box": true}),
        &[("positions", "x")],
    );
    let mut sim = Runs::new(&g, 1);
    let imgs = sim.check("near_clip");
    let (_, img) = imgs
        .iter()
        .find(|(id, _)| id == "inside")
        .expect("the view");
    dump("near_clip", "inside", "vm", img);
    let scene = sim
        .vm
        .program
        .views
        .iter()
        .find_map(|v| match v {
            weft_ir::ir::View::Particles {
                scene: Some(s),
                node_id,
                ..
            } if node_id == "inside" => Some(*s),
            _ => None,
        })
        .expect("the view's scene");
    let fr = CameraFrame::new(&scene.camera, 96, 72);
    let d = [0.0, 0.0, 0.0, 1.0, 1.0, 1.0];
    // Every edge has a corner behind the camera or not: the ones that
    // cross the near plane are the ones that were missing.
    let crossing: Vec<(usize, usize)> = box_edges()
        .into_iter()
        .filter(|&(a, b)| {
            fr.project(corner(&d, a)).is_some() != fr.project(corner(&d, b)).is_some()
        })
        .collect();
    assert!(!crossing.is_empty(), "some edge crosses the near plane");
    let n = pixels_of(img, BOX_RGB).len();
    assert!(n > 50, "the clipped edges show ({} pixels)", n);
    // The grey pixels on the clipped edges' lines (where no other edge
    // passes): missing before, shown now.
    let grey: std::collections::BTreeSet<(u32, u32)> =
        pixels_of(img, BOX_RGB).into_iter().collect();
    let mut on_clipped = 0;
    for &(a, b) in &crossing {
        if let Some((p, q)) = fr.clip_edge(corner(&d, a), corner(&d, b)) {
            weft_tests::view_reference::line((p.0, p.1), (q.0, q.1), 96, 72, |_, x, y| {
                if grey.contains(&(x, y)) {
                    on_clipped += 1;
                }
            });
        }
    }
    assert!(
        on_clipped > 20,
        "the clipped edges show ({} pixels)",
        on_clipped
    );
}

/// `lit` volumes (`views::volume_light`: the default key light, coloured
/// directional and point lights, no shadows, emission through blackbody
/// with no lights, an auto emission range, jitter off, a camera inside the
/// box, smoke over particles; dense and sparse) equal the plain-Rust
/// reference (`weft_tests::volume_lit`) exactly on vm and cpu, and wgpu
/// within `GPU_LEVELS`.
#[test]
fn lit_volumes_match_the_reference_on_every_backend() {
    let domain = json!([0.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
    let base = json!({"mode": "lit", "width": 64, "height": 48, "background": [0.1, 0.2, 0.3]});
    let with = |extra: Value| {
        let mut p = base.clone();
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        p
    };
    let two = json!([
        {"type": "directional", "direction": [0.3, 1.0, -0.2], "color": [1.0, 0.6, 0.3], "intensity": 1.2},
        {"type": "point", "position": [1.2, 0.4, 0.9], "color": [0.3, 0.5, 1.0], "intensity": 0.4}
    ]);
    for sparse in [false, true] {
        let mut g = volume_graph(sparse);
        let views = [
            ("key", json!({"min": 0.0, "max": 1.0, "density": 3.0})),
            (
                "two",
                json!({"lights": two, "density": 5.0, "shadow_cells": 1, "jitter": "off", "camera": {"yaw": -40, "pitch": 35}}),
            ),
            (
                "unshadowed",
                json!({"shadow_density": 0.0, "albedo": [0.8, 0.7, 0.6], "ambient": [0.2, 0.2, 0.25]}),
            ),
            (
                "inside",
                json!({"shadow_cells": 3, "camera": {"target": [0.4, 0.5, 0.5], "distance": 0.2, "yaw": 20, "pitch": 10, "fov": 80}}),
            ),
        ];
        for (id, extra) in views {
            add_view(&mut g, id, "volume", with(extra), &[("field", "d")]);
        }
        add_view(
            &mut g,
            "fire",
            "volume",
            with(
                json!({"lights": [], "emission_min": 0.3, "emission_max": 1.2, "emission_intensity": 3.0, "density": 1.0}),
            ),
            &[("field", "d"), ("emission", "d")],
        );
        add_view(
            &mut g,
            "fire_auto",
            "volume",
            with(json!({"emission_colormap": "inferno", "step": 0.7})),
            &[("field", "d"), ("emission", "d")],
        );
        add_view(
            &mut g,
            "parts",
            "particles",
            json!({"width": 64, "height": 48, "background": [0.1, 0.2, 0.3], "radius": 2.5, "domain": domain, "color": [0.2, 1.0, 0.4]}),
            &[("positions", "x")],
        );
        add_view(
            &mut g,
            "smoke",
            "volume",
            with(json!({"under": "parts", "density": 1.5})),
            &[("field", "d")],
        );
        let name = if sparse { "lit_sparse" } else { "lit" };
        let imgs = Runs::new(&g, 0).check(name);
        for (id, img) in &imgs {
            let bg = [26u8, 51, 77];
            let shown = img.rgba.chunks(4).filter(|p| p[..3] != bg).count();
            assert!(shown > 200, "{}/{}: {} pixels drawn", name, id, shown);
        }
    }
}

/// Self-shadowing only ever takes light away: every pixel of a lit view is
/// at most as bright as the same view without shadows, and the side facing
/// away from the light is clearly darker. The light from the right (+x):
/// the blob's left half (low x), behind its own smoke, darkens most.
#[test]
fn lit_volume_shadows_darken_the_far_side() {
    let mut g = volume_graph(false);
    let lights = json!([{"direction": [1.0, 0.0, 0.0], "intensity": 1.0}]);
    let base = json!({"mode": "lit", "width": 64, "height": 48, "min": 0.0, "max": 1.0, "density": 6.0,
        "lights": lights, "ambient": [0.0, 0.0, 0.0], "jitter": "off", "background": [0.0, 0.0, 0.0],
        "camera": {"yaw": 0, "pitch": 0}});
    add_view(
        &mut g,
        "shadowed",
        "volume",
        base.clone(),
        &[("field", "d")],
    );
    let mut flat = base.clone();
    flat["shadow_density"] = json!(0.0);
    add_view(&mut g, "flat", "volume", flat, &[("field", "d")]);
    let imgs = Runs::new(&g, 0).check("lit_shadows");
    let (s, f) = (&imgs[0].1, &imgs[1].1);
    let lum = |img: &Image, x: u32, y: u32| {
        let p = img.pixel(x, y);
        p[0] as u32 + p[1] as u32 + p[2] as u32
    };
    let (mut left, mut right, mut left_flat, mut right_flat) = (0u32, 0u32, 0u32, 0u32);
    for y in 0..48 {
        for x in 0..64 {
            let (a, b) = (lum(s, x, y), lum(f, x, y));
            assert!(
                a <= b + 1,
                "pixel ({}, {}): {} with shadows, {} without",
                x,
                y,
                a,
                b
            );
            if x < 24 {
                left += a;
                left_flat += b;
            } else if x >= 40 {
                right += a;
                right_flat += b;
            }
        }
    }
    // Front view (yaw 0): +x is to the right. The lit right side keeps
    // most of its light; the left side, behind the blob, loses more.
    let keep = |a: u32, b: u32| a as f64 / b.max(1) as f64;
    eprintln!(
        "left keeps {:.3}, right keeps {:.3}",
        keep(left, left_flat),
        keep(right, right_flat)
    );
    assert!(left_flat > 0 && right_flat > 0, "the blob is drawn");
    assert!(
        keep(left, left_flat) < 0.8 * keep(right, right_flat),
        "the far side is not darker: left keeps {}/{}, right {}/{}",
        left,
        left_flat,
        right,
        right_flat
    );
}

/// The NumPy ray-march (`tests/scripts/volume_numpy.py`, vectorised over
/// pixels and transmittance cells) agrees with the vm's lit pictures (two
/// lights with shadows and jitter; emission through blackbody): 99% of
/// pixels within 2 levels, none beyond 8.
#[test]
fn lit_volume_matches_a_numpy_ray_march() {
    let mut g = volume_graph(false);
    let lights = json!([
        {"type": "directional", "direction": [-0.5, 0.8, 0.35], "color": [1.0, 0.95, 0.85], "intensity": 1.4},
        {"type": "point", "position": [1.1, 0.3, 0.2], "color": [0.2, 0.4, 1.0], "intensity": 0.3}
    ]);
    let common = json!({"mode": "lit", "width": 64, "height": 48, "min": 0.0, "max": 1.0,
        "background": [0.1, 0.2, 0.3], "density": 4.0, "step": 0.5, "lights": lights,
        "albedo": [0.9, 0.85, 0.8], "ambient": [0.1, 0.11, 0.13], "shadow_density": 1.5, "shadow_cells": 2});
    add_view(&mut g, "lit", "volume", common.clone(), &[("field", "d")]);
    let mut fire = common.clone();
    fire["lights"] = json!([]);
    fire["emission_min"] = json!(0.2);
    fire["emission_max"] = json!(1.0);
    fire["emission_intensity"] = json!(2.0);
    fire["camera"] = json!({"yaw": -50, "pitch": 30});
    add_view(
        &mut g,
        "fire",
        "volume",
        fire,
        &[("field", "d"), ("emission", "d")],
    );
    let mut sim = open(&g, Backend::Vm, None);
    let imgs = sim.render_views().expect("views");
    let p = &sim.program;
    let d = p.field_by_name("d").unwrap();
    let values: Vec<f32> = sim
        .read_field(d)
        .unwrap()
        .iter()
        .map(|b| f32::from_bits(*b))
        .collect();
    for (view, (id, img)) in p.views.iter().zip(&imgs) {
        let weft_ir::ir::View::Volume {
            mode: weft_ir::ir::VolumeMode::Lit(cfg),
            scene,
            width,
            height,
            jitter,
            ..
        } = view
        else {
            unreachable!()
        };
        let fr = weft_ir::passes::views::camera::Frame::new(&scene.camera, *width, *height);
        let lights: Vec<Value> = cfg
            .lights
            .iter()
            .map(|l| {
                let (kind, vec) = match l.kind {
                    weft_ir::ir::LightKind::Directional { toward } => ("directional", toward),
                    weft_ir::ir::LightKind::Point { position } => ("point", position),
                };
                json!({"kind": kind, "vec": vec, "color": l.color, "intensity": l.intensity})
            })
            .collect();
        let emission = cfg.emission.map(|e| {
            let (lo, hi) = e.range.expect("a fixed range");
            json!({"values": values, "lo": lo, "hi": hi, "intensity": e.intensity,
                "stops": weft_ir::ir::colormap::BLACKBODY})
        });
        let input = json!({
            "values": values, "shape": [16, 16, 16], "domain": scene.domain,
            "eye": fr.eye, "right": fr.right, "up": fr.up, "back": fr.back,
            "focal": fr.focal, "near": fr.near, "width": width, "height": height,
            "mode": "lit", "lo": 0.0, "hi": 1.0, "density": cfg.density, "step": cfg.step,
            "background": [26, 51, 77], "poly": weft_ir::ir::colormap::colormap_poly(weft_ir::ir::Colormap::Viridis).unwrap(),
            "lit": {"albedo": cfg.albedo, "ambient": cfg.ambient, "lights": lights,
                "shadow_density": cfg.shadow_density, "shadow_cells": cfg.shadow_cells,
                "jitter": jitter, "emission": emission},
        });
        let mut child = std::process::Command::new("python3")
            .arg(root().join("tests/scripts/volume_numpy.py"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs");
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.to_string().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "the NumPy script fails");
        let rgb: Vec<u8> = serde_json::from_slice(&out.stdout).expect("JSON bytes");
        let (mut within, mut worst) = (0usize, 0u8);
        for i in 0..(width * height) as usize {
            let dmax = (0..3)
                .map(|c| img.rgba[4 * i + c].abs_diff(rgb[3 * i + c]))
                .max()
                .unwrap();
            if dmax <= 2 {
                within += 1;
            }
            worst = worst.max(dmax);
        }
        let share = within as f64 / (width * height) as f64;
        eprintln!(
            "numpy vs vm, lit {}: {:.4}% within 2 levels, max {}",
            id,
            share * 100.0,
            worst
        );
        assert!(
            share >= 0.99 && worst <= 8,
            "{}: {:.4}% within 2, max {}",
            id,
            share * 100.0,
            worst
        );
        let shown = img
            .rgba
            .chunks(4)
            .filter(|q| q[..3] != [26, 51, 77])
            .count();
        assert!(shown > 300, "{}: {} pixels drawn", id, shown);
    }
}

#[test]
fn lit_volume_errors_name_the_node_and_param() {
    let g0 = volume_graph(false);
    let lit = |extra: Value| {
        let mut p = json!({"mode": "lit"});
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        p
    };
    for (params, word) in [
        (
            lit(json!({"lights": [{"colour": [1, 1, 1]}]})),
            "unknown key 'colour'",
        ),
        (
            lit(json!({"lights": [{"direction": [0, 0, 0]}]})),
            "must not be [0, 0, 0]",
        ),
        (
            lit(json!({"lights": [{"type": "point"}]})),
            "needs 'position'",
        ),
        (lit(json!({"lights": [{"type": "spot"}]})), "'type'"),
        (lit(json!({"lights": [{"intensity": -1}]})), "'intensity'"),
        (lit(json!({"lights": [{}, {}, {}, {}, {}]})), "at most 4"),
        (lit(json!({"lights": {"type": "point"}})), "lights"),
        (lit(json!({"albedo": [1, -1, 1]})), "'albedo'"),
        (lit(json!({"shadow_cells": 9})), "shadow_cells"),
        (lit(json!({"emission_min": 1.0})), "emission"),
        (lit(json!({"jitter": "yes"})), "jitter"),
    ] {
        let mut g = g0.clone();
        add_view(&mut g, "vol", "volume", params.clone(), &[("field", "d")]);
        let e = build(&g).expect_err("bad params").to_string();
        assert!(e.contains("vol") && e.contains(word), "{}: {}", params, e);
    }
    // The emission port: the volume's shape (checked in every mode; other
    // modes than lit leave it unused).
    let mut g = g0.clone();
    add_view(
        &mut g,
        "vol",
        "volume",
        json!({}),
        &[("field", "d"), ("emission", "d")],
    );
    let p = build(&g).expect("an unused emission wire builds");
    assert_eq!(
        p.views[0].fields().len(),
        1,
        "emission mode reads one field"
    );
    let mut g = g0.clone();
    add_view(
        &mut g,
        "vol",
        "volume",
        json!({"mode": "lit"}),
        &[("field", "d"), ("emission", "x")],
    );
    let e = build(&g)
        .expect_err("emission of another shape")
        .to_string();
    assert!(
        e.contains("vol") && e.contains("emission") && e.contains("shape"),
        "{}",
        e
    );
}

/// `show_ground` on every 3-D view kind (particles with their shadows, a
/// volume of each lit/emission mode over the ground, a volume over
/// particles standing on theirs, surfaces with their shadow and an
/// overflowing one whose red border stays on top) equals the reference
/// (`view_reference::ground_3d`, the definition in
/// `weft_ir::passes::views::ground`) exactly on vm and cpu, and wgpu
/// within `GPU_LEVELS`; and every picture shows the ground.
#[test]
fn ground_matches_the_reference_on_every_backend() {
    let mut g = volume_graph(false);
    let base = json!({"width": 96, "height": 72, "background": [0.1, 0.2, 0.3],
                      "domain": [0.0, 0.0, 0.0, 1.0, 1.0, 1.0], "show_ground": true});
    let with = |extra: Value| {
        let mut p = base.clone();
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        p
    };
    add_view(
        &mut g,
        "parts",
        "particles",
        with(json!({"radius": 4.0, "color": [0.2, 1.0, 0.4], "show_box": true})),
        &[("positions", "x")],
    );
    add_view(
        &mut g,
        "parts_low",
        "particles",
        with(json!({"radius": 3.0, "camera": {"yaw": -35, "pitch": 8}})),
        &[("positions", "x")],
    );
    for (id, extra) in [
        ("smoke", json!({"density": 6.0, "show_box": true})),
        ("lit", json!({"mode": "lit", "density": 4.0})),
        (
            "mip",
            json!({"mode": "mip", "camera": {"yaw": -40, "pitch": 35}}),
        ),
        ("over_parts", json!({"under": "parts", "density": 3.0})),
    ] {
        add_view(&mut g, id, "volume", with(extra), &[("field", "d")]);
    }
    let mut sim = Runs::new(&g, 1);
    let mut imgs = sim.check("ground_volume");
    let mut g = sphere_graph(true);
    for (id, extra) in [
        ("iso", json!({})),
        ("iso_high", json!({"camera": {"yaw": 60, "pitch": 50}})),
    ] {
        let mut params = json!({"width": 120, "height": 90, "domain": BOX, "max_triangles": 8000,
                                "show_ground": true});
        for (k, v) in extra.as_object().unwrap() {
            params[k] = v.clone();
        }
        add_view(&mut g, id, "surface", params, &[("field", "s")]);
    }
    let mut sim = Runs::new(&g, 0);
    imgs.extend(sim.check("ground_surface"));
    for (id, img) in &imgs {
        dump("ground", id, "vm", img);
    }
    // The ground shows: the bottom rows of every picture are not the bare
    // background.
    for (id, img) in &imgs {
        let bg: [u8; 3] = if id.starts_with("iso") {
            [0.07f32, 0.15, 0.18].map(|c| (c * 255.0 + 0.5) as u8)
        } else {
            [0.1f32, 0.2, 0.3].map(|c| (c * 255.0 + 0.5) as u8)
        };
        let y = img.height - 4;
        let changed = (0..img.width)
            .filter(|&x| {
                let i = ((y * img.width + x) * 4) as usize;
                img.rgba[i..i + 3] != bg
            })
            .count();
        assert!(changed > 0, "{}: the ground shows in row {}", id, y);
    }
    // An overflowing mesh (which triangles keep a slot depends on thread
    // order, so only the vm's picture is looked at): the red border stays
    // over the ground.
    let mut g = sphere_graph(true);
    add_view(
        &mut g,
        "overflow",
        "surface",
        json!({"width": 120, "height": 90, "domain": BOX, "max_triangles": 50, "show_ground": true}),
        &[("field", "s")],
    );
    let mut sim = Runs::new(&g, 0);
    let over = sim.vm.render_views().expect("renders").remove(0).1;
    for (x, y) in [(0, 0), (60, 88), (1, 45), (119, 89)] {
        let i = ((y * over.width + x) * 4) as usize;
        assert_eq!(
            &over.rgba[i..i + 4],
            &[255, 0, 0, 255],
            "the overflow border at ({}, {})",
            x,
            y
        );
    }
}

/// The ground and a shadow by hand, from the definition (not the reference
/// renderer): a camera straight down (pitch 90) on the unit box sees the
/// floor as a square; one particle at (0.5, 0.9, 0.5) casts its shadow
/// along the key light `L` to (0.5 - L.x·k, 0, 0.5 - L.z·k) with k = 0.9 /
/// L.y. The pixel there is darker than the same place with the particle
/// moved off to the side (where it casts elsewhere); and with the
/// ground off that pixel is the background.
#[test]
fn ground_shadow_falls_along_the_key_light() {
    use weft_ir::passes::views::surface::LIGHT;
    let shot = |px: f32, ground: bool| {
        let code = format!("fn kernel(p: i32) {{ x[p] = vec3({:.3}, 0.9, 0.5); }}", px);
        let mut g = kernel_graph(&[F("x", "vec3", &[1], json!(0))], &code, &[1], json!({}));
        add_view(
            &mut g,
            "view",
            "particles",
            json!({"width": 100, "height": 100, "radius": 6.0, "background": [0.0, 0.0, 0.0],
                   "domain": [0.0, 0.0, 0.0, 1.0, 1.0, 1.0], "show_ground": ground,
                   "camera": {"yaw": 0, "pitch": 90, "target": [0.5, 0.0, 0.5], "distance": 2.0, "fov": 90.0}}),
            &[("positions", "x")],
        );
        let mut sim = Runs::new(&g, 0);
        sim.check("ground_shadow").remove(0).1
    };
    // Seen from above (pitch 90: x right, -z up), world (x, z) on the
    // floor at depth 2 lands at pixel (50 + (x - 0.5)·25, 50 + (z - 0.5)·25)
    // (focal 50).
    let k = 0.9 / LIGHT[1];
    let (sx, sz) = (0.5 - LIGHT[0] * k, 0.5 - LIGHT[2] * k);
    let (x, y) = (
        (50.0 + (sx - 0.5) * 25.0) as u32,
        (50.0 + (sz - 0.5) * 25.0) as u32,
    );
    let lum = |img: &Image| {
        let i = ((y * img.width + x) * 4) as usize;
        img.rgba[i] as u32 + img.rgba[i + 1] as u32 + img.rgba[i + 2] as u32
    };
    let shadowed = shot(0.5, true);
    let clear = shot(0.1, true);
    let bare = shot(0.5, false);
    dump("ground_shadow", "shadowed", "vm", &shadowed);
    assert!(
        lum(&shadowed) * 10 < lum(&clear) * 8,
        "the shadow at ({}, {}) darkens the ground: {} vs {}",
        x,
        y,
        lum(&shadowed),
        lum(&clear)
    );
    assert!(lum(&clear) > 0, "the ground shows at ({}, {})", x, y);
    assert_eq!(lum(&bare), 0, "no ground without show_ground");
}

/// 3-D particles are spheres in depth, not flat discs: from the front
/// (yaw 0, pitch 0, distance 2, fov 90: focal 50 on 100 × 100), a red
/// particle at the centre (depth 2) and a green one 0.15 behind it and 0.5
/// to the right (depth 2.15, centre 50 + 0.5/2.15·50 = 61.6 px), both 20
/// pixels across (world radii 0.8 and 0.86). At the green one's centre the
/// red sphere's surface is at depth 2 - 0.8·sqrt(1 - (11.6/20)²) = 1.35
/// and the green one's at 2.15 - 0.86 = 1.29: green is nearer and shows
/// (flat discs at their centres' depths, red would cover it). At the red
/// one's centre red (1.2) is nearer. vm and cpu equal the reference
/// exactly, wgpu within `GPU_LEVELS`.
#[test]
fn particles_3d_are_spheres_in_depth() {
    let code = "fn kernel(p: i32) {
        if p == 0 { x[p] = vec3(0.5, 0.5, 0.5); col[p] = vec3(1.0, 0.0, 0.0); }
        if p == 1 { x[p] = vec3(1.0, 0.5, 0.35); col[p] = vec3(0.0, 1.0, 0.0); }
    }";
    let mut g = kernel_graph(
        &[
            F("x", "vec3", &[2], json!(0)),
            F("col", "vec3", &[2], json!(0)),
        ],
        code,
        &[2],
        json!({}),
    );
    add_view(
        &mut g,
        "view",
        "particles",
        json!({"width": 100, "height": 100, "radius": 20.0, "background": [0.0, 0.0, 0.0],
               "domain": [0.0, 0.0, 0.0, 1.0, 1.0, 1.0],
               "camera": {"yaw": 0, "pitch": 0, "target": [0.5, 0.5, 0.5], "distance": 2.0, "fov": 90.0}}),
        &[("positions", "x"), ("color", "col")],
    );
    let mut sim = Runs::new(&g, 0);
    let img = sim.check("spheres_in_depth").remove(0).1;
    dump("spheres_in_depth", "view", "vm", &img);
    let px = |x: u32, y: u32| {
        let i = ((y * img.width + x) * 4) as usize;
        [img.rgba[i], img.rgba[i + 1], img.rgba[i + 2]]
    };
    let g61 = px(61, 49);
    assert!(
        g61[1] > 0 && g61[0] == 0,
        "green shows at its centre: {:?}",
        g61
    );
    let r50 = px(50, 49);
    assert!(
        r50[0] > 0 && r50[1] == 0,
        "red shows at its centre: {:?}",
        r50
    );
}
