/* st_config.c - config.json flattened into the metadata table. */
#include "st_config.h"
#include "st_json.h"
#include "st_layout.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What flattening needs at hand. */
typedef struct st_flatten {
	const loom_host *host;
	const char *path;
	st_meta *meta;
} st_flatten;

static bool out_of_memory(const st_flatten *f)
{
	f->host->set_error("%s: out of memory", f->path);
	return false;
}

static bool exact_int(double x)
{
	return fabs(x) <= (double)ST_MAX_EXACT && x == floor(x);
}

static bool reserved(const char *key)
{
	return strncmp(key, "general.", 8) == 0 || strncmp(key, "tokenizer.", 10) == 0;
}

/* An array of numbers, as I64 if every element is an exact integer. */
static bool put_numbers(const st_flatten *f, const char *key, const cJSON *array, int n)
{
	bool integral = true;
	const cJSON *item;
	int i = 0;
	void *values;
	bool ok;

	cJSON_ArrayForEach(item, array)
		integral = integral && exact_int(item->valuedouble);
	/* int64_t and double are both 8 bytes: one buffer serves either. */
	values = malloc(n > 0 ? (size_t)n * 8 : 1);
	if (values == NULL)
		return out_of_memory(f);
	cJSON_ArrayForEach(item, array) {
		if (integral)
			((int64_t *)values)[i++] = (int64_t)item->valuedouble;
		else
			((double *)values)[i++] = item->valuedouble;
	}
	ok = st_meta_set_array(f->meta, key, integral ? LOOM_META_I64 : LOOM_META_F64, values,
			       (uint64_t)n);
	free(values);
	return ok || out_of_memory(f);
}

static bool put_strings(const st_flatten *f, const char *key, const cJSON *array, int n)
{
	loom_string *values = malloc(n > 0 ? (size_t)n * sizeof(*values) : 1);
	const cJSON *item;
	int i = 0;
	bool ok;

	if (values == NULL)
		return out_of_memory(f);
	cJSON_ArrayForEach(item, array) {
		values[i].data = item->valuestring;
		values[i++].len = strlen(item->valuestring);
	}
	ok = st_meta_set_array(f->meta, key, LOOM_META_STRING, values, (uint64_t)n);
	free(values);
	return ok || out_of_memory(f);
}

/* Arrays of numbers or of strings; an empty array counts as numbers.
 * Mixed arrays and arrays of objects have no metadata type: left out. */
static bool put_array(const st_flatten *f, const char *key, const cJSON *array)
{
	int n = cJSON_GetArraySize(array), n_numbers = 0, n_strings = 0;
	const cJSON *item;

	cJSON_ArrayForEach(item, array) {
		n_numbers += cJSON_IsNumber(item);
		n_strings += cJSON_IsString(item);
	}
	if (n_numbers == n)
		return put_numbers(f, key, array, n);
	if (n_strings == n)
		return put_strings(f, key, array, n);
	return true;
}

static bool flatten(const st_flatten *f, const char *prefix, const cJSON *object);

static bool put(const st_flatten *f, const char *key, const cJSON *item)
{
	bool ok = true;

	if (reserved(key))
		return true;
	if (cJSON_IsBool(item)) {
		ok = st_meta_set_bool(f->meta, key, cJSON_IsTrue(item));
	} else if (cJSON_IsNumber(item)) {
		double x = item->valuedouble;

		ok = exact_int(x) ? st_meta_set_int(f->meta, key, (int64_t)x)
				  : st_meta_set_float(f->meta, key, x);
	} else if (cJSON_IsString(item)) {
		ok = st_meta_set_string(f->meta, key, item->valuestring, strlen(item->valuestring));
	} else if (cJSON_IsArray(item)) {
		return put_array(f, key, item);
	} else if (cJSON_IsObject(item)) {
		return flatten(f, key, item);
	}
	return ok || out_of_memory(f);
}

/* Each member of object under "<prefix>.<name>" (just <name> at the top). */
static bool flatten(const st_flatten *f, const char *prefix, const cJSON *object)
{
	const cJSON *item;

	cJSON_ArrayForEach(item, object) {
		size_t len = (prefix ? strlen(prefix) + 1 : 0) + strlen(item->string) + 1;
		char *key = malloc(len);
		bool ok;

		if (key == NULL)
			return out_of_memory(f);
		if (prefix != NULL)
			snprintf(key, len, "%s.%s", prefix, item->string);
		else
			snprintf(key, len, "%s", item->string);
		ok = put(f, key, item);
		free(key);
		if (!ok)
			return false;
	}
	return true;
}

static bool put_architecture(const st_flatten *f, const cJSON *root)
{
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(root, "model_type");

	if (type == NULL)
		return true;
	if (!cJSON_IsString(type)) {
		f->host->set_error("%s: \"model_type\" is not a string", f->path);
		return false;
	}
	return st_meta_set_string(f->meta, "general.architecture", type->valuestring,
				  strlen(type->valuestring)) ||
	       out_of_memory(f);
}

bool st_config_load(const loom_host *host, const char *dir, st_meta *meta)
{
	char path[PATH_MAX];
	bool missing;
	st_flatten f = {.host = host, .path = path, .meta = meta};
	cJSON *root;
	bool ok;

	if (!st_layout_join(path, dir, ST_CONFIG_FILE)) {
		host->set_error("%s: the path is too long", dir);
		return false;
	}
	root = st_json_load(host, path, &missing);
	if (root == NULL) {
		if (missing)
			host->set_error("%s: no " ST_CONFIG_FILE
					" (a Hugging Face model directory needs one: it names the "
					"architecture and its hyperparameters)",
					dir);
		return false;
	}
	if (!cJSON_IsObject(root)) {
		host->set_error("%s: the top level is not a JSON object", path);
		ok = false;
	} else {
		ok = put_architecture(&f, root) && flatten(&f, NULL, root);
	}
	cJSON_Delete(root);
	return ok;
}
