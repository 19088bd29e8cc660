/* st_index.c - reading a sharded checkpoint's index. */
#include "st_index.h"
#include "st_json.h"

#include <stdlib.h>
#include <string.h>

/* A shard is named relative to the index's directory and may not leave it
 * (or name the directory itself, or a hidden file). */
static bool plain_file_name(const char *s)
{
	return s[0] != '\0' && s[0] != '.' && strchr(s, '/') == NULL;
}

static int by_string(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The weight_map's values, each checked, sorted and made distinct into
 * idx->shards. */
static bool collect_shards(const loom_host *host, const char *path, const cJSON *map,
			   st_index *idx)
{
	const char **names = malloc(idx->n_entries * sizeof(*names));
	const cJSON *item;
	uint64_t n = 0;
	bool ok = false;

	if (names == NULL) {
		host->set_error("%s: out of memory", path);
		return false;
	}
	cJSON_ArrayForEach(item, map) {
		if (!cJSON_IsString(item)) {
			host->set_error("%s: weight_map: tensor " ST_NAME_FMT
					": the shard is not a string",
					path, item->string);
			goto out;
		}
		if (!plain_file_name(item->valuestring)) {
			host->set_error("%s: weight_map: tensor " ST_NAME_FMT ": shard " ST_NAME_FMT
					" is not a file name in the index's directory",
					path, item->string, item->valuestring);
			goto out;
		}
		names[n++] = item->valuestring;
	}
	qsort(names, n, sizeof(*names), by_string);
	idx->shards = malloc(n * sizeof(*idx->shards));
	if (idx->shards == NULL) {
		host->set_error("%s: out of memory", path);
		goto out;
	}
	for (uint64_t i = 0; i < n; i++) {
		if (i > 0 && strcmp(names[i], names[i - 1]) == 0)
			continue;
		idx->shards[idx->n_shards] = strdup(names[i]);
		if (idx->shards[idx->n_shards] == NULL) {
			host->set_error("%s: out of memory", path);
			goto out;
		}
		idx->n_shards++;
	}
	ok = true;
out:
	free(names);
	return ok;
}

static bool collect_entries(const loom_host *host, const char *path, const cJSON *map,
			    st_index *idx)
{
	const cJSON *item;
	uint64_t i = 0;

	idx->entries = calloc(idx->n_entries, sizeof(*idx->entries));
	if (idx->entries == NULL) {
		host->set_error("%s: out of memory", path);
		return false;
	}
	cJSON_ArrayForEach(item, map) {
		const char *shard = item->valuestring;
		char **found = bsearch(&shard, idx->shards, (size_t)idx->n_shards,
				       sizeof(*idx->shards), by_string);

		idx->entries[i].shard = (int)(found - idx->shards);
		idx->entries[i].tensor = strdup(item->string);
		if (idx->entries[i].tensor == NULL) {
			host->set_error("%s: out of memory", path);
			return false;
		}
		i++;
	}
	return true;
}

bool st_index_load(const loom_host *host, const char *path, st_index *out)
{
	cJSON *root = st_json_load(host, path, NULL);
	const cJSON *map;
	bool ok = false;

	memset(out, 0, sizeof(*out));
	if (root == NULL)
		return false;
	map = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
	if (!cJSON_IsObject(root)) {
		host->set_error("%s: the index is not a JSON object", path);
	} else if (!cJSON_IsObject(map)) {
		host->set_error("%s: \"weight_map\" is %s", path,
				map == NULL ? "missing" : "not a JSON object");
	} else if ((out->n_entries = (uint64_t)cJSON_GetArraySize(map)) == 0) {
		host->set_error("%s: \"weight_map\" lists no tensors", path);
	} else {
		ok = collect_shards(host, path, map, out) && collect_entries(host, path, map, out);
	}
	cJSON_Delete(root);
	if (!ok)
		st_index_free(out);
	return ok;
}

void st_index_free(st_index *idx)
{
	for (int i = 0; i < idx->n_shards; i++)
		free(idx->shards[i]);
	free(idx->shards);
	for (uint64_t i = 0; i < idx->n_entries && idx->entries != NULL; i++)
		free(idx->entries[i].tensor);
	free(idx->entries);
	memset(idx, 0, sizeof(*idx));
}
