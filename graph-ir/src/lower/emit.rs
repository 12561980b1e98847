//! The IR builder the passes that write whole kernels emit through (not a
//! pass): a function under construction and its open blocks. Every
//! instruction goes to the innermost open block; `when`, `range`,
//! `range_incl` and `forever` open a block for their body and close it
//! into the structured instruction. `kernel` ends the build. Used by
//! `passes::optimize` (the optimizer's system kernels) and `passes::views`
//! (every view kernel).

use crate::arena::Arena;
use crate::ir::*;
use crate::types::{Scalar, Type};

/// Emits instructions into a function, block by block.
pub struct Emit {
    /// The function being built (its body is set by [`Emit::kernel`]).
    pub f: Function,
    /// The open blocks, innermost last; the first is the entry block.
    blocks: Vec<Block>,
}

impl Emit {
    /// A function `name` of `dims` i32 arguments (the launch indices).
    pub fn new(name: &str, dims: usize) -> Emit {
        Emit {
            f: Function::new(name, vec![Type::I32; dims], Type::Void, Span::default()),
            blocks: vec![Vec::new()],
        }
    }
    pub fn emit(&mut self, kind: InstKind, ty: Type) -> InstId {
        let h = self.f.insts.append(Inst {
            kind,
            ty,
            span: Span::default(),
        });
        self.blocks.last_mut().expect("a block is open").push(h);
        h
    }
    pub fn f32c(&mut self, v: f32) -> InstId {
        self.emit(InstKind::Const(Const::f32(v)), Type::F32)
    }
    pub fn i32c(&mut self, v: i32) -> InstId {
        self.emit(InstKind::Const(Const::i32(v)), Type::I32)
    }
    pub fn u32c(&mut self, v: u32) -> InstId {
        self.emit(InstKind::Const(Const::u32(v)), Type::U32)
    }
    pub fn bin(&mut self, op: BinaryOp, a: InstId, b: InstId) -> InstId {
        let ty = if op.is_comparison() || matches!(op, BinaryOp::LogicalAnd | BinaryOp::LogicalOr) {
            Type::BOOL
        } else {
            self.f.ty(a)
        };
        self.emit(InstKind::Binary(op, a, b), ty)
    }
    pub fn call(&mut self, b: Builtin, args: Vec<InstId>) -> InstId {
        let ty = match b {
            Builtin::IsNan | Builtin::IsInf => Type::BOOL,
            _ => self.f.ty(args[0]),
        };
        self.emit(InstKind::Builtin(b, args), ty)
    }
    pub fn cast(&mut self, v: InstId, ty: Type) -> InstId {
        self.emit(InstKind::Cast(v), ty)
    }
    pub fn bitcast(&mut self, v: InstId, ty: Type) -> InstId {
        self.emit(InstKind::Bitcast(v), ty)
    }
    pub fn select(&mut self, cond: InstId, accept: InstId, reject: InstId) -> InstId {
        let ty = self.f.ty(accept);
        self.emit(
            InstKind::Select {
                cond,
                accept,
                reject,
            },
            ty,
        )
    }
    pub fn extract(&mut self, v: InstId, c: u32) -> InstId {
        let ty = match self.f.ty(v) {
            Type::Vector(s, _) => Type::Scalar(s),
            t => t,
        };
        self.emit(InstKind::Extract(v, c), ty)
    }
    pub fn load(&mut self, field: FieldId, ty: Type, index: Vec<InstId>) -> InstId {
        self.emit(InstKind::FieldLoad { field, index }, ty)
    }
    pub fn store(&mut self, field: FieldId, index: Vec<InstId>, value: InstId) {
        self.emit(
            InstKind::FieldStore {
                field,
                index,
                value,
            },
            Type::Void,
        );
    }
    pub fn atomic(&mut self, op: AtomicOp, field: FieldId, index: Vec<InstId>, value: InstId) {
        self.emit(
            InstKind::FieldAtomic {
                op,
                field,
                index,
                value,
                cmp: None,
            },
            Type::U32,
        );
    }
    pub fn args(&mut self, dims: usize) -> Vec<InstId> {
        (0..dims)
            .map(|d| self.emit(InstKind::Arg(d as u32), Type::I32))
            .collect()
    }
    pub fn local(&mut self, name: &str, ty: Type, init: InstId) -> LocalId {
        let l = self.f.locals.append(Local {
            name: name.into(),
            ty,
        });
        self.emit(InstKind::LocalStore(l, init), Type::Void);
        l
    }
    pub fn get(&mut self, l: LocalId) -> InstId {
        let ty = self.f.locals[l].ty;
        self.emit(InstKind::LocalLoad(l), ty)
    }
    pub fn set(&mut self, l: LocalId, v: InstId) {
        self.emit(InstKind::LocalStore(l, v), Type::Void);
    }
    /// `if cond { then }`.
    pub fn when(&mut self, cond: InstId, then: impl FnOnce(&mut Self)) {
        self.blocks.push(Vec::new());
        then(self);
        let accept = self.blocks.pop().expect("pushed above");
        self.emit(
            InstKind::If {
                cond,
                accept,
                reject: vec![],
            },
            Type::Void,
        );
    }
    /// `for counter in begin..=end { body(counter) }` (i32; empty when begin > end).
    pub fn range_incl(&mut self, begin: InstId, end: InstId, body: impl FnOnce(&mut Self, InstId)) {
        let step = self.i32c(1);
        // The loop's handle is needed inside its body (`LoopCounter`), so
        // it is appended first and its body filled in afterwards.
        let l = self.emit(
            InstKind::RangeFor {
                begin,
                end,
                step,
                inclusive: true,
                body: vec![],
            },
            Type::Void,
        );
        self.blocks.push(Vec::new());
        let c = self.emit(InstKind::LoopCounter(l), Type::I32);
        body(self, c);
        let b = self.blocks.pop().expect("pushed above");
        if let InstKind::RangeFor { body, .. } = &mut self.f.insts[l].kind {
            *body = b;
        }
    }
    /// `loop { body }` (left by a `Break`).
    pub fn forever(&mut self, body: impl FnOnce(&mut Self)) {
        self.blocks.push(Vec::new());
        body(self);
        let body = self.blocks.pop().expect("pushed above");
        self.emit(InstKind::Loop { body }, Type::Void);
    }
    /// The f32 components of a value of `ty` (column-major for matrices).
    pub fn components(&mut self, v: InstId, ty: Type) -> Vec<InstId> {
        match ty {
            Type::Vector(_, n) => (0..n as u32)
                .map(|c| self.emit(InstKind::Extract(v, c), Type::F32))
                .collect(),
            Type::Matrix(n) => {
                let col_ty = Type::Vector(Scalar::F32, n);
                let mut out = Vec::new();
                for c in 0..n as u32 {
                    let col = self.emit(InstKind::Extract(v, c), col_ty);
                    out.extend(self.components(col, col_ty));
                }
                out
            }
            _ => vec![v],
        }
    }
    /// A value of `ty` from its components (the inverse of `components`).
    pub fn assemble(&mut self, comps: &[InstId], ty: Type) -> InstId {
        match ty {
            Type::Vector(..) => self.emit(InstKind::Construct(comps.to_vec()), ty),
            Type::Matrix(n) => {
                let col_ty = Type::Vector(Scalar::F32, n);
                let cols: Vec<InstId> = comps
                    .chunks(n as usize)
                    .map(|c| self.emit(InstKind::Construct(c.to_vec()), col_ty))
                    .collect();
                self.emit(InstKind::Construct(cols), ty)
            }
            _ => comps[0],
        }
    }
    /// `for counter in 0..n { body(counter) }`.
    pub fn range(&mut self, n: u32, body: impl FnOnce(&mut Self, InstId)) {
        let begin = self.i32c(0);
        let end = self.i32c(n as i32);
        let step = self.i32c(1);
        // The loop's handle is needed inside its body (`LoopCounter`), so
        // it is appended first and its body filled in afterwards.
        let l = self.emit(
            InstKind::RangeFor {
                begin,
                end,
                step,
                inclusive: false,
                body: vec![],
            },
            Type::Void,
        );
        self.blocks.push(Vec::new());
        let c = self.emit(InstKind::LoopCounter(l), Type::I32);
        body(self, c);
        let b = self.blocks.pop().expect("pushed above");
        if let InstKind::RangeFor { body, .. } = &mut self.f.insts[l].kind {
            *body = b;
        }
    }
    /// A value loaded from a scalar field as f32.
    pub fn as_f32(&mut self, v: InstId) -> InstId {
        if self.f.ty(v) == Type::F32 {
            v
        } else {
            self.cast(v, Type::F32)
        }
    }
    /// Whether an f32 is finite.
    pub fn finite(&mut self, v: InstId) -> InstId {
        let n = self.call(Builtin::IsNan, vec![v]);
        let i = self.call(Builtin::IsInf, vec![v]);
        let bad = self.bin(BinaryOp::LogicalOr, n, i);
        self.emit(InstKind::Unary(UnaryOp::Not, bad), Type::BOOL)
    }
    /// The kernel whose entry is the function built, over `iteration`
    /// with `dims` indices, its field ports bound as `bindings` say (the
    /// caller names it).
    pub fn kernel(
        mut self,
        iteration: Iteration,
        dims: usize,
        bindings: Vec<(&str, FieldId)>,
    ) -> Kernel {
        self.f.body = self.blocks.pop().expect("the entry block");
        Kernel {
            fused: Vec::new(),
            name: String::new(),
            iteration,
            dims,
            params: Vec::new(),
            entry: self.f,
            functions: Arena::new(),
            bindings: bindings
                .into_iter()
                .map(|(p, f)| (p.to_string(), f))
                .collect(),
            fault_sites: Vec::new(),
            count_from: None,
            loops_end: false,
            zero_fill: None,
            workgroup: None,
        }
    }
    /// [`Emit::kernel`] over the range `shape`.
    pub fn range_kernel(self, shape: Vec<u32>, bindings: Vec<(&str, FieldId)>) -> Kernel {
        let dims = shape.len();
        self.kernel(Iteration::Range(shape), dims, bindings)
    }
}
