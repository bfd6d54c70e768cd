/* <stddef.h> for kernels built by NVRTC or hiprtc, which have no C library (gpu-mem's header of
 * this name): NULL (size_t and ptrdiff_t are built in). */
#pragma once
#ifndef NULL
#define NULL 0
#endif
