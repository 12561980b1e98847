//! `weft grad` and `weft gradcheck`: reverse-mode gradients of a loss field
//! through a tape, and their check against central finite differences;
//! `weft grad --forward`: a directional derivative by forward mode.

use crate::cli::{GradArgs, GradTarget, GradcheckArgs};
use crate::fail;
use crate::load::load_program;
use crate::run::overrides;
use weft_ir::graph::GraphError;
use weft_ir::io::npy::{DType, NpyArray};
use weft_ir::ir::{steps, FieldId, Program, Step, TapeMode};
use weft_ir::types::Type;
use weft_runtime::memory::field_to_npy;
use weft_runtime::{RuntimeError, SimOptions, Simulation};

fn usage(message: String) -> RuntimeError {
    RuntimeError::Graph(GraphError::Document { message }.into())
}

/// A field by name that has a gradient field: (field, its gradient).
fn grad_field(p: &Program, name: &str, flag: &str) -> Result<(FieldId, FieldId), RuntimeError> {
    let f = p
        .field_by_name(name)
        .ok_or_else(|| usage(format!("{} {}: no field node '{}'", flag, name, name)))?;
    let g = p.grad_of(f).ok_or_else(|| {
        usage(format!(
            "{} {}: field '{}' has no gradient; set \"grad\": true on it",
            flag, name, name
        ))
    })?;
    Ok((f, g))
}

/// Loads the graph and makes sure one tape with `--loss` covers what runs;
/// with `forward`, every tape is a forward tape seeded at the `wrt` fields.
fn open(
    t: &GradTarget,
    wrt: &[String],
    forward: bool,
) -> Result<(Simulation, FieldId, bool), RuntimeError> {
    let (_, mut program) = load_program(&t.graph, &overrides(&t.overrides))?;
    let (loss, _) = grad_field(&program, &t.loss, "--loss")?;
    for w in wrt {
        grad_field(&program, w, "--wrt")?;
    }
    // The outermost tapes (an optimize node runs tapes of its own loss).
    let mut found: Vec<(String, FieldId)> = Vec::new();
    for list in program.schedule.lists() {
        steps::walk_pruned(list, &mut |st| match st {
            Step::Tape { node_id, loss, .. } => {
                found.push((node_id.clone(), *loss));
                false
            }
            Step::Optimize { node_id, spec, .. } => {
                found.push((node_id.clone(), spec.loss));
                false
            }
            _ => true,
        });
    }
    let own_tape = !found.is_empty();
    if let Some((node, l)) = found.iter().find(|(_, l)| *l != loss) {
        return Err(usage(format!(
            "--loss {}: the graph's tape '{}' uses the loss field '{}'",
            t.loss, node, program.fields[*l].name
        )));
    }
    if !own_tape {
        // One tape around on_start and the frames.
        let sch = std::mem::take(&mut program.schedule);
        let mut body = sch.on_start;
        if t.frames > 0 && !sch.on_frame.is_empty() {
            body.push(Step::Repeat {
                node_id: "frames".into(),
                count: t.frames,
                index: None,
                reverse: false,
                start: 0,
                body: sch.on_frame,
            });
        }
        program.schedule.on_start = vec![Step::Tape {
            node_id: "grad".into(),
            loss,
            checkpoint: 0,
            mode: TapeMode::Reverse,
            body,
        }];
    }
    if forward {
        let seeded: Vec<FieldId> = wrt
            .iter()
            .filter_map(|w| program.field_by_name(w))
            .collect();
        for list in program.schedule.lists_mut() {
            steps::walk_pruned_mut(list, &mut |st| match st {
                Step::Tape { mode, .. } => {
                    *mode = TapeMode::Forward {
                        seeded: seeded.clone(),
                    };
                    false
                }
                // An optimize node's tapes fit parameters: they stay reverse.
                Step::Optimize { .. } => false,
                _ => true,
            });
        }
    }
    let sim = Simulation::new(
        program,
        &SimOptions {
            seed: t.overrides.seed,
            threads: t.overrides.threads,
            backend: t.backend,
            max_memory: t.overrides.max_memory,
            ..Default::default()
        },
    )?;
    Ok((sim, loss, own_tape))
}

/// Runs from the initial state; returns the loss (sum of the loss field).
fn run_once(
    sim: &mut Simulation,
    t: &GradTarget,
    own_tape: bool,
    loss: FieldId,
) -> Result<f64, RuntimeError> {
    sim.start()?;
    if own_tape {
        for _ in 0..t.frames {
            sim.step_frame()?;
        }
    }
    Ok(sim
        .read_field(loss)?
        .iter()
        .map(|&w| f32::from_bits(w) as f64)
        .sum())
}

fn floats(words: &[u32]) -> Vec<f64> {
    words.iter().map(|&w| f32::from_bits(w) as f64).collect()
}

pub fn grad(a: GradArgs) -> i32 {
    match grad_inner(&a) {
        Ok(()) => 0,
        Err(e) => fail(&e),
    }
}

fn grad_inner(a: &GradArgs) -> Result<(), RuntimeError> {
    if a.forward {
        return forward_inner(a);
    }
    let (mut sim, loss, own_tape) = open(&a.target, &a.wrt, false)?;
    let l = run_once(&mut sim, &a.target, own_tape, loss)?;
    println!("loss {} = {:.9e}", a.target.loss, l);
    if let Some(dir) = &a.dump_grads {
        std::fs::create_dir_all(dir)
            .map_err(|e| RuntimeError::Io(format!("cannot create {}: {}", dir.display(), e)))?;
    }
    for w in &a.wrt {
        let (_, g) = grad_field(&sim.program, w, "--wrt")?;
        let words = sim.read_field(g)?;
        let v = floats(&words);
        let sum: f64 = v.iter().sum();
        let abs: f64 = v.iter().map(|x| x.abs()).sum();
        let max = v.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        println!(
            "d {} / d {}: sum {:.9e}  abs_sum {:.9e}  max_abs {:.9e}  ({} components)",
            a.target.loss,
            w,
            sum,
            abs,
            max,
            v.len()
        );
        if let Some(dir) = &a.dump_grads {
            let arr = field_to_npy(&sim.program, g, words);
            let path = dir.join(format!("{}.grad.npy", w));
            crate::run::create_parent(&path)?;
            weft_ir::io::npy::write_npy(&path, &arr)
                .map_err(|e| RuntimeError::Io(format!("cannot write {}: {}", path.display(), e)))?;
        }
    }
    Ok(())
}

pub fn gradcheck(a: GradcheckArgs) -> i32 {
    match gradcheck_inner(&a) {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(e) => fail(&e),
    }
}

fn gradcheck_inner(a: &GradcheckArgs) -> Result<bool, RuntimeError> {
    let t = &a.target;
    let (mut sim, loss, own_tape) = open(t, std::slice::from_ref(&a.wrt), false)?;
    let (f, g) = grad_field(&sim.program, &a.wrt, "--wrt")?;
    let x0 = sim.read_field(f)?;
    let l0 = run_once(&mut sim, t, own_tape, loss)?;
    let ad = floats(&sim.read_field(g)?);
    let n = x0.len();
    let samples = a.samples.clamp(1, n.max(1));
    println!(
        "gradcheck d {} / d {}: loss {:.9e}, {} of {} components, step {} (relative), tolerance {}",
        t.loss, a.wrt, l0, samples, n, a.step, a.tolerance
    );
    let mut worst = 0.0f64;
    for s in 0..samples {
        // Evenly spread, always including the first and the last component.
        let c = if samples == 1 {
            0
        } else {
            s * (n - 1) / (samples - 1)
        };
        let x = f32::from_bits(x0[c]);
        let h = (a.step * (x.abs() as f64).max(1.0)) as f32;
        let mut eval = |v: f32| -> Result<(f64, f64), RuntimeError> {
            sim.reset()?;
            let mut words = x0.clone();
            words[c] = v.to_bits();
            sim.write_field(f, &words)?;
            // The step actually taken in f32.
            Ok((run_once(&mut sim, t, own_tape, loss)?, v as f64))
        };
        let (lp, xp) = eval(x + h)?;
        let (lm, xm) = eval(x - h)?;
        let fd = (lp - lm) / (xp - xm);
        let denom = ad[c].abs().max(fd.abs()).max(a.abs);
        let err = if denom > 0.0 {
            (ad[c] - fd).abs() / denom
        } else {
            0.0
        };
        worst = worst.max(err);
        println!(
            "  [{}] x {:+.6e}  autodiff {:+.6e}  finite diff {:+.6e}  rel err {:.2e}{}",
            c,
            x,
            ad[c],
            fd,
            err,
            if err > a.tolerance { "  FAIL" } else { "" }
        );
    }
    let ok = worst <= a.tolerance;
    println!(
        "{}: largest relative error {:.2e}",
        if ok { "ok" } else { "FAIL" },
        worst
    );
    Ok(ok)
}

// ---- forward mode (`weft grad --forward`) ----

/// The words of `field` from a .npy array shaped like `field_to_npy` writes
/// it (f32; vectors add an axis, matrices two, rows first).
fn npy_to_field(p: &Program, field: FieldId, arr: NpyArray) -> Result<Vec<u32>, String> {
    let f = &p.fields[field];
    let mut want: Vec<usize> = f.shape.iter().map(|&s| s as usize).collect();
    match f.ty {
        Type::Vector(_, n) => want.push(n as usize),
        Type::Matrix(n) => want.extend([n as usize, n as usize]),
        _ => {}
    }
    let Some(arr) = arr.narrowed(DType::F32) else {
        return Err(format!("holds {:?} data; a direction is f32", arr.dtype));
    };
    if arr.shape != want {
        return Err(format!(
            "has shape {:?} but field '{}' ({}) needs {:?}",
            arr.shape, f.name, f.ty, want
        ));
    }
    let mut words = arr.words;
    if let Type::Matrix(n) = f.ty {
        // NumPy stores [row][col]; fields store columns.
        let n = n as usize;
        for cell in words.chunks_mut(n * n) {
            let m = cell.to_vec();
            for r in 0..n {
                for c in 0..n {
                    cell[c * n + r] = m[r * n + c];
                }
            }
        }
    }
    Ok(words)
}

fn forward_inner(a: &GradArgs) -> Result<(), RuntimeError> {
    if a.dir.len() != a.wrt.len() {
        return Err(usage(format!(
            "--forward needs one --dir FILE.npy per --wrt field, in the same order ({} --wrt, {} --dir)",
            a.wrt.len(),
            a.dir.len()
        )));
    }
    let (mut sim, loss, own_tape) = open(&a.target, &a.wrt, true)?;
    for (w, path) in a.wrt.iter().zip(&a.dir) {
        let (f, g) = grad_field(&sim.program, w, "--wrt")?;
        let arr = weft_ir::io::npy::read_npy(path).map_err(|e| usage(format!("--dir {}", e)))?;
        let words = npy_to_field(&sim.program, f, arr)
            .map_err(|e| usage(format!("--dir {}: {}", path.display(), e)))?;
        // The seeded tangent: the tape keeps it at entry.
        sim.write_field(g, &words)?;
    }
    let l = run_once(&mut sim, &a.target, own_tape, loss)?;
    println!("loss {} = {:.9e}", a.target.loss, l);
    let lg = sim.program.grad_of(loss).expect("checked by open");
    let jvp: f64 = floats(&sim.read_field(lg)?).iter().sum();
    println!(
        "d {} / d ({}) . dir = {:.9e}  (forward mode)",
        a.target.loss,
        a.wrt.join(", "),
        jvp
    );
    if let Some(dir) = &a.dump_grads {
        std::fs::create_dir_all(dir)
            .map_err(|e| RuntimeError::Io(format!("cannot create {}: {}", dir.display(), e)))?;
        for (f, g) in sim.program.grads.clone() {
            let words = sim.read_field(g)?;
            let arr = field_to_npy(&sim.program, g, words);
            let path = dir.join(format!("{}.tangent.npy", sim.program.fields[f].name));
            crate::run::create_parent(&path)?;
            weft_ir::io::npy::write_npy(&path, &arr)
                .map_err(|e| RuntimeError::Io(format!("cannot write {}: {}", path.display(), e)))?;
        }
    }
    Ok(())
}
