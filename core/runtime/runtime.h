/* runtime.h - the runtime object: configuration, plugins, the chosen backend. */
#ifndef LOOM_RUNTIME_H
#define LOOM_RUNTIME_H

#include "loom/plugin_api.h"
#include "runtime/config.h"
#include "runtime/registry.h"

#include <pthread.h>

typedef struct loom_backend {
	const loom_plugin *plugin;
	const loom_backend_vtable *vt;
	void *ctx;
	/* One compute at a time: contexts of different threads share it. */
	pthread_mutex_t lock;
} loom_backend;

struct loom_runtime {
	loom_config config;
	loom_registry registry;
	loom_backend backend;
	int n_threads;
	char **arch_dirs; /* where contracts are looked for, in order */
	int n_arch_dirs;
};

#endif
