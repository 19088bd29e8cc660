/*
 * cuda_q8_1_reuse.h - whether a quantized matmul's activations are already
 * in the work memory as Q8_1 blocks.
 *
 * A MATMUL or MATMUL_ID with quantized weights first writes its
 * activations (src1) as Q8_1 rows at the start of the work memory. The
 * products that read the same activations one after another (q, k and v;
 * gate and up; an expert FFN's and a shared expert's) need them written
 * once: a later one may use what an earlier one wrote, as long as no node
 * between them wrote to those activations or used the work memory. At one
 * token every such write is a kernel of its own, three of a llama layer's
 * seven saved.
 *
 * Plain C, with no CUDA in it, so that the host tests check it; what uses
 * work memory and what quantizes is the backend's to say.
 */
#ifndef LOOM_CUDA_Q8_1_REUSE_H
#define LOOM_CUDA_Q8_1_REUSE_H

#include "loom/plugin_api.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef bool (*cuda_node_test)(const loom_node *node);

/* Nodes looked back over: the few between the products of one input. */
#define CUDA_Q8_1_REUSE_REACH 8

/* The index of the node before graph's node i whose Q8_1 rows of node i's
 * src1 are still at the start of the work memory, or -1: the nearest
 * earlier node for which quantizes() holds and whose src1 is the same
 * tensor (address, type, shape, strides), with no node between them that
 * uses_work() or whose dst overlaps that src1. */
int cuda_q8_1_source(const loom_graph *graph, int i, cuda_node_test quantizes, cuda_node_test uses_work);

#ifdef __cplusplus
}
#endif

#endif
