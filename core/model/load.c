/* load.c - loom_model_load: open the file up to its hyperparameters,
 * quantize it in memory if asked, bind the weights, place them. */
#include "model/model.h"

#include "export/quantize_at_load.h"
#include "model/bind.h"
#include "model/place.h"
#include "runtime/clock.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/struct_size.h"

#include <inttypes.h>

loom_status loom_model_params_init(loom_model_params *p, size_t size)
{
	static const loom_model_params defaults = {
		.size = sizeof(loom_model_params), .vocab_only = false, .metadata_only = false, .quantize = NULL};
	return loom_params_init(&loom_model_params_desc, p, size, &defaults);
}

static loom_status load_weights(loom_model *m, const char *path, const char *quantize)
{
	loom_status st = LOOM_OK;
	if (quantize != NULL)
		st = loom_quantize_at_load(m, quantize);
	if (st == LOOM_OK)
		st = loom_model_bind(m);
	if (st == LOOM_OK)
		st = loom_model_place(m);
	if (st != LOOM_OK)
		return loom_error_wrap(st, "%s (contract %s)", path, m->contract->path);
	loom_info("loaded %s: %s, %" PRId64 " layers, n_embd %" PRId64 ", vocab %" PRId64, path, m->arch, m->hp.n_layer,
		  m->hp.n_embd, m->hp.n_vocab);
	return LOOM_OK;
}

loom_status loom_model_load(loom_runtime *rt, const char *path, const loom_model_params *given, loom_model **out)
{
	loom_model_params p = loom_model_default_params();
	const loom_model_params *params = &p;
	if (out == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_model_load: out is NULL");
	*out = NULL;
	if (rt == NULL || path == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_model_load: runtime and path are required");
	loom_status st = loom_params_in(&loom_model_params_desc, &p, given);
	if (st != LOOM_OK)
		return st;
	const loom_model_stage stage = params->metadata_only ? LOOM_STAGE_METADATA
				       : params->vocab_only  ? LOOM_STAGE_VOCAB
							     : LOOM_STAGE_CONTRACT;
	loom_model *m;
	double t0 = loom_now_s();
	st = loom_model_open(rt, path, stage, &m);
	if (st == LOOM_OK)
		m->load_times.open = loom_now_s() - t0;
	if (st == LOOM_OK && stage == LOOM_STAGE_CONTRACT)
		st = load_weights(m, path, params->quantize);
	if (st != LOOM_OK) {
		loom_model_free(m);
		return st;
	}
	m->load_times.total = loom_now_s() - t0;
	if (stage == LOOM_STAGE_CONTRACT) {
		const loom_load_times *lt = &m->load_times;
		loom_info("load %.3f s: open %.3f, reading weights %.3f, repacking %.3f, uploading %.3f, the rest %.3f",
			  lt->total, lt->open, lt->read, lt->repack, lt->upload,
			  lt->total - lt->open - lt->read - lt->repack - lt->upload);
	}
	*out = m;
	return LOOM_OK;
}
