// Pairs read as float2 from an odd element: 8-byte loads at 4-byte-aligned addresses.
// kernel: sum_pairs
// launch: 1 32
// args: f32[128]=1 f32[32]=0
// expect: memcheck: misaligned global read of 8 bytes by thread 0
__global__ void sum_pairs(const float* in, float* out) {
    const float2* pairs = reinterpret_cast<const float2*>(in + 1);
    float2 v = pairs[threadIdx.x];
    out[threadIdx.x] = v.x + v.y;
}
