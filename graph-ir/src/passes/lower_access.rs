//! Lowers abstract field access to word addresses in root buffers.
//!
//! Pre: valid IR with `FieldLoad` / `FieldStore` / `FieldAtomic` and
//! computed layouts (`ir::layout::compute`). Post: valid lowered IR
//! with only `BufLoad` / `BufStore` / `BufAtomic`, one per component, plus
//! `BoundsCheck`s before each access when `bounds_checks` is set.
//!
//! The arithmetic is not decided here: this pass emits, as IR, the
//! field's `ir::layout::AddressPlan` (the same plan host copies, dumps and
//! GPU views evaluate), dispatching on each level's `LayoutKind`. Kernel
//! code never sees any of this: changing the layout only changes the plan.

use crate::ir::layout::{AddressPlan, WORD_BITS};
use crate::ir::*;
use crate::lower::activation_demotion::KnownActive;
use crate::lower::emit::Build;
use crate::lower::sparse::{self, Emitter, Mode};
use crate::lower::words::{assemble, split};
use crate::types::{Scalar, Type};
use std::collections::HashSet;

/// `demote`: writes at cells known to be active do not activate
/// (`lower::activation_demotion`).
pub fn run(program: &mut Program, bounds_checks: bool, demote: bool) {
    let snapshot = program.clone();
    for k in program.kernels.handles().collect::<Vec<_>>() {
        let known = demote.then(|| KnownActive::new(&snapshot, &snapshot.kernels[k]));
        let kernel = &mut program.kernels[k];
        let mut sites = std::mem::take(&mut kernel.fault_sites);
        let entry_demoted = demoted(&snapshot, known.as_ref(), &kernel.entry);
        lower_function(
            &snapshot,
            &mut kernel.entry,
            bounds_checks,
            &mut sites,
            &entry_demoted,
        );
        for fid in kernel.functions.handles().collect::<Vec<_>>() {
            lower_function(
                &snapshot,
                &mut kernel.functions[fid],
                bounds_checks,
                &mut sites,
                &HashSet::new(),
            );
        }
        kernel.fault_sites = sites;
    }
}

/// The entry's writes (stores, atomics, `activate`) at known-active cells.
fn demoted(p: &Program, known: Option<&KnownActive>, entry: &Function) -> HashSet<InstId> {
    let Some(known) = known else {
        return HashSet::new();
    };
    entry
        .insts
        .iter()
        .filter(|(_, i)| match &i.kind {
            InstKind::FieldStore { field, index, .. }
            | InstKind::FieldAtomic { field, index, .. }
            | InstKind::FieldActivate { field, index } => {
                known.write_is_known_active(p, entry, true, *field, index)
            }
            _ => false,
        })
        .map(|(h, _)| h)
        .collect()
}

fn lower_function(
    p: &Program,
    f: &mut Function,
    checks: bool,
    sites: &mut Vec<FaultSite>,
    demoted: &HashSet<InstId>,
) {
    let body = std::mem::take(&mut f.body);
    f.body = lower_block(p, f, body, checks, sites, demoted);
}

fn lower_block(
    p: &Program,
    f: &mut Function,
    block: Block,
    checks: bool,
    sites: &mut Vec<FaultSite>,
    demoted: &HashSet<InstId>,
) -> Block {
    let mut out = Vec::with_capacity(block.len());
    for h in block {
        let mut kind = f.insts[h].kind.clone();
        for b in kind.blocks_mut() {
            *b = lower_block(p, f, std::mem::take(b), checks, sites, demoted);
        }
        f.insts[h].kind = kind.clone();
        if let InstKind::FieldAppend { field, list, .. } | InstKind::FieldLength { field, list } =
            kind
        {
            let span = f.insts[h].span;
            let mut e = Emitter {
                f,
                out: Vec::new(),
                span,
            };
            if let Some(k) = lower_list_op(p, &mut e, field, list, &kind, checks, sites) {
                out.extend(std::mem::take(&mut e.out));
                f.insts[h].kind = k;
                out.push(h);
            }
            continue;
        }
        let (field, index, mode) = match &kind {
            InstKind::FieldLoad { field, index } => (*field, index.clone(), Mode::Read),
            // A known-active cell: the address without activating.
            InstKind::FieldStore { field, index, .. }
            | InstKind::FieldAtomic { field, index, .. }
            | InstKind::FieldActivate { field, index }
                if demoted.contains(&h) =>
            {
                (*field, index.clone(), Mode::Read)
            }
            InstKind::FieldStore { field, index, .. }
            | InstKind::FieldAtomic { field, index, .. }
            | InstKind::FieldActivate { field, index } => (*field, index.clone(), Mode::Write),
            InstKind::FieldIsActive { field, index, .. }
            | InstKind::FieldDeactivate { field, index } => (*field, index.clone(), Mode::Probe),
            _ => {
                out.push(h);
                continue;
            }
        };
        let span = f.insts[h].span;
        let ty = f.insts[h].ty;
        let mut e = Emitter {
            f,
            out: Vec::new(),
            span,
        };
        let plan = AddressPlan::new(p, field);
        if let InstKind::FieldIsActive {
            level: Some(level), ..
        } = kind
        {
            // The activity of the level-`level` block only: the walk stops
            // there (a level past the last one asks the whole path).
            let upto = (level as usize).min(plan.levels.len() - 1);
            let idx = checked_index(p, &plan, &mut e, &index, checks);
            let w = sparse::walk(
                &mut e,
                plan.root,
                &plan.levels,
                &idx,
                Mode::Probe,
                upto,
                sites,
            );
            let a = w
                .active
                .unwrap_or_else(|| e.emit(InstKind::Const(Const::bool(true)), Type::BOOL));
            out.extend(std::mem::take(&mut e.out));
            f.insts[h].kind = InstKind::Select {
                cond: a,
                accept: a,
                reject: a,
            };
            f.insts[h].ty = Type::BOOL;
            out.push(h);
            continue;
        }
        if matches!(kind, InstKind::FieldDeactivate { .. }) {
            let idx = checked_index(p, &plan, &mut e, &index, checks);
            sparse::deactivate(&mut e, &plan, &idx, sites);
            out.extend(std::mem::take(&mut e.out));
            continue;
        }
        let (base, active, sub_bits) = address(p, &plan, &mut e, &index, checks, mode, sites);
        if let InstKind::FieldIsActive { .. } = kind {
            // Dense fields are always active. The handle keeps the result
            // (as a select of the value with itself) so its uses stay valid.
            let a =
                active.unwrap_or_else(|| e.emit(InstKind::Const(Const::bool(true)), Type::BOOL));
            out.extend(std::mem::take(&mut e.out));
            f.insts[h].kind = InstKind::Select {
                cond: a,
                accept: a,
                reject: a,
            };
            f.insts[h].ty = Type::BOOL;
            out.push(h);
            continue;
        }
        if let InstKind::FieldActivate { .. } = kind {
            out.extend(std::mem::take(&mut e.out));
            continue;
        }
        let fty = p.fields[field].ty;
        let root = plan.root;
        let scalar = fty.scalar().expect("field type");
        let comps = plan.components;
        // Quantized storage: bit extraction and encode/decode live in `lower::quantize`.
        if let Storage::Quant(_) | Storage::Shared(_) = plan.storage {
            let k = match plan.storage {
                Storage::Quant(q) => {
                    crate::lower::quantize::lower(&mut e, p, &plan, q, kind, base, sub_bits)
                }
                Storage::Shared(s) => {
                    crate::lower::quantize::lower_shared(&mut e, p, &plan, s, kind, base)
                }
                Storage::Word => unreachable!("matched above"),
            };
            out.extend(std::mem::take(&mut e.out));
            if let Some(k) = k {
                f.insts[h].kind = k;
                f.insts[h].ty = ty;
                out.push(h);
            }
            continue;
        }
        let comp_addr = |e: &mut Emitter, c: usize| {
            if c == 0 {
                base
            } else {
                let k = e.u32c(plan.component_word_offset(c));
                e.bin(BinaryOp::Add, base, k)
            }
        };
        // The original handle ends up holding the access's value, so its uses stay valid.
        let final_kind = match kind {
            InstKind::FieldLoad { .. } if scalar.is_wide() => {
                // Two u32 words (low first) reinterpreted as the 64-bit
                // scalar: backends see only word loads and a bitcast.
                let words: Vec<InstId> = (0..fty.components())
                    .map(|c| {
                        let lo_addr = comp_addr(&mut e, 2 * c);
                        let lo = e.emit(
                            InstKind::BufLoad {
                                root,
                                addr: lo_addr,
                            },
                            Type::U32,
                        );
                        let hi_addr = comp_addr(&mut e, 2 * c + 1);
                        let hi = e.emit(
                            InstKind::BufLoad {
                                root,
                                addr: hi_addr,
                            },
                            Type::U32,
                        );
                        let pair = e.emit(
                            InstKind::Construct(vec![lo, hi]),
                            Type::Vector(Scalar::U32, 2),
                        );
                        e.emit(InstKind::Bitcast(pair), Type::Scalar(scalar))
                    })
                    .collect();
                assemble(&mut e, fty, words)
            }
            InstKind::FieldLoad { .. } => {
                let words: Vec<InstId> = (0..comps)
                    .map(|c| {
                        let a = comp_addr(&mut e, c);
                        e.emit(InstKind::BufLoad { root, addr: a }, Type::Scalar(scalar))
                    })
                    .collect();
                assemble(&mut e, fty, words)
            }
            InstKind::FieldStore { value, .. } if scalar.is_wide() => {
                let parts = split(&mut e, fty, value);
                for (c, part) in parts.into_iter().enumerate() {
                    let lo_addr = comp_addr(&mut e, 2 * c);
                    let pair = e.emit(InstKind::Bitcast(part), Type::Vector(Scalar::U32, 2));
                    let hi_addr = comp_addr(&mut e, 2 * c + 1);
                    for (k, a) in [lo_addr, hi_addr].into_iter().enumerate() {
                        let w = e.emit(InstKind::Extract(pair, k as u32), Type::U32);
                        e.emit(
                            InstKind::BufStore {
                                root,
                                addr: a,
                                value: w,
                            },
                            Type::Void,
                        );
                    }
                }
                None
            }
            InstKind::FieldStore { value, .. } => {
                let parts = split(&mut e, fty, value);
                for (c, part) in parts.into_iter().enumerate() {
                    let a = comp_addr(&mut e, c);
                    e.emit(
                        InstKind::BufStore {
                            root,
                            addr: a,
                            value: part,
                        },
                        Type::Void,
                    );
                }
                None
            }
            InstKind::FieldAtomic { op, value, cmp, .. } => {
                let parts = split(&mut e, fty, value);
                let cmp_parts = cmp.map(|c| split(&mut e, fty, c));
                let olds: Vec<InstId> = parts
                    .into_iter()
                    .enumerate()
                    .map(|(c, part)| {
                        let a = comp_addr(&mut e, c);
                        let cmpc = cmp_parts.as_ref().map(|cp| cp[c]);
                        e.emit(
                            InstKind::BufAtomic {
                                op,
                                root,
                                addr: a,
                                value: part,
                                cmp: cmpc,
                            },
                            Type::Scalar(scalar),
                        )
                    })
                    .collect();
                assemble(&mut e, fty, olds)
            }
            _ => unreachable!("only field accesses reach here"),
        };
        out.extend(std::mem::take(&mut e.out));
        if let Some(k) = final_kind {
            f.insts[h].kind = k;
            f.insts[h].ty = ty;
            out.push(h);
        }
    }
    out
}

/// `append` / `length` on a field whose own layout node is dynamic (the
/// graph builder checks that). Returns the kind for the original handle
/// (the i32 result).
fn lower_list_op(
    p: &Program,
    e: &mut Emitter,
    field: FieldId,
    list: InstId,
    kind: &InstKind,
    checks: bool,
    sites: &mut Vec<FaultSite>,
) -> Option<InstKind> {
    let plan = AddressPlan::new(p, field);
    let level = plan.levels.last().expect("a field has a level").clone();
    let n = level.axes[0].extent as u64;
    let fd = &p.fields[field];
    if checks {
        e.emit(
            InstKind::BoundsCheck {
                field,
                axis: 0,
                index: list,
                extent: fd.shape[0] / n as u32,
            },
            Type::Void,
        );
    }
    let l = e.emit(InstKind::Cast(list), Type::U32);
    let root = plan.root;
    match *kind {
        InstKind::FieldLength { .. } => {
            let (block, _) = sparse::list_block(e, root, &plan.levels, l, Mode::Read, sites);
            let len = e.load(root, block);
            // A failed append may leave the word past the capacity.
            let cap = e.u32c(n);
            let lt = e.cmp(BinaryOp::Lt, len, cap);
            let len = e.select(lt, len, cap);
            Some(InstKind::Cast(len))
        }
        InstKind::FieldAppend { value, .. } => {
            let (block, _) = sparse::list_block(e, root, &plan.levels, l, Mode::Write, sites);
            let one = e.u32c(1);
            let k = e.atomic(AtomicOp::Add, root, block, one, None);
            let full = e.cmpk(BinaryOp::Ge, k, n);
            let site = sites.len() as u32;
            sites.push(FaultSite {
                span: e.span,
                kind: FaultKind::ListFull { layout: level.node },
                resume: false,
            });
            let trap = e.block(|e| {
                e.emit(InstKind::Trap { site, value: l }, Type::Void);
            });
            let fty = fd.ty;
            let write = e.block(|e| {
                let cw = level.cell_bits / WORD_BITS;
                let off = e.bink(BinaryOp::Mul, k, cw);
                let first = e.bink(
                    BinaryOp::Add,
                    block,
                    level.header_words + plan.base_bits / WORD_BITS,
                );
                let base = e.bin(BinaryOp::Add, first, off);
                let parts = split(e, fty, value);
                for (c, part) in parts.into_iter().enumerate() {
                    let a = if c == 0 {
                        base
                    } else {
                        e.bink(BinaryOp::Add, base, plan.component_word_offset(c))
                    };
                    e.store(root, a, part);
                }
            });
            e.emit(
                InstKind::If {
                    cond: full,
                    accept: trap,
                    reject: write,
                },
                Type::Void,
            );
            Some(InstKind::Cast(k))
        }
        _ => unreachable!("only append / length reach here"),
    }
}

/// Emits the bounds checks and the u32 logical index.
fn checked_index(
    p: &Program,
    plan: &AddressPlan,
    e: &mut Emitter,
    index: &[InstId],
    checks: bool,
) -> Vec<InstId> {
    let fd = &p.fields[plan.field];
    if checks {
        for (axis, (&i, &ext)) in index.iter().zip(&fd.shape).enumerate() {
            e.emit(
                InstKind::BoundsCheck {
                    field: plan.field,
                    axis: axis as u32,
                    index: i,
                    extent: ext,
                },
                Type::Void,
            );
        }
    }
    index
        .iter()
        .map(|&i| e.emit(InstKind::Cast(i), Type::U32))
        .collect()
}

/// Emits the plan's word address of component 0 (plus bounds checks), for
/// `Mode::Probe` whether the element is active, and for a level whose cells
/// are narrower than a word (a `bit_array`) the element's bit offset inside
/// that word. Dense-only plans are plain arithmetic; sparse ones walk the
/// levels (`sparse::walk`).
fn address(
    p: &Program,
    plan: &AddressPlan,
    e: &mut Emitter,
    index: &[InstId],
    checks: bool,
    mode: Mode,
    sites: &mut Vec<FaultSite>,
) -> (InstId, Option<InstId>, Option<InstId>) {
    // Word storage is word-aligned; quantized storage gets the word holding
    // the element's first bit (`lower::quantize` adds the bit offset).
    if plan.storage == Storage::Word {
        debug_assert!(plan.word_aligned());
    }
    let idx = checked_index(p, plan, e, index, checks);
    if plan.is_sparse() {
        let mut last = plan.levels.len() - 1;
        // A bit_array (always the last level, dense) below sparse levels:
        // walk to its parent's cell; the index picks the bit in its word.
        let packed = &plan.levels[last];
        let sub_word = !packed.cell_bits.is_multiple_of(WORD_BITS);
        if sub_word {
            last -= 1;
        }
        let w = sparse::walk(e, plan.root, &plan.levels, &idx, mode, last, sites);
        let mut cell = w.cells[last];
        let mut sub_bits = None;
        if sub_word {
            let lin = sparse::cell_in_block(e, packed, &idx);
            let cb = e.u32c(packed.cell_bits);
            sub_bits = Some(e.bin(BinaryOp::Mul, lin, cb));
            if packed.offset_bits > 0 {
                cell = e.bink(BinaryOp::Add, cell, packed.offset_bits / WORD_BITS);
            }
        }
        let addr = if plan.base_bits / WORD_BITS > 0 {
            e.bink(BinaryOp::Add, cell, plan.base_bits / WORD_BITS)
        } else {
            cell
        };
        return (addr, w.active, sub_bits);
    }
    let mut addr = e.u32c(plan.base_bits / WORD_BITS);
    let mut sub_bits = None;
    for level in &plan.levels {
        // Cell index at this level, row-major (last axis fastest).
        let lin = sparse::cell_in_block(e, level, &idx);
        if !level.cell_bits.is_multiple_of(WORD_BITS) {
            // A bit_array: all its cells share the one word of its block
            // (`layout::packed_words`), so the index moves the bit, not the word.
            let cb = e.u32c(level.cell_bits);
            sub_bits = Some(e.bin(BinaryOp::Mul, lin, cb));
            if level.offset_bits > 0 {
                let k = e.u32c(level.offset_bits / WORD_BITS);
                addr = e.bin(BinaryOp::Add, addr, k);
            }
            continue;
        }
        let cw = e.u32c(level.cell_bits / WORD_BITS);
        let term = e.bin(BinaryOp::Mul, lin, cw);
        addr = e.bin(BinaryOp::Add, addr, term);
        if level.offset_bits > 0 {
            let k = e.u32c(level.offset_bits / WORD_BITS);
            addr = e.bin(BinaryOp::Add, addr, k);
        }
    }
    (addr, None, sub_bits)
}
