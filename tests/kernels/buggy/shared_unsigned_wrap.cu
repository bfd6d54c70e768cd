// The same backward difference with threadIdx.x - 1 (unsigned): for thread 0 the index wraps to
// 4294967295, 16 GiB past the array.
// kernel: backward_diff_unsigned
// launch: 1 64
// args: f32[64]=1 f32[64]=0
// expect: memcheck: invalid shared read of 4 bytes, 4 bytes before `s` once the wrapped index is undone, by thread 0 (line 11)
__global__ void backward_diff_unsigned(const float* in, float* out) {
    __shared__ float s[64];
    s[threadIdx.x] = in[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = s[threadIdx.x] - s[threadIdx.x - 1];
}
