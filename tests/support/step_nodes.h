/*
 * step_nodes.h - one model's steps on two backends, compared node by node:
 * each step runs a node at a time on both (core/infer/node_watch.h), and
 * every node that writes f32 or i32 activations is read back from each and
 * compared. Where the logits of two backends part, the first node whose
 * output parted says which kernel did it, without a second run.
 */
#ifndef LOOM_TEST_STEP_NODES_H
#define LOOM_TEST_STEP_NODES_H

#include "loom.h"

#include <stdbool.h>

/* The family models (family_models.h) test_cuda compares node by node:
 * one of each kind of block - routing by softmax, by sigmoid with a bias,
 * shared experts, windows, soft-caps, sinks, MXFP4, K-quants, a fused
 * qkv - at the weight types that reach the most kernels. */
extern const char *const step_nodes_families[];
extern const int step_nodes_n_families;

/* The steps compared: n_seq sequences, each a prompt of n_prompt tokens
 * (all evaluated as one batch), then n_decode steps of a token for each
 * (the reference's greedy choice, both backends fed the same), with a KV
 * cache of kv_type, on runtimes of n_threads. */
typedef struct step_nodes_config {
	int n_threads;
	int n_seq;
	int n_prompt;
	int n_decode;
	loom_dtype kv_type;
	double band; /* the largest error a node may show */
} step_nodes_config;

/* Model file path (called name in what it prints) on backends a (the
 * reference) and b: one line with the nodes compared and the worst, and
 * the test fails where a node's error passes cfg->band, naming the first
 * (step, node, op, tensor), or where no node was compared. A node's error:
 * max |b - a| over max |a| for f32 outputs (1 where b has a NaN or
 * infinity a has not), 1 where i32 outputs (expert choices) differ at
 * all. Returns false, after a SKIP line, where a backend cannot run on
 * this machine; the test fails where loom does. */
bool step_nodes_agree(const char *path, const char *name, const char *a, const char *b, const step_nodes_config *cfg);

#endif
