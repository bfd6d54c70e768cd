/*
 * A stand-in for libhsa-runtime64.so.1 with one CPU agent and one GPU agent backed by host memory,
 * implementing just the calls gpu-mem's ROC backend makes. It is not a GPU: it exists to check the
 * backend's side of the HSA contract:
 *   - async copies run on their own thread after every dependency signal reached 0 (a failed,
 *     negative dependency means the copy never starts, as in ROCr), with a delay so that a missing
 *     wait shows up as wrong data;
 *   - both sides of an async copy must be GPU-accessible: VRAM, system-pool memory the GPU was
 *     granted access to, or a locked range addressed through its *agent pointer*, which differs
 *     from the host address here (host + 2^44) so that using the host address is caught;
 *   - signals are never really freed: using a destroyed one is counted as a violation, and so is
 *     destroying a signal a pending copy still depends on;
 *   - hsa_amd_memory_fill needs 4-byte alignment inside VRAM;
 *   - code objects: the reader must be handed an AMD GPU ELF; the executable keeps a copy and
 *     answers kernel symbol queries from the real kernel descriptor `<name>.kd` in it (group,
 *     private and kernarg segment sizes), so hiprtc's own output drives the backend;
 *   - AQL queues: a ring of 64-byte packets and a "packet processor" thread per queue that takes
 *     packets in order once their header is valid and the doorbell covers them, waits for
 *     barrier-AND dependencies, logs each kernel dispatch (packet bytes, kernarg bytes, times),
 *     runs no code, then retires the packet and completes its signal. Freeing a kernarg buffer
 *     that a valid packet still names counts as a violation.
 *   - several GPUs (mock_hsa_set_gpu_count: 1 or 2, read at agent iteration): each GPU owns its
 *     VRAM pool; a GPU reaches another's VRAM, or system memory, only once hsa_amd_agents_allow_access
 *     listed it (the list replaces the access set; an empty list, non-NULL flags or an agent that may
 *     never access the pool are refused); async copies require each GPU agent named to reach both
 *     buffers and each agent to own (VRAM) or be the CPU for (host memory) the side it is named for,
 *     as hsa_ext_amd.h says.
 * Built by the test with `cc -shared -fPIC`; uses the real HSA headers for the ABI.
 */
#include <elf.h>
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CPU_AGENT 1
#define GPU_AGENT 2
#define GPU2_AGENT 3
#define POOL_SYSTEM 11
#define POOL_KERNARG 12
#define POOL_VRAM 21
#define POOL_LDS 22
#define POOL_VRAM2 31
#define POOL_LDS2 32
#define VRAM_BYTES (64u << 20)
#define AGENT_OFFSET ((uintptr_t)1 << 44)
#define MAX_SIGNALS 65536
#define MAX_RANGES 4096
#define MAX_QUEUES 32
#define MAX_IN_FLIGHT 256
#define MAX_DISPATCH_LOG 1024
#define KERNARG_LOG_BYTES 512
#define MAX_COPY_LOG 4096

typedef struct {
  _Atomic int64_t value;
  atomic_int used;
  atomic_int destroyed;
  atomic_int waited_on_by_pending; /* pending copies depending on it */
  uint64_t start, end;
  atomic_int timed;
  atomic_int doorbell; /* a queue's doorbell: its stores must never go down */
} mock_signal;

typedef struct {
  uintptr_t base;
  size_t size;
  int kind; /* 1 vram, 2 system, 3 locked, 4 kernarg */
  int gpu_allowed;      /* bit (1 << agent handle) per GPU agent that may access it */
  uintptr_t agent_base; /* locked: address the GPU uses */
  uint64_t owner;       /* VRAM: the GPU agent whose pool it came from */
  int live;
} range;

static mock_signal signals[MAX_SIGNALS];
static atomic_int next_signal = 0;
static range ranges[MAX_RANGES];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int init_count = 0;
static atomic_int violations = 0;
static atomic_int fail_next_copy = 0;
static atomic_int copies_started = 0;
static atomic_int profiling = 0;
static size_t vram_used = 0; /* both GPUs */
static size_t vram_used_by[2] = {0, 0};
static atomic_int gpu_count = 1;
static atomic_int peer_never = 0; /* GPUs may never access each other's VRAM */
static atomic_int bad_agent_copies = 0; /* async copies naming an agent that does not own its side */
#define AGENT_BIT(h) (1 << (int)(h))
#define ALL_GPUS (AGENT_BIT(GPU_AGENT) | AGENT_BIT(GPU2_AGENT))
static int is_gpu(uint64_t h) { return h == GPU_AGENT || (h == GPU2_AGENT && atomic_load(&gpu_count) >= 2); }
static atomic_int delay_us = 3000;
static atomic_int dispatch_delay_us = 2000;
static atomic_int fail_next_dispatch = 0;
static atomic_int executables_loaded = 0;
static atomic_int live_executables = 0;
static atomic_int live_readers = 0;
static atomic_int live_queues = 0;
static atomic_int barrier_packets = 0;
static atomic_int dispatches = 0;          /* completed */
static atomic_int dispatches_launched = 0; /* log slots handed out */
static atomic_int doorbell_regressions = 0;
static atomic_int fault_aborts = 0; /* faults ROCr would have aborted the process for */
static uint64_t copy_end_ns[MAX_COPY_LOG];

typedef struct {
  uint8_t packet[64];
  uint8_t kernarg[KERNARG_LOG_BYTES];
  uint32_t kernarg_size;
  uint32_t barriers_before; /* barrier-AND packets processed before it on its queue */
  uint64_t start_ns, end_ns;
} mock_dispatch_t;
static mock_dispatch_t dispatch_log[MAX_DISPATCH_LOG];

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- control and statistics for the tests -------------------------------------------- */
typedef struct {
  int32_t init_count, live_signals, violations, live_vram, live_system, live_locks;
  int32_t copies_started;
  uint64_t vram_used;
  int32_t live_kernarg, executables_loaded, live_executables, live_readers, live_queues;
  int32_t barrier_packets, dispatches, doorbell_regressions;
  int32_t fault_aborts, bad_agent_copies;
  int32_t live_ipc_mappings, reserved;
} mock_stats_t;

void mock_hsa_fail_next_copy(void) { atomic_store(&fail_next_copy, 1); }
/* How many GPU agents hsa_iterate_agents reports (1 or 2). */
void mock_hsa_set_gpu_count(int n) { atomic_store(&gpu_count, n >= 2 ? 2 : 1); }
/* Whether GPUs report NEVER_ALLOWED for each other's VRAM pool. */
void mock_hsa_set_peer_never(int never) { atomic_store(&peer_never, never); }
/* Whether `agent` (a handle) may access the allocation containing the address `addr` now. */
int mock_hsa_can_reach(uint64_t agent, uintptr_t addr);
void mock_hsa_set_delay_us(int us) { atomic_store(&delay_us, us); }
/* While set, copies whose dependencies are met wait before running (tests release them). They
 * sleep on a condition variable: a thousand held copies polling would starve the thread
 * enqueuing them (and the rest of the machine) of CPU. */
static int hold_copies = 0;
static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_released = PTHREAD_COND_INITIALIZER;
void mock_hsa_hold_copies(int hold) {
  pthread_mutex_lock(&hold_lock);
  hold_copies = hold;
  if (!hold) pthread_cond_broadcast(&hold_released);
  pthread_mutex_unlock(&hold_lock);
}
static void wait_while_copies_held(void) {
  pthread_mutex_lock(&hold_lock);
  while (hold_copies) pthread_cond_wait(&hold_released, &hold_lock);
  pthread_mutex_unlock(&hold_lock);
}
void mock_hsa_fail_next_dispatch(void) { atomic_store(&fail_next_dispatch, 1); }
void mock_hsa_fault_next_dispatch(void) { atomic_store(&fail_next_dispatch, 2); }
/* How long each dispatch "runs"; returns the previous value. */
int mock_hsa_set_dispatch_delay_us(int us) { return atomic_exchange(&dispatch_delay_us, us); }
/* The i-th kernel dispatch processed (0-based); 0 when it does not exist (yet). */
int mock_hsa_dispatch(int i, mock_dispatch_t *out) {
  if (i < 0 || i >= atomic_load(&dispatches_launched) || i >= MAX_DISPATCH_LOG) return 0;
  if (__atomic_load_n(&dispatch_log[i].end_ns, __ATOMIC_ACQUIRE) == 0) return 0; /* not finished */
  *out = dispatch_log[i];
  return 1;
}
/* When the i-th async copy (in start order) finished, in ns of CLOCK_MONOTONIC. */
uint64_t mock_hsa_copy_end_ns(int i) { return i >= 0 && i < MAX_COPY_LOG ? copy_end_ns[i] : 0; }
void mock_hsa_stats(mock_stats_t *s) {
  memset(s, 0, sizeof *s);
  s->init_count = atomic_load(&init_count);
  s->violations = atomic_load(&violations);
  s->copies_started = atomic_load(&copies_started);
  int n = atomic_load(&next_signal);
  for (int i = 0; i < n; i++)
    if (atomic_load(&signals[i].used) && !atomic_load(&signals[i].destroyed)) s->live_signals++;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < MAX_RANGES; i++) {
    if (!ranges[i].live) continue;
    if (ranges[i].kind == 1) s->live_vram++;
    if (ranges[i].kind == 2) s->live_system++;
    if (ranges[i].kind == 3) s->live_locks++;
    if (ranges[i].kind == 4) s->live_kernarg++;
  }
  s->vram_used = vram_used;
  pthread_mutex_unlock(&lock);
  s->executables_loaded = atomic_load(&executables_loaded);
  s->live_executables = atomic_load(&live_executables);
  s->live_readers = atomic_load(&live_readers);
  s->live_queues = atomic_load(&live_queues);
  s->barrier_packets = atomic_load(&barrier_packets);
  s->dispatches = atomic_load(&dispatches);
  s->doorbell_regressions = atomic_load(&doorbell_regressions);
  s->fault_aborts = atomic_load(&fault_aborts);
  s->bad_agent_copies = atomic_load(&bad_agent_copies);
  pthread_mutex_lock(&lock);
  for (int i = 0; i < MAX_RANGES; i++) if (ranges[i].live && ranges[i].kind == 5) s->live_ipc_mappings++;
  pthread_mutex_unlock(&lock);
}

/* ---- helpers ------------------------------------------------------------------------- */
static mock_signal *sig(hsa_signal_t s) {
  if (s.handle == 0 || s.handle > (uint64_t)atomic_load(&next_signal)) return NULL;
  mock_signal *m = &signals[s.handle - 1];
  if (atomic_load(&m->destroyed)) atomic_fetch_add(&violations, 1);
  return m;
}

static int add_range_owned(uintptr_t base, size_t size, int kind, uintptr_t agent_base, int access, uint64_t owner) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < MAX_RANGES; i++)
    if (!ranges[i].live) {
      ranges[i] = (range){base, size, kind, access, agent_base, owner, 1};
      pthread_mutex_unlock(&lock);
      return 1;
    }
  pthread_mutex_unlock(&lock);
  return 0;
}

static int add_range(uintptr_t base, size_t size, int kind, uintptr_t agent_base) {
  return add_range_owned(base, size, kind, agent_base, kind == 4 ? ALL_GPUS : 0, 0);
}

static int kernarg_in_use(uintptr_t base, size_t size); /* with the queues below */

static range *find_base(uintptr_t base, int kind) {
  for (int i = 0; i < MAX_RANGES; i++)
    if (ranges[i].live && ranges[i].kind == kind && ranges[i].base == base) return &ranges[i];
  return NULL;
}

/* The host-backed address an access to [addr, addr+size) by every agent in `agents` (bits)
 * touches, or 0 when one of them may not access it. *owner_out: the GPU owning VRAM, 0 (host
 * memory) otherwise. Locked ranges and IPC mappings (kinds 3, 5) are addressed through their
 * agent address. */
static uintptr_t access_by(int agents, uintptr_t addr, size_t size, uint64_t *owner_out) {
  uintptr_t out = 0;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < MAX_RANGES && !out; i++) {
    range *r = &ranges[i];
    if (!r->live) continue;
    int allowed = (r->gpu_allowed & agents) == agents;
    if ((r->kind == 1 || r->kind == 2 || r->kind == 4) && allowed && addr >= r->base &&
        addr + size <= r->base + r->size) {
      out = addr;
      *owner_out = r->kind == 1 ? r->owner : 0;
    }
    if ((r->kind == 3 || r->kind == 5) && allowed && r->agent_base && addr >= r->agent_base &&
        addr + size <= r->agent_base + r->size) {
      out = r->base + (addr - r->agent_base);
      *owner_out = r->kind == 5 ? r->owner : 0;
    }
  }
  pthread_mutex_unlock(&lock);
  return out;
}
static uintptr_t gpu_access(uintptr_t addr, size_t size) {
  uint64_t owner;
  return access_by(AGENT_BIT(GPU_AGENT), addr, size, &owner);
}
int mock_hsa_can_reach(uint64_t agent, uintptr_t addr) {
  uint64_t owner;
  return access_by(AGENT_BIT(agent), addr, 1, &owner) != 0;
}

/* ---- runtime, system, agents ------------------------------------------------------------ */
hsa_status_t hsa_init(void) { atomic_fetch_add(&init_count, 1); return HSA_STATUS_SUCCESS; }
hsa_status_t hsa_shut_down(void) {
  if (atomic_load(&init_count) == 0) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  atomic_fetch_sub(&init_count, 1);
  return HSA_STATUS_SUCCESS;
}
hsa_status_t hsa_status_string(hsa_status_t status, const char **text) {
  switch ((int)status) {
  case HSA_STATUS_ERROR_INVALID_ARGUMENT: *text = "HSA_STATUS_ERROR_INVALID_ARGUMENT: mock"; break;
  case HSA_STATUS_ERROR_OUT_OF_RESOURCES: *text = "HSA_STATUS_ERROR_OUT_OF_RESOURCES: mock"; break;
  case HSA_STATUS_ERROR_INVALID_SIGNAL: *text = "HSA_STATUS_ERROR_INVALID_SIGNAL: mock"; break;
  default: return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  return HSA_STATUS_SUCCESS;
}
hsa_status_t hsa_system_get_info(hsa_system_info_t attribute, void *value) {
  if (attribute == HSA_SYSTEM_INFO_TIMESTAMP) { *(uint64_t *)value = now_ns(); return HSA_STATUS_SUCCESS; }
  if (attribute == HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY) { *(uint64_t *)value = 1000000000ull; return HSA_STATUS_SUCCESS; }
  return HSA_STATUS_ERROR_INVALID_ARGUMENT;
}
hsa_status_t hsa_iterate_agents(hsa_status_t (*cb)(hsa_agent_t, void *), void *data) {
  if (!atomic_load(&init_count)) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  hsa_agent_t a = {CPU_AGENT}, b = {GPU_AGENT}, c = {GPU2_AGENT};
  hsa_status_t s = cb(a, data);
  if (s != HSA_STATUS_SUCCESS) return s == HSA_STATUS_INFO_BREAK ? HSA_STATUS_SUCCESS : s;
  s = cb(b, data);
  if (s != HSA_STATUS_SUCCESS || atomic_load(&gpu_count) < 2) return s == HSA_STATUS_INFO_BREAK ? HSA_STATUS_SUCCESS : s;
  s = cb(c, data);
  return s == HSA_STATUS_INFO_BREAK ? HSA_STATUS_SUCCESS : s;
}
hsa_status_t hsa_agent_get_info(hsa_agent_t agent, hsa_agent_info_t attribute, void *value) {
  int gpu = is_gpu(agent.handle);
  if (agent.handle != CPU_AGENT && !gpu) return HSA_STATUS_ERROR_INVALID_AGENT;
  switch ((int)attribute) {
  case HSA_AGENT_INFO_DEVICE: *(uint32_t *)value = gpu ? HSA_DEVICE_TYPE_GPU : HSA_DEVICE_TYPE_CPU; return HSA_STATUS_SUCCESS;
  case HSA_AGENT_INFO_NAME: memset(value, 0, 64); strcpy(value, gpu ? "gfx90a" : "Mock CPU"); return HSA_STATUS_SUCCESS;
  case HSA_AMD_AGENT_INFO_PRODUCT_NAME: memset(value, 0, 64); strcpy(value, gpu ? "Mock Instinct MI210" : "Mock CPU"); return HSA_STATUS_SUCCESS;
  case HSA_AGENT_INFO_WAVEFRONT_SIZE: *(uint32_t *)value = 64; return HSA_STATUS_SUCCESS;
  case HSA_AGENT_INFO_WORKGROUP_MAX_SIZE: *(uint32_t *)value = 1024; return HSA_STATUS_SUCCESS;
  case HSA_AGENT_INFO_WORKGROUP_MAX_DIM: { uint16_t *d = value; d[0] = d[1] = d[2] = 1024; return HSA_STATUS_SUCCESS; }
  case HSA_AGENT_INFO_GRID_MAX_SIZE: *(uint32_t *)value = UINT32_MAX; return HSA_STATUS_SUCCESS;
  case HSA_AGENT_INFO_GRID_MAX_DIM: { uint32_t *d = value; d[0] = d[1] = d[2] = UINT32_MAX; return HSA_STATUS_SUCCESS; }
  case HSA_AGENT_INFO_QUEUE_MAX_SIZE: *(uint32_t *)value = gpu ? 131072 : 0; return HSA_STATUS_SUCCESS;
  case HSA_AGENT_INFO_PROFILE: *(uint32_t *)value = HSA_PROFILE_BASE; return HSA_STATUS_SUCCESS;
  default: return HSA_STATUS_ERROR_INVALID_ARGUMENT; /* e.g. 0xA015, unknown to 5.2.3 */
  }
}

/* ---- pools ------------------------------------------------------------------------------ */
hsa_status_t hsa_amd_agent_iterate_memory_pools(hsa_agent_t agent,
                                                hsa_status_t (*cb)(hsa_amd_memory_pool_t, void *),
                                                void *data) {
  uint64_t list[2];
  if (agent.handle == CPU_AGENT) { list[0] = POOL_KERNARG; list[1] = POOL_SYSTEM; }
  else if (agent.handle == GPU_AGENT) { list[0] = POOL_VRAM; list[1] = POOL_LDS; }
  else if (is_gpu(agent.handle)) { list[0] = POOL_VRAM2; list[1] = POOL_LDS2; }
  else return HSA_STATUS_ERROR_INVALID_AGENT;
  for (int i = 0; i < 2; i++) {
    hsa_amd_memory_pool_t p = {list[i]};
    hsa_status_t s = cb(p, data);
    if (s != HSA_STATUS_SUCCESS) return s == HSA_STATUS_INFO_BREAK ? HSA_STATUS_SUCCESS : s;
  }
  return HSA_STATUS_SUCCESS;
}
hsa_status_t hsa_amd_memory_pool_get_info(hsa_amd_memory_pool_t pool, hsa_amd_memory_pool_info_t attr, void *value) {
  uint64_t p = pool.handle;
  int lds = p == POOL_LDS || p == POOL_LDS2;
  if (p == POOL_VRAM2) p = POOL_VRAM;
  switch ((int)attr) {
  case HSA_AMD_MEMORY_POOL_INFO_SEGMENT: *(uint32_t *)value = lds ? HSA_AMD_SEGMENT_GROUP : HSA_AMD_SEGMENT_GLOBAL; return HSA_STATUS_SUCCESS;
  case HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS:
    *(uint32_t *)value = p == POOL_VRAM ? HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED
                       : p == POOL_KERNARG ? (HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED | HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT)
                       : HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED;
    return HSA_STATUS_SUCCESS;
  case HSA_AMD_MEMORY_POOL_INFO_SIZE: *(size_t *)value = lds ? 65536 : p == POOL_VRAM ? VRAM_BYTES : (size_t)1 << 34; return HSA_STATUS_SUCCESS;
  case HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED: *(bool *)value = !lds; return HSA_STATUS_SUCCESS;
  case HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE:
  case HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALIGNMENT: *(size_t *)value = 4096; return HSA_STATUS_SUCCESS;
  default: return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}
hsa_status_t hsa_amd_agent_memory_pool_get_info(hsa_agent_t agent, hsa_amd_memory_pool_t pool,
                                                hsa_amd_agent_memory_pool_info_t attr, void *value) {
  if (attr != HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (agent.handle != CPU_AGENT && !is_gpu(agent.handle)) return HSA_STATUS_ERROR_INVALID_AGENT;
  uint64_t owner = pool.handle == POOL_VRAM ? GPU_AGENT : pool.handle == POOL_VRAM2 ? GPU2_AGENT : 0;
  uint32_t access = HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT;
  if (is_gpu(agent.handle) && pool.handle == POOL_SYSTEM) access = HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT;
  if (is_gpu(agent.handle) && owner && owner != agent.handle)
    access = atomic_load(&peer_never) ? HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED : HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT;
  *(uint32_t *)value = access;
  return HSA_STATUS_SUCCESS;
}
hsa_status_t hsa_amd_memory_pool_allocate(hsa_amd_memory_pool_t pool, size_t size, uint32_t flags, void **ptr) {
  if (size == 0 || flags != 0 || !ptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  size_t rounded = (size + 4095) & ~(size_t)4095;
  int vram2 = pool.handle == POOL_VRAM2 && atomic_load(&gpu_count) >= 2;
  int kind = pool.handle == POOL_VRAM || vram2 ? 1 : pool.handle == POOL_SYSTEM ? 2 : pool.handle == POOL_KERNARG ? 4 : 0;
  if (!kind) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  uint64_t owner = kind == 1 ? (vram2 ? GPU2_AGENT : GPU_AGENT) : 0;
  if (kind == 1) {
    pthread_mutex_lock(&lock);
    int fits = vram_used_by[vram2] + rounded <= VRAM_BYTES;
    if (fits) { vram_used += rounded; vram_used_by[vram2] += rounded; }
    pthread_mutex_unlock(&lock);
    if (!fits) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  void *p = aligned_alloc(4096, rounded);
  if (!p) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  memset(p, 0xCD, rounded);
  add_range_owned((uintptr_t)p, rounded, kind, 0, kind == 1 ? AGENT_BIT(owner) : kind == 4 ? ALL_GPUS : 0, owner);
  *ptr = p;
  return HSA_STATUS_SUCCESS;
}
hsa_status_t hsa_amd_memory_pool_free(void *ptr) {
  pthread_mutex_lock(&lock);
  range *r = find_base((uintptr_t)ptr, 1);
  if (!r) r = find_base((uintptr_t)ptr, 2);
  if (!r) r = find_base((uintptr_t)ptr, 4);
  if (!r) { pthread_mutex_unlock(&lock); atomic_fetch_add(&violations, 1); return HSA_STATUS_ERROR_INVALID_ARGUMENT; }
  if (r->kind == 4 && kernarg_in_use((uintptr_t)ptr, r->size)) atomic_fetch_add(&violations, 1);
  if (r->kind == 1) { vram_used -= r->size; vram_used_by[r->owner == GPU2_AGENT] -= r->size; }
  r->live = 0;
  pthread_mutex_unlock(&lock);
  free(ptr);
  return HSA_STATUS_SUCCESS;
}
hsa_status_t hsa_amd_agents_allow_access(uint32_t n, const hsa_agent_t *agents, const uint32_t *flags, const void *ptr) {
  if (n == 0 || !agents || flags) return HSA_STATUS_ERROR_INVALID_ARGUMENT; /* as hsa_ext_amd.h */
  pthread_mutex_lock(&lock);
  range *r = find_base((uintptr_t)ptr, 2);
  if (!r) r = find_base((uintptr_t)ptr, 4);
  if (!r) r = find_base((uintptr_t)ptr, 1);
  if (!r) { pthread_mutex_unlock(&lock); return HSA_STATUS_ERROR_INVALID_ARGUMENT; }
  int access = r->kind == 1 ? AGENT_BIT(r->owner) : 0; /* the list replaces the access set */
  for (uint32_t i = 0; i < n; i++) {
    uint64_t h = agents[i].handle;
    if (h == CPU_AGENT) continue;
    if (!is_gpu(h)) { pthread_mutex_unlock(&lock); return HSA_STATUS_ERROR_INVALID_AGENT; }
    if (r->kind == 1 && h != r->owner && atomic_load(&peer_never)) { pthread_mutex_unlock(&lock); return HSA_STATUS_ERROR_INVALID_ARGUMENT; }
    access |= AGENT_BIT(h);
  }
  r->gpu_allowed = access;
  pthread_mutex_unlock(&lock);
  return HSA_STATUS_SUCCESS;
}

/* ---- locking ----------------------------------------------------------------------------
 * ROCr pins whole pages: two locks of neighbouring buffers on one page overlap, and unlocking
 * one unpins the shared page under the other (counted as a violation while the other lock is
 * live). Every lock call is counted, so a test can require that synchronous copies lock nothing. */
static atomic_int lock_calls = 0;
static atomic_int overlapping_locks = 0;
int mock_hsa_lock_calls(void) { return atomic_load(&lock_calls); }
int mock_hsa_overlapping_locks(void) { return atomic_load(&overlapping_locks); }
#define PAGE_FLOOR(a) ((uintptr_t)(a) & ~(uintptr_t)4095)
#define PAGE_CEIL(a) (((uintptr_t)(a) + 4095) & ~(uintptr_t)4095)
/* Another live lock sharing a page with [base, base+size); call with `lock` held. */
static int shares_a_locked_page(uintptr_t base, size_t size, const range *self) {
  for (int i = 0; i < MAX_RANGES; i++) {
    const range *r = &ranges[i];
    if (r == self || !r->live || r->kind != 3) continue;
    if (PAGE_FLOOR(r->base) < PAGE_CEIL(base + size) && PAGE_FLOOR(base) < PAGE_CEIL(r->base + r->size)) return 1;
  }
  return 0;
}
static hsa_status_t do_lock(void *host, size_t size, hsa_agent_t *agents, int n, void **agent_ptr) {
  if (!host || !size || !agent_ptr || (agents && n <= 0) || (!agents && n != 0)) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  atomic_fetch_add(&lock_calls, 1);
  pthread_mutex_lock(&lock);
  if (shares_a_locked_page((uintptr_t)host, size, NULL)) atomic_fetch_add(&overlapping_locks, 1);
  pthread_mutex_unlock(&lock);
  int gpus = agents ? 0 : ALL_GPUS;
  for (int i = 0; i < n; i++) if (is_gpu(agents[i].handle)) gpus |= AGENT_BIT(agents[i].handle);
  uintptr_t agent_base = gpus ? (uintptr_t)host + AGENT_OFFSET : 0;
  if (!add_range_owned((uintptr_t)host, size, 3, agent_base, gpus, 0)) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  *agent_ptr = (void *)agent_base;
  return HSA_STATUS_SUCCESS;
}
hsa_status_t hsa_amd_memory_lock(void *host, size_t size, hsa_agent_t *agents, int n, void **agent_ptr) {
  return do_lock(host, size, agents, n, agent_ptr);
}
hsa_status_t hsa_amd_memory_lock_to_pool(void *host, size_t size, hsa_agent_t *agents, int n,
                                         hsa_amd_memory_pool_t pool, uint32_t flags, void **agent_ptr) {
  if (pool.handle != POOL_SYSTEM && pool.handle != POOL_KERNARG) return HSA_STATUS_ERROR_INVALID_MEMORY_POOL;
  if (flags) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  return do_lock(host, size, agents, n, agent_ptr);
}
hsa_status_t hsa_amd_memory_unlock(void *host) {
  pthread_mutex_lock(&lock);
  range *r = find_base((uintptr_t)host, 3);
  if (r && shares_a_locked_page(r->base, r->size, r)) atomic_fetch_add(&violations, 1); /* unpins a page another lock uses */
  if (r) r->live = 0;
  pthread_mutex_unlock(&lock);
  if (!r) atomic_fetch_add(&violations, 1); /* undefined behaviour in ROCr */
  return HSA_STATUS_SUCCESS;
}
hsa_status_t hsa_memory_register(void *p, size_t n) { (void)p; (void)n; return HSA_STATUS_SUCCESS; }
hsa_status_t hsa_memory_deregister(void *p, size_t n) { (void)p; (void)n; return HSA_STATUS_SUCCESS; }

/* ---- IPC --------------------------------------------------------------------------------
 * A handle names a VRAM range: {magic, range index, base low, base high, size low, size high}.
 * Creating needs the exact base and the full (granule-rounded) length; attaching needs a live
 * exported range and its full length, and maps it at a new address (base + 2^45) reachable by the
 * listed GPUs (all when none are listed); detaching needs exactly an attached address. */
#define IPC_MAGIC 0x49504331u
#define IPC_OFFSET ((uintptr_t)1 << 45)
hsa_status_t hsa_amd_ipc_memory_create(void *ptr, size_t len, hsa_amd_ipc_memory_t *handle) {
  if (!handle) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  pthread_mutex_lock(&lock);
  range *r = find_base((uintptr_t)ptr, 1);
  if (!r || r->size != len) { pthread_mutex_unlock(&lock); return HSA_STATUS_ERROR_INVALID_ARGUMENT; }
  uint64_t base = r->base, size = r->size;
  memset(handle, 0, sizeof *handle);
  handle->handle[0] = IPC_MAGIC;
  handle->handle[1] = (uint32_t)(r - ranges);
  handle->handle[2] = (uint32_t)base; handle->handle[3] = (uint32_t)(base >> 32);
  handle->handle[4] = (uint32_t)size; handle->handle[5] = (uint32_t)(size >> 32);
  pthread_mutex_unlock(&lock);
  return HSA_STATUS_SUCCESS;
}
hsa_status_t hsa_amd_ipc_memory_attach(const hsa_amd_ipc_memory_t *handle, size_t len, uint32_t n,
                                       const hsa_agent_t *agents, void **mapped) {
  if (!handle || !mapped || handle->handle[0] != IPC_MAGIC || handle->handle[1] >= MAX_RANGES)
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  uintptr_t base = (uintptr_t)handle->handle[2] | (uintptr_t)handle->handle[3] << 32;
  size_t size = (size_t)handle->handle[4] | (size_t)handle->handle[5] << 32;
  int access = n ? 0 : ALL_GPUS;
  for (uint32_t i = 0; i < n; i++) {
    if (!is_gpu(agents[i].handle) && agents[i].handle != CPU_AGENT) return HSA_STATUS_ERROR_INVALID_AGENT;
    if (is_gpu(agents[i].handle)) access |= AGENT_BIT(agents[i].handle);
  }
  pthread_mutex_lock(&lock);
  range *r = &ranges[handle->handle[1]];
  /* As ROCr for a handle of a whole allocation: `len` is not checked, the whole allocation is
     mapped (the caller learns its size from hsa_amd_pointer_info). */
  (void)len;
  int ok = r->live && r->kind == 1 && r->base == base && r->size == size;
  uint64_t owner = r->owner;
  pthread_mutex_unlock(&lock);
  if (!ok) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (!add_range_owned(base, size, 5, base + IPC_OFFSET, access, owner)) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  *mapped = (void *)(base + IPC_OFFSET);
  return HSA_STATUS_SUCCESS;
}
/* Reports the allocation a pointer lies in. For an IPC mapping that is the exported allocation
   itself, as older ROCr reports it (newer ROCr reports the length the attach was given). */
hsa_status_t hsa_amd_pointer_info(const void *ptr, hsa_amd_pointer_info_t *info,
                                  void *(*alloc)(size_t), uint32_t *num_agents,
                                  hsa_agent_t **accessible) {
  if (!info || info->size < sizeof(hsa_amd_pointer_info_t)) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  (void)alloc;
  if (num_agents) *num_agents = 0;
  if (accessible) *accessible = NULL;
  uintptr_t p = (uintptr_t)ptr;
  info->type = HSA_EXT_POINTER_TYPE_UNKNOWN;
  info->agentBaseAddress = NULL;
  info->hostBaseAddress = NULL;
  info->sizeInBytes = 0;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < MAX_RANGES; i++) {
    range *r = &ranges[i];
    if (!r->live) continue;
    uintptr_t seen = r->kind == 5 ? r->agent_base : r->base;
    if (p < seen || p >= seen + r->size) continue;
    info->type = r->kind == 5 ? HSA_EXT_POINTER_TYPE_IPC
                 : r->kind == 3 ? HSA_EXT_POINTER_TYPE_LOCKED
                                : HSA_EXT_POINTER_TYPE_HSA;
    info->agentBaseAddress = (void *)(r->agent_base ? r->agent_base : r->base);
    info->hostBaseAddress = r->kind == 1 || r->kind == 5 ? NULL : (void *)r->base;
    info->sizeInBytes = r->size;
    break;
  }
  pthread_mutex_unlock(&lock);
  return HSA_STATUS_SUCCESS;
}
hsa_status_t hsa_amd_ipc_memory_detach(void *mapped) {
  pthread_mutex_lock(&lock);
  range *r = NULL;
  for (int i = 0; i < MAX_RANGES && !r; i++)
    if (ranges[i].live && ranges[i].kind == 5 && ranges[i].agent_base == (uintptr_t)mapped) r = &ranges[i];
  if (r) r->live = 0;
  pthread_mutex_unlock(&lock);
  if (!r) { atomic_fetch_add(&violations, 1); return HSA_STATUS_ERROR_INVALID_ARGUMENT; }
  return HSA_STATUS_SUCCESS;
}

/* ---- signals ---------------------------------------------------------------------------- */
/* Threads of the stand-in that wait for a signal (copies waiting for their dependencies, waits
 * of the backend) sleep until a write of that signal wakes them, instead of polling: a thousand
 * queued copies polling would starve the thread that enqueues them. Signals share wake-ups by
 * handle among a few buckets; a wait also ends after `max_ns`, whatever happens. */
#define SIGNAL_WAKE_BUCKETS 64
static struct {
  pthread_mutex_t lock;
  pthread_cond_t written;
} signal_wake[SIGNAL_WAKE_BUCKETS] = {
    [0 ... SIGNAL_WAKE_BUCKETS - 1] = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER}};
/* Wakes the waiters of signal `m`, after its value was written. */
static void signal_written(mock_signal *m) {
  size_t b = (size_t)(m - signals) % SIGNAL_WAKE_BUCKETS;
  pthread_mutex_lock(&signal_wake[b].lock);
  pthread_cond_broadcast(&signal_wake[b].written);
  pthread_mutex_unlock(&signal_wake[b].lock);
}
/* Sleeps while signal `m` still holds `seen`, until a write of it or `max_ns` pass. */
static void await_signal_write(mock_signal *m, int64_t seen, uint64_t max_ns) {
  size_t b = (size_t)(m - signals) % SIGNAL_WAKE_BUCKETS;
  struct timespec ts; /* pthread_cond_timedwait's clock: CLOCK_REALTIME */
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t until = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + max_ns;
  ts.tv_sec = (time_t)(until / 1000000000ull);
  ts.tv_nsec = (long)(until % 1000000000ull);
  pthread_mutex_lock(&signal_wake[b].lock);
  /* Checked under the lock a writer takes after writing: no write is missed. */
  if (atomic_load(&m->value) == seen) pthread_cond_timedwait(&signal_wake[b].written, &signal_wake[b].lock, &ts);
  pthread_mutex_unlock(&signal_wake[b].lock);
}
static hsa_status_t new_signal(hsa_signal_value_t initial, hsa_signal_t *out) {
  int i = atomic_fetch_add(&next_signal, 1);
  if (i >= MAX_SIGNALS) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  atomic_store(&signals[i].value, initial);
  atomic_store(&signals[i].used, 1);
  out->handle = (uint64_t)i + 1;
  return HSA_STATUS_SUCCESS;
}
hsa_status_t hsa_signal_create(hsa_signal_value_t initial, uint32_t n, const hsa_agent_t *c, hsa_signal_t *out) {
  (void)n; (void)c;
  return new_signal(initial, out);
}
hsa_status_t hsa_amd_signal_create(hsa_signal_value_t initial, uint32_t n, const hsa_agent_t *c, uint64_t attr, hsa_signal_t *out) {
  (void)n; (void)c; (void)attr;
  return new_signal(initial, out);
}
hsa_status_t hsa_signal_destroy(hsa_signal_t s) {
  mock_signal *m = sig(s);
  if (!m) return HSA_STATUS_ERROR_INVALID_SIGNAL;
  if (atomic_load(&m->waited_on_by_pending) > 0) atomic_fetch_add(&violations, 1);
  atomic_store(&m->destroyed, 1);
  return HSA_STATUS_SUCCESS;
}
hsa_signal_value_t hsa_signal_load_scacquire(hsa_signal_t s) { mock_signal *m = sig(s); return m ? atomic_load(&m->value) : 0; }
hsa_signal_value_t hsa_signal_load_relaxed(hsa_signal_t s) { return hsa_signal_load_scacquire(s); }
void hsa_signal_store_screlease(hsa_signal_t s, hsa_signal_value_t v) {
  mock_signal *m = sig(s);
  if (!m) return;
  hsa_signal_value_t old = atomic_exchange(&m->value, v);
  signal_written(m);
  /* Doorbells are rung with ever higher packet indices (a lower one after a higher one would
   * tell the packet processor less work is ready than before). */
  if (atomic_load(&m->doorbell) && v < old) atomic_fetch_add(&doorbell_regressions, 1);
}
void hsa_signal_store_relaxed(hsa_signal_t s, hsa_signal_value_t v) { hsa_signal_store_screlease(s, v); }
static int satisfied(int64_t v, hsa_signal_condition_t c, int64_t cmp) {
  switch ((int)c) {
  case HSA_SIGNAL_CONDITION_EQ: return v == cmp;
  case HSA_SIGNAL_CONDITION_NE: return v != cmp;
  case HSA_SIGNAL_CONDITION_LT: return v < cmp;
  default: return v >= cmp;
  }
}
hsa_signal_value_t hsa_signal_wait_scacquire(hsa_signal_t s, hsa_signal_condition_t c, hsa_signal_value_t cmp,
                                             uint64_t timeout, hsa_wait_state_t state) {
  (void)state;
  mock_signal *m = sig(s);
  if (!m) return 0;
  uint64_t deadline = timeout == UINT64_MAX ? UINT64_MAX : now_ns() + timeout;
  for (;;) {
    int64_t v = atomic_load(&m->value);
    uint64_t now = now_ns();
    if (satisfied(v, c, cmp) || now >= deadline) return v;
    await_signal_write(m, v, deadline - now < 20000000ull ? deadline - now : 20000000ull);
  }
}
hsa_signal_value_t hsa_signal_wait_relaxed(hsa_signal_t s, hsa_signal_condition_t c, hsa_signal_value_t cmp,
                                           uint64_t timeout, hsa_wait_state_t state) {
  return hsa_signal_wait_scacquire(s, c, cmp, timeout, state);
}

/* ---- copies and fill -------------------------------------------------------------------- */
typedef struct {
  uintptr_t dst, src;
  size_t size;
  int fail;
  uint32_t ndeps;
  hsa_signal_t deps[64];
  hsa_signal_t done;
  int log_index;
} copy_job;

static void *copy_thread(void *arg) {
  copy_job *job = arg;
  for (;;) { /* wait for every dependency to reach 0; a negative one means never */
    mock_signal *pending = NULL;
    int64_t seen = 0;
    for (uint32_t i = 0; i < job->ndeps && !pending; i++) {
      mock_signal *dep = sig(job->deps[i]);
      seen = atomic_load(&dep->value);
      if (seen != 0) pending = dep;
    }
    if (!pending) break;
    await_signal_write(pending, seen, 20000000ull);
  }
  for (uint32_t i = 0; i < job->ndeps; i++) atomic_fetch_sub(&signals[job->deps[i].handle - 1].waited_on_by_pending, 1);
  mock_signal *done = sig(job->done);
  done->start = now_ns();
  wait_while_copies_held();
  usleep((useconds_t)atomic_load(&delay_us));
  if (!job->fail) memcpy((void *)job->dst, (const void *)job->src, job->size);
  done->end = now_ns();
  if (job->log_index < MAX_COPY_LOG) copy_end_ns[job->log_index] = done->end;
  atomic_store(&done->timed, atomic_load(&profiling));
  if (job->fail) atomic_store(&done->value, -1);
  else atomic_fetch_sub(&done->value, 1);
  signal_written(done);
  free(job);
  return NULL;
}

hsa_status_t hsa_amd_memory_async_copy(void *dst, hsa_agent_t dst_agent, const void *src, hsa_agent_t src_agent,
                                       size_t size, uint32_t ndeps, const hsa_signal_t *deps, hsa_signal_t done) {
  if (!dst || !src || done.handle == 0 || ndeps > 64) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (!sig(done)) return HSA_STATUS_ERROR_INVALID_SIGNAL;
  uint64_t da = dst_agent.handle, sa = src_agent.handle;
  if ((da != CPU_AGENT && !is_gpu(da)) || (sa != CPU_AGENT && !is_gpu(sa))) return HSA_STATUS_ERROR_INVALID_AGENT;
  /* Each GPU agent named must reach both buffers (hsa_ext_amd.h); with no GPU named, GPU 0's DMA
   * engine is assumed, as before. */
  int agents = (is_gpu(da) ? AGENT_BIT(da) : 0) | (is_gpu(sa) ? AGENT_BIT(sa) : 0);
  if (!agents) agents = AGENT_BIT(GPU_AGENT);
  uint64_t downer = 0, sowner = 0;
  uintptr_t d = access_by(agents, (uintptr_t)dst, size, &downer), s = access_by(agents, (uintptr_t)src, size, &sowner);
  if (!d || !s) return HSA_STATUS_ERROR_INVALID_ARGUMENT; /* not accessible to the copy agents */
  /* The agent named for a side is the GPU owning it (VRAM) or the CPU (host memory). */
  if ((downer ? downer : CPU_AGENT) != da || (sowner ? sowner : CPU_AGENT) != sa) {
    atomic_fetch_add(&bad_agent_copies, 1);
    return HSA_STATUS_ERROR_INVALID_AGENT;
  }
  copy_job *job = calloc(1, sizeof *job);
  job->dst = d; job->src = s; job->size = size; job->ndeps = ndeps; job->done = done;
  job->fail = atomic_exchange(&fail_next_copy, 0);
  for (uint32_t i = 0; i < ndeps; i++) {
    if (!sig(deps[i])) { free(job); return HSA_STATUS_ERROR_INVALID_SIGNAL; }
    job->deps[i] = deps[i];
    atomic_fetch_add(&signals[deps[i].handle - 1].waited_on_by_pending, 1);
  }
  job->log_index = atomic_fetch_add(&copies_started, 1);
  pthread_t t;
  pthread_create(&t, NULL, copy_thread, job);
  pthread_detach(t);
  return HSA_STATUS_SUCCESS;
}
hsa_status_t hsa_memory_copy(void *dst, const void *src, size_t size) {
  memcpy(dst, src, size); /* ROCr locks pageable memory itself for this synchronous copy */
  return HSA_STATUS_SUCCESS;
}
hsa_status_t hsa_amd_memory_fill(void *ptr, uint32_t value, size_t count) {
  uintptr_t p = (uintptr_t)ptr;
  if (p % 4) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  pthread_mutex_lock(&lock);
  int inside = 0;
  for (int i = 0; i < MAX_RANGES; i++)
    if (ranges[i].live && ranges[i].kind == 1 && p >= ranges[i].base && p + 4 * count <= ranges[i].base + ranges[i].size) inside = 1;
  pthread_mutex_unlock(&lock);
  if (!inside) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  uint32_t *w = ptr;
  for (size_t i = 0; i < count; i++) w[i] = value;
  return HSA_STATUS_SUCCESS;
}

/* ---- profiling -------------------------------------------------------------------------- */
hsa_status_t hsa_amd_profiling_async_copy_enable(bool enable) { atomic_store(&profiling, enable); return HSA_STATUS_SUCCESS; }
hsa_status_t hsa_amd_profiling_get_async_copy_time(hsa_signal_t s, hsa_amd_profiling_async_copy_time_t *t) {
  mock_signal *m = sig(s);
  if (!m || !atomic_load(&m->timed)) return HSA_STATUS_ERROR;
  t->start = m->start; t->end = m->end;
  return HSA_STATUS_SUCCESS;
}

/* ---- code objects and executables ------------------------------------------------------- */
typedef struct {
  const uint8_t *code;
  size_t size;
  int live;
} mock_reader;

typedef struct {
  uint8_t *code; /* the executable's own copy, as a loader's */
  size_t size;
  int loaded, frozen, live;
} mock_executable;

#define MAX_EXECUTABLES 256
static mock_reader readers[MAX_EXECUTABLES];
static mock_executable executables[MAX_EXECUTABLES];
static atomic_int next_reader = 0, next_executable = 0;

static int is_amdgpu_elf(const uint8_t *p, size_t n) {
  if (n < sizeof(Elf64_Ehdr) || memcmp(p, ELFMAG, SELFMAG) != 0 || p[EI_CLASS] != ELFCLASS64) return 0;
  const Elf64_Ehdr *h = (const Elf64_Ehdr *)p;
  return h->e_machine == EM_AMDGPU;
}

/* The file offset of symbol `name`'s bytes, or 0. */
static size_t find_symbol(const uint8_t *p, size_t n, const char *name) {
  const Elf64_Ehdr *h = (const Elf64_Ehdr *)p;
  if (h->e_shoff == 0 || h->e_shoff + (size_t)h->e_shnum * sizeof(Elf64_Shdr) > n) return 0;
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(p + h->e_shoff);
  for (int i = 0; i < h->e_shnum; i++) {
    if (sh[i].sh_type != SHT_SYMTAB && sh[i].sh_type != SHT_DYNSYM) continue;
    if (sh[i].sh_link >= h->e_shnum) continue;
    const Elf64_Shdr *strtab = &sh[sh[i].sh_link];
    size_t count = sh[i].sh_size / sizeof(Elf64_Sym);
    if (sh[i].sh_offset + sh[i].sh_size > n || strtab->sh_offset + strtab->sh_size > n) continue;
    const Elf64_Sym *syms = (const Elf64_Sym *)(p + sh[i].sh_offset);
    for (size_t k = 0; k < count; k++) {
      if (syms[k].st_name >= strtab->sh_size) continue;
      if (strcmp((const char *)p + strtab->sh_offset + syms[k].st_name, name) != 0) continue;
      if (syms[k].st_shndx == SHN_UNDEF || syms[k].st_shndx >= h->e_shnum) return 0;
      const Elf64_Shdr *sec = &sh[syms[k].st_shndx];
      size_t off = sec->sh_offset + (syms[k].st_value - sec->sh_addr);
      return off + 64 <= n ? off : 0;
    }
  }
  return 0;
}

hsa_status_t hsa_code_object_reader_create_from_memory(const void *code, size_t size, hsa_code_object_reader_t *out) {
  if (!code || !out) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (!is_amdgpu_elf(code, size)) return HSA_STATUS_ERROR_INVALID_CODE_OBJECT;
  int i = atomic_fetch_add(&next_reader, 1);
  if (i >= MAX_EXECUTABLES) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  readers[i] = (mock_reader){code, size, 1};
  atomic_fetch_add(&live_readers, 1);
  out->handle = (uint64_t)i + 1;
  return HSA_STATUS_SUCCESS;
}
static mock_reader *reader_of(hsa_code_object_reader_t r) {
  if (r.handle == 0 || r.handle > (uint64_t)atomic_load(&next_reader)) return NULL;
  mock_reader *m = &readers[r.handle - 1];
  return m->live ? m : NULL;
}
hsa_status_t hsa_code_object_reader_destroy(hsa_code_object_reader_t r) {
  mock_reader *m = reader_of(r);
  if (!m) { atomic_fetch_add(&violations, 1); return HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER; }
  m->live = 0;
  atomic_fetch_sub(&live_readers, 1);
  return HSA_STATUS_SUCCESS;
}
static mock_executable *executable_of(hsa_executable_t e) {
  if (e.handle == 0 || e.handle > (uint64_t)atomic_load(&next_executable)) return NULL;
  mock_executable *m = &executables[e.handle - 1];
  return m->live ? m : NULL;
}
hsa_status_t hsa_executable_create_alt(hsa_profile_t profile, hsa_default_float_rounding_mode_t rounding,
                                       const char *options, hsa_executable_t *out) {
  (void)options;
  if (profile != HSA_PROFILE_BASE || rounding != HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT || !out)
    return HSA_STATUS_ERROR_INVALID_ARGUMENT; /* the GPU agent is a base-profile agent */
  int i = atomic_fetch_add(&next_executable, 1);
  if (i >= MAX_EXECUTABLES) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  executables[i] = (mock_executable){NULL, 0, 0, 0, 1};
  atomic_fetch_add(&live_executables, 1);
  out->handle = (uint64_t)i + 1;
  return HSA_STATUS_SUCCESS;
}
hsa_status_t hsa_executable_load_agent_code_object(hsa_executable_t e, hsa_agent_t agent, hsa_code_object_reader_t r,
                                                   const char *options, hsa_loaded_code_object_t *loaded) {
  (void)options; (void)loaded;
  mock_executable *m = executable_of(e);
  mock_reader *rd = reader_of(r);
  if (!m) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  if (!rd) return HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER;
  if (agent.handle != GPU_AGENT) return HSA_STATUS_ERROR_INVALID_AGENT;
  if (m->frozen) return HSA_STATUS_ERROR_FROZEN_EXECUTABLE;
  if (!is_amdgpu_elf(rd->code, rd->size)) { atomic_fetch_add(&violations, 1); return HSA_STATUS_ERROR_INVALID_CODE_OBJECT; }
  m->code = malloc(rd->size);
  memcpy(m->code, rd->code, rd->size);
  m->size = rd->size;
  m->loaded = 1;
  atomic_fetch_add(&executables_loaded, 1);
  return HSA_STATUS_SUCCESS;
}
hsa_status_t hsa_executable_freeze(hsa_executable_t e, const char *options) {
  (void)options;
  mock_executable *m = executable_of(e);
  if (!m) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  m->frozen = 1;
  return HSA_STATUS_SUCCESS;
}
/* A symbol handle: executable index in the high 32 bits, descriptor file offset in the low. */
hsa_status_t hsa_executable_get_symbol_by_name(hsa_executable_t e, const char *name, const hsa_agent_t *agent,
                                               hsa_executable_symbol_t *out) {
  mock_executable *m = executable_of(e);
  if (!m) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  if (!m->frozen || !m->loaded) { atomic_fetch_add(&violations, 1); return HSA_STATUS_ERROR_INVALID_EXECUTABLE; }
  if (!agent || agent->handle != GPU_AGENT) return HSA_STATUS_ERROR_INVALID_AGENT;
  size_t len = strlen(name);
  if (len < 3 || strcmp(name + len - 3, ".kd") != 0) return HSA_STATUS_ERROR_INVALID_SYMBOL_NAME;
  size_t off = find_symbol(m->code, m->size, name);
  if (!off) return HSA_STATUS_ERROR_INVALID_SYMBOL_NAME;
  out->handle = (e.handle << 32) | off;
  return HSA_STATUS_SUCCESS;
}
hsa_status_t hsa_executable_symbol_get_info(hsa_executable_symbol_t s, hsa_executable_symbol_info_t attr, void *value) {
  hsa_executable_t e = {s.handle >> 32};
  mock_executable *m = executable_of(e);
  if (!m) { atomic_fetch_add(&violations, 1); return HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL; }
  const uint8_t *kd = m->code + (s.handle & 0xffffffffu);
  /* The kernel descriptor (AMDGPUUsage): group segment size at 0, private at 4, kernarg at 8. */
  switch ((int)attr) {
  case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT: *(uint64_t *)value = (uint64_t)(uintptr_t)kd; return HSA_STATUS_SUCCESS;
  case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE: memcpy(value, kd, 4); return HSA_STATUS_SUCCESS;
  case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE: memcpy(value, kd + 4, 4); return HSA_STATUS_SUCCESS;
  case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE: memcpy(value, kd + 8, 4); return HSA_STATUS_SUCCESS;
  case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_ALIGNMENT: *(uint32_t *)value = 16; return HSA_STATUS_SUCCESS;
  case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_DYNAMIC_CALLSTACK: {
    /* kernel_code_properties (u16 at 56), bit 11: USES_DYNAMIC_STACK. */
    uint16_t properties;
    memcpy(&properties, kd + 56, 2);
    *(bool *)value = (properties >> 11) & 1;
    return HSA_STATUS_SUCCESS;
  }
  default: return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}
hsa_status_t hsa_executable_destroy(hsa_executable_t e) {
  mock_executable *m = executable_of(e);
  if (!m) { atomic_fetch_add(&violations, 1); return HSA_STATUS_ERROR_INVALID_EXECUTABLE; }
  m->live = 0; /* the code copy is kept: a late dispatch reading its descriptor is caught below */
  atomic_fetch_sub(&live_executables, 1);
  return HSA_STATUS_SUCCESS;
}
static int kernel_object_live(uint64_t object) {
  int n = atomic_load(&next_executable);
  for (int i = 0; i < n && i < MAX_EXECUTABLES; i++) {
    mock_executable *m = &executables[i];
    if (m->live && m->code && object >= (uintptr_t)m->code && object + 64 <= (uintptr_t)m->code + m->size) return 1;
  }
  return 0;
}

/* ---- AQL queues and the packet processor ------------------------------------------------ */
typedef struct {
  hsa_queue_t q; /* first: the runtime hands out a pointer to it */
  _Atomic uint64_t read, write;
  atomic_int stop;
  int live;
  pthread_t thread;
  void (*callback)(hsa_status_t, hsa_queue_t *, void *);
  void *data;
  uint32_t barriers_seen;
  atomic_int outstanding;                    /* launched dispatches not yet complete */
  _Atomic uintptr_t in_flight[MAX_IN_FLIGHT]; /* their kernarg addresses */
} mock_queue;

static mock_queue queues[MAX_QUEUES];
static pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;

#define PACKET_TYPE(h) ((h) & 0xff)

static uint16_t header_at(const uint8_t *slot) { return __atomic_load_n((const uint16_t *)slot, __ATOMIC_ACQUIRE); }

/* Whether a packet still valid in some ring names a kernarg buffer in [base, base + size). */
static int kernarg_in_use(uintptr_t base, size_t size) {
  int used = 0;
  pthread_mutex_lock(&qlock);
  for (int i = 0; i < MAX_QUEUES && !used; i++) {
    mock_queue *mq = &queues[i];
    if (!mq->live) continue;
    for (uint32_t k = 0; k < mq->q.size && !used; k++) {
      const uint8_t *slot = (const uint8_t *)mq->q.base_address + 64 * (size_t)k;
      if (PACKET_TYPE(header_at(slot)) != HSA_PACKET_TYPE_KERNEL_DISPATCH) continue;
      const hsa_kernel_dispatch_packet_t *p = (const hsa_kernel_dispatch_packet_t *)slot;
      uintptr_t a = (uintptr_t)p->kernarg_address;
      if (a >= base && a < base + size) used = 1;
    }
    for (int k = 0; k < MAX_IN_FLIGHT && !used; k++) {
      uintptr_t a = atomic_load(&mq->in_flight[k]);
      if (a && a >= base && a < base + size) used = 1;
    }
  }
  pthread_mutex_unlock(&qlock);
  return used;
}

/* Waits until `s` is 0 (a negative value never is: the packet waits forever, as on ROCr) or the
 * queue stops. Returns 0 when stopped. */
static int wait_zero(mock_queue *mq, hsa_signal_t s) {
  mock_signal *m = sig(s);
  if (!m) { atomic_fetch_add(&violations, 1); return 1; }
  while (atomic_load(&m->value) != 0) {
    if (atomic_load(&mq->stop)) return 0;
    usleep(50);
  }
  return 1;
}

/* A launched dispatch "running" on the GPU: its own thread, so that dispatches the packet
 * processor launched back to back overlap unless a barrier bit orders them. */
typedef struct {
  mock_queue *mq;
  hsa_signal_t completion;
  int log_index, slot;
} running_t;

static void *run_dispatch(void *arg) {
  running_t *r = arg;
  usleep((useconds_t)atomic_load(&dispatch_delay_us));
  if (r->log_index < MAX_DISPATCH_LOG) __atomic_store_n(&dispatch_log[r->log_index].end_ns, now_ns(), __ATOMIC_RELEASE);
  atomic_store(&r->mq->in_flight[r->slot], 0);
  atomic_fetch_add(&dispatches, 1);
  atomic_fetch_sub(&r->mq->outstanding, 1);
  if (r->completion.handle) {
    mock_signal *m = sig(r->completion);
    if (m) {
      atomic_fetch_sub(&m->value, 1);
      signal_written(m);
    }
  }
  free(r);
  return NULL;
}

/* The barrier bit: wait until every dispatch launched before completed. 0 when stopped. */
static int wait_idle(mock_queue *mq) {
  while (atomic_load(&mq->outstanding) != 0) {
    if (atomic_load(&mq->stop)) return 0;
    usleep(20);
  }
  return 1;
}

/* ---- system event handlers (hsa_amd_register_system_event_handler) ---------------------- */
#define MAX_EVENT_HANDLERS 8
static hsa_amd_system_event_callback_t event_handlers[MAX_EVENT_HANDLERS];
static void *event_data[MAX_EVENT_HANDLERS];
static atomic_int event_handler_count = 0;
#define FAULT_ADDRESS 0xdead0000ull

hsa_status_t hsa_amd_register_system_event_handler(hsa_amd_system_event_callback_t callback, void *data) {
  if (!callback) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  pthread_mutex_lock(&lock);
  int n = atomic_load(&event_handler_count);
  if (n >= MAX_EVENT_HANDLERS) { pthread_mutex_unlock(&lock); return HSA_STATUS_ERROR; }
  event_handlers[n] = callback;
  event_data[n] = data;
  atomic_store(&event_handler_count, n + 1);
  pthread_mutex_unlock(&lock);
  return HSA_STATUS_SUCCESS;
}

/* Calls every handler with a GPU memory fault event; 1 when one of them returned SUCCESS. */
static int report_memory_fault(void) {
  hsa_amd_event_t event;
  memset(&event, 0, sizeof event);
  event.event_type = HSA_AMD_GPU_MEMORY_FAULT_EVENT;
  event.memory_fault.agent.handle = GPU_AGENT;
  event.memory_fault.virtual_address = FAULT_ADDRESS;
  event.memory_fault.fault_reason_mask = HSA_AMD_MEMORY_FAULT_PAGE_NOT_PRESENT;
  int handled = 0, n = atomic_load(&event_handler_count);
  for (int i = 0; i < n; i++)
    if (event_handlers[i](&event, event_data[i]) == HSA_STATUS_SUCCESS) handled = 1;
  return handled;
}

static void *packet_processor(void *arg) {
  mock_queue *mq = arg;
  const uint64_t mask = mq->q.size - 1;
  for (;;) {
    uint64_t r = atomic_load(&mq->read);
    uint8_t *slot = (uint8_t *)mq->q.base_address + 64 * (size_t)(r & mask);
    uint16_t h = header_at(slot);
    if (PACKET_TYPE(h) == HSA_PACKET_TYPE_INVALID) {
      if (atomic_load(&mq->stop)) return NULL;
      usleep(50);
      continue;
    }
    /* The producer must ring the doorbell with an index covering this packet. Generous: a
     * producer preempted between publishing and ringing (a loaded machine) breaks no contract;
     * one that never rings still trips it. */
    uint64_t deadline = now_ns() + 20000000000ull;
    while (hsa_signal_load_scacquire(mq->q.doorbell_signal) < (int64_t)r) {
      if (atomic_load(&mq->stop)) return NULL;
      if (now_ns() > deadline) { atomic_fetch_add(&violations, 1); break; }
      usleep(50);
    }
    hsa_signal_t completion = {0};
    running_t *started = NULL;
    if ((h >> HSA_PACKET_HEADER_BARRIER) & 1) {
      if (!wait_idle(mq)) return NULL;
    }
    if (PACKET_TYPE(h) == HSA_PACKET_TYPE_BARRIER_AND) {
      hsa_barrier_and_packet_t *p = (hsa_barrier_and_packet_t *)slot;
      if (p->reserved0 || p->reserved1 || p->reserved2) atomic_fetch_add(&violations, 1);
      for (int i = 0; i < 5; i++) {
        if (p->dep_signal[i].handle == 0) continue;
        atomic_fetch_add(&signals[p->dep_signal[i].handle - 1].waited_on_by_pending, 1);
        int ok = wait_zero(mq, p->dep_signal[i]);
        atomic_fetch_sub(&signals[p->dep_signal[i].handle - 1].waited_on_by_pending, 1);
        if (!ok) return NULL;
      }
      completion = p->completion_signal;
      mq->barriers_seen++;
      atomic_fetch_add(&barrier_packets, 1);
    } else if (PACKET_TYPE(h) == HSA_PACKET_TYPE_KERNEL_DISPATCH) {
      hsa_kernel_dispatch_packet_t *p = (hsa_kernel_dispatch_packet_t *)slot;
      if (!kernel_object_live(p->kernel_object)) atomic_fetch_add(&violations, 1);
      uint32_t kernarg_size = 0;
      if (p->kernel_object) memcpy(&kernarg_size, (const uint8_t *)(uintptr_t)p->kernel_object + 8, 4);
      if (kernarg_size && !gpu_access((uintptr_t)p->kernarg_address, kernarg_size)) atomic_fetch_add(&violations, 1);
      int failure = atomic_exchange(&fail_next_dispatch, 0);
      if (failure == 1) {
        /* A queue error: the runtime reports it through the queue callback; the packet never
         * completes and the queue processes nothing more. */
        if (mq->callback) mq->callback((hsa_status_t)HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION, &mq->q, mq->data);
        while (!atomic_load(&mq->stop)) usleep(100);
        return NULL;
      }
      if (failure == 2) {
        /* A memory fault: ROCr hands it to the registered system event handlers (no queue
         * callback); without one that returns SUCCESS it prints and aborts the process, counted
         * here instead. The packet never completes; the queue processes nothing more. */
        if (!report_memory_fault()) atomic_fetch_add(&fault_aborts, 1);
        while (!atomic_load(&mq->stop)) usleep(100);
        return NULL;
      }
      int index = atomic_fetch_add(&dispatches_launched, 1);
      mock_dispatch_t *log = index < MAX_DISPATCH_LOG ? &dispatch_log[index] : NULL;
      if (log) {
        memcpy(log->packet, slot, 64);
        log->kernarg_size = kernarg_size;
        size_t n = kernarg_size < KERNARG_LOG_BYTES ? kernarg_size : KERNARG_LOG_BYTES;
        if (p->kernarg_address && n) memcpy(log->kernarg, p->kernarg_address, n);
        log->barriers_before = mq->barriers_seen;
        log->end_ns = 0;
        log->start_ns = now_ns();
      }
      running_t *run = malloc(sizeof *run);
      run->mq = mq;
      run->completion = p->completion_signal;
      run->log_index = index;
      run->slot = -1;
      while (run->slot < 0) {
        for (int k = 0; k < MAX_IN_FLIGHT && run->slot < 0; k++) {
          uintptr_t none = 0;
          uintptr_t a = (uintptr_t)p->kernarg_address;
          if (atomic_compare_exchange_strong(&mq->in_flight[k], &none, a ? a : 1)) run->slot = k;
        }
        if (run->slot < 0) usleep(50);
      }
      atomic_fetch_add(&mq->outstanding, 1);
      started = run;
    } else {
      atomic_fetch_add(&violations, 1); /* this backend only writes the two packet types */
    }
    /* Retire: the slot becomes INVALID and reusable, then the completion signal drops. A
     * dispatch starts running only now, so that it cannot complete while its slot still holds
     * a header naming its kernel arguments (which the backend may free once it completes:
     * freeing them is a violation while a live slot names them). What it needs was copied
     * into `run`, the log and in_flight[] (which keeps its kernarg in use until it ends). */
    __atomic_store_n((uint16_t *)slot, (uint16_t)HSA_PACKET_TYPE_INVALID, __ATOMIC_RELEASE);
    atomic_store(&mq->read, r + 1);
    if (started) {
      pthread_t t;
      pthread_create(&t, NULL, run_dispatch, started);
      pthread_detach(t);
    }
    if (completion.handle) {
      mock_signal *m = sig(completion);
      if (m) {
        atomic_fetch_sub(&m->value, 1);
        signal_written(m);
      }
    }
  }
}

hsa_status_t hsa_queue_create(hsa_agent_t agent, uint32_t size, hsa_queue_type32_t type,
                              void (*callback)(hsa_status_t, hsa_queue_t *, void *), void *data,
                              uint32_t private_segment_size, uint32_t group_segment_size, hsa_queue_t **out) {
  (void)private_segment_size; (void)group_segment_size;
  if (agent.handle != GPU_AGENT) return HSA_STATUS_ERROR_INVALID_AGENT;
  if (!out || size == 0 || (size & (size - 1)) || size > 131072 || type > HSA_QUEUE_TYPE_COOPERATIVE)
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  pthread_mutex_lock(&qlock);
  mock_queue *mq = NULL;
  for (int i = 0; i < MAX_QUEUES && !mq; i++) if (!queues[i].live) mq = &queues[i];
  if (!mq) { pthread_mutex_unlock(&qlock); return HSA_STATUS_ERROR_OUT_OF_RESOURCES; }
  void *ring = aligned_alloc(64, (size_t)size * 64);
  for (uint32_t k = 0; k < size; k++) ((uint16_t *)ring)[k * 32] = HSA_PACKET_TYPE_INVALID;
  memset(mq, 0, sizeof *mq);
  mq->q.type = type;
  mq->q.features = HSA_QUEUE_FEATURE_KERNEL_DISPATCH;
  mq->q.base_address = ring;
  new_signal(-1, &mq->q.doorbell_signal); /* no packet is covered before the first ring */
  atomic_store(&signals[mq->q.doorbell_signal.handle - 1].doorbell, 1);
  mq->q.size = size;
  mq->q.id = (uint64_t)(mq - queues) + 100;
  mq->callback = callback;
  mq->data = data;
  mq->live = 1;
  pthread_mutex_unlock(&qlock);
  pthread_create(&mq->thread, NULL, packet_processor, mq);
  atomic_fetch_add(&live_queues, 1);
  *out = &mq->q;
  return HSA_STATUS_SUCCESS;
}
static mock_queue *queue_of(const hsa_queue_t *q) {
  for (int i = 0; i < MAX_QUEUES; i++) if (&queues[i].q == q && queues[i].live) return &queues[i];
  atomic_fetch_add(&violations, 1);
  return NULL;
}
hsa_status_t hsa_queue_destroy(hsa_queue_t *q) {
  mock_queue *mq = queue_of(q);
  if (!mq) return HSA_STATUS_ERROR_INVALID_QUEUE;
  atomic_store(&mq->stop, 1);
  pthread_join(mq->thread, NULL);
  while (atomic_load(&mq->outstanding) != 0) usleep(50); /* running dispatches finish */
  pthread_mutex_lock(&qlock);
  mq->live = 0;
  free(mq->q.base_address);
  pthread_mutex_unlock(&qlock);
  hsa_signal_destroy(mq->q.doorbell_signal);
  atomic_fetch_sub(&live_queues, 1);
  return HSA_STATUS_SUCCESS;
}
uint64_t hsa_queue_add_write_index_scacq_screl(const hsa_queue_t *q, uint64_t n) {
  mock_queue *mq = queue_of(q);
  return mq ? atomic_fetch_add(&mq->write, n) : 0;
}
uint64_t hsa_queue_load_read_index_scacquire(const hsa_queue_t *q) {
  mock_queue *mq = queue_of(q);
  return mq ? atomic_load(&mq->read) : 0;
}
