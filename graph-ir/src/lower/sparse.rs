//! IR building blocks for sparse layouts (not a pass): walking a field's
//! `AddressPlan` level by level in plain IR, activation with lock-free pool
//! allocation, and cell resets. Access lowering (`passes::lower_access`),
//! struct-for lowering (`passes::sparse_iter`) and the list, clear and
//! garbage-collection system kernels (`passes::sparse_list`,
//! `passes::sparse_clear`, `passes::sparse_gc`) all emit through here, so the
//! protocol below is written once.
//!
//! The protocol, on 32-bit words of the root buffer only (WGSL has nothing
//! wider), and without any thread ever waiting for another (Vulkan gives no
//! forward-progress guarantee between workgroups):
//! - `bitmasked`: a cell is active when its bit in the block header is set;
//!   a write sets it with an atomic OR (skipped when already set). Inactive
//!   cells hold their initial values (deactivation resets them), so reads
//!   need no check.
//! - `pointer`: a cell holds slot + 1 of its contents in the node's pool, or
//!   0. A read of 0 goes to the node's initial image instead (a select, no
//!   branch), so it sees init values and activates nothing. A write that
//!   finds 0 claims a free slot by an atomic OR on the pool's bitmap (a scan
//!   from a rotating start; no free bit anywhere is a `PoolExhausted` trap),
//!   then publishes it with ONE compare-exchange 0 → slot + 1 on the cell. The
//!   winner records the cell's coordinate in the slot's owner word; a loser
//!   clears its bitmap bit again (its slot was never written, so it is still
//!   an initial cell) and uses the winner's slot. A block is therefore
//!   allocated once however many threads race for it; a racer that found no
//!   free slot re-reads the cell after the publishing step (where losers
//!   give their slots back), scans again when it is still null, and traps
//!   only when a bounded number of such retries all find no free slot.

use crate::ir::layout::{self, AddressPlan, LevelPlan, WORD_BITS};
use crate::ir::*;
use crate::lower::emit::Build;
use crate::types::Type;

pub struct Emitter<'a> {
    pub f: &'a mut Function,
    pub out: Vec<InstId>,
    pub span: Span,
}

impl Build for Emitter<'_> {
    fn func(&mut self) -> &mut Function {
        self.f
    }
    fn func_ref(&self) -> &Function {
        self.f
    }
    fn push(&mut self, h: InstId) {
        self.out.push(h);
    }
    fn span(&self) -> Span {
        self.span
    }
    fn swap_block(&mut self, b: Block) -> Block {
        std::mem::replace(&mut self.out, b)
    }
}

impl Emitter<'_> {
    /// A constant of `ty`'s shape (a vector repeats it).
    pub fn splat(&mut self, c: Const, ty: Type) -> InstId {
        let s = self.konst(c);
        match ty {
            Type::Vector(sc, n) => {
                let parts = vec![s; n as usize];
                self.emit(InstKind::Construct(parts), Type::Vector(sc, n))
            }
            _ => s,
        }
    }
    /// Moves the kind of `last` (the instruction emitted last) into `h`, so
    /// the original handle holds the result and its uses stay valid (a
    /// rewrite in place).
    pub fn finish(&mut self, h: InstId, last: InstId) {
        let popped = self.out.pop();
        debug_assert_eq!(popped, Some(last), "the result was emitted last");
        self.f.insts[h].kind = self.f.insts[last].kind.clone();
    }
    pub fn u32c(&mut self, v: u64) -> InstId {
        self.emit(InstKind::Const(Const::u32(v as u32)), Type::U32)
    }
    /// u32 arithmetic (wrapping on every backend).
    pub fn bin(&mut self, op: BinaryOp, a: InstId, b: InstId) -> InstId {
        self.emit(InstKind::Binary(op, a, b), Type::U32)
    }
    pub fn bink(&mut self, op: BinaryOp, a: InstId, k: u64) -> InstId {
        let k = self.u32c(k);
        self.bin(op, a, k)
    }
    pub fn cmp(&mut self, op: BinaryOp, a: InstId, b: InstId) -> InstId {
        self.emit(InstKind::Binary(op, a, b), Type::BOOL)
    }
    pub fn cmpk(&mut self, op: BinaryOp, a: InstId, k: u64) -> InstId {
        let k = self.u32c(k);
        self.cmp(op, a, k)
    }
    pub fn and(&mut self, a: InstId, b: InstId) -> InstId {
        self.emit(InstKind::Binary(BinaryOp::LogicalAnd, a, b), Type::BOOL)
    }
    pub fn not(&mut self, a: InstId) -> InstId {
        let ty = self.f.insts[a].ty;
        self.emit(InstKind::Unary(UnaryOp::Not, a), ty)
    }
    pub fn load(&mut self, root: LayoutId, addr: InstId) -> InstId {
        self.emit(InstKind::BufLoad { root, addr }, Type::U32)
    }
    pub fn store(&mut self, root: LayoutId, addr: InstId, value: InstId) {
        self.emit(InstKind::BufStore { root, addr, value }, Type::Void);
    }
    pub fn atomic(
        &mut self,
        op: AtomicOp,
        root: LayoutId,
        addr: InstId,
        value: InstId,
        cmp: Option<InstId>,
    ) -> InstId {
        self.emit(
            InstKind::BufAtomic {
                op,
                root,
                addr,
                value,
                cmp,
            },
            Type::U32,
        )
    }
    /// `for i in 0..n` over u32 (a `Loop` on a local counter).
    pub fn for_n(&mut self, n: u64, body: impl FnOnce(&mut Self, InstId)) {
        let i = self.new_local("i", Type::U32);
        let zero = self.u32c(0);
        self.set(i, zero);
        self.loop_(|e| {
            let iv = e.get(i);
            let done = e.cmpk(BinaryOp::Ge, iv, n);
            e.if_(done, |e| e.brk());
            body(e, iv);
            let next = e.bink(BinaryOp::Add, iv, 1);
            e.set(i, next);
        });
    }
    /// Bit position of a power of two (count of trailing zeros), branch-free.
    pub fn ctz_pow2(&mut self, x: InstId) -> InstId {
        let mut acc = self.u32c(0);
        for (mask, weight) in [
            (0xAAAA_AAAAu64, 1u64),
            (0xCCCC_CCCC, 2),
            (0xF0F0_F0F0, 4),
            (0xFF00_FF00, 8),
            (0xFFFF_0000, 16),
        ] {
            let m = self.bink(BinaryOp::BitAnd, x, mask);
            let set = self.cmpk(BinaryOp::Ne, m, 0);
            let w = self.u32c(weight);
            let z = self.u32c(0);
            let part = self.select(set, w, z);
            acc = self.bin(BinaryOp::Add, acc, part);
        }
        acc
    }
}

/// What a walk does at sparse levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Activates nothing; null references read the initial image.
    Read,
    /// Like `Read`, also computing whether every level is active.
    Probe,
    /// Activates every level (allocating pool slots).
    Write,
}

/// The values a walk computed, per level visited.
pub struct Walk {
    /// Word address of the element's cell at each level.
    pub cells: Vec<InstId>,
    /// Word address of the block holding that cell.
    pub blocks: Vec<InstId>,
    /// Row-major index of the cell inside its block.
    pub lins: Vec<InstId>,
    /// `Probe`: all visited levels active (bool).
    pub active: Option<InstId>,
}

/// Row-major index of `idx`'s cell inside its block at `level` (u32 `idx`).
pub fn cell_in_block(e: &mut Emitter, level: &LevelPlan, idx: &[InstId]) -> InstId {
    let mut lin: Option<InstId> = None;
    for (step, &index_d) in level.axes.iter().zip(idx) {
        let mut x = index_d;
        if step.divisor > 1 {
            x = e.bink(BinaryOp::Div, x, step.divisor);
        }
        if let Some(m) = step.modulus {
            x = e.bink(BinaryOp::Rem, x, m as u64);
        }
        lin = Some(match lin {
            None => x,
            Some(acc) => {
                let m = e.bink(BinaryOp::Mul, acc, step.extent as u64);
                e.bin(BinaryOp::Add, m, x)
            }
        });
    }
    lin.expect("at least one axis")
}

/// Row-major global coordinate of `idx`'s cell at `level` (as
/// `AddressPlan::coord`).
pub fn coord(e: &mut Emitter, level: &LevelPlan, idx: &[InstId]) -> InstId {
    let mut acc: Option<InstId> = None;
    for (step, &i) in level.axes.iter().zip(idx) {
        let x = if step.divisor > 1 {
            e.bink(BinaryOp::Div, i, step.divisor)
        } else {
            i
        };
        acc = Some(match acc {
            None => x,
            Some(a) => {
                let m = e.bink(BinaryOp::Mul, a, step.coord_extent);
                e.bin(BinaryOp::Add, m, x)
            }
        });
    }
    acc.expect("at least one axis")
}

/// Walks `levels[0..=upto]` (root first, in the buffer of `root`) for the
/// u32 logical index `idx`. `sites` receives the pool-exhaustion fault
/// sites a `Write` walk traps on.
pub fn walk(
    e: &mut Emitter,
    root: LayoutId,
    levels: &[LevelPlan],
    idx: &[InstId],
    mode: Mode,
    upto: usize,
    sites: &mut Vec<FaultSite>,
) -> Walk {
    let mut w = Walk {
        cells: vec![],
        blocks: vec![],
        lins: vec![],
        active: None,
    };
    for level in &levels[..=upto] {
        let block = match w.cells.last() {
            None => e.u32c(0),
            Some(&parent) if level.offset_bits > 0 => {
                e.bink(BinaryOp::Add, parent, level.offset_bits / WORD_BITS)
            }
            Some(&parent) => parent,
        };
        let lin = cell_in_block(e, level, idx);
        let cw = level.cell_bits / WORD_BITS;
        let cell = match level.kind {
            LayoutKind::Dense => {
                let off = e.bink(BinaryOp::Mul, lin, cw);
                e.bin(BinaryOp::Add, block, off)
            }
            LayoutKind::Bitmasked => {
                let word = e.bink(BinaryOp::Shr, lin, 5);
                let maddr = e.bin(BinaryOp::Add, block, word);
                let low = e.bink(BinaryOp::BitAnd, lin, 31);
                let one = e.u32c(1);
                let bit = e.bin(BinaryOp::Shl, one, low);
                match mode {
                    Mode::Read => {}
                    Mode::Probe => {
                        let m = e.load(root, maddr);
                        let has = e.bin(BinaryOp::BitAnd, m, bit);
                        let on = e.cmpk(BinaryOp::Ne, has, 0);
                        w.active = Some(match w.active {
                            None => on,
                            Some(a) => e.and(a, on),
                        });
                    }
                    Mode::Write => {
                        // Plain load first: the atomic only when the bit is new.
                        let m = e.load(root, maddr);
                        let has = e.bin(BinaryOp::BitAnd, m, bit);
                        let off = e.cmpk(BinaryOp::Eq, has, 0);
                        e.if_(off, |e| {
                            e.atomic(AtomicOp::Or, root, maddr, bit, None);
                        });
                    }
                }
                let off = e.bink(BinaryOp::Mul, lin, cw);
                let first = e.bink(BinaryOp::Add, block, level.header_words);
                e.bin(BinaryOp::Add, first, off)
            }
            LayoutKind::Hash { .. } => {
                let (cell, hit) = hash_walk(e, root, level, block, idx, mode, sites);
                if let Some(on) = hit {
                    w.active = Some(match w.active {
                        None => on,
                        Some(a) => e.and(a, on),
                    });
                }
                cell
            }
            LayoutKind::Dynamic => {
                // Cells past the length hold initial values (appends only
                // write below it, `clear` / `deactivate` reset), so reads
                // need no check.
                match mode {
                    Mode::Read => {}
                    Mode::Probe => {
                        let len = e.load(root, block);
                        let on = e.cmp(BinaryOp::Lt, lin, len);
                        w.active = Some(match w.active {
                            None => on,
                            Some(a) => e.and(a, on),
                        });
                    }
                    Mode::Write => {
                        // A store at position k makes the list at least k + 1 long.
                        let len = e.load(root, block);
                        let short = e.cmp(BinaryOp::Ge, lin, len);
                        e.if_(short, |e| {
                            let k1 = e.bink(BinaryOp::Add, lin, 1);
                            e.atomic(AtomicOp::Max, root, block, k1, None);
                        });
                    }
                }
                let off = e.bink(BinaryOp::Mul, lin, cw);
                let first = e.bink(BinaryOp::Add, block, level.header_words);
                e.bin(BinaryOp::Add, first, off)
            }
            LayoutKind::Pointer { .. } => {
                let pool = level.pool.expect("pointer levels have a pool");
                let pa = e.bin(BinaryOp::Add, block, lin);
                let r = match mode {
                    Mode::Read | Mode::Probe => e.load(root, pa),
                    Mode::Write => activate_pointer(e, root, level, pa, idx, sites),
                };
                let slot = e.bink(BinaryOp::Sub, r, 1);
                let off = e.bink(BinaryOp::Mul, slot, cw);
                let in_pool = e.bink(BinaryOp::Add, off, pool.data);
                if mode == Mode::Write {
                    in_pool
                } else {
                    let null = e.cmpk(BinaryOp::Eq, r, 0);
                    if mode == Mode::Probe {
                        let on = e.not(null);
                        w.active = Some(match w.active {
                            None => on,
                            Some(a) => e.and(a, on),
                        });
                    }
                    let image = e.u32c(level.image);
                    e.select(null, image, in_pool)
                }
            }
        };
        w.cells.push(cell);
        w.blocks.push(block);
        w.lins.push(lin);
    }
    w
}

/// The key words of `idx`'s cell at a hash level (coordinate + 1 per axis).
pub fn hash_keys(e: &mut Emitter, level: &LevelPlan, idx: &[InstId]) -> Vec<InstId> {
    level
        .axes
        .iter()
        .zip(idx)
        .map(|(step, &i)| {
            let c = if step.divisor > 1 {
                e.bink(BinaryOp::Div, i, step.divisor)
            } else {
                i
            };
            e.bink(BinaryOp::Add, c, 1)
        })
        .collect()
}

/// Linear probing of a hash level's table at word `block` (as
/// `layout::hash_start`): the word address of the cell of `idx`, and for
/// `Probe` whether it exists.
/// - `Read` / `Probe` stop at the first empty slot; an absent cell reads
///   the node's initial image.
/// - `Write` claims the key word by word, each by a compare-exchange
///   0 → key that also succeeds when the word already holds the key. A slot
///   matches only when every word does; a thread that loses any word probes
///   on, and nobody ever waits for the thread that claimed a word. No slot
///   left is a `TableFull` trap.
fn hash_walk(
    e: &mut Emitter,
    root: LayoutId,
    level: &LevelPlan,
    block: InstId,
    idx: &[InstId],
    mode: Mode,
    sites: &mut Vec<FaultSite>,
) -> (InstId, Option<InstId>) {
    let LayoutKind::Hash { capacity } = level.kind else {
        unreachable!("hash levels only")
    };
    let cap = capacity as u64;
    let keys = hash_keys(e, level, idx);
    let nk = keys.len() as u64;
    let stride = nk + level.cell_bits / WORD_BITS;
    let mut h = e.u32c(0);
    for &k in &keys {
        let x = e.bin(BinaryOp::BitXor, h, k);
        h = e.bink(BinaryOp::Mul, x, layout::HASH_MUL as u64);
    }
    let hi = e.bink(BinaryOp::Shr, h, 16);
    let h = e.bin(BinaryOp::BitXor, h, hi);
    let start = e.bink(BinaryOp::Rem, h, cap);
    let slot = e.new_local("hslot", Type::U32);
    e.set(slot, start);
    // 0 = not found (no cell starts at word 0: key words come first).
    let found = e.new_local("hcell", Type::U32);
    let zero = e.u32c(0);
    e.set(found, zero);
    e.for_n(cap, |e, _| {
        let s = e.get(slot);
        let off = e.bink(BinaryOp::Mul, s, stride);
        let base = e.bin(BinaryOp::Add, block, off);
        let k0 = e.load(root, base);
        match mode {
            Mode::Read | Mode::Probe => {
                let empty = e.cmpk(BinaryOp::Eq, k0, 0);
                e.if_(empty, |e| e.brk());
                let mut all = e.cmp(BinaryOp::Eq, k0, keys[0]);
                for (d, &k) in keys.iter().enumerate().skip(1) {
                    let a = e.bink(BinaryOp::Add, base, d as u64);
                    let kd = e.load(root, a);
                    let same = e.cmp(BinaryOp::Eq, kd, k);
                    all = e.and(all, same);
                }
                e.if_(all, |e| {
                    let cell = e.bink(BinaryOp::Add, base, nk);
                    e.set(found, cell);
                    e.brk();
                });
            }
            Mode::Write => {
                let ok = e.new_local("hok", Type::BOOL);
                for (d, &k) in keys.iter().enumerate() {
                    // Claim word d: empty → ours by CAS; then it must hold our key.
                    let a = if d == 0 {
                        base
                    } else {
                        e.bink(BinaryOp::Add, base, d as u64)
                    };
                    let claim = |e: &mut Emitter| {
                        let cur = e.load(root, a);
                        let kw = e.new_local("hkey", Type::U32);
                        e.set(kw, cur);
                        let empty = e.cmpk(BinaryOp::Eq, cur, 0);
                        e.if_(empty, |e| {
                            let z = e.u32c(0);
                            let prev = e.atomic(AtomicOp::CompareExchange, root, a, k, Some(z));
                            let won = e.cmpk(BinaryOp::Eq, prev, 0);
                            let now = e.select(won, k, prev);
                            e.set(kw, now);
                        });
                        let v = e.get(kw);
                        let same = e.cmp(BinaryOp::Eq, v, k);
                        e.set(ok, same);
                    };
                    if d == 0 {
                        claim(e);
                    } else {
                        let so_far = e.get(ok);
                        e.if_(so_far, claim);
                    }
                }
                let mine = e.get(ok);
                e.if_(mine, |e| {
                    let cell = e.bink(BinaryOp::Add, base, nk);
                    e.set(found, cell);
                    e.brk();
                });
            }
        }
        let s1 = e.bink(BinaryOp::Add, s, 1);
        let wrap = e.cmpk(BinaryOp::Ge, s1, cap);
        let z = e.u32c(0);
        let next = e.select(wrap, z, s1);
        e.set(slot, next);
    });
    let f = e.get(found);
    let miss = e.cmpk(BinaryOp::Eq, f, 0);
    match mode {
        Mode::Read | Mode::Probe => {
            let image = e.u32c(level.image);
            let cell = e.select(miss, image, f);
            let hit = (mode == Mode::Probe).then(|| e.not(miss));
            (cell, hit)
        }
        Mode::Write => {
            let site = sites.len() as u32;
            sites.push(FaultSite {
                span: e.span,
                kind: FaultKind::TableFull { layout: level.node },
                resume: false,
            });
            let k0 = keys[0];
            e.if_(miss, |e| {
                e.emit(InstKind::Trap { site, value: k0 }, Type::Void);
            });
            // After a trap the launch fails; the image keeps the address valid.
            let image = e.u32c(level.image);
            (e.select(miss, image, f), None)
        }
    }
}

/// Scans of a pool (each after a re-read of the cell) before a write that
/// found no free slot reports `PoolExhausted`. Seen on an H200 with one
/// retry: `graphs/sparse_blob.json`'s seed kernel (about 25 000 threads
/// writing at most 16 blocks of a 48-slot pool) reported a full pool, on
/// wgpu and on CUDA; with plain re-reads CUDA still did (see below).
const ACTIVATION_RETRIES: u64 = 16;

/// Returns slot + 1 of the pointer cell at `pa` (at `level`), allocating
/// and publishing a slot when the cell is null (see the module doc).
fn activate_pointer(
    e: &mut Emitter,
    root: LayoutId,
    level: &LevelPlan,
    pa: InstId,
    idx: &[InstId],
    sites: &mut Vec<FaultSite>,
) -> InstId {
    let pool = level.pool.expect("pointer levels have a pool");
    let nwords = (pool.capacity as u64).div_ceil(32);
    let slot = e.new_local("slot", Type::U32);
    let r = e.load(root, pa);
    e.set(slot, r);
    let null = e.cmpk(BinaryOp::Eq, r, 0);
    let site = sites.len() as u32;
    sites.push(FaultSite {
        span: e.span,
        kind: FaultKind::PoolExhausted { layout: level.node },
        resume: false,
    });
    e.if_(null, |e| {
        let c = coord(e, level, idx);
        let claim = Claim {
            root,
            pool,
            nwords,
            pa,
            slot,
            coord: c,
        };
        let g = claim.scan(e);
        let found = e.cmpk(BinaryOp::Ne, g, 0);
        let publish = e.block(|e| claim.publish(e, g));
        // No free slot: racers for this very cell (in lockstep on a GPU or
        // in CPU lanes, all of them), and racers for other cells that lost,
        // may hold every slot for a moment: on a large GPU tens of
        // thousands of threads race for a handful of blocks, far more than
        // a pool's spare slots. Each retry first re-reads the cell (a
        // winner has published by then, or losers have given their slots
        // back) and otherwise scans again; only when every retry finds
        // neither is the pool full. The retries are bounded, so no thread
        // waits for another without end (Vulkan gives no forward-progress
        // guarantee between workgroups).
        let fallback = e.block(|e| {
            e.for_n(ACTIVATION_RETRIES, |e, _| {
                // An atomic read (OR 0): a plain load may be served by a
                // cache that other threads' publications never reach (an
                // SM's L1 on CUDA), so the retries would all see null.
                let zero = e.u32c(0);
                let r2 = e.atomic(AtomicOp::Or, root, pa, zero, None);
                e.set(slot, r2);
                let published = e.cmpk(BinaryOp::Ne, r2, 0);
                e.if_(published, |e| e.brk());
                let g2 = claim.scan(e);
                let found2 = e.cmpk(BinaryOp::Ne, g2, 0);
                e.if_(found2, |e| {
                    claim.publish(e, g2);
                    e.brk();
                });
            });
            let s = e.get(slot);
            let full = e.cmpk(BinaryOp::Eq, s, 0);
            e.if_(full, |e| {
                e.emit(InstKind::Trap { site, value: c }, Type::Void);
            });
        });
        e.emit(
            InstKind::If {
                cond: found,
                accept: publish,
                reject: fallback,
            },
            Type::Void,
        );
    });
    e.get(slot)
}

/// One claim of a slot of a pointer node's pool for the cell at `pa`.
struct Claim {
    root: LayoutId,
    pool: PoolWords,
    nwords: u64,
    pa: InstId,
    slot: LocalId,
    coord: InstId,
}

impl Claim {
    /// Sets a free bit of the pool's bitmap (a scan from a rotating start)
    /// and returns its slot + 1, or 0 when every bit was set.
    fn scan(&self, e: &mut Emitter) -> InstId {
        let (root, pool, nwords) = (self.root, self.pool, self.nwords);
        // A rotating start spreads concurrent allocations over the bitmap.
        let hint = e.u32c(pool.hint);
        let one = e.u32c(1);
        let h = e.atomic(AtomicOp::Add, root, hint, one, None);
        let start = e.bink(BinaryOp::Rem, h, nwords);
        let got = e.new_local("got", Type::U32);
        let zero = e.u32c(0);
        e.set(got, zero);
        e.for_n(nwords, |e, wv| {
            let t = e.bin(BinaryOp::Add, start, wv);
            let wrap = e.cmpk(BinaryOp::Ge, t, nwords);
            let t2 = e.bink(BinaryOp::Sub, t, nwords);
            let wi = e.select(wrap, t2, t);
            let ma = e.bink(BinaryOp::Add, wi, pool.bitmap);
            let cur = e.new_local("bits", Type::U32);
            let v = e.load(root, ma);
            e.set(cur, v);
            e.loop_(|e| {
                let c = e.get(cur);
                let free = e.not(c);
                let none = e.cmpk(BinaryOp::Eq, free, 0);
                e.if_(none, |e| e.brk());
                let z = e.u32c(0);
                let neg = e.bin(BinaryOp::Sub, z, free);
                let low = e.bin(BinaryOp::BitAnd, free, neg);
                let old = e.atomic(AtomicOp::Or, root, ma, low, None);
                let had = e.bin(BinaryOp::BitAnd, old, low);
                let mine = e.cmpk(BinaryOp::Eq, had, 0);
                e.if_(mine, |e| {
                    let base = e.bink(BinaryOp::Mul, wi, 32);
                    let bit = e.ctz_pow2(low);
                    let s = e.bin(BinaryOp::Add, base, bit);
                    let s1 = e.bink(BinaryOp::Add, s, 1);
                    e.set(got, s1);
                    e.brk();
                });
                let next = e.bin(BinaryOp::BitOr, old, low);
                e.set(cur, next);
            });
            let g = e.get(got);
            let found = e.cmpk(BinaryOp::Ne, g, 0);
            e.if_(found, |e| e.brk());
        });
        e.get(got)
    }

    /// Publishes slot `g` (slot + 1) with one compare-exchange 0 → g on the
    /// cell. The winner records the cell's coordinate in the slot's owner
    /// word; a loser gives its (still initial) slot back and uses the
    /// winner's.
    fn publish(&self, e: &mut Emitter, g: InstId) {
        let (root, pool) = (self.root, self.pool);
        let z = e.u32c(0);
        let prev = e.atomic(AtomicOp::CompareExchange, root, self.pa, g, Some(z));
        let won = e.cmpk(BinaryOp::Eq, prev, 0);
        let s = e.bink(BinaryOp::Sub, g, 1);
        e.if_(won, |e| {
            let oa = e.bink(BinaryOp::Add, s, pool.owner);
            let c1 = e.bink(BinaryOp::Add, self.coord, 1);
            e.store(root, oa, c1);
            e.set(self.slot, g);
        });
        let lost = e.not(won);
        e.if_(lost, |e| {
            let word = e.bink(BinaryOp::Shr, s, 5);
            let ma = e.bink(BinaryOp::Add, word, pool.bitmap);
            let low = e.bink(BinaryOp::BitAnd, s, 31);
            let one = e.u32c(1);
            let bit = e.bin(BinaryOp::Shl, one, low);
            let mask = e.not(bit);
            e.atomic(AtomicOp::And, root, ma, mask, None);
            e.set(self.slot, prev);
        });
    }
}

/// Copies `words` words from `from` to `to` (a cell reset from an image).
pub fn copy_words(e: &mut Emitter, root: LayoutId, from: InstId, to: InstId, words: u64) {
    e.for_n(words, |e, i| {
        let src = e.bin(BinaryOp::Add, from, i);
        let dst = e.bin(BinaryOp::Add, to, i);
        let v = e.load(root, src);
        e.store(root, dst, v);
    });
}

/// Index of the innermost sparse level of `plan` (what `deactivate` clears).
pub fn innermost_sparse(plan: &AddressPlan) -> Option<usize> {
    plan.levels.iter().rposition(|l| l.kind.is_sparse())
}

/// `deactivate`: when the element's cell is active down to the innermost
/// sparse level S, resets S's cell to its initial image and clears its bit
/// (`bitmasked`), or nulls its reference (`pointer`; garbage collection
/// resets and frees the slot at the end of the frame).
pub fn deactivate(e: &mut Emitter, plan: &AddressPlan, idx: &[InstId], sites: &mut Vec<FaultSite>) {
    let Some(s) = innermost_sparse(plan) else {
        return;
    };
    deactivate_level(e, plan.root, &plan.levels, s, idx, sites);
}

/// Deactivates the cell of `levels[s]` (a sparse level) that `idx` (counted
/// in cells of `levels.last()`) falls in, when it and every level above it
/// are active; a dynamic level empties its whole list.
pub fn deactivate_level(
    e: &mut Emitter,
    root: LayoutId,
    levels: &[LevelPlan],
    s: usize,
    idx: &[InstId],
    sites: &mut Vec<FaultSite>,
) {
    let w = walk(e, root, levels, idx, Mode::Probe, s, sites);
    let active = w.active.expect("a sparse level was probed");
    let level = levels[s].clone();
    e.if_(active, |e| match level.kind {
        LayoutKind::Bitmasked => {
            let image = e.u32c(level.image);
            copy_words(e, root, image, w.cells[s], level.cell_bits / WORD_BITS);
            let word = e.bink(BinaryOp::Shr, w.lins[s], 5);
            let maddr = e.bin(BinaryOp::Add, w.blocks[s], word);
            let low = e.bink(BinaryOp::BitAnd, w.lins[s], 31);
            let one = e.u32c(1);
            let bit = e.bin(BinaryOp::Shl, one, low);
            let mask = e.not(bit);
            e.atomic(AtomicOp::And, root, maddr, mask, None);
        }
        LayoutKind::Pointer { .. } => {
            let pa = e.bin(BinaryOp::Add, w.blocks[s], w.lins[s]);
            let z = e.u32c(0);
            e.atomic(AtomicOp::Exchange, root, pa, z, None);
        }
        LayoutKind::Dynamic => {
            let block = w.blocks[s];
            clear_list(e, root, &level, block);
        }
        LayoutKind::Hash { .. } => {
            // Reset the cell, then mark its slot deleted: later probes go
            // past it (an empty key would cut other keys' probe chains).
            let cell = w.cells[s];
            let image = e.u32c(level.image);
            copy_words(e, root, image, cell, level.cell_bits / WORD_BITS);
            let nk = level.axes.len() as u64;
            let k0 = e.bink(BinaryOp::Sub, cell, nk);
            let t = e.u32c(HASH_TOMBSTONE as u64);
            e.store(root, k0, t);
        }
        LayoutKind::Dense => unreachable!("innermost_sparse picks a sparse level"),
    });
}

/// Empties the list of a dynamic `level` whose block is at word `block`:
/// takes its length (an exchange with 0, so that of several threads
/// clearing one list only one resets it), then resets the cells that were
/// in use to the node's initial image.
pub fn clear_list(e: &mut Emitter, root: LayoutId, level: &LevelPlan, block: InstId) {
    let n = level.axes[0].extent as u64;
    let cw = level.cell_bits / WORD_BITS;
    let z = e.u32c(0);
    let old = e.atomic(AtomicOp::Exchange, root, block, z, None);
    let cap = e.u32c(n);
    let lt = e.cmp(BinaryOp::Lt, old, cap);
    let len = e.select(lt, old, cap);
    let i = e.new_local("k", Type::U32);
    let zero = e.u32c(0);
    e.set(i, zero);
    e.loop_(|e| {
        let k = e.get(i);
        let done = e.cmp(BinaryOp::Ge, k, len);
        e.if_(done, |e| e.brk());
        let off = e.bink(BinaryOp::Mul, k, cw);
        let first = e.bink(BinaryOp::Add, block, level.header_words);
        let cell = e.bin(BinaryOp::Add, first, off);
        let image = e.u32c(level.image);
        copy_words(e, root, image, cell, cw);
        let next = e.bink(BinaryOp::Add, k, 1);
        e.set(i, next);
    });
}

/// Word address of the block (length word first) of list `list` (u32) of
/// the dynamic level `levels.last()` (in the buffer of `root`), and for
/// `Mode::Probe` whether every level above is active. `Mode::Write`
/// activates the levels above; `Read` goes through initial images.
pub fn list_block(
    e: &mut Emitter,
    root: LayoutId,
    levels: &[LevelPlan],
    list: InstId,
    mode: Mode,
    sites: &mut Vec<FaultSite>,
) -> (InstId, Option<InstId>) {
    let last = levels.len() - 1;
    let level = &levels[last];
    debug_assert_eq!(level.kind, LayoutKind::Dynamic);
    if last == 0 {
        return (e.u32c(0), None);
    }
    // The list's first element: its cells above the list are the list's.
    let first = e.bink(BinaryOp::Mul, list, level.axes[0].extent as u64);
    let w = walk(e, root, levels, &[first], mode, last - 1, sites);
    let parent = w.cells[last - 1];
    let block = if level.offset_bits > 0 {
        e.bink(BinaryOp::Add, parent, level.offset_bits / WORD_BITS)
    } else {
        parent
    };
    (block, w.active)
}
