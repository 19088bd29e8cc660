/* step_nodes.c - two backends' steps compared node by node (step_nodes.h). */
#include "step_nodes.h"

#include "fixture.h"
#include "infer/context.h"
#include "infer/node_watch.h"

#include <check.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const step_nodes_families[] = {
	"mixtral-q8_0", "qwen3moe-f32", "gemma2-f32", "gemma3-q8_0", "gpt-oss-mxfp4", "dots1-q4_k_m", "phi3-q8_0",
	"granitemoe-q4_k_m",
};
const int step_nodes_n_families = (int)(sizeof(step_nodes_families) / sizeof(step_nodes_families[0]));

/* Where a comparison stands. */
typedef struct step_nodes_result {
	int n_compared;   /* node outputs compared, over all steps */
	int n_skipped;    /* nodes whose output is no activation (a cache's cells) */
	int n_over;       /* outputs whose error passed the band */
	double worst;     /* the largest error */
	char worst_node[200];
	char first_over[200]; /* the first output over the band, in step order; "" if none */
} step_nodes_result;

/* One node's output on the reference backend. */
typedef struct node_output {
	loom_op op;
	bool read;   /* false: no activation to compare */
	bool ids;    /* i32: compared exactly */
	size_t n;
	float *values;
} node_output;

/* What the two watches share: the reference step's outputs, and where the
 * comparison stands. */
typedef struct watch_state {
	node_output *out;
	int n_out, cap;
	int step;
	double band;
	const char *b_name;
	step_nodes_result *r;
	char failure[300]; /* set when the two graphs differ, or a read fails */
} watch_state;

/* Reads node i's output into a new array; false, with *values NULL, where
 * it is no activation of f32 or i32. */
static bool read_output(const loom_context *ctx, const loom_node *node, float **values, size_t *n)
{
	const loom_tensor *t = node->dst;
	size_t count = (size_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
	*values = NULL;
	*n = 0;
	float *v = malloc(count * sizeof(float) + 1);
	ck_assert(v != NULL);
	loom_status st = loom_node_watch_read(ctx, t, v, count, n);
	if (st == LOOM_ERR_UNSUPPORTED) {
		free(v);
		return false;
	}
	ck_assert_msg(st == LOOM_OK, "reading node %s: %s", loom_op_name(node->op), loom_last_error());
	*values = v;
	return true;
}

static bool record(void *user, loom_context *ctx, const loom_graph *graph, int i)
{
	watch_state *w = user;
	if (i == 0) {
		for (int k = 0; k < w->n_out; k++)
			free(w->out[k].values);
		w->n_out = 0;
	}
	if (w->n_out == w->cap) {
		w->cap = w->cap ? 2 * w->cap : 256;
		w->out = realloc(w->out, (size_t)w->cap * sizeof(*w->out));
		ck_assert(w->out != NULL);
	}
	const loom_node *node = &graph->nodes[i];
	node_output *o = &w->out[w->n_out++];
	o->op = node->op;
	o->ids = node->dst->dtype == LOOM_DTYPE_I32;
	o->read = read_output(ctx, node, &o->values, &o->n);
	return true;
}

/* max |b - a| over max |a|; 1 where b is not finite and a is. */
static double f32_error(const float *a, const float *b, size_t n)
{
	double diff = 0.0, scale = 0.0;
	for (size_t k = 0; k < n; k++) {
		if (!isfinite(b[k]) && isfinite(a[k]))
			return 1.0;
		if (isfinite(a[k])) {
			diff = fmax(diff, fabs((double)b[k] - (double)a[k]));
			scale = fmax(scale, fabs((double)a[k]));
		}
	}
	return scale > 0.0 ? diff / scale : diff;
}

static bool compare(void *user, loom_context *ctx, const loom_graph *graph, int i)
{
	watch_state *w = user;
	step_nodes_result *r = w->r;
	const loom_node *node = &graph->nodes[i];
	if (i >= w->n_out || w->out[i].op != node->op) {
		snprintf(w->failure, sizeof(w->failure), "step %d: node %d is %s on %s, not what the reference ran", w->step,
			 i, loom_op_name(node->op), w->b_name);
		return false;
	}
	const node_output *o = &w->out[i];
	float *values;
	size_t n;
	if (!read_output(ctx, node, &values, &n) || !o->read) {
		free(values);
		r->n_skipped++;
		return true;
	}
	if (n != o->n) {
		snprintf(w->failure, sizeof(w->failure), "step %d: node %d (%s) has %zu outputs on %s, %zu on the reference",
			 w->step, i, loom_op_name(node->op), n, w->b_name, o->n);
		free(values);
		return false;
	}
	double err = 0.0;
	if (o->ids)
		err = memcmp(values, o->values, n * sizeof(float)) != 0 ? 1.0 : 0.0;
	else
		err = f32_error(o->values, values, n);
	free(values);
	char what[200];
	snprintf(what, sizeof(what), "step %d node %d %s -> %s: %.3g", w->step, i, loom_op_name(node->op),
		 node->dst->name != NULL ? node->dst->name : "?", err);
	r->n_compared++;
	if (err > r->worst || r->worst_node[0] == '\0') {
		r->worst = fmax(err, r->worst);
		snprintf(r->worst_node, sizeof(r->worst_node), "%s", what);
	}
	if (err > w->band) {
		if (r->n_over++ == 0)
			snprintf(r->first_over, sizeof(r->first_over), "%s", what);
	}
	/* The next nodes read the reference's output: each node is judged on
	 * the same inputs on both backends, so its error is its own, not its
	 * inputs' made larger (a quantized product's rounding of an input
	 * a hair apart is a whole step apart). */
	loom_status st = loom_node_watch_write(ctx, node->dst, o->values, o->n);
	ck_assert_msg(st == LOOM_OK, "step %d node %d: %s", w->step, i, loom_last_error());
	return true;
}

/* The comparison of step_nodes_agree, into *r; false where a backend
 * cannot run here. */
static bool compare_steps(const char *path, const char *a, const char *b, const step_nodes_config *cfg,
			  step_nodes_result *r)
{
	const char *names[2] = {a, b};
	loom_runtime *rt[2] = {NULL, NULL};
	loom_model *m[2] = {NULL, NULL};
	loom_context *ctx[2] = {NULL, NULL};
	const int n_seq = cfg->n_seq, n_prompt = cfg->n_prompt;
	enum { MAX_TOKENS = 64 };
	ck_assert(n_seq >= 1 && n_prompt >= 1 && n_seq * n_prompt <= MAX_TOKENS);
	memset(r, 0, sizeof(*r));
	for (int k = 0; k < 2; k++) {
		if ((rt[k] = test_runtime(names[k], cfg->n_threads)) == NULL) {
			for (int j = 0; j < k; j++) {
				loom_context_free(ctx[j]);
				loom_model_free(m[j]);
				loom_runtime_free(rt[j]);
			}
			return false;
		}
		ck_assert_msg(loom_model_load(rt[k], path, NULL, &m[k]) == LOOM_OK, "%s on %s: %s", path, names[k],
			      loom_last_error());
		ctx[k] = test_context(m[k], 256, MAX_TOKENS, cfg->kv_type);
	}
	watch_state w = {.band = cfg->band, .b_name = b, .r = r};
	loom_context_watch_nodes(ctx[0], record, &w);
	loom_context_watch_nodes(ctx[1], compare, &w);

	/* Each sequence's prompt, its last token's logits asked for. */
	const int n_vocab = loom_model_n_vocab(m[0]);
	ck_assert(n_vocab > 3);
	loom_token tok[MAX_TOKENS];
	int32_t seq[MAX_TOKENS];
	int8_t want[MAX_TOKENS];
	for (int i = 0; i < n_seq * n_prompt; i++) {
		tok[i] = 3 + (i * 7919) % (n_vocab - 3);
		seq[i] = i / n_prompt;
		want[i] = i % n_prompt == n_prompt - 1;
	}
	loom_batch batch = {.n_tokens = n_seq * n_prompt, .tokens = tok, .seq_id = seq, .logits = want};
	for (int step = 0; step <= cfg->n_decode; step++) {
		w.step = step;
		for (int k = 0; k < 2; k++) {
			loom_status st = loom_decode(ctx[k], &batch);
			ck_assert_msg(w.failure[0] == '\0', "%s: %s", path, w.failure);
			ck_assert_msg(st == LOOM_OK, "%s, step %d on %s: %s", path, step, names[k], loom_last_error());
		}
		/* Then a token a sequence: the reference's choice for it. */
		for (int s = 0; s < n_seq; s++) {
			const int row = step == 0 ? s * n_prompt + n_prompt - 1 : s;
			tok[s] = test_argmax(loom_get_logits(ctx[0], row), n_vocab);
			seq[s] = s;
			want[s] = 1;
		}
		batch.n_tokens = n_seq;
	}
	for (int k = 0; k < w.n_out; k++)
		free(w.out[k].values);
	free(w.out);
	for (int k = 0; k < 2; k++) {
		loom_context_free(ctx[k]);
		loom_model_free(m[k]);
		loom_runtime_free(rt[k]);
	}
	return true;
}

bool step_nodes_agree(const char *path, const char *name, const char *a, const char *b, const step_nodes_config *cfg)
{
	step_nodes_result r;
	if (!compare_steps(path, a, b, cfg, &r))
		return false;
	printf("%-20s %-12s %d seq, %-4s cache: %4d nodes compared, %3d skipped, worst %s\n", name, b, cfg->n_seq,
	       loom_dtype_name(cfg->kv_type), r.n_compared, r.n_skipped, r.worst_node);
	ck_assert_msg(r.n_compared > 0, "%s on %s: no node compared", name, b);
	ck_assert_msg(r.n_over == 0, "%s on %s (%d sequences, %s cache): %d node outputs past the band %g; the first: %s",
		      name, b, cfg->n_seq, loom_dtype_name(cfg->kv_type), r.n_over, cfg->band, r.first_over);
	return true;
}
