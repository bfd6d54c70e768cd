/*
 * gm_sim/output.h — what a kernel prints and how it stops, on the host compiler:
 *   printf      formatted per call and written with one locked write, flushed: lines of
 *               different threads never mix (a call that prints a whole line prints it whole)
 *   assert      a failed assertion is a fault naming the expression, file, line and function,
 *               and ends the thread (with <assert.h> or <cassert> included, as in CUDA; NDEBUG
 *               turns it off)
 *   __trap      a fault that ends the thread; __brkpt the same
 *   exit, abort, quick_exit, _Exit called in kernel code: a fault that ends the thread, not the
 *               end of the process (calls made inside library code cannot be seen)
 *   shifts      by the value's width or more (or a negative count): a fault naming the line,
 *               where a GPU and the host processor answer differently
 */
#ifndef GM_SIM_OUTPUT_H
#define GM_SIM_OUTPUT_H

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* A fault with `what` (formatted), then the end of the thread. */
[[noreturn]] inline void gm_sim_trap_with(const char* format, ...) {
    char message[512];
    va_list args;
    va_start(args, format);
    std::vsnprintf(message, sizeof message, format, args);
    va_end(args);
    gm_sim_rt.fault(message);
    throw gm_sim_trap{};
}

/* Unchecked: it reads the C library's `stdout`, outside anything a thread may touch. */
GM_SIM_UNCHECKED inline int gm_sim_printf(const char* format, ...) {
    char small[1024];
    va_list args;
    va_start(args, format);
    va_list again;
    va_copy(again, args);
    int n = std::vsnprintf(small, sizeof small, format, args);
    va_end(args);
    if (n < 0) {
        va_end(again);
        return n;
    }
    char* text = small;
    if ((size_t)n >= sizeof small) {
        text = static_cast<char*>(std::malloc((size_t)n + 1));
        if (text == nullptr) {
            va_end(again);
            return -1;
        }
        std::vsnprintf(text, (size_t)n + 1, format, again);
    }
    va_end(again);
    flockfile(stdout);
    fwrite_unlocked(text, 1, (size_t)n, stdout);
    fflush_unlocked(stdout);
    funlockfile(stdout);
    if (text != small) std::free(text);
    return n;
}
#define printf gm_sim_printf

inline void gm_sim_assert_fail(const char* expression, const char* file, int line,
                               const char* function) {
    gm_sim_trap_with("assertion `%s` failed at %s:%d in %s", expression, file, line, function);
}

inline void __trap() { gm_sim_trap_with("the kernel called __trap()"); }
inline void __brkpt() { gm_sim_trap_with("the kernel called __brkpt()"); }

[[noreturn]] inline void gm_sim_exit_called(const char* what, int status, const char* file,
                                            int line) {
    gm_sim_trap_with("the kernel called %s(%d) at %s:%d; a kernel cannot end the process", what,
                     status, file, line);
}
#define exit(status) gm_sim_exit_called("exit", (status), __FILE__, __LINE__)
#define quick_exit(status) gm_sim_exit_called("quick_exit", (status), __FILE__, __LINE__)
#define _Exit(status) gm_sim_exit_called("_Exit", (status), __FILE__, __LINE__)
#define _exit(status) gm_sim_exit_called("_exit", (status), __FILE__, __LINE__)
#define abort() gm_sim_exit_called("abort", 0, __FILE__, __LINE__)
namespace std {
using ::gm_sim_exit_called;
using ::gm_sim_printf;
}

/* A shift by the value's width or more, or by a negative count, is undefined in C++, and the
 * simulator's processor and a GPU answer it differently (x86 takes the count modulo the width;
 * PTX's shl/shr clamp it, so a left shift gives 0): kernels are compiled with
 * -fsanitize=shift-exponent, whose checks call the handlers below, and such a shift fails the
 * launch with a fault naming the line rather than give a result no GPU computes. (UBSan's data layout, the same for GCC
 * and clang: a source location, then the operands' type descriptors; an integer operand of up
 * to 64 bits is passed by value.) */
struct gm_sim_ubsan_location {
    const char* file;
    unsigned int line;
    unsigned int column;
};
struct gm_sim_ubsan_type {
    unsigned short kind;
    unsigned short info; /* integers: log2(bits) << 1 | signed */
    char name[1];
};
/* An integer type descriptor's width in bits and sign (`kind` 0), read here only (unchecked:
 * the checked build's handlers call them). */
GM_SIM_UNCHECKED inline unsigned int gm_sim_ubsan_int_bits(const gm_sim_ubsan_type* type) {
    return 1u << (type->info >> 1);
}
GM_SIM_UNCHECKED inline bool gm_sim_ubsan_int_signed(const gm_sim_ubsan_type* type) {
    return (type->info & 1) != 0;
}
struct gm_sim_ubsan_shift {
    gm_sim_ubsan_location location;
    const gm_sim_ubsan_type* lhs;
    const gm_sim_ubsan_type* rhs;
};
/* Records the fault; the thread goes on (the compilers declare the handlers as never throwing,
 * so no trap can unwind out of them), and the launch fails with this fault. */
inline void gm_sim_shift_fault(const gm_sim_ubsan_shift* data, unsigned long rhs) {
    const unsigned int bits = gm_sim_ubsan_int_bits(data->lhs);
    const bool negative = gm_sim_ubsan_int_signed(data->rhs) && (long)rhs < 0;
    char message[512];
    std::snprintf(message, sizeof message,
                  "a shift of a %u-bit %s by %lld bits at %s:%u is undefined in C++ (a GPU clamps "
                  "the count, so a left shift gives 0; the simulator's processor takes it modulo "
                  "%u): test or mask the count",
                  bits, data->lhs->name,
                  negative ? (long long)rhs : (long long)(unsigned long long)rhs,
                  data->location.file, data->location.line, bits);
    gm_sim_rt.fault(message);
}
extern "C" __attribute__((weak, visibility("hidden"))) void __ubsan_handle_shift_out_of_bounds(
    gm_sim_ubsan_shift* data, unsigned long, unsigned long rhs) {
    gm_sim_shift_fault(data, rhs);
}
extern "C" __attribute__((weak, visibility("hidden"))) void
__ubsan_handle_shift_out_of_bounds_abort(gm_sim_ubsan_shift* data, unsigned long,
                                         unsigned long rhs) {
    gm_sim_shift_fault(data, rhs);
}

#endif /* GM_SIM_OUTPUT_H */
