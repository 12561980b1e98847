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
    let mut out = Vec::with_capacity(10 + header.len() + a.words.len() * 4);
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for w in &a.words {
        out.extend_from_slice(&w.to_le_bytes());
    }
    let mut f = std::fs::File::create(path)?;
    f.write_all(&out)
}

pub fn read_npy(path: &Path) -> Result<NpyArray, String> {
    // Reading a device (/dev/zero) or FIFO, or a file far larger than any field, would never finish or exhaust memory.
    if let Ok(m) = std::fs::metadata(path) {
        if !m.is_file() || m.len() > (1 << 31) + (1 << 20) {
            return Err(format!(
                "cannot read {}: not a regular .npy file of at most 2 GiB",
                path.display()
            ));
        }
    }
    let bytes = super::provided::read(path)
        .map_err(|e| format!("cannot read {}: {}", path.display(), e))?;
    parse_npy(&bytes).map_err(|e| format!("{}: {}", path.display(), e))
}

pub fn parse_npy(bytes: &[u8]) -> Result<NpyArray, String> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err("not a .npy file (bad magic)".into());
    }
    let (hlen, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(format!("unsupported .npy version {}", v)),
    };
    let header = bytes
        .get(start..start + hlen)
        .ok_or("truncated .npy header")?;
    let header = std::str::from_utf8(header).map_err(|_| "non-text .npy header")?;
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
    let count = shape
        .iter()
        .try_fold(1usize, |a, &b| a.checked_mul(b))
        .ok_or("shape too large")?;
    let data = &bytes[start + hlen..];
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
    let need = count.checked_mul(size).ok_or("shape too large")?;
    if data.len() < need {
        return Err(format!(
            "file holds {} bytes of data but its shape needs {}",
            data.len(),
            need
        ));
    }
    let mut words = Vec::with_capacity(count * dtype.words());
    for i in 0..count {
        let b = &data[i * size..(i + 1) * size];
        match size {
            1 => words.push(b[0] as u32),
            4 => words.push(u32::from_le_bytes(b.try_into().expect("4 bytes"))),
            _ => {
                let v = u64::from_le_bytes(b.try_into().expect("8 bytes"));
                words.extend([v as u32, (v >> 32) as u32]);
            }
        }
    }
    Ok(NpyArray {
        dtype,
        shape,
        words,
    })
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
