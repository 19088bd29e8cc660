/* token_trie.c - a model's tokens by their bytes (token_trie.h). */
#include "grammar/token_trie.h"

#include "model/model.h"
#include "runtime/error.h"

#include <stdlib.h>
#include <string.h>

/* A token and its bytes, for sorting. */
typedef struct keyed {
	const unsigned char *p;
	uint32_t len;
	loom_token tok;
} keyed;

static int by_bytes(const void *pa, const void *pb)
{
	const keyed *a = pa, *b = pb;
	int c = memcmp(a->p, b->p, a->len < b->len ? a->len : b->len);
	if (c != 0)
		return c;
	return a->len != b->len ? (a->len < b->len ? -1 : 1) : (a->tok < b->tok ? -1 : 1);
}

typedef struct build {
	loom_token_trie *t;
	const loom_token *sorted;
} build;

/* The node for the tokens sorted[lo, hi), which share their first depth
 * bytes (the last of them `byte`), and its subtree. */
static void make_node(build *b, uint32_t lo, uint32_t hi, uint32_t depth, unsigned char byte)
{
	loom_token_trie *t = b->t;
	const uint32_t node = t->n_nodes++;
	t->byte[node] = byte;
	/* Tokens of exactly depth bytes sort first. */
	uint32_t k = lo;
	while (k < hi && t->piece_off[b->sorted[k] + 1] - t->piece_off[b->sorted[k]] == depth)
		k++;
	t->tok_first[node] = lo;
	t->tok_n[node] = k - lo;
	while (k < hi) {
		const unsigned char c = t->pieces[t->piece_off[b->sorted[k]] + depth];
		uint32_t e = k;
		while (e < hi && t->pieces[t->piece_off[b->sorted[e]] + depth] == c)
			e++;
		make_node(b, k, e, depth + 1, c);
		k = e;
	}
	t->subtree[node] = t->n_nodes - node;
}

void loom_token_trie_free(loom_token_trie *t)
{
	if (t == NULL)
		return;
	free(t->byte);
	free(t->subtree);
	free(t->tok_first);
	free(t->tok_n);
	free(t->tokens);
	free(t->piece_off);
	free(t->pieces);
	free(t->eog);
	free(t);
}

loom_status loom_token_trie_build(const loom_model *model, loom_token_trie **out)
{
	*out = NULL;
	const int32_t n = loom_model_n_vocab(model);
	loom_token_trie *t = calloc(1, sizeof(*t));
	if (t == NULL || (t->piece_off = malloc(((size_t)n + 1) * sizeof(uint32_t))) == NULL ||
	    (t->eog = malloc(((size_t)n + 1) * sizeof(loom_token))) == NULL) {
		loom_token_trie_free(t);
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory building the token trie");
	}
	t->n_vocab = n;
	/* Each token's bytes, as the detokenizer writes them. */
	size_t cap = 1 << 16, used = 0;
	t->pieces = malloc(cap);
	loom_status st = t->pieces != NULL ? LOOM_OK : LOOM_ERR_NO_MEMORY;
	for (loom_token i = 0; st == LOOM_OK && i < n; i++) {
		t->piece_off[i] = (uint32_t)used;
		if (loom_token_is_eog(model, i))
			t->eog[t->n_eog++] = i;
		size_t len = 0;
		char buf[256];
		st = loom_token_to_piece(model, i, false, buf, sizeof(buf), &len);
		if (st == LOOM_ERR_BUFFER_TOO_SMALL)
			st = loom_error(LOOM_ERR_UNSUPPORTED, "token %d is %zu bytes, more than the trie takes", i, len);
		if (st == LOOM_OK && used + len > cap) {
			while (used + len > cap)
				cap *= 2;
			unsigned char *p = realloc(t->pieces, cap);
			if (p == NULL)
				st = LOOM_ERR_NO_MEMORY;
			else
				t->pieces = p;
		}
		if (st == LOOM_OK) {
			memcpy(t->pieces + used, buf, len);
			used += len;
		}
	}
	t->piece_off[n] = (uint32_t)used;
	/* The tokens with bytes, sorted by them: nodes at most one a byte.
	 * End-of-generation tokens stay out: they are allowed only where a
	 * sentence may end, whatever their bytes. */
	loom_token *sorted = st == LOOM_OK ? malloc(((size_t)n + 1) * sizeof(loom_token)) : NULL;
	keyed *keys = st == LOOM_OK ? malloc(((size_t)n + 1) * sizeof(keyed)) : NULL;
	uint32_t n_sorted = 0;
	if (st == LOOM_OK && (sorted == NULL || keys == NULL))
		st = LOOM_ERR_NO_MEMORY;
	for (loom_token i = 0; st == LOOM_OK && i < n; i++)
		if (t->piece_off[i + 1] > t->piece_off[i] && !loom_token_is_eog(model, i))
			keys[n_sorted++] = (keyed){t->pieces + t->piece_off[i], t->piece_off[i + 1] - t->piece_off[i], i};
	const size_t max_nodes = used + 1;
	if (st == LOOM_OK) {
		qsort(keys, n_sorted, sizeof(keyed), by_bytes);
		for (uint32_t i = 0; i < n_sorted; i++)
			sorted[i] = keys[i].tok;
		t->byte = malloc(max_nodes);
		t->subtree = malloc(max_nodes * sizeof(uint32_t));
		t->tok_first = malloc(max_nodes * sizeof(uint32_t));
		t->tok_n = malloc(max_nodes * sizeof(uint32_t));
		if (!t->byte || !t->subtree || !t->tok_first || !t->tok_n)
			st = LOOM_ERR_NO_MEMORY;
	}
	if (st == LOOM_OK) {
		build b = {t, sorted};
		make_node(&b, 0, n_sorted, 0, 0);
		t->tokens = sorted;
		sorted = NULL;
	}
	free(sorted);
	free(keys);
	if (st != LOOM_OK) {
		loom_token_trie_free(t);
		return st == LOOM_ERR_NO_MEMORY ? loom_error(st, "out of memory building the token trie") : st;
	}
	*out = t;
	return LOOM_OK;
}

/* The children of the node before first (up to end) that state s lets
 * through, their tokens marked; each child's state is given back before
 * the next. */
static bool walk(const loom_token_trie *t, loom_gr_arena *a, const loom_grammar *g, const loom_gr_state *s,
		 uint32_t first, uint32_t end, uint32_t *bits, int32_t *n_allowed)
{
	for (uint32_t i = first; i < end; i += t->subtree[i]) {
		loom_gr_mark mark = loom_gr_arena_mark(a);
		bool error;
		const loom_gr_state *next = loom_gr_advance(a, g, s, t->byte[i], &error);
		if (error)
			return false;
		if (next != NULL) {
			for (uint32_t k = 0; k < t->tok_n[i]; k++) {
				const loom_token tok = t->tokens[t->tok_first[i] + k];
				bits[tok / 32] |= 1u << (tok % 32);
			}
			*n_allowed += (int32_t)t->tok_n[i];
			if (t->subtree[i] > 1 && !walk(t, a, g, next, i + 1, i + t->subtree[i], bits, n_allowed))
				return false;
		}
		loom_gr_arena_release(a, mark);
	}
	return true;
}

loom_status loom_token_trie_mask(const loom_token_trie *t, loom_gr_arena *a, const loom_grammar *g,
				 const loom_gr_state *s, uint32_t *bits, int32_t *n_allowed)
{
	memset(bits, 0, ((size_t)t->n_vocab + 31) / 32 * sizeof(uint32_t));
	*n_allowed = 0;
	loom_gr_mark mark = loom_gr_arena_mark(a);
	bool ok = walk(t, a, g, s, 1, t->subtree[0], bits, n_allowed);
	loom_gr_arena_release(a, mark);
	if (!ok)
		return LOOM_ERR_INVALID_ARGUMENT;
	if (loom_gr_can_end(s))
		for (int32_t i = 0; i < t->n_eog; i++) {
			bits[t->eog[i] / 32] |= 1u << (t->eog[i] % 32);
			(*n_allowed)++;
		}
	return LOOM_OK;
}

bool loom_token_trie_allows(const loom_token_trie *t, loom_gr_arena *a, const loom_grammar *g, const loom_gr_state *s,
			    loom_token token, bool *error)
{
	*error = false;
	if (token < 0 || token >= t->n_vocab)
		return false;
	for (int32_t i = 0; i < t->n_eog; i++)
		if (t->eog[i] == token)
			return loom_gr_can_end(s);
	const uint32_t from = t->piece_off[token], to = t->piece_off[token + 1];
	if (to == from)
		return false;
	loom_gr_mark mark = loom_gr_arena_mark(a);
	const loom_gr_state *cur = s;
	for (uint32_t i = from; i < to && cur != NULL; i++)
		cur = loom_gr_advance(a, g, cur, t->pieces[i], error);
	loom_gr_arena_release(a, mark);
	return cur != NULL;
}

const loom_token_trie *loom_model_token_trie(const loom_model *model)
{
	loom_model *m = (loom_model *)model;
	pthread_mutex_lock(&m->trie_lock);
	if (m->trie == NULL)
		loom_token_trie_build(model, &m->trie);
	const loom_token_trie *t = m->trie;
	pthread_mutex_unlock(&m->trie_lock);
	return t;
}
