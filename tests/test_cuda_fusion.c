/* test_cuda_fusion.c - the runs of nodes the cuda backend enqueues as one
 * kernel (backends/cuda/cuda_fusion.c), on the host: an ADD and the
 * RMS_NORM of its sum; a layer's RoPE of q and k with its stores of k and
 * v, or the stores alone; one token's products of one input and weight
 * type; and each refused where one kernel would change what a node reads
 * (a broadcast row, another tensor's norm, overlapping operands, other
 * positions or cells, k's store reading rows its rope did not write, a
 * product writing the input or another's result). Then the core's own steps of three families: every layer's
 * prologue and every residual add before a norm are fused, no more. No
 * GPU is needed; test_cuda checks on a GPU that the fused kernels' models
 * give the golden logits. */
#include "check_main.h"
#include "cuda_fusion.h"
#include "family_fixture.h"

#include <string.h>

enum { MAX_NODES = 8, MAX_TENSORS = 16 };

typedef struct small_graph {
	float arena[4096];
	int used; /* floats of the arena handed out */
	loom_tensor tensors[MAX_TENSORS];
	int n_tensors;
	loom_node nodes[MAX_NODES];
	loom_graph graph;
} small_graph;

static void small_graph_init(small_graph *g)
{
	memset(g, 0, sizeof(*g));
	g->graph.nodes = g->nodes;
}

/* A packed F32 tensor {ne0, ne1, ne2} at `data`, or in fresh arena memory
 * where data is NULL. */
static loom_tensor *f32_at(small_graph *g, float *data, int64_t ne0, int64_t ne1, int64_t ne2)
{
	loom_tensor *t = &g->tensors[g->n_tensors++];
	if (data == NULL) {
		data = g->arena + g->used;
		g->used += (int)(ne0 * ne1 * ne2);
		ck_assert_int_le(g->used, 4096);
	}
	t->dtype = LOOM_DTYPE_F32;
	t->data = data;
	t->ne[0] = ne0;
	t->ne[1] = ne1;
	t->ne[2] = ne2;
	t->ne[3] = 1;
	t->nb[0] = sizeof(float);
	t->nb[1] = (size_t)ne0 * sizeof(float);
	t->nb[2] = t->nb[1] * (size_t)ne1;
	t->nb[3] = t->nb[2] * (size_t)ne2;
	return t;
}

static loom_tensor *f32(small_graph *g, int64_t ne0, int64_t ne1, int64_t ne2)
{
	return f32_at(g, NULL, ne0, ne1, ne2);
}

static loom_tensor *i32(small_graph *g, int64_t n)
{
	loom_tensor *t = f32(g, n, 1, 1);
	t->dtype = LOOM_DTYPE_I32;
	return t;
}

static loom_node *add_node(small_graph *g, loom_op op, loom_tensor *dst, loom_tensor *a, loom_tensor *b)
{
	loom_node *n = &g->nodes[g->graph.n_nodes++];
	*n = (loom_node){.op = op, .dst = dst, .src = {a, b}};
	return n;
}

/* ---- the residual add and the next norm ---- */

typedef struct add_norm {
	loom_tensor *x, *proj, *xb, *w;
} add_norm;

/* x += proj; xb = rms_norm(x) * w, 2 tokens of 64. */
static add_norm add_then_norm(small_graph *g)
{
	add_norm r = {f32(g, 64, 2, 1), f32(g, 64, 2, 1), f32(g, 64, 2, 1), f32(g, 64, 1, 1)};
	add_node(g, LOOM_OP_ADD, r.x, r.x, r.proj);
	add_node(g, LOOM_OP_RMS_NORM, r.xb, r.x, r.w);
	return r;
}

START_TEST(an_add_and_the_norm_of_its_sum_are_one_run)
{
	static small_graph g;
	small_graph_init(&g);
	add_then_norm(&g);
	cuda_fusion f = cuda_fusion_at(&g.graph, 0);
	ck_assert_int_eq(f.kind, CUDA_FUSION_ADD_RMS_NORM);
	ck_assert_int_eq(f.n_nodes, 2);
	/* The norm alone starts none. */
	f = cuda_fusion_at(&g.graph, 1);
	ck_assert_int_eq(f.kind, CUDA_FUSION_NONE);
	ck_assert_int_eq(f.n_nodes, 1);

	/* Normalizing in place, over the sum itself, keeps each element to
	 * its thread. */
	small_graph_init(&g);
	add_norm r = add_then_norm(&g);
	g.nodes[1].dst = r.x;
	ck_assert_int_eq(cuda_fusion_at(&g.graph, 0).kind, CUDA_FUSION_ADD_RMS_NORM);
}
END_TEST

START_TEST(an_add_is_not_fused_where_rows_differ)
{
	static small_graph g;
	/* A bias: one row added to every row. */
	small_graph_init(&g);
	add_norm r = add_then_norm(&g);
	g.nodes[0].src[1] = r.w;
	ck_assert_int_eq(cuda_fusion_at(&g.graph, 0).kind, CUDA_FUSION_NONE);

	/* The norm of another tensor. */
	small_graph_init(&g);
	r = add_then_norm(&g);
	g.nodes[1].src[0] = r.proj;
	ck_assert_int_eq(cuda_fusion_at(&g.graph, 0).kind, CUDA_FUSION_NONE);

	/* The norm's result over the sum's rows, shifted a row. */
	small_graph_init(&g);
	r = add_then_norm(&g);
	g.nodes[1].dst = f32_at(&g, (float *)r.x->data + 64, 64, 2, 1);
	ck_assert_int_eq(cuda_fusion_at(&g.graph, 0).kind, CUDA_FUSION_NONE);

	/* A node between. */
	small_graph_init(&g);
	r = add_then_norm(&g);
	g.nodes[2] = g.nodes[1];
	g.nodes[1] = (loom_node){.op = LOOM_OP_SCALE, .dst = r.x, .src = {r.x}};
	g.graph.n_nodes = 3;
	ck_assert_int_eq(cuda_fusion_at(&g.graph, 0).kind, CUDA_FUSION_NONE);
}
END_TEST

/* ---- a layer's attention prologue ---- */

typedef struct prologue {
	loom_tensor *q, *k, *v, *pos, *cells, *k_cache, *v_cache;
} prologue;

/* 3 tokens, 4 q heads and 2 kv heads of 8: rope(q), rope(k), then k and v
 * stored in the cells. q and k are rotated in place, as the core does,
 * k's heads a view {8, 2, 3} of its rows {16, 3}. */
static prologue rope_then_store(small_graph *g)
{
	prologue p = {f32(g, 8, 4, 3), f32(g, 16, 3, 1), f32(g, 16, 3, 1), i32(g, 3), i32(g, 3),
		      f32(g, 16, 10, 1), f32(g, 16, 10, 1)};
	loom_tensor *k_heads = f32_at(g, p.k->data, 8, 2, 3);
	loom_node *rq = add_node(g, LOOM_OP_ROPE, p.q, p.q, p.pos);
	loom_node *rk = add_node(g, LOOM_OP_ROPE, k_heads, k_heads, p.pos);
	rq->ip[0] = rk->ip[0] = 8;
	rq->ip[1] = rk->ip[1] = LOOM_ROPE_NEOX;
	rq->fp[0] = rk->fp[0] = 10000.0f;
	rq->fp[1] = rk->fp[1] = 1.0f;
	add_node(g, LOOM_OP_KV_STORE, p.k_cache, p.k, p.cells);
	add_node(g, LOOM_OP_KV_STORE, p.v_cache, p.v, p.cells);
	return p;
}

static void assert_run(const small_graph *g, int i, cuda_fusion_kind kind, int n_nodes, bool rotates)
{
	cuda_fusion f = cuda_fusion_at(&g->graph, i);
	ck_assert_int_eq(f.kind, kind);
	ck_assert_int_eq(f.n_nodes, n_nodes);
	ck_assert_int_eq(f.rotates, rotates);
}

START_TEST(ropes_and_stores_are_one_run)
{
	static small_graph g;
	small_graph_init(&g);
	rope_then_store(&g);
	assert_run(&g, 0, CUDA_FUSION_ROPE_STORE, 4, true);
	/* From k's rope on, nothing; the stores alone are a run. */
	assert_run(&g, 1, CUDA_FUSION_NONE, 1, false);
	assert_run(&g, 2, CUDA_FUSION_ROPE_STORE, 2, false);
	assert_run(&g, 3, CUDA_FUSION_NONE, 1, false);

	/* Rotated out of place, into rows of their own: k's store must read
	 * the rotated rows. */
	small_graph_init(&g);
	prologue p = rope_then_store(&g);
	g.nodes[0].dst = f32(&g, 8, 4, 3);
	loom_tensor *k_out = f32(&g, 16, 3, 1);
	g.nodes[1].dst = f32_at(&g, k_out->data, 8, 2, 3);
	/* k's store reading the unrotated rows: the ropes apart, the stores a
	 * run. */
	assert_run(&g, 0, CUDA_FUSION_NONE, 1, false);
	assert_run(&g, 2, CUDA_FUSION_ROPE_STORE, 2, false);
	g.nodes[2].src[0] = k_out;
	assert_run(&g, 0, CUDA_FUSION_ROPE_STORE, 4, true);
	/* q read from rows of its own. */
	g.nodes[0].src[0] = p.q;
	assert_run(&g, 0, CUDA_FUSION_ROPE_STORE, 4, true);
}
END_TEST

START_TEST(ropes_and_stores_are_apart_where_they_meet)
{
	static small_graph g;
	/* Other positions for k. */
	small_graph_init(&g);
	rope_then_store(&g);
	g.nodes[1].src[1] = i32(&g, 3);
	assert_run(&g, 0, CUDA_FUSION_NONE, 1, false);

	/* Other angles for k. */
	small_graph_init(&g);
	rope_then_store(&g);
	g.nodes[1].fp[0] = 500000.0f;
	assert_run(&g, 0, CUDA_FUSION_NONE, 1, false);

	/* v stored in other cells: neither run. */
	small_graph_init(&g);
	rope_then_store(&g);
	g.nodes[3].src[1] = i32(&g, 3);
	assert_run(&g, 0, CUDA_FUSION_NONE, 1, false);
	assert_run(&g, 2, CUDA_FUSION_NONE, 1, false);

	/* v's rows are q's: v's store would read rows another block may still
	 * be rotating. */
	small_graph_init(&g);
	prologue p = rope_then_store(&g);
	g.nodes[3].src[0] = f32_at(&g, p.q->data, 16, 3, 1);
	assert_run(&g, 0, CUDA_FUSION_NONE, 1, false);
	assert_run(&g, 2, CUDA_FUSION_ROPE_STORE, 2, false);

	/* k's rows a view with a gap between tokens: a token's k row is not
	 * what its rope wrote. */
	small_graph_init(&g);
	p = rope_then_store(&g);
	loom_tensor *wide = f32(&g, 32, 3, 1);
	loom_tensor *k_heads = f32_at(&g, wide->data, 8, 2, 3);
	k_heads->nb[2] = wide->nb[1];
	g.nodes[1].src[0] = g.nodes[1].dst = k_heads;
	loom_tensor *k_rows = f32_at(&g, wide->data, 16, 3, 1);
	k_rows->nb[1] = wide->nb[1];
	g.nodes[2].src[0] = k_rows;
	assert_run(&g, 0, CUDA_FUSION_NONE, 1, false);

	/* v's cache of fewer cells than k's: one bound would not check both. */
	small_graph_init(&g);
	rope_then_store(&g);
	g.nodes[3].dst = f32(&g, 16, 6, 1);
	assert_run(&g, 0, CUDA_FUSION_NONE, 1, false);
	assert_run(&g, 2, CUDA_FUSION_NONE, 1, false);

	/* v's cache over k's. */
	small_graph_init(&g);
	p = rope_then_store(&g);
	g.nodes[3].dst = f32_at(&g, p.k_cache->data, 16, 10, 1);
	assert_run(&g, 0, CUDA_FUSION_NONE, 1, false);

	/* v's cache under k's source. */
	small_graph_init(&g);
	p = rope_then_store(&g);
	g.nodes[3].dst = f32_at(&g, p.k->data, 16, 3, 1);
	assert_run(&g, 0, CUDA_FUSION_NONE, 1, false);
	assert_run(&g, 2, CUDA_FUSION_NONE, 1, false);

	/* q's rope writing k. */
	small_graph_init(&g);
	p = rope_then_store(&g);
	g.nodes[0].dst = f32_at(&g, p.k->data, 8, 4, 3);
	assert_run(&g, 0, CUDA_FUSION_NONE, 1, false);
}
END_TEST

/* ---- one token's products of one input ---- */

/* dst = W x, W 32 rows of 256 of type (x's rows 256 wide), its result
 * apart. */
static loom_node *add_product(small_graph *g, loom_dtype type, loom_tensor *x)
{
	static uint8_t weight_bytes[MAX_NODES][32 * 512];
	loom_tensor *w = &g->tensors[g->n_tensors++];
	int i = g->graph.n_nodes;
	w->dtype = type;
	w->data = weight_bytes[i];
	w->ne[0] = 256;
	w->ne[1] = 32;
	w->ne[2] = w->ne[3] = 1;
	w->nb[0] = loom_dtype_traits_of(type).block_bytes;
	w->nb[1] = loom_dtype_row_bytes(type, 256);
	w->nb[2] = w->nb[3] = w->nb[1] * 32;
	return add_node(g, LOOM_OP_MATMUL, f32(g, 32, x->ne[1], 1), w, x);
}

START_TEST(products_of_one_input_are_one_run)
{
	static small_graph g;
	small_graph_init(&g);
	loom_tensor *x = f32(&g, 256, 1, 1);
	for (int i = 0; i < 4; i++)
		add_product(&g, LOOM_DTYPE_Q4_K, x);
	/* At most three a run: the fourth starts none of its own. */
	assert_run(&g, 0, CUDA_FUSION_PRODUCTS, 3, false);
	assert_run(&g, 1, CUDA_FUSION_PRODUCTS, 3, false);
	assert_run(&g, 3, CUDA_FUSION_NONE, 1, false);

	/* Another weight type, another input, or a node between ends a run. */
	small_graph_init(&g);
	x = f32(&g, 256, 1, 1);
	add_product(&g, LOOM_DTYPE_Q4_K, x);
	add_product(&g, LOOM_DTYPE_Q4_K, x);
	add_product(&g, LOOM_DTYPE_Q6_K, x);
	add_product(&g, LOOM_DTYPE_Q6_K, f32(&g, 256, 1, 1));
	assert_run(&g, 0, CUDA_FUSION_PRODUCTS, 2, false);
	assert_run(&g, 2, CUDA_FUSION_NONE, 1, false);
}
END_TEST

START_TEST(products_are_apart_where_they_meet)
{
	static small_graph g;
	/* Two tokens. */
	small_graph_init(&g);
	loom_tensor *x = f32(&g, 256, 2, 1);
	add_product(&g, LOOM_DTYPE_Q8_0, x);
	add_product(&g, LOOM_DTYPE_Q8_0, x);
	assert_run(&g, 0, CUDA_FUSION_NONE, 1, false);

	/* Weights that are not block-quantized. */
	small_graph_init(&g);
	x = f32(&g, 256, 1, 1);
	add_product(&g, LOOM_DTYPE_F16, x);
	add_product(&g, LOOM_DTYPE_F16, x);
	assert_run(&g, 0, CUDA_FUSION_NONE, 1, false);

	/* The second writing the input: the third would read it changed. */
	small_graph_init(&g);
	x = f32(&g, 256, 1, 1);
	add_product(&g, LOOM_DTYPE_Q8_0, x);
	add_product(&g, LOOM_DTYPE_Q8_0, x)->dst = f32_at(&g, x->data, 32, 1, 1);
	add_product(&g, LOOM_DTYPE_Q8_0, x);
	assert_run(&g, 0, CUDA_FUSION_NONE, 1, false);

	/* The second writing the first's result. */
	small_graph_init(&g);
	x = f32(&g, 256, 1, 1);
	loom_node *a = add_product(&g, LOOM_DTYPE_Q8_0, x);
	add_product(&g, LOOM_DTYPE_Q8_0, x)->dst = a->dst;
	assert_run(&g, 0, CUDA_FUSION_NONE, 1, false);
}
END_TEST

/* ---- the core's steps ---- */

/* The runs of the family's one-token and 4-token steps, taken as the
 * backend takes them: each layer's prologue one run (rotating or not, as
 * listed), each residual add before a norm one run (add_norms of them in a
 * one-token step), q/k/v and up/gate one run each in a one-token step. */
typedef struct listed_runs {
	const char *family;
	int rotating, stores_alone, add_norms, products;
} listed_runs;

static void step_fuses_as_listed(const loom_graph *graph, int n, void *arg)
{
	const listed_runs *want = arg;
	int counts[4] = {0, 0, 0, 0}, n_ropes = 0, n_stores = 0;
	for (int i = 0; i < graph->n_nodes; i++) {
		n_ropes += graph->nodes[i].op == LOOM_OP_ROPE;
		n_stores += graph->nodes[i].op == LOOM_OP_KV_STORE;
	}
	for (int i = 0; i < graph->n_nodes;) {
		cuda_fusion f = cuda_fusion_at(graph, i);
		if (f.kind == CUDA_FUSION_ROPE_STORE)
			counts[f.rotates ? 1 : 2]++;
		else if (f.kind == CUDA_FUSION_PRODUCTS)
			counts[3]++;
		else
			counts[0] += f.kind == CUDA_FUSION_ADD_RMS_NORM;
		i += f.n_nodes;
	}
	/* With more than one token the rows the logits need are picked
	 * between the last add and the output norm, and products are not
	 * grouped. */
	int add_norms = n > 1 ? want->add_norms - 1 : want->add_norms, products = n > 1 ? 0 : want->products;
	ck_assert_msg(counts[1] == want->rotating && counts[2] == want->stores_alone && counts[0] == add_norms &&
			      counts[3] == products,
		      "%s, %d tokens: %d rotating prologues, %d of stores alone, %d adds with norms, %d product "
		      "groups (%d ropes, %d stores)",
		      want->family, n, counts[1], counts[2], counts[0], counts[3], n_ropes, n_stores);
	ck_assert_int_eq(2 * counts[1], n_ropes);
	ck_assert_int_eq(2 * (counts[1] + counts[2]), n_stores);
}

static void steps_fuse_as_listed(const char *family, int rotating, int stores_alone, int add_norms)
{
	int n_layer = family_model_named(family)->config.n_layer;
	listed_runs want = {family, rotating, stores_alone, add_norms, 2 * n_layer};
	family_model_steps(family, "cuda_fusion", step_fuses_as_listed, &want);
}

/* Both residual adds of each layer meet a norm: the FFN's, then the next
 * layer's (the last, the output norm). */
START_TEST(a_dense_step_fuses_every_layer)
{
	const family_model *f = family_model_named("granite-q8_0");
	steps_fuse_as_listed("granite-q8_0", f->config.n_layer, 0, 2 * f->config.n_layer);
}
END_TEST

/* Every fourth layer does not rotate: its stores are a run alone. */
START_TEST(layers_without_rope_fuse_their_stores)
{
	const family_model *f = family_model_named("smollm3-q8_0");
	int n_layer = f->config.n_layer, plain = n_layer / 4;
	steps_fuse_as_listed("smollm3-q8_0", n_layer - plain, plain, 2 * n_layer);
}
END_TEST

/* Post-norms: attention's output is normalized before the add, and the
 * add before the FFN's pre-norm, so each layer's adds meet a norm still. */
START_TEST(post_norm_layers_fuse_their_adds)
{
	const family_model *f = family_model_named("gemma2-q8_0");
	steps_fuse_as_listed("gemma2-q8_0", f->config.n_layer, 0, 2 * f->config.n_layer);
}
END_TEST

static Suite *cuda_fusion_suite(void)
{
	Suite *s = suite_create("cuda_fusion");
	TCase *tc = tcase_create("runs");
	tcase_add_test(tc, an_add_and_the_norm_of_its_sum_are_one_run);
	tcase_add_test(tc, an_add_is_not_fused_where_rows_differ);
	tcase_add_test(tc, ropes_and_stores_are_one_run);
	tcase_add_test(tc, ropes_and_stores_are_apart_where_they_meet);
	tcase_add_test(tc, products_of_one_input_are_one_run);
	tcase_add_test(tc, products_are_apart_where_they_meet);
	suite_add_tcase(s, tc);
	TCase *steps = tcase_create("the core's steps");
	tcase_add_test(steps, a_dense_step_fuses_every_layer);
	tcase_add_test(steps, layers_without_rope_fuse_their_stores);
	tcase_add_test(steps, post_norm_layers_fuse_their_adds);
	suite_add_tcase(s, steps);
	return s;
}

LOOM_TEST_MAIN(cuda_fusion_suite)
