/*
 * <cooperative_groups/reduce.h> for gpu-mem's simulator: cooperative_groups::reduce over a
 * tile or a coalesced group (every thread of the group gets the result), with plus, less,
 * greater, bit_and, bit_or and bit_xor.
 */
#pragma once
#include <cooperative_groups.h>

namespace cooperative_groups {
template <typename T>
struct plus {
    T operator()(T a, T b) const { return a + b; }
};
template <typename T>
struct less {
    T operator()(T a, T b) const { return b < a ? b : a; }
};
template <typename T>
struct greater {
    T operator()(T a, T b) const { return a < b ? b : a; }
};
template <typename T>
struct bit_and {
    T operator()(T a, T b) const { return a & b; }
};
template <typename T>
struct bit_or {
    T operator()(T a, T b) const { return a | b; }
};
template <typename T>
struct bit_xor {
    T operator()(T a, T b) const { return a ^ b; }
};

/* The operations a tile reduces in one exchange (GM_SIM_REDUCE_TILE's numbers). */
#define GM_SIM_TILE_OP(op, code)                                                              \
    template <typename T>                                                                     \
    struct gm_sim_tile_op<op<T>> {                                                            \
        static constexpr int value = code;                                                    \
    };
GM_SIM_TILE_OP(plus, 0)
GM_SIM_TILE_OP(less, 1)
GM_SIM_TILE_OP(greater, 2)
GM_SIM_TILE_OP(bit_and, 3)
GM_SIM_TILE_OP(bit_or, 4)
GM_SIM_TILE_OP(bit_xor, 5)
#undef GM_SIM_TILE_OP

template <unsigned int N, typename P, typename T, typename Op>
inline T reduce(const thread_block_tile<N, P>& tile, T value, Op op,
                const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return tile.gm_sim_reduce(value, op, file, line);
}
template <typename T, typename Op>
inline T reduce(const coalesced_group& group, T value, Op op,
                const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return group.gm_sim_reduce(value, op, file, line);
}
}  // namespace cooperative_groups
