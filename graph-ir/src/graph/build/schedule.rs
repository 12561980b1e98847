//! The schedule: `on_start` and `on_frame` chains of kernel launches and
//! `repeat` blocks, followed along execution wires.

use super::*;

impl Builder<'_> {
    pub(super) fn schedule(&mut self, doc: &GraphDoc) {
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
        let clears = self.clear_targets();
        if !self.errors.is_empty() {
            return;
        }
        // Kernel nodes by name, looked up once per chain node (a scan of
        // every kernel each time made long chains quadratic). The first
        // kernel of a name wins, as with `Program::kernel_by_name`.
        let mut kernels: HashMap<&str, KernelId> = HashMap::new();
        for (h, k) in self.program.kernels.iter() {
            kernels.entry(k.name.as_str()).or_insert(h);
        }
        let ctx = Ctx {
            nodes: self.nodes,
            next: &next,
            program: &self.program,
            clears: &clears,
            kernels: &kernels,
        };
        let mut on_start = Vec::new();
        let mut on_frame = Vec::new();
        let mut visited = HashSet::new();
        for i in 0..self.nodes.len() {
            let which = match self.nodes[i].kind.name {
                "on_start" => &mut on_start,
                "on_frame" => &mut on_frame,
                _ => continue,
            };
            match chain(&ctx, i, "then", &mut visited, &mut Vec::new()) {
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
}

impl Builder<'_> {
    /// The sparse layout node each `clear` node's `layout` port is wired to.
    fn clear_targets(&mut self) -> HashMap<usize, LayoutId> {
        let mut out = HashMap::new();
        for i in 0..self.nodes.len() {
            if self.nodes[i].kind.name != "clear" {
                continue;
            }
            let id = self.nodes[i].id();
            let Some(l) = self.layout_of(i) else {
                self.errors.push(GraphError::port(
                    id,
                    "layout",
                    "wire the `cells` output of a bitmasked, pointer or dynamic node here",
                ));
                continue;
            };
            let node = &self.program.layouts[l];
            if !node.kind.is_sparse() {
                self.errors.push(GraphError::port(
                    id,
                    "layout",
                    format!(
                        "'{}' is a {} node, whose cells are always active; `clear` needs a bitmasked, pointer or dynamic node",
                        node.node_id,
                        node.kind.name()
                    ),
                ));
                continue;
            }
            let range = crate::passes::sparse_clear::clear_range(&self.program, l);
            let total = range.iter().fold(1u64, |a, &x| a.saturating_mul(x));
            if total > MAX_RANGE || range.iter().any(|&x| x > u32::MAX as u64) {
                self.errors.push(GraphError::port(
                    id,
                    "layout",
                    format!(
                        "clearing '{}' takes one invocation per cell of it over the whole domain ({}), more than the cap of {}",
                        node.node_id, total, MAX_RANGE
                    ),
                ));
                continue;
            }
            out.insert(i, l);
        }
        out
    }
}

/// What following execution chains needs.
struct Ctx<'a> {
    nodes: &'a [Node<'a>],
    next: &'a HashMap<(usize, String), usize>,
    program: &'a Program,
    /// `clear` node → the layout node it clears.
    clears: &'a HashMap<usize, LayoutId>,
    /// Kernel node id → its kernel.
    kernels: &'a HashMap<&'a str, KernelId>,
}

/// Follows an execution chain from `start.pin`, building steps.
fn chain(
    ctx: &Ctx,
    start: usize,
    pin: &str,
    visited: &mut HashSet<usize>,
    stack: &mut Vec<usize>,
) -> Result<Vec<Step>, GraphError> {
    let (nodes, next, program) = (ctx.nodes, ctx.next, ctx.program);
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
                let k = *ctx.kernels.get(n.id()).expect("kernels were built");
                steps.push(Step::Launch(k));
            }
            Family::Execution if n.kind.name == "repeat" => {
                // The catalog's range (checked at load) keeps this within u32.
                let count = n.p("count").as_i64().unwrap_or(1);
                let index = n.p("index").as_str().map(str::to_string);
                let body = chain(ctx, i, "body", visited, stack)?;
                if let Some(name) = &index {
                    check_index_scalar(n.id(), name, &body, program)?;
                }
                steps.push(Step::Repeat {
                    node_id: n.id().to_string(),
                    count: count as u32,
                    index,
                    reverse: false,
                    start: 0,
                    body,
                });
            }
            Family::Execution if n.kind.name == "tape" => {
                let loss_name = n.p("loss").as_str().unwrap_or("");
                let Some(loss) = program.field_by_name(loss_name) else {
                    return Err(GraphError::param(
                        n.id(),
                        "loss",
                        format!("'{}' is not a field node", loss_name),
                    ));
                };
                if program.grad_of(loss).is_none() {
                    return Err(GraphError::param(
                        n.id(),
                        "loss",
                        format!(
                            "the loss field '{}' needs `\"grad\": true` (its gradient is seeded with 1)",
                            loss_name
                        ),
                    ));
                }
                if let Some(outer) = enclosing_tape(nodes, stack) {
                    return Err(GraphError::node_msg(
                        n.id(),
                        format!(
                            "tapes cannot be nested (this tape is inside {} '{}')",
                            nodes[outer].kind.name,
                            nodes[outer].id()
                        ),
                    ));
                }
                let body = chain(ctx, i, "body", visited, stack)?;
                // The catalog's range (checked at load) keeps this within u32.
                let checkpoint = n.p("checkpoint").as_i64().unwrap_or(0) as u32;
                let mode = tape_mode(n.id(), n.p("mode").as_str(), n.p("wrt"), program)?;
                steps.push(Step::Tape {
                    node_id: n.id().to_string(),
                    loss,
                    checkpoint,
                    mode,
                    body,
                });
            }
            // An optimize node runs its body under a tape of its own.
            Family::Execution if n.kind.name == "optimize" => {
                if let Some(outer) = enclosing_tape(nodes, stack) {
                    return Err(GraphError::node_msg(
                        n.id(),
                        format!(
                            "an optimize node runs its own tape and cannot be inside {} '{}'; chain it after",
                            nodes[outer].kind.name,
                            nodes[outer].id()
                        ),
                    ));
                }
                let spec = super::optimize::optimize_spec(n, program)?;
                let body = chain(ctx, i, "body", visited, stack)?;
                steps.push(Step::Optimize {
                    node_id: n.id().to_string(),
                    spec,
                    body,
                });
            }
            Family::Execution if n.kind.name == "clear" => {
                if let Some(t) = enclosing_tape(nodes, stack) {
                    return Err(GraphError::node_msg(
                        n.id(),
                        format!(
                            "`clear` cannot be inside {} '{}' (it has no adjoint); clear before or after it",
                            nodes[t].kind.name,
                            nodes[t].id()
                        ),
                    ));
                }
                steps.push(Step::Clear {
                    node_id: n.id().to_string(),
                    layout: ctx.clears[&i],
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

// ---- forward-mode tapes (issue 11) ----

/// A tape's `mode` and, in forward mode, its `wrt` fields: each must have a
/// gradient field, which holds its tangent (the direction) at tape entry.
fn tape_mode(
    node: &str,
    mode: Option<&str>,
    wrt: &Value,
    program: &Program,
) -> Result<TapeMode, GraphError> {
    if mode != Some("forward") {
        if !wrt.is_null() {
            return Err(GraphError::param(
                node,
                "wrt",
                "`wrt` only applies to a tape with `\"mode\": \"forward\"` (a reverse tape differentiates with respect to every field with a gradient)",
            ));
        }
        return Ok(TapeMode::Reverse);
    }
    let names: Vec<&str> = match wrt {
        Value::Null => vec![],
        Value::String(s) => s.split([',', ' ']).filter(|x| !x.is_empty()).collect(),
        _ => {
            return Err(GraphError::param(
                node,
                "wrt",
                "expected field ids separated by commas",
            ))
        }
    };
    let mut seeded = Vec::new();
    for name in names {
        let Some(f) = program.field_by_name(name) else {
            return Err(GraphError::param(
                node,
                "wrt",
                format!("'{}' is not a field node", name),
            ));
        };
        if program.grad_of(f).is_none() {
            return Err(GraphError::param(
                node,
                "wrt",
                format!(
                    "field '{}' needs `\"grad\": true` (its `.grad` field holds the direction)",
                    name
                ),
            ));
        }
        seeded.push(f);
    }
    Ok(TapeMode::Forward { seeded })
}

/// The innermost `tape` or `optimize` node (which runs a tape) around the
/// node on top of `stack`.
fn enclosing_tape(nodes: &[Node], stack: &[usize]) -> Option<usize> {
    stack[..stack.len() - 1]
        .iter()
        .rev()
        .copied()
        .find(|&s| matches!(nodes[s].kind.name, "tape" | "optimize"))
}

/// A repeat's `index` scalar must be an i32 scalar of at least one kernel of
/// its body (otherwise the name is most likely a typo).
fn check_index_scalar(
    node: &str,
    name: &str,
    body: &[Step],
    program: &Program,
) -> Result<(), GraphError> {
    let mut found: Vec<(String, Type)> = Vec::new();
    crate::ir::steps::walk(body, &mut |s| {
        if let Step::Launch(k) = s {
            let k = &program.kernels[*k];
            if let Some(p) = k.params.iter().find(|p| p.name == name) {
                found.push((k.name.clone(), p.ty));
            }
        }
    });
    if found.is_empty() {
        return Err(GraphError::param(
            node,
            "index",
            format!("no kernel of the body has a scalar named '{}'", name),
        ));
    }
    if let Some((k, ty)) = found.iter().find(|(_, t)| *t != Type::I32) {
        return Err(GraphError::param(
            node,
            "index",
            format!(
                "kernel '{}' has '{}' as {}, but a repeat index is i32 (write its value as a whole number)",
                k, name, ty
            ),
        ));
    }
    Ok(())
}
