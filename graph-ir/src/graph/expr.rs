//! Expression kernels: a kernel body given as a node sub-graph (`"expr"` on a
//! kernel node) instead of code.
//!
//! Pre: the kernel node's `expr` object. Post: kernel-language code with one
//! statement per expression node (in dependency order, side effects in file
//! order) and a map from code line to expression node, so the normal front
//! end type-checks and lowers it to the same IR as written code, and every
//! error can name the expression node. Does not type-check by itself.

use super::expr_body::ExprBody;
use crate::error::GraphError;
use serde_json::Value;
use std::collections::HashMap;

/// An expression node kind: its inputs (in order) and whether it has a value.
pub struct ExprKind {
    pub name: &'static str,
    pub inputs: &'static [&'static str],
    /// Inputs that may stay unwired (indices default to the loop index).
    pub optional: &'static [&'static str],
    pub params: &'static [&'static str],
    pub has_value: bool,
    pub doc: &'static str,
}

pub static EXPR_KINDS: &[ExprKind] = &[
    ExprKind { name: "index", inputs: &[], optional: &[], params: &["axis"], has_value: true, doc: "The loop index on `axis` (0, 1 or 2), an i32." },
    ExprKind { name: "scalar", inputs: &[], optional: &[], params: &["name"], has_value: true, doc: "The kernel scalar `name`." },
    ExprKind { name: "frame", inputs: &[], optional: &[], params: &[], has_value: true, doc: "frame(), an i32." },
    ExprKind { name: "random", inputs: &[], optional: &[], params: &[], has_value: true, doc: "random(), an f32 in [0, 1)." },
    ExprKind { name: "const", inputs: &[], optional: &[], params: &["value", "type"], has_value: true, doc: "A constant: `value` a number (default 0) or a list for a vector, `type` as in the kernel language (default f32)." },
    ExprKind { name: "read", inputs: &["i", "j", "k"], optional: &["i", "j", "k"], params: &["field"], has_value: true, doc: "Reads field port `field` at (i, j, k); unwired indices are the loop indices." },
    ExprKind { name: "write", inputs: &["value", "i", "j", "k"], optional: &["i", "j", "k"], params: &["field"], has_value: false, doc: "Writes `value` to field port `field` at (i, j, k)." },
    ExprKind { name: "atomic_add", inputs: &["value", "i", "j", "k"], optional: &["i", "j", "k"], params: &["field"], has_value: false, doc: "Atomically adds `value` to field port `field` at (i, j, k)." },
    ExprKind { name: "op", inputs: &["a", "b"], optional: &[], params: &["op"], has_value: true, doc: "A binary operator: + - * / % < <= > >= == != && || & | ^ << >>." },
    ExprKind { name: "unary", inputs: &["x"], optional: &[], params: &["op"], has_value: true, doc: "Unary `-` or `!`." },
    ExprKind { name: "call", inputs: &["a", "b", "c"], optional: &["b", "c"], params: &["fn"], has_value: true, doc: "A built-in function by name (sqrt, sin, min, clamp, lerp, length, dot, ...), arguments a, b, c in order." },
    ExprKind { name: "select", inputs: &["cond", "a", "b"], optional: &[], params: &[], has_value: true, doc: "`a` where `cond` holds, else `b`." },
    ExprKind { name: "vec", inputs: &["x", "y", "z", "w"], optional: &["z", "w"], params: &["type"], has_value: true, doc: "Builds a vector (`type` vec2/vec3/vec4/ivecN/uvecN) from its components." },
    ExprKind { name: "swizzle", inputs: &["v"], optional: &[], params: &["components"], has_value: true, doc: "Components of a vector, e.g. `x`, `xy`, `zyx`." },
    ExprKind { name: "cast", inputs: &["x"], optional: &[], params: &["type"], has_value: true, doc: "Converts with `as` to `type`." },
];

pub fn expr_kind(name: &str) -> Option<&'static ExprKind> {
    EXPR_KINDS.iter().find(|k| k.name == name)
}

pub const OPERATORS: &[&str] = &[
    "+", "-", "*", "/", "%", "<", "<=", ">", ">=", "==", "!=", "&&", "||", "&", "|", "^", "<<",
    ">>",
];

/// Generated code and, per line (0-based), the expression node it came from.
pub struct ExprCode {
    pub code: String,
    pub lines: Vec<Option<String>>,
}

fn err(
    kernel: &str,
    expr_node: &str,
    port: Option<&str>,
    message: impl Into<String>,
) -> GraphError {
    GraphError::Expr {
        node: kernel.to_string(),
        expr_node: expr_node.to_string(),
        port: port.map(str::to_string),
        message: message.into(),
    }
}

struct ENode<'a> {
    id: String,
    kind: &'static ExprKind,
    params: &'a serde_json::Map<String, Value>,
}

/// The field ports an expression body uses (in node order).
pub fn expr_field_ports(expr: &Value) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for n in expr
        .get("nodes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if matches!(
            n.get("kind").and_then(Value::as_str),
            Some("read" | "write" | "atomic_add")
        ) {
            if let Some(f) = n
                .get("params")
                .and_then(|p| p.get("field"))
                .and_then(Value::as_str)
            {
                if !out.iter().any(|x| x == f) {
                    out.push(f.to_string());
                }
            }
        }
    }
    out
}

fn ident_ok(s: &str) -> bool {
    syn::parse_str::<syn::Ident>(s).is_ok()
}

/// Translates an expression body into kernel code over `dims` loop axes.
pub fn expr_to_code(
    kernel: &str,
    expr: &Value,
    dims: usize,
    scalars: &[String],
) -> Result<ExprCode, GraphError> {
    let body = ExprBody::parse(kernel, expr)?;
    let nodes: Vec<ENode> = body
        .nodes
        .iter()
        .map(|n| ENode {
            id: n.id.clone(),
            kind: n.kind,
            params: &n.params,
        })
        .collect();
    // Wires: "node" -> "node.input".
    let mut inputs: HashMap<(usize, &str), usize> = HashMap::new();
    let index: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.id.as_str(), i))
        .collect();
    for w in &body.wires {
        let (fnode, tnode, tport) = (w.from.as_str(), w.to.as_str(), w.input.as_str());
        let to = if tport.is_empty() {
            tnode.to_string()
        } else {
            format!("{}.{}", tnode, tport)
        };
        let from = fnode;
        let (Some(&fi), Some(&ti)) = (index.get(fnode), index.get(tnode)) else {
            let missing = if index.contains_key(fnode) {
                tnode
            } else {
                fnode
            };
            return Err(GraphError::param(
                kernel,
                "expr",
                format!(
                    "expression wire {} -> {} refers to missing expression node '{}'",
                    from, to, missing
                ),
            ));
        };
        if !nodes[fi].kind.has_value {
            return Err(err(
                kernel,
                fnode,
                None,
                format!(
                    "'{}' nodes have no output to wire from",
                    nodes[fi].kind.name
                ),
            ));
        }
        let Some(&port) = nodes[ti].kind.inputs.iter().find(|p| **p == tport) else {
            return Err(err(
                kernel,
                tnode,
                Some(tport),
                format!(
                    "'{}' has no input '{}' (inputs: {})",
                    nodes[ti].kind.name,
                    tport,
                    if nodes[ti].kind.inputs.is_empty() {
                        "none".into()
                    } else {
                        nodes[ti].kind.inputs.join(", ")
                    }
                ),
            ));
        };
        if inputs.insert((ti, port), fi).is_some() {
            return Err(err(
                kernel,
                tnode,
                Some(port),
                "more than one wire reaches this input",
            ));
        }
    }
    // Required inputs, in the order the node uses them.
    for (i, n) in nodes.iter().enumerate() {
        for p in n
            .kind
            .inputs
            .iter()
            .filter(|p| !n.kind.optional.contains(p))
        {
            if !inputs.contains_key(&(i, *p)) {
                return Err(err(
                    kernel,
                    &n.id,
                    Some(p),
                    format!("input '{}' is not wired", p),
                ));
            }
        }
    }
    // Dependency order (values before their users); cycles are errors.
    let mut order = Vec::new();
    let mut state = vec![0u8; nodes.len()];
    fn visit(
        i: usize,
        nodes: &[ENode],
        inputs: &HashMap<(usize, &str), usize>,
        state: &mut [u8],
        order: &mut Vec<usize>,
        kernel: &str,
    ) -> Result<(), GraphError> {
        match state[i] {
            2 => return Ok(()),
            1 => {
                return Err(err(
                    kernel,
                    &nodes[i].id,
                    None,
                    "expression wires form a cycle",
                ))
            }
            _ => {}
        }
        state[i] = 1;
        for p in nodes[i].kind.inputs {
            if let Some(&src) = inputs.get(&(i, *p)) {
                visit(src, nodes, inputs, state, order, kernel)?;
            }
        }
        state[i] = 2;
        order.push(i);
        Ok(())
    }
    for i in 0..nodes.len() {
        visit(i, &nodes, &inputs, &mut state, &mut order, kernel)?;
    }
    let var = |i: usize| format!("v_{}", nodes[i].id);
    let axes = ["i", "j", "k"];
    let mut code = String::new();
    let mut lines: Vec<Option<String>> = Vec::new();
    let params: Vec<String> = axes[..dims.min(3)]
        .iter()
        .map(|a| format!("__{}: i32", a))
        .collect();
    code.push_str(&format!("fn kernel({}) {{\n", params.join(", ")));
    lines.push(None);
    for &i in &order {
        let n = &nodes[i];
        let input = |p: &str| inputs.get(&(i, p)).map(|&s| var(s));
        let param_str = |p: &str| -> Result<&str, GraphError> {
            n.params.get(p).and_then(Value::as_str).ok_or_else(|| {
                err(
                    kernel,
                    &n.id,
                    None,
                    format!("needs string parameter '{}'", p),
                )
            })
        };
        let index_list = || -> String {
            let idx: Vec<String> = (0..dims)
                .map(|d| input(axes[d]).unwrap_or_else(|| format!("__{}", axes[d])))
                .collect();
            if idx.len() == 1 {
                idx[0].clone()
            } else {
                format!("({})", idx.join(", "))
            }
        };
        let field = || -> Result<String, GraphError> {
            let f = param_str("field")?;
            if !ident_ok(f) {
                return Err(err(
                    kernel,
                    &n.id,
                    None,
                    format!("'{}' is not a field port name", f),
                ));
            }
            Ok(f.to_string())
        };
        let stmt = match n.kind.name {
            "index" => {
                let axis = n.params.get("axis").and_then(Value::as_u64).unwrap_or(0) as usize;
                if axis >= dims {
                    return Err(err(
                        kernel,
                        &n.id,
                        None,
                        format!(
                            "axis {} does not exist: this kernel loops over {} axes",
                            axis, dims
                        ),
                    ));
                }
                format!("let {} = __{};", var(i), axes[axis])
            }
            "scalar" => {
                let name = param_str("name")?;
                if !scalars.iter().any(|s| s == name) {
                    return Err(err(
                        kernel,
                        &n.id,
                        None,
                        format!("the kernel has no scalar '{}'", name),
                    ));
                }
                format!("let {} = {};", var(i), name)
            }
            "frame" => format!("let {} = frame();", var(i)),
            "random" => format!("let {} = random();", var(i)),
            "const" => {
                let ty = n
                    .params
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("f32");
                let t = weft_type(ty)
                    .ok_or_else(|| err(kernel, &n.id, None, format!("unknown type '{}'", ty)))?;
                let lit = |x: &Value| -> Option<String> {
                    let v = x.as_f64()?;
                    Some(if t.is_float() {
                        format!("{:?}", v as f32)
                    } else {
                        format!("{}", v as i64)
                    })
                };
                let zero = Value::from(0);
                let value = n.params.get("value").unwrap_or(&zero);
                let text = match value {
                    Value::Array(a) => {
                        let parts: Option<Vec<String>> = a.iter().map(lit).collect();
                        format!(
                            "{}({})",
                            ty,
                            parts
                                .ok_or_else(|| err(kernel, &n.id, None, "`value` must be numbers"))?
                                .join(", ")
                        )
                    }
                    v => format!(
                        "({} as {})",
                        lit(v).ok_or_else(|| err(
                            kernel,
                            &n.id,
                            None,
                            "`value` must be a number or a list of numbers"
                        ))?,
                        ty
                    ),
                };
                format!("let {}: {} = {};", var(i), ty, text)
            }
            "read" => format!("let {} = {}[{}];", var(i), field()?, index_list()),
            "write" => format!(
                "{}[{}] = {};",
                field()?,
                index_list(),
                input("value").unwrap_or_default()
            ),
            "atomic_add" => format!(
                "{}[{}] += {};",
                field()?,
                index_list(),
                input("value").unwrap_or_default()
            ),
            "op" => {
                let op = param_str("op")?;
                if !OPERATORS.contains(&op) {
                    return Err(err(
                        kernel,
                        &n.id,
                        None,
                        format!(
                            "unknown operator '{}'; operators: {}",
                            op,
                            OPERATORS.join(" ")
                        ),
                    ));
                }
                format!(
                    "let {} = {} {} {};",
                    var(i),
                    input("a").unwrap_or_default(),
                    op,
                    input("b").unwrap_or_default()
                )
            }
            "unary" => {
                let op = param_str("op")?;
                if op != "-" && op != "!" {
                    return Err(err(kernel, &n.id, None, "unary `op` is `-` or `!`"));
                }
                format!("let {} = {}{};", var(i), op, input("x").unwrap_or_default())
            }
            "call" => {
                let f = param_str("fn")?;
                if crate::ir::Builtin::from_name(f).is_none() {
                    return Err(err(
                        kernel,
                        &n.id,
                        None,
                        format!("'{}' is not a built-in function", f),
                    ));
                }
                let args: Vec<String> = ["a", "b", "c"].iter().filter_map(|p| input(p)).collect();
                format!("let {} = {}({});", var(i), f, args.join(", "))
            }
            "select" => format!(
                "let {} = select({}, {}, {});",
                var(i),
                input("cond").unwrap_or_default(),
                input("a").unwrap_or_default(),
                input("b").unwrap_or_default()
            ),
            "vec" => {
                let ty = param_str("type")?;
                let t = weft_type(ty).filter(|t| t.is_vector()).ok_or_else(|| {
                    err(
                        kernel,
                        &n.id,
                        None,
                        format!("'{}' is not a vector type", ty),
                    )
                })?;
                let comps: Vec<String> = ["x", "y", "z", "w"]
                    .iter()
                    .take(t.components())
                    .map(|p| {
                        input(p).ok_or_else(|| {
                            err(
                                kernel,
                                &n.id,
                                Some(p),
                                format!("a {} needs input '{}'", ty, p),
                            )
                        })
                    })
                    .collect::<Result<_, _>>()?;
                format!("let {} = {}({});", var(i), ty, comps.join(", "))
            }
            "swizzle" => {
                let c = param_str("components")?;
                if c.is_empty() || c.len() > 4 || !c.chars().all(|ch| "xyzwrgba".contains(ch)) {
                    return Err(err(
                        kernel,
                        &n.id,
                        None,
                        format!("'{}' is not a swizzle (letters from xyzw or rgba)", c),
                    ));
                }
                format!("let {} = {}.{};", var(i), input("v").unwrap_or_default(), c)
            }
            "cast" => {
                let ty = param_str("type")?;
                weft_type(ty)
                    .ok_or_else(|| err(kernel, &n.id, None, format!("unknown type '{}'", ty)))?;
                format!(
                    "let {} = {} as {};",
                    var(i),
                    input("x").unwrap_or_default(),
                    ty
                )
            }
            other => unreachable!("expression kind {} has no translation", other),
        };
        code.push_str("    ");
        code.push_str(&stmt);
        code.push('\n');
        lines.push(Some(n.id.clone()));
    }
    code.push_str("}\n");
    lines.push(None);
    Ok(ExprCode { code, lines })
}

/// Expression kernels keep to the word types: f16 (a kernel-code compute
/// type, docs/kernel-language.md) is not offered there.
fn weft_type(t: &str) -> Option<crate::types::Type> {
    crate::types::Type::parse(t).filter(|t| t.scalar() != Some(crate::types::Scalar::F16))
}
