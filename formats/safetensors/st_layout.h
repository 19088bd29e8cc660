/* st_layout.h - which files make a checkpoint: a Hugging Face directory
 * (config.json, model.safetensors or a shard index, tokenizer files), or a
 * path to one of its weight files. */
#ifndef LOOM_ST_LAYOUT_H
#define LOOM_ST_LAYOUT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#define ST_CONFIG_FILE "config.json"
#define ST_SINGLE_FILE "model.safetensors"
#define ST_INDEX_FILE "model.safetensors.index.json"
#define ST_INDEX_SUFFIX ".safetensors.index.json"

typedef struct st_layout {
	char dir[PATH_MAX];     /* where config.json and the tokenizer files are */
	char weights[PATH_MAX]; /* the one safetensors file, or the index */
	bool sharded;           /* weights is an index */
} st_layout;

/* The layout for a path given to open: a directory holding
 * model.safetensors.index.json (preferred) or model.safetensors; a
 * *.safetensors.index.json file; any other file is taken for a safetensors
 * file. Whether the files are sound is open's business. false, with a
 * reason in why, if path is neither or too long. */
bool st_layout_find(const char *path, st_layout *out, char *why, size_t why_size);

/* Is path named as a shard index (*.safetensors.index.json)? */
bool st_layout_is_index(const char *path);

/* "<dir>/<name>" into buf of PATH_MAX bytes; false if it does not fit. */
bool st_layout_join(char *buf, const char *dir, const char *name);

#endif
