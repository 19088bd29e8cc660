/*
 * cuda_replay_key.c - a step graph's launch key and the slots of captured
 * graphs (cuda_replay_key.h).
 */
#include "cuda_replay_key.h"

#include <stdlib.h>
#include <string.h>

/* A node's words: op, the parameters, then dst and each source. */
#define TENSOR_WORDS (3 + 2 * LOOM_MAX_DIMS)
#define NODE_WORDS (1 + LOOM_NODE_MAX_PARAMS + (1 + LOOM_NODE_MAX_SRC) * TENSOR_WORDS)

static uint64_t *put_tensor(uint64_t *w, const loom_tensor *t)
{
	if (t == NULL) {
		/* Absent: one word no present tensor's first word equals, so
		 * that no two graphs write the same words. */
		*w++ = 0;
		return w;
	}
	*w++ = 1 + (uint64_t)t->dtype;
	*w++ = t->layout;
	*w++ = (uint64_t)(uintptr_t)t->data;
	for (int d = 0; d < LOOM_MAX_DIMS; d++) {
		*w++ = (uint64_t)t->ne[d];
		*w++ = (uint64_t)t->nb[d];
	}
	return w;
}

bool cuda_replay_key_build(const loom_graph *graph, const void *work, cuda_replay_key *key)
{
	size_t most = 2 + (size_t)graph->n_nodes * NODE_WORDS;
	if (most > key->cap) {
		uint64_t *grown = (uint64_t *)realloc(key->words, most * sizeof(uint64_t));
		if (grown == NULL)
			return false;
		key->words = grown;
		key->cap = most;
	}
	uint64_t *w = key->words;
	*w++ = (uint64_t)graph->n_nodes;
	*w++ = (uint64_t)(uintptr_t)work;
	for (int i = 0; i < graph->n_nodes; i++) {
		const loom_node *node = &graph->nodes[i];
		*w++ = (uint64_t)node->op;
		for (int p = 0; p < LOOM_NODE_MAX_PARAMS; p++) {
			uint32_t bits;
			memcpy(&bits, &node->fp[p], sizeof(bits));
			*w++ = (uint64_t)(uint32_t)node->ip[p] | (uint64_t)bits << 32;
		}
		w = put_tensor(w, node->dst);
		for (int s = 0; s < LOOM_NODE_MAX_SRC; s++)
			w = put_tensor(w, node->src[s]);
	}
	key->n = (size_t)(w - key->words);
	return true;
}

void cuda_replay_key_free(cuda_replay_key *key)
{
	free(key->words);
	key->words = NULL;
	key->n = key->cap = 0;
}

static bool same_key(const cuda_replay_key *a, const cuda_replay_key *b)
{
	return a->n == b->n && memcmp(a->words, b->words, a->n * sizeof(uint64_t)) == 0;
}

cuda_replay_slot *cuda_replay_find(cuda_replay_table *table, const cuda_replay_key *key)
{
	for (int i = 0; i < CUDA_REPLAY_SLOTS; i++) {
		cuda_replay_slot *slot = &table->slots[i];
		if (slot->key.n != 0 && same_key(&slot->key, key)) {
			slot->last_used = ++table->clock;
			return slot;
		}
	}
	return NULL;
}

cuda_replay_slot *cuda_replay_victim(cuda_replay_table *table)
{
	cuda_replay_slot *victim = &table->slots[0];
	for (int i = 0; i < CUDA_REPLAY_SLOTS; i++) {
		cuda_replay_slot *slot = &table->slots[i];
		if (slot->key.n == 0)
			return slot;
		if (slot->last_used < victim->last_used)
			victim = slot;
	}
	return victim;
}

bool cuda_replay_store(cuda_replay_table *table, cuda_replay_slot *slot, const cuda_replay_key *key)
{
	slot->exec = NULL;
	slot->key.n = 0;
	if (key->n > slot->key.cap) {
		uint64_t *grown = (uint64_t *)realloc(slot->key.words, key->n * sizeof(uint64_t));
		if (grown == NULL)
			return false;
		slot->key.words = grown;
		slot->key.cap = key->n;
	}
	memcpy(slot->key.words, key->words, key->n * sizeof(uint64_t));
	slot->key.n = key->n;
	slot->last_used = ++table->clock;
	return true;
}
