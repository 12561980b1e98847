//! Entering groups: the editor shows and edits a group's body.
//!
//! While a group is entered, `Model::doc` is the body (with the ports as
//! two boundary nodes, `group_edit::body_doc`), and each level above waits
//! in `Model::scope` with the group node still in it. `root` puts the
//! levels back together: validation, the simulation, saving and autosave
//! always see the whole document. Undo steps hold the whole document and
//! the path that was entered, so an undo inside a group stays inside it.

use super::super::group_edit::{self, body_doc, is_boundary, write_body};
use super::Model;
use std::borrow::Cow;
use weft_ir::graph::GraphDoc;

/// One entered level: the group node's id and the document it sits in.
#[derive(Clone, Debug)]
pub struct Level {
    pub id: String,
    pub parent: GraphDoc,
}

/// An undo step: the whole document and the path of entered groups.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub root: GraphDoc,
    pub scope: Vec<String>,
}

impl Model {
    /// The whole document, whatever group is entered.
    pub fn root(&self) -> Cow<'_, GraphDoc> {
        if self.scope.is_empty() {
            return Cow::Borrowed(&self.doc);
        }
        Cow::Owned(self.compose(&self.doc))
    }

    /// The whole document with `body` as the entered level.
    pub(super) fn compose(&self, body: &GraphDoc) -> GraphDoc {
        let mut body = body.clone();
        for lvl in self.scope.iter().rev() {
            let mut parent = lvl.parent.clone();
            if let Some(n) = parent.node_mut(&lvl.id) {
                write_body(n, &body);
            }
            body = parent;
        }
        body
    }

    /// The ids of the entered groups, outermost first.
    pub fn scope_ids(&self) -> Vec<String> {
        self.scope.iter().map(|l| l.id.clone()).collect()
    }

    /// The path prefix of the entered level's nodes (`diffusion/`), as
    /// problems and the simulation name them.
    pub fn scope_prefix(&self) -> String {
        self.scope.iter().map(|l| format!("{}/", l.id)).collect()
    }

    /// Enters group node `id` of the shown level.
    pub fn enter(&mut self, id: &str) -> Result<(), String> {
        let node = self
            .doc
            .node(id)
            .filter(|n| n.kind == weft_ir::graph::groups::GROUP)
            .ok_or_else(|| format!("'{}' is not a group node", id))?;
        if node.asset.is_some() {
            return Err(format!(
                "'{}' uses an asset: its body is edited in the asset's own file",
                id
            ));
        }
        let body = body_doc(node, &self.doc).ok_or_else(|| format!("'{}' has no body", id))?;
        self.end_drag();
        let parent = std::mem::replace(&mut self.doc, body);
        self.scope.push(super::group_scope::Level {
            id: id.to_string(),
            parent,
        });
        self.revision += 1;
        self.scope_changed = true;
        Ok(())
    }

    /// The group node whose body is shown, if one is entered (its promoted
    /// parameters are current; its body is `doc`).
    pub fn entered_group(&self) -> Option<&weft_ir::graph::NodeDoc> {
        let lvl = self.scope.last()?;
        lvl.parent.node(&lvl.id)
    }

    /// Whether the entered groups changed since the last call (the editor
    /// then starts its view afresh).
    pub fn take_scope_changed(&mut self) -> bool {
        std::mem::take(&mut self.scope_changed)
    }

    /// Leaves entered groups until `depth` are left entered (0: the top).
    pub fn leave_to(&mut self, depth: usize) {
        if self.scope.len() > depth {
            self.end_drag();
        }
        while self.scope.len() > depth {
            let lvl = self.scope.pop().expect("checked");
            let mut parent = lvl.parent;
            if let Some(n) = parent.node_mut(&lvl.id) {
                write_body(n, &self.doc);
            }
            self.doc = parent;
            self.revision += 1;
            self.scope_changed = true;
        }
    }

    pub(super) fn snapshot_of(&self, level: &GraphDoc) -> Snapshot {
        Snapshot {
            root: self.compose(level),
            scope: self.scope_ids(),
        }
    }

    /// Puts back an undo step: the document, and the groups entered then
    /// (as far as they still exist).
    pub(super) fn restore(&mut self, s: Snapshot) {
        let boundary: Vec<_> = self
            .doc
            .nodes
            .iter()
            .filter(|n| is_boundary(&n.id))
            .map(|n| (n.id.clone(), n.pos))
            .collect();
        let same_scope = s.scope == self.scope_ids();
        self.scope.clear();
        self.doc = s.root;
        self.scope_changed |= !same_scope;
        for id in &s.scope {
            if self.enter(id).is_err() {
                break;
            }
        }
        // Boundary nodes keep where they were dragged.
        if same_scope {
            for (id, pos) in boundary {
                if let Some(n) = self.doc.node_mut(&id) {
                    n.pos = pos;
                }
            }
        }
    }

    /// Promotes (`on`) or un-promotes `node.param` of the entered group.
    pub(super) fn set_promoted(
        &mut self,
        node: &str,
        param: &str,
        on: bool,
    ) -> Result<bool, String> {
        let Some(lvl) = self.scope.last_mut() else {
            return Err("promote: enter a group first".into());
        };
        let g = lvl
            .parent
            .node_mut(&lvl.id)
            .ok_or_else(|| format!("no group node '{}'", lvl.id))?;
        write_body(g, &self.doc);
        let changed = if on {
            group_edit::promote(
                g.group.as_mut().expect("entered groups have bodies"),
                node,
                param,
            )?
        } else {
            group_edit::unpromote(g, node, param)?
        };
        if changed && !on {
            // The inner node takes the value the group gave it.
            let g = g.clone();
            let body = body_doc(&g, &self.doc).expect("entered groups have bodies");
            if let (Some(n), Some(from)) = (self.doc.node_mut(node), body.node(node)) {
                n.params = from.params.clone();
            }
        }
        Ok(changed)
    }
}
