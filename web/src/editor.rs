//! The editor page: the desktop app's editor (`weft_gui`: node editor,
//! inspector, code editor, Problems, viewport, timeline) on the page's
//! canvas, with the simulation on its own WebGPU device (the VM where
//! WebGPU is missing), and the editor's test hook. Nothing here is
//! browser-specific (that is `web.rs`), so it builds natively too.
//!
//! The hook takes commands as JSON (`Editor::command`) and reports the
//! editor's state (`Editor::report`): what the page's tests check.

use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use weft_gui::gui::model::Command;
use weft_gui::gui::viewport::Viewport;
use weft_gui::gui::{GuiOptions, WeftApp};
use weft_ir::ir::layout::root_of;
use weft_ir::ir::FieldId;
use weft_runtime::engine::PendingRead;
use weft_runtime::memory::extract_field;
use weft_runtime::wgpu_backend::WgpuContext;

use crate::app::FieldResult;

/// The panels the hook reports on, by their egui ids.
const PANELS: &[&str] = &[
    "menu", "side", "viewport", "problems", "log", "status", "timeline",
];

/// A field read the hook asked for, on its way back.
struct Read {
    name: String,
    field: FieldId,
    pending: Option<PendingRead>,
}

pub struct Editor {
    pub app: WeftApp,
    /// Run until this frame, then pause (the hook's `frames`).
    target: Option<i32>,
    /// Reset and run to this frame once the viewport has built the
    /// document as edited (the hook's `run`).
    rerun: Option<i32>,
    reads: Vec<Read>,
    done: Vec<FieldResult>,
    errors: Vec<String>,
    panels: Vec<(String, [f32; 2])>,
    code_window: bool,
}

impl Editor {
    /// The editor with `graph` open, `sets` (`NODE.PARAM=VALUE`, as `weft
    /// run --set`) applied as edits.
    pub fn new(
        gpu: Result<Arc<WgpuContext>, String>,
        graph: PathBuf,
        sets: &[String],
    ) -> Result<Editor, String> {
        let opts = GuiOptions {
            graph: Some(graph),
            ..Default::default()
        };
        let mut app = WeftApp::with_viewport(Viewport::with_own_gpu(gpu), opts);
        app.viewport.playing = true;
        let mut e = Editor {
            app,
            target: None,
            rerun: None,
            reads: Vec::new(),
            done: Vec::new(),
            errors: Vec::new(),
            panels: Vec::new(),
            code_window: false,
        };
        for s in sets {
            let (path, value) = s
                .split_once('=')
                .ok_or_else(|| format!("set '{}': expected NODE.PARAM=VALUE", s))?;
            let (node, param) = path
                .split_once('.')
                .ok_or_else(|| format!("set '{}': expected NODE.PARAM=VALUE", s))?;
            e.set(node, param, value)?;
        }
        Ok(e)
    }

    /// A parameter edit, as the inspector makes one. VALUE is JSON, or a
    /// string when it is not.
    fn set(&mut self, node: &str, param: &str, value: &str) -> Result<(), String> {
        if self.app.model.doc.node(node).is_none() {
            return Err(format!("set: the graph has no node '{}'", node));
        }
        let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.into()));
        self.app.model.push(Command::SetParam {
            node: node.into(),
            param: param.into(),
            value,
        });
        Ok(())
    }

    /// A command from the hook: `{op: "set", node, param, value}`,
    /// `{op: "frames", n}` (play to frame n, then pause), `{op: "run",
    /// frames}` (once the edits are built: Reset, then play to `frames`), `{op: "read",
    /// fields: [...]}` (read fields back once paused), `{op: "code", node}`
    /// (open a node's code editor), `{op: "save"}` (File > Save As: the
    /// graph is downloaded), `{op: "open"}` (File > Open: the page's file
    /// picker, which a browser shows only just after a user's click).
    pub fn command(&mut self, c: &Value) -> Result<(), String> {
        let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or_default();
        match s("op") {
            "set" => {
                let value = c.get("value").cloned().unwrap_or(Value::Null);
                self.set(s("node"), s("param"), &value.to_string())
            }
            "frames" => {
                let n = c.get("n").and_then(Value::as_i64).unwrap_or(0) as i32;
                self.target = Some(n);
                self.app.viewport.playing = true;
                Ok(())
            }
            "run" => {
                // Once the edits before it are built: Reset, then play to n.
                let n = c.get("frames").and_then(Value::as_i64).unwrap_or(0) as i32;
                self.app.viewport.playing = false;
                self.rerun = Some(n);
                Ok(())
            }
            "read" => {
                let names: Vec<String> = c
                    .get("fields")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default();
                let sim = self
                    .app
                    .viewport
                    .sim
                    .as_ref()
                    .ok_or("read: no simulation yet")?;
                for n in names {
                    let field = sim
                        .field(&n)
                        .ok_or_else(|| format!("read: the simulation has no field '{}'", n))?;
                    self.reads.push(Read {
                        name: n,
                        field,
                        pending: None,
                    });
                }
                Ok(())
            }
            "code" => {
                self.app.bodies.open_code = Some(s("node").into());
                Ok(())
            }
            "save" => {
                self.app.save_as();
                Ok(())
            }
            "open" => {
                self.app.open_file();
                Ok(())
            }
            op => Err(format!(
                "unknown command '{}' (set, run, frames, read, code, save, open)",
                op
            )),
        }
    }

    /// What the hook reports: the document, the panels drawn, the run,
    /// and the fields read back.
    pub fn report(&self) -> Value {
        let m = &self.app.model;
        let v = &self.app.viewport;
        let problems: Vec<String> = m.problems.iter().map(|p| p.to_string()).collect();
        json!({
            "title": m.title(),
            "nodes": m.doc.nodes.len(),
            // The document's nodes the node editor has laid out.
            "laid_out": m.doc.nodes.iter().filter(|n| self.app.canvas.node_rects.contains_key(&n.id)).count(),
            "problems": problems,
            "panels": self.panels.iter().map(|(n, s)| json!({"id": n, "size": s})).collect::<Vec<_>>(),
            "code_window": self.code_window,
            "frame": v.frame(),
            "backend": v.running.as_ref().map(|r| r.backend_name),
            "compiling": v.compiling(),
            "playing": v.playing,
            "error": v.error,
            "fault": v.fault.as_ref().map(|f| format!("{:?}", f)),
            "status": self.app.status,
            "log": m.log.iter().rev().take(8).collect::<Vec<_>>(),
            "reading": self.reads.len(),
            "running_to": self.target.or(self.rerun),
            "errors": self.errors,
        })
    }

    /// The fields read back so far (taken once).
    pub fn take_fields(&mut self) -> Vec<FieldResult> {
        std::mem::take(&mut self.done)
    }

    /// Before the editor's pass: stop at the target frame.
    fn before(&mut self) {
        let v = &mut self.app.viewport;
        if let Some(n) = self.rerun {
            let built = v.built_revision() == Some(self.app.model.revision);
            if built && v.is_idle() && v.sim.is_some() {
                v.reset();
                v.playing = true;
                self.rerun = None;
                self.target = Some(n);
            }
        }
        if let Some(t) = self.target {
            if self.app.viewport.frame() >= t {
                self.app.viewport.playing = false;
                self.target = None;
            }
        }
    }

    /// After the pass: what was drawn, and the reads asked for.
    fn after(&mut self, ctx: &egui::Context) {
        self.panels = PANELS
            .iter()
            .filter_map(|p| {
                egui::containers::panel::PanelState::load(ctx, egui::Id::new(*p))
                    .map(|s| (p.to_string(), [s.outer_rect.width(), s.outer_rect.height()]))
            })
            .collect();
        self.code_window = self.app.bodies.open_code.as_ref().is_some_and(|id| {
            // A window's area id is its title's text, an `Option<&str>`
            // when hashed (egui's `Window::new`).
            ctx.memory(|m| m.area_rect(egui::Id::new(Some(format!("code · {}", id)))))
                .is_some()
        });
        if let Err(e) = self.advance_reads() {
            self.errors.push(e);
            self.reads.clear();
        }
    }

    /// Reads fields back when the simulation is home and paused: at once
    /// on the VM, through `start_read` on wgpu.
    fn advance_reads(&mut self) -> Result<(), String> {
        if self.reads.is_empty() || self.target.is_some() || self.app.viewport.is_away() {
            return Ok(());
        }
        let Some(sim) = self.app.viewport.sim.as_ref() else {
            return Ok(());
        };
        let field_result = |name: &str, f: FieldId, words: Vec<u32>| FieldResult {
            name: name.into(),
            float: sim.program.fields[f].ty.is_float(),
            words,
        };
        if !sim.engine().on_device() {
            for r in std::mem::take(&mut self.reads) {
                let words = sim.read_field(r.field).map_err(|e| e.to_string())?;
                self.done.push(field_result(&r.name, r.field, words));
            }
            return Ok(());
        }
        let engine = sim.engine();
        if !engine.finished().map_err(|e| e.to_string())? {
            return Ok(());
        }
        for r in &mut self.reads {
            if r.pending.is_none() {
                let root = root_of(&sim.program, sim.program.fields[r.field].layout);
                r.pending = Some(engine.start_read(root));
            }
        }
        let mut waiting = Vec::new();
        for r in std::mem::take(&mut self.reads) {
            match r.pending.as_ref().and_then(|p| p.take()) {
                Some(words) => {
                    let root = words.map_err(|e| e.to_string())?;
                    let words = extract_field(&sim.program, r.field, &root);
                    self.done.push(field_result(&r.name, r.field, words));
                }
                None => waiting.push(r),
            }
        }
        self.reads = waiting;
        Ok(())
    }
}

impl eframe::App for Editor {
    fn ui(&mut self, ui: &mut egui::Ui, frame: &mut eframe::Frame) {
        self.before();
        eframe::App::ui(&mut self.app, ui, frame);
        let ctx = ui.ctx().clone();
        self.after(&ctx);
        if self.target.is_some() || !self.reads.is_empty() {
            ctx.request_repaint();
        }
    }
}
