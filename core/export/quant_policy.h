/* quant_policy.h - which type each tensor of a model gets when it is
 * quantized to a named scheme ("q4_k_m", ...), following llama.cpp's
 * choices so that loom's files match llama-quantize's type for type. */
#ifndef LOOM_QUANT_POLICY_H
#define LOOM_QUANT_POLICY_H

#include "loom/plugin_api.h"
#include "model/contract.h"

typedef struct loom_quant_scheme {
	const char *name;  /* "q4_k_m" */
	loom_dtype base;   /* most 2-D weights */
	int32_t file_type; /* general.file_type (llama.cpp's llama_ftype) */
	bool mixed;        /* K-quant mix: more bits for some attn_v / ffn_down */
} loom_quant_scheme;

/* The scheme called name (case-insensitive), or NULL. */
const loom_quant_scheme *loom_quant_scheme_find(const char *name);
/* Names of every scheme, comma-separated, for messages. */
const char *loom_quant_scheme_names(void);

/* types[i] = the type tensor i of file becomes, given its contract role
 * roles[i] (LOOM_ROLE_COUNT for a tensor the contract does not name); a
 * tensor that is not quantized keeps its type. */
loom_status loom_quant_plan(const loom_model_file *file, const loom_role *roles, const loom_quant_scheme *scheme,
			    loom_dtype *types);

#endif
