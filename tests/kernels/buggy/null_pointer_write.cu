// An optional output pointer that is null at run time is written anyway (the `if (p)` was lost).
// kernel: maybe_store
// launch: 1 32
// args: f32[32]=1 f32[32]=0 i32=0
// expect: memcheck: invalid global write of 4 bytes at address 0 (null), by thread 0 (line 9)
__global__ void maybe_store(const float* in, float* out, int use_out) {
    float* extra = use_out ? out : nullptr;
    out[threadIdx.x] = in[threadIdx.x];
    extra[threadIdx.x] = in[threadIdx.x] * 2.0f;
}
