//! `weft sweep run`: one variant (a job-array task) or all of them here.
//!
//! A variant runs `weft run` (this same binary) as a child process with the
//! variant's `--set` values, its output folder `SWEEP/NNNN/`, and its
//! stdout and stderr in `NNNN/run.log`. Before the child starts,
//! `result.json` says `running`; only after the child succeeded and its
//! metrics were read does it say `done` (each written whole: a temporary
//! file, then a rename). A killed task therefore leaves `running` (shown by
//! `status` as killed once its process is gone), never a result that looks
//! done.
//!
//! Guarantees. A refusal (the graph changed since planning, the variant is
//! running now) touches nothing: it is decided before the folder is
//! cleared. A variant runs at most once at a time: `NNNN/run.lock` is
//! locked (`flock`) for the whole run, by this process and the `weft run`
//! child, which inherits it; the kernel releases the lock when both are
//! gone, so a lock left by a killed process is taken over by the next run.
//! On Linux the child dies with this process (`PR_SET_PDEATHSIG`), so a
//! `kill -9` of a task leaves no orphan simulation running.

use super::manifest::{self, Manifest, Metric, RunResult, Status, Variant};
use super::{failure, usage};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use weft_ir::io::npy::{read_npy, DType};
use weft_runtime::Backend;

#[derive(Args)]
pub struct SweepRunArgs {
    /// The sweep folder (holding manifest.json).
    pub sweep: PathBuf,
    /// The variant to run (default: $SLURM_ARRAY_TASK_ID, else Kubernetes' $JOB_COMPLETION_INDEX).
    #[arg(long, conflicts_with = "local")]
    pub index: Option<usize>,
    /// Run every variant here, skipping those already done (failed and killed ones run again).
    #[arg(long)]
    pub local: bool,
    /// With --local: variants run at once.
    #[arg(short = 'j', long = "jobs", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub jobs: u32,
    /// auto, cpu, vm, wgpu or cuda, as for `weft run`.
    #[arg(long, default_value = "auto", value_parser = super::backend_arg)]
    pub backend: Backend,
    /// CPU worker threads per variant (default: one per core; 1 makes float atomics repeat exactly).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Do not write PNG frames (the contact sheet then has no pictures).
    #[arg(long)]
    pub no_frames: bool,
}

pub fn run(a: SweepRunArgs) -> i32 {
    let m = match manifest::load(&a.sweep) {
        Ok(m) => m,
        Err(e) => return usage(e),
    };
    // Before anything is written or cleared: a refusal touches nothing.
    if let Err(e) = graph_unchanged(&m) {
        return failure(e);
    }
    if a.local {
        return run_local(&a, &m);
    }
    let index = match a.index {
        Some(i) => i,
        None => match task_index() {
            Ok(i) => i,
            Err(e) => return usage(e),
        },
    };
    let Some(v) = m.variants.get(index) else {
        return usage(format!(
            "variant {} does not exist: the sweep has {} (0 to {})",
            index,
            m.variants.len(),
            m.variants.len().saturating_sub(1)
        ));
    };
    match run_variant(&a, &m, v) {
        Ok(r) if r.status == Status::Done => {
            println!(
                "variant {}: done in {:.2} s",
                index,
                r.seconds.unwrap_or(0.0)
            );
            0
        }
        Ok(r) => failure(format!(
            "variant {}: {}",
            index,
            r.error.unwrap_or_else(|| "failed".into())
        )),
        Err(e) => failure(format!("variant {}: {}", index, e)),
    }
}

/// The job-array index the scheduler gave this task.
fn task_index() -> Result<usize, String> {
    for var in ["SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX"] {
        if let Ok(s) = std::env::var(var) {
            return s
                .trim()
                .parse()
                .map_err(|_| format!("${} is '{}', not a variant index", var, s));
        }
    }
    Err(
        "no variant: give --index I or --local (or run as a Slurm array task or an Indexed Job)"
            .into(),
    )
}

fn run_local(a: &SweepRunArgs, m: &Manifest) -> i32 {
    let todo: Vec<&Variant> = m
        .variants
        .iter()
        .filter(|v| {
            !matches!(manifest::read_result(&a.sweep, v),
                Ok(Some(r)) if r.status == Status::Done)
                && running_here(&a.sweep, v).is_none()
                && lock_holder(&a.sweep.join(&v.dir)).is_none()
        })
        .collect();
    let skipped = m.variants.len() - todo.len();
    if skipped > 0 {
        println!(
            "{} of {} variants already done (or running here now)",
            skipped,
            m.variants.len()
        );
    }
    let next = AtomicUsize::new(0);
    let failed = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..(a.jobs as usize).min(todo.len()) {
            s.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::SeqCst);
                let Some(v) = todo.get(k) else { break };
                match run_variant(a, m, v) {
                    Ok(r) if r.status == Status::Done => println!(
                        "variant {} ({}): done in {:.2} s",
                        v.index,
                        v.labels().join(" "),
                        r.seconds.unwrap_or(0.0)
                    ),
                    Ok(r) => {
                        failed.fetch_add(1, Ordering::SeqCst);
                        eprintln!(
                            "variant {} ({}): failed: {}",
                            v.index,
                            v.labels().join(" "),
                            r.error.unwrap_or_default()
                        );
                    }
                    Err(e) => {
                        failed.fetch_add(1, Ordering::SeqCst);
                        eprintln!("variant {}: {}", v.index, e);
                    }
                }
            });
        }
    });
    let failed = failed.into_inner();
    if failed > 0 {
        eprintln!(
            "{} of {} variants failed (see `weft sweep status {}`)",
            failed,
            todo.len(),
            a.sweep.display()
        );
        1
    } else {
        0
    }
}

/// Runs one variant and records what happened. Err only when even the
/// record cannot be written.
pub fn run_variant(a: &SweepRunArgs, m: &Manifest, v: &Variant) -> Result<RunResult, String> {
    let dir = a.sweep.join(&v.dir);
    // Every refusal is decided before the folder is touched.
    if let Some(pid) = running_here(&a.sweep, v) {
        return Err(format!(
            "it is running now (process {} on this machine); not starting it twice",
            pid
        ));
    }
    graph_unchanged(m)?;
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {}", dir.display(), e))?;
    let lock = VariantLock::take(&dir)?;
    // A re-run starts clean: nothing of an earlier attempt may pass for
    // this one's (the lock stays: it is this run's).
    clear_except_lock(&dir)?;
    let mut r = RunResult {
        index: v.index,
        status: Status::Running,
        host: manifest::hostname(),
        pid: std::process::id(),
        started: manifest::now(),
        finished: None,
        seconds: None,
        exit_code: None,
        error: None,
        metrics: vec![],
        loss: None,
    };
    write_result(&dir, &r)?;
    let t0 = std::time::Instant::now();
    let outcome = execute(a, m, v, &dir, &lock);
    r.finished = Some(manifest::now());
    r.seconds = Some(t0.elapsed().as_secs_f64());
    match outcome {
        Ok((metrics, loss)) => {
            r.status = Status::Done;
            r.exit_code = Some(0);
            r.metrics = metrics;
            r.loss = loss;
        }
        Err((code, e)) => {
            r.status = Status::Failed;
            r.exit_code = code;
            r.error = Some(e);
        }
    }
    write_result(&dir, &r)?;
    drop(lock);
    Ok(r)
}

/// The graph file is the one planned (its hash is the manifest's).
fn graph_unchanged(m: &Manifest) -> Result<(), String> {
    let bytes = std::fs::read(&m.graph)
        .map_err(|e| format!("cannot read the graph {}: {}", m.graph.display(), e))?;
    if manifest::fnv1a64(&bytes) != m.graph_hash {
        return Err(format!(
            "{} changed since the sweep was planned (its hash is not {}); plan a new sweep",
            m.graph.display(),
            m.graph_hash
        ));
    }
    Ok(())
}

/// The lock file of a variant's folder (kept when the folder is cleared).
const LOCK: &str = "run.lock";

/// Removes everything in a variant's folder but its lock file.
fn clear_except_lock(dir: &Path) -> Result<(), String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot clear {}: {}", dir.display(), e))?;
    for e in entries {
        let e = e.map_err(|e| format!("cannot clear {}: {}", dir.display(), e))?;
        if e.file_name() == LOCK {
            continue;
        }
        let path = e.path();
        let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
        let r = if is_dir {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        r.map_err(|e| format!("cannot clear {}: {}", path.display(), e))?;
    }
    Ok(())
}

/// An exclusive `flock` on `NNNN/run.lock`, held while the variant runs
/// (released when dropped, or by the kernel when its holders die).
struct VariantLock {
    file: std::fs::File,
}

impl VariantLock {
    /// Takes the lock of the variant folder `dir`, or says which process
    /// holds it. A lock whose process died is free again and taken over.
    fn take(dir: &Path) -> Result<VariantLock, String> {
        use std::io::{Seek, Write};
        let path = dir.join(LOCK);
        let mut file = weft_ir::io::open_in_place(&path)
            .map_err(|e| format!("cannot open {}: {}", path.display(), e))?;
        if !try_lock(&file) {
            let holder = std::fs::read_to_string(&path).unwrap_or_default();
            return Err(format!(
                "it is running now (process {} holds {}); not starting it twice",
                holder.trim(),
                path.display()
            ));
        }
        // Who holds it, for the message above (the lock itself is the flock).
        let _ = file.set_len(0);
        let _ = file.rewind();
        let _ = write!(file, "{}@{}", std::process::id(), manifest::hostname());
        Ok(VariantLock { file })
    }
}

/// Who holds the lock of variant folder `dir` now, if anyone does.
fn lock_holder(dir: &Path) -> Option<String> {
    let path = dir.join(LOCK);
    let file = std::fs::File::open(&path).ok()?;
    if try_lock(&file) {
        // Free: let go at once (closing the file releases it).
        return None;
    }
    Some(std::fs::read_to_string(&path).unwrap_or_default())
}

/// A non-blocking exclusive flock; true when taken.
#[cfg(unix)]
fn try_lock(file: &std::fs::File) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor this File owns; no memory is shared.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

/// Elsewhere the lock is not enforced (the result.json check remains).
#[cfg(not(unix))]
fn try_lock(_file: &std::fs::File) -> bool {
    true
}

/// Makes the `weft run` child hold the variant's lock too (it inherits the
/// locked descriptor), and on Linux die with this process.
#[cfg(unix)]
fn tie_to_parent(cmd: &mut Command, lock: &VariantLock) {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let fd = lock.file.as_raw_fd();
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: between fork and exec only async-signal-safe calls (fcntl,
    // prctl, getppid) on plain integers.
    unsafe {
        cmd.pre_exec(move || {
            // Keep the locked descriptor open across exec: the lock is
            // held until the child is gone as well.
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags < 0 || libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            #[cfg(target_os = "linux")]
            {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent died before prctl took effect: no signal comes.
                if libc::getppid() != parent {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
            }
            let _ = parent;
            Ok(())
        });
    }
}

#[cfg(not(unix))]
fn tie_to_parent(_cmd: &mut Command, _lock: &VariantLock) {}

/// The process running variant `v` on this machine now, if one is.
fn running_here(sweep: &Path, v: &Variant) -> Option<u32> {
    let r = manifest::read_result(sweep, v).ok()??;
    (r.status == Status::Running
        && r.host == manifest::hostname()
        && r.pid != std::process::id()
        && Path::new(&format!("/proc/{}", r.pid)).exists())
    .then_some(r.pid)
}

fn write_result(dir: &Path, r: &RunResult) -> Result<(), String> {
    let text = serde_json::to_string_pretty(r).expect("a result serialises");
    manifest::write_atomic(&dir.join(manifest::RESULT), text.as_bytes())
}

type Outcome = Result<(Vec<Metric>, Option<f64>), (Option<i32>, String)>;

fn execute(a: &SweepRunArgs, m: &Manifest, v: &Variant, dir: &Path, lock: &VariantLock) -> Outcome {
    let plain = |e: String| (None, e);
    let exe = std::env::current_exe()
        .map_err(|e| plain(format!("cannot find the weft binary: {}", e)))?;
    let mut cmd = Command::new(exe);
    cmd.arg("run")
        .arg(&m.graph)
        .arg("--frames")
        .arg(m.frames.to_string())
        .arg("--backend")
        .arg(a.backend.to_string())
        .arg("--out")
        .arg(dir);
    for s in &v.sets {
        cmd.arg("--set").arg(s);
    }
    if let Some(seed) = v.seed {
        cmd.arg("--seed").arg(seed.to_string());
    }
    for d in &m.dumps {
        cmd.arg("--dump").arg(d);
    }
    if let Some(t) = a.threads {
        cmd.arg("--threads").arg(t.to_string());
    }
    if a.no_frames {
        cmd.arg("--no-frames");
    }
    let log_path = dir.join("run.log");
    // Written in place while the child runs, so `tail -f NNNN/run.log`
    // follows a farm job live and a crash leaves what was printed; a link
    // planted at run.log is replaced first, never written through.
    let log = weft_ir::io::open_in_place(&log_path)
        .and_then(|f| f.set_len(0).map(|_| f))
        .map_err(|e| plain(format!("cannot write {}: {}", log_path.display(), e)))?;
    tie_to_parent(&mut cmd, lock);
    let clone = || {
        log.try_clone()
            .map_err(|e| plain(format!("cannot write {}: {}", log_path.display(), e)))
    };
    let status = cmd
        .stdin(Stdio::null())
        .stdout(clone()?)
        .stderr(clone()?)
        .status()
        .map_err(|e| plain(format!("cannot start weft run: {}", e)))?;
    drop(log);
    if !status.success() {
        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
        let errors: Vec<&str> = text.lines().filter(|l| l.starts_with("error:")).collect();
        let message = if errors.is_empty() {
            match status.code() {
                Some(c) => format!("weft run exited with {} (see {})", c, log_path.display()),
                None => format!(
                    "weft run was killed by a signal (see {})",
                    log_path.display()
                ),
            }
        } else {
            errors.join("\n")
        };
        return Err((status.code(), message));
    }
    let mut metrics = Vec::new();
    for f in &m.metrics {
        metrics.push(field_metric(dir, f).map_err(plain)?);
    }
    let loss = match &m.loss {
        Some(f) => Some(field_metric(dir, f).map_err(plain)?.sum),
        None => None,
    };
    Ok((metrics, loss))
}

/// Sum, max and mean over every component of the dumped FIELD.npy.
pub fn field_metric(dir: &Path, field: &str) -> Result<Metric, String> {
    let a = read_npy(&dir.join(format!("{}.npy", field)))?;
    let values = a.words.chunks(a.dtype.words()).map(|w| {
        let wide = || w[0] as u64 | (w[w.len() - 1] as u64) << 32;
        match a.dtype {
            DType::F32 => f32::from_bits(w[0]) as f64,
            DType::I32 => w[0] as i32 as f64,
            DType::U32 => w[0] as f64,
            DType::F64 => f64::from_bits(wide()),
            DType::I64 => wide() as i64 as f64,
            DType::U64 => wide() as f64,
        }
    });
    let (mut sum, mut max, mut n) = (0.0f64, f64::NEG_INFINITY, 0usize);
    for x in values {
        sum += x;
        max = max.max(x);
        n += 1;
    }
    if n == 0 {
        return Err(format!("field '{}' has no elements", field));
    }
    Ok(Metric {
        field: field.to_string(),
        sum,
        max,
        mean: sum / n as f64,
    })
}
