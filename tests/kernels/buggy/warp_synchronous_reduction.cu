// The legacy last-warp unroll of a reduction: `volatile` and no __syncwarp, which relied on a
// warp's lanes running in lockstep (not guaranteed since Volta).
// kernel: warp_tail_sum
// launch: 1 64
// args: f32[64]=1 f32[1]=0
// expect: racecheck: shared-memory hazard between lanes of a warp with no __syncwarp
__global__ void warp_tail_sum(const float* in, float* out) {
    __shared__ float sdata[64];
    unsigned int t = threadIdx.x;
    sdata[t] = in[t];
    __syncthreads();
    if (t < 32) {
        volatile float* v = sdata;
        v[t] += v[t + 32];
        v[t] += v[t + 16];
        v[t] += v[t + 8];
        v[t] += v[t + 4];
        v[t] += v[t + 2];
        v[t] += v[t + 1];
    }
    if (t == 0) out[0] = sdata[0];
}
