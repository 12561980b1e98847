//! The one place that knows where a field's elements are stored.
//!
//! The layout tree (`Program::layouts`, Taichi's SNodes) is sized here
//! (`compute`), and every consumer of addresses — access lowering
//! (`passes::lower_access`), host copies and `.npy` dumps (the runtime's
//! `memory.rs`) and the WGSL of GPU views (`gpu_render.rs`) — reads the same
//! [`AddressPlan`] per field instead of re-deriving the arithmetic. Adding a
//! layout kind (pointer, bitmasked, hash) or a storage kind (quantized bits)
//! means changing this module and the code that *emits* a plan, not three
//! copies of the math.
//!
//! Offsets and strides are in **bits** so that sub-word storage fits the same
//! plan; storage words are counted from the field's `Storage`, separately
//! from `Type::components()`. Word storage is one 32-bit word per component
//! (two, low word first, for the 64-bit scalars `f64`, `i64`, `u64`);
//! quantized storage (`ir::quant`) packs components and fields into words,
//! never letting one component straddle two words, so that one word access
//! (and one compare-exchange) always covers a whole component.

use super::*;

/// Bits in one storage word of a root buffer.
pub const WORD_BITS: u64 = 32;

/// Ceiling on one layout tree's storage: 2^32 words (16 GiB). Word
/// addresses are `u32` in the IR (`passes::lower_access`) and on every
/// backend, so a larger tree could not be addressed. How much of this a
/// machine can actually hold is the runtime's business
/// (`weft_runtime::memory_limit`: device limits, free memory, `--max-memory`).
pub const MAX_LAYOUT_WORDS: u64 = 1 << 32;

impl Storage {
    /// Bits one component occupies in its root buffer.
    pub fn component_bits(self) -> u64 {
        match self {
            Storage::Word => WORD_BITS,
            Storage::Quant(q) => q.bits() as u64,
            Storage::Shared(s) => s.lane_bits() as u64,
        }
    }
    /// The storage's name as the graph spells it (`word`, `int5`, …).
    pub fn name(self) -> String {
        match self {
            Storage::Word => "word".into(),
            Storage::Quant(q) => q.name(),
            Storage::Shared(s) => s.name(),
        }
    }
}

impl Field {
    /// Bits from one component to the next: the storage width when the
    /// whole element fits one word, else the width rounded up to a power of
    /// two (which divides 32, so no component straddles a word).
    pub fn component_stride_bits(&self) -> u64 {
        let b = self.storage.component_bits();
        // A shared-exponent element is one code (the builder keeps it within 32 bits).
        if let Storage::Shared(_) = self.storage {
            return b;
        }
        if self.ty.components() as u64 * b <= WORD_BITS {
            b
        } else {
            b.next_power_of_two()
        }
    }
    /// Bits one element (all components) occupies inside its layout cell.
    pub fn element_bits(&self) -> u64 {
        if let Storage::Shared(s) = self.storage {
            return s.bits() as u64;
        }
        self.storage_components() as u64 * self.component_stride_bits()
    }
    /// Stored components of one element: the type's components, a 64-bit
    /// one counted as its two words (low first), which is how storage, host
    /// copies and `.npy` words see it (`Type::words`).
    pub fn storage_components(&self) -> usize {
        self.ty.words()
    }
    /// Storage words of one element (not the same thing as components once
    /// storage can be narrower than a word).
    pub fn element_words(&self) -> usize {
        self.element_bits().div_ceil(WORD_BITS) as usize
    }
}

/// A layout tree too large for the storage cap, or a `bit_struct` /
/// `bit_array` whose contents do not fit its word; names the layout node and
/// the param or port at fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayoutError {
    pub node: String,
    /// `shape` (sizes) or `cells` (what is wired into a packed node).
    pub what: &'static str,
    pub message: String,
}

/// Computes every cell size and child offset, root-first, places the sparse
/// metadata, and checks the cap.
///
/// Within a cell, fields come first (in creation order) and child layout
/// blocks after them, so fields on one node are interleaved (array of
/// structures) while separate nodes give separate arrays. A block is its
/// header (`bitmasked`: one activity bit per cell, 32 to a word; `dynamic`:
/// the list's length word) followed by its cells; a `pointer` block is one
/// reference word per cell, its cells living in the node's pool. A root buffer holds the root's block at word
/// 0, then, for every sparse node of the tree (parents first), the image of
/// one initial cell, for pointer nodes the pool (see [`PoolWords`]), and
/// for nodes a struct-for lists the element list (see [`list_len`]).
/// Dense-only trees therefore keep exactly their old addresses.
pub fn compute(program: &mut Program) -> Result<(), LayoutError> {
    fn cells(shape: &[u32]) -> u64 {
        shape.iter().fold(1u64, |a, &s| a.saturating_mul(s as u64))
    }
    fn too_big(program: &Program, l: LayoutId) -> LayoutError {
        LayoutError {
            node: program.layouts[l].node_id.clone(),
            what: "shape",
            message: format!(
                "the layout needs more than {} words (16 GiB) of storage; word addresses are 32-bit on every backend",
                MAX_LAYOUT_WORDS
            ),
        }
    }
    let fits = |x: Option<u64>| x.filter(|&x| x <= MAX_LAYOUT_WORDS);
    /// Sizes `l`'s cell and block; returns the block's words.
    fn words(program: &mut Program, l: LayoutId) -> Result<u64, LayoutError> {
        if program.layouts[l].packing != Packing::Cells {
            return packed_words(program, l);
        }
        let mut off_bits = 0u64;
        let children = program.layouts[l].children.clone();
        let mut order: Vec<LayoutChild> = children
            .iter()
            .filter(|c| matches!(c, LayoutChild::Field(_)))
            .copied()
            .collect();
        order.extend(
            children
                .iter()
                .filter(|c| matches!(c, LayoutChild::Layout(_)))
                .copied(),
        );
        for c in &order {
            match *c {
                LayoutChild::Field(f) => {
                    let fd = &program.fields[f];
                    let eb = fd.element_bits();
                    // Word storage and multi-word elements start on a word;
                    // a sub-word element moves to the next word rather
                    // than straddle one.
                    let within = off_bits % WORD_BITS;
                    if within != 0
                        && (fd.storage == Storage::Word
                            || eb > WORD_BITS
                            || within + eb > WORD_BITS)
                    {
                        off_bits = off_bits.div_ceil(WORD_BITS) * WORD_BITS;
                    }
                    program.fields[f].offset_in_cell = off_bits;
                    off_bits += eb;
                }
                LayoutChild::Layout(cl) => {
                    let bw = words(program, cl)?;
                    // Child blocks start on a word boundary.
                    let off = off_bits.div_ceil(WORD_BITS);
                    program.layouts[cl].offset_in_parent = off;
                    let end = bw
                        .checked_add(off)
                        .filter(|&x| x <= MAX_LAYOUT_WORDS)
                        .ok_or_else(|| too_big(program, cl))?;
                    off_bits = end * WORD_BITS;
                }
            }
        }
        let cell_words = off_bits.div_ceil(WORD_BITS);
        let node = &mut program.layouts[l];
        node.children = order;
        node.cell_words = cell_words;
        node.cell_bits = cell_words * WORD_BITS;
        let n = cells(&node.shape);
        let (header, block) = match node.kind {
            LayoutKind::Dense => (0, n.checked_mul(cell_words)),
            LayoutKind::Bitmasked => {
                let h = n.div_ceil(32);
                (h, n.checked_mul(cell_words).and_then(|x| x.checked_add(h)))
            }
            LayoutKind::Pointer { .. } => (0, Some(n)),
            // The list's length word, then its cells.
            LayoutKind::Dynamic => (1, n.checked_mul(cell_words).and_then(|x| x.checked_add(1))),
            // `capacity` slots of key words (one per axis) then the cell.
            LayoutKind::Hash { capacity } => (
                0,
                (capacity as u64).checked_mul(node.shape.len() as u64 + cell_words),
            ),
        };
        node.header_words = header;
        let block = block
            .filter(|&x| x <= MAX_LAYOUT_WORDS)
            .ok_or_else(|| too_big(program, l))?;
        program.layouts[l].block_words = block;
        Ok(block)
    }
    fn preorder(program: &Program, l: LayoutId, out: &mut Vec<LayoutId>) {
        out.push(l);
        for c in &program.layouts[l].children {
            if let LayoutChild::Layout(cl) = *c {
                preorder(program, cl, out);
            }
        }
    }
    let roots: Vec<LayoutId> = program.roots().collect();
    for r in roots {
        let mut end = words(program, r)?;
        let mut tree = Vec::new();
        preorder(program, r, &mut tree);
        for l in tree {
            let node = &program.layouts[l];
            if !node.kind.is_sparse() {
                continue;
            }
            let cw = node.cell_words;
            let image = end;
            end = fits(end.checked_add(cw)).ok_or_else(|| too_big(program, l))?;
            let mut pool = None;
            if let LayoutKind::Pointer { capacity } = node.kind {
                // The owner word stores the cell's coordinate + 1 in 32 bits.
                let coords = (0..node.shape.len())
                    .map(|d| coord_extent(program, l, d))
                    .fold(1u64, |a, x| a.saturating_mul(x));
                if coords >= u32::MAX as u64 {
                    return Err(LayoutError {
                        node: node.node_id.clone(),
                        what: "shape",
                        message: format!(
                            "a pointer node's cells, counted over the whole domain, must be fewer than 2^32 (got {})",
                            coords
                        ),
                    });
                }
                let c = capacity as u64;
                let hint = end;
                let bitmap = hint + 1;
                let owner = bitmap + c.div_ceil(32);
                let data = owner + c;
                end = fits(c.checked_mul(cw).and_then(|x| x.checked_add(data)))
                    .ok_or_else(|| too_big(program, l))?;
                pool = Some(PoolWords {
                    capacity,
                    hint,
                    bitmap,
                    owner,
                    data,
                });
            }
            let mut list = None;
            if let Some(len) = list_len(program, l) {
                let count = end;
                let items = count + 1;
                let chunks = items + len as u64;
                end = fits(chunks.checked_add(len.div_ceil(LIST_CHUNK) as u64))
                    .ok_or_else(|| too_big(program, l))?;
                list = Some(ListWords {
                    len,
                    count,
                    items,
                    chunks,
                });
            }
            let node = &mut program.layouts[l];
            node.image = image;
            node.pool = pool;
            node.list = list;
        }
        program.layouts[r].tree_words = end;
    }
    // Word views sit exactly on their bit_array's block, in its parent's cell.
    for k in 0..program.word_views.len() {
        let (ba, view) = program.word_views[k];
        program.fields[view].offset_in_cell = program.layouts[ba].offset_in_parent * WORD_BITS;
    }
    Ok(())
}

/// Entries of the element list of sparse node `l` (`passes::sparse_list`),
/// or `None` when struct-fors never list its blocks:
/// - `pointer`: one per pool slot; `hash`: one per table slot;
/// - `bitmasked` / `dynamic` with only dense nodes above: one per block
///   (cell of the parent over the whole domain; 1 at the root). Deeper
///   ones are iterated through the pointer or hash node above them.
pub fn list_len(program: &Program, l: LayoutId) -> Option<u32> {
    let node = &program.layouts[l];
    match node.kind {
        LayoutKind::Pointer { capacity } | LayoutKind::Hash { capacity } => Some(capacity),
        LayoutKind::Bitmasked | LayoutKind::Dynamic => {
            let mut a = node.parent;
            while let Some(p) = a {
                if program.layouts[p].kind != LayoutKind::Dense {
                    return None;
                }
                a = program.layouts[p].parent;
            }
            let blocks = match node.parent {
                None => 1,
                Some(p) => (0..node.shape.len())
                    .map(|d| coord_extent(program, p, d))
                    .fold(1u64, |a, x| a.saturating_mul(x)),
            };
            u32::try_from(blocks).ok()
        }
        LayoutKind::Dense => None,
    }
}

/// Sizes a `bit_struct` or `bit_array` node: its whole block is one 32-bit
/// word. A bit_struct's fields follow each other bit by bit (components of
/// one field adjacent, no padding); a bit_array's cells are its one field's
/// element wide, cell `k` at bit `k * width`. Anything that does not fit is
/// an error naming the node and the bit count, never a silent spill.
fn packed_words(program: &mut Program, l: LayoutId) -> Result<u64, LayoutError> {
    let node = &program.layouts[l];
    let err = |message: String| LayoutError {
        node: node.node_id.clone(),
        what: "cells",
        message,
    };
    let kind = node.packing.node_kind();
    let mut fields = Vec::new();
    for c in &node.children {
        match *c {
            LayoutChild::Field(f) => fields.push(f),
            LayoutChild::Layout(cl) => {
                return Err(err(format!(
                    "a {} holds fields only, but layout node '{}' is wired to its cells",
                    kind, program.layouts[cl].node_id
                )))
            }
        }
    }
    let n: u64 = node.shape.iter().map(|&s| s as u64).product();
    let parts: Vec<String> = fields
        .iter()
        .map(|&f| {
            let fd = &program.fields[f];
            let b = fd.storage.component_bits();
            match (fd.storage, fd.ty.components()) {
                (Storage::Shared(s), c) => format!("'{}' {}+{}x{}", fd.name, s.exp, c, b),
                (_, 1) => format!("'{}' {}", fd.name, b),
                (_, c) => format!("'{}' {}x{}", fd.name, c, b),
            }
        })
        .collect();
    let (cell_bits, total) = match node.packing {
        Packing::BitStruct => {
            // Components packed without the power-of-two stride padding
            // (a whole element always fits the word here).
            let total: u64 = fields
                .iter()
                .map(|&f| {
                    let fd = &program.fields[f];
                    match fd.storage {
                        Storage::Shared(s) => s.bits() as u64,
                        st => fd.ty.components() as u64 * st.component_bits(),
                    }
                })
                .sum();
            (WORD_BITS, total)
        }
        _ => {
            if fields.len() != 1 {
                return Err(err(format!(
                    "a bit_array packs exactly one field, but {} are wired to its cells",
                    fields.len()
                )));
            }
            let fd = &program.fields[fields[0]];
            if fd.ty.components() != 1 || fd.storage == Storage::Word {
                return Err(err(format!(
                    "a bit_array packs one scalar field with quantized storage (e.g. uint1), but '{}' is a {} with {} storage",
                    fd.name,
                    fd.ty,
                    fd.storage.name()
                )));
            }
            let b = fd.storage.component_bits();
            (b, n * b)
        }
    };
    if total > WORD_BITS {
        let what = match node.packing {
            Packing::BitStruct => format!("its fields need {} bits ({})", total, parts.join(" + ")),
            _ => {
                let fd = &program.fields[fields[0]];
                let q = fd.storage.name();
                format!(
                    "its {} cells of {} bits ('{}', {}) need {} bits",
                    n,
                    fd.storage.component_bits(),
                    fd.name,
                    q,
                    total
                )
            }
        };
        return Err(err(format!(
            "a {} packs into one 32-bit word, but {}",
            kind, what
        )));
    }
    let mut off = 0u64;
    for &f in &fields {
        program.fields[f].offset_in_cell = off;
        if node.packing == Packing::BitStruct {
            off += program.fields[f].element_bits();
        }
    }
    let node = &mut program.layouts[l];
    node.cell_bits = cell_bits;
    node.cell_words = cell_bits / WORD_BITS;
    node.header_words = 0;
    node.block_words = 1;
    Ok(1)
}

/// Cells of `l` along axis `d` over the whole domain (the product of the
/// extents from the root down to `l`): the range of a cell's coordinate.
pub fn coord_extent(program: &Program, mut l: LayoutId, d: usize) -> u64 {
    let mut n = 1u64;
    loop {
        let node = &program.layouts[l];
        n = n.saturating_mul(node.shape[d] as u64);
        match node.parent {
            Some(p) => l = p,
            None => return n,
        }
    }
}

/// Root layout node of `l` (the node that owns the buffer).
pub fn root_of(program: &Program, mut l: LayoutId) -> LayoutId {
    while let Some(p) = program.layouts[l].parent {
        l = p;
    }
    l
}

/// Total words of a root's buffer.
pub fn root_words(program: &Program, root: LayoutId) -> u64 {
    program.layouts[root].tree_words
}

/// Words of every kind in one root buffer, for `weft check` / `weft bench`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryReport {
    /// The whole buffer.
    pub total_words: u64,
    /// What a dense layout of the same logical fields would take.
    pub dense_words: u64,
}

/// One line per layout tree: its buffer and what dense storage of the same
/// fields would take (for `weft check` and `weft bench`).
pub fn memory_lines(program: &Program) -> Vec<String> {
    let mib = |w: u64| w as f64 * 4.0 / (1024.0 * 1024.0);
    program
        .roots()
        .map(|r| {
            let m = memory_report(program, r);
            let sparse = program
                .layouts
                .iter()
                .any(|(l, n)| n.kind.is_sparse() && root_of(program, l) == r);
            let mut line = format!(
                "layout tree '{}': {} words ({:.3} MiB)",
                program.layouts[r].node_id,
                m.total_words,
                mib(m.total_words)
            );
            // A view's image and helper fields are system memory: say so.
            if let Some(v) = program.view_kernels.iter().find(|v| {
                std::iter::once(v.image)
                    .chain(v.scratch.iter().copied())
                    .any(|f| program.fields[f].layout == r)
            }) {
                line += &format!(" (system: drawn by view '{}')", v.node_id);
            }
            if sparse {
                line += &format!(
                    ", dense equivalent {} words ({:.3} MiB, {:.1}x)",
                    m.dense_words,
                    mib(m.dense_words),
                    m.dense_words as f64 / m.total_words.max(1) as f64
                );
            }
            line
        })
        .collect()
}

/// The buffer size of `root` next to what the same fields would need dense.
pub fn memory_report(program: &Program, root: LayoutId) -> MemoryReport {
    let dense_words = program
        .fields
        .iter()
        .filter(|(h, f)| {
            root_of(program, f.layout) == root && !program.word_views.iter().any(|v| v.1 == *h)
        })
        .map(|(_, f)| f.cells() * f.element_words() as u64)
        .sum();
    MemoryReport {
        total_words: root_words(program, root),
        dense_words,
    }
}

/// Host reading of `levels` (root first): the word address of the cell at
/// the last level (0 for no level) and whether they are all active.
pub fn read_levels(levels: &[LevelPlan], index: &[u32], words: &[u32]) -> (u64, bool) {
    let mut cell = 0u64;
    let mut active = true;
    for (k, level) in levels.iter().enumerate() {
        let block = if k == 0 {
            0
        } else {
            cell + level.offset_bits / WORD_BITS
        };
        let lin = AddressPlan::cell_in_block(level, index);
        let cw = level.cell_bits / WORD_BITS;
        cell = match level.kind {
            LayoutKind::Dense => block + lin * cw,
            LayoutKind::Bitmasked => {
                active &= words[(block + lin / 32) as usize] >> (lin % 32) & 1 != 0;
                block + level.header_words + lin * cw
            }
            LayoutKind::Dynamic => {
                active &= lin < words[block as usize] as u64;
                block + level.header_words + lin * cw
            }
            LayoutKind::Hash { .. } => match AddressPlan::hash_find(level, index, words) {
                Some(slot) => slot,
                None => {
                    active = false;
                    level.image
                }
            },
            LayoutKind::Pointer { .. } => {
                let r = words[(block + lin) as usize] as u64;
                active &= r != 0;
                let pool = level.pool.expect("pointer levels have a pool");
                if r == 0 {
                    level.image
                } else {
                    pool.data + (r - 1) * cw
                }
            }
        };
    }
    (cell, active)
}

/// Use of the lists of `dynamic` node `l`, read from its root's `words`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListUsage {
    /// Lists (one per cell of the parent) whose enclosing levels are active.
    pub lists: u64,
    /// Elements in use over those lists (each length capped at `capacity`).
    pub elements: u64,
    /// Cells of one list.
    pub capacity: u64,
    /// The longest list's length.
    pub longest: u64,
}

/// Lists a live read of `dynamic_usage` walks at most.
pub const MAX_LISTS_READ: u64 = 1 << 20;

/// The lists of `dynamic` node `l` as the app's memory readout shows them:
/// every list's length word (the block's first word), for each cell of the
/// parent whose levels are active. `None` for other nodes, and for more
/// than `MAX_LISTS_READ` lists (a dynamic node under a huge sparse domain).
pub fn dynamic_usage(program: &Program, l: LayoutId, words: &[u32]) -> Option<ListUsage> {
    let node = &program.layouts[l];
    if node.kind != LayoutKind::Dynamic {
        return None;
    }
    let levels = level_plans(program, l);
    let (last, above) = levels.split_last().expect("the node's own level");
    let extents: Vec<u32> = match node.parent {
        None => vec![1; node.shape.len()],
        Some(p) => (0..node.shape.len())
            .map(|d| u32::try_from(coord_extent(program, p, d)).ok())
            .collect::<Option<_>>()?,
    };
    let lists: u64 = extents.iter().map(|&e| e as u64).product();
    if lists > MAX_LISTS_READ {
        return None;
    }
    let capacity: u64 = node.shape.iter().map(|&s| s as u64).product();
    let mut out = ListUsage {
        lists: 0,
        elements: 0,
        capacity,
        longest: 0,
    };
    for_each_cell(&extents, |c| {
        let first: Vec<u32> = c.iter().zip(&node.shape).map(|(&i, &s)| i * s).collect();
        let (cell, active) = read_levels(above, &first, words);
        if !active {
            return;
        }
        let block = if above.is_empty() {
            0
        } else {
            cell + last.offset_bits / WORD_BITS
        };
        let len = (words[block as usize] as u64).min(capacity);
        out.lists += 1;
        out.elements += len;
        out.longest = out.longest.max(len);
    });
    Some(out)
}

/// Pool slots of pointer node `l` in use, counted in its root's `words`.
pub fn pool_in_use(program: &Program, l: LayoutId, words: &[u32]) -> u32 {
    let Some(pool) = program.layouts[l].pool else {
        return 0;
    };
    (0..pool.capacity as u64)
        .filter(|&s| words[(pool.bitmap + s / 32) as usize] >> (s % 32) & 1 != 0)
        .count() as u32
}

/// The pool of layout node `l` as the app's memory readout shows it, read
/// from its root's `words`: (units in use, capacity, words per unit) for a
/// `pointer` node's blocks and a `hash` root's slots; `None` for other nodes.
pub fn pool_usage(program: &Program, l: LayoutId, words: &[u32]) -> Option<(u32, u32, u64)> {
    let node = &program.layouts[l];
    match node.kind {
        LayoutKind::Pointer { .. } => node.pool.map(|pool| {
            (
                pool_in_use(program, l, words),
                pool.capacity,
                node.cell_words,
            )
        }),
        LayoutKind::Hash { capacity } => Some((
            hash_in_use(program, l, words),
            capacity,
            node.shape.len() as u64 + node.cell_words,
        )),
        _ => None,
    }
}

/// Live entries of hash root `l` (slots holding a key, tombstones not
/// counted), counted in its `words`; 0 for other nodes.
pub fn hash_in_use(program: &Program, l: LayoutId, words: &[u32]) -> u32 {
    let node = &program.layouts[l];
    let LayoutKind::Hash { capacity } = node.kind else {
        return 0;
    };
    let keys = node.shape.len() as u64;
    let stride = keys + node.cell_bits / WORD_BITS;
    (0..capacity as u64)
        .filter(|s| {
            let k = words[(s * stride) as usize];
            k != 0 && k != HASH_TOMBSTONE
        })
        .count() as u32
}

/// Sparse children found by scanning more than this many word ranges of a
/// cell are not checked by garbage collection: such blocks are only freed
/// by `deactivate`.
pub const MAX_ACTIVITY_RANGES: usize = 64;

/// Word ranges (offset in the cell, length) whose words are all zero exactly
/// when no sparse child inside a cell of `l` is active: bitmask headers and
/// pointer reference blocks, found through dense children.
pub fn activity_ranges(p: &Program, l: LayoutId) -> Vec<(u64, u64)> {
    fn walk(p: &Program, l: LayoutId, at: u64, out: &mut Vec<(u64, u64)>) {
        for c in &p.layouts[l].children {
            let LayoutChild::Layout(cl) = *c else {
                continue;
            };
            let child = &p.layouts[cl];
            let block = at + child.offset_in_parent;
            match child.kind {
                LayoutKind::Bitmasked => out.push((block, child.header_words)),
                LayoutKind::Pointer { .. } => out.push((block, child.block_words)),
                LayoutKind::Dynamic => out.push((block, 1)),
                // Hash nodes are roots, never children.
                LayoutKind::Hash { .. } => {}
                LayoutKind::Dense => {
                    let n: u64 = child.shape.iter().map(|&s| s as u64).product();
                    for k in 0..n {
                        if out.len() > MAX_ACTIVITY_RANGES {
                            return;
                        }
                        walk(p, cl, block + k * child.cell_words, out);
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(p, l, 0, &mut out);
    out
}

/// The initial words of a root buffer: every field at its constant initial
/// value (quantized constants encoded, as a host write would; data
/// initialisers are written afterwards through the plan), nothing active,
/// every sparse node's initial image and pool slot an initial cell.
pub fn initial_words(program: &Program, root: LayoutId) -> Vec<u32> {
    /// A field's constant as (bit offset in the element, bit width, code)
    /// pieces; empty when every piece is zero (already there).
    fn pieces(fd: &Field) -> Vec<(u64, u32, u32)> {
        let FieldInit::Constant(w) = &fd.init else {
            return vec![];
        };
        let out: Vec<(u64, u32, u32)> = match fd.storage {
            Storage::Word => w
                .iter()
                .enumerate()
                .map(|(k, &x)| (k as u64 * WORD_BITS, 32, x))
                .collect(),
            Storage::Quant(q) => w
                .iter()
                .enumerate()
                .map(|(k, &x)| (k as u64 * fd.component_stride_bits(), q.bits(), q.encode(x)))
                .collect(),
            Storage::Shared(s) => vec![(0, s.bits(), s.encode(w))],
        };
        if out.iter().all(|p| p.2 == 0) {
            vec![]
        } else {
            out
        }
    }
    struct Filler<'a> {
        p: &'a Program,
        pieces: Vec<Vec<(u64, u32, u32)>>,
    }
    impl Filler<'_> {
        fn cell(&self, l: LayoutId, at: u64, out: &mut [u32]) {
            for c in &self.p.layouts[l].children {
                match *c {
                    LayoutChild::Field(f) => {
                        let first = at + self.p.fields[f].offset_in_cell;
                        for &(off, bits, code) in &self.pieces[f.index()] {
                            let bit = first + off;
                            let (w, sh) = ((bit / WORD_BITS) as usize, bit % WORD_BITS);
                            let m = super::quant::mask(bits) << sh;
                            out[w] = (out[w] & !m) | ((code << sh) & m);
                        }
                    }
                    LayoutChild::Layout(cl) => self.block(
                        cl,
                        at + self.p.layouts[cl].offset_in_parent * WORD_BITS,
                        out,
                    ),
                }
            }
        }
        fn block(&self, l: LayoutId, at: u64, out: &mut [u32]) {
            let node = &self.p.layouts[l];
            if matches!(node.kind, LayoutKind::Pointer { .. }) {
                return; // null references
            }
            if !self.has_pieces(l) {
                return;
            }
            if let LayoutKind::Hash { capacity } = node.kind {
                // Empty keys; every slot's cell holds initial values.
                let keys = node.shape.len() as u64;
                for s in 0..capacity as u64 {
                    self.cell(
                        l,
                        at + (s * (keys + node.cell_words) + keys) * WORD_BITS,
                        out,
                    );
                }
                return;
            }
            let n: u64 = node.shape.iter().map(|&s| s as u64).product();
            for k in 0..n {
                self.cell(
                    l,
                    at + node.header_words * WORD_BITS + k * node.cell_bits,
                    out,
                );
            }
        }
        /// Whether anything below `l` (fields of its cells and of dense
        /// descendants) has a non-zero initial code.
        fn has_pieces(&self, l: LayoutId) -> bool {
            self.p.layouts[l].children.iter().any(|c| match *c {
                LayoutChild::Field(f) => !self.pieces[f.index()].is_empty(),
                LayoutChild::Layout(cl) => {
                    !matches!(self.p.layouts[cl].kind, LayoutKind::Pointer { .. })
                        && self.has_pieces(cl)
                }
            })
        }
    }
    let fill = Filler {
        p: program,
        pieces: program.fields.iter().map(|(_, f)| pieces(f)).collect(),
    };
    let mut out = vec![0u32; root_words(program, root) as usize];
    fill.block(root, 0, &mut out);
    for (l, node) in program.layouts.iter() {
        if !node.kind.is_sparse() || root_of(program, l) != root {
            continue;
        }
        fill.cell(l, node.image * WORD_BITS, &mut out);
        if let Some(pool) = node.pool {
            for s in 0..pool.capacity as u64 {
                fill.cell(l, (pool.data + s * node.cell_words) * WORD_BITS, &mut out);
            }
            let tail = pool.capacity % 32;
            if tail != 0 {
                out[(pool.bitmap + pool.capacity as u64 / 32) as usize] = !0u32 << tail;
            }
        }
    }
    out
}

/// One element of a block in `AddressPlan::for_each_block`.
#[derive(Clone, Copy, Debug)]
pub struct BlockElement {
    /// Row-major offset from the block's first element in the whole field.
    pub lin: usize,
    /// Word offset from the block's first element's address.
    pub word: u64,
    /// Index offset from the block's first element (unused axes 0).
    pub local: [u32; 3],
}

/// Calls `f(index)` for every index of `shape` in row-major order.
fn for_each_cell(shape: &[u32], mut f: impl FnMut(&[u32])) {
    if shape.contains(&0) {
        return;
    }
    let mut idx = vec![0u32; shape.len()];
    loop {
        f(&idx);
        let mut d = shape.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// The key words of `index`'s cell at a hash `level` (a root): its
/// coordinate + 1 per axis, so that 0 marks an empty slot.
pub fn hash_keys(level: &LevelPlan, index: &[u32]) -> Vec<u32> {
    level
        .axes
        .iter()
        .zip(index)
        .map(|(step, &i)| (i as u64 / step.divisor) as u32 + 1)
        .collect()
}

/// Multiplier of the hash of a key word (a 32-bit odd constant from the
/// golden ratio, as in Fibonacci hashing).
pub const HASH_MUL: u32 = 0x9E37_79B1;

/// First slot probed for `keys`: `h = (h ^ k) * HASH_MUL` over the key
/// words, then `h ^ (h >> 16)`, modulo the capacity. The IR emitted by
/// `lower::sparse` computes exactly this.
pub fn hash_start(keys: &[u32], capacity: u32) -> u32 {
    let mut h = 0u32;
    for &k in keys {
        h = (h ^ k).wrapping_mul(HASH_MUL);
    }
    (h ^ (h >> 16)) % capacity
}

/// How one axis of the logical index contributes to one level's cell index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AxisStep {
    /// The logical index is divided by this first (the extent of all levels
    /// below on this axis; 1 at the field's own level).
    pub divisor: u64,
    /// Then taken modulo this (the level's extent), except at the root,
    /// where the quotient is already in range.
    pub modulus: Option<u32>,
    /// The level's extent on this axis (row-major stride factor).
    pub extent: u32,
    /// Cells of this level along the axis over the whole domain: the range
    /// of `index / divisor`, the level's global coordinate.
    pub coord_extent: u64,
}

/// One layout level on the path from the root to the field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LevelPlan {
    /// The layout node at this level and its kind (what a lowering dispatches on).
    pub node: LayoutId,
    pub kind: LayoutKind,
    /// One step per logical axis, in axis order (last axis fastest).
    pub axes: Vec<AxisStep>,
    /// Bits of one cell at this level.
    pub cell_bits: u64,
    /// Bit offset of this level's block inside its parent's cell (0 at the root).
    pub offset_bits: u64,
    /// Words before the cells of a block (activity bits).
    pub header_words: u64,
    /// Sparse levels: word address of the initial cell image.
    pub image: u64,
    /// Pointer levels: the pool.
    pub pool: Option<PoolWords>,
}

/// Where every element of one field lives: the answer to "where is element
/// (i, j) of field X stored" for lowering, host copies, dumps and views.
///
/// The bit address of component `c` of the element at logical index `I` is
/// `base_bits + Σ_levels (row-major cell index at that level) × cell_bits +
/// offset_bits + c × component_bits`, inside the buffer of `root`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddressPlan {
    pub field: FieldId,
    pub root: LayoutId,
    /// Bit offset of the field's component 0 inside its own layout cell.
    pub base_bits: u64,
    /// Root first.
    pub levels: Vec<LevelPlan>,
    pub storage: Storage,
    /// Bits from one component to the next in storage (the stride, see
    /// `Field::component_stride_bits`).
    pub component_bits: u64,
    /// Stored components per element (`Field::storage_components`: a
    /// 64-bit component is two).
    pub components: usize,
}

/// The levels from the root down to layout node `bottom` (root first), for
/// an index counted in cells of `bottom` (a field on `bottom` has exactly
/// that index; system kernels use it to reach a node's cells directly).
pub fn level_plans(p: &Program, bottom: LayoutId) -> Vec<LevelPlan> {
    let mut path = vec![bottom];
    while let Some(parent) = p.layouts[*path.last().expect("non-empty")].parent {
        path.push(parent);
    }
    path.reverse();
    let dims = p.layouts[bottom].shape.len();
    path.iter()
        .enumerate()
        .map(|(lvl, &l)| {
            let node = &p.layouts[l];
            let axes = (0..dims)
                .map(|d| AxisStep {
                    divisor: path[lvl + 1..]
                        .iter()
                        .map(|&m| p.layouts[m].shape[d] as u64)
                        .product(),
                    modulus: (lvl > 0).then_some(node.shape[d]),
                    extent: node.shape[d],
                    coord_extent: coord_extent(p, l, d),
                })
                .collect();
            LevelPlan {
                node: l,
                kind: node.kind,
                axes,
                cell_bits: node.cell_bits,
                offset_bits: if lvl > 0 {
                    node.offset_in_parent * WORD_BITS
                } else {
                    0
                },
                header_words: node.header_words,
                image: node.image,
                pool: node.pool,
            }
        })
        .collect()
}

impl AddressPlan {
    pub fn new(p: &Program, field: FieldId) -> AddressPlan {
        let fd = &p.fields[field];
        let levels = level_plans(p, fd.layout);
        AddressPlan {
            field,
            root: levels[0].node,
            base_bits: fd.offset_in_cell,
            levels,
            storage: fd.storage,
            component_bits: fd.component_stride_bits(),
            components: fd.storage_components(),
        }
    }
    /// Whether every component occupies whole words (true for `Storage::Word`),
    /// so that word addresses below are exact.
    pub fn word_aligned(&self) -> bool {
        self.component_bits.is_multiple_of(WORD_BITS)
            && self.base_bits.is_multiple_of(WORD_BITS)
            && self.levels.iter().all(|l| {
                l.cell_bits.is_multiple_of(WORD_BITS) && l.offset_bits.is_multiple_of(WORD_BITS)
            })
    }

    /// Whether any level can be inactive (addresses then depend on the
    /// buffer's contents: use [`AddressPlan::read_address`] /
    /// [`AddressPlan::activate`] instead of `bit_address`).
    pub fn is_sparse(&self) -> bool {
        self.levels.iter().any(|l| l.kind.is_sparse())
    }

    /// The level whose element list a struct-for over a sparse field runs
    /// over (`passes::sparse_iter` documents the choice): the innermost
    /// pointer level, else the outermost sparse level.
    pub fn list_level(&self) -> usize {
        if let Some(p) = self
            .levels
            .iter()
            .rposition(|l| matches!(l.kind, LayoutKind::Pointer { .. }))
        {
            return p;
        }
        self.levels
            .iter()
            .position(|l| l.kind.is_sparse())
            .expect("a sparse plan has a sparse level")
    }

    /// Row-major cell index of `index` inside its block at `level`.
    pub fn cell_in_block(level: &LevelPlan, index: &[u32]) -> u64 {
        let mut lin = 0u64;
        for (step, &i) in level.axes.iter().zip(index) {
            let mut x = i as u64 / step.divisor;
            if let Some(m) = step.modulus {
                x %= m as u64;
            }
            lin = lin * step.extent as u64 + x;
        }
        lin
    }

    /// Row-major global coordinate of `index`'s cell at `level` (what a
    /// pool slot's owner word stores, minus one).
    pub fn coord(level: &LevelPlan, index: &[u32]) -> u64 {
        level.axes.iter().zip(index).fold(0u64, |acc, (step, &i)| {
            acc * step.coord_extent + i as u64 / step.divisor
        })
    }

    /// Host reading: the word address of component 0 and whether every
    /// level is active. An inactive pointer level reads through the node's
    /// initial image, so the address always holds the logical value.
    pub fn read_address(&self, index: &[u32], words: &[u32]) -> (u64, bool) {
        let (cell, active) = self.read_levels(self.levels.len(), index, words);
        (cell + self.base_bits / WORD_BITS, active)
    }

    /// The levels below the last sparse one (all dense): how many, counted
    /// from the root. Elements in one cell of that level share its walk.
    pub fn sparse_depth(&self) -> usize {
        self.levels
            .iter()
            .rposition(|l| !matches!(l.kind, LayoutKind::Dense))
            .map_or(0, |k| k + 1)
    }

    /// Cell of the last sparse level holding `index` (`index / divisor` per
    /// axis): elements with equal keys share `read_levels(sparse_depth())`.
    pub fn sparse_key(&self, index: &[u32]) -> [u64; 3] {
        let mut key = [0u64; 3];
        if let Some(level) = self.sparse_depth().checked_sub(1).map(|k| &self.levels[k]) {
            for ((k, step), &i) in key.iter_mut().zip(&level.axes).zip(index) {
                *k = i as u64 / step.divisor;
            }
        }
        key
    }

    /// Host reading of the first `depth` levels: the word address of the
    /// cell at level `depth - 1` (0 for no level) and whether they are all
    /// active.
    pub fn read_levels(&self, depth: usize, index: &[u32], words: &[u32]) -> (u64, bool) {
        read_levels(&self.levels[..depth], index, words)
    }

    /// Host walk over every element of a field on a sparse tree, one cell
    /// of the last sparse level (a "block" of elements) at a time, so the
    /// sparse levels are walked once per block instead of once per element.
    /// `f(first, first_lin, (address, active), table)` gets the logical
    /// index of the block's first element, its row-major position, its
    /// word address and whether the sparse levels above it are active, and per element of the block `(row-major offset from
    /// first in the field, word offset from the cell, index offset)`.
    pub fn for_each_block(
        &self,
        shape: &[u32],
        words: &[u32],
        mut f: impl FnMut(&[u32], usize, (u64, bool), &[BlockElement]),
    ) {
        let depth = self.sparse_depth();
        let dims = shape.len();
        let span: Vec<u32> = match depth.checked_sub(1) {
            Some(k) => self.levels[k]
                .axes
                .iter()
                .map(|a| a.divisor as u32)
                .collect(),
            None => shape.to_vec(),
        };
        let mut strides = vec![1usize; dims];
        for d in (0..dims.saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * shape[d + 1] as usize;
        }
        let mut table = Vec::new();
        let base = self.dense_rest(depth, 0, &vec![0; dims]);
        for_each_cell(&span, |local| {
            let lin = local
                .iter()
                .zip(&strides)
                .map(|(&i, &s)| i as usize * s)
                .sum();
            let word = self.dense_rest(depth, 0, local) - base;
            let mut at = [0u32; 3];
            at[..dims].copy_from_slice(local);
            table.push(BlockElement {
                lin,
                word,
                local: at,
            });
        });
        let blocks: Vec<u32> = shape.iter().zip(&span).map(|(&s, &d)| s / d).collect();
        for_each_cell(&blocks, |b| {
            let first: Vec<u32> = b.iter().zip(&span).map(|(&i, &d)| i * d).collect();
            let (cell, active) = self.read_levels(depth, &first, words);
            let lin = first
                .iter()
                .zip(&strides)
                .map(|(&i, &s)| i as usize * s)
                .sum();
            f(&first, lin, (cell + base, active), &table);
        });
    }

    /// Host walk over the *active* elements of a field under a `hash` root
    /// only, slot by slot (so that a domain of 2^60 elements costs what the
    /// table holds): `f(index, word address of component 0)` per active
    /// element. Returns `false` (calling nothing) when the root is no hash.
    pub fn for_each_active_in_table(&self, words: &[u32], mut f: impl FnMut(&[u32], u64)) -> bool {
        let LayoutKind::Hash { capacity } = self.levels[0].kind else {
            return false;
        };
        let level = &self.levels[0];
        let nk = level.axes.len();
        let stride = nk as u64 + level.cell_bits / WORD_BITS;
        let span: Vec<u32> = level.axes.iter().map(|a| a.divisor as u32).collect();
        let mut idx = vec![0u32; nk];
        for s in 0..capacity as u64 {
            let keys = &words[(s * stride) as usize..(s * stride) as usize + nk];
            if keys[0] == 0 || keys[0] == HASH_TOMBSTONE || keys.contains(&0) {
                continue;
            }
            for_each_cell(&span, |local| {
                for d in 0..nk {
                    idx[d] = (keys[d] - 1) * span[d] + local[d];
                }
                let (addr, active) = self.read_address(&idx, words);
                if active {
                    f(&idx, addr);
                }
            });
        }
        true
    }

    /// Host reading at bit precision (quantized fields, `bit_array` cells
    /// below sparse levels): the bit address of component 0 and whether
    /// every level is active. Inactive levels read their initial image.
    pub fn read_bit_address(&self, index: &[u32], words: &[u32]) -> (u64, bool) {
        let depth = self.sparse_depth();
        let (cell, active) = self.read_levels(depth, index, words);
        let mut bit = cell * WORD_BITS;
        for (k, level) in self.levels.iter().enumerate().skip(depth) {
            let block = if k == 0 { 0 } else { bit + level.offset_bits };
            bit = block + Self::cell_in_block(level, index) * level.cell_bits;
        }
        (bit + self.base_bits, active)
    }

    /// Finishes `read_address` below level `depth - 1` (dense levels only)
    /// from that level's cell address `cell`.
    pub fn dense_rest(&self, depth: usize, cell: u64, index: &[u32]) -> u64 {
        let mut cell = cell;
        for (k, level) in self.levels.iter().enumerate().skip(depth) {
            debug_assert!(matches!(level.kind, LayoutKind::Dense));
            let block = if k == 0 {
                0
            } else {
                cell + level.offset_bits / WORD_BITS
            };
            cell = block + Self::cell_in_block(level, index) * (level.cell_bits / WORD_BITS);
        }
        cell + self.base_bits / WORD_BITS
    }

    /// Host writing: activates every level on the way (allocating pool
    /// slots, lowest free first) and returns the word address of component
    /// 0; `Err(layout)` when that pointer node's pool is full.
    pub fn activate(&self, index: &[u32], words: &mut [u32]) -> Result<u64, LayoutId> {
        let mut cell = 0u64;
        for (k, level) in self.levels.iter().enumerate() {
            let block = if k == 0 {
                0
            } else {
                cell + level.offset_bits / WORD_BITS
            };
            let lin = Self::cell_in_block(level, index);
            let cw = level.cell_bits / WORD_BITS;
            cell = match level.kind {
                LayoutKind::Dense => block + lin * cw,
                LayoutKind::Bitmasked => {
                    words[(block + lin / 32) as usize] |= 1 << (lin % 32);
                    block + level.header_words + lin * cw
                }
                LayoutKind::Dynamic => {
                    let len = &mut words[block as usize];
                    *len = (*len).max(lin as u32 + 1);
                    block + level.header_words + lin * cw
                }
                LayoutKind::Hash { capacity } => match Self::hash_find(level, index, words) {
                    Some(cell) => cell,
                    None => {
                        let keys = hash_keys(level, index);
                        let stride = keys.len() as u64 + cw;
                        let mut s = hash_start(&keys, capacity);
                        let mut got = None;
                        for _ in 0..capacity {
                            let at = (s as u64 * stride) as usize;
                            if words[at] == 0 {
                                words[at..at + keys.len()].copy_from_slice(&keys);
                                got = Some(at as u64 + keys.len() as u64);
                                break;
                            }
                            s = (s + 1) % capacity;
                        }
                        got.ok_or(level.node)?
                    }
                },
                LayoutKind::Pointer { .. } => {
                    let pool = level.pool.expect("pointer levels have a pool");
                    let at = (block + lin) as usize;
                    if words[at] == 0 {
                        let slot = (0..pool.capacity as u64)
                            .find(|&s| words[(pool.bitmap + s / 32) as usize] >> (s % 32) & 1 == 0)
                            .ok_or(level.node)?;
                        words[(pool.bitmap + slot / 32) as usize] |= 1 << (slot % 32);
                        words[(pool.owner + slot) as usize] = Self::coord(level, index) as u32 + 1;
                        words[at] = slot as u32 + 1;
                    }
                    pool.data + (words[at] as u64 - 1) * cw
                }
            };
        }
        Ok(cell + self.base_bits / WORD_BITS)
    }

    /// Host probe of a hash level (a root): the word address of the cell of
    /// `index`, when its slot exists.
    fn hash_find(level: &LevelPlan, index: &[u32], words: &[u32]) -> Option<u64> {
        let LayoutKind::Hash { capacity } = level.kind else {
            return None;
        };
        let keys = hash_keys(level, index);
        let stride = keys.len() as u64 + level.cell_bits / WORD_BITS;
        let mut s = hash_start(&keys, capacity);
        for _ in 0..capacity {
            let at = (s as u64 * stride) as usize;
            if words[at] == 0 {
                return None;
            }
            if words[at..at + keys.len()] == keys[..] {
                return Some(at as u64 + keys.len() as u64);
            }
            s = (s + 1) % capacity;
        }
        None
    }

    /// Bit address of component 0 of the element at logical `index` in a
    /// dense-only tree (see `is_sparse`).
    pub fn bit_address(&self, index: &[u32]) -> u64 {
        debug_assert!(!self.is_sparse(), "sparse addresses depend on the buffer");
        let mut addr = self.base_bits;
        for level in &self.levels {
            let mut lin = 0u64;
            for (step, &i) in level.axes.iter().zip(index) {
                let mut x = i as u64 / step.divisor;
                if let Some(m) = step.modulus {
                    x %= m as u64;
                }
                lin = lin * step.extent as u64 + x;
            }
            addr += lin * level.cell_bits + level.offset_bits;
        }
        addr
    }

    /// Word address of component 0 of the element at logical `index`.
    pub fn word_address(&self, index: &[u32]) -> u64 {
        self.bit_address(index) / WORD_BITS
    }

    /// Word address of component `c` of the element at logical `index`.
    pub fn component_word(&self, index: &[u32], c: usize) -> u64 {
        (self.bit_address(index) + c as u64 * self.component_bits) / WORD_BITS
    }

    /// Bit address of component `c` of the element at logical `index`.
    pub fn component_bit(&self, index: &[u32], c: usize) -> u64 {
        self.bit_address(index) + c as u64 * self.component_bits
    }

    /// Words between component `c` and component 0 of one element.
    pub fn component_word_offset(&self, c: usize) -> u64 {
        c as u64 * self.component_bits / WORD_BITS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Type;

    /// A root `a` of shape [4, 6] holding field `x` (vec2) and a child block
    /// `b` of shape [2, 3] holding field `y` (f32): the addresses are checked
    /// against a hand-computed layout, not against the plan's own formula.
    fn two_level() -> (Program, FieldId, FieldId) {
        let mut p = Program::default();
        let a = p
            .layouts
            .append(LayoutNode::new("a", LayoutKind::Dense, vec![4, 6], None));
        let b = p
            .layouts
            .append(LayoutNode::new("b", LayoutKind::Dense, vec![2, 3], Some(a)));
        let field = |name: &str, ty: Type, layout, shape: Vec<u32>| Field {
            name: name.into(),
            ty,
            storage: Storage::Word,
            layout,
            shape,
            offset_in_cell: 0,
            init: FieldInit::Constant(vec![0; ty.components()]),
        };
        let y = p.fields.append(field("y", Type::F32, b, vec![8, 18]));
        let x = p.fields.append(field(
            "x",
            Type::Vector(crate::Scalar::F32, 2),
            a,
            vec![4, 6],
        ));
        p.layouts[a].children = vec![LayoutChild::Layout(b), LayoutChild::Field(x)];
        p.layouts[b].children = vec![LayoutChild::Field(y)];
        compute(&mut p).expect("fits");
        (p, x, y)
    }

    #[test]
    fn sizes_put_fields_before_child_blocks() {
        let (p, x, y) = two_level();
        let a = p.roots().next().unwrap();
        // a's cell: x (2 words) then b's 2*3 cells of 1 word.
        assert_eq!(p.layouts[a].cell_words, 8);
        assert_eq!(p.fields[x].offset_in_cell, 0);
        assert_eq!(p.fields[y].offset_in_cell, 0);
        assert_eq!(root_words(&p, a), 4 * 6 * 8);
        assert_eq!(root_of(&p, p.fields[y].layout), a);
    }

    #[test]
    fn addresses_match_a_hand_computed_layout() {
        let (p, x, y) = two_level();
        let px = AddressPlan::new(&p, x);
        let py = AddressPlan::new(&p, y);
        for i in 0..4u32 {
            for j in 0..6u32 {
                let cell = (i * 6 + j) as u64 * 8;
                assert_eq!(px.word_address(&[i, j]), cell);
                assert_eq!(px.component_word(&[i, j], 1), cell + 1);
            }
        }
        for i in 0..8u32 {
            for j in 0..18u32 {
                let (oi, oj, ii, ij) = (i / 2, j / 3, i % 2, j % 3);
                let expect = (oi * 6 + oj) as u64 * 8 + 2 + (ii * 3 + ij) as u64;
                assert_eq!(py.word_address(&[i, j]), expect, "y[{i}, {j}]");
            }
        }
        assert!(px.word_aligned() && py.word_aligned());
        assert_eq!(py.bit_address(&[1, 1]), py.word_address(&[1, 1]) * 32);
    }
}
