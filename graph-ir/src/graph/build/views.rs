//! View nodes: images of 2D fields, particle plots, line charts and
//! histograms.

use super::*;

impl Builder<'_> {
    pub(super) fn views(&mut self) {
        if !self.errors.is_empty() {
            return;
        }
        for i in self.of_family(Family::View) {
            let n = &self.nodes[i];
            let id = n.id().to_string();
            // A field node's `grad` output is its gradient field `ID.grad`,
            // which exists only with `grad: true`.
            let mut ports: Vec<(&String, &(usize, &str))> = self.inputs[i].iter().collect();
            ports.sort();
            let missing: Vec<(String, String)> = ports
                .into_iter()
                .filter(|(_, &(s, out))| {
                    let src = &self.nodes[s];
                    src.kind.family == Family::Field
                        && out == "grad"
                        && self
                            .program
                            .field_by_name(&format!("{}.grad", src.id()))
                            .is_none()
                })
                .map(|(port, &(s, _))| (port.clone(), self.nodes[s].id().to_string()))
                .collect();
            if !missing.is_empty() {
                for (port, src) in missing {
                    self.errors.push(GraphError::port(
                        &id,
                        &port,
                        format!(
                            "'{}.grad' is wired here but field '{}' has no gradient: set \"grad\": true on field node '{}' (f32, vecN or matN fields only)",
                            src, src, src
                        ),
                    ));
                }
                continue;
            }
            // A field node's field (or its gradient), or (`ViewSource::Added`) a field an
            // optimize node adds later, named `NODE.port`.
            let source_at = |port: &str| {
                self.inputs[i].get(port).and_then(|&(s, out)| {
                    let src = &self.nodes[s];
                    if src.kind.family == Family::Execution {
                        Some(ViewSource::Added(format!("{}.{}", src.id(), out)))
                    } else {
                        super::meshes::wired_field(self.nodes, &self.program, s, out)
                            .map(ViewSource::Field)
                    }
                })
            };
            let mut field_at = |port: &str| match source_at(port)? {
                ViewSource::Field(f) => Some(f),
                ViewSource::Added(name) => {
                    self.errors.push(GraphError::port(
                        &id,
                        port,
                        format!(
                            "'{}' is a field an optimize node adds, which only a `plot` view can draw; an {} view needs a field node's field",
                            name, n.kind.name
                        ),
                    ));
                    None
                }
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
                        show_active: n.p("show_active").as_bool().unwrap_or(false),
                    });
                }
                "particles" => {
                    let Some(pos) = field_at("positions") else {
                        continue;
                    };
                    let fd = &self.program.fields[pos];
                    let three = fd.ty == Type::Vector(Scalar::F32, 3);
                    if fd.shape.len() != 1 || !(three || fd.ty == Type::Vector(Scalar::F32, 2)) {
                        self.errors.push(GraphError::port(
                            &id,
                            "positions",
                            format!(
                                "particles need a 1D vec2 (2-D) or vec3 (3-D) field; '{}' is {}-D {}",
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
                    let radius = n.p("radius").as_f64().unwrap_or(1.5) as f32;
                    let (w, h) = (w as u32, h as u32);
                    let scene = if three {
                        match scene_3d(&d, n.p("camera"), radius, w, h).and_then(|mut s| {
                            s.orbit = orbit_param(n.p("orbit_degrees_per_frame"))?;
                            (s.show_box, s.show_axes, s.show_ground) = overlay_params(n)?;
                            Ok(s)
                        }) {
                            Ok(s) => Some(s),
                            Err((param, msg)) => {
                                self.errors.push(GraphError::param(&id, param, msg));
                                continue;
                            }
                        }
                    } else {
                        if !n.p("camera").is_null() {
                            self.errors.push(GraphError::param(
                                &id,
                                "camera",
                                format!("a camera is for vec3 positions; '{}' is vec2 (2-D particles map 'domain' to the image)", fd.name),
                            ));
                            continue;
                        }
                        if let Some(p) = ["show_box", "show_axes", "show_ground"]
                            .into_iter()
                            .find(|p| n.p(p).as_bool() == Some(true))
                        {
                            self.errors.push(GraphError::param(
                                &id,
                                p,
                                format!(
                                    "{} is for 3-D views (vec3 positions); '{}' is vec2",
                                    p, fd.name
                                ),
                            ));
                            continue;
                        }
                        None
                    };
                    let d = if three { vec![0.0, 0.0, 1.0, 1.0] } else { d };
                    if d.len() != 4 {
                        self.errors.push(GraphError::param(
                            &id,
                            "domain",
                            format!("vec2 positions need a 2-D domain [min x, min y, max x, max y]; it has {} numbers", d.len()),
                        ));
                        continue;
                    }
                    if d[2] <= d[0] || d[3] <= d[1] {
                        self.errors.push(GraphError::param(
                            &id,
                            "domain",
                            "domain must be [min x, min y, max x, max y] with max > min",
                        ));
                        continue;
                    }
                    self.program.views.push(View::Particles {
                        node_id: id,
                        positions: pos,
                        color_field,
                        color: [c[0], c[1], c[2]],
                        background: [bg[0], bg[1], bg[2]],
                        radius,
                        width: w,
                        height: h,
                        domain: [d[0], d[1], d[2], d[3]],
                        scene,
                    });
                }
                "surface" => {
                    let Some(f) = field_at("field") else { continue };
                    let fd = &self.program.fields[f];
                    // A mesh node's `mesh` output: the view draws the mesh.
                    let mesh = super::meshes::parts_of(&fd.name).and_then(|[points, tris, ..]| {
                        Some((
                            self.program.field_by_name(&points)?,
                            self.program.field_by_name(&tris)?,
                        ))
                    });
                    if mesh.is_none()
                        && (fd.shape.len() != 3
                            || fd.ty != Type::F32
                            || fd.shape.iter().any(|&n| n < 2))
                    {
                        self.errors.push(GraphError::port(
                            &id,
                            "field",
                            format!(
                                "a surface needs a 3-axis f32 field (at least 2 samples per axis); '{}' is {}-D {} {:?}",
                                fd.name,
                                fd.shape.len(),
                                fd.ty,
                                fd.shape
                            ),
                        ));
                        continue;
                    }
                    let (w, h) = (
                        n.p("width").as_i64().unwrap_or(512) as u32,
                        n.p("height").as_i64().unwrap_or(512) as u32,
                    );
                    let level = n.p("level").as_f64().unwrap_or(0.0);
                    if !level.is_finite() {
                        self.errors.push(GraphError::param(
                            &id,
                            "level",
                            "level must be a finite number",
                        ));
                        continue;
                    }
                    let max_triangles = match n.p("max_triangles").as_u64() {
                        Some(m) if (1..=1 << 24).contains(&m) => m as u32,
                        _ => {
                            self.errors.push(GraphError::param(
                                &id,
                                "max_triangles",
                                format!(
                                    "max_triangles must be a whole number in 1..={}; got {}",
                                    1 << 24,
                                    n.p("max_triangles")
                                ),
                            ));
                            continue;
                        }
                    };
                    let c = nums(n.p("color"));
                    let bg = nums(n.p("background"));
                    let d = nums(n.p("domain"));
                    let scene = match scene_3d(&d, n.p("camera"), 1.0, w, h).and_then(|mut s| {
                        s.orbit = orbit_param(n.p("orbit_degrees_per_frame"))?;
                        (s.show_box, s.show_axes, s.show_ground) = overlay_params(n)?;
                        Ok(s)
                    }) {
                        Ok(s) => s,
                        Err((param, msg)) => {
                            self.errors.push(GraphError::param(&id, param, msg));
                            continue;
                        }
                    };
                    self.program.views.push(View::Surface {
                        node_id: id,
                        field: f,
                        mesh,
                        level: level as f32,
                        max_triangles,
                        color: [c[0], c[1], c[2]],
                        background: [bg[0], bg[1], bg[2]],
                        width: w,
                        height: h,
                        scene,
                    });
                }
                "plot" => {
                    let Some(field) = source_at("field") else {
                        continue;
                    };
                    let count = source_at("count");
                    let mut bad = Vec::new();
                    if let ViewSource::Field(f) = field {
                        let fd = &self.program.fields[f];
                        if fd.shape.len() != 1 || fd.ty != Type::F32 {
                            bad.push((
                                "field",
                                format!(
                                    "a plot needs a 1D f32 field; '{}' is {}-D {}",
                                    fd.name,
                                    fd.shape.len(),
                                    fd.ty
                                ),
                            ));
                        }
                    }
                    if let Some(ViewSource::Field(c)) = count {
                        let cd = &self.program.fields[c];
                        if cd.shape != [1] || cd.ty != Type::I32 {
                            bad.push((
                                "count",
                                format!(
                                    "the count must be an i32 field of shape [1]; '{}' is {:?} {}",
                                    cd.name, cd.shape, cd.ty
                                ),
                            ));
                        }
                    }
                    // An optimize node's outputs: `loss` is f32 `[history]`,
                    // `step` i32 `[1]`.
                    if let ViewSource::Added(name) = &field {
                        if !name.ends_with(".loss") {
                            bad.push((
                                "field",
                                format!("a plot needs a 1D f32 field; '{}' is i32 (wire the optimize node's `loss` here, its `step` to `count`)", name),
                            ));
                        }
                    }
                    if let Some(ViewSource::Added(name)) = &count {
                        if !name.ends_with(".step") {
                            bad.push((
                                "count",
                                format!("the count must be an i32 field of shape [1]; '{}' is f32 (wire the optimize node's `step` here)", name),
                            ));
                        }
                    }
                    if !bad.is_empty() {
                        for (port, msg) in bad {
                            self.errors.push(GraphError::port(&id, port, msg));
                        }
                        continue;
                    }
                    let log = n.p("log").as_bool().unwrap_or(false);
                    let range = match (n.p("min").as_f64(), n.p("max").as_f64()) {
                        (Some(a), Some(b)) => {
                            let (a, b) = (a as f32, b as f32);
                            let problem = if !(a.is_finite() && b.is_finite() && a < b) {
                                Some("'min' must be below 'max' (both finite)")
                            } else if log && a <= 0.0 {
                                Some("with 'log', 'min' and 'max' must be greater than 0")
                            } else {
                                None
                            };
                            if let Some(msg) = problem {
                                self.errors.push(GraphError::param(&id, "min", msg));
                                continue;
                            }
                            Some((a, b))
                        }
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
                    let c = nums(n.p("color"));
                    let bg = nums(n.p("background"));
                    self.program.views.push(View::Plot {
                        node_id: id,
                        field,
                        count,
                        width: n.p("width").as_i64().unwrap_or(512) as u32,
                        height: n.p("height").as_i64().unwrap_or(256) as u32,
                        range,
                        log,
                        thickness: n.p("thickness").as_i64().unwrap_or(2).clamp(1, 16) as u32,
                        color: [c[0], c[1], c[2]],
                        background: [bg[0], bg[1], bg[2]],
                    });
                }
                "histogram" => {
                    let Some(f) = field_at("field") else { continue };
                    let fd = &self.program.fields[f];
                    let ok_ty = match fd.ty {
                        Type::Scalar(s) | Type::Vector(s, _) => s.is_numeric(),
                        Type::Matrix(_) => true,
                        Type::Void => false,
                    };
                    if fd.shape.is_empty() || fd.shape.len() > 3 || !ok_ty {
                        self.errors.push(GraphError::port(
                            &id,
                            "field",
                            format!(
                                "a histogram needs a field of 1 to 3 axes of f32/i32/u32 scalars, vectors or matrices; '{}' is {}-D {}",
                                fd.name,
                                fd.shape.len(),
                                fd.ty
                            ),
                        ));
                        continue;
                    }
                    let bins = n.p("bins").as_i64().unwrap_or(64);
                    if !(1..=1024).contains(&bins) {
                        self.errors.push(GraphError::param(
                            &id,
                            "bins",
                            format!("'bins' must be 1 to 1024; it is {}", bins),
                        ));
                        continue;
                    }
                    let range = match (n.p("min").as_f64(), n.p("max").as_f64()) {
                        (Some(a), Some(b)) => {
                            let (a, b) = (a as f32, b as f32);
                            if !(a.is_finite() && b.is_finite() && a < b) {
                                self.errors.push(GraphError::param(
                                    &id,
                                    "min",
                                    "'min' must be below 'max' (both finite)",
                                ));
                                continue;
                            }
                            Some((a, b))
                        }
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
                    let c = nums(n.p("color"));
                    let bg = nums(n.p("background"));
                    self.program.views.push(View::Histogram {
                        node_id: id,
                        field: f,
                        bins: bins as u32,
                        width: n.p("width").as_i64().unwrap_or(512) as u32,
                        height: n.p("height").as_i64().unwrap_or(256) as u32,
                        range,
                        log: n.p("log").as_bool().unwrap_or(false),
                        color: [c[0], c[1], c[2]],
                        background: [bg[0], bg[1], bg[2]],
                    });
                }
                "volume" => {
                    let f = field_at("field");
                    let em = field_at("emission");
                    if let Some(v) = self.volume_view(n, &id, f, em) {
                        self.program.views.push(v);
                    }
                }
                other => unreachable!("view kind {} missing from build", other),
            }
        }
        self.check_unders();
    }

    /// A `volume` node's view, or `None` with its errors recorded.
    fn volume_view(
        &mut self,
        n: &Node,
        id: &str,
        field: Option<FieldId>,
        emission: Option<FieldId>,
    ) -> Option<View> {
        let f = field?;
        let fd = &self.program.fields[f];
        let ok_ty = matches!(fd.ty, Type::Scalar(s) if s.is_numeric());
        if fd.shape.len() != 3 || !ok_ty {
            self.errors.push(GraphError::port(
                id,
                "field",
                format!(
                    "a volume needs a 3-axis scalar field (f32, i32 or u32); '{}' is {}-D {}",
                    fd.name,
                    fd.shape.len(),
                    fd.ty
                ),
            ));
            return None;
        }
        let shape = [fd.shape[0], fd.shape[1], fd.shape[2]];
        // Checked in every mode (so switching to lit cannot fail later),
        // drawn in lit mode only: other modes leave the wire unused.
        if let Some(e) = emission {
            let ed = &self.program.fields[e];
            let ok_ty = matches!(ed.ty, Type::Scalar(s) if s.is_numeric());
            if ed.shape != fd.shape || !ok_ty {
                self.errors.push(GraphError::port(
                    id,
                    "emission",
                    format!(
                        "the emission field must be a scalar field of the volume's shape {:?}; '{}' is {:?} {}",
                        fd.shape, ed.name, ed.shape, ed.ty
                    ),
                ));
                return None;
            }
        }
        let num = |key: &str| n.p(key).as_f64();
        let mut bad = |param: &'static str, msg: String| {
            self.errors.push(GraphError::param(id, param, msg));
            None
        };
        let step = num("step").unwrap_or(0.5) as f32;
        if !(step.is_finite() && (0.01..=64.0).contains(&step)) {
            return bad(
                "step",
                format!("'step' must be 0.01 to 64 cells; it is {}", step),
            );
        }
        let density = num("density").unwrap_or(4.0) as f32;
        if !(density.is_finite() && density >= 0.0) {
            return bad(
                "density",
                format!("'density' must be a number >= 0; it is {}", density),
            );
        }
        let mode = match n.p("mode").as_str().unwrap_or("emission") {
            "emission" => VolumeMode::Emission { density, step },
            "mip" => VolumeMode::Mip { step },
            "lit" => match lighting(n, density, step, emission) {
                Ok(l) => VolumeMode::Lit(Box::new(l)),
                Err((param, msg)) => return bad(param, msg),
            },
            "slice" => {
                let axis = match n.p("slice_axis").as_str().unwrap_or("z") {
                    "x" => 0,
                    "y" => 1,
                    "z" => 2,
                    other => {
                        return bad(
                            "slice_axis",
                            format!("'slice_axis' is \"x\", \"y\" or \"z\"; got \"{}\"", other),
                        )
                    }
                };
                let position = num("slice_position").unwrap_or(0.5) as f32;
                if !(0.0..=1.0).contains(&position) {
                    return bad(
                        "slice_position",
                        format!("'slice_position' must be 0 to 1; it is {}", position),
                    );
                }
                VolumeMode::Slice { axis, position }
            }
            other => {
                return bad(
                    "mode",
                    format!(
                        "'mode' is \"emission\", \"lit\", \"mip\" or \"slice\"; got \"{}\"",
                        other
                    ),
                )
            }
        };
        let range = match (num("min"), num("max")) {
            (Some(a), Some(b)) => {
                let (a, b) = (a as f32, b as f32);
                if !(a.is_finite() && b.is_finite() && a < b) {
                    return bad("min", "'min' must be below 'max' (both finite)".to_string());
                }
                Some((a, b))
            }
            (None, None) => None,
            _ => {
                return bad(
                    "max",
                    "give both 'min' and 'max' for a fixed range, or neither for auto".to_string(),
                )
            }
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
        let bg = nums(n.p("background"));
        let (w, h) = (
            n.p("width").as_i64().unwrap_or(512) as u32,
            n.p("height").as_i64().unwrap_or(512) as u32,
        );
        let d = match n.p("domain") {
            Value::Null => {
                let m = *shape.iter().max().expect("three axes") as f32;
                vec![
                    0.0,
                    0.0,
                    0.0,
                    shape[0] as f32 / m,
                    shape[1] as f32 / m,
                    shape[2] as f32 / m,
                ]
            }
            v => nums(v),
        };
        let scene = match scene_3d(&d, n.p("camera"), 1.0, w, h).and_then(|mut s| {
            s.orbit = orbit_param(n.p("orbit_degrees_per_frame"))?;
            (s.show_box, s.show_axes, s.show_ground) = overlay_params(n)?;
            Ok(s)
        }) {
            Ok(s) => s,
            Err((param, msg)) => return bad(param, msg),
        };
        let under = match n.p("under") {
            Value::Null => None,
            Value::String(u) if !u.is_empty() => Some(u.clone()),
            other => {
                return bad(
                    "under",
                    format!(
                        "'under' is the id of another 3-D view node (a string); got {}",
                        other
                    ),
                )
            }
        };
        let jitter = match n.p("jitter").as_str().unwrap_or("auto") {
            "on" => true,
            "off" => false,
            _ => matches!(mode, VolumeMode::Lit(_)),
        };
        Some(View::Volume {
            node_id: id.to_string(),
            field: f,
            jitter,
            mode,
            colormap: Colormap::parse(n.p("colormap").as_str().unwrap_or("inferno"))
                .unwrap_or(Colormap::Inferno),
            range,
            background: [bg[0], bg[1], bg[2]],
            show_active: n.p("show_active").as_bool().unwrap_or(false),
            width: w,
            height: h,
            scene,
            under,
        })
    }

    /// Every volume's `under` names a 3-D view with the same scene and size.
    fn check_unders(&mut self) {
        let views = &self.program.views;
        let mut errs = Vec::new();
        for v in views {
            let View::Volume {
                node_id,
                width,
                height,
                scene,
                under: Some(u),
                ..
            } = v
            else {
                continue;
            };
            let target = views.iter().find(|o| o.node_id() == u);
            let geometry = target.and_then(|o| match o {
                View::Particles {
                    scene: Some(s),
                    width,
                    height,
                    ..
                }
                | View::Surface {
                    scene: s,
                    width,
                    height,
                    ..
                } => Some((s, width, height)),
                _ => None,
            });
            let msg = match (target, geometry) {
                (Some(_), Some((s, w, h))) => {
                    if (w, h) != (width, height) {
                        Some(format!("the view under it, '{}', is {} x {} pixels; this volume is {} x {} (give both the same width and height)", u, w, h, width, height))
                    } else if (s.domain, s.camera, s.orbit) != (scene.domain, scene.camera, scene.orbit) {
                        Some(format!("the view under it, '{}', has another domain or camera ({:?} / {:?}; this volume: {:?} / {:?}); give both the same 'domain' and 'camera'", u, s.domain, s.camera, scene.domain, scene.camera))
                    } else {
                        None
                    }
                }
                (Some(_), None) => Some(format!("'{}' is not a 3-D view (a particles view of vec3 positions, or a surface view); a volume can only be drawn over one", u)),
                (None, _) if u == node_id => Some("a volume cannot be drawn over itself".to_string()),
                (None, _) => Some(format!("there is no view node '{}' to draw this volume over", u)),
            };
            if let Some(m) = msg {
                errs.push(GraphError::param(node_id, "under", m));
            }
        }
        self.errors.extend(errs);
    }
}

/// The scene of a 3-D `particles` view from its `domain` and `camera`
/// params (`passes::views::camera` documents both and the defaults), or
/// the param at fault and why.
fn scene_3d(
    d: &[f32],
    camera: &Value,
    radius: f32,
    w: u32,
    h: u32,
) -> Result<Scene, (&'static str, String)> {
    if d.len() != 6 {
        return Err((
            "domain",
            format!(
                "vec3 positions need a 3-D domain [min x, min y, min z, max x, max y, max z]; it has {} numbers ({:?}; the default is the 2-D [0, 0, 1, 1])",
                d.len(),
                d
            ),
        ));
    }
    if !d.iter().all(|x| x.is_finite()) || (0..3).any(|i| d[i + 3] <= d[i]) {
        return Err((
            "domain",
            format!(
                "domain must be [min x, min y, min z, max x, max y, max z] with every max > min; it is {:?}",
                d
            ),
        ));
    }
    if radius <= 0.0 {
        return Err((
            "radius",
            "3-D particles need a radius above 0 pixels".to_string(),
        ));
    }
    let domain = [d[0], d[1], d[2], d[3], d[4], d[5]];
    Ok(Scene {
        domain,
        camera: camera_param(&domain, camera, w, h)?,
        orbit: 0.0,
        show_box: false,
        show_axes: false,
        show_ground: false,
    })
}

/// A 3-D view's `show_box`, `show_axes` and `show_ground` params
/// (booleans, default false): the overlays of `passes::views::overlay3d`
/// and the ground of `passes::views::ground`.
pub fn overlay_params(n: &Node) -> Result<(bool, bool, bool), (&'static str, String)> {
    let flag = |name: &'static str| match n.p(name) {
        Value::Null => Ok(false),
        Value::Bool(b) => Ok(*b),
        v => Err((name, format!("{} is true or false; got {}", name, v))),
    };
    Ok((flag("show_box")?, flag("show_axes")?, flag("show_ground")?))
}

/// A 3-D view's `orbit_degrees_per_frame` param (default 0): the
/// turntable's yaw step per frame.
pub fn orbit_param(v: &Value) -> Result<f32, (&'static str, String)> {
    match v {
        Value::Null => Ok(0.0),
        v => match v.as_f64() {
            Some(x) if x.is_finite() && x.abs() <= 360.0 => Ok(x as f32),
            _ => Err((
                "orbit_degrees_per_frame",
                format!("orbit_degrees_per_frame must be a number in -360..=360 (degrees of yaw per frame); got {}", v),
            )),
        },
    }
}

/// The camera of a 3-D view from its `camera` param (defaults resolved
/// against the `domain` box and a `w` x `h` image), or why not: what the
/// builder uses, and what the app reads back from an edited document.
pub fn camera_param(
    domain: &[f32; 6],
    camera: &Value,
    w: u32,
    h: u32,
) -> Result<Camera, (&'static str, String)> {
    use crate::passes::views::camera as cam;
    let domain = *domain;
    let empty = serde_json::Map::new();
    let c = match camera {
        Value::Null => &empty,
        Value::Object(o) => o,
        other => {
            return Err((
                "camera",
                format!(
                    "camera must be an object like {{\"target\": [x, y, z], \"distance\": d, \"yaw\": 30, \"pitch\": 20, \"fov\": 40}}; got {}",
                    other
                ),
            ))
        }
    };
    for k in c.keys() {
        if !["target", "distance", "yaw", "pitch", "fov"].contains(&k.as_str()) {
            return Err((
                "camera",
                format!(
                    "camera has no key '{}' (it has: target, distance, yaw, pitch, fov)",
                    k
                ),
            ));
        }
    }
    let num = |key: &str, lo: f64, hi: f64, default: f32| -> Result<f32, (&'static str, String)> {
        match c.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(v) => match v.as_f64() {
                Some(x) if x.is_finite() && (lo..=hi).contains(&x) => Ok(x as f32),
                _ => Err((
                    "camera",
                    format!(
                        "camera '{}' must be a number in {}..={}; got {}",
                        key, lo, hi, v
                    ),
                )),
            },
        }
    };
    let yaw = num("yaw", -1e6, 1e6, cam::DEFAULT_YAW)?;
    let pitch = num("pitch", -90.0, 90.0, cam::DEFAULT_PITCH)?;
    let fov = num("fov", 1.0, 170.0, cam::DEFAULT_FOV)?;
    let target = match c.get("target") {
        None | Some(Value::Null) => std::array::from_fn(|i| 0.5 * (domain[i] + domain[i + 3])),
        Some(v) => {
            let t: Vec<f32> = v
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_f64)
                        .map(|x| x as f32)
                        .collect()
                })
                .unwrap_or_default();
            if t.len() != 3
                || v.as_array().is_some_and(|a| a.len() != 3)
                || !t.iter().all(|x| x.is_finite())
            {
                return Err((
                    "camera",
                    format!(
                        "camera 'target' must be three finite numbers [x, y, z]; got {}",
                        v
                    ),
                ));
            }
            [t[0], t[1], t[2]]
        }
    };
    let framing = cam::framing_distance(&domain, fov, w, h);
    let distance = num("distance", f64::MIN_POSITIVE, 1e30, framing)?;
    if distance <= 0.0 || !distance.is_finite() {
        return Err((
            "camera",
            format!("camera 'distance' must be above 0; it is {}", distance),
        ));
    }
    Ok(Camera {
        target,
        distance,
        yaw,
        pitch,
        fov,
    })
}

/// The default key light of a `lit` volume (the catalog's doc states it):
/// warm, from the upper left of the default camera.
pub fn default_light() -> VolumeLight {
    VolumeLight {
        kind: LightKind::Directional {
            toward: unit(DEFAULT_TOWARD).expect("not zero"),
        },
        color: [1.0, 0.95, 0.85],
        intensity: 1.4,
    }
}

/// `d` scaled to unit length (in f64), or `None` for the zero vector.
fn unit(d: [f32; 3]) -> Option<[f32; 3]> {
    let len = d.iter().map(|&c| c as f64 * c as f64).sum::<f64>().sqrt();
    (len >= 1e-12).then(|| d.map(|c| (c as f64 / len) as f32))
}

/// A `lit` volume node's lighting, or the parameter at fault and why.
fn lighting(
    n: &Node,
    density: f32,
    step: f32,
    emission: Option<FieldId>,
) -> Result<VolumeLighting, (&'static str, String)> {
    let color =
        |key: &'static str, v: &Value, def: [f32; 3]| -> Result<[f32; 3], (&'static str, String)> {
            if v.is_null() {
                return Ok(def);
            }
            let c: Vec<f32> = v
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_f64)
                        .map(|x| x as f32)
                        .collect()
                })
                .unwrap_or_default();
            match c[..] {
                [r, g, b] if c.iter().all(|x| x.is_finite() && *x >= 0.0) => Ok([r, g, b]),
                _ => Err((
                    key,
                    format!(
                        "'{}' is three numbers >= 0, like [1, 0.9, 0.8]; got {}",
                        key, v
                    ),
                )),
            }
        };
    let vec3 = |what: &str, v: &Value| -> Result<[f32; 3], String> {
        let c: Vec<f64> = v
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default();
        match c[..] {
            [x, y, z] if c.iter().all(|x| x.is_finite()) => Ok([x, y, z].map(|x| x as f32)),
            _ => Err(format!("'{}' is three numbers [x, y, z]; got {}", what, v)),
        }
    };
    let lights = match n.p("lights") {
        Value::Null => vec![default_light()],
        Value::Array(list) => {
            if list.len() > crate::passes::views::volume_light::MAX_LIGHTS {
                return Err((
                    "lights",
                    format!(
                        "a lit volume takes at most {} lights; this one has {}",
                        crate::passes::views::volume_light::MAX_LIGHTS,
                        list.len()
                    ),
                ));
            }
            let mut out = Vec::new();
            for (i, l) in list.iter().enumerate() {
                let err = |m: String| ("lights", format!("light {}: {}", i, m));
                let Some(o) = l.as_object() else {
                    return Err(err(format!("expected an object, got {}", l)));
                };
                for k in o.keys() {
                    if !["type", "direction", "position", "color", "intensity"]
                        .contains(&k.as_str())
                    {
                        return Err(err(format!(
                            "unknown key '{}' (a light has type, direction or position, color, intensity)",
                            k
                        )));
                    }
                }
                let get = |k: &str| o.get(k).unwrap_or(&Value::Null);
                let kind = match get("type").as_str().unwrap_or("directional") {
                    "directional" => {
                        let d = if get("direction").is_null() {
                            DEFAULT_TOWARD
                        } else {
                            vec3("direction", get("direction")).map_err(err)?
                        };
                        let Some(toward) = unit(d) else {
                            return Err(err("'direction' must not be [0, 0, 0]".to_string()));
                        };
                        LightKind::Directional { toward }
                    }
                    "point" => {
                        if get("position").is_null() {
                            return Err(err(
                                "a point light needs 'position': [x, y, z]".to_string()
                            ));
                        }
                        LightKind::Point {
                            position: vec3("position", get("position")).map_err(err)?,
                        }
                    }
                    other => {
                        return Err(err(format!(
                            "'type' is \"directional\" or \"point\"; got {}",
                            other
                        )))
                    }
                };
                let c = color("lights", get("color"), [1.0; 3]).map_err(|(_, m)| err(m))?;
                let intensity = match get("intensity") {
                    Value::Null => 1.0,
                    v => match v.as_f64() {
                        Some(x) if x.is_finite() && x >= 0.0 => x as f32,
                        _ => return Err(err(format!("'intensity' is a number >= 0; got {}", v))),
                    },
                };
                out.push(VolumeLight {
                    kind,
                    color: c,
                    intensity,
                });
            }
            out
        }
        other => {
            return Err((
                "lights",
                format!("'lights' is a list of light objects; got {}", other),
            ))
        }
    };
    let num =
        |key: &'static str, def: f64, lo: f64, hi: f64| -> Result<f32, (&'static str, String)> {
            match n.p(key) {
                Value::Null => Ok(def as f32),
                v => match v.as_f64() {
                    Some(x) if x.is_finite() && (lo..=hi).contains(&x) => Ok(x as f32),
                    _ => Err((
                        key,
                        format!("'{}' must be {} to {}; it is {}", key, lo, hi, v),
                    )),
                },
            }
        };
    let shadow_density = num("shadow_density", 1.0, 0.0, 100.0)?;
    let shadow_cells = num("shadow_cells", 2.0, 1.0, 8.0)?;
    if shadow_cells.fract() != 0.0 {
        return Err((
            "shadow_cells",
            format!(
                "'shadow_cells' is a whole number 1 to 8; it is {}",
                shadow_cells
            ),
        ));
    }
    let range = match (n.p("emission_min").as_f64(), n.p("emission_max").as_f64()) {
        (Some(a), Some(b)) => {
            let (a, b) = (a as f32, b as f32);
            if !(a.is_finite() && b.is_finite() && a < b) {
                return Err((
                    "emission_min",
                    "'emission_min' must be below 'emission_max' (both finite)".to_string(),
                ));
            }
            Some((a, b))
        }
        (None, None) => None,
        _ => return Err((
            "emission_max",
            "give both 'emission_min' and 'emission_max' for a fixed range, or neither for auto"
                .to_string(),
        )),
    };
    let emission = match emission {
        None => None,
        Some(field) => Some(VolumeEmission {
            field,
            colormap: Colormap::parse(n.p("emission_colormap").as_str().unwrap_or("blackbody"))
                .unwrap_or(Colormap::Blackbody),
            range,
            intensity: num("emission_intensity", 1.0, 0.0, 1e4)?,
        }),
    };
    Ok(VolumeLighting {
        density,
        step,
        albedo: color("albedo", n.p("albedo"), [0.9, 0.9, 0.9])?,
        ambient: color("ambient", n.p("ambient"), [0.1, 0.11, 0.13])?,
        lights,
        shadow_density,
        shadow_cells: shadow_cells as u32,
        emission,
    })
}

/// A directional light's default `direction` (before normalising).
const DEFAULT_TOWARD: [f32; 3] = [-0.5, 0.8, 0.35];
