//! 3-D cameras: orbiting with the mouse, the saved cameras followed from
//! the document, and the bounds a view frames.

use super::*;

impl Viewport {
    /// A 3-D view's domain box and image size, from the running program.
    pub(super) fn scene_of(&self, view: &str) -> Option<([f32; 6], u32, u32)> {
        let p = self.program()?;
        let v = p.views.iter().find(|v| v.node_id() == view)?;
        let vk = p.view_kernels.iter().find(|k| k.node_id == view)?;
        Some((v.scene()?.domain, vk.width, vk.height))
    }

    /// A 3-D view's camera now: the one last set here, else the program's.
    pub fn camera_of(&self, view: &str) -> Option<Camera> {
        if let Some(c) = self.orbit.cams.get(view) {
            return Some(*c);
        }
        let p = self.program()?;
        Some(
            p.views
                .iter()
                .find(|v| v.node_id() == view)?
                .scene()?
                .camera,
        )
    }

    /// Moves a 3-D view's camera in the running simulation (no rebuild):
    /// now if it is home, else when it comes back; its views redraw
    /// without a step.
    pub fn set_camera(&mut self, view: &str, cam: Camera) {
        self.orbit.cams.insert(view.to_string(), cam);
        if self.worker.is_away() {
            self.orbit.deferred.retain(|(v, _)| v != view);
            self.orbit.deferred.push((view.to_string(), cam));
            return;
        }
        let Some(sim) = self.sim.as_mut() else { return };
        if let Err(e) = sim.set_view_camera(view, cam) {
            self.error = Some(e.to_string());
        }
        self.needs_draw = true;
    }

    /// The cameras of `doc`'s 3-D views given to the running simulation
    /// (those that differ from the live ones). False when one cannot be:
    /// not a 3-D view of the running program, or an invalid camera (a
    /// rebuild then reports it).
    pub(super) fn follow_cameras(&mut self, doc: &GraphDoc) -> bool {
        let mut set = Vec::new();
        for n in &doc.nodes {
            let Some(v) = n.params.get("camera") else {
                continue;
            };
            let Some((domain, w, h)) = self.scene_of(&n.id) else {
                if v.is_null() {
                    continue;
                }
                return false;
            };
            match camera_param(&domain, v, w, h) {
                Ok(c) if Some(c) != self.camera_of(&n.id) => set.push((n.id.clone(), c)),
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        for (view, c) in set {
            self.set_camera(&view, c);
        }
        true
    }

    /// Orbit, pan and zoom drags, the wheel and the view keys over a 3-D
    /// view's tile (`orbit` lists them). Returns the camera to show now;
    /// a finished gesture also leaves the edit of the node's `camera` param.
    pub(super) fn orbit_input(
        &mut self,
        ui: &egui::Ui,
        resp: &egui::Response,
        view: &str,
        domain: &[f32; 6],
        (w, h): (u32, u32),
        tile: egui::Rect,
    ) -> Option<Camera> {
        use crate::gui::orbit::{self as o, Drag, Gesture};
        let cur = self.camera_of(view)?;
        let (mods, raw_scroll) = ui.input(|i| (i.modifiers, o::wheel_points(&i.events)));
        for b in [
            egui::PointerButton::Middle,
            egui::PointerButton::Primary,
            egui::PointerButton::Secondary,
        ] {
            if resp.drag_started_by(b) {
                // Measured from where the button went down (a drag starts
                // a few points later).
                let origin = ui.input(|i| i.pointer.press_origin());
                if let (Some(g), Some(from)) = (Gesture::of(b, mods), origin) {
                    self.orbit.drag = Some(Drag {
                        view: view.to_string(),
                        gesture: g,
                        start: cur,
                        from,
                    });
                }
            }
        }
        let mut out = None;
        let drag = self.orbit.drag.clone().filter(|d| d.view == view);
        if let (Some(d), Some(p)) = (&drag, resp.interact_pointer_pos()) {
            let delta = p - d.from;
            let cam = match d.gesture {
                Gesture::Orbit => o::orbit(d.start, delta),
                // Points to image pixels.
                Gesture::Pan => o::pan(d.start, delta * (w as f32 / tile.width()), w, h),
                Gesture::Zoom => o::zoom_drag(d.start, delta.y),
            };
            if cam != cur {
                out = Some(cam);
            }
        }
        if drag.is_some() && !resp.dragged() {
            // Released: the camera becomes the node's param (one undo step).
            self.orbit.drag = None;
            let cam = out.unwrap_or(cur);
            self.orbit.edit = Some((view.to_string(), o::to_param(&cam)));
        }
        if resp.hovered() && drag.is_none() {
            let mut key_cam = None;
            if raw_scroll != 0.0 {
                key_cam = Some(o::wheel(cur, raw_scroll));
            }
            if !ui.ctx().egui_wants_keyboard_input() {
                let pressed = |k| ui.input(|i| i.key_pressed(k));
                if pressed(egui::Key::Home) {
                    key_cam = Some(o::frame_domain(cur, domain, w, h));
                }
                if pressed(egui::Key::F) {
                    if self.sim.is_some() {
                        let shown = self.shown_bounds(view);
                        key_cam = Some(o::frame_shown(cur, shown, domain, w, h));
                    } else {
                        // Away running a frame: framed when it is back.
                        self.orbit.frame_shown = Some((view.to_string(), cur, *domain, w, h));
                    }
                }
                for k in [egui::Key::Num1, egui::Key::Num3, egui::Key::Num7] {
                    if pressed(k) {
                        key_cam = o::axis_view(cur, k, mods.ctrl || mods.command);
                    }
                }
            }
            if let Some(c) = key_cam {
                self.orbit.edit = Some((view.to_string(), o::to_param(&c)));
                out = Some(c);
            }
        }
        out
    }

    /// What the 3-D view `view` shows, as a world box (`orbit::shown_bounds`),
    /// read from the simulation once; `None` while it is away running a
    /// frame (F then frames the domain) or when nothing shows.
    pub(super) fn shown_bounds(&self, view: &str) -> Option<[f32; 6]> {
        let sim = self.sim.as_ref()?;
        let p = &sim.program;
        let v = p.views.iter().find(|v| v.node_id() == view)?;
        let field = match v {
            View::Particles { positions, .. } => *positions,
            View::Volume { field, .. } | View::Surface { field, .. } => *field,
            _ => return None,
        };
        let root = sim
            .read_root(weft_ir::ir::layout::root_of(p, p.fields[field].layout))
            .ok()?;
        crate::gui::orbit::shown_bounds(p, v, &root)
    }
}
