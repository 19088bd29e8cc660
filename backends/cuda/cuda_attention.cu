/*
 * cuda_attention.cu - LOOM_OP_ATTENTION: softmax(q.K^T * scale + mask) V
 * for every (token, query head), one thread block each.
 *
 * A block computes all its scores, then their maximum and the sum of the
 * exponentials, then the probability-weighted sum of the values: the
 * probabilities are final before they weight V, so they round to fp16 for
 * an F16 cache exactly as on the CPU (llama.cpp's non-flash path), and q
 * rounds to fp16 before the dot products with F16 keys. The sum of the
 * exponentials is kept in double, as ggml's soft_max does.
 *
 * Warps take the cache cells a few at a time, the lanes splitting the
 * head's dimensions, so each cell's row slice is read in one coalesced
 * sweep. Masked cells (and cells of zero weight) are never read: they may
 * never have been written.
 *
 * A soft-cap (fp[1]) bends each score before its mask adds; a head's sink
 * (src[4]) joins the maximum and the sum of the exponentials.
 *
 * Scores live in shared memory when the cache is short; otherwise in work
 * memory, a row of n_kv floats per block, the blocks launched in groups so
 * that the work memory stays bounded however long the context. With the
 * scores in shared memory the result is written as Q8_1 rows too where
 * the next product reads it (cuda_q8_1_reuse.h): the work memory is then
 * the product's alone.
 *
 * A decode over a long cache has too few rows (a token's heads) to fill
 * the GPU with a block each, and each block would walk the whole cache on
 * its own. Such rows are split over the cache instead, in four launches:
 * blocks of (row, ATTN_SPLIT_CELLS cells) write their scores into the
 * row's scores in work memory; a block per row turns the row into
 * exponentials and the reciprocal of their sum, exactly as above; blocks
 * of (row, cells) weight their cells' values by the final probabilities
 * into a partial sum each; a block per row adds the partial sums. The
 * probabilities are the same numbers as unsplit; only the order in which
 * the weighted values are added differs.
 */
#include "cuda_backend.cuh"
#include "cuda_quantize_q8_1.cuh"

#define ATTN_THREADS 256
#define ATTN_WARPS (ATTN_THREADS / 32)
#define ATTN_CELLS 4          /* cells a warp works on at once */
#define ATTN_DIMS_PER_LANE 8  /* output dimensions a lane accumulates at once */
#define ATTN_DIM_CHUNK (32 * ATTN_DIMS_PER_LANE)
#define ATTN_SHARED_CELLS 4096 /* up to this many scores stay in shared memory */
#define ATTN_MAX_HEAD_DIM 2048 /* q is held in shared memory */
#define ATTN_WORK_BYTES ((size_t)128 << 20) /* score rows of one launch, beyond the shared case */
#define ATTN_MAX_BLOCKS ((int64_t)1 << 30)
#define ATTN_SPLIT_CELLS 256   /* cells of a split row's block */
#define ATTN_SPLIT_MAX_ROWS 512 /* more rows fill the GPU unsplit */

static bool attention_supports(const loom_node *node)
{
	const loom_tensor *q = node->src[0], *k = node->src[1], *v = node->src[2];
	const loom_tensor *mask = node->src[3], *sinks = node->src[4], *y = node->dst;
	int n_head = node->ip[0], n_head_kv = node->ip[1];

	if (!loom_tensor_is(q, LOOM_DTYPE_F32) || !loom_tensor_is(y, LOOM_DTYPE_F32) || q->ne[3] != 1 ||
	    q->ne[0] > ATTN_MAX_HEAD_DIM)
		return false;
	if (n_head != q->ne[1] || n_head_kv <= 0 || n_head % n_head_kv != 0)
		return false;
	if (!loom_tensor_is(k, LOOM_DTYPE_F32) && !loom_tensor_is(k, LOOM_DTYPE_F16))
		return false;
	if (!loom_tensor_is(v, k->dtype) || !loom_tensor_same_shape(k, v) || k->ne[2] != 1 || k->ne[3] != 1 ||
	    k->ne[0] != q->ne[0] * n_head_kv)
		return false;
	if (mask != NULL && (!loom_tensor_is(mask, LOOM_DTYPE_F32) || mask->ne[0] != k->ne[1] ||
			     mask->ne[1] != q->ne[2] || mask->ne[2] != 1 || mask->ne[3] != 1))
		return false;
	if (sinks != NULL && (!loom_tensor_is(sinks, LOOM_DTYPE_F32) || !loom_tensor_is_vector(sinks) ||
			      sinks->ne[0] != n_head))
		return false;
	if (!(node->fp[1] >= 0.0f && node->fp[1] < INFINITY))
		return false;
	return y->ne[0] == q->ne[0] * n_head && y->ne[1] == q->ne[2] && y->ne[2] == 1 && y->ne[3] == 1;
}

static int64_t rows_of(const loom_node *node)
{
	return node->src[0]->ne[1] * node->src[0]->ne[2];
}

static int64_t split_chunks(int64_t n_kv)
{
	return (n_kv + ATTN_SPLIT_CELLS - 1) / ATTN_SPLIT_CELLS;
}

/* Whether the rows are split over the cache (few rows, a long cache; its
 * chunks within a grid's second dimension). */
static bool split_rows(const loom_node *node)
{
	int64_t n_kv = node->src[1]->ne[1];
	return rows_of(node) <= ATTN_SPLIT_MAX_ROWS && n_kv > 2 * ATTN_SPLIT_CELLS && split_chunks(n_kv) <= 65535;
}

static bool scores_in_shared(const loom_node *node)
{
	return !split_rows(node) && node->src[1]->ne[1] <= ATTN_SHARED_CELLS;
}

/* Work memory a row takes: its scores; split, also the reciprocal of its
 * sum and a partial output per chunk. */
static size_t row_work_bytes(const loom_node *node)
{
	int64_t n_kv = node->src[1]->ne[1];
	size_t bytes = (size_t)n_kv * sizeof(float);
	if (split_rows(node))
		bytes += sizeof(float) + (size_t)split_chunks(n_kv) * (size_t)node->src[0]->ne[0] * sizeof(float);
	return bytes;
}

/* Blocks (score rows) per launch. */
static int64_t rows_per_launch(const loom_node *node)
{
	int64_t rows = rows_of(node), most = ATTN_MAX_BLOCKS;
	if (!scores_in_shared(node)) {
		most = (int64_t)(ATTN_WORK_BYTES / row_work_bytes(node));
		most = most > 0 ? most : 1;
	}
	return rows < most ? rows : most;
}

static size_t attention_work_size(const loom_node *node)
{
	if (scores_in_shared(node))
		return 0;
	return (size_t)rows_per_launch(node) * row_work_bytes(node);
}

struct attn_args {
	cuda_rows q;        /* rows (head, token) */
	cuda_rows mask;     /* data NULL: no mask */
	cuda_rows y;        /* rows: tokens */
	const char *k, *v;  /* the caches: cell j at j * nb1 */
	size_t k_nb1, v_nb1;
	int64_t head_dim, n_head, group, n_kv; /* group: query heads per kv head */
	float scale;
	float cap, cap_inv;  /* soft-cap and f32(1 / it); cap 0: none */
	const float *sinks;  /* [n_head] or NULL */
	float *scores;      /* work memory, a row per block; NULL: shared */
	float *inv;         /* split: each row's reciprocal of its sum */
	float *partial;     /* split: each row's chunks' partial outputs, head_dim floats each */
	int64_t n_chunks;   /* split: chunks of ATTN_SPLIT_CELLS cells a row */
	cuda_block_q8_1 *q8; /* unsplit: where the result goes as Q8_1 rows too (y's rows of y_n), or NULL */
	int64_t y_n;
};

/* The maximum of v over the block, the same in every thread; scratch holds
 * one value per warp and is free again when this returns. */
static __device__ float block_max(float v, float *scratch)
{
	v = cuda_warp_max(v);
	if (threadIdx.x % 32 == 0)
		scratch[threadIdx.x / 32] = v;
	__syncthreads();
	float m = -INFINITY;
	for (int w = 0; w < ATTN_WARPS; w++)
		m = fmaxf(m, scratch[w]);
	__syncthreads();
	return m;
}

/* scores[j] = q.k_j * scale, soft-capped, + mask[j] for cells [lo, hi);
 * -inf for masked cells. */
template <typename T>
static __device__ void attention_scores(const attn_args &a, const float *q, const float *mask, size_t slice,
					float *scores, int64_t lo, int64_t hi)
{
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

	for (int64_t j0 = lo + (int64_t)warp * ATTN_CELLS; j0 < hi; j0 += ATTN_WARPS * ATTN_CELLS) {
		const T *k[ATTN_CELLS];
		float dot[ATTN_CELLS];
#pragma unroll
		for (int c = 0; c < ATTN_CELLS; c++) {
			int64_t j = j0 + c;
			bool live = j < hi && (mask == NULL || mask[j] != -INFINITY);
			k[c] = live ? (const T *)(a.k + j * a.k_nb1) + slice : NULL;
			dot[c] = 0.0f;
		}
		for (int64_t d = lane; d < a.head_dim; d += 32) {
			float qd = q[d];
#pragma unroll
			for (int c = 0; c < ATTN_CELLS; c++)
				if (k[c] != NULL)
					dot[c] += qd * cuda_to_f32(k[c][d]);
		}
#pragma unroll
		for (int c = 0; c < ATTN_CELLS; c++) {
			int64_t j = j0 + c;
			float s = cuda_warp_sum(dot[c]);
			if (lane != 0 || j >= hi)
				continue;
			/* Rounded as the CPU's separate multiply and add. */
			float scaled = __fmul_rn(s, a.scale);
			if (a.cap > 0.0f)
				scaled = __fmul_rn(a.cap, tanhf(__fmul_rn(scaled, a.cap_inv)));
			scores[j] = k[c] == NULL ? -INFINITY : __fadd_rn(scaled, mask != NULL ? mask[j] : 0.0f);
		}
	}
}

/* Turns the scores into exponentials and returns the reciprocal of their
 * sum (with e^(sink - max) for head h's sink): 0 when every cell is
 * masked, which then weights every value by 0. */
static __device__ float attention_softmax(const attn_args &a, int64_t h, float *scores, float *scratch_f,
					  double *scratch_d)
{
	float m = -INFINITY;
	for (int64_t j = threadIdx.x; j < a.n_kv; j += ATTN_THREADS)
		m = fmaxf(m, scores[j]);
	m = block_max(m, scratch_f);
	bool seen = m != -INFINITY;
	if (seen && a.sinks != NULL)
		m = fmaxf(m, a.sinks[h]);

	double sum = 0.0;
	for (int64_t j = threadIdx.x; j < a.n_kv; j += ATTN_THREADS) {
		float e = seen ? expf(scores[j] - m) : 0.0f;
		scores[j] = e;
		sum += e;
	}
	sum = cuda_block_sum(sum, scratch_d, ATTN_WARPS);
	if (seen && a.sinks != NULL)
		sum += expf(a.sinks[h] - m);
	return sum > 0.0 ? (float)(1.0 / sum) : 0.0f;
}

/* out[d] = sum_j p_j * v_j[d] over cells [lo, hi), p_j = scores[j] * inv
 * rounded for T. Each warp sums its cells into registers, ATTN_DIM_CHUNK
 * dimensions at a time; the warps' sums meet in `partial`. With q8, out[d]
 * is element q8_first + d of Q8_1 rows there too: a warp's 32 lanes hold
 * 32 consecutive dimensions, one block (head_dim a multiple of 32). */
template <typename T>
static __device__ void attention_mix(const attn_args &a, const float *scores, float inv, size_t slice, float *out,
				     float (*partial)[ATTN_DIM_CHUNK], int64_t lo, int64_t hi, cuda_block_q8_1 *q8,
				     int64_t q8_first)
{
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

	for (int64_t d0 = 0; d0 < a.head_dim; d0 += ATTN_DIM_CHUNK) {
		float acc[ATTN_DIMS_PER_LANE];
#pragma unroll
		for (int i = 0; i < ATTN_DIMS_PER_LANE; i++)
			acc[i] = 0.0f;
		for (int64_t j0 = lo + (int64_t)warp * ATTN_CELLS; j0 < hi; j0 += ATTN_WARPS * ATTN_CELLS) {
#pragma unroll
			for (int c = 0; c < ATTN_CELLS; c++) {
				int64_t j = j0 + c;
				float p = j < hi ? cuda_round_to<T>(scores[j] * inv) : 0.0f;
				if (p == 0.0f)
					continue;
				const T *v = (const T *)(a.v + j * a.v_nb1) + slice + d0;
#pragma unroll
				for (int i = 0; i < ATTN_DIMS_PER_LANE; i++)
					if (d0 + lane + 32 * i < a.head_dim)
						acc[i] += p * cuda_to_f32(v[lane + 32 * i]);
			}
		}
#pragma unroll
		for (int i = 0; i < ATTN_DIMS_PER_LANE; i++)
			partial[warp][lane + 32 * i] = acc[i];
		__syncthreads();
		for (int64_t i = threadIdx.x; i < ATTN_DIM_CHUNK && d0 + i < a.head_dim; i += ATTN_THREADS) {
			float sum = 0.0f;
			for (int w = 0; w < ATTN_WARPS; w++)
				sum += partial[w][i];
			out[d0 + i] = sum;
			if (q8 != NULL)
				cuda_q8_1_from_warp(sum, q8 + (q8_first + d0 + i) / CUDA_QK);
		}
		/* partial is refilled by the next chunk. */
		__syncthreads();
	}
}

/* Block b computes query row row0 + b, that is token row / n_head, head
 * row % n_head. Dynamic shared memory: q (head_dim floats), then the
 * scores (n_kv floats) unless they are in work memory. */
template <typename T> static __global__ void attention_kernel(attn_args a, int64_t row0)
{
	extern __shared__ float shared[];
	__shared__ float partial[ATTN_WARPS][ATTN_DIM_CHUNK];
	__shared__ float scratch_f[ATTN_WARPS];
	__shared__ double scratch_d[ATTN_WARPS];

	int64_t row = row0 + blockIdx.x, t = row / a.n_head, h = row % a.n_head;
	float *q = shared;
	float *scores = a.scores != NULL ? a.scores + (int64_t)blockIdx.x * a.n_kv : shared + a.head_dim;
	const float *q_row = (const float *)cuda_row(a.q, row);
	const float *mask = a.mask.data != NULL ? (const float *)cuda_row(a.mask, t) : NULL;
	size_t slice = (size_t)(h / a.group * a.head_dim);

	for (int64_t d = threadIdx.x; d < a.head_dim; d += ATTN_THREADS)
		q[d] = cuda_round_to<T>(q_row[d]);
	__syncthreads();
	attention_scores<T>(a, q, mask, slice, scores, 0, a.n_kv);
	__syncthreads();
	float inv = attention_softmax(a, h, scores, scratch_f, scratch_d);
	attention_mix<T>(a, scores, inv, slice, (float *)cuda_row(a.y, t) + h * a.head_dim, partial, 0, a.n_kv, a.q8,
			 t * a.y_n + h * a.head_dim);
}

/* ---- rows split over the cache: block (x, y) is row row0 + x, chunk y ---- */

static __device__ int64_t split_lo(int64_t chunk)
{
	return chunk * ATTN_SPLIT_CELLS;
}

static __device__ int64_t split_hi(const attn_args &a, int64_t chunk)
{
	int64_t hi = (chunk + 1) * ATTN_SPLIT_CELLS;
	return hi < a.n_kv ? hi : a.n_kv;
}

/* The chunk's scores into the row's. Dynamic shared memory: q. */
template <typename T> static __global__ void split_scores_kernel(attn_args a, int64_t row0)
{
	extern __shared__ float q[];
	int64_t row = row0 + blockIdx.x, t = row / a.n_head, h = row % a.n_head;
	const float *q_row = (const float *)cuda_row(a.q, row);
	const float *mask = a.mask.data != NULL ? (const float *)cuda_row(a.mask, t) : NULL;

	for (int64_t d = threadIdx.x; d < a.head_dim; d += ATTN_THREADS)
		q[d] = cuda_round_to<T>(q_row[d]);
	__syncthreads();
	attention_scores<T>(a, q, mask, (size_t)(h / a.group * a.head_dim), a.scores + (int64_t)blockIdx.x * a.n_kv,
			    split_lo(blockIdx.y), split_hi(a, blockIdx.y));
}

/* A block per row: its scores into exponentials, and the reciprocal of
 * their sum. */
static __global__ void split_softmax_kernel(attn_args a, int64_t row0)
{
	__shared__ float scratch_f[ATTN_WARPS];
	__shared__ double scratch_d[ATTN_WARPS];
	int64_t row = row0 + blockIdx.x;

	float inv = attention_softmax(a, row % a.n_head, a.scores + (int64_t)blockIdx.x * a.n_kv, scratch_f, scratch_d);
	if (threadIdx.x == 0)
		a.inv[blockIdx.x] = inv;
}

/* The chunk's values weighted by the row's probabilities, into its
 * partial output. */
template <typename T> static __global__ void split_mix_kernel(attn_args a, int64_t row0)
{
	__shared__ float partial[ATTN_WARPS][ATTN_DIM_CHUNK];
	int64_t row = row0 + blockIdx.x, h = row % a.n_head;
	float *out = a.partial + ((int64_t)blockIdx.x * a.n_chunks + blockIdx.y) * a.head_dim;

	attention_mix<T>(a, a.scores + (int64_t)blockIdx.x * a.n_kv, a.inv[blockIdx.x],
			 (size_t)(h / a.group * a.head_dim), out, partial, split_lo(blockIdx.y), split_hi(a, blockIdx.y),
			 nullptr, 0);
}

/* A block per row: the chunks' partial outputs added, in chunk order. */
static __global__ void split_sum_kernel(attn_args a, int64_t row0)
{
	int64_t row = row0 + blockIdx.x, t = row / a.n_head, h = row % a.n_head;
	const float *part = a.partial + (int64_t)blockIdx.x * a.n_chunks * a.head_dim;
	float *y = (float *)cuda_row(a.y, t) + h * a.head_dim;

	for (int64_t d = threadIdx.x; d < a.head_dim; d += ATTN_THREADS) {
		float sum = 0.0f;
		for (int64_t c = 0; c < a.n_chunks; c++)
			sum += part[c * a.head_dim + d];
		y[d] = sum;
	}
}

/* Rows [row0, row0 + count) split over the cache: the four launches. */
template <typename T> static loom_status split_run(cuda_backend *be, const attn_args &a, int64_t row0, unsigned count)
{
	dim3 grid(count, (unsigned)a.n_chunks);
	split_scores_kernel<T><<<grid, ATTN_THREADS, (size_t)a.head_dim * sizeof(float), be->stream>>>(a, row0);
	split_softmax_kernel<<<count, ATTN_THREADS, 0, be->stream>>>(a, row0);
	split_mix_kernel<T><<<grid, ATTN_THREADS, 0, be->stream>>>(a, row0);
	split_sum_kernel<<<count, ATTN_THREADS, 0, be->stream>>>(a, row0);
	return cuda_launched(be, "split attention");
}

bool cuda_attention_writes_q8_1(const loom_node *node)
{
	return scores_in_shared(node) && node->src[0]->ne[0] % CUDA_QK == 0;
}

static loom_status attention_run(cuda_backend *be, const loom_node *node, void *work, int node_index)
{
	const loom_tensor *q = node->src[0], *k = node->src[1], *v = node->src[2], *mask = node->src[3];
	bool shared_scores = scores_in_shared(node);
	attn_args a = {};

	a.q = cuda_rows_of(q);
	if (mask != NULL)
		a.mask = cuda_rows_of(mask);
	a.y = cuda_rows_of(node->dst);
	a.k = (const char *)k->data;
	a.v = (const char *)v->data;
	a.k_nb1 = k->nb[1];
	a.v_nb1 = v->nb[1];
	a.head_dim = q->ne[0];
	a.n_head = node->ip[0];
	a.group = node->ip[0] / node->ip[1];
	a.n_kv = k->ne[1];
	a.scale = node->fp[0];
	a.cap = node->fp[1];
	a.cap_inv = a.cap > 0.0f ? 1.0f / a.cap : 0.0f;
	a.sinks = node->src[4] != NULL ? (const float *)node->src[4]->data : NULL;
	a.scores = shared_scores ? NULL : (float *)work;
	a.q8 = cuda_attention_writes_q8_1(node) ? cuda_q8_1_fused_out(be, node_index) : NULL;
	a.y_n = node->dst->ne[0];

	size_t shared_bytes = (size_t)(a.head_dim + (shared_scores ? a.n_kv : 0)) * sizeof(float);
	int64_t rows = rows_of(node), step = rows_per_launch(node);
	if (split_rows(node)) {
		a.n_chunks = split_chunks(a.n_kv);
		a.inv = a.scores + (size_t)step * (size_t)a.n_kv;
		a.partial = a.inv + step;
	}
	for (int64_t row0 = 0; row0 < rows; row0 += step) {
		unsigned blocks = (unsigned)(rows - row0 < step ? rows - row0 : step);
		if (split_rows(node)) {
			loom_status st = k->dtype == LOOM_DTYPE_F16 ? split_run<__half>(be, a, row0, blocks)
								    : split_run<float>(be, a, row0, blocks);
			if (st != LOOM_OK)
				return st;
			continue;
		}
		if (k->dtype == LOOM_DTYPE_F16)
			attention_kernel<__half><<<blocks, ATTN_THREADS, shared_bytes, be->stream>>>(a, row0);
		else
			attention_kernel<float><<<blocks, ATTN_THREADS, shared_bytes, be->stream>>>(a, row0);
		loom_status st = cuda_launched(be, "attention");
		if (st != LOOM_OK)
			return st;
	}
	return LOOM_OK;
}

const cuda_op cuda_op_attention = {attention_supports, attention_work_size, attention_run};
