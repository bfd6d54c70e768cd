// Tiled transpose through shared memory (the padded tile avoids bank conflicts on a GPU):
// out = in^T. Launch with 32x8 blocks over ceil(cols/32) x ceil(rows/32).
#include "gpu_mem.h"

#define TILE 32
#define ROWS 8

extern "C" __global__ void transpose(gm_array<float, 2> in, gm_array<float, 2> out) {
    __shared__ float tile[TILE][TILE + 1];
    const long long rows = in.shape[0], cols = in.shape[1];
    long long x = blockIdx.x * TILE + threadIdx.x;
    long long y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS) {
        if (x < cols && y + j < rows) {
            tile[threadIdx.y + j][threadIdx.x] = in(y + j, x);
        }
    }
    syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS) {
        if (x < rows && y + j < cols) {
            out(y + j, x) = tile[threadIdx.x][threadIdx.y + j];
        }
    }
}
