/*
 * gm_sim/vector_types.h — CUDA's vector types on the host compiler: char1..4 to double1..4,
 * with CUDA's sizes and alignments (float2: 8 bytes aligned to 8, float4 and int4: 16 aligned
 * to 16, every 3-vector aligned as its element), and their make_* functions. uint3 and dim3
 * come from gpu_mem.h (threadIdx & co are uint3).
 */
#ifndef GM_SIM_VECTOR_TYPES_H
#define GM_SIM_VECTOR_TYPES_H

#define GM_SIM_VEC1(name, T, A)                                                               \
    struct __attribute__((aligned(A))) name##1 { T x; };                                      \
    typedef struct name##1 name##1;                                                           \
    inline name##1 make_##name##1(T x) { name##1 v; v.x = x; return v; }
#define GM_SIM_VEC2(name, T, A)                                                               \
    struct __attribute__((aligned(A))) name##2 { T x, y; };                                   \
    typedef struct name##2 name##2;                                                           \
    inline name##2 make_##name##2(T x, T y) { name##2 v; v.x = x; v.y = y; return v; }
#define GM_SIM_VEC3(name, T, A)                                                               \
    struct __attribute__((aligned(A))) name##3 { T x, y, z; };                                \
    typedef struct name##3 name##3;                                                           \
    inline name##3 make_##name##3(T x, T y, T z) {                                            \
        name##3 v; v.x = x; v.y = y; v.z = z; return v;                                       \
    }
#define GM_SIM_VEC4(name, T, A)                                                               \
    struct __attribute__((aligned(A))) name##4 { T x, y, z, w; };                             \
    typedef struct name##4 name##4;                                                           \
    inline name##4 make_##name##4(T x, T y, T z, T w) {                                       \
        name##4 v; v.x = x; v.y = y; v.z = z; v.w = w; return v;                              \
    }
/* Alignments of 1-, 2-, 3- and 4-vectors of an element of `S` bytes, as CUDA's vector_types.h
 * declares them. */
#define GM_SIM_VECS(name, T, A1, A2, A3, A4)                                                  \
    GM_SIM_VEC1(name, T, A1) GM_SIM_VEC2(name, T, A2) GM_SIM_VEC3(name, T, A3)                \
    GM_SIM_VEC4(name, T, A4)

GM_SIM_VECS(char, signed char, 1, 2, 1, 4)
GM_SIM_VECS(uchar, unsigned char, 1, 2, 1, 4)
GM_SIM_VECS(short, short, 2, 4, 2, 8)
GM_SIM_VECS(ushort, unsigned short, 2, 4, 2, 8)
GM_SIM_VECS(int, int, 4, 8, 4, 16)
GM_SIM_VEC1(uint, unsigned int, 4)
GM_SIM_VEC2(uint, unsigned int, 8)
GM_SIM_VEC4(uint, unsigned int, 16)
GM_SIM_VECS(long, long, 8, 16, 8, 16)
GM_SIM_VECS(ulong, unsigned long, 8, 16, 8, 16)
GM_SIM_VECS(longlong, long long, 8, 16, 8, 16)
GM_SIM_VECS(ulonglong, unsigned long long, 8, 16, 8, 16)
GM_SIM_VECS(float, float, 4, 8, 4, 16)
GM_SIM_VECS(double, double, 8, 16, 8, 16)

inline uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z) {
    uint3 v;
    v.x = x;
    v.y = y;
    v.z = z;
    return v;
}

#undef GM_SIM_VECS
#undef GM_SIM_VEC4
#undef GM_SIM_VEC3
#undef GM_SIM_VEC2
#undef GM_SIM_VEC1

static_assert(sizeof(float4) == 16 && alignof(float4) == 16, "float4 as in CUDA");
static_assert(sizeof(float3) == 12 && alignof(float3) == 4, "float3 as in CUDA");
static_assert(sizeof(double2) == 16 && alignof(double2) == 16, "double2 as in CUDA");
static_assert(sizeof(char3) == 3 && alignof(short4) == 8, "char3, short4 as in CUDA");

#endif /* GM_SIM_VECTOR_TYPES_H */
