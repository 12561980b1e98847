//! Checkpointed tapes (`tape` param `checkpoint: k`): a long rollout whose
//! state is updated **in place** (`x[i] = x[i] + dt * v[i]`), differentiated
//! with O(count/k + k) copies of the state instead of one per step.
//!
//! The tape body is `prefix; repeat(count) { K1; ...; Kn }; suffix` where
//! the repeat body holds only kernels and k divides count. The **state** is
//! every field a kernel of the repeat body writes. Forward, the state is
//! copied into slot `t / k` of a checkpoint field (`TAPE.ckpt.X`, shape
//! `[count/k + 1, ...]`) at the start of every segment of k steps, and once
//! more after the last step. Backward, per segment, last first: restore the
//! segment's checkpoint, run its k steps forward again while copying each
//! step's entry state into a segment field (`TAPE.seg.X`, shape `[k, ...]`),
//! then for each step (last first) and each kernel Kp of the body (last
//! first): restore the step's entry state, rerun K1..Kp-1, run Kp's adjoint.
//! So every adjoint kernel sees exactly the fields its forward launch saw.
//! At the end the final state is restored, so after the tape the fields
//! hold what the forward pass computed, as without checkpointing.
//!
//! Cost: the forward pass once more, plus n(n-1)/2 kernel launches per step
//! for n kernels in the body; the copies are plain kernels (every backend).
//! The segment of step `t` is addressed through the repeat's index scalar
//! (the system kernels read it; `Step::Repeat::start` gives each segment
//! its first step), so user kernels still see the global step `t`.

use super::AdError;
use crate::arena::Arena;
use crate::ir::layout;
use crate::ir::*;
use crate::types::Type;
use std::collections::HashMap;

/// A checkpointed tape body, split around its repeat.
pub(super) struct Plan {
    pub prefix: Vec<Step>,
    pub suffix: Vec<Step>,
    pub repeat_node: String,
    pub count: u32,
    /// The index scalar the repeat gives its kernels (an internal one when
    /// the repeat has none).
    pub index: String,
    pub body: Vec<KernelId>,
    /// Fields written by the body, in first-write order.
    pub state: Vec<FieldId>,
    pub k: u32,
}

fn err(node: &str, message: String) -> AdError {
    AdError {
        node: node.to_string(),
        span: Span::default(),
        message,
    }
}

/// Splits a tape body for checkpointing, or says why it cannot be.
pub(super) fn plan(program: &Program, tape: &str, k: u32, body: &[Step]) -> Result<Plan, AdError> {
    let repeats: Vec<usize> = body
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(s, Step::Repeat { .. }))
        .map(|(i, _)| i)
        .collect();
    let [at] = repeats[..] else {
        return Err(err(
            tape,
            format!(
                "checkpoint {} needs exactly one `repeat` directly in the tape's body (the time steps); this body has {}",
                k,
                repeats.len()
            ),
        ));
    };
    let Step::Repeat {
        node_id,
        count,
        index,
        body: rbody,
        ..
    } = &body[at]
    else {
        unreachable!("filtered above")
    };
    let mut kernels = Vec::new();
    for s in rbody {
        match s {
            Step::Launch(k) => kernels.push(*k),
            _ => {
                return Err(err(
                    node_id,
                    format!(
                        "the body of a checkpointed repeat may only launch kernels (tape '{}' has checkpoint {}); move nested repeats out or set checkpoint to 0",
                        tape, k
                    ),
                ))
            }
        }
    }
    if *count % k != 0 {
        return Err(err(
            tape,
            format!(
                "checkpoint {} must divide the count {} of repeat '{}'",
                k, count, node_id
            ),
        ));
    }
    let mut state: Vec<FieldId> = Vec::new();
    for &kid in &kernels {
        let f = &program.kernels[kid].entry;
        let mut written = Vec::new();
        fn walk(f: &Function, b: &Block, out: &mut Vec<FieldId>) {
            for &i in b {
                match &f.insts[i].kind {
                    InstKind::FieldStore { field, .. } | InstKind::FieldAtomic { field, .. } => {
                        out.push(*field)
                    }
                    kind => {
                        for nb in kind.blocks() {
                            walk(f, nb, out);
                        }
                    }
                }
            }
        }
        walk(f, &f.body, &mut written);
        for w in written {
            if !state.contains(&w) {
                state.push(w);
            }
        }
    }
    for &f in &state {
        let field = &program.fields[f];
        let mut l = Some(field.layout);
        while let Some(h) = l {
            if program.layouts[h].kind.is_sparse() {
                return Err(err(
                    tape,
                    format!(
                        "checkpointing copies the state fields, which must be dense; '{}' (written by repeat '{}') is sparse",
                        field.name, node_id
                    ),
                ));
            }
            l = program.layouts[h].parent;
        }
        if field.shape.len() > 2 {
            return Err(err(
                tape,
                format!(
                    "checkpointing keeps copies of the state with one more axis; '{}' already has {} axes (at most 2 can be checkpointed)",
                    field.name,
                    field.shape.len()
                ),
            ));
        }
    }
    Ok(Plan {
        prefix: body[..at].to_vec(),
        suffix: body[at + 1..].to_vec(),
        repeat_node: node_id.clone(),
        count: *count,
        index: index.clone().unwrap_or_else(|| "__step".into()),
        body: kernels,
        state,
        k,
    })
}

/// A new dense root holding one field with `slots` copies of `f`.
fn storage(program: &mut Program, tape: &str, what: &str, f: FieldId, slots: u32) -> FieldId {
    let src = program.fields[f].clone();
    let mut shape = vec![slots];
    shape.extend(&src.shape);
    let name = format!("{}.{}.{}", tape, what, src.name);
    let l = program.layouts.append(LayoutNode::new(
        &name,
        LayoutKind::Dense,
        shape.clone(),
        None,
    ));
    let h = program.fields.append(Field {
        name,
        ty: src.ty,
        storage: Storage::Word,
        layout: l,
        shape,
        offset_in_cell: 0,
        init: FieldInit::Constant(vec![0; src.ty.components()]),
    });
    program.layouts[l].children.push(LayoutChild::Field(h));
    h
}

#[derive(Clone, Copy)]
enum Copy {
    /// state → store[slot]
    Save,
    /// store[slot] → state
    Restore,
}

/// A kernel over the state field copying it to or from slot `t / k`
/// (`per_step == false`) or `t % k` of `store`, t being the index scalar.
fn copy_kernel(
    program: &Program,
    tape: &str,
    plan: &Plan,
    state: FieldId,
    store: FieldId,
    per_step: bool,
    dir: Copy,
) -> Kernel {
    let f = &program.fields[state];
    let dims = f.shape.len();
    let mut entry = Function::new("kernel", vec![Type::I32; dims], Type::Void, Span::default());
    let mut body = Vec::new();
    let mut add = |entry: &mut Function, kind, ty| {
        let h = entry.detached(kind, ty, Span::default());
        body.push(h);
        h
    };
    let idx: Vec<InstId> = (0..dims)
        .map(|d| add(&mut entry, InstKind::Arg(d as u32), Type::I32))
        .collect();
    let t = add(&mut entry, InstKind::Param(0), Type::I32);
    let kc = add(
        &mut entry,
        InstKind::Const(Const::i32(plan.k as i32)),
        Type::I32,
    );
    let op = if per_step {
        BinaryOp::Rem
    } else {
        BinaryOp::Div
    };
    let slot = add(&mut entry, InstKind::Binary(op, t, kc), Type::I32);
    let mut sidx = vec![slot];
    sidx.extend(&idx);
    let (from, from_idx, to, to_idx) = match dir {
        Copy::Save => (state, idx, store, sidx),
        Copy::Restore => (store, sidx, state, idx),
    };
    let v = add(
        &mut entry,
        InstKind::FieldLoad {
            field: from,
            index: from_idx,
        },
        f.ty,
    );
    add(
        &mut entry,
        InstKind::FieldStore {
            field: to,
            index: to_idx,
            value: v,
        },
        Type::Void,
    );
    entry.body = body;
    Kernel {
        fused: Vec::new(),
        name: tape.to_string(),
        iteration: Iteration::Range(f.shape.clone()),
        dims,
        params: vec![KernelParam {
            part: 0,
            name: plan.index.clone(),
            ty: Type::I32,
            value: 0,
        }],
        entry,
        functions: Arena::new(),
        bindings: vec![("state".into(), state), ("store".into(), store)],
        fault_sites: Vec::new(),
        count_from: None,
        loops_end: false,
        zero_fill: None,
        workgroup: None,
    }
}

/// The system kernels of a checkpointed tape, one launch per state field each.
pub(super) struct Copies {
    save_ckpt: Vec<Step>,
    restore_ckpt: Vec<Step>,
    save_seg: Vec<Step>,
    restore_seg: Vec<Step>,
}

/// Adds the checkpoint and segment fields and their copy kernels.
pub(super) fn copies(program: &mut Program, tape: &str, plan: &Plan) -> Result<Copies, AdError> {
    let mut c = Copies {
        save_ckpt: Vec::new(),
        restore_ckpt: Vec::new(),
        save_seg: Vec::new(),
        restore_seg: Vec::new(),
    };
    for &s in &plan.state {
        let ck = storage(program, tape, "ckpt", s, plan.count / plan.k + 1);
        let sg = storage(program, tape, "seg", s, plan.k);
        for (store, per_step, dir, out) in [
            (ck, false, Copy::Save, &mut c.save_ckpt),
            (ck, false, Copy::Restore, &mut c.restore_ckpt),
            (sg, true, Copy::Save, &mut c.save_seg),
            (sg, true, Copy::Restore, &mut c.restore_seg),
        ] {
            let kernel = copy_kernel(program, tape, plan, s, store, per_step, dir);
            out.push(Step::Launch(program.kernels.append(kernel)));
        }
    }
    layout::compute(program).map_err(|e| err(tape, e.message))?;
    Ok(c)
}

impl Plan {
    fn rep(&self, count: u32, start: u32, reverse: bool, body: Vec<Step>) -> Step {
        Step::Repeat {
            node_id: self.repeat_node.clone(),
            count,
            index: Some(self.index.clone()),
            reverse,
            start,
            body,
        }
    }

    /// The forward pass of the repeat: segments, each starting with a checkpoint.
    pub(super) fn forward(&self, c: &Copies) -> Vec<Step> {
        let mut out = Vec::new();
        let launches: Vec<Step> = self.body.iter().map(|&k| Step::Launch(k)).collect();
        for seg in 0..self.count / self.k {
            out.push(self.rep(1, seg * self.k, false, c.save_ckpt.clone()));
            out.push(self.rep(self.k, seg * self.k, false, launches.clone()));
        }
        // The final state, put back after the backward pass.
        out.push(self.rep(1, self.count, false, c.save_ckpt.clone()));
        out
    }

    /// The backward pass of the repeat, segments last first.
    pub(super) fn backward(&self, c: &Copies, adjoints: &HashMap<KernelId, KernelId>) -> Vec<Step> {
        let mut out = Vec::new();
        let launches: Vec<Step> = self.body.iter().map(|&k| Step::Launch(k)).collect();
        let mut per_step = Vec::new();
        for p in (0..self.body.len()).rev() {
            per_step.extend(c.restore_seg.iter().cloned());
            per_step.extend(launches[..p].iter().cloned());
            per_step.push(Step::Launch(adjoints[&self.body[p]]));
        }
        let mut record = c.save_seg.clone();
        record.extend(launches);
        for seg in (0..self.count / self.k).rev() {
            let s = seg * self.k;
            out.push(self.rep(1, s, false, c.restore_ckpt.clone()));
            out.push(self.rep(self.k, s, false, record.clone()));
            out.push(self.rep(self.k, s, true, per_step.clone()));
        }
        out
    }

    /// Puts the final forward state back.
    pub(super) fn restore_final(&self, c: &Copies) -> Step {
        self.rep(1, self.count, false, c.restore_ckpt.clone())
    }
}
