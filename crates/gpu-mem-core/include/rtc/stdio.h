/* <stdio.h> for kernels built by NVRTC or hiprtc, which have no C library: printf, malloc, free,
 * memcpy and memset are built in (gpu-mem's header of this name). */
#pragma once
#include <stddef.h>
