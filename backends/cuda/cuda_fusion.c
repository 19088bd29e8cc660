/* cuda_fusion.c - runs of nodes the cuda backend enqueues as one kernel
 * (cuda_fusion.h). */
#include "cuda_fusion.h"
#include "cuda_tensor_span.h"

#include <string.h>

/* F32 elements packed one row after another, with no gaps. */
static bool packed_f32(const loom_tensor *t)
{
	if (t->dtype != LOOM_DTYPE_F32 || t->layout != 0 || t->nb[0] != sizeof(float))
		return false;
	size_t stride = sizeof(float);
	for (int d = 1; d < LOOM_MAX_DIMS; d++) {
		stride *= (size_t)t->ne[d - 1];
		if (t->ne[d] > 1 && t->nb[d] != stride)
			return false;
	}
	return true;
}

/* Whether t is one of the others' rows exactly, or shares no byte with any
 * of them (NULLs skipped): an element-wise kernel may write t. */
static bool apart_or_same(const loom_tensor *t, const loom_tensor *a, const loom_tensor *b, const loom_tensor *c)
{
	const loom_tensor *others[3] = {a, b, c};
	for (int k = 0; k < 3; k++)
		if (others[k] != NULL && cuda_tensors_overlap(t, others[k]) && !cuda_same_rows(t, others[k]))
			return false;
	return true;
}

static bool add_rms_norm(const loom_node *add, const loom_node *norm)
{
	if (add->op != LOOM_OP_ADD || norm->op != LOOM_OP_RMS_NORM || add->dst == NULL || norm->dst == NULL ||
	    add->src[0] == NULL || add->src[1] == NULL || norm->src[0] == NULL)
		return false;
	const loom_tensor *sum = add->dst;
	/* Row r of every operand is row r of the sum: no broadcast row. */
	if (!loom_tensor_same_shape(sum, add->src[0]) || !loom_tensor_same_shape(sum, add->src[1]) ||
	    !loom_tensor_same_shape(sum, norm->src[0]) || !loom_tensor_same_shape(sum, norm->dst))
		return false;
	return cuda_same_rows(norm->src[0], sum) && apart_or_same(sum, add->src[0], add->src[1], NULL) &&
	       apart_or_same(norm->dst, sum, add->src[0], add->src[1]);
}

/* The same positions and the same angles. */
static bool same_rotation(const loom_node *a, const loom_node *b)
{
	const loom_tensor *fa = a->src[2], *fb = b->src[2];
	return a->src[1] != NULL && b->src[1] != NULL && a->src[1]->data == b->src[1]->data &&
	       a->src[1]->ne[0] == b->src[1]->ne[0] && (fa == NULL) == (fb == NULL) &&
	       (fa == NULL || fa->data == fb->data) && memcmp(a->ip, b->ip, 3 * sizeof(a->ip[0])) == 0 &&
	       memcmp(a->fp, b->fp, 6 * sizeof(a->fp[0])) == 0;
}

/* Two stores of the same tokens in the same cells of caches of as many
 * cells (one bound checks both), apart from each other, each source apart
 * from the other's cache. */
static bool store_pair(const loom_node *k, const loom_node *v)
{
	if (k->op != LOOM_OP_KV_STORE || v->op != LOOM_OP_KV_STORE || k->dst == NULL || v->dst == NULL)
		return false;
	const loom_tensor *ck = k->src[1], *cv = v->src[1];
	return k->src[0] != NULL && v->src[0] != NULL && ck != NULL && cv != NULL && ck->data == cv->data &&
	       ck->ne[0] == cv->ne[0] && k->dst->dtype == v->dst->dtype && k->src[0]->ne[1] == v->src[0]->ne[1] &&
	       k->dst->ne[1] == v->dst->ne[1] && !cuda_tensors_overlap(k->dst, v->dst) &&
	       !cuda_tensors_overlap(v->src[0], k->dst) && !cuda_tensors_overlap(k->src[0], v->dst);
}

/* q and k rotated, then k's rows and v's stored: each token's k row is
 * the rows its rope wrote (both packed, the same bytes), and nothing else
 * of the four nodes meets. */
static bool rope_store(const loom_node *q, const loom_node *k, const loom_node *sk, const loom_node *sv)
{
	if (q->op != LOOM_OP_ROPE || k->op != LOOM_OP_ROPE || q->dst == NULL || k->dst == NULL || q->src[0] == NULL ||
	    k->src[0] == NULL || !same_rotation(q, k) || !store_pair(sk, sv))
		return false;
	const loom_tensor *k_rows = k->dst, *k_src = sk->src[0];
	const int64_t tokens = k_src->ne[1];
	/* One head size: the tails past the rotated dimensions are alike. */
	if (q->src[0]->ne[0] != k->src[0]->ne[0])
		return false;
	if (q->dst->ne[2] != tokens || k_rows->ne[2] != tokens || !packed_f32(k_rows) || !packed_f32(k_src) ||
	    k_rows->data != k_src->data || k_rows->ne[0] * k_rows->ne[1] != k_src->ne[0])
		return false;
	const loom_tensor *rotated[4] = {q->src[0], q->dst, k->src[0], k->dst};
	for (int i = 0; i < 4; i++)
		if (cuda_tensors_overlap(rotated[i], sk->dst) || cuda_tensors_overlap(rotated[i], sv->dst))
			return false;
	return !cuda_tensors_overlap(q->dst, k->src[0]) && !cuda_tensors_overlap(q->dst, k->dst) &&
	       !cuda_tensors_overlap(q->src[0], k->dst) && !cuda_tensors_overlap(sv->src[0], q->dst) &&
	       !cuda_tensors_overlap(sv->src[0], k->dst);
}

/* A MATMUL of one token and block-quantized weights (one matrix). */
static bool one_token_product(const loom_node *p)
{
	return p->op == LOOM_OP_MATMUL && p->dst != NULL && p->src[0] != NULL && p->src[1] != NULL &&
	       loom_dtype_traits_of(p->src[0]->dtype).block > 1 && p->src[0]->ne[2] == 1 && p->src[0]->ne[3] == 1 &&
	       loom_tensor_nrows(p->src[1]) == 1;
}

/* How many products from node i read one input with one weight type, each
 * writing apart from that input and from the others' results: the input's
 * Q8_1 rows, made once, serve them all. 0 for fewer than two. */
static int product_run(const loom_graph *graph, int i)
{
	const loom_node *first = &graph->nodes[i];
	if (!one_token_product(first) || cuda_tensors_overlap(first->dst, first->src[1]))
		return 0;
	int n = 1;
	for (; n < CUDA_FUSION_MAX_PRODUCTS && i + n < graph->n_nodes; n++) {
		const loom_node *p = &graph->nodes[i + n];
		if (!one_token_product(p) || p->src[0]->dtype != first->src[0]->dtype ||
		    !cuda_same_rows(p->src[1], first->src[1]) || cuda_tensors_overlap(p->dst, first->src[1]))
			break;
		bool apart = true;
		for (int k = 0; k < n; k++)
			apart = apart && !cuda_tensors_overlap(p->dst, graph->nodes[i + k].dst);
		if (!apart)
			break;
	}
	return n >= 2 ? n : 0;
}

cuda_fusion cuda_fusion_at(const loom_graph *graph, int i)
{
	cuda_fusion f = {CUDA_FUSION_NONE, 1, false};
	const loom_node *n = graph->nodes + i;
	int left = graph->n_nodes - i, products = product_run(graph, i);
	if (products > 0)
		f = (cuda_fusion){CUDA_FUSION_PRODUCTS, products, false};
	else if (left >= 2 && add_rms_norm(&n[0], &n[1]))
		f = (cuda_fusion){CUDA_FUSION_ADD_RMS_NORM, 2, false};
	else if (left >= 4 && rope_store(&n[0], &n[1], &n[2], &n[3]))
		f = (cuda_fusion){CUDA_FUSION_ROPE_STORE, 4, true};
	else if (left >= 2 && store_pair(&n[0], &n[1]))
		f = (cuda_fusion){CUDA_FUSION_ROPE_STORE, 2, false};
	return f;
}
