/*
 * cpu_moe.c - a mixture of experts' routing and combining: TOPK (which
 * experts a token goes to), MOE_WEIGHTS (how much each counts) and
 * MOE_SUM (their outputs, weighted). MATMUL_ID, between them, is in
 * cpu_matmul_id.c. Semantics are in plugin_api.h; the arithmetic is
 * ggml's, step for step, so that a model's routing picks the experts
 * llama.cpp's does wherever the logits agree. (This file is compiled
 * without floating-point contraction: a product and a sum are two
 * roundings, as there.)
 */
#include "cpu_backend.h"

#include <math.h>

/* ---- TOPK ---- */

static bool topk_supports(const loom_node *node)
{
	return loom_topk_node_ok(node) && cpu_rows_uniform(node->src[0]) && cpu_rows_uniform(node->dst);
}

/* The k largest of x[0..n), largest first, lower index first among
 * equals: each value goes in after every kept one at least as large. */
static void topk_row(const float *x, int64_t n, int32_t k, int32_t *out, float *kept)
{
	int32_t have = 0;

	for (int64_t i = 0; i < n; i++) {
		int32_t at = have;
		while (at > 0 && !(kept[at - 1] >= x[i]))
			at--;
		if (at >= k)
			continue;
		for (int32_t j = (have < k ? have : k - 1); j > at; j--) {
			kept[j] = kept[j - 1];
			out[j] = out[j - 1];
		}
		kept[at] = x[i];
		out[at] = (int32_t)i;
		have += have < k;
	}
}

static size_t topk_scratch_size(const loom_node *node, int n_threads)
{
	return (size_t)n_threads * (size_t)node->ip[0] * sizeof(float);
}

static void topk_run(const loom_node *node, const cpu_task *task)
{
	const loom_tensor *x = node->src[0], *y = node->dst;
	float *kept = (float *)task->scratch + (size_t)task->ith * (size_t)node->ip[0];
	int64_t lo, hi;

	cpu_split(loom_tensor_nrows(x), task->ith, task->nth, &lo, &hi);
	for (int64_t r = lo; r < hi; r++)
		topk_row(cpu_row_f32(x, r), x->ne[0], node->ip[0], (int32_t *)loom_tensor_row(y, r), kept);
}

const cpu_op cpu_op_topk = {
	.supports = topk_supports,
	.scratch_size = topk_scratch_size,
	.run = topk_run,
};

/* ---- MOE_WEIGHTS ---- */

static bool moe_weights_supports(const loom_node *node)
{
	return loom_moe_weights_node_ok(node);
}

/* ggml's softmax of x[0..n) into p: exponentials against the maximum in
 * f32, summed in double, each times f32(1 / sum). */
static void softmax(const float *x, float *p, int64_t n)
{
	float max = -INFINITY;
	double sum = 0.0;

	for (int64_t i = 0; i < n; i++)
		max = x[i] > max ? x[i] : max;
	for (int64_t i = 0; i < n; i++) {
		p[i] = expf(x[i] - max);
		sum += p[i];
	}
	const float inv = (float)(1.0 / sum);
	for (int64_t i = 0; i < n; i++)
		p[i] *= inv;
}

static size_t moe_weights_scratch_size(const loom_node *node, int n_threads)
{
	return (size_t)n_threads * (size_t)node->src[0]->ne[0] * sizeof(float);
}

static void moe_weights_run(const loom_node *node, const cpu_task *task)
{
	const loom_tensor *logits = node->src[0], *ids = node->src[1], *dst = node->dst;
	const int64_t n_expert = logits->ne[0], k = dst->ne[0];
	const int32_t gating = node->ip[0];
	float *p = (float *)task->scratch + (size_t)task->ith * (size_t)n_expert;
	int64_t lo, hi;

	cpu_split(loom_tensor_nrows(dst), task->ith, task->nth, &lo, &hi);
	for (int64_t r = lo; r < hi; r++) {
		const float *x = cpu_row_f32(logits, r);
		const int32_t *id = (const int32_t *)loom_tensor_row(ids, r);
		float *w = cpu_row_f32(dst, r);
		bool bad = false;
		for (int64_t j = 0; j < k; j++)
			bad |= id[j] < 0 || id[j] >= n_expert;
		if (bad) {
			cpu_task_fail(task);
			continue;
		}
		if (gating == LOOM_GATING_SOFTMAX) {
			softmax(x, p, n_expert);
			for (int64_t j = 0; j < k; j++)
				w[j] = p[id[j]];
		} else if (gating == LOOM_GATING_SOFTMAX_SELECTED) {
			for (int64_t j = 0; j < k; j++)
				p[j] = x[id[j]];
			softmax(p, w, k);
		} else {
			for (int64_t j = 0; j < k; j++)
				w[j] = 1.0f / (1.0f + expf(-x[id[j]]));
		}
		if (node->ip[1] != 0) {
			double sum = 0.0;
			for (int64_t j = 0; j < k; j++)
				sum += w[j];
			for (int64_t j = 0; j < k; j++)
				w[j] /= (float)sum;
		}
		if (node->fp[0] != 1.0f)
			for (int64_t j = 0; j < k; j++)
				w[j] *= node->fp[0];
	}
}

const cpu_op cpu_op_moe_weights = {
	.supports = moe_weights_supports,
	.scratch_size = moe_weights_scratch_size,
	.run = moe_weights_run,
};

/* ---- MOE_SUM ---- */

static bool moe_sum_supports(const loom_node *node)
{
	return loom_moe_sum_node_ok(node) && cpu_rows_uniform(node->dst);
}

static void moe_sum_run(const loom_node *node, const cpu_task *task)
{
	const loom_tensor *y = node->src[0], *w = node->src[1], *dst = node->dst;
	const int64_t n = y->ne[0], k = y->ne[1];
	int64_t lo, hi;

	cpu_split(dst->ne[1] * dst->ne[2] * dst->ne[3], task->ith, task->nth, &lo, &hi);
	for (int64_t t = lo; t < hi; t++) {
		const float *wt = cpu_row_f32(w, t);
		float *out = cpu_row_f32(dst, t);
		for (int64_t j = 0; j < k; j++) {
			const float *yj = (const float *)((const char *)y->data + t * y->nb[2] + j * y->nb[1]);
			const float wj = wt[j];
			if (j == 0)
				for (int64_t i = 0; i < n; i++)
					out[i] = wj * yj[i];
			else
				for (int64_t i = 0; i < n; i++)
					out[i] += wj * yj[i];
		}
	}
}

const cpu_op cpu_op_moe_sum = {
	.supports = moe_sum_supports,
	.run = moe_sum_run,
};
