/* <time.h> for kernels built by NVRTC or hiprtc, which have no C library: device code has only
 * clock() and clock64(), built in; the include that host code in the same file needs is
 * accepted (gpu-mem's header of this name). */
#pragma once
