/* runtime.h - the runtime object: configuration, plugins, the chosen backend. */
#ifndef LOOM_RUNTIME_H
#define LOOM_RUNTIME_H

#include "loom/plugin_api.h"
#include "runtime/backend.h"
#include "runtime/config.h"
#include "runtime/registry.h"

struct loom_runtime {
	loom_config config;
	loom_registry registry;
	loom_backend backend;
	int n_threads;
	char **arch_dirs; /* where contracts are looked for, in order */
	int n_arch_dirs;
};

#endif
