//! Plumbing shared by the test crates that run the `weft` binary as a
//! user does (`cli`, `sweep`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `weft ARGS` in the repository root.
pub fn weft(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("weft runs")
}

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A fresh, empty temporary folder of this test crate and process.
pub fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "weft-{}-{}-{}",
        env!("CARGO_CRATE_NAME"),
        name,
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A run's stdout and stderr together.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
