// Cooperative groups as the CUDA samples use them: the block, 32-thread tiles with shuffles,
// ballots and cg::reduce, and the tile's place in the block.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

__global__ void group_sums(const int* in, int* block_sums, int* tile_info) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> tile = cg::tiled_partition<32>(block);
    __shared__ int partial[32];
    int v = in[blockIdx.x * blockDim.x + block.thread_rank()];
    int by_shuffles = v;
    for (int offset = tile.size() / 2; offset > 0; offset /= 2) {
        by_shuffles += tile.shfl_down(by_shuffles, offset);
    }
    int by_reduce = cg::reduce(tile, v, cg::plus<int>());
    unsigned int odd = tile.ballot(v & 1);
    int votes = tile.any(v > 1000) + 2 * tile.all(v >= 0);
    if (tile.thread_rank() == 0) {
        partial[tile.meta_group_rank()] = by_shuffles;
        int* info = tile_info + (blockIdx.x * tile.meta_group_size() + tile.meta_group_rank()) * 3;
        info[0] = by_reduce;
        info[1] = (int)odd;
        info[2] = votes;
    }
    block.sync();
    if (block.thread_rank() == 0) {
        int sum = 0;
        for (unsigned int t = 0; t < tile.meta_group_size(); ++t) sum += partial[t];
        block_sums[blockIdx.x] = sum;
    }
    cg::sync(block);
}
