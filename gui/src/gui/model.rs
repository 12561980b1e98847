//! The editor's model: the graph document, its history and its problems.
//!
//! The UI never edits the document directly: it queues `Command`s, and
//! `apply_pending` applies them once per frame, together as one undoable step.
//! A scalar drag (`Command::DragScalars`) is the exception: previewed in the
//! document and the running simulation while held, one undo step on release.
//! Wires are checked against the node catalog before they are made, so an
//! incompatible wire is refused with a reason instead of producing an
//! invalid file.

use serde_json::Value;
use std::path::{Path, PathBuf};
use weft_ir::graph::assets::Library;
use weft_ir::graph::catalog::{self, PortType};
use weft_ir::graph::document::{split_endpoint, FORMAT, VERSION};
use weft_ir::graph::scalars::ScalarDecl;
use weft_ir::graph::{FrameDoc, GraphDoc, GraphError, GraphWarning, NodeDoc, WireDoc};

#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    AddNode {
        kind: String,
        pos: [f32; 2],
    },
    RemoveNode {
        id: String,
    },
    /// A data wire `from` = "node.port" → `to` = "node.port", or (exec) "node.pin" → "node".
    Connect {
        from: String,
        to: String,
        exec: bool,
    },
    Disconnect {
        from: String,
        to: String,
        exec: bool,
    },
    SetParam {
        node: String,
        param: String,
        value: Value,
    },
    MoveNode {
        id: String,
        pos: [f32; 2],
    },
    /// Adds a frame (renamed when its id is taken).
    AddFrame {
        frame: FrameDoc,
    },
    /// Replaces the frame with the same id (title, text, colour, place).
    SetFrame {
        frame: FrameDoc,
    },
    RemoveFrame {
        id: String,
    },
    /// Pastes graph JSON (a whole graph or `{"nodes": [...], "wires": [...], "exec": [...]}`):
    /// ids that clash are renamed, positions are offset, wires between pasted nodes are kept.
    Paste {
        json: String,
        offset: [f32; 2],
    },
    /// A group node references another version of its asset (see
    /// `asset_update::apply`).
    UpdateAsset {
        node: String,
        version: u32,
    },
    /// A kernel's whole new `scalars` object while a slider or drag value
    /// is held: previewed, not yet an edit (see `Model::end_drag`).
    DragScalars {
        node: String,
        value: Value,
    },
    /// Packs these nodes into a new group node in their place (Ctrl+G).
    Group {
        ids: Vec<String>,
    },
    /// Unpacks a group node into the shown level (Ctrl+Alt+G).
    Ungroup {
        id: String,
    },
    /// Promotes (`on`) or un-promotes parameter `param` of node `node` of
    /// the entered group onto the group node.
    Promote {
        node: String,
        param: String,
        on: bool,
    },
}

#[path = "group_scope.rs"]
mod group_scope;

/// What a pin carries in the editor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PinKind {
    Data(PortType),
    Exec,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Pin {
    pub name: String,
    pub kind: PinKind,
}

/// Input and output pins of a node, in display order (exec pins first/last);
/// a group node referencing an asset has the pins of the asset in `lib`.
pub fn pins(node: &NodeDoc, lib: &Library) -> (Vec<Pin>, Vec<Pin>) {
    if node.kind == weft_ir::graph::groups::GROUP {
        return super::group_pins::pins(node, lib);
    }
    if let Some(p) = super::group_edit::boundary_pins(node) {
        return p;
    }
    let Some(kind) = catalog::kind(&node.kind) else {
        return (vec![], vec![]);
    };
    let mut ins = Vec::new();
    if kind.exec_in {
        ins.push(Pin {
            name: "exec".into(),
            kind: PinKind::Exec,
        });
    }
    for p in kind.inputs {
        ins.push(Pin {
            name: p.name.into(),
            kind: PinKind::Data(p.ty),
        });
    }
    if kind.dynamic_field_inputs {
        let mut ports = kernel_ports(node);
        for d in declared_ports(node) {
            if !ports.contains(&d) {
                ports.push(d);
            }
        }
        for port in ports {
            ins.push(Pin {
                name: port,
                kind: PinKind::Data(PortType::Field),
            });
        }
    }
    // A field node's `grad` output exists only with `grad: true`.
    let has_grad = node.params.get("grad").and_then(Value::as_bool) == Some(true);
    let mut outs: Vec<Pin> = kind
        .outputs
        .iter()
        .filter(|p| !(kind.family == catalog::Family::Field && p.name == "grad") || has_grad)
        .map(|p| Pin {
            name: p.name.into(),
            kind: PinKind::Data(p.ty),
        })
        .collect();
    for e in kind.exec_outs {
        outs.push(Pin {
            name: (*e).into(),
            kind: PinKind::Exec,
        });
    }
    (ins, outs)
}

/// Kinds that have an input (`want_input`) or output pin of this kind, with that pin's name.
/// A new kernel has no field ports yet, so it is offered only for execution pins.
pub fn compatible_kinds(kind: PinKind, want_input: bool) -> Vec<(&'static str, String)> {
    // The probes reference no asset: no library is read.
    let no_assets = Library::new(vec![]);
    let mut out = Vec::new();
    for k in catalog::kinds() {
        let probe = NodeDoc {
            id: "probe".into(),
            kind: k.name.into(),
            params: Default::default(),
            pos: [0.0, 0.0],
            ..Default::default()
        };
        let (ins, outs) = pins(&probe, &no_assets);
        let list = if want_input { ins } else { outs };
        if let Some(p) = list.iter().find(|p| p.kind == kind) {
            out.push((k.name, p.name.clone()));
        }
    }
    out
}

/// A kernel's field ports, from its code or expression body (empty when the code does not parse).
pub fn kernel_ports(node: &NodeDoc) -> Vec<String> {
    if let Some(code) = node.params.get("code").and_then(Value::as_str) {
        let scalars: Vec<String> = node
            .params
            .get("scalars")
            .and_then(Value::as_object)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        return cached_field_ports(code, scalars);
    }
    match node.params.get("expr") {
        Some(e @ Value::Object(_)) => weft_ir::graph::expr::expr_field_ports(e),
        _ => Vec::new(),
    }
}

/// `weft_ir::lang::field_ports`, remembered per code and scalars: the
/// editor asks for a kernel's pins many times a pass (each pin, wire and
/// pin count), and parsing the code each time made a pass of smoke3d's
/// editor cost 60–130 ms more on a click (issue 26's input latency).
fn cached_field_ports(code: &str, scalars: Vec<String>) -> Vec<String> {
    use std::cell::RefCell;
    use std::collections::HashMap;
    type Key = (String, Vec<String>);
    thread_local! {
        static PORTS: RefCell<HashMap<Key, Vec<String>>> = RefCell::new(HashMap::new());
    }
    let key = (code.to_string(), scalars);
    if let Some(p) = PORTS.with(|c| c.borrow().get(&key).cloned()) {
        return p;
    }
    let ports = weft_ir::lang::field_ports(&key.0, &key.1).unwrap_or_default();
    PORTS.with(|c| {
        let mut c = c.borrow_mut();
        // Edits leave old versions of the code behind: keep the map small.
        if c.len() >= 512 {
            c.clear();
        }
        c.insert(key, ports.clone());
    });
    ports
}

/// The field ports a kernel declares ahead of its code (param `ports`).
pub fn declared_ports(node: &NodeDoc) -> Vec<String> {
    node.params
        .get("ports")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

pub struct Model {
    pub doc: GraphDoc,
    pub path: Option<PathBuf>,
    /// Changed since the last save.
    pub dirty: bool,
    /// Bumped by every applied change (the views rebuild from it).
    pub revision: u64,
    /// Errors of the current document (from loading and validation), each naming its node.
    pub problems: Vec<GraphError>,
    /// Warnings (e.g. a kernel that never runs): the graph still runs.
    pub warnings: Vec<GraphWarning>,
    /// Where an untitled copy came from (an example): relative files
    /// (`init` data) resolve beside it, and the title names it.
    pub origin: Option<PathBuf>,
    /// Messages for the log panel (refused wires, saves, ...).
    pub log: Vec<String>,
    undo: Vec<group_scope::Snapshot>,
    redo: Vec<group_scope::Snapshot>,
    /// The entered groups, outermost first (`doc` is the innermost body).
    scope: Vec<group_scope::Level>,
    /// The entered groups changed since `take_scope_changed`.
    scope_changed: bool,
    queue: Vec<Command>,
    /// The document before the scalar drag in progress, if one is. During
    /// a drag (`Command::DragScalars`) the values go into the document at
    /// once, so the widgets show them, and to the running simulation
    /// (`take_dragged`), but make no undo step, re-validation or new
    /// revision (so no rebuild and no `.npy` re-read); `end_drag`, on
    /// release, makes the whole drag one undo step, as a node drag is.
    drag_start: Option<GraphDoc>,
    /// Kernel nodes whose scalars a drag changed since `take_dragged`.
    dragged: Vec<String>,
    /// The asset library this editor resolves assets from: the graph's
    /// folder (kept current by `validate`) and the chosen user library.
    /// The pins, the add-node menu, the viewport and a bake all use it.
    pub assets: super::asset_menu::AssetLibraries,
}

pub fn empty_doc() -> GraphDoc {
    GraphDoc {
        format: FORMAT.into(),
        version: VERSION,
        description: String::new(),
        seed: 0,
        nodes: vec![],
        wires: vec![],
        exec: vec![],
        frames: vec![],
        asset: None,
    }
}

impl Model {
    pub fn new(doc: GraphDoc, path: Option<PathBuf>) -> Model {
        let mut m = Model {
            doc,
            path,
            dirty: false,
            revision: 0,
            problems: vec![],
            warnings: vec![],
            origin: None,
            log: vec![],
            undo: vec![],
            redo: vec![],
            scope: vec![],
            scope_changed: false,
            queue: vec![],
            drag_start: None,
            dragged: vec![],
            assets: Default::default(),
        };
        m.validate();
        m
    }

    /// Opens a file; a broken file still opens as an empty graph with its errors listed.
    pub fn open(path: &Path) -> Model {
        match GraphDoc::load(path) {
            Ok(mut doc) => {
                let placed = place_stacked_nodes(&mut doc);
                let mut m = Model::new(doc, Some(path.to_path_buf()));
                if placed > 0 {
                    m.log.push(format!(
                        "placed {} nodes that shared a position (the file is unchanged until saved)",
                        placed
                    ));
                }
                m
            }
            Err(e) => {
                let mut m = Model::new(empty_doc(), None);
                m.problems = e.0;
                m.log.push(format!(
                    "could not open {}; nothing was changed on disk",
                    path.display()
                ));
                m
            }
        }
    }

    /// Opens a file as an untitled copy (examples): saving asks for a new
    /// name, so the shipped file is never overwritten.
    pub fn open_copy(path: &Path) -> Model {
        let mut m = Model::open(path);
        if m.path.take().is_some() {
            m.origin = Some(path.to_path_buf());
            m.validate();
        }
        m
    }

    /// The folder that relative paths in the document resolve against.
    pub fn base_dir(&self) -> Option<PathBuf> {
        self.path
            .as_ref()
            .or(self.origin.as_ref())
            .and_then(|p| p.parent())
            .map(Path::to_path_buf)
    }

    /// What the title bar shows: the file, or "untitled" (and what it copies).
    pub fn title(&self) -> String {
        match (&self.path, &self.origin) {
            (Some(p), _) => p.display().to_string(),
            (None, Some(o)) => format!(
                "untitled (copy of {})",
                o.file_name()
                    .map(|f| f.to_string_lossy())
                    .unwrap_or_default()
            ),
            (None, None) => "untitled".into(),
        }
    }

    /// The file name Save As proposes: the graph's own file's, else the
    /// example it was copied from, else `graph.json`.
    pub fn suggested_file_name(&self) -> String {
        self.path
            .as_ref()
            .or(self.origin.as_ref())
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| "graph.json".into())
    }

    pub fn push(&mut self, c: Command) {
        self.queue.push(c);
    }

    /// Applies queued commands (once per frame). Returns true when the document changed.
    pub fn apply_pending(&mut self) -> bool {
        let (drags, edits): (Vec<Command>, Vec<Command>) = std::mem::take(&mut self.queue)
            .into_iter()
            .partition(|c| matches!(c, Command::DragScalars { .. }));
        for c in drags {
            if let Command::DragScalars { node, value } = c {
                if let Err(why) = self.drag_scalars(node, value) {
                    self.log.push(why);
                }
            }
        }
        if edits.is_empty() {
            return false;
        }
        // Another edit ends a drag in progress: the drag is its own step.
        self.end_drag();
        let mut changed = false;
        let before = self.snapshot_of(&self.doc);
        for c in edits {
            match self.apply(c) {
                Ok(true) => changed = true,
                Ok(false) => {}
                Err(why) => self.log.push(why),
            }
        }
        if changed {
            // One frame's commands come from one gesture (a drag of several
            // nodes, deleting a selection): they undo as one step.
            self.undo.push(before);
            self.redo.clear();
            self.touch();
        }
        changed
    }

    /// A step of a scalar drag: into the document, no undo step yet. The
    /// document is copied once per drag (its first step), not per change.
    fn drag_scalars(&mut self, node: String, value: Value) -> Result<(), String> {
        let n = self
            .doc
            .node(&node)
            .filter(|n| n.kind == "kernel")
            .ok_or_else(|| format!("no kernel node '{}'", node))?;
        if n.params.get("scalars") == Some(&value) {
            return Ok(());
        }
        if self.drag_start.is_none() {
            self.drag_start = Some(self.doc.clone());
        }
        let n = self.doc.node_mut(&node).expect("found above");
        n.params.insert("scalars".into(), value);
        if !self.dragged.contains(&node) {
            self.dragged.push(node);
        }
        Ok(())
    }

    /// The promoted parameter that gives `node.param` of the entered level
    /// its value, followed outwards through the entered groups (a promoted
    /// parameter of an inner group that the enclosing group promotes in
    /// turn): the scope level whose group node holds it, and its name.
    fn promoted_chain(&self, node: &str, param: &str) -> Option<(usize, String)> {
        let mut found = None;
        let (mut node, mut param) = (node.to_string(), param.to_string());
        for l in (0..self.scope.len()).rev() {
            let lvl = &self.scope[l];
            let Some(p) = lvl
                .parent
                .node(&lvl.id)
                .and_then(|g| g.group.as_ref())
                .and_then(|g| super::group_edit::promoted(g, &node, &param))
            else {
                break;
            };
            found = Some((l, p.name.clone()));
            node = lvl.id.clone();
            param = p.name.clone();
        }
        found
    }

    /// The rule of `--set` for the inspector: an edit of a parameter (or a
    /// kernel scalar, when `param` is `scalars`) of node `node` of the
    /// entered group that a promoted parameter targets also sets that
    /// promoted parameter, at the outermost level that promotes it, since
    /// its value would overwrite the inner one when the graph is
    /// flattened. `old` is the node before the edit.
    fn set_through_promotions(
        &mut self,
        node: &str,
        old: &NodeDoc,
        param: &str,
        value: &Value,
    ) -> Result<(), String> {
        if self.scope.is_empty() {
            return Ok(());
        }
        let mut changes: Vec<(String, Value)> = Vec::new();
        if param == "scalars" {
            let before = old.params.get("scalars").and_then(Value::as_object);
            for (k, v) in value.as_object().into_iter().flatten() {
                if before.and_then(|b| b.get(k)) == Some(v) {
                    continue;
                }
                // A scalar's value: a plain number or the object's default.
                let x = if v.is_object() {
                    v.get("default")
                } else {
                    Some(v)
                };
                if let Some(x) = x.filter(|x| !x.is_null()) {
                    changes.push((k.clone(), x.clone()));
                }
            }
        } else if !value.is_null() {
            changes.push((param.to_string(), value.clone()));
        }
        for (p, x) in changes {
            let Some((l, name)) = self.promoted_chain(node, &p) else {
                continue;
            };
            let lvl = &mut self.scope[l];
            let g = lvl
                .parent
                .node_mut(&lvl.id)
                .ok_or_else(|| format!("no group node '{}'", lvl.id))?;
            g.params.insert(name, x);
        }
        Ok(())
    }

    /// Kernel nodes whose scalars a drag changed since the last call: the
    /// app sends their values straight to the running simulation.
    pub fn take_dragged(&mut self) -> Vec<String> {
        std::mem::take(&mut self.dragged)
    }

    /// Whether a scalar drag is in progress.
    #[cfg(test)]
    pub fn dragging(&self) -> bool {
        self.drag_start.is_some()
    }

    /// Ends a scalar drag (the pointer was released): what it changed
    /// becomes one undo step and one new revision.
    pub fn end_drag(&mut self) {
        let Some(before) = self.drag_start.take() else {
            return;
        };
        if before == self.doc {
            return;
        }
        // A drag changes scalar values only (names and types change by
        // clicks and typing, which are ordinary edits), so a valid document
        // stays valid exactly when the dragged declarations still parse:
        // the one parser checks them instead of a whole build on the UI
        // thread (which would re-read `.npy` files).
        let values_ok = self.problems.is_empty()
            && self
                .doc
                .nodes
                .iter()
                .filter(|n| before.node(&n.id) != Some(*n))
                .all(|n| {
                    let decls = n.params.get("scalars").and_then(Value::as_object);
                    decls
                        .into_iter()
                        .flatten()
                        .all(|(name, d)| ScalarDecl::parse(name, d).is_ok())
                });
        let dragged: Vec<(String, NodeDoc, Value)> = self
            .doc
            .nodes
            .iter()
            .filter_map(|n| {
                let b = before.node(&n.id).filter(|b| *b != n)?;
                Some((n.id.clone(), b.clone(), n.params.get("scalars")?.clone()))
            })
            .collect();
        let before = self.snapshot_of(&before);
        self.undo.push(before);
        self.redo.clear();
        // After the undo step is taken (it holds the levels above as they
        // were): a dragged scalar that a promoted parameter gives is set
        // through it, as an edit is.
        for (id, old, scalars) in dragged {
            if let Err(why) = self.set_through_promotions(&id, &old, "scalars", &scalars) {
                self.log.push(why);
            }
        }
        if values_ok {
            self.dirty = true;
            self.revision += 1;
        } else {
            self.touch();
        }
    }

    /// Undo steps available.
    pub fn undo_steps(&self) -> usize {
        self.undo.len()
    }

    fn touch(&mut self) {
        self.dirty = true;
        self.revision += 1;
        self.validate();
    }

    pub fn can_undo(&self) -> bool {
        !self.undo.is_empty()
    }
    pub fn can_redo(&self) -> bool {
        !self.redo.is_empty()
    }

    pub fn undo(&mut self) {
        self.end_drag();
        if let Some(d) = self.undo.pop() {
            self.redo.push(self.snapshot_of(&self.doc));
            self.restore(d);
            self.touch();
        }
    }

    pub fn redo(&mut self) {
        self.end_drag();
        if let Some(d) = self.redo.pop() {
            self.undo.push(self.snapshot_of(&self.doc));
            self.restore(d);
            self.touch();
        }
    }

    /// Re-validates the document (build only; compiling happens in the viewport).
    pub fn validate(&mut self) {
        self.assets.set_base(self.base_dir());
        let base_dir = self.assets.base_dir();
        let root = self.root();
        let problems = match self.assets.build(&root, base_dir) {
            Ok(_) => vec![],
            Err(e) => e.0,
        };
        let warnings = weft_ir::graph::lint::warnings(&root);
        drop(root);
        (self.problems, self.warnings) = (problems, warnings);
    }

    /// Problems that name `node`.
    /// The problems shown on node `node`: its own, and for a group node
    /// those of every node inside it (errors name them by their path,
    /// `group/inner`, after flattening).
    pub fn problems_of(&self, node: &str) -> Vec<&GraphError> {
        let node = format!("{}{}", self.scope_prefix(), node);
        self.problems
            .iter()
            .filter(|e| e.node().is_some_and(|n| names_or_holds(&node, n)))
            .collect()
    }

    /// Saves atomically (write, then rename); the document is unchanged on failure.
    pub fn save_as(&mut self, path: &Path) -> Result<(), String> {
        super::platform::write_graph(&self.root(), path)
            .map_err(|e| format!("cannot save {}: {}", path.display(), e))?;
        self.path = Some(path.to_path_buf());
        self.assets.set_base(self.base_dir());
        self.dirty = false;
        self.log.push(format!("saved {}", path.display()));
        Ok(())
    }

    /// The given nodes and the wires among them, as graph JSON for the clipboard.
    pub fn copy_json(&self, ids: &[String]) -> String {
        let inside = |w: &&WireDoc| {
            ids.iter().any(|i| i == split_endpoint(&w.from).0)
                && ids.iter().any(|i| i == split_endpoint(&w.to).0)
        };
        let nodes: Vec<&NodeDoc> = self
            .doc
            .nodes
            .iter()
            .filter(|n| ids.contains(&n.id) && !super::group_edit::is_boundary(&n.id))
            .collect();
        let wires: Vec<&WireDoc> = self.doc.wires.iter().filter(inside).collect();
        let exec: Vec<&WireDoc> = self.doc.exec.iter().filter(inside).collect();
        serde_json::to_string_pretty(&serde_json::json!({"format": FORMAT, "version": VERSION, "nodes": nodes, "wires": wires, "exec": exec})).expect("serializes")
    }

    /// The id the next `AddNode` of `kind` will get (when applied alone).
    pub fn next_id(&self, kind: &str) -> String {
        self.fresh_id(kind)
    }

    fn fresh_id(&self, kind: &str) -> String {
        (1..)
            .map(|n| format!("{}{}", kind, n))
            .find(|id| self.doc.node(id).is_none())
            .expect("unbounded")
    }

    /// Why a wire may not be made, or Ok.
    pub fn check_wire(&self, from: &str, to: &str, exec: bool) -> Result<(), String> {
        let (fnode, fport) = split_endpoint(from);
        let (tnode, tport) = split_endpoint(to);
        let f = self
            .doc
            .node(fnode)
            .ok_or_else(|| format!("no node '{}'", fnode))?;
        let t = self
            .doc
            .node(tnode)
            .ok_or_else(|| format!("no node '{}'", tnode))?;
        if fnode == tnode {
            return Err("a node cannot be wired to itself".into());
        }
        let lib = self.assets.library();
        let (_, outs) = pins(f, &lib);
        let (ins, _) = pins(t, &lib);
        let out = outs
            .iter()
            .find(|p| p.name == fport)
            .ok_or_else(|| format!("'{}' has no output '{}'", fnode, fport))?;
        // An exec wire names the target's pin only where it has several
        // (a group's exec ports, a group's outputs inside it).
        let tname = if exec && tport.is_empty() {
            "exec"
        } else {
            tport
        };
        let inp = ins
            .iter()
            .find(|p| p.name == tname)
            .ok_or_else(|| format!("'{}' has no input '{}'", tnode, tname))?;
        // The loader's rule (`graph::build::resolve`): kernels read a
        // gradient through the field's port, as `port.grad[...]`.
        let to_view = catalog::kind(&t.kind).map(|k| k.family) == Some(catalog::Family::View);
        if f.kind == "field" && fport == "grad" && !to_view {
            return Err(format!(
                "'{}.grad' can only be wired to views; wire '{}.field' to '{}' and write `{}.grad[...]` in the code",
                fnode, fnode, tname, tname
            ));
        }
        match (out.kind, inp.kind) {
            (PinKind::Exec, PinKind::Exec) => Ok(()),
            (PinKind::Data(a), PinKind::Data(b)) if a == b => Ok(()),
            (a, b) => Err(format!(
                "cannot wire {} output '{}.{}' to {} input '{}.{}'",
                describe(a),
                fnode,
                fport,
                describe(b),
                tnode,
                tname
            )),
        }
    }

    /// The id the next new frame gets.
    pub fn next_frame_id(&self) -> String {
        (1..)
            .map(|n| format!("frame{}", n))
            .find(|id| !self.doc.frames.iter().any(|f| &f.id == id))
            .expect("unbounded")
    }

    fn apply(&mut self, c: Command) -> Result<bool, String> {
        match c {
            // `apply_pending` previews drags; applied directly, one is an edit.
            Command::DragScalars { node, value } => self.apply(Command::SetParam {
                node,
                param: "scalars".into(),
                value,
            }),
            Command::UpdateAsset { node, version } => {
                super::asset_update::apply(&mut self.doc, &node, version, &self.assets.library())
            }
            Command::AddFrame { mut frame } => {
                if self.doc.frames.iter().any(|f| f.id == frame.id) {
                    frame.id = self.next_frame_id();
                }
                frame
                    .check()
                    .map_err(|m| format!("frame '{}': {}", frame.id, m))?;
                self.doc.frames.push(frame);
                Ok(true)
            }
            Command::SetFrame { frame } => {
                frame
                    .check()
                    .map_err(|m| format!("frame '{}': {}", frame.id, m))?;
                let slot = self
                    .doc
                    .frames
                    .iter_mut()
                    .find(|f| f.id == frame.id)
                    .ok_or_else(|| format!("no frame '{}'", frame.id))?;
                let changed = *slot != frame;
                *slot = frame;
                Ok(changed)
            }
            Command::RemoveFrame { id } => {
                let before = self.doc.frames.len();
                self.doc.frames.retain(|f| f.id != id);
                Ok(self.doc.frames.len() != before)
            }
            Command::AddNode { kind, pos } => {
                let k =
                    catalog::kind(&kind).ok_or_else(|| format!("unknown node kind '{}'", kind))?;
                let id = self.fresh_id(&kind);
                let mut params = serde_json::Map::new();
                if k.name == "kernel" {
                    params.insert("range".into(), Value::from(vec![64, 64]));
                    params.insert("code".into(), Value::from(kernel_template(2)));
                }
                if matches!(k.name, "dense" | "bitmasked" | "pointer" | "hash") {
                    params.insert("shape".into(), Value::from(vec![64, 64]));
                }
                if k.name == "bit_array" {
                    // 32 one-bit cells along the last axis fill one word.
                    params.insert("shape".into(), Value::from(vec![1, 32]));
                }
                if k.name == "dynamic" {
                    params.insert("shape".into(), Value::from(vec![64]));
                }
                self.doc.nodes.push(NodeDoc {
                    id,
                    kind,
                    params,
                    pos,
                    ..Default::default()
                });
                Ok(true)
            }
            Command::RemoveNode { id } if super::group_edit::is_boundary(&id) => {
                Err("the group's inputs and outputs stay while it is entered".into())
            }
            Command::Group { ids } => {
                let id = super::group_edit::fresh_group_id(&self.doc);
                self.doc =
                    super::group_edit::group_nodes(&self.doc, &ids, &id, &self.assets.library())?;
                self.log
                    .push(format!("grouped {} nodes into '{}'", ids.len(), id));
                Ok(true)
            }
            Command::Ungroup { id } => {
                self.doc = super::group_edit::ungroup(&self.doc, &id, &self.assets.library())?;
                Ok(true)
            }
            Command::Promote { node, param, on } => self.set_promoted(&node, &param, on),
            Command::RemoveNode { id } => {
                let before = self.doc.nodes.len();
                self.doc.nodes.retain(|n| n.id != id);
                let touches =
                    |w: &WireDoc| split_endpoint(&w.from).0 == id || split_endpoint(&w.to).0 == id;
                self.doc.wires.retain(|w| !touches(w));
                self.doc.exec.retain(|w| !touches(w));
                Ok(self.doc.nodes.len() != before)
            }
            Command::Connect { from, to, exec } => {
                self.check_wire(&from, &to, exec)?;
                let tnode = split_endpoint(&to).0.to_string();
                let to = if exec && split_endpoint(&to).1 == "exec" {
                    tnode.clone()
                } else {
                    to
                };
                let list = if exec {
                    &mut self.doc.exec
                } else {
                    &mut self.doc.wires
                };
                // An input takes one wire, and an exec pin drives one node: the new wire replaces the old.
                if exec {
                    list.retain(|w| w.from != from && split_endpoint(&w.to).0 != tnode.as_str());
                } else {
                    list.retain(|w| w.to != to);
                }
                list.push(WireDoc { from, to });
                Ok(true)
            }
            Command::Disconnect { from, to, exec } => {
                let list = if exec {
                    &mut self.doc.exec
                } else {
                    &mut self.doc.wires
                };
                let before = list.len();
                let tnode = split_endpoint(&to).0.to_string();
                list.retain(|w| {
                    !(w.from == from && (w.to == to || (exec && split_endpoint(&w.to).0 == tnode)))
                });
                Ok(list.len() != before)
            }
            Command::SetParam { node, param, value } => {
                let n = self
                    .doc
                    .node_mut(&node)
                    .ok_or_else(|| format!("no node '{}'", node))?;
                if n.params.get(&param) == Some(&value) {
                    return Ok(false);
                }
                let old = n.clone();
                let set = self.set_through_promotions(&node, &old, &param, &value);
                let n = self.doc.node_mut(&node).expect("found above");
                // A kernel whose code is still an untouched template follows
                // its range: two axes give `fn kernel(i: i32, j: i32)`.
                if n.kind == "kernel" && param == "range" {
                    let axes = value.as_array().map(Vec::len).unwrap_or(0);
                    let untouched = n
                        .params
                        .get("code")
                        .and_then(Value::as_str)
                        .is_some_and(|c| (1..=3).any(|a| c == kernel_template(a)));
                    if untouched && (1..=3).contains(&axes) {
                        n.params
                            .insert("code".into(), Value::from(kernel_template(axes)));
                    }
                }
                // A declared port taken away that the code does not use
                // is no pin any more: its wire goes with it (one undo step).
                let before = (n.kind == "kernel" && param == "ports").then(|| declared_ports(n));
                if value.is_null() {
                    n.params.remove(&param);
                } else {
                    n.params.insert(param, value);
                }
                if let Some(before) = before {
                    let (ins, _) = pins(n, &self.assets.library());
                    let gone: Vec<String> = before
                        .into_iter()
                        .filter(|p| !ins.iter().any(|pin| &pin.name == p))
                        .map(|p| format!("{}.{}", node, p))
                        .collect();
                    self.doc.wires.retain(|w| !gone.contains(&w.to));
                }
                set?;
                Ok(true)
            }
            Command::Paste { json, offset } => {
                let v: Value =
                    serde_json::from_str(&json).map_err(|e| format!("nothing to paste: {}", e))?;
                let nodes: Vec<NodeDoc> =
                    serde_json::from_value(v.get("nodes").cloned().unwrap_or(Value::Null))
                        .map_err(|e| format!("nothing to paste: {}", e))?;
                let wires: Vec<WireDoc> = v
                    .get("wires")
                    .cloned()
                    .map(serde_json::from_value)
                    .transpose()
                    .map_err(|e| e.to_string())?
                    .unwrap_or_default();
                let exec: Vec<WireDoc> = v
                    .get("exec")
                    .cloned()
                    .map(serde_json::from_value)
                    .transpose()
                    .map_err(|e| e.to_string())?
                    .unwrap_or_default();
                if nodes.is_empty() {
                    return Ok(false);
                }
                let mut renamed = std::collections::HashMap::new();
                for mut n in nodes {
                    let mut id = n.id.clone();
                    let mut k = 1;
                    while self.doc.node(&id).is_some() {
                        id = if k == 1 {
                            format!("{}_copy", n.id)
                        } else {
                            format!("{}_copy{}", n.id, k)
                        };
                        k += 1;
                    }
                    renamed.insert(n.id.clone(), id.clone());
                    n.id = id;
                    n.pos = [n.pos[0] + offset[0], n.pos[1] + offset[1]];
                    self.doc.nodes.push(n);
                }
                let map = |end: &str| -> Option<String> {
                    let (node, port) = split_endpoint(end);
                    let new = renamed.get(node)?;
                    Some(if port.is_empty() {
                        new.clone()
                    } else {
                        format!("{}.{}", new, port)
                    })
                };
                for w in wires {
                    if let (Some(from), Some(to)) = (map(&w.from), map(&w.to)) {
                        self.doc.wires.push(WireDoc { from, to });
                    }
                }
                for w in exec {
                    if let (Some(from), Some(to)) = (map(&w.from), map(&w.to)) {
                        self.doc.exec.push(WireDoc { from, to });
                    }
                }
                Ok(true)
            }
            Command::MoveNode { id, pos } => {
                let n = self
                    .doc
                    .node_mut(&id)
                    .ok_or_else(|| format!("no node '{}'", id))?;
                if n.pos == pos {
                    return Ok(false);
                }
                n.pos = pos;
                Ok(true)
            }
        }
    }
}

/// The code a new kernel starts from: an entry taking one index per axis of
/// its loop, with a commented example of reading and writing fields.
pub fn kernel_template(axes: usize) -> String {
    let idx = ["i", "j", "k"];
    let params: Vec<String> = idx[..axes.clamp(1, 3)]
        .iter()
        .map(|v| format!("{}: i32", v))
        .collect();
    let at = if axes <= 1 {
        "i".to_string()
    } else {
        format!("({})", idx[..axes.min(3)].join(", "))
    };
    format!(
        "// Runs once per cell of the kernel's range, in parallel.\n\
         // Every field you read or write becomes an input pin; wire a field to it.\n\
         // For example:\n\
         //     let v = src[{at}];\n\
         //     dst[{at}] = 0.5 * v;\n\
         fn kernel({}) {{\n}}\n",
        params.join(", ")
    )
}

fn describe(k: PinKind) -> &'static str {
    match k {
        PinKind::Exec => "an execution",
        PinKind::Data(PortType::Layout) => "a layout",
        PinKind::Data(PortType::Field) => "a field",
    }
}

/// Spreads nodes that sit on the same spot (a hand-written file without
/// `pos`: every node at [0, 0]) into columns by how far down the wires and
/// exec wires they are, below the nodes that have a place of their own.
/// Returns how many nodes moved. Positions never change what runs.
pub fn place_stacked_nodes(doc: &mut GraphDoc) -> usize {
    use std::collections::HashMap;
    let key = |p: [f32; 2]| (p[0].to_bits(), p[1].to_bits());
    let mut count: HashMap<(u32, u32), usize> = HashMap::new();
    for n in &doc.nodes {
        *count.entry(key(n.pos)).or_default() += 1;
    }
    let stacked: Vec<usize> = (0..doc.nodes.len())
        .filter(|&i| count[&key(doc.nodes[i].pos)] > 1)
        .collect();
    if stacked.is_empty() {
        return 0;
    }
    let index: HashMap<&str, usize> = doc
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.id.as_str(), i))
        .collect();
    let node_of = |end: &str| index.get(end.split('.').next().unwrap_or(end)).copied();
    let edges: Vec<(usize, usize)> = doc
        .wires
        .iter()
        .chain(&doc.exec)
        .filter_map(|w| Some((node_of(&w.from)?, node_of(&w.to)?)))
        .filter(|(a, b)| a != b)
        .collect();
    // Longest path from a source; at most one pass per node (cycles stop).
    let mut depth = vec![0usize; doc.nodes.len()];
    for _ in 0..doc.nodes.len() {
        let mut changed = false;
        for &(a, b) in &edges {
            if depth[b] < depth[a] + 1 && depth[a] + 1 < doc.nodes.len() {
                depth[b] = depth[a] + 1;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let placed: Vec<[f32; 2]> = (0..doc.nodes.len())
        .filter(|i| !stacked.contains(i))
        .map(|i| doc.nodes[i].pos)
        .collect();
    let left = placed.iter().map(|p| p[0]).fold(f32::INFINITY, f32::min);
    let below = placed
        .iter()
        .map(|p| p[1])
        .fold(f32::NEG_INFINITY, f32::max);
    let (x0, y0) = if placed.is_empty() {
        (0.0, 0.0)
    } else {
        (left, below + 300.0)
    };
    let mut rows: HashMap<usize, usize> = HashMap::new();
    for &i in &stacked {
        let row = rows.entry(depth[i]).or_default();
        doc.nodes[i].pos = [x0 + 320.0 * depth[i] as f32, y0 + 200.0 * *row as f32];
        *row += 1;
    }
    stacked.len()
}

#[cfg(test)]
mod placement_tests {
    use super::*;

    #[test]
    fn stacked_nodes_spread_into_columns_along_the_wires() {
        let mut doc: GraphDoc = serde_json::from_value(serde_json::json!({
            "format": "weft-graph", "version": 1,
            "nodes": [
                {"id": "cells", "kind": "dense", "params": {"shape": [4]}},
                {"id": "f", "kind": "field", "params": {"type": "f32"}},
                {"id": "k", "kind": "kernel", "params": {"over": "f", "code": "fn kernel(i: i32) {}"}},
                {"id": "tick", "kind": "on_frame"},
                {"id": "note", "kind": "on_start", "pos": [500, 40]}
            ],
            "wires": [{"from": "cells.cells", "to": "f.layout"}, {"from": "f.field", "to": "k.f"}],
            "exec": [{"from": "tick.then", "to": "k"}]
        }))
        .unwrap();
        assert_eq!(place_stacked_nodes(&mut doc), 4);
        let pos = |id: &str| doc.node(id).unwrap().pos;
        // Columns follow the wires: cells, then f (and tick), then k.
        assert!(pos("cells")[0] < pos("f")[0] && pos("f")[0] < pos("k")[0]);
        assert_eq!(pos("tick")[0], pos("cells")[0]);
        // Nobody shares a spot any more; the placed node stays; the rest go below it.
        let mut all: Vec<(u32, u32)> = doc
            .nodes
            .iter()
            .map(|n| (n.pos[0].to_bits(), n.pos[1].to_bits()))
            .collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 5);
        assert_eq!(pos("note"), [500.0, 40.0]);
        assert!(pos("cells")[1] > 40.0);
        // A laid-out document is left alone.
        assert_eq!(place_stacked_nodes(&mut doc), 0);
    }
}

#[cfg(test)]
mod drag_tests {
    use super::*;

    /// The value the kernel `P1/sA/k` of promoted_three_levels.json gets
    /// for its scalar `s`, from the whole document as it flattens.
    fn flattened_s(m: &Model) -> Value {
        let lib = weft_ir::graph::assets::Library::new(vec![]);
        let flat = weft_ir::graph::groups::flatten(&m.root(), &lib).unwrap();
        flat.node("P1/sA/k").unwrap().params["scalars"]["s"].clone()
    }

    #[test]
    fn an_inner_scalar_two_groups_down_is_set_through_both_promotions() {
        // P1 promotes gain (default 2) onto sA's s, which targets k.s.
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/groups/promoted_three_levels.json");
        let doc = GraphDoc::load(&path).unwrap();
        let mut m = Model::new(doc.clone(), Some(path));
        assert_eq!(flattened_s(&m), Value::from(2.0));
        m.enter("P1").unwrap();
        m.enter("sA").unwrap();
        // An edit in the inspector (the whole scalars object, as it sends).
        m.push(Command::SetParam {
            node: "k".into(),
            param: "scalars".into(),
            value: serde_json::json!({"s": -1.5}),
        });
        assert!(m.apply_pending());
        assert_eq!(flattened_s(&m), Value::from(-1.5), "what the kernel gets");
        assert_eq!(
            m.root().node("P1").unwrap().params["gain"],
            Value::from(-1.5)
        );
        m.undo();
        assert_eq!(flattened_s(&m), Value::from(2.0), "undo takes it back");
        // A slider drag, on release.
        for x in [0.5, 0.75] {
            m.push(Command::DragScalars {
                node: "k".into(),
                value: serde_json::json!({"s": x}),
            });
            m.apply_pending();
        }
        m.end_drag();
        assert_eq!(flattened_s(&m), Value::from(0.75));
        m.undo();
        assert_eq!(flattened_s(&m), Value::from(2.0), "one undo for the drag");
        assert_eq!(m.scope_ids(), vec!["P1".to_string(), "sA".to_string()]);
    }

    fn with_alpha(m: &Model, alpha: f64) -> Value {
        let mut s = m.doc.node("diffuse").unwrap().params["scalars"].clone();
        s["alpha"]["default"] = Value::from(alpha);
        s
    }

    #[test]
    fn a_scalar_drag_is_one_undo_step_made_on_release() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../graphs/heat.json");
        let doc = GraphDoc::load(&path).unwrap();
        let mut m = Model::new(doc.clone(), Some(path));
        let rev = m.revision;
        // heat's alpha starts at 0.2: the drag ends elsewhere (0.1).
        for k in 1..=20 {
            let value = with_alpha(&m, 0.005 * k as f64);
            m.push(Command::DragScalars {
                node: "diffuse".into(),
                value,
            });
            assert!(!m.apply_pending(), "a drag step is no edit");
            assert_eq!(m.take_dragged(), vec!["diffuse".to_string()]);
            assert_eq!(m.revision, rev, "no new revision: nothing rebuilds");
            assert!(!m.can_undo() && m.dragging());
        }
        assert_eq!(
            m.doc.node("diffuse").unwrap().params["scalars"]["alpha"]["default"],
            Value::from(0.005 * 20.0),
            "the document shows the value under the pointer"
        );
        m.end_drag();
        assert_eq!((m.undo_steps(), m.revision), (1, rev + 1));
        assert!(m.problems.is_empty() && m.dirty && !m.dragging());
        m.undo();
        assert_eq!(m.doc, doc, "one undo takes the whole drag back");
    }

    #[test]
    fn an_edit_during_a_drag_ends_it_and_a_bad_drag_is_reported_on_release() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../graphs/heat.json");
        let mut m = Model::new(GraphDoc::load(&path).unwrap(), Some(path));
        let value = with_alpha(&m, 0.1);
        m.push(Command::DragScalars {
            node: "diffuse".into(),
            value,
        });
        m.apply_pending();
        m.push(Command::MoveNode {
            id: "diffuse".into(),
            pos: [0.0, 0.0],
        });
        assert!(m.apply_pending());
        assert_eq!(m.undo_steps(), 2, "the drag, then the move");
        // A value outside the declared range (the inspector's drag values
        // can reach it through `max`) is found by validation on release.
        let mut value = with_alpha(&m, 0.2);
        value["alpha"]["max"] = Value::from(0.1);
        m.push(Command::DragScalars {
            node: "diffuse".into(),
            value,
        });
        m.apply_pending();
        m.end_drag();
        let p = m.problems_of("diffuse");
        assert!(
            p.iter()
                .any(|e| e.to_string().contains("outside its range")),
            "{:?}",
            p
        );
    }
}

#[cfg(test)]
mod save_name_tests {
    use super::*;

    #[test]
    fn save_as_proposes_the_graphs_own_name() {
        let mut m = Model::new(empty_doc(), Some(PathBuf::from("/tmp/x/my_sim.json")));
        assert_eq!(m.suggested_file_name(), "my_sim.json");
        m.path = None;
        m.origin = Some(PathBuf::from("graphs/heat.json"));
        assert_eq!(m.suggested_file_name(), "heat.json");
        m.origin = None;
        assert_eq!(m.suggested_file_name(), "graph.json");
    }
}

/// Whether the error path `path` (`smoke/advect/step`) is node `node` or a
/// node inside the group `node`.
pub fn names_or_holds(node: &str, path: &str) -> bool {
    path == node
        || path
            .strip_prefix(node)
            .is_some_and(|rest| rest.starts_with('/'))
}
