/* naming.c - the contract applied to a file: which tensor holds a role,
 * which key a hyperparameter, and which role a tensor's name is. */
#include "model/naming.h"

#include "model/meta.h"

#include <stdio.h>
#include <string.h>

const loom_file_tensor *loom_file_find_tensor(const loom_model_file *f, const char *name)
{
	for (uint64_t i = 0; i < f->n_tensors; i++)
		if (loom_string_eq(f->tensors[i].name, name))
			return &f->tensors[i];
	return NULL;
}

const loom_file_tensor *loom_model_find_role(const loom_model *m, int fmt, loom_role role, int il, char *name,
					     size_t size)
{
	loom_spellings names = m->contract->tensor_names[fmt][role];
	char layer[16];
	snprintf(layer, sizeof(layer), "%d", il);
	snprintf(name, size, "(unnamed %s)", loom_role_name(role));
	for (char **n = names; n != NULL && *n != NULL; n++) {
		loom_contract_expand(name, size, *n, "{i}", layer);
		const loom_file_tensor *ft = loom_file_find_tensor(m->file, name);
		if (ft != NULL)
			return ft;
	}
	if (names != NULL)
		loom_contract_expand(name, size, names[0], "{i}", layer);
	return NULL;
}

const loom_meta_value *loom_model_hparam_value(const loom_model *m, int fmt, loom_hparam hp, char *key, size_t size)
{
	loom_spellings keys = m->contract->hparam_keys[fmt][hp];
	snprintf(key, size, "(no key in the contract)");
	for (char **k = keys; k != NULL && *k != NULL; k++) {
		loom_contract_expand(key, size, *k, "{arch}", m->arch);
		const loom_meta_value *v = loom_meta_find(m->file, key);
		if (v != NULL)
			return v;
	}
	if (keys != NULL)
		loom_contract_expand(key, size, keys[0], "{arch}", m->arch);
	return NULL;
}

/* Whether name is pattern with "{i}" (if any) standing for a layer number,
 * which goes to *layer (-1 without one). */
static bool matches(const char *pattern, loom_string name, int *layer)
{
	const char *at = strstr(pattern, "{i}");
	*layer = -1;
	if (at == NULL)
		return loom_string_eq(name, pattern);
	const size_t head = (size_t)(at - pattern), tail = strlen(at + 3);
	if (name.len < head + tail + 1 || memcmp(name.data, pattern, head) != 0 ||
	    memcmp(name.data + name.len - tail, at + 3, tail) != 0)
		return false;
	long n = 0;
	for (size_t i = head; i < name.len - tail; i++) {
		char d = name.data[i];
		if (d < '0' || d > '9' || n > 1000000)
			return false;
		n = n * 10 + (d - '0');
	}
	*layer = (int)n;
	return true;
}

loom_role loom_contract_role_of(const loom_contract *c, int fmt, loom_string name, int *layer)
{
	for (int r = 0; r < LOOM_ROLE_COUNT; r++)
		for (char **n = c->tensor_names[fmt][r]; n != NULL && *n != NULL; n++)
			if (matches(*n, name, layer))
				return (loom_role)r;
	*layer = -1;
	return LOOM_ROLE_COUNT;
}

void loom_contract_file_roles(const loom_contract *c, int fmt, const loom_model_file *file, loom_role *roles)
{
	int layer;
	for (uint64_t i = 0; i < file->n_tensors; i++)
		roles[i] = loom_contract_role_of(c, fmt, file->tensors[i].name, &layer);
}
