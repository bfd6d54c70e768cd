// Local arrays, records, scalars and strided 2-D views: for each row r of `m`,
//   m(r, c) = m(r, c) * factor + shift->x, and sums(r) = the row's sum computed through a
//   per-thread local array.
#include "gpu_mem.h"

struct shift_t {
    double x;
    double unused;
};

extern "C" __global__ void local_and_args(gm_array<double, 2> m, const shift_t* shift,
                                          double factor, gm_array<double, 1> sums) {
    const long long r = grid(1);
    if (r >= m.shape[0]) return;
    double row[16];
    const long long n = m.shape[1] < 16 ? m.shape[1] : 16;
    for (long long c = 0; c < n; ++c) {
        row[c] = m(r, c) * factor + shift->x;
        m(r, c) = row[c];
    }
    double sum = 0.0;
    for (long long c = 0; c < n; ++c) sum += row[c];
    sums(r) = sum;
}
