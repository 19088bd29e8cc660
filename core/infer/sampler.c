/* sampler.c - from logits to a token: repetition, frequency and presence
 * penalties, top-k, top-p, min-p, temperature, then a seeded draw (or
 * greedy), in the order of llama.cpp's default chain. No path sorts the
 * vocabulary: the penalties patch only the tokens in the history, top-k
 * selects its candidates in one pass (logit_row.h), and without top-k the
 * draw runs over the whole row in a few vectorized passes. The rules, in
 * the order "higher logit first, lower id first among equals":
 *   top-k   keeps the first k;
 *   top-p   keeps a token while the untempered mass ranked before it (of
 *           what top-k kept) is below top_p of that whole; the first always;
 *   min-p   keeps the logits >= the largest + ln(min_p);
 *   the draw follows exp((x - max) / T) over what all three keep. */
#include "infer/sampler.h"

#include "grammar/grammar_sampler.h"
#include "infer/logit_row.h"
#include "runtime/error.h"
#include "runtime/struct_size.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct loom_sampler {
	loom_sampler_params params;
	uint64_t rng[4];         /* xoshiro256** state */
	loom_token *history;     /* ring of the last repeat_last_n tokens, which every penalty looks at */
	int32_t n_history, history_next;
	/* Scratch, grown to what a row needs: the patched logits (penalised
	 * and banned tokens), the history sorted to count it, top-k's
	 * candidates, a draw's block sums. */
	logit_patch *patch;
	int32_t cap_patch;
	loom_token *sorted;
	logit_cand *cand;
	int32_t cap_cand;
	float *block_sum;
	int32_t cap_blocks;
	loom_grammar_follow *grammar; /* NULL: none */
	logit_patch *bias;            /* added to these tokens' logits (OpenAI's logit_bias) */
	int32_t n_bias;
};

loom_status loom_sampler_params_init(loom_sampler_params *p, size_t size)
{
	static const loom_sampler_params defaults = {
		.size = sizeof(loom_sampler_params),
		.temperature = 0.8f,
		.top_k = 40,
		.top_p = 0.95f,
		.min_p = 0.05f,
		.repeat_penalty = 1.0f,
		.repeat_last_n = 64,
		.seed = 0,
		.presence_penalty = 0.0f,
		.frequency_penalty = 0.0f,
	};
	return loom_params_init(&loom_sampler_params_desc, p, size, &defaults);
}

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static uint64_t next_u64(loom_sampler *s)
{
	uint64_t *r = s->rng;
	uint64_t out = rotl(r[1] * 5, 7) * 9, t = r[1] << 17;
	r[2] ^= r[0];
	r[3] ^= r[1];
	r[1] ^= r[2];
	r[0] ^= r[3];
	r[2] ^= t;
	r[3] = rotl(r[3], 45);
	return out;
}

/* Uniform in [0, 1). */
static double next_uniform(loom_sampler *s)
{
	return (double)(next_u64(s) >> 11) * 0x1.0p-53;
}

void loom_sampler_reset(loom_sampler *s)
{
	if (s == NULL)
		return;
	uint64_t x = s->params.seed;
	for (int i = 0; i < 4; i++)
		s->rng[i] = splitmix64(&x);
	s->n_history = 0;
	s->history_next = 0;
	if (s->grammar != NULL)
		loom_grammar_follow_reset(s->grammar);
}

loom_status loom_sampler_create(const loom_sampler_params *given, loom_sampler **out)
{
	loom_sampler_params p = loom_sampler_default_params();
	const loom_sampler_params *params = &p;
	if (out == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_sampler_create: out is NULL");
	*out = NULL;
	loom_status st = loom_params_in(&loom_sampler_params_desc, &p, given);
	if (st != LOOM_OK)
		return st;
	if (!isfinite(params->temperature) || !isfinite(params->top_p) || !isfinite(params->min_p) ||
	    !(params->repeat_penalty > 0) || params->repeat_last_n < 0 ||
	    !(params->presence_penalty >= -2 && params->presence_penalty <= 2) ||
	    !(params->frequency_penalty >= -2 && params->frequency_penalty <= 2))
		return loom_error(LOOM_ERR_INVALID_ARGUMENT,
				  "sampler parameters out of range (repeat penalty must be > 0, repeat_last_n >= 0, "
				  "presence and frequency penalties in [-2, 2])");
	loom_sampler *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	s->params = *params;
	if (params->repeat_last_n > 0) {
		s->history = malloc((size_t)params->repeat_last_n * sizeof(loom_token));
		s->sorted = malloc((size_t)params->repeat_last_n * sizeof(loom_token));
		if (s->history == NULL || s->sorted == NULL) {
			loom_sampler_free(s);
			return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
		}
	}
	loom_sampler_reset(s);
	*out = s;
	return LOOM_OK;
}

void loom_sampler_free(loom_sampler *s)
{
	if (s == NULL)
		return;
	free(s->history);
	free(s->patch);
	free(s->sorted);
	free(s->cand);
	free(s->block_sum);
	loom_grammar_follow_free(s->grammar);
	free(s->bias);
	free(s);
}

void loom_sampler_accept(loom_sampler *s, loom_token token)
{
	if (s != NULL && s->grammar != NULL)
		loom_grammar_follow_accept(s->grammar, token);
	if (s == NULL || s->params.repeat_last_n <= 0)
		return;
	s->history[s->history_next] = token;
	s->history_next = (s->history_next + 1) % s->params.repeat_last_n;
	if (s->n_history < s->params.repeat_last_n)
		s->n_history++;
}

static bool grow(void **p, int32_t *cap, int32_t need, size_t elem)
{
	if (need <= *cap)
		return true;
	void *q = realloc(*p, (size_t)need * elem);
	if (q == NULL)
		return false;
	*p = q;
	*cap = need;
	return true;
}

static int by_id(const void *a, const void *b)
{
	loom_token x = *(const loom_token *)a, y = *(const loom_token *)b;
	return (x > y) - (x < y);
}

/* A banned token's -inf first among patches of the same id. */
static int by_id_banned_first(const void *a, const void *b)
{
	const logit_patch *x = a, *y = b;
	if (x->id != y->id)
		return (x->id > y->id) - (x->id < y->id);
	return (y->logit == -INFINITY) - (x->logit == -INFINITY);
}

/* The patches of this row: each token seen in the history penalised as
 * llama.cpp does (a positive logit divided by the repeat penalty, a
 * negative one multiplied, once however often seen; then count *
 * frequency_penalty + presence_penalty subtracted), and each banned token
 * at -inf. Touches only those tokens. */
static bool make_patches(loom_sampler *s, const float *logits, int32_t n, const loom_token *banned, size_t n_banned,
			 logit_row *row)
{
	const loom_sampler_params *p = &s->params;
	const bool penalise = s->n_history > 0 &&
			      (p->repeat_penalty != 1.0f || p->frequency_penalty != 0.0f || p->presence_penalty != 0.0f);
	int32_t need = (penalise ? s->n_history : 0) + (int32_t)n_banned + s->n_bias, np = 0;
	*row = (logit_row){.x = logits, .n = n};
	if (need == 0)
		return true;
	if (!grow((void **)&s->patch, &s->cap_patch, need, sizeof(*s->patch)))
		return false;
	if (penalise) {
		memcpy(s->sorted, s->history, (size_t)s->n_history * sizeof(loom_token));
		qsort(s->sorted, (size_t)s->n_history, sizeof(loom_token), by_id);
		for (int32_t h = 0; h < s->n_history;) {
			loom_token t = s->sorted[h];
			int32_t count = 0;
			while (h < s->n_history && s->sorted[h] == t)
				h++, count++;
			if (t < 0 || t >= n)
				continue;
			float v = logits[t];
			v = v > 0 ? v / p->repeat_penalty : v * p->repeat_penalty;
			v -= (float)count * p->frequency_penalty + p->presence_penalty;
			s->patch[np++] = (logit_patch){.id = t, .logit = v};
		}
	}
	/* A bias adds to the penalised logit where there is one. */
	const int32_t n_penalised = np;
	for (int32_t i = 0; i < s->n_bias; i++) {
		const logit_patch *b = &s->bias[i];
		if (b->id >= n)
			continue;
		int32_t k = 0;
		while (k < n_penalised && s->patch[k].id != b->id)
			k++;
		if (k < n_penalised)
			s->patch[k].logit += b->logit;
		else
			s->patch[np++] = (logit_patch){.id = b->id, .logit = logits[b->id] + b->logit};
	}
	for (size_t i = 0; i < n_banned; i++)
		if (banned[i] >= 0 && banned[i] < n)
			s->patch[np++] = (logit_patch){.id = banned[i], .logit = -INFINITY};
	qsort(s->patch, (size_t)np, sizeof(*s->patch), by_id_banned_first);
	int32_t kept = 0;
	for (int32_t i = 0; i < np; i++)
		if (kept == 0 || s->patch[i].id != s->patch[kept - 1].id)
			s->patch[kept++] = s->patch[i];
	row->patch = s->patch;
	row->n_patch = kept;
	return true;
}

static loom_status nothing_to_sample(void)
{
	return loom_error(LOOM_ERR_INVALID_ARGUMENT, "nothing to sample: every logit is -inf or NaN");
}

static loom_status infinite_logit(void)
{
	return loom_error(LOOM_ERR_INVALID_ARGUMENT, "a logit is +inf: nothing to sample from");
}

static loom_status out_of_memory(void)
{
	return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
}

/* top-k's candidates, best first: top-p, min-p and the tempered draw over
 * that short list. */
static loom_status sample_candidates(loom_sampler *s, const logit_row *row, int32_t k, loom_token *out)
{
	const loom_sampler_params *p = &s->params;
	if (!grow((void **)&s->cand, &s->cap_cand, 2 * k > 512 ? 2 * k : 512, sizeof(*s->cand)))
		return out_of_memory();
	logit_cand *c = s->cand;
	int32_t n = logit_row_top(row, k, c, s->cap_cand);
	if (n == 0)
		return nothing_to_sample();
	if (c[0].logit == INFINITY)
		return infinite_logit();
	if (p->top_p < 1.0f) {
		double z = 0, before = 0;
		for (int32_t i = 0; i < n; i++)
			z += logit_exp(c[i].logit - c[0].logit);
		int32_t i = 1;
		for (before = logit_exp(0); i < n && before < (double)p->top_p * z; i++)
			before += logit_exp(c[i].logit - c[0].logit);
		n = i;
	}
	if (p->min_p > 0) {
		float floor = p->min_p < 1 ? c[0].logit + (float)log(p->min_p) : c[0].logit;
		int32_t i = 1;
		while (i < n && c[i].logit >= floor)
			i++;
		n = i;
	}
	const float inv_t = 1.0f / p->temperature;
	double z = 0;
	for (int32_t i = 0; i < n; i++)
		z += logit_exp((c[i].logit - c[0].logit) * inv_t);
	double r = next_uniform(s) * z, cum = 0;
	*out = c[n - 1].id;
	for (int32_t i = 0; i < n; i++) {
		cum += logit_exp((c[i].logit - c[0].logit) * inv_t);
		if (r < cum) {
			*out = c[i].id;
			break;
		}
	}
	return LOOM_OK;
}

/* The whole vocabulary, without sorting it. min-p is a floor on the logit
 * (the largest plus ln min_p). The draw walks the tempered weights' block
 * sums to one block and that block's tokens. top-p is decided for the
 * token drawn, by the mass ranked before it: a token past the nucleus
 * means every token from it on is, so the draw is repeated among the ones
 * before it; what is accepted follows the tempered softmax of the nucleus
 * exactly, and with the usual top-p (0.9 and up) the first draw is taken
 * nineteen times in twenty. */
static loom_status sample_vocabulary(loom_sampler *s, const logit_row *row, loom_token *out)
{
	const loom_sampler_params *p = &s->params;
	loom_token first;
	float max = logit_row_max(row, &first);
	if (first < 0)
		return nothing_to_sample();
	if (max == INFINITY)
		return infinite_logit();
	*out = first;
	if (p->top_p <= 0)
		return LOOM_OK;
	if (!grow((void **)&s->block_sum, &s->cap_blocks, logit_blocks(row->n), sizeof(float)))
		return out_of_memory();
	const float inv_t = 1.0f / p->temperature;
	logit_bound keep = logit_bound_all();
	if (p->min_p > 0) /* the largest logit always stays */
		keep.lo = p->min_p < 1 ? max + (float)log(p->min_p) : max;
	double w = logit_row_weights(row, max, inv_t, &keep, s->block_sum);
	double z1 = 0; /* the untempered mass of every token, which top-p is a share of */
	if (p->top_p < 1.0f) {
		logit_bound all = logit_bound_all();
		z1 = inv_t == 1.0f && p->min_p <= 0 ? w : logit_row_weights(row, max, 1.0f, &all, NULL);
	}
	for (;;) {
		loom_token t = logit_row_draw(row, max, inv_t, &keep, s->block_sum, next_uniform(s) * w);
		if (t < 0)
			return nothing_to_sample();
		*out = t;
		if (p->top_p >= 1.0f || t == first)
			return LOOM_OK;
		float xt = logit_row_at(row, t);
		logit_bound before = {.lo = -INFINITY, .hi = xt, .hi_id = t};
		if (logit_row_weights(row, max, 1.0f, &before, NULL) < (double)p->top_p * z1)
			return LOOM_OK;
		keep.hi = xt; /* only tokens ranked before t can be in the nucleus */
		keep.hi_id = t;
		w = logit_row_weights(row, max, inv_t, &keep, s->block_sum);
	}
}

/* A draw under the sampling rules alone. */
static loom_status draw(loom_sampler *s, const float *logits, int32_t n_vocab, const loom_token *banned,
			size_t n_banned, loom_token *out)
{
	*out = -1;
	if (s == NULL || logits == NULL || n_vocab <= 0)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT,
				  "loom_sampler_sample: a sampler, logits and n_vocab > 0 are required");
	logit_row row;
	if (!make_patches(s, logits, n_vocab, banned, n_banned, &row))
		return out_of_memory();
	const loom_sampler_params *p = &s->params;
	if (p->temperature <= 0) {
		logit_row_max(&row, out);
		return *out >= 0 ? LOOM_OK : nothing_to_sample();
	}
	if (p->top_k > 0 && p->top_k < n_vocab)
		return sample_candidates(s, &row, p->top_k, out);
	return sample_vocabulary(s, &row, out);
}

loom_status sampler_draw(loom_sampler *s, const float *logits, int32_t n_vocab, const loom_token *banned,
			 size_t n_banned, loom_token *out)
{
	loom_status st = draw(s, logits, n_vocab, banned, n_banned, out);
	if (s == NULL || s->grammar == NULL || (st != LOOM_OK && st != LOOM_ERR_INVALID_ARGUMENT))
		return st;
	bool allowed = false;
	if (st == LOOM_OK && (st = loom_grammar_follow_check(s->grammar, *out, &allowed)) != LOOM_OK)
		return st;
	if (allowed)
		return LOOM_OK;
	/* Refused (or nothing drawn): again, among what the grammar allows. */
	const float *masked;
	if ((st = loom_grammar_follow_mask(s->grammar, logits, n_vocab, &masked)) != LOOM_OK)
		return st;
	if ((st = draw(s, masked, n_vocab, banned, n_banned, out)) != LOOM_OK)
		return st == LOOM_ERR_INVALID_ARGUMENT
			       ? loom_error(st, "the grammar allows no token that can be sampled here")
			       : st;
	return loom_grammar_follow_check(s->grammar, *out, &allowed);
}

loom_status loom_sampler_set_grammar(loom_sampler *s, const loom_model *model, const loom_grammar *g)
{
	if (s == NULL || (g != NULL && model == NULL))
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_sampler_set_grammar: a sampler, and a model for a grammar");
	loom_grammar_follow *f = NULL;
	if (g != NULL) {
		loom_status st = loom_grammar_follow_create(model, g, &f);
		if (st != LOOM_OK)
			return st;
	}
	loom_grammar_follow_free(s->grammar);
	s->grammar = f;
	return LOOM_OK;
}

loom_status loom_sampler_set_logit_bias(loom_sampler *s, const loom_token *tokens, const float *bias, size_t n)
{
	if (s == NULL || (n > 0 && (tokens == NULL || bias == NULL)))
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_sampler_set_logit_bias: a sampler, and tokens and biases");
	for (size_t i = 0; i < n; i++)
		if (tokens[i] < 0 || !isfinite(bias[i]))
			return loom_error(LOOM_ERR_INVALID_ARGUMENT, "logit bias %zu: token %d, bias %g", i, tokens[i],
					  (double)bias[i]);
	logit_patch *p = n > 0 ? malloc(n * sizeof(*p)) : NULL;
	if (n > 0 && p == NULL)
		return out_of_memory();
	/* One entry a token: a repeated token's biases add up. */
	int32_t m = 0;
	for (size_t i = 0; i < n; i++) {
		int32_t k = 0;
		while (k < m && p[k].id != tokens[i])
			k++;
		if (k == m)
			p[m++] = (logit_patch){.id = tokens[i], .logit = 0.0f};
		p[k].logit += bias[i];
	}
	free(s->bias);
	s->bias = p;
	s->n_bias = m;
	return LOOM_OK;
}

loom_token loom_sampler_sample(loom_sampler *s, const float *logits, int32_t n_vocab)
{
	loom_token t;
	return sampler_draw(s, logits, n_vocab, NULL, 0, &t) == LOOM_OK ? t : -1;
}
