/* model_info.c - what a loaded model says about itself: sizes, metadata,
 * tensors, vocabulary. */
#include "model/model.h"

#include "model/meta.h"
#include "runtime/appendf.h"
#include "runtime/error.h"
#include "runtime/struct_size.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

const char *loom_model_architecture(const loom_model *m)
{
	return m->arch;
}

const char *loom_model_format(const loom_model *m)
{
	return m->file->format;
}

int32_t loom_model_n_vocab(const loom_model *m)
{
	if (m->hp.n_vocab > 0)
		return (int32_t)m->hp.n_vocab;
	return m->vocab != NULL ? loom_vocab_n_tokens(m->vocab) : 0;
}

int32_t loom_model_n_ctx_train(const loom_model *m)
{
	return (int32_t)m->hp.n_ctx_train;
}

int32_t loom_model_n_embd(const loom_model *m)
{
	return (int32_t)m->hp.n_embd;
}

int32_t loom_model_n_layer(const loom_model *m)
{
	return (int32_t)m->hp.n_layer;
}

uint64_t loom_model_size(const loom_model *m)
{
	uint64_t total = 0;
	for (uint64_t i = 0; i < m->file->n_tensors; i++)
		total += m->file->tensors[i].n_bytes;
	return total;
}

uint64_t loom_model_n_params(const loom_model *m)
{
	uint64_t total = 0;
	for (uint64_t i = 0; i < m->file->n_tensors; i++) {
		const loom_file_tensor *t = &m->file->tensors[i];
		uint64_t n = 1;
		for (int d = 0; d < t->n_dims; d++)
			n *= (uint64_t)t->ne[d];
		total += n;
	}
	return total;
}

size_t loom_model_meta_count(const loom_model *m)
{
	return (size_t)m->file->n_meta;
}

const char *loom_model_meta_key(const loom_model *m, size_t index)
{
	static _Thread_local char key[512];
	if (index >= m->file->n_meta)
		return NULL;
	loom_string k = m->file->meta[index].key;
	snprintf(key, sizeof(key), "%.*s", (int)(k.len < sizeof(key) ? k.len : sizeof(key) - 1), k.data);
	return key;
}

static void put_scalar(char *buf, size_t size, size_t *len, loom_meta_type type, const void *p)
{
	switch (type) {
	case LOOM_META_U8: loom_appendf(buf, size, len, "%u", *(const uint8_t *)p); break;
	case LOOM_META_I8: loom_appendf(buf, size, len, "%d", *(const int8_t *)p); break;
	case LOOM_META_U16: loom_appendf(buf, size, len, "%u", *(const uint16_t *)p); break;
	case LOOM_META_I16: loom_appendf(buf, size, len, "%d", *(const int16_t *)p); break;
	case LOOM_META_U32: loom_appendf(buf, size, len, "%" PRIu32, *(const uint32_t *)p); break;
	case LOOM_META_I32: loom_appendf(buf, size, len, "%" PRId32, *(const int32_t *)p); break;
	case LOOM_META_U64: loom_appendf(buf, size, len, "%" PRIu64, *(const uint64_t *)p); break;
	case LOOM_META_I64: loom_appendf(buf, size, len, "%" PRId64, *(const int64_t *)p); break;
	case LOOM_META_F32: loom_appendf(buf, size, len, "%g", *(const float *)p); break;
	case LOOM_META_F64: loom_appendf(buf, size, len, "%g", *(const double *)p); break;
	case LOOM_META_BOOL: loom_appendf(buf, size, len, "%s", *(const uint8_t *)p ? "true" : "false"); break;
	case LOOM_META_STRING: {
		const loom_string *s = p;
		loom_appendf(buf, size, len, "\"%.*s\"", (int)(s->len > 200 ? 200 : s->len), s->data);
		if (s->len > 200)
			loom_appendf(buf, size, len, "...");
		break;
	}
	default: loom_appendf(buf, size, len, "?"); break;
	}
}

size_t loom_model_meta_value_str(const loom_model *m, size_t index, char *buf, size_t size)
{
	size_t len = 0;
	if (size > 0)
		buf[0] = '\0';
	if (index >= m->file->n_meta)
		return 0;
	const loom_meta_value *v = &m->file->meta[index].value;
	union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
		uint64_t u64; int64_t i64; float f32; double f64; loom_string s; } x;
	switch (v->type) {
	case LOOM_META_ARRAY: {
		loom_appendf(buf, size, &len, "[%" PRIu64 " x %s]", v->count, loom_meta_type_name(v->elem_type));
		uint64_t shown = v->count < 8 ? v->count : 8;
		for (uint64_t i = 0; i < shown; i++) {
			loom_appendf(buf, size, &len, i ? ", " : " ");
			put_scalar(buf, size, &len, v->elem_type, (const char *)v->v.array + i * loom_meta_elem_size(v->elem_type));
		}
		if (shown < v->count)
			loom_appendf(buf, size, &len, ", ...");
		return len;
	}
	case LOOM_META_U8: x.u8 = (uint8_t)v->v.u; break;
	case LOOM_META_U16: x.u16 = (uint16_t)v->v.u; break;
	case LOOM_META_U32: x.u32 = (uint32_t)v->v.u; break;
	case LOOM_META_U64: x.u64 = v->v.u; break;
	case LOOM_META_I8: x.i8 = (int8_t)v->v.i; break;
	case LOOM_META_I16: x.i16 = (int16_t)v->v.i; break;
	case LOOM_META_I32: x.i32 = (int32_t)v->v.i; break;
	case LOOM_META_I64: x.i64 = v->v.i; break;
	case LOOM_META_F32: x.f32 = (float)v->v.f; break;
	case LOOM_META_F64: x.f64 = v->v.f; break;
	case LOOM_META_BOOL: x.u8 = v->v.b; break;
	case LOOM_META_STRING: x.s = v->v.s; break;
	}
	put_scalar(buf, size, &len, v->type, &x);
	return len;
}

size_t loom_model_tensor_count(const loom_model *m)
{
	return (size_t)m->file->n_tensors;
}

loom_status loom_model_tensor_info_sized(const loom_model *m, size_t index, loom_tensor_info *out, size_t size)
{
	static _Thread_local char name[512];
	if (m == NULL || out == NULL || index >= m->file->n_tensors)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "tensor index %zu out of range", index);
	const loom_file_tensor *t = &m->file->tensors[index];
	snprintf(name, sizeof(name), "%.*s", (int)(t->name.len < sizeof(name) ? t->name.len : sizeof(name) - 1),
		 t->name.data);
	loom_tensor_info info = {
		.name = name,
		.dtype = t->dtype,
		.n_dims = t->n_dims,
		.n_bytes = t->n_bytes,
		.file_offset = t->file_offset,
	};
	memcpy(info.ne, t->ne, sizeof(info.ne));
	return loom_struct_out(&loom_tensor_info_desc, out, size, &info);
}
