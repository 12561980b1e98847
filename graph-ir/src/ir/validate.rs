//! The IR's invariants, checked in one place.
//!
//! Runs after every pass in tests and debug builds. A program that validates
//! may still be rejected by a backend with an error, but must not make it panic.
//!
//! Invariants:
//! - every operand is defined earlier in the same block or an enclosing block
//!   (SSA dominance in structured control flow), and refers to a value;
//! - each instruction's result type agrees with its operands;
//! - `Break` / `Continue` appear only inside loops, `LoopCounter` only inside
//!   the `RangeFor` it names; locals, fields, functions and roots exist;
//! - after access lowering (`IrForm::Lowered`) no abstract field access
//!   remains, and before it no buffer access exists;
//! - after legalization (`IrForm::Legalized`) no bounds check, range loop,
//!   matrix determinant/inverse, outer product, integer dot, `sign` of an
//!   unsigned value, `random()`, atomic the target lacks (`Program::target`)
//!   or integer division by a constant zero remains; every
//!   `Trap` names a fault site, and abstract IR has none (access lowering
//!   adds the pool-exhaustion traps);
//! - program level: layout parents and children agree, every field lies
//!   inside its layout cell, roots fit the storage cap, the schedule launches
//!   existing kernels and views name existing fields.

use super::*;
use std::collections::HashSet;

#[derive(Debug, Clone, PartialEq)]
pub struct ValidationError {
    pub kernel: String,
    pub function: String,
    pub span: Span,
    pub message: String,
}

impl std::fmt::Display for ValidationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "IR invalid in kernel '{}' fn {} at {}: {}",
            self.kernel, self.function, self.span, self.message
        )
    }
}

/// Which stage of lowering a program is in; each form allows different instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IrForm {
    /// Abstract field access (front end up to access lowering).
    Abstract,
    /// Word-addressed buffer access (after `lower_access`).
    Lowered,
    /// What backends accept (after `legalize`).
    Legalized,
}

/// `false` = abstract, `true` = lowered (the older boolean form of the argument).
impl From<bool> for IrForm {
    fn from(lowered: bool) -> Self {
        if lowered {
            IrForm::Lowered
        } else {
            IrForm::Abstract
        }
    }
}

pub fn validate_program(program: &Program, form: impl Into<IrForm>) -> Result<(), ValidationError> {
    let form = form.into();
    validate_structure(program)?;
    // Tapes are expanded into plain launches by `passes::autodiff`, before
    // access lowering; a backend never sees one.
    if form != IrForm::Abstract {
        // The first such step in schedule order (a step before its body).
        let mut survivor = None;
        for list in program.schedule.lists() {
            steps::walk(list, &mut |st| {
                survivor = survivor.or(match st {
                    Step::Tape { node_id, .. }
                    | Step::Clear { node_id, .. }
                    | Step::Optimize { node_id, .. } => Some(node_id.as_str()),
                    Step::ListGen { .. } if form == IrForm::Legalized => Some("list generation"),
                    Step::Launch(_) | Step::Repeat { .. } | Step::ListGen { .. } => None,
                })
            });
        }
        if let Some(t) = survivor {
            return Err(program_err(
                t,
                "a tape, optimize or clear survived its pass".into(),
            ));
        }
    }
    for (_, k) in program.kernels.iter() {
        validate_kernel(program, k, form)?;
        // A launch bounded by a device word: the word is in a root buffer
        // and bounds axis 0 of a range (backends rely on both).
        if let Some(c) = k.count_from {
            let root = program.layouts.get(c.root);
            if root.is_none_or(|r| r.parent.is_some())
                || c.word >= layout::root_words(program, c.root)
                || !matches!(&k.iteration, Iteration::Range(s) if !s.is_empty())
            {
                return Err(program_err(
                    &k.name,
                    "count_from names no word of a root buffer, or the kernel has no range".into(),
                ));
            }
        }
    }
    Ok(())
}

fn program_err(node: &str, message: String) -> ValidationError {
    ValidationError {
        kernel: node.to_string(),
        function: String::new(),
        span: Span::default(),
        message,
    }
}

/// The program-level invariants: layouts, fields, schedule and views.
pub fn validate_structure(program: &Program) -> Result<(), ValidationError> {
    for (h, l) in program.layouts.iter() {
        let bad = |m: &str| Err(program_err(&l.node_id, format!("layout: {}", m)));
        if let Some(p) = l.parent {
            let Some(pl) = program.layouts.get(p) else {
                return bad("parent out of range");
            };
            if !pl.children.contains(&LayoutChild::Layout(h)) {
                return bad("not among its parent's children");
            }
            if pl.shape.len() != l.shape.len() {
                return bad("axis count differs from its parent's");
            }
        } else if layout::root_words(program, h) > layout::MAX_LAYOUT_WORDS {
            return bad("root exceeds the 2^32-word address space");
        }
        for c in &l.children {
            let ok = match *c {
                LayoutChild::Layout(cl) => {
                    program.layouts.get(cl).is_some_and(|x| x.parent == Some(h))
                }
                LayoutChild::Field(f) => program.fields.get(f).is_some_and(|x| x.layout == h),
            };
            if !ok {
                return bad("a child does not point back to this node");
            }
        }
    }
    for (_, f) in program.fields.iter() {
        let Some(l) = program.layouts.get(f.layout) else {
            return Err(program_err(&f.name, "field: layout out of range".into()));
        };
        if f.offset_in_cell + f.element_bits() > l.cell_bits {
            return Err(program_err(
                &f.name,
                "field: does not fit its layout cell".into(),
            ));
        }
        if f.shape.len() != l.shape.len() {
            return Err(program_err(
                &f.name,
                "field: axis count differs from its layout's".into(),
            ));
        }
    }
    let mut step = |st: &Step| -> Result<(), ValidationError> {
        match st {
            Step::Launch(k) if program.kernels.get(*k).is_none() => {
                Err(program_err("schedule", "launch of a missing kernel".into()))
            }
            Step::Tape { loss, .. } if program.fields.get(*loss).is_none() => Err(program_err(
                "schedule",
                "tape of a missing loss field".into(),
            )),
            Step::Optimize { spec, .. }
                if std::iter::once(&spec.loss)
                    .chain(&spec.wrt)
                    .any(|f| program.fields.get(*f).is_none()) =>
            {
                Err(program_err(
                    "schedule",
                    "optimize of a missing field".into(),
                ))
            }
            Step::Clear { layout, .. } if program.layouts.get(*layout).is_none() => {
                Err(program_err("schedule", "clear of a missing layout".into()))
            }
            Step::ListGen { layout }
                if program
                    .layouts
                    .get(*layout)
                    .is_none_or(|l| !l.kind.is_sparse()) =>
            {
                Err(program_err(
                    "schedule",
                    "list generation of a missing or dense layout".into(),
                ))
            }
            _ => Ok(()),
        }
    };
    for &(f, g) in &program.grads {
        if program.fields.get(f).is_none() || program.fields.get(g).is_none() {
            return Err(program_err("fields", "gradient of a missing field".into()));
        }
    }
    for list in program.schedule.lists() {
        steps::try_walk(list, &mut step)?;
    }
    for v in &program.views {
        let fields = match v {
            View::Image { field, .. } | View::Histogram { field, .. } => vec![*field],
            View::Volume { field, mode, .. } => std::iter::once(*field)
                .chain(mode.emission_field())
                .collect(),
            View::Surface { field, .. } => vec![*field],
            View::Particles {
                positions,
                color_field,
                ..
            } => std::iter::once(*positions).chain(*color_field).collect(),
            // Named sources (`ViewSource::Added`) are resolved by
            // `passes::views`, which reports a missing one.
            View::Plot { field, count, .. } => std::iter::once(field)
                .chain(count)
                .filter_map(ViewSource::id)
                .collect(),
        };
        if fields.iter().any(|f| program.fields.get(*f).is_none()) {
            return Err(program_err(v.node_id(), "view: field out of range".into()));
        }
    }
    for (_, k) in program.kernels.iter() {
        if k.bindings
            .iter()
            .any(|(_, f)| program.fields.get(*f).is_none())
        {
            return Err(program_err(
                &k.name,
                "kernel: bound field out of range".into(),
            ));
        }
    }
    Ok(())
}

pub fn validate_kernel(
    program: &Program,
    kernel: &Kernel,
    form: impl Into<IrForm>,
) -> Result<(), ValidationError> {
    let form = form.into();
    // f16 is the front end's type; `passes::half` removes it before access
    // lowering, so no backend sees it.
    if form != IrForm::Abstract {
        let shared_f16 = kernel
            .workgroup
            .as_ref()
            .is_some_and(|w| w.arrays.iter().any(|a| a.ty.is_f16()));
        for f in std::iter::once(&kernel.entry).chain(kernel.functions.iter().map(|(_, f)| f)) {
            if shared_f16 || f.uses_f16() {
                return Err(err(
                    kernel,
                    f,
                    Span::default(),
                    "an f16 value survived `half`".into(),
                ));
            }
        }
    }
    for (_, f) in kernel.functions.iter() {
        check_function(program, kernel, f, form)?;
    }
    check_function(program, kernel, &kernel.entry, form)?;
    if kernel.entry.args.len() != kernel.dims {
        return Err(err(
            kernel,
            &kernel.entry,
            Span::default(),
            "entry arguments do not match loop dimensions".into(),
        ));
    }
    check_workgroup(kernel)
}

/// A workgroup kernel's block divides a dense range, and its barriers sit
/// at the top level of the entry, where every invocation of a block
/// reaches each of them (uniform control flow, by construction: the front
/// end unrolls constant loops around barriers and refuses the rest).
fn check_workgroup(kernel: &Kernel) -> Result<(), ValidationError> {
    let fail = |f: &Function, span: Span, m: &str| Err(err(kernel, f, span, m.to_string()));
    // Nested in the entry's body or anywhere in a helper (instructions no
    // block holds any more do not count).
    fn nested_barrier(f: &Function, b: &Block, top: bool) -> Option<Span> {
        b.iter().find_map(|&h| {
            let inst = &f.insts[h];
            if matches!(inst.kind, InstKind::Barrier) && !top {
                return Some(inst.span);
            }
            inst.kind
                .blocks()
                .into_iter()
                .find_map(|nb| nested_barrier(f, nb, false))
        })
    }
    for f in std::iter::once(&kernel.entry).chain(kernel.functions.iter().map(|(_, f)| f)) {
        let is_entry = std::ptr::eq(f, &kernel.entry);
        if let Some(span) = nested_barrier(f, &f.body, is_entry) {
            return fail(
                f,
                span,
                "a barrier must be at the top level of the kernel's entry",
            );
        }
    }
    let Some(w) = &kernel.workgroup else {
        return Ok(());
    };
    if w.size == 0 || w.size > MAX_WORKGROUP {
        return fail(
            &kernel.entry,
            Span::default(),
            "workgroup size out of range",
        );
    }
    if w.arrays.iter().any(|a| a.len == 0 || a.ty == Type::Void) {
        return fail(&kernel.entry, Span::default(), "empty shared array");
    }
    if w.size > 1 {
        let Iteration::Range(shape) = &kernel.iteration else {
            return fail(
                &kernel.entry,
                Span::default(),
                "a workgroup kernel runs over a dense range",
            );
        };
        let total: u64 = shape.iter().map(|&s| s as u64).product();
        if kernel.count_from.is_some() || !total.is_multiple_of(w.size as u64) {
            return fail(
                &kernel.entry,
                Span::default(),
                "the workgroup size must divide the kernel's range",
            );
        }
    }
    Ok(())
}

fn err(kernel: &Kernel, f: &Function, span: Span, message: String) -> ValidationError {
    ValidationError {
        kernel: kernel.name.clone(),
        function: f.name.clone(),
        span,
        message,
    }
}

struct Ctx<'a> {
    program: &'a Program,
    kernel: &'a Kernel,
    f: &'a Function,
    form: IrForm,
    defined: HashSet<InstId>,
    seen: HashSet<InstId>,
    loops: Vec<Option<InstId>>,
}

fn check_function(
    program: &Program,
    kernel: &Kernel,
    f: &Function,
    form: IrForm,
) -> Result<(), ValidationError> {
    let mut ctx = Ctx {
        program,
        kernel,
        f,
        form,
        defined: HashSet::new(),
        seen: HashSet::new(),
        loops: vec![],
    };
    ctx.block(&f.body)
}

impl Ctx<'_> {
    fn fail(&self, h: InstId, msg: String) -> ValidationError {
        let span = self.f.insts.get(h).map(|i| i.span).unwrap_or_default();
        err(self.kernel, self.f, span, format!("{:?}: {}", h, msg))
    }

    fn block(&mut self, block: &Block) -> Result<(), ValidationError> {
        let scope_start: Vec<InstId> = Vec::new();
        let mut added = scope_start;
        for &h in block {
            if self.f.insts.get(h).is_none() {
                return Err(self.fail(h, "instruction handle out of range".into()));
            }
            if !self.seen.insert(h) {
                return Err(self.fail(
                    h,
                    "instruction placed in more than one block position".into(),
                ));
            }
            self.inst(h)?;
            self.defined.insert(h);
            added.push(h);
        }
        for h in added {
            self.defined.remove(&h);
        }
        Ok(())
    }

    fn ty(&self, h: InstId) -> Type {
        self.f.insts[h].ty
    }

    /// Whether `h` is a constant zero or a vector built with one.
    /// The constant bits of `h`'s components, when every one is a constant.
    fn const_bits(&self, h: InstId) -> Option<Vec<u64>> {
        match &self.f.insts[h].kind {
            InstKind::Const(c) => Some(vec![c.bits]),
            InstKind::Bitcast(x) => self.const_bits(*x),
            InstKind::Construct(parts) => {
                let mut out = Vec::new();
                for p in parts {
                    out.extend(self.const_bits(*p)?);
                }
                Some(out)
            }
            _ => None,
        }
    }

    /// Whether a native integer division of `a` by `b` cannot fault, as
    /// `legalize` leaves every one: a constant divisor with no zero (and,
    /// for i32, no -1 unless that dividend component is a constant other
    /// than `i32::MIN`), or a divisor legalize chose with a `select`.
    fn division_is_guarded(&self, a: InstId, b: InstId, s: Scalar) -> bool {
        let signed = matches!(s, Scalar::I32 | Scalar::I64);
        let minus_one = s.mask();
        let min = 1u64 << (32 * s.words() - 1);
        if matches!(self.f.insts[b].kind, InstKind::Select { .. }) {
            return true;
        }
        let Some(bits) = self.const_bits(b) else {
            return false;
        };
        let dividend = self.const_bits(a);
        bits.iter().enumerate().all(|(k, &v)| {
            v != 0
                && (!signed
                    || v != minus_one
                    || dividend
                        .as_ref()
                        .is_some_and(|d| d.get(k).is_some_and(|&x| x != min)))
        })
    }

    fn inst(&mut self, h: InstId) -> Result<(), ValidationError> {
        let inst = &self.f.insts[h];
        for op in inst.kind.operands() {
            if !self.defined.contains(&op) {
                return Err(self.fail(h, format!("operand {:?} is not defined before use", op)));
            }
            if self.ty(op) == Type::Void {
                return Err(self.fail(h, format!("operand {:?} has no value", op)));
            }
        }
        let t = inst.ty;
        let bad = |s: &Self, m: &str| Err(s.fail(h, m.to_string()));
        match &inst.kind {
            InstKind::Const(c) => {
                if t != Type::Scalar(c.scalar) {
                    return bad(self, "constant type mismatch");
                }
            }
            InstKind::Arg(i) => {
                if self.f.args.get(*i as usize) != Some(&t) {
                    return bad(self, "argument index or type mismatch");
                }
            }
            InstKind::Param(i) => {
                if self.kernel.params.get(*i as usize).map(|p| p.ty) != Some(t) {
                    return bad(self, "parameter index or type mismatch");
                }
            }
            InstKind::Frame => {
                if t != Type::I32 {
                    return bad(self, "frame must be i32");
                }
            }
            InstKind::Unary(_, a) => {
                if self.ty(*a) != t {
                    return bad(self, "unary result type differs from operand");
                }
            }
            InstKind::Binary(op, a, b) => {
                let (ta, tb) = (self.ty(*a), self.ty(*b));
                if *op == BinaryOp::MatMul {
                    if !matches!(ta, Type::Matrix(_)) && !matches!(tb, Type::Matrix(_)) {
                        return bad(self, "matmul needs a matrix operand");
                    }
                } else if ta != tb {
                    return bad(self, &format!("binary operands differ: {} and {}", ta, tb));
                } else if op.is_comparison() {
                    if t.scalar() != Some(Scalar::Bool) || t.components() != ta.components() {
                        return bad(self, "comparison must give bool of the operand width");
                    }
                } else if t != ta {
                    return bad(self, "binary result type differs from operands");
                }
                if self.form == IrForm::Legalized
                    && matches!(op, BinaryOp::Div | BinaryOp::Rem)
                    && ta.is_int()
                    && !self.division_is_guarded(*a, *b, ta.scalar().unwrap_or(Scalar::U32))
                {
                    // Backends divide natively: a divisor that may be 0 (or
                    // -1 with an i32::MIN dividend) would fault or differ.
                    return bad(
                        self,
                        "integer division whose divisor legalize did not guard",
                    );
                }
            }
            InstKind::Select {
                cond,
                accept,
                reject,
            } => {
                if self.ty(*accept) != t || self.ty(*reject) != t {
                    return bad(self, "select arms differ from result");
                }
                let c = self.ty(*cond);
                if c.scalar() != Some(Scalar::Bool)
                    || !(c.is_scalar() || c.components() == t.components())
                {
                    return bad(self, "select condition must be bool");
                }
            }
            InstKind::Cast(a) => {
                if self.ty(*a).components() != t.components() {
                    return bad(self, "conversion changes the component count");
                }
            }
            InstKind::Bitcast(a) => {
                // Same bits: component for component, or a 64-bit scalar
                // to / from its two words (`vec2<u32>`, low first).
                let ta = self.ty(*a);
                let pair = |x: Type, y: Type| {
                    x.is_wide() && x.is_scalar() && matches!(y, Type::Vector(s, 2) if !s.is_wide())
                };
                let ok = if ta.components() == t.components() {
                    ta.words() == t.words()
                } else {
                    pair(ta, t) || pair(t, ta)
                };
                if !ok || matches!(ta, Type::Matrix(_)) != matches!(t, Type::Matrix(_)) {
                    return bad(self, "a bitcast must keep every bit (the same words per component, or a 64-bit scalar and its two words)");
                }
            }
            InstKind::Construct(v) => {
                let n: usize = v.iter().map(|x| self.ty(*x).components()).sum();
                if n != t.components() {
                    return bad(self, "construct components do not add up");
                }
            }
            InstKind::Extract(a, i) => {
                let ta = self.ty(*a);
                let len = match ta {
                    Type::Vector(_, n) | Type::Matrix(n) => n as u32,
                    _ => return bad(self, "extract from a non-composite"),
                };
                if *i >= len {
                    return bad(self, "extract index out of range");
                }
            }
            InstKind::ExtractDyn(a, _)
            | InstKind::InsertDyn { base: a, .. }
            | InstKind::Insert { base: a, .. } => {
                if !matches!(self.ty(*a), Type::Vector(..) | Type::Matrix(_)) {
                    return bad(self, "indexing a non-composite");
                }
            }
            InstKind::Swizzle(a, c) => {
                let n = match self.ty(*a) {
                    Type::Vector(_, n) => n,
                    _ => return bad(self, "swizzle of a non-vector"),
                };
                if c.iter().any(|&i| i >= n) || c.len() != t.components() {
                    return bad(self, "swizzle component out of range");
                }
            }
            InstKind::Builtin(b, args) => {
                let tys: Vec<Type> = args.iter().map(|a| self.ty(*a)).collect();
                if self.form == IrForm::Legalized
                    && (matches!(b, Builtin::Determinant | Builtin::Inverse | Builtin::Outer)
                        || (*b == Builtin::Sign && tys[0].scalar() == Some(Scalar::U32))
                        || (*b == Builtin::Dot && tys[0].is_int()))
                {
                    return bad(self, &format!("{} survived legalization", b.name()));
                }
                match b.result_type(&tys) {
                    Ok(r) if r == t => {}
                    Ok(_) => return bad(self, "builtin result type mismatch"),
                    Err(e) => return bad(self, &e),
                }
            }
            InstKind::Call(fid, args) => {
                let Some(callee) = self.kernel.functions.get(*fid) else {
                    return bad(self, "call to a missing function");
                };
                let tys: Vec<Type> = args.iter().map(|a| self.ty(*a)).collect();
                if tys != callee.args || callee.ret != t {
                    return bad(self, "call signature mismatch");
                }
            }
            InstKind::Random => {
                if t != Type::F32 {
                    return bad(self, "random must be f32");
                }
                if self.form == IrForm::Legalized {
                    return bad(self, "random() after legalization (legalize expands it)");
                }
            }
            InstKind::Launch(_) | InstKind::RngLoad => {
                if t != Type::U32 {
                    return bad(self, "launch values and the random state are u32");
                }
                if matches!(inst.kind, InstKind::Launch(_))
                    && !std::ptr::eq(self.f, &self.kernel.entry)
                {
                    // The linear index is the entry's: helpers get values as arguments.
                    return bad(self, "a launch value outside the kernel's entry");
                }
            }
            InstKind::RngStore(v) => {
                if self.ty(*v) != Type::U32 {
                    return bad(self, "the random state is u32");
                }
            }
            InstKind::TripsLoad | InstKind::TripsStore(_) | InstKind::LaneMax(_) => {
                if self.form != IrForm::Legalized {
                    return bad(self, "loop trip counting before legalization");
                }
                let want = if matches!(inst.kind, InstKind::TripsStore(_)) {
                    Type::Void
                } else {
                    Type::U32
                };
                let operand_ok = match &inst.kind {
                    InstKind::TripsStore(v) | InstKind::LaneMax(v) => self.ty(*v) == Type::U32,
                    _ => true,
                };
                if t != want || !operand_ok {
                    return bad(self, "the loop trip count and lane_max are u32");
                }
            }
            InstKind::LocalLoad(l) | InstKind::LocalStore(l, _) => {
                let Some(local) = self.f.locals.get(*l) else {
                    return bad(self, "local out of range");
                };
                if let InstKind::LocalStore(_, v) = &inst.kind {
                    if self.ty(*v) != local.ty {
                        return bad(self, "local store type mismatch");
                    }
                } else if t != local.ty {
                    return bad(self, "local load type mismatch");
                }
            }
            InstKind::FieldLoad { field, index }
            | InstKind::FieldStore { field, index, .. }
            | InstKind::FieldAtomic { field, index, .. }
            | InstKind::FieldIsActive { field, index, .. }
            | InstKind::FieldActivate { field, index }
            | InstKind::FieldDeactivate { field, index } => {
                if self.form != IrForm::Abstract {
                    return bad(self, "abstract field access after lowering");
                }
                let Some(fd) = self.program.fields.get(*field) else {
                    return bad(self, "field out of range");
                };
                if index.len() != fd.shape.len() || index.iter().any(|i| self.ty(*i) != Type::I32) {
                    return bad(self, "field index must be one i32 per axis");
                }
                match &inst.kind {
                    InstKind::FieldLoad { .. } if t != fd.ty => return bad(self, "field load type mismatch"),
                    InstKind::FieldIsActive { .. } if t != Type::BOOL => return bad(self, "is_active is a bool"),
                    InstKind::FieldActivate { .. } | InstKind::FieldDeactivate { .. } if t != Type::Void => {
                        return bad(self, "activate / deactivate produce no value")
                    }
                    InstKind::FieldStore { value, .. } if self.ty(*value) != fd.ty => {
                        return bad(self, "field store type mismatch")
                    }
                    InstKind::FieldAtomic { .. } if fd.ty.is_wide() => {
                        return bad(self, "an atomic on a 64-bit field")
                    }
                    InstKind::FieldAtomic { op, value, .. }
                        if self.ty(*value) != fd.ty
                            || (!fd.ty.is_scalar() && !matches!(op, AtomicOp::Add | AtomicOp::Sub | AtomicOp::Min | AtomicOp::Max)) =>
                    {
                        return bad(self, "atomic value type mismatch, or a non-scalar atomic other than add/sub/min/max")
                    }
                    _ => {}
                }
            }
            InstKind::FieldAppend { field, list, .. } | InstKind::FieldLength { field, list } => {
                if self.form != IrForm::Abstract {
                    return bad(self, "abstract field access after lowering");
                }
                let Some(fd) = self.program.fields.get(*field) else {
                    return bad(self, "field out of range");
                };
                if self.ty(*list) != Type::I32 || t != Type::I32 {
                    return bad(self, "append / length take and give an i32");
                }
                if let InstKind::FieldAppend { value, .. } = &inst.kind {
                    if self.ty(*value) != fd.ty {
                        return bad(self, "append value type mismatch");
                    }
                }
            }
            InstKind::Trap { site, value } => {
                if self.form == IrForm::Abstract {
                    return bad(self, "trap before access lowering");
                }
                if *site as usize >= self.kernel.fault_sites.len() || !self.ty(*value).is_scalar() {
                    return bad(
                        self,
                        "trap needs a fault site of the kernel and a scalar value",
                    );
                }
            }
            InstKind::SharedLoad { array, index } | InstKind::SharedStore { array, index, .. } => {
                let Some(a) = self
                    .kernel
                    .workgroup
                    .as_ref()
                    .and_then(|w| w.arrays.get(*array as usize))
                else {
                    return bad(self, "no such shared array in the kernel's workgroup");
                };
                if self.ty(*index) != Type::I32 {
                    return bad(self, "a shared array index is an i32");
                }
                let want = match &inst.kind {
                    InstKind::SharedStore { value, .. } => {
                        if self.ty(*value) != a.ty {
                            return bad(self, "shared store value type mismatch");
                        }
                        Type::Void
                    }
                    _ => a.ty,
                };
                if t != want {
                    return bad(self, "shared access result type mismatch");
                }
            }
            InstKind::Barrier => {
                if self.kernel.workgroup.is_none() || t != Type::Void {
                    return bad(self, "a barrier needs a workgroup kernel and has no value");
                }
            }
            InstKind::IndexCheck { index, len } => {
                if self.form == IrForm::Legalized {
                    return bad(self, "index check after legalization");
                }
                if self.ty(*index) != Type::I32 || *len == 0 {
                    return bad(self, "index check needs an i32 index and a length");
                }
            }
            InstKind::BoundsCheck { field, index, .. } => {
                if self.form == IrForm::Legalized {
                    return bad(self, "bounds check after legalization");
                }
                if self.program.fields.get(*field).is_none() || self.ty(*index) != Type::I32 {
                    return bad(
                        self,
                        "bounds check needs an existing field and an i32 index",
                    );
                }
            }
            InstKind::BufLoad { root, addr }
            | InstKind::BufStore { root, addr, .. }
            | InstKind::BufAtomic { root, addr, .. } => {
                if self.form == IrForm::Abstract {
                    return bad(self, "buffer access before lowering");
                }
                if self
                    .program
                    .layouts
                    .get(*root)
                    .is_none_or(|l| l.parent.is_some())
                {
                    return bad(self, "buffer access names a non-root layout");
                }
                if self.ty(*addr) != Type::U32 {
                    return bad(self, "buffer address must be u32");
                }
                let word = match &inst.kind {
                    InstKind::BufStore { value, .. } => self.ty(*value),
                    _ => t,
                };
                if word.is_wide() || word.components() != 1 {
                    return bad(self, "buffer accesses move one 32-bit word");
                }
                if let InstKind::BufAtomic { op, .. } = &inst.kind {
                    if self.form == IrForm::Legalized
                        && t.scalar()
                            .is_some_and(|s| !self.program.target.has_atomic(*op, s))
                    {
                        return bad(
                            self,
                            "an atomic the target lacks after legalization (legalize expands it)",
                        );
                    }
                }
            }
            InstKind::If {
                cond,
                accept,
                reject,
            } => {
                if self.ty(*cond) != Type::BOOL {
                    return bad(self, "if condition must be bool");
                }
                let (a, r) = (accept.clone(), reject.clone());
                self.block(&a)?;
                self.block(&r)?;
            }
            InstKind::RangeFor {
                begin,
                end,
                step,
                body,
                ..
            } => {
                if self.form == IrForm::Legalized {
                    return bad(self, "range loop survived legalization");
                }
                let tb = self.ty(*begin);
                if !tb.is_scalar() || !tb.is_int() || self.ty(*end) != tb || self.ty(*step) != tb {
                    return bad(self, "range bounds must be integers of one type");
                }
                let body = body.clone();
                self.loops.push(Some(h));
                self.block(&body)?;
                self.loops.pop();
            }
            InstKind::LoopCounter(l) => {
                if !self.loops.contains(&Some(*l)) {
                    return bad(self, "loop counter outside its loop");
                }
            }
            InstKind::Loop { body } => {
                let body = body.clone();
                self.loops.push(None);
                self.block(&body)?;
                self.loops.pop();
            }
            InstKind::Break | InstKind::Continue => {
                if self.loops.is_empty() {
                    return bad(self, "break/continue outside a loop");
                }
            }
            InstKind::Return(v) => {
                let rt = v.map(|v| self.ty(v)).unwrap_or(Type::Void);
                if rt != self.f.ret {
                    return bad(self, "return type mismatch");
                }
            }
        }
        Ok(())
    }
}
