/* <math.h> for kernels built by NVRTC or hiprtc, which have no C library: their math functions
 * are built in (gpu-mem's header of this name). */
#pragma once
