/* cuda_matmul_split.c - when a quantized MATMUL splits its rows' length
 * (cuda_matmul_split.h). */
#include "cuda_matmul_split.h"

#define Q8_1_BLOCK_BYTES 36

int cuda_matmul_splits(int n_out, int n_tokens, int n_in)
{
	if (n_tokens <= CUDA_MATMUL_VEC_TOKENS)
		return 1;
	long row_tiles = (n_out + CUDA_MMA_ROWS - 1) / CUDA_MMA_ROWS;
	long tiles = row_tiles * ((n_tokens + CUDA_MATMUL_TILE_TOKENS - 1) / CUDA_MATMUL_TILE_TOKENS);
	if (tiles >= CUDA_MATMUL_MIN_BLOCKS)
		return 1;
	long parts = (CUDA_MATMUL_MIN_BLOCKS + tiles - 1) / tiles;
	long most = n_in / (CUDA_MATMUL_MIN_PART_STEPS * CUDA_MMA_K);
	parts = parts < most ? parts : most;
	parts = parts < CUDA_MATMUL_MAX_SPLITS ? parts : CUDA_MATMUL_MAX_SPLITS;
	return parts > 1 ? (int)parts : 1;
}

size_t cuda_matmul_q8_1_bytes(int n_tokens, int n_in)
{
	return (size_t)n_tokens * (size_t)(n_in / 32) * Q8_1_BLOCK_BYTES;
}

size_t cuda_matmul_split_offset(int n_tokens, int n_in)
{
	return (cuda_matmul_q8_1_bytes(n_tokens, n_in) + 255) / 256 * 256;
}

/* Within a count of token tiles the parts are the same, so the need is
 * largest at the count's last token: only those are looked at, while
 * the tiles are few enough to split. */
size_t cuda_matmul_quant_work(int n_out, int n_tokens, int n_in)
{
	size_t most = cuda_matmul_q8_1_bytes(n_tokens, n_in);
	for (int tt = 1; (long)(tt - 1) * CUDA_MATMUL_TILE_TOKENS < n_tokens; tt++) {
		int t = tt * CUDA_MATMUL_TILE_TOKENS < n_tokens ? tt * CUDA_MATMUL_TILE_TOKENS : n_tokens;
		int parts = cuda_matmul_splits(n_out, t, n_in);
		if (parts == 1 && t > CUDA_MATMUL_VEC_TOKENS)
			break;
		size_t need = cuda_matmul_split_offset(t, n_in) + (size_t)parts * (size_t)t * (size_t)n_out * sizeof(float);
		if (parts > 1 && need > most)
			most = need;
	}
	return most;
}
