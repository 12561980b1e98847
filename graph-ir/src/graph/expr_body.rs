//! An expression kernel's body (`"expr"` on a kernel node) as a typed
//! model: its nodes (id, kind, parameters, place in the nested editor) and
//! wires (`"node"` → `"node.input"`).
//!
//! Pre: the `expr` JSON value. Post: `ExprBody::parse` checks its shape
//! (an object of `nodes` and `wires`; identifier ids, unique; known kinds;
//! each kind's parameters only; wires of two strings; places of two
//! numbers) and names the expression node at fault, or gives the typed
//! body. `expr::expr_to_code` translates a parsed body; the app's nested
//! editor edits one through the methods here and writes it back with
//! `to_value`, so the two never read the JSON differently. What the
//! wires mean (which inputs exist, cycles, types) is checked by
//! `expr_to_code` and the kernel language's front end.

use super::expr::{expr_kind, ExprKind, EXPR_KINDS};
use crate::error::GraphError;
use serde_json::{json, Map, Value};

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExprBody {
    pub nodes: Vec<ExprNode>,
    pub wires: Vec<ExprWire>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ExprNode {
    pub id: String,
    pub kind: &'static ExprKind,
    /// Values of `kind.params` (absent ones take the kind's default).
    pub params: Map<String, Value>,
    /// Where the nested editor shows it (graph space); `None`: laid out.
    pub pos: Option<[f32; 2]>,
}

/// A wire from a node's value to another node's input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExprWire {
    pub from: String,
    /// The receiving node's id.
    pub to: String,
    /// The input of `to` it reaches (one of its kind's `inputs`, as far
    /// as the document says: `expr_to_code` checks it).
    pub input: String,
}

impl PartialEq for ExprKind {
    fn eq(&self, other: &ExprKind) -> bool {
        self.name == other.name
    }
}

impl std::fmt::Debug for ExprKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

fn expr_err(kernel: &str, expr_node: &str, message: impl Into<String>) -> GraphError {
    GraphError::Expr {
        node: kernel.to_string(),
        expr_node: expr_node.to_string(),
        port: None,
        message: message.into(),
    }
}

fn ident_ok(s: &str) -> bool {
    syn::parse_str::<syn::Ident>(s).is_ok()
}

impl ExprBody {
    /// Reads the `expr` value of kernel node `kernel`; errors name the
    /// kernel and, where one is at fault, the expression node.
    pub fn parse(kernel: &str, expr: &Value) -> Result<ExprBody, GraphError> {
        let bad = |m: String| GraphError::param(kernel, "expr", m);
        let top = expr
            .as_object()
            .ok_or_else(|| bad("expected an object with \"nodes\" and \"wires\"".into()))?;
        if let Some(k) = top.keys().find(|k| *k != "nodes" && *k != "wires") {
            return Err(bad(format!(
                "unknown key '{}' (an expression body has \"nodes\" and \"wires\")",
                k
            )));
        }
        let nodes_v = top
            .get("nodes")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("\"nodes\" must be a list".into()))?;
        let mut nodes: Vec<ExprNode> = Vec::new();
        for (n, v) in nodes_v.iter().enumerate() {
            let id = v
                .get("id")
                .and_then(Value::as_str)
                .ok_or_else(|| bad(format!("expression node #{} has no string \"id\"", n + 1)))?;
            if !ident_ok(id) || id.starts_with("__") {
                return Err(expr_err(kernel, id, "expression node ids must be identifiers (letters, digits, `_`; not starting with a digit or `__`)"));
            }
            if nodes.iter().any(|x| x.id == id) {
                return Err(expr_err(kernel, id, "duplicate expression node id"));
            }
            if let Some(k) = v.as_object().and_then(|o| {
                o.keys()
                    .find(|k| !matches!(k.as_str(), "id" | "kind" | "params" | "pos"))
            }) {
                return Err(expr_err(kernel, id, format!("unknown key '{}'", k)));
            }
            let kname = v.get("kind").and_then(Value::as_str).unwrap_or("");
            let kind = expr_kind(kname).ok_or_else(|| {
                let names: Vec<&str> = EXPR_KINDS.iter().map(|k| k.name).collect();
                expr_err(
                    kernel,
                    id,
                    format!(
                        "unknown expression node kind '{}'; kinds: {}",
                        kname,
                        names.join(", ")
                    ),
                )
            })?;
            let params = match v.get("params") {
                None => Map::new(),
                Some(Value::Object(p)) => p.clone(),
                Some(_) => return Err(expr_err(kernel, id, "\"params\" must be an object")),
            };
            if let Some(p) = params.keys().find(|p| !kind.params.contains(&p.as_str())) {
                return Err(expr_err(
                    kernel,
                    id,
                    format!(
                        "'{}' has no parameter '{}' (it has: {})",
                        kind.name,
                        p,
                        if kind.params.is_empty() {
                            "none".into()
                        } else {
                            kind.params.join(", ")
                        }
                    ),
                ));
            }
            let pos = match v.get("pos") {
                None | Some(Value::Null) => None,
                Some(p) => Some(
                    p.as_array()
                        .filter(|a| a.len() == 2)
                        .and_then(|a| Some([a[0].as_f64()? as f32, a[1].as_f64()? as f32]))
                        .ok_or_else(|| {
                            expr_err(kernel, id, "\"pos\" must be two numbers, [x, y]")
                        })?,
                ),
            };
            nodes.push(ExprNode {
                id: id.to_string(),
                kind,
                params,
                pos,
            });
        }
        let mut wires = Vec::new();
        for w in top
            .get("wires")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let (Some(from), Some(to)) = (
                w.get("from").and_then(Value::as_str),
                w.get("to").and_then(Value::as_str),
            ) else {
                return Err(bad(format!(
                    "expression wire {} needs string \"from\" and \"to\"",
                    w
                )));
            };
            let (to, input) = to.split_once('.').unwrap_or((to, ""));
            wires.push(ExprWire {
                from: from.split('.').next().unwrap_or(from).to_string(),
                to: to.to_string(),
                input: input.to_string(),
            });
        }
        Ok(ExprBody { nodes, wires })
    }

    /// The body as the document stores it.
    pub fn to_value(&self) -> Value {
        let nodes: Vec<Value> = self
            .nodes
            .iter()
            .map(|n| {
                let mut v = json!({"id": n.id, "kind": n.kind.name, "params": n.params});
                if let Some([x, y]) = n.pos {
                    v["pos"] = json!([x, y]);
                }
                v
            })
            .collect();
        let wires: Vec<Value> = self
            .wires
            .iter()
            .map(|w| {
                let to = if w.input.is_empty() {
                    w.to.clone()
                } else {
                    format!("{}.{}", w.to, w.input)
                };
                json!({"from": w.from, "to": to})
            })
            .collect();
        json!({"nodes": nodes, "wires": wires})
    }

    pub fn node(&self, id: &str) -> Option<&ExprNode> {
        self.nodes.iter().find(|n| n.id == id)
    }

    pub fn node_mut(&mut self, id: &str) -> Option<&mut ExprNode> {
        self.nodes.iter_mut().find(|n| n.id == id)
    }

    /// Adds a node of `kind` at `pos`, named for its kind with the first
    /// free number (`read1`, `read2`, …); returns its id.
    pub fn add_node(&mut self, kind: &'static ExprKind, pos: [f32; 2]) -> String {
        let id = (1..)
            .map(|n| format!("{}{}", kind.name, n))
            .find(|i| self.node(i).is_none())
            .expect("unbounded");
        self.nodes.push(ExprNode {
            id: id.clone(),
            kind,
            params: Map::new(),
            pos: Some(pos),
        });
        id
    }

    /// Removes node `id` and every wire from or to it.
    pub fn remove_node(&mut self, id: &str) {
        self.nodes.retain(|n| n.id != id);
        self.wires.retain(|w| w.from != id && w.to != id);
    }

    /// Wires `from`'s value to `to.input`, replacing the wire that reached
    /// that input (an input takes one wire).
    pub fn connect(&mut self, from: &str, to: &str, input: &str) {
        self.disconnect_input(to, input);
        self.wires.push(ExprWire {
            from: from.to_string(),
            to: to.to_string(),
            input: input.to_string(),
        });
    }

    /// Removes the wire `from` → `to.input`.
    pub fn disconnect(&mut self, from: &str, to: &str, input: &str) {
        self.wires
            .retain(|w| !(w.from == from && w.to == to && w.input == input));
    }

    /// Removes the wire reaching `to.input`.
    pub fn disconnect_input(&mut self, to: &str, input: &str) {
        self.wires.retain(|w| !(w.to == to && w.input == input));
    }

    /// Removes every wire from `from`'s value.
    pub fn disconnect_output(&mut self, from: &str) {
        self.wires.retain(|w| w.from != from);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body() -> Value {
        json!({
            "nodes": [
                {"id": "a", "kind": "index", "params": {"axis": 0}, "pos": [10, 20]},
                {"id": "c", "kind": "cast", "params": {"type": "f32"}},
                {"id": "w", "kind": "write", "params": {"field": "x"}}
            ],
            "wires": [{"from": "a", "to": "c.x"}, {"from": "c", "to": "w.value"}]
        })
    }

    #[test]
    fn a_body_reads_and_writes_back_unchanged() {
        let b = ExprBody::parse("k", &body()).unwrap();
        assert_eq!(b.nodes[0].pos, Some([10.0, 20.0]));
        assert_eq!(b.nodes[1].kind.name, "cast");
        assert_eq!(b.wires[1].input, "value");
        assert_eq!(ExprBody::parse("k", &b.to_value()).unwrap(), b);
    }

    #[test]
    fn edits_keep_one_wire_per_input_and_drop_a_removed_nodes_wires() {
        let mut b = ExprBody::parse("k", &body()).unwrap();
        let id = b.add_node(expr_kind("index").unwrap(), [0.0, 0.0]);
        assert_eq!(id, "index1");
        b.connect(&id, "c", "x");
        assert_eq!(b.wires.iter().filter(|w| w.to == "c").count(), 1);
        assert_eq!(b.wires.iter().find(|w| w.to == "c").unwrap().from, "index1");
        b.remove_node("c");
        assert!(b.wires.is_empty(), "{:?}", b.wires);
    }

    #[test]
    fn a_malformed_body_names_the_expression_node() {
        let mut v = body();
        v["nodes"][1]["pos"] = json!("left");
        match ExprBody::parse("k", &v) {
            Err(GraphError::Expr {
                node, expr_node, ..
            }) => assert_eq!((node.as_str(), expr_node.as_str()), ("k", "c")),
            e => panic!("{:?}", e),
        }
        v["nodes"][1]["pos"] = json!([1, 2]);
        v["nodes"][2]["params"]["axis"] = json!(1);
        let e = ExprBody::parse("k", &v).unwrap_err().to_string();
        assert!(e.contains("'write' has no parameter 'axis'"), "{}", e);
    }
}
