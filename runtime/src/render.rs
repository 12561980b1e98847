//! A rendered view as an RGBA image, and PNG writing. Views are drawn by
//! system kernels (`weft_ir::passes::views`) on whichever backend runs the
//! simulation; `Simulation::render_views` reads their image fields into
//! `Image`s.

#[derive(Clone, Debug, PartialEq)]
pub struct Image {
    pub width: u32,
    pub height: u32,
    /// Row-major from the top row, 4 bytes per pixel.
    pub rgba: Vec<u8>,
}

impl Image {
    /// The picture in an image field's words: `height` rows of `pitch`
    /// RGBA8 words (red in the low byte), of which the first `width` are
    /// pixels.
    pub fn from_words(width: u32, height: u32, pitch: u32, words: &[u32]) -> Image {
        let mut rgba = Vec::with_capacity((width * height * 4) as usize);
        for row in words.chunks(pitch as usize).take(height as usize) {
            for w in &row[..width as usize] {
                rgba.extend_from_slice(&w.to_le_bytes());
            }
        }
        Image {
            width,
            height,
            rgba,
        }
    }

    pub fn new(width: u32, height: u32, bg: [u8; 4]) -> Image {
        let rgba = bg
            .iter()
            .copied()
            .cycle()
            .take((width * height * 4) as usize)
            .collect();
        Image {
            width,
            height,
            rgba,
        }
    }
    pub fn pixel(&self, x: u32, y: u32) -> [u8; 4] {
        let i = ((y * self.width + x) * 4) as usize;
        [
            self.rgba[i],
            self.rgba[i + 1],
            self.rgba[i + 2],
            self.rgba[i + 3],
        ]
    }
    /// True when every pixel has the same colour.
    pub fn is_blank(&self) -> bool {
        self.rgba.chunks(4).all(|p| p == &self.rgba[..4])
    }

    pub fn write_png(&self, path: &std::path::Path) -> Result<(), String> {
        let mut bytes = Vec::new();
        {
            let mut enc = png::Encoder::new(&mut bytes, self.width, self.height);
            enc.set_color(png::ColorType::Rgba);
            enc.set_depth(png::BitDepth::Eight);
            let mut w = enc.write_header().map_err(|e| e.to_string())?;
            w.write_image_data(&self.rgba).map_err(|e| e.to_string())?;
        }
        weft_ir::io::write_atomic(path, &bytes)
            .map_err(|e| format!("cannot write {}: {}", path.display(), e))
    }
}
