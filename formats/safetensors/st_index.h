/* st_index.h - model.safetensors.index.json: which shard file holds each
 * tensor of a checkpoint split over several files. */
#ifndef LOOM_ST_INDEX_H
#define LOOM_ST_INDEX_H

#include "loom/plugin_api.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct st_index_entry {
	char *tensor;
	int shard; /* into st_index.shards */
} st_index_entry;

/* Owns every string it holds. */
typedef struct st_index {
	char **shards; /* the distinct shard file names, sorted */
	int n_shards;
	st_index_entry *entries; /* "weight_map", in the file's order */
	uint64_t n_entries;
} st_index;

/* Reads the index at path: a JSON object whose "weight_map" maps tensor
 * names to shard file names in the index's directory (a plain file name:
 * no '/', not starting with '.'). false (with *out empty) after
 * host->set_error naming path. */
bool st_index_load(const loom_host *host, const char *path, st_index *out);
void st_index_free(st_index *idx);

#endif
