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
 * pairs, then rotates that chunk in all the token's heads.
 */
#include "cuda_backend.cuh"

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

/* Rows are (head, token): x is {head_dim, n_heads, n_tokens}. Pair i is
 * (i * step, i * step + off): step 2, off 1 for NORMAL, step 1, off n_rot/2
 * for NEOX. */
static __global__ void rope_kernel(cuda_rows y, cuda_rows x, const int32_t *positions, rope_scaling s,
				   int64_t head_dim, int64_t n_heads, int64_t n_tokens, int n_rot, bool neox)
{
	__shared__ float cs[2 * ROPE_CHUNK];
	int n_pairs = n_rot / 2, step = neox ? 1 : 2, off = neox ? n_pairs : 1;

	for (int64_t t = blockIdx.x; t < n_tokens; t += gridDim.x) {
		int32_t pos = positions[t];
		for (int p0 = 0; p0 < n_pairs; p0 += ROPE_CHUNK) {
			int len = n_pairs - p0 < ROPE_CHUNK ? n_pairs - p0 : ROPE_CHUNK;
			for (int k = threadIdx.x; k < len; k += ROPE_THREADS)
				rope_angle(pos, p0 + k, s, cs + 2 * k);
			__syncthreads();
			for (int64_t e = threadIdx.x; e < n_heads * len; e += ROPE_THREADS) {
				int64_t h = e / len;
				int k = (int)(e % len), i = p0 + k;
				const float *xr = (const float *)(x.data + h * x.nb1 + t * x.nb2);
				float *yr = (float *)(y.data + h * y.nb1 + t * y.nb2);
				float c = cs[2 * k], sn = cs[2 * k + 1];
				float x0 = xr[i * step], x1 = xr[i * step + off];
				yr[i * step] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, sn));
				yr[i * step + off] = __fadd_rn(__fmul_rn(x0, sn), __fmul_rn(x1, c));
			}
			/* The table is refilled for the next chunk or token. */
			__syncthreads();
		}
		if (x.data == y.data)
			continue;
		int64_t tail = head_dim - n_rot;
		for (int64_t e = threadIdx.x; e < n_heads * tail; e += ROPE_THREADS) {
			int64_t h = e / tail, d = n_rot + e % tail;
			((float *)(y.data + h * y.nb1 + t * y.nb2))[d] =
				((const float *)(x.data + h * x.nb1 + t * x.nb2))[d];
		}
	}
}

static loom_status rope_run(cuda_backend *be, const loom_node *node, void *, int)
{
	const loom_tensor *x = node->src[0], *y = node->dst;
	int64_t n_tokens = x->ne[2];

	rope_kernel<<<(unsigned)(n_tokens < ROPE_MAX_BLOCKS ? n_tokens : ROPE_MAX_BLOCKS), ROPE_THREADS, 0,
		      be->stream>>>(cuda_rows_of(y), cuda_rows_of(x), (const int32_t *)node->src[1]->data,
				    scaling_of(node), x->ne[0], x->ne[1], n_tokens, node->ip[0],
				    node->ip[1] == LOOM_ROPE_NEOX);
	return cuda_launched(be, "rope");
}

const cuda_op cuda_op_rope = {rope_supports, NULL, rope_run};
