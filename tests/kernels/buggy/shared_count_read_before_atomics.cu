// A block counts matching values with atomicAdd on a shared counter, then thread 0 reads the
// counter with no barrier after the atomics: the other threads' atomics may not be done.
// kernel: count_matches
// launch: 1 64
// args: i32[64]=iota2 i32[1]=0
// expect: racecheck: shared-memory hazard between thread 0's read and another thread's atomic
__global__ void count_matches(const int* values, int* count) {
    __shared__ int matches;
    if (threadIdx.x == 0) matches = 0;
    __syncthreads();
    if (values[threadIdx.x] == 1) atomicAdd(&matches, 1);
    if (threadIdx.x == 0) count[0] = matches;
}
