//! Taichi's global data access rule, checked on a tape before it is
//! differentiated, so that a tape either gets exact gradients or a clear
//! error (never a silently wrong gradient).
//!
//! An adjoint kernel recomputes its primal values from the fields as they
//! are when it runs (after every later launch of the tape ran forward), and
//! the adjoint of a plain store reads the gradient of the element it wrote
//! without clearing it. So, inside one tape span, per field element:
//! - an element that a launch **read** may not be **overwritten** later (by a
//!   store, `+=` or any atomic): the backward pass would see the new value
//!   (rule `read-then-overwrite`);
//! - an element may be **stored** (non-atomically) only once; later writes
//!   must accumulate (`+=`): otherwise the gradient of the first value would
//!   be counted as if it were still there (rule `written-twice`);
//! - inside one kernel, a field may not be read after the kernel wrote it
//!   (rule `read-after-write`).
//!
//! The check is element aware along the **first index axis** (the time axis
//! by convention): an index that is a constant, or a kernel scalar plus or
//! minus a constant, names one slot of that axis; any other index (a loop
//! index, a value read from a field) may be any slot. The tape's schedule is
//! unrolled with the values that `repeat` nodes give their index scalars, so
//! `x[(t + 1, i)] = f(x[(t, i)])` inside `repeat(index: t)` is accepted while
//! `x[i] = f(x[i])` in a repeat is refused. Other kernel scalars are
//! unknowns: the same scalar with different offsets names different slots,
//! anything else may overlap. The check is conservative: a graph it accepts
//! has exact gradients; a few exact ones (writes to disjoint halves of a
//! field through the same loop index) are refused with the fix to apply.

use super::AdError;
use crate::ir::*;
use std::collections::HashMap;

/// Where along a field's first axis an access lands, as the kernel states it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum SlotExpr {
    Any,
    At(i64),
    /// Kernel scalar (parameter index) plus a constant.
    Param(u32, i64),
}

/// A slot once a launch's repeat indices are known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Slot {
    Any,
    At(i64),
    /// A kernel scalar that no repeat sets, plus a constant.
    Sym(KernelId, u32, i64),
}

impl Slot {
    fn overlaps(self, o: Slot) -> bool {
        match (self, o) {
            (Slot::At(a), Slot::At(b)) => a == b,
            (Slot::Sym(k, p, a), Slot::Sym(k2, p2, b)) if k == k2 && p == p2 => a == b,
            _ => true,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Read,
    Store,
    Atomic,
}

#[derive(Clone, Copy, Debug)]
struct Event {
    field: FieldId,
    slot: SlotExpr,
    kind: Kind,
    span: Span,
}

/// Who made an access: the kernel, the line and the repeat indices then.
#[derive(Clone, Debug, PartialEq)]
struct Who {
    kernel: KernelId,
    span: Span,
    when: String,
    /// Part of a checkpointed tape: 0 before its repeat, 1 in it, 2 after.
    part: u8,
}

/// The accesses of a kernel's entry in program order.
fn events(k: &Kernel) -> Vec<Event> {
    fn slot(f: &Function, v: InstId) -> SlotExpr {
        match &f.insts[v].kind {
            InstKind::Const(c) => match c.scalar {
                crate::types::Scalar::I32 => SlotExpr::At(c.bits as i32 as i64),
                crate::types::Scalar::U32 => SlotExpr::At(c.bits as i64),
                _ => SlotExpr::Any,
            },
            InstKind::Param(p) => SlotExpr::Param(*p, 0),
            InstKind::Binary(op @ (BinaryOp::Add | BinaryOp::Sub), a, b) => {
                let sign = if *op == BinaryOp::Sub { -1 } else { 1 };
                match (slot(f, *a), slot(f, *b)) {
                    (SlotExpr::At(x), SlotExpr::At(y)) => SlotExpr::At(x + sign * y),
                    (SlotExpr::Param(p, x), SlotExpr::At(y)) => SlotExpr::Param(p, x + sign * y),
                    (SlotExpr::At(x), SlotExpr::Param(p, y)) if sign == 1 => {
                        SlotExpr::Param(p, x + y)
                    }
                    _ => SlotExpr::Any,
                }
            }
            _ => SlotExpr::Any,
        }
    }
    fn walk(f: &Function, b: &Block, out: &mut Vec<Event>) {
        for &i in b {
            let inst = &f.insts[i];
            let (field, index, kind) = match &inst.kind {
                InstKind::FieldLoad { field, index } => (*field, index, Kind::Read),
                InstKind::FieldStore { field, index, .. } => (*field, index, Kind::Store),
                InstKind::FieldAtomic { field, index, .. } => (*field, index, Kind::Atomic),
                _ => {
                    for nb in inst.kind.blocks() {
                        walk(f, nb, out);
                    }
                    continue;
                }
            };
            let slot = index.first().map_or(SlotExpr::At(0), |&v| slot(f, v));
            out.push(Event {
                field,
                slot,
                kind,
                span: inst.span,
            });
        }
    }
    let mut out = Vec::new();
    walk(&k.entry, &k.entry.body, &mut out);
    out
}

/// The accesses seen so far in one tape span (or one kernel).
#[derive(Default)]
struct Seen {
    /// Accesses at known slots: field → slot → (kind, who), deduplicated.
    at: HashMap<FieldId, HashMap<i64, Vec<(Kind, Who)>>>,
    /// Accesses at any or symbolic slots, deduplicated.
    other: HashMap<FieldId, Vec<(Slot, Kind, Who)>>,
}

impl Seen {
    /// An earlier access of `field` overlapping `slot` of one of `kinds`.
    fn find(&self, field: FieldId, slot: Slot, kinds: &[Kind]) -> Option<(Kind, &Who)> {
        if let Some(m) = self.at.get(&field) {
            fn hit<'w>(v: &'w [(Kind, Who)], kinds: &[Kind]) -> Option<(Kind, &'w Who)> {
                v.iter()
                    .find(|(k, _)| kinds.contains(k))
                    .map(|(k, w)| (*k, w))
            }
            match slot {
                Slot::At(s) => {
                    if let Some(h) = m.get(&s).and_then(|v| hit(v, kinds)) {
                        return Some(h);
                    }
                }
                _ => {
                    // The earliest slot, so that errors do not depend on hashing.
                    let mut slots: Vec<&i64> = m.keys().collect();
                    slots.sort();
                    for s in slots {
                        if let Some(h) = hit(&m[s], kinds) {
                            return Some(h);
                        }
                    }
                }
            }
        }
        self.other.get(&field).and_then(|v| {
            v.iter()
                .find(|(s, k, _)| kinds.contains(k) && s.overlaps(slot))
                .map(|(_, k, w)| (*k, w))
        })
    }
    fn record(&mut self, field: FieldId, slot: Slot, kind: Kind, who: Who) {
        match slot {
            Slot::At(s) => {
                let v = self.at.entry(field).or_default().entry(s).or_default();
                if !v
                    .iter()
                    .any(|(k, w)| *k == kind && w.kernel == who.kernel && w.span == who.span)
                {
                    v.push((kind, who));
                }
            }
            _ => {
                let v = self.other.entry(field).or_default();
                if !v.iter().any(|(s, k, w)| {
                    *s == slot && *k == kind && w.kernel == who.kernel && w.span == who.span
                }) {
                    v.push((slot, kind, who));
                }
            }
        }
    }
}

struct Checker<'a> {
    program: &'a Program,
    tape: &'a str,
    events: HashMap<KernelId, Vec<Event>>,
    seen: Seen,
    /// Enclosing repeats: (repeat node, index scalar, current value).
    indices: Vec<(String, Option<String>, u32)>,
    /// Checkpointed tapes: the state fields, restored before every adjoint
    /// of the repeat and of the part before it, and the current part.
    restored: Vec<FieldId>,
    part: u8,
}

impl Checker<'_> {
    fn who_text(&self, w: &Who) -> String {
        format!(
            "kernel '{}' (line {}{})",
            self.program.kernels[w.kernel].name, w.span.line, w.when
        )
    }

    fn field_name(&self, f: FieldId) -> &str {
        &self.program.fields[f].name
    }

    fn launch(&mut self, k: KernelId) -> Result<(), AdError> {
        let evs = self
            .events
            .entry(k)
            .or_insert_with(|| events(&self.program.kernels[k]))
            .clone();
        let kernel = &self.program.kernels[k];
        let when: String = self
            .indices
            .iter()
            .filter_map(|(node, index, v)| {
                index
                    .as_ref()
                    .map(|n| format!(", repeat '{}' with {} = {}", node, n, v))
            })
            .collect();
        for e in evs {
            let slot = match e.slot {
                SlotExpr::Any => Slot::Any,
                SlotExpr::At(s) => Slot::At(s),
                SlotExpr::Param(p, off) => {
                    let name = &kernel.params[p as usize].name;
                    // The innermost repeat with that index name sets it.
                    match self
                        .indices
                        .iter()
                        .rev()
                        .find(|(_, idx, _)| idx.as_deref() == Some(name.as_str()))
                    {
                        Some((_, _, v)) => Slot::At(*v as i64 + off),
                        None => Slot::Sym(k, p, off),
                    }
                }
            };
            let who = Who {
                kernel: k,
                span: e.span,
                when: when.clone(),
                part: self.part,
            };
            self.check(e.field, slot, e.kind, &who)?;
            self.seen.record(e.field, slot, e.kind, who);
        }
        Ok(())
    }

    fn check(&self, field: FieldId, slot: Slot, kind: Kind, who: &Who) -> Result<(), AdError> {
        let err = |message: String| AdError {
            node: self.program.kernels[who.kernel].name.clone(),
            span: who.span,
            message,
        };
        let name = self.field_name(field);
        // In a checkpointed tape, a later write to a state field is undone
        // (the state restored) before the adjoints of the repeat and of what
        // came before it run; only writes after the repeat to what was read
        // after it still matter.
        let undone = |earlier: &Who| {
            self.restored.contains(&field) && (earlier.part != who.part || who.part == 1)
        };
        match kind {
            Kind::Read => Ok(()),
            Kind::Store | Kind::Atomic => {
                if let Some((_, r)) = self
                    .seen
                    .find(field, slot, &[Kind::Read])
                    .filter(|(_, r)| !undone(r))
                {
                    return Err(err(format!(
                        "field '{}' is read by {} and overwritten later in tape '{}' by {}; the backward pass of the read would see the new values instead of the ones read, and the gradient would be wrong (global data access rule). Fix: keep every state on a time axis (read {}[(t, i)], write {}[(t + 1, i)] with t the index of a repeat) or write the new values to another field",
                        name,
                        self.who_text(r),
                        self.tape,
                        self.who_text(who),
                        name,
                        name
                    )));
                }
                if kind == Kind::Store {
                    if let Some((_, w)) = self
                        .seen
                        .find(field, slot, &[Kind::Store, Kind::Atomic])
                        .filter(|(_, w)| !undone(w))
                    {
                        return Err(err(format!(
                            "field '{}' is written by {} and written again by {} in tape '{}'; the gradient of the first value would be counted as if it were still there (global data access rule: inside a tape an element is stored once, later writes must be `+=`). Fix: write each step to its own slot of a time axis ({}[(t + 1, i)] with t the index of a repeat), accumulate with `+=`, or write to another field",
                            name,
                            self.who_text(w),
                            self.who_text(who),
                            self.tape,
                            name
                        )));
                    }
                }
                Ok(())
            }
        }
    }

    fn steps(&mut self, steps: &[Step]) -> Result<(), AdError> {
        for s in steps {
            match s {
                Step::Launch(k) => self.launch(*k)?,
                Step::Repeat {
                    node_id,
                    count,
                    index,
                    reverse,
                    start,
                    body,
                } => {
                    for it in 0..*count {
                        let v = start + if *reverse { count - 1 - it } else { it };
                        self.indices.push((node_id.clone(), index.clone(), v));
                        let r = self.steps(body);
                        self.indices.pop();
                        r?;
                    }
                }
                // `passes::optimize` expanded every optimize node before
                // this pass; the graph builder refuses one inside a tape.
                Step::Tape { body, .. } | Step::Optimize { body, .. } => self.steps(body)?,
                // Refused inside tapes by the graph builder.
                Step::Clear { .. } | Step::ListGen { .. } => {}
            }
        }
        Ok(())
    }
}

/// Checks the rule inside one kernel: no read of a field after the kernel
/// wrote it, and the same element neither read then overwritten nor stored
/// twice (all threads of a launch are one access here). `in_place`: a
/// kernel of a checkpointed repeat, whose adjoint runs on the state as it
/// was before the launch, so it may overwrite what it read (`x[i] = x[i] +
/// ...`; threads must then read only the elements they write, as the
/// forward pass already needs).
pub(super) fn check_kernel(program: &Program, k: KernelId, in_place: bool) -> Result<(), AdError> {
    let kernel = &program.kernels[k];
    refuse_append(program, kernel, &kernel.entry.body)?;
    let mut written: Vec<(FieldId, Slot, Span)> = Vec::new();
    let mut c = Checker {
        program,
        tape: "",
        events: HashMap::new(),
        seen: Seen::default(),
        indices: Vec::new(),
        restored: Vec::new(),
        part: 0,
    };
    for e in events(kernel) {
        let slot = match e.slot {
            SlotExpr::Any => Slot::Any,
            SlotExpr::At(s) => Slot::At(s),
            SlotExpr::Param(p, off) => Slot::Sym(k, p, off),
        };
        let name = &program.fields[e.field].name;
        if e.kind == Kind::Read {
            if let Some((_, _, w)) = written
                .iter()
                .find(|(f, s, _)| *f == e.field && s.overlaps(slot))
            {
                return Err(AdError {
                    node: kernel.name.clone(),
                    span: e.span,
                    message: format!(
                        "reads field '{}' after writing it at {} in the same kernel; the backward pass would recompute this read from the overwritten value (global data access rule). Fix: read the value into a local before writing, write to another field or a new slot of a time axis, or split the kernel in two",
                        name, w
                    ),
                });
            }
        } else {
            written.push((e.field, slot, e.span));
        }
        let who = Who {
            kernel: k,
            span: e.span,
            when: String::new(),
            part: 0,
        };
        if e.kind != Kind::Read {
            if let Some((_, r)) = c
                .seen
                .find(e.field, slot, &[Kind::Read])
                .filter(|_| !in_place)
            {
                return Err(AdError {
                    node: kernel.name.clone(),
                    span: e.span,
                    message: format!(
                        "overwrites field '{}', which this kernel read at line {}; the backward pass would recompute that read from the new value (global data access rule). Fix: write the result to another field, or to a new slot of a time axis ({}[(t + 1, i)] from {}[(t, i)])",
                        name, r.span.line, name, name
                    ),
                });
            }
            if e.kind == Kind::Store {
                if let Some((_, w)) = c.seen.find(e.field, slot, &[Kind::Store, Kind::Atomic]) {
                    return Err(AdError {
                        node: kernel.name.clone(),
                        span: e.span,
                        message: format!(
                            "stores to field '{}' again after writing it at line {} in the same kernel; the gradient of the first value would be counted as if it were still there (global data access rule). Fix: compute the final value in a local and store it once, or accumulate with `+=`",
                            name, w.span.line
                        ),
                    });
                }
            }
        }
        c.seen.record(e.field, slot, e.kind, who);
    }
    Ok(())
}

/// The adjoint replays the forward body, so an `append` would grow its list
/// twice: refused inside tapes.
fn refuse_append(program: &Program, kernel: &Kernel, b: &Block) -> Result<(), AdError> {
    for &i in b {
        let inst = &kernel.entry.insts[i];
        if let InstKind::FieldAppend { field, .. } = &inst.kind {
            return Err(AdError {
                node: kernel.name.clone(),
                span: inst.span,
                message: format!(
                    "`append` to field '{}' cannot be inside a tape (the backward pass would append again); fill the list before the tape",
                    program.fields[*field].name
                ),
            });
        }
        for nb in inst.kind.blocks() {
            refuse_append(program, kernel, nb)?;
        }
    }
    Ok(())
}

/// Checks the rule across the launches of a tape's body, unrolled.
pub(super) fn check_tape(program: &Program, tape: &str, body: &[Step]) -> Result<(), AdError> {
    let mut c = Checker {
        program,
        tape,
        events: HashMap::new(),
        seen: Seen::default(),
        indices: Vec::new(),
        restored: Vec::new(),
        part: 0,
    };
    c.steps(body)
}

/// Checks a checkpointed tape: the part before the repeat, one step of
/// the repeat, the part after it; overwrites of state fields that the
/// restoring undoes are allowed.
pub(super) fn check_checkpointed(
    program: &Program,
    tape: &str,
    plan: &super::checkpoint::Plan,
) -> Result<(), AdError> {
    let mut c = Checker {
        program,
        tape,
        events: HashMap::new(),
        seen: Seen::default(),
        indices: Vec::new(),
        restored: plan.state.clone(),
        part: 0,
    };
    c.steps(&plan.prefix)?;
    c.part = 1;
    c.indices
        .push((plan.repeat_node.clone(), Some(plan.index.clone()), 0));
    for &k in &plan.body {
        c.launch(k)?;
    }
    c.indices.pop();
    c.part = 2;
    c.steps(&plan.suffix)
}
