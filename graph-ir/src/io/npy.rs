//! Reading and writing NumPy `.npy` files (format versions 1-3, little-endian
//! f4 / i4 / u4 / f8 / i8 / u1 / b1 in C order). f8/i8 are narrowed to 32 bits on read.

use std::io::Write;
use std::path::Path;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    F32,
    I32,
    U32,
    /// 64-bit elements: two words each, low first.
    F64,
    I64,
    U64,
}

impl DType {
    pub fn descr(self) -> &'static str {
        match self {
            DType::F32 => "<f4",
            DType::I32 => "<i4",
            DType::U32 => "<u4",
            DType::F64 => "<f8",
            DType::I64 => "<i8",
            DType::U64 => "<u8",
        }
    }
    /// Whether data of this type fills a field of type `to` (see
    /// `NpyArray::narrowed`).
    pub fn narrows_to(self, to: DType) -> bool {
        matches!(
            (self, to),
            (DType::F64, DType::F32) | (DType::I64, DType::I32)
        ) || self == to
    }
    /// 32-bit words per element.
    pub fn words(self) -> usize {
        match self {
            DType::F64 | DType::I64 | DType::U64 => 2,
            _ => 1,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct NpyArray {
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// Elements as 32-bit words, C order (64-bit elements as two words,
    /// low first).
    pub words: Vec<u32>,
}

impl NpyArray {
    /// `narrowed`, reusing the words when the type already is `to`.
    pub fn into_narrowed(self, to: DType) -> Option<NpyArray> {
        if self.dtype == to {
            return Some(self);
        }
        self.narrowed(to)
    }

    /// The array converted to 32-bit `to` (F32, I32 or U32) the way Weft
    /// has always read 64-bit files into 32-bit fields: f64 rounds to the
    /// nearest f32, i64 wraps. `None` when no such conversion exists.
    pub fn narrowed(&self, to: DType) -> Option<NpyArray> {
        let words = match (self.dtype, to) {
            (a, b) if a == b => self.words.clone(),
            (DType::F64, DType::F32) => self
                .words
                .chunks(2)
                .map(|w| (f64::from_bits(w[0] as u64 | (w[1] as u64) << 32) as f32).to_bits())
                .collect(),
            (DType::I64, DType::I32) => self.words.chunks(2).map(|w| w[0]).collect(),
            _ => return None,
        };
        Some(NpyArray {
            dtype: to,
            shape: self.shape.clone(),
            words,
        })
    }
}

pub fn write_npy(path: &Path, a: &NpyArray) -> std::io::Result<()> {
    let shape = match a.shape.len() {
        1 => format!("({},)", a.shape[0]),
        _ => format!(
            "({})",
            a.shape
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
        a.dtype.descr(),
        shape
    );
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    // Streamed through the one atomic writer: a link planted at `path` is
    // replaced, never written through (see `io::AtomicFile`).
    let mut f = std::io::BufWriter::with_capacity(1 << 20, super::AtomicFile::create(path)?);
    f.write_all(b"\x93NUMPY\x01\x00")?;
    f.write_all(&(header.len() as u16).to_le_bytes())?;
    f.write_all(header.as_bytes())?;
    for w in &a.words {
        f.write_all(&w.to_le_bytes())?;
    }
    f.into_inner().map_err(|e| e.into_error())?.commit()
}

/// What a `.npy` header says: read, and checked by the caller, before any
/// of the body is.
#[derive(Clone, Debug, PartialEq)]
pub struct NpyHeader {
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// Bytes per element in the file (1 for `u1`/`b1`, read as u32).
    size: usize,
}

impl NpyHeader {
    /// Bytes of body the shape needs.
    pub fn body_bytes(&self) -> Option<usize> {
        self.shape
            .iter()
            .try_fold(1usize, |a, &b| a.checked_mul(b))?
            .checked_mul(self.size)
    }
}

/// The whole array at `path`.
pub fn read_npy(path: &Path) -> Result<NpyArray, String> {
    read_npy_checked(path, |_| Ok(()))
}

/// The array at `path`, after `check` accepts its header: a file of the
/// wrong shape or type is refused having read only its header, and the
/// body is streamed into words (never held as bytes as well), so a large
/// input peaks at its words, once.
pub fn read_npy_checked(
    path: &Path,
    check: impl FnOnce(&NpyHeader) -> Result<(), String>,
) -> Result<NpyArray, String> {
    // The caller's own refusal is returned as it is (it names the file as
    // the caller knows it); format errors are prefixed with the path.
    let refused = std::cell::Cell::new(None);
    let check = |h: &NpyHeader| {
        check(h).map_err(|e| {
            refused.set(Some(e));
            String::new()
        })
    };
    let at = |e: String| {
        refused
            .take()
            .unwrap_or_else(|| format!("{}: {}", path.display(), e))
    };
    if super::provided::is_provided(path) {
        let bytes = super::provided::read(path)
            .map_err(|e| format!("cannot read {}: {}", path.display(), e))?;
        return read_npy_from(&bytes[..], None, check).map_err(at);
    }
    // Reading a device (/dev/zero) or FIFO, or a file far larger than any field, would never finish or exhaust memory.
    let m =
        std::fs::metadata(path).map_err(|e| format!("cannot read {}: {}", path.display(), e))?;
    if !m.is_file() || m.len() > (1 << 31) + (1 << 20) {
        return Err(format!(
            "cannot read {}: not a regular .npy file of at most 2 GiB",
            path.display()
        ));
    }
    let f =
        std::fs::File::open(path).map_err(|e| format!("cannot read {}: {}", path.display(), e))?;
    read_npy_from(
        std::io::BufReader::with_capacity(1 << 16, f),
        Some(m.len()),
        check,
    )
    .map_err(at)
}

/// An array from bytes in memory.
pub fn parse_npy(bytes: &[u8]) -> Result<NpyArray, String> {
    read_npy_from(bytes, Some(bytes.len() as u64), |_| Ok(()))
}

/// Reads the header from `r`, hands it to `check`, then streams the body.
/// `len`, the stream's total length when known, refuses a body shorter than
/// the shape before anything is allocated for it.
pub fn read_npy_from<R: std::io::Read>(
    mut r: R,
    len: Option<u64>,
    check: impl FnOnce(&NpyHeader) -> Result<(), String>,
) -> Result<NpyArray, String> {
    let mut head = [0u8; 12];
    let mut got = 0;
    while got < 10 {
        match r.read(&mut head[got..10]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    if got < 10 || &head[..6] != b"\x93NUMPY" {
        return Err("not a .npy file (bad magic)".into());
    }
    let (hlen, start) = match head[6] {
        1 => (u16::from_le_bytes([head[8], head[9]]) as usize, 10),
        2 | 3 => {
            r.read_exact(&mut head[10..12])
                .map_err(|_| "truncated .npy header")?;
            (
                u32::from_le_bytes([head[8], head[9], head[10], head[11]]) as usize,
                12,
            )
        }
        v => return Err(format!("unsupported .npy version {}", v)),
    };
    // numpy writes headers of a few hundred bytes; a length past this is a
    // damaged or hostile file, refused before allocating it.
    if hlen > 1 << 20 || len.is_some_and(|l| ((start + hlen) as u64) > l) {
        return Err("truncated .npy header".into());
    }
    let mut header = vec![0u8; hlen];
    r.read_exact(&mut header)
        .map_err(|_| "truncated .npy header")?;
    let header = std::str::from_utf8(&header).map_err(|_| "non-text .npy header")?;
    let h = parse_header(header)?;
    check(&h)?;
    let need = h.body_bytes().ok_or("shape too large")?;
    let body_len = len.map(|l| l - (start + hlen) as u64);
    if let Some(have) = body_len.filter(|&b| b < need as u64) {
        return Err(format!(
            "file holds {} bytes of data but its shape needs {}",
            have, need
        ));
    }
    let count = need / h.size;
    let per = h.dtype.words();
    // Capacity grows with what arrives when the length is unknown, so a
    // header's claim alone never allocates.
    let cap = if body_len.is_some() {
        count * per
    } else {
        (count * per).min(1 << 20)
    };
    let mut words = Vec::with_capacity(cap);
    let mut buf = vec![0u8; (64 << 10) / 8 * 8];
    let mut done = 0usize;
    while done < need {
        let want = (need - done).min(buf.len());
        r.read_exact(&mut buf[..want]).map_err(|_| {
            format!(
                "file holds fewer bytes of data than its shape needs ({})",
                need
            )
        })?;
        for b in buf[..want].chunks_exact(h.size) {
            match h.size {
                1 => words.push(b[0] as u32),
                4 => words.push(u32::from_le_bytes(b.try_into().expect("4 bytes"))),
                _ => {
                    let v = u64::from_le_bytes(b.try_into().expect("8 bytes"));
                    words.extend([v as u32, (v >> 32) as u32]);
                }
            }
        }
        done += want;
    }
    Ok(NpyArray {
        dtype: h.dtype,
        shape: h.shape,
        words,
    })
}

fn parse_header(header: &str) -> Result<NpyHeader, String> {
    let descr = dict_value(header, "descr").ok_or("no 'descr' in .npy header")?;
    let quote = descr
        .chars()
        .next()
        .filter(|c| *c == '\'' || *c == '"')
        .ok_or("bad 'descr' in .npy header")?;
    let descr = &descr[1..];
    let descr = &descr[..descr.find(quote).ok_or("bad 'descr' in .npy header")?];
    if dict_value(header, "fortran_order").is_some_and(|v| v.starts_with("True")) {
        return Err(
            "Fortran-ordered arrays are not supported; save with np.ascontiguousarray".into(),
        );
    }
    let shape_text = dict_value(header, "shape").ok_or("no 'shape' in .npy header")?;
    let inner = shape_text.trim_start_matches('(');
    let inner = &inner[..inner.find(')').ok_or("bad shape in .npy header")?];
    let shape: Vec<usize> = inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .map_err(|_| format!("bad shape entry '{}'", s))
        })
        .collect::<Result<_, _>>()?;
    let (size, dtype): (usize, DType) = match descr {
        "<f4" => (4, DType::F32),
        "<i4" => (4, DType::I32),
        "<u4" => (4, DType::U32),
        "<f8" => (8, DType::F64),
        "<i8" => (8, DType::I64),
        "<u8" => (8, DType::U64),
        "|u1" | "|b1" => (1, DType::U32),
        d => {
            return Err(format!(
                "unsupported dtype '{}' (use float32, int32, uint32, float64, int64 or uint64)",
                d
            ))
        }
    };
    let h = NpyHeader { dtype, shape, size };
    h.body_bytes().ok_or("shape too large")?;
    Ok(h)
}

fn dict_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let p = header
        .find(&format!("'{}'", key))
        .or_else(|| header.find(&format!("\"{}\"", key)))?;
    let rest = &header[p + key.len() + 2..];
    let colon = rest.find(':')?;
    Some(rest[colon + 1..].trim_start())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `.npy` header for `descr` and `shape`, padded as numpy pads it.
    fn header(descr: &str, shape: &str) -> Vec<u8> {
        let mut h = format!(
            "{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
            descr, shape
        );
        h.push_str(&" ".repeat((64 - (10 + h.len() + 1) % 64) % 64));
        h.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(h.len() as u16).to_le_bytes());
        out.extend_from_slice(h.as_bytes());
        out
    }

    /// A reader that yields `head`, then zeros without end, counting bytes.
    struct Counting<'a> {
        head: &'a [u8],
        read: &'a std::cell::Cell<usize>,
    }
    impl std::io::Read for Counting<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let at = self.read.get();
            let n = buf.len().min(1 << 16);
            for (i, b) in buf[..n].iter_mut().enumerate() {
                *b = self.head.get(at + i).copied().unwrap_or(0);
            }
            self.read.set(at + n);
            Ok(n)
        }
    }

    /// The caller's check sees the header before any body byte is read:
    /// a refusal reads the header (and at most one buffer) only.
    #[test]
    fn a_refused_header_reads_no_body() {
        let head = header("<f4", "(1048576, 1024)");
        let read = std::cell::Cell::new(0);
        let r = std::io::BufReader::with_capacity(
            4096,
            Counting {
                head: &head,
                read: &read,
            },
        );
        let e = read_npy_from(r, None, |h| {
            assert_eq!(h.shape, vec![1048576, 1024]);
            Err("wrong shape".into())
        })
        .unwrap_err();
        assert_eq!(e, "wrong shape");
        assert!(read.get() <= 4096, "read {} bytes", read.get());
        // Accepted, the body is streamed: 4 GiB claimed of an endless
        // reader would be read whole, so take a small shape.
        let head = header("<i4", "(3,)");
        let read = std::cell::Cell::new(0);
        let a = read_npy_from(
            Counting {
                head: &head,
                read: &read,
            },
            None,
            |_| Ok(()),
        )
        .unwrap();
        assert_eq!(a.words, vec![0, 0, 0]);
    }

    fn vm_hwm_kib() -> Option<u64> {
        let s = std::fs::read_to_string("/proc/self/status").ok()?;
        let l = s.lines().find(|l| l.starts_with("VmHWM:"))?;
        l.split_whitespace().nth(1)?.parse().ok()
    }

    /// A graph whose `.npy` input has the wrong shape is refused without
    /// the body being read: the process's peak resident memory grows by
    /// far less than the 256 MiB body (main read it whole, then converted
    /// it: +512 MiB). Measured in a child process running only this test,
    /// so no other test's memory counts.
    #[test]
    fn a_wrong_npy_shape_is_refused_before_the_body_is_read() {
        const CHILD: &str = "WEFT_NPY_PEAK_CHILD";
        const NAME: &str = "io::npy::tests::a_wrong_npy_shape_is_refused_before_the_body_is_read";
        if let Ok(dir) = std::env::var(CHILD) {
            let graph = r#"{"format": "weft-graph", "version": 1, "nodes": [
                {"id": "g", "kind": "dense", "params": {"shape": [16]}},
                {"id": "x", "kind": "field", "params": {"type": "f32", "init": {"npy": "big.npy"}}},
                {"id": "k", "kind": "kernel", "params": {"over": "x", "code": "fn kernel(i: i32) {\n    x[i] = x[i] + 1.0;\n}\n"}},
                {"id": "tick", "kind": "on_frame"}],
                "wires": [{"from": "g.cells", "to": "x.layout"}, {"from": "x.field", "to": "k.x"}],
                "exec": [{"from": "tick.then", "to": "k"}]}"#;
            let doc = crate::graph::GraphDoc::parse(graph).unwrap();
            let before = vm_hwm_kib().unwrap();
            let e = crate::graph::build_program(
                &doc,
                &crate::graph::BuildOptions {
                    base_dir: dir.into(),
                },
            )
            .unwrap_err();
            let after = vm_hwm_kib().unwrap();
            println!(
                "PEAK {} {}",
                after.saturating_sub(before),
                e.to_string().replace('\n', " ")
            );
            return;
        }
        if vm_hwm_kib().is_none() {
            return; // no /proc: nothing to measure with
        }
        let dir = std::env::temp_dir().join(format!("weft-npy-peak-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("big.npy");
        let head = header("<f4", "(65536, 1024)");
        std::fs::write(&p, &head).unwrap();
        // Sparse: the body takes no disk, but reads back as 256 MiB of zeros.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(head.len() as u64 + (256 << 20))
            .unwrap();
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([NAME, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD, &dir)
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let line = text
            .lines()
            .find_map(|l| l.split_once("PEAK ").map(|x| x.1))
            .unwrap_or_else(|| {
                panic!(
                    "the child printed no PEAK line:\n{}{}",
                    text,
                    String::from_utf8_lossy(&out.stderr)
                )
            });
        let (grew, message) = line.split_once(' ').unwrap();
        assert!(
            message.contains("has shape [65536, 1024] but field 'x' needs [16]"),
            "{}",
            message
        );
        let grew: u64 = grew.parse().unwrap();
        assert!(
            grew < 32 << 10,
            "peak memory grew by {} KiB reading a refused file",
            grew
        );
    }
    #[test]
    fn round_trips() {
        let dir = std::env::temp_dir().join(format!("weft-npy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.npy");
        let a = NpyArray {
            dtype: DType::F32,
            shape: vec![2, 3],
            words: (0..6).map(|i| (i as f32).to_bits()).collect(),
        };
        write_npy(&p, &a).unwrap();
        assert_eq!(read_npy(&p).unwrap(), a);
        assert!(parse_npy(b"garbage").is_err());
    }
}
