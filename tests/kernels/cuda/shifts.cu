// Shifts by the operand's width or more, undefined in C++, which GPUs answer by clamping the
// count (PTX's shl/shr): kernels rely on it (`1 << lane` past 31, `(1 << bits) - 1` with 32
// bits). One thread per count.
__global__ void shifts(const int* counts, int n, unsigned int* left32, unsigned int* right32,
                       int* arithmetic32, unsigned long long* left64, unsigned int* compound) {
    const int i = threadIdx.x;
    if (i < n) {
        const int c = counts[i];
        left32[i] = 0x80000001u << c;
        right32[i] = 0x80000001u >> c;
        arithmetic32[i] = -5 >> c;
        left64[i] = 0x8000000000000001ull << c;
        unsigned int v = 3u;
        v <<= c;
        compound[i] = v | ((1u << c) - 1u);
    }
}
