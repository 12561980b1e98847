//! The inspector's storage section for a quantized field: its storage
//! type, the bits one element takes (`Field::element_bits`, as the layout
//! packs it) and the bytes that saves against plain f32 words over the
//! field's elements.

use weft_ir::ir::{Program, Storage};

/// A quantized field's storage numbers.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantInfo {
    /// The storage as the graph names it (`ufloat5m11`, `int5`, …).
    pub storage: String,
    /// Bits of one element as stored (all components).
    pub element_bits: u64,
    /// Bits of one element as 32-bit words.
    pub word_bits: u64,
    /// Elements of the field.
    pub elements: u64,
}

impl QuantInfo {
    pub fn bytes(&self) -> u64 {
        (self.elements * self.element_bits).div_ceil(8)
    }
    pub fn word_bytes(&self) -> u64 {
        self.elements * self.word_bits / 8
    }
    pub fn saved_bytes(&self) -> u64 {
        self.word_bytes().saturating_sub(self.bytes())
    }
}

/// The numbers for field `name` of `p`; `None` when it is not quantized.
pub fn quant_info(p: &Program, name: &str) -> Option<QuantInfo> {
    let f = &p.fields[p.field_by_name(name)?];
    if f.storage == Storage::Word {
        return None;
    }
    Some(QuantInfo {
        storage: f.storage.name(),
        element_bits: f.element_bits(),
        word_bits: 32 * f.ty.components() as u64,
        elements: f.cells(),
    })
}

/// The inspector section (nothing for a field stored in words).
pub fn ui_for(ui: &mut egui::Ui, p: &Program, name: &str) {
    let Some(q) = quant_info(p, name) else {
        return;
    };
    let bytes = super::memory_readout::bytes;
    ui.separator();
    ui.strong("Storage");
    ui.label(format!(
        "{}: {} bits per element (f32 words: {})",
        q.storage, q.element_bits, q.word_bits
    ));
    ui.label(format!(
        "{} for {} elements instead of {}: {} saved ({:.1}x smaller)",
        bytes(q.bytes()),
        q.elements,
        bytes(q.word_bytes()),
        bytes(q.saved_bytes()),
        q.word_bits as f64 / q.element_bits.max(1) as f64
    ));
}
