// A shift through shared memory whose tile has no room for the last thread's neighbour.
// kernel: shift_left
// launch: 1 128
// args: f32[128]=1 f32[128]=0
// expect: memcheck: invalid shared write of 4 bytes, past the 512-byte tile, by thread 127
__global__ void shift_left(const float* in, float* out) {
    __shared__ float tile[128];
    tile[threadIdx.x + 1] = in[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = tile[threadIdx.x];
}
