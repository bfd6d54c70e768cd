// A per-block histogram in shared memory counted with `+=` instead of atomicAdd.
// kernel: histogram8
// launch: 1 128
// args: i32[128]=iota8 i32[8]=0
// expect: racecheck: shared-memory hazard between threads of a block (write after write)
__global__ void histogram8(const int* values, int* bins) {
    __shared__ int counts[8];
    if (threadIdx.x < 8) counts[threadIdx.x] = 0;
    __syncthreads();
    counts[values[threadIdx.x]] += 1;
    __syncthreads();
    if (threadIdx.x < 8) bins[threadIdx.x] = counts[threadIdx.x];
}
