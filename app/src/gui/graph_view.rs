//! The node editor: an egui-snarl view of the document, built from the node
//! catalog. Every edit becomes a `Command`; the snarl is rebuilt from the
//! document whenever it changes, so the document stays the one source of truth.

use super::model::{compatible_kinds, pins, Command, Model, PinKind};
use egui::{Color32, Ui};
use egui_snarl::ui::{AnyPins, PinInfo, SnarlPin, SnarlViewer};
use egui_snarl::{InPin, InPinId, NodeId, OutPin, OutPinId, Snarl};
use weft_ir::graph::catalog::{self, Family, PortType};
use weft_ir::graph::NodeDoc;

#[derive(Clone, Debug)]
pub struct NodeView {
    pub id: String,
}

/// Builds the snarl for a document.
pub fn build_snarl(model: &Model) -> Snarl<NodeView> {
    let mut snarl = Snarl::new();
    let mut ids = std::collections::HashMap::new();
    for n in &model.doc.nodes {
        let id = snarl.insert_node(
            egui::pos2(n.pos[0], n.pos[1]),
            NodeView { id: n.id.clone() },
        );
        ids.insert(n.id.clone(), id);
    }
    let pin_index = |node: &NodeDoc, name: &str, output: bool| -> Option<usize> {
        let (ins, outs) = pins(node);
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
            pins(fd)
                .1
                .first()
                .map(|p| p.name.clone())
                .unwrap_or_default()
        } else {
            fport.to_string()
        };
        let tport = if exec {
            "exec".to_string()
        } else if tport.is_empty() {
            pins(td)
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
    snarl
}

pub fn family_color(f: Family) -> Color32 {
    match f {
        Family::Layout => Color32::from_rgb(120, 170, 255),
        Family::Field => Color32::from_rgb(120, 220, 160),
        Family::Kernel => Color32::from_rgb(255, 180, 90),
        Family::Execution => Color32::from_rgb(220, 220, 220),
        Family::View => Color32::from_rgb(220, 140, 255),
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
    pub commands: Vec<Command>,
    pub selected: &'a mut Option<String>,
    pub open_code: &'a mut Option<String>,
    pub search: &'a mut String,
    /// Why the last wire was refused (shown by the app).
    pub refusal: Option<String>,
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
        let out = pins(f).1.get(from.id.output)?.clone();
        let inp = pins(t).0.get(to.id.input)?.clone();
        let exec = out.kind == PinKind::Exec || inp.kind == PinKind::Exec;
        Some((
            format!("{}.{}", f.id, out.name),
            if exec {
                t.id.clone()
            } else {
                format!("{}.{}", t.id, inp.name)
            },
            exec,
        ))
    }
}

impl SnarlViewer<NodeView> for GraphViewer<'_> {
    fn title(&mut self, node: &NodeView) -> String {
        node.id.clone()
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
        let problems = self.model.problems_of(&id);
        let color = if problems.is_empty() {
            catalog::kind(&doc.kind)
                .map(|k| family_color(k.family))
                .unwrap_or(Color32::GRAY)
        } else {
            Color32::from_rgb(255, 90, 90)
        };
        let text = egui::RichText::new(format!("{}  ·  {}", id, doc.kind))
            .color(color)
            .strong();
        let mut r = ui.add(egui::Label::new(text).sense(egui::Sense::click()));
        if !problems.is_empty() {
            let msg: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
            r = r.on_hover_text(msg.join("\n"));
        }
        if r.double_clicked() && doc.kind == "kernel" {
            // Double-clicking a kernel opens its code (or its expression sub-graph).
            *self.open_code = Some(id.clone());
        }
        if r.clicked() {
            *self.selected = Some(id);
        }
    }

    fn inputs(&mut self, node: &NodeView) -> usize {
        self.doc_node(node).map(|n| pins(n).0.len()).unwrap_or(0)
    }

    fn outputs(&mut self, node: &NodeView) -> usize {
        self.doc_node(node).map(|n| pins(n).1.len()).unwrap_or(0)
    }

    fn show_input(
        &mut self,
        pin: &InPin,
        ui: &mut Ui,
        snarl: &mut Snarl<NodeView>,
    ) -> impl SnarlPin + 'static {
        let p = self
            .doc_node(&snarl[pin.id.node])
            .and_then(|n| pins(n).0.get(pin.id.input).cloned());
        match p {
            Some(p) => {
                ui.label(&p.name);
                let info = if p.kind == PinKind::Exec {
                    PinInfo::triangle()
                } else {
                    PinInfo::circle()
                };
                info.with_fill(pin_color(p.kind))
            }
            None => PinInfo::circle(),
        }
    }

    fn show_output(
        &mut self,
        pin: &OutPin,
        ui: &mut Ui,
        snarl: &mut Snarl<NodeView>,
    ) -> impl SnarlPin + 'static {
        let p = self
            .doc_node(&snarl[pin.id.node])
            .and_then(|n| pins(n).1.get(pin.id.output).cloned());
        match p {
            Some(p) => {
                ui.label(&p.name);
                let info = if p.kind == PinKind::Exec {
                    PinInfo::triangle()
                } else {
                    PinInfo::circle()
                };
                info.with_fill(pin_color(p.kind))
            }
            None => PinInfo::circle(),
        }
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
            super::params::param_editors(ui, &doc, true, &mut self.commands, self.open_code);
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
                    self.doc_node(&snarl[id.node])
                        .and_then(|n| Some((n.id.clone(), pins(n).1.get(id.output)?.clone()))),
                ),
                None => return,
            },
            AnyPins::In(p) => match p.first() {
                Some(id) => (
                    false,
                    self.doc_node(&snarl[id.node])
                        .and_then(|n| Some((n.id.clone(), pins(n).0.get(id.input)?.clone()))),
                ),
                None => return,
            },
        };
        let Some((node, pin)) = pin else { return };
        ui.label("Add a compatible node");
        for (kind, other) in compatible_kinds(pin.kind, from_output) {
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
            *self.open_code = Some(id);
            ui.close();
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

/// The searchable add-node menu, grouped by family. Returns the chosen kind.
pub fn add_node_menu(ui: &mut Ui, search: &mut String) -> Option<String> {
    ui.label("Add node");
    let r = ui.add(
        egui::TextEdit::singleline(search)
            .hint_text("search…")
            .desired_width(180.0),
    );
    r.request_focus();
    let q = search.to_lowercase();
    let mut chosen = None;
    for fam in [
        Family::Layout,
        Family::Field,
        Family::Kernel,
        Family::Execution,
        Family::View,
    ] {
        let kinds: Vec<_> = catalog::kinds()
            .iter()
            .filter(|k| {
                k.family == fam
                    && (q.is_empty() || k.name.contains(&q) || k.doc.to_lowercase().contains(&q))
            })
            .collect();
        if kinds.is_empty() {
            continue;
        }
        ui.label(
            egui::RichText::new(fam.name())
                .small()
                .color(family_color(fam)),
        );
        for k in kinds {
            if ui.button(k.name).on_hover_text(k.doc).clicked() {
                chosen = Some(k.name.to_string());
            }
        }
    }
    if chosen.is_some() {
        search.clear();
    }
    chosen
}
