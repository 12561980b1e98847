//! Embeds the shipped examples, their `.npy` and mesh files and the asset library
//! in the web build (a browser has no file system to read them from): a
//! generated table of `(path, bytes)` that `app.rs` provides under
//! `/weft/graphs` and `/weft/assets`. Examples whose `.npy` files are larger
//! than `MAX_NPY` stay out, so the download stays small (the browser test,
//! tests/tests/web.rs, serves those beside the page and opens them by URL).

use std::path::Path;

const MAX_NPY: u64 = 256 * 1024;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace");
    let mut rows = Vec::new();
    let mut examples = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(root.join("graphs"))
        .expect("graphs/")
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    for p in &files {
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        let Some(stem) = name.strip_suffix(".json") else {
            continue;
        };
        if stem.ends_with(".expect") {
            continue;
        }
        let text = std::fs::read_to_string(p).expect("graph");
        // `.npy` initial values and `mesh` nodes' files, beside the graph.
        let mut npys: Vec<String> = text
            .split("\"npy\"")
            .skip(1)
            .filter_map(|t| t.split('"').nth(1).map(str::to_string))
            .collect();
        npys.extend(
            text.split("\"file\"")
                .skip(1)
                .filter_map(|t| t.split('"').nth(1).map(str::to_string))
                .filter(|f| {
                    f.ends_with(".obj")
                        || f.ends_with(".ply")
                        || f.ends_with(".stl")
                        || f.ends_with(".glb")
                        || f.ends_with(".gltf")
                }),
        );
        let fits = npys.iter().all(|n| {
            std::fs::metadata(root.join("graphs").join(n)).is_ok_and(|m| m.len() <= MAX_NPY)
        });
        if !fits {
            continue;
        }
        examples.push(stem.to_string());
        rows.push(("graphs".to_string(), name.clone(), p.clone()));
        for n in npys {
            rows.push(("graphs".into(), n.clone(), root.join("graphs").join(&n)));
        }
    }
    for e in std::fs::read_dir(root.join("assets"))
        .expect("assets/")
        .flatten()
    {
        let name = e.file_name().to_string_lossy().to_string();
        if name.ends_with(".json") || name == "README.md" {
            rows.push(("assets".into(), name, e.path()));
        }
    }
    rows.sort();
    rows.dedup();
    let mut out = String::from("pub const FILES: &[(&str, &[u8])] = &[\n");
    for (dir, name, path) in &rows {
        println!("cargo:rerun-if-changed={}", path.display());
        out += &format!(
            "    (\"/weft/{}/{}\", include_bytes!({:?})),\n",
            dir,
            name,
            path.display().to_string()
        );
    }
    out += "];\npub const EXAMPLES: &[&str] = &[\n";
    for e in &examples {
        out += &format!("    {:?},\n", e);
    }
    out += "];\n";
    println!("cargo:rerun-if-changed={}", root.join("graphs").display());
    println!("cargo:rerun-if-changed={}", root.join("assets").display());
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("shipped.rs");
    std::fs::write(dest, out).expect("write shipped.rs");
}
