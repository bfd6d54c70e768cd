// Shared-memory block reduction: partial[b] = sum of input[b * blockDim.x ...][blockDim.x].
// Launch with a power-of-two block size and blockDim.x * sizeof(float) bytes of dynamic shared
// memory; partial needs one element per block. Elements past the end of input count as 0.
#include "gpu_mem.h"

extern "C" __global__ void block_sum(gm_array<float, 1> input, gm_array<float, 1> partial) {
    float* cache = gm_dynamic_shared<float>();
    const int tid = threadIdx.x;
    const long long i = grid(1);

    cache[tid] = i < input.shape[0] ? input(i) : 0.0f;
    barrier(GM_FENCE_LOCAL);

    // Tree reduction: halve the number of active threads each step.
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (tid < stride) {
            cache[tid] += cache[tid + stride];
        }
        barrier(GM_FENCE_LOCAL);
    }
    if (tid == 0 && blockIdx.x < partial.shape[0]) {
        partial(blockIdx.x) = cache[0];
    }
}
