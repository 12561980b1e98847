//! How much field memory a backend may allocate on this machine, and the
//! check every engine runs before it allocates its root buffers.
//!
//! Two kinds of limit apply to the root buffers (one per layout tree):
//! - **hard limits**, which no flag can lift: the IR addresses words with
//!   32-bit integers on every backend (`ir::layout::MAX_LAYOUT_WORDS`,
//!   2^32 words = 16 GiB per tree), and the wgpu device's `max_buffer_size`
//!   per buffer;
//! - **the budget**, the memory the machine has for all trees together:
//!   free RAM on vm and cpu (`MemAvailable` in `/proc/meminfo` on Linux; on
//!   other systems, where it is not read, a fixed [`FALLBACK_BUDGET`]), free
//!   device memory on cuda (`cuMemGetInfo`), free RAM for a wgpu adapter that
//!   is the CPU itself (lavapipe) and none for other wgpu adapters (wgpu
//!   does not report device memory; an allocation the driver refuses is
//!   still reported as an error). `--max-memory` replaces the budget.

use crate::RuntimeError;
use weft_ir::ir::layout::{root_words, MAX_LAYOUT_WORDS};
use weft_ir::ir::Program;

/// The budget on systems where free RAM is not read (not Linux): 8 GiB.
pub const FALLBACK_BUDGET: u64 = 8 << 30;

/// One limit on root buffers: its size in bytes and, for the error
/// message, what imposes it ("the wgpu device allows … (max_buffer_size)").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limit {
    pub bytes: u64,
    /// Says what allows how much and where the number came from, `{}`
    /// standing for the size: `the wgpu device 'X' allows {} per buffer
    /// (max_buffer_size)`.
    pub source: String,
}

/// Every limit a backend's root buffers must respect.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryLimits {
    /// Each root buffer on its own (the wgpu device's `max_buffer_size`).
    pub per_buffer: Option<Limit>,
    /// All root buffers together (the budget); `None` where unknown.
    pub total: Option<Limit>,
    /// `total` came from `--max-memory` rather than the machine.
    pub overridden: bool,
}

impl MemoryLimits {
    /// The budget on the CPU backends: free RAM, or `max_memory` when given.
    pub fn cpu(max_memory: Option<u64>) -> MemoryLimits {
        MemoryLimits::with_budget(free_ram(), max_memory)
    }

    /// `machine` as the budget unless `max_memory` overrides it.
    pub fn with_budget(machine: Option<Limit>, max_memory: Option<u64>) -> MemoryLimits {
        match max_memory {
            Some(bytes) => MemoryLimits {
                per_buffer: None,
                total: Some(Limit {
                    bytes,
                    source: "--max-memory".into(),
                }),
                overridden: true,
            },
            None => MemoryLimits {
                per_buffer: None,
                total: machine,
                overridden: false,
            },
        }
    }

    /// Checks every root buffer of `program`: the IR's 2^32-word address
    /// space and the per-buffer limit for each tree, the budget for all of
    /// them. The error names the layout node, the bytes it needs, the limit
    /// and where the limit comes from.
    pub fn check(&self, program: &Program) -> Result<(), RuntimeError> {
        let roots: Vec<(String, u64)> = program
            .roots()
            .map(|r| {
                (
                    program.layouts[r].node_id.clone(),
                    root_words(program, r) * 4,
                )
            })
            .collect();
        for (node, bytes) in &roots {
            if *bytes > MAX_LAYOUT_WORDS * 4 {
                return Err(too_big(
                    node,
                    format!(
                        "the layout needs {} ({} words); word addresses are 32-bit on every backend, so one layout tree holds at most 2^32 words ({})",
                        fmt_bytes(*bytes),
                        bytes / 4,
                        fmt_bytes(MAX_LAYOUT_WORDS * 4)
                    ),
                ));
            }
            if let Some(l) = &self.per_buffer {
                if *bytes > l.bytes {
                    return Err(too_big(
                        node,
                        format!(
                            "the layout needs {}; {}; split the domain over several layout trees (root nodes)",
                            fmt_bytes(*bytes),
                            l.source.replace("{}", &fmt_bytes(l.bytes))
                        ),
                    ));
                }
            }
        }
        if let Some(l) = &self.total {
            let sum: u64 = roots.iter().map(|r| r.1).sum();
            if sum > l.bytes {
                let (node, bytes) = roots
                    .iter()
                    .max_by_key(|r| r.1)
                    .expect("a nonzero sum has a root");
                let need = if roots.len() == 1 {
                    format!("the layout needs {}", fmt_bytes(*bytes))
                } else {
                    format!(
                        "the layout needs {} ({} for all {} layout trees)",
                        fmt_bytes(*bytes),
                        fmt_bytes(sum),
                        roots.len()
                    )
                };
                let allows = if self.overridden {
                    format!("--max-memory allows {}", fmt_bytes(l.bytes))
                } else {
                    format!(
                        "{}; use --max-memory to override",
                        l.source.replace("{}", &fmt_bytes(l.bytes))
                    )
                };
                return Err(too_big(node, format!("{}; {}", need, allows)));
            }
        }
        Ok(())
    }

    /// One line for `weft check`: the budget and where it comes from.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(l) = &self.total {
            parts.push(if self.overridden {
                format!("--max-memory allows {}", fmt_bytes(l.bytes))
            } else {
                l.source.replace("{}", &fmt_bytes(l.bytes))
            });
        }
        if let Some(l) = &self.per_buffer {
            parts.push(l.source.replace("{}", &fmt_bytes(l.bytes)));
        }
        parts.push(format!(
            "at most {} per layout tree (32-bit word addresses)",
            fmt_bytes(MAX_LAYOUT_WORDS * 4)
        ));
        parts.join("; ")
    }
}

fn too_big(node: &str, message: String) -> RuntimeError {
    RuntimeError::Compile {
        node: node.to_string(),
        message: format!("layout node '{}': {}", node, message),
    }
}

/// Free RAM as the budget of the CPU backends: `MemAvailable` on Linux,
/// else [`FALLBACK_BUDGET`].
pub fn free_ram() -> Option<Limit> {
    if cfg!(target_os = "linux") {
        let text = std::fs::read_to_string("/proc/meminfo").ok()?;
        let kib = text.lines().find_map(|l| {
            l.strip_prefix("MemAvailable:")?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse::<u64>()
                .ok()
        })?;
        Some(Limit {
            bytes: kib * 1024,
            source: "this machine has {} of RAM available (MemAvailable in /proc/meminfo)".into(),
        })
    } else {
        Some(Limit {
            bytes: FALLBACK_BUDGET,
            source: "the CPU backends assume {} of RAM (free memory is not read on this system)"
                .into(),
        })
    }
}

/// `1.5 GiB`, `512.0 MiB`, `96 B`.
pub fn fmt_bytes(b: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (name, size) in UNITS {
        if b >= size {
            return format!("{:.1} {}", b as f64 / size as f64, name);
        }
    }
    format!("{} B", b)
}

/// Parses a size for `--max-memory`: a number with an optional unit, `B`,
/// `KiB`/`KB`/`K`, `MiB`/`MB`/`M`, `GiB`/`GB`/`G`, `TiB`/`TB`/`T` (all
/// binary: 1 GB = 1 GiB = 2^30 bytes), e.g. `40GiB`, `1.5G`, `512 MiB`.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("'{}' is not a size; write e.g. 40GiB, 512MiB or 1.5G", s))?;
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        u => {
            return Err(format!(
                "unknown unit '{}' in '{}'; units: B, KiB, MiB, GiB, TiB",
                u, s
            ))
        }
    };
    let bytes = n * scale as f64;
    if !bytes.is_finite() || bytes < 1.0 || bytes > u64::MAX as f64 {
        return Err(format!("'{}' is not a usable memory size", s));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_bytes("40GiB"), Ok(40 << 30));
        assert_eq!(parse_bytes("1.5G"), Ok(3 << 29));
        assert_eq!(parse_bytes("512 MiB"), Ok(512 << 20));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("3 parsecs").is_err());
        assert!(parse_bytes("0").is_err());
        assert_eq!(fmt_bytes(6 << 30), "6.0 GiB");
        assert_eq!(fmt_bytes(96), "96 B");
    }

    #[test]
    fn free_ram_is_read() {
        let l = free_ram().expect("readable");
        assert!(l.bytes > 0);
    }
}
