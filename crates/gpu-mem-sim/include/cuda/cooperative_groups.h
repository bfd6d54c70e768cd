/*
 * <cooperative_groups.h> for gpu-mem's simulator: CUDA's cooperative groups over the
 * simulator's barriers and warp collectives.
 *   thread_block (this_thread_block): sync, thread_rank, size / num_threads, group_index,
 *     thread_index, group_dim / dim_threads
 *   thread_block_tile<N> (tiled_partition<N>(block), N a power of two up to 1024): sync,
 *     thread_rank, size / num_threads, meta_group_rank, meta_group_size, shfl, shfl_down,
 *     shfl_up, shfl_xor (values of any size), ballot, any, all, match_any, match_all. A tile
 *     larger than the warp (CUDA's block_tile_memory tiles) synchronizes and exchanges values
 *     through its block: every thread of the block must make the same calls, as all tiles do
 *     in the code that uses them; its ballot, any, all and match are not available
 *   block_tile_memory<...>, this_thread_block(scratch): accepted (the simulator needs no
 *     scratch of the user's)
 *   thread_group (tiled_partition(block, n)): sync, thread_rank, size
 *   coalesced_group (coalesced_threads, labeled_partition, binary_partition): the lanes of a
 *     warp that are here (see __activemask) or share a label: sync, thread_rank, size, shfl,
 *     shfl_up, shfl_down, ballot, any, all, match_any, match_all, reduce
 *   grid_group (this_grid): thread_rank, size, sync (in a cooperative launch, whose blocks
 *     all run at once: LaunchConfig::cooperative)
 *   cooperative_groups::sync(group); reduce and the operators are in
 *   <cooperative_groups/reduce.h>.
 * Barriers and collectives name the line that calls them, as __syncthreads does. The
 * simulator writes a block group's syncs, and a warp-sized tile's syncs, shuffles and votes, as
 * the intrinsics they are before it builds a kernel (`source::stackless::block_groups`), so that
 * such a kernel runs as regions or coroutines; one that uses anything else of this header runs
 * its threads on stacks (the calls here are member functions).
 */
#pragma once
#include "gpu_mem.h"

namespace cooperative_groups {
namespace details {
/* The calling thread's index in its block, x fastest. */
inline unsigned long long block_rank() {
    return threadIdx.x +
           (unsigned long long)blockDim.x * (threadIdx.y + (unsigned long long)blockDim.y * threadIdx.z);
}
inline unsigned long long block_size() {
    return (unsigned long long)blockDim.x * blockDim.y * blockDim.z;
}
/* The lanes of the calling thread's warp that the block has. */
inline unsigned long long warp_lanes() {
    const unsigned long long base = block_rank() - (unsigned long long)gm_lane_id();
    const unsigned long long left = block_size() - base;
    const unsigned long long lanes = left < (unsigned long long)warpSize ? left : warpSize;
    return lanes >= 64 ? ~0ull : (1ull << lanes) - 1;
}
inline void block_barrier(const char* file, int line) {
    gm_sim_rt.barrier(GM_SIM_SCOPE_BLOCK, GM_FENCE_LOCAL, ~0ull, file, line);
}
inline void warp_barrier(unsigned long long mask, const char* file, int line) {
    gm_sim_rt.barrier(GM_SIM_SCOPE_WARP, GM_FENCE_LOCAL, mask, file, line);
}
/* A shuffle of a value of any size, 8 bytes at a time (every lane makes the same calls). */
template <typename T>
inline T collective(int op, unsigned long long mask, T value, long long arg, int width,
                    const char* file, int line) {
    constexpr unsigned long words = (sizeof(T) + 7) / 8;
    unsigned long long in[words] = {};
    unsigned long long out[words] = {};
    std::memcpy(in, &value, sizeof(T));
    for (unsigned long w = 0; w < words; ++w) {
        out[w] = gm_sim_rt.collective(op, mask, in[w], arg, width, file, line);
    }
    T result;
    std::memcpy(&result, out, sizeof(T));
    return result;
}

/* Where the threads of a tile larger than a warp exchange values: per block (the block's
 * threads share an OS thread), 32 bytes a thread of a block of 1024. */
constexpr unsigned long gm_sim_tile_exchange_bytes = 32 * 1024;
alignas(16) static thread_local unsigned char gm_sim_tile_exchange[gm_sim_tile_exchange_bytes];

/* Every thread of the block puts `value` in its slot, then reads the slot `read(rank)` of its
 * tile, all behind block barriers. */
template <typename T, typename R>
inline T block_exchange(T value, unsigned long long first, R read, const char* file, int line) {
    T* slots = reinterpret_cast<T*>(gm_sim_tile_exchange);
    if (block_size() * sizeof(T) > gm_sim_tile_exchange_bytes) {
        gm_sim_trap_with("a shuffle over a tile larger than the warp moves %llu bytes a thread; "
                         "the simulator exchanges at most %lu bytes a block",
                         (unsigned long long)sizeof(T), gm_sim_tile_exchange_bytes);
    }
    slots[block_rank()] = value;
    block_barrier(file, line);
    T result = read(slots + first);
    block_barrier(file, line);
    return result;
}
}  // namespace details

/* A group of threads: a block, or a part of a warp (`mask`, lanes of the caller's warp). */
class thread_block;
class thread_group {
    friend class thread_block;

  protected:
    unsigned long long mask_;
    unsigned int size_;
    unsigned int rank_;
    bool block_;
    thread_group(unsigned long long mask, unsigned int size, unsigned int rank, bool block)
        : mask_(mask), size_(size), rank_(rank), block_(block) {}

  public:
    void sync(const char* file = __builtin_FILE(), int line = __builtin_LINE()) const {
        if (block_) {
            details::block_barrier(file, line);
        } else {
            details::warp_barrier(mask_, file, line);
        }
    }
    unsigned long long size() const { return size_; }
    unsigned long long num_threads() const { return size_; }
    unsigned long long thread_rank() const { return rank_; }
    bool is_valid() const { return size_ != 0; }
};

/* The block. It keeps nothing of the thread's (its rank is asked when wanted), so making one
 * costs a thread nothing: as regions, a kernel's `thread_block cta` is a slot per thread, and
 * filling it was a third of reduce3's first region. It converts to the thread_group it is. */
class thread_block {
  public:
    static void sync(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
        details::block_barrier(file, line);
    }
    unsigned long long size() const { return details::block_size(); }
    unsigned long long num_threads() const { return details::block_size(); }
    unsigned long long thread_rank() const { return details::block_rank(); }
    bool is_valid() const { return details::block_size() != 0; }
    operator thread_group() const {
        return thread_group(~0ull, (unsigned int)details::block_size(),
                            (unsigned int)details::block_rank(), true);
    }
    dim3 group_index() const { return blockIdx; }
    dim3 thread_index() const { return threadIdx; }
    dim3 group_dim() const { return blockDim; }
    dim3 dim_threads() const { return blockDim; }
};

inline thread_block this_thread_block() { return thread_block(); }

/* Scratch CUDA's tiles larger than a warp need; the simulator's use their block instead. */
template <unsigned int A = 1024, unsigned int B = 0>
struct block_tile_memory {};
template <unsigned int A, unsigned int B>
inline thread_block this_thread_block(block_tile_memory<A, B>&) {
    return thread_block();
}

/* Lanes [first, first + n) of a warp. */
inline unsigned long long gm_lanes(unsigned int first, unsigned int n) {
    const unsigned long long run = n >= 64 ? ~0ull : (1ull << n) - 1;
    return run << first;
}

/* A tile's reduce as one exchange (GM_SIM_REDUCE_TILE): its operation's number for the ops of
 * <cooperative_groups/reduce.h> (which specialises this; -1 for any other), and the number of
 * the value's type (-1 for one it does not take). */
template <typename Op>
struct gm_sim_tile_op {
    static constexpr int value = -1;
};
template <typename T>
constexpr int gm_sim_tile_type() {
    return std::is_same<T, int>::value            ? 0
           : std::is_same<T, unsigned int>::value ? 1
           : std::is_same<T, float>::value        ? 2
           : std::is_same<T, double>::value       ? 3
                                                  : -1;
}

/* A tile of N consecutive threads of a block (within one warp). `Parent` names the group it
 * was cut from, as CUDA's type does; tiles of either spelling convert into each other. */
template <unsigned int N, typename Parent = void>
class thread_block_tile : public thread_group {
    static_assert(N > 0 && (N & (N - 1)) == 0 && N <= 1024, "tiles of 1, 2, 4, ... 1024 threads");
    unsigned int first_lane_;
    /* Larger than the warp: exchanges go through the block (details::block_exchange). */
    bool large_;

    /* The tile's first thread, by block rank. */
    unsigned long long first_rank() const { return details::block_rank() / N * N; }
    template <typename T, typename R>
    T exchange(T value, R read, const char* file, int line) const {
        return details::block_exchange(value, first_rank(), read, file, line);
    }
    void only_within_a_warp(const char* what) const {
        if (large_) {
            gm_sim_trap_with("%s over a tile larger than the warp is not available on the "
                             "simulator", what);
        }
    }

  public:
    thread_block_tile()
        : thread_group(0, N, (unsigned int)(details::block_rank() % N), false),
          first_lane_((unsigned int)gm_lane_id() / N * N),
          large_(N > (unsigned int)warpSize) {
        mask_ = large_ ? 0 : gm_lanes(first_lane_, N) & details::warp_lanes();
    }
    template <typename Other>
    thread_block_tile(const thread_block_tile<N, Other>&) : thread_block_tile() {}
    static constexpr unsigned long long num_threads() { return N; }
    static constexpr unsigned long long size() { return N; }
    unsigned long long thread_rank() const { return rank_; }
    unsigned long long meta_group_rank() const { return details::block_rank() / N; }
    unsigned long long meta_group_size() const { return (details::block_size() + N - 1) / N; }
    bool large() const { return large_; }
    /* The tile's lanes, as a warp mask. */
    unsigned long long gm_tile_lanes() const { return mask_; }
    /* A ballot of the warp, as the tile's: bit r for the tile's thread of rank r. */
    unsigned int gm_tile_bits(unsigned long long warp_bits) const {
        return (unsigned int)((warp_bits >> first_lane_) & gm_lanes(0, N));
    }
    void sync(const char* file = __builtin_FILE(), int line = __builtin_LINE()) const {
        if (large_) {
            details::block_barrier(file, line);
        } else {
            details::warp_barrier(mask_, file, line);
        }
    }
    template <typename T>
    T shfl(T value, int source, const char* file = __builtin_FILE(),
           int line = __builtin_LINE()) const {
        if (large_) {
            const unsigned int from = (unsigned int)source % N;
            return exchange(value, [=](T* tile) { return tile[from]; }, file, line);
        }
        return details::collective(GM_SIM_OP_SHFL, mask_, value, source, N, file, line);
    }
    template <typename T>
    T shfl_down(T value, unsigned int delta, const char* file = __builtin_FILE(),
                int line = __builtin_LINE()) const {
        if (large_) {
            const unsigned long long me = rank_;
            return exchange(value, [=](T* tile) { return me + delta < N ? tile[me + delta] : tile[me]; },
                            file, line);
        }
        return details::collective(GM_SIM_OP_SHFL_DOWN, mask_, value, delta, N, file, line);
    }
    template <typename T>
    T shfl_up(T value, unsigned int delta, const char* file = __builtin_FILE(),
              int line = __builtin_LINE()) const {
        if (large_) {
            const unsigned long long me = rank_;
            return exchange(value, [=](T* tile) { return me >= delta ? tile[me - delta] : tile[me]; },
                            file, line);
        }
        return details::collective(GM_SIM_OP_SHFL_UP, mask_, value, delta, N, file, line);
    }
    template <typename T>
    T shfl_xor(T value, unsigned int lane_mask, const char* file = __builtin_FILE(),
               int line = __builtin_LINE()) const {
        if (large_) {
            const unsigned long long other = (rank_ ^ lane_mask) % N;
            return exchange(value, [=](T* tile) { return tile[other]; }, file, line);
        }
        return details::collective(GM_SIM_OP_SHFL_XOR, mask_, value, lane_mask, N, file, line);
    }
    /* The tile's values combined by `op`, for every thread of the tile (a large tile's through
     * its block, in rank order): a butterfly, op(own, partner) at offsets N/2 down to 1, one
     * exchange where the operation and type are cooperative groups' own (the same the
     * simulator's rewrites lower `reduce` to), else a shuffle per level. */
    template <typename T, typename Op>
    T gm_sim_reduce(T value, Op op, const char* file, int line) const {
        constexpr int code = gm_sim_tile_op<Op>::value;
        constexpr int type = gm_sim_tile_type<T>();
        if constexpr (code >= 0 && type >= 0 && (type < 2 || code < 3)) {
            if (!large_) {
                return gm_sim_from_bits<T>(gm_sim_rt.collective(
                    GM_SIM_OP_REDUCE, mask_, gm_sim_bits(value),
                    GM_SIM_REDUCE_TILE + 4 * code + type, N, file, line));
            }
        }
        if (large_) {
            return exchange(value, [=](T* tile) {
                T acc = tile[0];
                for (unsigned int r = 1; r < N; ++r) acc = op(acc, tile[r]);
                return acc;
            }, file, line);
        }
        for (unsigned int offset = N / 2; offset > 0; offset /= 2) {
            value = op(value, shfl_xor(value, offset, file, line));
        }
        return value;
    }
    /* One bit per thread of the tile, by thread_rank. */
    unsigned int ballot(int predicate, const char* file = __builtin_FILE(),
                        int line = __builtin_LINE()) const {
        only_within_a_warp("ballot");
        return gm_tile_bits(
            gm_sim_rt.collective(GM_SIM_OP_BALLOT, mask_, predicate != 0, 0, 0, file, line));
    }
    int any(int predicate, const char* file = __builtin_FILE(), int line = __builtin_LINE()) const {
        only_within_a_warp("any");
        return (int)gm_sim_rt.collective(GM_SIM_OP_ANY, mask_, predicate != 0, 0, 0, file, line);
    }
    int all(int predicate, const char* file = __builtin_FILE(), int line = __builtin_LINE()) const {
        only_within_a_warp("all");
        return (int)gm_sim_rt.collective(GM_SIM_OP_ALL, mask_, predicate != 0, 0, 0, file, line);
    }
    /* The threads of the tile whose `value` equals this one's, by thread_rank. */
    template <typename T>
    unsigned int match_any(T value) const {
        only_within_a_warp("match_any");
        unsigned int same = 0;
        for (unsigned int r = 0; r < N; ++r) {
            if (shfl(value, (int)r) == value) same |= 1u << r;
        }
        return same;
    }
    template <typename T>
    unsigned int match_all(T value, int& pred) const {
        const unsigned int same = match_any(value);
        const unsigned int everyone = (unsigned int)gm_lanes(0, N);
        pred = same == everyone;
        return pred ? everyone : 0u;
    }
};

template <unsigned int N, typename Parent>
inline thread_block_tile<N> tiled_partition(const Parent&) {
    return thread_block_tile<N>();
}

/* A tile of `n` threads whose size is known only at run time. */
class gm_dynamic_tile : public thread_group {
  public:
    explicit gm_dynamic_tile(unsigned int n)
        : thread_group(0, n, (unsigned int)gm_lane_id() % (n == 0 ? 1 : n), false) {
        if (n == 0 || (n & (n - 1)) != 0 || n > (unsigned int)warpSize) {
            gm_sim_rt.fault("tiled_partition(group, n): n must be a power of two up to the warp size");
            size_ = 1;
        }
        const unsigned int first = (unsigned int)gm_lane_id() / size_ * size_;
        mask_ = gm_lanes(first, size_) & details::warp_lanes();
    }
};
inline thread_group tiled_partition(const thread_group&, unsigned int n) {
    return gm_dynamic_tile(n);
}

/* Some lanes of one warp, named by a mask: the active threads (coalesced_threads), or the
 * part of a group with one label (labeled_partition, binary_partition). Ranks count the
 * group's lanes below the caller's, as CUDA's do. */
class coalesced_group : public thread_group {
    static unsigned int rank_in(unsigned long long mask) {
        const unsigned int lane = (unsigned int)gm_lane_id();
        return (unsigned int)__builtin_popcountll(mask & ((1ull << lane) - 1));
    }
    /* The lane of the group's thread of rank `rank` (the caller's own lane when there is none). */
    unsigned int lane_of(unsigned long long rank) const {
        unsigned long long left = mask_;
        for (unsigned long long r = 0; left != 0; ++r) {
            const unsigned int lane = (unsigned int)__builtin_ctzll(left);
            if (r == rank) return lane;
            left &= left - 1;
        }
        return (unsigned int)gm_lane_id();
    }
    template <typename T>
    T from_lane(T value, unsigned int lane, const char* file, int line) const {
        return details::collective(GM_SIM_OP_SHFL, mask_, value, lane, 64, file, line);
    }

  public:
    explicit coalesced_group(unsigned long long mask)
        : thread_group(mask, (unsigned int)__builtin_popcountll(mask), rank_in(mask), false) {}
    unsigned long long size() const { return size_; }
    unsigned long long num_threads() const { return size_; }
    unsigned long long thread_rank() const { return rank_; }
    unsigned long long meta_group_rank() const { return 0; }
    unsigned long long meta_group_size() const { return 1; }
    /* The lanes, as a warp mask (what `__activemask` gives). */
    unsigned long long gm_tile_lanes() const { return mask_; }
    void sync(const char* file = __builtin_FILE(), int line = __builtin_LINE()) const {
        details::warp_barrier(mask_, file, line);
    }
    template <typename T>
    T shfl(T value, unsigned int rank, const char* file = __builtin_FILE(),
           int line = __builtin_LINE()) const {
        return from_lane(value, lane_of(rank), file, line);
    }
    template <typename T>
    T shfl_down(T value, unsigned int delta, const char* file = __builtin_FILE(),
                int line = __builtin_LINE()) const {
        const unsigned long long to = rank_ + delta;
        return from_lane(value, to < size_ ? lane_of(to) : (unsigned int)gm_lane_id(), file, line);
    }
    template <typename T>
    T shfl_up(T value, unsigned int delta, const char* file = __builtin_FILE(),
              int line = __builtin_LINE()) const {
        return from_lane(value, rank_ >= delta ? lane_of(rank_ - delta) : (unsigned int)gm_lane_id(),
                         file, line);
    }
    /* One bit per thread of the group, by thread_rank. */
    unsigned int ballot(int predicate, const char* file = __builtin_FILE(),
                        int line = __builtin_LINE()) const {
        const unsigned long long lanes =
            gm_sim_rt.collective(GM_SIM_OP_BALLOT, mask_, predicate != 0, 0, 0, file, line);
        unsigned int bits = 0;
        unsigned long long left = mask_;
        for (unsigned int r = 0; left != 0; ++r, left &= left - 1) {
            if (lanes & (left & ~(left - 1))) bits |= 1u << r;
        }
        return bits;
    }
    int any(int predicate, const char* file = __builtin_FILE(), int line = __builtin_LINE()) const {
        return (int)gm_sim_rt.collective(GM_SIM_OP_ANY, mask_, predicate != 0, 0, 0, file, line);
    }
    int all(int predicate, const char* file = __builtin_FILE(), int line = __builtin_LINE()) const {
        return (int)gm_sim_rt.collective(GM_SIM_OP_ALL, mask_, predicate != 0, 0, 0, file, line);
    }
    /* The group's threads whose `value` equals this one's, by thread_rank. */
    template <typename T>
    unsigned int match_any(T value, const char* file = __builtin_FILE(),
                           int line = __builtin_LINE()) const {
        unsigned int same = 0;
        for (unsigned int r = 0; r < size_; ++r) {
            if (shfl(value, r, file, line) == value) same |= 1u << r;
        }
        return same;
    }
    template <typename T>
    unsigned int match_all(T value, int& pred, const char* file = __builtin_FILE(),
                           int line = __builtin_LINE()) const {
        const unsigned int same = match_any(value, file, line);
        const unsigned int everyone = (unsigned int)gm_lanes(0, size_);
        pred = same == everyone;
        return pred ? everyone : 0u;
    }
    /* The group's values combined by `op` in rank order, for every thread of the group. */
    template <typename T, typename Op>
    T gm_sim_reduce(T value, Op op, const char* file, int line) const {
        T acc = shfl(value, 0, file, line);
        for (unsigned int r = 1; r < size_; ++r) acc = op(acc, shfl(value, r, file, line));
        return acc;
    }
    /* The lanes of this group whose `label` equals the caller's. */
    template <typename Label>
    unsigned long long gm_sim_same(Label label, const char* file, int line) const {
        unsigned long long same = 0;
        unsigned long long left = mask_;
        while (left != 0) {
            const unsigned int lane = (unsigned int)__builtin_ctzll(left);
            if (from_lane(label, lane, file, line) == label) same |= 1ull << lane;
            left &= left - 1;
        }
        return same;
    }
};

/* The threads of the warp that are here (see __activemask). */
inline coalesced_group coalesced_threads(const char* file = __builtin_FILE(),
                                         int line = __builtin_LINE()) {
    return coalesced_group(
        gm_sim_rt.collective(GM_SIM_OP_ACTIVE, ~0ull, 0, 0, 0, file, line) & details::warp_lanes());
}

/* The threads of `group` with the caller's `label`, one group per label. */
template <typename Label>
inline coalesced_group labeled_partition(const coalesced_group& group, Label label,
                                         const char* file = __builtin_FILE(),
                                         int line = __builtin_LINE()) {
    return coalesced_group(group.gm_sim_same(label, file, line));
}
template <typename Label, unsigned int N, typename P>
inline coalesced_group labeled_partition(const thread_block_tile<N, P>& tile, Label label,
                                         const char* file = __builtin_FILE(),
                                         int line = __builtin_LINE()) {
    static_assert(N <= 32, "labeled_partition of a tile of at most 32 threads");
    return labeled_partition(coalesced_group(tile.gm_tile_lanes()), label, file, line);
}
/* The threads of `group` whose `predicate` is the caller's. */
template <typename Group>
inline coalesced_group binary_partition(const Group& group, bool predicate,
                                        const char* file = __builtin_FILE(),
                                        int line = __builtin_LINE()) {
    return labeled_partition(group, (int)predicate, file, line);
}

/* The grid: ranks and sizes; its sync needs a cooperative launch. */
class grid_group {
  public:
    unsigned long long thread_rank() const {
        const unsigned long long block =
            blockIdx.x + (unsigned long long)gridDim.x * (blockIdx.y + (unsigned long long)gridDim.y * blockIdx.z);
        return block * details::block_size() + details::block_rank();
    }
    unsigned long long size() const {
        return (unsigned long long)gridDim.x * gridDim.y * gridDim.z * details::block_size();
    }
    unsigned long long num_threads() const { return size(); }
    bool is_valid() const { return true; }
    /* Every thread of the grid: in a cooperative launch (LaunchConfig::cooperative), whose
     * blocks all run at once; elsewhere an error, where a GPU could hang. */
    void sync(const char* file = __builtin_FILE(), int line = __builtin_LINE()) const {
        gm_sim_rt.collective(GM_SIM_OP_GRID_SYNC, ~0ull, 0, 0, 0, file, line);
    }
};
inline grid_group this_grid() { return grid_group(); }

template <typename Group>
inline void sync(const Group& group, const char* file = __builtin_FILE(),
                 int line = __builtin_LINE()) {
    group.sync(file, line);
}

}  // namespace cooperative_groups
