//! IR → CUDA C for the cuda backend (one translation unit per kernel),
//! compiled at run time by NVRTC.
//!
//! Pre: a kernel that passed the legalized-IR validator (word-addressed
//! `BufLoad` / `BufStore` / `BufAtomic`, `Loop` instead of `RangeFor`,
//! fault checks as `Trap`s). Post: C source that NVRTC compiles, or a
//! `CodegenError` naming the kernel; never a panic.
//!
//! Meaning: the reference interpreter's (`weft_ir::ir::eval`): integer
//! arithmetic wraps (done on `unsigned` so that C's signed-overflow rules
//! never apply), integer division is C's (legalize has already replaced
//! every divisor that could be 0, or -1 with an `i32::MIN` dividend), shift
//! amounts are masked to 5 bits, f32 min/max follow Rust's NaN rule, sums
//! in dot and matrix products are folded in the interpreter's order (the
//! runtime compiles with `--fmad=false` so no product is contracted into an
//! FMA), and `random()` draws the same PCG stream. Transcendental functions
//! are CUDA's (as on wgpu, the cross-backend tolerances cover them).
//!
//! Values are scalarised like on the JIT: an IR value of n components is n
//! C variables `v<inst>_<k>`; bools are 0/1 `unsigned` words.
//!
//! ABI of the `__global__` function [`ENTRY`]: the launch record's words
//! (`launch::word` order: frame, launch, seed, total, shape[3], threads per
//! row, then one word per scalar parameter) as `unsigned` arguments, then
//! the fault words (`unsigned*`: [`fault_word`]) and the launch's tag (an
//! `unsigned` the runtime chooses, recorded with a fault so that it knows
//! which launch of a frame failed), then for each root in
//! [`CudaKernel::roots`] order its words (`unsigned*`) and its length in
//! words (`unsigned long long`). One thread per loop iteration, linear
//! row-major index `blockIdx.x * blockDim.x + threadIdx.x`. A launch that
//! finds a fault already recorded does nothing, so the launches queued after
//! a failed one in the same frame leave the fields alone (the interpreter
//! stops at the first fault too).

mod emit;
mod ops;

use crate::CodegenError;
use weft_ir::ir::*;

/// What CUDA executes natively: f32 atomic add and i32 atomic min/max are
/// instructions; f32 min/max arrive as `legalize`'s compare-exchange loop.
pub const CAPS: weft_ir::ir::target::TargetCaps = weft_ir::ir::target::TargetCaps {
    f32_atomic_add: true,
    f32_atomic_add_beside_other_atomics: true,
    f32_atomic_min_max: false,
    i32_atomic_min_max: true,
    workgroups: true,
    ..weft_ir::ir::target::TargetCaps::BASELINE
};

/// Name of the kernel's `__global__` function in every generated module.
pub const ENTRY: &str = "weft_kernel";

/// Threads per block the runtime launches with (wgpu's default workgroup
/// size too).
pub const BLOCK_SIZE: u32 = 256;

/// What the fault words hold after a launch (`COUNT` `u32`s, zeroed before it).
pub mod fault_word {
    /// 0 when no invocation faulted, else the first fault's site index + 1.
    pub const SITE: usize = 0;
    /// Low and high halves of the faulting value (an index, a step, an address).
    pub const VALUE_LO: usize = 1;
    pub const VALUE_HI: usize = 2;
    /// The tag of the launch that faulted.
    pub const TAG: usize = 3;
    pub const COUNT: usize = 4;
}

/// A kernel's CUDA C source and what the runtime needs to launch it.
#[derive(Clone, Debug)]
pub struct CudaKernel {
    /// The kernel node's id.
    pub name: String,
    /// `Kernel::fused`: the nodes errors name by `Span::part`.
    pub fused: Vec<String>,
    pub source: String,
    /// Root layout nodes passed as (words, length) argument pairs, in this order.
    pub roots: Vec<LayoutId>,
    /// What a fault word `SITE` value `s` (≥ 1) means: `sites[s - 1]`, the
    /// kernel's own `fault_sites` first, then the address and call-depth
    /// sites the generator added; worded by `FaultSite::message`.
    pub sites: Vec<FaultSite>,
    /// Scalar parameter words the entry function takes after the record header.
    pub params: usize,
    /// Whether a launch may report a fault of the program's meaning (an
    /// index out of bounds, a full pool, …), not only the defensive
    /// address checks every buffer access has. The runtime asks launches
    /// after such a one to stop when it faulted (`check_err`), as the
    /// interpreter stops at the first fault.
    pub traps: bool,
    /// Threads per CUDA block: the kernel's workgroup size, else
    /// `BLOCK_SIZE`.
    pub block: u32,
}

fn cerr(kernel: &Kernel, m: impl Into<String>) -> CodegenError {
    CodegenError {
        kernel: kernel.name.clone(),
        backend: "cuda",
        message: m.into(),
    }
}

/// Generates the kernel's CUDA C; a panic inside becomes an internal error naming the node.
pub fn compile_kernel(program: &Program, kernel: &Kernel) -> Result<CudaKernel, CodegenError> {
    crate::guard(&kernel.name, "cuda", || emit::kernel(program, kernel))
}

/// Functions every module shares: Rust's f32 min/max, the PCG hash and the fault recorder.
const PRELUDE: &str = r#"typedef unsigned long long u64;

// Bits of +infinity: NVRTC has no <math.h> macros without headers.
#define WEFT_INF __int_as_float(0x7f800000)

// Rust's f32::min / f32::max: a NaN x gives y; else y when strictly smaller (larger).
__device__ __forceinline__ float weft_fmin(float x, float y) { return x != x ? y : (y < x ? y : x); }
__device__ __forceinline__ float weft_fmax(float x, float y) { return x != x ? y : (y > x ? y : x); }
// Rust's f32::clamp(lo, hi): NaN stays NaN.
__device__ __forceinline__ float weft_fclamp(float x, float lo, float hi) {
    x = x < lo ? lo : x;
    return x > hi ? hi : x;
}
__device__ __forceinline__ float weft_fsign(float x) { return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f); }
__device__ __forceinline__ int weft_isign(int x) { return x > 0 ? 1 : (x < 0 ? -1 : 0); }
__device__ __forceinline__ int weft_iabs(int x) { return x < 0 ? (int)(0u - (unsigned)x) : x; }
// The same for 64-bit scalars (C++ overloads).
__device__ __forceinline__ double weft_fmin(double x, double y) { return x != x ? y : (y < x ? y : x); }
__device__ __forceinline__ double weft_fmax(double x, double y) { return x != x ? y : (y > x ? y : x); }
__device__ __forceinline__ double weft_fclamp(double x, double lo, double hi) {
    x = x < lo ? lo : x;
    return x > hi ? hi : x;
}
__device__ __forceinline__ double weft_fsign(double x) { return x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : 0.0); }
__device__ __forceinline__ long long weft_isign(long long x) { return x > 0 ? 1 : (x < 0 ? -1 : 0); }
__device__ __forceinline__ long long weft_iabs(long long x) { return x < 0 ? (long long)(0ull - (u64)x) : x; }
"#;
