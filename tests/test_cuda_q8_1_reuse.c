/* test_cuda_q8_1_reuse.c - which earlier product left a quantized matmul's
 * activations in the cuda backend's work memory as Q8_1
 * (backends/cuda/cuda_q8_1_reuse.c), on the host: the nearest earlier
 * quantizing node with the same activation tensor, unless a node between
 * writes those activations or uses the work memory; and, on the core's
 * own steps of three families, exactly the products that read the input
 * of the one before them (k and v after q, gate after up, the experts'
 * gate after their up, a shared expert's gate after its up). No GPU is
 * needed. */
#include "check_main.h"
#include "cuda_q8_1_reuse.h"
#include "family_models.h"
#include "fixture.h"
#include "infer/context.h"
#include "testdata.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* What the tests take to quantize its activations: a MATMUL or MATMUL_ID
 * of a block-quantized weight; to use the work memory: one of those, or
 * an ATTENTION. */
static bool quantizes(const loom_node *node)
{
	return (node->op == LOOM_OP_MATMUL || node->op == LOOM_OP_MATMUL_ID) &&
	       loom_dtype_traits_of(node->src[0]->dtype).block > 1;
}

static bool uses_work(const loom_node *node)
{
	return quantizes(node) || node->op == LOOM_OP_ATTENTION;
}

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
	return cuda_q8_1_source(&g->graph, i, quantizes, uses_work);
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
	add_other(&g, LOOM_OP_RMS_NORM, &g.x);
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

/* The name of node i's weight with its "blk.N." cut off. */
static const char *weight_role(const loom_node *node)
{
	const char *name = node->src[0]->name != NULL ? node->src[0]->name : "";
	if (strncmp(name, "blk.", 4) == 0 && strchr(name + 4, '.') != NULL)
		return strchr(name + 4, '.') + 1;
	return name;
}

/* Every quantized product of the family's one-token and 4-token steps:
 * those whose activations an earlier product left are exactly the roles
 * listed in reused, each reusing the product just before it (with only
 * nodes between that touch neither); the rest quantize their own. */
static void steps_reuse_as_listed(const char *family, const char *const *reused)
{
	const family_model *fm = family_model_named(family);
	ck_assert_ptr_nonnull(fm);
	char path[4200];
	snprintf(path, sizeof(path), "%s/%s.gguf", test_tmp_dir("cuda_q8_1_reuse"), family);
	ck_assert(family_model_write(NULL, fm, path));
	loom_runtime *rt = test_runtime("cpu-generic", 1);
	loom_model *m = NULL;
	ck_assert_msg(loom_model_load(rt, path, NULL, &m) == LOOM_OK, "%s", loom_last_error());
	loom_context *ctx = test_context(m, 256, 8, LOOM_DTYPE_F16);

	for (int n = 1; n <= 4; n += 3) {
		loom_token tok[4] = {3, 9, 27, 81};
		int32_t pos[4] = {0, 1, 2, 3};
		loom_batch b = {.n_tokens = n, .tokens = tok, .pos = pos};
		ck_assert_msg(loom_decode(ctx, &b) == LOOM_OK, "%s", loom_last_error());
		loom_graph graph = {.n_nodes = ctx->n_nodes, .nodes = ctx->nodes};
		int n_reused = 0, n_products = 0;
		for (int i = 0; i < graph.n_nodes; i++) {
			if (!quantizes(&graph.nodes[i]))
				continue;
			n_products++;
			const char *role = weight_role(&graph.nodes[i]);
			bool listed = false;
			for (int k = 0; reused[k] != NULL; k++)
				listed |= strcmp(role, reused[k]) == 0;
			int j = cuda_q8_1_source(&graph, i, quantizes, uses_work);
			ck_assert_msg((j >= 0) == listed, "%s, %d tokens: node %d (%s) %s", family, n, i, role,
				      j >= 0 ? "reuses an earlier product's Q8_1" : "quantizes its own activations");
			if (j >= 0) {
				n_reused++;
				for (int k = j + 1; k < i; k++)
					ck_assert_msg(!quantizes(&graph.nodes[k]), "%s: node %d (%s) reuses across a product",
						      family, i, role);
			}
		}
		ck_assert_msg(n_reused > 0 && n_reused < n_products, "%s: %d of %d products reuse", family, n_reused,
			      n_products);
		loom_kv_clear(ctx);
	}
	loom_context_free(ctx);
	loom_model_free(m);
	loom_runtime_free(rt);
}

START_TEST(dense_layers_share_q_k_v_and_gate_up)
{
	static const char *const reused[] = {"attn_k.weight", "attn_v.weight", "ffn_gate.weight", NULL};
	steps_reuse_as_listed("granite-q8_0", reused);
}
END_TEST

START_TEST(expert_layers_share_gate_up_and_the_shared_experts)
{
	static const char *const reused[] = {"attn_k.weight", "attn_v.weight", "ffn_gate_exps.weight",
					     "ffn_gate_shexp.weight", NULL};
	steps_reuse_as_listed("qwen2moe-q8_0", reused);
}
END_TEST

START_TEST(biases_between_do_not_end_the_run)
{
	static const char *const reused[] = {"attn_k.weight", "attn_v.weight", "ffn_gate_exps.weight", NULL};
	steps_reuse_as_listed("gpt-oss-q8_0", reused);
}
END_TEST

static Suite *q8_1_reuse_suite(void)
{
	Suite *s = suite_create("cuda_q8_1_reuse");
	TCase *tc = tcase_create("rule");
	tcase_add_test(tc, products_of_one_input_share_its_q8_1);
	tcase_add_test(tc, a_write_to_the_input_or_the_work_memory_ends_it);
	tcase_add_test(tc, only_the_same_tensor_and_quantized_products_count);
	suite_add_tcase(s, tc);
	TCase *steps = tcase_create("steps");
	tcase_set_timeout(steps, 300);
	tcase_add_test(steps, dense_layers_share_q_k_v_and_gate_up);
	tcase_add_test(steps, expert_layers_share_gate_up_and_the_shared_experts);
	tcase_add_test(steps, biases_between_do_not_end_the_run);
	suite_add_tcase(s, steps);
	return s;
}

LOOM_TEST_MAIN(q8_1_reuse_suite)
