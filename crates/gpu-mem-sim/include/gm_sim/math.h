/*
 * gm_sim/math.h — CUDA's math API on the host compiler. The C library gives most of it in the
 * global namespace (sqrtf, expf, fabsf, fmaf, erff, lgammaf, sincosf, exp10f ... and, through
 * the C++ <math.h>, the float overloads sqrt(float) & co that CUDA has too); this adds what CUDA
 * has and the C library lacks: rsqrt, rcbrt, sinpi, cospi, sincospi, erfinv, erfcinv, erfcx,
 * normcdf, normcdfinv, norm3d & co, rhypot, fdividef, cyl_bessel_i0/i1, and CUDA's min/max
 * overloads (int, unsigned, long long, float, double and their mixes, with CUDA's result types).
 * Results are the C library's (correctly rounded or close to it): at least as accurate as CUDA's
 * documented error bounds, not bit-identical to a GPU's.
 */
#ifndef GM_SIM_MATH_H
#define GM_SIM_MATH_H

#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <math.h>
#include <stdlib.h>

#define GM_SIM_PI 3.14159265358979323846

/* Pairs of float and double functions of one argument, written once for double. */
#define GM_SIM_MATH1(fname, dname, expression)                                                \
    inline double dname(double x) { return (expression); }                                    \
    inline float fname(float x) { return (float)dname((double)x); }

/* C23 functions a newer C library may declare itself (then its own are used). */
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 41))
#define GM_SIM_LIBC_HAS_SINPI 1
#endif
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 42))
#define GM_SIM_LIBC_HAS_RSQRT 1
#endif

#if !defined(GM_SIM_LIBC_HAS_RSQRT)
GM_SIM_MATH1(rsqrtf, rsqrt, 1.0 / std::sqrt(x))
#endif
GM_SIM_MATH1(rcbrtf, rcbrt, 1.0 / std::cbrt(x))

/* sin(pi x) and cos(pi x), exact at integers and half-integers. */
inline double gm_sim_reduce_pi(double x) {
    double r = std::fmod(x, 2.0); /* (-2, 2) */
    if (r > 1.0) r -= 2.0;
    if (r < -1.0) r += 2.0;
    return r; /* [-1, 1] */
}
#if !defined(GM_SIM_LIBC_HAS_SINPI)
inline double sinpi(double x) {
    if (std::isinf(x) || std::isnan(x)) return NAN;
    double r = gm_sim_reduce_pi(x);
    if (r == std::floor(r)) return std::copysign(0.0, x);
    if (r == 0.5) return 1.0;
    if (r == -0.5) return -1.0;
    return std::sin(GM_SIM_PI * r);
}
inline double cospi(double x) {
    if (std::isinf(x) || std::isnan(x)) return NAN;
    double r = std::fabs(gm_sim_reduce_pi(x));
    if (r == 0.5) return 0.0;
    if (r == 0.0) return 1.0;
    if (r == 1.0) return -1.0;
    return std::cos(GM_SIM_PI * r);
}
inline float sinpif(float x) { return (float)sinpi(x); }
inline float cospif(float x) { return (float)cospi(x); }
#endif
inline void sincospi(double x, double* s, double* c) {
    *s = sinpi(x);
    *c = cospi(x);
}
inline void sincospif(float x, float* s, float* c) {
    *s = sinpif(x);
    *c = cospif(x);
}

/* erfinv: Giles' single-precision start, then Newton steps on erf. */
inline double erfinv(double y) {
    if (y <= -1.0) return y == -1.0 ? -INFINITY : NAN;
    if (y >= 1.0) return y == 1.0 ? INFINITY : NAN;
    double w = -std::log((1.0 - y) * (1.0 + y)), x;
    if (w < 5.0) {
        w -= 2.5;
        x = 2.81022636e-08;
        x = 3.43273939e-07 + x * w;
        x = -3.5233877e-06 + x * w;
        x = -4.39150654e-06 + x * w;
        x = 0.00021858087 + x * w;
        x = -0.00125372503 + x * w;
        x = -0.00417768164 + x * w;
        x = 0.246640727 + x * w;
        x = 1.50140941 + x * w;
    } else {
        w = std::sqrt(w) - 3.0;
        x = -0.000200214257;
        x = 0.000100950558 + x * w;
        x = 0.00134934322 + x * w;
        x = -0.00367342844 + x * w;
        x = 0.00573950773 + x * w;
        x = -0.0076224613 + x * w;
        x = 0.00943887047 + x * w;
        x = 1.00167406 + x * w;
        x = 2.83297682 + x * w;
    }
    x *= y;
    for (int i = 0; i < 3; ++i) {
        double slope = 2.0 / std::sqrt(GM_SIM_PI) * std::exp(-x * x);
        if (slope == 0.0) break;
        x -= (std::erf(x) - y) / slope;
    }
    return x;
}
/* erfcinv(y) = erfinv(1 - y), refined on erfc itself for small y. */
inline double erfcinv(double y) {
    if (y <= 0.0) return y == 0.0 ? INFINITY : NAN;
    if (y >= 2.0) return y == 2.0 ? -INFINITY : NAN;
    double x = erfinv(1.0 - y);
    if (std::isinf(x)) x = y < 1.0 ? 27.0 : -27.0;
    for (int i = 0; i < 4; ++i) {
        double slope = -2.0 / std::sqrt(GM_SIM_PI) * std::exp(-x * x);
        if (slope == 0.0) break;
        x -= (std::erfc(x) - y) / slope;
    }
    return x;
}
inline float erfinvf(float y) { return (float)erfinv(y); }
inline float erfcinvf(float y) { return (float)erfcinv(y); }
/* exp(x^2) erfc(x), asymptotically where exp(x^2) would overflow. */
inline double erfcx(double x) {
    if (x < 25.0) return std::exp(x * x) * std::erfc(x);
    double r = 1.0 / (x * x);
    return 1.0 / (x * std::sqrt(GM_SIM_PI)) * (1.0 - 0.5 * r + 0.75 * r * r - 1.875 * r * r * r);
}
inline float erfcxf(float x) { return (float)erfcx(x); }
inline double normcdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }
inline float normcdff(float x) { return (float)normcdf(x); }
inline double normcdfinv(double p) { return -std::sqrt(2.0) * erfcinv(2.0 * p); }
inline float normcdfinvf(float p) { return (float)normcdfinv(p); }

inline double norm3d(double a, double b, double c) { return std::sqrt(a * a + b * b + c * c); }
inline float norm3df(float a, float b, float c) { return (float)norm3d(a, b, c); }
inline double norm4d(double a, double b, double c, double d) {
    return std::sqrt(a * a + b * b + c * c + d * d);
}
inline float norm4df(float a, float b, float c, float d) { return (float)norm4d(a, b, c, d); }
inline double rnorm3d(double a, double b, double c) { return 1.0 / norm3d(a, b, c); }
inline float rnorm3df(float a, float b, float c) { return (float)rnorm3d(a, b, c); }
inline double rnorm4d(double a, double b, double c, double d) { return 1.0 / norm4d(a, b, c, d); }
inline float rnorm4df(float a, float b, float c, float d) { return (float)rnorm4d(a, b, c, d); }
inline double norm(int dim, const double* p) {
    double s = 0.0;
    for (int i = 0; i < dim; ++i) s += p[i] * p[i];
    return std::sqrt(s);
}
inline float normf(int dim, const float* p) {
    double s = 0.0;
    for (int i = 0; i < dim; ++i) s += (double)p[i] * p[i];
    return (float)std::sqrt(s);
}
inline double rnorm(int dim, const double* p) { return 1.0 / norm(dim, p); }
inline float rnormf(int dim, const float* p) { return 1.0f / normf(dim, p); }
inline double rhypot(double a, double b) { return 1.0 / std::hypot(a, b); }
inline float rhypotf(float a, float b) { return (float)rhypot(a, b); }
inline float fdividef(float a, float b) { return a / b; }

/* Modified Bessel functions of the first kind, orders 0 and 1 (power series, then the
 * asymptotic form). */
inline double cyl_bessel_i0(double x) {
    double ax = std::fabs(x);
    if (ax > 30.0) return std::exp(ax) / std::sqrt(2.0 * GM_SIM_PI * ax);
    double sum = 1.0, term = 1.0, q = x * x / 4.0;
    for (int k = 1; k < 200 && term > sum * 1e-17; ++k) {
        term *= q / ((double)k * k);
        sum += term;
    }
    return sum;
}
inline double cyl_bessel_i1(double x) {
    double ax = std::fabs(x);
    if (ax > 30.0) return std::copysign(std::exp(ax) / std::sqrt(2.0 * GM_SIM_PI * ax), x);
    double term = x / 2.0, sum = term, q = x * x / 4.0;
    for (int k = 1; k < 200 && std::fabs(term) > std::fabs(sum) * 1e-17; ++k) {
        term *= q / ((double)k * (k + 1));
        sum += term;
    }
    return sum;
}
inline float cyl_bessel_i0f(float x) { return (float)cyl_bessel_i0(x); }
inline float cyl_bessel_i1f(float x) { return (float)cyl_bessel_i1(x); }

/* min and max as CUDA overloads them (mixed signedness gives the unsigned type). */
#define GM_SIM_MINMAX(R, A, B)                                                                \
    inline R min(A a, B b) { return (R)a < (R)b ? (R)a : (R)b; }                             \
    inline R max(A a, B b) { return (R)a > (R)b ? (R)a : (R)b; }
GM_SIM_MINMAX(int, int, int)
GM_SIM_MINMAX(unsigned int, unsigned int, unsigned int)
GM_SIM_MINMAX(unsigned int, int, unsigned int)
GM_SIM_MINMAX(unsigned int, unsigned int, int)
GM_SIM_MINMAX(long, long, long)
GM_SIM_MINMAX(unsigned long, unsigned long, unsigned long)
GM_SIM_MINMAX(unsigned long, long, unsigned long)
GM_SIM_MINMAX(unsigned long, unsigned long, long)
GM_SIM_MINMAX(long long, long long, long long)
GM_SIM_MINMAX(unsigned long long, unsigned long long, unsigned long long)
GM_SIM_MINMAX(unsigned long long, long long, unsigned long long)
GM_SIM_MINMAX(unsigned long long, unsigned long long, long long)
#undef GM_SIM_MINMAX
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
inline double min(float a, double b) { return fmin(a, b); }
inline double max(float a, double b) { return fmax(a, b); }
inline double min(double a, float b) { return fmin(a, b); }
inline double max(double a, float b) { return fmax(a, b); }
inline unsigned int umin(unsigned int a, unsigned int b) { return a < b ? a : b; }
inline unsigned int umax(unsigned int a, unsigned int b) { return a > b ? a : b; }
inline long long llmin(long long a, long long b) { return a < b ? a : b; }
inline long long llmax(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long ullmin(unsigned long long a, unsigned long long b) {
    return a < b ? a : b;
}
inline unsigned long long ullmax(unsigned long long a, unsigned long long b) {
    return a > b ? a : b;
}

#undef GM_SIM_MATH1
#endif /* GM_SIM_MATH_H */
