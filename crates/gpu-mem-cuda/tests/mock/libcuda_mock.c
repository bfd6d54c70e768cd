/*
 * A stand-in for libcuda.so.1 used by the tests on machines without a GPU.
 *
 * It is NOT a GPU and proves nothing about real hardware. It implements the driver calls the
 * backend binds with host memory, and is strict where the real driver's contract is strict, so
 * the tests can check the backend's side of that contract:
 *   - calls that need a context fail with CUDA_ERROR_INVALID_CONTEXT unless one is current on
 *     the calling thread (contexts are per thread, as in CUDA);
 *   - device pointers must lie inside a live allocation (or mapped host memory);
 *   - memory from cuMemAlloc must be freed by cuMemFree and memory from cuMemAllocAsync by
 *     cuMemFreeAsync;
 *   - registering a range twice, or memory from cuMemHostAlloc (page-locked already), gives
 *     712, unregistering an unknown base gives 713, and cuMemHostGetDevicePointer needs memory
 *     allocated / registered with DEVICEMAP;
 *   - cuEventElapsedTime fails with CUDA_ERROR_INVALID_HANDLE for untimed or unrecorded events;
 *   - cuLaunchKernel checks the launch shape against the device limits it reports;
 *     cuLaunchCooperativeKernel also that the grid fits 132 resident blocks.
 * Flags passed in are recorded for inspection through the mock_* functions. Launches run
 * nothing: the mock records their shape, stream and parameter bytes (the test says how many
 * bytes each parameter has, as the real driver knows from the compiled function), and numbers
 * every launch and stream synchronisation so the order can be checked.
 *
 * -DMOCK_OLD_DRIVER builds a driver from before CUDA 11: no stream-ordered allocator or pools,
 * only the 7.0 export of cuDevicePrimaryCtxRelease and the 4.1 export of cuIpcOpenMemHandle.
 * -DMOCK_NO_PEER builds one without peer access, peer copies and managed memory.
 *
 * Peer access, managed memory, the default pool and IPC (issue 14) are strict too:
 *   - cuCtxEnablePeerAccess needs the peer's retained primary context and flags 0, says
 *     PEER_ACCESS_ALREADY_ENABLED the second time; cuMemcpyPeer(Async) checks each range
 *     against its own context's device and the stream against the destination device;
 *   - cuMemAllocManaged records its flags; managed memory is reachable from every device and
 *     freed by cuMemFree; cuMemPrefetchAsync_v2 / cuMemAdvise_v2 (not in the old driver) need a
 *     range inside one managed allocation and a valid location, the prefetch a stream of the
 *     current device, and both refuse a device without CONCURRENT_MANAGED_ACCESS where the
 *     driver does; they record what they were given;
 *   - cuMemAllocAsync / cuMemFreeAsync need a stream of the current device; the default pool
 *     keeps freed bytes up to its release threshold at each synchronisation;
 *   - cuIpcOpenMemHandle insists on CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS and refuses handles of
 *     its own process (CUDA_ERROR_INVALID_CONTEXT, as CUDA does); mock_ipc_as_foreign() makes a
 *     handle look foreign. The "mapping" is a snapshot copy of the exporter's bytes at open time,
 *     not shared memory.
 */
#define _GNU_SOURCE /* memmem */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;
typedef void *CUstream;
typedef void *CUevent;

#define OK 0
#define E_INVALID_VALUE 1
#define E_OUT_OF_MEMORY 2
#define E_NOT_INITIALIZED 3
#define E_INVALID_DEVICE 101
#define E_INVALID_IMAGE 200
#define E_NOT_FOUND 500
#define E_INVALID_CONTEXT 201
#define E_INVALID_HANDLE 400
#define E_NOT_READY 600
#define E_ALREADY_REGISTERED 712
#define E_NOT_REGISTERED 713
#define E_NOT_SUPPORTED 801
#define E_ILLEGAL_ADDRESS 700
#define E_CONTEXT_IS_DESTROYED 709
#define E_PEER_ACCESS_UNSUPPORTED 217
#define E_PEER_ALREADY_ENABLED 704
#define E_LAUNCH_OUT_OF_RESOURCES 701

#define DEVICES 2
#define TOTAL_MEMORY (1ull << 30)
#define MAX_ITEMS 4096

enum kind { FREE_SLOT = 0, DEVICE_PLAIN, DEVICE_ASYNC, HOST_ALLOC, HOST_REGISTERED, MANAGED, IPC_MAPPED };

struct item {
    enum kind kind;
    char *base;
    size_t bytes;
    unsigned flags;
    int device;
    /* IPC mappings: the exporter's allocation and process, and how many opens are not closed
     * (CUDA returns the existing mapping, counted, when a context opens a handle again). */
    unsigned long long ipc_source;
    int ipc_pid;
    int ipc_opens;
};

struct stream { int magic; unsigned flags; int device; };
struct event { int magic; unsigned flags; int recorded; double when_ms; };
#define STREAM_MAGIC 0x5157
#define EVENT_MAGIC 0xE7E7

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int initialized;
static int pools_supported = 1;
static struct item items[MAX_ITEMS];
static unsigned long long used[DEVICES];
static int primary_refs[DEVICES];
static char contexts[DEVICES];
static __thread CUcontext current;
/* A device fault that destroyed the device's context: every later call with that context
 * current returns it, as the real driver's "sticky" errors do, until cuDevicePrimaryCtxReset. */
static CUresult sticky[DEVICES];
static int resets[DEVICES];
static int host_register_supported = 1;
static int managed_supported = 1;
static int peer_possible = 1;
static char peer_enabled[DEVICES][DEVICES];
static unsigned last_managed_flags = 0xFFFFFFFFu;
/* CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS of every device. */
static int concurrent_managed = 1;
/* The managed-memory hints that reached the driver: how many, and the last of each kind. */
struct hint { unsigned long long ptr; size_t bytes; int device; int type; int id; int advice; };
static int prefetches, advices;
static struct hint last_prefetch, last_advice;
static CUstream last_prefetch_stream = (CUstream)(uintptr_t)-1;
static unsigned last_ipc_open_flags = 0xFFFFFFFFu;
static int peer_copies, peer_async_copies, ctx_syncs;
static size_t last_peer_bytes;
static CUstream last_peer_stream = (CUstream)(uintptr_t)-1;
/* The default pool of each device: freed stream-ordered bytes kept, and the threshold. */
struct pool { int magic; int device; unsigned long long threshold; unsigned long long cached; };
#define POOL_MAGIC 0x9001
static struct pool pools[DEVICES] = {{POOL_MAGIC, 0, 0, 0}, {POOL_MAGIC, 1, 0, 0}};
static size_t last_trim = (size_t)-1;

static unsigned last_stream_flags = 0xFFFFFFFFu;
static unsigned last_event_flags = 0xFFFFFFFFu;
static unsigned last_host_alloc_flags = 0xFFFFFFFFu;
static unsigned last_register_flags = 0xFFFFFFFFu;
static int calls_plain_free, calls_async_free;

/* ----- introspection for the tests ---------------------------------------------------- */

void mock_set_pools_supported(int on) { pools_supported = on; }
void mock_set_host_register_supported(int on) { host_register_supported = on; }
int mock_resets(int device) { return resets[device]; }
unsigned mock_last_stream_flags(void) { return last_stream_flags; }
unsigned mock_last_event_flags(void) { return last_event_flags; }
unsigned mock_last_host_alloc_flags(void) { return last_host_alloc_flags; }
unsigned mock_last_register_flags(void) { return last_register_flags; }
int mock_primary_refs(int device) { return primary_refs[device]; }
int mock_plain_frees(void) { return calls_plain_free; }
int mock_async_frees(void) { return calls_async_free; }
void mock_set_managed_supported(int on) { managed_supported = on; }
void mock_set_peer_possible(int on) { peer_possible = on; }
int mock_peer_enabled(int device, int peer) { return peer_enabled[device][peer]; }
unsigned mock_last_managed_flags(void) { return last_managed_flags; }
unsigned mock_last_ipc_open_flags(void) { return last_ipc_open_flags; }
int mock_peer_copies(void) { return peer_copies; }
int mock_peer_async_copies(void) { return peer_async_copies; }
int mock_ctx_syncs(void) { return ctx_syncs; }
unsigned long long mock_last_peer_bytes(void) { return last_peer_bytes; }
unsigned long long mock_last_peer_stream(void) { return (unsigned long long)(uintptr_t)last_peer_stream; }
unsigned long long mock_pool_threshold(int device) { return pools[device].threshold; }
unsigned long long mock_last_trim(void) { return last_trim; }
void mock_set_concurrent_managed(int on) { concurrent_managed = on; }
int mock_prefetches(void) { return prefetches; }
int mock_advices(void) { return advices; }
/* The last prefetch (which = 0) or advice (which = 1): {ptr, bytes, device (current context),
 * location type, location id, advice}, and the prefetch's stream. */
void mock_last_hint(int which, unsigned long long out[6]) {
    struct hint h = which ? last_advice : last_prefetch;
    out[0] = h.ptr; out[1] = h.bytes; out[2] = (unsigned long long)h.device;
    out[3] = (unsigned long long)h.type; out[4] = (unsigned long long)h.id;
    out[5] = (unsigned long long)h.advice;
}
unsigned long long mock_last_prefetch_stream(void) { return (unsigned long long)(uintptr_t)last_prefetch_stream; }

static int current_device(void) {
    if (!current) return -1;
    return (int)((char *)current - contexts);
}

/* 1 = plain device, 2 = stream-ordered device, 0 = unknown */
int mock_allocation_kind(CUdeviceptr p) {
    int k = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_ITEMS; ++i) {
        if ((items[i].kind == DEVICE_PLAIN || items[i].kind == DEVICE_ASYNC) &&
            items[i].base == (char *)(uintptr_t)p) {
            k = items[i].kind == DEVICE_PLAIN ? 1 : 2;
        }
    }
    pthread_mutex_unlock(&lock);
    return k;
}

int mock_live_device_allocations(void) {
    int n = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_ITEMS; ++i)
        if (items[i].kind == DEVICE_PLAIN || items[i].kind == DEVICE_ASYNC) ++n;
    pthread_mutex_unlock(&lock);
    return n;
}

/* ----- helpers ------------------------------------------------------------------------- */

#define NEED_INIT() do { if (!initialized) return E_NOT_INITIALIZED; } while (0)
#define NEED_CONTEXT() do { NEED_INIT(); if (!current) return E_INVALID_CONTEXT; \
    if (sticky[current_device()]) return sticky[current_device()]; } while (0)

static int is_sticky(CUresult r) { return r == 214 || r == 700 || r == 702 || r == 710 || (r >= 714 && r <= 719); }

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static struct item *add_item(enum kind kind, char *base, size_t bytes, unsigned flags) {
    for (int i = 0; i < MAX_ITEMS; ++i) {
        if (items[i].kind == FREE_SLOT) {
            items[i] = (struct item){kind, base, bytes, flags, current_device()};
            return &items[i];
        }
    }
    return NULL;
}

static struct item *find_base(enum kind kind, const void *base) {
    for (int i = 0; i < MAX_ITEMS; ++i)
        if (items[i].kind == kind && items[i].base == (const char *)base) return &items[i];
    return NULL;
}

/* Is [p, p+n) inside device memory of the current device, or mapped host memory? */
static int device_range_ok(CUdeviceptr p, size_t n) {
    const char *a = (const char *)(uintptr_t)p;
    int ok = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_ITEMS && !ok; ++i) {
        struct item *it = &items[i];
        int device_mem = ((it->kind == DEVICE_PLAIN || it->kind == DEVICE_ASYNC ||
                           it->kind == IPC_MAPPED) && it->device == current_device()) ||
                         it->kind == MANAGED;
        int mapped = (it->kind == HOST_ALLOC || it->kind == HOST_REGISTERED) && (it->flags & 2);
        if ((device_mem || mapped) && a >= it->base && a + n <= it->base + it->bytes) ok = 1;
    }
    pthread_mutex_unlock(&lock);
    return ok;
}

static int stream_ok(CUstream s) {
    return s == NULL || ((struct stream *)s)->magic == STREAM_MAGIC;
}

/* A live stream of `device` (or the legacy stream, which belongs to the current context). */
static int stream_of(CUstream s, int device) {
    if (!stream_ok(s)) return 0;
    return s == NULL ? current_device() == device : ((struct stream *)s)->device == device;
}

/* Is [p, p+n) inside device memory of `device` (or managed memory)? */
__attribute__((unused)) static int range_on(int device, CUdeviceptr p, size_t n) {
    const char *a = (const char *)(uintptr_t)p;
    int ok = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_ITEMS && !ok; ++i) {
        struct item *it = &items[i];
        int mem = ((it->kind == DEVICE_PLAIN || it->kind == DEVICE_ASYNC || it->kind == IPC_MAPPED) &&
                   it->device == device) || it->kind == MANAGED;
        if (mem && a >= it->base && a + n <= it->base + it->bytes) ok = 1;
    }
    pthread_mutex_unlock(&lock);
    return ok;
}

/* The device of a retained primary context, or -1. */
__attribute__((unused)) static int context_device(CUcontext ctx) {
    if (ctx < (CUcontext)contexts || ctx >= (CUcontext)(contexts + DEVICES)) return -1;
    int d = (int)((char *)ctx - contexts);
    return primary_refs[d] > 0 ? d : -1;
}

/* ----- errors and initialisation ------------------------------------------------------- */

static const char *names[][2] = {
    {"CUDA_SUCCESS", "no error"},
    {"CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {"CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {"CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
};

static CUresult describe(CUresult error, const char **out, int which) {
    if (!out) return E_INVALID_VALUE;
    if (error >= 0 && error <= 3) { *out = names[error][which]; return OK; }
    switch (error) {
        case E_INVALID_IMAGE: *out = which ? "device kernel image is invalid" : "CUDA_ERROR_INVALID_IMAGE"; return OK;
        case E_NOT_FOUND: *out = which ? "named symbol not found" : "CUDA_ERROR_NOT_FOUND"; return OK;
        case E_INVALID_CONTEXT: *out = which ? "invalid device context" : "CUDA_ERROR_INVALID_CONTEXT"; return OK;
        case E_INVALID_HANDLE: *out = which ? "invalid resource handle" : "CUDA_ERROR_INVALID_HANDLE"; return OK;
        case E_NOT_READY: *out = which ? "device not ready" : "CUDA_ERROR_NOT_READY"; return OK;
        case E_ALREADY_REGISTERED: *out = which ? "part or all of the requested memory range is already mapped" : "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"; return OK;
        case E_NOT_REGISTERED: *out = which ? "pointer does not correspond to a registered memory region" : "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED"; return OK;
        case E_NOT_SUPPORTED: *out = which ? "operation not supported" : "CUDA_ERROR_NOT_SUPPORTED"; return OK;
        case 218: *out = which ? "a PTX JIT compilation failed" : "CUDA_ERROR_INVALID_PTX"; return OK;
        case E_ILLEGAL_ADDRESS: *out = which ? "an illegal memory access was encountered" : "CUDA_ERROR_ILLEGAL_ADDRESS"; return OK;
        case E_CONTEXT_IS_DESTROYED: *out = which ? "context is destroyed" : "CUDA_ERROR_CONTEXT_IS_DESTROYED"; return OK;
        case E_PEER_ACCESS_UNSUPPORTED: *out = which ? "peer access is not supported between these two devices" : "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED"; return OK;
        case E_PEER_ALREADY_ENABLED: *out = which ? "peer access is already enabled" : "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED"; return OK;
        case E_INVALID_DEVICE: *out = which ? "invalid device ordinal" : "CUDA_ERROR_INVALID_DEVICE"; return OK;
        default: return E_INVALID_VALUE;
    }
}

CUresult cuGetErrorName(CUresult error, const char **p) { return describe(error, p, 0); }
CUresult cuGetErrorString(CUresult error, const char **p) { return describe(error, p, 1); }

CUresult cuInit(unsigned flags) {
    if (flags != 0) return E_INVALID_VALUE;
    initialized = 1;
    return OK;
}

CUresult cuDriverGetVersion(int *v) {
    if (!v) return E_INVALID_VALUE;
#ifdef MOCK_OLD_DRIVER
    *v = 10020;
#else
    *v = 13050;
#endif
    return OK;
}

CUresult cuDeviceGetCount(int *n) { NEED_INIT(); *n = DEVICES; return OK; }

CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    NEED_INIT();
    if (ordinal < 0 || ordinal >= DEVICES) return E_INVALID_DEVICE;
    *d = ordinal;
    return OK;
}

CUresult cuDeviceGetAttribute(int *v, int attribute, CUdevice d) {
    NEED_INIT();
    if (d < 0 || d >= DEVICES) return E_INVALID_DEVICE;
    switch (attribute) {
        case 1: *v = 1024; return OK;   /* MAX_THREADS_PER_BLOCK */
        case 2: *v = 1024; return OK;   /* MAX_BLOCK_DIM_X */
        case 3: *v = 1024; return OK;   /* MAX_BLOCK_DIM_Y */
        case 4: *v = 64; return OK;     /* MAX_BLOCK_DIM_Z */
        case 5: *v = 2147483647; return OK; /* MAX_GRID_DIM_X */
        case 6: *v = 65535; return OK;  /* MAX_GRID_DIM_Y */
        case 7: *v = 65535; return OK;  /* MAX_GRID_DIM_Z */
        case 8: *v = 49152; return OK;  /* MAX_SHARED_MEMORY_PER_BLOCK */
        case 10: *v = 32; return OK;    /* WARP_SIZE */
        case 19: *v = 1; return OK;     /* CAN_MAP_HOST_MEMORY */
        case 97: *v = 232448; return OK; /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN (227 KiB) */
        case 99: *v = host_register_supported; return OK; /* HOST_REGISTER_SUPPORTED */
        case 83: *v = managed_supported; return OK; /* MANAGED_MEMORY */
        case 89: *v = concurrent_managed; return OK; /* CONCURRENT_MANAGED_ACCESS */
        case 75: *v = 9; return OK;     /* COMPUTE_CAPABILITY_MAJOR */
        case 76: *v = 0; return OK;     /* COMPUTE_CAPABILITY_MINOR */
#ifndef MOCK_OLD_DRIVER
        case 115: *v = pools_supported; return OK; /* MEMORY_POOLS_SUPPORTED */
#endif
        default: return E_INVALID_VALUE;
    }
}

CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
    NEED_INIT();
    if (d < 0 || d >= DEVICES) return E_INVALID_DEVICE;
    if (!name || len <= 0) return E_INVALID_VALUE;
    const char *text = d == 0 ? "gpu-mem mock device 0" : "gpu-mem mock device 1";
    strncpy(name, text, (size_t)len - 1);
    name[len - 1] = 0;
    return OK;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
    NEED_INIT();
    if (d < 0 || d >= DEVICES) return E_INVALID_DEVICE;
    *bytes = TOTAL_MEMORY;
    return OK;
}

/* ----- contexts ------------------------------------------------------------------------ */

CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice d) {
    NEED_INIT();
    if (d < 0 || d >= DEVICES) return E_INVALID_DEVICE;
    pthread_mutex_lock(&lock);
    primary_refs[d] += 1;
    pthread_mutex_unlock(&lock);
    *ctx = &contexts[d];
    return OK;
}

static CUresult release(CUdevice d) {
    NEED_INIT();
    if (d < 0 || d >= DEVICES) return E_INVALID_DEVICE;
    CUresult r = OK;
    pthread_mutex_lock(&lock);
    if (primary_refs[d] <= 0) r = E_INVALID_CONTEXT; else primary_refs[d] -= 1;
    pthread_mutex_unlock(&lock);
    return r;
}

#ifdef MOCK_OLD_DRIVER
CUresult cuDevicePrimaryCtxRelease(CUdevice d) { return release(d); }
#else
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) { return release(d); }
#endif

#ifndef MOCK_OLD_DRIVER
CUresult cuDevicePrimaryCtxReset_v2(CUdevice d) {
    NEED_INIT();
    if (d < 0 || d >= DEVICES) return E_INVALID_DEVICE;
    pthread_mutex_lock(&lock);
    sticky[d] = OK;
    resets[d] += 1;
    pthread_mutex_unlock(&lock);
    return OK;
}
#endif

CUresult cuCtxSetCurrent(CUcontext ctx) {
    NEED_INIT();
    if (ctx && (ctx < (CUcontext)contexts || ctx >= (CUcontext)(contexts + DEVICES))) return E_INVALID_CONTEXT;
    current = ctx;
    return OK;
}

CUresult cuCtxGetCurrent(CUcontext *ctx) { NEED_INIT(); *ctx = current; return OK; }
static void pool_release_to_threshold(int d) {
    if (pools[d].cached > pools[d].threshold) pools[d].cached = pools[d].threshold;
}

CUresult cuCtxSynchronize(void) {
    NEED_CONTEXT();
    ++ctx_syncs;
    pool_release_to_threshold(current_device());
    return OK;
}

/* ----- device memory ------------------------------------------------------------------- */

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
    NEED_CONTEXT();
    *total = TOTAL_MEMORY;
    *free_bytes = TOTAL_MEMORY - used[current_device()];
    return OK;
}

static CUresult device_alloc(CUdeviceptr *p, size_t bytes, enum kind kind) {
    NEED_CONTEXT();
    if (!p || bytes == 0) return E_INVALID_VALUE;
    int d = current_device();
    if (used[d] + bytes > TOTAL_MEMORY) return E_OUT_OF_MEMORY;
    size_t rounded = (bytes + 255) / 256 * 256;
    char *mem = aligned_alloc(256, rounded);
    if (!mem) return E_OUT_OF_MEMORY;
    pthread_mutex_lock(&lock);
    struct item *it = add_item(kind, mem, bytes, 0);
    if (it) used[d] += bytes;
    pthread_mutex_unlock(&lock);
    if (!it) { free(mem); return E_OUT_OF_MEMORY; }
    *p = (CUdeviceptr)(uintptr_t)mem;
    return OK;
}

static CUresult device_free(CUdeviceptr p, enum kind kind) {
    NEED_CONTEXT();
    pthread_mutex_lock(&lock);
    struct item *it = find_base(kind, (void *)(uintptr_t)p);
    if (!it && kind == DEVICE_PLAIN && (it = find_base(MANAGED, (void *)(uintptr_t)p))) {
        free(it->base);
        it->kind = FREE_SLOT;
        pthread_mutex_unlock(&lock);
        return OK;
    }
    if (it) {
        used[it->device] -= it->bytes;
        if (kind == DEVICE_ASYNC) pools[it->device].cached += it->bytes;
        free(it->base);
        it->kind = FREE_SLOT;
        if (kind == DEVICE_PLAIN) ++calls_plain_free; else ++calls_async_free;
    }
    pthread_mutex_unlock(&lock);
    return it ? OK : E_INVALID_VALUE;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes) { return device_alloc(p, bytes, DEVICE_PLAIN); }
CUresult cuMemFree_v2(CUdeviceptr p) { return device_free(p, DEVICE_PLAIN); }

#ifndef MOCK_OLD_DRIVER
CUresult cuMemAllocAsync(CUdeviceptr *p, size_t bytes, CUstream s) {
    if (!pools_supported) return E_NOT_SUPPORTED;
    NEED_CONTEXT();
    if (!stream_of(s, current_device())) return E_INVALID_HANDLE;
    CUresult r = device_alloc(p, bytes, DEVICE_ASYNC);
    struct pool *pl = &pools[current_device()];
    if (r == OK) pl->cached = pl->cached > bytes ? pl->cached - bytes : 0;
    return r;
}
CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) {
    NEED_CONTEXT();
    if (!stream_of(s, current_device())) return E_INVALID_HANDLE;
    return device_free(p, DEVICE_ASYNC);
}

static struct pool *pool_ok(void *p) {
    struct pool *pl = p;
    return pl >= pools && pl < pools + DEVICES && pl->magic == POOL_MAGIC ? pl : NULL;
}

CUresult cuDeviceGetDefaultMemPool(void **out, CUdevice d) {
    NEED_INIT();
    if (d < 0 || d >= DEVICES) return E_INVALID_DEVICE;
    if (!pools_supported) return E_NOT_SUPPORTED;
    *out = &pools[d];
    return OK;
}

CUresult cuMemPoolGetAttribute(void *p, int attr, void *value) {
    NEED_INIT();
    struct pool *pl = pool_ok(p);
    if (!pl || !value) return E_INVALID_VALUE;
    unsigned long long used_bytes = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_ITEMS; ++i)
        if (items[i].kind == DEVICE_ASYNC && items[i].device == pl->device) used_bytes += items[i].bytes;
    pthread_mutex_unlock(&lock);
    unsigned long long v;
    switch (attr) {
        case 4: v = pl->threshold; break;                 /* RELEASE_THRESHOLD */
        case 5: v = used_bytes + pl->cached; break;       /* RESERVED_MEM_CURRENT */
        case 7: v = used_bytes; break;                    /* USED_MEM_CURRENT */
        default: return E_INVALID_VALUE;
    }
    memcpy(value, &v, sizeof v);
    return OK;
}

CUresult cuMemPoolSetAttribute(void *p, int attr, void *value) {
    NEED_INIT();
    struct pool *pl = pool_ok(p);
    if (!pl || !value || attr != 4) return E_INVALID_VALUE;
    memcpy(&pl->threshold, value, sizeof pl->threshold);
    return OK;
}

/* cuda.h's CUmemAccessDesc: a location (type, then a device id) and access flags. */
typedef struct { struct { int type; int id; } location; int flags; } CUmemAccessDesc;
#define CU_MEM_LOCATION_TYPE_DEVICE 1
#define CU_MEM_ACCESS_FLAGS_PROT_NONE 0
#define CU_MEM_ACCESS_FLAGS_PROT_READWRITE 3

/* pool_access[p][d]: device d may read and write what device p's default pool allocates. */
static int pool_access[DEVICES][DEVICES];
int mock_pool_access(int pool_device, int device) { return pool_access[pool_device][device]; }

CUresult cuMemPoolSetAccess(void *p, const CUmemAccessDesc *map, size_t count) {
    NEED_CONTEXT();
    struct pool *pl = pool_ok(p);
    if (!pl || !map || count == 0) return E_INVALID_VALUE;
    for (size_t i = 0; i < count; ++i) {
        int d = map[i].location.id;
        if (map[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || d < 0 || d >= DEVICES)
            return E_INVALID_VALUE;
        if (map[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE && map[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE)
            return E_INVALID_VALUE;
        pool_access[pl->device][d] = map[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    }
    return OK;
}

CUresult cuMemPoolTrimTo(void *p, size_t keep) {
    NEED_INIT();
    struct pool *pl = pool_ok(p);
    if (!pl) return E_INVALID_VALUE;
    last_trim = keep;
    if (pl->cached > keep) pl->cached = keep;
    return OK;
}
#endif

/* ----- copies and memset (done at once; the mock has no queues) -------------------------- */

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
    NEED_CONTEXT();
    if (!src || !device_range_ok(dst, n)) return E_INVALID_VALUE;
    memcpy((void *)(uintptr_t)dst, src, n);
    return OK;
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
    NEED_CONTEXT();
    if (!dst || !device_range_ok(src, n)) return E_INVALID_VALUE;
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return OK;
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    NEED_CONTEXT();
    if (!device_range_ok(dst, n) || !device_range_ok(src, n)) return E_INVALID_VALUE;
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return OK;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
    if (!stream_ok(s)) return E_INVALID_HANDLE;
    return cuMemcpyHtoD_v2(dst, src, n);
}
CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s) {
    if (!stream_ok(s)) return E_INVALID_HANDLE;
    return cuMemcpyDtoH_v2(dst, src, n);
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
    if (!stream_ok(s)) return E_INVALID_HANDLE;
    return cuMemcpyDtoD_v2(dst, src, n);
}

CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t n) {
    NEED_CONTEXT();
    if (!device_range_ok(dst, n)) return E_INVALID_VALUE;
    memset((void *)(uintptr_t)dst, value, n);
    return OK;
}

CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned value, size_t words) {
    NEED_CONTEXT();
    if (dst % 4 != 0 || !device_range_ok(dst, words * 4)) return E_INVALID_VALUE;
    unsigned *w = (unsigned *)(uintptr_t)dst;
    for (size_t i = 0; i < words; ++i) w[i] = value;
    return OK;
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n, CUstream s) {
    if (!stream_ok(s)) return E_INVALID_HANDLE;
    return cuMemsetD8_v2(dst, value, n);
}
CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned value, size_t words, CUstream s) {
    if (!stream_ok(s)) return E_INVALID_HANDLE;
    return cuMemsetD32_v2(dst, value, words);
}

/* ----- host memory --------------------------------------------------------------------- */

/* Where cuMemHostAlloc puts an allocation in its pages. The driver of an H200 (580.159) gave
 * allocations of 8 to 48 bytes at 512 bytes past a page boundary: small ones share pages, so
 * page-locked memory is not page-aligned. The mock does the same for allocations under a page.
 * The next allocation can also be put 64 bytes past a page boundary (a driver breaking even
 * the 256-byte alignment); such an item carries MISALIGNED in its flags. */
static int misalign_next_host_alloc;
#define MISALIGNED 0x100u
#define SMALL_HOST_ALLOC_OFFSET 512u
void mock_misalign_next_host_alloc(void) { misalign_next_host_alloc = 1; }

static unsigned host_alloc_skew(size_t bytes, unsigned flags) {
    if (flags & MISALIGNED) return 64;
    return bytes < 4096 ? SMALL_HOST_ALLOC_OFFSET : 0;
}

/* Host allocations still live (not freed with cuMemFreeHost). */
int mock_live_host_allocations(void) {
    int n = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_ITEMS; ++i) n += items[i].kind == HOST_ALLOC;
    pthread_mutex_unlock(&lock);
    return n;
}

CUresult cuMemHostAlloc(void **pp, size_t bytes, unsigned flags) {
    NEED_CONTEXT();
    last_host_alloc_flags = flags;
    if (!pp || bytes == 0 || (flags & ~7u)) return E_INVALID_VALUE;
    unsigned marks = misalign_next_host_alloc ? MISALIGNED : 0;
    misalign_next_host_alloc = 0;
    unsigned skew = host_alloc_skew(bytes, marks);
    size_t rounded = (bytes + skew + 4095) / 4096 * 4096;
    char *mem = aligned_alloc(4096, rounded);
    if (!mem) return E_OUT_OF_MEMORY;
    pthread_mutex_lock(&lock);
    struct item *it = add_item(HOST_ALLOC, mem + skew, bytes, flags | marks);
    pthread_mutex_unlock(&lock);
    if (!it) { free(mem); return E_OUT_OF_MEMORY; }
    *pp = mem + skew;
    return OK;
}

CUresult cuMemFreeHost(void *p) {
    NEED_CONTEXT();
    pthread_mutex_lock(&lock);
    struct item *it = find_base(HOST_ALLOC, p);
    if (it) { free(it->base - host_alloc_skew(it->bytes, it->flags)); it->kind = FREE_SLOT; }
    pthread_mutex_unlock(&lock);
    return it ? OK : E_INVALID_VALUE;
}

CUresult cuMemHostRegister_v2(void *p, size_t bytes, unsigned flags) {
    NEED_CONTEXT();
    last_register_flags = flags;
    if (!p || bytes == 0 || (flags & ~0xFu)) return E_INVALID_VALUE;
    CUresult r = OK;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_ITEMS; ++i) {
        struct item *it = &items[i];
        if ((it->kind == HOST_REGISTERED || it->kind == HOST_ALLOC) &&
            (char *)p < it->base + it->bytes && it->base < (char *)p + bytes)
            r = E_ALREADY_REGISTERED;
    }
    if (r == OK && !add_item(HOST_REGISTERED, p, bytes, flags)) r = E_OUT_OF_MEMORY;
    pthread_mutex_unlock(&lock);
    return r;
}

CUresult cuMemHostUnregister(void *p) {
    NEED_CONTEXT();
    pthread_mutex_lock(&lock);
    struct item *it = find_base(HOST_REGISTERED, p);
    if (it) it->kind = FREE_SLOT;
    pthread_mutex_unlock(&lock);
    return it ? OK : E_NOT_REGISTERED;
}

CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p, unsigned flags) {
    NEED_CONTEXT();
    if (!d || flags != 0) return E_INVALID_VALUE;
    CUresult r = E_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_ITEMS; ++i) {
        struct item *it = &items[i];
        if ((it->kind == HOST_ALLOC || it->kind == HOST_REGISTERED) && (it->flags & 2) &&
            (char *)p >= it->base && (char *)p < it->base + it->bytes) {
            *d = (CUdeviceptr)(uintptr_t)p; /* unified addressing: same address */
            r = OK;
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}

/* ----- streams and events -------------------------------------------------------------- */

CUresult cuStreamCreate(CUstream *s, unsigned flags) {
    NEED_CONTEXT();
    last_stream_flags = flags;
    if (flags & ~1u) return E_INVALID_VALUE;
    struct stream *st = calloc(1, sizeof *st);
    st->magic = STREAM_MAGIC;
    st->flags = flags;
    st->device = current_device();
    *s = st;
    return OK;
}

CUresult cuStreamDestroy_v2(CUstream s) {
    NEED_CONTEXT();
    if (!s || !stream_ok(s)) return E_INVALID_HANDLE;
    ((struct stream *)s)->magic = 0;
    free(s);
    return OK;
}

/* Sequence numbers shared by launches and stream synchronisations. */
static unsigned long long sequence;
static unsigned long long last_sync_seq;
static CUstream last_sync_stream = (CUstream)(uintptr_t)-1;
static CUresult next_sync_failure;

unsigned long long mock_last_sync_seq(void) { return last_sync_seq; }
unsigned long long mock_last_sync_stream(void) { return (unsigned long long)(uintptr_t)last_sync_stream; }
/* The next cuStreamSynchronize returns `code` once (a kernel fault reported at the sync). */
void mock_fail_next_sync(int code) { next_sync_failure = code; }
/* Device 0's context faults now: every later call with it current returns `code`, the first of
 * them being whatever the backend calls next. */
void mock_fault_device0(int code) { sticky[0] = code; }

CUresult cuStreamSynchronize(CUstream s) {
    NEED_CONTEXT();
    if (!stream_ok(s)) return E_INVALID_HANDLE;
    last_sync_seq = ++sequence;
    last_sync_stream = s;
    CUresult r = next_sync_failure;
    next_sync_failure = OK;
    if (is_sticky(r)) sticky[current_device()] = r;
    if (r == OK && s == NULL) pool_release_to_threshold(current_device());
    return r;
}
CUresult cuStreamQuery(CUstream s) { NEED_CONTEXT(); return stream_ok(s) ? OK : E_INVALID_HANDLE; }

static int event_ok(CUevent e) { return e && ((struct event *)e)->magic == EVENT_MAGIC; }

CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned flags) {
    NEED_CONTEXT();
    if (flags != 0) return E_INVALID_VALUE;
    return stream_ok(s) && event_ok(e) ? OK : E_INVALID_HANDLE;
}

CUresult cuEventCreate(CUevent *e, unsigned flags) {
    NEED_CONTEXT();
    last_event_flags = flags;
    if (flags & ~0xFu) return E_INVALID_VALUE;
    struct event *ev = calloc(1, sizeof *ev);
    ev->magic = EVENT_MAGIC;
    ev->flags = flags;
    *e = ev;
    return OK;
}

CUresult cuEventDestroy_v2(CUevent e) {
    NEED_CONTEXT();
    if (!event_ok(e)) return E_INVALID_HANDLE;
    ((struct event *)e)->magic = 0;
    free(e);
    return OK;
}

CUresult cuEventRecord(CUevent e, CUstream s) {
    NEED_CONTEXT();
    if (!event_ok(e) || !stream_ok(s)) return E_INVALID_HANDLE;
    struct event *ev = e;
    ev->recorded = 1;
    ev->when_ms = now_ms();
    return OK;
}

CUresult cuEventQuery(CUevent e) { NEED_CONTEXT(); return event_ok(e) ? OK : E_INVALID_HANDLE; }
CUresult cuEventSynchronize(CUevent e) { NEED_CONTEXT(); return event_ok(e) ? OK : E_INVALID_HANDLE; }

CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b) {
    NEED_CONTEXT();
    if (!ms) return E_INVALID_VALUE;
    if (!event_ok(a) || !event_ok(b)) return E_INVALID_HANDLE;
    struct event *x = a, *y = b;
    if ((x->flags & 2) || (y->flags & 2) || !x->recorded || !y->recorded) return E_INVALID_HANDLE;
    *ms = (float)(y->when_ms - x->when_ms);
    return OK;
}

/* ----- modules and launch: images are kept, launches recorded, nothing runs --------------- */

struct module { int magic; size_t size; char *image; };
struct function { int magic; struct module *module; int max_dynamic_shared; };
#define MODULE_MAGIC 0x30D
#define FUNCTION_MAGIC 0xF00

static unsigned last_launch[8]; /* grid x y z, block x y z, shared bytes, launch count */
static unsigned long long last_param0;
static unsigned long long last_launch_seq;
static CUstream last_launch_stream;
static int last_launch_cooperative;
/* Blocks the mock's device keeps resident at once (132 SMs, one block each). */
#define COOPERATIVE_BLOCKS 132
#define E_COOPERATIVE_LAUNCH_TOO_LARGE 720
static int module_loads, live_modules;

#define MAX_PARAMS 16
#define MAX_PARAM_BYTES 256
static size_t param_sizes[MAX_PARAMS];
static int param_count;
static int param_info_known; /* set by mock_set_param_sizes: cuFuncGetParamInfo answers */
static int param_info_past_end; /* cuFuncGetParamInfo calls for an index past the last */
int mock_param_info_past_end(void) { return param_info_past_end; }
static int static_shared;    /* CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES of every function */
static int set_attribute_calls;
#define DEFAULT_SHARED 49152
#define OPTIN_SHARED 232448
void mock_set_static_shared(int bytes) { static_shared = bytes; }
/* CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK of every function: below the device's 1024 when a
 * kernel's register use allows fewer threads; a larger block fails with LAUNCH_OUT_OF_RESOURCES. */
static int function_max_threads = 1024;
void mock_set_function_max_threads(int n) { function_max_threads = n; }
int mock_set_attribute_calls(void) { return set_attribute_calls; }
static unsigned char param_bytes[MAX_PARAMS][MAX_PARAM_BYTES];

unsigned mock_last_launch(int i) { return i >= 0 && i < 8 ? last_launch[i] : 0; }
unsigned long long mock_last_param0(void) { return last_param0; }
unsigned long long mock_last_launch_seq(void) { return last_launch_seq; }
int mock_last_launch_cooperative(void) { return last_launch_cooperative; }
unsigned long long mock_last_launch_stream(void) { return (unsigned long long)(uintptr_t)last_launch_stream; }
int mock_module_loads(void) { return module_loads; }
int mock_live_modules(void) { return live_modules; }

/* The parameter sizes of the kernel the next launches use; 0 parameters = record none. */
int mock_set_param_sizes(int n, const size_t *sizes) {
    if (n < 0 || n > MAX_PARAMS) return -1;
    for (int i = 0; i < n; ++i) {
        if (sizes[i] > MAX_PARAM_BYTES) return -1;
        param_sizes[i] = sizes[i];
    }
    param_count = n;
    param_info_known = 1;
    return 0;
}

/* Copies the recorded bytes of parameter i of the last launch into out; returns their count. */
size_t mock_param_bytes(int i, unsigned char *out, size_t cap) {
    if (i < 0 || i >= param_count || cap < param_sizes[i]) return 0;
    memcpy(out, param_bytes[i], param_sizes[i]);
    return param_sizes[i];
}

static struct module *last_module_loaded;

CUresult cuModuleLoadData(void **m, const void *image) {
    NEED_CONTEXT();
    if (!m || !image) return E_INVALID_VALUE;
    const unsigned char *p = image;
    size_t size;
    if (p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F') {
        /* ELF64: the section header table ends the file. */
        uint64_t shoff;
        uint16_t shentsize, shnum;
        memcpy(&shoff, p + 0x28, 8);
        memcpy(&shentsize, p + 0x3A, 2);
        memcpy(&shnum, p + 0x3C, 2);
        size = shoff + (size_t)shentsize * shnum;
    } else if (strstr(image, ".version") && strstr(image, ".entry")) {
        size = strlen(image) + 1; /* PTX must be NUL-terminated text */
    } else {
        return E_INVALID_IMAGE;
    }
    struct module *mod = calloc(1, sizeof *mod);
    mod->magic = MODULE_MAGIC;
    mod->size = size;
    mod->image = malloc(size);
    memcpy(mod->image, image, size);
    *m = mod;
    last_module_loaded = mod;
    ++module_loads;
    ++live_modules;
    return OK;
}

/* The last image loaded contains `needle` (e.g. line information: ".loc" / ".debug_line"). */
int mock_last_image_contains(const char *needle) {
    struct module *m = last_module_loaded;
    return m && m->magic == MODULE_MAGIC && memmem(m->image, m->size, needle, strlen(needle)) != NULL;
}

#define E_INVALID_PTX 218
/* cuModuleLoadDataEx with the JIT's logs: PTX naming `gpu_mem_mock_jit_error` is refused with an
 * error log, as ptxas would explain a bad PTX file. */
CUresult cuModuleLoadDataEx(void **m, const void *image, unsigned n, int *options, void **values) {
    NEED_CONTEXT();
    char *error_log = NULL, *info_log = NULL;
    size_t error_size = 0, info_size = 0;
    for (unsigned i = 0; i < n; ++i) {
        switch (options[i]) {
            case 3: info_log = values[i]; break;
            case 4: info_size = (size_t)(uintptr_t)values[i]; break;
            case 5: error_log = values[i]; break;
            case 6: error_size = (size_t)(uintptr_t)values[i]; break;
            default: break;
        }
    }
    if (info_log && info_size) info_log[0] = 0;
    if (image && strstr(image, "gpu_mem_mock_jit_error")) {
        if (error_log && error_size) {
            strncpy(error_log, "ptxas application ptx input, line 3; error   : mock JIT refusal", error_size - 1);
            error_log[error_size - 1] = 0;
        }
        return E_INVALID_PTX;
    }
    return cuModuleLoadData(m, image);
}

static int module_ok(void *m) { return m && ((struct module *)m)->magic == MODULE_MAGIC; }

CUresult cuModuleGetFunction(void **f, void *m, const char *name) {
    NEED_CONTEXT();
    if (!f || !name) return E_INVALID_VALUE;
    if (!module_ok(m)) return E_INVALID_HANDLE;
    struct module *mod = m;
    if (!memmem(mod->image, mod->size, name, strlen(name))) return E_NOT_FOUND;
    struct function *fn = calloc(1, sizeof *fn);
    fn->magic = FUNCTION_MAGIC;
    fn->module = mod;
    *f = fn;
    return OK;
}

static int function_ok(void *f) { return f && ((struct function *)f)->magic == FUNCTION_MAGIC; }

#ifndef MOCK_OLD_DRIVER
CUresult cuFuncGetParamInfo(void *f, size_t index, size_t *offset, size_t *size) {
    NEED_CONTEXT();
    if (!function_ok(f)) return E_INVALID_HANDLE;
    if (!param_info_known) return E_NOT_SUPPORTED;
    if (!offset || !size) return E_INVALID_VALUE;
    if ((int)index >= param_count) {
        /* A real driver answers so too; compute-sanitizer reports each such call as an error. */
        ++param_info_past_end;
        return E_INVALID_VALUE;
    }
    size_t at = 0;
    for (size_t i = 0; i < index; ++i) at += param_sizes[i];
    *offset = at;
    *size = param_sizes[index];
    return OK;
}
#endif

/* The next cuFuncGetAttribute fails with this code (0: none). */
static int next_attribute_failure;
void mock_fail_next_func_attribute(int code) { next_attribute_failure = code; }

CUresult cuFuncGetAttribute(int *v, int attribute, void *f) {
    NEED_CONTEXT();
    if (next_attribute_failure) {
        int code = next_attribute_failure;
        next_attribute_failure = 0;
        return code;
    }
    if (!v || !function_ok(f)) return E_INVALID_HANDLE;
    struct function *fn = f;
    switch (attribute) {
        case 0: *v = function_max_threads; return OK; /* MAX_THREADS_PER_BLOCK */
        case 1: *v = static_shared; return OK; /* SHARED_SIZE_BYTES */
        case 8: *v = fn->max_dynamic_shared ? fn->max_dynamic_shared : DEFAULT_SHARED - static_shared; return OK;
        default: return E_INVALID_VALUE;
    }
}

CUresult cuFuncSetAttribute(void *f, int attribute, int value) {
    NEED_CONTEXT();
    if (!function_ok(f)) return E_INVALID_HANDLE;
    if (attribute != 8 || value < 0 || static_shared + value > OPTIN_SHARED) return E_INVALID_VALUE;
    ((struct function *)f)->max_dynamic_shared = value;
    ++set_attribute_calls;
    return OK;
}

CUresult cuModuleUnload(void *m) {
    NEED_CONTEXT();
    if (!module_ok(m)) return E_INVALID_HANDLE;
    struct module *mod = m;
    mod->magic = 0;
    if (mod == last_module_loaded) last_module_loaded = NULL;
    free(mod->image);
    free(mod);
    --live_modules;
    return OK;
}

/* What cuLaunchKernel and cuLaunchCooperativeKernel check and record alike. */
static CUresult launch(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                       unsigned bz, unsigned shared, CUstream s, void **params, int cooperative) {
    NEED_CONTEXT();
    if (!f || ((struct function *)f)->magic != FUNCTION_MAGIC) return E_INVALID_HANDLE;
    if (!stream_ok(s)) return E_INVALID_HANDLE;
    if (!params) return E_INVALID_VALUE;
    if (!gx || !gy || !gz || !bx || !by || !bz || (unsigned long long)bx * by * bz > 1024) return E_INVALID_VALUE;
    if (bx > 1024 || by > 1024 || bz > 64 || gx > 2147483647u || gy > 65535 || gz > 65535) return E_INVALID_VALUE;
    if ((unsigned long long)bx * by * bz > (unsigned long long)function_max_threads) return E_LAUNCH_OUT_OF_RESOURCES;
    {
        struct function *fn = f;
        int allowed = fn->max_dynamic_shared ? fn->max_dynamic_shared : DEFAULT_SHARED - static_shared;
        if ((long long)shared > allowed || static_shared + (long long)shared > OPTIN_SHARED) return E_INVALID_VALUE;
    }
    /* A cooperative grid must be resident at once: the mock's device keeps COOPERATIVE_BLOCKS. */
    if (cooperative && (unsigned long long)gx * gy * gz > COOPERATIVE_BLOCKS) return E_COOPERATIVE_LAUNCH_TOO_LARGE;
    unsigned values[8] = {gx, gy, gz, bx, by, bz, shared, last_launch[7] + 1};
    memcpy(last_launch, values, sizeof values);
    last_launch_cooperative = cooperative;
    last_param0 = 0;
    if (param_count > 0) memcpy(&last_param0, params[0], param_sizes[0] < 8 ? param_sizes[0] : 8);
    for (int i = 0; i < param_count; ++i) memcpy(param_bytes[i], params[i], param_sizes[i]);
    last_launch_stream = s;
    last_launch_seq = ++sequence;
    return OK;
}

CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shared, CUstream s, void **params, void **extra) {
    if (extra) return E_INVALID_VALUE;
    return launch(f, gx, gy, gz, bx, by, bz, shared, s, params, 0);
}

CUresult cuLaunchCooperativeKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                   unsigned by, unsigned bz, unsigned shared, CUstream s,
                                   void **params) {
    return launch(f, gx, gy, gz, bx, by, bz, shared, s, params, 1);
}

/* ----- several devices: peer access and copies ----------------------------------------- */

#ifndef MOCK_NO_PEER
CUresult cuDeviceCanAccessPeer(int *can, CUdevice d, CUdevice p) {
    NEED_INIT();
    if (!can) return E_INVALID_VALUE;
    if (d < 0 || d >= DEVICES || p < 0 || p >= DEVICES || d == p) return E_INVALID_DEVICE;
    *can = peer_possible;
    return OK;
}

CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned flags) {
    NEED_CONTEXT();
    if (flags != 0) return E_INVALID_VALUE;
    int p = context_device(peer), d = current_device();
    if (p < 0) return E_INVALID_CONTEXT;
    if (p == d) return E_INVALID_DEVICE;
    if (!peer_possible) return E_PEER_ACCESS_UNSUPPORTED;
    if (peer_enabled[d][p]) return E_PEER_ALREADY_ENABLED;
    peer_enabled[d][p] = 1;
    return OK;
}

static CUresult peer_copy(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n) {
    int dd = context_device(dc), sd = context_device(sc);
    if (dd < 0 || sd < 0) return E_INVALID_CONTEXT;
    if (sticky[dd]) return sticky[dd];
    if (sticky[sd]) return sticky[sd];
    if (!range_on(dd, dst, n) || !range_on(sd, src, n)) return E_INVALID_VALUE;
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    last_peer_bytes = n;
    return OK;
}

CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n) {
    NEED_INIT();
    CUresult r = peer_copy(dst, dc, src, sc, n);
    if (r == OK) ++peer_copies;
    return r;
}

CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n,
                           CUstream s) {
    NEED_CONTEXT();
    if (!stream_of(s, context_device(dc))) return E_INVALID_HANDLE;
    CUresult r = peer_copy(dst, dc, src, sc, n);
    if (r == OK) { ++peer_async_copies; last_peer_stream = s; }
    return r;
}

/* ----- managed memory ------------------------------------------------------------------ */

CUresult cuMemAllocManaged(CUdeviceptr *p, size_t bytes, unsigned flags) {
    NEED_CONTEXT();
    last_managed_flags = flags;
    if (!p || bytes == 0 || (flags != 1 && flags != 2)) return E_INVALID_VALUE;
    if (!managed_supported) return E_NOT_SUPPORTED;
    size_t rounded = (bytes + 4095) / 4096 * 4096;
    char *mem = aligned_alloc(4096, rounded);
    if (!mem) return E_OUT_OF_MEMORY;
    pthread_mutex_lock(&lock);
    struct item *it = add_item(MANAGED, mem, bytes, flags);
    pthread_mutex_unlock(&lock);
    if (!it) { free(mem); return E_OUT_OF_MEMORY; }
    *p = (CUdeviceptr)(uintptr_t)mem;
    return OK;
}

/* ----- managed-memory hints (12.2's _v2 exports; not in the "old" driver) -------------------- */

#ifndef MOCK_OLD_DRIVER
/* cuda.h's CUmemLocation, passed by value: a type (1 device, 2 host), then an id. */
typedef struct { int type; int id; } CUmemLocation;

/* Is [p, p+n) inside one managed allocation? */
static int managed_range(CUdeviceptr p, size_t n) {
    const char *a = (const char *)(uintptr_t)p;
    int ok = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_ITEMS && !ok; ++i)
        if (items[i].kind == MANAGED && a >= items[i].base && a + n <= items[i].base + items[i].bytes)
            ok = 1;
    pthread_mutex_unlock(&lock);
    return ok;
}

static int location_ok(CUmemLocation l) {
    return l.type == 2 || (l.type == 1 && l.id >= 0 && l.id < DEVICES);
}

CUresult cuMemPrefetchAsync_v2(CUdeviceptr p, size_t n, CUmemLocation to, unsigned flags, CUstream s) {
    NEED_CONTEXT();
    if (n == 0 || flags != 0 || !managed_range(p, n) || !location_ok(to)) return E_INVALID_VALUE;
    if (!stream_of(s, current_device())) return E_INVALID_HANDLE;
    /* The stream's device and a destination device must migrate on request (one flag here). */
    if (!concurrent_managed) return E_INVALID_DEVICE;
    pthread_mutex_lock(&lock);
    ++prefetches;
    last_prefetch = (struct hint){p, n, current_device(), to.type, to.id, 0};
    last_prefetch_stream = s;
    pthread_mutex_unlock(&lock);
    return OK;
}

CUresult cuMemAdvise_v2(CUdeviceptr p, size_t n, int advice, CUmemLocation at) {
    NEED_CONTEXT();
    if (n == 0 || advice < 1 || advice > 6 || !managed_range(p, n)) return E_INVALID_VALUE;
    int located = advice == 3 || advice == 5 || advice == 6;
    if (located && !location_ok(at)) return E_INVALID_VALUE;
    if ((advice == 3 || advice == 5) && at.type == 1 && !concurrent_managed) return E_INVALID_DEVICE;
    pthread_mutex_lock(&lock);
    ++advices;
    last_advice = (struct hint){p, n, current_device(), at.type, at.id, advice};
    pthread_mutex_unlock(&lock);
    return OK;
}
#endif
#endif

/* ----- inter-process sharing ------------------------------------------------------------ */

struct ipc_handle { char magic[8]; int pid; int device; unsigned long long base; unsigned long long bytes; char pad[32]; };
typedef struct { char reserved[64]; } CUipcMemHandle;
_Static_assert(sizeof(struct ipc_handle) == 64, "CUipcMemHandle is 64 bytes");

/* Makes a handle look as if another process had exported it. */
void mock_ipc_as_foreign(unsigned char *h) {
    struct ipc_handle x;
    memcpy(&x, h, sizeof x);
    x.pid += 1;
    memcpy(h, &x, sizeof x);
}

int mock_live_ipc_mappings(void) {
    int n = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_ITEMS; ++i) n += items[i].kind == IPC_MAPPED;
    pthread_mutex_unlock(&lock);
    return n;
}

CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p) {
    NEED_CONTEXT();
    if (!h) return E_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    struct item *it = find_base(DEVICE_PLAIN, (void *)(uintptr_t)p);
    struct ipc_handle x = {{'g', 'm', 'm', 'o', 'c', 'k', 'i', 'p'}, getpid(), 0, p, 0, {0}};
    if (it) { x.device = it->device; x.bytes = it->bytes; }
    int ok = it && it->device == current_device();
    pthread_mutex_unlock(&lock);
    if (!ok) return E_INVALID_VALUE;
    memcpy(h, &x, sizeof x);
    return OK;
}

static CUresult ipc_open(CUdeviceptr *p, CUipcMemHandle h, unsigned flags) {
    NEED_CONTEXT();
    last_ipc_open_flags = flags;
    if (!p || flags != 1) return E_INVALID_VALUE; /* CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS */
    struct ipc_handle x;
    memcpy(&x, &h, sizeof x);
    if (memcmp(x.magic, "gmmockip", 8) != 0) return E_INVALID_VALUE;
    if (x.pid == getpid()) return E_INVALID_CONTEXT;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_ITEMS; ++i) {
        struct item *open = &items[i];
        if (open->kind == IPC_MAPPED && open->device == current_device() &&
            open->ipc_source == x.base && open->ipc_pid == x.pid) {
            open->ipc_opens += 1;
            *p = (CUdeviceptr)(uintptr_t)open->base;
            pthread_mutex_unlock(&lock);
            return OK;
        }
    }
    struct item *src = find_base(DEVICE_PLAIN, (void *)(uintptr_t)x.base);
    char *mem = src ? malloc(src->bytes) : NULL;
    struct item *it = NULL;
    if (mem) {
        memcpy(mem, src->base, src->bytes);
        it = add_item(IPC_MAPPED, mem, src->bytes, 0);
        if (!it) free(mem);
        else { it->ipc_source = x.base; it->ipc_pid = x.pid; it->ipc_opens = 1; }
    }
    pthread_mutex_unlock(&lock);
    if (!it) return E_INVALID_VALUE;
    *p = (CUdeviceptr)(uintptr_t)mem;
    return OK;
}

#ifdef MOCK_OLD_DRIVER
CUresult cuIpcOpenMemHandle(CUdeviceptr *p, CUipcMemHandle h, unsigned flags) { return ipc_open(p, h, flags); }
#else
CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *p, CUipcMemHandle h, unsigned flags) { return ipc_open(p, h, flags); }
#endif

/* The device allocation or IPC mapping holding `p` (in the current device). */
CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
    NEED_CONTEXT();
    const char *a = (const char *)(uintptr_t)p;
    CUresult r = E_NOT_FOUND;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_ITEMS; ++i) {
        struct item *it = &items[i];
        int device_kind = it->kind == DEVICE_PLAIN || it->kind == DEVICE_ASYNC || it->kind == IPC_MAPPED;
        if (device_kind && it->device == current_device() && a >= it->base && a < it->base + it->bytes) {
            if (base) *base = (CUdeviceptr)(uintptr_t)it->base;
            if (size) *size = it->bytes;
            r = OK;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}

CUresult cuIpcCloseMemHandle(CUdeviceptr p) {
    NEED_CONTEXT();
    pthread_mutex_lock(&lock);
    struct item *it = find_base(IPC_MAPPED, (void *)(uintptr_t)p);
    int ok = it && it->device == current_device();
    if (ok && --it->ipc_opens == 0) { free(it->base); it->kind = FREE_SLOT; }
    pthread_mutex_unlock(&lock);
    return ok ? OK : E_INVALID_VALUE;
}
