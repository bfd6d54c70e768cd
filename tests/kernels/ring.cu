// Thread t writes shared slot t, then after the barrier reads slot (t + 1) % n: without a real
// barrier, early threads would read slots not yet written. out(b, t) = (t + 1) % n + 1.
#include "gpu_mem.h"

extern "C" __global__ void ring(gm_array<int, 2> out) {
    __shared__ int slots[1024];
    const int t = threadIdx.x;
    const int n = blockDim.x;
    slots[t] = t + 1;
    syncthreads();
    out(blockIdx.x, t) = slots[(t + 1) % n];
}
