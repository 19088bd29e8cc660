/* grammar.h - context-free grammars that constrain generation, and the
 * matcher that follows one through the bytes a model writes.
 *
 * A grammar is compiled once into an immutable form any number of
 * matchers share: rules of alternatives, each alternative a run of
 * elements (a set of code points, a token by its id, or a reference to a
 * rule), as the text form loom reads (llama.cpp's GBNF) writes them, with
 * repetition turned into rules of their own. A matcher's state is the set
 * of parse stacks (a nondeterministic pushdown automaton, as llama.cpp's),
 * each the positions still to match, the top one a set of code points or
 * a token; it takes one byte at a time, holding a code point's first
 * bytes until it is whole but refusing at once any byte after which no
 * allowed code point can follow, and a token whole. */
#ifndef LOOM_GRAMMAR_H
#define LOOM_GRAMMAR_H

#include "loom.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An element: a set of code points (ranges [first, first + n) of the
 * grammar's range table, or their complement), a reference to a rule, a
 * token of the vocabulary by its id (GBNF's <[id]>: a format's marker,
 * a control token with no text, taken whole in one step), or the end of
 * an alternative. */
typedef enum loom_gr_kind { LOOM_GR_END, LOOM_GR_CHARS, LOOM_GR_RULE, LOOM_GR_TOKEN } loom_gr_kind;

typedef struct loom_gr_elem {
	uint8_t kind;
	bool negated;  /* CHARS: every code point but the ranges' */
	uint32_t arg;  /* CHARS: the first range; RULE: the rule; TOKEN: the token */
	uint32_t n;    /* CHARS: ranges */
} loom_gr_elem;

typedef struct loom_gr_range {
	uint32_t lo, hi; /* inclusive */
} loom_gr_range;

typedef struct loom_gr_rule {
	char *name;
	uint32_t first_alt, n_alts; /* into alts */
} loom_gr_rule;

struct loom_grammar {
	loom_gr_elem *elems; /* each alternative's elements, then an END */
	uint32_t n_elems;
	uint32_t *alts; /* where each alternative starts in elems */
	uint32_t n_alts;
	loom_gr_rule *rules;
	uint32_t n_rules;
	loom_gr_range *ranges;
	uint32_t n_ranges;
	uint32_t root;
};

/* The most parse stacks a matcher follows at once; a grammar so
 * ambiguous that a step needs more fails that sequence (its matcher
 * reports an error), never the process. */
#define LOOM_GRAMMAR_MAX_STACKS 4096
/* The deepest a stack may grow (nested rules). */
#define LOOM_GRAMMAR_MAX_DEPTH 1024

/* A matcher's state: the stacks and a code point's first bytes. States
 * live in a matcher's arena, one after another, so that a walk of a
 * token trie takes and gives them back in stack order. */
typedef struct loom_gr_state {
	uint32_t n_stacks;
	uint32_t partial;      /* the code point's bits so far */
	uint8_t partial_left;  /* continuation bytes still to come; 0: none */
	uint8_t partial_len;   /* the code point's bytes in all */
	uint32_t *offsets;     /* n_stacks + 1 offsets into data */
	uint32_t *data;        /* the stacks, bottom first: element positions */
} loom_gr_state;

/* Memory taken and given back in stack order: chunks that are kept once
 * grown, so that a walk allocates nothing after its first steps. */
typedef struct loom_gr_arena {
	unsigned char **chunks;
	size_t *sizes;
	uint32_t n_chunks, cur;
	size_t used; /* in chunks[cur] */
	/* A step's stacks while they are worked out (not stack-ordered):
	 * stacks to expand, and the expanded ones, each as its length then
	 * its elements. */
	uint32_t *todo, *done;
	size_t n_todo, cap_todo, n_done, cap_done;
	/* The done stacks by hash, so that a step's duplicates are found
	 * without comparing each stack with every other: open addressing,
	 * a slot (stamp, where in done) valid while stamp is the step's. */
	struct loom_gr_slot *index;
	uint32_t stamp;
} loom_gr_arena;

typedef struct loom_gr_mark {
	uint32_t chunk;
	size_t used;
} loom_gr_mark;

typedef struct loom_gr_matcher {
	const loom_grammar *g;
	loom_gr_arena arena;   /* states of steps being tried */
	loom_gr_state *state;  /* the current state, in memory of its own */
	size_t state_bytes;
	bool failed;           /* a step outgrew the limits: loom_last_error() says */
} loom_gr_matcher;

/* loom_grammar_parse and loom_grammar_free are loom.h's. */

loom_status loom_gr_matcher_init(loom_gr_matcher *m, const loom_grammar *g);
void loom_gr_matcher_free(loom_gr_matcher *m);
/* Back to the grammar's start. */
loom_status loom_gr_matcher_reset(loom_gr_matcher *m);

/* The state after byte b from state s, allocated in the arena (its mark
 * before the call gives it back); NULL if no sentence of the grammar goes
 * on with b (or, with *error set, if the step outgrew the limits). */
loom_gr_state *loom_gr_advance(loom_gr_arena *a, const loom_grammar *g, const loom_gr_state *s, unsigned char b,
			       bool *error);
/* Whether a sentence of the grammar may end in state s. */
bool loom_gr_can_end(const loom_gr_state *s);

/* Whether token may come next in state s as a token of the grammar's
 * (<[id]>), and the state after it (NULL if it may not, or, with *error
 * set, if the step outgrew the limits). */
bool loom_gr_takes_token(const loom_grammar *g, const loom_gr_state *s, int32_t token);
loom_gr_state *loom_gr_advance_token(loom_gr_arena *a, const loom_grammar *g, const loom_gr_state *s, int32_t token,
				     bool *error);

/* The matcher takes bytes: false, its state unchanged, if they cannot go
 * on the sentence so far (m->failed set if the grammar outgrew the limits). */
bool loom_gr_matcher_accept(loom_gr_matcher *m, const unsigned char *bytes, size_t n);
/* Whether the bytes could go on the sentence so far; the state unchanged. */
bool loom_gr_matcher_allows(loom_gr_matcher *m, const unsigned char *bytes, size_t n);
/* The matcher takes a token of the grammar's (<[id]>): false, its state
 * unchanged, if it cannot come next. */
bool loom_gr_matcher_accept_token(loom_gr_matcher *m, int32_t token);

static inline loom_gr_mark loom_gr_arena_mark(const loom_gr_arena *a)
{
	return (loom_gr_mark){a->cur, a->used};
}

static inline void loom_gr_arena_release(loom_gr_arena *a, loom_gr_mark mark)
{
	a->cur = mark.chunk;
	a->used = mark.used;
}

void loom_gr_arena_free(loom_gr_arena *a);

/* The GBNF text of JSON Schemas, each schema's rule named names[i], with
 * the rules they share written once (json_schema.c); *text is malloc'd.
 * A schema loom cannot enforce is LOOM_ERR_INVALID_ARGUMENT, as
 * loom_grammar_from_json_schema says. */
struct cJSON;
loom_status loom_json_schemas_gbnf(const struct cJSON *const *schemas, const char *const *names, size_t n, char **text,
				   size_t *len);

#endif
