/* <cooperative_groups/reduce.h> for kernels built by hiprtc (gpu-mem's header of this name):
 * reduce over a tile (every thread gets the result) and its operators. */
#pragma once
#include <cooperative_groups.h>

namespace cooperative_groups {
template <typename T>
struct plus {
    __device__ T operator()(T a, T b) const { return a + b; }
};
template <typename T>
struct less {
    __device__ T operator()(T a, T b) const { return b < a ? b : a; }
};
template <typename T>
struct greater {
    __device__ T operator()(T a, T b) const { return a < b ? b : a; }
};
template <typename T>
struct bit_and {
    __device__ T operator()(T a, T b) const { return a & b; }
};
template <typename T>
struct bit_or {
    __device__ T operator()(T a, T b) const { return a | b; }
};
template <typename T>
struct bit_xor {
    __device__ T operator()(T a, T b) const { return a ^ b; }
};
template <unsigned int N, typename P, typename T, typename Op>
__device__ inline T reduce(const thread_block_tile<N, P>& tile, T value, Op op) {
    return tile.gm_reduce(value, op);
}
template <typename T, typename Op>
__device__ inline T reduce(const coalesced_group& group, T value, Op op) {
    return group.gm_reduce(value, op);
}
}  // namespace cooperative_groups
