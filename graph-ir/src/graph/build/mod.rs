//! Validates a graph document against the catalog and builds the IR program.
//!
//! One file per job: `resolve.rs` checks nodes and parameters against the
//! catalog and resolves wires; `fields.rs` builds the layout tree and the
//! fields (sizes come from `ir::layout`); `kernels.rs` turns kernel code
//! into IR; `schedule.rs` follows execution wires; `views.rs` builds views.
//!
//! Pre: a parsed `GraphDoc`. Post: a `Program` whose layout words and field
//! offsets are computed and whose kernels validate, or every problem found,
//! each naming its node (and param / port / code line). Nothing is allocated
//! for fields here beyond initial data read from `.npy` files, and sizes are
//! checked against the caps before any of that.

use super::catalog::{self, Family, NodeKind, ParamSpec, ParamType, PortType};
use super::document::{split_endpoint, GraphDoc, NodeDoc};
use crate::error::{GraphError, GraphErrors};
use crate::io::npy;
use crate::ir::layout;
use crate::ir::*;
use crate::lang::{self, KernelEnv};
use crate::types::{Scalar, Type};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

mod bvh;
mod fields;
mod kernels;
mod meshes;
mod optimize;
mod resolve;
mod schedule;
mod views;
pub use views::{camera_param, orbit_param};

use resolve::{resolve_nodes, resolve_wires, Inputs};

/// Cap on one kernel's loop iterations.
pub const MAX_RANGE: u64 = i32::MAX as u64;

#[derive(Clone, Debug, Default)]
pub struct BuildOptions {
    /// Directory that `.npy` paths in the graph are relative to.
    pub base_dir: PathBuf,
}

struct Node<'a> {
    doc: &'a NodeDoc,
    kind: &'static NodeKind,
    params: serde_json::Map<String, Value>,
    /// Field ports of kernels, in order of use in the code.
    field_ports: Vec<String>,
    /// Field ports a kernel declares (`ports`) that its code does not use:
    /// they take a wire (or none) and bind nothing.
    declared_ports: Vec<String>,
}

impl Node<'_> {
    fn id(&self) -> &str {
        &self.doc.id
    }
    fn p(&self, name: &str) -> &Value {
        self.params.get(name).unwrap_or(&Value::Null)
    }
}

pub fn build_program(doc: &GraphDoc, opts: &BuildOptions) -> Result<Program, GraphErrors> {
    // Above the IR: groups, assets and bypass flattened (`graph::groups`),
    // parameter references evaluated (`graph::refs`).
    let plain;
    let mut animated = Vec::new();
    let doc = if super::groups::needs_flattening(doc) || super::refs::doc_has_exprs(doc) {
        let mut d = if super::groups::needs_flattening(doc) {
            let library = super::assets::Library::for_graph(&opts.base_dir);
            super::groups::flatten(doc, &library)?
        } else {
            doc.clone()
        };
        animated = super::refs::resolve(&mut d)?;
        plain = d;
        &plain
    } else {
        doc
    };
    let mut errors = Vec::new();
    let nodes = resolve_nodes(doc, &mut errors);
    let index: HashMap<&str, usize> = nodes.iter().enumerate().map(|(i, n)| (n.id(), i)).collect();
    let inputs = resolve_wires(doc, &nodes, &index, &mut errors);
    if !errors.is_empty() {
        return Err(GraphErrors(errors));
    }
    let mut b = Builder {
        nodes: &nodes,
        index: &index,
        inputs: &inputs,
        program: Program::default(),
        opts,
        errors: vec![],
    };
    b.program.seed = doc.seed;
    b.program.animated = animated;
    b.layouts();
    b.fields();
    b.kernels();
    b.schedule(doc);
    b.views();
    if !b.errors.is_empty() {
        return Err(GraphErrors(b.errors));
    }
    Ok(b.program)
}

struct Builder<'a> {
    nodes: &'a [Node<'a>],
    index: &'a HashMap<&'a str, usize>,
    inputs: &'a Inputs,
    program: Program,
    opts: &'a BuildOptions,
    errors: Vec<GraphError>,
}

impl Builder<'_> {
    fn of_family(&self, fam: Family) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].kind.family == fam)
            .collect()
    }
}
