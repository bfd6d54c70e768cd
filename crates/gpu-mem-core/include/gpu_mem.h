/*
 * gpu_mem.h — the portable kernel prelude of gpu-mem.
 *
 * One kernel source, two compilers: NVRTC (CUDA) and hiprtc (HIP 5.2+, clang). This header
 * needs no system header (NVRTC has no <cstdint> by default) and only the built-ins both
 * compilers provide without includes (threadIdx, __syncthreads, __shared__, ...).
 *
 * Vocabulary (Numba's names in brackets):
 *   indices      gm_thread_idx(), gm_block_idx(), gm_block_dim(), gm_grid_dim()  [threadIdx ...]
 *                (CUDA's threadIdx.x etc. also work unchanged under both compilers)
 *   grid(n)      grid(1) -> long long; grid(2) -> gm_idx2; grid(3) -> gm_idx3     [cuda.grid]
 *   gridsize(n)  total threads per axis, same shapes                              [cuda.gridsize]
 *   shared       GM_SHARED T name[N][M];  (static)                                [shared.array]
 *                T* p = gm_dynamic_shared<T>();  (size given at launch)           [shape 0]
 *   local        T name[N];  (an ordinary local array)                             [local.array]
 *   barriers     syncthreads()             = barrier(GM_FENCE_LOCAL)               [syncthreads]
 *                barrier(GM_FENCE_LOCAL)   all threads of the block, block fence  [roc.barrier]
 *                barrier(GM_FENCE_GLOBAL)  device-wide fence, then the barrier    [roc.barrier]
 *                wavebarrier()             the threads of one warp / wavefront    [roc.wavebarrier]
 *   lanes        gm_lane_id(), gm_warp_size()
 *   arrays       gm_array<T, N>: what the launcher passes for a DeviceArray; a(i, j) indexes
 *
 * gm_array<T, N> layout (C, 8 + 16*N bytes, 8-byte aligned), matching the Rust launcher:
 *   offset 0        T*        data     device address of element (0, ..., 0)
 *   offset 8        long long shape[N]
 *   offset 8 + 8*N  long long strides[N]   in ELEMENTS (not bytes); may be negative
 */
#ifndef GPU_MEM_H
#define GPU_MEM_H

#if defined(__CUDACC_RTC__) || (defined(__CUDACC__) && !defined(__HIP__))
#define GM_CUDA 1
#elif defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__) || defined(__HIP__)
#define GM_HIP 1
#else
#error "gpu_mem.h must be compiled by NVRTC (CUDA) or hiprtc (HIP)"
#endif

#define GM_DEVICE __device__ __forceinline__
#define GM_SHARED __shared__

/* Fixed-width integers without <cstdint>. */
typedef signed char gm_i8;
typedef unsigned char gm_u8;
typedef short gm_i16;
typedef unsigned short gm_u16;
typedef int gm_i32;
typedef unsigned int gm_u32;
typedef long long gm_i64;
typedef unsigned long long gm_u64;

/* ----- indices ------------------------------------------------------------------------- */

struct gm_idx2 {
    long long x, y;
};
struct gm_idx3 {
    long long x, y, z;
};

GM_DEVICE gm_idx3 gm_thread_idx() { gm_idx3 r = {threadIdx.x, threadIdx.y, threadIdx.z}; return r; }
GM_DEVICE gm_idx3 gm_block_idx() { gm_idx3 r = {blockIdx.x, blockIdx.y, blockIdx.z}; return r; }
GM_DEVICE gm_idx3 gm_block_dim() { gm_idx3 r = {blockDim.x, blockDim.y, blockDim.z}; return r; }
GM_DEVICE gm_idx3 gm_grid_dim() { gm_idx3 r = {gridDim.x, gridDim.y, gridDim.z}; return r; }

/* Absolute thread position, computed in 64 bits (Numba's grid(n)). */
GM_DEVICE long long gm_grid1() {
    return (long long)blockIdx.x * blockDim.x + threadIdx.x;
}
GM_DEVICE gm_idx2 gm_grid2() {
    gm_idx2 r = {(long long)blockIdx.x * blockDim.x + threadIdx.x,
                 (long long)blockIdx.y * blockDim.y + threadIdx.y};
    return r;
}
GM_DEVICE gm_idx3 gm_grid3() {
    gm_idx3 r = {(long long)blockIdx.x * blockDim.x + threadIdx.x,
                 (long long)blockIdx.y * blockDim.y + threadIdx.y,
                 (long long)blockIdx.z * blockDim.z + threadIdx.z};
    return r;
}
/* Total number of threads along each axis (Numba's gridsize(n)). */
GM_DEVICE long long gm_gridsize1() { return (long long)gridDim.x * blockDim.x; }
GM_DEVICE gm_idx2 gm_gridsize2() {
    gm_idx2 r = {(long long)gridDim.x * blockDim.x, (long long)gridDim.y * blockDim.y};
    return r;
}
GM_DEVICE gm_idx3 gm_gridsize3() {
    gm_idx3 r = {(long long)gridDim.x * blockDim.x, (long long)gridDim.y * blockDim.y,
                 (long long)gridDim.z * blockDim.z};
    return r;
}
#define grid(n) gm_grid##n()
#define gridsize(n) gm_gridsize##n()

/* ----- warps / wavefronts -------------------------------------------------------------- */

GM_DEVICE int gm_warp_size() {
#if defined(GM_CUDA) || !defined(__AMDGCN_WAVEFRONT_SIZE)
    return warpSize;
#else
    /* clang's target macro: 64 on gfx9 (wave64), 32 on wave32 targets. */
    return __AMDGCN_WAVEFRONT_SIZE;
#endif
}

GM_DEVICE int gm_lane_id() {
#if defined(GM_CUDA)
    unsigned int lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    return (int)lane;
#else
    return (int)__builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
#endif
}

/* ----- barriers ------------------------------------------------------------------------ */

/* Fence flags (OpenCL's CLK_LOCAL_MEM_FENCE / CLK_GLOBAL_MEM_FENCE values). */
#define GM_FENCE_LOCAL 1
#define GM_FENCE_GLOBAL 2

/* Block barrier. GM_FENCE_LOCAL: shared-memory writes before it are seen by the block after it
 * (__syncthreads). GM_FENCE_GLOBAL additionally makes this thread's global-memory writes
 * visible device-wide first (__threadfence), as Numba ROC's barrier(CLK_GLOBAL_MEM_FENCE)
 * promised. Every thread of the block must reach the same barrier. */
GM_DEVICE void barrier(int fence) {
    if (fence & GM_FENCE_GLOBAL) {
        __threadfence();
    }
    __syncthreads();
}

/* Numba CUDA's spelling of barrier(GM_FENCE_LOCAL). */
GM_DEVICE void syncthreads() { __syncthreads(); }

/* Barrier among the threads of one warp (CUDA) or wavefront (AMD), with memory ordering among
 * them. HIP 5.2 has no __syncwarp; a wavefront executes in lockstep, so the AMDGPU wave
 * barrier (a scheduling barrier) is its equivalent. */
GM_DEVICE void wavebarrier() {
#if defined(GM_CUDA)
    __syncwarp();
#else
    __builtin_amdgcn_wave_barrier();
#endif
}

GM_DEVICE void gm_threadfence() { __threadfence(); }
GM_DEVICE void gm_threadfence_block() { __threadfence_block(); }

/* ----- dynamic shared memory ----------------------------------------------------------- */

/* The block's dynamic shared memory (its size is given at launch), viewed as T. All calls in a
 * kernel return the same address; carve it up by offsets for several arrays. */
template <typename T>
GM_DEVICE T* gm_dynamic_shared() {
#if defined(GM_CUDA)
    extern __shared__ __align__(16) unsigned char gm_dynamic_shared_bytes[];
#else
    extern __shared__ __attribute__((aligned(16))) unsigned char gm_dynamic_shared_bytes[];
#endif
    return reinterpret_cast<T*>(gm_dynamic_shared_bytes);
}

/* ----- device arrays ------------------------------------------------------------------- */

template <typename T, int N>
struct gm_array {
    T* data;
    long long shape[N];
    long long strides[N]; /* elements, may be negative */

    static_assert(N >= 1, "gm_array needs at least one dimension");

    GM_DEVICE int ndim() const { return N; }
    GM_DEVICE long long size() const {
        long long n = 1;
        for (int d = 0; d < N; ++d) n *= shape[d];
        return n;
    }

    /* a(i, j, ...): exactly N indices, no bounds check (like CUDA C). */
    template <typename... I>
    GM_DEVICE T& operator()(I... index) const {
        static_assert(sizeof...(I) == N, "gm_array: give one index per dimension");
        const long long ix[N] = {(long long)index...};
        long long offset = 0;
        for (int d = 0; d < N; ++d) offset += ix[d] * strides[d];
        return data[offset];
    }
};

#endif /* GPU_MEM_H */
