/* grammar_parse.c - llama.cpp's GBNF text compiled into a loom_grammar.
 *
 *     root   ::= object
 *     object ::= "{" ws ( pair ( "," ws pair )* )? "}"
 *     ws     ::= [ \t\n]{0,20}
 *
 * A rule is a name, "::=" and alternatives separated by "|"; an
 * alternative is a sequence of string literals ("..."), character classes
 * ([a-z], [^"\\]), "." (any character), rule names and parenthesised
 * groups, each optionally repeated (*, +, ?, {m}, {m,}, {m,n}). Newlines
 * end a rule except inside parentheses or after "::=" or "|"; "#" starts
 * a comment.
 * Escapes: \n \r \t \\ \" \' \[ \] \- \xHH \uHHHH \UHHHHHHHH. A repeated
 * or grouped part becomes a rule of its own (x* is r ::= x r | ""). */
#include "grammar/grammar.h"

#include "runtime/error.h"
#include "text/unicode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Limits on what one grammar may hold: a request's grammar is bounded. */
#define MAX_ELEMS (1u << 20)
#define MAX_RULES (1u << 16)
#define MAX_REPEAT 10000

/* A rule while it is read: alternatives of elements (RULE elements name
 * the rule by index; CHARS elements index the range table). */
typedef struct b_alt {
	loom_gr_elem *elems;
	uint32_t n, cap;
} b_alt;

typedef struct b_rule {
	char *name;
	b_alt *alts;
	uint32_t n_alts, cap_alts;
	bool defined;
	int line, col; /* where it was first named, for an undefined rule */
} b_rule;

typedef struct builder {
	const char *text, *end, *p;
	b_rule *rules;
	uint32_t n_rules, cap_rules;
	loom_gr_range *ranges;
	uint32_t n_ranges, cap_ranges;
	uint32_t n_elems;
	loom_status st;
} builder;

static bool grow(void **p, uint32_t *cap, uint32_t need, size_t size)
{
	if (need <= *cap)
		return true;
	uint32_t c = *cap ? *cap : 8;
	while (c < need)
		c *= 2;
	void *q = realloc(*p, (size_t)c * size);
	if (q == NULL)
		return false;
	*p = q;
	*cap = c;
	return true;
}

static void where(const builder *b, const char *at, int *line, int *col)
{
	*line = 1;
	*col = 1;
	for (const char *q = b->text; q < at && q < b->end; q++) {
		if (*q == '\n') {
			(*line)++;
			*col = 1;
		} else {
			(*col)++;
		}
	}
}

/* Records the first error, at `at`. */
static bool fail(builder *b, const char *at, const char *what)
{
	if (b->st == LOOM_OK) {
		int line, col;
		where(b, at, &line, &col);
		b->st = loom_error(LOOM_ERR_INVALID_ARGUMENT, "grammar:%d:%d: %s", line, col, what);
	}
	return false;
}

static bool out_of_memory(builder *b)
{
	if (b->st == LOOM_OK)
		b->st = loom_error(LOOM_ERR_NO_MEMORY, "out of memory compiling a grammar");
	return false;
}

/* The rule called name (len bytes), made if new. */
static bool rule_named(builder *b, const char *name, size_t len, const char *at, uint32_t *out)
{
	for (uint32_t i = 0; i < b->n_rules; i++)
		if (strlen(b->rules[i].name) == len && memcmp(b->rules[i].name, name, len) == 0) {
			*out = i;
			return true;
		}
	if (b->n_rules >= MAX_RULES)
		return fail(b, at, "more than 65536 rules");
	if (!grow((void **)&b->rules, &b->cap_rules, b->n_rules + 1, sizeof(b_rule)))
		return out_of_memory(b);
	b_rule *r = &b->rules[b->n_rules];
	memset(r, 0, sizeof(*r));
	if ((r->name = malloc(len + 1)) == NULL)
		return out_of_memory(b);
	memcpy(r->name, name, len);
	r->name[len] = '\0';
	where(b, at, &r->line, &r->col);
	*out = b->n_rules++;
	return true;
}

/* A rule of its own for a group or a repetition: parent_N. */
static bool new_rule(builder *b, uint32_t parent, uint32_t *out)
{
	char name[160];
	snprintf(name, sizeof(name), "%.120s_%u", b->rules[parent].name, b->n_rules);
	if (!rule_named(b, name, strlen(name), b->p, out))
		return false;
	b->rules[*out].defined = true;
	return true;
}

static bool add_alt(builder *b, uint32_t rule)
{
	b_rule *r = &b->rules[rule];
	if (!grow((void **)&r->alts, &r->cap_alts, r->n_alts + 1, sizeof(b_alt)))
		return out_of_memory(b);
	memset(&r->alts[r->n_alts++], 0, sizeof(b_alt));
	return true;
}

static bool add_elem(builder *b, b_alt *a, loom_gr_elem e)
{
	if (b->n_elems >= MAX_ELEMS)
		return fail(b, b->p, "the grammar grows past 1048576 elements");
	if (!grow((void **)&a->elems, &a->cap, a->n + 1, sizeof(loom_gr_elem)))
		return out_of_memory(b);
	a->elems[a->n++] = e;
	b->n_elems++;
	return true;
}

static bool add_range(builder *b, uint32_t lo, uint32_t hi)
{
	if (!grow((void **)&b->ranges, &b->cap_ranges, b->n_ranges + 1, sizeof(loom_gr_range)))
		return out_of_memory(b);
	b->ranges[b->n_ranges++] = (loom_gr_range){lo, hi};
	return true;
}

static bool at_end(const builder *b)
{
	return b->p >= b->end;
}

/* Skips blanks and comments; newlines too when nested. */
static void skip_space(builder *b, bool newlines)
{
	while (!at_end(b)) {
		char c = *b->p;
		if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
			b->p++;
		} else if (c == '#') {
			while (!at_end(b) && *b->p != '\n')
				b->p++;
		} else {
			break;
		}
	}
}

static bool is_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static int hex_value(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* One character of a literal or class: UTF-8, or an escape. */
static bool read_char(builder *b, uint32_t *cp)
{
	const char *at = b->p;
	if (at_end(b))
		return fail(b, at, "the text ends inside a literal or class");
	unsigned char c = (unsigned char)*b->p;
	if (c != '\\') {
		size_t n = loom_utf8_seq_len(c), avail = (size_t)(b->end - b->p);
		if (n > avail)
			return fail(b, at, "a truncated UTF-8 character");
		size_t used;
		*cp = loom_utf8_decode(b->p, avail, &used);
		b->p += used;
		return true;
	}
	b->p++;
	if (at_end(b))
		return fail(b, at, "the text ends inside an escape");
	char e = *b->p++;
	int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
	if (digits > 0) {
		uint32_t v = 0;
		for (int i = 0; i < digits; i++) {
			int h = at_end(b) ? -1 : hex_value(*b->p);
			if (h < 0)
				return fail(b, at, "an escape needs its hex digits");
			v = v * 16 + (uint32_t)h;
			b->p++;
		}
		if (v > 0x10FFFF)
			return fail(b, at, "a code point past U+10FFFF");
		*cp = v;
		return true;
	}
	switch (e) {
	case 'n': *cp = '\n'; return true;
	case 'r': *cp = '\r'; return true;
	case 't': *cp = '\t'; return true;
	case '\\': case '"': case '\'': case '[': case ']': case '-': case '^': *cp = (uint32_t)e; return true;
	default: return fail(b, at, "an unknown escape");
	}
}

/* A code point set element over the ranges just added from `first`. */
static loom_gr_elem chars(uint32_t first, uint32_t n, bool negated)
{
	return (loom_gr_elem){.kind = LOOM_GR_CHARS, .negated = negated, .arg = first, .n = n};
}

static bool parse_alternates(builder *b, uint32_t rule, bool nested);

/* A token id: decimal digits, at most INT32_MAX. */
static bool read_token_id(builder *b, int64_t *out)
{
	const char *start = b->p;
	int64_t v = 0;
	while (!at_end(b) && *b->p >= '0' && *b->p <= '9' && v <= INT32_MAX)
		v = v * 10 + (*b->p++ - '0');
	*out = v;
	return b->p > start && v <= INT32_MAX;
}

/* One atom into alt (which may receive several elements: a literal). */
static bool parse_atom(builder *b, uint32_t rule, uint32_t alt_index)
{
	const char *at = b->p;
	char c = *b->p;
	if (c == '"') {
		b->p++;
		while (!at_end(b) && *b->p != '"') {
			uint32_t cp;
			if (!read_char(b, &cp) || !add_range(b, cp, cp))
				return false;
			if (!add_elem(b, &b->rules[rule].alts[alt_index], chars(b->n_ranges - 1, 1, false)))
				return false;
		}
		if (at_end(b))
			return fail(b, at, "a string literal without its closing quote");
		b->p++;
	} else if (c == '[') {
		b->p++;
		bool negated = !at_end(b) && *b->p == '^';
		b->p += negated;
		uint32_t first = b->n_ranges;
		while (!at_end(b) && *b->p != ']') {
			uint32_t lo, hi;
			if (!read_char(b, &lo))
				return false;
			hi = lo;
			if (b->end - b->p >= 2 && b->p[0] == '-' && b->p[1] != ']') {
				b->p++;
				if (!read_char(b, &hi))
					return false;
				if (hi < lo)
					return fail(b, at, "a class range whose end is before its start");
			}
			if (!add_range(b, lo, hi))
				return false;
		}
		if (at_end(b))
			return fail(b, at, "a character class without its closing bracket");
		b->p++;
		if (!add_elem(b, &b->rules[rule].alts[alt_index], chars(first, b->n_ranges - first, negated)))
			return false;
	} else if (c == '.') {
		b->p++;
		if (!add_elem(b, &b->rules[rule].alts[alt_index], chars(b->n_ranges, 0, true)))
			return false;
	} else if (c == '(') {
		b->p++;
		uint32_t group;
		if (!new_rule(b, rule, &group))
			return false;
		if (!parse_alternates(b, group, true))
			return false;
		skip_space(b, true);
		if (at_end(b) || *b->p != ')')
			return fail(b, at, "a group without its closing parenthesis");
		b->p++;
		loom_gr_elem e = {.kind = LOOM_GR_RULE, .arg = group};
		if (!add_elem(b, &b->rules[rule].alts[alt_index], e))
			return false;
	} else if (is_name_char(c)) {
		const char *name = b->p;
		while (!at_end(b) && is_name_char(*b->p))
			b->p++;
		uint32_t ref;
		if (!rule_named(b, name, (size_t)(b->p - name), name, &ref))
			return false;
		loom_gr_elem e = {.kind = LOOM_GR_RULE, .arg = ref};
		if (!add_elem(b, &b->rules[rule].alts[alt_index], e))
			return false;
	} else if (c == '<') {
		/* A token by its id, <[id]>; tokens by their text (<name>) would
		 * need the model's vocabulary. */
		int64_t id = 0;
		b->p++;
		if (at_end(b) || *b->p != '[')
			return fail(b, at, "a token reference is <[id]>: tokens by their text are not supported");
		b->p++;
		if (!read_token_id(b, &id) || at_end(b) || *b->p != ']' || b->p + 1 >= b->end || b->p[1] != '>')
			return fail(b, at, "a token reference is <[id]>, its id a number from 0 to 2147483647");
		b->p += 2;
		loom_gr_elem e = {.kind = LOOM_GR_TOKEN, .arg = (uint32_t)id};
		if (!add_elem(b, &b->rules[rule].alts[alt_index], e))
			return false;
	} else {
		return fail(b, at, "expected a literal, a class, '.', '(' or a rule name");
	}
	return true;
}

/* A decimal count within the text (which need not end in a NUL), at
 * most a little past MAX_REPEAT; false if there are no digits. */
static bool read_count(builder *b, long *out)
{
	long v = 0;
	const char *start = b->p;
	while (!at_end(b) && *b->p >= '0' && *b->p <= '9') {
		if (v <= MAX_REPEAT)
			v = v * 10 + (*b->p - '0');
		b->p++;
	}
	*out = v;
	return b->p > start;
}

/* Reads {m}, {m,} or {m,n}; *max < 0: no bound. */
static bool parse_bounds(builder *b, long *min, long *max)
{
	const char *at = b->p;
	b->p++;
	skip_space(b, false);
	if (!read_count(b, min))
		return fail(b, at, "a repetition needs a count");
	skip_space(b, false);
	*max = *min;
	if (!at_end(b) && *b->p == ',') {
		b->p++;
		skip_space(b, false);
		*max = -1;
		if (!at_end(b) && *b->p != '}') {
			if (!read_count(b, max) || *max < *min)
				return fail(b, at, "a repetition's bound is below its count");
			skip_space(b, false);
		}
	}
	if (at_end(b) || *b->p != '}')
		return fail(b, at, "a repetition without its closing brace");
	b->p++;
	if (*min > MAX_REPEAT || *max > MAX_REPEAT)
		return fail(b, at, "a repetition count past 10000");
	return true;
}

/* The elements [from, n) of alt, repeated min to max times (max < 0: any
 * number): they move into rules of their own. */
static bool repeat(builder *b, uint32_t rule, uint32_t alt_index, uint32_t from, long min, long max)
{
	b_alt *a = &b->rules[rule].alts[alt_index];
	const uint32_t n = a->n - from;
	loom_gr_elem *part = malloc((n ? n : 1) * sizeof(loom_gr_elem));
	if (part == NULL)
		return out_of_memory(b);
	if (n > 0)
		memcpy(part, a->elems + from, n * sizeof(loom_gr_elem));
	b->n_elems -= n;
	a->n = from;
	bool ok = true;
	/* min copies of the part in place. */
	for (long i = 0; ok && i < min; i++)
		for (uint32_t k = 0; ok && k < n; k++)
			ok = add_elem(b, &b->rules[rule].alts[alt_index], part[k]);
	if (ok && max < 0) {
		/* tail ::= part tail | "" */
		uint32_t tail;
		ok = new_rule(b, rule, &tail) && add_alt(b, tail) && add_alt(b, tail);
		for (uint32_t k = 0; ok && k < n; k++)
			ok = add_elem(b, &b->rules[tail].alts[0], part[k]);
		if (ok)
			ok = add_elem(b, &b->rules[tail].alts[0], (loom_gr_elem){.kind = LOOM_GR_RULE, .arg = tail});
		if (ok)
			ok = add_elem(b, &b->rules[rule].alts[alt_index], (loom_gr_elem){.kind = LOOM_GR_RULE, .arg = tail});
	} else if (ok && max > min) {
		/* opt_k ::= part opt_{k-1} | "", nested max - min deep. */
		uint32_t inner = 0;
		bool have_inner = false;
		for (long i = min; ok && i < max; i++) {
			uint32_t opt;
			ok = new_rule(b, rule, &opt) && add_alt(b, opt) && add_alt(b, opt);
			for (uint32_t k = 0; ok && k < n; k++)
				ok = add_elem(b, &b->rules[opt].alts[0], part[k]);
			if (ok && have_inner)
				ok = add_elem(b, &b->rules[opt].alts[0], (loom_gr_elem){.kind = LOOM_GR_RULE, .arg = inner});
			inner = opt;
			have_inner = true;
		}
		if (ok)
			ok = add_elem(b, &b->rules[rule].alts[alt_index], (loom_gr_elem){.kind = LOOM_GR_RULE, .arg = inner});
	}
	free(part);
	return ok;
}

/* A sequence of atoms, each maybe repeated, into a new alternative. */
static bool parse_sequence(builder *b, uint32_t rule, bool nested)
{
	if (!add_alt(b, rule))
		return false;
	const uint32_t alt_index = b->rules[rule].n_alts - 1;
	for (;;) {
		skip_space(b, nested);
		if (at_end(b) || *b->p == '|' || *b->p == ')' || *b->p == '\n')
			return true;
		const uint32_t from = b->rules[rule].alts[alt_index].n;
		if (!parse_atom(b, rule, alt_index))
			return false;
		skip_space(b, nested);
		if (at_end(b))
			return true;
		char c = *b->p;
		long min = -2, max = -2;
		if (c == '*' || c == '+' || c == '?') {
			b->p++;
			min = c == '+' ? 1 : 0;
			max = c == '?' ? 1 : -1;
		} else if (c == '{') {
			if (!parse_bounds(b, &min, &max))
				return false;
		}
		if (min != -2 && !repeat(b, rule, alt_index, from, min, max))
			return false;
	}
}

static bool parse_alternates(builder *b, uint32_t rule, bool nested)
{
	if (!parse_sequence(b, rule, nested))
		return false;
	while (!at_end(b) && *b->p == '|') {
		b->p++;
		skip_space(b, true);
		if (!parse_sequence(b, rule, nested))
			return false;
	}
	return true;
}

static bool parse_rules(builder *b)
{
	for (;;) {
		skip_space(b, true);
		if (at_end(b))
			return true;
		const char *at = b->p;
		if (!is_name_char(*b->p))
			return fail(b, at, "expected a rule name");
		while (!at_end(b) && is_name_char(*b->p))
			b->p++;
		uint32_t rule;
		if (!rule_named(b, at, (size_t)(b->p - at), at, &rule))
			return false;
		if (b->rules[rule].defined)
			return fail(b, at, "a rule defined twice");
		b->rules[rule].defined = true;
		skip_space(b, false);
		if (b->end - b->p < 3 || memcmp(b->p, "::=", 3) != 0)
			return fail(b, b->p, "expected '::='");
		b->p += 3;
		skip_space(b, true);
		if (!parse_alternates(b, rule, false))
			return false;
		if (!at_end(b) && *b->p == ')')
			return fail(b, b->p, "a closing parenthesis without its opening one");
	}
}

/* Whether each rule can derive the empty string. */
static void find_nullable(const builder *b, bool *nullable)
{
	memset(nullable, 0, b->n_rules * sizeof(bool));
	for (bool changed = true; changed;) {
		changed = false;
		for (uint32_t r = 0; r < b->n_rules; r++) {
			if (nullable[r])
				continue;
			for (uint32_t a = 0; a < b->rules[r].n_alts && !nullable[r]; a++) {
				const b_alt *alt = &b->rules[r].alts[a];
				bool all = true;
				for (uint32_t k = 0; k < alt->n && all; k++)
					all = alt->elems[k].kind == LOOM_GR_RULE && nullable[alt->elems[k].arg];
				if (all) {
					nullable[r] = true;
					changed = true;
				}
			}
		}
	}
}

/* Left recursion (a rule that can reach itself before taking a
 * character) would expand forever: refused. A depth-first search over
 * each alternative's leading rules, past nullable ones; *cycle gets the
 * rule found on its own path. */
static bool left_recursive(const builder *b, const bool *nullable, uint32_t r, uint8_t *mark, uint32_t *cycle)
{
	if (mark[r] == 1) {
		*cycle = r;
		return true;
	}
	if (mark[r] == 2)
		return false;
	mark[r] = 1;
	for (uint32_t a = 0; a < b->rules[r].n_alts; a++) {
		const b_alt *alt = &b->rules[r].alts[a];
		for (uint32_t k = 0; k < alt->n; k++) {
			if (alt->elems[k].kind != LOOM_GR_RULE)
				break;
			if (left_recursive(b, nullable, alt->elems[k].arg, mark, cycle))
				return true;
			if (!nullable[alt->elems[k].arg])
				break;
		}
	}
	mark[r] = 2;
	return false;
}

static loom_status flatten(builder *b, uint32_t root, loom_grammar **out)
{
	loom_grammar *g = calloc(1, sizeof(*g));
	uint32_t n_alts = 0, n_elems = 0;
	for (uint32_t r = 0; r < b->n_rules; r++) {
		n_alts += b->rules[r].n_alts;
		for (uint32_t a = 0; a < b->rules[r].n_alts; a++)
			n_elems += b->rules[r].alts[a].n + 1;
	}
	if (g != NULL) {
		g->elems = malloc((n_elems + 1) * sizeof(loom_gr_elem));
		g->alts = malloc((n_alts + 1) * sizeof(uint32_t));
		g->rules = calloc(b->n_rules + 1, sizeof(loom_gr_rule));
		g->ranges = malloc((b->n_ranges + 1) * sizeof(loom_gr_range));
	}
	if (g == NULL || !g->elems || !g->alts || !g->rules || !g->ranges) {
		loom_grammar_free(g);
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory compiling a grammar");
	}
	if (b->n_ranges > 0)
		memcpy(g->ranges, b->ranges, b->n_ranges * sizeof(loom_gr_range));
	g->n_ranges = b->n_ranges;
	for (uint32_t r = 0; r < b->n_rules; r++) {
		b_rule *br = &b->rules[r];
		g->rules[r] = (loom_gr_rule){.name = br->name, .first_alt = g->n_alts, .n_alts = br->n_alts};
		br->name = NULL;
		for (uint32_t a = 0; a < br->n_alts; a++) {
			g->alts[g->n_alts++] = g->n_elems;
			if (br->alts[a].n > 0) /* an empty alternative has no array */
				memcpy(g->elems + g->n_elems, br->alts[a].elems, br->alts[a].n * sizeof(loom_gr_elem));
			g->n_elems += br->alts[a].n;
			g->elems[g->n_elems++] = (loom_gr_elem){.kind = LOOM_GR_END};
		}
	}
	g->n_rules = b->n_rules;
	g->root = root;
	*out = g;
	return LOOM_OK;
}

static void builder_free(builder *b)
{
	for (uint32_t r = 0; r < b->n_rules; r++) {
		free(b->rules[r].name);
		for (uint32_t a = 0; a < b->rules[r].n_alts; a++)
			free(b->rules[r].alts[a].elems);
		free(b->rules[r].alts);
	}
	free(b->rules);
	free(b->ranges);
}

loom_status loom_grammar_parse(const char *text, size_t len, const char *root, loom_grammar **out)
{
	*out = NULL;
	if (text == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "a grammar's text is NULL");
	builder b = {.text = text, .end = text + len, .p = text};
	root = root != NULL ? root : "root";
	bool ok = parse_rules(&b);
	uint32_t root_rule = 0;
	for (uint32_t r = 0; ok && r < b.n_rules; r++)
		if (!b.rules[r].defined) {
			char what[200];
			snprintf(what, sizeof(what), "rule '%.120s' is used but not defined", b.rules[r].name);
			int line = b.rules[r].line, col = b.rules[r].col;
			b.st = loom_error(LOOM_ERR_INVALID_ARGUMENT, "grammar:%d:%d: %s", line, col, what);
			ok = false;
		}
	if (ok) {
		ok = false;
		for (uint32_t r = 0; r < b.n_rules; r++)
			if (strcmp(b.rules[r].name, root) == 0) {
				root_rule = r;
				ok = true;
			}
		if (!ok)
			b.st = loom_error(LOOM_ERR_INVALID_ARGUMENT, "grammar: no rule '%s' to start from", root);
	}
	if (ok) {
		bool *nullable = calloc(b.n_rules + 1, sizeof(bool));
		uint8_t *mark = calloc(b.n_rules + 1, 1);
		if (nullable == NULL || mark == NULL) {
			ok = out_of_memory(&b);
		} else {
			find_nullable(&b, nullable);
			uint32_t k;
			for (uint32_t r = 0; ok && r < b.n_rules; r++)
				if (mark[r] == 0 && left_recursive(&b, nullable, r, mark, &k)) {
					b.st = loom_error(LOOM_ERR_INVALID_ARGUMENT,
							  "grammar:%d:%d: rule '%s' is left-recursive (it can reach itself "
							  "before reading a character)",
							  b.rules[k].line, b.rules[k].col, b.rules[k].name);
					ok = false;
				}
		}
		free(nullable);
		free(mark);
	}
	loom_status st = ok ? flatten(&b, root_rule, out) : b.st;
	builder_free(&b);
	return st;
}

void loom_grammar_free(loom_grammar *g)
{
	if (g == NULL)
		return;
	for (uint32_t r = 0; g->rules != NULL && r < g->n_rules; r++)
		free(g->rules[r].name);
	free(g->elems);
	free(g->alts);
	free(g->rules);
	free(g->ranges);
	free(g);
}
