//! Activation demotion (Taichi thesis ch. 4): a write into a sparse field
//! at a cell that is known to be active needs no activation.
//!
//! The one definition of "known active", used twice: the state-flow graph
//! (`schedule::sfg`) leaves such writes out of the tree's mask state, and
//! `lower_access` addresses them without activating (`Mode::Read` instead of
//! `Mode::Write`: no bit set, no pool slot claimed, no hash insert).
//!
//! A cell is known active when the kernel is a struct-for over a field G
//! (`Iteration::Field(G)`), the write is in the kernel's entry function at
//! exactly the loop indices (`Arg(0)`, `Arg(1)`, … in order), into a field
//! on G's own layout node with G's shape, and nothing in the kernel
//! deactivates cells of that tree. The struct-for runs its body only for
//! active cells (`passes::sparse_iter`), activity only grows during a
//! launch without deactivation, so the cell the invocation was given is
//! still active when it writes: reading the address is the same address an
//! activating walk would find, and the activating walk would change nothing.
//!
//! Pre: abstract IR (field accesses name their fields; struct-fors are still
//! `Iteration::Field`). Turned off with the rest of the inter-kernel
//! optimiser (`PassOptions::interkernel`, `--no-interkernel`).

use crate::ir::layout::{root_of, AddressPlan};
use crate::ir::*;
use std::collections::BTreeSet;

/// What "known active" needs to know about one kernel.
pub struct KnownActive {
    /// The struct-for's field, when the kernel is one.
    over: Option<FieldId>,
    /// Roots some instruction of the kernel deactivates.
    deactivated: BTreeSet<LayoutId>,
    dims: usize,
    shape: Vec<u32>,
}

impl KnownActive {
    pub fn new(p: &Program, kernel: &Kernel) -> KnownActive {
        let over = match kernel.iteration {
            Iteration::Field(g) => Some(g),
            Iteration::Range(_) => None,
        };
        let mut deactivated = BTreeSet::new();
        for f in std::iter::once(&kernel.entry).chain(kernel.functions.iter().map(|(_, f)| f)) {
            for (_, i) in f.insts.iter() {
                if let InstKind::FieldDeactivate { field, .. } = i.kind {
                    deactivated.insert(root_of(p, p.fields[field].layout));
                }
            }
        }
        KnownActive {
            over,
            deactivated,
            dims: kernel.dims,
            shape: kernel.iteration_shape(p),
        }
    }

    /// Whether `index` is the loop indices themselves, in the entry `f`.
    pub fn own_cell(
        &self,
        p: &Program,
        f: &Function,
        in_entry: bool,
        field: FieldId,
        index: &[InstId],
    ) -> bool {
        in_entry
            && index.len() == self.dims
            && index
                .iter()
                .enumerate()
                .all(|(d, &i)| matches!(f.insts[i].kind, InstKind::Arg(a) if a as usize == d))
            && p.fields[field].shape == self.shape
    }

    /// Whether a write into sparse `field` at `index` (in `f`, the entry
    /// when `in_entry`) hits a cell the struct-for found active.
    pub fn write_is_known_active(
        &self,
        p: &Program,
        f: &Function,
        in_entry: bool,
        field: FieldId,
        index: &[InstId],
    ) -> bool {
        let Some(g) = self.over else {
            return false;
        };
        let plan = AddressPlan::new(p, field);
        plan.is_sparse()
            && p.fields[g].layout == p.fields[field].layout
            && self.own_cell(p, f, in_entry, field, index)
            && !self.deactivated.contains(&plan.root)
    }
}
