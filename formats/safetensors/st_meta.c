/* st_meta.c - a growable table of owned metadata values. */
#include "st_meta.h"

#include <stdlib.h>
#include <string.h>

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

/* Not strndup: a value's bytes may hold a NUL (a chat template file). */
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

static loom_meta_kv *find(const st_meta *m, const char *key)
{
	size_t len = strlen(key);
	for (uint64_t i = 0; i < m->n; i++)
		if (m->kv[i].key.len == len && memcmp(m->kv[i].key.data, key, len) == 0)
			return &m->kv[i];
	return NULL;
}

/* Puts v (owned from here on success) under key, replacing and freeing an
 * earlier value only once nothing can fail, so that a failure leaves the
 * table as it was. */
static bool store(st_meta *m, const char *key, loom_meta_value v)
{
	loom_meta_kv *e = find(m, key);
	if (e != NULL) {
		free_value(&e->value);
		e->value = v;
		return true;
	}
	if (m->n == m->cap) {
		uint64_t cap = m->cap ? m->cap * 2 : 32;
		loom_meta_kv *kv = realloc(m->kv, cap * sizeof(*kv));
		if (kv == NULL)
			return false;
		m->kv = kv;
		m->cap = cap;
	}
	e = &m->kv[m->n];
	char *name = strdup(key);
	if (name == NULL)
		return false;
	*e = (loom_meta_kv){.key = {.len = strlen(key), .data = name}, .value = v};
	m->n++;
	return true;
}

/* Zeroed whole, as a reader may look at more of the union than was set. */
static loom_meta_value blank(loom_meta_type type)
{
	loom_meta_value v;
	memset(&v, 0, sizeof(v));
	v.type = type;
	return v;
}

bool st_meta_set_string(st_meta *m, const char *key, const char *s, size_t len)
{
	loom_meta_value v = blank(LOOM_META_STRING);
	if (!copy_string(&v.v.s, s, len))
		return false;
	if (store(m, key, v))
		return true;
	free_value(&v);
	return false;
}

bool st_meta_set_int(st_meta *m, const char *key, int64_t x)
{
	loom_meta_value v = blank(LOOM_META_I64);
	v.v.i = x;
	return store(m, key, v);
}

bool st_meta_set_float(st_meta *m, const char *key, double x)
{
	loom_meta_value v = blank(LOOM_META_F64);
	v.v.f = x;
	return store(m, key, v);
}

bool st_meta_set_bool(st_meta *m, const char *key, bool x)
{
	loom_meta_value v = blank(LOOM_META_BOOL);
	v.v.b = x;
	return store(m, key, v);
}

bool st_meta_set_array(st_meta *m, const char *key, loom_meta_type elem, const void *data,
		       uint64_t count)
{
	size_t size = loom_meta_elem_size(elem);
	if (size == 0 || count > SIZE_MAX / size)
		return false;
	void *copy = malloc(count ? count * size : 1);
	if (copy == NULL)
		return false;
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
	loom_meta_value v = blank(LOOM_META_ARRAY);
	v.elem_type = elem;
	v.count = count;
	v.v.array = copy;
	if (store(m, key, v))
		return true;
	free_value(&v);
	return false;
}

const loom_meta_value *st_meta_get(const st_meta *m, const char *key)
{
	const loom_meta_kv *e = find(m, key);
	return e != NULL ? &e->value : NULL;
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
