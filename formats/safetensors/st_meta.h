/* st_meta.h - the metadata table a safetensors checkpoint presents to the
 * core: config.json's values and the tokenizer files, under the GGUF key
 * names the core reads (general.*, tokenizer.ggml.*) or config.json's own. */
#ifndef LOOM_ST_META_H
#define LOOM_ST_META_H

#include "loom/plugin_api.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Owns every key, string and array it holds. */
typedef struct st_meta {
	loom_meta_kv *kv;
	uint64_t n, cap;
} st_meta;

/* Each setter copies its arguments and replaces an earlier value of the
 * same key. false: out of memory. */
bool st_meta_set_string(st_meta *m, const char *key, const char *s, size_t len);
bool st_meta_set_int(st_meta *m, const char *key, int64_t v);
bool st_meta_set_float(st_meta *m, const char *key, double v);
bool st_meta_set_bool(st_meta *m, const char *key, bool v);
/* count elements of elem (not ARRAY): loom_string for STRING, uint8_t for
 * BOOL, the C type otherwise. */
bool st_meta_set_array(st_meta *m, const char *key, loom_meta_type elem, const void *data,
		       uint64_t count);

/* The value under key, or NULL. */
const loom_meta_value *st_meta_get(const st_meta *m, const char *key);

void st_meta_free(st_meta *m);

#endif
