/*
 * cuda_moe.cu - a mixture of experts' routing and combining: TOPK (which
 * experts a token goes to), MOE_WEIGHTS (how much each counts) and MOE_SUM
 * (their outputs, weighted). MATMUL_ID, between them, is
 * cuda_matmul_id.cu. Semantics are in plugin_api.h; the arithmetic is the
 * CPU backend's (ops/cpu_moe.c), which is ggml's: TOPK exact, MOE_WEIGHTS
 * with f32 exponentials and double sums, MOE_SUM's products rounded before
 * they are added (__fmul_rn and __fadd_rn, which nvcc never fuses).
 *
 * TOPK and MOE_WEIGHTS take a thread block per row, as many threads as the
 * row has experts (whole warps, at most MOE_THREADS), the row's maximum
 * and sums reduced across the block; MOE_SUM a thread per element.
 */
#include "cuda_backend.cuh"

#include <cmath>

#define MOE_THREADS 256
#define MOE_WARPS (MOE_THREADS / 32)
/* Blocks step through the rows by the grid's size beyond this many. */
#define MOE_MAX_BLOCKS (1 << 20)
#define SUM_THREADS 256
#define SUM_MAX_GRID_Y 65535

/* Threads of a row's block: n rounded up to whole warps, at most
 * MOE_THREADS. */
static unsigned row_threads(int64_t n)
{
	int64_t t = (n + 31) / 32 * 32;
	return (unsigned)(t < MOE_THREADS ? t : MOE_THREADS);
}

static unsigned row_blocks(int64_t rows)
{
	return (unsigned)(rows < MOE_MAX_BLOCKS ? rows : MOE_MAX_BLOCKS);
}

static __device__ __forceinline__ float moe_max(float a, float b)
{
	return fmaxf(a, b);
}

static __device__ __forceinline__ unsigned long long moe_max(unsigned long long a, unsigned long long b)
{
	return a > b ? a : b;
}

/* The maximum of v over a block of n_warps whole warps, the same in every
 * thread (for floats, NaNs left out as the CPU's compares leave them).
 * partial holds one value per warp; it is free again when this returns. */
template <typename T> static __device__ T moe_block_max(T v, T *partial, int n_warps)
{
	for (int offset = 16; offset > 0; offset >>= 1)
		v = moe_max(v, __shfl_xor_sync(0xffffffffu, v, offset));
	if (threadIdx.x % 32 == 0)
		partial[threadIdx.x / 32] = v;
	__syncthreads();
	v = partial[0];
	for (int w = 1; w < n_warps; w++)
		v = moe_max(v, partial[w]);
	__syncthreads();
	return v;
}

/* ---- TOPK ----
 * k rounds of a block-wide maximum over keys that order the values as TOPK
 * does, each round among the keys below the last one picked: a key is the
 * value's order in its high half (larger values larger keys, zeros of
 * either sign equal, a NaN below every number) and the index's complement
 * in its low half (the lower index larger among equals), so keys are
 * distinct and every round picks one element not yet picked. */

static __device__ __forceinline__ unsigned long long topk_key(float v, int i)
{
	uint32_t u = __float_as_uint(v == 0.0f ? 0.0f : v);
	uint32_t order = v != v ? 0u : (u & 0x80000000u) ? ~u : u | 0x80000000u;
	return (unsigned long long)order << 32 | (uint32_t)~(uint32_t)i;
}

static __global__ void __launch_bounds__(MOE_THREADS) topk_kernel(cuda_rows x, cuda_rows y, int n, int k, int64_t rows)
{
	__shared__ unsigned long long partial[MOE_WARPS];
	const int n_warps = blockDim.x / 32;

	for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
		const float *xr = (const float *)cuda_row(x, r);
		int32_t *out = (int32_t *)cuda_row(y, r);
		unsigned long long last = ~0ull;
		for (int j = 0; j < k; j++) {
			unsigned long long best = 0;
			for (int i = threadIdx.x; i < n; i += blockDim.x) {
				unsigned long long key = topk_key(xr[i], i);
				if (key < last && key > best)
					best = key;
			}
			best = moe_block_max(best, partial, n_warps);
			if (threadIdx.x == 0)
				out[j] = (int32_t)~(uint32_t)best;
			last = best;
		}
	}
}

static bool topk_supports(const loom_node *node)
{
	return loom_topk_node_ok(node) && node->src[0]->ne[0] <= INT32_MAX;
}

static loom_status topk_run(cuda_backend *be, const loom_node *node, void *, int)
{
	const loom_tensor *x = node->src[0];
	int64_t rows = loom_tensor_nrows(x);

	topk_kernel<<<row_blocks(rows), row_threads(x->ne[0]), 0, be->stream>>>(
		cuda_rows_of(x), cuda_rows_of(node->dst), (int)x->ne[0], node->ip[0], rows);
	return cuda_launched(be, "topk");
}

const cuda_op cuda_op_topk = {topk_supports, NULL, topk_run};

/* ---- MOE_WEIGHTS ----
 * The gating writes each chosen expert's weight to dst; the thread that
 * wrote a weight is the one that renormalises and scales it, so no
 * barrier stands between but the sum's. */

static __global__ void __launch_bounds__(MOE_THREADS)
	moe_weights_kernel(cuda_rows logits, cuda_rows ids, cuda_rows dst, int n_expert, int k, int gating, bool norm,
			   float scale, int64_t rows, int *bad_node, int node)
{
	__shared__ float max_partial[MOE_WARPS];
	__shared__ double sum_partial[MOE_WARPS];
	const int n_warps = blockDim.x / 32;

	for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
		const float *x = (const float *)cuda_row(logits, r);
		const int32_t *id = (const int32_t *)cuda_row(ids, r);
		float *w = (float *)cuda_row(dst, r);
		bool bad = false;
		for (int j = threadIdx.x; j < k; j += blockDim.x)
			bad |= id[j] < 0 || id[j] >= n_expert;
		if (__syncthreads_or(bad)) {
			if (threadIdx.x == 0)
				cuda_fail(bad_node, node);
			continue;
		}
		if (gating == LOOM_GATING_SIGMOID) {
			for (int j = threadIdx.x; j < k; j += blockDim.x)
				w[j] = 1.0f / (1.0f + expf(-x[id[j]]));
		} else {
			/* ggml's softmax, of the whole row or of the chosen logits:
			 * exponentials against the maximum in f32, their sum in
			 * double, each times f32(1 / sum). */
			const bool all = gating == LOOM_GATING_SOFTMAX;
			const int m = all ? n_expert : k;
			float max = -INFINITY;
			for (int i = threadIdx.x; i < m; i += blockDim.x)
				max = fmaxf(max, x[all ? i : id[i]]);
			max = moe_block_max(max, max_partial, n_warps);
			double sum = 0.0;
			for (int i = threadIdx.x; i < m; i += blockDim.x)
				sum += (double)expf(x[all ? i : id[i]] - max);
			const float inv = (float)(1.0 / cuda_block_sum(sum, sum_partial, n_warps));
			for (int j = threadIdx.x; j < k; j += blockDim.x)
				w[j] = expf(x[id[j]] - max) * inv;
		}
		if (norm) {
			double sum = 0.0;
			for (int j = threadIdx.x; j < k; j += blockDim.x)
				sum += (double)w[j];
			const float total = (float)cuda_block_sum(sum, sum_partial, n_warps);
			for (int j = threadIdx.x; j < k; j += blockDim.x)
				w[j] /= total;
		}
		if (scale != 1.0f)
			for (int j = threadIdx.x; j < k; j += blockDim.x)
				w[j] *= scale;
	}
}

static bool moe_weights_supports(const loom_node *node)
{
	return loom_moe_weights_node_ok(node) && node->src[0]->ne[0] <= INT32_MAX;
}

static loom_status moe_weights_run(cuda_backend *be, const loom_node *node, void *, int node_index)
{
	const loom_tensor *logits = node->src[0], *w = node->dst;
	int64_t rows = loom_tensor_nrows(w);

	moe_weights_kernel<<<row_blocks(rows), row_threads(logits->ne[0]), 0, be->stream>>>(
		cuda_rows_of(logits), cuda_rows_of(node->src[1]), cuda_rows_of(w), (int)logits->ne[0], (int)w->ne[0],
		node->ip[0], node->ip[1] != 0, node->fp[0], rows, be->bad_node, node_index);
	return cuda_launched(be, "moe_weights");
}

const cuda_op cuda_op_moe_weights = {moe_weights_supports, NULL, moe_weights_run};

/* ---- MOE_SUM ----
 * The grid's x covers a row's elements and its y the tokens, stepping by
 * gridDim.y past the 65535 a grid's y may hold. Slot j of token t is row
 * t * k + j of the experts' outputs. */

static __global__ void moe_sum_kernel(cuda_rows y, cuda_rows weights, cuda_rows dst, int64_t n, int k,
				      int64_t n_tokens)
{
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	for (int64_t t = blockIdx.y; t < n_tokens; t += gridDim.y) {
		const float *wt = (const float *)cuda_row(weights, t);
		float acc = __fmul_rn(wt[0], ((const float *)cuda_row(y, t * k))[i]);
		for (int j = 1; j < k; j++)
			acc = __fadd_rn(acc, __fmul_rn(wt[j], ((const float *)cuda_row(y, t * k + j))[i]));
		((float *)cuda_row(dst, t))[i] = acc;
	}
}

static bool moe_sum_supports(const loom_node *node)
{
	return loom_moe_sum_node_ok(node) && node->src[0]->ne[1] <= INT32_MAX;
}

static loom_status moe_sum_run(cuda_backend *be, const loom_node *node, void *, int)
{
	const loom_tensor *y = node->src[0], *dst = node->dst;
	int64_t n = y->ne[0], n_tokens = y->ne[2];
	dim3 grid((unsigned)((n + SUM_THREADS - 1) / SUM_THREADS),
		  (unsigned)(n_tokens < SUM_MAX_GRID_Y ? n_tokens : SUM_MAX_GRID_Y));

	moe_sum_kernel<<<grid, SUM_THREADS, 0, be->stream>>>(cuda_rows_of(y), cuda_rows_of(node->src[1]),
							     cuda_rows_of(dst), n, (int)y->ne[1], n_tokens);
	return cuda_launched(be, "moe_sum");
}

const cuda_op cuda_op_moe_sum = {moe_sum_supports, NULL, moe_sum_run};
