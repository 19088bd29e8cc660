/* merge_queue.c - merging a tokenizer's symbols, best pair first
 * (merge_queue.h). */
#include "text/merge_queue.h"

#include "runtime/array_grow.h"
#include "runtime/error.h"

#include <stdbool.h>
#include <stdlib.h>

static bool before(const loom_merge *a, const loom_merge *b)
{
	if (a->priority != b->priority)
		return a->priority < b->priority;
	return a->left < b->left;
}

static void swap(loom_merge *a, loom_merge *b)
{
	loom_merge t = *a;
	*a = *b;
	*b = t;
}

static loom_status push(loom_merge_queue *q, loom_merge m)
{
	loom_merge *p = loom_array_grow(q->data, &q->cap, q->n + 1, sizeof(*p));
	if (p == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "tokenizer: out of memory");
	q->data = p;
	size_t i = q->n++;
	q->data[i] = m;
	while (i > 0 && before(&q->data[i], &q->data[(i - 1) / 2])) {
		swap(&q->data[i], &q->data[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	return LOOM_OK;
}

/* The best candidate, removed; the queue must not be empty. */
static loom_merge pop(loom_merge_queue *q)
{
	loom_merge top = q->data[0];
	q->data[0] = q->data[--q->n];
	for (size_t i = 0;;) {
		size_t l = 2 * i + 1, r = l + 1, best = i;
		if (l < q->n && before(&q->data[l], &q->data[best]))
			best = l;
		if (r < q->n && before(&q->data[r], &q->data[best]))
			best = r;
		if (best == i)
			break;
		swap(&q->data[i], &q->data[best]);
		i = best;
	}
	return top;
}

void loom_merge_queue_free(loom_merge_queue *q)
{
	free(q->data);
	q->data = NULL;
	q->n = q->cap = 0;
}

static loom_status try_pair(loom_merge_queue *q, const loom_symbol *syms, int left, int right, loom_pair_fn pair,
			    const void *ctx)
{
	double priority;
	if (left < 0 || right < 0 || !pair(ctx, syms, left, right, &priority))
		return LOOM_OK;
	return push(q, (loom_merge){.priority = priority, .left = left, .right = right,
				    .size = syms[left].n + syms[right].n});
}

/* A popped pair is stale if either side has since been merged into
 * something else: symbols only grow, so their sizes no longer add up to
 * the pair's. */
loom_status loom_merge_symbols(loom_merge_queue *q, loom_symbol *syms, int first, loom_pair_fn pair, const void *ctx)
{
	loom_status st = LOOM_OK;
	q->n = 0;
	for (int i = first; i >= 0 && syms[i].next >= 0 && st == LOOM_OK; i = syms[i].next)
		st = try_pair(q, syms, i, syms[i].next, pair, ctx);
	while (q->n > 0 && st == LOOM_OK) {
		loom_merge b = pop(q);
		loom_symbol *l = &syms[b.left], *r = &syms[b.right];
		if (l->n == 0 || r->n == 0 || l->n + r->n != b.size)
			continue;
		l->n += r->n;
		r->n = 0;
		l->next = r->next;
		if (r->next >= 0)
			syms[r->next].prev = b.left;
		st = try_pair(q, syms, l->prev, b.left, pair, ctx);
		if (st == LOOM_OK)
			st = try_pair(q, syms, b.left, l->next, pair, ctx);
	}
	return st;
}
