//! Parameter references: a numeric parameter (or kernel scalar) written as
//! an expression string, `"= ch('diffuse.rate') * 2"`.
//!
//! Contract. In: a plain graph (after `graph::groups`). Out: the same graph
//! with every expression replaced by its value at frame 0, and the list of
//! kernel scalars whose expressions use `frame` (`Program::animated`): the
//! runtime evaluates those before each frame and sets them like a slider
//! does, without recompiling. Errors name the node and parameter: a syntax
//! error, a reference to a missing node or parameter, a cycle, `frame` on a
//! parameter that is not a kernel scalar.
//!
//! Syntax (after the leading `=`): numbers, `frame`, `pi`, `+ - * / %`,
//! `^` (power), parentheses, `ch('NODE.PARAM')` (another node's numeric
//! parameter or kernel scalar; inside a group, NODE names a node of the
//! same group), and the functions `sin cos tan abs floor ceil sqrt exp ln
//! min max pow clamp`.

use super::{catalog, GraphDoc, GraphError, GraphErrors};
use crate::graph::catalog::ParamType;
use crate::graph::scalars::{set_value, ScalarDecl};
use crate::ir::animate::{AnimatedScalar, Expr};
use crate::types::Type;
use serde_json::{Map, Value};
use std::collections::HashMap;

pub fn is_expr(v: &Value) -> bool {
    v.as_str().is_some_and(|s| s.trim_start().starts_with('='))
}

/// Puts an expression into a scalar declaration, keeping its type.
pub fn set_scalar_expr(slot: &mut Value, e: Value) {
    match slot {
        Value::Object(o) => {
            o.insert("default".into(), e);
        }
        Value::Number(n) if n.is_i64() || n.is_u64() => {
            *slot = serde_json::json!({"type": "i32", "default": e});
        }
        _ => *slot = e,
    }
}

/// Prefixes the node names of `ch('...')` references in a node's
/// parameters with `group/` (the node moved into its group's path).
pub fn qualify(params: &mut Map<String, Value>, group: &str) {
    fn fix(v: &mut Value, group: &str) {
        match v {
            Value::String(s) if is_expr(&Value::String(s.clone())) => {
                let mut out = String::new();
                let mut rest = s.as_str();
                while let Some(i) = rest.find("ch(") {
                    out.push_str(&rest[..i + 3]);
                    rest = &rest[i + 3..];
                    let t = rest.trim_start();
                    out.push_str(&rest[..rest.len() - t.len()]);
                    if let Some(q @ ('\'' | '"')) = t.chars().next() {
                        out.push(q);
                        out.push_str(group);
                        out.push('/');
                        rest = &t[1..];
                    } else {
                        rest = t;
                    }
                }
                out.push_str(rest);
                *s = out;
            }
            Value::Object(o) => o.values_mut().for_each(|x| fix(x, group)),
            _ => {}
        }
    }
    for (k, v) in params.iter_mut() {
        if k == "scalars" || !matches!(v, Value::Object(_)) {
            fix(v, group);
        }
    }
}

// ---- parsing ----

struct P<'a> {
    s: &'a [u8],
    i: usize,
}

impl P<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn expr(&mut self) -> Result<Expr, String> {
        let mut a = self.term()?;
        loop {
            if self.eat(b'+') {
                a = Expr::Bin('+', Box::new(a), Box::new(self.term()?));
            } else if self.eat(b'-') {
                a = Expr::Bin('-', Box::new(a), Box::new(self.term()?));
            } else {
                return Ok(a);
            }
        }
    }
    fn term(&mut self) -> Result<Expr, String> {
        let mut a = self.unary()?;
        loop {
            let op = [b'*', b'/', b'%'].into_iter().find(|&c| self.eat(c));
            match op {
                Some(c) => a = Expr::Bin(c as char, Box::new(a), Box::new(self.unary()?)),
                None => return Ok(a),
            }
        }
    }
    fn unary(&mut self) -> Result<Expr, String> {
        if self.eat(b'-') {
            return Ok(Expr::Neg(Box::new(self.unary()?)));
        }
        let a = self.atom()?;
        if self.eat(b'^') {
            return Ok(Expr::Bin('^', Box::new(a), Box::new(self.unary()?)));
        }
        Ok(a)
    }
    fn atom(&mut self) -> Result<Expr, String> {
        self.ws();
        let start = self.i;
        let Some(&c) = self.s.get(self.i) else {
            return Err("the expression ends too early".into());
        };
        if c == b'(' {
            self.i += 1;
            let e = self.expr()?;
            if !self.eat(b')') {
                return Err("missing ')'".into());
            }
            return Ok(e);
        }
        if c.is_ascii_digit() || c == b'.' {
            while self.i < self.s.len()
                && (self.s[self.i].is_ascii_digit()
                    || self.s[self.i] == b'.'
                    || ((self.s[self.i] == b'e' || self.s[self.i] == b'E') && self.i > start)
                    || ((self.s[self.i] == b'-' || self.s[self.i] == b'+')
                        && matches!(self.s[self.i - 1], b'e' | b'E')))
            {
                self.i += 1;
            }
            let t = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
            return t
                .parse()
                .map(Expr::Num)
                .map_err(|_| format!("'{}' is not a number", t));
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            while self.i < self.s.len()
                && (self.s[self.i].is_ascii_alphanumeric() || self.s[self.i] == b'_')
            {
                self.i += 1;
            }
            let name = std::str::from_utf8(&self.s[start..self.i])
                .unwrap_or("")
                .to_string();
            if !self.eat(b'(') {
                return match name.as_str() {
                    "frame" => Ok(Expr::Frame),
                    "pi" => Ok(Expr::Num(std::f64::consts::PI)),
                    _ => Err(format!(
                        "unknown name '{}' (use ch('node.param'), frame or pi)",
                        name
                    )),
                };
            }
            if name == "ch" {
                self.ws();
                let q = self.s.get(self.i).copied();
                if !matches!(q, Some(b'\'' | b'"')) {
                    return Err("ch() takes a quoted 'node.param'".into());
                }
                self.i += 1;
                let from = self.i;
                while self.i < self.s.len() && Some(self.s[self.i]) != q {
                    self.i += 1;
                }
                let r = std::str::from_utf8(&self.s[from..self.i])
                    .unwrap_or("")
                    .to_string();
                self.i += 1;
                if !self.eat(b')') {
                    return Err("missing ')' after ch('...'".into());
                }
                return Ok(Expr::Ch(r));
            }
            let arity = match name.as_str() {
                "sin" | "cos" | "tan" | "abs" | "floor" | "ceil" | "sqrt" | "exp" | "ln" => 1,
                "min" | "max" | "pow" => 2,
                "clamp" => 3,
                _ => return Err(format!("unknown function '{}'", name)),
            };
            let mut args = vec![self.expr()?];
            while self.eat(b',') {
                args.push(self.expr()?);
            }
            if !self.eat(b')') {
                return Err(format!("missing ')' after the arguments of {}", name));
            }
            if args.len() != arity {
                return Err(format!(
                    "{} takes {} argument(s), got {}",
                    name,
                    arity,
                    args.len()
                ));
            }
            return Ok(Expr::Call(name, args));
        }
        Err(format!("unexpected '{}'", c as char))
    }
}

/// Parses the text of an expression parameter (with its leading `=`).
pub fn parse(text: &str) -> Result<Expr, String> {
    let body = text.trim_start().strip_prefix('=').unwrap_or(text);
    let mut p = P {
        s: body.as_bytes(),
        i: 0,
    };
    let e = p.expr()?;
    p.ws();
    if p.i < p.s.len() {
        return Err(format!("unexpected '{}'", &body[p.i..]));
    }
    Ok(e)
}

trait UsesFrame {
    fn uses_frame(&self) -> bool;
}

impl UsesFrame for Expr {
    fn uses_frame(&self) -> bool {
        match self {
            Expr::Frame => true,
            Expr::Num(_) | Expr::Ch(_) => false,
            Expr::Neg(a) => a.uses_frame(),
            Expr::Bin(_, a, b) => a.uses_frame() || b.uses_frame(),
            Expr::Call(_, a) => a.iter().any(Expr::uses_frame),
        }
    }
}

pub fn doc_has_exprs(doc: &GraphDoc) -> bool {
    doc.nodes.iter().any(|n| {
        n.params.values().any(is_expr)
            || n.params
                .get("scalars")
                .and_then(Value::as_object)
                .is_some_and(|m| {
                    m.values()
                        .any(|d| is_expr(d) || d.get("default").is_some_and(is_expr))
                })
    })
}

/// Where a parameter's expression or value lives.
enum Slot {
    Param,
    Scalar,
}

/// Evaluates every expression parameter of a plain graph (see the module
/// contract).
pub fn resolve(doc: &mut GraphDoc) -> Result<Vec<AnimatedScalar>, GraphErrors> {
    // Every expression: "node.param" → (text, slot).
    let mut exprs: HashMap<String, (String, Slot)> = HashMap::new();
    for n in &doc.nodes {
        for (k, v) in &n.params {
            if is_expr(v) {
                exprs.insert(
                    format!("{}.{}", n.id, k),
                    (v.as_str().unwrap_or("").into(), Slot::Param),
                );
            }
        }
        for (k, d) in n
            .params
            .get("scalars")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let e = if is_expr(d) {
                Some(d)
            } else {
                d.get("default").filter(|x| is_expr(x))
            };
            if let Some(e) = e {
                exprs.insert(
                    format!("{}.{}", n.id, k),
                    (e.as_str().unwrap_or("").into(), Slot::Scalar),
                );
            }
        }
    }
    let mut errors = Vec::new();
    let mut done: HashMap<String, Expr> = HashMap::new();
    let mut keys: Vec<&String> = exprs.keys().collect();
    keys.sort();
    for key in keys {
        let mut stack = Vec::new();
        if let Err(e) = closed(key, doc, &exprs, &mut done, &mut stack) {
            if !errors.contains(&e) {
                errors.push(e);
            }
        }
    }
    if !errors.is_empty() {
        return Err(GraphErrors(errors));
    }
    let mut animated = Vec::new();
    let mut keys: Vec<(&String, &(String, Slot))> = exprs.iter().collect();
    keys.sort_by(|a, b| a.0.cmp(b.0));
    for (key, (_, slot)) in keys {
        let e = &done[key];
        let (node, param) = key.split_once('.').expect("node.param");
        let v = e.eval(0.0);
        let n = doc.node_mut(node).expect("a node of the graph");
        match slot {
            Slot::Param => {
                if e.uses_frame() {
                    errors.push(GraphError::param(
                        node,
                        param,
                        "`frame` animates kernel scalars only; this parameter is read when the graph is built",
                    ));
                    continue;
                }
                let int = catalog::kind(&n.kind)
                    .and_then(|k| k.param(param))
                    .is_some_and(|s| s.ty == ParamType::Int);
                let val = if int {
                    Value::from(v.round() as i64)
                } else {
                    Value::from(v)
                };
                if !v.is_finite() {
                    errors.push(GraphError::param(
                        node,
                        param,
                        format!("the expression gives {}", v),
                    ));
                    continue;
                }
                n.params.insert(param.to_string(), val);
            }
            Slot::Scalar => {
                let slot = n
                    .params
                    .get_mut("scalars")
                    .and_then(Value::as_object_mut)
                    .and_then(|m| m.get_mut(param))
                    .expect("found above");
                let ty = match slot {
                    Value::Object(o) => o
                        .get("type")
                        .and_then(Value::as_str)
                        .and_then(Type::parse)
                        .unwrap_or(Type::F32),
                    _ => Type::F32,
                };
                let integer = ty != Type::F32;
                let v = if integer { v.round() } else { v };
                if !v.is_finite() {
                    errors.push(GraphError::scalar(
                        node,
                        param,
                        format!("the expression gives {}", v),
                    ));
                    continue;
                }
                // The number first, then the declaration's own checks (the
                // expression's default removed, not zeroed: 0 may lie
                // outside the declared range).
                match &mut *slot {
                    Value::Object(o) => {
                        o.remove("default");
                    }
                    s => *s = Value::from(0.0),
                }
                if let Err(m) = set_value(param, slot, v) {
                    errors.push(GraphError::scalar(node, param, m));
                    continue;
                }
                if e.uses_frame() {
                    // Every frame's value is checked against the range the
                    // load-time one was (`AnimatedScalar::value`).
                    let (min, max) = ScalarDecl::parse(param, slot)
                        .map(|d| (d.min, d.max))
                        .unwrap_or((None, None));
                    animated.push(AnimatedScalar {
                        kernel: node.to_string(),
                        scalar: param.to_string(),
                        expr: e.clone(),
                        integer,
                        min,
                        max,
                    });
                }
            }
        }
    }
    if !errors.is_empty() {
        return Err(GraphErrors(errors));
    }
    Ok(animated)
}

fn at(key: &str) -> (&str, &str) {
    key.split_once('.').unwrap_or((key, ""))
}

/// The expression of `key` with its references replaced by theirs.
fn closed(
    key: &str,
    doc: &GraphDoc,
    exprs: &HashMap<String, (String, Slot)>,
    done: &mut HashMap<String, Expr>,
    stack: &mut Vec<String>,
) -> Result<Expr, GraphError> {
    if let Some(e) = done.get(key) {
        return Ok(e.clone());
    }
    let (node, param) = at(key);
    if stack.iter().any(|s| s == key) {
        stack.push(key.to_string());
        return Err(GraphError::param(
            node,
            param,
            format!("the references form a cycle: {}", stack.join(" → ")),
        ));
    }
    let Some((text, _)) = exprs.get(key) else {
        return Ok(Expr::Num(plain_value(key, doc)?));
    };
    let e =
        parse(text).map_err(|m| GraphError::param(node, param, format!("in '{}': {}", text, m)))?;
    stack.push(key.to_string());
    let e = subst(e, key, doc, exprs, done, stack)?;
    stack.pop();
    done.insert(key.to_string(), e.clone());
    Ok(e)
}

fn subst(
    e: Expr,
    key: &str,
    doc: &GraphDoc,
    exprs: &HashMap<String, (String, Slot)>,
    done: &mut HashMap<String, Expr>,
    stack: &mut Vec<String>,
) -> Result<Expr, GraphError> {
    let go = |x: Expr, done: &mut HashMap<String, Expr>, stack: &mut Vec<String>| {
        subst(x, key, doc, exprs, done, stack)
    };
    Ok(match e {
        Expr::Ch(r) => {
            if !r.contains('.') {
                let (node, param) = at(key);
                return Err(GraphError::param(
                    node,
                    param,
                    format!("ch('{}'): name a NODE.PARAM", r),
                ));
            }
            let c = closed(&r, doc, exprs, done, stack).map_err(|err| match err {
                GraphError::Document { message } => {
                    let (node, param) = at(key);
                    GraphError::param(node, param, message)
                }
                other => other,
            })?;
            if c.uses_frame() {
                c
            } else {
                Expr::Num(c.eval(0.0))
            }
        }
        Expr::Neg(a) => Expr::Neg(Box::new(go(*a, done, stack)?)),
        Expr::Bin(op, a, b) => {
            let a = go(*a, done, stack)?;
            Expr::Bin(op, Box::new(a), Box::new(go(*b, done, stack)?))
        }
        Expr::Call(f, args) => {
            let mut out = Vec::new();
            for a in args {
                out.push(go(a, done, stack)?);
            }
            Expr::Call(f, out)
        }
        other => other,
    })
}

/// The number a reference names: a numeric parameter (set or by default)
/// or a kernel scalar.
fn plain_value(key: &str, doc: &GraphDoc) -> Result<f64, GraphError> {
    let (node, param) = at(key);
    let missing = |m: String| GraphError::Document { message: m };
    let n = doc
        .node(node)
        .ok_or_else(|| missing(format!("ch('{}'): there is no node '{}'", key, node)))?;
    if let Some(v) = n.params.get(param) {
        return v.as_f64().ok_or_else(|| {
            missing(format!(
                "ch('{}'): '{}' is not a number ({})",
                key, param, v
            ))
        });
    }
    if let Some(d) = n.params.get("scalars").and_then(|s| s.get(param)) {
        return ScalarDecl::parse(param, d)
            .map(|d| d.value())
            .map_err(|m| missing(format!("ch('{}'): {}", key, m)));
    }
    if let Some(d) = catalog::kind(&n.kind)
        .and_then(|k| k.param(param))
        .and_then(|s| s.default_value())
    {
        if let Some(x) = d.as_f64() {
            return Ok(x);
        }
    }
    Err(missing(format!(
        "ch('{}'): node '{}' has no numeric parameter or scalar '{}'",
        key, node, param
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(v: Value) -> GraphDoc {
        GraphDoc::from_value(v).unwrap()
    }

    #[test]
    fn references_evaluate_and_frame_animates_kernel_scalars() {
        let mut d = doc(json!({"format": "weft-graph", "version": 1, "nodes": [
            {"id": "a", "kind": "kernel", "params": {"scalars": {"rate": 0.5, "n": {"type": "i32", "default": 3}}}},
            {"id": "b", "kind": "kernel", "params": {"scalars": {
                "r2": "= ch('a.rate') * 2 + ch('a.n')",
                "wave": "= sin(frame * 0.1) * ch('b.r2')"}}}]}));
        let anim = resolve(&mut d).unwrap();
        assert_eq!(d.node("b").unwrap().params["scalars"]["r2"], json!(4.0));
        assert_eq!(anim.len(), 1);
        assert_eq!(anim[0].kernel, "b");
        assert_eq!(anim[0].value(5), Ok((0.5f64).sin() * 4.0));
    }

    #[test]
    fn cycles_missing_references_and_syntax_errors_name_the_node() {
        let mut d = doc(json!({"format": "weft-graph", "version": 1, "nodes": [
            {"id": "a", "kind": "kernel", "params": {"scalars": {"x": "= ch('b.y')"}}},
            {"id": "b", "kind": "kernel", "params": {"scalars": {"y": "= ch('a.x') + 1"}}}]}));
        let e = resolve(&mut d).unwrap_err().to_string();
        assert!(
            e.contains("cycle") && e.contains("a.x") && e.contains("b.y"),
            "{}",
            e
        );
        let mut d = doc(json!({"format": "weft-graph", "version": 1, "nodes": [
            {"id": "a", "kind": "kernel", "params": {"scalars": {"x": "= ch('zz.y')", "s": "= 1 +"}}}]}));
        let e = resolve(&mut d).unwrap_err().to_string();
        assert!(e.contains("'a'") && e.contains("no node 'zz'"), "{}", e);
        assert!(e.contains("ends too early"), "{}", e);
    }

    #[test]
    fn qualify_prefixes_references_inside_a_group() {
        let mut p = Map::new();
        p.insert("scalars".into(), json!({"k": "= ch('a.x') + ch( \"b.y\")"}));
        qualify(&mut p, "g");
        assert_eq!(p["scalars"]["k"], json!("= ch('g/a.x') + ch( \"g/b.y\")"));
    }
}
