/* generate.c - the generation loop: a prompt (text, tokenized here, or
 * tokens), then one token at a time from the token step (generator.c),
 * with the context shifted when it fills if asked. */
#include "infer/context.h"

#include "runtime/error.h"
#include "runtime/struct_size.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

loom_status loom_generate_params_init(loom_generate_params *p, size_t size)
{
	static const loom_generate_params defaults = {
		.size = sizeof(loom_generate_params),
		.n_predict = 128,
		.sampling = NULL,
		.stop = NULL,
		.n_stop = 0,
		.seq_id = 0,
		.keep_cache = false,
		.add_special = true,
		.parse_special = false,
		.ignore_eos = false,
		.context_shift = false,
		.n_keep = 0,
		.grammar = NULL,
	};
	return loom_params_init(&loom_generate_params_desc, p, size, &defaults);
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

typedef struct gen_state {
	loom_context *ctx;
	const loom_generate_params *params;
	loom_generator *gen;
	const loom_token *tokens;
	size_t n_tokens;
	int32_t start; /* position of the prompt's first token: what the cache already holds */
	loom_generate_stats stats;
} gen_state;

/* The text's tokens, malloc'd into *out. An empty text starts from BOS, as
 * llama.cpp does, unless it is to continue what the sequence holds. */
static loom_status tokenize_prompt(loom_context *ctx, const char *prompt, const loom_generate_params *p,
				   loom_token **out, size_t *n)
{
	const loom_model *m = ctx->model;
	size_t len = strlen(prompt), need = 0;
	loom_status st = loom_tokenize(m, prompt, len, p->add_special, p->parse_special, NULL, 0, &need);
	if (st != LOOM_OK && st != LOOM_ERR_BUFFER_TOO_SMALL)
		return st;
	loom_token *toks = malloc((need + 1) * sizeof(loom_token));
	if (toks == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	*out = toks;
	if ((st = loom_tokenize(m, prompt, len, p->add_special, p->parse_special, toks, need, n)) != LOOM_OK)
		return st;
	if (*n > 0)
		return LOOM_OK;
	if (p->keep_cache && loom_kv_seq_pos_max(ctx, p->seq_id) >= 0)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "the prompt to continue the sequence with is empty");
	if (loom_token_bos(m) < 0)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "the prompt is empty and the model has no BOS token");
	toks[(*n)++] = loom_token_bos(m);
	return LOOM_OK;
}

/* Evaluates the prompt in pieces of at most n_batch tokens. */
static loom_status eval_prompt(gen_state *g)
{
	const int32_t seq = g->params->seq_id;
	const size_t n_batch = g->ctx->params.n_batch;
	int32_t *pos = malloc(n_batch * sizeof(int32_t)), *seqs = malloc(n_batch * sizeof(int32_t));
	int8_t *want = calloc(n_batch, 1);
	loom_status st = LOOM_OK;
	if (pos == NULL || seqs == NULL || want == NULL)
		st = loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	for (size_t start = 0; st == LOOM_OK && start < g->n_tokens; start += n_batch) {
		size_t n = g->n_tokens - start < n_batch ? g->n_tokens - start : n_batch;
		for (size_t i = 0; i < n; i++) {
			pos[i] = g->start + (int32_t)(start + i);
			seqs[i] = seq;
			want[i] = start + i == g->n_tokens - 1;
		}
		loom_batch b = {.n_tokens = (int32_t)n, .tokens = g->tokens + start, .pos = pos, .seq_id = seqs, .logits = want};
		st = loom_decode(g->ctx, &b);
	}
	free(pos);
	free(seqs);
	free(want);
	return st;
}

/* Makes room as llama.cpp's context shift does: the first n_keep
 * positions stay, the older half of the n_past - n_keep after them is
 * dropped and the rest moves down over it. *n_past becomes the new end;
 * LOOM_ERR_CONTEXT_FULL if nothing can be dropped. */
static loom_status shift_context(gen_state *g, int32_t *n_past)
{
	const int32_t seq = g->params->seq_id;
	int32_t keep = g->params->n_keep < 0 ? 0 : g->params->n_keep;
	if (keep > *n_past)
		keep = *n_past;
	const int32_t discard = (*n_past - keep) / 2;
	if (discard <= 0)
		return loom_error(LOOM_ERR_CONTEXT_FULL, "the context (%u tokens) is full and a shift keeping %d "
				  "tokens frees none", loom_context_n_ctx(g->ctx), keep);
	loom_status st = loom_kv_seq_remove(g->ctx, seq, keep, keep + discard);
	if (st == LOOM_OK)
		st = loom_kv_seq_shift(g->ctx, seq, keep + discard, -1, -discard);
	if (st != LOOM_OK)
		return st;
	*n_past -= discard;
	g->stats.n_shifts++;
	g->stats.n_discarded += discard;
	return LOOM_OK;
}

static loom_status generate_loop(gen_state *g, loom_token_fn on_token, void *user)
{
	loom_context *ctx = g->ctx;
	const loom_generate_params *p = g->params;
	const uint32_t n_ctx = loom_context_n_ctx(ctx);
	int32_t pos = g->start + (int32_t)g->n_tokens;
	const float *logits = loom_get_logits(ctx, (int32_t)((g->n_tokens - 1) % ctx->params.n_batch));
	loom_status st;

	for (;;) {
		/* Whether a token after this one could be evaluated: a full
		 * context is shifted first if asked, unless this token is the
		 * last one wanted anyway. */
		bool enough = p->n_predict >= 0 && loom_generator_n_generated(g->gen) + 1 >= p->n_predict;
		bool full = (uint32_t)pos + 1 > n_ctx || loom_kv_used(ctx) >= n_ctx;
		if (full && !enough && p->context_shift && (uint32_t)pos + 1 > n_ctx) {
			if ((st = shift_context(g, &pos)) != LOOM_OK)
				return st;
			full = loom_kv_used(ctx) >= n_ctx;
		}
		loom_generated out;
		if ((st = loom_generator_next(g->gen, logits, full, &out)) != LOOM_OK)
			return st;
		g->stats.n_generated++;
		bool go_on = on_token == NULL || on_token(user, out.token, out.text, out.len);
		/* An end-of-generation token or a stop string ends it whatever the
		 * callback says; the callback's no comes before the length. */
		if (out.done && (out.stop_reason == LOOM_STOP_EOG || out.stop_reason == LOOM_STOP_STRING)) {
			g->stats.stop_reason = out.stop_reason;
			return LOOM_OK;
		}
		if (!go_on) {
			g->stats.stop_reason = LOOM_STOP_CALLBACK;
			return LOOM_OK;
		}
		if (out.done) {
			g->stats.stop_reason = out.stop_reason;
			return LOOM_OK;
		}
		loom_batch b = {.n_tokens = 1, .tokens = &out.token, .pos = &pos, .seq_id = &p->seq_id, .logits = NULL};
		if ((st = loom_decode(ctx, &b)) != LOOM_OK)
			return st;
		pos++;
		logits = loom_get_logits(ctx, 0);
	}
}

/* What loom_generate and loom_generate_tokens share: the arguments'
 * checks, the host's params read over the defaults in *p. */
static loom_status check_args(const char *fn, const loom_context *ctx, const void *prompt,
			      const loom_generate_params *given, loom_generate_params *p, const loom_generate_stats *stats,
			      size_t stats_size)
{
	if (ctx == NULL || prompt == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "%s: context and prompt are required", fn);
	loom_status st = loom_params_in(&loom_generate_params_desc, p, given);
	if (st == LOOM_OK && stats != NULL)
		st = loom_struct_check(&loom_generate_stats_desc, stats_size);
	if (st != LOOM_OK)
		return st;
	if (p->seq_id < 0 || p->seq_id >= LOOM_MAX_SEQ || (p->n_stop > 0 && p->stop == NULL))
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "%s: bad seq_id or stop list", fn);
	return LOOM_OK;
}

/* Evaluates the prompt's tokens after what the cache keeps, then
 * generates. */
static loom_status generate(loom_context *ctx, const loom_token *prompt, size_t n_prompt,
			    const loom_generate_params *params, loom_token_fn on_token, void *user,
			    loom_generate_stats *stats, size_t stats_size)
{
	gen_state g = {.ctx = ctx, .params = params, .tokens = prompt, .n_tokens = n_prompt};
	if (params->keep_cache)
		g.start = loom_kv_seq_pos_max(ctx, params->seq_id) + 1;
	else
		loom_kv_seq_remove(ctx, params->seq_id, 0, -1);
	loom_status st = LOOM_OK;
	/* What the cache keeps may be shifted to make room for the prompt;
	 * the prompt itself is never cut. */
	while (st == LOOM_OK && params->context_shift && g.start > 0 &&
	       (size_t)g.start + n_prompt >= loom_context_n_ctx(ctx))
		st = shift_context(&g, &g.start);
	if (st == LOOM_OK && (size_t)g.start + n_prompt >= loom_context_n_ctx(ctx))
		st = loom_error(LOOM_ERR_CONTEXT_FULL, "the prompt has %zu tokens after %d cached; the context holds %u",
				n_prompt, g.start, loom_context_n_ctx(ctx));
	loom_generator_params gp = loom_generator_default_params();
	gp.sampling = params->sampling;
	gp.n_predict = params->n_predict;
	gp.stop = params->stop;
	gp.n_stop = params->n_stop;
	gp.ignore_eos = params->ignore_eos;
	if (st == LOOM_OK)
		st = loom_generator_create(ctx->model, &gp, &g.gen);
	if (st == LOOM_OK && params->grammar != NULL)
		st = loom_generator_set_grammar(g.gen, params->grammar);
	if (st == LOOM_OK) {
		g.stats.n_prompt = (int32_t)n_prompt;
		loom_generator_accept(g.gen, prompt, n_prompt);
		double t0 = now_ms();
		st = eval_prompt(&g);
		double t1 = now_ms();
		g.stats.prompt_ms = t1 - t0;
		if (st == LOOM_OK && params->n_predict != 0)
			st = generate_loop(&g, on_token, user);
		g.stats.generate_ms = now_ms() - t1;
	}
	if (stats != NULL)
		loom_struct_out(&loom_generate_stats_desc, stats, stats_size, &g.stats);
	loom_generator_free(g.gen);
	return st;
}

loom_status loom_generate_sized(loom_context *ctx, const char *prompt, const loom_generate_params *given,
				loom_token_fn on_token, void *user, loom_generate_stats *stats, size_t stats_size)
{
	loom_generate_params params = loom_generate_default_params();
	loom_status st = check_args("loom_generate", ctx, prompt, given, &params, stats, stats_size);
	if (st != LOOM_OK)
		return st;
	loom_token *tokens = NULL;
	size_t n = 0;
	if ((st = tokenize_prompt(ctx, prompt, &params, &tokens, &n)) == LOOM_OK)
		st = generate(ctx, tokens, n, &params, on_token, user, stats, stats_size);
	free(tokens);
	return st;
}

loom_status loom_generate_tokens_sized(loom_context *ctx, const loom_token *prompt, size_t n_prompt,
				       const loom_generate_params *given, loom_token_fn on_token, void *user,
				       loom_generate_stats *stats, size_t stats_size)
{
	loom_generate_params params = loom_generate_default_params();
	loom_status st = check_args("loom_generate_tokens", ctx, prompt, given, &params, stats, stats_size);
	if (st != LOOM_OK)
		return st;
	if (n_prompt == 0)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_generate_tokens: the prompt has no tokens");
	return generate(ctx, prompt, n_prompt, &params, on_token, user, stats, stats_size);
}
