/* A warp's exchange at a collective worked out in the program, without the runtime's call
 * (blocks run as regions; included by gm_sim/regions.h). The runtime's `warp` callback is the
 * rule (the simulator's `executor::release`: groups by the lowest lane's mask, each group's
 * shuffle segments and votes); this is the same rule for the case nearly every kernel reaches:
 * one group, the lanes the lowest one's mask names being exactly those here, doing a shuffle
 * of one power-of-two width, a vote, `__activemask` or `__syncwarp`. Anything else (several
 * groups, lanes still to come, other widths, reductions) returns false and the runtime decides,
 * so what a kernel computes and reports stays the runtime's. A test runs shuffles of every
 * kind, width and operand as regions and on fibers (which ask the runtime) and compares.
 *
 * The operands are arrays over the block's threads, one per field (`gm_sim_warp_operands`),
 * not the runtime's `gm_sim_lane` records: a region's records and deliveries are then plain
 * stores and loads at the thread's index, which the compiler vectorises across threads, and a
 * shuffle whose lanes all pass one distance is a copy of the values shifted by it. */

/* The most threads a block has (the simulator refuses larger blocks): how far apart a
 * thread's operands lie in `gm_sim_warp_operands::words`. */
#define GM_SIM_BLOCK_THREADS 1024ul
/* Where each operand's array starts in those words (a 64-bit word each). */
#define GM_SIM_OPERAND_VALUE 0ul
#define GM_SIM_OPERAND_MASK (1ul * GM_SIM_BLOCK_THREADS)
#define GM_SIM_OPERAND_RESULT (2ul * GM_SIM_BLOCK_THREADS)
#define GM_SIM_OPERAND_ARG (3ul * GM_SIM_BLOCK_THREADS)
#define GM_SIM_OPERAND_WIDTH (4ul * GM_SIM_BLOCK_THREADS)
#define GM_SIM_OPERAND_OP (5ul * GM_SIM_BLOCK_THREADS)
#define GM_SIM_OPERAND_WORDS (6ul * GM_SIM_BLOCK_THREADS)

/* Each thread's operands of the warp collective it reached, and its result, from some thread
 * on (a warp's first lane: `at(base)`): arrays a fixed distance apart, so that a thread's call
 * finds all of its own from the one address of its value (`recording`, in gm_sim/regions.h)
 * and the compiler needs nothing else in a region's loop. */
struct gm_sim_warp_operands {
    unsigned long long *value, *mask, *result;
    long long *arg, *width, *op;

    static gm_sim_warp_operands in(unsigned long long* words) {
        return gm_sim_warp_operands{words + GM_SIM_OPERAND_VALUE,
                                    words + GM_SIM_OPERAND_MASK,
                                    words + GM_SIM_OPERAND_RESULT,
                                    reinterpret_cast<long long*>(words + GM_SIM_OPERAND_ARG),
                                    reinterpret_cast<long long*>(words + GM_SIM_OPERAND_WIDTH),
                                    reinterpret_cast<long long*>(words + GM_SIM_OPERAND_OP)};
    }
    gm_sim_warp_operands at(unsigned int base) const {
        return gm_sim_warp_operands{value + base, mask + base,  result + base,
                                    arg + base,   width + base, op + base};
    }
    /* Lane `l`'s operands and result in the runtime's record. */
    gm_sim_lane lane(unsigned int l) const {
        gm_sim_lane record;
        record.mask = mask[l];
        record.value = value[l];
        record.arg = arg[l];
        record.result = value[l]; /* (what the runtime hands a lane it leaves alone) */
        record.width = (int)width[l];
        record.op = (int)op[l];
        return record;
    }
};

/* Lanes `0..n` of a warp of `n` (n <= 64). */
inline unsigned long long gm_sim_lanes_below(unsigned int n) {
    return n >= 64 ? ~0ull : (1ull << n) - 1;
}

/* `result` for every lane `here` of a warp of `n` (a vote's, `__activemask`'s). */
inline void gm_sim_hand_out(unsigned long long here, unsigned int n, unsigned long long* results,
                            unsigned long long result) {
    for (unsigned int l = 0; l < n; ++l) {
        if (here >> l & 1) {
            results[l] = result;
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
                           const gm_sim_warp_operands& w, Source source) {
    bool one_width = true;
    if (here == gm_sim_lanes_below(n)) {
        /* Every lane here (the common case): no lane to test. */
        for (unsigned int l = 0; l < n; ++l) {
            const long long group = (long long)(l & ~mask);
            const long long end = group + mask + 1 < (long long)n ? group + mask + 1 : (long long)n;
            const long long src = source((long long)l, w.arg[l], group, end);
            w.result[l] = w.value[src >= 0 ? src : l];
            one_width &= w.width[l] == width;
        }
        return one_width;
    }
    for (unsigned int l = 0; l < n; ++l) {
        if (here >> l & 1) {
            const long long group = (long long)(l & ~mask);
            const long long end = group + mask + 1 < (long long)n ? group + mask + 1 : (long long)n;
            const long long src = source((long long)l, w.arg[l], group, end);
            w.result[l] = src >= 0 && (here >> src & 1) ? w.value[src] : w.value[l];
            one_width &= w.width[l] == width;
        }
    }
    return one_width;
}

/* Whether every one of the `n` lanes passed the first one's width and argument. (The bits in
 * which any differs, or'ed: a loop the compiler vectorises.) */
inline bool gm_sim_one_operand(unsigned int n, const gm_sim_warp_operands& w) {
    const long long width = w.width[0], arg = w.arg[0];
    unsigned long long differ = 0;
    for (unsigned long l = 0; l < n; ++l) {
        differ |= (unsigned long long)((w.width[l] ^ width) | (w.arg[l] ^ arg));
    }
    return differ == 0;
}

/* A shuffle up or down by one distance `d` (or of one source lane) in segments of `width` lanes
 * that tile the `n` lanes of a warp, every lane here: the same results as `gm_sim_shuffle`'s,
 * as copies of the values shifted by `d`, which the compiler vectorises (the scans and trees of
 * real kernels shuffle so). `op` is GM_SIM_OP_SHFL_UP, _DOWN or GM_SIM_OP_SHFL. */
inline void gm_sim_shift(int op, unsigned long long d, unsigned long n, unsigned long width,
                         const gm_sim_warp_operands& w) {
    /* (Indices of 64 bits and pointers that overlap nothing: loops the compiler vectorises.) */
    const unsigned long long* __restrict value = w.value;
    unsigned long long* __restrict result = w.result;
    for (unsigned long g = 0; g < n; g += width) {
        const unsigned long long* __restrict from = value + g;
        unsigned long long* __restrict to = result + g;
        if (op == GM_SIM_OP_SHFL) {
            const unsigned long long v = from[d & (width - 1)];
            for (unsigned long j = 0; j < width; ++j) {
                to[j] = v;
            }
            continue;
        }
        const unsigned long kept = d >= width ? width : (unsigned long)d;
        if (op == GM_SIM_OP_SHFL_UP) {
            /* The segment's first `d` lanes keep their own values. */
            for (unsigned long j = 0; j < kept; ++j) {
                to[j] = from[j];
            }
            for (unsigned long j = kept; j < width; ++j) {
                to[j] = from[j - kept];
            }
        } else {
            /* Its last `d` lanes keep theirs. */
            for (unsigned long j = 0; j < width - kept; ++j) {
                to[j] = from[j + kept];
            }
            for (unsigned long j = width - kept; j < width; ++j) {
                to[j] = from[j];
            }
        }
    }
}

/* The exchange of the `n` lanes of a warp at a collective `op` (the first lane's), those that
 * are `here` having recorded their operands in `w` (from the warp's first lane): their results
 * written, and true, where the rule above applies; false (nothing written) where the runtime
 * must decide. */
inline bool gm_sim_exchange_at_once(int op, unsigned long long here, unsigned int n,
                                    const gm_sim_warp_operands& w) {
    const unsigned int lowest = (unsigned int)__builtin_ctzll(here);
    if ((w.mask[lowest] & gm_sim_lanes_below(n)) != here) {
        return false; /* several groups, or lanes that are not here yet */
    }
    switch (op) {
    case 0: /* __syncwarp: every lane it waits for is here */
        return true;
    case GM_SIM_OP_ACTIVE:
        gm_sim_hand_out(here, n, w.result, here);
        return true;
    case GM_SIM_OP_BALLOT:
    case GM_SIM_OP_ALL:
    case GM_SIM_OP_ANY: {
        unsigned long long ballot = 0;
        for (unsigned int l = 0; l < n; ++l) {
            ballot |= (unsigned long long)((here >> l & 1) && w.value[l] != 0) << l;
        }
        const unsigned long long vote = op == GM_SIM_OP_BALLOT ? ballot
                                        : op == GM_SIM_OP_ALL  ? (unsigned long long)(ballot == here)
                                                               : (unsigned long long)(ballot != 0);
        gm_sim_hand_out(here, n, w.result, vote);
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
    const int asked = (int)w.width[lowest];
    const unsigned int width = asked < 1 ? 1u : (unsigned int)asked > n ? n : (unsigned int)asked;
    if ((width & (width - 1)) != 0) {
        return false;
    }
    const unsigned int mask = width - 1;
    if (op != GM_SIM_OP_SHFL_XOR && here == gm_sim_lanes_below(n) && n % width == 0 &&
        gm_sim_one_operand(n, w)) {
        /* (A lane index: a shuffle's source lane is an int, a distance an unsigned int.) */
        const unsigned long long d =
            op == GM_SIM_OP_SHFL ? (unsigned long long)w.arg[0] : (unsigned int)w.arg[0];
        gm_sim_shift(op, d, n, width, w);
        return true;
    }
    switch (op) {
    case GM_SIM_OP_SHFL:
        return gm_sim_shuffle(here, n, asked, mask, w,
                              [mask](long long, long long arg, long long group, long long end) {
                                  const long long src = group + (arg & (long long)mask);
                                  return src < end ? src : -1;
                              });
    case GM_SIM_OP_SHFL_UP:
        return gm_sim_shuffle(here, n, asked, mask, w,
                              [](long long lane, long long arg, long long group, long long) {
                                  const long long src = lane - (long long)(unsigned int)arg;
                                  return src >= group ? src : -1;
                              });
    case GM_SIM_OP_SHFL_DOWN:
        return gm_sim_shuffle(here, n, asked, mask, w,
                              [](long long lane, long long arg, long long, long long end) {
                                  const long long src = lane + (long long)(unsigned int)arg;
                                  return src < end ? src : -1;
                              });
    default: /* GM_SIM_OP_SHFL_XOR */
        return gm_sim_shuffle(here, n, asked, mask, w,
                              [](long long lane, long long arg, long long, long long end) {
                                  const long long src = lane ^ arg;
                                  return src >= 0 && src < end ? src : -1;
                              });
    }
}
