//! A binary little-endian PLY writer for point clouds: one `vertex` element
//! with `x`, `y`, `z` (float) and one property per attribute component.

/// How an attribute's words are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Float,
    Int,
    Uint,
}

impl Kind {
    fn ply_name(self) -> &'static str {
        match self {
            Kind::Float => "float",
            Kind::Int => "int",
            Kind::Uint => "uint",
        }
    }
}

/// A per-point attribute: `components` words per point (f32/i32/u32 bits).
pub struct Attribute {
    pub name: String,
    pub kind: Kind,
    pub components: usize,
    pub words: Vec<u32>,
}

impl Attribute {
    /// Property names: the attribute's name for one component, else
    /// `name_0`, `name_1`, ….
    pub fn property_names(&self) -> Vec<String> {
        if self.components == 1 {
            vec![self.name.clone()]
        } else {
            (0..self.components)
                .map(|c| format!("{}_{}", self.name, c))
                .collect()
        }
    }
}

/// The bytes of a PLY file holding `points` (x, y, z) and `attributes`
/// (each with `components × points.len()` words). `comment` goes into the
/// header (one line).
pub fn to_bytes(points: &[[f32; 3]], attributes: &[Attribute], comment: &str) -> Vec<u8> {
    let mut h = String::from("ply\nformat binary_little_endian 1.0\n");
    if !comment.is_empty() {
        h += &format!("comment {}\n", comment.replace('\n', " "));
    }
    h += &format!("element vertex {}\n", points.len());
    for a in ["x", "y", "z"] {
        h += &format!("property float {}\n", a);
    }
    for a in attributes {
        for n in a.property_names() {
            h += &format!("property {} {}\n", a.kind.ply_name(), n);
        }
    }
    h += "end_header\n";
    let per_point = 3 + attributes.iter().map(|a| a.components).sum::<usize>();
    let mut out = h.into_bytes();
    out.reserve(points.len() * per_point * 4);
    for (i, p) in points.iter().enumerate() {
        for c in p {
            out.extend(c.to_le_bytes());
        }
        for a in attributes {
            for w in &a.words[i * a.components..(i + 1) * a.components] {
                out.extend(w.to_le_bytes());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_then_interleaved_rows() {
        let b = to_bytes(
            &[[1.0, 2.0, 3.0]],
            &[Attribute {
                name: "v".into(),
                kind: Kind::Int,
                components: 2,
                words: vec![7, (-1i32) as u32],
            }],
            "",
        );
        let text = "ply\nformat binary_little_endian 1.0\nelement vertex 1\n\
                    property float x\nproperty float y\nproperty float z\n\
                    property int v_0\nproperty int v_1\nend_header\n";
        assert_eq!(&b[..text.len()], text.as_bytes());
        assert_eq!(b.len(), text.len() + 5 * 4);
        assert_eq!(&b[text.len() + 12..text.len() + 16], &7u32.to_le_bytes());
    }
}
