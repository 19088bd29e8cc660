/* gguf_writer.c - builds GGUF files for tests. */
#include "gguf_writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_ALIGNMENT 32

/* A growable byte string: how values are serialized before layout. */
typedef struct bytes {
	uint8_t *p;
	size_t len, cap;
} bytes;

typedef struct writer_kv {
	char *key;
	uint32_t type;
	bytes value; /* the value as it appears after the type field */
} writer_kv;

typedef struct writer_tensor {
	char *name;
	loom_dtype dtype;
	int n_dims;
	int64_t ne[LOOM_MAX_DIMS];
	uint8_t *data;
	uint64_t n_bytes;
} writer_tensor;

struct gguf_writer {
	uint32_t version;
	uint32_t alignment;
	writer_kv *kv;
	size_t n_kv, cap_kv;
	writer_tensor *tensors;
	size_t n_tensors, cap_tensors;
};

static _Noreturn void die(const char *what)
{
	fprintf(stderr, "gguf_writer: %s\n", what);
	abort();
}

static void *xrealloc(void *p, size_t size)
{
	p = realloc(p, size > 0 ? size : 1);
	if (p == NULL)
		die("out of memory");
	return p;
}

static char *xstrdup(const char *s)
{
	size_t n;

	if (s == NULL)
		die("NULL name");
	n = strlen(s) + 1;
	return memcpy(xrealloc(NULL, n), s, n);
}

/* Room for one more of n elements of size in *items (capacity *cap). */
static void *grow(void *items, size_t n, size_t *cap, size_t size)
{
	if (n < *cap)
		return items;
	*cap = *cap ? *cap * 2 : 8;
	return xrealloc(items, *cap * size);
}

static void put(bytes *b, const void *src, size_t n)
{
	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2;
		b->p = xrealloc(b->p, b->cap);
	}
	memcpy(b->p + b->len, src, n);
	b->len += n;
}

static void put_u32(bytes *b, uint32_t v)
{
	put(b, &v, sizeof(v));
}

static void put_u64(bytes *b, uint64_t v)
{
	put(b, &v, sizeof(v));
}

static void put_string(bytes *b, const char *s)
{
	size_t n = strlen(s);

	put_u64(b, n);
	put(b, s, n);
}

static uint64_t align_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

gguf_writer *gguf_writer_create(void)
{
	gguf_writer *w = xrealloc(NULL, sizeof(*w));

	memset(w, 0, sizeof(*w));
	w->version = 3;
	w->alignment = DEFAULT_ALIGNMENT;
	return w;
}

void gguf_writer_free(gguf_writer *w)
{
	if (w == NULL)
		return;
	for (size_t i = 0; i < w->n_kv; i++) {
		free(w->kv[i].key);
		free(w->kv[i].value.p);
	}
	for (size_t i = 0; i < w->n_tensors; i++) {
		free(w->tensors[i].name);
		free(w->tensors[i].data);
	}
	free(w->kv);
	free(w->tensors);
	free(w);
}

void gguf_writer_set_version(gguf_writer *w, uint32_t version)
{
	w->version = version;
}

/* Appends a key with an empty value and returns it for the caller to fill. */
static writer_kv *new_kv(gguf_writer *w, const char *key, uint32_t type)
{
	writer_kv *kv;

	w->kv = grow(w->kv, w->n_kv, &w->cap_kv, sizeof(*w->kv));
	kv = &w->kv[w->n_kv++];
	memset(kv, 0, sizeof(*kv));
	kv->key = xstrdup(key);
	kv->type = type;
	return kv;
}

static size_t add_scalar(gguf_writer *w, const char *key, loom_meta_type type, const void *v,
			 size_t size)
{
	put(&new_kv(w, key, type)->value, v, size);
	return w->n_kv - 1;
}

size_t gguf_writer_add_u8(gguf_writer *w, const char *key, uint8_t v)
{
	return add_scalar(w, key, LOOM_META_U8, &v, sizeof(v));
}

size_t gguf_writer_add_i8(gguf_writer *w, const char *key, int8_t v)
{
	return add_scalar(w, key, LOOM_META_I8, &v, sizeof(v));
}

size_t gguf_writer_add_u16(gguf_writer *w, const char *key, uint16_t v)
{
	return add_scalar(w, key, LOOM_META_U16, &v, sizeof(v));
}

size_t gguf_writer_add_i16(gguf_writer *w, const char *key, int16_t v)
{
	return add_scalar(w, key, LOOM_META_I16, &v, sizeof(v));
}

size_t gguf_writer_add_u32(gguf_writer *w, const char *key, uint32_t v)
{
	return add_scalar(w, key, LOOM_META_U32, &v, sizeof(v));
}

size_t gguf_writer_add_i32(gguf_writer *w, const char *key, int32_t v)
{
	return add_scalar(w, key, LOOM_META_I32, &v, sizeof(v));
}

size_t gguf_writer_add_f32(gguf_writer *w, const char *key, float v)
{
	return add_scalar(w, key, LOOM_META_F32, &v, sizeof(v));
}

size_t gguf_writer_add_bool(gguf_writer *w, const char *key, bool v)
{
	uint8_t b = v;

	return add_scalar(w, key, LOOM_META_BOOL, &b, sizeof(b));
}

size_t gguf_writer_add_u64(gguf_writer *w, const char *key, uint64_t v)
{
	return add_scalar(w, key, LOOM_META_U64, &v, sizeof(v));
}

size_t gguf_writer_add_i64(gguf_writer *w, const char *key, int64_t v)
{
	return add_scalar(w, key, LOOM_META_I64, &v, sizeof(v));
}

size_t gguf_writer_add_f64(gguf_writer *w, const char *key, double v)
{
	return add_scalar(w, key, LOOM_META_F64, &v, sizeof(v));
}

size_t gguf_writer_add_string(gguf_writer *w, const char *key, const char *s)
{
	if (s == NULL)
		die("NULL string value");
	put_string(&new_kv(w, key, LOOM_META_STRING)->value, s);
	return w->n_kv - 1;
}

/* Bytes of one array element of a number type; 0 for the others. */
static size_t number_size(loom_meta_type type)
{
	switch (type) {
	case LOOM_META_U8:
	case LOOM_META_I8:
	case LOOM_META_BOOL:
		return 1;
	case LOOM_META_U16:
	case LOOM_META_I16:
		return 2;
	case LOOM_META_U32:
	case LOOM_META_I32:
	case LOOM_META_F32:
		return 4;
	case LOOM_META_U64:
	case LOOM_META_I64:
	case LOOM_META_F64:
		return 8;
	case LOOM_META_STRING:
	case LOOM_META_ARRAY:
		break;
	}
	return 0;
}

size_t gguf_writer_add_array(gguf_writer *w, const char *key, loom_meta_type elem_type,
			     const void *values, uint64_t count)
{
	size_t size = number_size(elem_type);
	bytes *b;

	if (size == 0)
		die("gguf_writer_add_array: element type is not a number or bool");
	if (values == NULL && count > 0)
		die("gguf_writer_add_array: NULL values");
	b = &new_kv(w, key, LOOM_META_ARRAY)->value;
	put_u32(b, elem_type);
	put_u64(b, count);
	if (elem_type == LOOM_META_BOOL) {
		for (uint64_t i = 0; i < count; i++) {
			uint8_t v = ((const bool *)values)[i];

			put(b, &v, 1);
		}
	} else if (count > 0) {
		put(b, values, count * size);
	}
	return w->n_kv - 1;
}

size_t gguf_writer_add_string_array(gguf_writer *w, const char *key,
				    const char *const *values, uint64_t count)
{
	bytes *b;

	if (values == NULL && count > 0)
		die("gguf_writer_add_string_array: NULL values");
	b = &new_kv(w, key, LOOM_META_ARRAY)->value;
	put_u32(b, LOOM_META_STRING);
	put_u64(b, count);
	for (uint64_t i = 0; i < count; i++) {
		if (values[i] == NULL)
			die("gguf_writer_add_string_array: NULL string");
		put_string(b, values[i]);
	}
	return w->n_kv - 1;
}

void gguf_writer_set_alignment(gguf_writer *w, uint32_t alignment)
{
	if (alignment == 0 || (alignment & (alignment - 1)) != 0)
		die("gguf_writer_set_alignment: not a nonzero power of two");
	gguf_writer_add_u32(w, "general.alignment", alignment);
	w->alignment = alignment;
}

uint64_t gguf_tensor_n_bytes(loom_dtype dtype, int n_dims, const int64_t *ne)
{
	loom_dtype_traits l = loom_dtype_traits_of(dtype);
	uint64_t n_bytes;

	if (l.name == NULL || n_dims < 1 || n_dims > LOOM_MAX_DIMS || ne == NULL ||
	    ne[0] < 1 || ne[0] % l.block != 0)
		return 0;
	if (__builtin_mul_overflow((uint64_t)(ne[0] / l.block), l.block_bytes, &n_bytes))
		return 0;
	for (int d = 1; d < n_dims; d++) {
		if (ne[d] < 1 || __builtin_mul_overflow(n_bytes, (uint64_t)ne[d], &n_bytes))
			return 0;
	}
	return n_bytes;
}

size_t gguf_writer_add_tensor(gguf_writer *w, const char *name, loom_dtype dtype, int n_dims,
			      const int64_t *ne, const void *data)
{
	uint64_t n_bytes = gguf_tensor_n_bytes(dtype, n_dims, ne);
	writer_tensor *t;

	if (n_bytes == 0)
		die("gguf_writer_add_tensor: unknown type or a shape that does not fit it");
	w->tensors = grow(w->tensors, w->n_tensors, &w->cap_tensors, sizeof(*w->tensors));
	t = &w->tensors[w->n_tensors++];
	memset(t, 0, sizeof(*t));
	t->name = xstrdup(name);
	t->dtype = dtype;
	t->n_dims = n_dims;
	for (int d = 0; d < LOOM_MAX_DIMS; d++)
		t->ne[d] = d < n_dims ? ne[d] : 1;
	t->n_bytes = n_bytes;
	t->data = xrealloc(NULL, n_bytes);
	if (data != NULL)
		memcpy(t->data, data, n_bytes);
	else
		memset(t->data, 0, n_bytes);
	return w->n_tensors - 1;
}

void *gguf_writer_tensor_data(gguf_writer *w, size_t tensor)
{
	if (tensor >= w->n_tensors)
		die("gguf_writer_tensor_data: no such tensor");
	return w->tensors[tensor].data;
}

/* ---- layout -------------------------------------------------------------- */

static uint64_t kv_bytes(const writer_kv *kv)
{
	return 8 + strlen(kv->key) + 4 + kv->value.len;
}

static uint64_t info_bytes(const writer_tensor *t)
{
	return 8 + strlen(t->name) + 4 + 8 * (uint64_t)t->n_dims + 4 + 8;
}

uint64_t gguf_writer_kv_offset(const gguf_writer *w, size_t kv)
{
	uint64_t pos = GGUF_HEADER_BYTES;

	if (kv >= w->n_kv)
		die("gguf_writer_kv_offset: no such key");
	for (size_t i = 0; i < kv; i++)
		pos += kv_bytes(&w->kv[i]);
	return pos;
}

uint64_t gguf_writer_kv_value_offset(const gguf_writer *w, size_t kv)
{
	return gguf_writer_kv_offset(w, kv) + 8 + strlen(w->kv[kv].key) + 4;
}

/* Where tensor info `tensor` starts; with tensor == n_tensors, where the
 * infos end. */
static uint64_t info_offset(const gguf_writer *w, size_t tensor)
{
	uint64_t pos = GGUF_HEADER_BYTES;

	for (size_t i = 0; i < w->n_kv; i++)
		pos += kv_bytes(&w->kv[i]);
	for (size_t i = 0; i < tensor; i++)
		pos += info_bytes(&w->tensors[i]);
	return pos;
}

uint64_t gguf_writer_tensor_field_offset(const gguf_writer *w, size_t tensor,
					 gguf_tensor_field field)
{
	const writer_tensor *t;
	uint64_t pos;

	if (tensor >= w->n_tensors)
		die("gguf_writer_tensor_field_offset: no such tensor");
	t = &w->tensors[tensor];
	pos = info_offset(w, tensor);
	switch (field) {
	case GGUF_FIELD_NAME:
		return pos;
	case GGUF_FIELD_N_DIMS:
		return pos + 8 + strlen(t->name);
	case GGUF_FIELD_NE:
		return pos + 8 + strlen(t->name) + 4;
	case GGUF_FIELD_TYPE:
		return pos + 8 + strlen(t->name) + 4 + 8 * (uint64_t)t->n_dims;
	case GGUF_FIELD_OFFSET:
		return pos + 8 + strlen(t->name) + 4 + 8 * (uint64_t)t->n_dims + 4;
	}
	die("gguf_writer_tensor_field_offset: unknown field");
}

uint64_t gguf_writer_data_section_offset(const gguf_writer *w)
{
	return align_up(info_offset(w, w->n_tensors), w->alignment);
}

uint64_t gguf_writer_tensor_data_offset(const gguf_writer *w, size_t tensor)
{
	uint64_t rel = 0;

	if (tensor >= w->n_tensors)
		die("gguf_writer_tensor_data_offset: no such tensor");
	for (size_t i = 0; i < tensor; i++)
		rel += align_up(w->tensors[i].n_bytes, w->alignment);
	return rel;
}

/* ---- output -------------------------------------------------------------- */

static void put_tensor_info(bytes *b, const writer_tensor *t, uint64_t rel_offset)
{
	put_string(b, t->name);
	put_u32(b, (uint32_t)t->n_dims);
	for (int d = 0; d < t->n_dims; d++)
		put_u64(b, (uint64_t)t->ne[d]);
	put_u32(b, t->dtype);
	put_u64(b, rel_offset);
}

/* Zeros up to the next multiple of the alignment. */
static void pad(bytes *b, uint32_t alignment)
{
	static const uint8_t zeros[64];
	uint64_t n = align_up(b->len, alignment) - b->len;

	while (n > 0) {
		size_t k = n < sizeof(zeros) ? n : sizeof(zeros);

		put(b, zeros, k);
		n -= k;
	}
}

uint8_t *gguf_writer_build(const gguf_writer *w, size_t *size)
{
	bytes b = {0};
	uint64_t rel = 0;

	put(&b, "GGUF", 4);
	put_u32(&b, w->version);
	put_u64(&b, w->n_tensors);
	put_u64(&b, w->n_kv);
	for (size_t i = 0; i < w->n_kv; i++) {
		put_string(&b, w->kv[i].key);
		put_u32(&b, w->kv[i].type);
		put(&b, w->kv[i].value.p, w->kv[i].value.len);
	}
	for (size_t i = 0; i < w->n_tensors; i++) {
		put_tensor_info(&b, &w->tensors[i], rel);
		rel += align_up(w->tensors[i].n_bytes, w->alignment);
	}
	pad(&b, w->alignment);
	for (size_t i = 0; i < w->n_tensors; i++) {
		put(&b, w->tensors[i].data, w->tensors[i].n_bytes);
		pad(&b, w->alignment);
	}
	*size = b.len;
	return b.p;
}

bool gguf_writer_write(const gguf_writer *w, const char *path)
{
	size_t size;
	uint8_t *buf = gguf_writer_build(w, &size);
	bool ok = gguf_write_bytes(path, buf, size);

	free(buf);
	return ok;
}

void gguf_poke_u32(uint8_t *buf, uint64_t offset, uint32_t v)
{
	memcpy(buf + offset, &v, sizeof(v));
}

void gguf_poke_u64(uint8_t *buf, uint64_t offset, uint64_t v)
{
	memcpy(buf + offset, &v, sizeof(v));
}

bool gguf_write_bytes(const char *path, const void *data, size_t size)
{
	FILE *f = fopen(path, "wb");
	bool ok;

	if (f == NULL)
		return false;
	ok = fwrite(data, 1, size, f) == size;
	if (fclose(f) != 0)
		ok = false;
	return ok;
}
