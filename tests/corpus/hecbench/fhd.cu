// SPDX-License-Identifier: BSD-3-Clause (HeCBench, LICENSE beside this file); origin: https://github.com/zjin-lcf/HeCBench/blob/f27000a5188f8ac79bd43fc95a1b3f890c18823d/src/fhd-cuda/main.cu
// Device code of HeCBench's fhd: the __constant__ array k of kdata records and the kernel cmpfhd,
// verbatim, with the CHUNK_S define and the kdata typedef of the same file. The host code and the
// host-only includes (<stdio.h>, <stdlib.h>, <math.h>, <chrono>, <cuda.h>) are left out.

// <math.h>'s M_PI, which the original gets from <math.h> (NVRTC has no <math.h>).
#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

// from src/fhd-cuda/main.cu (verbatim)
#define CHUNK_S 4096

typedef struct {
  float x, y, z;
} kdata;

__constant__ kdata k[CHUNK_S];

__global__
void cmpfhd(const float*__restrict__ rmu, 
            const float*__restrict__ imu,
                  float*__restrict__ rfhd,
                  float*__restrict__ ifhd,
            const float*__restrict__ x, 
            const float*__restrict__ y,
            const float*__restrict__ z,
            const int samples,
            const int voxels) 
{
  int n = blockIdx.x * blockDim.x + threadIdx.x;

  if (n < samples) {
    float xn = x[n], yn = y[n], zn = z[n];
    float rfhdn = rfhd[n], ifhdn = ifhd[n];
    for (int m = 0; m < voxels; m++) {
      float e = 2.f * (float)M_PI * (k[m].x * xn + k[m].y * yn + k[m].z * zn);
      float c = __cosf(e);
      float s = __sinf(e);
      rfhdn += rmu[m] * c - imu[m] * s;
      ifhdn += imu[m] * c + rmu[m] * s;
    }
    rfhd[n] = rfhdn, ifhd[n] = ifhdn;
  }
}
