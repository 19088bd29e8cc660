/* st_writer.c - safetensors files and checkpoint directories for tests. */
#include "st_writer.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	const char *name;
	size_t size;
} dtype_sizes[] = {
	{"F64", 8},     {"I64", 8},     {"U64", 8},     {"C64", 8},     {"F32", 4},
	{"I32", 4},     {"U32", 4},     {"F16", 2},     {"BF16", 2},    {"I16", 2},
	{"U16", 2},     {"I8", 1},      {"U8", 1},      {"BOOL", 1},    {"F8_E4M3", 1},
	{"F8_E5M2", 1}, {"F8_E8M0", 1},
};

static void die(const char *what)
{
	fprintf(stderr, "st_writer: %s\n", what);
	abort();
}

size_t st_dtype_size(const char *dtype)
{
	for (size_t i = 0; i < sizeof(dtype_sizes) / sizeof(dtype_sizes[0]); i++)
		if (strcmp(dtype, dtype_sizes[i].name) == 0)
			return dtype_sizes[i].size;
	return 0;
}

uint64_t st_tensor_bytes(const st_tensor_spec *t)
{
	uint64_t n = st_dtype_size(t->dtype);

	if (n == 0 || t->n_dims < 0 || t->n_dims > 4)
		die("a tensor with an unknown dtype or more than 4 dimensions");
	for (int d = 0; d < t->n_dims; d++)
		n *= (uint64_t)t->shape[d];
	return n;
}

static bool write_all(FILE *f, const void *data, size_t size)
{
	return size == 0 || fwrite(data, 1, size, f) == size;
}

static bool write_zeros(FILE *f, uint64_t size)
{
	static const char zeros[4096];

	while (size > 0) {
		size_t n = size < sizeof(zeros) ? (size_t)size : sizeof(zeros);

		if (!write_all(f, zeros, n))
			return false;
		size -= n;
	}
	return true;
}

/* Length, padded header, data: the one way every file here is written. */
static bool write_parts(const char *path, const char *header, const st_tensor_spec *t,
			const int *order, int n, const void *raw, size_t raw_size)
{
	size_t len = strlen(header), padded = (len + 7) / 8 * 8;
	uint8_t le[8];
	FILE *f = fopen(path, "wb");
	bool ok;

	if (f == NULL)
		return false;
	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)((uint64_t)padded >> (8 * i));
	ok = write_all(f, le, 8) && write_all(f, header, len);
	for (size_t i = len; i < padded && ok; i++)
		ok = fputc(' ', f) != EOF;
	for (int i = 0; i < n && ok; i++) {
		const st_tensor_spec *s = &t[order[i]];

		ok = s->data != NULL ? write_all(f, s->data, st_tensor_bytes(s))
				     : write_zeros(f, st_tensor_bytes(s));
	}
	if (ok)
		ok = raw != NULL ? write_all(f, raw, raw_size) : write_zeros(f, raw_size);
	return fclose(f) == 0 && ok;
}

static cJSON *checked(cJSON *item)
{
	if (item == NULL)
		die("out of memory");
	return item;
}

static cJSON *tensor_entry(const st_tensor_spec *t, uint64_t begin)
{
	cJSON *entry = checked(cJSON_CreateObject());
	cJSON *shape = checked(cJSON_CreateArray());
	cJSON *offsets = checked(cJSON_CreateArray());

	checked(cJSON_AddStringToObject(entry, "dtype", t->dtype));
	for (int d = 0; d < t->n_dims; d++)
		cJSON_AddItemToArray(shape, checked(cJSON_CreateNumber((double)t->shape[d])));
	cJSON_AddItemToObject(entry, "shape", shape);
	cJSON_AddItemToArray(offsets, checked(cJSON_CreateNumber((double)begin)));
	cJSON_AddItemToArray(offsets,
			     checked(cJSON_CreateNumber((double)(begin + st_tensor_bytes(t)))));
	cJSON_AddItemToObject(entry, "data_offsets", offsets);
	return entry;
}

bool st_write_file(const char *path, const st_tensor_spec *t, int n)
{
	cJSON *root = checked(cJSON_CreateObject());
	cJSON *meta = checked(cJSON_CreateObject());
	int *order = malloc((size_t)(n > 0 ? n : 1) * sizeof(*order));
	uint64_t *begin = malloc((size_t)(n > 0 ? n : 1) * sizeof(*begin));
	uint64_t at = 0;
	int k = 0;
	char *header;
	bool ok;

	if (order == NULL || begin == NULL)
		die("out of memory");
	/* Widest elements first: every tensor then starts on a multiple of its
	 * element size. */
	for (size_t size = 8; size >= 1; size /= 2) {
		for (int i = 0; i < n; i++) {
			if (st_dtype_size(t[i].dtype) != size)
				continue;
			order[k++] = i;
			begin[i] = at;
			at += st_tensor_bytes(&t[i]);
		}
	}
	if (k != n)
		die("a tensor with a dtype of unknown size");
	checked(cJSON_AddStringToObject(meta, "format", "pt"));
	cJSON_AddItemToObject(root, "__metadata__", meta);
	for (int i = 0; i < n; i++)
		cJSON_AddItemToObject(root, t[i].name, tensor_entry(&t[i], begin[i]));
	header = cJSON_PrintUnformatted(root);
	if (header == NULL)
		die("out of memory");
	ok = write_parts(path, header, t, order, n, NULL, 0);
	cJSON_free(header);
	cJSON_Delete(root);
	free(order);
	free(begin);
	return ok;
}

void st_shard_name(char *buf, size_t size, int i, int n_shards)
{
	snprintf(buf, size, "model-%05d-of-%05d.safetensors", i + 1, n_shards);
}

static bool write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	bool ok;

	if (f == NULL)
		return false;
	ok = fputs(text, f) >= 0;
	return fclose(f) == 0 && ok;
}

static bool write_index(const char *dir, const st_tensor_spec *t, int n, int n_shards)
{
	cJSON *root = checked(cJSON_CreateObject());
	cJSON *meta = checked(cJSON_CreateObject());
	cJSON *map = checked(cJSON_CreateObject());
	uint64_t total = 0;
	char path[4096], name[64];
	char *text;
	bool ok;

	for (int i = 0; i < n; i++) {
		total += st_tensor_bytes(&t[i]);
		st_shard_name(name, sizeof(name), (int)((int64_t)i * n_shards / n), n_shards);
		checked(cJSON_AddStringToObject(map, t[i].name, name));
	}
	checked(cJSON_AddNumberToObject(meta, "total_size", (double)total));
	cJSON_AddItemToObject(root, "metadata", meta);
	cJSON_AddItemToObject(root, "weight_map", map);
	text = cJSON_Print(root);
	if (text == NULL)
		die("out of memory");
	snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
	ok = write_text(path, text);
	cJSON_free(text);
	cJSON_Delete(root);
	return ok;
}

bool st_write_sharded(const char *dir, const st_tensor_spec *t, int n, int n_shards)
{
	char path[4096], name[64];
	int first = 0;

	if (n_shards < 1)
		die("a checkpoint of no shards");
	for (int s = 0; s < n_shards; s++) {
		int end = first;

		while (end < n && (int)((int64_t)end * n_shards / n) == s)
			end++;
		st_shard_name(name, sizeof(name), s, n_shards);
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		if (!st_write_file(path, t + first, end - first))
			return false;
		first = end;
	}
	return write_index(dir, t, n, n_shards);
}

bool st_write_raw(const char *path, const char *header, const void *data, size_t data_size)
{
	return write_parts(path, header, NULL, NULL, 0, data, data_size);
}

bool st_write_config(const char *dir, const char *json)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/config.json", dir);
	return write_text(path, json);
}
