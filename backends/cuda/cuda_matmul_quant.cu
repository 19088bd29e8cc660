/*
 * cuda_matmul_quant.cu - MATMUL and MATMUL_ID with quantized weights. The
 * activations become Q8_1 blocks in work memory (cuda_quantize_q8_1), then
 *  - up to CUDA_MATMUL_VEC_TOKENS tokens: one warp per output row, its
 *    lanes taking the parts (cuda_vecdot.cuh) of consecutive weight blocks,
 *    each block read once for all the tokens (a MATMUL_ID's: for its pair,
 *    from the matrix of the pair's expert alone); a shuffle sums the lanes;
 *  - more: each thread block computes a tile of CUDA_MMA_ROWS outputs by
 *    CUDA_MATMUL_TILE_TOKENS tokens (a MATMUL_ID's: pairs of one expert) on the tensor
 *    cores, the weights unpacked to int8 in shared memory, where every
 *    weight block meets the tokens of the tile (cuda_mma_tile.cuh); where
 *    the tiles are too few to fill a GPU (a few sequences' decode), over
 *    parts of the rows' length, added by a second kernel.
 */
#include "cuda_matmul.cuh"
#include "cuda_mma_tile.cuh"
#include "cuda_quantize_q8_1.cuh"

#define QV_WARPS 4 /* output rows per thread block of the vector kernel */

bool cuda_matmul_is_quant(loom_dtype type)
{
	return cuda_vecdot_bytes(type) != 0;
}

/* One token's dot with weight row `row` (n_blocks blocks) by the block's
 * QV_WARPS warps, each taking every QV_WARPS-th step of the row's blocks,
 * as llama.cpp does for one column: a decode's few thousand rows as one
 * warp each would give a large GPU too few warps to keep enough of its
 * memory's requests in flight. Their sums meet in shared memory and are
 * added in warp order; the total is thread (0, 0)'s. */
template <int type>
static __device__ __forceinline__ float one_token_row(const char *row, const cuda_block_q8_1 *x, int n_blocks)
{
	constexpr int parts = cuda_vecdot_parts(type), blocks_per_step = 32 / parts;
	constexpr int bytes = cuda_vecdot_bytes(type), x_per_block = cuda_vecdot_block(type) / CUDA_QK;
	__shared__ float warp_sums[QV_WARPS];
	int lane = threadIdx.x, part = lane % parts;
	float acc = 0.0f;
	for (int b = lane / parts + (int)threadIdx.y * blocks_per_step; b < n_blocks; b += QV_WARPS * blocks_per_step)
		acc += cuda_vecdot<type>(row + (size_t)b * bytes, x + b * x_per_block, part);
	float sum = cuda_warp_sum(acc);
	if (lane == 0)
		warp_sums[threadIdx.y] = sum;
	__syncthreads();
	float total = 0.0f;
	if (threadIdx.y == 0 && lane == 0)
#pragma unroll
		for (int w = 0; w < QV_WARPS; w++)
			total += warp_sums[w];
	return total;
}

/* NT is the largest token count the instance handles; s.n_tokens <= NT.
 * A MATMUL_ID's instance (NT 1) computes pair blockIdx.y. With more
 * tokens each warp of a block takes a row of its own; with one (a decode,
 * a MATMUL_ID's pair) the block's warps share one (one_token_row). */
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
	int n_blocks = s.n_in / block, first = 0, e = 0;
	if (ID) {
		first = blockIdx.y;
		if ((e = cuda_route_expert(s.route, first)) < 0)
			return;
		x += (size_t)cuda_route_x_row(s.route, first) * n_blocks * x_per_block;
	}
	const char *row = cuda_matmul_weights<ID>(s, e) + (size_t)o * s.w_stride;
	if (shared_row) {
		float total = one_token_row<type>(row, x, n_blocks);
		const float *bias = cuda_matmul_bias<ID>(s, e);
		if (threadIdx.y == 0 && threadIdx.x == 0)
			((float *)cuda_row(s.y, first))[o] = bias != nullptr ? total + bias[o] : total;
		return;
	}
	int lane = threadIdx.x, part = lane % parts;
	const cuda_block_q8_1 *xt[NT];
	float acc[NT];
#pragma unroll
	for (int t = 0; t < NT; t++) {
		xt[t] = x + (size_t)(t < s.n_tokens ? t : 0) * n_blocks * x_per_block;
		acc[t] = 0.0f;
	}
	for (int b = lane / parts; b < n_blocks; b += blocks_per_step) {
		const char *wb = row + (size_t)b * bytes;
#pragma unroll
		for (int t = 0; t < NT; t++)
			if (t < s.n_tokens)
				acc[t] += cuda_vecdot<type>(wb, xt[t] + b * x_per_block, part);
	}
	cuda_matmul_vec_store(s, o, acc, first, cuda_matmul_bias<ID>(s, e));
}

/* One token's products with up to CUDA_FUSION_MAX_PRODUCTS matrices of one type
 * and input (q, k and v; gate and up), a launch for all: block o computes
 * row o of the matrices' rows taken one matrix after another. */
template <int type>
static __global__ void __launch_bounds__(32 * QV_WARPS)
	matmul_quant_group(cuda_matmul_group g, const cuda_block_q8_1 *x, int n_in)
{
	/* The matrix is chosen, not indexed: a run-time index into the
	 * parameter's arrays would copy them to local memory. */
	int o = blockIdx.x;
	const char *w = g.w[0];
	size_t stride = g.w_stride[0];
	float *y = g.y[0];
	bool chosen = false;
#pragma unroll
	for (int m = 0; m + 1 < CUDA_FUSION_MAX_PRODUCTS; m++) {
		if (chosen || m + 1 >= g.n || o < g.n_out[m]) {
			chosen = true;
			continue;
		}
		o -= g.n_out[m];
		w = g.w[m + 1];
		stride = g.w_stride[m + 1];
		y = g.y[m + 1];
	}
	float total = one_token_row<type>(w + (size_t)o * stride, x, n_in / cuda_vecdot_block(type));
	if (threadIdx.y == 0 && threadIdx.x == 0)
		y[o] = total;
}

/* One group's product of a lane's operands, into c (which holds
 * MMA_FLOAT_BIAS or an earlier sum). */
template <int group>
static __device__ __forceinline__ void mma_product(int (&c)[4], const int (&a)[4], const int (&b)[2])
{
	if (group == 32)
		asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
		    "{%0, %1, %2, %3};"
		    : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
		    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
	else
		asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};"
		    : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
		    : "r"(a[0]), "r"(a[1]), "r"(b[0]));
}

/* The tile kernel (cuda_mma_tile.cuh): rows blockIdx.x * CUDA_MMA_ROWS.. by the
 * tokens of the grid row's tile, over part blockIdx.z of gridDim.z of the
 * rows' length. With parts (a plain MATMUL, cuda_matmul_splits), part z's
 * sums go to partial[z][token] rather than y, for matmul_split_sum. */
template <int type, bool ID>
static __global__ void __launch_bounds__(MMA_THREADS)
	matmul_quant_mma(cuda_matmul_shape s, const cuda_block_q8_1 *x, float *partial)
{
	__shared__ __align__(16) mma_stage<type> st;
	__shared__ const cuda_block_q8_1 *x_rows[CUDA_MATMUL_TILE_TOKENS];
	__shared__ float *y_rows[CUDA_MATMUL_TILE_TOKENS];

	const cuda_matmul_tile tile = cuda_matmul_tile_of<ID>(s);
	if (tile.count <= 0)
		return;
	int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
	int o0 = blockIdx.x * CUDA_MMA_ROWS, n_xblocks = s.n_in / CUDA_QK;
	const char *w = cuda_matmul_weights<ID>(s, tile.expert) + (size_t)o0 * s.w_stride;
	if (tid < CUDA_MATMUL_TILE_TOKENS) {
		int xr, yr = cuda_matmul_tile_row<ID>(s, tile, tid, &xr);
		x_rows[tid] = yr >= 0 ? x + (size_t)xr * n_xblocks : nullptr;
		y_rows[tid] = yr < 0		 ? nullptr
			      : partial != nullptr ? partial + ((size_t)blockIdx.z * s.n_tokens + yr) * s.n_out
						   : (float *)cuda_row(s.y, yr);
	}
	__syncthreads();

	const int steps = (s.n_in + CUDA_MMA_K - 1) / CUDA_MMA_K, per_part = (steps + gridDim.z - 1) / gridDim.z;
	const int k_begin = blockIdx.z * per_part * CUDA_MMA_K, k_end = min(s.n_in, k_begin + per_part * CUDA_MMA_K);
	mma_acc acc = {};
	for (int k0 = k_begin; k0 < k_end; k0 += CUDA_MMA_K) {
		mma_stage_weights<type>(st, w, s.w_stride, s.n_out - o0, k0, s.n_in, tid);
		mma_stage_activations<type>(st, x_rows, k0, s.n_in, tid);
		__syncthreads();
#pragma unroll
		for (int j = 0; j < mma_stage<type>::groups; j++) {
			mma_frags f;
			mma_load_frags<type>(st, warp, lane, j, &f);
			mma_sums c;
#pragma unroll
			for (int i = 0; i < 2; i++)
#pragma unroll
				for (int n = 0; n < 4; n++) {
					c[i][n][0] = c[i][n][1] = c[i][n][2] = c[i][n][3] = MMA_FLOAT_BIAS;
					mma_product<mma_stage<type>::group>(c[i][n], f.a[i], f.b[n]);
				}
			mma_scale_sums<type>(st, warp, lane, j, c, acc);
		}
		__syncthreads();
	}
	mma_store(acc, warp, lane, o0, s.n_out, y_rows, cuda_matmul_bias<ID>(s, tile.expert));
}

/* y[t][o] = the parts' sums of it, added in part order. */
static __global__ void matmul_split_sum(const float *partial, int parts, int n_out, int n_tokens, cuda_rows y)
{
	int o = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
	if (o >= n_out)
		return;
	float sum = 0.0f;
	for (int z = 0; z < parts; z++)
		sum += partial[((size_t)z * n_tokens + t) * n_out + o];
	((float *)cuda_row(y, t))[o] = sum;
}

/* A group's launch (group non-NULL, s its first product's shape), or s's. */
template <int type>
static loom_status matmul_quant_typed(cuda_backend *be, const cuda_matmul_shape *s, const cuda_matmul_group *group,
				      const cuda_block_q8_1 *x)
{
	/* A block a row for one token (a MATMUL_ID's pairs are one each), a
	 * warp a row for more. */
	dim3 vec_block(32, QV_WARPS), vec_grid((unsigned)((s->n_out + QV_WARPS - 1) / QV_WARPS));
	if (group != nullptr) {
		unsigned rows = 0;
		for (int m = 0; m < group->n; m++)
			rows += (unsigned)group->n_out[m];
		matmul_quant_group<type><<<rows, vec_block, 0, be->stream>>>(*group, x, s->n_in);
		return cuda_launched(be, "matmuls of quantized weights, grouped");
	}
	dim3 one_grid((unsigned)s->n_out);
	unsigned tile_cols = (unsigned)((s->n_out + CUDA_MMA_ROWS - 1) / CUDA_MMA_ROWS);
	if (s->route.ids != nullptr) {
		if (s->route.tiles == nullptr) {
			one_grid.y = (unsigned)s->n_tokens;
			matmul_quant_vec<type, 1, true><<<one_grid, vec_block, 0, be->stream>>>(*s, x);
		} else {
			dim3 grid(tile_cols, (unsigned)s->route.n_tiles);
			matmul_quant_mma<type, true><<<grid, MMA_THREADS, 0, be->stream>>>(*s, x, nullptr);
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
		int parts = cuda_matmul_splits(s->n_out, s->n_tokens, s->n_in);
		float *partial = parts > 1 ? (float *)((char *)x + cuda_matmul_split_offset(s->n_tokens, s->n_in)) : nullptr;
		unsigned token_tiles = (unsigned)((s->n_tokens + CUDA_MATMUL_TILE_TOKENS - 1) / CUDA_MATMUL_TILE_TOKENS);
		dim3 grid(tile_cols, token_tiles, (unsigned)parts);
		matmul_quant_mma<type, false><<<grid, MMA_THREADS, 0, be->stream>>>(*s, x, partial);
		if (partial != nullptr) {
			dim3 sum_grid((unsigned)((s->n_out + 255) / 256), (unsigned)s->n_tokens);
			matmul_split_sum<<<sum_grid, 256, 0, be->stream>>>(partial, parts, s->n_out, s->n_tokens, s->y);
		}
	}
	return cuda_launched(be, s->route.ids != nullptr ? "matmul_id of quantized weights" : "matmul of quantized weights");
}

/* s's product, or with group non-NULL the group's (s its first's). */
static loom_status matmul_quant(cuda_backend *be, loom_dtype type, const cuda_matmul_shape *s,
				const cuda_matmul_group *group, int x_rows, void *work, int node_index)
{
	cuda_block_q8_1 *x = (cuda_block_q8_1 *)work;
	if (!cuda_q8_1_ready(be, node_index)) {
		cuda_quantize_q8_1(be->stream, s->x, s->n_in, x_rows, x);
		loom_status st = cuda_launched(be, "quantizing a matmul's activations to q8_1");
		if (st != LOOM_OK)
			return st;
	}
	switch (type) {
	case LOOM_DTYPE_Q4_0: return matmul_quant_typed<LOOM_DTYPE_Q4_0>(be, s, group, x);
	case LOOM_DTYPE_Q4_1: return matmul_quant_typed<LOOM_DTYPE_Q4_1>(be, s, group, x);
	case LOOM_DTYPE_Q5_0: return matmul_quant_typed<LOOM_DTYPE_Q5_0>(be, s, group, x);
	case LOOM_DTYPE_Q5_1: return matmul_quant_typed<LOOM_DTYPE_Q5_1>(be, s, group, x);
	case LOOM_DTYPE_Q8_0: return matmul_quant_typed<LOOM_DTYPE_Q8_0>(be, s, group, x);
	case LOOM_DTYPE_Q2_K: return matmul_quant_typed<LOOM_DTYPE_Q2_K>(be, s, group, x);
	case LOOM_DTYPE_Q3_K: return matmul_quant_typed<LOOM_DTYPE_Q3_K>(be, s, group, x);
	case LOOM_DTYPE_Q4_K: return matmul_quant_typed<LOOM_DTYPE_Q4_K>(be, s, group, x);
	case LOOM_DTYPE_Q5_K: return matmul_quant_typed<LOOM_DTYPE_Q5_K>(be, s, group, x);
	case LOOM_DTYPE_Q6_K: return matmul_quant_typed<LOOM_DTYPE_Q6_K>(be, s, group, x);
	case LOOM_DTYPE_MXFP4: return matmul_quant_typed<LOOM_DTYPE_MXFP4>(be, s, group, x);
	default: break;
	}
	be->host->set_error("cuda: matmul: no quantized kernel for %s", loom_dtype_traits_of(type).name);
	return LOOM_ERR_UNSUPPORTED;
}

loom_status cuda_matmul_quant(cuda_backend *be, loom_dtype type, const cuda_matmul_shape *s, int x_rows, void *work,
			      int node_index)
{
	return matmul_quant(be, type, s, nullptr, x_rows, work, node_index);
}

loom_status cuda_matmul_quant_group(cuda_backend *be, const loom_node *nodes, int n, void *work, int first_index)
{
	cuda_matmul_group g = {};
	g.n = n;
	for (int m = 0; m < n; m++) {
		const loom_tensor *w = nodes[m].src[0];
		g.w[m] = (const char *)w->data;
		g.w_stride[m] = w->nb[1];
		g.n_out[m] = (int)w->ne[1];
		g.y[m] = (float *)nodes[m].dst->data;
	}
	cuda_matmul_shape s = cuda_matmul_shape_of(&nodes[0]);
	return matmul_quant(be, nodes[0].src[0]->dtype, &s, &g, 1, work, first_index);
}
