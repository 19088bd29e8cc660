/*
 * graph_runner.h - a few nodes over host tensors, run on a backend as one
 * graph or a node at a time: what a backend that enqueues runs of nodes
 * as one kernel (the cuda backend's fused runs) must give alike.
 *
 * Tensors are packed rows. A view names another tensor whose buffer it
 * shares from its start, with its own shape (k's heads over k's rows).
 */
#ifndef LOOM_TEST_GRAPH_RUNNER_H
#define LOOM_TEST_GRAPH_RUNNER_H

#include "op_runner.h"

enum { GRAPH_MAX_TENSORS = 16, GRAPH_MAX_NODES = 8 };

typedef struct graph_tensor {
	htensor h;   /* dtype, shape; data: the initial contents (NULL for a view) */
	int view_of; /* -1: a buffer of its own */
} graph_tensor;

typedef struct graph_node {
	loom_op op;
	int dst, src[LOOM_NODE_MAX_SRC]; /* tensor indices; -1: none */
	int32_t ip[LOOM_NODE_MAX_PARAMS];
	float fp[LOOM_NODE_MAX_PARAMS];
} graph_node;

typedef struct graph_case {
	char what[160];
	graph_tensor tensors[GRAPH_MAX_TENSORS];
	int n_tensors;
	graph_node nodes[GRAPH_MAX_NODES];
	int n_nodes;
} graph_case;

/* A new tensor of the case, zeroed (or, view_of >= 0, a view of that
 * one); its index. */
int graph_tensor_add(graph_case *g, loom_dtype type, int64_t ne0, int64_t ne1, int64_t ne2, int view_of);
/* A new node writing dst from srcs (up to 4, -1 past the last); it. */
graph_node *graph_node_add(graph_case *g, loom_op op, int dst, int s0, int s1, int s2, int s3);
void graph_case_free(graph_case *g);

/* Whether instance be of the backend takes every node. */
bool graph_supported(const op_backend *b, void *be, const graph_case *g);
/* Runs the case on instance be, its nodes as one graph (whole) or one
 * compute each; out[t] gets tensor t's bytes after it (NULL for views;
 * malloc'd). */
void graph_run(const op_backend *b, void *be, const graph_case *g, bool whole, void *out[GRAPH_MAX_TENSORS]);

#endif
