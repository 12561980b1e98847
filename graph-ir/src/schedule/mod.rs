//! Inter-kernel optimisation over the frame schedule (Taichi thesis ch. 4,
//! done statically): Weft knows every launch of a frame ahead of time
//! (execution wires, `repeat`, expanded tapes), so the state-flow graph
//! (`sfg`) of the whole schedule is built at compile time and the passes
//! below rewrite the schedule for every backend at once.
//!
//! Runs as the pipeline's `schedule` stage (`passes::Stage::Schedule`),
//! after `autodiff` (tapes, optimize nodes and views are plain launches by
//! then) and before `lower_access` (field accesses still name their fields,
//! so read and write sets are exact per field; `clear` steps are still
//! steps). One pass per file, with its pre/postconditions:
//! - `list_gen`: a `Step::ListGen` before every struct-for over a sparse
//!   field (always runs: `passes::sparse_list` expands these steps);
//! - `clear_elim`: redundant-clear removal;
//! - `dead_store`: dead-store elimination across launches;
//! - `list_reuse`: list-generation removal;
//! - `fusion`: task fusion (consecutive launches over one iteration space
//!   whose invocations cannot see each other become one kernel).
//!
//! `PassOptions::interkernel` (`--no-interkernel` on the CLI) turns the
//! last four off. Every pass keeps results bit-identical.

pub mod clear_elim;
pub mod dead_store;
pub mod fusion;
pub mod list_gen;
pub mod list_reuse;
pub mod sfg;
pub mod unlaunched;

use crate::ir::*;
use std::fmt::Write;

/// Kernel launches one frame runs (`on_frame`, repeats multiplied out;
/// list and clear steps count as the launches they expand to when the
/// schedule is still abstract: three and one).
pub fn launches_per_frame(p: &Program) -> u64 {
    launches(&p.schedule.on_frame)
}

/// Kernel launches of a step list (see [`launches_per_frame`]).
pub fn launches(steps: &[Step]) -> u64 {
    steps.iter().fold(0u64, |acc, s| {
        acc.saturating_add(match s {
            Step::Launch(_) => 1,
            Step::ListGen { .. } => 3,
            Step::Clear { .. } => 1,
            Step::Repeat { count, body, .. } => launches(body).saturating_mul(*count as u64),
            Step::Tape { body, .. } => launches(body).saturating_mul(2),
            Step::Optimize { spec, body, .. } => {
                launches(body).saturating_mul(2 * spec.iterations as u64)
            }
        })
    })
}

/// The schedule as text: `schedule on_start` and `schedule on_frame`, then
/// one step a line, repeat bodies indented (read back by [`parse_schedule`]).
pub fn print_schedule(p: &Program) -> String {
    let mut out = String::new();
    for (name, steps) in [
        ("on_start", &p.schedule.on_start),
        ("on_frame", &p.schedule.on_frame),
    ] {
        let _ = writeln!(out, "schedule {}", name);
        print_steps(&mut out, p, steps, 1);
    }
    out
}

fn print_steps(out: &mut String, p: &Program, steps: &[Step], depth: usize) {
    let pad = "  ".repeat(depth);
    for s in steps {
        match s {
            Step::Launch(k) => {
                let _ = writeln!(
                    out,
                    "{}launch K{} '{}'",
                    pad,
                    k.index(),
                    p.kernels[*k].label()
                );
            }
            Step::ListGen { layout } => {
                let _ = writeln!(
                    out,
                    "{}list L{} '{}'",
                    pad,
                    layout.index(),
                    p.layouts[*layout].node_id
                );
            }
            Step::Clear { node_id, layout } => {
                let _ = writeln!(out, "{}clear L{} '{}'", pad, layout.index(), node_id);
            }
            Step::Repeat {
                node_id,
                count,
                index,
                reverse,
                start,
                body,
            } => {
                let _ = writeln!(
                    out,
                    "{}repeat '{}' x{}{}{}{}",
                    pad,
                    node_id,
                    count,
                    index
                        .as_ref()
                        .map(|i| format!(" index={}", i))
                        .unwrap_or_default(),
                    if *reverse { " reverse" } else { "" },
                    if *start != 0 {
                        format!(" start={}", start)
                    } else {
                        String::new()
                    },
                );
                print_steps(out, p, body, depth + 1);
            }
            Step::Tape { node_id, body, .. } | Step::Optimize { node_id, body, .. } => {
                let kind = if matches!(s, Step::Tape { .. }) {
                    "tape"
                } else {
                    "optimize"
                };
                let _ = writeln!(out, "{}{} '{}'", pad, kind, node_id);
                print_steps(out, p, body, depth + 1);
            }
        }
    }
}

/// Reads [`print_schedule`]'s text (launches, lists, clears and repeats;
/// tapes and optimize nodes are not read) into `p.schedule`; kernels and
/// layouts are named by handle (`K3`, `L1`) and must exist in `p`.
pub fn parse_schedule(text: &str, p: &mut Program) -> Result<(), ParseError> {
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .collect();
    let err = |line: usize, message: String| ParseError {
        line: line + 1,
        col: 1,
        message,
    };
    let mut i = 0;
    let mut schedule = Schedule::default();
    while i < lines.len() {
        let (n, l) = lines[i];
        let target = match l.trim_end() {
            "schedule on_start" => &mut schedule.on_start,
            "schedule on_frame" => &mut schedule.on_frame,
            _ => {
                return Err(err(
                    n,
                    "expected 'schedule on_start' or 'schedule on_frame'".into(),
                ))
            }
        };
        i += 1;
        *target = steps(p, &lines, &mut i, 1, &err)?;
    }
    p.schedule = schedule;
    Ok(())
}

fn steps(
    p: &Program,
    lines: &[(usize, &str)],
    i: &mut usize,
    depth: usize,
    err: &dyn Fn(usize, String) -> ParseError,
) -> Result<Vec<Step>, ParseError> {
    let mut out = vec![];
    let pad = "  ".repeat(depth);
    while *i < lines.len() {
        let (n, l) = lines[*i];
        let Some(rest) = l.strip_prefix(&pad) else {
            break;
        };
        if rest.starts_with(' ') {
            return Err(err(n, "a line indented deeper than a repeat body".into()));
        }
        *i += 1;
        let handle = |s: &str, c: char| -> Result<(usize, String), ParseError> {
            let s = s
                .strip_prefix(c)
                .ok_or_else(|| err(n, format!("expected {}N", c)))?;
            let (num, name) = s.split_once(' ').unwrap_or((s, ""));
            let num: usize = num
                .parse()
                .map_err(|_| err(n, format!("bad handle {}{}", c, num)))?;
            Ok((num, name.trim().trim_matches('\'').to_string()))
        };
        let layout = |num: usize| -> Result<LayoutId, ParseError> {
            p.layouts
                .handles()
                .nth(num)
                .ok_or_else(|| err(n, format!("no layout L{}", num)))
        };
        if let Some(r) = rest.strip_prefix("launch ") {
            let (num, _) = handle(r, 'K')?;
            let k = p
                .kernels
                .handles()
                .nth(num)
                .ok_or_else(|| err(n, format!("no kernel K{}", num)))?;
            out.push(Step::Launch(k));
        } else if let Some(r) = rest.strip_prefix("list ") {
            let (num, _) = handle(r, 'L')?;
            out.push(Step::ListGen {
                layout: layout(num)?,
            });
        } else if let Some(r) = rest.strip_prefix("clear ") {
            let (num, node_id) = handle(r, 'L')?;
            out.push(Step::Clear {
                node_id,
                layout: layout(num)?,
            });
        } else if let Some(r) = rest.strip_prefix("repeat '") {
            let (node_id, r) = r
                .split_once("' x")
                .ok_or_else(|| err(n, "expected repeat 'NODE' xCOUNT".into()))?;
            let mut words = r.split_whitespace();
            let count: u32 = words
                .next()
                .and_then(|c| c.parse().ok())
                .ok_or_else(|| err(n, "bad repeat count".into()))?;
            let (mut index, mut reverse, mut start) = (None, false, 0);
            for w in words {
                if let Some(x) = w.strip_prefix("index=") {
                    index = Some(x.to_string());
                } else if w == "reverse" {
                    reverse = true;
                } else if let Some(x) = w.strip_prefix("start=") {
                    start = x.parse().map_err(|_| err(n, "bad start".into()))?;
                } else {
                    return Err(err(n, format!("unknown repeat option '{}'", w)));
                }
            }
            let body = steps(p, lines, i, depth + 1, err)?;
            out.push(Step::Repeat {
                node_id: node_id.to_string(),
                count,
                index,
                reverse,
                start,
                body,
            });
        } else {
            return Err(err(
                n,
                "expected 'launch', 'list', 'clear' or 'repeat'".into(),
            ));
        }
    }
    Ok(out)
}
