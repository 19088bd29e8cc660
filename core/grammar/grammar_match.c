/* grammar_match.c - following a grammar through bytes: the set of parse
 * stacks after each byte (grammar.h). */
#include "grammar/grammar.h"

#include "runtime/error.h"
#include "text/unicode.h"

#include <stdlib.h>
#include <string.h>

/* Expansions one step may make before the grammar counts as too
 * ambiguous to follow. */
#define MAX_EXPANSIONS (1u << 16)

/* The done index's slots: twice the most stacks a step may keep, a power
 * of two. */
#define INDEX_SLOTS (2u * LOOM_GRAMMAR_MAX_STACKS)

struct loom_gr_slot {
	uint32_t stamp;
	uint32_t at; /* the stack's length word in done */
};

/* ------------------------------------------------------------------------ */
/* Arena                                                                    */

static void *arena_alloc(loom_gr_arena *a, size_t bytes)
{
	bytes = (bytes + 7) & ~(size_t)7;
	if (a->n_chunks > 0 && a->used + bytes <= a->sizes[a->cur]) {
		void *p = a->chunks[a->cur] + a->used;
		a->used += bytes;
		return p;
	}
	/* The next chunk, made (or remade larger) if need be: chunks past the
	 * current one hold nothing. */
	uint32_t next = a->n_chunks > 0 ? a->cur + 1 : 0;
	if (next < a->n_chunks && a->sizes[next] < bytes) {
		free(a->chunks[next]);
		a->chunks[next] = NULL;
		a->sizes[next] = 0;
	}
	if (next >= a->n_chunks) {
		unsigned char **c = realloc(a->chunks, (next + 1) * sizeof(*c));
		size_t *s = c != NULL ? realloc(a->sizes, (next + 1) * sizeof(*s)) : NULL;
		if (c != NULL)
			a->chunks = c;
		if (s == NULL)
			return NULL;
		a->sizes = s;
		a->chunks[next] = NULL;
		a->sizes[next] = 0;
		a->n_chunks = next + 1;
	}
	if (a->chunks[next] == NULL) {
		size_t size = next > 0 ? 2 * a->sizes[next - 1] : 64 * 1024;
		size = size > bytes ? size : bytes;
		if ((a->chunks[next] = malloc(size)) == NULL)
			return NULL;
		a->sizes[next] = size;
	}
	a->cur = next;
	a->used = bytes;
	return a->chunks[next];
}

void loom_gr_arena_free(loom_gr_arena *a)
{
	for (uint32_t i = 0; i < a->n_chunks; i++)
		free(a->chunks[i]);
	free(a->chunks);
	free(a->sizes);
	free(a->todo);
	free(a->done);
	free(a->index);
	memset(a, 0, sizeof(*a));
}

static bool reserve(uint32_t **w, size_t *cap, size_t need)
{
	if (need <= *cap)
		return true;
	size_t c = *cap ? *cap : 256;
	while (c < need)
		c *= 2;
	uint32_t *p = realloc(*w, c * sizeof(uint32_t));
	if (p == NULL)
		return false;
	*w = p;
	*cap = c;
	return true;
}

/* ------------------------------------------------------------------------ */
/* Code point sets                                                          */

static bool chars_match(const loom_grammar *g, const loom_gr_elem *e, uint32_t cp)
{
	bool in = false;
	for (uint32_t i = 0; i < e->n && !in; i++)
		in = cp >= g->ranges[e->arg + i].lo && cp <= g->ranges[e->arg + i].hi;
	return in != e->negated;
}

/* Whether some code point in [lo, hi] is in the set. */
static bool chars_meet(const loom_grammar *g, const loom_gr_elem *e, uint32_t lo, uint32_t hi)
{
	const loom_gr_range *r = g->ranges + e->arg;
	if (!e->negated) {
		for (uint32_t i = 0; i < e->n; i++)
			if (r[i].lo <= hi && r[i].hi >= lo)
				return true;
		return false;
	}
	/* The least code point of [lo, hi] outside the ranges is lo or one
	 * past a range's end. */
	if (chars_match(g, e, lo))
		return true;
	for (uint32_t i = 0; i < e->n; i++)
		if (r[i].hi < hi && r[i].hi + 1 >= lo && chars_match(g, e, r[i].hi + 1))
			return true;
	return false;
}

/* ------------------------------------------------------------------------ */
/* Stacks                                                                   */

/* Appends a stack to the done list: its length, then its len words. */
static bool push_done(loom_gr_arena *a, const uint32_t *w, uint32_t len)
{
	if (!reserve(&a->done, &a->cap_done, a->n_done + 1 + len))
		return false;
	a->done[a->n_done] = len;
	if (len > 0)
		memcpy(a->done + a->n_done + 1, w, len * sizeof(uint32_t));
	a->n_done += 1 + len;
	return true;
}

/* Appends a stack to the todo list: the len words at w and the n_extra
 * at extra (pushed on it), then the length, so that the list is worked
 * from its end. */
static bool push_todo(loom_gr_arena *a, const uint32_t *w, uint32_t len, const uint32_t *extra, uint32_t n_extra)
{
	if (!reserve(&a->todo, &a->cap_todo, a->n_todo + len + n_extra + 1))
		return false;
	uint32_t *d = a->todo + a->n_todo;
	if (len > 0)
		memcpy(d, w, len * sizeof(uint32_t));
	if (n_extra > 0)
		memcpy(d + len, extra, n_extra * sizeof(uint32_t));
	d[len + n_extra] = len + n_extra;
	a->n_todo += len + n_extra + 1;
	return true;
}

/* A new step's index: no slot valid (the stamps start over, all slots
 * cleared, once in 2^32 steps). false without memory. */
static bool index_begin(loom_gr_arena *a)
{
	if (a->index == NULL && (a->index = calloc(INDEX_SLOTS, sizeof(*a->index))) == NULL)
		return false;
	if (++a->stamp == 0) {
		memset(a->index, 0, INDEX_SLOTS * sizeof(*a->index));
		a->stamp = 1;
	}
	return true;
}

static uint32_t stack_hash(const uint32_t *w, uint32_t len)
{
	uint32_t h = 2166136261u ^ len;
	for (uint32_t i = 0; i < len; i++)
		h = (h ^ w[i]) * 16777619u;
	return h;
}

/* Whether the done list holds the stack w (len words) already; if not,
 * *slot is where it goes in the index. */
static bool already_done(const loom_gr_arena *a, const uint32_t *w, uint32_t len, struct loom_gr_slot **slot)
{
	for (uint32_t i = stack_hash(w, len) & (INDEX_SLOTS - 1);; i = (i + 1) & (INDEX_SLOTS - 1)) {
		struct loom_gr_slot *s = &a->index[i];
		if (s->stamp != a->stamp) {
			*slot = s;
			return false;
		}
		if (a->done[s->at] == len && memcmp(a->done + s->at + 1, w, len * sizeof(uint32_t)) == 0)
			return true;
	}
}

/* Expands the stacks on the todo list until each has a set of code points
 * or a token on top (or is empty: a finished sentence), into the done
 * list, without duplicates. A rule on top gives way to each of its
 * alternatives, under what follows it. false with *error set past the
 * limits. */
static bool expand(loom_gr_arena *a, const loom_grammar *g, bool *error)
{
	uint32_t budget = MAX_EXPANSIONS, n_done = 0;
	uint32_t w[LOOM_GRAMMAR_MAX_DEPTH + 2];
	if (!index_begin(a))
		goto no_memory;
	while (a->n_todo > 0) {
		const uint32_t len = a->todo[a->n_todo - 1];
		a->n_todo -= 1 + len;
		memcpy(w, a->todo + a->n_todo, len * sizeof(uint32_t));
		if (len == 0 || g->elems[w[len - 1]].kind != LOOM_GR_RULE) {
			struct loom_gr_slot *slot;
			if (already_done(a, w, len, &slot))
				continue;
			if (++n_done > LOOM_GRAMMAR_MAX_STACKS) {
				*error = true;
				loom_error(LOOM_ERR_INVALID_ARGUMENT, "the grammar is too ambiguous to follow: more than %d "
					   "parse stacks at once", LOOM_GRAMMAR_MAX_STACKS);
				return false;
			}
			*slot = (struct loom_gr_slot){.stamp = a->stamp, .at = (uint32_t)a->n_done};
			if (!push_done(a, w, len))
				goto no_memory;
			continue;
		}
		if (budget-- == 0 || len + 1 > LOOM_GRAMMAR_MAX_DEPTH) {
			*error = true;
			loom_error(LOOM_ERR_INVALID_ARGUMENT, "the grammar is too ambiguous or too deeply nested to follow");
			return false;
		}
		const uint32_t pos = w[len - 1];
		const loom_gr_rule *r = &g->rules[g->elems[pos].arg];
		uint32_t extra[2], n_extra = 0;
		if (g->elems[pos + 1].kind != LOOM_GR_END)
			extra[n_extra++] = pos + 1;
		for (uint32_t k = 0; k < r->n_alts; k++) {
			const uint32_t start = g->alts[r->first_alt + k];
			uint32_t n = n_extra;
			extra[n_extra] = start;
			if (g->elems[start].kind != LOOM_GR_END)
				n++;
			if (!push_todo(a, w, len - 1, extra, n))
				goto no_memory;
		}
	}
	return true;
no_memory:
	*error = true;
	loom_error(LOOM_ERR_NO_MEMORY, "out of memory following a grammar");
	return false;
}

/* A state of the done list's stacks and the given partial code point (of
 * len bytes, left of them still to come), in the arena; NULL with *error
 * set if there is no memory. */
static loom_gr_state *make_state(loom_gr_arena *a, uint32_t partial, uint8_t left, uint8_t len, bool *error)
{
	uint32_t n = 0;
	for (size_t at = 0; at < a->n_done; at += 1 + a->done[at])
		n++;
	const size_t words = a->n_done - n;
	loom_gr_state *s = arena_alloc(a, sizeof(loom_gr_state) + (n + 1 + words) * sizeof(uint32_t));
	if (s == NULL) {
		*error = true;
		loom_error(LOOM_ERR_NO_MEMORY, "out of memory following a grammar");
		return NULL;
	}
	s->n_stacks = n;
	s->partial = partial;
	s->partial_left = left;
	s->partial_len = len;
	s->offsets = (uint32_t *)(s + 1);
	s->data = s->offsets + n + 1;
	uint32_t i = 0, off = 0;
	for (size_t at = 0; at < a->n_done; at += 1 + a->done[at]) {
		s->offsets[i++] = off;
		memcpy(s->data + off, a->done + at + 1, a->done[at] * sizeof(uint32_t));
		off += a->done[at];
	}
	s->offsets[n] = off;
	return s;
}

/* Whether the top of a stack of len words at w is a set holding cp (kind
 * CHARS), or the token cp (kind TOKEN). */
static bool top_takes(const loom_grammar *g, const uint32_t *w, uint32_t len, loom_gr_kind kind, uint32_t cp)
{
	if (len == 0 || g->elems[w[len - 1]].kind != kind)
		return false;
	const loom_gr_elem *e = &g->elems[w[len - 1]];
	return kind == LOOM_GR_TOKEN ? e->arg == cp : chars_match(g, e, cp);
}

/* The state after code point cp, or (kind TOKEN) after token cp. */
static loom_gr_state *accept_cp(loom_gr_arena *a, const loom_grammar *g, const loom_gr_state *s, loom_gr_kind kind,
				uint32_t cp, bool *error)
{
	a->n_todo = a->n_done = 0;
	for (uint32_t i = 0; i < s->n_stacks; i++) {
		const uint32_t *w = s->data + s->offsets[i], len = s->offsets[i + 1] - s->offsets[i];
		if (!top_takes(g, w, len, kind, cp))
			continue;
		uint32_t next = w[len - 1] + 1;
		bool more = g->elems[next].kind != LOOM_GR_END;
		if (!push_todo(a, w, len - 1, &next, more)) {
			*error = true;
			loom_error(LOOM_ERR_NO_MEMORY, "out of memory following a grammar");
			return NULL;
		}
	}
	if (a->n_todo == 0 || !expand(a, g, error) || a->n_done == 0)
		return NULL;
	return make_state(a, 0, 0, 0, error);
}

/* The least code point a UTF-8 sequence of len bytes may encode (less is
 * an overlong form). */
static uint32_t least_cp(uint8_t len)
{
	return len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
}

/* The state waiting for `left` more bytes of a code point of len bytes
 * whose bits so far are `partial`: the stacks that some such code point
 * can go on. */
static loom_gr_state *await_cp(loom_gr_arena *a, const loom_grammar *g, const loom_gr_state *s, uint32_t partial,
			       uint8_t left, uint8_t len, bool *error)
{
	uint32_t lo = partial << (6 * left), hi = lo | ((1u << (6 * left)) - 1);
	lo = lo > least_cp(len) ? lo : least_cp(len);
	hi = hi < 0x10FFFF ? hi : 0x10FFFF;
	if (lo > hi)
		return NULL;
	/* Surrogates are never whole code points: the range around them. */
	const uint32_t lo2 = lo > 0xE000 ? lo : 0xE000, hi1 = hi < 0xD7FF ? hi : 0xD7FF;
	a->n_todo = a->n_done = 0;
	for (uint32_t i = 0; i < s->n_stacks; i++) {
		const uint32_t *w = s->data + s->offsets[i], len = s->offsets[i + 1] - s->offsets[i];
		const loom_gr_elem *top = len > 0 ? &g->elems[w[len - 1]] : NULL;
		if (top != NULL && top->kind != LOOM_GR_CHARS)
			top = NULL;
		const bool meets = top != NULL && ((lo <= hi1 && chars_meet(g, top, lo, hi1)) ||
						   (lo2 <= hi && chars_meet(g, top, lo2, hi)));
		if (meets && !push_done(a, w, len)) {
			*error = true;
			loom_error(LOOM_ERR_NO_MEMORY, "out of memory following a grammar");
			return NULL;
		}
	}
	return a->n_done > 0 ? make_state(a, partial, left, len, error) : NULL;
}

loom_gr_state *loom_gr_advance(loom_gr_arena *a, const loom_grammar *g, const loom_gr_state *s, unsigned char b,
			       bool *error)
{
	*error = false;
	if (s->partial_left > 0) {
		if ((b & 0xC0) != 0x80)
			return NULL;
		const uint32_t partial = (s->partial << 6) | (b & 0x3F);
		if (s->partial_left > 1)
			return await_cp(a, g, s, partial, (uint8_t)(s->partial_left - 1), s->partial_len, error);
		/* Whole: not overlong, past U+10FFFF or a surrogate. */
		if (partial < least_cp(s->partial_len) || partial > 0x10FFFF || (partial >= 0xD800 && partial <= 0xDFFF))
			return NULL;
		return accept_cp(a, g, s, LOOM_GR_CHARS, partial, error);
	}
	if (b < 0x80)
		return accept_cp(a, g, s, LOOM_GR_CHARS, b, error);
	/* Well-formed leads only: 2- to 4-byte sequences up to U+10FFFF. */
	if (b < 0xC2 || b > 0xF4)
		return NULL;
	const size_t n = loom_utf8_seq_len(b);
	const uint32_t bits = b & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
	return await_cp(a, g, s, bits, (uint8_t)(n - 1), (uint8_t)n, error);
}

bool loom_gr_can_end(const loom_gr_state *s)
{
	if (s->partial_left > 0)
		return false;
	for (uint32_t i = 0; i < s->n_stacks; i++)
		if (s->offsets[i + 1] == s->offsets[i])
			return true;
	return false;
}

bool loom_gr_takes_token(const loom_grammar *g, const loom_gr_state *s, int32_t token)
{
	if (s->partial_left > 0 || token < 0)
		return false;
	for (uint32_t i = 0; i < s->n_stacks; i++)
		if (top_takes(g, s->data + s->offsets[i], s->offsets[i + 1] - s->offsets[i], LOOM_GR_TOKEN,
			      (uint32_t)token))
			return true;
	return false;
}

loom_gr_state *loom_gr_advance_token(loom_gr_arena *a, const loom_grammar *g, const loom_gr_state *s, int32_t token,
				     bool *error)
{
	*error = false;
	return loom_gr_takes_token(g, s, token) ? accept_cp(a, g, s, LOOM_GR_TOKEN, (uint32_t)token, error) : NULL;
}

/* ------------------------------------------------------------------------ */
/* Matcher                                                                  */

/* s copied into the matcher's own memory as its state. */
static bool keep_state(loom_gr_matcher *m, const loom_gr_state *s)
{
	const size_t words = (size_t)s->n_stacks + 1 + s->offsets[s->n_stacks];
	const size_t bytes = sizeof(loom_gr_state) + words * sizeof(uint32_t);
	if (bytes > m->state_bytes) {
		loom_gr_state *p = realloc(m->state, bytes);
		if (p == NULL) {
			loom_error(LOOM_ERR_NO_MEMORY, "out of memory following a grammar");
			return false;
		}
		m->state = p;
		m->state_bytes = bytes;
	}
	loom_gr_state *d = m->state;
	*d = *s;
	d->offsets = (uint32_t *)(d + 1);
	d->data = d->offsets + s->n_stacks + 1;
	memcpy(d->offsets, s->offsets, (s->n_stacks + 1) * sizeof(uint32_t));
	memcpy(d->data, s->data, s->offsets[s->n_stacks] * sizeof(uint32_t));
	return true;
}

loom_status loom_gr_matcher_reset(loom_gr_matcher *m)
{
	loom_gr_arena *a = &m->arena;
	const loom_grammar *g = m->g;
	bool error = false;
	loom_gr_mark mark = loom_gr_arena_mark(a);
	a->n_todo = a->n_done = 0;
	/* The root rule's alternatives, each a stack of its first element. */
	const loom_gr_rule *r = &g->rules[g->root];
	for (uint32_t k = 0; k < r->n_alts; k++) {
		const uint32_t start = g->alts[r->first_alt + k];
		if (!push_todo(a, &start, g->elems[start].kind != LOOM_GR_END, NULL, 0))
			return loom_error(LOOM_ERR_NO_MEMORY, "out of memory following a grammar");
	}
	loom_gr_state *s = expand(a, g, &error) ? make_state(a, 0, 0, 0, &error) : NULL;
	loom_status st = LOOM_OK;
	if (s == NULL)
		st = error ? LOOM_ERR_INVALID_ARGUMENT
			   : loom_error(LOOM_ERR_INVALID_ARGUMENT, "the grammar's start matches nothing");
	else if (!keep_state(m, s))
		st = LOOM_ERR_NO_MEMORY;
	loom_gr_arena_release(a, mark);
	m->failed = st != LOOM_OK;
	return st;
}

loom_status loom_gr_matcher_init(loom_gr_matcher *m, const loom_grammar *g)
{
	memset(m, 0, sizeof(*m));
	m->g = g;
	return loom_gr_matcher_reset(m);
}

void loom_gr_matcher_free(loom_gr_matcher *m)
{
	loom_gr_arena_free(&m->arena);
	free(m->state);
	memset(m, 0, sizeof(*m));
}

/* The state after bytes, in the arena; NULL if they cannot follow. */
static loom_gr_state *walk(loom_gr_matcher *m, const unsigned char *bytes, size_t n)
{
	const loom_gr_state *s = m->state;
	loom_gr_state *next = m->state;
	for (size_t i = 0; i < n && next != NULL; i++) {
		bool error;
		next = loom_gr_advance(&m->arena, m->g, s, bytes[i], &error);
		m->failed |= error;
		s = next;
	}
	return next;
}

bool loom_gr_matcher_accept(loom_gr_matcher *m, const unsigned char *bytes, size_t n)
{
	loom_gr_mark mark = loom_gr_arena_mark(&m->arena);
	loom_gr_state *s = walk(m, bytes, n);
	bool ok = s != NULL && (s == m->state || keep_state(m, s));
	loom_gr_arena_release(&m->arena, mark);
	return ok;
}

bool loom_gr_matcher_allows(loom_gr_matcher *m, const unsigned char *bytes, size_t n)
{
	loom_gr_mark mark = loom_gr_arena_mark(&m->arena);
	bool ok = walk(m, bytes, n) != NULL;
	loom_gr_arena_release(&m->arena, mark);
	return ok;
}

bool loom_gr_matcher_accept_token(loom_gr_matcher *m, int32_t token)
{
	loom_gr_mark mark = loom_gr_arena_mark(&m->arena);
	bool error;
	loom_gr_state *s = loom_gr_advance_token(&m->arena, m->g, m->state, token, &error);
	m->failed |= error;
	bool ok = s != NULL && keep_state(m, s);
	loom_gr_arena_release(&m->arena, mark);
	return ok;
}
