//! The node catalog: every node kind, its ports, parameters, defaults and
//! docs. The loader, the validator, the schema, the CLI help and the docs read
//! it; nothing else hard-codes node kinds.

use serde_json::{json, Value};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    Layout,
    Field,
    Kernel,
    Execution,
    View,
    /// Geometry read from other tools' files (`mesh`): it adds its own
    /// layouts and fields, wired out by port name.
    Geometry,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Layout => "layout",
            Family::Field => "field",
            Family::Kernel => "kernel",
            Family::Execution => "execution",
            Family::View => "view",
            Family::Geometry => "geometry",
        }
    }
}

/// What flows along a data wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortType {
    /// A place in the layout tree (parent → child, layout → field).
    Layout,
    /// A field, read or written by kernels and drawn by views.
    Field,
}

impl PortType {
    pub fn name(self) -> &'static str {
        match self {
            PortType::Layout => "layout",
            PortType::Field => "field",
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct PortSpec {
    pub name: &'static str,
    pub ty: PortType,
    pub optional: bool,
    pub doc: &'static str,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamType {
    Int,
    /// `true` or `false`.
    Bool,
    Number,
    String,
    /// A list of 1-3 positive integers.
    Shape,
    /// One of a fixed set of strings.
    Enum(&'static [&'static str]),
    /// Three numbers in 0..1.
    Color,
    /// Three numbers (a translation, Euler angles).
    Vec3,
    /// Four numbers (a 2-D rectangle) or six (a 3-D box).
    Rect,
    /// A 3-D view's orbit camera: {"target": [x, y, z], "distance": d,
    /// "yaw": deg, "pitch": deg, "fov": deg}, every key optional.
    Camera,
    /// A lit volume's lights: a list of {"type": "directional" | "point",
    /// "direction" | "position": [x, y, z], "color": [r, g, b],
    /// "intensity": i} (checked, naming the key, where the view is built).
    Lights,
    /// Kernel code (a string).
    Code,
    /// An expression body: {"nodes": [...], "wires": [...]}.
    Expr,
    /// A field's initial value: a number, a list of numbers, or {"npy": "path"}.
    Init,
    /// Kernel scalar parameters: {"name": number | {"type": .., "default": ..}}.
    Scalars,
    /// A non-empty list of field node ids, e.g. ["u0", "c"].
    FieldList,
    /// The id of another node (a string). Inside a group it names a node of
    /// the same group, or one of the group's field input ports; flattening
    /// rewrites it to the flattened path (see `node_id_params`).
    NodeId,
    /// Node ids separated by commas, in one string (`"a, b"`); like `NodeId`.
    NodeIds,
    /// A list of distinct identifiers (a kernel's declared field `ports`).
    PortNames,
}

#[derive(Clone, Copy, Debug)]
pub struct ParamSpec {
    pub name: &'static str,
    pub ty: ParamType,
    /// JSON text of the default; `None` means the parameter is required,
    /// `Some("null")` that it is optional (absent, or computed by the
    /// builder as its doc says).
    pub default: Option<&'static str>,
    pub doc: &'static str,
    /// Inclusive bounds of a numeric parameter: the loader rejects values outside,
    /// the schema states them and the editor's sliders stop there.
    pub range: Option<(f64, f64)>,
}

impl ParamSpec {
    pub fn default_value(&self) -> Option<Value> {
        self.default
            .map(|d| serde_json::from_str(d).expect("catalog defaults are valid JSON"))
    }
}

#[derive(Clone, Debug)]
pub struct NodeKind {
    pub name: &'static str,
    pub family: Family,
    pub doc: &'static str,
    pub inputs: &'static [PortSpec],
    pub outputs: &'static [PortSpec],
    /// Kernels also get one field input per field their code uses.
    pub dynamic_field_inputs: bool,
    pub params: &'static [ParamSpec],
    pub exec_in: bool,
    pub exec_outs: &'static [&'static str],
}

impl NodeKind {
    pub fn param(&self, name: &str) -> Option<&ParamSpec> {
        self.params.iter().find(|p| p.name == name)
    }
    pub fn input(&self, name: &str) -> Option<&PortSpec> {
        self.inputs.iter().find(|p| p.name == name)
    }
    pub fn output(&self, name: &str) -> Option<&PortSpec> {
        self.outputs.iter().find(|p| p.name == name)
    }
}

pub const COLORMAPS: &[&str] = &[
    "viridis",
    "inferno",
    "magma",
    "grayscale",
    "coolwarm",
    "blackbody",
];
pub const FIELD_TYPES: &[&str] = &[
    "f32",
    "i32",
    "u32",
    "vec2",
    "vec3",
    "vec4",
    "ivec2",
    "ivec3",
    "ivec4",
    "uvec2",
    "uvec3",
    "uvec4",
    "mat2",
    "mat3",
    "mat4",
    "f64",
    "i64",
    "u64",
    "vec2<f64>",
    "vec3<f64>",
    "vec4<f64>",
    "vec2<i64>",
    "vec3<i64>",
    "vec4<i64>",
    "vec2<u64>",
    "vec3<u64>",
    "vec4<u64>",
];

const LAYOUT_IN: PortSpec = PortSpec {
    name: "parent",
    ty: PortType::Layout,
    optional: true,
    doc: "The enclosing layout node; unwired means this node is a root with its own buffer.",
};
const CELLS_OUT: PortSpec = PortSpec {
    name: "cells",
    ty: PortType::Layout,
    optional: true,
    doc: "Wire to child layout nodes and to fields placed in each cell.",
};

const PACKED_PARENT: PortSpec = PortSpec {
    name: "parent",
    ty: PortType::Layout,
    optional: false,
    doc: "The dense layout node whose cells each hold one packed 32-bit word.",
};

const SPARSE_SHAPE: ParamSpec = ParamSpec {
    name: "shape",
    ty: ParamType::Shape,
    default: None,
    doc: "Cells per axis, e.g. [64, 64]. Nested nodes multiply per axis and must have the same number of axes.",
    range: None,
};

static KINDS: &[NodeKind] = &[
    NodeKind {
        name: "dense",
        family: Family::Layout,
        doc: "A dense block of cells over 1-3 axes. Fields wired to `cells` share each cell (array of structures); nesting dense nodes gives blocked layouts.",
        inputs: &[LAYOUT_IN],
        outputs: &[CELLS_OUT],
        dynamic_field_inputs: false,
        params: &[ParamSpec {
            name: "shape",
            ty: ParamType::Shape,
            default: None,
            doc: "Cells per axis, e.g. [128, 128]. Nested nodes multiply per axis and must have the same number of axes.",
            range: None,
        }],
        exec_in: false,
        exec_outs: &[],
    },
    NodeKind {
        name: "bitmasked",
        family: Family::Layout,
        doc: "Like `dense`, plus one activity bit per cell: a cell is active once written (or `activate`d) and reads as its fields' `init` values while inactive. Kernels `over` a field below it visit only active cells.",
        inputs: &[LAYOUT_IN],
        outputs: &[CELLS_OUT],
        dynamic_field_inputs: false,
        params: &[SPARSE_SHAPE],
        exec_in: false,
        exec_outs: &[],
    },
    NodeKind {
        name: "pointer",
        family: Family::Layout,
        doc: "Cells whose contents (fields and child blocks) are allocated on first write from a pool of `capacity` blocks and recycled when deactivated: memory is paid only for active cells. Reads of inactive cells give the fields' `init` values.",
        inputs: &[LAYOUT_IN],
        outputs: &[CELLS_OUT],
        dynamic_field_inputs: false,
        params: &[
            SPARSE_SHAPE,
            ParamSpec {
                name: "capacity",
                ty: ParamType::Int,
                default: Some("null"),
                doc: "Cell contents the pool can hold at once, over the whole domain (1 to 1048576). Default: every cell of the domain at this level, capped at 4096. Running out is a run-time error naming this node.",
                range: Some((1.0, 1048576.0)),
            },
        ],
        exec_in: false,
        exec_outs: &[],
    },
    NodeKind {
        name: "bit_struct",
        family: Family::Layout,
        doc: "Packs the components of the quantized fields wired to `cells` into one 32-bit word per cell of its parent (first field in the lowest bits, components adjacent). More than 32 bits in all is an error naming this node and the bit count. Stores to several of its fields in one kernel body become one read-modify-write of the word.",
        inputs: &[PACKED_PARENT],
        outputs: &[CELLS_OUT],
        dynamic_field_inputs: false,
        params: &[],
        exec_in: false,
        exec_outs: &[],
    },
    NodeKind {
        name: "bit_array",
        family: Family::Layout,
        doc: "Packs one narrow quantized scalar field along its `shape` into one 32-bit word per cell of its parent: a dense [n, m] parent with a bit_array of shape [1, 32] holding a uint1 field gives an [n, 32m] field of single bits. `words` is a u32 field of the parent's shape whose elements are the packed words (cell k of the bit_array in bits k*b..), for kernels that update all cells of a word at once with bitwise operations.",
        inputs: &[PACKED_PARENT],
        outputs: &[
            CELLS_OUT,
            PortSpec { name: "words", ty: PortType::Field, optional: true, doc: "The packed words as a u32 field over the parent's cells: wire to kernel ports (or views) to read and write 32 cells at a time." },
        ],
        dynamic_field_inputs: false,
        params: &[ParamSpec {
            name: "shape",
            ty: ParamType::Shape,
            default: None,
            doc: "Cells per axis packed into one word, e.g. [1, 32] (same number of axes as the parent); cells × the field's bits must be at most 32.",
            range: None,
        }],
        exec_in: false,
        exec_outs: &[],
    },
    NodeKind {
        name: "dynamic",
        family: Family::Layout,
        doc: "One axis: each block is a list of up to `shape[0]` elements that grows by `append(x, list, value)` (the kernel language); `length(x, list)` counts them. A field on it has one element per list slot; slots past the length read as `init`, and kernels `over` it visit only appended elements. Appending to a full list is a run-time error naming this node.",
        inputs: &[LAYOUT_IN],
        outputs: &[CELLS_OUT],
        dynamic_field_inputs: false,
        params: &[ParamSpec {
            name: "shape",
            ty: ParamType::Shape,
            default: None,
            doc: "One axis: the most elements one list can hold, e.g. [64]. The number of lists is the number of cells above this node (1 for a root).",
            range: None,
        }],
        exec_in: false,
        exec_outs: &[],
    },
    NodeKind {
        name: "hash",
        family: Family::Layout,
        doc: "A root whose cells are stored in an open-addressing table of `capacity` slots keyed by their coordinate: the domain (up to 2^30 elements per axis) can be far larger than the memory. Cells are created on first write and read as their fields' `init` values while absent; a full table is a run-time error naming this node.",
        inputs: &[LAYOUT_IN],
        outputs: &[CELLS_OUT],
        dynamic_field_inputs: false,
        params: &[
            SPARSE_SHAPE,
            ParamSpec {
                name: "capacity",
                ty: ParamType::Int,
                default: Some("null"),
                doc: "Table slots: cells that can exist at once (1 to 1048576). Default: every cell of the domain, capped at 4096. Deactivated cells keep their slot until a `clear`.",
                range: Some((1.0, 1048576.0)),
            },
        ],
        exec_in: false,
        exec_outs: &[],
    },
    NodeKind {
        name: "field",
        family: Family::Field,
        doc: "A field of values stored in the layout cell it is wired to; its node id is its name.",
        inputs: &[PortSpec { name: "layout", ty: PortType::Layout, optional: false, doc: "The layout node whose cells hold this field." }],
        outputs: &[
            PortSpec { name: "field", ty: PortType::Field, optional: false, doc: "Wire to kernel ports and views." },
            PortSpec { name: "grad", ty: PortType::Field, optional: true, doc: "The gradient field ID.grad; needs grad: true. Views only (image, particles, plot): a kernel reads the gradient of the field wired to its port `p` as `p.grad[...]` in its code." },
        ],
        dynamic_field_inputs: false,
        params: &[
            ParamSpec {
                name: "type",
                ty: ParamType::Enum(FIELD_TYPES),
                default: Some("\"f32\""),
                doc: "Element type: f32, i32, u32, vecN (f32), ivecN, uvecN (N = 2..4), matN (f32, N = 2..4); 64-bit f64, i64, u64 and vecN<f64|i64|u64> (two words per component; wgpu needs the device's SHADER_F64 and SHADER_INT64).",
            range: None,
            },
            ParamSpec {
                name: "init",
                ty: ParamType::Init,
                default: Some("0"),
                doc: "Initial value: a number (every component), a list with one number per component, or {\"npy\": \"file.npy\"} relative to the graph file.",
            range: None,
            },
            ParamSpec {
                name: "storage",
                ty: ParamType::String,
                default: Some("\"word\""),
                doc: "How each component is stored: word (32 bits), intN / uintN (N = 1..32; type i32 / u32 and their vectors; u8, i8, u16, i16 are other names of uint8, int8, uint16, int16), f16 (IEEE half: round to nearest even, inf, NaN; f32 types), fixedN[lo,hi] (N = 1..20; f32 types), floatEmM / ufloatEmM (E = 2..7, M = 1..23; f32 types). Kernels compute in `type`; see docs/graph-format.md, Quantized storage.",
                range: None,
            },
            ParamSpec {
                name: "overflow",
                ty: ParamType::Enum(&["saturate", "wrap"]),
                default: Some("\"saturate\""),
                doc: "What an out-of-range store into intN / uintN storage does: clamp to the range (saturate) or keep the low N bits (wrap).",
                range: None,
            },
            ParamSpec {
                name: "rounding",
                ty: ParamType::Enum(&["nearest", "stochastic"]),
                default: Some("\"nearest\""),
                doc: "How kernel stores into fixedN / floatEmM / ufloatEmM storage round: to the nearest code, or stochastically (up with probability equal to the dropped fraction, drawing 24 bits from the iteration's random() sequence). Host writes (init, --init) always round to nearest.",
                range: None,
            },
            ParamSpec {
                name: "shared_exponent",
                ty: ParamType::Bool,
                default: Some("false"),
                doc: "vecN / matN fields with floatEmM / ufloatEmM storage: all components of an element share one E-bit exponent (that of the largest magnitude) and keep M significand bits each (no hidden bit) plus a sign, in one code of E + N x (M + sign) <= 32 bits. E.g. a vec2 with float6m12 fills one word. Smaller components lose precision first; `rounding: stochastic` draws one random number per element store.",
                range: None,
            },
            ParamSpec {
                name: "grad",
                ty: ParamType::Bool,
                default: Some("false"),
                doc: "Give the field a gradient field `NAME.grad` of the same type and layout (f32 types only): kernels read it as `x.grad[i]`, a `tape` accumulates d loss / d x into it, and `--dump x.grad` writes it.",
                range: None,
            },
        ],
        exec_in: false,
        exec_outs: &[],
    },
    NodeKind {
        name: "mesh",
        family: Family::Geometry,
        doc: "A triangle mesh read from a file (OBJ, PLY, STL, glTF/GLB): its points, triangles and normals as fields, and the mesh itself for the kernel language's queries (mesh_closest, mesh_ray) through a bounding volume hierarchy.",
        inputs: &[],
        outputs: &[
            PortSpec { name: "mesh", ty: PortType::Field, optional: false, doc: "The mesh for queries: wire to a kernel port `m` and call mesh_closest(m, p, max_dist) or mesh_ray(m, origin, dir, t_max) in its code." },
            PortSpec { name: "points", ty: PortType::Field, optional: true, doc: "Vertex positions after the transform: a vec3 field of one element per vertex (ID.points)." },
            PortSpec { name: "triangles", ty: PortType::Field, optional: true, doc: "Vertex indices: an ivec3 field of one element per triangle (ID.triangles)." },
            PortSpec { name: "normals", ty: PortType::Field, optional: true, doc: "Unit vertex normals (the area-weighted mean of the normals of the triangles around each vertex): a vec3 field per vertex (ID.normals)." },
        ],
        dynamic_field_inputs: false,
        params: &[
            ParamSpec { name: "file", ty: ParamType::String, default: Some("null"), doc: "The mesh file, relative to the graph file (or absolute): .obj, .ply, .stl, .gltf or .glb (see docs/graph-format.md, Mesh files).", range: None },
            ParamSpec { name: "translate", ty: ParamType::Vec3, default: Some("[0.0, 0.0, 0.0]"), doc: "Moves the mesh by this vector (after scale and rotate).", range: None },
            ParamSpec { name: "rotate", ty: ParamType::Vec3, default: Some("[0.0, 0.0, 0.0]"), doc: "Rotation in degrees about x, then y, then z (Blender's XYZ Euler), about the file's origin, after scale.", range: None },
            ParamSpec { name: "scale", ty: ParamType::Number, default: Some("1.0"), doc: "Uniform scale about the file's origin, first.", range: Some((1e-6, 1e6)) },
        ],
        exec_in: false,
        exec_outs: &[],
    },
    NodeKind {
        name: "kernel",
        family: Family::Kernel,
        doc: "A parallel loop whose body is Weft kernel code. Each field the code indexes (`x[i]`) is an input port of the same name.",
        inputs: &[],
        outputs: &[],
        dynamic_field_inputs: true,
        params: &[
            ParamSpec { name: "code", ty: ParamType::Code, default: Some("null"), doc: "Kernel code with an entry `fn kernel(i: i32, ...)`; see docs/kernel-language.md. Give either `code` or `expr`.", range: None },
            ParamSpec { name: "expr", ty: ParamType::Expr, default: Some("null"), doc: "An expression body: {\"nodes\": [...], \"wires\": [...]} of expression nodes instead of code; see docs/graph-format.md.", range: None },
            ParamSpec { name: "range", ty: ParamType::Shape, default: Some("null"), doc: "Loop extent per axis, e.g. [640, 320]. Give either `range` or `over`.", range: None },
            ParamSpec { name: "over", ty: ParamType::String, default: Some("null"), doc: "Loop over every cell of the field wired to this port name.", range: None },
            ParamSpec { name: "scalars", ty: ParamType::Scalars, default: Some("{}"), doc: "Scalar parameters: {\"dt\": 0.0002, \"n\": {\"type\": \"i32\", \"default\": 3}}.", range: None },
            ParamSpec { name: "ports", ty: ParamType::PortNames, default: Some("[]"), doc: "Field ports declared ahead of the code, e.g. [\"x\", \"v\"]: each is an input port even while the code does not use it yet (wire first, write the code after). A declared port the code does not use may stay unwired.", range: None },
            // Custom gradients (issue 11).
            ParamSpec { name: "backward", ty: ParamType::Code, default: Some("null"), doc: "Custom derivative: kernel code with the same entry, ports and scalars, run by a reverse `tape` instead of the generated adjoint. It reads the gradients of what the kernel wrote (`y.grad[i]`) and adds into the gradients of what it read (`x.grad[j] += ...`); it may write only gradients. Forward mode still differentiates `code`.", range: None },
        ],
        exec_in: true,
        exec_outs: &["then"],
    },
    NodeKind {
        name: "on_start",
        family: Family::Execution,
        doc: "Runs the chain wired to `then` once, before the first frame (frame() is 0).",
        inputs: &[],
        outputs: &[],
        dynamic_field_inputs: false,
        params: &[],
        exec_in: false,
        exec_outs: &["then"],
    },
    NodeKind {
        name: "on_frame",
        family: Family::Execution,
        doc: "Runs the chain wired to `then` once per frame (frame() counts from 1).",
        inputs: &[],
        outputs: &[],
        dynamic_field_inputs: false,
        params: &[],
        exec_in: false,
        exec_outs: &["then"],
    },
    NodeKind {
        name: "repeat",
        family: Family::Execution,
        doc: "Runs the chain wired to `body` `count` times (substeps), then continues with `then`.",
        inputs: &[],
        outputs: &[],
        dynamic_field_inputs: false,
        params: &[
            ParamSpec { name: "count", ty: ParamType::Int, default: Some("1"), doc: "How many times the body runs (substeps per frame).", range: Some((1.0, 1_000_000.0)) },
            ParamSpec { name: "index", ty: ParamType::String, default: Some("null"), doc: "Name of an i32 kernel scalar that every kernel of the body with such a scalar receives as the iteration number 0..count-1 (e.g. a time axis `x[(t, i)]`).", range: None },
        ],
        exec_in: true,
        exec_outs: &["body", "then"],
    },
    NodeKind {
        name: "tape",
        family: Family::Execution,
        doc: "Automatic differentiation: zeroes every gradient field, runs the chain wired to `body` forward, then the adjoint of every launch of the body in reverse order, seeded with d loss / d loss = 1. Afterwards `x.grad` holds d loss / d x for every field with `grad: true`, as x was at tape entry. Inside a tape each field element may be read and then not overwritten, and stored once (later writes `+=`): keep state on a time axis, or set `checkpoint`. Continues with `then`.",
        inputs: &[],
        outputs: &[],
        dynamic_field_inputs: false,
        params: &[
            ParamSpec { name: "loss", ty: ParamType::NodeId, default: None, doc: "The id of the loss field (a field with `grad: true`); every element of its gradient is seeded with 1.", range: None },
            ParamSpec { name: "checkpoint", ty: ParamType::Int, default: Some("0"), doc: "Checkpointing: 0 keeps every state (the body's kernels must keep state on a time axis). k > 0: the body's one `repeat` (of a count that k divides, with only kernels in its body) may update its state fields in place; the tape keeps them every k steps and recomputes each segment during the backward pass, so the extra memory is (count/k + 1 + k) copies of the state.", range: Some((0.0, 1_000_000.0)) },
            // Forward mode (issue 11).
            ParamSpec { name: "mode", ty: ParamType::Enum(&["reverse", "forward"]), default: Some("\"reverse\""), doc: "reverse: gradients (see above). forward: runs the body once with every launch replaced by its tangent kernel (a Jacobian-vector product): `x.grad` then holds the tangent of x, i.e. the derivative of x along the direction held in the `.grad` of the `wrt` fields at tape entry; every other `.grad` is zeroed first. Sum `loss.grad` for d loss · direction. No access rule and no checkpointing are needed.", range: None },
            ParamSpec { name: "wrt", ty: ParamType::NodeIds, default: Some("null"), doc: "Forward mode only: the ids of the fields (comma separated, each with `grad: true`) whose `.grad` holds the direction at tape entry and is not zeroed.", range: None },
        ],
        exec_in: true,
        exec_outs: &["body", "then"],
    },
    // ---- optimize (issue 11: fitting parameters from their gradients) ----
    NodeKind {
        name: "optimize",
        family: Family::Execution,
        doc: "Fits parameters: `iterations` times, sets the `loss` field to 0, runs the chain wired to `body` under a tape (forward, then backward: every gradient field zeroed first, d loss / d loss = 1), records the loss (the sum of the loss field) and updates every `wrt` field from its gradient by gradient descent or Adam. Then continues with `then`. The loss of every iteration is kept in the field `NODE.loss` (a ring of `history` slots; `NODE.step` counts the iterations) and plotted in the app's viewport; its outputs `loss` and `step` wire them to a `plot` view.",
        inputs: &[],
        outputs: &[
            PortSpec { name: "loss", ty: PortType::Field, optional: true, doc: "The field `NODE.loss` (f32, `[history]`): the loss of iteration i in slot i mod history. Views only (wire to a `plot`'s `field`)." },
            PortSpec { name: "step", ty: PortType::Field, optional: true, doc: "The field `NODE.step` (i32, `[1]`): iterations completed. Views only (wire to a `plot`'s `count`)." },
        ],
        dynamic_field_inputs: false,
        params: &[
            ParamSpec { name: "loss", ty: ParamType::NodeId, default: None, doc: "The id of the loss field (a field with `grad: true`); the loss is the sum of its components. The node sets it to 0 before each iteration, so the body accumulates into it (`loss[0] += ...`).", range: None },
            ParamSpec { name: "wrt", ty: ParamType::FieldList, default: None, doc: "The ids of the fields to update, e.g. [\"u0\"]: dense fields with `grad: true` and word storage.", range: None },
            ParamSpec { name: "method", ty: ParamType::Enum(&["gd", "adam"]), default: Some("\"adam\""), doc: "gd: x -= lr * g. adam: Adam with bias-corrected moments (beta1, beta2, eps), whose moment fields NODE.m.X and NODE.v.X are allocated like gradient fields.", range: None },
            ParamSpec { name: "lr", ty: ParamType::Number, default: Some("0.01"), doc: "Learning rate (step size), greater than 0.", range: Some((0.0, 1e9)) },
            ParamSpec { name: "iterations", ty: ParamType::Int, default: Some("1"), doc: "Forward + backward + update iterations each time the node runs (per frame when it is in the `on_frame` chain).", range: Some((1.0, 100_000.0)) },
            ParamSpec { name: "beta1", ty: ParamType::Number, default: Some("0.9"), doc: "Adam: decay of the first moment (mean of the gradient), 0 to below 1.", range: Some((0.0, 1.0)) },
            ParamSpec { name: "beta2", ty: ParamType::Number, default: Some("0.999"), doc: "Adam: decay of the second moment (mean of the squared gradient), 0 to below 1.", range: Some((0.0, 1.0)) },
            ParamSpec { name: "eps", ty: ParamType::Number, default: Some("1e-8"), doc: "Adam: added to the square root of the second moment (avoids division by zero), greater than 0.", range: Some((0.0, 1e9)) },
            ParamSpec { name: "history", ty: ParamType::Int, default: Some("1000"), doc: "Slots of the loss history ring `NODE.loss` (iteration n lands in slot n mod history).", range: Some((1.0, 1_048_576.0)) },
            ParamSpec { name: "checkpoint", ty: ParamType::Int, default: Some("0"), doc: "The tape's checkpoint interval, as on a `tape` node: 0 keeps every state; k > 0 recomputes segments of the body's one repeat.", range: Some((0.0, 1_000_000.0)) },
        ],
        exec_in: true,
        exec_outs: &["body", "then"],
    },
    // ---- end optimize ----
    NodeKind {
        name: "clear",
        family: Family::Execution,
        doc: "Deactivates every cell of the sparse layout node wired to `layout` (bitmasked, pointer, dynamic or hash): its fields read as `init` again, pointer blocks go back to their pools, dynamic lists become empty and a hash table drops its cells, before the chain continues with `then`.",
        inputs: &[PortSpec { name: "layout", ty: PortType::Layout, optional: false, doc: "The `cells` output of the sparse layout node to clear." }],
        outputs: &[],
        dynamic_field_inputs: false,
        params: &[],
        exec_in: true,
        exec_outs: &["then"],
    },
    NodeKind {
        name: "image",
        family: Family::View,
        doc: "Draws a 2D field: a scalar through a colormap, or a vec3/vec4 as RGB. Axis 0 is x (left to right), axis 1 is y (bottom to top).",
        inputs: &[PortSpec { name: "field", ty: PortType::Field, optional: false, doc: "A 2D field of f32/i32/u32, vec3 or vec4." }],
        outputs: &[],
        dynamic_field_inputs: false,
        params: &[
            ParamSpec { name: "colormap", ty: ParamType::Enum(COLORMAPS), default: Some("\"viridis\""), doc: "Colormap for scalar fields.", range: None },
            ParamSpec { name: "min", ty: ParamType::Number, default: Some("null"), doc: "Value drawn at the low end; with `max` fixes the range, otherwise the range is the frame's min..max.", range: None },
            ParamSpec { name: "max", ty: ParamType::Number, default: Some("null"), doc: "Value drawn at the high end.", range: None },
            ParamSpec { name: "show_active", ty: ParamType::Bool, default: Some("false"), doc: "For a field under sparse layouts: draw inactive cells as a grey checkerboard and outline the active blocks of the outermost sparse node. No effect on dense fields.", range: None },
        ],
        exec_in: false,
        exec_outs: &[],
    },
    NodeKind {
        name: "particles",
        family: Family::View,
        doc: "Draws a field of vec2 positions as discs, or of vec3 positions as lit round splats through an orbit camera (the nearest particle wins each pixel).",
        inputs: &[
            PortSpec { name: "positions", ty: PortType::Field, optional: false, doc: "A 1D field of vec2 (2-D) or vec3 (3-D) positions." },
            PortSpec { name: "color", ty: PortType::Field, optional: true, doc: "Optional per-particle colour: a vec3 field (RGB in 0..1) or a u32 field (0xRRGGBB)." },
        ],
        outputs: &[],
        dynamic_field_inputs: false,
        params: &[
            ParamSpec { name: "width", ty: ParamType::Int, default: Some("512"), doc: "Image width in pixels.", range: Some((1.0, 8192.0)) },
            ParamSpec { name: "height", ty: ParamType::Int, default: Some("512"), doc: "Image height in pixels.", range: Some((1.0, 8192.0)) },
            ParamSpec { name: "radius", ty: ParamType::Number, default: Some("1.5"), doc: "Disc radius in pixels.", range: Some((0.0, 256.0)) },
            ParamSpec { name: "color", ty: ParamType::Color, default: Some("[0.4, 0.8, 1.0]"), doc: "Disc colour when no colour field is wired.", range: None },
            ParamSpec { name: "background", ty: ParamType::Color, default: Some("[0.07, 0.15, 0.18]"), doc: "Background colour.", range: None },
            ParamSpec { name: "domain", ty: ParamType::Rect, default: Some("[0, 0, 1, 1]"), doc: "2-D: the rectangle [min x, min y, max x, max y] mapped to the image. 3-D (vec3 positions, required): the box [min x, min y, min z, max x, max y, max z] the default camera frames.", range: None },
            ParamSpec { name: "camera", ty: ParamType::Camera, default: Some("null"), doc: "3-D only: the orbit camera {\"target\": [x, y, z], \"distance\": d, \"yaw\": deg, \"pitch\": deg, \"fov\": deg}; every key optional (defaults: the domain's centre, a distance that frames the domain, yaw 30, pitch 20, fov 40). Yaw 0 pitch 0 looks along -z (front), yaw 90 along -x (side), pitch 90 down -y (top).", range: None },
            ParamSpec { name: "orbit_degrees_per_frame", ty: ParamType::Number, default: Some("0"), doc: "3-D only: a turntable. Frame f is drawn with the camera's yaw + f * this (degrees), headless and in the app.", range: Some((-360.0, 360.0)) },
            ParamSpec { name: "show_box", ty: ParamType::Bool, default: Some("false"), doc: "3-D only: draw the edges of the `domain` box as light-grey 1-pixel lines, hidden where the view's picture is nearer.", range: None },
            ParamSpec { name: "show_axes", ty: ParamType::Bool, default: Some("false"), doc: "3-D only: draw an axis gizmo in the bottom-left corner: x red, y green, z blue, as the camera sees them.", range: None },
            ParamSpec { name: "show_ground", ty: ParamType::Bool, default: Some("false"), doc: "3-D only: a ground grid on the floor of `domain` (its min y), three times the domain's width, fading at its edges; the particles cast shadows on it from the key light.", range: None },
        ],
        exec_in: false,
        exec_outs: &[],
    },
    NodeKind {
        name: "surface",
        family: Family::View,
        doc: "Draws the iso-surface of a 3-axis f32 field at `level` through an orbit camera: marching tetrahedra in a kernel fill the triangle buffer `NODE.triangles` (f32 [max_triangles, 9]: x, y, z of each vertex in turn; `NODE.triangle_count` triangles), which is rasterised with a depth test and lit with flat (face-normal) shading. Sample (i, j, k) sits at the centre of cell (i, j, k) of `domain` divided into the field's shape. When the surface has more than `max_triangles` triangles the extra ones are dropped and the view shows a red border.",
        inputs: &[PortSpec { name: "field", ty: PortType::Field, optional: false, doc: "A 3-axis f32 field (dense or sparse), at least 2 samples per axis; or a mesh node's `mesh` output, whose triangles the view then draws (lit and depth-tested the same way)." }],
        outputs: &[],
        dynamic_field_inputs: false,
        params: &[
            ParamSpec { name: "level", ty: ParamType::Number, default: Some("0.0"), doc: "The iso-value: the surface separates samples above it (v > level) from the rest.", range: None },
            ParamSpec { name: "max_triangles", ty: ParamType::Int, default: Some("262144"), doc: "Capacity of the triangle buffer (1 to 16777216; 36 bytes each). More triangles than this: the rest are dropped and a red border shows it.", range: Some((1.0, 16777216.0)) },
            ParamSpec { name: "width", ty: ParamType::Int, default: Some("512"), doc: "Image width in pixels.", range: Some((1.0, 8192.0)) },
            ParamSpec { name: "height", ty: ParamType::Int, default: Some("512"), doc: "Image height in pixels.", range: Some((1.0, 8192.0)) },
            ParamSpec { name: "color", ty: ParamType::Color, default: Some("[0.85, 0.6, 0.35]"), doc: "Surface colour (lit: 0.25 ambient + 0.75 diffuse from a light above the domain).", range: None },
            ParamSpec { name: "background", ty: ParamType::Color, default: Some("[0.07, 0.15, 0.18]"), doc: "Background colour.", range: None },
            ParamSpec { name: "domain", ty: ParamType::Rect, default: Some("[0, 0, 0, 1, 1, 1]"), doc: "The world box [min x, min y, min z, max x, max y, max z] the field fills (its cells divide it evenly) and the default camera frames.", range: None },
            ParamSpec { name: "camera", ty: ParamType::Camera, default: Some("null"), doc: "The orbit camera {\"target\": [x, y, z], \"distance\": d, \"yaw\": deg, \"pitch\": deg, \"fov\": deg}; every key optional, as for 3-D particles.", range: None },
            ParamSpec { name: "orbit_degrees_per_frame", ty: ParamType::Number, default: Some("0"), doc: "A turntable, as on a 3-D particles view: frame f is drawn with the camera's yaw + f * this (degrees), headless and in the app.", range: Some((-360.0, 360.0)) },
            ParamSpec { name: "show_box", ty: ParamType::Bool, default: Some("false"), doc: "Draw the edges of the `domain` box as light-grey 1-pixel lines, hidden where the view's picture is nearer.", range: None },
            ParamSpec { name: "show_axes", ty: ParamType::Bool, default: Some("false"), doc: "Draw an axis gizmo in the bottom-left corner: x red, y green, z blue, as the camera sees them.", range: None },
            ParamSpec { name: "show_ground", ty: ParamType::Bool, default: Some("false"), doc: "A ground grid on the floor of `domain` (its min y), three times the domain's width, fading at its edges; the surface casts a shadow on it from the key light.", range: None },
        ],
        exec_in: false,
        exec_outs: &[],
    },
    NodeKind {
        name: "plot",
        family: Family::View,
        doc: "Draws a 1D f32 field as a line chart: point k of m at x = k * (width - 1) / (m - 1), the value mapped to y (bottom = min, top = max). Non-finite values (and, with `log`, values <= 0) leave gaps. A loss history: wire an optimize node's `loss` to `field` and its `step` to `count`.",
        inputs: &[
            PortSpec { name: "field", ty: PortType::Field, optional: false, doc: "A 1D f32 field: the values, in order (or a ring, see `count`)." },
            PortSpec { name: "count", ty: PortType::Field, optional: true, doc: "Optional i32 field of one element: how many values were written into `field` used as a ring (value i in slot i mod n, as an optimize node's `loss` and `step`). The plot shows the last min(count, n) values, oldest first. Unwired: all n elements." },
        ],
        outputs: &[],
        dynamic_field_inputs: false,
        params: &[
            ParamSpec { name: "width", ty: ParamType::Int, default: Some("512"), doc: "Image width in pixels.", range: Some((1.0, 8192.0)) },
            ParamSpec { name: "height", ty: ParamType::Int, default: Some("256"), doc: "Image height in pixels.", range: Some((1.0, 8192.0)) },
            ParamSpec { name: "min", ty: ParamType::Number, default: Some("null"), doc: "Value at the bottom edge; with `max` fixes the range (values outside are drawn at the edge), otherwise the range is the min..max of the plotted finite values.", range: None },
            ParamSpec { name: "max", ty: ParamType::Number, default: Some("null"), doc: "Value at the top edge.", range: None },
            ParamSpec { name: "log", ty: ParamType::Bool, default: Some("false"), doc: "Logarithmic value axis (log10); values <= 0 leave gaps, and a fixed `min` must be > 0.", range: None },
            ParamSpec { name: "thickness", ty: ParamType::Int, default: Some("2"), doc: "Line thickness in pixels (each column's lit rows grow by thickness - 1: (thickness - 1) / 2 above, thickness / 2 below).", range: Some((1.0, 16.0)) },
            ParamSpec { name: "color", ty: ParamType::Color, default: Some("[1.0, 0.75, 0.25]"), doc: "Line colour.", range: None },
            ParamSpec { name: "background", ty: ParamType::Color, default: Some("[0.07, 0.15, 0.18]"), doc: "Background colour.", range: None },
        ],
        exec_in: false,
        exec_outs: &[],
    },
    NodeKind {
        name: "histogram",
        family: Family::View,
        doc: "Draws the distribution of a field's values as bars: `bins` equal bins from min to max, bar heights scaled to the largest bin. Takes any field: any number of axes (1 to 3), f32/i32/u32 values, and vectors or matrices by their magnitude (length; Frobenius norm for matrices). Under a sparse layout only active cells count; quantized fields count their decoded values. NaN and infinite values are not binned: they are counted in the field `NODE.nonfinite`; the counts are in `NODE.bins` (u32, one per bin).",
        inputs: &[PortSpec { name: "field", ty: PortType::Field, optional: false, doc: "Any field: scalars (f32/i32/u32), vectors or matrices (binned by magnitude)." }],
        outputs: &[],
        dynamic_field_inputs: false,
        params: &[
            ParamSpec { name: "bins", ty: ParamType::Int, default: Some("64"), doc: "Number of bins, 1 to 1024.", range: Some((1.0, 1024.0)) },
            ParamSpec { name: "min", ty: ParamType::Number, default: Some("null"), doc: "Low end of the first bin; with `max` fixes the range (values outside it are not binned: counted in `NODE.outside`, below then above), otherwise the range is the min..max of the finite values.", range: None },
            ParamSpec { name: "max", ty: ParamType::Number, default: Some("null"), doc: "High end of the last bin (a value equal to `max` is in the last bin).", range: None },
            ParamSpec { name: "width", ty: ParamType::Int, default: Some("512"), doc: "Image width in pixels.", range: Some((1.0, 8192.0)) },
            ParamSpec { name: "height", ty: ParamType::Int, default: Some("256"), doc: "Image height in pixels.", range: Some((1.0, 8192.0)) },
            ParamSpec { name: "log", ty: ParamType::Bool, default: Some("false"), doc: "Bar height by log(1 + count) instead of count: small bins stay visible next to a large one.", range: None },
            ParamSpec { name: "color", ty: ParamType::Color, default: Some("[1.0, 0.75, 0.25]"), doc: "Bar colour.", range: None },
            ParamSpec { name: "background", ty: ParamType::Color, default: Some("[0.07, 0.15, 0.18]"), doc: "Background colour.", range: None },
        ],
        exec_in: false,
        exec_outs: &[],
    },
    NodeKind {
        name: "volume",
        family: Family::View,
        doc: "Draws a 3-axis scalar field in 3-D through an orbit camera: lit smoke (lights with self-shadowing, ambient light, fire from an `emission` field), an emission–absorption ray-march (colormap + opacity), a maximum-intensity projection, or one axis-aligned slice. Axis 0 is x, 1 is y, 2 is z; the cells fill the `domain` box. Sparse fields: inactive blocks are skipped; `show_active` draws the active blocks as wire boxes. `under` draws the volume over another 3-D view (particles inside smoke).",
        inputs: &[
            PortSpec { name: "field", ty: PortType::Field, optional: false, doc: "A 3-axis f32/i32/u32 field (dense or sparse, quantized or not)." },
            PortSpec { name: "emission", ty: PortType::Field, optional: true, doc: "A field of the same shape whose values glow (temperature: fire) through `emission_colormap`; drawn in lit mode, unused in the others." },
        ],
        outputs: &[],
        dynamic_field_inputs: false,
        params: &[
            ParamSpec { name: "mode", ty: ParamType::Enum(&["emission", "lit", "mip", "slice"]), default: Some("\"emission\""), doc: "emission: glowing, absorbing smoke (colour by the colormap, opacity by `density`); lit: smoke lit by `lights` that shadows itself, with `ambient` light and optional fire from the `emission` port (the colormap is unused); mip: the largest value along each ray through the colormap; slice: one plane (`slice_axis`, `slice_position`), outlined.", range: None },
            ParamSpec { name: "colormap", ty: ParamType::Enum(COLORMAPS), default: Some("\"inferno\""), doc: "Colormap of the values (lo to hi of `range`).", range: None },
            ParamSpec { name: "min", ty: ParamType::Number, default: Some("null"), doc: "The value at the colormap's low end (fully transparent in emission mode); with `max` fixes the range, otherwise the range is the frame's min..max (active cells only under sparse layouts).", range: None },
            ParamSpec { name: "max", ty: ParamType::Number, default: Some("null"), doc: "The value at the colormap's high end (opacity `density` per cell in emission mode).", range: None },
            ParamSpec { name: "density", ty: ParamType::Number, default: Some("4"), doc: "emission and lit: opacity per cell at the top of the range (a sample's opacity is 1 - exp(-density * t * step), t the value's 0..1 position in the range).", range: Some((0.0, 1e6)) },
            ParamSpec { name: "step", ty: ParamType::Number, default: Some("0.5"), doc: "emission, lit and mip: sample spacing along the ray in cells (the smallest cell side); at most 4096 samples per ray.", range: Some((0.01, 64.0)) },
            ParamSpec { name: "lights", ty: ParamType::Lights, default: Some("null"), doc: "lit: up to 4 lights, each {\"type\": \"directional\", \"direction\": [x, y, z] (towards the light), \"color\": [r, g, b], \"intensity\": i} or {\"type\": \"point\", \"position\": [x, y, z], ...} (falls off as 1 / distance²); color defaults to white, intensity to 1. Absent: one warm key light from the upper left, [{\"type\": \"directional\", \"direction\": [-0.5, 0.8, 0.35], \"color\": [1, 0.95, 0.85], \"intensity\": 1.4}]; [] for none.", range: None },
            ParamSpec { name: "albedo", ty: ParamType::Color, default: Some("[0.9, 0.9, 0.9]"), doc: "lit: the smoke's colour (the share of light it scatters, per channel).", range: None },
            ParamSpec { name: "ambient", ty: ParamType::Color, default: Some("[0.1, 0.11, 0.13]"), doc: "lit: light from every direction, not shadowed (the sky's fill).", range: None },
            ParamSpec { name: "shadow_density", ty: ParamType::Number, default: Some("1"), doc: "lit: scales the smoke's extinction along rays towards the lights (0: no self-shadowing, below 1 softer shadows, above 1 darker).", range: Some((0.0, 100.0)) },
            ParamSpec { name: "shadow_cells", ty: ParamType::Int, default: Some("2"), doc: "lit: side of a cell of the light's transmittance grid, in field cells (1: sharpest and slowest; each light's grid is recomputed every frame).", range: Some((1.0, 8.0)) },
            ParamSpec { name: "emission_colormap", ty: ParamType::Enum(COLORMAPS), default: Some("\"blackbody\""), doc: "lit: the colour of the `emission` field's values (low to high of its range); light given off is intensity x t x colour at t in 0..1.", range: None },
            ParamSpec { name: "emission_min", ty: ParamType::Number, default: Some("null"), doc: "lit: the `emission` value that gives no light; with `emission_max` fixes its range, otherwise the frame's min..max.", range: None },
            ParamSpec { name: "emission_max", ty: ParamType::Number, default: Some("null"), doc: "lit: the `emission` value that glows brightest.", range: None },
            ParamSpec { name: "emission_intensity", ty: ParamType::Number, default: Some("1"), doc: "lit: brightness of the emission (per cell of path through it).", range: Some((0.0, 1e4)) },
            ParamSpec { name: "jitter", ty: ParamType::Enum(&["auto", "on", "off"]), default: Some("\"auto\""), doc: "emission, lit and mip: \"on\" starts each pixel's samples at a hashed offset (fixed per pixel), which turns the banding of a regular step into fine noise; \"auto\": on in lit mode, off otherwise.", range: None },
            ParamSpec { name: "slice_axis", ty: ParamType::Enum(&["x", "y", "z"]), default: Some("\"z\""), doc: "slice: the axis the plane is perpendicular to.", range: None },
            ParamSpec { name: "slice_position", ty: ParamType::Number, default: Some("0.5"), doc: "slice: the plane's position along its axis, 0 (the domain's low side) to 1 (high side).", range: Some((0.0, 1.0)) },
            ParamSpec { name: "show_active", ty: ParamType::Bool, default: Some("false"), doc: "Sparse fields: draw each active block of the outermost sparse node as a wire box (over the picture). No effect on dense fields.", range: None },
            ParamSpec { name: "width", ty: ParamType::Int, default: Some("512"), doc: "Image width in pixels.", range: Some((1.0, 8192.0)) },
            ParamSpec { name: "height", ty: ParamType::Int, default: Some("512"), doc: "Image height in pixels.", range: Some((1.0, 8192.0)) },
            ParamSpec { name: "background", ty: ParamType::Color, default: Some("[0.07, 0.15, 0.18]"), doc: "Background colour (unused with `under`).", range: None },
            ParamSpec { name: "domain", ty: ParamType::Rect, default: Some("null"), doc: "The box [min x, min y, min z, max x, max y, max z] the field's cells fill; absent: from the origin to shape / max(shape) (the longest axis spans 0..1, cubic cells).", range: None },
            ParamSpec { name: "camera", ty: ParamType::Camera, default: Some("null"), doc: "The orbit camera, as on a 3-D particles view: {\"target\": [x, y, z], \"distance\": d, \"yaw\": deg, \"pitch\": deg, \"fov\": deg}; every key optional (defaults: the domain's centre, a distance that frames the domain, yaw 30, pitch 20, fov 40).", range: None },
            ParamSpec { name: "orbit_degrees_per_frame", ty: ParamType::Number, default: Some("0"), doc: "A turntable, as on a 3-D particles view: frame f is drawn with the camera's yaw + f * this (degrees), headless and in the app.", range: Some((-360.0, 360.0)) },
            ParamSpec { name: "show_box", ty: ParamType::Bool, default: Some("false"), doc: "Draw the edges of the `domain` box as light-grey 1-pixel lines, hidden where the view's picture is nearer.", range: None },
            ParamSpec { name: "show_axes", ty: ParamType::Bool, default: Some("false"), doc: "Draw an axis gizmo in the bottom-left corner: x red, y green, z blue, as the camera sees them.", range: None },
            ParamSpec { name: "show_ground", ty: ParamType::Bool, default: Some("false"), doc: "A ground grid on the floor of `domain` (its min y), three times the domain's width: the smoke is drawn over it and its rays end there (the smoke casts no shadow on it). With `under`, the view under it draws its own ground.", range: None },
            ParamSpec { name: "under", ty: ParamType::NodeId, default: Some("null"), doc: "The id of another 3-D view node (a particles view of vec3 positions, or a surface view) with the same width, height, domain and camera: it is drawn first, its picture is the volume's background and its per-pixel depth ends the rays (particles inside smoke).", range: None },
        ],
        exec_in: false,
        exec_outs: &[],
    },
];

pub fn kinds() -> &'static [NodeKind] {
    KINDS
}

pub fn kind(name: &str) -> Option<&'static NodeKind> {
    KINDS.iter().find(|k| k.name == name)
}

/// The parameters of node kind `name` whose values are node ids (`NodeId`,
/// `NodeIds`, `FieldList`): flattening rewrites them to flattened paths.
pub fn node_id_params(name: &str) -> Vec<&'static ParamSpec> {
    kind(name)
        .map(|k| {
            k.params
                .iter()
                .filter(|p| {
                    matches!(
                        p.ty,
                        ParamType::NodeId | ParamType::NodeIds | ParamType::FieldList
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The JSON Schema fragment describing one parameter type.
pub fn param_schema(p: &ParamSpec) -> Value {
    let mut s = match p.ty {
        ParamType::Int => json!({"type": "integer"}),
        ParamType::Bool => json!({"type": "boolean"}),
        ParamType::Number => json!({"type": ["number", "null"]}),
        ParamType::String | ParamType::NodeId | ParamType::NodeIds => {
            json!({"type": ["string", "null"]})
        }
        ParamType::Code => json!({"type": ["string", "null"]}),
        ParamType::Expr => json!({"type": ["object", "null"], "properties": {
            "nodes": {"type": "array", "items": {"type": "object", "properties": {
                "id": {"type": "string"},
                "kind": {"enum": super::expr::EXPR_KINDS.iter().map(|k| k.name).collect::<Vec<_>>()},
                "params": {"type": "object"},
                "pos": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}
            }, "required": ["id", "kind"], "additionalProperties": false}},
            "wires": {"type": "array", "items": {"type": "object", "properties": {"from": {"type": "string"}, "to": {"type": "string"}}, "required": ["from", "to"], "additionalProperties": false}}
        }, "required": ["nodes"], "additionalProperties": false}),
        ParamType::Shape => {
            json!({"type": ["array", "null"], "items": {"type": "integer", "minimum": 1}, "minItems": 1, "maxItems": 3})
        }
        ParamType::Enum(v) => json!({"enum": v}),
        ParamType::Color => {
            json!({"type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 3})
        }
        ParamType::Vec3 => {
            json!({"type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 3})
        }
        ParamType::Rect => json!({"anyOf": [
            {"type": "array", "items": {"type": "number"}, "minItems": 4, "maxItems": 4},
            {"type": "array", "items": {"type": "number"}, "minItems": 6, "maxItems": 6}
        ]}),
        ParamType::Camera => json!({"type": ["object", "null"], "properties": {
            "target": {"type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 3},
            "distance": {"type": "number", "exclusiveMinimum": 0},
            "yaw": {"type": "number"},
            "pitch": {"type": "number", "minimum": -90, "maximum": 90},
            "fov": {"type": "number", "minimum": 1, "maximum": 170}
        }, "additionalProperties": false}),
        ParamType::Lights => json!({"type": ["array", "null"], "maxItems": 4, "items": {
            "type": "object",
            "properties": {
                "type": {"enum": ["directional", "point"]},
                "direction": {"type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 3},
                "position": {"type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 3},
                "color": {"type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 3},
                "intensity": {"type": "number", "minimum": 0}
            },
            "additionalProperties": false
        }}),
        ParamType::Init => json!({"anyOf": [
            {"type": "number"},
            {"type": "array", "items": {"type": "number"}},
            {"type": "object", "properties": {"npy": {"type": "string"}}, "required": ["npy"], "additionalProperties": false}
        ]}),
        ParamType::FieldList => {
            json!({"type": "array", "items": {"type": "string"}, "minItems": 1})
        }
        ParamType::PortNames => {
            json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true})
        }
        ParamType::Scalars => json!({"type": "object", "additionalProperties": {"anyOf": [
            {"type": "number"},
            {"type": "object", "properties": {"type": {"enum": ["f32", "i32", "u32"]}, "default": {"type": "number"}, "min": {"type": "number"}, "max": {"type": "number"}, "doc": {"type": "string"}}, "required": ["type"], "additionalProperties": false}
        ]}}),
    };
    s["description"] = json!(p.doc);
    if let Some((lo, hi)) = p.range {
        s["minimum"] = json!(lo);
        s["maximum"] = json!(hi);
    }
    // An optional integer (a pool's `capacity`) is absent or a number:
    // null is not a value of it, so the schema states no default.
    if let Some(d) = p
        .default_value()
        .filter(|d| !(d.is_null() && p.ty == ParamType::Int))
    {
        s["default"] = d;
    }
    s
}
