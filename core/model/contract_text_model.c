/* contract_text_model.c - a contract's text_model section: where the
 * multimodal checkpoints of a family keep the text model loom runs.
 *
 * Gemma 3's 4B-27B and Mistral Small 3.1 are published as a vision tower
 * beside a text model whose config.json members sit under text_config and
 * whose tensors are named as the text-only checkpoints' with another
 * leading part (language_model.model. where Google and Mistral wrote
 * them, model.language_model. where transformers 4.52 and later save
 * them). The section says so once:
 *
 *     text_model:
 *       config: text_config
 *       tensors:
 *         "model.": [language_model.model., model.language_model.]
 *         "lm_head.": language_model.lm_head.
 *
 * and each safetensors spelling of the contract gains those alternatives
 * after its own: every hyperparameter key also under config, every tensor
 * name that begins with a listed part also with each replacement. The
 * spellings are tried in order, so a text-only checkpoint reads as before.
 */
#include "model/contract_text_model.h"

#include "runtime/error.h"

#include <stdlib.h>
#include <string.h>

/* The spellings in v (NULL: none). */
static size_t n_spellings(char **v)
{
	size_t n = 0;
	while (v != NULL && v[n] != NULL)
		n++;
	return n;
}

/* Appends s to the NULL-terminated *v unless it is there already; takes
 * s (frees it then). */
static loom_status append_spelling(char ***v, char *s)
{
	if (s == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	const size_t n = n_spellings(*v);
	for (size_t i = 0; i < n; i++) {
		if (strcmp((*v)[i], s) == 0) {
			free(s);
			return LOOM_OK;
		}
	}
	char **grown = realloc(*v, (n + 2) * sizeof(**v));
	if (grown == NULL) {
		free(s);
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	}
	grown[n] = s;
	grown[n + 1] = NULL;
	*v = grown;
	return LOOM_OK;
}

static char *joined(const char *a, const char *b)
{
	size_t na = strlen(a), nb = strlen(b);
	char *s = malloc(na + nb + 1);
	if (s != NULL) {
		memcpy(s, a, na);
		memcpy(s + na, b, nb + 1);
	}
	return s;
}

/* Every hyperparameter spelling also as config.spelling. */
static loom_status nest_hparams(loom_contract *c, const char *config)
{
	char *prefix = joined(config, ".");
	loom_status st = prefix != NULL ? LOOM_OK : loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	for (int hp = 0; st == LOOM_OK && hp < LOOM_HP_COUNT; hp++) {
		char ***v = &c->hparam_keys[LOOM_CFMT_SAFETENSORS][hp];
		for (size_t i = 0, own = n_spellings(*v); st == LOOM_OK && i < own; i++)
			if (strncmp((*v)[i], prefix, strlen(prefix)) != 0)
				st = append_spelling(v, joined(prefix, (*v)[i]));
	}
	free(prefix);
	return st;
}

/* Every tensor spelling that begins with `part` also with each of `to` in
 * its place. */
static loom_status rename_tensors(loom_yaml *y, loom_contract *c, const char *part, yaml_node_t *to)
{
	const size_t n = strlen(part);
	const bool many = to->type == YAML_SEQUENCE_NODE;
	const size_t count = many ? (size_t)(to->data.sequence.items.top - to->data.sequence.items.start) : 1;
	for (int r = 0; r < LOOM_ROLE_COUNT; r++) {
		char ***v = &c->tensor_names[LOOM_CFMT_SAFETENSORS][r];
		for (size_t i = 0, own = n_spellings(*v); i < own; i++) {
			if (strncmp((*v)[i], part, n) != 0)
				continue;
			for (size_t k = 0; k < count; k++) {
				yaml_node_t *e = many ? loom_yaml_node(y, to->data.sequence.items.start[k]) : to;
				loom_status st = append_spelling(v, joined(loom_yaml_scalar(e), (*v)[i] + n));
				if (st != LOOM_OK)
					return st;
			}
		}
	}
	return LOOM_OK;
}

/* The replacements of a tensor name's leading part: a string or a list of
 * them. */
static loom_status check_replacements(loom_yaml *y, yaml_node_t *to)
{
	if (to->type == YAML_SCALAR_NODE)
		return LOOM_OK;
	if (to->type != YAML_SEQUENCE_NODE || to->data.sequence.items.top == to->data.sequence.items.start)
		return loom_error(LOOM_ERR_CONTRACT, "%s:%d: text_model.tensors: a part's replacements must be a string "
				  "or a list of strings", y->path, loom_yaml_line(to));
	loom_yaml_for_each_item(y, to, item) {
		loom_status st = loom_yaml_expect(y, loom_yaml_node(y, *item), YAML_SCALAR_NODE, LOOM_ERR_CONTRACT,
						  "text_model.tensors");
		if (st != LOOM_OK)
			return st;
	}
	return LOOM_OK;
}

loom_status loom_contract_text_model(loom_yaml *y, yaml_node_t *node, loom_contract *c)
{
	static const char *const keys[] = {"config", "tensors", NULL};
	loom_status st = loom_yaml_check_keys(y, node, keys, LOOM_ERR_CONTRACT, "text_model");
	if (st != LOOM_OK)
		return st;
	if (c->tensor_names[LOOM_CFMT_SAFETENSORS][LOOM_ROLE_TOKEN_EMBD] == NULL)
		return loom_error(LOOM_ERR_CONTRACT, "%s:%d: text_model: the contract describes no safetensors "
				  "checkpoints", y->path, loom_yaml_line(node));
	yaml_node_t *config = loom_yaml_get(y, node, "config");
	if (config != NULL) {
		if ((st = loom_yaml_expect(y, config, YAML_SCALAR_NODE, LOOM_ERR_CONTRACT, "text_model.config")) != LOOM_OK)
			return st;
		if (loom_yaml_scalar(config)[0] == '\0')
			return loom_error(LOOM_ERR_CONTRACT, "%s:%d: text_model.config is empty", y->path,
					  loom_yaml_line(config));
		if ((st = nest_hparams(c, loom_yaml_scalar(config))) != LOOM_OK)
			return st;
	}
	yaml_node_t *tensors = loom_yaml_get(y, node, "tensors");
	if (tensors == NULL)
		return LOOM_OK;
	if ((st = loom_yaml_expect(y, tensors, YAML_MAPPING_NODE, LOOM_ERR_CONTRACT, "text_model.tensors")) != LOOM_OK)
		return st;
	loom_yaml_for_each_pair(y, tensors, pair) {
		yaml_node_t *part = loom_yaml_node(y, pair->key), *to = loom_yaml_node(y, pair->value);
		if ((st = loom_yaml_expect(y, part, YAML_SCALAR_NODE, LOOM_ERR_CONTRACT, "text_model.tensors")) != LOOM_OK)
			return st;
		if (loom_yaml_scalar(part)[0] == '\0')
			return loom_error(LOOM_ERR_CONTRACT, "%s:%d: text_model.tensors: a name's part to replace is empty",
					  y->path, loom_yaml_line(part));
		if ((st = check_replacements(y, to)) != LOOM_OK ||
		    (st = rename_tensors(y, c, loom_yaml_scalar(part), to)) != LOOM_OK)
			return st;
	}
	return LOOM_OK;
}
