/* node_watch.c - a step a node at a time, watched (node_watch.h). */
#include "infer/node_watch.h"

#include "runtime/backend.h"
#include "runtime/error.h"

#include <stdlib.h>
#include <string.h>

void loom_context_watch_nodes(loom_context *ctx, loom_node_watch_fn fn, void *user)
{
	ctx->node_watch = fn;
	ctx->node_watch_user = user;
}

loom_status loom_node_watch_compute(loom_context *ctx, const loom_graph *graph)
{
	loom_backend *be = &ctx->model->rt->backend;
	for (int i = 0; i < graph->n_nodes; i++) {
		loom_graph one = {.n_nodes = 1, .nodes = graph->nodes + i};
		loom_status st = loom_backend_compute(be, &one);
		if (st != LOOM_OK)
			return st;
		if (!ctx->node_watch(ctx->node_watch_user, ctx, graph, i))
			return loom_error(LOOM_ERR_CANCELLED, "the node watch stopped the step after node %d (%s)", i,
					  loom_op_name(graph->nodes[i].op));
	}
	return LOOM_OK;
}

/* The bytes from t's first element to past its last. */
static size_t span_bytes(const loom_tensor *t)
{
	size_t span = (size_t)t->ne[0] * 4;
	for (int d = 1; d < 4; d++)
		span += (size_t)(t->ne[d] - 1) * t->nb[d];
	return span;
}

/* Where t's bytes lie in the context's activations, and how many;
 * LOOM_ERR_UNSUPPORTED for a type or place a watch cannot read. */
static loom_status activation_span(const loom_context *ctx, const loom_tensor *t, size_t *offset, size_t *span)
{
	const char *base = ctx->scratch.base, *at = t->data, *end = base + ctx->scratch.size;
	const char *name = t->name != NULL ? t->name : "?";
	if (t->dtype != LOOM_DTYPE_F32 && t->dtype != LOOM_DTYPE_I32)
		return loom_error(LOOM_ERR_UNSUPPORTED, "node watch: tensor '%s' is %s, not f32 or i32", name,
				  loom_dtype_name(t->dtype));
	*span = span_bytes(t);
	if (at < base || at > end || *span > (size_t)(end - at))
		return loom_error(LOOM_ERR_UNSUPPORTED, "node watch: tensor '%s' is not in the context's activations",
				  name);
	*offset = (size_t)(at - base);
	return LOOM_OK;
}

static size_t element_count(const loom_tensor *t)
{
	return (size_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
}

/* Element k's 4 bytes in t's span, for k in t's row order. */
static size_t element_at(const loom_tensor *t, size_t k)
{
	const size_t i0 = k % (size_t)t->ne[0], r = k / (size_t)t->ne[0];
	const size_t i1 = r % (size_t)t->ne[1], i2 = r / (size_t)t->ne[1] % (size_t)t->ne[2];
	const size_t i3 = r / (size_t)t->ne[1] / (size_t)t->ne[2];
	return i0 * 4 + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

loom_status loom_node_watch_read(const loom_context *ctx, const loom_tensor *t, float *out, size_t cap, size_t *n)
{
	size_t offset, span;
	loom_status st = activation_span(ctx, t, &offset, &span);
	if (st != LOOM_OK)
		return st;
	*n = element_count(t);
	if (*n > cap)
		return loom_error(LOOM_ERR_BUFFER_TOO_SMALL, "node watch: tensor '%s' has %zu elements, room for %zu",
				  t->name != NULL ? t->name : "?", *n, cap);
	char *bytes = malloc(span);
	if (bytes == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	st = loom_backend_download(&ctx->model->rt->backend, &ctx->scratch, offset, bytes, span);
	for (size_t k = 0; st == LOOM_OK && k < *n; k++) {
		int32_t word;
		memcpy(&word, bytes + element_at(t, k), 4);
		if (t->dtype == LOOM_DTYPE_I32)
			out[k] = (float)word;
		else
			memcpy(out + k, &word, 4);
	}
	free(bytes);
	return st;
}

loom_status loom_node_watch_write(loom_context *ctx, const loom_tensor *t, const float *values, size_t n)
{
	size_t offset, span;
	loom_status st = activation_span(ctx, t, &offset, &span);
	if (st != LOOM_OK)
		return st;
	if (n != element_count(t))
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "node watch: %zu values for tensor '%s' of %zu elements", n,
				  t->name != NULL ? t->name : "?", element_count(t));
	char *bytes = malloc(span);
	if (bytes == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	loom_backend *be = &ctx->model->rt->backend;
	st = loom_backend_download(be, &ctx->scratch, offset, bytes, span);
	for (size_t k = 0; st == LOOM_OK && k < n; k++) {
		int32_t word = (int32_t)values[k];
		memcpy(bytes + element_at(t, k), t->dtype == LOOM_DTYPE_I32 ? (const void *)&word : (const void *)(values + k),
		       4);
	}
	if (st == LOOM_OK)
		st = loom_backend_upload(be, &ctx->scratch, offset, bytes, span);
	free(bytes);
	return st;
}
