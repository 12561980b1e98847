//! A node's cook info, like Houdini's node info: for the kernels a graph
//! node runs as, their last and median launch times, how many launches
//! ran since the start, and what the times measure (the engine's
//! `timing_method`: GPU timestamps, CUDA events, or wall time, which a
//! software adapter gets because its timestamps do not measure its work).
//! Read from the simulation after each frame it ran.

use weft_runtime::Simulation;

/// One kernel's cook numbers.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelStat {
    /// The kernel's label: its node, or the nodes fused into it joined by
    /// `+` (`Kernel::label`).
    pub label: String,
    /// Median of the last 30 timed launches (ms).
    pub median_ms: f64,
    /// The last timed launch (ms).
    pub last_ms: f64,
    /// Launches since the start (or the last reset).
    pub launches: u64,
}

/// The cook numbers of a running simulation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CookInfo {
    pub kernels: Vec<KernelStat>,
    /// What the times measure.
    pub timing: &'static str,
}

impl CookInfo {
    pub fn of(sim: &Simulation) -> CookInfo {
        let counts = sim.launch_counts();
        let kernels = sim
            .kernel_times
            .iter()
            .map(|(label, v)| {
                let mut ms: Vec<f64> = v
                    .iter()
                    .rev()
                    .take(30)
                    .map(|d| d.as_secs_f64() * 1e3)
                    .collect();
                let last_ms = ms.first().copied().unwrap_or(0.0);
                ms.sort_by(|a, b| a.total_cmp(b));
                let launches = sim
                    .program
                    .kernels
                    .iter()
                    .enumerate()
                    .filter(|(_, (_, k))| &k.label() == label)
                    .map(|(i, _)| counts.get(i).copied().unwrap_or(0) as u64)
                    .sum();
                KernelStat {
                    label: label.clone(),
                    median_ms: ms.get(ms.len() / 2).copied().unwrap_or(0.0),
                    last_ms,
                    launches,
                }
            })
            .collect();
        CookInfo {
            kernels,
            timing: sim.engine().timing_method(),
        }
    }

    /// Per-kernel median times (ms), for the status line.
    pub fn medians(&self) -> Vec<(String, f64)> {
        self.kernels
            .iter()
            .map(|k| (k.label.clone(), k.median_ms))
            .collect()
    }

    /// The kernels graph node `node` runs as: labelled with it, or with it
    /// among the nodes fused into one kernel (a node inside a group by
    /// its path's last part).
    pub fn of_node(&self, node: &str) -> Vec<&KernelStat> {
        let suffix = format!("/{}", node);
        self.kernels
            .iter()
            .filter(|k| {
                k.label
                    .split('+')
                    .any(|part| part == node || part.ends_with(&suffix))
            })
            .collect()
    }

    /// The inspector's Cook section for `node` (nothing when it runs no
    /// kernel that has been timed).
    pub fn ui_for(&self, ui: &mut egui::Ui, node: &str) {
        let ks = self.of_node(node);
        if ks.is_empty() {
            return;
        }
        ui.separator();
        ui.strong("Cook").on_hover_text(format!(
            "times measured by {}; launches since the start",
            self.timing
        ));
        for k in ks {
            if k.label != node {
                ui.weak(format!("fused into {}", k.label))
                    .on_hover_text("the optimiser runs these nodes as one kernel");
            }
            ui.label(format!(
                "last {:.3} ms, median {:.3} ms, {} launches",
                k.last_ms, k.median_ms, k.launches
            ));
        }
        ui.weak(format!("timed by {}", self.timing));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> CookInfo {
        let k = |label: &str| KernelStat {
            label: label.to_string(),
            median_ms: 1.0,
            last_ms: 1.0,
            launches: 3,
        };
        CookInfo {
            kernels: vec![k("seed"), k("gravity+drag"), k("g1/step")],
            timing: "wall time per launch",
        }
    }

    #[test]
    fn a_node_finds_its_own_fused_and_grouped_kernels() {
        let i = info();
        assert_eq!(i.of_node("seed").len(), 1);
        assert_eq!(i.of_node("drag")[0].label, "gravity+drag");
        assert_eq!(i.of_node("step")[0].label, "g1/step");
        assert!(i.of_node("see").is_empty(), "a prefix is not a match");
        assert!(i.of_node("grav").is_empty());
    }
}
