/* runtime.c - the runtime object: configuration, plugins, the chosen backend. */
#include "runtime/runtime.h"

#include "runtime/error.h"
#include "runtime/install_paths.h"
#include "runtime/log.h"
#include "runtime/struct_size.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

loom_status loom_runtime_params_init(loom_runtime_params *p, size_t size)
{
	static const loom_runtime_params defaults = {
		.size = sizeof(loom_runtime_params),
		.plugins_file = NULL,
		.backend = NULL,
		.arch_dir = NULL,
		.n_threads = 0,
		.log_level = LOOM_LOG_WARN,
		.log_fn = NULL,
		.log_user = NULL,
		.compute_on = LOOM_COMPUTE_ANY,
	};
	return loom_params_init(&loom_runtime_params_desc, p, size, &defaults);
}

static const char *nonempty(const char *s)
{
	return s != NULL && s[0] != '\0' ? s : NULL;
}

/* plugins.yaml: the caller's, $LOOM_PLUGINS, the one beside libloom.so (a
 * build tree), else the installed one. */
static char *find_plugins_file(const loom_runtime_params *params)
{
	const char *given = nonempty(params->plugins_file);
	if (given == NULL)
		given = nonempty(getenv("LOOM_PLUGINS"));
	if (given != NULL)
		return strdup(given);
	char *lib = loom_library_dir();
	char *beside = lib != NULL ? loom_path_join(lib, "plugins.yaml") : NULL;
	free(lib);
	if (beside != NULL && access(beside, R_OK) == 0)
		return beside;
	free(beside);
	return loom_installed_path(LOOM_INSTALLED_PLUGINS_FILE);
}

static loom_status add_arch_dir(loom_runtime *rt, char *dir)
{
	if (dir == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	rt->arch_dirs[rt->n_arch_dirs++] = dir;
	return LOOM_OK;
}

static loom_status collect_arch_dirs(loom_runtime *rt, const loom_runtime_params *params)
{
	const loom_config *cfg = &rt->config;
	rt->arch_dirs = calloc((size_t)cfg->n_arch_path + 2, sizeof(char *));
	if (rt->arch_dirs == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	loom_status st = LOOM_OK;
	if (nonempty(params->arch_dir) != NULL)
		st = add_arch_dir(rt, strdup(params->arch_dir));
	for (int i = 0; st == LOOM_OK && i < cfg->n_arch_path; i++)
		st = add_arch_dir(rt, loom_path_join(cfg->dir, cfg->arch_path[i]));
	if (st == LOOM_OK)
		st = add_arch_dir(rt, loom_installed_path(LOOM_INSTALLED_ARCH_DIR));
	return st;
}

static loom_status start_backend(loom_runtime *rt, loom_plugin *p)
{
	loom_backend_options opts = {
		.struct_size = sizeof(opts),
		.n_threads = rt->n_threads,
		.device = 0,
		.n_options = p->config->n_options,
		.option_keys = (const char *const *)p->config->option_keys,
		.option_values = (const char *const *)p->config->option_values,
	};
	if (loom_backend_start(&rt->backend, p, &opts) != LOOM_OK) {
		snprintf(p->why, sizeof(p->why), "init failed: %s",
			 loom_last_error()[0] ? loom_last_error() : "no reason given");
		loom_warn("backend '%s' %s", p->name, p->why);
		return LOOM_ERR_BACKEND;
	}
	p->chosen = true;
	p->why[0] = '\0';
	return LOOM_OK;
}

static int by_score_desc(const void *a, const void *b)
{
	const loom_plugin *pa = *(loom_plugin *const *)a, *pb = *(loom_plugin *const *)b;
	return pb->score - pa->score;
}

/* A backend with a device of its own describes it (device_info); one that
 * computes in host memory has nothing to describe. */
static loom_compute_on computes_on(const loom_plugin *p)
{
	return loom_vtable_on_device(p->desc->vtable) ? LOOM_COMPUTE_DEVICE : LOOM_COMPUTE_HOST;
}

static const char *compute_on_name(loom_compute_on where)
{
	return where == LOOM_COMPUTE_DEVICE ? "on a device of its own (a GPU)" : "in host memory (a CPU backend)";
}

/* A forced backend is used or the runtime fails: no silent substitute.
 * Under auto, candidates are tried best score first. */
static loom_status choose_backend(loom_runtime *rt, const char *forced, loom_compute_on where)
{
	loom_registry *reg = &rt->registry;
	loom_plugin *cands[reg->n_plugins + 1];
	size_t n = 0;
	const loom_plugin *refused = NULL;   /* one that computes there but refused this machine */

	for (size_t i = 0; i < reg->n_plugins; i++) {
		loom_plugin *p = &reg->plugins[i];
		if (p->kind != LOOM_PLUGIN_BACKEND)
			continue;
		if (forced != NULL && strcmp(p->name, forced) != 0) {
			if (p->desc != NULL && p->score > 0)
				snprintf(p->why, sizeof(p->why), "not chosen: backend '%s' was asked for", forced);
			continue;
		}
		if (forced != NULL && (p->desc == NULL || p->score <= 0))
			return loom_error(LOOM_ERR_PLUGIN, "backend '%s' cannot be used: %s", forced, p->why);
		if (p->desc != NULL && p->score <= 0 && refused == NULL && where != LOOM_COMPUTE_ANY &&
		    computes_on(p) == where)
			refused = p;
		if (p->desc == NULL || p->score <= 0)
			continue;
		if (where != LOOM_COMPUTE_ANY && computes_on(p) != where) {
			if (forced != NULL)
				return loom_error(LOOM_ERR_PLUGIN, "backend '%s' computes %s; one that computes %s was asked for",
						  forced, compute_on_name(computes_on(p)), compute_on_name(where));
			snprintf(p->why, sizeof(p->why), "not chosen: it computes %s; one that computes %s was asked for",
				 compute_on_name(computes_on(p)), compute_on_name(where));
			continue;
		}
		cands[n++] = p;
	}
	if (forced != NULL && n == 0)
		return loom_error(LOOM_ERR_PLUGIN, "backend '%s' is not listed in %s", forced, rt->config.path);
	if (n == 0 && where != LOOM_COMPUTE_ANY)
		return loom_error(LOOM_ERR_PLUGIN, "no usable backend computes %s among those in %s%s%s%s%s (see `loom info --plugins`)",
				  compute_on_name(where), rt->config.path, refused != NULL ? "; " : "",
				  refused != NULL ? refused->name : "", refused != NULL ? ": " : "",
				  refused != NULL ? refused->why : "");
	qsort(cands, n, sizeof(cands[0]), by_score_desc);
	for (size_t i = 0; i < n; i++) {
		if (rt->backend.plugin == NULL) {
			start_backend(rt, cands[i]);
			continue;
		}
		snprintf(cands[i]->why, sizeof(cands[i]->why), "not chosen: '%s' scores higher (%d > %d)",
			 rt->backend.plugin->name, rt->backend.plugin->score, cands[i]->score);
	}
	if (rt->backend.plugin == NULL && forced != NULL)
		return loom_error(LOOM_ERR_PLUGIN, "backend '%s' cannot be used: %s", forced, cands[0]->why);
	if (rt->backend.plugin == NULL)
		return loom_error(LOOM_ERR_PLUGIN, "no usable backend among those in %s (see `loom info --plugins`)",
				  rt->config.path);
	loom_info("backend: %s (score %d, %d threads)", rt->backend.plugin->name,
		  rt->backend.plugin->score, rt->n_threads);
	return LOOM_OK;
}

loom_status loom_runtime_create(const loom_runtime_params *given, loom_runtime **out)
{
	loom_runtime_params p = loom_runtime_default_params();
	const loom_runtime_params *params = &p;
	loom_status st;

	if (out == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_runtime_create: out is NULL");
	*out = NULL;
	if ((st = loom_params_in(&loom_runtime_params_desc, &p, given)) != LOOM_OK)
		return st;
	loom_log_configure(params->log_level, params->log_fn, params->log_user);
	loom_runtime *rt = calloc(1, sizeof(*rt));
	char *plugins_file = find_plugins_file(params);
	if (rt == NULL || plugins_file == NULL) {
		free(rt);
		free(plugins_file);
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	}
	pthread_mutex_init(&rt->backend.lock, NULL);
	rt->n_threads = params->n_threads > 0 ? params->n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (rt->n_threads <= 0)
		rt->n_threads = 1;

	st = loom_config_load(plugins_file, &rt->config);
	free(plugins_file);
	if (st != LOOM_OK)
		goto fail;
	if ((st = collect_arch_dirs(rt, params)) != LOOM_OK)
		goto fail;
	if ((st = loom_registry_load(&rt->registry, &rt->config)) != LOOM_OK)
		goto fail;
	const char *forced = nonempty(params->backend);
	if (forced == NULL)
		forced = nonempty(getenv("LOOM_BACKEND"));
	if (forced == NULL && strcmp(rt->config.backend, "auto") != 0)
		forced = rt->config.backend;
	if ((st = choose_backend(rt, forced, params->compute_on)) != LOOM_OK)
		goto fail;
	*out = rt;
	return LOOM_OK;
fail:
	loom_runtime_free(rt);
	return st;
}

void loom_runtime_free(loom_runtime *rt)
{
	if (rt == NULL)
		return;
	loom_backend_stop(&rt->backend);
	pthread_mutex_destroy(&rt->backend.lock);
	loom_registry_free(&rt->registry);
	for (int i = 0; i < rt->n_arch_dirs; i++)
		free(rt->arch_dirs[i]);
	free(rt->arch_dirs);
	loom_config_free(&rt->config);
	free(rt);
}

size_t loom_runtime_plugin_count(const loom_runtime *rt)
{
	return rt != NULL ? rt->registry.n_plugins : 0;
}

loom_status loom_runtime_plugin_info_sized(const loom_runtime *rt, size_t index, loom_plugin_info *out, size_t size)
{
	if (rt == NULL || out == NULL || index >= rt->registry.n_plugins)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "plugin index %zu out of range", index);
	const loom_plugin *p = &rt->registry.plugins[index];
	const loom_plugin_info info = {
		.name = p->name,
		.path = p->path,
		.version = p->desc != NULL ? p->desc->version : NULL,
		.kind = p->kind,
		.score = p->score,
		.loaded = p->desc != NULL,
		.chosen = p->chosen,
		.why = p->why,
	};
	return loom_struct_out(&loom_plugin_info_desc, out, size, &info);
}

const char *loom_runtime_backend_name(const loom_runtime *rt)
{
	return rt != NULL && rt->backend.plugin != NULL ? rt->backend.plugin->name : NULL;
}

loom_status loom_runtime_device_sized(const loom_runtime *rt, loom_device_info *out, size_t size)
{
	if (rt == NULL || out == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_runtime_device: runtime and out are required");
	loom_status st = loom_struct_check(&loom_device_info_desc, size);
	loom_device_info info;
	if (st == LOOM_OK)
		st = loom_backend_device(&rt->backend, &info);
	if (st == LOOM_OK)
		st = loom_struct_out(&loom_device_info_desc, out, size, &info);
	return st;
}

int loom_runtime_n_threads(const loom_runtime *rt)
{
	return rt != NULL ? rt->n_threads : 0;
}
