// Every atomic on global and shared memory. A histogram of `keys` (0..15) is built in shared
// memory with atomicAdd, then added to `hist`; the other atomics fold the thread index i into
// `acc`: acc(0) add, acc(1) sub, acc(2) max, acc(3) min, acc(4) and, acc(5) or, acc(6) xor,
// acc(7) inc (limit 1000), acc(8) dec (limit 1000), acc(9) exch (ends as some i), and a CAS
// counter in acc(10); facc(0) float add, dacc(0) double add.
#include "gpu_mem.h"

extern "C" __global__ void atomics(gm_array<int, 1> keys, gm_array<unsigned int, 1> hist,
                                   gm_array<unsigned int, 1> acc, gm_array<float, 1> facc,
                                   gm_array<double, 1> dacc) {
    __shared__ unsigned int local[16];
    const int t = threadIdx.x;
    if (t < 16) {
        local[t] = 0;
    }
    syncthreads();
    const long long i = grid(1);
    if (i < keys.shape[0]) {
        atomicAdd(&local[keys(i) & 15], 1u);
        const unsigned int u = (unsigned int)i;
        atomicAdd(&acc(0), u);
        atomicSub(&acc(1), u);
        atomicMax(&acc(2), u);
        atomicMin(&acc(3), u);
        atomicAnd(&acc(4), ~(1u << (u % 32)));
        atomicOr(&acc(5), 1u << (u % 32));
        atomicXor(&acc(6), u);
        atomicInc(&acc(7), 1000u);
        atomicDec(&acc(8), 1000u);
        atomicExch(&acc(9), u);
        unsigned int seen = acc(10);
        for (;;) {
            const unsigned int before = atomicCAS(&acc(10), seen, seen + 1);
            if (before == seen) break;
            seen = before;
        }
        atomicAdd(&facc(0), 0.5f);
        atomicAdd(&dacc(0), 0.25);
    }
    syncthreads();
    if (t < 16) {
        atomicAdd(&hist(t), local[t]);
    }
}
