// A Numba-ROC-style barrier kernel. Launch 1-D with at most 256 threads per block.
//
// out(i) receives, for global thread i with local id t in a block of n threads:
//   reversed(i) = the local id n-1-t, read back through shared memory after a global-fence
//                 barrier (every thread's write must be visible to the whole block);
//   neighbour(i) = the value written by the next lane of the same warp / wavefront
//                 (lane + 1, wrapping), read after a wave barrier.
// So out(i) = reversed(i) * 1000 + neighbour lane's local id. scratch(i) gets the global id,
// written before the global fence.
#include "gpu_mem.h"

#define MAX_BLOCK 256

extern "C" __global__ void barrier_wave(gm_array<float, 1> out, gm_array<float, 1> scratch) {
    GM_SHARED float by_thread[MAX_BLOCK];
    GM_SHARED float by_lane[MAX_BLOCK];

    const long long gid = grid(1);
    const int t = threadIdx.x;
    const int n = blockDim.x;

    if (gid < scratch.shape[0]) {
        scratch(gid) = (float)gid;
    }
    by_thread[t] = (float)t;
    // Global fence + block barrier: scratch and by_thread writes are visible after this.
    barrier(GM_FENCE_GLOBAL);
    const float reversed = by_thread[n - 1 - t];

    const int lane = gm_lane_id();
    const int wave = gm_warp_size();
    const int wave_base = t - lane;
    by_lane[t] = (float)t;
    wavebarrier();
    int next = lane + 1 == wave ? 0 : lane + 1;
    if (wave_base + next >= n) {
        next = 0;  // partial last warp: wrap to its first lane
    }
    const float neighbour = by_lane[wave_base + next];

    if (gid < out.shape[0]) {
        out(gid) = reversed * 1000.0f + neighbour;
    }
}
