/* cuda_q8_1_reuse.c - which node leaves a matmul's activations in the work
 * memory as Q8_1 (cuda_q8_1_reuse.h). */
#include "cuda_q8_1_reuse.h"

#include <stdint.h>

/* Where row r of t starts: rows count over dimensions 1..3 in order. */
static uintptr_t row_at(const loom_tensor *t, int64_t r)
{
	int64_t i1 = r % t->ne[1], i2 = r / t->ne[1] % t->ne[2], i3 = r / (t->ne[1] * t->ne[2]);
	return (uintptr_t)t->data + (size_t)i1 * t->nb[1] + (size_t)i2 * t->nb[2] + (size_t)i3 * t->nb[3];
}

/* Whether a and b are the same rows in the same order, so that their Q8_1
 * rows are the same: a MATMUL_ID reads its one row per token as
 * [n, 1, tokens] where the norm before it wrote [n, tokens]. */
static bool same_rows(const loom_tensor *a, const loom_tensor *b)
{
	const int64_t rows = loom_tensor_nrows(a);
	if (a->data != b->data || a->dtype != b->dtype || a->layout != b->layout || a->ne[0] != b->ne[0] ||
	    a->nb[0] != b->nb[0] || rows != loom_tensor_nrows(b))
		return false;
	for (int64_t r = 0; r < rows; r++)
		if (row_at(a, r) != row_at(b, r))
			return false;
	return true;
}

/* The bytes [*lo, *hi) t's elements lie in. */
static void span(const loom_tensor *t, uintptr_t *lo, uintptr_t *hi)
{
	size_t last = loom_dtype_row_bytes(t->dtype, t->ne[0]);
	for (int d = 1; d < LOOM_MAX_DIMS; d++)
		last += (size_t)(t->ne[d] - 1) * t->nb[d];
	*lo = (uintptr_t)t->data;
	*hi = *lo + last;
}

static bool overlap(const loom_tensor *a, const loom_tensor *b)
{
	uintptr_t a_lo, a_hi, b_lo, b_hi;
	span(a, &a_lo, &a_hi);
	span(b, &b_lo, &b_hi);
	return a_lo < b_hi && b_lo < a_hi;
}

bool cuda_q8_1_feeds(const loom_graph *graph, int i, const cuda_q8_1_ops *ops)
{
	const loom_tensor *y = graph->nodes[i].dst;
	if (y == NULL || !ops->fusable(&graph->nodes[i]))
		return false;
	for (int k = i + 1; k < graph->n_nodes && k <= i + CUDA_Q8_1_REUSE_REACH; k++) {
		const loom_node *node = &graph->nodes[k];
		if (ops->quantizes(node))
			return node->src[1] != NULL && same_rows(node->src[1], y);
		if (ops->fusable(node) || ops->uses_work(node) || (node->dst != NULL && overlap(node->dst, y)))
			return false;
	}
	return false;
}

int cuda_q8_1_source(const loom_graph *graph, int i, const cuda_q8_1_ops *ops)
{
	const loom_tensor *x = graph->nodes[i].src[1];
	if (x == NULL || !ops->quantizes(&graph->nodes[i]))
		return -1;
	for (int j = i - 1; j >= 0 && j >= i - CUDA_Q8_1_REUSE_REACH; j--) {
		const loom_node *node = &graph->nodes[j];
		if (ops->quantizes(node))
			return node->src[1] != NULL && same_rows(node->src[1], x) ? j : -1;
		if (cuda_q8_1_feeds(graph, j, ops))
			return same_rows(node->dst, x) ? j : -1;
		if (ops->uses_work(node) || (node->dst != NULL && overlap(node->dst, x)))
			return -1;
	}
	return -1;
}
