/* registry.h - finding, loading, checking and scoring plugins. */
#ifndef LOOM_REGISTRY_H
#define LOOM_REGISTRY_H

#include "loom/plugin_api.h"
#include "runtime/config.h"

typedef struct loom_plugin {
	char *name;
	char *path; /* resolved file, or the file named in plugins.yaml if not found */
	loom_plugin_kind kind;
	const loom_plugin_config *config;
	void *lib;
	const loom_plugin_desc *desc; /* NULL unless loaded */
	int score;
	bool chosen;
	char why[512];
} loom_plugin;

typedef struct loom_registry {
	loom_plugin *plugins;
	size_t n_plugins;
} loom_registry;

/* Loads every plugin plugins.yaml lists. A plugin that cannot be used is kept
 * in the list with score 0 and the reason in why, and logged once. */
loom_status loom_registry_load(loom_registry *reg, const loom_config *cfg);
void loom_registry_free(loom_registry *reg);

#endif
