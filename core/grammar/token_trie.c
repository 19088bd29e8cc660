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
	free(t->string_bits);
	free(t->length_bits);
	if (t->rest != NULL) {
		t->rest->pieces = NULL; /* the whole trie's */
		t->rest->piece_off = NULL;
		loom_token_trie_free(t->rest);
	}
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

/* How many code points of a JSON string's body the bytes are: 0 unless
 * valid UTF-8 (shortest forms, no surrogates) without a control
 * character, quote or backslash. */
static uint32_t string_body(const unsigned char *p, uint32_t n)
{
	uint32_t count = 0;
	if (n == 0)
		return 0;
	for (uint32_t i = 0; i < n;) {
		const unsigned char c = p[i];
		const uint32_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
		if (len == 0 || i + len > n)
			return 0;
		uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1Fu : len == 3 ? c & 0x0Fu : c & 0x07u;
		for (uint32_t k = 1; k < len; k++) {
			if ((p[i + k] & 0xC0) != 0x80)
				return 0;
			cp = cp << 6 | (p[i + k] & 0x3Fu);
		}
		static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
		if (cp < least[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000) || cp < 0x20 || cp == '"' ||
		    cp == '\\')
			return 0;
		i += len;
		count++;
	}
	return count;
}

/* t's nodes over the tokens with bytes (t's pieces), leaving out the
 * end-of-generation tokens and those set in skip (NULL: none). */
static loom_status build_nodes(loom_token_trie *t, const loom_model *model, const uint32_t *skip)
{
	const int32_t n = t->n_vocab;
	loom_token *sorted = malloc(((size_t)n + 1) * sizeof(loom_token));
	keyed *keys = malloc(((size_t)n + 1) * sizeof(keyed));
	uint32_t n_sorted = 0;
	size_t bytes = 0;
	loom_status st = sorted != NULL && keys != NULL ? LOOM_OK : LOOM_ERR_NO_MEMORY;
	for (loom_token i = 0; st == LOOM_OK && i < n; i++) {
		const uint32_t len = t->piece_off[i + 1] - t->piece_off[i];
		if (len > 0 && !loom_token_is_eog(model, i) && (skip == NULL || !((skip[i / 32] >> (i % 32)) & 1))) {
			keys[n_sorted++] = (keyed){t->pieces + t->piece_off[i], len, i};
			bytes += len;
		}
	}
	const size_t max_nodes = bytes + 1;
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
	return st;
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
	if (st == LOOM_OK)
		st = build_nodes(t, model, NULL);
	/* The slice, and the trie of the tokens outside it. */
	const size_t words = ((size_t)n + 31) / 32;
	if (st == LOOM_OK && ((t->string_bits = calloc(words, sizeof(uint32_t))) == NULL ||
			      (t->length_bits = calloc(words * LOOM_SLICE_LENGTHS, sizeof(uint32_t))) == NULL ||
			      (t->rest = calloc(1, sizeof(*t->rest))) == NULL))
		st = LOOM_ERR_NO_MEMORY;
	for (loom_token i = 0; st == LOOM_OK && i < n; i++) {
		const uint32_t cps = loom_token_is_eog(model, i)
					     ? 0
					     : string_body(t->pieces + t->piece_off[i], t->piece_off[i + 1] - t->piece_off[i]);
		if (cps == 0)
			continue;
		t->string_bits[i / 32] |= 1u << (i % 32);
		t->n_string++;
		if (cps <= LOOM_SLICE_LENGTHS) {
			t->length_bits[(cps - 1) * words + i / 32] |= 1u << (i % 32);
			t->n_length[cps - 1]++;
		}
	}
	if (st == LOOM_OK) {
		t->rest->n_vocab = n;
		t->rest->pieces = t->pieces;
		t->rest->piece_off = t->piece_off;
		st = build_nodes(t->rest, model, t->string_bits);
	}
	if (st != LOOM_OK) {
		loom_token_trie_free(t);
		return st == LOOM_ERR_NO_MEMORY ? loom_error(st, "out of memory building the token trie") : st;
	}
	*out = t;
	return LOOM_OK;
}

void loom_trie_walk_free(loom_trie_walk *w)
{
	free(w->states);
	free(w->state_hash);
	free(w->state_slots);
	free(w->step_keys);
	free(w->step_next);
	free(w->probes);
	free(w->judged);
	memset(w, 0, sizeof(*w));
}

static uint64_t state_hash(const loom_gr_state *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	const uint32_t words = s->offsets[s->n_stacks];
	const uint32_t head[4] = {s->n_stacks, s->partial, s->partial_left, s->partial_len};
	for (int i = 0; i < 4; i++)
		h = (h ^ head[i]) * 0x100000001b3ull;
	for (uint32_t i = 0; i <= s->n_stacks; i++)
		h = (h ^ s->offsets[i]) * 0x100000001b3ull;
	for (uint32_t i = 0; i < words; i++)
		h = (h ^ s->data[i]) * 0x100000001b3ull;
	return h;
}

static bool state_equal(const loom_gr_state *a, const loom_gr_state *b)
{
	return a->n_stacks == b->n_stacks && a->partial == b->partial && a->partial_left == b->partial_left &&
	       a->partial_len == b->partial_len &&
	       memcmp(a->offsets, b->offsets, (a->n_stacks + 1) * sizeof(uint32_t)) == 0 &&
	       memcmp(a->data, b->data, a->offsets[a->n_stacks] * sizeof(uint32_t)) == 0;
}

/* Grows a table of n slots to at least need, all empty. */
static bool fresh_slots(void **slots, uint32_t *n, uint32_t need, size_t size)
{
	if (*n < need) {
		uint32_t m = *n ? *n : 1024;
		while (m < need)
			m *= 2;
		void *p = realloc(*slots, (size_t)m * size);
		if (p == NULL)
			return false;
		*slots = p;
		*n = m;
	}
	memset(*slots, 0, (size_t)*n * size);
	return true;
}

/* The index of state s among those met, added if new; -1 if out of
 * memory. */
static int32_t intern(loom_trie_walk *w, const loom_gr_state *s)
{
	const uint64_t h = state_hash(s);
	uint32_t mask = w->n_state_slots - 1, i = (uint32_t)h & mask;
	for (; w->state_slots[i] != 0; i = (i + 1) & mask) {
		const uint32_t k = w->state_slots[i] - 1;
		if (w->state_hash[k] == h && state_equal(w->states[k], s))
			return (int32_t)k;
	}
	if (w->n_states == w->cap_states || 2 * (w->n_states + 1) > w->n_state_slots) {
		/* Rare (a grammar with thousands of states in one walk): start
		 * the tables again, larger. */
		uint32_t cap = w->cap_states ? 2 * w->cap_states : 256;
		const loom_gr_state **st = realloc(w->states, cap * sizeof(*st));
		uint64_t *sh = st != NULL ? realloc(w->state_hash, cap * sizeof(*sh)) : NULL;
		if (st != NULL)
			w->states = st;
		if (sh == NULL)
			return -1;
		w->state_hash = sh;
		w->cap_states = cap;
		if (!fresh_slots((void **)&w->state_slots, &w->n_state_slots, 4 * cap, sizeof(uint32_t)))
			return -1;
		for (uint32_t k = 0; k < w->n_states; k++) {
			uint32_t j = (uint32_t)w->state_hash[k] & (w->n_state_slots - 1);
			while (w->state_slots[j] != 0)
				j = (j + 1) & (w->n_state_slots - 1);
			w->state_slots[j] = k + 1;
		}
		mask = w->n_state_slots - 1;
		for (i = (uint32_t)h & mask; w->state_slots[i] != 0; i = (i + 1) & mask)
			;
	}
	w->states[w->n_states] = s;
	w->state_hash[w->n_states] = h;
	w->state_slots[i] = w->n_states + 1;
	return (int32_t)w->n_states++;
}

/* ---- states a string body's code points lead back to ---- */

/* A state as words (its counts, offsets and stacks), for a copy to
 * compare later. */
static size_t state_words(const loom_gr_state *s)
{
	return 4 + (size_t)s->n_stacks + 1 + s->offsets[s->n_stacks];
}

static void state_to_words(const loom_gr_state *s, uint32_t *out)
{
	const uint32_t head[4] = {s->n_stacks, s->partial, s->partial_left, s->partial_len};
	memcpy(out, head, sizeof(head));
	memcpy(out + 4, s->offsets, (s->n_stacks + 1) * sizeof(uint32_t));
	memcpy(out + 4 + s->n_stacks + 1, s->data, s->offsets[s->n_stacks] * sizeof(uint32_t));
}

/* Whether s is the state words were made from. */
static bool state_is_words(const loom_gr_state *s, const uint32_t *words)
{
	const uint32_t head[4] = {s->n_stacks, s->partial, s->partial_left, s->partial_len};
	return memcmp(words, head, sizeof(head)) == 0 &&
	       memcmp(words + 4, s->offsets, (s->n_stacks + 1) * sizeof(uint32_t)) == 0 &&
	       memcmp(words + 4 + s->n_stacks + 1, s->data, s->offsets[s->n_stacks] * sizeof(uint32_t)) == 0;
}

static int by_code_point(const void *pa, const void *pb)
{
	const uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
	return a < b ? -1 : a > b;
}

/* One code point of each run the grammar's sets cannot tell apart (runs
 * begin at each range's ends, and where UTF-8 grows a byte) that a
 * string's body may hold: every set in g holds all of a run or none of
 * it, so a state each probe leads back to is closed under them all. */
static bool make_probes(loom_trie_walk *w, const loom_grammar *g)
{
	static const uint32_t fixed[] = {0x20, '"', '"' + 1, '\\', '\\' + 1, 0x80, 0x800, 0x10000, 0xD800, 0xE000, 0x110000};
	const size_t n_fixed = sizeof(fixed) / sizeof(fixed[0]), n = n_fixed + 2 * (size_t)g->n_ranges;
	uint32_t *cuts = malloc(n * sizeof(uint32_t));
	uint32_t *probes = realloc(w->probes, n * sizeof(uint32_t));
	if (probes != NULL)
		w->probes = probes;
	if (cuts == NULL || probes == NULL) {
		free(cuts);
		return false;
	}
	memcpy(cuts, fixed, sizeof(fixed));
	for (uint32_t i = 0; i < g->n_ranges; i++) {
		cuts[n_fixed + 2 * i] = g->ranges[i].lo;
		cuts[n_fixed + 2 * i + 1] = g->ranges[i].hi + 1;
	}
	qsort(cuts, n, sizeof(uint32_t), by_code_point);
	w->n_probes = 0;
	for (size_t i = 0; i < n; i++) {
		const uint32_t cp = cuts[i];
		if ((i > 0 && cuts[i - 1] == cp) || cp < 0x20 || cp >= 0x110000 || cp == '"' || cp == '\\' ||
		    (cp >= 0xD800 && cp < 0xE000))
			continue;
		w->probes[w->n_probes++] = cp;
	}
	free(cuts);
	w->probes_of = g;
	return true;
}

/* The state after code point cp from s, in the arena; NULL if refused. */
static const loom_gr_state *step_code_point(loom_gr_arena *a, const loom_grammar *g, const loom_gr_state *s, uint32_t cp,
					    bool *error)
{
	unsigned char b[4];
	const int n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
	if (n == 1) {
		b[0] = (unsigned char)cp;
	} else {
		for (int k = n - 1; k > 0; k--, cp >>= 6)
			b[k] = (unsigned char)(0x80 | (cp & 0x3F));
		b[0] = (unsigned char)((0xF00u >> n) | cp);
	}
	const loom_gr_state *cur = s;
	for (int k = 0; k < n && cur != NULL; k++)
		cur = loom_gr_advance(a, g, cur, b[k], error);
	return cur;
}

/* Whether every probe leads from to the state into (the same state for
 * all of them). */
static bool all_lead(loom_trie_walk *w, loom_gr_arena *a, const loom_grammar *g, const loom_gr_state *from,
		     const loom_gr_state *into, bool *error)
{
	bool ok = true;
	for (uint32_t i = 0; i < w->n_probes && ok && !*error; i++) {
		loom_gr_mark probe = loom_gr_arena_mark(a);
		const loom_gr_state *next = step_code_point(a, g, from, w->probes[i], error);
		ok = next != NULL && state_equal(next, into);
		loom_gr_arena_release(a, probe);
	}
	return ok && !*error;
}

/* Whether no probe goes on from s. */
static bool none_go_on(loom_trie_walk *w, loom_gr_arena *a, const loom_grammar *g, const loom_gr_state *s, bool *error)
{
	bool none = true;
	for (uint32_t i = 0; i < w->n_probes && none && !*error; i++) {
		loom_gr_mark probe = loom_gr_arena_mark(a);
		none = step_code_point(a, g, s, w->probes[i], error) == NULL;
		loom_gr_arena_release(a, probe);
	}
	return none && !*error;
}

/* The most states a string's code points may lead s among for the slice
 * to be judged by them all (an unanchored pattern's: before a match, in
 * one, after it). */
#define SLICE_STATES 8

/* Whether every string of a string body's code points goes on from s:
 * the states the probes lead s to, and those lead to, and so on, are few,
 * and no probe stops in any of them. */
static bool every_string_goes_on(loom_trie_walk *w, loom_gr_arena *a, const loom_grammar *g, const loom_gr_state *s,
				 bool *error)
{
	const loom_gr_state *seen[SLICE_STATES] = {s};
	int n_seen = 1;
	for (int i = 0; i < n_seen; i++)
		for (uint32_t p = 0; p < w->n_probes; p++) {
			loom_gr_mark before = loom_gr_arena_mark(a);
			const loom_gr_state *next = step_code_point(a, g, seen[i], w->probes[p], error);
			if (next == NULL || *error)
				return false;
			bool known = false;
			for (int k = 0; k < n_seen && !known; k++)
				known = state_equal(next, seen[k]);
			if (known) {
				loom_gr_arena_release(a, before);
				continue;
			}
			if (n_seen == SLICE_STATES)
				return false;
			seen[n_seen++] = next; /* kept in the arena until the judgement ends */
		}
	return true;
}

/* Which tokens of the slice s allows, by how many code points they
 * are: when every code point of a string's body leads s to one same
 * state, and that one on to one same state, and so on, a token of k code
 * points is allowed as long as the chain goes k steps. It ends at a state
 * each leads back to itself (-1: every token of the slice allowed: inside
 * a string at once, after its quote or while a minLength counts in a few
 * steps), or at one none goes on from (k: the tokens of at most k code
 * points; a maxLength reached). Failing that, every token of the slice
 * is allowed (-1) when no string of its code points stops anywhere (an
 * unanchored pattern; an anyOf of strings). 0: the slice is judged no
 * way; its tokens are walked. */
static int32_t slice_reach(loom_trie_walk *w, loom_gr_arena *a, const loom_grammar *g, const loom_gr_state *s)
{
	loom_gr_mark mark = loom_gr_arena_mark(a);
	bool error = false;
	const loom_gr_state *t = step_code_point(a, g, s, 'a', &error);
	if (t == NULL || error) {
		loom_gr_arena_release(a, mark);
		return 0;
	}
	const size_t n = state_words(s);
	if (w->probes_of == g && w->n_judged == n && state_is_words(s, w->judged)) {
		loom_gr_arena_release(a, mark);
		return w->judged_reach;
	}
	int32_t reach = 0;
	if (w->probes_of == g || make_probes(w, g)) {
		const loom_gr_state *from = s;
		for (int32_t k = 0; k <= LOOM_SLICE_LENGTHS && !error; k++) {
			if (t == NULL) {
				reach = k > 0 && none_go_on(w, a, g, from, &error) ? k : 0;
				break;
			}
			if (!all_lead(w, a, g, from, t, &error))
				break;
			if (state_equal(from, t)) {
				reach = -1;
				break;
			}
			from = t;
			t = step_code_point(a, g, from, 'a', &error);
		}
		/* No one state after each step (an unanchored pattern, an
		 * anyOf of strings): every slice token still goes on if every
		 * string of code points does. */
		if (reach == 0 && !error && every_string_goes_on(w, a, g, s, &error))
			reach = -1;
		if (error)
			reach = 0;
		if (n > w->cap_judged) {
			uint32_t *p = realloc(w->judged, n * sizeof(uint32_t));
			if (p != NULL) {
				w->judged = p;
				w->cap_judged = n;
			}
		}
		if (n <= w->cap_judged) {
			state_to_words(s, w->judged);
			w->n_judged = n;
			w->judged_reach = reach;
		}
	}
	loom_gr_arena_release(a, mark);
	return reach;
}

typedef struct walk_ctx {
	const loom_token_trie *t;
	loom_trie_walk *w;
	loom_gr_arena *a;
	const loom_grammar *g;
	uint32_t *bits;
	int32_t n_allowed;
	bool failed;
} walk_ctx;

/* The state after byte b from state index from: looked up, or computed
 * and remembered. -1: refused; -2: failed (limits, memory). */
static int32_t step(walk_ctx *c, int32_t from, unsigned char b)
{
	loom_trie_walk *w = c->w;
	const uint64_t key = (((uint64_t)from << 8) | b) + 1;
	uint32_t mask = w->n_step_slots - 1, i = (uint32_t)(key * 0x9e3779b97f4a7c15ull >> 32) & mask;
	for (; w->step_keys[i] != 0; i = (i + 1) & mask)
		if (w->step_keys[i] == key)
			return w->step_next[i];
	bool error;
	const loom_gr_state *next = loom_gr_advance(c->a, c->g, w->states[from], b, &error);
	if (error)
		return -2;
	int32_t to = next != NULL ? intern(w, next) : -1;
	if (next != NULL && to < 0)
		return -2;
	/* A table past half full is not grown mid-walk: the step is
	 * computed again when met again. */
	if (2 * (w->n_steps + 1) <= w->n_step_slots) {
		w->step_keys[i] = key;
		w->step_next[i] = to;
		w->n_steps++;
	}
	return to;
}

/* The children of the node before first (up to end) that state index s
 * lets through, their tokens marked. */
static void walk(walk_ctx *c, int32_t s, uint32_t first, uint32_t end)
{
	const loom_token_trie *t = c->t;
	for (uint32_t i = first; i < end && !c->failed; i += t->subtree[i]) {
		const int32_t next = step(c, s, t->byte[i]);
		if (next == -2) {
			c->failed = true;
			return;
		}
		if (next < 0)
			continue;
		for (uint32_t k = 0; k < t->tok_n[i]; k++) {
			const loom_token tok = t->tokens[t->tok_first[i] + k];
			c->bits[tok / 32] |= 1u << (tok % 32);
		}
		c->n_allowed += (int32_t)t->tok_n[i];
		if (t->subtree[i] > 1)
			walk(c, next, i + 1, i + t->subtree[i]);
	}
}

loom_status loom_token_trie_mask(const loom_token_trie *t, loom_trie_walk *w, loom_gr_arena *a, const loom_grammar *g,
				 const loom_gr_state *s, uint32_t *bits, int32_t *n_allowed)
{
	memset(bits, 0, ((size_t)t->n_vocab + 31) / 32 * sizeof(uint32_t));
	*n_allowed = 0;
	/* The step table starts small (clearing it is a walk's fixed cost)
	 * and doubles after a walk that filled half of it. */
	const uint32_t steps = w->n_step_slots == 0 ? 8192 : 2 * w->n_steps >= w->n_step_slots ? 2 * w->n_step_slots : 0;
	const uint32_t had = w->n_step_slots;
	w->n_states = 0;
	w->n_steps = 0;
	if (!fresh_slots((void **)&w->state_slots, &w->n_state_slots, 1024, sizeof(uint32_t)) ||
	    !fresh_slots((void **)&w->step_keys, &w->n_step_slots, steps, sizeof(uint64_t)))
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory walking the token trie");
	if (w->n_step_slots != had || w->step_next == NULL) {
		int32_t *p = realloc(w->step_next, (size_t)w->n_step_slots * sizeof(int32_t));
		if (p == NULL)
			return loom_error(LOOM_ERR_NO_MEMORY, "out of memory walking the token trie");
		w->step_next = p;
	}
	loom_gr_mark mark = loom_gr_arena_mark(a);
	walk_ctx c = {t, w, a, g, bits, 0, false};
	const int32_t root = intern(w, s);
	const int32_t reach = root >= 0 && t->rest != NULL && t->n_string > 0 ? slice_reach(w, a, g, s) : 0;
	if (reach != 0) {
		/* Inside a string: the slice (or its tokens short enough for
		 * the string's bound) at once, then the other tokens. */
		const size_t words = ((size_t)t->n_vocab + 31) / 32;
		if (reach < 0) {
			memcpy(bits, t->string_bits, words * sizeof(uint32_t));
			c.n_allowed = t->n_string;
		} else {
			for (int32_t k = 0; k < reach; k++) {
				const uint32_t *row = t->length_bits + (size_t)k * words;
				for (size_t i = 0; i < words; i++)
					bits[i] |= row[i];
				c.n_allowed += t->n_length[k];
			}
		}
		c.t = t->rest;
	}
	if (root < 0)
		c.failed = true;
	else
		walk(&c, root, 1, c.t->subtree[0]);
	loom_gr_arena_release(a, mark);
	if (c.failed)
		return LOOM_ERR_INVALID_ARGUMENT;
	*n_allowed = c.n_allowed;
	if (loom_gr_can_end(s))
		for (int32_t i = 0; i < t->n_eog; i++) {
			bits[t->eog[i] / 32] |= 1u << (t->eog[i] % 32);
			(*n_allowed)++;
		}
	/* The grammar's own tokens (<[id]>) that may come next. */
	for (uint32_t i = 0; s->partial_left == 0 && i < s->n_stacks; i++) {
		const uint32_t len = s->offsets[i + 1] - s->offsets[i];
		const loom_gr_elem *top = len > 0 ? &g->elems[s->data[s->offsets[i + 1] - 1]] : NULL;
		if (top == NULL || top->kind != LOOM_GR_TOKEN || top->arg >= (uint32_t)t->n_vocab ||
		    (bits[top->arg / 32] >> (top->arg % 32)) & 1)
			continue;
		bits[top->arg / 32] |= 1u << (top->arg % 32);
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
	if (loom_gr_takes_token(g, s, token))
		return true;
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
