//! What differs between the desktop app and the editor in a browser page
//! (wasm32, `web/`): the one place in the editor that knows which it is.
//!
//! The browser has one thread, no file system and no native dialogs. So
//! here background work runs at once on the calling thread (`spawn`), a
//! graph is opened through the page's file picker (`start_open`, then
//! `take_opened` on a later frame) and saved by downloading it
//! (`write_graph`), and features that need a file system, a process or the
//! Cranelift JIT are shown disabled with the reason `unavailable` gives.

use std::path::{Path, PathBuf};
use weft_ir::graph::GraphDoc;

/// Whether the editor runs in a browser page.
pub const IN_BROWSER: bool = cfg!(target_arch = "wasm32");

/// `std::time::Instant` natively; the page's clock in a browser, where
/// `std`'s panics.
pub use web_time::Instant;

/// Time since 1970 (the page's clock in a browser, where `std`'s panics).
pub fn unix_time() -> std::time::Duration {
    web_time::SystemTime::now()
        .duration_since(web_time::UNIX_EPOCH)
        .unwrap_or_default()
}

/// This process's id; 0 in a page, where `std::process::id` panics.
pub fn process_id() -> u32 {
    if IN_BROWSER {
        0
    } else {
        std::process::id()
    }
}

/// A feature of the desktop app that a browser page cannot have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feature {
    /// Bake frames into a folder (GRAPH.cache/).
    Bake,
    /// Parameter sweeps: a process per variant, or a Slurm job array.
    Sweep,
    /// PLY, VDB and USD files written into a folder.
    Export,
    /// The timeline's frames evicted from memory, written to disk.
    SpillToDisk,
    /// File > Render…: a movie (ffmpeg, a process) or PNGs in a folder.
    Render,
}

/// Why `f` is disabled here, in one line (`None`: it works).
pub fn unavailable(f: Feature) -> Option<&'static str> {
    if !IN_BROWSER {
        return None;
    }
    Some(match f {
        Feature::Bake => "baking writes frames into a folder: a browser page has no file system",
        Feature::Sweep => "sweeps run weft processes or Slurm jobs: a browser page starts none",
        Feature::Export => "export writes files into a folder: a browser page has no file system",
        Feature::SpillToDisk => "a browser page has no disk: frames stay in memory",
        Feature::Render => {
            "a render writes a movie or PNG files: a browser page has no file system"
        }
    })
}

pub use imp::{
    pick_file, save_file, scratch_dir, set_title, spawn, start_open, take_opened, temp_dir,
    write_file, write_graph,
};

/// The desktop app's window (`weft gui`); a page starts the editor from
/// `web/` instead.
// Unused where the app's tests include the editor's source by path.
#[cfg(not(target_arch = "wasm32"))]
#[allow(unused_imports)]
pub use imp::run;

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use super::*;

    pub fn run(opts: super::super::GuiOptions) -> i32 {
        let status = opts.exit_status.clone();
        let native = eframe::NativeOptions {
            renderer: eframe::Renderer::Wgpu,
            viewport: egui::ViewportBuilder::default()
                .with_inner_size([1400.0, 860.0])
                .with_title("Weft"),
            wgpu_options: wgpu_options(),
            ..Default::default()
        };
        let r = eframe::run_native(
            "Weft",
            native,
            Box::new(move |cc| {
                Ok(Box::new(super::super::WeftApp::new(
                    cc.wgpu_render_state.as_ref(),
                    opts,
                )))
            }),
        );
        match r {
            Ok(()) => status.load(std::sync::atomic::Ordering::Relaxed),
            Err(e) => {
                eprintln!("error: cannot open the window: {}", e);
                1
            }
        }
    }

    /// The window's device is the simulation's too (`Viewport` shares it):
    /// ask for what the headless device gets (`WgpuContext::new`) where the
    /// adapter has it — 64-bit shader values, f32 atomics, timestamps,
    /// subgroups (llvmpipe's loop trip count) — and
    /// the adapter's limits (large fields), keeping egui's texture size.
    fn wgpu_options() -> eframe::egui_wgpu::WgpuConfiguration {
        let mut cfg = eframe::egui_wgpu::WgpuConfiguration::default();
        if let eframe::egui_wgpu::WgpuSetup::CreateNew(setup) = &mut cfg.wgpu_setup {
            setup.device_descriptor = std::sync::Arc::new(|adapter| {
                let wanted = wgpu::Features::SHADER_F64
                    | wgpu::Features::SHADER_INT64
                    | wgpu::Features::SHADER_FLOAT32_ATOMIC
                    | wgpu::Features::TIMESTAMP_QUERY
                    | wgpu::Features::SUBGROUP;
                // egui's own choice on GL (and its 8192 textures there).
                let required_limits = if adapter.get_info().backend == wgpu::Backend::Gl {
                    wgpu::Limits {
                        max_texture_dimension_2d: 8192,
                        ..wgpu::Limits::downlevel_webgl2_defaults()
                    }
                } else {
                    adapter.limits()
                };
                wgpu::DeviceDescriptor {
                    label: Some("weft window"),
                    required_features: adapter.features() & wanted,
                    required_limits,
                    ..Default::default()
                }
            });
        }
        cfg
    }

    /// Runs `f` on a thread of its own.
    pub fn spawn<F: FnOnce() + Send + 'static>(name: &str, f: F) -> std::io::Result<()> {
        std::thread::Builder::new()
            .name(name.into())
            .spawn(f)
            .map(|_| ())
    }

    /// The platform's open dialog (blocks until it closes).
    pub fn pick_file(filter: &str, dir: &Path) -> Option<PathBuf> {
        rfd::FileDialog::new()
            .add_filter(filter, &["json"])
            .set_directory(dir)
            .pick_file()
    }

    /// The platform's save dialog (blocks until it closes).
    pub fn save_file(dir: &Path, name: &str) -> Option<PathBuf> {
        rfd::FileDialog::new()
            .add_filter("Weft graph", &["json"])
            .set_directory(dir)
            .set_file_name(name)
            .save_file()
    }

    pub fn temp_dir() -> PathBuf {
        std::env::temp_dir()
    }

    /// The window's title.
    pub fn set_title(ctx: &egui::Context, title: &str) {
        ctx.send_viewport_cmd(egui::ViewportCommand::Title(title.to_string()));
    }

    /// A folder of this process's own under the temporary folder.
    pub fn scratch_dir(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("{}-{}", name, std::process::id()))
    }

    /// Natively the dialogs answer at once (`pick_file`): nothing to start.
    pub fn start_open() -> bool {
        false
    }

    pub fn take_opened() -> Option<PathBuf> {
        None
    }

    /// Writes atomically (write, then rename): settings, recent files,
    /// the recovery file.
    pub fn write_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        weft_ir::io::write_atomic(path, bytes)
    }

    /// Saves atomically (write, then rename).
    pub fn write_graph(doc: &GraphDoc, path: &Path) -> std::io::Result<()> {
        doc.save_atomic(path)
    }
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use super::*;
    use std::cell::RefCell;
    use wasm_bindgen::prelude::*;
    use wasm_bindgen::JsCast;

    /// Where files the user opens are provided (`weft_ir::io::provided`).
    const OPENED_DIR: &str = "/weft/opened";

    thread_local! {
        static OPENED: RefCell<Option<PathBuf>> = const { RefCell::new(None) };
    }

    /// One thread: `f` runs now, and its channel holds the answer when the
    /// caller next looks.
    pub fn spawn<F: FnOnce() + Send + 'static>(_name: &str, f: F) -> std::io::Result<()> {
        f();
        Ok(())
    }

    /// The page's title (the tab's name): eframe leaves a page's title alone.
    pub fn set_title(_ctx: &egui::Context, title: &str) {
        if let Some(d) = web_sys::window().and_then(|w| w.document()) {
            d.set_title(title);
        }
    }

    /// `std`'s `temp_dir` and process id panic in a browser page; nothing
    /// is written to these paths there (writes fail, as the page has no
    /// file system), they only need to be unique.
    pub fn temp_dir() -> PathBuf {
        PathBuf::from("/weft/tmp")
    }

    pub fn scratch_dir(name: &str) -> PathBuf {
        temp_dir().join(name)
    }

    /// Opening goes through `start_open`: no dialog answers at once here.
    pub fn pick_file(_filter: &str, _dir: &Path) -> Option<PathBuf> {
        None
    }

    /// A save "path" in the page is the downloaded file's name; the graph
    /// is also kept under it, so that it opens again in this page.
    pub fn save_file(_dir: &Path, name: &str) -> Option<PathBuf> {
        Some(Path::new("/weft/saved").join(name))
    }

    /// Opens the browser's file picker (an `<input type=file>`): a graph,
    /// with its `.npy` files when it names some. The files are provided
    /// under /weft/opened/ and the graph's path is handed over by
    /// `take_opened` on a later frame.
    pub fn start_open() -> bool {
        let Some(doc) = web_sys::window().and_then(|w| w.document()) else {
            return false;
        };
        let Ok(input) = doc
            .create_element("input")
            .map(|e| e.unchecked_into::<web_sys::HtmlInputElement>())
        else {
            return false;
        };
        input.set_type("file");
        // A graph and the `.npy` files it names, picked together, land in
        // one folder, where the builder finds them beside the graph.
        input.set_multiple(true);
        input.set_accept(".json,.npy,application/json");
        let picked = input.clone();
        let on_change = Closure::once_into_js(move || {
            let Some(list) = picked.files() else { return };
            let files: Vec<web_sys::File> =
                (0..list.length()).filter_map(|i| list.get(i)).collect();
            wasm_bindgen_futures::spawn_local(async move {
                let mut graph = None;
                for file in files {
                    let name = file.name();
                    let Ok(buf) = wasm_bindgen_futures::JsFuture::from(file.array_buffer()).await
                    else {
                        continue;
                    };
                    let path = Path::new(OPENED_DIR).join(&name);
                    weft_ir::io::provided::provide(
                        path.clone(),
                        js_sys::Uint8Array::new(&buf).to_vec(),
                    );
                    if graph.is_none() && name.ends_with(".json") {
                        graph = Some(path);
                    }
                }
                if let Some(path) = graph {
                    OPENED.with(|o| *o.borrow_mut() = Some(path));
                }
            });
        });
        input.set_onchange(Some(on_change.unchecked_ref()));
        input.click();
        true
    }

    /// The file the page's picker opened, once.
    pub fn take_opened() -> Option<PathBuf> {
        OPENED.with(|o| o.borrow_mut().take())
    }

    /// The page has no file system: what the editor keeps (settings,
    /// recent files, the recovery file) is kept in memory for the page's
    /// life (`weft_ir::io::provided`).
    pub fn write_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        weft_ir::io::provided::provide(path.to_path_buf(), bytes.to_vec());
        Ok(())
    }

    /// Downloads the graph as its file name (a Blob and a link clicked),
    /// and keeps it under `path` for this page.
    pub fn write_graph(doc: &GraphDoc, path: &Path) -> std::io::Result<()> {
        let text = doc.to_json();
        weft_ir::io::provided::provide(path.to_path_buf(), text.clone().into_bytes());
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "graph.json".into());
        download(&name, &text).map_err(|e| std::io::Error::other(format!("download: {}", e)))
    }

    fn download(name: &str, text: &str) -> Result<(), String> {
        let js = |e: JsValue| e.as_string().unwrap_or_else(|| format!("{:?}", e));
        let doc = web_sys::window()
            .and_then(|w| w.document())
            .ok_or("no document")?;
        let parts = js_sys::Array::of1(&JsValue::from_str(text));
        let opts = web_sys::BlobPropertyBag::new();
        opts.set_type("application/json");
        let blob = web_sys::Blob::new_with_str_sequence_and_options(&parts, &opts).map_err(js)?;
        let url = web_sys::Url::create_object_url_with_blob(&blob).map_err(js)?;
        let a: web_sys::HtmlAnchorElement = doc.create_element("a").map_err(js)?.unchecked_into();
        a.set_href(&url);
        a.set_download(name);
        // The URL stays valid for the page's life: revoking it at once
        // can cancel the download before the browser has read it.
        a.click();
        Ok(())
    }
}
