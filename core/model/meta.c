/* meta.c - typed look-ups in a model file's metadata. */
#include "model/meta.h"

#include "runtime/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

bool loom_string_eq(loom_string s, const char *c)
{
	size_t n = strlen(c);
	return s.len == n && memcmp(s.data, c, n) == 0;
}

char *loom_string_dup(loom_string s)
{
	char *p = malloc(s.len + 1);
	if (p == NULL)
		return NULL;
	memcpy(p, s.data, s.len);
	p[s.len] = '\0';
	return p;
}

const char *loom_meta_type_name(loom_meta_type type)
{
	static const char *const names[] = {
		"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
	};
	if ((unsigned)type < sizeof(names) / sizeof(names[0]))
		return names[type];
	return "unknown";
}

const loom_meta_value *loom_meta_find(const loom_model_file *file, const char *key)
{
	for (uint64_t i = 0; i < file->n_meta; i++)
		if (loom_string_eq(file->meta[i].key, key))
			return &file->meta[i].value;
	return NULL;
}

static loom_status find_or_fail(const loom_model_file *file, const char *key,
				const loom_meta_value **out)
{
	*out = loom_meta_find(file, key);
	if (*out == NULL)
		return loom_error(LOOM_ERR_NOT_FOUND, "metadata key '%s' not found", key);
	return LOOM_OK;
}

static loom_status wrong_type(const char *key, const loom_meta_value *v, const char *want)
{
	return loom_error(LOOM_ERR_BAD_FORMAT, "metadata key '%s' is %s, expected %s", key,
			  loom_meta_type_name(v->type), want);
}

loom_status loom_meta_get_int(const loom_model_file *file, const char *key, int64_t *out)
{
	const loom_meta_value *v;
	loom_status st = find_or_fail(file, key, &v);
	if (st != LOOM_OK)
		return st;
	switch (v->type) {
	case LOOM_META_U8:
	case LOOM_META_U16:
	case LOOM_META_U32:
	case LOOM_META_U64:
		if (v->v.u > (uint64_t)INT64_MAX)
			return loom_error(LOOM_ERR_BAD_FORMAT, "metadata key '%s' is out of range", key);
		*out = (int64_t)v->v.u;
		return LOOM_OK;
	case LOOM_META_I8:
	case LOOM_META_I16:
	case LOOM_META_I32:
	case LOOM_META_I64:
		*out = v->v.i;
		return LOOM_OK;
	case LOOM_META_BOOL:
		*out = v->v.b;
		return LOOM_OK;
	default:
		return wrong_type(key, v, "an integer");
	}
}

loom_status loom_meta_get_float(const loom_model_file *file, const char *key, double *out)
{
	const loom_meta_value *v;
	loom_status st = find_or_fail(file, key, &v);
	if (st != LOOM_OK)
		return st;
	if (v->type == LOOM_META_F32 || v->type == LOOM_META_F64) {
		*out = v->v.f;
		return LOOM_OK;
	}
	int64_t i;
	if (loom_meta_get_int(file, key, &i) == LOOM_OK) {
		*out = (double)i;
		return LOOM_OK;
	}
	return wrong_type(key, v, "a number");
}

loom_status loom_meta_get_bool(const loom_model_file *file, const char *key, bool *out)
{
	const loom_meta_value *v;
	loom_status st = find_or_fail(file, key, &v);
	if (st != LOOM_OK)
		return st;
	if (v->type != LOOM_META_BOOL)
		return wrong_type(key, v, "a bool");
	*out = v->v.b;
	return LOOM_OK;
}

loom_status loom_meta_get_string(const loom_model_file *file, const char *key, loom_string *out)
{
	const loom_meta_value *v;
	loom_status st = find_or_fail(file, key, &v);
	if (st != LOOM_OK)
		return st;
	if (v->type != LOOM_META_STRING)
		return wrong_type(key, v, "a string");
	*out = v->v.s;
	return LOOM_OK;
}

loom_status loom_meta_get_array(const loom_model_file *file, const char *key,
				loom_meta_type elem_type, const void **data, uint64_t *count)
{
	const loom_meta_value *v;
	loom_status st = find_or_fail(file, key, &v);
	if (st != LOOM_OK)
		return st;
	if (v->type != LOOM_META_ARRAY || v->elem_type != elem_type)
		return loom_error(LOOM_ERR_BAD_FORMAT, "metadata key '%s' is not an array of %s", key,
				  loom_meta_type_name(elem_type));
	*data = v->v.array;
	*count = v->count;
	return LOOM_OK;
}
