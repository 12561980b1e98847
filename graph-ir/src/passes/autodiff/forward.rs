//! Forward-mode automatic differentiation: expands a tape with
//! `TapeMode::Forward` into plain launches of tangent kernels (Jacobian-vector
//! products).
//!
//! Pre: abstract IR after `inline` / `const_fold` / `simplify`; the tape's
//! body holds only launches and repeats (the graph builder refuses `clear`
//! and nested tapes). Post: the tape is gone; in its place one kernel per
//! gradient field zeroes it (except those of the seeded fields, which hold
//! the direction), then the body runs once with every launch replaced by
//! its tangent kernel, in the same order and repeats (so a multi-step
//! rollout is the same span as a reverse tape's forward sweep). Tangent
//! kernels are appended to `program.kernels` under the kernel node's name.
//!
//! A field's tangent lives in its gradient field `x.grad` (same type and
//! layout): a forward tape and a reverse tape never run at once, so one
//! field serves both. The tangent kernel of a body B is B itself (every
//! primal value, store and atomic kept, so the primal state advances as it
//! would without the tape) with, next to each float value v, its tangent
//! ṽ computed in the same block (nested values stay in scope the same way,
//! so `if`, range loops, `loop`/`while`, `break`, `continue` and `return`
//! are copied unchanged and need no stacks or snapshots). Rules: a float
//! local gets a tangent local stored and loaded beside it; a field read
//! also reads the tangent field at the same index; a store also stores the
//! tangent; `+=`/`-=` (atomic add/sub) also add the tangent atomically.
//! Constants, kernel scalars, `random()`, loop counters, integer values,
//! bit casts and fields without `grad: true` have tangent zero (zero
//! tangents are not materialised: a value whose operands all have none has
//! none). Each built-in's derivative matches the reverse pass's (the two
//! are tests of each other).
//!
//! Errors (naming the node and line), never a wrong tangent: a helper call
//! that stayed a call, the result of an atomic used as a value, an atomic
//! min/max/exchange/CAS or an `append` on a field with a gradient, and a
//! kernel in a forward tape that accesses a `.grad` field itself (it holds
//! tangents there). Unlike reverse mode, in-place updates need no access
//! rule: the tangent is read and written exactly where the value is.

use super::{fill_kernel, partials, Ad, AdError, R};
use crate::arena::Arena;
use crate::ir::steps::{self, Rewrite};
use crate::ir::*;
use crate::lower::emit::Build;
use crate::types::{Scalar, Type};
use std::collections::{HashMap, HashSet};

/// The steps replacing a forward tape.
pub(super) fn expand_tape(
    program: &mut Program,
    tangents: &mut HashMap<KernelId, KernelId>,
    node_id: &str,
    seeded: &[FieldId],
    body: Vec<Step>,
) -> Result<Vec<Step>, AdError> {
    let mut out = Vec::new();
    for (f, g) in program.grads.clone() {
        if !seeded.contains(&f) {
            let z = fill_kernel(program, node_id, g, 0.0);
            out.push(Step::Launch(program.kernels.append(z)));
        }
    }
    out.extend(tangent_steps(program, tangents, body)?);
    Ok(out)
}

fn tangent_steps(
    program: &mut Program,
    tangents: &mut HashMap<KernelId, KernelId>,
    body: Vec<Step>,
) -> Result<Vec<Step>, AdError> {
    steps::try_rewrite(body, &mut |s| match s {
        Step::Launch(k) => {
            let t = match tangents.get(&k) {
                Some(&t) => t,
                None => {
                    let t = tangent_kernel(program, k)?;
                    let t = program.kernels.append(t);
                    tangents.insert(k, t);
                    t
                }
            };
            Ok(Rewrite::Keep(Step::Launch(t)))
        }
        Step::Repeat { .. } => Ok(Rewrite::Keep(s)),
        // Refused inside tapes by the graph builder (kept as they are).
        Step::Clear { .. } | Step::ListGen { .. } | Step::Tape { .. } => Ok(Rewrite::Into(vec![s])),
        // `passes::optimize` runs before autodiff and leaves none.
        Step::Optimize { node_id, .. } => Err(AdError {
            node: node_id,
            span: Span::default(),
            message: "internal: an optimize node reached forward mode unexpanded".into(),
        }),
    })
}

fn tangent_kernel(program: &Program, k: KernelId) -> Result<Kernel, AdError> {
    let kernel = &program.kernels[k];
    super::refuse_workgroup(kernel, "forward")?;
    super::refuse_f16(kernel, "forward")?;
    let src = &kernel.entry;
    let mut used = HashSet::new();
    for (_, inst) in src.insts.iter() {
        used.extend(inst.kind.operands());
    }
    let mut out = Function::new(&src.name, src.args.clone(), src.ret, src.span);
    out.locals = src.locals.clone();
    let ad = Ad {
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
    let mut t = Tangent {
        ad,
        tan: HashMap::new(),
        tan_local: HashMap::new(),
    };
    t.block(&src.body)?;
    let mut entry = t.ad.out;
    entry.body = t.ad.blocks.pop().unwrap_or_default();
    Ok(Kernel {
        fused: Vec::new(),
        name: kernel.name.clone(),
        iteration: kernel.iteration.clone(),
        count_from: kernel.count_from,
        loops_end: false,
        zero_fill: None,
        workgroup: None,
        dims: kernel.dims,
        params: kernel.params.clone(),
        entry,
        functions: Arena::new(),
        bindings: kernel.bindings.clone(),
        fault_sites: kernel.fault_sites.clone(),
    })
}

struct Tangent<'a> {
    /// Emission helpers and the primal value map (`Ad::map`: primal
    /// instruction → its copy, loops included).
    ad: Ad<'a>,
    /// Primal float value → its tangent (absent: zero).
    tan: HashMap<InstId, InstId>,
    /// Primal float local → the local holding its tangent.
    tan_local: HashMap<LocalId, LocalId>,
}

impl Tangent<'_> {
    fn nested(&mut self, f: impl FnOnce(&mut Self) -> R<()>) -> R<Block> {
        self.ad.blocks.push(Vec::new());
        let r = f(self);
        let b = self.ad.blocks.pop().expect("pushed above");
        r.map(|_| b)
    }

    fn block(&mut self, b: &Block) -> R<()> {
        for &i in b {
            self.inst(i)?;
        }
        Ok(())
    }

    /// The tangent of a primal value, if not zero.
    fn t(&self, v: InstId) -> Option<InstId> {
        self.tan.get(&v).copied()
    }
    /// The tangent of a float primal value, zero materialised.
    fn tz(&mut self, v: InstId) -> InstId {
        match self.t(v) {
            Some(t) => t,
            None => {
                let ty = self.ad.src.insts[v].ty;
                self.ad.fc(0.0, ty)
            }
        }
    }
    fn tan_local(&mut self, l: LocalId) -> LocalId {
        if let Some(&t) = self.tan_local.get(&l) {
            return t;
        }
        let ty = self.ad.src.locals[l].ty;
        let name = format!("tan_{}", self.ad.src.locals[l].name);
        let t = self.ad.new_local(name, ty);
        self.tan_local.insert(l, t);
        t
    }
    /// The primal instruction copied with its operands mapped.
    fn copy(&mut self, i: InstId) -> InstId {
        let inst = &self.ad.src.insts[i];
        let (mut kind, ty) = (inst.kind.clone(), inst.ty);
        kind.map_operands(|x| self.ad.m(x));
        let v = self.ad.emit(kind, ty);
        self.ad.map.insert(i, v);
        v
    }
    fn is_grad_field(&self, f: FieldId) -> bool {
        self.ad.program.grads.iter().any(|g| g.1 == f)
    }

    fn inst(&mut self, i: InstId) -> R<()> {
        let inst = self.ad.src.insts[i].clone();
        self.ad.span = inst.span;
        let sp = inst.span;
        let program = self.ad.program;
        match &inst.kind {
            InstKind::FieldLoad { field, .. }
            | InstKind::FieldStore { field, .. }
            | InstKind::FieldAtomic { field, .. }
                if self.is_grad_field(*field) =>
            {
                return self.ad.err(
                    sp,
                    format!(
                        "this kernel accesses '{}' inside a forward tape, where gradient fields hold tangents; read it after the tape",
                        program.fields[*field].name
                    ),
                );
            }
            _ => {}
        }
        match &inst.kind {
            InstKind::If {
                cond,
                accept,
                reject,
            } => {
                let c = self.ad.m(*cond);
                let a = self.nested(|s| s.block(accept))?;
                let r = self.nested(|s| s.block(reject))?;
                self.ad.span = sp;
                let v = self.ad.emit(
                    InstKind::If {
                        cond: c,
                        accept: a,
                        reject: r,
                    },
                    Type::Void,
                );
                self.ad.map.insert(i, v);
            }
            InstKind::RangeFor {
                begin,
                end,
                step,
                inclusive,
                body,
            } => {
                let nl = self.ad.emit_range(*begin, *end, *step, *inclusive);
                self.ad.map.insert(i, nl);
                let blk = self.nested(|s| s.block(body))?;
                self.ad.set_body(nl, blk);
            }
            InstKind::Loop { body } => {
                let nl = self
                    .ad
                    .emit(InstKind::Loop { body: Vec::new() }, Type::Void);
                self.ad.map.insert(i, nl);
                let blk = self.nested(|s| s.block(body))?;
                if let InstKind::Loop { body } = &mut self.ad.out.insts[nl].kind {
                    *body = blk;
                }
            }
            InstKind::LoopCounter(l) => {
                let nl = self.ad.m(*l);
                let v = self.ad.emit(InstKind::LoopCounter(nl), inst.ty);
                self.ad.map.insert(i, v);
            }
            InstKind::Call(..) => {
                return self.ad.err(sp, "this helper call could not be inlined (it returns early or is large and called more than once), so it cannot be differentiated; restructure it with a single exit");
            }
            InstKind::FieldLoad { field, index } => {
                self.copy(i);
                if let (true, Some(gf)) = (inst.ty.is_float(), program.grad_of(*field)) {
                    let index = index.iter().map(|x| self.ad.m(*x)).collect();
                    let t = self
                        .ad
                        .emit(InstKind::FieldLoad { field: gf, index }, inst.ty);
                    self.tan.insert(i, t);
                }
            }
            InstKind::FieldStore {
                field,
                index,
                value,
            } => {
                self.copy(i);
                if let Some(gf) = program.grad_of(*field) {
                    let index = index.iter().map(|x| self.ad.m(*x)).collect();
                    let tv = self.tz(*value);
                    self.ad.emit(
                        InstKind::FieldStore {
                            field: gf,
                            index,
                            value: tv,
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
                let gf = program.grad_of(*field);
                if gf.is_some() && self.ad.used.contains(&i) {
                    return self.ad.err(sp, "the value an atomic returns depends on the order threads run in and cannot be differentiated; use a plain `+=` inside a tape");
                }
                if gf.is_some() && !matches!(op, AtomicOp::Add | AtomicOp::Sub) {
                    return self.ad.err(
                        sp,
                        format!(
                            "`atomic_{}` on field '{}', which has a gradient, cannot be differentiated; only `+=`, `-=`, `atomic_add` and `atomic_sub` can",
                            op.name(),
                            program.fields[*field].name
                        ),
                    );
                }
                self.copy(i);
                if let Some(gf) = gf {
                    let index = index.iter().map(|x| self.ad.m(*x)).collect();
                    let tv = self.tz(*value);
                    let ty = program.fields[gf].ty;
                    self.ad.emit(
                        InstKind::FieldAtomic {
                            op: *op,
                            field: gf,
                            index,
                            value: tv,
                            cmp: None,
                        },
                        ty,
                    );
                }
            }
            InstKind::FieldAppend { field, .. } if program.grad_of(*field).is_some() => {
                return self.ad.err(
                    sp,
                    format!(
                        "`append` to field '{}', which has a gradient, has no tangent; keep the list without `grad: true`",
                        program.fields[*field].name
                    ),
                );
            }
            InstKind::LocalLoad(l) => {
                self.copy(i);
                if self.ad.src.locals[*l].ty.is_float() {
                    let tl = self.tan_local(*l);
                    let t = self.ad.load(tl);
                    self.tan.insert(i, t);
                }
            }
            InstKind::LocalStore(l, x) => {
                self.copy(i);
                if self.ad.src.locals[*l].ty.is_float() {
                    let tl = self.tan_local(*l);
                    let tv = self.tz(*x);
                    self.ad.store(tl, tv);
                }
            }
            _ => {
                let v = self.copy(i);
                if inst.ty.is_float() {
                    if let Some(t) = self.jvp(&inst, v)? {
                        self.tan.insert(i, t);
                    }
                }
            }
        }
        Ok(())
    }

    fn add_opt(&mut self, a: Option<InstId>, b: Option<InstId>) -> Option<InstId> {
        match (a, b) {
            (Some(a), Some(b)) => Some(self.ad.add(a, b)),
            (a, b) => a.or(b),
        }
    }

    /// The tangent of the pure float value `inst` (copied as `v`).
    fn jvp(&mut self, inst: &Inst, v: InstId) -> R<Option<InstId>> {
        let sp = inst.span;
        Ok(match &inst.kind {
            InstKind::Unary(UnaryOp::Neg, a) => self.t(*a).map(|ta| self.ad.neg(ta)),
            InstKind::Binary(op, pa, pb) => {
                let (ta, tb) = (self.t(*pa), self.t(*pb));
                if ta.is_none() && tb.is_none() {
                    return Ok(None);
                }
                let (a, b) = (self.ad.m(*pa), self.ad.m(*pb));
                match op {
                    BinaryOp::Add => self.add_opt(ta, tb),
                    BinaryOp::Sub => {
                        let nb = tb.map(|x| self.ad.neg(x));
                        self.add_opt(ta, nb)
                    }
                    BinaryOp::Mul => {
                        let x = ta.map(|x| self.ad.mul(x, b));
                        let y = tb.map(|y| self.ad.mul(a, y));
                        self.add_opt(x, y)
                    }
                    BinaryOp::Div => {
                        // d(a/b) = da/b - (a/b)·db/b
                        let x = ta.map(|x| self.ad.div(x, b));
                        let y = tb.map(|y| {
                            let vy = self.ad.mul(v, y);
                            let q = self.ad.div(vy, b);
                            self.ad.neg(q)
                        });
                        self.add_opt(x, y)
                    }
                    BinaryOp::Rem => {
                        // a % b = a - b·trunc(a/b)
                        let y = tb.map(|y| {
                            let q = self.ad.div(a, b);
                            let tr = self.ad.builtin(Builtin::Trunc, vec![q]);
                            let yt = self.ad.mul(y, tr);
                            self.ad.neg(yt)
                        });
                        self.add_opt(ta, y)
                    }
                    BinaryOp::MatMul => {
                        let x = ta.map(|x| {
                            self.ad
                                .emit(InstKind::Binary(BinaryOp::MatMul, x, b), inst.ty)
                        });
                        let y = tb.map(|y| {
                            self.ad
                                .emit(InstKind::Binary(BinaryOp::MatMul, a, y), inst.ty)
                        });
                        self.add_opt(x, y)
                    }
                    _ => None,
                }
            }
            InstKind::Select {
                cond,
                accept,
                reject,
            } => {
                if self.t(*accept).is_none() && self.t(*reject).is_none() {
                    return Ok(None);
                }
                let c = self.ad.m(*cond);
                let (x, y) = (self.tz(*accept), self.tz(*reject));
                Some(self.ad.select(c, x, y))
            }
            // f32 → f32 is the identity; integer sources have no tangent.
            InstKind::Cast(a) => self.t(*a),
            InstKind::Construct(parts) => {
                if parts.iter().all(|p| self.t(*p).is_none()) {
                    return Ok(None);
                }
                let ts = parts.iter().map(|p| self.tz(*p)).collect();
                Some(self.ad.emit(InstKind::Construct(ts), inst.ty))
            }
            InstKind::Extract(a, k) => self
                .t(*a)
                .map(|ta| self.ad.emit(InstKind::Extract(ta, *k), inst.ty)),
            InstKind::ExtractDyn(a, k) => {
                let k = self.ad.m(*k);
                self.t(*a)
                    .map(|ta| self.ad.emit(InstKind::ExtractDyn(ta, k), inst.ty))
            }
            InstKind::Swizzle(a, comps) => self
                .t(*a)
                .map(|ta| self.ad.emit(InstKind::Swizzle(ta, comps.clone()), inst.ty)),
            InstKind::Insert { base, index, value } => {
                if self.t(*base).is_none() && self.t(*value).is_none() {
                    return Ok(None);
                }
                let (b, x) = (self.tz(*base), self.tz(*value));
                Some(self.ad.emit(
                    InstKind::Insert {
                        base: b,
                        index: *index,
                        value: x,
                    },
                    inst.ty,
                ))
            }
            InstKind::InsertDyn { base, index, value } => {
                if self.t(*base).is_none() && self.t(*value).is_none() {
                    return Ok(None);
                }
                let k = self.ad.m(*index);
                let (b, x) = (self.tz(*base), self.tz(*value));
                Some(self.ad.emit(
                    InstKind::InsertDyn {
                        base: b,
                        index: k,
                        value: x,
                    },
                    inst.ty,
                ))
            }
            InstKind::Builtin(b, args) => self.jvp_builtin(*b, args, v, sp)?,
            // Constants, arguments, kernel scalars, frame, random(), loop
            // counters and bit casts: tangent zero.
            _ => None,
        })
    }

    fn jvp_builtin(
        &mut self,
        b: Builtin,
        pargs: &[InstId],
        r: InstId,
        sp: Span,
    ) -> R<Option<InstId>> {
        use Builtin::*;
        if pargs.iter().all(|x| self.t(*x).is_none()) {
            return Ok(None);
        }
        let a: Vec<InstId> = pargs.iter().map(|x| self.ad.m(*x)).collect();
        // Tangents of float arguments (zero materialised); integer ones are unused.
        let d: Vec<InstId> = pargs
            .iter()
            .map(|&x| {
                if self.ad.src.insts[x].ty.is_float() {
                    self.tz(x)
                } else {
                    self.ad.m(x)
                }
            })
            .collect();
        let t = self.ad.ty(a[0]);
        let s = &mut self.ad;
        if let Some(n) = partials::arity(b) {
            // The sum of every argument's term, in argument order.
            let mut sum = None;
            for (i, &di) in d.iter().enumerate().take(n) {
                let c = partials::term(s, b, i, &a, r, di);
                sum = Some(match sum {
                    None => c,
                    Some(acc) => s.add(acc, c),
                });
            }
            return Ok(sum);
        }
        let out = match b {
            Min | Max => {
                let op = if b == Min { BinaryOp::Le } else { BinaryOp::Ge };
                let c = s.bin(op, a[0], a[1]);
                s.select(c, d[0], d[1])
            }
            Clamp => {
                let below = s.bin(BinaryOp::Lt, a[0], a[1]);
                let above = s.bin(BinaryOp::Gt, a[0], a[2]);
                let inner = s.select(above, d[2], d[0]);
                s.select(below, d[1], inner)
            }
            Atan2 => {
                // atan2(y, x): (dy·x - dx·y) / (x² + y²)
                let y2 = s.mul(a[0], a[0]);
                let x2 = s.mul(a[1], a[1]);
                let q = s.add(x2, y2);
                let p1 = s.mul(d[0], a[1]);
                let p2 = s.mul(d[1], a[0]);
                let n = s.sub(p1, p2);
                s.div(n, q)
            }
            Smoothstep => {
                // q = (x - e0) / w, w = e1 - e0; r = t²(3 - 2t), t = saturate(q);
                // dr = 6t(1 - t)·dq, dq = (dx - de0)/w - (x - e0)(de1 - de0)/w².
                let (e0, e1, x) = (a[0], a[1], a[2]);
                let w = s.sub(e1, e0);
                let xe0 = s.sub(x, e0);
                let q = s.div(xe0, w);
                let tt = s.builtin(Saturate, vec![q]);
                let o = s.fc(1.0, t);
                let six = s.fc(6.0, t);
                let omt = s.sub(o, tt);
                let s0 = s.mul(six, tt);
                let k = s.mul(s0, omt);
                let dxe = s.sub(d[2], d[0]);
                let dq1 = s.div(dxe, w);
                let dw = s.sub(d[1], d[0]);
                let w2 = s.mul(w, w);
                let n = s.mul(xe0, dw);
                let dq2 = s.div(n, w2);
                let dq = s.sub(dq1, dq2);
                s.mul(k, dq)
            }
            Fma => {
                let x = s.mul(d[0], a[1]);
                let y = s.mul(a[0], d[1]);
                let xy = s.add(x, y);
                s.add(xy, d[2])
            }
            Length => {
                let k = s.builtin(Dot, vec![a[0], d[0]]);
                s.bin(BinaryOp::Div, k, r)
            }
            Distance => {
                let dv = s.sub(a[0], a[1]);
                let dd = s.sub(d[0], d[1]);
                let k = s.builtin(Dot, vec![dv, dd]);
                s.bin(BinaryOp::Div, k, r)
            }
            Normalize => {
                let len = s.builtin(Length, vec![a[0]]);
                let k = s.builtin(Dot, vec![r, d[0]]);
                let rk = s.scale(r, k);
                let num = s.sub(d[0], rk);
                let o = s.emit(InstKind::Const(Const::f32(1.0)), Type::F32);
                let inv = s.bin(BinaryOp::Div, o, len);
                s.scale(num, inv)
            }
            Dot => {
                if !s.ty(r).is_float() {
                    return Ok(None);
                }
                let x = s.builtin(Dot, vec![d[0], a[1]]);
                let y = s.builtin(Dot, vec![a[0], d[1]]);
                s.bin(BinaryOp::Add, x, y)
            }
            Cross => {
                let x = s.builtin(Cross, vec![d[0], a[1]]);
                let y = s.builtin(Cross, vec![a[0], d[1]]);
                s.add(x, y)
            }
            Reflect => {
                // r = i - 2·dot(n, i)·n
                let (iv, n) = (a[0], a[1]);
                let (di, dn) = (d[0], d[1]);
                let two = s.emit(InstKind::Const(Const::f32(2.0)), Type::F32);
                let k = s.builtin(Dot, vec![n, iv]);
                let k1 = s.builtin(Dot, vec![dn, iv]);
                let k2 = s.builtin(Dot, vec![n, di]);
                let dk = s.bin(BinaryOp::Add, k1, k2);
                let tdk = s.bin(BinaryOp::Mul, two, dk);
                let tk = s.bin(BinaryOp::Mul, two, k);
                let u = s.scale(n, tdk);
                let w = s.scale(dn, tk);
                let x = s.sub(di, u);
                s.sub(x, w)
            }
            Transpose => s.builtin(Transpose, vec![d[0]]),
            Determinant => {
                // d det(M) = det(M)·tr(M⁻¹ dM) = det(M)·Σ (M⁻ᵀ ∘ dM)
                let Type::Matrix(n) = t else {
                    return s.err(sp, "determinant of a non-matrix");
                };
                let inv = s.builtin(Inverse, vec![a[0]]);
                let it = s.builtin(Transpose, vec![inv]);
                let col = Type::Vector(Scalar::F32, n);
                let mut acc = None;
                for c in 0..n as u32 {
                    let x = s.emit(InstKind::Extract(it, c), col);
                    let y = s.emit(InstKind::Extract(d[0], c), col);
                    let p = s.builtin(Dot, vec![x, y]);
                    acc = Some(match acc {
                        None => p,
                        Some(q) => s.bin(BinaryOp::Add, q, p),
                    });
                }
                let tr = acc.expect("matrices have columns");
                s.bin(BinaryOp::Mul, r, tr)
            }
            Inverse => {
                // d(M⁻¹) = -M⁻¹ dM M⁻¹
                let m1 = s.emit(InstKind::Binary(BinaryOp::MatMul, r, d[0]), t);
                let m2 = s.emit(InstKind::Binary(BinaryOp::MatMul, m1, r), t);
                s.neg(m2)
            }
            Outer => {
                let x = s.builtin(Outer, vec![d[0], a[1]]);
                let y = s.builtin(Outer, vec![a[0], d[1]]);
                s.add(x, y)
            }
            _ => unreachable!("{:?} is in the derivative table (partials::arity)", b),
        };
        Ok(Some(out))
    }
}
