//! Common subexpression elimination over structured blocks.
//!
//! Pre: valid IR of any form. Post: valid IR of the same form in which no
//! value-numbered instruction (below) repeats an equal instruction that
//! dominates it; each repeat is dropped from its block and its uses read the
//! earlier value.
//!
//! Dominance in structured control flow is lexical: an instruction dominates
//! the rest of its block and every block nested in it. So the pass walks
//! blocks in order with a stack of scopes; a value found in an enclosing
//! scope is reused, while values of an `if` branch or a loop body are
//! forgotten when the walk leaves it.
//!
//! A guard `if c { trap }` (legalized bounds and step checks) that repeats
//! a dominating guard on the same condition is dropped too: the invocation
//! stops at the first one, so the second can never fire. Repeated accesses
//! to one field element are thus checked once.
//!
//! Instructions whose result depends on their operands alone are numbered:
//! constants, arguments, parameters, the frame number, arithmetic,
//! comparisons, selects, casts, vector/matrix construction and access at
//! constant indices, and built-ins. Reusing an equal computation gives the
//! same bits, so results never change; this is why lowered address
//! arithmetic, which repeats the same index math for every access to a
//! field, shrinks for every backend at once.
//!
//! Buffer loads (`BufLoad`) are numbered too, until something may write
//! their word: a store on their root forgets the root's loads in every
//! enclosing scope (what follows the `if` or loop holding it may see the
//! new value) except those at the same base address plus a different
//! constant (`a + 2` is not `a + 7` in any wrap-around), an atomic forgets
//! all of its root's loads, and so does any other instruction that may
//! write memory (calls, field writes, activation) for every root. A store
//! also numbers its word as a load of the stored value's type: a later load
//! of that word in that type reads the value just stored. A loop's body
//! is scanned for writes before it is walked, since its second iteration
//! sees what the first wrote after the load. So a repeated load returns
//! what the invocation itself last left there; this is the interpreter's
//! semantics, where invocations never interleave (parallel backends
//! interleave them only for programs that race on non-atomic accesses).
//! Unrolled stencils read a particle's fields once instead of once per
//! cell. Loads of locals or fields, `random()`, loop counters, dynamic
//! indexing (which checks its index), calls and everything with an effect
//! are left alone.

use crate::ir::*;
use crate::types::Type;
use std::collections::HashMap;

pub fn run(program: &mut Program) {
    super::each_function(program, cse_function);
}

pub fn cse_function(f: &mut Function) {
    let mut walk = Walk {
        scopes: vec![HashMap::new()],
        words: HashMap::new(),
        subst: HashMap::new(),
    };
    let body = std::mem::take(&mut f.body);
    f.body = walk.block(f, body);
}

/// An instruction's identity for numbering: its kind with operands already
/// replaced, and its type.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Key(String);

struct Walk {
    scopes: Vec<HashMap<Key, InstId>>,
    /// Numbered loads' words: root, then address as base + offset.
    words: HashMap<Key, (LayoutId, InstId, u32)>,
    /// Dropped instruction → the earlier equal value its uses now read.
    subst: HashMap<InstId, InstId>,
}

impl Walk {
    fn block(&mut self, f: &mut Function, block: Block) -> Block {
        let mut out = Vec::with_capacity(block.len());
        for h in block {
            let subst = &self.subst;
            f.insts[h]
                .kind
                .map_operands(|v| subst.get(&v).copied().unwrap_or(v));
            let mut kind = std::mem::replace(&mut f.insts[h].kind, InstKind::Break);
            if matches!(kind, InstKind::Loop { .. } | InstKind::RangeFor { .. }) {
                for b in kind.blocks() {
                    for w in writes_in(f, b) {
                        self.forget(w);
                    }
                }
            }
            if let Some(w) = writes(f, &kind) {
                self.forget(w);
            }
            for b in kind.blocks_mut() {
                self.scopes.push(HashMap::new());
                *b = self.block(f, std::mem::take(b));
                self.scopes.pop();
            }
            f.insts[h].kind = kind;
            if let Some(cond) = trap_guard(f, h) {
                // After `if c { trap }` the invocation only goes on when `c`
                // is false, so a later guard on the same `c` never fires.
                let key = Key(format!("trap_if:{:?}", cond));
                if self.scopes.iter().any(|s| s.contains_key(&key)) {
                    continue;
                }
                self.scopes.last_mut().expect("scope").insert(key, h);
                out.push(h);
                continue;
            }
            if let InstKind::BufStore { root, addr, value } = f.insts[h].kind {
                let key = word_key(root, addr, f.insts[value].ty);
                let (base, offset) = base_offset(f, addr);
                self.words.insert(key.clone(), (root, base, offset));
                self.scopes.last_mut().expect("scope").insert(key, value);
                out.push(h);
                continue;
            }
            let load = load_key(f, h);
            if let (Some(k), InstKind::BufLoad { root, addr }) = (&load, &f.insts[h].kind) {
                let (base, offset) = base_offset(f, *addr);
                self.words.insert(k.clone(), (*root, base, offset));
            }
            if let Some(key) = key(&f.insts[h].kind, f.insts[h].ty).or(load) {
                if let Some(&earlier) = self.scopes.iter().rev().find_map(|s| s.get(&key)) {
                    self.subst.insert(h, earlier);
                    continue;
                }
                self.scopes
                    .last_mut()
                    .expect("the function scope")
                    .insert(key, h);
            }
            out.push(h);
        }
        out
    }
}

impl Walk {
    /// Forgets the loads that a write may have changed.
    fn forget(&mut self, w: Written) {
        let words = &self.words;
        for scope in &mut self.scopes {
            scope.retain(|k, _| {
                if !k.0.starts_with(LOAD) {
                    return true;
                }
                let Some(&(root, base, offset)) = words.get(k) else {
                    return false;
                };
                match w {
                    Written::Everything => false,
                    Written::Root(r) => root != r,
                    Written::Word(r, b, o) => root != r || (base == b && offset != o),
                }
            });
        }
    }
}

/// Key prefix of numbered buffer loads.
const LOAD: &str = "load:";

fn root_tag(r: LayoutId) -> String {
    format!("L{}[", r.index())
}

/// A buffer load's key: its root, (already substituted) address and type.
fn load_key(f: &Function, h: InstId) -> Option<Key> {
    match f.insts[h].kind {
        InstKind::BufLoad { root, addr } => Some(word_key(root, addr, f.insts[h].ty)),
        _ => None,
    }
}

fn word_key(root: LayoutId, addr: InstId, ty: Type) -> Key {
    Key(format!("{}{}{:?}]:{:?}", LOAD, root_tag(root), addr, ty))
}

/// A u32 word address as `base + offset` (wrapping), looking through
/// additions of constants.
fn base_offset(f: &Function, addr: InstId) -> (InstId, u32) {
    let konst = |h: InstId| match f.insts[h].kind {
        InstKind::Const(c) if f.insts[h].ty == Type::U32 => Some(c.lo()),
        _ => None,
    };
    let (mut at, mut offset) = (addr, 0u32);
    while let InstKind::Binary(BinaryOp::Add, a, b) = f.insts[at].kind {
        if f.insts[at].ty != Type::U32 {
            break;
        }
        if let Some(k) = konst(b) {
            (at, offset) = (a, offset.wrapping_add(k));
        } else if let Some(k) = konst(a) {
            (at, offset) = (b, offset.wrapping_add(k));
        } else {
            break;
        }
    }
    (at, offset)
}

/// What an instruction may write, for forgetting loads.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Written {
    /// One word: root, then address as base + offset.
    Word(LayoutId, InstId, u32),
    Root(LayoutId),
    Everything,
}

/// The memory one instruction (not counting its nested blocks) may write.
fn writes(f: &Function, kind: &InstKind) -> Option<Written> {
    use InstKind::*;
    match kind {
        BufStore { root, addr, .. } => {
            let (base, offset) = base_offset(f, *addr);
            Some(Written::Word(*root, base, offset))
        }
        BufAtomic { root, .. } => Some(Written::Root(*root)),
        // Past a barrier, the block's other invocations' writes are visible.
        Barrier
        | Call(..)
        | FieldStore { .. }
        | FieldAtomic { .. }
        | FieldActivate { .. }
        | FieldDeactivate { .. }
        | FieldAppend { .. } => Some(Written::Everything),
        _ => None,
    }
}

/// Everything a block and the blocks nested in it may write.
fn writes_in(f: &Function, b: &Block) -> Vec<Written> {
    let mut out = Vec::new();
    for &h in b {
        let kind = &f.insts[h].kind;
        out.extend(writes(f, kind));
        for nested in kind.blocks() {
            out.extend(writes_in(f, nested));
        }
    }
    out
}

/// The condition of an `if c { trap }` with nothing else in it.
fn trap_guard(f: &Function, h: InstId) -> Option<InstId> {
    match &f.insts[h].kind {
        InstKind::If {
            cond,
            accept,
            reject,
        } if reject.is_empty()
            && accept.len() == 1
            && matches!(f.insts[accept[0]].kind, InstKind::Trap { .. }) =>
        {
            Some(*cond)
        }
        _ => None,
    }
}

fn key(kind: &InstKind, ty: Type) -> Option<Key> {
    value_numbered(kind).then(|| Key(format!("{:?}:{:?}", kind, ty)))
}

/// Whether the instruction's value depends on its operands alone (and it
/// has no effect and cannot fault), so equal instances are interchangeable
/// and it may be computed anywhere its operands are available.
pub fn value_numbered(kind: &InstKind) -> bool {
    use InstKind::*;
    // Pure, minus what reads memory or loop state.
    kind.is_pure()
        && !matches!(
            kind,
            LocalLoad(_)
                | FieldLoad { .. }
                | FieldIsActive { .. }
                | FieldLength { .. }
                | BufLoad { .. }
                | LoopCounter(_)
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst(f: &mut Function, kind: InstKind, ty: Type) -> InstId {
        f.detached(kind, ty, Span::default())
    }

    /// `a + b` computed twice at the top and again inside an `if`, plus a
    /// value defined inside the `if` that must not leak out of it.
    #[test]
    fn repeats_reuse_dominating_values_only() {
        let mut f = Function::new("k", vec![Type::I32], Type::Void, Span::default());
        let l = f.locals.append(Local {
            name: "x".into(),
            ty: Type::I32,
        });
        let a = inst(&mut f, InstKind::Arg(0), Type::I32);
        let one = inst(&mut f, InstKind::Const(Const::i32(1)), Type::I32);
        let s1 = inst(&mut f, InstKind::Binary(BinaryOp::Add, a, one), Type::I32);
        let one2 = inst(&mut f, InstKind::Const(Const::i32(1)), Type::I32);
        let s2 = inst(&mut f, InstKind::Binary(BinaryOp::Add, a, one2), Type::I32);
        let c = inst(&mut f, InstKind::Binary(BinaryOp::Lt, s2, a), Type::BOOL);
        let inner = inst(&mut f, InstKind::Binary(BinaryOp::Mul, s2, s2), Type::I32);
        let st_in = inst(&mut f, InstKind::LocalStore(l, inner), Type::Void);
        let branch = inst(
            &mut f,
            InstKind::If {
                cond: c,
                accept: vec![inner, st_in],
                reject: vec![],
            },
            Type::Void,
        );
        let after = inst(&mut f, InstKind::Binary(BinaryOp::Mul, s1, s1), Type::I32);
        let ld1 = inst(&mut f, InstKind::LocalLoad(l), Type::I32);
        let ld2 = inst(&mut f, InstKind::LocalLoad(l), Type::I32);
        let sum = inst(&mut f, InstKind::Binary(BinaryOp::Add, ld1, ld2), Type::I32);
        let st = inst(&mut f, InstKind::LocalStore(l, sum), Type::Void);
        let st2 = inst(&mut f, InstKind::LocalStore(l, after), Type::Void);
        f.body = vec![
            a, one, s1, one2, s2, c, branch, after, ld1, ld2, sum, st, st2,
        ];
        cse_function(&mut f);
        // The second constant and the second sum are gone; their uses read
        // the first ones.
        assert_eq!(
            f.body,
            vec![a, one, s1, c, branch, after, ld1, ld2, sum, st, st2]
        );
        assert!(
            matches!(f.insts[c].kind, InstKind::Binary(BinaryOp::Lt, x, y) if x == s1 && y == a)
        );
        assert!(
            matches!(f.insts[inner].kind, InstKind::Binary(BinaryOp::Mul, x, y) if x == s1 && y == s1)
        );
        // `after` equals `inner`, but `inner` lives in the branch: it stays.
        let InstKind::If { accept, .. } = &f.insts[branch].kind else {
            panic!("if")
        };
        assert_eq!(accept, &vec![inner, st_in]);
        // Loads of locals are never merged.
        assert!(
            matches!(f.insts[sum].kind, InstKind::Binary(BinaryOp::Add, x, y) if x == ld1 && y == ld2)
        );
    }

    /// A function `kernel(a: u32)` over two root buffers, returning what
    /// `build` put in its body, with `load(root, addr)` and
    /// `store(root, addr)` helpers.
    struct Buf {
        f: Function,
        addr: InstId,
        one: InstId,
    }

    impl Buf {
        fn new() -> Buf {
            let mut f = Function::new("k", vec![Type::U32], Type::Void, Span::default());
            let addr = inst(&mut f, InstKind::Arg(0), Type::U32);
            let one = inst(&mut f, InstKind::Const(Const::f32(1.0)), Type::F32);
            Buf { f, addr, one }
        }
        fn load(&mut self, root: usize) -> InstId {
            let kind = InstKind::BufLoad {
                root: LayoutId::new(root),
                addr: self.addr,
            };
            inst(&mut self.f, kind, Type::F32)
        }
        fn store(&mut self, root: usize) -> InstId {
            let kind = InstKind::BufStore {
                root: LayoutId::new(root),
                addr: self.addr,
                value: self.one,
            };
            inst(&mut self.f, kind, Type::Void)
        }
        fn add(&mut self, x: InstId, y: InstId) -> InstId {
            inst(
                &mut self.f,
                InstKind::Binary(BinaryOp::Add, x, y),
                Type::F32,
            )
        }
        /// Whether `sum = x + y` now reads the same load twice.
        fn merged(&self, sum: InstId) -> bool {
            matches!(self.f.insts[sum].kind, InstKind::Binary(BinaryOp::Add, x, y) if x == y)
        }
    }

    #[test]
    fn buffer_loads_merge_until_their_root_is_written() {
        // load L0; store L1; load L0 -> merged (another root was written).
        let mut b = Buf::new();
        let (l1, st, l2) = (b.load(0), b.store(1), b.load(0));
        let sum = b.add(l1, l2);
        b.f.body = vec![b.addr, b.one, l1, st, l2, sum];
        cse_function(&mut b.f);
        assert!(b.merged(sum));
        assert_eq!(b.f.body, vec![b.addr, b.one, l1, st, sum]);

        // load L0; store L0; load L0 -> kept.
        let mut b = Buf::new();
        let (l1, st, l2) = (b.load(0), b.store(0), b.load(0));
        let sum = b.add(l1, l2);
        b.f.body = vec![b.addr, b.one, l1, st, l2, sum];
        cse_function(&mut b.f);
        assert!(!b.merged(sum));

        // load L0; if c { store L0 }; load L0 -> kept.
        let mut b = Buf::new();
        let (l1, st, l2) = (b.load(0), b.store(0), b.load(0));
        let c = inst(&mut b.f, InstKind::Const(Const::bool(true)), Type::BOOL);
        let branch = inst(
            &mut b.f,
            InstKind::If {
                cond: c,
                accept: vec![st],
                reject: vec![],
            },
            Type::Void,
        );
        let sum = b.add(l1, l2);
        b.f.body = vec![b.addr, b.one, l1, c, branch, l2, sum];
        cse_function(&mut b.f);
        assert!(!b.merged(sum));
    }

    /// `load L0; loop { load L0; store <root>; break }`: whether the
    /// loop's load was merged with the outer one.
    fn loop_load_merged(written_root: usize) -> bool {
        let mut b = Buf::new();
        let (outer, inner, st) = (b.load(0), b.load(0), b.store(written_root));
        let sum = b.add(outer, inner);
        let brk = inst(&mut b.f, InstKind::Break, Type::Void);
        let lp = inst(
            &mut b.f,
            InstKind::Loop {
                body: vec![inner, sum, st, brk],
            },
            Type::Void,
        );
        b.f.body = vec![b.addr, b.one, outer, lp];
        cse_function(&mut b.f);
        b.merged(sum)
    }

    #[test]
    fn a_loop_that_writes_a_root_after_reading_it_rereads_it() {
        // The loop's load stays: its second iteration would see the store.
        assert!(!loop_load_merged(0));
        // A loop writing another root reuses the outer load.
        assert!(loop_load_merged(1));
    }

    /// The constant `k` and `addr + k` (not placed in the body).
    fn plus(b: &mut Buf, k: u32) -> (InstId, InstId) {
        let c = inst(&mut b.f, InstKind::Const(Const::u32(k)), Type::U32);
        let sum = inst(
            &mut b.f,
            InstKind::Binary(BinaryOp::Add, b.addr, c),
            Type::U32,
        );
        (c, sum)
    }

    fn store_at(b: &mut Buf, addr: InstId) -> InstId {
        let kind = InstKind::BufStore {
            root: LayoutId::new(0),
            addr,
            value: b.one,
        };
        inst(&mut b.f, kind, Type::Void)
    }

    #[test]
    fn a_store_to_another_word_of_the_root_keeps_loads() {
        // load L0[a]; store L0[a + 1]; load L0[a] -> merged: a + 1 is never a.
        let mut b = Buf::new();
        let l1 = b.load(0);
        let (c1, a1) = plus(&mut b, 1);
        let st = store_at(&mut b, a1);
        let l2 = b.load(0);
        let sum = b.add(l1, l2);
        b.f.body = vec![b.addr, b.one, l1, c1, a1, st, l2, sum];
        cse_function(&mut b.f);
        assert!(b.merged(sum));

        // load L0[a]; store L0[b]; load L0[a] -> kept: another base may
        // name the same word.
        let mut b = Buf::new();
        let other = inst(&mut b.f, InstKind::Arg(1), Type::U32);
        let l1 = b.load(0);
        let st = store_at(&mut b, other);
        let l2 = b.load(0);
        let sum = b.add(l1, l2);
        b.f.body = vec![b.addr, b.one, other, l1, st, l2, sum];
        cse_function(&mut b.f);
        assert!(!b.merged(sum));

        // An atomic on another word still forgets the root's loads.
        let mut b = Buf::new();
        let l1 = b.load(0);
        let (c1, a1) = plus(&mut b, 1);
        let at = inst(
            &mut b.f,
            InstKind::BufAtomic {
                op: AtomicOp::Add,
                root: LayoutId::new(0),
                addr: a1,
                value: b.one,
                cmp: None,
            },
            Type::F32,
        );
        let l2 = b.load(0);
        let sum = b.add(l1, l2);
        b.f.body = vec![b.addr, b.one, l1, c1, a1, at, l2, sum];
        cse_function(&mut b.f);
        assert!(!b.merged(sum));
    }

    #[test]
    fn a_load_after_a_store_to_its_word_reads_the_stored_value() {
        let mut b = Buf::new();
        let st = b.store(0);
        let l = b.load(0);
        let sum = b.add(l, l);
        b.f.body = vec![b.addr, b.one, st, l, sum];
        cse_function(&mut b.f);
        assert_eq!(b.f.body, vec![b.addr, b.one, st, sum]);
        assert!(
            matches!(b.f.insts[sum].kind, InstKind::Binary(BinaryOp::Add, x, y) if x == b.one && y == b.one)
        );
        // Read back as another type: the word's bits, not the value: kept.
        let mut b = Buf::new();
        let st = b.store(0);
        let l = inst(
            &mut b.f,
            InstKind::BufLoad {
                root: LayoutId::new(0),
                addr: b.addr,
            },
            Type::U32,
        );
        b.f.body = vec![b.addr, b.one, st, l];
        cse_function(&mut b.f);
        assert_eq!(b.f.body, vec![b.addr, b.one, st, l]);
    }
}
