//! The editor: node editor, inspector, live viewport, problems and log, in
//! the desktop app's window and in the web page (what differs between the
//! two is in `platform`).
//!
//! The document changes only through `model::Command`s, applied once per
//! frame at the start of `ui`; the node editor is rebuilt from the document
//! whenever its revision changes.

pub mod asset_menu;
pub mod asset_save;
pub mod asset_update;
pub mod backend_menu;
pub mod backup;
pub mod bake;
pub mod breadcrumb;
pub mod code_editor;
pub mod drop_files;
pub mod export_panel;
pub mod expr_view;
pub mod files;
pub mod frame_cache;
pub mod frames;
pub mod graph_nav;
pub mod graph_view;
pub mod group_edit;
pub mod group_pins;
pub mod group_ui;
pub mod library_folders;
pub mod loss_plot;
pub mod memory_readout;
pub mod model;
pub mod node_info;
pub mod orbit;
pub mod params;
pub mod platform;
pub mod prefs;
pub mod presets;
pub mod quant_readout;
pub mod recovery;
pub mod render_panel;
pub mod sim_worker;
pub mod spreadsheet;
pub mod sweep_panel;
pub mod timeline;
pub mod view_ports;
pub mod viewer_flag;
pub mod viewport;
pub mod window_layout;

use graph_view::{sync_snarl, GraphViewer, NodeView};
use model::{Command, Model};
use std::path::{Path, PathBuf};
use viewport::Viewport;
use weft_ir::graph::expr_body::ExprBody;
use weft_runtime::Backend;

/// Options of `weft gui`.
#[derive(Clone, Debug, Default)]
pub struct GuiOptions {
    /// The process's exit status when the window closes: 1 when
    /// `--screenshot` found the simulation stopped (the message is on
    /// stderr, the picture written all the same), else 0.
    pub exit_status: std::sync::Arc<std::sync::atomic::AtomicI32>,
    pub graph: Option<PathBuf>,
    /// Write a screenshot of the whole window here after `after_frames` simulation frames, then exit.
    pub screenshot: Option<PathBuf>,
    pub after_frames: u32,
    /// Where recent files and the recovery file live; `None` means
    /// `$WEFT_CONFIG_DIR`, else `~/.cache/weft`.
    pub config_dir: Option<PathBuf>,
    /// Try the platform's file dialogs before Weft's own (off in tests, so a
    /// test never blocks on a desktop dialog).
    pub native_file_dialogs: bool,
    /// Where file dialogs start for an untitled graph (default: the current folder).
    pub documents_dir: Option<PathBuf>,
    /// The backend to start on (`weft gui --backend`); `None`: the one
    /// last chosen in the toolbar when this machine offers it, else auto.
    pub backend: Option<Backend>,
}

use files::AfterSave as Pending;

/// How many frames a newly opened graph is framed (see `WeftApp::fit_frames`).
const FIT_FRAMES: u8 = 4;

/// A change of the node editor's view, applied on the next frame.
#[derive(Clone, Debug, PartialEq)]
pub enum NavRequest {
    FrameAll,
    FrameSelected,
}

/// The editor window. Its state is grouped by job: the document
/// (`model`), the node editor's canvas, the code and expression bodies
/// open, the dialogs waiting on the user, the window's session, the status
/// line, the viewport and the panels around it.
pub struct WeftApp {
    pub model: Model,
    pub viewport: Viewport,
    pub selected: Option<String>,
    /// The status line under the editor: what just happened.
    pub status: String,
    pub canvas: Canvas,
    pub bodies: Bodies,
    pub dialogs: Dialogs,
    pub session: Session,
    status_line: StatusLine,
    opts: GuiOptions,
    /// The field spreadsheet (bottom panel, Alt+S).
    pub sheet: spreadsheet::Spreadsheet,
    /// The field node shown in the viewport by its viewer flag (V).
    pub viewer: viewer_flag::ViewerFlag,
    /// On-demand f32 twin runs of quantized fields (the inspector's Storage section).
    pub twins: quant_readout::Twins,
    /// Layout trees' memory and pools in use, read live.
    pub memory: memory_readout::MemoryReadout,
    /// File > Export…: PLY, VDB and USD files of the running simulation.
    pub export: export_panel::ExportPanel,
    /// File > Open sweep…: a collected sweep's contact sheet.
    pub sweep: sweep_panel::SweepPanel,
    /// File > Render…: one view over a frame range as a movie or PNGs.
    pub render: render_panel::RenderPanel,
    /// The timeline under the main area (frame slider, play range, cache strip).
    pub timeline: timeline::Timeline,
    /// The window's areas: the viewport's split and maximise, where each was drawn.
    pub layout: window_layout::WindowLayout,
}

/// The node editor's canvas: the nodes as egui-snarl shows them, where
/// they are on screen, frames, and how the view is navigated.
pub struct Canvas {
    snarl: egui_snarl::Snarl<NodeView>,
    snarl_revision: u64,
    /// Graph space → screen in the node editor, as last drawn.
    pub graph_to_screen: egui::emath::TSTransform,
    /// Node frames in graph space, as last laid out (frames use them to know
    /// what they enclose; tests use them to point at nodes).
    pub node_rects: std::collections::HashMap<String, egui::Rect>,
    /// Frames: the one being dragged and the one in the inspector.
    pub frames: frames::FramesState,
    /// Where Shift+A / Tab opened the add-node menu (screen position).
    pub add_menu: Option<egui::Pos2>,
    /// The node editor's area on screen.
    pub graph_rect: egui::Rect,
    /// Bumped when another document replaces this one, so the node editor's
    /// state (view, selection) starts fresh for it.
    document_epoch: u64,
    /// Frame all / frame selected, waiting for the next frame.
    pub nav: Option<NavRequest>,
    /// Frames left in which a newly opened document is framed again: nodes
    /// grow to their content over their first frames, so the fit follows.
    fit_frames: u8,
    /// The add-node menu's search text.
    search: String,
}

/// The code and expression bodies open for editing.
pub struct Bodies {
    pub open_code: Option<String>,
    /// The code being typed (node id, text): committed to the model after a pause.
    code_buffer: Option<(String, String)>,
    debounce: code_editor::Debounce,
    /// The expression kernel whose body is open, with its editor's snarl and the revision it shows.
    pub open_expr: Option<(String, egui_snarl::Snarl<expr_view::ExprNodeView>, u64)>,
    /// The open expression's node rects as last drawn (graph space).
    pub expr_rects: std::collections::HashMap<String, egui::Rect>,
}

/// Dialogs and prompts waiting on the user.
pub struct Dialogs {
    /// The open "Save selection as asset" dialog.
    pub asset_save: Option<asset_save::Draft>,
    /// The open "Asset library folders" window.
    pub library_folders: Option<library_folders::Draft>,
    /// The inspector's preset name box.
    pub preset_name: String,
    confirm: Option<Pending>,
    files: files::FileChooser,
    /// The unsaved-changes prompt's Save, carried out on the next frame.
    save_after_prompt: Option<Pending>,
    /// Unsaved work of earlier sessions, offered at start (`recovery`).
    pub recovery_offers: Vec<recovery::Offer>,
}

/// The window's session: preferences, recent files, the recovery
/// autosave, the title, quitting and screenshots.
pub struct Session {
    /// Panel sizes, remembered between sessions.
    prefs: prefs::Prefs,
    /// Quit was confirmed (the window's close then goes through).
    pub quitting: bool,
    /// A window command for the next update (Quit's close).
    ctx_command: Option<egui::ViewportCommand>,
    /// The window title last set (`window_title`).
    title: String,
    /// This session's recovery file (`recovery::session_file`).
    recovery_file: PathBuf,
    last_autosave: f64,
    recent: Vec<PathBuf>,
    screenshot_requested: bool,
}

/// What the status line knows beside its text.
struct StatusLine {
    /// The status text as of the revision it was last seen at: a message
    /// older than the document's latest change is cleared.
    status_seen: String,
    status_revision: u64,
    /// A refused wire's reason, shown at the pointer until this time.
    refusal_until: f64,
    /// Display frame times (s) for the frame-rate readout.
    frame_times: std::collections::VecDeque<f64>,
}

/// The backend the toolbar last chose (`Prefs::backend`), when the
/// chooser offers it on this machine now (a GPU backend on a machine
/// without that GPU any more starts on auto instead).
fn remembered_backend(prefs: &prefs::Prefs, viewport: &Viewport) -> Option<Backend> {
    let b = Backend::parse(prefs.backend.as_deref()?)?;
    let window_gpu = if viewport.has_gpu() {
        Ok(())
    } else {
        Err(None)
    };
    backend_menu::choices(window_gpu)
        .iter()
        .any(|c| c.backend == b && c.disabled.is_none())
        .then_some(b)
}

/// Seconds between autosaves of unsaved changes into the recovery file.
const AUTOSAVE_EVERY_S: f64 = 15.0;

fn default_config_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("WEFT_CONFIG_DIR") {
        return PathBuf::from(d);
    }
    std::env::var_os("HOME")
        .map(|h| PathBuf::from(h).join(".cache").join("weft"))
        .unwrap_or_else(|| platform::temp_dir().join("weft"))
}

fn examples_dir() -> Option<PathBuf> {
    if platform::IN_BROWSER {
        // Where the web build provides the shipped examples.
        return Some(PathBuf::from("/weft/graphs"));
    }
    let here = PathBuf::from("graphs");
    if here.is_dir() {
        return Some(here);
    }
    let built = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()?
        .join("graphs");
    built.is_dir().then_some(built)
}

impl WeftApp {
    pub fn new(render_state: Option<&eframe::egui_wgpu::RenderState>, opts: GuiOptions) -> WeftApp {
        Self::with_viewport(Viewport::new(render_state), opts)
    }

    /// The editor with `viewport` (`Viewport::with_own_gpu` in a browser page).
    pub fn with_viewport(mut viewport: Viewport, opts: GuiOptions) -> WeftApp {
        let mut model = match &opts.graph {
            Some(p) => Model::open(p),
            None => Model::new(model::empty_doc(), None),
        };
        let config = opts.config_dir.clone().unwrap_or_else(default_config_dir);
        let recent = std::fs::read_to_string(config.join("recent.txt"))
            .map(|t| t.lines().map(PathBuf::from).collect())
            .unwrap_or_default();
        let recovery_file = recovery::session_file(&config);
        let (recovery_offers, unreadable) = if opts.screenshot.is_none() {
            recovery::offers(&config)
        } else {
            Default::default()
        };
        model.log.extend(unreadable);
        if opts.graph.is_some() && opts.screenshot.is_some() {
            viewport.playing = true;
        }
        let mut snarl = egui_snarl::Snarl::new();
        sync_snarl(&mut snarl, &model);
        let prefs = prefs::Prefs::load(&config);
        if let Some(b) = opts
            .backend
            .or_else(|| remembered_backend(&prefs, &viewport))
        {
            viewport.backend = b;
        }
        viewport.cache.budget = prefs.frame_cache_mb as usize * 1024 * 1024;
        viewport.cache.spill = prefs.spill_frames;
        WeftApp {
            canvas: Canvas {
                snarl,
                snarl_revision: model.revision,
                document_epoch: 0,
                add_menu: None,
                frames: Default::default(),
                graph_rect: egui::Rect::NOTHING,
                graph_to_screen: Default::default(),
                node_rects: Default::default(),
                nav: None,
                fit_frames: FIT_FRAMES,
                search: String::new(),
            },
            bodies: Bodies {
                open_code: None,
                code_buffer: None,
                debounce: code_editor::Debounce::new(std::time::Duration::from_millis(400)),
                open_expr: None,
                expr_rects: Default::default(),
            },
            dialogs: Dialogs {
                asset_save: None,
                library_folders: None,
                preset_name: String::new(),
                confirm: None,
                files: files::FileChooser::new(opts.native_file_dialogs),
                save_after_prompt: None,
                recovery_offers,
            },
            session: Session {
                prefs,
                quitting: false,
                ctx_command: None,
                title: String::new(),
                recovery_file,
                last_autosave: 0.0,
                recent,
                screenshot_requested: false,
            },
            status_line: StatusLine {
                status_seen: String::new(),
                status_revision: 0,
                refusal_until: 0.0,
                frame_times: Default::default(),
            },
            model,
            viewport,
            selected: None,
            opts,
            status: String::new(),
            sheet: Default::default(),
            viewer: Default::default(),
            twins: Default::default(),
            memory: Default::default(),
            export: export_panel::ExportPanel::new(),
            render: Default::default(),
            sweep: sweep_panel::SweepPanel::new(),
            timeline: Default::default(),
            layout: Default::default(),
        }
    }

    fn config_dir(&self) -> PathBuf {
        self.opts
            .config_dir
            .clone()
            .unwrap_or_else(default_config_dir)
    }

    /// This session's recovery file (written while the graph has unsaved changes).
    pub fn recovery_path(&self) -> PathBuf {
        self.session.recovery_file.clone()
    }

    fn base_dir(&self) -> Option<PathBuf> {
        self.model.base_dir()
    }

    fn open_now(&mut self, path: &Path, copy: bool) {
        if copy {
            // Examples open as untitled copies: Ctrl+S asks for a new name.
            self.replace_model(Model::open_copy(path));
        } else {
            self.replace_model(Model::open(path));
            self.remember(path);
        }
        self.status = format!("opened {}", self.model.title());
    }

    /// Another document takes over the editor (new, open, recover).
    fn replace_model(&mut self, model: Model) {
        // The document leaving was saved or its changes discarded: its
        // recovery file goes with it.
        let _ = std::fs::remove_file(&self.session.recovery_file);
        let mut model = model;
        // The user library chosen for this editor stays with it.
        if model.assets.user != self.model.assets.user {
            model
                .assets
                .set_user_library(self.model.assets.user.clone());
            model.validate();
        }
        self.model = model;
        // What the timeline and File > Export show belongs to the graph
        // leaving: its bake stops (the frames written so far stay) and its
        // export specs go; a recording under way is finished first.
        self.timeline.forget_graph();
        self.render.forget_graph();
        if let Some(m) = self.export.forget_graph(self.viewport.sim.as_ref()) {
            self.model.log.push(m);
        }
        self.selected = None;
        self.bodies.open_code = None;
        self.bodies.open_expr = None;
        self.canvas.frames = Default::default();
        // The viewport follows (epoch, revision): a new document at revision
        // 0 must not look like the one the viewport last built.
        self.viewport.clear();
        self.canvas.fit_frames = FIT_FRAMES;
        self.canvas.nav = None;
        self.status.clear();
        self.canvas.snarl = egui_snarl::Snarl::new();
        sync_snarl(&mut self.canvas.snarl, &self.model);
        self.canvas.snarl_revision = self.model.revision;
        self.canvas.document_epoch += 1;
    }

    /// The node editor's egui id (its view and selection live under it).
    pub fn graph_id(&self) -> egui::Id {
        egui::Id::new(("weft-graph", self.canvas.document_epoch))
    }

    /// Selected nodes: those box- or shift-selected in the editor, and the
    /// one whose title was clicked last, in document order.
    pub fn selection(&self, ctx: &egui::Context) -> Vec<String> {
        let picked: Vec<&str> = egui_snarl::ui::get_selected_nodes(self.graph_id(), ctx)
            .into_iter()
            .filter_map(|nid| self.canvas.snarl.get_node(nid))
            .map(|v| v.id.as_str())
            .collect();
        self.model
            .doc
            .nodes
            .iter()
            .filter(|n| picked.contains(&n.id.as_str()) || self.selected.as_deref() == Some(&n.id))
            .map(|n| n.id.clone())
            .collect()
    }

    fn remember(&mut self, path: &Path) {
        let p = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        self.session.recent.retain(|r| r != &p);
        self.session.recent.insert(0, p);
        self.session.recent.truncate(10);
        let _ = std::fs::create_dir_all(self.config_dir());
        let text: Vec<String> = self
            .session
            .recent
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        let _ = platform::write_file(
            &self.config_dir().join("recent.txt"),
            text.join("\n").as_bytes(),
        );
    }

    fn request(&mut self, p: Pending) {
        if self.model.dirty {
            self.dialogs.confirm = Some(p);
        } else {
            self.do_pending(p);
        }
    }

    fn do_pending(&mut self, p: Pending) {
        match p {
            Pending::New => {
                self.replace_model(Model::new(model::empty_doc(), None));
                self.status = "new graph".into();
            }
            Pending::Open { path, copy } => self.open_now(&path, copy),
            Pending::OpenVariant { graph, sets, seed } => self.open_variant(&graph, &sets, seed),
            Pending::Quit => {
                // Saved or discarded: nothing is left to recover.
                let _ = std::fs::remove_file(&self.session.recovery_file);
                self.session.quitting = true;
                self.session.ctx_command = Some(egui::ViewportCommand::Close);
            }
        }
    }

    /// Saves to the document's file, or asks for one (Save As, untitled
    /// graphs); then carries on with `then`. Asking may finish on a later
    /// frame (Weft's own dialog); the graph stays unsaved until it is written.
    /// File > Open… (in a browser page: the page's file picker).
    pub fn open_file(&mut self) {
        self.open_dialog();
    }

    /// File > Save As… (in a browser page: downloads the graph).
    pub fn save_as(&mut self) {
        self.save(true, None);
    }

    fn save(&mut self, save_as: bool, then: Option<Pending>) {
        match (&self.model.path, save_as) {
            (Some(p), false) => {
                let p = p.clone();
                self.write_to(&p, then);
            }
            _ => {
                let dir = self.dialog_dir();
                let name = self.model.suggested_file_name();
                self.status = "choose where to save…".into();
                if let Some((action, path)) = self.dialogs.files.ask(
                    files::FileAction::SaveAs { then },
                    dir.as_deref(),
                    &name,
                    &mut self.model.log,
                ) {
                    self.file_chosen(action, path);
                }
            }
        }
    }

    fn write_to(&mut self, p: &Path, then: Option<Pending>) {
        // The version on disk goes to backup/ first (a page downloads instead).
        let backup = if platform::IN_BROWSER {
            None
        } else {
            match backup::before_overwrite(p, self.session.prefs.backups_on_save) {
                Ok(b) => b,
                Err(e) => {
                    self.model.log.push(format!("{} (saving anyway)", e));
                    None
                }
            }
        };
        match self.model.save_as(p) {
            Ok(()) => {
                let _ = std::fs::remove_file(self.recovery_path());
                self.model.origin = None;
                self.remember(p);
                self.status = match &backup {
                    Some(b) => format!(
                        "saved {} (the version it replaced is {})",
                        p.display(),
                        b.display()
                    ),
                    None => format!("saved {}", p.display()),
                };
                if let Some(next) = then {
                    self.do_pending(next);
                }
            }
            Err(e) => {
                self.status = e.clone();
                self.model.log.push(e);
            }
        }
    }

    /// A path came back from a file dialog.
    fn file_chosen(&mut self, action: files::FileAction, path: PathBuf) {
        match action {
            files::FileAction::Open => self.request(Pending::Open { path, copy: false }),
            files::FileAction::OpenSweep => self.sweep.load(&path),
            files::FileAction::SaveAs { then } => self.write_to(&path, then),
        }
    }

    /// Where a file dialog starts: beside the graph, else the documents folder.
    fn dialog_dir(&self) -> Option<PathBuf> {
        self.model
            .path
            .as_ref()
            .and_then(|p| p.parent())
            .map(Path::to_path_buf)
            .or_else(|| self.opts.documents_dir.clone())
    }

    /// A sweep variant: the sweep's graph as an untitled copy with the
    /// variant's `--set` values (and seed) applied, as `weft run` applies them.
    fn open_variant(&mut self, graph: &Path, sets: &[String], seed: Option<u32>) {
        let mut m = model::Model::open_copy(graph);
        if m.origin.is_none() {
            self.status = format!("could not open {}", graph.display());
            self.model.log.push(self.status.clone());
            return;
        }
        let o = weft_ir::graph::overrides::Overrides {
            sets: sets.to_vec(),
            inits: vec![],
        };
        if let Err(e) = weft_ir::graph::overrides::apply_overrides(&mut m.doc, &o) {
            self.status = format!("cannot set the variant's values: {}", e);
            self.model.log.push(self.status.clone());
            return;
        }
        if let Some(s) = seed {
            m.doc.seed = s;
        }
        m.validate();
        // Unsaved: closing or opening another asks first.
        m.dirty = true;
        self.replace_model(m);
        let mut values = sets.to_vec();
        if let Some(s) = seed {
            values.push(format!("seed={}", s));
        }
        self.status = format!("opened {} with {}", self.model.title(), values.join(" "));
    }

    fn open_sweep_dialog(&mut self) {
        let dir = self.sweep.dir.clone().or_else(|| self.dialog_dir());
        if let Some((action, path)) = self.dialogs.files.ask(
            files::FileAction::OpenSweep,
            dir.as_deref(),
            "manifest.json",
            &mut self.model.log,
        ) {
            self.file_chosen(action, path);
        }
    }

    fn open_dialog(&mut self) {
        let dir = self.dialog_dir();
        if let Some((action, path)) = self.dialogs.files.ask(
            files::FileAction::Open,
            dir.as_deref(),
            "",
            &mut self.model.log,
        ) {
            self.file_chosen(action, path);
        }
    }

    fn autosave(&mut self, ctx: &egui::Context, now: f64) {
        if !self.model.dirty {
            return;
        }
        let due = self.session.last_autosave + AUTOSAVE_EVERY_S - now;
        if due <= 0.0 {
            self.session.last_autosave = now;
            self.write_recovery();
        } else {
            // An idle window draws only on input: wake it when the autosave
            // is due, so an edit left alone still reaches the disk.
            ctx.request_repaint_after(std::time::Duration::from_secs_f64(due));
        }
    }

    /// "heat.json • — Weft": the graph's file name (or "untitled"), a dot
    /// while it has unsaved changes, so windows (and a page's tabs) tell
    /// their documents apart.
    pub fn window_title(&self) -> String {
        let name = self
            .model
            .path
            .as_ref()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "untitled".into());
        let dot = if self.model.dirty { " •" } else { "" };
        format!("{}{} — Weft", name, dot)
    }

    /// Writes the unsaved graph, with the path it belongs to, to this
    /// session's recovery file.
    pub fn write_recovery(&mut self) {
        if let Some(dir) = self.session.recovery_file.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let written = recovery::encode(&self.model.root().to_json(), self.model.path.as_deref())
            .and_then(|text| {
                platform::write_file(&self.session.recovery_file, text.as_bytes())
                    .map_err(|e| e.to_string())
            });
        if let Err(e) = written {
            self.model.log.push(format!("autosave failed: {}", e));
        }
    }

    fn shortcuts(&mut self, ctx: &egui::Context) {
        if self.dialogs.files.is_open() {
            // Weft's file dialog has the keyboard.
            return;
        }
        let typing = ctx.egui_wants_keyboard_input();
        let (undo, redo, save, delete, frame_all, frame_sel, viewer) = ctx.input_mut(|i| {
            // While a text field has focus, Ctrl+Z is its own undo of the typing.
            let (mut undo, mut redo) = (false, false);
            if !typing {
                redo = i.consume_key(
                    egui::Modifiers::COMMAND | egui::Modifiers::SHIFT,
                    egui::Key::Z,
                ) || i.consume_key(egui::Modifiers::COMMAND, egui::Key::Y);
                undo = i.consume_key(egui::Modifiers::COMMAND, egui::Key::Z);
            }
            let save = i.consume_key(egui::Modifiers::COMMAND, egui::Key::S);
            let plain =
                |i: &egui::InputState, k| !typing && i.modifiers.is_none() && i.key_pressed(k);
            let delete = !typing && (i.key_pressed(egui::Key::Delete) || plain(i, egui::Key::X));
            let frame_all = plain(i, egui::Key::Home);
            let frame_sel = plain(i, egui::Key::F);
            if !typing && i.consume_key(egui::Modifiers::ALT, egui::Key::S) {
                self.sheet.open = !self.sheet.open;
            }
            // Ctrl+Space: the viewport over the whole main area, and back
            // (Blender's maximise area).
            if !typing
                && !self.layout.detached
                && i.consume_key(egui::Modifiers::COMMAND, egui::Key::Space)
            {
                self.layout.maximised = !self.layout.maximised;
            }
            let viewer = plain(i, egui::Key::V);
            (undo, redo, save, delete, frame_all, frame_sel, viewer)
        });
        if viewer {
            let field = self
                .selected
                .clone()
                .filter(|id| self.model.doc.node(id).is_some_and(|n| n.kind == "field"));
            if let Some(id) = field {
                self.toggle_viewer(&id);
            }
        }
        if undo {
            self.model.undo();
        }
        if redo {
            self.model.redo();
        }
        if save {
            self.save(false, None);
        }
        if !platform::IN_BROWSER
            && ctx.input_mut(|i| i.consume_key(egui::Modifiers::COMMAND, egui::Key::Q))
        {
            self.request(Pending::Quit);
        }
        // Over the viewport, F and Home are its views' (fit, frame).
        let over_viewport = self.layout.over_viewport(ctx.pointer_latest_pos());
        if frame_all && !over_viewport {
            self.canvas.nav = Some(NavRequest::FrameAll);
        }
        if frame_sel && !over_viewport {
            self.canvas.nav = Some(NavRequest::FrameSelected);
        }
        let selection = self.selection(ctx);
        if delete {
            // One frame's commands are one undo step: deleting a selection undoes at once.
            for id in &selection {
                self.model.push(Command::RemoveNode { id: id.clone() });
            }
            self.selected = None;
            if selection.is_empty() {
                if let Some(id) = self.canvas.frames.selected.take() {
                    self.model.push(Command::RemoveFrame { id });
                }
            }
        }
        if typing {
            return;
        }
        group_ui::shortcuts(ctx, &mut self.model, &selection, self.selected.as_deref());
        let (add_key, pointer) = ctx.input_mut(|i| {
            let shift_a = i.consume_key(egui::Modifiers::SHIFT, egui::Key::A);
            let tab = i.consume_key(egui::Modifiers::NONE, egui::Key::Tab);
            (shift_a || tab, i.pointer.latest_pos())
        });
        if ctx.input_mut(|i| i.consume_key(egui::Modifiers::COMMAND, egui::Key::J)) {
            let rects: Vec<egui::Rect> = selection
                .iter()
                .filter_map(|id| self.canvas.node_rects.get(id).copied())
                .collect();
            if !rects.is_empty() {
                let frame =
                    frames::new_frame(self.model.next_frame_id(), &rects, egui::Pos2::ZERO, false);
                self.canvas.frames.selected = Some(frame.id.clone());
                self.model.push(Command::AddFrame { frame });
            }
        }
        if add_key {
            // The menu opens under the pointer when it is over the editor, else mid-editor.
            self.canvas.add_menu = Some(
                pointer
                    .filter(|p| self.canvas.graph_rect.contains(*p))
                    .unwrap_or(self.canvas.graph_rect.center()),
            );
        }
        // Copy / paste as graph JSON through the system clipboard (so also between windows).
        let (copy, paste, duplicate) = ctx.input_mut(|i| {
            let copy = i
                .events
                .iter()
                .any(|e| matches!(e, egui::Event::Copy | egui::Event::Cut));
            let paste = i.events.iter().find_map(|e| match e {
                egui::Event::Paste(t) => Some(t.clone()),
                _ => None,
            });
            let duplicate = i.consume_key(egui::Modifiers::COMMAND, egui::Key::D);
            (copy, paste, duplicate)
        });
        if !selection.is_empty() {
            if copy {
                ctx.copy_text(self.model.copy_json(&selection));
            }
            if duplicate {
                let json = self.model.copy_json(&selection);
                self.model.push(Command::Paste {
                    json,
                    offset: [40.0, 40.0],
                });
            }
        }
        if let Some(json) = paste {
            self.model.push(Command::Paste {
                json,
                offset: [40.0, 40.0],
            });
        }
    }

    fn menu(&mut self, ui: &mut egui::Ui) {
        egui::MenuBar::new().ui(ui, |ui| {
            ui.menu_button("File", |ui| {
                if ui.button("New").clicked() {
                    self.request(Pending::New);
                    ui.close();
                }
                if ui.button("Open…").clicked() {
                    ui.close();
                    self.open_dialog();
                }
                let no_sweep = platform::unavailable(platform::Feature::Sweep);
                if ui
                    .add_enabled(no_sweep.is_none(), egui::Button::new("Open sweep…"))
                    .on_hover_text("a sweep folder's manifest.json, after `weft sweep collect`")
                    .on_disabled_hover_text(no_sweep.unwrap_or_default())
                    .clicked()
                {
                    ui.close();
                    self.open_sweep_dialog();
                }
                if ui.button("Save  (Ctrl+S)").clicked() {
                    ui.close();
                    self.save(false, None);
                }
                if ui.button("Save As…").clicked() {
                    ui.close();
                    self.save(true, None);
                }
                let no_export = platform::unavailable(platform::Feature::Export);
                if ui
                    .add_enabled(no_export.is_none(), egui::Button::new("Export…"))
                    .on_disabled_hover_text(no_export.unwrap_or_default())
                    .clicked()
                {
                    ui.close();
                    self.export.open = true;
                }
                let no_render = platform::unavailable(platform::Feature::Render);
                if ui
                    .add_enabled(no_render.is_none(), egui::Button::new("Render…"))
                    .on_hover_text("draw one view over a frame range as an MP4 movie or PNG files")
                    .on_disabled_hover_text(no_render.unwrap_or_default())
                    .clicked()
                {
                    ui.close();
                    let (start, end) = (self.timeline.start, self.timeline.end);
                    self.render.show(self.viewport.program(), start, end);
                }
                ui.menu_button("Examples", |ui| {
                    let mut files: Vec<PathBuf> = examples_dir()
                        .map(|d| weft_ir::io::provided::files_in(&d))
                        .into_iter()
                        .flatten()
                        .filter(|p| {
                            p.extension().is_some_and(|e| e == "json")
                                && !p.to_string_lossy().ends_with(".expect.json")
                        })
                        .collect();
                    files.sort();
                    files.dedup();
                    for f in files {
                        let name = f
                            .file_stem()
                            .map(|s| s.to_string_lossy().to_string())
                            .unwrap_or_default();
                        if ui
                            .button(name)
                            .on_hover_text("opens an untitled copy: saving asks for a new name")
                            .clicked()
                        {
                            self.request(Pending::Open {
                                path: f,
                                copy: true,
                            });
                            ui.close();
                        }
                    }
                });
                ui.menu_button("Recent", |ui| {
                    for f in self.session.recent.clone() {
                        if ui.button(f.display().to_string()).clicked() {
                            self.request(Pending::Open {
                                path: f,
                                copy: false,
                            });
                            ui.close();
                        }
                    }
                });
                if !platform::IN_BROWSER {
                    ui.separator();
                    if ui.button("Quit  (Ctrl+Q)").clicked() {
                        ui.close();
                        self.request(Pending::Quit);
                    }
                }
            });
            ui.menu_button("Edit", |ui| {
                if ui
                    .add_enabled(self.model.can_undo(), egui::Button::new("Undo  (Ctrl+Z)"))
                    .clicked()
                {
                    self.model.undo();
                    ui.close();
                }
                if ui
                    .add_enabled(
                        self.model.can_redo(),
                        egui::Button::new("Redo  (Ctrl+Shift+Z)"),
                    )
                    .clicked()
                {
                    self.model.redo();
                    ui.close();
                }
                ui.separator();
                let selection = self.selection(ui.ctx());
                if ui
                    .add_enabled(
                        !selection.is_empty(),
                        egui::Button::new("Save selection as asset…"),
                    )
                    .clicked()
                {
                    self.dialogs.asset_save = Some(asset_save::Draft::new(
                        &self.model.doc,
                        selection,
                        &self.model.assets.library(),
                    ));
                    ui.close();
                }
                if ui.button("Asset library folders…").clicked() {
                    self.dialogs.library_folders = Some(library_folders::Draft::open());
                    ui.close();
                }
            });
            ui.menu_button("View", |ui| {
                if ui.button("Frame all  (Home)").clicked() {
                    self.canvas.nav = Some(NavRequest::FrameAll);
                    ui.close();
                }
                if ui.button("Frame selected  (F)").clicked() {
                    self.canvas.nav = Some(NavRequest::FrameSelected);
                    ui.close();
                }
                ui.separator();
                if ui
                    .checkbox(&mut self.layout.detached, "Viewport in its own window")
                    .on_hover_text(
                        "the viewport in a second window (on another screen, say); \
                         close that window to dock it again",
                    )
                    .clicked()
                {
                    self.layout.maximised = false;
                    ui.close();
                }
                if ui
                    .checkbox(&mut self.sheet.open, "Spreadsheet  (Alt+S)")
                    .on_hover_text("any field's values for the current frame")
                    .clicked()
                {
                    ui.close();
                }
            });
            let title = self.model.title();
            ui.label(format!(
                "{}{}",
                title,
                if self.model.dirty { " •" } else { "" }
            ));
        });
    }

    /// The viewport in a window of its own (`WindowLayout::detached`):
    /// an immediate egui viewport, or an egui window in the main one where
    /// the backend has a single window (the test harness). Closing it
    /// docks the viewport again.
    fn detached_viewport(&mut self, ctx: &egui::Context) {
        let id = egui::ViewportId::from_hash_of("weft detached viewport");
        let builder = egui::ViewportBuilder::default()
            .with_title(format!("Viewport — {}", self.model.title()))
            .with_inner_size([960.0, 640.0]);
        let close = ctx.show_viewport_immediate(id, builder, |ui, class| {
            let rect = ui.available_rect_before_wrap();
            self.viewport_panel(ui);
            self.layout.rects.viewport = rect;
            // An embedded window has no close button of its own (and the
            // input there is the main window's): View's checkbox docks it.
            class == egui::ViewportClass::Immediate
                && ui.ctx().input(|i| i.viewport().close_requested())
        });
        if close {
            self.layout.detached = false;
        }
    }

    fn viewport_panel(&mut self, ui: &mut egui::Ui) {
        ui.horizontal(|ui| {
            let label = if self.viewport.playing {
                "⏸ Pause"
            } else {
                "▶ Play"
            };
            if ui.button(label).clicked() {
                self.viewport.playing = !self.viewport.playing;
            }
            if ui.button("Step").clicked() {
                self.viewport.step();
            }
            if ui.button("Reset").clicked() {
                self.viewport.reset();
            }

            let mut b = self.viewport.backend;
            // `auto` shows what the runtime resolved it to.
            let running = self.viewport.running.as_ref().map(|s| s.backend_name);
            let shown = match running {
                Some(r) if b == Backend::Auto => format!("auto ({})", r),
                _ => b.name().to_string(),
            };
            egui::ComboBox::from_id_salt("backend")
                .selected_text(shown)
                .show_ui(ui, |ui| {
                    let window_gpu = if self.viewport.has_gpu() {
                        Ok(())
                    } else {
                        Err(self.viewport.no_gpu.as_deref())
                    };
                    backend_menu::show(ui, &mut b, &backend_menu::choices(window_gpu));
                });
            if b != self.viewport.backend {
                self.viewport.backend = b;
                self.session.prefs.set_backend(b.name());
                self.viewport.rebuild(
                    self.model.revision,
                    &self.viewer.compiled_doc(&self.model.root()),
                    &self.model.assets,
                );
            }
        });
        ui.label(self.rate_label()).on_hover_text(
            "sim: time the backend took for the last simulation frame; \
             display: how often the window redraws",
        );
        let times = self.viewport.kernel_times();
        if !times.is_empty() {
            ui.label(
                times
                    .iter()
                    .map(|(k, ms)| format!("{} {:.2} ms", k, ms))
                    .collect::<Vec<_>>()
                    .join("   "),
            )
            .on_hover_text(format!(
                "median launch time per kernel, measured by {}",
                self.viewport.cook.timing
            ));
        }
        if let Some(e) = &self.viewport.error {
            ui.colored_label(egui::Color32::from_rgb(255, 110, 110), e);
        }
        if self.viewport.fault.is_some() {
            ui.colored_label(
                egui::Color32::from_rgb(255, 110, 110),
                "stopped at a run-time error (see Problems; Reset clears it)",
            );
        }
        ui.separator();
        self.viewport.ui(ui);
        if let Some((node, value)) = self.viewport.orbit.take_edit() {
            self.model.push(model::Command::SetParam {
                node,
                param: "camera".into(),
                value,
            });
        }
    }

    /// The timeline's contents (its bar is laid out in `ui`): the frame
    /// slider and range, the frame cache and Bake.
    fn timeline_bar(&mut self, ui: &mut egui::Ui) {
        self.viewport.bake_dir = self.model.path.as_deref().map(bake::cache_dir_for);
        let asked = self.timeline.ui(
            ui,
            &mut self.viewport,
            self.model.path.as_deref(),
            self.model.revision,
        );
        if let Some((mb, spill)) = asked.cache_prefs {
            self.session.prefs.set_frame_cache(mb, spill);
        }
        if let Some(out) = asked.bake {
            // The document as saved is baked (a viewer flag's temporary
            // view aside), as `weft bake` bakes the file.
            let doc = self.model.root().into_owned();
            let ctx = ui.ctx().clone();
            self.timeline.start_bake(
                doc,
                &self.model.assets,
                &mut self.viewport,
                self.model.revision,
                out,
                &ctx,
            );
        }
    }

    /// "frame 12 · sim 3.1 ms/frame · display 60 fps": what each number measures.
    pub fn rate_label(&self) -> String {
        let frame = self.viewport.frame();
        let sim = if self.viewport.frames_run > 0 {
            format!("sim {:.2} ms/frame", self.viewport.frame_ms)
        } else {
            "sim —".to_string()
        };
        let display = match (
            self.status_line.frame_times.front(),
            self.status_line.frame_times.back(),
        ) {
            (Some(a), Some(b)) if self.status_line.frame_times.len() > 1 && b > a => format!(
                "display {:.0} fps",
                (self.status_line.frame_times.len() - 1) as f64 / (b - a)
            ),
            _ => "display —".to_string(),
        };
        format!(
            "frame {}  ·  {}  ·  {}{}",
            frame,
            sim,
            display,
            if self.viewport.compiling() {
                "  ·  compiling…"
            } else {
                ""
            }
        )
    }

    fn inspector(&mut self, ui: &mut egui::Ui, commands: &mut Vec<Command>) {
        let Some(id) = self.selected.clone() else {
            if self.frame_inspector(ui, commands) {
                return;
            }
            ui.weak(
                "Click a node's title to inspect it. Right-click the editor, Shift+A or Tab to add \
                 nodes. Shift+drag or Shift+click selects several; Ctrl+click empty space clears.",
            );
            return;
        };
        let Some(doc) = self.model.doc.node(&id).cloned() else {
            self.selected = None;
            return;
        };
        let kind = weft_ir::graph::catalog::kind(&doc.kind);
        let lib = self.model.assets.library();
        ui.heading(&id);
        if let Some(k) = kind {
            // One line: a long doc would push the fields down (all of it on hover).
            ui.add(egui::Label::new(format!("{} — {}", k.name, k.doc)).truncate())
                .on_hover_text(k.doc);
        }
        if !group_edit::is_boundary(&id) {
            let dir = self.config_dir();
            presets::section(
                ui,
                &dir,
                &doc,
                &lib,
                &mut self.dialogs.preset_name,
                commands,
                &mut self.model.log,
            );
        }
        if doc.kind == weft_ir::graph::groups::GROUP {
            group_pins::inspector(ui, &doc, &lib, commands);
            if doc.group.is_some()
                && ui
                    .button("Save as asset…")
                    .on_hover_text("write this group to your asset library")
                    .clicked()
            {
                self.dialogs.asset_save = Some(asset_save::Draft::new(
                    &self.model.doc,
                    vec![id.clone()],
                    &lib,
                ));
            }
        } else {
            let hidden = view_ports::hidden_params(&self.model.doc, &doc);
            params::param_editors(
                ui,
                &doc,
                false,
                &hidden,
                commands,
                &mut self.bodies.open_code,
            );
            group_ui::promote_section(ui, &self.model, &doc, commands);
        }
        if doc.kind == "optimize" {
            ui.separator();
            let w = ui.available_width();
            self.viewport.loss.ui_for(ui, &id, w);
        }
        if let Some(program) = self.viewport.program() {
            if doc.kind == "field" {
                quant_readout::ui_for(ui, program, &id);
                self.twins.ui_for(ui, program, &id);
            } else if kind.is_some_and(|k| k.family == weft_ir::graph::catalog::Family::Layout) {
                self.memory.ui_for(ui, program, &id);
            }
        }
        self.viewport.cook.ui_for(ui, &id);
        for p in self.model.problems_of(&id) {
            ui.colored_label(egui::Color32::from_rgb(255, 110, 110), p.to_string());
        }
    }

    /// Title, comment text and colour of the selected frame. False when none is selected.
    fn frame_inspector(&mut self, ui: &mut egui::Ui, commands: &mut Vec<Command>) -> bool {
        let Some(frame) = self
            .canvas
            .frames
            .selected
            .as_ref()
            .and_then(|id| self.model.doc.frames.iter().find(|f| &f.id == id))
            .cloned()
        else {
            return false;
        };
        ui.heading(format!("frame {}", frame.id));
        ui.weak(
            "Drag the title bar to move the frame and the nodes in it; drag the corner to resize.",
        );
        // Only a widget that reports a change commits: the colour button's
        // round trip through 8-bit colour must not edit a frame just shown.
        let mut edited = frame.clone();
        let mut changed = false;
        ui.horizontal(|ui| {
            ui.label("title");
            changed |= ui.text_edit_singleline(&mut edited.title).changed();
        });
        ui.label("comment");
        changed |= ui
            .add(
                egui::TextEdit::multiline(&mut edited.text)
                    .desired_rows(4)
                    .desired_width(f32::INFINITY),
            )
            .changed();
        ui.horizontal(|ui| {
            ui.label("colour");
            changed |= ui.color_edit_button_rgb(&mut edited.color).changed();
            if ui.button("Delete frame").clicked() {
                commands.push(Command::RemoveFrame {
                    id: frame.id.clone(),
                });
            }
        });
        if changed && edited != frame {
            commands.push(Command::SetFrame { frame: edited });
        }
        true
    }

    /// Mesh files dropped on the window become `mesh` nodes under the
    /// pointer (`drop_files`).
    fn dropped_files(&mut self, ctx: &egui::Context, commands: &mut Vec<Command>) {
        if ctx.input(|i| i.raw.dropped_files.is_empty()) {
            return;
        }
        let at = ctx
            .input(|i| i.pointer.latest_pos())
            .unwrap_or_else(|| ctx.content_rect().center());
        let p = graph_nav::free_spot(
            self.canvas.graph_to_screen.inverse() * at,
            self.canvas.node_rects.values(),
        );
        let (mut add, refused) = drop_files::dropped(ctx, self.model.path.as_deref(), [p.x, p.y]);
        if !refused.is_empty() {
            self.status = format!(
                "dropped files that are not meshes ({}) were not added: {}",
                weft_ir::io::mesh::Format::EXTENSIONS.join(", "),
                refused.join(", ")
            );
        }
        commands.append(&mut add);
    }

    /// The add-node menu opened by Shift+A or Tab; the node lands under the pointer.
    fn add_menu_popup(&mut self, ctx: &egui::Context, commands: &mut Vec<Command>) {
        let Some(at) = self.canvas.add_menu else {
            return;
        };
        let r = egui::Area::new(egui::Id::new("add-menu"))
            .order(egui::Order::Foreground)
            .fixed_pos(at)
            .show(ctx, |ui| {
                egui::Frame::popup(ui.style())
                    .show(ui, |ui| {
                        let kind = graph_view::add_node_menu(ui, &mut self.canvas.search);
                        let lib = self.model.assets.library();
                        let asset =
                            asset_menu::section(ui, &lib, &mut self.canvas.search, kind.is_none());
                        (kind, asset)
                    })
                    .inner
            });
        let p = graph_nav::free_spot(
            self.canvas.graph_to_screen.inverse() * at,
            self.canvas.node_rects.values(),
        );
        let chosen = match r.inner {
            (Some(kind), _) => Some(Command::AddNode {
                kind,
                pos: [p.x, p.y],
            }),
            (None, Some(e)) => Some(Command::Paste {
                json: asset_menu::node_json(&e, [p.x, p.y]),
                offset: [0.0, 0.0],
            }),
            (None, None) => None,
        };
        if let Some(c) = chosen {
            commands.push(c);
            self.canvas.add_menu = None;
        } else if ctx.input(|i| i.key_pressed(egui::Key::Escape)) || r.response.clicked_elsewhere()
        {
            self.canvas.search.clear();
            self.canvas.add_menu = None;
        }
    }

    /// The nested editor of an expression kernel.
    fn expr_window(&mut self, ctx: &egui::Context, commands: &mut Vec<Command>) {
        let Some((id, mut snarl, rev)) = self.bodies.open_expr.take() else {
            return;
        };
        let Some(expr) = self
            .model
            .doc
            .node(&id)
            .and_then(|n| n.params.get("expr"))
            .filter(|e| e.is_object())
            .cloned()
        else {
            return;
        };
        let mut open = true;
        // A body that does not read is shown as its error (the Problems
        // panel names it too); the editor opens once it reads again.
        let body = match ExprBody::parse(&id, &expr) {
            Ok(b) => b,
            Err(e) => {
                egui::Window::new(format!("expression · {}", id))
                    .open(&mut open)
                    .default_pos(self.layout.body_window_pos())
                    .default_size([720.0, 460.0])
                    .show(ctx, |ui| {
                        ui.colored_label(ui.visuals().error_fg_color, e.to_string());
                    });
                if open {
                    self.bodies.open_expr = Some((id, snarl, u64::MAX));
                }
                return;
            }
        };
        if rev != self.model.revision {
            snarl = expr_view::build_expr_snarl(&body);
        }
        let mut viewer = expr_view::ExprViewer {
            kernel: id.clone(),
            body: &body,
            commands: vec![],
            search: &mut self.canvas.search,
            rects: &mut self.bodies.expr_rects,
        };
        let mut layout = false;
        let shown = egui::Window::new(format!("expression · {}", id))
            .open(&mut open)
            .default_pos(self.layout.body_window_pos())
            .default_size([720.0, 460.0])
            .show(ctx, |ui| {
                if ui
                    .button("Auto layout")
                    .on_hover_text("place the nodes in columns by data flow (one undo step)")
                    .clicked()
                {
                    layout = true;
                }
                snarl.show(
                    &mut viewer,
                    &egui_snarl::ui::SnarlStyle::default(),
                    ("expr", &id),
                    ui,
                );
            });
        commands.append(&mut viewer.commands);
        let released_here = ctx.input(|i| i.pointer.any_released())
            && shown
                .as_ref()
                .zip(ctx.input(|i| i.pointer.interact_pos()))
                .is_some_and(|(w, p)| w.response.rect.contains(p));
        if layout {
            commands.push(Command::SetParam {
                node: id.clone(),
                param: "expr".into(),
                value: expr_view::auto_layout(&body, &self.bodies.expr_rects).to_value(),
            });
        } else if released_here && commands.is_empty() {
            // A node dragged in the nested editor keeps its place (one undo step per drag).
            if let Some(moved) = expr_view::with_positions(&body, &snarl) {
                commands.push(Command::SetParam {
                    node: id.clone(),
                    param: "expr".into(),
                    value: moved.to_value(),
                });
            }
        }
        if open {
            self.bodies.open_expr = Some((id, snarl, self.model.revision));
        }
    }

    fn code_window(&mut self, ctx: &egui::Context, commands: &mut Vec<Command>) {
        let Some(id) = self.bodies.open_code.clone() else {
            return;
        };
        let Some(doc) = self.model.doc.node(&id) else {
            self.bodies.open_code = None;
            return;
        };
        // An expression kernel opens its nested node editor instead.
        if doc.params.get("expr").is_some_and(|e| e.is_object()) {
            let expr = doc.params["expr"].clone();
            self.bodies.open_code = None;
            self.bodies.expr_rects.clear();
            let snarl = ExprBody::parse(&id, &expr)
                .map(|b| expr_view::build_expr_snarl(&b))
                .unwrap_or_else(|_| egui_snarl::Snarl::new());
            self.bodies.open_expr = Some((id, snarl, self.model.revision));
            return;
        }
        let committed = doc
            .params
            .get("code")
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string();
        if self
            .bodies
            .code_buffer
            .as_ref()
            .is_none_or(|(n, _)| *n != id)
        {
            self.bodies.code_buffer = Some((id.clone(), committed.clone()));
        }
        // Errors of this kernel's code, underlined at their line:col (a
        // port's error at the port's first use).
        let problems = code_editor::code_problems(&self.model.problems_of(&id), &committed);
        let now = ctx.input(|i| i.time);
        let mut open = true;
        let (_, buffer) = self.bodies.code_buffer.as_mut().expect("set above");
        let mut edited = false;
        egui::Window::new(format!("code · {}", id))
            .open(&mut open)
            .default_pos(self.layout.body_window_pos())
            .default_size([600.0, 440.0])
            .show(ctx, |ui| {
                egui::ScrollArea::vertical().show(ui, |ui| {
                    edited =
                        code_editor::code_editor(ui, ("code", &id), buffer, &problems).changed();
                });
                for p in &problems {
                    ui.colored_label(
                        egui::Color32::from_rgb(255, 110, 110),
                        format!("{}:{}: {}", p.line, p.col, p.message),
                    );
                }
            });
        if edited {
            self.bodies.debounce.touch(now);
        }
        // Typing commits after a pause (one undo step, one re-check), or when the window closes.
        let due = self.bodies.debounce.due(now);
        if let Some(d) = self.bodies.debounce.remaining(now) {
            ctx.request_repaint_after(d);
        }
        let text = buffer.clone();
        if (due || !open) && text != committed {
            commands.push(Command::SetParam {
                node: id.clone(),
                param: "code".into(),
                value: text.into(),
            });
        }
        if !open {
            self.bodies.open_code = None;
            self.bodies.code_buffer = None;
        }
    }

    fn problems_panel(&mut self, ui: &mut egui::Ui) {
        let red = egui::Color32::from_rgb(255, 110, 110);
        egui::ScrollArea::vertical()
            .auto_shrink([false, false])
            // As low as the bar is let be (a small window): never taller.
            .min_scrolled_height(20.0)
            .show(ui, |ui| {
                let memory = self.memory.warnings();
                let fault = self.viewport.fault.clone();
                // What stopped the simulation from starting (its backend
                // could not open, a build failed after validation) or a
                // frame from being kept or drawn: the viewport says "see
                // Problems" for it, so it is here.
                let stopped = self.viewport.error.clone();
                if self.model.problems.is_empty()
                    && self.model.warnings.is_empty()
                    && memory.is_empty()
                    && fault.is_none()
                    && stopped.is_none()
                    && self.render.problem.is_none()
                {
                    ui.weak("No problems.");
                }
                if let Some(e) = stopped {
                    ui.label(egui::RichText::new(format!("the simulation: {}", e)).color(red));
                }
                if let Some((node, text)) = self.render.problem.clone() {
                    let r = ui
                        .add(
                            egui::Label::new(egui::RichText::new(text).color(red))
                                .sense(egui::Sense::click()),
                        )
                        .on_hover_text("File > Render… failed here; the next render clears it");
                    if r.clicked() {
                        self.selected = node.map(|n| group_ui::reveal(&mut self.model, &n));
                    }
                }
                if let Some(f) = fault {
                    let r = ui
                        .add(
                            egui::Label::new(egui::RichText::new(&f.message).color(red))
                                .sense(egui::Sense::click()),
                        )
                        .on_hover_text("the simulation stopped here; Reset clears it");
                    if r.clicked() {
                        self.selected = f.node.clone();
                    }
                }
                for (node, w) in memory {
                    let r = ui.add(
                        egui::Label::new(
                            egui::RichText::new(w).color(egui::Color32::from_rgb(240, 200, 90)),
                        )
                        .sense(egui::Sense::click()),
                    );
                    if r.clicked() {
                        self.selected = Some(node);
                    }
                }
                for w in self.model.warnings.clone() {
                    let r = ui.add(
                        egui::Label::new(
                            egui::RichText::new(w.to_string())
                                .color(egui::Color32::from_rgb(240, 200, 90)),
                        )
                        .sense(egui::Sense::click()),
                    );
                    if r.clicked() {
                        self.selected = Some(w.node().to_string());
                    }
                }
                for p in self.model.problems.clone() {
                    let r = ui.add(
                        egui::Label::new(egui::RichText::new(p.to_string()).color(red))
                            .sense(egui::Sense::click()),
                    );
                    if r.clicked() {
                        // A node inside a group: the editor enters it.
                        self.selected = p.node().map(|n| group_ui::reveal(&mut self.model, n));
                    }
                }
            });
    }

    /// The edit log (newest first), in its own pane, collapsed by default.
    fn log_pane(&mut self, ui: &mut egui::Ui) {
        egui::CollapsingHeader::new(format!("Log ({} lines)", self.model.log.len()))
            .id_salt("log")
            .default_open(false)
            .show(ui, |ui| {
                egui::ScrollArea::vertical()
                    .max_height(120.0)
                    .auto_shrink([false, true])
                    .show(ui, |ui| {
                        for line in self.model.log.iter().rev().take(200) {
                            ui.weak(line);
                        }
                    });
            });
    }

    fn dialogs(&mut self, ctx: &egui::Context) {
        if let Some(p) = self.dialogs.confirm.take() {
            let mut keep = true;
            let mut save = false;
            egui::Modal::new(egui::Id::new("unsaved")).show(ctx, |ui| {
                ui.label("The graph has unsaved changes.");
                ui.horizontal(|ui| {
                    if ui.button("Save").clicked() {
                        keep = false;
                        save = true;
                    }
                    if ui.button("Discard").clicked() {
                        self.model.dirty = false;
                        keep = false;
                    }
                    if ui.button("Cancel").clicked() {
                        keep = false;
                        self.status = "cancelled".into();
                    }
                });
            });
            if save {
                // New / Open go on once the graph is written (maybe after a
                // file dialog, which opens next frame: the closing modal
                // would refuse its file name field the keyboard focus).
                self.dialogs.save_after_prompt = Some(p);
            } else if keep {
                self.dialogs.confirm = Some(p);
            } else if !self.model.dirty {
                self.do_pending(p);
            }
        }
        if !self.dialogs.recovery_offers.is_empty() {
            self.recovery_modal(ctx);
        }
    }

    /// The unsaved work of earlier sessions, one line each with Recover
    /// and Discard (newest first); the dialog closes when none is left.
    fn recovery_modal(&mut self, ctx: &egui::Context) {
        let now = platform::unix_time().as_secs();
        let mut recover = None;
        let mut discard = None;
        let mut later = false;
        egui::Modal::new(egui::Id::new("recover")).show(ctx, |ui| {
            ui.label(if self.dialogs.recovery_offers.len() == 1 {
                "Weft found unsaved work from a previous session.".to_string()
            } else {
                format!(
                    "Weft found unsaved work from {} previous sessions.",
                    self.dialogs.recovery_offers.len()
                )
            });
            for (i, offer) in self.dialogs.recovery_offers.iter().enumerate() {
                ui.horizontal(|ui| {
                    ui.label(offer.describe(now));
                    if ui.button("Recover").clicked() {
                        recover = Some(i);
                    }
                    if ui.button("Discard").clicked() {
                        discard = Some(i);
                    }
                });
            }
            if self.dialogs.recovery_offers.len() > 1 && ui.button("Not now").clicked() {
                later = true;
            }
        });
        if let Some(i) = recover {
            let offer = self.dialogs.recovery_offers.remove(i);
            let path = offer.path.clone();
            self.replace_model(Model::new(offer.doc.clone(), path.clone()));
            self.model.dirty = true;
            if let Err(e) = recovery::adopt(&offer, &self.session.recovery_file) {
                self.model.log.push(format!(
                    "could not keep the recovered work in {}: {} (it stays in {})",
                    self.session.recovery_file.display(),
                    e,
                    offer.file.display()
                ));
            }
            self.status = match &path {
                Some(p) => format!("recovered unsaved work of {}", p.display()),
                None => "recovered an untitled graph".into(),
            };
            // One document per window: the rest wait for the next start.
            self.dialogs.recovery_offers.clear();
        } else if let Some(i) = discard {
            let offer = self.dialogs.recovery_offers.remove(i);
            if let Err(e) = std::fs::remove_file(&offer.file) {
                self.model
                    .log
                    .push(format!("could not remove {}: {}", offer.file.display(), e));
            }
        } else if later {
            self.dialogs.recovery_offers.clear();
        }
    }

    fn screenshot(&mut self, ctx: &egui::Context) {
        let Some(path) = self.opts.screenshot.clone() else {
            return;
        };
        // A simulation that stopped (a run-time fault) or never started
        // (a build or backend error) will not reach `after_frames`: the
        // shot is taken as it is, with the error said and a failed exit.
        let stopped = self
            .viewport
            .fault
            .as_ref()
            .map(|f| f.message.clone())
            .or_else(|| {
                self.viewport
                    .error
                    .clone()
                    .filter(|_| !self.viewport.compiling())
            });
        let ready = self.viewport.frames_run >= self.opts.after_frames as u64
            || stopped.is_some()
            || !self.model.problems.is_empty()
            || (self.viewport.running.is_none()
                && !self.viewport.compiling()
                && ctx.cumulative_frame_nr() > 30);
        if ready {
            self.viewport.playing = false;
        }
        // A frame still out would change the picture after the shot.
        if ready && !self.session.screenshot_requested && self.viewport.is_idle() {
            self.session.screenshot_requested = true;
            let problems: Vec<String> = self.model.problems.iter().map(|p| p.to_string()).collect();
            let why = if !problems.is_empty() {
                Some(format!("the graph does not run: {}", problems.join("; ")))
            } else {
                stopped.map(|w| {
                    format!(
                        "the simulation stopped after {} of {} frames: {}",
                        self.viewport.frames_run,
                        self.opts.after_frames,
                        w.trim()
                    )
                })
            };
            if let Some(why) = why {
                eprintln!("error: --screenshot: {}", why);
                self.opts
                    .exit_status
                    .store(1, std::sync::atomic::Ordering::Relaxed);
            }
            ctx.send_viewport_cmd(egui::ViewportCommand::Screenshot(Default::default()));
        }
        let shot = ctx.input(|i| {
            i.raw.events.iter().find_map(|e| match e {
                egui::Event::Screenshot { image, .. } => Some(image.clone()),
                _ => None,
            })
        });
        if let Some(image) = shot {
            let img = weft_runtime::render::Image {
                width: image.size[0] as u32,
                height: image.size[1] as u32,
                rgba: image.pixels.iter().flat_map(|c| c.to_array()).collect(),
            };
            if let Err(e) = img.write_png(&path) {
                eprintln!("error: {}", e);
            }
            ctx.send_viewport_cmd(egui::ViewportCommand::Close);
        }
        ctx.request_repaint();
    }
}

impl eframe::App for WeftApp {
    /// Closing the window keeps unsaved changes in the recovery file
    /// (offered at the next start) rather than the last autosave's, up to
    /// 15 s older; with nothing unsaved the session's file goes.
    fn on_exit(&mut self) {
        if self.model.dirty {
            self.write_recovery();
        } else {
            let _ = std::fs::remove_file(&self.session.recovery_file);
        }
    }

    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        let ctx = ui.ctx().clone();
        let now = ctx.input(|i| i.time);
        self.status_line.frame_times.push_back(now);
        while self.status_line.frame_times.len() > 60 {
            self.status_line.frame_times.pop_front();
        }
        if let Some(p) = self.dialogs.save_after_prompt.take() {
            self.save(false, Some(p));
        }
        // The window's close button asks about unsaved changes like Quit.
        if ctx.input(|i| i.viewport().close_requested())
            && !self.session.quitting
            && self.model.dirty
        {
            ctx.send_viewport_cmd(egui::ViewportCommand::CancelClose);
            self.request(Pending::Quit);
        }
        if let Some(c) = self.session.ctx_command.take() {
            ctx.send_viewport_cmd(c);
        }
        let title = self.window_title();
        if title != self.session.title {
            platform::set_title(&ctx, &title);
            self.session.title = title;
        }
        self.shortcuts(&ctx);
        self.model.apply_pending();
        if self.model.take_scope_changed() {
            // Another group's body (or the graph) is shown: a fresh view.
            self.canvas.snarl = Default::default();
            self.canvas.node_rects.clear();
            self.selected = None;
            // Framed once the new level's nodes are laid out (their rects
            // are unknown this frame).
            self.canvas.fit_frames = FIT_FRAMES;
        }
        // A later change makes the status line's message stale (a refused
        // wire, "saved", "recompiled"): it goes back to "ready".
        if self.model.revision != self.status_line.status_revision
            && self.status == self.status_line.status_seen
        {
            self.status.clear();
        }
        // A scalar drag's values go straight to the running simulation; on
        // release the drag becomes one undo step (like a node drag).
        for id in self.model.take_dragged() {
            if let Some(n) = self.model.doc.node(&id) {
                // The simulation names a node inside a group by its path.
                let mut n = n.clone();
                n.id = format!("{}{}", self.model.scope_prefix(), n.id);
                self.viewport.set_scalars(&n);
            }
        }
        if !ctx.input(|i| i.pointer.any_down()) {
            self.model.end_drag();
        }
        if self.canvas.snarl_revision != self.model.revision
            || self.canvas.snarl.nodes().count() != self.model.doc.nodes.len()
        {
            sync_snarl(&mut self.canvas.snarl, &self.model);
            self.canvas.snarl_revision = self.model.revision;
        }
        self.viewer.follow(&self.model.root());
        self.viewport.sync(
            self.model.revision,
            &self.viewer.compiled_doc(&self.model.root()),
            &self.model.assets,
            !self.model.problems.is_empty(),
        );
        if let Some(msg) = self.viewport.update(&ctx) {
            self.status = msg;
        }
        self.autosave(&ctx, now);
        self.sheet
            .poll(self.viewport.sim.as_ref(), self.viewport.generation, &ctx);
        // While a frame runs the readout keeps its last numbers.
        if !self.viewport.is_away() {
            self.memory.poll(
                self.viewport.sim.as_ref(),
                self.viewport.generation,
                now,
                self.viewport.playing,
            );
        }

        let mut commands = Vec::new();
        egui::Panel::top("menu").show(ui, |ui| self.menu(ui));
        // The bars below the main area (`window_layout`): each bounded so
        // that the main area keeps its least height. The heights of the
        // bars still to come are last pass's.
        let last = self.layout.rects;
        let timeline_h = last.timeline.height().max(0.0);
        let sheet_h = last.spreadsheet.map_or(0.0, |r| r.height());
        // Problems keep a steady height (resizable by hand): log lines go to
        // their own collapsed pane, so neither grows into the viewport.
        let problems = egui::Panel::bottom("problems")
            .resizable(true)
            .default_size(90.0)
            .min_size(60.0)
            .max_size(window_layout::WindowLayout::bar_max(
                ui.available_height(),
                timeline_h + sheet_h + 50.0,
                60.0,
            ))
            .show(ui, |ui| {
                ui.label(egui::RichText::new("Problems").strong());
                self.problems_panel(ui);
            });
        self.layout.rects.problems = problems.response.rect;
        egui::Panel::bottom("log").show(ui, |ui| self.log_pane(ui));
        // The status line: what the last action did (saved, refused, recompiled).
        egui::Panel::bottom("status").show(ui, |ui| {
            let text = if self.status.is_empty() {
                egui::RichText::new("ready").weak()
            } else {
                egui::RichText::new(&self.status).color(egui::Color32::from_rgb(255, 200, 120))
            };
            ui.add(egui::Label::new(text).truncate());
        });
        self.layout.rects.spreadsheet = None;
        if self.sheet.open {
            let sheet = egui::Panel::bottom("spreadsheet")
                .resizable(true)
                .default_size(280.0)
                .min_size(120.0)
                .max_size(window_layout::WindowLayout::bar_max(
                    ui.available_height(),
                    timeline_h,
                    120.0,
                ))
                .show(ui, |ui| self.sheet.ui(ui, self.viewport.program()));
            self.layout.rects.spreadsheet = Some(sheet.response.rect);
            if let Some(f) = self.sheet.view_request.take() {
                self.toggle_viewer(&f);
            }
        }
        // The timeline spans the window under the main area, maximised or
        // not (as Blender's does).
        let timeline = egui::Panel::bottom("timeline").show(ui, |ui| self.timeline_bar(ui));
        self.layout.rects.timeline = timeline.response.rect;
        self.layout.rects.main = ui.available_rect_before_wrap();
        // The inspector is drawn before the node editor that changes the
        // selection: a new selection re-runs the pass (egui's discard,
        // nothing painted twice) so a click shows in the frame it lands
        // in, not one render later (a render is ~80 ms on lavapipe).
        let selected_before = self.selected.clone();
        let main_w = self.layout.rects.main.width();
        if self.layout.detached {
            self.layout.maximised = false;
            self.layout.rects.viewport = egui::Rect::NOTHING;
            self.detached_viewport(&ctx);
        }
        if self.layout.maximised {
            let vp = egui::CentralPanel::default().show(ui, |ui| self.viewport_panel(ui));
            self.layout.rects.viewport = vp.response.rect;
            self.layout.rects.node_editor = None;
            self.layout.rects.inspector = None;
        } else {
            let side = egui::Panel::right("side")
                .resizable(true)
                .default_size(self.session.prefs.side_width)
                .min_size(window_layout::MIN_INSPECTOR_W)
                .max_size(window_layout::WindowLayout::inspector_max(main_w))
                .show(ui, |ui| {
                    // As wide as the panel, never wider: the inspector is
                    // drawn in a child the panel does not grow with, so a
                    // wide row (a long parameter) is clipped rather than
                    // pushing the node editor aside when the selection changes.
                    let rect = ui.available_rect_before_wrap();
                    let mut inner = ui.new_child(egui::UiBuilder::new().max_rect(rect));
                    inner.set_clip_rect(rect.intersect(ui.clip_rect()));
                    egui::ScrollArea::vertical()
                        .auto_shrink([false, false])
                        .show(&mut inner, |ui| self.inspector(ui, &mut commands));
                    ui.allocate_rect(rect, egui::Sense::hover());
                });
            self.layout.rects.inspector = Some(side.response.rect);
            let split = if self.layout.detached {
                self.session.prefs.viewport_width
            } else {
                // The divider between the viewport and the node editor is this
                // panel's resize edge.
                // Until the user moves the divider the viewport takes half the
                // room beside the inspector: the largest area on screen, with
                // the node editor still wide enough to show a graph legibly
                // (its fit zooms out no further than `graph_nav::FIT_MIN_SCALE`).
                let beside = ui.available_width();
                let width = match self.session.prefs.viewport_width {
                    w if w > 0.0 => w,
                    _ => beside * 0.5,
                };
                let vp = egui::Panel::left("viewport")
                    .resizable(true)
                    .default_size(width)
                    .min_size(window_layout::MIN_VIEWPORT_W)
                    .max_size(window_layout::WindowLayout::viewport_max(
                        ui.available_width(),
                    ))
                    .show(ui, |ui| self.viewport_panel(ui));
                self.layout.rects.viewport = vp.response.rect;
                // The split is the user's once they drag the divider: a width
                // that changed while the window did not (a window resize or a
                // restore from maximised is not a choice to remember).
                let vp_w = vp.response.rect.width();
                let dragged = last.viewport.is_positive()
                    && last.node_editor.is_some()
                    && (last.main.width() - main_w).abs() < 0.5
                    && (last.viewport.width() - vp_w).abs() > 0.5;
                if dragged {
                    vp_w
                } else {
                    self.session.prefs.viewport_width
                }
            };
            self.session
                .prefs
                .note(side.response.rect.width(), split, &self.config_dir(), now);
        }
        let graph_id = self.graph_id();
        let selection = self.selection(&ctx);
        let live_frames = self.canvas.frames.live(&self.model.doc.frames);
        let selected_frame = self.canvas.frames.selected.clone();
        let set_transform = self.next_transform(&ctx, &selection);
        let editor = (!self.layout.maximised).then(|| {
            egui::CentralPanel::default().show(ui, |ui| {
                self.canvas.graph_rect = ui.max_rect();
                let mut viewer = GraphViewer {
                    model: &self.model,
                    library: self.model.assets.library(),
                    commands: vec![],
                    selected: &mut self.selected,
                    open_code: &mut self.bodies.open_code,
                    search: &mut self.canvas.search,
                    refusal: None,
                    to_screen: self.canvas.graph_to_screen,
                    node_rects: &mut self.canvas.node_rects,
                    fault: self.viewport.fault.as_ref(),
                    frames: &live_frames,
                    selected_frame: selected_frame.as_deref(),
                    selection: &selection,
                    set_transform,
                    open_in_sheet: None,
                    viewer_flag: self.viewer.flagged_node(),
                    toggle_viewer: None,
                    live_warnings: self.memory.warnings(),
                    title_labels: Default::default(),
                    pin_labels: vec![],
                };
                let response = egui_snarl::ui::SnarlWidget::new()
                    .id(graph_id)
                    .style(graph_view::style())
                    .show(&mut self.canvas.snarl, &mut viewer, ui);
                if response.clicked() && !ui.input(|i| i.modifiers.shift) {
                    // A click on empty space drops the inspected node (Ctrl+click also
                    // clears the box selection, as egui-snarl does).
                    *viewer.selected = None;
                }
                commands.append(&mut viewer.commands);
                if let Some(f) = viewer.open_in_sheet.take() {
                    self.sheet.show_field(&f);
                }
                let toggle_viewer = viewer.toggle_viewer.take();
                self.canvas.graph_to_screen = viewer.to_screen;
                let refusal = viewer.refusal.take();
                if response.clicked() {
                    self.canvas.frames.selected = None;
                }
                // Frame title bars and grips sit on a layer just above the nodes,
                // transformed like them, so a frame is grabbed where it is drawn.
                let snarl_layer = egui::LayerId::new(ui.layer_id().order, graph_id);
                let frames_layer = egui::LayerId::new(ui.layer_id().order, graph_id.with("frames"));
                ctx.set_sublayer(snarl_layer, frames_layer);
                ctx.set_transform_layer(frames_layer, self.canvas.graph_to_screen);
                let clip = self.canvas.graph_to_screen.inverse() * self.canvas.graph_rect;
                let mut frames_ui =
                    ui.new_child(egui::UiBuilder::new().layer_id(frames_layer).max_rect(clip));
                frames_ui.set_clip_rect(clip);
                let frame_before = self.canvas.frames.selected.clone();
                let ev = frames::interact(
                    &mut frames_ui,
                    &self.model.doc.frames,
                    &mut self.canvas.frames,
                    &mut self.canvas.snarl,
                    &self.canvas.node_rects,
                );
                commands.extend(ev.commands);
                if self.canvas.frames.selected.is_some()
                    && self.canvas.frames.selected != frame_before
                {
                    self.selected = None;
                }
                if let Some(id) = toggle_viewer {
                    self.toggle_viewer(&id);
                }
                if let Some(why) = refusal {
                    self.model.log.push(format!("wire refused: {}", why));
                    self.status = why;
                    self.status_line.refusal_until = now + 2.5;
                }
            })
        });
        self.layout.rects.node_editor = editor.map(|e| e.response.rect);
        // Node moves are committed when the pointer is released (one undo step per drag).
        if !ctx.input(|i| i.pointer.any_down()) {
            for (_, pos, v) in self.canvas.snarl.nodes_pos_ids() {
                if let Some(n) = self.model.doc.node(&v.id) {
                    if (n.pos[0] - pos.x).abs() > 0.5 || (n.pos[1] - pos.y).abs() > 0.5 {
                        commands.push(Command::MoveNode {
                            id: v.id.clone(),
                            pos: [pos.x, pos.y],
                        });
                    }
                }
            }
        }
        // After the moves: entering or leaving a group shows another level
        // (not while the node editor is hidden behind the maximised viewport:
        // its node rects are stale, a double-click there is the viewport's).
        if !self.layout.maximised {
            group_ui::double_click(
                &ctx,
                &mut self.model,
                self.canvas.graph_to_screen,
                &self.canvas.node_rects,
            );
            if let Some(depth) =
                breadcrumb::show(&ctx, self.canvas.graph_rect.min, &self.model.scope_ids())
            {
                self.model.leave_to(depth);
            }
        }
        if now < self.status_line.refusal_until {
            // The reason a wire was refused, where the user let go of it.
            egui::Tooltip::always_open(
                ctx.clone(),
                egui::LayerId::background(),
                egui::Id::new("refusal"),
                egui::PopupAnchor::Pointer,
            )
            .show(|ui| ui.colored_label(egui::Color32::from_rgb(255, 200, 120), &self.status));
            ctx.request_repaint();
        }
        if self.selected != selected_before {
            ctx.request_discard("the selection changed after the inspector was drawn");
        }
        self.add_menu_popup(&ctx, &mut commands);
        self.dropped_files(&ctx, &mut commands);
        self.code_window(&ctx, &mut commands);
        self.expr_window(&ctx, &mut commands);
        self.dialogs(&ctx);
        if let Some(line) = asset_save::window(
            &ctx,
            &mut self.dialogs.asset_save,
            &self.model.doc,
            &self.model.assets,
        ) {
            self.status = line.clone();
            self.model.log.push(line);
        }
        if let Some(line) = library_folders::window(&ctx, &mut self.dialogs.library_folders) {
            self.status = line.clone();
            self.model.log.push(line);
            // The pins and the build use the library: re-check the graph
            // and rebuild the simulation (an asset may resolve now).
            self.model.validate();
            self.viewport.rebuild(
                self.model.revision,
                &self.viewer.compiled_doc(&self.model.root()),
                &self.model.assets,
            );
        }
        if let Some((action, path)) = self.dialogs.files.update(&ctx, &mut self.model.log) {
            self.file_chosen(action, path);
            // The document opened is built and drawn on the next passes
            // (a page's picker answers with no input event to wake them).
            ctx.request_repaint();
        } else if !self.dialogs.files.is_open() && self.status == "choose where to save…" {
            self.status = self.model.log.last().cloned().unwrap_or_default();
        }
        // A change of kernel scalars while the pointer is held is a drag
        // (a slider, a drag value): previewed until the release.
        let held = ctx.input(|i| i.pointer.any_down());
        for c in commands {
            self.model.push(match c {
                Command::SetParam { node, param, value } if held && param == "scalars" => {
                    Command::DragScalars { node, value }
                }
                c => c,
            });
        }
        self.screenshot(&ctx);
        self.twins.poll(&ctx);
        let home = self.viewport.sim.as_ref();
        if let (Some(f), Some(sim)) = (home.and(self.twins.request.take()), home) {
            // At home: the twin runs to the frame the simulation is at now.
            let doc = self.viewer.compiled_doc(&self.model.root()).into_owned();
            let opts = self.viewport.twin_options(sim);
            self.twins.start(&f, &doc, &self.model.assets, sim, opts);
        }
        self.export.ui(&ctx, self.viewport.program());
        self.render.ui(&ctx, self.viewport.program());
        if std::mem::take(&mut self.render.start_requested) {
            self.start_render(&ctx);
        }
        if let Some(p) = self.sweep.ui(&ctx) {
            self.request(Pending::OpenVariant {
                graph: p.graph,
                sets: p.sets,
                seed: p.seed,
            });
        }
        let base = self.base_dir().unwrap_or_default();
        self.export.default_folder = format!(
            "{}.export",
            self.model
                .path
                .as_ref()
                .and_then(|p| p.file_stem())
                .map_or("untitled".into(), |s| s.to_string_lossy())
        );
        let label = self
            .model
            .path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| self.model.title());
        self.export
            .after_panels(self.viewport.sim.as_ref(), &base, &label);
        // The panels have read this pass's state: the next frame goes out.
        self.timeline.follow_play(&mut self.viewport, &ctx);
        self.viewport.end_pass(&ctx);
        if self.status != self.status_line.status_seen
            || self.model.revision != self.status_line.status_revision
        {
            self.status_line.status_seen = self.status.clone();
            self.status_line.status_revision = self.model.revision;
        }
    }
}

impl WeftApp {
    /// Starts File > Render…'s render of the document as it is now (a
    /// viewer flag's temporary view aside, as a bake takes it), on the
    /// backend the viewport runs, with paths relative to the graph's folder.
    fn start_render(&mut self, ctx: &egui::Context) {
        let doc = self.model.root().into_owned();
        let backend = self
            .viewport
            .sim
            .as_ref()
            .and_then(|s| s.backend())
            .unwrap_or(self.viewport.backend);
        let spec = self.render.spec(&self.base_dir().unwrap_or_default());
        self.render.message = None;
        self.render.problem = None;
        self.render.job = Some(render_panel::RenderJob::start(
            doc,
            &self.model.assets,
            backend,
            spec,
            ctx.clone(),
        ));
    }

    /// Flags field `id` (a field node, or `ID.grad`) for the viewport (or
    /// unflags it): the viewport recompiles with the temporary view and
    /// carries the running state over (the document is untouched, the
    /// frame goes on).
    pub fn toggle_viewer(&mut self, id: &str) {
        let program = self.viewport.program();
        let before = self.viewer.compiled_doc(&self.model.root()).into_owned();
        match self.viewer.toggle(id, program) {
            Ok(msg) => {
                self.status = msg;
                let changed = *self.viewer.compiled_doc(&self.model.root()) != before;
                if changed && self.model.problems.is_empty() {
                    // Only a view comes or goes: the simulation goes on.
                    self.viewport.rebuild_display_only(
                        self.model.revision,
                        &self.viewer.compiled_doc(&self.model.root()),
                        &self.model.assets,
                    );
                }
            }
            Err(e) => self.status = e,
        }
    }

    /// The node editor's view for this frame when it must change: a framing
    /// request, the first fit of a newly opened graph (once its nodes have
    /// been laid out, so their sizes count), or a Ctrl+wheel zoom step.
    fn next_transform(
        &mut self,
        ctx: &egui::Context,
        selection: &[String],
    ) -> Option<egui::emath::TSTransform> {
        let laid_out = !self.model.doc.nodes.is_empty()
            && self
                .model
                .doc
                .nodes
                .iter()
                .all(|n| self.canvas.node_rects.contains_key(&n.id));
        if self.canvas.fit_frames > 0 && laid_out && self.canvas.graph_rect.is_positive() {
            self.canvas.fit_frames -= 1;
            self.canvas.nav.get_or_insert(NavRequest::FrameAll);
            ctx.request_repaint();
        }
        if let Some(req) = self.canvas.nav.take() {
            let ids: Vec<&String> = match req {
                NavRequest::FrameSelected if !selection.is_empty() => selection.iter().collect(),
                _ => self.model.doc.nodes.iter().map(|n| &n.id).collect(),
            };
            let rects = ids.iter().filter_map(|id| self.canvas.node_rects.get(*id));
            if let Some(b) = graph_nav::bounds(rects) {
                return Some(graph_nav::fit(b, self.canvas.graph_rect));
            }
        }
        let notches = graph_nav::zoom_notches(ctx);
        // egui spreads a wheel zoom over the next frames; only a pinch
        // (`Event::Zoom`) is left to egui, the wheel zooms in our steps.
        let pinch = ctx.input(|i| {
            i.raw
                .events
                .iter()
                .any(|e| matches!(e, egui::Event::Zoom(_)))
        });
        let zooming = !pinch && ctx.input(|i| i.zoom_delta() != 1.0);
        let pointer = ctx.input(|i| i.pointer.hover_pos());
        // Only over the editor itself: not over a window floating above it
        // (the expression editor, the code window zoom their own content).
        let over_editor = |p: &egui::Pos2| {
            self.canvas.graph_rect.contains(*p)
                && ctx
                    .layer_id_at(*p)
                    .is_none_or(|l| l.order == egui::Order::Background)
        };
        match pointer.filter(over_editor) {
            // egui's own Ctrl+wheel zoom is replaced by even steps about the pointer.
            Some(at) if notches != 0.0 || zooming => Some(graph_nav::zoom_about(
                self.canvas.graph_to_screen,
                at,
                notches,
            )),
            _ => None,
        }
    }
}
