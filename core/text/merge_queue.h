/* merge_queue.h - merging a tokenizer's symbols pair by pair, the best
 * candidate first: a binary heap ordered by priority (lower first), then by
 * the left symbol, so that equal candidates merge left to right.
 * SentencePiece gives a pair the negated score of the token it makes,
 * byte-level BPE its merge rank. */
#ifndef LOOM_MERGE_QUEUE_H
#define LOOM_MERGE_QUEUE_H

#include "loom.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct loom_merge {
	double priority;
	int left, right; /* the symbols */
	int size;        /* bytes of the two together, to tell a stale entry */
} loom_merge;

typedef struct loom_merge_queue {
	loom_merge *data;
	size_t n, cap;
} loom_merge_queue;

void loom_merge_queue_free(loom_merge_queue *q);

/* A symbol of the text being merged: bytes start .. start + n, linked to
 * its neighbours (-1 at the ends); n is 0 once merged into its left. */
typedef struct loom_symbol {
	int start, n;
	int prev, next;
} loom_symbol;

/* The priority of merging neighbours left and right; false if they do not
 * merge. */
typedef bool (*loom_pair_fn)(const void *ctx, const loom_symbol *syms, int left, int right, double *priority);

/* Merges the best pair of the symbols linked from first until no
 * neighbours merge. q is scratch, reused between calls. */
loom_status loom_merge_symbols(loom_merge_queue *q, loom_symbol *syms, int first, loom_pair_fn pair, const void *ctx);

#endif
