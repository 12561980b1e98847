//! IR building blocks that several passes emit through; none of them is a
//! pass (the passes and their one pipeline are in `passes/`).
//!
//! - `sparse`: the [`sparse::Emitter`] every lowering writes plain IR with,
//!   and the sparse-layout protocol (walking a field's `AddressPlan` level by
//!   level, activation, deactivation, element lists);
//! - `quantize`: quantized field access as word loads, stores and
//!   compare-exchange loops (and `match_cas_loop`, which finds such a loop
//!   again for the passes that rewrite it);
//! - `emit`: [`emit::Emit`], the builder of whole system kernels (a
//!   function and its open blocks) that `optimize` and `views` write with;
//! - `words`: a value as per-component words and back;
//! - `random`: the random-number generator `legalize` expands `random()` to;
//! - `activation_demotion`: the one definition of a write at a cell known to
//!   be active (the state-flow graph and `lower_access` both ask it).
//!
//! Dependencies point one way: `passes` use `lower`, `lower` uses only
//! `ir` and `types`.

pub mod activation_demotion;
pub mod emit;
pub mod quantize;
pub mod random;
pub mod sparse;
pub mod words;
