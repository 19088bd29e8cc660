/* st_vocab.c - the token table of a tokenizer.json (st_vocab.h). */
#include "st_vocab.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool st_vocab_init(st_vocab *v, int32_t n)
{
	memset(v, 0, sizeof(*v));
	size_t count = n > 0 ? (size_t)n : 1;
	v->n = n;
	v->text = calloc(count, sizeof(*v->text));
	v->len = calloc(count, sizeof(*v->len));
	v->type = malloc(count * sizeof(*v->type));
	v->score = calloc(count, sizeof(*v->score));
	if (v->text == NULL || v->len == NULL || v->type == NULL || v->score == NULL) {
		st_vocab_free(v);
		return false;
	}
	for (int32_t i = 0; i < n; i++)
		v->type[i] = ST_TOKEN_NORMAL;
	return true;
}

void st_vocab_free(st_vocab *v)
{
	if (v->text != NULL)
		for (int32_t i = 0; i < v->n; i++)
			free(v->text[i]);
	free(v->text);
	free(v->len);
	free(v->type);
	free(v->score);
	free(v->slots);
	memset(v, 0, sizeof(*v));
}

enum st_vocab_set_result st_vocab_set(st_vocab *v, int32_t id, const char *text, size_t len)
{
	if (v->text[id] != NULL)
		return v->len[id] == len && memcmp(v->text[id], text, len) == 0 ? ST_VOCAB_SET
										 : ST_VOCAB_CONFLICT;
	if (len > UINT32_MAX || (v->text[id] = strndup(text, len)) == NULL)
		return ST_VOCAB_NO_MEMORY;
	v->len[id] = (uint32_t)len;
	return ST_VOCAB_SET;
}

bool st_vocab_rename(st_vocab *v, int32_t id, const char *text, size_t len)
{
	char *p = len <= UINT32_MAX ? strndup(text, len) : NULL;
	if (p == NULL)
		return false;
	free(v->text[id]);
	v->text[id] = p;
	v->len[id] = (uint32_t)len;
	return true;
}

bool st_vocab_fill_holes(st_vocab *v)
{
	for (int32_t id = 0; id < v->n; id++) {
		char name[32];
		if (v->text[id] != NULL)
			continue;
		int len = snprintf(name, sizeof(name), "[PAD%" PRId32 "]", id);
		if (st_vocab_set(v, id, name, (size_t)len) != ST_VOCAB_SET)
			return false;
		v->type[id] = ST_TOKEN_UNUSED;
	}
	return true;
}

/* FNV-1a, as the core hashes token texts. */
static uint64_t hash_text(const char *text, size_t len)
{
	uint64_t h = 0xcbf29ce484222325u;
	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)text[i];
		h *= 0x100000001b3u;
	}
	return h;
}

static bool text_is(const st_vocab *v, int32_t id, const char *text, size_t len)
{
	return v->len[id] == len && memcmp(v->text[id], text, len) == 0;
}

bool st_vocab_index(st_vocab *v)
{
	size_t n = 16;
	while (n < 2 * (size_t)v->n)
		n *= 2;
	free(v->slots);
	v->slots = malloc(n * sizeof(*v->slots));
	if (v->slots == NULL)
		return false;
	memset(v->slots, 0xff, n * sizeof(*v->slots));
	v->n_slots = n;
	for (int32_t id = 0; id < v->n; id++) {
		if (v->text[id] == NULL)
			continue;
		size_t i = hash_text(v->text[id], v->len[id]) & (n - 1);
		while (v->slots[i] >= 0 && !text_is(v, v->slots[i], v->text[id], v->len[id]))
			i = (i + 1) & (n - 1);
		v->slots[i] = id;
	}
	return true;
}

int32_t st_vocab_find(const st_vocab *v, const char *text, size_t len)
{
	size_t mask = v->n_slots - 1;
	for (size_t i = hash_text(text, len) & mask;; i = (i + 1) & mask) {
		int32_t id = v->slots[i];
		if (id < 0 || text_is(v, id, text, len))
			return id;
	}
}
