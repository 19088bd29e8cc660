/*
 * cuda_replay_key.h - which captured CUDA graph a step may replay.
 *
 * A node's kernels are launched with what the node holds (op, parameters,
 * each tensor's type, layout, shape, strides and address) and the work
 * memory's address, and with nothing else: the ops read values only on the
 * device. So two steps whose nodes hold the same words launch the same
 * kernels with the same arguments, and the second may replay the graph
 * captured from the first. The key is those words, compared whole: a hash
 * alone could let a different step replay a graph that is not its own.
 *
 * Plain C, with no CUDA in it, so that the host tests check it.
 */
#ifndef LOOM_CUDA_REPLAY_KEY_H
#define LOOM_CUDA_REPLAY_KEY_H

#include "loom/plugin_api.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Shapes kept at once: a server's decode runs a few batch sizes. */
#define CUDA_REPLAY_SLOTS 8

typedef struct cuda_replay_key {
	uint64_t *words;
	size_t n, cap;
} cuda_replay_key;

typedef struct cuda_replay_slot {
	cuda_replay_key key;   /* n == 0: empty */
	void *exec;            /* the instantiated graph (cudaGraphExec_t); NULL: not captured yet */
	uint64_t last_used;
} cuda_replay_slot;

typedef struct cuda_replay_table {
	cuda_replay_slot slots[CUDA_REPLAY_SLOTS];
	uint64_t clock;
} cuda_replay_table;

/* Writes graph's key, with work (the work memory's address), into *key,
 * growing it; false if out of memory. */
bool cuda_replay_key_build(const loom_graph *graph, const void *work, cuda_replay_key *key);

void cuda_replay_key_free(cuda_replay_key *key);

/* The slot holding key, marked used now; NULL if none does. */
cuda_replay_slot *cuda_replay_find(cuda_replay_table *table, const cuda_replay_key *key);

/* The slot a new key goes in: an empty one, else the least recently used.
 * Its exec, if any, is the caller's to destroy before the slot is reused. */
cuda_replay_slot *cuda_replay_victim(cuda_replay_table *table);

/* Stores a copy of key in slot (exec NULL), marked used now; false if out
 * of memory, the slot then empty. */
bool cuda_replay_store(cuda_replay_table *table, cuda_replay_slot *slot, const cuda_replay_key *key);

#ifdef __cplusplus
}
#endif

#endif
