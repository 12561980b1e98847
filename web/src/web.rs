//! The browser side: eframe's web runner on the page's canvas, the page's
//! URL read as a request, graphs fetched from relative URLs, and the test
//! hook `window.weft_test`.
//!
//! URL parameters: `graph=` a shipped example's name or a relative URL of a
//! graph file (its `.npy` files are fetched from beside it), `backend=`
//! `wgpu` or `vm`, `set=NODE.PARAM=VALUE` (repeatable, as `weft run --set`),
//! `test=frames:N`. In test mode the page runs N frames, reads every field
//! back (but one too large to read whole, a hash root's domain) and sets `window.weft_test` to `{status: "done", backend, device,
//! frames, fields: [{name, float, base64}]}` (little-endian u32 words in
//! logical order, as `weft run --dump` writes them), or to `{status:
//! "error", error}`; it is `{status: "running"}` until then.

use crate::app::{example_path, provide_shipped, Request, TestOutcome, WebApp, EXAMPLES};
use crate::editor::Editor;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use weft_runtime::wgpu_backend::WgpuContext;
use weft_runtime::Backend;

#[wasm_bindgen(start)]
pub fn start() {
    wasm_bindgen_futures::spawn_local(async {
        if let Err(e) = run().await {
            publish_error(&e);
            show_error(&e);
        }
    });
}

async fn run() -> Result<(), String> {
    // eframe's and wgpu's messages go to the browser's console.
    let _ = eframe::WebLogger::init(log::LevelFilter::Info);
    provide_shipped();
    set_test(&status("running"));
    let window = web_sys::window().ok_or("no window")?;
    let search = window.location().search().map_err(js)?;
    let request = request(&search).await?;
    let canvas = window
        .document()
        .ok_or("no document")?
        .get_element_by_id("weft_canvas")
        .ok_or("the page has no canvas 'weft_canvas'")?
        .dyn_into::<web_sys::HtmlCanvasElement>()
        .map_err(|_| "'weft_canvas' is not a canvas")?;
    let gpu = open_webgpu().await;
    if let Err(why) = &gpu {
        web_sys::console::warn_1(&format!("no WebGPU: {}", why).into());
    }
    let options = eframe::WebOptions {
        wgpu_options: wgpu_options(),
        ..Default::default()
    };
    eframe::WebRunner::new()
        .start(
            canvas,
            options,
            Box::new(move |_cc| {
                let page: Box<dyn eframe::App> = if request.editor {
                    Box::new(EditorPage {
                        editor: Editor::new(gpu, request.graph.clone(), &request.sets)?,
                    })
                } else {
                    Box::new(Page {
                        app: WebApp::new(gpu, request),
                    })
                };
                Ok(page)
            }),
        )
        .await
        .map_err(js)
}

/// The simulation's own WebGPU device (see `app.rs` on why not egui's),
/// with the adapter's limits (storage buffers as large as it allows).
async fn open_webgpu() -> Result<Arc<WgpuContext>, String> {
    if !wgpu::util::is_browser_webgpu_supported().await {
        return Err("this browser has no WebGPU: graphs run on the vm".into());
    }
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = wgpu::Backends::BROWSER_WEBGPU;
    let instance = wgpu::Instance::new(desc);
    let adapter = instance
        .request_adapter(&wgpu::RequestAdapterOptions::default())
        .await
        .map_err(|e| format!("no WebGPU adapter: {}", e))?;
    let (device, queue) = adapter
        .request_device(&wgpu::DeviceDescriptor {
            label: Some("weft"),
            required_limits: adapter.limits(),
            ..Default::default()
        })
        .await
        .map_err(|e| format!("cannot open the WebGPU device: {}", e))?;
    Ok(Arc::new(WgpuContext::from_shared(&adapter, device, queue)))
}

/// egui draws through WebGL2: a WebGPU canvas cannot be presented in
/// headless Chromium, and the simulation's device must not depend on it.
fn wgpu_options() -> eframe::egui_wgpu::WgpuConfiguration {
    use eframe::egui_wgpu::{WgpuConfiguration, WgpuSetup, WgpuSetupCreateNew};
    let mut setup = WgpuSetupCreateNew::without_display_handle();
    setup.instance_descriptor.backends = wgpu::Backends::GL;
    WgpuConfiguration {
        wgpu_setup: WgpuSetup::CreateNew(setup),
        ..Default::default()
    }
}

/// The page's request from its query string.
async fn request(search: &str) -> Result<Request, String> {
    let mut r = Request {
        graph: example_path("heat"),
        ..Default::default()
    };
    let mut ui = None;
    for pair in search
        .trim_start_matches('?')
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let v: String = js_sys::decode_uri_component(&v.replace('+', " "))
            .map_err(js)?
            .into();
        match k {
            "graph" if EXAMPLES.contains(&v.as_str()) => r.graph = example_path(&v),
            "graph" => r.graph = fetch_graph(&v).await?,
            "backend" => {
                r.backend = Some(match Backend::parse(&v) {
                    Some(b) if b.spec().unavailable().is_none() => b,
                    _ => {
                        let offered: Vec<&str> = weft_runtime::backend::all()
                            .into_iter()
                            .filter(|s| s.unavailable().is_none())
                            .map(|s| s.name())
                            .collect();
                        return Err(format!(
                            "backend '{}': in the browser, {}",
                            v,
                            offered.join(" or ")
                        ));
                    }
                })
            }
            "set" => r.sets.push(v),
            "ui" => match v.as_str() {
                "editor" => ui = Some(true),
                "viewer" => ui = Some(false),
                _ => return Err(format!("ui '{}': editor or viewer", v)),
            },
            "test" => {
                let n = v
                    .strip_prefix("frames:")
                    .and_then(|n| n.parse::<i32>().ok())
                    .filter(|n| *n >= 0)
                    .ok_or_else(|| format!("test '{}': expected frames:N", v))?;
                r.test_frames = Some(n);
            }
            _ => {
                return Err(format!(
                    "unknown URL parameter '{}' (graph, backend, set, test, ui)",
                    k
                ))
            }
        }
    }
    // The editor unless a test run asks for the plain viewer.
    r.editor = ui.unwrap_or(r.test_frames.is_none());
    if r.editor && r.test_frames.is_some() {
        return Err(
            "test=frames:N runs in the viewer (ui=viewer); the editor's hook is window.weft_editor"
                .into(),
        );
    }
    if r.editor && r.backend.is_some() {
        return Err("backend=: the editor's backend is chosen in its viewport".into());
    }
    Ok(r)
}

/// Fetches a graph and the `.npy` and mesh files it names (relative to it) and
/// provides them under `/weft/url/`, so the builder reads them as files.
async fn fetch_graph(url: &str) -> Result<PathBuf, String> {
    if url.contains("://") || url.starts_with('/') || url.split('/').any(|s| s == "..") {
        return Err(format!(
            "graph '{}': give a shipped example ({}) or a relative URL below the page",
            url,
            EXAMPLES.join(", ")
        ));
    }
    let text = fetch(url).await?;
    let path = Path::new("/weft/url").join(url);
    let dir = path
        .parent()
        .unwrap_or(Path::new("/weft/url"))
        .to_path_buf();
    let url_dir = url.rsplit_once('/').map_or("", |(d, _)| d);
    let doc: serde_json::Value =
        serde_json::from_slice(&text).map_err(|e| format!("graph '{}': {}", url, e))?;
    let mut npys = Vec::new();
    collect_npy(&doc, &mut npys);
    for n in npys {
        let at = if url_dir.is_empty() {
            n.clone()
        } else {
            format!("{}/{}", url_dir, n)
        };
        let bytes = fetch(&at).await?;
        weft_ir::io::provided::provide(dir.join(&n), bytes);
    }
    weft_ir::io::provided::provide(path.clone(), text);
    Ok(path)
}

fn collect_npy(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(o) => {
            if let Some(serde_json::Value::String(s)) = o.get("npy") {
                out.push(s.clone());
            }
            // A `mesh` node's file.
            if o.get("kind").and_then(|k| k.as_str()) == Some("mesh") {
                if let Some(f) = o
                    .get("params")
                    .and_then(|p| p.get("file"))
                    .and_then(|f| f.as_str())
                {
                    out.push(f.to_string());
                }
            }
            o.values().for_each(|x| collect_npy(x, out));
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_npy(x, out)),
        _ => {}
    }
}

async fn fetch(url: &str) -> Result<Vec<u8>, String> {
    let window = web_sys::window().ok_or("no window")?;
    let resp: web_sys::Response = wasm_bindgen_futures::JsFuture::from(window.fetch_with_str(url))
        .await
        .map_err(|e| format!("cannot fetch {}: {}", url, js(e)))?
        .dyn_into()
        .map_err(js)?;
    if !resp.ok() {
        return Err(format!("cannot fetch {}: HTTP {}", url, resp.status()));
    }
    let buf = wasm_bindgen_futures::JsFuture::from(resp.array_buffer().map_err(js)?)
        .await
        .map_err(js)?;
    Ok(js_sys::Uint8Array::new(&buf).to_vec())
}

/// The app, and the test hook it reports to.
struct Page {
    app: WebApp,
}

impl eframe::App for Page {
    fn ui(&mut self, ui: &mut egui::Ui, frame: &mut eframe::Frame) {
        self.app.ui(ui, frame);
        match self.app.take_outcome() {
            Some(TestOutcome::Done {
                backend,
                device,
                frames,
                fields,
            }) => {
                let o = status("done");
                let list = js_sys::Array::new();
                for f in fields {
                    let e = js_sys::Object::new();
                    set(&e, "name", &f.name.into());
                    set(&e, "float", &f.float.into());
                    let bytes: Vec<u8> = f.words.iter().flat_map(|w| w.to_le_bytes()).collect();
                    set(&e, "base64", &base64(&bytes).into());
                    list.push(&e);
                }
                set(&o, "backend", &backend.into());
                set(&o, "device", &device.into());
                set(&o, "frames", &frames.into());
                set(&o, "fields", &list);
                set_test(&o);
            }
            Some(TestOutcome::Failed(e)) => publish_error(&e),
            None => {
                if let Some(w) = web_sys::window() {
                    if let Ok(t) = js_sys::Reflect::get(&w, &"weft_test".into()) {
                        if js_sys::Reflect::get(&t, &"status".into())
                            .ok()
                            .and_then(|s| s.as_string())
                            .as_deref()
                            == Some("running")
                        {
                            set(&t, "progress", &self.app.progress().into());
                        }
                    }
                }
            }
        }
    }
}

/// The editor, and its hook: `window.weft_editor` is the editor's report
/// (`Editor::report`) plus `fields` read back (`[{name, float, base64}]`),
/// refreshed every frame; commands pushed onto `window.weft_commands` are
/// taken each frame (`Editor::command`), their errors reported in
/// `weft_editor.errors`.
struct EditorPage {
    editor: Editor,
}

impl eframe::App for EditorPage {
    fn ui(&mut self, ui: &mut egui::Ui, frame: &mut eframe::Frame) {
        let Some(w) = web_sys::window() else { return };
        if let Ok(list) = js_sys::Reflect::get(&w, &"weft_commands".into()) {
            if list.is_object() {
                // A script drives the page through the hook: look for its
                // commands at least every 50 ms. An idle egui page draws only
                // on input, so a command pushed after the last repaint (File >
                // Save As once a run and its reads were done) could wait for
                // ever. Pages nobody drives never set `weft_commands`.
                ui.ctx()
                    .request_repaint_after(std::time::Duration::from_millis(50));
                set(&w, "weft_commands", &js_sys::Array::new());
                for c in js_sys::Array::from(&list).iter() {
                    let text = js_sys::JSON::stringify(&c)
                        .ok()
                        .and_then(|t| t.as_string())
                        .unwrap_or_default();
                    let r = serde_json::from_str(&text)
                        .map_err(|e| e.to_string())
                        .and_then(|c| self.editor.command(&c));
                    if let Err(e) = r {
                        web_sys::console::error_1(&e.clone().into());
                        FIELDS.with(|f| f.borrow_mut().1.push(e));
                    }
                }
            }
        }
        eframe::App::ui(&mut self.editor, ui, frame);
        let mut report = self.editor.report();
        FIELDS.with(|f| {
            let mut f = f.borrow_mut();
            for r in self.editor.take_fields() {
                let bytes: Vec<u8> = r.words.iter().flat_map(|w| w.to_le_bytes()).collect();
                f.0.push(
                    serde_json::json!({"name": r.name, "float": r.float, "base64": base64(&bytes)}),
                );
            }
            report["fields"] = serde_json::Value::Array(f.0.clone());
            if let Some(errors) = report["errors"].as_array_mut() {
                errors.extend(f.1.iter().map(|e| serde_json::Value::String(e.clone())));
            }
        });
        if let Ok(o) = js_sys::JSON::parse(&report.to_string()) {
            set(&w, "weft_editor", &o);
        }
    }
}

thread_local! {
    /// The fields read back and the hook's command errors, kept for the report.
    static FIELDS: std::cell::RefCell<(Vec<serde_json::Value>, Vec<String>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

fn status(s: &str) -> js_sys::Object {
    let o = js_sys::Object::new();
    set(&o, "status", &s.into());
    o
}

fn publish_error(e: &str) {
    web_sys::console::error_1(&e.into());
    let o = status("error");
    set(&o, "error", &e.into());
    set_test(&o);
}

fn show_error(e: &str) {
    if let Some(el) = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.get_element_by_id("weft_error"))
    {
        el.set_text_content(Some(e));
    }
}

fn set_test(o: &js_sys::Object) {
    if let Some(w) = web_sys::window() {
        set(&w, "weft_test", o);
    }
}

fn set(target: &JsValue, key: &str, value: &JsValue) {
    let _ = js_sys::Reflect::set(target, &key.into(), value);
}

fn js(e: JsValue) -> String {
    e.as_string().unwrap_or_else(|| format!("{:?}", e))
}

fn base64(bytes: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                s.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}
