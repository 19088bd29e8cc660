/* json_text.h - JSON written as chat templates write it: Python's
 * json.dumps with ensure_ascii off, which the Hugging Face templates'
 * `tojson` filter is. */
#ifndef LOOM_JSON_TEXT_H
#define LOOM_JSON_TEXT_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

/* A growing text; every append reports whether memory held. */
typedef struct loom_strbuf {
	char *s;
	size_t n, cap;
	bool failed; /* an append ran out of memory: the text is incomplete */
} loom_strbuf;

void loom_strbuf_put_n(loom_strbuf *b, const char *s, size_t n);
void loom_strbuf_put(loom_strbuf *b, const char *s);
void loom_strbuf_free(loom_strbuf *b);

/* v as json.dumps(v, ensure_ascii=False) writes it: ", " and ": "
 * between items, keys in their order; indent > 0: one item a line,
 * indented that many spaces a level, "," ending the line. Numbers are
 * written as cJSON read them: integers without a fraction, others with
 * the shortest text that reads back the same. */
void loom_json_dump(loom_strbuf *b, const cJSON *v, int indent);

#endif
