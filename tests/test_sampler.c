/* test_sampler.c - the sampler: greedy, top-k, top-p, min-p, temperature,
 * repetition, frequency and presence penalties and the seeded draw, on
 * hand-made logits; then as a distribution: over many draws from rows of a
 * few thousand random logits, the frequencies against a plain sort-based
 * reference of the same rules (every token it drops never drawn, the rest
 * drawn as its tempered softmax says). */
#include "check_main.h"

#include "infer/sampler.h"

#include <loom.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static loom_sampler *make(float temp, int top_k, float top_p, float min_p, float penalty, uint64_t seed)
{
	loom_sampler_params p = loom_sampler_default_params();
	loom_sampler *s = NULL;
	p.temperature = temp;
	p.top_k = top_k;
	p.top_p = top_p;
	p.min_p = min_p;
	p.repeat_penalty = penalty;
	p.seed = seed;
	ck_assert_msg(loom_sampler_create(&p, &s) == LOOM_OK, "%s", loom_last_error());
	return s;
}

/* Draws n tokens and counts how often each id came up. */
static void histogram(loom_sampler *s, const float *logits, int n_vocab, int n, int *counts)
{
	for (int i = 0; i < n_vocab; i++)
		counts[i] = 0;
	for (int i = 0; i < n; i++) {
		loom_token t = loom_sampler_sample(s, logits, n_vocab);
		ck_assert_msg(t >= 0 && t < n_vocab, "token %d out of range", t);
		counts[t]++;
	}
}

START_TEST(greedy_takes_argmax_lowest_id_on_ties)
{
	const float logits[] = {0.5f, 2.0f, -1.0f, 2.0f};
	loom_sampler *s = make(0, 40, 0.95f, 0.05f, 1.0f, 1);
	ck_assert_int_eq(loom_sampler_sample(s, logits, 4), 1);
	loom_sampler_free(s);
}
END_TEST

START_TEST(draws_follow_the_softmax)
{
	/* p = 1/4, 3/4 */
	const float logits[] = {0.0f, logf(3.0f)};
	int counts[2];
	loom_sampler *s = make(1.0f, 0, 1.0f, 0.0f, 1.0f, 42);
	histogram(s, logits, 2, 20000, counts);
	double f = counts[1] / 20000.0;
	ck_assert_msg(fabs(f - 0.75) < 0.02, "token 1 drawn %.3f of the time, expected 0.75", f);
	loom_sampler_free(s);
}
END_TEST

START_TEST(temperature_sharpens_and_flattens)
{
	const float logits[] = {0.0f, logf(3.0f)};
	int counts[2];
	loom_sampler *s = make(0.5f, 0, 1.0f, 0.0f, 1.0f, 42);
	histogram(s, logits, 2, 20000, counts); /* p1 = 9/10 at T = 0.5 */
	ck_assert_msg(fabs(counts[1] / 20000.0 - 0.9) < 0.02, "T=0.5: %.3f, expected 0.9", counts[1] / 20000.0);
	loom_sampler_free(s);
	s = make(2.0f, 0, 1.0f, 0.0f, 1.0f, 42);
	histogram(s, logits, 2, 20000, counts); /* p1 = sqrt3/(1+sqrt3) at T = 2 */
	double want = sqrt(3.0) / (1 + sqrt(3.0));
	ck_assert_msg(fabs(counts[1] / 20000.0 - want) < 0.02, "T=2: %.3f, expected %.3f", counts[1] / 20000.0, want);
	loom_sampler_free(s);
}
END_TEST

START_TEST(top_k_top_p_min_p_cut_the_tail)
{
	/* p = 0.5, 0.3, 0.15, 0.05 */
	const float logits[] = {logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f)};
	int counts[4];
	loom_sampler *s = make(1.0f, 2, 1.0f, 0.0f, 1.0f, 3);
	histogram(s, logits, 4, 5000, counts);
	ck_assert_msg(counts[2] == 0 && counts[3] == 0 && counts[0] > 0 && counts[1] > 0, "top-k 2: %d %d %d %d",
		      counts[0], counts[1], counts[2], counts[3]);
	loom_sampler_free(s);
	s = make(1.0f, 0, 0.85f, 0.0f, 1.0f, 3); /* 0.5 + 0.3 < 0.85 <= 0.95 */
	histogram(s, logits, 4, 5000, counts);
	ck_assert_msg(counts[2] > 0 && counts[3] == 0, "top-p 0.85: %d %d %d %d", counts[0], counts[1], counts[2],
		      counts[3]);
	loom_sampler_free(s);
	s = make(1.0f, 0, 1.0f, 0.5f, 1.0f, 3); /* keeps p >= 0.25 */
	histogram(s, logits, 4, 5000, counts);
	ck_assert_msg(counts[1] > 0 && counts[2] == 0 && counts[3] == 0, "min-p 0.5: %d %d %d %d", counts[0],
		      counts[1], counts[2], counts[3]);
	loom_sampler_free(s);
}
END_TEST

START_TEST(repetition_penalty_demotes_seen_tokens)
{
	const float pos[] = {2.0f, 1.9f}, neg[] = {-1.0f, -1.2f};
	loom_sampler *s = make(0, 0, 1.0f, 0.0f, 1.5f, 0);
	ck_assert_int_eq(loom_sampler_sample(s, pos, 2), 0);
	loom_sampler_accept(s, 0);
	ck_assert_int_eq(loom_sampler_sample(s, pos, 2), 1); /* 2.0 / 1.5 < 1.9 */
	ck_assert_int_eq(loom_sampler_sample(s, neg, 2), 1); /* -1.0 * 1.5 < -1.2 */
	loom_sampler_reset(s);
	ck_assert_int_eq(loom_sampler_sample(s, pos, 2), 0);
	loom_sampler_free(s);
}
END_TEST

/* A sampler with the repeat, frequency and presence penalties over the
 * last last_n tokens; greedy unless temp > 0 (then top-k 1). */
static loom_sampler *make_penalised(float temp, float repeat, float frequency, float presence, int last_n)
{
	loom_sampler_params p = loom_sampler_default_params();
	loom_sampler *s = NULL;
	p.temperature = temp;
	p.top_k = 1;
	p.repeat_penalty = repeat;
	p.frequency_penalty = frequency;
	p.presence_penalty = presence;
	p.repeat_last_n = last_n;
	ck_assert_msg(loom_sampler_create(&p, &s) == LOOM_OK, "%s", loom_last_error());
	return s;
}

static void accept_n(loom_sampler *s, loom_token token, int n)
{
	for (int i = 0; i < n; i++)
		loom_sampler_accept(s, token);
}

/* Token 0 at 2.0, seen three times, loses 3 * 0.25 + 0.5: 0.75, which
 * still wins a tie (lowest id) against 0.75 and loses to 0.875. Every
 * value is exact in binary. */
START_TEST(frequency_and_presence_penalties_subtract_exactly)
{
	const float tie[] = {2.0f, 0.75f}, above[] = {2.0f, 0.875f};
	loom_sampler *s = make_penalised(0, 1.0f, 0.25f, 0.5f, 64);
	ck_assert_int_eq(loom_sampler_sample(s, above, 2), 0);
	accept_n(s, 0, 3);
	ck_assert_int_eq(loom_sampler_sample(s, tie, 2), 0);
	ck_assert_int_eq(loom_sampler_sample(s, above, 2), 1);
	loom_sampler_reset(s);
	ck_assert_int_eq(loom_sampler_sample(s, above, 2), 0);
	loom_sampler_free(s);

	/* Frequency alone grows with the count: 2.0 - 3 * 0.375 = 0.875 ties,
	 * a fourth sighting makes 0.5. */
	s = make_penalised(0, 1.0f, 0.375f, 0.0f, 64);
	accept_n(s, 0, 3);
	ck_assert_int_eq(loom_sampler_sample(s, above, 2), 0);
	loom_sampler_accept(s, 0);
	ck_assert_int_eq(loom_sampler_sample(s, above, 2), 1);
	loom_sampler_free(s);

	/* Presence alone does not: 2.0 - 1.125 = 0.875 ties after one
	 * sighting and after ten; 1.25 makes 0.75. */
	s = make_penalised(0, 1.0f, 0.0f, 1.125f, 64);
	loom_sampler_accept(s, 0);
	ck_assert_int_eq(loom_sampler_sample(s, above, 2), 0);
	accept_n(s, 0, 9);
	ck_assert_int_eq(loom_sampler_sample(s, above, 2), 0);
	loom_sampler_free(s);
	s = make_penalised(0, 1.0f, 0.0f, 1.25f, 64);
	loom_sampler_accept(s, 0);
	ck_assert_int_eq(loom_sampler_sample(s, above, 2), 1);
	loom_sampler_free(s);

	/* Negative penalties favour seen tokens: 0.5 + 2 * 0.5 + 0.5 = 2.0
	 * ties with token 0, 0.625 + 1.5 = 2.125 beats it. */
	const float low[] = {2.0f, 0.5f}, higher[] = {2.0f, 0.625f};
	s = make_penalised(0, 1.0f, -0.5f, -0.5f, 64);
	accept_n(s, 1, 2);
	ck_assert_int_eq(loom_sampler_sample(s, low, 2), 0);
	ck_assert_int_eq(loom_sampler_sample(s, higher, 2), 1);
	loom_sampler_free(s);
}
END_TEST

/* A logit bias adds to the logit after the penalties: 0.5 + 1.5 ties
 * with 2.0 (the lower id wins), 1.625 beats it; -100 all but bans; two
 * entries for one token add up; a token past the row is left alone; an
 * empty list removes them. At a temperature the draw follows the biased
 * softmax: ln 3 on one of two equal tokens draws it 3/4 of the time. */
START_TEST(logit_bias_adds_after_the_penalties)
{
	const float row[] = {2.0f, 0.5f, 1.0f};
	loom_sampler *s = make(0, 40, 0.95f, 0.05f, 1.0f, 1);
	loom_token t1 = 1, t2[2] = {1, 1}, far = 9;
	float b15 = 1.5f, b1625[2] = {1.0f, 0.625f}, ban = -100.0f;
	ck_assert_int_eq(loom_sampler_set_logit_bias(s, &t1, &b15, 1), LOOM_OK);
	ck_assert_int_eq(loom_sampler_sample(s, row, 3), 0);
	ck_assert_int_eq(loom_sampler_set_logit_bias(s, t2, b1625, 2), LOOM_OK);
	ck_assert_int_eq(loom_sampler_sample(s, row, 3), 1);
	ck_assert_int_eq(loom_sampler_set_logit_bias(s, &far, &b15, 1), LOOM_OK);
	ck_assert_int_eq(loom_sampler_sample(s, row, 3), 0);
	loom_token t0 = 0;
	ck_assert_int_eq(loom_sampler_set_logit_bias(s, &t0, &ban, 1), LOOM_OK);
	ck_assert_int_eq(loom_sampler_sample(s, row, 3), 2);
	ck_assert_int_eq(loom_sampler_set_logit_bias(s, NULL, NULL, 0), LOOM_OK);
	ck_assert_int_eq(loom_sampler_sample(s, row, 3), 0);
	float inf = INFINITY;
	ck_assert_int_eq(loom_sampler_set_logit_bias(s, &t0, &inf, 1), LOOM_ERR_INVALID_ARGUMENT);
	loom_sampler_free(s);
	/* After a repeat penalty of 2: 2.0 / 2 + 0.5 = 1.5 beats token 2's
	 * 1.0; with the bias on token 2 instead (a new list replaces the
	 * old), 2.0 / 2 loses to 1.0 + 0.75. */
	s = make(0, 40, 0.95f, 0.05f, 2.0f, 1);
	loom_sampler_accept(s, 0);
	float b05 = 0.5f, b075 = 0.75f;
	loom_token two = 2;
	ck_assert_int_eq(loom_sampler_set_logit_bias(s, &t0, &b05, 1), LOOM_OK);
	ck_assert_int_eq(loom_sampler_sample(s, row, 3), 0);
	ck_assert_int_eq(loom_sampler_set_logit_bias(s, &two, &b075, 1), LOOM_OK);
	ck_assert_int_eq(loom_sampler_sample(s, row, 3), 2);
	loom_sampler_free(s);
	const float even[] = {0.0f, 0.0f};
	float ln3 = logf(3.0f);
	int counts[2];
	s = make(1.0f, 0, 1.0f, 0.0f, 1.0f, 7);
	ck_assert_int_eq(loom_sampler_set_logit_bias(s, &t1, &ln3, 1), LOOM_OK);
	histogram(s, even, 2, 20000, counts);
	ck_assert_msg(fabs(counts[1] / 20000.0 - 0.75) < 0.02, "biased token drawn %.3f", counts[1] / 20000.0);
	loom_sampler_free(s);
}
END_TEST

/* The repeat penalty scales first, then the others subtract: 2.0 / 2 -
 * (0.25 + 0.5) = 0.25 and -1.0 * 2 - 0.75 = -2.75 (the other order would
 * give 0.625 and -3.5). Sampling at a temperature sees the same logits. */
START_TEST(penalties_follow_the_repeat_penalty)
{
	const float pos_tie[] = {2.0f, 0.25f}, pos_above[] = {2.0f, 0.375f};
	const float neg_tie[] = {-1.0f, -2.75f}, neg_above[] = {-1.0f, -2.625f};
	for (int greedy = 0; greedy < 2; greedy++) {
		loom_sampler *s = make_penalised(greedy ? 0.0f : 1.0f, 2.0f, 0.25f, 0.5f, 64);
		loom_sampler_accept(s, 0);
		ck_assert_int_eq(loom_sampler_sample(s, pos_tie, 2), 0);
		ck_assert_int_eq(loom_sampler_sample(s, pos_above, 2), 1);
		ck_assert_int_eq(loom_sampler_sample(s, neg_tie, 2), 0);
		ck_assert_int_eq(loom_sampler_sample(s, neg_above, 2), 1);
		loom_sampler_free(s);
	}
}
END_TEST

/* Only the last repeat_last_n accepted tokens count; 0 turns every
 * penalty off. Ids outside the vocabulary are ignored. */
START_TEST(penalties_look_back_repeat_last_n)
{
	const float logits[] = {2.0f, 1.0f, 1.25f};
	loom_sampler *s = make_penalised(0, 1.0f, 0.5f, 0.0f, 3);
	accept_n(s, 0, 3);
	ck_assert_int_eq(loom_sampler_sample(s, logits, 3), 2); /* 0 0 0: 2.0 - 1.5 < 1.25 */
	loom_sampler_accept(s, 1);
	ck_assert_int_eq(loom_sampler_sample(s, logits, 3), 2); /* 0 0 1: 1.0, 0.5, 1.25 */
	loom_sampler_accept(s, 7);
	ck_assert_int_eq(loom_sampler_sample(s, logits, 3), 0); /* 0 1 7: 1.5, 0.5, 1.25 */
	loom_sampler_free(s);
	s = make_penalised(0, 1.0f, 0.5f, 0.0f, 0);
	accept_n(s, 0, 3);
	ck_assert_int_eq(loom_sampler_sample(s, logits, 3), 0);
	loom_sampler_free(s);
}
END_TEST

START_TEST(same_seed_same_draws)
{
	float logits[64];
	for (int i = 0; i < 64; i++)
		logits[i] = sinf((float)i);
	loom_sampler *a = make(1.0f, 0, 1.0f, 0.0f, 1.0f, 99), *b = make(1.0f, 0, 1.0f, 0.0f, 1.0f, 99);
	loom_sampler *c = make(1.0f, 0, 1.0f, 0.0f, 1.0f, 100);
	int same = 0;
	for (int i = 0; i < 200; i++) {
		loom_token ta = loom_sampler_sample(a, logits, 64);
		ck_assert_int_eq(ta, loom_sampler_sample(b, logits, 64));
		same += ta == loom_sampler_sample(c, logits, 64);
	}
	ck_assert_msg(same < 100, "seeds 99 and 100 agree on %d of 200 draws", same);
	loom_sampler_free(a);
	loom_sampler_free(b);
	loom_sampler_free(c);
}
END_TEST

START_TEST(bad_parameters_are_refused)
{
	loom_sampler_params p = loom_sampler_default_params();
	loom_sampler *s = (loom_sampler *)1;
	p.repeat_penalty = 0;
	ck_assert_int_eq(loom_sampler_create(&p, &s), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_ptr_null(s);
	p = loom_sampler_default_params();
	p.temperature = NAN;
	ck_assert_int_eq(loom_sampler_create(&p, &s), LOOM_ERR_INVALID_ARGUMENT);
	/* Presence and frequency penalties lie in [-2, 2]. */
	const float bad[] = {2.001f, -2.5f, NAN, INFINITY};
	for (int which = 0; which < 2; which++) {
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			p = loom_sampler_default_params();
			*(which ? &p.frequency_penalty : &p.presence_penalty) = bad[i];
			ck_assert_msg(loom_sampler_create(&p, &s) == LOOM_ERR_INVALID_ARGUMENT, "%s %g accepted",
				      which ? "frequency" : "presence", bad[i]);
			ck_assert_msg(strstr(loom_last_error(), "[-2, 2]") != NULL, "%s", loom_last_error());
		}
		p = loom_sampler_default_params();
		p.presence_penalty = which ? 2.0f : -2.0f;
		p.frequency_penalty = which ? -2.0f : 2.0f;
		ck_assert_msg(loom_sampler_create(&p, &s) == LOOM_OK, "%s", loom_last_error());
		loom_sampler_free(s);
	}
	loom_sampler_free(NULL);
}
END_TEST


/* ---- the sampler as a distribution, against a sort-based reference ---- */

typedef struct ref_token {
	loom_token id;
	float logit;
} ref_token;

static int ref_by_rank(const void *a, const void *b)
{
	const ref_token *x = a, *y = b;
	if (x->logit != y->logit)
		return x->logit > y->logit ? -1 : 1;
	return (x->id > y->id) - (x->id < y->id);
}

/* The probability of every token under p's rules, by the book: penalise
 * the history's tokens, ban, sort everything, cut top-k, top-p (the
 * untempered mass ranked before a token, of what top-k kept, below top_p
 * of it), min-p (logit >= the largest + ln min_p), then the tempered
 * softmax of what is left. */
static void reference_probs(const float *logits, int32_t n, const loom_sampler_params *p, const loom_token *hist,
			    int n_hist, const loom_token *banned, int n_banned, double *prob)
{
	float *x = malloc((size_t)n * sizeof(float));
	int *count = calloc((size_t)n, sizeof(int));
	ref_token *order = malloc((size_t)n * sizeof(ref_token));
	memcpy(x, logits, (size_t)n * sizeof(float));
	for (int h = n_hist > p->repeat_last_n ? n_hist - p->repeat_last_n : 0; h < n_hist; h++)
		count[hist[h]]++;
	for (int32_t i = 0; i < n; i++)
		if (count[i] > 0) {
			x[i] = x[i] > 0 ? x[i] / p->repeat_penalty : x[i] * p->repeat_penalty;
			x[i] -= (float)count[i] * p->frequency_penalty + p->presence_penalty;
		}
	for (int b = 0; b < n_banned; b++)
		x[banned[b]] = -INFINITY;
	int32_t m = 0;
	for (int32_t i = 0; i < n; i++)
		if (x[i] > -INFINITY)
			order[m++] = (ref_token){i, x[i]};
	qsort(order, (size_t)m, sizeof(*order), ref_by_rank);
	if (p->top_k > 0 && p->top_k < m)
		m = p->top_k;
	if (p->top_p < 1) {
		double z = 0, before = 0;
		for (int32_t i = 0; i < m; i++)
			z += exp((double)order[i].logit - order[0].logit);
		int32_t keep = 1;
		for (before = 1; keep < m && before < p->top_p * z; keep++)
			before += exp((double)order[keep].logit - order[0].logit);
		m = keep;
	}
	if (p->min_p > 0) {
		float floor = p->min_p < 1 ? order[0].logit + (float)log(p->min_p) : order[0].logit;
		int32_t keep = 1;
		while (keep < m && order[keep].logit >= floor)
			keep++;
		m = keep;
	}
	double z = 0;
	for (int32_t i = 0; i < n; i++)
		prob[i] = 0;
	for (int32_t i = 0; i < m; i++)
		z += exp(((double)order[i].logit - order[0].logit) / p->temperature);
	for (int32_t i = 0; i < m; i++)
		prob[order[i].id] = exp(((double)order[i].logit - order[0].logit) / p->temperature) / z;
	free(x);
	free(count);
	free(order);
}

/* n random logits: a bulk N(0, 1.5^2) and every 50th token lifted by 4,
 * so that the head holds a few dozen tokens spread over the blocks. */
static float *random_logits(int32_t n, uint64_t seed)
{
	float *x = malloc((size_t)n * sizeof(float));
	uint64_t st = seed * 0x9e3779b97f4a7c15ull + 3;
	for (int32_t i = 0; i < n; i++) {
		double u = 0;
		for (int k = 0; k < 4; k++) {
			st ^= st << 13;
			st ^= st >> 7;
			st ^= st << 17;
			u += (double)(st >> 11) * 0x1.0p-53;
		}
		x[i] = (float)((u - 2.0) * 1.5 * 1.73) + (i % 50 == 7 ? 4.0f : 0.0f);
	}
	return x;
}

/* The untempered share of the head (rank order) that lies between two
 * tokens' cumulative masses: a top_p half-way between, so that rounding
 * cannot move the cut. */
static float top_p_between(const float *logits, int32_t n, double share)
{
	ref_token *o = malloc((size_t)n * sizeof(*o));
	for (int32_t i = 0; i < n; i++)
		o[i] = (ref_token){i, logits[i]};
	qsort(o, (size_t)n, sizeof(*o), ref_by_rank);
	double z = 0, cum = 0;
	for (int32_t i = 0; i < n; i++)
		z += exp((double)o[i].logit - o[0].logit);
	float p = 1;
	for (int32_t i = 0; i < n; i++) {
		double next = cum + exp((double)o[i].logit - o[0].logit);
		if (next / z >= share) {
			p = (float)((cum + next) / 2 / z);
			break;
		}
		cum = next;
	}
	free(o);
	return p;
}

/* min_p whose floor falls half-way between the logits around max - gap. */
static float min_p_between(const float *logits, int32_t n, float gap)
{
	float max = -INFINITY, below = -INFINITY, above = INFINITY;
	for (int32_t i = 0; i < n; i++)
		max = logits[i] > max ? logits[i] : max;
	for (int32_t i = 0; i < n; i++) {
		float d = logits[i] - max;
		if (d < -gap && d > below)
			below = d;
		if (d >= -gap && d < above)
			above = d;
	}
	return (float)exp((below + above) / 2);
}

/* Draws n_draws tokens with s (through the banned list, if any) and holds
 * the counts against the reference: no token it gives 0 is drawn, and
 * Pearson's chi-square over the rest (tokens expected fewer than 5 times
 * pooled) stays within 6 standard deviations of its degrees of freedom.
 * Returns the number of tokens the reference keeps. */
static int32_t check_distribution(const char *what, loom_sampler *s, const loom_sampler_params *p,
				  const float *logits, int32_t n, const loom_token *hist, int n_hist,
				  const loom_token *banned, int n_banned, int n_draws)
{
	double *prob = malloc((size_t)n * sizeof(double));
	int *count = calloc((size_t)n, sizeof(int));
	reference_probs(logits, n, p, hist, n_hist, banned, n_banned, prob);
	for (int i = 0; i < n_draws; i++) {
		loom_token t;
		ck_assert_msg(sampler_draw(s, logits, n, banned, (size_t)n_banned, &t) == LOOM_OK && t >= 0 && t < n,
			      "%s: token %d (%s)", what, t, loom_last_error());
		count[t]++;
	}
	double chi2 = 0, pooled_e = 0, pooled_o = 0;
	int32_t kept = 0, df = -1;
	for (int32_t i = 0; i < n; i++) {
		if (prob[i] == 0) {
			ck_assert_msg(count[i] == 0, "%s: token %d is outside what the rules keep, drawn %d times", what, i,
				      count[i]);
			continue;
		}
		kept++;
		double e = prob[i] * n_draws;
		if (e < 5) {
			pooled_e += e;
			pooled_o += count[i];
			continue;
		}
		chi2 += (count[i] - e) * (count[i] - e) / e;
		df++;
	}
	if (pooled_e > 0) {
		chi2 += (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e;
		df++;
	}
	if (df > 0)
		ck_assert_msg(chi2 < df + 6 * sqrt(2.0 * df), "%s: chi-square %.1f over %d degrees of freedom", what, chi2,
			      df);
	free(prob);
	free(count);
	return kept;
}

static loom_sampler *sampler_of(const loom_sampler_params *p)
{
	loom_sampler *s = NULL;
	ck_assert_msg(loom_sampler_create(p, &s) == LOOM_OK, "%s", loom_last_error());
	return s;
}

START_TEST(draws_match_the_reference_in_every_mode)
{
	const int32_t n = 3001;
	float *x = random_logits(n, 5);
	struct {
		const char *name;
		float temperature;
		int32_t top_k;
		double top_p_share; /* 1: off */
		float min_p_gap;    /* 0: off */
		int32_t least_kept; /* what the mode is meant to keep at least */
	} modes[] = {
		{"temperature 1", 1.0f, 0, 1, 0, 3001},
		{"temperature 0.6", 0.6f, 0, 1, 0, 3001},
		{"temperature 1.5, min-p", 1.5f, 0, 1, 5.0f, 50},
		{"top-p 0.9, temperature 0.7", 0.7f, 0, 0.9, 0, 100},
		{"top-p 0.3 (many redraws)", 1.0f, 0, 0.3, 0, 3},
		{"top-p 0.8 and min-p", 1.2f, 0, 0.8, 3.0f, 10},
		{"top-k 50", 1.0f, 50, 1, 0, 50},
		{"top-k 500, top-p, min-p, temperature 0.8", 0.8f, 500, 0.85, 4.0f, 20},
	};
	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		loom_sampler_params p = loom_sampler_default_params();
		p.temperature = modes[m].temperature;
		p.top_k = modes[m].top_k;
		p.top_p = modes[m].top_p_share < 1 ? top_p_between(x, n, modes[m].top_p_share) : 1.0f;
		p.min_p = modes[m].min_p_gap > 0 ? min_p_between(x, n, modes[m].min_p_gap) : 0.0f;
		p.seed = 1000 + m;
		loom_sampler *s = sampler_of(&p);
		int32_t kept = check_distribution(modes[m].name, s, &p, x, n, NULL, 0, NULL, 0, 40000);
		ck_assert_msg(kept >= modes[m].least_kept, "%s keeps only %d tokens: the test means to keep %d", modes[m].name,
			      kept, modes[m].least_kept);
		loom_sampler_free(s);
	}
	free(x);
}
END_TEST

/* The penalties move only the history's tokens, on the full-vocabulary
 * path and on top-k's; banned tokens (a generator's ignore_eos) are never
 * drawn, the most likely one included. */
START_TEST(penalties_and_bans_as_the_reference_says)
{
	const int32_t n = 2500;
	float *x = random_logits(n, 9);
	loom_token hist[40];
	for (int h = 0; h < 40; h++)
		hist[h] = (loom_token)((h * 50 + 7) % n); /* lifted tokens, some twice */
	loom_token banned[] = {57, 7, 1207};
	for (int with_k = 0; with_k < 2; with_k++) {
		loom_sampler_params p = loom_sampler_default_params();
		p.temperature = 0.9f;
		p.top_k = with_k ? 60 : 0;
		p.top_p = 0.97f;
		p.min_p = 0;
		p.repeat_penalty = 1.3f;
		p.frequency_penalty = 0.4f;
		p.presence_penalty = 0.3f;
		p.repeat_last_n = 32;
		p.seed = 77;
		loom_sampler *s = sampler_of(&p);
		for (int h = 0; h < 40; h++)
			loom_sampler_accept(s, hist[h]);
		check_distribution(with_k ? "penalties, top-k" : "penalties", s, &p, x, n, hist, 40, NULL, 0, 60000);
		check_distribution(with_k ? "penalties and bans, top-k" : "penalties and bans", s, &p, x, n, hist, 40,
				   banned, 3, 60000);
		loom_sampler_free(s);
	}
	free(x);
}
END_TEST

/* A row at a real vocabulary's size: top-k's tokens are the sorted
 * prefix's, and the plain draw never leaves what min-p keeps. */
START_TEST(real_vocabulary_rows)
{
	const int32_t n = 151936;
	float *x = random_logits(n, 13);
	loom_sampler_params p = loom_sampler_default_params();
	p.temperature = 1.0f;
	p.top_k = 40;
	p.top_p = 1.0f;
	p.min_p = 0.0f;
	loom_sampler *s = sampler_of(&p);
	check_distribution("top-k 40 of 151936", s, &p, x, n, NULL, 0, NULL, 0, 5000);
	loom_sampler_free(s);
	p.top_k = 0;
	p.min_p = min_p_between(x, n, 1.0f);
	s = sampler_of(&p);
	check_distribution("min-p of 151936", s, &p, x, n, NULL, 0, NULL, 0, 5000);
	loom_sampler_free(s);
	free(x);
}
END_TEST

/* Rows with nothing to draw are an error that says so; NaN logits are
 * never drawn; a +inf logit is refused. */
START_TEST(rows_without_a_usable_logit)
{
	float none[5] = {-INFINITY, NAN, -INFINITY, NAN, -INFINITY};
	float some[5] = {NAN, 1.0f, NAN, 2.0f, -INFINITY};
	float inf[3] = {0.0f, INFINITY, 1.0f};
	for (int mode = 0; mode < 3; mode++) {
		loom_sampler_params p = loom_sampler_default_params();
		p.temperature = mode == 0 ? 0.0f : 1.0f;
		p.top_k = mode == 1 ? 2 : 0;
		p.top_p = 1.0f;
		p.min_p = 0.0f;
		loom_sampler *s = sampler_of(&p);
		ck_assert_int_eq(loom_sampler_sample(s, none, 5), -1);
		ck_assert_msg(strstr(loom_last_error(), "nothing to sample") != NULL, "%s", loom_last_error());
		for (int i = 0; i < 200; i++) {
			loom_token t = loom_sampler_sample(s, some, 5);
			ck_assert_msg(t == 1 || t == 3, "mode %d drew %d", mode, t);
		}
		if (mode > 0) {
			ck_assert_int_eq(loom_sampler_sample(s, inf, 3), -1);
			ck_assert_msg(strstr(loom_last_error(), "+inf") != NULL, "%s", loom_last_error());
		}
		loom_sampler_free(s);
	}
}
END_TEST

/* min-p keeps at least the most likely token, on either path, whatever
 * its value. */
START_TEST(min_p_keeps_the_most_likely)
{
	const float logits[] = {0.5f, 2.0f, 1.9f, -1.0f, 2.0f};
	for (int with_k = 0; with_k < 2; with_k++)
		for (float min_p = 1.0f; min_p <= 4.0f; min_p *= 2) {
			loom_sampler *s = make(1.0f, with_k ? 3 : 0, 1.0f, min_p, 1.0f, 5);
			for (int i = 0; i < 100; i++) {
				loom_token t = loom_sampler_sample(s, logits, 5);
				ck_assert_msg(t == 1 || t == 4, "min-p %g (top-k %d) drew %d: %s", min_p, with_k ? 3 : 0, t,
					      loom_last_error());
			}
			loom_sampler_free(s);
		}
}
END_TEST

static Suite *sampler_suite(void)
{
	Suite *s = suite_create("sampler");
	TCase *tc = tcase_create("sampler");
	tcase_add_test(tc, greedy_takes_argmax_lowest_id_on_ties);
	tcase_add_test(tc, logit_bias_adds_after_the_penalties);
	tcase_add_test(tc, draws_follow_the_softmax);
	tcase_add_test(tc, temperature_sharpens_and_flattens);
	tcase_add_test(tc, top_k_top_p_min_p_cut_the_tail);
	tcase_add_test(tc, repetition_penalty_demotes_seen_tokens);
	tcase_add_test(tc, frequency_and_presence_penalties_subtract_exactly);
	tcase_add_test(tc, penalties_follow_the_repeat_penalty);
	tcase_add_test(tc, penalties_look_back_repeat_last_n);
	tcase_add_test(tc, same_seed_same_draws);
	tcase_add_test(tc, bad_parameters_are_refused);
	tcase_add_test(tc, draws_match_the_reference_in_every_mode);
	tcase_add_test(tc, penalties_and_bans_as_the_reference_says);
	tcase_add_test(tc, real_vocabulary_rows);
	tcase_add_test(tc, rows_without_a_usable_logit);
	tcase_add_test(tc, min_p_keeps_the_most_likely);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(sampler_suite)
