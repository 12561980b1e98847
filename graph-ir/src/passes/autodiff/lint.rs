//! Warnings about gradients that are silently zero: `weft check` prints
//! them for the kernels launched inside a tape.
//!
//! A conversion of a differentiable value (one computed from a field with a
//! gradient) to an integer type has derivative zero, so no gradient flows
//! back through it. That is often meant (a grid cell index), but when the
//! integer feeds the result numerically it silently cuts the gradient.
//! `random()` inside a tape is an error of the autodiff pass, not a warning.
//!
//! Pre: abstract IR as built from the graph (tapes not yet expanded).

use crate::ir::*;
use std::collections::HashSet;

/// A non-differentiable path inside a tape.
#[derive(Clone, Debug, PartialEq)]
pub struct AdWarning {
    pub node: String,
    pub span: Span,
    pub message: String,
}

impl std::fmt::Display for AdWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "warning: node '{}', code {}: {}",
            self.node, self.span, self.message
        )
    }
}

/// The warnings of every kernel launched inside a tape, in launch order.
pub fn warnings(program: &Program) -> Vec<AdWarning> {
    // Launches inside a tape or optimize step, once each: the launches of
    // each outermost one's body in order (the walk then meets them again
    // inside it, and nested ones, already listed).
    let mut ks: Vec<KernelId> = Vec::new();
    for list in program.schedule.lists() {
        steps::walk(list, &mut |s| {
            if let Step::Tape { body, .. } | Step::Optimize { body, .. } = s {
                steps::walk(body, &mut |b| {
                    if let Step::Launch(k) = b {
                        if !ks.contains(k) {
                            ks.push(*k);
                        }
                    }
                });
            }
        });
    }
    let mut out = Vec::new();
    for k in ks {
        kernel_warnings(program, &program.kernels[k], &mut out);
    }
    out
}

fn kernel_warnings(program: &Program, k: &Kernel, out: &mut Vec<AdWarning>) {
    let f = &k.entry;
    // Values and locals that depend on a field with a gradient; locals make
    // this a fixpoint (a loop may store a tainted value read earlier).
    let mut vals: HashSet<InstId> = HashSet::new();
    let mut locals: HashSet<LocalId> = HashSet::new();
    loop {
        let before = (vals.len(), locals.len());
        for (h, inst) in f.insts.iter() {
            let tainted = match &inst.kind {
                InstKind::FieldLoad { field, .. } => program.grad_of(*field).is_some(),
                InstKind::LocalLoad(l) => locals.contains(l),
                InstKind::LocalStore(l, v) => {
                    if vals.contains(v) {
                        locals.insert(*l);
                    }
                    false
                }
                // Integer results carry no gradient further.
                _ if !inst.ty.is_float() => false,
                kind => kind.operands().iter().any(|o| vals.contains(o)),
            };
            if tainted && inst.ty.is_float() {
                vals.insert(h);
            }
        }
        if (vals.len(), locals.len()) == before {
            break;
        }
    }
    for (_, inst) in f.insts.iter() {
        if let InstKind::Cast(a) = inst.kind {
            if vals.contains(&a) && !inst.ty.is_float() {
                out.push(AdWarning {
                    node: k.name.clone(),
                    span: inst.span,
                    message: format!(
                        "this conversion of a differentiable value to {} has derivative zero, so no gradient flows back through it; if the result feeds the loss numerically (not only as an index), keep that arithmetic in f32",
                        inst.ty
                    ),
                });
            }
        }
    }
}
