// A tiled matrix product whose loop lost its second barrier: the next tile is loaded while
// other threads still read the current one.
// kernel: matmul
// launch: 2x2 16x16
// args: f32[1024]=1 f32[1024]=1 f32[1024]=0 i32=32
// expect: racecheck: shared-memory hazard between threads of a block (write after read)
#define TILE 16
__global__ void matmul(const float* a, const float* b, float* c, int n) {
    __shared__ float ta[TILE][TILE];
    __shared__ float tb[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float sum = 0.0f;
    for (int k = 0; k < n; k += TILE) {
        ta[threadIdx.y][threadIdx.x] = a[row * n + k + threadIdx.x];
        tb[threadIdx.y][threadIdx.x] = b[(k + threadIdx.y) * n + col];
        __syncthreads();
        for (int j = 0; j < TILE; ++j) sum += ta[threadIdx.y][j] * tb[j][threadIdx.x];
    }
    c[row * n + col] = sum;
}
