/*
 * cpu_rope.c - LOOM_OP_ROPE, rotary position embedding.
 *
 * The angles are computed as ggml computes them, so that positions far into
 * the context rotate exactly as in llama.cpp: theta_scale = base^(-2/n_rot)
 * in f32, theta starts at the position and is multiplied by theta_scale for
 * each successive pair (an iterated f32 product, not a fresh power), and the
 * frequency scale multiplies each theta before cosf/sinf. Frequency
 * factors divide theta, and YaRN mixes the scaled and unscaled angles, as
 * ggml's rope does.
 */
#include "cpu_backend.h"

#include <math.h>

static bool rope_supports(const loom_node *node)
{
	const loom_tensor *x = node->src[0], *pos = node->src[1], *y = node->dst;
	int n_rot = node->ip[0], style = node->ip[1];

	if (!loom_tensor_is(x, LOOM_DTYPE_F32) || !loom_tensor_is(y, LOOM_DTYPE_F32) ||
	    !loom_tensor_same_shape(x, y) || x->ne[3] != 1)
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

/* Each thread keeps cos/sin of its current position: n_rot floats. */
static size_t rope_scratch_size(const loom_node *node, int n_threads)
{
	return (size_t)n_threads * cpu_align_up((size_t)node->ip[0] * sizeof(float));
}

/* The scaling of a node's angles. */
typedef struct rope_scaling {
	float base, freq_scale;
	const float *freq_factors; /* NULL: all 1 */
	float ext_factor, attn_factor;
	float corr_low, corr_high; /* YaRN's ramp, in pairs */
} rope_scaling;

/* The pair whose wavelength turns n_rot_turns times in the original
 * context, as ggml computes it. */
static float yarn_corr_dim(int n_rot, int n_ctx_orig, float turns, float base)
{
	return (float)n_rot * logf((float)n_ctx_orig / (turns * 2.0f * (float)M_PI)) / (2.0f * logf(base));
}

static rope_scaling scaling_of(const loom_node *node)
{
	int n_rot = node->ip[0];
	rope_scaling s = {
		.base = node->fp[0],
		.freq_scale = node->fp[1],
		.freq_factors = node->src[2] != NULL ? node->src[2]->data : NULL,
		.ext_factor = node->fp[2],
		.attn_factor = node->fp[3] != 0.0f ? node->fp[3] : 1.0f,
	};
	if (s.ext_factor > 0) {
		float low = floorf(yarn_corr_dim(n_rot, node->ip[2], node->fp[4], s.base));
		float high = ceilf(yarn_corr_dim(n_rot, node->ip[2], node->fp[5], s.base));
		s.corr_low = low > 0 ? low : 0;
		s.corr_high = high < (float)(n_rot - 1) ? high : (float)(n_rot - 1);
	}
	return s;
}

/* cs[2i], cs[2i+1] = cos, sin of pair i's angle at position pos. */
static void rope_angles(int32_t pos, int n_rot, const rope_scaling *s, float *cs)
{
	float theta_scale = powf(s->base, -2.0f / (float)n_rot);
	float theta = (float)pos;

	for (int i = 0; i < n_rot / 2; i++) {
		float unscaled = s->freq_factors != NULL ? theta / s->freq_factors[i] : theta;
		float angle = s->freq_scale * unscaled, mscale = s->attn_factor;
		if (s->ext_factor > 0) {
			float y = ((float)i - s->corr_low) / fmaxf(0.001f, s->corr_high - s->corr_low);
			float mix = (1.0f - fminf(1.0f, fmaxf(0.0f, y))) * s->ext_factor;
			/* One fused multiply-add, as ggml's compiled mix comes out on
			 * x86, whichever variant this is. */
			angle = fmaf(angle, 1.0f - mix, unscaled * mix);
			mscale *= 1.0f + 0.1f * logf(1.0f / s->freq_scale);
		}
		cs[2 * i] = cosf(angle) * mscale;
		cs[2 * i + 1] = sinf(angle) * mscale;
		theta *= theta_scale;
	}
}

/* Pair i is (x[i * step], x[i * step + off]): step 2, off 1 for NORMAL
 * (adjacent), step 1, off n_rot/2 for NEOX (halves). */
static void rope_row(const float *x, float *y, int64_t head_dim, int n_rot, int neox,
		     const float *cs)
{
	int step = neox ? 1 : 2, off = neox ? n_rot / 2 : 1;

	for (int i = 0; i < n_rot / 2; i++) {
		float c = cs[2 * i], s = cs[2 * i + 1];
		float x0 = x[i * step], x1 = x[i * step + off];
		y[i * step] = x0 * c - x1 * s;
		y[i * step + off] = x0 * s + x1 * c;
	}
	if (y != x)
		for (int64_t d = n_rot; d < head_dim; d++)
			y[d] = x[d];
}

static void rope_run(const loom_node *node, const cpu_task *task)
{
	const loom_tensor *x = node->src[0], *y = node->dst;
	const int32_t *pos = node->src[1]->data;
	int n_rot = node->ip[0], neox = node->ip[1] == LOOM_ROPE_NEOX;
	float *cs = (float *)(task->scratch +
			      (size_t)task->ith * cpu_align_up((size_t)n_rot * sizeof(float)));
	int64_t n_heads = x->ne[1], lo, hi, cached_token = -1;
	rope_scaling scaling = scaling_of(node);

	/* Rows are (token, head) pairs, token-major, so a thread's rows share
	 * few positions and the angles are recomputed only when one changes. */
	cpu_split(loom_tensor_nrows(x), task->ith, task->nth, &lo, &hi);
	for (int64_t r = lo; r < hi; r++) {
		int64_t t = r / n_heads;
		if (t != cached_token) {
			rope_angles(pos[t], n_rot, &scaling, cs);
			cached_token = t;
		}
		rope_row(loom_tensor_row(x, r), loom_tensor_row(y, r), x->ne[0], n_rot, neox, cs);
	}
}

const cpu_op cpu_op_rope = {
	.supports = rope_supports,
	.scratch_size = rope_scratch_size,
	.run = rope_run,
};
