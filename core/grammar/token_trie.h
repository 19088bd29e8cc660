/* token_trie.h - a model's tokens by their bytes, for the tokens a grammar
 * allows next: one walk of the trie, a subtree skipped as soon as its
 * first bytes cannot go on the sentence so far. Built once per model
 * (loom_model_token_trie), shared by every sequence. */
#ifndef LOOM_TOKEN_TRIE_H
#define LOOM_TOKEN_TRIE_H

#include "grammar/grammar.h"

/* Nodes in depth-first order: node i's subtree is [i, i + subtree[i]),
 * its first child i + 1. Node 0 is the empty prefix. */
#define LOOM_SLICE_LENGTHS 16

typedef struct loom_token_trie {
	int32_t n_vocab;
	uint32_t n_nodes;
	unsigned char *byte;  /* the byte that leads to each node */
	uint32_t *subtree;
	uint32_t *tok_first;  /* each node's tokens: tokens[tok_first .. tok_first + tok_n) */
	uint32_t *tok_n;
	loom_token *tokens;
	/* Each token's bytes: pieces[piece_off[t] .. piece_off[t + 1]);
	 * control tokens have none and are not in the trie. */
	uint32_t *piece_off;
	unsigned char *pieces;
	/* The tokens that end generation, allowed where a sentence may end. */
	loom_token *eog;
	int32_t n_eog;
	/* The slice: tokens whose bytes are whole code points of a JSON
	 * string's body (valid UTF-8, none a control character, a quote or a
	 * backslash). A state that each such code point leads back to itself
	 * (inside a string no bound counts) allows all of them: a walk from it
	 * marks them at once and goes through the other tokens' trie only. */
	uint32_t *string_bits;
	int32_t n_string;
	/* The slice's tokens of 1 to LOOM_SLICE_LENGTHS code points, a row of
	 * n_vocab bits each (row L - 1: L code points), and their numbers:
	 * what a bounded string (maxLength) still counting allows. */
	uint32_t *length_bits;
	int32_t n_length[16];
	struct loom_token_trie *rest; /* its pieces and piece_off are the whole trie's */
} loom_token_trie;

loom_status loom_token_trie_build(const loom_model *model, loom_token_trie **out);
void loom_token_trie_free(loom_token_trie *t);

/* The model's trie, built on first use (thread-safe); NULL with
 * loom_last_error() set if it cannot be built. */
const loom_token_trie *loom_model_token_trie(const loom_model *model);

/* A walk's memory of the states it met and the steps between them:
 * below a string's opening quote most bytes lead back to the state they
 * left, so a walk of the whole trie computes a few dozen steps and looks
 * up the rest. Kept between walks (cleared, not freed), so that a walk
 * allocates nothing once the tables have grown. */
typedef struct loom_trie_walk {
	const loom_gr_state **states; /* the distinct states met, by index */
	uint64_t *state_hash;
	uint32_t n_states, cap_states;
	uint32_t *state_slots;        /* open addressing: index + 1, 0 empty */
	uint32_t n_state_slots;
	uint64_t *step_keys;          /* (state index << 8 | byte) + 1, 0 empty */
	int32_t *step_next;           /* the state index after it; -1: refused */
	uint32_t n_step_slots, n_steps;
	/* Whether a state is closed under a string body's code points: one
	 * code point from each run of code points the grammar's sets cannot
	 * tell apart (for the grammar probes_of), and the last state judged
	 * (a copy of its words) with the answer. */
	const loom_grammar *probes_of;
	uint32_t *probes;
	uint32_t n_probes;
	uint32_t *judged;
	size_t n_judged, cap_judged;
	int32_t judged_reach; /* the slice's tokens of at most this many code points are allowed;
			       * -1: any number; 0: judged nothing of the slice */
} loom_trie_walk;

void loom_trie_walk_free(loom_trie_walk *w);

/* bits (n_vocab bits, zeroed here) = the tokens whose bytes can go on
 * state s, the grammar's own tokens (<[id]>) that may come next, and the
 * end-of-generation tokens if a sentence may end there; *n_allowed their
 * number. The states the walk makes live in the arena
 * until it returns. LOOM_ERR_INVALID_ARGUMENT if the grammar outgrew its
 * limits on the way. */
loom_status loom_token_trie_mask(const loom_token_trie *t, loom_trie_walk *w, loom_gr_arena *a, const loom_grammar *g,
				 const loom_gr_state *s, uint32_t *bits, int32_t *n_allowed);

/* Whether token may come next in state s, the matcher's arena taking the
 * steps. */
bool loom_token_trie_allows(const loom_token_trie *t, loom_gr_arena *a, const loom_grammar *g, const loom_gr_state *s,
			    loom_token token, bool *error);

#endif
