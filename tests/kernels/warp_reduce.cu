// Sum of `input` with warp shuffles: each warp reduces its values with __shfl_down_sync, lane 0
// adds the warp's sum to total(0) with atomicAdd. Works for warps of 32 and 64 lanes.
// Also writes, per thread, the value __shfl_sync read from lane 0 and __shfl_xor_sync from
// lane ^ 1 (for the exchange check).
#include "gpu_mem.h"

extern "C" __global__ void warp_reduce(gm_array<int, 1> input, gm_array<int, 1> total,
                                       gm_array<int, 2> exchange) {
    const long long i = grid(1);
    int value = i < input.shape[0] ? input(i) : 0;
    const unsigned long long all = ~0ull;
    const int from_lane0 = __shfl_sync(all, (int)i, 0);
    const int from_xor = __shfl_xor_sync(all, (int)i, 1);
    const int from_up = __shfl_up_sync(all, (int)i, 1);
    for (int offset = gm_warp_size() / 2; offset > 0; offset /= 2) {
        value += __shfl_down_sync(all, value, offset);
    }
    if (gm_lane_id() == 0) {
        atomicAdd(&total(0), value);
    }
    if (i < exchange.shape[0]) {
        exchange(i, 0) = from_lane0;
        exchange(i, 1) = from_xor;
        exchange(i, 2) = from_up;
    }
}
