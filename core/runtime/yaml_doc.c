/* yaml_doc.c - a parsed YAML file with line numbers, for config and contracts. */
#include "runtime/yaml_doc.h"

#include "runtime/error.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

loom_status loom_yaml_load(const char *path, loom_status code, loom_yaml *out)
{
	yaml_parser_t parser;
	loom_status st = LOOM_OK;

	memset(out, 0, sizeof(*out));
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return loom_error(code, "%s: cannot open: %s", path, strerror(errno));
	if (!yaml_parser_initialize(&parser)) {
		fclose(f);
		return loom_error(LOOM_ERR_NO_MEMORY, "%s: cannot create YAML parser", path);
	}
	yaml_parser_set_input_file(&parser, f);
	if (!yaml_parser_load(&parser, &out->doc)) {
		/* An unclosed quote or bracket is noticed far from where it opened. */
		char opened[48] = "";
		if (parser.context != NULL && parser.context_mark.line != parser.problem_mark.line)
			snprintf(opened, sizeof(opened), " started at line %zu", parser.context_mark.line + 1);
		st = loom_error(code, "%s:%zu:%zu: %s%s%s%s", path, parser.problem_mark.line + 1,
				parser.problem_mark.column + 1, parser.problem ? parser.problem : "syntax error",
				parser.context ? " " : "", parser.context ? parser.context : "", opened);
		goto out_parser;
	}
	if (yaml_document_get_root_node(&out->doc) == NULL) {
		yaml_document_delete(&out->doc);
		st = loom_error(code, "%s:1: the file is empty", path);
		goto out_parser;
	}
	out->path = strdup(path);
	if (out->path == NULL) {
		yaml_document_delete(&out->doc);
		st = loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	}
out_parser:
	yaml_parser_delete(&parser);
	fclose(f);
	return st;
}

void loom_yaml_free(loom_yaml *y)
{
	if (y->path == NULL)
		return;
	yaml_document_delete(&y->doc);
	free(y->path);
	y->path = NULL;
}

yaml_node_t *loom_yaml_root(loom_yaml *y)
{
	return yaml_document_get_root_node(&y->doc);
}

int loom_yaml_line(const yaml_node_t *node)
{
	return (int)node->start_mark.line + 1;
}

const char *loom_yaml_scalar(const yaml_node_t *node)
{
	if (node == NULL || node->type != YAML_SCALAR_NODE)
		return NULL;
	return (const char *)node->data.scalar.value;
}

yaml_node_t *loom_yaml_get(loom_yaml *y, yaml_node_t *map, const char *key)
{
	if (map == NULL || map->type != YAML_MAPPING_NODE)
		return NULL;
	loom_yaml_for_each_pair(y, map, pair) {
		const char *k = loom_yaml_scalar(loom_yaml_node(y, pair->key));
		if (k != NULL && strcmp(k, key) == 0)
			return loom_yaml_node(y, pair->value);
	}
	return NULL;
}

static const char *node_kind(const yaml_node_t *node)
{
	switch (node->type) {
	case YAML_SCALAR_NODE:
		return "a scalar";
	case YAML_SEQUENCE_NODE:
		return "a list";
	case YAML_MAPPING_NODE:
		return "a mapping";
	default:
		return "empty";
	}
}

loom_status loom_yaml_expect(loom_yaml *y, yaml_node_t *node, yaml_node_type_t type,
			     loom_status code, const char *what)
{
	static const char *const wanted[] = {
		[YAML_SCALAR_NODE] = "a scalar",
		[YAML_SEQUENCE_NODE] = "a list",
		[YAML_MAPPING_NODE] = "a mapping",
	};
	if (node->type == type)
		return LOOM_OK;
	return loom_error(code, "%s:%d: %s must be %s, not %s", y->path, loom_yaml_line(node), what,
			  wanted[type], node_kind(node));
}

loom_status loom_yaml_check_keys(loom_yaml *y, yaml_node_t *map, const char *const *allowed,
				 loom_status code, const char *where)
{
	loom_status st = loom_yaml_expect(y, map, YAML_MAPPING_NODE, code, where);
	if (st != LOOM_OK)
		return st;
	loom_yaml_for_each_pair(y, map, pair) {
		yaml_node_t *kn = loom_yaml_node(y, pair->key);
		const char *k = loom_yaml_scalar(kn);
		if (k == NULL)
			return loom_error(code, "%s:%d: keys in %s must be plain text", y->path,
					  loom_yaml_line(kn), where);
		bool known = false;
		for (const char *const *a = allowed; *a != NULL; a++)
			known = known || strcmp(*a, k) == 0;
		if (!known) {
			char list[512] = "";
			for (const char *const *a = allowed; *a != NULL; a++) {
				strncat(list, a == allowed ? "" : ", ", sizeof(list) - strlen(list) - 1);
				strncat(list, *a, sizeof(list) - strlen(list) - 1);
			}
			return loom_error(code, "%s:%d: unknown key '%s' in %s (expected one of: %s)",
					  y->path, loom_yaml_line(kn), k, where, list);
		}
		for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < pair; q++) {
			const char *prev = loom_yaml_scalar(loom_yaml_node(y, q->key));
			if (prev != NULL && strcmp(prev, k) == 0)
				return loom_error(code, "%s:%d: key '%s' appears twice in %s", y->path,
						  loom_yaml_line(kn), k, where);
		}
	}
	return LOOM_OK;
}

loom_status loom_yaml_get_double(loom_yaml *y, yaml_node_t *node, loom_status code,
				 const char *what, double *out)
{
	const char *s = loom_yaml_scalar(node);
	char *end;
	if (s == NULL)
		return loom_yaml_expect(y, node, YAML_SCALAR_NODE, code, what);
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || *end != '\0' || errno != 0 || !isfinite(v))
		return loom_error(code, "%s:%d: %s must be a number, not '%s'", y->path,
				  loom_yaml_line(node), what, s);
	*out = v;
	return LOOM_OK;
}

loom_status loom_yaml_get_bool(loom_yaml *y, yaml_node_t *node, loom_status code,
			       const char *what, bool *out)
{
	const char *s = loom_yaml_scalar(node);
	if (s == NULL)
		return loom_yaml_expect(y, node, YAML_SCALAR_NODE, code, what);
	if (strcasecmp(s, "true") == 0 || strcasecmp(s, "yes") == 0) {
		*out = true;
		return LOOM_OK;
	}
	if (strcasecmp(s, "false") == 0 || strcasecmp(s, "no") == 0) {
		*out = false;
		return LOOM_OK;
	}
	return loom_error(code, "%s:%d: %s must be true or false, not '%s'", y->path,
			  loom_yaml_line(node), what, s);
}

loom_status loom_yaml_get_choice(loom_yaml *y, yaml_node_t *node, const char *const *choices,
				 loom_status code, const char *what, int *out)
{
	const char *s = loom_yaml_scalar(node);
	if (s == NULL)
		return loom_yaml_expect(y, node, YAML_SCALAR_NODE, code, what);
	char list[256] = "";
	for (int i = 0; choices[i] != NULL; i++) {
		if (strcmp(choices[i], s) == 0) {
			*out = i;
			return LOOM_OK;
		}
		strncat(list, i == 0 ? "" : " | ", sizeof(list) - strlen(list) - 1);
		strncat(list, choices[i], sizeof(list) - strlen(list) - 1);
	}
	return loom_error(code, "%s:%d: %s must be one of %s, not '%s'", y->path, loom_yaml_line(node),
			  what, list, s);
}
