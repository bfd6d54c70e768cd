// __constant__ and __device__ variables shared by the kernels of one source, written and read
// from the host by name.
__constant__ float coefficients[4];
__device__ unsigned int launches;
__device__ int totals[2] = {10, 20};

__global__ void polynomial(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = coefficients[0] + v * (coefficients[1] + v * (coefficients[2] + v * coefficients[3]));
    }
    if (i == 0) atomicAdd(&launches, 1u);
}

__global__ void count_again(unsigned int* seen) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        *seen = launches;
        atomicAdd(&launches, 1u);
        totals[1] += totals[0];
    }
}
