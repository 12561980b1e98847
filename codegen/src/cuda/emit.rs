//! The C text of one kernel: the environment struct, one `__device__`
//! function per IR function, and the `__global__` entry.
//!
//! Every IR function becomes `int f(WeftEnv* e, int depth, T* ret, args…)`
//! returning 0, or 1 after a fault was recorded (callers pass it on, so a
//! fault stops the invocation as on the interpreter). Structured control
//! flow maps one to one: `If` → `if`, `Loop` → `for (;;)`, `Break` /
//! `Continue` → `break` / `continue` (the generator never emits a `switch`,
//! so these always address the IR loop). Code after a `break`, `continue`
//! or `return` in the same IR block is unreachable and is not emitted.

use super::ops::{atomic, binary, builtin, cast, matmul, unary};
use super::{cerr, CudaKernel, ENTRY, PRELUDE};
use crate::launch::word;
use crate::CodegenError;
use std::collections::HashSet;
use std::fmt::Write;
use weft_ir::ir::*;
use weft_ir::types::{Scalar, Type};

/// The C type of one component of `t` (bools are 0/1 words).
fn cty(t: Type) -> &'static str {
    match t.scalar() {
        Some(Scalar::F32) => "float",
        Some(Scalar::I32) => "int",
        Some(Scalar::F64) => "double",
        Some(Scalar::I64) => "long long",
        Some(Scalar::U64) => "u64",
        _ => "unsigned",
    }
}

pub(super) fn sty(s: Scalar) -> &'static str {
    cty(Type::Scalar(s))
}

/// A C expression of the 32-bit word `bits` read as scalar `s`.
pub(super) fn from_word(s: Scalar, bits: &str) -> String {
    match s {
        Scalar::F32 => format!("__uint_as_float({})", bits),
        Scalar::I32 => format!("(int)({})", bits),
        _ => bits.to_string(),
    }
}

/// A C expression of the word holding `x`, a component of scalar type `s`.
pub(super) fn to_word(s: Scalar, x: &str) -> String {
    match s {
        Scalar::F32 => format!("__float_as_uint({})", x),
        _ => format!("(unsigned)({})", x),
    }
}

/// A 64-bit scalar's bits as a `u64` C expression.
pub(super) fn to_u64(s: Scalar, x: &str) -> String {
    match s {
        Scalar::F64 => format!("(u64)__double_as_longlong({})", x),
        _ => format!("(u64)({})", x),
    }
}

/// A `u64` C expression read as the 64-bit scalar `s`.
pub(super) fn from_u64(s: Scalar, bits: &str) -> String {
    match s {
        Scalar::F64 => format!("__longlong_as_double((long long)({}))", bits),
        Scalar::I64 => format!("(long long)({})", bits),
        _ => bits.to_string(),
    }
}

/// A C literal with exactly the constant's bits.
fn literal(c: Const) -> String {
    match c.scalar {
        Scalar::F64 => {
            let v = f64::from_bits(c.bits);
            if v.is_finite() {
                let s = format!("{:?}", v);
                if s.contains(['.', 'e']) {
                    s
                } else {
                    format!("{}.0", s)
                }
            } else {
                format!("__longlong_as_double(0x{:016x}ll)", c.bits)
            }
        }
        Scalar::I64 => {
            let v = c.bits as i64;
            if v == i64::MIN {
                "(long long)0x8000000000000000ull".into()
            } else {
                format!("{}ll", v)
            }
        }
        Scalar::U64 => format!("{}ull", c.bits),
        // f16 never gets here (`passes::half`; the validator checks).
        Scalar::F32 | Scalar::F16 => {
            let v = f32::from_bits(c.bits as u32);
            if v.is_finite() {
                // Rust prints the shortest decimal that reads back as the same f32.
                let s = format!("{:?}", v);
                if s.contains(['.', 'e']) {
                    format!("{}f", s)
                } else {
                    format!("{}.0f", s)
                }
            } else {
                format!("__uint_as_float(0x{:08x}u)", c.bits)
            }
        }
        Scalar::I32 => {
            let v = c.bits as u32 as i32;
            if v == i32::MIN {
                "(int)0x80000000u".into()
            } else {
                v.to_string()
            }
        }
        Scalar::U32 => format!("{}u", c.bits),
        Scalar::Bool => format!("{}u", (c.bits != 0) as u32),
    }
}

/// Keeps a node id from closing the comment it is quoted in.
fn comment_safe(s: &str) -> String {
    s.replace("*/", "* /").replace(['\n', '\r'], " ")
}

pub(super) fn kernel(program: &Program, kernel: &Kernel) -> Result<CudaKernel, CodegenError> {
    let roots = used_roots(kernel);
    // A `Trap` names its site in the kernel's list; the address and
    // call-depth sites this generator adds follow.
    let mut sites = kernel.fault_sites.clone();
    let nparams = kernel.params.len();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "// Weft kernel '{}' (generated CUDA C; see weft-codegen's cuda module).",
        comment_safe(&kernel.name)
    );
    out.push_str(PRELUDE);
    out.push_str("\nstruct WeftEnv {\n    unsigned* err;\n    unsigned tag;\n");
    for (k, r) in roots.iter().enumerate() {
        let _ = writeln!(
            out,
            "    unsigned* b{k}; u64 n{k}; // root '{}'",
            comment_safe(&program.layouts[*r].node_id)
        );
    }
    let _ = writeln!(
        out,
        "    unsigned p[{}];\n    int frame;\n    unsigned seed, launch, linear, rng, trips;\n}};\n",
        nparams.max(1)
    );
    out.push_str(
        "// Records the first fault of the launch (site + 1, then the value) and stops the invocation.\n\
         // Out of line (faults are rare) and given values, not the WeftEnv: an env whose\n\
         // address escapes lives in local memory, a store of every field per thread.\n\
         __device__ __noinline__ int weft_fault(unsigned* err, unsigned tag, unsigned site, long long value) {\n    \
         if (atomicCAS(&err[0], 0u, site + 1u) == 0u) {\n        \
         err[1] = (unsigned)(u64)value;\n        \
         err[2] = (unsigned)((u64)value >> 32);\n        \
         err[3] = tag;\n    \
         }\n    return 1;\n}\n\n",
    );

    // Prototypes first, so helpers may appear in any order.
    for (fid, f) in kernel.functions.iter() {
        let _ = writeln!(out, "{};", signature(fid.index(), f));
    }
    if !kernel.functions.is_empty() {
        out.push('\n');
    }
    for (fid, f) in kernel.functions.iter() {
        let mut g = Gen::new(kernel, f, &roots, &mut sites, false);
        g.function()?;
        let body = g.out;
        let _ = writeln!(out, "{} {{\n{}}}\n", signature(fid.index(), f), body);
    }
    let mut g = Gen::new(kernel, &kernel.entry, &roots, &mut sites, true);
    g.function()?;
    let body = g.out;
    let args: Vec<String> = (0..kernel.dims)
        .map(|d| format!(", int a{}_0", d))
        .collect();
    let _ = writeln!(
        out,
        "__device__ int weft_body(WeftEnv* e, int depth{}) {{\n{}}}\n",
        args.concat(),
        body
    );
    entry(&mut out, program, kernel, &roots);
    Ok(CudaKernel {
        name: kernel.name.clone(),
        fused: kernel.fused.clone(),
        source: out,
        roots,
        traps: sites.iter().any(|s| s.kind != FaultKind::Address),
        sites,
        params: nparams,
        block: kernel
            .workgroup
            .as_ref()
            .map_or(super::BLOCK_SIZE, |w| w.size),
    })
}

/// Roots the kernel reads or writes, in first-use order.
fn used_roots(kernel: &Kernel) -> Vec<LayoutId> {
    let mut roots = Vec::new();
    for f in std::iter::once(&kernel.entry).chain(kernel.functions.iter().map(|(_, f)| f)) {
        for (_, inst) in f.insts.iter() {
            if let InstKind::BufLoad { root, .. }
            | InstKind::BufStore { root, .. }
            | InstKind::BufAtomic { root, .. } = &inst.kind
            {
                if !roots.contains(root) {
                    roots.push(*root);
                }
            }
        }
    }
    roots
}

fn signature(index: usize, f: &Function) -> String {
    let mut s = format!(
        "__device__ int weft_fn{}(WeftEnv* e, int depth, {}* ret",
        index,
        cty(f.ret)
    );
    for (a, t) in f.args.iter().enumerate() {
        for k in 0..t.components() {
            let _ = write!(s, ", {} a{}_{}", cty(*t), a, k);
        }
    }
    s.push(')');
    s
}

/// The `__global__` function: record words, fault words and buffers in,
/// loop indices and the random state out to `weft_body`.
fn entry(out: &mut String, program: &Program, kernel: &Kernel, roots: &[LayoutId]) {
    let mut args: Vec<String> = [
        "frame", "launch", "seed", "total", "shape0", "shape1", "shape2", "per_row",
    ]
    .iter()
    .map(|n| format!("unsigned r_{}", n))
    .collect();
    debug_assert_eq!(args.len(), word::HEADER as usize);
    args.extend((0..kernel.params.len()).map(|i| format!("unsigned p{}", i)));
    args.push("unsigned* err".into());
    args.push("unsigned tag".into());
    args.push("unsigned check_err".into());
    for k in 0..roots.len() {
        args.push(format!("unsigned* b{k}"));
        args.push(format!("u64 n{k}"));
    }
    let _ = writeln!(
        out,
        "extern \"C\" __global__ void {}({}) {{",
        ENTRY,
        args.join(", ")
    );
    out.push_str(
        "    (void)r_per_row;\n    \
         u64 lin = (u64)blockIdx.x * (u64)blockDim.x + (u64)threadIdx.x;\n    \
         if (lin >= (u64)r_total) return;\n    \
         // An earlier launch faulted: do nothing, as the interpreter would. Read only\n    \
         // when an earlier launch could fault (the runtime knows): every thread waits\n    \
         // for this load before its own work. Through the read-only cache: during this\n    \
         // launch only its own faults change the word, which this test may miss, so\n    \
         // after one warp per SM the load hits L1 (a volatile load went to L2 for\n    \
         // every warp: a 512 MiB copy on an H200 took 0.79 ms, 2.5x wgpu's).\n    \
         if (check_err != 0u && __ldg(err) != 0u) return;\n    \
         WeftEnv e;\n    e.err = err;\n    e.tag = tag;\n",
    );
    for k in 0..roots.len() {
        let _ = writeln!(out, "    e.b{k} = b{k}; e.n{k} = n{k};");
    }
    for i in 0..kernel.params.len() {
        let _ = writeln!(out, "    e.p[{i}] = p{i};");
    }
    out.push_str("    e.frame = (int)r_frame;\n");
    // Row-major decomposition of the linear index, as on the other
    // backends. The extents are the kernel's iteration shape, which every
    // launch record repeats (`LaunchRecord::new`): as constants the
    // divisions become multiplies and shifts instead of a per-thread
    // integer divide (measured on an H200: a 512 MiB copy ran at 0.79 ms
    // with run-time extents). The outermost index needs no modulo
    // (lin < total).
    let shape = kernel.iteration_shape(program);
    out.push_str("    unsigned rest = (unsigned)lin;\n    (void)rest;\n");
    for d in (0..kernel.dims).rev() {
        if d == 0 {
            out.push_str("    int i0 = (int)rest;\n");
            break;
        }
        let ext = shape.get(d).copied().unwrap_or(1).max(1);
        let _ = writeln!(
            out,
            "    int i{d} = (int)(rest % {ext}u);\n    rest = rest / {ext}u;"
        );
    }
    // Launch values (`random()`'s seed chain is IR, from `legalize`).
    out.push_str(
        "    e.seed = r_seed; e.launch = r_launch; e.linear = (unsigned)lin; e.rng = 0u; e.trips = 0u;\n",
    );
    let idx: Vec<String> = (0..kernel.dims).map(|d| format!(", i{}", d)).collect();
    let _ = writeln!(out, "    (void)weft_body(&e, 0{});\n}}", idx.concat());
}

struct Gen<'a> {
    kernel: &'a Kernel,
    f: &'a Function,
    roots: &'a [LayoutId],
    sites: &'a mut Vec<FaultSite>,
    is_entry: bool,
    out: String,
    indent: usize,
    /// (address value, root) pairs already checked on every path to here, per open block.
    checked: Vec<HashSet<(InstId, usize)>>,
    /// The current C block already ended in a jump.
    filled: bool,
}

impl<'a> Gen<'a> {
    fn new(
        kernel: &'a Kernel,
        f: &'a Function,
        roots: &'a [LayoutId],
        sites: &'a mut Vec<FaultSite>,
        is_entry: bool,
    ) -> Self {
        Gen {
            kernel,
            f,
            roots,
            sites,
            is_entry,
            out: String::new(),
            indent: 1,
            checked: Vec::new(),
            filled: false,
        }
    }

    fn err(&self, h: InstId, m: &str) -> CodegenError {
        cerr(
            self.kernel,
            format!(
                "internal compiler error (please report it): {} (at code {})",
                m, self.f.insts[h].span
            ),
        )
    }

    fn line(&mut self, s: &str) {
        for _ in 0..self.indent {
            self.out.push_str("    ");
        }
        self.out.push_str(s);
        self.out.push('\n');
    }

    fn ty(&self, h: InstId) -> Type {
        self.f.insts[h].ty
    }

    /// The C names of `h`'s components.
    fn v(&self, h: InstId) -> Vec<String> {
        (0..self.ty(h).components())
            .map(|k| format!("v{}_{}", h.index(), k))
            .collect()
    }
    fn v1(&self, h: InstId) -> String {
        format!("v{}_0", h.index())
    }

    fn site(&mut self, span: Span, kind: FaultKind) -> u32 {
        self.sites.push(FaultSite {
            span,
            kind,
            resume: false,
        });
        (self.sites.len() - 1) as u32
    }

    fn function(&mut self) -> Result<(), CodegenError> {
        // A block's shared arrays (static `__shared__` storage of the body:
        // one copy per CUDA block, which is the kernel's block).
        if self.is_entry {
            for (a, arr) in self
                .kernel
                .workgroup
                .iter()
                .flat_map(|w| w.arrays.iter().enumerate())
            {
                let line = format!("__shared__ {} s{}[{}];", cty(arr.ty), a, arr.words());
                self.line(&line);
            }
        }
        for (l, loc) in self.f.locals.iter() {
            for k in 0..loc.ty.components() {
                let line = format!("{} l{}_{} = 0;", cty(loc.ty), l.index(), k);
                self.line(&line);
            }
        }
        self.block(&self.f.body)?;
        if !self.filled {
            self.line("return 0;");
        }
        Ok(())
    }

    fn block(&mut self, blk: &[InstId]) -> Result<(), CodegenError> {
        self.checked.push(HashSet::new());
        self.filled = false;
        for &h in blk {
            if self.filled {
                break;
            }
            self.inst(h)?;
        }
        self.checked.pop();
        Ok(())
    }

    /// A nested `{ … }` after `head` (which ends in `{`); returns whether it ended in a jump.
    fn nested(&mut self, blk: &[InstId]) -> Result<bool, CodegenError> {
        self.indent += 1;
        self.block(blk)?;
        self.indent -= 1;
        let filled = self.filled;
        self.filled = false;
        Ok(filled)
    }

    /// Declares `h`'s components from one C expression each.
    fn define(&mut self, h: InstId, exprs: Vec<String>) -> Result<(), CodegenError> {
        let ty = self.ty(h);
        if exprs.len() != ty.components() {
            return Err(self.err(
                h,
                &format!("value of type {} built from {} components", ty, exprs.len()),
            ));
        }
        let t = cty(ty);
        for (k, e) in exprs.into_iter().enumerate() {
            let line = format!("{} v{}_{} = {};", t, h.index(), k, e);
            self.line(&line);
        }
        Ok(())
    }

    /// Records a fault and leaves the function.
    fn fault_stmt(site: u32, value: &str) -> String {
        format!(
            "return weft_fault(e->err, e->tag, {}u, (long long)({}));",
            site, value
        )
    }

    /// Index of `root` among the kernel's buffers; checks `addr` against its length once per path.
    fn address(&mut self, h: InstId, root: LayoutId, addr: InstId) -> Result<String, CodegenError> {
        let r = self
            .roots
            .iter()
            .position(|&x| x == root)
            .ok_or_else(|| self.err(h, "buffer not collected"))?;
        let key = (addr, r);
        if !self.checked.iter().any(|s| s.contains(&key)) {
            if let Some(top) = self.checked.last_mut() {
                top.insert(key);
            }
            let site = self.site(self.f.insts[h].span, FaultKind::Address);
            let a = self.v1(addr);
            let line = format!(
                "if ((u64)(unsigned)({a}) >= e->n{r}) {}",
                Self::fault_stmt(site, &format!("(u64)(unsigned)({a})"))
            );
            self.line(&line);
        }
        Ok(format!("e->b{}[(unsigned)({})]", r, self.v1(addr)))
    }

    fn inst(&mut self, h: InstId) -> Result<(), CodegenError> {
        let f = self.f;
        let inst = &f.insts[h];
        let ty = inst.ty;
        match &inst.kind {
            InstKind::Const(k) => self.define(h, vec![literal(*k)]),
            InstKind::Arg(i) => {
                let n = if self.is_entry {
                    1
                } else {
                    f.args
                        .get(*i as usize)
                        .ok_or_else(|| self.err(h, "argument out of range"))?
                        .components()
                };
                if self.is_entry && *i as usize >= self.kernel.dims {
                    return Err(self.err(h, "loop index out of range"));
                }
                self.define(h, (0..n).map(|k| format!("a{}_{}", i, k)).collect())
            }
            InstKind::Param(i) => {
                if *i as usize >= self.kernel.params.len() {
                    return Err(self.err(h, "parameter out of range"));
                }
                let s = ty
                    .scalar()
                    .ok_or_else(|| self.err(h, "untyped parameter"))?;
                self.define(h, vec![from_word(s, &format!("e->p[{}]", i))])
            }
            InstKind::Frame => self.define(h, vec!["e->frame".into()]),
            InstKind::Launch(v) => {
                let x = match v {
                    LaunchValue::Seed => "e->seed",
                    LaunchValue::Count => "e->launch",
                    LaunchValue::Linear => "e->linear",
                };
                self.define(h, vec![x.into()])
            }
            InstKind::RngLoad => self.define(h, vec!["e->rng".into()]),
            InstKind::RngStore(v) => {
                let line = format!("e->rng = {};", self.v(*v)[0]);
                self.line(&line);
                Ok(())
            }
            InstKind::TripsLoad => self.define(h, vec!["e->trips".into()]),
            InstKind::TripsStore(v) => {
                let line = format!("e->trips = {};", self.v(*v)[0]);
                self.line(&line);
                Ok(())
            }
            // CUDA has no loop trip limit: the value itself is a valid
            // group of one (legalize never emits it for CUDA).
            InstKind::LaneMax(v) => {
                let x = self.v(*v)[0].clone();
                self.define(h, vec![x])
            }
            InstKind::Random => Err(self.err(h, "random() reached codegen; legalize did not run")),
            InstKind::Unary(op, a) => {
                let s = ty.scalar().ok_or_else(|| self.err(h, "untyped unary"))?;
                let e = self.v(*a).iter().map(|x| unary(*op, s, x)).collect();
                self.define(h, e)
            }
            InstKind::Binary(BinaryOp::MatMul, a, b) => {
                let e = matmul(&self.v(*a), &self.v(*b), self.ty(*a), self.ty(*b))
                    .ok_or_else(|| self.err(h, "matmul of unsupported types"))?;
                self.define(h, e)
            }
            InstKind::Binary(op, a, b) => {
                let s = self
                    .ty(*a)
                    .scalar()
                    .ok_or_else(|| self.err(h, "untyped binary"))?;
                let e = self
                    .v(*a)
                    .iter()
                    .zip(self.v(*b))
                    .map(|(x, y)| binary(*op, s, x, &y))
                    .collect();
                self.define(h, e)
            }
            InstKind::Select {
                cond,
                accept,
                reject,
            } => {
                let c = self.v(*cond);
                let (a, r) = (self.v(*accept), self.v(*reject));
                let e = (0..a.len())
                    .map(|k| {
                        let ck = if c.len() == 1 { &c[0] } else { &c[k] };
                        format!("({} ? {} : {})", ck, a[k], r[k])
                    })
                    .collect();
                self.define(h, e)
            }
            InstKind::Cast(a) => {
                let from = self
                    .ty(*a)
                    .scalar()
                    .ok_or_else(|| self.err(h, "untyped cast"))?;
                let to = ty.scalar().ok_or_else(|| self.err(h, "untyped cast"))?;
                let e = self.v(*a).iter().map(|x| cast(from, to, x)).collect();
                self.define(h, e)
            }
            InstKind::Bitcast(a) => {
                let from = self
                    .ty(*a)
                    .scalar()
                    .ok_or_else(|| self.err(h, "untyped bitcast"))?;
                let to = ty.scalar().ok_or_else(|| self.err(h, "untyped bitcast"))?;
                let src = self.v(*a);
                let e = match (src.len(), ty.components()) {
                    // Two words (low first) to a 64-bit scalar, and back.
                    (2, 1) => {
                        let (lo, hi) = (to_word(from, &src[0]), to_word(from, &src[1]));
                        vec![from_u64(
                            to,
                            &format!("((u64)({}) << 32 | (u64)({}))", hi, lo),
                        )]
                    }
                    (1, 2) => {
                        let b = to_u64(from, &src[0]);
                        vec![
                            from_word(to, &format!("(unsigned)({})", b)),
                            from_word(to, &format!("(unsigned)({} >> 32)", b)),
                        ]
                    }
                    _ if from.is_wide() => {
                        src.iter().map(|x| from_u64(to, &to_u64(from, x))).collect()
                    }
                    _ => src
                        .iter()
                        .map(|x| from_word(to, &to_word(from, x)))
                        .collect(),
                };
                self.define(h, e)
            }
            InstKind::Construct(parts) => {
                let e = parts.iter().flat_map(|p| self.v(*p)).collect();
                self.define(h, e)
            }
            InstKind::Extract(a, i) => {
                let n = ty.components();
                let at = *i as usize * n;
                let e = self
                    .v(*a)
                    .get(at..at + n)
                    .ok_or_else(|| self.err(h, "extract out of range"))?
                    .to_vec();
                self.define(h, e)
            }
            InstKind::ExtractDyn(a, i) => {
                let len = match self.ty(*a) {
                    Type::Vector(_, l) | Type::Matrix(l) => l as usize,
                    _ => return Err(self.err(h, "indexing a non-composite")),
                };
                let n = ty.components();
                let src = self.v(*a);
                let ix = self.clamped_index(h, *i, len);
                let e = (0..n)
                    .map(|c| {
                        let mut x = src[c].clone();
                        for k in 1..len {
                            x = format!("({} == {} ? {} : {})", ix, k, src[k * n + c], x);
                        }
                        x
                    })
                    .collect();
                self.define(h, e)
            }
            InstKind::Insert { base, index, value } => {
                let mut e = self.v(*base);
                let vv = self.v(*value);
                let at = *index as usize * vv.len();
                if at + vv.len() > e.len() {
                    return Err(self.err(h, "insert out of range"));
                }
                e[at..at + vv.len()].clone_from_slice(&vv);
                self.define(h, e)
            }
            InstKind::InsertDyn { base, index, value } => {
                let mut e = self.v(*base);
                let vv = self.v(*value);
                let elem = vv.len().max(1);
                let len = e.len() / elem;
                let ix = self.clamped_index(h, *index, len);
                for k in 0..len {
                    for c in 0..elem {
                        e[k * elem + c] =
                            format!("({} == {} ? {} : {})", ix, k, vv[c], e[k * elem + c]);
                    }
                }
                self.define(h, e)
            }
            InstKind::Swizzle(a, comps) => {
                let src = self.v(*a);
                let e = comps
                    .iter()
                    .map(|&c| {
                        src.get(c as usize)
                            .cloned()
                            .ok_or_else(|| self.err(h, "swizzle out of range"))
                    })
                    .collect::<Result<_, _>>()?;
                self.define(h, e)
            }
            InstKind::Builtin(bi, args) => {
                let at = self.ty(args[0]);
                let vs: Vec<Vec<String>> = args.iter().map(|a| self.v(*a)).collect();
                let e = builtin(*bi, at, &vs)
                    .ok_or_else(|| self.err(h, "built-in with unsupported arguments"))?;
                self.define(h, e)
            }
            InstKind::Call(fid, args) => self.call(h, *fid, args),
            InstKind::SharedLoad { array, index } => {
                let n = ty.components();
                let base = self.shared_base(h, *array, *index)?;
                let e = (0..n)
                    .map(|c| format!("s{}[{} + {}]", array, base, c))
                    .collect();
                self.define(h, e)
            }
            InstKind::SharedStore {
                array,
                index,
                value,
            } => {
                let base = self.shared_base(h, *array, *index)?;
                for (c, x) in self.v(*value).into_iter().enumerate() {
                    let line = format!("s{}[{} + {}] = {};", array, base, c, x);
                    self.line(&line);
                }
                Ok(())
            }
            InstKind::Barrier => {
                self.line("__syncthreads();");
                Ok(())
            }
            InstKind::LocalLoad(l) => {
                let e = (0..ty.components())
                    .map(|k| format!("l{}_{}", l.index(), k))
                    .collect();
                self.define(h, e)
            }
            InstKind::LocalStore(l, v) => {
                for (k, x) in self.v(*v).into_iter().enumerate() {
                    let line = format!("l{}_{} = {};", l.index(), k, x);
                    self.line(&line);
                }
                Ok(())
            }
            InstKind::Trap { site, value } => self.trap(h, *site, *value),
            InstKind::BufLoad { root, addr } => {
                let s = ty.scalar().ok_or_else(|| self.err(h, "untyped load"))?;
                let p = self.address(h, *root, *addr)?;
                self.define(h, vec![from_word(s, &p)])
            }
            InstKind::BufStore { root, addr, value } => {
                let s = self
                    .ty(*value)
                    .scalar()
                    .ok_or_else(|| self.err(h, "untyped store"))?;
                let p = self.address(h, *root, *addr)?;
                let line = format!("{} = {};", p, to_word(s, &self.v1(*value)));
                self.line(&line);
                Ok(())
            }
            InstKind::BufAtomic {
                op,
                root,
                addr,
                value,
                cmp,
            } => {
                let s = ty.scalar().ok_or_else(|| self.err(h, "untyped atomic"))?;
                if !super::CAPS.has_atomic(*op, s) {
                    return Err(self.err(h, "an atomic CUDA lacks; legalize expands it"));
                }
                let p = self.address(h, *root, *addr)?;
                let v = self.v1(*value);
                let c = cmp.map(|c| self.v1(c));
                self.define(
                    h,
                    vec![atomic(*op, s, &format!("&{}", p), &v, c.as_deref())],
                )
            }
            InstKind::FieldLoad { .. }
            | InstKind::FieldStore { .. }
            | InstKind::FieldAtomic { .. }
            | InstKind::FieldIsActive { .. }
            | InstKind::FieldActivate { .. }
            | InstKind::FieldDeactivate { .. }
            | InstKind::FieldAppend { .. }
            | InstKind::FieldLength { .. } => Err(self.err(
                h,
                "abstract field access reached codegen; access lowering did not run",
            )),
            InstKind::RangeFor { .. } | InstKind::LoopCounter(_) => {
                Err(self.err(h, "a range loop reached codegen; legalize did not run"))
            }
            InstKind::BoundsCheck { .. } | InstKind::IndexCheck { .. } => {
                Err(self.err(h, "a bounds check reached codegen; legalize did not run"))
            }
            InstKind::If {
                cond,
                accept,
                reject,
            } => {
                let line = format!("if ({}) {{", self.v1(*cond));
                self.line(&line);
                let a = self.nested(accept)?;
                let r = if reject.is_empty() {
                    false
                } else {
                    self.line("} else {");
                    self.nested(reject)?
                };
                self.line("}");
                // Only when both arms jump is the code after the `if` unreachable.
                self.filled = a && r;
                Ok(())
            }
            InstKind::Loop { body } => {
                self.line("for (;;) {");
                self.nested(body)?;
                self.line("}");
                // Leaving a `for (;;)` needs a `break`; without one (only
                // `return`s), C's flow analysis already knows the rest is dead.
                self.filled = false;
                Ok(())
            }
            InstKind::Break => {
                self.line("break;");
                self.filled = true;
                Ok(())
            }
            InstKind::Continue => {
                self.line("continue;");
                self.filled = true;
                Ok(())
            }
            InstKind::Return(v) => {
                if let (Some(v), false) = (v, self.is_entry) {
                    for (k, x) in self.v(*v).into_iter().enumerate() {
                        let line = format!("ret[{}] = {};", k, x);
                        self.line(&line);
                    }
                }
                self.line("return 0;");
                self.filled = true;
                Ok(())
            }
        }
    }

    /// `(int index).clamp(0, len - 1)` in a fresh variable.
    /// The first word of element `index` (clamped, as on every backend)
    /// of shared array `a`, as a C expression.
    fn shared_base(
        &mut self,
        h: InstId,
        a: SharedId,
        index: InstId,
    ) -> Result<String, CodegenError> {
        let arr = self
            .kernel
            .workgroup
            .as_ref()
            .and_then(|w| w.arrays.get(a as usize))
            .filter(|_| self.is_entry)
            .ok_or_else(|| self.err(h, "a shared array outside the kernel's entry"))?;
        let (len, n) = (arr.len as usize, arr.ty.components());
        let ix = self.clamped_index(h, index, len);
        Ok(format!("{} * {}", ix, n))
    }

    fn clamped_index(&mut self, h: InstId, index: InstId, len: usize) -> String {
        let name = format!("ix{}", h.index());
        let line = format!(
            "int {name} = min(max((int)({}), 0), {});",
            self.v1(index),
            len.saturating_sub(1)
        );
        self.line(&line);
        name
    }

    /// A legalized fault: stop at the kernel's own fault site (the first
    /// entries of `CudaKernel::sites`), recording the value's bits as they
    /// are; `FaultSite::message` reads them by the site's kind.
    fn trap(&mut self, h: InstId, site: u32, value: InstId) -> Result<(), CodegenError> {
        if self.kernel.fault_sites.get(site as usize).is_none() {
            return Err(self.err(h, &format!("trap at unknown fault site {}", site)));
        }
        let v = self.v1(value);
        let mut line = Self::fault_stmt(site, &format!("(long long)(unsigned)({v})"));
        if self.kernel.fault_sites[site as usize].resume {
            // Noted, and the thread goes on to the block's next
            // `__syncthreads()` (`FaultSite::resume`): a thread that
            // returned there would leave the rest of its block waiting.
            line = format!("(void){}", line.trim_start_matches("return "));
            self.line(&line);
            return Ok(());
        }
        self.line(&line);
        self.filled = true;
        Ok(())
    }

    fn call(&mut self, h: InstId, fid: FuncId, args: &[InstId]) -> Result<(), CodegenError> {
        let callee = self
            .kernel
            .functions
            .get(fid)
            .ok_or_else(|| self.err(h, "call of an unknown helper"))?;
        let ty = self.ty(h);
        let n = ty.components();
        let site = self.site(Span::default(), FaultKind::CallDepth);
        let line = format!(
            "if (depth >= {}) {}",
            MAX_CALL_DEPTH,
            Self::fault_stmt(site, "0")
        );
        self.line(&line);
        let zeros = vec!["0"; n.max(1)].join(", ");
        let line = format!(
            "{} r{}[{}] = {{{}}};",
            cty(callee.ret),
            h.index(),
            n.max(1),
            zeros
        );
        self.line(&line);
        let mut cargs = vec![
            "e".to_string(),
            "depth + 1".into(),
            format!("r{}", h.index()),
        ];
        for a in args {
            cargs.extend(self.v(*a));
        }
        let line = format!(
            "if (weft_fn{}({})) return 1;",
            fid.index(),
            cargs.join(", ")
        );
        self.line(&line);
        if ty != Type::Void {
            let e = (0..n).map(|k| format!("r{}[{}]", h.index(), k)).collect();
            self.define(h, e)?;
        }
        Ok(())
    }
}
