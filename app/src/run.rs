//! `weft run`, `weft check`, `weft ir`, `weft nodes`.

use crate::cli::{CheckArgs, GraphOverrides, IrArgs, RunArgs};
use crate::fail;
use crate::load::{load_program, Overrides};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::Path;
use weft_ir::graph::catalog;
use weft_ir::graph::document::GraphDoc;
use weft_ir::ir::layout::root_words;
use weft_ir::ir::print_program;
use weft_ir::passes::{run_pipeline, PassOptions, Stage};
use weft_runtime::export::Exporter;
use weft_runtime::memory::field_to_npy;
use weft_runtime::memory_limit::{fmt_bytes, MemoryLimits};
use weft_runtime::snapshot;
use weft_runtime::Backend;
use weft_runtime::{RuntimeError, SimOptions, Simulation};

pub fn overrides(o: &GraphOverrides) -> Overrides {
    Overrides {
        sets: o.sets.clone(),
        inits: o.inits.clone(),
    }
}

/// The simulation options of a command's flags: what `open_program` and
/// `weft render` open the simulation with.
pub fn sim_options(o: &GraphOverrides, backend: Backend, profile: bool) -> SimOptions {
    SimOptions {
        seed: o.seed,
        threads: o.threads,
        backend,
        profile,
        workgroup_size: o.workgroup_size,
        max_memory: o.max_memory,
        passes: PassOptions {
            interkernel: !o.no_interkernel,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Loads the graph file at `path` with the command's overrides and opens
/// it on the chosen backend (`weft_open::file`), saying which was
/// picked. Returns the document as overridden with the simulation.
pub fn open_program(
    path: &Path,
    o: &GraphOverrides,
    backend: Backend,
    quiet: bool,
    profile: bool,
) -> Result<(GraphDoc, Simulation), RuntimeError> {
    let (doc, sim) = weft_open::file(path, &overrides(o), &sim_options(o, backend, profile))?;
    if !quiet {
        match (sim.device_name(), sim.backend()) {
            (Some(d), _) => eprintln!("backend: {} on {}", sim.backend_name(), d),
            (None, Some(b)) if b == Backend::Jit => {
                eprintln!("backend: cpu (native code compiled with Cranelift)")
            }
            (None, _) => eprintln!(
                "backend: {} (the reference VM{})",
                sim.backend_name(),
                if backend == Backend::Auto {
                    "; no hardware GPU adapter found"
                } else {
                    ""
                }
            ),
        }
    }
    Ok((doc, sim))
}

/// Restores the newest complete snapshot in `dir` into `sim`, after
/// checking that it was taken from this graph (`graph::diff`).
fn resume(
    sim: &mut Simulation,
    doc: &GraphDoc,
    dir: &Path,
    checkpoint: Option<&Path>,
) -> Result<(), RuntimeError> {
    if checkpoint == Some(dir) && snapshot::list(dir).is_empty() {
        eprintln!(
            "resume: no snapshot in {} yet: starting from frame 0",
            dir.display()
        );
        return Ok(());
    }
    let (path, frame, skipped) = weft_open::render::resume(sim, doc, dir)?;
    for s in skipped {
        eprintln!("warning: skipped a damaged snapshot: {}", s);
    }
    eprintln!("resumed from {} (frame {})", path.display(), frame);
    Ok(())
}

pub fn run(a: RunArgs) -> i32 {
    match run_inner(&a) {
        Ok(()) => 0,
        Err(e) => fail(&e),
    }
}

fn run_inner(a: &RunArgs) -> Result<(), RuntimeError> {
    let (doc, mut sim) = open_program(&a.graph, &a.overrides, a.backend, false, false)?;
    let graph_json = serde_json::to_value(&doc).expect("a graph document serialises");
    if let Some(dir) = &a.resume {
        resume(&mut sim, &doc, dir, a.checkpoint.as_deref())?;
    }
    for d in &a.dumps {
        if sim.field(d).is_none() {
            let names: Vec<String> = sim
                .program
                .fields
                .iter()
                .map(|(_, f)| f.name.clone())
                .collect();
            return Err(RuntimeError::Graph(
                weft_ir::graph::GraphError::Document {
                    message: format!(
                        "--dump {}: no field node '{}' (fields: {})",
                        d,
                        d,
                        names.join(", ")
                    ),
                }
                .into(),
            ));
        }
    }
    std::fs::create_dir_all(&a.out)
        .map_err(|e| RuntimeError::Io(format!("cannot create {}: {}", a.out.display(), e)))?;
    let mut exporter = Exporter::new(&sim.program, &a.exports, &a.out)?;
    exporter.point_width = a.point_width;
    exporter.vdb_zip = a.vdb_compression == "zip";
    exporter.label = a.graph.display().to_string();
    let bar = if std::io::stderr().is_terminal() {
        let b = ProgressBar::new(a.frames as u64);
        b.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} frames {elapsed} eta {eta}")
                .expect("valid template"),
        );
        Some(b)
    } else {
        None
    };
    sim.start()?;
    let first = sim.frame;
    if let Some(b) = &bar {
        b.set_position(first.max(0) as u64);
    }
    while sim.frame < a.frames as i32 {
        sim.step_frame()?;
        if let Some(dir) = &a.checkpoint {
            if sim.frame % a.every as i32 == 0 || sim.frame == a.frames as i32 {
                snapshot::write(dir, &sim.snapshot()?, &graph_json, a.keep as usize)?;
            }
        }
        if !a.no_frames {
            // The views' kernels draw on the simulation's backend; one
            // read per view brings each picture back for its PNG.
            for (view, img) in sim.render_views()? {
                let path = a.out.join(format!("{}_{:04}.png", view, sim.frame));
                create_parent(&path)?;
                img.write_png(&path).map_err(RuntimeError::Io)?;
            }
        }
        if a.no_frames {
            // A surface's mesh is made by its view's kernels.
            for v in exporter.views_to_draw() {
                sim.draw_view(&v)?;
            }
        }
        exporter.write_frame(&sim)?;
        if let Some(b) = &bar {
            b.inc(1);
        }
    }
    exporter.finish(&sim.program)?;
    sim.sync()?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let mut names: Vec<String> = a.dumps.clone();
    if a.dump_all {
        // Views' image and helper fields are system fields, not the user's.
        names = sim
            .program
            .fields
            .iter()
            .filter(|(h, _)| !sim.program.is_view_field(*h))
            .map(|(_, f)| f.name.clone())
            .collect();
    }
    for n in names {
        let f = sim.field(&n).expect("checked above");
        dump_field(&sim, f, &n, &a.out)?;
    }
    Ok(())
}

/// Largest dense dump (bytes): a field under sparse nodes whose whole
/// domain is bigger is refused by name instead of allocated.
const DENSE_DUMP_BYTES: u64 = 1 << 34;

/// Writes OUT/NAME.npy: the field in logical order (inactive cells at their
/// init value). A field of more than `READ_WHOLE_LIMIT` elements under a
/// `hash` root (2^40, say) is written as its active elements instead:
/// Creates the folders above an output file. A node inside a group is
/// named by its path (`diffusion/T_next`, `smoke/view`), so its dump, PNG
/// frame or gradient goes into the group's folder under the output folder.
pub(crate) fn create_parent(path: &Path) -> Result<(), RuntimeError> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => std::fs::create_dir_all(dir)
            .map_err(|e| RuntimeError::Io(format!("cannot create {}: {}", dir.display(), e))),
        _ => Ok(()),
    }
}

/// OUT/NAME.coords.npy (int32, one row of coordinates each) and
/// OUT/NAME.values.npy (their values, as NAME.npy would hold them).
fn dump_field(
    sim: &Simulation,
    f: weft_ir::ir::FieldId,
    name: &str,
    out: &Path,
) -> Result<(), RuntimeError> {
    use weft_ir::io::npy::{write_npy, DType, NpyArray};
    use weft_runtime::memory::{table_elements, values_to_npy, READ_WHOLE_LIMIT};
    let p = &sim.program;
    let field = &p.fields[f];
    let write = |file: String, arr: &NpyArray| {
        let path = out.join(file);
        create_parent(&path)?;
        write_npy(&path, arr)
            .map_err(|e| RuntimeError::Io(format!("cannot write {}: {}", path.display(), e)))
    };
    if field.cells() > READ_WHOLE_LIMIT {
        let root = sim.read_root(weft_ir::ir::layout::root_of(p, field.layout))?;
        if let Some((coords, values)) = table_elements(p, f, &root) {
            let dims = field.shape.len();
            let n = coords.len() / dims.max(1);
            let coords = NpyArray {
                dtype: DType::I32,
                shape: vec![n, dims],
                words: coords,
            };
            write(format!("{}.coords.npy", name), &coords)?;
            write(
                format!("{}.values.npy", name),
                &values_to_npy(field.ty, vec![n], values),
            )?;
            println!(
                "{}: {} elements under a hash root; wrote its {} active ones as {}.coords.npy and {}.values.npy",
                name,
                field.cells(),
                n,
                name,
                name
            );
            return Ok(());
        }
    }
    let bytes = field
        .cells()
        .saturating_mul(4 * field.ty.components() as u64);
    if bytes > DENSE_DUMP_BYTES {
        return Err(RuntimeError::Run {
            node: name.to_string(),
            message: format!(
                "a dense dump of its {} elements would take {} GiB (more than {} GiB); \
                 dump a smaller field or view it through a window field",
                field.cells(),
                bytes >> 30,
                DENSE_DUMP_BYTES >> 30
            ),
        });
    }
    write(
        format!("{}.npy", name),
        &field_to_npy(p, f, sim.read_field(f)?),
    )
}

pub fn check(a: CheckArgs) -> i32 {
    let mut worst = 0;
    for g in &a.graphs {
        // Warnings do not fail the check: the graph runs, perhaps not as meant.
        // Every backend that needs no device builds every kernel.
        let r = load_program(g, &Overrides::default()).and_then(|(doc, p)| {
            for w in weft_ir::graph::lint::warnings(&doc) {
                eprintln!("{}: {}", g.display(), w);
            }
            let base_dir = g.parent().map(Path::to_path_buf).unwrap_or_default();
            for w in weft_ir::graph::lint::bypassed_warnings(
                &doc,
                &weft_ir::graph::BuildOptions { base_dir },
            ) {
                eprintln!("{}: {}", g.display(), w);
            }
            for w in weft_ir::passes::autodiff::warnings(&p) {
                eprintln!("{}: {}", g.display(), w);
            }
            // The memory report as the reference VM would lay it out, without
            // allocating field memory; the layouts must fit the machine (or
            // --max-memory).
            let built = p.clone();
            let mut p = p;
            let passes = weft_runtime::backend::tune_passes(Backend::Vm, &PassOptions::default());
            run_pipeline(&mut p, &passes, None).map_err(|e| RuntimeError::Compile {
                node: e.kernel.clone(),
                message: e.to_string(),
            })?;
            let limits = MemoryLimits::cpu(a.max_memory);
            limits.check(&p)?;
            // Every backend's own pipeline and code generator, as `weft run`
            // would compile for it (a kernel one backend refuses fails here).
            weft_runtime::backend::check_backends(&built, &PassOptions::default())?;
            let mut lines = weft_ir::ir::layout::memory_lines(&p);
            let total: u64 = p.roots().map(|r| root_words(&p, r) * 4).sum();
            lines.push(format!(
                "memory: {} in all; {}",
                fmt_bytes(total),
                limits.describe()
            ));
            Ok(lines)
        });
        match r {
            Ok(memory) => {
                println!("{}: ok", g.display());
                for m in memory {
                    println!("  {}", m);
                }
            }
            Err(e) => {
                for line in e.to_string().lines() {
                    eprintln!("{}: error: {}", g.display(), line);
                }
                worst = worst.max(e.exit_code());
            }
        }
    }
    worst
}

pub fn ir(a: IrArgs) -> i32 {
    let Some(stage) = Stage::parse(&a.stage) else {
        let names: Vec<&str> = Stage::ALL.iter().map(|s| s.name()).collect();
        eprintln!(
            "error: unknown stage '{}'; stages: {}",
            a.stage,
            names.join(", ")
        );
        return 2;
    };
    let r = load_program(&a.graph, &Overrides::default()).and_then(|(_, mut p)| {
        if let Some(k) = &a.kernel {
            if p.kernel_by_name(k).is_none() {
                return Err(RuntimeError::Graph(
                    weft_ir::graph::GraphError::Document {
                        message: format!("--kernel {}: no kernel node '{}'", k, k),
                    }
                    .into(),
                ));
            }
        }
        let opts = PassOptions {
            validate: true,
            ..Default::default()
        };
        let opts = match a.backend {
            Some(b) => weft_runtime::backend::tune_passes(b, &opts),
            None => opts,
        };
        let compile = |p: &mut weft_ir::ir::Program, opts: &PassOptions| {
            run_pipeline(p, opts, Some(stage)).map_err(|e| RuntimeError::Compile {
                node: e.kernel.clone(),
                message: e.to_string(),
            })
        };
        // `--stage schedule`: the schedule before the inter-kernel
        // optimiser and its state-flow graph, then the schedule after.
        let before = if stage == Stage::Schedule {
            let mut off = p.clone();
            compile(
                &mut off,
                &PassOptions {
                    interkernel: false,
                    ..opts.clone()
                },
            )?;
            Some(off)
        } else {
            None
        };
        compile(&mut p, &opts)?;
        Ok((before, p))
    });
    match r {
        Ok((Some(before), p)) => {
            use weft_ir::schedule::{launches_per_frame, print_schedule, sfg::Sfg};
            print!("{}", print_program(&p, a.kernel.as_deref()));
            println!(
                "; schedule before the inter-kernel optimiser ({} launches per frame)",
                launches_per_frame(&before)
            );
            print!("{}", print_schedule(&before));
            println!("; state-flow graph of on_frame before the optimiser (tN: task N; after: the tasks whose writes it reads)");
            print!(
                "{}",
                Sfg::build(&before, &before.schedule.on_frame).print(&before)
            );
            println!(
                "; schedule after the inter-kernel optimiser ({} launches per frame)",
                launches_per_frame(&p)
            );
            print!("{}", print_schedule(&p));
            0
        }
        Ok((None, p)) => {
            print!("{}", print_program(&p, a.kernel.as_deref()));
            0
        }
        Err(e) => fail(&e),
    }
}

pub fn emit(a: crate::cli::EmitArgs) -> i32 {
    let r = load_program(&a.graph, &Overrides::default()).and_then(|(_, mut p)| {
        if let Some(k) = &a.kernel {
            if p.kernel_by_name(k).is_none() {
                return Err(RuntimeError::Graph(
                    weft_ir::graph::GraphError::Document {
                        message: format!("--kernel {}: no kernel node '{}'", k, k),
                    }
                    .into(),
                ));
            }
        }
        // The code the backend itself compiles, after its pass budgets.
        let backend = match a.format {
            crate::cli::EmitFormat::Cuda => weft_runtime::Backend::Cuda,
            _ => weft_runtime::Backend::Wgpu,
        };
        let opts = weft_runtime::backend::tune_passes(backend, &PassOptions::default());
        run_pipeline(&mut p, &opts, None).map_err(|e| RuntimeError::Compile {
            node: e.kernel.clone(),
            message: e.to_string(),
        })?;
        Ok(p)
    });
    let p = match r {
        Ok(p) => p,
        Err(e) => return fail(&e),
    };
    for (_, k) in p.kernels.iter() {
        // A fused kernel is emitted for each of its nodes.
        if a.kernel.as_ref().is_some_and(|n| !k.has_node(n)) {
            continue;
        }
        if a.format == crate::cli::EmitFormat::Cuda {
            match weft_codegen::cuda::compile_kernel(&p, k) {
                Ok(c) => println!("// kernel '{}'\n{}", k.label(), c.source),
                Err(e) => {
                    return fail(&RuntimeError::Compile {
                        node: e.kernel.clone(),
                        message: e.to_string(),
                    })
                }
            }
            continue;
        }
        let gk = match weft_codegen::wgpu::compile_kernel(&p, k, &Default::default()) {
            Ok(g) => g,
            Err(e) => {
                return fail(&RuntimeError::Compile {
                    node: e.kernel.clone(),
                    message: e.to_string(),
                })
            }
        };
        match a.format {
            crate::cli::EmitFormat::Wgsl => match weft_codegen::wgpu::to_wgsl(&gk) {
                Ok(text) => println!("// kernel '{}'\n{}", k.label(), text),
                Err(e) => {
                    return fail(&RuntimeError::Compile {
                        node: k.name.clone(),
                        message: format!("node '{}': cannot write WGSL: {}", k.name, e),
                    })
                }
            },
            // Printed above, without building the naga module.
            crate::cli::EmitFormat::Cuda => {}
            crate::cli::EmitFormat::Spirv => {
                let words = match weft_codegen::wgpu::to_spirv(&gk) {
                    Ok(w) => w,
                    Err(e) => {
                        return fail(&RuntimeError::Compile {
                            node: k.name.clone(),
                            message: format!("node '{}': cannot write SPIR-V: {}", k.name, e),
                        })
                    }
                };
                let _ = std::fs::create_dir_all(&a.out);
                let path = a.out.join(format!("{}.spv", k.name));
                let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
                if let Err(e) = weft_ir::io::write_atomic(&path, &bytes) {
                    return fail(&RuntimeError::Io(format!(
                        "cannot write {}: {}",
                        path.display(),
                        e
                    )));
                }
                println!("wrote {}", path.display());
            }
        }
    }
    0
}

pub fn nodes() -> i32 {
    for k in catalog::kinds() {
        println!("{} ({}) — {}", k.name, k.family.name(), k.doc);
        for p in k.inputs {
            println!(
                "  in  {}: {}{} — {}",
                p.name,
                p.ty.name(),
                if p.optional { " (optional)" } else { "" },
                p.doc
            );
        }
        if k.dynamic_field_inputs {
            println!("  in  <name>: field — one per field the code indexes");
        }
        for p in k.outputs {
            println!("  out {}: {} — {}", p.name, p.ty.name(), p.doc);
        }
        if k.exec_in {
            println!("  exec in");
        }
        for e in k.exec_outs {
            println!("  exec out {}", e);
        }
        for p in k.params {
            let range = p
                .range
                .map(|(lo, hi)| format!(" [{} to {}]", lo, hi))
                .unwrap_or_default();
            println!(
                "  param {} = {}{} — {}",
                p.name,
                p.default.unwrap_or("(required)"),
                range,
                p.doc
            );
        }
    }
    // Groups are flattened away before the builder (so the catalog has no
    // entry), but a user writes them like any node.
    println!(
        "{} (group) — A sub-graph packed into one node: an inline \"group\" body or an \"asset\": {{\"name\", \"version\"}} of the library; flattened before the graph is built (docs/graph-format.md, Groups)",
        weft_ir::graph::groups::GROUP
    );
    println!("  in  <port>: field, layout or exec — one per entry of the body's \"inputs\"");
    println!("  out <port>: field, layout or exec — one per entry of the body's \"outputs\"");
    println!("  param <promoted> — one per entry of the body's \"params\" (a value for its target inner parameter)");
    0
}
