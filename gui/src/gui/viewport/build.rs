//! Building: following the document (the one document diff decides what
//! an edit costs), kernel scalars into the running simulation, and
//! background builds swapped in when done.

use super::*;

impl Viewport {
    /// Follows the document, as the one document diff (`graph::diff`)
    /// classifies the edit from the running build's: nothing (a node
    /// moved, a comment) → the simulation and its frame cache stay;
    /// scalars → the running simulation takes the new values, the frames
    /// cached before go; views only → a 3-D camera is taken in place, other
    /// view edits rebuild and carry the running state over (the cache
    /// stays); anything else → rebuild in the background.
    pub fn sync(
        &mut self,
        revision: u64,
        doc: &GraphDoc,
        assets: &AssetLibraries,
        has_problems: bool,
    ) {
        if self
            .built_from
            .as_ref()
            .is_some_and(|(r, _)| *r == revision)
            || self.pending.as_ref().is_some_and(|(r, _)| *r == revision)
        {
            return;
        }
        if has_problems {
            return;
        }
        self.followed = Some((revision, doc.clone()));
        // 3-D views at their panes' sizes, as the running build has them:
        // the diff sees only the user's edit.
        let sized = self.sizes.apply(doc, self.program(), assets).into_owned();
        let doc = &sized;
        if let (Some(_), Some((_, old))) = (&self.running, &self.built_from) {
            let edit = diff::classify(old, doc);
            if edit.effect() < Effect::Rebuild {
                self.built_from = Some((revision, doc.clone()));
                self.cache
                    .set_graph(serde_json::to_value(doc).unwrap_or(Value::Null));
                if !edit.scalars.is_empty() {
                    // Other scalar values: the cached frames are another
                    // simulation's; from here on frames are cached anew
                    // (a bake of these values is taken again).
                    self.cache.clear();
                    self.take_baked();
                }
                for s in &edit.scalars {
                    self.set_scalar(&s.node, &s.name, s.value);
                }
                if edit.changes_views() {
                    if edit.views_are_cameras_only() && self.follow_cameras(doc) {
                        // Only 3-D cameras changed: the running
                        // simulation takes them, no rebuild.
                    } else {
                        // Views are IR kernels compiled with the program:
                        // rebuild it, and carry the running state into the
                        // new build.
                        self.build(revision, doc, assets);
                        self.carry_state = true;
                        return;
                    }
                }
                if edit.effect() > Effect::Nothing {
                    self.needs_draw = true;
                }
                return;
            }
        }
        self.build(revision, doc, assets);
    }

    /// Gives the running simulation a kernel node's scalar values (a
    /// slider being dragged): no rebuild, the fields keep their state.
    /// Declarations are read by the one parser (`graph::scalars`).
    pub fn set_scalars(&mut self, node: &NodeDoc) {
        let decls = node.params.get("scalars").and_then(Value::as_object);
        for (name, decl) in decls.into_iter().flatten() {
            // An invalid declaration is reported on its node by validation.
            if let Ok(d) = ScalarDecl::parse(name, decl) {
                self.set_scalar(&node.id, name, d.value());
            }
        }
    }

    /// Gives the running simulation kernel `node`'s scalar `name` (the
    /// node's path inside groups), converted by the one rule
    /// (`Simulation::set_param`); while the simulation is away, when it
    /// comes back.
    pub fn set_scalar(&mut self, node: &str, name: &str, value: f64) {
        if self.worker.is_away() {
            // Applied when the frame out now comes back.
            self.deferred_scalars
                .retain(|(n, s, _)| !(n == node && s == name));
            self.deferred_scalars
                .push((node.to_string(), name.to_string(), value));
            return;
        }
        let Some(sim) = self.sim.as_mut() else {
            return;
        };
        // A valid declaration's value is valid for its type; a scalar the
        // running build does not have has no use in it either, so a
        // refusal here changes nothing.
        let _ = sim.set_param(node, name, value);
        self.needs_draw = true;
    }

    /// A rebuild for a change to what is drawn only (a view's parameters,
    /// a view added or removed by the viewer flag): the new build goes on
    /// from the running state instead of restarting at frame 0.
    pub fn rebuild_display_only(&mut self, revision: u64, doc: &GraphDoc, assets: &AssetLibraries) {
        self.rebuild(revision, doc, assets);
        self.carry_state = true;
    }

    /// Builds `doc` in the background against `assets` (the editor's
    /// library and the graph's folder), replacing the simulation when done;
    /// its 3-D views at their panes' sizes.
    pub fn rebuild(&mut self, revision: u64, doc: &GraphDoc, assets: &AssetLibraries) {
        self.followed = Some((revision, doc.clone()));
        let sized = self.sizes.apply(doc, self.program(), assets).into_owned();
        self.build(revision, &sized, assets);
    }

    /// Builds `doc` as it is (sized already) in the background.
    fn build(&mut self, revision: u64, doc: &GraphDoc, assets: &AssetLibraries) {
        self.built_assets = assets.clone();
        let assets = assets.clone();
        let (tx, rx) = channel();
        let doc2 = doc.clone();
        // The runtime resolves the choice (`auto` included); the window's
        // GPU goes along so that wgpu, when it runs, shares its device.
        let opts = SimOptions {
            backend: self.backend,
            gpu: self.gpu.clone(),
            ..Default::default()
        };
        let _ = crate::gui::platform::spawn("weft-build", move || {
            let r = (|| -> Built {
                let source = assets.source(&doc2, assets.base_dir());
                let mut sim = weft_open::simulation(&source, &opts).map_err(|e| e.to_string())?;
                sim.start().map_err(|e| e.to_string())?;
                Ok(sim)
            })();
            let _ = tx.send(r);
        });
        self.pending = Some((revision, rx));
        self.cache
            .set_graph(serde_json::to_value(doc).unwrap_or(Value::Null));
        self.built_from = Some((revision, doc.clone()));
        self.carry_state = false;
    }

    /// A finished background build replaces the simulation (or, for a
    /// display-only edit, takes over its state). Only while it is home.
    pub(super) fn swap_in_build(&mut self, ctx: &egui::Context) -> Option<String> {
        let (_, rx) = self.pending.as_ref()?;
        let mut status = None;
        match rx.try_recv() {
            Ok(Ok(mut sim)) if self.carry_state && self.sim.is_some() => {
                // A display-only edit: the new build goes on from the
                // running state (frame, fields, timings kept).
                let mut old = self.sim.take().expect("checked");
                if let Err(e) = sim.carry_state_from(&mut old) {
                    self.fault = Some(Fault::from(&e));
                }
                self.running = Some(Running::of(&sim));
                self.sim = Some(sim);
                // The new build's cameras are the saved ones: as the
                // document is now, which may have moved on while it was
                // built (an orbit during a pane resize's rebuild), as may
                // kernel scalars (a slider dragged meanwhile).
                self.orbit.forget_cameras();
                if let Some((_, doc)) = self.built_from.clone() {
                    self.follow_cameras(&doc);
                    for n in doc
                        .nodes
                        .iter()
                        .filter(|n| n.params.contains_key("scalars"))
                    {
                        self.set_scalars(n);
                    }
                }
                // Same state, a new program (views added or removed):
                // readers of field state look again.
                self.generation += 1;
                self.clear_textures();
                self.pictures = None;
                self.error = None;
                self.pending = None;
                self.carry_state = false;
                self.needs_draw = true;
            }
            Ok(Ok(mut sim)) => {
                self.cache.clear();
                self.seek_to = None;
                // Frame 0 for the timeline (where nothing may wait, the
                // state cannot be read back at once: not kept).
                if !sim_worker::must_not_wait(&sim) {
                    match sim.snapshot() {
                        Ok(s) => self.cache.insert(s, sim.frame),
                        Err(e) => self.fault = Some(Fault::from(&e)),
                    }
                }
                self.display_only = false;
                if self.running.as_ref().is_some_and(|s| s.frame > 0) {
                    status = Some("recompiled — restarted at frame 0".to_string());
                }
                self.frames_run = 0;
                self.frame_ms = 0.0;
                self.slice = None;
                self.cook = Default::default();
                self.probe.clear();
                self.loss.clear();
                self.orbit.forget_cameras();
                self.running = Some(Running::of(&sim));
                self.sim = Some(sim);
                self.take_baked();
                self.generation += 1;
                self.clear_textures();
                self.pictures = None;
                self.error = None;
                self.fault = None;
                self.pending = None;
                self.needs_draw = true;
            }
            Ok(Err(e)) => {
                self.error = Some(e);
                self.pending = None;
            }
            Err(std::sync::mpsc::TryRecvError::Empty) => ctx.request_repaint(),
            Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                self.error = Some("the background compile stopped unexpectedly".into());
                self.pending = None;
            }
        }
        status
    }

    pub fn compiling(&self) -> bool {
        self.pending.is_some()
    }
}
