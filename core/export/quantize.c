/* quantize.c - a model file's weights converted to a scheme ("q4_k_m",
 * ...) in memory: the policy picks each tensor's type, the backend
 * converts (LOOM_OP_CONVERT). */
#include "export/quantize.h"

#include "model/meta.h"
#include "runtime/error.h"
#include "runtime/struct_size.h"
#include "model/weight_adapt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QUANTIZATION_VERSION 2

loom_status loom_quantize_params_init(loom_quantize_params *p, size_t size)
{
	static const loom_quantize_params defaults = {
		.size = sizeof(loom_quantize_params), .scheme = "q8_0", .progress = NULL, .progress_user = NULL};
	return loom_params_init(&loom_quantize_params_desc, p, size, &defaults);
}

/* The input's metadata, with general.file_type and (for quantized schemes)
 * general.quantization_version set. */
static loom_status build_meta(loom_quantized *j)
{
	static const char file_type_key[] = "general.file_type", qv_key[] = "general.quantization_version";
	const bool quantized = loom_dtype_traits_of(j->scheme->base).block > 1;
	uint64_t n = j->in->n_meta;
	j->meta = calloc(n + 2, sizeof(loom_meta_kv));
	if (j->meta == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	bool have_ft = false, have_qv = false;
	for (uint64_t i = 0; i < n; i++) {
		j->meta[i] = j->in->meta[i];
		if (loom_string_eq(j->meta[i].key, file_type_key)) {
			j->meta[i].value = (loom_meta_value){.type = LOOM_META_U32, .v.u = (uint64_t)j->scheme->file_type};
			have_ft = true;
		} else if (loom_string_eq(j->meta[i].key, qv_key)) {
			have_qv = true;
		}
	}
	if (!have_ft)
		j->meta[n++] = (loom_meta_kv){{sizeof(file_type_key) - 1, file_type_key},
					      {.type = LOOM_META_U32, .v.u = (uint64_t)j->scheme->file_type}};
	if (quantized && !have_qv)
		j->meta[n++] = (loom_meta_kv){{sizeof(qv_key) - 1, qv_key},
					      {.type = LOOM_META_U32, .v.u = QUANTIZATION_VERSION}};
	j->out.meta = j->meta;
	j->out.n_meta = n;
	return LOOM_OK;
}

static loom_status build_tensors(loom_quantized *j, const loom_quantize_params *p)
{
	const uint64_t n = j->in->n_tensors;
	loom_convert_progress progress = {.size = sizeof(progress), .count = (size_t)n};
	for (uint64_t i = 0; i < n; i++)
		progress.bytes_total += j->in->tensors[i].n_bytes;
	j->tensors = calloc(n + 1, sizeof(loom_file_tensor));
	j->owned = calloc(n + 1, sizeof(void *));
	if (j->tensors == NULL || j->owned == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	for (uint64_t i = 0; i < n; i++) {
		const loom_file_tensor *t = &j->in->tensors[i];
		j->tensors[i] = *t;
		if (j->types[i] != t->dtype) {
			loom_status st = loom_weight_converted(j->rt, t, j->types[i], &j->owned[i], &j->tensors[i].n_bytes);
			if (st != LOOM_OK)
				return loom_error_wrap(st, "tensor %.*s", (int)t->name.len, t->name.data);
			j->tensors[i].dtype = j->types[i];
			j->tensors[i].data = j->owned[i];
		}
		progress.bytes_done += t->n_bytes;
		if (p->progress != NULL) {
			char name[256];
			snprintf(name, sizeof(name), "%.*s", (int)(t->name.len < 255 ? t->name.len : 255), t->name.data);
			progress.index = (size_t)i;
			progress.name = name;
			progress.type = j->types[i];
			p->progress(p->progress_user, &progress);
		}
	}
	j->out.tensors = j->tensors;
	j->out.n_tensors = n;
	return LOOM_OK;
}

void loom_quantized_free(loom_quantized *j)
{
	for (uint64_t i = 0; j->owned != NULL && i < j->in->n_tensors; i++)
		free(j->owned[i]);
	free(j->owned);
	free(j->tensors);
	free(j->meta);
	free(j->types);
	memset(j, 0, sizeof(*j));
}

loom_status loom_quantize_file(loom_runtime *rt, const loom_model_file *in, const loom_role *roles,
			       const loom_quant_scheme *scheme, const loom_quantize_params *params, loom_quantized *j)
{
	*j = (loom_quantized){.rt = rt, .in = in, .scheme = scheme, .out = {.struct_size = sizeof(loom_model_file)}};
	j->out.format = in->format;
	j->types = malloc((in->n_tensors + 1) * sizeof(loom_dtype));
	loom_status st = j->types != NULL ? loom_quant_plan(in, roles, scheme, j->types)
					  : loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	if (st == LOOM_OK)
		st = build_meta(j);
	if (st == LOOM_OK)
		st = build_tensors(j, params);
	if (st != LOOM_OK)
		loom_quantized_free(j);
	return st;
}

const loom_quant_scheme *loom_quantize_scheme(const char *name)
{
	const loom_quant_scheme *scheme = name != NULL ? loom_quant_scheme_find(name) : NULL;
	if (scheme == NULL)
		loom_error(LOOM_ERR_INVALID_ARGUMENT, "unknown quantization scheme '%s' (known: %s)",
			   name != NULL ? name : "(null)", loom_quant_scheme_names());
	return scheme;
}
