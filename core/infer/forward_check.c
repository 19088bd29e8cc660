/* forward_check.c - whether the backend can run every node of the steps a
 * context will run, asked once when the context is made: a model the
 * backend cannot run is refused there, naming the op and its tensors'
 * types, instead of failing at the first decode. The backend then
 * allocates what those steps need beyond the context's buffers (a GPU's
 * work memory), so that a device short of it refuses the context too. */
#include "infer/context.h"

#include "runtime/appendf.h"
#include "runtime/error.h"

#include <inttypes.h>

/* Appends "name type [ne0, ne1, ...]" for t. */
static void describe(char *buf, size_t size, size_t *len, const loom_tensor *t)
{
	const char *type = loom_dtype_name(t->dtype);
	int dims = LOOM_MAX_DIMS;
	while (dims > 1 && t->ne[dims - 1] == 1)
		dims--;
	loom_appendf(buf, size, len, "%s %s [", t->name != NULL ? t->name : "(unnamed)",
		     type != NULL ? type : "(unknown type)");
	for (int d = 0; d < dims; d++)
		loom_appendf(buf, size, len, "%s%" PRId64, d ? ", " : "", t->ne[d]);
	loom_appendf(buf, size, len, "]");
}

static loom_status refuse(const loom_context *ctx, const loom_node *node)
{
	char what[768] = "";
	size_t len = 0;
	for (int i = 0; i < LOOM_NODE_MAX_SRC; i++) {
		if (node->src[i] == NULL)
			continue;
		if (len > 0)
			loom_appendf(what, sizeof(what), &len, ", ");
		describe(what, sizeof(what), &len, node->src[i]);
	}
	loom_appendf(what, sizeof(what), &len, " -> ");
	describe(what, sizeof(what), &len, node->dst);
	return loom_error(LOOM_ERR_UNSUPPORTED, "backend %s cannot run %s on %s",
			  loom_backend_name(&ctx->model->rt->backend), loom_op_name(node->op), what);
}

loom_status loom_forward_check_graph(const loom_context *ctx, const loom_graph *graph)
{
	for (int i = 0; i < graph->n_nodes; i++)
		if (!loom_backend_supports(&ctx->model->rt->backend, &graph->nodes[i]))
			return refuse(ctx, &graph->nodes[i]);
	return LOOM_OK;
}

loom_status loom_forward_check(loom_context *ctx)
{
	/* One token, and a full batch of which one row goes through the head:
	 * between them every node a step can have. */
	const int steps[][2] = {{1, 1}, {(int)ctx->params.n_batch, 1}};
	ctx->n_kv_swa = ctx->kv_swa.n_cells;
	for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
		loom_graph graph;
		loom_status st = loom_forward_build(ctx, steps[s][0], ctx->kv.n_cells, steps[s][1], LOOM_STEP_LOGITS, &graph);
		if (st == LOOM_OK)
			st = loom_forward_check_graph(ctx, &graph);
		if (st == LOOM_OK && (st = loom_backend_reserve(&ctx->model->rt->backend, &graph)) != LOOM_OK)
			st = loom_error_wrap(st, "a context of %u cells with batches of %u tokens", ctx->kv.n_cells,
					     ctx->params.n_batch);
		if (st != LOOM_OK)
			return st;
	}
	return LOOM_OK;
}
