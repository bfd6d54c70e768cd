// A spin-wait across warps: thread 0 waits for a flag that the first thread of the block's
// last warp sets after writing data (forward progress, as on Volta-class GPUs). Launch blocks
// of 128 threads; out(b) = data written by the other warp for block b.
#include "gpu_mem.h"

extern "C" __global__ void spin_wait(gm_array<int, 1> flags, gm_array<int, 1> data,
                                     gm_array<int, 1> out) {
    const int t = threadIdx.x;
    const int b = blockIdx.x;
    if (t == (int)blockDim.x - gm_warp_size()) {
        data(b) = 1000 + b;
        __threadfence();
        atomicExch(&flags(b), 1);
    }
    if (t == 0) {
        while (atomicAdd(&flags(b), 0) == 0) {
        }
        __threadfence();
        out(b) = data(b);
    }
}
