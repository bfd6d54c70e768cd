// Warp votes and block votes: for predicate p = (value(i) > 0) every thread writes
//   out(i, 0) = __ballot_sync bits of its warp (low 32 bits), out(i, 1) = __all_sync,
//   out(i, 2) = __any_sync, out(i, 3) = syncthreads_count, out(i, 4) = syncthreads_and,
//   out(i, 5) = syncthreads_or.
#include "gpu_mem.h"

extern "C" __global__ void votes(gm_array<int, 1> value, gm_array<long long, 2> out) {
    const long long i = grid(1);
    const int p = i < value.shape[0] && value(i) > 0;
    const unsigned long long ballot = __ballot_sync(~0ull, p);
    const int all = __all_sync(~0ull, p);
    const int any = __any_sync(~0ull, p);
    const int count = syncthreads_count(p);
    const int every = syncthreads_and(p);
    const int some = syncthreads_or(p);
    if (i < out.shape[0]) {
        out(i, 0) = (long long)(ballot & 0xffffffffull);
        out(i, 1) = all;
        out(i, 2) = any;
        out(i, 3) = count;
        out(i, 4) = every;
        out(i, 5) = some;
    }
}
