//! The group editing gestures of the node editor: Ctrl+G groups the
//! selection, Ctrl+Alt+G ungroups, Tab / I / a double-click enter a group,
//! U / Ctrl+Tab leave it, and the inspector's "Promote to group" section.
//! The document transforms themselves are in `group_edit`.

use super::model::{Command, Model};
use egui::{Context, Key, Modifiers};
use weft_ir::graph::groups::GROUP;
use weft_ir::graph::NodeDoc;

fn is_group(model: &Model, id: &str) -> bool {
    model.doc.node(id).is_some_and(|n| n.kind == GROUP)
}

/// The keys of group editing (not while typing). `selection` is the
/// selected nodes, `selected` the inspected one. Returns true when it used
/// Tab (to enter a group), so Tab does not also open the add-node menu.
pub fn shortcuts(
    ctx: &Context,
    model: &mut Model,
    selection: &[String],
    selected: Option<&str>,
) -> bool {
    let (ungroup, group, leave) = ctx.input_mut(|i| {
        let ungroup = i.consume_key(Modifiers::COMMAND | Modifiers::ALT, Key::G);
        let group = i.consume_key(Modifiers::COMMAND, Key::G);
        let leave = i.consume_key(Modifiers::COMMAND, Key::Tab)
            || (i.modifiers.is_none() && i.key_pressed(Key::U));
        (ungroup, group, leave)
    });
    // The group to enter or ungroup: the inspected node, else the only
    // selected one.
    let target = selected
        .map(str::to_string)
        .or_else(|| (selection.len() == 1).then(|| selection[0].clone()))
        .filter(|id| is_group(model, id));
    if ungroup {
        match &target {
            Some(id) => model.push(Command::Ungroup { id: id.clone() }),
            None => model
                .log
                .push("Ctrl+Alt+G: select a group node to ungroup".into()),
        }
    }
    if group {
        let mut ids: Vec<String> = selection.to_vec();
        if ids.is_empty() {
            ids.extend(selected.map(str::to_string));
        }
        model.push(Command::Group { ids });
    }
    if leave {
        let depth = model.scope_ids().len();
        model.leave_to(depth.saturating_sub(1));
    }
    let Some(id) = target else {
        return false;
    };
    let (tab, i_key) = ctx.input_mut(|i| {
        let tab = i.consume_key(Modifiers::NONE, Key::Tab);
        let i_key = i.modifiers.is_none() && i.key_pressed(Key::I);
        (tab, i_key)
    });
    if tab || i_key {
        if let Err(e) = model.enter(&id) {
            model.log.push(e);
        }
    }
    tab
}

/// A double-click on a group node (`node_rects` in graph space, drawn
/// through `to_screen`) enters it.
pub fn double_click(
    ctx: &Context,
    model: &mut Model,
    to_screen: egui::emath::TSTransform,
    node_rects: &std::collections::HashMap<String, egui::Rect>,
) {
    let at = ctx.input(|i| {
        i.pointer
            .button_double_clicked(egui::PointerButton::Primary)
            .then(|| i.pointer.interact_pos())
            .flatten()
    });
    let Some(at) = at else {
        return;
    };
    let p = to_screen.inverse() * at;
    let hit = node_rects
        .iter()
        .find(|(id, r)| r.contains(p) && is_group(model, id))
        .map(|(id, _)| id.clone());
    if let Some(id) = hit {
        if let Err(e) = model.enter(&id) {
            model.log.push(e);
        }
    }
}

/// Shows the node at `path` (`g/inner/step`, as problems name it): enters
/// the groups on the way and returns the id to inspect at that level.
pub fn reveal(model: &mut Model, path: &str) -> String {
    model.leave_to(0);
    let parts: Vec<&str> = path.split('/').collect();
    for (i, g) in parts.iter().enumerate() {
        if i + 1 == parts.len() || model.enter(g).is_err() {
            return parts[i..].join("/");
        }
    }
    path.to_string()
}

/// The inspector's "Promote to group" section for node `node` of an
/// entered group: each parameter (and kernel scalar) with a button to
/// promote it onto the group node, or to un-promote it.
pub fn promote_section(
    ui: &mut egui::Ui,
    model: &Model,
    node: &NodeDoc,
    commands: &mut Vec<Command>,
) {
    let Some(group) = model.entered_group() else {
        return;
    };
    if super::group_edit::is_boundary(&node.id) {
        return;
    }
    // Scalar parameters only (numbers, integers, booleans and a kernel's
    // scalars): what a group's user turns, as Houdini's promoted parms are.
    // Structure (types, shapes, storage, code, node references) stays
    // inside the group; one promoted already is listed, to un-promote it.
    use weft_ir::graph::catalog::ParamType;
    let already = |name: &str| {
        group
            .group
            .as_ref()
            .and_then(|g| super::group_edit::promoted(g, &node.id, name))
            .is_some()
    };
    let mut names: Vec<String> = weft_ir::graph::catalog::kind(&node.kind)
        .map(|k| {
            k.params
                .iter()
                .filter(|p| {
                    matches!(p.ty, ParamType::Int | ParamType::Number | ParamType::Bool)
                        || already(p.name)
                })
                .map(|p| p.name.to_string())
                .collect()
        })
        .unwrap_or_default();
    if let Some(s) = node.params.get("scalars").and_then(|v| v.as_object()) {
        names.extend(s.keys().cloned());
    }
    if names.is_empty() {
        return;
    }
    egui::CollapsingHeader::new(format!("Promote to group '{}'", group.id))
        .id_salt(("promote", &node.id))
        .default_open(true)
        .show(ui, |ui| {
            for p in names {
                let promoted = group
                    .group
                    .as_ref()
                    .and_then(|g| super::group_edit::promoted(g, &node.id, &p));
                ui.horizontal(|ui| {
                    ui.label(&p);
                    match promoted {
                        Some(pp) => {
                            ui.weak(format!("as {}", pp.name));
                            if ui
                                .small_button("Un-promote")
                                .on_hover_text("the node keeps the value the group gave it")
                                .clicked()
                            {
                                commands.push(Command::Promote {
                                    node: node.id.clone(),
                                    param: p.clone(),
                                    on: false,
                                });
                            }
                        }
                        None => {
                            if ui
                                .small_button("Promote")
                                .on_hover_text(format!(
                                    "show it on the group node as '{}_{}'",
                                    node.id, p
                                ))
                                .clicked()
                            {
                                commands.push(Command::Promote {
                                    node: node.id.clone(),
                                    param: p.clone(),
                                    on: true,
                                });
                            }
                        }
                    }
                });
            }
        });
}
