/* expert_stack.h - a mixture's experts kept one tensor an expert (Hugging
 * Face's mlp.experts.N.*), stacked into the {n_in, n_out, n_expert} tensor
 * MATMUL_ID multiplies by. */
#ifndef LOOM_EXPERT_STACK_H
#define LOOM_EXPERT_STACK_H

#include "model/model.h"

/* Whether the contract spells role in section fmt one tensor an expert:
 * a name with the expert placeholder {e}. */
bool loom_contract_names_each_expert(const loom_contract *c, int fmt, loom_role role);

/* role's n_expert matrices of layer il, each {ne0, ne1} and all of one
 * type, copied one after another into *bytes (malloc'd, the caller's) and
 * described by *out as one 3-D file tensor. name gets the spelling with
 * {e} left in, for messages. A missing expert, or one of another shape or
 * type, is an error naming it. */
loom_status loom_model_stack_experts(const loom_model *m, int fmt, loom_role role, int il, int64_t ne0, int64_t ne1,
				     int64_t n_expert, char *name, size_t size, loom_file_tensor *out, void **bytes);

#endif
