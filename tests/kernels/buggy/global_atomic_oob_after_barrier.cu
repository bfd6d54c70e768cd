// A block histogram flushed to global bins with atomicAdd after a barrier: the flush indexes the
// global bins at (block + 1) * 8 + thread: threads 8..15 of block 0 already pass the 16 bins.
// kernel: flush_bins
// launch: 2 16
// args: i32[32]=iota4 i32[16]=0
// expect: memcheck: invalid global atomic of 4 bytes, 0 bytes past the 64-byte bins, by thread 8 of block 0 (line 12)
__global__ void flush_bins(const int* values, int* bins) {
    __shared__ int local_count[16];
    local_count[threadIdx.x] = values[blockIdx.x * 16 + threadIdx.x];
    __syncthreads();
    int base = (blockIdx.x + 1) * 8;
    atomicAdd(&bins[base + threadIdx.x], local_count[threadIdx.x]);
}
