//! `weft sweep submit`: a job array on the cluster's own scheduler, one task
//! per variant, each running `weft sweep run SWEEP --index I`.
//!
//! Slurm: `SWEEP/submit.sbatch` (`--array=0-N%K`), submitted with `sbatch`.
//! Kubernetes: `SWEEP/job.yaml`, an Indexed Job (completionMode: Indexed,
//! the index in `$JOB_COMPLETION_INDEX`), written for `kubectl apply -f`.
//! Either way the sweep folder must be on storage every node shares, at the
//! same path, and the weft binary must be at the same path on every node.

use super::manifest::{self, Manifest};
use super::{failure, usage};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::Command;
use weft_runtime::Backend;

#[derive(Args)]
pub struct SubmitArgs {
    /// The sweep folder (holding manifest.json), on a filesystem every node shares.
    pub sweep: PathBuf,
    /// Submit a Slurm job array with sbatch (writes SWEEP/submit.sbatch).
    #[arg(long, required_unless_present = "k8s", conflicts_with = "k8s")]
    pub slurm: bool,
    /// Write a Kubernetes Indexed Job as SWEEP/job.yaml (not submitted: review it, then `kubectl apply -f`).
    #[arg(long)]
    pub k8s: bool,
    /// Slurm partition (e.g. a GPU partition, with --backend wgpu or cuda and --gres).
    #[arg(long)]
    pub partition: Option<String>,
    /// Tasks running at once (Slurm: %K on --array; Kubernetes: parallelism). Default: no limit (Kubernetes: 4).
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_parallel: Option<u32>,
    /// Slurm time limit per task, e.g. 30 or 2:00:00.
    #[arg(long, value_name = "TIME")]
    pub time: Option<String>,
    /// Generic resources per task, e.g. gpu:1 (Slurm --gres; Kubernetes: nvidia.com/gpu limit of the count).
    #[arg(long, value_name = "GRES")]
    pub gres: Option<String>,
    /// CPUs per task (Slurm --cpus-per-task; Kubernetes cpu request); also each variant's --threads.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub cpus: Option<u32>,
    /// Backend of every task: auto, cpu, vm, wgpu or cuda.
    #[arg(long, default_value = "auto", value_parser = super::backend_arg)]
    pub backend: Backend,
    /// The weft binary every node runs (default: this one). It must exist at this path on every node.
    #[arg(long, value_name = "PATH")]
    pub weft: Option<PathBuf>,
    /// Kubernetes: the container image holding weft.
    #[arg(long, default_value = "weft:latest")]
    pub image: String,
    /// Kubernetes: the PersistentVolumeClaim holding the sweep folder, mounted at the sweep's path.
    #[arg(long, value_name = "NAME")]
    pub pvc: Option<String>,
    /// Write the script and print the command instead of submitting.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn submit(a: SubmitArgs) -> i32 {
    let m = match manifest::load(&a.sweep) {
        Ok(m) => m,
        Err(e) => return usage(e),
    };
    let sweep = match std::fs::canonicalize(&a.sweep) {
        Ok(p) => p,
        Err(e) => return usage(format!("cannot open {}: {}", a.sweep.display(), e)),
    };
    let weft = match &a.weft {
        Some(w) => w.clone(),
        None => match std::env::current_exe() {
            Ok(p) => p,
            Err(e) => return failure(format!("cannot find the weft binary: {}", e)),
        },
    };
    if !weft.is_absolute() {
        return usage(format!(
            "--weft {}: give the binary's absolute path (the one every node has)",
            weft.display()
        ));
    }
    for (what, s) in [
        ("--partition", &a.partition),
        ("--time", &a.time),
        ("--gres", &a.gres),
    ] {
        if let Some(s) = s {
            if s.is_empty()
                || s.chars()
                    .any(|c| c.is_whitespace() || "'\"\\$`;&|<>".contains(c))
            {
                return usage(format!("{} '{}': not a plain value", what, s));
            }
        }
    }
    if a.slurm {
        slurm(&a, &m, &sweep, &weft)
    } else {
        k8s(&a, &m, &sweep, &weft)
    }
}

/// Single-quotes a word for sh.
fn sh(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

pub fn sbatch_script(a: &SubmitArgs, m: &Manifest, sweep: &Path, weft: &Path) -> String {
    let last = m.variants.len().saturating_sub(1);
    let mut s = String::from("#!/bin/bash\n");
    s += "# Written by `weft sweep submit --slurm`: one array task per variant.\n";
    s += "#SBATCH --job-name=weft-sweep\n";
    match a.max_parallel {
        Some(k) => s += &format!("#SBATCH --array=0-{}%{}\n", last, k),
        None => s += &format!("#SBATCH --array=0-{}\n", last),
    }
    s += "#SBATCH --ntasks=1\n";
    s += &format!("#SBATCH --output={}/slurm-%A_%a.out\n", sweep.display());
    if let Some(p) = &a.partition {
        s += &format!("#SBATCH --partition={}\n", p);
    }
    if let Some(t) = &a.time {
        s += &format!("#SBATCH --time={}\n", t);
    }
    if let Some(g) = &a.gres {
        s += &format!("#SBATCH --gres={}\n", g);
    }
    if let Some(c) = a.cpus {
        s += &format!("#SBATCH --cpus-per-task={}\n", c);
    }
    s += &format!(
        "exec {} sweep run {} --index \"$SLURM_ARRAY_TASK_ID\" --backend {}{}\n",
        sh(weft),
        sh(sweep),
        a.backend,
        a.cpus
            .map(|c| format!(" --threads {}", c))
            .unwrap_or_default()
    );
    s
}

fn slurm(a: &SubmitArgs, m: &Manifest, sweep: &Path, weft: &Path) -> i32 {
    let script = sweep.join("submit.sbatch");
    if let Err(e) = manifest::write_atomic(&script, sbatch_script(a, m, sweep, weft).as_bytes()) {
        return failure(e);
    }
    println!("wrote {}", script.display());
    if a.dry_run {
        println!("sbatch --parsable {}", sh(&script));
        return 0;
    }
    let out = match Command::new("sbatch")
        .arg("--parsable")
        .arg(&script)
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            return failure(format!(
                "cannot run sbatch: {} (is Slurm installed here? --dry-run writes the script only)",
                e
            ))
        }
    };
    if !out.status.success() {
        return failure(format!(
            "sbatch failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    println!(
        "submitted job array {} ({} tasks); follow it with `weft sweep status {}`",
        id,
        m.variants.len(),
        sweep.display()
    );
    0
}

pub fn job_yaml(a: &SubmitArgs, m: &Manifest, sweep: &Path, weft: &Path) -> String {
    let n = m.variants.len();
    let parallel = a.max_parallel.unwrap_or(4).min(n as u32);
    let q = |s: &str| serde_json::to_string(s).expect("a string serialises");
    let mut cmd = vec![
        weft.display().to_string(),
        "sweep".into(),
        "run".into(),
        sweep.display().to_string(),
        "--backend".into(),
        a.backend.to_string(),
    ];
    if let Some(c) = a.cpus {
        cmd.extend(["--threads".into(), c.to_string()]);
    }
    let mut y = String::new();
    y += "# Written by `weft sweep submit --k8s`: a Kubernetes Indexed Job, one\n";
    y += "# completion per variant; each pod runs `weft sweep run`, which reads its\n";
    y += "# variant from $JOB_COMPLETION_INDEX. Not submitted: review, then\n";
    y += "#   kubectl apply -f job.yaml\n";
    y += "# (backoffLimitPerIndex, one retry per variant, needs Kubernetes 1.29 or later.)\n";
    y += "apiVersion: batch/v1\nkind: Job\nmetadata:\n  generateName: weft-sweep-\nspec:\n";
    y += "  completionMode: Indexed\n";
    y += &format!("  completions: {}\n  parallelism: {}\n", n, parallel);
    y += "  backoffLimitPerIndex: 1\n  template:\n    spec:\n      restartPolicy: Never\n";
    y += "      containers:\n        - name: weft\n";
    y += &format!("          image: {}\n", q(&a.image));
    y += &format!(
        "          command: [{}]\n",
        cmd.iter().map(|c| q(c)).collect::<Vec<_>>().join(", ")
    );
    let mut limits = vec![];
    if let Some(c) = a.cpus {
        limits.push(format!("cpu: \"{}\"", c));
    }
    if let Some(g) = &a.gres {
        let count = g.rsplit(':').next().unwrap_or("1");
        limits.push(format!("nvidia.com/gpu: \"{}\"", count));
    }
    if !limits.is_empty() {
        y += "          resources:\n            limits:\n";
        for l in limits {
            y += &format!("              {}\n", l);
        }
    }
    let claim = a.pvc.clone().unwrap_or_else(|| "weft-sweeps".into());
    y += "          volumeMounts:\n            - name: sweep\n";
    y += &format!(
        "              mountPath: {}\n",
        q(&sweep.display().to_string())
    );
    y += "      volumes:\n        - name: sweep\n          persistentVolumeClaim:\n";
    y += &format!("            claimName: {}\n", q(&claim));
    y
}

fn k8s(a: &SubmitArgs, m: &Manifest, sweep: &Path, weft: &Path) -> i32 {
    let path = sweep.join("job.yaml");
    if let Err(e) = manifest::write_atomic(&path, job_yaml(a, m, sweep, weft).as_bytes()) {
        return failure(e);
    }
    println!("wrote {}", path.display());
    println!(
        "not submitted; after review: kubectl apply -f {}",
        sh(&path)
    );
    0
}
