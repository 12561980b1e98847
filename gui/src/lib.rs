//! The Weft editor as a library: the desktop app (`app/`, the `weft`
//! binary) opens it in a window, the web build (`web/`) on a page's canvas.
//! Everything that differs between the two lives in `gui::platform`.

pub mod gui;
