/* kv_shift.c - moving a sequence's cached tokens to other positions (a
 * chat that drops its oldest turns keeps the rest without evaluating it
 * again). The keys were rotated for their old positions when they were
 * stored; RoPE of p + d is RoPE of p turned by d, so each moved key is
 * turned by d on the backend and stored back. Values do not depend on the
 * position. */
#include "infer/context.h"

#include "runtime/error.h"

/* Turns the keys of the n cells of kv in ctx->cells by ctx->pos (the
 * deltas). */
static loom_status turn_keys(loom_context *ctx, const loom_kv_cache *kv, int n)
{
	loom_backend *be = &ctx->model->rt->backend;
	loom_graph graph;
	loom_status st = loom_forward_build_shift(ctx, kv, n, &graph);
	if (st == LOOM_OK)
		st = loom_forward_check_graph(ctx, &graph);
	if (st == LOOM_OK)
		st = loom_backend_upload(be, &ctx->scratch, 0, ctx->inputs, ctx->inputs_bytes);
	if (st == LOOM_OK)
		st = loom_backend_compute(be, &graph);
	return st;
}

/* Moves seq_id's cells of kv at positions [p0, p1) by delta, a batch of
 * them at a time, their keys turned in the layers kv holds. */
static loom_status shift_cells(loom_context *ctx, loom_kv_cache *kv, int32_t seq_id, int32_t p0, int32_t p1,
			       int32_t delta)
{
	loom_status st = LOOM_OK;
	uint32_t j = 0;
	while (st == LOOM_OK && j < kv->n_cells) {
		int n = 0;
		uint32_t first = j;
		for (; j < kv->n_cells && (uint32_t)n < ctx->params.n_batch; j++) {
			const loom_kv_cell *c = &kv->cells[j];
			if (c->pos >= p0 && (p1 < 0 || c->pos < p1) && loom_kv_cell_has(c, seq_id)) {
				ctx->cells[n] = (int32_t)j;
				ctx->pos[n++] = delta;
			}
		}
		if (n > 0)
			st = turn_keys(ctx, kv, n);
		for (uint32_t k = first; st == LOOM_OK && k < j; k++) {
			loom_kv_cell *c = &kv->cells[k];
			if (c->pos >= p0 && (p1 < 0 || c->pos < p1) && loom_kv_cell_has(c, seq_id))
				c->pos += delta;
		}
	}
	return st;
}

loom_status loom_kv_seq_shift(loom_context *ctx, int32_t seq_id, int32_t p0, int32_t p1, int32_t delta)
{
	if (ctx == NULL || seq_id < 0 || seq_id >= LOOM_MAX_SEQ)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_kv_seq_shift: a context and a sequence id in [0, %d)",
				  LOOM_MAX_SEQ);
	if (ctx->model->contract->positions != LOOM_POSITIONS_ROPE)
		return loom_error(LOOM_ERR_UNSUPPORTED,
				  "loom_kv_seq_shift: %s's positions are not rotary; its cached tokens cannot move",
				  ctx->model->arch);
	p0 = p0 < 0 ? 0 : p0;
	if (delta == 0)
		return LOOM_OK;
	/* Tokens that would move before position 0 are dropped. */
	if (delta < 0) {
		int32_t end = p1 >= 0 && p1 < -delta ? p1 : -delta;
		if (end > p0)
			loom_kv_seq_remove(ctx, seq_id, p0, end);
	}
	loom_status st = shift_cells(ctx, &ctx->kv, seq_id, p0, p1, delta);
	if (st == LOOM_OK && ctx->kv_swa.n_cells > 0)
		st = shift_cells(ctx, &ctx->kv_swa, seq_id, p0, p1, delta);
	ctx->n_batch_tokens = 0;
	return st;
}
