/*
 * cuda_quantize_q8_1.cu - F32 rows to Q8_1 blocks, one warp per block of 32:
 * lane j takes element j (cuda_q8_1_from_warp, which the ops that write
 * a product's activations as Q8_1 themselves share).
 */
#include "cuda_quantize_q8_1.cuh"

#define QUANTIZE_WARPS 8

static __global__ void __launch_bounds__(32 * QUANTIZE_WARPS)
	quantize_q8_1_kernel(cuda_rows x, int64_t blocks_per_row, int64_t n_blocks, cuda_block_q8_1 *out)
{
	int64_t blk = (int64_t)blockIdx.x * QUANTIZE_WARPS + threadIdx.y;
	if (blk >= n_blocks)
		return;
	int lane = threadIdx.x;
	int64_t row = blk / blocks_per_row, col = blk % blocks_per_row;
	cuda_q8_1_from_warp(((const float *)cuda_row(x, row))[col * CUDA_QK + lane], out + blk);
}

void cuda_quantize_q8_1(cudaStream_t stream, cuda_rows x, int64_t n, int64_t n_rows, cuda_block_q8_1 *out)
{
	int64_t blocks_per_row = n / CUDA_QK, n_blocks = blocks_per_row * n_rows;
	dim3 block(32, QUANTIZE_WARPS);
	dim3 grid((unsigned)((n_blocks + QUANTIZE_WARPS - 1) / QUANTIZE_WARPS));
	quantize_q8_1_kernel<<<grid, block, 0, stream>>>(x, blocks_per_row, n_blocks, out);
}
