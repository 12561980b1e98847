//! The reference CPU backend.

pub mod interp;
