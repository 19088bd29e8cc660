/* naming.h - the contract applied to a file: where the file keeps each
 * role's tensor and each hyperparameter, in the contract section that
 * names its format's keys and tensors. */
#ifndef LOOM_NAMING_H
#define LOOM_NAMING_H

#include "model/model.h"

/* The file's tensor called name, or NULL. */
const loom_file_tensor *loom_file_find_tensor(const loom_model_file *f, const char *name);

/* The file's tensor for role (of layer il, or -1) in contract section fmt:
 * the first of the contract's spellings the file has. name gets that
 * spelling, or the first one when none is there (for messages). */
const loom_file_tensor *loom_model_find_role(const loom_model *m, int fmt, loom_role role, int il, char *name,
					     size_t size);

/* The value the file stores hp under, in section fmt (the first spelling
 * it has; key gets it, or the first spelling, for messages), or NULL when
 * the file has none or the contract names no key. */
const loom_meta_value *loom_model_hparam_value(const loom_model *m, int fmt, loom_hparam hp, char *key, size_t size);

/* The role of the tensor called name in section fmt's spellings, its
 * layer in *layer (-1 for the model's own); LOOM_ROLE_COUNT when the
 * contract names no such tensor. */
loom_role loom_contract_role_of(const loom_contract *c, int fmt, loom_string name, int *layer);

/* roles[i] = the role of file's tensor i in section fmt, or LOOM_ROLE_COUNT;
 * roles holds file->n_tensors entries. */
void loom_contract_file_roles(const loom_contract *c, int fmt, const loom_model_file *file, loom_role *roles);

#endif
