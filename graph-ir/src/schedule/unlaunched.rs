//! Dropping kernels nothing launches: after fusion the kernels it joined
//! (and the shorter runs it made on the way) are no longer launched, and
//! every backend compiles every kernel of the program — on CUDA one NVRTC
//! compile each, on wgpu one pipeline each, paid at every cold start.
//!
//! Pre: the schedule stage's other passes have run (abstract IR; only
//! launches, repeats, list and clear steps, tapes expanded). Post: every
//! kernel of `program.kernels` is launched by `on_start`, `on_frame` or a
//! view's launch list, in the order they had; the handles in the schedule,
//! `view_kernels` and `custom_backward` are renumbered (a custom-backward
//! pair with a dropped kernel goes: tapes were expanded before this
//! stage), and so does an animated scalar of a dropped kernel. Results cannot change: a kernel's random stream is keyed by its
//! name, not its handle (`lower::random`), and scalars are set by node
//! (`Kernel::node`), which fused kernels keep.

use crate::ir::steps;
use crate::ir::*;

pub fn run(program: &mut Program) {
    let mut live = vec![false; program.kernels.len()];
    mark(&program.schedule.on_start, &mut live);
    mark(&program.schedule.on_frame, &mut live);
    for v in &program.view_kernels {
        for k in &v.launches {
            live[k.index()] = true;
        }
    }
    if live.iter().all(|&l| l) {
        return;
    }
    let map = program.kernels.compact(|k| live[k.index()]);
    let to = |k: KernelId| map[k.index()].expect("a launched kernel is kept");
    let mut s = std::mem::take(&mut program.schedule);
    remap(&mut s.on_start, &to);
    remap(&mut s.on_frame, &to);
    program.schedule = s;
    for v in &mut program.view_kernels {
        for k in &mut v.launches {
            *k = to(*k);
        }
    }
    program.custom_backward = program
        .custom_backward
        .iter()
        .filter_map(|&(a, b)| Some((map[a.index()]?, map[b.index()]?)))
        .collect();
    // A `frame` expression on a scalar of a kernel that never runs animates
    // nothing (and `Simulation::set_param` would not find the node).
    let animated = std::mem::take(&mut program.animated);
    program.animated = animated
        .into_iter()
        .filter(|a| program.has_kernel_node(&a.kernel))
        .collect();
}

fn mark(list: &[Step], live: &mut [bool]) {
    steps::walk(list, &mut |s| {
        if let Step::Launch(k) = s {
            live[k.index()] = true
        }
    });
}

fn remap(list: &mut [Step], to: &impl Fn(KernelId) -> KernelId) {
    steps::walk_mut(list, &mut |s| {
        if let Step::Launch(k) = s {
            *k = to(*k)
        }
    });
}
