// What ends a thread: a failed assert and __trap (on a GPU they stop the kernel; on the
// simulator they are faults naming the line, and the program goes on).
#include <assert.h>
#include <stdio.h>

__global__ void checked(const int* values, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        assert(values[i] >= 0);
    }
}

__global__ void trapped(int when) {
    if (threadIdx.x == when) {
        printf("thread %d traps\n", (int)threadIdx.x);
        __trap();
    }
}
