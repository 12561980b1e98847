//! Window layout remembered between sessions: the inspector's width and
//! the viewport's (where its divider with the node editor is), in `layout.json` in the configuration folder,
//! with the frame cache's settings, how many backups a save keeps and the
//! backend last chosen in the viewport's toolbar.

use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Prefs {
    /// The inspector's width (the right-hand panel).
    pub side_width: f32,
    /// The viewport's width: the split against the node editor; 0 until
    /// the user moves it (the viewport then takes half the room).
    pub viewport_width: f32,
    /// The timeline's frame cache: memory budget (MiB) and whether frames
    /// evicted from memory spill to a disk cache folder.
    pub frame_cache_mb: u32,
    pub spill_frames: bool,
    /// How many earlier versions of a graph a save keeps in `backup/`
    /// beside it (`backup.rs`); 0 keeps none.
    pub backups_on_save: u32,
    /// The backend last picked in the viewport's chooser (its registry
    /// name); the next start takes it when this machine still offers it.
    pub backend: Option<String>,
    /// Last time the sizes were written (s, app clock); not saved.
    #[serde(skip)]
    written_at: f64,
    #[serde(skip)]
    dirty: bool,
}

impl Default for Prefs {
    fn default() -> Prefs {
        Prefs {
            side_width: 280.0,
            viewport_width: 0.0,
            frame_cache_mb: super::frame_cache::DEFAULT_BUDGET_MB,
            spill_frames: false,
            backups_on_save: 5,
            backend: None,
            written_at: f64::NEG_INFINITY,
            dirty: false,
        }
    }
}

const FILE: &str = "layout.json";

impl Prefs {
    /// The remembered sizes, or the defaults when there are none (or they are unreadable).
    pub fn load(config: &Path) -> Prefs {
        std::fs::read_to_string(config.join(FILE))
            .ok()
            .and_then(|t| serde_json::from_str::<Prefs>(&t).ok())
            .filter(|p| p.side_width.is_finite() && p.viewport_width.is_finite())
            .unwrap_or_default()
    }

    /// Takes the frame cache's settings (written with the sizes).
    pub fn set_frame_cache(&mut self, mb: u32, spill: bool) {
        self.frame_cache_mb = mb;
        self.spill_frames = spill;
        self.dirty = true;
    }

    /// Takes the backend picked in the chooser (written with the sizes).
    pub fn set_backend(&mut self, name: &str) {
        if self.backend.as_deref() != Some(name) {
            self.backend = Some(name.to_string());
            self.dirty = true;
        }
    }

    /// Takes this frame's sizes; writes them (atomically, at most once a
    /// second) once they have changed.
    pub fn note(&mut self, side_width: f32, viewport_width: f32, config: &Path, now: f64) {
        if (side_width - self.side_width).abs() > 0.5
            || (viewport_width - self.viewport_width).abs() > 0.5
        {
            self.side_width = side_width;
            self.viewport_width = viewport_width;
            self.dirty = true;
        }
        if self.dirty && now - self.written_at > 1.0 {
            self.written_at = now;
            self.dirty = false;
            let _ = std::fs::create_dir_all(config);
            if let Ok(text) = serde_json::to_string_pretty(self) {
                let _ = super::platform::write_file(&config.join(FILE), text.as_bytes());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_sizes_are_written_and_read_back() {
        let dir = std::env::temp_dir().join(format!("weft-prefs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut p = Prefs::load(&dir);
        assert_eq!(p, Prefs::default(), "nothing saved yet");
        p.note(p.side_width, p.viewport_width, &dir, 0.0);
        assert!(!dir.join(FILE).exists(), "unchanged sizes are not written");
        p.note(555.0, 401.0, &dir, 0.1);
        let back = Prefs::load(&dir);
        assert_eq!((back.side_width, back.viewport_width), (555.0, 401.0));
        std::fs::write(dir.join(FILE), "not json").unwrap();
        assert_eq!(
            Prefs::load(&dir),
            Prefs::default(),
            "a broken file is ignored"
        );
    }
}
