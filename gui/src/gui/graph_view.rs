//! The node editor: an egui-snarl view of the document, built from the node
//! catalog. Every edit becomes a `Command`; the snarl is rebuilt from the
//! document whenever it changes, so the document stays the one source of truth.

use super::model::{compatible_kinds, pins, Command, Model, PinKind};
use egui::{Color32, Ui};
use egui_snarl::ui::{AnyPins, PinInfo, SnarlPin, SnarlViewer};
use egui_snarl::{InPin, InPinId, NodeId, OutPin, OutPinId, Snarl};
use weft_ir::graph::assets::Library;
use weft_ir::graph::catalog::{self, Family, PortType};
use weft_ir::graph::NodeDoc;

#[derive(Clone, Debug)]
pub struct NodeView {
    pub id: String,
}

/// Brings the snarl in line with the document, keeping the `NodeId` of every
/// node that is still there.
///
/// Post: one snarl node per document node, at the document's position, and
/// exactly the document's wires. Stable ids matter because egui-snarl keeps the
/// selection and draw order by `NodeId`: a rebuild would hand a deleted node's
/// id, and its selection, to an unrelated node. New nodes are inserted before
/// stale ones are removed, so a freed id is not reused (and seen selected)
/// before the snarl has pruned it from the selection.
pub fn sync_snarl(snarl: &mut Snarl<NodeView>, model: &Model) {
    let lib = model.assets.library();
    let mut ids: std::collections::HashMap<String, NodeId> = snarl
        .nodes_ids_data()
        .map(|(nid, n)| (n.value.id.clone(), nid))
        .collect();
    for n in &model.doc.nodes {
        let pos = egui::pos2(n.pos[0], n.pos[1]);
        match ids.get(&n.id) {
            Some(&nid) => {
                if let Some(info) = snarl.get_node_info_mut(nid) {
                    info.pos = pos;
                }
            }
            None => {
                let nid = snarl.insert_node(pos, NodeView { id: n.id.clone() });
                ids.insert(n.id.clone(), nid);
            }
        }
    }
    let stale: Vec<NodeId> = snarl
        .nodes_ids_data()
        .filter(|(_, n)| model.doc.node(&n.value.id).is_none())
        .map(|(nid, _)| nid)
        .collect();
    for nid in stale {
        snarl.remove_node(nid);
    }
    let wires: Vec<(OutPinId, InPinId)> = snarl.wires().collect();
    for (o, i) in wires {
        snarl.disconnect(o, i);
    }
    let pin_index = |node: &NodeDoc, name: &str, output: bool| -> Option<usize> {
        let (ins, outs) = pins(node, &lib);
        let list = if output { outs } else { ins };
        list.iter().position(|p| p.name == name)
    };
    let mut connect = |from: &str, to: &str, exec: bool| {
        let (fnode, fport) = weft_ir::graph::document::split_endpoint(from);
        let (tnode, tport) = weft_ir::graph::document::split_endpoint(to);
        let (Some(fd), Some(td)) = (model.doc.node(fnode), model.doc.node(tnode)) else {
            return;
        };
        let fport = if fport.is_empty() {
            pins(fd, &lib)
                .1
                .first()
                .map(|p| p.name.clone())
                .unwrap_or_default()
        } else {
            fport.to_string()
        };
        let tport = if exec && tport.is_empty() {
            "exec".to_string()
        } else if tport.is_empty() {
            pins(td, &lib)
                .0
                .first()
                .map(|p| p.name.clone())
                .unwrap_or_default()
        } else {
            tport.to_string()
        };
        if let (Some(o), Some(i)) = (pin_index(fd, &fport, true), pin_index(td, &tport, false)) {
            snarl.connect(
                OutPinId {
                    node: ids[fnode],
                    output: o,
                },
                InPinId {
                    node: ids[tnode],
                    input: i,
                },
            );
        }
    };
    for w in &model.doc.wires {
        connect(&w.from, &w.to, false);
    }
    for w in &model.doc.exec {
        connect(&w.from, &w.to, true);
    }
}

/// The node editor's look: pins sit on the node's edge (where `pin_center`
/// finds them), and a box selection takes the nodes it touches.
pub fn style() -> egui_snarl::ui::SnarlStyle {
    egui_snarl::ui::SnarlStyle {
        select_rect_contained: Some(false),
        pin_placement: Some(egui_snarl::ui::PinPlacement::Edge),
        ..egui_snarl::ui::SnarlStyle::new()
    }
}

/// The errors a node's title shows (in red, listed on hover): the
/// document's problems naming it and the running simulation's fault.
pub fn node_problems(
    model: &Model,
    fault: Option<&super::viewport::Fault>,
    id: &str,
) -> Vec<String> {
    let mut out: Vec<String> = model
        .problems_of(id)
        .iter()
        .map(|p| p.to_string())
        .collect();
    if let Some(f) = fault.filter(|f| {
        f.node
            .as_deref()
            .is_some_and(|n| super::model::names_or_holds(id, n))
    }) {
        out.push(f.message.clone());
    }
    out
}

pub fn family_color(f: Family) -> Color32 {
    match f {
        Family::Layout => Color32::from_rgb(120, 170, 255),
        Family::Field => Color32::from_rgb(120, 220, 160),
        Family::Kernel => Color32::from_rgb(255, 180, 90),
        Family::Execution => Color32::from_rgb(220, 220, 220),
        Family::View => Color32::from_rgb(220, 140, 255),
        Family::Geometry => Color32::from_rgb(240, 210, 110),
    }
}

/// A node kind's colour: its family's, with sparse layouts set apart
/// (teal for `bitmasked`, violet-blue for `pointer`, amber for `dynamic`, rose for `hash`) so that where memory is
/// allocated on demand shows at a glance.
pub fn kind_color(k: &catalog::NodeKind) -> Color32 {
    match k.name {
        "bitmasked" => Color32::from_rgb(90, 210, 230),
        "pointer" => Color32::from_rgb(150, 130, 255),
        "dynamic" => Color32::from_rgb(240, 190, 90),
        "hash" => Color32::from_rgb(230, 120, 170),
        _ => family_color(k.family),
    }
}

fn pin_color(k: PinKind) -> Color32 {
    match k {
        PinKind::Exec => Color32::WHITE,
        PinKind::Data(PortType::Layout) => Color32::from_rgb(120, 170, 255),
        PinKind::Data(PortType::Field) => Color32::from_rgb(120, 220, 160),
    }
}

pub struct GraphViewer<'a> {
    pub model: &'a Model,
    /// The editor's asset library (`model.assets`), read once a frame:
    /// the pins of asset nodes and their update badges come from it.
    pub library: Library,
    pub commands: Vec<Command>,
    pub selected: &'a mut Option<String>,
    pub open_code: &'a mut Option<String>,
    pub search: &'a mut String,
    /// Why the last wire was refused (shown by the app).
    pub refusal: Option<String>,
    /// Graph space → screen, as the editor last drew it.
    pub to_screen: egui::emath::TSTransform,
    /// Each node's frame in graph space, as last laid out.
    pub node_rects: &'a mut std::collections::HashMap<String, egui::Rect>,
    /// The running simulation's run-time error: its node's title turns red.
    pub fault: Option<&'a super::viewport::Fault>,
    /// Frames to draw behind the nodes (a dragged one at its live place).
    pub frames: &'a [weft_ir::graph::FrameDoc],
    pub selected_frame: Option<&'a str>,
    /// The selected nodes: "Frame selection" wraps them.
    pub selection: &'a [String],
    /// A view to switch to this frame (frame all / selected, zoom steps).
    pub set_transform: Option<egui::emath::TSTransform>,
    /// A field node's "Open in spreadsheet": the field to show.
    pub open_in_sheet: Option<String>,
    /// The field node whose viewer flag is on (drawn with a flag).
    pub viewer_flag: Option<&'a str>,
    /// A field node's viewer flag toggled (menu, Ctrl+Shift+click).
    pub toggle_viewer: Option<String>,
    /// Warnings about the running simulation: (node, message), e.g. a pool nearly full.
    pub live_warnings: Vec<(String, String)>,
    /// This frame's title labels (node → label rect), so that a click on
    /// the rest of the title bar inspects the node too.
    pub title_labels: std::collections::HashMap<String, egui::Rect>,
    /// This frame's pin labels (node, output, label rect, tooltip), so that
    /// the pin's dot on the node's edge shows the same tooltip as its label.
    pub pin_labels: Vec<(String, bool, egui::Rect, String)>,
}

impl GraphViewer<'_> {
    fn doc_node(&self, v: &NodeView) -> Option<&NodeDoc> {
        self.model.doc.node(&v.id)
    }

    fn endpoints(
        &self,
        from: &OutPin,
        to: &InPin,
        snarl: &Snarl<NodeView>,
    ) -> Option<(String, String, bool)> {
        let f = self.doc_node(&snarl[from.id.node])?;
        let t = self.doc_node(&snarl[to.id.node])?;
        let out = pins(f, &self.library).1.get(from.id.output)?.clone();
        let inp = pins(t, &self.library).0.get(to.id.input)?.clone();
        let exec = out.kind == PinKind::Exec || inp.kind == PinKind::Exec;
        Some((
            format!("{}.{}", f.id, out.name),
            if exec && inp.name == "exec" {
                t.id.clone()
            } else {
                format!("{}.{}", t.id, inp.name)
            },
            exec,
        ))
    }
}

impl GraphViewer<'_> {
    /// A pin's label, with what it carries on hover, and its shape and colour.
    fn show_pin(&mut self, node: &str, index: usize, output: bool, ui: &mut Ui) -> PinInfo {
        let Some(n) = self.model.doc.node(node) else {
            return PinInfo::circle();
        };
        let (ins, outs) = pins(n, &self.library);
        let Some(p) = (if output { outs } else { ins }).get(index).cloned() else {
            return PinInfo::circle();
        };
        let tip = pin_type(self.model, n, &p, output);
        let field = (p.kind == PinKind::Data(PortType::Field))
            .then(|| pin_field(self.model, n, &p.name, output))
            .flatten();
        let hover = match &field {
            Some(f) => format!("{}\nCtrl+Shift+click: view '{}' in the viewport", tip, f),
            None => tip.clone(),
        };
        // Clickable (Ctrl+Shift+click), drawn like plain text.
        let text = egui::RichText::new(&p.name).color(ui.visuals().text_color());
        let r = ui
            .add(
                egui::Label::new(text)
                    .selectable(false)
                    .sense(egui::Sense::click()),
            )
            .on_hover_text(hover);
        if r.clicked() && ui.input(|i| i.modifiers.command && i.modifiers.shift) {
            // The viewer flag on a pin: the field it carries.
            if let Some(f) = field {
                self.toggle_viewer = Some(f);
            }
        }
        self.pin_labels
            .push((node.to_string(), output, r.rect, tip));
        let info = if p.kind == PinKind::Exec {
            PinInfo::triangle()
        } else {
            PinInfo::circle()
        };
        info.with_fill(pin_color(p.kind))
    }
}

/// The field a field pin carries, by the name the viewer flag takes: a
/// field node's `field` output is the node (`T`), its `grad` output the
/// gradient (`T.grad`); an input carries what is wired into it.
pub fn pin_field(model: &Model, node: &NodeDoc, pin: &str, output: bool) -> Option<String> {
    let (source, port) = if output {
        (node, pin.to_string())
    } else {
        let to = format!("{}.{}", node.id, pin);
        let w = model.doc.wires.iter().find(|w| w.to == to)?;
        let (n, port) = weft_ir::graph::document::split_endpoint(&w.from);
        (model.doc.node(n)?, port.to_string())
    };
    if source.kind != "field" {
        return None;
    }
    match port.as_str() {
        "grad" => Some(format!("{}.grad", source.id)),
        _ => Some(source.id.clone()),
    }
}

/// What a pin carries, for its tooltip: `field vec2<f32>`, `layout 2 axes`, `exec`.
pub fn pin_type(model: &Model, node: &NodeDoc, pin: &super::model::Pin, output: bool) -> String {
    match pin.kind {
        PinKind::Exec => "exec".into(),
        PinKind::Data(PortType::Field) => {
            // The field node itself, or the field wired into this input.
            let source = if output {
                Some(node)
            } else {
                let to = format!("{}.{}", node.id, pin.name);
                model.doc.wires.iter().find(|w| w.to == to).and_then(|w| {
                    model
                        .doc
                        .node(weft_ir::graph::document::split_endpoint(&w.from).0)
                })
            };
            match source.filter(|f| f.kind == "field") {
                Some(f) => {
                    let t = f
                        .params
                        .get("type")
                        .and_then(|v| v.as_str())
                        .unwrap_or("f32");
                    let t = weft_ir::types::Type::parse(t)
                        .map(|t| t.to_string())
                        .unwrap_or_else(|| t.to_string());
                    format!("field {} ('{}')", t, f.id)
                }
                None => "field (not wired)".into(),
            }
        }
        PinKind::Data(PortType::Layout) => {
            let layout = if output {
                Some(node)
            } else {
                let to = format!("{}.{}", node.id, pin.name);
                model.doc.wires.iter().find(|w| w.to == to).and_then(|w| {
                    model
                        .doc
                        .node(weft_ir::graph::document::split_endpoint(&w.from).0)
                })
            };
            match layout
                .and_then(|l| l.params.get("shape"))
                .and_then(|s| s.as_array())
            {
                Some(shape) => format!(
                    "layout {} ax{}",
                    shape.len(),
                    if shape.len() == 1 { "is" } else { "es" }
                ),
                None => "layout".into(),
            }
        }
    }
}

impl SnarlViewer<NodeView> for GraphViewer<'_> {
    fn title(&mut self, node: &NodeView) -> String {
        node.id.clone()
    }

    fn current_transform(
        &mut self,
        to_global: &mut egui::emath::TSTransform,
        _snarl: &mut Snarl<NodeView>,
    ) {
        if let Some(t) = self.set_transform.take() {
            *to_global = t;
        }
        self.to_screen = *to_global;
    }

    fn final_node_rect(
        &mut self,
        node: NodeId,
        rect: egui::Rect,
        ui: &mut Ui,
        snarl: &mut Snarl<NodeView>,
    ) {
        let id = &snarl[node].id;
        // The inspected node gets a bright outline, the rest of the selection a soft one.
        let stroke = if self.selected.as_deref() == Some(id.as_str()) {
            Some(egui::Stroke::new(2.5, Color32::from_rgb(255, 170, 60)))
        } else if self.selection.contains(id) {
            Some(egui::Stroke::new(1.5, Color32::from_rgb(255, 210, 140)))
        } else {
            None
        };
        if let Some(stroke) = stroke {
            ui.painter()
                .rect_stroke(rect.expand(3.0), 6.0, stroke, egui::StrokeKind::Outside);
        }
        // The rest of the title bar (right of the label) inspects the node
        // on a click; a drag there still moves the node (click sense only).
        if let Some(label) = self.title_labels.get(id.as_str()) {
            let rest = egui::Rect::from_min_max(
                egui::pos2(label.right() + 2.0, label.top() - 3.0),
                egui::pos2(rect.right() - 2.0, label.bottom() + 3.0),
            );
            if rest.is_positive()
                && ui
                    .interact(rest, ui.id().with(("title bar", id)), egui::Sense::click())
                    .clicked()
            {
                *self.selected = Some(id.clone());
            }
        }
        // A pin's dot sits on the node's edge, outside its label: it shows
        // the label's tooltip too (hover sense only: wiring is untouched).
        for (_, output, label, tip) in self.pin_labels.iter().filter(|p| &p.0 == id) {
            let x = if *output { rect.right() } else { rect.left() };
            let dot = egui::Rect::from_center_size(
                egui::pos2(x, label.center().y),
                egui::vec2(14.0, 14.0),
            );
            let r = ui.interact(
                dot,
                ui.id().with(("pin dot", id, *output, label.min.y as i32)),
                egui::Sense::hover(),
            );
            // The pin widget under it takes the hover: show it by position.
            if r.contains_pointer() && !ui.input(|i| i.pointer.any_down()) {
                r.show_tooltip_text(tip);
            }
        }
        self.node_rects.insert(id.clone(), rect);
    }

    fn show_header(
        &mut self,
        node: NodeId,
        _inputs: &[InPin],
        _outputs: &[OutPin],
        ui: &mut Ui,
        snarl: &mut Snarl<NodeView>,
    ) {
        let id = snarl[node].id.clone();
        let Some(doc) = self.model.doc.node(&id) else {
            return;
        };
        let problems = node_problems(self.model, self.fault, &id);
        let warnings: Vec<String> = self
            .model
            .warnings
            .iter()
            .filter(|w| w.node() == id)
            .map(|w| w.to_string())
            .chain(
                self.live_warnings
                    .iter()
                    .filter(|(n, _)| *n == id)
                    .map(|(_, w)| w.clone()),
            )
            .collect();
        let color = if !problems.is_empty() {
            Color32::from_rgb(255, 90, 90)
        } else if !warnings.is_empty() {
            Color32::from_rgb(240, 200, 90)
        } else {
            catalog::kind(&doc.kind)
                .map(kind_color)
                .unwrap_or(Color32::GRAY)
        };
        // A bypassed node is drawn dimmed; a group names its asset.
        let color = if doc.bypass {
            color.gamma_multiply(0.4)
        } else {
            color
        };
        let kind = match &doc.asset {
            Some(a) => format!(
                "{} ({} v{}){}",
                doc.kind,
                a.name,
                a.version,
                super::asset_update::badge(doc, &self.library)
            ),
            None => doc.kind.clone(),
        };
        let bypassed = if doc.bypass { "  ·  bypassed" } else { "" };
        let text = egui::RichText::new(format!("{}  ·  {}{}", id, kind, bypassed))
            .color(color)
            .strong();
        // Not selectable: a drag that starts on the title moves the node.
        let mut r = ui.add(
            egui::Label::new(text)
                .selectable(false)
                .sense(egui::Sense::click()),
        );
        if !problems.is_empty() || !warnings.is_empty() {
            let msg: Vec<String> = problems.into_iter().chain(warnings).collect();
            r = r.on_hover_text(msg.join("\n"));
        }
        self.title_labels.insert(id.clone(), r.rect);
        if r.double_clicked() && doc.kind == "kernel" {
            // Double-clicking a kernel opens its code (or its expression sub-graph).
            *self.open_code = Some(id.clone());
        }
        if self.viewer_flag == Some(id.as_str()) {
            ui.label(egui::RichText::new("⚑ viewed").color(Color32::from_rgb(90, 170, 255)))
                .on_hover_text("viewer flag: shown in the viewport (V or the node menu to stop)");
        }
        if r.clicked() && ui.input(|i| i.modifiers.command && i.modifiers.shift) {
            if doc.kind == "field" {
                self.toggle_viewer = Some(id.clone());
            }
        } else if r.clicked() {
            *self.selected = Some(id);
        }
    }

    fn inputs(&mut self, node: &NodeView) -> usize {
        self.doc_node(node)
            .map(|n| pins(n, &self.library).0.len())
            .unwrap_or(0)
    }

    fn outputs(&mut self, node: &NodeView) -> usize {
        self.doc_node(node)
            .map(|n| pins(n, &self.library).1.len())
            .unwrap_or(0)
    }

    fn show_input(
        &mut self,
        pin: &InPin,
        ui: &mut Ui,
        snarl: &mut Snarl<NodeView>,
    ) -> impl SnarlPin + 'static {
        self.show_pin(&snarl[pin.id.node].id, pin.id.input, false, ui)
    }

    fn show_output(
        &mut self,
        pin: &OutPin,
        ui: &mut Ui,
        snarl: &mut Snarl<NodeView>,
    ) -> impl SnarlPin + 'static {
        self.show_pin(&snarl[pin.id.node].id, pin.id.output, true, ui)
    }

    fn has_body(&mut self, node: &NodeView) -> bool {
        self.doc_node(node)
            .and_then(|n| catalog::kind(&n.kind))
            .is_some_and(|k| !k.params.is_empty())
    }

    fn show_body(
        &mut self,
        node: NodeId,
        _inputs: &[InPin],
        _outputs: &[OutPin],
        ui: &mut Ui,
        snarl: &mut Snarl<NodeView>,
    ) {
        let id = snarl[node].id.clone();
        let Some(doc) = self.model.doc.node(&id).cloned() else {
            return;
        };
        ui.vertical(|ui| {
            ui.set_max_width(220.0);
            let hidden = super::view_ports::hidden_params(&self.model.doc, &doc);
            super::params::param_editors(
                ui,
                &doc,
                true,
                &hidden,
                &mut self.commands,
                self.open_code,
            );
        });
    }

    fn has_graph_menu(&mut self, _pos: egui::Pos2, _snarl: &mut Snarl<NodeView>) -> bool {
        true
    }

    fn show_graph_menu(&mut self, pos: egui::Pos2, ui: &mut Ui, _snarl: &mut Snarl<NodeView>) {
        if let Some(kind) = add_node_menu(ui, self.search) {
            self.commands.push(Command::AddNode {
                kind,
                pos: [pos.x, pos.y],
            });
            ui.close();
        }
        ui.separator();
        let label = if self.selection.is_empty() {
            "Add frame".to_string()
        } else {
            format!("Frame {} selected node(s)  (Ctrl+J)", self.selection.len())
        };
        if ui.button(label).clicked() {
            let rects: Vec<egui::Rect> = self
                .selection
                .iter()
                .filter_map(|id| self.node_rects.get(id).copied())
                .collect();
            let frame = super::frames::new_frame(self.model.next_frame_id(), &rects, pos, false);
            self.commands.push(Command::AddFrame { frame });
            ui.close();
        }
        if ui.button("Add comment").clicked() {
            let frame = super::frames::new_frame(self.model.next_frame_id(), &[], pos, true);
            self.commands.push(Command::AddFrame { frame });
            ui.close();
        }
    }

    fn draw_background(
        &mut self,
        background: Option<&egui_snarl::ui::BackgroundPattern>,
        viewport: &egui::Rect,
        snarl_style: &egui_snarl::ui::SnarlStyle,
        style: &egui::Style,
        painter: &egui::Painter,
        _snarl: &Snarl<NodeView>,
    ) {
        if let Some(b) = background {
            b.draw(viewport, snarl_style, style, painter);
        }
        super::frames::paint(painter, self.frames, self.selected_frame);
    }

    fn has_dropped_wire_menu(&mut self, _src_pins: AnyPins, _snarl: &mut Snarl<NodeView>) -> bool {
        true
    }

    /// Dropping a wire on empty space offers only nodes with a compatible pin, and wires the new node.
    fn show_dropped_wire_menu(
        &mut self,
        pos: egui::Pos2,
        ui: &mut Ui,
        src_pins: AnyPins,
        snarl: &mut Snarl<NodeView>,
    ) {
        let (from_output, pin) = match src_pins {
            AnyPins::Out(p) => match p.first() {
                Some(id) => (
                    true,
                    self.doc_node(&snarl[id.node]).and_then(|n| {
                        Some((
                            n.id.clone(),
                            pins(n, &self.library).1.get(id.output)?.clone(),
                        ))
                    }),
                ),
                None => return,
            },
            AnyPins::In(p) => match p.first() {
                Some(id) => (
                    false,
                    self.doc_node(&snarl[id.node]).and_then(|n| {
                        Some((
                            n.id.clone(),
                            pins(n, &self.library).0.get(id.input)?.clone(),
                        ))
                    }),
                ),
                None => return,
            },
        };
        let Some((node, pin)) = pin else { return };
        ui.label("Add a compatible node");
        // A field's element type narrows the views offered (particles draw vec2 or vec3 only).
        let field_ty = if from_output {
            super::view_ports::field_type(&self.model.doc, &format!("{}.{}", node, pin.name))
        } else {
            None
        };
        for (kind, other) in compatible_kinds(pin.kind, from_output) {
            if field_ty
                .as_deref()
                .is_some_and(|ty| !super::view_ports::accepts(kind, &other, ty))
            {
                continue;
            }
            if ui.button(format!("{} ({})", kind, other)).clicked() {
                let new_id = self.model.next_id(kind);
                let exec = pin.kind == PinKind::Exec;
                let (from, to) = if from_output {
                    (
                        format!("{}.{}", node, pin.name),
                        if exec {
                            new_id.clone()
                        } else {
                            format!("{}.{}", new_id, other)
                        },
                    )
                } else {
                    (
                        format!("{}.{}", new_id, other),
                        if exec {
                            node.clone()
                        } else {
                            format!("{}.{}", node, pin.name)
                        },
                    )
                };
                self.commands.push(Command::AddNode {
                    kind: kind.to_string(),
                    pos: [pos.x, pos.y],
                });
                self.commands.push(Command::Connect { from, to, exec });
                ui.close();
            }
        }
    }

    fn has_node_menu(&mut self, _node: &NodeView) -> bool {
        true
    }

    fn show_node_menu(
        &mut self,
        node: NodeId,
        _inputs: &[InPin],
        _outputs: &[OutPin],
        ui: &mut Ui,
        snarl: &mut Snarl<NodeView>,
    ) {
        let id = snarl[node].id.clone();
        if ui.button("Delete").clicked() {
            self.commands.push(Command::RemoveNode { id: id.clone() });
            ui.close();
        }
        if self.model.doc.node(&id).is_some_and(|n| n.kind == "kernel")
            && ui.button("Edit code…").clicked()
        {
            *self.open_code = Some(id.clone());
            ui.close();
        }
        if self.model.doc.node(&id).is_some_and(|n| n.kind == "field") {
            let label = if self.viewer_flag == Some(id.as_str()) {
                "Stop viewing in viewport  (V)"
            } else {
                "View in viewport  (V)"
            };
            if ui.button(label).clicked() {
                self.toggle_viewer = Some(id.clone());
                ui.close();
            }
            if ui.button("Open in spreadsheet").clicked() {
                self.open_in_sheet = Some(id);
                ui.close();
            }
        }
    }

    fn connect(&mut self, from: &OutPin, to: &InPin, snarl: &mut Snarl<NodeView>) {
        let Some((f, t, exec)) = self.endpoints(from, to, snarl) else {
            return;
        };
        match self.model.check_wire(&f, &t, exec) {
            Ok(()) => self.commands.push(Command::Connect {
                from: f,
                to: t,
                exec,
            }),
            Err(why) => self.refusal = Some(why),
        }
    }

    fn disconnect(&mut self, from: &OutPin, to: &InPin, snarl: &mut Snarl<NodeView>) {
        if let Some((f, t, exec)) = self.endpoints(from, to, snarl) {
            self.commands.push(Command::Disconnect {
                from: f,
                to: t,
                exec,
            });
        }
    }

    fn drop_outputs(&mut self, pin: &OutPin, snarl: &mut Snarl<NodeView>) {
        for r in &pin.remotes {
            let to = InPin {
                id: *r,
                remotes: vec![pin.id],
            };
            self.disconnect(pin, &to, snarl);
        }
    }

    fn drop_inputs(&mut self, pin: &InPin, snarl: &mut Snarl<NodeView>) {
        for r in &pin.remotes {
            let from = OutPin {
                id: *r,
                remotes: vec![pin.id],
            };
            self.disconnect(&from, pin, snarl);
        }
    }
}

/// How well a kind matches the search text: exact name, name prefix, name
/// substring, then description; `None` when it does not match at all.
pub fn search_rank(kind: &catalog::NodeKind, query: &str) -> Option<u8> {
    let q = query.trim().to_lowercase();
    if q.is_empty() {
        return Some(3);
    }
    if kind.name == q {
        Some(0)
    } else if kind.name.starts_with(&q) {
        Some(1)
    } else if kind.name.contains(&q) {
        Some(2)
    } else if kind.doc.to_lowercase().contains(&q) {
        Some(3)
    } else {
        None
    }
}

/// The kinds matching `query`, best first (stable within a rank, in catalog order).
pub fn search_kinds(query: &str) -> Vec<&'static catalog::NodeKind> {
    let mut hits: Vec<(u8, &'static catalog::NodeKind)> = catalog::kinds()
        .iter()
        .filter_map(|k| search_rank(k, query).map(|r| (r, k)))
        .collect();
    hits.sort_by_key(|(r, _)| *r);
    hits.into_iter().map(|(_, k)| k).collect()
}

/// The searchable add-node menu: grouped by family when empty, best match
/// first while searching (Enter takes the first). Returns the chosen kind.
pub fn add_node_menu(ui: &mut Ui, search: &mut String) -> Option<String> {
    ui.label("Add node");
    let r = ui.add(
        egui::TextEdit::singleline(search)
            .hint_text("search…")
            .desired_width(180.0),
    );
    r.request_focus();
    let enter = ui.input(|i| i.key_pressed(egui::Key::Enter));
    let mut chosen = None;
    if search.trim().is_empty() {
        for fam in [
            Family::Layout,
            Family::Field,
            Family::Kernel,
            Family::Execution,
            Family::View,
            Family::Geometry,
        ] {
            ui.label(
                egui::RichText::new(fam.name())
                    .small()
                    .color(family_color(fam)),
            );
            for k in catalog::kinds().iter().filter(|k| k.family == fam) {
                if ui.button(k.name).on_hover_text(k.doc).clicked() {
                    chosen = Some(k.name.to_string());
                }
            }
        }
    } else {
        let hits = search_kinds(search);
        if hits.is_empty() {
            ui.weak("no node kind matches");
        }
        for (n, k) in hits.into_iter().enumerate() {
            let text = egui::RichText::new(k.name).color(kind_color(k));
            let b = ui.button(text).on_hover_text(k.doc);
            if b.clicked() || (enter && n == 0) {
                chosen = Some(k.name.to_string());
            }
        }
    }
    if chosen.is_some() {
        search.clear();
    }
    chosen
}
