//! Weft in a real browser: the web build (`web/build.sh`, into target/web)
//! is served on 127.0.0.1 and opened in headless Chromium (WebGPU on
//! SwiftShader) by `web/test/run_page.cjs` through puppeteer-core; the
//! page runs heat and mpm88 on the wgpu backend and hands every field back
//! through its test hook. They are compared with the native compiled CPU
//! backend (`cpu`) with the tolerances of the wgpu-vs-cpu cross-backend
//! test (tests/cross_backend.rs), and a screenshot of the page is checked
//! not blank.
//!
//! Without the build, Chromium, node or puppeteer-core the test fails when
//! CI=true (`.ci/run` installs them and builds the page) and skips, saying
//! what is missing, otherwise. `WEFT_UPDATE_DOCS_IMAGES=1` also writes the
//! screenshot to docs/images/web.png.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use weft_runtime::{Backend, SimOptions, Simulation};
use weft_tests::*;

struct Browser {
    web: PathBuf,
    script: PathBuf,
}

fn browser() -> Option<Browser> {
    let root = root();
    let web = std::env::var_os("WEFT_WEB_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target").join("web"));
    let chromium = std::env::var("WEFT_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let script = root.join("web").join("test").join("run_page.cjs");
    let missing = if !web.join("weft_web_bg.wasm").is_file() {
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

/// Opens the page with `query`; returns result.json and the fields' words by name.
fn run_page(
    b: &Browser,
    query: &str,
    out: &Path,
    shot: Option<&Path>,
) -> (Value, Vec<(String, Vec<u32>)>) {
    let _ = std::fs::remove_dir_all(out);
    let mut cmd = Command::new("node");
    cmd.arg(&b.script).arg(&b.web).arg(query).arg(out);
    if let Some(s) = shot {
        cmd.arg(s);
    }
    let o = cmd.output().expect("node runs");
    // The browser's console, for the test log.
    eprintln!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "the page failed for {}", query);
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("result.json")).unwrap()).unwrap();
    assert_eq!(meta["status"], "done", "{}", meta);
    assert_eq!(
        meta["backend"], "wgpu",
        "the page ran on {} instead of WebGPU",
        meta["backend"]
    );
    let fields = meta["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let bytes = std::fs::read(out.join(f["file"].as_str().unwrap())).unwrap();
            let words = bytes
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            (f["name"].as_str().unwrap().to_string(), words)
        })
        .collect();
    (meta, fields)
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

#[test]
fn heat_and_mpm88_in_headless_chromium_match_the_cpu_backend() {
    let Some(b) = browser() else { return };
    let out = root().join("target").join("web-test");
    let shot = out.join("web.png");
    std::fs::create_dir_all(&out).unwrap();
    let mut problems = Vec::new();

    // heat: three frames, the cross-backend test's tight tolerance.
    let (meta, web) = run_page(
        &b,
        "graph=heat&test=frames:3",
        &out.join("heat"),
        Some(&shot),
    );
    assert_eq!(meta["frames"], 3);
    problems.extend(compare("heat", &cpu(&example("heat"), 3), &web, &|_| {
        Some(Tol {
            rel: 1e-6,
            abs: 1e-7,
        })
    }));

    // mpm88: one frame of 20 substeps; C (the affine field) is dominated by
    // the order of float atomics, so it is checked by its mean magnitude.
    let (_, web) = run_page(
        &b,
        "graph=mpm88&set=substeps.count%3D20&test=frames:1",
        &out.join("mpm88"),
        None,
    );
    let mut g = example("mpm88");
    set_param(&mut g, "substeps", "count", json!(20));
    let c = cpu(&g, 1);
    problems.extend(compare("mpm88", &c, &web, &|f| match f {
        "C" => None,
        _ => Some(Tol {
            rel: 1e-4,
            abs: 1e-7,
        }),
    }));
    let mean_abs = |w: &[u32]| {
        w.iter()
            .map(|&x| f32::from_bits(x).abs() as f64)
            .sum::<f64>()
            / w.len().max(1) as f64
    };
    let cw = web
        .iter()
        .find(|(n, _)| n == "C")
        .map(|(_, w)| mean_abs(w))
        .unwrap_or(0.0);
    let cc = mean_abs(&c.read_field(c.field("C").unwrap()).unwrap());
    if (cw - cc).abs() > 0.1 * cc {
        problems.push(format!(
            "mpm88: mean |C| {} on cpu vs {} in the browser",
            cc, cw
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));

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
        "menu",
        "side",
        "inspector",
        "problems",
        "log",
        "status",
        "timeline",
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
