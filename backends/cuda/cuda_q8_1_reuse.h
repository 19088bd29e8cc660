/*
 * cuda_q8_1_reuse.h - where a quantized matmul's activations are written
 * as Q8_1 blocks, and when they are already in the work memory.
 *
 * A MATMUL or MATMUL_ID with quantized weights reads its activations
 * (src1) as Q8_1 rows at the start of the work memory, and by itself
 * writes them there first, a kernel of its own. Two ways save that kernel:
 *  - the op that computes those activations, where it can (an RMS_NORM, a
 *    SWIGLU: the backend says which), writes them as Q8_1 too when the
 *    next product is one of its result, with nothing between that uses
 *    the work memory, writes Q8_1 itself or writes to that result (a MoE
 *    router of F32 weights, its top-k and weights may come between);
 *  - the products that read one input one after another (q, k and v; gate
 *    and up; an expert FFN's) use what the first one found or wrote, as
 *    long as no node between them wrote to those activations or used the
 *    work memory.
 * So a llama layer quantizes once (attention's output, for its output
 * projection) where it quantized seven times, a launch each at one token.
 *
 * Plain C, with no CUDA in it, so that the host tests check it; what
 * quantizes, what can write Q8_1 and what uses work memory is the
 * backend's to say.
 */
#ifndef LOOM_CUDA_Q8_1_REUSE_H
#define LOOM_CUDA_Q8_1_REUSE_H

#include "loom/plugin_api.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef bool (*cuda_node_test)(const loom_node *node);

/* What the backend says of a node: whether it is a product that reads its
 * src1 as Q8_1 (quantizes), whether its kernel can write its dst as Q8_1
 * as well (fusable), whether it uses the work memory (uses_work). */
typedef struct cuda_q8_1_ops {
	cuda_node_test quantizes, fusable, uses_work;
} cuda_q8_1_ops;

/* Nodes looked back over: the few between the products of one input. */
#define CUDA_Q8_1_REUSE_REACH 8

/* Whether graph's node i, a fusable one, writes its dst as Q8_1 rows at
 * the start of the work memory too: the first node after it that
 * quantizes, within the reach, reads that dst (the same rows) as its
 * src1, and no node before that one is fusable, uses the work memory or
 * writes to that dst. */
bool cuda_q8_1_feeds(const loom_graph *graph, int i, const cuda_q8_1_ops *ops);

/* The index of the node before graph's node i that left the Q8_1 rows of
 * node i's src1 at the start of the work memory, or -1: the nearest earlier
 * node that quantizes with the same src1 (the same rows, in the same order)
 * or that feeds (cuda_q8_1_feeds) a dst that is that src1, with no node
 * between them that uses the work memory, writes Q8_1 of its own or
 * writes to that src1. */
int cuda_q8_1_source(const loom_graph *graph, int i, const cuda_q8_1_ops *ops);

#ifdef __cplusplus
}
#endif

#endif
