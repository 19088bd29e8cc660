/* yaml_doc.h - a parsed YAML file with line numbers, for config and contracts. */
#ifndef LOOM_YAML_DOC_H
#define LOOM_YAML_DOC_H

#include "loom.h"

#include <stdbool.h>
#include <yaml.h>

typedef struct loom_yaml {
	yaml_document_t doc;
	char *path;
} loom_yaml;

/* Parses path. Errors (LOOM_ERR_CONFIG or `code`) name the file and line. */
loom_status loom_yaml_load(const char *path, loom_status code, loom_yaml *out);
void loom_yaml_free(loom_yaml *y);

yaml_node_t *loom_yaml_root(loom_yaml *y);
/* 1-based line of a node. */
int loom_yaml_line(const yaml_node_t *node);
/* Scalar text of a node, or NULL if it is not a scalar. */
const char *loom_yaml_scalar(const yaml_node_t *node);
/* Value of key in a mapping node, or NULL. */
yaml_node_t *loom_yaml_get(loom_yaml *y, yaml_node_t *map, const char *key);

/* Checks that every key of a mapping is in `allowed` (NULL-terminated);
 * an unknown or repeated key is an error naming the file and line. */
loom_status loom_yaml_check_keys(loom_yaml *y, yaml_node_t *map, const char *const *allowed,
				 loom_status code, const char *where);

/* Typed accessors: an error names file, line and key. */
loom_status loom_yaml_expect(loom_yaml *y, yaml_node_t *node, yaml_node_type_t type,
			     loom_status code, const char *what);
loom_status loom_yaml_get_double(loom_yaml *y, yaml_node_t *node, loom_status code,
				 const char *what, double *out);
loom_status loom_yaml_get_bool(loom_yaml *y, yaml_node_t *node, loom_status code,
			       const char *what, bool *out);
/* Maps a scalar onto one of `choices` (NULL-terminated); *out = its index. */
loom_status loom_yaml_get_choice(loom_yaml *y, yaml_node_t *node, const char *const *choices,
				 loom_status code, const char *what, int *out);

/* Iteration helpers. */
#define loom_yaml_for_each_pair(y, map, pair) \
	for (yaml_node_pair_t *pair = (map)->data.mapping.pairs.start; pair < (map)->data.mapping.pairs.top; pair++)
#define loom_yaml_for_each_item(y, seq, item) \
	for (yaml_node_item_t *item = (seq)->data.sequence.items.start; item < (seq)->data.sequence.items.top; item++)
#define loom_yaml_node(y, id) yaml_document_get_node(&(y)->doc, (id))

#endif
