//! Edit > Asset library folders…: the folders listed in the library setting
//! (`library.json` in the config folder, `weft_ir::graph::assets`), searched
//! after the user library and before the shipped one. The command line reads
//! the same file, so a graph that finds an asset here finds it headless too.

use weft_ir::graph::assets;

/// The open window: the list being edited and the folder being typed.
pub struct Draft {
    pub folders: Vec<String>,
    pub new_folder: String,
    /// Why the setting could not be read, or a folder that does not exist.
    pub problem: Option<String>,
}

impl Draft {
    /// The setting as saved (an unreadable file opens empty, with its error).
    pub fn open() -> Draft {
        let (folders, problem) = match assets::setting_folders() {
            Ok(f) => (f, None),
            Err(e) => (vec![], Some(e)),
        };
        Draft {
            folders,
            new_folder: String::new(),
            problem,
        }
    }

    /// Adds the typed folder (refused when it is not a folder, or listed).
    pub fn add(&mut self) {
        let f = self.new_folder.trim().to_string();
        if f.is_empty() {
            return;
        }
        if !assets::setting_folder_path(&f).is_dir() {
            self.problem = Some(format!("'{}' is not a folder", f));
            return;
        }
        if self.folders.contains(&f) {
            self.problem = Some(format!("'{}' is listed already", f));
            return;
        }
        self.folders.push(f);
        self.new_folder.clear();
        self.problem = None;
    }
}

/// Shows the window; returns a log line when the setting was saved (or
/// could not be).
pub fn window(ctx: &egui::Context, open: &mut Option<Draft>) -> Option<String> {
    let d = open.as_mut()?;
    let mut close = false;
    let mut out = None;
    egui::Window::new("Asset library folders")
        .collapsible(false)
        .resizable(false)
        .show(ctx, |ui| {
            ui.label(
                "Folders searched for assets (NAME.vN.json) after your user library and before \
                 the shipped one. `weft` on the command line reads the same list.",
            );
            if let Some(f) = assets::setting_file() {
                ui.weak(format!("saved in {}", f.display()));
            }
            let mut remove = None;
            for (k, f) in d.folders.iter().enumerate() {
                ui.horizontal(|ui| {
                    if ui.small_button("Remove").clicked() {
                        remove = Some(k);
                    }
                    let exists = assets::setting_folder_path(f).is_dir();
                    if exists {
                        ui.monospace(f);
                    } else {
                        ui.colored_label(
                            egui::Color32::from_rgb(255, 170, 90),
                            format!("{}  (missing)", f),
                        );
                    }
                });
            }
            if let Some(k) = remove {
                d.folders.remove(k);
            }
            ui.horizontal(|ui| {
                let r = ui.add(
                    egui::TextEdit::singleline(&mut d.new_folder)
                        .hint_text("/path/to/assets")
                        .desired_width(320.0),
                );
                let enter = r.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
                if ui.button("Add").clicked() || enter {
                    d.add();
                }
            });
            if let Some(p) = &d.problem {
                ui.colored_label(egui::Color32::from_rgb(255, 110, 110), p);
            }
            ui.horizontal(|ui| {
                if ui.button("Save").clicked() {
                    out = Some(match assets::save_setting_folders(&d.folders) {
                        Ok(()) => {
                            close = true;
                            format!("asset library folders saved ({})", d.folders.len())
                        }
                        Err(e) => {
                            d.problem = Some(e.clone());
                            format!("asset library folders not saved: {}", e)
                        }
                    });
                }
                if ui.button("Cancel").clicked() {
                    close = true;
                }
            });
        });
    if close {
        *open = None;
    }
    out
}
