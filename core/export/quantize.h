/* quantize.h - converting a model file's weights to a quantization scheme
 * in memory: for loom_quantize, loom_convert and quantizing at load. */
#ifndef LOOM_QUANTIZE_H
#define LOOM_QUANTIZE_H

#include "export/quant_policy.h"
#include "runtime/runtime.h"

/* The output: the input's metadata with the file type updated, and each
 * tensor's bytes, converted where the scheme changes its type (the rest
 * point at the input's). The input must outlive it. */
typedef struct loom_quantized {
	loom_model_file out;
	loom_runtime *rt;
	const loom_model_file *in;
	const loom_quant_scheme *scheme;
	loom_dtype *types;
	loom_meta_kv *meta;
	loom_file_tensor *tensors;
	void **owned; /* converted bytes */
} loom_quantized;

/* The scheme called name, or NULL with loom_last_error() listing them. */
const loom_quant_scheme *loom_quantize_scheme(const char *name);

/* Converts in's tensors with the runtime's backend (LOOM_OP_CONVERT),
 * each to the type the policy gives its role (roles[i] for tensor i, as
 * loom_contract_file_roles finds them). */
loom_status loom_quantize_file(loom_runtime *rt, const loom_model_file *in, const loom_role *roles,
			       const loom_quant_scheme *scheme, const loom_quantize_params *params, loom_quantized *out);
void loom_quantized_free(loom_quantized *q);

#endif
