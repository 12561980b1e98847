//! Task fusion (Taichi thesis ch. 4): two consecutive launches over the
//! same iteration space become one kernel whose invocation runs the first
//! kernel's body, then the second's, where no invocation can tell.
//!
//! Pre: abstract IR (accesses name their fields; no traps, no buffers),
//! after `list_reuse` (a list step between two struct-fors keeps them
//! apart). Post: every fusable pair `Launch(A), Launch(B)` of a step list
//! is `Launch(AB)`, AB a new kernel: A's entry followed by B's, A's scalars
//! then B's, A's helpers then B's, `Kernel::fused` naming B's node (and
//! every instruction and scalar its node, `Span::part` /
//! `KernelParam::part`, so errors and `set_param` still find their node).
//! A fused kernel fuses again with the next launch. Across repeat bodies:
//! a `repeat` whose body is (after fusion) one launch of a kernel K that
//! is fusable with itself, and whose index scalar K does not have, becomes
//! one launch of K's body looped `count` times in each invocation (and may
//! then fuse with its neighbours). A and B stay in the arena. The same run
//! fused twice is one kernel.
//!
//! A pair is fusable when
//! - both iterate the same space: the same range, or struct-fors over
//!   fields on one layout node (the same cells, the same list);
//! - neither is opaque, runs in workgroups, is bounded by a device count,
//!   or draws random numbers (streams are per kernel node and launch);
//! - at most one of them may fault (`sfg::Effects::may_fault`: an access
//!   off the invocation's own element, a `for` whose step is not a
//!   positive constant, a `loop`, a capacity), so a run that faults reports the same
//!   fault (fields after a fault hold a partly run frame on every backend,
//!   as without fusion);
//! - A's entry has no `return` (it would skip B's body);
//! - every field that one of them writes and both touch is accessed by
//!   both only at the invocation's own element, in the entry function
//!   (`KnownActive::own_cell`), by loads, stores and atomics: invocation
//!   `i` of B then sees at element `i` exactly what invocation `i` of A
//!   left there, which is what it saw after the whole of A, and no other
//!   invocation touches element `i`;
//! - no sparse tree's mask or list is written by one of them and read or
//!   written by the other, and neither touches a word view (a field whose
//!   words alias other fields').
//!
//! Results are bit for bit those of the two launches.

use super::sfg::{effects_of, State};
use crate::arena::Handle;
use crate::ir::steps;
use crate::ir::*;
use crate::lower::activation_demotion::KnownActive;
use crate::Type;
use std::collections::{BTreeMap, HashMap};

pub fn run(program: &mut Program) {
    let mut s = std::mem::take(&mut program.schedule);
    let mut made = HashMap::new();
    for list in s.lists_mut() {
        steps::walk_lists_mut(list, &mut |l| fuse_list(program, l, &mut made));
    }
    program.schedule = s;
}

/// What a made kernel replaces: a run of launches, or a repeat of one.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Key {
    Run(Vec<KernelId>),
    Loop(KernelId, u32),
}

/// Fused kernels already made, by what they replace.
type Made = HashMap<Key, KernelId>;

/// Fuses one step list (the lists inside it are already fused).
fn fuse_list(p: &mut Program, steps: &mut Vec<Step>, made: &mut Made) {
    // A repeat of one launch whose invocations cannot see each other runs
    // as one launch looping in each invocation (fusion across the bodies).
    for s in steps.iter_mut() {
        if let Step::Repeat {
            count, body, index, ..
        } = s
        {
            let Some(&[Step::Launch(k)]) = Some(body.as_slice()) else {
                continue;
            };
            // An index scalar the kernel reads changes between repetitions.
            let indexed = index
                .as_ref()
                .is_some_and(|n| p.kernels[k].params.iter().any(|q| &q.name == n));
            if !indexed
                && (2..=i32::MAX as u32).contains(count)
                && fusable(p, &p.kernels[k], &p.kernels[k])
            {
                let count = *count;
                let looped = *made
                    .entry(Key::Loop(k, count))
                    .or_insert_with(|| p.kernels.append(looped(&p.kernels[k], count)));
                *s = Step::Launch(looped);
            }
        }
    }
    let launch = |s: &Step| match s {
        Step::Launch(k) => Some(*k),
        _ => None,
    };
    // The list is rebuilt rather than spliced in place: a splice per fused
    // run moved the rest of the list each time (quadratic in its length).
    let mut old: Vec<Option<Step>> = std::mem::take(steps).into_iter().map(Some).collect();
    let launch = |s: Option<&Option<Step>>| s.and_then(|s| s.as_ref()).and_then(launch);
    // The summary of the launch that ended the last run (the next run's
    // first), so that no kernel is summarised twice.
    let mut carried: Option<(KernelId, Summary)> = None;
    let mut i = 0;
    while i < old.len() {
        let Some(first) = launch(old.get(i)) else {
            steps.extend(old[i].take());
            i += 1;
            continue;
        };
        // The longest run of launches from `i` that fuse one after another:
        // `joined` (made on the first fusion) and what `fusable` reads of
        // it, kept up to date as the run grows instead of recomputed from
        // the whole run at every step.
        let mut run = vec![first];
        let mut joined: Option<Kernel> = None;
        let mut summary = match carried.take() {
            Some((k, s)) if k == first => s,
            _ => Summary::of(p, &p.kernels[first]),
        };
        while let Some(next) = launch(old.get(i + run.len())) {
            let next_summary = Summary::of(p, &p.kernels[next]);
            let current = joined.as_ref().unwrap_or(&p.kernels[first]);
            if !fusable_with(p, current, &summary, &p.kernels[next], &next_summary) {
                carried = Some((next, next_summary));
                break;
            }
            let j = joined.get_or_insert_with(|| p.kernels[first].clone());
            fuse_into(j, &p.kernels[next]);
            summary = summary.then(p, j, next_summary);
            run.push(next);
        }
        let n = run.len();
        match joined {
            Some(joined) => {
                let k = *made
                    .entry(Key::Run(run))
                    .or_insert_with(|| p.kernels.append(joined));
                steps.push(Step::Launch(k));
            }
            None => steps.extend(old[i].take()),
        }
        i += n;
    }
}

/// `k`'s body `count` times in each invocation: a `repeat` whose body is
/// one launch of `k`, where `fusable(k, k)` (no invocation sees another's
/// effects, `k` cannot fault), so invocation `i` may run its `count`
/// iterations back to back. The counter is unused (a repeat whose index
/// scalar the kernel has is not looped).
fn looped(k: &Kernel, count: u32) -> Kernel {
    let mut out = k.clone();
    let f = &mut out.entry;
    let mut int = |v: u32| {
        f.detached(
            InstKind::Const(Const::i32(v as i32)),
            Type::I32,
            Span::default(),
        )
    };
    let (begin, end, step) = (int(0), int(count), int(1));
    let body = std::mem::take(&mut f.body);
    let lp = f.detached(
        InstKind::RangeFor {
            begin,
            end,
            step,
            inclusive: false,
            body,
        },
        Type::Void,
        Span::default(),
    );
    f.body = vec![begin, end, step, lp];
    out
}

/// How one kernel touches one field.
#[derive(Clone, Copy, Debug, Default)]
struct Use {
    write: bool,
    /// Some access is not a load, store or atomic at the invocation's own
    /// element in the entry function.
    elsewhere: bool,
}

fn uses(p: &Program, k: &Kernel) -> BTreeMap<FieldId, Use> {
    let known = KnownActive::new(p, k);
    let mut out: BTreeMap<FieldId, Use> = BTreeMap::new();
    let functions = std::iter::once(&k.entry).chain(k.functions.iter().map(|(_, f)| f));
    for (fi, f) in functions.enumerate() {
        for (_, inst) in f.insts.iter() {
            let (field, write, own) = match &inst.kind {
                InstKind::FieldLoad { field, index }
                | InstKind::FieldIsActive { field, index, .. } => {
                    (*field, false, known.own_cell(p, f, fi == 0, *field, index))
                }
                InstKind::FieldStore { field, index, .. }
                | InstKind::FieldAtomic { field, index, .. }
                | InstKind::FieldActivate { field, index } => {
                    (*field, true, known.own_cell(p, f, fi == 0, *field, index))
                }
                InstKind::FieldDeactivate { field, .. } | InstKind::FieldAppend { field, .. } => {
                    (*field, true, false)
                }
                InstKind::FieldLength { field, .. } => (*field, false, false),
                _ => continue,
            };
            let u = out.entry(field).or_default();
            u.write |= write;
            u.elsewhere |= !own;
        }
    }
    out
}

fn draws_random(k: &Kernel) -> bool {
    std::iter::once(&k.entry)
        .chain(k.functions.iter().map(|(_, f)| f))
        .any(|f| {
            f.insts.iter().any(|(_, i)| {
                matches!(
                    i.kind,
                    InstKind::Random
                        | InstKind::Launch(_)
                        | InstKind::RngLoad
                        | InstKind::RngStore(_)
                )
            })
        })
}

fn has_return(f: &Function, b: &Block) -> bool {
    b.iter().any(|&h| {
        matches!(f.insts[h].kind, InstKind::Return(_))
            || f.insts[h].kind.blocks().iter().any(|nb| has_return(f, nb))
    })
}

fn same_space(p: &Program, a: &Kernel, b: &Kernel) -> bool {
    a.dims == b.dims
        && match (&a.iteration, &b.iteration) {
            (Iteration::Range(x), Iteration::Range(y)) => x == y,
            (Iteration::Field(f), Iteration::Field(g)) => {
                p.fields[*f].layout == p.fields[*g].layout
                    && p.fields[*f].shape == p.fields[*g].shape
            }
            _ => false,
        }
}

/// What [`fusable`] reads of a kernel beyond its iteration space and
/// flags: computed once per kernel and, for a growing run, merged
/// ([`Summary::then`]) rather than recomputed from the whole run each time.
#[derive(Clone, Debug)]
struct Summary {
    /// `effects_of` the kernel (less `covers`, which fusion does not read).
    effects: super::sfg::Effects,
    uses: BTreeMap<FieldId, Use>,
    random: bool,
    /// The entry has a `return`.
    ret: bool,
}

impl Summary {
    fn of(p: &Program, k: &Kernel) -> Summary {
        Summary {
            effects: effects_of(p, k),
            uses: uses(p, k),
            random: draws_random(k),
            ret: has_return(&k.entry, &k.entry.body),
        }
    }

    /// Whether some state of the summary is a sparse tree's mask or list.
    fn sparse(&self) -> bool {
        let structure = |s: &State| matches!(s, State::Mask(_) | State::List(_));
        self.effects.reads.iter().any(structure) || self.effects.writes.iter().any(structure)
    }

    /// The summary of `joined`, the kernel `fuse` made of the kernel `self`
    /// describes followed by the one `next` describes. Every instruction of
    /// `joined` is one of the two kernels', in the same function (entry or
    /// helper), at the same level of the entry, over the same iteration
    /// space, so each contributes to the uses, the random and return flags
    /// and the dense effects what it contributed in its own kernel: the
    /// summary is the union. Only a write into a sparse field depends on
    /// the whole kernel (`KnownActive`: a deactivation anywhere in it), so
    /// when either side touches a sparse tree `joined` is read afresh.
    fn then(mut self, p: &Program, joined: &Kernel, next: Summary) -> Summary {
        if self.sparse() || next.sparse() {
            return Summary::of(p, joined);
        }
        self.effects.union(&next.effects);
        for (f, u) in next.uses {
            let v = self.uses.entry(f).or_default();
            v.write |= u.write;
            v.elsewhere |= u.elsewhere;
        }
        self.random |= next.random;
        self.ret |= next.ret;
        self
    }
}

/// Whether launching `ka` then `kb` may run as one kernel (see the module doc).
pub fn fusable(p: &Program, ka: &Kernel, kb: &Kernel) -> bool {
    fusable_with(p, ka, &Summary::of(p, ka), kb, &Summary::of(p, kb))
}

/// [`fusable`] with the kernels' summaries at hand.
fn fusable_with(p: &Program, ka: &Kernel, sa: &Summary, kb: &Kernel, sb: &Summary) -> bool {
    let plain = |k: &Kernel, s: &Summary| {
        k.workgroup.is_none() && k.count_from.is_none() && k.fault_sites.is_empty() && !s.random
    };
    if !same_space(p, ka, kb) || !plain(ka, sa) || !plain(kb, sb) || sa.ret {
        return false;
    }
    let (ea, eb) = (&sa.effects, &sb.effects);
    if ea.opaque || eb.opaque || (ea.may_fault && eb.may_fault) {
        return false;
    }
    // Masks and lists: no order between the two may matter.
    let structure = |s: &State| matches!(s, State::Mask(_) | State::List(_));
    let conflict = |x: &super::sfg::Effects, y: &super::sfg::Effects| {
        x.writes
            .iter()
            .filter(|s| structure(s))
            .any(|s| y.reads(*s) || y.writes(*s))
    };
    if conflict(ea, eb) || conflict(eb, ea) {
        return false;
    }
    let (ua, ub) = (&sa.uses, &sb.uses);
    let word_view = |f: &FieldId| p.word_views.iter().any(|&(_, w)| w == *f);
    if ua.keys().chain(ub.keys()).any(word_view) {
        return false;
    }
    ua.iter().all(|(f, x)| match ub.get(f) {
        Some(y) if x.write || y.write => !x.elsewhere && !y.elsewhere,
        _ => true,
    })
}

/// Where B's code goes in the fused kernel.
struct Shift {
    insts: usize,
    locals: usize,
    params: u32,
    funcs: usize,
    part: u16,
}

impl Shift {
    fn inst(&self, mut inst: Inst) -> Inst {
        let id = |h: InstId| Handle::new(h.index() + self.insts);
        inst.kind.map_operands(id);
        match &mut inst.kind {
            InstKind::LocalLoad(l) | InstKind::LocalStore(l, _) => {
                *l = Handle::new(l.index() + self.locals)
            }
            InstKind::LoopCounter(l) => *l = id(*l),
            InstKind::Param(n) => *n += self.params,
            InstKind::Call(fid, _) => *fid = Handle::new(fid.index() + self.funcs),
            _ => {}
        }
        for b in inst.kind.blocks_mut() {
            for h in b.iter_mut() {
                *h = id(*h);
            }
        }
        inst.span.part += self.part;
        inst
    }
}

/// Makes `k` the kernel running its own body, then `b`'s, per invocation
/// (in place: a run of n launches is fused in time linear in its length).
fn fuse_into(k: &mut Kernel, b: &Kernel) {
    let part = 1 + k.fused.len() as u16;
    k.fused.push(b.name.clone());
    k.fused.extend(b.fused.iter().cloned());
    let params = k.params.len() as u32;
    k.params.extend(b.params.iter().map(|q| KernelParam {
        part: q.part + part,
        ..q.clone()
    }));
    k.bindings.extend(b.bindings.iter().cloned());
    let funcs = k.functions.len();
    for (_, f) in b.functions.iter() {
        let shift = Shift {
            insts: 0,
            locals: 0,
            params,
            funcs,
            part,
        };
        let mut g = f.clone();
        for h in g.insts.handles().collect::<Vec<_>>() {
            g.insts[h] = shift.inst(g.insts[h].clone());
        }
        k.functions.append(g);
    }
    let shift = Shift {
        insts: k.entry.insts.len(),
        locals: k.entry.locals.len(),
        params,
        funcs,
        part,
    };
    for (_, l) in b.entry.locals.iter() {
        k.entry.locals.append(l.clone());
    }
    for (_, inst) in b.entry.insts.iter() {
        k.entry.adopt(shift.inst(inst.clone()));
    }
    k.entry.body.extend(
        b.entry
            .body
            .iter()
            .map(|h| Handle::new(h.index() + shift.insts)),
    );
}
