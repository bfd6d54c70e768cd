/* A stand-in libnccl.so.2 for gpu-mem's tests: it records the calls the CUDA backend makes
 * (arguments, streams, groups) and answers them without a GPU. It moves no data: tests built
 * on it prove the backend's side of NCCL's call protocol, never anything about NCCL itself.
 *
 * -DMOCK_NCCL_VERSION=<code> sets what ncclGetVersion answers (default 2.32.3);
 * -DMOCK_NO_SEND leaves ncclSend out (a library without a call gpu-mem needs). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifndef MOCK_NCCL_VERSION
#define MOCK_NCCL_VERSION 23203
#endif

typedef int ncclResult_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef void *ncclComm_t;
typedef void *cudaStream_t;

enum { ncclSuccess = 0, ncclInvalidArgument = 4, ncclInvalidUsage = 5 };

/* The last collective call: which (1 all-reduce, 2 reduce, 3 broadcast, 4 all-gather,
 * 5 reduce-scatter, 6 send, 7 recv), its buffers, count, type, op, root or peer, comm, stream. */
static unsigned long long last[10];
static int calls, groups_open, group_starts, group_ends, destroys, inits;
static int last_devlist[8], last_ndev, last_nranks, last_rank;
static unsigned long long next_comm = 0x1000;
static unsigned id_counter;
static char last_error[128];

int mock_calls(void) { return calls; }
int mock_group_starts(void) { return group_starts; }
int mock_group_ends(void) { return group_ends; }
int mock_destroys(void) { return destroys; }
int mock_inits(void) { return inits; }
int mock_last_ndev(void) { return last_ndev; }
unsigned long long mock_last_dev(int i) { return i >= 0 && i < 8 ? (unsigned long long)last_devlist[i] : ~0ull; }
int mock_last_nranks(void) { return last_nranks; }
int mock_last_rank(void) { return last_rank; }
unsigned long long mock_last(int i) { return i >= 0 && i < 10 ? last[i] : 0; }

ncclResult_t ncclGetVersion(int *version) { *version = MOCK_NCCL_VERSION; return ncclSuccess; }

const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    default: return "unknown result code";
    }
}

const char *ncclGetLastError(ncclComm_t comm) { (void)comm; return last_error; }

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *e) { (void)comm; *e = 0; return 0; }

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    memset(id->internal, 0, sizeof id->internal);
    memcpy(id->internal, "mock-nccl", 9);
    id->internal[9] = (char)(++id_counter);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
    if (memcmp(id.internal, "mock-nccl", 9) != 0) {
        strcpy(last_error, "mock: the unique id was not made by ncclGetUniqueId");
        return ncclInvalidArgument;
    }
    inits++;
    last_nranks = nranks;
    last_rank = rank;
    *comm = (ncclComm_t)(uintptr_t)(next_comm++);
    return ncclSuccess;
}

ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist) {
    inits++;
    last_ndev = ndev;
    for (int i = 0; i < ndev; i++) {
        if (i < 8) last_devlist[i] = devlist ? devlist[i] : i;
        comms[i] = (ncclComm_t)(uintptr_t)(next_comm++);
    }
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) { (void)comm; destroys++; return ncclSuccess; }

static ncclResult_t record(int which, const void *send, void *recv, size_t count, int type, int op,
                           int root, ncclComm_t comm, cudaStream_t stream) {
    if (count == 13) { /* the tests' way to see an error come back */
        strcpy(last_error, "mock: 13 elements are refused");
        return ncclInvalidArgument;
    }
    calls++;
    last[0] = (unsigned long long)which;
    last[1] = (unsigned long long)(uintptr_t)send;
    last[2] = (unsigned long long)(uintptr_t)recv;
    last[3] = (unsigned long long)count;
    last[4] = (unsigned long long)type;
    last[5] = (unsigned long long)op;
    last[6] = (unsigned long long)root;
    last[7] = (unsigned long long)(uintptr_t)comm;
    last[8] = (unsigned long long)(uintptr_t)stream;
    last[9] = (unsigned long long)groups_open;
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, int t, int op, ncclComm_t c, cudaStream_t st) {
    return record(1, s, r, n, t, op, -1, c, st);
}
ncclResult_t ncclReduce(const void *s, void *r, size_t n, int t, int op, int root, ncclComm_t c, cudaStream_t st) {
    return record(2, s, r, n, t, op, root, c, st);
}
ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, int t, int root, ncclComm_t c, cudaStream_t st) {
    return record(3, s, r, n, t, -1, root, c, st);
}
ncclResult_t ncclAllGather(const void *s, void *r, size_t n, int t, ncclComm_t c, cudaStream_t st) {
    return record(4, s, r, n, t, -1, -1, c, st);
}
ncclResult_t ncclReduceScatter(const void *s, void *r, size_t n, int t, int op, ncclComm_t c, cudaStream_t st) {
    return record(5, s, r, n, t, op, -1, c, st);
}
#ifndef MOCK_NO_SEND
ncclResult_t ncclSend(const void *s, size_t n, int t, int peer, ncclComm_t c, cudaStream_t st) {
    return record(6, s, 0, n, t, -1, peer, c, st);
}
#endif
ncclResult_t ncclRecv(void *r, size_t n, int t, int peer, ncclComm_t c, cudaStream_t st) {
    return record(7, 0, r, n, t, -1, peer, c, st);
}

ncclResult_t ncclGroupStart(void) { groups_open++; group_starts++; return ncclSuccess; }
ncclResult_t ncclGroupEnd(void) {
    if (groups_open == 0) {
        strcpy(last_error, "mock: ncclGroupEnd without ncclGroupStart");
        return ncclInvalidUsage;
    }
    groups_open--;
    group_ends++;
    return ncclSuccess;
}
