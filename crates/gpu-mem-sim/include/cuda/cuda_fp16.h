/*
 * <cuda_fp16.h> for gpu-mem's simulator: CUDA's half precision on the host compiler.
 *   __half / half, __half2 / half2 (two halves, 4-byte aligned), __half_raw, __half2_raw
 *   conversions   __float2half(_rn, _rz, _rd, _ru), __half2float, __double2half, the integer
 *                 ones (__int2half_rn, __half2int_rz, ...), __float2half2_rn, __floats2half2_rn,
 *                 __float22half2_rn, __half22float2, __low2float, __high2float, __low2half,
 *                 __high2half, __halves2half2, __half2half2, __lows2half2, __highs2half2,
 *                 __lowhigh2highlow, make_half2, the bit casts (__half_as_ushort, ...)
 *   arithmetic    __hadd, __hsub, __hmul, __hdiv, __hfma, __hneg, __habs, their _sat forms,
 *                 the __half2 forms (__hadd2, __hmul2, __hfma2, __h2div, ...), __hmax, __hmin,
 *                 and the operators + - * / (compound, unary, ++ --) and comparisons
 *   comparisons   __heq, __hne, __hlt, __hle, __hgt, __hge (and the unordered ones),
 *                 __hisnan, __hisinf; __hbeq2 & co (both halves), __heq2 & co (per half)
 *   math          hsqrt, hrsqrt, hrcp, hexp, hexp2, hexp10, hlog, hlog2, hlog10, hsin, hcos,
 *                 hceil, hfloor, htrunc, hrint, and their h2 forms
 *   atomics       atomicAdd on __half and __half2
 * Every operation is rounded once to the nearest half (ties to even), as on a GPU: it is
 * computed in double, where the result of +, -, *, / and sqrt of halves is exact or rounds
 * harmlessly (53 >= 2 * 11 + 2 bits), then rounded to half. A NaN result is CUDA's 0x7fff.
 */
#pragma once
#include "gpu_mem.h"
#include <cmath>
#include <cstring>

struct __half_raw {
    unsigned short x;
};
struct __half2_raw {
    unsigned short x, y;
};

namespace gm_sim_fp16 {
/* How a value between two halves is rounded. */
enum rounding { nearest_even, toward_zero, down, up };

/* The half nearest `d` in `mode` (`d` may be any double). */
inline unsigned short from_double(double d, rounding mode = nearest_even) {
    unsigned long long x;
    std::memcpy(&x, &d, sizeof x);
    const unsigned short sign = (unsigned short)((x >> 48) & 0x8000);
    const int exp = (int)((x >> 52) & 0x7ff);
    unsigned long long mant = x & 0xfffffffffffffull;
    if (exp == 0x7ff) return mant ? (unsigned short)0x7fff : (unsigned short)(sign | 0x7c00);
    const bool negative = sign != 0;
    /* Whether dropping the bits rounds the magnitude up. */
    auto round_up = [&](unsigned long long kept, unsigned long long rest, unsigned long long half) {
        switch (mode) {
            case nearest_even: return rest > half || (rest == half && (kept & 1));
            case toward_zero: return false;
            case down: return negative && rest != 0;
            case up: return !negative && rest != 0;
        }
        return false;
    };
    if (exp == 0 && mant == 0) return sign;
    int e = exp - 1023 + 15; /* the half's biased exponent */
    if (exp == 0) {
        /* A double subnormal is far below the smallest half subnormal. */
        return (unsigned short)(sign | (round_up(0, 1, 2) ? 1 : 0));
    }
    mant |= 1ull << 52;
    if (e >= 31) {
        const bool to_infinity =
            mode == nearest_even || (mode == up && !negative) || (mode == down && negative);
        return (unsigned short)(sign | (to_infinity ? 0x7c00 : 0x7bff));
    }
    if (e <= 0) {
        /* A half subnormal: units of 2^-24. */
        const int shift = 42 + 1 - e;
        if (shift > 62) return (unsigned short)(sign | (round_up(0, 1, 2) ? 1 : 0));
        const unsigned long long kept = mant >> shift;
        const unsigned long long rest = mant & ((1ull << shift) - 1);
        const unsigned long long half = 1ull << (shift - 1);
        return (unsigned short)(sign | (kept + (round_up(kept, rest, half) ? 1 : 0)));
    }
    const unsigned long long kept = ((unsigned long long)e << 10) | ((mant >> 42) & 0x3ff);
    const unsigned long long rest = mant & ((1ull << 42) - 1);
    /* A carry out of the mantissa raises the exponent, up to infinity: still the right value. */
    unsigned long long bits = kept + (round_up(kept, rest, 1ull << 41) ? 1 : 0);
    if (bits >= 0x7c00 && !(mode == nearest_even || (mode == up && !negative) ||
                            (mode == down && negative))) {
        bits = 0x7bff;
    }
    return (unsigned short)(sign | bits);
}

inline float to_float(unsigned short h) {
    const unsigned int sign = (unsigned int)(h & 0x8000) << 16;
    unsigned int exp = (h >> 10) & 0x1f;
    unsigned int mant = h & 0x3ff;
    unsigned int x;
    if (exp == 0x1f) {
        x = sign | 0x7f800000u | (mant << 13);
    } else if (exp == 0) {
        if (mant == 0) {
            x = sign;
        } else {
            int e = -1;
            do {
                ++e;
                mant <<= 1;
            } while (!(mant & 0x400));
            x = sign | ((unsigned int)(112 - e) << 23) | ((mant & 0x3ff) << 13);
        }
    } else {
        x = sign | ((exp + 112) << 23) | (mant << 13);
    }
    float f;
    std::memcpy(&f, &x, sizeof f);
    return f;
}
}  // namespace gm_sim_fp16

struct __half {
    unsigned short __x;
    __half() = default;
    __half(const __half_raw& raw) : __x(raw.x) {}
    __half& operator=(const __half_raw& raw) {
        __x = raw.x;
        return *this;
    }
    operator __half_raw() const { return __half_raw{__x}; }
    __half(float f) : __x(gm_sim_fp16::from_double(f)) {}
    __half(double d) : __x(gm_sim_fp16::from_double(d)) {}
    __half(short v) : __x(gm_sim_fp16::from_double(v)) {}
    __half(unsigned short v) : __x(gm_sim_fp16::from_double(v)) {}
    __half(int v) : __x(gm_sim_fp16::from_double(v)) {}
    __half(unsigned int v) : __x(gm_sim_fp16::from_double(v)) {}
    __half(long long v) : __x(gm_sim_fp16::from_double((double)v)) {}
    __half(unsigned long long v) : __x(gm_sim_fp16::from_double((double)v)) {}
    operator float() const { return gm_sim_fp16::to_float(__x); }
    explicit operator bool() const { return (__x & 0x7fff) != 0; }
};

struct __align__(4) __half2 {
    __half x, y;
    __half2() = default;
    __half2(const __half& a, const __half& b) : x(a), y(b) {}
    __half2(const __half2_raw& raw) : x(__half_raw{raw.x}), y(__half_raw{raw.y}) {}
    __half2& operator=(const __half2_raw& raw) {
        x = __half_raw{raw.x};
        y = __half_raw{raw.y};
        return *this;
    }
    operator __half2_raw() const { return __half2_raw{x.__x, y.__x}; }
};

typedef __half half;
typedef __half2 half2;
typedef __half __nv_half;
typedef __half2 __nv_half2;

/* ----- conversions --------------------------------------------------------------------------- */
inline __half gm_sim_half_bits(unsigned short bits) { return __half_raw{bits}; }
inline __half __float2half(float f) { return gm_sim_half_bits(gm_sim_fp16::from_double(f)); }
inline __half __float2half_rn(float f) { return __float2half(f); }
inline __half __float2half_rz(float f) {
    return gm_sim_half_bits(gm_sim_fp16::from_double(f, gm_sim_fp16::toward_zero));
}
inline __half __float2half_rd(float f) {
    return gm_sim_half_bits(gm_sim_fp16::from_double(f, gm_sim_fp16::down));
}
inline __half __float2half_ru(float f) {
    return gm_sim_half_bits(gm_sim_fp16::from_double(f, gm_sim_fp16::up));
}
inline __half __double2half(double d) { return gm_sim_half_bits(gm_sim_fp16::from_double(d)); }
inline float __half2float(__half h) { return gm_sim_fp16::to_float(h.__x); }
inline __half2 __float2half2_rn(float f) { return __half2(__float2half(f), __float2half(f)); }
inline __half2 __floats2half2_rn(float a, float b) {
    return __half2(__float2half(a), __float2half(b));
}
inline __half2 __float22half2_rn(float2 f) { return __floats2half2_rn(f.x, f.y); }
inline float2 __half22float2(__half2 h) { return make_float2(__half2float(h.x), __half2float(h.y)); }
inline float __low2float(__half2 h) { return __half2float(h.x); }
inline float __high2float(__half2 h) { return __half2float(h.y); }
inline __half __low2half(__half2 h) { return h.x; }
inline __half __high2half(__half2 h) { return h.y; }
inline __half2 __halves2half2(__half a, __half b) { return __half2(a, b); }
inline __half2 __half2half2(__half a) { return __half2(a, a); }
inline __half2 make_half2(__half a, __half b) { return __half2(a, b); }
inline __half2 __lows2half2(__half2 a, __half2 b) { return __half2(a.x, b.x); }
inline __half2 __highs2half2(__half2 a, __half2 b) { return __half2(a.y, b.y); }
inline __half2 __low2half2(__half2 a) { return __half2(a.x, a.x); }
inline __half2 __high2half2(__half2 a) { return __half2(a.y, a.y); }
inline __half2 __lowhigh2highlow(__half2 a) { return __half2(a.y, a.x); }
inline short __half_as_short(__half h) { return (short)h.__x; }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __half __short_as_half(short s) { return gm_sim_half_bits((unsigned short)s); }
inline __half __ushort_as_half(unsigned short s) { return gm_sim_half_bits(s); }

/* Integers to half, rounded as named. */
#define GM_SIM_INT2HALF(name, T, mode)                                                        \
    inline __half name(T v) { return gm_sim_half_bits(gm_sim_fp16::from_double((double)v, mode)); }
#define GM_SIM_INT2HALF_ALL(prefix, T)                                                        \
    GM_SIM_INT2HALF(prefix##_rn, T, gm_sim_fp16::nearest_even)                                \
    GM_SIM_INT2HALF(prefix##_rz, T, gm_sim_fp16::toward_zero)                                 \
    GM_SIM_INT2HALF(prefix##_rd, T, gm_sim_fp16::down)                                        \
    GM_SIM_INT2HALF(prefix##_ru, T, gm_sim_fp16::up)
GM_SIM_INT2HALF_ALL(__int2half, int)
GM_SIM_INT2HALF_ALL(__uint2half, unsigned int)
GM_SIM_INT2HALF_ALL(__short2half, short)
GM_SIM_INT2HALF_ALL(__ushort2half, unsigned short)
GM_SIM_INT2HALF_ALL(__ll2half, long long)
GM_SIM_INT2HALF_ALL(__ull2half, unsigned long long)
#undef GM_SIM_INT2HALF_ALL
#undef GM_SIM_INT2HALF

/* Half to integers, rounded as named; NaN is 0 and values out of range saturate (as CUDA's
 * conversions do). */
template <typename T>
inline T gm_sim_half_to_int(__half h, double (*round)(double), double low, double high) {
    const double v = __half2float(h);
    if (v != v) return 0;
    const double r = round(v);
    return r < low ? (T)low : r > high ? (T)high : (T)r;
}
#define GM_SIM_HALF2INT(prefix, T, low, high)                                                 \
    inline T prefix##_rn(__half h) { return gm_sim_half_to_int<T>(h, std::nearbyint, low, high); } \
    inline T prefix##_rz(__half h) { return gm_sim_half_to_int<T>(h, std::trunc, low, high); } \
    inline T prefix##_rd(__half h) { return gm_sim_half_to_int<T>(h, std::floor, low, high); } \
    inline T prefix##_ru(__half h) { return gm_sim_half_to_int<T>(h, std::ceil, low, high); }
GM_SIM_HALF2INT(__half2int, int, -2147483648.0, 2147483647.0)
GM_SIM_HALF2INT(__half2uint, unsigned int, 0.0, 4294967295.0)
GM_SIM_HALF2INT(__half2short, short, -32768.0, 32767.0)
GM_SIM_HALF2INT(__half2ushort, unsigned short, 0.0, 65535.0)
GM_SIM_HALF2INT(__half2ll, long long, -9223372036854775808.0, 9223372036854774784.0)
GM_SIM_HALF2INT(__half2ull, unsigned long long, 0.0, 18446744073709549568.0)
#undef GM_SIM_HALF2INT

/* ----- arithmetic ---------------------------------------------------------------------------- */
inline double gm_sim_half_value(__half h) { return (double)__half2float(h); }
inline __half gm_sim_half_of(double d) { return __double2half(d); }
/* Clamped to [0, 1], NaN to 0 (the _sat forms). */
inline __half gm_sim_half_sat(double d) {
    return gm_sim_half_of(d != d ? 0.0 : d < 0.0 ? 0.0 : d > 1.0 ? 1.0 : d);
}

inline __half __hadd(__half a, __half b) { return gm_sim_half_of(gm_sim_half_value(a) + gm_sim_half_value(b)); }
inline __half __hsub(__half a, __half b) { return gm_sim_half_of(gm_sim_half_value(a) - gm_sim_half_value(b)); }
inline __half __hmul(__half a, __half b) { return gm_sim_half_of(gm_sim_half_value(a) * gm_sim_half_value(b)); }
inline __half __hdiv(__half a, __half b) { return gm_sim_half_of(gm_sim_half_value(a) / gm_sim_half_value(b)); }
inline __half __hfma(__half a, __half b, __half c) {
    return gm_sim_half_of(std::fma(gm_sim_half_value(a), gm_sim_half_value(b), gm_sim_half_value(c)));
}
inline __half __hadd_sat(__half a, __half b) { return gm_sim_half_sat(gm_sim_half_value(a) + gm_sim_half_value(b)); }
inline __half __hsub_sat(__half a, __half b) { return gm_sim_half_sat(gm_sim_half_value(a) - gm_sim_half_value(b)); }
inline __half __hmul_sat(__half a, __half b) { return gm_sim_half_sat(gm_sim_half_value(a) * gm_sim_half_value(b)); }
inline __half __hfma_sat(__half a, __half b, __half c) {
    return gm_sim_half_sat(std::fma(gm_sim_half_value(a), gm_sim_half_value(b), gm_sim_half_value(c)));
}
inline __half __hneg(__half a) { return gm_sim_half_bits((unsigned short)(a.__x ^ 0x8000)); }
inline __half __habs(__half a) { return gm_sim_half_bits((unsigned short)(a.__x & 0x7fff)); }
inline bool __hisnan(__half a) { return (a.__x & 0x7c00) == 0x7c00 && (a.__x & 0x3ff) != 0; }
inline int __hisinf(__half a) {
    return a.__x == 0x7c00 ? 1 : a.__x == 0xfc00 ? -1 : 0;
}
inline __half __hmax(__half a, __half b) {
    if (__hisnan(a)) return b;
    if (__hisnan(b)) return a;
    return gm_sim_half_value(a) > gm_sim_half_value(b) ? a : b;
}
inline __half __hmin(__half a, __half b) {
    if (__hisnan(a)) return b;
    if (__hisnan(b)) return a;
    return gm_sim_half_value(a) < gm_sim_half_value(b) ? a : b;
}
inline __half __hmax_nan(__half a, __half b) {
    return __hisnan(a) || __hisnan(b) ? gm_sim_half_bits(0x7fff) : __hmax(a, b);
}
inline __half __hmin_nan(__half a, __half b) {
    return __hisnan(a) || __hisnan(b) ? gm_sim_half_bits(0x7fff) : __hmin(a, b);
}

/* Each half of a __half2 by the __half operation of the same name. */
#define GM_SIM_HALF2_UNARY(name, op)                                                          \
    inline __half2 name(__half2 a) { return __half2(op(a.x), op(a.y)); }
#define GM_SIM_HALF2_BINARY(name, op)                                                         \
    inline __half2 name(__half2 a, __half2 b) { return __half2(op(a.x, b.x), op(a.y, b.y)); }
#define GM_SIM_HALF2_TERNARY(name, op)                                                        \
    inline __half2 name(__half2 a, __half2 b, __half2 c) {                                    \
        return __half2(op(a.x, b.x, c.x), op(a.y, b.y, c.y));                                \
    }
GM_SIM_HALF2_BINARY(__hadd2, __hadd)
GM_SIM_HALF2_BINARY(__hsub2, __hsub)
GM_SIM_HALF2_BINARY(__hmul2, __hmul)
GM_SIM_HALF2_BINARY(__h2div, __hdiv)
GM_SIM_HALF2_BINARY(__hadd2_sat, __hadd_sat)
GM_SIM_HALF2_BINARY(__hsub2_sat, __hsub_sat)
GM_SIM_HALF2_BINARY(__hmul2_sat, __hmul_sat)
GM_SIM_HALF2_BINARY(__hmax2, __hmax)
GM_SIM_HALF2_BINARY(__hmin2, __hmin)
GM_SIM_HALF2_BINARY(__hmax2_nan, __hmax_nan)
GM_SIM_HALF2_BINARY(__hmin2_nan, __hmin_nan)
GM_SIM_HALF2_TERNARY(__hfma2, __hfma)
GM_SIM_HALF2_TERNARY(__hfma2_sat, __hfma_sat)
GM_SIM_HALF2_UNARY(__hneg2, __hneg)
GM_SIM_HALF2_UNARY(__habs2, __habs)

/* ----- comparisons --------------------------------------------------------------------------- */
/* Ordered comparisons are false with a NaN; the unordered ones (`u`) true. */
#define GM_SIM_HALF_COMPARE(name, op, unordered)                                              \
    inline bool name(__half a, __half b) {                                                    \
        if (__hisnan(a) || __hisnan(b)) return unordered;                                     \
        return gm_sim_half_value(a) op gm_sim_half_value(b);                                  \
    }                                                                                         \
    inline bool gm_sim_both##name(__half2 a, __half2 b) { return name(a.x, b.x) && name(a.y, b.y); } \
    inline __half2 name##2(__half2 a, __half2 b) {                                            \
        return __half2(__half(name(a.x, b.x) ? 1.0f : 0.0f), __half(name(a.y, b.y) ? 1.0f : 0.0f)); \
    }
GM_SIM_HALF_COMPARE(__heq, ==, false)
GM_SIM_HALF_COMPARE(__hne, !=, false)
GM_SIM_HALF_COMPARE(__hlt, <, false)
GM_SIM_HALF_COMPARE(__hle, <=, false)
GM_SIM_HALF_COMPARE(__hgt, >, false)
GM_SIM_HALF_COMPARE(__hge, >=, false)
GM_SIM_HALF_COMPARE(__hequ, ==, true)
GM_SIM_HALF_COMPARE(__hneu, !=, true)
GM_SIM_HALF_COMPARE(__hltu, <, true)
GM_SIM_HALF_COMPARE(__hleu, <=, true)
GM_SIM_HALF_COMPARE(__hgtu, >, true)
GM_SIM_HALF_COMPARE(__hgeu, >=, true)
#undef GM_SIM_HALF_COMPARE
/* CUDA's names for the both-halves forms. */
#define GM_SIM_HALF_BOTH(name, one)                                                           \
    inline bool name(__half2 a, __half2 b) { return gm_sim_both##one(a, b); }
GM_SIM_HALF_BOTH(__hbeq2, __heq)
GM_SIM_HALF_BOTH(__hbne2, __hne)
GM_SIM_HALF_BOTH(__hblt2, __hlt)
GM_SIM_HALF_BOTH(__hble2, __hle)
GM_SIM_HALF_BOTH(__hbgt2, __hgt)
GM_SIM_HALF_BOTH(__hbge2, __hge)
GM_SIM_HALF_BOTH(__hbequ2, __hequ)
GM_SIM_HALF_BOTH(__hbneu2, __hneu)
GM_SIM_HALF_BOTH(__hbltu2, __hltu)
GM_SIM_HALF_BOTH(__hbleu2, __hleu)
GM_SIM_HALF_BOTH(__hbgtu2, __hgtu)
GM_SIM_HALF_BOTH(__hbgeu2, __hgeu)
#undef GM_SIM_HALF_BOTH
inline __half2 __hisnan2(__half2 a) {
    return __half2(__half(__hisnan(a.x) ? 1.0f : 0.0f), __half(__hisnan(a.y) ? 1.0f : 0.0f));
}

/* ----- operators ----------------------------------------------------------------------------- */
inline __half operator+(const __half& a, const __half& b) { return __hadd(a, b); }
inline __half operator-(const __half& a, const __half& b) { return __hsub(a, b); }
inline __half operator*(const __half& a, const __half& b) { return __hmul(a, b); }
inline __half operator/(const __half& a, const __half& b) { return __hdiv(a, b); }
inline __half& operator+=(__half& a, const __half& b) { return a = __hadd(a, b); }
inline __half& operator-=(__half& a, const __half& b) { return a = __hsub(a, b); }
inline __half& operator*=(__half& a, const __half& b) { return a = __hmul(a, b); }
inline __half& operator/=(__half& a, const __half& b) { return a = __hdiv(a, b); }
inline __half operator+(const __half& a) { return a; }
inline __half operator-(const __half& a) { return __hneg(a); }
inline __half& operator++(__half& a) { return a = __hadd(a, __half(1.0f)); }
inline __half& operator--(__half& a) { return a = __hsub(a, __half(1.0f)); }
inline __half operator++(__half& a, int) {
    const __half old = a;
    ++a;
    return old;
}
inline __half operator--(__half& a, int) {
    const __half old = a;
    --a;
    return old;
}
inline bool operator==(const __half& a, const __half& b) { return __heq(a, b); }
inline bool operator!=(const __half& a, const __half& b) { return __hneu(a, b); }
inline bool operator<(const __half& a, const __half& b) { return __hlt(a, b); }
inline bool operator<=(const __half& a, const __half& b) { return __hle(a, b); }
inline bool operator>(const __half& a, const __half& b) { return __hgt(a, b); }
inline bool operator>=(const __half& a, const __half& b) { return __hge(a, b); }

inline __half2 operator+(const __half2& a, const __half2& b) { return __hadd2(a, b); }
inline __half2 operator-(const __half2& a, const __half2& b) { return __hsub2(a, b); }
inline __half2 operator*(const __half2& a, const __half2& b) { return __hmul2(a, b); }
inline __half2 operator/(const __half2& a, const __half2& b) { return __h2div(a, b); }
inline __half2& operator+=(__half2& a, const __half2& b) { return a = __hadd2(a, b); }
inline __half2& operator-=(__half2& a, const __half2& b) { return a = __hsub2(a, b); }
inline __half2& operator*=(__half2& a, const __half2& b) { return a = __hmul2(a, b); }
inline __half2& operator/=(__half2& a, const __half2& b) { return a = __h2div(a, b); }
inline __half2 operator+(const __half2& a) { return a; }
inline __half2 operator-(const __half2& a) { return __hneg2(a); }
inline bool operator==(const __half2& a, const __half2& b) { return __hbeq2(a, b); }
inline bool operator!=(const __half2& a, const __half2& b) { return __hbneu2(a, b); }
inline bool operator<(const __half2& a, const __half2& b) { return __hblt2(a, b); }
inline bool operator<=(const __half2& a, const __half2& b) { return __hble2(a, b); }
inline bool operator>(const __half2& a, const __half2& b) { return __hbgt2(a, b); }
inline bool operator>=(const __half2& a, const __half2& b) { return __hbge2(a, b); }

/* ----- math ---------------------------------------------------------------------------------- */
#define GM_SIM_HALF_MATH(name, f)                                                             \
    inline __half h##name(__half a) { return gm_sim_half_of(f(gm_sim_half_value(a))); }      \
    inline __half2 h2##name(__half2 a) { return __half2(h##name(a.x), h##name(a.y)); }
inline double gm_sim_rsqrt(double v) { return 1.0 / std::sqrt(v); }
inline double gm_sim_rcp(double v) { return 1.0 / v; }
inline double gm_sim_exp10(double v) { return std::pow(10.0, v); }
GM_SIM_HALF_MATH(sqrt, std::sqrt)
GM_SIM_HALF_MATH(rsqrt, gm_sim_rsqrt)
GM_SIM_HALF_MATH(rcp, gm_sim_rcp)
GM_SIM_HALF_MATH(exp, std::exp)
GM_SIM_HALF_MATH(exp2, std::exp2)
GM_SIM_HALF_MATH(exp10, gm_sim_exp10)
GM_SIM_HALF_MATH(log, std::log)
GM_SIM_HALF_MATH(log2, std::log2)
GM_SIM_HALF_MATH(log10, std::log10)
GM_SIM_HALF_MATH(sin, std::sin)
GM_SIM_HALF_MATH(cos, std::cos)
GM_SIM_HALF_MATH(ceil, std::ceil)
GM_SIM_HALF_MATH(floor, std::floor)
GM_SIM_HALF_MATH(trunc, std::trunc)
GM_SIM_HALF_MATH(rint, std::nearbyint)
#undef GM_SIM_HALF_MATH

/* ----- atomics ------------------------------------------------------------------------------- */
/* The parenthesised names keep the stackless build's atomicAdd macro out. */
inline __half(atomicAdd)(__half* address, __half value) {
    return gm_sim_atomic_update_float(address, [=](__half v) { return __hadd(v, value); });
}
inline __half2(atomicAdd)(__half2* address, __half2 value) {
    return gm_sim_atomic_update_float(address, [=](__half2 v) { return __hadd2(v, value); });
}
