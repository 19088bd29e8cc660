/* grammar_sampler.c - a sampler that follows a grammar (grammar_sampler.h). */
#include "grammar/grammar_sampler.h"

#include "runtime/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

loom_status loom_grammar_follow_create(const loom_model *model, const loom_grammar *g, loom_grammar_follow **out)
{
	*out = NULL;
	const loom_token_trie *trie = loom_model_token_trie(model);
	if (trie == NULL)
		return LOOM_ERR_NO_MEMORY;
	loom_grammar_follow *f = calloc(1, sizeof(*f));
	if (f == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	f->model = model;
	f->grammar = g;
	f->trie = trie;
	f->pending = -1;
	f->bits = calloc(((size_t)trie->n_vocab + 31) / 32, sizeof(uint32_t));
	f->masked = malloc((size_t)trie->n_vocab * sizeof(float));
	loom_status st = f->bits != NULL && f->masked != NULL ? loom_gr_matcher_init(&f->matcher, g)
							      : loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	if (st != LOOM_OK) {
		loom_grammar_follow_free(f);
		return st;
	}
	*out = f;
	return LOOM_OK;
}

void loom_grammar_follow_free(loom_grammar_follow *f)
{
	if (f == NULL)
		return;
	loom_gr_matcher_free(&f->matcher);
	loom_trie_walk_free(&f->walk);
	free(f->bits);
	free(f->masked);
	free(f);
}

loom_status loom_grammar_follow_reset(loom_grammar_follow *f)
{
	f->pending = -1;
	return loom_gr_matcher_reset(&f->matcher);
}

loom_status loom_grammar_follow_check(loom_grammar_follow *f, loom_token token, bool *allowed)
{
	bool error;
	f->n_checked++;
	*allowed = loom_token_trie_allows(f->trie, &f->matcher.arena, f->grammar, f->matcher.state, token, &error);
	if (error)
		return LOOM_ERR_INVALID_ARGUMENT;
	if (*allowed)
		f->pending = token;
	return LOOM_OK;
}

loom_status loom_grammar_follow_mask(loom_grammar_follow *f, const float *logits, int32_t n_vocab, const float **masked)
{
	if (n_vocab != f->trie->n_vocab)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "a row of %d logits for a vocabulary of %d", n_vocab,
				  f->trie->n_vocab);
	int32_t n_allowed;
	f->n_masked++;
	loom_status st = loom_token_trie_mask(f->trie, &f->walk, &f->matcher.arena, f->grammar, f->matcher.state, f->bits,
						      &n_allowed);
	if (st != LOOM_OK)
		return st;
	if (n_allowed == 0)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "the grammar allows no token of the vocabulary here");
	/* A word of the mask at a time: most are all refused (between
	 * values) or all allowed (inside a string). */
	for (int32_t base = 0; base < n_vocab; base += 32) {
		const uint32_t m = f->bits[base / 32];
		const int32_t n = n_vocab - base < 32 ? n_vocab - base : 32;
		float *out = f->masked + base;
		if (m == 0) {
			for (int32_t k = 0; k < n; k++)
				out[k] = -INFINITY;
		} else if (m == 0xFFFFFFFFu && n == 32) {
			memcpy(out, logits + base, 32 * sizeof(float));
		} else {
			for (int32_t k = 0; k < n; k++)
				out[k] = (m >> k) & 1 ? logits[base + k] : -INFINITY;
		}
	}
	*masked = f->masked;
	return LOOM_OK;
}

loom_status loom_grammar_follow_accept(loom_grammar_follow *f, loom_token token)
{
	if (token != f->pending || token < 0)
		return LOOM_OK;
	f->pending = -1;
	const loom_token_trie *t = f->trie;
	const uint32_t from = t->piece_off[token], to = t->piece_off[token + 1];
	/* A token of the grammar's own is taken whole, not by its bytes. */
	const bool ok = loom_gr_takes_token(f->grammar, f->matcher.state, token)
				? loom_gr_matcher_accept_token(&f->matcher, token)
				: to == from || loom_gr_matcher_accept(&f->matcher, t->pieces + from, to - from);
	if (!ok)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "token %d does not follow the grammar", token);
	return LOOM_OK;
}
