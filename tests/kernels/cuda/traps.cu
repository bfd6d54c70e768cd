// What ends a thread: a failed assert, __trap and exit() (on a GPU they stop the kernel; on the
// simulator they are faults naming the line, and the program goes on).
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>

__global__ void checked(const int* values, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        assert(values[i] >= 0);
    }
}

__global__ void leaves(int code) {
    if (threadIdx.x == 3) {
        printf("thread %d leaves with %d\n", threadIdx.x, code);
        exit(code);
    }
}
