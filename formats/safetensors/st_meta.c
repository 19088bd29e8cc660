/* st_meta.c - a growable table of owned metadata values. */
#include "st_meta.h"

#include <stdlib.h>
#include <string.h>

static size_t elem_size(loom_meta_type t)
{
	switch (t) {
	case LOOM_META_U8: case LOOM_META_I8: case LOOM_META_BOOL: return 1;
	case LOOM_META_U16: case LOOM_META_I16: return 2;
	case LOOM_META_U32: case LOOM_META_I32: case LOOM_META_F32: return 4;
	case LOOM_META_U64: case LOOM_META_I64: case LOOM_META_F64: return 8;
	case LOOM_META_STRING: return sizeof(loom_string);
	case LOOM_META_ARRAY: break;
	}
	return 0;
}

static void free_value(loom_meta_value *v)
{
	if (v->type == LOOM_META_STRING) {
		free((char *)v->v.s.data);
	} else if (v->type == LOOM_META_ARRAY) {
		if (v->elem_type == LOOM_META_STRING)
			for (uint64_t i = 0; i < v->count; i++)
				free((char *)((const loom_string *)v->v.array)[i].data);
		free((void *)v->v.array);
	}
}

static bool copy_string(loom_string *dst, const char *s, size_t len)
{
	char *p = malloc(len + 1);
	if (p == NULL)
		return false;
	memcpy(p, s, len);
	p[len] = '\0';
	dst->data = p;
	dst->len = len;
	return true;
}

/* The slot for key: its old value freed, or a new entry. */
static loom_meta_value *slot(st_meta *m, const char *key)
{
	size_t len = strlen(key);
	for (uint64_t i = 0; i < m->n; i++) {
		if (m->kv[i].key.len == len && memcmp(m->kv[i].key.data, key, len) == 0) {
			free_value(&m->kv[i].value);
			memset(&m->kv[i].value, 0, sizeof(m->kv[i].value));
			return &m->kv[i].value;
		}
	}
	if (m->n == m->cap) {
		uint64_t cap = m->cap ? m->cap * 2 : 32;
		loom_meta_kv *kv = realloc(m->kv, cap * sizeof(*kv));
		if (kv == NULL)
			return NULL;
		m->kv = kv;
		m->cap = cap;
	}
	loom_meta_kv *e = &m->kv[m->n];
	memset(e, 0, sizeof(*e));
	if (!copy_string(&e->key, key, len))
		return NULL;
	m->n++;
	return &e->value;
}

bool st_meta_set_string(st_meta *m, const char *key, const char *s, size_t len)
{
	loom_meta_value *v = slot(m, key);
	if (v == NULL || !copy_string(&v->v.s, s, len))
		return false;
	v->type = LOOM_META_STRING;
	return true;
}

bool st_meta_set_int(st_meta *m, const char *key, int64_t x)
{
	loom_meta_value *v = slot(m, key);
	if (v == NULL)
		return false;
	v->type = LOOM_META_I64;
	v->v.i = x;
	return true;
}

bool st_meta_set_float(st_meta *m, const char *key, double x)
{
	loom_meta_value *v = slot(m, key);
	if (v == NULL)
		return false;
	v->type = LOOM_META_F64;
	v->v.f = x;
	return true;
}

bool st_meta_set_bool(st_meta *m, const char *key, bool x)
{
	loom_meta_value *v = slot(m, key);
	if (v == NULL)
		return false;
	v->type = LOOM_META_BOOL;
	v->v.b = x;
	return true;
}

bool st_meta_set_array(st_meta *m, const char *key, loom_meta_type elem, const void *data,
		       uint64_t count)
{
	size_t size = elem_size(elem);
	if (size == 0 || count > SIZE_MAX / size)
		return false;
	loom_meta_value *v = slot(m, key);
	void *copy = malloc(count ? count * size : 1);
	if (v == NULL || copy == NULL) {
		free(copy);
		return false;
	}
	if (elem == LOOM_META_STRING) {
		const loom_string *src = data;
		loom_string *dst = copy;
		for (uint64_t i = 0; i < count; i++) {
			if (!copy_string(&dst[i], src[i].data, src[i].len)) {
				while (i-- > 0)
					free((char *)dst[i].data);
				free(copy);
				return false;
			}
		}
	} else if (count > 0) {
		memcpy(copy, data, count * size);
	}
	v->type = LOOM_META_ARRAY;
	v->elem_type = elem;
	v->count = count;
	v->v.array = copy;
	return true;
}

const loom_meta_value *st_meta_get(const st_meta *m, const char *key)
{
	size_t len = strlen(key);
	for (uint64_t i = 0; i < m->n; i++)
		if (m->kv[i].key.len == len && memcmp(m->kv[i].key.data, key, len) == 0)
			return &m->kv[i].value;
	return NULL;
}

void st_meta_free(st_meta *m)
{
	for (uint64_t i = 0; i < m->n; i++) {
		free((char *)m->kv[i].key.data);
		free_value(&m->kv[i].value);
	}
	free(m->kv);
	memset(m, 0, sizeof(*m));
}
