/*
 * cuda_matmul.cuh - what MATMUL's files share (cuda_matmul.cu is the op;
 * cuda_matmul_quant.cu multiplies the quantized weights, and
 * cuda_matmul_float.cu the F32, F16 and BF16 ones).
 */
#ifndef LOOM_CUDA_MATMUL_CUH
#define LOOM_CUDA_MATMUL_CUH

#include "cuda_backend.cuh"

/* Up to this many tokens a matmul runs as matrix-vector products (one warp
 * per output row, each weight read once for all the tokens); more take the
 * tiled kernels. */
#define CUDA_MATMUL_VEC_TOKENS 8

/* Tokens of a tile of the tiled kernels, and the most tokens they take:
 * a grid's y (the tiles along the tokens) holds at most 65535. */
#define CUDA_MATMUL_TILE_TOKENS 64
#define CUDA_MATMUL_MAX_TOKENS (65535 * CUDA_MATMUL_TILE_TOKENS)

/* The shapes of a matmul, as the kernels take them. */
struct cuda_matmul_shape {
	const char *w;   /* weight rows */
	size_t w_stride; /* bytes between weight rows */
	int n_in;        /* elements of a row of w and of x */
	int n_out;       /* rows of w, elements of a row of y */
	int n_tokens;    /* rows of x and of y */
	cuda_rows x, y;
};

static inline cuda_matmul_shape cuda_matmul_shape_of(const loom_node *node)
{
	const loom_tensor *w = node->src[0];
	cuda_matmul_shape s = {(const char *)w->data, w->nb[1], (int)w->ne[0], (int)w->ne[1],
			       (int)loom_tensor_nrows(node->src[1]), cuda_rows_of(node->src[1]), cuda_rows_of(node->dst)};
	return s;
}

/* The end of a matrix-vector kernel, one warp per output row o: sums each
 * token's acc over the warp and stores it as element o of the token's row
 * of y. */
template <int NT>
static __device__ __forceinline__ void cuda_matmul_vec_store(const cuda_matmul_shape &s, int o, float (&acc)[NT])
{
#pragma unroll
	for (int t = 0; t < NT; t++)
		acc[t] = cuda_warp_sum(acc[t]);
	if (threadIdx.x == 0)
#pragma unroll
		for (int t = 0; t < NT; t++)
			if (t < s.n_tokens)
				((float *)cuda_row(s.y, t))[o] = acc[t];
}

/* Whether the weight type takes Q8_1 activations (cuda_matmul_quant). */
bool cuda_matmul_is_quant(loom_dtype type);

/* Enqueue the matmul; the quantized one needs n_tokens * n_in / 32 Q8_1
 * blocks of work memory. */
loom_status cuda_matmul_quant(cuda_backend *be, loom_dtype type, const cuda_matmul_shape *s, void *work);
loom_status cuda_matmul_float(cuda_backend *be, loom_dtype type, const cuda_matmul_shape *s);

#endif
