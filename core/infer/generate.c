/* generate.c - the generation loop: prompt, then one sampled token at a
 * time, with stop strings and whole UTF-8 characters in the text passed on. */
#include "infer/context.h"

#include "runtime/array_grow.h"
#include "runtime/error.h"
#include "text/unicode.h"

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

/* Text generated but not yet passed to the caller. */
typedef struct pending_text {
	char *buf;
	size_t len, cap;
} pending_text;

static loom_status pending_append(pending_text *p, const char *s, size_t n)
{
	char *b = loom_array_grow(p->buf, &p->cap, p->len + n + 1, 1);
	if (b == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	p->buf = b;
	memcpy(p->buf + p->len, s, n);
	p->len += n;
	p->buf[p->len] = '\0';
	return LOOM_OK;
}

/* Bytes at the end of s that start a UTF-8 character not yet complete. */
static size_t incomplete_utf8_tail(const char *s, size_t len)
{
	for (size_t back = 1; back <= 4 && back <= len; back++) {
		unsigned char c = (unsigned char)s[len - back];
		if ((c & 0xC0) == 0x80)
			continue; /* continuation byte: keep looking for the lead */
		size_t need = loom_utf8_seq_len(c);
		return need > back ? back : 0;
	}
	return 0;
}

/* Length of the longest suffix of s that is a proper prefix of a stop string. */
static size_t partial_stop_tail(const char *s, size_t len, const char *const *stop, size_t n_stop)
{
	size_t best = 0;
	for (size_t i = 0; i < n_stop; i++) {
		size_t sl = strlen(stop[i]);
		for (size_t k = sl > 0 ? sl - 1 : 0; k > best; k--)
			if (k <= len && memcmp(s + len - k, stop[i], k) == 0) {
				best = k;
				break;
			}
	}
	return best;
}

/* Where the first stop string starts in s, or -1. */
static long find_stop(const char *s, const char *const *stop, size_t n_stop)
{
	long first = -1;
	for (size_t i = 0; i < n_stop; i++) {
		if (stop[i][0] == '\0')
			continue;
		const char *at = strstr(s, stop[i]);
		if (at != NULL && (first < 0 || at - s < first))
			first = at - s;
	}
	return first;
}

typedef struct gen_state {
	loom_context *ctx;
	const loom_generate_params *params;
	loom_sampler *sampler;
	loom_token *tokens;
	size_t n_tokens;
	int32_t start; /* position of the prompt's first token: what the cache already holds */
	pending_text text;
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

/* Passes on what of the pending text is safe to show: everything when
 * final, else all but a possible stop-string start or half a character.
 * Returns false if the caller asked to stop. */
static bool emit(gen_state *g, loom_token tok, size_t upto, loom_token_fn on_token, void *user)
{
	bool go_on = on_token == NULL || on_token(user, tok, g->text.buf, upto);
	memmove(g->text.buf, g->text.buf + upto, g->text.len - upto);
	g->text.len -= upto;
	g->text.buf[g->text.len] = '\0';
	return go_on;
}

static loom_status generate_loop(gen_state *g, loom_token_fn on_token, void *user)
{
	loom_context *ctx = g->ctx;
	const loom_model *m = ctx->model;
	const loom_generate_params *p = g->params;
	const int32_t n_vocab = loom_model_n_vocab(m);
	int32_t pos = g->start + (int32_t)g->n_tokens;
	const float *logits = loom_get_logits(ctx, (int32_t)((g->n_tokens - 1) % ctx->params.n_batch));
	char piece[256];
	loom_status st = LOOM_OK;

	if ((st = pending_append(&g->text, "", 0)) != LOOM_OK)
		return st;
	for (;;) {
		loom_token tok = loom_sampler_sample(g->sampler, logits, n_vocab);
		if (tok < 0)
			return loom_error(LOOM_ERR_NO_MEMORY, "sampling failed");
		loom_sampler_accept(g->sampler, tok);
		g->stats.n_generated++;
		if (loom_token_is_eog(m, tok)) {
			g->stats.stop_reason = LOOM_STOP_EOG;
			emit(g, tok, g->text.len, on_token, user);
			return LOOM_OK;
		}
		size_t n = 0;
		st = loom_token_to_piece(m, tok, false, piece, sizeof(piece), &n);
		if (st == LOOM_OK)
			st = pending_append(&g->text, piece, n);
		if (st != LOOM_OK)
			return st;

		long at = find_stop(g->text.buf, p->stop, p->n_stop);
		if (at >= 0) {
			g->stats.stop_reason = LOOM_STOP_STRING;
			emit(g, tok, (size_t)at, on_token, user);
			return LOOM_OK;
		}
		bool full = (uint32_t)pos + 1 > loom_context_n_ctx(ctx) || loom_kv_used(ctx) >= loom_context_n_ctx(ctx);
		bool last = (p->n_predict >= 0 && g->stats.n_generated >= p->n_predict) || full;
		size_t hold = 0;
		if (!last) {
			hold = partial_stop_tail(g->text.buf, g->text.len, p->stop, p->n_stop);
			size_t utf = incomplete_utf8_tail(g->text.buf, g->text.len);
			hold = utf > hold ? utf : hold;
		}
		if (!emit(g, tok, g->text.len - hold, on_token, user)) {
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
	if (params->seq_id < 0 || (params->n_stop > 0 && params->stop == NULL))
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_generate: bad seq_id or stop list");
	gen_state g = {.ctx = ctx, .params = params};
	loom_status st = loom_sampler_create(&params->sampling, &g.sampler);
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
	free(g.text.buf);
	return st;
}
