// Dynamic shared memory through `extern __shared__` (the CUDA samples' SharedMemory<T>
// pattern), template kernels named by their instantiation, and vector types.
#include <cuda_runtime.h>

template <class T>
struct SharedMemory {
    __device__ inline operator T*() {
        extern __shared__ int __smem[];
        return (T*)__smem;
    }
};

template <class T, unsigned int blockSize>
__global__ void block_sum(const T* in, T* out, unsigned int n) {
    T* sdata = SharedMemory<T>();
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockSize + threadIdx.x;
    sdata[tid] = (i < n) ? in[i] : 0;
    __syncthreads();
    for (unsigned int s = blockSize / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

extern __shared__ float2 staged[];

__global__ void swap_halves(float4* v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float4 a = v[i];
        staged[threadIdx.x] = make_float2(a.z, a.w);
        v[i] = make_float4(staged[threadIdx.x].x, staged[threadIdx.x].y, a.x, a.y);
    }
}

__global__ void layouts(int* out) {
    out[0] = sizeof(float4) * 100 + alignof(float4);
    out[1] = sizeof(float3) * 100 + alignof(float3);
    out[2] = sizeof(double2) * 100 + alignof(double2);
    out[3] = sizeof(uchar4) * 100 + alignof(uchar4);
    out[4] = sizeof(int2) * 100 + alignof(int2);
    out[5] = sizeof(short4) * 100 + alignof(short4);
}
