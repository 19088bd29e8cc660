/* layout_export.c - see layout_export.h. */
#include "export/layout_export.h"

#include "model/place.h"
#include "runtime/error.h"
#include "runtime/format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_layout_key(loom_string key)
{
	static const char prefix[] = "loom.layout.";
	return key.len >= sizeof(prefix) - 1 && memcmp(key.data, prefix, sizeof(prefix) - 1) == 0;
}

static loom_string str(const char *s)
{
	return (loom_string){.len = strlen(s), .data = s};
}

#define NOTHING_TO_LAY_OUT \
	"the backend keeps every weight of this model in the file's layout: there is nothing to lay out"

/* Why m cannot be written laid out, or NULL. */
static const char *refusal(const loom_model *m)
{
	if (m->file != m->opened)
		return "its weights were quantized at load: write the quantized file first (loom quantize)";
	if (m->weights_allocated)
		return "the backend keeps its weights in its own memory, not in a file's";
	if (!loom_format_writes(m->format))
		return "its format cannot be written: convert it to GGUF first (loom convert)";
	if (m->n_repacked == 0)
		return NOTHING_TO_LAY_OUT;
	return NULL;
}

/* The file's tensors, those the backend repacked in their new layout
 * (names[i] laid out as ids[i], *n of them). A layout larger than the
 * tensor's blocks (Q4_K's, whose scales are unpacked) cannot take its
 * place in the file: that tensor stays as it was, repacked at load. Nor
 * does a copy whose bytes are the file's (a backend that moves a weight
 * into its own memory as it is): there is nothing to lay out in it. */
static void lay_out_tensors(const loom_model *m, loom_file_tensor *tensors, loom_string *names, uint32_t *ids,
				   uint64_t *n)
{
	*n = 0;
	memcpy(tensors, m->file->tensors, m->file->n_tensors * sizeof(*tensors));
	for (int i = 0; i < m->n_repacked; i++) {
		const loom_repacked_weight *r = &m->repacked[i];
		if (r->file_tensor < 0)
			continue;
		loom_file_tensor *t = &tensors[r->file_tensor];
		if (r->buf.size != t->n_bytes || loom_repack_is_copy(&r->buf, t->data, t->n_bytes))
			continue;
		t->data = r->buf.base;
		names[*n] = t->name;
		ids[(*n)++] = r->layout;
	}
}

loom_status loom_layout_export(loom_model *m, const char *out_path)
{
	const loom_model_file *f = m->file;
	const char *why = refusal(m);
	if (why != NULL)
		return loom_error(LOOM_ERR_UNSUPPORTED, "backend %s: %s", loom_backend_name(&m->rt->backend), why);

	char backend[256];
	loom_layout_backend_id(&m->rt->backend, backend, sizeof(backend));
	loom_file_tensor *tensors = malloc((f->n_tensors + 1) * sizeof(*tensors));
	loom_meta_kv *meta = malloc((f->n_meta + 3) * sizeof(*meta));
	loom_string *names = malloc((size_t)m->n_repacked * sizeof(*names));
	uint32_t *ids = malloc((size_t)m->n_repacked * sizeof(*ids));
	uint64_t n_laid = 0, n_meta = 0;
	loom_status st = tensors && meta && names && ids ? LOOM_OK : loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	if (st == LOOM_OK) {
		lay_out_tensors(m, tensors, names, ids, &n_laid);
		if (n_laid == 0)
			st = loom_error(LOOM_ERR_UNSUPPORTED, "backend %s: %s", loom_backend_name(&m->rt->backend),
					NOTHING_TO_LAY_OUT);
	}
	if (st == LOOM_OK) {
		/* A file laid out again keeps only its new keys. */
		for (uint64_t i = 0; i < f->n_meta; i++)
			if (!is_layout_key(f->meta[i].key))
				meta[n_meta++] = f->meta[i];
		meta[n_meta++] = (loom_meta_kv){str(LOOM_LAYOUT_KEY_BACKEND),
						{.type = LOOM_META_STRING, .v.s = str(backend)}};
		meta[n_meta++] = (loom_meta_kv){str(LOOM_LAYOUT_KEY_TENSORS),
						{.type = LOOM_META_ARRAY, .elem_type = LOOM_META_STRING, .count = n_laid,
						 .v.array = names}};
		meta[n_meta++] = (loom_meta_kv){str(LOOM_LAYOUT_KEY_IDS),
						{.type = LOOM_META_ARRAY, .elem_type = LOOM_META_U32, .count = n_laid,
						 .v.array = ids}};
		loom_model_file out = *f;
		out.n_meta = n_meta;
		out.meta = meta;
		out.tensors = tensors;
		st = loom_format_write(m->format, out_path, &out);
	}
	free(tensors);
	free(meta);
	free(names);
	free(ids);
	return st;
}
