/* test_sampler.c - the sampler: greedy, top-k, top-p, min-p, temperature,
 * repetition, frequency and presence penalties and the seeded draw, on
 * hand-made logits. */
#include "check_main.h"

#include <loom.h>
#include <math.h>
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

static Suite *sampler_suite(void)
{
	Suite *s = suite_create("sampler");
	TCase *tc = tcase_create("sampler");
	tcase_add_test(tc, greedy_takes_argmax_lowest_id_on_ties);
	tcase_add_test(tc, draws_follow_the_softmax);
	tcase_add_test(tc, temperature_sharpens_and_flattens);
	tcase_add_test(tc, top_k_top_p_min_p_cut_the_tail);
	tcase_add_test(tc, repetition_penalty_demotes_seen_tokens);
	tcase_add_test(tc, frequency_and_presence_penalties_subtract_exactly);
	tcase_add_test(tc, penalties_follow_the_repeat_penalty);
	tcase_add_test(tc, penalties_look_back_repeat_last_n);
	tcase_add_test(tc, same_seed_same_draws);
	tcase_add_test(tc, bad_parameters_are_refused);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(sampler_suite)
