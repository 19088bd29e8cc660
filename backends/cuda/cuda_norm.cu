/*
 * cuda_norm.cu - RMS_NORM and LAYER_NORM: one thread block per row, the
 * row's sums reduced across the block.
 *
 * As on the CPU (and in ggml), each square is rounded to f32 and the sums
 * are kept in double, the mean and variance rounded to f32, and the weight
 * and bias applied as separate f32 operations (no fused multiply-add), so
 * only the order of the double additions differs from the CPU's.
 *
 * Every thread reads its elements for the sums before the block's barrier
 * and writes only those same elements after it, so dst may alias src0.
 *
 * An RMS_NORM whose result the next node multiplies by quantized weights
 * writes it as Q8_1 too (cuda_q8_1_reuse.h): a warp's lanes hold 32
 * consecutive elements of a row, one Q8_1 block. One that normalizes the
 * sum an ADD just made computes that sum itself (cuda_fusion.h).
 */
#include "cuda_backend.cuh"
#include "cuda_quantize_q8_1.cuh"

#define NORM_THREADS 256
#define NORM_WARPS (NORM_THREADS / 32)
/* Blocks step through the rows by the grid's size beyond this many. */
#define NORM_MAX_BLOCKS (1 << 20)

static unsigned norm_blocks(int64_t nrows)
{
	return (unsigned)(nrows < NORM_MAX_BLOCKS ? nrows : NORM_MAX_BLOCKS);
}

/* A weight or bias: ne[0] F32 elements broadcast over the rows. */
static bool is_row_param(const loom_tensor *p, int64_t n)
{
	return p == NULL || (loom_tensor_is(p, LOOM_DTYPE_F32) && loom_tensor_is_vector(p) && p->ne[0] == n);
}

static bool norm_supports(const loom_node *node)
{
	const loom_tensor *x = node->src[0], *y = node->dst;

	return loom_tensor_is(x, LOOM_DTYPE_F32) && loom_tensor_is(y, LOOM_DTYPE_F32) && loom_tensor_same_shape(x, y) &&
	       is_row_param(node->src[1], x->ne[0]);
}

/* ---- RMS_NORM ---- */

static_assert(NORM_THREADS % 32 == 0, "a warp's 32 elements a Q8_1 block");

/* q8: NULL, or where row r's Q8_1 blocks go (n a multiple of 32). With
 * SUM, row r of x is first written as row r of a plus row r of b (an ADD
 * before the norm, cuda_fusion.h): each thread reads back only what it
 * wrote. */
template <bool SUM>
static __global__ void rms_norm_kernel(cuda_rows y, cuda_rows x, cuda_rows a, cuda_rows b, const float *w, int64_t n,
				       int64_t nrows, float eps, cuda_block_q8_1 *q8)
{
	__shared__ double partial[NORM_WARPS];

	for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
		float *xr = (float *)cuda_row(x, r);
		float *yr = (float *)cuda_row(y, r);
		double sum = 0.0;
		for (int64_t i = threadIdx.x; i < n; i += NORM_THREADS) {
			float v = xr[i];
			if (SUM) {
				v = ((const float *)cuda_row(a, r))[i] + ((const float *)cuda_row(b, r))[i];
				xr[i] = v;
			}
			sum += (double)(v * v);
		}
		float mean = (float)(cuda_block_sum(sum, partial, NORM_WARPS) / (double)n);
		float scale = 1.0f / sqrtf(mean + eps);
		for (int64_t i = threadIdx.x; i < n; i += NORM_THREADS) {
			float v = w != NULL ? (xr[i] * scale) * w[i] : xr[i] * scale;
			yr[i] = v;
			if (q8 != NULL)
				cuda_q8_1_from_warp(v, q8 + (r * n + i) / CUDA_QK);
		}
	}
}

static loom_status rms_norm_run(cuda_backend *be, const loom_node *node, void *, int node_index)
{
	const loom_tensor *x = node->src[0], *w = node->src[1], *y = node->dst;
	int64_t nrows = loom_tensor_nrows(x);

	rms_norm_kernel<false><<<norm_blocks(nrows), NORM_THREADS, 0, be->stream>>>(
		cuda_rows_of(y), cuda_rows_of(x), cuda_rows_of(x), cuda_rows_of(x),
		w != NULL ? (const float *)w->data : NULL, x->ne[0], nrows, node->fp[0],
		cuda_q8_1_fused_out(be, node_index));
	return cuda_launched(be, "rms_norm");
}

loom_status cuda_add_rms_norm_run(cuda_backend *be, const loom_node *add, const loom_node *norm, int norm_index)
{
	const loom_tensor *x = add->dst, *w = norm->src[1], *y = norm->dst;
	int64_t nrows = loom_tensor_nrows(x);

	rms_norm_kernel<true><<<norm_blocks(nrows), NORM_THREADS, 0, be->stream>>>(
		cuda_rows_of(y), cuda_rows_of(x), cuda_rows_of(add->src[0]), cuda_rows_of(add->src[1]),
		w != NULL ? (const float *)w->data : NULL, x->ne[0], nrows, norm->fp[0],
		cuda_q8_1_fused_out(be, norm_index));
	return cuda_launched(be, "add and rms_norm");
}

const cuda_op cuda_op_rms_norm = {norm_supports, NULL, rms_norm_run};

/* ---- LAYER_NORM ---- */

static bool layer_norm_supports(const loom_node *node)
{
	return norm_supports(node) && is_row_param(node->src[2], node->src[0]->ne[0]);
}

static __global__ void layer_norm_kernel(cuda_rows y, cuda_rows x, const float *w, const float *b, int64_t n,
					 int64_t nrows, float eps)
{
	__shared__ double partial[NORM_WARPS];

	for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
		const float *xr = (const float *)cuda_row(x, r);
		float *yr = (float *)cuda_row(y, r);
		double sum = 0.0, sum2 = 0.0;
		for (int64_t i = threadIdx.x; i < n; i += NORM_THREADS)
			sum += xr[i];
		float mean = (float)(cuda_block_sum(sum, partial, NORM_WARPS) / (double)n);
		for (int64_t i = threadIdx.x; i < n; i += NORM_THREADS) {
			float v = xr[i] - mean;
			sum2 += (double)(v * v);
		}
		float scale = 1.0f / sqrtf((float)(cuda_block_sum(sum2, partial, NORM_WARPS) / (double)n) + eps);
		for (int64_t i = threadIdx.x; i < n; i += NORM_THREADS) {
			float v = __fmul_rn(xr[i] - mean, scale);
			if (w != NULL)
				v = __fmul_rn(v, w[i]);
			if (b != NULL)
				v = __fadd_rn(v, b[i]);
			yr[i] = v;
		}
	}
}

static loom_status layer_norm_run(cuda_backend *be, const loom_node *node, void *, int)
{
	const loom_tensor *x = node->src[0], *w = node->src[1], *b = node->src[2], *y = node->dst;
	int64_t nrows = loom_tensor_nrows(x);

	layer_norm_kernel<<<norm_blocks(nrows), NORM_THREADS, 0, be->stream>>>(
		cuda_rows_of(y), cuda_rows_of(x), w != NULL ? (const float *)w->data : NULL,
		b != NULL ? (const float *)b->data : NULL, x->ne[0], nrows, node->fp[0]);
	return cuda_launched(be, "layer_norm");
}

const cuda_op cuda_op_layer_norm = {layer_norm_supports, NULL, layer_norm_run};
