//! `weft sweep status` (done / failed / running / killed / missing) and
//! `weft sweep collect` (the contact sheet and metrics.csv).

use super::font::{self, Canvas};
use super::manifest::{self, Manifest, RunResult, Status, Variant};
use super::{failure, usage};
use clap::Args;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct StatusArgs {
    /// The sweep folder (holding manifest.json).
    pub sweep: PathBuf,
    /// Print one JSON object (a list of {index, state, labels, seconds, error}).
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct CollectArgs {
    /// The sweep folder (holding manifest.json).
    pub sweep: PathBuf,
    /// The view whose frame each cell shows (default: the first view a done variant wrote, by name).
    #[arg(long)]
    pub view: Option<String>,
    /// The frame each cell shows (default: the last, the manifest's frame count).
    #[arg(long)]
    pub frame: Option<u32>,
    /// Width and height of the box each picture is scaled into (pixels).
    #[arg(long, default_value_t = 192, value_parser = clap::value_parser!(u32).range(16..=2048))]
    pub thumb: u32,
    /// Cells per row (default: the last axis' value count, else about a square).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub columns: Option<u32>,
}

/// What `status` and the app show of one variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Done,
    Failed,
    /// Started, its process alive (or on another host).
    Running,
    /// Started, its process gone from this host without a result.
    Killed,
    Missing,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::Done => "done",
            State::Failed => "failed",
            State::Running => "running",
            State::Killed => "killed",
            State::Missing => "missing",
        }
    }
}

pub fn state(sweep: &Path, v: &Variant) -> (State, Option<RunResult>) {
    match manifest::read_result(sweep, v) {
        Ok(None) => (State::Missing, None),
        Err(e) => (
            State::Failed,
            Some(RunResult {
                index: v.index,
                status: Status::Failed,
                host: String::new(),
                pid: 0,
                started: 0.0,
                finished: None,
                seconds: None,
                exit_code: None,
                error: Some(e),
                metrics: vec![],
                loss: None,
            }),
        ),
        Ok(Some(r)) => {
            let s = match r.status {
                Status::Done => State::Done,
                Status::Failed => State::Failed,
                Status::Running => {
                    let here = r.host == manifest::hostname();
                    if here && !Path::new(&format!("/proc/{}", r.pid)).exists() {
                        State::Killed
                    } else {
                        State::Running
                    }
                }
            };
            (s, Some(r))
        }
    }
}

#[derive(Serialize)]
struct StatusRow {
    index: usize,
    state: State,
    labels: Vec<String>,
    seconds: Option<f64>,
    error: Option<String>,
}

pub fn status(a: StatusArgs) -> i32 {
    let m = match manifest::load(&a.sweep) {
        Ok(m) => m,
        Err(e) => return usage(e),
    };
    let rows: Vec<StatusRow> = m
        .variants
        .iter()
        .map(|v| {
            let (s, r) = state(&a.sweep, v);
            StatusRow {
                index: v.index,
                state: s,
                labels: v.labels(),
                seconds: r.as_ref().and_then(|r| r.seconds),
                error: r.and_then(|r| r.error),
            }
        })
        .collect();
    let count = |s: State| rows.iter().filter(|r| r.state == s).count();
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "variants": rows }))
                .expect("serialises")
        );
    } else {
        println!(
            "{:>5}  {:<8} {:>9}  parameters",
            "index", "state", "seconds"
        );
        for r in &rows {
            println!(
                "{:>5}  {:<8} {:>9}  {}",
                r.index,
                r.state.name(),
                r.seconds.map(|s| format!("{:.2}", s)).unwrap_or_default(),
                r.labels.join(" ")
            );
            if let Some(e) = &r.error {
                for line in e.lines() {
                    println!("{:>26}{}", "", line);
                }
            }
        }
        println!(
            "{} done, {} failed, {} running, {} killed, {} missing (of {})",
            count(State::Done),
            count(State::Failed),
            count(State::Running),
            count(State::Killed),
            count(State::Missing),
            rows.len()
        );
    }
    if count(State::Done) == rows.len() {
        0
    } else {
        1
    }
}

/// What `collect` wrote, for the app's Sweep panel: `SWEEP/collect.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Collected {
    pub view: Option<String>,
    pub frame: u32,
    pub sheet: String,
    pub csv: String,
}

pub const COLLECTED: &str = "collect.json";

/// The PNG of `view` at `frame` in a variant's folder.
pub fn frame_path(sweep: &Path, v: &Variant, view: &str, frame: u32) -> PathBuf {
    sweep
        .join(&v.dir)
        .join(format!("{}_{:04}.png", view, frame))
}

/// The first view (by name) with a PNG for `frame` in a done variant.
fn first_view(sweep: &Path, m: &Manifest, frame: u32) -> Option<String> {
    let suffix = format!("_{:04}.png", frame);
    for v in &m.variants {
        if state(sweep, v).0 != State::Done {
            continue;
        }
        let Ok(rd) = std::fs::read_dir(sweep.join(&v.dir)) else {
            continue;
        };
        let mut names: Vec<String> = rd
            .flatten()
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .filter_map(|n| n.strip_suffix(&suffix).map(str::to_string))
            .collect();
        names.sort();
        if let Some(n) = names.into_iter().next() {
            return Some(n);
        }
    }
    None
}

pub fn collect(a: CollectArgs) -> i32 {
    let m = match manifest::load(&a.sweep) {
        Ok(m) => m,
        Err(e) => return usage(e),
    };
    let frame = a.frame.unwrap_or(m.frames);
    let view = a.view.clone().or_else(|| first_view(&a.sweep, &m, frame));
    let states: Vec<(State, Option<RunResult>)> =
        m.variants.iter().map(|v| state(&a.sweep, v)).collect();
    // metrics.csv: one row per variant, one column per axis and metric.
    let mut csv = String::from("index,state");
    for x in &m.axes {
        csv += &format!(",{}", csv_cell(&x.name));
    }
    csv += ",seconds";
    for f in &m.metrics {
        csv += &format!(
            ",{},{},{}",
            csv_cell(&format!("{}.sum", f)),
            csv_cell(&format!("{}.max", f)),
            csv_cell(&format!("{}.mean", f))
        );
    }
    if m.loss.is_some() {
        csv += ",loss";
    }
    csv += "\n";
    for (v, (s, r)) in m.variants.iter().zip(&states) {
        csv += &format!("{},{}", v.index, s.name());
        for (k, x) in m.axes.iter().enumerate() {
            let value = if x.name == "seed" && k == m.axes.len() - 1 && v.seed.is_some() {
                v.seed.map(|s| s.to_string()).unwrap_or_default()
            } else {
                v.sets
                    .get(k)
                    .and_then(|s| s.split_once('='))
                    .map(|(_, val)| val.to_string())
                    .unwrap_or_default()
            };
            csv += &format!(",{}", csv_cell(&value));
        }
        let done = r.as_ref().filter(|_| *s == State::Done);
        csv += &format!(
            ",{}",
            done.and_then(|r| r.seconds)
                .map(|x| format!("{:.3}", x))
                .unwrap_or_default()
        );
        for f in &m.metrics {
            match done.and_then(|r| r.metrics.iter().find(|x| &x.field == f)) {
                Some(x) => csv += &format!(",{},{},{}", x.sum, x.max, x.mean),
                None => csv += ",,,",
            }
        }
        if m.loss.is_some() {
            csv += &format!(
                ",{}",
                done.and_then(|r| r.loss)
                    .map(|l| l.to_string())
                    .unwrap_or_default()
            );
        }
        csv += "\n";
    }
    let csv_path = a.sweep.join("metrics.csv");
    if let Err(e) = manifest::write_atomic(&csv_path, csv.as_bytes()) {
        return failure(e);
    }
    let sheet = contact_sheet(&a, &m, &states, view.as_deref(), frame);
    let sheet_path = a.sweep.join("contact_sheet.png");
    let bytes = match sheet.png() {
        Ok(b) => b,
        Err(e) => return failure(format!("cannot encode the contact sheet: {}", e)),
    };
    if let Err(e) = manifest::write_atomic(&sheet_path, &bytes) {
        return failure(e);
    }
    let collected = Collected {
        view: view.clone(),
        frame,
        sheet: "contact_sheet.png".into(),
        csv: "metrics.csv".into(),
    };
    let text = serde_json::to_string_pretty(&collected).expect("serialises");
    if let Err(e) = manifest::write_atomic(&a.sweep.join(COLLECTED), text.as_bytes()) {
        return failure(e);
    }
    let done = states.iter().filter(|(s, _)| *s == State::Done).count();
    println!(
        "wrote {} ({} of {} variants done{}) and {}",
        sheet_path.display(),
        done,
        m.variants.len(),
        view.map(|v| format!("; view '{}', frame {}", v, frame))
            .unwrap_or_else(|| "; no frames to show".into()),
        csv_path.display()
    );
    0
}

fn csv_cell(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

const PAD: u32 = 8;
const BG: [u8; 4] = [24, 24, 28, 255];
const FG: [u8; 4] = [230, 230, 230, 255];
const DIM: [u8; 4] = [60, 60, 66, 255];
const BAD: [u8; 4] = [240, 110, 100, 255];

fn contact_sheet(
    a: &CollectArgs,
    m: &Manifest,
    states: &[(State, Option<RunResult>)],
    view: Option<&str>,
    frame: u32,
) -> Canvas {
    let n = m.variants.len().max(1) as u32;
    let columns = a
        .columns
        .or_else(|| {
            m.axes
                .last()
                .map(|x| x.values.len() as u32)
                .filter(|&c| c > 1 && m.axes.len() > 1)
        })
        .unwrap_or_else(|| (n as f64).sqrt().ceil() as u32)
        .clamp(1, n);
    let rows = n.div_ceil(columns);
    let lines = m.axes.len().max(1) as u32 + 1;
    let label_w = m
        .variants
        .iter()
        .flat_map(|v| v.labels())
        .map(|l| l.chars().count() as u32 * font::ADVANCE)
        .max()
        .unwrap_or(0);
    let cell_w = a.thumb.max(label_w.min(a.thumb * 2));
    let cell_h = a.thumb + 4 + lines * font::LINE;
    let mut c = Canvas::new(
        PAD + columns * (cell_w + PAD),
        PAD + rows * (cell_h + PAD),
        BG,
    );
    for (v, (s, _)) in m.variants.iter().zip(states) {
        let i = v.index as u32;
        let x0 = (PAD + (i % columns) * (cell_w + PAD)) as i64;
        let y0 = (PAD + (i / columns) * (cell_h + PAD)) as i64;
        let picture = match (s, view) {
            (State::Done, Some(view)) => font::read_png(&frame_path(&a.sweep, v, view, frame)).ok(),
            _ => None,
        };
        match picture {
            Some(p) => blit_fit(&mut c, &p, x0, y0, a.thumb),
            None => {
                for y in 0..a.thumb as i64 {
                    for x in 0..a.thumb as i64 {
                        c.put(x0 + x, y0 + y, DIM);
                    }
                }
                let word = match s {
                    State::Done => "no frame",
                    other => other.name(),
                };
                let colour = if *s == State::Failed || *s == State::Killed {
                    BAD
                } else {
                    FG
                };
                c.text(x0 + 6, y0 + 6, word, colour);
            }
        }
        let mut y = y0 + a.thumb as i64 + 4;
        c.text(
            x0,
            y,
            &format!("#{} {}", v.index, s.name()),
            if *s == State::Done { FG } else { BAD },
        );
        for l in v.labels() {
            y += font::LINE as i64;
            // Long labels keep their end (the value).
            let max = (cell_w / font::ADVANCE) as usize;
            let chars: Vec<char> = l.chars().collect();
            let shown: String = if chars.len() > max && max > 1 {
                std::iter::once('~')
                    .chain(chars[chars.len() - (max - 1)..].iter().copied())
                    .collect()
            } else {
                l
            };
            c.text(x0, y, &shown, FG);
        }
    }
    c
}

/// Scales `p` (nearest sample) to fit a `size`×`size` box at (x0, y0).
fn blit_fit(c: &mut Canvas, p: &Canvas, x0: i64, y0: i64, size: u32) {
    let scale = size as f64 / p.width.max(p.height).max(1) as f64;
    let w = ((p.width as f64 * scale).round() as u32).max(1);
    let h = ((p.height as f64 * scale).round() as u32).max(1);
    let ox = x0 + ((size - w.min(size)) / 2) as i64;
    let oy = y0 + ((size - h.min(size)) / 2) as i64;
    for y in 0..h {
        let sy = ((y as f64 + 0.5) / scale) as u32;
        for x in 0..w {
            let sx = ((x as f64 + 0.5) / scale) as u32;
            let i = ((sy.min(p.height - 1) * p.width + sx.min(p.width - 1)) * 4) as usize;
            let px = &p.pixels[i..i + 4];
            c.put(ox + x as i64, oy + y as i64, [px[0], px[1], px[2], 255]);
        }
    }
}
