//! Backups on save, as Houdini keeps them: before a save overwrites
//! `DIR/NAME.json`, the file as it was is copied to
//! `DIR/backup/NAME_bakN.json`, N one more than the highest there, and only
//! the newest `keep` backups of NAME stay. A save that breaks a graph (or
//! overwrites the wrong file) can be undone from the folder.

use std::path::{Path, PathBuf};

/// The numbers of the backups of `stem` in `dir`, ascending.
fn numbers(dir: &Path, stem: &str) -> Vec<(u64, PathBuf)> {
    let prefix = format!("{}_bak", stem);
    let mut found: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let n = name.strip_prefix(&prefix)?.strip_suffix(".json")?;
            Some((n.parse().ok()?, e.path()))
        })
        .collect();
    found.sort();
    found
}

/// Copies `file` (about to be overwritten) into its folder's `backup/` and
/// removes the backups of the same name beyond the newest `keep`. Returns
/// the backup written; `None` when `keep` is 0 or there is no file yet.
pub fn before_overwrite(file: &Path, keep: u32) -> Result<Option<PathBuf>, String> {
    if keep == 0 || !file.is_file() {
        return Ok(None);
    }
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "graph".into());
    let dir = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .join("backup");
    std::fs::create_dir_all(&dir).map_err(|e| format!("backup: {}: {}", dir.display(), e))?;
    let next = numbers(&dir, &stem).last().map_or(1, |(n, _)| n + 1);
    let to = dir.join(format!("{}_bak{}.json", stem, next));
    let bytes = std::fs::read(file).map_err(|e| format!("backup: {}: {}", file.display(), e))?;
    weft_ir::io::write_atomic(&to, &bytes)
        .map_err(|e| format!("backup: {}: {}", to.display(), e))?;
    let all = numbers(&dir, &stem);
    for (_, old) in all.iter().take(all.len().saturating_sub(keep as usize)) {
        let _ = std::fs::remove_file(old);
    }
    Ok(Some(to))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saves_keep_the_newest_backups_numbered_upward() {
        let dir = std::env::temp_dir().join(format!("weft-backup-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let g = dir.join("heat.json");
        assert_eq!(
            before_overwrite(&g, 3).unwrap(),
            None,
            "nothing to back up yet"
        );
        for v in 1..=5 {
            std::fs::write(&g, format!("version {}", v)).unwrap();
            let b = before_overwrite(&g, 3).unwrap().unwrap();
            assert_eq!(b, dir.join("backup").join(format!("heat_bak{}.json", v)));
        }
        let kept: Vec<u64> = numbers(&dir.join("backup"), "heat")
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(kept, vec![3, 4, 5]);
        let newest = std::fs::read_to_string(dir.join("backup/heat_bak5.json")).unwrap();
        assert_eq!(newest, "version 5");
        assert_eq!(
            before_overwrite(&g, 0).unwrap(),
            None,
            "0 turns backups off"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
