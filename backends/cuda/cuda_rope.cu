/*
 * cuda_rope.cu - LOOM_OP_ROPE, rotary position embedding, computing the
 * angles exactly as the CPU backend (and ggml) does.
 *
 * Pair i's angle starts from theta = pos * theta_scale^i taken as an
 * iterated f32 product, not a power, so a thread finding it repeats the i
 * multiplications. What depends only on the node (theta_scale, YaRN's ramp
 * and magnitude) is computed on the host with the same C library calls as
 * the CPU backend; the device does the per-pair f32 arithmetic in the same
 * order, without fused multiply-adds except the one YaRN specifies.
 *
 * One thread block per token: it fills a table of cos/sin for a chunk of
 * pairs, then rotates that chunk in all the token's heads. A layer's RoPE
 * of q and of k and its stores of k and v in the cache run as one kernel
 * (cuda_fusion.h): one table serves both ropes, and each block stores its
 * token's rows once its rotations are written.
 */
#include "cuda_backend.cuh"
#include "cuda_dequant.cuh"

#include <cmath>

#define ROPE_THREADS 256
#define ROPE_CHUNK 256 /* pairs whose angles a block holds at a time */
#define ROPE_MAX_BLOCKS (1 << 20)

static bool rope_supports(const loom_node *node)
{
	const loom_tensor *x = node->src[0], *pos = node->src[1], *y = node->dst;
	int n_rot = node->ip[0], style = node->ip[1];

	if (!loom_tensor_is(x, LOOM_DTYPE_F32) || !loom_tensor_is(y, LOOM_DTYPE_F32) || !loom_tensor_same_shape(x, y) ||
	    x->ne[3] != 1)
		return false;
	if (!loom_tensor_is(pos, LOOM_DTYPE_I32) || !loom_tensor_is_vector(pos) || pos->ne[0] != x->ne[2])
		return false;
	if (n_rot <= 0 || n_rot % 2 != 0 || n_rot > x->ne[0])
		return false;
	const loom_tensor *ff = node->src[2];
	if (ff != NULL && (!loom_tensor_is(ff, LOOM_DTYPE_F32) || !loom_tensor_is_vector(ff) || ff->ne[0] != n_rot / 2))
		return false;
	if (node->fp[2] > 0 && node->ip[2] <= 0)
		return false;
	return style == LOOM_ROPE_NORMAL || style == LOOM_ROPE_NEOX;
}

/* How a node's angles are scaled, all but the per-pair work. */
struct rope_scaling {
	float theta_scale; /* base^(-2/n_rot) */
	float freq_scale;
	const float *freq_factors; /* NULL: all 1 */
	float ext_factor;
	float mscale; /* cos and sin are multiplied by this */
	float corr_low, corr_high; /* YaRN's ramp, in pairs */
};

/* The pair whose wavelength turns `turns` times in the original context,
 * as ggml computes it. */
static float yarn_corr_dim(int n_rot, int n_ctx_orig, float turns, float base)
{
	return (float)n_rot * logf((float)n_ctx_orig / (turns * 2.0f * (float)M_PI)) / (2.0f * logf(base));
}

static rope_scaling scaling_of(const loom_node *node)
{
	int n_rot = node->ip[0];
	float base = node->fp[0];
	rope_scaling s = {};

	s.theta_scale = powf(base, -2.0f / (float)n_rot);
	s.freq_scale = node->fp[1];
	s.freq_factors = node->src[2] != NULL ? (const float *)node->src[2]->data : NULL;
	s.ext_factor = node->fp[2];
	s.mscale = node->fp[3] != 0.0f ? node->fp[3] : 1.0f;
	if (s.ext_factor > 0) {
		float low = floorf(yarn_corr_dim(n_rot, node->ip[2], node->fp[4], base));
		float high = ceilf(yarn_corr_dim(n_rot, node->ip[2], node->fp[5], base));
		s.corr_low = low > 0 ? low : 0;
		s.corr_high = high < (float)(n_rot - 1) ? high : (float)(n_rot - 1);
		s.mscale *= 1.0f + 0.1f * logf(1.0f / s.freq_scale);
	}
	return s;
}

/* cs[0], cs[1] = cos, sin of pair i's angle at position pos. */
static __device__ void rope_angle(int32_t pos, int i, const rope_scaling &s, float *cs)
{
	float theta = (float)pos;
	for (int k = 0; k < i; k++)
		theta *= s.theta_scale;
	float unscaled = s.freq_factors != NULL ? theta / s.freq_factors[i] : theta;
	float angle = s.freq_scale * unscaled;
	if (s.ext_factor > 0) {
		float y = ((float)i - s.corr_low) / fmaxf(0.001f, s.corr_high - s.corr_low);
		float mix = (1.0f - fminf(1.0f, fmaxf(0.0f, y))) * s.ext_factor;
		angle = fmaf(angle, 1.0f - mix, unscaled * mix);
	}
	float sin_a, cos_a;
	sincosf(angle, &sin_a, &cos_a);
	cs[0] = cos_a * s.mscale;
	cs[1] = sin_a * s.mscale;
}

/* What a kernel rotates: rows are (head, token), {head_dim, n_heads,
 * n_tokens}. */
struct rope_rows {
	cuda_rows y, x;
	int64_t n_heads;
};

static rope_rows rope_rows_of(const loom_node *node)
{
	rope_rows r = {cuda_rows_of(node->dst), cuda_rows_of(node->src[0]), node->src[0]->ne[1]};
	return r;
}

/* Pairs p0..p0+len of token t's heads, with cs the table of their angles.
 * Pair i is (i * step, i * step + off): step 2, off 1 for NORMAL, step 1,
 * off n_rot/2 for NEOX. */
static __device__ __forceinline__ void rope_chunk(const rope_rows &r, int64_t t, const float *cs, int p0, int len,
						  int step, int off)
{
	for (int64_t e = threadIdx.x; e < r.n_heads * len; e += ROPE_THREADS) {
		int64_t h = e / len;
		int k = (int)(e % len), i = p0 + k;
		const float *xr = (const float *)(r.x.data + h * r.x.nb1 + t * r.x.nb2);
		float *yr = (float *)(r.y.data + h * r.y.nb1 + t * r.y.nb2);
		float c = cs[2 * k], sn = cs[2 * k + 1];
		float x0 = xr[i * step], x1 = xr[i * step + off];
		yr[i * step] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, sn));
		yr[i * step + off] = __fadd_rn(__fmul_rn(x0, sn), __fmul_rn(x1, c));
	}
}

/* Token t's dimensions past n_rot, copied where y is not x. */
static __device__ __forceinline__ void rope_tail(const rope_rows &r, int64_t t, int64_t head_dim, int n_rot)
{
	if (r.x.data == r.y.data)
		return;
	int64_t tail = head_dim - n_rot;
	for (int64_t e = threadIdx.x; e < r.n_heads * tail; e += ROPE_THREADS) {
		int64_t h = e / tail, d = n_rot + e % tail;
		((float *)(r.y.data + h * r.y.nb1 + t * r.y.nb2))[d] =
			((const float *)(r.x.data + h * r.x.nb1 + t * r.x.nb2))[d];
	}
}

/* A node's angles: its scaling, positions, head size and rotated
 * dimensions, and style. */
struct rope_angles {
	rope_scaling s;
	const int32_t *positions;
	int64_t head_dim;
	int n_rot;
	bool neox;
};

static rope_angles rope_angles_of(const loom_node *node)
{
	rope_angles g = {scaling_of(node), (const int32_t *)node->src[1]->data, node->src[0]->ne[0], node->ip[0],
			 node->ip[1] == LOOM_ROPE_NEOX};
	return g;
}

/* Token t of a and, where b has heads, of b: both rotated by one table of
 * angles, a chunk of ROPE_CHUNK pairs at a time. */
static __device__ __forceinline__ void rope_token(const rope_rows &a, const rope_rows &b, int64_t t,
						  const rope_angles &g, float *cs)
{
	int n_pairs = g.n_rot / 2, step = g.neox ? 1 : 2, off = g.neox ? n_pairs : 1;
	for (int p0 = 0; p0 < n_pairs; p0 += ROPE_CHUNK) {
		int len = n_pairs - p0 < ROPE_CHUNK ? n_pairs - p0 : ROPE_CHUNK;
		for (int k = threadIdx.x; k < len; k += ROPE_THREADS)
			rope_angle(g.positions[t], p0 + k, g.s, cs + 2 * k);
		__syncthreads();
		rope_chunk(a, t, cs, p0, len, step, off);
		rope_chunk(b, t, cs, p0, len, step, off);
		/* The table is refilled for the next chunk or token. */
		__syncthreads();
	}
	rope_tail(a, t, g.head_dim, g.n_rot);
	rope_tail(b, t, g.head_dim, g.n_rot);
}

static __global__ void rope_kernel(rope_rows r, rope_angles g, int64_t n_tokens)
{
	__shared__ float cs[2 * ROPE_CHUNK];
	const rope_rows none = {};
	for (int64_t t = blockIdx.x; t < n_tokens; t += gridDim.x)
		rope_token(r, none, t, g, cs);
}

static unsigned rope_blocks(int64_t n_tokens)
{
	return (unsigned)(n_tokens < ROPE_MAX_BLOCKS ? n_tokens : ROPE_MAX_BLOCKS);
}

static loom_status rope_run(cuda_backend *be, const loom_node *node, void *, int)
{
	int64_t n_tokens = node->src[0]->ne[2];

	rope_kernel<<<rope_blocks(n_tokens), ROPE_THREADS, 0, be->stream>>>(rope_rows_of(node), rope_angles_of(node),
									   n_tokens);
	return cuda_launched(be, "rope");
}

/* ---- a layer's attention prologue (cuda_fusion.h) ---- */

/* One of the stores: row t of src to cache row cells[t]. */
struct rope_store_rows {
	cuda_rows src, cache;
	int64_t n;
	int node; /* its index in the step, for a bad cell */
};

/* Encoded as KV_STORE's own kernel does (cuda_rows.cu). */
template <bool F16> static __device__ __forceinline__ void store_row(const rope_store_rows &s, int64_t t, int32_t cell)
{
	const float *x = (const float *)cuda_row(s.src, t);
	char *y = cuda_row(s.cache, cell);
	for (int64_t i = threadIdx.x; i < s.n; i += ROPE_THREADS) {
		if (F16)
			((uint16_t *)y)[i] = cuda_f16_encode(x[i]);
		else
			((float *)y)[i] = x[i];
	}
}

/* A block per token: q and k rotated (where ROTATE), then, once the
 * block's rotations are written, k's and v's rows stored in the token's
 * cell. A cell outside [0, n_cells) marks both stores' nodes, as their
 * own kernels would, and the token's rows are left alone. */
template <bool F16, bool ROTATE>
static __global__ void rope_store_kernel(rope_rows q, rope_rows k, rope_angles g, rope_store_rows sk,
					 rope_store_rows sv, const int32_t *cells, int64_t n_cells, int64_t n_tokens,
					 int *bad_node)
{
	__shared__ float cs[2 * ROPE_CHUNK];
	for (int64_t t = blockIdx.x; t < n_tokens; t += gridDim.x) {
		if (ROTATE) {
			rope_token(q, k, t, g, cs);
			__syncthreads();
		}
		int32_t cell = cells[t];
		if (cell < 0 || cell >= n_cells) {
			if (threadIdx.x == 0) {
				cuda_fail(bad_node, sk.node);
				cuda_fail(bad_node, sv.node);
			}
			continue;
		}
		store_row<F16>(sk, t, cell);
		store_row<F16>(sv, t, cell);
	}
}

static rope_store_rows store_rows_of(const loom_node *node, int node_index)
{
	rope_store_rows r = {cuda_rows_of(node->src[0]), cuda_rows_of(node->dst), node->dst->ne[0], node_index};
	return r;
}

loom_status cuda_rope_store_run(cuda_backend *be, const loom_node *nodes, bool rotates, int first_index)
{
	const loom_node *store_k = &nodes[rotates ? 2 : 0], *store_v = store_k + 1;
	const loom_tensor *cells = store_k->src[1];
	int64_t n_tokens = cells->ne[0];
	int store_index = first_index + (rotates ? 2 : 0);
	rope_store_rows sk = store_rows_of(store_k, store_index), sv = store_rows_of(store_v, store_index + 1);
	/* The ropes share positions and angles (cuda_fusion.c): q's serve. */
	rope_rows q = {}, k = {};
	rope_angles g = {};
	if (rotates) {
		q = rope_rows_of(&nodes[0]);
		k = rope_rows_of(&nodes[1]);
		g = rope_angles_of(&nodes[0]);
	}
	const bool f16 = store_k->dst->dtype == LOOM_DTYPE_F16;
	auto kernel = f16 ? (rotates ? rope_store_kernel<true, true> : rope_store_kernel<true, false>)
			  : (rotates ? rope_store_kernel<false, true> : rope_store_kernel<false, false>);
	kernel<<<rope_blocks(n_tokens), ROPE_THREADS, 0, be->stream>>>(q, k, g, sk, sv, (const int32_t *)cells->data,
									store_k->dst->ne[1], n_tokens, be->bad_node);
	return cuda_launched(be, rotates ? "rope and kv_store" : "kv_store of k and v");
}

const cuda_op cuda_op_rope = {rope_supports, NULL, rope_run};
