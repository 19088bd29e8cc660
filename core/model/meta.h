/* meta.h - typed look-ups in a model file's metadata. */
#ifndef LOOM_META_H
#define LOOM_META_H

#include "loom/plugin_api.h"

/* The value stored under key, or NULL. */
const loom_meta_value *loom_meta_find(const loom_model_file *file, const char *key);

/* Integer value of any integer type (or bool) under key. NOT_FOUND if absent,
 * BAD_FORMAT (with a message naming the key) if of another type or out of
 * int64 range. */
loom_status loom_meta_get_int(const loom_model_file *file, const char *key, int64_t *out);
/* Float value of a float or integer type under key. */
loom_status loom_meta_get_float(const loom_model_file *file, const char *key, double *out);
loom_status loom_meta_get_bool(const loom_model_file *file, const char *key, bool *out);
/* String under key; *out points into the file (not NUL-terminated). */
loom_status loom_meta_get_string(const loom_model_file *file, const char *key, loom_string *out);
/* Array under key with elements of elem_type. */
loom_status loom_meta_get_array(const loom_model_file *file, const char *key,
				loom_meta_type elem_type, const void **data, uint64_t *count);

/* True if s equals the NUL-terminated c. */
bool loom_string_eq(loom_string s, const char *c);
/* A malloc'd NUL-terminated copy (NULL on allocation failure). */
char *loom_string_dup(loom_string s);

const char *loom_meta_type_name(loom_meta_type type);

#endif
