/*
 * cuda_matmul_split.h - when a quantized MATMUL's tiles are cut along the
 * rows' length, and the work memory that takes.
 *
 * A plain MATMUL of quantized weights over more than
 * CUDA_MATMUL_VEC_TOKENS tokens runs as tiles of CUDA_MMA_ROWS outputs by
 * CUDA_MATMUL_TILE_TOKENS tokens (cuda_mma_tile.cuh). Where they would be fewer
 * than CUDA_MATMUL_MIN_BLOCKS thread blocks (a few sequences' decode: a
 * GPU's hundred-odd multiprocessors mostly idle), the rows' length is cut
 * into up to CUDA_MATMUL_MAX_SPLITS parts of at least
 * CUDA_MATMUL_MIN_PART_STEPS staged steps of CUDA_MMA_K elements, a block
 * each; their sums go to work memory after the Q8_1 rows, and a second
 * kernel adds them in part order.
 *
 * The work a product reserves covers every step of the context up to its
 * token count: a smaller step may split where the largest does not.
 *
 * Plain C, with no CUDA in it, so that the host tests check it.
 */
#ifndef LOOM_CUDA_MATMUL_SPLIT_H
#define LOOM_CUDA_MATMUL_SPLIT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Up to this many tokens a matmul runs as matrix-vector products (one warp
 * per output row, each weight read once for all the tokens); more take the
 * tiled kernels. */
#define CUDA_MATMUL_VEC_TOKENS 8

/* The tiles: outputs and tokens of one, and elements staged at a time. */
#define CUDA_MMA_ROWS 128
#define CUDA_MATMUL_TILE_TOKENS 64
#define CUDA_MMA_K 128

#define CUDA_MATMUL_MIN_BLOCKS 128
#define CUDA_MATMUL_MAX_SPLITS 8
#define CUDA_MATMUL_MIN_PART_STEPS 4

/* The parts of a product of n_tokens activations of n_in by n_out rows; 1:
 * none. */
int cuda_matmul_splits(int n_out, int n_tokens, int n_in);

/* Bytes of the Q8_1 rows of n_tokens activations of n_in (36 bytes per 32
 * elements), and where a split product's part sums start after them. */
size_t cuda_matmul_q8_1_bytes(int n_tokens, int n_in);
size_t cuda_matmul_split_offset(int n_tokens, int n_in);

/* The work memory a quantized product of up to n_tokens tokens needs: its
 * Q8_1 rows, and the part sums of the largest split any step of 1 ..
 * n_tokens tokens takes. */
size_t cuda_matmul_quant_work(int n_out, int n_tokens, int n_in);

#ifdef __cplusplus
}
#endif

#endif
