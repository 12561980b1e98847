//! `weft bench`: load and compile time, per-frame, per-kernel and per-view times.

use crate::cli::BenchArgs;
use crate::fail;
use crate::run::open_program;
use serde_json::json;
use std::time::{Duration, Instant};

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        return 0.0;
    }
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

pub fn bench(a: BenchArgs) -> i32 {
    // Loading (parse, catalog checks, kernel code to IR) is timed apart
    // from compiling: start-up is the two together.
    let t = Instant::now();
    let mut sim = match open_program(&a.graph, &a.overrides, a.backend, a.json, false) {
        Ok((_, s)) => s,
        Err(e) => return fail(&e),
    };
    let load_ms = ms(t.elapsed().saturating_sub(sim.compile_time));
    let compile_ms = ms(sim.compile_time);
    let launches_per_frame = weft_ir::schedule::launches_per_frame(&sim.program);
    // Warm-up: on_start and one frame, not timed.
    if let Err(e) = sim.step_frame().and_then(|_| sim.sync()) {
        return fail(&e);
    }
    // A GPU runs a few frames behind the host: fill that queue first, so
    // that every timed frame waits for the one that many frames before it
    // and a frame's time is the GPU's time for one frame.
    let ahead = sim.frames_in_flight();
    for _ in 0..ahead {
        if let Err(e) = sim.step_frame() {
            return fail(&e);
        }
    }
    sim.kernel_times.clear();
    let mut frames = Vec::new();
    for _ in 0..a.frames.max(1) {
        let t = Instant::now();
        if let Err(e) = sim.step_frame() {
            return fail(&e);
        }
        frames.push(ms(t.elapsed()));
    }
    if let Err(e) = sim.sync() {
        return fail(&e);
    }
    // On a GPU a frame is queued whole; per-kernel times need each launch
    // timed on its own, so they come from a separate profiled pass over as
    // many frames.
    if ahead > 0 {
        sim.kernel_times.clear();
        sim.set_profile(true);
        for _ in 0..a.frames.max(1) {
            if let Err(e) = sim.step_frame() {
                return fail(&e);
            }
        }
    }
    let (fmin, fmax) = frames.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &x| {
        (lo.min(x), hi.max(x))
    });
    let fmed = median(&mut frames.clone());
    // wgpu runs launches proven to only zero a word range (`zero_fill`) as
    // buffer fills; say so next to their times.
    let on_wgpu = sim.backend() == Some(weft_runtime::Backend::Wgpu);
    let fill = |name: &str| {
        on_wgpu
            && sim
                .program
                .kernels
                .iter()
                .filter(|(_, k)| k.label() == name)
                .all(|(_, k)| k.zero_fill.is_some())
    };
    let kernels: Vec<(String, f64, usize, bool)> = sim
        .kernel_times
        .iter()
        .map(|(k, v)| {
            let mut m: Vec<f64> = v.iter().map(|d| ms(*d)).collect();
            (k.clone(), median(&mut m), v.len(), fill(k))
        })
        .collect();
    // Each view drawn on its own as many times (render cost per view; a
    // draw reads the state the frames left and changes no field of it).
    let mut views: Vec<(String, u32, u32, f64)> = Vec::new();
    let shapes: Vec<(String, u32, u32)> = sim
        .program
        .view_kernels
        .iter()
        .map(|v| (v.node_id.clone(), v.width, v.height))
        .collect();
    sim.set_profile(false);
    for (id, w, h) in shapes {
        let mut t = Vec::new();
        for _ in 0..a.frames.max(1) {
            let start = Instant::now();
            if let Err(e) = sim.draw_view(&id).and_then(|_| sim.sync()) {
                return fail(&e);
            }
            t.push(ms(start.elapsed()));
        }
        views.push((id, w, h, median(&mut t)));
    }
    if a.json {
        let per_kernel: serde_json::Map<String, serde_json::Value> = kernels
            .iter()
            .map(|(k, m, n, f)| {
                (
                    k.clone(),
                    json!({"median_ms": m, "launches": n, "buffer_fill": f}),
                )
            })
            .collect();
        let out = json!({
            "graph": a.graph.display().to_string(),
            "backend": sim.backend_name(),
            "threads": a.overrides.threads.unwrap_or_else(rayon_threads),
            "device": sim.device_name(),
            "frames": frames.len(),
            "load_ms": load_ms,
            "compile_ms": compile_ms,
            "launches_per_frame": launches_per_frame,
            "interkernel": !a.overrides.no_interkernel,
            "frame_ms": {"median": fmed, "min": fmin, "max": fmax, "samples": frames},
            "kernels": per_kernel,
            "kernel_timing": sim.engine().timing_method(),
            "views": views.iter().map(|(id, w, h, m)| (id.clone(), json!({"median_ms": m, "width": w, "height": h}))).collect::<serde_json::Map<String, serde_json::Value>>(),
            "memory": weft_ir::ir::layout::memory_lines(&sim.program),
        });
        println!("{}", out);
    } else {
        println!("graph    {}", a.graph.display());
        match sim.device_name() {
            Some(d) => println!(
                "backend  {} on {} (frames: queued whole, up to {} in flight; kernels: a separate profiled pass)",
                sim.backend_name(),
                d,
                ahead
            ),
            None => println!(
                "backend  {} ({} threads)",
                sim.backend_name(),
                a.overrides.threads.unwrap_or_else(rayon_threads)
            ),
        }
        println!("load     {:.2} ms", load_ms);
        println!("compile  {:.2} ms", compile_ms);
        println!(
            "launches {} per frame (inter-kernel optimiser {})",
            launches_per_frame,
            if a.overrides.no_interkernel {
                "off"
            } else {
                "on"
            }
        );
        for m in weft_ir::ir::layout::memory_lines(&sim.program) {
            println!("memory   {}", m);
        }
        println!(
            "frame    median {:.3} ms  min {:.3}  max {:.3}  ({} frames after 1 warm-up)",
            fmed,
            fmin,
            fmax,
            frames.len()
        );
        for (id, w, h, m) in &views {
            println!(
                "view     {:<20} median {:.3} ms per draw ({}x{}, read-back not included)",
                id, m, w, h
            );
        }
        if !kernels.is_empty() {
            println!("timing   kernels by {}", sim.engine().timing_method());
        }
        for (k, m, n, f) in kernels {
            println!(
                "kernel   {:<20} median {:.3} ms per launch ({} launches{})",
                k,
                m,
                n,
                if f { ", run as a buffer fill" } else { "" }
            );
        }
    }
    0
}

fn rayon_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}
