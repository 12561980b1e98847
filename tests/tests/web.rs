//! Weft in a real browser: the web build (`web/build.sh`, into target/web)
//! is served on 127.0.0.1 and opened in headless Chromium (WebGPU on
//! SwiftShader) by `web/test/run_page.cjs` through puppeteer-core; the
//! page runs every example (graphs/*.json) on the wgpu backend and hands
//! every field back through its test hook. They are compared with the
//! native compiled CPU backend (`cpu`): heat, heat_color, life and mpm88
//! field by field with the tolerances of the wgpu-vs-cpu cross-backend
//! test (tests/cross_backend.rs), the rest by their statistics (float
//! atomics add in another order on a GPU). To fit CI's budget every
//! example runs its first frame (heat three) and one example a day, in
//! turn, its `.expect.json` frames (`WEFT_WEB_LONG=NAME` or `all` picks);
//! a screenshot of the page is checked not blank.
//!
//! Every kernel's WGSL (every example's kernels and views, every language
//! corpus and edge-case kernel, and a few block kernels) is also compiled
//! by the browser's own shader compiler (Tint, `web/test/compile_wgsl.cjs`:
//! `createShaderModule`, `getCompilationInfo`, a compute pipeline), so
//! what Chrome's WebGPU refuses fails CI; and the same text, 64-bit
//! kernels included, must parse back through naga's WGSL front end (what
//! `weft emit wgsl` prints is WGSL that tools read).
//!
//! Without the build, Chromium, node or puppeteer-core the test fails when
//! CI=true (`.ci/run` installs them and builds the page) and skips, saying
//! what is missing, otherwise. `WEFT_UPDATE_DOCS_IMAGES=1` also writes the
//! screenshot to docs/images/web.png.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use weft_runtime::{Backend, SimOptions, Simulation};
use weft_tests::corpus::{corpus, corpus_graph, edge_cases, edge_graph};
use weft_tests::*;

struct Browser {
    web: PathBuf,
    script: PathBuf,
}

fn browser() -> Option<Browser> {
    browser_for(true)
}

/// Chromium, node and puppeteer-core, and (`page`) the web build; `None`
/// (a visible skip) where one is missing, a panic under CI=true.
fn browser_for(page: bool) -> Option<Browser> {
    let root = root();
    let web = std::env::var_os("WEFT_WEB_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target").join("web"));
    let chromium = std::env::var("WEFT_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let script = root.join("web").join("test").join("run_page.cjs");
    let missing = if page && !web.join("weft_web_bg.wasm").is_file() {
        Some(format!(
            "no web build in {} (run web/build.sh)",
            web.display()
        ))
    } else if !Path::new(&chromium).is_file() {
        Some(format!(
            "no browser at {} (apt-get install chromium)",
            chromium
        ))
    } else if Command::new("node").arg("--version").output().is_err() {
        Some("no node (apt-get install nodejs npm)".into())
    } else if !root.join("web/test/node_modules/puppeteer-core").is_dir() {
        Some("no puppeteer-core (npm install --prefix web/test)".into())
    } else {
        None
    };
    match missing {
        None => Some(Browser { web, script }),
        Some(m) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("CI=true but the browser test cannot run: {}", m)
        }
        Some(m) => {
            eprintln!("skipping the browser test: {}", m);
            None
        }
    }
}

fn cpu(doc: &Value, frames: u32) -> Simulation {
    let opts = SimOptions {
        backend: Backend::Jit,
        threads: Some(1),
        ..Default::default()
    };
    let mut s = Simulation::new(build(doc).unwrap(), &opts).unwrap();
    s.start().unwrap();
    for _ in 0..frames {
        s.step_frame().unwrap();
    }
    s
}

/// `|a - b| <= abs + rel * scale` for every component (scale: the CPU
/// field's largest finite magnitude), as tests/cross_backend.rs.
struct Tol {
    rel: f64,
    abs: f64,
}

fn compare(
    name: &str,
    cpu: &Simulation,
    web: &[(String, Vec<u32>)],
    tol: &dyn Fn(&str) -> Option<Tol>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for (h, f) in cpu.program.fields.iter() {
        if cpu.program.is_view_field(h) {
            continue;
        }
        let a = cpu.read_field(h).unwrap();
        let Some((_, b)) = web.iter().find(|(n, _)| *n == f.name) else {
            problems.push(format!("{}: the page sent no field '{}'", name, f.name));
            continue;
        };
        if a.len() != b.len() {
            problems.push(format!(
                "{}: '{}' has {} words on cpu, {} in the browser",
                name,
                f.name,
                a.len(),
                b.len()
            ));
            continue;
        }
        if !f.ty.is_float() {
            let bad = a.iter().zip(b).filter(|(x, y)| x != y).count();
            if bad > 0 {
                problems.push(format!(
                    "{}: integer field '{}' differs in {} of {}",
                    name,
                    f.name,
                    bad,
                    a.len()
                ));
            }
            continue;
        }
        let Some(t) = tol(&f.name) else { continue };
        let fa: Vec<f64> = a.iter().map(|&w| f32::from_bits(w) as f64).collect();
        let fb: Vec<f64> = b.iter().map(|&w| f32::from_bits(w) as f64).collect();
        let scale = fa
            .iter()
            .filter(|x| x.is_finite())
            .fold(0.0f64, |m, x| m.max(x.abs()));
        let limit = t.abs + t.rel * scale;
        if let Some((k, (x, y))) =
            fa.iter().zip(&fb).enumerate().find(|(_, (x, y))| {
                (*x - *y).abs() > limit && x != y && !(x.is_nan() && y.is_nan())
            })
        {
            problems.push(format!(
                "{}: field '{}' differs at component {}: cpu {} browser {} (limit {:.2e})",
                name, f.name, k, x, y, limit
            ));
        }
    }
    problems
}

/// Compares every field by its statistics, where a field-by-field match
/// is not to be had (float atomics add in another order on the GPU, so
/// lists and particles may differ in their last bits): a float field's
/// non-finite count exactly, and its sum, smallest and largest value and
/// mean magnitude within `rel` of the CPU field's scale; an integer
/// field's values as a multiset (cells and lists may be filled in another
/// order). Every example's wgpu run on lavapipe is within 1e-3 of the CPU
/// by these measures after its first frame, the affine field `C` and the
/// grids of the MPM examples excepted (`loose`: a float field's mean
/// magnitude within 10%; an integer one, packed halves, unchecked).
fn compare_stats(
    name: &str,
    cpu: &Simulation,
    web: &[(String, Vec<u32>)],
    rel: f64,
    loose: &dyn Fn(&str) -> bool,
) -> Vec<String> {
    stats_within(name, cpu, web, rel, rel, loose)
}

/// `compare_stats` with a looser bound on the maximum (a peaked field).
fn compare_stats_peak(
    name: &str,
    cpu: &Simulation,
    web: &[(String, Vec<u32>)],
    rel: f64,
    peak: f64,
) -> Vec<String> {
    stats_within(name, cpu, web, rel, peak, &|_| false)
}

fn stats_within(
    name: &str,
    cpu: &Simulation,
    web: &[(String, Vec<u32>)],
    rel: f64,
    peak: f64,
    loose: &dyn Fn(&str) -> bool,
) -> Vec<String> {
    let mut problems = Vec::new();
    for (h, f) in cpu.program.fields.iter() {
        // The page leaves out a field too large to read whole (a hash
        // root's domain), as `weft run --dump` does.
        if cpu.program.is_view_field(h) || f.cells() > weft_runtime::memory::READ_WHOLE_LIMIT {
            continue;
        }
        let a = cpu.read_field(h).unwrap();
        let Some((_, b)) = web.iter().find(|(n, _)| *n == f.name) else {
            problems.push(format!("{}: the page sent no field '{}'", name, f.name));
            continue;
        };
        if a.len() != b.len() {
            problems.push(format!(
                "{}: '{}' has {} words on cpu, {} in the browser",
                name,
                f.name,
                a.len(),
                b.len()
            ));
            continue;
        }
        if !f.ty.is_float() && loose(&f.name) {
            // Packed words of a float-atomic grid (mpm_quant's
            // `grid_halves`): its values carry the order of the adds.
            continue;
        }
        if !f.ty.is_float() {
            let (mut sa, mut sb) = (a.clone(), b.clone());
            sa.sort_unstable();
            sb.sort_unstable();
            if sa != sb {
                let bad = a.iter().zip(b).filter(|(x, y)| x != y).count();
                problems.push(format!(
                    "{}: integer field '{}' holds other values in the browser ({} of {} words differ)",
                    name,
                    f.name,
                    bad,
                    a.len()
                ));
            }
            continue;
        }
        let stats = |w: &[u32]| {
            let v: Vec<f64> = w.iter().map(|&x| f32::from_bits(x) as f64).collect();
            let fin: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
            let n = fin.len().max(1) as f64;
            (
                v.len() - fin.len(),
                fin.iter().sum::<f64>(),
                fin.iter().copied().fold(f64::INFINITY, f64::min),
                fin.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                fin.iter().map(|x| x.abs()).sum::<f64>() / n,
                fin.len() as f64,
            )
        };
        let (na, suma, mina, maxa, ma, n) = stats(&a);
        let (nb, sumb, minb, maxb, mb, _) = stats(b);
        if na != nb {
            problems.push(format!(
                "{}: '{}' has {} non-finite values on cpu, {} in the browser",
                name, f.name, na, nb
            ));
            continue;
        }
        if n == 0.0 || na == a.len() {
            continue;
        }
        let scale = mina.abs().max(maxa.abs());
        let (r, what) = if loose(&f.name) {
            (0.1, "mean magnitude")
        } else {
            (rel, "statistics")
        };
        let ok = (ma - mb).abs() <= r * ma + 1e-6
            && (loose(&f.name)
                || ((suma - sumb).abs() <= r * n * ma + 1e-6
                    && (mina - minb).abs() <= r * scale + 1e-6
                    && (maxa - maxb).abs() <= r.max(peak) * scale + 1e-6));
        if !ok {
            problems.push(format!(
                "{}: the {} of '{}' differ: cpu sum {} min {} max {} mean |x| {}, browser sum {} min {} max {} mean |x| {}",
                name, what, f.name, suma, mina, maxa, ma, sumb, minb, maxb, mb
            ));
        }
    }
    problems
}

/// Whether the page must refuse the example: WebGPU has no 64-bit types,
/// and a kernel using them is refused by name (heat_f64).
fn needs_wide(doc: &Value) -> bool {
    let mut p = build(doc).unwrap();
    let passes = weft_runtime::backend::tune_passes(Backend::Wgpu, &Default::default());
    weft_ir::passes::run_pipeline(&mut p, &passes, None).unwrap();
    let opts = weft_codegen::wgpu::WgpuOptions {
        wide: false,
        ..Default::default()
    };
    let wide = p.kernels.iter().any(|(_, k)| {
        weft_codegen::wgpu::compile_kernel(&p, k, &opts)
            .is_err_and(|e| e.message.contains("no 64-bit"))
    });
    wide
}

/// The example of this run that also runs its `.expect.json` frames (its
/// longer run): one a day, rotating through graphs/ by the UTC day, or the
/// one named by WEFT_WEB_LONG (`all`: every example). The rest run their
/// first frame only, so the whole set fits CI's budget.
fn long_runs(names: &[String]) -> Vec<String> {
    match std::env::var("WEFT_WEB_LONG") {
        Ok(v) if v == "all" => names.to_vec(),
        Ok(v) => vec![v],
        Err(_) => {
            let day = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() / 86400);
            vec![names[day as usize % names.len()].clone()]
        }
    }
}

/// Every example (graphs/*.json) in the page, on WebGPU: heat three frames
/// and mpm88 one frame of 20 substeps, compared field by field with the
/// cross-backend test's tolerances; every other example its first frame
/// (and the day's `long_runs` example its `.expect.json` frames), compared
/// by `compare_stats`; heat_f64 is refused naming its node (no 64-bit types
/// in WebGPU). The screenshot of heat is checked not blank.
#[test]
fn every_example_in_headless_chromium_matches_the_cpu_backend() {
    let Some(b) = browser() else { return };
    let out = root().join("target").join("web-test");
    let shot = out.join("web.png");
    std::fs::create_dir_all(&out).unwrap();
    let examples = examples();
    let names: Vec<String> = examples.iter().map(|(n, _)| n.clone()).collect();
    let long = long_runs(&names);
    eprintln!("longer runs this time: {:?}", long);

    // (name, document as the page runs it, frames, query)
    let mut runs = Vec::new();
    for (name, doc) in &examples {
        let mut doc = doc.clone();
        let mut query = match served_beside_the_page(&b, name) {
            None => format!("graph={}", name),
            Some(url) => format!("graph={}", url),
        };
        let frames = if name == "heat" {
            3
        } else if long.contains(name) {
            let e: Value = serde_json::from_str(
                &std::fs::read_to_string(root().join(format!("graphs/{}.expect.json", name)))
                    .unwrap_or_else(|_| r#"{"frames": 1}"#.into()),
            )
            .unwrap();
            e["frames"].as_u64().unwrap_or(1) as u32
        } else {
            1
        };
        if name == "mpm88" {
            set_param(&mut doc, "substeps", "count", json!(20));
            query.push_str("&set=substeps.count%3D20");
        }
        if name == "life_bits" {
            // 1024² cells, not 8192²: at full size (67 million seeding
            // invocations) SwiftShader's page stops answering (the page's
            // main thread blocks past puppeteer's protocol timeout).
            set_param(&mut doc, "board", "shape", json!([1024, 32]));
            let mut scalars = doc["nodes"]
                .as_array()
                .and_then(|n| n.iter().find(|n| n["id"] == "step"))
                .map(|n| n["params"]["scalars"].clone())
                .expect("life_bits has a step kernel with scalars");
            scalars["rows"] = json!(1024);
            scalars["cols"] = json!(32);
            set_param(&mut doc, "step", "scalars", scalars);
            query.push_str(
                "&set=board.shape%3D%5B1024%2C32%5D&set=step.rows%3D1024&set=step.cols%3D32",
            );
        }
        query.push_str(&format!("&test=frames:{}", frames));
        runs.push((name.clone(), doc, frames, query));
    }
    let plan: Vec<Value> = runs
        .iter()
        .map(|(name, _, _, query)| {
            let mut e = json!({"query": query, "out": out.join(name)});
            if name == "heat" {
                e["shot"] = json!(shot);
            }
            e
        })
        .collect();
    for (name, ..) in &runs {
        let _ = std::fs::remove_dir_all(out.join(name));
    }
    let plan_file = out.join("plan.json");
    std::fs::write(&plan_file, Value::Array(plan).to_string()).unwrap();
    let t0 = std::time::Instant::now();
    let o = Command::new("node")
        .arg(&b.script)
        .arg(&b.web)
        .arg(format!("@{}", plan_file.display()))
        .output()
        .expect("node runs");
    eprintln!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    eprintln!(
        "{} examples in the browser in {:.0} s",
        runs.len(),
        t0.elapsed().as_secs_f64()
    );

    let mut problems = Vec::new();
    for (name, doc, frames, _) in &runs {
        let dir = out.join(name);
        let Ok(text) = std::fs::read_to_string(dir.join("result.json")) else {
            problems.push(format!("{}: the page left no result", name));
            continue;
        };
        let meta: Value = serde_json::from_str(&text).unwrap();
        if needs_wide(doc) {
            let e = meta["error"].as_str().unwrap_or("");
            if meta["status"] != "error" || !e.contains("64-bit") {
                problems.push(format!(
                    "{}: expected a refusal naming the node (no 64-bit types in WebGPU): {}",
                    name, meta
                ));
            }
            continue;
        }
        if meta["status"] != "done" || meta["backend"] != "wgpu" || meta["frames"] != *frames {
            problems.push(format!(
                "{}: {} frames on wgpu expected: {}",
                name, frames, meta
            ));
            continue;
        }
        let web: Vec<(String, Vec<u32>)> = meta["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                let bytes = std::fs::read(dir.join(f["file"].as_str().unwrap())).unwrap();
                let words = bytes
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
                (f["name"].as_str().unwrap().to_string(), words)
            })
            .collect();
        let c = cpu(doc, *frames);
        match name.as_str() {
            // The cross-backend test's tight tolerance.
            "heat" | "heat_color" | "life" => problems.extend(compare(name, &c, &web, &|_| {
                Some(Tol {
                    rel: 1e-6,
                    abs: 1e-7,
                })
            })),
            // C (the affine field) is dominated by the order of float
            // atomics: checked by its mean magnitude.
            "mpm88" => {
                problems.extend(compare(name, &c, &web, &|f| match f {
                    "C" => None,
                    _ => Some(Tol {
                        rel: 1e-4,
                        abs: 1e-7,
                    }),
                }));
                problems.extend(compare_stats(name, &c, &web, 1e-3, &|f| f == "C"));
            }
            // Density r²/(d² + 1e-4) peaks at the cell nearest a ball's
            // centre, which sin/cos place: WGSL allows them an absolute
            // error of 2^-11, which the peak magnifies. Its mean, sum and
            // minimum stay within 1e-3; its maximum within 1e-2.
            "metaballs3d" => problems.extend(compare_stats_peak(name, &c, &web, 1e-3, 1e-2)),
            _ => {
                // The MPM examples' affine field and grids (on a grid
                // quantized to halves, mpm_quant's, the order of the float
                // adds moves single cells by an f16 step).
                // mpm_quant's f16 grid steps carry into the particles'
                // J: its extremes move by an f16 step too (its mean does not).
                let mpm = name.starts_with("mpm");
                let quant = name == "mpm_quant";
                problems.extend(compare_stats(name, &c, &web, 1e-3, &|f| {
                    mpm && (f == "C" || f.starts_with("grid") || (quant && f == "J"))
                }))
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );

    // The screenshot shows the page and its view, not a blank canvas
    // (heat's view is mostly black).
    assert_not_blank(&shot, 64, 0.1);
    if std::env::var("WEFT_UPDATE_DOCS_IMAGES").as_deref() == Ok("1") {
        std::fs::copy(&shot, root().join("docs/images/web.png")).unwrap();
    }
}

/// Fails when the PNG at `shot` has fewer than `colours` distinct colours
/// or less than `dark` of its pixels dark: a blank canvas, an error page.
fn assert_not_blank(shot: &Path, colours: usize, dark: f64) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    let mut colors: Vec<[u8; 3]> = buf[..info.buffer_size()]
        .chunks(px)
        .map(|p| [p[0], p[1], p[2]])
        .collect();
    let dark_part =
        colors.iter().filter(|c| c.iter().all(|&v| v < 40)).count() as f64 / colors.len() as f64;
    colors.sort_unstable();
    colors.dedup();
    assert!(
        colors.len() >= colours && dark_part > dark,
        "the screenshot {} looks blank: {} colours, {:.1}% dark",
        shot.display(),
        colors.len(),
        dark_part * 100.0
    );
}

/// The editor page (the desktop app's editor, `weft-gui`, on the page's
/// canvas; web/test/run_editor.cjs drives it through its test hook): heat
/// opens with every panel drawn and every node laid out, no problems, on
/// WebGPU; an edit (substeps.count 20 -> 10) made through the hook as the
/// inspector makes it, Reset and three frames give the fields the native
/// cpu backend gives with `--set substeps.count=10`; and File > Save As
/// downloads a graph that loads, builds and runs natively to the same
/// fields; File > Open (the page's file picker) opens mpm88 and its `.npy`
/// initial data from the disk and runs it. The screenshot (heat's code editor open) is checked not blank;
/// `WEFT_UPDATE_DOCS_IMAGES=1` also writes it to docs/images/web-editor.png.
#[test]
fn the_editor_page_edits_heat_runs_it_like_the_cpu_backend_and_saves_it() {
    let Some(b) = browser() else { return };
    let out = root().join("target").join("web-test").join("editor");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    let shot = out.join("web-editor.png");
    let fields = ["T", "T_next", "source"];
    let plan = json!({
        "code": "diffuse",
        "set": [{"node": "substeps", "param": "count", "value": 10}],
        "frames": 3,
        "read": fields,
        "open": [
            root().join("graphs/mpm88.json"),
            root().join("graphs/mpm88_x0.npy"),
        ],
    });
    let script = root().join("web").join("test").join("run_editor.cjs");
    let o = Command::new("node")
        .arg(&script)
        .arg(&b.web)
        .arg("graph=heat")
        .arg(&out)
        .arg(plan.to_string())
        .arg(&shot)
        .output()
        .expect("node runs");
    eprintln!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "the editor page failed");
    let read = |f: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(out.join(f)).unwrap()).unwrap()
    };

    // Opened: the document, every node drawn in the node editor, no
    // problems, and the panels around it.
    let opened = read("opened.json");
    let heat = example("heat");
    let nodes = heat["nodes"].as_array().unwrap().len();
    assert_eq!(opened["nodes"], nodes, "{}", opened);
    assert_eq!(
        opened["laid_out"], nodes,
        "the node editor drew: {}",
        opened
    );
    assert_eq!(opened["problems"], json!([]), "{}", opened);
    assert_eq!(opened["backend"], "wgpu", "{}", opened);
    for p in [
        "menu", "side", "viewport", "problems", "log", "status", "timeline",
    ] {
        let drawn = opened["panels"].as_array().unwrap().iter().any(|x| {
            x["id"] == p
                && x["size"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|v| v.as_f64().unwrap() > 1.0)
        });
        assert!(drawn, "the '{}' panel was not drawn: {}", p, opened);
    }

    // The edit, three frames: as `weft run --set substeps.count=10 --frames 3` on cpu.
    let ran = read("ran.json");
    assert_eq!(ran["frame"], 3, "{}", ran);
    assert!(ran["code_window"].as_bool().unwrap(), "{}", ran);
    let result = read("result.json");
    let web: Vec<(String, Vec<u32>)> = fields
        .iter()
        .map(|f| {
            let bytes = std::fs::read(out.join(format!("{}.bin", f))).unwrap();
            let words = bytes
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            (f.to_string(), words)
        })
        .collect();
    let mut edited = heat.clone();
    set_param(&mut edited, "substeps", "count", json!(10));
    let tight = |_: &str| {
        Some(Tol {
            rel: 1e-6,
            abs: 1e-7,
        })
    };
    let mut problems = compare("editor heat", &cpu(&edited, 3), &web, &tight);

    // The downloaded graph: the edit is in it, and it loads, builds and
    // runs natively to the page's fields.
    let saved = result["saved"][0].as_str().expect("a saved graph");
    let doc = weft_ir::graph::GraphDoc::load(Path::new(saved))
        .unwrap_or_else(|e| panic!("the saved graph {} does not load: {:?}", saved, e));
    let saved_json = serde_json::to_value(&doc).unwrap();
    let count = saved_json["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == "substeps")
        .map(|n| n["params"]["count"].clone());
    assert_eq!(count, Some(json!(10)), "the saved graph lost the edit");
    problems.extend(compare("saved heat", &cpu(&saved_json, 3), &web, &tight));
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // File > Open: a graph from the disk, through the page's file picker.
    let reopened = read("reopened.json");
    assert_eq!(
        reopened["nodes"],
        example("mpm88")["nodes"].as_array().unwrap().len(),
        "{}",
        reopened
    );
    assert_eq!(reopened["problems"], json!([]), "{}", reopened);
    assert_eq!(reopened["backend"], "wgpu", "{}", reopened);
    assert!(reopened["frame"].as_i64().unwrap() >= 2, "{}", reopened);

    // The editor's light panels, and heat's view (mostly black) in the viewport.
    assert_not_blank(&shot, 256, 0.002);
    if std::env::var("WEFT_UPDATE_DOCS_IMAGES").as_deref() == Ok("1") {
        std::fs::copy(&shot, root().join("docs/images/web-editor.png")).unwrap();
    }
}

/// Every example graph in graphs/ (name, document).
/// The web build embeds only the examples whose `.npy` files are small
/// (web/build.rs, `MAX_NPY`); any other is copied with its `.npy` files
/// beside the page and opened by its relative URL, as a user's own graph
/// is (`graph=examples/NAME.json`, its files fetched from beside it).
fn served_beside_the_page(b: &Browser, name: &str) -> Option<String> {
    const MAX_NPY: u64 = 256 * 1024;
    let graphs = root().join("graphs");
    let text = std::fs::read_to_string(graphs.join(format!("{}.json", name))).unwrap();
    let npys: Vec<String> = text
        .split("\"npy\"")
        .skip(1)
        .filter_map(|t| t.split('"').nth(1).map(str::to_string))
        .collect();
    let embedded = npys
        .iter()
        .all(|n| std::fs::metadata(graphs.join(n)).is_ok_and(|m| m.len() <= MAX_NPY));
    if embedded {
        return None;
    }
    let dir = b.web.join("examples");
    std::fs::create_dir_all(&dir).unwrap();
    for f in npys.iter().cloned().chain([format!("{}.json", name)]) {
        std::fs::copy(graphs.join(&f), dir.join(&f)).unwrap();
    }
    Some(format!("examples/{}.json", name))
}

fn examples() -> Vec<(String, Value)> {
    let mut names: Vec<String> = std::fs::read_dir(root().join("graphs"))
        .expect("graphs/ exists")
        .filter_map(|e| {
            let n = e.ok()?.file_name().into_string().ok()?;
            let stem = n.strip_suffix(".json")?;
            (!stem.ends_with(".expect")).then(|| stem.to_string())
        })
        .collect();
    names.sort();
    assert!(names.len() >= 10, "examples found: {:?}", names);
    names
        .into_iter()
        .map(|n| (n.clone(), example(&n)))
        .collect()
}

/// Block kernels beside the examples' (block_scan): a scan written as the
/// kernel-language docs write one, and a shared array whose index can
/// fault before the barrier (the check must not make control flow
/// non-uniform).
fn block_kernels() -> Vec<(String, Value)> {
    let scan = "const B: i32 = 64;
#[block(B)]
fn kernel(i: i32) {
    let s = shared([0.0; B]);
    let t = thread_index();
    s[t] = x[i];
    barrier();
    for d in 0..6 {
        let off = 1 << d;
        let v = if t >= off { s[t - off] } else { 0.0 };
        barrier();
        s[t] += v;
        barrier();
    }
    o[i] = s[t];
}";
    let faulting = "#[block(64)]
fn kernel(i: i32) {
    let s = shared([0.0; 128]);
    s[i * 3] = x[i];
    barrier();
    o[i] = s[(i + 1) % 64];
}";
    [
        ("docs scan", scan),
        ("shared index before a barrier", faulting),
    ]
    .into_iter()
    .map(|(name, code)| {
        (
            format!("block kernel {}", name),
            kernel_graph(
                &[
                    F("x", "f32", &[256], json!(1.0)),
                    F("o", "f32", &[256], json!(0)),
                ],
                code,
                &[256],
                json!({}),
            ),
        )
    })
    .collect()
}

/// The WGSL text of every kernel of every example (views included: their
/// system kernels are kernels of the program), of every language-corpus
/// and edge-case kernel and of `block_kernels`, as `weft emit wgsl` prints
/// it and as the page's wgpu hands it to WebGPU (legalized for wgpu
/// without f32 atomics, as WebGPU has none): (label, text). `wide`: with
/// the kernels that use 64-bit types, which WebGPU refuses by name.
fn wgsl_kernels(wide: bool) -> Vec<(String, String)> {
    let mut docs = examples();
    for (name, fields, code, range) in corpus() {
        docs.push((
            format!("corpus {}", name),
            corpus_graph(&fields, &code, &range),
        ));
    }
    for (name, code, ty, init) in edge_cases() {
        docs.push((format!("edge case {}", name), edge_graph(code, ty, init)));
    }
    docs.extend(block_kernels());
    let opts = weft_codegen::wgpu::WgpuOptions {
        wide,
        ..Default::default()
    };
    let mut out = Vec::new();
    for (name, doc) in docs {
        let mut p = build(&doc).unwrap_or_else(|e| panic!("{}: {}", name, e));
        let passes = weft_runtime::backend::tune_passes(Backend::Wgpu, &Default::default());
        weft_ir::passes::run_pipeline(&mut p, &passes, None)
            .unwrap_or_else(|e| panic!("{}: {}", name, e));
        for (_, k) in p.kernels.iter() {
            let label = format!("{} / {}", name, k.label());
            match weft_codegen::wgpu::compile_kernel(&p, k, &opts) {
                Ok(gk) => out.push((
                    label.clone(),
                    weft_codegen::wgpu::to_wgsl(&gk).unwrap_or_else(|e| panic!("{}: {}", label, e)),
                )),
                // WebGPU has no 64-bit types: the page refuses such a kernel by name.
                Err(e) if !wide && e.message.contains("no 64-bit") => {}
                Err(e) => panic!("{}: {}", label, e),
            }
        }
    }
    out
}

/// What `weft emit wgsl` prints parses back through naga's WGSL front end
/// and validates, for every kernel (64-bit ones included: naga reads
/// `i64`/`f64`; an `i64` shift amount was once printed as `u32(3li)`,
/// which naga cannot evaluate).
#[test]
fn emitted_wgsl_of_every_kernel_parses_back_with_naga() {
    let kernels = wgsl_kernels(true);
    let mut problems = Vec::new();
    for (name, text) in &kernels {
        match naga::front::wgsl::parse_str(text) {
            Err(e) => problems.push(format!("{}: {}", name, e.emit_to_string(text))),
            Ok(m) => {
                if let Err(e) = naga::valid::Validator::new(
                    naga::valid::ValidationFlags::all(),
                    naga::valid::Capabilities::all(),
                )
                .validate(&m)
                {
                    problems.push(format!("{}: {}", name, e.emit_to_string(text)));
                }
            }
        }
    }
    assert!(kernels.len() >= 100, "only {} kernels", kernels.len());
    assert!(
        problems.is_empty(),
        "{} of {} kernels' WGSL does not read back:\n{}",
        problems.len(),
        kernels.len(),
        problems.join("\n")
    );
}

/// Chromium's WebGPU compiles every kernel's WGSL (Tint, the compiler of
/// Chrome's WebGPU, which the browser build runs on): block kernels
/// (barriers after a checked shared index), volume views (non-finite
/// constants), the corpus, every example. Needs Chromium, node and
/// puppeteer-core but not the web build.
#[test]
fn every_kernel_compiles_with_the_browsers_shader_compiler() {
    let Some(_) = browser_for(false) else { return };
    let dir = root().join("target").join("web-test").join("wgsl");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let kernels = wgsl_kernels(false);
    let mut list = Vec::new();
    for (i, (name, text)) in kernels.iter().enumerate() {
        let file = format!("k{}.wgsl", i);
        std::fs::write(dir.join(&file), text).unwrap();
        list.push(json!({"name": name, "file": file}));
    }
    std::fs::write(dir.join("list.json"), Value::Array(list).to_string()).unwrap();
    let verdicts = dir.join("verdicts.json");
    let o = Command::new("node")
        .arg(root().join("web").join("test").join("compile_wgsl.cjs"))
        .arg(&dir)
        .arg(&verdicts)
        .output()
        .expect("node runs");
    eprintln!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "the compile page failed");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&verdicts).unwrap()).unwrap();
    let v = v.as_array().unwrap();
    assert_eq!(v.len(), kernels.len(), "a verdict for every module");
    let refused: Vec<String> = v
        .iter()
        .filter(|x| !x["errors"].as_array().unwrap().is_empty())
        .map(|x| {
            let i = kernels.iter().position(|(n, _)| *n == x["name"]).unwrap();
            format!(
                "{} ({}): {}",
                x["name"],
                dir.join(format!("k{}.wgsl", i)).display(),
                x["errors"]
            )
        })
        .collect();
    for want in ["block_scan", "block kernel docs scan", "blob3d", "smoke3d"] {
        assert!(
            kernels.iter().any(|(n, _)| n.starts_with(want)),
            "the set lost {}",
            want
        );
    }
    assert!(
        refused.is_empty(),
        "the browser refuses {} of {} kernels:\n{}",
        refused.len(),
        kernels.len(),
        refused.join("\n")
    );
}
