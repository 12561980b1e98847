//! Kernel nodes: iteration, scalar parameters, port bindings, and the
//! kernel code (or expression sub-graph) lowered to IR by `lang`.

use super::*;

impl Builder<'_> {
    pub(super) fn kernels(&mut self) {
        if !self.errors.is_empty() {
            return;
        }
        for i in self.of_family(Family::Kernel) {
            if let Err(e) = self.kernel(i) {
                self.errors.push(e);
            }
        }
    }

    pub(super) fn kernel(&mut self, i: usize) -> Result<(), GraphError> {
        let n = &self.nodes[i];
        let id = n.id().to_string();
        let mut params = Vec::new();
        if let Some(o) = n.p("scalars").as_object() {
            for (name, v) in o {
                // The one parser and conversion rule (`graph::scalars`);
                // declarations were already checked when the node resolved.
                let decl = crate::graph::scalars::ScalarDecl::parse(name, v)
                    .map_err(|m| GraphError::param(&id, "scalars", m))?;
                let ty = decl.ty;
                let value = decl.bits().map_err(|m| GraphError::scalar(&id, name, m))?;
                params.push(KernelParam {
                    part: 0,
                    name: name.clone(),
                    ty,
                    value,
                });
            }
        }
        let mut bindings = Vec::new();
        let mut env_fields = Vec::new();
        for port in &n.field_ports {
            let (src, out) = self.inputs[i][port];
            let fid = super::meshes::wired_field(self.nodes, &self.program, src, out)
                .expect("field and mesh nodes were built");
            let f = &self.program.fields[fid];
            env_fields.push((port.clone(), fid, f.ty, f.shape.len()));
            if let Some(g) = self.program.grad_of(fid) {
                // Lets the code say `port.grad[i]` (see `lang::lower::places`).
                env_fields.push((format!("{}.grad", port), g, f.ty, f.shape.len()));
            }
            bindings.push((port.clone(), fid));
            // A port wired to a mesh's `mesh` output: the fields its
            // queries read, under the names `lang::mesh_query` gives them.
            if let Some(parts) = super::meshes::parts_of(&f.name) {
                for (part, name) in lang::mesh_query::PARTS.iter().zip(parts) {
                    let Some(h) = self.program.field_by_name(&name) else {
                        continue;
                    };
                    let pf = &self.program.fields[h];
                    let hidden = lang::mesh_query::part_name(port, part);
                    env_fields.push((hidden.clone(), h, pf.ty, pf.shape.len()));
                    bindings.push((hidden, h));
                }
            }
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
        // Over a field under a hash root, the launch covers the table, not the domain.
        let hashed = match &iteration {
            Iteration::Field(f) => matches!(
                self.program.layouts
                    [layout::root_of(&self.program, self.program.fields[*f].layout)]
                .kind,
                LayoutKind::Hash { .. }
            ),
            Iteration::Range(_) => false,
        };
        if total > MAX_RANGE as u128 && !hashed {
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
                let generated =
                    crate::graph::expr::expr_to_code(&id, expr, shape.len(), &scalar_names)?;
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
            fused: Vec::new(),
            name: id.clone(),
            iteration,
            dims: shape.len(),
            params,
            entry: lowered.entry,
            functions: lowered.functions,
            bindings,
            fault_sites: Vec::new(),
            count_from: None,
            loops_end: false,
            zero_fill: None,
            workgroup: lowered.workgroup,
        };
        check_workgroup(&id, &k)?;
        self.check_list_ops(&id, &k)?;
        if let Err(e) = validate_kernel(&self.program, &k, false) {
            return Err(GraphError::Code {
                node: id,
                line: e.span.line,
                col: e.span.col,
                message: format!("internal compiler error: {}", e.message),
            });
        }
        let backward = match n.p("backward") {
            Value::String(code) => Some(self.custom_backward(&id, code, &env, &k)?),
            _ => None,
        };
        let kid = self.program.kernels.append(k);
        if let Some(b) = backward {
            let bid = self.program.kernels.append(b);
            self.program.custom_backward.push((kid, bid));
        }
        Ok(())
    }
}

// ---- custom gradients (issue 11) ----

/// Field accesses with where they are in the code.
type Uses = Vec<(FieldId, Span)>;

/// Fields a kernel reads and writes (helpers included).
fn field_uses(k: &Kernel) -> (Uses, Uses) {
    let (mut reads, mut writes) = (Vec::new(), Vec::new());
    let fns = std::iter::once(&k.entry).chain(k.functions.iter().map(|(_, f)| f));
    for f in fns {
        for (_, inst) in f.insts.iter() {
            match &inst.kind {
                InstKind::FieldLoad { field, .. } => reads.push((*field, inst.span)),
                InstKind::FieldStore { field, .. }
                | InstKind::FieldAtomic { field, .. }
                | InstKind::FieldAppend { field, .. }
                | InstKind::FieldActivate { field, .. }
                | InstKind::FieldDeactivate { field, .. } => writes.push((*field, inst.span)),
                _ => {}
            }
        }
    }
    (reads, writes)
}

impl Builder<'_> {
    /// A kernel's `backward` code, compiled like its code (same ports,
    /// scalars and iteration) into the kernel a reverse tape runs instead
    /// of the generated adjoint. It may write only gradient fields, and
    /// read only fields the kernel's own code reads (so the tape's access
    /// rule, checked on the kernel, covers them too).
    fn custom_backward(
        &self,
        id: &str,
        code: &str,
        env: &KernelEnv,
        fwd: &Kernel,
    ) -> Result<Kernel, GraphError> {
        let at = |line: u32, col: u32, m: String| {
            GraphError::param(id, "backward", format!("line {}:{}: {}", line, col, m))
        };
        let lowered = lang::lower_kernel(code, env).map_err(|e| at(e.line, e.col, e.message))?;
        let k = Kernel {
            fused: Vec::new(),
            name: id.to_string(),
            iteration: fwd.iteration.clone(),
            dims: fwd.dims,
            params: fwd.params.clone(),
            entry: lowered.entry,
            functions: lowered.functions,
            bindings: fwd.bindings.clone(),
            fault_sites: Vec::new(),
            count_from: fwd.count_from,
            loops_end: false,
            zero_fill: None,
            workgroup: lowered.workgroup,
        };
        check_workgroup(id, &k)?;
        let is_grad = |f: FieldId| self.program.grads.iter().any(|g| g.1 == f);
        let (reads, writes) = field_uses(&k);
        if let Some((f, sp)) = writes.iter().find(|(f, _)| !is_grad(*f)) {
            return Err(at(
                sp.line,
                sp.col,
                format!(
                    "a backward may only write gradients (`{0}.grad[...]`), not field '{0}'",
                    self.program.fields[*f].name
                ),
            ));
        }
        let (fwd_reads, _) = field_uses(fwd);
        if let Some((f, sp)) = reads
            .iter()
            .find(|(f, _)| !is_grad(*f) && !fwd_reads.iter().any(|r| r.0 == *f))
        {
            return Err(at(
                sp.line,
                sp.col,
                format!(
                    "reads field '{}', which the kernel's code does not read; a backward may read the kernel's inputs and any gradients (the tape's access rule covers only what the kernel reads)",
                    self.program.fields[*f].name
                ),
            ));
        }
        if let Err(e) = validate_kernel(&self.program, &k, false) {
            return Err(at(
                e.span.line,
                e.span.col,
                format!("internal compiler error: {}", e.message),
            ));
        }
        Ok(k)
    }
}

impl Builder<'_> {
    /// `append` / `length` need a field whose own layout node is dynamic.
    fn check_list_ops(&self, id: &str, k: &Kernel) -> Result<(), GraphError> {
        let fns = std::iter::once(&k.entry).chain(k.functions.iter().map(|(_, f)| f));
        for f in fns {
            for (_, inst) in f.insts.iter() {
                let (InstKind::FieldAppend { field, .. } | InstKind::FieldLength { field, .. }) =
                    inst.kind
                else {
                    continue;
                };
                let fd = &self.program.fields[field];
                let node = &self.program.layouts[fd.layout];
                if node.kind != LayoutKind::Dynamic {
                    return Err(GraphError::Code {
                        node: id.to_string(),
                        line: inst.span.line,
                        col: inst.span.col,
                        message: format!(
                            "`append` and `length` need a field on a dynamic layout node; '{}' is on the {} node '{}'",
                            fd.name,
                            node.kind.name(),
                            node.node_id
                        ),
                    });
                }
            }
        }
        Ok(())
    }
}

/// A `#[block(N)]` kernel runs over a `range` that N divides: its blocks
/// are N consecutive invocations, all of them inside the range, so every
/// invocation of a block reaches each barrier on every backend.
fn check_workgroup(id: &str, k: &Kernel) -> Result<(), GraphError> {
    let Some(w) = &k.workgroup else {
        return Ok(());
    };
    let Iteration::Range(shape) = &k.iteration else {
        return Err(GraphError::param(
            id,
            "over",
            format!(
                "a `#[block({})]` kernel runs over a 'range' (a multiple of its block), not 'over' a field",
                w.size
            ),
        ));
    };
    let total: u64 = shape.iter().map(|&s| s as u64).product();
    if !total.is_multiple_of(w.size as u64) {
        return Err(GraphError::param(
            id,
            "range",
            format!(
                "the range {:?} has {} invocations, which blocks of {} (`#[block({})]`) do not divide; pad the range to a multiple of the block",
                shape, total, w.size, w.size
            ),
        ));
    }
    Ok(())
}
