//! The parameters of an `optimize` node, checked against the fields they
//! name. Every problem is an error naming the node and the parameter.

use super::*;

/// The field named by `name` in param `param`, which must have a gradient.
fn grad_field(
    n: &Node,
    program: &Program,
    param: &str,
    name: &str,
    role: &str,
) -> Result<FieldId, GraphError> {
    let Some(f) = program.field_by_name(name) else {
        return Err(GraphError::param(
            n.id(),
            param,
            format!("'{}' is not a field node", name),
        ));
    };
    if program.grad_of(f).is_none() {
        return Err(GraphError::param(
            n.id(),
            param,
            format!(
                "the {} field '{}' needs `\"grad\": true` (the optimizer reads its gradient)",
                role, name
            ),
        ));
    }
    Ok(f)
}

/// A finite number parameter inside `ok`, or an error saying what it must be.
fn number(n: &Node, param: &str, ok: impl Fn(f64) -> bool, must: &str) -> Result<f32, GraphError> {
    match n.p(param).as_f64() {
        Some(x) if x.is_finite() && ok(x) => Ok(x as f32),
        _ => Err(GraphError::param(
            n.id(),
            param,
            format!("{} must be {}, got {}", param, must, n.p(param)),
        )),
    }
}

pub(super) fn optimize_spec(n: &Node, program: &Program) -> Result<OptimizeSpec, GraphError> {
    let loss_name = n.p("loss").as_str().unwrap_or("");
    let loss = grad_field(n, program, "loss", loss_name, "loss")?;
    let names: Vec<&str> = n
        .p("wrt")
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if names.is_empty() {
        return Err(GraphError::param(
            n.id(),
            "wrt",
            "list the fields to update, e.g. [\"u0\"]",
        ));
    }
    let mut wrt = Vec::new();
    for name in names {
        let f = grad_field(n, program, "wrt", name, "updated")?;
        if f == loss {
            return Err(GraphError::param(
                n.id(),
                "wrt",
                format!(
                    "'{}' is the loss field; list the parameters the loss depends on",
                    name
                ),
            ));
        }
        if wrt.contains(&f) {
            return Err(GraphError::param(
                n.id(),
                "wrt",
                format!("'{}' is listed twice", name),
            ));
        }
        let field = &program.fields[f];
        if field.storage != Storage::Word {
            // An update smaller than one quantum would be lost silently.
            return Err(GraphError::param(
                n.id(),
                "wrt",
                format!(
                    "'{}' has quantized storage, which would round small updates away; optimize fields with word storage",
                    name
                ),
            ));
        }
        let mut l = Some(field.layout);
        while let Some(h) = l {
            let node = &program.layouts[h];
            if node.kind.is_sparse() {
                return Err(GraphError::param(
                    n.id(),
                    "wrt",
                    format!(
                        "'{}' lies under the sparse node '{}'; optimize updates dense fields only",
                        name, node.node_id
                    ),
                ));
            }
            l = node.parent;
        }
        wrt.push(f);
    }
    let method = match n.p("method").as_str() {
        Some("gd") => OptimizeMethod::Gd,
        _ => OptimizeMethod::Adam {
            beta1: number(
                n,
                "beta1",
                |x| (0.0..1.0).contains(&x),
                "at least 0 and below 1",
            )?,
            beta2: number(
                n,
                "beta2",
                |x| (0.0..1.0).contains(&x),
                "at least 0 and below 1",
            )?,
            // eps = 0 would divide 0 by 0 where a gradient is 0.
            eps: number(n, "eps", |x| x > 0.0 && (x as f32) > 0.0, "greater than 0")?,
        },
    };
    let lr = number(n, "lr", |x| x > 0.0 && (x as f32) > 0.0, "greater than 0")?;
    // The catalog's ranges (checked at load) keep these within u32 and >= 1.
    let int = |p: &str, default: i64| n.p(p).as_i64().unwrap_or(default).max(0) as u32;
    Ok(OptimizeSpec {
        loss,
        wrt,
        method,
        lr,
        iterations: int("iterations", 1).max(1),
        history: int("history", 1000).max(1),
        checkpoint: int("checkpoint", 0),
    })
}
