// A Hillis-Steele inclusive scan with two buffers that swaps them without a barrier: a thread
// reads the other buffer while its neighbour is still writing it in the previous step.
// kernel: scan
// launch: 1 64
// args: f32[64]=1 f32[64]=0
// expect: racecheck: shared-memory hazard (read after write) between threads of the block (lines 15/16)
__global__ void scan(const float* in, float* out) {
    __shared__ float buf[2][64];
    int t = threadIdx.x;
    int pout = 0, pin = 1;
    buf[pout][t] = in[t];
    __syncthreads();
    for (int offset = 1; offset < 64; offset *= 2) {
        pout = 1 - pout; pin = 1 - pout;
        if (t >= offset) buf[pout][t] = buf[pin][t] + buf[pin][t - offset];
        else buf[pout][t] = buf[pin][t];
    }
    __syncthreads();
    out[t] = buf[pout][t];
}
