// Every block adds its partial sum to one total with `+=`: blocks race on the total.
// kernel: total_sum
// launch: 4 64
// args: f32[256]=1 f32[1]=0
// expect: racecheck (global): a hazard between blocks on the total (compute-sanitizer's
// racecheck watches shared memory only)
__global__ void total_sum(const float* in, float* total) {
    __shared__ float sdata[64];
    unsigned int t = threadIdx.x;
    sdata[t] = in[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) sdata[t] += sdata[t + s];
        __syncthreads();
    }
    if (t == 0) total[0] += sdata[0];
}
