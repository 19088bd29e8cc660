/* gguf_names.c - a set of names, to find duplicate keys and tensor names. */
#include "gguf_names.h"

#include <stdlib.h>
#include <string.h>

/* FNV-1a: short, and good enough for names that are not chosen to collide
 * (a hostile file can only slow the check down, not break it). */
static uint64_t name_hash(const loom_string *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (uint64_t i = 0; i < s->len; i++) {
		h ^= (unsigned char)s->data[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static bool name_eq(const loom_string *a, const loom_string *b)
{
	return a->len == b->len && memcmp(a->data, b->data, a->len) == 0;
}

bool gguf_name_set_init(gguf_name_set *set, uint64_t n)
{
	uint64_t cap = 16;

	/* At most half full, so probes stay short and always find a free slot. */
	while (cap / 2 < n) {
		if (cap > UINT64_MAX / 2 / sizeof(*set->slots))
			return false;
		cap *= 2;
	}
	set->slots = calloc(cap, sizeof(*set->slots));
	set->mask = cap - 1;
	return set->slots != NULL;
}

void gguf_name_set_free(gguf_name_set *set)
{
	free(set->slots);
	set->slots = NULL;
}

bool gguf_name_set_add(gguf_name_set *set, const loom_string *name)
{
	uint64_t i = name_hash(name) & set->mask;

	while (set->slots[i] != NULL) {
		if (name_eq(set->slots[i], name))
			return false;
		i = (i + 1) & set->mask;
	}
	set->slots[i] = name;
	return true;
}
