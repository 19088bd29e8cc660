/* registry.c - finding, loading, checking and scoring plugins. */
#define _GNU_SOURCE /* RTLD_NODELETE */
#include "runtime/registry.h"

#include "runtime/backend.h"
#include "runtime/error.h"
#include "runtime/format.h"
#include "runtime/install_paths.h"
#include "runtime/log.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *kind_name(loom_plugin_kind kind)
{
	return kind == LOOM_PLUGIN_BACKEND ? "backend" : "format";
}

/* Rejects a plugin: score 0, the reason kept and logged. Broken plugins are
 * warnings; plugins that are merely absent or unusable on this machine are
 * information. */
static void reject(loom_plugin *p, loom_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void reject(loom_plugin *p, loom_log_level level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->why, sizeof(p->why), fmt, ap);
	va_end(ap);
	p->score = 0;
	loom_log(level, "%s plugin '%s' (%s) rejected: %s", kind_name(p->kind), p->name, p->path, p->why);
}

/* The plugin file: relative names are searched for in search_path, then in
 * the installed plugin directory. */
static char *resolve_file(const loom_config *cfg, const char *file)
{
	if (strchr(file, '/') != NULL)
		return loom_path_join(cfg->dir, file);
	for (int i = 0; i < cfg->n_search_path; i++) {
		char *dir = loom_path_join(cfg->dir, cfg->search_path[i]);
		char *path = dir != NULL ? loom_path_join(dir, file) : NULL;
		free(dir);
		if (path != NULL && access(path, F_OK) == 0)
			return path;
		free(path);
	}
	char *dir = loom_installed_path(LOOM_INSTALLED_PLUGIN_DIR);
	char *path = dir != NULL ? loom_path_join(dir, file) : NULL;
	free(dir);
	if (path != NULL && access(path, F_OK) == 0)
		return path;
	free(path);
	return NULL;
}

/* The vtable's size as the plugin declares it, and the size the core needs. */
static bool vtable_too_small(const loom_plugin *p, size_t *have, size_t *need)
{
	*have = *(const uint32_t *)p->desc->vtable; /* struct_size comes first in every vtable */
	*need = p->kind == LOOM_PLUGIN_BACKEND ? LOOM_BACKEND_VTABLE_MIN_SIZE : LOOM_FORMAT_VTABLE_MIN_SIZE;
	return *have < *need;
}

/* The first slot the core calls unconditionally that the plugin lacks, or
 * NULL. Call only once the table is known to be large enough. */
static const char *missing_slot(const loom_plugin *p)
{
	if (p->kind == LOOM_PLUGIN_BACKEND)
		return loom_backend_missing_slot(p->desc->vtable);
	return loom_format_missing_slot(p->desc->vtable);
}

/* dlopen, ABI check, descriptor and vtable checks, probe. */
static void load_plugin(loom_plugin *p)
{
	/* NODELETE: plugin code may outlive the runtime in threads it started
	 * (OpenMP workers and their thread-local destructors). */
	p->lib = dlopen(p->path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (p->lib == NULL) {
		reject(p, LOOM_LOG_WARN, "cannot load: %s", dlerror());
		return;
	}
	loom_plugin_entry_fn entry;
	*(void **)&entry = dlsym(p->lib, LOOM_PLUGIN_ENTRY_SYMBOL);
	if (entry == NULL) {
		reject(p, LOOM_LOG_WARN, "no entry symbol '%s'", LOOM_PLUGIN_ENTRY_SYMBOL);
		return;
	}
	const loom_plugin_desc *desc = entry();
	if (desc == NULL) {
		reject(p, LOOM_LOG_WARN, "entry symbol returned no descriptor");
		return;
	}
	if (desc->abi_version != LOOM_PLUGIN_ABI_VERSION) {
		reject(p, LOOM_LOG_WARN,
		       "incompatible ABI version (plugin: %u, loom: %d): rebuild it against this loom's "
		       "loom/plugin_api.h",
		       desc->abi_version, LOOM_PLUGIN_ABI_VERSION);
		return;
	}
	if (desc->kind != (uint32_t)p->kind) {
		reject(p, LOOM_LOG_WARN, "is not a %s plugin", kind_name(p->kind));
		return;
	}
	if (desc->name == NULL || strcmp(desc->name, p->name) != 0) {
		reject(p, LOOM_LOG_WARN, "calls itself '%s', plugins.yaml says '%s'",
		       desc->name ? desc->name : "(null)", p->name);
		return;
	}
	if (desc->probe == NULL || desc->vtable == NULL) {
		reject(p, LOOM_LOG_WARN, "descriptor lacks %s", desc->probe == NULL ? "probe" : "vtable");
		return;
	}
	p->desc = desc;
	size_t have, need;
	if (vtable_too_small(p, &have, &need)) {
		p->desc = NULL;
		reject(p, LOOM_LOG_WARN, "vtable too old: %zu bytes, loom needs at least %zu", have, need);
		return;
	}
	const char *slot = missing_slot(p);
	if (slot != NULL) {
		p->desc = NULL;
		reject(p, LOOM_LOG_WARN, "vtable slot '%s' is missing", slot);
		return;
	}
	if (p->kind == LOOM_PLUGIN_BACKEND) {
		char why[256] = "";
		p->score = loom_backend_probe(p, why, sizeof(why));
		/* Below 0: the entry itself is wrong (an option), which its
		 * author should hear about; 0: this machine lacks something. */
		if (p->score < 0) {
			reject(p, LOOM_LOG_WARN, "misconfigured in plugins.yaml: %s", why[0] ? why : "probe said no");
			return;
		}
		if (p->score == 0) {
			reject(p, LOOM_LOG_INFO, "unusable on this machine: %s", why[0] ? why : "probe said no");
			return;
		}
	}
	loom_debug("%s plugin '%s' %s loaded from %s", kind_name(p->kind), p->name,
		   desc->version ? desc->version : "", p->path);
}

static loom_status add_plugins(loom_registry *reg, const loom_config *cfg,
			       const loom_plugin_config *list, int n, loom_plugin_kind kind)
{
	for (int i = 0; i < n; i++) {
		loom_plugin *p = &reg->plugins[reg->n_plugins++];
		p->kind = kind;
		p->config = &list[i];
		p->name = strdup(list[i].name);
		p->path = resolve_file(cfg, list[i].file);
		if (p->name == NULL)
			return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
		if (p->path == NULL) {
			p->path = strdup(list[i].file);
			if (p->path == NULL)
				return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
			/* A misspelt file would otherwise cost a backend unnoticed. */
			reject(p, list[i].optional ? LOOM_LOG_INFO : LOOM_LOG_WARN, "file '%s' not found (%s:%d)",
			       list[i].file, cfg->path, list[i].line);
			continue;
		}
		load_plugin(p);
	}
	return LOOM_OK;
}

loom_status loom_registry_load(loom_registry *reg, const loom_config *cfg)
{
	memset(reg, 0, sizeof(*reg));
	reg->plugins = calloc((size_t)(cfg->n_backends + cfg->n_formats), sizeof(loom_plugin));
	if (reg->plugins == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	loom_status st = add_plugins(reg, cfg, cfg->backends, cfg->n_backends, LOOM_PLUGIN_BACKEND);
	if (st == LOOM_OK)
		st = add_plugins(reg, cfg, cfg->formats, cfg->n_formats, LOOM_PLUGIN_FORMAT);
	if (st != LOOM_OK)
		loom_registry_free(reg);
	return st;
}

void loom_registry_free(loom_registry *reg)
{
	for (size_t i = 0; i < reg->n_plugins; i++) {
		loom_plugin *p = &reg->plugins[i];
		if (p->lib != NULL)
			dlclose(p->lib);
		free(p->name);
		free(p->path);
	}
	free(reg->plugins);
	memset(reg, 0, sizeof(*reg));
}
