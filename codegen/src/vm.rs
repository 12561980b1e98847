//! IR → flat register-machine code for the reference VM (`weft_runtime::vm`).
//!
//! Pre: a kernel that passed the legalized-IR validator. Post: one `VmFunction`
//! per IR function. Every SSA value gets a fixed slot range (one 64-bit
//! register per component, 32-bit scalars in the low half) in a
//! per-invocation register file; locals get slots too.
//! Structured control flow becomes jumps with patched targets. Loop counters
//! alias their loop's counter slot (a counter value cannot escape its body).

use crate::CodegenError;
use std::collections::HashMap;
use weft_ir::ir::target::TargetCaps;
use weft_ir::ir::*;
use weft_ir::types::{Scalar, Type};

pub type Slot = u32;

/// What the reference VM executes natively: the baseline (every other
/// atomic arrives as `legalize`'s compare-exchange loop).
pub const CAPS: TargetCaps = TargetCaps::BASELINE;

#[derive(Clone, Debug)]
pub enum Op {
    Const {
        dst: Slot,
        bits: u64,
    },
    /// A 64-bit register from two word registers (low first): the bitcast
    /// of a `vec2<u32>` to a 64-bit scalar.
    Pack {
        dst: Slot,
        src: Slot,
    },
    /// Two word registers (low first) from a 64-bit register.
    Unpack {
        dst: Slot,
        src: Slot,
    },
    Copy {
        dst: Slot,
        src: Slot,
        n: u32,
    },
    Unary {
        op: UnaryOp,
        s: Scalar,
        dst: Slot,
        a: Slot,
        n: u32,
    },
    Binary {
        op: BinaryOp,
        s: Scalar,
        dst: Slot,
        a: Slot,
        b: Slot,
        n: u32,
    },
    /// Fast paths for the most common scalar arithmetic.
    AddF {
        dst: Slot,
        a: Slot,
        b: Slot,
    },
    SubF {
        dst: Slot,
        a: Slot,
        b: Slot,
    },
    MulF {
        dst: Slot,
        a: Slot,
        b: Slot,
    },
    AddU {
        dst: Slot,
        a: Slot,
        b: Slot,
    },
    MulU {
        dst: Slot,
        a: Slot,
        b: Slot,
    },
    /// `cond_n` is 1 (scalar condition) or `n` (component-wise).
    Select {
        dst: Slot,
        cond: Slot,
        cond_n: u32,
        a: Slot,
        b: Slot,
        n: u32,
    },
    Cast {
        from: Scalar,
        to: Scalar,
        dst: Slot,
        a: Slot,
        n: u32,
    },
    /// Copies element `index` (clamped to `len - 1`) of `elem` words each.
    ExtractDyn {
        dst: Slot,
        src: Slot,
        index: Slot,
        elem: u32,
        len: u32,
    },
    InsertDyn {
        dst: Slot,
        index: Slot,
        value: Slot,
        elem: u32,
        len: u32,
    },
    /// Component-wise built-in over `n` components.
    BuiltinWise {
        b: Builtin,
        s: Scalar,
        dst: Slot,
        args: [Slot; 3],
        nargs: u32,
        n: u32,
    },
    /// Built-ins that are not component-wise; `ty` is the first argument's type.
    BuiltinSpecial {
        b: Builtin,
        ty: Type,
        dst: Slot,
        args: [Slot; 2],
    },
    MatMul {
        dst: Slot,
        a: Slot,
        b: Slot,
        a_ty: Type,
        b_ty: Type,
    },
    Param {
        dst: Slot,
        index: u32,
    },
    Frame {
        dst: Slot,
    },
    Launch {
        dst: Slot,
        value: LaunchValue,
    },
    /// The invocation's random state, read and written.
    RngLoad {
        dst: Slot,
    },
    RngStore {
        src: Slot,
    },
    /// The invocation's count of loop trips, read and written.
    TripsLoad {
        dst: Slot,
    },
    TripsStore {
        src: Slot,
    },
    /// Word accesses carry their code position: an address outside the
    /// buffer (a program compiled without bounds checks) is a fault there.
    BufLoad {
        dst: Slot,
        root: u32,
        addr: Slot,
        span: Span,
    },
    BufStore {
        root: u32,
        addr: Slot,
        src: Slot,
        span: Span,
    },
    BufAtomic {
        op: AtomicOp,
        s: Scalar,
        dst: Slot,
        root: u32,
        addr: Slot,
        value: Slot,
        cmp: Slot,
        span: Span,
    },
    /// Fails the invocation at `VmKernel::fault_sites[site]`, reporting the word in `value`.
    Trap {
        site: u32,
        value: Slot,
    },
    Jump {
        target: u32,
    },
    JumpIfFalse {
        cond: Slot,
        target: u32,
    },
    Call {
        func: u32,
        args: Vec<(Slot, u32)>,
        dst: Slot,
        ret_n: u32,
    },
    Return {
        src: Slot,
        n: u32,
    },
}

#[derive(Clone, Debug)]
pub struct VmFunction {
    pub name: String,
    pub ops: Vec<Op>,
    /// Register-file size in words.
    pub regs: u32,
    /// Slots of the arguments, in order (each `components` words).
    pub arg_slots: Vec<(Slot, u32)>,
}

#[derive(Clone, Debug)]
pub struct VmKernel {
    pub name: String,
    /// `Kernel::fused`: the nodes errors name by `Span::part`.
    pub fused: Vec<String>,
    pub entry: VmFunction,
    pub functions: Vec<VmFunction>,
    /// Root layout index (in `Program::layouts`) of each buffer slot `root` in ops.
    pub roots: Vec<LayoutId>,
    /// What each `Op::Trap` reports (the kernel's legalized fault sites).
    pub fault_sites: Vec<FaultSite>,
}

/// Flattens every function of the kernel; a panic inside becomes an internal error naming the node.
pub fn compile_kernel(program: &Program, kernel: &Kernel) -> Result<VmKernel, CodegenError> {
    crate::guard(&kernel.name, "vm", || build_kernel(program, kernel))
}

fn build_kernel(program: &Program, kernel: &Kernel) -> Result<VmKernel, CodegenError> {
    let mut roots: Vec<LayoutId> = Vec::new();
    let functions = kernel
        .functions
        .iter()
        .map(|(_, f)| compile_function(program, kernel, f, &mut roots))
        .collect::<Result<Vec<_>, _>>()?;
    let entry = compile_function(program, kernel, &kernel.entry, &mut roots)?;
    Ok(VmKernel {
        name: kernel.name.clone(),
        fused: kernel.fused.clone(),
        entry,
        functions,
        roots,
        fault_sites: kernel.fault_sites.clone(),
    })
}

struct Ctx<'a> {
    kernel: &'a Kernel,
    f: &'a Function,
    slots: HashMap<InstId, Slot>,
    locals: Vec<Slot>,
    regs: u32,
    ops: Vec<Op>,
    /// Per enclosing loop: (continue target or None until known, pending break jumps, pending continue jumps).
    loops: Vec<(Vec<usize>, Vec<usize>)>,
    roots: &'a mut Vec<LayoutId>,
    arg_slots: Vec<(Slot, u32)>,
    /// First slot of each shared array (entry only): the invocation is
    /// its whole block (`passes::block_loops`), so its registers are the
    /// block's memory.
    shared: Vec<Slot>,
}

fn compile_function(
    program: &Program,
    kernel: &Kernel,
    f: &Function,
    roots: &mut Vec<LayoutId>,
) -> Result<VmFunction, CodegenError> {
    let _ = program;
    let mut c = Ctx {
        kernel,
        f,
        slots: HashMap::new(),
        locals: vec![],
        regs: 0,
        ops: vec![],
        loops: vec![],
        roots,
        arg_slots: vec![],
        shared: vec![],
    };
    if let Some(w) = kernel
        .workgroup
        .as_ref()
        .filter(|_| std::ptr::eq(f, &kernel.entry))
    {
        if w.size != 1 {
            return Err(CodegenError {
                kernel: kernel.name.clone(),
                backend: "vm",
                message: "a workgroup kernel reached the VM with blocks of more than one invocation (passes::block_loops did not run)".into(),
            });
        }
        for a in &w.arrays {
            let s = c.alloc(a.words());
            c.shared.push(s);
        }
    }
    for t in &f.args {
        let s = c.alloc(t.components() as u32);
        c.arg_slots.push((s, t.components() as u32));
    }
    for (_, l) in f.locals.iter() {
        let s = c.alloc(l.ty.components() as u32);
        c.locals.push(s);
    }
    c.block(&f.body)?;
    // Falling off the end returns nothing.
    c.ops.push(Op::Return { src: 0, n: 0 });
    Ok(VmFunction {
        name: f.name.clone(),
        ops: c.ops,
        regs: c.regs.max(1),
        arg_slots: c.arg_slots,
    })
}

impl Ctx<'_> {
    fn alloc(&mut self, n: u32) -> Slot {
        let s = self.regs;
        self.regs += n.max(1);
        s
    }
    fn err(&self, h: InstId, m: &str) -> CodegenError {
        let span = self.f.insts[h].span;
        CodegenError {
            kernel: self.kernel.node(span).to_string(),
            backend: "vm",
            message: format!("{} (at code {})", m, span),
        }
    }
    fn slot(&self, h: InstId) -> Slot {
        self.slots[&h]
    }
    /// The first slot and length of shared array `a`.
    fn shared_array(&self, h: InstId, a: SharedId) -> Result<(Slot, u32), CodegenError> {
        let arr = self
            .kernel
            .workgroup
            .as_ref()
            .and_then(|w| w.arrays.get(a as usize));
        match (self.shared.get(a as usize), arr) {
            (Some(&s), Some(arr)) => Ok((s, arr.len)),
            _ => Err(self.err(h, "a shared array outside the kernel's entry")),
        }
    }
    fn root(&mut self, l: LayoutId) -> u32 {
        match self.roots.iter().position(|&r| r == l) {
            Some(i) => i as u32,
            None => {
                self.roots.push(l);
                (self.roots.len() - 1) as u32
            }
        }
    }

    fn block(&mut self, b: &Block) -> Result<(), CodegenError> {
        for &h in b {
            self.inst(h)?;
        }
        Ok(())
    }

    fn inst(&mut self, h: InstId) -> Result<(), CodegenError> {
        let inst = &self.f.insts[h];
        let ty = inst.ty;
        let n = ty.components() as u32;
        let dst = if ty != Type::Void { self.alloc(n) } else { 0 };
        if ty != Type::Void {
            self.slots.insert(h, dst);
        }
        let ts = |c: &Self, x: InstId| c.f.insts[x].ty;
        match &inst.kind {
            InstKind::Const(k) => self.ops.push(Op::Const { dst, bits: k.bits }),
            InstKind::Arg(i) => {
                let (s, n) = self.arg_slots[*i as usize];
                self.ops.push(Op::Copy { dst, src: s, n });
            }
            InstKind::Param(i) => self.ops.push(Op::Param { dst, index: *i }),
            InstKind::Frame => self.ops.push(Op::Frame { dst }),
            InstKind::Launch(value) => self.ops.push(Op::Launch { dst, value: *value }),
            InstKind::RngLoad => self.ops.push(Op::RngLoad { dst }),
            InstKind::RngStore(v) => self.ops.push(Op::RngStore { src: self.slot(*v) }),
            InstKind::TripsLoad => self.ops.push(Op::TripsLoad { dst }),
            InstKind::TripsStore(v) => self.ops.push(Op::TripsStore { src: self.slot(*v) }),
            // The VM runs one invocation at a time: its group is itself.
            InstKind::LaneMax(v) => self.ops.push(Op::Copy {
                dst,
                src: self.slot(*v),
                n: 1,
            }),
            InstKind::Random => {
                return Err(self.err(h, "random() reached codegen; legalize did not run"))
            }
            InstKind::Unary(op, a) => {
                let s = ty.scalar().expect("typed");
                self.ops.push(Op::Unary {
                    op: *op,
                    s,
                    dst,
                    a: self.slot(*a),
                    n,
                });
            }
            InstKind::Binary(BinaryOp::MatMul, a, b) => {
                self.ops.push(Op::MatMul {
                    dst,
                    a: self.slot(*a),
                    b: self.slot(*b),
                    a_ty: ts(self, *a),
                    b_ty: ts(self, *b),
                });
            }
            InstKind::Binary(op, a, b) => {
                let at = ts(self, *a);
                let s = at.scalar().expect("typed");
                let (sa, sb) = (self.slot(*a), self.slot(*b));
                let fast = match (op, s, at.components()) {
                    (BinaryOp::Add, Scalar::F32, 1) => Some(Op::AddF { dst, a: sa, b: sb }),
                    (BinaryOp::Sub, Scalar::F32, 1) => Some(Op::SubF { dst, a: sa, b: sb }),
                    (BinaryOp::Mul, Scalar::F32, 1) => Some(Op::MulF { dst, a: sa, b: sb }),
                    (BinaryOp::Add, Scalar::U32 | Scalar::I32, 1) => {
                        Some(Op::AddU { dst, a: sa, b: sb })
                    }
                    (BinaryOp::Mul, Scalar::U32 | Scalar::I32, 1) => {
                        Some(Op::MulU { dst, a: sa, b: sb })
                    }
                    _ => None,
                };
                self.ops.push(fast.unwrap_or(Op::Binary {
                    op: *op,
                    s,
                    dst,
                    a: sa,
                    b: sb,
                    n: at.components() as u32,
                }));
            }
            InstKind::Select {
                cond,
                accept,
                reject,
            } => {
                let cond_n = ts(self, *cond).components() as u32;
                self.ops.push(Op::Select {
                    dst,
                    cond: self.slot(*cond),
                    cond_n,
                    a: self.slot(*accept),
                    b: self.slot(*reject),
                    n,
                });
            }
            InstKind::Cast(a) => {
                let from = ts(self, *a).scalar().expect("typed");
                self.ops.push(Op::Cast {
                    from,
                    to: ty.scalar().expect("typed"),
                    dst,
                    a: self.slot(*a),
                    n,
                });
            }
            InstKind::Bitcast(a) => {
                let src = self.slot(*a);
                let from = ts(self, *a);
                self.ops.push(match (from.components(), n) {
                    (2, 1) => Op::Pack { dst, src },
                    (1, 2) => Op::Unpack { dst, src },
                    _ => Op::Copy { dst, src, n },
                });
            }
            InstKind::Construct(parts) => {
                let mut at = dst;
                for &p in parts {
                    let pn = ts(self, p).components() as u32;
                    self.ops.push(Op::Copy {
                        dst: at,
                        src: self.slot(p),
                        n: pn,
                    });
                    at += pn;
                }
            }
            InstKind::Extract(a, i) => {
                let src = self.slot(*a) + i * n;
                self.ops.push(Op::Copy { dst, src, n });
            }
            InstKind::ExtractDyn(a, i) => {
                let len = match ts(self, *a) {
                    Type::Vector(_, l) | Type::Matrix(l) => l as u32,
                    _ => return Err(self.err(h, "indexing a non-composite")),
                };
                self.ops.push(Op::ExtractDyn {
                    dst,
                    src: self.slot(*a),
                    index: self.slot(*i),
                    elem: n,
                    len,
                });
            }
            InstKind::Insert { base, index, value } => {
                let vn = ts(self, *value).components() as u32;
                self.ops.push(Op::Copy {
                    dst,
                    src: self.slot(*base),
                    n,
                });
                self.ops.push(Op::Copy {
                    dst: dst + index * vn,
                    src: self.slot(*value),
                    n: vn,
                });
            }
            InstKind::InsertDyn { base, index, value } => {
                let vn = ts(self, *value).components() as u32;
                self.ops.push(Op::Copy {
                    dst,
                    src: self.slot(*base),
                    n,
                });
                self.ops.push(Op::InsertDyn {
                    dst,
                    index: self.slot(*index),
                    value: self.slot(*value),
                    elem: vn,
                    len: n / vn,
                });
            }
            InstKind::Swizzle(a, comps) => {
                let src = self.slot(*a);
                for (k, &c) in comps.iter().enumerate() {
                    self.ops.push(Op::Copy {
                        dst: dst + k as u32,
                        src: src + c as u32,
                        n: 1,
                    });
                }
            }
            InstKind::Builtin(Builtin::Determinant | Builtin::Inverse, _) => {
                return Err(self.err(h, "a matrix built-in reached codegen; legalize did not run"))
            }
            InstKind::Builtin(b, args) => {
                let at = ts(self, args[0]);
                match b.shape() {
                    builtins::Shape::FloatWise(_) | builtins::Shape::NumericWise(_)
                        if !matches!(b, Builtin::Normalize | Builtin::Reflect) =>
                    {
                        let mut a = [0; 3];
                        for (k, &x) in args.iter().enumerate() {
                            a[k] = self.slot(x);
                        }
                        self.ops.push(Op::BuiltinWise {
                            b: *b,
                            s: at.scalar().expect("typed"),
                            dst,
                            args: a,
                            nargs: args.len() as u32,
                            n,
                        });
                    }
                    _ => {
                        let a0 = self.slot(args[0]);
                        let a1 = args.get(1).map(|&x| self.slot(x)).unwrap_or(0);
                        self.ops.push(Op::BuiltinSpecial {
                            b: *b,
                            ty: at,
                            dst,
                            args: [a0, a1],
                        });
                    }
                }
            }
            InstKind::Call(fid, args) => {
                let a: Vec<(Slot, u32)> = args
                    .iter()
                    .map(|&x| (self.slot(x), ts(self, x).components() as u32))
                    .collect();
                self.ops.push(Op::Call {
                    func: fid.index() as u32,
                    args: a,
                    dst,
                    ret_n: n,
                });
            }
            InstKind::SharedLoad { array, index } => {
                let (src, len) = self.shared_array(h, *array)?;
                self.ops.push(Op::ExtractDyn {
                    dst,
                    src,
                    index: self.slot(*index),
                    elem: n,
                    len,
                });
            }
            InstKind::SharedStore {
                array,
                index,
                value,
            } => {
                let (base, len) = self.shared_array(h, *array)?;
                self.ops.push(Op::InsertDyn {
                    dst: base,
                    index: self.slot(*index),
                    value: self.slot(*value),
                    elem: ts(self, *value).components() as u32,
                    len,
                });
            }
            InstKind::Barrier => {
                return Err(self.err(
                    h,
                    "a barrier reached the VM (passes::block_loops did not run)",
                ))
            }
            InstKind::LocalLoad(l) => self.ops.push(Op::Copy {
                dst,
                src: self.locals[l.index()],
                n,
            }),
            InstKind::LocalStore(l, v) => {
                let vn = ts(self, *v).components() as u32;
                self.ops.push(Op::Copy {
                    dst: self.locals[l.index()],
                    src: self.slot(*v),
                    n: vn,
                });
            }
            InstKind::Trap { site, value } => self.ops.push(Op::Trap {
                site: *site,
                value: self.slot(*value),
            }),
            InstKind::BoundsCheck { .. } | InstKind::IndexCheck { .. } => {
                return Err(self.err(h, "a bounds check reached codegen; legalize did not run"))
            }
            InstKind::BufLoad { root, addr } => {
                let r = self.root(*root);
                self.ops.push(Op::BufLoad {
                    dst,
                    root: r,
                    addr: self.slot(*addr),
                    span: inst.span,
                });
            }
            InstKind::BufStore { root, addr, value } => {
                let r = self.root(*root);
                self.ops.push(Op::BufStore {
                    root: r,
                    addr: self.slot(*addr),
                    src: self.slot(*value),
                    span: inst.span,
                });
            }
            InstKind::BufAtomic {
                op,
                root,
                addr,
                value,
                cmp,
            } => {
                let s = ty.scalar().expect("typed");
                if !CAPS.has_atomic(*op, s) {
                    return Err(self.err(
                        h,
                        &format!(
                            "atomic {} on {} reached the VM; legalize expands it",
                            op.name(),
                            ty
                        ),
                    ));
                }
                let r = self.root(*root);
                let cmp = cmp.map(|c| self.slot(c)).unwrap_or(0);
                self.ops.push(Op::BufAtomic {
                    op: *op,
                    s,
                    dst,
                    root: r,
                    addr: self.slot(*addr),
                    value: self.slot(*value),
                    cmp,
                    span: inst.span,
                });
            }
            InstKind::FieldLoad { .. }
            | InstKind::FieldStore { .. }
            | InstKind::FieldAtomic { .. }
            | InstKind::FieldIsActive { .. }
            | InstKind::FieldActivate { .. }
            | InstKind::FieldDeactivate { .. }
            | InstKind::FieldAppend { .. }
            | InstKind::FieldLength { .. } => {
                return Err(self.err(
                    h,
                    "abstract field access reached codegen; access lowering did not run",
                ))
            }
            InstKind::RangeFor { .. } | InstKind::LoopCounter(_) => {
                return Err(self.err(h, "a range loop reached codegen; legalize did not run"))
            }
            InstKind::If {
                cond,
                accept,
                reject,
            } => {
                let jf = self.ops.len();
                self.ops.push(Op::JumpIfFalse {
                    cond: self.slot(*cond),
                    target: 0,
                });
                self.block(accept)?;
                if reject.is_empty() {
                    let end = self.ops.len() as u32;
                    self.patch(jf, end);
                } else {
                    let j = self.ops.len();
                    self.ops.push(Op::Jump { target: 0 });
                    let else_start = self.ops.len() as u32;
                    self.patch(jf, else_start);
                    self.block(reject)?;
                    let end = self.ops.len() as u32;
                    self.patch(j, end);
                }
            }
            InstKind::Loop { body } => {
                let head = self.ops.len() as u32;
                self.loops.push((vec![], vec![]));
                self.block(body)?;
                let (breaks, conts) = self.loops.pop().expect("loop");
                self.ops.push(Op::Jump { target: head });
                let exit = self.ops.len() as u32;
                for c in conts {
                    self.patch(c, head);
                }
                for b in breaks {
                    self.patch(b, exit);
                }
            }
            InstKind::Break | InstKind::Continue => {
                let at = self.ops.len();
                self.ops.push(Op::Jump { target: 0 });
                let Some(top) = self.loops.last_mut() else {
                    return Err(self.err(h, "break/continue outside a loop"));
                };
                if matches!(inst.kind, InstKind::Break) {
                    top.0.push(at);
                } else {
                    top.1.push(at);
                }
            }
            InstKind::Return(v) => match v {
                Some(v) => self.ops.push(Op::Return {
                    src: self.slot(*v),
                    n: ts(self, *v).components() as u32,
                }),
                None => self.ops.push(Op::Return { src: 0, n: 0 }),
            },
        }
        Ok(())
    }

    fn patch(&mut self, at: usize, target: u32) {
        match &mut self.ops[at] {
            Op::Jump { target: t } | Op::JumpIfFalse { target: t, .. } => *t = target,
            _ => unreachable!("only jumps are patched"),
        }
    }
}
