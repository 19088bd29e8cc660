/* context.c - contexts: creating them, and evaluating a batch. */
#include "infer/context.h"

#include "infer/node_watch.h"
#include "infer/profile.h"
#include "runtime/clock.h"

#include "model/place.h"
#include "runtime/error.h"
#include "runtime/host_memory.h"
#include "runtime/log.h"
#include "runtime/struct_size.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_N_BATCH 512

loom_status loom_context_params_init(loom_context_params *p, size_t size)
{
	static const loom_context_params defaults = {
		.size = sizeof(loom_context_params), .n_ctx = 0, .n_batch = DEFAULT_N_BATCH, .kv_type = LOOM_DTYPE_F16};
	return loom_params_init(&loom_context_params_desc, p, size, &defaults);
}

/* Lays the slots out in one scratch buffer, 64-byte aligned. */
static size_t layout_scratch(loom_context *ctx)
{
	const loom_hparams *hp = &ctx->model->hp;
	const int64_t q_dim = hp->n_head * hp->head_dim, kv_dim = hp->n_head_kv * hp->head_dim;
	const int64_t k = hp->n_expert > 0 ? hp->n_expert_used : 0;
	/* Slots of the experts' weights and outputs: one more for a shared
	 * expert. */
	const int64_t slots = k + (k > 0 && ctx->model->contract->shared_expert);
	int64_t ff = hp->n_ff > hp->n_ff_exp * k ? hp->n_ff : hp->n_ff_exp * k;
	ff = slots > k && hp->n_ff_shared > ff ? hp->n_ff_shared : ff;
	const int64_t width[LOOM_SLOT_COUNT] = {
		[LOOM_SLOT_TOKENS] = 1, [LOOM_SLOT_POS] = 1, [LOOM_SLOT_CELLS] = 1, [LOOM_SLOT_OUT_IDS] = 1,
		[LOOM_SLOT_CELLS_SWA] = 1,
		[LOOM_SLOT_MASK] = ctx->params.n_ctx,
		[LOOM_SLOT_MASK_SWA] = hp->n_swa > 0 ? ctx->params.n_ctx : 0,
		[LOOM_SLOT_X] = hp->n_embd, [LOOM_SLOT_XB] = hp->n_embd,
		[LOOM_SLOT_Q] = q_dim, [LOOM_SLOT_K] = kv_dim, [LOOM_SLOT_V] = kv_dim,
		[LOOM_SLOT_ATTN] = q_dim, [LOOM_SLOT_PROJ] = hp->n_embd,
		[LOOM_SLOT_GATE] = ff, [LOOM_SLOT_UP] = ff,
		[LOOM_SLOT_ROUTER] = hp->n_expert,
		[LOOM_SLOT_CHOICE] = ctx->model->contract->selection_bias ? hp->n_expert : 0,
		[LOOM_SLOT_EXPERT_IDS] = k, [LOOM_SLOT_EXPERT_W] = slots,
		[LOOM_SLOT_EXPERTS] = hp->n_embd * slots,
		[LOOM_SLOT_XOUT] = hp->n_embd, [LOOM_SLOT_LOGITS] = hp->n_vocab,
	};
	size_t off = 0;
	for (int s = 0; s < LOOM_SLOT_COUNT; s++) {
		ctx->slot_row_bytes[s] = (size_t)width[s] * 4; /* every slot holds f32 or i32 */
		ctx->slot_offset[s] = off;
		off += (ctx->slot_row_bytes[s] * ctx->params.n_batch + 63) & ~(size_t)63;
	}
	return off;
}

/* Whether the model has windowed layers, which keep their own cache. */
static bool has_windows(const loom_context *ctx)
{
	for (int il = 0; il < (int)ctx->model->hp.n_layer; il++)
		if (loom_layer_windowed(&ctx->model->hp, il))
			return true;
	return false;
}

static loom_kv_layers global_layers(const loom_context *ctx)
{
	return has_windows(ctx) ? LOOM_KV_GLOBAL_LAYERS : LOOM_KV_ALL_LAYERS;
}

/* The windowed layers' cache's first size: a window with its slack and a
 * batch, in whole steps of the attended span; it grows when more
 * sequences than one keep windows (loom_kv_make_room). 0 without windowed
 * layers. */
static uint32_t windowed_cells(const loom_context *ctx)
{
	if (!has_windows(ctx))
		return 0;
	uint64_t cells = (uint64_t)ctx->model->hp.n_swa + LOOM_KV_WINDOW_SLACK + ctx->params.n_batch;
	cells = (cells + LOOM_KV_WINDOW_STEP - 1) / LOOM_KV_WINDOW_STEP * LOOM_KV_WINDOW_STEP;
	return cells < ctx->params.n_ctx ? (uint32_t)cells : ctx->params.n_ctx;
}

static loom_status alloc_host(loom_context *ctx)
{
	const size_t nb = ctx->params.n_batch;
	ctx->inputs_bytes = ctx->slot_offset[LOOM_SLOT_MASK];
	ctx->inputs = calloc(1, ctx->inputs_bytes);
	if (ctx->inputs != NULL) {
		ctx->tokens = (int32_t *)(ctx->inputs + ctx->slot_offset[LOOM_SLOT_TOKENS]);
		ctx->pos = (int32_t *)(ctx->inputs + ctx->slot_offset[LOOM_SLOT_POS]);
		ctx->cells = (int32_t *)(ctx->inputs + ctx->slot_offset[LOOM_SLOT_CELLS]);
		ctx->out_ids = (int32_t *)(ctx->inputs + ctx->slot_offset[LOOM_SLOT_OUT_IDS]);
		ctx->cells_swa = (int32_t *)(ctx->inputs + ctx->slot_offset[LOOM_SLOT_CELLS_SWA]);
	}
	ctx->seq = malloc(nb * sizeof(int32_t));
	ctx->logit_row = malloc(nb * sizeof(int32_t));
	ctx->mask = malloc(nb * ctx->kv.n_cells * sizeof(float));
	if (has_windows(ctx) && (ctx->mask_swa = malloc(nb * ctx->kv.n_cells * sizeof(float))) == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory for a context of %u cells", ctx->kv.n_cells);
	if (!ctx->logits_in_place)
		ctx->logits = malloc(nb * (size_t)ctx->model->hp.n_vocab * sizeof(float));
	ctx->max_nodes = loom_forward_max_nodes(ctx->model);
	ctx->max_tensors = loom_forward_max_tensors(ctx->model);
	ctx->nodes = calloc((size_t)ctx->max_nodes, sizeof(loom_node));
	ctx->tensors = calloc((size_t)ctx->max_tensors, sizeof(loom_tensor));
	if (!ctx->inputs || !ctx->seq || !ctx->logit_row || !ctx->mask || (!ctx->logits && !ctx->logits_in_place) ||
	    !ctx->nodes || !ctx->tensors)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory for a context of %u cells", ctx->kv.n_cells);
	return LOOM_OK;
}

/* Host memory for the batch's inputs, its mask over every cell and its
 * logits unless they are read in place (alloc_host). */
static size_t host_bytes(const loom_context *ctx)
{
	const size_t nb = ctx->params.n_batch;
	const size_t masks = has_windows(ctx) ? 2 : 1;
	return ctx->slot_offset[LOOM_SLOT_MASK] + masks * nb * ctx->params.n_ctx * sizeof(float) +
	       (ctx->logits_in_place ? 0 : nb * (size_t)ctx->model->hp.n_vocab * sizeof(float));
}

/* Lays out the scratch buffer and checks, before anything is allocated,
 * that the cache and the activations fit the backend's device, and what
 * lives in host memory (all of it, for a CPU backend) fits the machine's
 * available memory: a mistyped -c is refused, not found out by the OOM
 * killer. */
static loom_status reserve_memory(loom_context *ctx)
{
	const loom_backend *be = &ctx->model->rt->backend;
	const size_t kv_bytes = loom_kv_bytes(ctx->model, ctx->params.n_ctx, ctx->params.kv_type, global_layers(ctx)) +
				loom_kv_bytes(ctx->model, windowed_cells(ctx), ctx->params.kv_type, LOOM_KV_WINDOWED_LAYERS);
	const double mib = 1 << 20;
	char what[200];
	ctx->scratch_bytes = layout_scratch(ctx);
	snprintf(what, sizeof(what), "a context of %u cells (KV cache %.1f MiB, activations %.1f MiB)",
		 ctx->params.n_ctx, kv_bytes / mib, ctx->scratch_bytes / mib);
	loom_status st = loom_backend_fits(be, kv_bytes + ctx->scratch_bytes, what);
	if (st != LOOM_OK)
		return st;
	const bool on_device = loom_backend_on_device(be);
	const uint64_t host = host_bytes(ctx) + (on_device ? 0 : kv_bytes + ctx->scratch_bytes);
	const uint64_t available = loom_host_memory_available();
	if (available > 0 && host > available)
		return loom_error(LOOM_ERR_NO_MEMORY,
				  "%s with its inputs and logits need %.1f MiB of host memory; this machine has %.1f MiB "
				  "available",
				  what, host / mib, available / mib);
	loom_info("backend %s: %s", loom_backend_name(be), what);
	return LOOM_OK;
}

/* A cache type loom has, in blocks that split into the model's heads. */
static loom_status check_kv_type(const loom_model *model, loom_dtype type)
{
	const char *name = loom_dtype_name(type);

	if (type != LOOM_DTYPE_F16 && type != LOOM_DTYPE_F32 && type != LOOM_DTYPE_Q8_0 && type != LOOM_DTYPE_Q4_0)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "the KV cache type must be f16, f32, q8_0 or q4_0, not %s",
				  name != NULL ? name : "unknown");
	uint32_t block = loom_dtype_traits_of(type).block;
	if (model->hp.head_dim % block != 0)
		return loom_error(LOOM_ERR_UNSUPPORTED,
				  "a %s KV cache stores blocks of %u values; this model's heads have %" PRId64, name,
				  block, (int64_t)model->hp.head_dim);
	return LOOM_OK;
}

/* For `loom run -v`: memory by kind, and what the process holds. */
static void log_memory(const loom_context *ctx)
{
	const double mib = 1 << 20;
	if (!loom_log_enabled(LOOM_LOG_INFO))
		return;
	loom_weight_bytes w = loom_model_weight_bytes(ctx->model);
	double total, file;
	char resident[96] = "";
	if (loom_process_resident(&total, &file))
		snprintf(resident, sizeof(resident), "; the process has %.1f MiB resident, %.1f MiB of it file pages", total,
			 file);
	loom_info("memory: weights %.1f MiB (%.1f mapped in place, %.1f repacked, %.1f other), KV cache %.1f MiB, "
		  "activations %.1f MiB%s",
		  (double)(w.in_place + w.repacked + w.other) / mib, (double)w.in_place / mib, (double)w.repacked / mib,
		  (double)w.other / mib, (double)(ctx->kv.buf.size + ctx->kv_swa.buf.size) / mib,
		  (double)ctx->scratch_bytes / mib, resident);
}

loom_status loom_context_create(loom_model *model, const loom_context_params *given, loom_context **out)
{
	loom_context_params p = loom_context_default_params();
	const loom_context_params *params = &p;
	if (out == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_context_create: out is NULL");
	*out = NULL;
	if (model == NULL || model->layers == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_context_create: needs a model loaded with weights");
	loom_status st = loom_params_in(&loom_context_params_desc, &p, given);
	if (st == LOOM_OK)
		st = check_kv_type(model, params->kv_type);
	if (st != LOOM_OK)
		return st;
	loom_context *ctx = calloc(1, sizeof(*ctx));
	if (ctx == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	ctx->model = model;
	ctx->params = *params;
	if (ctx->params.n_ctx == 0)
		ctx->params.n_ctx = (uint32_t)model->hp.n_ctx_train;
	if (ctx->params.n_batch == 0)
		ctx->params.n_batch = DEFAULT_N_BATCH;
	if (ctx->params.n_batch > ctx->params.n_ctx)
		ctx->params.n_batch = ctx->params.n_ctx;
	if (model->contract->positions == LOOM_POSITIONS_LEARNED && ctx->params.n_ctx > model->hp.n_ctx_train) {
		uint32_t n_ctx = ctx->params.n_ctx;
		free(ctx);
		return loom_error(LOOM_ERR_INVALID_ARGUMENT,
				  "the model has learned positions for %" PRId64 " tokens; a context of %u is longer",
				  model->hp.n_ctx_train, n_ctx);
	}

	ctx->logits_in_place = !loom_backend_on_device(&model->rt->backend);
	st = reserve_memory(ctx);
	if (st == LOOM_OK)
		st = loom_kv_init(&ctx->kv, model, ctx->params.n_ctx, ctx->params.kv_type, global_layers(ctx));
	if (st == LOOM_OK && has_windows(ctx))
		st = loom_kv_init(&ctx->kv_swa, model, windowed_cells(ctx), ctx->params.kv_type, LOOM_KV_WINDOWED_LAYERS);
	if (st == LOOM_OK)
		st = alloc_host(ctx);
	if (st == LOOM_OK) {
		st = loom_backend_alloc(&model->rt->backend, ctx->scratch_bytes, &ctx->scratch);
		if (st != LOOM_OK)
			st = loom_error_wrap(st, "%zu MiB of activations", ctx->scratch_bytes >> 20);
		else if (ctx->logits_in_place)
			ctx->logits = (float *)((unsigned char *)ctx->scratch.base + ctx->slot_offset[LOOM_SLOT_LOGITS]);
	}
	if (st == LOOM_OK)
		st = loom_forward_check(ctx);
	if (st != LOOM_OK) {
		loom_context_free(ctx);
		return st;
	}
	log_memory(ctx);
	*out = ctx;
	return LOOM_OK;
}

void loom_context_free(loom_context *ctx)
{
	if (ctx == NULL)
		return;
	loom_backend_release(&ctx->model->rt->backend, &ctx->scratch);
	loom_kv_free(&ctx->kv, ctx->model);
	loom_kv_free(&ctx->kv_swa, ctx->model);
	free(ctx->inputs);
	free(ctx->seq);
	free(ctx->logit_row);
	free(ctx->mask);
	free(ctx->mask_swa);
	if (!ctx->logits_in_place)
		free(ctx->logits);
	free(ctx->nodes);
	free(ctx->tensors);
	free(ctx->node_ns);
	free(ctx);
}

void loom_context_set_abort(loom_context *ctx, loom_abort_fn fn, void *user)
{
	if (ctx == NULL)
		return;
	ctx->abort_fn = fn;
	ctx->abort_user = user;
}

uint32_t loom_context_n_ctx(const loom_context *ctx)
{
	return ctx->params.n_ctx;
}

uint32_t loom_context_n_batch(const loom_context *ctx)
{
	return ctx->params.n_batch;
}

const loom_model *loom_context_model(const loom_context *ctx)
{
	return ctx->model;
}

/* Copies the batch into the host arrays, filling defaults; counts outputs. */
static loom_status read_batch(loom_context *ctx, const loom_batch *b, int *n_out)
{
	const int n = b->n_tokens;
	const int32_t n_vocab = (int32_t)ctx->model->hp.n_vocab;
	*n_out = 0;
	for (int i = 0; i < n; i++) {
		if (b->tokens[i] < 0 || b->tokens[i] >= n_vocab)
			return loom_error(LOOM_ERR_INVALID_ARGUMENT, "batch token %d is %d, outside the vocabulary [0, %d)",
					  i, b->tokens[i], n_vocab);
		ctx->tokens[i] = b->tokens[i];
		ctx->seq[i] = b->seq_id != NULL ? b->seq_id[i] : 0;
		if (ctx->seq[i] < 0 || ctx->seq[i] >= LOOM_MAX_SEQ)
			return loom_error(LOOM_ERR_INVALID_ARGUMENT, "batch token %d has sequence id %d, outside [0, %d)", i,
					  ctx->seq[i], LOOM_MAX_SEQ);
		if (b->pos != NULL) {
			ctx->pos[i] = b->pos[i];
		} else {
			/* Continue the sequence: after its cache, or its previous batch token. */
			int32_t last = loom_kv_pos_max(&ctx->kv, ctx->seq[i]);
			for (int j = 0; j < i; j++)
				if (ctx->seq[j] == ctx->seq[i] && ctx->pos[j] > last)
					last = ctx->pos[j];
			if (last == INT32_MAX)
				return loom_error(LOOM_ERR_INVALID_ARGUMENT,
						  "batch token %d: sequence %d has no position after %d", i, ctx->seq[i], last);
			ctx->pos[i] = last + 1;
		}
		if (ctx->pos[i] < 0)
			return loom_error(LOOM_ERR_INVALID_ARGUMENT, "batch token %d has position %d", i, ctx->pos[i]);
		bool want = b->logits != NULL ? b->logits[i] != 0 : i == n - 1;
		ctx->logit_row[i] = want ? *n_out : -1;
		if (want)
			ctx->out_ids[(*n_out)++] = i;
	}
	return LOOM_OK;
}

/* The first of n_kv cells that any of a mask's n rows sees (0 if none). */
static uint32_t first_seen(const float *mask, int n, uint32_t n_kv)
{
	uint32_t first = n_kv;
	for (int t = 0; t < n; t++) {
		const float *row = mask + (size_t)t * n_kv;
		for (uint32_t j = 0; j < first; j++)
			if (row[j] == 0.0f) {
				first = j;
				break;
			}
	}
	return first < n_kv ? first : 0;
}

static loom_status run_step(loom_context *ctx, int n, int n_out, loom_step_output output, float *hidden)
{
	loom_backend *be = &ctx->model->rt->backend;
	const uint32_t n_kv = loom_kv_window(&ctx->kv);
	loom_graph graph;

	loom_kv_build_mask(&ctx->kv, n_kv, n, ctx->pos, ctx->seq, 0, ctx->mask);
	ctx->swa_first = 0;
	ctx->n_kv_swa = 0;
	if (ctx->mask_swa != NULL) {
		const uint32_t n_kv_swa = loom_kv_window(&ctx->kv_swa);
		loom_kv_build_mask(&ctx->kv_swa, n_kv_swa, n, ctx->pos, ctx->seq, (uint32_t)ctx->model->hp.n_swa,
				   ctx->mask_swa);
		ctx->swa_first = first_seen(ctx->mask_swa, n, n_kv_swa) / LOOM_KV_WINDOW_STEP * LOOM_KV_WINDOW_STEP;
		ctx->n_kv_swa = n_kv_swa;
	}
	loom_status st = loom_forward_build(ctx, n, n_kv, n_out, output, &graph);
	if (st == LOOM_OK)
		st = loom_backend_upload(be, &ctx->scratch, 0, ctx->inputs, ctx->inputs_bytes);
	if (st == LOOM_OK)
		st = loom_backend_upload(be, &ctx->scratch, ctx->slot_offset[LOOM_SLOT_MASK], ctx->mask,
					 (size_t)n * n_kv * 4);
	if (st == LOOM_OK && ctx->mask_swa != NULL)
		st = loom_backend_upload(be, &ctx->scratch, ctx->slot_offset[LOOM_SLOT_MASK_SWA], ctx->mask_swa,
					 (size_t)n * ctx->n_kv_swa * 4);
	if (st != LOOM_OK)
		return st;

	st = ctx->node_watch != NULL ? loom_node_watch_compute(ctx, &graph) : profile_compute(ctx, &graph);
	if (st != LOOM_OK)
		return st;
	if (output == LOOM_STEP_HIDDEN)
		return loom_backend_download(be, &ctx->scratch, ctx->slot_offset[LOOM_SLOT_XB], hidden,
					     (size_t)n_out * (size_t)ctx->model->hp.n_embd * sizeof(float));
	if (ctx->logits_in_place)
		return LOOM_OK;
	return loom_backend_download(be, &ctx->scratch, ctx->slot_offset[LOOM_SLOT_LOGITS], ctx->logits,
				     (size_t)n_out * (size_t)ctx->model->hp.n_vocab * sizeof(float));
}

/* Whether any of x[0..n) is inf or NaN: all exponent bits set. One pass
 * of integer compares the compiler vectorizes, where isfinite with an early
 * return takes a branch per logit (a vocabulary of 32000 then costs 1% of
 * a small model's decode step). */
static bool any_nonfinite(const float *x, int32_t n)
{
	uint32_t any = 0;
	for (int32_t i = 0; i < n; i++) {
		uint32_t bits;
		memcpy(&bits, x + i, sizeof(bits));
		any |= (bits & 0x7f800000u) == 0x7f800000u;
	}
	return any != 0;
}

/* Weights that make the activations overflow (a damaged or hostile file)
 * give logits of inf or NaN, which a sampler would pick from as if they
 * meant something. */
static loom_status check_logits(const loom_context *ctx, int n_out)
{
	const int32_t n_vocab = ctx->model->hp.n_vocab;
	for (int r = 0; r < n_out; r++) {
		const float *row = ctx->logits + (size_t)r * (size_t)n_vocab;
		if (!any_nonfinite(row, n_vocab))
			continue;
		int32_t v = 0;
		while (isfinite(row[v]))
			v++;
		return loom_error(LOOM_ERR_BAD_FORMAT,
				  "%s: batch token %d has a logit of %g (token %d): the model's activations overflow",
				  ctx->model->path, ctx->out_ids[r], (double)row[v], v);
	}
	return LOOM_OK;
}

/* Cells for the batch's n tokens in the cache, and in the windowed
 * layers' cache when the model has one: after checking that their windows
 * are whole there, and making room. */
static loom_status claim_cells(loom_context *ctx, int n)
{
	loom_kv_cache *swa = &ctx->kv_swa;
	const uint32_t w = (uint32_t)ctx->model->hp.n_swa;
	loom_status st = LOOM_OK;
	if (swa->n_cells > 0) {
		const uint32_t cells = swa->n_cells;
		st = loom_kv_check_windows(&ctx->kv, swa, n, ctx->pos, ctx->seq, w);
		if (st == LOOM_OK)
			st = loom_kv_make_room(swa, ctx->model, n, ctx->pos, ctx->seq, w, ctx->params.n_ctx);
		/* A grown cache moved: the graph's views of it are stale. */
		if (swa->n_cells != cells)
			ctx->built.valid = false;
		if (st != LOOM_OK)
			return st;
	}
	if ((st = loom_kv_claim(&ctx->kv, n, ctx->pos, ctx->seq, ctx->cells)) != LOOM_OK)
		return st;
	if (swa->n_cells > 0 && (st = loom_kv_claim(swa, n, ctx->pos, ctx->seq, ctx->cells_swa)) != LOOM_OK)
		loom_kv_unclaim(&ctx->kv, n, ctx->cells);
	return st;
}

static void unclaim_cells(loom_context *ctx, int n)
{
	loom_kv_unclaim(&ctx->kv, n, ctx->cells);
	if (ctx->kv_swa.n_cells > 0)
		loom_kv_unclaim(&ctx->kv_swa, n, ctx->cells_swa);
}

loom_status loom_decode_sized(loom_context *ctx, const loom_batch *batch, size_t size)
{
	loom_batch b = {0};
	if (batch != NULL) {
		loom_status st = loom_struct_in(&loom_batch_desc, &b, batch, size);
		if (st != LOOM_OK)
			return st;
	}
	return loom_decode_step(ctx, batch != NULL ? &b : NULL, LOOM_STEP_LOGITS, NULL);
}

loom_status loom_decode_step(loom_context *ctx, const loom_batch *batch, loom_step_output output, float *hidden)
{
	int n_out;
	if (ctx == NULL || batch == NULL || batch->tokens == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_decode: context, batch and tokens are required");
	if (batch->n_tokens < 1 || (uint32_t)batch->n_tokens > ctx->params.n_batch)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "a batch holds 1 to %u tokens, not %d", ctx->params.n_batch,
				  batch->n_tokens);
	ctx->n_batch_tokens = 0;
	const double t0 = ctx->profiling ? loom_now_s() : 0;
	if (ctx->abort_fn != NULL && ctx->abort_fn(ctx->abort_user))
		return loom_error(LOOM_ERR_CANCELLED, "cancelled by the context's abort hook");
	loom_status st = read_batch(ctx, batch, &n_out);
	if (st != LOOM_OK)
		return st;
	if ((st = claim_cells(ctx, batch->n_tokens)) != LOOM_OK)
		return st;
	if (n_out == 0) {
		/* The step still has to fill the cache; compute one row's output. */
		ctx->out_ids[0] = batch->n_tokens - 1;
		n_out = 1;
	}
	st = run_step(ctx, batch->n_tokens, n_out, output, hidden);
	if (st == LOOM_OK && output == LOOM_STEP_LOGITS)
		st = check_logits(ctx, n_out);
	if (st != LOOM_OK) {
		unclaim_cells(ctx, batch->n_tokens);
		return st;
	}
	/* A step of hidden states leaves no logits to read. */
	ctx->n_batch_tokens = output == LOOM_STEP_LOGITS ? batch->n_tokens : 0;
	if (ctx->profiling)
		profile_add_step(ctx, (loom_now_s() - t0) * 1e3);
	return LOOM_OK;
}

const float *loom_get_logits(loom_context *ctx, int32_t i)
{
	if (ctx == NULL || i < 0 || i >= ctx->n_batch_tokens || ctx->logit_row[i] < 0) {
		loom_error(LOOM_ERR_INVALID_ARGUMENT, "no logits for batch token %d", i);
		return NULL;
	}
	return ctx->logits + (size_t)ctx->logit_row[i] * (size_t)ctx->model->hp.n_vocab;
}

/* A sequence id a cache operation can name. */
static loom_status check_seq(const char *fn, const loom_context *ctx, int32_t seq_id)
{
	if (ctx == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "%s: context is NULL", fn);
	if (seq_id < 0 || seq_id >= LOOM_MAX_SEQ)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "%s: sequence id %d is outside [0, %d)", fn, seq_id,
				  LOOM_MAX_SEQ);
	return LOOM_OK;
}

loom_status loom_kv_seq_remove(loom_context *ctx, int32_t seq_id, int32_t p0, int32_t p1)
{
	loom_status st = check_seq("loom_kv_seq_remove", ctx, seq_id < 0 ? 0 : seq_id);
	if (st == LOOM_OK)
		loom_kv_remove(&ctx->kv, seq_id, p0 < 0 ? 0 : p0, p1);
	if (st == LOOM_OK && ctx->kv_swa.n_cells > 0)
		loom_kv_remove(&ctx->kv_swa, seq_id, p0 < 0 ? 0 : p0, p1);
	return st;
}

loom_status loom_kv_seq_copy(loom_context *ctx, int32_t src, int32_t dst, int32_t p0, int32_t p1)
{
	loom_status st = check_seq("loom_kv_seq_copy", ctx, src);
	if (st == LOOM_OK)
		st = check_seq("loom_kv_seq_copy", ctx, dst);
	if (st == LOOM_OK)
		loom_kv_copy(&ctx->kv, src, dst, p0 < 0 ? 0 : p0, p1);
	if (st == LOOM_OK && ctx->kv_swa.n_cells > 0)
		loom_kv_copy(&ctx->kv_swa, src, dst, p0 < 0 ? 0 : p0, p1);
	return st;
}

loom_status loom_kv_seq_keep(loom_context *ctx, int32_t seq_id)
{
	loom_status st = check_seq("loom_kv_seq_keep", ctx, seq_id);
	if (st == LOOM_OK)
		loom_kv_keep(&ctx->kv, seq_id);
	if (st == LOOM_OK && ctx->kv_swa.n_cells > 0)
		loom_kv_keep(&ctx->kv_swa, seq_id);
	return st;
}

void loom_kv_clear(loom_context *ctx)
{
	if (ctx == NULL)
		return;
	loom_kv_remove(&ctx->kv, -1, 0, -1);
	if (ctx->kv_swa.n_cells > 0)
		loom_kv_remove(&ctx->kv_swa, -1, 0, -1);
}

int32_t loom_kv_seq_pos_max(const loom_context *ctx, int32_t seq_id)
{
	return ctx != NULL && seq_id >= 0 && seq_id < LOOM_MAX_SEQ ? loom_kv_pos_max(&ctx->kv, seq_id) : -1;
}

int32_t loom_kv_seq_resume_min(const loom_context *ctx, int32_t seq_id)
{
	if (ctx == NULL || seq_id < 0 || seq_id >= LOOM_MAX_SEQ || ctx->kv_swa.n_cells == 0)
		return 0;
	return loom_kv_resume_min(&ctx->kv, &ctx->kv_swa, seq_id, (uint32_t)ctx->model->hp.n_swa);
}

uint32_t loom_kv_used(const loom_context *ctx)
{
	return ctx != NULL ? ctx->kv.used : 0;
}
