// A shared tile of 63 floats (252 bytes) filled by 63 threads and read back by all 64: thread 63
// reads s[63], past the array. The kernel has a barrier (memcheck alone runs it as regions).
// kernel: tile63_read
// launch: 1 64
// args: f32[64]=1 f32[64]=0
// expect: memcheck: invalid shared read of 4 bytes, 0 bytes past the 252-byte shared array `s`, by thread 63 (line 11)
__global__ void tile63_read(const float* in, float* out) {
    __shared__ float s[63];
    if (threadIdx.x < 63) s[threadIdx.x] = in[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = s[threadIdx.x];
}
