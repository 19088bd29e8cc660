/* quantize.c - writing a model with its weights converted to a scheme
 * ("q4_k_m", ...): the policy picks each tensor's type, the backend converts
 * (LOOM_OP_CONVERT), the format plugin writes the file. */
#include "convert/quantize.h"

#include "model/meta.h"
#include "runtime/error.h"
#include "runtime/host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QUANTIZATION_VERSION 2

loom_quantize_params loom_quantize_default_params(void)
{
	loom_quantize_params p = {.scheme = "q8_0", .progress = NULL, .progress_user = NULL};
	return p;
}

/* The tensor's bytes as a backend buffer: in place where the backend can
 * use host memory, else a copy. */
static loom_status buffer_for(loom_backend *be, const loom_file_tensor *t, loom_buffer *buf)
{
	if (LOOM_VT_HAS(be->vt, buffer_from_host) &&
	    be->vt->buffer_from_host(be->ctx, (void *)t->data, t->n_bytes, buf) == LOOM_OK)
		return LOOM_OK;
	loom_status st = be->vt->buffer_alloc(be->ctx, t->n_bytes, buf);
	if (st == LOOM_OK)
		st = be->vt->buffer_upload(be->ctx, buf, 0, t->data, t->n_bytes);
	return st;
}

loom_status loom_convert_tensor(loom_runtime *rt, const loom_file_tensor *t, loom_dtype type, void **bytes,
				uint64_t *n_bytes)
{
	loom_backend *be = &rt->backend;
	const int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
	loom_tensor src = {0}, dst = {0};
	loom_buffer in = {0}, out = {0};
	loom_tensor_set_contiguous(&src, t->dtype, t->ne[0], rows, 1, 1);
	loom_tensor_set_contiguous(&dst, type, t->ne[0], rows, 1, 1);
	*n_bytes = (uint64_t)dst.nb[1] * (uint64_t)rows;
	loom_node node = {.op = LOOM_OP_CONVERT, .dst = &dst, .src = {&src}};
	if (!be->vt->supports(be->ctx, &node))
		return loom_error(LOOM_ERR_UNSUPPORTED, "backend %s cannot convert %s to %s", be->plugin->name,
				  loom_dtype_name(t->dtype), loom_dtype_name(type));
	*bytes = malloc(*n_bytes ? *n_bytes : 1);
	if (*bytes == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	loom_status st = buffer_for(be, t, &in);
	if (st == LOOM_OK)
		st = be->vt->buffer_alloc(be->ctx, *n_bytes, &out);
	if (st == LOOM_OK) {
		src.data = in.base;
		dst.data = out.base;
		loom_graph g = {.n_nodes = 1, .nodes = &node};
		pthread_mutex_lock(&be->lock);
		st = be->vt->compute(be->ctx, &g);
		pthread_mutex_unlock(&be->lock);
	}
	if (st == LOOM_OK)
		st = be->vt->buffer_download(be->ctx, &out, 0, *bytes, *n_bytes);
	if (out.base != NULL || out.handle != NULL)
		be->vt->buffer_free(be->ctx, &out);
	if (in.base != NULL || in.handle != NULL)
		be->vt->buffer_free(be->ctx, &in);
	return st;
}

/* The input's metadata, with general.file_type and (for quantized schemes)
 * general.quantization_version set. */
static loom_status build_meta(loom_quantized *j)
{
	static const char file_type_key[] = "general.file_type", qv_key[] = "general.quantization_version";
	const bool quantized = loom_dtype_layout_of(j->scheme->base).block > 1;
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
	j->tensors = calloc(n + 1, sizeof(loom_file_tensor));
	j->owned = calloc(n + 1, sizeof(void *));
	if (j->tensors == NULL || j->owned == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	for (uint64_t i = 0; i < n; i++) {
		const loom_file_tensor *t = &j->in->tensors[i];
		j->tensors[i] = *t;
		if (j->types[i] != t->dtype) {
			loom_status st = loom_convert_tensor(j->rt, t, j->types[i], &j->owned[i], &j->tensors[i].n_bytes);
			if (st != LOOM_OK)
				return loom_error_wrap(st, "tensor %.*s", (int)t->name.len, t->name.data);
			j->tensors[i].dtype = j->types[i];
			j->tensors[i].data = j->owned[i];
		}
		if (p->progress != NULL) {
			char name[256];
			snprintf(name, sizeof(name), "%.*s", (int)(t->name.len < 255 ? t->name.len : 255), t->name.data);
			p->progress(p->progress_user, (size_t)i, (size_t)n, name, j->types[i]);
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

loom_status loom_quantize_file(loom_runtime *rt, const loom_model_file *in, const loom_quant_scheme *scheme,
			       const loom_quantize_params *params, loom_quantized *j)
{
	*j = (loom_quantized){.rt = rt, .in = in, .scheme = scheme, .out = {.struct_size = sizeof(loom_model_file)}};
	j->out.format = in->format;
	j->types = malloc((in->n_tensors + 1) * sizeof(loom_dtype));
	loom_status st = j->types != NULL ? loom_quant_plan(in, scheme, j->types)
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

loom_status loom_quantize(loom_runtime *rt, const char *in_path, const char *out_path,
			  const loom_quantize_params *params)
{
	loom_quantize_params defaults = loom_quantize_default_params();
	if (rt == NULL || in_path == NULL || out_path == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_quantize: runtime and both paths are required");
	if (params == NULL)
		params = &defaults;
	const loom_quant_scheme *scheme = loom_quantize_scheme(params->scheme);
	if (scheme == NULL)
		return LOOM_ERR_INVALID_ARGUMENT;

	loom_model *m = NULL;
	loom_model_params mp = loom_model_default_params();
	mp.metadata_only = true;
	loom_status st = loom_model_load(rt, in_path, &mp, &m);
	if (st != LOOM_OK)
		return st;
	const loom_format_vtable *fvt = m->format->desc->vtable;
	loom_quantized q;
	if (!LOOM_VT_HAS(fvt, write))
		st = loom_error(LOOM_ERR_UNSUPPORTED, "format %s cannot write files (loom convert writes GGUF)",
				m->format->name);
	else
		st = loom_quantize_file(rt, m->file, scheme, params, &q);
	if (st == LOOM_OK) {
		loom_error_clear();
		st = fvt->write(loom_host_table(), out_path, &q.out);
		loom_quantized_free(&q);
	}
	if (st != LOOM_OK)
		st = loom_error_wrap(st, "quantizing %s to %s", in_path, scheme->name);
	loom_model_free(m);
	return st;
}
