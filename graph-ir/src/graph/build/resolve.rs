//! Checks every node against the catalog (ids, kinds, parameter types and
//! ranges) and resolves data wires to port → source node maps.

use super::*;

/// A node id, or the path of one inside groups (`smoke/advect/step`, made
/// by `graph::groups`): segments of 1-64 letters, digits, `_` or `-`.
fn valid_id(id: &str) -> bool {
    id.len() <= 1024
        && id.split('/').all(|seg| {
            !seg.is_empty()
                && seg.len() <= 64
                && seg
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        })
}

pub(super) fn resolve_nodes<'a>(doc: &'a GraphDoc, errors: &mut Vec<GraphError>) -> Vec<Node<'a>> {
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
        let mut declared_ports: Vec<String> = Vec::new();
        if kind.dynamic_field_inputs {
            let scalars: Vec<String> = params
                .get("scalars")
                .and_then(|s| s.as_object())
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default();
            let ports = match (&params["code"], &params["expr"]) {
                (Value::String(code), Value::Null) => lang::field_ports(code, &scalars),
                (Value::Null, expr @ Value::Object(_)) => {
                    Ok(crate::graph::expr::expr_field_ports(expr))
                }
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
            // Declared ports (`ports`) the code does not use yet take a
            // wire but bind nothing; a name that is a scalar cannot be one.
            for p in params["ports"].as_array().into_iter().flatten() {
                let Some(p) = p.as_str() else { continue };
                if scalars.iter().any(|s| s == p) {
                    errors.push(GraphError::param(
                        &n.id,
                        "ports",
                        format!(
                            "'{}' is a scalar of this kernel; a field port needs another name",
                            p
                        ),
                    ));
                    ok = false;
                } else {
                    declared_ports.push(p.to_string());
                }
            }
            if !ok {
                continue;
            }
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
            declared_ports: declared_ports
                .into_iter()
                .filter(|p| !field_ports.contains(p))
                .collect(),
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
        ParamType::Bool => v
            .as_bool()
            .map(|_| ())
            .ok_or_else(|| format!("expected true or false, got {}", v)),
        ParamType::String | ParamType::NodeId | ParamType::NodeIds => match v {
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
        ParamType::Color => match v.as_array() {
            Some(a) if a.len() == 3 && a.iter().all(|x| num(x).is_some()) => Ok(()),
            _ => Err(format!("expected a list of 3 numbers, got {}", v)),
        },
        ParamType::Vec3 => match v.as_array() {
            Some(a) if a.len() == 3 && a.iter().all(|x| num(x).is_some()) => Ok(()),
            _ => Err(format!("expected a list of 3 numbers like [0, 1, 0], got {}", v)),
        },
        ParamType::Rect => match v.as_array() {
            Some(a) if (a.len() == 4 || a.len() == 6) && a.iter().all(|x| num(x).is_some()) => {
                Ok(())
            }
            _ => Err(format!(
                "expected a list of 4 numbers (2-D) or 6 (3-D), got {}",
                v
            )),
        },
        // Its keys are checked where the view is built (naming the key).
        ParamType::Camera => match v {
            Value::Null | Value::Object(_) => Ok(()),
            _ => Err(format!(
                "expected a camera object like {{\"yaw\": 30, \"pitch\": 20}}, got {}",
                v
            )),
        },
        // Each light's keys are checked where the view is built.
        ParamType::Lights => match v {
            Value::Null => Ok(()),
            Value::Array(a) if a.iter().all(Value::is_object) => Ok(()),
            _ => Err(format!(
                "expected a list of lights like [{{\"type\": \"directional\", \"direction\": [0, 1, 0]}}], got {}",
                v
            )),
        },
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
        ParamType::FieldList => match v.as_array() {
            Some(a) if !a.is_empty() && a.iter().all(Value::is_string) => Ok(()),
            _ => Err(format!(
                "expected a non-empty list of field node ids like [\"u0\"], got {}",
                v
            )),
        },
        ParamType::PortNames => {
            let Some(a) = v.as_array() else {
                return Err(format!(
                    "expected a list of port names like [\"x\", \"v\"], got {}",
                    v
                ));
            };
            let mut seen = HashSet::new();
            for p in a {
                let name = p
                    .as_str()
                    .ok_or_else(|| format!("a port name must be a string, got {}", p))?;
                if syn::parse_str::<syn::Ident>(name).is_err() {
                    return Err(format!("port name '{}' is not a valid identifier", name));
                }
                if !seen.insert(name) {
                    return Err(format!("port '{}' is listed twice", name));
                }
            }
            Ok(())
        }
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
                crate::graph::scalars::ScalarDecl::parse(k, s)?;
            }
            Ok(())
        }
    }
}

/// For every node, its wired inputs: port name -> (source node index,
/// source output port).
pub(super) type Inputs = Vec<HashMap<String, (usize, &'static str)>>;

pub(super) fn resolve_wires(
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
        // An unnamed output port means the node's only output, or its only
        // required one (a field node's `field`, not its `grad`).
        let required: Vec<&str> = f
            .kind
            .outputs
            .iter()
            .filter(|p| !p.optional)
            .map(|p| p.name)
            .collect();
        let fport = if fport.is_empty() && f.kind.outputs.len() == 1 {
            f.kind.outputs[0].name
        } else if fport.is_empty() && required.len() == 1 {
            required[0]
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
        } else if t.kind.dynamic_field_inputs
            && (t.field_ports.iter().chain(&t.declared_ports)).any(|p| p == tport)
        {
            PortType::Field
        } else {
            let mut have: Vec<String> = t.kind.inputs.iter().map(|p| p.name.to_string()).collect();
            have.extend(t.field_ports.iter().cloned());
            have.extend(t.declared_ports.iter().cloned());
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
        // The fields an optimize node adds exist only after
        // `passes::optimize`, long after kernels are built: views only.
        if f.kind.family == Family::Execution && t.kind.family != Family::View {
            errors.push(GraphError::port(
                t.id(),
                tport,
                format!(
                    "'{}.{}' is the field an optimize node adds ('{}.{}'); only views (e.g. a `plot`) can draw it, kernels cannot read it",
                    f.id(),
                    out.name,
                    f.id(),
                    out.name
                ),
            ));
            continue;
        }
        // A kernel reaches the gradient through the field itself:
        // `p.grad[i]` for the field wired to port `p`.
        if f.kind.family == Family::Field && out.name == "grad" && t.kind.family != Family::View {
            errors.push(GraphError::port(
                t.id(),
                tport,
                format!(
                    "'{}.grad' (the gradient field) can only be wired to views; wire '{}.field' to port '{}' and write `{}.grad[...]` in the code to read or write the gradient",
                    f.id(),
                    f.id(),
                    tport,
                    tport
                ),
            ));
            continue;
        }
        let tport_owned = tport.to_string();
        if inputs[ti]
            .insert(tport_owned.clone(), (fi, out.name))
            .is_some()
        {
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
