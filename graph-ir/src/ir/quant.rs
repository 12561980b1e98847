//! Quantized storage types: what a few stored bits mean as a compute value.
//!
//! This module is the one definition of every quantized encoding. The host
//! (`runtime::memory`: initial values, `.npy` dumps, read-back) calls
//! [`Quant::encode`] / [`Quant::decode`] here, and the access-lowering hook
//! (`lower::quantize`) emits the *same* operation sequence as plain IR, so
//! every backend computes bit-identical results without quantization code of
//! its own. Tests compare both against independent references.
//!
//! Encodings (`bits` = stored bits per component, never straddling a word):
//! - `intN` / `uintN` (N = 1..=32): two's complement / unsigned, computes as
//!   i32 / u32. Out-of-range stores saturate, or wrap (keep the low N bits)
//!   with the field's `overflow: "wrap"`.
//! - `fixedN[lo,hi]` (N = 1..=20): an unsigned code q in 0..=2^N-1 with
//!   value `(q + lo/scale) * scale`, scale = (hi - lo) / (2^N - 1), computed
//!   in f32. Stores round to nearest (ties upward, toward hi) and saturate to
//!   [lo, hi]; NaN stores as lo.
//! - `floatEmM` / `ufloatEmM` (E = 2..=7 exponent bits, M = 1..=23 fraction
//!   bits, plus a sign bit for `float`): IEEE-like with bias 2^(E-1)-1 and
//!   gradual underflow (denormals), but **no infinities or NaN**: the
//!   all-ones exponent is an ordinary exponent. Stores round to nearest, ties
//!   away from zero, and saturate to the largest finite value (infinities and
//!   NaN store as it, with their sign); `ufloat` stores negatives (and -0) as
//!   0. Negative zero is kept by `float`. E stops at 7 so that every decoded
//!   value, denormals included, is a normal f32 (GPUs may flush f32
//!   denormals, which would break cross-backend equality).
//! - `f16`: IEEE 754 binary16 exactly (sign, 5 exponent bits with bias 15,
//!   10 fraction bits, denormals, ±inf, NaN), computing as f32. Stores round
//!   to nearest, ties to even; values from 65520 up (the midpoint between
//!   65504 and 2^16) become ±inf; NaN stores as the quiet NaN 0x7e00 with its
//!   sign. Decoding is exact (every binary16 value is a normal f32, or an f32
//!   infinity / NaN). Unlike `float5m10` it has infinities and NaN.
//! - `u8`, `i8`, `u16`, `i16`: other names of `uint8`, `int8`, `uint16`,
//!   `int16` (same encoding, same saturate-unless-`overflow: "wrap"` rule).

use crate::types::Scalar;

/// A quantized component encoding (see the module docs). `Copy + Eq` so it
/// can live inside `Storage`; fixed-point bounds are kept as f32 bit patterns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Quant {
    Int {
        bits: u8,
        signed: bool,
        wrap: bool,
    },
    Fixed {
        bits: u8,
        lo: u32,
        hi: u32,
        stochastic: bool,
    },
    Float {
        exp: u8,
        frac: u8,
        signed: bool,
        stochastic: bool,
    },
    /// IEEE binary16 (`f16`), round to nearest even, with inf and NaN.
    Half,
}

/// Field params that qualify a storage name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QuantParams {
    /// `overflow: "wrap"` (intN / uintN only).
    pub wrap: bool,
    /// `rounding: "stochastic"` (fixed and float only): kernel stores round
    /// up with probability equal to the dropped fraction, using 24 bits of
    /// the iteration's `random()` sequence.
    pub stochastic: bool,
}

/// Largest fixed-point width: codes up to 2^20 keep an encode/decode round
/// trip exact in f32 arithmetic.
pub const MAX_FIXED_BITS: u8 = 20;

fn f(b: u32) -> f32 {
    f32::from_bits(b)
}

impl Quant {
    /// Parses a storage name (`int5`, `uint1`, `fixed16[-4,4]`, `float5m10`,
    /// `ufloat6m9`); `wrap` comes from the field's `overflow` param. `Ok(None)`
    /// is plain word storage (`word`).
    pub fn parse(s: &str, params: QuantParams) -> Result<Option<Quant>, String> {
        let QuantParams { wrap, stochastic } = params;
        let s = s.trim();
        if s == "word" {
            return Ok(None);
        }
        // The kernel language's narrow type names: aliases of the intN /
        // uintN encodings (same saturation rule), and IEEE half.
        let s = match s {
            "u8" => "uint8",
            "i8" => "int8",
            "u16" => "uint16",
            "i16" => "int16",
            other => other,
        };
        let num = |t: &str, what: &str| -> Result<u8, String> {
            t.parse::<u8>()
                .map_err(|_| format!("'{}': expected a number of {} bits, got '{}'", s, what, t))
        };
        let q = if s == "f16" {
            Quant::Half
        } else if let Some(rest) = s.strip_prefix("fixed") {
            let (b, range) = rest
                .split_once('[')
                .ok_or_else(|| format!("'{}': fixed point needs a range, like fixed16[-4,4]", s))?;
            let bits = num(b, "")?;
            let range = range
                .strip_suffix(']')
                .ok_or_else(|| format!("'{}': the range must end with ']'", s))?;
            let (lo, hi) = range
                .split_once(',')
                .ok_or_else(|| format!("'{}': the range needs two numbers: [lo,hi]", s))?;
            let parse = |t: &str| {
                t.trim()
                    .parse::<f32>()
                    .ok()
                    .filter(|x| x.is_finite())
                    .ok_or_else(|| format!("'{}': '{}' is not a finite number", s, t.trim()))
            };
            let (lo, hi) = (parse(lo)?, parse(hi)?);
            if !(1..=MAX_FIXED_BITS).contains(&bits) {
                return Err(format!(
                    "'{}': fixed point has 1 to {} bits",
                    s, MAX_FIXED_BITS
                ));
            }
            if lo >= hi {
                return Err(format!("'{}': the range [lo,hi] needs lo < hi", s));
            }
            Quant::Fixed {
                bits,
                lo: lo.to_bits(),
                hi: hi.to_bits(),
                stochastic,
            }
        } else if let Some((signed, rest)) = s
            .strip_prefix("ufloat")
            .map(|r| (false, r))
            .or_else(|| s.strip_prefix("float").map(|r| (true, r)))
        {
            let (e, m) = rest.split_once('m').ok_or_else(|| {
                format!(
                    "'{}': a quantized float is written floatEmM, like float5m10",
                    s
                )
            })?;
            let (exp, frac) = (num(e, "exponent")?, num(m, "fraction")?);
            if !(2..=7).contains(&exp) || !(1..=23).contains(&frac) {
                return Err(format!(
                    "'{}': a quantized float has 2 to 7 exponent bits and 1 to 23 fraction bits",
                    s
                ));
            }
            Quant::Float {
                exp,
                frac,
                signed,
                stochastic,
            }
        } else if let Some((signed, rest)) = s
            .strip_prefix("uint")
            .map(|r| (false, r))
            .or_else(|| s.strip_prefix("int").map(|r| (true, r)))
        {
            let bits = num(rest, "")?;
            if !(1..=32).contains(&bits) {
                return Err(format!("'{}': a quantized integer has 1 to 32 bits", s));
            }
            Quant::Int { bits, signed, wrap }
        } else {
            return Err(format!(
                "unknown storage '{}': use word, intN, uintN, u8, i8, u16, i16, f16, fixedN[lo,hi], floatEmM or ufloatEmM",
                s
            ));
        };
        if stochastic && matches!(q, Quant::Int { .. } | Quant::Half) {
            return Err(format!(
                "'{}': rounding \"stochastic\" applies to fixedN and floatEmM / ufloatEmM storage only",
                s
            ));
        }
        if wrap && !matches!(q, Quant::Int { .. }) {
            return Err(format!(
                "'{}': overflow \"wrap\" applies to intN / uintN storage only",
                s
            ));
        }
        Ok(Some(q))
    }

    /// Stored bits per component.
    pub fn bits(self) -> u32 {
        match self {
            Quant::Int { bits, .. } | Quant::Fixed { bits, .. } => bits as u32,
            Quant::Float {
                exp, frac, signed, ..
            } => exp as u32 + frac as u32 + signed as u32,
            Quant::Half => 16,
        }
    }

    /// The scalar kernels compute with.
    pub fn compute_scalar(self) -> Scalar {
        match self {
            Quant::Int { signed: true, .. } => Scalar::I32,
            Quant::Int { signed: false, .. } => Scalar::U32,
            _ => Scalar::F32,
        }
    }

    /// Mask of the stored bits (low `bits()` bits).
    pub fn mask(self) -> u32 {
        mask(self.bits())
    }

    /// The documented name (what `parse` accepts).
    pub fn name(self) -> String {
        match self {
            Quant::Int { bits, signed, .. } => {
                format!("{}int{}", if signed { "" } else { "u" }, bits)
            }
            Quant::Fixed { bits, lo, hi, .. } => {
                format!("fixed{}[{:?},{:?}]", bits, f(lo), f(hi))
            }
            Quant::Float {
                exp, frac, signed, ..
            } => {
                format!("{}float{}m{}", if signed { "" } else { "u" }, exp, frac)
            }
            Quant::Half => "f16".into(),
        }
    }

    /// Fixed point: (scale, 1/scale, lo/scale) as the f32 constants that both
    /// the host and the emitted IR use.
    pub fn fixed_consts(self) -> (f32, f32, f32) {
        let Quant::Fixed { bits, lo, hi, .. } = self else {
            panic!("fixed_consts of a non-fixed storage")
        };
        let qmax = mask(bits as u32) as f64;
        let (lo, hi) = (f(lo) as f64, f(hi) as f64);
        let scale = (hi - lo) / qmax;
        (scale as f32, (qmax / (hi - lo)) as f32, (lo / scale) as f32)
    }

    /// Quantized float: (bias, f32 bits of the largest finite value).
    pub fn float_consts(self) -> (u32, u32) {
        let Quant::Float { exp, frac, .. } = self else {
            panic!("float_consts of a non-float storage")
        };
        let bias = (1u32 << (exp - 1)) - 1;
        let max_e = (1u32 << exp) - 1; // the all-ones exponent is finite
        let max_bits = ((max_e + 127 - bias) << 23) | (mask(frac as u32) << (23 - frac as u32));
        (bias, max_bits)
    }

    /// Encodes a compute value (its 32-bit pattern) into the low `bits()`
    /// bits, rounding and saturating (or wrapping) like a kernel store.
    /// `lower::quantize::encode` emits exactly this sequence as IR.
    pub fn encode(self, v: u32) -> u32 {
        self.encode_rounding(v, None)
    }

    /// Whether kernel stores round stochastically (`rounding: "stochastic"`).
    pub fn stochastic(self) -> bool {
        matches!(
            self,
            Quant::Fixed {
                stochastic: true,
                ..
            } | Quant::Float {
                stochastic: true,
                ..
            }
        )
    }

    /// `encode` with stochastic rounding driven by `r24`, 24 random bits
    /// (`random() * 2^24` in a kernel): a value between two codes goes up
    /// with probability (distance to the lower code) / (code spacing), to
    /// 2^-24; values on a code stay there. Integers encode as `encode`.
    pub fn encode_stochastic(self, v: u32, r24: u32) -> u32 {
        self.encode_rounding(v, Some(r24 & 0xff_ffff))
    }

    fn encode_rounding(self, v: u32, r24: Option<u32>) -> u32 {
        match self {
            Quant::Int { bits, signed, wrap } => {
                let m = mask(bits as u32);
                if wrap {
                    return v & m;
                }
                if signed {
                    let (lo, hi) = int_range(bits);
                    (v as i32).clamp(lo, hi) as u32 & m
                } else {
                    v.min(m)
                }
            }
            Quant::Fixed { bits, lo, .. } => {
                let (_, inv, _) = self.fixed_consts();
                let qmax = mask(bits as u32) as f32;
                let t = (f(v) - f(lo)) * inv;
                let t = if t > 0.0 { t } else { 0.0 };
                let t = if t < qmax { t } else { qmax };
                match r24 {
                    None => (t + 0.5).floor() as u32,
                    Some(r) => {
                        // Up when the (exact) fraction exceeds u in [0, 1).
                        let ti = t.floor();
                        let u = r as f32 * (1.0 / 16_777_216.0);
                        ti as u32 + u32::from(t - ti > u)
                    }
                }
            }
            Quant::Float {
                exp, frac, signed, ..
            } => {
                let (bias, max_bits) = self.float_consts();
                let s = v >> 31;
                let mut a = v & 0x7fff_ffff;
                if !signed && s != 0 {
                    a = 0;
                }
                a = a.min(max_bits);
                let e = a >> 23;
                let fr = frac as u32;
                // The amount added below the kept bits before truncating:
                // half of them (nearest), or as many random bits (the top
                // `k` of r24 << 8; bits past 24 are zero).
                let below = |k: u32| match r24 {
                    None => (1u32 << k) >> 1,
                    Some(r) => (r << 8) >> 1 >> (31 - k),
                };
                let normal = ((a + below(23 - fr)) >> (23 - fr)).wrapping_sub((127 - bias) << fr);
                let e1 = e.max(1);
                let full = (151 - bias - fr).wrapping_sub(e1);
                let shift = full.min(31);
                let mut mant = (a & 0x7f_ffff) | if e > 0 { 1 << 23 } else { 0 };
                if r24.is_some() {
                    // Shifts past 31 keep their odds: drop the excess first
                    // (below the 24 random bits' resolution anyway).
                    mant >>= (full - shift).min(31);
                }
                let den = (mant + below(shift)) >> shift;
                let mag = if e > 127 - bias { normal } else { den };
                if signed {
                    ((s & 1) << (exp as u32 + fr)) | mag
                } else {
                    mag
                }
            }
            Quant::Half => half_encode(v),
        }
    }

    /// Decodes the low `bits()` bits of `raw` into a compute value's bits.
    /// `lower::quantize::decode` emits exactly this sequence as IR.
    pub fn decode(self, raw: u32) -> u32 {
        let raw = raw & self.mask();
        match self {
            Quant::Int { bits, signed, .. } => {
                if signed {
                    ((raw << (32 - bits as u32)) as i32 >> (32 - bits as u32)) as u32
                } else {
                    raw
                }
            }
            Quant::Fixed { .. } => {
                let (scale, _, off) = self.fixed_consts();
                ((raw as f32 + off) * scale).to_bits()
            }
            Quant::Float {
                exp, frac, signed, ..
            } => {
                let (bias, _) = self.float_consts();
                let fr = frac as u32;
                let mag = raw & mask(exp as u32 + fr);
                let e = mag >> fr;
                let bits = if e == 0 {
                    ((mag as f32) * f((127 + 1 - bias - fr) << 23)).to_bits()
                } else {
                    (mag << (23 - fr)) + ((127 - bias) << 23)
                };
                if signed {
                    bits | ((raw >> (exp as u32 + fr)) << 31)
                } else {
                    bits
                }
            }
            Quant::Half => half_decode(raw),
        }
    }

    /// Whether an initial value is representable without saturation or
    /// wrapping (rounding to the nearest code is allowed and documented):
    /// `--init` values that do not fit are an error, never silently clipped.
    pub fn fits(self, v: u32) -> bool {
        match self {
            Quant::Int { bits, signed, .. } => {
                if signed {
                    let (lo, hi) = int_range(bits);
                    (lo..=hi).contains(&(v as i32))
                } else {
                    v <= mask(bits as u32)
                }
            }
            Quant::Fixed { lo, hi, .. } => (f(lo)..=f(hi)).contains(&f(v)),
            Quant::Float { signed, .. } => {
                let (_, max_bits) = self.float_consts();
                let x = f(v);
                x.is_finite() && x.abs() <= f(max_bits) && (signed || x >= 0.0)
            }
            // Infinities and NaN are binary16 values; finite values from
            // 65520 up would become infinite.
            Quant::Half => !f(v).is_finite() || f(v).abs() < 65520.0,
        }
    }
}

/// f32 bits to IEEE binary16 bits (low 16), round to nearest even.
/// `lower::quantize::encode` emits exactly this sequence as IR, so every
/// step is a plain integer operation (no float arithmetic a GPU could flush
/// or fuse).
pub fn half_encode(v: u32) -> u32 {
    let s = (v >> 16) & 0x8000;
    let a = v & 0x7fff_ffff;
    // Normal binary16 (|x| ≥ 2^-14): rebias the exponent (127 → 15), then
    // round the 13 dropped fraction bits to nearest even: add 0xfff plus the
    // lowest kept bit; a carry correctly bumps the exponent.
    let h = a.wrapping_sub(112 << 23);
    let normal = h.wrapping_add(0xfff + ((h >> 13) & 1)) >> 13;
    // Denormal binary16: the significand (hidden bit included) shifted right
    // by 126 - e, the same even rounding; shifts past 31 give 0 (and an f32
    // denormal, e = 0, is far below half of 2^-24 anyway).
    let e = a >> 23;
    let sh = 126u32.wrapping_sub(e).min(31);
    let m = (a & 0x7f_ffff) | (1 << 23);
    let den = m
        .wrapping_add(((1u32 << sh) >> 1).wrapping_sub(1))
        .wrapping_add((m >> sh) & 1)
        >> sh;
    let mag = if a > 0x7f80_0000 {
        0x7e00 // NaN: quiet NaN
    } else if a >= 0x477f_f000 {
        0x7c00 // 65520 and above (ties go to even, which is inf), inf
    } else if a >= 0x3880_0000 {
        normal
    } else {
        den
    };
    s | mag
}

/// IEEE binary16 bits (low 16) to f32 bits, exactly.
/// `lower::quantize::decode` emits exactly this sequence as IR.
pub fn half_decode(raw: u32) -> u32 {
    let s = (raw & 0x8000) << 16;
    let e = (raw >> 10) & 0x1f;
    let m = raw & 0x3ff;
    // Denormal: m × 2^-24, an exact product and a normal f32.
    let den = ((m as f32) * f(103 << 23)).to_bits();
    let normal = ((raw & 0x7fff) << 13) + (112 << 23);
    let special = 0x7f80_0000 | (m << 13);
    let mag = if e == 0 {
        den
    } else if e == 31 {
        special
    } else {
        normal
    };
    s | mag
}

/// Quantized floats that share one exponent: all components of one vector
/// or matrix element (QuanTaichi's shared exponent), stored in one code of
/// `bits()` ≤ 32 bits. Spelled as a field's `floatEmM` / `ufloatEmM`
/// storage with `shared_exponent: true`.
///
/// Code layout (low bits first): the shared exponent `e` (E bits), then per
/// component `c` a lane of `frac + signed` bits: an M-bit significand `m`
/// with **no hidden bit** (the smaller components are not normalized) and,
/// for `float`, the sign on top. The value of a lane is
/// `m * 2^(e - bias - M + 1)`, bias = 2^(E-1) - 1, so a significand with its
/// top bit set is in [2^(e-bias), 2^(e-bias+1)).
///
/// Encoding picks the smallest exponent at which the largest magnitude fits
/// M bits after rounding; every component rounds to nearest on that
/// exponent's grid (ties away from zero), so a component much smaller than
/// the largest keeps fewer significant bits and flushes to 0 once it is
/// below half a step. Beyond the largest value saturates (infinities and NaN
/// with their sign); `ufloat` stores negatives as 0. Decoding is exact.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SharedFloat {
    pub exp: u8,
    pub frac: u8,
    pub signed: bool,
    /// Components sharing the exponent (2..=16).
    pub n: u8,
    /// `rounding: "stochastic"`: kernel stores draw 24 random bits once per
    /// element store and round every component up with probability equal
    /// to its dropped fraction (the same draw for all components).
    pub stochastic: bool,
}

impl SharedFloat {
    /// The shared-exponent form of `q` (a `floatEmM` / `ufloatEmM`) for an
    /// element of `n` components; errors say why it cannot be.
    pub fn new(q: Quant, n: usize) -> Result<SharedFloat, String> {
        let Quant::Float {
            exp,
            frac,
            signed,
            stochastic,
        } = q
        else {
            return Err(format!(
                "shared_exponent needs floatEmM or ufloatEmM storage, not {}",
                q.name()
            ));
        };
        if n < 2 {
            return Err(
                "shared_exponent shares one exponent between the components of a vector or matrix (vecN, matN); a scalar has only one"
                    .into(),
            );
        }
        let s = SharedFloat {
            exp,
            frac,
            signed,
            n: n as u8,
            stochastic,
        };
        if s.bits() > 32 {
            return Err(format!(
                "{} with a shared exponent needs {} + {} x {} = {} bits, more than one 32-bit word; use fewer exponent or fraction bits",
                q.name(),
                exp,
                n,
                s.lane_bits(),
                s.bits()
            ));
        }
        Ok(s)
    }

    /// Bits of one component's lane (significand and sign).
    pub fn lane_bits(self) -> u32 {
        self.frac as u32 + self.signed as u32
    }

    /// Bits of the whole element's code.
    pub fn bits(self) -> u32 {
        self.exp as u32 + self.n as u32 * self.lane_bits()
    }

    /// Whether kernel stores round stochastically.
    pub fn stochastic(self) -> bool {
        self.stochastic
    }

    /// The documented name: the storage spelling plus the flag.
    pub fn name(self) -> String {
        format!(
            "{}float{}m{} (shared exponent)",
            if self.signed { "" } else { "u" },
            self.exp,
            self.frac
        )
    }

    /// (bias, f32 bits of the largest finite value, largest exponent code).
    pub fn consts(self) -> (u32, u32, u32) {
        let bias = (1u32 << (self.exp - 1)) - 1;
        let emax = (1u32 << self.exp) - 1;
        // (2^M - 1) * 2^(emax - bias - M + 1): top significand bit at 2^(emax - bias).
        let m = mask(self.frac as u32);
        let top = emax + 127 - bias;
        let max_bits = (top << 23) | ((m << (24 - self.frac as u32)) & 0x7f_ffff);
        (bias, max_bits, emax)
    }

    /// Bits of component `c`'s lane inside the code.
    pub fn lane_shift(self, c: usize) -> u32 {
        self.exp as u32 + c as u32 * self.lane_bits()
    }

    /// Encodes the compute values (f32 bits) of one element into its code.
    /// `lower::quantize::encode_shared` emits exactly this sequence as IR.
    pub fn encode(self, v: &[u32]) -> u32 {
        self.encode_rounding(v, None)
    }

    /// `encode` with stochastic rounding driven by `r24` (24 random bits,
    /// `random() * 2^24` in a kernel): each component goes up with
    /// probability (its distance to the lower step) / (step), to 2^-24.
    pub fn encode_stochastic(self, v: &[u32], r24: u32) -> u32 {
        self.encode_rounding(v, Some(r24 & 0xff_ffff))
    }

    fn encode_rounding(self, v: &[u32], r24: Option<u32>) -> u32 {
        let (bias, max_bits, emax) = self.consts();
        let m_bits = self.frac as u32;
        let mags: Vec<(u32, u32)> = v
            .iter()
            .map(|&x| {
                let s = x >> 31;
                let mut a = x & 0x7fff_ffff;
                if !self.signed && s != 0 {
                    a = 0;
                }
                (s, a.min(max_bits))
            })
            .collect();
        let amax = mags.iter().map(|m| m.1).max().unwrap_or(0);
        let ea = amax >> 23;
        let lim = 127 - bias;
        let e0 = ea.saturating_sub(lim);
        // Significand (hidden bit made explicit) and its shift to the grid of
        // exponent `e`: always at least 1, capped at 31 (the result is 0 then).
        let round = |a: u32, e: u32| {
            let x = a >> 23;
            let mut sig = (a & 0x7f_ffff) | if x > 0 { 1 << 23 } else { 0 };
            let full = (e + 151 - bias - m_bits).wrapping_sub(x.max(1));
            let sh = full.min(31);
            let below = match r24 {
                None => (1u32 << sh) >> 1,
                Some(r) => {
                    // Shifts past 31 keep their odds: drop the excess first.
                    sig >>= (full - sh).min(31);
                    ((r << 8) >> 1) >> (31 - sh)
                }
            };
            (sig + below) >> sh
        };
        let carry = round(amax, e0) >> m_bits;
        let e = (e0 + carry).min(emax);
        let mut code = e;
        for (c, &(s, a)) in mags.iter().enumerate() {
            let m = round(a, e).min(mask(m_bits));
            let lane = if self.signed { (s << m_bits) | m } else { m };
            code |= lane << self.lane_shift(c);
        }
        code
    }

    /// Decodes component `c` of the code in the low `bits()` of `raw` into
    /// its compute value's bits. `lower::quantize` emits the same.
    pub fn decode(self, raw: u32, c: usize) -> u32 {
        let (bias, _, _) = self.consts();
        let e = raw & mask(self.exp as u32);
        let scale = f((e + 128 - bias - self.frac as u32) << 23);
        let lane = (raw >> self.lane_shift(c)) & mask(self.lane_bits());
        let m = lane & mask(self.frac as u32);
        let bits = ((m as f32) * scale).to_bits();
        if self.signed {
            bits | ((lane >> self.frac) << 31)
        } else {
            bits
        }
    }

    /// Whether initial values are representable without saturation.
    pub fn fits(self, v: &[u32]) -> bool {
        let (_, max_bits, _) = self.consts();
        v.iter().all(|&x| {
            let x = f(x);
            x.is_finite() && x.abs() <= f(max_bits) && (self.signed || x >= 0.0)
        })
    }
}

/// The low `bits` bits set (bits = 1..=32).
pub fn mask(bits: u32) -> u32 {
    if bits >= 32 {
        u32::MAX
    } else {
        (1u32 << bits) - 1
    }
}

/// Signed range of an N-bit two's complement integer.
fn int_range(bits: u8) -> (i32, i32) {
    let b = bits as u32;
    ((-1i64 << (b - 1)) as i32, ((1i64 << (b - 1)) - 1) as i32)
}

#[cfg(test)]
mod tests {
    //! References here are written independently of the bit tricks above:
    //! they enumerate every code, compute its value in f64 from the format's
    //! definition, and pick the nearest by search.
    use super::*;

    fn q(s: &str) -> Quant {
        Quant::parse(s, QuantParams::default()).unwrap().unwrap()
    }

    /// Value of a quantized-float code from the definition (f64).
    fn float_value(exp: u32, frac: u32, signed: bool, code: u32) -> f64 {
        let bias = (1i32 << (exp - 1)) - 1;
        let m = code & ((1 << frac) - 1);
        let e = (code >> frac) & ((1 << exp) - 1);
        let s = if signed && (code >> (exp + frac)) & 1 == 1 {
            -1.0
        } else {
            1.0
        };
        let mag = if e == 0 {
            m as f64 * 2f64.powi(1 - bias - frac as i32)
        } else {
            (1.0 + m as f64 / (1u64 << frac) as f64) * 2f64.powi(e as i32 - bias)
        };
        s * mag
    }

    /// Nearest code by exhaustive search; ties go to the larger magnitude;
    /// beyond the largest value saturates.
    fn float_reference(exp: u32, frac: u32, signed: bool, x: f32) -> u32 {
        let x = x as f64;
        let n = 1u32 << (exp + frac);
        let mut best = 0u32;
        let mut best_d = f64::INFINITY;
        let target = if signed { x.abs() } else { x.max(0.0) };
        for c in 0..n {
            let v = float_value(exp, frac, false, c);
            let d = (v - target).abs();
            if d < best_d || (d == best_d && v > float_value(exp, frac, false, best)) {
                best = c;
                best_d = d;
            }
        }
        if signed && x.is_sign_negative() {
            best | (1 << (exp + frac))
        } else {
            best
        }
    }

    fn edge_floats(max: f64) -> Vec<f32> {
        let mut v = vec![
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.5,
            1.5,
            2.5,
            3.0,
            1e-3,
            -1e-3,
            1e-9,
            1e-30,
            f32::MIN_POSITIVE,
            1e-40,
            0.1,
            -0.1,
            1000.0,
            65504.0,
            65520.0,
            131008.0,
            1e6,
            1e20,
            -1e20,
            f32::MAX,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ];
        v.push(max as f32);
        v.push(-max as f32);
        v.push((max * 1.0001) as f32);
        let mut x = 1.0e-12f32;
        while x < 1e12 {
            v.push(x);
            v.push(-x * 1.37);
            x *= 1.618;
        }
        v
    }

    #[test]
    fn floats_round_to_nearest_and_saturate_like_the_reference() {
        for (e, m, s) in [
            (5, 10, true),
            (4, 3, true),
            (3, 2, false),
            (5, 10, false),
            (7, 6, true),
            (2, 1, true),
        ] {
            let name = format!("{}float{}m{}", if s { "" } else { "u" }, e, m);
            let t = q(&name);
            let max = float_value(e, m, false, (1 << (e + m)) - 1);
            // Every code decodes to the definition's value and re-encodes to itself.
            for c in 0..(1u32 << t.bits()) {
                let d = f32::from_bits(t.decode(c));
                assert_eq!(d as f64, float_value(e, m, s, c), "{name} decode {c:#x}");
                assert_eq!(t.encode(d.to_bits()), c, "{name} round trip {c:#x}");
                // Midpoints between neighbours (ties) go away from zero.
                if c + 1 < (1 << (e + m)) {
                    let mid = (float_value(e, m, false, c) + float_value(e, m, false, c + 1)) / 2.0;
                    if (mid as f32) as f64 == mid {
                        assert_eq!(t.encode((mid as f32).to_bits()), c + 1, "{name} tie {mid}");
                    }
                }
            }
            for x in edge_floats(max) {
                assert_eq!(
                    t.encode(x.to_bits()),
                    float_reference(e, m, s, x),
                    "{name} encode {x:e}"
                );
            }
            // NaN saturates (to the largest magnitude; positive NaN here).
            assert_eq!(t.encode(f32::NAN.to_bits()), (1 << (e + m)) - 1);
        }
        // Negative zero survives a signed format, not an unsigned one.
        let h = q("float5m10");
        assert_eq!(h.decode(h.encode((-0.0f32).to_bits())), (-0.0f32).to_bits());
        let u = q("ufloat5m10");
        assert_eq!(u.decode(u.encode((-0.0f32).to_bits())), 0);
        assert_eq!(u.encode((-3.0f32).to_bits()), 0);
    }

    /// binary16 value of a code from the IEEE definition (f64).
    fn half_value(c: u32) -> f64 {
        let sign = if c & 0x8000 != 0 { -1.0 } else { 1.0 };
        let e = (c >> 10) & 0x1f;
        let m = (c & 0x3ff) as f64;
        sign * match e {
            0 => m * 2f64.powi(-24),
            31 if m == 0.0 => f64::INFINITY,
            31 => f64::NAN,
            _ => (1.0 + m / 1024.0) * 2f64.powi(e as i32 - 15),
        }
    }

    /// Round to nearest binary16 by search over the finite codes, ties to
    /// the even code; beyond 65504 + half an ulp (65520) is infinite.
    fn half_reference(x: f32) -> u32 {
        if x.is_nan() {
            return if x.is_sign_negative() { 0xfe00 } else { 0x7e00 };
        }
        let sign = if x.is_sign_negative() { 0x8000 } else { 0 };
        let t = (x as f64).abs();
        if t >= 65520.0 {
            return sign | 0x7c00;
        }
        // Finite magnitudes are increasing in the code: binary search.
        let (mut lo, mut hi) = (0u32, 0x7bffu32);
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if half_value(mid) <= t {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let (dl, dh) = (t - half_value(lo), half_value(hi) - t);
        let c = if dl < dh || (dl == dh && lo % 2 == 0) || t <= half_value(lo) {
            lo
        } else {
            hi
        };
        sign | c
    }

    #[test]
    fn half_is_ieee_binary16() {
        let h = q("f16");
        assert_eq!((h.bits(), h.name()), (16, "f16".to_string()));
        assert_eq!(h.compute_scalar(), Scalar::F32);
        for c in 0..=0xffffu32 {
            let d = f(h.decode(c));
            let want = half_value(c);
            if want.is_nan() {
                assert!(d.is_nan(), "decode {c:#x}");
                assert_eq!(h.encode(d.to_bits()), (c & 0x8000) | 0x7e00);
                continue;
            }
            assert_eq!(d as f64, want, "decode {c:#x}");
            assert_eq!(d.is_sign_negative(), c & 0x8000 != 0, "sign of {c:#x}");
            assert_eq!(h.encode(d.to_bits()), c, "round trip {c:#x}");
            assert!(h.fits(d.to_bits()));
            // The midpoint to the next code goes to the even one of the two.
            if c & 0x7fff < 0x7bff {
                let mid = (want + half_value(c + 1)) / 2.0;
                assert_eq!(mid as f32 as f64, mid);
                let even = if c % 2 == 0 { c } else { c + 1 };
                assert_eq!(h.encode((mid as f32).to_bits()), even, "tie after {c:#x}");
            }
        }
        // Many f32 bit patterns, every exponent, against the search.
        let mut x = 0x9e37_79b9u32;
        for k in 0..200_000u32 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let v = if k % 2 == 0 {
                x
            } else {
                (x & 0x8fff_ffff) | 0x3000_0000
            };
            assert_eq!(
                h.encode(v),
                half_reference(f(v)),
                "encode {:e} ({v:#x})",
                f(v)
            );
        }
        for v in [
            65504.0f32,
            65519.99,
            65520.0,
            1e9,
            f32::MAX,
            2f32.powi(-25),
            2f32.powi(-26),
            1e-40,
            -0.0,
        ] {
            assert_eq!(h.encode(v.to_bits()), half_reference(v), "{v:e}");
        }
        assert_eq!(h.encode(65520.0f32.to_bits()), 0x7c00);
        assert_eq!(h.encode(f32::NEG_INFINITY.to_bits()), 0xfc00);
        assert!(!h.fits(65520.0f32.to_bits()) && h.fits(f32::INFINITY.to_bits()));
        // Stochastic rounding and wrapping are refused; aliases parse.
        let st = QuantParams {
            stochastic: true,
            ..Default::default()
        };
        assert!(Quant::parse("f16", st).is_err());
        assert_eq!(q("u8"), q("uint8"));
        assert_eq!(q("i8"), q("int8"));
        assert_eq!(q("u16"), q("uint16"));
        assert_eq!(q("i16"), q("int16"));
    }

    #[test]
    fn ints_saturate_or_wrap() {
        for bits in [1u8, 2, 5, 8, 16, 31, 32] {
            let (lo, hi) = (-(1i64 << (bits - 1)), (1i64 << (bits - 1)) - 1);
            let t = q(&format!("int{bits}"));
            let w = Quant::parse(
                &format!("int{bits}"),
                QuantParams {
                    wrap: true,
                    ..Default::default()
                },
            )
            .unwrap()
            .unwrap();
            for x in [
                0i64,
                1,
                -1,
                lo,
                hi,
                lo - 1,
                hi + 1,
                7,
                -9,
                i32::MIN as i64,
                i32::MAX as i64,
            ] {
                let x32 = x as i32;
                let sat = (x32 as i64).clamp(lo, hi);
                assert_eq!(
                    t.decode(t.encode(x32 as u32)) as i32 as i64,
                    sat,
                    "int{bits} {x}"
                );
                // Wrap keeps the low bits: the value modulo 2^bits in [lo, hi].
                let m = 1i64 << bits;
                let wrapped = ((x32 as i64 - lo).rem_euclid(m)) + lo;
                assert_eq!(
                    w.decode(w.encode(x32 as u32)) as i32 as i64,
                    wrapped,
                    "wrap int{bits} {x}"
                );
                assert_eq!(t.fits(x32 as u32), (lo..=hi).contains(&(x32 as i64)));
            }
            let u = q(&format!("uint{bits}"));
            let umax = (1u64 << bits) - 1;
            for x in [0u64, 1, umax, umax + 1, 12345, u32::MAX as u64] {
                let x32 = x as u32;
                assert_eq!(
                    u.decode(u.encode(x32)) as u64,
                    (x32 as u64).min(umax),
                    "uint{bits} {x}"
                );
            }
        }
    }

    #[test]
    fn fixed_point_rounds_to_nearest_code() {
        for (bits, lo, hi) in [
            (16u8, -4.0f64, 4.0f64),
            (8, 0.0, 1.0),
            (1, -1.0, 1.0),
            (20, -2.0, 6.0),
            (11, -1.5, 0.25),
        ] {
            let t = q(&format!("fixed{bits}[{lo},{hi}]"));
            let qmax = ((1u64 << bits) - 1) as f64;
            let scale = (hi - lo) / qmax;
            let step = if bits > 12 { 97 } else { 1 };
            for c in (0..=qmax as u32).step_by(step) {
                let d = f32::from_bits(t.decode(c)) as f64;
                assert!(
                    (d - (lo + c as f64 * scale)).abs() <= 1e-6 * (hi - lo),
                    "fixed{bits} decode {c}"
                );
                assert_eq!(
                    t.encode((d as f32).to_bits()),
                    c,
                    "fixed{bits} round trip {c}"
                );
            }
            // Reference: nearest code of x by the definition, saturated.
            for x in [
                0.0,
                lo,
                hi,
                lo - 1.0,
                hi + 1e9,
                -0.0,
                0.3,
                -0.7,
                1e-7,
                (lo + hi) / 2.0,
            ] {
                let want = ((x - lo) / scale).clamp(0.0, qmax);
                let got = t.encode((x as f32).to_bits()) as f64;
                assert!(
                    (got - want).abs() <= 0.5 + 1e-3,
                    "fixed{bits} encode {x}: {got} vs {want}"
                );
                assert_eq!(t.fits((x as f32).to_bits()), x >= lo && x <= hi);
            }
            assert_eq!(t.encode(f32::NAN.to_bits()), 0);
            assert_eq!(t.encode(f32::INFINITY.to_bits()), qmax as u32);
        }
        // A tie between two codes rounds up (toward hi): [0,3] in 2 bits has codes 0..3 with scale 1.
        let t = q("fixed2[0,3]");
        assert_eq!(t.encode(0.5f32.to_bits()), 1);
        assert_eq!(t.encode(2.5f32.to_bits()), 3);
    }

    #[test]
    fn parse_errors_are_clear() {
        for bad in [
            "int0",
            "int33",
            "fixed16",
            "fixed16[4,-4]",
            "fixed30[0,1]",
            "float8m7",
            "float5",
            "half",
            "float5m0",
        ] {
            assert!(Quant::parse(bad, QuantParams::default()).is_err(), "{bad}");
        }
        assert!(Quant::parse(
            "float5m10",
            QuantParams {
                wrap: true,
                ..Default::default()
            }
        )
        .is_err());
        assert_eq!(Quant::parse("word", QuantParams::default()), Ok(None));
        assert_eq!(q("fixed8[-1,1]").name(), "fixed8[-1.0,1.0]");
        assert_eq!(q("float5m10").bits(), 16);
    }

    /// Stochastic rounding against a brute-force reference: the two codes
    /// around v are found by decoding every code; every random draw must
    /// give one of them, the share going up must be (v - lower) / (upper -
    /// lower), and values on a code, beyond the range, negative in ufloat
    /// or NaN behave as with nearest rounding.
    #[test]
    fn stochastic_rounding_picks_a_neighbour_in_proportion() {
        let sq = |s: &str| {
            Quant::parse(
                s,
                QuantParams {
                    stochastic: true,
                    ..Default::default()
                },
            )
            .unwrap()
            .unwrap()
        };
        assert!(Quant::parse(
            "int4",
            QuantParams {
                stochastic: true,
                ..Default::default()
            }
        )
        .is_err());
        for name in [
            "fixed8[0,255]",
            "fixed5[-1,1]",
            "float5m2",
            "ufloat4m3",
            "float3m4",
        ] {
            let q = sq(name);
            assert!(q.stochastic());
            let codes: Vec<(u32, f32)> = (0..=q.mask()).map(|c| (c, f(q.decode(c)))).collect();
            let inputs = [
                0.3f32, 1.125, -0.7, 2.6, 0.01, 1e-5, 3.0e-6, 200.37, 0.0, -0.0, 1.0, 0.25,
            ];
            for v in inputs {
                let lower = codes
                    .iter()
                    .filter(|c| c.1 <= v)
                    .max_by(|a, b| a.1.total_cmp(&b.1));
                let upper = codes
                    .iter()
                    .filter(|c| c.1 >= v)
                    .min_by(|a, b| a.1.total_cmp(&b.1));
                let (Some(lo), Some(hi)) = (lower, upper) else {
                    // Outside the range: saturates exactly like nearest.
                    for r in [0, 0x80_0000, 0xff_ffff] {
                        assert_eq!(q.encode_stochastic(v.to_bits(), r), q.encode(v.to_bits()));
                    }
                    continue;
                };
                let mut ups = 0u64;
                let draws = 4096u32;
                for k in 0..draws {
                    let r = k * 4096 + 1234;
                    let got = f(q.decode(q.encode_stochastic(v.to_bits(), r)));
                    assert!(
                        got == lo.1 || got == hi.1,
                        "{name} {v}: {got} is not {} or {}",
                        lo.1,
                        hi.1
                    );
                    if got == hi.1 && hi.1 != lo.1 {
                        ups += 1;
                    }
                }
                let want = if hi.1 == lo.1 {
                    0.0
                } else {
                    ((v - lo.1) / (hi.1 - lo.1)) as f64
                };
                let share = ups as f64 / draws as f64;
                assert!(
                    (share - want).abs() <= 2.0 / draws as f64,
                    "{name} {v}: up {share}, want {want}"
                );
            }
            // NaN, infinities: as nearest (lo / saturation).
            for v in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1e30] {
                assert_eq!(
                    q.encode_stochastic(v.to_bits(), 0x12_3456),
                    q.encode(v.to_bits()),
                    "{name} {v}"
                );
            }
        }
    }

    /// Reference for shared exponents, from the definition in f64: the
    /// smallest exponent code at which every component rounds (to nearest,
    /// ties away from zero) to at most 2^M - 1, else the largest exponent
    /// with saturated significands; the decoded values are compared.
    fn shared_reference(s: SharedFloat, v: &[f32]) -> Vec<f64> {
        let bias = (1i32 << (s.exp - 1)) - 1;
        let mmax = ((1u64 << s.frac) - 1) as f64;
        let emax = (1i32 << s.exp) - 1;
        let mag = |x: f32| -> f64 {
            if x.is_nan() {
                f64::INFINITY
            } else if !s.signed && x < 0.0 {
                0.0
            } else {
                (x as f64).abs()
            }
        };
        for e in 0..=emax {
            let step = 2f64.powi(e - bias - s.frac as i32 + 1);
            let ms: Vec<f64> = v.iter().map(|&x| (mag(x) / step + 0.5).floor()).collect();
            if ms.iter().all(|&m| m <= mmax) || e == emax {
                return v
                    .iter()
                    .zip(ms)
                    .map(|(&x, m)| {
                        let y = m.min(mmax) * step;
                        if s.signed && x.is_sign_negative() {
                            -y
                        } else {
                            y
                        }
                    })
                    .collect();
            }
        }
        unreachable!()
    }

    #[test]
    fn shared_exponents_round_like_the_reference() {
        let fl = |e, m, signed| Quant::Float {
            exp: e,
            frac: m,
            signed,
            stochastic: false,
        };
        let formats = [
            SharedFloat::new(fl(6, 12, true), 2).unwrap(),
            SharedFloat::new(fl(5, 8, true), 3).unwrap(),
            SharedFloat::new(fl(4, 13, false), 2).unwrap(),
            SharedFloat::new(fl(3, 3, true), 4).unwrap(),
            SharedFloat::new(fl(7, 5, true), 4).unwrap(),
        ];
        let max = |s: SharedFloat| f(s.consts().1);
        for s in formats {
            assert!(s.bits() <= 32);
            let big = max(s);
            // The largest value is (2^M - 1) * 2^(emax - bias - M + 1).
            let (bias, _, emax) = s.consts();
            assert_eq!(
                big as f64,
                ((1u64 << s.frac) - 1) as f64
                    * 2f64.powi(emax as i32 - bias as i32 - s.frac as i32 + 1)
            );
            let mut singles: Vec<f32> = vec![
                0.0,
                -0.0,
                1.0,
                -1.0,
                0.5,
                1.5,
                2.5,
                3.0,
                0.1,
                -0.3,
                1e-3,
                1e-6,
                1e-12,
                1e-30,
                f32::MIN_POSITIVE,
                1e-40,
                7.0,
                100.0,
                -250.5,
                1e6,
                big,
                -big,
                big * 1.5,
                f32::INFINITY,
                f32::NEG_INFINITY,
                1.0 + 1.0 / 4096.0,
                1.0 + 1.0 / 8192.0,
            ];
            let mut x = 1.3e-9f32;
            while x < 1e9 {
                singles.push(x);
                singles.push(-x * 0.61);
                x *= 2.9;
            }
            let n = s.n as usize;
            let mut k = 0usize;
            let mut cases: Vec<Vec<f32>> = vec![];
            for i in 0..singles.len() {
                for j in 0..singles.len() {
                    k += 1;
                    let mut v = vec![singles[i], singles[j]];
                    while v.len() < n {
                        v.push(singles[(i * 7 + j * 3 + v.len() + k) % singles.len()]);
                    }
                    cases.push(v);
                }
            }
            // Ties on the grid of the largest component: 1.0 with a
            // second component halfway between two steps rounds away from 0.
            let step = 2f32.powi(1 - s.frac as i32);
            let mut tie = vec![1.0f32; n];
            tie[1] = 1.5 * step;
            cases.push(tie.clone());
            tie[1] = -2.5 * step;
            cases.push(tie);
            for v in cases {
                let bits: Vec<u32> = v.iter().map(|x| x.to_bits()).collect();
                let code = s.encode(&bits);
                assert!(code <= mask(s.bits()), "{s:?} {v:?}: code {code:#x}");
                let want = shared_reference(s, &v);
                for c in 0..n {
                    let got = f(s.decode(code, c));
                    assert_eq!(got as f64, want[c], "{s:?} {v:?} component {c}");
                    // Negative zero and signs survive a signed format.
                    if s.signed && v[c] == 0.0 {
                        assert_eq!(got.is_sign_negative(), v[c].is_sign_negative());
                    }
                }
                // Decoding is exact: re-encoding a decoded element keeps its values.
                let dec: Vec<u32> = (0..n).map(|c| s.decode(code, c)).collect();
                let again = s.encode(&dec);
                for (c, &d) in dec.iter().enumerate() {
                    assert_eq!(s.decode(again, c), d, "{s:?} {v:?} re-encode {c}");
                }
            }
            // NaN saturates to the largest magnitude.
            let mut v = vec![0u32; n];
            v[0] = f32::NAN.to_bits();
            assert_eq!(f(s.decode(s.encode(&v), 0)), big);
        }
        // A component far below the largest flushes to zero; its sign stays.
        let s = SharedFloat::new(fl(6, 12, true), 2).unwrap();
        let code = s.encode(&[1000.0f32.to_bits(), (-0.01f32).to_bits()]);
        assert_eq!(f(s.decode(code, 0)), 1000.0);
        assert_eq!(s.decode(code, 1), (-0.0f32).to_bits());
        // Too many bits, scalars, stochastic rounding and non-floats are refused.
        assert!(SharedFloat::new(fl(5, 10, true), 3).is_err());
        assert!(SharedFloat::new(fl(5, 10, true), 1).is_err());
        assert!(SharedFloat::new(q("int8"), 2).is_err());
        // Stochastic rounding: every draw gives one of the two neighbouring
        // steps, in proportion (the larger component sets the exponent).
        let st = SharedFloat::new(
            Quant::Float {
                exp: 4,
                frac: 8,
                signed: true,
                stochastic: true,
            },
            2,
        )
        .unwrap();
        let step = 2f64.powi(-7); // at |v| in [1, 2)
        for (a, b) in [
            (1.3f32, -0.0117f32),
            (-1.75, 0.5001),
            (1.0, 1e-4),
            (1.25, 0.0),
        ] {
            let draws = 4096u32;
            let mut sum = [0f64; 2];
            for k in 0..draws {
                let code = st.encode_stochastic(&[a.to_bits(), b.to_bits()], k * 4096 + 77);
                for (c, x) in [a, b].into_iter().enumerate() {
                    let got = f(st.decode(code, c)) as f64;
                    let lo = (x as f64 / step).floor() * step;
                    assert!(got == lo || got == lo + step, "{x}: {got}");
                    sum[c] += got;
                }
            }
            for (c, x) in [a, b].into_iter().enumerate() {
                let mean = sum[c] / draws as f64;
                assert!(
                    (mean - x as f64).abs() <= step * 2.0 / draws as f64 + 1e-12,
                    "{x}: mean {mean}"
                );
            }
        }
    }
}
