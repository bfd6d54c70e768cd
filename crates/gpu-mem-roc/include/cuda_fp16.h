/* <cuda_fp16.h> for kernels built by hiprtc (gpu-mem's header of this name): hiprtc has HIP's
 * half precision built in, with CUDA's names (__half, half2, __float2half, __hfma2, ...). */
#pragma once
#include "gpu_mem.h"
