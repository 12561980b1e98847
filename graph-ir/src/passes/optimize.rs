//! `optimize` nodes: fitting fields to a loss by gradient descent or Adam,
//! as a repeat of a tape and system kernels written in IR, so every backend
//! runs it unchanged.
//!
//! Pre: abstract IR whose schedule may hold `Step::Optimize` (never inside a
//! tape or another optimize node: the graph builder refuses that). Post: the
//! same without `Step::Optimize`; `passes::autodiff` then expands the tapes.
//! `program.optimizers` lists the fields each node's expansion added.
//!
//! An optimize node O with loss L, fields W1..Wn, `iterations` N becomes
//! `repeat(N) { zero(L); tape(L) { body }; record; [adam_powers]; update(W1);
//! ...; update(Wn); count }`, every kernel named O so run-time errors name
//! the node. Fields it adds, each on a dense root of its own (so `weft
//! bench` prints them as layout trees):
//! - `O.loss` (f32, `[history]`): `record` (one invocation) sums every
//!   component of L into slot `step % history`: the loss of the parameters
//!   the iteration started with, before their update.
//! - `O.step` (i32, `[1]`): iterations completed; `count` adds 1 after the
//!   updates. It persists across frames (and resets with the simulation),
//!   so a plot can follow the history however often it reads it.
//! - Adam only: `O.m.W` and `O.v.W` (W's type and shape: first and second
//!   moment of W's gradient, starting at 0) and `O.beta_pow` (vec2, `[1]`,
//!   starting at (1, 1)): `adam_powers` multiplies it by (beta1, beta2)
//!   before the updates, so it holds (beta1^t, beta2^t) for step t = 1, 2, …
//!   as exact f32 products (no `pow`, whose precision differs by backend).
//!
//! Per component of every element of W (g its gradient), `update` does
//! gd: `w -= lr * g`; adam: `m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g²;
//! w -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)`. The update is
//! one invocation per element, touching only that element, so the order of
//! threads cannot change the result.
//!
//! Does not: check the body's kernels (autodiff does, naming them), or
//! touch anything outside optimize nodes.

use crate::ir::layout;
use crate::ir::steps::{self, Rewrite};
use crate::ir::*;
use crate::lower::emit::Build;
use crate::lower::emit::Emit;
use crate::types::{Scalar, Type};

use super::PassError;

pub fn run(program: &mut Program) -> Result<(), PassError> {
    let mut schedule = std::mem::take(&mut program.schedule);
    let r = (|| {
        schedule.on_start = expand(program, std::mem::take(&mut schedule.on_start))?;
        schedule.on_frame = expand(program, std::mem::take(&mut schedule.on_frame))?;
        Ok(())
    })();
    program.schedule = schedule;
    r
}

fn expand(program: &mut Program, steps: Vec<Step>) -> Result<Vec<Step>, PassError> {
    steps::try_rewrite(steps, &mut |s| match s {
        // Its body goes to the optimizer as it is.
        Step::Optimize {
            node_id,
            spec,
            body,
        } => Ok(Rewrite::Into(vec![optimizer(
            program, &node_id, &spec, body,
        )?])),
        s => Ok(Rewrite::Keep(s)),
    })
}

/// The repeat one optimize node becomes.
fn optimizer(
    program: &mut Program,
    node: &str,
    spec: &OptimizeSpec,
    body: Vec<Step>,
) -> Result<Step, PassError> {
    let err = |message: String| PassError {
        pass: "optimize",
        kernel: node.to_string(),
        message,
        user: Some(Span::default()),
    };
    if program.optimizers.iter().any(|o| o.node_id == node) {
        return Err(err(
            "the optimize node runs at two places in the schedule".into()
        ));
    }
    let history = new_field(
        program,
        &format!("{}.loss", node),
        Type::F32,
        vec![spec.history],
        0.0,
    );
    let step = new_field(program, &format!("{}.step", node), Type::I32, vec![1], 0.0);
    let mut iteration = vec![Step::Launch(append(
        program,
        node,
        fill(program, spec.loss),
    ))];
    iteration.push(Step::Tape {
        node_id: node.to_string(),
        loss: spec.loss,
        checkpoint: spec.checkpoint,
        mode: TapeMode::Reverse,
        body,
    });
    let rec = record(program, spec.loss, history, step, spec.history);
    iteration.push(Step::Launch(append(program, node, rec)));
    match spec.method {
        OptimizeMethod::Gd => {
            for &w in &spec.wrt {
                let k = update(program, w, spec.lr, None);
                iteration.push(Step::Launch(append(program, node, k)));
            }
        }
        OptimizeMethod::Adam { beta1, beta2, eps } => {
            let pow = new_field(
                program,
                &format!("{}.beta_pow", node),
                Type::Vector(Scalar::F32, 2),
                vec![1],
                1.0,
            );
            let k = powers(pow, beta1, beta2);
            iteration.push(Step::Launch(append(program, node, k)));
            for &w in &spec.wrt {
                let (name, ty, shape) = {
                    let f = &program.fields[w];
                    (f.name.clone(), f.ty, f.shape.clone())
                };
                let m = new_field(
                    program,
                    &format!("{}.m.{}", node, name),
                    ty,
                    shape.clone(),
                    0.0,
                );
                let v = new_field(program, &format!("{}.v.{}", node, name), ty, shape, 0.0);
                let adam = Adam {
                    m,
                    v,
                    pow,
                    beta1,
                    beta2,
                    eps,
                };
                let k = update(program, w, spec.lr, Some(&adam));
                iteration.push(Step::Launch(append(program, node, k)));
            }
        }
    }
    let c = count(step);
    iteration.push(Step::Launch(append(program, node, c)));
    layout::compute(program).map_err(|e| err(e.message))?;
    program.optimizers.push(OptimizerFields {
        node_id: node.to_string(),
        loss_history: history,
        step,
    });
    Ok(Step::Repeat {
        node_id: node.to_string(),
        count: spec.iterations,
        index: None,
        reverse: false,
        start: 0,
        body: iteration,
    })
}

/// A field of `ty` and `shape` on a dense root of its own (named like the
/// field), every component starting at `init` (f32 types) or 0.
fn new_field(program: &mut Program, name: &str, ty: Type, shape: Vec<u32>, init: f32) -> FieldId {
    let l = program.layouts.append(LayoutNode::new(
        name,
        LayoutKind::Dense,
        shape.clone(),
        None,
    ));
    let word = if ty.is_float() { init.to_bits() } else { 0 };
    let h = program.fields.append(Field {
        name: name.to_string(),
        ty,
        storage: Storage::Word,
        layout: l,
        shape,
        offset_in_cell: 0,
        init: FieldInit::Constant(vec![word; ty.components()]),
    });
    program.layouts[l].children.push(LayoutChild::Field(h));
    h
}

fn append(program: &mut Program, node: &str, mut k: Kernel) -> KernelId {
    k.name = node.to_string();
    program.kernels.append(k)
}

/// Sets every component of every element of `field` to 0.
fn fill(program: &Program, field: FieldId) -> Kernel {
    let f = &program.fields[field];
    let dims = f.shape.len();
    let mut e = Emit::new("kernel", dims);
    let idx = e.args(dims);
    let zero = e.f32c(0.0);
    let comps = vec![zero; f.ty.components()];
    let v = e.assemble(&comps, f.ty);
    e.store(field, idx, v);
    e.kernel(
        Iteration::Range(f.shape.clone()),
        dims,
        vec![("field", field)],
    )
}

/// One invocation: `history[step % slots] = sum of every component of loss`.
fn record(program: &Program, loss: FieldId, history: FieldId, step: FieldId, slots: u32) -> Kernel {
    let f = &program.fields[loss];
    let (ty, shape) = (f.ty, f.shape.clone());
    let mut e = Emit::new("kernel", 1);
    let acc = e.f.locals.append(Local {
        name: "sum".into(),
        ty: Type::F32,
    });
    let zero = e.f32c(0.0);
    e.emit(InstKind::LocalStore(acc, zero), Type::Void);
    // Nested loops over the loss field's axes, summing in row-major order
    // (one thread, so every backend adds in the same order).
    fn nest(e: &mut Emit, shape: &[u32], idx: Vec<InstId>, loss: FieldId, ty: Type, acc: LocalId) {
        match shape.split_first() {
            Some((&n, rest)) => e.range(n, |e, c| {
                let mut idx = idx.clone();
                idx.push(c);
                nest(e, rest, idx, loss, ty, acc)
            }),
            None => {
                let v = e.load(loss, ty, idx);
                for c in e.components(v, ty) {
                    let s = e.emit(InstKind::LocalLoad(acc), Type::F32);
                    let s = e.bin(BinaryOp::Add, s, c);
                    e.emit(InstKind::LocalStore(acc, s), Type::Void);
                }
            }
        }
    }
    nest(&mut e, &shape, vec![], loss, ty, acc);
    let z = e.i32c(0);
    let n = e.load(step, Type::I32, vec![z]);
    let k = e.i32c(slots as i32);
    let slot = e.bin(BinaryOp::Rem, n, k);
    let s = e.emit(InstKind::LocalLoad(acc), Type::F32);
    e.store(history, vec![slot], s);
    e.kernel(
        Iteration::Range(vec![1]),
        1,
        vec![("loss", loss), ("history", history), ("step", step)],
    )
}

/// One invocation: `pow[0] *= (beta1, beta2)`.
fn powers(pow: FieldId, beta1: f32, beta2: f32) -> Kernel {
    let ty = Type::Vector(Scalar::F32, 2);
    let mut e = Emit::new("kernel", 1);
    let z = e.i32c(0);
    let p = e.load(pow, ty, vec![z]);
    let b1 = e.f32c(beta1);
    let b2 = e.f32c(beta2);
    let b = e.emit(InstKind::Construct(vec![b1, b2]), ty);
    let next = e.bin(BinaryOp::Mul, p, b);
    e.store(pow, vec![z], next);
    e.kernel(Iteration::Range(vec![1]), 1, vec![("beta_pow", pow)])
}

/// One invocation: `step[0] += 1`.
fn count(step: FieldId) -> Kernel {
    let mut e = Emit::new("kernel", 1);
    let z = e.i32c(0);
    let n = e.load(step, Type::I32, vec![z]);
    let one = e.i32c(1);
    let next = e.bin(BinaryOp::Add, n, one);
    e.store(step, vec![z], next);
    e.kernel(Iteration::Range(vec![1]), 1, vec![("step", step)])
}

/// Adam's state for one field.
struct Adam {
    m: FieldId,
    v: FieldId,
    pow: FieldId,
    beta1: f32,
    beta2: f32,
    eps: f32,
}

/// One invocation per element of `w`: the gradient descent or Adam update.
fn update(program: &Program, w: FieldId, lr: f32, adam: Option<&Adam>) -> Kernel {
    let f = &program.fields[w];
    let (ty, shape) = (f.ty, f.shape.clone());
    let g = program
        .grad_of(w)
        .expect("the graph builder checked wrt fields");
    let dims = shape.len();
    let mut e = Emit::new("kernel", dims);
    let idx = e.args(dims);
    let wv = e.load(w, ty, idx.clone());
    let gv = e.load(g, ty, idx.clone());
    let ws = e.components(wv, ty);
    let gs = e.components(gv, ty);
    let lr_c = e.f32c(lr);
    let mut bindings = vec![("field", w), ("grad", g)];
    let new: Vec<InstId> = match adam {
        None => ws
            .iter()
            .zip(&gs)
            .map(|(&x, &d)| {
                let step = e.bin(BinaryOp::Mul, lr_c, d);
                e.bin(BinaryOp::Sub, x, step)
            })
            .collect(),
        Some(a) => {
            bindings.extend([("m", a.m), ("v", a.v), ("beta_pow", a.pow)]);
            let mv = e.load(a.m, ty, idx.clone());
            let vv = e.load(a.v, ty, idx.clone());
            let ms = e.components(mv, ty);
            let vs = e.components(vv, ty);
            let z = e.i32c(0);
            let pty = Type::Vector(Scalar::F32, 2);
            let p = e.load(a.pow, pty, vec![z]);
            let p1 = e.emit(InstKind::Extract(p, 0), Type::F32);
            let p2 = e.emit(InstKind::Extract(p, 1), Type::F32);
            let one = e.f32c(1.0);
            // Bias corrections 1 - beta^t, once per invocation.
            let c1 = e.bin(BinaryOp::Sub, one, p1);
            let c2 = e.bin(BinaryOp::Sub, one, p2);
            let b1 = e.f32c(a.beta1);
            let b2 = e.f32c(a.beta2);
            let ob1 = e.f32c(1.0 - a.beta1);
            let ob2 = e.f32c(1.0 - a.beta2);
            let eps = e.f32c(a.eps);
            let (mut m_new, mut v_new, mut w_new) = (vec![], vec![], vec![]);
            for c in 0..ws.len() {
                let d = gs[c];
                let t1 = e.bin(BinaryOp::Mul, b1, ms[c]);
                let t2 = e.bin(BinaryOp::Mul, ob1, d);
                let m = e.bin(BinaryOp::Add, t1, t2);
                let dd = e.bin(BinaryOp::Mul, d, d);
                let t3 = e.bin(BinaryOp::Mul, b2, vs[c]);
                let t4 = e.bin(BinaryOp::Mul, ob2, dd);
                let v = e.bin(BinaryOp::Add, t3, t4);
                let mhat = e.bin(BinaryOp::Div, m, c1);
                let vhat = e.bin(BinaryOp::Div, v, c2);
                let root = e.emit(InstKind::Builtin(Builtin::Sqrt, vec![vhat]), Type::F32);
                let den = e.bin(BinaryOp::Add, root, eps);
                let num = e.bin(BinaryOp::Mul, lr_c, mhat);
                let step = e.bin(BinaryOp::Div, num, den);
                w_new.push(e.bin(BinaryOp::Sub, ws[c], step));
                m_new.push(m);
                v_new.push(v);
            }
            let m = e.assemble(&m_new, ty);
            let v = e.assemble(&v_new, ty);
            e.store(a.m, idx.clone(), m);
            e.store(a.v, idx.clone(), v);
            w_new
        }
    };
    let nw = e.assemble(&new, ty);
    e.store(w, idx, nw);
    e.kernel(Iteration::Range(shape), dims, bindings)
}
