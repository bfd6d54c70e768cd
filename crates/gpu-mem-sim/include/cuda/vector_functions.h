/* vector_functions.h for gpu-mem's simulator: what CUDA's header gives device code is in gpu_mem.h and
 * gm_sim/device.h, which every kernel the simulator builds includes first. */
#pragma once
#include "gpu_mem.h"
