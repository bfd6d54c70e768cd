/* A warp's exchange at a collective worked out in the program, without the runtime's call
 * (blocks run as regions; included by gm_sim/regions.h). The runtime's `warp` callback is the
 * rule (the simulator's `executor::release`: groups by the lowest lane's mask, each group's
 * shuffle segments and votes); this is the same rule for the case nearly every kernel reaches:
 * one group, the lanes the lowest one's mask names being exactly those here, doing a shuffle
 * of one power-of-two width, a vote, `__activemask` or `__syncwarp`. Anything else (several
 * groups, lanes still to come, other widths, reductions) returns false and the runtime decides,
 * so what a kernel computes and reports stays the runtime's. A test runs shuffles of every
 * kind, width and operand as regions and on fibers (which ask the runtime) and compares. */

/* Lanes `0..n` of a warp of `n` (n <= 64). */
inline unsigned long long gm_sim_lanes_below(unsigned int n) {
    return n >= 64 ? ~0ull : (1ull << n) - 1;
}

/* `result` for every lane `here` of a warp of `n` (a vote's, `__activemask`'s). */
inline void gm_sim_hand_out(unsigned long long here, unsigned int n, gm_sim_lane* lanes,
                            unsigned long long result) {
    for (unsigned int l = 0; l < n; ++l) {
        if (here >> l & 1) {
            lanes[l].result = result;
        }
    }
}

/* A shuffle's results for the lanes `here` of a warp of `n`: each reads the lane
 * `source(lane, arg, segment's first lane, its end)` names, or its own value where that is -1
 * or a lane that is not here. Segments are of a power-of-two width (`mask`: the width less
 * one), the width every lane here passed: false where one passed another (the runtime then
 * decides, and writes every result again). (One loop per kind of shuffle: a switch per lane
 * made the exchange cost as much as the runtime's call.) */
template <typename Source>
inline bool gm_sim_shuffle(unsigned long long here, unsigned int n, int width, unsigned int mask,
                           gm_sim_lane* lanes, Source source) {
    bool one_width = true;
    if (here == gm_sim_lanes_below(n)) {
        /* Every lane here (the common case): no lane to test. */
        for (unsigned int l = 0; l < n; ++l) {
            const long long group = (long long)(l & ~mask);
            const long long end = group + mask + 1 < (long long)n ? group + mask + 1 : (long long)n;
            const long long src = source((long long)l, lanes[l].arg, group, end);
            lanes[l].result = lanes[src >= 0 ? src : l].value;
            one_width &= lanes[l].width == width;
        }
        return one_width;
    }
    for (unsigned int l = 0; l < n; ++l) {
        if (here >> l & 1) {
            const long long group = (long long)(l & ~mask);
            const long long end = group + mask + 1 < (long long)n ? group + mask + 1 : (long long)n;
            const long long src = source((long long)l, lanes[l].arg, group, end);
            lanes[l].result = src >= 0 && (here >> src & 1) ? lanes[src].value : lanes[l].value;
            one_width &= lanes[l].width == width;
        }
    }
    return one_width;
}

/* The exchange of the `n` lanes of a warp at a collective `op` (the first lane's), those that
 * are `here` having recorded their operands: their results written, and true, where the rule
 * above applies; false (nothing written) where the runtime must decide. */
inline bool gm_sim_exchange_at_once(int op, unsigned long long here, unsigned int n,
                                    gm_sim_lane* lanes) {
    const unsigned int lowest = (unsigned int)__builtin_ctzll(here);
    if ((lanes[lowest].mask & gm_sim_lanes_below(n)) != here) {
        return false; /* several groups, or lanes that are not here yet */
    }
    switch (op) {
    case 0: /* __syncwarp: every lane it waits for is here */
        return true;
    case GM_SIM_OP_ACTIVE:
        gm_sim_hand_out(here, n, lanes, here);
        return true;
    case GM_SIM_OP_BALLOT:
    case GM_SIM_OP_ALL:
    case GM_SIM_OP_ANY: {
        unsigned long long ballot = 0;
        for (unsigned int l = 0; l < n; ++l) {
            ballot |= (unsigned long long)((here >> l & 1) && lanes[l].value != 0) << l;
        }
        const unsigned long long vote = op == GM_SIM_OP_BALLOT ? ballot
                                        : op == GM_SIM_OP_ALL  ? (unsigned long long)(ballot == here)
                                                               : (unsigned long long)(ballot != 0);
        gm_sim_hand_out(here, n, lanes, vote);
        return true;
    }
    case GM_SIM_OP_SHFL:
    case GM_SIM_OP_SHFL_UP:
    case GM_SIM_OP_SHFL_DOWN:
    case GM_SIM_OP_SHFL_XOR:
        break;
    default:
        return false;
    }
    /* A shuffle: one width (as CUDA requires of a group), clamped to the warp as the runtime
     * clamps it, a power of two. Deltas are CUDA's unsigned ints; a butterfly reads lanes of
     * earlier segments too (only past the segment's end is its own value). */
    const int asked = lanes[lowest].width;
    const unsigned int width = asked < 1 ? 1u : (unsigned int)asked > n ? n : (unsigned int)asked;
    if ((width & (width - 1)) != 0) {
        return false;
    }
    const unsigned int mask = width - 1;
    switch (op) {
    case GM_SIM_OP_SHFL:
        return gm_sim_shuffle(here, n, asked, mask, lanes,
                              [mask](long long, long long arg, long long group, long long end) {
                                  const long long src = group + (arg & (long long)mask);
                                  return src < end ? src : -1;
                              });
    case GM_SIM_OP_SHFL_UP:
        return gm_sim_shuffle(here, n, asked, mask, lanes,
                              [](long long lane, long long arg, long long group, long long) {
                                  const long long src = lane - (long long)(unsigned int)arg;
                                  return src >= group ? src : -1;
                              });
    case GM_SIM_OP_SHFL_DOWN:
        return gm_sim_shuffle(here, n, asked, mask, lanes,
                              [](long long lane, long long arg, long long, long long end) {
                                  const long long src = lane + (long long)(unsigned int)arg;
                                  return src < end ? src : -1;
                              });
    default: /* GM_SIM_OP_SHFL_XOR */
        return gm_sim_shuffle(here, n, asked, mask, lanes,
                              [](long long lane, long long arg, long long, long long end) {
                                  const long long src = lane ^ arg;
                                  return src >= 0 && src < end ? src : -1;
                              });
    }
}
