/* config.h - plugins.yaml: which plugins exist, where, and how one is chosen. */
#ifndef LOOM_CONFIG_H
#define LOOM_CONFIG_H

#include "loom.h"

#include <stdbool.h>

typedef struct loom_plugin_config {
	char *name;
	char *file;
	int line; /* of the entry in plugins.yaml, for messages */
	bool optional; /* a missing file is expected (a plugin not built here) */
	int n_options;
	char **option_keys;
	char **option_values;
} loom_plugin_config;

typedef struct loom_config {
	char *path;
	char *dir; /* directory of path: relative entries are relative to it */
	char **search_path;
	int n_search_path;
	char **arch_path;
	int n_arch_path;
	char *backend; /* "auto" or a backend name */
	loom_plugin_config *backends;
	int n_backends;
	loom_plugin_config *formats;
	int n_formats;
} loom_config;

/* Reads plugins.yaml; errors (LOOM_ERR_CONFIG) name the file and line. */
loom_status loom_config_load(const char *path, loom_config *out);
void loom_config_free(loom_config *cfg);

/* dir/rel, or rel itself if it is absolute; malloc'd. */
char *loom_path_join(const char *dir, const char *rel);

#endif
