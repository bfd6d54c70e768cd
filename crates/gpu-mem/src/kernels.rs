//! Ready-made kernels, written once as portable source (`gpu_mem_core::kernel::portable`) and
//! run unchanged by every backend: NVRTC (CUDA), hiprtc (ROC) and the host C++ compiler (the
//! simulator). They are the kernels of Numba's documentation and tests that exercise shared
//! memory and barriers, used by the examples, the conformance suite and the benchmarks.

use gpu_mem_core::Kernel;
use gpu_mem_core::kernel::portable;

/// Tile width of [`matmul_tiled`] (threads per block are `TPB x TPB`).
pub const TPB: usize = 16;

/// `C = A x B` for `f32` matrices with 16x16 shared tiles and two barriers per tile (Numba's
/// `fast_matmul`). Arguments: `A (m, k)`, `B (k, n)`, `C (m, n)`; launch with blocks of
/// `(16, 16)` and a grid of `(ceil(n / 16), ceil(m / 16))`.
pub fn matmul_tiled() -> Kernel {
    Kernel::from_source(portable::MATMUL_TILED, "matmul_tiled")
}

/// `partial[b]` = the sum of block `b`'s slice of `input` (`f32`), by a shared-memory tree
/// reduction. Launch 1-d with a power-of-two block size and `block * 4` bytes of dynamic shared
/// memory; `partial` needs one element per block.
pub fn block_sum() -> Kernel {
    Kernel::from_source(portable::BLOCK_SUM, "block_sum")
}

/// Largest block [`barrier_wave`] accepts.
pub const BARRIER_WAVE_MAX_BLOCK: usize = 256;

/// A Numba-ROC-style kernel: `scratch[i] = i` and a shared write before a global-fence barrier,
/// then a wave barrier between lanes. `out[i] = (n - 1 - t) * 1000 + (local id of the next lane
/// of the same warp, wrapping)`, for thread `t` of a block of `n` (at most 256) threads.
pub fn barrier_wave() -> Kernel {
    Kernel::from_source(portable::BARRIER_WAVE, "barrier_wave")
}

/// What [`barrier_wave`] must write at global index `gid` for blocks of `block` threads and
/// warps of `warp` lanes (no launch has blocks or warps of 0 threads: either is taken as 1).
pub fn barrier_wave_expected(gid: usize, block: usize, warp: usize) -> f32 {
    let (block, warp) = (block.max(1), warp.max(1));
    let t = gid % block;
    let lane = t % warp;
    let wave_base = t - lane;
    let mut next = if lane + 1 == warp { 0 } else { lane + 1 };
    if wave_base + next >= block {
        next = 0;
    }
    ((block - 1 - t) * 1000 + wave_base + next) as f32
}

#[cfg(test)]
mod tests {
    use super::barrier_wave_expected;

    #[test]
    fn expected_values_of_blocks_or_warps_of_no_threads_are_those_of_one() {
        assert_eq!(
            barrier_wave_expected(5, 0, 0),
            barrier_wave_expected(5, 1, 1)
        );
        assert_eq!(
            barrier_wave_expected(5, 64, 0),
            barrier_wave_expected(5, 64, 1)
        );
        // Thread 3 of 4 in a warp of 2: (4 - 1 - 3) * 1000 + 2 + 0 (lane 1 wraps to lane 0).
        assert_eq!(barrier_wave_expected(7, 4, 2), 2.0);
    }
}
