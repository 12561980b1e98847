//! Validates a graph document against the catalog and builds the IR program.
//!
//! Pre: a parsed `GraphDoc`. Post: a `Program` whose layout words and field
//! offsets are computed and whose kernels validate, or every problem found,
//! each naming its node (and param / port / code line). Nothing is allocated
//! for fields here beyond initial data read from `.npy` files, and sizes are
//! checked against the caps before any of that.

use super::catalog::{self, Family, NodeKind, ParamSpec, ParamType, PortType};
use super::document::{split_endpoint, GraphDoc, NodeDoc};
use super::error::{GraphError, GraphErrors};
use super::npy;
use crate::ir::layout;
use crate::ir::*;
use crate::lang::{self, KernelEnv};
use crate::types::{Scalar, Type};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

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

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn resolve_nodes<'a>(doc: &'a GraphDoc, errors: &mut Vec<GraphError>) -> Vec<Node<'a>> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for n in &doc.nodes {
        if !valid_id(&n.id) {
            errors.push(GraphError::node_msg(
                &n.id,
                "node ids must be 1-64 letters, digits, `_` or `-`",
            ));
            continue;
        }
        if !seen.insert(n.id.as_str()) {
            errors.push(GraphError::node_msg(
                &n.id,
                "duplicate node id; every node needs its own id",
            ));
            continue;
        }
        let Some(kind) = catalog::kind(&n.kind) else {
            let known: Vec<&str> = catalog::kinds().iter().map(|k| k.name).collect();
            errors.push(GraphError::node_msg(
                &n.id,
                format!(
                    "unknown node kind '{}'; known kinds: {}",
                    n.kind,
                    known.join(", ")
                ),
            ));
            continue;
        };
        let mut params = serde_json::Map::new();
        let mut ok = true;
        for (k, v) in &n.params {
            match kind.param(k) {
                None => {
                    let known: Vec<&str> = kind.params.iter().map(|p| p.name).collect();
                    errors.push(GraphError::param(
                        &n.id,
                        k,
                        format!(
                            "'{}' has no parameter '{}' (it has: {})",
                            kind.name,
                            k,
                            if known.is_empty() {
                                "none".to_string()
                            } else {
                                known.join(", ")
                            }
                        ),
                    ));
                    ok = false;
                }
                Some(spec) => match check_param(spec.ty, v).and_then(|()| check_range(spec, v)) {
                    Ok(()) => {
                        params.insert(k.clone(), v.clone());
                    }
                    Err(m) => {
                        errors.push(GraphError::param(&n.id, k, m));
                        ok = false;
                    }
                },
            }
        }
        for spec in kind.params {
            if !params.contains_key(spec.name) {
                match spec.default_value() {
                    Some(d) => {
                        params.insert(spec.name.into(), d);
                    }
                    None if ok => {
                        errors.push(GraphError::param(
                            &n.id,
                            spec.name,
                            format!("required parameter '{}' is missing", spec.name),
                        ));
                        ok = false;
                    }
                    None => {}
                }
            }
        }
        if !ok {
            continue;
        }
        let mut field_ports = Vec::new();
        if kind.dynamic_field_inputs {
            let scalars: Vec<String> = params
                .get("scalars")
                .and_then(|s| s.as_object())
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default();
            let ports = match (&params["code"], &params["expr"]) {
                (Value::String(code), Value::Null) => lang::field_ports(code, &scalars),
                (Value::Null, expr @ Value::Object(_)) => Ok(super::expr::expr_field_ports(expr)),
                (Value::Null, Value::Null) => {
                    errors.push(GraphError::param(
                        &n.id,
                        "code",
                        "a kernel needs 'code' (kernel language) or 'expr' (an expression body)",
                    ));
                    continue;
                }
                _ => {
                    errors.push(GraphError::param(
                        &n.id,
                        "expr",
                        "give either 'code' or 'expr', not both",
                    ));
                    continue;
                }
            };
            match ports {
                Ok(p) => field_ports = p,
                Err(e) => {
                    errors.push(GraphError::Code {
                        node: n.id.clone(),
                        line: e.line,
                        col: e.col,
                        message: e.message,
                    });
                    continue;
                }
            }
        }
        out.push(Node {
            doc: n,
            kind,
            params,
            field_ports,
        });
    }
    out
}

/// Numeric parameters must lie inside their catalog range.
fn check_range(spec: &ParamSpec, v: &Value) -> Result<(), String> {
    match (spec.range, v.as_f64()) {
        (Some((lo, hi)), Some(x)) if !(lo..=hi).contains(&x) => {
            Err(format!("{} must be {} to {}, got {}", spec.name, lo, hi, v))
        }
        _ => Ok(()),
    }
}

fn check_param(ty: ParamType, v: &Value) -> Result<(), String> {
    let num = |v: &Value| v.as_f64().filter(|x| x.is_finite());
    match ty {
        ParamType::Int => v
            .as_i64()
            .map(|_| ())
            .ok_or_else(|| format!("expected an integer, got {}", v)),
        ParamType::Number => match v {
            Value::Null => Ok(()),
            _ => num(v)
                .map(|_| ())
                .ok_or_else(|| format!("expected a number, got {}", v)),
        },
        ParamType::String => match v {
            Value::Null | Value::String(_) => Ok(()),
            _ => Err(format!("expected a string, got {}", v)),
        },
        ParamType::Code => match v {
            Value::Null | Value::String(_) => Ok(()),
            _ => Err(format!("expected kernel code as a string, got {}", v)),
        },
        ParamType::Expr => match v {
            Value::Null | Value::Object(_) => Ok(()),
            _ => Err(format!(
                "expected an expression body {{\"nodes\": [...], \"wires\": [...]}}, got {}",
                v
            )),
        },
        ParamType::Shape => match v {
            Value::Null => Ok(()),
            Value::Array(a) if (1..=3).contains(&a.len()) => {
                for x in a {
                    match x.as_i64() {
                        Some(n) if (1..=1 << 30).contains(&n) => {}
                        Some(n) => {
                            return Err(format!(
                                "every extent must be between 1 and 2^30, got {}",
                                n
                            ))
                        }
                        None => return Err(format!("extents must be integers, got {}", x)),
                    }
                }
                Ok(())
            }
            Value::Array(a) => Err(format!("a shape has 1 to 3 axes, got {}", a.len())),
            _ => Err(format!(
                "expected a list of 1-3 positive integers like [128, 128], got {}",
                v
            )),
        },
        ParamType::Enum(opts) => match v.as_str() {
            Some(s) if opts.contains(&s) => Ok(()),
            _ => Err(format!("expected one of {}, got {}", opts.join(", "), v)),
        },
        ParamType::Color | ParamType::Rect => {
            let n = if ty == ParamType::Color { 3 } else { 4 };
            match v.as_array() {
                Some(a) if a.len() == n && a.iter().all(|x| num(x).is_some()) => Ok(()),
                _ => Err(format!("expected a list of {} numbers, got {}", n, v)),
            }
        }
        ParamType::Init => match v {
            Value::Number(_) => Ok(()),
            Value::Array(a) if !a.is_empty() && a.iter().all(|x| num(x).is_some()) => Ok(()),
            Value::Object(o) if o.len() == 1 && o.get("npy").is_some_and(Value::is_string) => {
                Ok(())
            }
            _ => Err(format!(
                "expected a number, a list of numbers or {{\"npy\": \"file.npy\"}}, got {}",
                v
            )),
        },
        ParamType::Scalars => {
            let Some(o) = v.as_object() else {
                return Err(format!(
                    "expected an object of scalar parameters, got {}",
                    v
                ));
            };
            for (k, s) in o {
                if syn::parse_str::<syn::Ident>(k).is_err() {
                    return Err(format!("scalar name '{}' is not a valid identifier", k));
                }
                match s {
                    Value::Number(_) => {}
                    Value::Object(d) => {
                        let t = d.get("type").and_then(Value::as_str);
                        if !matches!(t, Some("f32" | "i32" | "u32")) {
                            return Err(format!(
                                "scalar '{}' needs \"type\": \"f32\", \"i32\" or \"u32\"",
                                k
                            ));
                        }
                        if d.keys().any(|k| {
                            !matches!(k.as_str(), "type" | "default" | "min" | "max" | "doc")
                        }) {
                            return Err(format!(
                                "scalar '{}' takes only \"type\", \"default\", \"min\", \"max\" and \"doc\"",
                                k
                            ));
                        }
                        for key in ["default", "min", "max"] {
                            if d.get(key).is_some_and(|x| num(x).is_none()) {
                                return Err(format!("scalar '{}' has a non-numeric {}", k, key));
                            }
                        }
                        if d.get("doc").is_some_and(|x| !x.is_string()) {
                            return Err(format!("scalar '{}': \"doc\" must be a string", k));
                        }
                        let get = |key: &str| d.get(key).and_then(Value::as_f64);
                        let (lo, hi) = (
                            get("min").unwrap_or(f64::NEG_INFINITY),
                            get("max").unwrap_or(f64::INFINITY),
                        );
                        if lo > hi {
                            return Err(format!("scalar '{}' has min {} above max {}", k, lo, hi));
                        }
                        if let Some(default) = get("default").filter(|x| !(lo..=hi).contains(x)) {
                            return Err(format!(
                                "scalar '{}' default {} is outside its range {} to {}",
                                k, default, lo, hi
                            ));
                        }
                    }
                    _ => {
                        return Err(format!(
                            "scalar '{}' must be a number or {{\"type\": .., \"default\": ..}}",
                            k
                        ))
                    }
                }
            }
            Ok(())
        }
    }
}

/// For every node, its wired inputs: port name -> source node index.
type Inputs = Vec<HashMap<String, usize>>;

fn resolve_wires(
    doc: &GraphDoc,
    nodes: &[Node],
    index: &HashMap<&str, usize>,
    errors: &mut Vec<GraphError>,
) -> Inputs {
    let mut inputs: Inputs = vec![HashMap::new(); nodes.len()];
    let known: HashSet<&str> = doc.nodes.iter().map(|n| n.id.as_str()).collect();
    for w in &doc.wires {
        let (fnode, fport) = split_endpoint(&w.from);
        let (tnode, tport) = split_endpoint(&w.to);
        let (Some(&fi), Some(&ti)) = (index.get(fnode), index.get(tnode)) else {
            // Wires touching a node that failed to resolve are reported by that node's error.
            for (n, end) in [(fnode, &w.from), (tnode, &w.to)] {
                if !known.contains(n) {
                    let other = if n == fnode { tnode } else { fnode };
                    let blame = if known.contains(other) { other } else { n };
                    errors.push(GraphError::node_msg(
                        blame,
                        format!(
                            "wire {} -> {} refers to missing node '{}' (in '{}')",
                            w.from, w.to, n, end
                        ),
                    ));
                }
            }
            continue;
        };
        let (f, t) = (&nodes[fi], &nodes[ti]);
        let fport = if fport.is_empty() && f.kind.outputs.len() == 1 {
            f.kind.outputs[0].name
        } else {
            fport
        };
        let Some(out) = f.kind.output(fport) else {
            let have: Vec<&str> = f.kind.outputs.iter().map(|p| p.name).collect();
            errors.push(GraphError::port(
                f.id(),
                fport,
                format!(
                    "'{}' has no output port '{}' (outputs: {})",
                    f.kind.name,
                    fport,
                    if have.is_empty() {
                        "none".into()
                    } else {
                        have.join(", ")
                    }
                ),
            ));
            continue;
        };
        let tport = if tport.is_empty() && t.kind.inputs.len() == 1 {
            t.kind.inputs[0].name
        } else {
            tport
        };
        let in_ty = if let Some(p) = t.kind.input(tport) {
            p.ty
        } else if t.kind.dynamic_field_inputs && t.field_ports.iter().any(|p| p == tport) {
            PortType::Field
        } else {
            let mut have: Vec<String> = t.kind.inputs.iter().map(|p| p.name.to_string()).collect();
            have.extend(t.field_ports.iter().cloned());
            let msg = if t.kind.dynamic_field_inputs {
                format!(
                    "the kernel's body uses no field named '{}' (its field ports: {})",
                    tport,
                    if have.is_empty() {
                        "none".into()
                    } else {
                        have.join(", ")
                    }
                )
            } else {
                format!(
                    "'{}' has no input port '{}' (inputs: {})",
                    t.kind.name,
                    tport,
                    if have.is_empty() {
                        "none".to_string()
                    } else {
                        have.join(", ")
                    }
                )
            };
            errors.push(GraphError::port(t.id(), tport, msg));
            continue;
        };
        if out.ty != in_ty {
            errors.push(GraphError::port(
                t.id(),
                tport,
                format!(
                    "cannot wire {} output '{}.{}' to {} input '{}.{}'",
                    out.ty.name(),
                    f.id(),
                    fport,
                    in_ty.name(),
                    t.id(),
                    tport
                ),
            ));
            continue;
        }
        let tport_owned = tport.to_string();
        if inputs[ti].insert(tport_owned.clone(), fi).is_some() {
            errors.push(GraphError::port(
                t.id(),
                &tport_owned,
                "more than one wire reaches this input; an input takes one wire",
            ));
        }
    }
    for (i, n) in nodes.iter().enumerate() {
        for p in n.kind.inputs.iter().filter(|p| !p.optional) {
            if !inputs[i].contains_key(p.name) {
                errors.push(GraphError::port(
                    n.id(),
                    p.name,
                    format!("required input '{}' is not wired", p.name),
                ));
            }
        }
        for p in &n.field_ports {
            if !inputs[i].contains_key(p) {
                errors.push(GraphError::port(
                    n.id(),
                    p,
                    format!(
                        "the code uses field '{}' but no field is wired to port '{}'",
                        p, p
                    ),
                ));
            }
        }
    }
    inputs
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

    fn layouts(&mut self) {
        let dense = self.of_family(Family::Layout);
        let mut handle: HashMap<usize, LayoutId> = HashMap::new();
        // Create in parent-first order; detect parent cycles.
        let mut pending: Vec<usize> = dense.clone();
        while !pending.is_empty() {
            let before = pending.len();
            pending.retain(|&i| {
                let parent = self.inputs[i].get("parent").copied();
                if let Some(p) = parent {
                    if !handle.contains_key(&p) {
                        return true;
                    }
                }
                let shape: Vec<u32> = self.nodes[i]
                    .p("shape")
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|x| x.as_u64())
                            .map(|x| x as u32)
                            .collect()
                    })
                    .unwrap_or_default();
                let parent_h = parent.map(|p| handle[&p]);
                let h = self.program.layouts.append(LayoutNode {
                    node_id: self.nodes[i].id().to_string(),
                    kind: LayoutKind::Dense,
                    shape,
                    parent: parent_h,
                    children: vec![],
                    cell_words: 0,
                    offset_in_parent: 0,
                });
                if let Some(ph) = parent_h {
                    self.program.layouts[ph]
                        .children
                        .push(LayoutChild::Layout(h));
                }
                handle.insert(i, h);
                false
            });
            if pending.len() == before {
                for &i in &pending {
                    self.errors.push(GraphError::port(
                        self.nodes[i].id(),
                        "parent",
                        "layout nodes form a cycle through their 'parent' wires",
                    ));
                }
                return;
            }
        }
        for &i in &dense {
            if self.nodes[i].p("shape").is_null() {
                self.errors.push(GraphError::param(
                    self.nodes[i].id(),
                    "shape",
                    "a dense node needs a shape like [128, 128]",
                ));
            }
        }
        for (h, l) in self.program.layouts.iter() {
            if let Some(p) = l.parent {
                let pd = self.program.layouts[p].shape.len();
                if pd != l.shape.len() {
                    self.errors.push(GraphError::param(&l.node_id, "shape", format!("has {} axes but its parent '{}' has {}; nested layout nodes need the same number of axes", l.shape.len(), self.program.layouts[p].node_id, pd)));
                }
            }
            let _ = h;
        }
    }

    fn layout_of(&self, node: usize) -> Option<LayoutId> {
        let src = *self.inputs[node].get("layout")?;
        let id = self.nodes[src].id();
        self.program
            .layouts
            .iter()
            .find(|(_, l)| l.node_id == id)
            .map(|(h, _)| h)
    }

    fn fields(&mut self) {
        if !self.errors.is_empty() {
            return;
        }
        for i in self.of_family(Family::Field) {
            let n = &self.nodes[i];
            let id = n.id().to_string();
            let Some(layout) = self.layout_of(i) else {
                self.errors.push(GraphError::port(
                    &id,
                    "layout",
                    "a field must be wired to a layout node's 'cells'",
                ));
                continue;
            };
            let ty = Type::parse(n.p("type").as_str().unwrap_or("f32"))
                .expect("catalog enum lists valid types");
            // Logical shape: product of extents along the path from the root.
            let mut shape = self.program.layouts[layout].shape.clone();
            let mut cur = self.program.layouts[layout].parent;
            while let Some(p) = cur {
                for (s, ps) in shape.iter_mut().zip(&self.program.layouts[p].shape) {
                    *s = s.saturating_mul(*ps);
                }
                cur = self.program.layouts[p].parent;
            }
            let field = Field {
                name: id.clone(),
                ty,
                storage: Storage::Word,
                layout,
                shape,
                offset_in_cell: 0,
                init: FieldInit::Constant(vec![0; ty.components()]),
            };
            let h = self.program.fields.append(field);
            self.program.layouts[layout]
                .children
                .push(LayoutChild::Field(h));
        }
        if let Err(e) = layout::compute(&mut self.program) {
            self.errors
                .push(GraphError::param(&e.node, "shape", e.message));
            return;
        }
        for i in self.of_family(Family::Field) {
            let id = self.nodes[i].id();
            let Some(h) = self.program.field_by_name(id) else {
                continue;
            };
            match self.field_init(i, h) {
                Ok(init) => self.program.fields[h].init = init,
                Err(e) => self.errors.push(e),
            }
        }
    }

    fn field_init(&self, node: usize, h: FieldId) -> Result<FieldInit, GraphError> {
        let n = &self.nodes[node];
        let f = &self.program.fields[h];
        let s = f.ty.scalar().expect("field type");
        let word = |x: f64| -> Result<u32, String> {
            match s {
                Scalar::F32 => Ok((x as f32).to_bits()),
                Scalar::I32 if x.fract() == 0.0 && x >= i32::MIN as f64 && x <= i32::MAX as f64 => {
                    Ok(x as i32 as u32)
                }
                Scalar::U32 if x.fract() == 0.0 && x >= 0.0 && x <= u32::MAX as f64 => Ok(x as u32),
                _ => Err(format!("{} does not fit a {} field", x, f.ty)),
            }
        };
        let init = n.p("init");
        let perr = |m: String| GraphError::param(n.id(), "init", m);
        match init {
            Value::Number(x) => {
                let w = word(x.as_f64().unwrap_or(0.0)).map_err(perr)?;
                Ok(FieldInit::Constant(vec![w; f.ty.components()]))
            }
            Value::Array(a) => {
                if a.len() != f.ty.components() {
                    let n = f.ty.components();
                    return Err(perr(format!(
                        "a {} has {} component{} but the list has {} number{}",
                        f.ty,
                        n,
                        if n == 1 { "" } else { "s" },
                        a.len(),
                        if a.len() == 1 { "" } else { "s" }
                    )));
                }
                let mut words = a
                    .iter()
                    .map(|x| word(x.as_f64().unwrap_or(0.0)))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(perr)?;
                if let Type::Matrix(k) = f.ty {
                    // Lists are written row by row, like .npy files; storage is by column.
                    let k = k as usize;
                    let rows = words.clone();
                    for r in 0..k {
                        for c in 0..k {
                            words[c * k + r] = rows[r * k + c];
                        }
                    }
                }
                Ok(FieldInit::Constant(words))
            }
            Value::Object(o) => {
                let rel = o["npy"].as_str().unwrap_or("");
                let path = self.opts.base_dir.join(rel);
                let arr = npy::read_npy(&path).map_err(perr)?;
                let want_dtype = match s {
                    Scalar::F32 => npy::DType::F32,
                    Scalar::I32 => npy::DType::I32,
                    _ => npy::DType::U32,
                };
                if arr.dtype != want_dtype {
                    return Err(perr(format!(
                        "{} holds {:?} data but field '{}' is {}",
                        rel, arr.dtype, f.name, f.ty
                    )));
                }
                let mut want: Vec<usize> = f.shape.iter().map(|&x| x as usize).collect();
                match f.ty {
                    Type::Vector(_, k) => want.push(k as usize),
                    Type::Matrix(k) => want.extend([k as usize, k as usize]),
                    _ => {}
                }
                if arr.shape != want {
                    return Err(perr(format!(
                        "{} has shape {:?} but field '{}' needs {:?}",
                        rel, arr.shape, f.name, want
                    )));
                }
                let mut words = arr.words;
                if let Type::Matrix(k) = f.ty {
                    // NumPy stores [row][col]; fields store columns.
                    let k = k as usize;
                    for cell in words.chunks_mut(k * k) {
                        let m: Vec<u32> = cell.to_vec();
                        for r in 0..k {
                            for c in 0..k {
                                cell[c * k + r] = m[r * k + c];
                            }
                        }
                    }
                }
                Ok(FieldInit::Data(words))
            }
            _ => Err(perr("unsupported initial value".into())),
        }
    }

    fn kernels(&mut self) {
        if !self.errors.is_empty() {
            return;
        }
        for i in self.of_family(Family::Kernel) {
            if let Err(e) = self.kernel(i) {
                self.errors.push(e);
            }
        }
    }

    fn kernel(&mut self, i: usize) -> Result<(), GraphError> {
        let n = &self.nodes[i];
        let id = n.id().to_string();
        let mut params = Vec::new();
        if let Some(o) = n.p("scalars").as_object() {
            for (name, v) in o {
                let (ty, val) = match v {
                    Value::Number(x) if x.is_i64() || x.is_u64() => {
                        (Type::I32, x.as_f64().unwrap_or(0.0))
                    }
                    Value::Number(x) => (Type::F32, x.as_f64().unwrap_or(0.0)),
                    Value::Object(d) => {
                        let bound =
                            |k: &str, or: f64| d.get(k).and_then(Value::as_f64).unwrap_or(or);
                        (
                            Type::parse(d["type"].as_str().unwrap_or("f32")).unwrap_or(Type::F32),
                            // Without a default, the value nearest 0 inside the range.
                            d.get("default").and_then(Value::as_f64).unwrap_or_else(|| {
                                0f64.clamp(
                                    bound("min", f64::NEG_INFINITY),
                                    bound("max", f64::INFINITY),
                                )
                            }),
                        )
                    }
                    _ => (Type::F32, 0.0),
                };
                let value = scalar_bits(ty, val)
                    .map_err(|m| GraphError::param(&id, "scalars", format!("'{}': {}", name, m)))?;
                params.push(KernelParam {
                    name: name.clone(),
                    ty,
                    value,
                });
            }
        }
        let mut bindings = Vec::new();
        let mut env_fields = Vec::new();
        for port in &n.field_ports {
            let src = self.inputs[i][port];
            let fid = self
                .program
                .field_by_name(self.nodes[src].id())
                .expect("field nodes were built");
            let f = &self.program.fields[fid];
            env_fields.push((port.clone(), fid, f.ty, f.shape.len()));
            bindings.push((port.clone(), fid));
        }
        let iteration = match (n.p("range"), n.p("over")) {
            (Value::Array(a), Value::Null) => Iteration::Range(
                a.iter()
                    .filter_map(Value::as_u64)
                    .map(|x| x as u32)
                    .collect(),
            ),
            (Value::Null, Value::String(port)) => match bindings.iter().find(|b| &b.0 == port) {
                Some(&(_, f)) => Iteration::Field(f),
                None => {
                    return Err(GraphError::param(
                        &id,
                        "over",
                        format!(
                            "'{}' is not one of this kernel's field ports (the code must index it)",
                            port
                        ),
                    ))
                }
            },
            (Value::Null, Value::Null) => {
                return Err(GraphError::param(
                    &id,
                    "range",
                    "a kernel needs either 'range' (e.g. [128, 128]) or 'over' (a field port name)",
                ))
            }
            _ => {
                return Err(GraphError::param(
                    &id,
                    "over",
                    "give either 'range' or 'over', not both",
                ))
            }
        };
        let shape = match &iteration {
            Iteration::Range(s) => s.clone(),
            Iteration::Field(f) => self.program.fields[*f].shape.clone(),
        };
        let total: u128 = shape.iter().map(|&x| x as u128).product();
        if total > MAX_RANGE as u128 {
            return Err(GraphError::param(
                &id,
                "range",
                format!("{} iterations exceed the cap of {}", total, MAX_RANGE),
            ));
        }
        let ptys: Vec<(String, Type)> = params.iter().map(|p| (p.name.clone(), p.ty)).collect();
        let env = KernelEnv {
            dims: shape.len(),
            params: &ptys,
            fields: &env_fields,
        };
        let lowered = match n.p("expr") {
            expr @ Value::Object(_) => {
                // An expression body becomes code, one statement per expression
                // node; errors are reported at the node that produced the line.
                let scalar_names: Vec<String> = ptys.iter().map(|p| p.0.clone()).collect();
                let generated = super::expr::expr_to_code(&id, expr, shape.len(), &scalar_names)?;
                lang::lower_kernel(&generated.code, &env).map_err(|e| {
                    match generated
                        .lines
                        .get(e.line.saturating_sub(1) as usize)
                        .cloned()
                        .flatten()
                    {
                        Some(expr_node) => GraphError::Expr {
                            node: id.clone(),
                            expr_node,
                            port: None,
                            message: e.message,
                        },
                        None => GraphError::param(&id, "expr", e.message),
                    }
                })?
            }
            _ => {
                let code = n.p("code").as_str().unwrap_or("");
                lang::lower_kernel(code, &env).map_err(|e| GraphError::Code {
                    node: id.clone(),
                    line: e.line,
                    col: e.col,
                    message: e.message,
                })?
            }
        };
        let k = Kernel {
            name: id.clone(),
            iteration,
            dims: shape.len(),
            params,
            entry: lowered.entry,
            functions: lowered.functions,
            bindings,
            fault_sites: Vec::new(),
        };
        if let Err(e) = validate_kernel(&self.program, &k, false) {
            return Err(GraphError::Code {
                node: id,
                line: e.span.line,
                col: e.span.col,
                message: format!("internal compiler error: {}", e.message),
            });
        }
        self.program.kernels.append(k);
        Ok(())
    }

    fn schedule(&mut self, doc: &GraphDoc) {
        if !self.errors.is_empty() {
            return;
        }
        // Resolve exec wires: (from node, pin) -> to node.
        let mut next: HashMap<(usize, String), usize> = HashMap::new();
        let mut incoming: HashMap<usize, usize> = HashMap::new();
        for w in &doc.exec {
            let (fnode, fpin) = split_endpoint(&w.from);
            let (tnode, tpin) = split_endpoint(&w.to);
            let (Some(&fi), Some(&ti)) = (self.index.get(fnode), self.index.get(tnode)) else {
                let missing = if self.index.contains_key(fnode) {
                    tnode
                } else {
                    fnode
                };
                let blame = if self.index.contains_key(fnode) {
                    fnode
                } else {
                    tnode
                };
                self.errors.push(GraphError::node_msg(
                    if self.index.contains_key(blame) {
                        blame
                    } else {
                        missing
                    },
                    format!(
                        "execution wire {} -> {} refers to missing node '{}'",
                        w.from, w.to, missing
                    ),
                ));
                continue;
            };
            let fk = self.nodes[fi].kind;
            let fpin = if fpin.is_empty() && fk.exec_outs.len() == 1 {
                fk.exec_outs[0]
            } else {
                fpin
            };
            if fpin.is_empty() && fk.exec_outs.len() > 1 {
                let pins: Vec<String> = fk
                    .exec_outs
                    .iter()
                    .map(|p| format!("'{}.{}'", fnode, p))
                    .collect();
                self.errors.push(GraphError::node_msg(
                    self.nodes[fi].id(),
                    format!(
                        "execution wire {} -> {} must name one of the pins {}",
                        w.from,
                        w.to,
                        pins.join(" or ")
                    ),
                ));
                continue;
            }
            if !fk.exec_outs.contains(&fpin) {
                self.errors.push(GraphError::port(
                    self.nodes[fi].id(),
                    fpin,
                    format!(
                        "'{}' has no execution output '{}' (it has: {})",
                        fk.name,
                        fpin,
                        if fk.exec_outs.is_empty() {
                            "none".into()
                        } else {
                            fk.exec_outs.join(", ")
                        }
                    ),
                ));
                continue;
            }
            if !tpin.is_empty() && tpin != "exec" {
                self.errors.push(GraphError::port(self.nodes[ti].id(), tpin, format!("execution wires arrive at the node itself ('{}' or '{}.exec'), not at '{}'", tnode, tnode, w.to)));
                continue;
            }
            if !self.nodes[ti].kind.exec_in {
                self.errors.push(GraphError::node_msg(
                    self.nodes[ti].id(),
                    format!(
                        "'{}' nodes cannot be the target of an execution wire",
                        self.nodes[ti].kind.name
                    ),
                ));
                continue;
            }
            if next.insert((fi, fpin.to_string()), ti).is_some() {
                self.errors.push(GraphError::port(self.nodes[fi].id(), fpin, "more than one execution wire leaves this pin; chain nodes one after another instead"));
            }
            if incoming.insert(ti, fi).is_some() {
                self.errors.push(GraphError::node_msg(self.nodes[ti].id(), "more than one execution wire arrives here; each node runs at one place in the schedule"));
            }
        }
        if !self.errors.is_empty() {
            return;
        }
        let mut on_start = Vec::new();
        let mut on_frame = Vec::new();
        let mut visited = HashSet::new();
        for i in 0..self.nodes.len() {
            let which = match self.nodes[i].kind.name {
                "on_start" => &mut on_start,
                "on_frame" => &mut on_frame,
                _ => continue,
            };
            match chain(
                self.nodes,
                &next,
                i,
                "then",
                &self.program,
                &mut visited,
                &mut Vec::new(),
            ) {
                Ok(steps) => which.extend(steps),
                Err(e) => {
                    self.errors.push(e);
                    return;
                }
            }
        }
        // Nodes on a cycle that no event reaches (in node order, so the blame is stable).
        let mut froms: Vec<usize> = next.keys().map(|k| k.0).collect();
        froms.sort_unstable();
        froms.dedup();
        for fi in froms {
            if !visited.contains(&fi) && self.nodes[fi].kind.exec_in {
                let mut cur = fi;
                let mut seen = HashSet::new();
                while let Some(&src) = incoming.get(&cur) {
                    if !seen.insert(cur) {
                        self.errors.push(GraphError::node_msg(
                            self.nodes[cur].id(),
                            "execution wires form a cycle; use a 'repeat' node for loops",
                        ));
                        return;
                    }
                    cur = src;
                }
            }
        }
        self.program.schedule = Schedule { on_start, on_frame };
    }

    fn views(&mut self) {
        if !self.errors.is_empty() {
            return;
        }
        for i in self.of_family(Family::View) {
            let n = &self.nodes[i];
            let id = n.id().to_string();
            let field_at = |port: &str| {
                self.inputs[i]
                    .get(port)
                    .and_then(|&s| self.program.field_by_name(self.nodes[s].id()))
            };
            let nums = |v: &Value| -> Vec<f32> {
                v.as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_f64)
                            .map(|x| x as f32)
                            .collect()
                    })
                    .unwrap_or_default()
            };
            match n.kind.name {
                "image" => {
                    let Some(f) = field_at("field") else { continue };
                    let fd = &self.program.fields[f];
                    let ok_ty = matches!(fd.ty, Type::Scalar(s) if s.is_numeric())
                        || matches!(fd.ty, Type::Vector(Scalar::F32, 3 | 4));
                    if fd.shape.len() != 2 || !ok_ty {
                        self.errors.push(GraphError::port(
                            &id,
                            "field",
                            format!(
                                "an image needs a 2D scalar, vec3 or vec4 field; '{}' is {}-D {}",
                                fd.name,
                                fd.shape.len(),
                                fd.ty
                            ),
                        ));
                        continue;
                    }
                    let range = match (n.p("min").as_f64(), n.p("max").as_f64()) {
                        (Some(a), Some(b)) => Some((a as f32, b as f32)),
                        (None, None) => None,
                        _ => {
                            self.errors.push(GraphError::param(
                                &id,
                                "max",
                                "give both 'min' and 'max' for a fixed range, or neither for auto",
                            ));
                            continue;
                        }
                    };
                    let colormap = Colormap::parse(n.p("colormap").as_str().unwrap_or("viridis"))
                        .unwrap_or(Colormap::Viridis);
                    self.program.views.push(View::Image {
                        node_id: id,
                        field: f,
                        colormap,
                        range,
                    });
                }
                "particles" => {
                    let Some(pos) = field_at("positions") else {
                        continue;
                    };
                    let fd = &self.program.fields[pos];
                    if fd.shape.len() != 1 || fd.ty != Type::Vector(Scalar::F32, 2) {
                        self.errors.push(GraphError::port(
                            &id,
                            "positions",
                            format!(
                                "particles need a 1D vec2 field; '{}' is {}-D {}",
                                fd.name,
                                fd.shape.len(),
                                fd.ty
                            ),
                        ));
                        continue;
                    }
                    let color_field = field_at("color");
                    if let Some(c) = color_field {
                        let cd = &self.program.fields[c];
                        if cd.shape != fd.shape
                            || !(cd.ty == Type::Vector(Scalar::F32, 3) || cd.ty == Type::U32)
                        {
                            self.errors.push(GraphError::port(&id, "color", format!("the colour field must be vec3 or u32 with the positions' shape {:?}; '{}' is {:?} {}", fd.shape, cd.name, cd.shape, cd.ty)));
                            continue;
                        }
                    }
                    let (w, h) = (
                        n.p("width").as_i64().unwrap_or(512),
                        n.p("height").as_i64().unwrap_or(512),
                    );
                    let c = nums(n.p("color"));
                    let bg = nums(n.p("background"));
                    let d = nums(n.p("domain"));
                    if d[2] <= d[0] || d[3] <= d[1] {
                        self.errors.push(GraphError::param(
                            &id,
                            "domain",
                            "domain must be [min x, min y, max x, max y] with max > min",
                        ));
                        continue;
                    }
                    let radius = n.p("radius").as_f64().unwrap_or(1.5) as f32;
                    self.program.views.push(View::Particles {
                        node_id: id,
                        positions: pos,
                        color_field,
                        color: [c[0], c[1], c[2]],
                        background: [bg[0], bg[1], bg[2]],
                        radius,
                        width: w as u32,
                        height: h as u32,
                        domain: [d[0], d[1], d[2], d[3]],
                    });
                }
                other => unreachable!("view kind {} missing from build", other),
            }
        }
    }
}

fn scalar_bits(ty: Type, v: f64) -> Result<u32, String> {
    match ty {
        Type::Scalar(Scalar::F32) => Ok((v as f32).to_bits()),
        Type::Scalar(Scalar::I32)
            if v.fract() == 0.0 && v >= i32::MIN as f64 && v <= i32::MAX as f64 =>
        {
            Ok(v as i32 as u32)
        }
        Type::Scalar(Scalar::U32) if v.fract() == 0.0 && v >= 0.0 && v <= u32::MAX as f64 => {
            Ok(v as u32)
        }
        _ => Err(format!("{} is not a valid {}", v, ty)),
    }
}

/// Follows an execution chain from `start.pin`, building steps.
fn chain(
    nodes: &[Node],
    next: &HashMap<(usize, String), usize>,
    start: usize,
    pin: &str,
    program: &Program,
    visited: &mut HashSet<usize>,
    stack: &mut Vec<usize>,
) -> Result<Vec<Step>, GraphError> {
    let mut steps = Vec::new();
    let mut cur = next.get(&(start, pin.to_string())).copied();
    while let Some(i) = cur {
        if stack.contains(&i) || !visited.insert(i) {
            return Err(GraphError::node_msg(
                nodes[i].id(),
                "execution wires form a cycle; use a 'repeat' node for loops",
            ));
        }
        stack.push(i);
        let n = &nodes[i];
        match n.kind.family {
            Family::Kernel => {
                let k = program.kernel_by_name(n.id()).expect("kernels were built");
                steps.push(Step::Launch(k));
            }
            Family::Execution if n.kind.name == "repeat" => {
                // The catalog's range (checked at load) keeps this within u32.
                let count = n.p("count").as_i64().unwrap_or(1);
                let body = chain(nodes, next, i, "body", program, visited, stack)?;
                steps.push(Step::Repeat {
                    node_id: n.id().to_string(),
                    count: count as u32,
                    body,
                });
            }
            _ => {
                return Err(GraphError::node_msg(
                    n.id(),
                    "this node cannot be part of an execution chain",
                ))
            }
        }
        stack.pop();
        cur = next.get(&(i, "then".to_string())).copied();
    }
    Ok(steps)
}
