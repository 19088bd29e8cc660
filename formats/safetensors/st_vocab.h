/* st_vocab.h - the token table a tokenizer.json describes, indexed by id
 * and by text, with GGUF's token types and (for "llama") scores. */
#ifndef LOOM_ST_VOCAB_H
#define LOOM_ST_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* GGUF's token types (tokenizer.ggml.token_type), llama.cpp's numbering. */
enum st_token_type {
	ST_TOKEN_NORMAL = 1,
	ST_TOKEN_UNKNOWN = 2,
	ST_TOKEN_CONTROL = 3,
	ST_TOKEN_USER_DEFINED = 4,
	ST_TOKEN_UNUSED = 5,
	ST_TOKEN_BYTE = 6,
};

typedef struct st_vocab {
	int32_t n;
	char **text;   /* owned, NUL-terminated; NULL for an id nothing names */
	uint32_t *len;
	int32_t *type; /* enum st_token_type */
	float *score;  /* all 0 until a caller sets them */
	/* text -> id, open addressing, -1 free; built by st_vocab_index. */
	int32_t *slots;
	size_t n_slots;
} st_vocab;

/* n ids, none named yet, all NORMAL. false: out of memory. */
bool st_vocab_init(st_vocab *v, int32_t n);
void st_vocab_free(st_vocab *v);

enum st_vocab_set_result {
	ST_VOCAB_SET,      /* named (or already named so) */
	ST_VOCAB_CONFLICT, /* the id already has another text */
	ST_VOCAB_NO_MEMORY,
};

/* Names id (0 <= id < n) text[0 .. len), which holds no NUL. */
enum st_vocab_set_result st_vocab_set(st_vocab *v, int32_t id, const char *text, size_t len);

/* Replaces id's text (which must be set) with text[0 .. len), which holds
 * no NUL. false: out of memory. */
bool st_vocab_rename(st_vocab *v, int32_t id, const char *text, size_t len);

/* Names every unnamed id "[PAD<id>]", type UNUSED, as llama.cpp's converter
 * does. false: out of memory. */
bool st_vocab_fill_holes(st_vocab *v);

/* Indexes every text; where a text has two ids the later wins, as in the
 * core's vocabulary, so that a look-up here finds what the core will.
 * false: out of memory. */
bool st_vocab_index(st_vocab *v);

/* The id whose text is text[0 .. len), or -1 (after st_vocab_index). */
int32_t st_vocab_find(const st_vocab *v, const char *text, size_t len);

#endif
