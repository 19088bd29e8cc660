/*
 * cuda_mma_tile.cuh - the pieces of the tensor-core tile kernel for
 * quantized weights (cuda_matmul_quant.cu): a thread block computes
 * CUDA_MMA_ROWS outputs by CUDA_MATMUL_TILE_TOKENS tokens, staging CUDA_MMA_K elements of the
 * weight rows (as int8 quants with scales, cuda_unpack_int8.cuh) and of
 * the tokens' Q8_1 activations in shared memory at a time; each of its 8
 * warps multiplies 32 rows by 32 tokens of them with int8 mma.sync, one
 * scale group (16 or 32 elements, the weight type's) per product, and adds
 * each group's integer sums into float accumulators times the weight and
 * activation scales.
 *
 * The pieces are written a thread (staging) or a lane (fragments, the
 * scaling, the store) at a time, apart from the mma itself, so that a test
 * can run them on the host with the warp's product emulated
 * (tests/cuda/test_cuda_mma_tile.cpp).
 *
 * Fragments follow the PTX ISA's layouts for mma.m16n8k32 and m16n8k16
 * with .s8 operands: lane 4g + t holds, of the 16 x K weight tile (A, row
 * major), rows g and g + 8 at ints t (and t + 4 for k32) of the row; of the
 * K x 8 activation tile (B, column major), token g at ints t (and t + 4);
 * of the 16 x 8 result, rows g and g + 8 by tokens 2t and 2t + 1.
 *
 * The products start from MMA_FLOAT_BIAS instead of 0: an int32 sum s
 * with |s| < 2^22 added to the bits of 1.5 * 2^23 reads, as a float,
 * exactly 1.5 * 2^23 + s, so a subtraction turns it into a float (the
 * integer conversion is a quarter of the float adds' rate). A group's sum
 * is at most 32 * 128 * 128 = 2^19 in size.
 */
#ifndef LOOM_CUDA_MMA_TILE_CUH
#define LOOM_CUDA_MMA_TILE_CUH

#include "cuda_matmul_split.h"
#include "cuda_unpack_int8.cuh"

#define MMA_THREADS 256
#define MMA_SUBS (CUDA_MMA_K / CUDA_QK)
/* Ints of a staged row of quants: 4 more than its CUDA_MMA_K / 4, so that the
 * 8 rows by 4 ints a fragment load takes fall in 32 different banks. */
#define MMA_ROW_INTS (CUDA_MMA_K / 4 + 4)
#define MMA_WARP_ROWS 32
#define MMA_WARP_TOKENS 32
#define MMA_FLOAT_BIAS 0x4B400000
#define MMA_FLOAT_BIAS_VALUE 12582912.0f

static_assert(MMA_THREADS / 32 == (CUDA_MMA_ROWS / MMA_WARP_ROWS) * (CUDA_MATMUL_TILE_TOKENS / MMA_WARP_TOKENS),
	      "a warp a sub-tile");

/* The first row and the first token of warp `warp`'s sub-tile. */
static __device__ __forceinline__ int mma_warp_row(int warp)
{
	return (warp % (CUDA_MMA_ROWS / MMA_WARP_ROWS)) * MMA_WARP_ROWS;
}

static __device__ __forceinline__ int mma_warp_token(int warp)
{
	return (warp / (CUDA_MMA_ROWS / MMA_WARP_ROWS)) * MMA_WARP_TOKENS;
}

/* What a tile of weight type `type` stages of CUDA_MMA_K elements. */
template <int type> struct mma_stage {
	static constexpr int group = cuda_unpack_halves(type) ? 16 : 32; /* elements a scale covers */
	static constexpr int groups = CUDA_MMA_K / group;
	static constexpr bool offsets = cuda_unpack_has_offset(type);
	int w_q[CUDA_MMA_ROWS][MMA_ROW_INTS];
	float w_scale[CUDA_MMA_ROWS][groups + 1]; /* one float over: rows g and g + 1 in other banks */
	float w_offset[offsets ? CUDA_MMA_ROWS : 1][groups + 1];
	int x_q[CUDA_MATMUL_TILE_TOKENS][MMA_ROW_INTS];
	float x_d[CUDA_MATMUL_TILE_TOKENS][MMA_SUBS];
	/* The activations' sum over each group, for the offsets. */
	float x_sum[offsets ? CUDA_MATMUL_TILE_TOKENS : 1][groups];
};

/* A lane's operands of one group's products: weight rows 16i.. of the
 * warp's, and tokens 8j.. */
struct mma_frags {
	int a[2][4];
	int b[4][2];
};

/* The products of a group: [weight tile][token tile][result register]. */
typedef int mma_sums[2][4][4];
typedef float mma_acc[2][4][4];

/* Staging by thread tid of the tile's weights: elements k0..k0 + CUDA_MMA_K of
 * `rows` rows (w: the first), a sub-block a thread at a time; rows past
 * `rows` and sub-blocks past n_in are zero. */
template <int type>
static __device__ __forceinline__ void mma_stage_weights(mma_stage<type> &st, const char *w, size_t w_stride, int rows,
							 int k0, int n_in, int tid)
{
	constexpr int block = cuda_vecdot_block(type), bytes = cuda_vecdot_bytes(type);
	for (int u = tid; u < CUDA_MMA_ROWS * MMA_SUBS; u += MMA_THREADS) {
		int r = u / MMA_SUBS, s = u % MMA_SUBS, k = k0 + s * CUDA_QK;
		cuda_int8_sub sub = {};
		if (r < rows && k < n_in)
			cuda_unpack_int8<type>(w + (size_t)r * w_stride + (size_t)(k / block) * bytes, k % block / CUDA_QK,
					       &sub);
#pragma unroll
		for (int i = 0; i < 8; i++)
			st.w_q[r][8 * s + i] = sub.q[i];
		if (mma_stage<type>::group == 16) {
#pragma unroll
			for (int h = 0; h < 2; h++) {
				st.w_scale[r][2 * s + h] = sub.scale[h];
				if (mma_stage<type>::offsets)
					st.w_offset[r][2 * s + h] = sub.offset[h];
			}
		} else {
			st.w_scale[r][s] = sub.scale[0];
			if (mma_stage<type>::offsets)
				st.w_offset[r][s] = sub.offset[0];
		}
	}
}

/* Staging by thread tid of the tokens' activations under them: x_rows[i]
 * is token slot i's Q8_1 row, or NULL past the tile's last. The sums for
 * the offsets are exact, as the CPU's Q8_K sums are, apart from Q4_1's and
 * Q5_1's, which take the Q8_1 block's s, as the CPU's dot with Q8_1 does. */
template <int type>
static __device__ __forceinline__ void mma_stage_activations(mma_stage<type> &st, const cuda_block_q8_1 *const *x_rows,
							     int k0, int n_in, int tid)
{
	for (int u = tid; u < CUDA_MATMUL_TILE_TOKENS * MMA_SUBS; u += MMA_THREADS) {
		int t = u / MMA_SUBS, s = u % MMA_SUBS, k = k0 + s * CUDA_QK;
		const cuda_block_q8_1 *xb = x_rows[t] != nullptr && k < n_in ? x_rows[t] + k / CUDA_QK : nullptr;
		int q[8], sum[2] = {0, 0};
#pragma unroll
		for (int i = 0; i < 8; i++) {
			q[i] = xb != nullptr ? cuda_load_int_b4(xb->qs, i) : 0;
			st.x_q[t][8 * s + i] = q[i];
			sum[i / 4] = __dp4a(VECDOT_ONES, q[i], sum[i / 4]);
		}
		float d = xb != nullptr ? vecdot_half(xb->d) : 0.0f;
		st.x_d[t][s] = d;
		if (!mma_stage<type>::offsets)
			continue;
		if (mma_stage<type>::group == 16) {
			st.x_sum[t][2 * s] = d * (float)sum[0];
			st.x_sum[t][2 * s + 1] = d * (float)sum[1];
		} else if (type == LOOM_DTYPE_Q4_1 || type == LOOM_DTYPE_Q5_1) {
			st.x_sum[t][s] = xb != nullptr ? vecdot_half(xb->s) : 0.0f;
		} else {
			st.x_sum[t][s] = d * (float)(sum[0] + sum[1]);
		}
	}
}

/* Lane `lane` of warp `warp`: its operands of group j. */
template <int type>
static __device__ __forceinline__ void mma_load_frags(const mma_stage<type> &st, int warp, int lane, int j,
						      mma_frags *f)
{
	constexpr bool k32 = mma_stage<type>::group == 32;
	int g = lane / 4, t = lane % 4, c = j * mma_stage<type>::group / 4 + t;
	int r0 = mma_warp_row(warp) + g, t0 = mma_warp_token(warp) + g;
#pragma unroll
	for (int i = 0; i < 2; i++) {
		f->a[i][0] = st.w_q[r0 + 16 * i][c];
		f->a[i][1] = st.w_q[r0 + 16 * i + 8][c];
		f->a[i][2] = k32 ? st.w_q[r0 + 16 * i][c + 4] : 0;
		f->a[i][3] = k32 ? st.w_q[r0 + 16 * i + 8][c + 4] : 0;
	}
#pragma unroll
	for (int i = 0; i < 4; i++) {
		f->b[i][0] = st.x_q[t0 + 8 * i][c];
		f->b[i][1] = k32 ? st.x_q[t0 + 8 * i][c + 4] : 0;
	}
}

/* Lane `lane` of warp `warp`: group j's sums into its accumulators, times
 * the row's scale and the token's d, plus the row's offset times the
 * token's sum. */
template <int type>
static __device__ __forceinline__ void mma_scale_sums(const mma_stage<type> &st, int warp, int lane, int j,
						      const mma_sums &c, mma_acc &acc)
{
	int g = lane / 4, t = lane % 4, sub = j * mma_stage<type>::group / CUDA_QK;
	int r0 = mma_warp_row(warp) + g, t0 = mma_warp_token(warp) + 2 * t;
#pragma unroll
	for (int i = 0; i < 2; i++)
#pragma unroll
		for (int half = 0; half < 2; half++) {
			int r = r0 + 16 * i + 8 * half;
			float scale = st.w_scale[r][j];
			float offset = mma_stage<type>::offsets ? st.w_offset[r][j] : 0.0f;
#pragma unroll
			for (int n = 0; n < 4; n++)
#pragma unroll
				for (int e = 0; e < 2; e++) {
					int tok = t0 + 8 * n + e;
					float sum = __int_as_float(c[i][n][2 * half + e]) - MMA_FLOAT_BIAS_VALUE;
					float a = fmaf(sum, scale * st.x_d[tok][sub], acc[i][n][2 * half + e]);
					if (mma_stage<type>::offsets)
						a = fmaf(offset, st.x_sum[tok][j], a);
					acc[i][n][2 * half + e] = a;
				}
		}
}

/* Lane `lane` of warp `warp`: its outputs of the tile whose first row is
 * o0, to row o of y_rows[slot] (NULL: no token) where o < n_out, plus
 * bias[o] when there is a bias. */
static __device__ __forceinline__ void mma_store(const mma_acc &acc, int warp, int lane, int o0, int n_out,
						 float *const *y_rows, const float *bias)
{
	int g = lane / 4, t = lane % 4;
	int r0 = o0 + mma_warp_row(warp) + g, t0 = mma_warp_token(warp) + 2 * t;
#pragma unroll
	for (int i = 0; i < 2; i++)
#pragma unroll
		for (int half = 0; half < 2; half++) {
			int o = r0 + 16 * i + 8 * half;
			if (o >= n_out)
				continue;
#pragma unroll
			for (int n = 0; n < 4; n++)
#pragma unroll
				for (int e = 0; e < 2; e++) {
					float *y = y_rows[t0 + 8 * n + e], v = acc[i][n][2 * half + e];
					if (y != nullptr)
						y[o] = bias != nullptr ? v + bias[o] : v;
				}
		}
}

#endif
