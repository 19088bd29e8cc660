/* graph_runner.c - a few nodes run as one graph or one at a time
 * (graph_runner.h). */
#include "graph_runner.h"

#include "plugin_host.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

int graph_tensor_add(graph_case *g, loom_dtype type, int64_t ne0, int64_t ne1, int64_t ne2, int view_of)
{
	ck_assert_int_lt(g->n_tensors, GRAPH_MAX_TENSORS);
	graph_tensor *t = &g->tensors[g->n_tensors];
	t->view_of = view_of;
	if (view_of < 0)
		t->h = ht(type, ne0, ne1, ne2, 1);
	else
		t->h = (htensor){.dtype = type, .ne = {ne0, ne1, ne2, 1}};
	return g->n_tensors++;
}

graph_node *graph_node_add(graph_case *g, loom_op op, int dst, int s0, int s1, int s2, int s3)
{
	ck_assert_int_lt(g->n_nodes, GRAPH_MAX_NODES);
	graph_node *n = &g->nodes[g->n_nodes++];
	*n = (graph_node){.op = op, .dst = dst, .src = {s0, s1, s2, s3, -1}};
	return n;
}

void graph_case_free(graph_case *g)
{
	for (int t = 0; t < g->n_tensors; t++)
		free(g->tensors[t].h.data);
	g->n_tensors = 0;
}

/* The case's tensors placed on instance be (views over their tensors'
 * buffers) and its nodes over them. */
typedef struct placed_graph {
	dtensor d[GRAPH_MAX_TENSORS];
	loom_tensor t[GRAPH_MAX_TENSORS];
	loom_node nodes[GRAPH_MAX_NODES];
} placed_graph;

static void view_of(const htensor *h, const loom_tensor *base, loom_tensor *out)
{
	loom_dtype_traits l = loom_dtype_traits_of(h->dtype);
	size_t rb = ht_row_bytes(h);
	*out = (loom_tensor){
		.dtype = h->dtype,
		.ne = {h->ne[0], h->ne[1], h->ne[2], h->ne[3]},
		.nb = {l.block_bytes, rb, rb * h->ne[1], rb * h->ne[1] * h->ne[2]},
		.data = base->data,
	};
}

static void place(const op_backend *b, void *be, const graph_case *g, placed_graph *p, bool allocate)
{
	memset(p, 0, sizeof(*p));
	for (int i = 0; i < g->n_tensors; i++) {
		const graph_tensor *gt = &g->tensors[i];
		if (gt->view_of >= 0) {
			view_of(&gt->h, &p->t[gt->view_of], &p->t[i]);
		} else if (allocate) {
			op_place(b, be, &gt->h, 0, &p->d[i]);
			p->t[i] = p->d[i].t;
		} else {
			/* Shapes only, for supports(). */
			view_of(&gt->h, &(loom_tensor){.data = (void *)(uintptr_t)(0x1000 * (i + 1))}, &p->t[i]);
		}
	}
	for (int k = 0; k < g->n_nodes; k++) {
		const graph_node *n = &g->nodes[k];
		p->nodes[k] = (loom_node){.op = n->op, .dst = &p->t[n->dst]};
		for (int s = 0; s < LOOM_NODE_MAX_SRC; s++)
			p->nodes[k].src[s] = n->src[s] >= 0 ? &p->t[n->src[s]] : NULL;
		memcpy(p->nodes[k].ip, n->ip, sizeof(n->ip));
		memcpy(p->nodes[k].fp, n->fp, sizeof(n->fp));
	}
}

bool graph_supported(const op_backend *b, void *be, const graph_case *g)
{
	static placed_graph p;
	place(b, be, g, &p, false);
	for (int k = 0; k < g->n_nodes; k++)
		if (!b->vt->supports(be, &p.nodes[k]))
			return false;
	return true;
}

void graph_run(const op_backend *b, void *be, const graph_case *g, bool whole, void *out[GRAPH_MAX_TENSORS])
{
	static placed_graph p;
	place(b, be, g, &p, true);
	for (int k = 0; k < g->n_nodes; k += whole ? g->n_nodes : 1) {
		loom_graph graph = {.n_nodes = whole ? g->n_nodes : 1, .nodes = &p.nodes[k]};
		test_clear_error();
		loom_status st = b->vt->compute(be, &graph);
		ck_assert_msg(st == LOOM_OK, "%s on %s (%s): compute failed (%d): %s", g->what, b->name,
			      whole ? "whole" : "a node at a time", st, test_plugin_error());
	}
	for (int i = 0; i < g->n_tensors; i++) {
		out[i] = NULL;
		if (g->tensors[i].view_of >= 0)
			continue;
		out[i] = malloc(ht_bytes(&g->tensors[i].h));
		ck_assert(out[i] != NULL);
		op_fetch(b, be, &p.d[i], &g->tensors[i].h, out[i], g->what);
		b->vt->buffer_free(be, &p.d[i].buf);
	}
}
