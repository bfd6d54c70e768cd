// Kernels that a GPU would not survive and the simulator reports. `past_the_end` writes one
// element past its array in its last thread; `half_barrier` lets half the block reach a
// barrier; `lane_vote` lets one lane skip a warp vote.
#include "gpu_mem.h"

extern "C" __global__ void past_the_end(gm_array<float, 1> a) {
    const long long i = grid(1);
    a(i + 1) = 1.0f;
}

extern "C" __global__ void half_barrier(gm_array<float, 1> a) {
    if (threadIdx.x < 16) {
        syncthreads();
    }
    a(0) = 0.0f;
}

extern "C" __global__ void lane_vote(gm_array<int, 1> a) {
    int v = 0;
    if (gm_lane_id() != 5) {
        v = __any_sync(~0ull, 1);
    }
    a(grid(1)) = v;
}

extern "C" __global__ void two_barriers(gm_array<float, 1> a) {
    if (threadIdx.x % 2 == 0) {
        syncthreads();
    } else {
        barrier(GM_FENCE_GLOBAL);
    }
    a(0) = 0.0f;
}
