//! Field memory on the host: one buffer of 32-bit words per root layout node.
//!
//! Words are atomics so that parallel kernels may read and write them safely
//! (plain accesses are relaxed loads/stores; `+=` in kernels are real atomic
//! read-modify-writes). Quantized fields are encoded and decoded here with
//! `ir::quant` (the definition kernels' IR mirrors), so host copies, `.npy`
//! dumps and `--init` see compute values.

use crate::RuntimeError;
use std::sync::atomic::{AtomicU32, Ordering};
use weft_codegen::launch::LaunchRecord;
use weft_ir::io::npy::{DType, NpyArray};
use weft_ir::ir::layout::{initial_words, root_of, AddressPlan, WORD_BITS};
use weft_ir::ir::quant::{self, Quant, SharedFloat};
use weft_ir::ir::*;
use weft_ir::types::{Scalar, Type};

pub struct FieldMemory {
    /// Indexed by layout handle; only roots have buffers (others are empty).
    pub buffers: Vec<Vec<AtomicU32>>,
}

/// Word address of component 0 of `field` at logical `index` (the field's `AddressPlan`).
pub fn field_address(p: &Program, field: FieldId, index: &[u32]) -> u64 {
    AddressPlan::new(p, field).word_address(index)
}

/// How one component is coded inside its word.
#[derive(Clone, Copy)]
enum Codec {
    Word,
    Quant(Quant),
    /// Component `c` of a shared-exponent element whose code starts at the
    /// slot's shift (every component's slot points at the element's code).
    Shared(SharedFloat, usize),
}

/// Where one component lives: its word, and for quantized storage the bit
/// position and encoding inside that word.
#[derive(Clone, Copy)]
struct Slot {
    word: usize,
    shift: u32,
    codec: Codec,
}

impl Slot {
    /// The component's compute value (bits) out of its word.
    fn get(self, word: u32) -> u32 {
        match self.codec {
            Codec::Word => word,
            Codec::Quant(q) => q.decode(word >> self.shift),
            Codec::Shared(s, c) => s.decode(word >> self.shift, c),
        }
    }
    /// `word` with the component set to the compute value `v` (encoded with
    /// the same rounding as a kernel store; other bits kept). Shared-exponent
    /// elements are written whole by `put_element`.
    fn put(self, word: u32, v: u32) -> u32 {
        match self.codec {
            Codec::Word => v,
            Codec::Quant(q) => {
                let m = q.mask() << self.shift;
                (word & !m) | ((q.encode(v) << self.shift) & m)
            }
            Codec::Shared(..) => unreachable!("shared-exponent elements are written whole"),
        }
    }
}

/// Writes one element's compute values through its slots (a shared
/// exponent re-encodes the whole element, like a kernel store).
fn put_element(slots: &[Slot], values: &[u32], root: &mut [u32]) {
    if let Some(Slot {
        word,
        shift,
        codec: Codec::Shared(s, _),
    }) = slots.first().copied()
    {
        let m = quant::mask(s.bits()) << shift;
        root[word] = (root[word] & !m) | ((s.encode(values) << shift) & m);
        return;
    }
    for (a, &v) in slots.iter().zip(values) {
        root[a.word] = a.put(root[a.word], v);
    }
}

/// Slots of a field's components, addresses still to be filled in.
fn slots_of(plan: &AddressPlan) -> Vec<Slot> {
    (0..plan.components)
        .map(|c| Slot {
            word: 0,
            shift: 0,
            codec: match plan.storage {
                Storage::Word => Codec::Word,
                Storage::Quant(q) => Codec::Quant(q),
                Storage::Shared(s) => Codec::Shared(s, c),
            },
        })
        .collect()
}

/// Points `slots` at the element whose component 0 is at bit `bit0`.
fn place(plan: &AddressPlan, slots: &mut [Slot], bit0: u64) {
    for (c, s) in slots.iter_mut().enumerate() {
        let bit = match s.codec {
            Codec::Shared(..) => bit0,
            _ => bit0 + c as u64 * plan.component_bits,
        };
        s.word = (bit / WORD_BITS) as usize;
        s.shift = (bit % WORD_BITS) as u32;
    }
}

/// Calls `f(linear, slot of each component)` for every element of `field`
/// on a dense-only tree, in logical row-major order: the one loop behind
/// every host copy.
fn for_each_element(p: &Program, field: FieldId, mut f: impl FnMut(usize, &[Slot])) {
    let plan = AddressPlan::new(p, field);
    let mut slots = slots_of(&plan);
    for_each_index(&p.fields[field].shape, |lin, idx| {
        place(&plan, &mut slots, plan.bit_address(idx));
        f(lin, &slots)
    });
}

/// Calls `f(linear, index)` for every cell of a shape in row-major order.
pub fn for_each_index(shape: &[u32], mut f: impl FnMut(usize, &[u32])) {
    let total: usize = shape.iter().map(|&s| s as usize).product();
    let mut idx = vec![0u32; shape.len()];
    for lin in 0..total {
        f(lin, &idx);
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

impl FieldMemory {
    /// Allocates every root buffer and writes every field's initial value.
    pub fn new(p: &Program) -> FieldMemory {
        let mut buffers: Vec<Vec<AtomicU32>> = (0..p.layouts.len()).map(|_| Vec::new()).collect();
        for r in p.roots() {
            buffers[r.index()] = initial_root(p, r).into_iter().map(AtomicU32::new).collect();
        }
        FieldMemory { buffers }
    }

    /// Restores every field to its initial value (nothing active).
    pub fn reset(&mut self, p: &Program) {
        for r in p.roots() {
            for (cell, w) in self.buffers[r.index()].iter().zip(initial_root(p, r)) {
                cell.store(w, Ordering::Relaxed);
            }
        }
    }

    /// Reads a whole field in logical row-major order (components last).
    pub fn read_field(&self, p: &Program, field: FieldId) -> Vec<u32> {
        let root = root_of(p, p.fields[field].layout);
        extract_field(p, field, &self.root_words(root))
    }

    /// Overwrites a whole field from logical row-major words.
    pub fn write_field(
        &self,
        p: &Program,
        field: FieldId,
        words: &[u32],
    ) -> Result<(), RuntimeError> {
        let root = root_of(p, p.fields[field].layout);
        let mut all = self.root_words(root);
        insert_field(p, field, words, &mut all)?;
        for (cell, w) in self.buffers[root.index()].iter().zip(all) {
            cell.store(w, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// The initial words of a root buffer: the layout's initial image (every
/// field's constant, quantized ones encoded) plus data initialisers (only
/// on dense-only trees, which the graph builder enforces).
pub fn initial_root(p: &Program, root: LayoutId) -> Vec<u32> {
    let mut words = initial_words(p, root);
    for (h, f) in p.fields.iter() {
        if root_of(p, f.layout) != root {
            continue;
        }
        if let FieldInit::Data(d) = &f.init {
            insert_field(p, h, d, &mut words).expect("dense-only fields insert without pools");
        }
    }
    words
}

/// Reads a field in logical row-major order out of its root's words
/// (inactive cells give the field's initial value).
pub fn extract_field(p: &Program, field: FieldId, root: &[u32]) -> Vec<u32> {
    let f = &p.fields[field];
    let comps = f.ty.words();
    let mut out = vec![0u32; f.cells() as usize * comps];
    let plan = AddressPlan::new(p, field);
    if plan.is_sparse() && plan.storage != Storage::Word {
        // Quantized: one element at a time through its bit address (inactive
        // cells read their sparse node's initial image).
        let mut slots = slots_of(&plan);
        for_each_index(&f.shape, |lin, idx| {
            let (bit, _) = plan.read_bit_address(idx, root);
            place(&plan, &mut slots, bit);
            for (c, a) in slots.iter().enumerate() {
                out[lin * comps + c] = a.get(root[a.word]);
            }
        });
        return out;
    }
    if plan.is_sparse() {
        plan.for_each_block(&f.shape, root, |_, lin0, (cell, _), table| {
            for e in table {
                let a = cell + e.word;
                for c in 0..comps {
                    out[(lin0 + e.lin) * comps + c] =
                        root[(a + plan.component_word_offset(c)) as usize];
                }
            }
        });
        return out;
    }
    for_each_element(p, field, |lin, addrs| {
        for (c, &a) in addrs.iter().enumerate() {
            out[lin * comps + c] = a.get(root[a.word]);
        }
    });
    out
}

/// Writes a field's logical row-major words into its root's words. On a
/// sparse layout, cells that are inactive and keep their initial value stay
/// inactive; every other cell is activated (allocating pool blocks), so that
/// reading back gives `words`.
pub fn insert_field(
    p: &Program,
    field: FieldId,
    words: &[u32],
    root: &mut [u32],
) -> Result<(), RuntimeError> {
    let f = &p.fields[field];
    let comps = f.ty.words();
    let plan = AddressPlan::new(p, field);
    if plan.is_sparse() {
        let init: Vec<u32> = match &f.init {
            FieldInit::Constant(w) => w.clone(),
            FieldInit::Data(_) => unreachable!("sparse fields have constant initial values"),
        };
        // What an inactive cell reads (a quantized init rounds to its code).
        let init = match plan.storage {
            Storage::Word => init,
            Storage::Quant(q) => init.iter().map(|&w| q.decode(q.encode(w))).collect(),
            Storage::Shared(s) => (0..comps).map(|c| s.decode(s.encode(&init), c)).collect(),
        };
        let mut slots = slots_of(&plan);
        let mut failed = None;
        for_each_index(&f.shape, |lin, idx| {
            if failed.is_some() {
                return;
            }
            let value = &words[lin * comps..(lin + 1) * comps];
            let (_, active) = plan.read_address(idx, root);
            if !active && value == init.as_slice() {
                return;
            }
            match plan.activate(idx, root) {
                Ok(a) if plan.storage == Storage::Word => {
                    for (c, &w) in value.iter().enumerate() {
                        root[(a + plan.component_word_offset(c)) as usize] = w;
                    }
                }
                Ok(_) => {
                    let (bit, _) = plan.read_bit_address(idx, root);
                    place(&plan, &mut slots, bit);
                    put_element(&slots, value, root);
                }
                Err(l) => failed = Some(l),
            }
        });
        return match failed {
            None => Ok(()),
            Some(l) => Err(RuntimeError::Run {
                node: p.layouts[l].node_id.clone(),
                message: format!(
                    "writing field '{}' needs more blocks than the pool holds; raise the pointer node's `capacity`",
                    f.name
                ),
            }),
        };
    }
    for_each_element(p, field, |lin, addrs| {
        put_element(addrs, &words[lin * comps..(lin + 1) * comps], root);
    });
    Ok(())
}

/// The shape a host backend runs `rec` with: the record's, with axis 0
/// cut to the device word the kernel names (`Kernel::count_from`, the
/// length of a sparse element list that an earlier launch just built).
/// Host memory is the device memory here, so reading it costs nothing.
pub fn launch_shape(p: &Program, memory: &FieldMemory, rec: &LaunchRecord) -> Vec<u32> {
    let mut shape = rec.shape.clone();
    if let (Some(c), Some(rows)) = (p.kernels[rec.kernel].count_from, shape.first_mut()) {
        let n = memory.buffers[c.root.index()]
            .get(c.word as usize)
            .map_or(0, |w| w.load(Ordering::Acquire));
        *rows = n.min(*rows);
    }
    shape
}

impl FieldMemory {
    /// A plain copy of one root buffer.
    pub fn root_words(&self, root: LayoutId) -> Vec<u32> {
        self.buffers[root.index()]
            .iter()
            .map(|w| w.load(Ordering::Relaxed))
            .collect()
    }
}

/// A field's data as a NumPy array: shape = field shape + [N] for vectors, + [N, N] for matrices (row-major rows).
pub fn field_to_npy(p: &Program, field: FieldId, words: Vec<u32>) -> NpyArray {
    let f = &p.fields[field];
    values_to_npy(f.ty, f.shape.iter().map(|&s| s as usize).collect(), words)
}

/// Fields with more elements than this are not read whole (a hash root's
/// domain of 2^40 elements cannot be): `weft replay` summarises, and
/// `--dump` writes, the active elements of one under a `hash` root.
pub const READ_WHOLE_LIMIT: u64 = 1 << 26;

/// The active elements of a field under a `hash` root, walking the table
/// slot by slot (what the table holds, never the domain): their
/// coordinates (`dims` words each) and their words (`components` each).
/// `None` where the root is no hash or the field is quantized.
pub fn table_elements(p: &Program, field: FieldId, root: &[u32]) -> Option<(Vec<u32>, Vec<u32>)> {
    let f = &p.fields[field];
    if f.storage != Storage::Word {
        return None;
    }
    let plan = AddressPlan::new(p, field);
    let comps = f.ty.words();
    let (mut coords, mut values) = (Vec::new(), Vec::new());
    let hash = plan.for_each_active_in_table(root, |idx, a| {
        coords.extend_from_slice(idx);
        for c in 0..comps {
            values.push(root[(a + plan.component_word_offset(c)) as usize]);
        }
    });
    hash.then_some((coords, values))
}

/// Element words of type `ty` as a NumPy array of `shape` + [N] for
/// vectors, + [N, N] for matrices (row-major rows).
pub fn values_to_npy(ty: Type, mut shape: Vec<usize>, mut words: Vec<u32>) -> NpyArray {
    match ty {
        Type::Vector(_, n) => shape.push(n as usize),
        Type::Matrix(n) => {
            let n = n as usize;
            shape.extend([n, n]);
            for cell in words.chunks_mut(n * n) {
                let m = cell.to_vec();
                for r in 0..n {
                    for c in 0..n {
                        cell[r * n + c] = m[c * n + r];
                    }
                }
            }
        }
        _ => {}
    }
    let dtype = match ty.scalar() {
        Some(Scalar::I32) => DType::I32,
        Some(Scalar::U32) => DType::U32,
        Some(Scalar::I64) => DType::I64,
        Some(Scalar::U64) => DType::U64,
        Some(Scalar::F64) => DType::F64,
        _ => DType::F32,
    };
    NpyArray {
        dtype,
        shape,
        words,
    }
}

/// One stored element of a field, as `for_each_stored_element` hands it over.
pub struct StoredElement<'a> {
    /// Logical index.
    pub index: &'a [u32],
    /// On a sparse tree, the row-major global coordinate of the block
    /// holding the element (the cell of its last sparse level; for a
    /// `dynamic` last level, the list, i.e. the cell above it). `None` on
    /// dense trees.
    pub block: Option<u64>,
    /// Compute values (bits), one word per component.
    pub values: &'a [u32],
    /// Quantized storage: the codes in memory, one per component (a
    /// shared-exponent element: its one code). Empty for word storage.
    pub codes: &'a [u32],
}

/// Calls `f` for every *stored* element of `field` in `root`'s words: every
/// element of a dense tree in row-major order, and on a sparse tree only the
/// elements of active blocks (a `hash` root walked slot by slot, others
/// block by block), never the whole domain. What the app's spreadsheet lists.
pub fn for_each_stored_element(
    plan: &AddressPlan,
    shape: &[u32],
    root: &[u32],
    mut f: impl FnMut(StoredElement),
) {
    let mut slots = slots_of(plan);
    let mut values = vec![0u32; plan.components];
    let mut codes = Vec::new();
    let mut emit = |idx: &[u32], block: Option<u64>, bit: u64, slots: &mut [Slot]| {
        place(plan, slots, bit);
        codes.clear();
        for (c, s) in slots.iter().enumerate() {
            values[c] = s.get(root[s.word]);
            match s.codec {
                Codec::Word => {}
                Codec::Quant(q) => codes.push((root[s.word] >> s.shift) & q.mask()),
                Codec::Shared(sf, _) if c == 0 => {
                    codes.push((root[s.word] >> s.shift) & quant::mask(sf.bits()))
                }
                Codec::Shared(..) => {}
            }
        }
        f(StoredElement {
            index: idx,
            block,
            values: &values,
            codes: &codes,
        });
    };
    if !plan.is_sparse() {
        for_each_index(shape, |_, idx| {
            emit(idx, None, plan.bit_address(idx), &mut slots);
        });
        return;
    }
    let depth = plan.sparse_depth();
    // The level whose cell is a "block": the last sparse one, or for a
    // dynamic list the cell holding the list.
    let block_level = match plan.levels[depth - 1].kind {
        LayoutKind::Dynamic => depth.saturating_sub(2),
        _ => depth - 1,
    };
    let block_of = |idx: &[u32]| AddressPlan::coord(&plan.levels[block_level], idx);
    let hash = plan.for_each_active_in_table(root, |idx, _| {
        let (bit, _) = plan.read_bit_address(idx, root);
        emit(idx, Some(block_of(idx)), bit, &mut slots);
    });
    if hash {
        return;
    }
    let mut idx = vec![0u32; shape.len()];
    plan.for_each_block(shape, root, |first, _, (_, active), table| {
        if !active {
            return;
        }
        for e in table {
            for (d, i) in idx.iter_mut().enumerate() {
                *i = first[d] + e.local[d];
            }
            let (bit, active) = plan.read_bit_address(&idx, root);
            if active {
                emit(&idx, Some(block_of(&idx)), bit, &mut slots);
            }
        }
    });
}
