/* node_watch.h - a context's steps computed one node at a time, with a
 * function told after each node, which may read and set what the node
 * wrote: how a test compares two backends node by node on a model's real
 * steps and names the first node where they part
 * (tests/support/step_nodes.c). An internal hook, not in loom.h: a step
 * watched runs no fused kernels and no replayed graphs, and is slower for
 * it. */
#ifndef LOOM_NODE_WATCH_H
#define LOOM_NODE_WATCH_H

#include "infer/context.h"

/* Watches ctx's later steps with fn (context.h's loom_node_watch_fn;
 * NULL: stops watching). A step fn stops ends LOOM_ERR_CANCELLED. */
void loom_context_watch_nodes(loom_context *ctx, loom_node_watch_fn fn, void *user);

/* Runs graph on ctx's backend a node at a time, telling ctx's watch after
 * each. */
loom_status loom_node_watch_compute(loom_context *ctx, const loom_graph *graph);

/* Tensor t's elements as floats (i32 ones converted) into out, n of them
 * (the product of t's shape), row by row in t's order: t must be an f32 or
 * i32 tensor in the context's activations (the scratch buffer).
 * LOOM_ERR_UNSUPPORTED for another type or place (a cache's cells);
 * LOOM_ERR_BUFFER_TOO_SMALL, with *n the count needed, when cap is short. */
loom_status loom_node_watch_read(const loom_context *ctx, const loom_tensor *t, float *out, size_t cap, size_t *n);

/* The inverse: tensor t's elements set from values[0..n) (n the product
 * of t's shape), the bytes between its rows left as they are. */
loom_status loom_node_watch_write(loom_context *ctx, const loom_tensor *t, const float *values, size_t n);

#endif
