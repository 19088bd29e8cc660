/*
 * cuda_matmul_float.cu - MATMUL and MATMUL_ID with F32, F16 and BF16
 * weights (a MATMUL_ID's tokens are its pairs, cuda_matmul.cuh):
 *  - up to CUDA_MATMUL_VEC_TOKENS tokens: one warp per output row, f32
 *    FMAs, each weight read once for all the tokens, 16 bytes a load
 *    where the rows allow;
 *  - F32 weights with more tokens: a tiled SGEMM in shared memory;
 *  - F16 and BF16 weights with more tokens: tensor cores (WMMA 16x16x16
 *    with f32 accumulation) on tiles staged in shared memory.
 * As on the CPU, F16 and BF16 weights meet activations rounded to their
 * own type (round to nearest even), and F32 weights the activations as
 * they are. The rounding happens as the activations are read, so these
 * kernels need no work memory.
 */
#include "cuda_matmul.cuh"

#include <mma.h>
#include <type_traits>

/* ---- few tokens ---- */

#define FV_WARPS 4 /* output rows per thread block */

/* Weights of a 16-byte load: a decode reads every weight once, so a
 * lane's loads are as wide as they go where the rows allow. */
template <typename T> static constexpr int fv_per_load()
{
	return 16 / (int)sizeof(T);
}

/* Whether the weight rows take 16-byte loads: whole loads a row, rows at
 * 16-byte addresses. */
template <typename T> static bool fv_wide_rows(const cuda_matmul_shape *s)
{
	return s->n_in % fv_per_load<T>() == 0 && (uintptr_t)s->w % 16 == 0 && s->w_stride % 16 == 0 &&
	       (s->route.ids == nullptr || s->route.w_expert % 16 == 0);
}

/* NT is the largest token count the instance handles; s.n_tokens <= NT.
 * A MATMUL_ID's instance (NT 1) computes pair blockIdx.y. WIDE: the rows
 * take 16-byte loads (fv_wide_rows), each lane's weights a load at a
 * time, in order. */
template <typename T, int NT, bool ID, bool WIDE>
static __global__ void __launch_bounds__(32 * FV_WARPS) matmul_float_vec(cuda_matmul_shape s)
{
	static_assert(!ID || NT == 1, "a MATMUL_ID's pair at a time");
	int o = blockIdx.x * FV_WARPS + threadIdx.y;
	if (o >= s.n_out)
		return;
	int lane = threadIdx.x, first = 0, e = 0;
	if (ID) {
		first = blockIdx.y;
		if ((e = cuda_route_expert(s.route, first)) < 0)
			return;
	}
	const T *w = (const T *)(cuda_matmul_weights<ID>(s, e) + (size_t)o * s.w_stride);
	const float *x[NT];
	float acc[NT];
#pragma unroll
	for (int t = 0; t < NT; t++) {
		x[t] = (const float *)cuda_row(s.x, ID ? cuda_route_x_row(s.route, first) : t < s.n_tokens ? t : 0);
		acc[t] = 0.0f;
	}
	if (WIDE) {
		constexpr int per_load = fv_per_load<T>();
		for (int i = lane * per_load; i < s.n_in; i += 32 * per_load) {
			uint4 raw = *(const uint4 *)(w + i);
			const T *wv = (const T *)&raw;
#pragma unroll
			for (int k = 0; k < per_load; k++)
#pragma unroll
				for (int t = 0; t < NT; t++)
					if (t < s.n_tokens)
						acc[t] = fmaf(cuda_to_f32(wv[k]), cuda_round_to<T>(x[t][i + k]), acc[t]);
		}
	} else {
		for (int i = lane; i < s.n_in; i += 32) {
			float wv = cuda_to_f32(w[i]);
#pragma unroll
			for (int t = 0; t < NT; t++)
				if (t < s.n_tokens)
					acc[t] = fmaf(wv, cuda_round_to<T>(x[t][i]), acc[t]);
		}
	}
	cuda_matmul_vec_store(s, o, acc, first, cuda_matmul_bias<ID>(s, e));
}

template <typename T, bool WIDE> static void launch_vec_rows(cudaStream_t stream, const cuda_matmul_shape *s)
{
	dim3 block(32, FV_WARPS), grid((unsigned)((s->n_out + FV_WARPS - 1) / FV_WARPS));
	if (s->route.ids != nullptr) {
		grid.y = (unsigned)s->n_tokens;
		matmul_float_vec<T, 1, true, WIDE><<<grid, block, 0, stream>>>(*s);
	} else if (s->n_tokens == 1) {
		matmul_float_vec<T, 1, false, WIDE><<<grid, block, 0, stream>>>(*s);
	} else if (s->n_tokens == 2) {
		matmul_float_vec<T, 2, false, WIDE><<<grid, block, 0, stream>>>(*s);
	} else if (s->n_tokens <= 4) {
		matmul_float_vec<T, 4, false, WIDE><<<grid, block, 0, stream>>>(*s);
	} else {
		matmul_float_vec<T, CUDA_MATMUL_VEC_TOKENS, false, WIDE><<<grid, block, 0, stream>>>(*s);
	}
}

template <typename T> static void launch_vec(cudaStream_t stream, const cuda_matmul_shape *s)
{
	if (fv_wide_rows<T>(s))
		launch_vec_rows<T, true>(stream, s);
	else
		launch_vec_rows<T, false>(stream, s);
}

/* The x and y rows of a tiled kernel's tile into x_rows and y_rows, which
 * the whole block then reads (nullptr past the tile's last token), and
 * the tile; count 0: an empty MATMUL_ID tile, which the block leaves. */
template <bool ID>
static __device__ __forceinline__ cuda_matmul_tile stage_tile_rows(const cuda_matmul_shape &s,
								   const float *x_rows[CUDA_MATMUL_TILE_TOKENS],
								   float *y_rows[CUDA_MATMUL_TILE_TOKENS])
{
	const cuda_matmul_tile tile = cuda_matmul_tile_of<ID>(s);
	int tid = threadIdx.x;
	if (tile.count > 0 && tid < CUDA_MATMUL_TILE_TOKENS) {
		int xr, yr = cuda_matmul_tile_row<ID>(s, tile, tid, &xr);
		x_rows[tid] = yr >= 0 ? (const float *)cuda_row(s.x, xr) : nullptr;
		y_rows[tid] = yr >= 0 ? (float *)cuda_row(s.y, yr) : nullptr;
	}
	__syncthreads();
	return tile;
}

/* ---- many tokens, F32: SGEMM ----
 * A tile of ST_TILE outputs by ST_TILE tokens; each step stages ST_K
 * elements of its weight and activation rows, transposed (k-major, padded
 * by one against bank conflicts), and each thread accumulates 4 outputs by
 * 4 tokens: outputs tx + 16 i, tokens ty + 16 j. */

#define ST_TILE 64
#define ST_K 16
#define ST_THREADS 256

static_assert(ST_TILE == CUDA_MATMUL_TILE_TOKENS && ST_THREADS == 16 * 16 && ST_TILE * ST_K == 4 * ST_THREADS,
	      "the SGEMM's thread mapping");

template <bool ID> static __global__ void __launch_bounds__(ST_THREADS) matmul_f32_tile(cuda_matmul_shape s)
{
	__shared__ float w_s[ST_K][ST_TILE + 1];
	__shared__ float x_s[ST_K][ST_TILE + 1];
	__shared__ const float *x_rows[ST_TILE];
	__shared__ float *y_rows[ST_TILE];

	int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
	int o0 = blockIdx.x * ST_TILE;
	const cuda_matmul_tile tile = stage_tile_rows<ID>(s, x_rows, y_rows);
	if (tile.count <= 0)
		return;
	const char *wm = cuda_matmul_weights<ID>(s, tile.expert);
	const float *bias = cuda_matmul_bias<ID>(s, tile.expert);

	/* What a thread stages: element lk of the step in rows lr + 16 m. */
	int lk = tid % ST_K, lr = tid / ST_K;
	float acc[4][4] = {};
	for (int k0 = 0; k0 < s.n_in; k0 += ST_K) {
		int k = k0 + lk;
#pragma unroll
		for (int m = 0; m < 4; m++) {
			int r = lr + 16 * m, o = o0 + r;
			const float *xr = x_rows[r];
			w_s[lk][r] = o < s.n_out && k < s.n_in ? ((const float *)(wm + (size_t)o * s.w_stride))[k] : 0.0f;
			x_s[lk][r] = xr != nullptr && k < s.n_in ? xr[k] : 0.0f;
		}
		__syncthreads();
#pragma unroll
		for (int kk = 0; kk < ST_K; kk++) {
			float wv[4], xv[4];
#pragma unroll
			for (int i = 0; i < 4; i++) {
				wv[i] = w_s[kk][tx + 16 * i];
				xv[i] = x_s[kk][ty + 16 * i];
			}
#pragma unroll
			for (int i = 0; i < 4; i++)
#pragma unroll
				for (int j = 0; j < 4; j++)
					acc[i][j] = fmaf(wv[i], xv[j], acc[i][j]);
		}
		__syncthreads();
	}

#pragma unroll
	for (int i = 0; i < 4; i++) {
		int o = o0 + tx + 16 * i;
#pragma unroll
		for (int j = 0; j < 4; j++) {
			float *y = y_rows[ty + 16 * j];
			if (o < s.n_out && y != nullptr)
				y[o] = bias != nullptr ? acc[i][j] + bias[o] : acc[i][j];
		}
	}
}

/* ---- many tokens, F16 and BF16: tensor cores ----
 * A tile of HT_TILE outputs by HT_TILE tokens; each step stages HT_K
 * elements of its weight rows and of its activation rows (rounded to T),
 * zero past the matrices' edges. Warp w computes outputs 32 (w / 2).. by
 * tokens 32 (w % 2).. as 2 x 2 WMMA fragments: the weights are matrix A
 * (row-major, outputs by k), the activation rows matrix B read
 * column-major (k by tokens). The results go through shared memory,
 * token-major, so that the stores to dst are coalesced. */

#define HT_TILE 64
#define HT_K 32
#define HT_THREADS 128
#define HT_LD (HT_K + 8)        /* T elements per staged row: a multiple of 8, as WMMA asks */
#define HT_C_LD (HT_TILE + 4)   /* floats per row of the results: a multiple of 4 */

static_assert(HT_TILE == CUDA_MATMUL_TILE_TOKENS && HT_THREADS == 4 * 32 && HT_K == 32,
	      "the tensor-core kernel's warp and lane mapping");

template <typename T, bool ID>
static __global__ void __launch_bounds__(HT_THREADS) matmul_half_tile(cuda_matmul_shape s)
{
	using namespace nvcuda;
	/* WMMA pointers must be 32-byte aligned: every fragment starts a
	 * multiple of 16 rows (and 16 elements) into these. */
	__shared__ __align__(32) T w_s[HT_TILE * HT_LD];
	__shared__ __align__(32) T x_s[HT_TILE * HT_LD];
	__shared__ __align__(32) float c_s[HT_TILE * HT_C_LD];
	__shared__ const float *x_rows[HT_TILE];
	__shared__ float *y_rows[HT_TILE];

	int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
	int o0 = blockIdx.x * HT_TILE;
	const cuda_matmul_tile tile = stage_tile_rows<ID>(s, x_rows, y_rows);
	if (tile.count <= 0)
		return;
	const char *wm = cuda_matmul_weights<ID>(s, tile.expert);
	const float *bias = cuda_matmul_bias<ID>(s, tile.expert);

	int wo = 32 * (warp / 2), wt = 32 * (warp % 2);
	wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
	for (int i = 0; i < 2; i++)
#pragma unroll
		for (int j = 0; j < 2; j++)
			wmma::fill_fragment(acc[i][j], 0.0f);

	const T zero = cuda_from_f32<T>(0.0f);
	for (int k0 = 0; k0 < s.n_in; k0 += HT_K) {
		/* Lane l stages element k0 + l of rows warp, warp + 4, ... */
		int k = k0 + lane;
		bool k_in = k < s.n_in;
		for (int r = warp; r < HT_TILE; r += HT_THREADS / 32) {
			int o = o0 + r;
			const float *xr = x_rows[r];
			w_s[r * HT_LD + lane] = o < s.n_out && k_in ? ((const T *)(wm + (size_t)o * s.w_stride))[k] : zero;
			x_s[r * HT_LD + lane] = xr != nullptr && k_in ? cuda_from_f32<T>(xr[k]) : zero;
		}
		__syncthreads();
#pragma unroll
		for (int kk = 0; kk < HT_K; kk += 16) {
			wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a[2];
			wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> b[2];
#pragma unroll
			for (int i = 0; i < 2; i++) {
				wmma::load_matrix_sync(a[i], w_s + (wo + 16 * i) * HT_LD + kk, HT_LD);
				wmma::load_matrix_sync(b[i], x_s + (wt + 16 * i) * HT_LD + kk, HT_LD);
			}
#pragma unroll
			for (int i = 0; i < 2; i++)
#pragma unroll
				for (int j = 0; j < 2; j++)
					wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
		}
		__syncthreads();
	}

	/* Column-major stores put output o of token t at c_s[t][o]. */
#pragma unroll
	for (int i = 0; i < 2; i++)
#pragma unroll
		for (int j = 0; j < 2; j++)
			wmma::store_matrix_sync(c_s + (wt + 16 * j) * HT_C_LD + wo + 16 * i, acc[i][j], HT_C_LD,
						wmma::mem_col_major);
	__syncthreads();
	for (int e = tid; e < HT_TILE * HT_TILE; e += HT_THREADS) {
		int tt = e / HT_TILE, oo = e % HT_TILE;
		float *y = y_rows[tt];
		if (y != nullptr && o0 + oo < s.n_out)
			y[o0 + oo] = bias != nullptr ? c_s[tt * HT_C_LD + oo] + bias[o0 + oo] : c_s[tt * HT_C_LD + oo];
	}
}

/* The kernels for T weights and s's token count (a MATMUL_ID's: its
 * route's). */
template <typename T> static void launch(cudaStream_t stream, const cuda_matmul_shape *s)
{
	bool id = s->route.ids != nullptr;
	if (id ? s->route.tiles == nullptr : s->n_tokens <= CUDA_MATMUL_VEC_TOKENS) {
		launch_vec<T>(stream, s);
		return;
	}
	dim3 tiles((unsigned)((s->n_out + CUDA_MATMUL_TILE_TOKENS - 1) / CUDA_MATMUL_TILE_TOKENS),
		   (unsigned)(id ? s->route.n_tiles : (s->n_tokens + CUDA_MATMUL_TILE_TOKENS - 1) / CUDA_MATMUL_TILE_TOKENS));
	if constexpr (std::is_same_v<T, float>) {
		if (id)
			matmul_f32_tile<true><<<tiles, ST_THREADS, 0, stream>>>(*s);
		else
			matmul_f32_tile<false><<<tiles, ST_THREADS, 0, stream>>>(*s);
	} else {
		if (id)
			matmul_half_tile<T, true><<<tiles, HT_THREADS, 0, stream>>>(*s);
		else
			matmul_half_tile<T, false><<<tiles, HT_THREADS, 0, stream>>>(*s);
	}
}

loom_status cuda_matmul_float(cuda_backend *be, loom_dtype type, const cuda_matmul_shape *s)
{
	switch (type) {
	case LOOM_DTYPE_F32:
		launch<float>(be->stream, s);
		break;
	case LOOM_DTYPE_F16:
		launch<__half>(be->stream, s);
		break;
	case LOOM_DTYPE_BF16:
		launch<__nv_bfloat16>(be->stream, s);
		break;
	default:
		be->host->set_error("cuda: matmul: no float kernel for %s", loom_dtype_traits_of(type).name);
		return LOOM_ERR_UNSUPPORTED;
	}
	return cuda_launched(be, s->route.ids != nullptr ? "matmul_id of f32, f16 or bf16 weights"
						       : "matmul of f32, f16 or bf16 weights");
}
