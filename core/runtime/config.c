/* config.c - plugins.yaml: which plugins exist, where, and how one is chosen. */
#include "runtime/config.h"

#include "runtime/error.h"
#include "runtime/yaml_doc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *loom_path_join(const char *dir, const char *rel)
{
	if (rel[0] == '/' || dir == NULL || dir[0] == '\0')
		return strdup(rel);
	size_t n = strlen(dir) + strlen(rel) + 2;
	char *p = malloc(n);
	if (p != NULL)
		snprintf(p, n, "%s/%s", dir, rel);
	return p;
}

static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (slash == NULL)
		return strdup(".");
	if (slash == path)
		return strdup("/");
	return strndup(path, (size_t)(slash - path));
}

static loom_status get_text(loom_yaml *y, yaml_node_t *node, const char *what, char **out)
{
	loom_status st = loom_yaml_expect(y, node, YAML_SCALAR_NODE, LOOM_ERR_CONFIG, what);
	if (st != LOOM_OK)
		return st;
	*out = strdup(loom_yaml_scalar(node));
	return *out != NULL ? LOOM_OK : loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
}

static loom_status parse_path_list(loom_yaml *y, yaml_node_t *node, const char *what,
				   char ***out, int *n_out)
{
	loom_status st = loom_yaml_expect(y, node, YAML_SEQUENCE_NODE, LOOM_ERR_CONFIG, what);
	if (st != LOOM_OK)
		return st;
	size_t n = (size_t)(node->data.sequence.items.top - node->data.sequence.items.start);
	*out = calloc(n + 1, sizeof(char *));
	if (*out == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	loom_yaml_for_each_item(y, node, item) {
		st = get_text(y, loom_yaml_node(y, *item), what, &(*out)[*n_out]);
		if (st != LOOM_OK)
			return st;
		(*n_out)++;
	}
	return LOOM_OK;
}

static loom_status parse_options(loom_yaml *y, yaml_node_t *node, loom_plugin_config *pc)
{
	loom_status st = loom_yaml_expect(y, node, YAML_MAPPING_NODE, LOOM_ERR_CONFIG, "options");
	if (st != LOOM_OK)
		return st;
	size_t n = (size_t)(node->data.mapping.pairs.top - node->data.mapping.pairs.start);
	pc->option_keys = calloc(n + 1, sizeof(char *));
	pc->option_values = calloc(n + 1, sizeof(char *));
	if (pc->option_keys == NULL || pc->option_values == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	loom_yaml_for_each_pair(y, node, pair) {
		int i = pc->n_options;
		st = get_text(y, loom_yaml_node(y, pair->key), "an option name", &pc->option_keys[i]);
		if (st == LOOM_OK)
			st = get_text(y, loom_yaml_node(y, pair->value), "an option value",
				      &pc->option_values[i]);
		if (st != LOOM_OK)
			return st;
		pc->n_options++;
	}
	return LOOM_OK;
}

static loom_status parse_plugin(loom_yaml *y, yaml_node_t *node, const char *list,
				loom_plugin_config *pc)
{
	static const char *const keys[] = {"name", "file", "optional", "options", NULL};
	char where[64];
	snprintf(where, sizeof(where), "an entry of %s", list);
	loom_status st = loom_yaml_check_keys(y, node, keys, LOOM_ERR_CONFIG, where);
	if (st != LOOM_OK)
		return st;
	pc->line = loom_yaml_line(node);
	yaml_node_t *name = loom_yaml_get(y, node, "name");
	yaml_node_t *file = loom_yaml_get(y, node, "file");
	yaml_node_t *options = loom_yaml_get(y, node, "options");
	yaml_node_t *optional = loom_yaml_get(y, node, "optional");
	if (name == NULL || file == NULL)
		return loom_error(LOOM_ERR_CONFIG, "%s:%d: %s needs both 'name' and 'file'", y->path,
				  pc->line, where);
	st = get_text(y, name, "name", &pc->name);
	if (st == LOOM_OK)
		st = get_text(y, file, "file", &pc->file);
	if (st == LOOM_OK && optional != NULL)
		st = loom_yaml_get_bool(y, optional, LOOM_ERR_CONFIG, "optional", &pc->optional);
	if (st == LOOM_OK && options != NULL)
		st = parse_options(y, options, pc);
	return st;
}

static loom_status parse_plugin_list(loom_yaml *y, yaml_node_t *node, const char *list,
				     loom_plugin_config **out, int *n_out)
{
	loom_status st = loom_yaml_expect(y, node, YAML_SEQUENCE_NODE, LOOM_ERR_CONFIG, list);
	if (st != LOOM_OK)
		return st;
	size_t n = (size_t)(node->data.sequence.items.top - node->data.sequence.items.start);
	*out = calloc(n + 1, sizeof(loom_plugin_config));
	if (*out == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	loom_yaml_for_each_item(y, node, item) {
		yaml_node_t *entry = loom_yaml_node(y, *item);
		st = parse_plugin(y, entry, list, &(*out)[*n_out]);
		(*n_out)++;
		if (st != LOOM_OK)
			return st;
		for (int i = 0; i < *n_out - 1; i++)
			if (strcmp((*out)[i].name, (*out)[*n_out - 1].name) == 0)
				return loom_error(LOOM_ERR_CONFIG, "%s:%d: plugin '%s' is listed twice",
						  y->path, loom_yaml_line(entry), (*out)[i].name);
	}
	return LOOM_OK;
}

static loom_status parse_root(loom_yaml *y, loom_config *cfg)
{
	static const char *const keys[] = {"search_path", "arch_path", "backend", "backends", "formats", NULL};
	yaml_node_t *root = loom_yaml_root(y);
	loom_status st = loom_yaml_check_keys(y, root, keys, LOOM_ERR_CONFIG, "plugins.yaml");
	if (st != LOOM_OK)
		return st;
	yaml_node_t *n;
	if ((n = loom_yaml_get(y, root, "search_path")) != NULL &&
	    (st = parse_path_list(y, n, "search_path", &cfg->search_path, &cfg->n_search_path)) != LOOM_OK)
		return st;
	if ((n = loom_yaml_get(y, root, "arch_path")) != NULL &&
	    (st = parse_path_list(y, n, "arch_path", &cfg->arch_path, &cfg->n_arch_path)) != LOOM_OK)
		return st;
	if ((n = loom_yaml_get(y, root, "backend")) != NULL) {
		if ((st = get_text(y, n, "backend", &cfg->backend)) != LOOM_OK)
			return st;
		if (cfg->backend[0] == '\0')
			return loom_error(LOOM_ERR_CONFIG, "%s:%d: backend is empty (auto or a backend name)", y->path,
					  loom_yaml_line(n));
	} else if ((cfg->backend = strdup("auto")) == NULL) {
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	}
	if ((n = loom_yaml_get(y, root, "backends")) != NULL &&
	    (st = parse_plugin_list(y, n, "backends", &cfg->backends, &cfg->n_backends)) != LOOM_OK)
		return st;
	if ((n = loom_yaml_get(y, root, "formats")) != NULL &&
	    (st = parse_plugin_list(y, n, "formats", &cfg->formats, &cfg->n_formats)) != LOOM_OK)
		return st;
	if (cfg->n_backends == 0)
		return loom_error(LOOM_ERR_CONFIG, "%s: no backends are listed", y->path);
	if (cfg->n_formats == 0)
		return loom_error(LOOM_ERR_CONFIG, "%s: no formats are listed", y->path);
	for (int i = 0; i < cfg->n_backends; i++)
		for (int j = 0; j < cfg->n_formats; j++)
			if (strcmp(cfg->backends[i].name, cfg->formats[j].name) == 0)
				return loom_error(LOOM_ERR_CONFIG, "%s:%d: '%s' is both a backend and a format", y->path,
						  cfg->formats[j].line, cfg->formats[j].name);
	return LOOM_OK;
}

loom_status loom_config_load(const char *path, loom_config *out)
{
	loom_yaml y;
	memset(out, 0, sizeof(*out));
	loom_status st = loom_yaml_load(path, LOOM_ERR_CONFIG, &y);
	if (st != LOOM_OK)
		return st;
	out->path = strdup(path);
	out->dir = dir_of(path);
	if (out->path == NULL || out->dir == NULL)
		st = loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	else
		st = parse_root(&y, out);
	loom_yaml_free(&y);
	if (st != LOOM_OK)
		loom_config_free(out);
	return st;
}

/* Lists are allocated one longer than needed, so they end with NULL even
 * when parsing stopped half-way. */
static void free_strings(char **list)
{
	for (int i = 0; list != NULL && list[i] != NULL; i++)
		free(list[i]);
	free(list);
}

static void free_plugins(loom_plugin_config *list, int n)
{
	for (int i = 0; i < n; i++) {
		free(list[i].name);
		free(list[i].file);
		free_strings(list[i].option_keys);
		free_strings(list[i].option_values);
	}
	free(list);
}

void loom_config_free(loom_config *cfg)
{
	free(cfg->path);
	free(cfg->dir);
	free_strings(cfg->search_path);
	free_strings(cfg->arch_path);
	free(cfg->backend);
	free_plugins(cfg->backends, cfg->n_backends);
	free_plugins(cfg->formats, cfg->n_formats);
	memset(cfg, 0, sizeof(*cfg));
}
