//! The field spreadsheet in the app (egui_kittest, wgpu): for dense,
//! quantized, sparse and dynamic fields, its statistics and rows equal what
//! a headless `Simulation` of the same graph holds, read independently
//! (`read_field` / `read_root` and one `read_address` per element).

use weft_gui::gui;
mod support;

use egui::accesskit::Role;
use egui::{Event, Modifiers};
use egui_kittest::kittest::Queryable;
use egui_kittest::Harness;
use gui::spreadsheet::{format_index, format_stat, format_value, Column, PAGE_ROWS};
use gui::WeftApp;
use std::path::PathBuf;
use support::{gpu_ok, harness_with, root, settle, wait_for_sim};
use weft_ir::graph::{build_program, BuildOptions, GraphDoc};
use weft_ir::ir::layout::{root_of, AddressPlan};
use weft_ir::ir::Storage;
use weft_runtime::{SimOptions, Simulation};

fn harness(graph: &str) -> Harness<'static, WeftApp> {
    // One settings folder per harness: another test's edit autosaves a
    // recovery file there, which would be offered here.
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let cfg = std::env::temp_dir().join(format!("weft-gui-sheet-{}-{}", std::process::id(), n));
    let path = PathBuf::from("../graphs").join(graph);
    assert!(root().join("graphs").join(graph).exists());
    harness_with(Some(path), cfg)
}

/// The same graph run headless on the app's backend for `frames` frames.
fn headless(h: &Harness<'static, WeftApp>, graph: &str, frames: u32) -> Simulation {
    let path = root().join("graphs").join(graph);
    let doc = GraphDoc::load(&path).unwrap();
    let program = build_program(
        &doc,
        &BuildOptions {
            base_dir: root().join("graphs"),
        },
    )
    .unwrap();
    let backend = h.state().viewport.sim.as_ref().unwrap().backend().unwrap();
    let mut sim = Simulation::new(
        program,
        &SimOptions {
            backend,
            ..Default::default()
        },
    )
    .unwrap();
    sim.start().unwrap();
    for _ in 0..frames {
        sim.step_frame().unwrap();
    }
    sim
}

/// Opens the panel with its button, shows `field`, and waits for its table.
fn show(h: &mut Harness<'static, WeftApp>, field: &str) {
    if !h.state().sheet.open {
        toggle_panel(h);
    }
    h.state_mut().sheet.field = Some(field.to_string());
    wait_current(h);
}

/// View → Spreadsheet.
fn toggle_panel(h: &mut Harness<'static, WeftApp>) {
    h.get_by_label("View").click();
    h.run_steps(2);
    h.get_by_label("Spreadsheet  (Alt+S)").click();
    h.run_steps(2);
}

fn wait_current(h: &mut Harness<'static, WeftApp>) {
    for _ in 0..500 {
        h.step();
        let s = h.state();
        if s.sheet
            .is_current(s.viewport.generation, s.viewport.frame())
        {
            h.run_steps(2);
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!(
        "the spreadsheet never caught up: {:?}",
        h.state().sheet.error
    );
}

/// (index, values) of every stored element: all of a dense field, the
/// active ones of a sparse field (one `read_address` per element).
fn expected_elements(sim: &Simulation, field: &str) -> Vec<(Vec<u32>, Vec<u32>)> {
    let p = &sim.program;
    let f = sim.field(field).unwrap();
    let fd = &p.fields[f];
    let comps = fd.ty.components();
    let words = sim.read_field(f).unwrap();
    let plan = AddressPlan::new(p, f);
    let root = sim.read_root(root_of(p, fd.layout)).unwrap();
    let mut out = vec![];
    weft_runtime::memory::for_each_index(&fd.shape, |lin, idx| {
        if plan.is_sparse() && !plan.read_address(idx, &root).1 {
            return;
        }
        out.push((idx.to_vec(), words[lin * comps..(lin + 1) * comps].to_vec()));
    });
    out
}

/// 32-bit words as the table's component bit patterns.
fn wide(words: &[u32]) -> Vec<u64> {
    words.iter().map(|&w| w as u64).collect()
}

/// Checks the statistics and the first page against `expected` (in the
/// table's order), and that the first rows and the statistics are on screen.
fn check_table(h: &Harness<'static, WeftApp>, field: &str, expected: &[(Vec<u32>, Vec<u32>)]) {
    let s = h.state();
    let t = s.sheet.table().unwrap();
    assert_eq!(t.key.field, field);
    assert_eq!(t.total as usize, expected.len());
    for c in 0..t.comps {
        let vals: Vec<f64> = expected
            .iter()
            .map(|(_, v)| gui::spreadsheet::as_f64(t.ty, v[c] as u64))
            .collect();
        let finite: Vec<f64> = vals.iter().copied().filter(|v| !v.is_nan()).collect();
        let min = finite.iter().copied().fold(f64::INFINITY, f64::min);
        let max = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let mean = finite.iter().sum::<f64>() / finite.len() as f64;
        let st = &t.stats[c];
        assert_eq!((st.min, st.max), (min, max), "{} component {}", field, c);
        assert!((st.mean - mean).abs() <= 1e-9 * mean.abs().max(1.0));
        assert_eq!(st.nans as usize, vals.len() - finite.len());
        for v in [min, max, mean] {
            assert!(
                !h.query_all_by_label(&format_stat(v))
                    .collect::<Vec<_>>()
                    .is_empty(),
                "statistic {} not shown",
                format_stat(v)
            );
        }
    }
    for (k, (idx, vals)) in expected.iter().take(PAGE_ROWS).enumerate() {
        let row = t.row(k);
        assert_eq!(&row.index, idx, "row {}", k);
        assert_eq!(row.values, wide(vals), "row {} of {}", k, field);
    }
    for (idx, vals) in expected.iter().take(5) {
        assert!(h.query_all_by_label(&format_index(idx)).next().is_some());
        for &w in vals {
            let text = format_value(t.ty, w as u64);
            assert!(
                h.query_all_by_label(&text).next().is_some(),
                "value {} not shown",
                text
            );
        }
    }
}

#[test]
fn dense_field_rows_and_statistics_follow_the_frames() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat.json");
    wait_for_sim(&mut h);
    show(&mut h, "T");
    let reads = h.state().sheet.reads;
    let sim = headless(&h, "heat.json", 0);
    check_table(&h, "T", &expected_elements(&sim, "T"));
    // Idle frames read nothing; a step reads once.
    h.run_steps(5);
    assert_eq!(h.state().sheet.reads, reads);
    h.get_by_label("Step").click();
    settle(&mut h);
    wait_current(&mut h);
    h.get_by_label("frame 1");
    assert_eq!(h.state().sheet.reads, reads + 1);
    let sim = headless(&h, "heat.json", 1);
    let mut expected = expected_elements(&sim, "T");
    check_table(&h, "T", &expected);
    // Sorting by value (header click): largest first on the second click.
    h.get_by_role_and_label(Role::Button, "T").click();
    wait_current(&mut h);
    h.get_by_role_and_label(Role::Button, "T ▲").click();
    wait_current(&mut h);
    assert_eq!(h.state().sheet.sort, Some((Column::Value(0), false)));
    expected.sort_by(|a, b| f32::from_bits(b.1[0]).total_cmp(&f32::from_bits(a.1[0])));
    let t = h.state().sheet.table().unwrap();
    for (k, e) in expected.iter().take(50).enumerate() {
        assert_eq!(t.row(k).values, wide(&e.1), "sorted row {}", k);
    }
    // A value range filter keeps exactly the elements in it.
    h.state_mut().sheet.filter = "0.5..".into();
    wait_current(&mut h);
    let kept = expected
        .iter()
        .filter(|e| f32::from_bits(e.1[0]) >= 0.5)
        .count();
    assert_eq!(h.state().sheet.table().unwrap().order.len(), kept);
    // A closed panel reads nothing.
    toggle_panel(&mut h);
    assert!(!h.state().sheet.open);
    let reads = h.state().sheet.reads;
    h.get_by_label("Step").click();
    h.run_steps(5);
    settle(&mut h);
    assert_eq!(h.state().sheet.reads, reads);
}

#[test]
fn quantized_field_shows_decoded_values_and_stored_bits() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat_quant.json");
    wait_for_sim(&mut h);
    h.get_by_label("Step").click();
    show(&mut h, "T");
    let sim = headless(&h, "heat_quant.json", 1);
    check_table(&h, "T", &expected_elements(&sim, "T"));
    let f = sim.field("T").unwrap();
    let Storage::Quant(q) = sim.program.fields[f].storage else {
        panic!("heat_quant's T is quantized");
    };
    let t = h.state().sheet.table().unwrap();
    assert_eq!(t.storage, q.name());
    // The stored bits decode to the value shown beside them.
    for k in 0..PAGE_ROWS {
        let r = t.row(k);
        assert_eq!(q.decode(r.codes[0]) as u64, r.values[0]);
    }
    h.get_by_role_and_label(Role::Button, "bits");
}

#[test]
fn sparse_field_lists_active_cells_with_their_block() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("sparse_blob.json");
    wait_for_sim(&mut h);
    h.get_by_label("Step").click();
    show(&mut h, "d");
    let sim = headless(&h, "sparse_blob.json", 1);
    let mut expected = expected_elements(&sim, "d");
    assert!(!expected.is_empty());
    // The table lists block by block; compare in index order.
    h.get_by_role_and_label(Role::Button, "index").click();
    wait_current(&mut h);
    expected.sort_by(|a, b| a.0.cmp(&b.0));
    check_table(&h, "d", &expected);
    let t = h.state().sheet.table().unwrap();
    let total: u64 = sim.program.fields[sim.field("d").unwrap()].cells();
    assert!(t.total < total, "only active cells are listed");
    // Each row's block is its 8 × 8 tile (the last sparse level, a
    // bitmasked node) numbered row-major over the 4096 / 8 tiles a side.
    let side = sim.program.fields[sim.field("d").unwrap()].shape[1] / 8;
    for k in 0..PAGE_ROWS.min(t.order.len()) {
        let r = t.row(k);
        assert_eq!(
            r.block,
            Some((r.index[0] / 8) as u64 * side as u64 + (r.index[1] / 8) as u64)
        );
    }
    h.get_by_role_and_label(Role::Button, "block");
}

#[test]
fn dynamic_lists_show_their_entries_per_list() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("particle_lists.json");
    wait_for_sim(&mut h);
    h.get_by_label("Step").click();
    show(&mut h, "members");
    let sim = headless(&h, "particle_lists.json", 1);
    // Entries are appended in thread order: compare each list as a set.
    let expected = expected_elements(&sim, "members");
    let mut want: Vec<(u32, i32)> = expected
        .iter()
        .map(|(i, v)| (i[0] / 32, v[0] as i32))
        .collect();
    let t = h.state().sheet.table().unwrap();
    assert_eq!(t.block_label, "list");
    let mut got: Vec<(u32, i32)> = (0..t.order.len())
        .map(|k| {
            let r = t.row(k);
            (r.block.unwrap() as u32, r.values[0] as i32)
        })
        .collect();
    want.sort();
    got.sort();
    assert_eq!(got, want);
    assert!(got.iter().all(|&(_, m)| m >= 0), "only appended entries");
    h.get_by_role_and_label(Role::Button, "list");
    // Vector fields get one column per component.
    show(&mut h, "pos");
    let sim = headless(&h, "particle_lists.json", 1);
    check_table(&h, "pos", &expected_elements(&sim, "pos"));
    h.get_by_role_and_label(Role::Button, "pos.0");
    h.get_by_role_and_label(Role::Button, "pos.1");
}

/// A click with `modifiers` on a node's title (drawn in graph space).
fn click_title(h: &mut Harness<'static, WeftApp>, node: &str, modifiers: Modifiers) {
    // The editor frames a new graph over its first frames: let it settle.
    h.run_steps(10);
    let at = h
        .get_by_label(&format!("{}  ·  field", node))
        .rect()
        .center();
    let p = h.state().canvas.graph_to_screen * egui::pos2(at.x, at.y);
    h.event(Event::PointerMoved(p));
    h.step();
    h.event(Event::ModifiersChanged(modifiers));
    for pressed in [true, false] {
        h.event(Event::PointerButton {
            pos: p,
            button: egui::PointerButton::Primary,
            pressed,
            modifiers,
        });
        h.step();
    }
    h.event(Event::ModifiersChanged(Modifiers::NONE));
    h.step();
}

/// Steps until the viewport runs a simulation newer than `generation`.
fn wait_rebuilt(h: &mut Harness<'static, WeftApp>, generation: u64) {
    for _ in 0..500 {
        h.step();
        if h.state().viewport.generation > generation && h.state().viewport.sim.is_some() {
            h.run_steps(3);
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("never recompiled: {:?}", h.state().viewport.error);
}

fn viewed(h: &Harness<'static, WeftApp>) -> Vec<String> {
    let sim = h.state().viewport.sim.as_ref().unwrap();
    sim.program
        .view_kernels
        .iter()
        .map(|v| v.node_id.clone())
        .collect()
}

#[test]
fn the_viewer_flag_shows_a_field_without_editing_the_graph() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat.json");
    wait_for_sim(&mut h);
    for _ in 0..3 {
        h.get_by_label("Step").click();
        h.run_steps(2);
        settle(&mut h);
    }
    let read_t = |h: &Harness<'static, WeftApp>| {
        let sim = h.state().viewport.sim.as_ref().unwrap();
        (sim.frame, sim.read_field(sim.field("T").unwrap()).unwrap())
    };
    let running = read_t(&h);
    assert_eq!(running.0, 3);
    let doc = h.state().model.doc.clone();
    let steps = h.state().model.undo_steps();
    assert!(!viewed(&h).contains(&"viewer-source".to_string()));
    // Ctrl+Shift+click on the field's title.
    let g = h.state().viewport.generation;
    click_title(&mut h, "source", Modifiers::COMMAND | Modifiers::SHIFT);
    assert_eq!(h.state().status, "viewing 'source' as an image");
    wait_rebuilt(&mut h, g);
    assert!(viewed(&h).contains(&"viewer-source".to_string()));
    // Only a view came: the simulation goes on from frame 3, T as it was.
    assert_eq!(read_t(&h), running);
    // The viewport shows its tile, the node its flag.
    h.get_by_label("viewer-source");
    h.get_by_label("⚑ viewed");
    // The image is the field's: heat's source has a hot spot on zeros.
    let images = h
        .state_mut()
        .viewport
        .sim
        .as_mut()
        .unwrap()
        .render_views()
        .unwrap();
    let (_, img) = images.iter().find(|(id, _)| id == "viewer-source").unwrap();
    let first = &img.rgba[..4];
    assert!(img.rgba.chunks(4).any(|p| p != first), "a flat image");
    // The document, its undo history and the saved file are unchanged.
    assert_eq!(h.state().model.doc, doc);
    assert_eq!(h.state().model.undo_steps(), steps);
    assert!(!h.state().model.dirty);
    let saved = std::env::temp_dir().join(format!("weft-viewer-{}.json", std::process::id()));
    h.state_mut().model.save_as(&saved).unwrap();
    let back = GraphDoc::load(&saved).unwrap();
    let _ = std::fs::remove_file(&saved);
    assert_eq!(
        back,
        GraphDoc::load(&root().join("graphs/heat.json")).unwrap()
    );
    assert!(back.node("viewer-source").is_none());
    // An edit recompiles; the flag stays.
    let g = h.state().viewport.generation;
    h.state_mut().model.push(gui::model::Command::SetParam {
        node: "view".into(),
        param: "colormap".into(),
        value: serde_json::json!("viridis"),
    });
    wait_rebuilt(&mut h, g);
    assert!(viewed(&h).contains(&"viewer-source".to_string()));
    // A click selects it; V: the view is gone.
    click_title(&mut h, "source", Modifiers::NONE);
    assert_eq!(h.state().selected.as_deref(), Some("source"));
    let g = h.state().viewport.generation;
    h.key_press(egui::Key::V);
    wait_rebuilt(&mut h, g);
    assert!(!viewed(&h).contains(&"viewer-source".to_string()));
    assert!(h.query_by_label("⚑ viewed").is_none());
}

#[test]
fn the_viewer_flag_picks_particles_or_a_histogram() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("particle_lists.json");
    wait_for_sim(&mut h);
    let g = h.state().viewport.generation;
    h.state_mut().toggle_viewer("pos");
    wait_rebuilt(&mut h, g);
    let sim = h.state().viewport.sim.as_ref().unwrap();
    assert!(sim.program.views.iter().any(|v| matches!(
        v,
        weft_ir::ir::View::Particles { node_id, .. } if node_id == "viewer-pos"
    )));
    h.get_by_label("viewer-pos");
    // A 1-axis i32 list has no image: a histogram of its values (and the
    // particles view goes, the flag being on one field at a time).
    let g = h.state().viewport.generation;
    h.state_mut().toggle_viewer("members");
    wait_rebuilt(&mut h, g);
    assert!(!viewed(&h).contains(&"viewer-pos".to_string()));
    assert!(viewed(&h).contains(&"viewer-members".to_string()));
    h.get_by_label("viewer-members");
    // Its bins count the list's values as the simulation holds them.
    h.get_by_label("Step").click();
    settle(&mut h);
    let sim = h.state().viewport.sim.as_ref().unwrap();
    let bins = sim
        .read_field(sim.field("viewer-members.bins").unwrap())
        .unwrap();
    let members = sheet_rows(sim, "members");
    assert_eq!(
        bins.iter().map(|&b| b as usize).sum::<usize>(),
        members,
        "every stored element is counted once"
    );
    // Unflagging it removes the view; the simulation keeps its frame.
    let frame = h.state().viewport.frame();
    let g = h.state().viewport.generation;
    h.state_mut().toggle_viewer("members");
    wait_rebuilt(&mut h, g);
    assert!(h.state().viewer.node.is_none());
    assert!(!viewed(&h).contains(&"viewer-members".to_string()));
    assert_eq!(h.state().viewport.frame(), frame);
}

#[test]
fn the_viewer_flag_shows_a_gradient() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat_inverse.json");
    wait_for_sim(&mut h);
    for _ in 0..2 {
        h.get_by_label("Step").click();
        settle(&mut h);
    }
    let frame = h.state().viewport.frame();
    // Without `grad: true` there is no gradient to show.
    h.state_mut().toggle_viewer("target.grad");
    assert!(h.state().viewer.node.is_none());
    assert!(
        h.state().status.contains("\"grad\": true"),
        "{}",
        h.state().status
    );
    let g = h.state().viewport.generation;
    h.state_mut().toggle_viewer("u0.grad");
    wait_rebuilt(&mut h, g);
    settle(&mut h);
    let sim = h.state().viewport.sim.as_ref().unwrap();
    let grad = sim.field("u0.grad").unwrap();
    assert!(sim.program.views.iter().any(|v| matches!(
        v,
        weft_ir::ir::View::Image { node_id, field, .. } if node_id == "viewer-u0-grad" && *field == grad
    )));
    // The state went on: same frame, and the gradient is the one the
    // optimize iterations left (not zero).
    assert_eq!(sim.frame, frame);
    let words = sim.read_field(grad).unwrap();
    assert!(words.iter().any(|&w| f32::from_bits(w) != 0.0));
    h.get_by_label("viewer-u0-grad");
    assert!(h.state().model.doc.node("viewer-u0-grad").is_none());
}

/// Elements the field holds as the runtime stores them (list members of
/// a dynamic field: every list's length), counted by the runtime's walk.
fn sheet_rows(sim: &weft_runtime::Simulation, field: &str) -> usize {
    let f = sim.field(field).unwrap();
    let root = weft_ir::ir::layout::root_of(&sim.program, sim.program.fields[f].layout);
    let words = sim.read_root(root).unwrap();
    let plan = weft_ir::ir::layout::AddressPlan::new(&sim.program, f);
    let shape = sim.program.fields[f].shape.clone();
    let mut n = 0;
    weft_runtime::memory::for_each_stored_element(&plan, &shape, &words, |_| n += 1);
    n
}

/// A click on a node's title (any kind): inspects it.
fn inspect(h: &mut Harness<'static, WeftApp>, node: &str, kind: &str) {
    h.run_steps(10);
    // Framing keeps text legible, so a large graph opens partly off
    // screen: bring the node into view as an artist would (F frames the
    // selection), then select it again by its title.
    h.state_mut().selected = Some(node.to_string());
    h.state_mut().canvas.nav = Some(gui::NavRequest::FrameSelected);
    h.run_steps(5);
    h.state_mut().selected = None;
    h.run_steps(2);
    let at = h
        .get_by_label(&format!("{}  ·  {}", node, kind))
        .rect()
        .center();
    let p = h.state().canvas.graph_to_screen * egui::pos2(at.x, at.y);
    h.event(Event::PointerMoved(p));
    h.step();
    for pressed in [true, false] {
        h.event(Event::PointerButton {
            pos: p,
            button: egui::PointerButton::Primary,
            pressed,
            modifiers: Modifiers::NONE,
        });
        h.step();
    }
    h.run_steps(3);
    assert_eq!(h.state().selected.as_deref(), Some(node));
}

#[test]
fn memory_readout_equals_the_runtime_and_warns_before_a_pool_is_full() {
    if !gpu_ok() {
        return;
    }
    use gui::memory_readout::bytes;
    use weft_ir::ir::layout::{memory_report, pool_in_use};
    let mut h = harness("sparse_blob.json");
    wait_for_sim(&mut h);
    h.get_by_label("Step").click();
    h.run_steps(3);
    settle(&mut h);
    inspect(&mut h, "blocks", "pointer");
    let sim = headless(&h, "sparse_blob.json", 1);
    let p = &sim.program;
    let (l, _) = p
        .layouts
        .iter()
        .find(|(_, n)| n.node_id == "blocks")
        .unwrap();
    let root = sim.read_root(root_of(p, l)).unwrap();
    let in_use = pool_in_use(p, l, &root);
    let capacity = p.layouts[l].pool.unwrap().capacity;
    assert!(in_use > 0);
    h.get_by_label(&format!(
        "{} blocks of {} in use ({:.1}%)",
        in_use,
        capacity,
        in_use as f64 * 100.0 / capacity as f64
    ));
    let m = memory_report(p, root_of(p, l));
    h.get_by_label_contains(&format!(
        "layout tree 'blocks': {}, dense equivalent {}",
        bytes(m.total_words * 4),
        bytes(m.dense_words * 4)
    ));
    // The same graph with a pool just big enough for its start (the
    // blocks the headless run has after `on_start`): above 90% it is a
    // warning in Problems, before anything runs out.
    assert!(h.query_by_label_contains("raise `capacity`").is_none());
    let start = headless(&h, "sparse_blob.json", 0);
    let n0 = pool_in_use(&start.program, l, &start.read_root(root_of(p, l)).unwrap());
    let g = h.state().viewport.generation;
    h.state_mut().model.push(gui::model::Command::SetParam {
        node: "blocks".into(),
        param: "capacity".into(),
        value: serde_json::json!(n0),
    });
    wait_rebuilt(&mut h, g);
    h.run_steps(3);
    let warning = format!(
        "blocks: {} of {} blocks in use (100%); raise `capacity` before it runs out",
        n0, n0
    );
    assert_eq!(
        h.state().memory.warnings(),
        vec![("blocks".to_string(), warning.clone())]
    );
    assert!(h.query_all_by_label(&warning).count() >= 1);
}

#[test]
fn quantized_fields_show_their_storage_and_savings() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat_quant.json");
    wait_for_sim(&mut h);
    inspect(&mut h, "T", "field");
    let sim = headless(&h, "heat_quant.json", 0);
    let f = &sim.program.fields[sim.field("T").unwrap()];
    let bits = f.element_bits();
    h.get_by_label(&format!(
        "{}: {} bits per element (f32 words: 32)",
        f.storage.name(),
        bits
    ));
    let bytes = gui::memory_readout::bytes;
    let stored = (f.cells() * bits).div_ceil(8);
    h.get_by_label_contains(&format!(
        "{} for {} elements instead of {}: {} saved",
        bytes(stored),
        f.cells(),
        bytes(f.cells() * 4),
        bytes(f.cells() * 4 - stored)
    ));
    // A field stored in words has no storage section.
    inspect(&mut h, "source", "field");
    assert!(h.query_by_label_contains("bits per element").is_none());
}

#[test]
fn a_quantized_field_is_compared_with_its_f32_twin_on_demand() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("heat_quant.json");
    wait_for_sim(&mut h);
    for _ in 0..3 {
        h.get_by_label("Step").click();
        settle(&mut h);
    }
    inspect(&mut h, "T", "field");
    h.get_by_label("Compare with an f32 twin").click();
    for _ in 0..2000 {
        h.step();
        if h.state().twins.results.contains_key("T") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let got = h.state().twins.results["T"].clone().unwrap();
    assert_eq!(got.frame, 3);
    // The reference: the graph written out in f32 by hand (no storage
    // params) run headless to frame 3, against the quantized run.
    let quantized = headless(&h, "heat_quant.json", 3);
    let mut doc: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("graphs/heat_quant.json")).unwrap(),
    )
    .unwrap();
    for n in doc["nodes"].as_array_mut().unwrap() {
        if let Some(p) = n.get_mut("params").and_then(|p| p.as_object_mut()) {
            p.remove("storage");
        }
    }
    let doc: GraphDoc = serde_json::from_value(doc).unwrap();
    let program = build_program(
        &doc,
        &BuildOptions {
            base_dir: root().join("graphs"),
        },
    )
    .unwrap();
    let mut twin = Simulation::new(
        program,
        &SimOptions {
            backend: quantized.backend().unwrap(),
            ..Default::default()
        },
    )
    .unwrap();
    twin.start().unwrap();
    for _ in 0..3 {
        twin.step_frame().unwrap();
    }
    let read = |s: &Simulation| -> Vec<f32> {
        s.read_field(s.field("T").unwrap())
            .unwrap()
            .into_iter()
            .map(f32::from_bits)
            .collect()
    };
    let (a, b) = (read(&quantized), read(&twin));
    let max = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs() as f64)
        .fold(0.0, f64::max);
    assert!(max > 0.0, "ufloat5m11 rounds heat's temperatures");
    assert_eq!(got.max_abs, max);
    assert_eq!(got.values, a.len());
    h.run_steps(3);
    h.get_by_label_contains(&format!("max |error| {:.3e}", max));
    // mpm_quant packs its fields (bit_struct, bit_array): its twin builds
    // with dense nodes in their place and every field in words.
    let mpm = GraphDoc::load(&root().join("graphs/mpm_quant.json")).unwrap();
    let twin = gui::quant_readout::twin_doc(&mpm).unwrap();
    let p = build_program(
        &twin,
        &BuildOptions {
            base_dir: root().join("graphs"),
        },
    )
    .unwrap();
    assert!(p
        .fields
        .iter()
        .all(|(_, f)| f.storage == weft_ir::ir::Storage::Word));
    let shapes = |p: &weft_ir::ir::Program| -> Vec<(String, Vec<u32>)> {
        p.fields
            .iter()
            .map(|(_, f)| (f.name.clone(), f.shape.clone()))
            .collect()
    };
    let quant = build_program(
        &mpm,
        &BuildOptions {
            base_dir: root().join("graphs"),
        },
    )
    .unwrap();
    // Every field keeps its shape (the packed-words field of the
    // bit_array is the only one the twin has no use for).
    let q = shapes(&quant);
    for f in shapes(&p) {
        assert!(q.contains(&f), "{:?}", f);
    }
    assert_eq!(shapes(&p).len(), q.len() - 1);
}

#[test]
fn hash_slots_in_use_equal_the_active_blocks_and_the_sheet_lists_them() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("hash_particles.json");
    wait_for_sim(&mut h);
    h.get_by_label("Step").click();
    h.run_steps(3);
    settle(&mut h);
    inspect(&mut h, "grid", "hash");
    // Independently: the distinct 8 × 8 tiles of the active elements the
    // runtime's table walk finds (what `weft run --dump` writes).
    let sim = headless(&h, "hash_particles.json", 1);
    let p = &sim.program;
    let f = sim.field("rho").unwrap();
    let root = sim.read_root(root_of(p, p.fields[f].layout)).unwrap();
    let (coords, _) = weft_runtime::memory::table_elements(p, f, &root).unwrap();
    let mut tiles: Vec<(u32, u32)> = coords.chunks(2).map(|c| (c[0] / 8, c[1] / 8)).collect();
    tiles.sort();
    tiles.dedup();
    let capacity = 8192;
    assert!(!tiles.is_empty());
    h.get_by_label(&format!(
        "{} slots of {} in use ({:.1}%)",
        tiles.len(),
        capacity,
        tiles.len() as f64 * 100.0 / capacity as f64
    ));
    // The spreadsheet lists those elements (never the 2^34-cell domain).
    show(&mut h, "rho");
    let t = h.state().sheet.table().unwrap();
    assert_eq!(t.total as usize, coords.len() / 2);
}

#[test]
fn dynamic_lists_show_their_lengths_and_warn_before_a_list_is_full() {
    if !gpu_ok() {
        return;
    }
    let mut h = harness("particle_lists.json");
    wait_for_sim(&mut h);
    h.get_by_label("Step").click();
    settle(&mut h);
    inspect(&mut h, "bucket", "dynamic");
    // Independently: the `bin` kernel appends every particle to the list of
    // the 32 × 32 grid cell its position falls in (a list holds 32).
    let sim = headless(&h, "particle_lists.json", 1);
    let pos = sim.read_field(sim.field("pos").unwrap()).unwrap();
    let mut counts = vec![0u64; 1024];
    for q in pos.chunks(2) {
        let c = |w: u32| ((f32::from_bits(w) * 32.0) as i32).clamp(0, 31) as usize;
        counts[c(q[0]) * 32 + c(q[1])] += 1;
    }
    let elements: u64 = counts.iter().map(|&c| c.min(32)).sum();
    let longest = counts.iter().max().copied().unwrap().min(32);
    assert!(elements > 0 && longest > 1);
    h.get_by_label(&format!(
        "{} of {} elements in use over 1024 lists ({:.1}%)",
        elements,
        1024 * 32,
        elements as f64 * 100.0 / (1024.0 * 32.0)
    ));
    h.get_by_label(&format!(
        "longest list: {} of 32 ({:.1}%)",
        longest,
        longest as f64 * 100.0 / 32.0
    ));
    assert!(h
        .query_by_label_contains("before an append to a full list")
        .is_none());
    // Lists exactly as long as the longest one: after a frame that list is
    // full, a warning in Problems before appends are lost.
    let g = h.state().viewport.generation;
    h.state_mut().model.push(gui::model::Command::SetParam {
        node: "bucket".into(),
        param: "shape".into(),
        value: serde_json::json!([longest]),
    });
    wait_rebuilt(&mut h, g);
    h.get_by_label("Step").click();
    settle(&mut h);
    h.run_steps(3);
    let warning = format!(
        "bucket: the longest list holds {} of {} elements (100%); raise the node's `shape` before an append to a full list stops the run",
        longest, longest
    );
    assert_eq!(
        h.state().memory.warnings(),
        vec![("bucket".to_string(), warning.clone())]
    );
    assert!(h.query_all_by_label(&warning).count() >= 1);
}
