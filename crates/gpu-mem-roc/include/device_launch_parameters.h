/* <device_launch_parameters.h> for kernels built by hiprtc (gpu-mem's header of this name): HIP has the device code's
 * vocabulary built in, and gpu_mem.h, put in front of every kernel, bridges CUDA's names. */
#pragma once
#include "gpu_mem.h"
