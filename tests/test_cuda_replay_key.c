/* test_cuda_replay_key.c - the key by which the cuda backend replays a
 * captured step (backends/cuda/cuda_replay_key.c), on the host: every
 * field a node's launches depend on changes it, and nothing else does;
 * the slots keep the shapes used last; and the core's steps of one shape
 * give one key however often the graph is rebuilt in between, so that a
 * decode that alternates with other batch sizes (a server's) finds its
 * graph again. No GPU is needed: the key is plain host arithmetic. */
#include "check_main.h"
#include "cuda_replay_key.h"
#include "family_fixture.h"
#include "fixture.h"
#include "infer/context.h"
#include "testdata.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_NODES = 2, N_TENSORS = N_NODES * (1 + LOOM_NODE_MAX_SRC) };

/* Two nodes whose every tensor slot holds a tensor of its own, each field
 * a distinct value. */
typedef struct fake_graph {
	loom_tensor tensors[N_TENSORS];
	loom_node nodes[N_NODES];
	loom_graph graph;
} fake_graph;

static void fake_graph_init(fake_graph *g)
{
	memset(g, 0, sizeof(*g));
	for (int t = 0; t < N_TENSORS; t++) {
		loom_tensor *x = &g->tensors[t];
		x->dtype = t % 2 ? LOOM_DTYPE_F16 : LOOM_DTYPE_F32;
		x->layout = (uint32_t)t;
		x->data = (void *)(uintptr_t)(4096 * (t + 1));
		x->name = "a tensor";
		for (int d = 0; d < LOOM_MAX_DIMS; d++) {
			x->ne[d] = 10 * t + d + 1;
			x->nb[d] = (size_t)(100 * t + d + 1);
		}
	}
	for (int i = 0; i < N_NODES; i++) {
		loom_node *n = &g->nodes[i];
		n->op = i ? LOOM_OP_ATTENTION : LOOM_OP_MATMUL;
		n->dst = &g->tensors[i * (1 + LOOM_NODE_MAX_SRC)];
		for (int s = 0; s < LOOM_NODE_MAX_SRC; s++)
			n->src[s] = &g->tensors[i * (1 + LOOM_NODE_MAX_SRC) + 1 + s];
		for (int p = 0; p < LOOM_NODE_MAX_PARAMS; p++) {
			n->ip[p] = 7 * i + p;
			n->fp[p] = 0.5f * (float)(i + p);
		}
	}
	g->graph = (loom_graph){.n_nodes = N_NODES, .nodes = g->nodes};
}

#define WORK ((void *)(uintptr_t)0x10000)

static bool same_as(const cuda_replay_key *base, const loom_graph *graph, const void *work)
{
	cuda_replay_key k = {0};
	ck_assert(cuda_replay_key_build(graph, work, &k));
	bool same = k.n == base->n && memcmp(k.words, base->words, k.n * sizeof(uint64_t)) == 0;
	cuda_replay_key_free(&k);
	return same;
}

/* Each field changed alone, then put back: the key differs while it is
 * changed and is the base's again after. A tensor's name (error messages
 * only) does not count. */
START_TEST(every_launch_field_is_in_the_key)
{
	fake_graph g;
	fake_graph_init(&g);
	cuda_replay_key base = {0};
	ck_assert(cuda_replay_key_build(&g.graph, WORK, &base));
	ck_assert(same_as(&base, &g.graph, WORK));
	int changes = 0;

#define CHANGED(field, value, what, ...)                                                            \
	do {                                                                                        \
		__typeof__(field) kept = (field);                                                   \
		(field) = (value);                                                                  \
		ck_assert_msg(!same_as(&base, &g.graph, WORK), what " left the key as it was",      \
			      __VA_ARGS__);                                                         \
		(field) = kept;                                                                     \
		ck_assert(same_as(&base, &g.graph, WORK));                                          \
		changes++;                                                                          \
	} while (0)

	for (int i = 0; i < N_NODES; i++) {
		loom_node *n = &g.nodes[i];
		CHANGED(n->op, LOOM_OP_ADD, "node %d's op", i);
		for (int p = 0; p < LOOM_NODE_MAX_PARAMS; p++) {
			CHANGED(n->ip[p], n->ip[p] + 1, "node %d's ip[%d]", i, p);
			CHANGED(n->fp[p], n->fp[p] + 1.0f, "node %d's fp[%d]", i, p);
		}
		CHANGED(n->fp[0], -0.0f, "node %d's fp[0] as -0", i);
		CHANGED(n->dst, n->src[0], "node %d's dst another tensor", i);
		for (int s = 0; s < LOOM_NODE_MAX_SRC; s++)
			CHANGED(n->src[s], NULL, "node %d's src[%d] absent", i, s);
	}
	for (int t = 0; t < N_TENSORS; t++) {
		loom_tensor *x = &g.tensors[t];
		CHANGED(x->dtype, LOOM_DTYPE_Q8_0, "tensor %d's dtype", t);
		CHANGED(x->layout, x->layout + 100, "tensor %d's layout", t);
		CHANGED(x->data, (void *)((uintptr_t)x->data + 64), "tensor %d's address", t);
		for (int d = 0; d < LOOM_MAX_DIMS; d++) {
			CHANGED(x->ne[d], x->ne[d] + 1, "tensor %d's ne[%d]", t, d);
			CHANGED(x->nb[d], x->nb[d] + 4, "tensor %d's nb[%d]", t, d);
		}
		x->name = "another name";
		ck_assert(same_as(&base, &g.graph, WORK));
	}
	ck_assert(!same_as(&base, &g.graph, (void *)((uintptr_t)WORK + 256)));
	g.graph.n_nodes = 1;
	ck_assert(!same_as(&base, &g.graph, WORK));
#undef CHANGED
	ck_assert_int_eq(changes, N_NODES * (2 + 2 * LOOM_NODE_MAX_PARAMS + 1 + LOOM_NODE_MAX_SRC) +
					  N_TENSORS * (3 + 2 * LOOM_MAX_DIMS));
	cuda_replay_key_free(&base);
}
END_TEST

/* Two absent sources and a present one never read as the same words as
 * another arrangement of the same tensors. */
START_TEST(absent_sources_cannot_alias)
{
	fake_graph a, b;
	fake_graph_init(&a);
	fake_graph_init(&b);
	a.nodes[0].src[1] = NULL;
	b.nodes[0].src[2] = NULL;
	b.nodes[0].src[1] = a.nodes[0].src[2];
	cuda_replay_key ka = {0};
	ck_assert(cuda_replay_key_build(&a.graph, WORK, &ka));
	ck_assert(!same_as(&ka, &b.graph, WORK));
	cuda_replay_key_free(&ka);
}
END_TEST

/* Eight shapes fit; a ninth replaces the one used longest ago, and the
 * others are still found. The slot keeps its own copy of the key. */
START_TEST(slots_keep_the_shapes_used_last)
{
	cuda_replay_table table;
	memset(&table, 0, sizeof(table));
	fake_graph g;
	fake_graph_init(&g);
	cuda_replay_key keys[CUDA_REPLAY_SLOTS + 1];
	memset(keys, 0, sizeof(keys));
	for (int i = 0; i <= CUDA_REPLAY_SLOTS; i++) {
		g.nodes[0].ip[0] = 1000 + i;
		ck_assert(cuda_replay_key_build(&g.graph, WORK, &keys[i]));
	}
	for (int i = 0; i < CUDA_REPLAY_SLOTS; i++) {
		ck_assert_ptr_null(cuda_replay_find(&table, &keys[i]));
		cuda_replay_slot *slot = cuda_replay_victim(&table);
		ck_assert_uint_eq(slot->key.n, 0); /* an empty one while there is one */
		ck_assert(cuda_replay_store(&table, slot, &keys[i]));
		ck_assert_ptr_null(slot->exec);
	}
	/* Key 0 used again: key 1 is now the oldest. */
	cuda_replay_slot *zero = cuda_replay_find(&table, &keys[0]);
	ck_assert_ptr_nonnull(zero);
	cuda_replay_slot *one = cuda_replay_find(&table, &keys[1]);
	ck_assert_ptr_nonnull(one);
	for (int i = 2; i < CUDA_REPLAY_SLOTS; i++)
		ck_assert_ptr_nonnull(cuda_replay_find(&table, &keys[i]));
	ck_assert_ptr_nonnull(cuda_replay_find(&table, &keys[0]));
	/* Now key 1 was used longest ago. */
	cuda_replay_slot *victim = cuda_replay_victim(&table);
	ck_assert_ptr_eq(victim, one);
	ck_assert(cuda_replay_store(&table, victim, &keys[CUDA_REPLAY_SLOTS]));
	ck_assert_ptr_null(cuda_replay_find(&table, &keys[1]));
	ck_assert_ptr_eq(cuda_replay_find(&table, &keys[CUDA_REPLAY_SLOTS]), victim);
	/* The stored copy does not follow the caller's key. */
	keys[0].words[keys[0].n - 1] ^= 1;
	ck_assert_ptr_null(cuda_replay_find(&table, &keys[0]));
	keys[0].words[keys[0].n - 1] ^= 1;
	ck_assert_ptr_eq(cuda_replay_find(&table, &keys[0]), zero);
	for (int i = 0; i <= CUDA_REPLAY_SLOTS; i++)
		cuda_replay_key_free(&keys[i]);
	for (int i = 0; i < CUDA_REPLAY_SLOTS; i++)
		cuda_replay_key_free(&table.slots[i].key);
}
END_TEST

/* The key of the step the context just ran (its graph, kept in the
 * context), into *key. */
static void key_of_last_step(const loom_context *ctx, cuda_replay_key *key)
{
	loom_graph graph = {.n_nodes = ctx->n_nodes, .nodes = ctx->nodes};
	ck_assert(cuda_replay_key_build(&graph, NULL, key));
}

static bool same_key(const cuda_replay_key *a, const cuda_replay_key *b)
{
	return a->n == b->n && memcmp(a->words, b->words, a->n * sizeof(uint64_t)) == 0;
}

static void decode(loom_context *ctx, int n, int32_t pos)
{
	loom_token tok[8];
	int32_t p[8];
	for (int i = 0; i < n; i++) {
		tok[i] = 3 + (pos + i) * 7 % 200;
		p[i] = pos + i;
	}
	loom_batch b = {.n_tokens = n, .tokens = tok, .pos = p};
	ck_assert_msg(loom_decode(ctx, &b) == LOOM_OK, "%s", loom_last_error());
}

/* A model's one-token decode, with batches of 3 tokens between its steps
 * (the graph rebuilt each time): every one-token step within a window step
 * of the cache has the first one's key, every 3-token step the first
 * 3-token one's, and the two differ; past the window step the key is a new
 * one. A MoE family (its expert products and routing), one with windowed
 * layers in their own cache (gemma3) and a dense one. */
static void keys_follow_shapes(const char *family)
{
	loom_runtime *rt = test_runtime("cpu-generic", 1);
	loom_model *m = family_model_load(rt, family, "cuda_replay_key");
	loom_context *ctx = test_context(m, 1024, 8, LOOM_DTYPE_F16);

	cuda_replay_key one = {0}, three = {0}, k = {0};
	int32_t pos = 0, n_one = 0, n_three = 0;
	decode(ctx, 1, pos++);
	key_of_last_step(ctx, &one);
	decode(ctx, 3, pos);
	pos += 3;
	key_of_last_step(ctx, &three);
	ck_assert(!same_key(&one, &three));
	while (pos + 4 <= LOOM_KV_WINDOW_STEP) {
		decode(ctx, 1, pos++);
		key_of_last_step(ctx, &k);
		ck_assert_msg(same_key(&k, &one), "%s: the one-token step at %d has a key of its own", family, pos - 1);
		n_one++;
		decode(ctx, 3, pos);
		pos += 3;
		key_of_last_step(ctx, &k);
		ck_assert_msg(same_key(&k, &three), "%s: the 3-token step at %d has a key of its own", family, pos - 3);
		n_three++;
	}
	ck_assert_int_ge(n_one, 60);
	while (pos <= LOOM_KV_WINDOW_STEP)
		decode(ctx, 1, pos++);
	key_of_last_step(ctx, &k);
	ck_assert_msg(!same_key(&k, &one), "%s: the cache grew past a window step and the key stayed", family);
	cuda_replay_key_free(&one);
	cuda_replay_key_free(&three);
	cuda_replay_key_free(&k);
	loom_context_free(ctx);
	loom_model_free(m);
	loom_runtime_free(rt);
}

START_TEST(decode_steps_keep_their_key_qwen3moe)
{
	keys_follow_shapes("qwen3moe-f32");
}
END_TEST

START_TEST(decode_steps_keep_their_key_gemma3)
{
	keys_follow_shapes("gemma3-f32");
}
END_TEST

START_TEST(decode_steps_keep_their_key_olmo2)
{
	keys_follow_shapes("olmo2-f32");
}
END_TEST

static Suite *replay_key_suite(void)
{
	Suite *s = suite_create("cuda_replay_key");
	TCase *tc = tcase_create("key");
	tcase_add_test(tc, every_launch_field_is_in_the_key);
	tcase_add_test(tc, absent_sources_cannot_alias);
	tcase_add_test(tc, slots_keep_the_shapes_used_last);
	suite_add_tcase(s, tc);
	TCase *steps = tcase_create("steps");
	tcase_set_timeout(steps, 300);
	tcase_add_test(steps, decode_steps_keep_their_key_qwen3moe);
	tcase_add_test(steps, decode_steps_keep_their_key_gemma3);
	tcase_add_test(steps, decode_steps_keep_their_key_olmo2);
	suite_add_tcase(s, steps);
	return s;
}

LOOM_TEST_MAIN(replay_key_suite)
