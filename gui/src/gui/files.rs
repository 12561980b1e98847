//! Choosing files to open and save: the platform's dialog when one can open,
//! else Weft's own (egui-file-dialog), so saving works on a bare X server,
//! in containers and over remote desktops where no desktop portal runs.
//!
//! Every outcome is logged ("saved …", "save cancelled", "no native file
//! dialog; using Weft's own"), and nothing here changes the document: the
//! caller saves or opens once a path comes back, so the unsaved state is
//! never lost on the way.

use super::platform::Instant;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What to do with the chosen path.
#[derive(Clone, Debug, PartialEq)]
pub enum FileAction {
    Open,
    /// A sweep's manifest.json (File > Open sweep…).
    OpenSweep,
    /// Save under the chosen name, then carry on with `then` (e.g. the New or
    /// Open the unsaved-changes prompt interrupted).
    SaveAs {
        then: Option<AfterSave>,
    },
}

/// What was waiting for a save to finish.
#[derive(Clone, Debug, PartialEq)]
pub enum AfterSave {
    New,
    Open {
        path: PathBuf,
        copy: bool,
    },
    /// A sweep variant: the graph with its `--set` values, untitled.
    OpenVariant {
        graph: PathBuf,
        sets: Vec<String>,
        seed: Option<u32>,
    },
    /// File > Quit, Ctrl+Q, or the window's close button.
    Quit,
}

/// A platform dialog that comes back with nothing faster than this never
/// opened (no portal, no display): nobody cancels a dialog in 0.25 s.
const NATIVE_MIN_TIME: Duration = Duration::from_millis(250);

pub struct FileChooser {
    /// Try the platform's dialog first (off in tests, and once it failed).
    native: bool,
    dialog: egui_file_dialog::FileDialog,
    action: Option<FileAction>,
    /// In a browser page: the open waiting for the page's file picker.
    browser_open: Option<FileAction>,
}

impl FileChooser {
    pub fn new(native: bool) -> FileChooser {
        let dialog = egui_file_dialog::FileDialog::new()
            .add_file_filter_extensions("Weft graphs", vec!["json"])
            .default_file_filter("Weft graphs")
            .add_save_extension("Weft graph", "json")
            .default_save_extension("Weft graph")
            .default_size([640.0, 420.0]);
        FileChooser {
            native,
            dialog,
            action: None,
            browser_open: None,
        }
    }

    /// Whether Weft's own dialog is showing.
    pub fn is_open(&self) -> bool {
        self.action.is_some()
    }

    /// Asks for a path for `action`, starting in `dir`. Returns at once when
    /// the platform's dialog answered; otherwise Weft's dialog opens and
    /// `update` returns the answer on a later frame.
    pub fn ask(
        &mut self,
        action: FileAction,
        dir: Option<&Path>,
        name: &str,
        log: &mut Vec<String>,
    ) -> Option<(FileAction, PathBuf)> {
        let dir = dir
            .map(Path::to_path_buf)
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_default();
        if super::platform::IN_BROWSER {
            // The page's own picker for opening (the answer comes to
            // `update` on a later frame); saving downloads the file.
            return match action {
                FileAction::Open | FileAction::OpenSweep => {
                    if super::platform::start_open() {
                        self.browser_open = Some(action);
                    } else {
                        log.push("the page could not open its file picker".into());
                    }
                    None
                }
                FileAction::SaveAs { .. } => {
                    super::platform::save_file(&dir, name).map(|p| (action, ensure_json(p)))
                }
            };
        }
        if self.native {
            let started = Instant::now();
            let picked = match action {
                FileAction::Open => super::platform::pick_file("Weft graph", &dir),
                FileAction::OpenSweep => super::platform::pick_file("Weft sweep manifest", &dir),
                FileAction::SaveAs { .. } => super::platform::save_file(&dir, name),
            };
            match picked {
                Some(p) => return Some((action, p)),
                None if started.elapsed() >= NATIVE_MIN_TIME => {
                    log.push(cancelled(&action).into());
                    return None;
                }
                None => {
                    log.push(
                        "no native file dialog could open (no desktop portal?); using Weft's own"
                            .into(),
                    );
                    self.native = false;
                }
            }
        }
        let config = self.dialog.config_mut();
        config.initial_directory = dir;
        config.default_file_name = name.to_string();
        match action {
            FileAction::Open | FileAction::OpenSweep => self.dialog.pick_file(),
            FileAction::SaveAs { .. } => self.dialog.save_file(),
        }
        self.action = Some(action);
        None
    }

    /// Shows Weft's dialog while it is open; returns the action and path once picked.
    pub fn update(
        &mut self,
        ctx: &egui::Context,
        log: &mut Vec<String>,
    ) -> Option<(FileAction, PathBuf)> {
        if let Some(p) = super::platform::take_opened() {
            if let Some(action) = self.browser_open.take() {
                return Some((action, p));
            }
        }
        if self.browser_open.is_some() {
            // The page's picker answers between passes: look again soon
            // (a paused editor draws nothing otherwise).
            ctx.request_repaint_after(std::time::Duration::from_millis(100));
        }
        self.action.as_ref()?;
        self.dialog.update(ctx);
        if let Some(p) = self.dialog.take_picked() {
            let action = self.action.take()?;
            return Some((action, ensure_json(p)));
        }
        if *self.dialog.state() != egui_file_dialog::DialogState::Open {
            if let Some(a) = self.action.take() {
                log.push(cancelled(&a).into());
            }
        }
        None
    }
}

fn cancelled(a: &FileAction) -> &'static str {
    match a {
        FileAction::Open => "open cancelled",
        FileAction::OpenSweep => "open sweep cancelled",
        FileAction::SaveAs { .. } => "save cancelled; the graph is still unsaved",
    }
}

/// Graph files end in `.json`; a name typed without it gets it.
fn ensure_json(p: PathBuf) -> PathBuf {
    if p.extension().is_some() {
        p
    } else {
        p.with_extension("json")
    }
}
