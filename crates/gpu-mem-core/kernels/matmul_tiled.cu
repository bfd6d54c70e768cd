// Tiled matrix multiplication C = A x B with 16x16 shared-memory tiles (the "fast_matmul"
// example of Numba's CUDA documentation). Launch with 16x16 blocks and a grid covering C:
// grid = (ceil(C.shape[1] / 16), ceil(C.shape[0] / 16)). Any matrix sizes work: tiles are
// zero-padded at the edges, and every thread reaches both barriers of every tile.
#include "gpu_mem.h"

#define TPB 16

extern "C" __global__ void matmul_tiled(gm_array<float, 2> A, gm_array<float, 2> B,
                                        gm_array<float, 2> C) {
    GM_SHARED float sA[TPB][TPB];
    GM_SHARED float sB[TPB][TPB];

    gm_idx2 pos = grid(2);
    const long long x = pos.x;  // column of C
    const long long y = pos.y;  // row of C
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;

    const long long tiles = (A.shape[1] + TPB - 1) / TPB;
    float tmp = 0.0f;
    for (long long i = 0; i < tiles; ++i) {
        // Preload one tile of A and one of B into shared memory, zero outside the matrices.
        sA[ty][tx] = 0.0f;
        sB[ty][tx] = 0.0f;
        if (y < A.shape[0] && tx + i * TPB < A.shape[1]) {
            sA[ty][tx] = A(y, tx + i * TPB);
        }
        if (x < B.shape[1] && ty + i * TPB < B.shape[0]) {
            sB[ty][tx] = B(ty + i * TPB, x);
        }
        // Wait until the whole tile is loaded.
        barrier(GM_FENCE_LOCAL);
        for (int j = 0; j < TPB; ++j) {
            tmp += sA[ty][j] * sB[j][tx];
        }
        // Wait until every thread is done with the tile before it is overwritten.
        barrier(GM_FENCE_LOCAL);
    }
    if (y < C.shape[0] && x < C.shape[1]) {
        C(y, x) = tmp;
    }
}
