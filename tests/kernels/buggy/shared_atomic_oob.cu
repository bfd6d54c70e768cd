// A shared-memory histogram with one bin too few: values 0..16 counted into 16 shared bins,
// the value 16 is an atomicAdd one past the shared array.
// kernel: shared_hist
// launch: 1 128
// args: i32[128]=iota17 i32[16]=0
// expect: memcheck: invalid shared atomic of 4 bytes, 0 bytes past `bins_s`, by thread 16 (line 12)
__global__ void shared_hist(const int* values, int* bins) {
    __shared__ int bins_s[16];
    if (threadIdx.x < 16) bins_s[threadIdx.x] = 0;
    __syncthreads();
    int v = values[threadIdx.x];
    atomicAdd(&bins_s[v], 1);
    __syncthreads();
    if (threadIdx.x < 16) atomicAdd(&bins[threadIdx.x], bins_s[threadIdx.x]);
}
