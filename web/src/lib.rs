//! weft-web: Weft in a browser tab. The page (`app.rs`) runs a graph on
//! WebGPU through the wgpu backend, or on the VM where WebGPU is missing,
//! and shows its views; `web.rs` starts it from the page's URL and holds
//! the test hook. Build and serve: README, "In the browser".

pub mod app;
#[cfg(target_arch = "wasm32")]
mod web;
