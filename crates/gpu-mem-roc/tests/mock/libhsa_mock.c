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
 *   - hsa_amd_memory_fill needs 4-byte alignment inside VRAM.
 * Built by the test with `cc -shared -fPIC`; uses the real HSA headers for the ABI.
 */
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
#define POOL_SYSTEM 11
#define POOL_KERNARG 12
#define POOL_VRAM 21
#define POOL_LDS 22
#define VRAM_BYTES (64u << 20)
#define AGENT_OFFSET ((uintptr_t)1 << 44)
#define MAX_SIGNALS 65536
#define MAX_RANGES 4096

typedef struct {
  _Atomic int64_t value;
  atomic_int used;
  atomic_int destroyed;
  atomic_int waited_on_by_pending; /* pending copies depending on it */
  uint64_t start, end;
  atomic_int timed;
} mock_signal;

typedef struct {
  uintptr_t base;
  size_t size;
  int kind; /* 1 vram, 2 system, 3 locked */
  int gpu_allowed;
  uintptr_t agent_base; /* locked: address the GPU uses */
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
static size_t vram_used = 0;
static atomic_int delay_us = 3000;

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
} mock_stats_t;

void mock_hsa_fail_next_copy(void) { atomic_store(&fail_next_copy, 1); }
void mock_hsa_set_delay_us(int us) { atomic_store(&delay_us, us); }
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
  }
  s->vram_used = vram_used;
  pthread_mutex_unlock(&lock);
}

/* ---- helpers ------------------------------------------------------------------------- */
static mock_signal *sig(hsa_signal_t s) {
  if (s.handle == 0 || s.handle > (uint64_t)atomic_load(&next_signal)) return NULL;
  mock_signal *m = &signals[s.handle - 1];
  if (atomic_load(&m->destroyed)) atomic_fetch_add(&violations, 1);
  return m;
}

static int add_range(uintptr_t base, size_t size, int kind, uintptr_t agent_base) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < MAX_RANGES; i++)
    if (!ranges[i].live) {
      ranges[i] = (range){base, size, kind, kind == 1, agent_base, 1};
      pthread_mutex_unlock(&lock);
      return 1;
    }
  pthread_mutex_unlock(&lock);
  return 0;
}

static range *find_base(uintptr_t base, int kind) {
  for (int i = 0; i < MAX_RANGES; i++)
    if (ranges[i].live && ranges[i].kind == kind && ranges[i].base == base) return &ranges[i];
  return NULL;
}

/* The host-backed address a GPU access to [addr, addr+size) touches, or 0 when the GPU may not
 * access it. */
static uintptr_t gpu_access(uintptr_t addr, size_t size) {
  uintptr_t out = 0;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < MAX_RANGES && !out; i++) {
    range *r = &ranges[i];
    if (!r->live) continue;
    if ((r->kind == 1 || r->kind == 2) && r->gpu_allowed && addr >= r->base &&
        addr + size <= r->base + r->size)
      out = addr;
    if (r->kind == 3 && addr >= r->agent_base && addr + size <= r->agent_base + r->size)
      out = r->base + (addr - r->agent_base);
  }
  pthread_mutex_unlock(&lock);
  return out;
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
  hsa_agent_t a = {CPU_AGENT}, b = {GPU_AGENT};
  hsa_status_t s = cb(a, data);
  if (s != HSA_STATUS_SUCCESS) return s == HSA_STATUS_INFO_BREAK ? HSA_STATUS_SUCCESS : s;
  s = cb(b, data);
  return s == HSA_STATUS_INFO_BREAK ? HSA_STATUS_SUCCESS : s;
}
hsa_status_t hsa_agent_get_info(hsa_agent_t agent, hsa_agent_info_t attribute, void *value) {
  int gpu = agent.handle == GPU_AGENT;
  if (agent.handle != CPU_AGENT && !gpu) return HSA_STATUS_ERROR_INVALID_AGENT;
  switch ((int)attribute) {
  case HSA_AGENT_INFO_DEVICE: *(uint32_t *)value = gpu ? HSA_DEVICE_TYPE_GPU : HSA_DEVICE_TYPE_CPU; return HSA_STATUS_SUCCESS;
  case HSA_AGENT_INFO_NAME: memset(value, 0, 64); strcpy(value, gpu ? "gfx90a" : "Mock CPU"); return HSA_STATUS_SUCCESS;
  case HSA_AMD_AGENT_INFO_PRODUCT_NAME: memset(value, 0, 64); strcpy(value, gpu ? "Mock Instinct MI210" : "Mock CPU"); return HSA_STATUS_SUCCESS;
  case HSA_AGENT_INFO_WAVEFRONT_SIZE: *(uint32_t *)value = 64; return HSA_STATUS_SUCCESS;
  case HSA_AGENT_INFO_WORKGROUP_MAX_SIZE: *(uint32_t *)value = 1024; return HSA_STATUS_SUCCESS;
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
  int lds = p == POOL_LDS;
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
  *(uint32_t *)value = (agent.handle == GPU_AGENT && pool.handle == POOL_SYSTEM)
                           ? HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT
                           : HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT;
  return HSA_STATUS_SUCCESS;
}
hsa_status_t hsa_amd_memory_pool_allocate(hsa_amd_memory_pool_t pool, size_t size, uint32_t flags, void **ptr) {
  if (size == 0 || flags != 0 || !ptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  size_t rounded = (size + 4095) & ~(size_t)4095;
  int kind = pool.handle == POOL_VRAM ? 1 : (pool.handle == POOL_SYSTEM || pool.handle == POOL_KERNARG) ? 2 : 0;
  if (!kind) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  if (kind == 1) {
    pthread_mutex_lock(&lock);
    int fits = vram_used + rounded <= VRAM_BYTES;
    if (fits) vram_used += rounded;
    pthread_mutex_unlock(&lock);
    if (!fits) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  void *p = aligned_alloc(4096, rounded);
  if (!p) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  memset(p, 0xCD, rounded);
  add_range((uintptr_t)p, rounded, kind, 0);
  *ptr = p;
  return HSA_STATUS_SUCCESS;
}
hsa_status_t hsa_amd_memory_pool_free(void *ptr) {
  pthread_mutex_lock(&lock);
  range *r = find_base((uintptr_t)ptr, 1);
  if (!r) r = find_base((uintptr_t)ptr, 2);
  if (!r) { pthread_mutex_unlock(&lock); atomic_fetch_add(&violations, 1); return HSA_STATUS_ERROR_INVALID_ARGUMENT; }
  if (r->kind == 1) vram_used -= r->size;
  r->live = 0;
  pthread_mutex_unlock(&lock);
  free(ptr);
  return HSA_STATUS_SUCCESS;
}
hsa_status_t hsa_amd_agents_allow_access(uint32_t n, const hsa_agent_t *agents, const uint32_t *flags, const void *ptr) {
  (void)flags;
  pthread_mutex_lock(&lock);
  range *r = find_base((uintptr_t)ptr, 2);
  if (!r) r = find_base((uintptr_t)ptr, 1);
  if (!r) { pthread_mutex_unlock(&lock); return HSA_STATUS_ERROR_INVALID_ARGUMENT; }
  if (r->kind == 2) {
    r->gpu_allowed = 0; /* the list replaces the access set */
    for (uint32_t i = 0; i < n; i++) if (agents[i].handle == GPU_AGENT) r->gpu_allowed = 1;
  }
  pthread_mutex_unlock(&lock);
  return HSA_STATUS_SUCCESS;
}

/* ---- locking ---------------------------------------------------------------------------- */
static hsa_status_t do_lock(void *host, size_t size, hsa_agent_t *agents, int n, void **agent_ptr) {
  if (!host || !size || !agent_ptr || (agents && n <= 0) || (!agents && n != 0)) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  int gpu = !agents;
  for (int i = 0; i < n; i++) if (agents[i].handle == GPU_AGENT) gpu = 1;
  uintptr_t agent_base = gpu ? (uintptr_t)host + AGENT_OFFSET : 0;
  if (!add_range((uintptr_t)host, size, 3, agent_base)) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
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
  if (r) r->live = 0;
  pthread_mutex_unlock(&lock);
  if (!r) atomic_fetch_add(&violations, 1); /* undefined behaviour in ROCr */
  return HSA_STATUS_SUCCESS;
}
hsa_status_t hsa_memory_register(void *p, size_t n) { (void)p; (void)n; return HSA_STATUS_SUCCESS; }
hsa_status_t hsa_memory_deregister(void *p, size_t n) { (void)p; (void)n; return HSA_STATUS_SUCCESS; }

/* ---- signals ---------------------------------------------------------------------------- */
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
void hsa_signal_store_screlease(hsa_signal_t s, hsa_signal_value_t v) { mock_signal *m = sig(s); if (m) atomic_store(&m->value, v); }
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
    if (satisfied(v, c, cmp) || now_ns() >= deadline) return v;
    usleep(50);
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
} copy_job;

static void *copy_thread(void *arg) {
  copy_job *job = arg;
  for (;;) { /* wait for every dependency to reach 0; a negative one means never */
    int ready = 1;
    for (uint32_t i = 0; i < job->ndeps; i++) {
      int64_t v = atomic_load(&sig(job->deps[i])->value);
      if (v != 0) ready = 0;
    }
    if (ready) break;
    usleep(100);
  }
  for (uint32_t i = 0; i < job->ndeps; i++) atomic_fetch_sub(&signals[job->deps[i].handle - 1].waited_on_by_pending, 1);
  mock_signal *done = sig(job->done);
  done->start = now_ns();
  usleep((useconds_t)atomic_load(&delay_us));
  if (!job->fail) memcpy((void *)job->dst, (const void *)job->src, job->size);
  done->end = now_ns();
  atomic_store(&done->timed, atomic_load(&profiling));
  if (job->fail) atomic_store(&done->value, -1);
  else atomic_fetch_sub(&done->value, 1);
  free(job);
  return NULL;
}

hsa_status_t hsa_amd_memory_async_copy(void *dst, hsa_agent_t dst_agent, const void *src, hsa_agent_t src_agent,
                                       size_t size, uint32_t ndeps, const hsa_signal_t *deps, hsa_signal_t done) {
  (void)dst_agent; (void)src_agent;
  if (!dst || !src || done.handle == 0 || ndeps > 64) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (!sig(done)) return HSA_STATUS_ERROR_INVALID_SIGNAL;
  uintptr_t d = gpu_access((uintptr_t)dst, size), s = gpu_access((uintptr_t)src, size);
  if (!d || !s) return HSA_STATUS_ERROR_INVALID_ARGUMENT; /* not accessible to the copy agent */
  copy_job *job = calloc(1, sizeof *job);
  job->dst = d; job->src = s; job->size = size; job->ndeps = ndeps; job->done = done;
  job->fail = atomic_exchange(&fail_next_copy, 0);
  for (uint32_t i = 0; i < ndeps; i++) {
    if (!sig(deps[i])) { free(job); return HSA_STATUS_ERROR_INVALID_SIGNAL; }
    job->deps[i] = deps[i];
    atomic_fetch_add(&signals[deps[i].handle - 1].waited_on_by_pending, 1);
  }
  atomic_fetch_add(&copies_started, 1);
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
