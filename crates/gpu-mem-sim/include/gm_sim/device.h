/*
 * gm_sim/device.h — CUDA's device vocabulary beyond gpu_mem.h's own, for the simulator's host
 * compiler (included by gpu_mem.h's host branch, before the stackless section).
 */
#ifndef GM_SIM_DEVICE_H
#define GM_SIM_DEVICE_H

#include "gm_sim/math.h"
#include "gm_sim/vector_types.h"
#include "gm_sim/intrinsics.h"
#include "gm_sim/output.h"
#include "gm_sim/dynamic_shared.h"

#endif /* GM_SIM_DEVICE_H */
