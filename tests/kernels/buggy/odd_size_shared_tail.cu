// A shared array of 63 floats (252 bytes) written by 64 threads: thread 63 writes past it.
// The kernel has a barrier, so memcheck alone runs it as regions.
// kernel: tile63
// launch: 1 64
// args: f32[64]=1 f32[64]=0
// expect: memcheck: invalid shared write of 4 bytes, 0 bytes past the 252-byte shared array `s`, by thread 63 (line 10)
__global__ void tile63(const float* in, float* out) {
    __shared__ float s[63];
    __shared__ float after[64];
    s[threadIdx.x] = in[threadIdx.x];
    after[threadIdx.x] = 0.0f;
    __syncthreads();
    out[threadIdx.x] = s[threadIdx.x % 63] + after[threadIdx.x];
}
