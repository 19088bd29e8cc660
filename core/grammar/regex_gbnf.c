/* regex_gbnf.c - a JSON Schema pattern (ECMA-262 syntax, the subset a
 * grammar can hold) as GBNF for the body of a JSON string: the strings the
 * pattern matches, written as JSON writes them, narrowed where a character
 * would need an escape inside a class (quotes, backslashes and control
 * characters are left out of classes and `.`; a literal quote or backslash
 * is written escaped). A pattern matches anywhere in the string unless
 * anchored by ^ and $, as JSON Schema reads it. Lookarounds,
 * backreferences and anchors inside the pattern are refused. */
#include "grammar/regex_gbnf.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rx {
	const char *p, *end;
	char *out;
	size_t n, cap;
	char *why; /* the first problem; NULL while none */
	int depth;
} rx;

static bool fail(rx *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool fail(rx *r, const char *fmt, ...)
{
	if (r->why == NULL) {
		char buf[256];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(buf, sizeof(buf), fmt, ap);
		va_end(ap);
		r->why = strdup(buf);
	}
	return false;
}

static bool emit(rx *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool emit(rx *r, const char *fmt, ...)
{
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int k = vsnprintf(r->out ? r->out + r->n : NULL, r->cap - r->n, fmt, ap);
		va_end(ap);
		if (k < 0)
			return fail(r, "cannot write the pattern");
		if ((size_t)k < r->cap - r->n) {
			r->n += (size_t)k;
			return true;
		}
		size_t cap = r->cap ? 2 * r->cap : 256;
		while (cap < r->n + (size_t)k + 1)
			cap *= 2;
		if (cap > (1u << 20))
			return fail(r, "the pattern makes a grammar past 1 MiB");
		char *q = realloc(r->out, cap);
		if (q == NULL)
			return fail(r, "out of memory");
		r->out = q;
		r->cap = cap;
	}
}

/* What JSON strings cannot hold raw, left out of every class. */
#define NOT_RAW "\"\\\\\\x00-\\x1F"

/* A code point as a GBNF class member. */
static bool emit_class_char(rx *r, unsigned cp)
{
	if (cp == ']' || cp == '[' || cp == '-' || cp == '^' || cp == '\\')
		return emit(r, "\\%c", (char)cp);
	if (cp < 0x80)
		return emit(r, "%c", (char)cp);
	return emit(r, "\\U%08X", cp);
}

/* A class escape (\d \w \s and their complements) as class members;
 * *negated for the upper-case ones. */
static bool class_escape(char e, const char **members, bool *negated)
{
	switch (e) {
	case 'd': case 'D': *members = "0-9"; break;
	case 'w': case 'W': *members = "a-zA-Z0-9_"; break;
	case 's': case 'S': *members = " \\t"; break;
	default: return false;
	}
	*negated = e == 'D' || e == 'W' || e == 'S';
	return true;
}

/* One character of a literal or class: UTF-8 or an escape; *cp. */
static bool read_char(rx *r, unsigned *cp)
{
	unsigned char c = (unsigned char)*r->p++;
	if (c != '\\') {
		if (c < 0x80) {
			*cp = c;
			return true;
		}
		int n = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
		unsigned v = c & (n == 3 ? 0x07 : n == 2 ? 0x0F : 0x1F);
		for (int i = 0; i < n; i++) {
			if (r->p >= r->end || ((unsigned char)*r->p & 0xC0) != 0x80)
				return fail(r, "the pattern is not UTF-8");
			v = (v << 6) | ((unsigned char)*r->p++ & 0x3F);
		}
		*cp = v;
		return true;
	}
	if (r->p >= r->end)
		return fail(r, "the pattern ends in a backslash");
	char e = *r->p++;
	switch (e) {
	case 'n': *cp = '\n'; return true;
	case 't': *cp = '\t'; return true;
	case 'r': *cp = '\r'; return true;
	case 'f': *cp = '\f'; return true;
	case 'v': *cp = '\v'; return true;
	case '0': *cp = 0; return true;
	case 'x': case 'u': {
		int digits = e == 'x' ? 2 : 4;
		unsigned v = 0;
		for (int i = 0; i < digits; i++) {
			char h = r->p < r->end ? *r->p++ : 0;
			int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
			if (d < 0)
				return fail(r, "\\%c needs %d hex digits", e, digits);
			v = v * 16 + (unsigned)d;
		}
		*cp = v;
		return true;
	}
	default:
		if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9'))
			return fail(r, "the escape \\%c is not supported", e);
		*cp = (unsigned char)e;
		return true;
	}
}

/* A character class [...], inside a JSON string. */
static bool parse_class(rx *r)
{
	r->p++;
	bool negated = r->p < r->end && *r->p == '^';
	r->p += negated;
	/* Positive classes can only be narrowed by leaving the unwritable
	 * characters out, which a negated GBNF class of them does not do:
	 * a positive class is written as such, a character at a time. */
	if (!emit(r, negated ? "[^" : "["))
		return false;
	bool any = false;
	while (r->p < r->end && *r->p != ']') {
		if (*r->p == '\\' && r->p + 1 < r->end) {
			const char *members;
			bool neg;
			if (class_escape(r->p[1], &members, &neg)) {
				if (neg)
					return fail(r, "\\%c inside a class is not supported", r->p[1]);
				r->p += 2;
				if (!emit(r, "%s", members))
					return false;
				any = true;
				continue;
			}
		}
		unsigned lo, hi;
		if (!read_char(r, &lo))
			return false;
		hi = lo;
		if (r->end - r->p >= 2 && r->p[0] == '-' && r->p[1] != ']') {
			r->p++;
			if (!read_char(r, &hi))
				return false;
			if (hi < lo)
				return fail(r, "a class range whose end is before its start");
		}
		if (negated) {
			if (!emit_class_char(r, lo) || (hi != lo && (!emit(r, "-") || !emit_class_char(r, hi))))
				return false;
			any = true;
			continue;
		}
		/* Left out: what a JSON string cannot hold raw (control
		 * characters, the quote, the backslash), the range split around
		 * them. */
		const unsigned cuts[] = {'"', '\\', 0x110000};
		unsigned from = lo < 0x20 ? 0x20 : lo;
		for (int k = 0; k < 3 && from <= hi; k++) {
			unsigned to = cuts[k] - 1 < hi ? cuts[k] - 1 : hi;
			if (from <= to) {
				if (!emit_class_char(r, from) || (to != from && (!emit(r, "-") || !emit_class_char(r, to))))
					return false;
				any = true;
			}
			from = from > cuts[k] + 1 ? from : cuts[k] + 1;
		}
	}
	if (r->p >= r->end)
		return fail(r, "a class without its closing bracket");
	r->p++;
	if (!any && !negated)
		return fail(r, "a class that matches nothing a JSON string holds raw");
	return emit(r, negated ? NOT_RAW "]" : "]");
}

static bool parse_alternatives(rx *r);

/* One atom: a character, a class, '.', a class escape or a group. */
static bool parse_atom(rx *r)
{
	char c = *r->p;
	if (c == '(') {
		r->p++;
		if (r->p < r->end && *r->p == '?') {
			if (r->end - r->p >= 2 && r->p[1] == ':')
				r->p += 2;
			else
				return fail(r, "lookarounds and named groups are not supported");
		}
		if (++r->depth > 64)
			return fail(r, "the pattern nests deeper than 64");
		if (!emit(r, "(") || !parse_alternatives(r))
			return false;
		r->depth--;
		if (r->p >= r->end || *r->p != ')')
			return fail(r, "a group without its closing parenthesis");
		r->p++;
		return emit(r, ")");
	}
	if (c == '[')
		return parse_class(r);
	if (c == '.') {
		r->p++;
		return emit(r, "[^\\n" NOT_RAW "]");
	}
	if (c == '^' || c == '$')
		return fail(r, "an anchor inside the pattern is not supported (only a leading ^ and a trailing $)");
	if (c == '*' || c == '+' || c == '?' || c == '{')
		return fail(r, "a quantifier with nothing before it");
	if (c == '\\' && r->p + 1 < r->end) {
		const char *members;
		bool negated;
		if (class_escape(r->p[1], &members, &negated)) {
			r->p += 2;
			return emit(r, negated ? "[^%s" NOT_RAW "]" : "[%s]", members);
		}
		if (r->p[1] >= '1' && r->p[1] <= '9')
			return fail(r, "backreferences are not supported");
		if (r->p[1] == 'b' || r->p[1] == 'B')
			return fail(r, "word boundaries are not supported");
	}
	unsigned cp;
	if (!read_char(r, &cp))
		return false;
	/* A literal: as JSON writes it. */
	if (cp == '"')
		return emit(r, "\"\\\\\\\"\"");
	if (cp == '\\')
		return emit(r, "\"\\\\\\\\\"");
	if (cp < 0x20) {
		static const char *const short_escape[] = {['\n'] = "n", ['\t'] = "t", ['\r'] = "r", ['\f'] = "f", ['\b'] = "b"};
		if (cp < sizeof(short_escape) / sizeof(short_escape[0]) && short_escape[cp] != NULL)
			return emit(r, "\"\\\\%s\"", short_escape[cp]);
		return emit(r, "\"\\\\u%04x\"", cp);
	}
	if (cp < 0x80)
		return emit(r, "\"%c\"", (char)cp);
	return emit(r, "\"\\U%08X\"", cp);
}

/* A quantifier after an atom, if any; lazy ones (*?) match as greedy ones
 * do (the set of strings is the same). */
static bool parse_quantifier(rx *r)
{
	if (r->p >= r->end)
		return true;
	char c = *r->p;
	bool ok = true;
	if (c == '*' || c == '+' || c == '?') {
		r->p++;
		ok = emit(r, "%c", c);
	} else if (c == '{') {
		char *endp;
		long m = strtol(r->p + 1, &endp, 10), n = m;
		if (endp == r->p + 1)
			return fail(r, "a repetition needs a count");
		if (*endp == ',') {
			const char *q = endp + 1;
			n = *q == '}' ? -1 : strtol(q, &endp, 10);
			if (n >= 0 && endp == q)
				return fail(r, "a repetition's bound is not a number");
			if (n < 0)
				endp = (char *)q;
		}
		if (*endp != '}' || m < 0 || m > 1000 || n > 1000 || (n >= 0 && n < m))
			return fail(r, "a repetition of 0 to 1000 is read, not this one");
		r->p = endp + 1;
		ok = n < 0 ? emit(r, "{%ld,}", m) : emit(r, "{%ld,%ld}", m, n);
	}
	if (ok && r->p < r->end && *r->p == '?')
		r->p++;
	return ok;
}

static bool parse_sequence(rx *r)
{
	bool empty = true;
	while (r->p < r->end && *r->p != '|' && *r->p != ')') {
		/* A trailing $ ends the pattern. */
		if (*r->p == '$' && r->p + 1 == r->end)
			break;
		if (!emit(r, " (") || !parse_atom(r) || !emit(r, ")") || !parse_quantifier(r))
			return false;
		empty = false;
	}
	return !empty || emit(r, " \"\"");
}

static bool parse_alternatives(rx *r)
{
	if (!parse_sequence(r))
		return false;
	while (r->p < r->end && *r->p == '|') {
		r->p++;
		if (!emit(r, " |") || !parse_sequence(r))
			return false;
	}
	return true;
}

char *loom_regex_gbnf(const char *pattern, const char *any_char, char **why)
{
	rx r = {.p = pattern, .end = pattern + strlen(pattern)};
	*why = NULL;
	const bool start = r.p < r.end && *r.p == '^';
	r.p += start;
	const bool end = r.end > r.p && r.end[-1] == '$' && (r.end - r.p < 2 || r.end[-2] != '\\');
	/* Unanchored ends take any characters. */
	bool ok = emit(&r, "(") && (start || emit(&r, "%s* ", any_char)) && emit(&r, "(") && parse_alternatives(&r) &&
		  emit(&r, ")");
	if (ok && r.p < r.end && *r.p == ')')
		ok = fail(&r, "a closing parenthesis without its opening one");
	if (ok && r.p < r.end && !(end && *r.p == '$' && r.p + 1 == r.end))
		ok = fail(&r, "unexpected '%c'", *r.p);
	ok = ok && (end || emit(&r, " %s*", any_char)) && emit(&r, ")");
	if (!ok) {
		free(r.out);
		*why = r.why != NULL ? r.why : strdup("cannot read the pattern");
		return NULL;
	}
	free(r.why);
	return r.out;
}
