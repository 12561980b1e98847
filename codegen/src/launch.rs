//! The launch record: what one kernel launch needs at run time.
//!
//! One type shared by the code generators (which read its words) and the
//! runtime's schedule executor (which fills one per launch), so that the
//! word layout is written down once instead of as magic indices on both
//! sides. Every backend receives a frame's launches as a list of these.

use weft_ir::ir::{KernelId, Program};

/// Word indices of the record's header, then the kernel's scalar parameters.
pub mod word {
    /// Frame number (i32 bits; 0 during `on_start`).
    pub const FRAME: u32 = 0;
    /// Earlier launches of this kernel in the run (feeds `random()`).
    pub const LAUNCH: u32 = 1;
    /// The program's random seed.
    pub const SEED: u32 = 2;
    /// Loop iterations of the launch (product of the shape).
    pub const TOTAL: u32 = 3;
    /// Extent of each loop axis (three words; unused axes are 0).
    pub const SHAPE: u32 = 4;
    /// Invocations per dispatch row (GPU backends split large launches into rows).
    pub const THREADS_PER_ROW: u32 = 7;
    /// Words before the scalar parameters.
    pub const HEADER: u32 = 8;
}

/// One launch of one kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchRecord {
    pub kernel: KernelId,
    pub frame: i32,
    pub launch_index: u32,
    pub seed: u32,
    /// The iteration shape (1 to 3 axes).
    pub shape: Vec<u32>,
    /// The kernel's scalar parameter values (bits), in declaration order.
    pub params: Vec<u32>,
}

impl LaunchRecord {
    /// The record of launching `kernel` now.
    pub fn new(program: &Program, kernel: KernelId, frame: i32, launch_index: u32) -> Self {
        let k = &program.kernels[kernel];
        LaunchRecord {
            kernel,
            frame,
            launch_index,
            seed: program.seed,
            shape: k.iteration_shape(program),
            params: k.params.iter().map(|p| p.value).collect(),
        }
    }

    /// Loop iterations.
    pub fn total(&self) -> u64 {
        self.shape.iter().map(|&s| s as u64).product()
    }

    /// The record as words (`word::*` layout), padded to `params_words` parameters.
    pub fn words(&self, threads_per_row: u32, params_words: u32) -> Vec<u32> {
        let mut w = vec![0u32; (word::HEADER + params_words) as usize];
        w[word::FRAME as usize] = self.frame as u32;
        w[word::LAUNCH as usize] = self.launch_index;
        w[word::SEED as usize] = self.seed;
        w[word::TOTAL as usize] = self.total() as u32;
        for (d, &s) in self.shape.iter().enumerate().take(3) {
            w[word::SHAPE as usize + d] = s;
        }
        w[word::THREADS_PER_ROW as usize] = threads_per_row;
        for (i, &p) in self.params.iter().enumerate() {
            w[(word::HEADER as usize) + i] = p;
        }
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_follow_the_documented_layout() {
        let r = LaunchRecord {
            kernel: weft_ir::Handle::new(0),
            frame: -1,
            launch_index: 7,
            seed: 42,
            shape: vec![3, 5],
            params: vec![0x3f80_0000],
        };
        let w = r.words(128, 2);
        assert_eq!(
            w,
            vec![u32::MAX, 7, 42, 15, 3, 5, 0, 128, 0x3f80_0000, 0],
            "frame, launch, seed, total, shape[3], threads per row, params"
        );
    }
}
