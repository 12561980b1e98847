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
                    } else if src.kind.family == Family::Field && out == "grad" {
                        self.program
                            .field_by_name(&format!("{}.grad", src.id()))
                            .map(ViewSource::Field)
                    } else {
                        self.program.field_by_name(src.id()).map(ViewSource::Field)
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
                other => unreachable!("view kind {} missing from build", other),
            }
        }
    }
}
