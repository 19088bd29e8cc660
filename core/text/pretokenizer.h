/* pretokenizer.h - cutting text into words before byte-level BPE, by the
 * regular expressions a model's tokenizer.ggml.pre names. */
#ifndef LOOM_PRETOKENIZER_H
#define LOOM_PRETOKENIZER_H

#include "loom.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct loom_pretokenizer loom_pretokenizer;

/* What a pre-tokenizer's name implies beyond its expressions. */
enum loom_pretok_flag {
	LOOM_PRETOK_IGNORE_MERGES = 1 << 0, /* a word that is a token stays whole */
	LOOM_PRETOK_ADD_BOS = 1 << 1,       /* BOS is added unless the file says not */
	LOOM_PRETOK_NO_BOS = 1 << 2,        /* there is no default BOS id */
	LOOM_PRETOK_LSTRIP_MASK = 1 << 3,   /* "<mask>" eats the whitespace before it */
};

/* A piece of the text: text[off .. off + len). */
typedef struct loom_span {
	size_t off, len;
} loom_span;

typedef struct loom_span_vec {
	loom_span *data;
	size_t n, cap;
} loom_span_vec;

/* Compiles the expressions of the pre-tokenizer called name[0 .. len), or
 * of "default" when name is NULL (the key is absent). An unknown name is
 * UNSUPPORTED, with a message naming it. */
loom_status loom_pretokenizer_create(const char *name, size_t len, loom_pretokenizer **out);
void loom_pretokenizer_free(loom_pretokenizer *p);

unsigned loom_pretokenizer_flags(const loom_pretokenizer *p); /* enum loom_pretok_flag */

/* Cuts text[0 .. len) into words, replacing the contents of out. Each
 * expression in turn cuts every piece the previous ones left: a match is a
 * piece, and so is the text between two matches. Bytes that are not valid
 * UTF-8 never match and so end up in pieces of their own. Safe to call
 * from several threads at once. */
loom_status loom_pretokenizer_split(const loom_pretokenizer *p, const char *text, size_t len,
				    loom_span_vec *out);

#endif
