//! Store fusion: several quantized stores into the same packed word within
//! one block become one read-modify-write of that word (Taichi's
//! `optimize_bit_struct_stores`).
//!
//! Pre: lowered IR after CSE, so that stores into one word (fields of one
//! `bit_struct`, components of one element) share the address instruction.
//! Post: every run of compare-exchange store loops (`lower::quantize::CasLoop`
//! without saved old values) on the same root and address, separated only
//! by pure instructions that read nothing (or by bounds checks), is one
//! loop at the position of the last: one load, each store's bit insertion
//! applied in program order to the word, one compare-exchange.
//!
//! Why it is safe: between the fused stores this iteration does not read or
//! write memory, so nothing in it can tell that the earlier bits land later;
//! other iterations could only observe an intermediate word, which parallel
//! semantics never promised. Atomics (loops that save an old value) are not
//! fused: their returned values depend on the word each one saw.
//!
//! Does not: fuse across control flow, across memory accesses of any root,
//! or stores whose addresses are different instructions.

use crate::ir::*;
use crate::lower::quantize::{match_cas_loop, CasLoop};

pub fn run(program: &mut Program) {
    for k in program.kernels.handles().collect::<Vec<_>>() {
        let kernel = &mut program.kernels[k];
        fuse_function(&mut kernel.entry);
        for h in kernel.functions.handles().collect::<Vec<_>>() {
            fuse_function(&mut kernel.functions[h]);
        }
    }
}

fn fuse_function(f: &mut Function) {
    let body = std::mem::take(&mut f.body);
    f.body = fuse_block(f, body);
}

fn fuse_block(f: &mut Function, block: Block) -> Block {
    let mut out: Block = Vec::with_capacity(block.len());
    // Index in `out` of the last store loop that a later one may absorb.
    let mut open: Option<usize> = None;
    for h in block {
        let mut kind = f.insts[h].kind.clone();
        for b in kind.blocks_mut() {
            *b = fuse_block(f, std::mem::take(b));
        }
        f.insts[h].kind = kind;
        if let Some(l2) = match_cas_loop(f, h).filter(|l| l.saves.is_empty()) {
            if let Some(at) = open {
                let l1 = match_cas_loop(f, out[at]).expect("kept open only for store loops");
                if l1.root == l2.root && l1.addr == l2.addr {
                    merge(f, &l1, &l2, h);
                    out.remove(at);
                }
            }
            out.push(h);
            open = Some(out.len() - 1);
            continue;
        }
        let k = &f.insts[h].kind;
        let harmless = matches!(k, InstKind::BoundsCheck { .. })
            || (k.is_pure()
                && k.blocks().is_empty()
                && !matches!(
                    k,
                    InstKind::BufLoad { .. } | InstKind::FieldLoad { .. } | InstKind::LocalLoad(_)
                ));
        if !harmless {
            open = None;
        }
        out.push(h);
    }
    out
}

/// Rewrites loop `h` (= `l2`) to apply `l1`'s bit insertion first: its word
/// comes from `l1`'s load and `l2`'s computation starts from `l1`'s result.
fn merge(f: &mut Function, l1: &CasLoop, l2: &CasLoop, h: InstId) {
    for &c in &l2.compute {
        f.insts[c]
            .kind
            .map_operands(|x| if x == l2.load { l1.new } else { x });
    }
    f.insts[l2.cas]
        .kind
        .map_operands(|x| if x == l2.load { l1.load } else { x });
    f.insts[l2.eq]
        .kind
        .map_operands(|x| if x == l2.load { l1.load } else { x });
    // A store whose new word is the loaded word itself (nothing computed)
    // now stores l1's word.
    if l2.new == l2.load {
        if let InstKind::BufAtomic { value, .. } = &mut f.insts[l2.cas].kind {
            *value = l1.new;
        }
    }
    let mut body = vec![l1.load];
    body.extend(&l1.compute);
    body.extend(&l2.compute);
    body.extend([l2.cas, l2.eq, l2.branch]);
    f.insts[h].kind = InstKind::Loop { body };
}
