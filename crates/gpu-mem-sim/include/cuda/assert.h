/* assert.h for gpu-mem's simulator: a failed assertion in a kernel is a fault naming the
 * expression and line that ends the thread (as on a GPU), never the end of the process. Like
 * the C header, it may be included again, and follows NDEBUG at each inclusion. */
#undef assert
#if defined(NDEBUG)
#define assert(expression) ((void)0)
#else
void gm_sim_assert_fail(const char* expression, const char* file, int line, const char* function);
#define assert(expression)                                                                    \
    ((expression) ? (void)0                                                                   \
                  : gm_sim_assert_fail(#expression, __FILE__, __LINE__, __PRETTY_FUNCTION__))
#endif
