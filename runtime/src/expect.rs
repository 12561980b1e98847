//! Recorded expectations (`NAME.expect.json` beside `NAME.json`) and their
//! comparison, used by `weft replay` and the tests.
//!
//! ```json
//! { "format": "weft-expect", "version": 1, "frames": 3,
//!   "tolerance": { "rel": 1e-4, "abs": 1e-6 },
//!   "field_tolerance": { "C": { "rel": 0.25, "abs": 1e-6 } },
//!   "backends": { "cpu": { "fields": { "x": { "type": "vec2<f32>", "sum": 1.5, "min": 0.1,
//!       "max": 0.9, "mean_abs": 0.4, "count": 128, "nonfinite": 0 } } } } }
//! ```
//! Integer fields also record `checksum` (FNV-1a of the words), compared exactly.

use crate::sim::Simulation;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use weft_ir::ir::{Field, LayoutKind, Program};
use weft_ir::types::{Scalar, Type};

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Expectation {
    pub format: String,
    pub version: u32,
    /// Frames to run before comparing.
    pub frames: u32,
    #[serde(default)]
    pub tolerance: Tolerance,
    /// Looser (or tighter) tolerances for named fields, e.g. ones dominated by
    /// the order of floating-point atomics on a GPU.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub field_tolerance: BTreeMap<String, Tolerance>,
    /// Per backend name ("cpu", "wgpu").
    pub backends: BTreeMap<String, BackendExpect>,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Tolerance {
    pub rel: f64,
    pub abs: f64,
}

impl Default for Tolerance {
    fn default() -> Self {
        Tolerance {
            rel: 1e-4,
            abs: 1e-6,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BackendExpect {
    pub fields: BTreeMap<String, FieldStats>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FieldStats {
    #[serde(rename = "type")]
    pub ty: String,
    pub sum: f64,
    pub min: f64,
    pub max: f64,
    pub mean_abs: f64,
    /// Finite values counted.
    pub count: u64,
    pub nonfinite: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<String>,
}

pub fn field_stats(ty: Type, words: &[u32]) -> FieldStats {
    let s = ty.scalar().unwrap_or(Scalar::F32);
    let mut st = FieldStats {
        ty: ty.to_string(),
        sum: 0.0,
        min: f64::INFINITY,
        max: f64::NEG_INFINITY,
        mean_abs: 0.0,
        count: 0,
        nonfinite: 0,
        checksum: None,
    };
    // 64-bit components are two words, low first.
    for c in words.chunks(s.words()) {
        let (w, wide) = (c[0], c.iter().rev().fold(0u64, |a, &x| a << 32 | x as u64));
        let v = match s {
            Scalar::I32 => w as i32 as f64,
            Scalar::U32 | Scalar::Bool => w as f64,
            Scalar::F32 | Scalar::F16 => f32::from_bits(w) as f64,
            Scalar::I64 => wide as i64 as f64,
            Scalar::U64 => wide as f64,
            Scalar::F64 => f64::from_bits(wide),
        };
        if !v.is_finite() {
            st.nonfinite += 1;
            continue;
        }
        st.sum += v;
        st.min = st.min.min(v);
        st.max = st.max.max(v);
        st.mean_abs += v.abs();
    }
    st.count = (words.len() / s.words()) as u64 - st.nonfinite;
    st.mean_abs /= st.count.max(1) as f64;
    if st.min > st.max {
        st.min = 0.0;
        st.max = 0.0;
    }
    if !s.is_float() {
        st.checksum = Some(fnv(words));
    }
    st
}

/// FNV-1a of the words' little-endian bytes, as 16 hex digits.
fn fnv(words: &[u32]) -> String {
    let h = words
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .fold(0xcbf29ce484222325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x100000001b3)
        });
    format!("{:016x}", h)
}

/// The checksum of a field under a `dynamic` node, blind to the order of
/// each list's elements: `append` hands out slots in the order threads
/// arrive, which only a one-threaded run fixes (a GPU, or the cpu backend
/// on several cores, fills each list with the same elements in another
/// order). Each list's elements (whole vectors, their words) are sorted
/// before hashing; the lists stay in cell order. `None` when the field is
/// not under a `dynamic` node.
fn list_checksum(program: &Program, f: &Field, words: &[u32]) -> Option<String> {
    let node = &program.layouts[f.layout];
    if node.kind != LayoutKind::Dynamic || node.shape.len() != f.shape.len() {
        return None;
    }
    let width = f.ty.components().max(1);
    let n = words.len() / width;
    let mut lists: BTreeMap<Vec<u32>, Vec<&[u32]>> = BTreeMap::new();
    for e in 0..n {
        // Row-major coordinates of element e; its list is coords / capacity.
        let mut rest = e as u64;
        let mut key = vec![0u32; f.shape.len()];
        for d in (0..f.shape.len()).rev() {
            let c = (rest % f.shape[d].max(1) as u64) as u32;
            rest /= f.shape[d].max(1) as u64;
            key[d] = c / node.shape[d].max(1);
        }
        lists
            .entry(key)
            .or_default()
            .push(&words[e * width..(e + 1) * width]);
    }
    let mut all = Vec::with_capacity(words.len());
    for (_, mut elems) in lists {
        elems.sort_unstable();
        for el in elems {
            all.extend_from_slice(el);
        }
    }
    Some(fnv(&all))
}

/// Fields with more elements than this under a `hash` root are summarised
/// from the table's active elements; their statistics carry no checksum.
pub use crate::memory::READ_WHOLE_LIMIT;

/// Statistics of every field of a simulation (not the views' image and
/// helper fields: they are system memory, and replay draws no views).
pub fn all_stats(sim: &Simulation) -> Result<BTreeMap<String, FieldStats>, crate::RuntimeError> {
    sim.program
        .fields
        .iter()
        .filter(|(h, _)| !sim.program.is_view_field(*h))
        .map(|(h, f)| {
            let st = match table_stats(sim, h)? {
                Some(st) => st,
                None => {
                    let words = sim.read_field(h)?;
                    let mut st = field_stats(f.ty, &words);
                    if st.checksum.is_some() {
                        if let Some(c) = list_checksum(&sim.program, f, &words) {
                            st.checksum = Some(c);
                        }
                    }
                    st
                }
            };
            Ok((f.name.clone(), st))
        })
        .collect()
}

/// Statistics of a huge field under a `hash` root: its active elements,
/// then every other element at the field's init value.
fn table_stats(
    sim: &Simulation,
    field: weft_ir::ir::FieldId,
) -> Result<Option<FieldStats>, crate::RuntimeError> {
    use weft_ir::ir::layout::root_of;
    let p = &sim.program;
    let f = &p.fields[field];
    let init = match &f.init {
        weft_ir::ir::FieldInit::Constant(c) => c.clone(),
        weft_ir::ir::FieldInit::Data(_) => return Ok(None),
    };
    if f.cells() <= READ_WHOLE_LIMIT {
        return Ok(None);
    }
    let words = sim.read_root(root_of(p, f.layout))?;
    let Some((_, active)) = crate::memory::table_elements(p, field, &words) else {
        return Ok(None);
    };
    let n = (active.len() / f.ty.components()) as u64;
    let mut st = field_stats(f.ty, &active);
    let rest = f.cells() - n;
    let one = field_stats(f.ty, &init);
    if rest > 0 {
        let (had, add) = (st.count, one.count * rest);
        st.sum += one.sum * rest as f64;
        st.nonfinite += one.nonfinite * rest;
        if one.count > 0 {
            st.min = if had == 0 {
                one.min
            } else {
                st.min.min(one.min)
            };
            st.max = if had == 0 {
                one.max
            } else {
                st.max.max(one.max)
            };
        }
        st.mean_abs =
            (st.mean_abs * had as f64 + one.mean_abs * add as f64) / (had + add).max(1) as f64;
        st.count = had + add;
    }
    st.checksum = None;
    Ok(Some(st))
}

/// `|a - b| <= abs + rel * scale`, where `scale` is at least the values' own size.
fn close(a: f64, b: f64, scale: f64, t: &Tolerance) -> bool {
    (a - b).abs() <= t.abs + t.rel * a.abs().max(b.abs()).max(scale)
}

/// Every difference between expected and actual statistics, as readable lines.
pub fn compare(
    expected: &BTreeMap<String, FieldStats>,
    actual: &BTreeMap<String, FieldStats>,
    default: &Tolerance,
    per_field: &BTreeMap<String, Tolerance>,
) -> Vec<String> {
    let mut diffs = Vec::new();
    for (name, e) in expected {
        let tol = per_field.get(name).unwrap_or(default);
        let Some(a) = actual.get(name) else {
            diffs.push(format!(
                "field '{}': expected but the graph has no such field",
                name
            ));
            continue;
        };
        if e.ty != a.ty {
            diffs.push(format!(
                "field '{}': type {} expected, got {}",
                name, e.ty, a.ty
            ));
            continue;
        }
        // A sum's rounding error grows with the sum of magnitudes, not with the
        // (possibly cancelling) sum itself; extremes compare on the field's scale.
        let sum_scale = e.mean_abs * e.count as f64;
        let range_scale = e.min.abs().max(e.max.abs());
        for (what, x, y, scale) in [
            ("sum", e.sum, a.sum, sum_scale),
            ("min", e.min, a.min, range_scale),
            ("max", e.max, a.max, range_scale),
            ("mean_abs", e.mean_abs, a.mean_abs, 0.0),
        ] {
            if !close(x, y, scale, tol) {
                diffs.push(format!(
                    "field '{}': {} expected {} got {} (diff {:.3e})",
                    name,
                    what,
                    x,
                    y,
                    (x - y).abs()
                ));
            }
        }
        if e.count != a.count || e.nonfinite != a.nonfinite {
            diffs.push(format!(
                "field '{}': {} finite and {} non-finite values expected, got {} and {}",
                name, e.count, e.nonfinite, a.count, a.nonfinite
            ));
        }
        if e.checksum.is_some() && e.checksum != a.checksum {
            diffs.push(format!(
                "field '{}': checksum expected {} got {}",
                name,
                e.checksum.as_deref().unwrap_or("-"),
                a.checksum.as_deref().unwrap_or("-")
            ));
        }
    }
    diffs
}
