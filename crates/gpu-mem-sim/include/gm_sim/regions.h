/* Threads as loops between barriers (GM_SIM_REGIONS; the rewrite is the simulator's
 * `source::regions`). A kernel whose block barriers all stand as statements of its body, or of
 * loops in it, is run a whole block per call: each stretch of statements between two barriers
 * (a region) is a loop over the block's threads, in index order, each thread one call of a
 * lambda that holds the stretch; a loop that holds barriers runs once for the block, its
 * condition asked of every thread, which must agree. Variables declared in the kernel's body
 * (or a loop's) live in per-thread slots, one per thread of the block, so that each thread finds
 * its own values again after a barrier.
 *
 * Included by gpu_mem.h after the threads loop it reuses (gm_sim_next_thread, gm_sim_threads). */

#include <cstdlib>
#include <new>
#include <type_traits>

#include "gm_sim/exchange.h"

#define GM_SIM_MASKED 3u
/* A thread that waits at a warp collective some of whose lanes are elsewhere (`returned`; the
 * collective's line in its lane's `result`). */
#define GM_SIM_WARP_PARKED 255u
#define GM_SIM_VERDICT_ENDED 0
#define GM_SIM_VERDICT_BARRIER 1
#define GM_SIM_VERDICT_COLLECTIVE 2
#define GM_SIM_VERDICT_RELEASED 3
#define GM_SIM_RECORD 1u
#define GM_SIM_DELIVER 2u
#define GM_SIM_DIVERGED_EXITED 0
#define GM_SIM_DIVERGED_SITES 1
/* Or'ed into the line of the barrier a side of a condition reaches next, where the rewrite
 * only guesses it (behind a loop or `if`): that side runs on to find it. */
#define GM_SIM_GUESS 0x80000000u


/* What a block run as regions keeps: its threads, which of them returned, and an arena for the
 * per-thread slots of this OS thread (reused block after block). */
struct gm_sim_regions {
    gm_sim_thread* thread;        /* what threadIdx & co read: set to each thread in turn */
    const unsigned char* faulted; /* nonzero once a thread recorded a fault */
    unsigned int count;           /* threads that run: the block's, 0 once it stopped */
    unsigned int threads;         /* the block's threads */
    unsigned int dim_x, dim_y, warp;
    bool any_returned;            /* some thread returned or waits (it skips every later region) */
    /* Threads that returned (1 in `returned`): once all did, a uniform loop goes round no
     * more (its bounds may be variables the threads assign, which none did). */
    unsigned int ended;
    bool newly_returned;          /* some thread returned in the region that runs */
    /* Threads that parted from the others at a condition and wait at the barrier of line
     * `parked_line` (marked 2 in `returned`), while the others run on to theirs. */
    unsigned int parked, parked_line;
    /* [threads]: each thread's answer at the last condition (0, 1) or jump (0, 2, 3). Not a
     * character type: a store through one may alias anything, and every slot the regions'
     * loops use was loaded again after each thread's store. */
    unsigned short* choice;
    /* A region with `break` or `continue` of the loop around it: of the threads that ran it
     * (and did not return), how many broke and continued (what each did: `choice`). */
    unsigned int ran, broke, continued;
    /* [threads]: 0 while the thread runs; 1 once it returned; 2 parked (above); from
     * GM_SIM_MASKED on, waiting at the end of the `if` or loop with warp collectives of depth
     * `returned - GM_SIM_MASKED` that it left or did not enter (masked, as a GPU's lanes are
     * after divergence). */
    unsigned char* returned;
    /* [threads] each: every thread's operands and result of the warp collective of the
     * statement the regions were split at (gm_sim/exchange.h); `lanes` holds them in the
     * runtime's records where it decides (and where it keeps lanes parked). */
    gm_sim_warp_operands operands;
    gm_sim_lane* lanes;
    /* What a collective call that reaches the prelude's function does in the thread's turn
     * (see gm_sim_regions_collective): record its operands at `recording` (the thread's in
     * `operands.value`), or hand out the result at `delivering`; one of them is null. (Set
     * before each thread's call: only where the kernel calls a collective by another name
     * than the prelude's functions, GM_SIM_COLLECTIVES_AT.) */
    unsigned long long* recording;
    const unsigned long long* delivering;
    /* How many `if`s and loops with warp collectives (and no barrier) are open. */
    unsigned int depth;
    /* How many threads wait at warp collectives that cannot complete (GM_SIM_WARP_PARKED). */
    unsigned int warp_parked;
    /* Every thread that runs (0 in `returned`) lies in [lo, hi): where an `if` or loop with
     * warp collectives masked all threads but a few (the first warp's lanes that scan the
     * warps' sums), the walks and the exchanges go over those alone, not the whole block. */
    unsigned int lo, hi;
    char* arena;
    unsigned long used, size;
    /* A checked program's: how much of the arena the simulator was told is the block's
     * (`gm_sim_rt.own`), which its threads' checked accesses may then touch. */
    unsigned long owned;

    /* `bytes` for slots (aligned to 64: a vector's width), from the arena, or the heap when the
     * arena is full (`fresh` is then set and the caller frees it). A checked program tells the
     * simulator what the block took: the arena as far as it reached, each heap block. */
    void* take(unsigned long bytes, bool& fresh) {
        bytes = (bytes + 63) & ~63ul;
        if (used + bytes <= size) {
            fresh = false;
            void* p = arena + used;
            used += bytes;
#if defined(GM_SIM_CHECKED)
            if (used > owned) {
                gm_sim_rt.own(arena + owned, used - owned);
                owned = used;
            }
#endif
            return p;
        }
        fresh = true;
        bytes = bytes == 0 ? 64 : bytes;
        void* p = std::aligned_alloc(64, bytes);
        if (p == nullptr) {
            throw std::bad_alloc();
        }
#if defined(GM_SIM_CHECKED)
        gm_sim_rt.own(p, bytes);
#endif
        return p;
    }

    /* Thread `t`'s collective call records its operands (`mode` GM_SIM_RECORD) or hands out
     * its result (GM_SIM_DELIVER): what the rewrite writes before the call, in the thread's
     * turn. */
    void collect(unsigned long t, unsigned int mode) {
        recording = mode == GM_SIM_RECORD ? operands.value + t : nullptr;
        delivering = mode == GM_SIM_DELIVER ? operands.result + t : nullptr;
    }
    /* The operands and results of threads `from..to` that run, in the runtime's records (those
     * of threads parked at a collective say where they wait, and stay). */
    __attribute__((noinline, cold)) void to_lanes(unsigned int from, unsigned int to) {
        for (unsigned int t = from; t < to; ++t) {
            if (returned[t] == 0) {
                lanes[t] = operands.lane(t);
            }
        }
    }

    /* The block goes no further: no thread runs in any later region. */
    void stop() { count = 0; }

    /* After each region: a fault ends the block (as the threads loop does), and a thread that
     * returned skips every later region. */
    void after_region() {
        if (gm_sim_faulted(faulted)) {
            count = 0;
        }
        any_returned = any_returned || newly_returned;
        newly_returned = false;
    }

    /* A block barrier: every thread passed the region before it. One that returned cannot
     * reach it, which is divergence (the scheduler's rule: a barrier reached by some threads
     * while the others exited); threads parked at another barrier wait there: two barriers,
     * the first thread's first. */
    void at_barrier(const char* file, int line) {
        if (count == 0 || !any_returned) {
            return;
        }
        if (warp_parked != 0) {
            return verdict(file, line, GM_SIM_VERDICT_BARRIER);
        }
        const unsigned int at[4] = {(unsigned int)line, 0, 0, 0};
        report(file, at, false);
    }

    /* The kernel's end: threads parked at a barrier wait for the others, which ended. */
    void at_end(const char* file) {
        if (count != 0 && warp_parked != 0) {
            return verdict(file, 0, GM_SIM_VERDICT_ENDED);
        }
        if (count != 0 && parked != 0) {
            const unsigned int at[4] = {0, 0, 0, 0};
            report(file, at, false);
        }
    }

    /* The divergence of a block, in the scheduler's words: the first waiting thread's barrier
     * and the first other one, or the one barrier some reach while the others ended. A live
     * thread waits at line `at[choice]` (`by_choice`) or `at[0]`, a parked one at
     * `parked_line`, one that returned nowhere (0: ended). The block stops. (Out of line, as
     * every path that only a diverging block takes: `flatten` would otherwise inline it into
     * the regions' loops, and GCC optimised them worse, twice as slow.) */
    __attribute__((noinline, cold)) void report(const char* file, const unsigned int at[4],
                                                bool by_choice) {
        if (ended == threads) {
            /* Every thread returned: the block ended, with nothing to report (stopping it
             * would stop the blocks after it too). */
            return;
        }
        unsigned int first = 0, other = 0, reaching = 0;
        for (unsigned int t = 0; t < threads; ++t) {
            const unsigned int site =
                returned[t] == 0 ? at[by_choice ? (unsigned int)choice[t] & 3 : 0]
                : returned[t] == 2 ? parked_line
                                   : 0;
            if (site == 0) {
                continue;
            }
            first = first == 0 ? site : first;
            if (site == first) {
                ++reaching;
            } else if (other == 0) {
                other = site;
            }
        }
        if (other != 0) {
            gm_sim_rt.diverged(GM_SIM_DIVERGED_SITES, file, 0, first, other);
        } else if (first != 0 && reaching != threads) {
            gm_sim_rt.diverged(GM_SIM_DIVERGED_EXITED, file, (int)first, reaching, threads);
        } else if (first != 0) {
            /* Every thread at one line, having parted on the way there (the scheduler would
             * release them; regions cannot bring the parted threads back): still divergence. */
            gm_sim_rt.diverged(GM_SIM_DIVERGED_SITES, file, 0, first, first);
        }
        stop();
    }

    /* Threads part: those whose `choice` is not `going` wait at the barrier of line `line`
     * (parked), the others go on alone until they reach a barrier of their own (or end), which
     * names the divergence as the scheduler would find it. */
    __attribute__((noinline, cold)) void park_all_but(unsigned int going, unsigned int line) {
        for (unsigned int t = 0; t < threads; ++t) {
            if (returned[t] == 0 && (unsigned int)choice[t] != going) {
                returned[t] = 2;
                ++parked;
            }
        }
        parked_line = line;
        any_returned = true;
    }

    void warp_exchange(const char* file, int line);
    __attribute__((noinline, cold)) int runtime_exchange(int op, unsigned long long here,
                                                         unsigned int n, unsigned int base);
    /* No thread can go on (the live ones as `kind` says, at `line`): the scheduler's report. */
    __attribute__((noinline, cold)) void verdict(const char* file, int line, int kind) {
        if (gm_sim_rt.verdict(file, line, kind, threads, parked_line, returned, lanes) != 0) {
            stop();
        }
    }
    bool mask_else();
    template <typename F>
    bool mask_enter(F&& pass);
    template <typename F>
    bool mask_while(F&& condition);
    void mask_end();
    unsigned int live_bounds();
    template <typename F>
    bool all(const char* file, unsigned int yes, unsigned int no, F&& condition);
    template <typename F, typename C>
    bool all(const char* file, unsigned int yes, unsigned int no, F&& pass, C&& condition);
    __attribute__((noinline, cold)) bool parted(const char* file, unsigned int yes,
                                                unsigned int no);
    /* Every `choice` back to 0 (went on), what a region with jumps leaves where none jumped. */
    __attribute__((noinline, cold)) void clear_choices() {
        std::memset(choice, 0, threads * sizeof *choice);
    }
    int after_jumps(const char* file, unsigned int broke_to, unsigned int on_to,
                    unsigned int continued_to);
};

/* This OS thread's block state (one block at a time runs on an OS thread, and a block run as
 * regions never leaves it). `const`, as gm_sim_self: the compiler asks once per block instead
 * of at every warp collective's call (a thread-local's address is a call of
 * `__tls_get_addr` in a shared library). */
#if defined(GM_SIM_SHADOWED)
/* Where memcheck tests accesses against a shadow (GM_SIM_SHADOWED), the state is let through
 * like the kernel's shared arrays (the kernel's code reads it inline), so a shared array's
 * overflow into it would not be refused, and would corrupt the walk. It lives among the
 * initialised thread-locals (`.tdata`), which lie before the zeroed ones, the kernel's arrays
 * among them, so that none runs past its end into the state; and it ends with bytes no one
 * uses, so that one running below its start does not reach it either (as far as they go). */
struct gm_sim_regions_storage {
    gm_sim_regions state;
    unsigned char unused[256];
};
#define GM_SIM_REGIONS_SECTION __attribute__((section(".tdata.gm_sim_regions")))
#else
struct gm_sim_regions_storage {
    gm_sim_regions state;
};
#define GM_SIM_REGIONS_SECTION
#endif
static thread_local gm_sim_regions_storage gm_sim_regions_state GM_SIM_REGIONS_SECTION;
#undef GM_SIM_REGIONS_SECTION
__attribute__((const, noinline, nothrow)) static gm_sim_regions* gm_sim_regions_of_this_thread() {
    return &gm_sim_regions_state.state;
}
inline gm_sim_regions& gm_sim_regions_here() { return *gm_sim_regions_of_this_thread(); }

/* The walk over a block's live threads that every region makes: each thread's index set where
 * threadIdx & co read it before its turn (only `x` within a row: a store a visit). What the
 * loop tests is copied out of the block's state, which the threads' own stores cannot then
 * change under it. */
struct gm_sim_cursor {
    gm_sim_regions& b;
    gm_sim_thread* const thread;
    /* `end`: past the last thread that may run (the span's end, 0 once the block stopped). */
    const unsigned int end, dim_x, dim_y;
    const bool any_returned;
    const unsigned char* const returned;
    unsigned int t;
    gm_uint3 index;

    explicit gm_sim_cursor(gm_sim_regions& b)
        : b(b), thread(b.thread), end(b.count < b.hi ? b.count : b.hi), dim_x(b.dim_x),
          dim_y(b.dim_y), any_returned(b.any_returned), returned(b.returned), t(b.lo),
          index{0, 0, 0} {
        if (__builtin_expect(t != 0, 0)) {
            const unsigned int row = t / dim_x;
            index = gm_uint3{t % dim_x, row % dim_y, row / dim_y};
        }
        thread->thread_idx = index;
    }
    bool more() const { return t < end; }
    bool live() const { return !any_returned || returned[t] == 0; }
    void next() {
        ++t;
        if (__builtin_expect(++index.x == dim_x, 0)) {
            index.x = 0;
            if (++index.y == dim_y) {
                index.y = 0;
                ++index.z;
            }
            thread->thread_idx.y = index.y;
            thread->thread_idx.z = index.z;
        }
        thread->thread_idx.x = index.x;
    }
    /* Thread `t` returned: it skips every later region. */
    void returned_here() {
        b.returned[t] = 1;
        ++b.ended;
        b.newly_returned = true;
    }
    /* Runs thread `t`'s part of a region: `region(t)` is false when the thread returned. */
    template <typename F>
    void run(F&& region) {
        if (!region(t)) {
            returned_here();
        }
    }
    /* The same for a region that is one `if` whose condition admits a prefix of the block's
     * threads in the order of `threadIdx.x` (`region(t)` is 2 where it refuses the thread, 1
     * where the thread returned): in a block of one row, where that is the order of the walk,
     * no later thread would be admitted either; whether the walk stops here. (A tree
     * reduction's `if (tid < s)` visited all the block's threads at every level.) */
    template <typename F>
    bool run_while(F&& region) {
        const int r = region(t);
        if (r == 1) {
            returned_here();
        }
        return r == 2 && dim_x == b.threads;
    }
    /* The same for a region that may leave the loop around it: `region(t)` is 0 when the
     * thread went on, 1 when it returned, 2 when it broke out, 3 when it continued. */
    template <typename F>
    void run_jumps(F&& region) {
        const int r = region(t);
        if (r == 1) {
            returned_here();
            return;
        }
        if (r != 0) {
            /* (Rare: the others keep 0, cleared after every region where one jumped.) */
            b.choice[t] = (unsigned short)r;
        }
        ++b.ran;
        b.broke += r == 2;
        b.continued += r == 3;
    }
};

/* After a region that may leave the loop around it: 2 when every thread broke out, 3 when every
 * one continued, 0 when none did. Threads that disagree part, and wait next at different
 * barriers (lines: `broke_to` for those that broke, `continued_to` for those that continued,
 * `on_to` for the others; 0: they end): divergence, as `all` reports it. */
inline int gm_sim_regions::after_jumps(const char* file, unsigned int broke_to, unsigned int on_to,
                                       unsigned int continued_to) {
    after_region();
    const unsigned int n = ran, br = broke, co = continued;
    ran = broke = continued = 0;
    if (count == 0 || br + co == 0) {
        return 0;
    }
    if (br == n || co == n) {
        clear_choices();
        return br == n ? 2 : 3;
    }
    const unsigned int how_many[4] = {n - br - co, 0, br, co};
    const unsigned int guessed[4] = {on_to, 0, broke_to, continued_to};
    const unsigned int groups = (how_many[0] != 0) + (br != 0) + (co != 0);
    if (groups == 2 && parked == 0) {
        /* Two ways: where one of them waits next is a guess: it runs on, the other waits. */
        for (int k : {0, 2, 3}) {
            if (how_many[k] != 0 && (guessed[k] & GM_SIM_GUESS) != 0) {
                int other = 0;
                for (int j : {0, 2, 3}) {
                    other = j != k && how_many[j] != 0 ? j : other;
                }
                park_all_but((unsigned int)k, guessed[other] & ~GM_SIM_GUESS);
                clear_choices();
                return k;
            }
        }
    }
    const unsigned int to[4] = {on_to & ~GM_SIM_GUESS, 0, broke_to & ~GM_SIM_GUESS,
                                continued_to & ~GM_SIM_GUESS};
    report(file, to, true);
    return 0;
}

/* The condition of a loop or `if` that holds barriers, asked of every live thread: their
 * common answer. Threads that disagree part, and wait next at different places: those that
 * hold it at the barrier of line `yes` of `file`, the others at line `no` (0: they end without
 * another barrier). That is divergence, reported as the scheduler would find it once every
 * thread waited: two barriers (the first thread's first), or one that the others never reach. */
template <typename F>
bool gm_sim_regions::all(const char* file, unsigned int yes_line, unsigned int no_line,
                         F&& condition) {
    return all(file, yes_line, no_line, condition, condition);
}

/* As `all(file, yes, no, pass)`, where `pass` is what each thread does (a loop's step, then its
 * condition) and `condition` asks the condition alone: what a block whose threads part asks
 * again to learn each one's answer. (Recording each answer in the pass costs a store a thread,
 * which made the block sum 1.6x slower.) */
template <typename F, typename C>
bool gm_sim_regions::all(const char* file, unsigned int yes_line, unsigned int no_line,
                         F&& pass, C&& condition) {
    unsigned int yes = 0, live = 0;
    for (gm_sim_cursor c(*this); c.more(); c.next()) {
        if (c.live()) {
            yes += pass(c.t) ? 1 : 0;
            ++live;
        }
    }
    after_region();
    if (count == 0 || live == 0) {
        return false;
    }
    if (yes == 0 || yes == live) {
        return yes != 0;
    }
    for (gm_sim_cursor c(*this); c.more(); c.next()) {
        if (c.live()) {
            choice[c.t] = condition(c.t) ? 1 : 0;
        }
    }
    return parted(file, yes_line, no_line);
}

/* Threads parted at a condition (`choice`: each one's answer): the side whose next barrier is a
 * guess runs on, the other waits; or the divergence is reported. */
inline bool gm_sim_regions::parted(const char* file, unsigned int yes_line, unsigned int no_line) {
    if (parked == 0 && ((yes_line | no_line) & GM_SIM_GUESS) != 0) {
        /* Where one side waits next is a guess: it runs on to find out, the other waits. */
        const bool run_yes = (yes_line & GM_SIM_GUESS) != 0;
        park_all_but(run_yes, (run_yes ? no_line : yes_line) & ~GM_SIM_GUESS);
        clear_choices();
        return run_yes;
    }
    const unsigned int at[4] = {no_line & ~GM_SIM_GUESS, yes_line & ~GM_SIM_GUESS, 0, 0};
    report(file, at, true);
    return false;
}

/* ----- warp collectives ----------------------------------------------------------------
 * A statement that calls a warp collective splits the regions around it: the region before
 * ends with each thread calling it to record its operands (`recording`, GM_SIM_RECORD), the
 * warps exchange (`warp_exchange`, the simulator's rules), and the region after starts with the
 * statement itself, whose call now hands out the thread's result (GM_SIM_DELIVER). An `if` or
 * loop that holds collectives but no block barrier runs its body for the threads that enter
 * it, the others masked until it ends, as a GPU's lanes are. */

/* A thread's collective call: in its turn at the end of the region before the exchange
 * (GM_SIM_RECORD), it records its operands in the words from `at` (its value's; see
 * gm_sim_warp_operands) and returns its own value; in the region after (GM_SIM_DELIVER), it
 * returns its result. */
template <unsigned int Mode>
inline unsigned long long gm_sim_collective_at(unsigned long long* at, int op,
                                               unsigned long long mask, unsigned long long value,
                                               long long arg, int width) {
    if (Mode == GM_SIM_DELIVER) {
        return at[GM_SIM_OPERAND_RESULT];
    }
    at[GM_SIM_OPERAND_VALUE] = value;
    at[GM_SIM_OPERAND_MASK] = mask;
    at[GM_SIM_OPERAND_ARG] = (unsigned long long)arg;
    at[GM_SIM_OPERAND_WIDTH] = (unsigned long long)(long long)width;
    at[GM_SIM_OPERAND_OP] = (unsigned long long)(long long)op;
    return value;
}

/* What a warp collective call does in a kernel run as regions (gpu_mem.h's
 * GM_SIM_WARP_COLLECTIVE), where it reaches the prelude's function (a tile's member, a
 * reduction, a helper of the prelude's): as the thread's turn (`collect`) says. */
inline unsigned long long gm_sim_regions_collective(int op, unsigned long long mask,
                                                    unsigned long long value, long long arg,
                                                    int width) {
    gm_sim_regions& b = gm_sim_regions_here();
    if (b.delivering != nullptr) {
        return *b.delivering;
    }
    if (b.recording == nullptr) {
        gm_sim_rt.fault("a warp collective the regions rewrite did not split the kernel at");
        throw gm_sim_trap();
    }
    return gm_sim_collective_at<GM_SIM_RECORD>(b.recording, op, mask, value, arg, width);
}

/* The collectives a kernel calls by the prelude's names, as the thread whose turn it is calls
 * them: the rewrite declares one of each, named as the function, before a statement with a
 * collective call (`GM_SIM_COLLECTIVES_AT`), so that the call finds the thread's words without
 * anything stored where the compiler would have to keep it per thread (the block's state is
 * memory every store of the kernel may alias): the regions' loops then vectorise. */
template <unsigned int Mode, int Op>
struct gm_sim_shuffle_at {
    /* CUDA's type of the argument: a source lane is an int, a distance an unsigned int. */
    typedef typename std::conditional<Op == GM_SIM_OP_SHFL_UP || Op == GM_SIM_OP_SHFL_DOWN,
                                      unsigned int, int>::type Arg;
    unsigned long long* at;
    template <typename T>
    T operator()(unsigned long long mask, T var, Arg arg, int width = warpSize) const {
        return gm_sim_from_bits<T>(
            gm_sim_collective_at<Mode>(at, Op, mask, gm_sim_bits(var), arg, width));
    }
};
template <unsigned int Mode, int Op, typename R>
struct gm_sim_vote_at {
    unsigned long long* at;
    R operator()(unsigned long long mask, int predicate) const {
        return (R)gm_sim_collective_at<Mode>(at, Op, mask, predicate != 0, 0, 0);
    }
};
template <unsigned int Mode>
struct gm_sim_syncwarp_at {
    unsigned long long* at;
    void operator()(unsigned long long mask = ~0ull) const {
        (void)gm_sim_collective_at<Mode>(at, 0, mask, 0, 0, 0);
    }
};
#define GM_SIM_COLLECTIVES_AT(t, mode)                                                        \
    const gm_sim_shuffle_at<mode, GM_SIM_OP_SHFL> __shfl_sync{gm_sim_words + (t)};          \
    const gm_sim_shuffle_at<mode, GM_SIM_OP_SHFL_UP> __shfl_up_sync{gm_sim_words + (t)};    \
    const gm_sim_shuffle_at<mode, GM_SIM_OP_SHFL_DOWN> __shfl_down_sync{gm_sim_words + (t)}; \
    const gm_sim_shuffle_at<mode, GM_SIM_OP_SHFL_XOR> __shfl_xor_sync{gm_sim_words + (t)};  \
    const gm_sim_vote_at<mode, GM_SIM_OP_BALLOT, unsigned long long> __ballot_sync{          \
        gm_sim_words + (t)};                                                                  \
    const gm_sim_vote_at<mode, GM_SIM_OP_ALL, int> __all_sync{gm_sim_words + (t)};           \
    const gm_sim_vote_at<mode, GM_SIM_OP_ANY, int> __any_sync{gm_sim_words + (t)};           \
    const gm_sim_syncwarp_at<mode> __syncwarp{gm_sim_words + (t)};                            \
    (void)__shfl_sync, (void)__shfl_up_sync, (void)__shfl_down_sync, (void)__shfl_xor_sync,   \
        (void)__ballot_sync, (void)__all_sync, (void)__any_sync, (void)__syncwarp;

/* The warps exchange at the collective of line `line`, which every live thread recorded (in
 * the program where it can, gm_sim/exchange.h; the runtime decides the rest). */
inline void gm_sim_regions::warp_exchange(const char* file, int line) {
    if (count == 0) {
        return;
    }
    bool released = false;
    for (unsigned int base = lo - lo % warp; base < hi; base += warp) {
        const unsigned int n = threads - base < warp ? threads - base : warp;
        unsigned long long here = 0;
        int op = -1;
        if (!any_returned) {
            /* Every thread of the block is here. */
            here = gm_sim_lanes_below(n);
            op = operands.op[base];
        } else {
            for (unsigned int l = 0; l < n; ++l) {
                if (returned[base + l] == 0) {
                    here |= 1ull << l;
                    op = op < 0 ? operands.op[base + l] : op;
                }
            }
        }
        if (here != 0 && !gm_sim_exchange_at_once(op, here, n, operands.at(base)) &&
            runtime_exchange(op, here, n, base) != 0) {
            /* Lanes it waits for are elsewhere: these wait here for good (as the scheduler's
             * would), and the others go on. */
            for (unsigned int l = 0; l < n; ++l) {
                if (here & (1ull << l)) {
                    returned[base + l] = (unsigned char)GM_SIM_WARP_PARKED;
                    lanes[base + l].result = (unsigned long long)line;
                    ++warp_parked;
                }
            }
            any_returned = true;
        } else {
            released = released || here != 0;
        }
    }
    if (warp_parked != 0) {
        /* Where the scheduler ends a round (no thread is masked by an `if` or loop, so every
         * one waits or ended): a parked collective some of whose lanes exited is reported,
         * and so is a block none of whose warps this one released. */
        for (unsigned int t = 0; t < threads; ++t) {
            if (returned[t] >= GM_SIM_MASKED && returned[t] != GM_SIM_WARP_PARKED) {
                return;
            }
        }
        to_lanes(0, threads);
        verdict(file, line, released ? GM_SIM_VERDICT_RELEASED : GM_SIM_VERDICT_COLLECTIVE);
    }
}

/* The runtime decides the exchange of the warp of the `n` threads from `base` (those `here`),
 * on its records; their results copied back. Nonzero where lanes it waits for are elsewhere. */
inline int gm_sim_regions::runtime_exchange(int op, unsigned long long here, unsigned int n,
                                            unsigned int base) {
    to_lanes(base, base + n);
    const int waits = gm_sim_rt.warp(op, here, n, lanes + base);
    for (unsigned int l = 0; l < n; ++l) {
        if (here >> l & 1) {
            operands.result[base + l] = lanes[base + l].result;
        }
    }
    return waits;
}

/* An `if`'s `else`: the threads that ran the `if`'s block wait, the others run; whether any does. */
inline bool gm_sim_regions::mask_else() {
    const unsigned char masked = (unsigned char)(GM_SIM_MASKED + depth);
    unsigned char* const r = returned;
    const unsigned int n = count;
    unsigned int entered = 0;
    for (unsigned int t = 0; t < n; ++t) {
        if (r[t] == 0) {
            r[t] = masked;
        } else if (r[t] == masked) {
            r[t] = 0;
            ++entered;
        }
    }
    any_returned = true;
    live_bounds();
    return entered != 0;
}

/* An `if` or a loop with warp collectives starts: every live thread's condition (a loop's
 * initialiser and condition), as `mask_while`; whether any thread enters. */
template <typename F>
bool gm_sim_regions::mask_enter(F&& pass) {
    ++depth;
    return mask_while(pass);
}

/* A loop's condition (`pass`: a step and the condition): the threads that do not hold it
 * wait (masked) at the loop's end; whether any thread goes round. */
template <typename F>
bool gm_sim_regions::mask_while(F&& condition) {
    const unsigned char masked = (unsigned char)(GM_SIM_MASKED + depth);
    unsigned int going = 0, first = hi, last = lo;
    for (gm_sim_cursor c(*this); c.more(); c.next()) {
        if (c.live()) {
            if (condition(c.t)) {
                ++going;
                first = first < c.t ? first : c.t;
                last = c.t;
            } else {
                returned[c.t] = masked;
                any_returned = true;
            }
        }
    }
    after_region();
    if (going != 0) {
        lo = first;
        hi = last + 1;
    }
    return count != 0 && going != 0;
}

/* The end of an `if` or loop with warp collectives: the threads it masked run again. */
inline void gm_sim_regions::mask_end() {
    const unsigned char masked = (unsigned char)(GM_SIM_MASKED + depth--);
    /* (The state's fields copied out: a store through `returned`, a character type, may alias
     * any of them, and the loop read them again at every thread and did not vectorise.) */
    unsigned char* const r = returned;
    const unsigned int n = threads;
    for (unsigned int t = 0; t < n; ++t) {
        r[t] = r[t] == masked ? 0 : r[t];
    }
    any_returned = live_bounds() != n;
}

/* `lo` and `hi` again, after threads came back (`mask_end`, `mask_else`); how many run. (The
 * count is a loop the compiler vectorises; the bounds, a scan from each end, stop at the first
 * thread that runs.) */
inline unsigned int gm_sim_regions::live_bounds() {
    const unsigned char* const r = returned;
    const unsigned int n = threads;
    unsigned int live = 0;
    for (unsigned int t = 0; t < n; ++t) {
        live += r[t] == 0 ? 1u : 0u;
    }
    unsigned int first = 0, end = n;
    while (first < n && r[first] != 0) {
        ++first;
    }
    while (end > first && r[end - 1] != 0) {
        --end;
    }
    lo = live != 0 ? first : 0;
    hi = live != 0 ? end : 0;
    return live;
}

/* A variable of the kernel's body (or of a loop's) in every thread of the block: the rewrite
 * declares one where the variable's scope starts, and each thread's part of a region makes its
 * own where the kernel declares it (`init`, `make`) and names it as a reference after. Types
 * that copy as bytes and need no destructor only (the slots move with nothing but the arena):
 * anything else fails to compile, and the kernel is built the stackless way instead. */
template <typename T>
struct gm_sim_slots {
    typedef typename std::remove_cv<T>::type V;
    static_assert(std::is_trivially_copyable<V>::value &&
                      std::is_trivially_destructible<V>::value,
                  "per-thread variables of a kernel run as regions copy as bytes");
    gm_sim_regions& b;
    const unsigned long mark;
    bool fresh;
    V* const data;

    explicit gm_sim_slots(gm_sim_regions& b)
        : b(b), mark(b.used),
          data(static_cast<V*>(b.take(sizeof(V) * (unsigned long)b.threads, fresh))) {}
    ~gm_sim_slots() {
        if (fresh) {
            std::free(data);
        } else {
            b.used = mark;
        }
    }
    gm_sim_slots(const gm_sim_slots&) = delete;
    gm_sim_slots& operator=(const gm_sim_slots&) = delete;

    /* (Indices of 64 bits: a flat region's, `t + x` of a row's start and a signed count,
     * then stay affine, and its loop vectorises.) */
    V& operator[](unsigned long t) { return aligned()[t]; }
    /* `T name = value;` and `T name;` (value-initialised: zero for plain data, whose value a
     * kernel may not read before it writes one, and which a region copies). */
    V& init(unsigned long t, const V& value) { return *new (aligned() + t) V(value); }
    V& make(unsigned long t) { return *new (aligned() + t) V(); }

    /* The slots, which start on a multiple of 64 (`take`), said so (GM_SIM_ASSUME_ALIGNED). */
    V* aligned() const {
        return static_cast<V*>(GM_SIM_ASSUME_ALIGNED(data, alignof(V) < 64 ? alignof(V) : 64));
    }
};

/* A variable a region copied out of its slot (the rewrite copies those whose address the kernel
 * never takes), written back when the thread's part of the region ends, however it ends. */
template <typename V>
struct gm_sim_keep {
    V& slot;
    const V& local;
    gm_sim_keep(V& slot, const V& local) : slot(slot), local(local) {}
    ~gm_sim_keep() { std::memcpy(static_cast<void*>(&slot), &local, sizeof(V)); }
    gm_sim_keep(const gm_sim_keep&) = delete;
    gm_sim_keep& operator=(const gm_sim_keep&) = delete;
};

/* A region: each live thread's turn, a lambda that returns false where the thread returned
 * (the rewrite writes the kernel's `return;` so). */
#define GM_SIM_EACH_THREAD                                                                    \
    for (gm_sim_cursor gm_sim_c(gm_sim_b); gm_sim_c.more(); gm_sim_c.next())                  \
        if (gm_sim_c.live()) gm_sim_c.run([&](unsigned int gm_sim_t) -> bool {
#define GM_SIM_EACH_THREAD_END                                                                \
    return true;                                                                              \
    });                                                                                       \
    gm_sim_b.after_region();
/* A region of one `if` that admits a prefix of the threads (see `gm_sim_cursor::run_while`;
 * the rewrite writes the `if` as `if (!(condition)) return 2;`). */
#define GM_SIM_EACH_THREAD_WHILE                                                              \
    for (gm_sim_cursor gm_sim_c(gm_sim_b); gm_sim_c.more(); gm_sim_c.next())                  \
        if (gm_sim_c.live() && gm_sim_c.run_while([&](unsigned int gm_sim_t) -> int {
#define GM_SIM_EACH_THREAD_END_WHILE                                                          \
    return 0;                                                                                 \
    })) break;                                                                                \
    gm_sim_b.after_region();
/* Where a flat walk cannot be counted loops: every live thread `admits` takes runs `region`,
 * walked by the cursor (which sets the index where the prelude reads it). */
template <typename C, typename F>
inline void gm_sim_walk_live(gm_sim_regions& b, C&& admits, F&& region) {
    for (gm_sim_cursor c(b); c.more(); c.next()) {
        if (c.live() && admits((unsigned long)c.t, c.index)) {
            region((unsigned long)c.t, c.index);
        }
    }
}

/* A checked program's flat regions store each thread's index where a refused access reads
 * whose it was (an unchecked one's never read it there). */
#if defined(GM_SIM_CHECKED)
#define GM_SIM_FLAT_INDEX(b, index) ((b).thread->thread_idx = (index))
#else
#define GM_SIM_FLAT_INDEX(b, index) ((void)0)
#endif

/* A flat region: one that calls nothing that could read the thread's index but through its own
 * `threadIdx` (the rewrite names it `gm_sim_tidx` there), and never returns or jumps out. Where
 * every thread of the block is live its threads run as counted loops over rows and over the
 * `x` of each, the index a plain value of the loop and nothing stored per thread, a loop the
 * compiler can vectorise across threads (matrixMul's product of tiles); otherwise as any
 * region. */
template <typename F>
inline void gm_sim_walk_flat(gm_sim_regions& b, F&& region) {
    if (b.count == 0) {
        return;
    }
    if (__builtin_expect(b.any_returned, 0)) {
        return gm_sim_walk_live(b, [](unsigned long, gm_uint3) { return true; }, region);
    }
    const unsigned int dim_x = b.dim_x, dim_y = b.dim_y, rows = b.threads / b.dim_x;
    unsigned long t = 0;
    for (unsigned int r = 0; r < rows; ++r, t += dim_x) {
        const unsigned int y = r % dim_y, z = r / dim_y;
        /* (A signed `x`: its index arithmetic cannot wrap, which the vectoriser needs.) */
        for (int x = 0; x < (int)dim_x; ++x) {
            GM_SIM_FLAT_INDEX(b, (gm_uint3{(unsigned int)x, y, z}));
            region(t + (unsigned long)x, gm_uint3{(unsigned int)x, y, z});
        }
    }
}
/* A flat region that is one `if` admitting a prefix of a block's threads in `threadIdx.x` order
 * (see `gm_sim_cursor::run_while`): in a block of one row, where no thread returned, the
 * prefix's end is found by bisection of the condition (`admits`, which reads only the index and
 * what every thread holds alike), and the threads it admits run as a counted loop, as a flat
 * region's; otherwise every live thread the condition admits runs, as any region. */
template <typename C, typename F>
inline void gm_sim_walk_prefix(gm_sim_regions& b, C&& admits, F&& region) {
    if (b.count == 0) {
        return;
    }
    if (__builtin_expect(b.any_returned || b.dim_x != b.threads, 0)) {
        return gm_sim_walk_live(b, admits, region);
    }
    int end = 0, refused = (int)b.dim_x;
    while (end < refused) {
        const int mid = end + (refused - end) / 2;
        GM_SIM_FLAT_INDEX(b, (gm_uint3{(unsigned int)mid, 0, 0}));
        if (admits((unsigned long)mid, gm_uint3{(unsigned int)mid, 0, 0})) {
            end = mid + 1;
        } else {
            refused = mid;
        }
    }
    for (int x = 0; x < end; ++x) {
        GM_SIM_FLAT_INDEX(b, (gm_uint3{(unsigned int)x, 0, 0}));
        region((unsigned long)x, gm_uint3{(unsigned int)x, 0, 0});
    }
}
#define GM_SIM_EACH_THREAD_PREFIX                                                             \
    gm_sim_walk_prefix(gm_sim_b, [&](unsigned long gm_sim_t, const gm_uint3 gm_sim_tidx) -> bool {
#define GM_SIM_EACH_THREAD_PREFIX_BODY                                                        \
    }, [&](unsigned long gm_sim_t, const gm_uint3 gm_sim_tidx) {
#define GM_SIM_EACH_THREAD_PREFIX_END                                                         \
    });                                                                                       \
    gm_sim_b.after_region();
#define GM_SIM_EACH_THREAD_FLAT                                                               \
    gm_sim_walk_flat(gm_sim_b, [&](unsigned long gm_sim_t, const gm_uint3 gm_sim_tidx) {
#define GM_SIM_EACH_THREAD_FLAT_END                                                           \
    });                                                                                       \
    gm_sim_b.after_region();
#define GM_SIM_BARRIER() gm_sim_b.at_barrier(__FILE__, __LINE__)
#define GM_SIM_END() gm_sim_b.at_end(__FILE__)
/* A region with `break` or `continue` of the loop around it (see `after_jumps`). */
#define GM_SIM_EACH_THREAD_JUMPS                                                              \
    for (gm_sim_cursor gm_sim_c(gm_sim_b); gm_sim_c.more(); gm_sim_c.next())                  \
        if (gm_sim_c.live()) gm_sim_c.run_jumps([&](unsigned int gm_sim_t) -> int {
#define GM_SIM_EACH_THREAD_END_JUMPS(broke_to, on_to, continued_to)                           \
    return 0;                                                                                 \
    });                                                                                       \
    if (const int gm_sim_jump =                                                               \
            gm_sim_b.after_jumps(__FILE__, broke_to, on_to, continued_to)) {                  \
        if (gm_sim_jump == 2) break;                                                          \
        continue;                                                                             \
    }

/* `p`, which the compiler may no longer see through: a thread-local's address, taken once per
 * block where the rewrite declares `__shared__` arrays, would otherwise be taken again (a call
 * of `__tls_get_addr`) at every use, inside the regions' loops. */
template <typename T>
inline T* gm_sim_opaque(T* p) {
    __asm__("" : "+r"(p));
    /* (A declared array: aligned for its type, GM_SIM_ASSUME_ALIGNED.) */
    return static_cast<T*>(GM_SIM_ASSUME_ALIGNED(p, alignof(T)));
}

/* The arena of this OS thread's per-thread slots (kept for the next block). */
#define GM_SIM_REGIONS_ARENA (1ul << 20)

/* Blocks run as regions: the kernel `Entry` called once per block, its body the block's
 * program. The loop stops after a fault, or after a block diverged. */
template <auto Entry, typename... P, unsigned long... I>
GM_SIM_UNCHECKED __attribute__((flatten)) void gm_sim_block_loop(
    void (*)(P...), gm_sim_threads* t, std::integer_sequence<unsigned long, I...>) {
    typedef std::tuple<typename std::remove_cv<typename std::remove_reference<P>::type>::type...>
        Params;
    const Params params(*static_cast<const typename std::tuple_element<I, Params>::type*>(
        t->args[I])...);
    gm_sim_thread* const thread = const_cast<gm_sim_thread*>(gm_sim_self());
    gm_sim_regions& b = gm_sim_regions_here();
    if (t->count > GM_SIM_BLOCK_THREADS) {
        /* (The executor refuses such blocks before they start.) */
        gm_sim_rt.fault("a block of more threads than the simulator runs");
        t->status = 1;
        return;
    }
    if (b.arena == nullptr) {
        b.arena = static_cast<char*>(std::aligned_alloc(64, GM_SIM_REGIONS_ARENA));
        b.size = b.arena == nullptr ? 0 : GM_SIM_REGIONS_ARENA;
    }
    b.used = 0;
    b.owned = 0;
    b.thread = thread;
    b.faulted = t->faulted;
    b.threads = t->count;
    b.dim_x = t->dim_x;
    b.dim_y = t->dim_y;
    b.warp = t->warp_size == 0 ? 1 : t->warp_size;
    bool fresh = false;
    /* `returned`, then `choice` at an even offset. */
    b.returned = static_cast<unsigned char*>(b.take(3ul * t->count + 2, fresh));
    b.choice = reinterpret_cast<unsigned short*>(b.returned + ((t->count + 1ul) & ~1ul));
    /* The operands' arrays, then the runtime's records. */
    bool fresh_lanes = false;
    unsigned long long* const words = static_cast<unsigned long long*>(
        b.take(sizeof(unsigned long long) * GM_SIM_OPERAND_WORDS + sizeof(gm_sim_lane) * t->count,
               fresh_lanes));
    b.operands = gm_sim_warp_operands::in(words);
    b.lanes = reinterpret_cast<gm_sim_lane*>(words + GM_SIM_OPERAND_WORDS);
    gm_sim_blocks_walk blocks(thread, t->first_block);
    const unsigned long long end = t->first_block + t->blocks;
    t->status = 0;
    try {
        for (unsigned long long k = t->first_block; k < end; ++k) {
            blocks.enter(thread);
            b.count = t->count;
            b.ran = b.broke = b.continued = 0;
            b.any_returned = false;
            b.newly_returned = false;
            b.ended = 0;
            b.parked = 0;
            b.depth = 0;
            b.warp_parked = 0;
            b.recording = nullptr;
            b.delivering = nullptr;
            b.lo = 0;
            b.hi = t->count;
            std::memset(b.returned, 0, t->count);
            std::memset(b.choice, 0, t->count * sizeof *b.choice);
#if defined(GM_SIM_CHECKED)
            /* (A call: inlined into this unchecked glue, the kernel would lose its checks.) */
            void (*volatile const entry)(P...) = Entry;
            entry(std::get<I>(params)...);
#else
            Entry(std::get<I>(params)...);
#endif
            if (*t->faulted != 0 || b.count == 0) {
                break;
            }
        }
    } catch (const gm_sim_trap&) {
        t->status = 2;
    } catch (...) {
        gm_sim_rt.fault("a C++ exception escaped the kernel");
        t->status = 1;
    }
    if (fresh_lanes) {
        std::free(words);
    }
    if (fresh) {
        std::free(b.returned);
    }
}

template <auto Entry, typename... P>
GM_SIM_UNCHECKED void gm_sim_run_blocks_of(void (*)(P...), gm_sim_threads* t) {
#if defined(GM_SIM_CHECKED)
    /* A refused access ends the block where it started, as any fault ends it (what the block
     * took from the heap is then not freed). */
    if (gm_sim_escapable([=]() GM_SIM_UNCHECKED {
            gm_sim_block_loop<Entry>(static_cast<void (*)(P...)>(nullptr), t,
                                     std::make_integer_sequence<unsigned long, sizeof...(P)>());
            return 0;
        }) == 2) {
        t->status = 2;
    }
#else
    gm_sim_block_loop<Entry>(static_cast<void (*)(P...)>(nullptr), t,
                             std::make_integer_sequence<unsigned long, sizeof...(P)>());
#endif
}

/* A kernel's blocks, run as regions. The kernel is named only as the template argument: the
 * loops take a null pointer of its type to deduce its parameters, so that nothing but the
 * block loop, which inlines it, refers to it (an inline kernel, `__global__` in gpu_mem.h, is
 * then not compiled a second time on its own). */
template <auto Entry>
GM_SIM_UNCHECKED void gm_sim_run_blocks(gm_sim_threads* t) {
    gm_sim_run_blocks_of<Entry>(static_cast<decltype(Entry)>(nullptr), t);
}
