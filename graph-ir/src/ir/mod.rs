//! The Weft IR: one `Program` holding the layout tree, fields, kernels, the
//! schedule and the views.
//!
//! Kernels use structured control flow in the style of Taichi's CHI IR: a
//! function owns an arena of instructions; a `Block` lists instruction handles
//! in execution order; control-flow instructions own nested blocks. Every
//! value-producing instruction is an SSA value usable by later instructions of
//! the same block or of nested blocks. Mutable state lives in `Local`s.
//!
//! Field access is abstract (`FieldLoad` / `FieldStore` / `FieldAtomic` name a
//! field and a logical index) until the access-lowering pass rewrites it to
//! word addresses in a root buffer (`BufLoad` / `BufStore` / `BufAtomic`).

pub mod access;
pub mod animate;
pub mod builtins;
pub mod colormap;
pub mod eval;
pub mod layout;
pub mod parse;
mod printer;
pub mod quant;
pub mod scalar;
pub mod steps;
pub mod target;
mod validate;

pub use builtins::Builtin;
pub use parse::{parse_program, ParseError};
pub use printer::print_program;
pub use validate::{
    validate_kernel, validate_program, validate_structure, IrForm, ValidationError,
};

use crate::arena::{Arena, Handle};
use crate::types::{Scalar, Type};

pub type InstId = Handle<Inst>;
pub type LocalId = Handle<Local>;
pub type FuncId = Handle<Function>;
pub type FieldId = Handle<Field>;
pub type LayoutId = Handle<LayoutNode>;
pub type KernelId = Handle<Kernel>;
pub type Block = Vec<InstId>;

/// A position in a kernel's code (1-based line and column); `line == 0` means
/// the instruction was synthesised by a pass with no better position.
/// `part` says whose code: 0 the kernel's own node, `n` the node
/// `Kernel::fused[n - 1]` of a kernel that `schedule::fusion` made from
/// several launches ([`Kernel::node`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    pub line: u32,
    pub col: u32,
    pub part: u16,
}

impl Span {
    pub fn new(line: u32, col: u32) -> Span {
        Span { line, col, part: 0 }
    }
}

impl std::fmt::Display for Span {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// The graph node of part `part` of a kernel named `name` whose fused
/// nodes are `fused` (backends keep these two of a kernel to name nodes in
/// their errors): 0 is `name`, `n` is `fused[n - 1]`.
pub fn node_of<'a>(name: &'a str, fused: &'a [String], part: u16) -> &'a str {
    match part {
        0 => name,
        n => fused.get(n as usize - 1).map_or(name, String::as_str),
    }
}

#[derive(Clone, Debug, Default)]
pub struct Program {
    /// Kernel scalars whose parameter expressions use `frame`
    /// (`graph::refs`): set before each frame, like a slider.
    pub animated: Vec<animate::AnimatedScalar>,
    pub layouts: Arena<LayoutNode>,
    pub fields: Arena<Field>,
    pub kernels: Arena<Kernel>,
    pub schedule: Schedule,
    pub views: Vec<View>,
    pub seed: u32,
    /// Gradient fields: (field, its gradient field of the same type and
    /// layout), for fields with `grad: true`.
    pub grads: Vec<(FieldId, FieldId)>,
    /// Word views of `bit_array` nodes: (the bit_array node, a u32 field on
    /// its parent whose element is the bit_array's one packed word). The view
    /// owns no storage of its own (`layout::compute` places it on the
    /// bit_array's block), so kernels can update all cells of a word at once.
    pub word_views: Vec<(LayoutId, FieldId)>,
    /// Custom derivatives: (kernel, the kernel compiled from its `backward`
    /// code), used by reverse tapes instead of a generated adjoint. The
    /// second kernel is never launched outside a tape's backward sweep.
    pub custom_backward: Vec<(KernelId, KernelId)>,
    /// Filled by `passes::optimize`: the loss history of every `optimize` node.
    pub optimizers: Vec<OptimizerFields>,
    /// Filled by `passes::views`: per view (same order as `views`), its
    /// image field and the system kernels that draw it. Rendering is this
    /// separate launch list; the schedule never launches these kernels.
    pub view_kernels: Vec<ViewKernels>,
    /// Set by `legalize`: the capabilities it legalized for (every atomic
    /// left is one this target has; a backend whose caps cover it compiles it).
    pub target: target::TargetCaps,
}

/// How one view is drawn (`passes::views`): `launches` in order, once per
/// render, leave the picture in `image`.
#[derive(Clone, Debug)]
pub struct ViewKernels {
    /// The view node.
    pub node_id: String,
    /// u32, shape `[height, pitch]` on a dense root of its own: one RGBA8
    /// word per pixel (red in the low byte), top row first, each row padded
    /// to `pitch` pixels (a multiple of 64, so that a row is a multiple of
    /// 256 bytes and a GPU can copy the buffer into a texture as it is).
    pub image: FieldId,
    pub width: u32,
    pub height: u32,
    pub pitch: u32,
    /// Helper fields the kernels use (the auto range's min/max keys).
    pub scratch: Vec<FieldId>,
    /// 3-D views: u32 `[height, width]`, per pixel the bits of a positive
    /// f32 camera depth (`passes::views::camera`; such bits order like the
    /// depths), `u32::MAX` where the view shows nothing; also in `scratch`.
    /// Another 3-D view drawn over this one (a `volume`'s `under`) reads
    /// it after this view's launches.
    pub depth: Option<FieldId>,
    /// The kernels of one render, in launch order (clear / reduce /
    /// splat / resolve steps; see `passes::views`).
    pub launches: Vec<KernelId>,
}

impl Program {
    /// Whether `f` is an image or helper field of a view (system fields:
    /// not written by `--dump-all`, not listed as the user's fields).
    pub fn is_view_field(&self, f: FieldId) -> bool {
        self.view_kernels
            .iter()
            .any(|v| v.image == f || v.scratch.contains(&f))
    }
}

impl Program {
    /// Layout nodes without a parent: each owns one buffer of 32-bit words.
    pub fn roots(&self) -> impl Iterator<Item = LayoutId> + '_ {
        self.layouts
            .iter()
            .filter(|(_, l)| l.parent.is_none())
            .map(|(h, _)| h)
    }
    pub fn field_by_name(&self, name: &str) -> Option<FieldId> {
        self.fields
            .iter()
            .find(|(_, f)| f.name == name)
            .map(|(h, _)| h)
    }
    /// The gradient field of `f`, if it has one.
    pub fn grad_of(&self, f: FieldId) -> Option<FieldId> {
        self.grads.iter().find(|g| g.0 == f).map(|g| g.1)
    }
    /// The kernel compiled from `k`'s `backward` code, if it has one.
    pub fn custom_backward_of(&self, k: KernelId) -> Option<KernelId> {
        self.custom_backward.iter().find(|b| b.0 == k).map(|b| b.1)
    }
    pub fn kernel_by_name(&self, name: &str) -> Option<KernelId> {
        self.kernels
            .iter()
            .find(|(_, k)| k.name == name)
            .map(|(h, _)| h)
    }
    /// Whether some kernel holds node `name`'s code (its own, or fused
    /// into another by `schedule::fusion`).
    pub fn has_kernel_node(&self, name: &str) -> bool {
        self.kernels.iter().any(|(_, k)| k.has_node(name))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutKind {
    Dense,
    /// Dense storage plus one activity bit per cell (in the block's header).
    Bitmasked,
    /// Each cell holds a 32-bit reference (slot + 1, 0 = inactive) to its
    /// contents, allocated on first write from a pool of `capacity` slots.
    Pointer {
        capacity: u32,
    },
    /// One axis: each block is a list of up to `shape[0]` cells with a
    /// length word in front (the block's header); cell `k` of a block is
    /// active when `k < length`. Grows by `append`.
    Dynamic,
    /// A root whose cells live in an open-addressing table of `capacity`
    /// slots keyed by the cell's coordinate (one key word per axis,
    /// coordinate + 1; 0 = empty slot, `HASH_TOMBSTONE` in word 0 = a
    /// deactivated cell), so the domain can be far larger than the memory.
    Hash {
        capacity: u32,
    },
}

/// Key word 0 of a hash slot whose cell was deactivated: probes go past it
/// and inserts do not reuse it (until `clear`).
pub const HASH_TOMBSTONE: u32 = u32::MAX;

impl LayoutKind {
    pub fn name(self) -> &'static str {
        match self {
            LayoutKind::Dense => "dense",
            LayoutKind::Bitmasked => "bitmasked",
            LayoutKind::Pointer { .. } => "pointer",
            LayoutKind::Dynamic => "dynamic",
            LayoutKind::Hash { .. } => "hash",
        }
    }
    /// Whether cells of this kind can be inactive.
    pub fn is_sparse(self) -> bool {
        !matches!(self, LayoutKind::Dense)
    }
}

/// How a dense node packs its cells (`layout::compute` sizes each way).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Packing {
    /// Cells are whole words (fields inside one cell may share words).
    #[default]
    Cells,
    /// `bit_struct`: one cell of exactly one 32-bit word holding the
    /// components of all its fields (at most 32 bits in all).
    BitStruct,
    /// `bit_array`: cells are as narrow as their one quantized field, all of
    /// them packed into one 32-bit word (at most 32 bits in all).
    BitArray,
}

impl Packing {
    /// The graph node kind that gives this packing.
    pub fn node_kind(self) -> &'static str {
        match self {
            Packing::Cells => "dense",
            Packing::BitStruct => "bit_struct",
            Packing::BitArray => "bit_array",
        }
    }
}

/// Where a pointer node's pool lives in its root buffer (word offsets,
/// filled in by `layout::compute`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolWords {
    pub capacity: u32,
    /// One word, incremented by every allocation: where its bitmap scan starts.
    pub hint: u64,
    /// `ceil(capacity / 32)` words, bit set = slot in use (bits past the
    /// capacity are set from the start so that they are never handed out).
    pub bitmap: u64,
    /// `capacity` words: the owning cell's coordinate at this level + 1
    /// (0 = free), the back-pointer that struct-for and garbage collection follow.
    pub owner: u64,
    /// `capacity` cells of `cell_words` words each.
    pub data: u64,
}

/// Where a sparse node's element list lives in its root buffer (word
/// offsets, filled in by `layout::compute`): the blocks a struct-for over
/// the node visits, compacted by system kernels before each such loop
/// (`passes::sparse_list`), in candidate order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ListWords {
    /// Entries the list can hold: pool or table slots, or (bitmasked and
    /// dynamic nodes under dense ones only) the node's blocks.
    pub len: u32,
    /// One word: the number of entries in the list.
    pub count: u64,
    /// `len` words: one entry each (a slot, or a block's coordinate).
    pub items: u64,
    /// `ceil(len / LIST_CHUNK)` words: per chunk of candidates, its active
    /// count, then (after the scan) where its entries start in `items`.
    pub chunks: u64,
}

/// Candidates one list-generation invocation looks at, in order.
pub const LIST_CHUNK: u32 = 64;

/// One node of the layout tree (Taichi's SNode).
#[derive(Clone, Debug)]
pub struct LayoutNode {
    /// The graph node this came from.
    pub node_id: String,
    pub kind: LayoutKind,
    /// How cells are packed (only ever not `Cells` on dense nodes).
    pub packing: Packing,
    /// Cells per axis at this level; every node of one tree has the same number of axes.
    pub shape: Vec<u32>,
    pub parent: Option<LayoutId>,
    /// Children in storage order within one cell.
    pub children: Vec<LayoutChild>,
    /// Words per cell (filled in by `layout::compute`, which owns all address math).
    pub cell_words: u64,
    /// Bits per cell: `cell_words * 32`, except in a `bit_array`, whose
    /// cells are narrower than a word.
    pub cell_bits: u64,
    /// Word offset of this node's block inside its parent's cell.
    pub offset_in_parent: u64,
    /// Words before the cells in each block (activity bits of `bitmasked`).
    pub header_words: u64,
    /// Words of one block inside the parent's cell (for a root: at word 0):
    /// header and cells, or one reference per cell for `pointer`.
    pub block_words: u64,
    /// Sparse nodes: word offset of a read-only image of one cell in its
    /// initial state (fields at their init values, nothing active). Reads
    /// through a null reference land here, and recycled cells are reset from it.
    pub image: u64,
    /// Pointer nodes: the pool.
    pub pool: Option<PoolWords>,
    /// Sparse nodes a struct-for can iterate by blocks: the element list
    /// that the list-generation system kernel fills (`passes::sparse_list`).
    pub list: Option<ListWords>,
    /// Roots: words of the whole buffer (block, images and pools).
    pub tree_words: u64,
}

impl LayoutNode {
    /// A node with its sizes still to be computed by `layout::compute`.
    pub fn new(node_id: &str, kind: LayoutKind, shape: Vec<u32>, parent: Option<LayoutId>) -> Self {
        LayoutNode {
            node_id: node_id.to_string(),
            kind,
            packing: Packing::Cells,
            shape,
            parent,
            children: vec![],
            cell_words: 0,
            cell_bits: 0,
            offset_in_parent: 0,
            header_words: 0,
            block_words: 0,
            image: 0,
            pool: None,
            list: None,
            tree_words: 0,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutChild {
    Layout(LayoutId),
    Field(FieldId),
}

/// How a field's components are stored; separate from the compute type so
/// that quantized storage can be added without touching kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    /// One 32-bit word per component, holding the compute type's bits.
    Word,
    /// A few bits per component (`ir::quant`); kernels still compute in the
    /// field's type, and access lowering emits the encode/decode as plain IR.
    Quant(quant::Quant),
    /// Quantized floats of a vector / matrix sharing one exponent: the whole
    /// element is one code of at most 32 bits inside one word
    /// (`ir::quant::SharedFloat`).
    Shared(quant::SharedFloat),
}

#[derive(Clone, Debug, PartialEq)]
pub enum FieldInit {
    /// Every component of every cell starts as these words (one per component).
    Constant(Vec<u32>),
    /// Row-major cell data, one word per component, loaded from a file.
    Data(Vec<u32>),
}

#[derive(Clone, Debug)]
pub struct Field {
    /// The graph node id, which is also the name used in dumps.
    pub name: String,
    pub ty: Type,
    pub storage: Storage,
    pub layout: LayoutId,
    /// Logical extent per axis (product of the shapes along the layout path).
    pub shape: Vec<u32>,
    /// **Bit** offset of the field's component 0 inside its layout node's
    /// cell (a multiple of 32 for word storage).
    pub offset_in_cell: u64,
    pub init: FieldInit,
}

impl Field {
    pub fn cells(&self) -> u64 {
        self.shape.iter().map(|&s| s as u64).product()
    }
}

#[derive(Clone, Debug)]
pub enum Iteration {
    /// A dense 1-3-D index range starting at zero.
    Range(Vec<u32>),
    /// Every cell of a field.
    Field(FieldId),
}

#[derive(Clone, Debug)]
pub struct KernelParam {
    pub name: String,
    pub ty: Type,
    /// Current value as one word (bits of the scalar).
    pub value: u32,
    /// Whose scalar it is: 0 the kernel's own node, `n` the node
    /// `Kernel::fused[n - 1]` (see [`Span::part`]).
    pub part: u16,
}

#[derive(Clone, Debug)]
pub struct Kernel {
    /// The graph node id of the kernel node.
    pub name: String,
    pub iteration: Iteration,
    /// Number of loop axes (= arguments of the entry function).
    pub dims: usize,
    pub params: Vec<KernelParam>,
    /// The loop body; its arguments are the loop indices (i32 each).
    pub entry: Function,
    /// Helper functions callable from the entry or from each other.
    pub functions: Arena<Function>,
    /// Fields bound to the kernel's ports, in port order: (port name, field).
    pub bindings: Vec<(String, FieldId)>,
    /// What each `Trap { site }` reports (filled by `passes::legalize`).
    pub fault_sites: Vec<FaultSite>,
    /// `Some`: the launch covers only the first `count` rows of axis 0 of
    /// its range, `count` being a word of device memory written by an
    /// earlier launch (a struct-for over a sparse element list). Backends
    /// may read it on the host when their memory is host memory; GPU
    /// backends dispatch indirectly. The range stays the upper bound and
    /// the kernel's code must ignore rows at or past `count` itself.
    pub count_from: Option<DeviceCount>,
    /// Every loop of the kernel provably ends (`passes::termination`; false
    /// until that pass proves it). GPU backends leave out the driver-side
    /// loop bounding that exists for loops that might not.
    pub loops_end: bool,
    /// `Some`: every launch only writes zero to every word of this range
    /// (`passes::zero_fill`; `None` until that pass proves it). A backend
    /// may run the launch as a buffer fill instead of the kernel.
    pub zero_fill: Option<ZeroFill>,
    /// `Some`: the kernel runs in workgroups (blocks) of `size` consecutive
    /// invocations of its range (row-major linear order) that share
    /// `arrays` and wait for each other at `Barrier`s (`#[block(N)]` in the
    /// code). Targets without workgroups (`TargetCaps::workgroups`) get it
    /// as one invocation per block by `passes::block_loops`.
    pub workgroup: Option<Workgroup>,
    /// The kernel nodes `schedule::fusion` appended to this one, in order
    /// (empty for a kernel of one node, `name`): each invocation runs
    /// `name`'s body, then each of these. Instructions and scalars carry
    /// their node as `part` ([`Kernel::node`]), so errors still name the
    /// node and line they came from.
    pub fused: Vec<String>,
}

/// A kernel's workgroup: its size and the arrays its invocations share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workgroup {
    /// Invocations per block (1..=MAX_WORKGROUP); divides the launch's total.
    pub size: u32,
    /// Block-shared arrays (`SharedId` indexes here), their contents
    /// unspecified until stored (the front end fills them first).
    pub arrays: Vec<SharedArray>,
}

/// The largest block a kernel may ask for: WebGPU's default
/// `maxComputeInvocationsPerWorkgroup`, which every GPU target has.
pub const MAX_WORKGROUP: u32 = 256;
/// The most words of block-shared arrays a kernel may declare: WebGPU's
/// default `maxComputeWorkgroupStorageSize` (16 KiB) in 32-bit words.
pub const MAX_SHARED_WORDS: u32 = 4096;

/// One block-shared array of `len` elements of `ty`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedArray {
    pub name: String,
    pub ty: Type,
    pub len: u32,
}

impl SharedArray {
    /// 32-bit words the array occupies.
    pub fn words(&self) -> u32 {
        self.len * self.ty.components() as u32
    }
}

/// Index of an array in `Workgroup::arrays`.
pub type SharedId = u32;

/// Words `first .. first + words` of a root buffer (`Kernel::zero_fill`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZeroFill {
    pub root: LayoutId,
    pub first: u64,
    pub words: u64,
}

/// A word of a root buffer that bounds a launch (`Kernel::count_from`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceCount {
    pub root: LayoutId,
    /// Word address in the root's buffer.
    pub word: u64,
}

/// A place where a launch can fail at run time, and what it means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultSite {
    pub span: Span,
    pub kind: FaultKind,
    /// The invocation carries on after noting this fault instead of
    /// stopping (`passes::legalize` sets it in kernels with barriers on
    /// targets with workgroups: an invocation that stopped early would
    /// leave the rest of its block waiting at the next barrier, and WGSL
    /// refuses a barrier after a non-uniform `return`). The access that
    /// faulted was made safe (its index replaced by 0), and the launch
    /// still fails with the first fault noted. A backend that stops
    /// anyway (one without workgroups) reports the same fault.
    pub resume: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// A field index outside `0..extent` (the trapped value is the i32 index).
    OutOfBounds {
        field: FieldId,
        axis: u32,
        extent: u32,
    },
    /// An index into a local array outside `0..len` (the trapped value is
    /// the i32 index).
    LocalIndex { len: u32 },
    /// `step_by` with a step that is not positive (the trapped value is the step).
    NonPositiveStep { signed: bool },
    /// The invocation's loops together began their `limit`-th trip on a
    /// target that leaves a loop silently after `limit` trips
    /// (`TargetCaps::loop_trip_limit`; the trapped value is the count).
    LoopTrips { limit: u32 },
    /// A pointer node's pool has no free slot (the trapped value is the
    /// coordinate of the cell being activated, at that node's level).
    PoolExhausted { layout: LayoutId },
    /// `append` to a full list of a dynamic node (the trapped value is the
    /// list's number; the message does not show it, as on the JIT).
    ListFull { layout: LayoutId },
    /// A hash node's table has no slot left for a new cell (the trapped
    /// value is key word 0 of the cell).
    TableFull { layout: LayoutId },
    /// A word address outside its root buffer (the trapped value is the
    /// address). Not a `Trap` of the IR: a backend that reads memory
    /// without the VM's checked slices adds this site to every buffer
    /// access, so a program compiled without bounds checks still faults
    /// instead of touching memory that is not the field's.
    Address,
    /// Helper calls nested deeper than every backend allows (64); not a
    /// `Trap` of the IR either: each backend checks the depth at a call.
    CallDepth,
}

/// How deep helper calls may nest before [`FaultKind::CallDepth`]: the same
/// on every backend, so a recursion faults at the same point everywhere.
pub const MAX_CALL_DEPTH: u32 = 64;

impl FaultSite {
    /// The user-facing message for this fault with the trapped value's bits:
    /// every backend reports faults through this one function.
    pub fn message(&self, program: &Program, value: u32) -> String {
        match self.kind {
            FaultKind::OutOfBounds {
                field,
                axis,
                extent,
            } => format!(
                "index {} is out of bounds for axis {} of field '{}' (extent {})",
                value as i32,
                axis,
                program.fields.get(field).map_or("?", |f| f.name.as_str()),
                extent
            ),
            FaultKind::LocalIndex { len } => format!(
                "index {} is out of range for a local array of {} elements",
                value as i32, len
            ),
            FaultKind::NonPositiveStep { signed } => format!(
                "`step_by` needs a positive step, got {}",
                if signed {
                    value as i32 as i64
                } else {
                    value as i64
                }
            ),
            FaultKind::LoopTrips { limit } => format!(
                "the loops of one invocation reached {} trips, all loops counted together: \
                 this adapter (llvmpipe / lavapipe) would silently stop the loop here and \
                 return a wrong result; run it on another backend (--backend cpu or vm) \
                 or another adapter, or make fewer trips per invocation",
                limit
            ),
            FaultKind::PoolExhausted { layout } => {
                let node = program.layouts.get(layout);
                format!(
                    "pointer node '{}' ran out of blocks: all {} of its pool are in use; raise its `capacity`",
                    node.map_or("?", |l| l.node_id.as_str()),
                    match node.map(|l| l.kind) {
                        Some(LayoutKind::Pointer { capacity }) => capacity,
                        _ => 0,
                    }
                )
            }
            FaultKind::TableFull { layout } => {
                let node = program.layouts.get(layout);
                format!(
                    "hash node '{}' is full: all {} slots of its table hold cells; raise its `capacity`",
                    node.map_or("?", |l| l.node_id.as_str()),
                    match node.map(|l| l.kind) {
                        Some(LayoutKind::Hash { capacity }) => capacity,
                        _ => 0,
                    }
                )
            }
            FaultKind::ListFull { layout } => {
                let node = program.layouts.get(layout);
                format!(
                    "dynamic node '{}' is full: `append` to a list that already holds all {} elements it can; raise the node's `shape`",
                    node.map_or("?", |l| l.node_id.as_str()),
                    node.map_or(0, |l| l.shape.first().copied().unwrap_or(0))
                )
            }
            FaultKind::Address => format!(
                "word address {} is outside the field storage (the access was refused)",
                value
            ),
            FaultKind::CallDepth => "helper calls nested too deeply".into(),
        }
    }
}

impl Kernel {
    /// The graph node whose code holds `span` (the kernel's own node unless
    /// the kernel was fused from several, see [`Kernel::fused`]).
    pub fn node(&self, span: Span) -> &str {
        node_of(&self.name, &self.fused, span.part)
    }
    /// Whether node `node` is one of the kernel's (its own or a fused one).
    pub fn has_node(&self, node: &str) -> bool {
        self.name == node || self.fused.iter().any(|n| n == node)
    }
    /// The kernel as the schedule, `weft bench` and timings show it: its
    /// node, or its nodes joined by `+` when fused.
    pub fn label(&self) -> String {
        std::iter::once(self.name.as_str())
            .chain(self.fused.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join("+")
    }
    pub fn iteration_shape(&self, program: &Program) -> Vec<u32> {
        match &self.iteration {
            Iteration::Range(s) => s.clone(),
            Iteration::Field(f) => program.fields[*f].shape.clone(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Local {
    pub name: String,
    pub ty: Type,
}

#[derive(Clone, Debug)]
pub struct Function {
    pub name: String,
    pub args: Vec<Type>,
    pub ret: Type,
    pub insts: Arena<Inst>,
    pub locals: Arena<Local>,
    pub body: Block,
    pub span: Span,
}

impl Function {
    /// Whether the function has any f16 value (the validator's check after
    /// `passes::half`, and autodiff's refusal). A kernel's shared arrays are
    /// checked with its `workgroup`.
    pub fn uses_f16(&self) -> bool {
        self.args.iter().any(|t| t.is_f16())
            || self.ret.is_f16()
            || self.locals.iter().any(|(_, l)| l.ty.is_f16())
            || self.insts.iter().any(|(_, i)| i.ty.is_f16())
    }

    /// The scalar operand of `Construct` instruction `v` that is its
    /// component `i` (`None` when `v` is not a `Construct` or component `i`
    /// lies inside a vector operand).
    pub fn construct_part(&self, v: InstId, i: u32) -> Option<InstId> {
        let InstKind::Construct(parts) = &self.insts[v].kind else {
            return None;
        };
        let mut at = 0u32;
        for &p in parts {
            let n = self.insts[p].ty.components() as u32;
            if i < at + n {
                return (n == 1).then_some(p);
            }
            at += n;
        }
        None
    }

    pub fn new(name: &str, args: Vec<Type>, ret: Type, span: Span) -> Self {
        Function {
            name: name.to_string(),
            args,
            ret,
            insts: Arena::new(),
            locals: Arena::new(),
            body: Vec::new(),
            span,
        }
    }
    pub fn ty(&self, v: InstId) -> Type {
        self.insts[v].ty
    }
}

#[derive(Clone, Debug)]
pub struct Inst {
    pub kind: InstKind,
    /// Result type; `Void` for instructions that produce no value.
    pub ty: Type,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Neg,
    /// Logical not on bool, bitwise not on integers.
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    LogicalAnd,
    LogicalOr,
    /// Matrix * vector, matrix * matrix, vector * matrix (linear algebra product).
    MatMul,
}

impl BinaryOp {
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge
        )
    }
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Rem => "%",
            BinaryOp::BitAnd => "&",
            BinaryOp::BitOr => "|",
            BinaryOp::BitXor => "^",
            BinaryOp::Shl => "<<",
            BinaryOp::Shr => ">>",
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::LogicalAnd => "&&",
            BinaryOp::LogicalOr => "||",
            BinaryOp::MatMul => "matmul",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    Add,
    Sub,
    Min,
    Max,
    And,
    Or,
    Xor,
    Exchange,
    /// Stores `value` when the current value equals `cmp`; returns the old value.
    CompareExchange,
}

impl AtomicOp {
    pub fn name(self) -> &'static str {
        match self {
            AtomicOp::Add => "add",
            AtomicOp::Sub => "sub",
            AtomicOp::Min => "min",
            AtomicOp::Max => "max",
            AtomicOp::And => "and",
            AtomicOp::Or => "or",
            AtomicOp::Xor => "xor",
            AtomicOp::Exchange => "exchange",
            AtomicOp::CompareExchange => "compare_exchange",
        }
    }
}

/// A scalar constant, stored as its bit pattern (32-bit scalars in the low
/// word, the high word zero).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Const {
    pub scalar: Scalar,
    pub bits: u64,
}

impl Const {
    pub fn f32(v: f32) -> Self {
        Const {
            scalar: Scalar::F32,
            bits: v.to_bits() as u64,
        }
    }
    /// An f16 constant: `v` rounded to the nearest binary16 value, kept as
    /// that value's f32 bits (how f16 values live until `passes::half`).
    pub fn f16(v: f32) -> Self {
        Const {
            scalar: Scalar::F16,
            bits: eval::round_f16(v.to_bits() as u64),
        }
    }
    pub fn i32(v: i32) -> Self {
        Const {
            scalar: Scalar::I32,
            bits: v as u32 as u64,
        }
    }
    pub fn u32(v: u32) -> Self {
        Const {
            scalar: Scalar::U32,
            bits: v as u64,
        }
    }
    pub fn bool(v: bool) -> Self {
        Const {
            scalar: Scalar::Bool,
            bits: v as u64,
        }
    }
    pub fn f64(v: f64) -> Self {
        Const {
            scalar: Scalar::F64,
            bits: v.to_bits(),
        }
    }
    pub fn i64(v: i64) -> Self {
        Const {
            scalar: Scalar::I64,
            bits: v as u64,
        }
    }
    pub fn u64(v: u64) -> Self {
        Const {
            scalar: Scalar::U64,
            bits: v,
        }
    }
    /// Zero of a scalar type (`false` for bool).
    pub fn zero(scalar: Scalar) -> Self {
        Const { scalar, bits: 0 }
    }
    /// One of a numeric scalar type.
    pub fn one(scalar: Scalar) -> Self {
        match scalar {
            Scalar::F32 => Const::f32(1.0),
            Scalar::F64 => Const::f64(1.0),
            s => Const { scalar: s, bits: 1 },
        }
    }
    /// A float constant of type `f32` or `f64` (`scalar` must be one).
    pub fn float(scalar: Scalar, v: f64) -> Self {
        match scalar {
            Scalar::F64 => Const::f64(v),
            _ => Const::f32(v as f32),
        }
    }
    /// The low word (the whole pattern of a 32-bit scalar).
    pub fn lo(self) -> u32 {
        self.bits as u32
    }
    /// The high word (0 for 32-bit scalars).
    pub fn hi(self) -> u32 {
        (self.bits >> 32) as u32
    }
}

impl std::fmt::Display for Const {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.scalar {
            Scalar::F32 => write!(f, "{:?}f", f32::from_bits(self.bits as u32)),
            Scalar::F16 => write!(f, "{:?}h", f32::from_bits(self.bits as u32)),
            Scalar::I32 => write!(f, "{}i", self.bits as u32 as i32),
            Scalar::U32 => write!(f, "{}u", self.bits),
            Scalar::F64 => write!(f, "{:?}d", f64::from_bits(self.bits)),
            Scalar::I64 => write!(f, "{}l", self.bits as i64),
            Scalar::U64 => write!(f, "{}ul", self.bits),
            Scalar::Bool => write!(f, "{}", self.bits != 0),
        }
    }
}

/// A u32 of the running launch (`InstKind::Launch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LaunchValue {
    /// The run's random seed (`--seed`).
    Seed,
    /// How many launches of this kernel node ran before this one in the
    /// run (each substep of a `repeat` draws new numbers).
    Count,
    /// The invocation's row-major linear index over the launch shape.
    Linear,
}

#[derive(Clone, Debug)]
pub enum InstKind {
    /// A scalar constant (vectors are built with `Construct`).
    Const(Const),
    /// The n-th argument of the enclosing function (loop index n in the entry).
    Arg(u32),
    /// The n-th kernel parameter.
    Param(u32),
    /// The frame number (0 during `on_start`).
    Frame,
    Unary(UnaryOp, InstId),
    Binary(BinaryOp, InstId, InstId),
    /// Component-wise select: `cond ? accept : reject`.
    Select {
        cond: InstId,
        accept: InstId,
        reject: InstId,
    },
    /// Numeric conversion to the instruction's type (component-wise).
    Cast(InstId),
    /// Bit reinterpretation to the instruction's type (component-wise).
    Bitcast(InstId),
    /// Builds a vector from scalars/vectors, or a matrix from column vectors.
    Construct(Vec<InstId>),
    /// Component (vector) or column (matrix) at a constant index.
    Extract(InstId, u32),
    /// Component or column at a run-time index (checked against the size).
    ExtractDyn(InstId, InstId),
    /// A copy of a vector/matrix with one component/column replaced.
    Insert {
        base: InstId,
        index: u32,
        value: InstId,
    },
    /// A copy with a component/column at a run-time index replaced.
    InsertDyn {
        base: InstId,
        index: InstId,
        value: InstId,
    },
    Swizzle(InstId, Vec<u8>),
    Builtin(Builtin, Vec<InstId>),
    Call(FuncId, Vec<InstId>),
    /// A uniform f32 in [0, 1): deterministic per (seed, frame, kernel, loop index, call order).
    /// `legalize` expands it (`lower::random`); no backend sees it.
    Random,
    /// A u32 of the running launch that every backend has in its launch
    /// record or loop (what `random()`'s streams start from).
    Launch(LaunchValue),
    /// This invocation's random state (u32), private to the invocation and
    /// shared by every function it calls; 0 until stored.
    RngLoad,
    /// Sets this invocation's random state.
    RngStore(InstId),
    /// This invocation's count of loop trips (u32), private to the
    /// invocation and shared by every function it calls; 0 until stored.
    /// Only `legalize` emits it, on a target with a `loop_trip_limit`.
    TripsLoad,
    /// Sets this invocation's count of loop trips.
    TripsStore(InstId),
    /// The largest value of a u32 over the invocations that the target
    /// runs side by side in lock step and that are active here (a
    /// subgroup); on a target that runs invocations one at a time, the
    /// value itself. Only `legalize` emits it (`TargetCaps::lane_max`).
    LaneMax(InstId),
    LocalLoad(LocalId),
    LocalStore(LocalId, InstId),
    FieldLoad {
        field: FieldId,
        index: Vec<InstId>,
    },
    FieldStore {
        field: FieldId,
        index: Vec<InstId>,
        value: InstId,
    },
    /// Atomic read-modify-write on a whole scalar field element; returns the old value.
    FieldAtomic {
        op: AtomicOp,
        field: FieldId,
        index: Vec<InstId>,
        value: InstId,
        cmp: Option<InstId>,
    },
    /// Whether the element's cell is active on every sparse level (bool).
    /// `level: Some(n)` asks only levels `0..=n` of the field's
    /// `layout::AddressPlan` (root first): whether the level-`n` block that
    /// holds the element is active (views outline outer sparse blocks so).
    FieldIsActive {
        field: FieldId,
        index: Vec<InstId>,
        level: Option<u32>,
    },
    /// Activates every level on the way to the element, as a write would.
    FieldActivate {
        field: FieldId,
        index: Vec<InstId>,
    },
    /// Deactivates the element's innermost sparse level: its cell reads as
    /// the initial value again, and its block may be recycled.
    FieldDeactivate {
        field: FieldId,
        index: Vec<InstId>,
    },
    /// Appends `value` to list `list` (i32) of a field on a `dynamic` node;
    /// the result is the element's position in the list (i32).
    FieldAppend {
        field: FieldId,
        list: InstId,
        value: InstId,
    },
    /// The number of elements in list `list` of a field on a `dynamic` node (i32).
    FieldLength {
        field: FieldId,
        list: InstId,
    },
    /// Fails the launch when `0 <= index < extent` does not hold (debug checks).
    BoundsCheck {
        field: FieldId,
        axis: u32,
        index: InstId,
        extent: u32,
    },
    /// Element `index` (i32, in range: the front end checks it) of the
    /// kernel's block-shared array `array`.
    SharedLoad {
        array: SharedId,
        index: InstId,
    },
    SharedStore {
        array: SharedId,
        index: InstId,
        value: InstId,
    },
    /// Every invocation of the block waits here until all have arrived;
    /// what any of them wrote before (shared arrays and fields) is then
    /// visible to all. Only in uniform control flow of a workgroup
    /// kernel's entry (the validator's rule).
    Barrier,
    /// Fails the launch when `0 <= index < len` does not hold: an index into a
    /// local array of `len` elements (always checked; `legalize` makes it a
    /// `Trap`).
    IndexCheck {
        index: InstId,
        len: u32,
    },
    /// Fails the launch at `Kernel::fault_sites[site]`, reporting `value`'s
    /// bits; the invocation does no further work unless the site says it
    /// resumes (`FaultSite::resume`; legalized IR only).
    Trap {
        site: u32,
        value: InstId,
    },
    /// Loads the word at `addr` (u32) of the root buffer, reinterpreted as the instruction's scalar type.
    BufLoad {
        root: LayoutId,
        addr: InstId,
    },
    BufStore {
        root: LayoutId,
        addr: InstId,
        value: InstId,
    },
    BufAtomic {
        op: AtomicOp,
        root: LayoutId,
        addr: InstId,
        value: InstId,
        cmp: Option<InstId>,
    },
    If {
        cond: InstId,
        accept: Block,
        reject: Block,
    },
    /// `for counter in (begin..end).step_by(step)` (`..=end` when `inclusive`);
    /// `LoopCounter(this)` reads the counter. The trip count is computed once,
    /// before the first iteration, without overflow: the counter takes the
    /// values begin + k * step that lie in the range, even near the type's
    /// maximum. A step that is not positive is a run-time error.
    RangeFor {
        begin: InstId,
        end: InstId,
        step: InstId,
        inclusive: bool,
        body: Block,
    },
    LoopCounter(InstId),
    /// Repeats `body` until a `Break`.
    Loop {
        body: Block,
    },
    Break,
    Continue,
    Return(Option<InstId>),
}

impl InstKind {
    /// Value operands (not nested blocks), in order.
    pub fn operands(&self) -> Vec<InstId> {
        use InstKind::*;
        match self {
            Const(_) | Arg(_) | Param(_) | Frame | Random | Launch(_) | RngLoad | TripsLoad
            | LocalLoad(_) | Break | Continue | LoopCounter(_) | Barrier => vec![],
            SharedLoad { index, .. } => vec![*index],
            SharedStore { index, value, .. } => vec![*index, *value],
            Unary(_, a)
            | Cast(a)
            | Bitcast(a)
            | Extract(a, _)
            | Swizzle(a, _)
            | LocalStore(_, a)
            | RngStore(a)
            | TripsStore(a)
            | LaneMax(a) => vec![*a],
            Binary(_, a, b) | ExtractDyn(a, b) => vec![*a, *b],
            Select {
                cond,
                accept,
                reject,
            } => vec![*cond, *accept, *reject],
            Insert { base, value, .. } => vec![*base, *value],
            InsertDyn { base, index, value } => vec![*base, *index, *value],
            Construct(v) | Builtin(_, v) | Call(_, v) => v.clone(),
            FieldLoad { index, .. }
            | FieldIsActive { index, .. }
            | FieldActivate { index, .. }
            | FieldDeactivate { index, .. } => index.clone(),
            FieldStore { index, value, .. } => {
                let mut v = index.clone();
                v.push(*value);
                v
            }
            FieldAtomic {
                index, value, cmp, ..
            } => {
                let mut v = index.clone();
                v.push(*value);
                v.extend(cmp);
                v
            }
            FieldAppend { list, value, .. } => vec![*list, *value],
            FieldLength { list, .. } => vec![*list],
            BoundsCheck { index, .. } | IndexCheck { index, .. } | Trap { value: index, .. } => {
                vec![*index]
            }
            BufLoad { addr, .. } => vec![*addr],
            BufStore { addr, value, .. } => vec![*addr, *value],
            BufAtomic {
                addr, value, cmp, ..
            } => {
                let mut v = vec![*addr, *value];
                v.extend(cmp);
                v
            }
            If { cond, .. } => vec![*cond],
            RangeFor {
                begin, end, step, ..
            } => vec![*begin, *end, *step],
            Loop { .. } => vec![],
            Return(v) => v.iter().copied().collect(),
        }
    }

    /// Rewrites every value operand through `f`.
    pub fn map_operands(&mut self, mut f: impl FnMut(InstId) -> InstId) {
        use InstKind::*;
        match self {
            Const(_)
            | Arg(_)
            | Param(_)
            | Frame
            | Random
            | Launch(_)
            | RngLoad
            | TripsLoad
            | LocalLoad(_)
            | Break
            | Continue
            | LoopCounter(_)
            | Barrier
            | Loop { .. } => {}
            SharedLoad { index, .. } => *index = f(*index),
            SharedStore { index, value, .. } => {
                *index = f(*index);
                *value = f(*value);
            }
            Unary(_, a)
            | Cast(a)
            | Bitcast(a)
            | Extract(a, _)
            | Swizzle(a, _)
            | LocalStore(_, a)
            | RngStore(a)
            | TripsStore(a)
            | LaneMax(a) => *a = f(*a),
            Binary(_, a, b) | ExtractDyn(a, b) => {
                *a = f(*a);
                *b = f(*b);
            }
            Select {
                cond,
                accept,
                reject,
            } => {
                *cond = f(*cond);
                *accept = f(*accept);
                *reject = f(*reject);
            }
            Insert { base, value, .. } => {
                *base = f(*base);
                *value = f(*value);
            }
            InsertDyn { base, index, value } => {
                *base = f(*base);
                *index = f(*index);
                *value = f(*value);
            }
            Construct(v)
            | Builtin(_, v)
            | Call(_, v)
            | FieldLoad { index: v, .. }
            | FieldIsActive { index: v, .. }
            | FieldActivate { index: v, .. }
            | FieldDeactivate { index: v, .. } => v.iter_mut().for_each(|x| *x = f(*x)),
            FieldStore { index, value, .. } => {
                index.iter_mut().for_each(|x| *x = f(*x));
                *value = f(*value);
            }
            FieldAtomic {
                index, value, cmp, ..
            } => {
                index.iter_mut().for_each(|x| *x = f(*x));
                *value = f(*value);
                if let Some(c) = cmp {
                    *c = f(*c);
                }
            }
            FieldAppend { list, value, .. } => {
                *list = f(*list);
                *value = f(*value);
            }
            FieldLength { list, .. } => *list = f(*list),
            BoundsCheck { index, .. } | IndexCheck { index, .. } | Trap { value: index, .. } => {
                *index = f(*index)
            }
            BufLoad { addr, .. } => *addr = f(*addr),
            BufStore { addr, value, .. } => {
                *addr = f(*addr);
                *value = f(*value);
            }
            BufAtomic {
                addr, value, cmp, ..
            } => {
                *addr = f(*addr);
                *value = f(*value);
                if let Some(c) = cmp {
                    *c = f(*c);
                }
            }
            If { cond, .. } => *cond = f(*cond),
            RangeFor {
                begin, end, step, ..
            } => {
                *begin = f(*begin);
                *end = f(*end);
                *step = f(*step);
            }
            Return(v) => {
                if let Some(x) = v {
                    *x = f(*x)
                }
            }
        }
    }

    /// Nested blocks, in order.
    pub fn blocks(&self) -> Vec<&Block> {
        match self {
            InstKind::If { accept, reject, .. } => vec![accept, reject],
            InstKind::RangeFor { body, .. } | InstKind::Loop { body } => vec![body],
            _ => vec![],
        }
    }
    pub fn blocks_mut(&mut self) -> Vec<&mut Block> {
        match self {
            InstKind::If { accept, reject, .. } => vec![accept, reject],
            InstKind::RangeFor { body, .. } | InstKind::Loop { body } => vec![body],
            _ => vec![],
        }
    }

    /// True when removing an unused instance cannot change behaviour.
    pub fn is_pure(&self) -> bool {
        use InstKind::*;
        matches!(
            self,
            Const(_)
                | Arg(_)
                | Param(_)
                | Frame
                | Launch(_)
                | Unary(..)
                | Binary(..)
                | Select { .. }
                | Cast(_)
                | Bitcast(_)
                | Construct(_)
                | Extract(..)
                | Insert { .. }
                | Swizzle(..)
                | Builtin(..)
                | LocalLoad(_)
                | FieldLoad { .. }
                | FieldIsActive { .. }
                | FieldLength { .. }
                | BufLoad { .. }
                | LoopCounter(_)
        )
    }
}

#[derive(Clone, Debug, Default)]
pub struct Schedule {
    pub on_start: Vec<Step>,
    pub on_frame: Vec<Step>,
}

#[derive(Clone, Debug)]
pub enum Step {
    Launch(KernelId),
    Repeat {
        node_id: String,
        count: u32,
        /// A kernel scalar (i32) that every launch in the body receives as
        /// the iteration number, `0..count`.
        index: Option<String>,
        /// Iterations run with the index counting down (`count-1..=0`): the
        /// reversed copy of a repeat in a tape's backward sweep.
        reverse: bool,
        /// The index of the first iteration (`start..start+count`); non-zero
        /// only for the segments a checkpointed tape cuts a repeat into.
        start: u32,
        body: Vec<Step>,
    },
    /// Runs `body` forward, then the adjoint of every launch of the body in
    /// reverse order, seeded with d loss / d loss = 1; gradient fields are
    /// zeroed on entry. Only in abstract IR: `passes::autodiff` expands it
    /// into plain launches.
    Tape {
        node_id: String,
        loss: FieldId,
        /// Checkpoint interval k of the body's repeat (0: keep everything);
        /// see `passes::autodiff`.
        checkpoint: u32,
        /// Reverse (gradients) or forward (tangents) mode.
        mode: TapeMode,
        body: Vec<Step>,
    },
    /// An `optimize` node: `spec.iterations` times {the loss field set to
    /// 0, a tape over `body`, the loss recorded, every `wrt` field updated
    /// from its gradient}. Only in abstract IR: `passes::optimize` expands
    /// it into a repeat of a `Step::Tape` and system kernels, before
    /// `passes::autodiff` runs.
    Optimize {
        node_id: String,
        spec: OptimizeSpec,
        body: Vec<Step>,
    },
    /// Deactivates every cell of the sparse layout node `layout` (a
    /// `clear` node), returning blocks to pools and emptying lists. Only in
    /// abstract IR: `passes::sparse_clear` turns it into system-kernel
    /// launches.
    Clear {
        node_id: String,
        layout: LayoutId,
    },
    /// Fills the element list of sparse node `layout` for the struct-fors
    /// after it (`schedule::list_gen` puts one before every struct-for;
    /// `schedule::list_reuse` drops those whose list is still current).
    /// `passes::sparse_list` turns it into the list-generation system
    /// kernels; no program a backend sees holds one.
    ListGen {
        layout: LayoutId,
    },
}

/// What a `Step::Tape` computes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum TapeMode {
    /// The body forward, then its adjoints in reverse order: `x.grad` ends
    /// up holding d loss / d x.
    #[default]
    Reverse,
    /// The body once, each launch replaced by its tangent kernel (a
    /// Jacobian-vector product, `passes::autodiff::forward`): `x.grad`
    /// holds the tangent of x. The tangents of `seeded` fields hold the
    /// direction at tape entry and are kept; every other one is zeroed.
    Forward { seeded: Vec<FieldId> },
}

/// What an `optimize` node does per iteration (see `passes::optimize`).
#[derive(Clone, Debug, PartialEq)]
pub struct OptimizeSpec {
    /// The loss field (it has a gradient field); the loss is the sum of its components.
    pub loss: FieldId,
    /// The fields updated from their gradients (each has a gradient field).
    pub wrt: Vec<FieldId>,
    pub method: OptimizeMethod,
    /// Learning rate (> 0).
    pub lr: f32,
    /// Iterations per run of the node (>= 1).
    pub iterations: u32,
    /// Slots of the loss history ring (`NODE.loss`).
    pub history: u32,
    /// The tape's checkpoint interval (0: keep every state).
    pub checkpoint: u32,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum OptimizeMethod {
    /// Gradient descent: `w -= lr * g`.
    Gd,
    /// Adam (Kingma & Ba 2015) with bias-corrected moments.
    Adam { beta1: f32, beta2: f32, eps: f32 },
}

/// The fields an `optimize` node's expansion added, for readers of the
/// loss history (the app's plot, tests).
#[derive(Clone, Debug)]
pub struct OptimizerFields {
    /// The optimize node.
    pub node_id: String,
    /// f32, shape `[history]`: the loss of iteration n is in slot `n % history`.
    pub loss_history: FieldId,
    /// i32, shape `[1]`: iterations completed since the start (or reset).
    pub step: FieldId,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Colormap {
    Grayscale,
    Viridis,
    Inferno,
    Magma,
    Coolwarm,
    /// Fire: black, red, orange, yellow to near white (`colormap::BLACKBODY`).
    Blackbody,
}

impl Colormap {
    pub const ALL: [(&'static str, Colormap); 6] = [
        ("grayscale", Colormap::Grayscale),
        ("viridis", Colormap::Viridis),
        ("inferno", Colormap::Inferno),
        ("magma", Colormap::Magma),
        ("coolwarm", Colormap::Coolwarm),
        ("blackbody", Colormap::Blackbody),
    ];
    pub fn parse(s: &str) -> Option<Colormap> {
        Self::ALL.iter().find(|(n, _)| *n == s).map(|(_, c)| *c)
    }
}

/// An orbit camera around `target` (`passes::views::camera` defines the
/// projection): `distance` from it, `yaw` and `pitch` in degrees, vertical
/// field of view `fov` in degrees.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Camera {
    pub target: [f32; 3],
    pub distance: f32,
    pub yaw: f32,
    pub pitch: f32,
    pub fov: f32,
}

/// A 3-D view's space: the domain box and the camera (defaults resolved).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scene {
    /// (min x, min y, min z, max x, max y, max z).
    pub domain: [f32; 6],
    pub camera: Camera,
    /// Turntable: degrees of yaw added per frame (`orbit_degrees_per_frame`;
    /// the runtime draws frame f with yaw + f * orbit).
    pub orbit: f32,
    /// `show_box`: the domain box's 12 edges, depth-tested
    /// (`passes::views::overlay3d`).
    pub show_box: bool,
    /// `show_axes`: an x/y/z axis gizmo in the bottom-left corner.
    pub show_axes: bool,
    /// `show_ground`: a grid on the domain's floor, with the shadows of
    /// particles and surfaces (`passes::views::ground`).
    pub show_ground: bool,
}

#[derive(Clone, Debug)]
pub enum View {
    Image {
        node_id: String,
        field: FieldId,
        colormap: Colormap,
        /// `None` = auto range (min..max of the frame).
        range: Option<(f32, f32)>,
        /// Sparse fields: inactive cells as a checkerboard, active outermost
        /// sparse blocks outlined (`render::activity_mask`).
        show_active: bool,
    },
    Particles {
        node_id: String,
        positions: FieldId,
        color_field: Option<FieldId>,
        color: [f32; 3],
        background: [f32; 3],
        radius: f32,
        width: u32,
        height: u32,
        /// Domain rectangle mapped to the image: (min x, min y, max x, max y).
        /// 2-D only (vec2 positions); unused with a `scene`.
        domain: [f32; 4],
        /// 3-D (vec3 positions): lit splats through this scene's camera,
        /// nearest particle per pixel (`passes::views::camera`).
        scene: Option<Scene>,
    },
    /// A line chart of a 1-D f32 field (`passes::views` documents the drawing).
    Plot {
        node_id: String,
        /// The values (f32, shape `[n]`).
        field: ViewSource,
        /// Optional i32 `[1]` field: how many values were written into
        /// `field` used as a ring (value i in slot i mod n); the plot shows
        /// the last min(count, n) of them, oldest first. None: all n slots.
        count: Option<ViewSource>,
        width: u32,
        height: u32,
        /// Fixed value range (min < max; both > 0 with `log`); `None` = auto.
        range: Option<(f32, f32)>,
        /// log10 scale; values <= 0 leave gaps.
        log: bool,
        /// Line thickness in pixel rows (1..=16).
        thickness: u32,
        color: [f32; 3],
        background: [f32; 3],
    },
    /// The iso-surface of a 3-axis f32 field, shaded
    /// (`passes::views::surface` defines the extraction and drawing).
    Surface {
        node_id: String,
        field: FieldId,
        /// A mesh node's (points, triangles) when the view draws that mesh
        /// (its `field` is then the mesh's tree): its triangles fill the
        /// buffer instead of an iso-surface of `field`.
        mesh: Option<(FieldId, FieldId)>,
        level: f32,
        /// Capacity of the triangle buffer `NODE.triangles`.
        max_triangles: u32,
        color: [f32; 3],
        background: [f32; 3],
        width: u32,
        height: u32,
        scene: Scene,
    },
    /// A histogram of any field's values (`passes::views::histogram`
    /// documents the counting and drawing): per-element magnitude for
    /// vectors and matrices, active cells only under sparse layouts.
    Histogram {
        node_id: String,
        field: FieldId,
        /// Bins (1..=1024).
        bins: u32,
        width: u32,
        height: u32,
        /// Fixed value range (min < max, finite); `None` = auto.
        range: Option<(f32, f32)>,
        /// Bar height by log(1 + count).
        log: bool,
        color: [f32; 3],
        background: [f32; 3],
    },
    /// A 3-axis scalar field ray-marched through a 3-D camera
    /// (`passes::views::volume` documents the drawing).
    Volume {
        node_id: String,
        field: FieldId,
        mode: VolumeMode,
        colormap: Colormap,
        /// `None` = auto range (min..max of the frame).
        range: Option<(f32, f32)>,
        background: [f32; 3],
        /// Sparse fields: the active outermost blocks as wire boxes.
        show_active: bool,
        width: u32,
        height: u32,
        scene: Scene,
        /// Another 3-D view's node (same scene and size, checked when the
        /// graph is built) drawn first: its colour is the volume's
        /// background and its depth ends the rays.
        under: Option<String>,
        /// Start each ray at a per-pixel hashed offset within the first
        /// sample spacing (no banding) instead of half a step.
        jitter: bool,
    },
}

/// How a `volume` view draws its field (`passes::views::volume`).
#[derive(Clone, Debug, PartialEq)]
pub enum VolumeMode {
    /// Emission–absorption ray-march: `density` scales the opacity,
    /// `step` is the sample spacing in cells.
    Emission { density: f32, step: f32 },
    /// Maximum-intensity projection (samples `step` cells apart).
    Mip { step: f32 },
    /// One axis-aligned plane (`axis` 0..3 = x, y, z) at `position` (0..1
    /// of the domain along the axis), outlined.
    Slice { axis: u32, position: f32 },
    /// Lit smoke (`passes::views::volume_light` defines the lighting):
    /// extinction from the field, single scattering of lights with
    /// self-shadowing, an ambient term and optional emission.
    Lit(Box<VolumeLighting>),
}

/// The lighting of a `lit` volume view.
#[derive(Clone, Debug, PartialEq)]
pub struct VolumeLighting {
    /// Extinction per cell at the top of the range (as `Emission`'s).
    pub density: f32,
    /// Sample spacing in cells.
    pub step: f32,
    /// Scattering colour (the share of light scattered per channel).
    pub albedo: [f32; 3],
    /// Unshadowed light from everywhere, per channel.
    pub ambient: [f32; 3],
    /// At most `MAX_LIGHTS`.
    pub lights: Vec<VolumeLight>,
    /// Scales the extinction along shadow rays (0: no shadows).
    pub shadow_density: f32,
    /// Side of a transmittance-grid cell, in field cells (1..=8).
    pub shadow_cells: u32,
    /// Light given off by a second field (fire: temperature).
    pub emission: Option<VolumeEmission>,
}

/// A light of a `lit` volume view.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VolumeLight {
    pub kind: LightKind,
    pub color: [f32; 3],
    pub intensity: f32,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LightKind {
    /// Parallel light arriving from `toward` (unit length: the direction
    /// from the scene to the light).
    Directional { toward: [f32; 3] },
    /// A point light at `position` (world), falling off as 1 / distance².
    Point { position: [f32; 3] },
}

/// Emission of a `lit` volume view: `field` (same shape as the view's)
/// through `colormap`, `range` like the view's own (`None` = auto).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VolumeEmission {
    pub field: FieldId,
    pub colormap: Colormap,
    pub range: Option<(f32, f32)>,
    pub intensity: f32,
}

impl VolumeMode {
    /// A `lit` view's emission field.
    pub fn emission_field(&self) -> Option<FieldId> {
        match self {
            VolumeMode::Lit(l) => l.emission.map(|e| e.field),
            _ => None,
        }
    }
}

/// A field a view reads: a field node's, or one that a pass adds later (an
/// `optimize` node's `NODE.loss` and `NODE.step`, which exist only after
/// `passes::optimize`), named until `passes::views` resolves it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ViewSource {
    Field(FieldId),
    Added(String),
}

impl ViewSource {
    /// The field, once resolved (always after `passes::views`).
    pub fn id(&self) -> Option<FieldId> {
        match self {
            ViewSource::Field(f) => Some(*f),
            ViewSource::Added(_) => None,
        }
    }
}

impl View {
    /// The fields the view reads (a plot's added fields once resolved).
    pub fn fields(&self) -> Vec<FieldId> {
        match self {
            View::Image { field, .. }
            | View::Surface { field, .. }
            | View::Histogram { field, .. } => vec![*field],
            View::Volume { field, mode, .. } => std::iter::once(*field)
                .chain(mode.emission_field())
                .collect(),
            View::Particles {
                positions,
                color_field,
                ..
            } => std::iter::once(*positions).chain(*color_field).collect(),
            View::Plot { field, count, .. } => field
                .id()
                .into_iter()
                .chain(count.as_ref().and_then(ViewSource::id))
                .collect(),
        }
    }
    pub fn node_id(&self) -> &str {
        match self {
            View::Image { node_id, .. }
            | View::Particles { node_id, .. }
            | View::Plot { node_id, .. }
            | View::Histogram { node_id, .. }
            | View::Surface { node_id, .. }
            | View::Volume { node_id, .. } => node_id,
        }
    }
    /// The 3-D space of a view drawn through the orbit camera.
    pub fn scene(&self) -> Option<&Scene> {
        match self {
            View::Particles { scene, .. } => scene.as_ref(),
            View::Volume { scene, .. } => Some(scene),
            View::Surface { scene, .. } => Some(scene),
            _ => None,
        }
    }
}
