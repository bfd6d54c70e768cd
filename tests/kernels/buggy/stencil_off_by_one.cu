// A 3-point stencil whose bound lets the last thread read one element past the input.
// kernel: stencil
// launch: 2 128
// args: f32[256]=1 f32[256]=0 i32=256
// expect: memcheck: invalid global read of 4 bytes, just past the input, by thread 255
__global__ void stencil(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i > 0 && i < n) {
        out[i] = in[i - 1] + in[i] + in[i + 1];
    }
}
