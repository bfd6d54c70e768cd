// A per-thread local array indexed from data with no clamp: the bin index 24 writes 32 bytes past
// the 64-byte local array (a local histogram with too few bins).
// kernel: local_hist
// launch: 1 32
// args: i32[32]=24 i32[32]=0
// expect: memcheck: invalid local read of 4 bytes past `counts` (the read of its `+=`), by thread 0 (line 11)
__global__ void local_hist(const int* bins_in, int* out) {
    int counts[16];
    for (int k = 0; k < 16; ++k) counts[k] = 0;
    int b = bins_in[threadIdx.x];
    counts[b] += 1;
    int s = 0;
    for (int k = 0; k < 16; ++k) s += counts[k] * k;
    out[threadIdx.x] = s;
}
