// Plain CUDA C++ with pointer parameters, as people write it: no gpu_mem.h, C++ linkage, a
// struct pointer, a const __restrict__ pointer and a namespaced kernel.
struct Pair {
    int first;
    float second;
};

__global__ void vector_add(const float* a, const float* __restrict__ b, float* c, int n) {
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}

__global__ void pairs(Pair* p, int n) {
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n) {
        p[i].second = p[i].first * 0.5f;
    }
}

namespace outer {
__global__ void fill(unsigned int* out, unsigned int value, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        out[i] = value + i;
    }
}
}  // namespace outer

/* Which of its pointers are null: optional buffers are tested, never read. */
__global__ void null_pointers(const float* maybe, const int* empty, int* out) {
    out[0] = maybe == nullptr;
    out[1] = empty == nullptr;
}
