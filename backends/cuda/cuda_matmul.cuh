/*
 * cuda_matmul.cuh - what MATMUL's and MATMUL_ID's files share
 * (cuda_matmul.cu and cuda_matmul_id.cu are the ops; cuda_matmul_quant.cu
 * multiplies the quantized weights, and cuda_matmul_float.cu the F32, F16
 * and BF16 ones, for both).
 *
 * Every kernel comes in two instances: a plain MATMUL's (ID false), whose
 * tokens are the rows of x and y in order, and a MATMUL_ID's (ID true),
 * whose "tokens" are (token, slot) pairs, each meeting the matrix of the
 * expert its id names: the matrix-vector kernels take a pair per grid row,
 * the tiled ones a tile of one expert's pairs per grid row (the grouping of
 * cuda_matmul_id.cu), so that each expert's weights are read once per tile
 * of its tokens.
 */
#ifndef LOOM_CUDA_MATMUL_CUH
#define LOOM_CUDA_MATMUL_CUH

#include "cuda_backend.cuh"
#include "cuda_fusion.h"
#include "cuda_matmul_split.h"

/* The most tokens the tiled kernels (CUDA_MATMUL_TILE_TOKENS a tile) take:
 * a grid's y (the tiles along the tokens) holds at most 65535. */
#define CUDA_MATMUL_MAX_GRID_Y 65535
#define CUDA_MATMUL_MAX_TOKENS (CUDA_MATMUL_MAX_GRID_Y * CUDA_MATMUL_TILE_TOKENS)

/* One tile of a MATMUL_ID: up to CUDA_MATMUL_TILE_TOKENS pairs of one
 * expert, pairs[first .. first + count) of the grouping; count 0: none
 * (the grid has rows for as many tiles as there could be). */
struct cuda_matmul_tile {
	int expert, first, count;
};

/* A MATMUL_ID's routing, as the kernels take it. Pair p is token p / k's
 * slot p % k: it reads row x_per_slot ? p : p / k of x and writes row p of
 * y. */
struct cuda_matmul_route {
	const char *ids;   /* src2: k I32 expert ids a token */
	size_t ids_stride; /* bytes between two tokens' ids */
	int k, n_expert;
	size_t w_expert; /* bytes between two experts' matrices */
	bool x_per_slot;
	const char *bias; /* src3: a row of n_out per expert, or NULL */
	size_t bias_stride;
	/* The tiled kernels' grouping (cuda_matmul_id.cu), in work memory;
	 * NULL: the matrix-vector kernels, a pair per grid row. */
	const int32_t *pairs; /* pair indices, by expert */
	const cuda_matmul_tile *tiles;
	int n_tiles; /* grid rows: tiles there could be */
	int *bad_node;
	int node;
};

/* The shapes of a matmul, as the kernels take them. */
struct cuda_matmul_shape {
	const char *w;   /* weight rows (a MATMUL_ID's: expert 0's) */
	size_t w_stride; /* bytes between weight rows */
	int n_in;        /* elements of a row of w and of x */
	int n_out;       /* rows of w, elements of a row of y */
	int n_tokens;    /* rows of y: a MATMUL's tokens, a MATMUL_ID's pairs */
	cuda_rows x, y;
	cuda_matmul_route route; /* MATMUL_ID only */
};

static inline cuda_matmul_shape cuda_matmul_shape_of(const loom_node *node)
{
	const loom_tensor *w = node->src[0];
	cuda_matmul_shape s = {(const char *)w->data, w->nb[1], (int)w->ne[0], (int)w->ne[1],
			       (int)loom_tensor_nrows(node->dst), cuda_rows_of(node->src[1]), cuda_rows_of(node->dst), {}};
	return s;
}

/* Pair p's expert, or -1 after marking the node when the id is outside
 * [0, n_expert). */
static __device__ __forceinline__ int cuda_route_expert(const cuda_matmul_route &r, int p)
{
	int e = *(const int32_t *)(r.ids + (size_t)(p / r.k) * r.ids_stride + (size_t)(p % r.k) * sizeof(int32_t));
	if (e < 0 || e >= r.n_expert) {
		cuda_fail(r.bad_node, r.node);
		return -1;
	}
	return e;
}

/* The row of x that pair p reads. */
static __device__ __forceinline__ int cuda_route_x_row(const cuda_matmul_route &r, int p)
{
	return r.x_per_slot ? p : p / r.k;
}

/* The tile of a tiled kernel's grid row: a plain matmul's tokens
 * t0 = 64 blockIdx.y on, or a MATMUL_ID's tile. */
template <bool ID> static __device__ __forceinline__ cuda_matmul_tile cuda_matmul_tile_of(const cuda_matmul_shape &s)
{
	if (ID)
		return s.route.tiles[blockIdx.y];
	int t0 = (int)blockIdx.y * CUDA_MATMUL_TILE_TOKENS;
	cuda_matmul_tile t = {0, t0, min(CUDA_MATMUL_TILE_TOKENS, s.n_tokens - t0)};
	return t;
}

/* Slot i of tile t: the row of y it writes (its pair, or its token), -1
 * past the tile's last; *x_row gets the row of x it reads. */
template <bool ID>
static __device__ __forceinline__ int cuda_matmul_tile_row(const cuda_matmul_shape &s, const cuda_matmul_tile &t, int i,
							  int *x_row)
{
	if (i >= t.count)
		return *x_row = -1;
	int p = ID ? s.route.pairs[t.first + i] : t.first + i;
	*x_row = ID ? cuda_route_x_row(s.route, p) : p;
	return p;
}

/* The weight matrix of expert e (0 for a plain matmul), and its biases
 * (NULL: none). */
template <bool ID> static __device__ __forceinline__ const char *cuda_matmul_weights(const cuda_matmul_shape &s, int e)
{
	return ID ? s.w + (size_t)e * s.route.w_expert : s.w;
}

template <bool ID> static __device__ __forceinline__ const float *cuda_matmul_bias(const cuda_matmul_shape &s, int e)
{
	return ID && s.route.bias != nullptr ? (const float *)(s.route.bias + (size_t)e * s.route.bias_stride) : nullptr;
}

/* The end of a matrix-vector kernel, one warp per output row o: sums each
 * token's acc over the warp and stores it (plus its bias, if any) as
 * element o of rows first.. of y. */
template <int NT>
static __device__ __forceinline__ void cuda_matmul_vec_store(const cuda_matmul_shape &s, int o, float (&acc)[NT],
							     int first, const float *bias)
{
#pragma unroll
	for (int t = 0; t < NT; t++)
		acc[t] = cuda_warp_sum(acc[t]);
	if (threadIdx.x == 0)
#pragma unroll
		for (int t = 0; t < NT; t++)
			if (t < s.n_tokens)
				((float *)cuda_row(s.y, first + t))[o] = bias != nullptr ? acc[t] + bias[o] : acc[t];
}

/* Whether the weight type takes Q8_1 activations (cuda_matmul_quant). */
bool cuda_matmul_is_quant(loom_dtype type);

/* For supports(): a weight (matrix, or a MATMUL_ID's experts) of a type
 * and alignment the kernels take, its rows and columns counted in ints;
 * F32 rows whose strides are whole floats. */
bool cuda_matmul_weight_ok(const loom_tensor *w);
bool cuda_matmul_f32_strides_ok(const loom_tensor *t);

/* Enqueue the matmul: MATMUL's kernels, or with s->route.ids set
 * MATMUL_ID's. The quantized one first quantizes the x_rows rows of s->x
 * into work memory (x_rows * n_in / 32 Q8_1 blocks), unless an earlier
 * node of the step left them there (node_index: the node's place in
 * be->step; cuda_q8_1_reuse.h). */
loom_status cuda_matmul_quant(cuda_backend *be, loom_dtype type, const cuda_matmul_shape *s, int x_rows, void *work,
			      int node_index);
loom_status cuda_matmul_float(cuda_backend *be, loom_dtype type, const cuda_matmul_shape *s);

/* One token's products with matrices of one quantized type and one input,
 * one launch for them all (cuda_fusion.h): matrix m's rows of n_in
 * elements at w[m], w_stride[m] bytes apart, its n_out[m] results at y[m]. */
struct cuda_matmul_group {
	int n;
	const char *w[CUDA_FUSION_MAX_PRODUCTS];
	size_t w_stride[CUDA_FUSION_MAX_PRODUCTS];
	int n_out[CUDA_FUSION_MAX_PRODUCTS];
	float *y[CUDA_FUSION_MAX_PRODUCTS];
};

/* Enqueue nodes[0..n), MATMULs of one token, one quantized weight type
 * and one input (nodes[0] at first_index in the step): its Q8_1 rows
 * written first unless an earlier node left them. */
loom_status cuda_matmul_quant_group(cuda_backend *be, const loom_node *nodes, int n, void *work, int first_index);

#endif
