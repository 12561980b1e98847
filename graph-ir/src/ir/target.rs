//! What a target executes natively, so that `legalize` writes everything
//! else in plain IR and a backend never re-implements meaning.

use super::AtomicOp;
use crate::types::Scalar;

/// What a target executes natively, as its backend states it
/// (`weft_codegen::*::CAPS`, `weft_codegen::wgpu::caps`); everything else `legalize` writes in plain IR.
/// Every target has 32-bit integer loads, stores, exchange,
/// compare-exchange, add, sub, and, or, xor and unsigned min/max atomics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct TargetCaps {
    /// f32 atomic add and sub.
    pub f32_atomic_add: bool,
    /// f32 atomic add and sub on a buffer that the same kernel also
    /// accesses with another atomic (WGSL types a buffer `atomic<f32>` or
    /// `atomic<u32>`, never both; elsewhere words are words).
    pub f32_atomic_add_beside_other_atomics: bool,
    /// f32 atomic min and max (with `min`/`max`'s NaN rules).
    pub f32_atomic_min_max: bool,
    /// i32 (signed) atomic min and max.
    pub i32_atomic_min_max: bool,
    /// Workgroups: a block's invocations run together, share its arrays
    /// and wait at barriers (GPUs). Elsewhere `passes::block_loops` runs
    /// each block as one invocation.
    pub workgroups: bool,
    /// The target's own `fma`, `lerp`, float `min` / `max` / `clamp` /
    /// `saturate` are not Weft's (Vulkan's `Fma` may round twice, WGSL's
    /// `mix` is not `x + (y - x) * t`, WGSL leaves a NaN operand of `min`
    /// to the driver): `legalize` writes them in plain IR ([`crate::ir::eval`]'s
    /// meaning) and the backend never sees them.
    pub loose_float_builtins: bool,
    /// The target silently leaves a loop after this many trips in one
    /// invocation, all loops counted together (llvmpipe / lavapipe: 65,535).
    /// `legalize` counts trips in plain IR and faults, naming the loop,
    /// before the target would cut a loop short.
    pub loop_trip_limit: Option<u32>,
    /// The target computes `LaneMax`, the largest u32 among the
    /// invocations it runs side by side (WGSL's `subgroupMax`). With a
    /// `loop_trip_limit`, whose count those invocations share on llvmpipe,
    /// `legalize` keeps every invocation's count at its group's.
    pub lane_max: bool,
}

impl TargetCaps {
    /// Whether everything `other` has, this target has too (code legalized
    /// for `other` compiles here).
    pub fn covers(&self, other: &TargetCaps) -> bool {
        (self.f32_atomic_add || !other.f32_atomic_add)
            && (self.f32_atomic_add_beside_other_atomics
                || !other.f32_atomic_add_beside_other_atomics)
            && (self.f32_atomic_min_max || !other.f32_atomic_min_max)
            && (self.i32_atomic_min_max || !other.i32_atomic_min_max)
            && (self.workgroups || !other.workgroups)
            && (self.lane_max || !other.lane_max)
        // `loose_float_builtins` and `loop_trip_limit` change what code
        // means on a target, never whether it compiles there.
    }

    /// No optional capability: what every backend accepts.
    pub const BASELINE: TargetCaps = TargetCaps {
        f32_atomic_add: false,
        f32_atomic_add_beside_other_atomics: false,
        f32_atomic_min_max: false,
        i32_atomic_min_max: false,
        workgroups: false,
        loose_float_builtins: false,
        loop_trip_limit: None,
        lane_max: false,
    };

    /// Whether the target has atomic `op` on `s` as one operation.
    pub fn has_atomic(&self, op: AtomicOp, s: Scalar) -> bool {
        match (op, s) {
            (AtomicOp::Add | AtomicOp::Sub, Scalar::F32) => self.f32_atomic_add,
            (AtomicOp::Min | AtomicOp::Max, Scalar::F32) => self.f32_atomic_min_max,
            (AtomicOp::Min | AtomicOp::Max, Scalar::I32) => self.i32_atomic_min_max,
            (AtomicOp::Exchange | AtomicOp::CompareExchange, _) => true,
            (_, Scalar::F32 | Scalar::Bool) => false,
            _ => true,
        }
    }
}
