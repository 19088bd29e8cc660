/* cuda_q8_1_reuse.c - which earlier product left a matmul's activations in
 * the work memory as Q8_1 (cuda_q8_1_reuse.h). */
#include "cuda_q8_1_reuse.h"

#include <stdint.h>

static bool same_tensor(const loom_tensor *a, const loom_tensor *b)
{
	if (a->data != b->data || a->dtype != b->dtype || a->layout != b->layout)
		return false;
	for (int d = 0; d < LOOM_MAX_DIMS; d++)
		if (a->ne[d] != b->ne[d] || a->nb[d] != b->nb[d])
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

int cuda_q8_1_source(const loom_graph *graph, int i, cuda_node_test quantizes, cuda_node_test uses_work)
{
	const loom_tensor *x = graph->nodes[i].src[1];
	if (x == NULL || !quantizes(&graph->nodes[i]))
		return -1;
	for (int j = i - 1; j >= 0 && j >= i - CUDA_Q8_1_REUSE_REACH; j--) {
		const loom_node *node = &graph->nodes[j];
		if (quantizes(node) && node->src[1] != NULL && same_tensor(node->src[1], x))
			return j;
		if (uses_work(node) || (node->dst != NULL && overlap(node->dst, x)))
			return -1;
	}
	return -1;
}
