// A kernel reading an array that was allocated but never written (device_array, not to_device).
// kernel: scale
// launch: 1 64
// args: f32[64]=uninit f32[64]=0
// expect: initcheck: uninitialized global read of 4 bytes
__global__ void scale(const float* in, float* out) {
    out[threadIdx.x] = 2.0f * in[threadIdx.x];
}
