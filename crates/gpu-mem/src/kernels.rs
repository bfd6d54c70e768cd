//! Ready-made kernels, each in both forms: a Rust closure for the simulator and the portable
//! source (`gpu_mem_core::kernel::portable`) for CUDA and ROC. They are the kernels of Numba's
//! documentation and tests that exercise shared memory and barriers, used by the examples, the
//! conformance suite and the benchmarks.

use gpu_mem_core::kernel::portable;
use gpu_mem_core::{Fence, Kernel};

/// Tile width of [`matmul_tiled`] (threads per block are `TPB x TPB`).
pub const TPB: usize = 16;

/// `C = A x B` for `f32` matrices with 16x16 shared tiles and two barriers per tile (Numba's
/// `fast_matmul`). Arguments: `A (m, k)`, `B (k, n)`, `C (m, n)`; launch with blocks of
/// `(16, 16)` and a grid of `(ceil(n / 16), ceil(m / 16))`.
pub fn matmul_tiled() -> Kernel {
    Kernel::sim("matmul_tiled", |t| {
        let (a, b, c) = (t.array::<f32>(0), t.array::<f32>(1), t.array::<f32>(2));
        let sa = t.shared_array::<f32, 2>([TPB, TPB]);
        let sb = t.shared_array::<f32, 2>([TPB, TPB]);
        let (x, y) = t.grid2();
        let (tx, ty) = (t.thread_idx().x as usize, t.thread_idx().y as usize);
        let (a_rows, a_cols) = (a.shape()[0], a.shape()[1]);
        let b_cols = b.shape()[1];
        let tiles = a_cols.div_ceil(TPB);
        let mut acc = 0.0f32;
        for i in 0..tiles {
            let col = tx + i * TPB;
            let row = ty + i * TPB;
            sa.set(
                [ty, tx],
                if y < a_rows && col < a_cols {
                    a.get([y, col])
                } else {
                    0.0
                },
            );
            sb.set(
                [ty, tx],
                if x < b_cols && row < a_cols {
                    b.get([row, x])
                } else {
                    0.0
                },
            );
            t.syncthreads();
            for j in 0..TPB {
                acc += sa.get([ty, j]) * sb.get([j, tx]);
            }
            t.syncthreads();
        }
        if y < c.shape()[0] && x < c.shape()[1] {
            c.set([y, x], acc);
        }
    })
    .with_source(portable::MATMUL_TILED, "matmul_tiled")
}

/// `partial[b]` = the sum of block `b`'s slice of `input` (`f32`), by a shared-memory tree
/// reduction. Launch 1-d with a power-of-two block size and `block * 4` bytes of dynamic shared
/// memory; `partial` needs one element per block.
pub fn block_sum() -> Kernel {
    Kernel::sim("block_sum", |t| {
        let (input, partial) = (t.array::<f32>(0), t.array::<f32>(1));
        let cache = t.dynamic_shared::<f32>();
        let tid = t.thread_idx().x as usize;
        let i = t.grid1();
        cache.set([tid], if i < input.len() { input.get([i]) } else { 0.0 });
        t.syncthreads();
        let mut stride = t.block_dim().x as usize / 2;
        while stride > 0 {
            if tid < stride {
                cache.set([tid], cache.get([tid]) + cache.get([tid + stride]));
            }
            t.syncthreads();
            stride /= 2;
        }
        let block = t.block_idx().x as usize;
        if tid == 0 && block < partial.len() {
            partial.set([block], cache.get([0]));
        }
    })
    .with_source(portable::BLOCK_SUM, "block_sum")
}

/// Largest block [`barrier_wave`] accepts.
pub const BARRIER_WAVE_MAX_BLOCK: usize = 256;

/// A Numba-ROC-style kernel: `scratch[i] = i` and a shared write before a global-fence barrier,
/// then a wave barrier between lanes. `out[i] = (n - 1 - t) * 1000 + (local id of the next lane
/// of the same warp, wrapping)`, for thread `t` of a block of `n` (at most 256) threads.
pub fn barrier_wave() -> Kernel {
    Kernel::sim("barrier_wave", |t| {
        let (out, scratch) = (t.array::<f32>(0), t.array::<f32>(1));
        let by_thread = t.shared_array::<f32, 1>([BARRIER_WAVE_MAX_BLOCK]);
        let by_lane = t.shared_array::<f32, 1>([BARRIER_WAVE_MAX_BLOCK]);
        let gid = t.grid1();
        let tid = t.thread_idx().x as usize;
        let n = t.block_dim().x as usize;
        if gid < scratch.len() {
            scratch.set([gid], gid as f32);
        }
        by_thread.set([tid], tid as f32);
        t.barrier(Fence::Global);
        let reversed = by_thread.get([n - 1 - tid]);
        let lane = t.lane_id() as usize;
        let wave = t.warp_size() as usize;
        let wave_base = tid - lane;
        by_lane.set([tid], tid as f32);
        t.wavebarrier();
        let mut next = if lane + 1 == wave { 0 } else { lane + 1 };
        if wave_base + next >= n {
            next = 0;
        }
        let neighbour = by_lane.get([wave_base + next]);
        if gid < out.len() {
            out.set([gid], reversed * 1000.0 + neighbour);
        }
    })
    .with_source(portable::BARRIER_WAVE, "barrier_wave")
}

/// What [`barrier_wave`] must write at global index `gid` for blocks of `block` threads and
/// warps of `warp` lanes.
pub fn barrier_wave_expected(gid: usize, block: usize, warp: usize) -> f32 {
    let t = gid % block;
    let lane = t % warp;
    let wave_base = t - lane;
    let mut next = if lane + 1 == warp { 0 } else { lane + 1 };
    if wave_base + next >= block {
        next = 0;
    }
    ((block - 1 - t) * 1000 + wave_base + next) as f32
}
