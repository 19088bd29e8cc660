/* generate.c - the generation loop: prompt, then one sampled token at a
 * time, its text passed on through a streaming detokenizer. */
#include "infer/context.h"

#include "runtime/error.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

loom_generate_params loom_generate_default_params(void)
{
	loom_generate_params p = {
		.n_predict = 128,
		.sampling = loom_sampler_default_params(),
		.stop = NULL,
		.n_stop = 0,
		.seq_id = 0,
		.keep_cache = false,
		.add_special = true,
		.parse_special = false,
	};
	return p;
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
	loom_sampler *sampler;
	loom_token *tokens;
	size_t n_tokens;
	int32_t start; /* position of the prompt's first token: what the cache already holds */
	loom_detokenizer *text;
	loom_generate_stats stats;
} gen_state;

static loom_status tokenize_prompt(gen_state *g, const char *prompt)
{
	const loom_model *m = g->ctx->model;
	size_t len = strlen(prompt), need = 0;
	bool special = g->params->parse_special;
	loom_status st = loom_tokenize(m, prompt, len, g->params->add_special, special, NULL, 0, &need);
	if (st != LOOM_OK && st != LOOM_ERR_BUFFER_TOO_SMALL)
		return st;
	g->tokens = malloc((need + 1) * sizeof(loom_token));
	if (g->tokens == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	if ((st = loom_tokenize(m, prompt, len, g->params->add_special, special, g->tokens, need, &g->n_tokens)) != LOOM_OK)
		return st;
	if (g->n_tokens == 0 && g->start > 0)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "the prompt to continue the sequence with is empty");
	if (g->n_tokens == 0) {
		/* An empty prompt starts from BOS, as llama.cpp does. */
		if (loom_token_bos(m) < 0)
			return loom_error(LOOM_ERR_INVALID_ARGUMENT, "the prompt is empty and the model has no BOS token");
		g->tokens[g->n_tokens++] = loom_token_bos(m);
	}
	if (g->start + g->n_tokens >= loom_context_n_ctx(g->ctx))
		return loom_error(LOOM_ERR_CONTEXT_FULL, "the prompt has %zu tokens after %d cached; the context holds %u",
				  g->n_tokens, g->start, loom_context_n_ctx(g->ctx));
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

static loom_status generate_loop(gen_state *g, loom_token_fn on_token, void *user)
{
	loom_context *ctx = g->ctx;
	const loom_model *m = ctx->model;
	const loom_generate_params *p = g->params;
	const int32_t n_vocab = loom_model_n_vocab(m);
	int32_t pos = g->start + (int32_t)g->n_tokens;
	const float *logits = loom_get_logits(ctx, (int32_t)((g->n_tokens - 1) % ctx->params.n_batch));
	const char *text;
	size_t len;
	loom_status st;

	for (;;) {
		loom_token tok = loom_sampler_sample(g->sampler, logits, n_vocab);
		if (tok < 0)
			return loom_error(LOOM_ERR_NO_MEMORY, "sampling failed");
		loom_sampler_accept(g->sampler, tok);
		g->stats.n_generated++;
		if (loom_token_is_eog(m, tok)) {
			g->stats.stop_reason = LOOM_STOP_EOG;
			if ((st = loom_detokenizer_finish(g->text, &text, &len)) == LOOM_OK && on_token != NULL)
				on_token(user, tok, text, len);
			return st;
		}
		bool full = (uint32_t)pos + 1 > loom_context_n_ctx(ctx) || loom_kv_used(ctx) >= loom_context_n_ctx(ctx);
		bool last = (p->n_predict >= 0 && g->stats.n_generated >= p->n_predict) || full;
		bool stopped = false;
		if ((st = loom_detokenizer_push(g->text, tok, last, &text, &len, &stopped)) != LOOM_OK)
			return st;
		bool go_on = on_token == NULL || on_token(user, tok, text, len);
		if (stopped) {
			g->stats.stop_reason = LOOM_STOP_STRING;
			return LOOM_OK;
		}
		if (!go_on) {
			g->stats.stop_reason = LOOM_STOP_CALLBACK;
			return LOOM_OK;
		}
		if (last) {
			g->stats.stop_reason = full ? LOOM_STOP_CONTEXT : LOOM_STOP_LENGTH;
			return LOOM_OK;
		}
		loom_batch b = {.n_tokens = 1, .tokens = &tok, .pos = &pos, .seq_id = &p->seq_id, .logits = NULL};
		if ((st = loom_decode(ctx, &b)) != LOOM_OK)
			return st;
		pos++;
		logits = loom_get_logits(ctx, 0);
	}
}

loom_status loom_generate(loom_context *ctx, const char *prompt, const loom_generate_params *params,
			  loom_token_fn on_token, void *user, loom_generate_stats *stats)
{
	loom_generate_params defaults = loom_generate_default_params();
	if (ctx == NULL || prompt == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_generate: context and prompt are required");
	if (params == NULL)
		params = &defaults;
	if (params->seq_id < 0 || params->seq_id >= LOOM_MAX_SEQ || (params->n_stop > 0 && params->stop == NULL))
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_generate: bad seq_id or stop list");
	gen_state g = {.ctx = ctx, .params = params};
	loom_status st = loom_sampler_create(&params->sampling, &g.sampler);
	if (st == LOOM_OK)
		st = loom_detokenizer_create(ctx->model, params->stop, params->n_stop, &g.text);
	if (st == LOOM_OK) {
		if (params->keep_cache)
			g.start = loom_kv_seq_pos_max(ctx, params->seq_id) + 1;
		else
			loom_kv_seq_remove(ctx, params->seq_id, 0, -1);
		st = tokenize_prompt(&g, prompt);
	}
	if (st == LOOM_OK) {
		g.stats.n_prompt = (int32_t)g.n_tokens;
		for (size_t i = 0; i < g.n_tokens; i++)
			loom_sampler_accept(g.sampler, g.tokens[i]);
		double t0 = now_ms();
		st = eval_prompt(&g);
		double t1 = now_ms();
		g.stats.prompt_ms = t1 - t0;
		if (st == LOOM_OK && params->n_predict != 0)
			st = generate_loop(&g, on_token, user);
		g.stats.generate_ms = now_ms() - t1;
	}
	if (stats != NULL)
		*stats = g.stats;
	loom_sampler_free(g.sampler);
	free(g.tokens);
	loom_detokenizer_free(g.text);
	return st;
}
