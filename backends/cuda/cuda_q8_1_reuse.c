/* cuda_q8_1_reuse.c - which node leaves a matmul's activations in the work
 * memory as Q8_1 (cuda_q8_1_reuse.h). */
#include "cuda_q8_1_reuse.h"
#include "cuda_tensor_span.h"

bool cuda_q8_1_feeds(const loom_graph *graph, int i, const cuda_q8_1_ops *ops)
{
	const loom_tensor *y = graph->nodes[i].dst;
	if (y == NULL || !ops->fusable(&graph->nodes[i]))
		return false;
	for (int k = i + 1; k < graph->n_nodes && k <= i + CUDA_Q8_1_REUSE_REACH; k++) {
		const loom_node *node = &graph->nodes[k];
		if (ops->quantizes(node))
			return node->src[1] != NULL && cuda_same_rows(node->src[1], y);
		if (ops->fusable(node) || ops->uses_work(node) || (node->dst != NULL && cuda_tensors_overlap(node->dst, y)))
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
			return node->src[1] != NULL && cuda_same_rows(node->src[1], x) ? j : -1;
		if (cuda_q8_1_feeds(graph, j, ops))
			return cuda_same_rows(node->dst, x) ? j : -1;
		if (ops->uses_work(node) || (node->dst != NULL && cuda_tensors_overlap(node->dst, x)))
			return -1;
	}
	return -1;
}
