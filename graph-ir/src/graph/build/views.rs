//! View nodes: images of 2D fields and particle plots.

use super::*;

impl Builder<'_> {
    pub(super) fn views(&mut self) {
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
                other => unreachable!("view kind {} missing from build", other),
            }
        }
    }
}
