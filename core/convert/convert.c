/* convert.c - `loom convert`: a model of any format loom reads written as
 * a GGUF file, optionally quantized on the way. */
#include "convert/model_export.h"

#include "convert/quantize.h"
#include "runtime/error.h"
#include "runtime/host.h"

#include <string.h>

loom_convert_params loom_convert_default_params(void)
{
	loom_convert_params p = {.type = NULL, .progress = NULL, .progress_user = NULL};
	return p;
}

static const loom_plugin *gguf_writer(loom_runtime *rt)
{
	for (size_t i = 0; i < rt->registry.n_plugins; i++) {
		const loom_plugin *p = &rt->registry.plugins[i];
		if (p->kind == LOOM_PLUGIN_FORMAT && p->desc != NULL && strcmp(p->name, "gguf") == 0 &&
		    LOOM_VT_HAS((const loom_format_vtable *)p->desc->vtable, write))
			return p;
	}
	return NULL;
}

loom_status loom_convert(loom_runtime *rt, const char *in_path, const char *out_path, const loom_convert_params *params)
{
	loom_convert_params defaults = loom_convert_default_params();
	if (rt == NULL || in_path == NULL || out_path == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_convert: runtime and both paths are required");
	if (params == NULL)
		params = &defaults;
	const loom_plugin *writer = gguf_writer(rt);
	if (writer == NULL)
		return loom_error(LOOM_ERR_UNSUPPORTED, "no usable gguf format plugin to write %s", out_path);
	const loom_quant_scheme *scheme = NULL;
	if (params->type != NULL && (scheme = loom_quantize_scheme(params->type)) == NULL)
		return LOOM_ERR_INVALID_ARGUMENT;

	loom_model *m = NULL;
	loom_status st = loom_model_load_layout(rt, in_path, &m);
	if (st != LOOM_OK)
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
			st = loom_quantize_file(rt, &e.file, scheme, &qp, &q);
			out = &q.out;
		}
		if (st == LOOM_OK) {
			loom_error_clear();
			st = ((const loom_format_vtable *)writer->desc->vtable)->write(loom_host_table(), out_path, out);
		}
		if (scheme != NULL && st == LOOM_OK)
			loom_quantized_free(&q);
		loom_export_free(&e);
	}
	if (st != LOOM_OK)
		st = loom_error_wrap(st, "converting %s to %s", in_path, out_path);
	loom_model_free(m);
	return st;
}
