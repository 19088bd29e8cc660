/* json_text.c - JSON as chat templates' tojson writes it (json_text.h). */
#include "text/json_text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void loom_strbuf_put_n(loom_strbuf *b, const char *s, size_t n)
{
	if (b->failed)
		return;
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 256;
		while (cap < b->n + n + 1)
			cap *= 2;
		char *p = realloc(b->s, cap);
		if (p == NULL) {
			b->failed = true;
			return;
		}
		b->s = p;
		b->cap = cap;
	}
	if (n > 0)
		memcpy(b->s + b->n, s, n);
	b->n += n;
	b->s[b->n] = '\0';
}

void loom_strbuf_put(loom_strbuf *b, const char *s)
{
	loom_strbuf_put_n(b, s, strlen(s));
}

void loom_strbuf_free(loom_strbuf *b)
{
	free(b->s);
	*b = (loom_strbuf){0};
}

/* A string with json.dumps' escapes: the two-character ones it knows,
 * \u00XX for other control characters, every other byte as it is. */
static void put_string(loom_strbuf *b, const char *s)
{
	loom_strbuf_put_n(b, "\"", 1);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		char esc[8];
		switch (*p) {
		case '"': loom_strbuf_put_n(b, "\\\"", 2); break;
		case '\\': loom_strbuf_put_n(b, "\\\\", 2); break;
		case '\n': loom_strbuf_put_n(b, "\\n", 2); break;
		case '\r': loom_strbuf_put_n(b, "\\r", 2); break;
		case '\t': loom_strbuf_put_n(b, "\\t", 2); break;
		case '\b': loom_strbuf_put_n(b, "\\b", 2); break;
		case '\f': loom_strbuf_put_n(b, "\\f", 2); break;
		default:
			if (*p < 0x20) {
				snprintf(esc, sizeof(esc), "\\u%04x", *p);
				loom_strbuf_put(b, esc);
			} else {
				loom_strbuf_put_n(b, (const char *)p, 1);
			}
		}
	}
	loom_strbuf_put_n(b, "\"", 1);
}

static void put_number(loom_strbuf *b, double d)
{
	char text[40];
	if (d == floor(d) && fabs(d) < 1e15)
		snprintf(text, sizeof(text), "%.0f", d);
	else {
		/* The shortest of %.15g..%.17g that reads back as d. */
		for (int prec = 15; prec <= 17; prec++) {
			snprintf(text, sizeof(text), "%.*g", prec, d);
			if (strtod(text, NULL) == d)
				break;
		}
	}
	loom_strbuf_put(b, text);
}

static void put_newline(loom_strbuf *b, int indent, int level)
{
	loom_strbuf_put_n(b, "\n", 1);
	for (int i = 0; i < indent * level; i++)
		loom_strbuf_put_n(b, " ", 1);
}

static void dump(loom_strbuf *b, const cJSON *v, int indent, int level)
{
	if (cJSON_IsNull(v) || v == NULL) {
		loom_strbuf_put(b, "null");
	} else if (cJSON_IsTrue(v)) {
		loom_strbuf_put(b, "true");
	} else if (cJSON_IsFalse(v)) {
		loom_strbuf_put(b, "false");
	} else if (cJSON_IsNumber(v)) {
		put_number(b, v->valuedouble);
	} else if (cJSON_IsString(v)) {
		put_string(b, v->valuestring);
	} else if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
		const bool obj = cJSON_IsObject(v);
		loom_strbuf_put_n(b, obj ? "{" : "[", 1);
		for (const cJSON *c = v->child; c != NULL; c = c->next) {
			if (indent > 0)
				put_newline(b, indent, level + 1);
			if (obj) {
				put_string(b, c->string);
				loom_strbuf_put_n(b, ": ", 2);
			}
			dump(b, c, indent, level + 1);
			if (c->next != NULL)
				loom_strbuf_put(b, indent > 0 ? "," : ", ");
		}
		if (indent > 0 && v->child != NULL)
			put_newline(b, indent, level);
		loom_strbuf_put_n(b, obj ? "}" : "]", 1);
	}
}

void loom_json_dump(loom_strbuf *b, const cJSON *v, int indent)
{
	dump(b, v, indent, 0);
}
