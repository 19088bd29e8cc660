/*
 * cuda_matmul_id.cu - LOOM_OP_MATMUL_ID: each (token, slot) pair's row of
 * x times the matrix of the expert its id names, at every weight type
 * MATMUL takes, with MATMUL's kernels in their MATMUL_ID instances
 * (cuda_matmul.cuh):
 *  - up to CUDA_MATMUL_VEC_TOKENS tokens (a decode): the matrix-vector
 *    kernels, a grid row per pair, reading only the chosen experts' rows;
 *  - more (a prefill): one thread block groups the pairs by expert in work
 *    memory, in pair order within each, and cuts each expert's pairs into
 *    tiles of CUDA_MATMUL_TILE_TOKENS; the tiled kernels then take a tile
 *    per grid row, so each expert's weights are read once per tile of its
 *    tokens, and an expert no token chose not at all.
 * Quantized weights meet the Q8_1 blocks of every row of x, quantized once
 * into work memory, as MATMUL's do. An id outside [0, n_expert) marks the
 * node (compute fails) and its pair is left out.
 */
#include "cuda_matmul.cuh"

#include "cuda_blocks.cuh"

/* The grouping's shared memory holds (GROUP_WARPS + 2) ints an expert. */
#define CUDA_MOE_MAX_EXPERTS 1024
#define GROUP_WARPS 8
#define WORK_ALIGN 256

static bool is_vec(const loom_node *node)
{
	return node->src[2]->ne[1] <= CUDA_MATMUL_VEC_TOKENS;
}

static int64_t n_pairs_of(const loom_node *node)
{
	return node->src[2]->ne[0] * node->src[2]->ne[1];
}

/* Grid rows of the tiled kernels: each expert's pairs fill whole tiles
 * but its last, so at most n_pairs / tile + one more per expert chosen. */
static int64_t tiles_bound(const loom_node *node)
{
	int64_t n_pairs = n_pairs_of(node), n_expert = node->src[0]->ne[2];
	return (n_pairs + CUDA_MATMUL_TILE_TOKENS - 1) / CUDA_MATMUL_TILE_TOKENS + (n_expert < n_pairs ? n_expert : n_pairs);
}

static bool matmul_id_supports(const loom_node *node)
{
	const loom_tensor *w = node->src[0], *ids = node->src[2], *bias = node->src[3];

	if (!cuda_matmul_weight_ok(w) || w->ne[2] > CUDA_MOE_MAX_EXPERTS || !loom_matmul_id_node_ok(node))
		return false;
	if (ids->nb[1] % sizeof(int32_t) != 0 || (bias != NULL && bias->nb[1] % sizeof(float) != 0))
		return false;
	if (!cuda_matmul_f32_strides_ok(node->src[1]) || !cuda_matmul_f32_strides_ok(node->dst))
		return false;
	/* Pairs are grid rows of the vector kernels, tiles of the tiled ones. */
	return is_vec(node) ? n_pairs_of(node) <= CUDA_MATMUL_MAX_GRID_Y : tiles_bound(node) <= CUDA_MATMUL_MAX_GRID_Y;
}

static size_t align_up(size_t n)
{
	return (n + WORK_ALIGN - 1) / WORK_ALIGN * WORK_ALIGN;
}

/* Where a node's work memory goes: the Q8_1 rows of x (quantized
 * weights), then the grouping (tiled kernels): the pairs by expert and the
 * tiles. */
struct id_work {
	size_t pairs, tiles, end;
};

static id_work work_plan(const loom_node *node)
{
	const loom_tensor *w = node->src[0], *x = node->src[1];
	id_work p = {0, 0, 0};

	if (cuda_matmul_is_quant(w->dtype))
		p.pairs = align_up((size_t)loom_tensor_nrows(x) * (size_t)(x->ne[0] / CUDA_QK) * sizeof(cuda_block_q8_1));
	p.tiles = p.end = p.pairs;
	if (!is_vec(node)) {
		p.tiles = align_up(p.pairs + (size_t)n_pairs_of(node) * sizeof(int32_t));
		p.end = p.tiles + (size_t)tiles_bound(node) * sizeof(cuda_matmul_tile);
	}
	return p;
}

static size_t matmul_id_work_size(const loom_node *node)
{
	return work_plan(node).end;
}

/* ---- the grouping ----
 * One block: warp w takes pairs [w * chunk, (w + 1) * chunk) and counts
 * them by expert, the lanes of one expert (__match_any_sync) adding at
 * once through their lowest; the counts become each warp's first place
 * within each expert and the experts' first places and first tiles
 * (prefix sums); then each warp puts its pairs in their places, in order.
 * A pair with a bad id takes part in neither pass. Shared memory: start
 * and tile0 (n_expert + 1 each: expert e's pairs are [start[e],
 * start[e + 1]), its tiles [tile0[e], tile0[e + 1])), and a row of
 * n_expert counters per warp. */

/* The exclusive prefix sums of v[0 .. n), by one warp: lane l sums a run
 * of experts, the runs' sums are scanned across the lanes, and each lane
 * writes its run's prefix sums back. v[n] gets the total. */
static __device__ void group_scan(int *v, int n)
{
	int lane = threadIdx.x % 32, per = (n + 31) / 32;
	int e0 = min(n, lane * per), e1 = min(n, e0 + per), sum = 0;
	for (int e = e0; e < e1; e++)
		sum += v[e];
	int inclusive = sum;
	for (int offset = 1; offset < 32; offset <<= 1) {
		int up = __shfl_up_sync(0xffffffffu, inclusive, offset);
		if (lane >= offset)
			inclusive += up;
	}
	int run = inclusive - sum;
	for (int e = e0; e < e1; e++) {
		int c = v[e];
		v[e] = run;
		run += c;
	}
	if (lane == 31)
		v[n] = inclusive;
}

static __global__ void __launch_bounds__(32 * GROUP_WARPS)
	group_pairs(cuda_matmul_route r, int n_pairs, int32_t *pairs, cuda_matmul_tile *tiles)
{
	extern __shared__ int group_shared[];
	const int n_expert = r.n_expert;
	int *start = group_shared, *tile0 = start + n_expert + 1, *next = tile0 + n_expert + 1;
	int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
	int chunk = (n_pairs + GROUP_WARPS - 1) / GROUP_WARPS;
	int lo = min(n_pairs, warp * chunk), hi = min(n_pairs, lo + chunk);
	int *mine = next + warp * n_expert;

	for (int i = tid; i < GROUP_WARPS * n_expert; i += blockDim.x)
		next[i] = 0;
	__syncthreads();
	for (int base = lo; base < hi; base += 32) {
		int e = base + lane < hi ? cuda_route_expert(r, base + lane) : -1;
		unsigned same = __match_any_sync(0xffffffffu, e);
		if (e >= 0 && lane == __ffs(same) - 1)
			mine[e] += __popc(same);
		__syncwarp();
	}
	__syncthreads();

	/* Per expert: each warp's count becomes its first place among the
	 * expert's pairs; the expert's total and its tiles. */
	for (int e = tid; e < n_expert; e += blockDim.x) {
		int total = 0;
		for (int w = 0; w < GROUP_WARPS; w++) {
			int c = next[w * n_expert + e];
			next[w * n_expert + e] = total;
			total += c;
		}
		start[e] = total;
		tile0[e] = (total + CUDA_MATMUL_TILE_TOKENS - 1) / CUDA_MATMUL_TILE_TOKENS;
	}
	__syncthreads();
	if (warp == 0) {
		group_scan(start, n_expert);
		group_scan(tile0, n_expert);
	}
	__syncthreads();

	/* The tiles: each expert's in order, then the empty rest. */
	for (int e = tid; e < n_expert; e += blockDim.x) {
		int count = start[e + 1] - start[e];
		for (int t = tile0[e], first = 0; t < tile0[e + 1]; t++, first += CUDA_MATMUL_TILE_TOKENS) {
			cuda_matmul_tile tile = {e, start[e] + first, min(CUDA_MATMUL_TILE_TOKENS, count - first)};
			tiles[t] = tile;
		}
	}
	for (int t = tile0[n_expert] + tid; t < r.n_tiles; t += blockDim.x) {
		cuda_matmul_tile none = {0, 0, 0};
		tiles[t] = none;
	}

	/* Each warp's pairs to their places, lane order within a group. */
	for (int base = lo; base < hi; base += 32) {
		int e = base + lane < hi ? cuda_route_expert(r, base + lane) : -1;
		unsigned same = __match_any_sync(0xffffffffu, e);
		if (e >= 0)
			pairs[start[e] + mine[e] + __popc(same & ((1u << lane) - 1))] = base + lane;
		__syncwarp();
		if (e >= 0 && lane == __ffs(same) - 1)
			mine[e] += __popc(same);
		__syncwarp();
	}
}

static loom_status matmul_id_run(cuda_backend *be, const loom_node *node, void *work, int node_index)
{
	const loom_tensor *w = node->src[0], *x = node->src[1], *ids = node->src[2], *bias = node->src[3];
	const id_work plan = work_plan(node);
	cuda_matmul_shape s = cuda_matmul_shape_of(node);
	cuda_matmul_route &r = s.route;

	r.ids = (const char *)ids->data;
	r.ids_stride = ids->nb[1];
	r.k = (int)ids->ne[0];
	r.n_expert = (int)w->ne[2];
	r.w_expert = w->nb[2];
	r.x_per_slot = x->ne[1] != 1;
	r.bias = bias != NULL ? (const char *)bias->data : NULL;
	r.bias_stride = bias != NULL ? bias->nb[1] : 0;
	r.bad_node = be->bad_node;
	r.node = node_index;
	if (!is_vec(node)) {
		int32_t *pairs = (int32_t *)((char *)work + plan.pairs);
		cuda_matmul_tile *tiles = (cuda_matmul_tile *)((char *)work + plan.tiles);
		r.pairs = pairs;
		r.tiles = tiles;
		r.n_tiles = (int)tiles_bound(node);
		size_t shared = (size_t)(2 * (r.n_expert + 1) + GROUP_WARPS * r.n_expert) * sizeof(int);
		group_pairs<<<1, 32 * GROUP_WARPS, shared, be->stream>>>(r, s.n_tokens, pairs, tiles);
		loom_status st = cuda_launched(be, "grouping a matmul_id's pairs by expert");
		if (st != LOOM_OK)
			return st;
	}
	if (cuda_matmul_is_quant(w->dtype))
		return cuda_matmul_quant(be, w->dtype, &s, (int)loom_tensor_nrows(x), work, node_index);
	return cuda_matmul_float(be, w->dtype, &s);
}

const cuda_op cuda_op_matmul_id = {
	.supports = matmul_id_supports,
	.work_size = matmul_id_work_size,
	.run = matmul_id_run,
};
