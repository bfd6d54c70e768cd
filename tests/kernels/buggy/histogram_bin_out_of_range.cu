// A histogram of values 0..16 into 16 bins: the value 16 lands one bin past the end.
// kernel: histogram
// launch: 1 128
// args: i32[128]=iota17 i32[16]=0
// expect: memcheck: invalid global atomic of 4 bytes, just past the 16 bins, by thread 16
__global__ void histogram(const int* values, int* bins) {
    atomicAdd(&bins[values[threadIdx.x]], 1);
}
