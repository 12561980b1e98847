//! File > Export…: the app's side of `weft run --export`. The same spec
//! (`FIELDS=FORMAT[:PATH]`, parsed by `runtime::export::ExportSpec`) and
//! the same writers (`runtime::export::Exporter`), so a frame exported here
//! is the file `weft run --export` writes for that frame.
//!
//! Two ways: **Export this frame** writes the frame the viewport shows;
//! **Record while playing** writes every frame that comes back from the
//! simulation thread until **Stop**, which also writes the USD stages (as
//! the end of a headless run does). Field state is read only while the
//! simulation is home (the pass a frame came back in), as every panel does.

use std::path::{Path, PathBuf};
use weft_ir::ir::{Program, View};
use weft_runtime::export::{ExportSpec, Exporter};
use weft_runtime::Simulation;

#[derive(Default)]
pub struct ExportPanel {
    pub open: bool,
    /// `FIELDS=FORMAT[:PATH]` specs, one per line (as `--export` takes them).
    pub specs: String,
    /// Where default paths go (`--out`); relative to the graph's folder.
    /// Empty: the graph's own folder, `default_folder`.
    pub out: String,
    /// `GRAPH.export` for the graph open (`untitled.export` before it is
    /// saved): every graph exports into a folder of its own, so two graphs
    /// in one folder never write over each other's `field.usda`.
    pub default_folder: String,
    /// The last outcome (files written, or the error), shown in the window.
    pub message: Option<Result<String, String>>,
    /// Asked for by a button, done in `after_panels` when the simulation is home.
    export_now: bool,
    recording_requested: bool,
    stop_requested: bool,
    recording: Option<Recording>,
}

struct Recording {
    exporter: Exporter,
    last: i32,
    files: usize,
}

impl ExportPanel {
    pub fn new() -> ExportPanel {
        ExportPanel {
            default_folder: "untitled.export".into(),
            ..Default::default()
        }
    }

    fn parse(&self) -> Result<Vec<ExportSpec>, String> {
        let specs: Vec<ExportSpec> = self
            .specs
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|l| l.parse::<ExportSpec>())
            .collect::<Result<_, _>>()?;
        if specs.is_empty() {
            return Err("no export: write one FIELDS=FORMAT[:PATH] per line, e.g. x,v=ply".into());
        }
        Ok(specs)
    }

    fn exporter(&self, p: &Program, base: &Path, label: &str) -> Result<Exporter, String> {
        let specs = self.parse()?;
        let mut specs = specs;
        // Paths are relative to the graph's folder, as `--out` is to the
        // shell's: the same spec writes the same files from either.
        for s in &mut specs {
            if let Some(path) = &s.path {
                if path.is_relative() {
                    s.path = Some(base.join(path));
                }
            }
        }
        let out = match self.out.trim() {
            "" => self.default_folder.as_str(),
            o => o,
        };
        let mut e = Exporter::new(p, &specs, &base.join(out)).map_err(|e| e.to_string())?;
        e.label = label.to_string();
        Ok(e)
    }

    /// The window (File > Export… opens it). `program`: the running one,
    /// for the list of fields.
    pub fn ui(&mut self, ctx: &egui::Context, program: Option<&Program>) {
        let mut open = self.open;
        // Centred on first show: a window at the top left would cover the
        // menu bar it was opened from.
        egui::Window::new("Export")
            .open(&mut open)
            .pivot(egui::Align2::CENTER_CENTER)
            .default_pos(ctx.content_rect().center())
            .resizable(true)
            .default_width(420.0)
            .show(ctx, |ui| {
                ui.label("One export per line, FIELDS=FORMAT[:PATH], as `weft run --export` takes them:");
                ui.label(
                    egui::RichText::new(
                        "x,v,J=ply  (points: positions, then attributes) · density=vdb · x=usd · density=usd:out/smoke.usda · SURFACE_VIEW=ply (its mesh)",
                    )
                    .weak()
                    .small(),
                );
                ui.add(
                    egui::TextEdit::multiline(&mut self.specs)
                        .id_salt("export_specs")
                        .desired_rows(3)
                        .hint_text("x,v=ply"),
                );
                if let Some(p) = program {
                    let names: Vec<String> = p
                        .fields
                        .iter()
                        .filter(|(h, _)| !p.is_view_field(*h))
                        .map(|(_, f)| format!("{} ({}, {:?})", f.name, f.ty, f.shape))
                        .collect();
                    ui.collapsing("Fields", |ui| {
                        for n in names {
                            ui.label(n);
                        }
                    });
                    // A view's id exports what it shows (`runtime::export`).
                    let views: Vec<String> = p
                        .views
                        .iter()
                        .filter_map(|v| {
                            let what = match v {
                                View::Surface { .. } => "its surface as a mesh: ply, usd",
                                View::Particles { .. } => "its positions: ply, usd",
                                View::Volume { .. } => "its field: vdb, usd",
                                _ => return None,
                            };
                            Some(format!("{} ({})", v.node_id(), what))
                        })
                        .collect();
                    if !views.is_empty() {
                        ui.collapsing("Views", |ui| {
                            for n in views {
                                ui.label(n);
                            }
                        });
                    }
                }
                ui.horizontal(|ui| {
                    ui.label("Folder");
                    ui.add(
                        egui::TextEdit::singleline(&mut self.out)
                            .hint_text(&self.default_folder)
                            .id_salt("export_out"),
                    )
                    .on_hover_text("empty: the graph's own folder, GRAPH.export beside it");
                });
                ui.horizontal(|ui| {
                    if ui.button("Export this frame").clicked() {
                        self.export_now = true;
                    }
                    if self.recording.is_none() {
                        if ui
                            .button("Record while playing")
                            .on_hover_text("writes every frame the simulation runs until Stop")
                            .clicked()
                        {
                            self.recording_requested = true;
                        }
                    } else if ui.button("Stop").clicked() {
                        self.stop_requested = true;
                    }
                });
                if let Some(r) = &self.recording {
                    ui.label(format!("recording: {} files so far", r.files));
                }
                match &self.message {
                    Some(Ok(m)) => {
                        ui.label(m);
                    }
                    Some(Err(m)) => {
                        ui.colored_label(egui::Color32::from_rgb(255, 120, 100), m);
                    }
                    None => {}
                }
            });
        self.open = open;
    }

    /// Another graph takes over: its specs, folder and last message go
    /// (the window stays open). A recording under way is finished with
    /// `sim`, the simulation of the graph leaving, when it is home; the
    /// outcome is returned for the log. Away (running a frame), the
    /// recording stops where its last frame was written, unfinished.
    pub fn forget_graph(&mut self, sim: Option<&Simulation>) -> Option<String> {
        let said = self.recording.take().map(|mut r| match sim {
            Some(sim) => match r.exporter.finish(&sim.program) {
                Ok(f) => format!(
                    "export: the recording of the graph closed ended at frame {} ({} files)",
                    r.last,
                    r.files + f.len()
                ),
                Err(e) => format!("export: the recording of the graph closed did not finish: {}", e),
            },
            None => format!(
                "export: the recording of the graph closed stopped at frame {} ({} files; its index files were not written)",
                r.last, r.files
            ),
        });
        *self = ExportPanel {
            open: self.open,
            ..ExportPanel::new()
        };
        said
    }

    /// After the panels, while the simulation is home: the export asked
    /// for, and a recording's new frame.
    pub fn after_panels(&mut self, sim: Option<&Simulation>, base: &Path, label: &str) {
        let Some(sim) = sim else {
            return;
        };
        if std::mem::take(&mut self.export_now) {
            self.message = Some(self.exporter(&sim.program, base, label).and_then(|mut e| {
                let mut files = e.write_frame(sim).map_err(|e| e.to_string())?;
                files.extend(e.finish(&sim.program).map_err(|e| e.to_string())?);
                Ok(summary("frame", sim.frame, &files))
            }));
        }
        if std::mem::take(&mut self.recording_requested) {
            match self.exporter(&sim.program, base, label) {
                Ok(exporter) => {
                    self.recording = Some(Recording {
                        exporter,
                        last: i32::MIN,
                        files: 0,
                    });
                    self.message = None;
                }
                Err(e) => self.message = Some(Err(e)),
            }
        }
        if let Some(r) = &mut self.recording {
            if r.last != sim.frame && sim.frame > 0 {
                match r.exporter.write_frame(sim) {
                    Ok(f) => {
                        r.last = sim.frame;
                        r.files += f.len();
                    }
                    Err(e) => {
                        self.message = Some(Err(format!("recording stopped: {}", e)));
                        self.recording = None;
                    }
                }
            }
        }
        if std::mem::take(&mut self.stop_requested) {
            if let Some(mut r) = self.recording.take() {
                self.message = Some(match r.exporter.finish(&sim.program) {
                    Ok(f) => Ok(format!(
                        "recorded {} files up to frame {}{}",
                        r.files + f.len(),
                        r.last,
                        if f.is_empty() {
                            String::new()
                        } else {
                            format!(" (and {})", show(&f))
                        }
                    )),
                    Err(e) => Err(e.to_string()),
                });
            }
        }
    }
}

fn show(files: &[PathBuf]) -> String {
    files
        .iter()
        .map(|f| f.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn summary(what: &str, frame: i32, files: &[PathBuf]) -> String {
    format!("{} {}: wrote {}", what, frame, show(files))
}
