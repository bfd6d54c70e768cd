// A grid rounded up to whole blocks, and no `if (i < n)`: the last 56 threads write past the end.
// kernel: fill_index
// launch: 2 128
// args: f32[200]=0 i32=200
// expect: memcheck: invalid global write of 4 bytes, past the 800-byte output, by thread 200
__global__ void fill_index(float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = (float)i;
}
