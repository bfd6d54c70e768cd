// The CUDA math API and intrinsics: each thread writes the results for its input x (one row
// of `out`), and the host compares them with its own computation.
#include <cuda_runtime.h>
#include <math.h>

#define RESULTS 24

__global__ void math_row(const float* in, float* out, unsigned int* bits, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = in[i];
    float* r = out + i * RESULTS;
    r[0] = sqrtf(fabsf(x));
    r[1] = expf(x * 0.1f);
    r[2] = __expf(x * 0.1f);
    r[3] = rsqrtf(fabsf(x) + 1.0f);
    r[4] = __fdividef(x, 3.0f);
    r[5] = __saturatef(x);
    r[6] = powf(fabsf(x), 1.5f);
    r[7] = __powf(fabsf(x) + 1.0f, 0.5f);
    float s, c;
    sincosf(x, &s, &c);
    r[8] = s;
    r[9] = c;
    r[10] = fminf(x, 0.25f) + fmaxf(x, -0.25f);
    r[11] = min(x, 1.0f) - max(x, -1.0f);
    r[12] = erff(x * 0.1f);
    r[13] = erfinvf(erff(x * 0.1f));
    r[14] = normcdff(x);
    r[15] = __int_as_float(__float_as_int(x));
    r[16] = (float)__float2int_rn(x);
    r[17] = (float)__float2int_rz(x);
    r[18] = log2f(fabsf(x) + 1.0f);
    r[19] = sqrt(fabs(x) + 1.0f);  // the float overloads CUDA has
    r[20] = floorf(x) + ceilf(x) + truncf(x) + roundf(x);
    r[21] = fmaf(x, 2.0f, 1.0f);
    r[22] = sinpif(0.5f) + cospif(1.0f);
    r[23] = hypotf(x, 2.0f);
    unsigned int u = (unsigned int)(i * 2654435761u);
    unsigned int* b = bits + i * 8;
    b[0] = __popc(u);
    b[1] = __clz((int)u);
    b[2] = __ffs((int)u);
    b[3] = __brev(u);
    b[4] = __byte_perm(u, 0x01234567u, 0x5140);
    b[5] = (unsigned int)__mul24(i, -3);
    b[6] = __umulhi(u, 0x9e3779b9u);
    b[7] = (unsigned int)max(i, 7) + umin(u, 1000u);
}
