/* sampler.c - from logits to a token: repetition, frequency and presence
 * penalties, top-k, top-p, min-p, temperature, then a seeded draw (or
 * greedy). */
#include "loom.h"
#include "runtime/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct loom_sampler {
	loom_sampler_params params;
	uint64_t rng[4];         /* xoshiro256** state */
	loom_token *history;     /* ring of the last repeat_last_n tokens, which every penalty looks at */
	int32_t n_history, history_next;
	/* Scratch for one row of candidates; count: times in the history,
	 * while the penalties are applied. */
	struct candidate { loom_token id; float logit; float p; int32_t count; } *cand;
	int32_t cap;
};

loom_sampler_params loom_sampler_default_params(void)
{
	loom_sampler_params p = {
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
	return p;
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
}

loom_status loom_sampler_create(const loom_sampler_params *params, loom_sampler **out)
{
	loom_sampler_params defaults = loom_sampler_default_params();
	if (out == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_sampler_create: out is NULL");
	*out = NULL;
	if (params == NULL)
		params = &defaults;
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
		if (s->history == NULL) {
			free(s);
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
	free(s->cand);
	free(s);
}

void loom_sampler_accept(loom_sampler *s, loom_token token)
{
	if (s == NULL || s->params.repeat_last_n <= 0)
		return;
	s->history[s->history_next] = token;
	s->history_next = (s->history_next + 1) % s->params.repeat_last_n;
	if (s->n_history < s->params.repeat_last_n)
		s->n_history++;
}

/* Highest logit first; equal logits: lower id first, so greedy picks the
 * lowest id on ties. */
static int by_logit_desc(const void *a, const void *b)
{
	const struct candidate *x = a, *y = b;
	if (x->logit != y->logit)
		return x->logit < y->logit ? 1 : -1;
	return x->id - y->id;
}

/* Penalises each token seen in the history, as llama.cpp does: positive
 * logits are divided by the repeat penalty, negative ones multiplied (once
 * per token, however often seen); then count * frequency_penalty +
 * presence_penalty is subtracted. Runs while cand[i].id == i (unsorted)
 * and every count is 0. */
static void apply_penalties(loom_sampler *s, int32_t n)
{
	const loom_sampler_params *p = &s->params;
	if (p->repeat_penalty == 1.0f && p->frequency_penalty == 0.0f && p->presence_penalty == 0.0f)
		return;
	for (int32_t h = 0; h < s->n_history; h++)
		if (s->history[h] >= 0 && s->history[h] < n)
			s->cand[s->history[h]].count++;
	for (int32_t h = 0; h < s->n_history; h++) {
		loom_token t = s->history[h];
		if (t < 0 || t >= n || s->cand[t].count == 0)
			continue;
		struct candidate *c = &s->cand[t];
		c->logit = c->logit > 0 ? c->logit / p->repeat_penalty : c->logit * p->repeat_penalty;
		c->logit -= (float)c->count * p->frequency_penalty + p->presence_penalty;
		c->count = 0; /* done: later copies of t in the history skip it */
	}
}

/* Softmax over the first n candidates (sorted) at temperature t. */
static void softmax(struct candidate *c, int32_t n, float t)
{
	double sum = 0;
	for (int32_t i = 0; i < n; i++) {
		c[i].p = expf((c[i].logit - c[0].logit) / t);
		sum += c[i].p;
	}
	for (int32_t i = 0; i < n; i++)
		c[i].p = (float)(c[i].p / sum);
}

loom_token loom_sampler_sample(loom_sampler *s, const float *logits, int32_t n_vocab)
{
	if (s == NULL || logits == NULL || n_vocab <= 0)
		return -1;
	if (s->cap < n_vocab) {
		struct candidate *c = realloc(s->cand, (size_t)n_vocab * sizeof(*c));
		if (c == NULL)
			return -1;
		s->cand = c;
		s->cap = n_vocab;
	}
	for (int32_t i = 0; i < n_vocab; i++)
		s->cand[i] = (struct candidate){.id = i, .logit = logits[i]};
	apply_penalties(s, n_vocab);

	const loom_sampler_params *p = &s->params;
	if (p->temperature <= 0) {
		struct candidate *best = &s->cand[0];
		for (int32_t i = 1; i < n_vocab; i++)
			if (s->cand[i].logit > best->logit)
				best = &s->cand[i];
		return best->id;
	}

	int32_t n = n_vocab;
	qsort(s->cand, (size_t)n, sizeof(s->cand[0]), by_logit_desc);
	if (p->top_k > 0 && p->top_k < n)
		n = p->top_k;
	/* top-p and min-p look at the untempered distribution, as llama.cpp's
	 * default chain does; temperature shapes only the final draw. */
	softmax(s->cand, n, 1.0f);
	if (p->top_p < 1.0f) {
		double cum = 0;
		for (int32_t i = 0; i < n; i++) {
			cum += s->cand[i].p;
			if (cum >= p->top_p) {
				n = i + 1;
				break;
			}
		}
	}
	if (p->min_p > 0) {
		float floor_p = s->cand[0].p * p->min_p;
		int32_t keep = 1;
		while (keep < n && s->cand[keep].p >= floor_p)
			keep++;
		n = keep;
	}
	softmax(s->cand, n, p->temperature);
	double r = next_uniform(s), cum = 0;
	for (int32_t i = 0; i < n; i++) {
		cum += s->cand[i].p;
		if (r < cum)
			return s->cand[i].id;
	}
	return s->cand[n - 1].id;
}
