/* convert.c - `loom convert` and `loom quantize`: a model written as a new
 * file, as GGUF from any format loom reads, or in its own format with its
 * weights quantized. */
#include "export/layout_export.h"
#include "export/model_export.h"
#include "export/quantize.h"
#include "model/model.h"
#include "model/naming.h"
#include "runtime/error.h"
#include "runtime/format.h"
#include "runtime/struct_size.h"

#include <stdlib.h>

loom_status loom_convert_params_init(loom_convert_params *p, size_t size)
{
	static const loom_convert_params defaults = {
		.size = sizeof(loom_convert_params), .type = NULL, .progress = NULL, .progress_user = NULL,
		.backend_layout = false};
	return loom_params_init(&loom_convert_params_desc, p, size, &defaults);
}

/* The model loaded on the runtime's backend, written back in its layouts. */
static loom_status convert_layout(loom_runtime *rt, const char *in_path, const char *out_path,
				  const loom_convert_params *params)
{
	if (params->type != NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT,
				  "a backend's layout is written for a file as it is: quantize it first, then lay it out");
	loom_model *m = NULL;
	loom_status st = loom_model_load(rt, in_path, NULL, &m);
	if (st == LOOM_OK)
		st = loom_layout_export(m, out_path);
	loom_model_free(m);
	if (st != LOOM_OK)
		st = loom_error_wrap(st, "laying %s out as %s", in_path, out_path);
	return st;
}

loom_status loom_convert(loom_runtime *rt, const char *in_path, const char *out_path, const loom_convert_params *given)
{
	loom_convert_params p = loom_convert_default_params();
	const loom_convert_params *params = &p;
	if (rt == NULL || in_path == NULL || out_path == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_convert: runtime and both paths are required");
	loom_status st = loom_params_in(&loom_convert_params_desc, &p, given);
	if (st != LOOM_OK)
		return st;
	if (params->backend_layout)
		return convert_layout(rt, in_path, out_path, params);
	/* The export is laid out as the contracts' gguf section names it: any
	 * format plugin whose files that section names can write it. */
	const char *section = loom_contract_format_name(LOOM_CFMT_GGUF);
	const loom_plugin *writer = loom_format_writer(&rt->registry, section);
	if (writer == NULL)
		return loom_error(LOOM_ERR_UNSUPPORTED, "no usable format plugin writes %s files (%s)", section, out_path);
	const loom_quant_scheme *scheme = NULL;
	if (params->type != NULL && (scheme = loom_quantize_scheme(params->type)) == NULL)
		return LOOM_ERR_INVALID_ARGUMENT;

	loom_model *m = NULL;
	if ((st = loom_model_open(rt, in_path, LOOM_STAGE_CONTRACT, &m)) != LOOM_OK)
		return st;
	loom_export e;
	loom_quantized q = {0};
	const loom_model_file *out = NULL;
	if ((st = loom_export_gguf(m, &e)) == LOOM_OK) {
		out = &e.file;
		if (scheme != NULL) {
			loom_quantize_params qp = loom_quantize_default_params();
			qp.progress = params->progress;
			qp.progress_user = params->progress_user;
			st = loom_quantize_file(rt, &e.file, e.roles, scheme, &qp, &q);
			out = &q.out;
		}
		if (st == LOOM_OK)
			st = loom_format_write(writer, out_path, out);
		if (scheme != NULL && st == LOOM_OK)
			loom_quantized_free(&q);
		loom_export_free(&e);
	}
	if (st != LOOM_OK)
		st = loom_error_wrap(st, "converting %s to %s", in_path, out_path);
	loom_model_free(m);
	return st;
}

loom_status loom_quantize(loom_runtime *rt, const char *in_path, const char *out_path,
			  const loom_quantize_params *given)
{
	loom_quantize_params p = loom_quantize_default_params();
	const loom_quantize_params *params = &p;
	if (rt == NULL || in_path == NULL || out_path == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_quantize: runtime and both paths are required");
	loom_status st = loom_params_in(&loom_quantize_params_desc, &p, given);
	if (st != LOOM_OK)
		return st;
	const loom_quant_scheme *scheme = loom_quantize_scheme(params->scheme);
	if (scheme == NULL)
		return LOOM_ERR_INVALID_ARGUMENT;

	/* The policy picks types by the tensors' roles in the contract. */
	loom_model *m = NULL;
	if ((st = loom_model_open(rt, in_path, LOOM_STAGE_CONTRACT, &m)) != LOOM_OK)
		return st;
	loom_quantized q;
	loom_role *roles = malloc((m->file->n_tensors + 1) * sizeof(*roles));
	if (roles == NULL)
		st = loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	else if (!loom_format_writes(m->format))
		st = loom_error(LOOM_ERR_UNSUPPORTED, "format %s cannot write files (loom convert writes GGUF)",
				m->format->name);
	else
		loom_contract_file_roles(m->contract, m->fmt, m->file, roles);
	if (st == LOOM_OK)
		st = loom_quantize_file(rt, m->file, roles, scheme, params, &q);
	if (st == LOOM_OK) {
		st = loom_format_write(m->format, out_path, &q.out);
		loom_quantized_free(&q);
	}
	if (st != LOOM_OK)
		st = loom_error_wrap(st, "quantizing %s to %s", in_path, scheme->name);
	free(roles);
	loom_model_free(m);
	return st;
}
