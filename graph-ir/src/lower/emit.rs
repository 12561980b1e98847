//! The one IR builder (not a pass). [`Build`] is how every pass writes
//! instructions, blocks, `if`s, loops and locals into a function: its
//! provided methods are the only definitions of those, and a builder only
//! says where instructions go (its function, its open block, the source
//! span they carry). Two builders hold that state:
//!
//! - [`Emit`]: a function under construction with its open blocks, for
//!   the passes that write whole kernels (`passes::optimize`'s system
//!   kernels, `passes::views`' view kernels); `range`, `range_incl` open a
//!   block for their body, `kernel` ends the build;
//! - `lower::sparse::Emitter`: an existing function and one block being
//!   written, for the rewrites inside a kernel (`lower_access`,
//!   `legalize`, `half`, the sparse passes).
//! - `FnLowerer`: the kernel language's front end, a function lowered from
//!   kernel code with a stack of open blocks; its instructions carry the
//!   span of the syntax they come from (`emit_at`).
//!
//! A rewrite that writes into blocks it is handed rather than an open
//! one uses `append` (`Build::emit_in` is the same for a builder); one
//! that assembles a block itself, reserves a handle before the body it
//! names exists (a loop's `Break` placeholder) or copies instructions
//! between functions uses `Function::detached` / `Function::adopt`. No
//! other code grows a function's instruction arena.
//!
//! Every instruction goes to the innermost open block.

use crate::arena::Arena;
use crate::ir::*;
use crate::types::{Scalar, Type};

/// Where a builder writes: the function, its open block and the span new
/// instructions carry; every other method is provided, once.
pub trait Build {
    /// The function being written.
    fn func(&mut self) -> &mut Function;
    /// The function being written, to read.
    fn func_ref(&self) -> &Function;
    /// Appends `h` to the open block.
    fn push(&mut self, h: InstId);
    /// The source span of new instructions.
    fn span(&self) -> Span;
    /// Makes `b` the open block and returns the one that was open.
    fn swap_block(&mut self, b: Block) -> Block;

    /// Appends an instruction to the open block.
    fn emit(&mut self, kind: InstKind, ty: Type) -> InstId {
        let span = self.span();
        self.emit_at(kind, ty, span)
    }
    /// Appends an instruction carrying its own source span to the open
    /// block (the front end: each instruction comes from a syntax node).
    fn emit_at(&mut self, kind: InstKind, ty: Type, span: Span) -> InstId {
        let h = self.func().detached(kind, ty, span);
        self.push(h);
        h
    }
    /// Appends an instruction to block `b` instead of the open one (for a
    /// rewrite that fills several blocks side by side).
    fn emit_in(&mut self, b: &mut Block, kind: InstKind, ty: Type) -> InstId {
        let span = self.span();
        append(self.func(), b, kind, ty, span)
    }
    /// A constant appended to block `b`.
    fn konst_in(&mut self, b: &mut Block, c: Const) -> InstId {
        self.emit_in(b, InstKind::Const(c), Type::Scalar(c.scalar))
    }
    /// The type of value `h`.
    fn ty(&self, h: InstId) -> Type {
        self.func_ref().insts[h].ty
    }
    fn konst(&mut self, c: Const) -> InstId {
        self.emit(InstKind::Const(c), Type::Scalar(c.scalar))
    }
    /// A binary operation with result type `ty`.
    fn bin_ty(&mut self, op: BinaryOp, a: InstId, b: InstId, ty: Type) -> InstId {
        self.emit(InstKind::Binary(op, a, b), ty)
    }
    /// `cond ? accept : reject`, of `accept`'s type.
    fn select(&mut self, cond: InstId, accept: InstId, reject: InstId) -> InstId {
        let ty = self.ty(accept);
        self.emit(
            InstKind::Select {
                cond,
                accept,
                reject,
            },
            ty,
        )
    }
    /// A new local of the function (not stored to).
    fn new_local(&mut self, name: &str, ty: Type) -> LocalId {
        self.func().locals.append(Local {
            name: name.to_string(),
            ty,
        })
    }
    fn get(&mut self, l: LocalId) -> InstId {
        let ty = self.func_ref().locals[l].ty;
        self.emit(InstKind::LocalLoad(l), ty)
    }
    fn set(&mut self, l: LocalId, v: InstId) {
        self.emit(InstKind::LocalStore(l, v), Type::Void);
    }
    /// Emits into a fresh block and returns it.
    fn block(&mut self, g: impl FnOnce(&mut Self)) -> Block
    where
        Self: Sized,
    {
        let saved = self.swap_block(Vec::new());
        g(self);
        self.swap_block(saved)
    }
    /// `if cond { accept }`.
    fn if_(&mut self, cond: InstId, accept: impl FnOnce(&mut Self))
    where
        Self: Sized,
    {
        let accept = self.block(accept);
        self.emit(
            InstKind::If {
                cond,
                accept,
                reject: vec![],
            },
            Type::Void,
        );
    }
    /// `loop { body }` (left by a `Break`).
    fn loop_(&mut self, body: impl FnOnce(&mut Self))
    where
        Self: Sized,
    {
        let body = self.block(body);
        self.emit(InstKind::Loop { body }, Type::Void);
    }
    fn brk(&mut self) {
        self.emit(InstKind::Break, Type::Void);
    }
}

impl Build for Emit {
    fn func(&mut self) -> &mut Function {
        &mut self.f
    }
    fn func_ref(&self) -> &Function {
        &self.f
    }
    fn push(&mut self, h: InstId) {
        self.blocks.last_mut().expect("a block is open").push(h);
    }
    fn span(&self) -> Span {
        Span::default()
    }
    fn swap_block(&mut self, b: Block) -> Block {
        std::mem::replace(self.blocks.last_mut().expect("a block is open"), b)
    }
}

/// Appends an instruction to block `b` of `f`: what `Build::emit_in`
/// does, for a rewrite that keeps no open block of its own (the exits
/// rewrite of `passes::autodiff::exits` writes into the blocks it is
/// handed, each instruction with the span of the one it replaces).
pub fn append(f: &mut Function, b: &mut Block, kind: InstKind, ty: Type, span: Span) -> InstId {
    let h = f.detached(kind, ty, span);
    b.push(h);
    h
}

/// Creating an instruction that is in no block yet: the one place besides
/// [`Build`] (which calls it) where the instruction arena grows, so that
/// a rewrite that assembles a block by hand, reserves a handle before its
/// body exists, or moves instructions between functions does not keep a
/// copy of the emitter (`tests/architecture.rs` holds passes to it).
impl Function {
    /// A new instruction placed in no block: the caller puts its handle in
    /// a block it assembles (an `if`'s arm, a loop body) or in place of
    /// another.
    pub fn detached(&mut self, kind: InstKind, ty: Type, span: Span) -> InstId {
        self.insts.append(Inst { kind, ty, span })
    }
    /// An instruction taken whole from elsewhere (a copy from another
    /// function, operands already renumbered), placed in no block.
    pub fn adopt(&mut self, inst: Inst) -> InstId {
        self.insts.append(inst)
    }
}

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
    /// A new local holding `init`.
    pub fn local(&mut self, name: &str, ty: Type, init: InstId) -> LocalId {
        let l = self.new_local(name, ty);
        self.set(l, init);
        l
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
