// The copy behind DeviceArray::assign and fill (Numba's `d[key] = value`): dst(i...) = src(i...)
// for every element of dst, on arrays of any strides. Both arrays are seen as bytes: eight
// element axes (unused leading axes have length 1) and a last axis over the element's bytes, all
// strides in bytes; src has dst's shape, with stride 0 on broadcast axes.
#include "gpu_mem.h"

extern "C" __global__ void gm_assign(gm_array<unsigned char, 9> dst, gm_array<unsigned char, 9> src) {
    long long total = 1;
    for (int d = 0; d < 8; ++d) {
        total *= dst.shape[d];
    }
    const long long itemsize = dst.shape[8];
    for (long long i = grid(1); i < total; i += gridsize(1)) {
        long long rest = i;
        long long dst_offset = 0;
        long long src_offset = 0;
        for (int d = 7; d >= 0; --d) {
            const long long index = rest % dst.shape[d];
            rest /= dst.shape[d];
            dst_offset += index * dst.strides[d];
            src_offset += index * src.strides[d];
        }
        for (long long b = 0; b < itemsize; ++b) {
            dst.data[dst_offset + b] = src.data[src_offset + b];
        }
    }
}
