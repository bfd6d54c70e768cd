// Every thread writes its indices: out(z, y, x) over the whole grid, as
// block * 1000000 + thread * 1000 + warp_size, encoded per axis (see the conformance case).
#include "gpu_mem.h"

extern "C" __global__ void indices(gm_array<long long, 3> out, gm_array<int, 1> lanes) {
    gm_idx3 g = grid(3);
    gm_idx3 size = gridsize(3);
    if (g.x < out.shape[2] && g.y < out.shape[1] && g.z < out.shape[0]) {
        out(g.z, g.y, g.x) = (long long)blockIdx.x * 1000000 + blockIdx.y * 10000 +
                             blockIdx.z * 100 + threadIdx.x * 10 + threadIdx.y + threadIdx.z;
    }
    const long long linear = (g.z * size.y + g.y) * size.x + g.x;
    if (linear < lanes.shape[0]) {
        lanes(linear) = gm_lane_id() + 1000 * gm_warp_size();
    }
}
