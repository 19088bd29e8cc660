/* quantize_at_load.c - a model's weights quantized as it loads: its GGUF
 * image built in memory (model_export.c), quantized to the scheme
 * (quantize.c) and adopted by the model in place of its file, so that it
 * binds exactly what `loom convert --type` would have written. */
#include "export/quantize_at_load.h"

#include "export/model_export.h"
#include "export/quantize.h"
#include "runtime/error.h"
#include "runtime/log.h"

#include <stdlib.h>
#include <string.h>

/* The file the model adopts, and the export its tensors point into. */
typedef struct quantized_image {
	loom_export export;
	loom_quantized quantized;
} quantized_image;

static void release(void *p)
{
	quantized_image *q = p;
	loom_quantized_free(&q->quantized);
	loom_export_free(&q->export);
	free(q);
}

loom_status loom_quantize_at_load(loom_model *m, const char *scheme_name)
{
	const loom_quant_scheme *scheme = loom_quantize_scheme(scheme_name);
	if (scheme == NULL)
		return LOOM_ERR_INVALID_ARGUMENT;
	quantized_image *q = calloc(1, sizeof(*q));
	/* The image is GGUF's, whose keys carry the contract's name. */
	char *arch = strdup(m->contract->name);
	if (q == NULL || arch == NULL) {
		free(q);
		free(arch);
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	}
	loom_quantize_params qp = loom_quantize_default_params();
	loom_status st = loom_export_gguf(m, &q->export);
	if (st == LOOM_OK)
		st = loom_quantize_file(m->rt, &q->export.file, q->export.roles, scheme, &qp, &q->quantized);
	if (st != LOOM_OK) {
		release(q);
		free(arch);
		return loom_error_wrap(st, "quantizing to %s at load", scheme->name);
	}
	free(m->arch);
	m->arch = arch;
	loom_model_adopt_file(m, &q->quantized.out, LOOM_CFMT_GGUF, q, release);
	loom_info("quantized the weights to %s at load", scheme->name);
	return LOOM_OK;
}
