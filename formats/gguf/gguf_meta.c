/* gguf_meta.c - the key/value section of a GGUF file. */
#include "gguf_names.h"
#include "gguf_reader.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define N_META_TYPES (LOOM_META_F64 + 1)

/* A scalar's width in the file is loom_meta_elem_size's. */
static const char *const meta_type_names[N_META_TYPES] = {
	[LOOM_META_U8] = "u8",         [LOOM_META_I8] = "i8",
	[LOOM_META_U16] = "u16",       [LOOM_META_I16] = "i16",
	[LOOM_META_U32] = "u32",       [LOOM_META_I32] = "i32",
	[LOOM_META_F32] = "f32",       [LOOM_META_BOOL] = "bool",
	[LOOM_META_STRING] = "string", [LOOM_META_ARRAY] = "array",
	[LOOM_META_U64] = "u64",       [LOOM_META_I64] = "i64",
	[LOOM_META_F64] = "f64",
};

/* A value of type T from possibly unaligned bytes. */
#define LOAD(T, p) ({ T v_; memcpy(&v_, (p), sizeof(v_)); v_; })

static void widen_scalar(loom_meta_type type, const uint8_t *p, loom_meta_value *v)
{
	switch (type) {
	case LOOM_META_U8: v->v.u = p[0]; break;
	case LOOM_META_I8: v->v.i = LOAD(int8_t, p); break;
	case LOOM_META_U16: v->v.u = LOAD(uint16_t, p); break;
	case LOOM_META_I16: v->v.i = LOAD(int16_t, p); break;
	case LOOM_META_U32: v->v.u = LOAD(uint32_t, p); break;
	case LOOM_META_I32: v->v.i = LOAD(int32_t, p); break;
	case LOOM_META_F32: v->v.f = LOAD(float, p); break;
	case LOOM_META_BOOL: v->v.b = p[0] != 0; break;
	case LOOM_META_U64: v->v.u = LOAD(uint64_t, p); break;
	case LOOM_META_I64: v->v.i = LOAD(int64_t, p); break;
	case LOOM_META_F64: v->v.f = LOAD(double, p); break;
	case LOOM_META_STRING:
	case LOOM_META_ARRAY:
		break;
	}
}

static bool read_scalar(gguf_cursor *c, loom_meta_type type, loom_meta_value *v)
{
	const uint8_t *p = gguf_take(c, loom_meta_elem_size(type), meta_type_names[type]);

	if (p == NULL)
		return false;
	v->type = type;
	widen_scalar(type, p, v);
	return true;
}

static bool read_string_array(gguf_cursor *c, loom_meta_value *v)
{
	loom_string *strings = calloc(v->count, sizeof(*strings));

	if (strings == NULL) {
		gguf_fail(c, "out of memory for %" PRIu64 " strings", v->count);
		return false;
	}
	v->v.array = strings;
	for (uint64_t i = 0; i < v->count; i++) {
		if (!gguf_read_string(c, &strings[i], "array string"))
			return false;
	}
	return true;
}

/* Numbers are copied as they lie (the host is little-endian); bools become
 * 0 or 1. */
static bool read_number_array(gguf_cursor *c, loom_meta_value *v)
{
	uint64_t n_bytes = v->count * loom_meta_elem_size(v->elem_type);
	const uint8_t *p = gguf_take(c, n_bytes, "array");
	uint8_t *out;

	if (p == NULL)
		return false;
	out = malloc(n_bytes);
	if (out == NULL) {
		gguf_fail(c, "out of memory for %" PRIu64 " bytes of array", n_bytes);
		return false;
	}
	memcpy(out, p, n_bytes);
	v->v.array = out;
	if (v->elem_type == LOOM_META_BOOL) {
		for (uint64_t i = 0; i < v->count; i++)
			out[i] = out[i] != 0;
	}
	return true;
}

static bool read_array(gguf_cursor *c, loom_meta_value *v)
{
	uint64_t at = c->pos;
	uint32_t elem;
	uint64_t count, elem_min;

	if (!gguf_read_u32(c, &elem, "array element type"))
		return false;
	if (elem == LOOM_META_ARRAY) {
		gguf_fail(c, "nested array at offset %" PRIu64 " is not supported", at);
		return false;
	}
	if (elem >= N_META_TYPES) {
		gguf_fail(c, "unknown array element type %" PRIu32 " at offset %" PRIu64, elem, at);
		return false;
	}
	at = c->pos;
	if (!gguf_read_u64(c, &count, "array count"))
		return false;
	/* A string element takes at least its 8-byte length. */
	elem_min = elem == LOOM_META_STRING ? 8 : loom_meta_elem_size(elem);
	if (count > gguf_left(c) / elem_min) {
		gguf_fail(c, "array count %" PRIu64 " (%s) at offset %" PRIu64
			     " runs past the end of the file (%" PRIu64 " bytes)",
			  count, meta_type_names[elem], at, c->size);
		return false;
	}
	v->type = LOOM_META_ARRAY;
	v->elem_type = elem;
	v->count = count;
	if (count == 0)
		return true;
	if (elem == LOOM_META_STRING)
		return read_string_array(c, v);
	return read_number_array(c, v);
}

static bool read_value(gguf_cursor *c, loom_meta_value *v)
{
	uint64_t at = c->pos;
	uint32_t type;

	if (!gguf_read_u32(c, &type, "value type"))
		return false;
	if (type >= N_META_TYPES) {
		gguf_fail(c, "unknown value type %" PRIu32 " at offset %" PRIu64, type, at);
		return false;
	}
	if (type == LOOM_META_ARRAY)
		return read_array(c, v);
	if (type == LOOM_META_STRING) {
		v->type = LOOM_META_STRING;
		return gguf_read_string(c, &v->v.s, "string");
	}
	return read_scalar(c, type, v);
}

static bool is_alignment_key(loom_string key)
{
	size_t n = strlen(GGUF_ALIGNMENT_KEY);

	return key.len == n && memcmp(key.data, GGUF_ALIGNMENT_KEY, n) == 0;
}

/* general.alignment: a u32, a nonzero power of two. at: offset of its value. */
static bool check_alignment(gguf_cursor *c, const loom_meta_value *v, uint64_t at,
			    uint32_t *alignment)
{
	if (v->type != LOOM_META_U32) {
		gguf_fail(c, "value at offset %" PRIu64 " has type %s, expected u32", at,
			  meta_type_names[v->type]);
		return false;
	}
	if (v->v.u == 0 || (v->v.u & (v->v.u - 1)) != 0) {
		gguf_fail(c, "alignment %" PRIu64 " at offset %" PRIu64
			     " is not a nonzero power of two",
			  v->v.u, at);
		return false;
	}
	*alignment = (uint32_t)v->v.u;
	return true;
}

static bool read_kv(gguf_cursor *c, loom_meta_kv *kv, uint64_t index, gguf_name_set *keys,
		    uint32_t *alignment)
{
	uint64_t at = c->pos;

	gguf_set_where(c, "key #%" PRIu64, index);
	if (!gguf_read_string(c, &kv->key, "key name"))
		return false;
	gguf_set_where_name(c, "key", kv->key);
	if (!gguf_name_set_add(keys, &kv->key)) {
		gguf_fail(c, "duplicate key at offset %" PRIu64, at);
		return false;
	}
	at = c->pos;
	if (!read_value(c, &kv->value))
		return false;
	if (is_alignment_key(kv->key))
		return check_alignment(c, &kv->value, at, alignment);
	return true;
}

bool gguf_parse_meta(gguf_cursor *c, loom_meta_kv *kv, uint64_t n_kv, uint32_t *alignment)
{
	gguf_name_set keys;
	bool ok = true;

	*alignment = GGUF_DEFAULT_ALIGNMENT;
	if (!gguf_name_set_init(&keys, n_kv)) {
		gguf_fail(c, "out of memory for %" PRIu64 " keys", n_kv);
		return false;
	}
	for (uint64_t i = 0; i < n_kv && ok; i++)
		ok = read_kv(c, &kv[i], i, &keys, alignment);
	gguf_name_set_free(&keys);
	return ok;
}

void gguf_free_meta(loom_meta_kv *kv, uint64_t n_kv)
{
	for (uint64_t i = 0; i < n_kv; i++) {
		if (kv[i].value.type == LOOM_META_ARRAY)
			free((void *)kv[i].value.v.array);
	}
}
