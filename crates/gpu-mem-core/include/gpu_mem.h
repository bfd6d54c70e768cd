/*
 * gpu_mem.h — the portable kernel prelude of gpu-mem.
 *
 * One kernel source, three compilers: NVRTC (CUDA), hiprtc (HIP 5.2+, clang) and the host C++
 * compiler of gpu-mem's simulator (C++17, GM_SIM defined), which runs every simulated thread of
 * the kernel as a coroutine. On the GPU compilers this header needs no system header (NVRTC has
 * no <cstdint> by default) and only the built-ins both provide without includes.
 *
 * Vocabulary (Numba's names in brackets):
 *   indices      threadIdx, blockIdx, blockDim, gridDim, warpSize (CUDA's names, all backends)
 *                gm_thread_idx(), gm_block_idx(), gm_block_dim(), gm_grid_dim()  [cuda.threadIdx ...]
 *   grid(n)      grid(1) -> long long; grid(2) -> gm_idx2; grid(3) -> gm_idx3     [cuda.grid]
 *   gridsize(n)  total threads per axis, same shapes                              [cuda.gridsize]
 *   shared       GM_SHARED T name[N][M];  (static; __shared__ works too)         [shared.array]
 *                T* p = gm_dynamic_shared<T>();  (size given at launch)           [shape 0]
 *   local        T name[N];  (an ordinary local array)                             [local.array]
 *   barriers     syncthreads()             = barrier(GM_FENCE_LOCAL)               [syncthreads]
 *                barrier(GM_FENCE_LOCAL)   all threads of the block, block fence  [roc.barrier]
 *                barrier(GM_FENCE_GLOBAL)  device-wide fence, then the barrier    [roc.barrier]
 *                wavebarrier()             the threads of one warp / wavefront    [roc.wavebarrier]
 *                syncthreads_count(p), syncthreads_and(p), syncthreads_or(p)      [same names]
 *   atomics      CUDA's atomicAdd, atomicSub, atomicExch, atomicCAS, atomicMin, atomicMax,
 *                atomicAnd, atomicOr, atomicXor, atomicInc, atomicDec on global and shared
 *                memory (32/64-bit integers; float/double add and float exchange)  [cuda.atomic]
 *   warps        __shfl_sync, __shfl_up_sync, __shfl_down_sync, __shfl_xor_sync,
 *                __ballot_sync, __all_sync, __any_sync (CUDA's names; HIP maps them to its
 *                wave intrinsics); gm_lane_id(), gm_warp_size()                   [cuda.shfl_sync ...]
 *   arrays       gm_array<T, N>: what the launcher passes for a DeviceArray; a(i, j) indexes
 *                (bounds-checked on the simulator: an index outside the shape is a fault)
 *
 * gm_array<T, N> layout (C, 8 + 16*N bytes, 8-byte aligned), matching the Rust launchers:
 *   offset 0        T*        data     address of element (0, ..., 0)
 *   offset 8        long long shape[N]
 *   offset 8 + 8*N  long long strides[N]   in ELEMENTS (not bytes); may be negative
 */
#ifndef GPU_MEM_H
#define GPU_MEM_H

#if defined(__CUDACC_RTC__) || (defined(__CUDACC__) && !defined(__HIP__))
#define GM_CUDA 1
#elif defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__) || defined(__HIP__)
#define GM_HIP 1
#elif defined(GM_SIM)
#define GM_HOST 1
#else
#error "gpu_mem.h must be compiled by NVRTC (CUDA), hiprtc (HIP) or gpu-mem's simulator (GM_SIM)"
#endif

/* Fixed-width integers without <cstdint>. */
typedef signed char gm_i8;
typedef unsigned char gm_u8;
typedef short gm_i16;
typedef unsigned short gm_u16;
typedef int gm_i32;
typedef unsigned int gm_u32;
typedef long long gm_i64;
typedef unsigned long long gm_u64;

/* Fence flags (OpenCL's CLK_LOCAL_MEM_FENCE / CLK_GLOBAL_MEM_FENCE values). */
#define GM_FENCE_LOCAL 1
#define GM_FENCE_GLOBAL 2


/* ======================================================================================== */
/* The simulator's host branch: CUDA's keywords and built-ins on a host C++17 compiler.      */
/* Every simulated thread runs the kernel as a coroutine; indices, barriers, warp            */
/* collectives and faults go to the simulator's executor through gm_sim_rt.                  */
/* ======================================================================================== */
#if defined(GM_HOST)

/* Device code is compiled as for compute capability 9.0, what the simulator implements
 * (independent thread scheduling, __reduce_*_sync, cooperative groups): code a kernel keeps
 * for `__CUDA_ARCH__ >= 700` and the like is compiled, as NVRTC does for sm_90. */
#if !defined(__CUDA_ARCH__)
#define __CUDA_ARCH__ 900
#endif

#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

/* GM_SIM_SCAN: the simulator preprocesses a kernel to read which kernels it defines (its
 * declarations as the compiler will see them); CUDA's declaration words stay.
 * Device code and variables are kept whether this unit uses them or not (`used`): the host
 * reads and writes a module's variables by name, so a `static __constant__` the kernels only
 * read, or a `static __device__` they only write, must not be folded or dropped. */
#if !defined(GM_SIM_SCAN)
#if defined(GM_SIM_REGIONS) && !defined(GM_SIM_CHECKED)
/* A unit of blocks run as regions reaches each kernel only through its block loop, which
 * inlines it: an inline function is not also compiled on its own, which was a third of such a
 * unit's compile time (nothing may name the kernel outside a template argument or `decltype`:
 * the kernel table describes it by its type alone). A checked unit calls its kernels through a
 * pointer (gm_sim_block_loop), so they are compiled on their own there anyway; as plain
 * functions, GCC inlines their regions into them and reports name the kernel. */
#define __global__ inline
#else
#define __global__
#endif
#define __device__ __attribute__((used))
#define __constant__ __attribute__((used))
#define __managed__ __attribute__((used))
#endif
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
/* One instance per block: the threads of a block run on one OS thread, one block at a time.
 * Where memcheck tests accesses against a shadow byte per 8 bytes (GM_SIM_SHADOWED), each array
 * starts on its own 8 bytes: a shadow byte says how many of its 8 bytes from the first may be
 * touched, so an array that began where another's odd-sized tail ends (`float s[63]` then
 * `float t[64]`) would let the tail's neighbour be touched through it. */
#if !defined(GM_SIM_SCAN) && defined(GM_SIM_SHADOWED)
#define __shared__ static thread_local __attribute__((aligned(8)))
#elif !defined(GM_SIM_SCAN)
#define __shared__ static thread_local
#endif
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)

#define GM_DEVICE inline
#define GM_SHARED __shared__
/* Barriers and collectives carry their call site, so divergence reports name the line. */
#define GM_SITE , const char *gm_file = __builtin_FILE(), int gm_line = __builtin_LINE()
#define GM_SITE_ONLY const char *gm_file = __builtin_FILE(), int gm_line = __builtin_LINE()

struct gm_uint3 {
    unsigned int x, y, z;
};
typedef gm_uint3 uint3;
typedef gm_uint3 dim3;

/* What the executor tells a thread about itself (C layout shared with the simulator). */
struct gm_sim_thread {
    gm_uint3 thread_idx;
    gm_uint3 block_idx;
    gm_uint3 block_dim;
    gm_uint3 grid_dim;
    unsigned int warp_size;
    /* Nonzero where atomics and the spin hint let the block's other threads run now and then
     * (a thread on a fiber); zero for a thread run as a plain call, which cannot let others run
     * and need not (its kernel has no loop that could spin at an atomic). */
    unsigned int progress;
    /* Checked programs (GM_SIM_CHECKED): where a thread whose access was refused goes (a
     * `__builtin_setjmp` buffer of the frame that started it), and that frame's address (the
     * thread's stack lies below it). Null elsewhere. */
    void* escape;
    void* stack_top;
    /* The block's dynamic shared memory (the launch's bytes): what `extern __shared__` arrays
     * and gm_dynamic_shared name. Fixed for the block, so a kernel asks once, not per thread. */
    void* dynamic_shared;
};

/* Collective operations (values shared with the simulator). */
#define GM_SIM_SCOPE_BLOCK 0
#define GM_SIM_SCOPE_WARP 1
#define GM_SIM_OP_SHFL 1
#define GM_SIM_OP_SHFL_UP 2
#define GM_SIM_OP_SHFL_DOWN 3
#define GM_SIM_OP_SHFL_XOR 4
#define GM_SIM_OP_BALLOT 5
#define GM_SIM_OP_ALL 6
#define GM_SIM_OP_ANY 7
#define GM_SIM_OP_SYNC_COUNT 8
#define GM_SIM_OP_SYNC_AND 9
#define GM_SIM_OP_SYNC_OR 10
#define GM_SIM_OP_ACTIVE 11
#define GM_SIM_OP_GRID_SYNC 12
#define GM_SIM_OP_REDUCE 13
/* What a GM_SIM_OP_REDUCE combines the lanes' 32-bit values with (its `arg`): __reduce_*_sync's
 * operation, min and max signed or unsigned after the value's type. */
#define GM_SIM_REDUCE_ADD 0
#define GM_SIM_REDUCE_MIN 1
#define GM_SIM_REDUCE_MIN_UNSIGNED 2
#define GM_SIM_REDUCE_MAX 3
#define GM_SIM_REDUCE_MAX_UNSIGNED 4
#define GM_SIM_REDUCE_AND 5
#define GM_SIM_REDUCE_OR 6
#define GM_SIM_REDUCE_XOR 7
/* A warp-sized tile's `cooperative_groups::reduce` (GM_SIM_REDUCE_TILE + 4 * op + type; op 0
 * plus, 1 less, 2 greater, 3 bit_and, 4 bit_or, 5 bit_xor; type 0 int, 1 unsigned, 2 float,
 * 3 double): a butterfly over the tile's width (its `width`), each lane combining its value with
 * its partner's as `op(own, partner)`, its own where the partner takes no part, which is what
 * the tile's member function computes with shuffles. */
#define GM_SIM_REDUCE_TILE 16

/* Checked programs: ranges the simulated thread running on this OS thread may touch, as the
 * simulator last granted them; a checked program reads them before it asks (`access`). The
 * simulator empties them whenever another block's thread becomes current. An empty slot is
 * {~0, 0}. `atomics`: nonzero when every atomic is to be told (`access`) wherever it lies
 * (racecheck orders accesses by them). (C layout shared with Rust.) */
#define GM_SIM_ALLOWED_SLOTS 8
#define GM_SIM_SHARED_READ_SLOTS 4
struct gm_sim_allowed {
    __UINTPTR_TYPE__ ranges[GM_SIM_ALLOWED_SLOTS][2]; /* [start, end) */
    __UINTPTR_TYPE__ reads; /* bit i: ranges[i] is granted for reads only */
    __UINTPTR_TYPE__ atomics;
    /* [start, end): what the running thread wrote last, recorded by racecheck; its accesses
     * there need no asking until it waits. Emptied by the simulator when another thread becomes
     * current, and by the program when its loop starts the next thread. */
    __UINTPTR_TYPE__ mine[2];
    /* [start, end): the running thread's own stack and gm_sim_thread, once granted. Emptied by
     * the simulator when another thread becomes current. */
    __UINTPTR_TYPE__ own[2][2];
    /* racecheck: shared memory read by two threads of the block, with no write, in a phase
     * (between two block barriers): any thread's read of it in that phase adds nothing to what
     * racecheck knows, and needs no telling. Word w of a slot (address / 4 - start / 4) may be
     * read so while phases[w] equals `phase`, the running thread's phase (its block barriers
     * passed + 1; 0: no read is let through so). */
    struct {
        __UINTPTR_TYPE__ start, end; /* [start, end) */
        const unsigned int *phases;
    } shared_reads[GM_SIM_SHARED_READ_SLOTS];
    __UINTPTR_TYPE__ shared_span[2]; /* [start, end) around every slot: one test for the rest */
    __UINTPTR_TYPE__ phase;
};

/* The executor's entry points, installed once by gm_sim_init (C layout shared with Rust). */
struct gm_sim_runtime {
    unsigned int abi;
    const gm_sim_thread *(*self)(void);
    void (*barrier)(int scope, int fence, unsigned long long mask, const char *file, int line);
    unsigned long long (*collective)(int op, unsigned long long mask, unsigned long long value,
                                     long long arg, int width, const char *file, int line);
    void *(*index_fault)(int ndim, const long long *index, const long long *shape,
                         unsigned long long itemsize);
    void (*fault)(const char *message);
    void (*progress)(void);
    /* Checked programs: every load and store (GM_SIM_ACCESS_*), before it happens; nonzero if
     * the thread may not make it (the fault is recorded: the thread ends). */
    int (*access)(const void *address, unsigned long long size, int kind, const void *pc);
    /* Checked programs: this OS thread's allowed ranges (they live as long as the OS thread). */
    const gm_sim_allowed *(*allowed)(void);
    /* Blocks run as regions (gm_sim/regions.h): the block cannot go on, as the scheduler would
     * find it (GM_SIM_DIVERGED_*: a barrier at file:line that `a` of the `b` threads reach, the
     * others having ended; or threads waiting at two barriers, at lines `a` and `b` of file). */
    void (*diverged)(int kind, const char *file, int line, unsigned int a, unsigned int b);
    /* Blocks run as regions: a warp collective (GM_SIM_OP_*, 0: a warp barrier) that the lanes
     * `here` of a warp reached, computed into `lanes[i].result` (the warp's `count` lanes);
     * nonzero when it cannot complete: lanes its mask names are not there. */
    int (*warp)(int op, unsigned long long here, unsigned int count, struct gm_sim_lane *lanes);
    /* Blocks run as regions: every thread of the block waits or ended, some at warp collectives
     * that cannot complete; nonzero when the block cannot go on, its divergence reported as the
     * scheduler reports it, from each thread's state (`returned`: GM_SIM_WARP_PARKED at the
     * collective of line `lanes[t].result`, 2 at the barrier of line `parked_line`, 1 ended, 0
     * as `kind` says: GM_SIM_VERDICT_*; those at a collective that released them go on unless
     * another one fails). */
    int (*verdict)(const char *file, int line, int kind, unsigned int threads,
                    unsigned int parked_line, const unsigned char *returned,
                    const struct gm_sim_lane *lanes);
    /* Checked blocks run as regions: `bytes` at `start` are the block's own (its threads'
     * per-thread slots), which its threads may touch until the block ends. */
    void (*own)(const void *start, unsigned long long bytes);
    /* Checked programs: an index outside the bounds of a C array the compiler knows the length
     * of (`array_type`, as UBSan names it: `'float [8]'`), found before any access through it;
     * `index` is the value sign-extended where `is_signed`, zero-extended otherwise. Nonzero if
     * the thread may not go on (the fault is recorded: the thread ends). */
    int (*index)(const char *array_type, unsigned long long index, int is_signed, const void *pc);
};
/* A lane's operands of the warp collective it reached, and its result (blocks run as regions;
 * C layout shared with Rust). */
struct gm_sim_lane {
    unsigned long long mask, value;
    long long arg;
    unsigned long long result;
    int width, op;
};
#define GM_SIM_ABI 15
#define GM_SIM_ACCESS_READ 0
#define GM_SIM_ACCESS_WRITE 1
#define GM_SIM_ACCESS_ATOMIC 2
/* Not an access: the thread passed a block-wide synchronisation the executor does not see (a
 * `cuda::barrier` phase), which orders its accesses as a block barrier does (racecheck). */
#define GM_SIM_ACCESS_SYNCED 3
/* An atomic that only writes (a store): an atomic as racecheck sees it, a write as initcheck
 * does. */
#define GM_SIM_ACCESS_ATOMIC_STORE 4
/* Or'ed into an access's kind: it does not lie on a multiple of its size, which a GPU refuses
 * (memcheck). */
#define GM_SIM_ACCESS_MISALIGNED 8
/* Or'ed into an access's kind: it reaches past the object the compiler sees it in (a local
 * array indexed past its end), which memcheck refuses wherever it lands. */
#define GM_SIM_ACCESS_OUTSIDE_OBJECT 16

/* The prelude's own glue (what reads the simulator's buffers and tables) is not checked in a
 * checked program: only the kernel's accesses are. Clang's ThreadSanitizer pass instruments
 * atomics even in `no_sanitize("thread")` functions, which turned the hooks' own atomics into
 * calls of themselves (a stack overflow at a checked kernel's first atomic); only
 * `disable_sanitizer_instrumentation` keeps it out of a function entirely. */
#if defined(GM_SIM_CHECKED) && defined(__clang__)
#define GM_SIM_UNCHECKED                                         \
    __attribute__((no_sanitize("thread", "alignment", "object-size", "array-bounds"), \
                   disable_sanitizer_instrumentation))
#elif defined(GM_SIM_CHECKED)
#define GM_SIM_UNCHECKED \
    __attribute__((no_sanitize("thread", "kernel-address", "alignment", "object-size", "bounds")))
#else
#define GM_SIM_UNCHECKED
#endif

static gm_sim_runtime gm_sim_rt;

/* `p`, which lies on a multiple of `a`, said so where it spares a checked program's tests of its
 * alignment (`-fsanitize=alignment`: GCC drops them). Clang's instrumentation tests the claim
 * itself instead (a call of `__ubsan_handle_alignment_assumption`), so it is told nothing. */
#if defined(__clang__)
#define GM_SIM_ASSUME_ALIGNED(p, a) (p)
#define GM_SIM_RETURNS_ALIGNED(a)
#else
#define GM_SIM_ASSUME_ALIGNED(p, a) __builtin_assume_aligned((p), (a))
#define GM_SIM_RETURNS_ALIGNED(a) __attribute__((assume_aligned(a)))
#endif

// The running simulated thread's indices. `const`: within one thread's run of the kernel the
// answer never changes (after a barrier the same thread is current again), so the compiler asks
// once per kernel call instead of at every `threadIdx` (noinline keeps the attribute in force).
// `nothrow` (the executor's callback never unwinds): a call that may throw is not moved out of
// a loop inside a `try`, and the threads loop asked again for every thread (Rodinia's Fan2
// spent a fifth of its time there).
// The record is the simulator's, aligned for its type (GM_SIM_RETURNS_ALIGNED).
__attribute__((const, noinline, nothrow)) GM_SIM_RETURNS_ALIGNED(alignof(gm_sim_thread))
GM_SIM_UNCHECKED static const gm_sim_thread *
gm_sim_self() {
    return gm_sim_rt.self();
}

#define threadIdx (gm_sim_self()->thread_idx)
#define blockIdx (gm_sim_self()->block_idx)
#define blockDim (gm_sim_self()->block_dim)
#define gridDim (gm_sim_self()->grid_dim)
/* A power of two, written so that the compiler sees it is one: `threadIdx.x % warpSize` and
 * `/ warpSize` are then a mask and a shift, not a division per thread. (The simulator runs warps
 * of 32 or 64 threads; or'ing 64 in leaves both, and gives no zero to count the trailing zeros
 * of.) */
#define warpSize ((int)(1u << __builtin_ctz(gm_sim_self()->warp_size | 64u)))

inline void __syncthreads(GM_SITE_ONLY) {
    gm_sim_rt.barrier(GM_SIM_SCOPE_BLOCK, GM_FENCE_LOCAL, ~0ull, gm_file, gm_line);
}
/* A warp collective (or, op 0, a warp barrier). A kernel run as regions exchanges at the
 * statement the rewrite split its regions at (gm_sim/regions.h): the call records its operands
 * before the split and hands out its result after it. */
#if defined(GM_SIM_REGIONS)
unsigned long long gm_sim_regions_collective(int op, unsigned long long mask,
                                             unsigned long long value, long long arg, int width);
#define GM_SIM_WARP_COLLECTIVE(op, mask, value, arg, width, file, line)                       \
    gm_sim_regions_collective(op, mask, value, arg, width)
#else
#define GM_SIM_WARP_COLLECTIVE(op, mask, value, arg, width, file, line)                       \
    gm_sim_rt.collective(op, mask, value, arg, width, file, line)
#endif
inline void __syncwarp(unsigned long long mask = ~0ull GM_SITE) {
#if defined(GM_SIM_REGIONS)
    (void)GM_SIM_WARP_COLLECTIVE(0, mask, 0, 0, 0, gm_file, gm_line);
#else
    gm_sim_rt.barrier(GM_SIM_SCOPE_WARP, GM_FENCE_LOCAL, mask, gm_file, gm_line);
#endif
}
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
/* Lets the block's other threads run now and then (every 16th call of a thread), so that a
 * thread spinning on a flag that another warp of its block sets makes progress (Volta-style
 * forward progress): atomics and the spin hint do. A stackless thread does it where the kernel
 * or a helper calls them instead (a coroutine can only suspend there; see GM_SIM_STACKLESS
 * below). */
#if defined(GM_SIM_STACKLESS)
#define GM_SIM_PROGRESS() ((void)0)
#else
#define GM_SIM_PROGRESS()                                                                     \
    do {                                                                                      \
        if (gm_sim_self()->progress != 0) {                                                   \
            gm_sim_rt.progress();                                                             \
        }                                                                                     \
    } while (0)
#endif
#define GM_SIM_PROGRESS_EVERY 16u

/* A checked program whose accesses its shadow answers (GM_SIM_SHADOWED, gm_sim/checked.h)
 * asks for an atomic as one before it happens (the compiler's own check of it is a store's). */
#if defined(GM_SIM_SHADOWED)
inline void gm_sim_atomic_access(const volatile void *address, unsigned long long size);
#define GM_SIM_ATOMIC_ACCESS(address) gm_sim_atomic_access(address, sizeof(*(address)))
#else
#define GM_SIM_ATOMIC_ACCESS(address) ((void)0)
#endif

/* A hint that lets the other threads of the block run (spin-wait loops). */
inline void __nanosleep(unsigned int) { GM_SIM_PROGRESS(); }

inline int __syncthreads_count(int predicate GM_SITE) {
    return (int)gm_sim_rt.collective(GM_SIM_OP_SYNC_COUNT, ~0ull, predicate != 0, 0, 0, gm_file,
                                     gm_line);
}
inline int __syncthreads_and(int predicate GM_SITE) {
    return (int)gm_sim_rt.collective(GM_SIM_OP_SYNC_AND, ~0ull, predicate != 0, 0, 0, gm_file,
                                     gm_line);
}
inline int __syncthreads_or(int predicate GM_SITE) {
    return (int)gm_sim_rt.collective(GM_SIM_OP_SYNC_OR, ~0ull, predicate != 0, 0, 0, gm_file,
                                     gm_line);
}

/* ----- warp collectives (values up to 8 bytes travel as bits) ---------------------------- */

/* The unsigned integer of a value's size (a word for sizes between): copying a value into one of
 * its own size is a plain move, where a copy into part of a wider word left that word in memory,
 * and the regions' loops around a shuffle then did not vectorise. */
template <unsigned long Bytes>
struct gm_sim_word_of {
    typedef unsigned long long type;
};
template <>
struct gm_sim_word_of<1> {
    typedef unsigned char type;
};
template <>
struct gm_sim_word_of<2> {
    typedef unsigned short type;
};
template <>
struct gm_sim_word_of<4> {
    typedef unsigned int type;
};
template <typename T>
inline unsigned long long gm_sim_bits(T value) {
    static_assert(sizeof(T) <= 8, "warp shuffles move values of at most 8 bytes");
    typename gm_sim_word_of<sizeof(T)>::type bits = 0;
    std::memcpy(&bits, &value, sizeof(T));
    return bits;
}
template <typename T>
inline T gm_sim_from_bits(unsigned long long bits) {
    const typename gm_sim_word_of<sizeof(T)>::type word =
        (typename gm_sim_word_of<sizeof(T)>::type)bits;
    T value;
    std::memcpy(&value, &word, sizeof(T));
    return value;
}

template <typename T>
inline T __shfl_sync(unsigned long long mask, T var, int src_lane, int width = warpSize GM_SITE) {
    return gm_sim_from_bits<T>(GM_SIM_WARP_COLLECTIVE(GM_SIM_OP_SHFL, mask, gm_sim_bits(var),
                                                    src_lane, width, gm_file, gm_line));
}
template <typename T>
inline T __shfl_up_sync(unsigned long long mask, T var, unsigned int delta,
                        int width = warpSize GM_SITE) {
    return gm_sim_from_bits<T>(GM_SIM_WARP_COLLECTIVE(GM_SIM_OP_SHFL_UP, mask, gm_sim_bits(var),
                                                    delta, width, gm_file, gm_line));
}
template <typename T>
inline T __shfl_down_sync(unsigned long long mask, T var, unsigned int delta,
                          int width = warpSize GM_SITE) {
    return gm_sim_from_bits<T>(GM_SIM_WARP_COLLECTIVE(GM_SIM_OP_SHFL_DOWN, mask, gm_sim_bits(var),
                                                    delta, width, gm_file, gm_line));
}
template <typename T>
inline T __shfl_xor_sync(unsigned long long mask, T var, int lane_mask,
                         int width = warpSize GM_SITE) {
    return gm_sim_from_bits<T>(GM_SIM_WARP_COLLECTIVE(GM_SIM_OP_SHFL_XOR, mask, gm_sim_bits(var),
                                                    lane_mask, width, gm_file, gm_line));
}
/* One bit per lane (64 bits, for warps of 64 lanes). */
inline unsigned long long __ballot_sync(unsigned long long mask, int predicate GM_SITE) {
    return GM_SIM_WARP_COLLECTIVE(GM_SIM_OP_BALLOT, mask, predicate != 0, 0, 0, gm_file, gm_line);
}
inline int __all_sync(unsigned long long mask, int predicate GM_SITE) {
    return (int)GM_SIM_WARP_COLLECTIVE(GM_SIM_OP_ALL, mask, predicate != 0, 0, 0, gm_file, gm_line);
}
inline int __any_sync(unsigned long long mask, int predicate GM_SITE) {
    return (int)GM_SIM_WARP_COLLECTIVE(GM_SIM_OP_ANY, mask, predicate != 0, 0, 0, gm_file, gm_line);
}
/* CUDA's __reduce_*_sync (sm_80): the lanes of `mask` combine their values in one exchange, as
 * the hardware's redux does. */
#define GM_SIM_WARP_REDUCE(name, T, kind)                                                     \
    inline T name(unsigned int mask, T value GM_SITE) {                                       \
        return (T)GM_SIM_WARP_COLLECTIVE(GM_SIM_OP_REDUCE, mask, (unsigned int)value, kind, 0,  \
                                         gm_file, gm_line);                                   \
    }
GM_SIM_WARP_REDUCE(__reduce_add_sync, unsigned int, GM_SIM_REDUCE_ADD)
GM_SIM_WARP_REDUCE(__reduce_add_sync, int, GM_SIM_REDUCE_ADD)
GM_SIM_WARP_REDUCE(__reduce_min_sync, unsigned int, GM_SIM_REDUCE_MIN_UNSIGNED)
GM_SIM_WARP_REDUCE(__reduce_min_sync, int, GM_SIM_REDUCE_MIN)
GM_SIM_WARP_REDUCE(__reduce_max_sync, unsigned int, GM_SIM_REDUCE_MAX_UNSIGNED)
GM_SIM_WARP_REDUCE(__reduce_max_sync, int, GM_SIM_REDUCE_MAX)
GM_SIM_WARP_REDUCE(__reduce_and_sync, unsigned int, GM_SIM_REDUCE_AND)
GM_SIM_WARP_REDUCE(__reduce_or_sync, unsigned int, GM_SIM_REDUCE_OR)
GM_SIM_WARP_REDUCE(__reduce_xor_sync, unsigned int, GM_SIM_REDUCE_XOR)
#undef GM_SIM_WARP_REDUCE
/* The GM_SIM_REDUCE_TILE type of a value: 0 int, 1 unsigned, 2 float, 3 double. */
template <typename T>
constexpr int gm_sim_tile_reduce_type() {
    static_assert(sizeof(T) == 4 || (sizeof(T) == 8 && (T)0.5 != 0),
                  "a tile reduces 32-bit integers, floats or doubles");
    return (T)0.5 != 0 ? (sizeof(T) == 8 ? 3 : 2) : ((T)-1 > (T)0 ? 1 : 0);
}
/* A warp-sized tile's `cooperative_groups::reduce` with operation `op` of cooperative groups'
 * (see GM_SIM_REDUCE_TILE), as the simulator lowers it (`source::stackless::block_groups`):
 * one exchange. */
template <typename T>
inline T __gm_tile_reduce_sync(int op, unsigned long long mask, T value, int width GM_SITE) {
    return gm_sim_from_bits<T>(GM_SIM_WARP_COLLECTIVE(
        GM_SIM_OP_REDUCE, mask, gm_sim_bits(value),
        GM_SIM_REDUCE_TILE + 4 * op + gm_sim_tile_reduce_type<T>(), width, gm_file, gm_line));
}

/* ----- atomics (CUDA's names and overloads) ---------------------------------------------- */
/* Every atomic first lets the executor switch threads now and then (GM_SIM_PROGRESS).        */

#define GM_SIM_ATOMIC_INT(name, builtin, type)                                                \
    inline type name(type *address, type value) {                                             \
        GM_SIM_PROGRESS();                                                                    \
        GM_SIM_ATOMIC_ACCESS(address);                                                        \
        return builtin(address, value, __ATOMIC_SEQ_CST);                                     \
    }
#define GM_SIM_ATOMIC_INTS(name, builtin)                                                      \
    GM_SIM_ATOMIC_INT(name, builtin, int)                                                     \
    GM_SIM_ATOMIC_INT(name, builtin, unsigned int)                                            \
    GM_SIM_ATOMIC_INT(name, builtin, unsigned long long)
GM_SIM_ATOMIC_INTS(atomicAdd, __atomic_fetch_add)
GM_SIM_ATOMIC_INT(atomicAdd, __atomic_fetch_add, long long)
GM_SIM_ATOMIC_INT(atomicSub, __atomic_fetch_sub, int)
GM_SIM_ATOMIC_INT(atomicSub, __atomic_fetch_sub, unsigned int)
GM_SIM_ATOMIC_INTS(atomicExch, __atomic_exchange_n)
GM_SIM_ATOMIC_INT(atomicExch, __atomic_exchange_n, long long)
GM_SIM_ATOMIC_INTS(atomicAnd, __atomic_fetch_and)
GM_SIM_ATOMIC_INTS(atomicOr, __atomic_fetch_or)
GM_SIM_ATOMIC_INTS(atomicXor, __atomic_fetch_xor)
GM_SIM_ATOMIC_INT(atomicAnd, __atomic_fetch_and, long long)
GM_SIM_ATOMIC_INT(atomicOr, __atomic_fetch_or, long long)
GM_SIM_ATOMIC_INT(atomicXor, __atomic_fetch_xor, long long)
#undef GM_SIM_ATOMIC_INTS
#undef GM_SIM_ATOMIC_INT

/* Shifts as a GPU computes them: the simulator wraps the right operand of every shift in the
 * kernel's source in gm_shift_count (its source/shifts.rs), and these operators give what PTX's
 * clamped shifts give for a count of the width or more, or a negative one: 0, or -1 for a
 * right shift of a negative signed value (the host processor would take the count modulo the
 * width). A left operand of class type shifts by the count as a plain integer. */
struct gm_shift_count_t {
    long long n;
    constexpr operator long long() const { return n; }
};
template <typename C>
constexpr gm_shift_count_t gm_shift_count(C count) {
    return gm_shift_count_t{(long long)count};
}
template <typename T>
using gm_shift_operand =
    typename std::enable_if<std::is_integral<T>::value || std::is_enum<T>::value, int>::type;
template <typename T, gm_shift_operand<T> = 0>
constexpr auto operator<<(T a, gm_shift_count_t c) -> decltype(a << 0) {
    using R = decltype(a << 0);
    return c.n < 0 || c.n >= (long long)(8 * sizeof(R)) ? R(0) : R(a << c.n);
}
template <typename T, gm_shift_operand<T> = 0>
constexpr auto operator>>(T a, gm_shift_count_t c) -> decltype(a >> 0) {
    using R = decltype(a >> 0);
    return c.n < 0 || c.n >= (long long)(8 * sizeof(R)) ? (R(a) < R(0) ? R(-1) : R(0))
                                                        : R(a >> c.n);
}
template <typename T, gm_shift_operand<T> = 0>
constexpr T &operator<<=(T &a, gm_shift_count_t c) {
    return a = (T)(a << c);
}
template <typename T, gm_shift_operand<T> = 0>
constexpr T &operator>>=(T &a, gm_shift_count_t c) {
    return a = (T)(a >> c);
}

/* Read-modify-write through compare-and-swap on the value's bits. */
template <typename T, typename F>
inline T gm_sim_atomic_update(T *address, F update) {
    GM_SIM_PROGRESS();
    GM_SIM_ATOMIC_ACCESS(address);
    T old = __atomic_load_n(address, __ATOMIC_SEQ_CST);
    while (!__atomic_compare_exchange_n(address, &old, update(old), false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST)) {
    }
    return old;
}
template <typename T, typename F>
inline T gm_sim_atomic_update_float(T *address, F update) {
    typedef typename gm_sim_word_of<sizeof(T)>::type Bits;
    static_assert(sizeof(T) == sizeof(Bits), "bit pattern of the same size");
    GM_SIM_PROGRESS();
    GM_SIM_ATOMIC_ACCESS(address);
    Bits *bits = reinterpret_cast<Bits *>(address);
    Bits old = __atomic_load_n(bits, __ATOMIC_SEQ_CST);
    for (;;) {
        T value;
        std::memcpy(&value, &old, sizeof(T));
        T next = update(value);
        Bits next_bits;
        std::memcpy(&next_bits, &next, sizeof(T));
        if (__atomic_compare_exchange_n(bits, &old, next_bits, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST)) {
            return value;
        }
    }
}

inline float atomicAdd(float *address, float value) {
    return gm_sim_atomic_update_float(address, [=](float v) { return v + value; });
}
inline double atomicAdd(double *address, double value) {
    return gm_sim_atomic_update_float(address, [=](double v) { return v + value; });
}
inline float atomicExch(float *address, float value) {
    return gm_sim_atomic_update_float(address, [=](float) { return value; });
}

#define GM_SIM_ATOMIC_MINMAX(type)                                                            \
    inline type atomicMin(type *address, type value) {                                        \
        return gm_sim_atomic_update(address, [=](type v) { return value < v ? value : v; });  \
    }                                                                                         \
    inline type atomicMax(type *address, type value) {                                        \
        return gm_sim_atomic_update(address, [=](type v) { return value > v ? value : v; });  \
    }
GM_SIM_ATOMIC_MINMAX(int)
GM_SIM_ATOMIC_MINMAX(unsigned int)
GM_SIM_ATOMIC_MINMAX(long long)
GM_SIM_ATOMIC_MINMAX(unsigned long long)
#undef GM_SIM_ATOMIC_MINMAX

/* ((old >= value) ? 0 : old + 1) and (((old == 0) || (old > value)) ? value : old - 1). */
inline unsigned int atomicInc(unsigned int *address, unsigned int value) {
    return gm_sim_atomic_update(address,
                                [=](unsigned int v) { return v >= value ? 0u : v + 1u; });
}
inline unsigned int atomicDec(unsigned int *address, unsigned int value) {
    return gm_sim_atomic_update(
        address, [=](unsigned int v) { return (v == 0u || v > value) ? value : v - 1u; });
}

#define GM_SIM_ATOMIC_CAS(type)                                                               \
    inline type atomicCAS(type *address, type compare, type value) {                          \
        GM_SIM_PROGRESS();                                                                    \
        GM_SIM_ATOMIC_ACCESS(address);                                                        \
        __atomic_compare_exchange_n(address, &compare, value, false, __ATOMIC_SEQ_CST,        \
                                    __ATOMIC_SEQ_CST);                                        \
        return compare;                                                                       \
    }
GM_SIM_ATOMIC_CAS(int)
GM_SIM_ATOMIC_CAS(unsigned int)
GM_SIM_ATOMIC_CAS(unsigned long long)
GM_SIM_ATOMIC_CAS(unsigned short)
#undef GM_SIM_ATOMIC_CAS

#endif /* GM_HOST */

/* ======================================================================================== */
/* GPU branches: the macros the shared part uses.                                             */
/* ======================================================================================== */
#if !defined(GM_HOST)
#define GM_DEVICE __device__ __forceinline__
#define GM_SHARED __shared__
#define GM_SITE
#define GM_SITE_ONLY
#endif

#if defined(GM_HIP)
/* CUDA C++ is compiled as for compute capability 9.0 here too (as on the simulator): code a
 * kernel keeps for `__CUDA_ARCH__ >= 700` and the like is compiled, not silently left out. */
#if !defined(__CUDA_ARCH__)
#define __CUDA_ARCH__ 900
#endif
/* HIP 5.2 has the wave intrinsics without CUDA's _sync names and masks: a wavefront runs in
 * lockstep, so the mask only names lanes that take part anyway. */
template <typename T>
GM_DEVICE T __shfl_sync(unsigned long long, T var, int src_lane, int width = warpSize) {
    return __shfl(var, src_lane, width);
}
template <typename T>
GM_DEVICE T __shfl_up_sync(unsigned long long, T var, unsigned int delta, int width = warpSize) {
    return __shfl_up(var, delta, width);
}
template <typename T>
GM_DEVICE T __shfl_down_sync(unsigned long long, T var, unsigned int delta,
                             int width = warpSize) {
    return __shfl_down(var, delta, width);
}
template <typename T>
GM_DEVICE T __shfl_xor_sync(unsigned long long, T var, int lane_mask, int width = warpSize) {
    return __shfl_xor(var, lane_mask, width);
}
GM_DEVICE unsigned long long __ballot_sync(unsigned long long, int predicate) {
    return __ballot(predicate);
}
GM_DEVICE int __all_sync(unsigned long long, int predicate) { return __all(predicate); }
GM_DEVICE int __any_sync(unsigned long long, int predicate) { return __any(predicate); }
/* CUDA's integer min and max by type name, and its trap, which HIP spells otherwise. */
GM_DEVICE unsigned int umin(unsigned int a, unsigned int b) { return a < b ? a : b; }
GM_DEVICE unsigned int umax(unsigned int a, unsigned int b) { return a > b ? a : b; }
GM_DEVICE long long llmin(long long a, long long b) { return a < b ? a : b; }
GM_DEVICE long long llmax(long long a, long long b) { return a > b ? a : b; }
GM_DEVICE unsigned long long ullmin(unsigned long long a, unsigned long long b) {
    return a < b ? a : b;
}
GM_DEVICE unsigned long long ullmax(unsigned long long a, unsigned long long b) {
    return a > b ? a : b;
}
GM_DEVICE void __trap() { __builtin_trap(); }
/* CUDA's clock_t, the type its clock() returns (HIP's returns long long), and the system-scope
 * atomicInc and atomicDec HIP 5.2 lacks (it has the other atomics' `_system` forms): CUDA's
 * operations through HIP's system-scope compare-and-swap. */
typedef long clock_t;
GM_DEVICE unsigned int atomicInc_system(unsigned int *address, unsigned int val) {
    unsigned int old = *address, assumed;
    do {
        assumed = old;
        old = atomicCAS_system(address, assumed, assumed >= val ? 0u : assumed + 1u);
    } while (old != assumed);
    return old;
}
GM_DEVICE unsigned int atomicDec_system(unsigned int *address, unsigned int val) {
    unsigned int old = *address, assumed;
    do {
        assumed = old;
        old = atomicCAS_system(address, assumed,
                               (assumed == 0u || assumed > val) ? val : assumed - 1u);
    } while (old != assumed);
    return old;
}
#endif

/* ======================================================================================== */
/* The vocabulary, the same on every backend.                                                */
/* ======================================================================================== */

/* ----- warp reductions ------------------------------------------------------------------ */

#if !defined(GM_CUDA) && !defined(GM_SIM)
/* CUDA's __reduce_*_sync (sm_80), which NVRTC has: the values of the lanes `mask` names,
 * combined in lane order through one shuffle per lane (every lane of `mask` makes the same
 * calls, as the CUDA functions require). (The simulator has them as one collective each.) */
#define GM_WARP_REDUCE(name, T, op)                                                           \
    GM_DEVICE T name(unsigned int mask, T value) {                                            \
        T acc = 0;                                                                            \
        bool first = true;                                                                    \
        for (int lane = 0; lane < 32; ++lane) {                                               \
            if (mask & (1u << lane)) {                                                        \
                const T v = __shfl_sync(mask, value, lane);                                   \
                acc = first ? v : op;                                                         \
                first = false;                                                                \
            }                                                                                 \
        }                                                                                     \
        return acc;                                                                           \
    }
GM_WARP_REDUCE(__reduce_add_sync, unsigned int, acc + v)
GM_WARP_REDUCE(__reduce_add_sync, int, acc + v)
GM_WARP_REDUCE(__reduce_min_sync, unsigned int, (v < acc ? v : acc))
GM_WARP_REDUCE(__reduce_min_sync, int, (v < acc ? v : acc))
GM_WARP_REDUCE(__reduce_max_sync, unsigned int, (v > acc ? v : acc))
GM_WARP_REDUCE(__reduce_max_sync, int, (v > acc ? v : acc))
GM_WARP_REDUCE(__reduce_and_sync, unsigned int, acc & v)
GM_WARP_REDUCE(__reduce_or_sync, unsigned int, acc | v)
GM_WARP_REDUCE(__reduce_xor_sync, unsigned int, acc ^ v)
#undef GM_WARP_REDUCE
#endif

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
#if defined(GM_HIP) && defined(__AMDGCN_WAVEFRONT_SIZE)
    /* clang's target macro: 64 on gfx9 (wave64), 32 on wave32 targets. */
    return __AMDGCN_WAVEFRONT_SIZE;
#else
    return warpSize;
#endif
}

GM_DEVICE int gm_lane_id() {
#if defined(GM_CUDA)
    unsigned int lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    return (int)lane;
#elif defined(GM_HIP)
    return (int)__builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
#else
    /* From the thread's index, which the loops over a block's threads keep: a lane of its own
     * would be one more store per thread. */
    const gm_sim_thread* const self = gm_sim_self();
    const gm_uint3 i = self->thread_idx;
    const unsigned int linear = i.x + self->block_dim.x * (i.y + self->block_dim.y * i.z);
    const unsigned int warp = self->warp_size == 0 ? 1 : self->warp_size;
    return (int)((warp & (warp - 1)) == 0 ? linear & (warp - 1) : linear % warp);
#endif
}

/* ----- barriers ------------------------------------------------------------------------ */

/* Block barrier. GM_FENCE_LOCAL: shared-memory writes before it are seen by the block after it
 * (__syncthreads). GM_FENCE_GLOBAL additionally makes this thread's global-memory writes
 * visible device-wide first (__threadfence), as Numba ROC's barrier(CLK_GLOBAL_MEM_FENCE)
 * promised. Every thread of the block must reach the same barrier. */
GM_DEVICE void barrier(int fence GM_SITE) {
#if defined(GM_HOST)
    if (fence & GM_FENCE_GLOBAL) {
        __threadfence();
    }
    gm_sim_rt.barrier(GM_SIM_SCOPE_BLOCK, fence, ~0ull, gm_file, gm_line);
#else
    if (fence & GM_FENCE_GLOBAL) {
        __threadfence();
    }
    __syncthreads();
#endif
}

/* Numba CUDA's spelling of barrier(GM_FENCE_LOCAL). */
GM_DEVICE void syncthreads(GM_SITE_ONLY) {
#if defined(GM_HOST)
    __syncthreads(gm_file, gm_line);
#else
    __syncthreads();
#endif
}

/* Numba's syncthreads_count / _and / _or: a block barrier that also reduces a predicate. */
GM_DEVICE int syncthreads_count(int predicate GM_SITE) {
#if defined(GM_HOST)
    return __syncthreads_count(predicate, gm_file, gm_line);
#else
    return __syncthreads_count(predicate);
#endif
}
GM_DEVICE int syncthreads_and(int predicate GM_SITE) {
#if defined(GM_HOST)
    return __syncthreads_and(predicate, gm_file, gm_line);
#else
    return __syncthreads_and(predicate);
#endif
}
GM_DEVICE int syncthreads_or(int predicate GM_SITE) {
#if defined(GM_HOST)
    return __syncthreads_or(predicate, gm_file, gm_line);
#else
    return __syncthreads_or(predicate);
#endif
}

/* Barrier among the threads of one warp (CUDA) or wavefront (AMD), with memory ordering among
 * them. HIP 5.2 has no __syncwarp; a wavefront executes in lockstep, so the AMDGPU wave
 * barrier (a scheduling barrier) is its equivalent. */
GM_DEVICE void wavebarrier(GM_SITE_ONLY) {
#if defined(GM_CUDA)
    __syncwarp();
#elif defined(GM_HIP)
    __builtin_amdgcn_wave_barrier();
#else
    __syncwarp(~0ull, gm_file, gm_line);
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
    return reinterpret_cast<T*>(gm_dynamic_shared_bytes);
#elif defined(GM_HIP)
    extern __shared__ __attribute__((aligned(16))) unsigned char gm_dynamic_shared_bytes[];
    return reinterpret_cast<T*>(gm_dynamic_shared_bytes);
#else
    return reinterpret_cast<T*>(gm_sim_self()->dynamic_shared);
#endif
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

    /* a(i, j, ...): exactly N indices. No bounds check on a GPU (like CUDA C); on the
     * simulator an index outside the shape is a fault naming the index and the shape, and
     * the access goes to a zeroed scratch element instead. */
    template <typename... I>
    GM_DEVICE T& operator()(I... index) const {
        static_assert(sizeof...(I) == N, "gm_array: give one index per dimension");
        const long long ix[N] = {(long long)index...};
        long long offset = 0;
        for (int d = 0; d < N; ++d) {
#if defined(GM_HOST)
            if (ix[d] < 0 || ix[d] >= shape[d]) {
                return *static_cast<T*>(gm_sim_rt.index_fault(N, ix, shape, sizeof(T)));
            }
#endif
            offset += ix[d] * strides[d];
        }
        return data[offset];
    }
};

#if defined(GM_HOST)
/* Thrown where a simulated thread stops for good after its fault is recorded (`assert`,
 * `__trap`, `exit`): caught where the thread started, as a GPU's trap ends the thread. */
struct gm_sim_trap {};

/* CUDA's device vocabulary beyond this header's own (the math API and intrinsics, vector
 * types, printf, assert, traps): the simulator supplies it. */
#include "gm_sim/device.h"
#endif

/* ======================================================================================== */
/* The simulator's launch glue: describes and calls one entry point (used by the wrapper    */
/* the simulator generates after the kernel's source).                                      */
/* ======================================================================================== */
#if defined(GM_HOST)

/* One parameter as the compiler sees it (C layout shared with the simulator). */
struct gm_sim_param {
    int kind;                     /* 0 value, 1 gm_array<T, N>, 2 pointer */
    int elem_kind;                /* 0 other, 1 signed, 2 unsigned, 3 floating, 4 bool */
    unsigned long long elem_size; /* sizeof(T) (0 for void) */
    int ndim;                     /* N of gm_array */
    unsigned long long size;      /* sizeof the parameter */
    const char* type_name;        /* the compiler's spelling, for messages */
};

template <typename T>
struct gm_sim_shape {
    static constexpr int kind = 0;
    static constexpr int ndim = 0;
    typedef T elem;
};
template <typename T, int N>
struct gm_sim_shape<gm_array<T, N> > {
    static constexpr int kind = 1;
    static constexpr int ndim = N;
    typedef T elem;
};
template <typename T>
struct gm_sim_shape<T*> {
    static constexpr int kind = 2;
    static constexpr int ndim = 0;
    typedef T elem;
};

template <typename T>
constexpr int gm_sim_elem_kind() {
    typedef typename std::remove_cv<T>::type U;
    return std::is_same<U, bool>::value            ? 4
           : std::is_floating_point<U>::value      ? 3
           : (std::is_integral<U>::value && std::is_signed<U>::value) ? 1
           : std::is_integral<U>::value            ? 2
                                                   : 0;
}
template <typename T>
constexpr unsigned long long gm_sim_size_of() {
    if constexpr (std::is_void<T>::value) {
        return 0;
    } else {
        return sizeof(T);
    }
}
template <typename T>
const char* gm_sim_type_name() {
    return __PRETTY_FUNCTION__;
}

template <typename P>
gm_sim_param gm_sim_describe_one() {
    typedef typename std::remove_cv<typename std::remove_reference<P>::type>::type V;
    typedef gm_sim_shape<V> S;
    gm_sim_param p = {S::kind,
                      gm_sim_elem_kind<typename S::elem>(),
                      gm_sim_size_of<typename std::remove_cv<typename S::elem>::type>(),
                      S::ndim,
                      sizeof(V),
                      gm_sim_type_name<V>()};
    return p;
}

/* The parameters of a kernel of type `R (*)(P...)`, given as a null pointer of that type. */
template <typename R, typename... P>
GM_SIM_UNCHECKED const gm_sim_param* gm_sim_describe(R (*)(P...), int* count) {
    static const gm_sim_param params[sizeof...(P) + 1] = {gm_sim_describe_one<P>()...,
                                                          gm_sim_param{}};
    *count = (int)sizeof...(P);
    return params;
}

template <typename R, typename... P, unsigned long... I>
GM_SIM_UNCHECKED R gm_sim_call(R (*entry)(P...), void* const* args, std::integer_sequence<unsigned long, I...>) {
    return entry(
        *static_cast<typename std::remove_cv<typename std::remove_reference<P>::type>::type*>(
            args[I])...);
}

/* Runs the entry with the launcher's argument buffers; 0 on return, 1 if a C++ exception
 * reached it, 2 if the thread trapped (`assert`, `__trap`, `exit`: the fault is recorded).
 * Nothing escapes into the simulator. */
template <typename... P>
GM_SIM_UNCHECKED int gm_sim_invoke_unescaped(void (*entry)(P...), void* const* args) {
    try {
        gm_sim_call(entry, args, std::make_integer_sequence<unsigned long, sizeof...(P)>());
        return 0;
    } catch (const gm_sim_trap&) {
        return 2;
    } catch (...) {
        gm_sim_rt.fault("a C++ exception escaped the kernel");
        return 1;
    }
}

#if defined(GM_SIM_CHECKED)
/* Runs `run()` as a thread whose refused access ends it here: 2, as after a trap. */
template <typename F>
GM_SIM_UNCHECKED __attribute__((noinline)) int gm_sim_escapable(F run) {
    void* escape[5];
    gm_sim_thread* self = const_cast<gm_sim_thread*>(gm_sim_self());
    void* const outer = self->escape;
    void* const outer_top = self->stack_top;
    if (__builtin_setjmp(escape) != 0) {
        self = const_cast<gm_sim_thread*>(gm_sim_self());
        self->escape = outer;
        self->stack_top = outer_top;
        return 2;
    }
    self->escape = escape;
    self->stack_top = __builtin_frame_address(0);
    const int status = run();
    self->escape = outer;
    self->stack_top = outer_top;
    return status;
}
#endif

template <typename... P>
GM_SIM_UNCHECKED int gm_sim_invoke(void (*entry)(P...), void* const* args) {
#if defined(GM_SIM_CHECKED)
    return gm_sim_escapable([=]() GM_SIM_UNCHECKED { return gm_sim_invoke_unescaped(entry, args); });
#else
    return gm_sim_invoke_unescaped(entry, args);
#endif
}

/* Blocks' threads as a loop (C layout shared with the simulator), for a kernel whose threads
 * never wait for each other: they run here, block after block and in each block in index order
 * (x fastest), each a call of the entry with the launch's parameters (copied out once), so that
 * starting a thread costs an index update, and the compiler may inline the kernel into the
 * loop, instead of a call from the simulator per thread. The loop stops after the first thread
 * that faults. */
struct gm_sim_threads {
    void* const* args;            /* the launch's argument buffers */
    const unsigned char* faulted; /* nonzero once a thread recorded a fault */
    unsigned long long first_block; /* linear index (x fastest) of the first block */
    unsigned long long blocks;      /* consecutive blocks to run */
    unsigned int count;           /* threads in a block */
    unsigned int dim_x, dim_y;    /* the block's extent in x and y */
    unsigned int warp_size;
    int status; /* out: 0, 1 if a C++ exception reached a thread, 2 if it trapped */
};

/* From a thread's index to the next thread's in a block of `dim_x` x `dim_y` x ... (x fastest):
 * what the loops over a block's threads step by. */
inline void gm_sim_next_thread(gm_uint3& index, unsigned int dim_x, unsigned int dim_y) {
    if (++index.x == dim_x) {
        index.x = 0;
        if (++index.y == dim_y) {
            index.y = 0;
            ++index.z;
        }
    }
}

#if defined(GM_SIM_CHECKED)
/* The program's loop starts another thread (gm_sim/checked.h). */
GM_SIM_UNCHECKED inline void gm_sim_thread_starts();
#endif

/* `Entry` is the kernel: a template argument, so that the call below is a direct one, which
 * `flatten` inlines (GCC left a kernel called from both entries, with external linkage, a call
 * per thread); `P` is deduced from the unused first parameter. How a checked kernel is called:
 * - hooked at every access (GM_SIM_CHECKED alone): it stays a call, through a `volatile`
 *   pointer. Inlined into this loop, which is unchecked glue, clang dropped the kernel's
 *   instrumentation, and its accesses went unchecked.
 * - through a shadow (GM_SIM_SHADOWED, GCC only): the loop is instrumented itself, so that the
 *   kernel inlines into it as an unchecked one does (a call per thread, each asking for the
 *   thread's record again, was most of a data-parallel kernel's memcheck time: vectorAdd 9x
 *   the unchecked loop). Everything it touches is then checked, so it touches nothing of the
 *   simulator's own but the thread's record and the fault flag (`gm_sim_faulted`): what it
 *   needs of the launch, the glue that calls it copies onto the thread's stack
 *   (`gm_sim_run_threads_of`), which the thread may touch. */
#if defined(GM_SIM_SHADOWED)
#define GM_SIM_LOOP_GLUE
#define GM_SIM_LOOP_INLINE __attribute__((flatten))
#elif defined(GM_SIM_CHECKED)
#define GM_SIM_LOOP_GLUE GM_SIM_UNCHECKED
#define GM_SIM_LOOP_INLINE
#define GM_SIM_LOOP_BY_POINTER
#else
#define GM_SIM_LOOP_GLUE
#define GM_SIM_LOOP_INLINE __attribute__((flatten))
#endif

/* Whether a thread of the block recorded a fault (read by the loop below and by a block run as
 * regions, gm_sim/regions.h): glue as the loop is (clang instruments a function it does not
 * inline, and the flag is the simulator's, which no thread may touch). A shadowed program reads
 * it in assembly, which the instrumentation leaves alone (the shadow exists on x86-64 only):
 * inline, where an unchecked reader would be a call (and GCC's IPA-SRA moved the read of a
 * `noinline` one into its checked caller). */
GM_SIM_LOOP_GLUE inline bool gm_sim_faulted(const unsigned char* faulted) {
#if defined(GM_SIM_SHADOWED) && defined(__x86_64__)
    unsigned char value;
    __asm__ volatile("movzbl (%1), %k0" : "=r"(value) : "r"(faulted) : "memory");
    return value != 0;
#else
    return *faulted != 0;
#endif
}
/* The blocks a run of the program goes through, from block `b` (linear, x fastest) of its grid:
 * the first one's index divided out once, each next one stepped to (three divisions per block
 * were a tenth of a grid of 4 x 4 blocks' time). */
struct gm_sim_blocks_walk {
    gm_uint3 index;
    unsigned int grid_x, grid_y;

    GM_SIM_UNCHECKED gm_sim_blocks_walk(const gm_sim_thread* thread, unsigned long long b)
        : grid_x(thread->grid_dim.x == 0 ? 1 : thread->grid_dim.x),
          grid_y(thread->grid_dim.y == 0 ? 1 : thread->grid_dim.y) {
        index.x = (unsigned int)(b % grid_x);
        index.y = (unsigned int)((b / grid_x) % grid_y);
        index.z = (unsigned int)(b / ((unsigned long long)grid_x * grid_y));
    }
    /* The current block as the running one, then the next one current. */
    GM_SIM_UNCHECKED void enter(gm_sim_thread* thread) {
        thread->block_idx = index;
        if (++index.x == grid_x) {
            index.x = 0;
            if (++index.y == grid_y) {
                index.y = 0;
                ++index.z;
            }
        }
    }
};

/* A kernel's leading guard refused the running thread, and with it every thread further along
 * `axis` (1: x, 2: y, 3: z) in its block: what the simulator's rewrite (`source::guards`) has a
 * guard's `return` say first, in kernels run as plain calls, and the loop below reads after each
 * thread (`Guarded`) and clears. */
static thread_local unsigned int gm_sim_refused_axis;
inline void gm_sim_refuse_rest(unsigned int axis) { gm_sim_refused_axis = axis; }

/* Whether a block's threads along an axis of `grid` blocks of `dim` threads all have indices
 * (`blockIdx * blockDim + threadIdx`) that fit an `int`: where they do, a larger index never
 * compares as a smaller one, and a guard that refused a thread refuses every later one. */
inline bool gm_sim_indices_fit(unsigned int grid, unsigned int dim) {
    return (unsigned long long)grid * dim <= 0x7fffffffull;
}

template <auto Entry, bool Guarded, typename... P, unsigned long... I>
GM_SIM_LOOP_GLUE GM_SIM_LOOP_INLINE void gm_sim_thread_loop(void (*)(P...), gm_sim_threads* t,
                                         std::integer_sequence<unsigned long, I...>) {
#if defined(GM_SIM_LOOP_BY_POINTER)
    /* Each thread's copy straight from the buffers: `std::get`, instrumented, is not inlined
     * into this unchecked loop (a call per parameter per thread). */
    void* const* const params = t->args;
#define GM_SIM_LOOP_PARAM(I)                                                                  \
    (*static_cast<const typename std::remove_cv<typename std::remove_reference<P>::type>::type*>( \
        params[I]))
#else
    typedef std::tuple<typename std::remove_cv<typename std::remove_reference<P>::type>::type...>
        Params;
    /* Copied out: each thread receives its own copy of these, as from the buffers. */
    const Params params(*static_cast<const typename std::tuple_element<I, Params>::type*>(
        t->args[I])...);
#define GM_SIM_LOOP_PARAM(I) std::get<I>(params)
#endif
    /* What threadIdx & co read, set to each thread before it runs: asked through the same
     * `const` function the kernel's reads go through, so that once the kernel is inlined here
     * the compiler sees one pointer, and each index read as the value just stored. */
    gm_sim_thread* const thread = const_cast<gm_sim_thread*>(gm_sim_self());
    const unsigned char* const faulted = t->faulted;
#if defined(GM_SIM_LOOP_BY_POINTER)
    void (*volatile const entry)(P...) = Entry;
#endif
    const unsigned int dim_x = t->dim_x, dim_y = t->dim_y;
    const unsigned int plane = dim_x * dim_y;
    const unsigned int dim_z = plane == 0 ? 0 : t->count / plane;
    gm_sim_blocks_walk blocks(thread, t->first_block);
    const unsigned long long end = t->first_block + t->blocks;
    /* Guards are trusted only where no index wraps (a stale mark, of a thread run alone
     * through `gm_sim_invoke`, cleared). */
    const bool cut = Guarded && gm_sim_indices_fit(thread->grid_dim.x, dim_x) &&
                     gm_sim_indices_fit(thread->grid_dim.y, dim_y) &&
                     gm_sim_indices_fit(thread->grid_dim.z, dim_z);
    if (Guarded) {
        gm_sim_refused_axis = 0;
    }
    t->status = 0;
    try {
        for (unsigned long long b = t->first_block; b < end; ++b) {
            blocks.enter(thread);
            /* The block's threads in index order (x fastest), as counted loops, each axis cut
             * where a guard refused the rest of it. */
            unsigned int end_x = dim_x, end_y = dim_y, end_z = dim_z;
            for (unsigned int z = 0; z < end_z; ++z) {
                thread->thread_idx.z = z;
                for (unsigned int y = 0; y < end_y; ++y) {
                    thread->thread_idx.y = y;
                    for (unsigned int x = 0; x < end_x; ++x) {
                        thread->thread_idx.x = x;
#if defined(GM_SIM_LOOP_BY_POINTER)
                        gm_sim_thread_starts();
                        entry(GM_SIM_LOOP_PARAM(I)...);
#else
                        /* (A shadowed program starts no thread: what a thread wrote is its
                         * own only to racecheck, which hooks every access.) */
                        Entry(GM_SIM_LOOP_PARAM(I)...);
#endif
                        if (gm_sim_faulted(faulted)) {
                            return;
                        }
                        if (Guarded && __builtin_expect(gm_sim_refused_axis != 0, 0)) {
                            const unsigned int axis = gm_sim_refused_axis;
                            gm_sim_refused_axis = 0;
                            /* (Refused from index 0 on, the axis refuses the whole block.) */
                            if (cut && axis == 1) {
                                end_x = x; /* this row ends here, and every later one */
                                end_y = x == 0 ? 0 : end_y;
                                end_z = x == 0 ? 0 : end_z;
                            } else if (cut && axis == 2) {
                                end_y = y; /* this plane's rows end here, and every later one's */
                                end_z = y == 0 ? 0 : end_z;
                                break;
                            } else if (cut && axis == 3) {
                                end_z = z; /* the block ends here */
                                end_y = 0;
                                break;
                            }
                        }
                    }
                }
            }
        }
    } catch (const gm_sim_trap&) {
        t->status = 2;
    } catch (...) {
        gm_sim_rt.fault("a C++ exception escaped the kernel");
        t->status = 1;
    }
}
#undef GM_SIM_LOOP_PARAM
#undef GM_SIM_LOOP_BY_POINTER

template <auto Entry, bool Guarded, typename... P>
GM_SIM_UNCHECKED void gm_sim_run_threads_of(void (*)(P...), gm_sim_threads* t) {
#if defined(GM_SIM_SHADOWED)
    /* A refused access ends the thread and, as any fault, the loop, which reads its launch from
     * a copy on the thread's stack (below the frame gm_sim_escapable marks as the stack's top),
     * argument pointers included. */
    const int status = gm_sim_escapable([=]() GM_SIM_UNCHECKED {
        void* args[sizeof...(P) == 0 ? 1 : sizeof...(P)];
        for (unsigned long i = 0; i < sizeof...(P); ++i) {
            args[i] = t->args[i];
        }
        gm_sim_threads launch = *t;
        launch.args = args;
        gm_sim_thread_loop<Entry, Guarded>(
            Entry, &launch, std::make_integer_sequence<unsigned long, sizeof...(P)>());
        return launch.status;
    });
    t->status = status;
#elif defined(GM_SIM_CHECKED)
    /* A refused access ends the thread and, as any fault, the loop. */
    if (gm_sim_escapable([=]() GM_SIM_UNCHECKED {
            gm_sim_thread_loop<Entry, Guarded>(
                Entry, t, std::make_integer_sequence<unsigned long, sizeof...(P)>());
            return 0;
        }) == 2) {
        t->status = 2;
    }
#else
    gm_sim_thread_loop<Entry, Guarded>(Entry, t,
                                       std::make_integer_sequence<unsigned long, sizeof...(P)>());
#endif
}

/* A block's threads (or several blocks'), run as a loop over kernel `Entry`; `Guarded`: its
 * leading guards say where they refuse the rest of an axis (gm_sim_refuse_rest). */
template <auto Entry, bool Guarded = false>
GM_SIM_UNCHECKED void gm_sim_run_threads(gm_sim_threads* t) {
    gm_sim_run_threads_of<Entry, Guarded>(Entry, t);
}

/* A block's threads (or several blocks') as flat loops, for a kernel the simulator cloned
 * (`source::flat_calls`): `Admit` (the kernel's leading declarations, guards and wrapping
 * condition) says whether a thread runs, `Flat` (the rest) runs it, each taking the block's
 * extent, the block's index and the thread's index as values, so that nothing is stored per
 * thread and the loop over `x` can vectorise. The threads `Admit` admits are a box from the
 * block's first thread (each of its tests reads one axis's index and what the block holds
 * alike, and admits a prefix along it): where no index along an axis can wrap, bisection along
 * each axis from the first thread finds the box; otherwise each thread is asked. Nothing in the
 * clones reads the thread record's index, which is left alone. */
template <auto Admit, auto Flat, typename... P, unsigned long... I>
GM_SIM_UNCHECKED __attribute__((flatten)) void gm_sim_flat_loop(
    void (*)(P...), gm_sim_threads* t, std::integer_sequence<unsigned long, I...>) {
    typedef std::tuple<typename std::remove_cv<typename std::remove_reference<P>::type>::type...>
        Params;
    const Params params(*static_cast<const typename std::tuple_element<I, Params>::type*>(
        t->args[I])...);
    gm_sim_thread* const thread = const_cast<gm_sim_thread*>(gm_sim_self());
    const unsigned int dim_x = t->dim_x, dim_y = t->dim_y;
    const unsigned int plane = dim_x * dim_y;
    const unsigned int dim_z = plane == 0 ? 0 : t->count / plane;
    gm_sim_blocks_walk blocks(thread, t->first_block);
    const unsigned long long end = t->first_block + t->blocks;
    const bool bisect = gm_sim_indices_fit(thread->grid_dim.x, dim_x) &&
                        gm_sim_indices_fit(thread->grid_dim.y, dim_y) &&
                        gm_sim_indices_fit(thread->grid_dim.z, dim_z);
    t->status = 0;
    try {
        for (unsigned long long b = t->first_block; b < end; ++b) {
            blocks.enter(thread);
            const gm_uint3 bdim = thread->block_dim, bidx = thread->block_idx;
            const auto admits = [&](unsigned int x, unsigned int y, unsigned int z) {
                return Admit(std::get<I>(params)..., bdim, bidx, gm_uint3{x, y, z});
            };
            if (!bisect) {
                for (unsigned int z = 0; z < dim_z; ++z) {
                    for (unsigned int y = 0; y < dim_y; ++y) {
                        for (unsigned int x = 0; x < dim_x; ++x) {
                            if (admits(x, y, z)) {
                                Flat(std::get<I>(params)..., bdim, bidx, gm_uint3{x, y, z});
                            }
                        }
                    }
                }
            } else if (dim_z != 0 && admits(0, 0, 0)) {
                /* How many threads along an axis the block admits: the first it refuses. */
                const auto extent = [&](unsigned int dim, unsigned int axis) {
                    unsigned int admitted = 1, refused = dim;
                    while (admitted < refused) {
                        const unsigned int mid = admitted + (refused - admitted) / 2;
                        if (admits(axis == 0 ? mid : 0, axis == 1 ? mid : 0, axis == 2 ? mid : 0)) {
                            admitted = mid + 1;
                        } else {
                            refused = mid;
                        }
                    }
                    return admitted;
                };
                const unsigned int end_x = extent(dim_x, 0), end_y = extent(dim_y, 1),
                                   end_z = extent(dim_z, 2);
                for (unsigned int z = 0; z < end_z; ++z) {
                    for (unsigned int y = 0; y < end_y; ++y) {
                        /* (A signed `x`: its index arithmetic cannot wrap, which the
                         * vectoriser needs.) */
                        for (int x = 0; x < (int)end_x; ++x) {
                            Flat(std::get<I>(params)..., bdim, bidx,
                                 gm_uint3{(unsigned int)x, y, z});
                        }
                    }
                }
            }
            if (*t->faulted != 0) {
                return;
            }
        }
    } catch (const gm_sim_trap&) {
        t->status = 2;
    } catch (...) {
        gm_sim_rt.fault("a C++ exception escaped the kernel");
        t->status = 1;
    }
}

template <auto Admit, auto Flat, typename... P>
GM_SIM_UNCHECKED void gm_sim_run_flat(void (*entry)(P...), gm_sim_threads* t) {
    gm_sim_flat_loop<Admit, Flat>(entry, t,
                                  std::make_integer_sequence<unsigned long, sizeof...(P)>());
}

#if defined(GM_SIM_CHECKED)
#include "gm_sim/checked.h"
#endif

#if defined(GM_SIM_REGIONS)
#include "gm_sim/regions.h"
#endif

#define GM_SIM_EXPORT extern "C" __attribute__((visibility("default")))

/* A module's kernels and variables, as the simulator's generated entry points list them (C
 * layouts shared with the simulator). */
struct gm_sim_round;
struct gm_sim_kernel {
    const char* name;                            /* as launched: `k`, `ns::k`, `k<float, 4>` */
    const gm_sim_param* (*params)(int* count);   /* its parameters */
    int (*run)(void* const* args);               /* one thread (threads as calls), else null */
    void (*run_threads)(gm_sim_threads*);        /* a block's threads (threads as calls) */
    void (*start_round)(struct gm_sim_round*);   /* stackless threads, else null */
    void (*resume_round)(struct gm_sim_round*);
};
struct gm_sim_variable {
    const char* name; /* qualified */
    void* address;
    unsigned long long size;
};

/* ----- stackless threads ----------------------------------------------------------------- */
/* A kernel whose threads wait only at barriers and collectives called in the kernel, or in   */
/* __device__ helpers it calls, is built with GM_SIM_STACKLESS (and GCC's -fcoroutines): the  */
/* simulator rewrites each __global__ function into a coroutine (`void` becomes gm_sim_task,  */
/* `return` becomes `co_return`), each helper that waits too (its return type T becomes       */
/* gm_sim_sub<T>, each call of it a `co_await`), and the barrier and collective names below   */
/* become `co_await`s. A thread is then small heap frames instead of a stack: where it waits, */
/* it leaves the wait in its kernel's promise and returns; the simulator decides who goes on  */
/* (writing collectives' results into the waits) and gm_sim_run_round runs them. Atomics and  */
/* the spin hint become `co_await`s too, which let the others run at every 16th call          */
/* (GM_SIM_PROGRESS). One called where no coroutine can be (a struct's member function, a     */
/* lambda) cannot suspend, and such a kernel runs on stacks of its own.                       */
#if defined(GM_SIM_STACKLESS)
#include <coroutine>
#include <cstdlib>
#include <exception>
#include <new>
#include <tuple>
#include <type_traits>

/* Where a suspended thread waits (C layouts shared with the simulator): a block barrier's call
 * site and fence; for anything else (kind != block barrier) the same head inside a
 * gm_sim_wait_more, with the warp's mask, the collective's operands and its result, which the
 * simulator writes before the thread goes on. Block barriers keep to the small one: their
 * frames stay small. */
struct gm_sim_wait {
    const char* file;
    int line;
    int fence;
    int kind; /* GM_SIM_SCOPE_* << 4 | (0: a barrier, else GM_SIM_OP_*), or GM_SIM_KIND_YIELD */
};
/* The kind of the one wait that is no wait: the thread lets the others run and goes on in the
 * next round (an atomic or a spin hint; see gm_sim_progressing). */
#define GM_SIM_KIND_YIELD 0x100
struct gm_sim_wait_more {
    gm_sim_wait head;
    unsigned long long mask;  /* lanes of the warp that take part (warp scope) */
    unsigned long long value; /* the operand's bits */
    long long arg;            /* a shuffle's lane, delta or lane mask */
    int width;                /* a shuffle's width */
    unsigned long long result;
};

/* Frames of the running block's threads, one bump arena per OS thread, reset per block. */
struct gm_sim_frame_chunk {
    char* base;
    unsigned long long size;
};
struct gm_sim_frame_arena {
    gm_sim_frame_chunk chunks[64];
    int count;
    int current;
    char* next;
    char* end;
};
/* Trivial, so the allocation's fast path takes one thread-local lookup and no guard. */
static thread_local gm_sim_frame_arena gm_sim_frames;
/* Helper functions' frames (see gm_sim_sub_alloc). */
static thread_local gm_sim_frame_arena gm_sim_sub_frames;
/* Frees the arena's chunks when the OS thread ends; set up by the first chunk. */
struct gm_sim_frame_owner {
    bool armed = false;
    ~gm_sim_frame_owner() {
        gm_sim_frame_arena* arenas[2] = {&gm_sim_frames, &gm_sim_sub_frames};
        for (gm_sim_frame_arena* a : arenas) {
            for (int i = 0; i < a->count; ++i) {
                std::free(a->chunks[i].base);
            }
            a->count = 0;
        }
    }
};
static thread_local gm_sim_frame_owner gm_sim_frames_owner;

/* `bytes` from arena `a`: the rest of its current chunk, else a chunk kept from earlier blocks,
 * else a new one (null only when that cannot be had). */
inline void* gm_sim_arena_alloc(gm_sim_frame_arena& a, unsigned long long bytes) noexcept {
    bytes = (bytes + 15) & ~15ull;
    if ((unsigned long long)(a.end - a.next) >= bytes && a.next != nullptr) {
        void* p = a.next;
        a.next += bytes;
        return p;
    }
    /* The next chunk that fits (kept from earlier blocks), else a new one. */
    while (a.current + 1 < a.count) {
        ++a.current;
        gm_sim_frame_chunk c = a.chunks[a.current];
        if (c.size >= bytes) {
            a.next = c.base + bytes;
            a.end = c.base + c.size;
            return c.base;
        }
    }
    if (a.count == 64) {
        return nullptr;
    }
    gm_sim_frames_owner.armed = true;
    /* Each chunk at least as large as all before it: 64 chunks are never the limit. */
    unsigned long long size = 1ull << 18;
    for (int i = 0; i < a.count; ++i) {
        size += a.chunks[i].size;
    }
    if (size < bytes) {
        size = bytes;
    }
    char* base = static_cast<char*>(std::aligned_alloc(16, size));
    if (base == nullptr) {
        return nullptr;
    }
    a.chunks[a.count] = gm_sim_frame_chunk{base, size};
    a.current = a.count++;
    a.next = base + bytes;
    a.end = base + size;
    return base;
}

/* Everything allocated from `a` is gone: start over at its first chunk. */
inline void gm_sim_arena_reset(gm_sim_frame_arena& a) noexcept {
    a.current = a.count > 0 ? 0 : -1;
    a.next = a.count > 0 ? a.chunks[0].base : nullptr;
    a.end = a.count > 0 ? a.chunks[0].base + a.chunks[0].size : nullptr;
}

/* A thread's kernel frame (one per thread and block). */
inline void* gm_sim_frame_alloc(unsigned long long bytes) noexcept {
    return gm_sim_arena_alloc(gm_sim_frames, bytes);
}

/* Frames of helper functions that wait (gm_sim_sub below): made and destroyed per call, so they
 * are reused, from free lists by size (16-byte steps up to 4 KiB, then powers of two), out of an
 * arena of their own that lives as long as the OS thread. A block whose threads were left
 * suspended (a divergence, a spin that never ended) leaves frames that are never destroyed:
 * then the next block starts the lists and arena over. */
#define GM_SIM_SUB_SMALL 256
#define GM_SIM_SUB_LISTS (GM_SIM_SUB_SMALL + 48)
struct gm_sim_sub_pool {
    void* free[GM_SIM_SUB_LISTS];
    unsigned long long live;
};
static thread_local gm_sim_sub_pool gm_sim_subs;
/* The free list for frames of `bytes`, and the size of its frames. */
inline int gm_sim_sub_list(unsigned long long bytes, unsigned long long* size) noexcept {
    if (bytes <= GM_SIM_SUB_SMALL * 16ull) {
        unsigned long long steps = bytes == 0 ? 1 : (bytes + 15) / 16;
        *size = steps * 16;
        return (int)steps - 1;
    }
    int bits = 64 - __builtin_clzll(bytes - 1); /* 2^bits >= bytes > 4096 */
    *size = 1ull << bits;
    return GM_SIM_SUB_SMALL + (bits - 12);
}
inline void* gm_sim_sub_alloc(unsigned long long bytes) noexcept {
    unsigned long long size = 0;
    int list = gm_sim_sub_list(bytes, &size);
    if (list >= GM_SIM_SUB_LISTS) {
        return nullptr;
    }
    gm_sim_sub_pool& pool = gm_sim_subs;
    void* frame = pool.free[list];
    if (frame != nullptr) {
        pool.free[list] = *static_cast<void**>(frame);
    } else {
        frame = gm_sim_arena_alloc(gm_sim_sub_frames, size);
        if (frame == nullptr) {
            return nullptr;
        }
    }
    ++pool.live;
    return frame;
}
inline void gm_sim_sub_release(void* frame, unsigned long long bytes) noexcept {
    unsigned long long size = 0;
    int list = gm_sim_sub_list(bytes, &size);
    gm_sim_sub_pool& pool = gm_sim_subs;
    *static_cast<void**>(frame) = pool.free[list];
    pool.free[list] = frame;
    --pool.live;
}

/* Every frame of the previous block is gone: its kernel frames always, its helpers' frames
 * unless they were all destroyed (then they are on the free lists, for reuse). */
inline void gm_sim_frames_reset() noexcept {
    gm_sim_arena_reset(gm_sim_frames);
    if (gm_sim_subs.live != 0) {
        gm_sim_subs = gm_sim_sub_pool{};
        gm_sim_arena_reset(gm_sim_sub_frames);
    }
}

struct gm_sim_task {
    struct promise_type {
        /* The barrier it waits at (in the frame, until it is resumed). */
        gm_sim_wait* wait;
        /* Atomics and spin hints so far (see gm_sim_progressing). */
        unsigned int spins = 0;
        /* The innermost helper's frame while the thread waits inside helpers (see gm_sim_sub),
         * else null: what goes on when the thread does. */
        void* leaf = nullptr;
        gm_sim_task get_return_object() noexcept {
            return gm_sim_task{std::coroutine_handle<promise_type>::from_promise(*this)};
        }
        static gm_sim_task get_return_object_on_allocation_failure() noexcept {
            return gm_sim_task{};
        }
        std::suspend_never initial_suspend() noexcept { return {}; }
        /* Kept suspended at the end, so the executor sees it finished; then destroyed. */
        std::suspend_always final_suspend() noexcept { return {}; }
        void return_void() noexcept {}
        void unhandled_exception() noexcept {
            try {
                throw;
            } catch (const gm_sim_trap&) {
                /* A trap: the fault is recorded, the thread ends. */
            } catch (...) {
                gm_sim_rt.fault("a C++ exception escaped the kernel");
            }
        }
        static void* operator new(std::size_t bytes) noexcept { return gm_sim_frame_alloc(bytes); }
        static void operator delete(void*, std::size_t) noexcept {}
    };
    std::coroutine_handle<promise_type> handle;
};
typedef std::coroutine_handle<gm_sim_task::promise_type> gm_sim_handle;

/* ----- helper functions that wait ----- */
/* A __device__ function that (itself, or through another) calls a barrier, collective, atomic
 * or spin hint is rewritten like the kernel: its return type T becomes gm_sim_sub<T>, and each
 * call of it `(co_await f(...))`. Awaited, it runs at once (its caller's frame suspended, the
 * transfer a tail call); where it waits, it leaves the wait in the kernel's promise ("root") and
 * its own frame as the thread's leaf, which is what the executor resumes; when it returns, its
 * caller goes on and is the leaf again (null: the kernel itself). */
struct gm_sim_sub_link {
    gm_sim_task::promise_type* root = nullptr;
    std::coroutine_handle<> caller;
    bool caller_is_sub = false;
};
/* The kernel's promise of the thread a coroutine of it (kernel or helper) belongs to. */
inline gm_sim_task::promise_type& gm_sim_root_of(gm_sim_task::promise_type& p) noexcept {
    return p;
}
inline gm_sim_task::promise_type& gm_sim_root_of(gm_sim_sub_link& p) noexcept { return *p.root; }
/* Suspends the thread at `wait`, in the kernel (h: its frame) or in a helper (h: the leaf). */
template <typename P>
inline void gm_sim_suspend_at(std::coroutine_handle<P> h, gm_sim_wait* wait) noexcept {
    gm_sim_task::promise_type& root = gm_sim_root_of(h.promise());
    root.wait = wait;
    if constexpr (!std::is_same<P, gm_sim_task::promise_type>::value) {
        root.leaf = h.address();
    }
}

/* Thrown where a helper cannot give its caller a value (no memory for its frame; it ended
 * without `return`), after the fault is recorded: the thread ends as after an exception. */
struct gm_sim_no_value {};
template <typename T>
[[noreturn]] inline T gm_sim_no_value_of(const char* why) {
    gm_sim_rt.fault(why);
    throw gm_sim_no_value{};
}

/* What a helper returns, kept in its frame until its caller takes it. */
template <typename T>
struct gm_sim_sub_result {
    alignas(T) unsigned char storage[sizeof(T)];
    bool has = false;
    void return_value(const T& value) {
        ::new (static_cast<void*>(storage)) T(value);
        has = true;
    }
    void return_value(T&& value) {
        ::new (static_cast<void*>(storage)) T(static_cast<T&&>(value));
        has = true;
    }
    T take() {
        if (!has) {
            return gm_sim_no_value_of<T>("a helper function ended without returning a value");
        }
        return static_cast<T&&>(*std::launder(reinterpret_cast<T*>(storage)));
    }
    ~gm_sim_sub_result() {
        if (has) {
            std::launder(reinterpret_cast<T*>(storage))->~T();
        }
    }
};
template <typename T>
struct gm_sim_sub_result<T&> {
    T* value = nullptr;
    void return_value(T& v) noexcept { value = &v; }
    T& take() {
        if (value == nullptr) {
            return gm_sim_no_value_of<T&>("a helper function ended without returning a value");
        }
        return *value;
    }
};
template <>
struct gm_sim_sub_result<void> {
    void return_void() noexcept {}
    void take() noexcept {}
};

template <typename T>
struct gm_sim_sub {
    struct promise_type : gm_sim_sub_link, gm_sim_sub_result<T> {
        /* An exception that left the helper: thrown again in its caller, as by a plain call. */
        std::exception_ptr error;
        gm_sim_sub get_return_object() noexcept {
            return gm_sim_sub{std::coroutine_handle<promise_type>::from_promise(*this)};
        }
        static gm_sim_sub get_return_object_on_allocation_failure() noexcept {
            return gm_sim_sub{nullptr};
        }
        /* It starts when its caller awaits it (then `root` and `caller` are set). */
        std::suspend_always initial_suspend() noexcept { return {}; }
        struct back_to_caller {
            bool await_ready() const noexcept { return false; }
            std::coroutine_handle<> await_suspend(
                std::coroutine_handle<promise_type> h) const noexcept {
                promise_type& p = h.promise();
                p.root->leaf = p.caller_is_sub ? p.caller.address() : nullptr;
                return p.caller;
            }
            void await_resume() const noexcept {}
        };
        back_to_caller final_suspend() noexcept { return {}; }
        void unhandled_exception() noexcept { error = std::current_exception(); }
        static void* operator new(std::size_t bytes) noexcept { return gm_sim_sub_alloc(bytes); }
        static void operator delete(void* frame, std::size_t bytes) noexcept {
            gm_sim_sub_release(frame, bytes);
        }
    };
    std::coroutine_handle<promise_type> handle;
    explicit gm_sim_sub(std::coroutine_handle<promise_type> h) noexcept : handle(h) {}
    gm_sim_sub(gm_sim_sub&& other) noexcept : handle(other.handle) { other.handle = nullptr; }
    gm_sim_sub(const gm_sim_sub&) = delete;
    gm_sim_sub& operator=(const gm_sim_sub&) = delete;
    ~gm_sim_sub() {
        if (handle) {
            if (handle.promise().root == nullptr) {
                /* Made and never awaited: a call the rewrite did not see (a macro pasting the
                 * name together, say); on a stack it would have run. */
                gm_sim_rt.fault("a helper function that waits was called where the simulator "
                                "could not make the call wait; the call did not run");
            }
            handle.destroy();
        }
    }
    /* No frame (no memory for it): nothing to run; the caller gets a fault instead. */
    bool await_ready() const noexcept { return !handle; }
    template <typename P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> caller) noexcept {
        promise_type& p = handle.promise();
        p.root = &gm_sim_root_of(caller.promise());
        p.caller = caller;
        p.caller_is_sub = !std::is_same<P, gm_sim_task::promise_type>::value;
        return handle;
    }
    T await_resume() {
        if (!handle) {
            return gm_sim_no_value_of<T>("no memory for a helper function's frame");
        }
        if (handle.promise().error) {
            std::rethrow_exception(handle.promise().error);
        }
        return handle.promise().take();
    }
};

/* `co_await gm_sim_waiting{...}`: suspends, leaving where it waits in the promise (a pointer:
 * the executor reads the fields one by one, so no wide load waits for narrow stores), and
 * gives the collective's result when the thread goes on. */
/* `co_await GM_SIM_BLOCK_BARRIER(fence)`: a block barrier. Its wait is a constant of the call
 * site (one per fence value, in static storage), so suspending stores one pointer: the wait,
 * left in the promise for the executor. */
struct gm_sim_barrier_waiting {
    const gm_sim_wait* at;
    bool await_ready() const noexcept { return false; }
    template <typename P>
    void await_suspend(std::coroutine_handle<P> h) const noexcept {
        if (at->fence & GM_FENCE_GLOBAL) {
            __threadfence();
        }
        /* The executor writes only into waits of other kinds (results). */
        gm_sim_suspend_at(h, const_cast<gm_sim_wait*>(at));
    }
    void await_resume() const noexcept {}
};
#define GM_SIM_BLOCK_BARRIER(fence)                                                           \
    [](int gm_sim_fence) {                                                                    \
        static const gm_sim_wait gm_sim_sites[4] = {{__FILE__, __LINE__, 0, 0},               \
                                                    {__FILE__, __LINE__, 1, 0},               \
                                                    {__FILE__, __LINE__, 2, 0},               \
                                                    {__FILE__, __LINE__, 3, 0}};              \
        return gm_sim_barrier_waiting{&gm_sim_sites[gm_sim_fence & 3]};                       \
    }(fence)

/* Anything else: warp barriers and collectives, whose result is the await's value. */
struct gm_sim_waiting {
    gm_sim_wait_more at;
    bool await_ready() const noexcept { return false; }
    template <typename P>
    void await_suspend(std::coroutine_handle<P> h) noexcept {
        gm_sim_suspend_at(h, &at.head);
    }
    unsigned long long await_resume() const noexcept { return at.result; }
};
inline gm_sim_waiting gm_sim_await_collective(int op, int scope, unsigned long long mask,
                                              unsigned long long value, long long arg, int width,
                                              const char* file, int line) {
    return gm_sim_waiting{gm_sim_wait_more{gm_sim_wait{file, line, GM_FENCE_LOCAL, scope << 4 | op},
                                           mask, value, arg, width, 0}};
}
inline gm_sim_waiting gm_sim_await_warp(unsigned long long mask = ~0ull,
                                        const char* file = __builtin_FILE(),
                                        int line = __builtin_LINE()) {
    return gm_sim_await_collective(0, GM_SIM_SCOPE_WARP, mask, 0, 0, 0, file, line);
}
/* syncthreads_count & co: the count or truth value over the block. */
inline gm_sim_waiting gm_sim_await_vote_block(int op, int predicate,
                                              const char* file = __builtin_FILE(),
                                              int line = __builtin_LINE()) {
    return gm_sim_await_collective(op, GM_SIM_SCOPE_BLOCK, ~0ull, predicate != 0, 0, 0, file,
                                   line);
}
/* __ballot_sync, __all_sync, __any_sync. */
inline gm_sim_waiting gm_sim_await_vote_warp(int op, unsigned long long mask, int predicate,
                                             const char* file = __builtin_FILE(),
                                             int line = __builtin_LINE()) {
    return gm_sim_await_collective(op, GM_SIM_SCOPE_WARP, mask, predicate != 0, 0, 0, file,
                                   line);
}

/* A shuffle: the same wait, and the result read back as the operand's type. */
template <typename T>
struct gm_sim_shuffling {
    gm_sim_waiting waiting;
    bool await_ready() const noexcept { return false; }
    template <typename P>
    void await_suspend(std::coroutine_handle<P> h) noexcept {
        waiting.await_suspend(h);
    }
    T await_resume() const noexcept { return gm_sim_from_bits<T>(waiting.at.result); }
};
template <typename T>
inline gm_sim_shuffling<T> gm_sim_await_shfl(int op, unsigned long long mask, T var,
                                             long long arg, int width = warpSize,
                                             const char* file = __builtin_FILE(),
                                             int line = __builtin_LINE()) {
    return gm_sim_shuffling<T>{gm_sim_await_collective(op, GM_SIM_SCOPE_WARP, mask,
                                                       gm_sim_bits(var), arg, width, file, line)};
}
/* __reduce_*_sync: the kind (GM_SIM_REDUCE_*) as the value's type makes it (min and max
 * unsigned for an unsigned value), the result read back as that type. */
template <typename T>
inline gm_sim_shuffling<T> gm_sim_await_reduce(int kind, unsigned int mask, T value,
                                               const char* file = __builtin_FILE(),
                                               int line = __builtin_LINE()) {
    static_assert(sizeof(T) == 4, "__reduce_*_sync takes 32-bit values");
    const bool unsigned_order =
        (T)-1 > (T)0 && (kind == GM_SIM_REDUCE_MIN || kind == GM_SIM_REDUCE_MAX);
    return gm_sim_shuffling<T>{gm_sim_await_collective(GM_SIM_OP_REDUCE, GM_SIM_SCOPE_WARP, mask,
                                                       (unsigned int)value,
                                                       kind + (unsigned_order ? 1 : 0), 0, file,
                                                       line)};
}
/* A tile's reduce (__gm_tile_reduce_sync). */
template <typename T>
inline gm_sim_shuffling<T> gm_sim_await_tile_reduce(int op, unsigned long long mask, T value,
                                                   int width,
                                                   const char* file = __builtin_FILE(),
                                                   int line = __builtin_LINE()) {
    return gm_sim_shuffling<T>{gm_sim_await_collective(
        GM_SIM_OP_REDUCE, GM_SIM_SCOPE_WARP, mask, gm_sim_bits(value),
        GM_SIM_REDUCE_TILE + 4 * op + gm_sim_tile_reduce_type<T>(), width, file, line)};
}

/* `co_await gm_sim_progressing(call, arguments...)`, for each atomic and spin hint the kernel
 * calls: the arguments are evaluated first, then every GM_SIM_PROGRESS_EVERY-th such call of a
 * thread lets the others run (as a thread on a fiber does inside the function, after its
 * arguments): it suspends at the yield site, which the executor reads as ready to go on in the
 * next round; any other time it does not suspend. Then the call is made, and its value is the
 * await's. */
static const gm_sim_wait gm_sim_yield_site = {"", 0, GM_FENCE_LOCAL, GM_SIM_KIND_YIELD};
/* `co_await gm_sim_progress_point()`: the same without a call, before each call of a helper
 * that waits only at atomics and spin hints, a bounded number of them (`(co_await
 * gm_sim_progress_point(), helper(...))`): the helper runs as a plain function, and its calls
 * are where a thread that spins by calling it lets the others run. */
struct gm_sim_progress_point {
    bool await_ready() const noexcept { return false; }
    template <typename P>
    bool await_suspend(std::coroutine_handle<P> h) const noexcept {
        if (++gm_sim_root_of(h.promise()).spins % GM_SIM_PROGRESS_EVERY != 0) {
            return false;
        }
        gm_sim_suspend_at(h, const_cast<gm_sim_wait*>(&gm_sim_yield_site));
        return true;
    }
    void await_resume() const noexcept {}
};
template <typename F, typename... A>
struct gm_sim_progress_call : gm_sim_progress_point {
    F call;
    std::tuple<A...> arguments;
    decltype(auto) await_resume() { return std::apply(call, arguments); }
};
template <typename F, typename... A>
inline gm_sim_progress_call<F, A...> gm_sim_progressing(F call, A... arguments) {
    return gm_sim_progress_call<F, A...>{{}, call, std::tuple<A...>(arguments...)};
}

/* Whether an ended thread's frame holds nothing to destroy: its locals are gone by then, and the
 * promise is trivial, so only the parameters' copies might have destructors. The memory goes
 * back with the block's arena. */
template <typename... P>
constexpr bool gm_sim_trivial_frame(gm_sim_task (*)(P...)) {
    return (std::is_trivially_destructible<
                typename std::remove_cv<typename std::remove_reference<P>::type>::type>::value &&
            ... && true);
}

/* 0: the thread waits (`*wait` says where, `*frame` is its frame); 1: it ended; 2: no frame. */
template <bool Trivial>
inline int gm_sim_settle(gm_sim_handle h, void** frame, gm_sim_wait** wait) noexcept {
    if (h.done()) {
        if (!Trivial) {
            h.destroy();
        }
        return 1;
    }
    *frame = h.address();
    *wait = h.promise().wait;
    return 0;
}

template <typename... P>
int gm_sim_start_entry(gm_sim_task (*entry)(P...), void* const* args, void** frame,
                       gm_sim_wait** wait) {
    try {
        gm_sim_task task =
            gm_sim_call(entry, args, std::make_integer_sequence<unsigned long, sizeof...(P)>());
        if (!task.handle) {
            gm_sim_rt.fault("no memory for the thread's frame");
            return 2;
        }
        return gm_sim_settle<gm_sim_trivial_frame(static_cast<gm_sim_task (*)(P...)>(nullptr))>(
            task.handle, frame, wait);
    } catch (const gm_sim_trap&) {
        return 2;
    } catch (...) {
        gm_sim_rt.fault("a C++ exception escaped the kernel");
        return 2;
    }
}

template <bool Trivial>
inline int gm_sim_resume_frame(void* frame, gm_sim_wait** wait) noexcept {
    gm_sim_handle h = gm_sim_handle::from_address(frame);
    void* leaf = h.promise().leaf;
    if (leaf != nullptr) {
        std::coroutine_handle<>::from_address(leaf).resume();
    } else {
        h.resume();
    }
    return gm_sim_settle<Trivial>(h, &frame, wait);
}

/* One round of a block's threads (C layout shared with the simulator): every thread that waits
 * (or, in the first round, every thread) runs until it waits again or ends. The loop runs here,
 * in the program, so that resuming a thread is a direct call; the simulator decides what a
 * round's outcome means (release, end, divergence). */
struct gm_sim_round {
    gm_sim_thread* thread;      /* what threadIdx & co read: set to each thread before it runs */
    void* const* args;          /* the launch's argument buffers (first round) */
    void** frames;              /* per thread: its frame while it waits, else null */
    gm_sim_wait** waits;  /* per thread: where it waits */
    unsigned int count;         /* threads in the block */
    unsigned int dim_x, dim_y;  /* the block's extent in x and y */
    unsigned int warp_size;
    /* The round's outcome. */
    unsigned int waiting;       /* threads now waiting */
    int fence;                  /* the fences of the barriers they wait at, or'ed */
    int one_site;               /* whether all wait where the first one does (same literal) */
    int plain;                  /* whether the first one waits at a block barrier */
    const unsigned char* ready; /* null: every waiting thread goes on; else those marked 1 */
    unsigned int yielded;       /* of the waiting ones, threads that only let the others run */
    unsigned int ended;         /* threads that ended in this round */
    /* Releases the lanes `here` of a warp (bit k: the warp's lane k, whose wait is `waits[k]`;
     * `lanes` the warp's lanes), which wait at one warp barrier or collective, writing their
     * results into their waits as the simulator's scheduler would: nonzero when they may go on
     * now (every lane the first one's mask names is among them). The program calls it to run a
     * warp on within the round. */
    int (*release_warp)(const void* block, gm_sim_wait* const* waits, unsigned int lanes,
                        unsigned long long here);
    const void* block;          /* release_warp's first argument */
};

/* How often one round keeps a warp going past its warp barriers and collectives before the
 * round goes on to the next warp: a warp spinning on a shuffle until another warp of its block
 * sets a flag still lets that warp run. */
#define GM_SIM_WARP_RELEASES 64

/* Whether two waits are at one call site and of one kind. */
inline bool gm_sim_same_site(const gm_sim_wait* a, const gm_sim_wait* b) noexcept {
    return a == b || (a->line == b->line && a->kind == b->kind && a->file == b->file);
}

/* The lanes of a warp (`lanes` frames and waits) that wait where its first lane waiting at a
 * warp barrier or collective does (one call site and kind), as bits; 0 if none waits at one. */
inline unsigned long long gm_sim_warp_group(void* const* frames, gm_sim_wait* const* waits,
                                            unsigned int lanes) noexcept {
    const gm_sim_wait* first = nullptr;
    unsigned long long here = 0;
    for (unsigned int k = 0; k < lanes; ++k) {
        if (frames[k] == nullptr) {
            continue;
        }
        const gm_sim_wait* const w = waits[k];
        if (first == nullptr) {
            if (w->kind == GM_SIM_KIND_YIELD || (w->kind >> 4) != GM_SIM_SCOPE_WARP) {
                continue;
            }
            first = w;
            here = 1ull << k;
        } else if (gm_sim_same_site(w, first)) {
            here |= 1ull << k;
        }
    }
    return here;
}

/* A round's outcome so far, as gm_sim_round reports it. */
struct gm_sim_tally {
    unsigned int waiting = 0, yielded = 0, ended = 0;
    int fence = 0, one_site = 1;
    gm_sim_wait* first = nullptr;
};
__attribute__((always_inline)) inline void gm_sim_count_wait(gm_sim_tally& t,
                                                            gm_sim_wait* wait) noexcept {
    ++t.waiting;
    t.yielded += wait->kind == GM_SIM_KIND_YIELD;
    t.fence |= wait->fence;
    if (t.first == nullptr) {
        t.first = wait;
    } else if (!gm_sim_same_site(wait, t.first)) {
        t.one_site = 0;
    }
}

/* After a round in which a thread waited at a warp barrier or collective: in each warp all of
 * whose lanes ran in the round (`ready`: null when every waiting thread ran, else the threads
 * that did), the lanes at one such wait are released (`r->release_warp`) and run on, up to
 * GM_SIM_WARP_RELEASES times. Returns the round's tally made again from the waits as they
 * are (`ended`: threads that ended in the round before). Out of line, and the tally passed by
 * value: the round's loop keeps it in registers. */
template <bool Trivial>
__attribute__((noinline)) gm_sim_tally gm_sim_run_warps_on(gm_sim_round* r,
                                                          const unsigned char* ready,
                                                          unsigned int ended) {
    void** const frames = r->frames;
    gm_sim_wait** const waits = r->waits;
    gm_sim_thread* const thread = r->thread;
    const unsigned int count = r->count, warp = r->warp_size;
    gm_uint3 index = {0, 0, 0};
    for (unsigned int base = 0; base < count; base += warp) {
        const unsigned int lanes = count - base < warp ? count - base : warp;
        const gm_uint3 first = index;
        for (unsigned int k = 0; k < lanes; ++k) {
            gm_sim_next_thread(index, r->dim_x, r->dim_y);
        }
        bool all_ran = true;
        for (unsigned int k = 0; ready != nullptr && k < lanes; ++k) {
            all_ran = all_ran && ready[base + k] != 0;
        }
        for (int pass = 0; all_ran && pass < GM_SIM_WARP_RELEASES; ++pass) {
            const unsigned long long here = gm_sim_warp_group(frames + base, waits + base, lanes);
            if (here == 0 || r->release_warp(r->block, waits + base, lanes, here) == 0) {
                break;
            }
            gm_uint3 at = first;
            for (unsigned int k = 0; k < lanes; ++k) {
                if (((here >> k) & 1) != 0) {
                    thread->thread_idx = at;
                    gm_sim_wait* wait = nullptr;
                    if (gm_sim_resume_frame<Trivial>(frames[base + k], &wait) == 0) {
                        waits[base + k] = wait;
                    } else {
                        frames[base + k] = nullptr;
                        ++ended;
                    }
                }
                gm_sim_next_thread(at, r->dim_x, r->dim_y);
            }
        }
    }
    gm_sim_tally t;
    t.ended = ended;
    for (unsigned int i = 0; i < count; ++i) {
        if (frames[i] != nullptr && (ready == nullptr || ready[i] != 0)) {
            gm_sim_count_wait(t, waits[i]);
        }
    }
    return t;
}

/* One round; `Some`: only the threads `r->ready` marks (otherwise every waiting thread). When a
 * thread waits at a warp barrier or collective after it, warps run on (gm_sim_run_warps_on), so
 * that a shuffle costs its lanes a resume, not a round of the whole block. */
template <bool Start, bool Some, typename... P>
void gm_sim_run_round_of(gm_sim_task (*entry)(P...), gm_sim_round* r) {
    constexpr bool trivial = gm_sim_trivial_frame(static_cast<gm_sim_task (*)(P...)>(nullptr));
    /* Copied out: locals can stay in registers across the calls into the threads, `*r` not. */
    gm_sim_thread* const thread = r->thread;
    void* const* const args = r->args;
    void** const frames = r->frames;
    gm_sim_wait** const waits = r->waits;
    const unsigned char* const ready = r->ready;
    const unsigned int count = r->count, dim_x = r->dim_x, dim_y = r->dim_y;
    gm_uint3 index = {0, 0, 0};
    gm_sim_tally t;
    bool at_warp_scope = false;
    for (unsigned int i = 0; i < count; ++i) {
        void* frame = Start ? nullptr : frames[i];
        if (Start || (frame != nullptr && (!Some || ready[i] != 0))) {
            thread->thread_idx = index;
            gm_sim_wait* wait = nullptr;
            int status;
            if constexpr (Start) {
                status = gm_sim_start_entry(entry, args, &frame, &wait);
            } else {
                status = gm_sim_resume_frame<trivial>(frame, &wait);
            }
            if (status == 0) {
                if (Start) {
                    frames[i] = frame; /* a resumed thread keeps its frame */
                }
                waits[i] = wait;
                at_warp_scope |= (wait->kind >> 4) == GM_SIM_SCOPE_WARP;
                gm_sim_count_wait(t, wait);
            } else {
                frames[i] = nullptr;
                ++t.ended;
            }
        }
        gm_sim_next_thread(index, dim_x, dim_y);
    }
    if (__builtin_expect(at_warp_scope, 0) && r->release_warp != nullptr &&
        r->warp_size != 0 && r->warp_size <= 64) {
        t = gm_sim_run_warps_on<trivial>(r, Some ? ready : nullptr, t.ended);
    }
    r->waiting = t.waiting;
    r->fence = t.fence;
    r->one_site = t.one_site;
    r->plain = t.first == nullptr || t.first->kind == GM_SIM_SCOPE_BLOCK << 4;
    r->yielded = t.yielded;
    r->ended = t.ended;
}

template <bool Start, typename... P>
void gm_sim_run_round(gm_sim_task (*entry)(P...), gm_sim_round* r) {
    if (!Start && r->ready != nullptr) {
        gm_sim_run_round_of<Start, true>(entry, r);
    } else {
        gm_sim_run_round_of<Start, false>(entry, r);
    }
}

/* Cooperative groups, before the names below suspend: a stackless kernel's block groups have
 * their syncs written as block barriers (the simulator lowers them), and the rest of the header
 * (member functions that wait) is never called from a coroutine. The kernel's own include of it
 * is then a second one, which does nothing. */
#include <cooperative_groups.h>

/* Every function above is defined: from here on the barrier names suspend the coroutine. */
#define __syncthreads() co_await GM_SIM_BLOCK_BARRIER(GM_FENCE_LOCAL)
#define syncthreads() co_await GM_SIM_BLOCK_BARRIER(GM_FENCE_LOCAL)
#define barrier(fence) co_await GM_SIM_BLOCK_BARRIER(fence)
#define __syncwarp(...) co_await gm_sim_await_warp(__VA_ARGS__)
#define wavebarrier() co_await gm_sim_await_warp()
#define __syncthreads_count(p) ((int)co_await gm_sim_await_vote_block(GM_SIM_OP_SYNC_COUNT, (p)))
#define __syncthreads_and(p) ((int)co_await gm_sim_await_vote_block(GM_SIM_OP_SYNC_AND, (p)))
#define __syncthreads_or(p) ((int)co_await gm_sim_await_vote_block(GM_SIM_OP_SYNC_OR, (p)))
#define syncthreads_count(p) __syncthreads_count(p)
#define syncthreads_and(p) __syncthreads_and(p)
#define syncthreads_or(p) __syncthreads_or(p)
#define __ballot_sync(m, p) (co_await gm_sim_await_vote_warp(GM_SIM_OP_BALLOT, (m), (p)))
#define __all_sync(m, p) ((int)co_await gm_sim_await_vote_warp(GM_SIM_OP_ALL, (m), (p)))
#define __any_sync(m, p) ((int)co_await gm_sim_await_vote_warp(GM_SIM_OP_ANY, (m), (p)))
#define __reduce_add_sync(m, v) (co_await gm_sim_await_reduce(GM_SIM_REDUCE_ADD, (m), (v)))
#define __reduce_min_sync(m, v) (co_await gm_sim_await_reduce(GM_SIM_REDUCE_MIN, (m), (v)))
#define __reduce_max_sync(m, v) (co_await gm_sim_await_reduce(GM_SIM_REDUCE_MAX, (m), (v)))
#define __reduce_and_sync(m, v) (co_await gm_sim_await_reduce(GM_SIM_REDUCE_AND, (m), (v)))
#define __reduce_or_sync(m, v) (co_await gm_sim_await_reduce(GM_SIM_REDUCE_OR, (m), (v)))
#define __reduce_xor_sync(m, v) (co_await gm_sim_await_reduce(GM_SIM_REDUCE_XOR, (m), (v)))
#define __gm_tile_reduce_sync(op, m, v, w)                                                     \
    (co_await gm_sim_await_tile_reduce((op), (m), (v), (w)))
#define __shfl_sync(...) (co_await gm_sim_await_shfl(GM_SIM_OP_SHFL, __VA_ARGS__))
#define __shfl_up_sync(...) (co_await gm_sim_await_shfl(GM_SIM_OP_SHFL_UP, __VA_ARGS__))
#define __shfl_down_sync(...) (co_await gm_sim_await_shfl(GM_SIM_OP_SHFL_DOWN, __VA_ARGS__))
#define __shfl_xor_sync(...) (co_await gm_sim_await_shfl(GM_SIM_OP_SHFL_XOR, __VA_ARGS__))
/* The call itself goes through the parenthesised name, which is not expanded again, with the
 * arguments as evaluated (the same overload as a direct call: the same argument types). */
#define GM_SIM_PROGRESSING(name, ...)                                                         \
    (co_await gm_sim_progressing([](auto... a) -> decltype(auto) { return (name)(a...); },   \
                                 __VA_ARGS__))
#define atomicAdd(...) GM_SIM_PROGRESSING(atomicAdd, __VA_ARGS__)
#define atomicSub(...) GM_SIM_PROGRESSING(atomicSub, __VA_ARGS__)
#define atomicExch(...) GM_SIM_PROGRESSING(atomicExch, __VA_ARGS__)
#define atomicMin(...) GM_SIM_PROGRESSING(atomicMin, __VA_ARGS__)
#define atomicMax(...) GM_SIM_PROGRESSING(atomicMax, __VA_ARGS__)
#define atomicInc(...) GM_SIM_PROGRESSING(atomicInc, __VA_ARGS__)
#define atomicDec(...) GM_SIM_PROGRESSING(atomicDec, __VA_ARGS__)
#define atomicCAS(...) GM_SIM_PROGRESSING(atomicCAS, __VA_ARGS__)
#define atomicAnd(...) GM_SIM_PROGRESSING(atomicAnd, __VA_ARGS__)
#define atomicOr(...) GM_SIM_PROGRESSING(atomicOr, __VA_ARGS__)
#define atomicXor(...) GM_SIM_PROGRESSING(atomicXor, __VA_ARGS__)
#define __nanosleep(...) GM_SIM_PROGRESSING(__nanosleep, __VA_ARGS__)
#endif /* GM_SIM_STACKLESS */

#if defined(GM_SIM_REGIONS)
/* Cooperative groups first (their block groups' syncs are lowered to block barriers in a kernel
 * run as regions; the header's own functions call the runtime). */
#include <cooperative_groups.h>
/* Every block barrier of a kernel run as regions was rewritten into the region structure; one
 * left (in a helper, a macro) fails to compile, and the kernel is built another way. */
#define __syncthreads() gm_sim_barrier_outside_a_region()
#define syncthreads() gm_sim_barrier_outside_a_region()
#define barrier(fence) gm_sim_barrier_outside_a_region()
#endif /* GM_SIM_REGIONS */

#endif /* GM_HOST */

#endif /* GPU_MEM_H */
