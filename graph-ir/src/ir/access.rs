//! Which root buffers a kernel reads and writes, from its IR, and the
//! kernels a set of roots depends on.
//!
//! A root (a layout node without a parent) is the unit of state: fields
//! placed on one tree share its buffer, its sparse masks and pools, so a
//! write to any of them (a store, an atomic, an activation, an append) may
//! change what another reads. Reads are loads, activity and length queries,
//! atomics, and the struct-for a kernel iterates over.
//!
//! Used by bakes of chosen fields (`weft bake --fields`): a cache is stale
//! only when a kernel *upstream* of its roots changed.

use super::{layout, FieldId, Function, InstKind, Iteration, Kernel, KernelId, LayoutId, Program};
use std::collections::BTreeSet;

/// The roots one kernel reads and writes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Access {
    pub reads: BTreeSet<LayoutId>,
    pub writes: BTreeSet<LayoutId>,
}

/// The roots `k` (its entry and helpers) reads and writes.
pub fn of_kernel(program: &Program, k: &Kernel) -> Access {
    let mut a = Access::default();
    let root = |f: FieldId| layout::root_of(program, program.fields[f].layout);
    if let Iteration::Field(f) = k.iteration {
        a.reads.insert(root(f));
    }
    let mut scan = |func: &Function| {
        for (_, inst) in func.insts.iter() {
            use InstKind::*;
            match &inst.kind {
                FieldLoad { field, .. }
                | FieldIsActive { field, .. }
                | FieldLength { field, .. } => {
                    a.reads.insert(root(*field));
                }
                FieldStore { field, .. }
                | FieldActivate { field, .. }
                | FieldDeactivate { field, .. }
                | FieldAppend { field, .. } => {
                    a.writes.insert(root(*field));
                }
                FieldAtomic { field, .. } => {
                    a.reads.insert(root(*field));
                    a.writes.insert(root(*field));
                }
                BufLoad { root, .. } => {
                    a.reads.insert(*root);
                }
                BufStore { root, .. } => {
                    a.writes.insert(*root);
                }
                BufAtomic { root, .. } => {
                    a.reads.insert(*root);
                    a.writes.insert(*root);
                }
                _ => {}
            }
        }
    };
    scan(&k.entry);
    for (_, f) in k.functions.iter() {
        scan(f);
    }
    a
}

/// The kernels upstream of `roots`: every kernel that writes one of them,
/// and, transitively, every kernel that writes a root such a kernel
/// reads. Returns the kernels and the roots they read or write (`roots`
/// included).
pub fn upstream(
    program: &Program,
    roots: &BTreeSet<LayoutId>,
) -> (BTreeSet<KernelId>, BTreeSet<LayoutId>) {
    let access: Vec<(KernelId, Access)> = program
        .kernels
        .iter()
        .map(|(h, k)| (h, of_kernel(program, k)))
        .collect();
    let mut state = roots.clone();
    let mut kernels = BTreeSet::new();
    loop {
        let mut grew = false;
        for (h, a) in &access {
            if !kernels.contains(h) && a.writes.iter().any(|r| state.contains(r)) {
                kernels.insert(*h);
                state.extend(a.reads.iter().chain(&a.writes).copied());
                grew = true;
            }
        }
        if !grew {
            return (kernels, state);
        }
    }
}
