/*
 * <cooperative_groups.h> for kernels built by hiprtc (gpu-mem's header of this name): CUDA's
 * cooperative groups over HIP's built-in barriers and wavefront functions (hiprtc 5.2 has no
 * cooperative groups of its own).
 *   thread_block (this_thread_block): sync, thread_rank, size / num_threads, group_index,
 *     thread_index, group_dim / dim_threads
 *   thread_block_tile<N> (tiled_partition<N>(block), N a power of two up to 1024): sync,
 *     thread_rank, size / num_threads, meta_group_rank, meta_group_size, shfl, shfl_down,
 *     shfl_up, shfl_xor (values of any size), ballot, any, all (up to the wavefront); a tile
 *     larger than the wavefront synchronizes and exchanges values (of up to 8 bytes) through
 *     its block, so every thread of the block makes the same calls, as in the code that uses
 *     such tiles
 *   coalesced_group (coalesced_threads: the lanes that run the call; labeled_partition,
 *   binary_partition), block_tile_memory (accepted), cooperative_groups::sync
 *   and, in <cooperative_groups/reduce.h>, reduce with plus, less, greater, bit_and, bit_or,
 *   bit_xor.
 *   grid_group (this_grid): thread_rank, size; its sync traps (no cooperative launch on ROC).
 *   thread_group (what the groups above convert to, as a parameter of one type for all):
 *     size / num_threads, thread_rank, sync (a block barrier for a block or a tile larger than
 *     the wavefront, a wavefront barrier otherwise, as the group it was made from syncs).
 */
#pragma once
#include "gpu_mem.h"

namespace cooperative_groups {
namespace details {
__device__ inline unsigned long long block_rank() {
    return threadIdx.x + (unsigned long long)blockDim.x *
                             (threadIdx.y + (unsigned long long)blockDim.y * threadIdx.z);
}
__device__ inline unsigned long long block_size() {
    return (unsigned long long)blockDim.x * blockDim.y * blockDim.z;
}
/* A value of any size moved 4 bytes at a time by `move` (a wavefront function on ints). */
template <typename T, typename Move>
__device__ inline T by_words(T value, Move move) {
    constexpr unsigned int words = (sizeof(T) + 3) / 4;
    int in[words] = {};
    int out[words] = {};
    __builtin_memcpy(in, &value, sizeof(T));
    for (unsigned int w = 0; w < words; ++w) out[w] = move(in[w]);
    T result;
    __builtin_memcpy(&result, out, sizeof(T));
    return result;
}
/* Where the threads of a tile larger than the wavefront exchange values: 8 bytes a thread of
 * a block of up to 1024. */
__device__ inline unsigned long long* tile_exchange() {
    __shared__ unsigned long long slots[1024];
    return slots;
}
/* Every thread of the block puts `value` in its slot, then reads through `read` the slots of
 * its tile (from `first`), all behind block barriers. */
template <typename T, typename R>
__device__ inline T block_exchange(T value, unsigned long long first, R read) {
    if constexpr (sizeof(T) > 8) {
        /* Values of up to 8 bytes cross a tile larger than the wavefront. */
        __builtin_trap();
    }
    unsigned long long* words = tile_exchange();
    __builtin_memcpy(&words[block_rank()], &value, sizeof(T) <= 8 ? sizeof(T) : 8);
    __syncthreads();
    T result = read([=](unsigned long long rank) {
        T v;
        __builtin_memcpy(&v, &words[first + rank], sizeof(T) <= 8 ? sizeof(T) : 8);
        return v;
    });
    __syncthreads();
    return result;
}
}  // namespace details

class thread_group {
  protected:
    unsigned int size_;
    unsigned int rank_;
    /* Whether the group's sync is a block barrier (else a wavefront barrier). */
    bool block_wide_;
    __device__ thread_group(unsigned int size, unsigned int rank, bool block_wide = false)
        : size_(size), rank_(rank), block_wide_(block_wide) {}

  public:
    __device__ unsigned long long size() const { return size_; }
    __device__ unsigned long long num_threads() const { return size_; }
    __device__ unsigned long long thread_rank() const { return rank_; }
    __device__ bool is_valid() const { return size_ != 0; }
    __device__ void sync() const {
        if (block_wide_) {
            __syncthreads();
        } else {
            __builtin_amdgcn_wave_barrier();
        }
    }
};

class thread_block : public thread_group {
  public:
    __device__ thread_block()
        : thread_group((unsigned int)details::block_size(), (unsigned int)details::block_rank(),
                       true) {}
    __device__ static void sync() { __syncthreads(); }
    __device__ dim3 group_index() const { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
    __device__ dim3 thread_index() const { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
    __device__ dim3 group_dim() const { return dim3(blockDim.x, blockDim.y, blockDim.z); }
    __device__ dim3 dim_threads() const { return group_dim(); }
};

__device__ inline thread_block this_thread_block() { return thread_block(); }

template <unsigned int A = 1024, unsigned int B = 0>
struct block_tile_memory {};
template <unsigned int A, unsigned int B>
__device__ inline thread_block this_thread_block(block_tile_memory<A, B>&) {
    return thread_block();
}

template <unsigned int N, typename Parent = void>
class thread_block_tile : public thread_group {
    static_assert(N > 0 && (N & (N - 1)) == 0 && N <= 1024, "tiles of 1, 2, 4, ... 1024 threads");
    unsigned int first_lane_;
    bool large_;

    __device__ unsigned long long first_rank() const { return details::block_rank() / N * N; }

  public:
    __device__ thread_block_tile()
        : thread_group(N, (unsigned int)(details::block_rank() % N),
                       N > (unsigned int)gm_warp_size()),
          first_lane_((unsigned int)gm_lane_id() % gm_warp_size() / N * N),
          large_(N > (unsigned int)gm_warp_size()) {}
    template <typename Other>
    __device__ thread_block_tile(const thread_block_tile<N, Other>&) : thread_block_tile() {}
    __device__ static constexpr unsigned long long num_threads() { return N; }
    __device__ static constexpr unsigned long long size() { return N; }
    __device__ unsigned long long meta_group_rank() const { return details::block_rank() / N; }
    __device__ unsigned long long meta_group_size() const {
        return (details::block_size() + N - 1) / N;
    }
    __device__ void sync() const {
        if (large_) {
            __syncthreads();
        } else {
            __builtin_amdgcn_wave_barrier();
        }
    }
    template <typename T>
    __device__ T shfl(T value, int source) const {
        if (large_) {
            const unsigned long long from = (unsigned int)source % N;
            return details::block_exchange(value, first_rank(), [=](auto at) { return at(from); });
        }
        return details::by_words(value, [=](int w) { return __shfl(w, source, N); });
    }
    template <typename T>
    __device__ T shfl_down(T value, unsigned int delta) const {
        if (large_) {
            const unsigned long long me = rank_;
            return details::block_exchange(
                value, first_rank(), [=](auto at) { return me + delta < N ? at(me + delta) : at(me); });
        }
        return details::by_words(value, [=](int w) { return __shfl_down(w, delta, N); });
    }
    template <typename T>
    __device__ T shfl_up(T value, unsigned int delta) const {
        if (large_) {
            const unsigned long long me = rank_;
            return details::block_exchange(
                value, first_rank(), [=](auto at) { return me >= delta ? at(me - delta) : at(me); });
        }
        return details::by_words(value, [=](int w) { return __shfl_up(w, delta, N); });
    }
    template <typename T>
    __device__ T shfl_xor(T value, unsigned int lane_mask) const {
        if (large_) {
            const unsigned long long other = (rank_ ^ lane_mask) % N;
            return details::block_exchange(value, first_rank(), [=](auto at) { return at(other); });
        }
        return details::by_words(value, [=](int w) { return __shfl_xor(w, lane_mask, N); });
    }
    /* The tile's values combined by `op`, for every thread of the tile. */
    template <typename T, typename Op>
    __device__ T gm_reduce(T value, Op op) const {
        if (large_) {
            return details::block_exchange(value, first_rank(), [=](auto at) {
                T acc = at(0);
                for (unsigned int r = 1; r < N; ++r) acc = op(acc, at(r));
                return acc;
            });
        }
        for (unsigned int offset = N / 2; offset > 0; offset /= 2) {
            value = op(value, shfl_xor(value, offset));
        }
        return value;
    }
    __device__ unsigned long long ballot(int predicate) const {
        const unsigned long long tile = N >= 64 ? ~0ull : ((1ull << N) - 1);
        return (__ballot(predicate) >> first_lane_) & tile;
    }
    /* The tile's lanes that run this call, as a wavefront mask. */
    __device__ unsigned long long gm_mask() const {
        const unsigned long long tile = N >= 64 ? ~0ull : ((1ull << N) - 1);
        return (tile << first_lane_) & __ballot(1);
    }
    __device__ int any(int predicate) const { return ballot(predicate) != 0; }
    __device__ int all(int predicate) const {
        const unsigned long long tile = N >= 64 ? ~0ull : ((1ull << N) - 1);
        const unsigned long long present =
            (__ballot(1) >> first_lane_) & tile;
        return ballot(predicate) == present;
    }
};

template <unsigned int N, typename Parent>
__device__ inline thread_block_tile<N> tiled_partition(const Parent&) {
    return thread_block_tile<N>();
}

/* Some lanes of one wavefront, named by a mask: the active ones (coalesced_threads), or the
 * part of a group with one label (labeled_partition, binary_partition). Ranks count the
 * group's lanes below the caller's. */
class coalesced_group : public thread_group {
    unsigned long long mask_;

    __device__ static unsigned int rank_in(unsigned long long mask) {
        const unsigned int lane = (unsigned int)gm_lane_id() % gm_warp_size();
        return (unsigned int)__builtin_popcountll(mask & ((1ull << lane) - 1));
    }
    /* The lane of the group's thread of rank `rank` (the caller's own when there is none). */
    __device__ int lane_of(unsigned long long rank) const {
        unsigned long long left = mask_;
        for (unsigned long long r = 0; left != 0; ++r) {
            if (r == rank) return __builtin_ctzll(left);
            left &= left - 1;
        }
        return (int)(gm_lane_id() % gm_warp_size());
    }
    template <typename T>
    __device__ T from_lane(T value, int lane) const {
        return details::by_words(value, [=](int w) { return __shfl(w, lane, gm_warp_size()); });
    }

  public:
    __device__ explicit coalesced_group(unsigned long long mask)
        : thread_group((unsigned int)__builtin_popcountll(mask), rank_in(mask)), mask_(mask) {}
    __device__ unsigned long long meta_group_rank() const { return 0; }
    __device__ unsigned long long meta_group_size() const { return 1; }
    __device__ unsigned long long gm_mask() const { return mask_; }
    __device__ void sync() const { __builtin_amdgcn_wave_barrier(); }
    template <typename T>
    __device__ T shfl(T value, unsigned int rank) const {
        return from_lane(value, lane_of(rank));
    }
    template <typename T>
    __device__ T shfl_down(T value, unsigned int delta) const {
        const unsigned long long to = rank_ + delta;
        return from_lane(value, to < size_ ? lane_of(to) : lane_of(rank_));
    }
    template <typename T>
    __device__ T shfl_up(T value, unsigned int delta) const {
        return from_lane(value, rank_ >= delta ? lane_of(rank_ - delta) : lane_of(rank_));
    }
    /* One bit per thread of the group, by thread_rank. */
    __device__ unsigned long long ballot(int predicate) const {
        const unsigned long long lanes = __ballot(predicate) & mask_;
        unsigned long long bits = 0;
        unsigned long long left = mask_;
        for (unsigned int r = 0; left != 0; ++r, left &= left - 1) {
            if (lanes & (left & ~(left - 1))) bits |= 1ull << r;
        }
        return bits;
    }
    __device__ int any(int predicate) const { return (__ballot(predicate) & mask_) != 0; }
    __device__ int all(int predicate) const { return (__ballot(predicate) & mask_) == mask_; }
    /* The group's values combined by `op` in rank order, for every thread of the group. */
    template <typename T, typename Op>
    __device__ T gm_reduce(T value, Op op) const {
        T acc = shfl(value, 0);
        for (unsigned int r = 1; r < size_; ++r) acc = op(acc, shfl(value, r));
        return acc;
    }
    /* The lanes of this group whose `label` equals the caller's. */
    template <typename Label>
    __device__ unsigned long long gm_same(Label label) const {
        unsigned long long same = 0;
        unsigned long long left = mask_;
        while (left != 0) {
            const int lane = __builtin_ctzll(left);
            if (from_lane(label, lane) == label) same |= 1ull << lane;
            left &= left - 1;
        }
        return same;
    }
};

/* The lanes of the wavefront that run this call. */
__device__ inline coalesced_group coalesced_threads() { return coalesced_group(__ballot(1)); }

/* The threads of `group` with the caller's `label`, one group per label. */
template <typename Label>
__device__ inline coalesced_group labeled_partition(const coalesced_group& group, Label label) {
    return coalesced_group(group.gm_same(label));
}
template <typename Label, unsigned int N, typename P>
__device__ inline coalesced_group labeled_partition(const thread_block_tile<N, P>& tile,
                                                    Label label) {
    return labeled_partition(coalesced_group(tile.gm_mask()), label);
}
/* The threads of `group` whose `predicate` is the caller's. */
template <typename Group>
__device__ inline coalesced_group binary_partition(const Group& group, bool predicate) {
    return labeled_partition(group, (int)predicate);
}

/* The grid: ranks and sizes. Its sync needs a cooperative launch, which gpu-mem's ROC backend
 * does not make: it traps (the launch fails) rather than return unsynchronized. */
class grid_group {
  public:
    __device__ unsigned long long thread_rank() const {
        const unsigned long long block =
            blockIdx.x + (unsigned long long)gridDim.x * (blockIdx.y + (unsigned long long)gridDim.y * blockIdx.z);
        return block * details::block_size() + details::block_rank();
    }
    __device__ unsigned long long size() const {
        return (unsigned long long)gridDim.x * gridDim.y * gridDim.z * details::block_size();
    }
    __device__ unsigned long long num_threads() const { return size(); }
    __device__ bool is_valid() const { return false; }
    __device__ void sync() const { __builtin_trap(); }
};
__device__ inline grid_group this_grid() { return grid_group(); }

template <typename Group>
__device__ inline void sync(const Group& group) {
    group.sync();
}
}  // namespace cooperative_groups
