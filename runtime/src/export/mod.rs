//! Export to the formats artists' tools read: PLY point clouds, OpenVDB
//! volumes and USD stages (`weft run --export FIELDS=FORMAT[:PATH]`).
//!
//! - `ply`: FIELDS = `pos[,attr…]`: a `vec3` (or `vec2`, z = 0) f32
//!   position field, then attributes on the same layout (f32, i32, u32 and
//!   their vectors; a vector `v` becomes properties `v_0`, `v_1`, …). One
//!   file per frame; only stored elements (a `dynamic` layout's appended
//!   ones, a sparse layout's active ones).
//! - `vdb`: FIELDS = one 3-axis `f32` (a FloatGrid, class fog volume) or
//!   `vec3` (a Vec3SGrid) field. Field index (i, j, k) is voxel (x, y, z);
//!   voxel size 1 / max(shape), voxel centres at ((i + ½)·size, …): the field
//!   spans the unit box along its longest axis, like a 3-D view's default
//!   domain. Active voxels: a sparse layout's stored cells (its active
//!   blocks); a dense field's non-zero cells (zero is the background).
//! - `usd`: a position field (+ primvars) as `UsdGeomPoints`, or a 3-axis
//!   field as a `UsdVolVolume` referencing per-frame `.vdb` files written
//!   next to the `.usda`. One `.usda` per export holding every frame of the
//!   run: a volume's rewritten every frame, a point cloud's (all its
//!   samples inline) written when the run ends.
//!
//! - A view's node id in place of FIELDS exports what the view shows: a
//!   `particles` view its positions (and colour field), a `volume` view
//!   its field, a `surface` view its iso-surface as a triangle mesh
//!   (`mesh`: PLY with faces, or a `UsdGeomMesh`). A surface's triangles
//!   are the view's own (`passes::views::surface`), so the view is drawn
//!   for each exported frame (`Exporter::views_to_draw`).
//!
//! Every file is written whole or not at all (`weft_ir::io::write_atomic`).

pub mod mesh;
pub mod ply;
pub mod usd;
pub mod vdb;

use crate::memory::for_each_stored_element;
use crate::{RuntimeError, Simulation};
use std::path::{Path, PathBuf};
use weft_ir::ir::layout::{root_of, AddressPlan};
use weft_ir::ir::{FieldId, Program, View};
use weft_ir::types::{Scalar, Type};

/// Time codes per second written into USD stages.
pub const USD_FPS: f64 = 24.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Ply,
    Vdb,
    Usd,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Ply => "ply",
            Format::Vdb => "vdb",
            Format::Usd => "usd",
        }
    }
}

/// One `FIELDS=FORMAT[:PATH]`.
#[derive(Clone, Debug, PartialEq)]
pub struct ExportSpec {
    pub fields: Vec<String>,
    pub format: Format,
    /// Per-frame files: a run of `#` is the zero-padded frame number (none:
    /// `_####` goes before the extension). USD: the `.usda` file.
    pub path: Option<PathBuf>,
}

impl std::str::FromStr for ExportSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (fields, rest) = s
            .split_once('=')
            .ok_or_else(|| format!("'{}': expected FIELDS=FORMAT[:PATH], e.g. x,v=ply", s))?;
        let (format, path) = match rest.split_once(':') {
            Some((f, p)) => (f, Some(PathBuf::from(p))),
            None => (rest, None),
        };
        let format = match format {
            "ply" => Format::Ply,
            "vdb" => Format::Vdb,
            "usd" | "usda" => Format::Usd,
            f => return Err(format!("'{}': unknown format '{}' (ply, vdb, usd)", s, f)),
        };
        let fields: Vec<String> = fields.split(',').map(|f| f.trim().to_string()).collect();
        if fields.iter().any(|f| f.is_empty()) {
            return Err(format!("'{}': an empty field name", s));
        }
        if path.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
            return Err(format!("'{}': an empty path after ':'", s));
        }
        Ok(ExportSpec {
            fields,
            format,
            path,
        })
    }
}

/// `template` with its (last) run of `#` replaced by `frame`, zero-padded
/// to the run's length; without `#`, `_####` is put before the extension.
pub fn frame_path(template: &Path, frame: i32) -> PathBuf {
    let s = template.to_string_lossy().to_string();
    let name_start = s.rfind('/').map_or(0, |i| i + 1);
    if let Some(end) = s[name_start..].rfind('#').map(|i| i + name_start + 1) {
        let start = s[..end].trim_end_matches('#').len();
        let n = end - start;
        return PathBuf::from(format!("{}{:0n$}{}", &s[..start], frame, &s[end..], n = n));
    }
    let stem = template
        .file_stem()
        .map(|x| x.to_string_lossy().to_string())
        .unwrap_or_default();
    let ext = template
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    template.with_file_name(format!("{}_{:04}{}", stem, frame, ext))
}

/// A spec that cannot be written: a usage error (exit 2) naming the field.
fn bad(field: &str, message: String) -> RuntimeError {
    RuntimeError::Graph(weft_ir::error::GraphError::node_msg(field, message).into())
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), RuntimeError> {
    if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d).map_err(|e| {
            RuntimeError::Io(format!("export: cannot create {}: {}", d.display(), e))
        })?;
    }
    weft_ir::io::write_atomic(path, bytes)
        .map_err(|e| RuntimeError::Io(format!("export: cannot write {}: {}", path.display(), e)))
}

enum What {
    Points {
        pos: FieldId,
        attrs: Vec<FieldId>,
    },
    Volume {
        field: FieldId,
    },
    /// A `surface` view's triangles (`passes::views::surface`).
    Mesh(SurfaceBuffers),
}

struct SurfaceBuffers {
    view: String,
    field: FieldId,
    domain: [f32; 6],
    max: u32,
    tris: FieldId,
    keys: FieldId,
    count: FieldId,
}

/// The fields (or the mesh) a view exports as, when `name` is a view node:
/// `None` when it is not one.
fn view_export(p: &Program, name: &str, spec: &ExportSpec) -> Option<Result<What, RuntimeError>> {
    let view = p.views.iter().find(|v| v.node_id() == name)?;
    let picture = || {
        Err(bad(
            name,
            format!(
                "--export {}={}: view '{}' draws a 2-D picture, which `weft run` writes as {}_####.png; export the field it shows instead",
                spec.fields.join(","),
                spec.format.name(),
                name,
                name
            ),
        ))
    };
    Some(match view {
        View::Particles {
            positions,
            color_field,
            ..
        } => Ok(What::Points {
            pos: *positions,
            attrs: color_field.iter().copied().collect(),
        }),
        View::Volume { field, .. } => Ok(What::Volume { field: *field }),
        View::Surface {
            field,
            max_triangles,
            scene,
            ..
        } => {
            if spec.format == Format::Vdb {
                return Some(Err(bad(
                    name,
                    format!(
                        "--export {}=vdb: a surface view exports as a mesh (ply or usd); the field it shows, '{}', exports as vdb",
                        name, p.fields[*field].name
                    ),
                )));
            }
            if spec.fields.len() > 1 {
                return Some(Err(bad(
                    name,
                    format!(
                        "--export {}: a surface view's mesh takes no attributes",
                        spec.fields.join(",")
                    ),
                )));
            }
            let buffer = |suffix: &str| {
                let n = format!("{}.{}", name, suffix);
                p.fields
                    .iter()
                    .find(|(_, f)| f.name == n)
                    .map(|(h, _)| h)
                    .ok_or_else(|| bad(name, format!("internal error: no field '{}'", n)))
            };
            (|| {
                Ok(What::Mesh(SurfaceBuffers {
                    view: name.to_string(),
                    field: *field,
                    domain: scene.domain,
                    max: *max_triangles,
                    tris: buffer("triangles")?,
                    keys: buffer("triangle_keys")?,
                    count: buffer("triangle_count")?,
                }))
            })()
        }
        View::Image { .. } | View::Plot { .. } | View::Histogram { .. } => picture(),
    })
}

struct Job {
    spec: ExportSpec,
    what: What,
    /// Per-frame file template (PLY, VDB; USD volumes: the VDBs).
    frames: PathBuf,
    /// USD: the stage file and what it has gathered.
    usda: Option<PathBuf>,
    points: Vec<usd::PointsFrame>,
    vdbs: Vec<(i32, String)>,
    meshes: Vec<usd::MeshFrame>,
}

/// Writes every `--export` of a run, frame by frame.
pub struct Exporter {
    jobs: Vec<Job>,
    /// USD points' constant width.
    pub point_width: f32,
    /// Zip-compress VDB values (`vdb`; OpenVDB's default without Blosc).
    pub vdb_zip: bool,
    /// Text put into files' comments (the graph's name).
    pub label: String,
}

fn ply_kind(p: &Program, f: FieldId) -> Result<(ply::Kind, usize), RuntimeError> {
    let field = &p.fields[f];
    let kind = match field.ty.scalar() {
        Some(Scalar::F32) => ply::Kind::Float,
        Some(Scalar::I32) => ply::Kind::Int,
        Some(Scalar::U32) => ply::Kind::Uint,
        _ => None.ok_or_else(|| {
            bad(
                &field.name,
                format!("cannot export a {} field as a point attribute", field.ty),
            )
        })?,
    };
    match field.ty {
        Type::Scalar(_) | Type::Vector(..) => Ok((kind, field.ty.components())),
        _ => Err(bad(
            &field.name,
            format!(
                "cannot export a {} field as a point attribute (f32, i32, u32 and their vectors can be)",
                field.ty
            ),
        )),
    }
}

impl Exporter {
    /// Checks every spec against the program; `out` is where default paths go.
    pub fn new(p: &Program, specs: &[ExportSpec], out: &Path) -> Result<Exporter, RuntimeError> {
        let mut jobs = Vec::new();
        for spec in specs {
            let mut ids = Vec::new();
            let is_field = |n: &str| {
                p.fields
                    .iter()
                    .any(|(h, f)| f.name == n && !p.is_view_field(h))
            };
            // A view node's id: what it shows (its fields, then any named
            // attributes), or its mesh.
            let mut names: &[String] = &spec.fields;
            let mut from_view = None;
            if !is_field(&spec.fields[0]) {
                if let Some(w) = view_export(p, &spec.fields[0], spec) {
                    match w? {
                        What::Points { pos, attrs } => {
                            ids.push(pos);
                            ids.extend(attrs);
                        }
                        What::Volume { field } => ids.push(field),
                        mesh @ What::Mesh(_) => from_view = Some(mesh),
                    }
                    names = &spec.fields[1..];
                }
            }
            if let Some(mesh) = from_view {
                let out_name = &spec.fields[0];
                let (frames, usda) = match (spec.format, &spec.path) {
                    (Format::Usd, Some(u)) => (PathBuf::new(), Some(u.clone())),
                    (Format::Usd, None) => {
                        (PathBuf::new(), Some(out.join(format!("{}.usda", out_name))))
                    }
                    (_, Some(t)) => (t.clone(), None),
                    (_, None) => (out.join(format!("{}_####.ply", out_name)), None),
                };
                jobs.push(Job {
                    spec: spec.clone(),
                    what: mesh,
                    frames,
                    usda,
                    points: Vec::new(),
                    vdbs: Vec::new(),
                    meshes: Vec::new(),
                });
                continue;
            }
            for n in names {
                let id = p
                    .fields
                    .iter()
                    .find(|(h, f)| f.name == *n && !p.is_view_field(*h))
                    .map(|(h, _)| h)
                    .ok_or_else(|| {
                        let names: Vec<&str> = p
                            .fields
                            .iter()
                            .filter(|(h, _)| !p.is_view_field(*h))
                            .map(|(_, f)| f.name.as_str())
                            .collect();
                        RuntimeError::Graph(
                            weft_ir::error::GraphError::Document {
                                message: format!(
                                    "--export {}: no field or view node '{}' (fields: {}; views: {})",
                                    spec.fields.join(","),
                                    n,
                                    names.join(", "),
                                    p.views
                                        .iter()
                                        .map(|v| v.node_id())
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                ),
                            }
                            .into(),
                        )
                    })?;
                ids.push(id);
            }
            let first = &p.fields[ids[0]];
            let volume = match spec.format {
                Format::Vdb => true,
                Format::Ply => false,
                Format::Usd => first.shape.len() == 3,
            };
            let what = if volume {
                if ids.len() > 1 {
                    return Err(bad(
                        &first.name,
                        format!(
                            "--export: a {} volume takes one field, not {}",
                            spec.format.name(),
                            spec.fields.join(",")
                        ),
                    ));
                }
                if first.shape.len() != 3
                    || !matches!(
                        first.ty,
                        Type::Scalar(Scalar::F32) | Type::Vector(Scalar::F32, 3)
                    )
                {
                    return Err(bad(
                        &first.name,
                        format!(
                            "--export {}={}: a volume is a 3-axis f32 or vec3 field; this one is {} over {} axes",
                            first.name,
                            spec.format.name(),
                            first.ty,
                            first.shape.len()
                        ),
                    ));
                }
                What::Volume { field: ids[0] }
            } else {
                if !matches!(first.ty, Type::Vector(Scalar::F32, 2 | 3)) {
                    return Err(bad(
                        &first.name,
                        format!(
                            "--export {}={}: the first field is the points' positions, a vec3 or vec2 field; this one is {}",
                            spec.fields.join(","),
                            spec.format.name(),
                            first.ty
                        ),
                    ));
                }
                for &a in &ids[1..] {
                    let f = &p.fields[a];
                    if f.layout != first.layout {
                        return Err(bad(
                            &f.name,
                            format!(
                                "--export: attribute '{}' is on another layout than the positions '{}' (one value per point is needed)",
                                f.name, first.name
                            ),
                        ));
                    }
                    let (kind, n) = ply_kind(p, a)?;
                    if spec.format == Format::Usd && usd::usd_type(kind, n).is_none() {
                        return Err(bad(
                            &f.name,
                            format!("USD has no array type for a {} primvar", f.ty),
                        ));
                    }
                }
                What::Points {
                    pos: ids[0],
                    attrs: ids[1..].to_vec(),
                }
            };
            let ext = if volume { "vdb" } else { "ply" };
            // Files are named for what the spec names first (a view's id,
            // or the first field).
            let out_name = &spec.fields[0];
            let default = out.join(format!("{}_####.{}", out_name, ext));
            let (frames, usda) = match (spec.format, &spec.path) {
                (Format::Usd, Some(u)) => {
                    let stem = u
                        .file_stem()
                        .map(|s| s.to_string_lossy().to_string())
                        .unwrap_or_default();
                    (
                        u.with_file_name(format!("{}_####.vdb", stem)),
                        Some(u.clone()),
                    )
                }
                (Format::Usd, None) => (
                    out.join(format!("{}_####.vdb", out_name)),
                    Some(out.join(format!("{}.usda", out_name))),
                ),
                (_, Some(t)) => (t.clone(), None),
                (_, None) => (default, None),
            };
            jobs.push(Job {
                spec: spec.clone(),
                what,
                frames,
                usda,
                points: Vec::new(),
                vdbs: Vec::new(),
                meshes: Vec::new(),
            });
        }
        Ok(Exporter {
            jobs,
            point_width: 0.01,
            vdb_zip: true,
            label: String::new(),
        })
    }

    /// The `surface` views whose meshes are exported: their kernels must
    /// have drawn the current frame before `write_frame` (a run that
    /// writes no pictures draws them with `Simulation::draw_view`).
    pub fn views_to_draw(&self) -> Vec<String> {
        self.jobs
            .iter()
            .filter_map(|j| match &j.what {
                What::Mesh(b) => Some(b.view.clone()),
                _ => None,
            })
            .collect()
    }

    /// Writes (PLY, VDB) or gathers (USD) the current frame of `sim`.
    /// Returns the files written.
    pub fn write_frame(&mut self, sim: &Simulation) -> Result<Vec<PathBuf>, RuntimeError> {
        let frame = sim.frame;
        let mut written = Vec::new();
        for job in &mut self.jobs {
            match &job.what {
                What::Points { pos, attrs } => {
                    let (points, attributes) = read_points(sim, *pos, attrs)?;
                    if job.spec.format == Format::Ply {
                        let path = frame_path(&job.frames, frame);
                        let comment = format!("weft {} frame {}", self.label, frame);
                        write(&path, &ply::to_bytes(&points, &attributes, &comment))?;
                        written.push(path);
                    } else {
                        let f = usd::PointsFrame {
                            frame,
                            points,
                            primvars: attributes,
                        };
                        put_frame(&mut job.points, f, |f| f.frame);
                    }
                }
                What::Volume { field } => {
                    let grid = read_volume(sim, *field, self.vdb_zip)?;
                    let path = frame_path(&job.frames, frame);
                    let uuid = format!(
                        "{:08x}-0000-4000-8000-{:012x}",
                        frame as u32,
                        std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |d| d.as_nanos() as u64 & 0xffff_ffff_ffff)
                    );
                    write(&path, &grid.to_bytes(&uuid))?;
                    if job.usda.is_some() {
                        let name = path
                            .file_name()
                            .map(|n| n.to_string_lossy().to_string())
                            .unwrap_or_default();
                        put_frame(&mut job.vdbs, (frame, format!("./{}", name)), |v| v.0);
                        // A volume's stage is small: rewritten every frame,
                        // so a stopped run leaves one matching its VDBs.
                        write_stage(job, &sim.program, self.point_width, &self.label)?;
                    }
                    written.push(path);
                }
                What::Mesh(b) => {
                    let m = read_mesh(sim, b)?;
                    if job.spec.format == Format::Ply {
                        let path = frame_path(&job.frames, frame);
                        let comment = format!("weft {} frame {}", self.label, frame);
                        write(&path, &mesh::ply_bytes(&m, &comment))?;
                        written.push(path);
                    } else {
                        let f = usd::MeshFrame { frame, mesh: m };
                        put_frame(&mut job.meshes, f, |f| f.frame);
                    }
                }
            }
        }
        Ok(written)
    }

    /// Writes the USD stages (every frame gathered). Returns their paths.
    pub fn finish(&mut self, p: &Program) -> Result<Vec<PathBuf>, RuntimeError> {
        let mut written = Vec::new();
        for job in &self.jobs {
            if let Some(usda) = write_stage(job, p, self.point_width, &self.label)? {
                written.push(usda);
            }
        }
        Ok(written)
    }
}

/// Puts a frame's samples in `frames` (kept in frame order): a frame met
/// again (a looping playback, a step back) replaces its samples instead of
/// adding a second set — one USD time sample per frame, and the stage's
/// time range that of the frames it holds.
fn put_frame<T>(frames: &mut Vec<T>, item: T, frame_of: impl Fn(&T) -> i32) {
    let f = frame_of(&item);
    match frames.binary_search_by_key(&f, &frame_of) {
        Ok(i) => frames[i] = item,
        Err(i) => frames.insert(i, item),
    }
}

/// Writes `job`'s `.usda` (if it has one) with the frames gathered so far.
fn write_stage(
    job: &Job,
    p: &Program,
    width: f32,
    label: &str,
) -> Result<Option<PathBuf>, RuntimeError> {
    let Some(usda) = &job.usda else {
        return Ok(None);
    };
    let doc = format!("Weft export of {}", label);
    let text = match &job.what {
        What::Points { pos, .. } => {
            usd::points_stage(&p.fields[*pos].name, width, USD_FPS, &job.points, &doc)
        }
        What::Volume { field } => {
            let f = &p.fields[*field];
            let s = 1.0 / f.shape.iter().copied().max().unwrap_or(1) as f64;
            let hi = [0, 1, 2].map(|a| f.shape[a] as f64 * s);
            usd::volume_stage(&f.name, &f.name, USD_FPS, [[0.0; 3], hi], &job.vdbs, &doc)
        }
        What::Mesh(b) => usd::mesh_stage(&b.view, USD_FPS, &job.meshes, &doc),
    };
    write(usda, text.as_bytes())?;
    Ok(Some(usda.clone()))
}

/// Calls `f(values)` for each stored element of `field`, in the layout's
/// order (the same for every field on one layout).
fn stored(
    sim: &Simulation,
    field: FieldId,
    mut f: impl FnMut(&[u32], &[u32], bool),
) -> Result<(), RuntimeError> {
    let p = &sim.program;
    let words = sim.read_root(root_of(p, p.fields[field].layout))?;
    let plan = AddressPlan::new(p, field);
    let shape = p.fields[field].shape.clone();
    for_each_stored_element(&plan, &shape, &words, |e| {
        f(e.index, e.values, e.block.is_some())
    });
    Ok(())
}

fn read_points(
    sim: &Simulation,
    pos: FieldId,
    attrs: &[FieldId],
) -> Result<(Vec<[f32; 3]>, Vec<ply::Attribute>), RuntimeError> {
    let mut points = Vec::new();
    stored(sim, pos, |_, v, _| {
        let c = |i: usize| v.get(i).map_or(0.0, |&w| f32::from_bits(w));
        points.push([c(0), c(1), c(2)]);
    })?;
    let mut out = Vec::new();
    for &a in attrs {
        let (kind, components) = ply_kind(&sim.program, a)?;
        let mut words = Vec::with_capacity(points.len() * components);
        stored(sim, a, |_, v, _| words.extend_from_slice(v))?;
        out.push(ply::Attribute {
            name: sim.program.fields[a].name.clone(),
            kind,
            components,
            words,
        });
    }
    Ok((points, out))
}

fn read_volume(sim: &Simulation, field: FieldId, zip: bool) -> Result<vdb::Grid, RuntimeError> {
    let f = &sim.program.fields[field];
    let components = f.ty.components();
    let s = 1.0 / f.shape.iter().copied().max().unwrap_or(1) as f64;
    let mut voxels = Vec::new();
    stored(sim, field, |idx, v, sparse| {
        let mut val = [0.0f32; 3];
        for (c, w) in v.iter().take(3).enumerate() {
            val[c] = f32::from_bits(*w);
        }
        // Dense: zero (either sign) is the background and stays inactive.
        if sparse || val.iter().any(|&x| x != 0.0) {
            voxels.push(([idx[0] as i32, idx[1] as i32, idx[2] as i32], val));
        }
    })?;
    Ok(vdb::Grid {
        name: f.name.clone(),
        components,
        voxel_size: s,
        translation: [s / 2.0; 3],
        voxels,
        zip,
    })
}

/// A surface view's mesh as its kernels last drew it: sorted, welded and
/// wound outwards (`mesh`). Dropped triangles (a full buffer) are an
/// error, never a silently holed mesh.
fn read_mesh(sim: &Simulation, b: &SurfaceBuffers) -> Result<mesh::Mesh, RuntimeError> {
    let count = sim.read_field(b.count)?.first().copied().unwrap_or(0);
    if count > b.max {
        return Err(RuntimeError::Run {
            node: b.view.clone(),
            message: format!(
                "the surface has {} triangles and the view keeps {} (max_triangles): raise max_triangles to export the whole mesh",
                count, b.max
            ),
        });
    }
    let tris = sim.read_field(b.tris)?;
    let keys = sim.read_field(b.keys)?;
    let mut m = mesh::from_triangles(&tris, &keys, count as usize);
    // The field on its sample grid (`passes::views::surface`: sample i at
    // dmin + (i + 1/2) h), trilinear between samples; unstored cells 0.
    let f = &sim.program.fields[b.field];
    let n = [f.shape[0], f.shape[1], f.shape[2]].map(|x| x.max(1) as usize);
    let mut grid = vec![0.0f32; n[0] * n[1] * n[2]];
    stored(sim, b.field, |idx, v, _| {
        let i = (idx[0] as usize * n[1] + idx[1] as usize) * n[2] + idx[2] as usize;
        if let (Some(g), Some(w)) = (grid.get_mut(i), v.first()) {
            *g = f32::from_bits(*w);
        }
    })?;
    let d = b.domain;
    let h = [0, 1, 2].map(|a| (d[a + 3] - d[a]) / n[a] as f32);
    let value = |p: [f32; 3]| {
        let mut base = [0usize; 3];
        let mut t = [0.0f32; 3];
        for a in 0..3 {
            let u = ((p[a] - d[a]) / h[a] - 0.5).clamp(0.0, (n[a] - 1) as f32);
            base[a] = (u.floor() as usize).min(n[a].saturating_sub(2));
            t[a] = u - base[a] as f32;
        }
        let mut acc = 0.0;
        for c in 0..8usize {
            let o = [c & 1, c >> 1 & 1, c >> 2 & 1];
            let idx = [0, 1, 2].map(|a| (base[a] + o[a]).min(n[a] - 1));
            let w: f32 = (0..3)
                .map(|a| if o[a] == 1 { t[a] } else { 1.0 - t[a] })
                .product();
            acc += w * grid[(idx[0] * n[1] + idx[1]) * n[2] + idx[2]];
        }
        acc
    };
    let eps = h.iter().copied().fold(f32::INFINITY, f32::min).abs() * 0.25;
    mesh::orient(&mut m, value, eps);
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_met_again_replaces_its_samples_and_frames_stay_in_order() {
        let mut v: Vec<(i32, &str)> = Vec::new();
        for (f, s) in [(1, "a"), (2, "b"), (3, "c"), (1, "a2"), (2, "b2"), (0, "z")] {
            put_frame(&mut v, (f, s), |x| x.0);
        }
        assert_eq!(v, vec![(0, "z"), (1, "a2"), (2, "b2"), (3, "c")]);
    }

    #[test]
    fn specs_parse() {
        let s: ExportSpec = "x,v,J=ply:out/p_###.ply".parse().unwrap();
        assert_eq!(s.fields, ["x", "v", "J"]);
        assert_eq!(s.format, Format::Ply);
        assert_eq!(s.path.as_deref(), Some(Path::new("out/p_###.ply")));
        assert!("x=obj"
            .parse::<ExportSpec>()
            .unwrap_err()
            .contains("unknown format 'obj'"));
        assert!("x".parse::<ExportSpec>().is_err());
    }

    #[test]
    fn frame_paths() {
        assert_eq!(
            frame_path(Path::new("o/x_####.ply"), 7),
            Path::new("o/x_0007.ply")
        );
        assert_eq!(
            frame_path(Path::new("o/x_##.ply"), 123),
            Path::new("o/x_123.ply")
        );
        assert_eq!(
            frame_path(Path::new("o/x.ply"), 3),
            Path::new("o/x_0003.ply")
        );
        assert_eq!(
            frame_path(Path::new("o#/x.vdb"), 3),
            Path::new("o#/x_0003.vdb")
        );
    }
}
