// A backward difference that forgets the first element: thread 0 reads in[-1].
// kernel: backward_difference
// launch: 1 128
// args: f32[128]=1 f32[128]=0
// expect: memcheck: invalid global read of 4 bytes, before the input, by thread 0
__global__ void backward_difference(const float* in, float* out) {
    int i = threadIdx.x;
    out[i] = in[i] - in[i - 1];
}
