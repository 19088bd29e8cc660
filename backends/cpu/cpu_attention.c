/*
 * cpu_attention.c - LOOM_OP_ATTENTION: softmax(q.K^T * scale + mask) V for
 * every (token, query head), reading keys and values from the cache.
 *
 * Rounding follows llama.cpp's non-flash path, where q.K and p.V are ggml
 * matmuls: with an F16 K cache q is rounded to fp16 before the dot products;
 * with an F16 V cache the probabilities are rounded to fp16 before they
 * weight V. The softmax subtracts the row maximum, sums the exponentials in
 * double and scales by the f32 reciprocal, as ggml's soft_max does.
 *
 * A row whose keys are all masked has no defined softmax; its output is
 * zero rather than NaN.
 */
#include "cpu_backend.h"

#include "cpu_convert.h"
#include "cpu_vec.h"

#include <math.h>
#include <string.h>

static bool attention_supports(const loom_node *node)
{
	const loom_tensor *q = node->src[0], *k = node->src[1], *v = node->src[2];
	const loom_tensor *mask = node->src[3], *y = node->dst;
	int n_head = node->ip[0], n_head_kv = node->ip[1];

	if (!cpu_tensor_is(q, LOOM_DTYPE_F32) || !cpu_tensor_is(y, LOOM_DTYPE_F32) || q->ne[3] != 1)
		return false;
	if (n_head != q->ne[1] || n_head_kv <= 0 || n_head % n_head_kv != 0)
		return false;
	if (!cpu_tensor_is(k, LOOM_DTYPE_F32) && !cpu_tensor_is(k, LOOM_DTYPE_F16))
		return false;
	if (!cpu_tensor_is(v, k->dtype) || !cpu_same_shape(k, v) || k->ne[2] != 1 || k->ne[3] != 1 ||
	    k->ne[0] != q->ne[0] * n_head_kv)
		return false;
	if (mask != NULL && (!cpu_tensor_is(mask, LOOM_DTYPE_F32) || mask->ne[0] != k->ne[1] ||
			     mask->ne[1] != q->ne[2] || mask->ne[2] != 1 || mask->ne[3] != 1))
		return false;
	return y->ne[0] == q->ne[0] * n_head && y->ne[1] == q->ne[2] && y->ne[2] == 1 && y->ne[3] == 1;
}

/* Per thread: the scores of one row (n_kv) and q rounded to fp16 (head_dim). */
static size_t thread_scratch(const loom_node *node)
{
	return cpu_align_up((size_t)(node->src[1]->ne[1] + node->src[0]->ne[0]) * sizeof(float));
}

static size_t attention_scratch_size(const loom_node *node, int n_threads)
{
	return (size_t)n_threads * thread_scratch(node);
}

typedef struct attn_args {
	const loom_tensor *q, *k, *v, *mask, *y;
	int64_t head_dim, n_kv, group; /* group: query heads per kv head */
	bool fp16;                     /* K and V caches are F16 */
	float scale;
} attn_args;

/* Head g's slice of cache row j. */
static const void *cache_at(const loom_tensor *c, int64_t j, int64_t g, int64_t head_dim)
{
	return (const char *)c->data + j * c->nb[1] + g * head_dim * c->nb[0];
}

/* scores[j] = q.k_j * scale + mask[j]; masked keys get -inf without reading
 * their (possibly never written) cache cells. Returns the maximum. */
static float attention_scores(const attn_args *a, const float *q, int64_t g, const float *mask,
			      float *scores)
{
	float max = -INFINITY;

	for (int64_t j = 0; j < a->n_kv; j++) {
		if (mask != NULL && mask[j] == -INFINITY) {
			scores[j] = -INFINITY;
			continue;
		}
		const void *kj = cache_at(a->k, j, g, a->head_dim);
		float dot = a->fp16 ? cpu_dot_fp16(kj, q, a->head_dim) : cpu_dot_f32(kj, q, a->head_dim);
		scores[j] = dot * a->scale + (mask != NULL ? mask[j] : 0.0f);
		max = fmaxf(max, scores[j]);
	}
	return max;
}

/* out = sum_j softmax(scores)_j * v_j. */
static void attention_mix(const attn_args *a, float *scores, float max, int64_t g, float *out)
{
	double sum = 0.0;

	memset(out, 0, (size_t)a->head_dim * sizeof(float));
	if (max == -INFINITY)
		return;
	for (int64_t j = 0; j < a->n_kv; j++) {
		scores[j] = expf(scores[j] - max);
		sum += scores[j];
	}
	float inv = (float)(1.0 / sum);
	for (int64_t j = 0; j < a->n_kv; j++) {
		if (scores[j] == 0.0f)
			continue;
		float p = scores[j] * inv;
		const void *vj = cache_at(a->v, j, g, a->head_dim);
		if (a->fp16)
			cpu_axpy_fp16(out, cpu_fp16_to_f32(cpu_f32_to_fp16(p)), vj, a->head_dim);
		else
			cpu_axpy_f32(out, p, vj, a->head_dim);
	}
}

static void attention_run(const loom_node *node, const cpu_task *task)
{
	attn_args a = {
		.q = node->src[0], .k = node->src[1], .v = node->src[2], .mask = node->src[3],
		.y = node->dst,
		.head_dim = node->src[0]->ne[0],
		.n_kv = node->src[1]->ne[1],
		.group = node->ip[0] / node->ip[1],
		.fp16 = node->src[1]->dtype == LOOM_DTYPE_F16,
		.scale = node->fp[0],
	};
	float *scores = (float *)(task->scratch + (size_t)task->ith * thread_scratch(node));
	float *q_rounded = scores + a.n_kv;
	int64_t n_head = a.q->ne[1], lo, hi;

	cpu_split(a.q->ne[2] * n_head, task->ith, task->nth, &lo, &hi);
	for (int64_t u = lo; u < hi; u++) {
		int64_t t = u / n_head, h = u % n_head, g = h / a.group;
		const float *q = (const float *)((const char *)a.q->data + t * a.q->nb[2] + h * a.q->nb[1]);
		const float *mask = a.mask != NULL ? cpu_row(a.mask, t) : NULL;
		float *out = (float *)cpu_row(a.y, t) + h * a.head_dim;

		if (a.fp16) {
			cpu_round_fp16_row(q, q_rounded, a.head_dim);
			q = q_rounded;
		}
		float max = attention_scores(&a, q, g, mask, scores);
		attention_mix(&a, scores, max, g, out);
	}
}

const cpu_op cpu_op_attention = {
	.supports = attention_supports,
	.scratch_size = attention_scratch_size,
	.run = attention_run,
};
