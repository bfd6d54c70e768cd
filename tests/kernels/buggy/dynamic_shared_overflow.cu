// Two values a thread in dynamic shared memory sized for one.
// kernel: pairs
// launch: 1 64 256
// args: f32[64]=1 f32[64]=0
// expect: memcheck: invalid shared write of 4 bytes, past the 256 dynamic bytes, by thread 32
__global__ void pairs(const float* in, float* out) {
    extern __shared__ float buffer[];
    buffer[2 * threadIdx.x] = in[threadIdx.x];
    buffer[2 * threadIdx.x + 1] = -in[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = buffer[2 * threadIdx.x] + buffer[2 * threadIdx.x + 1];
}
