/* gguf_write.c - writing a GGUF v3 file: header, key/values, tensor infos,
 * then the tensor data, each tensor aligned to general.alignment. The file
 * is written beside its destination and renamed into place, so a failed
 * write never leaves a half file under the final name. */
#include "gguf_reader.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct gguf_out {
	FILE *f;
	uint64_t pos;
	bool failed;
} gguf_out;

static void put(gguf_out *o, const void *p, size_t n)
{
	if (!o->failed && n > 0 && fwrite(p, 1, n, o->f) != n)
		o->failed = true;
	o->pos += n;
}

static void put_u32(gguf_out *o, uint32_t v)
{
	put(o, &v, sizeof(v));
}

static void put_u64(gguf_out *o, uint64_t v)
{
	put(o, &v, sizeof(v));
}

static void put_string(gguf_out *o, loom_string s)
{
	put_u64(o, s.len);
	put(o, s.data, s.len);
}

static void pad_to(gguf_out *o, uint64_t alignment)
{
	static const char zeros[256];
	uint64_t pad = (alignment - o->pos % alignment) % alignment;
	while (pad > 0) {
		size_t n = pad < sizeof(zeros) ? (size_t)pad : sizeof(zeros);
		put(o, zeros, n);
		pad -= n;
	}
}

/* A widened scalar back in its stored width (little-endian hosts). */
static void put_scalar(gguf_out *o, const loom_meta_value *v)
{
	union { uint8_t u8; uint16_t u16; uint32_t u32; uint64_t u64; float f32; double f64; } x;
	switch (v->type) {
	case LOOM_META_U8: case LOOM_META_I8: x.u8 = (uint8_t)v->v.u; break;
	case LOOM_META_BOOL: x.u8 = v->v.b; break;
	case LOOM_META_U16: case LOOM_META_I16: x.u16 = (uint16_t)v->v.u; break;
	case LOOM_META_U32: case LOOM_META_I32: x.u32 = (uint32_t)v->v.u; break;
	case LOOM_META_F32: x.f32 = (float)v->v.f; break;
	case LOOM_META_F64: x.f64 = v->v.f; break;
	default: x.u64 = v->v.u; break;
	}
	put(o, &x, loom_meta_elem_size(v->type));
}

static bool put_value(gguf_out *o, const loom_meta_value *v)
{
	put_u32(o, (uint32_t)v->type);
	if (v->type == LOOM_META_STRING) {
		put_string(o, v->v.s);
	} else if (v->type == LOOM_META_ARRAY) {
		put_u32(o, (uint32_t)v->elem_type);
		put_u64(o, v->count);
		if (v->elem_type == LOOM_META_STRING) {
			const loom_string *s = v->v.array;
			for (uint64_t i = 0; i < v->count; i++)
				put_string(o, s[i]);
		} else if (loom_meta_elem_size(v->elem_type) != 0) {
			put(o, v->v.array, (size_t)v->count * loom_meta_elem_size(v->elem_type));
		} else {
			return false;
		}
	} else if (loom_meta_elem_size(v->type) != 0) {
		put_scalar(o, v);
	} else {
		return false;
	}
	return true;
}

static uint32_t alignment_of(const loom_model_file *content)
{
	for (uint64_t i = 0; i < content->n_meta; i++) {
		const loom_meta_kv *kv = &content->meta[i];
		if (kv->key.len == strlen(GGUF_ALIGNMENT_KEY) &&
		    memcmp(kv->key.data, GGUF_ALIGNMENT_KEY, kv->key.len) == 0 && kv->value.type == LOOM_META_U32 &&
		    kv->value.v.u != 0 && (kv->value.v.u & (kv->value.v.u - 1)) == 0)
			return (uint32_t)kv->value.v.u;
	}
	return GGUF_DEFAULT_ALIGNMENT;
}

static const char *write_all(gguf_out *o, const loom_model_file *content)
{
	const uint64_t align = alignment_of(content);
	put(o, GGUF_MAGIC, 4);
	put_u32(o, 3);
	put_u64(o, content->n_tensors);
	put_u64(o, content->n_meta);
	for (uint64_t i = 0; i < content->n_meta; i++) {
		put_string(o, content->meta[i].key);
		if (!put_value(o, &content->meta[i].value))
			return "a metadata value of an unknown type";
	}
	uint64_t offset = 0;
	for (uint64_t i = 0; i < content->n_tensors; i++) {
		const loom_file_tensor *t = &content->tensors[i];
		if (t->n_dims < 1 || t->n_dims > LOOM_MAX_DIMS || (t->data == NULL && t->n_bytes > 0))
			return "a tensor without dimensions or data";
		put_string(o, t->name);
		put_u32(o, (uint32_t)t->n_dims);
		for (int d = 0; d < t->n_dims; d++)
			put_u64(o, (uint64_t)t->ne[d]);
		put_u32(o, (uint32_t)t->dtype);
		put_u64(o, offset);
		offset += (t->n_bytes + align - 1) / align * align;
	}
	pad_to(o, align);
	for (uint64_t i = 0; i < content->n_tensors; i++) {
		put(o, content->tensors[i].data, content->tensors[i].n_bytes);
		pad_to(o, align);
	}
	return o->failed ? strerror(errno) : NULL;
}

loom_status gguf_write(const loom_host *host, const char *path, const loom_model_file *content)
{
	size_t n = strlen(path) + 8;
	char *tmp = malloc(n);
	if (tmp == NULL) {
		host->set_error("%s: out of memory", path);
		return LOOM_ERR_NO_MEMORY;
	}
	snprintf(tmp, n, "%s.part", path);
	gguf_out o = {.f = fopen(tmp, "wb")};
	if (o.f == NULL) {
		host->set_error("%s: cannot create: %s", tmp, strerror(errno));
		free(tmp);
		return LOOM_ERR_IO;
	}
	const char *why = write_all(&o, content);
	if (fclose(o.f) != 0 && why == NULL)
		why = strerror(errno);
	if (why == NULL && rename(tmp, path) != 0)
		why = strerror(errno);
	if (why != NULL) {
		host->set_error("%s: cannot write: %s", path, why);
		unlink(tmp);
	}
	free(tmp);
	return why == NULL ? LOOM_OK : LOOM_ERR_IO;
}
