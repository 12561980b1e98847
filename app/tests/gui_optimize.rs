//! The loss plot of `optimize` nodes in the app (egui_kittest, rendered with
//! wgpu on lavapipe in CI): it follows the simulation's loss history while
//! stepping and playing, restarts on Reset, shows in the inspector of the
//! selected optimize node, and looks right (snapshot).

use weft_gui::gui;
mod support;
// The field-port tests live in this crate (one fewer compile of the GUI).
#[path = "inspector/field_ports.rs"]
mod field_ports;
// File > Export… likewise.
mod export;
// File > Render… likewise.
mod render_gui;
// File > Open sweep… likewise.
mod sweep_gui;
// The timeline and its frame cache likewise.
mod timeline;
// Group editing likewise.
mod groups;
// The input-latency measurement (ignored by default) likewise.
mod latency;

use egui_kittest::kittest::Queryable;
use egui_kittest::Harness;
use gui::WeftApp;
use std::path::PathBuf;
use support::{gpu_ok, harness_with, play_until, root, settle, wait_for_sim};

fn harness(graph: &str) -> Harness<'static, WeftApp> {
    let cfg = std::env::temp_dir().join(format!("weft-gui-optimize-{}", std::process::id()));
    // Relative to the package folder (cargo's working directory for tests),
    // so the window title, and the snapshot, are the same in every checkout.
    let path = PathBuf::from("../graphs").join(graph);
    assert!(path.exists() && root().join("graphs").join(graph).exists());
    harness_with(Some(path), cfg)
}

/// Every iteration's loss read straight from the simulation's fields
/// (`fit.step` iterations so far, `fit.loss` the ring): the plot's reference.
fn losses_in_the_simulation(h: &Harness<'static, WeftApp>) -> Vec<f32> {
    let sim = h.state().viewport.sim.as_ref().unwrap();
    let step = sim.read_field(sim.field("fit.step").unwrap()).unwrap()[0] as usize;
    let ring = sim.read_field(sim.field("fit.loss").unwrap()).unwrap();
    (0..step)
        .map(|k| f32::from_bits(ring[k % ring.len()]))
        .collect()
}

fn plotted(h: &Harness<'static, WeftApp>) -> Vec<f32> {
    h.state()
        .viewport
        .loss
        .series
        .get("fit")
        .map(|s| s.values.clone())
        .unwrap_or_default()
}

#[test]
fn the_loss_plot_follows_steps_play_and_reset() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat_inverse.json");
    wait_for_sim(&mut h);
    h.run_steps(2);
    assert!(plotted(&h).is_empty(), "nothing ran yet");
    for _ in 0..3 {
        h.get_by_label("Step").click();
        h.run_steps(2);
        settle(&mut h);
    }
    // heat_inverse runs 4 iterations per frame.
    let l = plotted(&h);
    assert_eq!(l.len(), 12);
    assert_eq!(l, losses_in_the_simulation(&h));
    assert!(l.windows(2).all(|w| w[1] < w[0]), "{:?}", l);
    h.get_by_label_contains("fit — loss");
    // Playing keeps it growing; after a pause it has every iteration.
    h.get_by_label("▶ Play").click();
    play_until(&mut h, 5);
    h.get_by_label("⏸ Pause").click();
    h.run_steps(2);
    settle(&mut h);
    let l = plotted(&h);
    assert!(l.len() > 12, "{}", l.len());
    assert_eq!(l, losses_in_the_simulation(&h));
    // Reset starts the plot over.
    h.get_by_label("Reset").click();
    h.run_steps(2);
    assert!(plotted(&h).is_empty());
    h.get_by_label("Step").click();
    h.run_steps(2);
    settle(&mut h);
    assert_eq!(plotted(&h).len(), 4);
    // The inspector of the optimize node shows the plot too.
    h.state_mut().selected = Some("fit".into());
    h.run_steps(2);
    assert_eq!(h.get_all_by_label_contains("fit — loss").count(), 2);
}

#[test]
fn snapshot_of_the_loss_plot() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat_inverse.json");
    wait_for_sim(&mut h);
    for _ in 0..6 {
        h.get_by_label("Step").click();
        h.run_steps(2);
        settle(&mut h);
    }
    h.run_steps(3);
    // Frame-time labels change from run to run; everything else must match.
    let opts = egui_kittest::SnapshotOptions::new().max_failed_pixels(1500);
    h.snapshot_options("loss_plot_heat_inverse", &opts);
}
