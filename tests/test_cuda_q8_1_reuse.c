/* test_cuda_q8_1_reuse.c - which node leaves a quantized matmul's
 * activations in the cuda backend's work memory as Q8_1
 * (backends/cuda/cuda_q8_1_reuse.c), on the host: the op that computed
 * them, where it can write Q8_1 and the next product reads its result, or
 * the nearest earlier product of the same rows, unless a node between
 * writes those activations, uses the work memory or writes Q8_1 of its
 * own (an attention over a short cache can write its result's); and, on
 * the core's own steps of three families, that every product but
 * attention's output projection (whose heads are too narrow here) and a
 * shared expert's up (after the experts' down) finds its activations
 * there. No GPU is needed. */
#include "check_main.h"
#include "cuda_q8_1_reuse.h"
#include "family_fixture.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* What the tests take to quantize its activations: a MATMUL or MATMUL_ID
 * of a block-quantized weight; to use the work memory: one of those, or
 * an ATTENTION over a long cache. */
static bool quantizes(const loom_node *node)
{
	return (node->op == LOOM_OP_MATMUL || node->op == LOOM_OP_MATMUL_ID) &&
	       loom_dtype_traits_of(node->src[0]->dtype).block > 1;
}

/* An ATTENTION whose scores the cuda backend keeps in shared memory (a
 * decode over at most 512 cells is not split: these steps' caches are
 * 256), heads of whole Q8_1 blocks; one without a cache here counts as
 * long. */
static bool short_attention(const loom_node *node)
{
	return node->op == LOOM_OP_ATTENTION && node->src[1] != NULL && node->src[1]->ne[1] <= 512 &&
	       node->src[0]->ne[0] % 32 == 0;
}

static bool uses_work(const loom_node *node)
{
	return quantizes(node) || (node->op == LOOM_OP_ATTENTION && !short_attention(node));
}

/* What can write its result as Q8_1: as the cuda backend says, an RMS_NORM
 * or an element-wise op with rows of whole blocks, or a short ATTENTION. */
static bool fusable(const loom_node *node)
{
	switch (node->op) {
	case LOOM_OP_ATTENTION:
		return short_attention(node);
	case LOOM_OP_RMS_NORM: case LOOM_OP_ADD: case LOOM_OP_MUL: case LOOM_OP_SCALE: case LOOM_OP_SWIGLU:
	case LOOM_OP_GELU: case LOOM_OP_SOFTCAP: case LOOM_OP_SIGMOID: case LOOM_OP_SWIGLU_OAI:
		return node->dst->ne[0] % 32 == 0;
	default:
		return false;
	}
}

static const cuda_q8_1_ops ops = {quantizes, fusable, uses_work};

enum { MAX_NODES = 16 };

typedef struct small_graph {
	float below[256], x_data[256 * 2], above[256 * 2];
	loom_tensor x, weights[MAX_NODES], outs[MAX_NODES];
	loom_node nodes[MAX_NODES];
	loom_graph graph;
} small_graph;

static void rows_of(loom_tensor *t, loom_dtype type, void *data, int64_t n, int64_t rows)
{
	memset(t, 0, sizeof(*t));
	t->dtype = type;
	t->data = data;
	t->ne[0] = n;
	t->ne[1] = rows;
	t->ne[2] = t->ne[3] = 1;
	t->nb[0] = loom_dtype_traits_of(type).block_bytes;
	t->nb[1] = loom_dtype_row_bytes(type, n);
	t->nb[2] = t->nb[3] = t->nb[1] * (size_t)rows;
}

static void small_graph_init(small_graph *g)
{
	memset(g, 0, sizeof(*g));
	rows_of(&g->x, LOOM_DTYPE_F32, g->x_data, 256, 2);
	g->graph.nodes = g->nodes;
}

/* Appends dst = W x, W of type, its result in an output of its own. */
static loom_node *add_product(small_graph *g, loom_dtype type, loom_tensor *x)
{
	int i = g->graph.n_nodes++;
	static char weight_bytes[MAX_NODES][32 * 512];
	rows_of(&g->weights[i], type, weight_bytes[i], 256, 32);
	rows_of(&g->outs[i], LOOM_DTYPE_F32, NULL, 32, 2);
	g->outs[i].data = (void *)(uintptr_t)(0x100000 * (i + 1));
	g->nodes[i] = (loom_node){.op = LOOM_OP_MATMUL, .dst = &g->outs[i], .src = {&g->weights[i], x}};
	return &g->nodes[i];
}

/* Appends a node op writing dst (reading it too). */
static loom_node *add_other(small_graph *g, loom_op op, loom_tensor *dst)
{
	int i = g->graph.n_nodes++;
	g->nodes[i] = (loom_node){.op = op, .dst = dst, .src = {dst}};
	return &g->nodes[i];
}

static int source(const small_graph *g, int i)
{
	return cuda_q8_1_source(&g->graph, i, &ops);
}

START_TEST(products_of_one_input_share_its_q8_1)
{
	static small_graph g;
	small_graph_init(&g);
	add_product(&g, LOOM_DTYPE_Q4_K, &g.x);
	add_product(&g, LOOM_DTYPE_Q6_K, &g.x);
	add_other(&g, LOOM_OP_ADD, &g.outs[1]); /* a bias, on the product's result */
	add_product(&g, LOOM_DTYPE_Q8_0, &g.x);
	ck_assert_int_eq(source(&g, 0), -1);
	ck_assert_int_eq(source(&g, 1), 0);
	ck_assert_int_eq(source(&g, 3), 1);
}
END_TEST

START_TEST(a_write_to_the_input_or_the_work_memory_ends_it)
{
	static small_graph g;
	small_graph_init(&g);
	add_product(&g, LOOM_DTYPE_Q4_0, &g.x);
	add_other(&g, LOOM_OP_ROPE, &g.x);
	add_product(&g, LOOM_DTYPE_Q4_0, &g.x);
	ck_assert_int_eq(source(&g, 2), -1);

	/* A write to a part of the input: its second row alone. */
	small_graph_init(&g);
	loom_tensor second;
	rows_of(&second, LOOM_DTYPE_F32, g.x_data + 256, 256, 1);
	add_product(&g, LOOM_DTYPE_Q4_0, &g.x);
	add_other(&g, LOOM_OP_SCALE, &second);
	add_product(&g, LOOM_DTYPE_Q4_0, &g.x);
	ck_assert_int_eq(source(&g, 2), -1);

	/* A write that ends just before the input, and one just after it. */
	small_graph_init(&g);
	loom_tensor before, after;
	rows_of(&before, LOOM_DTYPE_F32, g.below, 256, 1);
	rows_of(&after, LOOM_DTYPE_F32, g.above, 256, 1);
	add_product(&g, LOOM_DTYPE_Q4_0, &g.x);
	add_other(&g, LOOM_OP_SCALE, &before);
	add_other(&g, LOOM_OP_SCALE, &after);
	add_product(&g, LOOM_DTYPE_Q4_0, &g.x);
	ck_assert_int_eq(source(&g, 3), 0);

	/* A node that uses the work memory between. */
	small_graph_init(&g);
	add_product(&g, LOOM_DTYPE_Q4_0, &g.x);
	add_other(&g, LOOM_OP_ATTENTION, &g.outs[0]);
	add_product(&g, LOOM_DTYPE_Q4_0, &g.x);
	ck_assert_int_eq(source(&g, 2), -1);

	/* A product of another input between: it leaves its own Q8_1. */
	small_graph_init(&g);
	loom_tensor y;
	rows_of(&y, LOOM_DTYPE_F32, g.above, 256, 2);
	add_product(&g, LOOM_DTYPE_Q4_0, &g.x);
	add_product(&g, LOOM_DTYPE_Q4_0, &y);
	add_product(&g, LOOM_DTYPE_Q4_0, &g.x);
	ck_assert_int_eq(source(&g, 2), -1);
}
END_TEST

START_TEST(only_the_same_tensor_and_quantized_products_count)
{
	static small_graph g;
	small_graph_init(&g);
	/* The same memory seen as one row of 512: other Q8_1 rows. */
	loom_tensor flat;
	rows_of(&flat, LOOM_DTYPE_F32, g.x_data, 512, 1);
	add_product(&g, LOOM_DTYPE_Q4_0, &flat);
	add_product(&g, LOOM_DTYPE_Q4_0, &g.x);
	ck_assert_int_eq(source(&g, 1), -1);

	/* An F16 product between neither quantizes nor ends the run; one of
	 * F16 weights never takes Q8_1. */
	small_graph_init(&g);
	add_product(&g, LOOM_DTYPE_Q5_0, &g.x);
	add_product(&g, LOOM_DTYPE_F16, &g.x);
	add_product(&g, LOOM_DTYPE_Q5_0, &g.x);
	ck_assert_int_eq(source(&g, 1), -1);
	ck_assert_int_eq(source(&g, 2), 0);

	/* Farther back than the reach. */
	small_graph_init(&g);
	add_product(&g, LOOM_DTYPE_Q8_0, &g.x);
	for (int k = 0; k < CUDA_Q8_1_REUSE_REACH; k++)
		add_other(&g, LOOM_OP_ADD, &g.outs[0]);
	add_product(&g, LOOM_DTYPE_Q8_0, &g.x);
	ck_assert_int_eq(source(&g, CUDA_Q8_1_REUSE_REACH + 1), -1);
}
END_TEST

START_TEST(the_op_that_computes_the_input_writes_its_q8_1)
{
	static small_graph g;
	small_graph_init(&g);
	add_other(&g, LOOM_OP_RMS_NORM, &g.x);
	add_product(&g, LOOM_DTYPE_Q4_K, &g.x);
	add_product(&g, LOOM_DTYPE_Q4_K, &g.x);
	ck_assert(cuda_q8_1_feeds(&g.graph, 0, &ops));
	ck_assert_int_eq(source(&g, 1), 0);
	ck_assert_int_eq(source(&g, 2), 1);

	/* An attention over a short cache (4 heads of 64 over 100 cells)
	 * writes its result's; over a long one (600 cells) it uses the work
	 * memory and writes none. */
	for (int cells = 100; cells <= 600; cells += 500) {
		small_graph_init(&g);
		loom_tensor q, cache;
		rows_of(&q, LOOM_DTYPE_F32, g.below, 64, 4);
		rows_of(&cache, LOOM_DTYPE_F16, NULL, 128, cells);
		loom_node *a = add_other(&g, LOOM_OP_ATTENTION, &g.x);
		a->src[0] = &q;
		a->src[1] = a->src[2] = &cache;
		add_product(&g, LOOM_DTYPE_Q4_K, &g.x);
		ck_assert_int_eq(cuda_q8_1_feeds(&g.graph, 0, &ops), cells < 512);
		ck_assert_int_eq(source(&g, 1), cells < 512 ? 0 : -1);
	}

	/* Nodes between that touch neither the input nor the work memory (a
	 * MoE router's top-k, here a ROPE of another tensor). */
	small_graph_init(&g);
	loom_tensor y;
	rows_of(&y, LOOM_DTYPE_F32, g.above, 256, 2);
	add_other(&g, LOOM_OP_SWIGLU, &g.x);
	add_other(&g, LOOM_OP_ROPE, &y);
	add_product(&g, LOOM_DTYPE_Q8_0, &g.x);
	ck_assert(cuda_q8_1_feeds(&g.graph, 0, &ops));
	ck_assert_int_eq(source(&g, 2), 0);

	/* Another op that could write Q8_1 between: it might, so neither does
	 * the first for this product. */
	small_graph_init(&g);
	add_other(&g, LOOM_OP_RMS_NORM, &g.x);
	add_other(&g, LOOM_OP_ADD, &y);
	add_product(&g, LOOM_DTYPE_Q8_0, &g.x);
	ck_assert(!cuda_q8_1_feeds(&g.graph, 0, &ops));
	ck_assert(!cuda_q8_1_feeds(&g.graph, 1, &ops));
	ck_assert_int_eq(source(&g, 2), -1);

	/* The next product reads something else: the op writes no Q8_1, and a
	 * later product of its result quantizes for itself. */
	small_graph_init(&g);
	add_other(&g, LOOM_OP_RMS_NORM, &g.x);
	add_product(&g, LOOM_DTYPE_Q8_0, &y);
	add_product(&g, LOOM_DTYPE_Q8_0, &g.x);
	ck_assert(!cuda_q8_1_feeds(&g.graph, 0, &ops));
	ck_assert_int_eq(source(&g, 2), -1);

	/* Rows that are not whole Q8_1 blocks. */
	small_graph_init(&g);
	loom_tensor odd;
	rows_of(&odd, LOOM_DTYPE_F32, g.x_data, 48, 2);
	add_other(&g, LOOM_OP_RMS_NORM, &odd);
	add_product(&g, LOOM_DTYPE_Q8_0, &odd);
	ck_assert(!cuda_q8_1_feeds(&g.graph, 0, &ops));
	ck_assert_int_eq(source(&g, 1), -1);
}
END_TEST

/* Another view of the same rows in the same order has the same Q8_1 rows;
 * a view of other rows of the same memory does not. */
START_TEST(views_of_the_same_rows_count)
{
	static small_graph g;
	small_graph_init(&g);
	loom_tensor per_token = g.x; /* [256, 1, 2]: a MATMUL_ID's one row per token */
	per_token.ne[1] = 1;
	per_token.ne[2] = 2;
	per_token.nb[2] = g.x.nb[1];
	per_token.nb[3] = 2 * g.x.nb[1];
	add_other(&g, LOOM_OP_RMS_NORM, &g.x);
	add_product(&g, LOOM_DTYPE_Q4_K, &per_token);
	ck_assert_int_eq(source(&g, 1), 0);

	small_graph_init(&g);
	loom_tensor first_twice = g.x; /* row 0, then row 0 again */
	first_twice.nb[1] = 0;
	add_product(&g, LOOM_DTYPE_Q4_K, &g.x);
	add_product(&g, LOOM_DTYPE_Q4_K, &first_twice);
	ck_assert_int_eq(source(&g, 1), -1);
}
END_TEST

/* The name of node i's weight with its "blk.N." cut off. */
static const char *weight_role(const loom_node *node)
{
	const char *name = node->src[0]->name != NULL ? node->src[0]->name : "";
	if (strncmp(name, "blk.", 4) == 0 && strchr(name + 4, '.') != NULL)
		return strchr(name + 4, '.') + 1;
	return name;
}

/* Every quantized product of the family's one-token and 4-token steps
 * finds its activations left as Q8_1 by a node before it, but those whose
 * roles are listed in own, which quantize their own; no other product lies
 * between a product and the node it reuses. */
typedef struct listed_roles {
	const char *family;
	const char *const *own;
} listed_roles;

static void step_quantizes_as_listed(const loom_graph *graph, int n, void *arg)
{
	const listed_roles *want = arg;
	int n_reused = 0, n_products = 0;
	for (int i = 0; i < graph->n_nodes; i++) {
		if (!quantizes(&graph->nodes[i]))
			continue;
		n_products++;
		const char *role = weight_role(&graph->nodes[i]);
		bool listed = false;
		for (int k = 0; want->own[k] != NULL; k++)
			listed |= strcmp(role, want->own[k]) == 0;
		int j = cuda_q8_1_source(graph, i, &ops);
		ck_assert_msg((j < 0) == listed, "%s, %d tokens: node %d (%s) %s", want->family, n, i, role,
			      j >= 0 ? "reuses an earlier product's Q8_1" : "quantizes its own activations");
		if (j >= 0) {
			n_reused++;
			for (int k = j + 1; k < i; k++)
				ck_assert_msg(!quantizes(&graph->nodes[k]), "%s: node %d (%s) reuses across a product",
					      want->family, i, role);
		}
	}
	ck_assert_msg(n_reused > 0, "%s: %d of %d products reuse", want->family, n_reused, n_products);
}

static void steps_quantize_as_listed(const char *family, const char *const *own)
{
	listed_roles want = {family, own};
	family_model_steps(family, "cuda_q8_1_reuse", step_quantizes_as_listed, &want);
}

/* These models' heads are 16 wide, less than a Q8_1 block, so their
 * attention writes no Q8_1 and its output projection quantizes. */
START_TEST(a_dense_layer_quantizes_once)
{
	static const char *const own[] = {"attn_output.weight", NULL};
	steps_quantize_as_listed("granite-q8_0", own);
}
END_TEST

/* The router (F32 weights) and its top-k lie between the norm and the
 * experts; the shared expert's up follows the experts' down, whose Q8_1
 * took the work memory. */
START_TEST(an_expert_layer_quantizes_twice_with_a_shared_expert)
{
	static const char *const own[] = {"attn_output.weight", "ffn_up_shexp.weight", NULL};
	steps_quantize_as_listed("qwen2moe-q8_0", own);
}
END_TEST

START_TEST(biases_between_do_not_end_the_run)
{
	static const char *const own[] = {"attn_output.weight", NULL};
	steps_quantize_as_listed("gpt-oss-q8_0", own);
}
END_TEST

static Suite *q8_1_reuse_suite(void)
{
	Suite *s = suite_create("cuda_q8_1_reuse");
	TCase *tc = tcase_create("rule");
	tcase_add_test(tc, products_of_one_input_share_its_q8_1);
	tcase_add_test(tc, a_write_to_the_input_or_the_work_memory_ends_it);
	tcase_add_test(tc, only_the_same_tensor_and_quantized_products_count);
	tcase_add_test(tc, the_op_that_computes_the_input_writes_its_q8_1);
	tcase_add_test(tc, views_of_the_same_rows_count);
	suite_add_tcase(s, tc);
	TCase *steps = tcase_create("steps");
	tcase_set_timeout(steps, 300);
	tcase_add_test(steps, a_dense_layer_quantizes_once);
	tcase_add_test(steps, an_expert_layer_quantizes_twice_with_a_shared_expert);
	tcase_add_test(steps, biases_between_do_not_end_the_run);
	suite_add_tcase(s, steps);
	return s;
}

LOOM_TEST_MAIN(q8_1_reuse_suite)
