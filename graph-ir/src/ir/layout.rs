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
//! from `Type::components()`. Word storage is one 32-bit word per component;
//! quantized storage (`ir::quant`) packs components and fields into words,
//! never letting one component straddle two words, so that one word access
//! (and one compare-exchange) always covers a whole component.

use super::*;

/// Bits in one storage word of a root buffer.
pub const WORD_BITS: u64 = 32;

/// Cap on one layout tree's storage: 2^28 words (1 GiB).
pub const MAX_LAYOUT_WORDS: u64 = 1 << 28;

impl Storage {
    /// Bits one component occupies in its root buffer.
    pub fn component_bits(self) -> u64 {
        match self {
            Storage::Word => WORD_BITS,
            Storage::Quant(q) => q.bits() as u64,
        }
    }
}

impl Field {
    /// Bits from one component to the next: the storage width when the
    /// whole element fits one word, else the width rounded up to a power of
    /// two (which divides 32, so no component straddles a word).
    pub fn component_stride_bits(&self) -> u64 {
        let b = self.storage.component_bits();
        if self.ty.components() as u64 * b <= WORD_BITS {
            b
        } else {
            b.next_power_of_two()
        }
    }
    /// Bits one element (all components) occupies inside its layout cell.
    pub fn element_bits(&self) -> u64 {
        self.ty.components() as u64 * self.component_stride_bits()
    }
    /// Storage words of one element (not the same thing as components once
    /// storage can be narrower than a word).
    pub fn element_words(&self) -> usize {
        self.element_bits().div_ceil(WORD_BITS) as usize
    }
}

/// A layout tree too large for the storage cap; names the layout node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayoutError {
    pub node: String,
    pub message: String,
}

/// Computes every cell size and child offset, root-first, and checks the cap.
///
/// Within a cell, fields come first (in creation order) and child layout
/// blocks after them, so fields on one node are interleaved (array of
/// structures) while separate nodes give separate arrays.
pub fn compute(program: &mut Program) -> Result<(), LayoutError> {
    fn cells(shape: &[u32]) -> u64 {
        shape.iter().fold(1u64, |a, &s| a.saturating_mul(s as u64))
    }
    fn too_big(program: &Program, l: LayoutId) -> LayoutError {
        LayoutError {
            node: program.layouts[l].node_id.clone(),
            message: format!(
                "the layout needs more than the cap of {} words (1 GiB) of storage",
                MAX_LAYOUT_WORDS
            ),
        }
    }
    fn words(program: &mut Program, l: LayoutId) -> Result<u64, LayoutError> {
        match program.layouts[l].kind {
            LayoutKind::Dense => {}
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
                    let cw = words(program, cl)?;
                    let n = cells(&program.layouts[cl].shape);
                    // Child blocks start on a word boundary.
                    let off = off_bits.div_ceil(WORD_BITS);
                    program.layouts[cl].offset_in_parent = off;
                    let end = n
                        .checked_mul(cw)
                        .and_then(|x| x.checked_add(off))
                        .filter(|&x| x <= MAX_LAYOUT_WORDS)
                        .ok_or_else(|| too_big(program, cl))?;
                    off_bits = end * WORD_BITS;
                }
            }
        }
        let cell_words = off_bits.div_ceil(WORD_BITS);
        program.layouts[l].children = order;
        program.layouts[l].cell_words = cell_words;
        Ok(cell_words)
    }
    let roots: Vec<LayoutId> = program.roots().collect();
    for r in roots {
        let cw = words(program, r)?;
        let n = cells(&program.layouts[r].shape);
        if n.checked_mul(cw).is_none_or(|x| x > MAX_LAYOUT_WORDS) {
            return Err(too_big(program, r));
        }
    }
    Ok(())
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
    let l = &program.layouts[root];
    l.shape
        .iter()
        .fold(1u64, |a, &s| a.saturating_mul(s as u64))
        .saturating_mul(l.cell_words)
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
    /// Components per element (`Type::components()`).
    pub components: usize,
}

impl AddressPlan {
    pub fn new(p: &Program, field: FieldId) -> AddressPlan {
        let fd = &p.fields[field];
        let mut path = vec![fd.layout];
        while let Some(parent) = p.layouts[*path.last().expect("non-empty")].parent {
            path.push(parent);
        }
        path.reverse();
        let dims = fd.shape.len();
        let levels = path
            .iter()
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
                    })
                    .collect();
                LevelPlan {
                    node: l,
                    kind: node.kind,
                    axes,
                    cell_bits: node.cell_words * WORD_BITS,
                    offset_bits: if lvl > 0 {
                        node.offset_in_parent * WORD_BITS
                    } else {
                        0
                    },
                }
            })
            .collect();
        AddressPlan {
            field,
            root: path[0],
            base_bits: fd.offset_in_cell,
            levels,
            storage: fd.storage,
            component_bits: fd.component_stride_bits(),
            components: fd.ty.components(),
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

    /// Bit address of component 0 of the element at logical `index`.
    pub fn bit_address(&self, index: &[u32]) -> u64 {
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
        let a = p.layouts.append(LayoutNode {
            node_id: "a".into(),
            kind: LayoutKind::Dense,
            shape: vec![4, 6],
            parent: None,
            children: vec![],
            cell_words: 0,
            offset_in_parent: 0,
        });
        let b = p.layouts.append(LayoutNode {
            node_id: "b".into(),
            kind: LayoutKind::Dense,
            shape: vec![2, 3],
            parent: Some(a),
            children: vec![],
            cell_words: 0,
            offset_in_parent: 0,
        });
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
