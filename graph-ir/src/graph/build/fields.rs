//! The layout tree and the fields on it; cell sizes and offsets come from
//! `ir::layout::compute`. Initial values, `.npy` data included.

use super::*;

impl Builder<'_> {
    pub(super) fn layouts(&mut self) {
        let dense = self.of_family(Family::Layout);
        let mut handle: HashMap<usize, LayoutId> = HashMap::new();
        // Create in parent-first order; detect parent cycles.
        let mut pending: Vec<usize> = dense.clone();
        while !pending.is_empty() {
            let before = pending.len();
            pending.retain(|&i| {
                let parent = self.inputs[i].get("parent").map(|w| w.0);
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
                let packing = match self.nodes[i].kind.name {
                    "bit_struct" => Packing::BitStruct,
                    "bit_array" => Packing::BitArray,
                    _ => Packing::Cells,
                };
                // A bit_struct is one cell (one word) per parent cell.
                let shape = match (packing, parent_h) {
                    (Packing::BitStruct, Some(ph)) => {
                        vec![1; self.program.layouts[ph].shape.len()]
                    }
                    _ => shape,
                };
                let kind = match self.nodes[i].kind.name {
                    "bitmasked" => LayoutKind::Bitmasked,
                    "dynamic" => LayoutKind::Dynamic,
                    "hash" => LayoutKind::Hash {
                        capacity: self.nodes[i]
                            .p("capacity")
                            .as_u64()
                            .map_or(0, |c| c.min(u32::MAX as u64) as u32),
                    },
                    // The default capacity is fixed once the domain is known (below).
                    "pointer" => LayoutKind::Pointer {
                        capacity: self.nodes[i]
                            .p("capacity")
                            .as_u64()
                            .map_or(0, |c| c.min(u32::MAX as u64) as u32),
                    },
                    _ => LayoutKind::Dense,
                };
                let h = self.program.layouts.append(LayoutNode::new(
                    self.nodes[i].id(),
                    kind,
                    shape,
                    parent_h,
                ));
                self.program.layouts[h].packing = packing;
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
            if self.nodes[i].kind.param("shape").is_some() && self.nodes[i].p("shape").is_null() {
                self.errors.push(GraphError::param(
                    self.nodes[i].id(),
                    "shape",
                    format!(
                        "a {} node needs a shape like [128, 128]",
                        self.nodes[i].kind.name
                    ),
                ));
            }
        }
        self.sparse_capacities();
        for (h, l) in self.program.layouts.iter() {
            if let Some(p) = l.parent {
                let pd = self.program.layouts[p].shape.len();
                if pd != l.shape.len() {
                    self.errors.push(GraphError::param(&l.node_id, "shape", format!("has {} axes but its parent '{}' has {}; nested layout nodes need the same number of axes", l.shape.len(), self.program.layouts[p].node_id, pd)));
                }
            }
            if let LayoutKind::Hash { .. } = l.kind {
                if let Some(p) = l.parent {
                    self.errors.push(GraphError::port(&l.node_id, "parent", format!("a hash node must be a root (its table is the whole buffer); it is under '{}'. Put the hash node on top and the other nodes under it", self.program.layouts[p].node_id)));
                }
            }
            if l.kind == LayoutKind::Dynamic {
                if l.shape.len() != 1 {
                    self.errors.push(GraphError::param(&l.node_id, "shape", format!("a dynamic node has exactly one axis, its list capacity (e.g. [64]); got {} axes", l.shape.len())));
                }
                if l.children
                    .iter()
                    .any(|c| matches!(c, LayoutChild::Layout(_)))
                {
                    self.errors.push(GraphError::port(&l.node_id, "cells", "a dynamic node's cells are list elements: wire fields to them, not layout nodes"));
                }
            }
            let _ = h;
        }
    }

    /// Fills in default pool capacities and checks explicit ones.
    fn sparse_capacities(&mut self) {
        const DEFAULT_CAP: u64 = 4096;
        const MAX_CAP: u64 = 1 << 20;
        for l in self.program.layouts.handles().collect::<Vec<_>>() {
            let (LayoutKind::Pointer { capacity } | LayoutKind::Hash { capacity }) =
                self.program.layouts[l].kind
            else {
                continue;
            };
            let node = &self.program.layouts[l];
            let explicit = self
                .index
                .get(node.node_id.as_str())
                .is_some_and(|&i| !self.nodes[i].p("capacity").is_null());
            if explicit {
                if capacity == 0 || capacity as u64 > MAX_CAP {
                    self.errors.push(GraphError::param(
                        &node.node_id,
                        "capacity",
                        format!("must be between 1 and {} blocks, got {}", MAX_CAP, capacity),
                    ));
                }
                continue;
            }
            let cells = (0..node.shape.len())
                .map(|d| layout::coord_extent(&self.program, l, d))
                .fold(1u64, |a, x| a.saturating_mul(x));
            let capacity = cells.clamp(1, DEFAULT_CAP) as u32;
            self.program.layouts[l].kind = match self.program.layouts[l].kind {
                LayoutKind::Hash { .. } => LayoutKind::Hash { capacity },
                _ => LayoutKind::Pointer { capacity },
            };
        }
    }

    /// The first sparse layout node on `field`'s path, if any.
    fn under_sparse(&self, field: FieldId) -> Option<String> {
        let mut cur = Some(self.program.fields[field].layout);
        while let Some(l) = cur {
            if self.program.layouts[l].kind.is_sparse() {
                return Some(self.program.layouts[l].node_id.clone());
            }
            cur = self.program.layouts[l].parent;
        }
        None
    }

    /// The first `hash` or `dynamic` node on `field`'s path: quantized
    /// storage is not lowered there (list appends and hash slots move whole
    /// words).
    fn unsupported_quant_parent(&self, field: FieldId) -> Option<LayoutId> {
        let mut cur = Some(self.program.fields[field].layout);
        while let Some(l) = cur {
            if matches!(
                self.program.layouts[l].kind,
                LayoutKind::Hash { .. } | LayoutKind::Dynamic
            ) {
                return Some(l);
            }
            cur = self.program.layouts[l].parent;
        }
        None
    }

    pub(super) fn layout_of(&self, node: usize) -> Option<LayoutId> {
        let src = self.inputs[node].get("layout")?.0;
        let id = self.nodes[src].id();
        self.program
            .layouts
            .iter()
            .find(|(_, l)| l.node_id == id)
            .map(|(h, _)| h)
    }

    pub(super) fn fields(&mut self) {
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
            // Kernels index fields with i32 (a hash root's domain may be huge).
            if let Some((d, &s)) = shape.iter().enumerate().find(|(_, &s)| s > 1 << 30) {
                let l = &self.program.layouts[layout];
                self.errors.push(GraphError::param(
                    &l.node_id,
                    "shape",
                    format!(
                        "field '{}' would have {} elements along axis {} (the product of the shapes from the root down), more than 2^30",
                        id,
                        if s == u32::MAX { "over 4 billion".to_string() } else { s.to_string() },
                        d
                    ),
                ));
                continue;
            }
            let wrap = n.p("overflow").as_str() == Some("wrap");
            let stochastic = n.p("rounding").as_str() == Some("stochastic");
            let params = quant::QuantParams { wrap, stochastic };
            let shared = n.p("shared_exponent").as_bool().unwrap_or(false);
            let storage = match quant::Quant::parse(
                n.p("storage").as_str().unwrap_or("word"),
                params,
            ) {
                Ok(None) if stochastic => {
                    self.errors.push(GraphError::param(
                        &id,
                        "rounding",
                        "\"stochastic\" applies to fixedN and floatEmM / ufloatEmM storage only",
                    ));
                    continue;
                }
                Ok(None) if wrap => {
                    self.errors.push(GraphError::param(
                        &id,
                        "overflow",
                        "\"wrap\" applies to intN / uintN storage only",
                    ));
                    continue;
                }
                Ok(None) if shared => {
                    self.errors.push(GraphError::param(
                            &id,
                            "shared_exponent",
                            "shared_exponent needs floatEmM or ufloatEmM storage (e.g. float6m12 for a vec2 in one word)",
                        ));
                    continue;
                }
                Ok(None) => Storage::Word,
                Ok(Some(q)) if ty.scalar() != Some(q.compute_scalar()) => {
                    self.errors.push(GraphError::param(
                        &id,
                        "storage",
                        format!(
                            "{} storage computes as {} but the field's type is {}",
                            q.name(),
                            Type::Scalar(q.compute_scalar()),
                            ty
                        ),
                    ));
                    continue;
                }
                Ok(Some(q)) if shared => match quant::SharedFloat::new(q, ty.components()) {
                    Ok(s) => Storage::Shared(s),
                    Err(m) => {
                        self.errors
                            .push(GraphError::param(&id, "shared_exponent", m));
                        continue;
                    }
                },
                Ok(Some(q)) => Storage::Quant(q),
                Err(m) => {
                    self.errors.push(GraphError::param(&id, "storage", m));
                    continue;
                }
            };
            let wants_grad = n.p("grad").as_bool().unwrap_or(false);
            if wants_grad && ty.scalar() != Some(Scalar::F32) {
                self.errors.push(GraphError::param(
                    &id,
                    "grad",
                    format!(
                        "only f32 fields (f32, vecN, matN) have gradients; this field is {}",
                        ty
                    ),
                ));
                continue;
            }
            let field = Field {
                name: id.clone(),
                ty,
                storage,
                layout,
                shape,
                offset_in_cell: 0,
                init: FieldInit::Constant(vec![0; ty.words()]),
            };
            let grad = wants_grad.then(|| Field {
                // Node ids cannot contain '.', so this name never collides.
                name: format!("{}.grad", id),
                ..field.clone()
            });
            let h = self.program.fields.append(field);
            self.program.layouts[layout]
                .children
                .push(LayoutChild::Field(h));
            // The gradient lives in the same cells as its field, right after it.
            if let Some(g) = grad {
                let gh = self.program.fields.append(g);
                self.program.layouts[layout]
                    .children
                    .push(LayoutChild::Field(gh));
                self.program.grads.push((h, gh));
            }
        }
        self.meshes();
        self.word_views();
        if let Err(e) = layout::compute(&mut self.program) {
            self.errors.push(match e.what {
                "cells" => GraphError::port(&e.node, "cells", e.message),
                what => GraphError::param(&e.node, what, e.message),
            });
            return;
        }
        for (h, l) in self.program.layouts.iter() {
            if l.kind.is_sparse()
                && layout::level_plans(&self.program, h)
                    .last()
                    .is_some_and(|x| x.cell_bits == 0)
            {
                self.errors.push(GraphError::port(
                    &l.node_id,
                    "cells",
                    format!(
                        "a {} node needs fields or child layouts wired to its 'cells'",
                        l.kind.name()
                    ),
                ));
            }
        }
        for i in self.of_family(Family::Field) {
            let id = self.nodes[i].id();
            let Some(h) = self.program.field_by_name(id) else {
                continue;
            };
            if self.program.fields[h].storage != Storage::Word {
                if let Some(l) = self.unsupported_quant_parent(h) {
                    let node = &self.program.layouts[l];
                    self.errors.push(GraphError::param(
                        id,
                        "storage",
                        format!(
                            "quantized storage is not supported under the {} node '{}' (only dense, pointer and bitmasked nodes); use word storage there",
                            node.kind.name(),
                            node.node_id
                        ),
                    ));
                    continue;
                }
            }
            match self
                .field_init(i, h)
                .and_then(|init| self.check_quant_init(i, h, init))
            {
                Ok(FieldInit::Data(_)) if self.under_sparse(h).is_some() => {
                    let sparse = self.under_sparse(h).expect("checked");
                    self.errors.push(GraphError::param(
                        id,
                        "init",
                        format!(
                            "a field under the sparse node '{}' starts with every cell inactive, so its init must be a constant, not data",
                            sparse
                        ),
                    ));
                }
                Ok(init) => self.program.fields[h].init = init,
                Err(e) => self.errors.push(e),
            }
        }
    }

    /// The `words` output of every bit_array: a u32 field named after the
    /// node, one element per parent cell, placed on the bit_array's block by
    /// `layout::compute` (it owns no storage, so it is not a layout child).
    fn word_views(&mut self) {
        let arrays: Vec<LayoutId> = self
            .program
            .layouts
            .iter()
            .filter(|(_, l)| l.packing == Packing::BitArray)
            .map(|(h, _)| h)
            .collect();
        for ba in arrays {
            let parent = self.program.layouts[ba]
                .parent
                .expect("the catalog requires a bit_array's parent");
            let mut shape = self.program.layouts[parent].shape.clone();
            let mut cur = self.program.layouts[parent].parent;
            while let Some(p) = cur {
                for (s, ps) in shape.iter_mut().zip(&self.program.layouts[p].shape) {
                    *s = s.saturating_mul(*ps);
                }
                cur = self.program.layouts[p].parent;
            }
            let view = self.program.fields.append(Field {
                name: self.program.layouts[ba].node_id.clone(),
                ty: Type::U32,
                storage: Storage::Word,
                layout: parent,
                shape,
                offset_in_cell: 0,
                init: FieldInit::Constant(vec![0]),
            });
            self.program.word_views.push((ba, view));
        }
    }

    /// Quantized fields: every initial value must be representable (rounding
    /// to the nearest code is allowed, saturation or wrapping is not), so
    /// that no initial bits are lost silently.
    fn check_quant_init(
        &self,
        node: usize,
        h: FieldId,
        init: FieldInit,
    ) -> Result<FieldInit, GraphError> {
        let f = &self.program.fields[h];
        let fits = |w: u32| match f.storage {
            Storage::Word => true,
            Storage::Quant(q) => q.fits(w),
            Storage::Shared(s) => s.fits(&[w]),
        };
        let words = match &init {
            FieldInit::Constant(w) | FieldInit::Data(w) => w,
        };
        let s = f.ty.scalar().expect("field type");
        if let Some((k, &w)) = words.iter().enumerate().find(|(_, &w)| !fits(w)) {
            let v = match s {
                Scalar::F32 => format!("{:?}", f32::from_bits(w)),
                Scalar::I32 => (w as i32).to_string(),
                _ => w.to_string(),
            };
            let at = match init {
                FieldInit::Data(_) => format!(" (element {} of the data)", k),
                FieldInit::Constant(_) => String::new(),
            };
            return Err(GraphError::param(
                self.nodes[node].id(),
                "init",
                format!(
                    "initial value {}{} does not fit field '{}' with {} storage",
                    v,
                    at,
                    f.name,
                    f.storage.name()
                ),
            ));
        }
        Ok(init)
    }

    pub(super) fn field_init(&self, node: usize, h: FieldId) -> Result<FieldInit, GraphError> {
        let n = &self.nodes[node];
        let f = &self.program.fields[h];
        let s = f.ty.scalar().expect("field type");
        // One component's words (two for 64-bit types, low first). 64-bit
        // integers are taken from the JSON number exactly, not through f64.
        let word = |v: &Value| -> Result<Vec<u32>, String> {
            let x = v.as_f64().unwrap_or(0.0);
            let bad = || Err(format!("{} does not fit a {} field", v, f.ty));
            let two = |b: u64| vec![b as u32, (b >> 32) as u32];
            match s {
                Scalar::F32 => Ok(vec![(x as f32).to_bits()]),
                Scalar::F64 => Ok(two(x.to_bits())),
                Scalar::I32 if x.fract() == 0.0 && x >= i32::MIN as f64 && x <= i32::MAX as f64 => {
                    Ok(vec![x as i32 as u32])
                }
                Scalar::U32 if x.fract() == 0.0 && x >= 0.0 && x <= u32::MAX as f64 => {
                    Ok(vec![x as u32])
                }
                Scalar::I64 => match v.as_i64() {
                    Some(i) => Ok(two(i as u64)),
                    None => bad(),
                },
                Scalar::U64 => match v.as_u64() {
                    Some(u) => Ok(two(u)),
                    None => bad(),
                },
                _ => bad(),
            }
        };
        let init = n.p("init");
        let perr = |m: String| GraphError::param(n.id(), "init", m);
        match init {
            Value::Number(_) => {
                let w = word(init).map_err(perr)?;
                Ok(FieldInit::Constant(w.repeat(f.ty.components())))
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
                    .map(word)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(perr)?
                    .concat();
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
                let want_dtype = match s {
                    Scalar::F32 => npy::DType::F32,
                    Scalar::I32 => npy::DType::I32,
                    Scalar::F64 => npy::DType::F64,
                    Scalar::I64 => npy::DType::I64,
                    Scalar::U64 => npy::DType::U64,
                    _ => npy::DType::U32,
                };
                let mut want: Vec<usize> = f.shape.iter().map(|&x| x as usize).collect();
                match f.ty {
                    Type::Vector(_, k) => want.push(k as usize),
                    Type::Matrix(k) => want.extend([k as usize, k as usize]),
                    _ => {}
                }
                // The header is checked before the body is read: a large
                // file of the wrong shape or type is refused at once.
                let arr = npy::read_npy_checked(&path, |h| {
                    // float64 / int64 data also fills f32 / i32 fields
                    // (rounded or wrapped, as NumPy's astype would).
                    if !h.dtype.narrows_to(want_dtype) {
                        return Err(format!(
                            "{} holds {:?} data but field '{}' is {}",
                            rel, h.dtype, f.name, f.ty
                        ));
                    }
                    if h.shape != want {
                        return Err(format!(
                            "{} has shape {:?} but field '{}' needs {:?}",
                            rel, h.shape, f.name, want
                        ));
                    }
                    Ok(())
                })
                .map_err(perr)?;
                let arr = arr
                    .into_narrowed(want_dtype)
                    .ok_or_else(|| perr(format!("{} cannot fill field '{}'", rel, f.name)))?;
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
}
