//! weft-web: Weft in a browser tab. The page opens the editor (`editor.rs`:
//! the desktop app's, from `weft-gui`) or, for the `test=` runs, a plain
//! viewer (`app.rs`); either runs graphs on WebGPU through the wgpu
//! backend, or on the VM where WebGPU is missing. `web.rs` starts the page
//! from its URL and holds the test hooks. Build and serve: README, "In the
//! browser".

pub mod app;
pub mod editor;
#[cfg(target_arch = "wasm32")]
mod web;
