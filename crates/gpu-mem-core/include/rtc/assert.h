/* <assert.h> for kernels built by NVRTC or hiprtc (gpu-mem's header of this name): assert on
 * the device's own assertion call, which stops the kernel with the expression and line. */
#undef assert
#if defined(NDEBUG)
#define assert(e) ((void)0)
#elif defined(__CUDACC_RTC__)
/* NVRTC declares __assertfail itself. */
#define assert(e) ((e) ? (void)0 : __assertfail(#e, __FILE__, __LINE__, __func__, sizeof(char)))
#else
extern "C" __device__ void __assert_fail(const char* assertion, const char* file, unsigned int line,
                                         const char* function);
#define assert(e) ((e) ? (void)0 : __assert_fail(#e, __FILE__, __LINE__, __func__))
#endif
