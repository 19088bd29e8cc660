/* grammar_sampler.h - a sampler that follows a grammar: the token it draws
 * is checked against the grammar first, and only when the grammar refuses
 * it are all allowed tokens found (a walk of the model's token trie) and
 * the draw repeated among them (sample, then check: most steps cost the
 * drawn token's bytes). */
#ifndef LOOM_GRAMMAR_SAMPLER_H
#define LOOM_GRAMMAR_SAMPLER_H

#include "grammar/token_trie.h"

typedef struct loom_grammar_follow {
	const loom_model *model;
	const loom_grammar *grammar;
	const loom_token_trie *trie;
	loom_gr_matcher matcher;
	loom_trie_walk walk;
	uint32_t *bits;   /* the last mask: n_vocab bits */
	float *masked;    /* the logits with what the grammar refuses at -inf */
	loom_token pending; /* the token last drawn, which accept advances the grammar by; -1: none */
	/* How many draws were checked, and how many needed the whole mask. */
	int64_t n_checked, n_masked;
} loom_grammar_follow;

loom_status loom_grammar_follow_create(const loom_model *model, const loom_grammar *g, loom_grammar_follow **out);
void loom_grammar_follow_free(loom_grammar_follow *f);
/* Back to the grammar's start. */
loom_status loom_grammar_follow_reset(loom_grammar_follow *f);

/* Whether token may come next; LOOM_ERR_INVALID_ARGUMENT if the grammar
 * outgrew its limits. */
loom_status loom_grammar_follow_check(loom_grammar_follow *f, loom_token token, bool *allowed);
/* *masked = the logits with every token the grammar refuses next at -inf
 * (valid until the next call). */
loom_status loom_grammar_follow_mask(loom_grammar_follow *f, const float *logits, int32_t n_vocab, const float **masked);
/* The grammar goes on by token if it is the one last drawn (a prompt's
 * tokens, accepted for the penalties, do not move it). */
loom_status loom_grammar_follow_accept(loom_grammar_follow *f, loom_token token);

#endif
