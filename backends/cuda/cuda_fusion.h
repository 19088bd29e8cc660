/*
 * cuda_fusion.h - runs of a step's nodes that the cuda backend enqueues as
 * one kernel, each node's writes the same as its own kernel's:
 *  - an ADD whose sum the next node, an RMS_NORM, normalizes (the
 *    residual add and the next norm: a layer has two);
 *  - a layer's attention prologue: the RoPE of q and of k (the same
 *    positions and angles: one table of them serves both), then the
 *    stores of k and v in the cache cells of the tokens (the same cells);
 *    or the two stores alone, where the layer does not rotate;
 *  - one token's products of one input with up to
 *    CUDA_FUSION_MAX_PRODUCTS matrices of one quantized type, one after
 *    another (q, k and v; gate and up).
 * A decode step's launches are short, so each one saved is time: with
 * attention writing its projection's Q8_1 (cuda_attention.cu), a llama
 * decode layer over a short cache goes from 18 launches to 9 (10 where
 * v's type is not q's).
 *
 * A run is fused only where one thread block per row or per token keeps
 * the unfused order of every read and write: what a node reads of an
 * earlier node of the run was written for the same token, and nothing
 * else overlaps. Whether each node's dtypes and shapes are ones the
 * kernels take is the backend's supports() to say, as for any node.
 *
 * Plain C, with no CUDA in it, so that the host tests check it.
 */
#ifndef LOOM_CUDA_FUSION_H
#define LOOM_CUDA_FUSION_H

#include "loom/plugin_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cuda_fusion_kind {
	CUDA_FUSION_NONE = 0,
	CUDA_FUSION_ADD_RMS_NORM, /* nodes: the ADD, the RMS_NORM */
	CUDA_FUSION_ROPE_STORE,   /* nodes: [ROPE q, ROPE k,] KV_STORE k, KV_STORE v */
	CUDA_FUSION_PRODUCTS      /* nodes: 2 to CUDA_FUSION_MAX_PRODUCTS MATMULs */
} cuda_fusion_kind;

#define CUDA_FUSION_MAX_PRODUCTS 3

typedef struct cuda_fusion {
	cuda_fusion_kind kind;
	int n_nodes; /* from the node asked about on */
	bool rotates; /* ROPE_STORE: whether its first two nodes are the ropes */
} cuda_fusion;

/* The run that starts at graph's node i, or kind NONE (n_nodes 1). */
cuda_fusion cuda_fusion_at(const loom_graph *graph, int i);

#ifdef __cplusplus
}
#endif

#endif
