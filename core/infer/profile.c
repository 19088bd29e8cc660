/* profile.c - a context's profile: the backend times each node of a step
 * (its compute_timed slot), and the nodes are summed by what they do: the
 * output head (the nodes forward.c marks), the other weight products,
 * attention, and the rest. What a step's wall time holds beyond its nodes
 * is the core's own work. */
#include "infer/profile.h"

#include "runtime/clock.h"
#include "runtime/error.h"
#include "runtime/struct_size.h"

#include <stdlib.h>
#include <string.h>

void loom_context_set_profiling(loom_context *ctx, bool on)
{
	if (ctx == NULL)
		return;
	memset(&ctx->profile, 0, sizeof(ctx->profile));
	ctx->compute_ms = 0;
	ctx->profiling = false;
	if (!on)
		return;
	if (ctx->node_ns == NULL && (ctx->node_ns = calloc((size_t)ctx->max_nodes, sizeof(uint64_t))) == NULL)
		return; /* out of memory: no profile */
	ctx->profile.by_node = loom_backend_times_nodes(&ctx->model->rt->backend);
	ctx->profiling = true;
}

loom_status loom_context_profile_sized(const loom_context *ctx, loom_profile *out, size_t size)
{
	if (ctx == NULL || out == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_context_profile: context and out are required");
	loom_profile p = ctx->profile;
	double nodes = p.matmul_ms + p.head_ms + p.attention_ms + p.other_ms;
	p.host_ms = p.total_ms - (p.by_node ? nodes : ctx->compute_ms);
	if (p.host_ms < 0)
		p.host_ms = 0;
	return loom_struct_out(&loom_profile_desc, out, size, &p);
}

loom_status profile_compute(loom_context *ctx, const loom_graph *graph)
{
	loom_backend *be = &ctx->model->rt->backend;
	if (!ctx->profiling)
		return loom_backend_compute(be, graph);
	double t0 = loom_now_s();
	loom_status st = ctx->profile.by_node ? loom_backend_compute_timed(be, graph, ctx->node_ns)
					      : loom_backend_compute(be, graph);
	ctx->compute_ms += (loom_now_s() - t0) * 1e3;
	if (st != LOOM_OK || !ctx->profile.by_node)
		return st;
	loom_profile *p = &ctx->profile;
	for (int i = 0; i < graph->n_nodes; i++) {
		double ms = (double)ctx->node_ns[i] / 1e6;
		if (i >= ctx->built.head_first && i < ctx->built.head_end)
			p->head_ms += ms;
		else if (graph->nodes[i].op == LOOM_OP_MATMUL || graph->nodes[i].op == LOOM_OP_MATMUL_ID)
			p->matmul_ms += ms;
		else if (graph->nodes[i].op == LOOM_OP_ATTENTION)
			p->attention_ms += ms;
		else
			p->other_ms += ms;
	}
	return LOOM_OK;
}

void profile_add_step(loom_context *ctx, double ms)
{
	if (!ctx->profiling)
		return;
	ctx->profile.n_steps++;
	ctx->profile.total_ms += ms;
}
