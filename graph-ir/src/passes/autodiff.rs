//! Reverse-mode automatic differentiation: expands every `tape` of the
//! schedule into plain launches and gives every kernel launched inside a
//! tape an adjoint kernel.
//!
//! Pre: abstract IR after `inline` / `const_fold` / `simplify` (helpers that
//! stayed real calls are an error here). Post: abstract IR without
//! `Step::Tape`. Each tape becomes: one kernel per gradient field that zeroes
//! it, the body, one kernel that seeds every element of the loss gradient
//! with 1, then the body's launches replaced by their adjoints in reverse
//! order (each `repeat` reversed, its index counting down). Adjoint and
//! system kernels are appended to `program.kernels` and keep the name of the
//! node they come from (the kernel node, or the tape node), so run-time
//! errors name that node. Kernels outside tapes are untouched.
//!
//! The adjoint kernel of a body B runs `fwd(B); rev(B)` per invocation:
//! `fwd` recomputes the primal values without side effects (field stores and
//! atomics are dropped; the forward kernel already made them) and `rev`
//! walks B backwards, accumulating adjoints in locals. A field read becomes
//! an atomic add into the field's gradient; a store or `+=` reads the
//! gradient of the element it wrote, and a store then clears it (the value
//! it replaced gets no gradient through that element). Values of nested blocks are not visible
//! outside them, so the adjoint of an `if` recomputes its branch (from a
//! snapshot of the locals taken before the `if`) right before reversing it.
//! A range loop's adjoint runs the iterations in reverse; when the body
//! carries a local from one iteration to the next, iteration k is reached by
//! restoring the snapshot taken at loop entry and replaying iterations
//! 0..k forward (quadratic time, constant memory, and exact: no stack that
//! could overflow). Before that, `exits` rewrites `break`, `continue`, early
//! `return` into flags and every `loop`/`while` into a loop that only
//! counts its trips followed by a range loop over that count, so they all
//! take the range-loop path. `random()`, the result of an atomic, and
//! `atomic_min`/`max`/`exchange` on a field with a gradient are compile
//! errors naming the node and line — never a wrong gradient. Fields without
//! `grad: true` are constants.
//!
//! A tape with `checkpoint: k` (`checkpoint`) differs in its repeat: the
//! state is updated in place, kept every k steps, and each segment is
//! recomputed during the backward pass so that every adjoint launch sees
//! the fields its forward launch saw.
//!
//! Before any of that, `access` checks Taichi's global data access rule on
//! every kernel of the tape and on the tape's unrolled schedule (element
//! aware along a time axis): a violation is an error naming the nodes, the
//! field and the lines, because the backward pass would otherwise read
//! overwritten values and give a wrong gradient.

use crate::arena::Arena;
use crate::ir::steps::{self, Rewrite};
use crate::ir::*;
use crate::lower::emit::Build;
use crate::types::{Scalar, Type};
use std::collections::{HashMap, HashSet};

mod access;
mod checkpoint;
mod exits;
mod forward;
mod lint;
mod partials;
pub use lint::{warnings, AdWarning};

/// Why a kernel cannot be differentiated.
#[derive(Clone, Debug, PartialEq)]
pub struct AdError {
    /// The kernel (or tape) node.
    pub node: String,
    pub span: Span,
    pub message: String,
}

pub fn run(program: &mut Program) -> Result<(), AdError> {
    let mut adjoints: HashMap<KernelId, KernelId> = HashMap::new();
    let mut tangents: HashMap<KernelId, KernelId> = HashMap::new();
    let mut schedule = std::mem::take(&mut program.schedule);
    let result = (|| {
        schedule.on_start = expand(
            program,
            &mut adjoints,
            &mut tangents,
            std::mem::take(&mut schedule.on_start),
        )?;
        schedule.on_frame = expand(
            program,
            &mut adjoints,
            &mut tangents,
            std::mem::take(&mut schedule.on_frame),
        )?;
        Ok(())
    })();
    program.schedule = schedule;
    result
}

fn expand(
    program: &mut Program,
    adjoints: &mut HashMap<KernelId, KernelId>,
    tangents: &mut HashMap<KernelId, KernelId>,
    steps: Vec<Step>,
) -> Result<Vec<Step>, AdError> {
    steps::try_rewrite(steps, &mut |s| match s {
        Step::Launch(_) | Step::Clear { .. } | Step::ListGen { .. } | Step::Repeat { .. } => {
            Ok(Rewrite::Keep(s))
        }
        // `passes::optimize` runs first and leaves none.
        Step::Optimize { node_id, .. } => Err(AdError {
            node: node_id,
            span: Span::default(),
            message: "internal: an optimize node reached the autodiff pass unexpanded".into(),
        }),
        Step::Tape {
            node_id,
            mode: TapeMode::Forward { seeded },
            body,
            ..
        } => Ok(Rewrite::Into(forward::expand_tape(
            program, tangents, &node_id, &seeded, body,
        )?)),
        Step::Tape {
            node_id,
            loss,
            checkpoint,
            body,
            ..
        } => Ok(Rewrite::Into(expand_tape(
            program, adjoints, &node_id, loss, checkpoint, body,
        )?)),
    })
}

/// The steps replacing a reverse-mode tape.
fn expand_tape(
    program: &mut Program,
    adjoints: &mut HashMap<KernelId, KernelId>,
    node_id: &str,
    loss: FieldId,
    checkpoint: u32,
    body: Vec<Step>,
) -> Result<Vec<Step>, AdError> {
    let mut out = Vec::new();
    let mut launched = Vec::new();
    launches(&body, &mut launched);
    let plan = match checkpoint {
        0 => None,
        k => Some(checkpoint::plan(program, node_id, k, &body)?),
    };
    for &k in &launched {
        let in_place = plan.as_ref().is_some_and(|p| p.body.contains(&k));
        access::check_kernel(program, k, in_place)?;
    }
    match &plan {
        None => access::check_tape(program, node_id, &body)?,
        Some(p) => access::check_checkpointed(program, node_id, p)?,
    }
    for k in launched {
        if let std::collections::hash_map::Entry::Vacant(e) = adjoints.entry(k) {
            // A kernel's own `backward` code replaces the generated adjoint.
            match program.custom_backward_of(k) {
                Some(b) => {
                    e.insert(b);
                }
                None => {
                    let adj = adjoint_kernel(program, k)?;
                    e.insert(program.kernels.append(adj));
                }
            }
        }
    }
    for &(_, g) in &program.grads.clone() {
        let z = fill_kernel(program, node_id, g, 0.0);
        out.push(Step::Launch(program.kernels.append(z)));
    }
    let loss_grad = program.grad_of(loss).ok_or_else(|| AdError {
        node: node_id.to_string(),
        span: Span::default(),
        message: "the loss field has no gradient; set `\"grad\": true` on it".into(),
    })?;
    let seed = fill_kernel(program, node_id, loss_grad, 1.0);
    let seed = Step::Launch(program.kernels.append(seed));
    match plan {
        None => {
            let reversed = reverse(&body, adjoints);
            out.extend(body);
            out.push(seed);
            out.extend(reversed);
        }
        Some(p) => {
            let c = checkpoint::copies(program, node_id, &p)?;
            out.extend(p.prefix.iter().cloned());
            out.extend(p.forward(&c));
            out.extend(p.suffix.iter().cloned());
            out.push(seed);
            out.extend(reverse(&p.suffix, adjoints));
            out.extend(p.backward(&c, adjoints));
            out.extend(reverse(&p.prefix, adjoints));
            out.push(p.restore_final(&c));
        }
    }
    Ok(out)
}

/// Every kernel `steps` launches, once each, in schedule order.
fn launches(steps: &[Step], out: &mut Vec<KernelId>) {
    steps::walk(steps, &mut |s| {
        if let Step::Launch(k) = s {
            if !out.contains(k) {
                out.push(*k)
            }
        }
    });
}

/// The adjoint launches of `steps`, last launch first.
fn reverse(steps: &[Step], adjoints: &HashMap<KernelId, KernelId>) -> Vec<Step> {
    steps
        .iter()
        .rev()
        .map(|s| match s {
            Step::Launch(k) => Step::Launch(adjoints[k]),
            Step::Repeat {
                node_id,
                count,
                index,
                reverse: r,
                start,
                body,
            } => Step::Repeat {
                node_id: node_id.clone(),
                count: *count,
                index: index.clone(),
                reverse: !r,
                start: *start,
                body: reverse(body, adjoints),
            },
            // The graph builder refuses `clear` inside a tape; were one
            // here, it would have no adjoint to run.
            Step::Clear { .. } | Step::ListGen { .. } => Step::Repeat {
                node_id: String::new(),
                count: 0,
                index: None,
                reverse: false,
                start: 0,
                body: vec![],
            },
            // Nested tapes (and optimize nodes in tapes) are refused by the
            // graph builder.
            Step::Tape { body, .. } | Step::Optimize { body, .. } => Step::Repeat {
                node_id: String::new(),
                count: 1,
                index: None,
                reverse: false,
                start: 0,
                body: reverse(body, adjoints),
            },
        })
        .collect()
}

/// A kernel over `field` setting every component of every element to `value`.
fn fill_kernel(program: &Program, node: &str, field: FieldId, value: f32) -> Kernel {
    let f = &program.fields[field];
    let dims = f.shape.len();
    let mut entry = Function::new("kernel", vec![Type::I32; dims], Type::Void, Span::default());
    let mut body = Vec::new();
    let mut add = |entry: &mut Function, kind, ty| {
        let h = entry.detached(kind, ty, Span::default());
        body.push(h);
        h
    };
    let index: Vec<InstId> = (0..dims)
        .map(|d| add(&mut entry, InstKind::Arg(d as u32), Type::I32))
        .collect();
    let c = add(&mut entry, InstKind::Const(Const::f32(value)), Type::F32);
    let v = match f.ty {
        Type::Scalar(_) => c,
        Type::Vector(_, n) => add(&mut entry, InstKind::Construct(vec![c; n as usize]), f.ty),
        Type::Matrix(n) => {
            let col = Type::Vector(Scalar::F32, n);
            let cv = add(&mut entry, InstKind::Construct(vec![c; n as usize]), col);
            add(&mut entry, InstKind::Construct(vec![cv; n as usize]), f.ty)
        }
        Type::Void => c,
    };
    add(
        &mut entry,
        InstKind::FieldStore {
            field,
            index,
            value: v,
        },
        Type::Void,
    );
    entry.body = body;
    Kernel {
        fused: Vec::new(),
        name: node.to_string(),
        iteration: Iteration::Field(field),
        dims,
        params: Vec::new(),
        entry,
        functions: Arena::new(),
        bindings: vec![("field".into(), field)],
        fault_sites: Vec::new(),
        count_from: None,
        loops_end: false,
        zero_fill: None,
        workgroup: None,
    }
}

/// Shared arrays and barriers are not differentiated: a block's adjoint
/// would need its shared arrays' adjoints and barriers in reverse order.
pub(super) fn refuse_workgroup(kernel: &Kernel, mode: &str) -> Result<(), AdError> {
    refuse_wide(kernel, mode)?;
    match &kernel.workgroup {
        None => Ok(()),
        Some(w) => Err(AdError {
            node: kernel.name.clone(),
            span: kernel.entry.span,
            message: format!(
                "kernel '{}' runs in blocks (`#[block({})]`: shared arrays and barriers), which {} mode cannot differentiate; give it a `backward` of its own or compute its gradient in a kernel without `#[block]`",
                kernel.name, w.size, mode
            ),
        }),
    }
}

/// Gradients are f32 (only f32 fields have them); a differentiated kernel
/// that computes in 64 bits is refused at the first 64-bit value, with its
/// code position, rather than differentiated at the wrong precision.
fn refuse_wide(kernel: &Kernel, mode: &str) -> Result<(), AdError> {
    let first = std::iter::once(&kernel.entry)
        .chain(kernel.functions.iter().map(|(_, f)| f))
        .flat_map(|f| f.insts.iter().map(|(_, i)| i))
        .find(|i| i.ty.is_wide());
    match first {
        None => Ok(()),
        Some(i) => Err(AdError {
            node: kernel.name.clone(),
            span: i.span,
            message: format!(
                "kernel '{}' computes with {} here, which {} mode does not differentiate (gradients are f32); compute in f32, or give the kernel a `backward` of its own",
                kernel.name, i.ty, mode
            ),
        }),
    }
}

/// f16 values are not differentiated: `passes::half` rounds them with
/// integer operations, which have no derivative, and a silent zero
/// gradient would be worse than an error.
pub(super) fn refuse_f16(kernel: &Kernel, mode: &str) -> Result<(), AdError> {
    let uses = std::iter::once(&kernel.entry)
        .chain(kernel.functions.iter().map(|(_, f)| f))
        .any(Function::uses_f16);
    if !uses {
        return Ok(());
    }
    Err(AdError {
        node: kernel.name.clone(),
        span: kernel.entry.span,
        message: format!(
            "kernel '{}' computes with f16 values, which {} mode cannot differentiate (f16 rounding has no derivative); compute in f32, or give it a `backward` of its own",
            kernel.name, mode
        ),
    })
}

fn adjoint_kernel(program: &Program, k: KernelId) -> Result<Kernel, AdError> {
    let kernel = &program.kernels[k];
    refuse_workgroup(kernel, "reverse")?;
    refuse_f16(kernel, "reverse")?;
    let mut lowered = kernel.entry.clone();
    exits::lower(&mut lowered);
    let src = &lowered;
    let mut used = HashSet::new();
    for (_, inst) in src.insts.iter() {
        used.extend(inst.kind.operands());
    }
    let mut out = Function::new(&src.name, src.args.clone(), Type::Void, src.span);
    // Primal locals keep their handles in the adjoint function.
    out.locals = src.locals.clone();
    let mut ad = Ad {
        program,
        node: &kernel.name,
        src,
        used,
        out,
        blocks: vec![Vec::new()],
        map: HashMap::new(),
        counters: HashMap::new(),
        adj: HashMap::new(),
        adj_local: HashMap::new(),
        snaps: HashMap::new(),
        span: Span::default(),
        counting: 0,
    };
    ad.fwd_block(&src.body)?;
    ad.rev_block(&src.body)?;
    let mut entry = ad.out;
    entry.body = ad.blocks.pop().unwrap_or_default();
    Ok(Kernel {
        fused: Vec::new(),
        name: kernel.name.clone(),
        iteration: kernel.iteration.clone(),
        dims: kernel.dims,
        params: kernel.params.clone(),
        entry,
        functions: Arena::new(),
        bindings: kernel.bindings.clone(),
        fault_sites: Vec::new(),
        count_from: None,
        loops_end: false,
        zero_fill: None,
        workgroup: None,
    })
}

/// What `LoopCounter(loop)` means while recomputing a loop body.
#[derive(Clone, Copy)]
enum Counter {
    /// The counter of this emitted loop.
    Loop(InstId),
    /// This value (an iteration replayed by index).
    Value(InstId),
}

struct Ad<'a> {
    program: &'a Program,
    node: &'a str,
    src: &'a Function,
    /// Primal values used as operands somewhere.
    used: HashSet<InstId>,
    out: Function,
    /// Blocks being emitted, innermost last.
    blocks: Vec<Block>,
    /// Primal value → its recomputed value in scope.
    map: HashMap<InstId, InstId>,
    counters: HashMap<InstId, Counter>,
    /// Primal value → the local holding its adjoint.
    adj: HashMap<InstId, LocalId>,
    /// Primal local → the local holding its adjoint.
    adj_local: HashMap<LocalId, LocalId>,
    /// Control-flow instruction → (primal local, snapshot local) taken before it.
    snaps: HashMap<InstId, Vec<(LocalId, LocalId)>>,
    /// Span given to emitted instructions (the primal instruction's).
    span: Span,
    /// Depth of counting loops (`exits`) being recomputed.
    counting: u32,
}

type R<T> = Result<T, AdError>;

/// The adjoint function is written through the one IR builder.
impl Build for Ad<'_> {
    fn func(&mut self) -> &mut Function {
        &mut self.out
    }
    fn func_ref(&self) -> &Function {
        &self.out
    }
    fn push(&mut self, h: InstId) {
        self.blocks.last_mut().expect("a block is open").push(h);
    }
    fn span(&self) -> Span {
        self.span
    }
    fn swap_block(&mut self, b: Block) -> Block {
        std::mem::replace(self.blocks.last_mut().expect("a block is open"), b)
    }
}

impl Ad<'_> {
    fn err<T>(&self, span: Span, message: impl Into<String>) -> R<T> {
        Err(AdError {
            node: self.node.to_string(),
            span,
            message: message.into(),
        })
    }

    // ---- emission helpers ----

    /// [`Build::block`] for a body that may fail.
    fn nested(&mut self, f: impl FnOnce(&mut Self) -> R<()>) -> R<Block> {
        let saved = self.swap_block(Vec::new());
        let r = f(self);
        let b = self.swap_block(saved);
        r.map(|_| b)
    }
    fn m(&self, v: InstId) -> InstId {
        self.map.get(&v).copied().unwrap_or(v)
    }
    /// `value` splatted to `ty` (scalar, vector or matrix of f32).
    fn splat(&mut self, s: InstId, ty: Type) -> InstId {
        match ty {
            Type::Vector(_, n) => self.emit(InstKind::Construct(vec![s; n as usize]), ty),
            Type::Matrix(n) => {
                let c = self.splat(s, Type::Vector(Scalar::F32, n));
                self.emit(InstKind::Construct(vec![c; n as usize]), ty)
            }
            _ => s,
        }
    }
    fn fc(&mut self, v: f32, ty: Type) -> InstId {
        let c = self.emit(InstKind::Const(Const::f32(v)), Type::F32);
        self.splat(c, ty)
    }
    fn bin(&mut self, op: BinaryOp, a: InstId, b: InstId) -> InstId {
        let ta = self.ty(a);
        let t = if op.is_comparison() {
            ta.with_scalar(Scalar::Bool)
        } else {
            ta
        };
        self.emit(InstKind::Binary(op, a, b), t)
    }
    /// Component-wise arithmetic that also works on matrices (column by column).
    fn arith(&mut self, op: BinaryOp, a: InstId, b: InstId) -> InstId {
        if let Type::Matrix(n) = self.ty(a) {
            let col = Type::Vector(Scalar::F32, n);
            let cols: Vec<InstId> = (0..n as u32)
                .map(|i| {
                    let x = self.emit(InstKind::Extract(a, i), col);
                    let y = self.emit(InstKind::Extract(b, i), col);
                    self.emit(InstKind::Binary(op, x, y), col)
                })
                .collect();
            return self.emit(InstKind::Construct(cols), Type::Matrix(n));
        }
        self.bin(op, a, b)
    }
    fn add(&mut self, a: InstId, b: InstId) -> InstId {
        self.arith(BinaryOp::Add, a, b)
    }
    fn sub(&mut self, a: InstId, b: InstId) -> InstId {
        self.arith(BinaryOp::Sub, a, b)
    }
    fn mul(&mut self, a: InstId, b: InstId) -> InstId {
        self.arith(BinaryOp::Mul, a, b)
    }
    fn div(&mut self, a: InstId, b: InstId) -> InstId {
        self.arith(BinaryOp::Div, a, b)
    }
    fn neg(&mut self, a: InstId) -> InstId {
        let t = self.ty(a);
        let z = self.fc(0.0, t);
        self.sub(z, a)
    }
    /// `a` times the scalar `s` (a of any float type).
    fn scale(&mut self, a: InstId, s: InstId) -> InstId {
        let t = self.ty(a);
        let ss = self.splat(s, t);
        self.mul(a, ss)
    }
    fn builtin(&mut self, b: Builtin, args: Vec<InstId>) -> InstId {
        let tys: Vec<Type> = args.iter().map(|a| self.ty(*a)).collect();
        let t = b.result_type(&tys).unwrap_or(tys[0]);
        self.emit(InstKind::Builtin(b, args), t)
    }
    fn select(&mut self, c: InstId, a: InstId, b: InstId) -> InstId {
        let t = self.ty(a);
        self.emit(
            InstKind::Select {
                cond: c,
                accept: a,
                reject: b,
            },
            t,
        )
    }
    /// `g` where `c`, zero elsewhere.
    fn mask(&mut self, c: InstId, g: InstId) -> InstId {
        let t = self.ty(g);
        let z = self.fc(0.0, t);
        self.select(c, g, z)
    }
    fn load(&mut self, l: LocalId) -> InstId {
        let t = self.out.locals[l].ty;
        self.emit(InstKind::LocalLoad(l), t)
    }
    fn store(&mut self, l: LocalId, v: InstId) {
        self.emit(InstKind::LocalStore(l, v), Type::Void);
    }
    fn new_local(&mut self, name: String, ty: Type) -> LocalId {
        self.out.locals.append(Local { name, ty })
    }

    // ---- adjoint accumulators ----

    fn is_f(&self, primal: InstId) -> bool {
        self.src.insts[primal].ty.is_float()
    }
    fn adj_of(&mut self, v: InstId) -> LocalId {
        if let Some(&l) = self.adj.get(&v) {
            return l;
        }
        let t = self.src.insts[v].ty;
        let l = self.new_local(format!("adj_{}", v.index()), t);
        self.adj.insert(v, l);
        l
    }
    fn adj_of_local(&mut self, l: LocalId) -> LocalId {
        if let Some(&a) = self.adj_local.get(&l) {
            return a;
        }
        let t = self.src.locals[l].ty;
        let a = self.new_local(format!("adj_{}", self.src.locals[l].name), t);
        self.adj_local.insert(l, a);
        a
    }
    /// adj(v) += c, for float primal values.
    fn acc(&mut self, v: InstId, c: InstId) {
        if !self.is_f(v) {
            return;
        }
        let l = self.adj_of(v);
        let cur = self.load(l);
        let s = self.add(cur, c);
        self.store(l, s);
    }

    // ---- forward recomputation ----

    fn locals_in(&self, b: &Block, out: &mut Vec<LocalId>) {
        for &i in b {
            match self.src.insts[i].kind {
                InstKind::LocalLoad(l) | InstKind::LocalStore(l, _) if !out.contains(&l) => {
                    out.push(l)
                }
                _ => {}
            }
            for nb in self.src.insts[i].kind.blocks() {
                self.locals_in(nb, out);
            }
        }
    }
    fn take_snapshot(&mut self, inst: InstId) {
        let mut ls = Vec::new();
        for b in self.src.insts[inst].kind.blocks() {
            self.locals_in(b, &mut ls);
        }
        let pairs: Vec<(LocalId, LocalId)> = match self.snaps.get(&inst) {
            Some(p) => p.clone(),
            None => {
                let p: Vec<_> = ls
                    .iter()
                    .map(|&l| {
                        let ty = self.src.locals[l].ty;
                        let name = format!("snap_{}", self.src.locals[l].name);
                        (l, self.new_local(name, ty))
                    })
                    .collect();
                self.snaps.insert(inst, p.clone());
                p
            }
        };
        for (l, s) in pairs {
            let v = self.load(l);
            self.store(s, v);
        }
    }
    fn restore_snapshot(&mut self, inst: InstId) {
        for (l, s) in self.snaps.get(&inst).cloned().unwrap_or_default() {
            let v = self.load(s);
            self.store(l, v);
        }
    }

    fn fwd_block(&mut self, b: &Block) -> R<()> {
        for (n, &i) in b.iter().enumerate() {
            self.fwd_inst(i, n + 1 == b.len() && std::ptr::eq(b, &self.src.body))?;
        }
        Ok(())
    }

    fn fwd_inst(&mut self, i: InstId, last_of_entry: bool) -> R<()> {
        let inst = &self.src.insts[i];
        self.span = inst.span;
        let sp = inst.span;
        match &inst.kind {
            InstKind::FieldStore { .. } => {}
            InstKind::FieldAtomic { .. } => {
                if self.used.contains(&i) {
                    return self.err(sp, "the value an atomic returns depends on the order threads run in and cannot be differentiated; use a plain `+=` inside a tape");
                }
            }
            InstKind::Random => {
                return self.err(sp, "`random()` cannot be used in a kernel inside a tape (the backward pass could not reproduce its numbers); draw them into a field before the tape");
            }
            InstKind::Call(..) => {
                return self.err(sp, "this helper call could not be inlined (it returns early or is large and called more than once), so it cannot be differentiated; restructure it with a single exit");
            }
            // Only the counting loops `exits` makes are left: they are
            // recomputed to find a trip count and never reversed.
            InstKind::Loop { body } => {
                let body = body.clone();
                self.counting += 1;
                let blk = self.nested(|s| s.fwd_block(&body));
                self.counting -= 1;
                let blk = blk?;
                self.span = sp;
                self.emit(InstKind::Loop { body: blk }, Type::Void);
            }
            InstKind::Break if self.counting > 0 => {
                self.emit(InstKind::Break, Type::Void);
            }
            InstKind::Break | InstKind::Continue => {
                return self.err(
                    sp,
                    "internal: `break`/`continue` left after rewriting loop exits",
                );
            }
            InstKind::Return(_) if last_of_entry => {}
            InstKind::Return(_) => {
                return self.err(
                    sp,
                    "internal: early `return` left after rewriting loop exits",
                );
            }
            InstKind::LoopCounter(l) => match self.counters.get(l).copied() {
                Some(Counter::Loop(nl)) => {
                    let v = self.emit(InstKind::LoopCounter(nl), inst.ty);
                    self.map.insert(i, v);
                }
                Some(Counter::Value(v)) => {
                    self.map.insert(i, v);
                }
                None => return self.err(sp, "internal: loop counter outside its loop"),
            },
            InstKind::If {
                cond,
                accept,
                reject,
            } => {
                let (cond, accept, reject) = (*cond, accept.clone(), reject.clone());
                self.take_snapshot(i);
                let c = self.m(cond);
                let a = self.nested(|s| s.fwd_block(&accept))?;
                let r = self.nested(|s| s.fwd_block(&reject))?;
                self.span = sp;
                self.emit(
                    InstKind::If {
                        cond: c,
                        accept: a,
                        reject: r,
                    },
                    Type::Void,
                );
            }
            InstKind::RangeFor {
                begin,
                end,
                step,
                inclusive,
                body,
            } => {
                let (b, e, st, inc, body) = (*begin, *end, *step, *inclusive, body.clone());
                self.take_snapshot(i);
                let nl = self.emit_range(b, e, st, inc);
                self.counters.insert(i, Counter::Loop(nl));
                let blk = self.nested(|s| s.fwd_block(&body))?;
                self.set_body(nl, blk);
            }
            kind => {
                let mut kind = kind.clone();
                kind.map_operands(|x| self.m(x));
                let v = self.emit(kind, inst.ty);
                self.map.insert(i, v);
            }
        }
        Ok(())
    }

    /// Emits `for` over the primal loop's (recomputed) bounds with an empty body.
    fn emit_range(&mut self, b: InstId, e: InstId, st: InstId, inclusive: bool) -> InstId {
        let (b, e, st) = (self.m(b), self.m(e), self.m(st));
        self.emit(
            InstKind::RangeFor {
                begin: b,
                end: e,
                step: st,
                inclusive,
                body: Vec::new(),
            },
            Type::Void,
        )
    }
    fn set_body(&mut self, l: InstId, blk: Block) {
        if let InstKind::RangeFor { body, .. } = &mut self.out.insts[l].kind {
            *body = blk;
        }
    }

    // ---- reverse sweep ----

    fn rev_block(&mut self, b: &Block) -> R<()> {
        // Adjoints of values defined in this block start at zero on every
        // execution of the block (loop bodies run it many times).
        for &i in b {
            if self.is_f(i) && self.src.insts[i].ty != Type::Void {
                let l = self.adj_of(i);
                let t = self.src.insts[i].ty;
                let z = self.fc(0.0, t);
                self.store(l, z);
            }
        }
        for &i in b.iter().rev() {
            self.rev_inst(i)?;
        }
        Ok(())
    }

    /// Whether a loop body reads a local before (re)writing it in the same
    /// iteration: then iteration k depends on iterations 0..k.
    fn carries(&self, body: &Block) -> bool {
        let mut first: HashMap<LocalId, bool> = HashMap::new(); // local → first use is a top-level store
        let mut ls = Vec::new();
        self.locals_in(body, &mut ls);
        for &i in body {
            match self.src.insts[i].kind {
                InstKind::LocalStore(l, _) => {
                    first.entry(l).or_insert(true);
                }
                _ => {
                    let mut inner = Vec::new();
                    if let InstKind::LocalLoad(l) = self.src.insts[i].kind {
                        inner.push(l);
                    }
                    for nb in self.src.insts[i].kind.blocks() {
                        self.locals_in(nb, &mut inner);
                    }
                    for l in inner {
                        first.entry(l).or_insert(false);
                    }
                }
            }
        }
        // A local stored in the body whose first use is not a plain store.
        ls.iter().any(|l| {
            let stored = self.stores_in(body, *l);
            stored && !first.get(l).copied().unwrap_or(false)
        })
    }
    fn stores_in(&self, b: &Block, l: LocalId) -> bool {
        b.iter().any(|&i| {
            matches!(self.src.insts[i].kind, InstKind::LocalStore(x, _) if x == l)
                || self.src.insts[i]
                    .kind
                    .blocks()
                    .iter()
                    .any(|nb| self.stores_in(nb, l))
        })
    }

    fn rev_inst(&mut self, i: InstId) -> R<()> {
        let inst = self.src.insts[i].clone();
        self.span = inst.span;
        let sp = inst.span;
        match &inst.kind {
            InstKind::If {
                cond,
                accept,
                reject,
            } => {
                let c = self.m(*cond);
                let a = self.nested(|s| {
                    s.restore_snapshot(i);
                    s.fwd_block(accept)?;
                    s.rev_block(accept)
                })?;
                let r = self.nested(|s| {
                    s.restore_snapshot(i);
                    s.fwd_block(reject)?;
                    s.rev_block(reject)
                })?;
                self.span = sp;
                self.emit(
                    InstKind::If {
                        cond: c,
                        accept: a,
                        reject: r,
                    },
                    Type::Void,
                );
                return Ok(());
            }
            InstKind::RangeFor {
                begin,
                end,
                step,
                inclusive,
                body,
            } => return self.rev_range(i, *begin, *end, *step, *inclusive, body),
            // A counting loop: its effects are undone and redone by the
            // range loop after it (see `exits`).
            InstKind::Loop { .. } => return Ok(()),
            _ => {}
        }
        let g = if inst.ty.is_float() {
            let l = self.adj_of(i);
            Some(self.load(l))
        } else {
            None
        };
        match &inst.kind {
            InstKind::LocalLoad(l) => {
                if let Some(g) = g {
                    let a = self.adj_of_local(*l);
                    let cur = self.load(a);
                    let s = self.add(cur, g);
                    self.store(a, s);
                }
            }
            InstKind::LocalStore(l, x) => {
                if self.src.locals[*l].ty.is_float() {
                    let a = self.adj_of_local(*l);
                    let cur = self.load(a);
                    self.acc(*x, cur);
                    let t = self.src.locals[*l].ty;
                    let z = self.fc(0.0, t);
                    self.store(a, z);
                }
            }
            InstKind::FieldLoad { field, index } => {
                if let (Some(g), Some(gf)) = (g, self.program.grad_of(*field)) {
                    let index = index.iter().map(|x| self.m(*x)).collect();
                    let t = self.ty(g);
                    self.emit(
                        InstKind::FieldAtomic {
                            op: AtomicOp::Add,
                            field: gf,
                            index,
                            value: g,
                            cmp: None,
                        },
                        t,
                    );
                }
            }
            InstKind::FieldStore {
                field,
                index,
                value,
            } => {
                if let Some(gf) = self.program.grad_of(*field) {
                    let index: Vec<InstId> = index.iter().map(|x| self.m(*x)).collect();
                    let t = self.program.fields[gf].ty;
                    let gv = self.emit(
                        InstKind::FieldLoad {
                            field: gf,
                            index: index.clone(),
                        },
                        t,
                    );
                    self.acc(*value, gv);
                    // The store replaced the element: the value before it
                    // gets no gradient from what came after (reads before
                    // the store, reversed later, add theirs).
                    let z = self.fc(0.0, t);
                    self.emit(
                        InstKind::FieldStore {
                            field: gf,
                            index,
                            value: z,
                        },
                        Type::Void,
                    );
                }
            }
            InstKind::FieldAtomic {
                op,
                field,
                index,
                value,
                ..
            } => {
                if let Some(gf) = self.program.grad_of(*field) {
                    let index: Vec<InstId> = index.iter().map(|x| self.m(*x)).collect();
                    let t = self.program.fields[gf].ty;
                    match op {
                        AtomicOp::Add | AtomicOp::Sub => {
                            let gv = self.emit(InstKind::FieldLoad { field: gf, index }, t);
                            let c = if *op == AtomicOp::Sub {
                                self.neg(gv)
                            } else {
                                gv
                            };
                            self.acc(*value, c);
                        }
                        _ => {
                            return self.err(
                                sp,
                                format!(
                                    "`atomic_{}` on field '{}', which has a gradient, cannot be differentiated; only `+=`, `-=`, `atomic_add` and `atomic_sub` can",
                                    op.name(),
                                    self.program.fields[*field].name
                                ),
                            )
                        }
                    }
                }
            }
            _ => {
                if let Some(g) = g {
                    self.rev_value(i, &inst, g)?;
                }
            }
        }
        Ok(())
    }

    fn rev_range(
        &mut self,
        i: InstId,
        begin: InstId,
        end: InstId,
        step: InstId,
        inclusive: bool,
        body: &Block,
    ) -> R<()> {
        let sp = self.src.insts[i].span;
        if !self.carries(body) {
            // Independent iterations: their adjoints can run in any order.
            let nl = self.emit_range(begin, end, step, inclusive);
            self.counters.insert(i, Counter::Loop(nl));
            let blk = self.nested(|s| {
                s.restore_snapshot(i);
                s.fwd_block(body)?;
                s.rev_block(body)
            })?;
            self.set_body(nl, blk);
            return Ok(());
        }
        // Count the iterations, then reverse them; iteration k is rebuilt
        // by replaying 0..k from the snapshot at loop entry.
        let ct = self.ty(self.m(begin));
        let n = self.new_local(format!("trips_{}", i.index()), Type::I32);
        let zero = self.emit(InstKind::Const(Const::i32(0)), Type::I32);
        let one = self.emit(InstKind::Const(Const::i32(1)), Type::I32);
        self.store(n, zero);
        let count = self.emit_range(begin, end, step, inclusive);
        let cb = self.nested(|s| {
            let c = s.load(n);
            let c1 = s.bin(BinaryOp::Add, c, one);
            s.store(n, c1);
            Ok(())
        })?;
        self.set_body(count, cb);
        let trips = self.load(n);
        let outer = self.emit(
            InstKind::RangeFor {
                begin: zero,
                end: trips,
                step: one,
                inclusive: false,
                body: Vec::new(),
            },
            Type::Void,
        );
        let (b0, st0) = (self.m(begin), self.m(step));
        let ob = self.nested(|s| {
            s.span = sp;
            let r = s.emit(InstKind::LoopCounter(outer), Type::I32);
            let t1 = s.bin(BinaryOp::Sub, trips, one);
            let k = s.bin(BinaryOp::Sub, t1, r);
            s.restore_snapshot(i);
            let replay = s.emit(
                InstKind::RangeFor {
                    begin: zero,
                    end: k,
                    step: one,
                    inclusive: false,
                    body: Vec::new(),
                },
                Type::Void,
            );
            let rb = s.nested(|s| {
                let j = s.emit(InstKind::LoopCounter(replay), Type::I32);
                let cnt = s.counter_value(j, b0, st0, ct);
                s.counters.insert(i, Counter::Value(cnt));
                s.fwd_block(body)
            })?;
            s.set_body(replay, rb);
            let cnt = s.counter_value(k, b0, st0, ct);
            s.counters.insert(i, Counter::Value(cnt));
            s.fwd_block(body)?;
            s.rev_block(body)
        })?;
        self.set_body(outer, ob);
        Ok(())
    }

    /// begin + j * step in the counter's type.
    fn counter_value(&mut self, j: InstId, b: InstId, st: InstId, ct: Type) -> InstId {
        let j = if ct == Type::I32 {
            j
        } else {
            self.emit(InstKind::Cast(j), ct)
        };
        let js = self.bin(BinaryOp::Mul, j, st);
        self.bin(BinaryOp::Add, b, js)
    }

    /// Adjoints of the operands of a pure float-valued instruction.
    fn rev_value(&mut self, i: InstId, inst: &Inst, g: InstId) -> R<()> {
        let sp = inst.span;
        let v = self.m(i);
        match &inst.kind {
            InstKind::Unary(UnaryOp::Neg, a) => {
                let c = self.neg(g);
                self.acc(*a, c);
            }
            InstKind::Binary(op, a, b) => {
                let (pa, pb) = (*a, *b);
                let (a, b) = (self.m(pa), self.m(pb));
                match op {
                    BinaryOp::Add => {
                        self.acc(pa, g);
                        self.acc(pb, g);
                    }
                    BinaryOp::Sub => {
                        self.acc(pa, g);
                        let c = self.neg(g);
                        self.acc(pb, c);
                    }
                    BinaryOp::Mul => {
                        let ca = self.mul(g, b);
                        self.acc(pa, ca);
                        let cb = self.mul(g, a);
                        self.acc(pb, cb);
                    }
                    BinaryOp::Div => {
                        let ca = self.div(g, b);
                        self.acc(pa, ca);
                        let gv = self.mul(g, v);
                        let q = self.div(gv, b);
                        let cb = self.neg(q);
                        self.acc(pb, cb);
                    }
                    BinaryOp::Rem => {
                        self.acc(pa, g);
                        let q = self.div(a, b);
                        let t = self.builtin(Builtin::Trunc, vec![q]);
                        let gt = self.mul(g, t);
                        let cb = self.neg(gt);
                        self.acc(pb, cb);
                    }
                    BinaryOp::MatMul => match (self.ty(a), self.ty(b)) {
                        (Type::Matrix(_), Type::Vector(..)) => {
                            let cm = self.builtin(Builtin::Outer, vec![g, b]);
                            self.acc(pa, cm);
                            let cv =
                                self.emit(InstKind::Binary(BinaryOp::MatMul, g, a), self.ty(b));
                            self.acc(pb, cv);
                        }
                        (Type::Vector(..), Type::Matrix(_)) => {
                            let cv =
                                self.emit(InstKind::Binary(BinaryOp::MatMul, b, g), self.ty(a));
                            self.acc(pa, cv);
                            let cm = self.builtin(Builtin::Outer, vec![a, g]);
                            self.acc(pb, cm);
                        }
                        (Type::Matrix(_), Type::Matrix(_)) => {
                            let bt = self.builtin(Builtin::Transpose, vec![b]);
                            let ca =
                                self.emit(InstKind::Binary(BinaryOp::MatMul, g, bt), self.ty(a));
                            self.acc(pa, ca);
                            let at = self.builtin(Builtin::Transpose, vec![a]);
                            let cb =
                                self.emit(InstKind::Binary(BinaryOp::MatMul, at, g), self.ty(b));
                            self.acc(pb, cb);
                        }
                        _ => return self.err(sp, "this matrix product cannot be differentiated"),
                    },
                    _ => {}
                }
            }
            InstKind::Select {
                cond,
                accept,
                reject,
            } => {
                let c = self.m(*cond);
                let z = self.fc(0.0, inst.ty);
                let ca = self.select(c, g, z);
                self.acc(*accept, ca);
                let cr = self.select(c, z, g);
                self.acc(*reject, cr);
            }
            InstKind::Cast(a) => {
                // f32 → f32 is the identity; integer sources have no adjoint.
                self.acc(*a, g);
            }
            InstKind::Construct(parts) => {
                let mut off = 0u32;
                for &p in parts {
                    let pt = self.src.insts[p].ty;
                    let c = match (inst.ty, pt) {
                        (Type::Matrix(_), _) => self.emit(InstKind::Extract(g, off), pt),
                        (_, Type::Vector(_, n)) => self.emit(
                            InstKind::Swizzle(g, (off as u8..off as u8 + n).collect()),
                            pt,
                        ),
                        _ => self.emit(InstKind::Extract(g, off), pt),
                    };
                    off += match (inst.ty, pt) {
                        (Type::Matrix(_), _) => 1,
                        _ => pt.components() as u32,
                    };
                    self.acc(p, c);
                }
            }
            InstKind::Extract(a, k) => {
                let ta = self.src.insts[*a].ty;
                let z = self.fc(0.0, ta);
                let c = self.emit(
                    InstKind::Insert {
                        base: z,
                        index: *k,
                        value: g,
                    },
                    ta,
                );
                self.acc(*a, c);
            }
            InstKind::ExtractDyn(a, k) => {
                let ta = self.src.insts[*a].ty;
                let z = self.fc(0.0, ta);
                let k = self.m(*k);
                let c = self.emit(
                    InstKind::InsertDyn {
                        base: z,
                        index: k,
                        value: g,
                    },
                    ta,
                );
                self.acc(*a, c);
            }
            InstKind::Insert { base, index, value } => {
                let tv = self.src.insts[*value].ty;
                let z = self.fc(0.0, tv);
                let cb = self.emit(
                    InstKind::Insert {
                        base: g,
                        index: *index,
                        value: z,
                    },
                    inst.ty,
                );
                self.acc(*base, cb);
                let cv = self.emit(InstKind::Extract(g, *index), tv);
                self.acc(*value, cv);
            }
            InstKind::InsertDyn { base, index, value } => {
                let tv = self.src.insts[*value].ty;
                let z = self.fc(0.0, tv);
                let k = self.m(*index);
                let cb = self.emit(
                    InstKind::InsertDyn {
                        base: g,
                        index: k,
                        value: z,
                    },
                    inst.ty,
                );
                self.acc(*base, cb);
                let cv = self.emit(InstKind::ExtractDyn(g, k), tv);
                self.acc(*value, cv);
            }
            InstKind::Swizzle(a, comps) => {
                let ta = self.src.insts[*a].ty;
                let mut cur = self.fc(0.0, ta);
                for (j, &c) in comps.iter().enumerate() {
                    let gj = if inst.ty.is_scalar() {
                        g
                    } else {
                        self.emit(InstKind::Extract(g, j as u32), Type::F32)
                    };
                    let old = self.emit(InstKind::Extract(cur, c as u32), Type::F32);
                    let s = self.bin(BinaryOp::Add, old, gj);
                    cur = self.emit(
                        InstKind::Insert {
                            base: cur,
                            index: c as u32,
                            value: s,
                        },
                        ta,
                    );
                }
                self.acc(*a, cur);
            }
            InstKind::Builtin(b, args) => self.rev_builtin(*b, args, v, g, sp)?,
            // Constants, arguments, parameters, frame, loop counters,
            // bit casts and integer-valued operations: no adjoint flows.
            _ => {}
        }
        Ok(())
    }

    fn rev_builtin(
        &mut self,
        b: Builtin,
        pargs: &[InstId],
        r: InstId,
        g: InstId,
        sp: Span,
    ) -> R<()> {
        use Builtin::*;
        let a: Vec<InstId> = pargs.iter().map(|x| self.m(*x)).collect();
        if let Some(n) = partials::arity(b) {
            for (i, &x) in pargs.iter().enumerate().take(n) {
                let c = partials::term(self, b, i, &a, r, g);
                self.acc(x, c);
            }
            return Ok(());
        }
        let t = self.ty(a[0]);
        match b {
            Min | Max => {
                let op = if b == Min { BinaryOp::Le } else { BinaryOp::Ge };
                let c = self.bin(op, a[0], a[1]);
                let ca = self.mask(c, g);
                self.acc(pargs[0], ca);
                let z = self.fc(0.0, t);
                let cb = self.select(c, z, g);
                self.acc(pargs[1], cb);
            }
            Clamp => {
                let below = self.bin(BinaryOp::Lt, a[0], a[1]);
                let above = self.bin(BinaryOp::Gt, a[0], a[2]);
                let z = self.fc(0.0, t);
                let inner = self.select(above, z, g);
                let cx = self.select(below, z, inner);
                self.acc(pargs[0], cx);
                let clo = self.mask(below, g);
                self.acc(pargs[1], clo);
                let chi_raw = self.mask(above, g);
                let chi = self.select(below, z, chi_raw);
                self.acc(pargs[2], chi);
            }
            Atan2 => {
                // atan2(y, x): d/dy = x / (x² + y²), d/dx = -y / (x² + y²)
                let y2 = self.mul(a[0], a[0]);
                let x2 = self.mul(a[1], a[1]);
                let s = self.add(x2, y2);
                let gs = self.div(g, s);
                let cy = self.mul(gs, a[1]);
                self.acc(pargs[0], cy);
                let cx0 = self.mul(gs, a[0]);
                let cx = self.neg(cx0);
                self.acc(pargs[1], cx);
            }
            Smoothstep => {
                // t = saturate((x - e0) / w), w = e1 - e0; r = t²(3 - 2t);
                // dr/dt = 6t(1 - t), which is 0 where t is clamped.
                let (e0, e1, x) = (a[0], a[1], a[2]);
                let w = self.sub(e1, e0);
                let xe0 = self.sub(x, e0);
                let q = self.div(xe0, w);
                let tt = self.builtin(Saturate, vec![q]);
                let o = self.fc(1.0, t);
                let six = self.fc(6.0, t);
                let omt = self.sub(o, tt);
                let s0 = self.mul(six, tt);
                let s = self.mul(s0, omt);
                let gs = self.mul(g, s);
                let cx = self.div(gs, w);
                self.acc(pargs[2], cx);
                let w2 = self.mul(w, w);
                let gsw = self.div(gs, w2);
                let xe1 = self.sub(x, e1);
                let c0 = self.mul(gsw, xe1);
                self.acc(pargs[0], c0);
                let c1p = self.mul(gsw, xe0);
                let c1 = self.neg(c1p);
                self.acc(pargs[1], c1);
            }
            Fma => {
                let ca = self.mul(g, a[1]);
                self.acc(pargs[0], ca);
                let cb = self.mul(g, a[0]);
                self.acc(pargs[1], cb);
                self.acc(pargs[2], g);
            }
            Length => {
                let q = self.div(g, r);
                let c = self.scale(a[0], q);
                self.acc(pargs[0], c);
            }
            Distance => {
                let d = self.sub(a[0], a[1]);
                let q = self.div(g, r);
                let c = self.scale(d, q);
                self.acc(pargs[0], c);
                let cn = self.neg(c);
                self.acc(pargs[1], cn);
            }
            Normalize => {
                let len = self.builtin(Length, vec![a[0]]);
                let dgr = self.builtin(Dot, vec![g, r]);
                let rd = self.scale(r, dgr);
                let num = self.sub(g, rd);
                let o = self.emit(InstKind::Const(Const::f32(1.0)), Type::F32);
                let inv = self.bin(BinaryOp::Div, o, len);
                let c = self.scale(num, inv);
                self.acc(pargs[0], c);
            }
            Dot => {
                if self.ty(g).is_float() {
                    let ca = self.scale(a[1], g);
                    self.acc(pargs[0], ca);
                    let cb = self.scale(a[0], g);
                    self.acc(pargs[1], cb);
                }
            }
            Cross => {
                let ca = self.builtin(Cross, vec![a[1], g]);
                self.acc(pargs[0], ca);
                let cb = self.builtin(Cross, vec![g, a[0]]);
                self.acc(pargs[1], cb);
            }
            Reflect => {
                // r = i - 2 dot(n, i) n
                let (iv, n) = (a[0], a[1]);
                let two = self.emit(InstKind::Const(Const::f32(2.0)), Type::F32);
                let dng = self.builtin(Dot, vec![n, g]);
                let dni = self.builtin(Dot, vec![n, iv]);
                let k1 = self.bin(BinaryOp::Mul, two, dng);
                let k2 = self.bin(BinaryOp::Mul, two, dni);
                let t1 = self.scale(n, k1);
                let ci = self.sub(g, t1);
                self.acc(pargs[0], ci);
                let u = self.scale(g, k2);
                let w = self.scale(iv, k1);
                let s = self.add(u, w);
                let cn = self.neg(s);
                self.acc(pargs[1], cn);
            }
            Transpose => {
                let c = self.builtin(Transpose, vec![g]);
                self.acc(pargs[0], c);
            }
            Determinant => {
                // d det / dM = det · M⁻ᵀ
                let inv = self.builtin(Inverse, vec![a[0]]);
                let it = self.builtin(Transpose, vec![inv]);
                let gd = self.bin(BinaryOp::Mul, g, r);
                let c = self.scale(it, gd);
                self.acc(pargs[0], c);
            }
            Inverse => {
                // dM = -Rᵀ g Rᵀ with R = M⁻¹
                let rt = self.builtin(Transpose, vec![r]);
                let m1 = self.emit(InstKind::Binary(BinaryOp::MatMul, rt, g), t);
                let m2 = self.emit(InstKind::Binary(BinaryOp::MatMul, m1, rt), t);
                let c = self.neg(m2);
                self.acc(pargs[0], c);
            }
            Outer => {
                // M = a cᵀ: da = g c, dc = gᵀ a
                let ca = self.emit(InstKind::Binary(BinaryOp::MatMul, g, a[1]), self.ty(a[0]));
                self.acc(pargs[0], ca);
                let cc = self.emit(InstKind::Binary(BinaryOp::MatMul, a[0], g), self.ty(a[1]));
                self.acc(pargs[1], cc);
            }
            _ => unreachable!("{:?} is in the derivative table (partials::arity)", b),
        }
        let _ = sp;
        Ok(())
    }
}
