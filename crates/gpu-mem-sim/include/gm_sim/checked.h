/* A checked program's accesses (GM_SIM_CHECKED), instrumented by the compiler one of two ways
 * (no sanitizer runtime linked; these are the functions the instrumentation calls):
 * - every access (racecheck, initcheck): every load, store and atomic of the kernel calls a
 *   hook, as ThreadSanitizer's instrumentation does (`-fsanitize=thread`); atomics are done
 *   here, after their check, always sequentially consistent (at least what any order asked
 *   for);
 * - through a shadow (GM_SIM_SHADOWED, memcheck alone): the compiler tests each access inline
 *   against a shadow byte per 8 bytes of memory, as AddressSanitizer's kernel-mode
 *   instrumentation does (`-fsanitize=kernel-address`, at GM_SIM_SHADOW_OFFSET), and calls a
 *   hook only where the byte is not zero. The simulator zeroes the shadow of what it granted
 *   (`sanitizer::shadow_memory`), so an access asks once per range, not once per access.
 * Each hook asks the simulator (`gm_sim_rt.access`) before the access happens, unless the
 * ranges it granted this OS thread's current thread lately (`gm_sim_allowed`) hold it; an access
 * the thread may not make ends the thread where it started (`gm_sim_escapable`), so nothing is
 * read or written. */
#ifndef GM_SIM_CHECKED_H
#define GM_SIM_CHECKED_H

#define GM_SIM_HOOK extern "C" GM_SIM_UNCHECKED __attribute__((noinline, visibility("hidden")))

/* Ends the running thread where it started (see gm_sim_escapable); returns if nothing started
 * it there (the library's own constructors). */
GM_SIM_UNCHECKED __attribute__((noinline)) inline void gm_sim_escape() {
    void** const escape = static_cast<void**>(gm_sim_self()->escape);
    if (escape != nullptr) {
        __builtin_longjmp(escape, 1);
    }
}

/* This OS thread's allowed ranges (`gm_sim_allowed`), once asked for. */
static thread_local const gm_sim_allowed* gm_sim_allowed_here = nullptr;

/* racecheck: whether `size` bytes at `at` lie in shared memory that two threads read in the
 * running thread's phase, with no write (`gm_sim_allowed::shared_reads`): another read there
 * changes nothing racecheck would find, and is not told. */
GM_SIM_UNCHECKED __attribute__((noinline)) inline bool gm_sim_read_by_all(
    const gm_sim_allowed* allowed, __UINTPTR_TYPE__ at, unsigned long long size) {
    const __UINTPTR_TYPE__ phase = allowed->phase;
    if (phase == 0 || size == 0 || at < allowed->shared_span[0] || at >= allowed->shared_span[1]) {
        return false;
    }
    for (int i = 0; i < GM_SIM_SHARED_READ_SLOTS; ++i) {
        const __UINTPTR_TYPE__ start = allowed->shared_reads[i].start;
        const __UINTPTR_TYPE__ end = allowed->shared_reads[i].end;
        if (at >= start && at <= end && size <= end - at) {
            const unsigned int* const phases = allowed->shared_reads[i].phases;
            const __UINTPTR_TYPE__ first = start >> 2;
            for (__UINTPTR_TYPE__ word = at >> 2; word <= (at + size - 1) >> 2; ++word) {
                if (__atomic_load_n(&phases[word - first], __ATOMIC_RELAXED) != phase) {
                    return false;
                }
            }
            return true;
        }
    }
    return false;
}

/* Whether the simulator already granted this OS thread's current thread a range holding the
 * access (`kind`: a range granted for reads only does not hold a write, and none holds an
 * atomic while the simulator watches atomics, `gm_sim_allowed::atomics`: racecheck orders
 * accesses by them): most accesses are answered here, without a call into the simulator. */
GM_SIM_UNCHECKED __attribute__((always_inline)) inline bool gm_sim_granted(const volatile void* a,
                                                                          unsigned long long size,
                                                                          int kind) {
    const gm_sim_allowed* const allowed = gm_sim_allowed_here;
    if (__builtin_expect(allowed == nullptr, 0)) {
        return false;
    }
    if (allowed->atomics != 0 &&
        (kind == GM_SIM_ACCESS_ATOMIC || kind == GM_SIM_ACCESS_ATOMIC_STORE)) {
        return false;
    }
    const __UINTPTR_TYPE__ at = reinterpret_cast<__UINTPTR_TYPE__>(a);
    if (at >= allowed->mine[0] && at <= allowed->mine[1] && size <= allowed->mine[1] - at) {
        return true;
    }
    const __UINTPTR_TYPE__ refused = kind == GM_SIM_ACCESS_READ ? 0 : allowed->reads;
    for (int i = 0; i < GM_SIM_ALLOWED_SLOTS; ++i) {
        const __UINTPTR_TYPE__ start = allowed->ranges[i][0], end = allowed->ranges[i][1];
        if (at >= start && at <= end && size <= end - at && ((refused >> i) & 1) == 0) {
            return true;
        }
    }
    /* The running thread's own stack and gm_sim_thread. */
    for (int i = 0; i < 2; ++i) {
        const __UINTPTR_TYPE__ start = allowed->own[i][0], end = allowed->own[i][1];
        if (at >= start && at <= end && size <= end - at) {
            return true;
        }
    }
    /* Last, and out of line: a read answered above, the usual case, pays nothing for it (tested
     * first, it cost atax and 3mm a third more under racecheck). */
    return kind == GM_SIM_ACCESS_READ && gm_sim_read_by_all(allowed, at, size);
}

GM_SIM_UNCHECKED __attribute__((always_inline)) inline void gm_sim_check(const volatile void* a,
                                                                        unsigned long long size,
                                                                        int kind,
                                                                        const void* pc) {
    if (__builtin_expect(gm_sim_granted(a, size, kind), 1)) {
        return;
    }
    /* (Null before gm_sim_init: the library's own constructors run unchecked.) */
    if (gm_sim_rt.access == nullptr) {
        return;
    }
    if (gm_sim_allowed_here == nullptr) {
        gm_sim_allowed_here = gm_sim_rt.allowed();
    }
    if (__builtin_expect(gm_sim_rt.access(const_cast<const void*>(a), size, kind, pc) != 0, 0)) {
        gm_sim_escape();
    }
}

/* An access of `size` bytes at `a` that must lie on a multiple of `alignment`: off it, the
 * simulator is asked (as a misaligned access, which memcheck refuses) and a refusal ends the
 * thread. */
GM_SIM_UNCHECKED __attribute__((always_inline)) inline void gm_sim_check_alignment(
    const volatile void* a, unsigned long long size, unsigned long long alignment, int kind,
    const void* pc) {
    if (__builtin_expect((reinterpret_cast<__UINTPTR_TYPE__>(a) & (alignment - 1)) != 0, 0) &&
        gm_sim_rt.access != nullptr &&
        gm_sim_rt.access(const_cast<const void*>(a), size, kind | GM_SIM_ACCESS_MISALIGNED,
                         pc) != 0) {
        gm_sim_escape();
    }
}

/* An access the compiler takes to be aligned (the hooks without `unaligned` or `volatile` in
 * their names, and atomics): on a GPU one of n bytes must lie on a multiple of n, or the
 * kernel faults; here it is refused, as memcheck refuses it there. Clang also calls 16-byte
 * accesses aligned to 8 aligned, so 8 is the most asked for. */
GM_SIM_UNCHECKED __attribute__((always_inline)) inline void gm_sim_check_aligned(
    const volatile void* a, unsigned long long size, int kind, const void* pc) {
    gm_sim_check_alignment(a, size, size < 8 ? size : 8, kind, pc);
    gm_sim_check(a, size, kind, pc);
}

/* The program's loop starts another thread: what the last one wrote is no longer its own. */
GM_SIM_UNCHECKED inline void gm_sim_thread_starts() {
    gm_sim_allowed* const allowed = const_cast<gm_sim_allowed*>(gm_sim_allowed_here);
    if (allowed != nullptr) {
        allowed->mine[0] = ~static_cast<__UINTPTR_TYPE__>(0);
        allowed->mine[1] = 0;
    }
}

/* UBSan's type checks (`-fsanitize=alignment,object-size`), which call one handler for two
 * findings, told apart as UBSan's runtime tells them:
 * - a load, store or member access through a pointer that does not lie on a multiple of its
 *   type's alignment (a `float4*` made from `float* + 1`), which a GPU refuses ("misaligned
 *   address") even where each field the host compiler reads is aligned: refused as memcheck
 *   refuses a misaligned access, for an access of the type's alignment;
 * - an aligned one that reaches past the end of the object the compiler sees it in (a local
 *   array indexed past its end, `int counts[16]; counts[24] += 1;`): refused, whatever else the
 *   thread may touch there. Without this, an access to a local array the compiler keeps to
 *   itself is not instrumented at all (it cannot escape), and one past its end lands in the
 *   frames above it: saved registers, return addresses, the thread's way out.
 * (A null pointer is neither: its access is refused on its own.) */
struct gm_sim_ubsan_mismatch {
    gm_sim_ubsan_location location;
    const gm_sim_ubsan_type* type;
    unsigned char log_alignment;
    unsigned char kind; /* 1: a store */
};

/* The bytes of a value of `type`, for a report's "of size N": from the descriptor where it
 * says (integers, floating point; clang), from the type's name otherwise (GCC names it only),
 * else its alignment. */
GM_SIM_UNCHECKED inline unsigned long long gm_sim_ubsan_size(const gm_sim_ubsan_type* type,
                                                             unsigned long long alignment) {
    if (type->kind == 0) {
        return gm_sim_ubsan_int_bits(type) / 8;
    }
    if (type->kind == 1) {
        return type->info / 8;
    }
    static const struct {
        const char* name;
        unsigned char bytes;
    } known[] = {
        {"'char'", 1},        {"'signed char'", 1},        {"'unsigned char'", 1},
        {"'bool'", 1},        {"'short'", 2},              {"'short int'", 2},
        {"'short unsigned int'", 2}, {"'unsigned short'", 2}, {"'__half'", 2},
        {"'int'", 4},         {"'unsigned int'", 4},       {"'float'", 4},
        {"'long'", 8},        {"'long int'", 8},           {"'long unsigned int'", 8},
        {"'unsigned long'", 8}, {"'long long'", 8},        {"'long long int'", 8},
        {"'long long unsigned int'", 8}, {"'unsigned long long'", 8}, {"'double'", 8},
        {"'float2'", 8},      {"'int2'", 8},               {"'uint2'", 8},
        {"'float4'", 16},     {"'int4'", 16},              {"'uint4'", 16},
        {"'double2'", 16},
    };
    for (const auto& k : known) {
        if (__builtin_strcmp(type->name, k.name) == 0) {
            return k.bytes;
        }
    }
    return alignment;
}

GM_SIM_UNCHECKED __attribute__((always_inline)) inline void gm_sim_type_mismatch(
    const gm_sim_ubsan_mismatch* data, __UINTPTR_TYPE__ pointer, const void* pc) {
    if (pointer == 0) {
        return;
    }
    const unsigned long long alignment = 1ull << data->log_alignment;
    const int kind = data->kind == 1 ? GM_SIM_ACCESS_WRITE : GM_SIM_ACCESS_READ;
    if (alignment > 1 && (pointer & (alignment - 1)) != 0) {
        gm_sim_check_alignment(reinterpret_cast<const volatile void*>(pointer), alignment,
                               alignment, kind, pc);
    } else if (gm_sim_rt.access != nullptr &&
               gm_sim_rt.access(reinterpret_cast<const void*>(pointer),
                                gm_sim_ubsan_size(data->type, alignment),
                                kind | GM_SIM_ACCESS_OUTSIDE_OBJECT, pc) != 0) {
        gm_sim_escape();
    }
}
GM_SIM_HOOK void __ubsan_handle_type_mismatch_v1(gm_sim_ubsan_mismatch* data,
                                                 __UINTPTR_TYPE__ pointer) {
    gm_sim_type_mismatch(data, pointer, __builtin_return_address(0));
}
GM_SIM_HOOK void __ubsan_handle_type_mismatch_v1_abort(gm_sim_ubsan_mismatch* data,
                                                       __UINTPTR_TYPE__ pointer) {
    gm_sim_type_mismatch(data, pointer, __builtin_return_address(0));
}

/* UBSan's array-bounds check (GCC's `-fsanitize=bounds`, clang's `array-bounds`): an index
 * outside a C array whose length the compiler knows, before any access through it. What lies
 * there may be memory the thread may touch (the frame's other locals below a local array, the
 * shared array before a shared one), so no later check would see it, and a local array's
 * accesses are not instrumented at all. Refused:
 * - below the start, in every build: an object-size check compares the end only;
 * - past the end, where clang built the program: its object-size check does not follow a
 *   variable index. GCC's does, and refuses such an access itself, naming the read or write
 *   and its address, which this check cannot know. */
struct gm_sim_ubsan_out_of_bounds {
    gm_sim_ubsan_location location;
    const gm_sim_ubsan_type* array_type;
    const gm_sim_ubsan_type* index_type;
};
GM_SIM_UNCHECKED __attribute__((noinline)) inline void gm_sim_out_of_bounds(
    const gm_sim_ubsan_out_of_bounds* data, __UINTPTR_TYPE__ handle, const void* pc) {
    const gm_sim_ubsan_type* const type = data->index_type;
    const unsigned int bits = type->kind == 0 ? gm_sim_ubsan_int_bits(type) : 64;
    const bool is_signed = type->kind == 0 && gm_sim_ubsan_int_signed(type);
    /* Up to 64 bits by value; wider ones by address, their low 64 bits first. */
    unsigned long long value =
        bits <= 64 ? static_cast<unsigned long long>(handle)
                   : *reinterpret_cast<const unsigned long long*>(handle);
    if (bits < 64) {
        const unsigned long long sign = 1ull << (bits - 1);
        value &= (sign << 1) - 1;
        if (is_signed && (value & sign) != 0) {
            value |= ~((sign << 1) - 1);
        }
    }
    const bool below = is_signed && static_cast<long long>(value) < 0;
#if !defined(__clang__)
    if (!below) {
        return;
    }
#endif
    if (gm_sim_rt.index != nullptr &&
        gm_sim_rt.index(data->array_type->name, value, is_signed ? 1 : 0, pc) != 0) {
        gm_sim_escape();
    }
}
GM_SIM_HOOK void __ubsan_handle_out_of_bounds(gm_sim_ubsan_out_of_bounds* data,
                                              __UINTPTR_TYPE__ index) {
    gm_sim_out_of_bounds(data, index, __builtin_return_address(0));
}
GM_SIM_HOOK void __ubsan_handle_out_of_bounds_abort(gm_sim_ubsan_out_of_bounds* data,
                                                    __UINTPTR_TYPE__ index) {
    gm_sim_out_of_bounds(data, index, __builtin_return_address(0));
}

#define GM_SIM_PC __builtin_return_address(0)
#if defined(GM_SIM_SHADOWED)

/* The shadow byte of the 8 bytes holding address `a`: 0 where all 8 were granted, k (1..7)
 * where the first k were, negative where none was. */
GM_SIM_UNCHECKED __attribute__((always_inline)) inline signed char gm_sim_shadow_of(
    const volatile void* a) {
    const signed char* const at = reinterpret_cast<const signed char*>(
        (reinterpret_cast<__UINTPTR_TYPE__>(a) >> 3) + GM_SIM_SHADOW_OFFSET);
    /* A load the compiler cannot instrument: this function is inlined into the kernel's code
     * (gm_sim_atomic_access), whose loads are all checked, and the shadow's own bytes are not
     * the kernel's to touch. (The shadow exists on x86-64 alone.) */
    signed char value;
    __asm__ volatile("movb (%1), %0" : "=q"(value) : "r"(at) : "memory");
    return value;
}

/* Where the shadow byte of an access is not zero (not granted yet, or not to be). */
#define GM_SIM_REPORT(n)                                                                       \
    GM_SIM_HOOK void __asan_report_load##n##_noabort(void* a) {                                \
        gm_sim_check(a, n, GM_SIM_ACCESS_READ, GM_SIM_PC);                                     \
    }                                                                                          \
    GM_SIM_HOOK void __asan_report_store##n##_noabort(void* a) {                               \
        gm_sim_check(a, n, GM_SIM_ACCESS_WRITE, GM_SIM_PC);                                    \
    }
GM_SIM_REPORT(1)
GM_SIM_REPORT(2)
GM_SIM_REPORT(4)
GM_SIM_REPORT(8)
GM_SIM_REPORT(16)
#undef GM_SIM_REPORT
GM_SIM_HOOK void __asan_report_load_n_noabort(void* a, unsigned long size) {
    gm_sim_check(a, size, GM_SIM_ACCESS_READ, GM_SIM_PC);
}
GM_SIM_HOOK void __asan_report_store_n_noabort(void* a, unsigned long size) {
    gm_sim_check(a, size, GM_SIM_ACCESS_WRITE, GM_SIM_PC);
}

/* Whether every shadow byte of `[a, a + size)` is zero: what the compiler tests inline, for the
 * accesses it leaves to calls (other sizes, ranges). */
GM_SIM_UNCHECKED __attribute__((always_inline)) inline bool gm_sim_shadow_clear(
    const volatile void* a, unsigned long long size) {
    const __UINTPTR_TYPE__ start = reinterpret_cast<__UINTPTR_TYPE__>(a);
    if (size == 0) {
        return true;
    }
    for (__UINTPTR_TYPE__ at = start & ~(__UINTPTR_TYPE__)7; at < start + size; at += 8) {
        if (gm_sim_shadow_of(reinterpret_cast<const volatile void*>(at)) != 0) {
            return false;
        }
    }
    return true;
}
#define GM_SIM_ACCESS_N(name, kind)                                                            \
    GM_SIM_HOOK void name(void* a, unsigned long size) {                                       \
        if (!gm_sim_shadow_clear(a, size)) {                                                   \
            gm_sim_check(a, size, kind, GM_SIM_PC);                                            \
        }                                                                                      \
    }
GM_SIM_ACCESS_N(__asan_loadN_noabort, GM_SIM_ACCESS_READ)
GM_SIM_ACCESS_N(__asan_storeN_noabort, GM_SIM_ACCESS_WRITE)
GM_SIM_ACCESS_N(__asan_loadN, GM_SIM_ACCESS_READ)
GM_SIM_ACCESS_N(__asan_storeN, GM_SIM_ACCESS_WRITE)
#undef GM_SIM_ACCESS_N
#define GM_SIM_ACCESS_SIZED(n)                                                                 \
    GM_SIM_HOOK void __asan_load##n##_noabort(void* a) {                                       \
        if (!gm_sim_shadow_clear(a, n)) {                                                      \
            gm_sim_check(a, n, GM_SIM_ACCESS_READ, GM_SIM_PC);                                 \
        }                                                                                      \
    }                                                                                          \
    GM_SIM_HOOK void __asan_store##n##_noabort(void* a) {                                      \
        if (!gm_sim_shadow_clear(a, n)) {                                                      \
            gm_sim_check(a, n, GM_SIM_ACCESS_WRITE, GM_SIM_PC);                                \
        }                                                                                      \
    }
GM_SIM_ACCESS_SIZED(1)
GM_SIM_ACCESS_SIZED(2)
GM_SIM_ACCESS_SIZED(4)
GM_SIM_ACCESS_SIZED(8)
GM_SIM_ACCESS_SIZED(16)
#undef GM_SIM_ACCESS_SIZED
GM_SIM_HOOK void __asan_handle_no_return() {}

/* Where the simulator's signal handler sends a thread whose shadow test faulted because the
 * address tested lies outside the address space (a pointer with its high bits set), so its
 * shadow does too: made to look like a call from the test (the return address names the line),
 * with the address tested (to 8 bytes) as argument. It is refused, and the thread ends. */
extern "C" __attribute__((visibility("default"), noinline)) GM_SIM_UNCHECKED void
gm_sim_outside_address_space(void* a) {
    gm_sim_check(a, 1, GM_SIM_ACCESS_READ, __builtin_return_address(0));
    /* (Never allowed; and this frame cannot return: the handler made it.) */
    gm_sim_escape();
    __builtin_trap();
}

/* An atomic, asked for as one (an atomic, of its alignment) unless its shadow is zero and it
 * lies on its size (see GM_SIM_ATOMIC_ACCESS). The hook names the line: its return address lies
 * in the kernel's code, where gm_sim_atomic_access is inlined (whose own return address would be
 * the kernel's caller's). */
GM_SIM_HOOK void gm_sim_atomic_asked(const volatile void* a, unsigned long long size) {
    gm_sim_check_aligned(a, size, GM_SIM_ACCESS_ATOMIC, GM_SIM_PC);
}
GM_SIM_UNCHECKED __attribute__((always_inline)) inline void gm_sim_atomic_access(
    const volatile void* a, unsigned long long size) {
    if (__builtin_expect((reinterpret_cast<__UINTPTR_TYPE__>(a) & (size - 1)) != 0 ||
                             gm_sim_shadow_of(a) != 0,
                         0)) {
        gm_sim_atomic_asked(a, size);
    }
}

#else

#define GM_SIM_READ_WRITE(n)                                                                   \
    GM_SIM_HOOK void __tsan_read##n(void* a) {                                                 \
        gm_sim_check_aligned(a, n, GM_SIM_ACCESS_READ, GM_SIM_PC);                             \
    }                                                                                          \
    GM_SIM_HOOK void __tsan_write##n(void* a) {                                                \
        gm_sim_check_aligned(a, n, GM_SIM_ACCESS_WRITE, GM_SIM_PC);                            \
    }                                                                                          \
    GM_SIM_HOOK void __tsan_unaligned_read##n(void* a) {                                       \
        gm_sim_check(a, n, GM_SIM_ACCESS_READ, GM_SIM_PC);                                     \
    }                                                                                          \
    GM_SIM_HOOK void __tsan_unaligned_write##n(void* a) {                                      \
        gm_sim_check(a, n, GM_SIM_ACCESS_WRITE, GM_SIM_PC);                                    \
    }                                                                                          \
    GM_SIM_HOOK void __tsan_volatile_read##n(void* a) {                                        \
        gm_sim_check(a, n, GM_SIM_ACCESS_READ, GM_SIM_PC);                                     \
    }                                                                                          \
    GM_SIM_HOOK void __tsan_volatile_write##n(void* a) {                                       \
        gm_sim_check(a, n, GM_SIM_ACCESS_WRITE, GM_SIM_PC);                                    \
    }
GM_SIM_READ_WRITE(1)
GM_SIM_READ_WRITE(2)
GM_SIM_READ_WRITE(4)
GM_SIM_READ_WRITE(8)
GM_SIM_READ_WRITE(16)
#undef GM_SIM_READ_WRITE

GM_SIM_HOOK void __tsan_read_range(void* a, unsigned long size) {
    gm_sim_check(a, size, GM_SIM_ACCESS_READ, GM_SIM_PC);
}
GM_SIM_HOOK void __tsan_write_range(void* a, unsigned long size) {
    gm_sim_check(a, size, GM_SIM_ACCESS_WRITE, GM_SIM_PC);
}
GM_SIM_HOOK void* __tsan_memcpy(void* to, const void* from, unsigned long size) {
    gm_sim_check(from, size, GM_SIM_ACCESS_READ, GM_SIM_PC);
    gm_sim_check(to, size, GM_SIM_ACCESS_WRITE, GM_SIM_PC);
    return __builtin_memcpy(to, from, size);
}
GM_SIM_HOOK void* __tsan_memmove(void* to, const void* from, unsigned long size) {
    gm_sim_check(from, size, GM_SIM_ACCESS_READ, GM_SIM_PC);
    gm_sim_check(to, size, GM_SIM_ACCESS_WRITE, GM_SIM_PC);
    return __builtin_memmove(to, from, size);
}
GM_SIM_HOOK void* __tsan_memset(void* to, int value, unsigned long size) {
    gm_sim_check(to, size, GM_SIM_ACCESS_WRITE, GM_SIM_PC);
    return __builtin_memset(to, value, size);
}
/* What the instrumentation calls besides accesses: nothing to do. */
GM_SIM_HOOK void __tsan_init() {}
GM_SIM_HOOK void __tsan_func_entry(void*) {}
GM_SIM_HOOK void __tsan_func_exit() {}
GM_SIM_HOOK void __tsan_vptr_update(void**, void*) {}
GM_SIM_HOOK void __tsan_vptr_read(void**) {}
GM_SIM_HOOK void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
GM_SIM_HOOK void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

#define GM_SIM_ATOMIC_OP(n, T, op, builtin)                                                    \
    GM_SIM_HOOK T __tsan_atomic##n##_##op(volatile T* a, T v, int) {                           \
        gm_sim_check_aligned(a, sizeof(T), GM_SIM_ACCESS_ATOMIC, GM_SIM_PC);                   \
        return builtin(a, v, __ATOMIC_SEQ_CST);                                                \
    }
#define GM_SIM_ATOMICS(n, T)                                                                   \
    GM_SIM_HOOK T __tsan_atomic##n##_load(const volatile T* a, int) {                          \
        gm_sim_check_aligned(a, sizeof(T), GM_SIM_ACCESS_ATOMIC, GM_SIM_PC);                   \
        return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                           \
    }                                                                                          \
    GM_SIM_HOOK void __tsan_atomic##n##_store(volatile T* a, T v, int) {                       \
        gm_sim_check_aligned(a, sizeof(T), GM_SIM_ACCESS_ATOMIC_STORE, GM_SIM_PC);             \
        __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                              \
    }                                                                                          \
    GM_SIM_ATOMIC_OP(n, T, exchange, __atomic_exchange_n)                                      \
    GM_SIM_ATOMIC_OP(n, T, fetch_add, __atomic_fetch_add)                                      \
    GM_SIM_ATOMIC_OP(n, T, fetch_sub, __atomic_fetch_sub)                                      \
    GM_SIM_ATOMIC_OP(n, T, fetch_and, __atomic_fetch_and)                                      \
    GM_SIM_ATOMIC_OP(n, T, fetch_or, __atomic_fetch_or)                                        \
    GM_SIM_ATOMIC_OP(n, T, fetch_xor, __atomic_fetch_xor)                                      \
    GM_SIM_ATOMIC_OP(n, T, fetch_nand, __atomic_fetch_nand)                                    \
    GM_SIM_HOOK int __tsan_atomic##n##_compare_exchange_strong(volatile T* a, T* expected,     \
                                                               T desired, int, int) {          \
        gm_sim_check_aligned(a, sizeof(T), GM_SIM_ACCESS_ATOMIC, GM_SIM_PC);                   \
        return __atomic_compare_exchange_n(a, expected, desired, false, __ATOMIC_SEQ_CST,      \
                                           __ATOMIC_SEQ_CST);                                  \
    }                                                                                          \
    GM_SIM_HOOK int __tsan_atomic##n##_compare_exchange_weak(volatile T* a, T* expected,       \
                                                             T desired, int, int) {            \
        gm_sim_check_aligned(a, sizeof(T), GM_SIM_ACCESS_ATOMIC, GM_SIM_PC);                   \
        return __atomic_compare_exchange_n(a, expected, desired, true, __ATOMIC_SEQ_CST,       \
                                           __ATOMIC_SEQ_CST);                                  \
    }                                                                                          \
    GM_SIM_HOOK T __tsan_atomic##n##_compare_exchange_val(volatile T* a, T expected, T desired, \
                                                          int, int) {                          \
        gm_sim_check_aligned(a, sizeof(T), GM_SIM_ACCESS_ATOMIC, GM_SIM_PC);                   \
        __atomic_compare_exchange_n(a, &expected, desired, false, __ATOMIC_SEQ_CST,            \
                                    __ATOMIC_SEQ_CST);                                         \
        return expected;                                                                       \
    }
GM_SIM_ATOMICS(8, unsigned char)
GM_SIM_ATOMICS(16, unsigned short)
GM_SIM_ATOMICS(32, unsigned int)
GM_SIM_ATOMICS(64, unsigned long long)
#undef GM_SIM_ATOMICS
#undef GM_SIM_ATOMIC_OP
#endif /* GM_SIM_SHADOWED */
#undef GM_SIM_PC
#undef GM_SIM_HOOK

#endif
