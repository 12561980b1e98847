//! Draws views on the GPU straight from the simulation's field storage
//! buffers (no CPU round trip of field data), matching the CPU renderer in
//! `render.rs` within a few levels of 255 per channel.
//!
//! A `WgpuViewRenderer` is made once per (GPU engine, program): it owns one
//! render pipeline and bind group per view, with the field address
//! arithmetic of the field's `ir::layout::AddressPlan` (nested/blocked layouts included)
//! generated into each view's WGSL as constants. `render` records into a
//! caller's command encoder and can draw into any target of the renderer's
//! format (the app's viewport); `render_to_image` draws into an offscreen
//! texture and reads it back as an `Image`.
//!
//! - Image views: one full quad; the fragment shader maps its pixel to a
//!   cell, loads the words and applies the colormap. An auto range is the
//!   min..max of the finite values of the current frame, found by a small
//!   compute pass (atomic max over order-preserving keys) recorded before
//!   the draw.
//! - Particle views: one instanced draw; instance 0 is the background, then
//!   one quad of side 2·(radius+1) per particle in index order, with the
//!   CPU's coverage rule in the fragment shader and alpha blending (a single
//!   draw keeps primitive order, so blending follows index order).

use crate::render::{Image, MIN_OUTLINED_BLOCK, OUTLINE_ALPHA, OUTLINE_RGB};
use crate::wgpu_backend::{WgpuContext, WgpuEngine};
use crate::RuntimeError;
use std::fmt::Write as _;
use std::sync::Arc;
use weft_ir::ir::layout::{root_of, AddressPlan, HASH_MUL, WORD_BITS};
use weft_ir::ir::quant::Quant;
use weft_ir::ir::{Colormap, FieldId, LayoutId, LayoutKind, Program, Storage, View};
use weft_ir::types::{Scalar, Type};

/// Workgroup size of the min/max reduction.
const REDUCE_WG: u32 = 256;
/// At most this many reduction workgroups (each loops over its share).
const REDUCE_MAX_GROUPS: u64 = 1024;

struct ViewPipeline {
    node_id: String,
    width: u32,
    height: u32,
    pipeline: wgpu::RenderPipeline,
    bind_group: wgpu::BindGroup,
    /// Vertices and instances of the single draw.
    instances: u32,
    /// Auto-range image views: (min/max buffer, reduction pipeline, its bind group, workgroups).
    reduce: Option<(wgpu::Buffer, wgpu::ComputePipeline, wgpu::BindGroup, u32)>,
    /// The WGSL of the render (and reduction) shader, for debugging.
    wgsl: String,
}

/// Draws a program's views from a GPU engine's root buffers.
pub struct WgpuViewRenderer {
    ctx: Arc<WgpuContext>,
    format: wgpu::TextureFormat,
    views: Vec<ViewPipeline>,
    /// The root buffers the bind groups use (to check they belong to an engine).
    roots: Vec<(LayoutId, wgpu::Buffer)>,
}

fn dev_err(node: &str, what: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::Device(format!("view '{}': {}", node, what))
}

/// A WGSL f32 expression with exactly the bits of `x` (NaN and inf included).
fn flit(x: f32) -> String {
    if x.is_finite() {
        let s = format!("{:?}", x);
        // Debug prints the shortest round-trip form, possibly with an exponent.
        if s.contains('e') || s.contains('.') {
            format!("f32({})", s)
        } else {
            format!("f32({}.0)", s)
        }
    } else {
        format!("bitcast<f32>({:#010x}u)", x.to_bits())
    }
}

/// `fn NAME(i0: u32, ..) -> u32`: the word address of component 0 of
/// `field` at a logical index — the field's `AddressPlan` written as WGSL.
///
/// Sparse levels read the root through `load` (the `load_fn` of the same
/// field, called with component 0: fields under sparse nodes have word
/// storage, so it returns the raw word): a null pointer cell or an absent
/// hash cell continues in the node's initial image, so an inactive cell
/// shows its initial value, exactly like kernel reads.
fn address_fn(
    p: &Program,
    field: FieldId,
    name: &str,
    load: &str,
    node: &str,
) -> Result<String, RuntimeError> {
    walk_fn(p, field, name, load, node, Walk::Address)
}

/// What a generated layout walk returns.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Walk {
    /// The word address of component 0 (`address_fn`).
    Address,
    /// `render::activity_mask`'s flags for one cell: 1 = every level
    /// active, 2 = on the border of an active outermost sparse block.
    Activity,
}

/// `fn NAME(i0: u32, ..) -> u32`: the flags of `render::activity_mask` for
/// a sparse field, by the same walk as `address_fn`.
fn activity_fn(
    p: &Program,
    field: FieldId,
    name: &str,
    load: &str,
    node: &str,
) -> Result<String, RuntimeError> {
    walk_fn(p, field, name, load, node, Walk::Activity)
}

fn walk_fn(
    p: &Program,
    field: FieldId,
    name: &str,
    load: &str,
    node: &str,
    walk: Walk,
) -> Result<String, RuntimeError> {
    let fd = &p.fields[field];
    let plan = AddressPlan::new(p, field);
    // `load_fn`'s private bit offset for sub-word cells, and its raw word
    // reader for the sparse levels.
    let sub = format!("{load}_sub");
    let load = &format!("{load}_word");
    let outer = plan
        .levels
        .iter()
        .position(|l| !matches!(l.kind, LayoutKind::Dense));
    let fit = |v: u64| -> Result<u32, RuntimeError> {
        u32::try_from(v).map_err(|_| {
            dev_err(
                node,
                format!("field '{}' is too large to draw on the GPU", fd.name),
            )
        })
    };
    // The word holding component 0's first bit (`load_fn` adds the bit offset).
    let big = |bits: u64| fit(bits / WORD_BITS);
    let args: Vec<String> = (0..fd.shape.len())
        .map(|d| format!("i{}: u32", d))
        .collect();
    let mut s = format!(
        "fn {}({}) -> u32 {{\n    var a: u32 = {}u;\n",
        name,
        args.join(", "),
        big(plan.base_bits)?
    );
    if plan.is_sparse() {
        // `c` walks the cell address level by level (see `sparse_ir::walk`).
        s.push_str("    var c: u32 = 0u;\n");
    }
    if walk == Walk::Activity {
        s.push_str("    var act: u32 = 1u;\n    var edge: u32 = 0u;\n");
    }
    for (lvl, level) in plan.levels.iter().enumerate() {
        let mut lin = String::from("0u");
        for (d, step) in level.axes.iter().enumerate() {
            let mut x = if step.divisor == 1 {
                format!("i{}", d)
            } else {
                format!("(i{} / {}u)", d, fit(step.divisor)?)
            };
            if let Some(m) = step.modulus {
                x = format!("({} % {}u)", x, m);
            }
            lin = if lin == "0u" {
                x
            } else {
                format!("({}) * {}u + {}", lin, step.extent, x)
            };
        }
        if !plan.is_sparse() && !level.cell_bits.is_multiple_of(WORD_BITS) {
            // A bit_array: its cells share one word; the index picks the bit
            // (handed to `load_fn` through its private `_sub`).
            let _ = writeln!(
                s,
                "    {} = ({}) * {}u;\n    a += {}u;",
                sub,
                lin,
                level.cell_bits,
                big(level.offset_bits)?
            );
            continue;
        }
        if !plan.is_sparse() {
            let _ = write!(s, "    a += ({}) * {}u", lin, big(level.cell_bits)?);
            if lvl > 0 {
                let _ = write!(s, " + {}u", big(level.offset_bits)?);
            }
            s.push_str(";\n");
            continue;
        }
        let block = if lvl == 0 {
            "0u".to_string()
        } else {
            format!("c + {}u", big(level.offset_bits)?)
        };
        let cw = big(level.cell_bits)?;
        if !level.cell_bits.is_multiple_of(WORD_BITS) {
            // A bit_array below the sparse levels: its cells share the one
            // word of its block; the index picks the bit.
            let _ = writeln!(
                s,
                "    {} = ({}) * {}u;\n    c = {};",
                sub, lin, level.cell_bits, block
            );
            continue;
        }
        match level.kind {
            LayoutKind::Dense => {
                let _ = writeln!(s, "    c = {} + ({}) * {}u;", block, lin, cw);
            }
            // Inactive cells of both hold their initial values.
            LayoutKind::Bitmasked | LayoutKind::Dynamic => {
                // A dynamic list's slots past its length are drawn as
                // active cells holding `init`.
                if walk == Walk::Activity && matches!(level.kind, LayoutKind::Bitmasked) {
                    let _ = writeln!(
                        s,
                        "    {{ let l = {lin}; act = act & ({load}({block} + l / 32u) >> (l % 32u)); }}",
                    );
                }
                let _ = writeln!(
                    s,
                    "    c = {} + {}u + ({}) * {}u;",
                    block,
                    fit(level.header_words)?,
                    lin,
                    cw
                );
            }
            LayoutKind::Hash { capacity } => {
                // Linear probing as `layout::hash_start` / `sparse_ir`; an
                // absent cell reads the initial image.
                let nk = level.axes.len();
                let keys: Vec<String> = level
                    .axes
                    .iter()
                    .enumerate()
                    .map(|(d, step)| format!("(i{} / {}u + 1u)", d, step.divisor))
                    .collect();
                let _ = writeln!(
                    s,
                    "    {{\n        var h: u32 = 0u;\n        var hit: u32 = 0u;"
                );
                for k in &keys {
                    let _ = writeln!(s, "        h = (h ^ {}) * {}u;", k, HASH_MUL);
                }
                let _ = writeln!(
                    s,
                    "        var slot: u32 = (h ^ (h >> 16u)) % {cap}u;\n        c = {img}u;\n        for (var t: u32 = 0u; t < {cap}u; t = t + 1u) {{\n            let b = slot * {stride}u;\n            let k0 = {load}(b);\n            if (k0 == 0u) {{ break; }}",
                    cap = capacity,
                    img = fit(level.image)?,
                    stride = fit(nk as u64 + level.cell_bits / WORD_BITS)?,
                    load = load,
                );
                let matches: Vec<String> = keys
                    .iter()
                    .enumerate()
                    .map(|(d, k)| format!("{}(b + {}u) == {}", load, d, k))
                    .collect();
                let _ = writeln!(
                    s,
                    "            if ({}) {{ c = b + {}u; hit = 1u; break; }}\n            slot = select(slot + 1u, 0u, slot + 1u == {}u);\n        }}{}\n    }}",
                    matches.join(" && "),
                    nk,
                    capacity,
                    if walk == Walk::Activity {
                        "\n        act = act & hit;"
                    } else {
                        ""
                    }
                );
            }
            LayoutKind::Pointer { .. } => {
                let pool = level.pool.expect("pointer levels have a pool");
                let _ = writeln!(
                    s,
                    "    {{ let r = {}({} + ({})); c = select({}u + (r - 1u) * {}u, {}u, r == 0u);{} }}",
                    load,
                    block,
                    lin,
                    fit(pool.data)?,
                    cw,
                    fit(level.image)?,
                    if walk == Walk::Activity {
                        " act = act & select(1u, 0u, r == 0u);"
                    } else {
                        ""
                    }
                );
            }
        }
        if walk == Walk::Activity
            && Some(lvl) == outer
            && level.axes.iter().all(|a| a.divisor >= MIN_OUTLINED_BLOCK)
        {
            let mut border = Vec::new();
            for (d, step) in level.axes.iter().enumerate() {
                let dv = fit(step.divisor)?;
                border.push(format!(
                    "(i{d} % {dv}u) == 0u || (i{d} % {dv}u) == {}u",
                    dv - 1
                ));
            }
            let _ = writeln!(
                s,
                "    edge = select(0u, act & 1u, {});",
                border.join(" || ")
            );
        }
    }
    if walk == Walk::Activity {
        s.push_str("    return (act & 1u) | (edge << 1u);\n}\n");
        return Ok(s);
    }
    if plan.is_sparse() {
        s.push_str("    a += c;\n");
    }
    s.push_str("    return a;\n}\n");
    Ok(s)
}

/// The distinct roots of `fields`, in order: binding `1 + k` holds root `k`.
fn roots_of(p: &Program, fields: &[FieldId]) -> Vec<LayoutId> {
    let mut roots = Vec::new();
    for &f in fields {
        let r = root_of(p, p.fields[f].layout);
        if !roots.contains(&r) {
            roots.push(r);
        }
    }
    roots
}

fn root_decls(roots: &[LayoutId], first_binding: u32) -> String {
    let mut s = String::new();
    for k in 0..roots.len() {
        let _ = writeln!(
            s,
            "@group(0) @binding({}) var<storage, read> root{}: array<u32>;",
            first_binding + k as u32,
            k
        );
    }
    s
}

/// `fn NAME(a: u32, c: u32) -> u32`: the compute value's bits of component
/// `c` of the element whose `address_fn` word address is `a`. Quantized
/// fields are extracted and decoded here (`quant_decode_wgsl`), so the view
/// code only ever sees compute values, like `.npy` dumps.
fn load_fn(p: &Program, roots: &[LayoutId], field: FieldId, name: &str) -> String {
    let r = root_of(p, p.fields[field].layout);
    let k = roots
        .iter()
        .position(|&x| x == r)
        .expect("field's root is bound");
    let plan = AddressPlan::new(p, field);
    // The raw word reader the sparse levels of `address_fn` walk with.
    let word = format!("fn {name}_word(a: u32) -> u32 {{ return root{k}[a]; }}\n");
    word + &match plan.storage {
        Storage::Word => format!(
            "fn {}(a: u32, c: u32) -> u32 {{ return root{}[a + c]; }}\n",
            name, k
        ),
        Storage::Quant(q) => {
            // Every level's stride is whole words except a bit_array's,
            // whose bit offset `address_fn` leaves in `_sub`; otherwise the
            // bit offset of component 0 is the same for every element.
            let first = plan.base_bits % WORD_BITS;
            format!(
                "{}var<private> {name}_sub: u32 = 0u;\nfn {name}(a: u32, c: u32) -> u32 {{\n    let bit = {first}u + c * {stride}u + {name}_sub;\n    let w = root{k}[a + bit / 32u];\n    return {name}_decode((w >> (bit % 32u)) & {mask}u);\n}}\n",
                quant_decode_wgsl(q, &format!("{}_decode", name)),
                stride = plan.component_bits,
                mask = q.mask(),
            )
        }
        Storage::Shared(sf) => {
            // The whole element is one code; component `c` is decoded
            // from it (`SharedFloat::decode`, the same operations).
            let first = plan.base_bits % WORD_BITS;
            let (bias, _, _) = sf.consts();
            let mut dec = format!(
                "    let e = raw & {em}u;\n    let scale = bitcast<f32>((e + {k}u) << 23u);\n    let lane = (raw >> ({ex}u + c * {lb}u)) & {lm}u;\n    var b = bitcast<u32>(f32(lane & {mm}u) * scale);\n",
                em = weft_ir::ir::quant::mask(sf.exp as u32),
                k = 128 - bias - sf.frac as u32,
                ex = sf.exp,
                lb = sf.lane_bits(),
                lm = weft_ir::ir::quant::mask(sf.lane_bits()),
                mm = weft_ir::ir::quant::mask(sf.frac as u32),
            );
            if sf.signed {
                let _ = writeln!(dec, "    b = b | ((lane >> {}u) << 31u);", sf.frac);
            }
            format!(
                "fn {name}_decode(raw: u32, c: u32) -> u32 {{\n{dec}    return b;\n}}\nvar<private> {name}_sub: u32 = 0u;\nfn {name}(a: u32, c: u32) -> u32 {{\n    let bit = {first}u + {name}_sub;\n    let w = root{k}[a + bit / 32u];\n    return {name}_decode((w >> (bit % 32u)) & {mask}u, c);\n}}\n",
                mask = weft_ir::ir::quant::mask(sf.bits()),
            )
        }
    }
}

/// `fn NAME(raw: u32) -> u32`: `ir::quant::Quant::decode` in WGSL (the same
/// operations, so views show exactly the values kernels and dumps see).
fn quant_decode_wgsl(q: Quant, name: &str) -> String {
    let body = match q {
        Quant::Int { bits, signed, .. } => {
            if signed {
                let k = 32 - bits as u32;
                format!("return bitcast<u32>(bitcast<i32>(raw << {k}u) >> {k}u);")
            } else {
                "return raw;".to_string()
            }
        }
        Quant::Fixed { .. } => {
            let (scale, _, off) = q.fixed_consts();
            format!(
                "return bitcast<u32>((f32(raw) + {}) * {});",
                flit(off),
                flit(scale)
            )
        }
        Quant::Float {
            exp, frac, signed, ..
        } => {
            let (bias, _) = q.float_consts();
            let fr = frac as u32;
            let mut s = format!(
                "let mag = raw & {m}u;\n    var b = (mag << {sh}u) + {rebias}u;\n    if ((mag >> {fr}u) == 0u) {{ b = bitcast<u32>(f32(mag) * {k}); }}\n",
                m = weft_ir::ir::quant::mask(exp as u32 + fr),
                sh = 23 - fr,
                rebias = (127 - bias) << 23,
                k = flit(f32::from_bits((127 + 1 - bias - fr) << 23)),
            );
            if signed {
                let _ = writeln!(s, "    b = b | ((raw >> {}u) << 31u);", exp as u32 + fr);
            }
            s.push_str("    return b;");
            s
        }
    };
    format!("fn {}(raw: u32) -> u32 {{\n    {}\n}}\n", name, body)
}

const COMMON_WGSL: &str = r#"
fn is_nan_bits(b: u32) -> bool { return (b & 0x7fffffffu) > 0x7f800000u; }
fn is_finite_bits(b: u32) -> bool { return (b & 0x7f800000u) != 0x7f800000u; }
// clamp(x, 0, 1) with NaN -> 0 (the CPU's `to_u8` and `colormap` behaviour).
fn sat(x: f32) -> f32 {
    if (is_nan_bits(bitcast<u32>(x))) { return 0.0; }
    if (x >= 1.0) { return 1.0; }
    if (x > 0.0) { return x; }
    return 0.0;
}
// An order-preserving u32 key of a finite f32 (always >= 0x00800000).
fn key_of(v: f32) -> u32 {
    let b = bitcast<u32>(v);
    if ((b & 0x80000000u) != 0u) { return ~b; }
    return b | 0x80000000u;
}
fn value_of_key(k: u32) -> f32 {
    if ((k & 0x80000000u) != 0u) { return bitcast<f32>(k & 0x7fffffffu); }
    return bitcast<f32>(~k);
}
const CORNERS = array<vec2<f32>, 6>(vec2(0.0, 0.0), vec2(1.0, 0.0), vec2(0.0, 1.0), vec2(0.0, 1.0), vec2(1.0, 0.0), vec2(1.0, 1.0));
"#;

/// WGSL of the colormap (`render::colormap`): `fn cmap(t: f32) -> vec3<f32>`.
fn colormap_wgsl(map: Colormap) -> String {
    let poly = |c: [[f32; 3]; 7]| -> String {
        let mut s = String::from("fn cmap(t0: f32) -> vec3<f32> {\n    let t = sat(t0);\n");
        for (k, ch) in ["r", "g", "b"].iter().enumerate() {
            let _ = writeln!(s, "    var {} = {};", ch, flit(c[6][k]));
            for i in (0..6).rev() {
                let _ = writeln!(s, "    {} = {} * t + {};", ch, ch, flit(c[i][k]));
            }
        }
        s.push_str("    return vec3<f32>(clamp(r, 0.0, 1.0), clamp(g, 0.0, 1.0), clamp(b, 0.0, 1.0));\n}\n");
        s
    };
    if let Some(c) = crate::render::colormap_poly(map) {
        return poly(c);
    }
    match map {
        Colormap::Coolwarm => {
            let [cold, mid, warm] = crate::render::COOLWARM;
            let v =
                |c: [f32; 3]| format!("vec3<f32>({}, {}, {})", flit(c[0]), flit(c[1]), flit(c[2]));
            format!(
                "fn cmap(t0: f32) -> vec3<f32> {{\n    let t = sat(t0);\n    let cold = {};\n    let mid = {};\n    let warm = {};\n    if (t < 0.5) {{ let u = t * 2.0; return cold + (mid - cold) * u; }}\n    let u = t * 2.0 - 1.0;\n    return mid + (warm - mid) * u;\n}}\n",
                v(cold),
                v(mid),
                v(warm)
            )
        }
        _ => "fn cmap(t0: f32) -> vec3<f32> { let t = sat(t0); return vec3<f32>(t, t, t); }\n"
            .to_string(),
    }
}

/// WGSL converting a word of the field's scalar type to f32 (like the CPU's `value`).
fn value_fn(scalar: Option<Scalar>) -> &'static str {
    match scalar {
        Some(Scalar::I32) => "fn value(b: u32) -> f32 { return f32(bitcast<i32>(b)); }\n",
        Some(Scalar::U32) => "fn value(b: u32) -> f32 { return f32(b); }\n",
        _ => "fn value(b: u32) -> f32 { return bitcast<f32>(b); }\n",
    }
}

struct ShaderParts {
    render: String,
    reduce: Option<String>,
    roots: Vec<LayoutId>,
    width: u32,
    height: u32,
    instances: u32,
    cells: u64,
    blend: bool,
    stage: wgpu::ShaderStages,
}

fn image_shaders(
    p: &Program,
    node: &str,
    field: FieldId,
    map: Colormap,
    range: Option<(f32, f32)>,
    show_active: bool,
) -> Result<ShaderParts, RuntimeError> {
    let f = &p.fields[field];
    let show_active = show_active && AddressPlan::new(p, field).is_sparse();
    if f.shape.len() != 2 {
        return Err(dev_err(node, format!("field '{}' is not 2-D", f.name)));
    }
    let (w, h) = (f.shape[0], f.shape[1]);
    let comps = f.ty.components();
    let vec4 = f.ty == Type::Vector(Scalar::F32, 4);
    let is_float = !matches!(f.ty.scalar(), Some(Scalar::I32) | Some(Scalar::U32));
    let roots = roots_of(p, &[field]);
    let auto = range.is_none() && comps == 1;
    let mut head = String::from(COMMON_WGSL);
    head.push_str(&root_decls(&roots, 1));
    head.push_str(&address_fn(p, field, "addr", "ld", node)?);
    head.push_str(&load_fn(p, &roots, field, "ld"));
    head.push_str(value_fn(f.ty.scalar()));
    let _ = writeln!(head, "const W: u32 = {}u;\nconst H: u32 = {}u;", w, h);

    let mut render = head.clone();
    render.push_str(&colormap_wgsl(map));
    if show_active {
        render.push_str(&activity_fn(p, field, "activity", "ld", node)?);
        let _ = writeln!(
            render,
            "// render::inactive_rgb and the outline of render::render_view.\n\
             fn sat3(c: vec3<f32>) -> vec3<f32> {{ return vec3<f32>(sat(c.x), sat(c.y), sat(c.z)); }}\n\
             fn inactive_rgb(x: u32, y: u32) -> vec3<f32> {{\n    \
             if (((x / 8u) + (y / 8u)) % 2u == 0u) {{ return vec3<f32>(0.16, 0.16, 0.18); }}\n    \
             return vec3<f32>(0.22, 0.22, 0.25);\n}}\n\
             fn overlay(rgb: vec3<f32>, x: u32, y: u32) -> vec3<f32> {{\n    \
             let f = activity(x, y);\n    var c = rgb;\n    \
             if ((f & 1u) == 0u) {{ c = inactive_rgb(x, y); }}\n    \
             if ((f & 2u) != 0u) {{ c = c + (vec3<f32>({}, {}, {}) - sat3(c)) * {}; }}\n    \
             return c;\n}}",
            flit(OUTLINE_RGB[0]),
            flit(OUTLINE_RGB[1]),
            flit(OUTLINE_RGB[2]),
            flit(OUTLINE_ALPHA)
        );
    } else {
        render
            .push_str("fn overlay(rgb: vec3<f32>, x: u32, y: u32) -> vec3<f32> { return rgb; }\n");
    }
    if auto {
        render.push_str("@group(0) @binding(0) var<storage, read> minmax: array<u32, 2>;\n");
        render.push_str("fn range() -> vec2<f32> {\n    let mx = minmax[1];\n    if (mx == 0u) { return vec2<f32>(0.0, 1.0); }\n    return vec2<f32>(value_of_key(~minmax[0]), value_of_key(mx));\n}\n");
    } else {
        let (lo, hi) = range.unwrap_or((0.0, 1.0));
        let _ = writeln!(
            render,
            "fn range() -> vec2<f32> {{ return vec2<f32>({}, {}); }}",
            flit(lo),
            flit(hi)
        );
    }
    render.push_str(
        r#"
struct VOut {
    @builtin(position) pos: vec4<f32>,
    @location(0) @interpolate(linear) uv: vec2<f32>,
};
@vertex fn vs(@builtin(vertex_index) vi: u32) -> VOut {
    let c = CORNERS[vi];
    var o: VOut;
    o.pos = vec4<f32>(c.x * 2.0 - 1.0, 1.0 - c.y * 2.0, 0.0, 1.0);
    o.uv = c * vec2<f32>(f32(W), f32(H));
    return o;
}
// (v - lo) / span, with the CPU's treatment of NaN and infinities.
fn ranged(b: u32, lo: f32, span: f32) -> f32 {
    let v = value(b);
"#,
    );
    if is_float {
        render.push_str("    if (is_nan_bits(b)) { return 0.0; }\n    if (!is_finite_bits(b)) { if ((b & 0x80000000u) != 0u) { return 0.0; } return 1.0; }\n");
    }
    render.push_str(
        r#"    return sat((v - lo) / span);
}
@fragment fn fs(i: VOut) -> @location(0) vec4<f32> {
    let x = u32(clamp(floor(i.uv.x), 0.0, f32(W - 1u)));
    let row = u32(clamp(floor(i.uv.y), 0.0, f32(H - 1u)));
    let y = H - 1u - row;
    let a = addr(x, y);
    let r = range();
    let lo = r.x;
    var span = 1.0;
    if (r.y > r.x) { span = r.y - r.x; }
"#,
    );
    if comps == 1 {
        render.push_str(
            "    let rgb = overlay(cmap(ranged(ld(a, 0u), lo, span)), x, y);\n    return vec4<f32>(rgb, 1.0);\n}\n",
        );
    } else {
        render.push_str("    let rgb = overlay(vec3<f32>(ranged(ld(a, 0u), lo, span), ranged(ld(a, 1u), lo, span), ranged(ld(a, 2u), lo, span)), x, y);\n");
        if vec4 {
            render.push_str("    let alpha = sat(bitcast<f32>(ld(a, 3u)));\n");
        } else {
            render.push_str("    let alpha = 1.0;\n");
        }
        render.push_str("    return vec4<f32>(rgb, alpha);\n}\n");
    }

    let cells = w as u64 * h as u64;
    let reduce = if auto {
        let mut r = head;
        let _ = write!(
            r,
            r#"
@group(0) @binding(0) var<storage, read_write> minmax: array<atomic<u32>, 2>;
var<workgroup> wmin: atomic<u32>;
var<workgroup> wmax: atomic<u32>;
const CELLS: u32 = {cells}u;
// minmax[0] = max of !key (so the min), minmax[1] = max of key; 0 = nothing finite.
@compute @workgroup_size({wg}) fn reduce(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) li: u32, @builtin(num_workgroups) nwg: vec3<u32>) {{
    if (li == 0u) {{
        atomicStore(&wmin, 0u);
        atomicStore(&wmax, 0u);
    }}
    workgroupBarrier();
    var mn = 0u;
    var mx = 0u;
    let stride = nwg.x * {wg}u;
    for (var k = gid.x; k < CELLS; k += stride) {{
        let b = ld(addr(k / H, k % H), 0u);
        {finite_check}
        let key = key_of(value(b));
        mx = max(mx, key);
        mn = max(mn, ~key);
    }}
    atomicMax(&wmin, mn);
    atomicMax(&wmax, mx);
    workgroupBarrier();
    if (li == 0u) {{
        atomicMax(&minmax[0], atomicLoad(&wmin));
        atomicMax(&minmax[1], atomicLoad(&wmax));
    }}
}}
"#,
            cells = cells,
            wg = REDUCE_WG,
            finite_check = if is_float {
                "if (!is_finite_bits(b)) { continue; }"
            } else {
                ""
            }
        );
        Some(r)
    } else {
        None
    };
    Ok(ShaderParts {
        render,
        reduce,
        roots,
        width: w,
        height: h,
        instances: 1,
        cells,
        blend: false,
        stage: wgpu::ShaderStages::FRAGMENT,
    })
}

#[allow(clippy::too_many_arguments)]
fn particle_shaders(
    p: &Program,
    node: &str,
    positions: FieldId,
    color_field: Option<FieldId>,
    color: [f32; 3],
    background: [f32; 3],
    radius: f32,
    width: u32,
    height: u32,
    domain: [f32; 4],
) -> Result<ShaderParts, RuntimeError> {
    let pf = &p.fields[positions];
    if pf.shape.len() != 1 || pf.ty != Type::Vector(Scalar::F32, 2) {
        return Err(dev_err(
            node,
            format!("positions field '{}' is not a 1-D vec2 field", pf.name),
        ));
    }
    let n = pf.shape[0];
    if n == u32::MAX {
        return Err(dev_err(node, "too many particles"));
    }
    let mut fields = vec![positions];
    fields.extend(color_field);
    let roots = roots_of(p, &fields);
    let mut s = String::from(COMMON_WGSL);
    s.push_str(&root_decls(&roots, 1));
    s.push_str(&address_fn(p, positions, "addr_pos", "ld_pos", node)?);
    s.push_str(&load_fn(p, &roots, positions, "ld_pos"));
    let rad = radius.max(0.0);
    let _ = writeln!(
        s,
        "const W: f32 = {};\nconst H: f32 = {};\nconst RAD: f32 = {};",
        flit(width as f32),
        flit(height as f32),
        flit(rad)
    );
    let _ = writeln!(
        s,
        "const D0: f32 = {};\nconst D1: f32 = {};\nconst D2: f32 = {};\nconst D3: f32 = {};",
        flit(domain[0]),
        flit(domain[1]),
        flit(domain[2]),
        flit(domain[3])
    );
    let _ = writeln!(
        s,
        "const BG: vec3<f32> = vec3<f32>({}, {}, {});",
        flit(background[0]),
        flit(background[1]),
        flit(background[2])
    );
    match color_field {
        Some(c) => {
            s.push_str(&address_fn(p, c, "addr_col", "ld_col", node)?);
            s.push_str(&load_fn(p, &roots, c, "ld_col"));
            if p.fields[c].ty == Type::U32 {
                s.push_str("fn particle_rgb(k: u32) -> vec3<f32> {\n    let v = ld_col(addr_col(k), 0u);\n    return vec3<f32>(f32((v >> 16u) & 255u), f32((v >> 8u) & 255u), f32(v & 255u)) / 255.0;\n}\n");
            } else {
                s.push_str("fn particle_rgb(k: u32) -> vec3<f32> {\n    let a = addr_col(k);\n    return vec3<f32>(sat(bitcast<f32>(ld_col(a, 0u))), sat(bitcast<f32>(ld_col(a, 1u))), sat(bitcast<f32>(ld_col(a, 2u))));\n}\n");
            }
        }
        None => {
            let _ = writeln!(
                s,
                "fn particle_rgb(k: u32) -> vec3<f32> {{ return vec3<f32>({}, {}, {}); }}",
                flit(color[0]),
                flit(color[1]),
                flit(color[2])
            );
        }
    }
    s.push_str(
        r#"
struct VOut {
    @builtin(position) pos: vec4<f32>,
    // Pixel coordinates in the view's own image (y down).
    @location(0) @interpolate(linear) p: vec2<f32>,
    @location(1) @interpolate(flat) center: vec2<f32>,
    @location(2) @interpolate(flat) rgb: vec3<f32>,
    @location(3) @interpolate(flat) kind: u32,
};
fn clip(q: vec2<f32>) -> vec4<f32> {
    return vec4<f32>(q.x / W * 2.0 - 1.0, 1.0 - q.y / H * 2.0, 0.0, 1.0);
}
@vertex fn vs(@builtin(vertex_index) vi: u32, @builtin(instance_index) ii: u32) -> VOut {
    let c = CORNERS[vi];
    var o: VOut;
    o.center = vec2<f32>(0.0, 0.0);
    if (ii == 0u) {
        // The background.
        let q = c * vec2<f32>(W, H);
        o.pos = clip(q);
        o.p = q;
        o.rgb = BG;
        o.kind = 0u;
        return o;
    }
    let k = ii - 1u;
    let a = addr_pos(k);
    let bx = ld_pos(a, 0u);
    let by = ld_pos(a, 1u);
    o.kind = 1u;
    o.rgb = vec3<f32>(0.0, 0.0, 0.0);
    o.p = vec2<f32>(0.0, 0.0);
    // Skipped particles become a degenerate triangle outside the view.
    o.pos = vec4<f32>(-2.0, -2.0, 0.0, 1.0);
    if (!is_finite_bits(bx) || !is_finite_bits(by)) { return o; }
    let px = bitcast<f32>(bx);
    let py = bitcast<f32>(by);
    let cx = (px - D0) / (D2 - D0) * W;
    let cy = (1.0 - (py - D1) / (D3 - D1)) * H;
    let reach = RAD + 1.0;
    if (!(cx + reach >= 0.0 && cx - reach <= W && cy + reach >= 0.0 && cy - reach <= H)) { return o; }
    let q = vec2<f32>(cx, cy) + (c * 2.0 - 1.0) * reach;
    o.pos = clip(q);
    o.p = q;
    o.center = vec2<f32>(cx, cy);
    o.rgb = particle_rgb(k);
    return o;
}
@fragment fn fs(i: VOut) -> @location(0) vec4<f32> {
    if (i.kind == 0u) { return vec4<f32>(i.rgb, 1.0); }
    let d = i.p - i.center;
    let cover = clamp(RAD + 0.5 - sqrt(d.x * d.x + d.y * d.y), 0.0, 1.0);
    if (cover <= 0.0) { discard; }
    return vec4<f32>(i.rgb, cover);
}
"#,
    );
    Ok(ShaderParts {
        render: s,
        reduce: None,
        roots,
        width,
        height,
        instances: n + 1,
        cells: n as u64,
        blend: true,
        stage: wgpu::ShaderStages::VERTEX,
    })
}

impl WgpuViewRenderer {
    /// A renderer drawing into `Rgba8Unorm` targets (what `render_to_image` reads back).
    pub fn new(engine: &WgpuEngine, program: &Program) -> Result<WgpuViewRenderer, RuntimeError> {
        Self::with_format(engine, program, wgpu::TextureFormat::Rgba8Unorm)
    }

    /// A renderer whose pipelines draw into targets of `format` (e.g. a
    /// window surface's). Colours are written as they are computed, so use a
    /// non-sRGB format (or view) to get the CPU renderer's values.
    /// `render_to_image` works for `Rgba8Unorm` and `Bgra8Unorm`.
    pub fn with_format(
        engine: &WgpuEngine,
        program: &Program,
        format: wgpu::TextureFormat,
    ) -> Result<WgpuViewRenderer, RuntimeError> {
        let ctx = engine.ctx.clone();
        let dev = &ctx.device;
        let mut views = Vec::new();
        let mut all_roots: Vec<(LayoutId, wgpu::Buffer)> = Vec::new();
        for v in &program.views {
            let node = v.node_id().to_string();
            let parts = match v {
                View::Image {
                    field,
                    colormap,
                    range,
                    show_active,
                    ..
                } => image_shaders(program, &node, *field, *colormap, *range, *show_active)?,
                View::Particles {
                    positions,
                    color_field,
                    color,
                    background,
                    radius,
                    width,
                    height,
                    domain,
                    ..
                } => particle_shaders(
                    program,
                    &node,
                    *positions,
                    *color_field,
                    *color,
                    *background,
                    *radius,
                    *width,
                    *height,
                    *domain,
                )?,
            };
            let mut buffers = Vec::new();
            for &r in &parts.roots {
                let b = engine.root_buffer(r).ok_or_else(|| {
                    dev_err(
                        &node,
                        format!(
                            "layout node '{}' has no GPU buffer",
                            program.layouts[r].node_id
                        ),
                    )
                })?;
                if !all_roots.iter().any(|(x, _)| *x == r) {
                    all_roots.push((r, b.clone()));
                }
                buffers.push(b.clone());
            }
            let oom = dev.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
            let scope = dev.push_error_scope(wgpu::ErrorFilter::Validation);
            let built = Self::build_view(dev, format, &node, &parts, &buffers);
            let validation = pollster::block_on(scope.pop());
            let memory = pollster::block_on(oom.pop());
            if let Some(e) = validation.or(memory) {
                return Err(dev_err(
                    &node,
                    format!(
                        "the GPU renderer could not be built on {}: {}",
                        ctx.info.name, e
                    ),
                ));
            }
            views.push(built);
        }
        Ok(WgpuViewRenderer {
            ctx,
            format,
            views,
            roots: all_roots,
        })
    }

    fn build_view(
        dev: &wgpu::Device,
        format: wgpu::TextureFormat,
        node: &str,
        parts: &ShaderParts,
        buffers: &[wgpu::Buffer],
    ) -> ViewPipeline {
        let storage = |binding: u32, visibility: wgpu::ShaderStages, read_only: bool| {
            wgpu::BindGroupLayoutEntry {
                binding,
                visibility,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Storage { read_only },
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            }
        };
        let minmax = parts.reduce.as_ref().map(|_| {
            dev.create_buffer(&wgpu::BufferDescriptor {
                label: Some("view min/max"),
                size: 8,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        });
        let layout_and_group = |visibility: wgpu::ShaderStages, minmax_rw: Option<bool>| {
            let mut entries = Vec::new();
            let mut bind = Vec::new();
            if let (Some(rw), Some(mm)) = (minmax_rw, &minmax) {
                entries.push(storage(0, visibility, !rw));
                bind.push(wgpu::BindGroupEntry {
                    binding: 0,
                    resource: mm.as_entire_binding(),
                });
            }
            for (k, b) in buffers.iter().enumerate() {
                entries.push(storage(1 + k as u32, visibility, true));
                bind.push(wgpu::BindGroupEntry {
                    binding: 1 + k as u32,
                    resource: b.as_entire_binding(),
                });
            }
            let bgl = dev.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some(node),
                entries: &entries,
            });
            let group = dev.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(node),
                layout: &bgl,
                entries: &bind,
            });
            let layout = dev.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(node),
                bind_group_layouts: &[Some(&bgl)],
                immediate_size: 0,
            });
            (layout, group)
        };
        let module = dev.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(node),
            source: wgpu::ShaderSource::Wgsl(parts.render.as_str().into()),
        });
        let (layout, bind_group) = layout_and_group(parts.stage, minmax.as_ref().map(|_| false));
        let pipeline = dev.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
            label: Some(node),
            layout: Some(&layout),
            vertex: wgpu::VertexState {
                module: &module,
                entry_point: Some("vs"),
                compilation_options: Default::default(),
                buffers: &[],
            },
            primitive: wgpu::PrimitiveState {
                topology: wgpu::PrimitiveTopology::TriangleList,
                cull_mode: None,
                ..Default::default()
            },
            depth_stencil: None,
            multisample: wgpu::MultisampleState::default(),
            fragment: Some(wgpu::FragmentState {
                module: &module,
                entry_point: Some("fs"),
                compilation_options: Default::default(),
                targets: &[Some(wgpu::ColorTargetState {
                    format,
                    blend: if parts.blend {
                        Some(wgpu::BlendState::ALPHA_BLENDING)
                    } else {
                        None
                    },
                    write_mask: wgpu::ColorWrites::ALL,
                })],
            }),
            multiview_mask: None,
            cache: None,
        });
        let mut wgsl = parts.render.clone();
        let reduce = match (&parts.reduce, minmax.clone()) {
            (Some(src), Some(mm)) => {
                let module = dev.create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(node),
                    source: wgpu::ShaderSource::Wgsl(src.as_str().into()),
                });
                let (layout, group) = layout_and_group(wgpu::ShaderStages::COMPUTE, Some(true));
                let pipeline = dev.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(node),
                    layout: Some(&layout),
                    module: &module,
                    entry_point: Some("reduce"),
                    compilation_options: Default::default(),
                    cache: None,
                });
                let groups = parts
                    .cells
                    .div_ceil(REDUCE_WG as u64)
                    .clamp(1, REDUCE_MAX_GROUPS) as u32;
                wgsl.push_str("\n// ---- reduction ----\n");
                wgsl.push_str(src);
                Some((mm, pipeline, group, groups))
            }
            _ => None,
        };
        ViewPipeline {
            node_id: node.to_string(),
            width: parts.width,
            height: parts.height,
            pipeline,
            bind_group,
            instances: parts.instances,
            reduce,
            wgsl,
        }
    }

    pub fn context(&self) -> &Arc<WgpuContext> {
        &self.ctx
    }

    /// The colour format the pipelines draw into.
    pub fn format(&self) -> wgpu::TextureFormat {
        self.format
    }

    /// Number of views (indexed like `program.views`).
    pub fn len(&self) -> usize {
        self.views.len()
    }

    pub fn is_empty(&self) -> bool {
        self.views.is_empty()
    }

    /// The view's node id and its natural size in pixels (one pixel per cell for images).
    pub fn view_info(&self, view_index: usize) -> Option<(&str, u32, u32)> {
        self.views
            .get(view_index)
            .map(|v| (v.node_id.as_str(), v.width, v.height))
    }

    /// The generated WGSL of a view (for debugging).
    pub fn wgsl(&self, view_index: usize) -> Option<&str> {
        self.views.get(view_index).map(|v| v.wgsl.as_str())
    }

    /// True when this renderer reads `engine`'s buffers (it was made for it).
    pub fn is_for(&self, engine: &WgpuEngine) -> bool {
        Arc::ptr_eq(&self.ctx, &engine.ctx)
            && self
                .roots
                .iter()
                .all(|(r, b)| engine.root_buffer(*r) == Some(b))
    }

    /// Records the drawing of view `view_index` into `encoder`, into `target`
    /// (a view of a texture of this renderer's format). `rect` = (x, y,
    /// width, height) in target pixels where the view goes (scaled to fit;
    /// `None`: the whole target). The target is loaded, not cleared; the
    /// view covers its whole rectangle. Auto-range images also record a
    /// compute pass (before the render pass) finding the frame's min/max.
    /// wgpu validation errors surface when the encoder is finished/submitted.
    pub fn render(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        view_index: usize,
        target: &wgpu::TextureView,
        rect: Option<[f32; 4]>,
    ) -> Result<(), RuntimeError> {
        let v = self.views.get(view_index).ok_or_else(|| {
            RuntimeError::Device(format!(
                "no view number {} (the program has {})",
                view_index,
                self.views.len()
            ))
        })?;
        let tex = target.texture();
        if tex.format().remove_srgb_suffix() != self.format.remove_srgb_suffix() {
            return Err(dev_err(
                &v.node_id,
                format!(
                    "the target is {:?} but the renderer draws {:?}",
                    tex.format(),
                    self.format
                ),
            ));
        }
        if let Some([x, y, w, h]) = rect {
            let ok = [x, y, w, h].iter().all(|c| c.is_finite())
                && x >= 0.0
                && y >= 0.0
                && w > 0.0
                && h > 0.0
                && x + w <= tex.width() as f32
                && y + h <= tex.height() as f32;
            if !ok {
                return Err(dev_err(
                    &v.node_id,
                    format!(
                        "rectangle {:?} is not inside the {}x{} target",
                        rect,
                        tex.width(),
                        tex.height()
                    ),
                ));
            }
        }
        if let Some((mm, pipeline, group, groups)) = &v.reduce {
            encoder.clear_buffer(mm, 0, None);
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(&v.node_id),
                timestamp_writes: None,
            });
            pass.set_pipeline(pipeline);
            pass.set_bind_group(0, group, &[]);
            pass.dispatch_workgroups(*groups, 1, 1);
        }
        let mut pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
            label: Some(&v.node_id),
            color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                view: target,
                depth_slice: None,
                resolve_target: None,
                ops: wgpu::Operations {
                    load: wgpu::LoadOp::Load,
                    store: wgpu::StoreOp::Store,
                },
            })],
            depth_stencil_attachment: None,
            timestamp_writes: None,
            occlusion_query_set: None,
            multiview_mask: None,
        });
        if let Some([x, y, w, h]) = rect {
            pass.set_viewport(x, y, w, h, 0.0, 1.0);
        }
        pass.set_pipeline(&v.pipeline);
        pass.set_bind_group(0, &v.bind_group, &[]);
        pass.draw(0..6, 0..v.instances);
        Ok(())
    }

    /// Draws view `view_index` at its natural size into an offscreen texture
    /// and reads it back (one submit, waiting for the GPU).
    pub fn render_to_image(&self, view_index: usize) -> Result<Image, RuntimeError> {
        let v = self.views.get(view_index).ok_or_else(|| {
            RuntimeError::Device(format!(
                "no view number {} (the program has {})",
                view_index,
                self.views.len()
            ))
        })?;
        self.render_to_image_sized(view_index, v.width, v.height)
    }

    /// Like `render_to_image`, stretched to `width` x `height` pixels
    /// (images scale by nearest cell; particle discs scale with the view).
    pub fn render_to_image_sized(
        &self,
        view_index: usize,
        w: u32,
        h: u32,
    ) -> Result<Image, RuntimeError> {
        let v = self.views.get(view_index).ok_or_else(|| {
            RuntimeError::Device(format!(
                "no view number {} (the program has {})",
                view_index,
                self.views.len()
            ))
        })?;
        if w == 0 || h == 0 {
            return Err(dev_err(
                &v.node_id,
                format!("cannot draw into {}x{} pixels", w, h),
            ));
        }
        let swap = match self.format {
            wgpu::TextureFormat::Rgba8Unorm => false,
            wgpu::TextureFormat::Bgra8Unorm => true,
            f => {
                return Err(dev_err(
                    &v.node_id,
                    format!(
                        "render_to_image needs an Rgba8Unorm or Bgra8Unorm renderer, not {:?}",
                        f
                    ),
                ))
            }
        };
        let max = self.ctx.limits.max_texture_dimension_2d;
        if w > max || h > max {
            return Err(dev_err(
                &v.node_id,
                format!(
                    "{}x{} pixels exceed the {} pixel texture limit of {}",
                    w, h, max, self.ctx.info.name
                ),
            ));
        }
        let dev = &self.ctx.device;
        let padded = (w * 4).div_ceil(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT)
            * wgpu::COPY_BYTES_PER_ROW_ALIGNMENT;
        let oom = dev.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let scope = dev.push_error_scope(wgpu::ErrorFilter::Validation);
        let texture = dev.create_texture(&wgpu::TextureDescriptor {
            label: Some(&v.node_id),
            size: wgpu::Extent3d {
                width: w,
                height: h,
                depth_or_array_layers: 1,
            },
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format: self.format,
            usage: wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
            view_formats: &[],
        });
        let view = texture.create_view(&wgpu::TextureViewDescriptor::default());
        let staging = dev.create_buffer(&wgpu::BufferDescriptor {
            label: Some("view readback"),
            size: padded as u64 * h as u64,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = dev.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some(&v.node_id),
        });
        let recorded = self.render(&mut enc, view_index, &view, None);
        enc.copy_texture_to_buffer(
            wgpu::TexelCopyTextureInfo {
                texture: &texture,
                mip_level: 0,
                origin: wgpu::Origin3d::ZERO,
                aspect: wgpu::TextureAspect::All,
            },
            wgpu::TexelCopyBufferInfo {
                buffer: &staging,
                layout: wgpu::TexelCopyBufferLayout {
                    offset: 0,
                    bytes_per_row: Some(padded),
                    rows_per_image: Some(h),
                },
            },
            wgpu::Extent3d {
                width: w,
                height: h,
                depth_or_array_layers: 1,
            },
        );
        let cmd = enc.finish();
        if recorded.is_ok() {
            self.ctx.queue.submit([cmd]);
        }
        let validation = pollster::block_on(scope.pop());
        let memory = pollster::block_on(oom.pop());
        recorded?;
        if let Some(e) = validation.or(memory) {
            return Err(dev_err(
                &v.node_id,
                format!("GPU error while drawing: {}", e),
            ));
        }
        let bytes = self
            .map_read(&staging)
            .map_err(|e| dev_err(&v.node_id, e))?;
        let mut rgba = Vec::with_capacity((w * h * 4) as usize);
        for row in bytes.chunks_exact(padded as usize).take(h as usize) {
            rgba.extend_from_slice(&row[..(w * 4) as usize]);
        }
        if swap {
            for px in rgba.chunks_exact_mut(4) {
                px.swap(0, 2);
            }
        }
        Ok(Image {
            width: w,
            height: h,
            rgba,
        })
    }

    fn map_read(&self, staging: &wgpu::Buffer) -> Result<Vec<u8>, String> {
        let slice = staging.slice(..);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.ctx
            .device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| format!("waiting for the GPU failed: {}", e))?;
        match rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(format!("reading the image back failed: {}", e)),
            Err(_) => return Err("reading the image back failed: no answer".into()),
        }
        let data = slice
            .get_mapped_range()
            .map_err(|e| format!("reading the image back failed: {}", e))?
            .to_vec();
        staging.unmap();
        Ok(data)
    }
}
