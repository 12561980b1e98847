//! A small OpenVDB (`.vdb`) writer: one `Tree_float_5_4_3` (or
//! `Tree_vec3s_5_4_3`) grid per file, file format 224, values stored raw
//! with OpenVDB's active-mask compression (only active voxels' values; every
//! inactive voxel is the background 0). No maintained Rust crate writes VDB
//! (vdb-rs only reads), so this follows OpenVDB's own code: `io/Archive.cc`
//! (header, grid descriptors with stream offsets), `Grid::writeMeta`,
//! `math::Transform::write` (a `UniformScaleTranslateMap`), `RootNode`,
//! `InternalNode` and `LeafNode::writeTopology/writeBuffers`, `NodeMask::save`
//! and `io::writeCompressedValues`. Checked with OpenVDB's Python module.

use std::collections::BTreeMap;

const MAGIC: i64 = 0x5644_4220;
/// OPENVDB_FILE_VERSION_MULTIPASS_IO: read by OpenVDB 6 and later.
const FILE_VERSION: u32 = 224;
/// `io::COMPRESS_ACTIVE_MASK`.
const COMPRESS_ACTIVE_MASK: u32 = 0x2;
/// `io::COMPRESS_ZIP`.
const COMPRESS_ZIP: u32 = 0x1;
/// `NO_MASK_OR_INACTIVE_VALS`: every inactive value is the background, so
/// only active values follow.
const NO_MASK_OR_INACTIVE_VALS: u8 = 0;

/// Values of one voxel: 1 component (float grid) or 3 (vec3s grid).
pub type Voxel = [f32; 3];

/// One grid to write.
pub struct Grid {
    /// Grid name (`gridName` in Houdini and Blender).
    pub name: String,
    /// 1 (a FloatGrid, class fog volume) or 3 (a Vec3SGrid).
    pub components: usize,
    /// World size of one voxel (uniform).
    pub voxel_size: f64,
    /// World position of voxel (0, 0, 0)'s centre.
    pub translation: [f64; 3],
    /// Active voxels: index coordinate and value (components past
    /// `components` ignored). Coordinates must be non-negative and listed once.
    pub voxels: Vec<([i32; 3], Voxel)>,
    /// Zip each node's values (`io::COMPRESS_ZIP`); else raw.
    pub zip: bool,
}

/// `io::writeData` of `bytes` (one node's values): raw, or with zip as
/// `io::zipToStream` writes it — the compressed size as an i64 and zlib's
/// bytes, or, where that is not smaller, minus the raw size and the raw
/// bytes (so no values give eight zero bytes).
fn put_values(out: &mut Vec<u8>, bytes: &[u8], zip: bool) {
    if !zip {
        out.extend_from_slice(bytes);
        return;
    }
    use std::io::Write;
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(6));
    let zipped = e
        .write_all(bytes)
        .and_then(|_| e.finish())
        .ok()
        .filter(|z| z.len() < bytes.len());
    match zipped {
        Some(z) => {
            out.extend((z.len() as i64).to_le_bytes());
            out.extend(z);
        }
        None => {
            out.extend((-(bytes.len() as i64)).to_le_bytes());
            out.extend_from_slice(bytes);
        }
    }
}

/// Leaf: 8³ voxels; lower internal node: 16³ leaves; upper: 32³ lowers.
struct Leaf {
    mask: [u64; 8],
    values: Vec<Voxel>,
}

type Lower = BTreeMap<u32, Leaf>;
type Upper = BTreeMap<u32, Lower>;

/// Offset of a child inside a node, OpenVDB's `coordToOffset` (x slowest).
fn offset(c: [i32; 3], log2: u32, child_total: u32) -> u32 {
    let m = (1i32 << (log2 + child_total)) - 1;
    let part = |v: i32| ((v & m) >> child_total) as u32;
    (part(c[0]) << (2 * log2)) | (part(c[1]) << log2) | part(c[2])
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u32).to_le_bytes());
    out.extend(s.as_bytes());
}

fn put_mask(out: &mut Vec<u8>, words: &[u64]) {
    for w in words {
        out.extend(w.to_le_bytes());
    }
}

fn put_vec3d(out: &mut Vec<u8>, v: [f64; 3]) {
    for c in v {
        out.extend(c.to_le_bytes());
    }
}

impl Grid {
    fn value_bytes(&self, v: &Voxel, out: &mut Vec<u8>) {
        for c in &v[..self.components] {
            out.extend(c.to_le_bytes());
        }
    }

    /// The file's bytes. `uuid`: 36 characters (8-4-4-4-12 hex digits).
    pub fn to_bytes(&self, uuid: &str) -> Vec<u8> {
        // Bucket the voxels: upper node origin -> lower offset -> leaf offset.
        let mut tree: BTreeMap<[i32; 3], Upper> = BTreeMap::new();
        for (c, v) in &self.voxels {
            let upper = [c[0] & !4095, c[1] & !4095, c[2] & !4095];
            let leaf = tree
                .entry(upper)
                .or_default()
                .entry(offset(*c, 5, 7))
                .or_default()
                .entry(offset(*c, 4, 3))
                .or_insert_with(|| Leaf {
                    mask: [0; 8],
                    values: vec![[0.0; 3]; 512],
                });
            let i = offset(*c, 3, 0) as usize;
            leaf.mask[i / 64] |= 1 << (i % 64);
            leaf.values[i] = *v;
        }
        let mut out = Vec::new();
        // Archive::writeHeader.
        out.extend(MAGIC.to_le_bytes());
        out.extend(FILE_VERSION.to_le_bytes());
        out.extend(10u32.to_le_bytes()); // library major
        out.extend(0u32.to_le_bytes()); // library minor
        out.push(1); // has grid offsets
        let mut id = uuid.as_bytes().to_vec();
        id.resize(36, b'0');
        out.extend(id);
        out.extend(0u32.to_le_bytes()); // file metadata: none
        out.extend(1i32.to_le_bytes()); // grid count
                                        // GridDescriptor::writeHeader.
        put_str(&mut out, &self.name);
        put_str(
            &mut out,
            if self.components == 3 {
                "Tree_vec3s_5_4_3"
            } else {
                "Tree_float_5_4_3"
            },
        );
        put_str(&mut out, ""); // instance parent
        let offsets_at = out.len();
        out.extend([0u8; 24]); // grid, block, end positions: patched below
        let grid_pos = out.len() as i64;
        let flags = COMPRESS_ACTIVE_MASK | if self.zip { COMPRESS_ZIP } else { 0 };
        out.extend(flags.to_le_bytes());
        // Grid metadata.
        let class = if self.components == 3 {
            "unknown"
        } else {
            "fog volume"
        };
        let meta: [(&str, &str); 2] = [("class", class), ("name", &self.name)];
        out.extend((meta.len() as u32).to_le_bytes());
        for (k, v) in meta {
            put_str(&mut out, k);
            put_str(&mut out, "string");
            put_str(&mut out, v);
        }
        // Transform: UniformScaleTranslateMap (ScaleTranslateMap::write).
        put_str(&mut out, "UniformScaleTranslateMap");
        let s = self.voxel_size;
        put_vec3d(&mut out, self.translation);
        put_vec3d(&mut out, [s; 3]); // scale
        put_vec3d(&mut out, [s; 3]); // voxel size
        put_vec3d(&mut out, [1.0 / s; 3]); // inverse scale
        put_vec3d(&mut out, [1.0 / (s * s); 3]); // inverse scale squared
        put_vec3d(&mut out, [0.5 / s; 3]); // inverse twice scale
                                           // Topology.
        let background: Voxel = [0.0; 3];
        out.extend(1i32.to_le_bytes()); // buffer count
        self.value_bytes(&background, &mut out);
        out.extend(0u32.to_le_bytes()); // root tiles
        out.extend((tree.len() as u32).to_le_bytes()); // root children
        for (origin, upper) in &tree {
            for c in origin {
                out.extend(c.to_le_bytes());
            }
            internal_topology(&mut out, 5, upper.keys(), self.zip);
            for lower in upper.values() {
                internal_topology(&mut out, 4, lower.keys(), self.zip);
                for leaf in lower.values() {
                    put_mask(&mut out, &leaf.mask);
                }
            }
        }
        let block_pos = out.len() as i64;
        // Buffers: each leaf's mask again, then its active values.
        for leaf in tree
            .values()
            .flat_map(|u| u.values())
            .flat_map(|l| l.values())
        {
            put_mask(&mut out, &leaf.mask);
            out.push(NO_MASK_OR_INACTIVE_VALS);
            let mut values = Vec::new();
            for (i, v) in leaf.values.iter().enumerate() {
                if leaf.mask[i / 64] >> (i % 64) & 1 == 1 {
                    self.value_bytes(v, &mut values);
                }
            }
            put_values(&mut out, &values, self.zip);
        }
        let end_pos = out.len() as i64;
        let mut pos = Vec::new();
        for p in [grid_pos, block_pos, end_pos] {
            pos.extend(p.to_le_bytes());
        }
        out[offsets_at..offsets_at + 24].copy_from_slice(&pos);
        out
    }
}

/// An internal node of 2^(3·log2) entries, every one a child or an
/// inactive background tile: child mask, (empty) value mask, and no values.
fn internal_topology<'a>(
    out: &mut Vec<u8>,
    log2: u32,
    children: impl Iterator<Item = &'a u32>,
    zip: bool,
) {
    let words = (1usize << (3 * log2)) / 64;
    let mut mask = vec![0u64; words];
    for &c in children {
        mask[c as usize / 64] |= 1 << (c % 64);
    }
    put_mask(out, &mask);
    put_mask(out, &vec![0u64; words]);
    out.push(NO_MASK_OR_INACTIVE_VALS);
    put_values(out, &[], zip);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_match_openvdb() {
        // LeafNode: x << 6 | y << 3 | z.
        assert_eq!(offset([1, 2, 3], 3, 0), (1 << 6) | (2 << 3) | 3);
        // Lower internal node (16³ of 8³ leaves).
        assert_eq!(offset([8, 16, 127], 4, 3), (1 << 8) | (2 << 4) | 15);
        // Upper internal node (32³ of 128³ lowers), inside its 4096³.
        assert_eq!(offset([4096 + 128, 0, 256], 5, 7), (1 << 10) | 2);
    }

    #[test]
    fn offsets_in_the_header_point_at_the_grid() {
        let g = Grid {
            name: "d".into(),
            components: 1,
            voxel_size: 0.5,
            translation: [0.25; 3],
            voxels: vec![
                ([0, 0, 0], [1.0, 0.0, 0.0]),
                ([9000, 3, 7], [2.0, 0.0, 0.0]),
            ],
            zip: false,
        };
        let b = g.to_bytes("00000000-0000-0000-0000-000000000000");
        let at = 8 + 4 * 3 + 1 + 36 + 4 + 4 + (4 + 1) + (4 + 16) + 4;
        let end = i64::from_le_bytes(b[at + 16..at + 24].try_into().unwrap());
        assert_eq!(end as usize, b.len());
        // Two leaves' buffers: mask (64 bytes) + metadata byte + 1 value each.
        let block = i64::from_le_bytes(b[at + 8..at + 16].try_into().unwrap());
        assert_eq!(b.len() - block as usize, 2 * (64 + 1 + 4));
    }

    #[test]
    fn zip_writes_sizes_as_openvdb_does() {
        let mut out = Vec::new();
        put_values(&mut out, &[], true);
        assert_eq!(out, [0u8; 8], "no values: minus zero bytes");
        let mut out = Vec::new();
        put_values(&mut out, &[7], true);
        assert_eq!(i64::from_le_bytes(out[..8].try_into().unwrap()), -1);
        assert_eq!(out[8..], [7]);
        let zeros = vec![0u8; 4096];
        let mut out = Vec::new();
        put_values(&mut out, &zeros, true);
        let n = i64::from_le_bytes(out[..8].try_into().unwrap());
        assert!(n > 0 && (n as usize) < 100 && out.len() == 8 + n as usize);
    }
}
