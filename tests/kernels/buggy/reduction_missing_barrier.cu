// A shared-memory tree reduction whose loop lost its barrier.
// kernel: block_sum
// launch: 2 128
// args: f32[256]=1 f32[2]=0
// expect: racecheck: shared-memory hazard between threads of a block (read after write)
__global__ void block_sum(const float* in, float* partial) {
    __shared__ float sdata[128];
    unsigned int t = threadIdx.x;
    sdata[t] = in[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) {
            sdata[t] += sdata[t + s];
        }
    }
    if (t == 0) partial[blockIdx.x] = sdata[0];
}
