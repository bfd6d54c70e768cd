// One-byte elements and 0-d arrays, as every backend passes them: `bool` and `char` arrays and
// a `bool` scalar from Rust `u8` data, and a 0-d array as its element's address (`T*`).
//   out(i) = mask(i) != flip ? text(i) : -1, and *total = the number of such i.
#include "gpu_mem.h"

extern "C" __global__ void bytes_and_zero_d(gm_array<bool, 1> mask, bool flip,
                                            gm_array<char, 1> text, gm_array<int, 1> out,
                                            int* total) {
    const long long i = grid(1);
    if (i >= out.shape[0]) return;
    const bool taken = mask(i) != flip;
    out(i) = taken ? (int)text(i) : -1;
    if (taken) atomicAdd(total, 1);
}
