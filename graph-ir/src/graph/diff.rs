//! The one document diff: what an edit between two graph documents does
//! to a simulation built from the first. Every place that asks "does this
//! edit change the simulation?" asks here: `weft run --resume` before it
//! continues a snapshot (`run_differences`), the bake's staleness check
//! (which hashes `simulated`), the app's viewport (update in place, redraw,
//! rebuild) and its frame cache (kept unless the state changes).
//!
//! `classify` walks both documents (groups' inline bodies included) and
//! names each difference by the `Part` of the document it touches; one
//! table, `Part::effect`, says what a change to that part does:
//!
//! | part | effect |
//! |---|---|
//! | the description, editor positions (nodes and expression nodes), frames and comments, doc texts, a scalar's bounds | nothing |
//! | a view node (added, removed, kind, parameters, its camera), a wire to or from a view | view only: the state stays, it is drawn anew |
//! | the value of a kernel scalar (same name, same type), in a graph without parameter expressions | scalars: the running program takes the new values |
//! | a scalar value in a graph with parameter expressions (one may read it), the seed, any other node change (kind, parameter, code or expression body, bypass, asset reference, a group's interface or promoted parameters), any other wire | rebuild |
//!
//! The effect of an edit is the strongest effect of its differences.
//! `simulated` is the document less every part whose change is below
//! `Effect::Scalars`, by the same table: two documents have the same
//! `simulated` form exactly when `classify` finds nothing that changes the
//! state. Not seen here: a change inside an asset file of the library
//! (the document names the asset and version, not its body).

use super::catalog::{self, Family};
use super::document::{GraphDoc, GroupDoc, GroupPort, NodeDoc, PromotedParam, WireDoc};
use super::refs::is_expr;
use super::scalars::ScalarDecl;
use serde_json::{Map, Value};

/// What an edit does to a simulation built from the document before it,
/// weakest first (an edit's effect is its strongest difference's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Effect {
    /// Nothing simulated or drawn changes.
    Nothing,
    /// Only how the state is drawn: the state and the frame cache stay.
    View,
    /// Kernel scalars take new values: the running program takes them
    /// without a rebuild, but frames simulated before are another
    /// simulation's.
    Scalars,
    /// The program must be built again.
    Rebuild,
}

/// A part of a graph document an edit can touch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The document's description.
    Description,
    /// An editor position: a node's `pos`, an expression node's `pos`.
    Position,
    /// A frame or comment (at any level of groups).
    Frame,
    /// A doc text: a group's, a group port's, a promoted parameter's, an
    /// asset interface's, a kernel scalar's `doc`.
    Note,
    /// A kernel scalar's `min` / `max` (they check values the editor and
    /// `--set` give; the running program reads the value only).
    ScalarBounds,
    /// A view node's `camera`.
    ViewCamera,
    /// A view node: added, removed, its kind or another parameter.
    View,
    /// A data wire to or from a view node.
    ViewWire,
    /// The value of a kernel scalar, same name and type, in a graph without
    /// parameter expressions.
    ScalarValue,
    /// The value of a kernel scalar in a graph with parameter expressions
    /// (`= ch(..)`, `frame`): an expression may read it, and the program
    /// holds what they evaluated to.
    ReferencedScalar,
    /// The seed of `random()`.
    Seed,
    /// `format` / `version`.
    Header,
    /// Any other change to a non-view node: added, removed, its kind, a
    /// parameter (code, expression body, shape, declared scalars), a
    /// group node's promoted parameters.
    Node,
    /// A node's `bypass`.
    Bypass,
    /// A group node's asset reference or its inline body appearing or going.
    Asset,
    /// A group's ports or promoted parameter definitions, an asset file's
    /// interface.
    GroupInterface,
    /// A data or execution wire not touching a view.
    Wire,
}

impl Part {
    /// Every part, for tests and docs.
    pub const ALL: [Part; 17] = [
        Part::Description,
        Part::Position,
        Part::Frame,
        Part::Note,
        Part::ScalarBounds,
        Part::ViewCamera,
        Part::View,
        Part::ViewWire,
        Part::ScalarValue,
        Part::ReferencedScalar,
        Part::Seed,
        Part::Header,
        Part::Node,
        Part::Bypass,
        Part::Asset,
        Part::GroupInterface,
        Part::Wire,
    ];

    /// The table: what a change to this part does.
    pub fn effect(self) -> Effect {
        match self {
            Part::Description | Part::Position | Part::Frame | Part::Note | Part::ScalarBounds => {
                Effect::Nothing
            }
            Part::ViewCamera | Part::View | Part::ViewWire => Effect::View,
            Part::ScalarValue => Effect::Scalars,
            Part::ReferencedScalar
            | Part::Seed
            | Part::Header
            | Part::Node
            | Part::Bypass
            | Part::Asset
            | Part::GroupInterface
            | Part::Wire => Effect::Rebuild,
        }
    }

    /// Whether a change to this part changes the simulated state.
    fn counts(self) -> bool {
        self.effect() >= Effect::Scalars
    }
}

/// One difference between two documents.
#[derive(Clone, Debug, PartialEq)]
pub struct Difference {
    pub part: Part,
    /// One line naming the node (by its path inside groups) or wire.
    pub text: String,
}

/// A kernel scalar's new value (`Part::ScalarValue`).
#[derive(Clone, Debug, PartialEq)]
pub struct ScalarEdit {
    /// The kernel node as the running program names it (`group/inner`
    /// inside groups).
    pub node: String,
    pub name: String,
    pub value: f64,
}

/// What an edit changes: every difference, in a stable order, and the new
/// values of the scalars it changes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Edit {
    pub differences: Vec<Difference>,
    pub scalars: Vec<ScalarEdit>,
}

impl Edit {
    /// The strongest effect of the differences.
    pub fn effect(&self) -> Effect {
        self.differences
            .iter()
            .map(|d| d.part.effect())
            .max()
            .unwrap_or(Effect::Nothing)
    }

    /// Whether some difference only changes how the state is drawn.
    pub fn changes_views(&self) -> bool {
        self.differences
            .iter()
            .any(|d| d.part.effect() == Effect::View)
    }

    /// Whether every drawing difference is a view's camera (a running
    /// simulation can take those without a rebuild).
    pub fn views_are_cameras_only(&self) -> bool {
        self.differences
            .iter()
            .filter(|d| d.part.effect() == Effect::View)
            .all(|d| d.part == Part::ViewCamera)
    }

    /// The differences that change the simulated state, one line each.
    pub fn state_differences(&self) -> Vec<String> {
        self.differences
            .iter()
            .filter(|d| d.part.counts())
            .map(|d| d.text.clone())
            .collect()
    }
}

fn is_view(n: &NodeDoc) -> bool {
    catalog::kind(&n.kind).is_some_and(|k| k.family == Family::View)
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 60 {
        format!("{}…", s.chars().take(60).collect::<String>())
    } else {
        s
    }
}

fn show(v: Option<&Value>) -> String {
    v.map(short).unwrap_or_else(|| "unset".into())
}

/// Whether any node parameter (or kernel scalar) of these nodes, or of
/// their inline groups' nodes, is a parameter expression.
fn has_exprs(nodes: &[NodeDoc]) -> bool {
    nodes.iter().any(|n| {
        n.params.values().any(is_expr)
            || n.params
                .get("scalars")
                .and_then(Value::as_object)
                .is_some_and(|m| {
                    m.values()
                        .any(|d| is_expr(d) || d.get("default").is_some_and(is_expr))
                })
            || n.group.as_ref().is_some_and(|g| has_exprs(&g.nodes))
    })
}

/// Classifies the edit from `before` to `now` (see the module table).
pub fn classify(before: &GraphDoc, now: &GraphDoc) -> Edit {
    let mut w = Walk {
        edit: Edit::default(),
        exprs: has_exprs(&before.nodes) || has_exprs(&now.nodes),
    };
    if before.format != now.format || before.version != now.version {
        w.add(
            Part::Header,
            format!(
                "the format was {} version {}, is {} version {}",
                before.format, before.version, now.format, now.version
            ),
        );
    }
    if before.seed != now.seed {
        w.add(
            Part::Seed,
            format!("the seed was {}, is {}", before.seed, now.seed),
        );
    }
    w.level("", Level::of_doc(before), Level::of_doc(now));
    if before.description != now.description {
        w.add(Part::Description, "the description changed".into());
    }
    match (&before.asset, &now.asset) {
        (None, None) => {}
        (Some(a), Some(b)) => {
            let interface = |a: &super::document::AssetInfo| {
                (
                    a.name.clone(),
                    a.version,
                    ports(&a.inputs),
                    ports(&a.outputs),
                    promoted(&a.params),
                )
            };
            if interface(a) != interface(b) {
                w.add(Part::GroupInterface, "the asset interface changed".into());
            } else if a != b {
                w.add(
                    Part::Note,
                    "a doc text of the asset interface changed".into(),
                );
            }
        }
        _ => w.add(Part::GroupInterface, "the asset interface changed".into()),
    }
    w.edit
}

/// The lines `weft run --resume` refuses a snapshot with: every difference
/// that changes the simulated state (empty: the same simulation). `before`
/// is the snapshot's document, `now` the graph being run.
pub fn run_differences(before: &GraphDoc, now: &GraphDoc) -> Vec<String> {
    classify(before, now).state_differences()
}

/// One level of nodes: a document's or an inline group body's.
struct Level<'a> {
    nodes: &'a [NodeDoc],
    wires: &'a [WireDoc],
    exec: &'a [WireDoc],
    frames: &'a [super::document::FrameDoc],
}

impl<'a> Level<'a> {
    fn of_doc(d: &'a GraphDoc) -> Level<'a> {
        Level {
            nodes: &d.nodes,
            wires: &d.wires,
            exec: &d.exec,
            frames: &d.frames,
        }
    }
    fn of_group(g: &'a GroupDoc) -> Level<'a> {
        Level {
            nodes: &g.nodes,
            wires: &g.wires,
            exec: &g.exec,
            frames: &g.frames,
        }
    }
    fn node(&self, id: &str) -> Option<&'a NodeDoc> {
        self.nodes.iter().find(|n| n.id == id)
    }
    fn views(&self) -> Vec<&'a str> {
        self.nodes
            .iter()
            .filter(|n| is_view(n))
            .map(|n| n.id.as_str())
            .collect()
    }
}

/// Ports less their doc texts.
fn ports(p: &[GroupPort]) -> Vec<GroupPort> {
    p.iter()
        .map(|p| GroupPort {
            doc: String::new(),
            ..p.clone()
        })
        .collect()
}

/// Promoted parameters less their doc texts.
fn promoted(p: &[PromotedParam]) -> Vec<PromotedParam> {
    p.iter()
        .map(|p| PromotedParam {
            doc: String::new(),
            ..p.clone()
        })
        .collect()
}

/// An expression body less its nodes' editor positions.
fn expr_without_positions(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(nodes) = v.get_mut("nodes").and_then(Value::as_array_mut) {
        for n in nodes {
            if let Some(o) = n.as_object_mut() {
                o.remove("pos");
            }
        }
    }
    v
}

struct Walk {
    edit: Edit,
    /// Either document has parameter expressions.
    exprs: bool,
}

impl Walk {
    fn add(&mut self, part: Part, text: String) {
        self.edit.differences.push(Difference { part, text });
    }

    fn level(&mut self, prefix: &str, b: Level, n: Level) {
        let path = |id: &str| format!("{}{}", prefix, id);
        for x in b.nodes {
            let id = path(&x.id);
            match n.node(&x.id) {
                None if is_view(x) => self.add(
                    Part::View,
                    format!("view '{}' ({}) was removed", id, x.kind),
                ),
                None => self.add(
                    Part::Node,
                    format!("node '{}' ({}) was removed", id, x.kind),
                ),
                Some(y) => self.node(&id, x, y),
            }
        }
        for y in n.nodes {
            if b.node(&y.id).is_none() {
                let id = path(&y.id);
                if is_view(y) {
                    self.add(Part::View, format!("view '{}' ({}) was added", id, y.kind));
                } else {
                    self.add(Part::Node, format!("node '{}' ({}) was added", id, y.kind));
                }
            }
        }
        let (vb, vn) = (b.views(), n.views());
        let at_view = |w: &WireDoc, views: &[&str]| {
            let node = |end: &str| end.split('.').next().unwrap_or("").to_string();
            views.contains(&node(&w.to).as_str()) || views.contains(&node(&w.from).as_str())
        };
        for (what, wb, wn) in [
            ("wire", b.wires, n.wires),
            ("execution wire", b.exec, n.exec),
        ] {
            for w in wb.iter().filter(|w| !wn.contains(w)) {
                let part = if at_view(w, &vb) {
                    Part::ViewWire
                } else {
                    Part::Wire
                };
                self.add(
                    part,
                    format!(
                        "{} {}{} -> {}{} was removed",
                        what, prefix, w.from, prefix, w.to
                    ),
                );
            }
            for w in wn.iter().filter(|w| !wb.contains(w)) {
                let part = if at_view(w, &vn) {
                    Part::ViewWire
                } else {
                    Part::Wire
                };
                self.add(
                    part,
                    format!(
                        "{} {}{} -> {}{} was added",
                        what, prefix, w.from, prefix, w.to
                    ),
                );
            }
        }
        if b.frames != n.frames {
            self.add(
                Part::Frame,
                if prefix.is_empty() {
                    "the frames or comments changed".into()
                } else {
                    format!(
                        "the frames or comments of group '{}' changed",
                        prefix.trim_end_matches('/')
                    )
                },
            );
        }
    }

    /// Two nodes of the same id (`id`: its path).
    fn node(&mut self, id: &str, x: &NodeDoc, y: &NodeDoc) {
        let view = is_view(x) && is_view(y);
        if x.kind != y.kind {
            let part = if view { Part::View } else { Part::Node };
            self.add(
                part,
                format!("node '{}' was a {}, is a {}", id, x.kind, y.kind),
            );
            return;
        }
        let mut keys: Vec<&String> = x.params.keys().chain(y.params.keys()).collect();
        keys.sort();
        keys.dedup();
        for k in keys {
            let (a, b) = (x.params.get(k), y.params.get(k));
            if a == b {
                continue;
            }
            let text = format!(
                "node '{}' param '{}' was {}, is {}",
                id,
                k,
                show(a),
                show(b)
            );
            if view {
                let part = if k == "camera" {
                    Part::ViewCamera
                } else {
                    Part::View
                };
                self.add(part, text);
            } else if k == "scalars" && x.kind == "kernel" {
                self.scalars(id, a, b, text);
            } else if k == "expr" && a.map(expr_without_positions) == b.map(expr_without_positions)
            {
                self.add(
                    Part::Position,
                    format!("node '{}': expression nodes moved", id),
                );
            } else {
                self.add(Part::Node, text);
            }
        }
        if x.pos != y.pos {
            self.add(Part::Position, format!("node '{}' moved", id));
        }
        if x.bypass != y.bypass {
            let part = if view { Part::View } else { Part::Bypass };
            self.add(
                part,
                format!("node '{}' bypass was {}, is {}", id, x.bypass, y.bypass),
            );
        }
        if x.asset != y.asset {
            let name = |a: &Option<super::document::AssetRef>| match a {
                Some(a) => format!("{} v{}", a.name, a.version),
                None => "none".into(),
            };
            self.add(
                Part::Asset,
                format!(
                    "node '{}' asset was {}, is {}",
                    id,
                    name(&x.asset),
                    name(&y.asset)
                ),
            );
        }
        match (&x.group, &y.group) {
            (Some(gx), Some(gy)) => self.group(id, gx, gy),
            (None, None) => {}
            (None, Some(_)) => self.add(
                Part::Asset,
                format!("group '{}' has an inline body now", id),
            ),
            (Some(_), None) => self.add(
                Part::Asset,
                format!("group '{}' has no inline body now", id),
            ),
        }
    }

    fn group(&mut self, id: &str, x: &GroupDoc, y: &GroupDoc) {
        if interface(x) != interface(y) {
            self.add(
                Part::GroupInterface,
                format!("group '{}': its ports or promoted parameters changed", id),
            );
        } else if (&x.doc, &x.inputs, &x.outputs, &x.params)
            != (&y.doc, &y.inputs, &y.outputs, &y.params)
        {
            self.add(Part::Note, format!("group '{}': a doc text changed", id));
        }
        self.level(&format!("{}/", id), Level::of_group(x), Level::of_group(y));
    }

    /// A kernel's `scalars` changed from `a` to `b`: new values of the
    /// same scalars, or new declarations.
    fn scalars(&mut self, id: &str, a: Option<&Value>, b: Option<&Value>, text: String) {
        let empty = Map::new();
        let obj = |v: Option<&'_ Value>| -> Option<Map<String, Value>> {
            match v {
                None => Some(empty.clone()),
                Some(v) => v.as_object().cloned(),
            }
        };
        let (Some(oa), Some(ob)) = (obj(a), obj(b)) else {
            return self.add(Part::Node, text);
        };
        if oa.len() != ob.len() || oa.keys().any(|k| !ob.contains_key(k)) {
            return self.add(Part::Node, text);
        }
        let mut part = Part::Note;
        let mut edits = Vec::new();
        for (name, da) in &oa {
            let db = &ob[name];
            if da == db {
                continue;
            }
            let (Ok(pa), Ok(pb)) = (ScalarDecl::parse(name, da), ScalarDecl::parse(name, db))
            else {
                // An expression, or a declaration validation refuses.
                return self.add(Part::Node, text);
            };
            if pa.ty != pb.ty {
                return self.add(Part::Node, text);
            }
            if pa.value() != pb.value() {
                part = if self.exprs {
                    Part::ReferencedScalar
                } else {
                    Part::ScalarValue
                };
                edits.push(ScalarEdit {
                    node: id.to_string(),
                    name: name.clone(),
                    value: pb.value(),
                });
            } else if pa.range() != pb.range() && part == Part::Note {
                part = Part::ScalarBounds;
            }
        }
        if part == Part::ScalarValue {
            self.edit.scalars.extend(edits);
        }
        self.add(part, text);
    }
}

/// A group's ports and promoted parameters less their doc texts.
fn interface(g: &GroupDoc) -> (Vec<GroupPort>, Vec<GroupPort>, Vec<PromotedParam>) {
    (ports(&g.inputs), ports(&g.outputs), promoted(&g.params))
}

/// The document less every part whose change leaves the simulated state
/// as it is (`Part::effect` below `Effect::Scalars`): what a bake's
/// staleness hash is taken of. `classify(a, b)` finds a difference that
/// counts exactly when `simulated(a) != simulated(b)`.
pub fn simulated(doc: &GraphDoc) -> GraphDoc {
    let mut d = doc.clone();
    if !Part::Description.counts() {
        d.description.clear();
    }
    if let Some(a) = &mut d.asset {
        if !Part::Note.counts() {
            a.doc.clear();
            strip_port_docs(&mut a.inputs, &mut a.outputs, &mut a.params);
        }
    }
    if !Part::Frame.counts() {
        d.frames.clear();
    }
    strip_level(&mut d.nodes, &mut d.wires, &mut d.exec);
    d
}

fn strip_port_docs(i: &mut [GroupPort], o: &mut [GroupPort], p: &mut [PromotedParam]) {
    for port in i.iter_mut().chain(o.iter_mut()) {
        port.doc.clear();
    }
    for p in p {
        p.doc.clear();
    }
}

fn strip_level(nodes: &mut Vec<NodeDoc>, wires: &mut Vec<WireDoc>, exec: &mut Vec<WireDoc>) {
    let views: Vec<String> = nodes
        .iter()
        .filter(|n| is_view(n))
        .map(|n| n.id.clone())
        .collect();
    // Views, their parameters, cameras and wires change only the drawing.
    if !Part::View.counts() && !Part::ViewCamera.counts() {
        nodes.retain(|n| !is_view(n));
    }
    if !Part::ViewWire.counts() {
        let at_view = |w: &WireDoc| {
            let node = |end: &str| end.split('.').next().unwrap_or("").to_string();
            views.contains(&node(&w.to)) || views.contains(&node(&w.from))
        };
        wires.retain(|w| !at_view(w));
        exec.retain(|w| !at_view(w));
    }
    for n in nodes {
        if !Part::Position.counts() {
            n.pos = [0.0, 0.0];
            if let Some(e) = n.params.get_mut("expr") {
                *e = expr_without_positions(e);
            }
        }
        if n.kind == "kernel" {
            if let Some(s) = n.params.get_mut("scalars").and_then(Value::as_object_mut) {
                for (name, decl) in s.iter_mut() {
                    strip_scalar(name, decl);
                }
            }
            // No scalars and an empty declaration are alike.
            if n.params.get("scalars") == Some(&Value::Object(Map::new())) {
                n.params.remove("scalars");
            }
        }
        if let Some(g) = &mut n.group {
            if !Part::Note.counts() {
                g.doc.clear();
                strip_port_docs(&mut g.inputs, &mut g.outputs, &mut g.params);
            }
            if !Part::Frame.counts() {
                g.frames.clear();
            }
            strip_level(&mut g.nodes, &mut g.wires, &mut g.exec);
        }
    }
}

/// A scalar declaration as the program reads it, `{"type", "default"}`,
/// when the table says its bounds and doc text change nothing (a plain
/// number and the object form of the same type and value are then alike).
fn strip_scalar(name: &str, decl: &mut Value) {
    let Ok(d) = ScalarDecl::parse(name, decl) else {
        // An expression or an invalid declaration: kept as written.
        return;
    };
    if !Part::Note.counts() && !Part::ScalarBounds.counts() {
        *decl = serde_json::json!({"type": d.ty.to_string(), "default": d.value()});
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(text: &str) -> GraphDoc {
        serde_json::from_str(text).unwrap()
    }

    const BASE: &str = r#"{"format": "weft-graph", "version": 1, "nodes": [
        {"id": "grid", "kind": "dense", "params": {"shape": [8]}, "pos": [0, 0]},
        {"id": "u", "kind": "field", "params": {"type": "f32"}},
        {"id": "k", "kind": "kernel", "params": {"over": "u", "code": "fn kernel(i: i32) { u[i] = a; }",
            "scalars": {"a": 1.0, "n": {"type": "i32", "default": 3, "min": 0, "doc": "count"}}}},
        {"id": "frame", "kind": "on_frame"},
        {"id": "view", "kind": "plot", "params": {"width": 64}}],
      "wires": [{"from": "grid.cells", "to": "u.layout"}, {"from": "u.field", "to": "k.u"},
                {"from": "u.field", "to": "view.field"}],
      "exec": [{"from": "frame.then", "to": "k"}]}"#;

    /// A graph with an inline group holding a kernel.
    const GROUPED: &str = r#"{"format": "weft-graph", "version": 1, "nodes": [
        {"id": "grid", "kind": "dense", "params": {"shape": [8]}},
        {"id": "u", "kind": "field", "params": {"type": "f32"}},
        {"id": "g", "kind": "group", "pos": [10, 10], "group": {
            "doc": "adds a",
            "inputs": [{"name": "u", "type": "field", "to": ["k.u"], "doc": "the field"},
                       {"name": "run", "type": "exec", "to": ["k"]}],
            "nodes": [{"id": "k", "kind": "kernel", "pos": [0, 0], "params": {"over": "u",
                "code": "fn kernel(i: i32) { u[i] = u[i] + a; }", "scalars": {"a": 0.5}}}],
            "frames": [{"id": "note", "text": "inside", "rect": [0, 0, 10, 10]}]}},
        {"id": "frame", "kind": "on_frame"}],
      "wires": [{"from": "grid.cells", "to": "u.layout"}, {"from": "u.field", "to": "g.u"}],
      "exec": [{"from": "frame.then", "to": "g.run"}]}"#;

    fn node<'a>(d: &'a mut GraphDoc, id: &str) -> &'a mut NodeDoc {
        d.node_mut(id).unwrap()
    }

    fn inner(d: &mut GraphDoc) -> &mut NodeDoc {
        &mut node(d, "g").group.as_mut().unwrap().nodes[0]
    }

    /// `classify` and `simulated` read the same table: an edit changes the
    /// state exactly when the simulated forms differ.
    fn check(a: &GraphDoc, b: &GraphDoc, effect: Effect) -> Edit {
        let e = classify(a, b);
        assert_eq!(e.effect(), effect, "{:?}", e.differences);
        assert_eq!(
            simulated(a) != simulated(b),
            effect >= Effect::Scalars,
            "simulated forms disagree with {:?}",
            e.differences
        );
        assert_eq!(run_differences(a, b).is_empty(), effect < Effect::Scalars);
        e
    }

    #[test]
    fn every_part_has_one_effect_and_the_same_edit_is_nothing() {
        let a = doc(BASE);
        assert_eq!(classify(&a, &a), Edit::default());
        // The table is total (the match is exhaustive) and ordered: what
        // does not count sits below scalars.
        assert_eq!(Part::ALL.len(), 17);
        for p in Part::ALL {
            assert_eq!(p.counts(), p.effect() >= Effect::Scalars);
        }
    }

    #[test]
    fn moving_a_node_is_nothing() {
        let a = doc(BASE);
        let mut b = doc(BASE);
        node(&mut b, "grid").pos = [100.0, 5.0];
        node(&mut b, "view").pos = [3.0, 5.0];
        let e = check(&a, &b, Effect::Nothing);
        assert_eq!(e.differences.len(), 2);
        assert!(e.differences.iter().all(|d| d.part == Part::Position));
        // Inside a group too.
        let a = doc(GROUPED);
        let mut b = doc(GROUPED);
        inner(&mut b).pos = [40.0, 40.0];
        node(&mut b, "g").pos = [0.0, 0.0];
        check(&a, &b, Effect::Nothing);
    }

    #[test]
    fn comments_frames_description_and_doc_texts_are_nothing() {
        let a = doc(BASE);
        let mut b = doc(BASE);
        b.description = "edited".into();
        b.frames.push(crate::graph::FrameDoc {
            id: "c".into(),
            title: "a comment".into(),
            text: "what this does".into(),
            rect: [0.0, 0.0, 50.0, 20.0],
            color: crate::graph::document::default_frame_color(),
        });
        let e = check(&a, &b, Effect::Nothing);
        let parts: Vec<Part> = e.differences.iter().map(|d| d.part).collect();
        assert_eq!(parts, vec![Part::Frame, Part::Description]);
        // A scalar's doc text and its bounds (the value unchanged).
        let mut c = doc(BASE);
        node(&mut c, "k").params["scalars"]["n"] =
            json!({"type": "i32", "default": 3, "max": 10, "doc": "how many"});
        check(&a, &c, Effect::Nothing);
        // A group's doc, a port's doc and a comment inside it.
        let a = doc(GROUPED);
        let mut b = doc(GROUPED);
        let g = node(&mut b, "g").group.as_mut().unwrap();
        g.doc = "adds a to u".into();
        g.inputs[0].doc = "any f32 field".into();
        g.frames[0].text = "edited".into();
        let e = check(&a, &b, Effect::Nothing);
        assert!(e
            .differences
            .iter()
            .any(|d| d.text == "the frames or comments of group 'g' changed"));
    }

    #[test]
    fn expression_nodes_moved_are_nothing_their_edits_rebuild() {
        let body = |x: f64, v: f64| {
            json!({"nodes": [{"id": "c", "kind": "const", "params": {"value": v}, "pos": [x, 0]},
                             {"id": "w", "kind": "write", "params": {"field": "u"}}],
                   "wires": [{"from": "c", "to": "w.value"}]})
        };
        let mut a = doc(BASE);
        node(&mut a, "k")
            .params
            .insert("expr".into(), body(0.0, 1.0));
        let mut b = a.clone();
        node(&mut b, "k")
            .params
            .insert("expr".into(), body(90.0, 1.0));
        check(&a, &b, Effect::Nothing);
        node(&mut b, "k")
            .params
            .insert("expr".into(), body(90.0, 2.0));
        check(&a, &b, Effect::Rebuild);
    }

    #[test]
    fn view_parameters_cameras_views_and_their_wires_are_view_only() {
        let a = doc(BASE);
        let mut b = doc(BASE);
        node(&mut b, "view")
            .params
            .insert("width".into(), 128.into());
        let e = check(&a, &b, Effect::View);
        assert!(e.changes_views() && !e.views_are_cameras_only());
        let mut c = doc(BASE);
        node(&mut c, "view")
            .params
            .insert("camera".into(), json!({"yaw": 10}));
        let e = check(&a, &c, Effect::View);
        assert!(e.views_are_cameras_only());
        let mut d = doc(BASE);
        d.wires.retain(|w| w.to != "view.field");
        d.nodes.retain(|n| n.id != "view");
        let e = check(&a, &d, Effect::View);
        assert_eq!(
            e.differences.iter().map(|d| d.part).collect::<Vec<_>>(),
            vec![Part::View, Part::ViewWire]
        );
    }

    #[test]
    fn scalar_values_are_scalars_named_by_path() {
        let a = doc(BASE);
        let mut b = doc(BASE);
        node(&mut b, "k").params["scalars"]["a"] = json!(2.5);
        let e = check(&a, &b, Effect::Scalars);
        assert_eq!(
            e.scalars,
            vec![ScalarEdit {
                node: "k".into(),
                name: "a".into(),
                value: 2.5
            }]
        );
        // An object form's default.
        let mut c = doc(BASE);
        node(&mut c, "k").params["scalars"]["n"]["default"] = json!(7);
        let e = check(&a, &c, Effect::Scalars);
        assert_eq!(e.scalars[0].value, 7.0);
        // Inside a group: the running program's name for the kernel.
        let a = doc(GROUPED);
        let mut b = doc(GROUPED);
        inner(&mut b).params["scalars"]["a"] = json!(0.75);
        let e = check(&a, &b, Effect::Scalars);
        assert_eq!(e.scalars[0].node, "g/k");
        // With a move and a view edit alongside: still scalars.
        let mut c = doc(BASE);
        node(&mut c, "k").params["scalars"]["a"] = json!(2.5);
        node(&mut c, "k").pos = [9.0, 9.0];
        node(&mut c, "view")
            .params
            .insert("width".into(), 32.into());
        let e = check(&doc(BASE), &c, Effect::Scalars);
        assert!(e.changes_views());
    }

    #[test]
    fn declarations_expressions_seed_bypass_assets_and_wires_rebuild() {
        let a = doc(BASE);
        let rebuild = |f: &dyn Fn(&mut GraphDoc)| {
            let mut b = doc(BASE);
            f(&mut b);
            check(&a, &b, Effect::Rebuild);
        };
        // A scalar added, retyped, or given an expression.
        rebuild(&|b| node(b, "k").params["scalars"]["b"] = json!(1.0));
        rebuild(&|b| node(b, "k").params["scalars"]["a"] = json!(1));
        rebuild(&|b| node(b, "k").params["scalars"]["a"] = json!("= 2 * 3"));
        // Code, another parameter, the seed, bypass, a wire.
        rebuild(&|b| {
            node(b, "k").params.insert(
                "code".into(),
                "fn kernel(i: i32) { u[i] = 2.0 * a; }".into(),
            );
        });
        rebuild(&|b| node(b, "grid").params["shape"] = json!([16]));
        rebuild(&|b| b.seed = 9);
        rebuild(&|b| node(b, "k").bypass = true);
        rebuild(&|b| b.exec.clear());
        // A scalar value where an expression may read it.
        let mut x = doc(BASE);
        node(&mut x, "k").params["scalars"]["b"] = json!("= ch('k.n') * 0.5");
        let mut y = x.clone();
        node(&mut y, "k").params["scalars"]["n"]["default"] = json!(4);
        let e = check(&x, &y, Effect::Rebuild);
        assert_eq!(e.differences[0].part, Part::ReferencedScalar);
        assert!(e.scalars.is_empty());
        // A group's asset version, its promoted parameters, its interface.
        let g = doc(GROUPED);
        let mut h = doc(GROUPED);
        node(&mut h, "g").asset = Some(crate::graph::AssetRef {
            name: "adder".into(),
            version: 2,
        });
        check(&g, &h, Effect::Rebuild);
        let mut h = doc(GROUPED);
        node(&mut h, "g").params.insert("a".into(), json!(3.0));
        check(&g, &h, Effect::Rebuild);
        let mut h = doc(GROUPED);
        node(&mut h, "g").group.as_mut().unwrap().inputs[0].to = vec![];
        check(&g, &h, Effect::Rebuild);
    }

    #[test]
    fn every_compute_difference_is_named() {
        let a = doc(BASE);
        let mut b = doc(BASE);
        b.nodes[0]
            .params
            .insert("shape".into(), serde_json::json!([16]));
        b.nodes.remove(2);
        b.seed = 3;
        b.exec.clear();
        let d = run_differences(&a, &b);
        assert_eq!(
            d,
            vec![
                "the seed was 0, is 3",
                "node 'grid' param 'shape' was [8], is [16]",
                "node 'k' (kernel) was removed",
                "execution wire frame.then -> k was removed",
            ]
        );
        let mut c = doc(BASE);
        node(&mut c, "k").params["scalars"]["a"] = json!(2.0);
        assert_eq!(
            run_differences(&a, &c),
            vec![format!(
                "node 'k' param 'scalars' was {}, is {}",
                short(&a.node("k").unwrap().params["scalars"]),
                short(&c.node("k").unwrap().params["scalars"])
            )]
        );
    }
}
