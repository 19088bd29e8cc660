/*
 * cuda_matmul_quant.cu - MATMUL and MATMUL_ID with quantized weights. The
 * activations become Q8_1 blocks in work memory (cuda_quantize_q8_1), then
 *  - up to CUDA_MATMUL_VEC_TOKENS tokens: one warp per output row, its
 *    lanes taking the parts (cuda_vecdot.cuh) of consecutive weight blocks,
 *    each block read once for all the tokens (a MATMUL_ID's: for its pair,
 *    from the matrix of the pair's expert alone); a shuffle sums the lanes;
 *  - more: each thread block computes a tile of QT_ROWS outputs by
 *    QT_TOKENS tokens (a MATMUL_ID's: pairs of one expert), staging QT_STEP
 *    elements' worth of weight blocks and Q8_1 blocks at a time in shared
 *    memory, where every weight block meets the tokens of the tile.
 */
#include "cuda_matmul.cuh"
#include "cuda_quantize_q8_1.cuh"
#include "cuda_vecdot.cuh"

#define QV_WARPS 4 /* output rows per thread block of the vector kernel */

#define QT_ROWS 64
#define QT_TOKENS CUDA_MATMUL_TILE_TOKENS
#define QT_THREADS 256
#define QT_STEP 256 /* elements of a row staged at a time: one K-quant super-block */
#define QT_X_BLOCKS (QT_STEP / CUDA_QK)
#define QT_X_INTS ((int)(QT_X_BLOCKS * sizeof(cuda_block_q8_1) / 4))
/* A thread's outputs: rows lane + 32 i, tokens warp + 8 j. */
#define QT_ROWS_PER_THREAD (QT_ROWS / 32)
#define QT_TOKENS_PER_THREAD (QT_TOKENS / (QT_THREADS / 32))

static_assert(QT_THREADS == 256 && QT_ROWS == 64 && QT_TOKENS == 64, "the tile kernel's thread mapping");

bool cuda_matmul_is_quant(loom_dtype type)
{
	return cuda_vecdot_bytes(type) != 0;
}

/* NT is the largest token count the instance handles; s.n_tokens <= NT.
 * A MATMUL_ID's instance (NT 1) computes pair blockIdx.y.
 *
 * With more tokens each warp of a block takes a row of its own. With one
 * (a decode, a MATMUL_ID's pair) the block's warps share one row, each
 * taking every QV_WARPS-th step of its blocks, as llama.cpp does for one
 * column: a decode's few thousand rows would otherwise give a large GPU
 * too few warps to keep enough of its memory's requests in flight. Their
 * sums meet in shared memory and are added in warp order. */
template <int type, int NT, bool ID>
static __global__ void __launch_bounds__(32 * QV_WARPS) matmul_quant_vec(cuda_matmul_shape s, const cuda_block_q8_1 *x)
{
	constexpr int parts = cuda_vecdot_parts(type), blocks_per_step = 32 / parts;
	constexpr int block = cuda_vecdot_block(type), bytes = cuda_vecdot_bytes(type);
	constexpr int x_per_block = block / CUDA_QK;
	constexpr bool shared_row = NT == 1;
	static_assert(!ID || NT == 1, "a MATMUL_ID's pair at a time");
	int o = shared_row ? (int)blockIdx.x : (int)blockIdx.x * QV_WARPS + (int)threadIdx.y;
	if (o >= s.n_out)
		return;
	int lane = threadIdx.x, part = lane % parts;
	int n_blocks = s.n_in / block, first = 0, e = 0;
	if (ID) {
		first = blockIdx.y;
		if ((e = cuda_route_expert(s.route, first)) < 0)
			return;
		x += (size_t)cuda_route_x_row(s.route, first) * n_blocks * x_per_block;
	}
	const char *row = cuda_matmul_weights<ID>(s, e) + (size_t)o * s.w_stride;
	const cuda_block_q8_1 *xt[NT];
	float acc[NT];
#pragma unroll
	for (int t = 0; t < NT; t++) {
		xt[t] = x + (size_t)(t < s.n_tokens ? t : 0) * n_blocks * x_per_block;
		acc[t] = 0.0f;
	}
	const int b0 = lane / parts + (shared_row ? (int)threadIdx.y * blocks_per_step : 0);
	const int step = shared_row ? QV_WARPS * blocks_per_step : blocks_per_step;
	for (int b = b0; b < n_blocks; b += step) {
		const char *wb = row + (size_t)b * bytes;
#pragma unroll
		for (int t = 0; t < NT; t++)
			if (t < s.n_tokens)
				acc[t] += cuda_vecdot<type>(wb, xt[t] + b * x_per_block, part);
	}
	if (!shared_row) {
		cuda_matmul_vec_store(s, o, acc, first, cuda_matmul_bias<ID>(s, e));
		return;
	}
	__shared__ float warp_sums[QV_WARPS];
	float sum = cuda_warp_sum(acc[0]);
	if (lane == 0)
		warp_sums[threadIdx.y] = sum;
	__syncthreads();
	if (threadIdx.y == 0 && lane == 0) {
		float total = 0.0f;
#pragma unroll
		for (int w = 0; w < QV_WARPS; w++)
			total += warp_sums[w];
		const float *bias = cuda_matmul_bias<ID>(s, e);
		((float *)cuda_row(s.y, first))[o] = bias != nullptr ? total + bias[o] : total;
	}
}

/* Bytes of a staged weight row: an odd number of 4-byte words, so that a
 * warp's lanes, reading 32 rows at one offset, hit 32 different banks. */
static constexpr int qt_w_row_bytes(int type)
{
	return ((QT_STEP / cuda_vecdot_block(type) * cuda_vecdot_bytes(type) + 3) / 4 | 1) * 4;
}

/* Weight bytes staged a load at a time: the blocks' alignment. */
template <int type> struct qt_unit {
	typedef uint16_t type_t;
};
template <> struct qt_unit<LOOM_DTYPE_MXFP4> {
	typedef uint8_t type_t;
};
template <> struct qt_unit<LOOM_DTYPE_Q2_K> {
	typedef uint32_t type_t;
};
template <> struct qt_unit<LOOM_DTYPE_Q4_K> {
	typedef uint32_t type_t;
};
template <> struct qt_unit<LOOM_DTYPE_Q5_K> {
	typedef uint32_t type_t;
};

template <int type, bool ID>
static __global__ void __launch_bounds__(QT_THREADS) matmul_quant_tile(cuda_matmul_shape s, const cuda_block_q8_1 *x)
{
	typedef typename qt_unit<type>::type_t unit;
	constexpr int block = cuda_vecdot_block(type), bytes = cuda_vecdot_bytes(type);
	constexpr int parts = cuda_vecdot_parts(type), x_per_block = block / CUDA_QK;
	constexpr int step_blocks = QT_STEP / block, w_row = qt_w_row_bytes(type);
	constexpr int w_units = step_blocks * bytes / (int)sizeof(unit); /* units of a staged row */
	static_assert(bytes % sizeof(unit) == 0 && cuda_vecdot_align(type) == (int)sizeof(unit), "staging units");
	__shared__ __align__(16) char w_s[QT_ROWS * w_row];
	__shared__ __align__(16) cuda_block_q8_1 x_s[QT_TOKENS * QT_X_BLOCKS];
	__shared__ const cuda_block_q8_1 *x_rows[QT_TOKENS];
	__shared__ float *y_rows[QT_TOKENS];

	const cuda_matmul_tile tile = cuda_matmul_tile_of<ID>(s);
	if (tile.count <= 0)
		return;
	int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
	int o0 = blockIdx.x * QT_ROWS;
	int n_blocks = s.n_in / block, n_xblocks = s.n_in / CUDA_QK;
	const char *w = cuda_matmul_weights<ID>(s, tile.expert);
	if (tid < QT_TOKENS) {
		int xr, yr = cuda_matmul_tile_row<ID>(s, tile, tid, &xr);
		x_rows[tid] = yr >= 0 ? x + (size_t)xr * n_xblocks : nullptr;
		y_rows[tid] = yr >= 0 ? (float *)cuda_row(s.y, yr) : nullptr;
	}
	__syncthreads();

	float acc[QT_ROWS_PER_THREAD][QT_TOKENS_PER_THREAD] = {};
	for (int kb0 = 0; kb0 < n_blocks; kb0 += step_blocks) {
		int nb = min(step_blocks, n_blocks - kb0);
		/* Weight blocks kb0.. of rows o0.., a unit at a time (their
		 * alignment); rows past n_out and blocks past the row are zero. */
		for (int i = tid; i < QT_ROWS * w_units; i += QT_THREADS) {
			int r = i / w_units, u = i % w_units;
			unit v = 0;
			if (o0 + r < s.n_out && u < nb * bytes / (int)sizeof(unit))
				v = ((const unit *)(w + (size_t)(o0 + r) * s.w_stride + (size_t)kb0 * bytes))[u];
			((unit *)(w_s + r * w_row))[u] = v;
		}
		/* The Q8_1 blocks under them of the tile's tokens, 4 bytes at a
		 * time. */
		int xb0 = kb0 * x_per_block, x_units = nb * x_per_block * QT_X_INTS / QT_X_BLOCKS;
		for (int i = tid; i < QT_TOKENS * QT_X_INTS; i += QT_THREADS) {
			int tt = i / QT_X_INTS, u = i % QT_X_INTS;
			const cuda_block_q8_1 *xr = x_rows[tt];
			int v = 0;
			if (xr != nullptr && u < x_units)
				v = ((const int *)(xr + xb0))[u];
			((int *)(x_s + tt * QT_X_BLOCKS))[u] = v;
		}
		__syncthreads();
		for (int kb = 0; kb < nb; kb++) {
#pragma unroll 1
			for (int part = 0; part < parts; part++) {
#pragma unroll
				for (int i = 0; i < QT_ROWS_PER_THREAD; i++) {
					const char *wb = w_s + (lane + 32 * i) * w_row + kb * bytes;
#pragma unroll
					for (int j = 0; j < QT_TOKENS_PER_THREAD; j++) {
						const cuda_block_q8_1 *xb = x_s + (warp + 8 * j) * QT_X_BLOCKS + kb * x_per_block;
						acc[i][j] += cuda_vecdot<type>(wb, xb, part);
					}
				}
			}
		}
		__syncthreads();
	}

	const float *bias = cuda_matmul_bias<ID>(s, tile.expert);
#pragma unroll
	for (int i = 0; i < QT_ROWS_PER_THREAD; i++) {
		int o = o0 + lane + 32 * i;
#pragma unroll
		for (int j = 0; j < QT_TOKENS_PER_THREAD; j++) {
			float *y = y_rows[warp + 8 * j];
			if (o < s.n_out && y != nullptr)
				y[o] = bias != nullptr ? acc[i][j] + bias[o] : acc[i][j];
		}
	}
}

template <int type>
static loom_status matmul_quant_typed(cuda_backend *be, const cuda_matmul_shape *s, const cuda_block_q8_1 *x)
{
	/* A block a row for one token (a MATMUL_ID's pairs are one each), a
	 * warp a row for more. */
	dim3 vec_block(32, QV_WARPS), vec_grid((unsigned)((s->n_out + QV_WARPS - 1) / QV_WARPS));
	dim3 one_grid((unsigned)s->n_out);
	unsigned tile_cols = (unsigned)((s->n_out + QT_ROWS - 1) / QT_ROWS);
	if (s->route.ids != nullptr) {
		if (s->route.tiles == nullptr) {
			one_grid.y = (unsigned)s->n_tokens;
			matmul_quant_vec<type, 1, true><<<one_grid, vec_block, 0, be->stream>>>(*s, x);
		} else {
			dim3 grid(tile_cols, (unsigned)s->route.n_tiles);
			matmul_quant_tile<type, true><<<grid, QT_THREADS, 0, be->stream>>>(*s, x);
		}
	} else if (s->n_tokens <= CUDA_MATMUL_VEC_TOKENS) {
		if (s->n_tokens == 1)
			matmul_quant_vec<type, 1, false><<<one_grid, vec_block, 0, be->stream>>>(*s, x);
		else if (s->n_tokens == 2)
			matmul_quant_vec<type, 2, false><<<vec_grid, vec_block, 0, be->stream>>>(*s, x);
		else if (s->n_tokens <= 4)
			matmul_quant_vec<type, 4, false><<<vec_grid, vec_block, 0, be->stream>>>(*s, x);
		else
			matmul_quant_vec<type, CUDA_MATMUL_VEC_TOKENS, false><<<vec_grid, vec_block, 0, be->stream>>>(*s, x);
	} else {
		dim3 grid(tile_cols, (unsigned)((s->n_tokens + QT_TOKENS - 1) / QT_TOKENS));
		matmul_quant_tile<type, false><<<grid, QT_THREADS, 0, be->stream>>>(*s, x);
	}
	return cuda_launched(be, s->route.ids != nullptr ? "matmul_id of quantized weights" : "matmul of quantized weights");
}

loom_status cuda_matmul_quant(cuda_backend *be, loom_dtype type, const cuda_matmul_shape *s, int x_rows, void *work,
			      int node_index)
{
	cuda_block_q8_1 *x = (cuda_block_q8_1 *)work;
	if (!cuda_q8_1_ready(be, node_index)) {
		cuda_quantize_q8_1(be->stream, s->x, s->n_in, x_rows, x);
		loom_status st = cuda_launched(be, "quantizing a matmul's activations to q8_1");
		if (st != LOOM_OK)
			return st;
	}
	switch (type) {
	case LOOM_DTYPE_Q4_0: return matmul_quant_typed<LOOM_DTYPE_Q4_0>(be, s, x);
	case LOOM_DTYPE_Q4_1: return matmul_quant_typed<LOOM_DTYPE_Q4_1>(be, s, x);
	case LOOM_DTYPE_Q5_0: return matmul_quant_typed<LOOM_DTYPE_Q5_0>(be, s, x);
	case LOOM_DTYPE_Q5_1: return matmul_quant_typed<LOOM_DTYPE_Q5_1>(be, s, x);
	case LOOM_DTYPE_Q8_0: return matmul_quant_typed<LOOM_DTYPE_Q8_0>(be, s, x);
	case LOOM_DTYPE_Q2_K: return matmul_quant_typed<LOOM_DTYPE_Q2_K>(be, s, x);
	case LOOM_DTYPE_Q3_K: return matmul_quant_typed<LOOM_DTYPE_Q3_K>(be, s, x);
	case LOOM_DTYPE_Q4_K: return matmul_quant_typed<LOOM_DTYPE_Q4_K>(be, s, x);
	case LOOM_DTYPE_Q5_K: return matmul_quant_typed<LOOM_DTYPE_Q5_K>(be, s, x);
	case LOOM_DTYPE_Q6_K: return matmul_quant_typed<LOOM_DTYPE_Q6_K>(be, s, x);
	case LOOM_DTYPE_MXFP4: return matmul_quant_typed<LOOM_DTYPE_MXFP4>(be, s, x);
	default: break;
	}
	be->host->set_error("cuda: matmul: no quantized kernel for %s", loom_dtype_traits_of(type).name);
	return LOOM_ERR_UNSUPPORTED;
}
