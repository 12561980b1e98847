//! The graph file (JSON): parsing with precise errors, migration, and atomic saving.

use crate::error::{GraphError, GraphErrors};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::Path;

pub const FORMAT: &str = "weft-graph";
pub const VERSION: u32 = 1;

/// A whole graph file.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GraphDoc {
    /// Always "weft-graph".
    pub format: String,
    /// Format version; this build reads version 1.
    pub version: u32,
    /// Free text shown in tools.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Seed of the kernel language's `random()`.
    #[serde(default)]
    pub seed: u32,
    pub nodes: Vec<NodeDoc>,
    /// Data wires: layout tree edges and field bindings.
    #[serde(default)]
    pub wires: Vec<WireDoc>,
    /// Execution wires: which node runs after which.
    #[serde(default)]
    pub exec: Vec<WireDoc>,
    /// Frames and comments drawn behind the nodes in the editor. They group
    /// and explain; they never change what runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub frames: Vec<FrameDoc>,
    /// Set in an asset file: the interface the library's group nodes get.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asset: Option<AssetInfo>,
}

/// A frame: a titled, coloured box in the editor, with optional comment text.
/// Moving a frame in the editor moves the nodes inside it.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FrameDoc {
    /// Unique among frames: letters, digits, `_` and `-`.
    pub id: String,
    /// Shown in the frame's title bar.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub title: String,
    /// Comment text shown inside the frame (plain text, several lines allowed).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
    /// [x, y, width, height] in editor coordinates (the same space as node `pos`).
    pub rect: [f32; 4],
    /// RGB in 0..1.
    #[serde(default = "default_frame_color")]
    pub color: [f32; 3],
}

pub fn default_frame_color() -> [f32; 3] {
    [0.35, 0.45, 0.6]
}

impl FrameDoc {
    /// Why this frame is not well formed, if it is not.
    pub fn check(&self) -> Result<(), String> {
        if self.id.is_empty()
            || !self
                .id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err("a frame id uses letters, digits, '_' and '-' only".into());
        }
        if self.rect.iter().any(|x| !x.is_finite()) || self.rect[2] <= 0.0 || self.rect[3] <= 0.0 {
            return Err(format!(
                "\"rect\" must be [x, y, width, height] with finite numbers and positive size, got {:?}",
                self.rect
            ));
        }
        if self
            .color
            .iter()
            .any(|c| !c.is_finite() || !(0.0..=1.0).contains(c))
        {
            return Err(format!(
                "\"color\" must be three numbers in 0..1, got {:?}",
                self.color
            ));
        }
        Ok(())
    }
}

/// One node.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NodeDoc {
    /// Stable unique id: letters, digits, `_` and `-`. Field nodes use it as their name.
    pub id: String,
    /// Node kind from the catalog (see docs/graph-format.md).
    pub kind: String,
    /// Parameters of the kind; missing ones take their defaults.
    #[serde(default)]
    pub params: Map<String, Value>,
    /// Editor position [x, y].
    #[serde(default)]
    pub pos: [f32; 2],
    /// A bypassed kernel node (or group) does not run: its exec wires are
    /// joined around it and its data wires dropped before the graph is built.
    #[serde(default, skip_serializing_if = "is_false")]
    pub bypass: bool,
    /// The body of a node of kind `group`: a nested sub-graph with its
    /// interface (see `graph::groups`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<Box<GroupDoc>>,
    /// A node of kind `group` whose body is an asset of the library.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asset: Option<AssetRef>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The body and interface of a group node: a nested graph (same format as
/// a file's `nodes`, `wires`, `exec`, `frames`), its ports and its
/// promoted parameters.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GroupDoc {
    /// Free text: what the group does.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub doc: String,
    /// Input ports: each forwards what is wired to it to inner node pins.
    #[serde(default)]
    pub inputs: Vec<GroupPort>,
    /// Output ports: each exposes one inner node pin.
    #[serde(default)]
    pub outputs: Vec<GroupPort>,
    /// Parameters of inner nodes shown on the group node under a name.
    #[serde(default)]
    pub params: Vec<PromotedParam>,
    pub nodes: Vec<NodeDoc>,
    #[serde(default)]
    pub wires: Vec<WireDoc>,
    #[serde(default)]
    pub exec: Vec<WireDoc>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub frames: Vec<FrameDoc>,
}

/// What a group port carries, as the wires it replaces did.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum GroupPortType {
    /// A field (a field node's `field` output, a kernel's field port).
    Field,
    /// A layout (a layout node's `cells` output, a field's `layout` input).
    Layout,
    /// Execution order (an exec wire).
    Exec,
}

/// One port of a group.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GroupPort {
    /// The port's name: letters, digits and `_`.
    pub name: String,
    #[serde(rename = "type")]
    pub ty: GroupPortType,
    /// Inputs: the inner pins (`node.port`, or `node` for an exec input)
    /// the port feeds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<String>,
    /// Outputs: the inner pin (`node.port`) the port exposes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub doc: String,
}

/// A promoted parameter: an inner node's parameter (or kernel scalar)
/// set from the group node's `params` under `name`.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PromotedParam {
    /// The name on the group node: letters, digits and `_`.
    pub name: String,
    /// `node.param`: an inner node's parameter or kernel scalar (inner
    /// groups' promoted parameters too).
    pub target: String,
    /// The value when the group node does not set one (else the inner
    /// node's own value stays).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub doc: String,
}

/// A group node's asset: found in the asset library by name and version.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AssetRef {
    pub name: String,
    /// The version the graph was made with; a graph never silently gets another.
    pub version: u32,
}

/// The interface of an asset file (a graph file whose nodes, wires and
/// exec are the group's body).
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AssetInfo {
    /// The name graphs use to find it: letters, digits and `_`.
    pub name: String,
    pub version: u32,
    /// What it does, its ports and parameters, in a sentence or three.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub doc: String,
    #[serde(default)]
    pub inputs: Vec<GroupPort>,
    #[serde(default)]
    pub outputs: Vec<GroupPort>,
    #[serde(default)]
    pub params: Vec<PromotedParam>,
}

/// A wire from `node.port` to `node.port` (`node` alone picks the only port / exec input).
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WireDoc {
    pub from: String,
    pub to: String,
}

impl GraphDoc {
    pub fn node(&self, id: &str) -> Option<&NodeDoc> {
        self.nodes.iter().find(|n| n.id == id)
    }
    pub fn node_mut(&mut self, id: &str) -> Option<&mut NodeDoc> {
        self.nodes.iter_mut().find(|n| n.id == id)
    }

    /// Parses graph JSON. Never panics; errors name the node where there is one.
    pub fn parse(text: &str) -> Result<GraphDoc, GraphErrors> {
        let value: Value = serde_json::from_str(text)
            // serde_json reports column 0 for an error at a line break.
            .map_err(|e| GraphError::Syntax {
                line: e.line(),
                col: e.column().max(1),
                message: strip_position(&e.to_string()),
            })?;
        Self::from_value(value)
    }

    pub fn from_value(value: Value) -> Result<GraphDoc, GraphErrors> {
        let Value::Object(mut top) = value else {
            return Err(doc_err(
                "a graph file must be a JSON object with \"format\": \"weft-graph\"",
            )
            .into());
        };
        match top.get("format") {
            Some(Value::String(f)) if f == FORMAT => {}
            Some(other) => {
                return Err(doc_err(format!(
                    "\"format\" is {} but must be \"{}\"",
                    other, FORMAT
                ))
                .into())
            }
            None => {
                return Err(doc_err(format!(
                    "missing \"format\": \"{}\"; this is not a Weft graph",
                    FORMAT
                ))
                .into())
            }
        }
        let version = match top.get("version") {
            Some(v) => v
                .as_u64()
                .filter(|&v| v >= 1 && v <= u32::MAX as u64)
                .ok_or_else(|| {
                    doc_err(format!(
                        "\"version\" is {} but must be a positive integer",
                        v
                    ))
                })?,
            None => return Err(doc_err("missing \"version\"").into()),
        };
        if version > VERSION as u64 {
            return Err(doc_err(format!(
                "graph format version {} is newer than this weft understands (up to {}); upgrade weft to open it",
                version, VERSION
            ))
            .into());
        }
        migrate(&mut top, version as u32)?;
        // Nodes one by one, so a bad node is named by its id.
        let mut errors = Vec::new();
        let nodes = match top.remove("nodes") {
            Some(Value::Array(a)) => a,
            Some(_) => return Err(doc_err("\"nodes\" must be a list").into()),
            None => return Err(doc_err("missing \"nodes\" list").into()),
        };
        let mut parsed = Vec::new();
        for (i, n) in nodes.into_iter().enumerate() {
            let id = match n.get("id") {
                Some(Value::String(s)) => s.clone(),
                _ => {
                    errors.push(doc_err(format!("node #{} has no string \"id\"", i + 1)));
                    continue;
                }
            };
            match serde_json::from_value::<NodeDoc>(n) {
                Ok(node) if node.pos.iter().any(|p| !p.is_finite()) => {
                    errors.push(GraphError::node_msg(
                        &id,
                        "\"pos\" must be two finite numbers (f32 range)",
                    ));
                }
                // `/` joins a group's id and its nodes' in the paths the
                // flattener makes (`smoke/advect`); a file's own id with one
                // would pass for such a path (and the builder accepts
                // paths), so it is refused here, where ids are the user's.
                Ok(node) if node.id.contains('/') => {
                    errors.push(GraphError::node_msg(
                        &id,
                        "node ids must be 1-64 letters, digits, `_` or `-`: `/` is reserved for the paths of nodes inside groups (`group/node`)",
                    ));
                }
                Ok(node) => parsed.push(node),
                Err(e) => errors.push(GraphError::node_msg(&id, strip_position(&e.to_string()))),
            }
        }
        top.insert("nodes".into(), Value::Array(vec![]));
        // Frames one by one too, so a bad frame is named by its id.
        let mut frames = Vec::new();
        match top.remove("frames") {
            None => {}
            Some(Value::Array(a)) => {
                for (i, f) in a.into_iter().enumerate() {
                    let id = match f.get("id") {
                        Some(Value::String(s)) => s.clone(),
                        _ => {
                            errors.push(doc_err(format!("frame #{} has no string \"id\"", i + 1)));
                            continue;
                        }
                    };
                    match serde_json::from_value::<FrameDoc>(f) {
                        Ok(frame) => frames.push(frame),
                        Err(e) => errors.push(GraphError::Frame {
                            frame: id,
                            message: strip_position(&e.to_string()),
                        }),
                    }
                }
            }
            Some(_) => errors.push(doc_err("\"frames\" must be a list")),
        }
        let mut doc: GraphDoc = match serde_json::from_value(Value::Object(top.clone())) {
            Ok(d) => d,
            Err(e) => {
                // serde names no key ("invalid value: integer -1, expected
                // u32"): find the one that fails alone, so the message says
                // which ("seed").
                let key = top.keys().find(|k| {
                    let mut alone = serde_json::Map::new();
                    for keep in ["format", "version", "nodes", k.as_str()] {
                        if let Some(v) = top.get(keep) {
                            alone.insert(keep.to_string(), v.clone());
                        }
                    }
                    serde_json::from_value::<GraphDoc>(Value::Object(alone)).is_err()
                });
                let message = strip_position(&e.to_string());
                errors.push(doc_err(match key {
                    Some(k) => format!("graph: \"{}\": {}", k, message),
                    None => format!("graph: {}", message),
                }));
                return Err(GraphErrors(errors));
            }
        };
        doc.frames = frames;
        let mut frame_ids = std::collections::HashSet::new();
        for f in &doc.frames {
            if let Err(m) = f.check() {
                errors.push(GraphError::Frame {
                    frame: f.id.clone(),
                    message: m,
                });
            } else if !frame_ids.insert(f.id.as_str()) {
                errors.push(GraphError::Frame {
                    frame: f.id.clone(),
                    message: "another frame has the same id".into(),
                });
            }
        }
        if !errors.is_empty() {
            return Err(GraphErrors(errors));
        }
        doc.nodes = parsed;
        Ok(doc)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("graph documents always serialize") + "\n"
    }

    pub fn load(path: &Path) -> Result<GraphDoc, GraphErrors> {
        let text = crate::io::provided::read_to_string(path)
            .map_err(|e| doc_err(format!("cannot read {}: {}", path.display(), e)))?;
        Self::parse(&text)
    }

    /// Writes to a temporary file beside `path`, then renames over it, so a
    /// crash never leaves a half-written graph.
    pub fn save_atomic(&self, path: &Path) -> std::io::Result<()> {
        crate::io::write_atomic(path, self.to_json().as_bytes())
    }
}

fn doc_err(m: impl Into<String>) -> GraphError {
    GraphError::Document { message: m.into() }
}

/// serde_json appends " at line X column Y" relative to a sub-value, which would mislead.
fn strip_position(s: &str) -> String {
    match s.rfind(" at line ") {
        Some(p) => s[..p].to_string(),
        None => s.to_string(),
    }
}

/// Upgrades older documents in place. Version 1 is the first format, so
/// there is nothing to migrate yet; each future version adds one step here.
fn migrate(top: &mut Map<String, Value>, from: u32) -> Result<(), GraphError> {
    if from < VERSION {
        return Err(doc_err(format!("no migration from version {}", from)));
    }
    top.insert("version".into(), Value::from(VERSION));
    Ok(())
}

/// Splits `node.port`; `node` alone gives an empty port.
pub fn split_endpoint(s: &str) -> (&str, &str) {
    match s.split_once('.') {
        Some((n, p)) => (n, p),
        None => (s, ""),
    }
}
