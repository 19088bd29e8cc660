/*
 * cuda_quantize_q8_1.cuh - F32 activations to Q8_1 blocks, the other side of
 * every quantized MATMUL's integer dot products (cuda_vecdot.cuh).
 */
#ifndef LOOM_CUDA_QUANTIZE_Q8_1_CUH
#define LOOM_CUDA_QUANTIZE_Q8_1_CUH

#include "cuda_backend.cuh"
#include "cuda_blocks.cuh"

/* Enqueues on stream the quantization of rows 0..n_rows-1 of x, n
 * elements each (a multiple of 32), to out: row r's blocks at
 * out + r * (n / 32). The caller checks the launch (cuda_launched). */
void cuda_quantize_q8_1(cudaStream_t stream, cuda_rows x, int64_t n, int64_t n_rows, cuda_block_q8_1 *out);

#endif
